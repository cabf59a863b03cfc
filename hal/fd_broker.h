/*
 * File-descriptor broker: serves file descriptors of this process (host memfds, cuMem POSIX
 * handles) to other processes of the node over an abstract AF_UNIX socket, passing them with
 * SCM_RIGHTS. Vendor-neutral: compiled into libmscclpp (host backend) and into each GPU module
 * (which cannot see the library's hidden symbols), so a process may run one broker per copy.
 *
 * A descriptor travels as a ticket: the serving pid, a per-process random nonce naming the
 * socket, a key naming the descriptor and a random secret per served descriptor. Abstract
 * sockets have no file permissions: the unguessable name and secret, and a same-user check
 * of the peer (SO_PEERCRED), guard it. Every wait is bounded by MSCCLPP_TIMEOUT.
 */
#ifndef MSCCLPP_HAL_FD_BROKER_H
#define MSCCLPP_HAL_FD_BROKER_H

#include <stddef.h>
#include <stdint.h>

#include "mscclpp/mscclpp.h"

#define HAL_FDB_SECRET_BYTES 16
#define HAL_FDB_TICKET_BYTES 36 /* encoded size: pid 4, nonce 8, key 8, secret 16 */

typedef struct {
    uint32_t pid;
    uint64_t nonce; /* names the serving socket of `pid` */
    uint64_t key;   /* names one descriptor there */
    uint8_t secret[HAL_FDB_SECRET_BYTES];
} hal_fdb_ticket_t;

/**
 * Serve `fd` until hal_fdb_withdraw(ticket->key). The broker takes ownership of `fd` on
 * success (it closes it on withdraw); on failure the caller still owns it. Starts the serving
 * thread on first use, and again in a forked child, which serves nothing of its parent's.
 */
mscclpp_result_t hal_fdb_serve(int fd, hal_fdb_ticket_t *ticket);

/**
 * Serve `fd` without taking it: the caller keeps it open until after hal_fdb_withdraw (which
 * then does not close it), and a forked child keeps it too. Saves the descriptor a served dup
 * would cost (issue 22 item 6: one per exported allocation of the host backend).
 */
mscclpp_result_t hal_fdb_serve_borrowed(int fd, hal_fdb_ticket_t *ticket);

/** Stop serving `key` and close its descriptor (unless borrowed). Unknown keys are ignored. */
void hal_fdb_withdraw(uint64_t key);

/**
 * Fetch a duplicate of the descriptor named by `ticket` (from any process of this node of the
 * same user, including this one). Bounded by MSCCLPP_TIMEOUT as a whole. The caller owns *fd.
 * MSCCLPP_ERR_REMOTE when the server is gone or refuses (unknown key, wrong secret).
 */
mscclpp_result_t hal_fdb_fetch(const hal_fdb_ticket_t *ticket, int *fd);

/** Stop the serving thread and close every served descriptor (module unload). */
void hal_fdb_shutdown(void);

/** Explicit little-endian encoding of a ticket: HAL_FDB_TICKET_BYTES bytes. */
void hal_fdb_ticket_encode(const hal_fdb_ticket_t *ticket, uint8_t *buf);
void hal_fdb_ticket_decode(const uint8_t *buf, hal_fdb_ticket_t *ticket);

/* Little-endian helpers shared by the handle encoders of the backends. */
static inline void hal_put_u32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static inline void hal_put_u64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static inline uint32_t hal_get_u32(const uint8_t *p)
{
    uint32_t v = 0;
    for (int i = 3; i >= 0; i--) v = (v << 8) | p[i];
    return v;
}
static inline uint64_t hal_get_u64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = (v << 8) | p[i];
    return v;
}

#endif /* MSCCLPP_HAL_FD_BROKER_H */
