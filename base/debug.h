/*
 * Errors and logging (internal). The function that first sees an error reports it with
 * core_error(), which records the message for mscclpp_last_error() and logs it; callers only
 * propagate the result with the CHECK macros.
 */
#ifndef MSCCLPP_BASE_DEBUG_H
#define MSCCLPP_BASE_DEBUG_H

#include <stdarg.h>
#include <stdbool.h>

#include "mscclpp/mscclpp.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum { LOG_NONE = 0, LOG_WARN = 1, LOG_INFO = 2, LOG_TRACE = 3 } log_level_t;

typedef enum {
    SUBSYS_INIT = 1 << 0,
    SUBSYS_BOOT = 1 << 1,
    SUBSYS_HAL = 1 << 2,
    SUBSYS_MEM = 1 << 3,
    SUBSYS_CHAN = 1 << 4,
    SUBSYS_PLAN = 1 << 5,
    SUBSYS_EXEC = 1 << 6,
    SUBSYS_KERN = 1 << 7,
    SUBSYS_NET = 1 << 8,
    SUBSYS_BENCH = 1 << 9,
    SUBSYS_NCCL = 1 << 10, /* libmscclpp_nccl, through mscclpp_log() */
    SUBSYS_ALL = 0x7ff,
} log_subsys_t;

/** True when a message of this level and subsystem would be printed. */
int log_enabled(log_level_t level, log_subsys_t subsys);
void log_printf(log_level_t level, log_subsys_t subsys, const char *file, int line,
                const char *fmt, ...) __attribute__((format(printf, 5, 6)));

#define LOG_AT(level, subsys, ...)                                                           \
    do {                                                                                     \
        if (log_enabled(level, subsys))                                                      \
            log_printf(level, subsys, __FILE__, __LINE__, __VA_ARGS__);                      \
    } while (0)
#define WARN(subsys, ...) LOG_AT(LOG_WARN, subsys, __VA_ARGS__)
#define INFO(subsys, ...) LOG_AT(LOG_INFO, subsys, __VA_ARGS__)
#define TRACE(subsys, ...) LOG_AT(LOG_TRACE, subsys, __VA_ARGS__)

/**
 * Record `result` with a message for mscclpp_last_error(), log it at WARN and return
 * `result`. "%m" works as in printf for errno (the value at the call).
 */
mscclpp_result_t core_error(mscclpp_result_t result, const char *file, int line, const char *fmt,
                            ...) __attribute__((format(printf, 4, 5)));
/** Same, without logging (for errors the caller expects, e.g. probing). */
mscclpp_result_t core_error_quiet(mscclpp_result_t result, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/** Forget the calling thread's last error (and its culprit). */
void core_clear_error(void);
/** The calling thread's last error and culprit, kept across clean-up that records (and then
 * forgets) errors of its own - closing an endpoint after a failed set-up, say - so that the
 * failed call still returns its own message and blames its own rank. */
typedef struct {
    char msg[1024];
    int culprit;
    bool logged;
} core_error_kept_t;
void core_error_keep(core_error_kept_t *kept);
void core_error_put_back(const core_error_kept_t *kept);
/** Whether the calling thread's last error was logged (core_error outside a quiet thread), not
 * only recorded (core_error_quiet): comm_fail logs one that was not. */
bool core_error_logged(void);
/**
 * The rank the calling thread's last error blames (a peer that closed, sent nothing in time, or
 * whose memory could not be mapped), or -1: set by the code that knows the peer, read where the
 * failure is reported and told to the other ranks (comm_fail, issue 22 item 5).
 */
void core_set_culprit(int rank);
int core_culprit(void);
/** A culprit that is some peer, but not one the failing code can name (a wait for LL packets
 * that no op of this rank's plan says who writes: a made plan keeps only this rank's ops):
 * comm_fail asks the bootstrap for a rank that is gone. Below 0, like "none", for every other
 * reader. */
#define CORE_CULPRIT_UNKNOWN (-2)
/**
 * A thread whose errors another thread reports (a proxy: the launch that needed it reports the
 * transport's failure) records them without logging: the reporting thread logs the error once,
 * with the rank to blame (issue 22 item 5).
 */
void core_set_quiet(bool quiet);

#define ERR(result, ...) core_error((result), __FILE__, __LINE__, __VA_ARGS__)
#define ERR_ARG(...) ERR(MSCCLPP_ERR_INVALID_ARG, __VA_ARGS__)
#define ERR_SYS(...) ERR(MSCCLPP_ERR_SYSTEM, __VA_ARGS__)

/** Return the result of `expr` if it failed. */
#define CHECK(expr)                                 \
    do {                                            \
        mscclpp_result_t check_res_ = (expr);       \
        if (check_res_ != MSCCLPP_OK) return check_res_; \
    } while (0)

/** Store the result of `expr` in `res` and jump to `label` if it failed. */
#define CHECK_GOTO(expr, res, label)            \
    do {                                        \
        (res) = (expr);                         \
        if ((res) != MSCCLPP_OK) goto label;    \
    } while (0)

/** Argument checks that report the argument's name. */
#define CHECK_ARG(cond)                                                              \
    do {                                                                             \
        if (!(cond)) return ERR_ARG("%s: invalid argument (%s)", __func__, #cond);   \
    } while (0)

#ifdef __cplusplus
}
#endif

#endif /* MSCCLPP_BASE_DEBUG_H */
