/* The MSCCLPP_* variable table and its readers. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "base/config.h"
#include "base/debug.h"

static const config_entry_t table[CFG__COUNT] = {
#define CONFIG_VAR(name, def, doc) {#name, def, doc},
#include "base/config_vars.h"
#undef CONFIG_VAR
};

const config_entry_t *config_table(void) { return table; }

const char *config_get(config_id_t id)
{
    if ((int)id < 0 || id >= CFG__COUNT) return "";
    const char *v = getenv(table[id].name);
    return v ? v : table[id].def;
}

int config_is_set(config_id_t id)
{
    return (int)id >= 0 && id < CFG__COUNT && getenv(table[id].name) != NULL;
}

static int64_t parse_or_default(config_id_t id, const char *text)
{
    char *end = NULL;
    errno = 0;
    long long v = strtoll(text, &end, 10);
    if (errno || end == text || *end != '\0') return -1;
    (void)id;
    return v;
}

int64_t config_get_int(config_id_t id)
{
    if ((int)id < 0 || id >= CFG__COUNT) return 0;
    const char *v = config_get(id);
    int64_t x = parse_or_default(id, v);
    if (x < 0 && strcmp(v, "-1") != 0) {
        static _Thread_local int warned[CFG__COUNT];
        if (!warned[id]) {
            warned[id] = 1;
            WARN(SUBSYS_INIT, "%s=\"%s\" is not an integer; using the default %s", table[id].name,
                 v, table[id].def);
        }
        x = parse_or_default(id, table[id].def);
    }
    return x;
}

uint64_t config_timeout_ns(void)
{
    const char *v = config_get(CFG_MSCCLPP_TIMEOUT);
    char *end = NULL;
    double s = strtod(v, &end);
    if (end == v || *end != '\0' || !(s > 0)) s = strtod(table[CFG_MSCCLPP_TIMEOUT].def, NULL);
    double ns = s * 1e9;
    if (ns < 1e6) ns = 1e6;
    if (ns > 1e18) ns = 1e18;
    return (uint64_t)ns;
}
