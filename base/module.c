/*
 * The module side of the base services (base/services.h): a loadable HAL module compiles this
 * file instead of base/status.c, log.c and config.c. It defines the same functions the rest of
 * the module calls (core_error, log_printf, config_get, ...) and forwards them to the table the
 * library handed over at load, so the module logs through the library's logger, its errors
 * become the caller's mscclpp_last_error(), and variables are parsed by the library alone.
 *
 * Before the table arrives (a program that dlopens the module itself, e.g. a test) calls still
 * work: messages go to stderr at WARN, errors to a buffer of this module, values come straight
 * from the environment.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/config.h"
#include "base/debug.h"
#include "base/services.h"
#include "base/wait.h"

static const base_services_t *svc;
static _Thread_local char local_error[1024];

static const char *const var_names[CFG__COUNT] = {
#define CONFIG_VAR(name, kind, def, doc) #name,
#include "base/config_vars.h"
#undef CONFIG_VAR
};
static const char *const var_defaults[CFG__COUNT] = {
#define CONFIG_VAR(name, kind, def, doc) def,
#include "base/config_vars.h"
#undef CONFIG_VAR
};

__attribute__((visibility("default"))) int mscclpp_hal_module_bind(const base_services_t *s)
{
    /* A table smaller than ours lacks slots we would call: keep the stand-ins instead. */
    if (s && s->size >= sizeof(base_services_t) && s->version == BASE_SERVICES_VERSION) svc = s;
    return BASE_SERVICES_VERSION;
}

/* ---- errors ------------------------------------------------------------------------------ */

const char *mscclpp_result_string(mscclpp_result_t result)
{
    if (svc) return svc->result_string(result);
    return result == MSCCLPP_OK ? "MSCCLPP_OK" : "MSCCLPP_ERR";
}

const char *mscclpp_last_error(void) { return svc ? svc->last_error() : local_error; }

void core_clear_error(void)
{
    if (svc) svc->clear_error();
    local_error[0] = '\0';
}

static mscclpp_result_t record(mscclpp_result_t result, const char *file, int line, int quiet,
                               const char *fmt, va_list ap)
{
    char msg[sizeof local_error];
    vsnprintf(msg, sizeof msg, fmt, ap);
    if (svc) return svc->record_error(result, file, line, quiet, msg);
    snprintf(local_error, sizeof local_error, "%s", msg);
    if (!quiet) fprintf(stderr, "MSCCLPP WARN %s:%d %s\n", file, line, msg);
    return result;
}

mscclpp_result_t core_error(mscclpp_result_t result, const char *file, int line, const char *fmt,
                            ...)
{
    va_list ap;
    va_start(ap, fmt);
    record(result, file, line, 0, fmt, ap); /* glibc expands %m from errno, still intact here */
    va_end(ap);
    return result;
}

mscclpp_result_t core_error_quiet(mscclpp_result_t result, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    record(result, "", 0, 1, fmt, ap);
    va_end(ap);
    return result;
}

/* ---- logging ----------------------------------------------------------------------------- */

int log_enabled(log_level_t level, log_subsys_t subsys)
{
    if (svc) return svc->log_enabled(level, subsys);
    return level <= LOG_WARN;
}

void log_printf(log_level_t level, log_subsys_t subsys, const char *file, int line,
                const char *fmt, ...)
{
    char msg[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (svc) svc->log_message(level, subsys, file, line, msg);
    else fprintf(stderr, "MSCCLPP %s:%d %s\n", file, line, msg);
}

/* ---- configuration ----------------------------------------------------------------------- */

static int valid_id(config_id_t id) { return (int)id >= 0 && id < CFG__COUNT; }

const char *config_get(config_id_t id)
{
    if (!valid_id(id)) return "";
    const char *v = svc ? svc->config_get(var_names[id]) : getenv(var_names[id]);
    return v ? v : var_defaults[id];
}

int config_is_set(config_id_t id)
{
    if (!valid_id(id)) return 0;
    return svc ? svc->config_is_set(var_names[id]) : getenv(var_names[id]) != NULL;
}

int64_t config_get_int(config_id_t id)
{
    if (!valid_id(id)) return -1;
    if (svc) return svc->config_get_int(var_names[id]);
    char *end = NULL;
    const char *v = config_get(id);
    long long x = strtoll(v, &end, 10);
    return end != v && *end == '\0' ? x : -1;
}

uint64_t config_timeout_ns(void)
{
    if (svc) return svc->timeout_ns();
    return 60ull * 1000000000ull;
}

/* The wait policy's per-thread state (base/wait.h): libmscclpp keeps its own copy hidden. */
__thread base_wait_tls_t base_wait_tls;

uint32_t base_wait_spin(unsigned pollers)
{
    return svc ? svc->wait_spin(pollers) : BASE_WAIT_SPIN_SHARED;
}
