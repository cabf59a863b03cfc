/*
 * Bootstrap internals: the object behind mscclpp_bootstrap_t and the ops table that the TCP
 * bootstrap (core/bootstrap_tcp.c) and user-provided ones (the MPI bootstrap among them) fill.
 * The public wrappers in core/bootstrap.c
 * check arguments before calling an op, so ops may assume valid arguments (peer != rank, in
 * range, non-NULL data when bytes > 0).
 *
 * Thread safety: send and recv may be called from several threads at once. allgather and barrier
 * are collectives: every rank calls them in the same order, one at a time (as in MPI).
 */
#ifndef MSCCLPP_CORE_BOOTSTRAP_H
#define MSCCLPP_CORE_BOOTSTRAP_H

#include <stddef.h>

#include "mscclpp/mscclpp.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct boot_ops {
    const char *name; /* "tcp", "mpi": for log messages */
    mscclpp_result_t (*allgather)(mscclpp_bootstrap_t *boot, void *data, size_t bytes_per_rank);
    mscclpp_result_t (*send)(mscclpp_bootstrap_t *boot, const void *data, size_t bytes, int peer,
                             int tag);
    mscclpp_result_t (*recv)(mscclpp_bootstrap_t *boot, void *data, size_t bytes, int peer,
                             int tag);
    mscclpp_result_t (*barrier)(mscclpp_bootstrap_t *boot);
    /* Release `impl` (not `boot`); called once by mscclpp_bootstrap_destroy. */
    mscclpp_result_t (*destroy)(mscclpp_bootstrap_t *boot);
    /* Optional (NULL: none): make the calls in progress on other threads give up soon with
     * MSCCLPP_ERR_ABORTED, and every later one at once. Any thread; frees nothing. */
    void (*interrupt)(mscclpp_bootstrap_t *boot);
    /* Optional: this rank is failing because of `suspect` (-1: none); wait, bounded (briefly
     * when the suspect's process is gone, up to min(2 s, MSCCLPP_TIMEOUT / 2) while it is
     * alive: it may be stalled behind a failed rank and tell), for an abort notice that says
     * why it stopped: one blaming a rank whose process is gone, else the suspect's own.
     * 1 with the best notice's sender, the rank it blames and its message, else 0. */
    int (*notice)(mscclpp_bootstrap_t *boot, int suspect, int *from, int *culprit, char *msg,
                  size_t cap);
    /* Optional: tell every other rank (once, bounded) that this rank failed because of
     * `culprit`, with the calling thread's last error as the message. */
    void (*blame)(mscclpp_bootstrap_t *boot, int culprit);
} boot_ops_t;

struct mscclpp_bootstrap {
    int rank;
    int nranks;
    const boot_ops_t *ops;
    void *impl;      /* owned by the ops */
    int interrupted; /* atomic: boot_interrupt was called; every later call fails at once */
};

/**
 * Interrupt the bootstrap (mscclpp_comm_abort): later calls fail with MSCCLPP_ERR_ABORTED at
 * once, and calls in progress give up at their next poll where the ops can (TCP); calls of
 * the MPI or a custom bootstrap end by their own timeout. NULL is ignored.
 */
void boot_interrupt(mscclpp_bootstrap_t *boot);

/** boot->ops->notice, or 0 when the bootstrap has none (MPI, custom). Keeps the last error. */
int boot_notice(mscclpp_bootstrap_t *boot, int suspect, int *from, int *culprit, char *msg,
                size_t cap);
/** boot->ops->blame when the bootstrap has one. Keeps the last error. */
void boot_blame(mscclpp_bootstrap_t *boot, int culprit);

/**
 * Wrap an implementation in a new bootstrap object. On failure `ops->destroy` is NOT called;
 * the caller still owns `impl`.
 */
mscclpp_result_t boot_new(int rank, int nranks, const boot_ops_t *ops, void *impl,
                          mscclpp_bootstrap_t **boot);

/** TCP: join the session `id` (decoded and verified) as rank of nranks (core/bootstrap_tcp.c). */
mscclpp_result_t boot_tcp_create(const mscclpp_unique_id_t *id, int rank, int nranks,
                                 mscclpp_bootstrap_t **boot);
/** TCP: address form; `address` NULL reads MSCCLPP_MASTER_ADDR/PORT. */
mscclpp_result_t boot_tcp_create_from_address(const char *address, int rank, int nranks,
                                              mscclpp_bootstrap_t **boot);
/** TCP: choose an address, bind, start the root thread and encode the id. */
mscclpp_result_t boot_tcp_unique_id(mscclpp_unique_id_t *id);

/* Fuzzing hooks (tests/fuzz/fuzz_boot.c): feed bytes to the root's and a rank's parsers. */
int boot_tcp_fuzz_root(const uint8_t *data, size_t len);
int boot_tcp_fuzz_rank(const uint8_t *data, size_t len);
const unsigned char *boot_tcp_fuzz_secret(void);

#ifdef __cplusplus
}
#endif

#endif /* MSCCLPP_CORE_BOOTSTRAP_H */
