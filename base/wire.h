/*
 * Explicit little-endian encoding of what travels between ranks (registrations, semaphore
 * addresses). Writers and readers track overflow instead of checking every call.
 */
#ifndef MSCCLPP_CORE_WIRE_H
#define MSCCLPP_CORE_WIRE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

typedef struct {
    uint8_t *buf;
    size_t cap, len;
    bool overflow;
} wire_writer_t;

typedef struct {
    const uint8_t *buf;
    size_t len, pos;
    bool bad; /* read past the end */
} wire_reader_t;

static inline void wire_put_bytes(wire_writer_t *w, const void *p, size_t n)
{
    if (w->len + n > w->cap) {
        w->overflow = true;
    } else if (n) {
        memcpy(w->buf + w->len, p, n);
    }
    w->len += n;
}

static inline void wire_put_u64(wire_writer_t *w, uint64_t v)
{
    uint8_t b[8];
    for (int i = 0; i < 8; i++) b[i] = (uint8_t)(v >> (8 * i));
    wire_put_bytes(w, b, 8);
}

static inline void wire_put_u32(wire_writer_t *w, uint32_t v)
{
    uint8_t b[4];
    for (int i = 0; i < 4; i++) b[i] = (uint8_t)(v >> (8 * i));
    wire_put_bytes(w, b, 4);
}

static inline void wire_get_bytes(wire_reader_t *r, void *p, size_t n)
{
    if (r->bad || r->pos + n > r->len) {
        r->bad = true;
        if (n) memset(p, 0, n);
        return;
    }
    if (n) memcpy(p, r->buf + r->pos, n);
    r->pos += n;
}

static inline uint64_t wire_get_u64(wire_reader_t *r)
{
    uint8_t b[8];
    wire_get_bytes(r, b, 8);
    uint64_t v = 0;
    for (int i = 0; i < 8; i++) v |= (uint64_t)b[i] << (8 * i);
    return v;
}

static inline uint32_t wire_get_u32(wire_reader_t *r)
{
    uint8_t b[4];
    wire_get_bytes(r, b, 4);
    uint32_t v = 0;
    for (int i = 0; i < 4; i++) v |= (uint32_t)b[i] << (8 * i);
    return v;
}

#endif
