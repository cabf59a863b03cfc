/*
 * Small TCP socket helpers for the bootstrap (internal). Every blocking helper takes an absolute
 * deadline on the monotonic clock and returns a sock_status_t so that the caller, which knows
 * which rank and tag it was waiting for, writes the error message.
 */
#ifndef MSCCLPP_CORE_SOCKET_H
#define MSCCLPP_CORE_SOCKET_H

#include <netinet/in.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "mscclpp/mscclpp.h"

#ifdef __cplusplus
extern "C" {
#endif

/** An IPv4 or IPv6 address with port. */
typedef struct {
    union {
        struct sockaddr sa;
        struct sockaddr_in in4;
        struct sockaddr_in6 in6;
    } u;
    socklen_t len;
} sock_addr_t;

/** Bytes of the wire encoding of a sock_addr_t: family u16, port u16, 16 address bytes. */
#define SOCK_ADDR_WIRE_BYTES 20

typedef enum {
    SOCK_OK = 0,
    SOCK_CLOSED = 1,  /**< the peer closed or reset the connection */
    SOCK_TIMEOUT = 2, /**< the deadline passed */
    SOCK_SYSERR = 3,  /**< a system call failed; errno holds the cause */
} sock_status_t;

/** Monotonic clock in nanoseconds. */
uint64_t sock_now_ns(void);
/** now + MSCCLPP_TIMEOUT. */
uint64_t sock_deadline(void);
/** Milliseconds left until `deadline` for poll(), capped at `cap_ms` (0 when past). */
int sock_poll_ms(uint64_t deadline, int cap_ms);

/** "ip:port" or "[ip6]:port" into buf (always terminated). */
const char *sock_addr_str(const sock_addr_t *addr, char *buf, size_t cap);
/** Parse a numeric IPv4/IPv6 `host` with `port`. */
mscclpp_result_t sock_addr_parse(const char *host, int port, sock_addr_t *addr);
/** Parse "ip:port" or "[ip6]:port". */
mscclpp_result_t sock_addr_parse_hostport(const char *text, sock_addr_t *addr);
/** First address of interface `ifname` (IPv4 preferred). */
mscclpp_result_t sock_if_addr(const char *ifname, sock_addr_t *addr);
/** First up, non-loopback IPv4 interface; 127.0.0.1 when none. Port 0. */
mscclpp_result_t sock_default_addr(sock_addr_t *addr);
int sock_addr_port(const sock_addr_t *addr);
void sock_addr_set_port(sock_addr_t *addr, int port);

/** Explicit encoding (SOCK_ADDR_WIRE_BYTES), network byte order. */
void sock_addr_encode(const sock_addr_t *addr, unsigned char *out);
/** Decode; MSCCLPP_ERR_REMOTE on an unknown family. */
mscclpp_result_t sock_addr_decode(const unsigned char *in, sock_addr_t *addr);

/**
 * Bind and listen on `addr` (port 0: ephemeral; `addr` gets the bound port). `reuse` sets
 * SO_REUSEADDR (for fixed ports). The socket is non-blocking and close-on-exec.
 */
mscclpp_result_t sock_listen(sock_addr_t *addr, int reuse, int *fd);

/**
 * Connect to `addr`, retrying while refused (the listener may not be up yet) until `deadline`.
 * `refused_grace_ns` > 0 is for a listener known to have existed (a peer's, from the address
 * table): refusals that last that long mean its process is gone, and the call returns
 * SOCK_CLOSED with errno ECONNREFUSED instead of retrying until the deadline.
 * The returned socket is non-blocking, close-on-exec, with TCP_NODELAY.
 */
sock_status_t sock_connect(const sock_addr_t *addr, uint64_t deadline, uint64_t refused_grace_ns,
                           int *fd);

/** Accept one connection (non-blocking socket), waiting until `deadline`. */
sock_status_t sock_accept(int lfd, uint64_t deadline, int *fd);

/** Send or receive exactly `bytes`, handling EINTR and partial transfers, until `deadline`. */
sock_status_t sock_send_all(int fd, const void *buf, size_t bytes, uint64_t deadline);
sock_status_t sock_recv_all(int fd, void *buf, size_t bytes, uint64_t deadline);

/** One non-blocking step: bytes moved (>= 0), or -1 with the status in *st (EAGAIN: 0 bytes). */
ssize_t sock_send_some(int fd, const void *buf, size_t bytes, sock_status_t *st);
ssize_t sock_recv_some(int fd, void *buf, size_t bytes, sock_status_t *st);

/** close() that keeps errno. */
void sock_close(int fd);

/* Big-endian helpers for wire encodings. */
static inline void sock_put_u16(unsigned char *p, uint16_t v)
{
    p[0] = (unsigned char)(v >> 8);
    p[1] = (unsigned char)v;
}
static inline uint16_t sock_get_u16(const unsigned char *p)
{
    return (uint16_t)((uint16_t)p[0] << 8 | p[1]);
}
static inline void sock_put_u32(unsigned char *p, uint32_t v)
{
    for (int i = 0; i < 4; i++) p[i] = (unsigned char)(v >> (24 - 8 * i));
}
static inline uint32_t sock_get_u32(const unsigned char *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}
static inline void sock_put_u64(unsigned char *p, uint64_t v)
{
    for (int i = 0; i < 8; i++) p[i] = (unsigned char)(v >> (56 - 8 * i));
}
static inline uint64_t sock_get_u64(const unsigned char *p)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++) v = v << 8 | p[i];
    return v;
}

#ifdef __cplusplus
}
#endif

#endif /* MSCCLPP_CORE_SOCKET_H */
