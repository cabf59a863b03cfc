/*
 * The base services a loadable HAL module (hal/cuda, hal/hip) receives from the library when it
 * is loaded, instead of compiling its own copies of base/: logging, error recording (so that a
 * module's message becomes the caller's mscclpp_last_error()), configuration lookup (parsed
 * once, by the library) and the wait policy.
 *
 * ABI: the table starts with its size and version. The loader calls the module's
 * BASE_SERVICES_BIND symbol with the library's table; the module answers with the version it
 * was built against, and the loader refuses a module whose version differs (a module keeps
 * only a pointer to the table, so the two must agree on every slot). A module also refuses a
 * table smaller than the one it was built with. Bump BASE_SERVICES_VERSION whenever a slot is
 * added, removed or changes meaning.
 */
#ifndef MSCCLPP_BASE_SERVICES_H
#define MSCCLPP_BASE_SERVICES_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include "base/debug.h"
#include "mscclpp/mscclpp.h"

#ifdef __cplusplus
extern "C" {
#endif

#define BASE_SERVICES_VERSION 1

typedef struct base_services {
    size_t size;  /* sizeof(base_services_t) of the library */
    int version;  /* BASE_SERVICES_VERSION of the library */

    /* logging (MSCCLPP_DEBUG*): the library's level, subsystems, file and lock */
    int (*log_enabled)(log_level_t level, log_subsys_t subsys);
    void (*log_message)(log_level_t level, log_subsys_t subsys, const char *file, int line,
                        const char *msg);

    /* errors: record `msg` as the calling thread's mscclpp_last_error() (and log it at WARN
     * unless `quiet`); returns `result` */
    mscclpp_result_t (*record_error)(mscclpp_result_t result, const char *file, int line,
                                     int quiet, const char *msg);
    void (*clear_error)(void);
    const char *(*last_error)(void);
    const char *(*result_string)(mscclpp_result_t result);

    /* configuration, by variable name (a module's variable ids need not match the library's):
     * the text in force (NULL for an unknown name), a parsed integer (config_get_int), and
     * MSCCLPP_TIMEOUT in nanoseconds */
    const char *(*config_get)(const char *name);
    int (*config_is_set)(const char *name);
    int64_t (*config_get_int)(const char *name);
    uint64_t (*timeout_ns)(void);

    /* the wait policy (base/wait.h): polls to spin for `pollers` threads polling on the node */
    uint32_t (*wait_spin)(unsigned pollers);
} base_services_t;

/** Symbol a module exports: takes the library's table, returns its BASE_SERVICES_VERSION. */
typedef int (*base_services_bind_fn)(const base_services_t *services);
#define BASE_SERVICES_BIND "mscclpp_hal_module_bind"

/** The library's table (base/services.c). */
const base_services_t *base_services(void);

#ifdef __cplusplus
}
#endif

#endif /* MSCCLPP_BASE_SERVICES_H */
