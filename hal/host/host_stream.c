/*
 * Host backend streams, events and launches. A stream is an ordered queue served by one worker
 * thread (started on first use). A launch runs its blocks concurrently, since blocks of a plan
 * wait on each other: the worker runs block 0 and a persistent pool of the stream's threads
 * runs the others, so a launch in steady state creates no thread. A NULL stream runs work
 * synchronously in the caller's thread (blocks other than 0 on a shared pool).
 *
 * A stream holds at most HOST_STREAM_DEPTH tasks, like a GPU driver's launch queue: an
 * enqueuer that finds it full waits for the worker, bounded by MSCCLPP_TIMEOUT without
 * progress. Finished tasks are recycled, and a drained stream keeps only a few of them.
 *
 * Capture (stream_begin_capture .. stream_end_capture) emulates CUDA stream capture, so that
 * the host backend tests replay safety through the same executor code the GPUs run: while a
 * stream captures, what is queued on it (launches with their arguments, copies, sets, event
 * records) is recorded instead of run, and a graph replays the recording on a stream, in
 * order, each time it is launched. As on CUDA, synchronizing a capturing stream fails and
 * invalidates the capture. What the emulation cannot show is said in docs/graphs.md.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/config.h"
#include "base/debug.h"
#include "hal/host/host.h"
#include "hal/host/host_wait.h"
#include "kernels/common/kern_entry.h"

#define HOST_MAX_BLOCKS 1024
/*
 * Spin budget of the backend's own hand-offs (launcher <-> block threads, stream worker <->
 * caller). Spinning only pays when the other thread runs on another core; with more threads
 * than cores (8 ranks x 16 blocks on 2 cores) a long spin delays the very thread it waits for,
 * so these waits spin briefly, then yield, then sleep on a futex or condition variable.
 */
#define HOST_HANDOFF_SPIN 64u
#define TASK_ARGS_MIN 256 /* args buffers of recycled tasks start this big */
#define TASK_KEEP 32      /* recycled tasks a drained stream keeps (the rest is given back) */

/* ------------------------------------------------------------------------------------------ */
/* Threads */

int host_thread_create(pthread_t *th, void *(*fn)(void *), void *arg)
{
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int err = pthread_create(th, NULL, fn, arg);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    return err;
}

static _Atomic(host_block_fn_t) block_fn_override;
static _Atomic uint64_t pool_created;

host_block_fn_t host_set_block_fn(host_block_fn_t fn)
{
    host_block_fn_t old = atomic_exchange(&block_fn_override, fn);
    return old ? old : kern_host_run_block;
}

static void handoff_wait_init(host_wait_t *w)
{
    uint32_t spin = host_spin_polls();
    host_wait_init_spin(w, 0, spin < HOST_HANDOFF_SPIN ? spin : HOST_HANDOFF_SPIN);
}

static inline void run_block(const void *args, int block, int nblocks)
{
    host_block_fn_t fn = atomic_load_explicit(&block_fn_override, memory_order_acquire);
    (fn ? fn : kern_host_run_block)(args, block, nblocks);
}

uint64_t host_pool_threads_created(void) { return atomic_load(&pool_created); }

/* ------------------------------------------------------------------------------------------ */
/* Block pool: thread i runs block i + 1 of each launch that has that many blocks */

struct host_pool;

typedef struct {
    _Atomic uint32_t go;       /* futex word: bumped once per launch this thread takes part in */
    _Atomic uint32_t sleeping; /* the thread sleeps on `go`: the launcher must wake it */
    int block;
    struct host_pool *pool;
    pthread_t thread;
} __attribute__((aligned(64))) pool_slot_t;

typedef struct host_pool {
    pool_slot_t **slots;
    int nslots;
    const void *args; /* of the current launch; published by the `go` bumps */
    int nblocks;
    _Atomic uint32_t remaining;         /* futex word: pool blocks not finished */
    _Atomic uint32_t launcher_sleeping; /* the launcher sleeps on `remaining` */
    _Atomic int stop;
} host_pool_t;

static void *pool_main(void *arg)
{
    pool_slot_t *slot = arg;
    host_pool_t *pool = slot->pool;
    uint32_t seen = 0;
    base_wait_thread_slice();
    for (;;) {
        uint32_t go;
        host_wait_t w;
        handoff_wait_init(&w);
        while ((go = atomic_load(&slot->go)) == seen) {
            if (!host_wait_idle(&w)) {
                host_wait_pause(&w);
                continue;
            }
            /* Idle between launches: sleep until the launcher bumps `go`. */
            atomic_store(&slot->sleeping, 1);
            if (atomic_load(&slot->go) == seen)
                host_futex_wait((const uint32_t *)&slot->go, seen, 0, false);
            atomic_store(&slot->sleeping, 0);
        }
        seen = go;
        if (atomic_load(&pool->stop)) return NULL;
        run_block(pool->args, slot->block, pool->nblocks);
        if (atomic_fetch_sub(&pool->remaining, 1) == 1 && atomic_load(&pool->launcher_sleeping))
            host_futex_wake((const uint32_t *)&pool->remaining, 1, false);
    }
}

/* Grow the pool to `n` threads. Only the pool's launcher calls this. */
static mscclpp_result_t pool_grow(host_pool_t *pool, int n)
{
    if (n <= pool->nslots) return MSCCLPP_OK;
    pool_slot_t **slots = realloc(pool->slots, (size_t)n * sizeof *slots);
    if (!slots) return ERR(MSCCLPP_ERR_NO_MEMORY, "host launch: out of memory for %d threads", n);
    pool->slots = slots;
    while (pool->nslots < n) {
        pool_slot_t *slot = aligned_alloc(64, sizeof *slot);
        if (!slot) return ERR(MSCCLPP_ERR_NO_MEMORY, "host launch: out of memory for a thread");
        memset(slot, 0, sizeof *slot);
        slot->block = pool->nslots + 1;
        slot->pool = pool;
        int err = host_thread_create(&slot->thread, pool_main, slot);
        if (err) {
            free(slot);
            errno = err;
            return ERR_SYS("host launch: cannot create thread %d of a block pool: %m",
                           pool->nslots + 1);
        }
        char name[16];
        snprintf(name, sizeof name, "mscclpp-b%d", slot->block);
        pthread_setname_np(slot->thread, name);
        atomic_fetch_add(&pool_created, 1);
        pool->slots[pool->nslots++] = slot;
    }
    return MSCCLPP_OK;
}

/* Run all blocks of a launch; returns when every block has returned. */
static mscclpp_result_t pool_run(host_pool_t *pool, const void *args, int nblocks)
{
    CHECK(pool_grow(pool, nblocks - 1));
    host_check_launch(1); /* MSCCLPP_HAL_SYNC_CHECK: a launch runs */
    if (nblocks > 1) {
        pool->args = args;
        pool->nblocks = nblocks;
        atomic_store(&pool->remaining, (uint32_t)(nblocks - 1));
        for (int i = 0; i < nblocks - 1; i++) {
            pool_slot_t *slot = pool->slots[i];
            atomic_fetch_add(&slot->go, 1);
            if (atomic_load(&slot->sleeping))
                host_futex_wake((const uint32_t *)&slot->go, 1, false);
        }
    }
    run_block(args, 0, nblocks);
    if (nblocks > 1) {
        host_wait_t w;
        handoff_wait_init(&w);
        uint32_t left;
        while ((left = atomic_load(&pool->remaining)) != 0) {
            if (!host_wait_idle(&w)) {
                host_wait_pause(&w);
                continue;
            }
            atomic_store(&pool->launcher_sleeping, 1);
            if ((left = atomic_load(&pool->remaining)) != 0)
                host_futex_wait((const uint32_t *)&pool->remaining, left, 0, false);
            atomic_store(&pool->launcher_sleeping, 0);
        }
    }
    host_check_launch(-1);
    return MSCCLPP_OK;
}

static void pool_destroy(host_pool_t *pool)
{
    atomic_store(&pool->stop, 1);
    for (int i = 0; i < pool->nslots; i++) {
        atomic_fetch_add(&pool->slots[i]->go, 1);
        host_futex_wake((const uint32_t *)&pool->slots[i]->go, 1, false);
    }
    for (int i = 0; i < pool->nslots; i++) {
        pthread_join(pool->slots[i]->thread, NULL);
        free(pool->slots[i]);
    }
    free(pool->slots);
    pool->slots = NULL;
    pool->nslots = 0;
}

/* Synchronous launches (NULL stream) share one pool, one launch at a time. */
static pthread_mutex_t sync_pool_lock = PTHREAD_MUTEX_INITIALIZER;
static host_pool_t sync_pool;

/* ------------------------------------------------------------------------------------------ */
/* Events */

struct hal_event {
    pthread_mutex_t lock;
    pthread_cond_t cv;
    _Atomic uint64_t ts_ns;    /* CLOCK_MONOTONIC when the last record was reached */
    _Atomic uint32_t pending;  /* records queued on streams, not yet reached */
    _Atomic uint64_t records;  /* records queued so far (a stream wait captures this) */
    _Atomic uint64_t reached;  /* records reached so far */
    _Atomic int refs;          /* the creator's, plus one per queued stream wait */
    _Atomic bool recorded;
    int waiters;               /* under lock */
};

mscclpp_result_t host_event_create(hal_event_t *e)
{
    CHECK_ARG(e != NULL);
    struct hal_event *ev = calloc(1, sizeof *ev);
    if (!ev) return ERR(MSCCLPP_ERR_NO_MEMORY, "event_create: out of memory");
    pthread_mutex_init(&ev->lock, NULL);
    pthread_cond_init(&ev->cv, NULL);
    atomic_store(&ev->refs, 1);
    *e = ev;
    return MSCCLPP_OK;
}

static void event_unref(hal_event_t e)
{
    if (atomic_fetch_sub(&e->refs, 1) != 1) return;
    pthread_cond_destroy(&e->cv);
    pthread_mutex_destroy(&e->lock);
    free(e);
}

static void event_reached(hal_event_t e)
{
    pthread_mutex_lock(&e->lock);
    atomic_store(&e->ts_ns, host_now_ns());
    atomic_fetch_sub(&e->pending, 1);
    atomic_fetch_add(&e->reached, 1);
    if (e->waiters) pthread_cond_broadcast(&e->cv);
    pthread_mutex_unlock(&e->lock);
}

mscclpp_result_t host_event_sync(hal_event_t e)
{
    CHECK_ARG(e != NULL);
    host_wait_t w;
    handoff_wait_init(&w);
    while (atomic_load(&e->pending) != 0 && !host_wait_idle(&w)) host_wait_pause(&w);
    pthread_mutex_lock(&e->lock);
    e->waiters++;
    while (atomic_load(&e->pending) != 0) pthread_cond_wait(&e->cv, &e->lock);
    e->waiters--;
    pthread_mutex_unlock(&e->lock);
    return MSCCLPP_OK;
}

/* Wait until e has reached `target` records (a stream's wait task). Not bounded: the stream
 * it waits for runs work whose every wait is bounded, as a stream sync is not. */
static void event_wait_reached(hal_event_t e, uint64_t target)
{
    host_wait_t w;
    handoff_wait_init(&w);
    while (atomic_load(&e->reached) < target && !host_wait_idle(&w)) host_wait_pause(&w);
    pthread_mutex_lock(&e->lock);
    e->waiters++;
    while (atomic_load(&e->reached) < target) pthread_cond_wait(&e->cv, &e->lock);
    e->waiters--;
    pthread_mutex_unlock(&e->lock);
}

mscclpp_result_t host_event_destroy(hal_event_t e)
{
    CHECK_ARG(e != NULL);
    host_event_sync(e); /* a queued record still points at it */
    event_unref(e);     /* a queued stream wait may still hold it */
    return MSCCLPP_OK;
}

mscclpp_result_t host_event_elapsed_ms(hal_event_t start, hal_event_t end, float *ms)
{
    CHECK_ARG(start != NULL);
    CHECK_ARG(end != NULL);
    CHECK_ARG(ms != NULL);
    if (!atomic_load(&start->recorded) || !atomic_load(&end->recorded))
        return ERR_ARG("event_elapsed_ms: the %s event was never recorded",
                       atomic_load(&start->recorded) ? "end" : "start");
    host_event_sync(start);
    host_event_sync(end);
    int64_t d = (int64_t)(atomic_load(&end->ts_ns) - atomic_load(&start->ts_ns));
    *ms = (float)((double)d / 1e6);
    return MSCCLPP_OK;
}

/* ------------------------------------------------------------------------------------------ */
/* Streams */

typedef enum {
    TASK_COPY,
    TASK_SET,
    TASK_LAUNCH,
    TASK_EVENT,
    TASK_HOSTFN,
    TASK_WAIT_EVENT, /* wait until `event` has reached `bytes` records */
    TASK_SCALE,      /* kern_host_scale(args) */
} task_kind_t;

typedef struct host_task {
    struct host_task *next;
    task_kind_t kind;
    void *dst;
    const void *src;
    size_t bytes;
    int value;
    int nblocks;
    hal_event_t event;
    hal_host_fn_t fn; /* TASK_HOSTFN: fn(dst) */
    void *args; /* launch arguments, owned and kept when the task is recycled */
    size_t args_cap;
} host_task_t;

struct hal_stream {
    pthread_mutex_t lock;
    pthread_cond_t work_cv; /* worker waits for tasks */
    pthread_cond_t done_cv; /* stream_sync waits for completions */
    host_task_t *head, *tail, *free_tasks;
    _Atomic uint64_t submitted, completed;
    bool worker_sleeping, stop, started; /* under lock */
    int sync_waiters;                    /* under lock */
    uint64_t sync_target;          /* under lock: the fewest completions a sync waiter waits for */
    uint64_t sync_wakes;           /* under lock: times the worker woke the sync waiters (tests) */
    int space_waiters;             /* under lock: enqueuers waiting for a free slot */
    uint64_t space_wakes;          /* under lock: times the worker woke them (tests) */
    bool space_wake_sent;          /* under lock: woken, not yet run: no second signal */
    pthread_cond_t space_cv;       /* they wait here */
    uint64_t n_free;               /* tasks on free_tasks (under lock) */
    uint64_t allocated, max_depth; /* tasks in existence, most ever held (under lock) */
    pthread_t worker;
    mscclpp_result_t err; /* first error of a task since the last sync */
    char errmsg[512];
    host_pool_t pool;
    /* capture (under lock): tasks queued while capturing are recorded here, not run */
    bool capturing;
    bool capture_invalid;  /* a call not permitted during capture was made */
    char capture_why[256]; /* which one */
    host_task_t *cap_head, *cap_tail;
    size_t cap_n;
};

/* A recording: tasks in the order they were queued, each with its own copy of the args. */
struct hal_graph {
    host_task_t *tasks;
    size_t n;
};

static mscclpp_result_t task_run(hal_stream_t s, host_task_t *t)
{
    switch (t->kind) {
    case TASK_COPY: memmove(t->dst, t->src, t->bytes); return MSCCLPP_OK;
    case TASK_SET: memset(t->dst, t->value, t->bytes); return MSCCLPP_OK;
    case TASK_LAUNCH: return pool_run(&s->pool, t->bytes ? t->args : NULL, t->nblocks);
    case TASK_EVENT: event_reached(t->event); return MSCCLPP_OK;
    case TASK_HOSTFN: t->fn(t->dst); return MSCCLPP_OK;
    case TASK_SCALE: kern_host_scale(t->args); return MSCCLPP_OK;
    case TASK_WAIT_EVENT:
        event_wait_reached(t->event, t->bytes);
        event_unref(t->event);
        return MSCCLPP_OK;
    }
    return ERR(MSCCLPP_ERR_INTERNAL, "host stream: unknown task kind %d", (int)t->kind);
}

/* A full queue's enqueuer is woken when the stream holds this many tasks or fewer. */
#define SPACE_WAKE_DEPTH (HOST_STREAM_DEPTH - HOST_STREAM_DEPTH / 4)

static void *stream_main(void *arg)
{
    hal_stream_t s = arg;
    uint64_t taken = 0;
    base_wait_thread_slice();
    for (;;) {
        /* Spin briefly for the next task (back-to-back launches), then sleep on the queue. */
        host_wait_t w;
        handoff_wait_init(&w);
        while (atomic_load(&s->submitted) == taken && !host_wait_idle(&w)) host_wait_pause(&w);
        pthread_mutex_lock(&s->lock);
        while (!s->head && !s->stop) {
            s->worker_sleeping = true;
            pthread_cond_wait(&s->work_cv, &s->lock);
            s->worker_sleeping = false;
        }
        host_task_t *t = s->head;
        if (!t) {
            pthread_mutex_unlock(&s->lock);
            return NULL;
        }
        s->head = t->next;
        if (!s->head) s->tail = NULL;
        pthread_mutex_unlock(&s->lock);
        taken++;

        mscclpp_result_t res = task_run(s, t);

        pthread_mutex_lock(&s->lock);
        if (res != MSCCLPP_OK && s->err == MSCCLPP_OK) {
            s->err = res;
            snprintf(s->errmsg, sizeof s->errmsg, "%s", mscclpp_last_error());
        }
        t->next = s->free_tasks;
        s->free_tasks = t;
        s->n_free++;
        atomic_fetch_add(&s->completed, 1);
        /* wake a sync only when it can return: waking it after every task of a long queue
         * costs a context switch per task on the cores the ranks share (issue 22 item 9) */
        if (s->sync_waiters && atomic_load(&s->completed) >= s->sync_target) {
            s->sync_target = UINT64_MAX; /* waiters still short of theirs set it again */
            s->sync_wakes++;
            pthread_cond_broadcast(&s->done_cv);
        }
        /* wake a full queue's enqueuer once a batch of slots is free (or a task failed), not
         * after each task: each wake is a context switch on the cores the ranks share */
        if (s->space_waiters && !s->space_wake_sent &&
            (atomic_load(&s->submitted) - atomic_load(&s->completed) <= SPACE_WAKE_DEPTH ||
             s->err != MSCCLPP_OK)) {
            s->space_wake_sent = true;
            s->space_wakes++;
            pthread_cond_signal(&s->space_cv);
        }
        pthread_mutex_unlock(&s->lock);
    }
}

mscclpp_result_t host_stream_create(hal_stream_t *s)
{
    CHECK_ARG(s != NULL);
    struct hal_stream *st = calloc(1, sizeof *st);
    if (!st) return ERR(MSCCLPP_ERR_NO_MEMORY, "stream_create: out of memory");
    pthread_mutex_init(&st->lock, NULL);
    pthread_cond_init(&st->work_cv, NULL);
    pthread_cond_init(&st->done_cv, NULL);
    pthread_cond_init(&st->space_cv, NULL);
    st->sync_target = UINT64_MAX;
    *s = st;
    return MSCCLPP_OK;
}

/* A task to fill, recycled when possible, with room for args_bytes. Lock held. */
static host_task_t *task_get(hal_stream_t s, size_t args_bytes)
{
    host_task_t *t = s->free_tasks;
    if (t) {
        s->free_tasks = t->next;
        s->n_free--;
    } else if ((t = calloc(1, sizeof *t))) {
        s->allocated++;
    } else {
        return NULL;
    }
    if (args_bytes > t->args_cap) {
        size_t cap = args_bytes < TASK_ARGS_MIN ? TASK_ARGS_MIN : args_bytes;
        void *a = realloc(t->args, cap);
        if (!a) {
            t->next = s->free_tasks;
            s->free_tasks = t;
            s->n_free++;
            return NULL;
        }
        t->args = a;
        t->args_cap = cap;
    }
    t->next = NULL;
    return t;
}

/*
 * Wait until the stream holds fewer than HOST_STREAM_DEPTH tasks. Lock held. A task of the
 * stream that failed ends the wait with that task's error (which names the peer it waited for:
 * "the queue is full" alone named nobody, issue 22 item 5). A worker that finishes no task for
 * 2 x MSCCLPP_TIMEOUT + 3 s (config_backstop_ns) ends the wait with MSCCLPP_ERR_TIMEOUT. A launch blocked behind a
 * dead peer fails before that, and its error, naming the peer, is what the caller should get:
 * each of its waits is bounded by MSCCLPP_TIMEOUT, but one wait may pass slowly before the one
 * that fails begins (seen under TSan: a packet wait that began about 3 s into the launch), and
 * the bootstrap then takes up to 1.3 s to find the rank to blame (a notice, probes of ranks
 * that may be gone). Only a task that never ends meets this bound.
 */

static mscclpp_result_t wait_for_space(hal_stream_t s, const char *who)
{
    uint64_t timeout = config_backstop_ns();
    uint64_t seen = atomic_load(&s->completed), since = host_now_ns();
    while (atomic_load(&s->submitted) - atomic_load(&s->completed) >= HOST_STREAM_DEPTH) {
        if (s->err != MSCCLPP_OK) /* left for the sync to report too */
            return ERR(s->err,
                       "%s: the stream's queue is full (%d tasks) behind a task that "
                       "failed: %s",
                       who, HOST_STREAM_DEPTH, s->errmsg);
        uint64_t now = host_now_ns(), done = atomic_load(&s->completed);
        if (done != seen) {
            seen = done;
            since = now;
        } else if (now - since >= timeout) {
            return ERR(MSCCLPP_ERR_TIMEOUT,
                       "%s: the stream's queue is full (%d tasks) and none finished in %.1f s",
                       who, HOST_STREAM_DEPTH, (double)timeout / 1e9);
        }
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        uint64_t rel = timeout - (now - since);
        if (rel > 100000000u) rel = 100000000u; /* re-check progress at least every 100 ms */
        ts.tv_sec += (time_t)(rel / 1000000000u);
        ts.tv_nsec += (long)(rel % 1000000000u);
        if (ts.tv_nsec >= 1000000000L) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000L;
        }
        s->space_waiters++;
        pthread_cond_timedwait(&s->space_cv, &s->lock, &ts);
        s->space_waiters--;
        s->space_wake_sent = false;
    }
    return MSCCLPP_OK;
}

/* Append a copy of `tmpl` (and its args) to the capture of `s`. Lock held. */
static mscclpp_result_t capture_append(hal_stream_t s, const host_task_t *tmpl, const void *args,
                                       size_t args_bytes, const char *who)
{
    host_task_t *t = calloc(1, sizeof *t);
    if (!t) return ERR(MSCCLPP_ERR_NO_MEMORY, "%s: out of memory recording a capture", who);
    *t = *tmpl;
    t->next = NULL;
    t->args = NULL;
    t->args_cap = 0;
    if (args_bytes) {
        if (!(t->args = malloc(args_bytes))) {
            free(t);
            return ERR(MSCCLPP_ERR_NO_MEMORY, "%s: out of memory recording a capture", who);
        }
        memcpy(t->args, args, args_bytes);
        t->args_cap = args_bytes;
    }
    if (s->cap_tail) s->cap_tail->next = t;
    else s->cap_head = t;
    s->cap_tail = t;
    s->cap_n++;
    return MSCCLPP_OK;
}

static void task_list_free(host_task_t *t)
{
    for (host_task_t *next; t; t = next) {
        next = t->next;
        free(t->args);
        free(t);
    }
}

/*
 * Queue a task described by `tmpl` (args copied), or record it while the stream captures. An
 * event record counts as pending on its event only once queued for real (a recorded one is
 * counted by each graph launch instead).
 */
static mscclpp_result_t submit(hal_stream_t s, const host_task_t *tmpl, const void *args,
                               size_t args_bytes, const char *who)
{
    mscclpp_result_t res = MSCCLPP_OK;
    pthread_mutex_lock(&s->lock);
    if (s->capturing) {
        res = capture_append(s, tmpl, args, args_bytes, who);
        pthread_mutex_unlock(&s->lock);
        return res;
    }
    CHECK_GOTO(wait_for_space(s, who), res, unlock);
    if (!s->started) {
        int err = host_thread_create(&s->worker, stream_main, s);
        if (err) {
            errno = err;
            res = ERR_SYS("%s: cannot start the stream's worker thread: %m", who);
            goto unlock;
        }
        pthread_setname_np(s->worker, "mscclpp-stream");
        s->started = true;
    }
    host_task_t *t = task_get(s, args_bytes);
    if (!t) {
        res = ERR(MSCCLPP_ERR_NO_MEMORY, "%s: out of memory for a stream task", who);
        goto unlock;
    }
    void *buf = t->args;
    size_t cap = t->args_cap;
    *t = *tmpl;
    t->next = NULL;
    t->args = buf;
    t->args_cap = cap;
    if (args_bytes) memcpy(t->args, args, args_bytes);
    if (t->kind == TASK_EVENT) {
        atomic_fetch_add(&t->event->pending, 1);
        atomic_fetch_add(&t->event->records, 1);
        atomic_store(&t->event->recorded, true);
    }
    if (s->tail) s->tail->next = t;
    else s->head = t;
    s->tail = t;
    uint64_t depth = atomic_fetch_add(&s->submitted, 1) + 1 - atomic_load(&s->completed);
    if (depth > s->max_depth) s->max_depth = depth;
    if (s->worker_sleeping) pthread_cond_signal(&s->work_cv);
unlock:
    pthread_mutex_unlock(&s->lock);
    return res;
}

/* Refuse `what` on a capturing stream and invalidate the capture, as CUDA does. */
static mscclpp_result_t capture_refuse(hal_stream_t s, const char *what)
{
    pthread_mutex_lock(&s->lock);
    bool cap = s->capturing;
    if (cap && !s->capture_invalid) {
        s->capture_invalid = true;
        snprintf(s->capture_why, sizeof s->capture_why, "%s during the capture", what);
    }
    pthread_mutex_unlock(&s->lock);
    if (!cap) return MSCCLPP_OK;
    return ERR(MSCCLPP_ERR_INVALID_ARG,
               "%s: operation not permitted when the stream is capturing (the capture is "
               "invalidated)",
               what);
}

/* Wait for what is queued on `s` (none of it is a recording). Not bounded by
 * MSCCLPP_TIMEOUT: a kernel may run long and bounds its own waits. */
static mscclpp_result_t stream_drain(hal_stream_t s)
{
    uint64_t target = atomic_load(&s->submitted);
    host_wait_t w;
    handoff_wait_init(&w);
    while (atomic_load(&s->completed) < target && !host_wait_idle(&w)) host_wait_pause(&w);
    pthread_mutex_lock(&s->lock);
    s->sync_waiters++;
    while (atomic_load(&s->completed) < target) {
        if (target < s->sync_target) s->sync_target = target;
        pthread_cond_wait(&s->done_cv, &s->lock);
    }
    s->sync_waiters--;
    /* drained (unless another thread queues meanwhile): give back what a burst allocated */
    while (s->n_free > TASK_KEEP) {
        host_task_t *t = s->free_tasks;
        s->free_tasks = t->next;
        s->n_free--;
        s->allocated--;
        free(t->args);
        free(t);
    }
    mscclpp_result_t res = s->err;
    char msg[sizeof s->errmsg];
    memcpy(msg, s->errmsg, sizeof msg);
    s->err = MSCCLPP_OK;
    s->errmsg[0] = '\0';
    pthread_mutex_unlock(&s->lock);
    /* The message was recorded in the worker thread: record it again for this caller. */
    if (res != MSCCLPP_OK) return core_error_quiet(res, "%s", msg);
    return MSCCLPP_OK;
}

mscclpp_result_t host_stream_sync(hal_stream_t s)
{
    CHECK_ARG(s != NULL);
    CHECK(capture_refuse(s, "stream_sync"));
    return stream_drain(s);
}

mscclpp_result_t host_stream_destroy(hal_stream_t s)
{
    CHECK_ARG(s != NULL);
    /* a capture in progress ends with the stream, its recording unused */
    pthread_mutex_lock(&s->lock);
    s->capturing = false;
    task_list_free(s->cap_head);
    s->cap_head = s->cap_tail = NULL;
    s->cap_n = 0;
    pthread_mutex_unlock(&s->lock);
    mscclpp_result_t res = stream_drain(s);
    pthread_mutex_lock(&s->lock);
    s->stop = true;
    bool started = s->started;
    pthread_cond_signal(&s->work_cv);
    pthread_mutex_unlock(&s->lock);
    if (started) pthread_join(s->worker, NULL);
    pool_destroy(&s->pool);
    for (host_task_t *t = s->free_tasks, *next; t; t = next) {
        next = t->next;
        free(t->args);
        free(t);
    }
    pthread_cond_destroy(&s->space_cv);
    pthread_cond_destroy(&s->done_cv);
    pthread_cond_destroy(&s->work_cv);
    pthread_mutex_destroy(&s->lock);
    free(s);
    return res;
}

mscclpp_result_t host_stream_capturing(hal_stream_t s, bool *capturing)
{
    CHECK_ARG(capturing != NULL);
    *capturing = false;
    if (!s) return MSCCLPP_OK; /* the synchronous NULL stream never captures */
    pthread_mutex_lock(&s->lock);
    *capturing = s->capturing;
    pthread_mutex_unlock(&s->lock);
    return MSCCLPP_OK;
}

mscclpp_result_t host_stream_begin_capture(hal_stream_t s)
{
    if (!s) return ERR_ARG("stream_begin_capture: the NULL stream cannot be captured");
    mscclpp_result_t res = MSCCLPP_OK;
    pthread_mutex_lock(&s->lock);
    if (s->capturing) {
        res = ERR_ARG("stream_begin_capture: the stream is capturing already");
    } else {
        /* work queued before keeps running; only what is queued from now on is recorded */
        s->capturing = true;
        s->capture_invalid = false;
        s->capture_why[0] = '\0';
    }
    pthread_mutex_unlock(&s->lock);
    return res;
}

mscclpp_result_t host_stream_end_capture(hal_stream_t s, hal_graph_t *graph)
{
    CHECK_ARG(graph != NULL);
    *graph = NULL;
    if (!s) return ERR_ARG("stream_end_capture: the NULL stream cannot be captured");
    pthread_mutex_lock(&s->lock);
    bool was = s->capturing, invalid = s->capture_invalid;
    char why[sizeof s->capture_why];
    memcpy(why, s->capture_why, sizeof why);
    host_task_t *head = s->cap_head;
    size_t n = s->cap_n;
    s->capturing = false;
    s->capture_invalid = false;
    s->cap_head = s->cap_tail = NULL;
    s->cap_n = 0;
    pthread_mutex_unlock(&s->lock);
    if (!was) return ERR_ARG("stream_end_capture: the stream is not capturing");
    struct hal_graph *g = NULL;
    mscclpp_result_t res = MSCCLPP_OK;
    if (invalid) {
        res = ERR(MSCCLPP_ERR_INVALID_ARG, "stream_end_capture: the capture was invalidated (%s)",
                  why);
        goto out;
    }
    if (!(g = calloc(1, sizeof *g)) || (n && !(g->tasks = calloc(n, sizeof *g->tasks)))) {
        free(g);
        res = ERR(MSCCLPP_ERR_NO_MEMORY, "stream_end_capture: out of memory");
        goto out;
    }
    /* the tasks move into an array: a launch walks it in order */
    for (host_task_t *t = head, *next; t; t = next) {
        next = t->next;
        g->tasks[g->n] = *t;
        g->tasks[g->n++].next = NULL;
        free(t);
    }
    head = NULL;
    *graph = g;
out:
    task_list_free(head);
    return res;
}

mscclpp_result_t host_graph_launch(hal_graph_t graph, hal_stream_t s)
{
    CHECK_ARG(graph != NULL);
    /* each task as if queued now: on a stream, in order (recorded again into a capture of
     * `s`); on the NULL stream, run here one after the other */
    for (size_t i = 0; i < graph->n; i++) {
        const host_task_t *t = &graph->tasks[i];
        mscclpp_result_t r = MSCCLPP_OK;
        switch (t->kind) {
        case TASK_COPY: r = host_memcpy_async(t->dst, t->src, t->bytes, s); break;
        case TASK_SET: r = host_memset_async(t->dst, t->value, t->bytes, s); break;
        case TASK_EVENT: r = host_event_record(t->event, s); break;
        case TASK_HOSTFN: r = host_launch_host_func(t->fn, t->dst, s); break;
        case TASK_SCALE: r = host_launch_scale(t->args, t->bytes, s); break;
        case TASK_WAIT_EVENT: r = host_stream_wait_event(s, t->event); break;
        case TASK_LAUNCH:
            r = host_launch(t->bytes ? t->args : NULL, t->bytes, t->nblocks, 1, s);
            break;
        }
        if (r != MSCCLPP_OK) return r;
    }
    return MSCCLPP_OK;
}

mscclpp_result_t host_graph_destroy(hal_graph_t graph)
{
    if (!graph) return MSCCLPP_OK;
    /* launches queued copies of what they run: nothing queued points into the graph */
    for (size_t i = 0; i < graph->n; i++) {
        free(graph->tasks[i].args);
        /* a recorded stream wait holds a reference on its event, as a queued one does */
        if (graph->tasks[i].kind == TASK_WAIT_EVENT) event_unref(graph->tasks[i].event);
    }
    free(graph->tasks);
    free(graph);
    return MSCCLPP_OK;
}

void host_stream_depth_stats(hal_stream_t s, uint64_t *max_depth, uint64_t *allocated)
{
    pthread_mutex_lock(&s->lock);
    if (max_depth) *max_depth = s->max_depth;
    if (allocated) *allocated = s->allocated;
    pthread_mutex_unlock(&s->lock);
}

uint64_t host_stream_sync_wakes(hal_stream_t s)
{
    pthread_mutex_lock(&s->lock);
    uint64_t n = s->sync_wakes;
    pthread_mutex_unlock(&s->lock);
    return n;
}

uint64_t host_stream_space_wakes(hal_stream_t s)
{
    pthread_mutex_lock(&s->lock);
    uint64_t n = s->space_wakes;
    pthread_mutex_unlock(&s->lock);
    return n;
}

int host_stream_pool_threads(hal_stream_t s)
{
    if (s) return s->pool.nslots;
    pthread_mutex_lock(&sync_pool_lock);
    int n = sync_pool.nslots;
    pthread_mutex_unlock(&sync_pool_lock);
    return n;
}

mscclpp_result_t host_memcpy_async(void *dst, const void *src, size_t bytes, hal_stream_t s)
{
    CHECK_ARG(bytes == 0 || (dst != NULL && src != NULL));
    if (bytes) CHECK(host_check_copy("memcpy_async", dst, src, s));
    if (!s) return host_memcpy_sync(dst, src, bytes);
    if (bytes == 0) return MSCCLPP_OK;
    host_task_t t = {.kind = TASK_COPY, .dst = dst, .src = src, .bytes = bytes};
    return submit(s, &t, NULL, 0, "memcpy_async");
}

mscclpp_result_t host_memset_async(void *dst, int value, size_t bytes, hal_stream_t s)
{
    CHECK_ARG(bytes == 0 || dst != NULL);
    CHECK(host_check_stream("memset_async", s));
    if (!s) return host_memset_sync(dst, value, bytes);
    if (bytes == 0) return MSCCLPP_OK;
    host_task_t t = {.kind = TASK_SET, .dst = dst, .value = value, .bytes = bytes};
    return submit(s, &t, NULL, 0, "memset_async");
}

mscclpp_result_t host_event_record(hal_event_t e, hal_stream_t s)
{
    CHECK_ARG(e != NULL);
    CHECK(host_check_stream("event_record", s));
    if (!s) {
        pthread_mutex_lock(&e->lock);
        atomic_store(&e->ts_ns, host_now_ns());
        atomic_store(&e->recorded, true);
        pthread_mutex_unlock(&e->lock);
        return MSCCLPP_OK;
    }
    host_task_t t = {.kind = TASK_EVENT, .event = e};
    return submit(s, &t, NULL, 0, "event_record");
}

mscclpp_result_t host_launch(const void *args, size_t args_bytes, int nblocks, int nthreads,
                             hal_stream_t s)
{
    CHECK_ARG(args != NULL || args_bytes == 0);
    CHECK_ARG(nblocks >= 1 && nblocks <= HOST_MAX_BLOCKS);
    CHECK_ARG(nthreads >= 1); /* ignored: one host thread runs a whole block */
    CHECK(host_check_stream("launch", s));
    if (!s) {
        pthread_mutex_lock(&sync_pool_lock);
        mscclpp_result_t res = pool_run(&sync_pool, args, nblocks);
        pthread_mutex_unlock(&sync_pool_lock);
        return res;
    }
    host_task_t t = {.kind = TASK_LAUNCH, .nblocks = nblocks, .bytes = args_bytes};
    return submit(s, &t, args, args_bytes, "launch");
}

mscclpp_result_t host_launch_host_func(hal_host_fn_t fn, void *arg, hal_stream_t s)
{
    CHECK_ARG(fn != NULL);
    CHECK(host_check_stream("launch_host_func", s));
    if (!s) {
        fn(arg);
        return MSCCLPP_OK;
    }
    host_task_t t = {.kind = TASK_HOSTFN, .fn = fn, .dst = arg};
    return submit(s, &t, NULL, 0, "launch_host_func");
}

mscclpp_result_t host_stream_wait_event(hal_stream_t s, hal_event_t e)
{
    CHECK_ARG(e != NULL);
    CHECK(host_check_stream("stream_wait_event", s));
    uint64_t target = atomic_load(&e->records); /* the records queued so far */
    if (!s) {
        event_wait_reached(e, target);
        return MSCCLPP_OK;
    }
    if (atomic_load(&e->reached) >= target) return MSCCLPP_OK;
    host_task_t t = {.kind = TASK_WAIT_EVENT, .event = e, .bytes = target};
    atomic_fetch_add(&e->refs, 1);
    mscclpp_result_t res = submit(s, &t, NULL, 0, "stream_wait_event");
    if (res != MSCCLPP_OK) event_unref(e);
    return res;
}

mscclpp_result_t host_launch_scale(const void *args, size_t args_bytes, hal_stream_t s)
{
    CHECK_ARG(args != NULL && args_bytes > 0);
    CHECK(host_check_stream("launch_scale", s));
    if (!s) {
        kern_host_scale(args);
        return MSCCLPP_OK;
    }
    host_task_t t = {.kind = TASK_SCALE, .bytes = args_bytes};
    return submit(s, &t, args, args_bytes, "launch_scale");
}
