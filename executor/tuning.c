/* Tuning tables: load, check against this machine, and pick a call's plan (see tuning.h). */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/config.h"
#include "base/debug.h"
#include "executor/exec.h"
#include "executor/tuning.h"

void exec_tuning_free(exec_tuning_t *t)
{
    if (!t) return;
    for (int i = 0; i < t->count; i++) {
        free(t->entries[i].collective);
        free(t->entries[i].plan);
    }
    free(t->entries);
    free(t->path);
    free(t);
}

/* ---- parsing ------------------------------------------------------------------------------ */

#define BAD(...) core_error_quiet(MSCCLPP_ERR_INVALID_ARG, __VA_ARGS__)

static mscclpp_result_t want_string(const char *path, const json_t *o, const char *key,
                                    const char *where, const char **out)
{
    const json_t *v = json_object_get(o, key);
    if (!json_is_string(v))
        return BAD("tuning table %s: %s\"%s\" must be a string", path, where, key);
    *out = json_string_value(v);
    return MSCCLPP_OK;
}

static mscclpp_result_t want_int(const char *path, const json_t *o, const char *key,
                                 const char *where, long long lo, long long hi, long long *out)
{
    const json_t *v = json_object_get(o, key);
    if (!json_is_integer(v) || json_integer_value(v) < lo || json_integer_value(v) > hi)
        return BAD("tuning table %s: %s\"%s\" must be an integer in [%lld, %lld]", path, where,
                   key, lo, hi);
    *out = (long long)json_integer_value(v);
    return MSCCLPP_OK;
}

static mscclpp_result_t parse_entry(const char *path, const json_t *e, int i,
                                    exec_tuning_entry_t *out)
{
    char where[48];
    snprintf(where, sizeof where, "entries[%d].", i);
    if (!json_is_object(e)) return BAD("tuning table %s: entries[%d] is not an object", path, i);
    const char *coll = NULL, *plan = NULL;
    long long lo = 0, hi = 0, nb = 0, nt = 0;
    CHECK(want_string(path, e, "collective", where, &coll));
    /* the collectives that consult the table (select.c, exec_select): an entry for any
     * other name would never be used, which is a mistake to report, not to ignore */
    static const char *const known[] = {"allreduce", "allgather", "reducescatter", "alltoall",
                                        "broadcast", "reduce"};
    bool found = false;
    for (size_t k = 0; k < sizeof known / sizeof known[0]; k++) found |= !strcmp(coll, known[k]);
    if (!found)
        return BAD("tuning table %s: %s\"collective\": \"%s\" is not a collective the table "
                   "can choose plans for (allreduce, allgather, reducescatter, alltoall, "
                   "broadcast, reduce)",
                   path, where, coll);
    CHECK(want_string(path, e, "plan", where, &plan));
    CHECK(want_int(path, e, "min_bytes", where, 0, INT64_MAX, &lo));
    /* null: no upper bound (jansson integers stop at INT64_MAX) */
    const json_t *jmax = json_object_get(e, "max_bytes");
    if (!json_is_null(jmax)) CHECK(want_int(path, e, "max_bytes", where, lo, INT64_MAX, &hi));
    CHECK(want_int(path, e, "nblocks", where, 0, 1 << 16, &nb));
    /* what mscclpp_execute_launch accepts (0: the plan's) */
    CHECK(want_int(path, e, "nthreads", where, 0, 1024, &nt));
    const json_t *ip = json_object_get(e, "inplace");
    if (!json_is_boolean(ip))
        return BAD("tuning table %s: %s\"inplace\" must be true or false", path, where);
    out->collective = strdup(coll);
    out->plan = strdup(plan);
    if (!out->collective || !out->plan)
        return ERR(MSCCLPP_ERR_NO_MEMORY, "tuning table %s: out of memory", path);
    out->inplace = json_is_true(ip);
    out->min_bytes = (uint64_t)lo;
    out->max_bytes = json_is_null(jmax) ? UINT64_MAX : (uint64_t)hi;
    out->nblocks = (int)nb;
    out->nthreads = (int)nt;
    return MSCCLPP_OK;
}

static uint64_t fnv_bytes(uint64_t h, const void *p, size_t n)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 1099511628211ull;
    return h;
}

/* A digest of what the table decides (not of its path or formatting): ranks that loaded
 * different tables can be told so when they pick different plans. Never 0. */
static uint64_t entries_digest(const exec_tuning_t *t)
{
    uint64_t h = EXEC_HASH_SEED;
    for (int i = 0; i < t->count; i++) {
        const exec_tuning_entry_t *e = &t->entries[i];
        uint64_t v[5] = {e->inplace, e->min_bytes, e->max_bytes, (uint64_t)e->nblocks,
                         (uint64_t)e->nthreads};
        h = fnv_bytes(h, e->collective, strlen(e->collective) + 1);
        h = fnv_bytes(h, e->plan, strlen(e->plan) + 1);
        h = fnv_bytes(h, v, sizeof v);
    }
    return h ? h : 1;
}

/* Check the header against this machine: every mismatch names both sides. */
static mscclpp_result_t check_key(const char *path, const json_t *root,
                                  const exec_tuning_key_t *key)
{
    const char *fmt = NULL, *backend = NULL, *device = NULL;
    long long version = 0, nranks = 0, rpn = 0;
    CHECK(want_string(path, root, "format", "", &fmt));
    if (strcmp(fmt, EXEC_TUNING_FORMAT))
        return BAD("tuning table %s: format \"%s\", expected \"%s\"", path, fmt,
                   EXEC_TUNING_FORMAT);
    CHECK(want_int(path, root, "version", "", 1, 1 << 30, &version));
    if (version != EXEC_TUNING_VERSION)
        return BAD("tuning table %s: version %lld, this library reads version %d (run the tuner "
                   "again)", path, version, EXEC_TUNING_VERSION);
    CHECK(want_string(path, root, "backend", "", &backend));
    CHECK(want_string(path, root, "device", "", &device));
    CHECK(want_int(path, root, "nranks", "", 1, 1 << 20, &nranks));
    CHECK(want_int(path, root, "ranks_per_node", "", 1, 1 << 20, &rpn));
    if (strcmp(backend, key->backend))
        return BAD("tuning table %s: written for backend \"%s\", this run uses \"%s\"", path,
                   backend, key->backend);
    if (strcmp(device, key->device))
        return BAD("tuning table %s: written for device \"%s\", this run has \"%s\"", path,
                   device, key->device);
    if (nranks != key->nranks)
        return BAD("tuning table %s: written for %lld ranks, the communicator has %d", path,
                   nranks, key->nranks);
    if (rpn != key->ranks_per_node)
        return BAD("tuning table %s: written for %lld ranks per node, this run has %d", path, rpn,
                   key->ranks_per_node);
    return MSCCLPP_OK;
}

mscclpp_result_t exec_tuning_load(const char *path, const exec_tuning_key_t *key,
                                  exec_tuning_t **out)
{
    CHECK_ARG(path != NULL);
    CHECK_ARG(key != NULL && key->backend && key->device);
    CHECK_ARG(out != NULL);
    *out = NULL;
    FILE *f = fopen(path, "r");
    if (!f) return core_error_quiet(MSCCLPP_ERR_SYSTEM, "tuning table %s: %s", path,
                                    strerror(errno));
    json_error_t jerr;
    json_t *root = json_loadf(f, JSON_REJECT_DUPLICATES, &jerr);
    fclose(f);
    if (!root)
        return BAD("tuning table %s: not valid JSON: line %d column %d: %s", path, jerr.line,
                   jerr.column, jerr.text);
    mscclpp_result_t r = MSCCLPP_OK;
    exec_tuning_t *t = calloc(1, sizeof *t);
    if (!t || !(t->path = strdup(path))) {
        r = ERR(MSCCLPP_ERR_NO_MEMORY, "tuning table %s: out of memory", path);
        goto done;
    }
    if (!json_is_object(root)) {
        r = BAD("tuning table %s: the top level must be an object", path);
        goto done;
    }
    CHECK_GOTO(check_key(path, root, key), r, done);
    const json_t *entries = json_object_get(root, "entries");
    if (!json_is_array(entries)) {
        r = BAD("tuning table %s: \"entries\" must be an array", path);
        goto done;
    }
    size_t n = json_array_size(entries);
    if (n) {
        t->entries = calloc(n, sizeof *t->entries);
        if (!t->entries) {
            r = ERR(MSCCLPP_ERR_NO_MEMORY, "tuning table %s: out of memory", path);
            goto done;
        }
    }
    for (size_t i = 0; i < n; i++) {
        r = parse_entry(path, json_array_get(entries, i), (int)i, &t->entries[i]);
        t->count = (int)i + 1; /* freed with the table, parsed or not */
        if (r != MSCCLPP_OK) goto done;
    }
    t->digest = entries_digest(t);
    INFO(SUBSYS_EXEC, "tuning table %s: %d entries for %s on %s, %d ranks", path, t->count,
         key->backend, key->device, key->nranks);
done:
    json_decref(root);
    if (r != MSCCLPP_OK) {
        exec_tuning_free(t);
        return r;
    }
    *out = t;
    return MSCCLPP_OK;
}

int exec_tuning_default_path(const exec_tuning_key_t *key, char *buf, size_t cap)
{
    const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    char base[2048];
    if (xdg && *xdg)
        snprintf(base, sizeof base, "%s", xdg);
    else if (home && *home)
        snprintf(base, sizeof base, "%s/.cache", home);
    else
        return -1;
    char dev[128];
    size_t i = 0;
    for (const char *s = key->device; *s && i + 1 < sizeof dev; s++, i++) {
        char c = *s;
        bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                  c == '.' || c == '_' || c == '-';
        dev[i] = ok ? c : '_';
    }
    dev[i] = '\0';
    int n = snprintf(buf, cap, "%s/mscclpp/tuning/%s-%s-%d.json", base, key->backend, dev,
                     key->nranks);
    return n < 0 || (size_t)n >= cap ? -1 : 0;
}

mscclpp_result_t exec_tuning_open(const exec_tuning_key_t *key, exec_tuning_t **out)
{
    CHECK_ARG(key != NULL && out != NULL);
    *out = NULL;
    const char *file = config_get(CFG_MSCCLPP_TUNING_FILE);
    if (!strcmp(file, "none")) return MSCCLPP_OK;
    if (*file) {
        /* asked for by name: a table that cannot be used is the caller's error */
        mscclpp_result_t r = exec_tuning_load(file, key, out);
        if (r != MSCCLPP_OK) {
            char why[1024]; /* the message is rewritten below: copy it out first */
            snprintf(why, sizeof why, "%s", mscclpp_last_error());
            return ERR(r, "MSCCLPP_TUNING_FILE: %s", why);
        }
        return MSCCLPP_OK;
    }
    char path[4096];
    struct stat st;
    if (exec_tuning_default_path(key, path, sizeof path) || stat(path, &st) != 0) {
        TRACE(SUBSYS_EXEC, "no default tuning table");
        return MSCCLPP_OK;
    }
    if (exec_tuning_load(path, key, out) != MSCCLPP_OK) {
        /* a stale table in the cache must not stop the library; say why it is not used */
        WARN(SUBSYS_EXEC, "%s; not using it (run mscclpp-bench --tune again, or set "
             "MSCCLPP_TUNING_FILE=none)", mscclpp_last_error());
        core_clear_error();
    }
    return MSCCLPP_OK;
}

/* ---- selection ---------------------------------------------------------------------------- */

/* Does registry entry `i` match the call? The registry's own rule, on a one-entry view, so the
 * two can never disagree. */
static bool entry_matches(const exec_registry_t *reg, int i, const char *collective,
                          int world_size, int ranks_per_node, bool inplace, uint64_t bytes)
{
    exec_registry_t one = {.entries = &reg->entries[i], .count = 1, .cap = 1};
    const struct mscclpp_plan *p = NULL;
    if (exec_registry_select(&one, collective, world_size, ranks_per_node, inplace, bytes, NULL,
                             &p) == MSCCLPP_OK)
        return true;
    core_clear_error(); /* a non-match is not an error of the caller's call */
    return false;
}

void exec_tuning_candidates(const exec_registry_t *reg, const char *collective, int world_size,
                            int ranks_per_node, bool inplace, uint64_t message_bytes, int nblocks,
                            const struct mscclpp_plan **plans, int cap, int *n)
{
    *n = 0;
    /* in the registry's order of preference: registered plans, then the made ones */
    for (int k = 0; k < 2 * reg->count; k++) {
        int i = k % reg->count;
        if (reg->entries[i].made != ((k >= reg->count) != reg->made_first)) continue;
        if (!entry_matches(reg, i, collective, world_size, ranks_per_node, inplace,
                           message_bytes))
            continue;
        if (nblocks > 0 && exec_plan_nblocks(reg->entries[i].plan) != nblocks) continue;
        if (*n < cap) plans[*n] = reg->entries[i].plan;
        (*n)++;
    }
}

const struct mscclpp_plan *exec_tuning_pick(exec_tuning_t *t, const exec_registry_t *reg,
                                            const char *collective, int world_size,
                                            int ranks_per_node, bool inplace,
                                            uint64_t message_bytes, int *nthreads)
{
    *nthreads = 0;
    if (!t) return NULL;
    for (int k = 0; k < t->count; k++) {
        exec_tuning_entry_t *e = &t->entries[k];
        if (e->inplace != inplace || strcmp(e->collective, collective) ||
            message_bytes < e->min_bytes || message_bytes > e->max_bytes)
            continue;
        for (int i = 0; i < reg->count; i++) {
            const struct mscclpp_plan *p = reg->entries[i].plan;
            if (!p->name || strcmp(p->name, e->plan)) continue;
            if (e->nblocks && exec_plan_nblocks(p) != e->nblocks) continue;
            if (!entry_matches(reg, i, collective, world_size, ranks_per_node, inplace,
                               message_bytes))
                continue;
            *nthreads = e->nthreads;
            TRACE(SUBSYS_EXEC, "tuning table %s: %s of %llu bytes -> plan \"%s\", %d blocks, "
                  "%d threads", t->path, collective, (unsigned long long)message_bytes, p->name,
                  e->nblocks, e->nthreads);
            return p;
        }
        if (!e->warned) {
            e->warned = true;
            WARN(SUBSYS_EXEC, "tuning table %s: plan \"%s\" (%d blocks) for %s of %llu..%llu bytes "
                 "is not registered or does not accept a %llu-byte %s call; using the default "
                 "selection", t->path, e->plan, e->nblocks, collective,
                 (unsigned long long)e->min_bytes, (unsigned long long)e->max_bytes,
                 (unsigned long long)message_bytes, inplace ? "in-place" : "out-of-place");
        }
        return NULL;
    }
    return NULL;
}

/* ---- the executor's table ------------------------------------------------------------------ */

void exec_tuning_key_of(const mscclpp_executor_t *ex, hal_device_props_t *props,
                        exec_tuning_key_t *key)
{
    memset(props, 0, sizeof *props);
    int dev = 0;
    if (ex->hal->device_get(&dev) != MSCCLPP_OK || ex->hal->device_props(dev, props) != MSCCLPP_OK)
        core_clear_error(); /* an unnamed device only means no default table matches */
    *key = (exec_tuning_key_t){.backend = ex->hal->name,
                               .device = props->name[0] ? props->name : "unknown",
                               .nranks = ex->comm->nranks,
                               .ranks_per_node = ex->comm->nlocal};
}

mscclpp_result_t exec_tuning_attach(mscclpp_executor_t *ex)
{
    hal_device_props_t props;
    exec_tuning_key_t key;
    exec_tuning_key_of(ex, &props, &key);
    return exec_tuning_open(&key, &ex->tuning);
}
