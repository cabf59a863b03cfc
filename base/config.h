/* The table of MSCCLPP_* variables (base/config_vars.h) and typed readers. */
#ifndef MSCCLPP_CORE_CONFIG_H
#define MSCCLPP_CORE_CONFIG_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
#define CONFIG_VAR(name, def, doc) CFG_##name,
#include "base/config_vars.h"
#undef CONFIG_VAR
    CFG__COUNT
} config_id_t;

typedef struct {
    const char *name;
    const char *def;
    const char *doc;
} config_entry_t;

/** The whole table, CFG__COUNT entries, in declaration order. */
const config_entry_t *config_table(void);
/** The value in the environment, else the default. Never NULL ("" when unset and no default). */
const char *config_get(config_id_t id);
/** True when the variable is set in the environment (even to ""). */
int config_is_set(config_id_t id);
/** Integer value; a malformed value logs a warning once and gives the default. */
int64_t config_get_int(config_id_t id);
/** MSCCLPP_TIMEOUT in nanoseconds (at least 1 ms). */
uint64_t config_timeout_ns(void);

#ifdef __cplusplus
}
#endif

#endif
