/*
 * The ipc transport: peers of one node. Memory is shared through the HAL (memfd on the host
 * backend, cuMem/IPC handles on GPUs); a put is a copy by the calling thread (the proxy) into
 * the peer's memory mapped here, a signal a store of the new total into the peer's counter.
 * Everything completes before the call returns, so flush has nothing to wait for.
 *
 * On a GPU backend the copies run on a stream of the context's own (non-blocking on CUDA/HIP)
 * and are waited for there, the signal's value coming from a pinned word: the proxy calls put
 * and signal while the kernel that waits for them runs, and memcpy_sync runs on the legacy
 * NULL stream, which waits for that kernel when it was launched on the NULL stream or another
 * blocking stream (the synchronous API's launches are), while a copy from a stack variable is
 * one from pageable memory, which CUDA may copy synchronously. Both are made at init, before
 * any launch. The host backend copies and stores with the CPU (its memory is host memory).
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "base/debug.h"
#include "transports/ipc/ipc_map.h"
#include "transports/tp_check.h"
#include "transports/transport.h"

TP_DEFINE_STUBS("ipc")

struct tp_ctx {
    const tp_world_t *world;
    bool gpu;             /* a GPU backend: copies on `stream`, signals from `word` */
    hal_stream_t stream;  /* the proxy's copies */
    uint64_t *word;       /* pinned (host_alloc): a signal's value */
    pthread_mutex_t word_lock; /* proxies of several executor contexts share the context */
};

struct tp_ep {
    tp_ctx_t *ctx;
    int peer;
};

struct tp_mem {
    char *ptr;
    size_t bytes;
    void *base;   /* allocation holding ptr */
    size_t alloc;
    hal_mem_handle_t handle;
};

struct tp_rmem {
    tp_ctx_t *ctx;
    char *ptr;       /* the peer's memory, mapped here */
    uint64_t bytes;
    void *mapping;   /* import cache entry */
};

static mscclpp_result_t ipc_probe(void) { return MSCCLPP_OK; }

/* Same node only, and always preferred there. */
static int ipc_can_connect(const tp_peer_t *l, const tp_peer_t *r)
{
    return l->node_id == r->node_id ? 100 : -1;
}

static void ipc_fini(tp_ctx_t *ctx)
{
    if (!ctx) return;
    /* the communicator is going: no launch waits for its proxies any more */
    const hal_ops_t *hal = ctx->world->hal;
    if (ctx->stream) (void)hal->stream_destroy(ctx->stream);
    if (ctx->word) (void)hal->host_free(ctx->word);
    pthread_mutex_destroy(&ctx->word_lock);
    free(ctx);
}

static mscclpp_result_t ipc_init(const tp_world_t *world, tp_ctx_t **ctx)
{
    tp_ctx_t *c = calloc(1, sizeof *c);
    if (!c) return ERR(MSCCLPP_ERR_NO_MEMORY, "ipc transport: out of memory");
    c->world = world;
    pthread_mutex_init(&c->word_lock, NULL);
    const hal_ops_t *hal = world->hal;
    c->gpu = hal && hal != hal_host_ops();
    mscclpp_result_t r = MSCCLPP_OK;
    if (c->gpu) r = hal->stream_create(&c->stream);
    if (c->gpu && r == MSCCLPP_OK) r = hal->host_alloc(sizeof *c->word, (void **)&c->word);
    if (r != MSCCLPP_OK) {
        r = ERR(r, "ipc transport: rank %d: the copy stream and pinned signal word of port "
                "channels within the node: %s", world->rank, mscclpp_last_error());
        ipc_fini(c);
        return r;
    }
    *ctx = c;
    return MSCCLPP_OK;
}

static mscclpp_result_t ipc_mem_reg(tp_ctx_t *ctx, void *ptr, size_t bytes, tp_mem_t **mem)
{
    const hal_ops_t *hal = ctx->world->hal;
    tp_mem_t *m = calloc(1, sizeof *m);
    if (!m) return ERR(MSCCLPP_ERR_NO_MEMORY, "ipc transport: out of memory");
    if (hal->mem_range(ptr, &m->base, &m->alloc) != MSCCLPP_OK) {
        free(m);
        return ERR_ARG("ipc transport: %p is not memory of the %s backend", ptr, hal->name);
    }
    if ((size_t)((char *)ptr - (char *)m->base) + bytes > m->alloc) {
        free(m);
        return ERR_ARG("ipc transport: [%p, +%zu) runs past its allocation", ptr, bytes);
    }
    mscclpp_result_t r = hal->mem_export(m->base, &m->handle);
    if (r != MSCCLPP_OK) {
        free(m);
        return r;
    }
    m->ptr = ptr;
    m->bytes = bytes;
    *mem = m;
    return MSCCLPP_OK;
}

static mscclpp_result_t ipc_mem_pack(tp_ctx_t *ctx, tp_mem_t *mem, wire_writer_t *w)
{
    wire_put_u32(w, (uint32_t)ctx->world->rank);
    wire_put_u64(w, (uint64_t)(mem->ptr - (char *)mem->base));
    wire_put_u32(w, mem->handle.kind);
    wire_put_u32(w, mem->handle.len);
    wire_put_u64(w, mem->handle.alloc_size);
    wire_put_bytes(w, mem->handle.data, mem->handle.len);
    return MSCCLPP_OK;
}

static mscclpp_result_t ipc_mem_dereg(tp_ctx_t *ctx, tp_mem_t *mem)
{
    (void)ctx;
    free(mem);
    return MSCCLPP_OK;
}

static mscclpp_result_t ipc_rmem_unpack(tp_ep_t *ep, uint64_t base, uint64_t bytes,
                                        wire_reader_t *r, tp_rmem_t **rmem)
{
    (void)base;
    hal_mem_handle_t h = {0};
    uint32_t owner = wire_get_u32(r);
    uint64_t off = wire_get_u64(r);
    h.kind = wire_get_u32(r);
    h.len = wire_get_u32(r);
    h.alloc_size = wire_get_u64(r);
    if (h.len > HAL_MEM_HANDLE_BYTES) r->bad = true;
    else wire_get_bytes(r, h.data, h.len);
    if (r->bad) return ERR(MSCCLPP_ERR_REMOTE, "ipc transport: malformed key from rank %d", ep->peer);
    if ((int)owner != ep->peer)
        return ERR(MSCCLPP_ERR_REMOTE, "ipc transport: key of rank %u arrived from rank %d", owner,
                   ep->peer);
    if (off > h.alloc_size || bytes > h.alloc_size - off)
        return ERR(MSCCLPP_ERR_REMOTE, "ipc transport: region [%llu,+%llu) outside a %llu-byte "
                   "allocation of rank %d", (unsigned long long)off, (unsigned long long)bytes,
                   (unsigned long long)h.alloc_size, ep->peer);
    tp_rmem_t *m = calloc(1, sizeof *m);
    if (!m) return ERR(MSCCLPP_ERR_NO_MEMORY, "ipc transport: out of memory");
    void *mapped = NULL;
    mscclpp_result_t res = ipc_map_import(ep->ctx->world->maps, ep->peer, &h, &mapped, &m->mapping);
    if (res != MSCCLPP_OK) {
        free(m);
        return res;
    }
    m->ctx = ep->ctx;
    m->ptr = (char *)mapped + off;
    m->bytes = bytes;
    *rmem = m;
    return MSCCLPP_OK;
}

static mscclpp_result_t ipc_rmem_release(tp_rmem_t *rmem)
{
    if (!rmem) return MSCCLPP_OK;
    ipc_map_release(rmem->ctx->world->maps, rmem->mapping);
    free(rmem);
    return MSCCLPP_OK;
}

/* Nothing to say to the peer: its memory is mapped when its keys arrive. */
static mscclpp_result_t ipc_ep_open(tp_ctx_t *ctx, int peer, tp_ep_t **ep, wire_writer_t *addr)
{
    (void)addr;
    const tp_world_t *w = ctx->world;
    if (peer < 0 || peer >= w->nranks || w->node_id[peer] != w->node_id[w->rank])
        return ERR(MSCCLPP_ERR_UNSUPPORTED,
                   "ipc transport: rank %d is on another node than "
                   "rank %d",
                   peer, w->rank);
    tp_ep_t *e = calloc(1, sizeof *e);
    if (!e) return ERR(MSCCLPP_ERR_NO_MEMORY, "ipc transport: out of memory");
    e->ctx = ctx;
    e->peer = peer;
    *ep = e;
    return MSCCLPP_OK;
}

static mscclpp_result_t ipc_ep_connect(tp_ep_t *ep, wire_reader_t *addr)
{
    if (addr->len != 0)
        return ERR(MSCCLPP_ERR_REMOTE,
                   "ipc transport: rank %d sent a %zu-byte address, expected "
                   "none",
                   ep->peer, addr->len);
    return MSCCLPP_OK;
}

static mscclpp_result_t ipc_put(tp_ep_t *ep, tp_rmem_t *dst, uint64_t dst_off, tp_mem_t *src,
                                uint64_t src_off, uint64_t bytes)
{
    CHECK(tp_check_put("ipc", ep->peer, dst_off, dst->bytes, src_off, src->bytes, bytes));
    if (bytes == 0) return MSCCLPP_OK;
    tp_ctx_t *c = ep->ctx;
    if (!c->gpu) {
        memmove(dst->ptr + dst_off, src->ptr + src_off, bytes);
        return MSCCLPP_OK;
    }
    const hal_ops_t *hal = c->world->hal;
    CHECK(hal->memcpy_async(dst->ptr + dst_off, src->ptr + src_off, bytes, c->stream));
    return hal->stream_sync(c->stream);
}

static mscclpp_result_t ipc_signal(tp_ep_t *ep, tp_rmem_t *dst, uint64_t dst_off, uint64_t total)
{
    CHECK(tp_check_signal("ipc", ep->peer, dst_off, dst->bytes));
    uint64_t *p = (uint64_t *)(dst->ptr + dst_off);
    tp_ctx_t *c = ep->ctx;
    if (!c->gpu) {
        /* release: the puts before it (plain copies by this thread) are visible first */
        __atomic_store_n(p, total, __ATOMIC_RELEASE);
        return MSCCLPP_OK;
    }
    /* device memory: a copy from the pinned word on the puts' stream, after them, waited for
     * (so the word is free again when the call returns) */
    const hal_ops_t *hal = c->world->hal;
    pthread_mutex_lock(&c->word_lock);
    *c->word = total;
    mscclpp_result_t r = hal->memcpy_async(p, c->word, sizeof total, c->stream);
    if (r == MSCCLPP_OK) r = hal->stream_sync(c->stream); /* bounded (MSCCLPP_TIMEOUT) */
    pthread_mutex_unlock(&c->word_lock);
    return r;
}

static mscclpp_result_t ipc_flush(tp_ep_t *ep, uint64_t timeout_ns, tp_flush_t how)
{
    (void)ep, (void)timeout_ns, (void)how;
    return MSCCLPP_OK; /* every put and signal completed before it returned */
}

static mscclpp_result_t ipc_progress(tp_ctx_t *ctx)
{
    (void)ctx;
    return MSCCLPP_OK;
}

static mscclpp_result_t ipc_ep_status(tp_ep_t *ep)
{
    (void)ep;
    return MSCCLPP_OK; /* a dead peer shows as a timeout of the wait on it */
}

static mscclpp_result_t ipc_close(tp_ep_t *ep)
{
    free(ep);
    return MSCCLPP_OK;
}

static const tp_ops_t ipc_ops = {
    .size = sizeof(tp_ops_t),
    .abi_version = TP_ABI_VERSION,
    .name = "ipc",
    .bit = MSCCLPP_TRANSPORT_IPC,
    .probe = ipc_probe,
    .can_connect = ipc_can_connect,
    .init = ipc_init,
    .fini = ipc_fini,
    .mem_reg = ipc_mem_reg,
    .mem_pack = ipc_mem_pack,
    .mem_dereg = ipc_mem_dereg,
    .rmem_unpack = ipc_rmem_unpack,
    .rmem_release = ipc_rmem_release,
    .ep_open = ipc_ep_open,
    .ep_connect = ipc_ep_connect,
    .put = ipc_put,
    .signal = ipc_signal,
    .flush = ipc_flush,
    .progress = ipc_progress,
    .ep_status = ipc_ep_status,
    .close = ipc_close,
    .arm = tp_stub_arm,
};

const tp_ops_t *tp_ipc_ops(void) { return &ipc_ops; }
