/* Transport registry: tables, per-pair selection, per-communicator contexts, remote keys. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "base/config.h"
#include "core/core.h"
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

const tp_ops_t *tp_get(int id)
{
    switch (id) {
    case TP_IPC: return tp_ipc_ops();
    case TP_IB: return tp_ib_ops();
    case TP_UCX: return tp_ucx_ops();
    default: return NULL;
    }
}

const tp_ops_t *tp_by_bit(unsigned bit)
{
    for (int i = 0; i < TP__COUNT; i++)
        if (tp_get(i)->bit == bit) return tp_get(i);
    return NULL;
}

bool tp_built(int id)
{
    switch (id) {
    case TP_IPC: return true;
#ifdef MSCCLPP_HAVE_VERBS
    case TP_IB: return true;
#endif
#ifdef MSCCLPP_HAVE_UCX
    case TP_UCX: return true;
#endif
    default: return false;
    }
}

/* Is transport `name` allowed by MSCCLPP_TRANSPORTS (empty: all)? */
static bool allowed(const char *name)
{
    const char *list = config_get(CFG_MSCCLPP_TRANSPORTS);
    if (!*list) return true;
    size_t n = strlen(name);
    for (const char *p = list; *p;) {
        while (*p == ',' || *p == ' ') p++;
        const char *e = p;
        while (*e && *e != ',' && *e != ' ') e++;
        if ((size_t)(e - p) == n && strncmp(p, name, n) == 0) return true;
        p = e;
    }
    return false;
}

mscclpp_result_t tp_status(int id, char *why, size_t cap)
{
    const tp_ops_t *ops = tp_get(id);
    if (!ops) {
        snprintf(why, cap, "unknown transport %d", id);
        return core_error_quiet(MSCCLPP_ERR_INVALID_ARG, "%s", why);
    }
    if (!allowed(ops->name)) {
        snprintf(why, cap, "excluded by MSCCLPP_TRANSPORTS=%s", config_get(CFG_MSCCLPP_TRANSPORTS));
        return core_error_quiet(MSCCLPP_ERR_UNSUPPORTED, "%s: %s", ops->name, why);
    }
    core_clear_error();
    mscclpp_result_t r = ops->probe();
    const char *said = mscclpp_last_error();
    if (r == MSCCLPP_OK)
        snprintf(why, cap, "%s%s%s", tp_built(id) ? "built" : "", *said ? "; " : "", said);
    else
        snprintf(why, cap, "%s", said);
    if (r == MSCCLPP_OK) core_clear_error();
    return r;
}

mscclpp_result_t tp_select(mscclpp_comm_t *comm, int peer, const tp_ops_t **out)
{
    tp_peer_t me = {comm->rank, comm->node_id[comm->rank]};
    tp_peer_t them = {peer, comm->node_id[peer]};
    const tp_ops_t *best = NULL;
    int best_prio = -1;
    char said[512] = "";
    size_t used = 0;
    for (int i = 0; i < TP__COUNT; i++) {
        const tp_ops_t *ops = tp_get(i);
        const char *why = NULL;
        char buf[160];
        if (!allowed(ops->name)) {
            why = "excluded by MSCCLPP_TRANSPORTS";
        } else if (ops->probe() != MSCCLPP_OK) {
            snprintf(buf, sizeof buf, "%s", mscclpp_last_error());
            why = buf;
        } else {
            int prio = ops->can_connect(&me, &them);
            if (prio < 0) why = "cannot link this pair";
            else if (prio > best_prio) best = ops, best_prio = prio;
        }
        if (why && used < sizeof said)
            used += (size_t)snprintf(said + used, sizeof said - used, "%s%s: %s",
                                     used ? "; " : "", ops->name, why);
    }
    core_clear_error();
    if (!best)
        return ERR(MSCCLPP_ERR_UNSUPPORTED, "rank %d: no transport reaches rank %d (%s node): %s",
                   comm->rank, peer, me.node_id == them.node_id ? "same" : "another", said);
    *out = best;
    return MSCCLPP_OK;
}

/* ---- per-communicator contexts ------------------------------------------------------------- */

struct tp_comm {
    tp_ctx_t *ctx[TP__COUNT];
};

mscclpp_result_t tp_ctx_get(mscclpp_comm_t *comm, const tp_ops_t *ops, tp_ctx_t **ctx)
{
    int id = -1;
    for (int i = 0; i < TP__COUNT; i++)
        if (tp_get(i) == ops) id = i;
    if (id < 0) return ERR_ARG("tp_ctx_get: unknown transport table");
    mscclpp_result_t res = MSCCLPP_OK;
    pthread_mutex_lock(&comm->lock);
    if (!comm->tp) comm->tp = calloc(1, sizeof *comm->tp);
    if (!comm->tp) {
        res = ERR(MSCCLPP_ERR_NO_MEMORY, "transport: out of memory");
    } else if (!comm->tp->ctx[id]) {
        res = ops->init(comm, &comm->tp->ctx[id]);
    }
    if (res == MSCCLPP_OK) *ctx = comm->tp->ctx[id];
    pthread_mutex_unlock(&comm->lock);
    return res;
}

void tp_comm_release(mscclpp_comm_t *comm)
{
    if (!comm->tp) return;
    for (int i = 0; i < TP__COUNT; i++)
        if (comm->tp->ctx[i]) tp_get(i)->fini(comm->tp->ctx[i]);
    free(comm->tp);
    comm->tp = NULL;
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
