/*
 * mscclpp-bench --tune: sweep, per collective, placement and message size, every registered
 * plan that serves the call (the default plans plus --plan-dir) x thread-block counts x threads
 * per block; keep the fastest (time averaged over ranks, so every rank picks the same one); write
 * the tuning table the executor loads (executor/tuning.h, docs/tuning.md).
 */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "tools/bench_tune.h"

#define TUNE_MAX_PLANS 64

typedef struct {
    int coll, inplace;
    uint64_t lo, hi; /* message bytes, inclusive; hi UINT64_MAX: no bound */
    char plan[256];
    int nblocks, nthreads;
    double us; /* at the measured size */
    size_t size;
} choice_t;

int tune_parse_list(const char *s, int lo, int hi, int *list, int *n)
{
    *n = 0;
    while (*s) {
        char *end;
        long v = strtol(s, &end, 10);
        if (end == s || v < lo || v > hi || *n == TUNE_MAX_LIST) return -1;
        list[(*n)++] = (int)v;
        if (*end == ',') end++;
        else if (*end) return -1;
        s = end;
    }
    return *n ? 0 : -1;
}

static int in_list(const int *list, int n, int v)
{
    for (int i = 0; i < n; i++)
        if (list[i] == v) return 1;
    return 0;
}

/* mkdir -p of the directory part of `path`. */
static int make_parent(const char *path)
{
    char dir[4096];
    if (snprintf(dir, sizeof dir, "%s", path) >= (int)sizeof dir) return -1;
    char *slash = strrchr(dir, '/');
    if (!slash || slash == dir) return 0;
    *slash = '\0';
    for (char *p = dir + 1; *p; p++) {
        if (*p != '/') continue;
        *p = '\0';
        if (mkdir(dir, 0755) != 0 && errno != EEXIST) return -1;
        *p = '/';
    }
    return mkdir(dir, 0755) != 0 && errno != EEXIST ? -1 : 0;
}

/* Write the table next to `path` and rename it into place, so a reader never sees half. */
static int write_table(const tune_env_t *env, const tune_opts_t *o, const char *path,
                       const char *device, const choice_t *c, int n)
{
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.tmp.%d", path, (int)getpid());
    if (make_parent(path)) {
        fprintf(stderr, "mscclpp-bench --tune: cannot create the directory of %s: %s\n", path,
                strerror(errno));
        return 1;
    }
    char when[32];
    time_t now = time(NULL);
    strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));
    json_t *entries = json_array();
    json_t *root = json_pack("{s:s, s:i, s:s, s:s, s:i, s:i, s:s, s:s, s:s, s:o}", "format",
                             "mscclpp-tuning", "version", 1, "backend", mscclpp_backend_name(),
                             "device", device, "nranks", env->nranks, "ranks_per_node",
                             env->nlocal, "created", when, "command",
                             o->command ? o->command : "", "dtype", bench_dtype_name(o->dtype),
                             "entries", entries);
    for (int i = 0; root && i < n; i++) {
        /* max_bytes: null for "no bound" (and anything json_int_t cannot hold) */
        json_t *hi = c[i].hi == UINT64_MAX || c[i].hi > (uint64_t)INT64_MAX
                         ? json_null()
                         : json_integer((json_int_t)c[i].hi);
        json_t *e = json_pack("{s:s, s:b, s:I, s:o, s:s, s:i, s:i, s:I, s:f}", "collective",
                              bench_coll_name((bench_coll_t)c[i].coll), "inplace", c[i].inplace,
                              "min_bytes", (json_int_t)c[i].lo, "max_bytes", hi, "plan",
                              c[i].plan, "nblocks", c[i].nblocks, "nthreads", c[i].nthreads,
                              "measured_bytes", (json_int_t)c[i].size, "time_us",
                              round(c[i].us * 1000) / 1000);
        if (!e || json_array_append_new(entries, e)) {
            json_decref(root);
            root = NULL;
        }
    }
    if (!root) {
        fprintf(stderr, "mscclpp-bench --tune: out of memory building %s\n", path);
        return 1;
    }
    int bad = json_dump_file(root, tmp, JSON_INDENT(2) | JSON_REAL_PRECISION(15));
    json_decref(root);
    if (bad || rename(tmp, path) != 0) {
        fprintf(stderr, "mscclpp-bench --tune: writing %s failed: %s\n", path, strerror(errno));
        remove(tmp);
        return 1;
    }
    printf("# tuning table: %s (%d entries)\n", path, n);
    return 0;
}

/* Sweep one collective and placement; append its choices (ranges already set) to *out. */
static int tune_one(const tune_env_t *env, const tune_opts_t *o, bench_coll_t coll, int inplace,
                    choice_t **out, int *nout, int *cap)
{
    size_t esize = mscclpp_dtype_size(o->dtype);
    int first = *nout;
    for (size_t bytes = o->min_bytes; bytes <= o->max_bytes;) {
        bench_shape_t s;
        if (bench_shape(coll, bytes, esize, env->nranks, &s)) {
            size_t size = bench_shape_bytes(coll, &s, esize); /* the executor's message size */
            const mscclpp_plan_t *plans[TUNE_MAX_PLANS];
            int np = 0;
            if (mscclpp_executor_list_plans(env->exec, bench_coll_name(coll), inplace, size, 0,
                                            plans, TUNE_MAX_PLANS, &np) != MSCCLPP_OK)
                return -1;
            if (np > TUNE_MAX_PLANS) np = TUNE_MAX_PLANS;
            choice_t best = {.us = INFINITY};
            for (int p = 0; p < np; p++) {
                int nb = mscclpp_plan_num_blocks(plans[p]);
                if (o->nblocks && !in_list(o->blocks, o->nblocks, nb)) continue;
                for (int t = 0; t < o->nthreads; t++) {
                    double us = 0;
                    char why[256] = "";
                    int r = env->time_plan(env->ctx, coll, plans[p], nb, o->threads[t], bytes,
                                           inplace, &us, why, sizeof why);
                    if (r < 0) return -1;
                    if (env->rank == 0) {
                        printf("%-13s %-3s %12zu  %-40s %4d %5d  ", bench_coll_name(coll),
                               inplace ? "ip" : "oop", size, mscclpp_plan_name(plans[p]), nb,
                               o->threads[t]);
                        if (r) printf("skipped: %s\n", why);
                        else printf("%10.2f us\n", us);
                        fflush(stdout);
                    }
                    if (r) continue;
                    if (us < best.us) {
                        best.us = us;
                        best.nblocks = nb;
                        best.nthreads = o->threads[t];
                        snprintf(best.plan, sizeof best.plan, "%s", mscclpp_plan_name(plans[p]));
                        best.lo = mscclpp_plan_min_message_size(plans[p]);
                        best.hi = mscclpp_plan_max_message_size(plans[p]);
                    }
                }
            }
            if (isfinite(best.us)) {
                if (*nout == *cap) {
                    int c = *cap ? *cap * 2 : 32;
                    choice_t *nc = realloc(*out, (size_t)c * sizeof *nc);
                    if (!nc) return -1;
                    *out = nc;
                    *cap = c;
                }
                best.coll = coll;
                best.inplace = inplace;
                best.size = size;
                (*out)[(*nout)++] = best;
            }
        }
        size_t next = o->step_factor ? bytes * o->step_factor : bytes + o->step_bytes;
        if (next <= bytes) break;
        bytes = next;
    }
    /* Ranges: each measured size stands for the sizes above the previous one (the first from
       0, the last without bound), clipped to what its plan accepts; equal neighbours merge. */
    int w = first;
    for (int i = first; i < *nout; i++) {
        choice_t c = (*out)[i];
        uint64_t lo = i == first ? 0 : (uint64_t)(*out)[i - 1].size + 1;
        uint64_t hi = i == *nout - 1 ? UINT64_MAX : (uint64_t)c.size;
        if (lo < c.lo) lo = c.lo; /* c.lo/c.hi hold the plan's own limits here */
        if (hi > c.hi) hi = c.hi;
        c.lo = lo;
        c.hi = hi;
        choice_t *prev = w > first ? &(*out)[w - 1] : NULL;
        if (prev && !strcmp(prev->plan, c.plan) && prev->nblocks == c.nblocks &&
            prev->nthreads == c.nthreads && prev->hi != UINT64_MAX && prev->hi + 1 == c.lo) {
            prev->hi = c.hi;
            continue;
        }
        (*out)[w++] = c;
    }
    *nout = w;
    return 0;
}

int bench_tune(const tune_env_t *env, const tune_opts_t *o)
{
    char device[128] = "", defpath[4096] = "";
    if (mscclpp_executor_tuning_target(env->exec, device, sizeof device, defpath,
                                       sizeof defpath) != MSCCLPP_OK &&
        !strcmp(o->path, "default")) {
        fprintf(stderr, "mscclpp-bench --tune: %s\n", mscclpp_last_error());
        return 1;
    }
    const char *path = strcmp(o->path, "default") ? o->path : defpath;
    if (env->rank == 0) {
        printf("# mscclpp-bench --tune: backend %s, device %s, %d ranks (%d per node), %s\n",
               mscclpp_backend_name(), device, env->nranks, env->nlocal,
               bench_dtype_name(o->dtype));
        printf("# %-11s %-3s %12s  %-40s %4s %5s  %10s\n", "collective", "", "bytes", "plan",
               "blks", "thrds", "time (mean over ranks)");
        fflush(stdout);
    }
    choice_t *c = NULL;
    int n = 0, cap = 0, status = 0;
    for (int k = 0; k < o->ncolls && !status; k++)
        for (int ip = 0; ip < 2 && !status; ip++)
            if (tune_one(env, o, (bench_coll_t)o->colls[k], ip, &c, &n, &cap)) status = 1;
    if (!status && env->rank == 0) {
        if (n == 0) {
            fprintf(stderr, "mscclpp-bench --tune: no candidate plan ran for any size; no table "
                            "written\n");
            status = 1;
        } else {
            status = write_table(env, o, path, device, c, n);
        }
    }
    free(c);
    return status;
}
