/*
 * Contexts (executor/exec.h): what a plan needs for one pair of buffers, built collectively
 * on first use and kept in the executor's cache (executor/cache.h), most recently used first,
 * with native algorithms' buffer sets, up to MSCCLPP_EXEC_CONTEXTS entries of both (then the
 * least recently used go: context_evict).
 *
 *   exec_context_get     look one up, or build it: context_scratch (sized by layout.c for the
 *                        call's sizes rounded up, halves agreed by all ranks), context_state
 *                        (device state and error mailbox), context_channels (counters and
 *                        tables), context_exchange (one setup message to and from every peer
 *                        the plan pairs us with: counters and buffers to map), then port
 *                        channels and a barrier
 *   exec_context_bind    this call's buffers: remote buffer and switch member pointers
 *   exec_context_lowered the lowered plan of this call shape (lower.c), cached, on the device
 *
 * Buffers (docs/architecture.md "Buffers"): a plan that addresses a peer's input or output has
 * its context keyed by the allocations holding the call's buffers, which may be any memory the
 * backend can share, the application's own included (hal mem_info: cudaMalloc'd, PyTorch's
 * allocator, cuMem; on the host backend shared file mappings). They are registered whole,
 * once, when the context is built; each call then addresses the peers' buffers at this rank's
 * own in-allocation offsets, with no message: ranks use their buffers alike (the same program
 * on every rank), and the launch fence, which such a context runs on every launch, checks it.
 * Any other plan needs no registration: one context per plan. A rank whose buffers of a
 * collective call the peers cannot map runs such a plan on its context's own shareable
 * stand-ins (context_stage; executor.c copies in and out), keyed without its buffers.
 *
 * Rank rotation: a context may run the plan with virtual rank v = (rank - rotation) mod n, so a
 * broadcast plan written for root 0 serves any root.
 */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/config.h"
#include "base/debug.h"
#include "base/wait.h"
#include "base/wire.h"
#include "executor/exec_forget.h"
#include "executor/exec.h"
#include "executor/layout.h"
#include "executor/native_exec.h"
#include "hal/hal_api.h"

#define EXEC_WIRE_MAGIC 0x43584550u /* "PEXC": context setup message */
#define EXEC_WIRE_VERSION 2u /* 2: counter slots 128 bytes apart */
/* A point-to-point executor's setups (mscclpp_executor_set_p2p): one tag, since its contexts
 * are built by two ranks each, one after the other in the same order on both (the others:
 * exec_setup_tag, state.c) */
#define EXEC_TAG_P2P 0x5800

/* Memory channel counters are 128 bytes apart: word 0 the counter, words 8-11 the offsets the
 * launch fence publishes (kern_args.h), the others free for the fence's own records */
#define SLOT_U64 16

static int vr_to_pr(const exec_context_t *c, int v, int n) { return (v + c->rotation) % n; }

void exec_mem_of(const hal_ops_t *hal, const void *p, hal_mem_info_t *m)
{
    memset(m, 0, sizeof *m);
    if (p && hal->mem_info(p, m) != MSCCLPP_OK) {
        core_clear_error();
        memset(m, 0, sizeof *m);
    }
}

/* ---- what the plan says a pair of ranks shares --------------------------------------------- */

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

/* Whether some rank of the plan addresses another rank's input or output buffer (through a
 * memory, switch or port channel). */
bool exec_plan_reaches_io(const struct mscclpp_plan *plan)
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

bool exec_plan_shares_io(const struct mscclpp_plan *plan)
{
    /* port channels also move this rank's own buffers: the proxy reads registered memory */
    return exec_port_needed(plan) || exec_plan_reaches_io(plan);
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

static size_t buffer_bytes(const exec_context_t *c, int type)
{
    switch (type) {
    case PLAN_BUF_INPUT: return c->in_alloc;
    case PLAN_BUF_OUTPUT: return c->out_alloc;
    default: return c->scratch_bytes;
    }
}

static const char *buf_name(int type)
{
    return type == PLAN_BUF_INPUT ? "input" : type == PLAN_BUF_OUTPUT ? "output" : "scratch";
}

/* ---- teardown ------------------------------------------------------------------------------ */

static void lowcache_free(mscclpp_executor_t *ex, exec_lowcache_t *l)
{
    if (l->dev_blob) ex->hal->mem_free(l->dev_blob);
    if (l->host_blob) ex->hal->host_free(l->host_blob);
    exec_lowered_free(l->low);
    free(l);
}

static void lowcache_free_list(mscclpp_executor_t *ex, exec_lowcache_t *l)
{
    for (exec_lowcache_t *next; l; l = next) {
        next = l->next;
        lowcache_free(ex, l);
    }
}

/*
 * Drop the lowered plans of `c` (their pointers moved). A graph may launch a captured one at
 * any time, so it is retired, unchanged, until the executor goes; with `retire_all` (during a
 * capture, when queued launches that read them could not be waited for) the others too, until
 * the next drain (retired_sweep).
 */
static void lowcache_flush(mscclpp_executor_t *ex, exec_context_t *c, bool retire_all)
{
    exec_cache_changed(ex); /* the fast path's lowered plan may be one of these */
    while (c->lowered) {
        exec_lowcache_t *l = c->lowered;
        c->lowered = l->next;
        if (l->captured || retire_all) {
            l->next = ex->retired;
            ex->retired = l;
        } else {
            lowcache_free(ex, l);
        }
    }
    c->n_lowered = 0;
}

/* After a drain: free the retired lowered plans no graph launches. */
static void retired_sweep(mscclpp_executor_t *ex)
{
    for (exec_lowcache_t **pp = &ex->retired; *pp;) {
        exec_lowcache_t *l = *pp;
        if (l->captured) {
            pp = &l->next;
        } else {
            *pp = l->next;
            lowcache_free(ex, l);
        }
    }
}

mscclpp_result_t exec_keep(mscclpp_executor_t *ex, void *p)
{
    if (ex->n_kept == ex->cap_kept) {
        int cap = ex->cap_kept ? 2 * ex->cap_kept : 4;
        void **k = realloc(ex->kept, (size_t)cap * sizeof *k);
        if (!k) return ERR(MSCCLPP_ERR_NO_MEMORY, "executor: out of memory");
        ex->kept = k;
        ex->cap_kept = cap;
    }
    ex->kept[ex->n_kept++] = p;
    return MSCCLPP_OK;
}

static void context_free(mscclpp_executor_t *ex, exec_context_t *c)
{
    const hal_ops_t *hal = ex->hal;
    lowcache_free_list(ex, c->lowered);
    c->lowered = NULL;
    exec_port_destroy(c->port);
    for (int i = 0; i < c->n_mappings; i++) comm_unmap_peer(ex->comm, c->mappings[i]);
    if (c->scratch) hal->mem_free(c->scratch);
    for (int i = 0; i < 2; i++)
        if (c->stage[i]) hal->mem_free(c->stage[i]);
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
    plan_free((struct mscclpp_plan *)c->plan); /* this context's hold (context_create) */
    free(c);
}

/* ---- the context as an entry of the executor's cache ---------------------------------------- */

/* What tells one context of a plan from another (the cache's owner is the plan). */
typedef struct {
    const void *send_base, *recv_base;
    uint64_t send_id, recv_id;
    uint64_t peers; /* exec_context_t.peers */
    int rotation;
    bool staged; /* bases and ids are then NULL and 0 */
} context_key_t;

static exec_context_t *context_of(const exec_cache_entry_t *e)
{
    return e ? (exec_context_t *)((char *)e - offsetof(exec_context_t, ce)) : NULL;
}

static bool context_match(const exec_cache_entry_t *e, const void *key)
{
    const exec_context_t *c = context_of(e);
    const context_key_t *k = key;
    if (c->staged || k->staged) return c->staged == k->staged && c->rotation == k->rotation;
    return c->send_base == k->send_base && c->recv_base == k->recv_base &&
           c->rotation == k->rotation && c->send_id == k->send_id && c->recv_id == k->recv_id &&
           c->peers == k->peers;
}

static bool context_holds(const exec_cache_entry_t *e, const void *base)
{
    const exec_context_t *c = context_of(e);
    /* one keyed by every rank's buffers (peers) is never matched again once a rank's buffer
     * is gone (its id is in the key), and a rank may forget its buffers alone: dropped here it
     * would leave the ranks' caches unlike, and the bound evicts by count (cache.c); it goes as
     * the least recently used, alike everywhere */
    if (c->peers) return false;
    return c->send_base == base || c->recv_base == base;
}

static void context_free_entry(mscclpp_executor_t *ex, exec_cache_entry_t *e)
{
    context_free(ex, context_of(e));
}

static const exec_cache_ops_t context_ops = {
    .kind = EXEC_CACHE_CONTEXT,
    .what = "context",
    .collective = true, /* peers read its scratch and counters */
    .match = context_match,
    .holds = context_holds,
    .free = context_free_entry,
};

MSCCLPP_API mscclpp_result_t mscclpp_executor_usable(mscclpp_executor_t *exec, const void *ptr,
                                                     size_t bytes, void **base)
{
    CHECK_ARG(exec != NULL);
    CHECK_ARG(base != NULL);
    hal_mem_info_t m;
    exec_mem_of(exec->hal, ptr, &m);
    const char *b = m.base;
    bool inside = ptr && m.size && m.shareable && (const char *)ptr >= b &&
                  (size_t)((const char *)ptr - b) <= m.size &&
                  bytes <= m.size - (size_t)((const char *)ptr - b);
    *base = inside ? m.base : NULL;
    return MSCCLPP_OK;
}

void exec_contexts_free_all(mscclpp_executor_t *ex, bool dead_too)
{
    exec_cache_clear(ex, dead_too); /* without dead_too the ones graphs launch with stay */
    if (!dead_too) return;
    lowcache_free_list(ex, ex->retired);
    ex->retired = NULL;
    for (int i = 0; i < ex->n_kept; i++) ex->hal->mem_free(ex->kept[i]);
    free(ex->kept);
    ex->kept = NULL;
    ex->n_kept = ex->cap_kept = 0;
}

/* ---- creation: local resources ------------------------------------------------------------- */

static mscclpp_result_t oom(void) { return ERR(MSCCLPP_ERR_NO_MEMORY, "executor: out of memory"); }

/*
 * Scratch for the calls of up to in_cap/out_cap bytes (any dtype: the widest and the narrowest
 * element round chunks differently). Double-scratch plans: every rank must put the upper half
 * at the same offset for every call (lower.c), so the ranks agree on half of the smallest
 * scratch any rank has (context_agree sets scratch_half).
 */
static mscclpp_result_t context_scratch(mscclpp_executor_t *ex, exec_context_t *c)
{
    uint64_t bytes = 0;
    const mscclpp_dtype_t widths[] = {MSCCLPP_UINT8, MSCCLPP_FLOAT16, MSCCLPP_FLOAT32,
                                      MSCCLPP_FLOAT64};
    if (c->plan->double_scratch && ex->p2p)
        return ERR(MSCCLPP_ERR_UNSUPPORTED, "plan '%s': a double scratch needs every rank to "
                   "take part (its halves are agreed by all)", c->plan->name);
    for (int i = 0; i < 4; i++) {
        uint64_t b = exec_scratch_for_allocs(c->plan, c->vrank, c->in_cap, c->out_cap, widths[i]);
        if (b > bytes) bytes = b;
    }
    c->scratch_bytes = bytes; /* what this rank needs, for the agreement, even if it fails */
    if (!bytes) return MSCCLPP_OK;
    CHECK(ex->hal->mem_alloc_shareable(bytes, &c->scratch));
    CHECK(ex->hal->memset_sync(c->scratch, 0, bytes));
    return MSCCLPP_OK;
}

/* Device state (state.c's image) and the host-mapped error mailbox. */
static mscclpp_result_t context_state(mscclpp_executor_t *ex, exec_context_t *c)
{
    const hal_ops_t *hal = ex->hal;
    c->state_bytes = exec_state_bytes(c->plan, c->vrank);
    void *image = calloc(1, c->state_bytes);
    if (!image) return oom();
    mscclpp_result_t res = exec_state_init(c->plan, c->vrank, image, c->state_bytes);
    if (res == MSCCLPP_OK) res = hal->mem_alloc(c->state_bytes, &c->state);
    if (res == MSCCLPP_OK) res = hal->memcpy_sync(c->state, image, c->state_bytes);
    free(image);
    CHECK(res);
    /* host-mapped and zeroed: read without a device sync */
    CHECK(hal->host_alloc(sizeof *c->mailbox, (void **)&c->mailbox));
    memset(c->mailbox, 0, sizeof *c->mailbox);
    return MSCCLPP_OK;
}

/* Memory channel counters (mine; the peers' come with their setup messages), the resource
 * tables the lowering reads, and the per-peer buffer tables. */
static mscclpp_result_t context_channels(mscclpp_executor_t *ex, exec_context_t *c)
{
    const hal_ops_t *hal = ex->hal;
    const plan_gpu_t *g = &c->plan->gpus[c->vrank];
    const int n = ex->comm->nranks;
    int n_mem = g->n_chan[PLAN_CH_MEMORY];
    size_t inbound_bytes = (size_t)(n_mem + 1) * SLOT_U64 * sizeof(uint64_t);
    CHECK(hal->mem_alloc_shareable(inbound_bytes, (void **)&c->inbound));
    CHECK(hal->memset_sync(c->inbound, 0, inbound_bytes));
    c->dummy = c->inbound + (size_t)n_mem * SLOT_U64;
    CHECK(hal->mem_alloc((size_t)(n_mem + 1) * sizeof(uint64_t), (void **)&c->expected));
    CHECK(hal->memset_sync(c->expected, 0, (size_t)(n_mem + 1) * sizeof(uint64_t)));
    int n_sw = g->n_chan[PLAN_CH_SWITCH], n_members = 0;
    for (int s = 0; s < n_sw; s++) n_members += g->switches[s].n_ranks;
    c->chans = calloc((size_t)n_mem + 1, sizeof *c->chans);
    c->rbufs = calloc((size_t)g->n_rbufs + 1, sizeof *c->rbufs);
    c->switches = calloc((size_t)n_sw + 1, sizeof *c->switches);
    c->members = calloc((size_t)n_members + 1, sizeof *c->members);
    c->mappings = calloc((size_t)(n * 4) + 1, sizeof *c->mappings);
    if (!c->chans || !c->rbufs || !c->switches || !c->members || !c->mappings) return oom();
    for (int i = 0; i < n_mem; i++) {
        c->chans[i].inbound = c->inbound + (size_t)i * SLOT_U64;
        c->chans[i].outbound = c->dummy; /* until the peer pairs it */
        c->chans[i].expected = c->expected + i;
    }
    /* switch channel tables; their pointers, like the remote buffers', are set per call */
    for (int s = 0, m0 = 0; s < n_sw; s++) {
        c->switches[s].n_members = g->switches[s].n_ranks;
        c->switches[s].members = &c->members[m0];
        c->switches[s].mc = NULL;
        m0 += g->switches[s].n_ranks;
    }
    for (int t = 0; t < 3; t++) {
        c->peer_ptr[t] = calloc((size_t)n, sizeof(void *));
        if (t < 2) c->peer_off[t] = calloc((size_t)n, sizeof(uint64_t));
        if (!c->peer_ptr[t] || (t < 2 && !c->peer_off[t])) return oom();
        c->peer_ptr[t][c->vrank] = buffer_of(c, t);
    }
    c->off[0] = c->off[1] = UINT64_MAX; /* nothing bound yet */
    /* remote input/output addresses the lowering embeds: port and switch channels, and memory
     * channels to an owner that cannot publish its offsets */
    for (int q = 0; q < g->n_rbufs; q++)
        if (g->rbufs[q].buf != PLAN_BUF_SCRATCH && exec_rbuf_published(c->plan, c->vrank, q) < 0)
            c->baked_off = true;
    for (int s = 0; s < n_sw; s++)
        if (g->switches[s].buf != PLAN_BUF_SCRATCH) c->baked_off = true;
    return MSCCLPP_OK;
}

/* ---- creation: the setup exchange ---------------------------------------------------------- */

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
                   "executor: rank %d is on another node and cannot map rank %d's memory: a "
                   "plan's memory channels and memory-access buffers must stay within a node "
                   "(across nodes: port channels, docs/multinode.md)",
                   ex->comm->rank, peer);
    }
    *ptr = m->ptr;
    c->mappings[c->n_mappings++] = m->import_base;
    m->import_base = NULL;
    mscclpp_regmem_destroy(m);
    return MSCCLPP_OK;
}

/* Largest setup message a rank with n_mem memory channels sends. */
static size_t setup_max(int n_mem) { return 64 + 4 * (REGMEM_WIRE_MAX + 8) + (size_t)(n_mem + 1) * 8; }

/*
 * My setup message to virtual rank v: my counters for my channels to v (with their slots, in
 * ordinal order), then the buffers v maps from me.
 */
static mscclpp_result_t setup_message(mscclpp_executor_t *ex, exec_context_t *c, int v,
                                      wire_writer_t *w)
{
    const struct mscclpp_plan *plan = c->plan;
    const int me = c->vrank;
    const plan_gpu_t *g = &plan->gpus[me];
    int n_mem = g->n_chan[PLAN_CH_MEMORY];
    wire_put_u32(w, EXEC_WIRE_MAGIC);
    wire_put_u32(w, EXEC_WIRE_VERSION);
    int k = chan_count(g, PLAN_CH_MEMORY, v);
    wire_put_u32(w, (uint32_t)k);
    if (k > 0) {
        CHECK(put_regmem(ex, w, c->inbound, (size_t)(n_mem + 1) * SLOT_U64 * sizeof(uint64_t)));
        for (int i = 0; i < n_mem; i++)
            if (g->peers[PLAN_CH_MEMORY][i] == v) wire_put_u64(w, (uint64_t)i);
    }
    unsigned need = needs_from(plan, v, me);
    wire_put_u32(w, need);
    for (int t = 0; t < 3; t++)
        if (need & (1u << t)) CHECK(put_regmem(ex, w, buffer_of(c, t), buffer_bytes(c, t)));
    if (w->overflow) return ERR(MSCCLPP_ERR_INTERNAL, "executor: setup message overflow");
    return MSCCLPP_OK;
}

/* Send my setup message to every peer I share something with. A peer that cannot be reached
 * must not keep the others from their messages: they would wait for us and blame us, not the
 * peer that is gone. So every send is tried, and the first failure reported after. */
static mscclpp_result_t send_setups(mscclpp_executor_t *ex, exec_context_t *c, int tag)
{
    const int n = ex->comm->nranks, me = c->vrank;
    size_t cap = setup_max(c->plan->gpus[me].n_chan[PLAN_CH_MEMORY]);
    uint8_t *msg = malloc(cap);
    if (!msg) return oom();
    mscclpp_result_t send_err = MSCCLPP_OK, res = MSCCLPP_OK;
    char send_msg[512] = "";
    for (int v = 0; v < n && res == MSCCLPP_OK; v++) {
        if (v == me || !pair_talks(c->plan, me, v)) continue;
        wire_writer_t w = {msg, cap, 0, false};
        res = setup_message(ex, c, v, &w);
        if (res != MSCCLPP_OK) break;
        uint64_t len = w.len;
        int peer = vr_to_pr(c, v, n);
        mscclpp_result_t sr = mscclpp_bootstrap_send(ex->comm->boot, &len, sizeof len, peer, tag);
        if (sr == MSCCLPP_OK) sr = mscclpp_bootstrap_send(ex->comm->boot, msg, w.len, peer, tag);
        if (sr != MSCCLPP_OK && send_err == MSCCLPP_OK) {
            send_err = sr;
            snprintf(send_msg, sizeof send_msg, "%s", mscclpp_last_error());
        }
    }
    free(msg);
    CHECK(res);
    if (send_err != MSCCLPP_OK) return core_error_quiet(send_err, "%s", send_msg); /* logged */
    return MSCCLPP_OK;
}

/* Pair ordinal j of my channels to v with ordinal j of theirs to me (plan-format §5.2); my
 * extra channels keep signalling the dummy counter. */
static mscclpp_result_t read_counters(mscclpp_executor_t *ex, exec_context_t *c,
                                      wire_reader_t *r, int v, int peer, uint32_t k)
{
    const plan_gpu_t *g = &c->plan->gpus[c->vrank];
    const int n_mem = g->n_chan[PLAN_CH_MEMORY];
    void *their_inbound = NULL;
    CHECK(get_regmem(ex, c, r, peer, &their_inbound));
    int i = -1; /* my channel to v that ordinal s pairs with */
    for (uint32_t s = 0; s < k; s++) {
        uint64_t slot = wire_get_u64(r);
        if (slot >= (uint64_t)c->plan->gpus[v].n_chan[PLAN_CH_MEMORY])
            return ERR(MSCCLPP_ERR_REMOTE, "executor: rank %d sent counter slot %llu", peer,
                       (unsigned long long)slot);
        if (i < n_mem) do i++; while (i < n_mem && g->peers[PLAN_CH_MEMORY][i] != v);
        if (i < n_mem) c->chans[i].outbound = (uint64_t *)their_inbound + slot * SLOT_U64;
    }
    return MSCCLPP_OK;
}

/* Parse virtual rank v's setup message: its counters for our channels, then our buffers. */
static mscclpp_result_t parse_setup(mscclpp_executor_t *ex, exec_context_t *c, wire_reader_t *r,
                                    int v, int peer)
{
    const struct mscclpp_plan *plan = c->plan;
    const int me = c->vrank, rank = ex->comm->rank;
    if (wire_get_u32(r) != EXEC_WIRE_MAGIC || wire_get_u32(r) != EXEC_WIRE_VERSION)
        return ERR(MSCCLPP_ERR_REMOTE, "executor: rank %d sent a setup message of another "
                   "format or version", peer);
    uint32_t k = wire_get_u32(r);
    int want = chan_count(&plan->gpus[v], PLAN_CH_MEMORY, me);
    if (k != (uint32_t)want)
        return ERR(MSCCLPP_ERR_REMOTE, "executor: rank %d announces %u channels to rank %d, "
                   "the plan says %d (different plans?)", peer, k, rank, want);
    if (k > 0) CHECK(read_counters(ex, c, r, v, peer, k));
    uint32_t need = wire_get_u32(r);
    if (need != needs_from(plan, me, v))
        return ERR(MSCCLPP_ERR_REMOTE, "executor: rank %d offers buffers 0x%x, rank %d needs "
                   "0x%x (different plans?)", peer, need, rank, needs_from(plan, me, v));
    for (int t = 0; t < 3; t++)
        if (need & (1u << t)) CHECK(get_regmem(ex, c, r, peer, &c->peer_ptr[t][v]));
    if (r->bad)
        return ERR(MSCCLPP_ERR_REMOTE, "executor: truncated setup message from rank %d", peer);
    return MSCCLPP_OK;
}

static mscclpp_result_t recv_setup(mscclpp_executor_t *ex, exec_context_t *c, int v, int tag)
{
    int peer = vr_to_pr(c, v, ex->comm->nranks);
    uint64_t len = 0;
    CHECK(mscclpp_bootstrap_recv(ex->comm->boot, &len, sizeof len, peer, tag));
    if (len > setup_max(c->plan->gpus[v].n_chan[PLAN_CH_MEMORY]))
        return ERR(MSCCLPP_ERR_REMOTE, "executor: rank %d sent a %llu-byte setup message", peer,
                   (unsigned long long)len);
    uint8_t *in = malloc(len ? len : 1);
    if (!in) return oom();
    mscclpp_result_t res = mscclpp_bootstrap_recv(ex->comm->boot, in, (size_t)len, peer, tag);
    wire_reader_t r = {in, (size_t)len, 0, false};
    if (res == MSCCLPP_OK) res = parse_setup(ex, c, &r, v, peer);
    free(in);
    return res;
}

/* One setup message to and from every peer this rank talks to (both sides agree from the
 * plan). From the first message on, peers may hold half of this setup (ex->setup_talked). */
static mscclpp_result_t context_exchange(mscclpp_executor_t *ex, exec_context_t *c, int tag)
{
    ex->setup_talked = true;
    CHECK(send_setups(ex, c, tag));
    for (int v = 0; v < ex->comm->nranks; v++)
        if (v != c->vrank && pair_talks(c->plan, c->vrank, v)) CHECK(recv_setup(ex, c, v, tag));
    return MSCCLPP_OK;
}

/* ---- creation ------------------------------------------------------------------------------ */

/* Nobody may leave (and stop serving its memory) before the peers that map it have: a barrier
 * of all ranks, or, on a point-to-point executor, a token to and from each peer this rank talks
 * to. */
static mscclpp_result_t setup_barrier(mscclpp_executor_t *ex, exec_context_t *c, int tag)
{
    if (!ex->p2p) return mscclpp_bootstrap_barrier(ex->comm->boot); /* see takes_part */
    const int n = ex->comm->nranks;
    uint64_t token = c->seq;
    for (int v = 0; v < n; v++)
        if (v != c->vrank && pair_talks(c->plan, c->vrank, v))
            CHECK(mscclpp_bootstrap_send(ex->comm->boot, &token, sizeof token, vr_to_pr(c, v, n),
                                         tag));
    for (int v = 0; v < n; v++)
        if (v != c->vrank && pair_talks(c->plan, c->vrank, v))
            CHECK(mscclpp_bootstrap_recv(ex->comm->boot, &token, sizeof token, vr_to_pr(c, v, n),
                                         tag));
    return MSCCLPP_OK;
}

/* A plan whose memory channels join this rank to another node cannot run here: say so before
 * any commitment (context_prepare; every rank refuses in the agreement step, unharmed). */
static mscclpp_result_t check_same_node(mscclpp_executor_t *ex, const exec_context_t *c)
{
    const plan_gpu_t *g = &c->plan->gpus[c->vrank];
    const int n = ex->comm->nranks;
    for (int i = 0; i < g->n_chan[PLAN_CH_MEMORY]; i++) {
        int peer = vr_to_pr(c, g->peers[PLAN_CH_MEMORY][i], n);
        if (!comm_same_node(ex->comm, peer))
            return ERR(MSCCLPP_ERR_UNSUPPORTED,
                       "plan '%s' joins rank %d to rank %d, on another node, by a memory channel: "
                       "memory channels need memory both ranks can map, so they stay within a "
                       "node (across nodes a plan uses port channels; the executor's own plans "
                       "do, docs/plan-selection.md)",
                       c->plan->name, ex->comm->rank, peer);
    }
    return MSCCLPP_OK;
}

/*
 * What this rank can find out alone before any peer commits to the setup: its own resources
 * (device state, counters, scratch), that the buffers the peers address can be shared, and
 * that a transport reaches every peer of its port channels.
 */
static mscclpp_result_t context_prepare(mscclpp_executor_t *ex, exec_context_t *c)
{
    const struct mscclpp_plan *plan = c->plan;
    const int n = ex->comm->nranks, me = c->vrank;
    CHECK(check_same_node(ex, c));
    CHECK(context_state(ex, c));
    CHECK(context_channels(ex, c));
    CHECK(context_scratch(ex, c));
    for (int v = 0; v < n; v++) {
        if (v == me || !pair_talks(plan, me, v)) continue;
        unsigned need = needs_from(plan, v, me);
        for (int t = 0; t < 3; t++) {
            void *p = buffer_of(c, t);
            if ((need & (1u << t)) && (!p || buffer_bytes(c, t) == 0))
                return ERR_ARG("plan '%s': rank %d addresses the %s buffer of rank %d, which "
                               "must then be memory the backend can share (got %p)",
                               plan->name, vr_to_pr(c, v, n), buf_name(t), ex->comm->rank, p);
        }
    }
    if (exec_port_needed(plan)) {
        uint64_t lbytes[3] = {c->in_alloc, c->out_alloc, c->scratch_bytes};
        CHECK(exec_port_check(ex->comm, plan, c->vrank, c->rotation, lbytes));
    }
    return MSCCLPP_OK;
}

/* Whether rank p (not this one) takes part in setting up context c: every rank, but on a
 * point-to-point executor (two-rank plans, set up pair by pair) only the ranks this one talks
 * to. Not decided from the plan elsewhere: a made plan holds one rank's part, with stubs for
 * the peers, so ranks would judge a pair differently. */
static bool takes_part(const mscclpp_executor_t *ex, const exec_context_t *c, int p, int n)
{
    int v = (p - c->rotation + n) % n;
    return v != c->vrank && (!ex->p2p || pair_talks(c->plan, c->vrank, v));
}

/*
 * Every rank refuses the setup (context_agree): withdraw our announcement, then one more
 * message each way, so that no rank runs its next call before every peer's announcement is
 * gone: its launch would find the record and take it for a peer that disagrees (seen in
 * test_exec_agree t_refused_setup, 1 run in 3 under load). Returns the error that breaks the
 * executor instead of the refusal, if any.
 */
static mscclpp_result_t agree_withdraw(mscclpp_executor_t *ex, const exec_context_t *c, int tag,
                                       const exec_agree_t *mine)
{
    const int n = ex->comm->nranks;
    mscclpp_result_t res = MSCCLPP_OK;
    if (ex->announcing) {
        res = exec_setup_withdraw(ex, ex->announcing);
        ex->announcing->prev = NULL; /* nothing left to settle */
    }
    for (int p = 0; p < n && res == MSCCLPP_OK; p++)
        if (takes_part(ex, c, p, n)) res = exec_agree_send(ex, p, tag, mine);
    exec_agree_t theirs;
    for (int p = 0; p < n && res == MSCCLPP_OK; p++)
        if (takes_part(ex, c, p, n)) res = exec_agree_recv(ex, p, tag, &theirs);
    return res;
}

/*
 * First step of a setup that talks: every rank tells every other the call it builds the
 * context for (kern_args.h, "Call signature"), whether it could prepare it (`local`), and its
 * scratch size. Before this nobody has committed anything: ranks that disagree, or any rank
 * that cannot serve the call, stop here, every one of them, told why, with nothing shared yet,
 * so the executor stays usable (ex->setup_refused). A rank that repeats its previous call
 * instead sends its own call's signature here once it found our announcement
 * (exec_setup_announce): then the ranks disagree and its launch failed midway
 * (ex->setup_disagreed: every rank resynchronises).
 */
static mscclpp_result_t context_agree(mscclpp_executor_t *ex, exec_context_t *c, int tag,
                                      mscclpp_result_t local)
{
    const int n = ex->comm->nranks, me = ex->comm->rank;
    exec_agree_t mine, theirs;
    memset(&mine, 0, sizeof mine);
    exec_call_sig(c->plan->collective, exec_sig_seq(ex, c), c->digest, &ex->shape, mine.sig);
    mine.status = local;
    mine.scratch = c->scratch_bytes;
    mine.staged = c->staged;
    if (local != MSCCLPP_OK) snprintf(mine.why, sizeof mine.why, "%s", mscclpp_last_error());
    char my_why[sizeof mine.why + 1];
    snprintf(my_why, sizeof my_why, "%s", mine.why);
    ex->setup_talked = true;
    mscclpp_result_t res = MSCCLPP_OK;
    for (int p = 0; p < n && res == MSCCLPP_OK; p++)
        if (takes_part(ex, c, p, n)) res = exec_agree_send(ex, p, tag, &mine);
    int differs = -1, others = 0, refuses = local != MSCCLPP_OK ? me : -1, answered = -1;
    uint64_t differs_sig[KERN_SIG_WORDS], least = mine.scratch;
    mscclpp_result_t refusal = local;
    char refusal_why[sizeof mine.why + 1];
    snprintf(refusal_why, sizeof refusal_why, "%s", mine.why);
    for (int p = 0; p < n && res == MSCCLPP_OK; p++) {
        if (!takes_part(ex, c, p, n)) continue;
        res = exec_agree_recv(ex, p, tag, &theirs);
        if (res != MSCCLPP_OK) break;
        if (theirs.answer && answered < 0) answered = p;
        if (theirs.status != MSCCLPP_OK && refuses < 0) {
            refuses = p;
            refusal = theirs.status;
            snprintf(refusal_why, sizeof refusal_why, "%s", theirs.why);
        }
        if (theirs.scratch < least) least = theirs.scratch;
        if (!memcmp(mine.sig, theirs.sig, KERN_SIG_CMP * sizeof(uint64_t))) continue;
        if (differs < 0) {
            differs = p;
            memcpy(differs_sig, theirs.sig, sizeof differs_sig);
        } else {
            others++;
        }
    }
    CHECK(res);
    if (differs >= 0) {
        char how[96] = "";
        if (others)
            snprintf(how, sizeof how, " (and %d more rank%s)", others, others > 1 ? "s" : "");
        if (answered >= 0) {
            ex->setup_disagreed = true; /* the answering ranks' launches failed midway */
        } else {
            CHECK(agree_withdraw(ex, c, tag, &mine));
            ex->setup_refused = true; /* every rank stopped here: nothing to repair */
            ex->setup_talked = false;
        }
        return exec_disagree_error(me, mine.sig, c->plan->name, differs, differs_sig, how);
    }
    if (refuses >= 0) {
        CHECK(agree_withdraw(ex, c, tag, &mine));
        ex->setup_refused = true;
        ex->setup_talked = false;
        if (refuses == me) return core_error_quiet(local, "%s", my_why); /* logged already */
        return ERR(refusal,
                   "rank %d cannot serve this call with plan '%s' (so no rank runs it): "
                   "%s",
                   refuses, c->plan->name, refusal_why);
    }
    if (c->plan->double_scratch) c->scratch_half = least / 2 / 64 * 64;
    return MSCCLPP_OK;
}

static mscclpp_result_t context_build(mscclpp_executor_t *ex, exec_context_t *c, uint32_t seq)
{
    mscclpp_comm_t *comm = ex->comm;
    const plan_gpu_t *g = &c->plan->gpus[c->vrank];
    const int tag = ex->p2p ? EXEC_TAG_P2P : exec_setup_tag(seq);
    CHECK(context_agree(ex, c, tag, context_prepare(ex, c)));
    CHECK(context_exchange(ex, c, tag));
    if (exec_port_needed(c->plan)) {
        void *lptr[3] = {c->send_base, c->recv_base, c->scratch};
        uint64_t lbytes[3] = {c->in_alloc, c->out_alloc, c->scratch_bytes};
        CHECK(exec_port_create(comm, c->plan, c->vrank, c->rotation, lptr, lbytes, tag,
                               &c->port));
    }
    CHECK(setup_barrier(ex, c, tag));
    INFO(SUBSYS_EXEC, "rank %d: context %u for plan '%s' (virtual rank %d): %d memory channels, "
         "%d remote buffers, %d switch channels, %llu bytes scratch for calls up to %llu/%llu "
         "bytes%s", comm->rank, seq, c->plan->name, c->vrank, g->n_chan[PLAN_CH_MEMORY],
         g->n_rbufs, g->n_chan[PLAN_CH_SWITCH], (unsigned long long)c->scratch_bytes,
         (unsigned long long)c->in_cap, (unsigned long long)c->out_cap,
         c->shares_io ? ", on the call's allocations" : "");
    return MSCCLPP_OK;
}

/* A staged context's stand-ins for this rank's buffers (exec_context_t.staged): shareable
 * memory of the sizes its caps serve, one buffer holding both for an in-place plan. */
static mscclpp_result_t context_stage(mscclpp_executor_t *ex, exec_context_t *c)
{
    uint64_t in = c->in_cap > 64 ? c->in_cap : 64, out = c->out_cap > 64 ? c->out_cap : 64;
    if (c->plan->inplace && out < in) out = in;
    if (in > SIZE_MAX || out > SIZE_MAX) return oom();
    c->staged = true;
    hal_mem_info_t m;
    if (!c->plan->inplace) {
        CHECK(ex->hal->mem_alloc_shareable((size_t)in, &c->stage[0]));
        exec_mem_of(ex->hal, c->stage[0], &m);
        c->send_base = m.base;
        c->send_id = m.id;
        c->in_alloc = m.size;
    }
    CHECK(ex->hal->mem_alloc_shareable((size_t)out, &c->stage[1]));
    exec_mem_of(ex->hal, c->stage[1], &m);
    c->recv_base = m.base;
    c->recv_id = m.id;
    c->out_alloc = m.size;
    if (c->plan->inplace) { /* input and output live in the one buffer, as the caller's do */
        c->send_base = c->recv_base;
        c->send_id = c->recv_id;
        c->in_alloc = c->out_alloc;
    }
    if (!c->send_base || !c->recv_base)
        return ERR(MSCCLPP_ERR_INTERNAL,
                   "plan '%s': the %s backend does not describe its own "
                   "shareable memory",
                   c->plan->name, ex->hal->name);
    return MSCCLPP_OK;
}

static mscclpp_result_t context_create(mscclpp_executor_t *ex, const struct mscclpp_plan *plan,
                                       const exec_bufs_t *bufs, bool shares_io, uint64_t in_cap,
                                       uint64_t out_cap, int rotation, exec_context_t **out)
{
    const int n = ex->comm->nranks;
    exec_context_t *c = calloc(1, sizeof *c);
    if (!c) return oom();
    c->ce.ops = &context_ops;
    c->ce.owner = plan;
    c->plan = plan;
    plan_hold(plan); /* the caller may destroy its plan while this context lives */
    c->shares_io = shares_io;
    c->reaches_io = exec_plan_reaches_io(plan);
    c->in_cap = in_cap;
    c->out_cap = out_cap;
    if (shares_io && bufs->staged) {
        mscclpp_result_t r = context_stage(ex, c);
        if (r != MSCCLPP_OK) {
            context_free(ex, c);
            return r;
        }
    } else if (shares_io) {
        c->send_base = bufs->in.base;
        c->recv_base = bufs->out.base;
        c->send_id = bufs->in.id;
        c->recv_id = bufs->out.id;
        c->in_alloc = bufs->in.size;
        c->out_alloc = bufs->out.size;
    }
    c->rotation = rotation;
    c->vrank = (ex->comm->rank - rotation + n) % n;
    c->seq = ex->context_seq++;
    c->digest = exec_plan_digest(plan);
    mscclpp_result_t res = context_build(ex, c, c->seq);
    if (res == MSCCLPP_OK) {
        *out = c;
        return MSCCLPP_OK;
    }
    if (ex->setup_talked) {
        /* a peer that got our message may be importing our buffers right now: withdrawing
         * them would make it fail on us ("withdrawn already") instead of on the real cause */
        exec_cache_bury(ex, &c->ce);
        return res;
    }
    context_free(ex, c);
    return res;
}

/*
 * The sizes a new context's scratch serves, from the call's: both multiplied by the smallest
 * power of two that brings the larger side to EXEC_SCRATCH_MIN_CALL, doubled once more unless
 * that is a power of two itself (a power of two keeps every divisibility the layout needs, and
 * the headroom keeps growth steps few). The same on every rank, since the call's sizes are.
 */
#define EXEC_SCRATCH_MIN_CALL ((uint64_t)256 << 10)

static void scratch_caps(uint64_t in_bytes, uint64_t out_bytes, uint64_t *in_cap,
                         uint64_t *out_cap)
{
    uint64_t big = in_bytes > out_bytes ? in_bytes : out_bytes, m = 1;
    if (big == 0) big = 1;
    while (big * m < EXEC_SCRATCH_MIN_CALL) m *= 2;
    if ((big * m) & (big * m - 1)) m *= 2; /* not a power of two: the next one is < 2x */
    *in_cap = in_bytes * m;
    *out_cap = out_bytes * m;
}

/* Drop context `c`, whose scratch is too small for this call, after the launches queued on it
 * (a context a graph launches stays, with the dead ones, until the executor goes). */
static mscclpp_result_t drop_context(mscclpp_executor_t *ex, exec_context_t *c)
{
    if (exec_cannot_drain(ex))
        return ERR(MSCCLPP_ERR_UNSUPPORTED, "plan '%s': a larger call than before needs a larger "
                   "scratch, which cannot be made while a stream is captured: run the call once "
                   "at this size before the capture", c->plan->name);
    CHECK(hal_api_source_drain(ex->source)); /* launches queued on its scratch end first */
    retired_sweep(ex);
    exec_cache_remove(ex, &c->ce);
    return MSCCLPP_OK;
}

/*
 * Bound the cache (issue 22 item 6: every context holds scratch, counters, descriptors and
 * peer mappings; a program cycling through many buffer pairs ran out of file descriptors):
 * before a new context is built, drop the least recently used entries of the executor's cache
 * (contexts and native buffer sets) until one more fits. Every rank makes the same calls, so
 * every rank misses here alike and drops the same ones; peers may still be reading our memory
 * of a dropped context, so every rank drains its streams and all meet at a barrier before
 * anything is freed (exec_cache_make_room).
 */
static mscclpp_result_t context_evict(mscclpp_executor_t *ex, const struct mscclpp_plan *plan)
{
    bool talked = false;
    mscclpp_result_t r = exec_cache_make_room(ex, &context_ops, plan, &talked);
    if (talked) ex->setup_talked = true; /* a failure from here on leaves the peers elsewhere */
    return r;
}

mscclpp_result_t exec_context_get(mscclpp_executor_t *ex, const struct mscclpp_plan *plan,
                                  const exec_bufs_t *bufs, size_t in_bytes, size_t out_bytes,
                                  int rotation, mscclpp_dtype_t dtype, exec_context_t **out)
{
    (void)dtype; /* the scratch serves every dtype */
    const bool shares_io = exec_plan_shares_io(plan);
    const bool staged = shares_io && bufs->staged; /* keyed without the caller's buffers */
    const bool keyed = shares_io && !staged;
    void *send_base = keyed ? bufs->in.base : NULL, *recv_base = keyed ? bufs->out.base : NULL;
    const uint64_t send_id = keyed ? bufs->in.id : 0, recv_id = keyed ? bufs->out.id : 0;
    /* MSCCLPP_PLAN_DIRECT=auto's calls: every rank's buffers, agreed for this call */
    const uint64_t peers = keyed && ex->hint.set ? ex->hint.peers : 0;
    /* a failed context breaks the executor (exec_check), so every context here is sound */
    const context_key_t key = {send_base, recv_base, send_id, recv_id, peers, rotation, staged};
    exec_context_t *c = context_of(exec_cache_find(ex, &context_ops, plan, &key));
    if (c && in_bytes <= c->in_cap && out_bytes <= c->out_cap) {
        *out = c;
        return MSCCLPP_OK;
    }
    /* A new context: say so in the context of our previous launch first, where peers that
     * disagree (they repeat their previous call) are waiting for us (state.c). */
    exec_announce_t ann;
    CHECK(exec_setup_announce(ex, plan, rotation, &ann));
    if (c) {
        /* a larger call than its scratch serves: every rank makes the same call, so every
         * rank rebuilds it here, larger */
        INFO(SUBSYS_EXEC, "rank %d: context %u of plan '%s' grows for %zu/%zu bytes",
             ex->comm->rank, c->seq, plan->name, in_bytes, out_bytes);
        CHECK(drop_context(ex, c));
    }
    /*
     * Contexts on an earlier allocation at one of these addresses (freed, then allocated
     * again: the allocator reuses ranges) hold the peers' mappings of their old buffers: drop
     * them. The peers, running the same program, freed theirs too and miss here alike, so the
     * new context is built collectively as on first use. Not for a context labelled with every
     * rank's buffers (peers): the ranks agreed on this call's, so every rank misses here, but
     * only this one may have freed its own: dropping them here alone would leave the ranks'
     * caches unlike (their eviction counts entries); they never match again (the label holds
     * the freed allocation's id) and go as the least recently used.
     */
    int dropped = 0;
    for (; keyed && !peers;) {
        const void *gone = NULL;
        for (exec_context_t *e = exec_context_next(ex, NULL); e && !gone;
             e = exec_context_next(ex, e)) {
            if (!e->shares_io) continue;
            if ((e->send_base == send_base && e->send_id != send_id) ||
                (e->recv_base == send_base && e->recv_id != send_id))
                gone = send_base;
            else if ((e->send_base == recv_base && e->send_id != recv_id) ||
                     (e->recv_base == recv_base && e->recv_id != recv_id))
                gone = recv_base;
        }
        if (!gone) break;
        int n = 0;
        CHECK(exec_cache_forget(ex, gone, &n)); /* and native buffer sets on it */
        dropped += n;
    }
    if (dropped)
        INFO(SUBSYS_EXEC, "rank %d: dropped %d context(s) of freed allocations at %p / %p",
             ex->comm->rank, dropped, send_base, recv_base);
    uint64_t in_cap, out_cap;
    scratch_caps(in_bytes, out_bytes, &in_cap, &out_cap);
    CHECK(context_evict(ex, plan));
    /* the announcement went with its context if a drop or the eviction took it */
    bool kept = false;
    for (exec_context_t *k = exec_context_next(ex, NULL); k && !kept; k = exec_context_next(ex, k))
        kept = k == ann.prev;
    if (!kept) ann.prev = NULL;
    c = NULL;
    ex->announcing = &ann; /* a setup every rank refuses withdraws it (context_agree) */
    mscclpp_result_t res =
        context_create(ex, plan, bufs, shares_io, in_cap, out_cap, rotation, &c);
    ex->announcing = NULL;
    /* peers that repeat their previous call instead of building this context with us found
     * our announcement (above) and answered it: that is why this setup failed */
    res = exec_setup_settle(ex, &ann, res);
    if (res != MSCCLPP_OK) return res;
    c->peers = peers;
    exec_cache_add(ex, &c->ce);
    *out = c;
    return MSCCLPP_OK;
}

/* ---- per call ------------------------------------------------------------------------------ */

/* Owner's buffer of type `buf` at this call's offset (scratch has none). */
static void *peer_buffer(const exec_context_t *c, int buf, int owner)
{
    char *base = c->peer_ptr[buf][owner];
    return buf == PLAN_BUF_SCRATCH ? base : base + c->peer_off[buf][owner];
}

/*
 * Plans that address a peer's input or output through memory channels reach its allocation's
 * base plus the offset the peer publishes at each launch's fence (kern_args.h): nothing here
 * talks to the peers, and the lowered plan does not depend on the offsets. Where the owner
 * cannot publish (port channels, switch channels), the peer's buffer is addressed at this
 * rank's own offset (peer_off holds it for every rank), which the lowered plan embeds: those
 * are cached per offset pair (exec_context_lowered).
 */
mscclpp_result_t exec_context_bind(mscclpp_executor_t *ex, exec_context_t *c, uint64_t in_off,
                                   uint64_t out_off)
{
    (void)ex;
    if (c->off[0] == in_off && c->off[1] == out_off) return MSCCLPP_OK;
    c->off[0] = in_off;
    c->off[1] = out_off;
    const int n = ex->comm->nranks;
    for (int v = 0; v < n; v++) {
        c->peer_off[0][v] = in_off;
        c->peer_off[1][v] = out_off;
    }
    const plan_gpu_t *g = &c->plan->gpus[c->vrank];
    for (int q = 0; q < g->n_rbufs; q++)
        c->rbufs[q] = exec_rbuf_published(c->plan, c->vrank, q) >= 0
                          ? c->peer_ptr[g->rbufs[q].buf][g->rbufs[q].owner] /* + published */
                          : peer_buffer(c, g->rbufs[q].buf, g->rbufs[q].owner);
    int m0 = 0;
    for (int s = 0; s < g->n_chan[PLAN_CH_SWITCH]; s++) {
        const plan_switch_t *sw = &g->switches[s];
        for (int m = 0; m < sw->n_ranks; m++)
            c->members[m0 + m] = peer_buffer(c, sw->buf, sw->ranks[m]);
        m0 += sw->n_ranks;
    }
    return MSCCLPP_OK;
}

/*
 * How long the interpreter's waits spin before yielding: the one wait policy's choice
 * (base/wait.h) for the threads that poll on this node. Per local rank: one per block, and the
 * proxy when the plan has port channels (it polls its FIFO). The stream's worker sleeps on a
 * condition variable, so it does not count. Namespace "nodes" sharing one machine each see only
 * their own ranks: there MSCCLPP_HOST_SPIN sets the spin by hand (docs/multinode.md).
 */
static uint32_t host_spin_for(const mscclpp_executor_t *ex, const exec_context_t *c)
{
    int blocks = c->plan->gpus[c->vrank].n_blocks;
    unsigned per_rank = (unsigned)(blocks > 0 ? blocks : 1) + (c->port ? 1u : 0u);
    return base_wait_spin((unsigned)ex->comm->nlocal * per_rank);
}

/* What the lowering needs of this context (lower.h). */
static mscclpp_result_t context_resources(mscclpp_executor_t *ex, exec_context_t *c,
                                          exec_resources_t *res)
{
    const plan_gpu_t *g = &c->plan->gpus[c->vrank];
    memset(res, 0, sizeof *res);
    res->input = (char *)c->send_base + c->off[0];
    res->output = (char *)c->recv_base + c->off[1];
    res->scratch = c->scratch;
    res->scratch_bytes = c->scratch_bytes;
    res->scratch_half = c->scratch_half;
    res->state = c->state;
    res->n_mem_chans = g->n_chan[PLAN_CH_MEMORY];
    res->mem_chans = c->chans;
    res->n_rbufs = g->n_rbufs;
    res->rbufs = c->rbufs;
    res->n_switch = g->n_chan[PLAN_CH_SWITCH];
    res->switches = c->switches;
    res->host_spin = host_spin_for(ex, c);
    res->max_threads = ex->max_threads;
    return exec_port_fill(c->port, c->peer_off, res);
}

/* Lowered plans a context keeps (different shapes, or offsets of plans that share their
 * input/output); past this the cache starts over, after the launches that use it. */
#define EXEC_LOWCACHE_MAX 64

/*
 * Lower for this call shape and copy the blob to the device. On a GPU the copy is queued on
 * the call's stream from pinned memory (no host synchronisation: a new blob is used only by
 * launches queued after it); the host backend's device memory is host memory, copied at once.
 */
static mscclpp_result_t lowcache_add(mscclpp_executor_t *ex, exec_context_t *c, size_t in_bytes,
                                     size_t out_bytes, mscclpp_dtype_t dtype, mscclpp_redop_t op,
                                     mscclpp_packet_t packet, hal_stream_t stream,
                                     exec_lowcache_t **out)
{
    if (c->n_lowered >= EXEC_LOWCACHE_MAX) {
        /* queued launches read these blobs: waited for, or (during a capture) retired */
        bool defer = exec_cannot_drain(ex);
        if (!defer) {
            CHECK(hal_api_source_drain(ex->source));
            retired_sweep(ex);
        }
        lowcache_flush(ex, c, defer);
    }
    exec_resources_t res;
    CHECK(context_resources(ex, c, &res));
    exec_lowcache_t *l = calloc(1, sizeof *l);
    if (!l) return oom();
    mscclpp_result_t r = exec_lower(c->plan, c->vrank, in_bytes, out_bytes, dtype, op, packet,
                                    &res, &l->low);
    const size_t bytes = r == MSCCLPP_OK ? l->low->blob_bytes : 0;
    if (r == MSCCLPP_OK) r = ex->hal->mem_alloc(bytes, &l->dev_blob);
    if (r == MSCCLPP_OK && stream && !ex->host_memory) {
        r = ex->hal->host_alloc(bytes, &l->host_blob);
        if (r == MSCCLPP_OK) {
            memcpy(l->host_blob, l->low->blob, bytes);
            r = ex->hal->memcpy_async(l->dev_blob, l->host_blob, bytes, stream);
        }
    } else if (r == MSCCLPP_OK) {
        r = ex->hal->memcpy_sync(l->dev_blob, l->low->blob, bytes);
    }
    if (r != MSCCLPP_OK) {
        lowcache_free(ex, l);
        return r;
    }
    l->low->args.plan = l->dev_blob;
    l->in_bytes = in_bytes;
    l->out_bytes = out_bytes;
    l->in_off = c->baked_off ? c->off[0] : 0;
    l->out_off = c->baked_off ? c->off[1] : 0;
    l->dtype = dtype;
    l->op = op;
    l->packet = packet;
    l->next = c->lowered;
    c->lowered = l;
    c->n_lowered++;
    *out = l;
    return MSCCLPP_OK;
}

mscclpp_result_t exec_context_lowered(mscclpp_executor_t *ex, exec_context_t *c,
                                      size_t in_bytes, size_t out_bytes, mscclpp_dtype_t dtype,
                                      mscclpp_redop_t op, mscclpp_packet_t packet,
                                      hal_stream_t stream, exec_lowcache_t **out)
{
    const uint64_t in_off = c->baked_off ? c->off[0] : 0, out_off = c->baked_off ? c->off[1] : 0;
    for (exec_lowcache_t *l = c->lowered; l; l = l->next)
        if (l->in_bytes == in_bytes && l->out_bytes == out_bytes && l->dtype == dtype &&
            l->op == op && l->packet == packet && l->in_off == in_off && l->out_off == out_off) {
            *out = l;
            return MSCCLPP_OK;
        }
    return lowcache_add(ex, c, in_bytes, out_bytes, dtype, op, packet, stream, out);
}
