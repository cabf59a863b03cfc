/*
 * Port links: this rank's connection to one peer for port channels, set up in one place and
 * with one wire format for both users, the C API's port channels (core/port_channel.c) and a
 * plan's (executor/exec_port.c).
 *
 *   port_link_open       the transport for the pair (tp_select), the communicator's context of
 *                        it, and this side of the connection: the transport packs its address
 *   (the caller registers its counter region and buffers with link->ops and states its offer
 *   in link->mine)
 *   port_links_exchange  one message to each peer, then one from each: every connection is
 *                        completed with the peer's address and the peer's keys are unpacked
 *                        into link->theirs (as NCCL exchanges its transports' connect info)
 *   port_link_close      releases what the link holds (no flush: see port_channel.c)
 *
 * The message, after a u64 length on the bootstrap (explicit and versioned, base/wire.h):
 *   u32 "PORT", u32 version, u32 transport bit, u64 machine (a hash of the boot id; 0: unknown)
 *   u32 address length, the address (the transport's own bytes, from ep_open)
 *   u32 slots k; when k > 0: the key of the counter region, then k u64 slot indices (the
 *       region's counter i sits at i * PORT_SLOT_BYTES)
 *   u32 buffer mask; one key per set bit, lowest first
 * What the slots and buffers mean is the caller's: a plan pairs its j-th port channel to a peer
 * with the peer's j-th one back (spec §5.2); the C API's channel has one slot and buffer 0.
 */
#ifndef MSCCLPP_CORE_PORT_SETUP_H
#define MSCCLPP_CORE_PORT_SETUP_H

#include <stdbool.h>
#include <stdint.h>

#include "core/core.h"
#include "transports/transport.h"

#ifdef __cplusplus
extern "C" {
#endif

#define PORT_WIRE_MAGIC 0x54524f50u /* "PORT" */
#define PORT_WIRE_VERSION \
    3u                   /* 3: the connection's address inside; one format for C API and plans */
#define PORT_LINK_BUFS 3 /* buffers a peer may write through a link */
#define PORT_LINK_MAX_SLOTS 65536
#define PORT_SLOT_BYTES 64 /* counters of a region this far apart (one cache line each) */

typedef struct port_link {
    int peer;
    const tp_ops_t *ops;
    tp_ctx_t *ctx;
    tp_ep_t *ep;
    /* what this rank offers the peer: set by the caller before port_links_exchange (the memory
     * registered with ops/ctx; it outlives the link) */
    struct {
        tp_mem_t *counters_mem; /* the counter region (needed when nslots > 0) */
        const void *counters;
        uint64_t counters_bytes;
        uint32_t nslots; /* the slots the peer's channels signal, in its channel order */
        const uint64_t *slots;
        unsigned bufs; /* buffers the peer writes (bit t: buf[t]) */
        tp_mem_t *buf_mem[PORT_LINK_BUFS];
        const void *buf[PORT_LINK_BUFS];
        uint64_t buf_bytes[PORT_LINK_BUFS];
    } mine;
    /* what the peer offered: filled by port_links_exchange */
    struct {
        tp_rmem_t *counters; /* NULL when nslots == 0 */
        uint32_t nslots;
        uint64_t *slots;
        unsigned bufs;
        tp_rmem_t *buf[PORT_LINK_BUFS];
        uint64_t buf_bytes[PORT_LINK_BUFS];
        bool same_machine; /* another node that runs on this machine (boot id) */
    } theirs;
    uint8_t addr[TP_ADDR_MAX]; /* this side's address, from ep_open */
    size_t addr_len;
} port_link_t;

/** Zero `link`, pick the transport to `peer` and open this side of the connection. */
mscclpp_result_t port_link_open(mscclpp_comm_t *comm, int peer, port_link_t *link);

/**
 * Exchange the set-up message with the peer of each of the `n` opened links (both sides call it
 * with the same tag, each listing the other), complete the connections and unpack the peer's
 * keys. REMOTE names a peer whose message is of another format, version or transport.
 */
mscclpp_result_t port_links_exchange(mscclpp_comm_t *comm, port_link_t *const *links, int n,
                                     int tag);

/** Release the peer's keys and close the connection (no flush). Safe on a zeroed link. */
void port_link_close(port_link_t *link);

#ifdef __cplusplus
}
#endif

#endif /* MSCCLPP_CORE_PORT_SETUP_H */
