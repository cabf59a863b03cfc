/*
 * Test-only fault injection, a layer over the transports (as libfabric's hook providers wrap a
 * provider): tp_fault_wrap() hands out, in place of a transport's own table, a copy whose
 * connect, put, signal and flush can fail on demand and whose ep_open and close track the
 * connections.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/config.h"
#include "base/debug.h"
#include "transports/tp_fault.h"

/*
 * MSCCLPP_TEST_TRANSPORT_FAULT=OP:N (OP is connect, put, signal or flush; N >= 1): the Nth call
 * of OP in
 * this process, over every transport, fails with MSCCLPP_ERR_REMOTE and "<transport>
 * transport: <op> #N to rank P failed (injected by MSCCLPP_TEST_TRANSPORT_FAULT=OP:N)", moving
 * nothing; the calls before and after it go to the transport. For tests only: it reaches the
 * paths of a transport failing mid-run (a proxy failing after its launch ended, a port channel
 * put failing) without breaking a real network. Decided once per process (again in a forked
 * child) when a table is first asked for; unset, tp_get() returns the transports' own tables.
 * OP:N:MS delays that call MS milliseconds instead, then makes it (a peer that is late, for
 * the paths of a rank still inside a launch while others are done or gone).
 */
enum { FAULT_UNDECIDED = 0, FAULT_OFF = 1, FAULT_ON = 2 };
#define FAULT_MAX_EPS 1024

static int fault_state; /* atomic */
static pthread_mutex_t fault_lock = PTHREAD_MUTEX_INITIALIZER;
static char fault_spec[64];
static const char *fault_op;                 /* "connect", "put", "signal" or "flush" */
static uint64_t fault_nth, fault_calls;      /* fault_calls: atomic */
static unsigned long fault_delay_ms;         /* OP:N:MS: delay the call instead of failing it */
static tp_ops_t fault_tables[TP__COUNT];     /* the wrappers handed out */
static const tp_ops_t *fault_raw[TP__COUNT]; /* the tables they wrap */
/* connections made through the wrapped tables: which transport and peer each one is */
static struct {
    tp_ep_t *ep;
    int id, peer;
} fault_eps[FAULT_MAX_EPS];
static int fault_n_eps;

static bool fault_lookup(tp_ep_t *ep, int *id, int *peer)
{
    bool found = false;
    pthread_mutex_lock(&fault_lock);
    for (int i = 0; i < fault_n_eps && !found; i++)
        if (fault_eps[i].ep == ep) *id = fault_eps[i].id, *peer = fault_eps[i].peer, found = true;
    pthread_mutex_unlock(&fault_lock);
    if (!found) (void)ERR(MSCCLPP_ERR_INTERNAL, "transport fault injection: unknown connection");
    return found;
}

/* True (and the error set) when this call of `op` on `ep` is the one to fail. */
static bool fault_hit(const char *op, int id, int peer)
{
    if (strcmp(op, fault_op) != 0) return false;
    uint64_t n = __atomic_add_fetch(&fault_calls, 1, __ATOMIC_RELAXED);
    if (n != fault_nth) return false;
    if (fault_delay_ms) {
        struct timespec ts = {(time_t)(fault_delay_ms / 1000),
                              (long)(fault_delay_ms % 1000) * 1000000L};
        nanosleep(&ts, NULL);
        return false;
    }
    (void)ERR(MSCCLPP_ERR_REMOTE,
              "%s transport: %s #%llu to rank %d failed (injected by "
              "MSCCLPP_TEST_TRANSPORT_FAULT=%s)",
              fault_raw[id]->name, op, (unsigned long long)n, peer, fault_spec);
    return true;
}

static mscclpp_result_t fault_ep_open(int id, tp_ctx_t *ctx, int peer, tp_ep_t **ep,
                                      wire_writer_t *addr)
{
    CHECK(fault_raw[id]->ep_open(ctx, peer, ep, addr));
    pthread_mutex_lock(&fault_lock);
    bool room = fault_n_eps < FAULT_MAX_EPS;
    if (room) {
        fault_eps[fault_n_eps].ep = *ep;
        fault_eps[fault_n_eps].id = id;
        fault_eps[fault_n_eps].peer = peer;
        fault_n_eps++;
    }
    pthread_mutex_unlock(&fault_lock);
    if (room) return MSCCLPP_OK;
    fault_raw[id]->close(*ep);
    *ep = NULL;
    return ERR(MSCCLPP_ERR_INTERNAL, "transport fault injection: more than %d connections",
               FAULT_MAX_EPS);
}

#define FAULT_EP_OPEN_(i)                                                            \
    static mscclpp_result_t fault_ep_open_##i(tp_ctx_t *ctx, int peer, tp_ep_t **ep, \
                                              wire_writer_t *addr)                   \
    {                                                                                \
        return fault_ep_open(i, ctx, peer, ep, addr);                                \
    }
FAULT_EP_OPEN_(0)
FAULT_EP_OPEN_(1)
FAULT_EP_OPEN_(2)
#undef FAULT_EP_OPEN_
_Static_assert(TP__COUNT == 3, "one fault_ep_open_<id> per transport");

/* connect: completing a connection with the peer's address (a peer that cannot be reached) */
static mscclpp_result_t fault_ep_connect(tp_ep_t *ep, wire_reader_t *addr)
{
    int id, peer;
    if (!fault_lookup(ep, &id, &peer)) return MSCCLPP_ERR_INTERNAL;
    if (fault_hit("connect", id, peer)) return MSCCLPP_ERR_REMOTE;
    return fault_raw[id]->ep_connect(ep, addr);
}

static mscclpp_result_t fault_put(tp_ep_t *ep, tp_rmem_t *dst, uint64_t dst_off, tp_mem_t *src,
                                  uint64_t src_off, uint64_t bytes)
{
    int id, peer;
    if (!fault_lookup(ep, &id, &peer)) return MSCCLPP_ERR_INTERNAL;
    if (fault_hit("put", id, peer)) return MSCCLPP_ERR_REMOTE;
    return fault_raw[id]->put(ep, dst, dst_off, src, src_off, bytes);
}

static mscclpp_result_t fault_signal(tp_ep_t *ep, tp_rmem_t *dst, uint64_t dst_off, uint64_t total)
{
    int id, peer;
    if (!fault_lookup(ep, &id, &peer)) return MSCCLPP_ERR_INTERNAL;
    if (fault_hit("signal", id, peer)) return MSCCLPP_ERR_REMOTE;
    return fault_raw[id]->signal(ep, dst, dst_off, total);
}

static mscclpp_result_t fault_flush(tp_ep_t *ep, uint64_t timeout_ns, tp_flush_t how)
{
    int id, peer;
    if (!fault_lookup(ep, &id, &peer)) return MSCCLPP_ERR_INTERNAL;
    if (fault_hit("flush", id, peer)) return MSCCLPP_ERR_REMOTE;
    return fault_raw[id]->flush(ep, timeout_ns, how);
}

static mscclpp_result_t fault_close(tp_ep_t *ep)
{
    if (!ep) return MSCCLPP_OK;
    int id = -1, peer;
    pthread_mutex_lock(&fault_lock);
    for (int i = 0; i < fault_n_eps; i++)
        if (fault_eps[i].ep == ep) {
            id = fault_eps[i].id, peer = fault_eps[i].peer;
            fault_eps[i] = fault_eps[--fault_n_eps];
            break;
        }
    pthread_mutex_unlock(&fault_lock);
    (void)peer;
    if (id < 0) return ERR(MSCCLPP_ERR_INTERNAL, "transport fault injection: unknown connection");
    return fault_raw[id]->close(ep);
}

/* A forked child decides again (its parent's connections are not its own). */
static void fault_atfork_child(void)
{
    fault_n_eps = 0;
    __atomic_store_n(&fault_calls, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&fault_state, FAULT_UNDECIDED, __ATOMIC_RELEASE);
}

static void fault_register_atfork(void) { pthread_atfork(NULL, NULL, fault_atfork_child); }

static int fault_decide(void)
{
    static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;
    pthread_once(&atfork_once, fault_register_atfork);
    pthread_mutex_lock(&fault_lock);
    int st = __atomic_load_n(&fault_state, __ATOMIC_ACQUIRE);
    if (st == FAULT_UNDECIDED) {
        const char *spec = config_get(CFG_MSCCLPP_TEST_TRANSPORT_FAULT);
        st = FAULT_OFF;
        if (*spec) {
            const char *ops[] = {"connect", "put", "signal", "flush"};
            const char *colon = strchr(spec, ':');
            char *end = NULL;
            unsigned long long n = colon ? strtoull(colon + 1, &end, 10) : 0;
            unsigned long long ms = 0;
            if (end && *end == ':' && end[1] >= '0' && end[1] <= '9') {
                ms = strtoull(end + 1, &end, 10);
                if (ms == 0 || ms > 600000) end = NULL; /* 1 ms to 10 minutes */
            }
            for (int i = 0; i < 4 && colon; i++)
                if ((size_t)(colon - spec) == strlen(ops[i]) &&
                    !strncmp(spec, ops[i], strlen(ops[i])) && n >= 1 && end && !*end) {
                    fault_op = ops[i];
                    fault_nth = n;
                    fault_delay_ms = (unsigned long)ms;
                    st = FAULT_ON;
                }
            if (st == FAULT_OFF)
                WARN(SUBSYS_NET,
                     "MSCCLPP_TEST_TRANSPORT_FAULT=\"%s\" is not OP:N or OP:N:MS (OP connect, "
                     "put, signal or flush; N >= 1; MS 1 to 600000): no fault is injected",
                     spec);
        }
        if (st == FAULT_ON) {
            snprintf(fault_spec, sizeof fault_spec, "%s", spec);
            INFO(SUBSYS_NET,
                 "MSCCLPP_TEST_TRANSPORT_FAULT=%s: %s #%llu of this process will "
                 "%s (test only)",
                 fault_spec, fault_op, (unsigned long long)fault_nth,
                 fault_delay_ms ? "be late" : "fail");
        }
        __atomic_store_n(&fault_state, st, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&fault_lock);
    return st;
}

const tp_ops_t *tp_fault_wrap(int id, const tp_ops_t *raw)
{
    int st = __atomic_load_n(&fault_state, __ATOMIC_ACQUIRE);
    if (st == FAULT_UNDECIDED) st = fault_decide();
    if (st != FAULT_ON || !raw || id < 0 || id >= TP__COUNT) return raw;
    static mscclpp_result_t (*const opens[TP__COUNT])(
        tp_ctx_t *, int, tp_ep_t **, wire_writer_t *) = {fault_ep_open_0, fault_ep_open_1,
                                                         fault_ep_open_2};
    pthread_mutex_lock(&fault_lock);
    if (fault_raw[id] != raw) {
        fault_raw[id] = raw;
        fault_tables[id] = *raw;
        fault_tables[id].ep_open = opens[id];
        fault_tables[id].ep_connect = fault_ep_connect;
        fault_tables[id].put = fault_put;
        fault_tables[id].signal = fault_signal;
        fault_tables[id].flush = fault_flush;
        fault_tables[id].close = fault_close;
    }
    pthread_mutex_unlock(&fault_lock);
    return &fault_tables[id];
}
