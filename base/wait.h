/*
 * The one wait policy of the library, for every host-side wait on memory another thread or
 * process will change (host backend streams and pools, the host-compiled interpreter, core
 * semaphores, GPU modules polling their runtime): spin with a cpu pause, then sched_yield, then
 * nanosleeps that double from BASE_WAIT_SLEEP_MIN_NS to BASE_WAIT_SLEEP_MAX_NS.
 *
 * Only the spin length varies, and base_wait_spin() chooses it: when every thread that polls on
 * this node has a core of its own, a waiter spins long (a sleep costs tens of microseconds, far
 * more than the peer needs to answer); when they share cores, it spins briefly, because the
 * thread it waits for may need that very core. MSCCLPP_HOST_SPIN overrides. That choice is a
 * guess from counts; what a thread sees corrects it: after a wait whose spin ran out in vain,
 * the thread's next waits spin briefly, and after one whose yields ran out in vain they yield
 * twice and sleep long enough to leave the core; longer again wait by wait (base_wait_tls_t).
 * GPU waits follow the same shape (spin, then sleep) with the spin of base_wait_dev_spin().
 *
 * The sleeps are only short because a waiting thread's timer slack is lowered to
 * BASE_WAIT_TIMER_SLACK_NS the first time it sleeps: with Linux's default slack (50 us) every
 * nanosleep, even of 1 us, lasted 55-190 us, so a wait that missed its peer by a microsecond
 * cost over 100 us (the cliff of small collectives under mpiexec, issue 8 item 7).
 *
 *     base_wait_t w;
 *     base_wait_init(&w, config_timeout_ns(), base_wait_spin(0));
 *     while (atomic_load_explicit(flag, memory_order_acquire) < want)
 *         if (!base_wait_pause(&w)) return ERR(MSCCLPP_ERR_TIMEOUT, "... waited on ...");
 */
#ifndef MSCCLPP_BASE_WAIT_H
#define MSCCLPP_BASE_WAIT_H

#include <sched.h>
#include <stdbool.h>
#include <sys/prctl.h>
#include <stdint.h>
#include <time.h>

#include "base/clock.h"
#include "base/wait_sched.h"

#ifdef __cplusplus
extern "C" {
#endif

#define BASE_WAIT_YIELDS 64u             /* sched_yield calls after the spin phase */
#define BASE_WAIT_YIELDS_SHARED 2u       /* ... after a wait whose yields were in vain */
#define BASE_WAIT_SLEEP_MIN_NS 1000u     /* first nanosleep */
#define BASE_WAIT_SLEEP_MAX_NS 50000u    /* longest nanosleep: bounds the wake-up latency */
#define BASE_WAIT_SLEEP_BLOCK_STEP 4u    /* after vain yields, sleeps start at MIN << this */
#define BASE_WAIT_SPIN_SHARED 64u        /* polls when pollers outnumber cores */
#define BASE_WAIT_SPIN_OWN_CORE 2000u    /* polls when every poller has a core (tens of us) */
#define BASE_WAIT_TIMER_SLACK_NS 1000ul  /* timer slack of a thread that sleeps in a wait */
#define BASE_WAIT_SLEEP_REL 16u          /* base_wait_pause_rel: a sleep <= 1/16 of the wait */

/**
 * Per-thread state of the policy. `cap`: the longest spin this thread's next wait may do. A spin
 * that ran out before its data came was wasted, and on a shared core it is worse than wasted:
 * the thread that would write the data may be waiting for this very core (two ranks that the
 * scheduler put on one core beside busy processes each spun 2000 polls, ~0.2 ms, per exchange:
 * 200-340 us per 8-byte allreduce, issue 22 item 9). So a wait whose spin ran out sets the cap
 * to BASE_WAIT_SPIN_SHARED, and each wait doubles it again, up to the spin its caller asks for.
 * `spin` is the current stateless wait's (base_wait_step).
 *
 * `ycap` does the same for the yields: a wait that yielded all its yields in vain and went on
 * to sleep sets it to BASE_WAIT_YIELDS_SHARED, each wait doubles it; while it is below
 * BASE_WAIT_YIELDS, a wait's sleeps start at BASE_WAIT_SLEEP_MIN_NS << BASE_WAIT_SLEEP_BLOCK_STEP.
 * Two ranks' stream workers on one core took turns of 0.09-0.17 ms, each runnable while the
 * other ran (perf sched timehist): a yield hands the core only to a thread the scheduler deems
 * owed it, and a sleep of a few microseconds ends before its thread is switched out (in this
 * VM, 1-4 us sleeps switched in 0 of 2000 tries and took 20-40 us each under load; 8 us and
 * longer switched). A sleep long enough to block is what hands the core to the partner.
 * `yields` is the current stateless wait's.
 */
typedef struct {
    uint32_t cap; /* 0: not limited yet */
    uint32_t spin;
    uint32_t ycap; /* 0: not limited yet */
    uint32_t yields;
} base_wait_tls_t;
extern __thread base_wait_tls_t base_wait_tls;

/** The spin of a wait that starts now in this thread, asked to spin `spin` polls. */
static inline uint32_t base_wait_begin(base_wait_tls_t *t, uint32_t spin)
{
    uint32_t cap = t->cap ? t->cap : UINT32_MAX;
    t->cap = cap > UINT32_MAX / 2 ? UINT32_MAX : cap * 2;
    return spin < cap ? spin : cap;
}

/** A wait of this thread spun all its polls in vain. */
static inline void base_wait_spun_out(base_wait_tls_t *t) { t->cap = BASE_WAIT_SPIN_SHARED; }

/** The yields of a wait that starts now in this thread. */
static inline uint32_t base_wait_begin_yields(base_wait_tls_t *t)
{
    uint32_t cap = t->ycap ? t->ycap : BASE_WAIT_YIELDS;
    t->ycap = cap >= BASE_WAIT_YIELDS / 2 ? 0 : cap * 2;
    return cap < BASE_WAIT_YIELDS ? cap : BASE_WAIT_YIELDS;
}

/** A wait of this thread yielded all its yields in vain. */
static inline void base_wait_yielded_out(base_wait_tls_t *t) { t->ycap = BASE_WAIT_YIELDS_SHARED; }

/**
 * Polls before a wait starts yielding. `pollers`: threads of this node that poll at the same
 * time (ranks on the node x blocks per rank, plus one per rank for its stream); 0 when the
 * caller cannot tell, which counts the ranks the launcher announces (MPI_LOCALNRANKS,
 * OMPI_COMM_WORLD_LOCAL_SIZE) or else assumes cores are shared. MSCCLPP_HOST_SPIN, when set,
 * wins. Defined in base/wait.c.
 */
uint32_t base_wait_spin(unsigned pollers);

/**
 * Called by the library's own polling threads as they start (host stream workers and block
 * pools, proxies): asks the scheduler for the short time slice of MSCCLPP_HOST_SLICE_US for the
 * calling thread, if it runs under SCHED_OTHER (Linux 6.12 and later take sched_attr's runtime
 * as the slice of a fair task; older kernels ignore it). Under EEVDF a thread that wakes with a
 * shorter slice than the running one may preempt it at once (PREEMPT_SHORT) instead of waiting
 * for the end of that thread's slice (0.75-3 ms), so a waiter's short sleep stays short beside
 * busy processes too (issue 22 item 9). The thread's share of the CPU does not change (that is
 * its nice value's weight). Threads of the application are left as they are. Defined in
 * base/wait.c.
 */
void base_wait_thread_slice(void);

/** Polls before a GPU wait starts sleeping (kern_args_t.dev_spin). */
static inline uint32_t base_wait_dev_spin(void) { return BASE_WAIT_DEV_SPIN; }

/** CPUs this process may run on (its affinity mask), at least 1. */
unsigned base_cpu_count(void);

/** One polite busy-wait step (pause on x86, yield on arm). */
static inline void base_cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__) || defined(__arm__)
    __asm__ __volatile__("yield" ::: "memory");
#else
    __asm__ __volatile__("" ::: "memory");
#endif
}

/** Length of the sleep at poll `n` of a wait that spins `spin` polls and then yields `yields`
 *  times (0 before the sleeps). */
static inline uint32_t base_wait_sleep_at(uint32_t n, uint32_t spin, uint32_t yields)
{
    if (n < spin || n - spin < yields) return 0;
    uint32_t k = n - spin - yields;
    if (yields < BASE_WAIT_YIELDS) k += BASE_WAIT_SLEEP_BLOCK_STEP;
    uint32_t ns = k < 6 ? BASE_WAIT_SLEEP_MIN_NS << k : BASE_WAIT_SLEEP_MAX_NS;
    return ns > BASE_WAIT_SLEEP_MAX_NS ? BASE_WAIT_SLEEP_MAX_NS : ns;
}

/** Length of the sleep at poll `n` of a wait that spins `spin` polls (0 before the sleeps):
 *  for a waiter that sleeps in a call of its own (a poll on a transport's event fd). */
static inline uint32_t base_wait_sleep_ns(uint32_t n, uint32_t spin)
{
    return base_wait_sleep_at(n, spin, BASE_WAIT_YIELDS);
}

/** Sleep `ns` (< 1 s) with the policy's timer slack. */
static inline void base_wait_sleep(uint32_t ns)
{
    static __thread bool fine_timer; /* per thread: prctl sets the calling thread's slack */
    if (!fine_timer) {
        prctl(PR_SET_TIMERSLACK, BASE_WAIT_TIMER_SLACK_NS, 0, 0, 0);
        fine_timer = true;
    }
    struct timespec ts = {0, (long)ns};
    nanosleep(&ts, NULL);
}

/** Back off after poll `n` of a wait of this thread that spins `spin` polls, then yields
 *  `yields` times. */
static inline void base_wait_back_off(uint32_t n, uint32_t spin, uint32_t yields)
{
    if (n < spin) {
        base_cpu_relax();
        return;
    }
    if (n == spin && spin) base_wait_spun_out(&base_wait_tls);
    if (n - spin < yields) {
        sched_yield();
        return;
    }
    if (n - spin == yields && yields) base_wait_yielded_out(&base_wait_tls);
    base_wait_sleep(base_wait_sleep_at(n, spin, yields));
}

/**
 * Back off after poll number `n` (0, 1, ...) of a wait that spins at most `spin` polls.
 * Stateless for its caller, so a loop that only counts its polls (the interpreter) follows the
 * same policy as base_wait_t: the wait's spin, chosen at poll 0, lives in the calling thread.
 */
static inline void base_wait_step(uint32_t n, uint32_t spin)
{
    base_wait_tls_t *t = &base_wait_tls;
    if (n == 0) {
        t->spin = base_wait_begin(t, spin);
        t->yields = base_wait_begin_yields(t);
    }
    base_wait_back_off(n, t->spin, t->yields);
}

/**
 * The sleep at poll `n` of a wait (spin, then yields) that has lasted `elapsed_ns`
 * (base_wait_pause_rel): the policy's, but at most elapsed / BASE_WAIT_SLEEP_REL (and at least
 * BASE_WAIT_SLEEP_MIN_NS).
 */
static inline uint32_t base_wait_sleep_rel_ns(uint32_t n, uint32_t spin, uint32_t yields,
                                              uint64_t elapsed_ns)
{
    uint32_t ns = base_wait_sleep_at(n, spin, yields);
    uint64_t cap = elapsed_ns / BASE_WAIT_SLEEP_REL;
    if (cap < BASE_WAIT_SLEEP_MIN_NS) cap = BASE_WAIT_SLEEP_MIN_NS;
    return ns > cap ? (uint32_t)cap : ns;
}

/** True when a wait at poll `n` must look at the clock (every 128 polls while spinning). */
static inline bool base_wait_check_due(uint32_t n, uint32_t spin)
{
    return n >= spin || (n & 127u) == 127u;
}

/** State of one wait; base_wait_init for every new wait. */
typedef struct {
    uint32_t polls;       /* pauses so far (saturates) */
    uint32_t spin;        /* polls spent spinning */
    uint32_t yields;      /* then polls spent yielding */
    uint64_t start_ns;    /* base_now_ns() at base_wait_init */
    uint64_t deadline_ns; /* base_now_ns(); 0: no deadline */
} base_wait_t;

/** Start a wait that may last `timeout_ns` (0: unbounded), spinning at most `spin` polls first
 *  (less after a wait of this thread spun out: base_wait_tls_t). */
static inline void base_wait_init(base_wait_t *w, uint64_t timeout_ns, uint32_t spin)
{
    w->polls = 0;
    w->spin = base_wait_begin(&base_wait_tls, spin);
    w->yields = base_wait_begin_yields(&base_wait_tls);
    w->start_ns = base_now_ns();
    w->deadline_ns = timeout_ns ? w->start_ns + timeout_ns : 0;
}

/** True once the wait has passed its spin and yield phases (a caller may block instead). */
static inline bool base_wait_idle(const base_wait_t *w)
{
    return (uint64_t)w->polls >= (uint64_t)w->spin + w->yields;
}

/** Back off one step. False when the deadline has passed, true otherwise. */
static inline bool base_wait_pause(base_wait_t *w)
{
    uint32_t n = w->polls;
    base_wait_back_off(n, w->spin, w->yields);
    if (w->polls != UINT32_MAX) w->polls++; /* saturate instead of wrapping back to spinning */
    if (!base_wait_check_due(n, w->spin)) return true;
    return w->deadline_ns == 0 || base_now_ns() < w->deadline_ns;
}

/**
 * base_wait_pause for a wait whose end nobody signals but a poll notices (a GPU stream or event
 * query): its sleeps are also capped at a fraction of the time waited so far, so the sleep that
 * spans the end overshoots it by a bounded share of the wait (the policy's 50 us sleeps overshot
 * a kernel of a few hundred microseconds by 25 us on average, issue 19 item 5). Short waits
 * wake often, long ones rarely.
 */
static inline bool base_wait_pause_rel(base_wait_t *w)
{
    uint32_t n = w->polls;
    if (n < w->spin || n - w->spin <= w->yields) return base_wait_pause(w);
    uint64_t now = base_now_ns();
    base_wait_sleep(base_wait_sleep_rel_ns(n, w->spin, w->yields, now - w->start_ns));
    if (w->polls != UINT32_MAX) w->polls++;
    return w->deadline_ns == 0 || now < w->deadline_ns;
}

#ifdef __cplusplus
}
#endif

#endif /* MSCCLPP_BASE_WAIT_H */
