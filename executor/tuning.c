/* Tuning tables: load, check against this machine, and pick a call's plan (see tuning.h). */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/config.h"
#include "base/debug.h"
#include "executor/executor.h"
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
    uint64_t h = 1469598103934665603ull;
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

int exec_plan_nblocks(const struct mscclpp_plan *plan)
{
    int nb = 0;
    for (int r = 0; r < plan->nranks; r++)
        if (plan->gpus[r].n_blocks > nb) nb = plan->gpus[r].n_blocks;
    return nb;
}

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

/* ---- the executor's hooks and the public calls -------------------------------------------- */

/* This executor's key: backend, the current device's name, ranks and ranks per node. */
static void executor_key(const exec_tuning_view_t *v, hal_device_props_t *props,
                         exec_tuning_key_t *key)
{
    memset(props, 0, sizeof *props);
    int dev = 0;
    if (v->hal->device_get(&dev) != MSCCLPP_OK || v->hal->device_props(dev, props) != MSCCLPP_OK)
        core_clear_error(); /* an unnamed device only means no default table matches */
    *key = (exec_tuning_key_t){.backend = v->hal->name,
                               .device = props->name[0] ? props->name : "unknown",
                               .nranks = v->nranks,
                               .ranks_per_node = v->nlocal};
}

mscclpp_result_t exec_tuning_attach(mscclpp_executor_t *ex)
{
    exec_tuning_view_t v;
    exec_tuning_view(ex, &v);
    hal_device_props_t props;
    exec_tuning_key_t key;
    executor_key(&v, &props, &key);
    return exec_tuning_open(&key, v.tuning);
}

MSCCLPP_API int mscclpp_plan_num_blocks(const mscclpp_plan_t *plan)
{
    return plan ? exec_plan_nblocks(plan) : 0;
}

MSCCLPP_API mscclpp_result_t mscclpp_execute_launch(mscclpp_executor_t *exec,
                                                    const mscclpp_plan_t *plan, const void *send,
                                                    void *recv, size_t send_bytes,
                                                    size_t recv_bytes, mscclpp_dtype_t dtype,
                                                    mscclpp_redop_t op, mscclpp_packet_t packet,
                                                    int nblocks, int nthreads_per_block,
                                                    mscclpp_stream_t stream)
{
    CHECK_ARG(exec != NULL);
    CHECK_ARG(plan != NULL);
    /* a native algorithm takes any launch shape: it launches its own kernels */
    if (exec_native_of(plan))
        return exec_native_execute(exec, plan, send, recv, send_bytes, recv_bytes, dtype, op,
                                   nblocks, nthreads_per_block, 0, stream);
    if (nthreads_per_block < 0 || nthreads_per_block > 1024)
        return ERR_ARG("plan '%s': nthreads_per_block %d is not in [0, 1024] (0: the plan's)",
                       plan->name, nthreads_per_block);
    /* A plan's thread blocks are its program: each block runs its own op list, so the count
       cannot change at launch. Other counts are other plans (variants the DSL generates). */
    if (nblocks < 0 || (nblocks != 0 && nblocks != exec_plan_nblocks(plan)))
        return ERR(MSCCLPP_ERR_UNSUPPORTED, "plan '%s' runs %d thread blocks per rank; "
                   "nblocks=%d needs a plan variant with that many (mscclpp_executor_list_plans)",
                   plan->name, exec_plan_nblocks(plan), nblocks);
    return exec_execute(exec, plan, send, recv, send_bytes, recv_bytes, dtype, op, packet, stream,
                        0, nthreads_per_block);
}

MSCCLPP_API mscclpp_result_t mscclpp_executor_list_plans(mscclpp_executor_t *exec,
                                                         const char *collective, int inplace,
                                                         uint64_t message_bytes, int nblocks,
                                                         const mscclpp_plan_t **plans, int cap,
                                                         int *nplans)
{
    CHECK_ARG(exec != NULL);
    CHECK_ARG(collective != NULL);
    CHECK_ARG(nplans != NULL);
    CHECK_ARG(cap >= 0 && (cap == 0 || plans != NULL));
    exec_tuning_view_t v;
    exec_tuning_view(exec, &v);
    exec_tuning_candidates(v.registry, collective, v.nranks, v.nlocal, inplace != 0,
                           message_bytes, nblocks, plans, cap, nplans);
    return MSCCLPP_OK;
}

MSCCLPP_API mscclpp_result_t mscclpp_executor_choose_plan(mscclpp_executor_t *exec,
                                                          const char *collective, int inplace,
                                                          uint64_t message_bytes,
                                                          const mscclpp_plan_t **plan,
                                                          int *nthreads_per_block)
{
    CHECK_ARG(exec != NULL);
    CHECK_ARG(collective != NULL);
    CHECK_ARG(plan != NULL);
    /* the call a collective of this message size makes (the data type only decides whether a
     * plan's chunks split the sizes: bytes, the finest) */
    int n = exec->comm->nranks;
    uint64_t in = message_bytes, out = message_bytes;
    if (!strcmp(collective, "allgather")) in = message_bytes / (uint64_t)n;
    if (!strcmp(collective, "reducescatter")) out = message_bytes / (uint64_t)n;
    exec_call_t call = {collective, inplace != 0, (size_t)in, (size_t)out, MSCCLPP_UINT8, 0};
    exec_choice_t ch;
    CHECK(exec_select(exec, &call, &ch));
    /* a plan of the placement asked for: an in-place call served by an out-of-place plan stages
     * its input, which a caller running the plan itself must do (mscclpp_execute_launch) */
    if (ch.staged)
        return core_error_quiet(MSCCLPP_ERR_UNSUPPORTED, "no in-place %s plan for %llu bytes: an "
                                "in-place call runs out-of-place plan '%s' on a copy of its "
                                "input", collective, (unsigned long long)message_bytes,
                                ch.plan->name);
    *plan = ch.plan;
    if (nthreads_per_block) *nthreads_per_block = ch.nthreads;
    return MSCCLPP_OK;
}

MSCCLPP_API const char *mscclpp_executor_tuning_file(mscclpp_executor_t *exec)
{
    if (!exec) return NULL;
    exec_tuning_view_t v;
    exec_tuning_view(exec, &v);
    return *v.tuning ? (*v.tuning)->path : NULL;
}

MSCCLPP_API mscclpp_result_t mscclpp_executor_tuning_target(mscclpp_executor_t *exec,
                                                            char *device, size_t device_cap,
                                                            char *path, size_t path_cap)
{
    CHECK_ARG(exec != NULL);
    exec_tuning_view_t v;
    exec_tuning_view(exec, &v);
    hal_device_props_t props;
    exec_tuning_key_t key;
    executor_key(&v, &props, &key);
    if (device && device_cap && (size_t)snprintf(device, device_cap, "%s", key.device) >= device_cap)
        return ERR_ARG("tuning target: device name \"%s\" does not fit %zu bytes", key.device,
                       device_cap);
    if (path && path_cap && exec_tuning_default_path(&key, path, path_cap))
        return ERR_ARG("tuning target: no default path (HOME and XDG_CACHE_HOME unset, or the "
                       "path is longer than %zu bytes)", path_cap);
    return MSCCLPP_OK;
}
