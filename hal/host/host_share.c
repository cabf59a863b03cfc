/*
 * Sharing host-backend memory between processes of one node. An exported allocation is named
 * by (exporter pid, broker socket, allocation id, random cookie). The exporter runs a broker
 * thread on an abstract AF_UNIX socket; an importer connects, presents id and cookie, and gets
 * the allocation's memfd through SCM_RIGHTS, which it maps MAP_SHARED. Abstract sockets have
 * no file permissions: the unguessable socket name and cookie, and a same-user check, guard it.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "core/config.h"
#include "core/debug.h"
#include "hal/host/host.h"
#include "hal/host/host_wait.h"

#define SHARE_VERSION 1u
#define SHARE_MAGIC 0x4d53484du /* "MHSM" */
#define SHARE_NAME_MAX 64
#define SHARE_HDR 41 /* version 4, pid 4, id 8, cookie 16, size 8, name length 1 */
#define SHARE_REQ_BYTES 32
#define SHARE_REP_BYTES 16

_Static_assert(SHARE_HDR + SHARE_NAME_MAX <= HAL_MEM_HANDLE_BYTES, "handle data too small");

/* ------------------------------------------------------------------------------------------ */
/* Explicit little-endian encoding */

static void put32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static void put64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static uint32_t get32(const uint8_t *p)
{
    uint32_t v = 0;
    for (int i = 0; i < 4; i++) v |= (uint32_t)p[i] << (8 * i);
    return v;
}
static uint64_t get64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++) v |= (uint64_t)p[i] << (8 * i);
    return v;
}

typedef struct {
    pid_t pid;
    uint64_t id;
    uint8_t cookie[HOST_COOKIE_BYTES];
    uint64_t size;
    char name[SHARE_NAME_MAX + 1];
    size_t name_len;
} share_desc_t;

static void desc_encode(const share_desc_t *d, hal_mem_handle_t *h)
{
    memset(h, 0, sizeof *h);
    h->kind = HAL_HANDLE_HOST_MEMFD;
    h->alloc_size = d->size;
    uint8_t *p = h->data;
    put32(p, SHARE_VERSION);
    put32(p + 4, (uint32_t)d->pid);
    put64(p + 8, d->id);
    memcpy(p + 16, d->cookie, HOST_COOKIE_BYTES);
    put64(p + 32, d->size);
    p[40] = (uint8_t)d->name_len;
    memcpy(p + SHARE_HDR, d->name, d->name_len);
    h->len = (uint32_t)(SHARE_HDR + d->name_len);
}

static mscclpp_result_t desc_decode(const hal_mem_handle_t *h, share_desc_t *d)
{
    if (h->kind != HAL_HANDLE_HOST_MEMFD)
        return ERR_ARG("mem_import: handle of kind %u is not a host memfd handle (%d)", h->kind,
                       HAL_HANDLE_HOST_MEMFD);
    if (h->len < SHARE_HDR || h->len > HAL_MEM_HANDLE_BYTES)
        return ERR_ARG("mem_import: malformed host handle (%u data bytes)", h->len);
    const uint8_t *p = h->data;
    uint32_t version = get32(p);
    if (version != SHARE_VERSION)
        return ERR_ARG("mem_import: host handle version %u, this library reads %u", version,
                       SHARE_VERSION);
    d->pid = (pid_t)get32(p + 4);
    d->id = get64(p + 8);
    memcpy(d->cookie, p + 16, HOST_COOKIE_BYTES);
    d->size = get64(p + 32);
    d->name_len = p[40];
    if (d->name_len == 0 || d->name_len > SHARE_NAME_MAX || SHARE_HDR + d->name_len != h->len)
        return ERR_ARG("mem_import: malformed host handle (socket name of %zu bytes)",
                       d->name_len);
    memcpy(d->name, p + SHARE_HDR, d->name_len);
    d->name[d->name_len] = '\0';
    if (d->size == 0 || d->size != h->alloc_size || d->pid <= 0)
        return ERR_ARG("mem_import: malformed host handle (size %llu, alloc_size %llu, pid %d)",
                       (unsigned long long)d->size, (unsigned long long)h->alloc_size, (int)d->pid);
    return MSCCLPP_OK;
}

static socklen_t abstract_addr(const char *name, size_t len, struct sockaddr_un *addr)
{
    memset(addr, 0, sizeof *addr);
    addr->sun_family = AF_UNIX;
    memcpy(addr->sun_path + 1, name, len); /* sun_path[0] = 0: abstract namespace */
    return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + len);
}

/* ------------------------------------------------------------------------------------------ */
/* Broker (exporting side) */

static struct {
    pthread_mutex_t lock;
    bool running;
    pid_t pid;
    int fd;
    char name[SHARE_NAME_MAX + 1];
    size_t name_len;
} broker = {.lock = PTHREAD_MUTEX_INITIALIZER, .fd = -1};

static pthread_once_t broker_atfork_once = PTHREAD_ONCE_INIT;
static void broker_prepare(void) { pthread_mutex_lock(&broker.lock); }
static void broker_parent(void) { pthread_mutex_unlock(&broker.lock); }
static void broker_child(void)
{
    /* The child has no broker thread: its first export starts its own broker. */
    if (broker.fd >= 0) close(broker.fd);
    broker.fd = -1;
    broker.running = false;
    pthread_mutex_unlock(&broker.lock);
}
static void broker_atfork(void) { pthread_atfork(broker_prepare, broker_parent, broker_child); }

static int poll_timeout_ms(uint64_t deadline)
{
    uint64_t now = host_now_ns();
    if (now >= deadline) return 0;
    uint64_t ms = (deadline - now + 999999) / 1000000;
    return ms > 100000 ? 100000 : (int)ms;
}

static void broker_serve(int conn)
{
    struct ucred cred;
    socklen_t len = sizeof cred;
    if (getsockopt(conn, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0 ||
        (cred.uid != geteuid() && cred.uid != 0)) {
        WARN(SUBSYS_MEM, "host memory broker: refused a connection from uid %d (pid %d)",
             (int)cred.uid, (int)cred.pid);
        return;
    }
    uint64_t deadline = host_now_ns() + config_timeout_ns();
    uint8_t req[SHARE_REQ_BYTES + 1];
    ssize_t n;
    for (;;) {
        struct pollfd pfd = {.fd = conn, .events = POLLIN};
        int r = poll(&pfd, 1, poll_timeout_ms(deadline));
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) {
            WARN(SUBSYS_MEM, "host memory broker: pid %d sent no request in time", (int)cred.pid);
            return;
        }
        n = recv(conn, req, sizeof req, 0);
        if (n < 0 && errno == EINTR) continue;
        break;
    }
    if (n <= 0) return; /* the importer gave up */

    host_serve_status_t st = HOST_SERVE_BAD;
    int fd = -1;
    uint64_t size = 0;
    uint64_t id = 0;
    if (n == SHARE_REQ_BYTES && get32(req) == SHARE_MAGIC && get32(req + 4) == SHARE_VERSION) {
        id = get64(req + 8);
        st = host_reg_serve(id, req + 16, &fd, &size);
    }
    uint8_t rep[SHARE_REP_BYTES];
    put32(rep, SHARE_MAGIC);
    put32(rep + 4, (uint32_t)st);
    put64(rep + 8, size);
    struct iovec iov = {.iov_base = rep, .iov_len = sizeof rep};
    union {
        struct cmsghdr align;
        char buf[CMSG_SPACE(sizeof(int))];
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
    while (sendmsg(conn, &msg, MSG_NOSIGNAL) < 0 && errno == EINTR) {}
    if (fd >= 0) close(fd);
    if (st != HOST_SERVE_OK)
        INFO(SUBSYS_MEM, "host memory broker: refused allocation %llu to pid %d (status %d)",
             (unsigned long long)id, (int)cred.pid, (int)st);
}

static void *broker_main(void *arg)
{
    int lfd = (int)(intptr_t)arg;
    for (;;) {
        int conn = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
        if (conn < 0) {
            if (errno == EINTR || errno == ECONNABORTED || errno == EPROTO) continue;
            if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
                struct timespec ts = {0, 1000000};
                nanosleep(&ts, NULL);
                continue;
            }
            WARN(SUBSYS_MEM, "host memory broker: accept: %m; no longer serving exports");
            return NULL;
        }
        broker_serve(conn);
        close(conn);
    }
}

static mscclpp_result_t broker_start(void)
{
    pthread_once(&broker_atfork_once, broker_atfork);
    mscclpp_result_t res = MSCCLPP_OK;
    pthread_mutex_lock(&broker.lock);
    if (broker.running) goto unlock;
    uint8_t rnd[16];
    if (getrandom(rnd, sizeof rnd, 0) != (ssize_t)sizeof rnd) {
        res = ERR_SYS("host memory broker: getrandom: %m");
        goto unlock;
    }
    pid_t pid = getpid();
    int len = snprintf(broker.name, sizeof broker.name, "mscclpp-hal-%d-", (int)pid);
    for (int i = 0; i < 16; i++)
        len += snprintf(broker.name + len, sizeof broker.name - (size_t)len, "%02x", rnd[i]);
    broker.name_len = (size_t)len;
    int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        res = ERR_SYS("host memory broker: socket: %m");
        goto unlock;
    }
    struct sockaddr_un addr;
    socklen_t alen = abstract_addr(broker.name, broker.name_len, &addr);
    if (bind(fd, (struct sockaddr *)&addr, alen) != 0) {
        res = ERR_SYS("host memory broker: bind to abstract socket @%s: %m", broker.name);
        goto close_fd;
    }
    if (listen(fd, 128) != 0) {
        res = ERR_SYS("host memory broker: listen on @%s: %m", broker.name);
        goto close_fd;
    }
    pthread_t th;
    int err = host_thread_create(&th, broker_main, (void *)(intptr_t)fd);
    if (err) {
        errno = err;
        res = ERR_SYS("host memory broker: cannot start its thread: %m");
        goto close_fd;
    }
    pthread_detach(th); /* serves until the process exits */
    broker.fd = fd;
    broker.pid = pid;
    broker.running = true;
    INFO(SUBSYS_MEM, "host memory broker serving on @%s", broker.name);
    goto unlock;
close_fd:
    close(fd);
unlock:
    pthread_mutex_unlock(&broker.lock);
    return res;
}

mscclpp_result_t host_mem_export(void *base, hal_mem_handle_t *handle)
{
    CHECK_ARG(base != NULL);
    CHECK_ARG(handle != NULL);
    share_desc_t d;
    size_t size;
    CHECK(host_reg_export(base, &d.id, d.cookie, &size));
    CHECK(broker_start());
    pthread_mutex_lock(&broker.lock);
    d.pid = broker.pid;
    d.name_len = broker.name_len;
    memcpy(d.name, broker.name, broker.name_len + 1);
    pthread_mutex_unlock(&broker.lock);
    d.size = size;
    desc_encode(&d, handle);
    return MSCCLPP_OK;
}

/* ------------------------------------------------------------------------------------------ */
/* Import (client side) */

static bool is_own_broker(const share_desc_t *d)
{
    pthread_mutex_lock(&broker.lock);
    bool own = broker.running && broker.pid == getpid() && d->pid == broker.pid &&
               d->name_len == broker.name_len && !memcmp(d->name, broker.name, d->name_len);
    pthread_mutex_unlock(&broker.lock);
    return own;
}

/* Connect to the exporter's broker, bounded by the deadline. */
static mscclpp_result_t broker_connect(const share_desc_t *d, uint64_t deadline, int *out)
{
    struct sockaddr_un addr;
    socklen_t alen = abstract_addr(d->name, d->name_len, &addr);
    int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0) return ERR_SYS("mem_import: socket: %m");
    host_wait_t w;
    host_wait_init_spin(&w, 0, 0); /* a full backlog clears in milliseconds: do not spin */
    while (connect(fd, (struct sockaddr *)&addr, alen) != 0) {
        int e = errno;
        if (e == EINTR || e == EAGAIN) {
            if (host_now_ns() >= deadline) {
                close(fd);
                return ERR(MSCCLPP_ERR_TIMEOUT,
                           "mem_import: pid %d's memory broker @%s accepted no connection within "
                           "MSCCLPP_TIMEOUT", (int)d->pid, d->name);
            }
            host_wait_pause(&w);
            continue;
        }
        close(fd);
        errno = e;
        if (e == ECONNREFUSED || e == ENOENT)
            return ERR(MSCCLPP_ERR_REMOTE,
                       "mem_import: the exporting process (pid %d) no longer serves its memory "
                       "(@%s: %m); did it exit?", (int)d->pid, d->name);
        return ERR_SYS("mem_import: connect to pid %d's memory broker @%s: %m", (int)d->pid,
                       d->name);
    }
    *out = fd;
    return MSCCLPP_OK;
}

static const char *serve_status_text(uint32_t st)
{
    switch (st) {
    case HOST_SERVE_UNKNOWN: return "the allocation is not exported (freed?)";
    case HOST_SERVE_COOKIE: return "the handle's cookie does not match (forged or stale handle)";
    case HOST_SERVE_BAD: return "the broker could not read the request";
    case HOST_SERVE_SYSTEM: return "the exporter could not duplicate the memfd";
    default: return "unknown refusal";
    }
}

/* Send (id, cookie), receive the reply and the memfd. */
static mscclpp_result_t broker_request(int sock, const share_desc_t *d, uint64_t deadline,
                                       int *memfd)
{
    uint8_t req[SHARE_REQ_BYTES];
    put32(req, SHARE_MAGIC);
    put32(req + 4, SHARE_VERSION);
    put64(req + 8, d->id);
    memcpy(req + 16, d->cookie, HOST_COOKIE_BYTES);
    ssize_t n;
    while ((n = send(sock, req, sizeof req, MSG_NOSIGNAL)) < 0 && errno == EINTR) {}
    if (n != (ssize_t)sizeof req)
        return ERR(MSCCLPP_ERR_REMOTE, "mem_import: send to pid %d's memory broker: %m",
                   (int)d->pid);

    uint8_t rep[SHARE_REP_BYTES + 1];
    union {
        struct cmsghdr align;
        char buf[CMSG_SPACE(sizeof(int) * 4)];
    } ctl;
    struct iovec iov = {.iov_base = rep, .iov_len = sizeof rep};
    struct msghdr msg;
    for (;;) {
        struct pollfd pfd = {.fd = sock, .events = POLLIN};
        int r = poll(&pfd, 1, poll_timeout_ms(deadline));
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) return ERR_SYS("mem_import: poll: %m");
        if (r == 0)
            return ERR(MSCCLPP_ERR_TIMEOUT,
                       "mem_import: pid %d's memory broker did not answer within MSCCLPP_TIMEOUT",
                       (int)d->pid);
        memset(&msg, 0, sizeof msg);
        msg.msg_iov = &iov;
        msg.msg_iovlen = 1;
        msg.msg_control = ctl.buf;
        msg.msg_controllen = sizeof ctl.buf;
        n = recvmsg(sock, &msg, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
        if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
        break;
    }
    if (n < 0) return ERR(MSCCLPP_ERR_REMOTE, "mem_import: recvmsg from pid %d: %m", (int)d->pid);

    /* Collect every fd passed, so none leaks whatever else is wrong. */
    int fds[4], nfds = 0;
    for (struct cmsghdr *c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
        if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
        size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        for (size_t i = 0; i < k && nfds < 4; i++)
            memcpy(&fds[nfds++], CMSG_DATA(c) + i * sizeof(int), sizeof(int));
    }
    mscclpp_result_t res = MSCCLPP_OK;
    if (n == 0)
        res = ERR(MSCCLPP_ERR_REMOTE, "mem_import: pid %d's memory broker closed the connection "
                  "without answering", (int)d->pid);
    else if (n != SHARE_REP_BYTES || get32(rep) != SHARE_MAGIC || (msg.msg_flags & MSG_TRUNC))
        res = ERR(MSCCLPP_ERR_REMOTE, "mem_import: malformed answer (%zd bytes) from pid %d",
                  n, (int)d->pid);
    else if (get32(rep + 4) != HOST_SERVE_OK)
        res = ERR(MSCCLPP_ERR_REMOTE, "mem_import: pid %d refused allocation %llu: %s",
                  (int)d->pid, (unsigned long long)d->id, serve_status_text(get32(rep + 4)));
    else if ((msg.msg_flags & MSG_CTRUNC) || nfds != 1)
        res = ERR(MSCCLPP_ERR_REMOTE, "mem_import: pid %d sent %d file descriptors, expected 1%s",
                  (int)d->pid, nfds, (msg.msg_flags & MSG_CTRUNC) ? " (truncated)" : "");
    else if (get64(rep + 8) != d->size)
        res = ERR(MSCCLPP_ERR_REMOTE, "mem_import: pid %d says allocation %llu has %llu bytes, the "
                  "handle %llu", (int)d->pid, (unsigned long long)d->id,
                  (unsigned long long)get64(rep + 8), (unsigned long long)d->size);
    if (res != MSCCLPP_OK) {
        for (int i = 0; i < nfds; i++) close(fds[i]);
        return res;
    }
    *memfd = fds[0];
    return MSCCLPP_OK;
}

mscclpp_result_t host_mem_import(const hal_mem_handle_t *handle, void **base)
{
    CHECK_ARG(handle != NULL);
    CHECK_ARG(base != NULL);
    share_desc_t d;
    CHECK(desc_decode(handle, &d));
    if (is_own_broker(&d)) return host_reg_self_import(d.id, d.cookie, base);
    if (host_reg_find_import(d.pid, d.id, d.cookie, base)) return MSCCLPP_OK;

    size_t map_len = host_round_pages((size_t)d.size);
    if (map_len == 0 || d.size > SIZE_MAX)
        return ERR_ARG("mem_import: handle size %llu is too large", (unsigned long long)d.size);
    uint64_t deadline = host_now_ns() + config_timeout_ns();
    mscclpp_result_t res;
    int sock = -1, memfd = -1;
    CHECK(broker_connect(&d, deadline, &sock));
    CHECK_GOTO(broker_request(sock, &d, deadline, &memfd), res, close_sock);
    struct stat st;
    if (fstat(memfd, &st) != 0) {
        res = ERR_SYS("mem_import: fstat of the received memfd: %m");
        goto close_memfd;
    }
    if ((uint64_t)st.st_size < map_len) {
        res = ERR(MSCCLPP_ERR_REMOTE, "mem_import: received memfd has %lld bytes, expected %zu",
                  (long long)st.st_size, map_len);
        goto close_memfd;
    }
    void *p = mmap(NULL, map_len, PROT_READ | PROT_WRITE, MAP_SHARED, memfd, 0);
    if (p == MAP_FAILED) {
        res = ERR(errno == ENOMEM ? MSCCLPP_ERR_NO_MEMORY : MSCCLPP_ERR_SYSTEM,
                  "mem_import: mmap of %zu bytes from pid %d: %m", map_len, (int)d.pid);
        goto close_memfd;
    }
    CHECK_GOTO(host_reg_add_import(p, (size_t)d.size, map_len, d.pid, d.id, d.cookie), res,
               unmap);
    TRACE(SUBSYS_MEM, "imported allocation %llu of pid %d at %p (%llu bytes)",
          (unsigned long long)d.id, (int)d.pid, p, (unsigned long long)d.size);
    close(memfd); /* the mapping keeps the memory */
    close(sock);
    *base = p;
    return MSCCLPP_OK;
unmap:
    munmap(p, map_len);
close_memfd:
    close(memfd);
close_sock:
    close(sock);
    return res;
}
