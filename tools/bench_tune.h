/*
 * mscclpp-bench --tune: the auto-tuning sweep (tools/mscclpp-tune.c). The bench supplies its
 * own checked, warmed-up, rank-agreed timing of one candidate through `time_plan`, so the
 * tuner measures exactly what the bench measures.
 */
#ifndef MSCCLPP_TOOLS_BENCH_TUNE_H
#define MSCCLPP_TOOLS_BENCH_TUNE_H

#include <stddef.h>

#include "mscclpp/mscclpp.h"
#include "tools/bench_data.h"

#define TUNE_MAX_LIST 16

typedef struct {
    const char *path;                  /* table to write; "default": the executor's default */
    int colls[BENCH_COLL_COUNT], ncolls;
    size_t min_bytes, max_bytes;
    unsigned long step_factor;         /* 0: linear steps of step_bytes */
    size_t step_bytes;
    int blocks[TUNE_MAX_LIST], nblocks; /* thread-block counts to try; none: every plan's own */
    int threads[TUNE_MAX_LIST], nthreads; /* threads per block to try (0: the plan's) */
    mscclpp_dtype_t dtype;
    mscclpp_redop_t op;
    const char *command;               /* recorded in the table */
} tune_opts_t;

/*
 * Time `plan` for one call shape, launched with (nblocks, nthreads). Collective: every rank
 * calls it with the same arguments. Returns 0 with *mean_us (averaged over ranks) set, 1 when
 * the candidate failed on some rank (skipped; *why names it), -1 when the ranks can no longer
 * talk.
 */
typedef int (*tune_time_fn)(void *ctx, bench_coll_t coll, const mscclpp_plan_t *plan,
                            int nblocks, int nthreads, size_t bytes, int inplace, double *mean_us,
                            char *why, size_t why_cap);

typedef struct {
    void *ctx;
    tune_time_fn time_plan;
    mscclpp_executor_t *exec;
    int rank, nranks, nlocal;
} tune_env_t;

/** Run the sweep and (rank 0) write the table. Returns the rank's exit status. */
int bench_tune(const tune_env_t *env, const tune_opts_t *o);

/** Parse "a,b,c" of integers in [lo, hi] into list (at most TUNE_MAX_LIST); 0 or -1. */
int tune_parse_list(const char *s, int lo, int hi, int *list, int *n);

#endif
