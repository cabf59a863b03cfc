/*
 * The MSCCLPP_* variable table and its one parser per kind (base/config_vars.h). A parsed value
 * is cached with the text it came from and parsed again only when the environment changes.
 */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/config.h"
#include "base/debug.h"
#include "base/names.h"

typedef enum { K_STR, K_SECONDS, K_COUNT, K_PORT, K_LEVEL, K_SUBSYS, K_SHAREABLE } kind_t;

static const config_entry_t table[CFG__COUNT] = {
#define CONFIG_VAR(name, kind, def, doc) {#name, def, doc, #kind},
#include "base/config_vars.h"
#undef CONFIG_VAR
};

static const kind_t kinds[CFG__COUNT] = {
#define CONFIG_VAR(name, kind, def, doc) K_##kind,
#include "base/config_vars.h"
#undef CONFIG_VAR
};

/* Kinds whose bad value only warns (the logging variables; see config_vars.h). */
static int warn_only(kind_t k) { return k == K_LEVEL || k == K_SUBSYS; }

#define COUNT_MAX 100000000LL     /* polls: more would spin for minutes */
#define SECONDS_MAX 1e9           /* ~31 years: "no limit" in practice, still no overflow */
#define SECONDS_MIN 1e-3          /* waits check their deadline at about this granularity */

static const struct {
    const char *name;
    unsigned bit;
} subsys_names[] = {
    {"INIT", SUBSYS_INIT}, {"BOOT", SUBSYS_BOOT},   {"HAL", SUBSYS_HAL},   {"MEM", SUBSYS_MEM},
    {"CHAN", SUBSYS_CHAN}, {"PLAN", SUBSYS_PLAN},   {"EXEC", SUBSYS_EXEC}, {"KERN", SUBSYS_KERN},
    {"NET", SUBSYS_NET},   {"BENCH", SUBSYS_BENCH}, {"NCCL", SUBSYS_NCCL}, {"ALL", SUBSYS_ALL},
};

const config_entry_t *config_table(void) { return table; }

static int valid_id(config_id_t id) { return (int)id >= 0 && id < CFG__COUNT; }

const char *config_get(config_id_t id)
{
    if (!valid_id(id)) return "";
    const char *v = getenv(table[id].name);
    return v ? v : table[id].def;
}

int config_is_set(config_id_t id) { return valid_id(id) && getenv(table[id].name) != NULL; }

int config_find(const char *name, config_id_t *id)
{
    for (int i = 0; name && i < CFG__COUNT; i++)
        if (!strcmp(table[i].name, name)) {
            *id = (config_id_t)i;
            return 1;
        }
    return 0;
}

MSCCLPP_API const char *mscclpp_config_get(const char *name)
{
    config_id_t id;
    return config_find(name, &id) ? config_get(id) : NULL;
}

typedef struct {
    int64_t i;
    double s;
} value_t;

static int parse_integer(const char *text, long long lo, long long hi, int64_t *out)
{
    char *end = NULL;
    errno = 0;
    long long v = strtoll(text, &end, 10);
    if (errno || end == text || *end != '\0' || v < lo || v > hi) return 0;
    *out = v;
    return 1;
}

/*
 * Parse `text` as `id`'s kind. 1 and *out on success; 0 with the accepted forms in `why`.
 * "" means "not given" for every kind but STR: the caller uses the default.
 */
static int parse(config_id_t id, const char *text, value_t *out, char *why, size_t cap)
{
    out->i = -1;
    out->s = 0;
    switch (kinds[id]) {
    case K_STR: return 1;
    case K_SECONDS: {
        char *end = NULL;
        errno = 0;
        double s = strtod(text, &end);
        if (end != text && *end == '\0' && !errno && isfinite(s) && s >= SECONDS_MIN &&
            s <= SECONDS_MAX) {
            out->s = s;
            return 1;
        }
        snprintf(why, cap, "a number of seconds from %g to %g", SECONDS_MIN, SECONDS_MAX);
        return 0;
    }
    case K_COUNT:
        if (parse_integer(text, 0, COUNT_MAX, &out->i)) return 1;
        snprintf(why, cap, "an integer from 0 to %lld", COUNT_MAX);
        return 0;
    case K_PORT:
        if (parse_integer(text, 0, 65535, &out->i)) return 1;
        snprintf(why, cap, "a port number from 0 to 65535");
        return 0;
    case K_LEVEL: {
        static const char *levels[] = {"NONE", "WARN", "INFO", "TRACE"};
        for (int i = 0; i < 4; i++)
            if (!strcasecmp(text, levels[i])) {
                out->i = i;
                return 1;
            }
        snprintf(why, cap, "NONE, WARN, INFO or TRACE");
        return 0;
    }
    case K_SUBSYS: {
        unsigned mask = 0;
        char buf[256];
        snprintf(buf, sizeof buf, "%s", text);
        int bad = strlen(text) >= sizeof buf;
        for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok && !bad;
             tok = strtok_r(NULL, ",", &save)) {
            int neg = tok[0] == '^', found = 0;
            for (size_t i = 0; i < sizeof subsys_names / sizeof subsys_names[0]; i++)
                if (!strcasecmp(tok + neg, subsys_names[i].name)) {
                    found = 1;
                    if (neg) mask = (mask ? mask : SUBSYS_ALL) & ~subsys_names[i].bit;
                    else mask |= subsys_names[i].bit;
                }
            bad = !found;
        }
        if (!bad && mask) {
            out->i = mask;
            return 1;
        }
        snprintf(why, cap, "comma-separated names of INIT, BOOT, HAL, MEM, CHAN, PLAN, EXEC, KERN, "
                           "NET, BENCH, ALL (^NAME excludes one) naming at least one");
        return 0;
    }
    case K_SHAREABLE: {
        static const char *modes[] = {"auto", "cumem", "legacy"};
        for (int i = 0; i < 3; i++)
            if (!strcmp(text, modes[i])) {
                out->i = i;
                return 1;
            }
        snprintf(why, cap, "auto, cumem or legacy");
        return 0;
    }
    }
    snprintf(why, cap, "?");
    return 0;
}

/* Cache of the last text parsed per variable (texts longer than the slot are not cached). */
static pthread_mutex_t cache_lock = PTHREAD_MUTEX_INITIALIZER;
static struct {
    int have, set, ok;
    char text[128];
    value_t v;
    char why[200];
} cache[CFG__COUNT];

/*
 * The value in force for `id`: the environment's when set, non-empty and valid, else the
 * default's. *bad (optional): the environment's value was refused (its reason in `why`).
 */
static value_t resolve(config_id_t id, int *bad, char *why, size_t cap)
{
    const char *env = getenv(table[id].name);
    const char *text = env ? env : "";
    value_t v;
    int ok = 1;
    char reason[200] = "";
    pthread_mutex_lock(&cache_lock);
    if (cache[id].have && cache[id].set == (env != NULL) && !strcmp(cache[id].text, text)) {
        v = cache[id].v;
        ok = cache[id].ok;
        if (why && cap) snprintf(reason, sizeof reason, "%s", cache[id].why);
        pthread_mutex_unlock(&cache_lock);
    } else {
        pthread_mutex_unlock(&cache_lock);
        char accepted[160] = "";
        if (text[0] && parse(id, text, &v, accepted, sizeof accepted)) {
            ok = 1;
        } else {
            if (text[0]) {
                ok = 0;
                snprintf(reason, sizeof reason, "%s=\"%.40s\" is not %s", table[id].name, text,
                         accepted);
            }
            if (!parse(id, table[id].def, &v, accepted, sizeof accepted)) {
                v.i = -1;
                v.s = 0;
            }
        }
        if (strlen(text) < sizeof cache[0].text) {
            pthread_mutex_lock(&cache_lock);
            cache[id].have = 1;
            cache[id].set = env != NULL;
            snprintf(cache[id].text, sizeof cache[id].text, "%s", text);
            cache[id].v = v;
            cache[id].ok = ok;
            snprintf(cache[id].why, sizeof cache[id].why, "%s", reason);
            pthread_mutex_unlock(&cache_lock);
        }
    }
    if (bad) *bad = !ok;
    if (why && cap) snprintf(why, cap, "%s", reason);
    return v;
}

int64_t config_get_int(config_id_t id)
{
    if (!valid_id(id)) return -1;
    return resolve(id, NULL, NULL, 0).i;
}

/*
 * Every bounded wait reads the timeout (each stream sync, each bootstrap message), so each
 * thread keeps the last value with the environment's text it came from: a call costs a getenv
 * and a short compare, not the shared cache's lock and copies. The environment is still read,
 * so a setenv between calls takes effect here as for every variable.
 */
uint64_t config_timeout_ns(void)
{
    static __thread struct {
        bool have;
        const char *env; /* getenv's answer, and its text then (a putenv'd string may change) */
        char text[48];
        uint64_t ns;
    } last;
    const char *env = getenv(table[CFG_MSCCLPP_TIMEOUT].name);
    if (last.have && env == last.env && (!env || !strcmp(env, last.text))) return last.ns;
    uint64_t ns = (uint64_t)(resolve(CFG_MSCCLPP_TIMEOUT, NULL, NULL, 0).s * 1e9);
    last.have = !env || strlen(env) < sizeof last.text;
    if (last.have) {
        last.env = env;
        snprintf(last.text, sizeof last.text, "%s", env ? env : "");
        last.ns = ns;
    }
    return ns;
}

int config_invalid(config_id_t id, char *why, size_t cap)
{
    if (!valid_id(id)) return 0;
    int bad = 0;
    resolve(id, &bad, why, cap);
    return bad;
}

/* MSCCLPP_* variables that are not the library's but are no typo either: read by the Python
 * package, the tools' launchers and the test suites. */
static const char *const elsewhere[] = {
    "MSCCLPP_LIBRARY",           /* python: the libmscclpp.so to load */
    "MSCCLPP_NCCL_LIBRARY",      /* python (mscclpp.ext): the libmscclpp_nccl.so to load */
    "MSCCLPP_PLANS_DIR",         /* python: where the default plans' programs are */
    "MSCCLPP_INCLUDE_DIR",       /* python: headers for native modules */
    "MSCCLPP_CUDA_ARCH",         /* python: the arch native CUDA modules are built for */
    "MSCCLPP_HIP_ARCH",          /* python: the arch native HIP modules are built for */
    "MSCCLPP_TOP_SRCDIR",        /* tests: where the sources are */
    "MSCCLPP_TOP_BUILDDIR",      /* tests: where the build is */
    "MSCCLPP_CONFORMANCE_FULL",  /* tests/conformance: every case */
    "MSCCLPP_CONFORMANCE_SCALE", /* tests/conformance: sizes */
    "MSCCLPP_TEST_SCALE",        /* tests: sizes */
    "MSCCLPP_SOAK_CALLS",        /* tests/unit/test_soak */
    "MSCCLPP_SKIP_KERN_COMPILE", /* scripts/run-tests.sh */
    "MSCCLPP_SKIP_SANITIZE",     /* scripts/run-tests.sh */
    "MSCCLPP_SKIP_TSAN",         /* scripts/run-tests.sh */
    NULL,
};

extern char **environ;

int config_unknown(void (*fn)(const char *name, const char *nearest, void *ctx), void *ctx)
{
    static const char *names[CFG__COUNT + 1];
    for (int i = 0; i < CFG__COUNT; i++) names[i] = table[i].name;
    names[CFG__COUNT] = NULL;
    int n = 0;
    for (char **e = environ; e && *e; e++) {
        if (strncmp(*e, "MSCCLPP_", 8)) continue;
        char name[128];
        size_t len = strcspn(*e, "=");
        if (len >= sizeof name) len = sizeof name - 1;
        memcpy(name, *e, len);
        name[len] = '\0';
        config_id_t id;
        int known = config_find(name, &id);
        for (const char *const *k = elsewhere; !known && *k; k++) known = !strcmp(*k, name);
        if (known) continue;
        n++;
        if (fn) fn(name, names_nearest(name, names), ctx);
    }
    return n;
}

static void warn_one(const char *name, const char *nearest, void *ctx)
{
    (void)ctx;
    if (nearest)
        WARN(SUBSYS_INIT, "%s is not a variable of libmscclpp (did you mean %s?); mscclpp-info "
             "lists them", name, nearest);
    else
        WARN(SUBSYS_INIT, "%s is not a variable of libmscclpp; mscclpp-info lists them", name);
}

static pthread_once_t unknown_once = PTHREAD_ONCE_INIT;
static void warn_unknown(void) { config_unknown(warn_one, NULL); }

void config_warn_unknown(void) { pthread_once(&unknown_once, warn_unknown); }

mscclpp_result_t config_check(void)
{
    config_warn_unknown();
    for (int i = 0; i < CFG__COUNT; i++) {
        char why[256];
        if (warn_only(kinds[i]) || !config_invalid((config_id_t)i, why, sizeof why)) continue;
        return ERR_ARG("%s", why);
    }
    return MSCCLPP_OK;
}

const char *config_describe(config_id_t id, char *buf, size_t cap)
{
    if (!valid_id(id)) return buf && cap ? (buf[0] = '\0', buf) : buf;
    char why[256];
    const char *def = table[id].def;
    if (config_invalid(id, why, sizeof why)) {
        if (warn_only(kinds[id]))
            snprintf(buf, cap, "%s (default, because %s)", *def ? def : "\"\"", why);
        else
            snprintf(buf, cap, "INVALID: %s; library calls fail with MSCCLPP_ERR_INVALID_ARG",
                     why);
    } else if (config_is_set(id) && (kinds[id] == K_STR || config_get(id)[0])) {
        const char *v = config_get(id);
        snprintf(buf, cap, "%s (set)", *v ? v : "\"\"");
    } else {
        snprintf(buf, cap, "%s (default)", *def ? def : "\"\"");
    }
    return buf;
}
