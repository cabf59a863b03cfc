/*
 * Sharing host-backend memory between processes of one node. An exported allocation is served
 * by the fd broker (hal/fd_broker.c): a dup of its memfd, named by (exporter pid, broker
 * socket nonce, broker key, random secret). An importer presents key and secret to the
 * exporter's broker, gets the memfd through SCM_RIGHTS and maps it MAP_SHARED. The registry
 * (host_mem.c) remembers each export, so exporting again gives the same handle, and an import
 * in the exporting process itself gives back the original mapping.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/debug.h"
#include "hal/host/host.h"

/* Handle data, explicit little-endian (version 1 named a socket of host_share's own broker):
 * version 4, pid 4, broker key 8, secret 16, size 8, broker nonce 8. */
#define SHARE_VERSION 2u
#define SHARE_BYTES 48

_Static_assert(SHARE_BYTES <= HAL_MEM_HANDLE_BYTES, "handle data too small");
_Static_assert(HOST_COOKIE_BYTES == HAL_FDB_SECRET_BYTES, "the cookie is the broker secret");

typedef struct {
    hal_fdb_ticket_t ticket;
    uint64_t size;
} share_desc_t;

static void desc_encode(const share_desc_t *d, hal_mem_handle_t *h)
{
    memset(h, 0, sizeof *h);
    h->kind = HAL_HANDLE_HOST_MEMFD;
    h->alloc_size = d->size;
    uint8_t *p = h->data;
    hal_put_u32(p, SHARE_VERSION);
    hal_put_u32(p + 4, d->ticket.pid);
    hal_put_u64(p + 8, d->ticket.key);
    memcpy(p + 16, d->ticket.secret, HAL_FDB_SECRET_BYTES);
    hal_put_u64(p + 32, d->size);
    hal_put_u64(p + 40, d->ticket.nonce);
    h->len = SHARE_BYTES;
}

static mscclpp_result_t desc_decode(const hal_mem_handle_t *h, share_desc_t *d)
{
    if (h->kind != HAL_HANDLE_HOST_MEMFD)
        return ERR_ARG("mem_import: handle of kind %u is not a host memfd handle (%d)", h->kind,
                       HAL_HANDLE_HOST_MEMFD);
    if (h->len != SHARE_BYTES)
        return ERR_ARG("mem_import: malformed host handle (%u data bytes, expected %d)", h->len,
                       SHARE_BYTES);
    const uint8_t *p = h->data;
    uint32_t version = hal_get_u32(p);
    if (version != SHARE_VERSION)
        return ERR_ARG("mem_import: host handle version %u, this library reads %u", version,
                       SHARE_VERSION);
    d->ticket.pid = hal_get_u32(p + 4);
    d->ticket.key = hal_get_u64(p + 8);
    memcpy(d->ticket.secret, p + 16, HAL_FDB_SECRET_BYTES);
    d->size = hal_get_u64(p + 32);
    d->ticket.nonce = hal_get_u64(p + 40);
    if (d->size == 0 || d->size != h->alloc_size || (pid_t)d->ticket.pid <= 0)
        return ERR_ARG("mem_import: malformed host handle (size %llu, alloc_size %llu, pid %d)",
                       (unsigned long long)d->size, (unsigned long long)h->alloc_size,
                       (int)d->ticket.pid);
    return MSCCLPP_OK;
}

mscclpp_result_t host_mem_export(void *base, hal_mem_handle_t *handle)
{
    CHECK_ARG(base != NULL);
    CHECK_ARG(handle != NULL);
    host_export_t ex;
    int memfd = -1;
    CHECK(host_reg_export(base, &ex, &memfd));
    if (memfd >= 0) {
        /* First export (in this process): serve the memfd, borrowed, until mem_free. */
        mscclpp_result_t res = hal_fdb_serve_borrowed(memfd, &ex.ticket);
        if (res != MSCCLPP_OK) return res;
        uint64_t mine = ex.ticket.key;
        bool superseded = false;
        res = host_reg_set_export(base, &ex, &superseded);
        if (res != MSCCLPP_OK || superseded) hal_fdb_withdraw(mine); /* lost a race */
        if (res != MSCCLPP_OK) return res;
    }
    share_desc_t d = {.ticket = ex.ticket, .size = ex.size};
    desc_encode(&d, handle);
    return MSCCLPP_OK;
}

/* ------------------------------------------------------------------------------------------ */
/* Import (client side) */

mscclpp_result_t host_mem_import(const hal_mem_handle_t *handle, void **base)
{
    CHECK_ARG(handle != NULL);
    CHECK_ARG(base != NULL);
    CHECK(host_check_call("mem_import", "mapping a peer's memory"));
    share_desc_t d;
    CHECK(desc_decode(handle, &d));
    pid_t pid = (pid_t)d.ticket.pid;
    if (pid == getpid()) return host_reg_self_import(d.ticket.key, d.ticket.secret, base);
    if (host_reg_find_import(pid, d.ticket.key, d.ticket.secret, base)) return MSCCLPP_OK;

    size_t map_len = host_round_pages((size_t)d.size);
    if (map_len == 0 || d.size > SIZE_MAX)
        return ERR_ARG("mem_import: handle size %llu is too large", (unsigned long long)d.size);
    mscclpp_result_t res;
    int memfd = -1;
    CHECK(hal_fdb_fetch(&d.ticket, &memfd));
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
                  "mem_import: mmap of %zu bytes from pid %d: %m", map_len, (int)pid);
        goto close_memfd;
    }
    CHECK_GOTO(host_reg_add_import(p, (size_t)d.size, map_len, pid, d.ticket.key,
                                   d.ticket.secret), res, unmap);
    TRACE(SUBSYS_MEM, "imported key %llu of pid %d at %p (%llu bytes)",
          (unsigned long long)d.ticket.key, (int)pid, p, (unsigned long long)d.size);
    close(memfd); /* the mapping keeps the memory */
    *base = p;
    return MSCCLPP_OK;
unmap:
    munmap(p, map_len);
close_memfd:
    close(memfd);
    return res;
}
