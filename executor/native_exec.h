/*
 * Native algorithms, the executor's side (internal; the module ABI is <mscclpp/native.h>).
 *
 * A registered native algorithm is a `struct mscclpp_plan` whose header fields (name,
 * collective, nranks, inplace, message-size range, thread blocks) are filled from the
 * algorithm's descriptor, so the registry selects it and the tuner lists it like any plan. Its
 * gpus[] have no operations: it never reaches the plan interpreter. Whoever runs a plan asks
 * exec_native_of() first and hands a native one to exec_native_execute().
 */
#ifndef MSCCLPP_EXECUTOR_NATIVE_EXEC_H
#define MSCCLPP_EXECUTOR_NATIVE_EXEC_H

#include <stdbool.h>
#include <stddef.h>

#include "executor/plan.h"
#include "mscclpp/mscclpp.h"

#ifdef __cplusplus
extern "C" {
#endif

/** plan->format_version of a native algorithm's plan ("NATV"); JSON plans use 0 and 1. */
#define EXEC_PLAN_FORMAT_NATIVE 0x4e415456

/** True when `plan` stands for a native algorithm. Cheap: one field compare. */
static inline bool exec_native_of(const struct mscclpp_plan *plan)
{
    return plan && plan->format_version == EXEC_PLAN_FORMAT_NATIVE;
}

/**
 * Run native algorithm `plan` for one call of `ex` (collective). `nblocks` and `nthreads`
 * (0: the algorithm's defaults) are the call's launch shape, `root` the broadcast root. Errors
 * name the algorithm, collective and rank; an error the algorithm itself returned (or the
 * per-call exchange) breaks the executor, as a plan's failure does (its ranks no longer agree on
 * where they are): later calls, a sync of `stream` and the async query report it.
 */
mscclpp_result_t exec_native_execute(mscclpp_executor_t *ex, const struct mscclpp_plan *plan,
                                     const void *send, void *recv, size_t send_bytes,
                                     size_t recv_bytes, mscclpp_dtype_t dtype, mscclpp_redop_t op,
                                     int nblocks, int nthreads, int root,
                                     mscclpp_stream_t stream);

/**
 * Release what native algorithms hold for `ex` (peer mappings, scratch, init state): the
 * executor's destroy calls it, before its communicator may go. Safe to call more than once.
 */
void exec_native_release(mscclpp_executor_t *ex);

#ifdef __cplusplus
}
#endif

#endif
