/*
 * The device state of a context (kernels/common/kern_args.h, kern_state_t): its size, its
 * initial image, and the decoding of the error a launch recorded in it (or in its mailbox)
 * into a message naming plan, rank, block, op and peer. executor/state.c also holds the
 * executor's side of failures (broken executor, stream check), declared in executor/exec.h.
 */
#ifndef MSCCLPP_EXECUTOR_STATE_H
#define MSCCLPP_EXECUTOR_STATE_H

#include <stddef.h>

#include "executor/plan.h"
#include "mscclpp/mscclpp.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Bytes of device state for `rank` of `plan` (kern_state_t + its semaphores). */
size_t exec_state_bytes(const struct mscclpp_plan *plan, int rank);

/** Fill a host image of the state (`bytes` >= exec_state_bytes()) to copy to the device. */
mscclpp_result_t exec_state_init(const struct mscclpp_plan *plan, int rank, void *image,
                                 size_t bytes);

/**
 * Report the error a launch recorded in its state (`state` = host copy of at least
 * sizeof(kern_state_t) bytes): MSCCLPP_OK if none, else the code, with a message naming rank,
 * block, op (index and name), channel and peer (recorded for mscclpp_last_error()).
 */
mscclpp_result_t exec_state_error(const void *state, const struct mscclpp_plan *plan);

#ifdef __cplusplus
}
#endif

#endif /* MSCCLPP_EXECUTOR_STATE_H */
