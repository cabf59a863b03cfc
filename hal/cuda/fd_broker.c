/* File-descriptor broker over an abstract Unix socket (see fd_broker.h). */
#define _GNU_SOURCE
#include "hal/cuda/fd_broker.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include "core/config.h"
#include "core/debug.h"

#define FDB_MAGIC 0x4244464dU /* "MFDB" */
#define FDB_VERSION 1
#define FDB_REQ_BYTES 32 /* magic 4, version 4, key 8, secret 16 */

enum { FDB_REPLY_OK = 0, FDB_REPLY_UNKNOWN = 1, FDB_REPLY_DENIED = 2, FDB_REPLY_BAD = 3 };

typedef struct fdb_entry {
    struct fdb_entry *next;
    uint64_t key;
    int fd;
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
    fdb_entry_t *entries;
} fdb = {.lock = PTHREAD_MUTEX_INITIALIZER, .listen_fd = -1, .wake = {-1, -1}};

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

static void fdb_set_timeouts(int sock)
{
    uint64_t ns = config_timeout_ns();
    struct timeval tv = {.tv_sec = (time_t)(ns / 1000000000u),
                         .tv_usec = (suseconds_t)(ns % 1000000000u / 1000u)};
    (void)setsockopt(sock, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    (void)setsockopt(sock, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
}

static bool fdb_read_full(int sock, uint8_t *buf, size_t len)
{
    size_t got = 0;
    while (got < len) {
        ssize_t n = recv(sock, buf + got, len - got, 0);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return false;
        got += (size_t)n;
    }
    return true;
}

static bool fdb_secret_equal(const uint8_t *a, const uint8_t *b)
{
    uint8_t diff = 0; /* constant time: no early exit that tells how much matched */
    for (int i = 0; i < HAL_FDB_SECRET_BYTES; i++) diff |= (uint8_t)(a[i] ^ b[i]);
    return diff == 0;
}

/* Answer one request; the connection is closed by the caller. */
static void fdb_answer(int conn)
{
    uint8_t req[FDB_REQ_BYTES], reply[4];
    int fd = -1;
    uint32_t status = FDB_REPLY_BAD;

    fdb_set_timeouts(conn);
    struct ucred cred = {0};
    socklen_t clen = sizeof cred;
    if (getsockopt(conn, SOL_SOCKET, SO_PEERCRED, &cred, &clen) != 0 || cred.uid != geteuid()) {
        status = FDB_REPLY_DENIED;
    } else if (fdb_read_full(conn, req, sizeof req) && hal_get_u32(req) == FDB_MAGIC &&
               hal_get_u32(req + 4) == FDB_VERSION) {
        uint64_t key = hal_get_u64(req + 8);
        status = FDB_REPLY_UNKNOWN;
        pthread_mutex_lock(&fdb.lock);
        for (fdb_entry_t *e = fdb.entries; e; e = e->next) {
            if (e->key != key) continue;
            if (fdb_secret_equal(e->secret, req + 16)) {
                fd = dup(e->fd); /* the entry may be withdrawn while we send */
                status = fd >= 0 ? FDB_REPLY_OK : FDB_REPLY_BAD;
            } else {
                status = FDB_REPLY_DENIED;
            }
            break;
        }
        pthread_mutex_unlock(&fdb.lock);
    }

    hal_put_u32(reply, status);
    struct iovec iov = {.iov_base = reply, .iov_len = sizeof reply};
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
    if (sendmsg(conn, &msg, MSG_NOSIGNAL) < 0)
        WARN(SUBSYS_MEM, "fd broker: reply to pid %d failed: %m", (int)cred.pid);
    if (fd >= 0) close(fd);
}

static void *fdb_thread(void *arg)
{
    int listen_fd = fdb.listen_fd, wake_fd = fdb.wake[0];
    (void)arg;
    for (;;) {
        struct pollfd p[2] = {{.fd = listen_fd, .events = POLLIN}, {.fd = wake_fd, .events = POLLIN}};
        if (poll(p, 2, -1) < 0) {
            if (errno == EINTR) continue;
            WARN(SUBSYS_MEM, "fd broker: poll failed, stopping: %m");
            break;
        }
        if (p[1].revents) break;
        if (!(p[0].revents & POLLIN)) continue;
        int conn = accept4(listen_fd, NULL, NULL, SOCK_CLOEXEC);
        if (conn < 0) continue; /* the peer went away between poll and accept */
        fdb_answer(conn);
        close(conn);
    }
    return NULL;
}

static void fdb_close_all(void)
{
    fdb_entry_t *e = fdb.entries;
    while (e) {
        fdb_entry_t *next = e->next;
        close(e->fd);
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
    fdb.listen_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fdb.listen_fd < 0) return ERR_SYS("fd broker: socket failed: %m");
    struct sockaddr_un addr;
    socklen_t len;
    fdb_name((uint32_t)fdb.pid, fdb.nonce, &addr, &len);
    mscclpp_result_t res;
    if (bind(fdb.listen_fd, (struct sockaddr *)&addr, len) != 0 || listen(fdb.listen_fd, 64) != 0) {
        res = ERR_SYS("fd broker: cannot listen on @%s: %m", addr.sun_path + 1);
        goto fail_socket;
    }
    if (pipe2(fdb.wake, O_CLOEXEC) != 0) {
        res = ERR_SYS("fd broker: pipe failed: %m");
        goto fail_socket;
    }
    int rc = pthread_create(&fdb.thread, NULL, fdb_thread, NULL);
    if (rc != 0) {
        errno = rc;
        res = ERR_SYS("fd broker: cannot start the serving thread: %m");
        goto fail_pipe;
    }
    fdb.running = true;
    INFO(SUBSYS_MEM, "fd broker serving on @%s", addr.sun_path + 1);
    return MSCCLPP_OK;

fail_pipe:
    close(fdb.wake[0]);
    close(fdb.wake[1]);
    fdb.wake[0] = fdb.wake[1] = -1;
fail_socket:
    close(fdb.listen_fd);
    fdb.listen_fd = -1;
    return res;
}

mscclpp_result_t hal_fdb_serve(int fd, hal_fdb_ticket_t *ticket)
{
    CHECK_ARG(fd >= 0);
    CHECK_ARG(ticket != NULL);
    pthread_once(&fdb_atfork_once, fdb_register_atfork);
    fdb_entry_t *e = calloc(1, sizeof *e);
    if (!e) return ERR(MSCCLPP_ERR_NO_MEMORY, "fd broker: out of memory");
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
    e->next = fdb.entries;
    fdb.entries = e;
    ticket->pid = (uint32_t)fdb.pid;
    ticket->nonce = fdb.nonce;
    ticket->key = e->key;
    memcpy(ticket->secret, e->secret, sizeof e->secret);
    pthread_mutex_unlock(&fdb.lock);
    return MSCCLPP_OK;
}

void hal_fdb_withdraw(uint64_t key)
{
    pthread_mutex_lock(&fdb.lock);
    for (fdb_entry_t **pp = &fdb.entries; *pp; pp = &(*pp)->next) {
        fdb_entry_t *e = *pp;
        if (e->key != key) continue;
        *pp = e->next;
        close(e->fd);
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

mscclpp_result_t hal_fdb_fetch(const hal_fdb_ticket_t *ticket, int *fd)
{
    CHECK_ARG(ticket != NULL);
    CHECK_ARG(fd != NULL);
    mscclpp_result_t res;
    int sock = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (sock < 0) return ERR_SYS("fd broker: socket failed: %m");
    fdb_set_timeouts(sock); /* bounds connect, send and receive by MSCCLPP_TIMEOUT */

    struct sockaddr_un addr;
    socklen_t len;
    fdb_name(ticket->pid, ticket->nonce, &addr, &len);
    while (connect(sock, (struct sockaddr *)&addr, len) != 0) {
        if (errno == EINTR) continue;
        if (errno == EAGAIN || errno == EINPROGRESS)
            res = ERR(MSCCLPP_ERR_TIMEOUT, "fd broker: pid %u did not accept within %llu s",
                      (unsigned)ticket->pid,
                      (unsigned long long)(config_timeout_ns() / 1000000000u));
        else
            res = ERR(MSCCLPP_ERR_REMOTE, "fd broker: cannot reach pid %u at @%s (exited?): %m",
                      (unsigned)ticket->pid, addr.sun_path + 1);
        goto close_sock;
    }

    uint8_t req[FDB_REQ_BYTES];
    hal_put_u32(req, FDB_MAGIC);
    hal_put_u32(req + 4, FDB_VERSION);
    hal_put_u64(req + 8, ticket->key);
    memcpy(req + 16, ticket->secret, HAL_FDB_SECRET_BYTES);
    if (send(sock, req, sizeof req, MSG_NOSIGNAL) != (ssize_t)sizeof req) {
        res = ERR(MSCCLPP_ERR_REMOTE, "fd broker: request to pid %u failed: %m",
                  (unsigned)ticket->pid);
        goto close_sock;
    }

    uint8_t reply[4];
    struct iovec iov = {.iov_base = reply, .iov_len = sizeof reply};
    union {
        char buf[CMSG_SPACE(sizeof(int))];
        struct cmsghdr align;
    } ctl;
    memset(&ctl, 0, sizeof ctl);
    struct msghdr msg = {
        .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl.buf, .msg_controllen = sizeof ctl.buf};
    ssize_t n;
    do n = recvmsg(sock, &msg, MSG_CMSG_CLOEXEC);
    while (n < 0 && errno == EINTR);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
        res = ERR(MSCCLPP_ERR_TIMEOUT, "fd broker: pid %u did not answer within %llu s",
                  (unsigned)ticket->pid, (unsigned long long)(config_timeout_ns() / 1000000000u));
        goto close_sock;
    }
    if (n != (ssize_t)sizeof reply) {
        res = ERR(MSCCLPP_ERR_REMOTE, "fd broker: short reply from pid %u: %m",
                  (unsigned)ticket->pid);
        goto close_sock;
    }
    int got = -1;
    struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
    if (c && c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS &&
        c->cmsg_len == CMSG_LEN(sizeof(int)))
        memcpy(&got, CMSG_DATA(c), sizeof got);
    uint32_t status = hal_get_u32(reply);
    if (status != FDB_REPLY_OK || got < 0) {
        if (got >= 0) close(got);
        res = ERR(MSCCLPP_ERR_REMOTE, "fd broker: pid %u refused key %llu (%s)",
                  (unsigned)ticket->pid, (unsigned long long)ticket->key,
                  status == FDB_REPLY_UNKNOWN  ? "unknown key: freed already?"
                  : status == FDB_REPLY_DENIED ? "wrong secret or user"
                                               : "malformed exchange");
        goto close_sock;
    }
    *fd = got;
    res = MSCCLPP_OK;

close_sock:
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
