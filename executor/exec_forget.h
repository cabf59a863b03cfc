/*
 * Executor entry points for libmscclpp_nccl (nccl/), which runs plans on its callers' own
 * buffers when they are memory the backend can share. Exported from libmscclpp like the public
 * API, but declared only here: they exist for a caller that watches its users' memory come and
 * go (ncclMemFree, ncclCommDeregister), not for applications.
 *
 * Why forgetting is needed: contexts are keyed by the base of the allocations holding a call's
 * buffers (executor/exec.h), and hold mappings of the peers' allocations. Once an
 * allocation is freed, a new one may start at the same address; a call on it would find the
 * old context and use the peers' old mappings. Forgetting is local (no message): every rank
 * that freed its allocation drops its own contexts on it, so ranks that free their buffers
 * alike (the same program on every rank) miss together at their next call and rebuild the
 * context collectively, as on first use. Contexts keyed by every rank's buffers
 * (MSCCLPP_PLAN_DIRECT=auto's agreed calls, exec_context_t.peers) are not dropped: their key
 * holds the allocation's id, so they never match a new one, and a rank may free its buffers
 * alone; they go as the least recently used, alike on every rank.
 */
#ifndef MSCCLPP_EXECUTOR_EXEC_FORGET_H
#define MSCCLPP_EXECUTOR_EXEC_FORGET_H

#include <stddef.h>

#include <mscclpp/mscclpp.h>

/*
 * *base = the start of the allocation holding [ptr, ptr + bytes) when that range lies inside
 * one allocation the peers can map (hal mem_info: mscclpp_malloc memory, the application's
 * device memory, on the host backend a shared mapping), the key of the contexts of plans that
 * reach the peers' buffers; else NULL. Nothing is registered.
 */
MSCCLPP_API mscclpp_result_t mscclpp_executor_usable(mscclpp_executor_t *exec, const void *ptr,
                                                     size_t bytes, void **base);

/*
 * Drop every context of this executor whose input or output allocation starts at `base`
 * (with its scratch, state and peer mappings), and the peer mappings its native algorithms
 * keep for buffer sets on that allocation; *dropped (may be NULL) says how many. Call it
 * between collectives, from the thread that runs them, before `base` is used again.
 */
MSCCLPP_API mscclpp_result_t mscclpp_executor_forget(mscclpp_executor_t *exec, const void *base,
                                                     int *dropped);

/*
 * Whether a call runs its plan on the caller's very buffers. With `plan` (a plan to be run with
 * mscclpp_execute): its chunk layout accepts the sizes and the buffers are memory it can use
 * (memory the peers can map when the plan reaches their input or output: mscclpp_malloc, the
 * application's device memory, on the host backend a shared mapping; else any memory its kernel
 * can use: device memory, any memory on the host backend). Without (plan NULL): the same for
 * the plan the collective `collective` (mscclpp_allreduce and friends) would choose, with
 * send_bytes/recv_bytes as it computes them. *direct = 0: stage the buffers (copies into
 * mscclpp_malloc memory, padded to sizes the layout takes), or no plan serves the call at all
 * (which the call itself then reports). Records no error.
 *
 * The allocations it looked up are handed to the executor's next call, which uses them instead
 * of asking the backend again when it is a collective or mscclpp_execute on these very buffers
 * and no mscclpp_free came between (any other call drops them): ask, then run, with nothing in
 * between that frees or maps anew the caller's buffers (NCCL's rule for a call's buffers).
 */
MSCCLPP_API mscclpp_result_t mscclpp_executor_direct(mscclpp_executor_t *exec,
                                                     const mscclpp_plan_t *plan,
                                                     const char *collective, const void *send,
                                                     const void *recv, size_t send_bytes,
                                                     size_t recv_bytes, mscclpp_dtype_t dtype,
                                                     int *direct);

/*
 * Make `exec` (new, no call made yet) an executor of point-to-point plans: plans that two
 * ranks of the communicator take part in (blocks and channels on those two only), run by
 * those two alone. Their setups meet only the plan's ranks (no barrier of all), under a tag of
 * their own, in the order each pair calls them; every launch fences, so that when the plan's
 * first op runs its peer has reached the same call. Use a separate executor for them: the
 * launch fence of collective plans assumes every rank launches alike.
 */
MSCCLPP_API mscclpp_result_t mscclpp_executor_set_p2p(mscclpp_executor_t *exec);

/* *local = 1 when `peer` shares this rank's node (a memory channel can reach it), else 0. */
MSCCLPP_API mscclpp_result_t mscclpp_executor_peer_local(mscclpp_executor_t *exec, int peer,
                                                         int *local);

#endif /* MSCCLPP_EXECUTOR_EXEC_FORGET_H */
