/* TCP helpers for the bootstrap: addresses, listen/connect/accept and bounded transfers. */
#define _GNU_SOURCE /* accept4 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/config.h"
#include "base/debug.h"
#include "core/socket.h"

uint64_t sock_now_ns(void)
{
    return base_now_ns();
}

uint64_t sock_deadline(void) { return sock_now_ns() + config_timeout_ns(); }

int sock_poll_ms(uint64_t deadline, int cap_ms)
{
    uint64_t now = sock_now_ns();
    if (now >= deadline) return 0;
    uint64_t ms = (deadline - now + 999999) / 1000000;
    return ms > (uint64_t)cap_ms ? cap_ms : (int)ms;
}

void sock_close(int fd)
{
    int saved = errno;
    if (fd >= 0) close(fd);
    errno = saved;
}

const char *sock_addr_str(const sock_addr_t *addr, char *buf, size_t cap)
{
    char ip[INET6_ADDRSTRLEN] = "?";
    if (addr->u.sa.sa_family == AF_INET) {
        inet_ntop(AF_INET, &addr->u.in4.sin_addr, ip, sizeof ip);
        snprintf(buf, cap, "%s:%d", ip, ntohs(addr->u.in4.sin_port));
    } else if (addr->u.sa.sa_family == AF_INET6) {
        inet_ntop(AF_INET6, &addr->u.in6.sin6_addr, ip, sizeof ip);
        snprintf(buf, cap, "[%s]:%d", ip, ntohs(addr->u.in6.sin6_port));
    } else {
        snprintf(buf, cap, "(no address)");
    }
    return buf;
}

int sock_addr_port(const sock_addr_t *addr)
{
    if (addr->u.sa.sa_family == AF_INET6) return ntohs(addr->u.in6.sin6_port);
    return ntohs(addr->u.in4.sin_port);
}

void sock_addr_set_port(sock_addr_t *addr, int port)
{
    if (addr->u.sa.sa_family == AF_INET6)
        addr->u.in6.sin6_port = htons((uint16_t)port);
    else
        addr->u.in4.sin_port = htons((uint16_t)port);
}

mscclpp_result_t sock_addr_parse(const char *host, int port, sock_addr_t *addr)
{
    memset(addr, 0, sizeof *addr);
    if (port < 0 || port > 65535) return ERR_ARG("port %d is out of range", port);
    if (inet_pton(AF_INET, host, &addr->u.in4.sin_addr) == 1) {
        addr->u.in4.sin_family = AF_INET;
        addr->u.in4.sin_port = htons((uint16_t)port);
        addr->len = sizeof addr->u.in4;
        return MSCCLPP_OK;
    }
    if (inet_pton(AF_INET6, host, &addr->u.in6.sin6_addr) == 1) {
        addr->u.in6.sin6_family = AF_INET6;
        addr->u.in6.sin6_port = htons((uint16_t)port);
        addr->len = sizeof addr->u.in6;
        return MSCCLPP_OK;
    }
    return ERR_ARG("\"%s\" is not a numeric IPv4 or IPv6 address", host);
}

static mscclpp_result_t parse_port(const char *text, int *port)
{
    char *end = NULL;
    errno = 0;
    long v = strtol(text, &end, 10);
    if (errno || end == text || *end != '\0' || v < 0 || v > 65535)
        return ERR_ARG("\"%s\" is not a port number (0-65535)", text);
    *port = (int)v;
    return MSCCLPP_OK;
}

mscclpp_result_t sock_addr_parse_hostport(const char *text, sock_addr_t *addr)
{
    char host[INET6_ADDRSTRLEN + 2];
    const char *colon;
    const char *h = text;
    size_t hlen;
    if (text[0] == '[') {
        const char *close_br = strchr(text, ']');
        if (!close_br || close_br[1] != ':') return ERR_ARG("\"%s\": expected [ipv6]:port", text);
        h = text + 1;
        hlen = (size_t)(close_br - h);
        colon = close_br + 1;
    } else {
        colon = strrchr(text, ':');
        if (!colon) return ERR_ARG("\"%s\": expected ip:port", text);
        hlen = (size_t)(colon - text);
    }
    if (hlen == 0 || hlen >= sizeof host) return ERR_ARG("\"%s\": bad host part", text);
    memcpy(host, h, hlen);
    host[hlen] = '\0';
    int port = 0;
    CHECK(parse_port(colon + 1, &port));
    return sock_addr_parse(host, port, addr);
}

static void from_sockaddr(const struct sockaddr *sa, sock_addr_t *addr)
{
    memset(addr, 0, sizeof *addr);
    if (sa->sa_family == AF_INET) {
        memcpy(&addr->u.in4, sa, sizeof addr->u.in4);
        addr->len = sizeof addr->u.in4;
    } else {
        memcpy(&addr->u.in6, sa, sizeof addr->u.in6);
        addr->len = sizeof addr->u.in6;
    }
    sock_addr_set_port(addr, 0);
}

mscclpp_result_t sock_if_addr(const char *ifname, sock_addr_t *addr)
{
    struct ifaddrs *list = NULL, *v6 = NULL;
    if (getifaddrs(&list) != 0) return ERR_SYS("getifaddrs: %m");
    for (struct ifaddrs *ifa = list; ifa; ifa = ifa->ifa_next) {
        if (!ifa->ifa_addr || strcmp(ifa->ifa_name, ifname) != 0) continue;
        if (ifa->ifa_addr->sa_family == AF_INET) {
            from_sockaddr(ifa->ifa_addr, addr);
            freeifaddrs(list);
            return MSCCLPP_OK;
        }
        if (ifa->ifa_addr->sa_family == AF_INET6 && !v6) v6 = ifa;
    }
    if (v6) {
        from_sockaddr(v6->ifa_addr, addr);
        freeifaddrs(list);
        return MSCCLPP_OK;
    }
    freeifaddrs(list);
    return ERR_ARG("network interface \"%s\" has no IPv4 or IPv6 address", ifname);
}

mscclpp_result_t sock_default_addr(sock_addr_t *addr)
{
    struct ifaddrs *list = NULL;
    if (getifaddrs(&list) == 0) {
        for (struct ifaddrs *ifa = list; ifa; ifa = ifa->ifa_next) {
            if (!ifa->ifa_addr || ifa->ifa_addr->sa_family != AF_INET) continue;
            if (!(ifa->ifa_flags & IFF_UP) || (ifa->ifa_flags & IFF_LOOPBACK)) continue;
            from_sockaddr(ifa->ifa_addr, addr);
            freeifaddrs(list);
            return MSCCLPP_OK;
        }
        freeifaddrs(list);
    }
    return sock_addr_parse("127.0.0.1", 0, addr);
}

void sock_addr_encode(const sock_addr_t *addr, unsigned char *out)
{
    memset(out, 0, SOCK_ADDR_WIRE_BYTES);
    if (addr->u.sa.sa_family == AF_INET) {
        sock_put_u16(out, 4);
        memcpy(out + 2, &addr->u.in4.sin_port, 2); /* already network order */
        memcpy(out + 4, &addr->u.in4.sin_addr, 4);
    } else if (addr->u.sa.sa_family == AF_INET6) {
        sock_put_u16(out, 6);
        memcpy(out + 2, &addr->u.in6.sin6_port, 2);
        memcpy(out + 4, &addr->u.in6.sin6_addr, 16);
    }
}

mscclpp_result_t sock_addr_decode(const unsigned char *in, sock_addr_t *addr)
{
    memset(addr, 0, sizeof *addr);
    uint16_t fam = sock_get_u16(in);
    if (fam == 4) {
        addr->u.in4.sin_family = AF_INET;
        memcpy(&addr->u.in4.sin_port, in + 2, 2);
        memcpy(&addr->u.in4.sin_addr, in + 4, 4);
        addr->len = sizeof addr->u.in4;
        return MSCCLPP_OK;
    }
    if (fam == 6) {
        addr->u.in6.sin6_family = AF_INET6;
        memcpy(&addr->u.in6.sin6_port, in + 2, 2);
        memcpy(&addr->u.in6.sin6_addr, in + 4, 16);
        addr->len = sizeof addr->u.in6;
        return MSCCLPP_OK;
    }
    return ERR(MSCCLPP_ERR_REMOTE, "unknown address family %u in a bootstrap message", fam);
}

mscclpp_result_t sock_listen(sock_addr_t *addr, int reuse, int *fd)
{
    char a[80];
    int s = socket(addr->u.sa.sa_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (s < 0) return ERR_SYS("socket: %m");
    int one = 1;
    if (reuse && setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0) {
        sock_close(s);
        return ERR_SYS("setsockopt(SO_REUSEADDR): %m");
    }
    if (bind(s, &addr->u.sa, addr->len) != 0) {
        mscclpp_result_t r = ERR_SYS("bind to %s: %m", sock_addr_str(addr, a, sizeof a));
        sock_close(s);
        return r;
    }
    if (listen(s, SOMAXCONN) != 0) {
        mscclpp_result_t r = ERR_SYS("listen on %s: %m", sock_addr_str(addr, a, sizeof a));
        sock_close(s);
        return r;
    }
    socklen_t len = addr->len;
    if (getsockname(s, &addr->u.sa, &len) != 0) {
        sock_close(s);
        return ERR_SYS("getsockname: %m");
    }
    *fd = s;
    return MSCCLPP_OK;
}

static void set_nodelay(int fd)
{
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

sock_status_t sock_connect(const sock_addr_t *addr, uint64_t deadline, int *fd)
{
    long backoff_us = 1000;
    for (;;) {
        int s = socket(addr->u.sa.sa_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (s < 0) return SOCK_SYSERR;
        int rc = connect(s, &addr->u.sa, addr->len);
        int err = rc == 0 ? 0 : errno;
        if (err == EINPROGRESS || err == EINTR) {
            struct pollfd p = {.fd = s, .events = POLLOUT};
            int n;
            do {
                n = poll(&p, 1, sock_poll_ms(deadline, 100));
            } while ((n == 0 && sock_now_ns() < deadline) || (n < 0 && errno == EINTR));
            if (n == 0) {
                sock_close(s);
                return SOCK_TIMEOUT;
            }
            socklen_t len = sizeof err;
            if (n < 0 || getsockopt(s, SOL_SOCKET, SO_ERROR, &err, &len) != 0) err = errno;
        }
        if (err == 0) {
            set_nodelay(s);
            *fd = s;
            return SOCK_OK;
        }
        sock_close(s);
        /* Refused or reset: the listener may not exist yet; try again until the deadline. */
        if (err != ECONNREFUSED && err != ECONNRESET && err != ETIMEDOUT && err != EAGAIN &&
            err != ECONNABORTED) {
            errno = err;
            return SOCK_SYSERR;
        }
        if (sock_now_ns() + (uint64_t)backoff_us * 1000 >= deadline) return SOCK_TIMEOUT;
        struct timespec ts = {.tv_sec = 0, .tv_nsec = backoff_us * 1000};
        nanosleep(&ts, NULL);
        if (backoff_us < 100000) backoff_us *= 2;
    }
}

sock_status_t sock_accept(int lfd, uint64_t deadline, int *fd)
{
    for (;;) {
        int s = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (s >= 0) {
            set_nodelay(s);
            *fd = s;
            return SOCK_OK;
        }
        if (errno == EINTR || errno == ECONNABORTED) continue;
        if (errno != EAGAIN && errno != EWOULDBLOCK) return SOCK_SYSERR;
        if (sock_now_ns() >= deadline) return SOCK_TIMEOUT;
        struct pollfd p = {.fd = lfd, .events = POLLIN};
        if (poll(&p, 1, sock_poll_ms(deadline, 100)) < 0 && errno != EINTR) return SOCK_SYSERR;
    }
}

ssize_t sock_send_some(int fd, const void *buf, size_t bytes, sock_status_t *st)
{
    for (;;) {
        ssize_t n = send(fd, buf, bytes, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n >= 0) return n;
        if (errno == EINTR) continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) return 0;
        *st = (errno == EPIPE || errno == ECONNRESET) ? SOCK_CLOSED : SOCK_SYSERR;
        return -1;
    }
}

ssize_t sock_recv_some(int fd, void *buf, size_t bytes, sock_status_t *st)
{
    for (;;) {
        ssize_t n = recv(fd, buf, bytes, MSG_DONTWAIT);
        if (n > 0) return n;
        if (n == 0) {
            *st = SOCK_CLOSED;
            return -1;
        }
        if (errno == EINTR) continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) return 0;
        *st = errno == ECONNRESET ? SOCK_CLOSED : SOCK_SYSERR;
        return -1;
    }
}

static sock_status_t transfer_all(int fd, void *buf, size_t bytes, uint64_t deadline, int sending)
{
    size_t done = 0;
    sock_status_t st = SOCK_OK;
    while (done < bytes) {
        ssize_t n = sending ? sock_send_some(fd, (char *)buf + done, bytes - done, &st)
                            : sock_recv_some(fd, (char *)buf + done, bytes - done, &st);
        if (n < 0) return st;
        if (n > 0) {
            done += (size_t)n;
            continue;
        }
        if (sock_now_ns() >= deadline) return SOCK_TIMEOUT;
        struct pollfd p = {.fd = fd, .events = sending ? POLLOUT : POLLIN};
        if (poll(&p, 1, sock_poll_ms(deadline, 100)) < 0 && errno != EINTR) return SOCK_SYSERR;
    }
    return SOCK_OK;
}

sock_status_t sock_send_all(int fd, const void *buf, size_t bytes, uint64_t deadline)
{
    return transfer_all(fd, (void *)buf, bytes, deadline, 1);
}

sock_status_t sock_recv_all(int fd, void *buf, size_t bytes, uint64_t deadline)
{
    return transfer_all(fd, buf, bytes, deadline, 0);
}
