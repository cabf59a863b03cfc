/*
 * Lowering: a loaded plan (executor/plan.h) + this call's sizes, dtype, op, packet type and the
 * context's resolved resources -> the launch arguments of the interpreter (kern_args_t) and the
 * per-rank device plan blob they point at (kernels/common/kern_args.h). The chunk and scratch
 * geometry it uses is executor/layout.h's, the device state it points at executor/state.h's.
 *
 * How the executor uses it, per context (plan, rank, buffers):
 *   1. exec_state_bytes() bytes of device memory for the state; exec_state_init() fills a host
 *      image that is copied there once (semaphore initial values, flag = 1). Never reset it
 *      between launches: the flag and semaphores must persist. Re-initialise (and rebuild the
 *      channels) only after a failed launch.
 *   2. exec_scratch_bytes() for the largest sizes the context serves: allocate that much
 *      zeroed, peer-mappable scratch (it is the size this rank needs; peers' lowering assumes
 *      each rank allocated at least its own exec_scratch_bytes()).
 *   3. Fill exec_resources_t: one exec_memchan_t per memory channel of the plan (global index
 *      of plan-format §1.3, i.e. plan->gpus[rank].peers[PLAN_CH_MEMORY][g] is the peer), one mapped
 *      pointer per remote buffer (gpu-level id of plan-format §1.4; memory-access ones must be set,
 *      pointing at the owner's buffer start for this call, in-allocation offset included; except
 *      that one whose owner publishes its offsets at the launch fence (exec_rbuf_published) points
 *      at the allocation's start: the kernel adds the offset the owner published in
 *      args.io_off, and such a plan's every launch must fence),
 *      one exec_switch_t per switch channel (members in the plan's rank order, each the bound
 *      buffer of that member, offset included).
 * Per call:
 *   4. exec_lower() -> exec_lowered_t. Copy `blob` to device memory (host backend: may be used
 *      in place) and set args.plan to that copy; launch args (sizeof(kern_args_t) bytes) with
 *      `nblocks` blocks of `nthreads` threads. The lowered plan depends on sizes, dtype, op and
 *      resources, not on args.input/args.output, which may be patched for a cached lowering.
 *   5. After the stream synchronised: copy the state's first sizeof(kern_state_t) bytes back
 *      and call exec_state_error() (host backend: on the state itself).
 */
#ifndef MSCCLPP_EXECUTOR_LOWER_H
#define MSCCLPP_EXECUTOR_LOWER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "executor/layout.h"
#include "executor/plan.h"
#include "executor/state.h"
#include "kernels/common/kern_args.h"
#include "mscclpp/mscclpp.h"

#ifdef __cplusplus
extern "C" {
#endif

/** One memory channel (a semaphore pair with its peer), device addresses. */
typedef struct {
    uint64_t *inbound;  /**< my counter, incremented by the peer's signal */
    uint64_t *outbound; /**< the peer's inbound counter of the matching channel, mapped */
    uint64_t *expected; /**< my count of consumed signals (zero at creation, persists) */
} exec_memchan_t;

/** One switch channel: the bound buffer of every member rank, mapped. */
typedef struct {
    int n_members;        /**< must equal the plan's rank group size */
    void *const *members; /**< members[m]: bound buffer of plan member m (offset included) */
    void *mc;             /**< multicast pointer (CUDA NVLS) or NULL */
} exec_switch_t;

/** What the executor resolved for one rank of one context (device addresses). */
typedef struct {
    const void *input; /**< this call's buffers (may be patched later in args) */
    void *output;
    void *scratch;          /**< exec_scratch_bytes() or more, zeroed at creation */
    uint64_t scratch_bytes; /**< its size */
    /** Double-scratch plans: offset of the upper half, agreed by every rank when the context
     *  was made and fixed for its life (0: derive it from each call's sizes) */
    uint64_t scratch_half;
    void *state;            /**< exec_state_bytes(), initialised by exec_state_init() */
    int n_mem_chans;        /**< plan->gpus[rank].n_chan[PLAN_CH_MEMORY] */
    const exec_memchan_t *mem_chans;
    int n_rbufs; /**< plan->gpus[rank].n_rbufs */
    void *const *rbufs;
    int n_switch; /**< plan->gpus[rank].n_chan[PLAN_CH_SWITCH] */
    const exec_switch_t *switches;
    uint64_t timeout_ns; /**< bound of every device wait; 0: MSCCLPP_TIMEOUT */
    uint32_t host_spin;  /**< host backend polls before yielding; 0: base_wait_spin(0) */
    uint32_t clock_khz;  /**< HIP wall clock rate; 0: 100 MHz */
    int max_threads;     /**< threads per block the backend's kernel takes at most; 0: any */
    /* port channels (executor/exec_port.c); all zero for plans without them */
    int n_ports;                     /**< plan->gpus[rank].n_chan[PLAN_CH_PORT] */
    const exec_memchan_t *ports;     /**< inbound + expected per port channel (outbound unused) */
    const uint64_t *pbufs;           /**< n_rbufs: in-allocation offset of each remote buffer */
    void *fifo;                      /**< kern_fifo_t of the context's proxy (host-mapped) */
    uint64_t *fifo_head;             /**< device counter of claimed FIFO slots */
    void *lbase[3];                  /**< registered input/output/scratch allocation bases */
} exec_resources_t;

/**
 * Whether remote buffer q of `rank` (an input or output buffer of a peer, reached through memory
 * channels only) gets its offset from its owner at each launch's fence (kern_args.h, "Offsets
 * published at the fence"): the memory channel whose counter slot carries it, else -1 (the
 * resource pointer must include the offset).
 */
int exec_rbuf_published(const struct mscclpp_plan *plan, int rank, int q);

/** Result of exec_lower(): one allocation, released with exec_lowered_free(). */
typedef struct {
    kern_args_t args; /**< args.plan points at `blob` until the executor repoints it */
    int nblocks;      /**< grid size (at least 1: a rank without blocks still advances its flag) */
    int nthreads;     /**< block size (plan's num_threads_per_block, at most res->max_threads) */
    size_t blob_bytes;
    void *blob; /**< the kern_plan_t image, 64-byte aligned */
} exec_lowered_t;

/** Who writes the packets of rank's buffers (what a packet wait names when it times out):
 *  w[t][c] = writer rank + 1 of chunk c of buffer t (input, output, scratch), 0: none known;
 *  w[t] holds plan->gpus[rank]'s chunk count of buffer t. Exported for tests. */
mscclpp_result_t exec_packet_writers(const struct mscclpp_plan *plan, int rank, uint16_t *w[3]);

/**
 * Lower `plan` for `rank`. `op` replaces the plan's reduce_op unless MSCCLPP_REDOP_PLAN.
 * Errors: INVALID_ARG (sizes, dtype, missing resources), INVALID_PLAN (a descriptor that would
 * reach outside a buffer for these sizes), UNSUPPORTED (port ops other than put, pws, pwsf,
 * signal, wait, flush), NO_MEMORY.
 */
mscclpp_result_t exec_lower(const struct mscclpp_plan *plan, int rank, size_t in_bytes,
                            size_t out_bytes, mscclpp_dtype_t dtype, mscclpp_redop_t op,
                            mscclpp_packet_t packet, const exec_resources_t *res,
                            exec_lowered_t **lowered);

void exec_lowered_free(exec_lowered_t *lowered);

/**
 * The launch fence's channel ids of `rank` (kern_plan_t fence ids: memory channel, or port
 * channel | KERN_FENCE_PORT when `ports`), written to `out` (may be NULL); returns how many.
 */
int exec_fence_ids(const struct mscclpp_plan *plan, int rank, bool ports, uint32_t *out);

/** Name of an op type ("rres"), "?" if out of range. */
const char *exec_op_name(int type);

#ifdef __cplusplus
}
#endif

#endif /* MSCCLPP_EXECUTOR_LOWER_H */
