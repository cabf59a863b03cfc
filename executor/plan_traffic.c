/*
 * mscclpp_plan_traffic: the bytes a plan's operations read and write for one call, all ranks
 * together (the numerator of mscclpp-bench's bound column).
 *
 * Model: every descriptor of an op moves the op's length once (a source is read, a destination
 * written), the length being the shortest of its descriptors (the executor's rule, lower.c);
 * a packet op moves twice the payload on its scratch and remote sides (LL packets: 8 payload
 * bytes per 16, LL8 4 per 8); a thread-block-group op is counted once for the group (each block
 * of the group moves its slice); pipeline bodies are counted once (their iterations split the
 * descriptors' bytes); signals, waits, barriers and semaphores move nothing. Flags and packet
 * headers beyond that, and the staging copy of an in-place call served by an out-of-place plan,
 * are not counted, so the bound this gives is an upper bound on what the plan can reach.
 */
#include <stdbool.h>
#include <string.h>

#include "base/debug.h"
#include "executor/lower.h"
#include "executor/native_exec.h"
#include "executor/plan.h"

static bool packet_op(int type)
{
    switch (type) {
    case PLAN_OP_PPKT: case PLAN_OP_RPPKT: case PLAN_OP_CPKT: case PLAN_OP_UPKT:
    case PLAN_OP_REPKT: case PLAN_OP_RESPKT: case PLAN_OP_RECPKT: case PLAN_OP_RECSPKT:
    case PLAN_OP_GSTOREPKT:
        return true;
    default:
        return false;
    }
}

/* Bytes of descriptor d: chunks [index, index + size) of its buffer, clipped to the buffer. */
static uint64_t desc_bytes(const plan_desc_t *d, uint64_t cs, uint64_t in, uint64_t out)
{
    uint64_t lo = (uint64_t)d->index * cs, hi = lo + (uint64_t)d->size * cs;
    uint64_t cap = d->buf == PLAN_BUF_INPUT ? in : d->buf == PLAN_BUF_OUTPUT ? out : UINT64_MAX;
    if (hi > cap) hi = cap;
    return hi > lo ? hi - lo : 0;
}

MSCCLPP_API mscclpp_result_t mscclpp_plan_traffic(const mscclpp_plan_t *plan, size_t send_bytes,
                                                  size_t recv_bytes, mscclpp_dtype_t dtype,
                                                  uint64_t *bytes)
{
    CHECK_ARG(plan != NULL);
    CHECK_ARG(bytes != NULL);
    *bytes = 0;
    if (exec_native_of(plan))
        return core_error_quiet(MSCCLPP_ERR_UNSUPPORTED, "'%s' is a native algorithm: the "
                                "library does not know what it moves", plan->name);
    uint64_t total = 0;
    for (int r = 0; r < plan->nranks; r++) {
        uint64_t cs = 0;
        CHECK(exec_chunk_bytes(plan, r, send_bytes, recv_bytes, dtype, &cs));
        const plan_gpu_t *g = &plan->gpus[r];
        for (int b = 0; b < g->n_blocks; b++) {
            const plan_block_t *blk = &g->blocks[b];
            for (int i = 0; i < blk->n_ops; i++) {
                const plan_op_t *op = &blk->ops[i];
                if (op->type == PLAN_OP_PIPELINE || op->n_src + op->n_dst == 0) continue;
                /* a group's blocks each list the op and move a slice: count it once */
                if (op->tbg_size > 1 && op->tbg_id != 0) continue;
                uint64_t len = UINT64_MAX;
                for (int k = 0; k < op->n_src; k++) {
                    uint64_t n = desc_bytes(&op->src[k], cs, send_bytes, recv_bytes);
                    if (n < len) len = n;
                }
                for (int k = 0; k < op->n_dst; k++) {
                    uint64_t n = desc_bytes(&op->dst[k], cs, send_bytes, recv_bytes);
                    if (n < len) len = n;
                }
                bool pkt = packet_op(op->type);
                for (int k = 0; k < op->n_src + op->n_dst; k++) {
                    const plan_desc_t *d = k < op->n_src ? &op->src[k] : &op->dst[k - op->n_src];
                    bool wire = d->kind != PLAN_DESC_LOCAL || d->buf == PLAN_BUF_SCRATCH;
                    total += pkt && wire ? 2 * len : len;
                }
            }
        }
    }
    *bytes = total;
    return MSCCLPP_OK;
}

MSCCLPP_API mscclpp_result_t mscclpp_collective_min_traffic(const char *collective, int nranks,
                                                            size_t send_bytes, size_t recv_bytes,
                                                            int inplace, uint64_t *bytes)
{
    CHECK_ARG(collective != NULL && bytes != NULL);
    CHECK_ARG(nranks >= 1);
    const uint64_t n = (uint64_t)nranks, s = send_bytes, r = recv_bytes;
    if (!strcmp(collective, "allreduce") || !strcmp(collective, "reducescatter")) {
        /* every rank reads its whole input and writes its output (in place or not: a reduce
         * rewrites its output); one rank in place has nothing to do */
        *bytes = nranks == 1 && inplace ? 0 : n * (s + r);
    } else if (!strcmp(collective, "allgather")) {
        /* every input read once, every output written whole; in place a rank's own block is
         * already in its output */
        *bytes = n * s + n * (inplace ? (r > s ? r - s : 0) : r);
    } else if (!strcmp(collective, "alltoall")) {
        /* in place a rank's block for itself stays where it is */
        *bytes = inplace ? (n - 1) * (s + r) : n * (s + r);
    } else if (!strcmp(collective, "broadcast")) {
        /* the root's input read once, every output written (in place: not the root's) */
        *bytes = s + (inplace ? n - 1 : n) * r;
    } else if (!strcmp(collective, "reduce")) {
        /* every input read once, the root's output written once */
        *bytes = nranks == 1 && inplace ? 0 : n * s + r;
    } else {
        return ERR_ARG("mscclpp_collective_min_traffic: unknown collective '%s'", collective);
    }
    return MSCCLPP_OK;
}
