/*
 * The table of MSCCLPP_* variables (base/config_vars.h) and typed readers. Each variable has one
 * parser here; a value is parsed again only when the environment string changes (tests and
 * tools may setenv between calls). What a bad value does is set per kind in config_vars.h.
 */
#ifndef MSCCLPP_BASE_CONFIG_H
#define MSCCLPP_BASE_CONFIG_H

#include <stddef.h>
#include <stdint.h>

#include "mscclpp/mscclpp.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
#define CONFIG_VAR(name, kind, def, doc) CFG_##name,
#include "base/config_vars.h"
#undef CONFIG_VAR
    CFG__COUNT
} config_id_t;

typedef struct {
    const char *name;
    const char *def;
    const char *doc;
    const char *kind; /* "STR", "SECONDS", ... (config_vars.h) */
} config_entry_t;

/** The whole table, CFG__COUNT entries, in declaration order. */
const config_entry_t *config_table(void);
/** The value in the environment, else the default. Never NULL ("" when unset and no default). */
const char *config_get(config_id_t id);
/** True when the variable is set in the environment (even to ""). */
int config_is_set(config_id_t id);
/** The variable called `name`: 1 and *id, or 0 when the table has none. */
int config_find(const char *name, config_id_t *id);
/**
 * Parsed value of a COUNT, PORT, LEVEL (log_level_t), SUBSYS (mask) or SHAREABLE (0 auto,
 * 1 cumem, 2 legacy) variable: the environment's when valid, else the default's; -1 when
 * neither parses (e.g. unset with no default).
 */
int64_t config_get_int(config_id_t id);
/** MSCCLPP_TIMEOUT in nanoseconds (the default's when the value is bad). */
uint64_t config_timeout_ns(void);
/**
 * The bound of a host wait for work whose own waits are each bounded by MSCCLPP_TIMEOUT (a plan
 * kernel on a stream, a host-backend task): 2 x MSCCLPP_TIMEOUT + 3 s. The work's own timeout,
 * whose error names the op and the peer, must reach the caller first: a kernel's first wait may
 * begin after the host started waiting, and a wait may pass slowly before the one that fails.
 * Only work that never ends meets this bound. (Inline: HAL modules reach config_timeout_ns
 * through the base services table, which has no slot for this.)
 */
static inline uint64_t config_backstop_ns(void) { return 2 * config_timeout_ns() + 3000000000ull; }
/**
 * When the variable is set to a value its kind refuses: 1, with the reason in `why` (naming
 * the variable, the value and what is accepted). Else 0.
 */
int config_invalid(config_id_t id, char *why, size_t cap);
/**
 * Check every variable whose bad value is an error (config_vars.h): MSCCLPP_OK, or
 * MSCCLPP_ERR_INVALID_ARG recorded with the first bad one's reason. Library entry points that
 * start work (backend selection) call it, so a typo fails the first call instead of running
 * with a default the user did not ask for.
 */
mscclpp_result_t config_check(void);
/**
 * MSCCLPP_* variables set in the environment that the table does not declare (a typo, or a
 * variable of another version) and that are not the tools' and tests' own (MSCCLPP_LIBRARY,
 * MSCCLPP_TOP_SRCDIR, ...): calls fn(name, nearest declared name or NULL, ctx) for each, in
 * environment order, and returns how many.
 */
int config_unknown(void (*fn)(const char *name, const char *nearest, void *ctx), void *ctx);
/** WARN once per process about each unknown MSCCLPP_* variable (config_check calls it). */
void config_warn_unknown(void);

/**
 * The value in force, for mscclpp-info: e.g. "30 (set)", "60 (default)", "WARN (default:
 * MSCCLPP_DEBUG=\"bogus\" is ...)", "INVALID: ...". Returns buf.
 */
const char *config_describe(config_id_t id, char *buf, size_t cap);

#ifdef __cplusplus
}
#endif

#endif
