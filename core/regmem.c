/*
 * Registered memory: a region inside a shareable allocation, its versioned wire encoding, and
 * the mapping of peers' regions. Also the counter slabs semaphores live in.
 */
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/config.h"
#include "core/core.h"
#include "core/debug.h"
#include "core/wire.h"
#include "transports/transport.h"

/* ---- import cache: each peer allocation is mapped once per process ------------------------ */

struct comm_import {
    struct comm_import *next;
    int owner;
    hal_mem_handle_t handle;
    void *base;
    int refs;
};

static bool same_handle(const hal_mem_handle_t *a, const hal_mem_handle_t *b)
{
    return a->kind == b->kind && a->len == b->len && a->alloc_size == b->alloc_size &&
           memcmp(a->data, b->data, a->len) == 0;
}

mscclpp_result_t comm_import(mscclpp_comm_t *comm, int owner, const hal_mem_handle_t *handle,
                             void **base, void **mapping)
{
    mscclpp_result_t res = MSCCLPP_OK;
    pthread_mutex_lock(&comm->lock);
    struct comm_import *e;
    for (e = comm->imports; e; e = e->next)
        if (e->owner == owner && same_handle(&e->handle, handle)) break;
    if (!e) {
        e = calloc(1, sizeof *e);
        if (!e) {
            res = ERR(MSCCLPP_ERR_NO_MEMORY, "import: out of memory");
            goto out;
        }
        res = comm->hal->mem_import(handle, &e->base);
        if (res != MSCCLPP_OK) {
            free(e);
            goto out;
        }
        e->owner = owner;
        e->handle = *handle;
        e->next = comm->imports;
        comm->imports = e;
        TRACE(SUBSYS_MEM, "rank %d: mapped %llu bytes of rank %d at %p", comm->rank,
              (unsigned long long)handle->alloc_size, owner, e->base);
    }
    e->refs++;
    *base = e->base;
    *mapping = e;
out:
    pthread_mutex_unlock(&comm->lock);
    return res;
}

void comm_unmap_peer(mscclpp_comm_t *comm, void *mapping)
{
    if (!mapping) return;
    pthread_mutex_lock(&comm->lock);
    for (struct comm_import **pp = &comm->imports; *pp; pp = &(*pp)->next) {
        if (*pp != mapping) continue;
        struct comm_import *e = *pp;
        if (--e->refs == 0) {
            *pp = e->next;
            comm->hal->mem_unimport(e->base);
            free(e);
        }
        break;
    }
    pthread_mutex_unlock(&comm->lock);
}

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

/* ---- counter slabs ----------------------------------------------------------------------- */

#define SLAB_SLOTS 512
#define SLAB_SLOT_BYTES 64

struct sem_slab {
    struct sem_slab *next;
    uint8_t *base;
    int used;
    uint8_t busy[SLAB_SLOTS];
};

struct slab_slot {
    struct sem_slab *slab;
    int index;
};

mscclpp_result_t comm_counter_alloc(mscclpp_comm_t *comm, uint64_t **counter, void **owner)
{
    mscclpp_result_t res = MSCCLPP_OK;
    struct slab_slot *slot = malloc(sizeof *slot);
    if (!slot) return ERR(MSCCLPP_ERR_NO_MEMORY, "semaphore: out of memory");
    pthread_mutex_lock(&comm->lock);
    struct sem_slab *s;
    for (s = comm->slabs; s && s->used == SLAB_SLOTS; s = s->next) {}
    if (!s) {
        s = calloc(1, sizeof *s);
        if (!s) {
            res = ERR(MSCCLPP_ERR_NO_MEMORY, "semaphore: out of memory");
            goto fail;
        }
        void *p = NULL;
        res = comm->hal->mem_alloc_shareable(SLAB_SLOTS * SLAB_SLOT_BYTES, &p);
        if (res != MSCCLPP_OK) {
            free(s);
            goto fail;
        }
        s->base = p;
        res = comm->hal->memset_sync(p, 0, SLAB_SLOTS * SLAB_SLOT_BYTES);
        if (res != MSCCLPP_OK) {
            comm->hal->mem_free(p);
            free(s);
            goto fail;
        }
        s->next = comm->slabs;
        comm->slabs = s;
    }
    int i = 0;
    while (s->busy[i]) i++;
    s->busy[i] = 1;
    s->used++;
    pthread_mutex_unlock(&comm->lock);
    slot->slab = s;
    slot->index = i;
    *counter = (uint64_t *)(s->base + (size_t)i * SLAB_SLOT_BYTES);
    /* a reused slot must start at zero again */
    CHECK(comm->hal->memset_sync(*counter, 0, sizeof(uint64_t)));
    *owner = slot;
    return MSCCLPP_OK;
fail:
    pthread_mutex_unlock(&comm->lock);
    free(slot);
    return res;
}

void comm_counter_free(mscclpp_comm_t *comm, void *owner)
{
    struct slab_slot *slot = owner;
    if (!slot) return;
    pthread_mutex_lock(&comm->lock);
    slot->slab->busy[slot->index] = 0;
    slot->slab->used--;
    pthread_mutex_unlock(&comm->lock);
    free(slot);
}

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

void comm_release_resources(mscclpp_comm_t *comm)
{
    while (comm->imports) {
        struct comm_import *e = comm->imports;
        comm->imports = e->next;
        comm->hal->mem_unimport(e->base);
        free(e);
    }
    while (comm->slabs) {
        struct sem_slab *s = comm->slabs;
        comm->slabs = s->next;
        comm->hal->mem_free(s->base);
        free(s);
    }
}

/* ---- bounded waits on counters ----------------------------------------------------------- */

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

mscclpp_result_t core_wait_counter(const uint64_t *counter, uint64_t target, bool relaxed,
                                   const char *what)
{
    int order = relaxed ? __ATOMIC_RELAXED : __ATOMIC_ACQUIRE;
    int64_t spin = config_get_int(CFG_MSCCLPP_HOST_SPIN);
    for (int64_t i = 0; i < spin; i++)
        if (__atomic_load_n(counter, order) >= target) return MSCCLPP_OK;
    uint64_t start = now_ns(), limit = config_timeout_ns();
    for (unsigned n = 0;; n++) {
        if (__atomic_load_n(counter, order) >= target) return MSCCLPP_OK;
        if (n < 64) {
            sched_yield();
            continue;
        }
        if ((n & 63) == 0 && now_ns() - start > limit)
            return ERR(MSCCLPP_ERR_TIMEOUT, "%s: timed out after %.1f s (counter %llu, want %llu)",
                       what, (double)limit / 1e9,
                       (unsigned long long)__atomic_load_n(counter, __ATOMIC_RELAXED),
                       (unsigned long long)target);
        struct timespec ts = {0, 20000};
        nanosleep(&ts, NULL);
    }
}
