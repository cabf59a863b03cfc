/*
 * Lowering: a loaded plan + one call's layout (executor/layout.h) + the context's resources ->
 * the interpreter's program, a position-independent blob (kernels/common/kern_args.h), and the
 * launch arguments that point at it. See lower.h for how the executor drives it.
 *
 *   exec_lower      checks the resources against the layout, sizes the blob (blob_count,
 *                   blob_offsets), fills its header and resource tables, then each block
 *   lower_block     each plan op, split into kern ops as layout.c decides (op_piece)
 *   lower_op        one kern op: ids (channels, semaphores, barrier), descriptors, the
 *                   thread-block-group slice, and the bounds check of every byte it touches
 *
 * The plan loader (plan_load.c) already guarantees op types, descriptor kinds and shapes per op,
 * channel / remote buffer / switch / semaphore / barrier ids in range, tbg ids, pipeline nesting
 * and body lengths; what is checked here depends on the call (sizes, dtype, resources) or on
 * the interpreter's limits. Every descriptor is checked against the size of the buffer it
 * reaches, so a lowered plan never touches memory outside its buffers.
 */
#include "executor/lower.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/config.h"
#include "base/debug.h"
#include "base/wait.h"
#include "executor/layout.h"

_Static_assert((int)KERN_OP__COUNT == (int)PLAN_OP__COUNT, "kernel and plan op tables differ");
_Static_assert((int)KERN_OP_GSTOREPKT == (int)PLAN_OP_GSTOREPKT &&
                   (int)KERN_OP_PIPELINE == (int)PLAN_OP_PIPELINE &&
                   (int)KERN_OP_RRES == (int)PLAN_OP_RRES &&
                   (int)KERN_OP_SEM_ACQUIRE == (int)PLAN_OP_SEM_ACQUIRE,
               "kernel op codes must equal plan op codes");
_Static_assert((int)KERN_LOC_IN == (int)PLAN_BUF_INPUT && (int)KERN_LOC_OUT == (int)PLAN_BUF_OUTPUT &&
                   (int)KERN_LOC_SCR == (int)PLAN_BUF_SCRATCH,
               "local descriptor locations are plan buffer types");
_Static_assert((int)KERN_DT_E5M2 == (int)MSCCLPP_FP8_E5M2 &&
                   (int)KERN_DT_F64 == (int)MSCCLPP_FLOAT64 &&
                   (int)KERN_DT_I64 == (int)MSCCLPP_INT64 &&
                   (int)KERN_DT_U64 == (int)MSCCLPP_UINT64 &&
                   (int)KERN_DT__COUNT == (int)MSCCLPP_DTYPE_COUNT,
               "kernel dtypes are mscclpp_dtype_t");
_Static_assert((int)KERN_RED_MAX == (int)MSCCLPP_MAX && (int)KERN_RED_PROD == (int)MSCCLPP_PROD,
               "kernel reduce ops are mscclpp_redop_t");
_Static_assert(KERN_MAX_BARRIERS == PLAN_MAX_BARRIERS, "barrier count");
_Static_assert(KERN_MAX_BLOCKS >= PLAN_MAX_BLOCKS, "one LL flag per block (kern_state_t.flags)");

/* The loader's names: one table for the plan format and the error messages. */
const char *exec_op_name(int type)
{
    const char *n = type >= 0 ? plan_op_name((plan_op_type_t)type) : NULL;
    return n ? n : "?";
}

/* Per chunk of my input, output and scratch: the rank + 1 whose packet ops write it (0: none),
 * so that a packet wait that times out can name the peer it waited for. */
typedef struct {
    uint16_t *w[3];
    uint32_t n[3];
} writers_t;

typedef struct {
    const struct mscclpp_plan *plan;
    int rank;
    const plan_gpu_t *g;
    const exec_resources_t *res;
    writers_t writers;
    exec_layout_t lay;  /* chunk geometry of this call */
    uint64_t half;      /* double scratch: offset of the upper half, else 0 */
    uint64_t scr_local; /* bytes of my scratch usable per half */
    int b, i;           /* op being lowered, for messages */
} lower_t;

#define OPFMT "plan '%s' gpus[%d].threadblocks[%d].ops[%d] (%s)"
#define OPARGS(L, op) (L)->plan->name, (L)->rank, (L)->b, (L)->i, exec_op_name((op)->type)

/* ---- descriptors -------------------------------------------------------------------------- */

static const char *buf_name(int buf)
{
    return buf == PLAN_BUF_INPUT ? "input" : buf == PLAN_BUF_OUTPUT ? "output" : "scratch";
}

/* Bytes of buffer type `buf` of rank `owner` for this call. */
static uint64_t buf_bound(const lower_t *L, int buf, int owner)
{
    return buf == PLAN_BUF_INPUT ? L->lay.in : buf == PLAN_BUF_OUTPUT ? L->lay.out
                                                                     : L->lay.scr_owner[owner];
}

/* Byte offset and length of descriptor d on a buffer of type `buf`. */
static void desc_range(const lower_t *L, const plan_desc_t *d, int buf, kern_desc_t *kd,
                       uint64_t *len)
{
    uint64_t off, end;
    if (buf != PLAN_BUF_SCRATCH) {
        const exec_side_t *sd = buf == PLAN_BUF_INPUT ? &L->lay.si : &L->lay.so;
        off = exec_side_off(sd, d->index);
        end = exec_side_off(sd, (uint64_t)d->index + d->size);
    } else {
        /* scratch chunk c is slot c, at c*CS */
        off = (uint64_t)d->index * L->lay.cs;
        end = ((uint64_t)d->index + d->size) * L->lay.cs;
        kd->flags |= KERN_DESC_SCRATCH;
    }
    kd->off = off;
    *len = end - off;
}

/* A remote descriptor of a port op: the proxy writes the owner's buffer; we keep its id. */
static mscclpp_result_t port_desc(const lower_t *L, const plan_block_t *blk, const plan_op_t *op,
                                  const plan_desc_t *d, kern_desc_t *kd, uint64_t *bound)
{
    int q = blk->rbuf[PLAN_CH_PORT][d->ref];
    if (q >= KERN_PORT_MAX_RBUFS)
        return ERR(MSCCLPP_ERR_INVALID_PLAN, OPFMT ": remote buffer %d beyond the interpreter's "
                   "%d port remote buffers", OPARGS(L, op), q, KERN_PORT_MAX_RBUFS);
    if (!L->res->fifo || !L->res->pbufs)
        return ERR_ARG(OPFMT ": port channel resources (proxy FIFO) are missing", OPARGS(L, op));
    const plan_rbuf_t *rb = &L->g->rbufs[q];
    kd->loc = KERN_LOC_PORT;
    kd->idx = (uint32_t)q;
    *bound = buf_bound(L, rb->buf, rb->owner);
    return MSCCLPP_OK;
}

static mscclpp_result_t remote_desc(const lower_t *L, const plan_block_t *blk,
                                    const plan_op_t *op, const plan_desc_t *d, kern_desc_t *kd,
                                    uint64_t *bound)
{
    if (op->channel_type == PLAN_CH_PORT) return port_desc(L, blk, op, d, kd, bound);
    const exec_resources_t *res = L->res;
    int q = blk->rbuf[PLAN_CH_MEMORY][d->ref];
    const plan_rbuf_t *rb = &L->g->rbufs[q];
    if (!res->rbufs || q >= res->n_rbufs || !res->rbufs[q])
        return ERR_ARG(OPFMT ": remote buffer %d (the %s buffer of rank %d) has no mapped "
                       "pointer in the resources",
                       OPARGS(L, op), q, buf_name(rb->buf), rb->owner);
    kd->loc = KERN_LOC_REMOTE;
    kd->idx = (uint32_t)q;
    *bound = buf_bound(L, rb->buf, rb->owner);
    return MSCCLPP_OK;
}

/* A switch descriptor reaches every member's buffer: the bound is the smallest. */
static mscclpp_result_t switch_desc(const lower_t *L, const plan_block_t *blk,
                                    const plan_op_t *op, const plan_desc_t *d, kern_desc_t *kd,
                                    uint64_t *bound)
{
    const exec_resources_t *res = L->res;
    int s = blk->chan[PLAN_CH_SWITCH][d->ref];
    const plan_switch_t *sw = &L->g->switches[s];
    if (!res->switches || s >= res->n_switch || res->switches[s].n_members != sw->n_ranks ||
        !res->switches[s].members)
        return ERR_ARG(OPFMT ": switch channel %d (%d members) is missing from the resources "
                       "or has another member count",
                       OPARGS(L, op), s, sw->n_ranks);
    *bound = sw->buf == PLAN_BUF_SCRATCH ? UINT64_MAX : buf_bound(L, sw->buf, L->rank);
    for (int m = 0; m < sw->n_ranks; m++) {
        if (!res->switches[s].members[m])
            return ERR_ARG(OPFMT ": switch channel %d member %d (rank %d) has no pointer",
                           OPARGS(L, op), s, m, sw->ranks[m]);
        if (sw->buf == PLAN_BUF_SCRATCH && L->lay.scr_owner[sw->ranks[m]] < *bound)
            *bound = L->lay.scr_owner[sw->ranks[m]];
    }
    kd->loc = KERN_LOC_SWITCH;
    kd->idx = (uint32_t)s;
    return MSCCLPP_OK;
}

/* Resolve one descriptor: location, byte offset, length, and the size of the buffer it hits. */
static mscclpp_result_t lower_desc(const lower_t *L, const plan_block_t *blk, const plan_op_t *op,
                                   const plan_desc_t *d, kern_desc_t *kd, uint64_t *len,
                                   uint64_t *bound)
{
    memset(kd, 0, sizeof(*kd));
    switch (d->kind) {
    case PLAN_DESC_LOCAL:
        kd->loc = (uint8_t)d->buf;
        *bound = buf_bound(L, d->buf, L->rank);
        if (d->buf == PLAN_BUF_SCRATCH) *bound = L->scr_local;
        break;
    case PLAN_DESC_REMOTE: CHECK(remote_desc(L, blk, op, d, kd, bound)); break;
    default: CHECK(switch_desc(L, blk, op, d, kd, bound)); break;
    }
    desc_range(L, d, d->buf, kd, len);
    return MSCCLPP_OK;
}

/* Is descriptor j of this side in packet form for op `type` on channels `chtype`? */
static bool desc_is_packet(int type, int chtype, bool is_dst, int j)
{
    switch (type) {
    case PLAN_OP_CPKT: return is_dst;
    /* a port ppkt relays an image that is already packets (spec §2.5); memory ppkt formats */
    case PLAN_OP_PPKT: return is_dst || chtype == PLAN_CH_PORT;
    case PLAN_OP_UPKT: return !is_dst;
    case PLAN_OP_RPPKT:
    case PLAN_OP_GSTOREPKT: return true;
    case PLAN_OP_REPKT:
    case PLAN_OP_RESPKT:
    case PLAN_OP_RECPKT:
    case PLAN_OP_RECSPKT: return j >= 1;
    default: return false;
    }
}

/* ---- who writes the packets a descriptor reads --------------------------------------------- */

static void mark_writer(writers_t *wr, int buf, uint32_t index, uint32_t size, int writer)
{
    for (uint64_t c = index; c < (uint64_t)index + size && c < wr->n[buf]; c++)
        if (!wr->w[buf][c]) wr->w[buf][c] = (uint16_t)(writer + 1);
}

/* The packet destinations of op (of rank p) that land in rank me's buffers. */
static void op_writes(const struct mscclpp_plan *plan, int me, int p, const plan_block_t *blk,
                      const plan_op_t *op, writers_t *wr)
{
    const plan_gpu_t *g = &plan->gpus[p];
    for (int j = 0; j < op->n_dst; j++) {
        const plan_desc_t *d = &op->dst[j];
        if (!desc_is_packet(op->type, op->channel_type, true, j)) continue;
        if (d->kind == PLAN_DESC_LOCAL) {
            if (p == me) mark_writer(wr, d->buf, d->index, d->size, p);
        } else if (d->kind == PLAN_DESC_REMOTE) {
            const plan_rbuf_t *rb = &g->rbufs[blk->rbuf[op->channel_type][d->ref]];
            if (rb->owner == me) mark_writer(wr, rb->buf, d->index, d->size, p);
        } else {
            const plan_switch_t *sw = &g->switches[blk->chan[PLAN_CH_SWITCH][d->ref]];
            for (int m = 0; m < sw->n_ranks; m++)
                if (sw->ranks[m] == me) mark_writer(wr, sw->buf, d->index, d->size, p);
        }
    }
}

/* Scan every rank's ops once, peers before rank me (a peer is the better name). A made plan's
 * peers are stubs without ops: each says which of my chunks its packet puts write. */
static void scan_writers(const struct mscclpp_plan *plan, int me, writers_t *wr)
{
    for (int k = 1; k <= plan->nranks; k++) {
        int p = (me + k) % plan->nranks;
        const plan_gpu_t *g = &plan->gpus[p];
        for (int i = 0; i < g->n_pkt_writes; i++) {
            const plan_pkt_write_t *w = &g->pkt_writes[i];
            if (w->owner == me && w->buf <= PLAN_BUF_SCRATCH)
                mark_writer(wr, w->buf, w->index, w->size, p);
        }
        for (int b = 0; b < g->n_blocks; b++)
            for (int i = 0; i < g->blocks[b].n_ops; i++)
                op_writes(plan, me, p, &g->blocks[b], &g->blocks[b].ops[i], wr);
    }
}

static mscclpp_result_t find_writers(lower_t *L)
{
    writers_t *wr = &L->writers;
    if (!L->lay.pkt || L->plan->nranks >= UINT16_MAX) return MSCCLPP_OK;
    uint32_t n[3] = {L->g->input_chunks, L->g->output_chunks, L->g->scratch_chunks};
    for (int t = 0; t < 3; t++) {
        wr->n[t] = n[t];
        wr->w[t] = calloc(n[t] ? n[t] : 1, sizeof(uint16_t));
        if (!wr->w[t]) return ERR(MSCCLPP_ERR_NO_MEMORY, "exec_lower: out of memory");
    }
    scan_writers(L->plan, L->rank, wr);
    return MSCCLPP_OK;
}

mscclpp_result_t exec_packet_writers(const struct mscclpp_plan *plan, int rank, uint16_t *w[3])
{
    CHECK_ARG(plan != NULL && w != NULL && rank >= 0 && rank < plan->nranks);
    CHECK_ARG(plan->nranks < UINT16_MAX);
    const plan_gpu_t *g = &plan->gpus[rank];
    writers_t wr = {{w[0], w[1], w[2]}, {g->input_chunks, g->output_chunks, g->scratch_chunks}};
    for (int t = 0; t < 3; t++) {
        CHECK_ARG(w[t] != NULL || wr.n[t] == 0);
        if (wr.n[t]) memset(w[t], 0, wr.n[t] * sizeof(uint16_t));
    }
    scan_writers(plan, rank, &wr);
    return MSCCLPP_OK;
}

static void free_writers(writers_t *wr)
{
    for (int t = 0; t < 3; t++) free(wr->w[t]);
}

/* Writer (rank + 1, 0: none known) of the packets a local source descriptor reads. */
static uint16_t writer_of(const lower_t *L, const plan_desc_t *d)
{
    const writers_t *wr = &L->writers;
    if (d->kind != PLAN_DESC_LOCAL || !wr->w[d->buf] || d->index >= wr->n[d->buf]) return 0;
    return wr->w[d->buf][d->index];
}

/* All descriptors of op (sources, then destinations); *len: the shortest. */
static mscclpp_result_t lower_descs(const lower_t *L, const plan_block_t *blk,
                                    const plan_op_t *op, kern_desc_t *kd, uint64_t *bounds,
                                    uint64_t *len)
{
    int nd = 0;
    *len = UINT64_MAX;
    for (int side = 0; side < 2; side++) {
        const plan_desc_t *list = side ? op->dst : op->src;
        int n = side ? op->n_dst : op->n_src;
        for (int j = 0; j < n; j++, nd++) {
            uint64_t l;
            CHECK(lower_desc(L, blk, op, &list[j], &kd[nd], &l, &bounds[nd]));
            if (desc_is_packet(op->type, op->channel_type, side == 1, j)) {
                kd[nd].flags |= KERN_DESC_PACKET;
                if (side == 0) kd[nd].writer = writer_of(L, &list[j]);
            }
            if (l < *len) *len = l;
        }
    }
    if (nd == 0) *len = 0;
    return MSCCLPP_OK;
}

/* ---- ids: channels, semaphores, barriers -------------------------------------------------- */

/* Channel ids of an op -> rank-level channel indices, with the resources they need. */
static mscclpp_result_t lower_channels(const lower_t *L, const plan_block_t *blk,
                                       const plan_op_t *op, uint32_t *ids)
{
    const exec_resources_t *res = L->res;
    const bool port = op->channel_type == PLAN_CH_PORT;
    for (int k = 0; k < op->n_channels; k++) {
        int gc = blk->chan[op->channel_type][op->channel_ids[k]];
        if (port && gc >= KERN_PORT_MAX_CHANS)
            return ERR(MSCCLPP_ERR_INVALID_PLAN, OPFMT ": port channel %d beyond the "
                       "interpreter's %d", OPARGS(L, op), gc, KERN_PORT_MAX_CHANS);
        if (port && (!res->ports || gc >= res->n_ports || !res->ports[gc].inbound ||
                     !res->ports[gc].expected || !res->fifo))
            return ERR_ARG(OPFMT ": port channel %d (to rank %d) has no proxy resources",
                           OPARGS(L, op), gc, L->g->peers[PLAN_CH_PORT][gc]);
        /* a flush on a memory channel has nothing to wait for: no counters needed */
        if (!port && op->type != PLAN_OP_FLUSH &&
            (!res->mem_chans || gc >= res->n_mem_chans || !res->mem_chans[gc].inbound ||
             !res->mem_chans[gc].outbound || !res->mem_chans[gc].expected))
            return ERR_ARG(OPFMT ": memory channel %d (to rank %d) has no counters in the "
                           "resources",
                           OPARGS(L, op), gc, L->g->peers[PLAN_CH_MEMORY][gc]);
        ids[k] = (uint32_t)gc;
    }
    return MSCCLPP_OK;
}

/* Port channels carry put/pws/pwsf and the packet relays ppkt/rppkt (one channel per
 * destination), and the sync ops. */
static mscclpp_result_t lower_port_op(const lower_t *L, const plan_block_t *blk,
                                      const plan_op_t *op, kern_op_t *ko, uint32_t *ids)
{
    switch (op->type) {
    case PLAN_OP_PUT:
    case PLAN_OP_PWS:
    case PLAN_OP_PWSF:
    case PLAN_OP_PPKT:
    case PLAN_OP_RPPKT:
        CHECK(lower_channels(L, blk, op, ids));
        ko->n_ids = op->n_channels;
        /* fall through */
    case PLAN_OP_SIGNAL:
    case PLAN_OP_WAIT:
    case PLAN_OP_RLXSIGNAL:
    case PLAN_OP_RLXWAIT:
    case PLAN_OP_FLUSH: ko->port = 1; return MSCCLPP_OK;
    default:
        return ERR(MSCCLPP_ERR_UNSUPPORTED,
                   OPFMT ": this op is not implemented on port channels (put, pws, pwsf, "
                   "ppkt, rppkt, signal, wait and flush are)", OPARGS(L, op));
    }
}

static mscclpp_result_t lower_ids(const lower_t *L, const plan_block_t *blk, const plan_op_t *op,
                                  kern_op_t *ko, uint32_t *ids)
{
    if (op->channel_type == PLAN_CH_PORT) CHECK(lower_port_op(L, blk, op, ko, ids));
    switch (op->type) {
    case PLAN_OP_SIGNAL:
    case PLAN_OP_WAIT:
    case PLAN_OP_RLXSIGNAL:
    case PLAN_OP_RLXWAIT:
    case PLAN_OP_FLUSH:
        CHECK(lower_channels(L, blk, op, ids));
        ko->n_ids = op->n_channels;
        break;
    case PLAN_OP_SEM_ACQUIRE:
    case PLAN_OP_SEM_RELEASE:
        for (int k = 0; k < op->n_sems; k++) ids[k] = op->sem_ids[k];
        ko->n_ids = op->n_sems;
        break;
    case PLAN_OP_BARRIER:
        ko->barrier_id = op->barrier_id;
        ko->barrier_nblocks = op->barrier_nblocks;
        break;
    default: break;
    }
    return MSCCLPP_OK;
}

/* ---- one kern op --------------------------------------------------------------------------- */

/* Thread-block group: slice tbg_id of tbg_size of every descriptor, in units of the alignment,
 * the byte tail going to the last slice. */
static void tbg_slice(const lower_t *L, const plan_op_t *op, kern_desc_t *kd, int nd,
                      uint64_t *len)
{
    if (op->tbg_size <= 1) return;
    uint64_t n = op->tbg_size, j = op->tbg_id, unit = L->lay.unit;
    uint64_t units = *len / unit, tail = *len % unit;
    uint64_t q = units / n, r = units % n;
    uint64_t start = (j * q + (j < r ? j : r)) * unit;
    uint64_t size = (q + (j < r ? 1 : 0)) * unit + (j == n - 1 ? tail : 0);
    for (int k = 0; k < nd; k++) kd[k].off += start;
    *len = size;
}

/* Every byte the op can touch lies inside its buffer. */
static mscclpp_result_t check_extents(const lower_t *L, const plan_op_t *op,
                                      const kern_desc_t *kd, const uint64_t *bounds, int nd,
                                      uint64_t len)
{
    bool pkt_op = exec_op_is_packet(op->type);
    for (int k = 0; k < nd; k++) {
        uint64_t ext = kd[k].flags & KERN_DESC_PACKET ? 2 * (kd[k].off + exec_round_up(len, 4))
                                                       : kd[k].off + len;
        if (pkt_op && (kd[k].off % 4) != 0)
            return ERR(MSCCLPP_ERR_INVALID_PLAN,
                       OPFMT ": packet descriptor offset %llu is not a multiple of 4 bytes",
                       OPARGS(L, op), (unsigned long long)kd[k].off);
        if (len && ext > bounds[k])
            return ERR(MSCCLPP_ERR_INVALID_PLAN,
                       OPFMT ": %s[%d] reaches byte %llu of a %s buffer of %llu bytes for these "
                       "sizes",
                       OPARGS(L, op), k < op->n_src ? "src_buff" : "dst_buff",
                       k < op->n_src ? k : k - op->n_src, (unsigned long long)ext,
                       kd[k].flags & KERN_DESC_SCRATCH ? "scratch" : "input/output",
                       (unsigned long long)bounds[k]);
    }
    return MSCCLPP_OK;
}

/* An alltoallv plan's data op (plan.per_peer): a put, pws, pwsf or copy from the input becomes
 * KERN_OP_PUTV, whose destinations are whole peers' outputs reached through published offsets
 * (kern_args.h, "Alltoallv"); anything else stays as it is. */
static mscclpp_result_t lower_per_peer(const lower_t *L, const plan_op_t *op, kern_op_t *ko,
                                       const kern_desc_t *kd)
{
    if ((op->type != PLAN_OP_PUT && op->type != PLAN_OP_PWS && op->type != PLAN_OP_PWSF &&
         op->type != PLAN_OP_COPY) ||
        !op->n_src || op->src[0].buf != PLAN_BUF_INPUT)
        return MSCCLPP_OK;
    for (int k = 0; k < op->n_dst; k++) {
        const kern_desc_t *d = &kd[op->n_src + k];
        bool ok = op->dst[k].buf == PLAN_BUF_OUTPUT &&
                  (d->loc == KERN_LOC_OUT || d->loc == KERN_LOC_PORT ||
                   (d->loc == KERN_LOC_REMOTE &&
                    exec_rbuf_published(L->plan, L->rank, (int)d->idx) >= 0));
        if (!ok)
            return ERR(MSCCLPP_ERR_INVALID_PLAN,
                       OPFMT ": an alltoallv op's destination %d is not a peer's output with "
                             "a published offset",
                       OPARGS(L, op), k);
    }
    ko->pad = ko->type;
    ko->type = KERN_OP_PUTV;
    return MSCCLPP_OK;
}

static mscclpp_result_t lower_op(const lower_t *L, const plan_block_t *blk, const plan_op_t *op,
                                 mscclpp_redop_t callop, kern_op_t *ko, kern_desc_t *kd,
                                 uint32_t *ids)
{
    memset(ko, 0, sizeof(*ko));
    ko->type = op->type;
    CHECK(lower_ids(L, blk, op, ko, ids));
    /* reduce op: the call's, else the plan's, else sum */
    ko->redop = (uint8_t)(callop != MSCCLPP_REDOP_PLAN ? (int)callop
                          : op->reduce_op >= 0        ? op->reduce_op
                                                      : MSCCLPP_SUM);
    if (op->type == PLAN_OP_PIPELINE) return MSCCLPP_OK; /* the caller fills iterations */
    uint64_t len, bounds[2 * PLAN_MAX_DESCS];
    int nd = op->n_src + op->n_dst;
    CHECK(lower_descs(L, blk, op, kd, bounds, &len));
    ko->n_src = op->n_src;
    ko->n_dst = op->n_dst;
    tbg_slice(L, op, kd, nd, &len);
    ko->len = len;
    CHECK(check_extents(L, op, kd, bounds, nd, len));
    return L->plan->per_peer ? lower_per_peer(L, op, ko, kd) : MSCCLPP_OK;
}

/* ---- plan ops -> kern ops ------------------------------------------------------------------ */

/* One kern op's view of a plan op: pair `pair` only (if >= 0), chunk `chunk` of it (if >= 0);
 * its descriptors live in `store` (2 * PLAN_MAX_DESCS entries). */
static void op_piece(const plan_op_t *po, int pair, int64_t chunk, plan_op_t *v,
                     plan_desc_t *store)
{
    *v = *po;
    v->src = store;
    v->dst = store + PLAN_MAX_DESCS;
    if (po->n_src) memcpy(v->src, po->src, po->n_src * sizeof(plan_desc_t));
    if (po->n_dst) memcpy(v->dst, po->dst, po->n_dst * sizeof(plan_desc_t));
    if (pair >= 0) {
        v->n_src = 1;
        v->n_dst = 1;
        v->src[0] = po->src[pair < po->n_src ? pair : po->n_src - 1];
        v->dst[0] = po->dst[pair];
        if (po->channel_type == PLAN_CH_PORT && pair < po->n_channels) {
            v->channel_ids[0] = po->channel_ids[pair]; /* one channel per destination */
            v->n_channels = 1;
        }
    }
    if (chunk >= 0) {
        for (int k = 0; k < v->n_src; k++) {
            v->src[k].index += (uint32_t)chunk;
            v->src[k].size = 1;
        }
        for (int k = 0; k < v->n_dst; k++) {
            v->dst[k].index += (uint32_t)chunk;
            v->dst[k].size = 1;
        }
    }
}

/*
 * An op whose descriptors have different byte layouts across rank blocks but that cannot be
 * split per chunk (a reduce, a pipeline body, descriptors of different chunk counts): fine when
 * the chunks are even for these sizes, refused otherwise.
 */
static mscclpp_result_t check_unsplit(const lower_t *L, const plan_op_t *op)
{
    for (int k = 0; k < op->n_src + op->n_dst; k++) {
        const plan_desc_t *d = k < op->n_src ? &op->src[k] : &op->dst[k - op->n_src];
        uint32_t per;
        if (!exec_desc_gapped(L->plan, L->rank, d, &per)) continue;
        const exec_side_t *sd = d->buf == PLAN_BUF_INPUT ? &L->lay.si : &L->lay.so;
        if (sd->exact) continue;
        return ERR_ARG(OPFMT ": %s[%d] (chunks %u..%u) spans rank blocks of the %s, whose %u "
                       "chunks per block are uneven for %llu B, and this op cannot be split per "
                       "chunk (a reduce, a pipeline body, or descriptors of different sizes); "
                       "use sizes whose rank blocks split into %u chunks of a multiple of %llu "
                       "bytes",
                       OPARGS(L, op), k < op->n_src ? "src_buff" : "dst_buff",
                       k < op->n_src ? k : k - op->n_src, d->index, d->index + d->size - 1,
                       buf_name(d->buf), per, (unsigned long long)sd->size, per,
                       (unsigned long long)L->lay.word);
    }
    return MSCCLPP_OK;
}

/* A pipeline op: its iteration count and unit, and its body's length in kern ops. */
static mscclpp_result_t lower_pipeline(const lower_t *L, const plan_block_t *blk, int i,
                                       kern_op_t *k)
{
    const plan_op_t *po = &blk->ops[i];
    if (po->unit_size % L->lay.word)
        return ERR(MSCCLPP_ERR_INVALID_PLAN,
                   OPFMT ": iter_context.unit_size %llu must be a positive multiple of %llu "
                   "bytes", OPARGS(L, po), (unsigned long long)po->unit_size,
                   (unsigned long long)L->lay.word);
    uint64_t total = (uint64_t)po->num_chunks * L->lay.cs;
    uint64_t iters = (total + po->unit_size - 1) / po->unit_size;
    if (iters > UINT32_MAX)
        return ERR_ARG(OPFMT ": %llu pipeline iterations", OPARGS(L, po),
                       (unsigned long long)iters);
    /* the body as lowered: split ops count once per kern op */
    uint64_t inner = 0;
    for (int j = 1; j <= po->n_inner; j++) {
        exec_split_t bs;
        exec_op_split(L->plan, L->rank, blk, i + j, &bs);
        inner += bs.count;
    }
    if (inner > UINT16_MAX)
        return ERR(MSCCLPP_ERR_INVALID_PLAN,
                   OPFMT ": pipeline body lowers to %llu ops (at most %u)", OPARGS(L, po),
                   (unsigned long long)inner, (unsigned)UINT16_MAX);
    k->n_iter = (uint32_t)iters;
    k->unit = po->unit_size;
    k->n_inner = (uint16_t)inner;
    return MSCCLPP_OK;
}

/* Where the next kern op, descriptor and id go in the blob; d0 and i0: the current block's
 * first descriptor and id, which its ops count from (kern_op_t.desc, .ids). */
typedef struct {
    kern_op_t *ops;
    kern_desc_t *descs;
    uint32_t *ids;
    uint32_t oi, di, ii;
    uint32_t d0, i0;
} cursor_t;

/* Plan op i of the current block -> its kern ops at the cursor. */
static mscclpp_result_t lower_plan_op(lower_t *L, const plan_block_t *blk, int i,
                                      mscclpp_redop_t callop, cursor_t *cur)
{
    const plan_op_t *po = &blk->ops[i];
    kern_op_t *first = &cur->ops[cur->oi];
    L->i = i;
    exec_split_t sp;
    exec_op_split(L->plan, L->rank, blk, i, &sp);
    if (sp.conflict) CHECK(check_unsplit(L, po));
    for (int u = 0; u < sp.n_units; u++)
        for (uint32_t t = 0; t < sp.pieces[u]; t++) {
            plan_op_t v;
            plan_desc_t store[2 * PLAN_MAX_DESCS];
            const plan_op_t *lo = po;
            if (sp.pairs || sp.pieces[u] > 1) {
                op_piece(po, sp.pairs ? u : -1, sp.pieces[u] > 1 ? (int64_t)t : -1, &v, store);
                lo = &v;
            }
            kern_op_t *ko = &cur->ops[cur->oi];
            CHECK(lower_op(L, blk, lo, callop, ko, cur->descs + cur->di, cur->ids + cur->ii));
            ko->desc = cur->di - cur->d0;
            ko->ids = cur->ii - cur->i0;
            cur->di += (uint32_t)lo->n_src + lo->n_dst;
            cur->ii += (uint32_t)(lo->n_channels > lo->n_sems ? lo->n_channels : lo->n_sems);
            cur->oi++;
        }
    if (po->type == PLAN_OP_PIPELINE) CHECK(lower_pipeline(L, blk, i, first));
    return MSCCLPP_OK;
}

/* ---- the blob ------------------------------------------------------------------------------ */

/* Entries and offsets of the blob's arrays (kern_plan_t). */
typedef struct {
    uint32_t nblocks;
    uint32_t blk_ops, blk_descs, blk_ids; /* the per-block layout's strides, or 0 (blob_count) */
    uint64_t n_ops, n_descs, n_ids, n_members;
    int n_chans, n_switch, n_ports, n_fence;
    uint64_t o_blocks, o_ops, o_descs, o_ids, o_chans, o_rbufs, o_switch, o_members, o_ports,
        o_pbufs, o_fence, o_rpub;
    uint64_t bytes;
} blob_t;

/* Ordinal-0 channel of type `type` from virtual rank `from` to `to`, or -1. */
static int first_chan(const plan_gpu_t *g, int type, int to)
{
    for (int i = 0; i < g->n_chan[type]; i++)
        if (g->peers[type][i] == to) return i;
    return -1;
}

/*
 * The launch fence's channels (kern_args.h, "Launch fence"): per peer, my first memory channel
 * to it when the peer has one to me too (ordinal 0 pairs with ordinal 0, spec §5.2), else (with
 * `ports`: the context has a proxy) my first port channel on the same condition. The rule is
 * symmetric, so the peer fences with us through the matching channel. Peers reached through
 * switch channels only are not fenced. Writes the ids to `out` when not NULL; returns their
 * number.
 */
int exec_fence_ids(const struct mscclpp_plan *plan, int rank, bool ports, uint32_t *out)
{
    const plan_gpu_t *g = &plan->gpus[rank];
    int k = 0;
    for (int v = 0; v < plan->nranks; v++) {
        if (v == rank) continue;
        const plan_gpu_t *peer = &plan->gpus[v];
        int m = first_chan(g, PLAN_CH_MEMORY, v);
        int p = first_chan(g, PLAN_CH_PORT, v);
        uint32_t id;
        if (m >= 0 && first_chan(peer, PLAN_CH_MEMORY, rank) >= 0) id = (uint32_t)m;
        else if (p >= 0 && ports && first_chan(peer, PLAN_CH_PORT, rank) >= 0)
            id = (uint32_t)p | KERN_FENCE_PORT;
        else continue;
        if (out) out[k] = id;
        k++;
    }
    return k;
}

int exec_rbuf_published(const struct mscclpp_plan *plan, int rank, int q)
{
    const plan_gpu_t *g = &plan->gpus[rank];
    const plan_rbuf_t *rb = &g->rbufs[q];
    if (rb->buf == PLAN_BUF_SCRATCH || !(rb->access & (1u << PLAN_CH_MEMORY)) ||
        (rb->access & (1u << PLAN_CH_PORT)) || rb->owner == rank)
        return -1;
    /* the fence's memory channel with the owner (fence_ids' rule) */
    int m = first_chan(g, PLAN_CH_MEMORY, rb->owner);
    if (m < 0 || first_chan(&plan->gpus[rb->owner], PLAN_CH_MEMORY, rank) < 0) return -1;
    return m;
}

static int fence_ids(const lower_t *L, uint32_t *out)
{
    return exec_fence_ids(L->plan, L->rank, L->res->fifo != NULL, out);
}

/*
 * The per-block layout (kern_args.h, KERN_LAYOUT_*) when every block's ops, descriptors and
 * ids fit what a block stages and the padding of the smaller blocks to the largest at most
 * doubles the three arrays (a one-block plan, or blocks of one shape, pad nothing): then each
 * block stages them without waiting for the plan's header. Else the blob stays compact.
 */
static void blob_layout(blob_t *bl, uint64_t most_ops, uint64_t most_descs, uint64_t most_ids)
{
    const uint64_t op = sizeof(kern_op_t), desc = sizeof(kern_desc_t), id = sizeof(uint32_t);
    const uint64_t compact = bl->n_ops * op + bl->n_descs * desc + bl->n_ids * id;
    const uint64_t padded = bl->nblocks * (most_ops * op + most_descs * desc + most_ids * id);
    if (most_ops == 0 || most_ops > KERN_STAGE_OPS || most_descs > KERN_STAGE_DESCS ||
        most_ids > KERN_STAGE_IDS || padded > 2 * compact)
        return;
    bl->blk_ops = (uint32_t)most_ops;
    bl->blk_descs = (uint32_t)most_descs;
    bl->blk_ids = (uint32_t)most_ids;
    bl->n_ops = bl->nblocks * most_ops;
    bl->n_descs = bl->nblocks * most_descs;
    bl->n_ids = bl->nblocks * most_ids;
}

static void blob_count(const lower_t *L, blob_t *bl)
{
    const plan_gpu_t *g = L->g;
    uint64_t most_ops = 0, most_descs = 0, most_ids = 0;
    memset(bl, 0, sizeof *bl);
    bl->nblocks = g->n_blocks > 0 ? (uint32_t)g->n_blocks : 1;
    for (int b = 0; b < g->n_blocks; b++) {
        const uint64_t ops0 = bl->n_ops, descs0 = bl->n_descs, ids0 = bl->n_ids;
        for (int i = 0; i < g->blocks[b].n_ops; i++) {
            const plan_op_t *o = &g->blocks[b].ops[i];
            exec_split_t sp;
            exec_op_split(L->plan, L->rank, &g->blocks[b], i, &sp);
            bl->n_ops += sp.count;
            for (int u = 0; u < sp.n_units; u++)
                bl->n_descs +=
                    (uint64_t)sp.pieces[u] * (sp.pairs ? 2 : (uint64_t)o->n_src + o->n_dst);
            bl->n_ids += (uint64_t)sp.count *
                         (uint64_t)(o->n_channels > o->n_sems ? o->n_channels : o->n_sems);
        }
        if (bl->n_ops - ops0 > most_ops) most_ops = bl->n_ops - ops0;
        if (bl->n_descs - descs0 > most_descs) most_descs = bl->n_descs - descs0;
        if (bl->n_ids - ids0 > most_ids) most_ids = bl->n_ids - ids0;
    }
    blob_layout(bl, most_ops, most_descs, most_ids);
    bl->n_chans = g->n_chan[PLAN_CH_MEMORY];
    bl->n_switch = g->n_chan[PLAN_CH_SWITCH];
    bl->n_ports = g->n_chan[PLAN_CH_PORT];
    for (int s = 0; s < bl->n_switch; s++) bl->n_members += (uint64_t)g->switches[s].n_ranks;
    bl->n_fence = fence_ids(L, NULL);
}

/* Each array 64-byte aligned, in kern_plan_t's order. */
static void blob_offsets(const plan_gpu_t *g, blob_t *bl)
{
    uint64_t off = KERN_PLAN_BLOCKS_OFF; /* where the interpreter reads a block's entry */
#define PLACE(field, count, type)                                                               \
    do {                                                                                        \
        bl->field = off;                                                                        \
        off = exec_round_up(off + (uint64_t)(count) * sizeof(type), 64);                        \
    } while (0)
    PLACE(o_blocks, bl->nblocks, kern_block_t);
    PLACE(o_ops, bl->n_ops, kern_op_t);
    PLACE(o_descs, bl->n_descs, kern_desc_t);
    PLACE(o_ids, bl->n_ids, uint32_t);
    PLACE(o_chans, bl->n_chans, kern_chan_t);
    PLACE(o_rbufs, g->n_rbufs, void *);
    PLACE(o_switch, bl->n_switch, kern_switch_t);
    PLACE(o_members, bl->n_members, void *);
    PLACE(o_ports, bl->n_ports, kern_chan_t);
    PLACE(o_pbufs, g->n_rbufs, uint64_t);
    PLACE(o_fence, bl->n_fence, uint32_t);
    PLACE(o_rpub, g->n_rbufs, uint32_t);
#undef PLACE
    bl->bytes = off;
}

static void blob_header(const lower_t *L, const blob_t *bl, kern_plan_t *kp)
{
    const plan_gpu_t *g = L->g;
    const exec_resources_t *res = L->res;
    kp->magic = KERN_PLAN_MAGIC;
    kp->bytes = (uint32_t)bl->bytes;
    kp->rank = L->rank;
    kp->n_blocks = bl->nblocks;
    kp->n_ops = (uint32_t)bl->n_ops;
    kp->n_descs = (uint32_t)bl->n_descs;
    kp->n_ids = (uint32_t)bl->n_ids;
    kp->n_chans = (uint32_t)bl->n_chans;
    kp->n_rbufs = (uint32_t)g->n_rbufs;
    kp->n_switch = (uint32_t)bl->n_switch;
    kp->n_members = (uint32_t)bl->n_members;
    kp->n_sems = (uint32_t)g->n_sems;
    kp->n_ports = (uint32_t)bl->n_ports;
    kp->off_blocks = (uint32_t)bl->o_blocks;
    kp->off_ops = (uint32_t)bl->o_ops;
    kp->off_descs = (uint32_t)bl->o_descs;
    kp->off_ids = (uint32_t)bl->o_ids;
    kp->off_chans = (uint32_t)bl->o_chans;
    kp->off_rbufs = (uint32_t)bl->o_rbufs;
    kp->off_switch = (uint32_t)bl->o_switch;
    kp->off_members = (uint32_t)bl->o_members;
    kp->off_ports = (uint32_t)bl->o_ports;
    kp->off_pbufs = (uint32_t)bl->o_pbufs;
    kp->n_fence = (uint32_t)bl->n_fence;
    kp->off_fence = (uint32_t)bl->o_fence;
    kp->off_rpub = (uint32_t)bl->o_rpub;
    kp->fifo = (kern_fifo_t *)res->fifo;
    kp->fifo_head = res->fifo_head;
    for (int t = 0; t < 3; t++) kp->lbase[t] = (uint64_t)(uintptr_t)res->lbase[t];
}

/* The resource tables: memory and port channels, remote buffers, switch members. */
static void blob_resources(const lower_t *L, const blob_t *bl, char *blob)
{
    const plan_gpu_t *g = L->g;
    const exec_resources_t *res = L->res;
    kern_chan_t *kc = (kern_chan_t *)(blob + bl->o_chans);
    for (int c = 0; c < bl->n_chans; c++) {
        kc[c].peer = g->peers[PLAN_CH_MEMORY][c];
        if (res->mem_chans && c < res->n_mem_chans) {
            kc[c].inbound = res->mem_chans[c].inbound;
            kc[c].remote = res->mem_chans[c].outbound;
            kc[c].expected = res->mem_chans[c].expected;
        }
    }
    kern_chan_t *kpc = (kern_chan_t *)(blob + bl->o_ports);
    for (int c = 0; c < bl->n_ports; c++) {
        kpc[c].peer = g->peers[PLAN_CH_PORT][c];
        if (res->ports && c < res->n_ports) {
            kpc[c].inbound = res->ports[c].inbound;
            kpc[c].expected = res->ports[c].expected;
        }
    }
    fence_ids(L, (uint32_t *)(blob + bl->o_fence));
    void **krb = (void **)(blob + bl->o_rbufs);
    uint64_t *kpb = (uint64_t *)(blob + bl->o_pbufs);
    uint32_t *kpub = (uint32_t *)(blob + bl->o_rpub);
    for (int q = 0; q < g->n_rbufs; q++) {
        krb[q] = res->rbufs && q < res->n_rbufs ? res->rbufs[q] : NULL;
        kpb[q] = res->pbufs ? res->pbufs[q] : 0;
        int m = exec_rbuf_published(L->plan, L->rank, q);
        kpub[q] = m < 0 ? KERN_RPUB_NONE
                        : (uint32_t)m | (g->rbufs[q].buf == PLAN_BUF_OUTPUT ? KERN_RPUB_OUT : 0);
    }
    kern_switch_t *ksw = (kern_switch_t *)(blob + bl->o_switch);
    void **kmem = (void **)(blob + bl->o_members);
    uint32_t mfirst = 0;
    for (int s = 0; s < bl->n_switch; s++) {
        ksw[s].first_member = mfirst;
        ksw[s].n_members = (uint32_t)g->switches[s].n_ranks;
        if (res->switches && s < res->n_switch) {
            ksw[s].mc = res->switches[s].mc;
            for (int m = 0; m < g->switches[s].n_ranks && m < res->switches[s].n_members; m++)
                kmem[mfirst + m] = res->switches[s].members ? res->switches[s].members[m] : NULL;
        }
        mfirst += (uint32_t)g->switches[s].n_ranks;
    }
}

/* Every block's ops into the blob. */
static mscclpp_result_t blob_blocks(lower_t *L, const blob_t *bl, char *blob,
                                    mscclpp_redop_t callop)
{
    kern_block_t *kb = (kern_block_t *)(blob + bl->o_blocks);
    cursor_t cur = {(kern_op_t *)(blob + bl->o_ops), (kern_desc_t *)(blob + bl->o_descs),
                    (uint32_t *)(blob + bl->o_ids), 0, 0, 0, 0, 0};
    for (int b = 0; b < L->g->n_blocks; b++) {
        const plan_block_t *blk = &L->g->blocks[b];
        if (bl->blk_ops) {
            cur.oi = (uint32_t)b * bl->blk_ops;
            cur.di = (uint32_t)b * bl->blk_descs;
            cur.ii = (uint32_t)b * bl->blk_ids;
        }
        kb[b].first_op = cur.oi;
        kb[b].first_desc = cur.d0 = cur.di;
        kb[b].first_id = cur.i0 = cur.ii;
        L->b = b;
        for (int i = 0; i < blk->n_ops; i++) CHECK(lower_plan_op(L, blk, i, callop, &cur));
        kb[b].n_ops = cur.oi - kb[b].first_op;
        kb[b].n_descs = cur.di - kb[b].first_desc;
        kb[b].n_ids = cur.ii - kb[b].first_id;
    }
    return MSCCLPP_OK;
}

/* ---- exec_lower ---------------------------------------------------------------------------- */

/*
 * The scratch this call uses: the resources must hold what the layout needs, and a double
 * scratch keeps the context's halves. The halves alternate by call, so they must stay where
 * they are when the message size changes: a rank one call ahead writes into the other half of
 * its peer's scratch, and a half that moved with the size would overlap packets the peer has
 * not read yet.
 */
static mscclpp_result_t lower_scratch(lower_t *L)
{
    const exec_resources_t *res = L->res;
    uint64_t need = L->lay.scratch;
    if (need > 0 && (!res->scratch || res->scratch_bytes < need))
        return ERR_ARG("plan '%s' rank %d needs %llu bytes of scratch for these sizes, the "
                       "resources give %llu",
                       L->plan->name, L->rank, (unsigned long long)need,
                       (unsigned long long)(res->scratch ? res->scratch_bytes : 0));
    L->half = L->lay.half;
    if (L->plan->double_scratch && res->scratch_half) {
        if (L->half > res->scratch_half)
            return ERR_ARG("plan '%s' rank %d needs %llu bytes per scratch half for these "
                           "sizes, the context's halves are %llu bytes",
                           L->plan->name, L->rank, (unsigned long long)L->half,
                           (unsigned long long)res->scratch_half);
        L->half = res->scratch_half;
    }
    L->scr_local = L->plan->double_scratch ? L->half : res->scratch_bytes;
    return MSCCLPP_OK;
}

static void lower_args(const lower_t *L, exec_lowered_t *lw, mscclpp_dtype_t dtype,
                       mscclpp_redop_t op, mscclpp_packet_t packet)
{
    const exec_resources_t *res = L->res;
    kern_args_t *a = &lw->args;
    a->plan = (const kern_plan_t *)lw->blob;
    a->state = res->state;
    a->input = res->input;
    a->output = res->output;
    a->scratch = res->scratch;
    a->scratch_bytes = res->scratch_bytes;
    a->scratch_half = L->half;
    a->timeout_ns = res->timeout_ns ? res->timeout_ns : config_timeout_ns();
    a->rank = L->rank;
    a->dtype = (uint8_t)dtype;
    a->redop = (uint8_t)(op == MSCCLPP_REDOP_PLAN ? MSCCLPP_SUM : op);
    a->packet = (uint8_t)packet;
    a->double_scratch = L->plan->double_scratch ? 1 : 0;
    /* the one wait policy (base/wait.h) chooses both spins; MSCCLPP_HOST_SPIN is its input */
    a->host_spin = res->host_spin ? res->host_spin : base_wait_spin(0);
    a->dev_spin = base_wait_dev_spin();
    a->clock_khz = res->clock_khz;
    a->n_blocks = (uint32_t)lw->nblocks; /* the block entries at KERN_PLAN_BLOCKS_OFF */
}

/* Allocate the blob and fill it (header, resources, blocks) into a new exec_lowered_t. */
static mscclpp_result_t lower_blob(lower_t *L, mscclpp_redop_t op, exec_lowered_t **out)
{
    blob_t bl;
    blob_count(L, &bl);
    blob_offsets(L->g, &bl);
    if (bl.bytes > UINT32_MAX)
        return ERR_ARG("plan '%s' rank %d: lowered plan too large (%llu bytes)", L->plan->name,
                       L->rank, (unsigned long long)bl.bytes);
    exec_lowered_t *lw = calloc(1, sizeof(*lw));
    char *blob = aligned_alloc(64, (size_t)bl.bytes);
    if (!lw || !blob) {
        free(lw);
        free(blob);
        return ERR(MSCCLPP_ERR_NO_MEMORY, "exec_lower: out of memory (%llu bytes)",
                   (unsigned long long)bl.bytes);
    }
    memset(blob, 0, (size_t)bl.bytes);
    blob_header(L, &bl, (kern_plan_t *)blob);
    blob_resources(L, &bl, blob);
    mscclpp_result_t r = blob_blocks(L, &bl, blob, op);
    if (r != MSCCLPP_OK) {
        free(blob);
        free(lw);
        return r;
    }
    lw->blob = blob;
    lw->blob_bytes = (size_t)bl.bytes;
    lw->nblocks = (int)bl.nblocks;
    /* the blob's layout travels with it (lower_args fills in the rest of the arguments) */
    lw->args.blk_ops = (uint16_t)bl.blk_ops;
    lw->args.blk_descs = (uint16_t)bl.blk_descs;
    lw->args.blk_ids = (uint16_t)bl.blk_ids;
    lw->nthreads = L->plan->threads_per_block ? (int)L->plan->threads_per_block : 1024;
    if (L->res->max_threads > 0 && lw->nthreads > L->res->max_threads) {
        /* every loop of the interpreter strides over the block's threads: fewer only cost time
         * (docs/gpu.md "Interpreter": 512 moved as many bytes as 1024) */
        INFO(SUBSYS_PLAN,
             "plan '%s' rank %d: %d threads per block capped at %d, the most the "
             "backend's interpreter kernel takes",
             L->plan->name, L->rank, lw->nthreads, L->res->max_threads);
        lw->nthreads = L->res->max_threads;
    }
    *out = lw;
    return MSCCLPP_OK;
}

mscclpp_result_t exec_lower(const struct mscclpp_plan *plan, int rank, size_t in_bytes,
                            size_t out_bytes, mscclpp_dtype_t dtype, mscclpp_redop_t op,
                            mscclpp_packet_t packet, const exec_resources_t *res,
                            exec_lowered_t **lowered)
{
    CHECK_ARG(plan != NULL && res != NULL && lowered != NULL);
    CHECK_ARG(rank >= 0 && rank < plan->nranks);
    CHECK_ARG(op == MSCCLPP_REDOP_PLAN || (op >= 0 && op < MSCCLPP_REDOP_COUNT));
    CHECK_ARG(packet == MSCCLPP_PACKET_LL16 || packet == MSCCLPP_PACKET_LL8);
    CHECK_ARG(res->state != NULL);
    *lowered = NULL;
    lower_t L = {.plan = plan, .rank = rank, .g = &plan->gpus[rank], .res = res};
    CHECK(exec_layout_get(plan, rank, in_bytes, out_bytes, dtype, &L.lay));
    mscclpp_result_t r = lower_scratch(&L);
    if (r == MSCCLPP_OK) r = find_writers(&L);
    if (r == MSCCLPP_OK) r = lower_blob(&L, op, lowered);
    if (r == MSCCLPP_OK) lower_args(&L, *lowered, dtype, op, packet);
    free_writers(&L.writers);
    exec_layout_free(&L.lay);
    return r;
}

void exec_lowered_free(exec_lowered_t *lowered)
{
    if (!lowered) return;
    free(lowered->blob);
    free(lowered);
}
