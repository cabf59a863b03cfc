/* File-descriptor broker over an abstract AF_UNIX socket (see fd_broker.h). */
#define _GNU_SOURCE
#include "hal/fd_broker.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/config.h"
#include "base/debug.h"

/* Wire protocol, one SOCK_SEQPACKET message each way:
 * request magic 4, version 4, key 8, secret 16; reply magic 4, status 4 (+ the fd). */
#define FDB_MAGIC 0x4244464dU /* "MFDB" */
#define FDB_VERSION 2
#define FDB_REQ_BYTES 32
#define FDB_REP_BYTES 8
#define FDB_MAX_FDS 4 /* a reply carries one; room to catch (and close) a confused sender's */

enum {
    FDB_REPLY_OK = 0,
    FDB_REPLY_UNKNOWN = 1, /* no such key: withdrawn, or never served */
    FDB_REPLY_DENIED = 2,  /* wrong secret, or another user */
    FDB_REPLY_BAD = 3,     /* malformed request */
    FDB_REPLY_SYSTEM = 4,  /* dup failed on the server */
};

typedef struct fdb_entry {
    struct fdb_entry *next;
    uint64_t key;
    int fd;
    bool borrowed; /* hal_fdb_serve_borrowed: the caller closes fd, never the broker */
    uint8_t secret[HAL_FDB_SECRET_BYTES];
} fdb_entry_t;

static struct {
    pthread_mutex_t lock;
    bool running;
    pid_t pid; /* process that started the server: a forked child must start its own */
    uint64_t nonce;
    uint64_t next_key;
    int listen_fd;
    int wake[2]; /* pipe that tells the server thread to stop */
    pthread_t thread;
    bool thread_up;       /* the server thread is past its start-up (see fdb_start) */
    pthread_cond_t up;    /* signalled when thread_up is set */
    fdb_entry_t *entries;
} fdb = {.lock = PTHREAD_MUTEX_INITIALIZER, .up = PTHREAD_COND_INITIALIZER, .listen_fd = -1,
         .wake = {-1, -1}};

static pthread_once_t fdb_atfork_once = PTHREAD_ONCE_INIT;

static void fdb_name(uint32_t pid, uint64_t nonce, struct sockaddr_un *addr, socklen_t *len)
{
    memset(addr, 0, sizeof *addr);
    addr->sun_family = AF_UNIX;
    /* abstract namespace: sun_path[0] == '\0', nothing left behind in the file system */
    int n = snprintf(addr->sun_path + 1, sizeof addr->sun_path - 1, "mscclpp-fdb-%u-%016llx",
                     (unsigned)pid, (unsigned long long)nonce);
    *len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + (size_t)n);
}

/* Poll `fd` (and `wake`, when >= 0) until the deadline: 1 ready, 0 expired or woken, -1 error. */
static int fdb_wait(int fd, short events, int wake, uint64_t deadline)
{
    for (;;) {
        uint64_t now = base_now_ns();
        if (now >= deadline) return 0;
        uint64_t ms = (deadline - now + 999999) / 1000000;
        struct pollfd p[2] = {{.fd = fd, .events = events}, {.fd = wake, .events = POLLIN}};
        int r = poll(p, wake >= 0 ? 2 : 1, ms > 100000 ? 100000 : (int)ms);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) return -1;
        if (wake >= 0 && p[1].revents) return 0;
        if (r > 0) return 1;
    }
}

static bool fdb_secret_equal(const uint8_t *a, const uint8_t *b)
{
    uint8_t diff = 0; /* constant time: no early exit that tells how much matched */
    for (int i = 0; i < HAL_FDB_SECRET_BYTES; i++) diff |= (uint8_t)(a[i] ^ b[i]);
    return diff == 0;
}

/* ------------------------------------------------------------------------------------------ */
/* Serving side */

/* A dup of the descriptor the request names, or the reason for refusing it. */
static uint32_t fdb_lookup(const uint8_t *req, int *fd)
{
    uint64_t key = hal_get_u64(req + 8);
    uint32_t status = FDB_REPLY_UNKNOWN;
    pthread_mutex_lock(&fdb.lock);
    for (fdb_entry_t *e = fdb.entries; e; e = e->next) {
        if (e->key != key) continue;
        if (fdb_secret_equal(e->secret, req + 16)) {
            *fd = fcntl(e->fd, F_DUPFD_CLOEXEC, 0); /* it may be withdrawn while we send */
            status = *fd >= 0 ? FDB_REPLY_OK : FDB_REPLY_SYSTEM;
        } else {
            status = FDB_REPLY_DENIED;
        }
        break;
    }
    pthread_mutex_unlock(&fdb.lock);
    return status;
}

/* Answer one connection; the caller closes it. */
static void fdb_answer(int conn, int wake)
{
    struct ucred cred = {0};
    socklen_t clen = sizeof cred;
    uint32_t status = FDB_REPLY_BAD;
    uint64_t key = 0;
    int fd = -1;
    if (getsockopt(conn, SOL_SOCKET, SO_PEERCRED, &cred, &clen) != 0 || cred.uid != geteuid()) {
        WARN(SUBSYS_MEM, "fd broker: refused a connection from uid %d (pid %d)", (int)cred.uid,
             (int)cred.pid);
        status = FDB_REPLY_DENIED;
    } else {
        /* The request must come within MSCCLPP_TIMEOUT; a stop request cuts the wait short. */
        uint8_t req[FDB_REQ_BYTES + 1];
        ssize_t n = -1;
        if (fdb_wait(conn, POLLIN, wake, base_now_ns() + config_timeout_ns()) <= 0) {
            WARN(SUBSYS_MEM, "fd broker: no request from pid %d in time (or stopping)",
                 (int)cred.pid);
            return;
        }
        do n = recv(conn, req, sizeof req, MSG_DONTWAIT);
        while (n < 0 && errno == EINTR);
        if (n <= 0) return; /* the client gave up */
        if (n == FDB_REQ_BYTES && hal_get_u32(req) == FDB_MAGIC &&
            hal_get_u32(req + 4) == FDB_VERSION) {
            key = hal_get_u64(req + 8);
            status = fdb_lookup(req, &fd);
        }
    }

    uint8_t rep[FDB_REP_BYTES];
    hal_put_u32(rep, FDB_MAGIC);
    hal_put_u32(rep + 4, status);
    struct iovec iov = {.iov_base = rep, .iov_len = sizeof rep};
    union {
        char buf[CMSG_SPACE(sizeof(int))];
        struct cmsghdr align;
    } ctl;
    struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1};
    if (fd >= 0) {
        memset(&ctl, 0, sizeof ctl);
        msg.msg_control = ctl.buf;
        msg.msg_controllen = sizeof ctl.buf;
        struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(sizeof(int));
        memcpy(CMSG_DATA(c), &fd, sizeof fd);
    }
    /* A fresh connection's queue has room for one small reply: this does not block long. */
    ssize_t sent;
    do sent = sendmsg(conn, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
    while (sent < 0 && errno == EINTR);
    if (sent < 0 && (errno == EPIPE || errno == ECONNRESET))
        /* The asker went away (it died or gave up): its own error names the cause, and this
         * process has nothing wrong, so this is not a warning of ours. */
        INFO(SUBSYS_MEM, "fd broker: pid %d left before its reply: %m", (int)cred.pid);
    else if (sent < 0)
        WARN(SUBSYS_MEM, "fd broker: reply to pid %d failed: %m", (int)cred.pid);
    if (fd >= 0) close(fd);
    if (status != FDB_REPLY_OK)
        INFO(SUBSYS_MEM, "fd broker: refused key %llu to pid %d (status %u)",
             (unsigned long long)key, (int)cred.pid, (unsigned)status);
}

static void *fdb_thread(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&fdb.lock);
    int listen_fd = fdb.listen_fd, wake_fd = fdb.wake[0];
    fdb.thread_up = true;
    pthread_cond_broadcast(&fdb.up);
    pthread_mutex_unlock(&fdb.lock);
    for (;;) {
        struct pollfd p[2] = {{.fd = listen_fd, .events = POLLIN},
                              {.fd = wake_fd, .events = POLLIN}};
        if (poll(p, 2, -1) < 0) {
            if (errno == EINTR) continue;
            WARN(SUBSYS_MEM, "fd broker: poll failed, no longer serving: %m");
            break;
        }
        if (p[1].revents) break;
        if (!(p[0].revents & POLLIN)) continue;
        int conn = accept4(listen_fd, NULL, NULL, SOCK_CLOEXEC);
        if (conn < 0) {
            if (errno == EINTR || errno == EAGAIN || errno == ECONNABORTED || errno == EPROTO)
                continue; /* the peer went away between poll and accept */
            if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
                struct timespec ts = {0, 1000000}; /* out of descriptors: back off, retry */
                nanosleep(&ts, NULL);
                continue;
            }
            WARN(SUBSYS_MEM, "fd broker: accept failed, no longer serving: %m");
            break;
        }
        fdb_answer(conn, wake_fd);
        close(conn);
    }
    return NULL;
}

static void fdb_close_all(void)
{
    fdb_entry_t *e = fdb.entries;
    while (e) {
        fdb_entry_t *next = e->next;
        if (!e->borrowed) close(e->fd);
        free(e);
        e = next;
    }
    fdb.entries = NULL;
    if (fdb.listen_fd >= 0) close(fdb.listen_fd);
    for (int i = 0; i < 2; i++)
        if (fdb.wake[i] >= 0) close(fdb.wake[i]);
    fdb.listen_fd = fdb.wake[0] = fdb.wake[1] = -1;
    fdb.running = false;
}

/* fork(): hold the lock across it so the child gets a consistent list, then the child, which
 * has no server thread, drops the parent's state and serves its own descriptors later. */
static void fdb_prepare(void) { pthread_mutex_lock(&fdb.lock); }
static void fdb_parent(void) { pthread_mutex_unlock(&fdb.lock); }
static void fdb_child(void)
{
    fdb_close_all();
    pthread_mutex_unlock(&fdb.lock);
}
static void fdb_register_atfork(void) { pthread_atfork(fdb_prepare, fdb_parent, fdb_child); }

/* Called with the lock held. */
static mscclpp_result_t fdb_start(void)
{
    if (fdb.running && fdb.pid == getpid()) return MSCCLPP_OK;
    if (getrandom(&fdb.nonce, sizeof fdb.nonce, 0) != (ssize_t)sizeof fdb.nonce)
        return ERR_SYS("fd broker: getrandom failed: %m");
    fdb.pid = getpid();
    fdb.listen_fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fdb.listen_fd < 0) return ERR_SYS("fd broker: socket failed: %m");
    struct sockaddr_un addr;
    socklen_t len;
    fdb_name((uint32_t)fdb.pid, fdb.nonce, &addr, &len);
    mscclpp_result_t res;
    if (bind(fdb.listen_fd, (struct sockaddr *)&addr, len) != 0 ||
        listen(fdb.listen_fd, 128) != 0) {
        res = ERR_SYS("fd broker: cannot listen on @%s: %m", addr.sun_path + 1);
        goto close_socket;
    }
    if (pipe2(fdb.wake, O_CLOEXEC) != 0) {
        res = ERR_SYS("fd broker: pipe failed: %m");
        goto close_socket;
    }
    /* Signals belong to the application's threads: the server blocks them all. */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    fdb.thread_up = false;
    int rc = pthread_create(&fdb.thread, NULL, fdb_thread, NULL);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc == 0) pthread_setname_np(fdb.thread, "mscclpp-fdb");
    if (rc != 0) {
        errno = rc;
        res = ERR_SYS("fd broker: cannot start the serving thread: %m");
        goto close_pipe;
    }
    fdb.running = true;
    /*
     * Return only once the thread runs its own code. A process that forks right after serving
     * (as the tests and some applications do) would otherwise fork while the new thread is
     * still in its start-up, which under AddressSanitizer holds the allocator's lock (the
     * thread frees pthread_getattr_np's buffer in AsanThread::Init): the child inherits the
     * lock held, and the first thread it starts (its own broker) waits on it forever, so a
     * fetch from the child timed out (t_fdb_across_fork, 1 run in 60-110 under ASan).
     * Bounded: a thread that has not started within MSCCLPP_TIMEOUT is only logged.
     */
    uint64_t deadline = base_now_ns() + config_timeout_ns();
    while (!fdb.thread_up) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += 10 * 1000 * 1000;
        if (ts.tv_nsec >= 1000000000L) ts.tv_sec++, ts.tv_nsec -= 1000000000L;
        pthread_cond_timedwait(&fdb.up, &fdb.lock, &ts);
        if (!fdb.thread_up && base_now_ns() >= deadline) {
            WARN(SUBSYS_MEM, "fd broker: the serving thread has not started within "
                 "MSCCLPP_TIMEOUT; going on without waiting");
            break;
        }
    }
    INFO(SUBSYS_MEM, "fd broker serving on @%s", addr.sun_path + 1);
    return MSCCLPP_OK;

close_pipe:
    close(fdb.wake[0]);
    close(fdb.wake[1]);
    fdb.wake[0] = fdb.wake[1] = -1;
close_socket:
    close(fdb.listen_fd);
    fdb.listen_fd = -1;
    return res;
}

static mscclpp_result_t serve(int fd, bool borrowed, hal_fdb_ticket_t *ticket)
{
    CHECK_ARG(fd >= 0);
    CHECK_ARG(ticket != NULL);
    pthread_once(&fdb_atfork_once, fdb_register_atfork);
    fdb_entry_t *e = calloc(1, sizeof *e);
    if (!e) return ERR(MSCCLPP_ERR_NO_MEMORY, "fd broker: out of memory");
    /* A secret per served descriptor: a ticket opens that descriptor and no other. */
    if (getrandom(e->secret, sizeof e->secret, 0) != (ssize_t)sizeof e->secret) {
        free(e);
        return ERR_SYS("fd broker: getrandom failed: %m");
    }
    pthread_mutex_lock(&fdb.lock);
    mscclpp_result_t res = fdb_start();
    if (res != MSCCLPP_OK) {
        pthread_mutex_unlock(&fdb.lock);
        free(e);
        return res;
    }
    e->key = ++fdb.next_key;
    e->fd = fd;
    e->borrowed = borrowed;
    e->next = fdb.entries;
    fdb.entries = e;
    ticket->pid = (uint32_t)fdb.pid;
    ticket->nonce = fdb.nonce;
    ticket->key = e->key;
    memcpy(ticket->secret, e->secret, sizeof e->secret);
    pthread_mutex_unlock(&fdb.lock);
    return MSCCLPP_OK;
}

mscclpp_result_t hal_fdb_serve(int fd, hal_fdb_ticket_t *ticket)
{
    return serve(fd, false, ticket);
}

mscclpp_result_t hal_fdb_serve_borrowed(int fd, hal_fdb_ticket_t *ticket)
{
    return serve(fd, true, ticket);
}

void hal_fdb_withdraw(uint64_t key)
{
    pthread_mutex_lock(&fdb.lock);
    for (fdb_entry_t **pp = &fdb.entries; *pp; pp = &(*pp)->next) {
        fdb_entry_t *e = *pp;
        if (e->key != key) continue;
        *pp = e->next;
        if (!e->borrowed) close(e->fd);
        free(e);
        break;
    }
    pthread_mutex_unlock(&fdb.lock);
}

void hal_fdb_shutdown(void)
{
    pthread_mutex_lock(&fdb.lock);
    if (!fdb.running || fdb.pid != getpid()) {
        pthread_mutex_unlock(&fdb.lock);
        return;
    }
    /* the thread takes the lock to answer: let it finish without the lock held */
    pthread_t thread = fdb.thread;
    ssize_t n;
    do n = write(fdb.wake[1], "x", 1);
    while (n < 0 && errno == EINTR);
    pthread_mutex_unlock(&fdb.lock);
    pthread_join(thread, NULL);
    pthread_mutex_lock(&fdb.lock);
    fdb_close_all();
    pthread_mutex_unlock(&fdb.lock);
}

/* ------------------------------------------------------------------------------------------ */
/* Fetching side. Its errors are recorded, not logged: the caller (an import) knows which rank
 * owns the memory and logs the error once with that rank (a log line naming only a process id
 * said nothing about which peer failed, issue 22 item 5). */
#define FETCH_ERR(result, ...) core_error_quiet((result), __VA_ARGS__)

/* Connect to the server named by the ticket, retrying a full backlog until the deadline. */
static mscclpp_result_t fdb_connect(const hal_fdb_ticket_t *t, uint64_t deadline, int *out)
{
    struct sockaddr_un addr;
    socklen_t len;
    fdb_name(t->pid, t->nonce, &addr, &len);
    int sock = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (sock < 0) return FETCH_ERR(MSCCLPP_ERR_SYSTEM, "fd broker: socket failed: %m");
    unsigned tries = 0;
    while (connect(sock, (struct sockaddr *)&addr, len) != 0) {
        int e = errno;
        if (e == EINTR) continue;
        if (e == EAGAIN) {
            if (base_now_ns() >= deadline) {
                close(sock);
                return FETCH_ERR(MSCCLPP_ERR_TIMEOUT,
                                 "fd broker: pid %u accepted no connection within MSCCLPP_TIMEOUT "
                                 "(%llu s)",
                                 (unsigned)t->pid,
                                 (unsigned long long)(config_timeout_ns() / 1000000000u));
            }
            /* a full backlog clears in milliseconds: yield a few times, then sleep */
            if (++tries < 8) {
                sched_yield();
            } else {
                struct timespec ts = {0, 1000000};
                nanosleep(&ts, NULL);
            }
            continue;
        }
        close(sock);
        errno = e;
        if (e == ECONNREFUSED || e == ENOENT)
            return FETCH_ERR(MSCCLPP_ERR_REMOTE,
                             "fd broker: pid %u no longer serves (@%s: %m); did it exit?",
                             (unsigned)t->pid, addr.sun_path + 1);
        return FETCH_ERR(MSCCLPP_ERR_REMOTE, "fd broker: cannot reach pid %u at @%s: %m",
                         (unsigned)t->pid, addr.sun_path + 1);
    }
    *out = sock;
    return MSCCLPP_OK;
}

static const char *fdb_status_text(uint32_t status)
{
    switch (status) {
    case FDB_REPLY_UNKNOWN: return "unknown key: withdrawn (freed) already?";
    case FDB_REPLY_DENIED: return "wrong secret or user (forged or stale handle)";
    case FDB_REPLY_BAD: return "the server could not read the request";
    case FDB_REPLY_SYSTEM: return "the server could not duplicate the descriptor";
    default: return "unknown refusal";
    }
}

/* Send the request, receive the reply and the descriptor. */
static mscclpp_result_t fdb_request(int sock, const hal_fdb_ticket_t *t, uint64_t deadline,
                                    int *fd)
{
    uint8_t req[FDB_REQ_BYTES];
    hal_put_u32(req, FDB_MAGIC);
    hal_put_u32(req + 4, FDB_VERSION);
    hal_put_u64(req + 8, t->key);
    memcpy(req + 16, t->secret, HAL_FDB_SECRET_BYTES);
    ssize_t n;
    for (;;) {
        n = send(sock, req, sizeof req, MSG_NOSIGNAL);
        if (n >= 0 || (errno != EINTR && errno != EAGAIN)) break;
        if (errno == EINTR) continue;
        int r = fdb_wait(sock, POLLOUT, -1, deadline);
        if (r == 0)
            return FETCH_ERR(MSCCLPP_ERR_TIMEOUT,
                             "fd broker: pid %u took no request within MSCCLPP_TIMEOUT",
                             (unsigned)t->pid);
        if (r < 0) return FETCH_ERR(MSCCLPP_ERR_SYSTEM, "fd broker: poll failed: %m");
    }
    if (n != (ssize_t)sizeof req)
        return FETCH_ERR(MSCCLPP_ERR_REMOTE, "fd broker: request to pid %u failed: %m",
                         (unsigned)t->pid);

    uint8_t rep[FDB_REP_BYTES + 1];
    union {
        char buf[CMSG_SPACE(sizeof(int) * FDB_MAX_FDS)];
        struct cmsghdr align;
    } ctl;
    struct iovec iov = {.iov_base = rep, .iov_len = sizeof rep};
    struct msghdr msg;
    for (;;) {
        int r = fdb_wait(sock, POLLIN, -1, deadline);
        if (r < 0) return FETCH_ERR(MSCCLPP_ERR_SYSTEM, "fd broker: poll failed: %m");
        if (r == 0)
            return FETCH_ERR(MSCCLPP_ERR_TIMEOUT,
                             "fd broker: pid %u did not answer within MSCCLPP_TIMEOUT (%llu s)",
                             (unsigned)t->pid,
                             (unsigned long long)(config_timeout_ns() / 1000000000u));
        memset(&msg, 0, sizeof msg);
        memset(&ctl, 0, sizeof ctl);
        msg.msg_iov = &iov;
        msg.msg_iovlen = 1;
        msg.msg_control = ctl.buf;
        msg.msg_controllen = sizeof ctl.buf;
        n = recvmsg(sock, &msg, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
        if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
        break;
    }
    if (n < 0)
        return FETCH_ERR(MSCCLPP_ERR_REMOTE, "fd broker: receive from pid %u failed: %m",
                         (unsigned)t->pid);

    /* Collect every descriptor passed, so none leaks whatever else is wrong. */
    int fds[FDB_MAX_FDS], nfds = 0;
    for (struct cmsghdr *c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
        if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
        size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        for (size_t i = 0; i < k && nfds < FDB_MAX_FDS; i++)
            memcpy(&fds[nfds++], CMSG_DATA(c) + i * sizeof(int), sizeof(int));
    }
    mscclpp_result_t res = MSCCLPP_OK;
    uint32_t status = n >= 8 ? hal_get_u32(rep + 4) : FDB_REPLY_BAD;
    if (n == 0)
        res = FETCH_ERR(MSCCLPP_ERR_REMOTE,
                        "fd broker: pid %u closed the connection without "
                        "answering",
                        (unsigned)t->pid);
    else if (n != FDB_REP_BYTES || hal_get_u32(rep) != FDB_MAGIC || (msg.msg_flags & MSG_TRUNC))
        res = FETCH_ERR(MSCCLPP_ERR_REMOTE, "fd broker: malformed answer (%zd bytes) from pid %u",
                        n, (unsigned)t->pid);
    else if (status != FDB_REPLY_OK)
        res = FETCH_ERR(MSCCLPP_ERR_REMOTE, "fd broker: pid %u refused key %llu (%s)",
                        (unsigned)t->pid, (unsigned long long)t->key, fdb_status_text(status));
    else if ((msg.msg_flags & MSG_CTRUNC) || nfds != 1)
        res = FETCH_ERR(MSCCLPP_ERR_REMOTE, "fd broker: pid %u sent %d descriptors, expected 1%s",
                        (unsigned)t->pid, nfds, (msg.msg_flags & MSG_CTRUNC) ? " (truncated)" : "");
    if (res != MSCCLPP_OK) {
        for (int i = 0; i < nfds; i++) close(fds[i]);
        return res;
    }
    *fd = fds[0];
    return MSCCLPP_OK;
}

mscclpp_result_t hal_fdb_fetch(const hal_fdb_ticket_t *ticket, int *fd)
{
    CHECK_ARG(ticket != NULL);
    CHECK_ARG(fd != NULL);
    CHECK_ARG(ticket->pid > 0);
    uint64_t deadline = base_now_ns() + config_timeout_ns(); /* bounds the whole exchange */
    int sock = -1;
    CHECK(fdb_connect(ticket, deadline, &sock));
    mscclpp_result_t res = fdb_request(sock, ticket, deadline, fd);
    close(sock);
    return res;
}

void hal_fdb_ticket_encode(const hal_fdb_ticket_t *ticket, uint8_t *buf)
{
    hal_put_u32(buf, ticket->pid);
    hal_put_u64(buf + 4, ticket->nonce);
    hal_put_u64(buf + 12, ticket->key);
    memcpy(buf + 20, ticket->secret, HAL_FDB_SECRET_BYTES);
}

void hal_fdb_ticket_decode(const uint8_t *buf, hal_fdb_ticket_t *ticket)
{
    ticket->pid = hal_get_u32(buf);
    ticket->nonce = hal_get_u64(buf + 4);
    ticket->key = hal_get_u64(buf + 12);
    memcpy(ticket->secret, buf + 20, HAL_FDB_SECRET_BYTES);
}
