/*
 * TCP bootstrap.
 *
 * Session setup: a root service (a thread in the process that created the unique id, or in rank
 * 0 for the address form) serves all connections at once with poll(). Each rank sends a hello
 * (secret, rank, nranks, its own listen address); connections that send none within
 * MSCCLPP_BOOTSTRAP_HANDSHAKE_TIMEOUT, or beyond MSCCLPP_BOOTSTRAP_MAX_PENDING, are dropped; the
 * root refuses wrong secrets, duplicate or out-of-range ranks and joiners whose nranks differs
 * from the session's, and once every rank has joined sends each one the table of listen
 * addresses. When it gives up it names the ranks that never came.
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
 * waiting in recv drops it between polls so other threads can send. A peer whose listener refuses
 * connections is gone (its listener existed before the root sent its address): that fails after
 * a short grace, not at the timeout. A rank that fails because of a peer sends the others an abort
 * notice naming that peer, so that ranks waiting on it blame the dead rank, not the messenger.
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
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
#define PROTO_VERSION 3 /* 3: KIND_BYE */
#define MAX_RANKS (1 << 20)
#define MAX_FRAME_BYTES (1ull << 40)
/* A message buffer starts this large and doubles as its bytes arrive. */
#define MSG_FIRST_BYTES (64u << 10)
/*
 * A peer that closed our connection to it may still have data for us on a connection we have
 * not accepted yet (two TCP connections are not ordered): wait this long for it to show up.
 */
#define CLOSE_GRACE_NS 1000000000ull
/* A failing rank waits this long for the abort notice of the peer it blames (judge). */
#define NOTICE_WAIT_NS 300000000ull
/* A failing rank whose peer is alive looks for a dead rank among at most this many ranks it has
 * no connection with (find_dead), each probe bounded by PROBE_CONNECT_NS, all by this long. */
#define DEAD_PROBES 64
#define DEAD_BUDGET_NS 1000000000ull
/* A receive from a peer with no connection either way probes it this often (tcp_recv_kind),
 * each connect bounded by PROBE_CONNECT_NS. */
#define PROBE_NS 1000000000ull
#define PROBE_CONNECT_NS (REFUSED_GRACE_NS + 200000000ull)
#define QUIET_ERR(result, ...) core_error_quiet((result), __VA_ARGS__)
/* A joiner waits this long past its own timeout for the root's verdict. */
#define REPLY_GRACE_NS 500000000ull

/*
 * Unique id (128 bytes):   0 magic[8] | 8 version u16 | 10 reserved u16 | 12 root address[20] |
 *                          32 secret[32] | 64 zero[64]
 * Hello (rank -> root):    0 magic[8] | 8 version u16 | 10 reserved u16 | 12 secret[32] |
 *                          44 rank u32 | 48 nranks u32 | 52 listen address[20]        = 72 bytes
 * Reply (root -> rank):    0 magic[8] | 8 status u32 | 12 nranks u32 | 16 joined u32 |
 *                          20 session nranks u32 (0: not known)                    = 24 bytes,
 *                          then, when status is OK, nranks addresses[20]; when TIMEOUT, a
 *                          bitmap of the joined ranks, (nranks + 7) / 8 bytes, bit i%8 of byte i/8
 * Handshake (peer conn):   0 magic[8] | 8 version u16 | 10 reserved u16 | 12 secret[32] |
 *                          44 rank u32 | 48 nranks u32                                 = 52 bytes
 * Frame:                   0 kind u32 | 4 tag u32 | 8 length u64 | payload             = 16 + len
 *                          (kinds below); a connection carries frames from the rank that
 *                          connected, and back the other way only a goodbye (KIND_BYE)
 * All integers big-endian; addresses as in sock_addr_encode.
 */
#define UID_ADDR_OFF 12
#define UID_SECRET_OFF 32
#define HELLO_BYTES 72
#define REPLY_BYTES 24
#define HS_BYTES 52
#define FRAME_HDR_BYTES 16

enum {
    REPLY_OK = 0,
    REPLY_BAD_SECRET = 1,
    REPLY_BAD_RANK = 2,
    REPLY_BAD_NRANKS = 3,
    REPLY_TIMEOUT = 4,
    REPLY_COMPLETE = 5
};
/* KIND_ABORT: a rank that failed because of a peer tells the others (tag: that peer, payload:
   its error message), so that ranks waiting on the reporter do not blame the reporter.
   KIND_BYE: a rank that leaves normally (tcp_destroy) tells the ranks it has a connection with
   (tag 0, no payload), so that a failing rank does not take it for a rank that died. */
enum {
    KIND_USER = 0,
    KIND_ALLGATHER = 1,
    KIND_BARRIER = 2,
    KIND_ABORT = 3,
    KIND_BYE = 4,
    KIND_COUNT
};
#define ABORT_MAX_BYTES 1024
#define NOTICE_MSG_BYTES 256 /* of a notice's message, kept */

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
 * Settings shared by the root and the ranks' listeners
 * ------------------------------------------------------------------------------------------- */

/* How long a fresh connection may take to send its hello or handshake (a rank sends it at once). */
static uint64_t handshake_ns(void)
{
    const char *v = config_get(CFG_MSCCLPP_BOOTSTRAP_HANDSHAKE_TIMEOUT);
    char *end = NULL;
    double s = strtod(v, &end);
    if (end == v || *end != '\0' || !(s > 0) || s > 3600) s = 2;
    return (uint64_t)(s * 1e9);
}

/* Connections held before their hello or handshake is complete. */
static int max_pending(void)
{
    int64_t v = config_get_int(CFG_MSCCLPP_BOOTSTRAP_MAX_PENDING);
    return v < 1 ? 1 : v > 100000 ? 100000 : (int)v;
}

/* "2, 5-7, 9" for the ranks whose bit is clear in `bits`, cut with "..." to fit `cap`. */
static const char *missing_str(const unsigned char *bits, uint32_t n, char *buf, size_t cap)
{
    size_t len = 0;
    buf[0] = '\0';
    for (uint32_t i = 0; i < n; i++) {
        if (bits[i / 8] & (1u << (i % 8))) continue;
        uint32_t j = i;
        while (j + 1 < n && !(bits[(j + 1) / 8] & (1u << ((j + 1) % 8)))) j++;
        char one[32];
        if (j == i)
            snprintf(one, sizeof one, "%s%u", len ? ", " : "", i);
        else
            snprintf(one, sizeof one, "%s%u-%u", len ? ", " : "", i, j);
        if (len + strlen(one) + 5 >= cap) {
            snprintf(buf + len, cap - len, ", ...");
            break;
        }
        len += (size_t)snprintf(buf + len, cap - len, "%s", one);
        i = j;
    }
    return buf;
}

/* ---------------------------------------------------------------------------------------------
 * Root service
 *
 * One thread serves all connections at once with poll(): a fresh connection must complete its
 * hello within the handshake timeout, and at most MSCCLPP_BOOTSTRAP_MAX_PENDING of them are
 * held (the oldest is dropped beyond that), so silent or slow clients cost neither time nor
 * file descriptors. Authenticated joiners are grouped by the nranks they claim; each group
 * completes on its own, so a joiner that claims another size (a stale job, a "1-rank" squatter
 * holding the id) never locks the real ranks out. When a rank of this process joins, its nranks
 * is authoritative: joiners that disagree are refused at once, and the service ends as soon as
 * that group is complete. Without one it serves until its deadline.
 * ------------------------------------------------------------------------------------------- */

#define ROOT_MAX_GROUPS 4

typedef struct {
    int fd;
    uint64_t hs_deadline; /* the hello must be complete by then */
    size_t got;
    unsigned char hello[HELLO_BYTES];
} rpend_t;

typedef struct {
    uint32_t nranks;
    uint32_t joined;
    int *fd_of; /* per rank: its connection, -1 until it joined */
    unsigned char *table;
    unsigned char *bits; /* per rank: joined */
    int done;
} rgroup_t;

typedef struct root {
    struct root *next; /* registry of this process's roots */
    int lfd;
    sock_addr_t addr;
    char where[80];
    unsigned char secret[SECRET_BYTES];
    uint64_t deadline;
    _Atomic uint32_t expect; /* nranks of a rank of this process (0: none joined) */
    rpend_t *pend;           /* oldest first */
    int npend, max_pend;
    uint64_t hs_ns;
    unsigned long dropped_cap, dropped_slow; /* not yet logged */
    uint64_t last_drop_log;
    rgroup_t groups[ROOT_MAX_GROUPS];
    int ngroups;
    int finished;
} root_t;

static pthread_mutex_t roots_lock = PTHREAD_MUTEX_INITIALIZER;
static root_t *roots;
static pthread_once_t roots_once = PTHREAD_ONCE_INIT;

/* The registry lock must not be held by a vanished thread in a child; its roots have no thread. */
static void roots_prepare(void) { pthread_mutex_lock(&roots_lock); }
static void roots_parent(void) { pthread_mutex_unlock(&roots_lock); }
static void roots_child(void)
{
    roots = NULL;
    pthread_mutex_unlock(&roots_lock);
}
static void roots_init(void) { pthread_atfork(roots_prepare, roots_parent, roots_child); }

/* A rank of this process is joining the session of `secret` with `nranks`: tell its root. */
static void roots_expect(const unsigned char *secret, int nranks)
{
    pthread_once(&roots_once, roots_init);
    pthread_mutex_lock(&roots_lock);
    for (root_t *r = roots; r; r = r->next) {
        if (!secret_equal(r->secret, secret)) continue;
        uint32_t zero = 0;
        atomic_compare_exchange_strong(&r->expect, &zero, (uint32_t)nranks);
    }
    pthread_mutex_unlock(&roots_lock);
}

/*
 * A rank of this process timed out joining the session of `secret`. If this process also
 * serves that session's root, the root may still be answering the other ranks (which names the
 * missing ones); the caller is about to report and, likely, exit, which would cut those answers
 * off ("bootstrap root closed the connection", issue 22 item 5): wait, bounded, for it to end.
 */
static void roots_let_answer(const unsigned char *secret)
{
    uint64_t end = sock_now_ns() + 2000000000ull;
    for (;;) {
        bool serving = false;
        pthread_once(&roots_once, roots_init);
        pthread_mutex_lock(&roots_lock);
        for (root_t *r = roots; r && !serving; r = r->next)
            serving = secret_equal(r->secret, secret);
        pthread_mutex_unlock(&roots_lock);
        if (!serving || sock_now_ns() >= end) return;
        struct timespec ts = {0, 5000000};
        nanosleep(&ts, NULL);
    }
}

static void reply_status(int fd, uint32_t status, uint32_t nranks, uint32_t joined,
                         uint32_t session, const unsigned char *bits)
{
    unsigned char r[REPLY_BYTES];
    memcpy(r, REPLY_MAGIC, 8);
    sock_put_u32(r + 8, status);
    sock_put_u32(r + 12, nranks);
    sock_put_u32(r + 16, joined);
    sock_put_u32(r + 20, session);
    /* Short: a client that does not read its refusal must not hold the service up. */
    uint64_t deadline = sock_now_ns() + 200000000ull;
    if (sock_send_all(fd, r, sizeof r, deadline) == SOCK_OK && bits)
        (void)sock_send_all(fd, bits, (nranks + 7) / 8, deadline);
}

static const char *peer_str(int fd, char *buf, size_t cap)
{
    sock_addr_t a;
    a.len = sizeof a.u;
    if (getpeername(fd, &a.u.sa, &a.len) != 0) return "(unknown peer)";
    return sock_addr_str(&a, buf, cap);
}

static void pend_remove(root_t *r, int i)
{
    memmove(&r->pend[i], &r->pend[i + 1], sizeof *r->pend * (size_t)(r->npend - i - 1));
    r->npend--;
}

/* Log dropped connections at most once a second: a flood must not become a flood of logs. */
static void log_drops(root_t *r, int force)
{
    if (!r->dropped_cap && !r->dropped_slow) return;
    uint64_t now = sock_now_ns();
    if (!force && now - r->last_drop_log < 1000000000ull) return;
    WARN(SUBSYS_BOOT,
         "bootstrap root %s: dropped %lu connection(s) with no hello within %.1f s and %lu over "
         "the limit of %d pending (MSCCLPP_BOOTSTRAP_HANDSHAKE_TIMEOUT, "
         "MSCCLPP_BOOTSTRAP_MAX_PENDING)",
         r->where, r->dropped_slow, (double)r->hs_ns / 1e9, r->dropped_cap, r->max_pend);
    r->dropped_cap = r->dropped_slow = 0;
    r->last_drop_log = now;
}

static void group_free(rgroup_t *g)
{
    for (uint32_t i = 0; g->fd_of && i < g->nranks; i++) sock_close(g->fd_of[i]);
    free(g->fd_of);
    free(g->table);
    free(g->bits);
    memset(g, 0, sizeof *g);
}

/* Refuse every member of group g with `status` and forget the group. */
static void group_refuse(root_t *r, rgroup_t *g, uint32_t status, uint32_t session)
{
    for (uint32_t i = 0; i < g->nranks; i++) {
        if (g->fd_of[i] < 0) continue;
        reply_status(g->fd_of[i], status, g->nranks, g->joined, session,
                     status == REPLY_TIMEOUT ? g->bits : NULL);
    }
    group_free(g);
}

static void group_complete(root_t *r, rgroup_t *g)
{
    unsigned char hdr[REPLY_BYTES];
    memcpy(hdr, REPLY_MAGIC, 8);
    sock_put_u32(hdr + 8, REPLY_OK);
    sock_put_u32(hdr + 12, g->nranks);
    sock_put_u32(hdr + 16, g->joined);
    sock_put_u32(hdr + 20, g->nranks);
    uint64_t deadline = sock_deadline();
    size_t tbytes = (size_t)g->nranks * SOCK_ADDR_WIRE_BYTES;
    for (uint32_t i = 0; i < g->nranks; i++) {
        if (sock_send_all(g->fd_of[i], hdr, sizeof hdr, deadline) != SOCK_OK ||
            sock_send_all(g->fd_of[i], g->table, tbytes, deadline) != SOCK_OK)
            WARN(SUBSYS_BOOT, "bootstrap root %s: could not send the table to rank %u: %m",
                 r->where, i);
    }
    INFO(SUBSYS_BOOT, "bootstrap root %s: all %u ranks joined", r->where, g->nranks);
    for (uint32_t i = 0; i < g->nranks; i++) {
        sock_close(g->fd_of[i]);
        g->fd_of[i] = -1;
    }
    g->done = 1;
}

/* A complete hello on `fd` (taken over from the pending list). */
static void root_hello(root_t *r, int fd, const unsigned char *h)
{
    char who[80];
    uint32_t expect = atomic_load(&r->expect);
    if (memcmp(h, HELLO_MAGIC, 8) != 0 || sock_get_u16(h + 8) != PROTO_VERSION ||
        !secret_equal(h + 12, r->secret)) {
        WARN(SUBSYS_BOOT, "bootstrap root %s: refused %s: wrong secret or protocol", r->where,
             peer_str(fd, who, sizeof who));
        reply_status(fd, REPLY_BAD_SECRET, 0, 0, 0, NULL);
        sock_close(fd);
        return;
    }
    uint32_t rank = sock_get_u32(h + 44), n = sock_get_u32(h + 48);
    rgroup_t *g = NULL;
    for (int i = 0; i < r->ngroups; i++)
        if (r->groups[i].nranks == n) g = &r->groups[i];
    uint32_t status = REPLY_OK;
    if (n < 1 || n > MAX_RANKS || (expect && n != expect)) {
        status = REPLY_BAD_NRANKS;
    } else if (g && g->done) {
        status = REPLY_COMPLETE;
    } else if (rank >= n || (g && g->fd_of[rank] >= 0)) {
        status = REPLY_BAD_RANK;
    } else if (!g && r->ngroups == ROOT_MAX_GROUPS) {
        status = REPLY_BAD_NRANKS;
    } else if (!g) {
        g = &r->groups[r->ngroups];
        g->nranks = n;
        g->fd_of = malloc(sizeof *g->fd_of * n);
        g->table = calloc(n, SOCK_ADDR_WIRE_BYTES);
        g->bits = calloc((n + 7) / 8, 1);
        if (!g->fd_of || !g->table || !g->bits) {
            WARN(SUBSYS_BOOT, "bootstrap root %s: out of memory for %u ranks", r->where, n);
            group_free(g);
            reply_status(fd, REPLY_TIMEOUT, n, 0, 0, NULL);
            sock_close(fd);
            return;
        }
        for (uint32_t i = 0; i < n; i++) g->fd_of[i] = -1;
        r->ngroups++;
    }
    if (status != REPLY_OK) {
        WARN(SUBSYS_BOOT, "bootstrap root %s: refused rank %u of %u from %s: %s", r->where,
             rank, n, peer_str(fd, who, sizeof who),
             status == REPLY_BAD_NRANKS ? "nranks differs from the session's"
             : status == REPLY_COMPLETE ? "that session is complete already"
             : rank >= n                ? "rank out of range"
                                        : "rank already joined");
        reply_status(fd, status, n, g ? g->joined : 0, expect, NULL);
        sock_close(fd);
        return;
    }
    g->fd_of[rank] = fd;
    memcpy(g->table + (size_t)rank * SOCK_ADDR_WIRE_BYTES, h + 52, SOCK_ADDR_WIRE_BYTES);
    g->bits[rank / 8] |= (unsigned char)(1u << (rank % 8));
    g->joined++;
    TRACE(SUBSYS_BOOT, "bootstrap root %s: rank %u of %u joined (%u so far)", r->where, rank, n,
          g->joined);
    if (g->joined == n) {
        group_complete(r, g);
        if (expect == n) r->finished = 1;
    }
}

static void root_read(root_t *r, int i);

/* A new connection; beyond max_pend the oldest one without a hello is dropped. */
static void pend_add(root_t *r, int fd, uint64_t now)
{
    if (r->npend == r->max_pend) {
        sock_close(r->pend[0].fd);
        pend_remove(r, 0);
        r->dropped_cap++;
    }
    rpend_t *p = &r->pend[r->npend++];
    p->fd = fd;
    p->got = 0;
    p->hs_deadline = now + r->hs_ns;
    /* A rank sends its hello with the connect: take it now, before a burst of silent
       connections behind it could push it out of the pending list. */
    root_read(r, r->npend - 1);
}

/* Accept what the listener has, keeping at most max_pend connections without a hello. */
static void root_accept(root_t *r, uint64_t now)
{
    for (;;) {
        int fd;
        sock_status_t st = sock_accept(r->lfd, 0, &fd);
        if (st == SOCK_TIMEOUT) return;
        if (st != SOCK_OK) {
            if ((errno == EMFILE || errno == ENFILE) && r->npend > 0) {
                /* Out of descriptors: the oldest silent connection makes room. */
                sock_close(r->pend[0].fd);
                pend_remove(r, 0);
                r->dropped_cap++;
                continue;
            }
            WARN(SUBSYS_BOOT, "bootstrap root %s: accept failed: %m", r->where);
            struct timespec ts = {0, 10000000};
            nanosleep(&ts, NULL);
            return;
        }
        pend_add(r, fd, now);
    }
}

/* Read what pending connection i has; a complete hello leaves the list. */
static void root_read(root_t *r, int i)
{
    char who[80];
    rpend_t *p = &r->pend[i];
    sock_status_t st = SOCK_OK;
    ssize_t n = sock_recv_some(p->fd, p->hello + p->got, HELLO_BYTES - p->got, &st);
    if (n < 0) {
        TRACE(SUBSYS_BOOT, "bootstrap root %s: %s closed before its hello was complete",
              r->where, peer_str(p->fd, who, sizeof who));
        sock_close(p->fd);
        pend_remove(r, i);
        return;
    }
    p->got += (size_t)n;
    if (p->got < HELLO_BYTES) return;
    int fd = p->fd;
    unsigned char h[HELLO_BYTES];
    memcpy(h, p->hello, sizeof h);
    pend_remove(r, i);
    root_hello(r, fd, h);
}

/* The service ends (done, or at its deadline): answer whoever still waits, and let go. */
static void root_finish(root_t *r)
{
    log_drops(r, 1);
    uint32_t expect = atomic_load(&r->expect);
    for (int i = 0; i < r->ngroups; i++) {
        rgroup_t *g = &r->groups[i];
        if (g->done || !g->joined) continue;
        if (expect && g->nranks != expect) {
            group_refuse(r, g, REPLY_BAD_NRANKS, expect);
            continue;
        }
        char miss[200];
        WARN(SUBSYS_BOOT,
             "bootstrap root %s: gave up after %.1f s: %u of %u ranks joined; missing rank(s) %s",
             r->where, timeout_s(), g->joined, g->nranks,
             missing_str(g->bits, g->nranks, miss, sizeof miss));
        group_refuse(r, g, REPLY_TIMEOUT, expect);
    }
    if (!r->finished && r->ngroups == 0 && expect)
        WARN(SUBSYS_BOOT, "bootstrap root %s: gave up after %.1f s: 0 of %u ranks joined",
             r->where, timeout_s(), expect);
    for (int i = 0; i < r->ngroups; i++) group_free(&r->groups[i]);
    r->ngroups = 0;
    for (int i = 0; i < r->npend; i++) sock_close(r->pend[i].fd);
    r->npend = 0;
}

static void *root_main(void *arg)
{
    root_t *r = arg;
    struct pollfd *pfd = malloc(sizeof *pfd * (size_t)(r->max_pend + 1));
    if (!pfd) {
        WARN(SUBSYS_BOOT, "bootstrap root %s: out of memory", r->where);
        r->finished = 1;
    }
    while (!r->finished) {
        uint64_t now = sock_now_ns();
        if (now >= r->deadline) break;
        uint32_t expect = atomic_load(&r->expect);
        for (int i = 0; expect && i < r->ngroups; i++) {
            rgroup_t *g = &r->groups[i];
            if (g->nranks != expect && g->joined && !g->done) {
                WARN(SUBSYS_BOOT, "bootstrap root %s: refused %u rank(s) that claimed %u ranks: "
                                  "this session has %u", r->where, g->joined, g->nranks, expect);
                group_refuse(r, g, REPLY_BAD_NRANKS, expect);
                g->done = 1;
            }
        }
        uint64_t wake = r->deadline;
        for (int i = r->npend - 1; i >= 0; i--) {
            if (r->pend[i].hs_deadline <= now) {
                sock_close(r->pend[i].fd);
                pend_remove(r, i);
                r->dropped_slow++;
            } else if (r->pend[i].hs_deadline < wake) {
                wake = r->pend[i].hs_deadline;
            }
        }
        log_drops(r, 0);
        int np = 0;
        pfd[np++] = (struct pollfd){.fd = r->lfd, .events = POLLIN};
        for (int i = 0; i < r->npend; i++)
            pfd[np++] = (struct pollfd){.fd = r->pend[i].fd, .events = POLLIN};
        int n = poll(pfd, (nfds_t)np, sock_poll_ms(wake, 1000));
        if (n < 0 && errno != EINTR) {
            WARN(SUBSYS_BOOT, "bootstrap root %s: poll: %m", r->where);
            break;
        }
        if (n <= 0) continue;
        /* From the end: root_read removes entries (pfd[1 + i] matches pend[i] until then). */
        for (int i = np - 2; i >= 0; i--)
            if (pfd[1 + i].revents) root_read(r, i);
        if (pfd[0].revents) root_accept(r, sock_now_ns());
    }
    root_finish(r);
    pthread_mutex_lock(&roots_lock);
    for (root_t **pp = &roots; *pp; pp = &(*pp)->next)
        if (*pp == r) {
            *pp = r->next;
            break;
        }
    pthread_mutex_unlock(&roots_lock);
    sock_close(r->lfd);
    free(pfd);
    free(r->pend);
    free(r);
    return NULL;
}

/*
 * Start the root service on a bound listener; `thread` NULL detaches it. Takes `lfd`. `nranks`
 * > 0 when the caller knows the session's size (the address form, where rank 0 runs the root).
 */
static mscclpp_result_t root_start(int lfd, const sock_addr_t *addr, const unsigned char *secret,
                                   int nranks, pthread_t *thread)
{
    pthread_once(&roots_once, roots_init);
    root_t *r = calloc(1, sizeof *r);
    if (r) {
        r->max_pend = max_pending();
        r->pend = malloc(sizeof *r->pend * (size_t)r->max_pend);
    }
    if (!r || !r->pend) {
        free(r);
        sock_close(lfd);
        return ERR(MSCCLPP_ERR_NO_MEMORY, "bootstrap root: out of memory");
    }
    r->lfd = lfd;
    r->addr = *addr;
    sock_addr_str(addr, r->where, sizeof r->where);
    memcpy(r->secret, secret, SECRET_BYTES);
    r->deadline = sock_deadline();
    r->hs_ns = handshake_ns();
    atomic_init(&r->expect, (uint32_t)(nranks > 0 ? nranks : 0));
    pthread_mutex_lock(&roots_lock);
    r->next = roots;
    roots = r;
    pthread_mutex_unlock(&roots_lock);
    pthread_t t;
    int rc = pthread_create(&t, NULL, root_main, r);
    if (rc != 0) {
        errno = rc;
        mscclpp_result_t res = ERR_SYS("bootstrap root: pthread_create: %m");
        pthread_mutex_lock(&roots_lock);
        for (root_t **pp = &roots; *pp; pp = &(*pp)->next)
            if (*pp == r) {
                *pp = r->next;
                break;
            }
        pthread_mutex_unlock(&roots_lock);
        sock_close(lfd);
        free(r->pend);
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
    size_t cap; /* bytes allocated at data: grows with what arrived, not with what is announced */
    unsigned char *data;
} msg_t;

typedef struct {
    int fd;
    int peer;                    /* -1 until the handshake is verified */
    int closed;                  /* EOF or error seen */
    uint64_t hs_deadline;        /* unverified: the handshake must be complete by then */
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
    int max_pend;       /* unverified inbound connections held at most */
    uint64_t hs_ns;     /* handshake timeout */
    int refused_grace;  /* fail fast on refused connections to peers (their listeners existed) */
    int abort_sent;     /* this rank told the others about its failure */
    int *notice_of;     /* per sender: the rank its abort notice blames, -1 before one came */
    char **notice_msg;  /* per sender: that notice's message (printable) */
    int nnotices;       /* senders with a notice */
    unsigned char *gone; /* per peer: its process is gone (a connection closed, or refused) */
    unsigned char *left; /* per peer: it said goodbye (KIND_BYE): it left normally */
    unsigned char *back; /* per peer: FRAME_HDR_BYTES it wrote back on our connection to it */
    unsigned char *back_got; /* per peer: how many of them */
    int interrupted; /* atomic, read without the lock: tcp_interrupt was called */
} tcp_t;

/* The error of a wait that saw tcp_interrupt (mscclpp_comm_abort): no notice goes to the
 * peers, since no peer failed. */
static mscclpp_result_t interrupted_error(tcp_t *t, const char *doing, const char *what, int peer)
{
    return ERR(MSCCLPP_ERR_ABORTED,
               "rank %d: interrupted while %s %s %s rank %d: the communicator was aborted "
               "(mscclpp_comm_abort)",
               t->rank, doing, what, strcmp(doing, "sending") == 0 ? "to" : "from", peer);
}

static int is_interrupted(tcp_t *t) { return __atomic_load_n(&t->interrupted, __ATOMIC_ACQUIRE); }

static void mark_broken(tcp_t *t, int peer)
{
    if (!t->out_broken[peer]) t->out_broken_ns[peer] = sock_now_ns();
    t->out_broken[peer] = 1;
}

/* `peer`'s process is gone, as far as this rank has seen: a connection with it was closed or
 * reset, or its listener refused us. */
static bool peer_gone(const tcp_t *t, int peer)
{
    return t->gone[peer] || (t->in_of[peer] && t->in_of[peer]->closed);
}

/* `peer`'s process is gone and it said neither why (an abort notice: a rank that exits after
 * its own failure tells before it closes) nor goodbye (a rank that leaves normally): it died. */
static bool peer_died(const tcp_t *t, int peer)
{
    return peer_gone(t, peer) && t->notice_of[peer] < 0 && !t->left[peer];
}

/*
 * The abort notice that best explains why `suspect` (-1: none) stopped, by its sender; -1 when
 * none came. First a notice blaming a rank that died (peer_died), then the notice of `suspect`
 * itself, then any. A notice that blames this rank explains nothing here. Lock held.
 */
static int notice_score(const tcp_t *t, int from, int suspect)
{
    int c = t->notice_of[from];
    if (c < 0 || c == t->rank) return 0;
    return peer_died(t, c) ? 3 : from == suspect ? 2 : 1;
}

static int best_notice(const tcp_t *t, int suspect)
{
    int best = -1, best_score = 0;
    for (int p = 0; t->nnotices > 0 && p < t->nranks && best_score < 3; p++) {
        int score = notice_score(t, p, suspect);
        if (score > best_score) {
            best = p;
            best_score = score;
        }
    }
    return best;
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

/*
 * Drop unverified inbound connections whose handshake is late (`expire`), and the oldest ones
 * beyond max_pend: silent clients must cost neither time nor descriptors.
 */
static void drop_unverified(tcp_t *t, int expire)
{
    uint64_t now = sock_now_ns();
    int pending = 0, late = 0, over = 0;
    for (int i = 0; i < t->nin; i++) pending += t->in[i]->peer < 0;
    while (pending > t->max_pend || expire) {
        int oldest = -1;
        for (int i = 0; i < t->nin; i++) {
            inconn_t *c = t->in[i];
            if (c->peer >= 0) continue;
            if (expire && c->hs_deadline <= now) {
                oldest = i;
                late++;
                break;
            }
            if (pending > t->max_pend &&
                (oldest < 0 || c->hs_deadline < t->in[oldest]->hs_deadline))
                oldest = i;
        }
        if (oldest < 0) break;
        if (!(expire && t->in[oldest]->hs_deadline <= now)) over++;
        in_remove(t, oldest);
        pending--;
    }
    if (late || over)
        WARN(SUBSYS_BOOT, "rank %d: dropped %d connection(s) with no handshake within %.1f s and "
                          "%d over the limit of %d pending (MSCCLPP_BOOTSTRAP_HANDSHAKE_TIMEOUT, "
                          "MSCCLPP_BOOTSTRAP_MAX_PENDING)",
             t->rank, late, (double)t->hs_ns / 1e9, over, t->max_pend);
}

static mscclpp_result_t read_inbound(tcp_t *t, int i, int *removed);

static mscclpp_result_t accept_pending(tcp_t *t)
{
    for (;;) {
        int fd;
        sock_status_t st = sock_accept(t->lfd, 0, &fd);
        if (st == SOCK_TIMEOUT) return MSCCLPP_OK; /* nothing pending */
        if (st != SOCK_OK) {
            int err = errno, pending = 0;
            for (int i = 0; i < t->nin; i++) pending += t->in[i]->peer < 0;
            if ((err == EMFILE || err == ENFILE) && pending > 0) {
                /* Out of descriptors: unverified connections make room, verified ones stay. */
                int keep = t->max_pend;
                t->max_pend = pending - 1;
                drop_unverified(t, 0);
                t->max_pend = keep;
                continue;
            }
            errno = err;
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
        c->hs_deadline = sock_now_ns() + t->hs_ns;
        t->in[t->nin++] = c;
        /* A peer sends its handshake with the connect: read it now, so that a burst of silent
           connections accepted after it cannot push it out as "oldest" before it was read. */
        int removed;
        CHECK(read_inbound(t, t->nin - 1, &removed));
        drop_unverified(t, 0);
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

/* An abort notice from `from` (each rank sends one at most): kept for this rank's errors
 * (best_notice). Not a warning here: the error of a call it ends says it. */
static void note_abort(tcp_t *t, int from, const msg_t *m)
{
    if (t->notice_of[from] >= 0 || m->tag < 0 || m->tag >= t->nranks || m->tag == from) return;
    size_t n = m->len < NOTICE_MSG_BYTES - 1 ? m->len : NOTICE_MSG_BYTES - 1;
    char *msg = malloc(NOTICE_MSG_BYTES);
    if (!msg) return; /* the notice is lost; the waits end by their own bound */
    memcpy(msg, m->data, n);
    msg[n] = '\0';
    for (size_t i = 0; i < n; i++) /* it is printed: keep it printable */
        if ((unsigned char)msg[i] < 0x20 || (unsigned char)msg[i] > 0x7e) msg[i] = '?';
    t->notice_of[from] = m->tag;
    t->notice_msg[from] = msg;
    t->nnotices++;
    INFO(SUBSYS_BOOT, "rank %d: rank %d reports that it failed because of rank %d: %s", t->rank,
         from, m->tag, msg);
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
                uint32_t kind = sock_get_u32(c->hdr);
                if (len > MAX_FRAME_BYTES || kind >= KIND_COUNT ||
                    (kind == KIND_ABORT && len > ABORT_MAX_BYTES) || (kind == KIND_BYE && len)) {
                    WARN(SUBSYS_BOOT,
                         "rank %d: rank %d sent a frame of kind %u with %llu bytes; closing",
                         t->rank, c->peer, kind, (unsigned long long)len);
                    in_remove(t, i);
                    *removed = 1;
                    return MSCCLPP_OK;
                }
                msg_t *m = calloc(1, sizeof *m);
                size_t cap = len < MSG_FIRST_BYTES ? (size_t)len : MSG_FIRST_BYTES;
                unsigned char *d = malloc(cap ? cap : 1);
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
                m->cap = cap;
                m->data = d;
                c->cur = m;
                c->cur_got = 0;
                c->hdr_got = 0;
            }
        } else {
            msg_t *m = c->cur;
            if (m->cap == c->cur_got) {
                size_t cap = m->cap * 2 < m->len ? m->cap * 2 : m->len;
                unsigned char *d = realloc(m->data, cap);
                if (!d)
                    return ERR(MSCCLPP_ERR_NO_MEMORY,
                               "rank %d: out of memory for a %zu-byte message from rank %d",
                               t->rank, m->len, c->peer);
                m->data = d;
                m->cap = cap;
            }
            n = sock_recv_some(c->fd, m->data + c->cur_got, m->cap - c->cur_got, &st);
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
            if (c->cur->kind == KIND_ABORT || c->cur->kind == KIND_BYE) {
                if (c->cur->kind == KIND_ABORT) note_abort(t, c->peer, c->cur);
                else t->left[c->peer] = 1;
                TRACE(SUBSYS_BOOT, "rank %d: rank %d %s", t->rank, c->peer,
                      c->cur->kind == KIND_BYE ? "says goodbye" : "sent an abort notice");
                free(c->cur->data);
                free(c->cur);
            } else {
                enqueue(t, c->peer, c->cur);
            }
            c->cur = NULL;
            continue;
        }
        if (n == 0) return MSCCLPP_OK; /* drained */
    }
}

/* Bytes `p` wrote back on our connection to it: only ever its goodbye (say_bye). Lock held. */
static void read_back(tcp_t *t, int p, const unsigned char *b, size_t n)
{
    unsigned char *h = t->back + (size_t)p * FRAME_HDR_BYTES;
    for (size_t i = 0; i < n && t->back_got[p] < FRAME_HDR_BYTES; i++) h[t->back_got[p]++] = b[i];
    if (t->back_got[p] == FRAME_HDR_BYTES && sock_get_u32(h) == KIND_BYE &&
        sock_get_u64(h + 8) == 0)
        t->left[p] = 1;
}

/*
 * Wait up to `wait_ms` for activity and handle it: accept connections, read inbound data, note
 * peers that closed our outbound connections. `send_peer` >= 0 also waits for its outbound socket
 * to become writable (*writable says whether it is).
 */
static mscclpp_result_t poll_and_read(tcp_t *t, int wait_ms, int send_peer, int *writable)
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
    /* Outbound sockets: the peer writes nothing on them but its goodbye, so readable means
     * that, or closed. */
    for (int p = 0; p < t->nranks; p++) {
        short re = t->pfd[out_base + p].revents;
        if (!re) continue;
        if (p == send_peer && (re & (POLLOUT | POLLERR | POLLHUP)) && writable) *writable = 1;
        if (re & (POLLIN | POLLHUP | POLLERR)) {
            unsigned char b[64];
            sock_status_t st = SOCK_OK;
            ssize_t got = sock_recv_some(t->out_fd[p], b, sizeof b, &st);
            if (got > 0) read_back(t, p, b, (size_t)got);
            if (got < 0) {
                TRACE(SUBSYS_BOOT, "rank %d: rank %d closed our connection", t->rank, p);
                mark_broken(t, p);
                if (st == SOCK_CLOSED) t->gone[p] = 1;
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

/*
 * poll_and_read, then drop the connections whose handshake is overdue: after the reads, so that
 * a handshake that arrived while this rank was busy elsewhere (longer than the handshake timeout)
 * is taken rather than dropped unread (t_stall_handshake).
 */
static mscclpp_result_t progress(tcp_t *t, int wait_ms, int send_peer, int *writable)
{
    mscclpp_result_t rc = poll_and_read(t, wait_ms, send_peer, writable);
    drop_unverified(t, 1);
    return rc;
}

/* A message `take` would return is queued. */
static bool take_ready(const tcp_t *t, int peer, uint32_t kind, int tag)
{
    for (const msg_t *m = t->qhead[peer]; m; m = m->next)
        if (m->kind == kind && m->tag == tag) return true;
    return false;
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

static mscclpp_result_t connect_peer(tcp_t *t, int peer, uint64_t deadline);
static mscclpp_result_t write_peer(tcp_t *t, int peer, const void *buf, size_t bytes,
                                   uint64_t deadline, const char *what);

/* A peer refuses connections after its listener existed: its process is gone. */
#define REFUSED_GRACE_NS 500000000ull
/* Time a failing rank spends telling the others (connects included). */
#define ABORT_BUDGET_NS 1000000000ull
/* Time a rank that leaves spends saying goodbye (say_bye), in all and per peer. */
#define BYE_BUDGET_NS 500000000ull
#define BYE_PEER_NS 100000000ull

/*
 * This rank failed because of `culprit` (lock held): tell every other rank once, best effort and
 * bounded, so that ranks waiting on this one name the culprit instead of this rank. The message
 * is this thread's last error. A rank that failed because of another's notice tells too (it may
 * be all that a rank waiting on it hears before it exits), and so does the culprit when it is
 * alive: it may be stalled behind the rank that failed first, and look for notices itself.
 */
static void abort_peers(tcp_t *t, int culprit)
{
    if (t->abort_sent) return;
    t->abort_sent = 1;
    char msg[ABORT_MAX_BYTES];
    snprintf(msg, sizeof msg, "%s", mscclpp_last_error());
    size_t len = strlen(msg);
    uint64_t end = sock_now_ns() + ABORT_BUDGET_NS;
    unsigned char hdr[FRAME_HDR_BYTES];
    sock_put_u32(hdr, KIND_ABORT);
    sock_put_u32(hdr + 4, (uint32_t)culprit);
    sock_put_u64(hdr + 8, len);
    char what[] = "an abort notice";
    for (int p = 0; p < t->nranks; p++) {
        if (p == t->rank || t->out_broken[p] || peer_gone(t, p)) continue;
        uint64_t now = sock_now_ns();
        if (now >= end) break;
        uint64_t dl = now + 300000000ull < end ? now + 300000000ull : end;
        /* These may fail (the peer may be gone too); the error that counts is the caller's. */
        mscclpp_result_t saved = MSCCLPP_OK;
        char keep[ABORT_MAX_BYTES];
        snprintf(keep, sizeof keep, "%s", mscclpp_last_error());
        if (t->out_fd[p] < 0) saved = connect_peer(t, p, dl);
        if (saved == MSCCLPP_OK) saved = write_peer(t, p, hdr, sizeof hdr, dl, what);
        if (saved == MSCCLPP_OK) saved = write_peer(t, p, msg, len, dl, what);
        if (saved != MSCCLPP_OK)
            TRACE(SUBSYS_BOOT, "rank %d: could not tell rank %d: %s", t->rank, p,
                  mscclpp_last_error());
        core_error_quiet(MSCCLPP_ERR_REMOTE, "%s", keep);
    }
}

/*
 * A rank that died (peer_died), or -1. First what this rank has seen, then probes of ranks it
 * has no connection with: a listener that is gone refuses. (A rank that left normally without
 * ever exchanging a message with this one said no goodbye here, so a probe takes it for dead.)
 * Lock held.
 */
static int find_dead(tcp_t *t)
{
    for (int p = 0; p < t->nranks; p++)
        if (p != t->rank && peer_died(t, p)) return p;
    uint64_t end = sock_now_ns() + DEAD_BUDGET_NS;
    for (int p = 0, probes = 0; p < t->nranks && probes < DEAD_PROBES; p++) {
        if (p == t->rank || t->in_of[p] || t->out_fd[p] >= 0 || t->out_broken[p]) continue;
        uint64_t now = sock_now_ns(), until = now + PROBE_CONNECT_NS;
        if (now >= end || is_interrupted(t)) break;
        probes++;
        (void)connect_peer(t, p, until < end ? until : end);
        if (peer_died(t, p)) return p;
    }
    return -1;
}

/*
 * This rank is about to fail because of `suspect` (-1: none): say whom to blame. A peer that
 * stopped because of another rank said so in an abort notice (best_notice), sent before it
 * closed: wait a moment for one (the wait also ends when a message (`peer`, `kind`, `tag`) is
 * queued; `peer` -1: none). A notice blaming a rank whose process is gone wins. Else, when the
 * suspect is alive (stalled behind another rank, perhaps one that died), a rank whose process
 * is gone without a notice (find_dead) is the likelier cause than the suspect, which may not
 * even know yet (it times out as late as this rank did). Errors of the probes and polls are not
 * this rank's: the caller's last error is kept. *from: the notice's sender, or -1 (none: a dead
 * rank's or the suspect's blame); returns the rank to blame (-1: the suspect was -1 and nothing
 * came). Lock held (released between polls).
 */
static int judge(tcp_t *t, int suspect, int peer, uint32_t kind, int tag, int *from)
{
    core_error_kept_t kept;
    core_error_keep(&kept);
    bool valid = suspect >= 0 && suspect < t->nranks && suspect != t->rank;
    uint64_t end = sock_now_ns() + NOTICE_WAIT_NS;
    /* a suspect with no connection either way shows that it is gone only when probed */
    if (valid && !t->in_of[suspect] && t->out_fd[suspect] < 0 && !t->out_broken[suspect])
        (void)connect_peer(t, suspect, sock_now_ns() + PROBE_CONNECT_NS);
    int b;
    for (;;) {
        b = best_notice(t, suspect);
        if (b >= 0 && notice_score(t, b, suspect) >= 2) break;
        if (peer >= 0 && take_ready(t, peer, kind, tag)) break;
        if (is_interrupted(t) || sock_now_ns() >= end) break;
        if (progress(t, sock_poll_ms(end, 10), -1, NULL) != MSCCLPP_OK) break;
        pthread_mutex_unlock(&t->lock);
        sched_yield();
        pthread_mutex_lock(&t->lock);
    }
    int culprit = -1;
    *from = -1;
    if (b >= 0 && notice_score(t, b, suspect) == 3) {
        *from = b;
        culprit = t->notice_of[b];
    } else if (valid && peer_gone(t, suspect) && t->notice_of[suspect] < 0) {
        culprit = suspect; /* it died: it is the cause */
    } else {
        int dead = is_interrupted(t) ? -1 : find_dead(t);
        if (dead >= 0) {
            culprit = dead;
        } else if (b >= 0) {
            *from = b;
            culprit = t->notice_of[b];
        } else {
            culprit = valid ? suspect : -1;
        }
    }
    core_error_put_back(&kept);
    return culprit;
}

/*
 * judge() for a receive from `peer` (`kind`, `tag`) about to fail (its peer closed, blamed this
 * rank, or its deadline passed): false when, meanwhile, the message came or a notice that
 * explains the stop (the receive loop takes either; *culprit is -1), else true with *culprit
 * the rank to blame. Lock held.
 */
static bool judge_recv(tcp_t *t, int peer, uint32_t kind, int tag, int *culprit)
{
    int from;
    *culprit = judge(t, peer, peer, kind, tag, &from);
    if (take_ready(t, peer, kind, tag) || best_notice(t, peer) >= 0) {
        *culprit = -1;
        return false;
    }
    return true;
}

static mscclpp_result_t tcp_recv_kind(tcp_t *t, void *data, size_t bytes, int peer, uint32_t kind,
                                      int tag, uint64_t deadline)
{
    char what[40];
    mscclpp_result_t res = MSCCLPP_OK;
    int culprit = -1;
    uint64_t probe_at = sock_now_ns() + PROBE_NS;
    int b = -1;
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
        /* A notice first: `peer` may have closed because it failed on the culprit too. */
        if ((b = best_notice(t, peer)) >= 0) {
            res = ERR(MSCCLPP_ERR_REMOTE,
                      "rank %d: gave up waiting for %s from rank %d: rank %d failed on rank %d "
                      "(%s)",
                      t->rank, what_str(kind, tag, what, sizeof what), peer, b, t->notice_of[b],
                      t->notice_msg[b]);
            break;
        }
        if (t->notice_of[peer] == t->rank) {
            /* `peer` failed blaming this rank (it sends nothing more): a rank that died is
             * the likelier cause, else `peer` */
            if (!judge_recv(t, peer, kind, tag, &culprit)) continue;
            char dead[96] = "";
            if (culprit != peer)
                snprintf(dead, sizeof dead,
                         "; rank %d's process is gone and it reported no failure", culprit);
            res = ERR(MSCCLPP_ERR_REMOTE,
                      "rank %d: gave up waiting for %s from rank %d: it failed blaming this "
                      "rank (%s)%s",
                      t->rank, what_str(kind, tag, what, sizeof what), peer, t->notice_msg[peer],
                      dead);
            break;
        }
        inconn_t *c = t->in_of[peer];
        if ((c && c->closed) || (!c && t->out_broken[peer] &&
                                 sock_now_ns() - t->out_broken_ns[peer] > CLOSE_GRACE_NS)) {
            /* its notice, if it failed itself, may be on its way (the loop's top takes it) */
            if (!judge_recv(t, peer, kind, tag, &culprit)) continue;
            if (culprit == peer && t->left[peer])
                res = ERR(MSCCLPP_ERR_REMOTE,
                          "rank %d: rank %d left (destroyed its bootstrap) before sending %s",
                          t->rank, peer, what_str(kind, tag, what, sizeof what));
            else if (culprit == peer)
                res = ERR(MSCCLPP_ERR_REMOTE,
                          "rank %d: connection to rank %d closed while receiving %s", t->rank, peer,
                          what_str(kind, tag, what, sizeof what));
            else /* it blamed this rank, or it left: a rank that died is the likelier cause */
                res = ERR(MSCCLPP_ERR_REMOTE,
                          "rank %d: connection to rank %d closed while receiving %s; rank %d's "
                          "process is gone and it reported no failure",
                          t->rank, peer, what_str(kind, tag, what, sizeof what), culprit);
            break;
        }
        if (is_interrupted(t)) {
            res = interrupted_error(t, "waiting to receive", what_str(kind, tag, what, sizeof what),
                                    peer);
            break;
        }
        /*
         * Without a connection either way, a dead peer would only show at the deadline, and
         * ranks waiting on this one would time out at the same moment, blaming this one
         * (issue 22 item 5). So once a while, connect to it: a listener that is gone refuses.
         */
        if (!t->in_of[peer] && t->out_fd[peer] < 0 && !t->out_broken[peer] &&
            sock_now_ns() >= probe_at) {
            probe_at = sock_now_ns() + PROBE_NS;
            uint64_t until = sock_now_ns() + PROBE_CONNECT_NS;
            if (connect_peer(t, peer, until < deadline ? until : deadline) != MSCCLPP_OK &&
                t->out_broken[peer]) {
                char why[512];
                snprintf(why, sizeof why, "%s", mscclpp_last_error());
                res = ERR(MSCCLPP_ERR_REMOTE, "%s (while waiting to receive %s from it)", why,
                          what_str(kind, tag, what, sizeof what));
                culprit = peer;
                break;
            }
            core_clear_error(); /* a slow connect: the peer may still be starting */
        }
        if (sock_now_ns() >= deadline) {
            /* `peer` may be waiting for a rank that failed, as this rank waits for it, and time
             * out at the same moment: its notice, or a rank that died, names the cause */
            if (!judge_recv(t, peer, kind, tag, &culprit)) continue;
            if (culprit == peer)
                res = ERR(MSCCLPP_ERR_TIMEOUT,
                          "rank %d: timed out after %.1f s waiting to receive %s from rank %d",
                          t->rank, timeout_s(), what_str(kind, tag, what, sizeof what), peer);
            else
                res = ERR(MSCCLPP_ERR_TIMEOUT,
                          "rank %d: timed out after %.1f s waiting to receive %s from rank %d; "
                          "rank %d's process is gone and it reported no failure: rank %d is "
                          "likely stalled behind it",
                          t->rank, timeout_s(), what_str(kind, tag, what, sizeof what), peer,
                          culprit, peer);
            break;
        }
        CHECK_GOTO(progress(t, sock_poll_ms(deadline, 10), -1, NULL), res, unlock);
        /* Let other threads of this rank in between polls. */
        pthread_mutex_unlock(&t->lock);
        sched_yield();
        pthread_mutex_lock(&t->lock);
    }
    if (culprit >= 0) {
        core_set_culprit(culprit);
        abort_peers(t, culprit);
    } else if (res == MSCCLPP_ERR_REMOTE && b >= 0) {
        core_set_culprit(t->notice_of[b]);
        abort_peers(t, t->notice_of[b]);
    }
unlock:
    pthread_mutex_unlock(&t->lock);
    return res;
}

/* Connect to `peer` and send the handshake (lock held). Errors are recorded, not logged: the
 * sender logs them once it knows whether the peer had reported a failure of its own. */
static mscclpp_result_t connect_peer(tcp_t *t, int peer, uint64_t deadline)
{
    char a[80];
    int fd;
    sock_status_t st = sock_connect(&t->addrs[peer], deadline,
                                    t->refused_grace ? REFUSED_GRACE_NS : 0, &fd);
    if (st == SOCK_TIMEOUT)
        return QUIET_ERR(MSCCLPP_ERR_TIMEOUT,
                         "rank %d: timed out after %.1f s connecting to rank %d at %s", t->rank,
                         timeout_s(), peer, sock_addr_str(&t->addrs[peer], a, sizeof a));
    if (st == SOCK_CLOSED) {
        mark_broken(t, peer);
        t->gone[peer] = 1;
        return QUIET_ERR(
            MSCCLPP_ERR_REMOTE,
            "rank %d: rank %d at %s refuses connections: its process is gone (exited or "
            "killed)",
            t->rank, peer, sock_addr_str(&t->addrs[peer], a, sizeof a));
    }
    if (st != SOCK_OK)
        return QUIET_ERR(MSCCLPP_ERR_REMOTE, "rank %d: cannot connect to rank %d at %s: %m",
                         t->rank, peer, sock_addr_str(&t->addrs[peer], a, sizeof a));
    unsigned char h[HS_BYTES] = {0};
    memcpy(h, CONN_MAGIC, 8);
    sock_put_u16(h + 8, PROTO_VERSION);
    memcpy(h + 12, t->secret, SECRET_BYTES);
    sock_put_u32(h + 44, (uint32_t)t->rank);
    sock_put_u32(h + 48, (uint32_t)t->nranks);
    st = sock_send_all(fd, h, sizeof h, deadline);
    if (st != SOCK_OK) {
        sock_close(fd);
        if (st != SOCK_TIMEOUT) mark_broken(t, peer);
        return QUIET_ERR(st == SOCK_TIMEOUT ? MSCCLPP_ERR_TIMEOUT : MSCCLPP_ERR_REMOTE,
                         "rank %d: handshake with rank %d failed", t->rank, peer);
    }
    t->out_fd[peer] = fd;
    return MSCCLPP_OK;
}

/* Write all of buf to peer, driving inbound traffic while the socket is full (lock held).
 * Errors are recorded, not logged (as connect_peer's). */
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
            if (st == SOCK_CLOSED) t->gone[peer] = 1;
            if (st == SOCK_SYSERR)
                return QUIET_ERR(MSCCLPP_ERR_REMOTE, "rank %d: sending %s to rank %d: %m", t->rank,
                                 what, peer);
            return QUIET_ERR(MSCCLPP_ERR_REMOTE,
                             "rank %d: connection to rank %d closed while sending %s", t->rank,
                             peer, what);
        }
        done += (size_t)n;
        if (done == bytes) break;
        if (n == 0) {
            if (is_interrupted(t)) {
                mark_broken(t, peer); /* a partial frame is on the wire */
                return interrupted_error(t, "sending", what, peer);
            }
            if (sock_now_ns() >= deadline) {
                mark_broken(t, peer); /* a partial frame is on the wire */
                return QUIET_ERR(MSCCLPP_ERR_TIMEOUT,
                                 "rank %d: timed out after %.1f s sending %s to rank %d", t->rank,
                                 timeout_s(), what, peer);
            }
            int writable;
            CHECK(progress(t, sock_poll_ms(deadline, 10), peer, &writable));
        }
    }
    return MSCCLPP_OK;
}

/*
 * A send to `peer` failed with `res` (its message recorded, not logged). A peer that closed or
 * left may have failed because of another rank and said so first: wait a moment for its
 * notice, so that the error (and its one log line) names the rank that failed first rather
 * than the one that left because of it (issue 22 item 5). Then tell the others. Lock held.
 */
static mscclpp_result_t send_failed(tcp_t *t, int peer, mscclpp_result_t res)
{
    char why[768];
    snprintf(why, sizeof why, "%s", mscclpp_last_error());
    int from, culprit = judge(t, peer, -1, 0, 0, &from);
    if (from >= 0)
        res = ERR(MSCCLPP_ERR_REMOTE,
                  "%s; rank %d had reported that it failed because of rank %d (%s)", why, from,
                  culprit, t->notice_msg[from]);
    else if (culprit != peer)
        res = ERR(res, "%s; rank %d's process is gone and it reported no failure", why, culprit);
    else res = ERR(res, "%s", why);
    core_set_culprit(culprit);
    abort_peers(t, culprit);
    return res;
}

static mscclpp_result_t tcp_send_kind(tcp_t *t, const void *data, size_t bytes, int peer,
                                      uint32_t kind, int tag, uint64_t deadline)
{
    char what[40];
    what_str(kind, tag, what, sizeof what);
    mscclpp_result_t res = MSCCLPP_OK;
    pthread_mutex_lock(&t->lock);
    if (t->out_broken[peer]) {
        res = QUIET_ERR(MSCCLPP_ERR_REMOTE,
                        "rank %d: connection to rank %d was lost; cannot send "
                        "%s",
                        t->rank, peer, what);
        goto fail;
    }
    if (t->out_fd[peer] < 0) CHECK_GOTO(connect_peer(t, peer, deadline), res, fail);
    unsigned char hdr[FRAME_HDR_BYTES];
    sock_put_u32(hdr, kind);
    sock_put_u32(hdr + 4, (uint32_t)tag);
    sock_put_u64(hdr + 8, bytes);
    CHECK_GOTO(write_peer(t, peer, hdr, sizeof hdr, deadline, what), res, fail);
    if (bytes) CHECK_GOTO(write_peer(t, peer, data, bytes, deadline, what), res, fail);
    pthread_mutex_unlock(&t->lock);
    return MSCCLPP_OK;
fail:
    if (res != MSCCLPP_ERR_ABORTED) res = send_failed(t, peer, res);
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
        if (t->notice_msg) free(t->notice_msg[p]);
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
    free(t->notice_of);
    free(t->notice_msg);
    free(t->gone);
    free(t->left);
    free(t->back);
    free(t->back_got);
    pthread_mutex_destroy(&t->lock);
    free(t);
}

/*
 * This rank leaves normally: say goodbye (KIND_BYE) to every rank it has a connection with,
 * before closing them, so that a rank failing later does not take it for a rank that died and
 * blame it (judge). On our connection to the peer, or else back on the peer's connection to us
 * (which carries nothing else that way: read_back). A rank it never exchanged a message with
 * hears nothing (a goodbye to every rank would cost n^2 connections when all leave at once).
 * Skipped after this rank's own abort notice (that says enough) and after tcp_interrupt. Best
 * effort, bounded by BYE_BUDGET_NS; the caller's last error is kept. Lock held.
 */
static void say_bye(tcp_t *t)
{
    if (t->abort_sent || is_interrupted(t)) return;
    core_error_kept_t kept;
    core_error_keep(&kept);
    unsigned char hdr[FRAME_HDR_BYTES];
    sock_put_u32(hdr, KIND_BYE);
    sock_put_u32(hdr + 4, 0);
    sock_put_u64(hdr + 8, 0);
    uint64_t end = sock_now_ns() + BYE_BUDGET_NS;
    for (int p = 0; p < t->nranks; p++) {
        uint64_t now = sock_now_ns();
        if (p == t->rank || peer_gone(t, p) || now >= end) continue;
        sock_status_t st = SOCK_OK;
        if (t->out_fd[p] >= 0 && !t->out_broken[p]) {
            uint64_t dl = now + BYE_PEER_NS < end ? now + BYE_PEER_NS : end;
            if (write_peer(t, p, hdr, sizeof hdr, dl, "a goodbye") != MSCCLPP_OK)
                TRACE(SUBSYS_BOOT, "rank %d: no goodbye to rank %d: %s", t->rank, p,
                      mscclpp_last_error());
        } else if (t->in_of[p] && !t->in_of[p]->closed &&
                   sock_send_some(t->in_of[p]->fd, hdr, sizeof hdr, &st) != (ssize_t)sizeof hdr) {
            TRACE(SUBSYS_BOOT, "rank %d: no goodbye to rank %d on its connection", t->rank, p);
        }
    }
    core_error_put_back(&kept);
}

static mscclpp_result_t tcp_destroy(mscclpp_bootstrap_t *boot)
{
    tcp_t *t = boot->impl;
    if (t) {
        pthread_mutex_lock(&t->lock);
        say_bye(t);
        pthread_mutex_unlock(&t->lock);
    }
    tcp_free(t);
    boot->impl = NULL;
    return MSCCLPP_OK;
}

static int tcp_notice(mscclpp_bootstrap_t *boot, int suspect, int *from, int *culprit, char *msg,
                      size_t cap)
{
    tcp_t *t = boot->impl;
    int keep_culprit = core_culprit(); /* the caller's; judge keeps its error */
    pthread_mutex_lock(&t->lock);
    int who = judge(t, suspect, -1, 0, 0, from);
    bool other = who >= 0 && who != suspect;
    if (other && *from >= 0) snprintf(msg, cap, "%s", t->notice_msg[*from]);
    else if (other) snprintf(msg, cap, "rank %d's process is gone and it reported no failure", who);
    *culprit = who;
    pthread_mutex_unlock(&t->lock);
    core_set_culprit(keep_culprit);
    return other;
}

static void tcp_blame(mscclpp_bootstrap_t *boot, int culprit)
{
    tcp_t *t = boot->impl;
    if (culprit < 0 || culprit >= t->nranks || culprit == t->rank) return;
    pthread_mutex_lock(&t->lock);
    abort_peers(t, culprit);
    pthread_mutex_unlock(&t->lock);
}

/* Lock-free: the thread that holds the lock may be the one to interrupt (it polls the flag
 * between its 10 ms polls). */
static void tcp_interrupt(mscclpp_bootstrap_t *boot)
{
    tcp_t *t = boot->impl;
    __atomic_store_n(&t->interrupted, 1, __ATOMIC_RELEASE);
}

static const boot_ops_t tcp_ops = {
    .name = "tcp",
    .allgather = tcp_allgather,
    .send = tcp_send,
    .recv = tcp_recv,
    .barrier = tcp_barrier,
    .destroy = tcp_destroy,
    .interrupt = tcp_interrupt,
    .notice = tcp_notice,
    .blame = tcp_blame,
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
    t->max_pend = max_pending();
    t->hs_ns = handshake_ns();
    t->refused_grace = 1; /* every peer's listener exists before the root sends its address */
    size_t n = (size_t)nranks;
    t->addrs = calloc(n, sizeof *t->addrs);
    t->out_fd = malloc(n * sizeof *t->out_fd);
    t->out_broken = calloc(n, sizeof *t->out_broken);
    t->out_broken_ns = calloc(n, sizeof *t->out_broken_ns);
    t->in_of = calloc(n, sizeof *t->in_of);
    t->qhead = calloc(n, sizeof *t->qhead);
    t->qtail = calloc(n, sizeof *t->qtail);
    t->notice_of = malloc(n * sizeof *t->notice_of);
    t->notice_msg = calloc(n, sizeof *t->notice_msg);
    t->gone = calloc(n, sizeof *t->gone);
    t->left = calloc(n, sizeof *t->left);
    t->back = calloc(n, FRAME_HDR_BYTES);
    t->back_got = calloc(n, sizeof *t->back_got);
    if (!t->addrs || !t->out_fd || !t->out_broken || !t->out_broken_ns || !t->in_of || !t->qhead ||
        !t->qtail || !t->notice_of || !t->notice_msg || !t->gone || !t->left || !t->back ||
        !t->back_got) {
        tcp_free(t);
        return NULL;
    }
    for (int i = 0; i < nranks; i++) t->out_fd[i] = t->notice_of[i] = -1;
    return t;
}

/* The root gave up: read which ranks joined and name the missing ones. */
static mscclpp_result_t join_timeout_error(int rfd, int rank, int nranks, uint32_t joined,
                                           const char *where, uint64_t deadline)
{
    size_t nb = ((size_t)nranks + 7) / 8;
    unsigned char *bits = calloc(nb, 1);
    char miss[200] = "(unknown)";
    if (bits && sock_recv_all(rfd, bits, nb, deadline) == SOCK_OK)
        missing_str(bits, (uint32_t)nranks, miss, sizeof miss);
    free(bits);
    return ERR(MSCCLPP_ERR_TIMEOUT,
               "rank %d: bootstrap root %s gave up after %.1f s: %u of %d ranks joined; missing "
               "rank(s) %s",
               rank, where, timeout_s(), joined, nranks, miss);
}

static const char *reply_reason(uint32_t status)
{
    switch (status) {
    case REPLY_BAD_SECRET: return "wrong secret (the unique id is not this session's)";
    case REPLY_BAD_RANK: return "rank already taken or out of range";
    case REPLY_BAD_NRANKS: return "nranks differs from the session's";
    case REPLY_COMPLETE: return "the session is complete already (a rank joined twice?)";
    default: return "unknown reason";
    }
}

/*
 * Join the session served at `root` with `secret`. `ifname` (optional) names the interface for
 * this rank's listener; otherwise the local address that reaches the root is used.
 */
static mscclpp_result_t tcp_join(const sock_addr_t *root, const unsigned char *secret,
                                 const char *ifname, int rank, int nranks, int root_existed,
                                 mscclpp_bootstrap_t **boot)
{
    char where[80];
    sock_addr_str(root, where, sizeof where);
    uint64_t deadline = sock_deadline();
    mscclpp_result_t res = MSCCLPP_OK;
    bool session_timed_out = false; /* then this process's root may still answer the others */
    tcp_t *t = tcp_alloc(rank, nranks);
    if (!t) return ERR(MSCCLPP_ERR_NO_MEMORY, "rank %d: out of memory for %d ranks", rank, nranks);
    memcpy(t->secret, secret, SECRET_BYTES);

    sock_addr_t me;
    if (ifname && *ifname) CHECK_GOTO(sock_if_addr(ifname, &me), res, free_t);
    int rfd = -1;
    /* A unique id's root listened before the id existed: a lasting refusal means it is gone. */
    sock_status_t st = sock_connect(root, deadline, root_existed ? REFUSED_GRACE_NS : 0, &rfd);
    if (st == SOCK_TIMEOUT) {
        res = ERR(MSCCLPP_ERR_TIMEOUT, "rank %d: bootstrap root %s not reachable within %.1f s",
                  rank, where, timeout_s());
        goto free_t;
    }
    if (st == SOCK_CLOSED) {
        res = ERR(MSCCLPP_ERR_REMOTE,
                  "rank %d: bootstrap root %s refuses connections: its session is over (complete "
                  "or timed out) or its process is gone",
                  rank, where);
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
    /* The root's deadline started first (when the id was made): give its verdict, which names
       the missing ranks, a moment past ours to arrive. */
    if (st == SOCK_OK) st = sock_recv_all(rfd, r, sizeof r, deadline + REPLY_GRACE_NS);
    session_timed_out = st == SOCK_TIMEOUT;
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
    uint32_t status = sock_get_u32(r + 8), session = sock_get_u32(r + 20);
    if (memcmp(r, REPLY_MAGIC, 8) != 0) {
        res = ERR(MSCCLPP_ERR_REMOTE, "rank %d: bootstrap root %s sent a malformed reply", rank,
                  where);
        goto close_root;
    }
    if (status == REPLY_TIMEOUT && (int)sock_get_u32(r + 12) == nranks) {
        session_timed_out = true;
        res = join_timeout_error(rfd, rank, nranks, sock_get_u32(r + 16), where,
                                 deadline + REPLY_GRACE_NS);
        goto close_root;
    }
    if (status == REPLY_BAD_NRANKS && session) {
        res = ERR(MSCCLPP_ERR_INVALID_ARG,
                  "rank %d: bootstrap root %s refused this rank: it was told nranks %d but the "
                  "session has %u ranks",
                  rank, where, nranks, session);
        goto close_root;
    }
    if (status != REPLY_OK || (int)sock_get_u32(r + 12) != nranks) {
        res = ERR(MSCCLPP_ERR_REMOTE, "rank %d (of %d): bootstrap root %s refused this rank: %s",
                  rank, nranks, where, reply_reason(status));
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
    if (session_timed_out) roots_let_answer(secret);
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
    CHECK(root_start(lfd, &addr, secret, 0, NULL));

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
    /* A rank in the process that created the id fixes the session's size at its root. */
    roots_expect(u + UID_SECRET_OFF, nranks);
    return tcp_join(&root, u + UID_SECRET_OFF, config_get(CFG_MSCCLPP_SOCKET_IFNAME), rank, nranks,
                    1, boot);
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
    if (rank != 0) return tcp_join(&root, secret, my_if, rank, nranks, 0, boot);

    int lfd;
    pthread_t thread;
    sock_addr_t bound = root;
    CHECK(sock_listen(&bound, 1, &lfd));
    CHECK(root_start(lfd, &bound, secret, nranks, &thread));
    mscclpp_result_t res = tcp_join(&root, secret, my_if, rank, nranks, 0, boot);
    if (res == MSCCLPP_OK)
        pthread_join(thread, NULL); /* it is done sending the table */
    else
        pthread_detach(thread); /* it stops by its own deadline */
    return res;
}

/* ---------------------------------------------------------------------------------------------
 * Fuzzing hooks (tests/fuzz/fuzz_boot.c): the root's and a rank's parsers, fed through
 * socketpairs exactly as they read from TCP. Input: chunks of [connection u8][length u8][bytes],
 * each written to its connection and read at once; connection 0x80 bit closes it instead.
 * ------------------------------------------------------------------------------------------- */

#define FUZZ_CONNS 8

static const unsigned char fuzz_secret[SECRET_BYTES] = "mscclpp bootstrap fuzz secret..";

const unsigned char *boot_tcp_fuzz_secret(void) { return fuzz_secret; }

static void fuzz_drain(int fd)
{
    unsigned char sink[4096];
    while (fd >= 0 && recv(fd, sink, sizeof sink, MSG_DONTWAIT) > 0) {
    }
}

/* Next chunk of `data`: its connection and bytes; 0 at the end. */
static int fuzz_chunk(const uint8_t **data, size_t *len, int *conn, int *close_it,
                      const uint8_t **bytes, size_t *n)
{
    if (*len < 2) return 0;
    *conn = (*data)[0] % FUZZ_CONNS;
    *close_it = ((*data)[0] & 0x80) != 0;
    *n = (*data)[1];
    *data += 2;
    *len -= 2;
    if (*n > *len) *n = *len;
    *bytes = *data;
    *data += *n;
    *len -= *n;
    return 1;
}

int boot_tcp_fuzz_root(const uint8_t *data, size_t len)
{
    if (len < 1) return 0;
    root_t *r = calloc(1, sizeof *r);
    if (!r) return 0;
    r->max_pend = 4; /* small, so that the drop path runs too */
    r->pend = malloc(sizeof *r->pend * (size_t)r->max_pend);
    if (!r->pend) {
        free(r);
        return 0;
    }
    r->lfd = -1;
    snprintf(r->where, sizeof r->where, "fuzz");
    memcpy(r->secret, fuzz_secret, SECRET_BYTES);
    r->deadline = sock_now_ns() + 60000000000ull;
    r->hs_ns = 60000000000ull;
    atomic_init(&r->expect, (uint32_t)(data[0] % 6)); /* 0: no rank of this process */
    data++;
    len--;
    int mine[FUZZ_CONNS], other[FUZZ_CONNS];
    for (int c = 0; c < FUZZ_CONNS; c++) mine[c] = other[c] = -1;
    int conn, close_it;
    const uint8_t *bytes;
    size_t n;
    while (fuzz_chunk(&data, &len, &conn, &close_it, &bytes, &n)) {
        if (other[conn] < 0) {
            int sv[2];
            if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv) != 0) break;
            mine[conn] = sv[0];
            other[conn] = sv[1];
            pend_add(r, sv[0], sock_now_ns());
        }
        if (close_it) {
            sock_close(other[conn]);
            other[conn] = -1;
        } else if (n && send(other[conn], bytes, n, MSG_DONTWAIT | MSG_NOSIGNAL) < 0) {
            continue;
        }
        for (int i = 0; i < r->npend; i++)
            if (r->pend[i].fd == mine[conn]) {
                root_read(r, i);
                break;
            }
        for (int c = 0; c < FUZZ_CONNS; c++) fuzz_drain(other[c]);
    }
    root_finish(r);
    for (int c = 0; c < FUZZ_CONNS; c++) sock_close(other[c]);
    free(r->pend);
    free(r);
    return 0;
}

int boot_tcp_fuzz_rank(const uint8_t *data, size_t len)
{
    tcp_t *t = tcp_alloc(1, 4);
    if (!t) return 0;
    memcpy(t->secret, fuzz_secret, SECRET_BYTES);
    int mine[FUZZ_CONNS], other[FUZZ_CONNS];
    for (int c = 0; c < FUZZ_CONNS; c++) mine[c] = other[c] = -1;
    int conn, close_it, failed = 0; /* out of memory: stop */
    const uint8_t *bytes;
    size_t n;
    while (!failed && fuzz_chunk(&data, &len, &conn, &close_it, &bytes, &n)) {
        if (other[conn] < 0 && mine[conn] < 0) {
            int sv[2];
            if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv) != 0) break;
            inconn_t *c = calloc(1, sizeof *c);
            inconn_t **grown = t->nin == t->capin
                                   ? realloc(t->in, sizeof *grown * (size_t)(t->capin + 16))
                                   : t->in;
            if (!c || !grown) {
                free(c);
                if (grown) t->in = grown;
                close(sv[0]);
                close(sv[1]);
                break;
            }
            if (t->nin == t->capin) t->capin += 16;
            t->in = grown;
            c->fd = sv[0];
            c->peer = -1;
            c->hs_deadline = sock_now_ns() + t->hs_ns;
            t->in[t->nin++] = c;
            mine[conn] = sv[0];
            other[conn] = sv[1];
        }
        if (close_it) {
            sock_close(other[conn]);
            other[conn] = -1;
        } else if (other[conn] < 0 ||
                   (n && send(other[conn], bytes, n, MSG_DONTWAIT | MSG_NOSIGNAL) < 0)) {
            continue;
        }
        int found = 0;
        for (int i = 0; i < t->nin; i++)
            if (t->in[i]->fd == mine[conn]) {
                int removed;
                found = 1;
                failed = read_inbound(t, i, &removed) != MSCCLPP_OK;
                if (removed) mine[conn] = -1;
                break;
            }
        if (!found) mine[conn] = -1;
    }
    /* Take what was queued, as receives would. */
    for (int p = 0; p < t->nranks; p++)
        for (msg_t *m; (m = t->qhead[p]) != NULL;) {
            m = take(t, p, m->kind, m->tag);
            free(m->data);
            free(m);
        }
    for (int c = 0; c < FUZZ_CONNS; c++) sock_close(other[c]);
    tcp_free(t);
    return 0;
}

/* ---- the public entry points of the TCP bootstrap ------------------------------------------ */

MSCCLPP_API mscclpp_result_t mscclpp_get_unique_id(mscclpp_unique_id_t *id)
{
    CHECK_ARG(id != NULL);
    return boot_tcp_unique_id(id);
}

MSCCLPP_API mscclpp_result_t mscclpp_bootstrap_create(const mscclpp_unique_id_t *id, int rank,
                                                      int nranks, mscclpp_bootstrap_t **boot)
{
    CHECK_ARG(boot != NULL);
    *boot = NULL;
    CHECK_ARG(id != NULL);
    CHECK_ARG(nranks > 0);
    CHECK_ARG(rank >= 0 && rank < nranks);
    return boot_tcp_create(id, rank, nranks, boot);
}

MSCCLPP_API mscclpp_result_t mscclpp_bootstrap_create_from_address(const char *address, int rank,
                                                                   int nranks,
                                                                   mscclpp_bootstrap_t **boot)
{
    CHECK_ARG(boot != NULL);
    *boot = NULL;
    CHECK_ARG(nranks > 0);
    CHECK_ARG(rank >= 0 && rank < nranks);
    return boot_tcp_create_from_address(address, rank, nranks, boot);
}
