/*
 * Transports: how bytes and signals reach a peer rank. One ops table per implementation
 * (ipc, ucx, ib), in the style of hal_ops_t: no slot is ever NULL (an operation a transport
 * cannot do points at a shared stub that returns MSCCLPP_ERR_UNSUPPORTED), and the table
 * starts with its own size.
 *
 * A transport knows of the communicator only its world (tp_world_t: ranks, nodes, the HAL,
 * the cache of mapped peer memory), never a core object: core owns the contexts (one per
 * communicator and transport) and does every exchange between ranks.
 *
 * Objects, per communicator and transport:
 *   tp_ctx_t   the transport's state for one communicator (UCX: context + worker)
 *   tp_ep_t    a connection to one peer (UCX: ucp_ep), made in two steps: ep_open packs this
 *              side's address, ep_connect completes it with the peer's
 *   tp_mem_t   local memory registered with the transport (UCX: ucp_mem_h)
 *   tp_rmem_t  a peer's registration, unpacked (UCX: ucp_rkey_h + remote address)
 *
 * What travels between ranks is packed by the transport and carried by core in one message per
 * pair (core/port_setup.c): the connection's address (ep_open) and the remote keys of memory
 * (tp_mem_pack() writes a versioned, size-prefixed encoding: magic, version, total length,
 * transport, base address, size, then the transport's own bytes; tp_rmem_unpack() checks every
 * field before it trusts one). NCCL's transports work the same way (connect info exchanged by
 * the caller).

 * Signals are "remote counter add" with one writer per counter: the caller keeps the running
 * total of a channel and passes the new total; the transport makes it visible at the peer after
 * every put issued before it on the same connection (see each transport for how).
 *
 * Selection (NCCL's way): per pair of ranks, the usable transport with the highest priority
 * whose can_connect() accepts the pair: ipc for the same node, ib when a device exists, else
 * ucx. MSCCLPP_TRANSPORTS (comma list of ipc, ib, ucx) restricts the candidates.
 */
#ifndef MSCCLPP_TRANSPORTS_TRANSPORT_H
#define MSCCLPP_TRANSPORTS_TRANSPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/wire.h"
#include "hal/hal.h"
#include "mscclpp/mscclpp.h"

#ifdef __cplusplus
extern "C" {
#endif

#define TP_ABI_VERSION 2          /* 2: a world instead of the communicator; ep_open + ep_connect */
#define TP_RKEY_MAGIC 0x4b525054u /* "TPRK" */
#define TP_RKEY_VERSION 1u
#define TP_RKEY_MAX 1024 /* bytes of one packed remote key, at most */
#define TP_ADDR_MAX 4096 /* bytes of one packed connection address, at most */

typedef struct tp_ctx tp_ctx_t;
typedef struct tp_ep tp_ep_t;
typedef struct tp_mem tp_mem_t;
typedef struct tp_rmem tp_rmem_t;

/** How far a flush waits (tp_ops_t.flush). */
typedef enum {
    TP_FLUSH_LOCAL = 0,  /* the sources of earlier puts may be reused */
    TP_FLUSH_REMOTE = 1, /* earlier puts and signals completed at the peer */
} tp_flush_t;

struct ipc_map;

/** What a transport knows of the communicator. core/comm.c fills it once; it stays valid until
 *  the communicator is destroyed, after every context made with it. */
typedef struct tp_world {
    int rank, nranks;
    int local_rank, nlocal;  /* among the ranks of this rank's node */
    const uint64_t *node_id; /* per rank: node identity (equal values: one node) */
    const hal_ops_t *hal;
    struct ipc_map *maps; /* peer allocations mapped into this process (ipc/ipc_map.h) */
} tp_world_t;

/** What can_connect() knows about each side of a pair. */
typedef struct {
    int rank;
    uint64_t node_id;
} tp_peer_t;

typedef struct tp_ops {
    size_t size;       /* sizeof(tp_ops_t) of the builder */
    int abi_version;   /* TP_ABI_VERSION */
    const char *name;  /* "ipc", "ucx", "ib" */
    unsigned bit;      /* MSCCLPP_TRANSPORT_* */

    /* Usable in this process? OK, or an error whose message says why not (quiet). */
    mscclpp_result_t (*probe)(void);
    /* Priority (higher wins) for this pair, or -1 when the transport cannot link it. */
    int (*can_connect)(const tp_peer_t *local, const tp_peer_t *remote);

    mscclpp_result_t (*init)(const tp_world_t *world, tp_ctx_t **ctx);
    void (*fini)(tp_ctx_t *ctx);

    /* memory: register, pack the transport part of the remote key, release */
    mscclpp_result_t (*mem_reg)(tp_ctx_t *ctx, void *ptr, size_t bytes, tp_mem_t **mem);
    mscclpp_result_t (*mem_pack)(tp_ctx_t *ctx, tp_mem_t *mem, wire_writer_t *w);
    mscclpp_result_t (*mem_dereg)(tp_ctx_t *ctx, tp_mem_t *mem);
    /* a peer's key (the transport part; `base` and `bytes` come from the common header) */
    mscclpp_result_t (*rmem_unpack)(tp_ep_t *ep, uint64_t base, uint64_t bytes, wire_reader_t *r,
                                    tp_rmem_t **rmem);
    mscclpp_result_t (*rmem_release)(tp_rmem_t *rmem);

    /* Open this side of a connection to `peer` and pack into `addr` what the peer needs to
     * reach it (at most TP_ADDR_MAX bytes); the caller carries it to the peer. */
    mscclpp_result_t (*ep_open)(tp_ctx_t *ctx, int peer, tp_ep_t **ep, wire_writer_t *addr);
    /* Complete a connection with what the peer's ep_open packed (all of `addr`). */
    mscclpp_result_t (*ep_connect)(tp_ep_t *ep, wire_reader_t *addr);
    /* Copy bytes from local src+src_off to remote dst+dst_off (non-blocking where it can). */
    mscclpp_result_t (*put)(tp_ep_t *ep, tp_rmem_t *dst, uint64_t dst_off, tp_mem_t *src,
                            uint64_t src_off, uint64_t bytes);
    /* Set the remote 8-byte counter at dst+dst_off to `total` after every earlier put. */
    mscclpp_result_t (*signal)(tp_ep_t *ep, tp_rmem_t *dst, uint64_t dst_off, uint64_t total);
    /* Wait (bounded) until every operation issued on ep completed: at the peer
     * (TP_FLUSH_REMOTE), or as far as the sources of its puts may be reused (TP_FLUSH_LOCAL,
     * what a plan's flush needs; a transport may wait longer). */
    mscclpp_result_t (*flush)(tp_ep_t *ep, uint64_t timeout_ns, tp_flush_t how);
    /* Drive communication (target side of emulated one-sided operations, completions). */
    mscclpp_result_t (*progress)(tp_ctx_t *ctx);
    /* OK while the connection works; REMOTE naming the peer once it failed (peer gone) */
    mscclpp_result_t (*ep_status)(tp_ep_t *ep);
    /* Release the connection at once, connected or only opened (callers flush first while
     * the peer still progresses) */
    mscclpp_result_t (*close)(tp_ep_t *ep);
    /* Before the caller sleeps (an idle proxy): arm the context's event descriptor. OK with
     * *fd >= 0: poll it for POLLIN, readable once progress has work (an inbound put); *fd = -1:
     * work arrived meanwhile, progress instead of sleeping. UNSUPPORTED: no descriptor. */
    mscclpp_result_t (*arm)(tp_ctx_t *ctx, int *fd);
} tp_ops_t;

/* Every result-returning slot with its parameters: X(slot, params) (for stubs and checks). */
#define TP_OPS_SLOTS(X)                                                                         \
    X(probe, (void))                                                                            \
    TP_OPS_CTX_SLOTS(X)
/* The same without probe: the slots that need a context. */
#define TP_OPS_CTX_SLOTS(X)                                                                    \
    X(init, (const tp_world_t *world, tp_ctx_t **ctx))                                         \
    X(mem_reg, (tp_ctx_t * ctx, void *ptr, size_t bytes, tp_mem_t **mem))                      \
    X(mem_pack, (tp_ctx_t * ctx, tp_mem_t * mem, wire_writer_t * w))                           \
    X(mem_dereg, (tp_ctx_t * ctx, tp_mem_t * mem))                                             \
    X(rmem_unpack,                                                                             \
      (tp_ep_t * ep, uint64_t base, uint64_t bytes, wire_reader_t * r, tp_rmem_t * *rmem))     \
    X(rmem_release, (tp_rmem_t * rmem))                                                        \
    X(ep_open, (tp_ctx_t * ctx, int peer, tp_ep_t **ep, wire_writer_t *addr))                  \
    X(ep_connect, (tp_ep_t * ep, wire_reader_t * addr))                                        \
    X(put, (tp_ep_t * ep, tp_rmem_t * dst, uint64_t dst_off, tp_mem_t * src, uint64_t src_off, \
            uint64_t bytes))                                                                   \
    X(signal, (tp_ep_t * ep, tp_rmem_t * dst, uint64_t dst_off, uint64_t total))               \
    X(flush, (tp_ep_t * ep, uint64_t timeout_ns, tp_flush_t how))                              \
    X(progress, (tp_ctx_t * ctx))                                                              \
    X(ep_status, (tp_ep_t * ep))                                                               \
    X(close, (tp_ep_t * ep))                                                                   \
    X(arm, (tp_ctx_t * ctx, int *fd))

/** "<op>: not supported by the <transport> transport" as MSCCLPP_ERR_UNSUPPORTED (quiet). */
mscclpp_result_t tp_unsupported_op(const char *transport, const char *op);

#define TP_STUB_DEFINE_(slot, params)                                                           \
    static __attribute__((unused)) mscclpp_result_t tp_stub_##slot params                       \
    {                                                                                           \
        return tp_unsupported_op(tp_stub_name_, #slot);                                         \
    }
/** Typed stubs tp_stub_<slot> for a transport's table (plus can_connect/fini stubs). */
#define TP_DEFINE_STUBS(name)                                                                   \
    static __attribute__((unused)) const char tp_stub_name_[] = name;                           \
    TP_OPS_SLOTS(TP_STUB_DEFINE_)                                                               \
    static __attribute__((unused)) int tp_stub_can_connect(const tp_peer_t *l,                  \
                                                           const tp_peer_t *r)                  \
    {                                                                                           \
        (void)l, (void)r;                                                                       \
        return -1;                                                                              \
    }                                                                                           \
    static __attribute__((unused)) void tp_stub_fini(tp_ctx_t *ctx) { (void)ctx; }

#define TP_STUB_INIT_(slot, params) .slot = tp_stub_##slot,
/** Initializers of every slot but probe and can_connect, pointing at the stubs: the table of a
 *  transport that is not built is {size, abi, name, bit, probe, can_connect, TP_STUB_SLOTS}. */
#define TP_STUB_SLOTS .fini = tp_stub_fini, TP_OPS_CTX_SLOTS(TP_STUB_INIT_)

/** Check a table: size, ABI, name, bit, and no NULL slot (INVALID_ARG naming the slot). */
mscclpp_result_t tp_ops_check(const tp_ops_t *ops, const char **bad);

/* ---- the transports of this build ---------------------------------------------------------- */

enum { TP_IPC = 0, TP_IB = 1, TP_UCX = 2, TP__COUNT };

/** Table of transport `id` (always non-NULL: a transport not built is a table of stubs whose
 *  probe says "not built"). */
const tp_ops_t *tp_get(int id);
/** Transport with bit `bit` (MSCCLPP_TRANSPORT_*), or NULL. */
const tp_ops_t *tp_by_bit(unsigned bit);
/** True when the transport was compiled into this build. */
bool tp_built(int id);

/**
 * For mscclpp-info: whether transport `id` is usable here; `why` gets the reason either way
 * ("built; 0 devices", "not built: configure found no libucx"). Honours MSCCLPP_TRANSPORTS.
 */
mscclpp_result_t tp_status(int id, char *why, size_t cap);

/**
 * The transport for the pair (world's rank, peer): the highest-priority usable transport whose
 * can_connect() accepts it, among those MSCCLPP_TRANSPORTS allows. UNSUPPORTED names the pair
 * and what each candidate said.
 */
mscclpp_result_t tp_select(const tp_world_t *world, int peer, const tp_ops_t **ops);

/** Index (TP_*) of a table tp_get() returned, or -1. */
int tp_index(const tp_ops_t *ops);

/* ---- remote keys ---------------------------------------------------------------------------- */

/** Pack the remote key of `mem` ([ptr, ptr+bytes) as registered) into `w`. */
mscclpp_result_t tp_mem_pack(const tp_ops_t *ops, tp_ctx_t *ctx, tp_mem_t *mem, const void *ptr,
                             uint64_t bytes, wire_writer_t *w);
/** Unpack a remote key from `r` for connection `ep` of transport `ops`. */
mscclpp_result_t tp_rmem_unpack(const tp_ops_t *ops, tp_ep_t *ep, wire_reader_t *r,
                                tp_rmem_t **rmem, uint64_t *bytes);

/* ---- helpers shared by the transports --------------------------------------------------- */

/**
 * Copy `len` bytes into memory another thread may poll. When dst is 8-byte aligned, every whole
 * 8-byte word of it is written with one 8-byte store (relaxed atomic; the tail, if any, with
 * memcpy): an LL packet is a (payload, flag) word pair or one word, and an interpreter polling
 * the flag must never see it without its payload, which memcpy (byte or vector stores, any
 * order) does not promise. The source may be unaligned (loaded with memcpy). Otherwise memcpy.
 * Ordering against a later signal comes from the signal's release store.
 */
void tp_copy_words(void *dst, const void *src, size_t len);

/** Can the CPU read [p, p+n) (first and last byte)? False for GPU memory the CPU cannot map,
 *  true for host memory, pinned or not. Never faults. */
bool tp_cpu_readable(const void *p, size_t n);

/** ucx: is this registration staged through pinned host memory (MSCCLPP_UCX_STAGING)? False
 *  when ucx is not built. For tests. */
bool tp_ucx_mem_staged(const tp_mem_t *mem);
/** For tests: pinned bounce buffers and copy streams the ucx transport made in this process
 *  after setup, from the proxy's calls (a put, a received message): 0 when staging holds to
 *  its rule of making them only at registration (docs/multinode.md, "Which memory"). */
uint64_t tp_ucx_stage_late_allocs(void);
/** For tests: hold the ucx context's lock for `ms` milliseconds in the calling thread, as a
 *  call that waits inside it does, saying `what` it does (the error of a proxy's call that
 *  waited too long for the lock names it). UNSUPPORTED when ucx is not built. */
mscclpp_result_t tp_ucx_hold_lock(tp_ctx_t *ctx, const char *what, unsigned ms);
/** ucx, for mscclpp-info: whether GPU memory registered with ucx will be staged, and why. */
void tp_ucx_staging_info(char *buf, size_t cap);

/* ---- transport tables (defined in each folder; stubs when not built) --------------------- */

const tp_ops_t *tp_ipc_ops(void);
const tp_ops_t *tp_ucx_ops(void);
const tp_ops_t *tp_ib_ops(void);

#ifdef __cplusplus
}
#endif

#endif /* MSCCLPP_TRANSPORTS_TRANSPORT_H */
