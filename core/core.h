/*
 * Internal objects of the core layer shared with the executor: communicator, registered
 * memory, semaphores and channels.
 */
#ifndef MSCCLPP_CORE_CORE_H
#define MSCCLPP_CORE_CORE_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "hal/hal.h"
#include "mscclpp/mscclpp.h"
#include "transports/transport.h"

#ifdef __cplusplus
extern "C" {
#endif

struct mscclpp_comm {
    mscclpp_bootstrap_t *boot;
    bool own_boot;
    int rank, nranks;
    int nlocal;          /* ranks on this node */
    int local_rank;      /* index among them */
    uint64_t *node_id;   /* per rank: hash of host name and boot id */
    const hal_ops_t *hal;
    pthread_mutex_t lock;
    tp_world_t world;        /* what the transports see of it (world.maps: the peer
                              * allocations mapped into this process, transports/ipc) */
    struct sem_slab *slabs;  /* counter memory for semaphores */
    tp_ctx_t *tp[TP__COUNT]; /* transport contexts, made on first use (comm_tp_ctx) */
    /* mscclpp_comm_abort: `aborted` (atomic) is what host code checks; `abort_word` is the same
     * fact in host-mapped, device-visible memory for the interpreter's waits (kern_args_t.abort),
     * made by the first executor (comm_abort_word) and freed with the communicator. */
    int aborted;
    uint64_t *abort_word;
};

/** The communicator's context of a transport, created on first use (thread-safe). */
mscclpp_result_t comm_tp_ctx(mscclpp_comm_t *comm, const tp_ops_t *ops, tp_ctx_t **ctx);

/** True when `peer` shares this rank's node (and so its shared memory). */
bool comm_same_node(const mscclpp_comm_t *comm, int peer);

/** True once mscclpp_comm_abort was called on comm (any thread may ask). */
static inline bool comm_aborted(const mscclpp_comm_t *comm)
{
    return __atomic_load_n(&comm->aborted, __ATOMIC_ACQUIRE) != 0;
}

/**
 * A collective step of this rank failed with `r` (message: the calling thread's last error;
 * `logged`: whether it was logged already - one recorded quietly, core_error_logged(), is
 * logged here either way) and core_culprit() says which peer it blames. A
 * peer that stopped because of another rank says so in an abort notice: wait a moment for one,
 * and if it names another rank, blame that one and say so in the error.
 * Then log the error (when not logged yet, or completed) and tell the other ranks whom this
 * rank blames, so that ranks waiting on it name the same rank (issue 22 item 5). Returns the
 * error to report.
 */
mscclpp_result_t comm_fail(mscclpp_comm_t *comm, mscclpp_result_t r, bool logged);

/** The error of a call that found comm aborted: MSCCLPP_ERR_ABORTED, naming `what`. */
mscclpp_result_t comm_abort_error(const mscclpp_comm_t *comm, const char *what);

/**
 * The communicator's abort word for launches (kern_args_t.abort), allocated on first use;
 * *word is NULL when the backend cannot allocate host-mapped memory (launches are then bounded
 * by MSCCLPP_TIMEOUT alone).
 */
mscclpp_result_t comm_abort_word(mscclpp_comm_t *comm, uint64_t **word);

/* Wire encoding version of registered memory. */
#define REGMEM_WIRE_MAGIC 0x4d47524du /* "MRGM" */
#define REGMEM_WIRE_VERSION 1u
#define REGMEM_WIRE_MAX 256

struct mscclpp_regmem {
    mscclpp_comm_t *comm;
    int rank;            /* owner */
    unsigned transports;
    void *ptr;           /* local address (NULL for a peer's memory we cannot map) */
    size_t size;
    size_t offset;       /* of ptr inside its allocation */
    uint64_t node_id;    /* owner's node */
    hal_mem_handle_t handle;
    void *import_base;   /* mapped allocation base when imported (released on destroy) */
};

/* Counter slots for semaphores live in shareable memory so peers can map them. */
typedef struct {
    uint64_t *inbound;   /* mine: the peer adds to it */
    uint64_t *outbound;  /* the peer's inbound slot, mapped here */
    uint64_t expected;   /* signals consumed so far (host-side waits) */
    int peer, tag;
} sem_pair_t;

struct mscclpp_semaphore {
    mscclpp_comm_t *comm;
    sem_pair_t pair;
    void *slot_owner;    /* slab bookkeeping */
    void *peer_mapping;  /* import cache entry of the peer's slab */
};

/**
 * Allocate one zeroed 8-byte counter in shareable memory (a 64-byte slot, so counters of
 * different semaphores do not share a cache line) and describe it for a peer.
 */
mscclpp_result_t comm_counter_alloc(mscclpp_comm_t *comm, uint64_t **counter, void **owner);
void comm_counter_free(mscclpp_comm_t *comm, void *owner);

/**
 * Exchange one local address inside shareable memory with `peer` (send mine, receive theirs)
 * and map the peer's locally (core/regmem.c). Both ranks call it with the same tag. `mapping`
 * is released with comm_unmap_peer().
 */
mscclpp_result_t comm_exchange_address(mscclpp_comm_t *comm, int peer, int tag, void *mine,
                                       size_t bytes, void **theirs, void **mapping);
void comm_unmap_peer(mscclpp_comm_t *comm, void *mapping);

/** Map a peer allocation described by `handle` once per communicator (refcounted: the
 *  cache of transports/ipc/ipc_map.h); release with comm_unmap_peer(). */
mscclpp_result_t comm_import(mscclpp_comm_t *comm, int owner, const hal_mem_handle_t *handle,
                             void **base, void **mapping);

/** Wait until *counter >= target (core/wait_counter.c, the base/wait.h policy), bounded by
 * MSCCLPP_TIMEOUT. */
mscclpp_result_t core_wait_counter(const uint64_t *counter, uint64_t target, bool relaxed,
                                   const char *what);

#ifdef __cplusplus
}
#endif

#endif
