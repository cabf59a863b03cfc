/*
 * The transport interface's helpers (transport.h): typed stubs' message, table checks, remote
 * keys (the common header around a transport's own bytes), and the memory helpers the
 * transports share. Nothing here knows which transports exist (tp_registry.c does).
 */
#define _GNU_SOURCE /* process_vm_readv */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include "base/debug.h"
#include "transports/transport.h"

mscclpp_result_t tp_unsupported_op(const char *transport, const char *op)
{
    return core_error_quiet(MSCCLPP_ERR_UNSUPPORTED, "%s: not supported by the %s transport", op,
                            transport);
}

mscclpp_result_t tp_ops_check(const tp_ops_t *ops, const char **bad)
{
    const char *b = NULL;
    if (!ops) b = "table";
    else if (ops->size < sizeof(tp_ops_t)) b = "size";
    else if (ops->abi_version != TP_ABI_VERSION) b = "abi_version";
    else if (!ops->name) b = "name";
    else if (!ops->bit) b = "bit";
    else if (!ops->can_connect) b = "can_connect";
    else if (!ops->fini) b = "fini";
#define TP_CHECK_SLOT_(slot, params) else if (!ops->slot) b = #slot;
    TP_OPS_SLOTS(TP_CHECK_SLOT_)
#undef TP_CHECK_SLOT_
    if (bad) *bad = b;
    if (b)
        return core_error_quiet(MSCCLPP_ERR_INVALID_ARG, "transport table %s: bad or missing %s",
                                ops && ops->name ? ops->name : "?", b);
    return MSCCLPP_OK;
}

/* ---- remote keys ---------------------------------------------------------------------------- */

mscclpp_result_t tp_mem_pack(const tp_ops_t *ops, tp_ctx_t *ctx, tp_mem_t *mem, const void *ptr,
                             uint64_t bytes, wire_writer_t *w)
{
    size_t start = w->len;
    wire_put_u32(w, TP_RKEY_MAGIC);
    wire_put_u32(w, TP_RKEY_VERSION);
    size_t len_at = w->len;
    wire_put_u32(w, 0); /* total length, patched below */
    wire_put_u32(w, ops->bit);
    wire_put_u64(w, (uint64_t)(uintptr_t)ptr);
    wire_put_u64(w, bytes);
    CHECK(ops->mem_pack(ctx, mem, w));
    if (w->overflow)
        return ERR(MSCCLPP_ERR_INTERNAL, "%s: remote key does not fit %zu bytes", ops->name,
                   w->cap - start);
    wire_writer_t patch = {w->buf + len_at, 4, 0, false};
    wire_put_u32(&patch, (uint32_t)(w->len - start));
    return MSCCLPP_OK;
}

mscclpp_result_t tp_rmem_unpack(const tp_ops_t *ops, tp_ep_t *ep, wire_reader_t *r,
                                tp_rmem_t **rmem, uint64_t *bytes)
{
    size_t start = r->pos;
    uint32_t magic = wire_get_u32(r), version = wire_get_u32(r), total = wire_get_u32(r);
    uint32_t bit = wire_get_u32(r);
    uint64_t base = wire_get_u64(r), size = wire_get_u64(r);
    if (r->bad || magic != TP_RKEY_MAGIC)
        return ERR(MSCCLPP_ERR_REMOTE, "%s: not a remote key encoding", ops->name);
    if (version != TP_RKEY_VERSION)
        return ERR(MSCCLPP_ERR_REMOTE, "%s: remote key version %u, this library reads %u",
                   ops->name, version, TP_RKEY_VERSION);
    if (bit != ops->bit)
        return ERR(MSCCLPP_ERR_REMOTE, "%s: remote key of transport bit 0x%x, expected 0x%x",
                   ops->name, bit, ops->bit);
    if (total < 32 || start + total > r->len)
        return ERR(MSCCLPP_ERR_REMOTE, "%s: remote key says %u bytes, %zu left", ops->name, total,
                   r->len - start);
    /* the transport reads only its own part */
    wire_reader_t sub = {r->buf + r->pos, start + total - r->pos, 0, false};
    CHECK(ops->rmem_unpack(ep, base, size, &sub, rmem));
    if (sub.bad || sub.pos != sub.len) {
        ops->rmem_release(*rmem);
        *rmem = NULL;
        return ERR(MSCCLPP_ERR_REMOTE, "%s: malformed remote key (%u bytes)", ops->name, total);
    }
    r->pos = start + total;
    if (bytes) *bytes = size;
    return MSCCLPP_OK;
}

void tp_copy_words(void *dst, const void *src, size_t len)
{
    if ((uintptr_t)dst % 8 != 0) {
        memcpy(dst, src, len);
        return;
    }
    uint64_t *d = dst;
    const unsigned char *s = src;
    size_t words = len / 8;
    for (size_t i = 0; i < words; i++) {
        uint64_t v;
        memcpy(&v, s + 8 * i, sizeof v); /* the source may be unaligned (UCX's buffer) */
        __atomic_store_n(&d[i], v, __ATOMIC_RELAXED);
    }
    if (len % 8) memcpy((unsigned char *)dst + 8 * words, s + 8 * words, len % 8);
}

/* One byte readable? The kernel copies it for us and answers EFAULT instead of faulting. */
static bool tp_byte_readable(const void *p)
{
    char b;
    struct iovec l = {&b, 1};
    struct iovec r = {(void *)(uintptr_t)p, 1};
    if (process_vm_readv(getpid(), &l, 1, &r, 1, 0) == 1) return true;
    if (errno != ENOSYS && errno != EPERM) return false;
    /* process_vm_readv filtered (a container's seccomp policy): a pipe's write reads it too */
    int fd[2];
    if (pipe2(fd, O_CLOEXEC | O_NONBLOCK) != 0)
        return false; /* unknown: staging is the safe
                                                                 * side */
    bool ok = write(fd[1], p, 1) == 1;
    close(fd[0]);
    close(fd[1]);
    return ok;
}

/*
 * GPU memory is reserved in our address space without CPU access, while pinned host memory
 * (hal->host_alloc: the port counters) and managed memory read fine. The HAL has no query that
 * tells a host allocation from a device one, and this also covers memory the application
 * allocated itself. First and last byte: one allocation is one kind.
 */
bool tp_cpu_readable(const void *p, size_t n)
{
    return tp_byte_readable(p) && tp_byte_readable((const char *)p + (n ? n - 1 : 0));
}
