/*
 * The ucx transport: UCP one-sided operations between nodes (or, when forced with
 * MSCCLPP_TRANSPORTS=ucx, within one).
 *
 *   context/worker  one per communicator; every worker call holds `lock` (the worker is
 *                   created SERIALIZED: proxies of several executor contexts share it)
 *   connect         ep_open packs the worker's address, core carries it to the peer with the
 *                   memory keys, ep_connect makes the endpoint from the peer's; it uses peer
 *                   error handling, so a dead peer fails the next operation instead of hanging it
 *   put, signal     one active message (ucp_am_send_nbx) each, or ONE message for a put
 *                   followed by a signal on the same connection (the proxy's put-with-signal):
 *                   a header {sender, destination address, counter address, new total} and
 *                   the data. The receiver's handler (run by its worker progress) checks that
 *                   both addresses lie in memory it registered, copies the data (eager) or
 *                   receives it in place (rendezvous, ucp_am_recv_data_nbx), then stores the
 *                   counter. A signal is applied only when no rendezvous receive from the same
 *                   sender is in flight, so it is seen after the data of every earlier put.
 *                   Why not ucp_put_nbx + a fenced counter put (the first version): over UCX
 *                   1.13's tcp transport a put is a slow protocol (ucx_perftest on the veth:
 *                   ucp_put_lat 21-92 us one-way vs ucp_am_lat 8 us; 16 MiB put 150-280 MB/s
 *                   vs am 320-1200 MB/s), a signal cost a second message after each put, and a
 *                   flush waited for the put acknowledgement round trip.
 *                   A put is held back until the next call on the connection (a signal folds
 *                   it into its own message; anything else, progress included, sends it).
 *   flush           wait for every message's send completion (its source is free again: all a
 *                   plan's flush needs, TP_FLUSH_LOCAL); TP_FLUSH_REMOTE then also waits for
 *                   ucp_ep_flush_nbx (a round trip), driven by ucp_worker_progress, bounded by
 *                   the timeout
 *   progress        ucp_worker_progress: over tcp the target side of a put needs it
 *   arm             ucp_worker_arm on the worker's event fd (UCP_FEATURE_WAKEUP), for the
 *                   proxy to sleep until a peer's put arrives
 *   staging         memory this UCX cannot touch (GPU memory: Debian's UCX has no CUDA/ROCm
 *                   support, so ucp_mem_map of it and the handler's memcpy into it would fail or
 *                   fault) is "staged": never mapped, its key says so, and every byte goes through
 *                   pinned host bounce buffers (hal->host_alloc), copied with the HAL on a stream
 *                   of our own. Sender: device -> bounce, then the message is sent from the
 *                   bounce, which is recycled at send completion; a put is cut into messages of
 *                   at most one chunk (MSCCLPP_UCX_STAGE_CHUNK), the signal rides the last.
 *                   Receiver: eager data is copied from UCX's buffer into the destination;
 *                   rendezvous data is received into a bounce and copied in when it arrived,
 *                   before the receive counts as done, so the signal ordering above covers it.
 *                   The bounces and the stream are made at the first staged registration
 *                   (context setup), never by the proxy: there a launch runs that waits for
 *                   the proxy, and on a GPU a pinned allocation (cudaHostAlloc: "page-locked
 *                   host memory allocation" is among the CUDA guide's implicit synchronizations;
 *                   under MPS it waited for the running kernel) would wait for it in turn.
 *                   Sends take one of UCX_STAGE_SEND_BUFS, rendezvous receives one of
 *                   UCX_STAGE_RECV_BUFS, and a receive that finds none waits (UCX keeps its
 *                   data) until an earlier one's copy-in frees one. Eager data and a staged
 *                   counter's value go through one more bounce (xbounce), copied in and waited
 *                   for under the lock: the HAL never copies from pageable memory (UCX's
 *                   buffer, a stack variable), which CUDA may copy synchronously or stage and
 *                   synchronize first, in the proxy, while the kernel waits for it.
 *                   MSCCLPP_HAL_SYNC_CHECK=1 makes the host backend refuse every call of that
 *                   kind from a proxy during a launch (hal/host/host_check.c): CI runs the
 *                   staged tests so.
 *                   MSCCLPP_UCX_STAGING=auto stages only what the CPU cannot read on a GPU
 *                   backend whose UCX lacks that memory type; always stages every registration
 *                   (how CI runs the whole path on the host backend); never stages nothing.
 */
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "config.h"
#include "base/config.h"
#include "base/debug.h"
#include "base/wait.h"
#include "transports/tp_check.h"
#include "transports/transport.h"

TP_DEFINE_STUBS("ucx")

#ifdef MSCCLPP_HAVE_UCX
#include <ucp/api/ucp.h>

#define UCX_RKEY_MAX 768
#define UCX_AM_ID 0x6d /* our one active-message id */
#define UCX_AM_MAGIC 0x4d414355u /* "UCAM" */
enum { UCX_AM_DATA = 1u, UCX_AM_SIGNAL = 2u };

/* What every message carries (the data, if any, follows as the message's payload). */
typedef struct {
    uint32_t magic, flags;
    int32_t src; /* the sender's rank */
    uint32_t pad;
    uint64_t dst;   /* UCX_AM_DATA: where the payload goes, in the receiver's address space */
    uint64_t sig;   /* UCX_AM_SIGNAL: the receiver's 8-byte counter */
    uint64_t value; /* and its new total */
} ucx_am_hdr_t;

/* A message being sent: UCX reads the header until the send completes (1.13 has no flag to
 * copy it at once). */
typedef struct {
    struct tp_ep *ep;
    void *bounce; /* staging buffer the payload is sent from, recycled at completion */
    ucx_am_hdr_t hdr;
} ucx_send_t;

enum { UCX_STAGE_AUTO, UCX_STAGE_ALWAYS, UCX_STAGE_NEVER };
#define UCX_STAGE_SEND_BUFS 4 /* bounces one context's sends may hold: copy k+1 while k flies */
#define UCX_STAGE_RECV_BUFS 8 /* bounces its staged receives may hold (more wait for one) */
/* and one for the copies the handler makes and waits for under the lock (eager data, a staged
 * counter's value), so that the HAL never copies from pageable memory */
#define UCX_STAGE_BUFS (UCX_STAGE_SEND_BUFS + UCX_STAGE_RECV_BUFS + 1)
#define UCX_KEY_UCX 1u        /* the key's kind: a UCX rkey follows */
#define UCX_KEY_STAGED 2u     /* staged memory: no rkey (active messages use base/size only) */

/* A rendezvous message being received in place. */
typedef struct ucx_recv {
    struct ucx_recv *next;
    struct tp_ctx *ctx;
    ucx_am_hdr_t hdr;
    size_t len;
    void *bounce;    /* staged destination: received here, then copied to hdr.dst */
    void *desc;      /* waiting for a bounce: UCX's data descriptor, received from later */
    bool sig_staged; /* the counter is staged memory */
    uint64_t seq;    /* its signal's place among the held-back ones (tp_ctx.defer_seq) */
} ucx_recv_t;

/* A signal held back while a rendezvous receive from its sender is in flight. */
typedef struct {
    int src;
    bool staged;
    uint64_t addr, value;
    uint64_t seq; /* arrival order of the message that carried it */
} ucx_defer_t;

struct tp_ctx {
    const tp_world_t *world;
    pthread_mutex_t lock;
    /* who holds `lock` (ucx_lock): its thread id (0: nobody), since when (base_now_ns), and
     * what it does there (the call, or the wait inside it), for the error of a call that waited
     * too long for the lock; written by the holder, read by waiters without the lock */
    _Atomic int holder_tid;
    _Atomic uint64_t holder_since;
    const char *_Atomic holder_what;
    ucp_context_h context;
    ucp_worker_h worker;
    int efd;       /* the worker's event fd; -1 when UCX gave none */
    uint32_t spin; /* polls of a flush before it yields (base_wait_spin) */
    struct tp_ep *eps; /* open endpoints (progress reports the failed ones) */
    struct tp_mem *mems; /* our registrations: where a peer's message may write */
    int nsrc;            /* ranks of the communicator */
    uint64_t *rndv_started, *rndv_done; /* per sender: rendezvous receives */
    ucx_recv_t *recvs;   /* rendezvous receives in flight */
    ucx_recv_t *copying, *copying_tail; /* staged receives whose copy-in is queued, in order */
    ucx_defer_t *defer;  /* signals held back, in the order their messages arrived (seq) */
    size_t ndefer, cap_defer;
    uint64_t defer_seq;  /* the next message's place in that order */
    mscclpp_result_t am_res; /* first bad message (reported by progress, naming the sender) */
    char am_err[300];
    /* staging (see the top): the HAL of the communicator, its device, the mode */
    const hal_ops_t *hal;
    int dev;             /* device current when the context was made; -1 unknown */
    bool ucx_devmem;     /* this UCX maps the backend's device memory itself */
    size_t chunk;        /* bytes of one bounce buffer, the most one staged message carries */
    hal_stream_t sstream; /* our copies' stream (non-blocking on CUDA/HIP) */
    bool prepared;       /* the stream and every bounce made (ucx_stage_prepare) */
    void *ball[UCX_STAGE_BUFS]; /* every bounce buffer (freed at fini only) */
    size_t nall;
    void *sfree[UCX_STAGE_SEND_BUFS], *rfree[UCX_STAGE_RECV_BUFS]; /* free to take */
    void *xbounce;       /* the handler's synchronous copies (UCX_STAGE_BUFS): free between them */
    unsigned nsfree, nrfree;
    ucx_recv_t *waiting, *waiting_tail; /* rendezvous receives waiting for a bounce, in order */
};

struct tp_ep {
    struct tp_ep *next;
    tp_ctx_t *ctx;
    int peer;
    ucp_ep_h ep;
    /* a ucs_status_t: set inside ucp_worker_progress (the error handler, a failed send), lock
     * held, by whichever thread drives the worker - several executor contexts' proxies share one
     * worker - and read without the lock by every call: atomic (ucx_ep_failed/ucx_ep_fail) */
    _Atomic int failed;
    bool closing;      /* in ucx_close: a peer that closed first is no news */
    uint64_t inflight; /* messages whose send has not completed (lock held, always) */
    bool lost;         /* a message's send completed with an error (lock held) */
    ucx_send_t *pending;          /* a put held back for a following signal */
    const void *pbuf;
    size_t plen;
};

static ucs_status_t ucx_ep_failed(tp_ep_t *ep)
{
    return (ucs_status_t)atomic_load_explicit(&ep->failed, memory_order_acquire);
}

static void ucx_ep_fail(tp_ep_t *ep, ucs_status_t st)
{
    atomic_store_explicit(&ep->failed, (int)st, memory_order_release);
}

/* ---- the context's lock: held by one thread at a time, bounded for the proxy's calls ---- */

static int ucx_tid(void)
{
    static _Thread_local int tid;
    if (!tid) tid = (int)syscall(SYS_gettid);
    return tid;
}

static void ucx_held(tp_ctx_t *c, const char *what)
{
    atomic_store_explicit(&c->holder_what, what, memory_order_relaxed);
    atomic_store_explicit(&c->holder_since, base_now_ns(), memory_order_relaxed);
    atomic_store_explicit(&c->holder_tid, ucx_tid(), memory_order_release);
}

/* Take the lock for `what` (setup calls: they wait as long as it takes). */
static void ucx_lock(tp_ctx_t *c, const char *what)
{
    pthread_mutex_lock(&c->lock);
    ucx_held(c, what);
}

static void ucx_unlock(tp_ctx_t *c)
{
    atomic_store_explicit(&c->holder_tid, 0, memory_order_relaxed);
    pthread_mutex_unlock(&c->lock);
}

/* Say what the holder does now (a wait inside its call); returns what it said before. */
static const char *ucx_doing(tp_ctx_t *c, const char *what)
{
    return atomic_exchange_explicit(&c->holder_what, what, memory_order_relaxed);
}

/* "thread 1234 (mscclpp-proxy), for 2.0 s, in flush" */
static void ucx_holder(tp_ctx_t *c, char *buf, size_t cap)
{
    int tid = atomic_load_explicit(&c->holder_tid, memory_order_acquire);
    const char *what = atomic_load_explicit(&c->holder_what, memory_order_relaxed);
    uint64_t since = atomic_load_explicit(&c->holder_since, memory_order_relaxed);
    uint64_t now = base_now_ns();
    char name[32] = "?", path[64];
    snprintf(path, sizeof path, "/proc/self/task/%d/comm", tid);
    FILE *f = tid ? fopen(path, "r") : NULL;
    if (f) {
        if (fgets(name, sizeof name, f)) name[strcspn(name, "\n")] = 0;
        fclose(f);
    }
    if (!tid) snprintf(buf, cap, "a thread that just let it go");
    else
        snprintf(buf, cap, "thread %d (%s), for %.1f s, in %s", tid, name,
                 now > since ? (double)(now - since) / 1e9 : 0.0, what ? what : "?");
}

/*
 * Take the lock for the proxy's call `what` to `peer`, bounded by MSCCLPP_TIMEOUT: every worker
 * call holds it, and a holder that waits inside (a flush, a staging copy) keeps every other
 * proxy of the communicator out meanwhile. Past one second a warning names the holder and what
 * it does, once; past the timeout the call fails with the same. (On one H200 a put sat in a
 * futex wait for 30 s: this is the futex a put can wait on, and the message says for whom.)
 */
static mscclpp_result_t ucx_lock_bounded(tp_ctx_t *c, const char *what, int peer)
{
    if (pthread_mutex_trylock(&c->lock) != 0) {
        const uint64_t limit = config_timeout_ns(), t0 = base_now_ns();
        bool warned = false;
        for (;;) {
            struct timespec ts;
            clock_gettime(CLOCK_REALTIME, &ts); /* timedlock's clock; a slice, not the bound */
            ts.tv_sec += 1;
            if (pthread_mutex_timedlock(&c->lock, &ts) == 0) break;
            uint64_t waited = base_now_ns() - t0;
            char who[160];
            ucx_holder(c, who, sizeof who);
            char to[32] = "";
            if (peer >= 0) snprintf(to, sizeof to, " to rank %d", peer);
            if (waited >= limit)
                return ERR(MSCCLPP_ERR_TIMEOUT, "ucx transport: rank %d: %s%s waited %.1f s for "
                           "the transport's lock, held by %s", c->world->rank, what, to,
                           (double)waited / 1e9, who);
            if (!warned)
                WARN(SUBSYS_NET, "ucx transport: rank %d: %s%s has waited %.1f s for the "
                     "transport's lock, held by %s", c->world->rank, what, to,
                     (double)waited / 1e9, who);
            warned = true;
        }
    }
    ucx_held(c, what);
    return MSCCLPP_OK;
}

mscclpp_result_t tp_ucx_hold_lock(tp_ctx_t *c, const char *what, unsigned ms)
{
    if (!c) return ERR_ARG("tp_ucx_hold_lock: no context");
    ucx_lock(c, what);
    struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
    ucx_unlock(c);
    return MSCCLPP_OK;
}

struct tp_mem {
    struct tp_mem *next;
    ucp_mem_h memh; /* NULL when staged */
    char *ptr;
    size_t bytes;
    bool staged;
};

struct tp_rmem {
    ucp_rkey_h rkey; /* NULL when the peer stages this memory */
    uint64_t base, bytes;
    uint64_t chunk;  /* staged at the peer: its messages to here carry at most this much */
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
    p.features = UCP_FEATURE_RMA | UCP_FEATURE_AM | UCP_FEATURE_WAKEUP;
    ucp_config_t *cfg = NULL;
    ucs_status_t st = ucp_config_read(NULL, NULL, &cfg);
    if (st != UCS_OK) return st;
    if (!getenv("UCX_RCACHE_ENABLE")) (void)ucp_config_modify(cfg, "RCACHE_ENABLE", "no");
    st = ucp_init(&p, cfg, ctx);
    if (st != UCS_OK) { /* a UCX without wakeup support: the proxy's sleeps stay timed */
        p.features = UCP_FEATURE_RMA | UCP_FEATURE_AM;
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

/* ---- staging through pinned host memory ------------------------------------------------- */

static uint64_t ucx_late_allocs; /* tp_ucx_stage_late_allocs */
uint64_t tp_ucx_stage_late_allocs(void) { return __atomic_load_n(&ucx_late_allocs, __ATOMIC_RELAXED); }

/*
 * Queue one copy by the HAL on the context's own stream (dst == NULL: none), and with `wait`
 * wait for every copy queued there. Not memcpy_sync: on CUDA it runs
 * on the legacy default stream, which waits for work on blocking streams, possibly the very
 * kernel that waits for this proxy (a deadlock); the HAL's streams are non-blocking
 * (cudaStreamNonBlocking / hipStreamNonBlocking) and stream_sync is bounded by MSCCLPP_TIMEOUT.
 * The calling thread gets the context's device for the call (the proxy thread has it already,
 * core/proxy.c; a user thread calling flush through the C API may have another one current).
 */
static mscclpp_result_t ucx_stage_op(tp_ctx_t *c, void *dst, const void *src, size_t n, bool wait)
{
    const hal_ops_t *hal = c->hal;
    int cur = -1;
    if (c->dev >= 0 && hal->device_get(&cur) == MSCCLPP_OK && cur != c->dev)
        CHECK(hal->device_set(c->dev));
    else
        cur = -1; /* nothing to restore */
    mscclpp_result_t res = MSCCLPP_OK;
    if (!c->sstream) { /* not prepared (a bug): made now, and counted */
        res = hal->stream_create(&c->sstream);
        __atomic_add_fetch(&ucx_late_allocs, 1, __ATOMIC_RELAXED);
    }
    if (res == MSCCLPP_OK && dst) res = hal->memcpy_async(dst, src, n, c->sstream);
    if (res == MSCCLPP_OK && wait) {
        const char *was = ucx_doing(c, "the wait for a staging copy (HAL stream_sync)");
        res = hal->stream_sync(c->sstream);
        ucx_doing(c, was);
    }
    if (cur >= 0) (void)hal->device_set(cur);
    return res;
}

static mscclpp_result_t ucx_stage_copy(tp_ctx_t *c, void *dst, const void *src, size_t n)
{
    return ucx_stage_op(c, dst, src, n, true);
}

/*
 * The staging resources of the context: its copy stream and UCX_STAGE_BUFS bounce buffers of
 * c->chunk bytes, made once, by the first staged registration (lock held), in the thread that
 * sets up a context, before any launch can wait for this transport's proxy. They are freed only
 * at fini: freeing pinned memory (cudaFreeHost) may synchronize the device too.
 */
static mscclpp_result_t ucx_stage_prepare(tp_ctx_t *c)
{
    if (c->prepared) return MSCCLPP_OK;
    const hal_ops_t *hal = c->hal;
    int cur = -1;
    if (c->dev >= 0 && hal->device_get(&cur) == MSCCLPP_OK && cur != c->dev)
        CHECK(hal->device_set(c->dev));
    else
        cur = -1; /* nothing to restore */
    mscclpp_result_t res = MSCCLPP_OK;
    if (!c->sstream) res = hal->stream_create(&c->sstream);
    while (res == MSCCLPP_OK && c->nall < UCX_STAGE_BUFS) {
        void *b = NULL;
        res = hal->host_alloc(c->chunk, &b);
        if (res == MSCCLPP_OK) c->ball[c->nall++] = b;
    }
    if (cur >= 0) (void)hal->device_set(cur);
    if (res != MSCCLPP_OK)
        return ERR(res, "ucx transport: rank %d: %d staging buffers of %zu bytes (pinned host "
                   "memory, MSCCLPP_UCX_STAGE_CHUNK) and a copy stream: %s", c->world->rank,
                   UCX_STAGE_BUFS, c->chunk, mscclpp_last_error());
    for (unsigned i = 0; i < UCX_STAGE_SEND_BUFS; i++) c->sfree[i] = c->ball[i];
    for (unsigned i = 0; i < UCX_STAGE_RECV_BUFS; i++)
        c->rfree[i] = c->ball[UCX_STAGE_SEND_BUFS + i];
    c->xbounce = c->ball[UCX_STAGE_SEND_BUFS + UCX_STAGE_RECV_BUFS];
    c->nsfree = UCX_STAGE_SEND_BUFS;
    c->nrfree = UCX_STAGE_RECV_BUFS;
    c->prepared = true;
    return MSCCLPP_OK;
}

/* Staging from a path that only a registration should reach first (lock held): made now if
 * it was not, and counted (tp_ucx_stage_late_allocs). */
static mscclpp_result_t ucx_stage_ready(tp_ctx_t *c)
{
    if (c->prepared) return MSCCLPP_OK;
    __atomic_add_fetch(&ucx_late_allocs, 1, __ATOMIC_RELAXED);
    return ucx_stage_prepare(c);
}

/* A receive bounce (lock held), or NULL when every one is taken. */
static void *ucx_rbounce_take(tp_ctx_t *c)
{
    if (ucx_stage_ready(c) != MSCCLPP_OK || !c->nrfree) return NULL;
    return c->rfree[--c->nrfree];
}

static void ucx_rbounce_give(tp_ctx_t *c, void *b)
{
    if (b) c->rfree[c->nrfree++] = b; /* rfree has room for every receive bounce */
}

/* Is this registration staged? (for tests) */
bool tp_ucx_mem_staged(const tp_mem_t *m) { return m && m->staged; }

/* ---- receiving: the active-message handler (runs inside ucp_worker_progress, lock held) ---- */

/* The registration holding [addr, addr+len), or NULL. */
static struct tp_mem *ucx_find(const tp_ctx_t *c, uint64_t addr, uint64_t len)
{
    for (struct tp_mem *m = c->mems; m; m = m->next) {
        uint64_t base = (uint64_t)(uintptr_t)m->ptr;
        if (addr >= base && addr - base <= m->bytes && len <= m->bytes - (addr - base))
            return m;
    }
    return NULL;
}

/* A message we cannot trust: dropped, and the first one reported by progress. */
static void ucx_bad_msg(tp_ctx_t *c, int src, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void ucx_bad_msg(tp_ctx_t *c, int src, const char *fmt, ...)
{
    if (c->am_res != MSCCLPP_OK) return;
    int n = snprintf(c->am_err, sizeof c->am_err,
                     "ucx transport: rank %d: a message from rank "
                     "%d ",
                     c->world->rank, src);
    if (n > 0 && (size_t)n < sizeof c->am_err) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(c->am_err + n, sizeof c->am_err - (size_t)n, fmt, ap);
        va_end(ap);
    }
    c->am_res = MSCCLPP_ERR_REMOTE;
}

static void ucx_store_counter(tp_ctx_t *c, int src, uint64_t addr, uint64_t value, bool staged)
{
    if (staged) {
        /* the counter lives where only the HAL reaches: the value follows every staged copy
         * on the same stream, and this copy is waited for like them. Its source is pinned (the
         * handler's bounce): from a stack variable, pageable memory, CUDA may stage the copy
         * and synchronize first, or copy synchronously (host to host), in the proxy while the
         * kernel waits for it (MSCCLPP_HAL_SYNC_CHECK refuses that on the host backend) */
        mscclpp_result_t r = ucx_stage_ready(c);
        if (r == MSCCLPP_OK) {
            memcpy(c->xbounce, &value, sizeof value);
            r = ucx_stage_copy(c, (void *)(uintptr_t)addr, c->xbounce, sizeof value);
        }
        if (r != MSCCLPP_OK)
            ucx_bad_msg(c, src, "carried a signal that could not be copied to its staged "
                        "counter at 0x%llx: %s", (unsigned long long)addr, mscclpp_last_error());
        return;
    }
    /* release: the data this signal covers is visible to whoever acquires the counter */
    __atomic_store_n((uint64_t *)(uintptr_t)addr, value, __ATOMIC_RELEASE);
}

/* Apply the signals held back for `src` (no rendezvous receive of its is in flight now). */
static void ucx_release_deferred(tp_ctx_t *c, int src)
{
    size_t k = 0;
    for (size_t i = 0; i < c->ndefer; i++) {
        if (c->defer[i].src == src)
            ucx_store_counter(c, src, c->defer[i].addr, c->defer[i].value, c->defer[i].staged);
        else c->defer[k++] = c->defer[i];
    }
    c->ndefer = k;
}

/*
 * A signal that arrived: stored now, or held back behind the rendezvous receives from its
 * sender still in flight. `seq` is the place of the message that carried it in arrival order:
 * a rendezvous message's own signal is applied when its data is in, which is after the signals
 * of messages that came behind it, yet it was sent before them; held back in arrival order, a
 * later value is never overwritten by an earlier one (a fence record by the clearing store
 * before it, a counter by a smaller total).
 */
static void ucx_signal_in(tp_ctx_t *c, int src, uint64_t addr, uint64_t value, bool staged,
                          uint64_t seq)
{
    if (c->rndv_started[src] == c->rndv_done[src]) { /* nothing earlier still arriving */
        ucx_store_counter(c, src, addr, value, staged);
        return;
    }
    if (c->ndefer == c->cap_defer) {
        size_t cap = c->cap_defer ? 2 * c->cap_defer : 16;
        ucx_defer_t *d = realloc(c->defer, cap * sizeof *d);
        if (!d) {
            ucx_bad_msg(c, src, "carried a signal we had no memory to hold back");
            return;
        }
        c->defer = d;
        c->cap_defer = cap;
    }
    size_t at = c->ndefer++;
    for (; at > 0 && c->defer[at - 1].seq > seq; at--) c->defer[at] = c->defer[at - 1];
    c->defer[at] = (ucx_defer_t){src, staged, addr, value, seq};
}

/* A rendezvous receive is done, its data in the destination (or failed): the signal it
 * carries and those held back behind it may be stored now. */
static void ucx_recv_finish(tp_ctx_t *c, ucx_recv_t *r, bool ok)
{
    int src = r->hdr.src;
    ucx_rbounce_give(c, r->bounce);
    if (ok && (r->hdr.flags & UCX_AM_SIGNAL)) /* held back: this receive still counts as open */
        ucx_signal_in(c, src, r->hdr.sig, r->hdr.value, r->sig_staged, r->seq);
    c->rndv_done[src]++;
    if (c->rndv_started[src] == c->rndv_done[src]) ucx_release_deferred(c, src);
    free(r);
}

/*
 * Wait for the copy-ins queued on the stream and finish their receives, in arrival order (lock
 * held). Called after every worker progress (ucx_drive, ucx_wait_until) and by the eager
 * handler's own copy (which waits for the stream anyway), so a receive is finished at the
 * latest when the proxy next drives the worker; the proxy never sleeps with one queued.
 */
static void ucx_recv_resume(tp_ctx_t *c);

static void ucx_copies_settle(tp_ctx_t *c)
{
    if (c->copying) {
        bool ok = ucx_stage_op(c, NULL, NULL, 0, true) == MSCCLPP_OK;
        while (c->copying) {
            ucx_recv_t *r = c->copying;
            c->copying = r->next;
            if (!ok)
                ucx_bad_msg(c, r->hdr.src, "(%llu bytes to 0x%llx) could not be copied in from "
                            "its staging buffer: %s", (unsigned long long)r->len,
                            (unsigned long long)r->hdr.dst, mscclpp_last_error());
            ucx_recv_finish(c, r, ok);
        }
        c->copying_tail = NULL;
    }
    ucx_recv_resume(c); /* the bounces those receives gave back */
}

/* Drive the worker until it has nothing more to do, then finish the receives it completed
 * (lock held). Errors of messages stay in am_res, for progress to report. */
static void ucx_settle(tp_ctx_t *c)
{
    while (ucp_worker_progress(c->worker)) {}
    ucx_copies_settle(c);
}

static void ucx_recv_done(void *req, ucs_status_t st, size_t len, void *user)
{
    (void)len;
    ucx_recv_t *r = user;
    tp_ctx_t *c = r->ctx;
    int src = r->hdr.src;
    for (ucx_recv_t **pp = &c->recvs; *pp; pp = &(*pp)->next)
        if (*pp == r) {
            *pp = r->next;
            break;
        }
    if (req) ucp_request_free(req);
    bool ok = st == UCS_OK;
    if (!ok)
        ucx_bad_msg(c, src, "(%llu bytes to 0x%llx) did not arrive: %s",
                    (unsigned long long)r->len, (unsigned long long)r->hdr.dst,
                    ucs_status_string(st));
    /* staged: the data is in the bounce. Its copy into the destination is queued on the
     * stream, and the receive counts as done (its signal and those held back behind it are
     * stored) only once that copy finished (ucx_copies_settle); meanwhile the worker receives
     * the next chunk. */
    if (ok && r->bounce) {
        if (ucx_stage_op(c, (void *)(uintptr_t)r->hdr.dst, r->bounce, r->len, false) ==
            MSCCLPP_OK) {
            r->next = NULL;
            if (c->copying_tail) c->copying_tail->next = r;
            else c->copying = r;
            c->copying_tail = r;
            return;
        }
        ucx_bad_msg(c, src, "(%llu bytes to 0x%llx) could not be copied in from its staging "
                    "buffer: %s", (unsigned long long)r->len, (unsigned long long)r->hdr.dst,
                    mscclpp_last_error());
        ok = false;
    }
    ucx_recv_finish(c, r, ok);
}

/* Receive rendezvous message r (its data descriptor `desc`) in place, or into its bounce. */
static void ucx_recv_start(tp_ctx_t *c, ucx_recv_t *r, void *desc)
{
    r->desc = NULL;
    r->next = c->recvs;
    c->recvs = r;
    ucp_request_param_t p = {0};
    p.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
    p.cb.recv_am = ucx_recv_done;
    p.user_data = r;
    void *to = r->bounce ? r->bounce : (void *)(uintptr_t)r->hdr.dst;
    ucs_status_ptr_t q = ucp_am_recv_data_nbx(c->worker, desc, to, r->len, &p);
    if (UCS_PTR_IS_ERR(q)) ucx_recv_done(NULL, UCS_PTR_STATUS(q), 0, r);
    else if (q == NULL) ucx_recv_done(NULL, UCS_OK, r->len, r);
}

/* Start the receives that wait for a bounce, in arrival order, while bounces are free (lock
 * held). Their signals are held back meanwhile (counted in rndv_started on arrival). */
static void ucx_recv_resume(tp_ctx_t *c)
{
    while (c->waiting && c->nrfree) {
        ucx_recv_t *r = c->waiting;
        c->waiting = r->next;
        if (!c->waiting) c->waiting_tail = NULL;
        r->bounce = ucx_rbounce_take(c);
        ucx_recv_start(c, r, r->desc);
    }
}

static ucs_status_t ucx_am_recv(void *arg, const void *header, size_t hlen, void *data,
                                size_t len, const ucp_am_recv_param_t *param)
{
    tp_ctx_t *c = arg;
    ucx_am_hdr_t h;
    if (hlen != sizeof h) {
        ucx_bad_msg(c, -1, "has a %zu-byte header (want %zu)", hlen, sizeof h);
        return UCS_OK;
    }
    memcpy(&h, header, sizeof h);
    if (h.magic != UCX_AM_MAGIC || h.src < 0 || h.src >= c->nsrc ||
        (h.flags & ~(UCX_AM_DATA | UCX_AM_SIGNAL))) {
        ucx_bad_msg(c, h.src, "is not one of ours (magic 0x%x, flags 0x%x)", h.magic, h.flags);
        return UCS_OK;
    }
    struct tp_mem *dm = (h.flags & UCX_AM_DATA) ? ucx_find(c, h.dst, len) : NULL;
    if ((h.flags & UCX_AM_DATA) ? !dm : len != 0) {
        ucx_bad_msg(c, h.src, "writes %zu bytes at 0x%llx, outside our registered memory", len,
                    (unsigned long long)h.dst);
        return UCS_OK;
    }
    struct tp_mem *sm = NULL;
    if ((h.flags & UCX_AM_SIGNAL) && (h.sig % 8 != 0 || !(sm = ucx_find(c, h.sig, 8)))) {
        ucx_bad_msg(c, h.src, "signals a counter at 0x%llx, outside our registered memory",
                    (unsigned long long)h.sig);
        return UCS_OK;
    }
    bool sig_staged = sm && sm->staged;
    if (dm && dm->staged && len > c->chunk) { /* our key told the sender to cut at c->chunk */
        ucx_bad_msg(c, h.src, "carries %zu bytes into staged memory, more than one staging "
                    "chunk (%zu; MSCCLPP_UCX_STAGE_CHUNK differs between ranks?)", len, c->chunk);
        return UCS_OK;
    }
    if ((h.flags & UCX_AM_DATA) && (param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV)) {
        ucx_recv_t *r = calloc(1, sizeof *r);
        if (!r) {
            ucx_bad_msg(c, h.src, "(%zu bytes) found no memory to receive it in place", len);
            return UCS_OK;
        }
        r->ctx = c;
        r->hdr = h;
        r->len = len;
        r->sig_staged = sig_staged;
        r->seq = c->defer_seq++;
        c->rndv_started[h.src]++;
        if (dm->staged && !c->waiting) r->bounce = ucx_rbounce_take(c);
        if (dm->staged && !r->bounce) {
            /* every receive bounce holds data being received or copied in: this one waits,
             * UCX keeping its data, and starts when one comes back (ucx_recv_resume) */
            r->desc = data;
            if (c->waiting_tail) c->waiting_tail->next = r;
            else c->waiting = r;
            c->waiting_tail = r;
            return UCS_INPROGRESS;
        }
        ucx_recv_start(c, r, data);
        return UCS_INPROGRESS; /* the descriptor now belongs to the receive */
    }
    if (dm && dm->staged) {
        /* eager into staged memory: through the handler's bounce, pinned, never from UCX's
         * pageable buffer (a copy CUDA may make synchronous, or stage and synchronize first,
         * in the proxy while the kernel waits for it); the copy is waited for here */
        mscclpp_result_t cr = ucx_stage_ready(c);
        if (cr == MSCCLPP_OK) {
            memcpy(c->xbounce, data, len); /* len <= c->chunk, checked above */
            cr = ucx_stage_copy(c, (void *)(uintptr_t)h.dst, c->xbounce, len);
        }
        if (cr != MSCCLPP_OK) {
            ucx_bad_msg(c, h.src, "(%zu bytes to 0x%llx) could not be copied into staged "
                        "memory: %s", len, (unsigned long long)h.dst, mscclpp_last_error());
            return UCS_OK;
        }
        ucx_copies_settle(c); /* the stream is idle: every queued copy-in is done too */
    } else if (dm) {
        tp_copy_words((void *)(uintptr_t)h.dst, data, len);
    }
    if (h.flags & UCX_AM_SIGNAL)
        ucx_signal_in(c, h.src, h.sig, h.value, sig_staged, c->defer_seq++);
    return UCS_OK;
}

/* MSCCLPP_UCX_STAGING as UCX_STAGE_*, or -1 (bad value) */
static int ucx_stage_mode(void)
{
    const char *v = config_get(CFG_MSCCLPP_UCX_STAGING);
    if (!*v || !strcmp(v, "auto")) return UCX_STAGE_AUTO;
    if (!strcmp(v, "always")) return UCX_STAGE_ALWAYS;
    if (!strcmp(v, "never")) return UCX_STAGE_NEVER;
    return -1;
}

/* Does this UCX map and copy memory of the backend's kind itself (a UCX built with CUDA or
 * ROCm support)? Debian's has only host memory. */
/* MSCCLPP_UCX_STAGING checked: OK, or INVALID_ARG saying what it may be */
static mscclpp_result_t ucx_stage_mode_check(void)
{
    if (ucx_stage_mode() >= 0) return MSCCLPP_OK;
    return ERR_ARG("ucx transport: MSCCLPP_UCX_STAGING=\"%s\": want auto, always or never",
                   config_get(CFG_MSCCLPP_UCX_STAGING));
}

static bool ucx_has_devmem(ucp_context_h ctx, const hal_ops_t *hal)
{
    if (hal == hal_host_ops()) return true; /* "device" memory is host memory */
    ucp_context_attr_t a = {0};
    a.field_mask = UCP_ATTR_FIELD_MEMORY_TYPES;
    if (ucp_context_query(ctx, &a) != UCS_OK) return false;
    if (!strcmp(hal->name, "cuda")) return a.memory_types & UCS_BIT(UCS_MEMORY_TYPE_CUDA);
    if (!strcmp(hal->name, "hip")) return a.memory_types & UCS_BIT(UCS_MEMORY_TYPE_ROCM);
    return false;
}

/* Stage [ptr, ptr+bytes)? `why` says why or why not (INFO). The mode is the one in force at
 * registration (checked valid at init): a test can stage a buffer and not its counter, as auto
 * does on a GPU backend. */
static bool ucx_decide(const tp_ctx_t *c, const void *ptr, size_t bytes, const char **why)
{
    switch (ucx_stage_mode()) {
    case UCX_STAGE_ALWAYS: *why = "MSCCLPP_UCX_STAGING=always"; return true;
    case UCX_STAGE_NEVER: *why = "MSCCLPP_UCX_STAGING=never"; return false;
    default: break;
    }
    if (c->hal == hal_host_ops()) {
        *why = "host backend: its device memory is host memory";
        return false;
    }
    if (c->ucx_devmem) {
        *why = "this UCX accesses the backend's device memory itself";
        return false;
    }
    if (tp_cpu_readable(ptr, bytes)) {
        *why = "host memory (pinned or mapped)";
        return false;
    }
    *why = "device memory this UCX cannot access (no CUDA/ROCm support in it)";
    return true;
}

static mscclpp_result_t ucx_init(const tp_world_t *world, tp_ctx_t **out)
{
    CHECK(ucx_stage_mode_check());
    int64_t chunk = config_get_int(CFG_MSCCLPP_UCX_STAGE_CHUNK);
    if (chunk < 4096 || chunk > (1ll << 30))
        return ERR_ARG("ucx transport: MSCCLPP_UCX_STAGE_CHUNK=\"%s\": want 4096 to 2^30 bytes",
                       config_get(CFG_MSCCLPP_UCX_STAGE_CHUNK));
    tp_ctx_t *c = calloc(1, sizeof *c);
    if (!c) return ERR(MSCCLPP_ERR_NO_MEMORY, "ucx transport: out of memory");
    pthread_mutex_init(&c->lock, NULL);
    c->world = world;
    c->hal = world->hal ? world->hal : hal_host_ops();
    c->chunk = (size_t)chunk;
    if (c->hal->device_get(&c->dev) != MSCCLPP_OK) c->dev = -1;
    core_clear_error();
    ucs_status_t st = ucx_context_create(&c->context);
    if (st != UCS_OK) {
        free(c);
        return ucx_status("ucp_init", world->rank, st);
    }
    c->ucx_devmem = ucx_has_devmem(c->context, c->hal);
    ucp_worker_params_t wp = {0};
    wp.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
    wp.thread_mode = UCS_THREAD_MODE_SERIALIZED;
    st = ucp_worker_create(c->context, &wp, &c->worker);
    if (st != UCS_OK) {
        ucp_cleanup(c->context);
        free(c);
        return ucx_status("ucp_worker_create", world->rank, st);
    }
    if (ucp_worker_get_efd(c->worker, &c->efd) != UCS_OK) c->efd = -1; /* sleeps stay timed */
    c->nsrc = world->nranks;
    c->rndv_started = calloc((size_t)c->nsrc + 1, sizeof *c->rndv_started);
    c->rndv_done = calloc((size_t)c->nsrc + 1, sizeof *c->rndv_done);
    ucp_am_handler_param_t hp = {0};
    hp.field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID | UCP_AM_HANDLER_PARAM_FIELD_FLAGS |
                    UCP_AM_HANDLER_PARAM_FIELD_CB | UCP_AM_HANDLER_PARAM_FIELD_ARG;
    hp.id = UCX_AM_ID;
    hp.flags = UCP_AM_FLAG_WHOLE_MSG;
    hp.cb = ucx_am_recv;
    hp.arg = c;
    st = c->rndv_started && c->rndv_done ? ucp_worker_set_am_recv_handler(c->worker, &hp)
                                         : UCS_ERR_NO_MEMORY;
    if (st != UCS_OK) {
        ucp_worker_destroy(c->worker);
        ucp_cleanup(c->context);
        free(c->rndv_started);
        free(c->rndv_done);
        free(c);
        return ucx_status("ucp_worker_set_am_recv_handler", world->rank, st);
    }
    /* a flush runs in a proxy while, per local rank, its interpreter and stream poll too */
    c->spin = base_wait_spin(3u * (unsigned)(world->nlocal > 0 ? world->nlocal : 1));
    *out = c;
    return MSCCLPP_OK;
}

static void ucx_fini(tp_ctx_t *c)
{
    if (!c) return;
    core_error_kept_t kept; /* a failure's message outlives the clean-up (ucx_close) */
    core_error_keep(&kept);
    while (c->waiting) { /* receives that never found a bounce: UCX's data goes back */
        ucx_recv_t *r = c->waiting;
        c->waiting = r->next;
        ucp_am_data_release(c->worker, r->desc);
        free(r);
    }
    ucp_worker_destroy(c->worker);
    ucp_cleanup(c->context);
    if (c->copying) (void)ucx_stage_op(c, NULL, NULL, 0, true); /* before their bounces go */
    while (c->copying) {
        ucx_recv_t *r = c->copying;
        c->copying = r->next;
        free(r);
    }
    while (c->recvs) { /* receives a dead peer never finished */
        ucx_recv_t *r = c->recvs;
        c->recvs = r->next;
        free(r);
    }
    free(c->rndv_started);
    free(c->rndv_done);
    free(c->defer);
    /* the communicator is going: no kernel waits for this proxy any more */
    if (c->sstream) (void)c->hal->stream_destroy(c->sstream);
    for (size_t i = 0; i < c->nall; i++) (void)c->hal->host_free(c->ball[i]);
    core_error_put_back(&kept);
    pthread_mutex_destroy(&c->lock);
    free(c);
}

static mscclpp_result_t ucx_mem_reg(tp_ctx_t *c, void *ptr, size_t bytes, tp_mem_t **mem)
{
    CHECK(ucx_stage_mode_check());
    tp_mem_t *m = calloc(1, sizeof *m);
    if (!m) return ERR(MSCCLPP_ERR_NO_MEMORY, "ucx transport: out of memory");
    const char *why = "";
    m->staged = ucx_decide(c, ptr, bytes, &why);
    INFO(SUBSYS_NET, "rank %d: ucx registration [%p,+%zu) %s: %s", c->world->rank, ptr, bytes,
         m->staged ? "staged through pinned host memory" : "handed to UCX", why);
    if (!m->staged && !(c->hal != hal_host_ops() && c->ucx_devmem) &&
        !tp_cpu_readable(ptr, bytes)) {
        /* UCX would read and write it with the CPU: a fault in the proxy, or puts that never
         * arrive and show up only as the peers' timeouts. Refused here, at setup. */
        free(m);
        return ERR(MSCCLPP_ERR_UNSUPPORTED,
                   "ucx transport: rank %d: [%p,+%zu) is memory the CPU cannot read (%s device "
                   "memory?), which this UCX cannot access either (no %s memory support), yet "
                   "it would be handed to UCX as it is (%s): set MSCCLPP_UCX_STAGING=auto (the "
                   "default) or always, so that it is staged through pinned host memory",
                   c->world->rank, ptr, bytes, c->hal->name,
                   !strcmp(c->hal->name, "hip") ? "ROCm" : "CUDA", why);
    }
    if (m->staged) { /* the bounces and stream, now, before any launch uses this memory */
        ucx_lock(c, "registration (staging buffers)");
        mscclpp_result_t res = ucx_stage_prepare(c);
        ucx_unlock(c);
        if (res != MSCCLPP_OK) {
            free(m);
            return res;
        }
    } else { /* staged memory is never mapped: only base and size travel */
        ucp_mem_map_params_t mp = {0};
        mp.field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH;
        mp.address = ptr;
        mp.length = bytes;
        ucs_status_t st = ucp_mem_map(c->context, &mp, &m->memh);
        if (st != UCS_OK) {
            free(m);
            return ERR(MSCCLPP_ERR_SYSTEM, "ucx transport: ucp_mem_map of [%p,+%zu): %s", ptr,
                       bytes, ucs_status_string(st));
        }
    }
    m->ptr = ptr;
    m->bytes = bytes;
    ucx_lock(c, "registration");
    m->next = c->mems;
    c->mems = m;
    ucx_unlock(c);
    *mem = m;
    return MSCCLPP_OK;
}

static mscclpp_result_t ucx_mem_pack(tp_ctx_t *c, tp_mem_t *mem, wire_writer_t *w)
{
    if (mem->staged) { /* the kind, then the most one message into it may carry */
        wire_put_u32(w, UCX_KEY_STAGED);
        wire_put_u64(w, c->chunk);
        return MSCCLPP_OK;
    }
    wire_put_u32(w, UCX_KEY_UCX);
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
    ucx_lock(c, "deregistration");
    for (struct tp_mem **pp = &c->mems; *pp; pp = &(*pp)->next)
        if (*pp == mem) {
            *pp = mem->next;
            break;
        }
    ucx_unlock(c);
    ucs_status_t st = mem->memh ? ucp_mem_unmap(c->context, mem->memh) : UCS_OK;
    free(mem);
    if (st != UCS_OK)
        return ERR(MSCCLPP_ERR_SYSTEM, "ucx transport: ucp_mem_unmap: %s", ucs_status_string(st));
    return MSCCLPP_OK;
}

static mscclpp_result_t ucx_rmem_unpack(tp_ep_t *ep, uint64_t base, uint64_t bytes,
                                        wire_reader_t *r, tp_rmem_t **rmem)
{
    uint32_t kind = wire_get_u32(r);
    if (!r->bad && kind == UCX_KEY_STAGED) {
        /* the peer stages this memory: no UCX key, only the largest message it takes */
        uint64_t chunk = wire_get_u64(r);
        if (r->bad || chunk < 4096)
            return ERR(MSCCLPP_ERR_REMOTE, "ucx transport: malformed staged key from rank %d",
                       ep->peer);
        tp_rmem_t *m = calloc(1, sizeof *m);
        if (!m) return ERR(MSCCLPP_ERR_NO_MEMORY, "ucx transport: out of memory");
        m->base = base;
        m->bytes = bytes;
        m->chunk = chunk;
        *rmem = m;
        return MSCCLPP_OK;
    }
    if (r->bad || kind != UCX_KEY_UCX)
        return ERR(MSCCLPP_ERR_REMOTE, "ucx transport: malformed key from rank %d (kind %u)",
                   ep->peer, kind);
    uint32_t len = wire_get_u32(r);
    if (r->bad || len == 0 || len > UCX_RKEY_MAX || len > r->len - r->pos)
        return ERR(MSCCLPP_ERR_REMOTE, "ucx transport: malformed key from rank %d", ep->peer);
    tp_rmem_t *m = calloc(1, sizeof *m);
    if (!m) return ERR(MSCCLPP_ERR_NO_MEMORY, "ucx transport: out of memory");
    ucx_lock(ep->ctx, "a key's unpacking");
    ucs_status_t st = ucp_ep_rkey_unpack(ep->ep, r->buf + r->pos, &m->rkey);
    ucx_unlock(ep->ctx);
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
    if (rmem->rkey) ucp_rkey_destroy(rmem->rkey);
    free(rmem);
    return MSCCLPP_OK;
}

static void ucx_ep_error(void *arg, ucp_ep_h uep, ucs_status_t status)
{
    (void)uep;
    tp_ep_t *ep = arg;
    ucx_ep_fail(ep, status);
}

/* This side: the worker's address (every endpoint of the context shares the worker). */
static mscclpp_result_t ucx_ep_open(tp_ctx_t *c, int peer, tp_ep_t **out, wire_writer_t *w)
{
    ucp_address_t *addr = NULL;
    size_t alen = 0;
    ucx_lock(c, "ep_open");
    ucs_status_t st = ucp_worker_get_address(c->worker, &addr, &alen);
    if (st == UCS_OK) {
        wire_put_u32(w, (uint32_t)alen);
        wire_put_bytes(w, addr, alen);
        ucp_worker_release_address(c->worker, addr);
    }
    ucx_unlock(c);
    if (st != UCS_OK) return ucx_status("ucp_worker_get_address", peer, st);
    if (w->overflow)
        return ERR(MSCCLPP_ERR_INTERNAL,
                   "ucx transport: a %zu-byte worker address does not fit "
                   "the connection message",
                   alen);
    tp_ep_t *ep = calloc(1, sizeof *ep);
    if (!ep) return ERR(MSCCLPP_ERR_NO_MEMORY, "ucx transport: out of memory");
    ep->ctx = c;
    ep->peer = peer;
    atomic_init(&ep->failed, (int)UCS_OK);
    *out = ep;
    return MSCCLPP_OK;
}

/* The endpoint, from the peer's worker address. */
static mscclpp_result_t ucx_ep_connect(tp_ep_t *ep, wire_reader_t *r)
{
    tp_ctx_t *c = ep->ctx;
    uint32_t plen = wire_get_u32(r);
    if (r->bad || plen == 0 || plen != r->len - r->pos)
        return ERR(MSCCLPP_ERR_REMOTE,
                   "ucx transport: rank %d sent a malformed address (%u of "
                   "%zu bytes)",
                   ep->peer, plen, r->len);
    const void *paddr = r->buf + r->pos;
    r->pos = r->len;
    ucp_ep_params_t ep_params = {0};
    ep_params.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS |
                           UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE | UCP_EP_PARAM_FIELD_ERR_HANDLER;
    ep_params.address = paddr;
    ep_params.err_mode = UCP_ERR_HANDLING_MODE_PEER;
    ep_params.err_handler.cb = ucx_ep_error;
    ep_params.err_handler.arg = ep;
    ucx_lock(c, "ep_connect");
    /* Drain the worker first, so that UCX has seen whatever happened to the peer's half of
     * this connection: UCX's tcp (1.13; the same code on its master) reuses the socket of a
     * peer that connected to us first, and if that peer died meanwhile (its reset not yet
     * read), the connection request sent there fails inside ucp_ep_create, which leaves the
     * tcp endpoint both failed and sending; the next progress then aborts the process
     * (tcp_ep.c:478 "!(ep->flags & UCT_TCP_EP_FLAG_CTX_TYPE_TX)"). Read first, the reset
     * fails the half connection cleanly, and ucp_ep_create connects afresh (refused: an error
     * naming the rank). docs/reliability.md, "A peer that dies while UCX connects". */
    ucx_settle(c);
    ucs_status_t st = ucp_ep_create(c->worker, &ep_params, &ep->ep);
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
    ucx_unlock(c);
    if (st != UCS_OK) {
        ep->ep = NULL;
        return ucx_status("ucp_ep_create", ep->peer, st);
    }
    INFO(SUBSYS_NET, "rank %d: ucx endpoint to rank %d", c->world->rank, ep->peer);
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
                                ucs_status_string(ucx_ep_failed(ep)), ep->peer);
    return ERR(MSCCLPP_ERR_REMOTE, "ucx transport: %s to rank %d: the connection failed (%s); "
               "is rank %d alive?", what, ep->peer, ucs_status_string(ucx_ep_failed(ep)), ep->peer);
}

static mscclpp_result_t ucx_failed(tp_ep_t *ep, const char *what)
{
    return ucx_failed_at(ep, what, false);
}

/* ---- sending --------------------------------------------------------------------------- */

/* A message done with (sent, failed or dropped): its bounce goes back to the pool. */
static void ucx_msg_free(tp_ctx_t *c, ucx_send_t *m)
{
    if (!m) return;
    if (m->bounce) c->sfree[c->nsfree++] = m->bounce; /* sfree has room for every one */
    free(m);
}

static void ucx_send_done(void *req, ucs_status_t st, void *user)
{
    ucx_send_t *m = user;
    tp_ep_t *ep = m->ep;
    ep->inflight--;
    if (st != UCS_OK) ep->lost = true;
    if (st != UCS_OK && ucx_ep_failed(ep) == UCS_OK && !ep->closing) ucx_ep_fail(ep, st);
    ucx_msg_free(ep->ctx, m);
    ucp_request_free(req);
}

/* Send one message (lock held); takes `m`. */
static mscclpp_result_t ucx_am_send(tp_ep_t *ep, ucx_send_t *m, const void *buf, size_t len,
                                    const char *what)
{
    ucp_request_param_t p = {0};
    p.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
    p.cb.send = ucx_send_done;
    p.user_data = m;
    m->ep = ep;
    ucs_status_ptr_t r = ucp_am_send_nbx(ep->ep, UCX_AM_ID, &m->hdr, sizeof m->hdr, buf, len, &p);
    if (r == NULL) { /* done at once: the callback is not called */
        ucx_msg_free(ep->ctx, m);
        return MSCCLPP_OK;
    }
    if (UCS_PTR_IS_ERR(r)) {
        ucx_msg_free(ep->ctx, m);
        return ucx_status(what, ep->peer, UCS_PTR_STATUS(r));
    }
    ep->inflight++;
    return MSCCLPP_OK;
}

/* Send the put held back for a signal (lock held). */
static mscclpp_result_t ucx_send_pending(tp_ep_t *ep)
{
    ucx_send_t *m = ep->pending;
    if (!m) return MSCCLPP_OK;
    ep->pending = NULL;
    return ucx_am_send(ep, m, ep->pbuf, ep->plen, "put");
}

static ucx_send_t *ucx_msg(tp_ep_t *ep, uint32_t flags)
{
    ucx_send_t *m = calloc(1, sizeof *m);
    if (!m) return NULL;
    m->hdr.magic = UCX_AM_MAGIC;
    m->hdr.flags = flags;
    m->hdr.src = ep->ctx->world->rank;
    return m;
}

static mscclpp_result_t ucx_wait_until(tp_ep_t *ep, bool (*done)(tp_ep_t *, void *), void *arg,
                                       uint64_t timeout_ns, const char *what);

static bool ucx_bounce_ready(tp_ep_t *ep, void *arg)
{
    (void)arg;
    return ep->ctx->nsfree > 0;
}

/* A bounce for a staged send (lock held): waits, bounded, while every one is in flight. */
static mscclpp_result_t ucx_bounce_send(tp_ep_t *ep, void **out)
{
    tp_ctx_t *c = ep->ctx;
    CHECK(ucx_stage_ready(c));
    if (!c->nsfree) {
        /* every bounce in flight: what other connections hold back goes out first */
        for (tp_ep_t *e = c->eps; e; e = e->next) CHECK(ucx_send_pending(e));
        CHECK(ucx_wait_until(ep, ucx_bounce_ready, NULL, config_timeout_ns(),
                             "put (waiting for a staging buffer)"));
    }
    *out = c->sfree[--c->nsfree];
    return MSCCLPP_OK;
}

static void ucx_bounce_unsend(tp_ctx_t *c, void *b)
{
    if (b) c->sfree[c->nsfree++] = b;
}

/*
 * A put whose source or destination is staged (lock held): messages of at most one chunk
 * (ours for a staged source, the peer's for a staged destination). A staged source goes
 * through bounce buffers, pipelined: the copy of chunk k+1 is queued on the stream before
 * chunk k is sent and the worker driven, and waited for only then. The last message is held
 * back like any put, for a signal to join.
 */
static mscclpp_result_t ucx_put_staged(tp_ep_t *ep, uint64_t dst, const char *src, bool stage_src,
                                       uint64_t bytes, uint64_t lim)
{
    tp_ctx_t *c = ep->ctx;
    mscclpp_result_t res = MSCCLPP_OK;
    void *cur = NULL, *next = NULL; /* bounces of chunk k (copied) and k+1 (being copied) */
    size_t n = (size_t)(bytes < lim ? bytes : lim);
    if (stage_src) {
        CHECK(ucx_bounce_send(ep, &cur));
        res = ucx_stage_copy(c, cur, src, n);
    }
    for (uint64_t off = 0; res == MSCCLPP_OK && off < bytes;) {
        uint64_t noff = off + n;
        size_t nn = (size_t)(bytes - noff < lim ? bytes - noff : lim);
        if (stage_src && noff < bytes) { /* queue the next chunk's copy now */
            res = ucx_bounce_send(ep, &next);
            if (res == MSCCLPP_OK) res = ucx_stage_op(c, next, src + noff, nn, false);
            if (res != MSCCLPP_OK) break;
        }
        const void *buf = stage_src ? cur : src + off;
        ucx_send_t *m = ucx_msg(ep, UCX_AM_DATA);
        if (!m) {
            res = ERR(MSCCLPP_ERR_NO_MEMORY, "ucx transport: out of memory");
            break;
        }
        m->hdr.dst = dst + off;
        m->bounce = cur; /* the message owns it now */
        cur = NULL;
        if (noff == bytes) { /* held back: a signal that follows travels in the same message */
            ep->pending = m;
            ep->pbuf = buf;
            ep->plen = n;
        } else {
            res = ucx_am_send(ep, m, buf, n, "put");
            (void)ucp_worker_progress(c->worker);
        }
        if (res == MSCCLPP_OK && next) res = ucx_stage_op(c, NULL, NULL, 0, true);
        cur = next;
        next = NULL;
        off = noff;
        n = nn;
    }
    if (res != MSCCLPP_OK) {
        /* a queued copy may still write into `next`: wait for it before the bounce is reused */
        if (next) (void)ucx_stage_op(c, NULL, NULL, 0, true);
        ucx_bounce_unsend(c, cur);
        ucx_bounce_unsend(c, next);
        return ERR(res, "ucx transport: put of %llu bytes to rank %d (staged): %s",
                   (unsigned long long)bytes, ep->peer, mscclpp_last_error());
    }
    return MSCCLPP_OK;
}

static mscclpp_result_t ucx_put(tp_ep_t *ep, tp_rmem_t *dst, uint64_t dst_off, tp_mem_t *src,
                                uint64_t src_off, uint64_t bytes)
{
    CHECK(tp_check_put("ucx", ep->peer, dst_off, dst->bytes, src_off, src->bytes, bytes));
    if (ucx_ep_failed(ep) != UCS_OK) return ucx_failed(ep, "put");
    if (bytes == 0) return MSCCLPP_OK;
    tp_ctx_t *c = ep->ctx;
    CHECK(ucx_lock_bounded(c, "put", ep->peer));
    mscclpp_result_t res = ucx_send_pending(ep);
    uint64_t lim = UINT64_MAX;
    if (src->staged) lim = c->chunk;
    if (dst->chunk && dst->chunk < lim) lim = dst->chunk;
    if (res == MSCCLPP_OK && lim != UINT64_MAX) {
        res = ucx_put_staged(ep, dst->base + dst_off, src->ptr + src_off, src->staged, bytes, lim);
        ucx_unlock(c);
        return res;
    }
    ucx_send_t *m = res == MSCCLPP_OK ? ucx_msg(ep, UCX_AM_DATA) : NULL;
    if (res == MSCCLPP_OK && !m) res = ERR(MSCCLPP_ERR_NO_MEMORY, "ucx transport: out of memory");
    if (m) { /* held back: a signal that follows travels in the same message */
        m->hdr.dst = dst->base + dst_off;
        ep->pending = m;
        ep->pbuf = src->ptr + src_off;
        ep->plen = bytes;
    }
    ucx_unlock(c);
    return res;
}

/* Wait (lock held) until `done(ep)`, driving progress, bounded by the timeout and backing off
 * by the one wait policy (base/wait.h: a large transfer lasts milliseconds, and a busy loop of
 * that length starves the peer's ranks on a shared node). */
static mscclpp_result_t ucx_wait_until(tp_ep_t *ep, bool (*done)(tp_ep_t *, void *), void *arg,
                                       uint64_t timeout_ns, const char *what)
{
    tp_ctx_t *c = ep->ctx;
    base_wait_t w;
    base_wait_init(&w, timeout_ns, c->spin);
    const char *was = ucx_doing(c, what);
    mscclpp_result_t res = MSCCLPP_OK;
    while (res == MSCCLPP_OK && !done(ep, arg)) {
        /* a transfer that moves stays in the spin phase; only an idle one backs off */
        if (ucp_worker_progress(c->worker)) w.polls = 0;
        ucx_copies_settle(c);
        if (ucx_ep_failed(ep) != UCS_OK && !ep->closing) res = ucx_failed(ep, what);
        else if (!base_wait_pause(&w))
            res = ERR(MSCCLPP_ERR_TIMEOUT, "ucx transport: %s to rank %d did not complete in "
                      "%.1f s", what, ep->peer, (double)timeout_ns / 1e9);
    }
    ucx_doing(c, was);
    return res;
}

static bool ucx_req_done(tp_ep_t *ep, void *req)
{
    (void)ep;
    return ucp_request_check_status(req) != UCS_INPROGRESS;
}

static bool ucx_sent(tp_ep_t *ep, void *arg)
{
    (void)arg;
    return ep->inflight == 0;
}

/* Wait (lock held) until `req` is done, then release it. */
static mscclpp_result_t ucx_wait_req(tp_ep_t *ep, void *req, uint64_t timeout_ns,
                                     const char *what)
{
    mscclpp_result_t res = ucx_wait_until(ep, ucx_req_done, req, timeout_ns, what);
    if (res != MSCCLPP_OK) {
        ucp_request_cancel(ep->ctx->worker, req);
        ucp_request_free(req);
        return res;
    }
    ucs_status_t st = ucp_request_check_status(req);
    ucp_request_free(req);
    if (ucx_ep_failed(ep) != UCS_OK && !ep->closing) return ucx_failed(ep, what);
    if (st != UCS_OK) return ucx_status(what, ep->peer, st);
    return MSCCLPP_OK;
}

static mscclpp_result_t ucx_signal(tp_ep_t *ep, tp_rmem_t *dst, uint64_t dst_off, uint64_t total)
{
    CHECK(tp_check_signal("ucx", ep->peer, dst_off, dst->bytes));
    if (ucx_ep_failed(ep) != UCS_OK) return ucx_failed(ep, "signal");
    tp_ctx_t *c = ep->ctx;
    CHECK(ucx_lock_bounded(c, "signal", ep->peer));
    mscclpp_result_t res = MSCCLPP_OK;
    ucx_send_t *m = ep->pending; /* a put just before: one message for both */
    const void *buf = m ? ep->pbuf : NULL;
    size_t len = m ? ep->plen : 0;
    ep->pending = NULL;
    if (!m) m = ucx_msg(ep, 0);
    if (!m) {
        res = ERR(MSCCLPP_ERR_NO_MEMORY, "ucx transport: out of memory");
    } else {
        m->hdr.flags |= UCX_AM_SIGNAL;
        m->hdr.sig = dst->base + dst_off;
        m->hdr.value = total;
        res = ucx_am_send(ep, m, buf, len, len ? "put with signal" : "signal");
    }
    ucx_unlock(c);
    return res;
}

static mscclpp_result_t ucx_flush(tp_ep_t *ep, uint64_t timeout_ns, tp_flush_t how)
{
    tp_ctx_t *c = ep->ctx;
    if (ucx_ep_failed(ep) != UCS_OK) {
        /* The connection is gone. A local flush still holds when every message went out
         * before: a peer that finished its last call and left had all it waited for, and a
         * rank that no longer needs it must not fail (issue 22, board 2026-11-26 08:00) */
        ucx_lock(c, "flush of a failed connection");
        bool clean = how == TP_FLUSH_LOCAL && !ep->pending && ep->inflight == 0 && !ep->lost;
        ucx_unlock(c);
        return clean ? MSCCLPP_OK : ucx_failed(ep, "flush");
    }
    CHECK(ucx_lock_bounded(c, "flush", ep->peer));
    mscclpp_result_t res = ucx_send_pending(ep);
    /* every message sent (a rendezvous one: received by the peer): its source is free again;
     * then, for a flush at the peer, the lanes flushed (a round trip) */
    if (res == MSCCLPP_OK) res = ucx_wait_until(ep, ucx_sent, NULL, timeout_ns, "flush");
    if (res == MSCCLPP_OK && how == TP_FLUSH_REMOTE) {
        ucp_request_param_t p = {0};
        ucs_status_ptr_t req = ucp_ep_flush_nbx(ep->ep, &p);
        if (UCS_PTR_IS_ERR(req))
            res = ucx_status("ucp_ep_flush_nbx", ep->peer, UCS_PTR_STATUS(req));
        else if (UCS_PTR_IS_PTR(req))
            res = ucx_wait_req(ep, req, timeout_ns, "flush");
    }
    ucx_unlock(c);
    return res;
}

/* Send every held-back put and drive the worker (lock held). */
static mscclpp_result_t ucx_drive(tp_ctx_t *c)
{
    mscclpp_result_t res = MSCCLPP_OK;
    for (tp_ep_t *ep = c->eps; ep; ep = ep->next) {
        mscclpp_result_t r = ucx_send_pending(ep);
        if (res == MSCCLPP_OK) res = r;
    }
    ucx_settle(c);
    if (res == MSCCLPP_OK && c->am_res != MSCCLPP_OK)
        res = ERR(c->am_res, "%s", c->am_err);
    return res;
}

static mscclpp_result_t ucx_progress(tp_ctx_t *c)
{
    CHECK(ucx_lock_bounded(c, "progress", -1));
    mscclpp_result_t res = ucx_drive(c);
    ucx_unlock(c);
    return res;
}

/* Drain, then arm the worker's event fd; UCS_ERR_BUSY: events came in while draining. */
static mscclpp_result_t ucx_arm(tp_ctx_t *c, int *fd)
{
    *fd = -1;
    if (c->efd < 0) return core_error_quiet(MSCCLPP_ERR_UNSUPPORTED, "ucx: no event fd");
    CHECK(ucx_lock_bounded(c, "arm", -1));
    mscclpp_result_t res = ucx_drive(c);
    ucs_status_t st = res == MSCCLPP_OK ? ucp_worker_arm(c->worker) : UCS_OK;
    ucx_unlock(c);
    CHECK(res);
    if (st == UCS_OK) *fd = c->efd;
    else if (st != UCS_ERR_BUSY) return ucx_status("ucp_worker_arm", c->world->rank, st);
    return MSCCLPP_OK;
}

/* a peer that died while we only wait for it shows up here, not in a call of ours */
static mscclpp_result_t ucx_ep_status(tp_ep_t *ep)
{
    return ucx_ep_failed(ep) == UCS_OK ? MSCCLPP_OK : ucx_failed_at(ep, "connection", true);
}

static mscclpp_result_t ucx_close(tp_ep_t *ep)
{
    if (!ep) return MSCCLPP_OK;
    tp_ctx_t *c = ep->ctx;
    /* a close is often clean-up after a failure: that failure's message and culprit stay */
    core_error_kept_t kept;
    core_error_keep(&kept);
    ucx_lock(c, "close");
    ep->closing = true;
    ucx_msg_free(c, ep->pending); /* callers flush first: a put held back has no reader left */
    ep->pending = NULL;
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
    ucs_status_ptr_t req = ep->ep ? ucp_ep_close_nbx(ep->ep, &p) : NULL; /* NULL: only opened */
    if (UCS_PTR_IS_PTR(req)) (void)ucx_wait_req(ep, req, config_timeout_ns(), "close");
    /* a forced close completes every message still in flight (canceled): their callbacks
     * must run before `ep` goes */
    (void)ucx_wait_until(ep, ucx_sent, NULL, config_timeout_ns(), "close");
    core_error_put_back(&kept); /* the peer may have closed first; nothing left to lose */
    bool idle = ep->inflight == 0; /* read under the lock: callbacks change it under it */
    ucx_unlock(c);
    if (idle) free(ep); /* else leaked rather than freed under a live callback */
    return MSCCLPP_OK;
}


void tp_ucx_staging_info(char *buf, size_t cap)
{
    int mode = ucx_stage_mode();
    int64_t chunk = config_get_int(CFG_MSCCLPP_UCX_STAGE_CHUNK);
    if (mode < 0) {
        snprintf(buf, cap, "MSCCLPP_UCX_STAGING=\"%s\" is not auto, always or never",
                 config_get(CFG_MSCCLPP_UCX_STAGING));
        return;
    }
    if (mode == UCX_STAGE_ALWAYS) {
        snprintf(buf, cap, "every registration staged through pinned host memory, %lld-byte "
                 "chunks (MSCCLPP_UCX_STAGING=always)", (long long)chunk);
        return;
    }
    if (mode == UCX_STAGE_NEVER) {
        snprintf(buf, cap, "nothing staged (MSCCLPP_UCX_STAGING=never): device pointers go to "
                 "UCX as they are");
        return;
    }
    const hal_ops_t *hal = NULL;
    if (hal_get(&hal) != MSCCLPP_OK || !hal) hal = hal_host_ops();
    core_clear_error();
    if (hal == hal_host_ops()) {
        snprintf(buf, cap, "nothing staged: the host backend's device memory is host memory");
        return;
    }
    ucp_context_h ctx = NULL;
    if (ucx_context_create(&ctx) != UCS_OK) {
        snprintf(buf, cap, "unknown: ucp_init failed");
        return;
    }
    bool devmem = ucx_has_devmem(ctx, hal);
    ucp_cleanup(ctx);
    if (devmem)
        snprintf(buf, cap, "nothing staged: this UCX accesses %s memory itself", hal->name);
    else
        snprintf(buf, cap, "%s device memory staged through pinned host memory, %lld-byte chunks "
                 "(this UCX has no %s memory support; MSCCLPP_UCX_STAGING=auto)", hal->name,
                 (long long)chunk, !strcmp(hal->name, "hip") ? "ROCm" : "CUDA");
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
    .ep_open = ucx_ep_open,
    .ep_connect = ucx_ep_connect,
    .put = ucx_put,
    .signal = ucx_signal,
    .flush = ucx_flush,
    .progress = ucx_progress,
    .ep_status = ucx_ep_status,
    .close = ucx_close,
    .arm = ucx_arm,
};

#else /* not built */

bool tp_ucx_mem_staged(const tp_mem_t *mem)
{
    (void)mem;
    return false;
}

uint64_t tp_ucx_stage_late_allocs(void) { return 0; }

mscclpp_result_t tp_ucx_hold_lock(tp_ctx_t *ctx, const char *what, unsigned ms)
{
    (void)ctx, (void)what, (void)ms;
    return core_error_quiet(MSCCLPP_ERR_UNSUPPORTED, "ucx not built");
}

void tp_ucx_staging_info(char *buf, size_t cap) { snprintf(buf, cap, "ucx not built"); }

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
