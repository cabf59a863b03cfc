/*
 * Executor entry points for libmscclpp_nccl (nccl/), which runs plans on its callers' own
 * buffers when they are memory the backend can share. Exported from libmscclpp like the public
 * API, but declared only here: they exist for a caller that watches its users' memory come and
 * go (ncclMemFree, ncclCommDeregister), not for applications.
 *
 * Why forgetting is needed: contexts are keyed by the base of the allocations holding a call's
 * buffers (executor/executor.h), and hold mappings of the peers' allocations. Once an
 * allocation is freed, a new one may start at the same address; a call on it would find the
 * old context and use the peers' old mappings. Forgetting is local (no message): every rank
 * that freed its allocation drops its own contexts on it, so ranks that free their buffers
 * alike (the same program on every rank) miss together at their next call and rebuild the
 * context collectively, as on first use.
 */
#ifndef MSCCLPP_EXECUTOR_EXEC_FORGET_H
#define MSCCLPP_EXECUTOR_EXEC_FORGET_H

#include <stddef.h>

#include <mscclpp/mscclpp.h>

/*
 * *base = the start of the allocation holding [ptr, ptr + bytes) when that range lies inside
 * one allocation the executor can run plans on (the backend knows it: mscclpp_malloc memory),
 * the key its contexts use; else NULL. Nothing is registered.
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

#endif /* MSCCLPP_EXECUTOR_EXEC_FORGET_H */
