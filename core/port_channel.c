/*
 * Port channels driven from the host (the C API): the same transports the executor's proxy
 * uses, called directly. Setup exchanges, on the bootstrap with the caller's tag: the transport
 * bit, the key of my receive buffer and of my inbound counter. A signal sets the peer's counter
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
#include "base/wire.h"
#include "transports/transport.h"

#define PC_WIRE_MAGIC 0x4e484350u /* "PCHN" */
#define PC_WIRE_VERSION 1u

struct mscclpp_port_channel {
    mscclpp_comm_t *comm;
    int peer;
    const tp_ops_t *ops;
    tp_ctx_t *ctx;
    tp_ep_t *ep;
    uint64_t *inbound;   /* my counter (shareable memory), the peer's signals set it */
    tp_mem_t *m_inbound, *m_recv, *m_send;
    tp_rmem_t *r_counter, *r_recv;
    uint64_t r_recv_bytes;
    uint64_t sent, expected;
};

static mscclpp_result_t pc_exchange(mscclpp_port_channel_t *c, int tag, void *recv,
                                    size_t recv_bytes)
{
    uint8_t out[2 * TP_RKEY_MAX + 64], in[2 * TP_RKEY_MAX + 64];
    wire_writer_t w = {out, sizeof out, 0, false};
    wire_put_u32(&w, PC_WIRE_MAGIC);
    wire_put_u32(&w, PC_WIRE_VERSION);
    wire_put_u32(&w, c->ops->bit);
    CHECK(tp_mem_pack(c->ops, c->ctx, c->m_inbound, c->inbound, sizeof(uint64_t), &w));
    wire_put_u32(&w, c->m_recv ? 1 : 0);
    if (c->m_recv) CHECK(tp_mem_pack(c->ops, c->ctx, c->m_recv, recv, recv_bytes, &w));
    uint64_t len = w.len;
    CHECK(mscclpp_bootstrap_send(c->comm->boot, &len, sizeof len, c->peer, tag));
    CHECK(mscclpp_bootstrap_send(c->comm->boot, out, w.len, c->peer, tag));
    CHECK(mscclpp_bootstrap_recv(c->comm->boot, &len, sizeof len, c->peer, tag));
    if (len > sizeof in)
        return ERR(MSCCLPP_ERR_REMOTE, "port channel: rank %d sent a %llu-byte setup message",
                   c->peer, (unsigned long long)len);
    CHECK(mscclpp_bootstrap_recv(c->comm->boot, in, (size_t)len, c->peer, tag));
    wire_reader_t r = {in, (size_t)len, 0, false};
    uint32_t magic = wire_get_u32(&r), ver = wire_get_u32(&r), bit = wire_get_u32(&r);
    if (r.bad || magic != PC_WIRE_MAGIC || ver != PC_WIRE_VERSION)
        return ERR(MSCCLPP_ERR_REMOTE, "port channel: rank %d sent a setup message of another "
                   "format or version", c->peer);
    if (bit != c->ops->bit)
        return ERR(MSCCLPP_ERR_REMOTE, "port channel: rank %d chose transport bit 0x%x, rank %d "
                   "chose %s (MSCCLPP_TRANSPORTS differs?)", c->peer, bit, c->comm->rank,
                   c->ops->name);
    CHECK(tp_rmem_unpack(c->ops, c->ep, &r, &c->r_counter, NULL));
    if (wire_get_u32(&r)) CHECK(tp_rmem_unpack(c->ops, c->ep, &r, &c->r_recv, &c->r_recv_bytes));
    if (r.bad || r.pos != r.len)
        return ERR(MSCCLPP_ERR_REMOTE, "port channel: malformed setup message from rank %d",
                   c->peer);
    return MSCCLPP_OK;
}

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
    CHECK_GOTO(tp_select(comm, peer, &c->ops), res, fail);
    CHECK_GOTO(tp_ctx_get(comm, c->ops, &c->ctx), res, fail);
    CHECK_GOTO(comm->hal->mem_alloc_shareable(64, (void **)&c->inbound), res, fail);
    CHECK_GOTO(comm->hal->memset_sync(c->inbound, 0, 64), res, fail);
    CHECK_GOTO(c->ops->connect(c->ctx, peer, tag, &c->ep), res, fail);
    CHECK_GOTO(c->ops->mem_reg(c->ctx, c->inbound, sizeof(uint64_t), &c->m_inbound), res, fail);
    if (recv) CHECK_GOTO(c->ops->mem_reg(c->ctx, recv, recv_bytes, &c->m_recv), res, fail);
    if (send) CHECK_GOTO(c->ops->mem_reg(c->ctx, send, send_bytes, &c->m_send), res, fail);
    CHECK_GOTO(pc_exchange(c, tag, recv, recv_bytes), res, fail);
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
    return chan->ops->put(chan->ep, chan->r_recv, dst_offset, chan->m_send, src_offset, bytes);
}

MSCCLPP_API mscclpp_result_t mscclpp_port_channel_signal(mscclpp_port_channel_t *chan)
{
    CHECK_ARG(chan != NULL);
    CHECK(chan->ops->signal(chan->ep, chan->r_counter, 0, chan->sent + 1));
    chan->sent++;
    return MSCCLPP_OK;
}

MSCCLPP_API mscclpp_result_t mscclpp_port_channel_flush(mscclpp_port_channel_t *chan)
{
    CHECK_ARG(chan != NULL);
    return chan->ops->flush(chan->ep, config_timeout_ns(), TP_FLUSH_REMOTE);
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
        CHECK(chan->ops->progress(chan->ctx));
        CHECK(chan->ops->ep_status(chan->ep));
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
        chan->ops->rmem_release(chan->r_recv);
        chan->ops->rmem_release(chan->r_counter);
        if (chan->ep) chan->ops->close(chan->ep); /* no flush: see the header */
        if (chan->ctx) {
            if (chan->m_inbound) chan->ops->mem_dereg(chan->ctx, chan->m_inbound);
            if (chan->m_recv) chan->ops->mem_dereg(chan->ctx, chan->m_recv);
            if (chan->m_send) chan->ops->mem_dereg(chan->ctx, chan->m_send);
        }
    }
    if (chan->inbound) chan->comm->hal->mem_free(chan->inbound);
    free(chan);
    return MSCCLPP_OK;
}
