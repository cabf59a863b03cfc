/* Plan registry: registration, directory loading and selection (see registry.h for the rule). */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/debug.h"
#include "executor/layout.h"
#include "executor/native_exec.h"
#include "executor/registry.h"

void exec_registry_init(exec_registry_t *reg)
{
    if (reg) *reg = (exec_registry_t)EXEC_REGISTRY_INIT;
}

void exec_registry_fini(exec_registry_t *reg)
{
    if (!reg) return;
    for (int i = 0; i < reg->count; i++) {
        free(reg->entries[i].tags);
        /* a loaded plan is the registry's own; a registered one it holds (add_entry) */
        plan_free(reg->entries[i].owned ? reg->entries[i].owned
                                        : (struct mscclpp_plan *)reg->entries[i].plan);
    }
    free(reg->entries);
    exec_registry_init(reg);
}

/* ---- tags: "k=v,k2=v2"; spaces around keys and values are ignored ---- */

typedef struct {
    const char *key, *val; /* val NULL for a bare key */
    size_t klen, vlen;
} tag_t;

static const char *trim(const char *s, const char *e, size_t *len)
{
    while (s < e && (*s == ' ' || *s == '\t')) s++;
    while (e > s && (e[-1] == ' ' || e[-1] == '\t')) e--;
    *len = (size_t)(e - s);
    return s;
}

/* The next tag of *s (advancing it); false at the end. Empty items are skipped. */
static bool tag_next(const char **s, tag_t *t)
{
    while (**s) {
        const char *start = *s, *end = strchr(start, ',');
        if (!end) end = start + strlen(start);
        *s = *end ? end + 1 : end;
        const char *eq = memchr(start, '=', (size_t)(end - start));
        t->key = trim(start, eq ? eq : end, &t->klen);
        t->val = NULL;
        t->vlen = 0;
        if (eq) t->val = trim(eq + 1, end, &t->vlen);
        if (t->klen == 0 && !eq) continue; /* ",," or trailing comma */
        return true;
    }
    return false;
}

static bool tags_valid(const char *tags)
{
    tag_t t;
    while (tag_next(&tags, &t))
        if (t.klen == 0) return false;
    return true;
}

bool exec_tags_match(const char *have, const char *want)
{
    if (!want) return true;
    tag_t w;
    while (tag_next(&want, &w)) {
        bool found = false;
        const char *h = have ? have : "";
        tag_t t;
        while (!found && tag_next(&h, &t)) {
            if (t.klen != w.klen || memcmp(t.key, w.key, w.klen)) continue;
            if (!w.val) found = true;
            else found = t.val && t.vlen == w.vlen && !memcmp(t.val, w.val, w.vlen);
        }
        if (!found) return false;
    }
    return true;
}

/* ---- registration ---- */

/* Does the plan join ranks of two nodes with memory or switch channels? (Port channels cross
 * nodes; memory channels map the peer's memory, which only its node can.) */
static bool plan_off_layout(const exec_registry_t *reg, const struct mscclpp_plan *plan)
{
    if (!reg->labels || plan->nranks != reg->nranks) return false;
    const uint64_t *lab = reg->labels;
    for (int r = 0; r < plan->nranks; r++) {
        const plan_gpu_t *g = &plan->gpus[r];
        for (int i = 0; i < g->n_chan[PLAN_CH_MEMORY]; i++)
            if (lab[g->peers[PLAN_CH_MEMORY][i]] != lab[r]) return true;
        for (int s = 0; s < g->n_chan[PLAN_CH_SWITCH]; s++)
            for (int m = 0; m < g->switches[s].n_ranks; m++)
                if (lab[g->switches[s].ranks[m]] != lab[r]) return true;
    }
    return false;
}

void exec_registry_set_layout(exec_registry_t *reg, int nranks, const uint64_t *labels)
{
    reg->nranks = labels ? nranks : 0;
    reg->labels = labels;
    reg->gen++;
    for (int i = 0; i < reg->count; i++)
        reg->entries[i].off_layout =
            !reg->entries[i].made && plan_off_layout(reg, reg->entries[i].plan);
}

/* Adds an entry: at the back (the library's plans, the plans made for the job), or in front of
 * every entry the library loaded but behind the application's earlier ones (front). */
static mscclpp_result_t add_entry(exec_registry_t *reg, const struct mscclpp_plan *plan,
                                  struct mscclpp_plan *owned, int ranks_per_node,
                                  const char *tags, bool front)
{
    if (reg->count == reg->cap) {
        int cap = reg->cap ? reg->cap * 2 : 16;
        exec_registry_entry_t *e = realloc(reg->entries, (size_t)cap * sizeof *e);
        if (!e) return ERR(MSCCLPP_ERR_NO_MEMORY, "no memory for %d registry entries", cap);
        reg->entries = e;
        reg->cap = cap;
    }
    char *copy = NULL;
    if (tags && tags[0]) {
        copy = strdup(tags);
        if (!copy) return ERR(MSCCLPP_ERR_NO_MEMORY, "no memory for plan tags");
    }
    bool off = plan_off_layout(reg, plan);
    if (off)
        INFO(SUBSYS_PLAN,
             "plan \"%s\" joins ranks of different nodes by memory channels: it "
             "does not serve this job's layout",
             plan->name);
    if (!owned) plan_hold(plan); /* a caller's plan: it may destroy its handle meanwhile */
    int at = front ? reg->nfront++ : reg->count;
    memmove(&reg->entries[at + 1], &reg->entries[at],
            (size_t)(reg->count - at) * sizeof reg->entries[0]);
    reg->count++;
    reg->entries[at] = (exec_registry_entry_t){.plan = plan,
                                               .owned = owned,
                                               .ranks_per_node = ranks_per_node,
                                               .tags = copy,
                                               .off_layout = off};
    reg->gen++;
    return MSCCLPP_OK;
}

mscclpp_result_t exec_registry_add_made(exec_registry_t *reg, struct mscclpp_plan *plan)
{
    CHECK_ARG(reg != NULL && plan != NULL);
    CHECK(add_entry(reg, plan, plan, 0, NULL, false));
    reg->entries[reg->count - 1].made = true;
    reg->entries[reg->count - 1].off_layout = false;
    return MSCCLPP_OK;
}

mscclpp_result_t exec_registry_register(exec_registry_t *reg, const struct mscclpp_plan *plan,
                                        int ranks_per_node, const char *tags)
{
    CHECK_ARG(reg != NULL);
    CHECK_ARG(plan != NULL);
    CHECK_ARG(ranks_per_node >= 0);
    if (tags && !tags_valid(tags)) return ERR_ARG("plan tags \"%s\": a tag has an empty key", tags);
    CHECK(add_entry(reg, plan, NULL, ranks_per_node, tags, true));
    INFO(SUBSYS_PLAN, "registered plan \"%s\" (%s, %d ranks, %d per node, tags \"%s\")",
         plan->name, plan->collective, plan->nranks, ranks_per_node, tags ? tags : "");
    return MSCCLPP_OK;
}

static int cmp_names(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static bool is_json_name(const char *name)
{
    size_t n = strlen(name);
    return n > 5 && !strcmp(name + n - 5, ".json") && name[0] != '.';
}

static mscclpp_result_t load_dir(exec_registry_t *reg, const char *dir, int *nloaded,
                                 int *nskipped, bool front)
{
    CHECK_ARG(reg != NULL);
    CHECK_ARG(dir != NULL);
    if (nloaded) *nloaded = 0;
    if (nskipped) *nskipped = 0;
    mscclpp_result_t res = MSCCLPP_OK;
    char **names = NULL;
    size_t n = 0, cap = 0;
    int loaded = 0, skipped = 0;

    DIR *d = opendir(dir);
    if (!d && errno == ENOENT) {
        /* Expected when no default plans are installed: record it without a warning. */
        INFO(SUBSYS_PLAN, "no plan directory %s", dir);
        errno = ENOENT; /* logging may have changed it; %m below reads it */
        return core_error_quiet(MSCCLPP_ERR_SYSTEM, "cannot open plan directory %s: %m", dir);
    }
    if (!d) return ERR_SYS("cannot open plan directory %s: %m", dir);
    for (struct dirent *de; (errno = 0, de = readdir(d));) {
        if (!is_json_name(de->d_name)) continue;
        if (n == cap) {
            size_t c = cap ? cap * 2 : 32;
            char **nn = realloc(names, c * sizeof *nn);
            if (!nn) {
                res = ERR(MSCCLPP_ERR_NO_MEMORY, "no memory to list %s", dir);
                goto free_names;
            }
            names = nn;
            cap = c;
        }
        if (!(names[n] = strdup(de->d_name))) {
            res = ERR(MSCCLPP_ERR_NO_MEMORY, "no memory to list %s", dir);
            goto free_names;
        }
        n++;
    }
    if (errno) {
        res = ERR_SYS("cannot read plan directory %s: %m", dir);
        goto free_names;
    }
    if (n) qsort(names, n, sizeof *names, cmp_names);

    for (size_t i = 0; i < n; i++) {
        char path[4096];
        if ((size_t)snprintf(path, sizeof path, "%s/%s", dir, names[i]) >= sizeof path) {
            WARN(SUBSYS_PLAN, "skipping plan %s/%s: path too long", dir, names[i]);
            skipped++;
            continue;
        }
        struct stat st;
        if (stat(path, &st) != 0 || !S_ISREG(st.st_mode)) continue; /* a directory named x.json */
        mscclpp_plan_t *plan;
        mscclpp_result_t r = mscclpp_plan_load_file(path, &plan);
        if (r == MSCCLPP_ERR_INVALID_PLAN || r == MSCCLPP_ERR_SYSTEM ||
            r == MSCCLPP_ERR_INVALID_ARG) {
            WARN(SUBSYS_PLAN, "skipping plan %s: %s", path, mscclpp_last_error());
            skipped++;
            continue;
        }
        CHECK_GOTO(r, res, free_names);
        res = add_entry(reg, plan, plan, 0, NULL, front);
        if (res != MSCCLPP_OK) {
            plan_free(plan);
            goto free_names;
        }
        loaded++;
    }
    INFO(SUBSYS_PLAN, "loaded %d plans from %s (%d skipped)", loaded, dir, skipped);

free_names:
    for (size_t i = 0; i < n; i++) free(names[i]);
    free(names);
    closedir(d);
    if (nloaded) *nloaded = loaded;
    if (nskipped) *nskipped = skipped;
    return res;
}

mscclpp_result_t exec_registry_load_dir(exec_registry_t *reg, const char *dir, int *nloaded,
                                        int *nskipped)
{
    return load_dir(reg, dir, nloaded, nskipped, false);
}

mscclpp_result_t exec_registry_load_dir_first(exec_registry_t *reg, const char *dir,
                                              int *nloaded, int *nskipped)
{
    return load_dir(reg, dir, nloaded, nskipped, true);
}

/* ---- selection ---- */

uint64_t exec_message_size(const char *collective, uint64_t in_bytes, uint64_t out_bytes)
{
    return collective && !strcmp(collective, "allgather") ? out_bytes : in_bytes;
}

bool exec_call_in_place(const char *coll, int rank, const void *send, const void *recv,
                        size_t send_bytes, size_t recv_bytes)
{
    const char *s = send, *r = recv;
    if (!coll) return true;
    if (!strcmp(coll, "allgather")) return s == r + (size_t)rank * send_bytes;
    if (!strcmp(coll, "reducescatter")) return r == s + (size_t)rank * recv_bytes;
    if (!strcmp(coll, "allreduce") || !strcmp(coll, "broadcast") || !strcmp(coll, "alltoall") ||
        !strcmp(coll, "reduce"))
        return s == r;
    return true;
}

/* The call a plan must also fit (exec_registry_select_fit); NULL: any. */
typedef struct {
    int rank;
    size_t in_bytes, out_bytes;
    mscclpp_dtype_t dtype;
    bool shared; /* shared_only plans may serve it */
} select_call_t;

static mscclpp_result_t registry_select(const exec_registry_t *reg, const char *collective,
                                        int world_size, int ranks_per_node, bool inplace,
                                        uint64_t message_bytes, const char *tags,
                                        const select_call_t *call,
                                        const struct mscclpp_plan **plan)
{
    CHECK_ARG(reg != NULL);
    CHECK_ARG(collective != NULL);
    CHECK_ARG(plan != NULL);
    *plan = NULL;
    /* registered plans in order, then the plans made for the job (whenever either came) */
    for (int k = 0; k < 2 * reg->count; k++) {
        const exec_registry_entry_t *e = &reg->entries[k % reg->count];
        if (e->made != ((k >= reg->count) != reg->made_first)) continue;
        const struct mscclpp_plan *p = e->plan;
        if (strcmp(p->collective, collective) || p->nranks != world_size) continue;
        if (e->ranks_per_node && ranks_per_node > 0 && e->ranks_per_node != ranks_per_node)
            continue;
        if (p->inplace != inplace) continue;
        if (message_bytes < p->min_message_size || message_bytes > p->max_message_size) continue;
        if (!exec_tags_match(e->tags, tags) || e->off_layout) continue;
        if (e->shared_only && !(call && call->shared)) continue;
        if (call && !exec_native_of(p) &&
            !exec_layout_fits(p, call->rank, call->in_bytes, call->out_bytes, call->dtype))
            continue;
        *plan = p;
        TRACE(SUBSYS_PLAN, "selected plan \"%s\" for %s, %d ranks, %llu bytes", p->name,
              collective, world_size, (unsigned long long)message_bytes);
        return MSCCLPP_OK;
    }
    INFO(SUBSYS_PLAN, "no plan for %s (%d ranks, %d per node, %s, %llu bytes, tags \"%s\")",
         collective, world_size, ranks_per_node, inplace ? "in-place" : "out-of-place",
         (unsigned long long)message_bytes, tags ? tags : "");
    return core_error_quiet(MSCCLPP_ERR_UNSUPPORTED,
                            "no registered plan for %s with %d ranks (%d per node), %s, %llu-byte "
                            "messages%s%s among %d plans",
                            collective, world_size, ranks_per_node,
                            inplace ? "in-place" : "out-of-place",
                            (unsigned long long)message_bytes, tags && tags[0] ? ", tags " : "",
                            tags && tags[0] ? tags : "", reg->count);
}

mscclpp_result_t exec_registry_select(const exec_registry_t *reg, const char *collective,
                                      int world_size, int ranks_per_node, bool inplace,
                                      uint64_t message_bytes, const char *tags,
                                      const struct mscclpp_plan **plan)
{
    return registry_select(reg, collective, world_size, ranks_per_node, inplace, message_bytes,
                           tags, NULL, plan);
}

mscclpp_result_t exec_registry_select_fit(const exec_registry_t *reg, const char *collective,
                                          int world_size, int ranks_per_node, bool inplace,
                                          uint64_t message_bytes, int rank, size_t in_bytes,
                                          size_t out_bytes, mscclpp_dtype_t dtype, bool shared,
                                          const struct mscclpp_plan **plan)
{
    select_call_t call = {rank, in_bytes, out_bytes, dtype, shared};
    return registry_select(reg, collective, world_size, ranks_per_node, inplace, message_bytes,
                           NULL, &call, plan);
}
