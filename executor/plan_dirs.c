/*
 * Where an executor's default plans come from, in this order and nowhere else:
 *   1. MSCCLPP_PLAN_DIR, when set: that folder (the tests and scripts name the source tree's
 *      plans/ this way);
 *   2. otherwise, for a library loaded from the build folder it was made in (base/self.h: the
 *      build tree's programs, ./build/tools/mscclpp-bench as the README runs it), the source
 *      tree's plans/;
 *   3. otherwise the installed plans ($(pkgdatadir)/plans);
 *   4. then, only when MSCCLPP_CACHE_DIR is set and MSCCLPP_PLAN_DIR is not, the plans the
 *      Python DSL compiled into that cache (the Python package sets it for its own processes).
 * In a plan folder, the plans for the job's node layout (multinode/<nodes>x<ranks per node>/),
 * on a backend whose defaults are the direct plans (direct_default; the host backend: for calls
 * whose ranks all pass shareable buffers, registered shared_only) its direct/<backend>/, and
 * the backend's own (<backend>/) are registered before the generic ones: the first registered
 * match wins. An installed library thus never reads the build tree it came from, nor a user's
 * cache unasked; with no plan found at all, executor creation warns, naming where it looked.
 */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "base/config.h"
#include "base/debug.h"
#include "base/self.h"
#include "executor/registry.h"

#ifndef MSCCLPP_PLAN_DIR
#define MSCCLPP_PLAN_DIR "" /* a build outside automake: explicit settings only */
#endif

const char *exec_plan_dir(void)
{
    const char *d = config_get(CFG_MSCCLPP_PLAN_DIR);
    if (*d) return d;
    d = self_build_plan_dir();
    return *d ? d : MSCCLPP_PLAN_DIR;
}

static bool is_dir(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

/* Register the plans of `dir` if it is a folder; how many, for the log. */
static int load_if_dir(exec_registry_t *reg, const char *dir, const char *what)
{
    int n = 0, skipped = 0;
    if (!is_dir(dir)) return 0;
    if (exec_registry_load_dir(reg, dir, &n, &skipped) != MSCCLPP_OK) core_clear_error();
    INFO(SUBSYS_EXEC, "loaded %d %s plans from %s (%d skipped)", n, what, dir, skipped);
    return n;
}

/*
 * Whether the backend's default plans, for the sizes its direct/<backend>/ plans serve, are
 * those (plans/<collective>_direct.py: the peers' input read and output written, the fewest
 * bytes; on buffers the peers cannot map they run on staged stand-ins) rather than the scratch
 * plans: MSCCLPP_PLAN_DIRECT=on (always: DIRECT_ALWAYS) or off (never) says so; auto (the
 * default) asks the backend's rule, decided by measurement (docs/plan-selection.md):
 *   host: DIRECT_SHARED, for the calls whose ranks ALL pass buffers the peers can map
 *         (mscclpp_malloc, registered): there they win (0.2-1.7x the scratch plan's time),
 *         staged on malloc'd ones they lose 1.2-8.7x. The plans are registered shared_only and
 *         the ranks agree at every call they may serve (executor.c, agree_buffers);
 *   CUDA: DIRECT_SHARED too, from DIRECT_CUDA_FLOOR bytes only. On an H200 (2 ranks under MPS,
 *         mscclpp-bench, session 10) the direct plans lost at 4 MiB (allreduce 24.7 against
 *         23.4 us, allgather 27.4 against 18.4), won narrowly at 16 MiB (46.7 against 54.1,
 *         37.8 against 39.7) and by 1.2-2.8x at 64 MiB (every collective, 2/4/8 ranks);
 *         through PyTorch they lost at 2 and 8 MiB by some 15 us a call. From 32 MiB the
 *         margin covers that and the per-call agreement;
 *   HIP: none (no AMD GPU measured).
 */
typedef enum { DIRECT_NEVER, DIRECT_SHARED, DIRECT_ALWAYS } direct_mode_t;

typedef struct {
    direct_mode_t mode;
    uint64_t floor; /* the smallest message a direct plan serves under this rule (0: its own) */
} direct_rule_t;

#define DIRECT_CUDA_FLOOR (32ull << 20)

static direct_rule_t direct_default(const char *backend)
{
    const char *mode = config_get(CFG_MSCCLPP_PLAN_DIRECT);
    if (!strcmp(mode, "on")) return (direct_rule_t){DIRECT_ALWAYS, 0};
    if (!strcmp(mode, "off")) return (direct_rule_t){DIRECT_NEVER, 0};
    if (!strcmp(backend, "host")) return (direct_rule_t){DIRECT_SHARED, 0};
    if (!strcmp(backend, "cuda")) return (direct_rule_t){DIRECT_SHARED, DIRECT_CUDA_FLOOR};
    return (direct_rule_t){DIRECT_NEVER, 0};
}

/* Register the direct plans of `dir` under `rule`: shared_only for DIRECT_SHARED, and none
 * below the rule's floor. The floor narrows the registry's own copy of each plan (the loaded
 * plans are the registry's), so selection, the agreement (which runs only for calls a direct
 * plan may serve) and mscclpp-info's ranges all see the same range. */
static int load_direct(exec_registry_t *reg, const char *dir, direct_rule_t rule)
{
    int from = reg->count;
    int n = load_if_dir(reg, dir,
                        rule.mode == DIRECT_SHARED ? "direct (shared buffers)" : "direct");
    for (int i = from; i < reg->count; i++) {
        exec_registry_entry_t *e = &reg->entries[i];
        if (rule.mode == DIRECT_SHARED) e->shared_only = true;
        if (e->owned && e->owned->min_message_size < rule.floor)
            e->owned->min_message_size = rule.floor;
    }
    return n;
}

/* A plan folder: the node layout's plans, the backend's direct ones where they are its
 * defaults, the backend's, then the generic ones. */
static int load_plan_folder(exec_registry_t *reg, const char *dir, const char *backend, int nranks,
                            int nlocal)
{
    char sub[4400];
    int n = 0;
    /* several nodes of equal size: the multi-node plans for that layout come first */
    if (nlocal > 0 && nlocal < nranks && nranks % nlocal == 0) {
        snprintf(sub, sizeof sub, "%s/multinode/%dx%d", dir, nranks / nlocal, nlocal);
        n += load_if_dir(reg, sub, "multi-node");
    }
    direct_rule_t rule = direct_default(backend);
    if (rule.mode != DIRECT_NEVER) {
        snprintf(sub, sizeof sub, "%s/direct/%s", dir, backend);
        n += load_direct(reg, sub, rule);
    }
    snprintf(sub, sizeof sub, "%s/%s", dir, backend);
    n += load_if_dir(reg, sub, backend);
    return n + load_if_dir(reg, dir, "default");
}

/* The DSL's cache, when asked for: MSCCLPP_CACHE_DIR (`python3 -m mscclpp --install` writes
 * its default/ folder, mscclpp.compile the folder itself), backend folders first. */
static int load_cache(exec_registry_t *reg, const char *backend)
{
    const char *cache = config_get(CFG_MSCCLPP_CACHE_DIR);
    if (!*cache || *config_get(CFG_MSCCLPP_PLAN_DIR)) return 0;
    char dirs[5][4400];
    int k = 0, n = 0;
    direct_rule_t rule = direct_default(backend);
    if (rule.mode != DIRECT_NEVER) { /* as in a plan folder (load_plan_folder) */
        snprintf(dirs[0], sizeof dirs[0], "%s/default/direct/%s", cache, backend);
        n += load_direct(reg, dirs[0], rule);
    }
    snprintf(dirs[k++], sizeof dirs[0], "%s/default/%s", cache, backend);
    snprintf(dirs[k++], sizeof dirs[0], "%s/default", cache);
    snprintf(dirs[k++], sizeof dirs[0], "%s/%s", cache, backend);
    snprintf(dirs[k++], sizeof dirs[0], "%s", cache);
    for (int i = 0; i < k; i++) n += load_if_dir(reg, dirs[i], "cached");
    return n;
}

void exec_plans_load_defaults(exec_registry_t *reg, const char *backend, int nranks, int nlocal)
{
    const char *dir = exec_plan_dir();
    int n = *dir ? load_plan_folder(reg, dir, backend, nranks, nlocal) : 0;
    n += load_cache(reg, backend);
    if (n > 0 || reg->count > 0) return;
    bool cache = *config_get(CFG_MSCCLPP_CACHE_DIR) && !*config_get(CFG_MSCCLPP_PLAN_DIR);
    WARN(SUBSYS_EXEC,
         "no plans found in %s%s%s; collectives fail until plans are registered "
         "(install the library, or set MSCCLPP_PLAN_DIR to a folder of plans such as the source "
         "tree's plans/)",
         *config_get(CFG_MSCCLPP_PLAN_DIR) ? "MSCCLPP_PLAN_DIR=" : "",
         *dir ? dir : "(no plan folder compiled in)", cache ? " nor in MSCCLPP_CACHE_DIR" : "");
}
