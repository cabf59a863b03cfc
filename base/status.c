/* Result strings and the per-thread last error. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "base/debug.h"

static _Thread_local char last_error[1024];

MSCCLPP_API const char *mscclpp_result_string(mscclpp_result_t result)
{
    switch (result) {
    case MSCCLPP_OK: return "MSCCLPP_OK";
    case MSCCLPP_ERR_INVALID_ARG: return "MSCCLPP_ERR_INVALID_ARG";
    case MSCCLPP_ERR_INVALID_PLAN: return "MSCCLPP_ERR_INVALID_PLAN";
    case MSCCLPP_ERR_UNSUPPORTED: return "MSCCLPP_ERR_UNSUPPORTED";
    case MSCCLPP_ERR_SYSTEM: return "MSCCLPP_ERR_SYSTEM";
    case MSCCLPP_ERR_REMOTE: return "MSCCLPP_ERR_REMOTE";
    case MSCCLPP_ERR_TIMEOUT: return "MSCCLPP_ERR_TIMEOUT";
    case MSCCLPP_ERR_INTERNAL: return "MSCCLPP_ERR_INTERNAL";
    case MSCCLPP_ERR_NO_MEMORY: return "MSCCLPP_ERR_NO_MEMORY";
    case MSCCLPP_ERR_ABORTED: return "MSCCLPP_ERR_ABORTED";
    }
    return "MSCCLPP_ERR_UNKNOWN";
}

MSCCLPP_API const char *mscclpp_last_error(void) { return last_error; }

MSCCLPP_API void mscclpp_version(int *major, int *minor, int *patch)
{
    if (major) *major = MSCCLPP_VERSION_MAJOR;
    if (minor) *minor = MSCCLPP_VERSION_MINOR;
    if (patch) *patch = MSCCLPP_VERSION_PATCH;
}

static _Thread_local int culprit = -1;
static _Thread_local bool quiet;
static _Thread_local bool logged; /* the last error was logged (core_error, not quiet) */

void core_clear_error(void)
{
    last_error[0] = '\0';
    culprit = -1;
    logged = false;
}

void core_error_keep(core_error_kept_t *kept)
{
    snprintf(kept->msg, sizeof kept->msg, "%s", last_error);
    kept->culprit = culprit;
    kept->logged = logged;
}

void core_error_put_back(const core_error_kept_t *kept)
{
    snprintf(last_error, sizeof last_error, "%s", kept->msg);
    culprit = kept->culprit;
    logged = kept->logged;
}

bool core_error_logged(void) { return logged; }

void core_set_culprit(int rank) { culprit = rank; }
void core_set_quiet(bool q) { quiet = q; }
int core_culprit(void) { return culprit; }

static void record(const char *fmt, va_list ap)
{
    vsnprintf(last_error, sizeof last_error, fmt, ap);
}

mscclpp_result_t core_error(mscclpp_result_t result, const char *file, int line, const char *fmt,
                            ...)
{
    int saved = errno;
    va_list ap;
    va_start(ap, fmt);
    errno = saved; /* glibc expands %m from errno at format time */
    record(fmt, ap);
    va_end(ap);
    logged = !quiet;
    if (!quiet && log_enabled(LOG_WARN, SUBSYS_ALL))
        log_printf(LOG_WARN, SUBSYS_ALL, file, line, "%s: %s", mscclpp_result_string(result),
                   last_error);
    errno = saved;
    return result;
}

MSCCLPP_API mscclpp_result_t mscclpp_report_error(mscclpp_result_t result, const char *fmt, ...)
{
    char msg[1024] = "";
    if (fmt) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof msg, fmt, ap);
        va_end(ap);
    }
    return core_error(result, "(caller)", 0, "%s", msg);
}

mscclpp_result_t core_error_quiet(mscclpp_result_t result, const char *fmt, ...)
{
    int saved = errno;
    va_list ap;
    va_start(ap, fmt);
    errno = saved;
    record(fmt, ap);
    va_end(ap);
    logged = false;
    errno = saved;
    return result;
}
