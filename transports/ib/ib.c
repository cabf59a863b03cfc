/*
 * The ib transport: libibverbs directly. One RC queue pair per connection (its own CQ): ep_open
 * creates it and packs its address in an explicit encoding, core carries it to the peer,
 * ep_connect moves the pair to RTR and RTS with the peer's; put = signaled RDMA write;
 * signal = RDMA write of the channel's new total from a ring of registered slots (RC executes
 * writes in order, so the counter lands after the data; a counter has one writer, so no atomic
 * is needed and HCAs without atomics work too); flush = poll the CQ until every signaled work
 * request completed, bounded. Device per rank: local rank modulo the devices found.
 *
 * NOT TESTED ON HARDWARE: the machines of this project have no RDMA device
 * (ibv_get_device_list fails with ENOSYS); only discovery and the argument/error paths ran.
 */
#include <errno.h>
#include <stdio.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "base/config.h"
#include "base/debug.h"
#include "base/wait.h"
#include "transports/tp_check.h"
#include "transports/transport.h"

TP_DEFINE_STUBS("ib")

#ifdef MSCCLPP_HAVE_VERBS
#include <infiniband/verbs.h>

/* Number of verbs devices, or -1 with errno when the list cannot be read. */
int tp_ib_device_count(char *names, size_t cap)
{
    int n = 0;
    errno = 0;
    struct ibv_device **list = ibv_get_device_list(&n);
    if (!list) return -1;
    size_t used = 0;
    if (names && cap) names[0] = '\0';
    for (int i = 0; i < n && names; i++)
        if (used < cap)
            used += (size_t)snprintf(names + used, cap - used, "%s%s", i ? "," : "",
                                     ibv_get_device_name(list[i]));
    ibv_free_device_list(list);
    return n;
}

static mscclpp_result_t ib_probe(void)
{
    char names[256];
    int n = tp_ib_device_count(names, sizeof names);
    if (n < 0)
        return core_error_quiet(MSCCLPP_ERR_UNSUPPORTED,
                                "built; no RDMA device (ibv_get_device_list: %s)", strerror(errno));
    if (n == 0)
        return core_error_quiet(MSCCLPP_ERR_UNSUPPORTED, "built; 0 RDMA devices");
    core_error_quiet(MSCCLPP_OK, "%d RDMA device(s): %s (untested data path)", n, names);
    return MSCCLPP_OK;
}
/* ---- data path: RC queue pairs -------------------------------------------------------------- */

#define IB_CQ_DEPTH 4096
#define IB_SIG_SLOTS 256

struct tp_ctx {
    const tp_world_t *world;
    pthread_mutex_t lock;
    struct ibv_context *dev;
    struct ibv_pd *pd;
    uint8_t port;
    struct ibv_port_attr port_attr;
    union ibv_gid gid;
    int gid_index;
    uint32_t spin; /* polls of a wait before it yields (base_wait_spin, as ucx) */
};

struct tp_ep {
    tp_ctx_t *ctx;
    int peer;
    struct ibv_cq *cq;
    struct ibv_qp *qp;
    struct ibv_mr *sig_mr;   /* the signal values below */
    uint64_t sig[IB_SIG_SLOTS];
    unsigned sig_next;
    uint64_t posted, done;   /* signaled work requests */
    int failed;              /* a completion with an error status */
    char why[128];
};

struct tp_mem {
    struct ibv_mr *mr;
    char *ptr;
    size_t bytes;
};

struct tp_rmem {
    uint64_t addr, bytes;
    uint32_t rkey;
};

static mscclpp_result_t ib_init(const tp_world_t *world, tp_ctx_t **out)
{
    int n = 0;
    struct ibv_device **list = ibv_get_device_list(&n);
    if (!list || n == 0) {
        if (list) ibv_free_device_list(list);
        return ERR(MSCCLPP_ERR_UNSUPPORTED, "ib transport: no RDMA device");
    }
    tp_ctx_t *c = calloc(1, sizeof *c);
    if (!c) {
        ibv_free_device_list(list);
        return ERR(MSCCLPP_ERR_NO_MEMORY, "ib transport: out of memory");
    }
    pthread_mutex_init(&c->lock, NULL);
    c->world = world;
    c->spin = base_wait_spin(3u * (unsigned)(world->nlocal > 0 ? world->nlocal : 1));
    /* one device per rank of a node, round robin (as MSCCL++ picks IB[rank % nranksPerNode]) */
    struct ibv_device *d = list[world->local_rank % n];
    c->dev = ibv_open_device(d);
    ibv_free_device_list(list);
    if (!c->dev) goto fail_sys;
    c->pd = ibv_alloc_pd(c->dev);
    if (!c->pd) goto fail_sys;
    c->port = 1;
    if (ibv_query_port(c->dev, c->port, &c->port_attr) != 0) goto fail_sys;
    c->gid_index = 0;
    if (ibv_query_gid(c->dev, c->port, c->gid_index, &c->gid) != 0) goto fail_sys;
    *out = c;
    return MSCCLPP_OK;
fail_sys: {
    mscclpp_result_t r = ERR(MSCCLPP_ERR_SYSTEM, "ib transport: opening the device: %m");
    if (c->pd) ibv_dealloc_pd(c->pd);
    if (c->dev) ibv_close_device(c->dev);
    free(c);
    return r;
}
}

static void ib_fini(tp_ctx_t *c)
{
    if (!c) return;
    ibv_dealloc_pd(c->pd);
    ibv_close_device(c->dev);
    pthread_mutex_destroy(&c->lock);
    free(c);
}

static mscclpp_result_t ib_mem_reg(tp_ctx_t *c, void *ptr, size_t bytes, tp_mem_t **mem)
{
    tp_mem_t *m = calloc(1, sizeof *m);
    if (!m) return ERR(MSCCLPP_ERR_NO_MEMORY, "ib transport: out of memory");
    m->mr = ibv_reg_mr(c->pd, ptr, bytes,
                       IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
                           IBV_ACCESS_REMOTE_ATOMIC);
    if (!m->mr) {
        int e = errno;
        free(m);
        if (!tp_cpu_readable(ptr, bytes)) /* GPU memory: the NIC needs the driver's help */
            return ERR(MSCCLPP_ERR_UNSUPPORTED, "ib transport: ibv_reg_mr of GPU memory "
                       "[%p,+%zu): %s; this transport registers device memory with ibv_reg_mr "
                       "only, which needs the driver's peer-memory support (nvidia-peermem, "
                       "amdgpu), missing here; MSCCLPP_TRANSPORTS=ucx stages GPU memory through "
                       "pinned host memory instead", ptr, bytes, strerror(e));
        return ERR(MSCCLPP_ERR_SYSTEM, "ib transport: ibv_reg_mr of [%p,+%zu): %s", ptr, bytes,
                   strerror(e));
    }
    m->ptr = ptr;
    m->bytes = bytes;
    *mem = m;
    return MSCCLPP_OK;
}

static mscclpp_result_t ib_mem_pack(tp_ctx_t *c, tp_mem_t *mem, wire_writer_t *w)
{
    (void)c;
    wire_put_u32(w, mem->mr->rkey);
    return MSCCLPP_OK;
}

static mscclpp_result_t ib_mem_dereg(tp_ctx_t *c, tp_mem_t *mem)
{
    (void)c;
    if (!mem) return MSCCLPP_OK;
    int e = ibv_dereg_mr(mem->mr);
    free(mem);
    if (e) return ERR(MSCCLPP_ERR_SYSTEM, "ib transport: ibv_dereg_mr: %s", strerror(e));
    return MSCCLPP_OK;
}

static mscclpp_result_t ib_rmem_unpack(tp_ep_t *ep, uint64_t base, uint64_t bytes,
                                       wire_reader_t *r, tp_rmem_t **rmem)
{
    uint32_t rkey = wire_get_u32(r);
    if (r->bad) return ERR(MSCCLPP_ERR_REMOTE, "ib transport: malformed key from rank %d", ep->peer);
    tp_rmem_t *m = calloc(1, sizeof *m);
    if (!m) return ERR(MSCCLPP_ERR_NO_MEMORY, "ib transport: out of memory");
    m->addr = base;
    m->bytes = bytes;
    m->rkey = rkey;
    *rmem = m;
    return MSCCLPP_OK;
}

static mscclpp_result_t ib_rmem_release(tp_rmem_t *rmem)
{
    free(rmem);
    return MSCCLPP_OK;
}

/* What a side of a queue pair tells the other (explicit encoding, not a struct copy). */
static void ib_put_qp(wire_writer_t *w, const tp_ctx_t *c, const struct ibv_qp *qp)
{
    wire_put_u32(w, 0x50514249u); /* "IBQP" */
    wire_put_u32(w, 1);           /* version */
    wire_put_u32(w, qp->qp_num);
    wire_put_u32(w, c->port_attr.lid);
    wire_put_u32(w, (uint32_t)c->port_attr.active_mtu);
    wire_put_u32(w, c->port_attr.link_layer);
    wire_put_bytes(w, c->gid.raw, 16);
}

/* Release a connection, connected or only opened (any part may be missing). */
static mscclpp_result_t ib_close(tp_ep_t *ep)
{
    if (!ep) return MSCCLPP_OK;
    if (ep->qp) ibv_destroy_qp(ep->qp);
    if (ep->sig_mr) ibv_dereg_mr(ep->sig_mr);
    if (ep->cq) ibv_destroy_cq(ep->cq);
    free(ep);
    return MSCCLPP_OK;
}

/* This side: a queue pair in INIT, and its address for the peer. */
static mscclpp_result_t ib_ep_open(tp_ctx_t *c, int peer, tp_ep_t **out, wire_writer_t *w)
{
    tp_ep_t *ep = calloc(1, sizeof *ep);
    if (!ep) return ERR(MSCCLPP_ERR_NO_MEMORY, "ib transport: out of memory");
    ep->ctx = c;
    ep->peer = peer;
    mscclpp_result_t res = MSCCLPP_OK;
    ep->cq = ibv_create_cq(c->dev, IB_CQ_DEPTH, NULL, NULL, 0);
    if (!ep->cq) {
        res = ERR(MSCCLPP_ERR_SYSTEM, "ib transport: ibv_create_cq: %m");
        goto fail;
    }
    struct ibv_qp_init_attr qa = {0};
    qa.send_cq = ep->cq;
    qa.recv_cq = ep->cq;
    qa.qp_type = IBV_QPT_RC;
    qa.cap.max_send_wr = IB_CQ_DEPTH;
    qa.cap.max_recv_wr = 1;
    qa.cap.max_send_sge = 1;
    qa.cap.max_recv_sge = 1;
    ep->qp = ibv_create_qp(c->pd, &qa);
    if (!ep->qp) {
        res = ERR(MSCCLPP_ERR_SYSTEM, "ib transport: ibv_create_qp: %m");
        goto fail;
    }
    ep->sig_mr = ibv_reg_mr(c->pd, ep->sig, sizeof ep->sig, IBV_ACCESS_LOCAL_WRITE);
    if (!ep->sig_mr) {
        res = ERR(MSCCLPP_ERR_SYSTEM, "ib transport: ibv_reg_mr of signal slots: %m");
        goto fail;
    }
    struct ibv_qp_attr a = {0};
    a.qp_state = IBV_QPS_INIT;
    a.pkey_index = 0;
    a.port_num = c->port;
    a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
    if (ibv_modify_qp(ep->qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
                                      IBV_QP_ACCESS_FLAGS)) {
        res = ERR(MSCCLPP_ERR_SYSTEM, "ib transport: QP to INIT (rank %d): %m", peer);
        goto fail;
    }
    ib_put_qp(w, c, ep->qp);
    *out = ep;
    return MSCCLPP_OK;
fail:
    ib_close(ep);
    return res;
}

/* RTR with the peer's address, then RTS. */
static mscclpp_result_t ib_ep_connect(tp_ep_t *ep, wire_reader_t *r)
{
    tp_ctx_t *c = ep->ctx;
    int peer = ep->peer;
    struct ibv_qp_attr a;
    uint32_t magic = wire_get_u32(r), ver = wire_get_u32(r), qpn = wire_get_u32(r);
    uint32_t lid = wire_get_u32(r), mtu = wire_get_u32(r), link = wire_get_u32(r);
    union ibv_gid gid;
    wire_get_bytes(r, gid.raw, 16);
    if (r->bad || r->pos != r->len || magic != 0x50514249u || ver != 1)
        return ERR(MSCCLPP_ERR_REMOTE, "ib transport: rank %d sent a malformed QP address", peer);
    memset(&a, 0, sizeof a);
    a.qp_state = IBV_QPS_RTR;
    a.path_mtu = (enum ibv_mtu)(mtu < (uint32_t)c->port_attr.active_mtu ? mtu
                                                                         : c->port_attr.active_mtu);
    a.dest_qp_num = qpn;
    a.rq_psn = 0;
    a.max_dest_rd_atomic = 1;
    a.min_rnr_timer = 0x12;
    a.ah_attr.port_num = c->port;
    a.ah_attr.dlid = (uint16_t)lid;
    if (link == IBV_LINK_LAYER_ETHERNET) { /* RoCE: routed by GID */
        a.ah_attr.is_global = 1;
        a.ah_attr.grh.dgid = gid;
        a.ah_attr.grh.sgid_index = (uint8_t)c->gid_index;
        a.ah_attr.grh.hop_limit = 255;
    }
    if (ibv_modify_qp(ep->qp, &a,
                      IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                          IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
        return ERR(MSCCLPP_ERR_SYSTEM, "ib transport: QP to RTR (rank %d): %m", peer);
    memset(&a, 0, sizeof a);
    a.qp_state = IBV_QPS_RTS;
    a.timeout = 18;
    a.retry_cnt = 7;
    a.rnr_retry = 7;
    a.sq_psn = 0;
    a.max_rd_atomic = 1;
    if (ibv_modify_qp(ep->qp, &a,
                      IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                          IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC))
        return ERR(MSCCLPP_ERR_SYSTEM, "ib transport: QP to RTS (rank %d): %m", peer);
    return MSCCLPP_OK;
}

/* Reap completions (lock held); a failed one marks the connection failed. Returns how many. */
static int ib_poll(tp_ep_t *ep)
{
    struct ibv_wc wc[32];
    int n, total = 0;
    while ((n = ibv_poll_cq(ep->cq, 32, wc)) > 0) {
        total += n;
        for (int i = 0; i < n; i++) {
            ep->done++;
            if (wc[i].status != IBV_WC_SUCCESS && !ep->failed) {
                ep->failed = 1;
                snprintf(ep->why, sizeof ep->why, "%s", ibv_wc_status_str(wc[i].status));
            }
        }
    }
    return total;
}

static mscclpp_result_t ib_failed(tp_ep_t *ep, const char *what)
{
    return ERR(MSCCLPP_ERR_REMOTE, "ib transport: %s to rank %d: a work request failed (%s); is "
               "rank %d alive?", what, ep->peer, ep->why, ep->peer);
}

/*
 * Reap completions (lock held) until at most `outstanding` work requests are in flight: the
 * one wait of this transport (room in the send queue, a free signal slot, a flush), backing
 * off by the library's wait policy while the CQ is empty and bounded by `timeout_ns`.
 */
static mscclpp_result_t ib_drain(tp_ep_t *ep, uint64_t outstanding, uint64_t timeout_ns,
                                 const char *what)
{
    base_wait_t w;
    base_wait_init(&w, timeout_ns, ep->ctx->spin);
    while (ep->posted - ep->done > outstanding) {
        if (ib_poll(ep) > 0) w.polls = 0; /* completions flow: stay in the spin phase */
        if (ep->failed) return ib_failed(ep, what);
        if (ep->posted - ep->done <= outstanding) break;
        if (!base_wait_pause(&w))
            return ERR(MSCCLPP_ERR_TIMEOUT, "ib transport: %s to rank %d: %llu work requests "
                       "still pending after %.1f s", what, ep->peer,
                       (unsigned long long)(ep->posted - ep->done), (double)timeout_ns / 1e9);
    }
    return ep->failed ? ib_failed(ep, what) : MSCCLPP_OK;
}

/* Post one signaled RDMA write (lock held); waits for room in the send queue, bounded. */
static mscclpp_result_t ib_write(tp_ep_t *ep, uint64_t laddr, uint32_t lkey, uint64_t raddr,
                                 uint32_t rkey, uint64_t bytes, const char *what)
{
    CHECK(ib_drain(ep, IB_CQ_DEPTH - 2, config_timeout_ns(), what));
    struct ibv_sge sge = {.addr = laddr, .length = (uint32_t)bytes, .lkey = lkey};
    struct ibv_send_wr wr = {0}, *bad = NULL;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.opcode = IBV_WR_RDMA_WRITE;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.wr.rdma.remote_addr = raddr;
    wr.wr.rdma.rkey = rkey;
    int e = ibv_post_send(ep->qp, &wr, &bad);
    if (e) return ERR(MSCCLPP_ERR_SYSTEM, "ib transport: %s to rank %d: ibv_post_send: %s", what,
                      ep->peer, strerror(e));
    ep->posted++;
    return MSCCLPP_OK;
}

static mscclpp_result_t ib_put(tp_ep_t *ep, tp_rmem_t *dst, uint64_t dst_off, tp_mem_t *src,
                               uint64_t src_off, uint64_t bytes)
{
    CHECK(tp_check_put("ib", ep->peer, dst_off, dst->bytes, src_off, src->bytes, bytes));
    if (bytes > UINT32_MAX) /* one work request carries at most 4 GiB */
        return ERR_ARG("ib put to rank %d: %llu bytes in one put (at most 4 GiB)", ep->peer,
                       (unsigned long long)bytes);
    if (bytes == 0) return MSCCLPP_OK;
    pthread_mutex_lock(&ep->ctx->lock);
    mscclpp_result_t r = ep->failed ? ib_failed(ep, "put")
                                    : ib_write(ep, (uint64_t)(uintptr_t)(src->ptr + src_off),
                                               src->mr->lkey, dst->addr + dst_off, dst->rkey,
                                               bytes, "put");
    pthread_mutex_unlock(&ep->ctx->lock);
    return r;
}

/* RC queue pairs execute RDMA writes in order, so the counter lands after the data. */
static mscclpp_result_t ib_signal(tp_ep_t *ep, tp_rmem_t *dst, uint64_t dst_off, uint64_t total)
{
    CHECK(tp_check_signal("ib", ep->peer, dst_off, dst->bytes));
    pthread_mutex_lock(&ep->ctx->lock);
    mscclpp_result_t r = MSCCLPP_OK;
    /* a slot is reused only after the write that read it completed */
    unsigned i = ep->sig_next++ % IB_SIG_SLOTS;
    /* bounded: this wait had no deadline, so a peer that stopped acknowledging hung it */
    r = ib_drain(ep, IB_CQ_DEPTH - IB_SIG_SLOTS, config_timeout_ns(), "signal");
    if (r == MSCCLPP_OK) {
        ep->sig[i] = total;
        r = ib_write(ep, (uint64_t)(uintptr_t)&ep->sig[i], ep->sig_mr->lkey, dst->addr + dst_off,
                     dst->rkey, sizeof(uint64_t), "signal");
    }
    pthread_mutex_unlock(&ep->ctx->lock);
    return r;
}

static mscclpp_result_t ib_flush(tp_ep_t *ep, uint64_t timeout_ns, tp_flush_t how)
{
    /* either way: an RC write's completion means the peer's HCA acknowledged it */
    (void)how;
    pthread_mutex_lock(&ep->ctx->lock);
    mscclpp_result_t r = ib_drain(ep, 0, timeout_ns, "flush");
    pthread_mutex_unlock(&ep->ctx->lock);
    return r;
}

static mscclpp_result_t ib_progress(tp_ctx_t *c)
{
    (void)c; /* RDMA needs no target-side progress; completions are reaped by the calls */
    return MSCCLPP_OK;
}

static mscclpp_result_t ib_ep_status(tp_ep_t *ep)
{
    pthread_mutex_lock(&ep->ctx->lock);
    ib_poll(ep);
    int failed = ep->failed;
    pthread_mutex_unlock(&ep->ctx->lock);
    return failed ? ib_failed(ep, "connection") : MSCCLPP_OK;
}

#else
int tp_ib_device_count(char *names, size_t cap)
{
    (void)names, (void)cap;
    errno = ENOSYS;
    return -1;
}

static mscclpp_result_t ib_probe(void)
{
    return core_error_quiet(MSCCLPP_ERR_UNSUPPORTED,
                            "not built: configure found no libibverbs (apt-get install "
                            "libibverbs-dev)");
}
#endif

/* Between nodes, above ucx, when it is usable. */
static int ib_can_connect(const tp_peer_t *l, const tp_peer_t *r)
{
    return l->node_id != r->node_id ? 20 : -1;
}

static const tp_ops_t ib_ops = {
    .size = sizeof(tp_ops_t),
    .abi_version = TP_ABI_VERSION,
    .name = "ib",
    .bit = MSCCLPP_TRANSPORT_IB,
    .probe = ib_probe,
    .can_connect = ib_can_connect,
#ifdef MSCCLPP_HAVE_VERBS
    .init = ib_init,
    .fini = ib_fini,
    .mem_reg = ib_mem_reg,
    .mem_pack = ib_mem_pack,
    .mem_dereg = ib_mem_dereg,
    .rmem_unpack = ib_rmem_unpack,
    .rmem_release = ib_rmem_release,
    .ep_open = ib_ep_open,
    .ep_connect = ib_ep_connect,
    .put = ib_put,
    .signal = ib_signal,
    .flush = ib_flush,
    .progress = ib_progress,
    .ep_status = ib_ep_status,
    .close = ib_close,
    .arm = tp_stub_arm,
#else
    TP_STUB_SLOTS
#endif
};

const tp_ops_t *tp_ib_ops(void) { return &ib_ops; }
