/*
 * Registered memory: a region inside a shareable allocation, its versioned wire encoding, the
 * mapping of peers' regions (through the import cache of core/comm_mem.c), and the exchange of
 * one address with a peer built on them (semaphores use it).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/debug.h"
#include "base/wire.h"
#include "core/core.h"
#include "transports/transport.h"

/* ---- registration ------------------------------------------------------------------------ */

MSCCLPP_API mscclpp_result_t mscclpp_register_memory(mscclpp_comm_t *comm, void *ptr, size_t bytes,
                                                     unsigned transports, mscclpp_regmem_t **mem)
{
    CHECK_ARG(comm != NULL);
    CHECK_ARG(ptr != NULL);
    CHECK_ARG(bytes > 0);
    CHECK_ARG(mem != NULL);
    CHECK_ARG((transports & ~(unsigned)(MSCCLPP_TRANSPORT_IPC | MSCCLPP_TRANSPORT_UCX |
                                        MSCCLPP_TRANSPORT_IB)) == 0);
    *mem = NULL;
    /* a network transport that is not built, or cannot work here, is an error now rather than
     * a silent no-op (its keys are made when a port channel connects: transports/) */
    for (unsigned bit = MSCCLPP_TRANSPORT_UCX; bit <= MSCCLPP_TRANSPORT_IB; bit <<= 1)
        if ((transports & bit) && tp_by_bit(bit)->probe() != MSCCLPP_OK) {
            char why[256];
            snprintf(why, sizeof why, "%s", mscclpp_last_error());
            return ERR(MSCCLPP_ERR_UNSUPPORTED, "register: the %s transport cannot be used: %s",
                       tp_by_bit(bit)->name, why);
        }
    void *base = NULL;
    size_t alloc = 0;
    if (comm->hal->mem_range(ptr, &base, &alloc) != MSCCLPP_OK)
        return ERR_ARG("register: %p is not inside memory from mscclpp_malloc", ptr);
    size_t off = (size_t)((char *)ptr - (char *)base);
    if (bytes > alloc - off)
        return ERR_ARG("register: [%p, +%zu) runs past its allocation (%zu bytes left)", ptr, bytes,
                       alloc - off);
    mscclpp_regmem_t *m = calloc(1, sizeof *m);
    if (!m) return ERR(MSCCLPP_ERR_NO_MEMORY, "register: out of memory");
    mscclpp_result_t res = comm->hal->mem_export(base, &m->handle);
    if (res != MSCCLPP_OK) {
        free(m);
        return res;
    }
    m->comm = comm;
    m->rank = comm->rank;
    m->transports = transports ? transports : MSCCLPP_TRANSPORT_IPC;
    m->ptr = ptr;
    m->size = bytes;
    m->offset = off;
    m->node_id = comm->node_id[comm->rank];
    *mem = m;
    return MSCCLPP_OK;
}

MSCCLPP_API mscclpp_result_t mscclpp_regmem_serialize(const mscclpp_regmem_t *mem, void *buf,
                                                      size_t cap, size_t *len)
{
    CHECK_ARG(mem != NULL);
    CHECK_ARG(len != NULL);
    CHECK_ARG(buf != NULL || cap == 0);
    wire_writer_t w = {buf, cap, 0, false};
    wire_put_u32(&w, REGMEM_WIRE_MAGIC);
    wire_put_u32(&w, REGMEM_WIRE_VERSION);
    size_t len_at = w.len;
    wire_put_u32(&w, 0); /* total length, patched below */
    wire_put_u32(&w, (uint32_t)mem->rank);
    wire_put_u32(&w, mem->transports);
    wire_put_u64(&w, mem->size);
    wire_put_u64(&w, mem->offset);
    wire_put_u64(&w, mem->node_id);
    wire_put_u32(&w, mem->handle.kind);
    wire_put_u32(&w, mem->handle.len);
    wire_put_u64(&w, mem->handle.alloc_size);
    wire_put_bytes(&w, mem->handle.data, mem->handle.len);
    *len = w.len;
    if (w.overflow)
        return core_error_quiet(MSCCLPP_ERR_INVALID_ARG,
                                "regmem serialize: buffer of %zu bytes, %zu needed", cap, w.len);
    wire_writer_t patch = {(uint8_t *)buf + len_at, 4, 0, false};
    wire_put_u32(&patch, (uint32_t)w.len);
    return MSCCLPP_OK;
}

MSCCLPP_API mscclpp_result_t mscclpp_regmem_deserialize(mscclpp_comm_t *comm, const void *buf,
                                                        size_t len, mscclpp_regmem_t **mem)
{
    CHECK_ARG(comm != NULL);
    CHECK_ARG(buf != NULL);
    CHECK_ARG(mem != NULL);
    *mem = NULL;
    wire_reader_t r = {buf, len, 0, false};
    uint32_t magic = wire_get_u32(&r), version = wire_get_u32(&r), total = wire_get_u32(&r);
    if (r.bad || magic != REGMEM_WIRE_MAGIC)
        return ERR(MSCCLPP_ERR_REMOTE, "regmem: not a registered-memory encoding");
    if (version != REGMEM_WIRE_VERSION)
        return ERR(MSCCLPP_ERR_REMOTE, "regmem: encoding version %u, this library reads %u",
                   version, REGMEM_WIRE_VERSION);
    if (total != len)
        return ERR(MSCCLPP_ERR_REMOTE, "regmem: encoding says %u bytes, got %zu", total, len);
    mscclpp_regmem_t m = {0};
    m.comm = comm;
    m.rank = (int)wire_get_u32(&r);
    m.transports = wire_get_u32(&r);
    m.size = wire_get_u64(&r);
    m.offset = wire_get_u64(&r);
    m.node_id = wire_get_u64(&r);
    m.handle.kind = wire_get_u32(&r);
    m.handle.len = wire_get_u32(&r);
    m.handle.alloc_size = wire_get_u64(&r);
    if (m.handle.len > HAL_MEM_HANDLE_BYTES) r.bad = true;
    else wire_get_bytes(&r, m.handle.data, m.handle.len);
    if (r.bad || r.pos != len)
        return ERR(MSCCLPP_ERR_REMOTE, "regmem: truncated or malformed encoding (%zu bytes)", len);
    if (m.rank < 0 || m.rank >= comm->nranks)
        return ERR(MSCCLPP_ERR_REMOTE, "regmem: owner rank %d out of range", m.rank);
    if (m.offset > m.handle.alloc_size || m.size > m.handle.alloc_size - m.offset)
        return ERR(MSCCLPP_ERR_REMOTE, "regmem: region [%zu,+%zu) outside its %llu-byte allocation",
                   m.offset, m.size, (unsigned long long)m.handle.alloc_size);

    mscclpp_regmem_t *out = malloc(sizeof *out);
    if (!out) return ERR(MSCCLPP_ERR_NO_MEMORY, "regmem: out of memory");
    *out = m;
    if (m.node_id == comm->node_id[comm->rank] && (m.transports & MSCCLPP_TRANSPORT_IPC)) {
        void *base = NULL;
        mscclpp_result_t res = comm_import(comm, m.rank, &m.handle, &base, &out->import_base);
        if (res != MSCCLPP_OK) {
            free(out);
            return res;
        }
        out->ptr = (char *)base + m.offset;
    } else {
        out->ptr = NULL; /* reachable only through a network transport */
    }
    *mem = out;
    return MSCCLPP_OK;
}

MSCCLPP_API mscclpp_result_t mscclpp_regmem_send(mscclpp_comm_t *comm, const mscclpp_regmem_t *mem,
                                                 int peer, int tag)
{
    CHECK_ARG(comm != NULL);
    CHECK_ARG(mem != NULL);
    CHECK_ARG(peer >= 0 && peer < comm->nranks);
    uint8_t buf[REGMEM_WIRE_MAX];
    size_t len = 0;
    CHECK(mscclpp_regmem_serialize(mem, buf, sizeof buf, &len));
    uint64_t hdr = len;
    CHECK(mscclpp_bootstrap_send(comm->boot, &hdr, sizeof hdr, peer, tag));
    return mscclpp_bootstrap_send(comm->boot, buf, len, peer, tag);
}

MSCCLPP_API mscclpp_result_t mscclpp_regmem_recv(mscclpp_comm_t *comm, int peer, int tag,
                                                 mscclpp_regmem_t **mem)
{
    CHECK_ARG(comm != NULL);
    CHECK_ARG(mem != NULL);
    CHECK_ARG(peer >= 0 && peer < comm->nranks);
    uint64_t len = 0;
    uint8_t buf[REGMEM_WIRE_MAX];
    CHECK(mscclpp_bootstrap_recv(comm->boot, &len, sizeof len, peer, tag));
    if (len == 0 || len > sizeof buf)
        return ERR(MSCCLPP_ERR_REMOTE, "regmem recv: rank %d announced %llu bytes", peer,
                   (unsigned long long)len);
    CHECK(mscclpp_bootstrap_recv(comm->boot, buf, (size_t)len, peer, tag));
    return mscclpp_regmem_deserialize(comm, buf, (size_t)len, mem);
}

MSCCLPP_API void *mscclpp_regmem_ptr(const mscclpp_regmem_t *mem) { return mem ? mem->ptr : NULL; }
MSCCLPP_API size_t mscclpp_regmem_size(const mscclpp_regmem_t *mem) { return mem ? mem->size : 0; }
MSCCLPP_API int mscclpp_regmem_rank(const mscclpp_regmem_t *mem) { return mem ? mem->rank : -1; }

MSCCLPP_API mscclpp_result_t mscclpp_regmem_destroy(mscclpp_regmem_t *mem)
{
    if (!mem) return MSCCLPP_OK;
    if (mem->import_base) comm_unmap_peer(mem->comm, mem->import_base);
    free(mem);
    return MSCCLPP_OK;
}

/* ---- one address with a peer ------------------------------------------------------------ */

mscclpp_result_t comm_exchange_address(mscclpp_comm_t *comm, int peer, int tag, void *mine,
                                       size_t bytes, void **theirs, void **mapping)
{
    mscclpp_regmem_t *local = NULL, *remote = NULL;
    mscclpp_result_t res;
    CHECK(mscclpp_register_memory(comm, mine, bytes, MSCCLPP_TRANSPORT_IPC, &local));
    CHECK_GOTO(mscclpp_regmem_send(comm, local, peer, tag), res, out);
    CHECK_GOTO(mscclpp_regmem_recv(comm, peer, tag, &remote), res, out);
    if (!remote->ptr) {
        res = ERR(MSCCLPP_ERR_UNSUPPORTED,
                  "rank %d cannot map memory of rank %d (another node needs a network transport)",
                  comm->rank, peer);
        goto out;
    }
    *theirs = remote->ptr;
    *mapping = remote->import_base;
    remote->import_base = NULL; /* the caller now owns the mapping */
out:
    mscclpp_regmem_destroy(remote);
    mscclpp_regmem_destroy(local);
    return res;
}
