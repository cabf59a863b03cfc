/*
 * Port channels driven from the host (the C API): the same transports the executor's proxy
 * uses, called directly. Set-up is a port link (core/port_setup.h, the one format a plan's port
 * channels use too) with the caller's tag: one counter slot (my inbound counter) and, when I
 * have one, my receive buffer as buffer 0. A signal sets the peer's counter
 * to the running total of this side's signals (one writer per counter); a wait drives the
 * transport's progress (the target side of emulated one-sided operations needs it) until the
 * counter reaches the next expected value, bounded by MSCCLPP_TIMEOUT.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/config.h"
#include "core/core.h"
#include "base/debug.h"
#include "base/wait.h"
#include "core/port_setup.h"

struct mscclpp_port_channel {
    mscclpp_comm_t *comm;
    int peer;
    port_link_t link;    /* transport, connection, the peer's counter and receive buffer */
    const tp_ops_t *ops; /* link.ops */
    uint64_t *inbound;   /* my counter (shareable memory), the peer's signals set it */
    tp_mem_t *m_inbound, *m_recv, *m_send;
    tp_rmem_t *r_counter, *r_recv; /* in link.theirs */
    uint64_t sent, expected;
};

static const uint64_t pc_slot0 = 0; /* my one counter sits at the start of its region */

MSCCLPP_API mscclpp_result_t mscclpp_port_channel_create(mscclpp_comm_t *comm, int peer, int tag,
                                                         void *recv, size_t recv_bytes,
                                                         void *send, size_t send_bytes,
                                                         mscclpp_port_channel_t **chan)
{
    CHECK_ARG(comm != NULL);
    CHECK_ARG(chan != NULL);
    CHECK_ARG(peer >= 0 && peer < comm->nranks);
    CHECK_ARG((recv != NULL) == (recv_bytes > 0));
    CHECK_ARG((send != NULL) == (send_bytes > 0));
    *chan = NULL;
    if (peer == comm->rank) return ERR_ARG("port channel: rank %d cannot pair with itself", peer);
    mscclpp_result_t res;
    mscclpp_port_channel_t *c = calloc(1, sizeof *c);
    if (!c) return ERR(MSCCLPP_ERR_NO_MEMORY, "port channel: out of memory");
    c->comm = comm;
    c->peer = peer;
    CHECK_GOTO(port_link_open(comm, peer, &c->link), res, fail);
    c->ops = c->link.ops;
    tp_ctx_t *ctx = c->link.ctx;
    CHECK_GOTO(comm->hal->mem_alloc_shareable(64, (void **)&c->inbound), res, fail);
    CHECK_GOTO(comm->hal->memset_sync(c->inbound, 0, 64), res, fail);
    CHECK_GOTO(c->ops->mem_reg(ctx, c->inbound, sizeof(uint64_t), &c->m_inbound), res, fail);
    if (recv) CHECK_GOTO(c->ops->mem_reg(ctx, recv, recv_bytes, &c->m_recv), res, fail);
    if (send) CHECK_GOTO(c->ops->mem_reg(ctx, send, send_bytes, &c->m_send), res, fail);
    c->link.mine.counters_mem = c->m_inbound;
    c->link.mine.counters = c->inbound;
    c->link.mine.counters_bytes = sizeof(uint64_t);
    c->link.mine.nslots = 1;
    c->link.mine.slots = &pc_slot0;
    c->link.mine.bufs = recv ? 1u : 0u;
    c->link.mine.buf_mem[0] = c->m_recv;
    c->link.mine.buf[0] = recv;
    c->link.mine.buf_bytes[0] = recv_bytes;
    port_link_t *links[1] = {&c->link};
    CHECK_GOTO(port_links_exchange(comm, links, 1, tag), res, fail);
    if (c->link.theirs.nslots != 1 || c->link.theirs.slots[0] != 0) {
        res = ERR(MSCCLPP_ERR_REMOTE,
                  "port channel: rank %d offers %u counter slots, a port "
                  "channel has one (a plan's set-up on the same tag?)",
                  peer, c->link.theirs.nslots);
        goto fail;
    }
    c->r_counter = c->link.theirs.counters;
    c->r_recv = c->link.theirs.buf[0];
    INFO(SUBSYS_CHAN, "rank %d: port channel to rank %d over %s", comm->rank, peer, c->ops->name);
    *chan = c;
    return MSCCLPP_OK;
fail:
    mscclpp_port_channel_destroy(c);
    return res;
}

MSCCLPP_API mscclpp_result_t mscclpp_port_channel_put(mscclpp_port_channel_t *chan,
                                                      size_t dst_offset, size_t src_offset,
                                                      size_t bytes)
{
    CHECK_ARG(chan != NULL);
    if (!chan->m_send || !chan->r_recv)
        return ERR_ARG("port channel put to rank %d: %s", chan->peer,
                       !chan->m_send ? "this side has no send buffer"
                                     : "the peer exposes no receive buffer");
    return chan->ops->put(chan->link.ep, chan->r_recv, dst_offset, chan->m_send, src_offset, bytes);
}

MSCCLPP_API mscclpp_result_t mscclpp_port_channel_signal(mscclpp_port_channel_t *chan)
{
    CHECK_ARG(chan != NULL);
    CHECK(chan->ops->signal(chan->link.ep, chan->r_counter, 0, chan->sent + 1));
    chan->sent++;
    return MSCCLPP_OK;
}

MSCCLPP_API mscclpp_result_t mscclpp_port_channel_flush(mscclpp_port_channel_t *chan)
{
    CHECK_ARG(chan != NULL);
    return chan->ops->flush(chan->link.ep, config_timeout_ns(), TP_FLUSH_REMOTE);
}

MSCCLPP_API mscclpp_result_t mscclpp_port_channel_wait(mscclpp_port_channel_t *chan)
{
    CHECK_ARG(chan != NULL);
    uint64_t want = chan->expected + 1, limit = config_timeout_ns();
    /* the one wait policy (base/wait.h), driving progress between polls; the callers, one
     * per local rank, are the node's pollers */
    unsigned pollers = chan->comm->nlocal > 0 ? (unsigned)chan->comm->nlocal : 1u;
    base_wait_t w;
    base_wait_init(&w, limit, base_wait_spin(pollers));
    while (__atomic_load_n(chan->inbound, __ATOMIC_ACQUIRE) < want) {
        CHECK(chan->ops->progress(chan->link.ctx));
        CHECK(chan->ops->ep_status(chan->link.ep));
        if (__atomic_load_n(chan->inbound, __ATOMIC_ACQUIRE) >= want) break;
        if (!base_wait_pause(&w))
            return ERR(MSCCLPP_ERR_TIMEOUT, "rank %d waiting for signal #%llu from rank %d on a "
                       "port channel (%s): timed out after %.1f s", chan->comm->rank,
                       (unsigned long long)want, chan->peer, chan->ops->name,
                       (double)limit / 1e9);
    }
    chan->expected = want;
    return MSCCLPP_OK;
}

MSCCLPP_API const char *mscclpp_port_channel_transport(const mscclpp_port_channel_t *chan)
{
    return chan ? chan->ops->name : NULL;
}

MSCCLPP_API mscclpp_result_t mscclpp_port_channel_destroy(mscclpp_port_channel_t *chan)
{
    if (!chan) return MSCCLPP_OK;
    if (chan->ops) {
        port_link_close(&chan->link); /* no flush: see the header */
        tp_ctx_t *ctx = chan->link.ctx;
        if (chan->m_inbound) chan->ops->mem_dereg(ctx, chan->m_inbound);
        if (chan->m_recv) chan->ops->mem_dereg(ctx, chan->m_recv);
        if (chan->m_send) chan->ops->mem_dereg(ctx, chan->m_send);
    }
    if (chan->inbound) chan->comm->hal->mem_free(chan->inbound);
    free(chan);
    return MSCCLPP_OK;
}
