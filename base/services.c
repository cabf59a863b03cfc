/* The library's base services table (base/services.h), handed to HAL modules at load. */
#include <string.h>

#include "base/config.h"
#include "base/debug.h"
#include "base/services.h"
#include "base/wait.h"

static void svc_log_message(log_level_t level, log_subsys_t subsys, const char *file, int line,
                            const char *msg)
{
    log_printf(level, subsys, file, line, "%s", msg);
}

static mscclpp_result_t svc_record_error(mscclpp_result_t result, const char *file, int line,
                                         int quiet, const char *msg)
{
    if (quiet) return core_error_quiet(result, "%s", msg);
    return core_error(result, file, line, "%s", msg);
}

static int svc_config_is_set(const char *name)
{
    config_id_t id;
    return config_find(name, &id) ? config_is_set(id) : 0;
}

static int64_t svc_config_get_int(const char *name)
{
    config_id_t id;
    return config_find(name, &id) ? config_get_int(id) : -1;
}

static const base_services_t services = {
    .size = sizeof(base_services_t),
    .version = BASE_SERVICES_VERSION,
    .log_enabled = log_enabled,
    .log_message = svc_log_message,
    .record_error = svc_record_error,
    .clear_error = core_clear_error,
    .last_error = mscclpp_last_error,
    .result_string = mscclpp_result_string,
    .config_get = mscclpp_config_get,
    .config_is_set = svc_config_is_set,
    .config_get_int = svc_config_get_int,
    .timeout_ns = config_timeout_ns,
    .wait_spin = base_wait_spin,
};

const base_services_t *base_services(void) { return &services; }
