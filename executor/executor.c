/*
 * The executor: runs a loaded plan on this rank.
 *
 * A context holds what a plan needs for one pair of buffers: scratch, the counters of its
 * memory channels paired with the peers' (plan-format §5.2), the peers' buffers it uses (§5.4),
 * the members of its switch channels (§5.5) and the device state (flag, semaphores, barriers,
 * error record) that persists across launches. Building one is collective: every rank of the
 * plan builds the same contexts in the same order. Lowered plans are cached per context and
 * call shape (sizes, dtype, op, packet type).
 *
 * Rank rotation: a context may run the plan with virtual rank v = (rank - rotation) mod n, so a
 * broadcast plan written for root 0 serves any root.
 *
 * Failures: a collective that failed on one rank leaves the others in an unknown place (some
 * finished, some wait, setup messages half exchanged), and rebuilding a context needs every
 * rank. So the first failure of a collective step (context setup, the per-call offset exchange,
 * a launch, or an error the interpreter recorded) breaks the executor for good, as ncclCommAbort
 * does: every later call returns that error, naming it, at once. Errors of launches on a user
 * stream reach the host through each context's error mailbox (kern_args.h) with no device
 * sync: every call checks the mailboxes first, mscclpp_stream_synchronize asks the executor
 * after its sync (the executor is an error source of the streams it launched on, hal_api.h),
 * and mscclpp_executor_get_async_error polls them.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/config.h"
#include "core/core.h"
#include "base/debug.h"
#include "base/wire.h"
#include "base/wait.h"
#include "executor/exec_port.h"
#include "executor/lower.h"
#include "executor/plan.h"
#include "executor/registry.h"
#include "executor/tuning.h"
#include "hal/hal_api.h"

#define EXEC_WIRE_MAGIC 0x43584550u /* "PEXC": context setup message */
#define EXEC_WIRE_VERSION 1u
/* Bootstrap tags of context setup: base + sequence, inside the 0..32767 every MPI allows */
#define EXEC_TAG_BASE 0x6000
#define EXEC_TAG_SPAN 0x2000

typedef struct exec_lowcache {
    struct exec_lowcache *next;
    size_t in_bytes, out_bytes;
    mscclpp_dtype_t dtype;
    mscclpp_redop_t op;
    mscclpp_packet_t packet;
    exec_lowered_t *low;
    void *dev_blob; /* device copy of low->blob */
} exec_lowcache_t;

typedef struct exec_context {
    struct exec_context *next;
    const struct mscclpp_plan *plan;
    void *send_base, *recv_base; /* key: the allocations holding the buffers */
    int rotation;
    int vrank;
    size_t in_alloc, out_alloc; /* sizes of those allocations */
    bool broken;                /* a launch failed: state undefined, rebuild before reuse */
    bool io_offsets;            /* some rank addresses a peer's input/output: exchange the
                                 * in-allocation offsets of every call */
    bool resolved;              /* rbufs/members hold pointers for peer_off */
    void **peer_ptr[3];         /* per virtual rank: input/output allocation base, scratch */
    uint64_t *peer_off[2];      /* per virtual rank: offsets of the current call's buffers */

    void *scratch;
    uint64_t scratch_bytes;
    uint64_t scratch_half; /* double-scratch plans: upper half's offset, the same on all ranks */
    void *state;
    size_t state_bytes;
    uint64_t *inbound;  /* n_mem 64-byte slots, shareable */
    uint64_t *expected; /* n_mem counters, device memory */
    uint64_t *dummy;    /* target of signals on channels the peer does not pair */
    exec_memchan_t *chans;
    void **rbufs;
    exec_switch_t *switches;
    void **members;
    void **mappings; /* peer mappings to release */
    int n_mappings;
    exec_lowcache_t *lowered;
    kern_error_t *mailbox; /* host-mapped copy of the interpreter's first error (kern_args.h) */
    exec_port_t *port; /* port channels and their proxy (executor/exec_port.c), or NULL */
} exec_context_t;

struct mscclpp_executor {
    mscclpp_comm_t *comm;
    const hal_ops_t *hal;
    exec_registry_t registry;
    exec_context_t *contexts;
    exec_context_t *dead; /* setups that failed after talking: peers may still map their
                           * memory, so it is released only with the executor */
    uint32_t context_seq;
    void *tmp;        /* staging input for in-place calls served by out-of-place plans */
    size_t tmp_bytes;
    uint64_t *offs;   /* allgather scratch for per-call offsets, 2 per rank */
    uint64_t source;  /* id as an error source of streams (hal_api.h) */
    bool setup_talked; /* the context setup in progress has sent or received a message */
    /* The executor is broken once a collective failed (see the file header). A stream sync may
     * poll the mailboxes from another thread: the lock guards the context list and these. */
    pthread_mutex_t lock;
    mscclpp_result_t broken;
    char broken_msg[768];
    exec_tuning_t *tuning; /* loaded tuning table, or NULL (executor/tuning.h) */
    int launch_nthreads;   /* threads per block for the call in progress; 0: the plan's. The
                              executor runs one call at a time, so a field carries it. */
};

#define SLOT_U64 8 /* counters are 64 bytes apart */

static void lowcache_flush(mscclpp_executor_t *ex, exec_context_t *c);

static int vr_to_pr(const exec_context_t *c, int v, int n) { return (v + c->rotation) % n; }

/* ---- context setup ----------------------------------------------------------------------- */

/* The allocation holding p (base and size); for memory the backend does not know, the
 * pointer itself and size 0. */
static void alloc_of(const hal_ops_t *hal, const void *p, void **base, size_t *size)
{
    *base = (void *)p;
    *size = 0;
    if (p && hal->mem_range(p, base, size) != MSCCLPP_OK) {
        core_clear_error();
        *base = (void *)p;
        *size = 0;
    }
}

/* Number of type-T channels gpu `from` lists to `to`. */
static int chan_count(const plan_gpu_t *g, int type, int to)
{
    int k = 0;
    for (int i = 0; i < g->n_chan[type]; i++)
        if (g->peers[type][i] == to) k++;
    return k;
}

/* Bit mask of buffer types virtual rank `peer` maps from virtual rank `me` (port-only remote
 * buffers are exchanged by exec_port.c instead) */
static unsigned needs_from(const struct mscclpp_plan *plan, int peer, int me)
{
    const plan_gpu_t *g = &plan->gpus[peer];
    unsigned mask = 0;
    for (int q = 0; q < g->n_rbufs; q++)
        if (g->rbufs[q].owner == me && (g->rbufs[q].access & (1u << PLAN_CH_MEMORY)))
            mask |= 1u << g->rbufs[q].buf;
    for (int s = 0; s < g->n_chan[PLAN_CH_SWITCH]; s++) {
        const plan_switch_t *sw = &g->switches[s];
        for (int m = 0; m < sw->n_ranks; m++)
            if (sw->ranks[m] == me) mask |= 1u << sw->buf;
    }
    return mask;
}

/* True when some rank of the plan addresses another rank's input or output buffer. */
static bool plan_addresses_io(const struct mscclpp_plan *plan)
{
    for (int r = 0; r < plan->nranks; r++)
        for (int v = 0; v < plan->nranks; v++)
            if (v != r && (needs_from(plan, r, v) & 3u)) return true;
    for (int r = 0; r < plan->nranks; r++) /* port channels write peers' input/output too */
        for (int q = 0; q < plan->gpus[r].n_rbufs; q++)
            if (plan->gpus[r].rbufs[q].buf != PLAN_BUF_SCRATCH &&
                plan->gpus[r].rbufs[q].owner != r)
                return true;
    return false;
}

static bool pair_talks(const struct mscclpp_plan *plan, int a, int b)
{
    return needs_from(plan, a, b) || needs_from(plan, b, a) ||
           chan_count(&plan->gpus[a], PLAN_CH_MEMORY, b) ||
           chan_count(&plan->gpus[b], PLAN_CH_MEMORY, a);
}

/* What this rank registers for a buffer type: whole allocations for input and output (the
 * call's offsets inside them travel per call), the scratch itself. */
static void *buffer_of(const exec_context_t *c, int type)
{
    switch (type) {
    case PLAN_BUF_INPUT: return c->send_base;
    case PLAN_BUF_OUTPUT: return c->recv_base;
    default: return c->scratch;
    }
}

static const char *buf_name(int type)
{
    return type == PLAN_BUF_INPUT ? "input" : type == PLAN_BUF_OUTPUT ? "output" : "scratch";
}

static mscclpp_result_t put_regmem(mscclpp_executor_t *ex, wire_writer_t *w, void *ptr,
                                   size_t bytes)
{
    mscclpp_regmem_t *m = NULL;
    CHECK(mscclpp_register_memory(ex->comm, ptr, bytes, MSCCLPP_TRANSPORT_IPC, &m));
    uint8_t buf[REGMEM_WIRE_MAX];
    size_t len = 0;
    mscclpp_result_t res = mscclpp_regmem_serialize(m, buf, sizeof buf, &len);
    mscclpp_regmem_destroy(m);
    CHECK(res);
    wire_put_u32(w, (uint32_t)len);
    wire_put_bytes(w, buf, len);
    return MSCCLPP_OK;
}

static mscclpp_result_t get_regmem(mscclpp_executor_t *ex, exec_context_t *c, wire_reader_t *r,
                                   int peer, void **ptr)
{
    uint32_t len = wire_get_u32(r);
    uint8_t buf[REGMEM_WIRE_MAX];
    if (r->bad || len > sizeof buf)
        return ERR(MSCCLPP_ERR_REMOTE, "executor: malformed setup message from rank %d", peer);
    wire_get_bytes(r, buf, len);
    mscclpp_regmem_t *m = NULL;
    CHECK(mscclpp_regmem_deserialize(ex->comm, buf, len, &m));
    if (!m->ptr) {
        mscclpp_regmem_destroy(m);
        return ERR(MSCCLPP_ERR_UNSUPPORTED,
                   "executor: rank %d is on another node; plans across nodes need a network "
                   "transport, not built yet", peer);
    }
    *ptr = m->ptr;
    c->mappings[c->n_mappings++] = m->import_base;
    m->import_base = NULL;
    mscclpp_regmem_destroy(m);
    return MSCCLPP_OK;
}

static void context_free(mscclpp_executor_t *ex, exec_context_t *c)
{
    if (!c) return;
    const hal_ops_t *hal = ex->hal;
    lowcache_flush(ex, c);
    exec_port_destroy(c->port);
    for (int i = 0; i < c->n_mappings; i++) comm_unmap_peer(ex->comm, c->mappings[i]);
    if (c->scratch) hal->mem_free(c->scratch);
    if (c->state) hal->mem_free(c->state);
    if (c->inbound) hal->mem_free(c->inbound);
    if (c->expected) hal->mem_free(c->expected);
    if (c->mailbox) hal->host_free(c->mailbox);
    free(c->chans);
    free(c->rbufs);
    free(c->switches);
    free(c->members);
    free(c->mappings);
    for (int t = 0; t < 3; t++) free(c->peer_ptr[t]);
    for (int t = 0; t < 2; t++) free(c->peer_off[t]);
    free(c);
}

static mscclpp_result_t context_create(mscclpp_executor_t *ex, const struct mscclpp_plan *plan,
                                       void *send_base, size_t in_alloc, void *recv_base,
                                       size_t out_alloc, int rotation, mscclpp_dtype_t dtype,
                                       exec_context_t **out)
{
    mscclpp_comm_t *comm = ex->comm;
    const hal_ops_t *hal = ex->hal;
    const int n = comm->nranks;
    mscclpp_result_t res = MSCCLPP_OK;
    exec_context_t *c = calloc(1, sizeof *c);
    if (!c) return ERR(MSCCLPP_ERR_NO_MEMORY, "executor: out of memory");
    c->plan = plan;
    c->send_base = send_base;
    c->recv_base = recv_base;
    c->in_alloc = in_alloc;
    c->out_alloc = out_alloc;
    c->io_offsets = plan_addresses_io(plan);
    c->rotation = rotation;
    c->vrank = (comm->rank - rotation + n) % n;
    const int me = c->vrank;
    const plan_gpu_t *g = &plan->gpus[me];
    uint32_t seq = ex->context_seq++;
    const int tag = EXEC_TAG_BASE + (int)(seq % EXEC_TAG_SPAN);

    bool in_share = in_alloc > 0, out_share = out_alloc > 0;

    /* scratch sized for the largest call these allocations allow, capped by the plan's range */
    uint64_t cap_in = in_alloc, cap_out = out_alloc;
    if (plan->max_message_size && cap_in > plan->max_message_size) cap_in = plan->max_message_size;
    if (plan->max_message_size && cap_out > plan->max_message_size)
        cap_out = plan->max_message_size;
    uint64_t scratch_bytes = 0;
    {
        /* exec_scratch_bytes wants consistent sizes: derive both from the chunk size */
        uint64_t cin = g->input_chunks, cout = g->output_chunks;
        /* the largest chunk any call on these buffers can have, rounded up so that the
         * lowering's chunk size (a ceiling rounded to the alignment) never exceeds it */
        uint64_t per_chunk = 0, unit = plan->alignment > 64 ? plan->alignment : 64;
        if (cin) per_chunk = (cap_in + cin - 1) / cin;
        if (cout && (!cin || (cap_out + cout - 1) / cout < per_chunk))
            per_chunk = (cap_out + cout - 1) / cout;
        per_chunk = (per_chunk + unit - 1) / unit * unit;
        uint64_t in_b = per_chunk * cin, out_b = per_chunk * cout;
        if (per_chunk > 0 &&
            exec_scratch_bytes(plan, me, in_b, out_b, dtype, &scratch_bytes) != MSCCLPP_OK) {
            core_clear_error();
            scratch_bytes = 0;
        }
        /* sizes the lowering would refuse anyway: still give the plan room (LL and double
         * scratch at most double it twice) so the error comes from the lowering, with its
         * explanation */
        if (g->scratch_chunks && scratch_bytes == 0)
            scratch_bytes = (per_chunk + 64) * g->scratch_chunks * 4;
    }
    if (plan->double_scratch) {
        /* every rank must put the upper half at the same offset for every call (lower.c):
         * agree on half of the smallest scratch any rank has */
        uint64_t *all = calloc((size_t)n, sizeof *all);
        if (!all) {
            res = ERR(MSCCLPP_ERR_NO_MEMORY, "executor: out of memory");
            goto fail;
        }
        all[comm->rank] = scratch_bytes;
        res = mscclpp_bootstrap_allgather(comm->boot, all, sizeof *all);
        uint64_t least = scratch_bytes;
        for (int r = 0; r < n; r++)
            if (all[r] < least) least = all[r];
        free(all);
        if (res != MSCCLPP_OK) goto fail;
        c->scratch_half = least / 2 / 64 * 64;
    }
    if (scratch_bytes) {
        CHECK_GOTO(hal->mem_alloc_shareable(scratch_bytes, &c->scratch), res, fail);
        CHECK_GOTO(hal->memset_sync(c->scratch, 0, scratch_bytes), res, fail);
        c->scratch_bytes = scratch_bytes;
    }

    /* device state */
    c->state_bytes = exec_state_bytes(plan, me);
    {
        void *image = calloc(1, c->state_bytes);
        if (!image) {
            res = ERR(MSCCLPP_ERR_NO_MEMORY, "executor: out of memory");
            goto fail;
        }
        res = exec_state_init(plan, me, image, c->state_bytes);
        if (res == MSCCLPP_OK) res = hal->mem_alloc(c->state_bytes, &c->state);
        if (res == MSCCLPP_OK) res = hal->memcpy_sync(c->state, image, c->state_bytes);
        free(image);
        if (res != MSCCLPP_OK) goto fail;
    }
    /* host-mapped and zeroed (host_alloc clears): read without a device sync */
    CHECK_GOTO(hal->host_alloc(sizeof *c->mailbox, (void **)&c->mailbox), res, fail);
    memset(c->mailbox, 0, sizeof *c->mailbox);

    /* memory channel counters */
    int n_mem = g->n_chan[PLAN_CH_MEMORY];
    size_t inbound_bytes = (size_t)(n_mem + 1) * SLOT_U64 * sizeof(uint64_t);
    CHECK_GOTO(hal->mem_alloc_shareable(inbound_bytes, (void **)&c->inbound), res, fail);
    CHECK_GOTO(hal->memset_sync(c->inbound, 0, inbound_bytes), res, fail);
    c->dummy = c->inbound + (size_t)n_mem * SLOT_U64;
    CHECK_GOTO(hal->mem_alloc((size_t)(n_mem + 1) * sizeof(uint64_t), (void **)&c->expected), res,
               fail);
    CHECK_GOTO(hal->memset_sync(c->expected, 0, (size_t)(n_mem + 1) * sizeof(uint64_t)), res,
               fail);
    c->chans = calloc((size_t)n_mem + 1, sizeof *c->chans);
    c->rbufs = calloc((size_t)g->n_rbufs + 1, sizeof *c->rbufs);
    int n_sw = g->n_chan[PLAN_CH_SWITCH], n_members = 0;
    for (int s = 0; s < n_sw; s++) n_members += g->switches[s].n_ranks;
    c->switches = calloc((size_t)n_sw + 1, sizeof *c->switches);
    c->members = calloc((size_t)n_members + 1, sizeof *c->members);
    c->mappings = calloc((size_t)(n * 4) + 1, sizeof *c->mappings);
    if (!c->chans || !c->rbufs || !c->switches || !c->members || !c->mappings) {
        res = ERR(MSCCLPP_ERR_NO_MEMORY, "executor: out of memory");
        goto fail;
    }
    for (int i = 0; i < n_mem; i++) {
        c->chans[i].inbound = c->inbound + (size_t)i * SLOT_U64;
        c->chans[i].outbound = c->dummy;
        c->chans[i].expected = c->expected + i;
    }

    /* one setup message to every peer this rank talks to (both sides agree from the plan) */
    void **peer_buf[3];
    for (int t = 0; t < 3; t++) {
        c->peer_ptr[t] = peer_buf[t] = calloc((size_t)n, sizeof(void *));
        if (t < 2) c->peer_off[t] = calloc((size_t)n, sizeof(uint64_t));
        if (!peer_buf[t] || (t < 2 && !c->peer_off[t])) {
            res = ERR(MSCCLPP_ERR_NO_MEMORY, "executor: out of memory");
            goto fail;
        }
    }
    for (int t = 0; t < 3; t++) peer_buf[t][me] = buffer_of(c, t);
    uint8_t *msg = malloc(64 + 4 * (REGMEM_WIRE_MAX + 8) + (size_t)(n_mem + 1) * 8);
    if (!msg) {
        res = ERR(MSCCLPP_ERR_NO_MEMORY, "executor: out of memory");
        goto free_peer_bufs;
    }
    ex->setup_talked = true; /* from here on, peers may hold half of this setup */
    mscclpp_result_t send_err = MSCCLPP_OK;
    char send_msg[512] = "";
    for (int v = 0; v < n && res == MSCCLPP_OK; v++) {
        if (v == me || !pair_talks(plan, me, v)) continue;
        wire_writer_t w = {msg, 64 + 4 * (REGMEM_WIRE_MAX + 8) + (size_t)(n_mem + 1) * 8, 0, false};
        wire_put_u32(&w, EXEC_WIRE_MAGIC);
        wire_put_u32(&w, EXEC_WIRE_VERSION);
        /* my counters for my channels to v, in ordinal order */
        int k = chan_count(g, PLAN_CH_MEMORY, v);
        wire_put_u32(&w, (uint32_t)k);
        if (k > 0) {
            CHECK_GOTO(put_regmem(ex, &w, c->inbound, inbound_bytes), res, free_msg);
            for (int i = 0; i < n_mem; i++)
                if (g->peers[PLAN_CH_MEMORY][i] == v) wire_put_u64(&w, (uint64_t)i);
        }
        unsigned need = needs_from(plan, v, me);
        wire_put_u32(&w, need);
        for (int t = 0; t < 3; t++) {
            if (!(need & (1u << t))) continue;
            void *p = buffer_of(c, t);
            bool share = t == PLAN_BUF_SCRATCH ? true : t == PLAN_BUF_INPUT ? in_share : out_share;
            size_t bytes = t == PLAN_BUF_SCRATCH ? c->scratch_bytes
                           : t == PLAN_BUF_INPUT ? c->in_alloc : c->out_alloc;
            if (!p || !share || bytes == 0) {
                res = ERR_ARG("plan '%s': rank %d addresses the %s buffer of rank %d, which must "
                              "then be memory the backend can share (mscclpp_malloc; got %p)",
                              plan->name, vr_to_pr(c, v, n), buf_name(t), comm->rank, p);
                goto free_msg;
            }
            CHECK_GOTO(put_regmem(ex, &w, p, bytes), res, free_msg);
        }
        if (w.overflow) {
            res = ERR(MSCCLPP_ERR_INTERNAL, "executor: setup message overflow");
            goto free_msg;
        }
        uint64_t len = w.len;
        int peer = vr_to_pr(c, v, n);
        /* a peer that cannot be reached must not keep the others from their messages: they
         * would wait for us and blame us, not the peer that is gone */
        mscclpp_result_t sr = mscclpp_bootstrap_send(comm->boot, &len, sizeof len, peer, tag);
        if (sr == MSCCLPP_OK) sr = mscclpp_bootstrap_send(comm->boot, msg, w.len, peer, tag);
        if (sr != MSCCLPP_OK && send_err == MSCCLPP_OK) {
            send_err = sr;
            snprintf(send_msg, sizeof send_msg, "%s", mscclpp_last_error());
        }
    }
    if (send_err != MSCCLPP_OK) {
        res = core_error_quiet(send_err, "%s", send_msg); /* logged when it happened */
        goto free_msg;
    }
    for (int v = 0; v < n && res == MSCCLPP_OK; v++) {
        if (v == me || !pair_talks(plan, me, v)) continue;
        int peer = vr_to_pr(c, v, n);
        uint64_t len = 0;
        CHECK_GOTO(mscclpp_bootstrap_recv(comm->boot, &len, sizeof len, peer, tag), res, free_msg);
        if (len > 64 + 4 * (REGMEM_WIRE_MAX + 8) + (uint64_t)(plan->gpus[v].n_chan[PLAN_CH_MEMORY] + 1) * 8) {
            res = ERR(MSCCLPP_ERR_REMOTE, "executor: rank %d sent a %llu-byte setup message",
                      peer, (unsigned long long)len);
            goto free_msg;
        }
        uint8_t *in = malloc(len ? len : 1);
        if (!in) {
            res = ERR(MSCCLPP_ERR_NO_MEMORY, "executor: out of memory");
            goto free_msg;
        }
        res = mscclpp_bootstrap_recv(comm->boot, in, (size_t)len, peer, tag);
        wire_reader_t r = {in, (size_t)len, 0, false};
        if (res == MSCCLPP_OK && (wire_get_u32(&r) != EXEC_WIRE_MAGIC ||
                                  wire_get_u32(&r) != EXEC_WIRE_VERSION))
            res = ERR(MSCCLPP_ERR_REMOTE, "executor: rank %d sent a setup message of another "
                      "format or version", peer);
        uint32_t k = res == MSCCLPP_OK ? wire_get_u32(&r) : 0;
        if (res == MSCCLPP_OK && k != (uint32_t)chan_count(&plan->gpus[v], PLAN_CH_MEMORY, me))
            res = ERR(MSCCLPP_ERR_REMOTE, "executor: rank %d announces %u channels to rank %d, "
                      "the plan says %d (different plans?)", peer, k, comm->rank,
                      chan_count(&plan->gpus[v], PLAN_CH_MEMORY, me));
        if (res == MSCCLPP_OK && k > 0) {
            void *their_inbound = NULL;
            res = get_regmem(ex, c, &r, peer, &their_inbound);
            /* pair ordinal j of my channels to v with ordinal j of theirs to me (plan-format §5.2);
             * my extra channels keep signalling the dummy counter */
            uint64_t *slots = calloc(k, sizeof *slots);
            if (!slots && res == MSCCLPP_OK) res = ERR(MSCCLPP_ERR_NO_MEMORY, "out of memory");
            for (uint32_t j = 0; j < k && res == MSCCLPP_OK; j++) {
                slots[j] = wire_get_u64(&r);
                if (slots[j] >= (uint64_t)plan->gpus[v].n_chan[PLAN_CH_MEMORY])
                    res = ERR(MSCCLPP_ERR_REMOTE, "executor: rank %d sent counter slot %llu",
                              peer, (unsigned long long)slots[j]);
            }
            uint32_t j = 0;
            for (int i = 0; i < n_mem && res == MSCCLPP_OK; i++) {
                if (g->peers[PLAN_CH_MEMORY][i] != v) continue;
                if (j < k) c->chans[i].outbound = (uint64_t *)their_inbound + slots[j] * SLOT_U64;
                j++;
            }
            free(slots);
        }
        uint32_t need = res == MSCCLPP_OK ? wire_get_u32(&r) : 0;
        if (res == MSCCLPP_OK && need != needs_from(plan, me, v))
            res = ERR(MSCCLPP_ERR_REMOTE, "executor: rank %d offers buffers 0x%x, rank %d needs "
                      "0x%x (different plans?)", peer, need, comm->rank, needs_from(plan, me, v));
        for (int t = 0; t < 3 && res == MSCCLPP_OK; t++)
            if (need & (1u << t)) res = get_regmem(ex, c, &r, peer, &peer_buf[t][v]);
        if (res == MSCCLPP_OK && r.bad)
            res = ERR(MSCCLPP_ERR_REMOTE, "executor: truncated setup message from rank %d", peer);
        free(in);
        if (res != MSCCLPP_OK) goto free_msg;
    }
    /* switch channel tables; their pointers, like the remote buffers', are set per call */
    {
        int m0 = 0;
        for (int s = 0; s < n_sw; s++) {
            c->switches[s].n_members = g->switches[s].n_ranks;
            c->switches[s].members = &c->members[m0];
            c->switches[s].mc = NULL;
            m0 += g->switches[s].n_ranks;
        }
    }
    if (exec_port_needed(plan)) {
        void *lptr[3] = {c->send_base, c->recv_base, c->scratch};
        uint64_t lbytes[3] = {c->in_alloc, c->out_alloc, c->scratch_bytes};
        CHECK_GOTO(exec_port_create(comm, plan, me, rotation, lptr, lbytes, tag, &c->port), res,
                   free_msg);
    }
    /* nobody may leave (and stop serving its memory) before everyone has mapped it */
    CHECK_GOTO(mscclpp_bootstrap_barrier(comm->boot), res, free_msg);
    INFO(SUBSYS_EXEC, "rank %d: context %u for plan '%s' (virtual rank %d): %d memory channels, "
         "%d remote buffers, %d switch channels, %llu bytes scratch", comm->rank, seq, plan->name,
         me, n_mem, g->n_rbufs, n_sw, (unsigned long long)c->scratch_bytes);
free_msg:
    free(msg);
free_peer_bufs:
    if (res != MSCCLPP_OK) goto fail;
    *out = c;
    return MSCCLPP_OK;
fail:
    if (ex->setup_talked) {
        /* a peer that got our message may be importing our buffers right now: withdrawing
         * them would make it fail on us ("withdrawn already") instead of on the real cause */
        c->next = ex->dead;
        ex->dead = c;
        return res;
    }
    context_free(ex, c);
    return res;
}

/*
 * The context of (plan, send allocation, recv allocation, rotation). Keyed by allocations, not
 * pointers, so that every rank hits or misses together as long as each keeps its buffers in
 * the same allocations (an in-place reducescatter moves recv on some ranks only).
 */
static mscclpp_result_t context_get(mscclpp_executor_t *ex, const struct mscclpp_plan *plan,
                                    const void *send, void *recv, int rotation,
                                    mscclpp_dtype_t dtype, exec_context_t **out)
{
    void *send_base, *recv_base;
    size_t in_alloc, out_alloc;
    alloc_of(ex->hal, send, &send_base, &in_alloc);
    alloc_of(ex->hal, recv, &recv_base, &out_alloc);
    /* a failed context breaks the executor (exec_check), so every context here is sound */
    for (exec_context_t *c = ex->contexts; c; c = c->next)
        if (c->plan == plan && c->send_base == send_base && c->recv_base == recv_base &&
            c->rotation == rotation) {
            *out = c;
            return MSCCLPP_OK;
        }
    exec_context_t *c = NULL;
    CHECK(context_create(ex, plan, send_base, in_alloc, recv_base, out_alloc, rotation, dtype,
                         &c));
    pthread_mutex_lock(&ex->lock);
    c->next = ex->contexts;
    ex->contexts = c;
    pthread_mutex_unlock(&ex->lock);
    *out = c;
    return MSCCLPP_OK;
}

/* ---- execution --------------------------------------------------------------------------- */

/*
 * How long the interpreter's waits spin before yielding: the one wait policy's choice
 * (base/wait.h) for the threads that poll on this node, one per block of every local rank.
 */
static uint32_t host_spin_for(const mscclpp_executor_t *ex, const exec_context_t *c)
{
    int blocks = c->plan->gpus[c->vrank].n_blocks;
    return base_wait_spin((unsigned)ex->comm->nlocal * (unsigned)(blocks > 0 ? blocks : 1));
}

static mscclpp_result_t lowered_get(mscclpp_executor_t *ex, exec_context_t *c, size_t in_bytes,
                                    size_t out_bytes, mscclpp_dtype_t dtype, mscclpp_redop_t op,
                                    mscclpp_packet_t packet, exec_lowcache_t **out)
{
    for (exec_lowcache_t *l = c->lowered; l; l = l->next)
        if (l->in_bytes == in_bytes && l->out_bytes == out_bytes && l->dtype == dtype &&
            l->op == op && l->packet == packet) {
            *out = l;
            return MSCCLPP_OK;
        }
    const plan_gpu_t *g = &c->plan->gpus[c->vrank];
    exec_resources_t res = {0};
    res.input = (char *)c->send_base + c->peer_off[0][c->vrank];
    res.output = (char *)c->recv_base + c->peer_off[1][c->vrank];
    res.scratch = c->scratch;
    res.scratch_bytes = c->scratch_bytes;
    res.scratch_half = c->scratch_half;
    res.state = c->state;
    res.n_mem_chans = g->n_chan[PLAN_CH_MEMORY];
    res.mem_chans = c->chans;
    res.n_rbufs = g->n_rbufs;
    res.rbufs = c->rbufs;
    res.n_switch = g->n_chan[PLAN_CH_SWITCH];
    res.switches = c->switches;
    res.host_spin = host_spin_for(ex, c);
    CHECK(exec_port_fill(c->port, c->peer_off, &res));
    exec_lowcache_t *l = calloc(1, sizeof *l);
    if (!l) return ERR(MSCCLPP_ERR_NO_MEMORY, "executor: out of memory");
    mscclpp_result_t r = exec_lower(c->plan, c->vrank, in_bytes, out_bytes, dtype, op, packet,
                                    &res, &l->low);
    if (r != MSCCLPP_OK) {
        free(l);
        return r;
    }
    r = ex->hal->mem_alloc(l->low->blob_bytes, &l->dev_blob);
    if (r == MSCCLPP_OK) r = ex->hal->memcpy_sync(l->dev_blob, l->low->blob, l->low->blob_bytes);
    if (r != MSCCLPP_OK) {
        if (l->dev_blob) ex->hal->mem_free(l->dev_blob);
        exec_lowered_free(l->low);
        free(l);
        return r;
    }
    l->low->args.plan = l->dev_blob;
    l->in_bytes = in_bytes;
    l->out_bytes = out_bytes;
    l->dtype = dtype;
    l->op = op;
    l->packet = packet;
    l->next = c->lowered;
    c->lowered = l;
    *out = l;
    return MSCCLPP_OK;
}

static void lowcache_flush(mscclpp_executor_t *ex, exec_context_t *c)
{
    while (c->lowered) {
        exec_lowcache_t *l = c->lowered;
        c->lowered = l->next;
        if (l->dev_blob) ex->hal->mem_free(l->dev_blob);
        exec_lowered_free(l->low);
        free(l);
    }
}

/*
 * Point the remote buffers and switch members at this call's buffers. Plans that address a
 * peer's input or output learn every rank's in-allocation offsets with one small allgather
 * per call (whether a plan does is a property of the whole plan, so all ranks agree); lowered
 * plans embed the pointers, so they are dropped when an offset moved.
 */
static mscclpp_result_t resolve_call(mscclpp_executor_t *ex, exec_context_t *c, uint64_t in_off,
                                     uint64_t out_off)
{
    const int n = ex->comm->nranks;
    const int me = c->vrank;
    bool changed = !c->resolved;
    if (c->io_offsets) {
        if (!ex->offs) {
            ex->offs = calloc((size_t)n * 2, sizeof(uint64_t));
            if (!ex->offs) return ERR(MSCCLPP_ERR_NO_MEMORY, "executor: out of memory");
        }
        ex->offs[2 * ex->comm->rank] = in_off;
        ex->offs[2 * ex->comm->rank + 1] = out_off;
        CHECK(mscclpp_bootstrap_allgather(ex->comm->boot, ex->offs, 2 * sizeof(uint64_t)));
        for (int p = 0; p < n; p++) {
            int v = (p - c->rotation + n) % n;
            for (int t = 0; t < 2; t++)
                if (c->peer_off[t][v] != ex->offs[2 * p + t]) {
                    c->peer_off[t][v] = ex->offs[2 * p + t];
                    changed = true;
                }
        }
    } else if (c->peer_off[0][me] != in_off || c->peer_off[1][me] != out_off) {
        c->peer_off[0][me] = in_off; /* only this rank's own buffers can be bound here */
        c->peer_off[1][me] = out_off;
        changed = true;
    }
    if (!changed) return MSCCLPP_OK;
    const plan_gpu_t *g = &c->plan->gpus[me];
    for (int q = 0; q < g->n_rbufs; q++) {
        const plan_rbuf_t *rb = &g->rbufs[q];
        char *base = c->peer_ptr[rb->buf][rb->owner];
        c->rbufs[q] = rb->buf == PLAN_BUF_SCRATCH ? base : base + c->peer_off[rb->buf][rb->owner];
    }
    int m0 = 0;
    for (int s = 0; s < g->n_chan[PLAN_CH_SWITCH]; s++) {
        const plan_switch_t *sw = &g->switches[s];
        for (int m = 0; m < sw->n_ranks; m++) {
            char *base = c->peer_ptr[sw->buf][sw->ranks[m]];
            c->members[m0 + m] =
                sw->buf == PLAN_BUF_SCRATCH ? base : base + c->peer_off[sw->buf][sw->ranks[m]];
        }
        m0 += sw->n_ranks;
    }
    lowcache_flush(ex, c);
    c->resolved = true;
    return MSCCLPP_OK;
}

/* ---- failures ---------------------------------------------------------------------------- */

/* Break the executor with `r`, whose message the calling thread holds. Lock held. */
static void poison_locked(mscclpp_executor_t *ex, mscclpp_result_t r)
{
    if (ex->broken != MSCCLPP_OK || r == MSCCLPP_OK) return;
    ex->broken = r;
    snprintf(ex->broken_msg, sizeof ex->broken_msg, "%s", mscclpp_last_error());
}

static mscclpp_result_t poison(mscclpp_executor_t *ex, mscclpp_result_t r)
{
    pthread_mutex_lock(&ex->lock);
    poison_locked(ex, r);
    pthread_mutex_unlock(&ex->lock);
    return r;
}

/*
 * A launch that failed on a port operation says where (plan, rank, op, channel, peer); the
 * proxy that failed says why (the transport's sentence): the error gets both, with the
 * proxy's code. `r`: the launch's error, its message held by the calling thread.
 */
static mscclpp_result_t with_proxy_reason(exec_context_t *c, mscclpp_result_t r)
{
    if (r == MSCCLPP_OK || !c->port) return r;
    char where[768];
    snprintf(where, sizeof where, "%s", mscclpp_last_error());
    mscclpp_result_t pr = exec_port_error(c->port); /* leaves the message alone when OK */
    if (pr == MSCCLPP_OK) return r;
    char why[768];
    snprintf(why, sizeof why, "%s", mscclpp_last_error());
    return ERR(pr, "%s: %s", where, why);
}

/*
 * Fold an error some launch left in a mailbox into ex->broken (decoded like a synchronous
 * failure: plan, rank, block, op, peer). True when this call found it. Lock held.
 */
static bool poll_mailboxes_locked(mscclpp_executor_t *ex)
{
    if (ex->broken != MSCCLPP_OK) return false;
    for (exec_context_t *c = ex->contexts; c; c = c->next) {
        if (!c->mailbox || __atomic_load_n(&c->mailbox->code, __ATOMIC_ACQUIRE) == 0) continue;
        kern_state_t st;
        memset(&st, 0, sizeof st);
        st.err = *(volatile kern_error_t *)c->mailbox; /* complete once code is seen */
        mscclpp_result_t r = with_proxy_reason(c, exec_state_error(&st, c->plan));
        poison_locked(ex, r != MSCCLPP_OK ? r
                                          : ERR(MSCCLPP_ERR_INTERNAL,
                                                "executor: undecodable error record"));
        return true;
    }
    /* a proxy can fail after its launch ended (a trailing put with no flush): the launch saw
     * nothing, so the proxy's own record is the only place the error lives */
    for (exec_context_t *c = ex->contexts; c; c = c->next) {
        mscclpp_result_t pr = exec_port_error(c->port);
        if (pr != MSCCLPP_OK) {
            poison_locked(ex, pr);
            return true;
        }
    }
    return false;
}

/*
 * MSCCLPP_OK, or the error that broke the executor: the original message the first time it is
 * found in a mailbox, then "executor broken by an earlier error: ..." on every call.
 */
static mscclpp_result_t exec_check(mscclpp_executor_t *ex)
{
    pthread_mutex_lock(&ex->lock);
    bool fresh = poll_mailboxes_locked(ex);
    mscclpp_result_t r = ex->broken;
    char msg[sizeof ex->broken_msg];
    if (r != MSCCLPP_OK && !fresh) memcpy(msg, ex->broken_msg, sizeof msg);
    pthread_mutex_unlock(&ex->lock);
    if (r == MSCCLPP_OK || fresh) return r;
    /* not logged again: the first report was */
    return core_error_quiet(r, "executor broken by an earlier error: %s; destroy it (and the "
                            "communicator) and create new ones", msg);
}

/* Stream sync callback (hal_api_check_fn): may run in any thread. */
static mscclpp_result_t exec_stream_check(void *arg)
{
    mscclpp_executor_t *ex = arg;
    /* the stream's launches are done: wait until their proxies handled what they pushed, so
     * that a trailing put that fails is this sync's error (exec_check reads the records) */
    pthread_mutex_lock(&ex->lock);
    for (exec_context_t *c = ex->contexts; c; c = c->next) (void)exec_port_drain(c->port);
    pthread_mutex_unlock(&ex->lock);
    return exec_check(ex);
}

static mscclpp_result_t check_state(mscclpp_executor_t *ex, exec_context_t *c)
{
    kern_state_t st;
    CHECK(ex->hal->memcpy_sync(&st, c->state, sizeof st));
    mscclpp_result_t r = exec_state_error(&st, c->plan);
    if (r != MSCCLPP_OK) {
        c->broken = true;
        r = with_proxy_reason(c, r); /* the transport call that failed, if the proxy did */
    } else {
        /* a synchronous call returns once every trigger it pushed was handed to the
         * transport: a trailing put (no flush) that fails is this call's error */
        r = exec_port_drain(c->port);
    }
    if (r != MSCCLPP_OK) {
        pthread_mutex_lock(&ex->lock);
        poison_locked(ex, r);
        pthread_mutex_unlock(&ex->lock);
    }
    return r;
}

static mscclpp_result_t execute_rotated(mscclpp_executor_t *ex, const mscclpp_plan_t *plan,
                                        const void *send, void *recv, size_t send_bytes,
                                        size_t recv_bytes, mscclpp_dtype_t dtype,
                                        mscclpp_redop_t op, mscclpp_packet_t packet,
                                        mscclpp_stream_t stream, int rotation)
{
    CHECK_ARG(ex != NULL);
    CHECK_ARG(plan != NULL);
    CHECK_ARG((int)dtype >= 0 && dtype < MSCCLPP_DTYPE_COUNT);
    CHECK_ARG(op == MSCCLPP_REDOP_PLAN || ((int)op >= 0 && op < MSCCLPP_REDOP_COUNT));
    CHECK_ARG(packet == MSCCLPP_PACKET_LL16 || packet == MSCCLPP_PACKET_LL8);
    mscclpp_comm_t *comm = ex->comm;
    if (plan->nranks != comm->nranks)
        return ERR_ARG("plan '%s' is written for %d ranks, the communicator has %d", plan->name,
                       plan->nranks, comm->nranks);
    if ((send_bytes && !send) || (recv_bytes && !recv))
        return ERR_ARG("execute: NULL buffer with a non-zero size");
    uint64_t msg = exec_message_size(plan->collective, send_bytes, recv_bytes);
    if (msg < plan->min_message_size || msg > plan->max_message_size)
        return ERR_ARG("plan '%s' accepts messages of %llu to %llu bytes, got %llu", plan->name,
                       (unsigned long long)plan->min_message_size,
                       (unsigned long long)plan->max_message_size, (unsigned long long)msg);
    if (stream && stream->ops != ex->hal)
        return ERR_ARG("execute: stream of backend %s, executor runs on %s", stream->ops->name,
                       ex->hal->name);
    /* checked before any rank talks: a context for unusable buffers would be built for nothing */
    {
        void *base;
        size_t in_alloc, out_alloc;
        alloc_of(ex->hal, send, &base, &in_alloc);
        alloc_of(ex->hal, recv, &base, &out_alloc);
        if (!in_alloc || !out_alloc)
            return ERR_ARG("execute: buffers must be memory of the %s backend (mscclpp_malloc); "
                           "%s is not", ex->hal->name, !in_alloc ? "send" : "recv");
    }
    CHECK(exec_check(ex));

    exec_context_t *c = NULL;
    ex->setup_talked = false;
    mscclpp_result_t r = context_get(ex, plan, send, recv, rotation, dtype, &c);
    if (r != MSCCLPP_OK) {
        /* a setup that failed before any message (an unsupported plan, local memory) left
         * the peers where they were; one that talked did not */
        if (ex->setup_talked ||
            (r != MSCCLPP_ERR_UNSUPPORTED && r != MSCCLPP_ERR_INVALID_ARG &&
             r != MSCCLPP_ERR_NO_MEMORY))
            poison(ex, r);
        return r;
    }
    uint64_t in_off = (uint64_t)((const char *)send - (const char *)c->send_base);
    uint64_t out_off = (uint64_t)((const char *)recv - (const char *)c->recv_base);
    if (send_bytes > c->in_alloc - in_off || recv_bytes > c->out_alloc - out_off)
        return ERR_ARG("execute: %zu/%zu bytes do not fit the buffers (%zu/%zu bytes to the end "
                       "of their allocations)", send_bytes, recv_bytes,
                       (size_t)(c->in_alloc - in_off), (size_t)(c->out_alloc - out_off));
    r = resolve_call(ex, c, in_off, out_off);
    if (r != MSCCLPP_OK) return poison(ex, r); /* the offset exchange is collective */
    exec_lowcache_t *l = NULL;
    CHECK(lowered_get(ex, c, send_bytes, recv_bytes, dtype, op, packet, &l));
    l->low->args.input = send;
    l->low->args.output = recv;
    l->low->args.mailbox = c->mailbox;
    hal_stream_t hs = hal_api_stream(stream);
    /* before the launch: a sync that races with it must already ask us */
    CHECK(hal_api_stream_note(stream, ex->source));
    int nthreads = ex->launch_nthreads ? ex->launch_nthreads : l->low->nthreads;
    r = ex->hal->launch(&l->low->args, sizeof l->low->args, l->low->nblocks, nthreads, hs);
    if (r != MSCCLPP_OK) {
        c->broken = true;
        return poison(ex, r);
    }
    if (!hs) return check_state(ex, c);
    return MSCCLPP_OK;
}

MSCCLPP_API mscclpp_result_t mscclpp_execute_ex(mscclpp_executor_t *exec,
                                                const mscclpp_plan_t *plan, const void *send,
                                                void *recv, size_t send_bytes, size_t recv_bytes,
                                                mscclpp_dtype_t dtype, mscclpp_redop_t op,
                                                mscclpp_packet_t packet, mscclpp_stream_t stream)
{
    return execute_rotated(exec, plan, send, recv, send_bytes, recv_bytes, dtype, op, packet,
                           stream, 0);
}

MSCCLPP_API mscclpp_result_t mscclpp_execute(mscclpp_executor_t *exec, const mscclpp_plan_t *plan,
                                             const void *send, void *recv, size_t send_bytes,
                                             size_t recv_bytes, mscclpp_dtype_t dtype,
                                             mscclpp_redop_t op, mscclpp_stream_t stream)
{
    return execute_rotated(exec, plan, send, recv, send_bytes, recv_bytes, dtype, op,
                           MSCCLPP_PACKET_LL16, stream, 0);
}

/* ---- executor object and registry -------------------------------------------------------- */

/* MSCCLPP_PLAN_DIR, else the installed plans, else (a build that is not installed) the plans
 * of the source tree it was built from. */
static const char *default_plan_dir(void)
{
    const char *d = config_get(CFG_MSCCLPP_PLAN_DIR);
    if (*d) return d;
    struct stat st;
    if (stat(MSCCLPP_PLAN_DIR, &st) != 0 && stat(MSCCLPP_SRC_PLAN_DIR, &st) == 0 &&
        S_ISDIR(st.st_mode))
        return MSCCLPP_SRC_PLAN_DIR;
    return MSCCLPP_PLAN_DIR;
}

/* The Python DSL's plan cache (mscclpp.compile writes there, `python3 -m mscclpp --install`
 * into its default/ folder), so compiled plans are found without setting variables:
 * MSCCLPP_CACHE_DIR, else $HOME/.cache/mscclpp. Returns 0 when there is none to read; also
 * when MSCCLPP_PLAN_DIR is set, so that variable keeps naming exactly the plans a run uses. */
static int cache_plan_dir(char *out, size_t n)
{
    if (*config_get(CFG_MSCCLPP_PLAN_DIR)) return 0;
    const char *c = config_get(CFG_MSCCLPP_CACHE_DIR);
    const char *home = getenv("HOME");
    int len;
    if (*c)
        len = snprintf(out, n, "%s", c);
    else if (home && *home)
        len = snprintf(out, n, "%s/.cache/mscclpp", home);
    else
        return 0;
    struct stat st;
    return len > 0 && (size_t)len < n && stat(out, &st) == 0 && S_ISDIR(st.st_mode);
}

/* Load the cache's plans after the default ones (the first registered match wins, so a plan
 * that the installed defaults already serve keeps its tested default; the cache adds the
 * rest). As for the default directory, a folder named after the backend comes first. A plan
 * there that does not parse is skipped with a warning by the registry. */
static void load_cache_plans(mscclpp_executor_t *ex)
{
    char dir[4096], dirs[4][4400];
    if (!cache_plan_dir(dir, sizeof dir)) return;
    snprintf(dirs[0], sizeof dirs[0], "%s/default/%s", dir, ex->hal->name);
    snprintf(dirs[1], sizeof dirs[1], "%s/default", dir);
    snprintf(dirs[2], sizeof dirs[2], "%s/%s", dir, ex->hal->name);
    snprintf(dirs[3], sizeof dirs[3], "%s", dir);
    for (int i = 0; i < 4; i++) {
        struct stat st;
        if (stat(dirs[i], &st) != 0 || !S_ISDIR(st.st_mode)) continue;
        int n = 0, skipped = 0;
        if (exec_registry_load_dir(&ex->registry, dirs[i], &n, &skipped) != MSCCLPP_OK)
            core_clear_error();
        INFO(SUBSYS_EXEC, "loaded %d cached plans from %s (%d skipped)", n, dirs[i], skipped);
    }
}

MSCCLPP_API mscclpp_result_t mscclpp_executor_create(mscclpp_comm_t *comm,
                                                     mscclpp_executor_t **exec)
{
    CHECK_ARG(comm != NULL);
    CHECK_ARG(exec != NULL);
    *exec = NULL;
    mscclpp_executor_t *ex = calloc(1, sizeof *ex);
    if (!ex) return ERR(MSCCLPP_ERR_NO_MEMORY, "executor: out of memory");
    ex->comm = comm;
    ex->hal = comm->hal;
    pthread_mutex_init(&ex->lock, NULL);
    mscclpp_result_t res = hal_api_source_add(exec_stream_check, ex, &ex->source);
    if (res != MSCCLPP_OK) {
        pthread_mutex_destroy(&ex->lock);
        free(ex);
        return res;
    }
    exec_registry_init(&ex->registry);
    int loaded = 0, skipped = 0;
    const char *dir = default_plan_dir();
    /* several nodes of equal size: the multi-node plans for that layout come first */
    if (comm->nlocal > 0 && comm->nlocal < comm->nranks && comm->nranks % comm->nlocal == 0) {
        char mn_dir[4096];
        int n_mn = 0;
        snprintf(mn_dir, sizeof mn_dir, "%s/multinode/%dx%d", dir, comm->nranks / comm->nlocal,
                 comm->nlocal);
        if (exec_registry_load_dir(&ex->registry, mn_dir, &n_mn, &skipped) != MSCCLPP_OK)
            core_clear_error();
        INFO(SUBSYS_EXEC, "loaded %d multi-node plans from %s", n_mn, mn_dir);
    }
    /* plans tuned for this backend first: the first registered plan that matches wins */
    char backend_dir[4096];
    snprintf(backend_dir, sizeof backend_dir, "%s/%s", dir, ex->hal->name);
    struct stat st;
    if (stat(backend_dir, &st) == 0 && S_ISDIR(st.st_mode)) {
        int n_backend = 0;
        if (exec_registry_load_dir(&ex->registry, backend_dir, &n_backend, &skipped) !=
            MSCCLPP_OK)
            core_clear_error();
        INFO(SUBSYS_EXEC, "loaded %d %s plans from %s", n_backend, ex->hal->name, backend_dir);
    }
    if (exec_registry_load_dir(&ex->registry, dir, &loaded, &skipped) != MSCCLPP_OK) {
        core_clear_error();
        INFO(SUBSYS_EXEC, "no default plans: cannot read %s", dir);
    } else {
        INFO(SUBSYS_EXEC, "loaded %d default plans from %s (%d skipped)", loaded, dir, skipped);
    }
    load_cache_plans(ex);
    mscclpp_result_t tr = exec_tuning_attach(ex);
    if (tr != MSCCLPP_OK) {
        exec_registry_fini(&ex->registry);
        free(ex);
        return tr;
    }
    *exec = ex;
    return MSCCLPP_OK;
}

/* Unlink every context (under the lock, against a concurrent stream check) and free them. */
static void contexts_free_all(mscclpp_executor_t *ex)
{
    pthread_mutex_lock(&ex->lock);
    exec_context_t *list = ex->contexts;
    ex->contexts = NULL;
    pthread_mutex_unlock(&ex->lock);
    while (list) {
        exec_context_t *c = list;
        list = c->next;
        context_free(ex, c);
    }
}

MSCCLPP_API mscclpp_result_t mscclpp_executor_get_async_error(mscclpp_executor_t *exec,
                                                              mscclpp_result_t *result)
{
    CHECK_ARG(exec != NULL);
    CHECK_ARG(result != NULL);
    /* the error's message is left for mscclpp_last_error(); the query itself succeeded */
    *result = exec_check(exec);
    return MSCCLPP_OK;
}

MSCCLPP_API mscclpp_result_t mscclpp_executor_reset(mscclpp_executor_t *exec)
{
    CHECK_ARG(exec != NULL);
    /* the barrier below cannot bring back ranks that are gone or elsewhere */
    CHECK(exec_check(exec));
    contexts_free_all(exec);
    /* peers may still read from our scratch until they are done with theirs */
    return mscclpp_bootstrap_barrier(exec->comm->boot);
}

MSCCLPP_API mscclpp_result_t mscclpp_executor_destroy(mscclpp_executor_t *exec)
{
    if (!exec) return MSCCLPP_OK;
    /* first, so that no stream sync asks a half-destroyed executor */
    hal_api_source_remove(exec->source);
    contexts_free_all(exec);
    while (exec->dead) {
        exec_context_t *c = exec->dead;
        exec->dead = c->next;
        context_free(exec, c);
    }
    if (exec->tmp) exec->hal->mem_free(exec->tmp);
    free(exec->offs);
    exec_tuning_free(exec->tuning);
    exec_registry_fini(&exec->registry);
    pthread_mutex_destroy(&exec->lock);
    free(exec);
    return MSCCLPP_OK;
}

MSCCLPP_API mscclpp_result_t mscclpp_executor_register_plan(mscclpp_executor_t *exec,
                                                            const mscclpp_plan_t *plan,
                                                            int ranks_per_node, const char *tags)
{
    CHECK_ARG(exec != NULL);
    CHECK_ARG(plan != NULL);
    CHECK_ARG(ranks_per_node >= 0);
    return exec_registry_register(&exec->registry, plan, ranks_per_node, tags);
}

MSCCLPP_API mscclpp_result_t mscclpp_executor_load_plan_dir(mscclpp_executor_t *exec,
                                                            const char *dir, int *nloaded)
{
    CHECK_ARG(exec != NULL);
    return exec_registry_load_dir(&exec->registry, dir ? dir : default_plan_dir(), nloaded, NULL);
}

MSCCLPP_API mscclpp_result_t mscclpp_executor_select_plan(mscclpp_executor_t *exec,
                                                          const char *collective, int inplace,
                                                          uint64_t message_bytes, const char *tags,
                                                          const mscclpp_plan_t **plan)
{
    CHECK_ARG(exec != NULL);
    CHECK_ARG(collective != NULL);
    CHECK_ARG(plan != NULL);
    return exec_registry_select(&exec->registry, collective, exec->comm->nranks,
                                exec->comm->nlocal, inplace != 0, message_bytes, tags, plan);
}

/* What executor/tuning.c needs of an executor (the tuning table and the per-call launch). */
void exec_tuning_view(mscclpp_executor_t *ex, exec_tuning_view_t *v)
{
    *v = (exec_tuning_view_t){.hal = ex->hal, .registry = &ex->registry,
                              .nranks = ex->comm->nranks, .nlocal = ex->comm->nlocal,
                              .tuning = &ex->tuning, .launch_nthreads = &ex->launch_nthreads};
}

/* ---- collectives with registered plans --------------------------------------------------- */

/*
 * Run `collective`: pick a plan for the in-place-ness of the call; when only an out-of-place
 * plan exists for an in-place call, stage the input in a temporary buffer first.
 */
static mscclpp_result_t run_collective(mscclpp_executor_t *ex, const char *collective,
                                       const void *send, void *recv, size_t in_bytes,
                                       size_t out_bytes, bool inplace, const void *stage_src,
                                       mscclpp_dtype_t dtype, mscclpp_redop_t op, int rotation,
                                       mscclpp_stream_t stream)
{
    uint64_t msg = exec_message_size(collective, in_bytes, out_bytes);
    const struct mscclpp_plan *plan = NULL;
    int nth = 0;
    mscclpp_result_t r = exec_choose_plan(ex, collective, inplace, msg, &plan, &nth);
    if (r == MSCCLPP_OK) {
        ex->launch_nthreads = nth;
        r = execute_rotated(ex, plan, send, recv, in_bytes, out_bytes, dtype, op,
                            MSCCLPP_PACKET_LL16, stream, rotation);
        ex->launch_nthreads = 0;
        return r;
    }
    if (!inplace) goto none;
    /* in-place call, out-of-place plan: copy the input aside */
    CHECK_GOTO(exec_choose_plan(ex, collective, false, msg, &plan, &nth), r, none);
    if (ex->tmp_bytes < in_bytes) {
        if (ex->tmp) {
            /* contexts keyed on the old staging buffer go with it */
            pthread_mutex_lock(&ex->lock);
            exec_context_t *gone = NULL;
            for (exec_context_t **pp = &ex->contexts; *pp;) {
                exec_context_t *c = *pp;
                if (c->send_base == ex->tmp) {
                    *pp = c->next;
                    c->next = gone;
                    gone = c;
                } else {
                    pp = &c->next;
                }
            }
            pthread_mutex_unlock(&ex->lock);
            while (gone) {
                exec_context_t *c = gone;
                gone = c->next;
                context_free(ex, c);
            }
            ex->hal->mem_free(ex->tmp);
            ex->tmp = NULL;
            ex->tmp_bytes = 0;
        }
        size_t want = in_bytes < 4096 ? 4096 : in_bytes;
        CHECK(ex->hal->mem_alloc_shareable(want, &ex->tmp));
        ex->tmp_bytes = want;
    }
    if (stream)
        CHECK(ex->hal->memcpy_async(ex->tmp, stage_src, in_bytes, hal_api_stream(stream)));
    else
        CHECK(ex->hal->memcpy_sync(ex->tmp, stage_src, in_bytes));
    ex->launch_nthreads = nth;
    r = execute_rotated(ex, plan, ex->tmp, recv, in_bytes, out_bytes, dtype, op,
                        MSCCLPP_PACKET_LL16, stream, rotation);
    ex->launch_nthreads = 0;
    /* a failed call must not leave the staging copy queued behind the caller's back */
    if (r != MSCCLPP_OK && stream) (void)ex->hal->stream_sync(hal_api_stream(stream));
    return r;
none:
    return ERR(MSCCLPP_ERR_UNSUPPORTED, "no %s plan for %d ranks and %llu bytes (%s); register "
               "one or install the default plans (MSCCLPP_PLAN_DIR=%s)", collective,
               ex->comm->nranks, (unsigned long long)msg, inplace ? "in-place" : "out-of-place",
               default_plan_dir());
}

static mscclpp_result_t coll_check(mscclpp_executor_t *ex, const void *send, void *recv,
                                   mscclpp_dtype_t dtype, size_t *es)
{
    CHECK_ARG(ex != NULL);
    CHECK_ARG(send != NULL);
    CHECK_ARG(recv != NULL);
    CHECK_ARG((int)dtype >= 0 && dtype < MSCCLPP_DTYPE_COUNT);
    *es = mscclpp_dtype_size(dtype);
    return MSCCLPP_OK;
}

MSCCLPP_API mscclpp_result_t mscclpp_allreduce(mscclpp_executor_t *exec, const void *send,
                                               void *recv, size_t count, mscclpp_dtype_t dtype,
                                               mscclpp_redop_t op, mscclpp_stream_t stream)
{
    size_t es;
    CHECK(coll_check(exec, send, recv, dtype, &es));
    CHECK_ARG((int)op >= 0 && op < MSCCLPP_REDOP_COUNT);
    size_t b = count * es;
    return run_collective(exec, "allreduce", send, recv, b, b, send == recv, send, dtype, op, 0,
                          stream);
}

MSCCLPP_API mscclpp_result_t mscclpp_allgather(mscclpp_executor_t *exec, const void *send,
                                               void *recv, size_t send_count,
                                               mscclpp_dtype_t dtype, mscclpp_stream_t stream)
{
    size_t es;
    CHECK(coll_check(exec, send, recv, dtype, &es));
    int n = exec->comm->nranks, rank = exec->comm->rank;
    size_t in = send_count * es;
    bool inplace = (const char *)send == (char *)recv + (size_t)rank * in;
    return run_collective(exec, "allgather", send, recv, in, in * (size_t)n, inplace, send, dtype,
                          MSCCLPP_REDOP_PLAN, 0, stream);
}

MSCCLPP_API mscclpp_result_t mscclpp_reducescatter(mscclpp_executor_t *exec, const void *send,
                                                   void *recv, size_t recv_count,
                                                   mscclpp_dtype_t dtype, mscclpp_redop_t op,
                                                   mscclpp_stream_t stream)
{
    size_t es;
    CHECK(coll_check(exec, send, recv, dtype, &es));
    CHECK_ARG((int)op >= 0 && op < MSCCLPP_REDOP_COUNT);
    int n = exec->comm->nranks, rank = exec->comm->rank;
    size_t out = recv_count * es;
    bool inplace = (char *)recv == (const char *)send + (size_t)rank * out;
    return run_collective(exec, "reducescatter", send, recv, out * (size_t)n, out, inplace, send,
                          dtype, op, 0, stream);
}

MSCCLPP_API mscclpp_result_t mscclpp_alltoall(mscclpp_executor_t *exec, const void *send,
                                              void *recv, size_t count, mscclpp_dtype_t dtype,
                                              mscclpp_stream_t stream)
{
    size_t es;
    CHECK(coll_check(exec, send, recv, dtype, &es));
    size_t b = count * es * (size_t)exec->comm->nranks;
    return run_collective(exec, "alltoall", send, recv, b, b, send == recv, send, dtype,
                          MSCCLPP_REDOP_PLAN, 0, stream);
}

MSCCLPP_API mscclpp_result_t mscclpp_broadcast(mscclpp_executor_t *exec, const void *send,
                                               void *recv, size_t count, mscclpp_dtype_t dtype,
                                               int root, mscclpp_stream_t stream)
{
    size_t es;
    CHECK(coll_check(exec, send, recv, dtype, &es));
    CHECK_ARG(root >= 0 && root < exec->comm->nranks);
    size_t b = count * es;
    /* default broadcast plans are written for root 0: rotate ranks so `root` plays rank 0 */
    return run_collective(exec, "broadcast", send, recv, b, b, send == recv, send, dtype,
                          MSCCLPP_REDOP_PLAN, root, stream);
}
