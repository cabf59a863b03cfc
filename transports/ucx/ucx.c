/*
 * The ucx transport: UCP one-sided operations between nodes (or, when forced with
 * MSCCLPP_TRANSPORTS=ucx, within one).
 *
 *   context/worker  one per communicator; every worker call holds `lock` (the worker is
 *                   created SERIALIZED: proxies of several executor contexts share it)
 *   connect         worker addresses travel on the bootstrap; the endpoint uses peer error
 *                   handling, so a dead peer fails the next operation instead of hanging it
 *   put             ucp_put_nbx; requests are released at once, flush tracks completion
 *   signal          ucp_worker_fence, then an 8-byte ucp_put_nbx of the channel's new total.
 *                   Why not ucp_atomic_op_nbx(ADD): UCX 1.13 has no hardware atomics on tcp,
 *                   posix or sysv (they would be emulated through active messages, with a
 *                   different lane than the puts), while a fenced put is ordered after the data
 *                   on every transport, and a counter with one writer needs no atomic. The
 *                   value lives in a ring of slots that are reused only after their put
 *                   completed (UCX reads the source buffer until then).
 *   flush           ucp_ep_flush_nbx, driven by ucp_worker_progress, bounded by the timeout
 *   progress        ucp_worker_progress: over tcp the target side of a put needs it
 *   arm             ucp_worker_arm on the worker's event fd (UCP_FEATURE_WAKEUP), for the
 *                   proxy to sleep until a peer's put arrives
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "config.h"
#include "base/config.h"
#include "core/core.h"
#include "base/debug.h"
#include "base/wait.h"
#include "transports/tp_check.h"
#include "transports/transport.h"

TP_DEFINE_STUBS("ucx")

#ifdef MSCCLPP_HAVE_UCX
#include <ucp/api/ucp.h>

#define UCX_SIG_SLOTS 256
#define UCX_RKEY_MAX 768

struct tp_ctx {
    mscclpp_comm_t *comm;
    pthread_mutex_t lock;
    ucp_context_h context;
    ucp_worker_h worker;
    int efd;       /* the worker's event fd; -1 when UCX gave none */
    uint32_t spin; /* polls of a flush before it yields (base_wait_spin) */
    struct tp_ep *eps; /* open endpoints (progress reports the failed ones) */
};

typedef struct {
    uint64_t value;
    void *req;
} ucx_sig_t;

struct tp_ep {
    struct tp_ep *next;
    tp_ctx_t *ctx;
    int peer;
    ucp_ep_h ep;
    volatile ucs_status_t failed; /* set by the error handler */
    bool closing;                 /* in ucx_close: a peer that closed first is no news */
    ucx_sig_t sig[UCX_SIG_SLOTS];
    unsigned sig_next;
};

struct tp_mem {
    ucp_mem_h memh;
    char *ptr;
    size_t bytes;
};

struct tp_rmem {
    ucp_rkey_h rkey;
    uint64_t base, bytes;
};



/*
 * ucp_init with our features. UCX's registration cache is off unless the user asks for it
 * (UCX_RCACHE_ENABLE): creating it installs UCM's memory-event handler, which takes UCM's
 * lock for writing; in a process forked while another thread was inside a hooked malloc/mmap
 * (a launcher's bootstrap thread, say) that lock stays held forever, and ucp_init hung there.
 * Our registrations live as long as their contexts, so the cache buys nothing here.
 */
static ucs_status_t ucx_context_create(ucp_context_h *ctx)
{
    ucp_params_t p = {0};
    p.field_mask = UCP_PARAM_FIELD_FEATURES;
    /* WAKEUP: an idle proxy sleeps on the worker's event fd (ucx_arm), so an inbound put wakes
     * it at once instead of at the end of its back-off sleep */
    p.features = UCP_FEATURE_RMA | UCP_FEATURE_WAKEUP;
    ucp_config_t *cfg = NULL;
    ucs_status_t st = ucp_config_read(NULL, NULL, &cfg);
    if (st != UCS_OK) return st;
    if (!getenv("UCX_RCACHE_ENABLE")) (void)ucp_config_modify(cfg, "RCACHE_ENABLE", "no");
    st = ucp_init(&p, cfg, ctx);
    if (st != UCS_OK) { /* a UCX without wakeup support: the proxy's sleeps stay timed */
        p.features = UCP_FEATURE_RMA;
        st = ucp_init(&p, cfg, ctx);
    }
    ucp_config_release(cfg);
    return st;
}

static mscclpp_result_t ucx_probe(void)
{
    /* one context made and dropped: the library and at least one transport work */
    static int state; /* 0 unknown, 1 ok, -1 failed */
    static char why[200];
    if (state == 0) {
        ucp_context_h ctx = NULL;
        ucs_status_t st = ucx_context_create(&ctx);
        if (st != UCS_OK) {
            snprintf(why, sizeof why, "ucp_init failed: %s", ucs_status_string(st));
            state = -1;
        } else {
            unsigned maj, min, rel;
            ucp_get_version(&maj, &min, &rel);
            snprintf(why, sizeof why, "UCX %u.%u.%u", maj, min, rel);
            ucp_cleanup(ctx);
            state = 1;
        }
    }
    if (state < 0) return core_error_quiet(MSCCLPP_ERR_UNSUPPORTED, "%s", why);
    core_error_quiet(MSCCLPP_OK, "%s", why);
    return MSCCLPP_OK;
}

/* Any pair; below ib between nodes, far below ipc within a node. */
static int ucx_can_connect(const tp_peer_t *l, const tp_peer_t *r)
{
    return l->node_id == r->node_id ? 1 : 10;
}

static mscclpp_result_t ucx_status(const char *what, int peer, ucs_status_t st)
{
    return ERR(st == UCS_ERR_NO_MEMORY ? MSCCLPP_ERR_NO_MEMORY : MSCCLPP_ERR_REMOTE,
               "ucx transport: %s (rank %d): %s", what, peer, ucs_status_string(st));
}

static mscclpp_result_t ucx_init(mscclpp_comm_t *comm, tp_ctx_t **out)
{
    tp_ctx_t *c = calloc(1, sizeof *c);
    if (!c) return ERR(MSCCLPP_ERR_NO_MEMORY, "ucx transport: out of memory");
    pthread_mutex_init(&c->lock, NULL);
    c->comm = comm;
    ucs_status_t st = ucx_context_create(&c->context);
    if (st != UCS_OK) {
        free(c);
        return ucx_status("ucp_init", comm->rank, st);
    }
    ucp_worker_params_t wp = {0};
    wp.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
    wp.thread_mode = UCS_THREAD_MODE_SERIALIZED;
    st = ucp_worker_create(c->context, &wp, &c->worker);
    if (st != UCS_OK) {
        ucp_cleanup(c->context);
        free(c);
        return ucx_status("ucp_worker_create", comm->rank, st);
    }
    if (ucp_worker_get_efd(c->worker, &c->efd) != UCS_OK) c->efd = -1; /* sleeps stay timed */
    /* a flush runs in a proxy while, per local rank, its interpreter and stream poll too */
    c->spin = base_wait_spin(3u * (unsigned)(comm->nlocal > 0 ? comm->nlocal : 1));
    *out = c;
    return MSCCLPP_OK;
}

static void ucx_fini(tp_ctx_t *c)
{
    if (!c) return;
    ucp_worker_destroy(c->worker);
    ucp_cleanup(c->context);
    pthread_mutex_destroy(&c->lock);
    free(c);
}

static mscclpp_result_t ucx_mem_reg(tp_ctx_t *c, void *ptr, size_t bytes, tp_mem_t **mem)
{
    tp_mem_t *m = calloc(1, sizeof *m);
    if (!m) return ERR(MSCCLPP_ERR_NO_MEMORY, "ucx transport: out of memory");
    ucp_mem_map_params_t mp = {0};
    mp.field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH;
    mp.address = ptr;
    mp.length = bytes;
    ucs_status_t st = ucp_mem_map(c->context, &mp, &m->memh);
    if (st != UCS_OK) {
        free(m);
        return ERR(MSCCLPP_ERR_SYSTEM, "ucx transport: ucp_mem_map of [%p,+%zu): %s", ptr, bytes,
                   ucs_status_string(st));
    }
    m->ptr = ptr;
    m->bytes = bytes;
    *mem = m;
    return MSCCLPP_OK;
}

static mscclpp_result_t ucx_mem_pack(tp_ctx_t *c, tp_mem_t *mem, wire_writer_t *w)
{
    void *buf = NULL;
    size_t len = 0;
    ucs_status_t st = ucp_rkey_pack(c->context, mem->memh, &buf, &len);
    if (st != UCS_OK)
        return ERR(MSCCLPP_ERR_SYSTEM, "ucx transport: ucp_rkey_pack: %s", ucs_status_string(st));
    if (len > UCX_RKEY_MAX) {
        ucp_rkey_buffer_release(buf);
        return ERR(MSCCLPP_ERR_INTERNAL, "ucx transport: packed key of %zu bytes (at most %d)",
                   len, UCX_RKEY_MAX);
    }
    wire_put_u32(w, (uint32_t)len);
    wire_put_bytes(w, buf, len);
    ucp_rkey_buffer_release(buf);
    return MSCCLPP_OK;
}

static mscclpp_result_t ucx_mem_dereg(tp_ctx_t *c, tp_mem_t *mem)
{
    if (!mem) return MSCCLPP_OK;
    ucs_status_t st = ucp_mem_unmap(c->context, mem->memh);
    free(mem);
    if (st != UCS_OK)
        return ERR(MSCCLPP_ERR_SYSTEM, "ucx transport: ucp_mem_unmap: %s", ucs_status_string(st));
    return MSCCLPP_OK;
}

static mscclpp_result_t ucx_rmem_unpack(tp_ep_t *ep, uint64_t base, uint64_t bytes,
                                        wire_reader_t *r, tp_rmem_t **rmem)
{
    uint32_t len = wire_get_u32(r);
    if (r->bad || len == 0 || len > UCX_RKEY_MAX || len > r->len - r->pos)
        return ERR(MSCCLPP_ERR_REMOTE, "ucx transport: malformed key from rank %d", ep->peer);
    tp_rmem_t *m = calloc(1, sizeof *m);
    if (!m) return ERR(MSCCLPP_ERR_NO_MEMORY, "ucx transport: out of memory");
    pthread_mutex_lock(&ep->ctx->lock);
    ucs_status_t st = ucp_ep_rkey_unpack(ep->ep, r->buf + r->pos, &m->rkey);
    pthread_mutex_unlock(&ep->ctx->lock);
    if (st != UCS_OK) {
        free(m);
        return ucx_status("ucp_ep_rkey_unpack", ep->peer, st);
    }
    r->pos += len;
    m->base = base;
    m->bytes = bytes;
    *rmem = m;
    return MSCCLPP_OK;
}

static mscclpp_result_t ucx_rmem_release(tp_rmem_t *rmem)
{
    if (!rmem) return MSCCLPP_OK;
    ucp_rkey_destroy(rmem->rkey);
    free(rmem);
    return MSCCLPP_OK;
}

static void ucx_ep_error(void *arg, ucp_ep_h uep, ucs_status_t status)
{
    (void)uep;
    tp_ep_t *ep = arg;
    ep->failed = status;
}

static mscclpp_result_t ucx_connect(tp_ctx_t *c, int peer, int tag, tp_ep_t **out)
{
    mscclpp_comm_t *comm = c->comm;
    ucp_address_t *addr = NULL;
    size_t alen = 0;
    pthread_mutex_lock(&c->lock);
    ucs_status_t st = ucp_worker_get_address(c->worker, &addr, &alen);
    pthread_mutex_unlock(&c->lock);
    if (st != UCS_OK) return ucx_status("ucp_worker_get_address", peer, st);
    uint64_t len = alen, plen = 0;
    mscclpp_result_t res = mscclpp_bootstrap_send(comm->boot, &len, sizeof len, peer, tag);
    if (res == MSCCLPP_OK) res = mscclpp_bootstrap_send(comm->boot, addr, alen, peer, tag);
    pthread_mutex_lock(&c->lock);
    ucp_worker_release_address(c->worker, addr);
    pthread_mutex_unlock(&c->lock);
    CHECK(res);
    CHECK(mscclpp_bootstrap_recv(comm->boot, &plen, sizeof plen, peer, tag));
    if (plen == 0 || plen > (1u << 20))
        return ERR(MSCCLPP_ERR_REMOTE, "ucx transport: rank %d announced a %llu-byte address",
                   peer, (unsigned long long)plen);
    void *paddr = malloc(plen);
    tp_ep_t *ep = calloc(1, sizeof *ep);
    if (!paddr || !ep) {
        free(paddr);
        free(ep);
        return ERR(MSCCLPP_ERR_NO_MEMORY, "ucx transport: out of memory");
    }
    res = mscclpp_bootstrap_recv(comm->boot, paddr, plen, peer, tag);
    if (res != MSCCLPP_OK) {
        free(paddr);
        free(ep);
        return res;
    }
    ep->ctx = c;
    ep->peer = peer;
    ep->failed = UCS_OK;
    ucp_ep_params_t ep_params = {0};
    ep_params.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS |
                           UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE | UCP_EP_PARAM_FIELD_ERR_HANDLER;
    ep_params.address = paddr;
    ep_params.err_mode = UCP_ERR_HANDLING_MODE_PEER;
    ep_params.err_handler.cb = ucx_ep_error;
    ep_params.err_handler.arg = ep;
    pthread_mutex_lock(&c->lock);
    st = ucp_ep_create(c->worker, &ep_params, &ep->ep);
    if (st == UCS_ERR_UNREACHABLE) {
        /* shared-memory transports have no peer failure detection: connect without it (a
         * dead peer then shows as a timeout of the wait on it) */
        ep_params.err_mode = UCP_ERR_HANDLING_MODE_NONE;
        ep_params.field_mask &= ~(uint64_t)UCP_EP_PARAM_FIELD_ERR_HANDLER;
        st = ucp_ep_create(c->worker, &ep_params, &ep->ep);
    }
    if (st == UCS_OK) {
        ep->next = c->eps;
        c->eps = ep;
    }
    pthread_mutex_unlock(&c->lock);
    free(paddr);
    if (st != UCS_OK) {
        free(ep);
        return ucx_status("ucp_ep_create", peer, st);
    }
    INFO(SUBSYS_NET, "rank %d: ucx endpoint to rank %d", comm->rank, peer);
    *out = ep;
    return MSCCLPP_OK;
}

/*
 * The endpoint's error handler fired. A call that needed the connection (put, signal, flush)
 * logs it. Two cases stay quiet, because a peer closing its endpoint at a normal shutdown looks
 * exactly like a dead peer to UCX: our own close, and the passive check the proxy makes while
 * idle (ep_status); a real failure found that way is still returned, and logged by the launch or
 * call that meets it (the executor decodes the proxy's error with ERR).
 */
static mscclpp_result_t ucx_failed_at(tp_ep_t *ep, const char *what, bool quiet)
{
    if (quiet || ep->closing)
        return core_error_quiet(MSCCLPP_ERR_REMOTE, "ucx transport: %s to rank %d: the "
                                "connection failed (%s); is rank %d alive?", what, ep->peer,
                                ucs_status_string(ep->failed), ep->peer);
    return ERR(MSCCLPP_ERR_REMOTE, "ucx transport: %s to rank %d: the connection failed (%s); "
               "is rank %d alive?", what, ep->peer, ucs_status_string(ep->failed), ep->peer);
}

static mscclpp_result_t ucx_failed(tp_ep_t *ep, const char *what)
{
    return ucx_failed_at(ep, what, false);
}

static mscclpp_result_t ucx_put(tp_ep_t *ep, tp_rmem_t *dst, uint64_t dst_off, tp_mem_t *src,
                                uint64_t src_off, uint64_t bytes)
{
    CHECK(tp_check_put("ucx", ep->peer, dst_off, dst->bytes, src_off, src->bytes, bytes));
    if (ep->failed != UCS_OK) return ucx_failed(ep, "put");
    if (bytes == 0) return MSCCLPP_OK;
    ucp_request_param_t p = {0};
    pthread_mutex_lock(&ep->ctx->lock);
    ucs_status_ptr_t req =
        ucp_put_nbx(ep->ep, src->ptr + src_off, bytes, dst->base + dst_off, dst->rkey, &p);
    if (UCS_PTR_IS_PTR(req)) ucp_request_free(req); /* completes in the background: flush */
    pthread_mutex_unlock(&ep->ctx->lock);
    if (UCS_PTR_IS_ERR(req)) return ucx_status("ucp_put_nbx", ep->peer, UCS_PTR_STATUS(req));
    return MSCCLPP_OK;
}

/* Wait (lock held on entry and exit) until `req` is done, driving progress and backing off by
 * the one wait policy (base/wait.h: a flush of a large put lasts milliseconds, and a busy loop
 * of that length starves the peer's ranks on a shared node); releases `req`. */
static mscclpp_result_t ucx_wait_req(tp_ep_t *ep, void *req, uint64_t timeout_ns,
                                     const char *what)
{
    tp_ctx_t *c = ep->ctx;
    base_wait_t w;
    base_wait_init(&w, timeout_ns, c->spin);
    ucs_status_t st;
    while ((st = ucp_request_check_status(req)) == UCS_INPROGRESS) {
        /* a transfer that moves stays in the spin phase; only an idle one backs off */
        if (ucp_worker_progress(c->worker)) w.polls = 0;
        if (ep->failed != UCS_OK) break;
        if (!base_wait_pause(&w)) {
            ucp_request_cancel(c->worker, req);
            ucp_request_free(req);
            return ERR(MSCCLPP_ERR_TIMEOUT, "ucx transport: %s to rank %d did not complete in "
                       "%.1f s", what, ep->peer, (double)timeout_ns / 1e9);
        }
    }
    ucp_request_free(req);
    if (ep->failed != UCS_OK) return ucx_failed(ep, what);
    if (st != UCS_OK) return ucx_status(what, ep->peer, st);
    return MSCCLPP_OK;
}

static mscclpp_result_t ucx_signal(tp_ep_t *ep, tp_rmem_t *dst, uint64_t dst_off, uint64_t total)
{
    CHECK(tp_check_signal("ucx", ep->peer, dst_off, dst->bytes));
    if (ep->failed != UCS_OK) return ucx_failed(ep, "signal");
    tp_ctx_t *c = ep->ctx;
    mscclpp_result_t res = MSCCLPP_OK;
    pthread_mutex_lock(&c->lock);
    ucx_sig_t *s = &ep->sig[ep->sig_next++ % UCX_SIG_SLOTS];
    if (s->req) { /* UCX may still read this slot's value */
        res = ucx_wait_req(ep, s->req, config_timeout_ns(), "signal");
        s->req = NULL;
    }
    if (res == MSCCLPP_OK) {
        ucs_status_t st = ucp_worker_fence(c->worker);
        if (st != UCS_OK) res = ucx_status("ucp_worker_fence", ep->peer, st);
    }
    if (res == MSCCLPP_OK) {
        s->value = total;
        ucp_request_param_t p = {0};
        ucs_status_ptr_t req =
            ucp_put_nbx(ep->ep, &s->value, sizeof s->value, dst->base + dst_off, dst->rkey, &p);
        if (UCS_PTR_IS_ERR(req)) res = ucx_status("signal put", ep->peer, UCS_PTR_STATUS(req));
        else if (UCS_PTR_IS_PTR(req)) s->req = req;
    }
    pthread_mutex_unlock(&c->lock);
    return res;
}

static mscclpp_result_t ucx_flush(tp_ep_t *ep, uint64_t timeout_ns)
{
    if (ep->failed != UCS_OK) return ucx_failed(ep, "flush");
    tp_ctx_t *c = ep->ctx;
    mscclpp_result_t res = MSCCLPP_OK;
    ucp_request_param_t p = {0};
    pthread_mutex_lock(&c->lock);
    ucs_status_ptr_t req = ucp_ep_flush_nbx(ep->ep, &p);
    if (UCS_PTR_IS_ERR(req)) res = ucx_status("ucp_ep_flush_nbx", ep->peer, UCS_PTR_STATUS(req));
    else if (UCS_PTR_IS_PTR(req)) res = ucx_wait_req(ep, req, timeout_ns, "flush");
    /* everything issued before the flush is done: signal slots are free again */
    for (int i = 0; i < UCX_SIG_SLOTS && res == MSCCLPP_OK; i++)
        if (ep->sig[i].req) {
            ucp_request_free(ep->sig[i].req);
            ep->sig[i].req = NULL;
        }
    pthread_mutex_unlock(&c->lock);
    return res;
}

static mscclpp_result_t ucx_progress(tp_ctx_t *c)
{
    pthread_mutex_lock(&c->lock);
    while (ucp_worker_progress(c->worker)) {}
    pthread_mutex_unlock(&c->lock);
    return MSCCLPP_OK;
}

/* Drain, then arm the worker's event fd; UCS_ERR_BUSY: events came in while draining. */
static mscclpp_result_t ucx_arm(tp_ctx_t *c, int *fd)
{
    *fd = -1;
    if (c->efd < 0) return core_error_quiet(MSCCLPP_ERR_UNSUPPORTED, "ucx: no event fd");
    pthread_mutex_lock(&c->lock);
    while (ucp_worker_progress(c->worker)) {}
    ucs_status_t st = ucp_worker_arm(c->worker);
    pthread_mutex_unlock(&c->lock);
    if (st == UCS_OK) *fd = c->efd;
    else if (st != UCS_ERR_BUSY) return ucx_status("ucp_worker_arm", c->comm->rank, st);
    return MSCCLPP_OK;
}

/* a peer that died while we only wait for it shows up here, not in a call of ours */
static mscclpp_result_t ucx_ep_status(tp_ep_t *ep)
{
    return ep->failed == UCS_OK ? MSCCLPP_OK : ucx_failed_at(ep, "connection", true);
}

static mscclpp_result_t ucx_close(tp_ep_t *ep)
{
    if (!ep) return MSCCLPP_OK;
    tp_ctx_t *c = ep->ctx;
    pthread_mutex_lock(&c->lock);
    ep->closing = true;
    for (int i = 0; i < UCX_SIG_SLOTS; i++)
        if (ep->sig[i].req) {
            if (ep->failed == UCS_OK)
                (void)ucx_wait_req(ep, ep->sig[i].req, config_timeout_ns(), "signal");
            else
                ucp_request_free(ep->sig[i].req);
            ep->sig[i].req = NULL;
        }
    for (tp_ep_t **pp = &c->eps; *pp; pp = &(*pp)->next)
        if (*pp == ep) {
            *pp = ep->next;
            break;
        }
    ucp_request_param_t p = {0};
    p.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
    /* forced: callers flush first; a flushing close would wait for a peer that may already
     * have stopped driving its worker */
    p.flags = UCP_EP_CLOSE_FLAG_FORCE;
    ucs_status_ptr_t req = ucp_ep_close_nbx(ep->ep, &p);
    mscclpp_result_t res = MSCCLPP_OK;
    if (UCS_PTR_IS_PTR(req)) {
        res = ucx_wait_req(ep, req, config_timeout_ns(), "close");
        core_clear_error(); /* the peer may have closed first; nothing left to lose */
        res = MSCCLPP_OK;
    }
    pthread_mutex_unlock(&c->lock);
    free(ep);
    return res;
}

static const tp_ops_t ucx_ops = {
    .size = sizeof(tp_ops_t),
    .abi_version = TP_ABI_VERSION,
    .name = "ucx",
    .bit = MSCCLPP_TRANSPORT_UCX,
    .probe = ucx_probe,
    .can_connect = ucx_can_connect,
    .init = ucx_init,
    .fini = ucx_fini,
    .mem_reg = ucx_mem_reg,
    .mem_pack = ucx_mem_pack,
    .mem_dereg = ucx_mem_dereg,
    .rmem_unpack = ucx_rmem_unpack,
    .rmem_release = ucx_rmem_release,
    .connect = ucx_connect,
    .put = ucx_put,
    .signal = ucx_signal,
    .flush = ucx_flush,
    .progress = ucx_progress,
    .ep_status = ucx_ep_status,
    .close = ucx_close,
    .arm = ucx_arm,
};

#else /* not built */

static mscclpp_result_t ucx_not_built(void)
{
    return core_error_quiet(MSCCLPP_ERR_UNSUPPORTED,
                            "not built: configure found no UCX (apt-get install libucx-dev)");
}

static const tp_ops_t ucx_ops = {
    .size = sizeof(tp_ops_t),
    .abi_version = TP_ABI_VERSION,
    .name = "ucx",
    .bit = MSCCLPP_TRANSPORT_UCX,
    .probe = ucx_not_built,
    .can_connect = tp_stub_can_connect,
    TP_STUB_SLOTS
};

#endif

const tp_ops_t *tp_ucx_ops(void) { return &ucx_ops; }
