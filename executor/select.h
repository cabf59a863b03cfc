/*
 * Which plan serves a call (executor/select.c): the one place that answers it, for every
 * collective call of the executor, mscclpp_executor_choose_plan and the tools.
 *
 *   1. the tuning table's entry for the call, when its plan is registered and accepts it;
 *   2. the registered plans, first match (registry.h: user and DSL plans, plans/<backend>/,
 *      the default plans, the cache), passing over plans that do not fit the node layout or
 *      the call's sizes;
 *   3. the plans made for the job (executor/made.c), registered last at executor creation.
 * An in-place call takes an in-place plan if one matches, else an out-of-place plan with its
 * input staged in a copy. Choices are cached per call shape.
 */
#ifndef MSCCLPP_EXECUTOR_SELECT_H
#define MSCCLPP_EXECUTOR_SELECT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "executor/plan.h"

typedef struct {
    const char *collective;
    bool inplace;
    size_t in_bytes, out_bytes;
    mscclpp_dtype_t dtype;
    int root; /* broadcast, reduce (0 otherwise) */
} exec_call_t;

/* A hash of the call's shape (collective, sizes, dtype, root, in-place-ness): the selection
 * cache's slot, and what the ranks compare to find that they make different calls. */
uint64_t exec_call_hash(const exec_call_t *c);

typedef struct {
    const struct mscclpp_plan *plan;
    int nthreads; /* threads per block for the launch; 0: the plan's */
    int rotation; /* virtual rank = (rank - rotation) mod n: a loaded rooted plan's root */
    bool staged;  /* in-place call, out-of-place plan: the input is copied aside first */
    /* The plan for the call when every rank's buffers are shareable (a shared_only plan:
     * MSCCLPP_PLAN_DIRECT=auto's direct plans, registry.h), with its rotation and staging;
     * NULL when it is `plan`. Which one runs every rank agrees at every call (executor.c,
     * agree_buffers). */
    const struct mscclpp_plan *shared;
    int shared_rotation;
    bool shared_staged;
} exec_choice_t;

/** The plan for `call`, or MSCCLPP_ERR_UNSUPPORTED saying what is served and how to add one. */
mscclpp_result_t exec_select(mscclpp_executor_t *ex, const exec_call_t *call, exec_choice_t *out);

/**
 * For a choice with a `shared` plan: what the last call of this shape ran, as every rank agreed
 * for it (executor.c, agree_buffers): 0 no call yet, 1 `shared`, -1 `plan`. What
 * mscclpp_executor_choose_plan and mscclpp_executor_direct report; each call agrees anew.
 */
int exec_select_verdict(const mscclpp_executor_t *ex, const exec_call_t *call);

/** Record the last agreement for `call`'s shape (and, for what mscclpp_executor_choose_plan
 *  reports, for the plan `shared`). */
void exec_select_agreed(mscclpp_executor_t *ex, const exec_call_t *call,
                        const struct mscclpp_plan *shared, bool all_shared);

/** Make this job's plans and register them after the loaded ones (executor creation). */
mscclpp_result_t exec_select_attach(mscclpp_executor_t *ex);

/** Release what exec_select_attach made (the registry frees the plans it owns). */
void exec_select_detach(mscclpp_executor_t *ex);

#endif
