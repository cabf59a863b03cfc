/*
 * libmscclpp_nccl: communicators (init, split, destroy), versions, memory and
 * reduction operators of the NCCL API.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "executor/exec_forget.h"
#include "nccl/nccl_internal.h"

_Static_assert(sizeof(ncclUniqueId) == sizeof(mscclpp_unique_id_t),
               "ncclUniqueId must carry a libmscclpp unique id unchanged");

/* ---- errors and versions ------------------------------------------------------------------ */

ncclResult_t ncclGetVersion(int *version)
{
    if (!version) return shim_error(ncclInvalidArgument, "ncclGetVersion: version is NULL");
    *version = NCCL_VERSION_CODE; /* the API level this library implements */
    return ncclSuccess;
}

/* ---- memory ------------------------------------------------------------------------------- */

static pthread_mutex_t mem_lock = PTHREAD_MUTEX_INITIALIZER;
static struct {
    void *ptr;
    size_t bytes;
    /* where its allocation starts, if the peers may map it (mscclpp_executor_usable), asked
     * once: a zero-copy call on it needs no allocation lookup (issue 19 item 5); the entry,
     * and the answer with it, goes at ncclMemFree */
    bool zc_known;
    void *zc_base;
    uint64_t serial; /* which ncclMemAlloc made it: an entry made later at the same address has
                      * another, so an answer asked about a freed one is never kept in it */
} *mem_table;
static size_t mem_count, mem_cap;
static uint64_t mem_serial;

bool shim_is_our_memory(const void *ptr)
{
    bool found = false;
    pthread_mutex_lock(&mem_lock);
    for (size_t i = 0; i < mem_count && !found; i++)
        found = (const char *)ptr >= (const char *)mem_table[i].ptr &&
                (const char *)ptr < (const char *)mem_table[i].ptr + mem_table[i].bytes;
    pthread_mutex_unlock(&mem_lock);
    return found;
}

ncclResult_t ncclMemAlloc(void **ptr, size_t size)
{
    if (!ptr) return shim_error(ncclInvalidArgument, "ncclMemAlloc: ptr is NULL");
    *ptr = NULL;
    if (size == 0) return ncclSuccess; /* as cudaMalloc(0): nothing to free later */
    pthread_mutex_lock(&mem_lock);
    if (mem_count == mem_cap) {
        size_t cap = mem_cap ? 2 * mem_cap : 16;
        void *t = realloc(mem_table, cap * sizeof *mem_table);
        if (!t) {
            pthread_mutex_unlock(&mem_lock);
            return shim_error(ncclSystemError, "ncclMemAlloc: out of host memory for the table");
        }
        mem_table = t;
        mem_cap = cap;
    }
    void *p = NULL;
    mscclpp_result_t r = mscclpp_malloc(size, &p);
    if (r == MSCCLPP_OK) {
        mem_table[mem_count].ptr = p;
        mem_table[mem_count].bytes = size;
        mem_table[mem_count].zc_known = false;
        mem_table[mem_count].zc_base = NULL;
        mem_table[mem_count].serial = ++mem_serial;
        mem_count++;
    }
    pthread_mutex_unlock(&mem_lock);
    if (r != MSCCLPP_OK) return shim_from_mscclpp(r, "ncclMemAlloc");
    *ptr = p;
    return ncclSuccess;
}

/* The live communicators, which ncclMemFree tells that an allocation goes. */
static pthread_mutex_t live_lock = PTHREAD_MUTEX_INITIALIZER;
static ncclComm_t *live;
static size_t live_count, live_cap;

static bool live_add(ncclComm_t c)
{
    pthread_mutex_lock(&live_lock);
    bool ok = true;
    if (live_count == live_cap) {
        size_t cap = live_cap ? 2 * live_cap : 8;
        ncclComm_t *t = realloc(live, cap * sizeof *t);
        if (t) {
            live = t;
            live_cap = cap;
        }
        ok = t != NULL;
    }
    if (ok) live[live_count++] = c;
    pthread_mutex_unlock(&live_lock);
    return ok;
}

static void live_remove(ncclComm_t c)
{
    pthread_mutex_lock(&live_lock);
    for (size_t i = 0; i < live_count; i++)
        if (live[i] == c) {
            live[i] = live[--live_count];
            break;
        }
    pthread_mutex_unlock(&live_lock);
}

bool shim_sole_comm(void)
{
    pthread_mutex_lock(&live_lock);
    bool one = live_count == 1;
    pthread_mutex_unlock(&live_lock);
    return one;
}

/* Mark an allocation (its base) stale in c: it is being freed or deregistered. */
static void zc_mark(ncclComm_t c, const void *base)
{
    if (!base) return;
    pthread_mutex_lock(&c->lock);
    for (int i = 0; i < c->nzc; i++)
        if (c->zc[i].base == base) c->zc[i].stale = true;
    pthread_mutex_unlock(&c->lock);
}

/* [p, p + bytes) lies inside [a, a + size) */
static bool inside(const void *p, size_t bytes, const void *a, size_t size)
{
    const char *x = p, *y = a;
    return x >= y && (size_t)(x - y) <= size && bytes <= size - (size_t)(x - y);
}

static bool in_mem_table(const void *p, size_t bytes)
{
    bool known = false;
    pthread_mutex_lock(&mem_lock);
    for (size_t i = 0; i < mem_count && !known; i++)
        known = inside(p, bytes, mem_table[i].ptr, mem_table[i].bytes);
    pthread_mutex_unlock(&mem_lock);
    return known;
}

/*
 * Memory from ncclMemAlloc holding [p, p + bytes): true, with *base its allocation's start when
 * the peers may map it (else NULL). The answer is the allocation's, so it is asked once per
 * entry (for the whole entry: a part of it is usable exactly when all of it is, one allocation
 * holding it) and kept in the entry until ncclMemFree removes it.
 */
static bool mem_table_base(ncclComm_t c, const void *p, size_t bytes, void **base)
{
    void *ptr = NULL;
    size_t size = 0;
    uint64_t serial = 0;
    bool found = false;
    pthread_mutex_lock(&mem_lock);
    for (size_t i = 0; i < mem_count && !found; i++) {
        if (!inside(p, bytes, mem_table[i].ptr, mem_table[i].bytes)) continue;
        found = true;
        ptr = mem_table[i].ptr;
        size = mem_table[i].bytes;
        serial = mem_table[i].serial;
        if (mem_table[i].zc_known) {
            *base = mem_table[i].zc_base;
            pthread_mutex_unlock(&mem_lock);
            return true;
        }
    }
    pthread_mutex_unlock(&mem_lock);
    if (!found) return false;
    /* asked without the lock (the executor may take its own); kept only while the entry is
     * still the one asked about */
    void *b = NULL;
    if (mscclpp_executor_usable(c->exec, ptr, size, &b) != MSCCLPP_OK) {
        *base = NULL; /* not kept: asked again next time */
        return true;
    }
    pthread_mutex_lock(&mem_lock);
    for (size_t i = 0; i < mem_count; i++)
        if (mem_table[i].serial == serial) {
            mem_table[i].zc_known = true;
            mem_table[i].zc_base = b;
        }
    pthread_mutex_unlock(&mem_lock);
    *base = b;
    return true;
}

void *shim_zc_base(ncclComm_t c, const void *p, size_t bytes)
{
    if (!c->zero_copy || !p || !bytes) return NULL;
    void *base = NULL;
    if (mem_table_base(c, p, bytes, &base)) return base;
    pthread_mutex_lock(&c->lock);
    for (struct shim_reg *r = c->regs; r && !base; r = r->next)
        if (r->zc_base && inside(p, bytes, r->buff, r->size)) base = r->zc_base;
    pthread_mutex_unlock(&c->lock);
    return base;
}

ncclResult_t shim_zc_note(ncclComm_t c, void *base, const char *who)
{
    ncclResult_t res = ncclSuccess;
    pthread_mutex_lock(&c->lock);
    int i = 0;
    while (i < c->nzc && c->zc[i].base != base) i++;
    if (i == c->nzc) {
        if (c->nzc == c->zc_cap) {
            int cap = c->zc_cap ? 2 * c->zc_cap : 8;
            void *t = realloc(c->zc, (size_t)cap * sizeof *c->zc);
            if (t) {
                c->zc = t;
                c->zc_cap = cap;
            }
        }
        if (c->nzc < c->zc_cap) {
            c->zc[c->nzc].base = base;
            c->zc[c->nzc].stale = false;
            c->nzc++;
        } else {
            res = ncclSystemError;
        }
    }
    pthread_mutex_unlock(&c->lock);
    if (res != ncclSuccess) return shim_error(res, "%s: out of memory (rank %d)", who, c->rank);
    return ncclSuccess;
}

ncclResult_t shim_zc_forget_stale(ncclComm_t c, const char *who)
{
    for (;;) {
        void *base = NULL;
        pthread_mutex_lock(&c->lock);
        for (int i = 0; i < c->nzc && !base; i++)
            if (c->zc[i].stale) {
                base = c->zc[i].base;
                c->zc[i] = c->zc[--c->nzc];
            }
        pthread_mutex_unlock(&c->lock);
        if (!base) return ncclSuccess;
        int dropped = 0;
        mscclpp_result_t r = mscclpp_executor_forget(c->exec, base, &dropped);
        if (r != MSCCLPP_OK) return shim_from_mscclpp(r, who);
        shim_info("rank %d: dropped %d executor contexts of freed or deregistered memory %p",
                  c->rank, dropped, base);
    }
}

ncclResult_t ncclMemFree(void *ptr)
{
    if (!ptr) return ncclSuccess;
    pthread_mutex_lock(&mem_lock);
    size_t i = 0;
    while (i < mem_count && mem_table[i].ptr != ptr) i++;
    bool found = i < mem_count;
    if (found) mem_table[i] = mem_table[--mem_count];
    pthread_mutex_unlock(&mem_lock);
    if (!found)
        return shim_error(ncclInvalidArgument,
                          "ncclMemFree: %p was not returned by ncclMemAlloc (or was freed)", ptr);
    /* a new allocation may start here: contexts on this one must not be found by it */
    pthread_mutex_lock(&live_lock);
    for (size_t k = 0; k < live_count; k++) {
        void *base = NULL;
        if (mscclpp_executor_usable(live[k]->exec, ptr, 1, &base) == MSCCLPP_OK)
            zc_mark(live[k], base);
    }
    pthread_mutex_unlock(&live_lock);
    mscclpp_result_t r = mscclpp_free(ptr);
    return r == MSCCLPP_OK ? ncclSuccess : shim_from_mscclpp(r, "ncclMemFree");
}

/* ---- communicators ------------------------------------------------------------------------ */

ncclResult_t ncclGetUniqueId(ncclUniqueId *uniqueId)
{
    if (!uniqueId) return shim_error(ncclInvalidArgument, "ncclGetUniqueId: uniqueId is NULL");
    mscclpp_unique_id_t id;
    mscclpp_result_t r = mscclpp_get_unique_id(&id);
    if (r != MSCCLPP_OK) return shim_from_mscclpp(r, "ncclGetUniqueId");
    memcpy(uniqueId, &id, sizeof id);
    return ncclSuccess;
}

static int name_cmp(const struct dirent **a, const struct dirent **b)
{
    return strcmp((*a)->d_name, (*b)->d_name);
}

static int json_filter(const struct dirent *d)
{
    size_t n = strlen(d->d_name);
    return n > 5 && strcmp(d->d_name + n - 5, ".json") == 0;
}

/*
 * DSL plans of MSCCLPP_NCCL_PLAN_DIR (a ':' list of directories) go into the registry with the
 * tag "source=nccl-dsl", which the collectives ask for before anything else. A plan that does
 * not load is skipped with an INFO line: one bad file must not take the job down.
 */
static ncclResult_t load_dsl_plans(ncclComm_t c)
{
    const char *env = shim_config("MSCCLPP_NCCL_PLAN_DIR");
    if (!*env) return ncclSuccess;
    char *dirs = strdup(env);
    if (!dirs) return shim_error(ncclSystemError, "ncclCommInitRank: out of memory");
    ncclResult_t res = ncclSuccess;
    char *save = NULL;
    for (char *dir = strtok_r(dirs, ":", &save); dir && res == ncclSuccess;
         dir = strtok_r(NULL, ":", &save)) {
        struct dirent **names = NULL;
        int n = scandir(dir, &names, json_filter, name_cmp);
        if (n < 0) {
            shim_info("rank %d: MSCCLPP_NCCL_PLAN_DIR: cannot read %s; skipped", c->rank, dir);
            continue;
        }
        for (int i = 0; i < n; i++) {
            char path[4096];
            snprintf(path, sizeof path, "%s/%s", dir, names[i]->d_name);
            mscclpp_plan_t *p = NULL;
            if (mscclpp_plan_load_file(path, &p) != MSCCLPP_OK) {
                shim_info("rank %d: DSL plan %s skipped: %s", c->rank, path, mscclpp_last_error());
            } else if (mscclpp_plan_world_size(p) != c->nranks) {
                mscclpp_plan_destroy(p); /* written for another world size: never selected */
            } else {
                mscclpp_plan_t **t = realloc(c->plans, (size_t)(c->nplans + 1) * sizeof *t);
                mscclpp_result_t r = t ? mscclpp_executor_register_plan(c->exec, p, 0,
                                                                        "source=nccl-dsl")
                                       : MSCCLPP_ERR_NO_MEMORY;
                if (t) c->plans = t;
                if (r != MSCCLPP_OK) {
                    mscclpp_plan_destroy(p);
                    res = t ? shim_from_mscclpp(r, "ncclCommInitRank: registering a DSL plan")
                            : shim_error(ncclSystemError, "ncclCommInitRank: out of memory");
                } else {
                    c->plans[c->nplans++] = p;
                    shim_info("rank %d: DSL plan '%s' (%s) from %s", c->rank,
                              mscclpp_plan_name(p), mscclpp_plan_collective(p), path);
                }
            }
            free(names[i]);
        }
        free(names);
    }
    free(dirs);
    return res;
}

/* ---- lifetime: calls in, destroy and abort wait for them (issue 22 item 4) ------------- */

ncclResult_t shim_comm_enter(ncclComm_t comm, const char *who)
{
    ncclResult_t res = shim_check_comm(comm, who);
    if (res != ncclSuccess) return res;
    pthread_mutex_lock(&comm->life);
    bool closing = comm->closing;
    if (!closing) comm->users++;
    pthread_mutex_unlock(&comm->life);
    if (closing)
        return shim_error(ncclInvalidUsage,
                          "%s: comm %p (rank %d) is being destroyed or aborted "
                          "by another thread",
                          who, (void *)comm, comm->rank);
    return ncclSuccess;
}

void shim_comm_leave(ncclComm_t comm)
{
    pthread_mutex_lock(&comm->life);
    if (--comm->users == 0) pthread_cond_broadcast(&comm->idle);
    pthread_mutex_unlock(&comm->life);
}

/*
 * Start destroying c: refuse new calls, and with `interrupt` make the calls inside return
 * (ncclCommAbort). Then wait until they left: each of their waits is bounded by
 * MSCCLPP_TIMEOUT, so a destroy that waits for a call whose peer joins late sees it finish,
 * and an abort sees its calls give up within milliseconds. If calls are still inside after
 * MSCCLPP_TIMEOUT + 10 s (a bug), the communicator is left allocated rather than freed
 * under them.
 */
static ncclResult_t close_comm(ncclComm_t c, bool interrupt, const char *who)
{
    pthread_mutex_lock(&c->life);
    bool again = c->closing;
    c->closing = true;
    pthread_mutex_unlock(&c->life);
    if (again)
        return shim_error(ncclInvalidUsage,
                          "%s: comm %p (rank %d) is already being destroyed or "
                          "aborted by another thread",
                          who, (void *)c, c->rank);
    if (interrupt) {
        mscclpp_comm_abort(c->comm);
        const shim_real_t *rl = c->real ? shim_real() : NULL;
        if (rl && rl->CommAbort) rl->CommAbort(c->real); /* its calls return too */
    }
    struct timespec until;
    clock_gettime(CLOCK_MONOTONIC, &until);
    uint64_t ns = mscclpp_timeout_ns() + 10000000000ull;
    until.tv_sec += (time_t)(ns / 1000000000ull);
    until.tv_nsec += (long)(ns % 1000000000ull);
    if (until.tv_nsec >= 1000000000L) {
        until.tv_sec++;
        until.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&c->life);
    int rc = 0;
    while (c->users > 0 && rc != ETIMEDOUT) rc = pthread_cond_timedwait(&c->idle, &c->life, &until);
    int left = c->users;
    pthread_mutex_unlock(&c->life);
    if (left > 0)
        return shim_error(ncclInternalError,
                          "%s: %d calls on comm %p (rank %d) still run %.0f s "
                          "after it started; the communicator is not freed",
                          who, left, (void *)c, c->rank, (double)ns / 1e9);
    return ncclSuccess;
}

static void free_comm(ncclComm_t c)
{
    if (!c) return;
    live_remove(c);
    c->magic = 0;
    while (c->regs) {
        struct shim_reg *r = c->regs;
        c->regs = r->next;
        r->magic = 0;
        free(r);
    }
    free(c->zc);
    for (int i = 0; i < c->n_kept; i++) mscclpp_free(c->kept[i]);
    free(c->kept);
    if (c->stream) mscclpp_stream_destroy(c->stream);
    mscclpp_executor_destroy(c->p2p_exec);
    for (int i = 0; c->p2p_plans && i < c->nranks * c->nranks; i++)
        mscclpp_plan_destroy(c->p2p_plans[i]);
    free(c->p2p_plans);
    mscclpp_executor_destroy(c->exec);
    for (int i = 0; i < c->nplans; i++) mscclpp_plan_destroy(c->plans[i]);
    free(c->plans);
    mscclpp_free(c->stage_in);
    mscclpp_free(c->stage_out);
    for (int i = 0; i < c->nstreams; i++) mscclpp_stream_destroy(c->streams[i].stream);
    mscclpp_comm_destroy(c->comm);
    pthread_mutex_destroy(&c->lock);
    pthread_cond_destroy(&c->idle);
    pthread_mutex_destroy(&c->life);
    free(c);
}

/* The CUDA device of the calling thread, when the program has the CUDA runtime loaded. */
static int current_device(void)
{
    if (strcmp(mscclpp_backend_name(), "cuda") != 0) return 0;
    int (*get)(int *) = NULL;
    *(void **)&get = dlsym(RTLD_DEFAULT, "cudaGetDevice");
    int dev = 0;
    if (!get || get(&dev) != 0) dev = 0;
    return dev;
}

static ncclResult_t init_rank(ncclComm_t *out, int nranks, const ncclUniqueId *id, int rank,
                              int dev, const char *who)
{
    if (!out) return shim_error(ncclInvalidArgument, "%s: comm is NULL", who);
    *out = NULL;
    if (nranks < 1)
        return shim_error(ncclInvalidArgument, "%s: nranks %d must be at least 1", who, nranks);
    if (rank < 0 || rank >= nranks)
        return shim_error(ncclInvalidArgument, "%s: rank %d is outside [0, %d)", who, rank,
                          nranks);
    ncclComm_t c = calloc(1, sizeof *c);
    if (!c) return shim_error(ncclSystemError, "%s: out of memory (rank %d)", who, rank);
    pthread_mutex_init(&c->lock, NULL);
    pthread_mutex_init(&c->life, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&c->idle, &ca);
    pthread_condattr_destroy(&ca);
    c->rank = rank;
    c->nranks = nranks;
    c->cuda_dev = dev;
    c->test_leave_ms = (unsigned)strtoul(shim_config("MSCCLPP_TEST_NCCL_LEAVE_MS"), NULL, 10);
    mscclpp_unique_id_t mid;
    memcpy(&mid, id, sizeof mid);
    ncclResult_t res = ncclSuccess;
    mscclpp_result_t r = mscclpp_comm_init_rank(&mid, rank, nranks, &c->comm);
    if (r == MSCCLPP_OK) r = mscclpp_executor_create(c->comm, &c->exec);
    if (r == MSCCLPP_OK) r = mscclpp_stream_create(&c->stream);
    if (r != MSCCLPP_OK) {
        char what[96];
        snprintf(what, sizeof what, "%s (rank %d of %d)", who, rank, nranks);
        res = shim_from_mscclpp(r, what);
        goto fail;
    }
    c->magic = SHIM_COMM_MAGIC;
    c->zero_copy = strcmp(shim_config("MSCCLPP_NCCL_ZERO_COPY"), "0") != 0;
    if (!live_add(c)) {
        res = shim_error(ncclSystemError, "%s: out of memory (rank %d)", who, rank);
        goto fail;
    }
    if ((res = load_dsl_plans(c)) != ncclSuccess) goto fail;
    if (*shim_config("MSCCLPP_NCCL_LIB_PATH") && (res = shim_real_init(c)) != ncclSuccess)
        goto fail;
    shim_info("rank %d of %d: communicator on the %s backend, %d DSL plans, fallback %s", rank,
              nranks, mscclpp_backend_name(), c->nplans, c->real ? "ready" : "none");
    *out = c;
    return ncclSuccess;
fail:
    free_comm(c);
    return res;
}

ncclResult_t ncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId commId, int rank)
{
    return init_rank(comm, nranks, &commId, rank, current_device(), "ncclCommInitRank");
}

ncclResult_t ncclCommInitRankConfig(ncclComm_t *comm, int nranks, ncclUniqueId commId, int rank,
                                    ncclConfig_t *config)
{
    /* a config not set up with NCCL_CONFIG_INITIALIZER is refused, as NCCL does */
    if (config && (config->magic != 0xcafebeef || config->size < offsetof(ncclConfig_t, blocking)))
        return shim_error(ncclInvalidArgument,
                          "ncclCommInitRankConfig: config was not initialized with "
                          "NCCL_CONFIG_INITIALIZER (magic 0x%x)", config->magic);
    /* every call completes before returning, so a non-blocking config is honoured trivially:
     * nothing is ever ncclInProgress */
    return init_rank(comm, nranks, &commId, rank, current_device(), "ncclCommInitRankConfig");
}

typedef struct {
    ncclComm_t *out;
    ncclUniqueId id;
    int nranks, rank, dev;
    ncclResult_t res;
    char err[1024];
} init_all_arg_t;

static void *init_all_thread(void *p)
{
    init_all_arg_t *a = p;
    a->res = init_rank(a->out, a->nranks, &a->id, a->rank, a->dev, "ncclCommInitAll");
    if (a->res != ncclSuccess) snprintf(a->err, sizeof a->err, "%s", shim_last_error());
    return NULL;
}

ncclResult_t ncclCommInitAll(ncclComm_t *comms, int ndev, const int *devlist)
{
    if (!comms) return shim_error(ncclInvalidArgument, "ncclCommInitAll: comms is NULL");
    if (ndev < 1) return shim_error(ncclInvalidArgument, "ncclCommInitAll: ndev %d < 1", ndev);
    ncclUniqueId id;
    ncclResult_t res = ncclGetUniqueId(&id);
    if (res != ncclSuccess) return res;
    init_all_arg_t *args = calloc((size_t)ndev, sizeof *args);
    pthread_t *th = calloc((size_t)ndev, sizeof *th);
    if (!args || !th) {
        free(args);
        free(th);
        return shim_error(ncclSystemError, "ncclCommInitAll: out of memory");
    }
    /* ranks of one process still join collectively: one thread each */
    int started = 0;
    for (int i = 0; i < ndev; i++) {
        args[i] = (init_all_arg_t){&comms[i], id, ndev, i, devlist ? devlist[i] : i,
                                   ncclSuccess, ""};
        if (pthread_create(&th[i], NULL, init_all_thread, &args[i]) != 0) {
            args[i].res = ncclSystemError;
            snprintf(args[i].err, sizeof args[i].err,
                     "ncclCommInitAll: cannot start a thread for rank %d", i);
            break;
        }
        started++;
    }
    for (int i = 0; i < started; i++) pthread_join(th[i], NULL);
    res = ncclSuccess;
    for (int i = 0; i < ndev && i <= started; i++) {
        if (i < ndev && args[i].res != ncclSuccess && res == ncclSuccess) {
            res = shim_error(args[i].res, "%s", args[i].err);
        }
    }
    if (res != ncclSuccess) {
        for (int i = 0; i < started; i++)
            if (args[i].res == ncclSuccess) free_comm(comms[i]);
        for (int i = 0; i < ndev; i++) comms[i] = NULL;
    }
    free(args);
    free(th);
    return res;
}

static ncclResult_t split_entered(ncclComm_t comm, int color, int key, ncclComm_t *newcomm,
                                  ncclConfig_t *config)
{
    ncclResult_t res = shim_check_comm(comm, "ncclCommSplit");
    if (res != ncclSuccess) return res;
    if (!newcomm) return shim_error(ncclInvalidArgument, "ncclCommSplit: newcomm is NULL");
    *newcomm = NULL;
    if (color < 0 && color != NCCL_SPLIT_NOCOLOR)
        return shim_error(ncclInvalidArgument, "ncclCommSplit: color %d is negative (and not "
                          "NCCL_SPLIT_NOCOLOR)", color);
    if (config && config->magic != 0xcafebeef)
        return shim_error(ncclInvalidArgument, "ncclCommSplit: config was not initialized with "
                          "NCCL_CONFIG_INITIALIZER");
    int n = comm->nranks;
    int *tri = calloc((size_t)n * 3, sizeof *tri);
    unsigned char *ids = calloc((size_t)n, NCCL_UNIQUE_ID_BYTES);
    if (!tri || !ids) {
        res = shim_error(ncclSystemError, "ncclCommSplit: out of memory (rank %d)", comm->rank);
        goto out;
    }
    mscclpp_bootstrap_t *boot = NULL;
    mscclpp_result_t r = mscclpp_comm_bootstrap(comm->comm, &boot);
    int *me = tri + 3 * comm->rank;
    me[0] = color;
    me[1] = key;
    me[2] = comm->rank;
    if (r == MSCCLPP_OK) r = mscclpp_bootstrap_allgather(boot, tri, 3 * sizeof *tri);
    if (r != MSCCLPP_OK) {
        res = shim_from_mscclpp(r, "ncclCommSplit: exchanging colors");
        goto out;
    }
    /* new rank = place in (key, old rank) order among the same color; the first one hosts the
     * new bootstrap and hands its unique id to the others through the old communicator */
    int newrank = 0, newsize = 0, leader = -1, leader_key = 0;
    for (int i = 0; i < n; i++) {
        int *t = tri + 3 * i;
        if (color == NCCL_SPLIT_NOCOLOR || t[0] != color) continue;
        newsize++;
        if (t[1] < key || (t[1] == key && i < comm->rank)) newrank++;
        if (leader < 0 || t[1] < leader_key) {
            leader = i;
            leader_key = t[1];
        }
    }
    if (color != NCCL_SPLIT_NOCOLOR && leader == comm->rank) {
        ncclUniqueId id;
        if ((res = ncclGetUniqueId(&id)) != ncclSuccess) goto out; /* peers time out */
        memcpy(ids + (size_t)comm->rank * NCCL_UNIQUE_ID_BYTES, &id, sizeof id);
    }
    r = mscclpp_bootstrap_allgather(boot, ids, NCCL_UNIQUE_ID_BYTES);
    if (r != MSCCLPP_OK) {
        res = shim_from_mscclpp(r, "ncclCommSplit: exchanging unique ids");
        goto out;
    }
    if (color == NCCL_SPLIT_NOCOLOR) goto out;
    ncclUniqueId id;
    memcpy(&id, ids + (size_t)leader * NCCL_UNIQUE_ID_BYTES, sizeof id);
    res = init_rank(newcomm, newsize, &id, newrank, comm->cuda_dev, "ncclCommSplit");
out:
    free(tri);
    free(ids);
    return res;
}

ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t *newcomm,
                           ncclConfig_t *config)
{
    ncclResult_t res = shim_comm_enter(comm, "ncclCommSplit");
    if (res != ncclSuccess) return res;
    res = split_entered(comm, color, key, newcomm, config);
    shim_comm_leave(comm);
    return res;
}

static ncclResult_t finalize_entered(ncclComm_t comm)
{
    ncclResult_t res = shim_check_comm(comm, "ncclCommFinalize");
    if (res != ncclSuccess) return res;
    /* the work queued on the caller's streams first, then let peers finish reading our
     * buffers before anyone destroys them */
    res = shim_stream_drain(comm, "ncclCommFinalize");
    if (res != ncclSuccess) return res;
    mscclpp_bootstrap_t *boot = NULL;
    mscclpp_result_t r = mscclpp_comm_bootstrap(comm->comm, &boot);
    if (r == MSCCLPP_OK) r = mscclpp_bootstrap_barrier(boot);
    if (r != MSCCLPP_OK) return shim_from_mscclpp(r, "ncclCommFinalize");
    const shim_real_t *rl = comm->real ? shim_real() : NULL;
    if (rl && rl->CommFinalize) return rl->CommFinalize(comm->real);
    return ncclSuccess;
}

ncclResult_t ncclCommFinalize(ncclComm_t comm)
{
    ncclResult_t res = shim_comm_enter(comm, "ncclCommFinalize");
    if (res != ncclSuccess) return res;
    res = finalize_entered(comm);
    shim_comm_leave(comm);
    return res;
}

ncclResult_t ncclCommDestroy(ncclComm_t comm)
{
    if (!comm) return ncclSuccess; /* NCCL accepts NULL here */
    ncclResult_t res = shim_check_comm(comm, "ncclCommDestroy");
    if (res != ncclSuccess) return res;
    /* calls of other threads still inside finish first (NCCL: destroy waits for them) */
    if ((res = close_comm(comm, false, "ncclCommDestroy")) != ncclSuccess) return res;
    /* the work it queued (copies through its staging buffers included) ends first; a failure
     * there is the program's to see through ncclCommGetAsyncError, as in NCCL */
    if (shim_stream_drain(comm, "ncclCommDestroy") != ncclSuccess) shim_clear_error();
    const shim_real_t *rl = comm->real ? shim_real() : NULL;
    if (rl) res = rl->CommDestroy(comm->real);
    free_comm(comm);
    return res;
}

ncclResult_t ncclCommAbort(ncclComm_t comm)
{
    if (!comm) return ncclSuccess;
    ncclResult_t res = shim_check_comm(comm, "ncclCommAbort");
    if (res != ncclSuccess) return res;
    /* no barrier: peers may be gone. Calls of other threads inside the communicator return
     * an error (interrupted), and only then is anything freed. */
    if ((res = close_comm(comm, true, "ncclCommAbort")) != ncclSuccess) return res;
    const shim_real_t *rl = comm->real ? shim_real() : NULL;
    if (rl && !rl->CommAbort) rl->CommDestroy(comm->real);
    free_comm(comm);
    return ncclSuccess;
}

static ncclResult_t async_error_entered(ncclComm_t comm, ncclResult_t *asyncError)
{
    ncclResult_t res = shim_check_comm(comm, "ncclCommGetAsyncError");
    if (res != ncclSuccess) return res;
    if (!asyncError)
        return shim_error(ncclInvalidArgument, "ncclCommGetAsyncError: asyncError is NULL");
    /* work queued on streams reports its failures in memory the executor polls, without
     * waiting for any stream (mscclpp_executor_get_async_error) */
    if (comm->async_error == ncclSuccess) {
        mscclpp_result_t r = MSCCLPP_OK;
        if (mscclpp_executor_get_async_error(comm->exec, &r) == MSCCLPP_OK && r == MSCCLPP_OK &&
            comm->p2p_exec)
            (void)mscclpp_executor_get_async_error(comm->p2p_exec, &r);
        if (r != MSCCLPP_OK) {
            char what[96];
            snprintf(what, sizeof what, "ncclCommGetAsyncError (rank %d)", comm->rank);
            comm->async_error = shim_from_mscclpp(r, what);
        }
    }
    *asyncError = comm->async_error;
    return ncclSuccess;
}

ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t *asyncError)
{
    ncclResult_t res = shim_comm_enter(comm, "ncclCommGetAsyncError");
    if (res != ncclSuccess) return res;
    res = async_error_entered(comm, asyncError);
    shim_comm_leave(comm);
    return res;
}

static ncclResult_t count_entered(const ncclComm_t comm, int *count)
{
    ncclResult_t res = shim_check_comm(comm, "ncclCommCount");
    if (res != ncclSuccess) return res;
    if (!count) return shim_error(ncclInvalidArgument, "ncclCommCount: count is NULL");
    *count = comm->nranks;
    return ncclSuccess;
}

ncclResult_t ncclCommCount(const ncclComm_t comm, int *count)
{
    ncclResult_t res = shim_comm_enter(comm, "ncclCommCount");
    if (res != ncclSuccess) return res;
    res = count_entered(comm, count);
    shim_comm_leave(comm);
    return res;
}

static ncclResult_t cu_device_entered(const ncclComm_t comm, int *device)
{
    ncclResult_t res = shim_check_comm(comm, "ncclCommCuDevice");
    if (res != ncclSuccess) return res;
    if (!device) return shim_error(ncclInvalidArgument, "ncclCommCuDevice: device is NULL");
    *device = comm->cuda_dev;
    return ncclSuccess;
}

ncclResult_t ncclCommCuDevice(const ncclComm_t comm, int *device)
{
    ncclResult_t res = shim_comm_enter(comm, "ncclCommCuDevice");
    if (res != ncclSuccess) return res;
    res = cu_device_entered(comm, device);
    shim_comm_leave(comm);
    return res;
}

static ncclResult_t user_rank_entered(const ncclComm_t comm, int *rank)
{
    ncclResult_t res = shim_check_comm(comm, "ncclCommUserRank");
    if (res != ncclSuccess) return res;
    if (!rank) return shim_error(ncclInvalidArgument, "ncclCommUserRank: rank is NULL");
    *rank = comm->rank;
    return ncclSuccess;
}

ncclResult_t ncclCommUserRank(const ncclComm_t comm, int *rank)
{
    ncclResult_t res = shim_comm_enter(comm, "ncclCommUserRank");
    if (res != ncclSuccess) return res;
    res = user_rank_entered(comm, rank);
    shim_comm_leave(comm);
    return res;
}

/* ---- buffer registration ------------------------------------------------------------------ */

/*
 * Registration is a hint in NCCL. Here it marks a range the collectives of this communicator
 * may run the plan on directly, without staging, when the backend can share it (memory from
 * ncclMemAlloc or mscclpp_malloc; docs/nccl.md "Zero-copy"). Deregistering makes the executor
 * forget its contexts on that allocation (before the next group), since the caller may then
 * free it and a new allocation may start at the same address.
 */
#define SHIM_REG_MAGIC 0x72656721u

static ncclResult_t register_entered(const ncclComm_t comm, void *buff, size_t size, void **handle)
{
    ncclResult_t res = shim_check_comm(comm, "ncclCommRegister");
    if (res != ncclSuccess) return res;
    if (!handle) return shim_error(ncclInvalidArgument, "ncclCommRegister: handle is NULL");
    if (!buff && size)
        return shim_error(ncclInvalidArgument, "ncclCommRegister: buff is NULL (size %zu)", size);
    struct shim_reg *h = calloc(1, sizeof *h);
    if (!h) return shim_error(ncclSystemError, "ncclCommRegister: out of memory");
    *h = (struct shim_reg){SHIM_REG_MAGIC, NULL, comm, buff, size, NULL};
    /*
     * Can plans run on it? ncclMemAlloc memory, and on GPU backends device memory, says the
     * executor. Host memory on the host backend never can (asking would log a warning).
     */
    bool ask = comm->zero_copy && buff && size &&
               (in_mem_table(buff, size) || strcmp(mscclpp_backend_name(), "host") != 0);
    if (ask && mscclpp_executor_usable(comm->exec, buff, size, &h->zc_base) != MSCCLPP_OK)
        h->zc_base = NULL;
    pthread_mutex_lock(&comm->lock);
    h->next = comm->regs;
    comm->regs = h;
    pthread_mutex_unlock(&comm->lock);
    *handle = h;
    return ncclSuccess;
}

ncclResult_t ncclCommRegister(const ncclComm_t comm, void *buff, size_t size, void **handle)
{
    ncclResult_t res = shim_comm_enter(comm, "ncclCommRegister");
    if (res != ncclSuccess) return res;
    res = register_entered(comm, buff, size, handle);
    shim_comm_leave(comm);
    return res;
}

static ncclResult_t deregister_entered(const ncclComm_t comm, void *handle)
{
    ncclResult_t res = shim_check_comm(comm, "ncclCommDeregister");
    if (res != ncclSuccess) return res;
    /* only handles listed in this communicator are dereferenced */
    bool found = false;
    pthread_mutex_lock(&comm->lock);
    for (struct shim_reg **pp = &comm->regs; *pp && !found; pp = &(*pp)->next)
        if (*pp == handle) {
            *pp = (*pp)->next;
            found = true;
        }
    pthread_mutex_unlock(&comm->lock);
    if (!found)
        return shim_error(ncclInvalidArgument,
                          "ncclCommDeregister: %p is not a registration handle of comm %p",
                          handle, (void *)comm);
    struct shim_reg *h = handle;
    zc_mark(comm, h->zc_base);
    h->magic = 0;
    free(h);
    return ncclSuccess;
}

ncclResult_t ncclCommDeregister(const ncclComm_t comm, void *handle)
{
    ncclResult_t res = shim_comm_enter(comm, "ncclCommDeregister");
    if (res != ncclSuccess) return res;
    res = deregister_entered(comm, handle);
    shim_comm_leave(comm);
    return res;
}

/* ---- PreMulSum operators ------------------------------------------------------------------ */

static ncclResult_t premulsum_entered(ncclRedOp_t *op, void *scalar, ncclDataType_t datatype,
                                      ncclScalarResidence_t residence, ncclComm_t comm)
{
    ncclResult_t res = shim_check_comm(comm, "ncclRedOpCreatePreMulSum");
    if (res != ncclSuccess) return res;
    if (!op || !scalar)
        return shim_error(ncclInvalidArgument, "ncclRedOpCreatePreMulSum: %s is NULL",
                          !op ? "op" : "scalar");
    if ((int)datatype < 0 || datatype >= ncclNumTypes)
        return shim_error(ncclInvalidArgument, "ncclRedOpCreatePreMulSum: invalid datatype %d",
                          (int)datatype);
    if (residence != ncclScalarDevice && residence != ncclScalarHostImmediate)
        return shim_error(ncclInvalidArgument, "ncclRedOpCreatePreMulSum: invalid residence %d",
                          (int)residence);
    pthread_mutex_lock(&comm->lock);
    int i = 0;
    while (i < SHIM_MAX_REDOPS && comm->redops[i].used) i++;
    if (i == SHIM_MAX_REDOPS) {
        pthread_mutex_unlock(&comm->lock);
        return shim_error(ncclInvalidUsage, "ncclRedOpCreatePreMulSum: all %d operators of comm "
                          "%p are in use (destroy some)", SHIM_MAX_REDOPS, (void *)comm);
    }
    shim_redop_t *o = &comm->redops[i];
    memset(o, 0, sizeof *o);
    o->dtype = datatype;
    o->residence = residence;
    if (residence == ncclScalarHostImmediate)
        memcpy(o->value, scalar, shim_dtype_size(datatype));
    else
        o->scalar_ptr = scalar;
    const shim_real_t *rl = comm->real ? shim_real() : NULL;
    if (rl && rl->RedOpCreatePreMulSum &&
        rl->RedOpCreatePreMulSum(&o->real_op, scalar, datatype, residence, comm->real) ==
            ncclSuccess)
        o->has_real_op = true;
    o->used = true;
    pthread_mutex_unlock(&comm->lock);
    *op = (ncclRedOp_t)((int)ncclNumOps + i);
    return ncclSuccess;
}

ncclResult_t ncclRedOpCreatePreMulSum(ncclRedOp_t *op, void *scalar, ncclDataType_t datatype,
                                      ncclScalarResidence_t residence, ncclComm_t comm)
{
    ncclResult_t res = shim_comm_enter(comm, "ncclRedOpCreatePreMulSum");
    if (res != ncclSuccess) return res;
    res = premulsum_entered(op, scalar, datatype, residence, comm);
    shim_comm_leave(comm);
    return res;
}

static ncclResult_t redop_destroy_entered(ncclRedOp_t op, ncclComm_t comm)
{
    ncclResult_t res = shim_check_comm(comm, "ncclRedOpDestroy");
    if (res != ncclSuccess) return res;
    int i = (int)op - (int)ncclNumOps;
    if ((int)op < (int)ncclNumOps)
        return shim_error(ncclInvalidArgument, "ncclRedOpDestroy: %s is a built-in operator",
                          shim_op_name(op));
    pthread_mutex_lock(&comm->lock);
    if (i >= SHIM_MAX_REDOPS || !comm->redops[i].used) {
        pthread_mutex_unlock(&comm->lock);
        return shim_error(ncclInvalidArgument, "ncclRedOpDestroy: operator %d is not live on "
                          "comm %p", (int)op, (void *)comm);
    }
    shim_redop_t *o = &comm->redops[i];
    const shim_real_t *rl = comm->real ? shim_real() : NULL;
    if (o->has_real_op && rl && rl->RedOpDestroy) rl->RedOpDestroy(o->real_op, comm->real);
    o->used = false;
    pthread_mutex_unlock(&comm->lock);
    return ncclSuccess;
}

ncclResult_t ncclRedOpDestroy(ncclRedOp_t op, ncclComm_t comm)
{
    ncclResult_t res = shim_comm_enter(comm, "ncclRedOpDestroy");
    if (res != ncclSuccess) return res;
    res = redop_destroy_entered(op, comm);
    shim_comm_leave(comm);
    return res;
}

/* ---- streams ------------------------------------------------------------------------------ */

/* On CUDA the legacy default stream has a handle of its own (cudaStreamLegacy), so that a
 * NULL cudaStream_t is queued on like any stream instead of meaning "synchronous". */
#define SHIM_CUDA_STREAM_LEGACY ((void *)0x1)

/*
 * The stream a task's work goes on (docs/nccl.md "Streams"). GPU backends: the caller's stream,
 * wrapped once (cached per communicator; a NULL cudaStream_t is the legacy default stream). Host
 * backend: a cudaStream_t is one of our streams cast to it; NULL means "synchronous": the work
 * runs in the calling thread while this process has one communicator, else on the
 * communicator's own stream, which the call then waits for (*sync_after).
 */
ncclResult_t shim_stream_get(ncclComm_t c, cudaStream_t native, mscclpp_stream_t *st,
                             bool *sync_after, const char *who)
{
    *st = NULL;
    *sync_after = false;
    if (strcmp(mscclpp_backend_name(), "host") == 0) {
        if (native) {
            *st = (mscclpp_stream_t)(void *)native;
        } else if (!shim_sole_comm()) {
            *st = c->stream;
            *sync_after = true;
        }
        return ncclSuccess;
    }
    void *key = (void *)native;
    if (!key && strcmp(mscclpp_backend_name(), "cuda") == 0) key = SHIM_CUDA_STREAM_LEGACY;
    mscclpp_result_t r = MSCCLPP_OK;
    pthread_mutex_lock(&c->lock);
    for (int i = 0; i < c->nstreams && !*st; i++)
        if (c->streams[i].native == key) *st = c->streams[i].stream;
    if (!*st && c->nstreams < SHIM_MAX_STREAMS) {
        r = mscclpp_stream_wrap(key, st);
        if (r == MSCCLPP_OK) {
            c->streams[c->nstreams].native = key;
            c->streams[c->nstreams++].stream = *st;
        }
    }
    pthread_mutex_unlock(&c->lock);
    if (r != MSCCLPP_OK) return shim_from_mscclpp(r, who);
    if (!*st)
        return shim_error(ncclInvalidUsage, "%s: rank %d has queued work on %d different streams "
                          "of one communicator, the most libmscclpp_nccl keeps", who, c->rank,
                          SHIM_MAX_STREAMS);
    return ncclSuccess;
}

/*
 * Before queueing a communicator's work on `st`: a communicator's calls run in issue order (its
 * plans' state persists from one launch to the next), so work on another stream than the last
 * one first waits for what that stream has queued, on the device (an event), not on the host.
 */
static bool stream_captured(ncclComm_t c, mscclpp_stream_t st)
{
    int capturing = 0;
    if (st && mscclpp_stream_is_capturing(st, &capturing) != MSCCLPP_OK) capturing = 0;
    c->capturing = capturing != 0;
    c->capture_known = true;
    if (capturing) c->captured_any = true;
    return c->capturing;
}

ncclResult_t shim_stream_enter(ncclComm_t c, mscclpp_stream_t st, const char *who)
{
    /* The capture status is asked here only when the stream changes; a call on the same
     * stream as the last leaves it to the executor (which asks at every launch) and to the
     * staging buffers' users (shim_stream_captured): one backend query per call fewer. */
    c->capture_known = false;
    /* a capture may not wait for work outside it (CUDA refuses the event): the program orders
     * the capture after its other work itself (torch.cuda.graph synchronizes first) */
    if (c->last_stream && c->last_stream != st && !stream_captured(c, st)) {
        mscclpp_result_t r = mscclpp_stream_wait_stream(st, c->last_stream);
        if (r != MSCCLPP_OK) return shim_from_mscclpp(r, who);
    }
    c->last_stream = st;
    return ncclSuccess;
}

bool shim_stream_captured(ncclComm_t c)
{
    return c->capture_known ? c->capturing : stream_captured(c, c->last_stream);
}

/* Wait (on the host) for the work this communicator queued last: before freeing what it uses. */
ncclResult_t shim_stream_drain(ncclComm_t c, const char *who)
{
    if (!c->last_stream) return ncclSuccess;
    /* a NULL stream waiting for another synchronizes it, unless the program destroyed it since
     * (host backend: the program's own stream; destroying synchronized it) */
    mscclpp_result_t r = mscclpp_stream_wait_stream(NULL, c->last_stream);
    return r == MSCCLPP_OK ? ncclSuccess : shim_from_mscclpp(r, who);
}

/* ---- the rest of the 2.28 API: served where it maps onto ours, refused clearly otherwise --- */

ncclResult_t ncclCommInitRankScalable(ncclComm_t *newcomm, int nranks, int myrank, int nId,
                                      ncclUniqueId *commIds, ncclConfig_t *config)
{
    if (nId < 1 || !commIds)
        return shim_error(ncclInvalidArgument, "ncclCommInitRankScalable: need at least one "
                          "unique id (nId %d, commIds %p)", nId, (void *)commIds);
    if (config && config->magic != 0xcafebeef)
        return shim_error(ncclInvalidArgument, "ncclCommInitRankScalable: config was not "
                          "initialized with NCCL_CONFIG_INITIALIZER");
    /* one bootstrap root serves every rank: the first id is enough (all ranks hold it) */
    return init_rank(newcomm, nranks, &commIds[0], myrank, current_device(),
                     "ncclCommInitRankScalable");
}

ncclResult_t ncclCommRevoke(ncclComm_t comm, int revokeFlags)
{
    return shim_error(ncclInvalidUsage, "ncclCommRevoke is not supported by libmscclpp_nccl "
                      "(comm %p, flags %d); use ncclCommAbort", (void *)comm, revokeFlags);
}

ncclResult_t ncclCommShrink(ncclComm_t comm, int *excludeRanksList, int excludeRanksCount,
                            ncclComm_t *newcomm, ncclConfig_t *config, int shrinkFlags)
{
    (void)excludeRanksList;
    (void)config;
    (void)shrinkFlags;
    if (newcomm) *newcomm = NULL;
    return shim_error(ncclInvalidUsage, "ncclCommShrink is not supported by libmscclpp_nccl "
                      "(comm %p, %d ranks excluded); use ncclCommSplit", (void *)comm,
                      excludeRanksCount);
}

ncclResult_t ncclCommWindowRegister(ncclComm_t comm, void *buff, size_t size, ncclWindow_t *win,
                                    int winFlags)
{
    if (win) *win = NULL;
    return shim_error(ncclInvalidUsage, "ncclCommWindowRegister is not supported by "
                      "libmscclpp_nccl (comm %p, %p, %zu bytes, flags %d)", (void *)comm, buff,
                      size, winFlags);
}

ncclResult_t ncclCommWindowDeregister(ncclComm_t comm, ncclWindow_t win)
{
    return shim_error(ncclInvalidUsage, "ncclCommWindowDeregister is not supported by "
                      "libmscclpp_nccl (comm %p, window %p)", (void *)comm, (void *)win);
}

/* Deprecated in nccl.h, still exported by libnccl.so.2: our logging reads its variables at
 * each message, so there is nothing to reload. */
void ncclResetDebugInit(void)
{
}
