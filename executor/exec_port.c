/*
 * Port channels of an executor context (spec §5.1-5.4 for the port half).
 *
 * Setup, per peer this rank has a port relation with (port channels either way, or a remote
 * buffer one of us reaches through a port channel), in ascending virtual rank, through the port
 * links of core/port_setup.h (the transport, the connection and one message each way):
 *   1. open a link to each such peer (ipc within a node, else ib/ucx);
 *   2. offer it my counter region with the slot of each of my port channels to it (in channel
 *      order) and the buffers it writes through port channels; exchange;
 *   3. my j-th port channel to the peer signals the slot of the peer's j-th channel to me
 *      (the pairing rule of spec §5.2).
 * Then a proxy (core/proxy.h) drains the interpreter's triggers into put / signal / flush.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/config.h"
#include "base/wait.h"
#include "base/debug.h"
#include "core/port_setup.h"
#include "core/proxy.h"
#include "executor/exec_port.h"

#define PORT_SLOT_U64 (PORT_SLOT_BYTES / 8) /* counters 64 bytes apart */
#define PORT_NO_SLOT UINT64_MAX
_Static_assert(PORT_LINK_BUFS == 3, "a plan's port channels write input, output or scratch");

typedef struct {
    bool used;
    int rank;  /* physical */
    int tpi;   /* TP_* */
    port_link_t link; /* transport, connection, the peer's counters and buffers */
    uint64_t *slots;  /* my counter slots for the peer's channels (my channels to it, in order) */
    bool gone; /* its connection failed while this rank waited for nothing from it */
} port_peer_t;

struct exec_port {
    mscclpp_comm_t *comm;
    const hal_ops_t *hal;
    const struct mscclpp_plan *plan;
    int vrank, rotation, n;
    int n_ports;
    int *chan_v;           /* per port channel: virtual peer */
    uint64_t *remote_slot; /* per port channel: slot in the peer's counter region */
    uint64_t *out_total;   /* per port channel: signals sent */
    port_peer_t *peers;    /* per virtual rank */
    uint64_t *counters;    /* n_ports + 1 slots */
    size_t counters_bytes;
    bool counters_host;    /* from host_alloc (else shareable memory) */
    uint64_t *expected;    /* device memory, n_ports + 1 */
    bool expected_host;    /* ... that this thread may read (the host backend) */
    tp_mem_t *cmem[TP__COUNT];
    void *lptr[3];
    uint64_t lbytes[3];
    tp_mem_t *lmem[3][TP__COUNT];
    exec_memchan_t *chans;
    uint64_t *pbufs;
    proxy_t *proxy;
    uint32_t host_spin; /* the interpreter's spin with the machine's other nodes counted; 0: none */
};

static int chan_count(const plan_gpu_t *g, int to)
{
    int k = 0;
    for (int i = 0; i < g->n_chan[PLAN_CH_PORT]; i++)
        if (g->peers[PLAN_CH_PORT][i] == to) k++;
    return k;
}

/* Buffer types (bits) rank `peer` writes on rank `me` through port channels. */
static unsigned port_needs(const struct mscclpp_plan *plan, int peer, int me)
{
    const plan_gpu_t *g = &plan->gpus[peer];
    unsigned mask = 0;
    for (int q = 0; q < g->n_rbufs; q++)
        if (g->rbufs[q].owner == me && (g->rbufs[q].access & (1u << PLAN_CH_PORT)))
            mask |= 1u << g->rbufs[q].buf;
    return mask;
}

bool exec_port_needed(const struct mscclpp_plan *plan)
{
    for (int r = 0; r < plan->nranks; r++) {
        if (plan->gpus[r].n_chan[PLAN_CH_PORT] > 0) return true;
        for (int q = 0; q < plan->gpus[r].n_rbufs; q++)
            if (plan->gpus[r].rbufs[q].access & (1u << PLAN_CH_PORT)) return true;
    }
    return false;
}

static bool related(const struct mscclpp_plan *plan, int me, int v)
{
    return chan_count(&plan->gpus[me], v) || chan_count(&plan->gpus[v], me) ||
           port_needs(plan, v, me) || port_needs(plan, me, v);
}

/* ---- the proxy's side ----------------------------------------------------------------------- */

/* A transport call to `peer` failed: the error blames that rank (core_culprit). */
static mscclpp_result_t blame(const port_peer_t *peer, mscclpp_result_t r)
{
    if (r != MSCCLPP_OK) core_set_culprit(peer->rank);
    return r;
}

static mscclpp_result_t port_handle(void *arg, uint64_t fst, uint64_t snd)
{
    exec_port_t *p = arg;
    uint64_t bytes = fst & 0xffffffffull, so = fst >> 32, doff = snd & 0xffffffffull;
    uint32_t chan = (uint32_t)(snd >> 32) & 1023u, q = (uint32_t)(snd >> 42) & 1023u;
    uint32_t loc = (uint32_t)(snd >> 52) & 3u, bits = (uint32_t)(snd >> 54) & 7u;
    if ((int)chan >= p->n_ports)
        return ERR(MSCCLPP_ERR_INTERNAL, "proxy of rank %d: trigger for port channel %u, the "
                   "plan has %d", p->comm->rank, chan, p->n_ports);
    port_peer_t *peer = &p->peers[p->chan_v[chan]];
    if (snd & KERN_TRIG_WORD) {
        /* a word of a launch-fence record (kern_args.h): into the peer's slot of this channel,
         * in order with the signals before and after it */
        uint64_t word = snd & 7u;
        if (p->remote_slot[chan] == PORT_NO_SLOT || word == 0)
            return ERR(MSCCLPP_ERR_INTERNAL,
                       "proxy of rank %d: fence record word %llu on port "
                       "channel %u, which has no slot at rank %d",
                       p->comm->rank, (unsigned long long)word, chan, peer->rank);
        return blame(peer, peer->link.ops->signal(peer->link.ep, peer->link.theirs.counters,
                                                  (p->remote_slot[chan] * PORT_SLOT_U64 + word) *
                                                      sizeof(uint64_t),
                                                  fst));
    }
    TRACE(SUBSYS_NET, "rank %d proxy: chan %u bits %u: %llu bytes src %u+%llu -> rbuf %u+%llu",
          p->comm->rank, chan, bits, (unsigned long long)bytes, loc, (unsigned long long)so, q,
          (unsigned long long)doff);
    if (bits & KERN_TRIG_DATA) {
        const struct mscclpp_plan *plan = p->plan;
        const plan_gpu_t *g = &plan->gpus[p->vrank];
        if ((int)q >= g->n_rbufs || loc > 2)
            return ERR(MSCCLPP_ERR_INTERNAL, "proxy of rank %d: trigger names remote buffer %u "
                       "and source %u", p->comm->rank, q, loc);
        const plan_rbuf_t *rb = &g->rbufs[q];
        if (rb->owner != p->chan_v[chan])
            return ERR(MSCCLPP_ERR_INVALID_PLAN, "plan '%s' rank %d: a put on port channel %u "
                       "(to rank %d) writes a buffer of rank %d", plan->name, p->comm->rank, chan,
                       peer->rank, (rb->owner + p->rotation) % p->n);
        tp_rmem_t *dst = peer->link.theirs.buf[rb->buf];
        tp_mem_t *src = p->lmem[loc][peer->tpi];
        if (!dst || !src)
            return ERR(MSCCLPP_ERR_INTERNAL, "proxy of rank %d: buffer %u of rank %d or local "
                       "source %u is not registered", p->comm->rank, rb->buf, peer->rank, loc);
        if (bytes) CHECK(blame(peer, peer->link.ops->put(peer->link.ep, dst, doff, src, so, bytes)));
    }
    if (bits & KERN_TRIG_SIGNAL) {
        if (p->remote_slot[chan] == PORT_NO_SLOT)
            return ERR(MSCCLPP_ERR_INVALID_PLAN, "plan '%s': rank %d signals port channel %u to "
                       "rank %d, which has no matching port channel back (spec §5.2)",
                       p->plan->name, p->comm->rank, chan, peer->rank);
        p->out_total[chan]++;
        CHECK(blame(peer, peer->link.ops->signal(peer->link.ep, peer->link.theirs.counters,
                                                 p->remote_slot[chan] * PORT_SLOT_U64 *
                                                     sizeof(uint64_t),
                                                 p->out_total[chan])));
    }
    /* a plan's flush: the puts' sources may be reused once the launch ends (spec §2.4); their
     * data reaches the peer before the signals that follow them, which is what peers wait on */
    if (bits & KERN_TRIG_FLUSH)
        CHECK(blame(peer, peer->link.ops->flush(peer->link.ep, config_timeout_ns(),
                                                TP_FLUSH_LOCAL)));
    return MSCCLPP_OK;
}

/*
 * Whether the interpreter waits for a signal from virtual rank v that has not come: a port
 * channel from v whose consumed count (expected, raised by each wait before it polls) is
 * ahead of its counter. Only where the proxy can read the interpreter's memory.
 */
static bool waits_on(const exec_port_t *p, int v)
{
    for (int c = 0; c < p->n_ports; c++) {
        if (p->chan_v[c] != v) continue;
        uint64_t want = __atomic_load_n(p->expected + c, __ATOMIC_RELAXED);
        uint64_t got = __atomic_load_n(p->counters + (size_t)c * PORT_SLOT_U64, __ATOMIC_ACQUIRE);
        if (want > got) return true;
    }
    return false;
}

static mscclpp_result_t port_progress(void *arg)
{
    exec_port_t *p = arg;
    for (int i = 0; i < TP__COUNT; i++) {
        tp_ctx_t *ctx = NULL;
        for (int v = 0; v < p->n && !ctx; v++)
            if (p->peers[v].used && p->peers[v].tpi == i) ctx = p->peers[v].link.ctx;
        if (ctx) CHECK(tp_get(i)->progress(ctx));
    }
    /*
     * A peer that died while we only wait for it: its connection says so. A connection that
     * closed fails the launch only while this rank waits for that peer: a rank that finished
     * its last call and exited must not fail a slower peer that has nothing more to receive
     * from it (its trailing flush, its waits on others; board 2026-11-26 08:00). Where the
     * proxy cannot see the interpreter's waits (device memory), any closed connection fails.
     */
    for (int v = 0; v < p->n; v++) {
        port_peer_t *pp = &p->peers[v];
        if (!pp->used) continue;
        if (pp->gone) {
            if (waits_on(p, v)) return blame(pp, pp->link.ops->ep_status(pp->link.ep));
            continue;
        }
        mscclpp_result_t r = pp->link.ops->ep_status(pp->link.ep);
        if (r == MSCCLPP_OK) continue;
        if (!p->expected_host || waits_on(p, v)) return blame(pp, r);
        INFO(SUBSYS_NET, "rank %d: the connection to rank %d closed while this rank waits for "
             "nothing from it: %s", p->comm->rank, pp->rank, mscclpp_last_error());
        core_clear_error();
        pp->gone = true;
    }
    return MSCCLPP_OK;
}

/* The event fds of the transports in use, armed, for the idle proxy to sleep on. */
static mscclpp_result_t port_arm(void *arg, struct pollfd *fds, int cap, int *n)
{
    exec_port_t *p = arg;
    *n = 0;
    for (int i = 0; i < TP__COUNT; i++) {
        tp_ctx_t *ctx = NULL;
        for (int v = 0; v < p->n && !ctx; v++)
            if (p->peers[v].used && p->peers[v].tpi == i) ctx = p->peers[v].link.ctx;
        if (!ctx) continue;
        int fd = -1;
        mscclpp_result_t r = tp_get(i)->arm(ctx, &fd);
        if (r == MSCCLPP_ERR_UNSUPPORTED) { /* no fd (ipc, ib): its inbound data needs none */
            core_clear_error();
            continue;
        }
        CHECK(r);
        if (fd < 0) {
            *n = -1; /* work came in while arming */
            return MSCCLPP_OK;
        }
        if (*n < cap) {
            fds[*n].fd = fd;
            fds[*n].events = POLLIN;
            fds[*n].revents = 0;
            (*n)++;
        }
    }
    return MSCCLPP_OK;
}

/* ---- setup ---------------------------------------------------------------------------------- */

mscclpp_result_t exec_port_check(mscclpp_comm_t *comm, const struct mscclpp_plan *plan, int vrank,
                                 int rotation, const uint64_t lbytes[3])
{
    const int n = comm->nranks;
    for (int t = 0; t < 3; t++)
        if (lbytes[t] > UINT32_MAX)
            return ERR(MSCCLPP_ERR_UNSUPPORTED,
                       "plan '%s' rank %d: port channels address "
                       "allocations of at most 4 GiB (triggers carry 32-bit offsets); this one "
                       "has %llu bytes",
                       plan->name, comm->rank, (unsigned long long)lbytes[t]);
    for (int v = 0; v < n; v++) {
        if (v == vrank || !related(plan, vrank, v)) continue;
        const tp_ops_t *ops = NULL;
        CHECK(tp_select(&comm->world, (v + rotation) % n, &ops));
    }
    return MSCCLPP_OK;
}

mscclpp_result_t exec_port_create(mscclpp_comm_t *comm, const struct mscclpp_plan *plan, int vrank,
                                  int rotation, void *const lptr[3], const uint64_t lbytes[3],
                                  int tag, exec_port_t **out)
{
    mscclpp_result_t res = MSCCLPP_OK;
    const int n = comm->nranks, me = vrank;
    const plan_gpu_t *g = &plan->gpus[me];
    exec_port_t *p = calloc(1, sizeof *p);
    if (!p) return ERR(MSCCLPP_ERR_NO_MEMORY, "executor: out of memory");
    p->comm = comm;
    p->hal = comm->hal;
    p->plan = plan;
    p->vrank = vrank;
    p->rotation = rotation;
    p->n = n;
    p->n_ports = g->n_chan[PLAN_CH_PORT];
    const int np = p->n_ports;
    p->chan_v = calloc((size_t)np + 1, sizeof *p->chan_v);
    p->remote_slot = calloc((size_t)np + 1, sizeof *p->remote_slot);
    p->out_total = calloc((size_t)np + 1, sizeof *p->out_total);
    p->peers = calloc((size_t)n, sizeof *p->peers);
    p->chans = calloc((size_t)np + 1, sizeof *p->chans);
    p->pbufs = calloc((size_t)g->n_rbufs + 1, sizeof *p->pbufs);
    port_link_t **links = calloc((size_t)n, sizeof *links);
    int nlinks = 0;
    if (!p->chan_v || !p->remote_slot || !p->out_total || !p->peers || !p->chans || !p->pbufs ||
        !links) {
        res = ERR(MSCCLPP_ERR_NO_MEMORY, "executor: out of memory");
        goto fail;
    }
    for (int i = 0; i < np; i++) {
        p->chan_v[i] = g->peers[PLAN_CH_PORT][i];
        p->remote_slot[i] = PORT_NO_SLOT;
    }
    for (int t = 0; t < 3; t++) {
        p->lptr[t] = lptr[t];
        p->lbytes[t] = lbytes[t];
    }
    CHECK_GOTO(exec_port_check(comm, plan, vrank, rotation, lbytes), res, fail);

    /* 1. transports and connections */
    bool any_net = false;
    for (int v = 0; v < n; v++) {
        if (v == me || !related(plan, me, v)) continue;
        port_peer_t *pp = &p->peers[v];
        pp->rank = (v + rotation) % n;
        pp->used = true; /* from here on destroy closes what the link holds */
        CHECK_GOTO(port_link_open(comm, pp->rank, &pp->link), res, fail);
        pp->tpi = tp_index(pp->link.ops);
        if (pp->tpi != TP_IPC) any_net = true;
        links[nlinks++] = &pp->link;
        INFO(SUBSYS_NET, "rank %d: port channels to rank %d over %s", comm->rank, pp->rank,
             pp->link.ops->name);
    }

    /* 2. counters: device-visible memory the transports can write */
    p->counters_bytes = (size_t)(np + 1) * PORT_SLOT_U64 * sizeof(uint64_t);
    p->counters_host = any_net && p->hal != hal_host_ops();
    if (p->counters_host)
        CHECK_GOTO(p->hal->host_alloc(p->counters_bytes, (void **)&p->counters), res, fail);
    else
        CHECK_GOTO(p->hal->mem_alloc_shareable(p->counters_bytes, (void **)&p->counters), res,
                   fail);
    CHECK_GOTO(p->hal->memset_sync(p->counters, 0, p->counters_bytes), res, fail);
    CHECK_GOTO(p->hal->mem_alloc((size_t)(np + 1) * sizeof(uint64_t), (void **)&p->expected), res,
               fail);
    CHECK_GOTO(p->hal->memset_sync(p->expected, 0, (size_t)(np + 1) * sizeof(uint64_t)), res,
               fail);
    p->expected_host = p->hal == hal_host_ops();
    for (int i = 0; i < np; i++) {
        p->chans[i].inbound = p->counters + (size_t)i * PORT_SLOT_U64;
        p->chans[i].expected = p->expected + i;
    }
    /* 3. registrations, once per transport in use */
    for (int v = 0; v < n; v++) {
        port_peer_t *pp = &p->peers[v];
        if (!pp->used) continue;
        if (!p->cmem[pp->tpi]) {
            if (pp->tpi == TP_IPC && p->counters_host) {
                res = ERR(MSCCLPP_ERR_UNSUPPORTED, "plan '%s' rank %d: port channels within a "
                          "node and across nodes in one plan need shareable host-mapped "
                          "counters, which the %s backend does not have", plan->name,
                          comm->rank, p->hal->name);
                goto fail;
            }
            CHECK_GOTO(pp->link.ops->mem_reg(pp->link.ctx, p->counters, p->counters_bytes,
                                             &p->cmem[pp->tpi]),
                       res, fail);
        }
        for (int t = 0; t < 3; t++)
            if (lptr[t] && lbytes[t] && !p->lmem[t][pp->tpi])
                CHECK_GOTO(
                    pp->link.ops->mem_reg(pp->link.ctx, lptr[t], lbytes[t], &p->lmem[t][pp->tpi]),
                    res, fail);
    }

    /* 4. what each peer gets: my counter region with my channels' slots, and the buffers it
     * writes; then one exchange with every related peer (core/port_setup.c) */
    for (int v = 0; v < n; v++) {
        port_peer_t *pp = &p->peers[v];
        if (!pp->used) continue;
        int k = chan_count(g, v);
        pp->slots = calloc((size_t)k + 1, sizeof *pp->slots);
        if (!pp->slots) {
            res = ERR(MSCCLPP_ERR_NO_MEMORY, "executor: out of memory");
            goto fail;
        }
        for (int i = 0, j = 0; i < np; i++)
            if (p->chan_v[i] == v) pp->slots[j++] = (uint64_t)i;
        pp->link.mine.counters_mem = p->cmem[pp->tpi];
        pp->link.mine.counters = p->counters;
        pp->link.mine.counters_bytes = p->counters_bytes;
        pp->link.mine.nslots = (uint32_t)k;
        pp->link.mine.slots = pp->slots;
        unsigned need = port_needs(plan, v, me);
        pp->link.mine.bufs = need;
        for (int t = 0; t < 3; t++) {
            if (!(need & (1u << t))) continue;
            if (!p->lmem[t][pp->tpi]) {
                res = ERR_ARG("plan '%s': rank %d writes buffer type %d of rank %d through a port "
                              "channel; it must be memory the backend can register", plan->name,
                              pp->rank, t, comm->rank);
                goto fail;
            }
            pp->link.mine.buf_mem[t] = p->lmem[t][pp->tpi];
            pp->link.mine.buf[t] = lptr[t];
            pp->link.mine.buf_bytes[t] = lbytes[t];
        }
    }
    CHECK_GOTO(port_links_exchange(comm, links, nlinks, tag), res, fail);
    int same_machine = 0; /* peers of other nodes on this machine */
    for (int v = 0; v < n; v++) {
        port_peer_t *pp = &p->peers[v];
        if (!pp->used) continue;
        if (pp->link.theirs.same_machine) same_machine++;
        int their_np = plan->gpus[v].n_chan[PLAN_CH_PORT];
        uint32_t k = pp->link.theirs.nslots;
        if (k != (uint32_t)chan_count(&plan->gpus[v], me)) {
            res = ERR(MSCCLPP_ERR_REMOTE, "executor: rank %d announces %u port channels to rank "
                      "%d, the plan says %d (different plans?)", pp->rank, k, comm->rank,
                      chan_count(&plan->gpus[v], me));
            goto fail;
        }
        /* my j-th channel to v signals the slot of its j-th channel to me (its extra channels,
         * if any, are never signalled) */
        for (int i = 0, j = 0; i < np; i++) {
            if (p->chan_v[i] != v) continue;
            if ((uint32_t)j < k) {
                uint64_t slot = pp->link.theirs.slots[j];
                if (slot >= (uint64_t)their_np) {
                    res = ERR(MSCCLPP_ERR_REMOTE, "executor: rank %d sent counter slot %llu",
                              pp->rank, (unsigned long long)slot);
                    goto fail;
                }
                p->remote_slot[i] = slot;
            }
            j++;
        }
        if (pp->link.theirs.bufs != port_needs(plan, me, v)) {
            res = ERR(MSCCLPP_ERR_REMOTE,
                      "executor: rank %d offers buffers 0x%x for port "
                      "channels, rank %d needs 0x%x (different plans?)",
                      pp->rank, pp->link.theirs.bufs, comm->rank, port_needs(plan, me, v));
            goto fail;
        }
    }

    /* 5. the proxy */
    if (np > 0 || g->n_rbufs > 0) {
        char name[32];
        snprintf(name, sizeof name, "rank %d", comm->rank);
        int64_t slots = config_get_int(CFG_MSCCLPP_PROXY_FIFO);
        /* threads of this node polling beside the proxy: per local rank, its proxy, its stream
         * worker, and (host backend) one per thread block. Namespace "nodes" on one machine
         * share its cores although each counts one local rank: the count keeps the spin short
         * there, where a proxy spinning long starves its own rank's interpreter. */
        unsigned per_rank = 2u + (p->hal == hal_host_ops() ? (unsigned)g->n_blocks : 0u);
        unsigned nlocal = comm->nlocal > 0 ? (unsigned)comm->nlocal : 1u;
        nlocal += (unsigned)same_machine;
        uint32_t spin = base_wait_spin(nlocal * per_rank);
        /* the interpreter's spin as the executor sizes it (context.c, host_spin_for: blocks and
         * proxy per local rank), with the other nodes' ranks on this machine counted too */
        unsigned blocks = (unsigned)(g->n_blocks > 0 ? g->n_blocks : 1);
        if (same_machine > 0 && p->hal == hal_host_ops())
            p->host_spin = base_wait_spin(nlocal * (blocks + 1u));
        if (same_machine > 0)
            INFO(SUBSYS_NET, "rank %d: %d port peer(s) of other nodes share this machine (boot "
                 "id): waits spin %u polls (proxy), %u (interpreter)", comm->rank, same_machine,
                 spin, p->host_spin);
        CHECK_GOTO(proxy_create(p->hal, slots < 16 ? 16u : slots > (1 << 20) ? (1u << 20)
                                                                              : (uint32_t)slots,
                                spin, port_handle, port_progress, port_arm, p, name, &p->proxy),
                   res, fail);
    }
    free(links);
    *out = p;
    return MSCCLPP_OK;
fail:
    free(links);
    exec_port_destroy(p);
    return res;
}

mscclpp_result_t exec_port_fill(exec_port_t *p, uint64_t *const peer_off[2], exec_resources_t *res)
{
    if (!p) return MSCCLPP_OK;
    const plan_gpu_t *g = &p->plan->gpus[p->vrank];
    for (int q = 0; q < g->n_rbufs; q++) {
        const plan_rbuf_t *rb = &g->rbufs[q];
        p->pbufs[q] = rb->buf == PLAN_BUF_SCRATCH ? 0 : peer_off[rb->buf][rb->owner];
    }
    if (p->host_spin && (!res->host_spin || res->host_spin > p->host_spin))
        res->host_spin = p->host_spin; /* other nodes share this machine's cores */
    res->n_ports = p->n_ports;
    res->ports = p->chans;
    res->pbufs = p->pbufs;
    res->fifo = p->proxy ? proxy_fifo(p->proxy) : NULL;
    res->fifo_head = p->proxy ? proxy_head(p->proxy) : NULL;
    for (int t = 0; t < 3; t++) res->lbase[t] = p->lptr[t];
    return MSCCLPP_OK;
}

mscclpp_result_t exec_port_error(exec_port_t *p)
{
    return p ? proxy_error(p->proxy) : MSCCLPP_OK;
}

bool exec_port_stuck(exec_port_t *p, uint64_t min_ns, char *buf, size_t cap)
{
    uint64_t for_ns, fst, snd, behind;
    if (!p || !proxy_busy(p->proxy, min_ns, &for_ns, &fst, &snd, &behind)) return false;
    uint32_t chan = (uint32_t)(snd >> 32) & 1023u, bits = (uint32_t)(snd >> 54) & 7u;
    char what[96];
    if (snd & KERN_TRIG_WORD)
        snprintf(what, sizeof what, "a fence record word");
    else if (bits & KERN_TRIG_DATA)
        snprintf(what, sizeof what, "a put of %llu bytes%s", (unsigned long long)(fst & 0xffffffffull),
                 (bits & KERN_TRIG_SIGNAL) ? " with its signal" : "");
    else
        snprintf(what, sizeof what, "a %s", (bits & KERN_TRIG_SIGNAL) ? "signal" : "flush");
    const port_peer_t *peer = (int)chan < p->n_ports ? &p->peers[p->chan_v[chan]] : NULL;
    snprintf(buf, cap, "rank %d's proxy has been inside one %s transport call for %.1f s (%s to "
             "rank %d on port channel %u; %llu more trigger(s) wait behind it), so what it "
             "carries never left: a transport or HAL call that blocks (on a GPU, one that waits "
             "for the running kernel?)", p->comm->rank,
             peer && peer->link.ops ? peer->link.ops->name : "?", (double)for_ns / 1e9, what,
             peer ? peer->rank : -1, chan, (unsigned long long)behind);
    return true;
}

mscclpp_result_t exec_port_drain(exec_port_t *p)
{
    return p ? proxy_drain(p->proxy) : MSCCLPP_OK;
}

void exec_port_destroy(exec_port_t *p)
{
    if (!p) return;
    proxy_destroy(p->proxy);
    /* Our launches completed, but a peer may still wait for their trailing puts (a packet
     * plan's last op, with no flush after it): a local flush sends what the transport held
     * back and waits for its send completion, which a peer that is gone ends at once. Not a
     * flush at the peer: that would wait for a peer that stopped driving its transport. */
    core_error_kept_t kept;
    core_error_keep(&kept);
    for (int v = 0; p->peers && v < p->n; v++) {
        port_link_t *l = &p->peers[v].link;
        if (!l->ops || !l->ep) continue;
        mscclpp_result_t r = l->ops->flush(l->ep, config_timeout_ns(), TP_FLUSH_LOCAL);
        /* nothing to hand back to (the calls completed), but say which peer may miss data */
        if (r != MSCCLPP_OK)
            INFO(SUBSYS_EXEC,
                 "port context: flushing the link to rank %d before closing it "
                 "failed (%s): %s",
                 p->peers[v].rank, mscclpp_result_string(r), mscclpp_last_error());
    }
    core_error_put_back(&kept);
    if (p->peers)
        for (int v = 0; v < p->n; v++) {
            port_peer_t *pp = &p->peers[v];
            free(pp->slots);
            port_link_close(&pp->link);
        }
    for (int i = 0; i < TP__COUNT; i++) {
        tp_ctx_t *ctx = NULL;
        for (int v = 0; p->peers && v < p->n && !ctx; v++)
            if (p->peers[v].link.ctx && p->peers[v].tpi == i) ctx = p->peers[v].link.ctx;
        if (!ctx) continue;
        if (p->cmem[i]) tp_get(i)->mem_dereg(ctx, p->cmem[i]);
        for (int t = 0; t < 3; t++)
            if (p->lmem[t][i]) tp_get(i)->mem_dereg(ctx, p->lmem[t][i]);
    }
    if (p->counters) {
        if (p->counters_host) p->hal->host_free(p->counters);
        else p->hal->mem_free(p->counters);
    }
    if (p->expected) p->hal->mem_free(p->expected);
    free(p->chan_v);
    free(p->remote_slot);
    free(p->out_total);
    free(p->peers);
    free(p->chans);
    free(p->pbufs);
    free(p);
}
