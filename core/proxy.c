/* The proxy thread of port channels (core/proxy.h). */
#define _GNU_SOURCE /* pthread_setname_np */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <time.h>

#include "base/clock.h"
#include "base/config.h"
#include "base/debug.h"
#include "base/wait.h"
#include "core/proxy.h"

#define PROXY_MAX_FDS 4 /* event descriptors of the transports a proxy sleeps on */
#define PROXY_HOT_NS 1000000u /* default hot window where the proxy has a core of its own */

struct proxy {
    const hal_ops_t *hal;
    kern_fifo_t *fifo;    /* host-mapped */
    uint64_t *head;       /* device memory */
    uint64_t size;
    proxy_handler_fn handler;
    proxy_progress_fn progress;
    proxy_arm_fn arm;
    void *arg;
    uint32_t spin; /* polls before the idle thread yields (base_wait_spin) */
    int dev;       /* the creator's current device (-1: unknown), made current in the thread */
    uint64_t hot_ns; /* polling without sleeping after activity (proxy_main) */
    pthread_t thread;
    int stop;             /* atomic */
    mscclpp_result_t err; /* first error (thread writes once, before publishing fifo->err) */
    int culprit;          /* the rank that error blames (core_culprit), or -1 */
    char msg[768];
    char name[64];
    /* the handler call in progress (proxy_busy): when it began (ns, 0 when none), and its
     * trigger; written by the thread, read by whoever reports a launch's timeout */
    uint64_t busy_ns, busy_fst, busy_snd;
};

static void proxy_fail(proxy_t *p, mscclpp_result_t r)
{
    if (p->err != MSCCLPP_OK) return;
    snprintf(p->msg, sizeof p->msg, "%s", mscclpp_last_error());
    p->culprit = core_culprit();
    p->err = r;
    __atomic_store_n(&p->fifo->err, (uint64_t)(int64_t)r, __ATOMIC_RELEASE);
}

static void *proxy_main(void *arg)
{
    proxy_t *p = arg;
    kern_fifo_t *f = p->fifo;
    kern_trigger_t *slots = (kern_trigger_t *)(f + 1);
    uint64_t tail = __atomic_load_n(&f->tail, __ATOMIC_RELAXED);
    base_wait_thread_slice();
    /* Idle: the one wait policy (base/wait.h), spinning as long as the creator's count of
     * pollers says (a long spin where every poller has a core, a short one where they share:
     * spinning 2000 polls beside the interpreter on 2 shared cores made 8-byte calls ~5x
     * slower). Its sleeps use a fine timer slack, without which every idle sleep of the
     * proxy lasted 50 us or more past its end, and a trigger or an inbound signal waited that
     * long for the proxy (the 8-byte multi-node collectives paid it several times per call). */
    uint32_t idle = 0, spin = p->spin;
    /* Hot window: for p->hot_ns after its last activity (a trigger, or a wake-up by inbound
     * data) the idle proxy keeps polling, yielding between polls, instead of backing off into
     * sleeps. A collective is a chain of steps (trigger -> put -> the peer's wait -> its next
     * trigger), and the interpreter cannot wake a sleeping proxy: every trigger pushed while it
     * slept waited for the end of its sleep (up to 50 us, plus a scheduling delay), four times
     * per 8-byte allreduce call across nodes. After the window the usual back-off resumes, so a
     * proxy between collectives costs nothing. */
    uint64_t last = base_now_ns();
    struct pollfd fds[PROXY_MAX_FDS];
    /* the launch that needed this proxy reports its errors (and logs them, naming the rank) */
    core_set_quiet(true);
    /* a running launch waits for this thread: a backend call here that waits for the device
     * would wait for that launch (MSCCLPP_HAL_SYNC_CHECK refuses such calls on the host) */
    hal_thread_serves_launches(true);
    /* A new thread starts on device 0 (CUDA/HIP keep the current device per thread): the
     * transports' copies and allocations (ucx staging: its stream, pinned buffers) must run on
     * the device of the ranks this proxy serves. */
    if (p->dev >= 0) {
        mscclpp_result_t r = p->hal->device_set(p->dev);
        if (r != MSCCLPP_OK) proxy_fail(p, r);
    }
    /* the policy's fine timer slack, for the sleeps in ppoll too */
    (void)prctl(PR_SET_TIMERSLACK, BASE_WAIT_TIMER_SLACK_NS, 0, 0, 0);
    while (!__atomic_load_n(&p->stop, __ATOMIC_ACQUIRE)) {
        kern_trigger_t *s = &slots[tail & (p->size - 1)];
        uint64_t snd = __atomic_load_n(&s->snd, __ATOMIC_ACQUIRE);
        if (!(snd & KERN_TRIG_VALID)) {
            if (p->err == MSCCLPP_OK) {
                mscclpp_result_t r = p->progress(p->arg);
                if (r != MSCCLPP_OK) proxy_fail(p, r);
            }
            if (p->hot_ns && idle >= spin && base_now_ns() - last < p->hot_ns) {
                /* hot: poll again at once, giving the core to any thread that wants it */
                sched_yield();
                continue;
            }
            uint32_t sleep_ns = base_wait_sleep_ns(idle, spin);
            int n = 0;
            if (sleep_ns && p->arm && p->err == MSCCLPP_OK) {
                mscclpp_result_t r = p->arm(p->arg, fds, PROXY_MAX_FDS, &n);
                if (r != MSCCLPP_OK) {
                    proxy_fail(p, r);
                    n = 0;
                }
            }
            if (n < 0) continue; /* work came in while arming: progress it now */
            if (n > 0) {
                struct timespec ts = {0, (long)sleep_ns};
                int k = ppoll(fds, (nfds_t)n, &ts, NULL); /* EINTR or timeout: poll the FIFO */
                int bad = k < 0 && errno != EINTR ? errno : 0;
                for (int i = 0; i < n && k > 0 && !bad; i++)
                    if (fds[i].revents & POLLNVAL) bad = EBADF;
                if (bad) /* a broken descriptor would turn every sleep into a busy loop */
                    proxy_fail(p, ERR(MSCCLPP_ERR_SYSTEM, "proxy of %s: waiting on a transport's "
                                      "event fd: %s", p->name, strerror(bad)));
                if (k > 0 && !bad) { /* inbound data: a step of a collective, hot again */
                    last = base_now_ns();
                    idle = 0;
                    continue;
                }
            } else {
                base_wait_step(idle, spin);
            }
            if (idle != UINT32_MAX) idle++; /* saturate: never back to spinning while idle */
            continue;
        }
        idle = 0;
        uint64_t fst = __atomic_load_n(&s->fst, __ATOMIC_RELAXED);
        if (p->err == MSCCLPP_OK) {
            __atomic_store_n(&p->busy_fst, fst, __ATOMIC_RELAXED);
            __atomic_store_n(&p->busy_snd, snd & ~KERN_TRIG_VALID, __ATOMIC_RELAXED);
            __atomic_store_n(&p->busy_ns, base_now_ns() | 1u, __ATOMIC_RELEASE);
            mscclpp_result_t r = p->handler(p->arg, fst, snd & ~KERN_TRIG_VALID);
            __atomic_store_n(&p->busy_ns, 0, __ATOMIC_RELEASE);
            if (r != MSCCLPP_OK) proxy_fail(p, r);
        }
        __atomic_store_n(&s->fst, 0, __ATOMIC_RELAXED);
        __atomic_store_n(&s->snd, 0, __ATOMIC_RELAXED);
        tail++;
        __atomic_store_n(&f->tail, tail, __ATOMIC_RELEASE);
        last = base_now_ns();
    }
    /* What the handlers handed over leaves before the proxy stops: a transport may hold a put
     * back until its next call, and whoever saw the trigger handled (proxy_drain) may be the
     * one stopping us now (a context dropped to grow). */
    if (p->err == MSCCLPP_OK) {
        mscclpp_result_t r = p->progress(p->arg);
        if (r != MSCCLPP_OK) proxy_fail(p, r);
    }
    return NULL;
}

mscclpp_result_t proxy_create(const hal_ops_t *hal, uint32_t slots, uint32_t spin,
                              proxy_handler_fn handler, proxy_progress_fn progress,
                              proxy_arm_fn arm, void *arg, const char *name, proxy_t **out)
{
    uint64_t size = 16;
    while (size < slots && size < (1u << 20)) size <<= 1;
    proxy_t *p = calloc(1, sizeof *p);
    if (!p) return ERR(MSCCLPP_ERR_NO_MEMORY, "proxy: out of memory");
    mscclpp_result_t res;
    size_t bytes = sizeof(kern_fifo_t) + size * sizeof(kern_trigger_t);
    p->hal = hal;
    p->size = size;
    p->handler = handler;
    p->progress = progress;
    p->arm = arm;
    p->spin = spin;
    if (hal->device_get(&p->dev) != MSCCLPP_OK) {
        p->dev = -1; /* a backend without devices: nothing to bind */
        core_clear_error();
    }
    /* auto: hot only where the pollers have cores of their own (the spin says so); where they
     * share cores a polling proxy takes the core its interpreter needs (2 cores: 2-10x slower
     * 8-byte calls with a 1 ms window under load) */
    if (config_is_set(CFG_MSCCLPP_PROXY_HOT_US) && config_get(CFG_MSCCLPP_PROXY_HOT_US)[0])
        p->hot_ns = (uint64_t)config_get_int(CFG_MSCCLPP_PROXY_HOT_US) * 1000u;
    else
        p->hot_ns = spin > BASE_WAIT_SPIN_SHARED ? PROXY_HOT_NS : 0;
    p->arg = arg;
    snprintf(p->name, sizeof p->name, "%s", name);
    CHECK_GOTO(hal->host_alloc(bytes, (void **)&p->fifo), res, fail);
    memset(p->fifo, 0, bytes);
    p->fifo->size = size;
    CHECK_GOTO(hal->mem_alloc(sizeof(uint64_t), (void **)&p->head), res, fail);
    CHECK_GOTO(hal->memset_sync(p->head, 0, sizeof(uint64_t)), res, fail);
    int e = pthread_create(&p->thread, NULL, proxy_main, p);
    if (e != 0) {
        res = ERR(MSCCLPP_ERR_SYSTEM, "proxy of %s: pthread_create: %s", name, strerror(e));
        goto fail;
    }
    (void)pthread_setname_np(p->thread, PROXY_THREAD_NAME); /* for perf, top, and the tests */
    *out = p;
    return MSCCLPP_OK;
fail:
    if (p->head) hal->mem_free(p->head);
    if (p->fifo) hal->host_free(p->fifo);
    free(p);
    return res;
}

kern_fifo_t *proxy_fifo(proxy_t *p) { return p->fifo; }
uint64_t *proxy_head(proxy_t *p) { return p->head; }

mscclpp_result_t proxy_error(proxy_t *p)
{
    if (!p || __atomic_load_n(&p->fifo->err, __ATOMIC_ACQUIRE) == 0) return MSCCLPP_OK;
    mscclpp_result_t r = core_error_quiet(p->err, "proxy of %s: %s", p->name, p->msg);
    core_set_culprit(p->culprit);
    return r;
}

mscclpp_result_t proxy_drain(proxy_t *p)
{
    if (!p) return MSCCLPP_OK;
    kern_fifo_t *f = p->fifo;
    kern_trigger_t *slots = (kern_trigger_t *)(f + 1);
    /* the triggers pushed by now: the valid slots from the tail on (later pushes, from
     * launches still running elsewhere, do not lengthen this wait) */
    uint64_t tail = __atomic_load_n(&f->tail, __ATOMIC_ACQUIRE), end = tail;
    while (end - tail < p->size &&
           (__atomic_load_n(&slots[end & (p->size - 1)].snd, __ATOMIC_ACQUIRE) & KERN_TRIG_VALID))
        end++;
    base_wait_t w;
    base_wait_init(&w, config_timeout_ns(), p->spin);
    for (;;) {
        if (__atomic_load_n(&f->err, __ATOMIC_ACQUIRE) != 0) return proxy_error(p);
        uint64_t t = __atomic_load_n(&f->tail, __ATOMIC_ACQUIRE);
        if (t >= end) return proxy_error(p); /* its error, if the last one failed */
        if (!base_wait_pause(&w))
            return ERR(MSCCLPP_ERR_TIMEOUT, "proxy of %s: %llu of %llu triggers still not "
                       "handled after MSCCLPP_TIMEOUT (a transport call hangs?)", p->name,
                       (unsigned long long)(end - t), (unsigned long long)(end - tail));
    }
}

bool proxy_busy(proxy_t *p, uint64_t min_ns, uint64_t *for_ns, uint64_t *fst, uint64_t *snd,
                uint64_t *behind)
{
    if (!p) return false;
    uint64_t since = __atomic_load_n(&p->busy_ns, __ATOMIC_ACQUIRE), now = base_now_ns();
    if (!since || now < since || now - since < min_ns) return false;
    *fst = __atomic_load_n(&p->busy_fst, __ATOMIC_RELAXED);
    *snd = __atomic_load_n(&p->busy_snd, __ATOMIC_RELAXED);
    /* the same call still, or the values may belong to the next one */
    if (__atomic_load_n(&p->busy_ns, __ATOMIC_ACQUIRE) != since) return false;
    *for_ns = now - since;
    kern_fifo_t *f = p->fifo;
    kern_trigger_t *slots = (kern_trigger_t *)(f + 1);
    uint64_t tail = __atomic_load_n(&f->tail, __ATOMIC_ACQUIRE), end = tail + 1;
    while (end - tail < p->size &&
           (__atomic_load_n(&slots[end & (p->size - 1)].snd, __ATOMIC_ACQUIRE) & KERN_TRIG_VALID))
        end++;
    *behind = end - tail - 1;
    return true;
}

void proxy_destroy(proxy_t *p)
{
    if (!p) return;
    __atomic_store_n(&p->stop, 1, __ATOMIC_RELEASE);
    pthread_join(p->thread, NULL);
    p->hal->mem_free(p->head);
    p->hal->host_free(p->fifo);
    free(p);
}
