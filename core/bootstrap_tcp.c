/*
 * TCP bootstrap.
 *
 * Session setup: a root service (a thread in the process that created the unique id, or in rank
 * 0 for the address form) accepts one connection per rank. Each rank sends a hello (secret, rank,
 * nranks, its own listen address); the root drops connections with a wrong secret, refuses
 * duplicate or out-of-range ranks and nranks mismatches, and once every rank has joined sends each
 * one the table of listen addresses.
 *
 * Point-to-point: a rank connects lazily to a peer's listener on its first send to that peer and
 * opens with a handshake (secret, rank) that the acceptor verifies. Each direction of a pair has
 * its own connection, so a socket is only ever written by one side. Messages are framed
 * (kind, tag, length) and received whole into per-peer queues; recv takes the first queued
 * message with its (kind, tag), which keeps per-(peer, tag) order and lets tags arrive in any
 * order. Waiting in recv or in a blocked send drives all inbound connections ("progress"), so two
 * ranks sending large messages to each other never deadlock.
 *
 * Every wait is bounded by MSCCLPP_TIMEOUT. One mutex per bootstrap serializes callers; a thread
 * waiting in recv drops it between polls so other threads can send.
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "core/bootstrap.h"
#include "base/config.h"
#include "base/debug.h"
#include "core/socket.h"

#define SECRET_BYTES 32
#define UID_MAGIC "MSCCLPPB"
#define UID_VERSION 1
#define HELLO_MAGIC "MSCCLPPH"
#define REPLY_MAGIC "MSCCLPPR"
#define CONN_MAGIC "MSCCLPPC"
#define PROTO_VERSION 1
#define MAX_RANKS (1 << 20)
#define MAX_FRAME_BYTES (1ull << 40)
/*
 * A peer that closed our connection to it may still have data for us on a connection we have
 * not accepted yet (two TCP connections are not ordered): wait this long for it to show up.
 */
#define CLOSE_GRACE_NS 1000000000ull

/*
 * Unique id (128 bytes):   0 magic[8] | 8 version u16 | 10 reserved u16 | 12 root address[20] |
 *                          32 secret[32] | 64 zero[64]
 * Hello (rank -> root):    0 magic[8] | 8 version u16 | 10 reserved u16 | 12 secret[32] |
 *                          44 rank u32 | 48 nranks u32 | 52 listen address[20]        = 72 bytes
 * Reply (root -> rank):    0 magic[8] | 8 status u32 | 12 nranks u32 | 16 joined u32  = 20 bytes,
 *                          then, when status is OK, nranks addresses[20]
 * Handshake (peer conn):   0 magic[8] | 8 version u16 | 10 reserved u16 | 12 secret[32] |
 *                          44 rank u32 | 48 nranks u32                                 = 52 bytes
 * Frame:                   0 kind u32 | 4 tag u32 | 8 length u64 | payload             = 16 + len
 * All integers big-endian; addresses as in sock_addr_encode.
 */
#define UID_ADDR_OFF 12
#define UID_SECRET_OFF 32
#define HELLO_BYTES 72
#define REPLY_BYTES 20
#define HS_BYTES 52
#define FRAME_HDR_BYTES 16

enum {
    REPLY_OK = 0,
    REPLY_BAD_SECRET = 1,
    REPLY_BAD_RANK = 2,
    REPLY_BAD_NRANKS = 3,
    REPLY_TIMEOUT = 4
};
enum { KIND_USER = 0, KIND_ALLGATHER = 1, KIND_BARRIER = 2, KIND_COUNT };

/* ---------------------------------------------------------------------------------------------
 * Secrets
 * ------------------------------------------------------------------------------------------- */

static mscclpp_result_t random_secret(unsigned char *secret)
{
    size_t got = 0;
    while (got < SECRET_BYTES) {
        ssize_t n = getrandom(secret + got, SECRET_BYTES - got, 0);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) return ERR_SYS("getrandom: %m");
        got += (size_t)n;
    }
    return MSCCLPP_OK;
}

static uint64_t mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/*
 * Secret of an address-form session: a (non-cryptographic) 256-bit hash of the root address and
 * MSCCLPP_BOOTSTRAP_SECRET. It keeps unrelated sessions from joining each other by accident; it
 * is only as secret as those inputs.
 */
static void derive_secret(const char *root_text, unsigned char *secret)
{
    const char *extra = config_get(CFG_MSCCLPP_BOOTSTRAP_SECRET);
    for (int lane = 0; lane < 4; lane++) {
        uint64_t h = 0xcbf29ce484222325ull ^ mix64((uint64_t)lane + 1);
        const char *parts[2] = {root_text, extra};
        for (int p = 0; p < 2; p++) {
            for (const unsigned char *c = (const unsigned char *)parts[p]; *c; c++) {
                h ^= *c;
                h *= 0x100000001b3ull;
            }
            h ^= 0xff; /* separator: "a"+"bc" differs from "ab"+"c" */
            h *= 0x100000001b3ull;
        }
        sock_put_u64(secret + 8 * lane, mix64(h));
    }
}

static int secret_equal(const unsigned char *a, const unsigned char *b)
{
    unsigned char d = 0;
    for (int i = 0; i < SECRET_BYTES; i++) d |= (unsigned char)(a[i] ^ b[i]);
    return d == 0;
}

static double timeout_s(void) { return (double)config_timeout_ns() / 1e9; }

/* ---------------------------------------------------------------------------------------------
 * Root service
 * ------------------------------------------------------------------------------------------- */

typedef struct {
    int lfd;
    sock_addr_t addr;
    unsigned char secret[SECRET_BYTES];
    uint64_t deadline;
} root_t;

static void reply_status(int fd, uint32_t status, uint32_t nranks, uint32_t joined,
                         uint64_t deadline)
{
    unsigned char r[REPLY_BYTES];
    memcpy(r, REPLY_MAGIC, 8);
    sock_put_u32(r + 8, status);
    sock_put_u32(r + 12, nranks);
    sock_put_u32(r + 16, joined);
    (void)sock_send_all(fd, r, sizeof r, deadline);
}

static const char *peer_str(int fd, char *buf, size_t cap)
{
    sock_addr_t a;
    a.len = sizeof a.u;
    if (getpeername(fd, &a.u.sa, &a.len) != 0) return "(unknown peer)";
    return sock_addr_str(&a, buf, cap);
}

static void *root_main(void *arg)
{
    root_t *r = arg;
    char where[80], who[80];
    sock_addr_str(&r->addr, where, sizeof where);
    int nranks = 0, joined = 0;
    int *fds = NULL;
    unsigned char *table = NULL;

    while (nranks == 0 || joined < nranks) {
        int fd;
        sock_status_t st = sock_accept(r->lfd, r->deadline, &fd);
        if (st == SOCK_TIMEOUT) break;
        if (st != SOCK_OK) {
            WARN(SUBSYS_BOOT, "bootstrap root %s: accept failed: %m", where);
            struct timespec ts = {0, 10000000};
            nanosleep(&ts, NULL);
            continue;
        }
        /* A rank sends its hello right after connecting; do not let a silent client stall us. */
        uint64_t hello_deadline = sock_now_ns() + 5000000000ull;
        if (hello_deadline > r->deadline) hello_deadline = r->deadline;
        unsigned char h[HELLO_BYTES];
        if (sock_recv_all(fd, h, sizeof h, hello_deadline) != SOCK_OK) {
            WARN(SUBSYS_BOOT, "bootstrap root %s: dropped %s: no complete hello", where,
                 peer_str(fd, who, sizeof who));
            sock_close(fd);
            continue;
        }
        if (memcmp(h, HELLO_MAGIC, 8) != 0 || sock_get_u16(h + 8) != PROTO_VERSION ||
            !secret_equal(h + 12, r->secret)) {
            WARN(SUBSYS_BOOT, "bootstrap root %s: refused %s: wrong secret or protocol", where,
                 peer_str(fd, who, sizeof who));
            reply_status(fd, REPLY_BAD_SECRET, 0, 0, hello_deadline);
            sock_close(fd);
            continue;
        }
        uint32_t rank = sock_get_u32(h + 44), n = sock_get_u32(h + 48);
        if (nranks == 0 && n >= 1 && n <= MAX_RANKS) {
            fds = malloc(sizeof *fds * n);
            table = calloc(n, SOCK_ADDR_WIRE_BYTES);
            if (!fds || !table) {
                WARN(SUBSYS_BOOT, "bootstrap root %s: out of memory for %u ranks", where, n);
                sock_close(fd);
                break;
            }
            for (uint32_t i = 0; i < n; i++) fds[i] = -1;
            nranks = (int)n;
        }
        if ((int)n != nranks) {
            WARN(SUBSYS_BOOT, "bootstrap root %s: refused rank %u of %s: nranks %u != %d", where,
                 rank, peer_str(fd, who, sizeof who), n, nranks);
            reply_status(fd, REPLY_BAD_NRANKS, (uint32_t)nranks, (uint32_t)joined, hello_deadline);
            sock_close(fd);
            continue;
        }
        if (rank >= n || fds[rank] >= 0) {
            WARN(SUBSYS_BOOT, "bootstrap root %s: refused %s: rank %u is %s", where,
                 peer_str(fd, who, sizeof who), rank, rank >= n ? "out of range" : "taken");
            reply_status(fd, REPLY_BAD_RANK, (uint32_t)nranks, (uint32_t)joined, hello_deadline);
            sock_close(fd);
            continue;
        }
        fds[rank] = fd;
        memcpy(table + (size_t)rank * SOCK_ADDR_WIRE_BYTES, h + 52, SOCK_ADDR_WIRE_BYTES);
        joined++;
        TRACE(SUBSYS_BOOT, "bootstrap root %s: rank %u joined (%d of %d)", where, rank, joined,
              nranks);
    }

    /* Replies get their own time budget: the join may have used most of the first one. */
    uint64_t deadline = sock_deadline();
    if (nranks > 0 && joined == nranks) {
        unsigned char hdr[REPLY_BYTES];
        memcpy(hdr, REPLY_MAGIC, 8);
        sock_put_u32(hdr + 8, REPLY_OK);
        sock_put_u32(hdr + 12, (uint32_t)nranks);
        sock_put_u32(hdr + 16, (uint32_t)joined);
        for (int i = 0; i < nranks; i++) {
            if (sock_send_all(fds[i], hdr, sizeof hdr, deadline) != SOCK_OK ||
                sock_send_all(fds[i], table, (size_t)nranks * SOCK_ADDR_WIRE_BYTES, deadline) !=
                    SOCK_OK)
                WARN(SUBSYS_BOOT, "bootstrap root %s: could not send the table to rank %d: %m",
                     where, i);
        }
        INFO(SUBSYS_BOOT, "bootstrap root %s: all %d ranks joined", where, nranks);
    } else {
        WARN(SUBSYS_BOOT, "bootstrap root %s: gave up after %.1f s: %d of %d ranks joined", where,
             timeout_s(), joined, nranks);
        for (int i = 0; i < nranks; i++)
            if (fds[i] >= 0)
                reply_status(fds[i], REPLY_TIMEOUT, (uint32_t)nranks, (uint32_t)joined, deadline);
    }
    for (int i = 0; i < nranks; i++) sock_close(fds[i]);
    free(fds);
    free(table);
    sock_close(r->lfd);
    free(r);
    return NULL;
}

/* Start the root service on a bound listener; `thread` NULL detaches it. Takes `lfd`. */
static mscclpp_result_t root_start(int lfd, const sock_addr_t *addr, const unsigned char *secret,
                                   pthread_t *thread)
{
    root_t *r = calloc(1, sizeof *r);
    if (!r) {
        sock_close(lfd);
        return ERR(MSCCLPP_ERR_NO_MEMORY, "bootstrap root: out of memory");
    }
    r->lfd = lfd;
    r->addr = *addr;
    memcpy(r->secret, secret, SECRET_BYTES);
    r->deadline = sock_deadline();
    pthread_t t;
    int rc = pthread_create(&t, NULL, root_main, r);
    if (rc != 0) {
        errno = rc;
        mscclpp_result_t res = ERR_SYS("bootstrap root: pthread_create: %m");
        sock_close(lfd);
        free(r);
        return res;
    }
    if (thread)
        *thread = t;
    else
        pthread_detach(t);
    return MSCCLPP_OK;
}

/* ---------------------------------------------------------------------------------------------
 * Per-rank state
 * ------------------------------------------------------------------------------------------- */

typedef struct msg {
    struct msg *next;
    uint32_t kind;
    int tag;
    size_t len;
    unsigned char *data;
} msg_t;

typedef struct {
    int fd;
    int peer;                    /* -1 until the handshake is verified */
    int closed;                  /* EOF or error seen */
    unsigned char hdr[HS_BYTES]; /* handshake or frame header being read */
    size_t hdr_got;
    msg_t *cur; /* payload being read */
    size_t cur_got;
} inconn_t;

typedef struct {
    pthread_mutex_t lock;
    int rank, nranks;
    unsigned char secret[SECRET_BYTES];
    int lfd;
    sock_addr_t *addrs;
    int *out_fd;             /* per peer: -1 not connected */
    int *out_broken;         /* per peer: the connection failed or was closed by the peer */
    uint64_t *out_broken_ns; /* per peer: when out_broken was first seen */
    inconn_t **in_of;        /* per peer: its verified inbound connection */
    msg_t **qhead, **qtail;
    inconn_t **in; /* all inbound connections, pending and verified */
    int nin, capin;
    struct pollfd *pfd;
    int cappfd;
} tcp_t;

static void mark_broken(tcp_t *t, int peer)
{
    if (!t->out_broken[peer]) t->out_broken_ns[peer] = sock_now_ns();
    t->out_broken[peer] = 1;
}

static const char *what_str(uint32_t kind, int tag, char *buf, size_t cap)
{
    if (kind == KIND_ALLGATHER)
        snprintf(buf, cap, "allgather data");
    else if (kind == KIND_BARRIER)
        snprintf(buf, cap, "barrier");
    else
        snprintf(buf, cap, "tag %d", tag);
    return buf;
}

static void inconn_free(inconn_t *c)
{
    sock_close(c->fd);
    if (c->cur) {
        free(c->cur->data);
        free(c->cur);
    }
    free(c);
}

/* Drop inbound connection i from the poll list (a verified one stays reachable via in_of). */
static void in_remove(tcp_t *t, int i)
{
    inconn_t *c = t->in[i];
    t->in[i] = t->in[--t->nin];
    if (c->peer >= 0) {
        sock_close(c->fd);
        c->fd = -1;
        c->closed = 1;
    } else {
        inconn_free(c);
    }
}

static mscclpp_result_t accept_pending(tcp_t *t)
{
    for (;;) {
        int fd;
        sock_status_t st = sock_accept(t->lfd, 0, &fd);
        if (st == SOCK_TIMEOUT) return MSCCLPP_OK; /* nothing pending */
        if (st != SOCK_OK) {
            if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM)
                return ERR_SYS("rank %d: accept: %m", t->rank);
            WARN(SUBSYS_BOOT, "rank %d: accept: %m", t->rank);
            return MSCCLPP_OK;
        }
        if (t->nin == t->capin) {
            int cap = t->capin ? 2 * t->capin : 16;
            inconn_t **n = realloc(t->in, sizeof *n * (size_t)cap);
            if (!n) {
                sock_close(fd);
                return ERR(MSCCLPP_ERR_NO_MEMORY, "rank %d: out of memory", t->rank);
            }
            t->in = n;
            t->capin = cap;
        }
        inconn_t *c = calloc(1, sizeof *c);
        if (!c) {
            sock_close(fd);
            return ERR(MSCCLPP_ERR_NO_MEMORY, "rank %d: out of memory", t->rank);
        }
        c->fd = fd;
        c->peer = -1;
        t->in[t->nin++] = c;
    }
}

/* Check a completed handshake; returns 0 and sets c->peer when it is accepted. */
static int verify_handshake(tcp_t *t, inconn_t *c)
{
    char who[80];
    const unsigned char *h = c->hdr;
    uint32_t rank = sock_get_u32(h + 44), n = sock_get_u32(h + 48);
    if (memcmp(h, CONN_MAGIC, 8) != 0 || sock_get_u16(h + 8) != PROTO_VERSION ||
        !secret_equal(h + 12, t->secret)) {
        WARN(SUBSYS_BOOT, "rank %d: refused a connection from %s: wrong secret or protocol",
             t->rank, peer_str(c->fd, who, sizeof who));
        return -1;
    }
    if ((int)n != t->nranks || rank >= n || (int)rank == t->rank || t->in_of[rank]) {
        WARN(SUBSYS_BOOT, "rank %d: refused a connection from %s claiming rank %u of %u", t->rank,
             peer_str(c->fd, who, sizeof who), rank, n);
        return -1;
    }
    c->peer = (int)rank;
    t->in_of[rank] = c;
    c->hdr_got = 0;
    return 0;
}

static void enqueue(tcp_t *t, int peer, msg_t *m)
{
    m->next = NULL;
    if (t->qtail[peer])
        t->qtail[peer]->next = m;
    else
        t->qhead[peer] = m;
    t->qtail[peer] = m;
}

/* Read what is available on inbound connection i. Returns 1 when the connection was removed. */
static mscclpp_result_t read_inbound(tcp_t *t, int i, int *removed)
{
    inconn_t *c = t->in[i];
    *removed = 0;
    for (;;) {
        sock_status_t st = SOCK_OK;
        ssize_t n;
        if (c->peer < 0 || !c->cur) {
            size_t want = c->peer < 0 ? HS_BYTES : FRAME_HDR_BYTES;
            n = sock_recv_some(c->fd, c->hdr + c->hdr_got, want - c->hdr_got, &st);
            if (n > 0) {
                c->hdr_got += (size_t)n;
                if (c->hdr_got < want) continue;
                if (c->peer < 0) {
                    if (verify_handshake(t, c) != 0) {
                        in_remove(t, i);
                        *removed = 1;
                        return MSCCLPP_OK;
                    }
                    TRACE(SUBSYS_BOOT, "rank %d: accepted rank %d", t->rank, c->peer);
                    continue;
                }
                uint64_t len = sock_get_u64(c->hdr + 8);
                if (len > MAX_FRAME_BYTES) {
                    WARN(SUBSYS_BOOT, "rank %d: rank %d sent a frame of %llu bytes; closing",
                         t->rank, c->peer, (unsigned long long)len);
                    in_remove(t, i);
                    *removed = 1;
                    return MSCCLPP_OK;
                }
                msg_t *m = calloc(1, sizeof *m);
                unsigned char *d = malloc(len ? (size_t)len : 1);
                if (!m || !d) {
                    free(m);
                    free(d);
                    return ERR(MSCCLPP_ERR_NO_MEMORY,
                               "rank %d: out of memory for a %llu-byte message from rank %d",
                               t->rank, (unsigned long long)len, c->peer);
                }
                m->kind = sock_get_u32(c->hdr);
                m->tag = (int)sock_get_u32(c->hdr + 4);
                m->len = (size_t)len;
                m->data = d;
                c->cur = m;
                c->cur_got = 0;
                c->hdr_got = 0;
            }
        } else {
            n = sock_recv_some(c->fd, c->cur->data + c->cur_got, c->cur->len - c->cur_got, &st);
            if (n > 0) c->cur_got += (size_t)n;
        }
        if (n < 0) {
            if (st == SOCK_SYSERR)
                WARN(SUBSYS_BOOT, "rank %d: receiving from rank %d: %m", t->rank, c->peer);
            in_remove(t, i);
            *removed = 1;
            return MSCCLPP_OK;
        }
        if (c->cur && c->cur_got == c->cur->len) {
            enqueue(t, c->peer, c->cur);
            c->cur = NULL;
            continue;
        }
        if (n == 0) return MSCCLPP_OK; /* drained */
    }
}

/*
 * Wait up to `wait_ms` for activity and handle it: accept connections, read inbound data, note
 * peers that closed our outbound connections. `send_peer` >= 0 also waits for its outbound socket
 * to become writable (*writable says whether it is).
 */
static mscclpp_result_t progress(tcp_t *t, int wait_ms, int send_peer, int *writable)
{
    int need = 1 + t->nin + t->nranks;
    if (need > t->cappfd) {
        struct pollfd *p = realloc(t->pfd, sizeof *p * (size_t)need);
        if (!p) return ERR(MSCCLPP_ERR_NO_MEMORY, "rank %d: out of memory", t->rank);
        t->pfd = p;
        t->cappfd = need;
    }
    int np = 0;
    t->pfd[np++] = (struct pollfd){.fd = t->lfd, .events = POLLIN};
    int nin = t->nin;
    for (int i = 0; i < nin; i++)
        t->pfd[np++] = (struct pollfd){.fd = t->in[i]->fd, .events = POLLIN};
    int out_base = np;
    for (int p = 0; p < t->nranks; p++) {
        int fd = t->out_broken[p] ? -1 : t->out_fd[p];
        short ev = POLLIN | (p == send_peer ? POLLOUT : 0);
        t->pfd[np++] = (struct pollfd){.fd = fd, .events = ev};
    }
    if (writable) *writable = 0;
    int n = poll(t->pfd, (nfds_t)np, wait_ms);
    if (n < 0) {
        if (errno == EINTR) return MSCCLPP_OK;
        return ERR_SYS("rank %d: poll: %m", t->rank);
    }
    if (n == 0) return MSCCLPP_OK;
    /* Outbound sockets: the peer never writes on them, so readable means closed. */
    for (int p = 0; p < t->nranks; p++) {
        short re = t->pfd[out_base + p].revents;
        if (!re) continue;
        if (p == send_peer && (re & (POLLOUT | POLLERR | POLLHUP)) && writable) *writable = 1;
        if (re & (POLLIN | POLLHUP | POLLERR)) {
            unsigned char b[64];
            sock_status_t st = SOCK_OK;
            if (sock_recv_some(t->out_fd[p], b, sizeof b, &st) < 0) {
                TRACE(SUBSYS_BOOT, "rank %d: rank %d closed our connection", t->rank, p);
                mark_broken(t, p);
                if (writable && p == send_peer) *writable = 1; /* let the send see the error */
            }
        }
    }
    /* Inbound, from the end so that removals (swap with last) do not skip entries. */
    for (int i = nin - 1; i >= 0; i--) {
        if (!t->pfd[1 + i].revents) continue;
        int removed;
        CHECK(read_inbound(t, i, &removed));
    }
    if (t->pfd[0].revents) CHECK(accept_pending(t));
    return MSCCLPP_OK;
}

static msg_t *take(tcp_t *t, int peer, uint32_t kind, int tag)
{
    msg_t *prev = NULL;
    for (msg_t *m = t->qhead[peer]; m; prev = m, m = m->next) {
        if (m->kind != kind || m->tag != tag) continue;
        if (prev)
            prev->next = m->next;
        else
            t->qhead[peer] = m->next;
        if (t->qtail[peer] == m) t->qtail[peer] = prev;
        return m;
    }
    return NULL;
}

static mscclpp_result_t tcp_recv_kind(tcp_t *t, void *data, size_t bytes, int peer, uint32_t kind,
                                      int tag, uint64_t deadline)
{
    char what[40];
    mscclpp_result_t res = MSCCLPP_OK;
    pthread_mutex_lock(&t->lock);
    for (;;) {
        msg_t *m = take(t, peer, kind, tag);
        if (m) {
            if (m->len != bytes)
                res = ERR_ARG("rank %d: message from rank %d with %s has %zu bytes, expected %zu",
                              t->rank, peer, what_str(kind, tag, what, sizeof what), m->len, bytes);
            else if (bytes)
                memcpy(data, m->data, bytes);
            free(m->data);
            free(m);
            break;
        }
        inconn_t *c = t->in_of[peer];
        if ((c && c->closed) || (!c && t->out_broken[peer] &&
                                 sock_now_ns() - t->out_broken_ns[peer] > CLOSE_GRACE_NS)) {
            res =
                ERR(MSCCLPP_ERR_REMOTE, "rank %d: connection to rank %d closed while receiving %s",
                    t->rank, peer, what_str(kind, tag, what, sizeof what));
            break;
        }
        if (sock_now_ns() >= deadline) {
            res = ERR(MSCCLPP_ERR_TIMEOUT,
                      "rank %d: timed out after %.1f s waiting to receive %s from rank %d", t->rank,
                      timeout_s(), what_str(kind, tag, what, sizeof what), peer);
            break;
        }
        CHECK_GOTO(progress(t, sock_poll_ms(deadline, 10), -1, NULL), res, unlock);
        /* Let other threads of this rank in between polls. */
        pthread_mutex_unlock(&t->lock);
        sched_yield();
        pthread_mutex_lock(&t->lock);
    }
unlock:
    pthread_mutex_unlock(&t->lock);
    return res;
}

/* Connect to `peer` and send the handshake (lock held). */
static mscclpp_result_t connect_peer(tcp_t *t, int peer, uint64_t deadline)
{
    char a[80];
    int fd;
    sock_status_t st = sock_connect(&t->addrs[peer], deadline, &fd);
    if (st == SOCK_TIMEOUT)
        return ERR(MSCCLPP_ERR_TIMEOUT,
                   "rank %d: timed out after %.1f s connecting to rank %d at %s", t->rank,
                   timeout_s(), peer, sock_addr_str(&t->addrs[peer], a, sizeof a));
    if (st != SOCK_OK)
        return ERR(MSCCLPP_ERR_REMOTE, "rank %d: cannot connect to rank %d at %s: %m", t->rank,
                   peer, sock_addr_str(&t->addrs[peer], a, sizeof a));
    unsigned char h[HS_BYTES] = {0};
    memcpy(h, CONN_MAGIC, 8);
    sock_put_u16(h + 8, PROTO_VERSION);
    memcpy(h + 12, t->secret, SECRET_BYTES);
    sock_put_u32(h + 44, (uint32_t)t->rank);
    sock_put_u32(h + 48, (uint32_t)t->nranks);
    st = sock_send_all(fd, h, sizeof h, deadline);
    if (st != SOCK_OK) {
        sock_close(fd);
        return ERR(st == SOCK_TIMEOUT ? MSCCLPP_ERR_TIMEOUT : MSCCLPP_ERR_REMOTE,
                   "rank %d: handshake with rank %d failed", t->rank, peer);
    }
    t->out_fd[peer] = fd;
    return MSCCLPP_OK;
}

/* Write all of buf to peer, driving inbound traffic while the socket is full (lock held). */
static mscclpp_result_t write_peer(tcp_t *t, int peer, const void *buf, size_t bytes,
                                   uint64_t deadline, const char *what)
{
    size_t done = 0;
    while (done < bytes) {
        sock_status_t st = SOCK_OK;
        ssize_t n = t->out_broken[peer] ? (st = SOCK_CLOSED, -1)
                                        : sock_send_some(t->out_fd[peer], (const char *)buf + done,
                                                         bytes - done, &st);
        if (n < 0) {
            mark_broken(t, peer);
            if (st == SOCK_SYSERR)
                return ERR(MSCCLPP_ERR_REMOTE, "rank %d: sending %s to rank %d: %m", t->rank, what,
                           peer);
            return ERR(MSCCLPP_ERR_REMOTE, "rank %d: connection to rank %d closed while sending %s",
                       t->rank, peer, what);
        }
        done += (size_t)n;
        if (done == bytes) break;
        if (n == 0) {
            if (sock_now_ns() >= deadline) {
                mark_broken(t, peer); /* a partial frame is on the wire */
                return ERR(MSCCLPP_ERR_TIMEOUT,
                           "rank %d: timed out after %.1f s sending %s to rank %d", t->rank,
                           timeout_s(), what, peer);
            }
            int writable;
            CHECK(progress(t, sock_poll_ms(deadline, 10), peer, &writable));
        }
    }
    return MSCCLPP_OK;
}

static mscclpp_result_t tcp_send_kind(tcp_t *t, const void *data, size_t bytes, int peer,
                                      uint32_t kind, int tag, uint64_t deadline)
{
    char what[40];
    what_str(kind, tag, what, sizeof what);
    mscclpp_result_t res = MSCCLPP_OK;
    pthread_mutex_lock(&t->lock);
    if (t->out_broken[peer]) {
        res = ERR(MSCCLPP_ERR_REMOTE, "rank %d: connection to rank %d was lost; cannot send %s",
                  t->rank, peer, what);
        goto unlock;
    }
    if (t->out_fd[peer] < 0) CHECK_GOTO(connect_peer(t, peer, deadline), res, unlock);
    unsigned char hdr[FRAME_HDR_BYTES];
    sock_put_u32(hdr, kind);
    sock_put_u32(hdr + 4, (uint32_t)tag);
    sock_put_u64(hdr + 8, bytes);
    CHECK_GOTO(write_peer(t, peer, hdr, sizeof hdr, deadline, what), res, unlock);
    if (bytes) CHECK_GOTO(write_peer(t, peer, data, bytes, deadline, what), res, unlock);
unlock:
    pthread_mutex_unlock(&t->lock);
    return res;
}

static mscclpp_result_t tcp_send(mscclpp_bootstrap_t *boot, const void *data, size_t bytes,
                                 int peer, int tag)
{
    return tcp_send_kind(boot->impl, data, bytes, peer, KIND_USER, tag, sock_deadline());
}

static mscclpp_result_t tcp_recv(mscclpp_bootstrap_t *boot, void *data, size_t bytes, int peer,
                                 int tag)
{
    return tcp_recv_kind(boot->impl, data, bytes, peer, KIND_USER, tag, sock_deadline());
}

/* Ring all-gather: step i passes slot (rank - i) to the right and gets (rank - i - 1). */
static mscclpp_result_t ring_allgather(tcp_t *t, unsigned char *data, size_t sz, uint32_t kind)
{
    uint64_t deadline = sock_deadline();
    int n = t->nranks, right = (t->rank + 1) % n, left = (t->rank + n - 1) % n;
    for (int i = 0; i < n - 1; i++) {
        int s = (t->rank - i + n) % n, r = (t->rank - i - 1 + n) % n;
        CHECK(tcp_send_kind(t, data + (size_t)s * sz, sz, right, kind, 0, deadline));
        CHECK(tcp_recv_kind(t, data + (size_t)r * sz, sz, left, kind, 0, deadline));
    }
    return MSCCLPP_OK;
}

static mscclpp_result_t tcp_allgather(mscclpp_bootstrap_t *boot, void *data, size_t bytes_per_rank)
{
    return ring_allgather(boot->impl, data, bytes_per_rank, KIND_ALLGATHER);
}

static mscclpp_result_t tcp_barrier(mscclpp_bootstrap_t *boot)
{
    tcp_t *t = boot->impl;
    unsigned char *b = calloc((size_t)t->nranks, 1);
    if (!b) return ERR(MSCCLPP_ERR_NO_MEMORY, "rank %d: out of memory", t->rank);
    b[t->rank] = 1;
    mscclpp_result_t res = ring_allgather(t, b, 1, KIND_BARRIER);
    for (int i = 0; res == MSCCLPP_OK && i < t->nranks; i++)
        if (b[i] != 1)
            res =
                ERR(MSCCLPP_ERR_INTERNAL, "rank %d: barrier got no mark from rank %d", t->rank, i);
    free(b);
    return res;
}

static void tcp_free(tcp_t *t)
{
    if (!t) return;
    for (int i = 0; i < t->nin; i++)
        if (t->in[i]->peer < 0) inconn_free(t->in[i]);
    for (int p = 0; p < t->nranks; p++) {
        if (t->in_of && t->in_of[p]) inconn_free(t->in_of[p]);
        if (t->out_fd) sock_close(t->out_fd[p]);
        for (msg_t *m = t->qhead ? t->qhead[p] : NULL, *nx; m; m = nx) {
            nx = m->next;
            TRACE(SUBSYS_BOOT, "rank %d: dropping an unreceived message from rank %d (%zu bytes)",
                  t->rank, p, m->len);
            free(m->data);
            free(m);
        }
    }
    sock_close(t->lfd);
    free(t->in);
    free(t->pfd);
    free(t->addrs);
    free(t->out_fd);
    free(t->out_broken);
    free(t->out_broken_ns);
    free(t->in_of);
    free(t->qhead);
    free(t->qtail);
    pthread_mutex_destroy(&t->lock);
    free(t);
}

static mscclpp_result_t tcp_destroy(mscclpp_bootstrap_t *boot)
{
    tcp_free(boot->impl);
    boot->impl = NULL;
    return MSCCLPP_OK;
}

static const boot_ops_t tcp_ops = {
    .name = "tcp",
    .allgather = tcp_allgather,
    .send = tcp_send,
    .recv = tcp_recv,
    .barrier = tcp_barrier,
    .destroy = tcp_destroy,
};

/* ---------------------------------------------------------------------------------------------
 * Joining a session
 * ------------------------------------------------------------------------------------------- */

static tcp_t *tcp_alloc(int rank, int nranks)
{
    tcp_t *t = calloc(1, sizeof *t);
    if (!t) return NULL;
    pthread_mutex_init(&t->lock, NULL);
    t->rank = rank;
    t->nranks = nranks;
    t->lfd = -1;
    size_t n = (size_t)nranks;
    t->addrs = calloc(n, sizeof *t->addrs);
    t->out_fd = malloc(n * sizeof *t->out_fd);
    t->out_broken = calloc(n, sizeof *t->out_broken);
    t->out_broken_ns = calloc(n, sizeof *t->out_broken_ns);
    t->in_of = calloc(n, sizeof *t->in_of);
    t->qhead = calloc(n, sizeof *t->qhead);
    t->qtail = calloc(n, sizeof *t->qtail);
    if (!t->addrs || !t->out_fd || !t->out_broken || !t->out_broken_ns || !t->in_of || !t->qhead ||
        !t->qtail) {
        tcp_free(t);
        return NULL;
    }
    for (int i = 0; i < nranks; i++) t->out_fd[i] = -1;
    return t;
}

static const char *reply_reason(uint32_t status)
{
    switch (status) {
    case REPLY_BAD_SECRET: return "wrong secret (the unique id is not this session's)";
    case REPLY_BAD_RANK: return "rank already taken or out of range";
    case REPLY_BAD_NRANKS: return "nranks differs from the other ranks'";
    default: return "unknown reason";
    }
}

/*
 * Join the session served at `root` with `secret`. `ifname` (optional) names the interface for
 * this rank's listener; otherwise the local address that reaches the root is used.
 */
static mscclpp_result_t tcp_join(const sock_addr_t *root, const unsigned char *secret,
                                 const char *ifname, int rank, int nranks,
                                 mscclpp_bootstrap_t **boot)
{
    char where[80];
    sock_addr_str(root, where, sizeof where);
    uint64_t deadline = sock_deadline();
    mscclpp_result_t res = MSCCLPP_OK;
    tcp_t *t = tcp_alloc(rank, nranks);
    if (!t) return ERR(MSCCLPP_ERR_NO_MEMORY, "rank %d: out of memory for %d ranks", rank, nranks);
    memcpy(t->secret, secret, SECRET_BYTES);

    sock_addr_t me;
    if (ifname && *ifname) CHECK_GOTO(sock_if_addr(ifname, &me), res, free_t);
    int rfd = -1;
    sock_status_t st = sock_connect(root, deadline, &rfd);
    if (st == SOCK_TIMEOUT) {
        res = ERR(MSCCLPP_ERR_TIMEOUT, "rank %d: bootstrap root %s not reachable within %.1f s",
                  rank, where, timeout_s());
        goto free_t;
    }
    if (st != SOCK_OK) {
        res = ERR(MSCCLPP_ERR_REMOTE, "rank %d: connecting to bootstrap root %s: %m", rank, where);
        goto free_t;
    }

    if (!(ifname && *ifname)) {
        me.len = sizeof me.u;
        if (getsockname(rfd, &me.u.sa, &me.len) != 0) {
            res = ERR_SYS("rank %d: getsockname: %m", rank);
            goto close_root;
        }
        sock_addr_set_port(&me, 0);
    }
    CHECK_GOTO(sock_listen(&me, 0, &t->lfd), res, close_root);

    unsigned char h[HELLO_BYTES] = {0};
    memcpy(h, HELLO_MAGIC, 8);
    sock_put_u16(h + 8, PROTO_VERSION);
    memcpy(h + 12, secret, SECRET_BYTES);
    sock_put_u32(h + 44, (uint32_t)rank);
    sock_put_u32(h + 48, (uint32_t)nranks);
    sock_addr_encode(&me, h + 52);
    st = sock_send_all(rfd, h, sizeof h, deadline);
    unsigned char r[REPLY_BYTES];
    if (st == SOCK_OK) st = sock_recv_all(rfd, r, sizeof r, deadline);
    if (st == SOCK_TIMEOUT) {
        res = ERR(MSCCLPP_ERR_TIMEOUT,
                  "rank %d: timed out after %.1f s waiting for the bootstrap root %s (%d ranks)",
                  rank, timeout_s(), where, nranks);
        goto close_root;
    }
    if (st != SOCK_OK) {
        res = ERR(MSCCLPP_ERR_REMOTE, "rank %d: bootstrap root %s closed the connection", rank,
                  where);
        goto close_root;
    }
    uint32_t status = sock_get_u32(r + 8);
    if (memcmp(r, REPLY_MAGIC, 8) != 0) {
        res = ERR(MSCCLPP_ERR_REMOTE, "rank %d: bootstrap root %s sent a malformed reply", rank,
                  where);
        goto close_root;
    }
    if (status == REPLY_TIMEOUT) {
        res = ERR(MSCCLPP_ERR_TIMEOUT,
                  "rank %d: bootstrap root %s gave up: %u of %d ranks joined within its timeout",
                  rank, where, sock_get_u32(r + 16), nranks);
        goto close_root;
    }
    if (status != REPLY_OK || (int)sock_get_u32(r + 12) != nranks) {
        res = ERR(MSCCLPP_ERR_REMOTE, "rank %d: bootstrap root %s refused this rank: %s", rank,
                  where, reply_reason(status));
        goto close_root;
    }
    size_t tbytes = (size_t)nranks * SOCK_ADDR_WIRE_BYTES;
    unsigned char *table = malloc(tbytes);
    if (!table) {
        res = ERR(MSCCLPP_ERR_NO_MEMORY, "rank %d: out of memory", rank);
        goto close_root;
    }
    st = sock_recv_all(rfd, table, tbytes, deadline);
    if (st != SOCK_OK) {
        res = ERR(st == SOCK_TIMEOUT ? MSCCLPP_ERR_TIMEOUT : MSCCLPP_ERR_REMOTE,
                  "rank %d: incomplete address table from bootstrap root %s", rank, where);
        goto free_table;
    }
    for (int i = 0; i < nranks; i++)
        CHECK_GOTO(sock_addr_decode(table + (size_t)i * SOCK_ADDR_WIRE_BYTES, &t->addrs[i]), res,
                   free_table);
    CHECK_GOTO(boot_new(rank, nranks, &tcp_ops, t, boot), res, free_table);
    char mine[80];
    INFO(SUBSYS_BOOT, "rank %d of %d: joined bootstrap %s, listening on %s", rank, nranks, where,
         sock_addr_str(&me, mine, sizeof mine));
    free(table);
    sock_close(rfd);
    return MSCCLPP_OK;

free_table:
    free(table);
close_root:
    sock_close(rfd);
free_t:
    tcp_free(t);
    return res;
}

/* ---------------------------------------------------------------------------------------------
 * Unique id and address forms
 * ------------------------------------------------------------------------------------------- */

/* MSCCLPP_MASTER_PORT, or `def` when unset. */
static mscclpp_result_t master_port(int def, int *port)
{
    *port = def;
    if (!config_is_set(CFG_MSCCLPP_MASTER_PORT) || !*config_get(CFG_MSCCLPP_MASTER_PORT))
        return MSCCLPP_OK;
    int64_t v = config_get_int(CFG_MSCCLPP_MASTER_PORT);
    if (v < 0 || v > 65535)
        return ERR_ARG("MSCCLPP_MASTER_PORT=\"%s\" is not a port number",
                       config_get(CFG_MSCCLPP_MASTER_PORT));
    *port = (int)v;
    return MSCCLPP_OK;
}

/* "ip", "ip:port", "[ip6]:port" or a bare IPv6 address. */
static mscclpp_result_t parse_master_addr(const char *text, sock_addr_t *addr)
{
    const char *c1 = strchr(text, ':');
    if (text[0] == '[' || (c1 && !strchr(c1 + 1, ':'))) return sock_addr_parse_hostport(text, addr);
    return sock_addr_parse(text, 0, addr);
}

mscclpp_result_t boot_tcp_unique_id(mscclpp_unique_id_t *id)
{
    sock_addr_t addr;
    int port = 0;
    const char *ifname = config_get(CFG_MSCCLPP_SOCKET_IFNAME);
    const char *master = config_get(CFG_MSCCLPP_MASTER_ADDR);
    if (*ifname) {
        CHECK(sock_if_addr(ifname, &addr));
    } else if (*master) {
        CHECK(parse_master_addr(master, &addr));
        port = sock_addr_port(&addr);
    } else {
        CHECK(sock_default_addr(&addr));
    }
    CHECK(master_port(port, &port));
    sock_addr_set_port(&addr, port);

    unsigned char secret[SECRET_BYTES];
    CHECK(random_secret(secret));
    int lfd;
    CHECK(sock_listen(&addr, port != 0, &lfd));
    CHECK(root_start(lfd, &addr, secret, NULL));

    memset(id, 0, sizeof *id);
    unsigned char *u = (unsigned char *)id->internal;
    memcpy(u, UID_MAGIC, 8);
    sock_put_u16(u + 8, UID_VERSION);
    sock_addr_encode(&addr, u + UID_ADDR_OFF);
    memcpy(u + UID_SECRET_OFF, secret, SECRET_BYTES);
    char a[80];
    INFO(SUBSYS_BOOT, "bootstrap root listening on %s", sock_addr_str(&addr, a, sizeof a));
    return MSCCLPP_OK;
}

mscclpp_result_t boot_tcp_create(const mscclpp_unique_id_t *id, int rank, int nranks,
                                 mscclpp_bootstrap_t **boot)
{
    const unsigned char *u = (const unsigned char *)id->internal;
    if (memcmp(u, UID_MAGIC, 8) != 0)
        return ERR_ARG("rank %d: not a unique id from mscclpp_get_unique_id (bad magic)", rank);
    if (sock_get_u16(u + 8) != UID_VERSION)
        return ERR_ARG("rank %d: unique id version %u is not supported (expected %d)", rank,
                       sock_get_u16(u + 8), UID_VERSION);
    sock_addr_t root;
    if (sock_addr_decode(u + UID_ADDR_OFF, &root) != MSCCLPP_OK)
        return ERR_ARG("rank %d: unique id holds no valid root address", rank);
    return tcp_join(&root, u + UID_SECRET_OFF, config_get(CFG_MSCCLPP_SOCKET_IFNAME), rank, nranks,
                    boot);
}

mscclpp_result_t boot_tcp_create_from_address(const char *address, int rank, int nranks,
                                              mscclpp_bootstrap_t **boot)
{
    char text[256];
    if (address) {
        if (strlen(address) >= sizeof text) return ERR_ARG("bootstrap address is too long");
        snprintf(text, sizeof text, "%s", address);
    } else {
        const char *m = config_get(CFG_MSCCLPP_MASTER_ADDR);
        if (!*m) return ERR_ARG("no bootstrap address given and MSCCLPP_MASTER_ADDR is not set");
        if (strlen(m) >= sizeof text - 8) return ERR_ARG("MSCCLPP_MASTER_ADDR is too long");
        snprintf(text, sizeof text, "%s", m);
    }

    /* "interface:ip:port" when the first field is followed by an IPv4 ip:port or [ip6]:port. */
    char ifname[64] = "";
    char *host = text;
    char *c1 = strchr(text, ':');
    int colons = 0;
    for (const char *p = text; *p; p++) colons += *p == ':';
    if (text[0] != '[' && c1 && (c1[1] == '[' || colons == 2)) {
        size_t n = (size_t)(c1 - text);
        if (n == 0 || n >= sizeof ifname) return ERR_ARG("\"%s\": bad interface name", text);
        memcpy(ifname, text, n);
        host = c1 + 1;
    }
    sock_addr_t root;
    if (!address) {
        CHECK(parse_master_addr(host, &root));
        int port;
        CHECK(master_port(sock_addr_port(&root), &port));
        sock_addr_set_port(&root, port);
    } else {
        CHECK(sock_addr_parse_hostport(host, &root));
    }
    if (sock_addr_port(&root) == 0)
        return ERR_ARG("bootstrap address \"%s\" needs a port (or MSCCLPP_MASTER_PORT)", text);

    char canon[80];
    sock_addr_str(&root, canon, sizeof canon);
    unsigned char secret[SECRET_BYTES];
    derive_secret(canon, secret);
    const char *my_if = *ifname ? ifname : config_get(CFG_MSCCLPP_SOCKET_IFNAME);
    if (rank != 0) return tcp_join(&root, secret, my_if, rank, nranks, boot);

    int lfd;
    pthread_t thread;
    sock_addr_t bound = root;
    CHECK(sock_listen(&bound, 1, &lfd));
    CHECK(root_start(lfd, &bound, secret, &thread));
    mscclpp_result_t res = tcp_join(&root, secret, my_if, rank, nranks, boot);
    if (res == MSCCLPP_OK)
        pthread_join(thread, NULL); /* it is done sending the table */
    else
        pthread_detach(thread); /* it stops by its own deadline */
    return res;
}
