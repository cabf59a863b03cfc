/* Port links (port_setup.h): one set-up, one wire format, for every port channel. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/debug.h"
#include "base/wire.h"
#include "core/port_setup.h"

/*
 * This machine: a hash of the kernel's boot id (0 when unreadable). Ranks of different nodes
 * with the same value share one machine's cores: namespace "nodes" (mscclpp-bench --nodes,
 * containers). Node detection cannot count them as local ranks (they are other nodes), but a
 * wait policy may have to (executor/exec_port.c).
 */
static uint64_t machine_id(void)
{
    char text[128] = {0};
    FILE *f = fopen("/proc/sys/kernel/random/boot_id", "r");
    if (!f) return 0;
    if (!fgets(text, (int)sizeof text, f)) text[0] = '\0';
    fclose(f);
    if (!text[0]) return 0;
    uint64_t h = 1469598103934665603ull;
    for (const char *q = text; *q; q++) h = (h ^ (uint8_t)*q) * 1099511628211ull;
    return h ? h : 1;
}

/* The longest message a link sends or accepts with `nslots` slots. */
static size_t msg_cap(uint32_t nslots)
{
    return 64 + TP_ADDR_MAX + (1 + PORT_LINK_BUFS) * (size_t)TP_RKEY_MAX + 8 * (size_t)nslots;
}

mscclpp_result_t port_link_open(mscclpp_comm_t *comm, int peer, port_link_t *link)
{
    memset(link, 0, sizeof *link);
    link->peer = peer;
    CHECK(tp_select(&comm->world, peer, &link->ops));
    CHECK(comm_tp_ctx(comm, link->ops, &link->ctx));
    wire_writer_t w = {link->addr, sizeof link->addr, 0, false};
    CHECK(link->ops->ep_open(link->ctx, peer, &link->ep, &w));
    if (w.overflow)
        return ERR(MSCCLPP_ERR_INTERNAL,
                   "%s transport: the address to rank %d does not fit %d "
                   "bytes",
                   link->ops->name, peer, TP_ADDR_MAX);
    link->addr_len = w.len;
    return MSCCLPP_OK;
}

static mscclpp_result_t pack(const port_link_t *l, uint64_t machine, wire_writer_t *w)
{
    wire_put_u32(w, PORT_WIRE_MAGIC);
    wire_put_u32(w, PORT_WIRE_VERSION);
    wire_put_u32(w, l->ops->bit);
    wire_put_u64(w, machine);
    wire_put_u32(w, (uint32_t)l->addr_len);
    wire_put_bytes(w, l->addr, l->addr_len);
    wire_put_u32(w, l->mine.nslots);
    if (l->mine.nslots > 0) {
        if (!l->mine.counters_mem)
            return ERR(MSCCLPP_ERR_INTERNAL,
                       "port link to rank %d: slots without a counter "
                       "region",
                       l->peer);
        CHECK(tp_mem_pack(l->ops, l->ctx, l->mine.counters_mem, l->mine.counters,
                          l->mine.counters_bytes, w));
        for (uint32_t i = 0; i < l->mine.nslots; i++) wire_put_u64(w, l->mine.slots[i]);
    }
    wire_put_u32(w, l->mine.bufs);
    for (int t = 0; t < PORT_LINK_BUFS; t++)
        if (l->mine.bufs & (1u << t)) {
            if (!l->mine.buf_mem[t])
                return ERR(MSCCLPP_ERR_INTERNAL,
                           "port link to rank %d: buffer %d is offered "
                           "but not registered",
                           l->peer, t);
            CHECK(tp_mem_pack(l->ops, l->ctx, l->mine.buf_mem[t], l->mine.buf[t],
                              l->mine.buf_bytes[t], w));
        }
    if (w->overflow)
        return ERR(MSCCLPP_ERR_INTERNAL, "port link to rank %d: the set-up message overflows",
                   l->peer);
    return MSCCLPP_OK;
}

/* The peer's message: connect with its address, unpack its keys. */
static mscclpp_result_t unpack(mscclpp_comm_t *comm, port_link_t *l, uint64_t machine,
                               wire_reader_t *r)
{
    uint32_t magic = wire_get_u32(r), ver = wire_get_u32(r), bit = wire_get_u32(r);
    uint64_t their_machine = wire_get_u64(r);
    if (r->bad || magic != PORT_WIRE_MAGIC || ver != PORT_WIRE_VERSION)
        return ERR(MSCCLPP_ERR_REMOTE,
                   "port channels: rank %d sent a set-up message of another "
                   "format or version (%s %u, this library reads version %u)",
                   l->peer, magic == PORT_WIRE_MAGIC ? "version" : "magic",
                   magic == PORT_WIRE_MAGIC ? ver : magic, PORT_WIRE_VERSION);
    if (bit != l->ops->bit)
        return ERR(MSCCLPP_ERR_REMOTE,
                   "port channels: rank %d chose transport bit 0x%x, rank %d "
                   "chose %s (MSCCLPP_TRANSPORTS differs?)",
                   l->peer, bit, comm->rank, l->ops->name);
    l->theirs.same_machine =
        machine && their_machine == machine && comm->node_id[l->peer] != comm->node_id[comm->rank];
    uint32_t alen = wire_get_u32(r);
    if (r->bad || alen > TP_ADDR_MAX || alen > r->len - r->pos)
        return ERR(MSCCLPP_ERR_REMOTE, "port channels: rank %d sent a malformed address", l->peer);
    wire_reader_t addr = {r->buf + r->pos, alen, 0, false};
    r->pos += alen;
    CHECK(l->ops->ep_connect(l->ep, &addr));
    uint32_t k = wire_get_u32(r);
    if (r->bad || k > PORT_LINK_MAX_SLOTS)
        return ERR(MSCCLPP_ERR_REMOTE, "port channels: rank %d offers %u counter slots", l->peer,
                   k);
    if (k > 0) {
        CHECK(tp_rmem_unpack(l->ops, l->ep, r, &l->theirs.counters, NULL));
        l->theirs.slots = calloc(k, sizeof *l->theirs.slots);
        if (!l->theirs.slots) return ERR(MSCCLPP_ERR_NO_MEMORY, "port channels: out of memory");
        for (uint32_t i = 0; i < k; i++) l->theirs.slots[i] = wire_get_u64(r);
        l->theirs.nslots = k;
    }
    l->theirs.bufs = wire_get_u32(r);
    if (l->theirs.bufs >> PORT_LINK_BUFS)
        return ERR(MSCCLPP_ERR_REMOTE, "port channels: rank %d offers buffers 0x%x", l->peer,
                   l->theirs.bufs);
    for (int t = 0; t < PORT_LINK_BUFS; t++)
        if (l->theirs.bufs & (1u << t))
            CHECK(tp_rmem_unpack(l->ops, l->ep, r, &l->theirs.buf[t], &l->theirs.buf_bytes[t]));
    if (r->bad || r->pos != r->len)
        return ERR(MSCCLPP_ERR_REMOTE, "port channels: malformed set-up message from rank %d",
                   l->peer);
    return MSCCLPP_OK;
}

mscclpp_result_t port_links_exchange(mscclpp_comm_t *comm, port_link_t *const *links, int n,
                                     int tag)
{
    uint32_t most = 0;
    for (int i = 0; i < n; i++)
        if (links[i]->mine.nslots > most) most = links[i]->mine.nslots;
    size_t cap = msg_cap(most > PORT_LINK_MAX_SLOTS ? PORT_LINK_MAX_SLOTS : most);
    uint8_t *msg = malloc(cap);
    if (!msg) return ERR(MSCCLPP_ERR_NO_MEMORY, "port channels: out of memory");
    mscclpp_result_t res = MSCCLPP_OK;
    const uint64_t machine = machine_id();
    /* send to every peer, then receive from each (the bootstrap buffers what it sends) */
    for (int i = 0; i < n && res == MSCCLPP_OK; i++) {
        wire_writer_t w = {msg, cap, 0, false};
        res = pack(links[i], machine, &w);
        uint64_t len = w.len;
        if (res == MSCCLPP_OK)
            res = mscclpp_bootstrap_send(comm->boot, &len, sizeof len, links[i]->peer, tag);
        if (res == MSCCLPP_OK)
            res = mscclpp_bootstrap_send(comm->boot, msg, w.len, links[i]->peer, tag);
    }
    free(msg);
    for (int i = 0; i < n && res == MSCCLPP_OK; i++) {
        uint64_t len = 0;
        res = mscclpp_bootstrap_recv(comm->boot, &len, sizeof len, links[i]->peer, tag);
        if (res != MSCCLPP_OK) break;
        if (len > msg_cap(PORT_LINK_MAX_SLOTS)) {
            res = ERR(MSCCLPP_ERR_REMOTE,
                      "port channels: rank %d announced a %llu-byte set-up "
                      "message",
                      links[i]->peer, (unsigned long long)len);
            break;
        }
        uint8_t *in = malloc(len ? len : 1);
        if (!in) {
            res = ERR(MSCCLPP_ERR_NO_MEMORY, "port channels: out of memory");
            break;
        }
        res = mscclpp_bootstrap_recv(comm->boot, in, (size_t)len, links[i]->peer, tag);
        wire_reader_t r = {in, (size_t)len, 0, false};
        if (res == MSCCLPP_OK) {
            res = unpack(comm, links[i], machine, &r);
            /* the peer sent what cannot be used, or cannot be reached at the address it sent
             * (a transport connect that fails: the peer died, say): the error blames it, and
             * comm_fail tells the others so, before this rank exits and looks like the cause */
            if (res != MSCCLPP_OK && res != MSCCLPP_ERR_NO_MEMORY) core_set_culprit(links[i]->peer);
        }
        free(in);
    }
    return res;
}

void port_link_close(port_link_t *link)
{
    if (!link->ops) return;
    for (int t = 0; t < PORT_LINK_BUFS; t++)
        if (link->theirs.buf[t]) link->ops->rmem_release(link->theirs.buf[t]);
    if (link->theirs.counters) link->ops->rmem_release(link->theirs.counters);
    free(link->theirs.slots);
    if (link->ep) link->ops->close(link->ep);
    memset(&link->theirs, 0, sizeof link->theirs);
    link->ep = NULL;
}
