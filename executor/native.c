/*
 * Native algorithms: load modules (dlopen + ABI check), register their algorithms as plans the
 * registry and the tuner see, and run them with peer memory set up (include/mscclpp/native.h,
 * executor/native_exec.h).
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/debug.h"
#include "core/core.h"
#include "executor/exec.h"
#include "executor/native_exec.h"
#include "executor/tuning.h"
#include "hal/hal_api.h"
#include "mscclpp/native.h"

/* Bootstrap tags of the peer-memory exchange: one per buffer kind, below the executor's
 * 0x6000.. range and inside the 0..32767 every MPI allows. */
#define NATIVE_TAG_BASE 0x5400
#define NATIVE_KINDS 3 /* input, output, scratch */
#define NATIVE_REC 6   /* per-call record: in base, in size, out base, out size, in off, out off */
#define NATIVE_MAX_CTXS 16 /* buffer sets kept mapped per algorithm and executor */

/* Mappings for one set of allocations (every rank's input and output allocation): an entry of
 * the executor's cache (executor/cache.h), whose owner is the native_plan_t holding state. */
typedef struct native_ctx {
    exec_cache_entry_t ce;
    uint64_t *key;             /* nranks x 4: in base, in size, out base, out size */
    mscclpp_regmem_t **local;  /* NATIVE_KINDS registrations of this rank's buffers */
    mscclpp_regmem_t **remote; /* nranks x NATIVE_KINDS peer registrations (NULL for self) */
    char **base;               /* nranks x NATIVE_KINDS mapped bases */
} native_ctx_t;

/* One algorithm registered with one executor. The plan comes first: the registry holds
 * &np->plan and exec_native_execute gets it back. */
typedef struct native_plan {
    struct mscclpp_plan plan;
    struct native_plan *next;
    mscclpp_native_t *mod;
    struct native_plan *owner; /* the entry holding state (in-place and out-of-place entries of
                                * one algorithm share it): the first one registered */
    const mscclpp_native_algorithm_t *algo;
    mscclpp_executor_t *exec;
    mscclpp_comm_t *comm;
    void *state;
    bool inited;
    uint64_t seq;
    void *scratch;
    int n_ctxs;     /* its buffer sets in the executor's cache */
    void **ptrs;    /* 3 x nranks: peer_input, peer_output, peer_scratch of the call */
    uint64_t *recs; /* nranks x NATIVE_REC */
    mscclpp_result_t broken;
    char broken_msg[512];
} native_plan_t;

struct mscclpp_native {
    struct mscclpp_native *next;
    void *dl;
    char *path;
    const mscclpp_native_module_desc_t *desc;
    native_plan_t *plans;
};

/* Every loaded module, so an executor's registrations can be found from the executor. */
static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static mscclpp_native_t *g_mods;

static const char *const k_collectives[] = {"allreduce", "allgather", "reducescatter",
                                            "alltoall", "broadcast"};

/* ---- services handed to the module ------------------------------------------------------- */

typedef struct {
    native_plan_t *np;
    /* this call's copy of the services: timeout_ns is MSCCLPP_TIMEOUT as it is now (the
     * library reads it at every wait, so a value set after the module was loaded holds) */
    mscclpp_native_services_t svc;
} native_internal_t;

static mscclpp_result_t svc_barrier(const mscclpp_native_call_t *call)
{
    if (!call || !call->comm) return ERR_ARG("native barrier: no call");
    return mscclpp_bootstrap_barrier(call->comm->boot);
}

static mscclpp_result_t svc_allgather(const mscclpp_native_call_t *call, void *data,
                                      size_t bytes_per_rank)
{
    if (!call || !call->comm) return ERR_ARG("native allgather: no call");
    return mscclpp_bootstrap_allgather(call->comm->boot, data, bytes_per_rank);
}

static mscclpp_result_t svc_report_error(mscclpp_result_t result, const char *fmt, ...)
{
    char msg[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt ? fmt : "(no message)", ap);
    va_end(ap);
    /* quiet: the library logs it once, with the algorithm's name, when it is returned */
    return core_error_quiet(result, "%s", msg);
}

static void svc_log_info(const char *fmt, ...)
{
    char msg[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt ? fmt : "", ap);
    va_end(ap);
    INFO(SUBSYS_EXEC, "native: %s", msg);
}

static const mscclpp_native_services_t g_services = {
    .size = sizeof(mscclpp_native_services_t),
    .barrier = svc_barrier,
    .allgather = svc_allgather,
    .report_error = svc_report_error,
    .log_info = svc_log_info,
};

/* ---- loading ------------------------------------------------------------------------------ */

static bool known_collective(const char *c)
{
    for (size_t i = 0; i < sizeof k_collectives / sizeof *k_collectives; i++)
        if (!strcmp(c, k_collectives[i])) return true;
    return false;
}

static mscclpp_result_t check_desc(const char *path, const mscclpp_native_module_desc_t *d)
{
    if (d->abi_version != MSCCLPP_NATIVE_ABI_VERSION)
        return ERR(MSCCLPP_ERR_UNSUPPORTED, "native module %s: its table says ABI version %u, "
                   "this library has %u", path, d->abi_version, MSCCLPP_NATIVE_ABI_VERSION);
    if (d->count == 0 || !d->algorithms)
        return ERR_ARG("native module %s: exports no algorithms", path);
    for (uint32_t i = 0; i < d->count; i++) {
        const mscclpp_native_algorithm_t *a = &d->algorithms[i];
        if (!a->name || !a->name[0])
            return ERR_ARG("native module %s: algorithms[%u] has no name", path, i);
        if (!a->collective || !known_collective(a->collective))
            return ERR_ARG("native module %s: algorithm '%s': collective \"%s\" is not one of "
                           "allreduce, allgather, reducescatter, alltoall, broadcast", path,
                           a->name, a->collective ? a->collective : "(null)");
        if (!a->execute)
            return ERR_ARG("native module %s: algorithm '%s' has no execute function", path,
                           a->name);
        if (!(a->flags & (MSCCLPP_NATIVE_INPLACE | MSCCLPP_NATIVE_OUT_OF_PLACE)))
            return ERR_ARG("native module %s: algorithm '%s' serves neither in-place nor "
                           "out-of-place calls (flags 0x%x)", path, a->name, a->flags);
        if (a->max_ranks && a->max_ranks < a->min_ranks)
            return ERR_ARG("native module %s: algorithm '%s': max_ranks %d < min_ranks %d", path,
                           a->name, a->max_ranks, a->min_ranks);
        if (a->max_message_size && a->max_message_size < a->min_message_size)
            return ERR_ARG("native module %s: algorithm '%s': max_message_size < "
                           "min_message_size", path, a->name);
        for (uint32_t j = 0; j < i; j++)
            if (!strcmp(d->algorithms[j].name, a->name))
                return ERR_ARG("native module %s: two algorithms are named '%s'", path, a->name);
    }
    return MSCCLPP_OK;
}

MSCCLPP_API mscclpp_result_t mscclpp_native_load(const char *path, mscclpp_native_t **mod)
{
    CHECK_ARG(path != NULL);
    CHECK_ARG(mod != NULL);
    *mod = NULL;
    /* RTLD_LOCAL: two modules may use the same symbol names for their own functions */
    void *dl = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!dl) return ERR(MSCCLPP_ERR_SYSTEM, "native module %s: dlopen: %s", path, dlerror());
    mscclpp_result_t r;
    const uint32_t *ver = dlsym(dl, "mscclpp_native_abi_version");
    if (!ver) {
        r = ERR_ARG("native module %s: no symbol mscclpp_native_abi_version (build it with "
                    "MSCCLPP_NATIVE_MODULE() of <mscclpp/native.h>)", path);
        goto close_dl;
    }
    if (*ver != MSCCLPP_NATIVE_ABI_VERSION) {
        r = ERR(MSCCLPP_ERR_UNSUPPORTED, "native module %s: built for native ABI version %u, "
                "this library has version %u (rebuild it against this <mscclpp/native.h>)",
                path, *ver, MSCCLPP_NATIVE_ABI_VERSION);
        goto close_dl;
    }
    const mscclpp_native_module_desc_t *desc = dlsym(dl, "mscclpp_native_module");
    if (!desc) {
        r = ERR_ARG("native module %s: no symbol mscclpp_native_module (build it with "
                    "MSCCLPP_NATIVE_MODULE() of <mscclpp/native.h>)", path);
        goto close_dl;
    }
    CHECK_GOTO(check_desc(path, desc), r, close_dl);
    mscclpp_native_t *m = calloc(1, sizeof *m);
    if (!m || !(m->path = strdup(path))) {
        free(m);
        r = ERR(MSCCLPP_ERR_NO_MEMORY, "native module %s: out of memory", path);
        goto close_dl;
    }
    m->dl = dl;
    m->desc = desc;
    pthread_mutex_lock(&g_lock);
    m->next = g_mods;
    g_mods = m;
    pthread_mutex_unlock(&g_lock);
    INFO(SUBSYS_EXEC, "native module %s: %u algorithms", path, desc->count);
    *mod = m;
    return MSCCLPP_OK;
close_dl:
    dlclose(dl);
    return r;
}

MSCCLPP_API int mscclpp_native_count(const mscclpp_native_t *mod)
{
    return mod ? (int)mod->desc->count : 0;
}

MSCCLPP_API const char *mscclpp_native_name(const mscclpp_native_t *mod, int i)
{
    return mod && i >= 0 && (uint32_t)i < mod->desc->count ? mod->desc->algorithms[i].name : NULL;
}

MSCCLPP_API const char *mscclpp_native_collective(const mscclpp_native_t *mod, int i)
{
    return mod && i >= 0 && (uint32_t)i < mod->desc->count ? mod->desc->algorithms[i].collective
                                                          : NULL;
}

MSCCLPP_API int mscclpp_plan_is_native(const mscclpp_plan_t *plan)
{
    return exec_native_of(plan) ? 1 : 0;
}

/* ---- per-executor state ------------------------------------------------------------------- */

static void ctx_free(native_plan_t *np, native_ctx_t *c)
{
    int n = np->plan.nranks;
    if (c->remote)
        for (int i = 0; i < n * NATIVE_KINDS; i++)
            if (c->remote[i] && mscclpp_regmem_destroy(c->remote[i]) != MSCCLPP_OK)
                core_clear_error(); /* releasing: nothing to tell the caller */
    if (c->local)
        for (int k = 0; k < NATIVE_KINDS; k++)
            if (c->local[k] && mscclpp_regmem_destroy(c->local[k]) != MSCCLPP_OK)
                core_clear_error();
    free(c->remote);
    free(c->local);
    free(c->base);
    free(c->key);
    free(c);
}

/* ---- buffer sets as entries of the executor's cache ---- */

static native_ctx_t *ctx_of(const exec_cache_entry_t *e)
{
    return e ? (native_ctx_t *)((char *)e - offsetof(native_ctx_t, ce)) : NULL;
}

static native_plan_t *owner_of(const exec_cache_entry_t *e)
{
    return (native_plan_t *)(uintptr_t)e->owner;
}

/* key: the per-call records of every rank (NATIVE_REC words each, the first 4 are the key) */
static bool ctx_match(const exec_cache_entry_t *e, const void *key)
{
    const native_ctx_t *c = ctx_of(e);
    const uint64_t *recs = key;
    for (int r = 0; r < owner_of(e)->plan.nranks; r++)
        if (memcmp(&c->key[r * 4], &recs[r * NATIVE_REC], 4 * sizeof(uint64_t))) return false;
    return true;
}

/* this rank's input or output allocation (key: in base, size, out base, size) */
static bool ctx_holds(const exec_cache_entry_t *e, const void *base)
{
    const native_ctx_t *c = ctx_of(e);
    const native_plan_t *np = owner_of(e);
    int me = np->comm ? np->comm->rank : 0;
    uint64_t b = (uintptr_t)base;
    return c->key[me * 4 + 0] == b || c->key[me * 4 + 2] == b;
}

static void ctx_free_entry(mscclpp_executor_t *ex, exec_cache_entry_t *e)
{
    (void)ex;
    native_plan_t *np = owner_of(e);
    np->n_ctxs--;
    ctx_free(np, ctx_of(e));
}

static const exec_cache_ops_t native_ctx_ops = {
    .kind = EXEC_CACHE_NATIVE,
    .what = "native buffer set",
    /* ranks map each other's registrations, which stay valid while the buffers live: every
     * rank drops the same one alike, with no barrier (as before the one cache) */
    .collective = false,
    .per_owner = NATIVE_MAX_CTXS,
    .match = ctx_match,
    .holds = ctx_holds,
    .free = ctx_free_entry,
};

/* Release contexts, scratch and init state of one registration (it stays registered). */
static void plan_release(native_plan_t *np)
{
    /* its buffer sets live in its executor's cache (none once the executor is gone: its
     * destroy released them) */
    if (np->n_ctxs > 0) exec_cache_drop_owner(np->exec, np);
    if (np->scratch) {
        if (np->comm->hal->mem_free(np->scratch) != MSCCLPP_OK) core_clear_error();
        np->scratch = NULL;
    }
    if (np->inited && np->algo->fini) np->algo->fini(np->state);
    np->state = NULL;
    np->inited = false;
}

static void plan_free_native(native_plan_t *np)
{
    plan_release(np);
    for (int r = 0; r < np->plan.nranks; r++) free(np->plan.gpus ? np->plan.gpus[r].blocks : NULL);
    free(np->plan.gpus);
    free(np->plan.name);
    free(np->plan.collective);
    free(np->ptrs);
    free(np->recs);
    free(np);
}

void exec_native_release(mscclpp_executor_t *ex)
{
    pthread_mutex_lock(&g_lock);
    for (mscclpp_native_t *m = g_mods; m; m = m->next)
        for (native_plan_t *np = m->plans; np; np = np->next)
            if (np->exec == ex) plan_release(np);
    pthread_mutex_unlock(&g_lock);
}

MSCCLPP_API mscclpp_result_t mscclpp_executor_release_natives(mscclpp_executor_t *exec)
{
    if (exec) exec_native_release(exec);
    return MSCCLPP_OK;
}

MSCCLPP_API mscclpp_result_t mscclpp_native_destroy(mscclpp_native_t *mod)
{
    if (!mod) return MSCCLPP_OK;
    pthread_mutex_lock(&g_lock);
    for (mscclpp_native_t **pp = &g_mods; *pp; pp = &(*pp)->next)
        if (*pp == mod) {
            *pp = mod->next;
            break;
        }
    pthread_mutex_unlock(&g_lock);
    while (mod->plans) {
        native_plan_t *np = mod->plans;
        mod->plans = np->next;
        plan_free_native(np);
    }
    dlclose(mod->dl);
    free(mod->path);
    free(mod);
    return MSCCLPP_OK;
}

/* ---- registration ------------------------------------------------------------------------- */

/* Chunk counts as a plan of this collective would have (the ratio of input to output size). */
static void chunks_of(const char *coll, int n, uint32_t *in, uint32_t *out)
{
    *in = *out = 1;
    if (!strcmp(coll, "allgather")) *out = (uint32_t)n;
    else if (!strcmp(coll, "reducescatter")) *in = (uint32_t)n;
    else if (!strcmp(coll, "alltoall")) *in = *out = (uint32_t)n;
}

static mscclpp_result_t make_plan(mscclpp_native_t *mod, const mscclpp_native_algorithm_t *a,
                                  mscclpp_executor_t *exec, mscclpp_comm_t *comm, bool inplace,
                                  native_plan_t **out)
{
    int n = comm->nranks;
    native_plan_t *np = calloc(1, sizeof *np);
    if (!np) return ERR(MSCCLPP_ERR_NO_MEMORY, "native '%s': out of memory", a->name);
    struct mscclpp_plan *p = &np->plan;
    p->format_version = EXEC_PLAN_FORMAT_NATIVE;
    p->name = strdup(a->name);
    p->collective = strdup(a->collective);
    p->inplace = inplace;
    p->alignment = 1;
    p->threads_per_block = a->nthreads_per_block > 0 ? (uint32_t)a->nthreads_per_block : 0;
    p->min_message_size = a->min_message_size;
    p->max_message_size = a->max_message_size ? a->max_message_size : UINT64_MAX;
    p->nranks = n;
    p->gpus = calloc((size_t)n, sizeof *p->gpus);
    np->ptrs = calloc(3 * (size_t)n, sizeof *np->ptrs);
    np->recs = calloc((size_t)n * NATIVE_REC, sizeof *np->recs);
    bool ok = p->name && p->collective && p->gpus && np->ptrs && np->recs;
    int nb = a->nblocks > 0 ? a->nblocks : 0;
    for (int r = 0; ok && r < n; r++) {
        plan_gpu_t *g = &p->gpus[r];
        g->id = r;
        chunks_of(a->collective, n, &g->input_chunks, &g->output_chunks);
        /* empty blocks: the launch shape is visible to the tuner (mscclpp_plan_num_blocks),
         * and walking the plan (verify) finds no operations */
        g->n_blocks = nb;
        if (nb && !(g->blocks = calloc((size_t)nb, sizeof *g->blocks))) ok = false;
    }
    np->mod = mod;
    np->algo = a;
    np->exec = exec;
    np->comm = comm;
    if (!ok) {
        plan_free_native(np);
        return ERR(MSCCLPP_ERR_NO_MEMORY, "native '%s': out of memory", a->name);
    }
    *out = np;
    return MSCCLPP_OK;
}

static mscclpp_result_t call_init(native_plan_t *np);

static mscclpp_result_t register_one(mscclpp_executor_t *exec, mscclpp_comm_t *comm,
                                     mscclpp_native_t *mod, const mscclpp_native_algorithm_t *a,
                                     int ranks_per_node, const char *tags,
                                     const mscclpp_plan_t **plan)
{
    int n = comm->nranks;
    if ((a->min_ranks && n < a->min_ranks) || (a->max_ranks && n > a->max_ranks))
        return ERR(MSCCLPP_ERR_UNSUPPORTED, "native algorithm '%s' runs on %d to %d ranks, the "
                   "communicator has %d", a->name, a->min_ranks, a->max_ranks, n);
    if ((a->flags & MSCCLPP_NATIVE_PEER_MEMORY) && comm->nlocal != n)
        return ERR(MSCCLPP_ERR_UNSUPPORTED,
                   "native algorithm '%s' maps every rank's memory, "
                   "but only %d of the %d ranks share rank %d's node",
                   a->name, comm->nlocal, n, comm->rank);
    /* the registry selects by in-place-ness: one entry per mode the algorithm serves */
    static const uint32_t modes[2] = {MSCCLPP_NATIVE_OUT_OF_PLACE, MSCCLPP_NATIVE_INPLACE};
    native_plan_t *first = NULL;
    for (int i = 0; i < 2; i++) {
        if (!(a->flags & modes[i])) continue;
        native_plan_t *np = NULL;
        CHECK(make_plan(mod, a, exec, comm, modes[i] == MSCCLPP_NATIVE_INPLACE, &np));
        mscclpp_result_t r = first ? MSCCLPP_OK : call_init(np);
        if (r == MSCCLPP_OK)
            r = exec_registry_register(&exec->registry, &np->plan, ranks_per_node, tags);
        if (r != MSCCLPP_OK) {
            plan_free_native(np);
            return r;
        }
        np->owner = first ? first : np;
        pthread_mutex_lock(&g_lock);
        np->next = mod->plans;
        mod->plans = np;
        pthread_mutex_unlock(&g_lock);
        if (!first) first = np;
        if (plan) *plan = &np->plan;
    }
    return MSCCLPP_OK;
}

MSCCLPP_API mscclpp_result_t mscclpp_executor_register_native(mscclpp_executor_t *exec,
                                                              mscclpp_comm_t *comm,
                                                              mscclpp_native_t *mod,
                                                              const char *name,
                                                              int ranks_per_node,
                                                              const char *tags,
                                                              const mscclpp_plan_t **plan)
{
    CHECK_ARG(exec != NULL);
    CHECK_ARG(comm != NULL);
    CHECK_ARG(mod != NULL);
    CHECK_ARG(ranks_per_node >= 0);
    const mscclpp_comm_t *mine = exec->comm;
    if (mine->nranks != comm->nranks || mine->nlocal != comm->nlocal || mine->hal != comm->hal)
        return ERR_ARG("register native: the executor runs on another communicator (%d ranks, "
                       "%d per node) than the one given (%d, %d)",
                       mine->nranks, mine->nlocal, comm->nranks, comm->nlocal);
    bool found = false;
    for (uint32_t i = 0; i < mod->desc->count; i++) {
        const mscclpp_native_algorithm_t *a = &mod->desc->algorithms[i];
        if (name && strcmp(name, a->name)) continue;
        found = true;
        CHECK(register_one(exec, comm, mod, a, ranks_per_node, tags, plan));
    }
    if (!found)
        return ERR_ARG("native module %s has no algorithm '%s'", mod->path, name ? name : "");
    return MSCCLPP_OK;
}

/* ---- running ------------------------------------------------------------------------------ */

static void call_base(native_plan_t *np, native_internal_t *in, mscclpp_native_call_t *call)
{
    mscclpp_comm_t *comm = np->comm;
    in->np = np;
    in->svc = g_services;
    in->svc.timeout_ns = mscclpp_timeout_ns();
    *call = (mscclpp_native_call_t){
        .size = sizeof *call,
        .abi_version = MSCCLPP_NATIVE_ABI_VERSION,
        .services = &in->svc,
        .internal = in,
        .comm = comm,
        .executor = np->exec,
        .backend = comm->hal->name,
        .rank = comm->rank,
        .nranks = comm->nranks,
        .nranks_per_node = comm->nlocal,
        .dtype = MSCCLPP_FLOAT32,
        .op = MSCCLPP_SUM,
        .nblocks = np->algo->nblocks,
        .nthreads_per_block = np->algo->nthreads_per_block,
        .state = np->state,
        .scratch_bytes = np->algo->scratch_bytes,
        .seq = np->seq,
    };
}

/* The algorithm's error, with its name and rank in front (the module's message, if it left
 * one through report_error). */
static mscclpp_result_t algo_error(native_plan_t *np, const char *what, mscclpp_result_t r)
{
    char why[768];
    const char *le = mscclpp_last_error();
    snprintf(why, sizeof why, "%s", le[0] ? le : "no message (report_error was not called)");
    if (r >= 0 || r < MSCCLPP_ERR_ABORTED) r = MSCCLPP_ERR_INTERNAL; /* not a result code */
    return ERR(r, "native algorithm '%s' (%s, rank %d of %d) %s returned %s: %s", np->algo->name,
               np->algo->collective, np->comm->rank, np->comm->nranks, what,
               mscclpp_result_string(r), why);
}

static mscclpp_result_t call_init(native_plan_t *np)
{
    if (np->inited) return MSCCLPP_OK;
    if (np->algo->scratch_bytes && !np->scratch)
        CHECK(np->comm->hal->mem_alloc_shareable(np->algo->scratch_bytes, &np->scratch));
    if (np->algo->init) {
        native_internal_t in;
        mscclpp_native_call_t call;
        call_base(np, &in, &call);
        call.scratch = np->scratch;
        core_clear_error();
        mscclpp_result_t r = np->algo->init(&call, &np->state);
        if (r != MSCCLPP_OK) return algo_error(np, "init", r);
    }
    np->inited = true;
    return MSCCLPP_OK;
}

/* Register this rank's allocations and scratch, send them to every peer and map theirs. */
static mscclpp_result_t ctx_build(native_plan_t *np, const uint64_t *key, native_ctx_t **out)
{
    mscclpp_comm_t *comm = np->comm;
    int n = comm->nranks, me = comm->rank;
    int kinds = np->scratch ? NATIVE_KINDS : 2;
    mscclpp_result_t r = MSCCLPP_OK;
    native_ctx_t *c = calloc(1, sizeof *c);
    if (!c) return ERR(MSCCLPP_ERR_NO_MEMORY, "native '%s': out of memory", np->algo->name);
    c->key = malloc((size_t)n * 4 * sizeof(uint64_t));
    c->local = calloc(NATIVE_KINDS, sizeof *c->local);
    c->remote = calloc((size_t)n * NATIVE_KINDS, sizeof *c->remote);
    c->base = calloc((size_t)n * NATIVE_KINDS, sizeof *c->base);
    if (!c->key || !c->local || !c->remote || !c->base) {
        r = ERR(MSCCLPP_ERR_NO_MEMORY, "native '%s': out of memory", np->algo->name);
        goto fail;
    }
    memcpy(c->key, key, (size_t)n * 4 * sizeof *key);
    const uint64_t *mine = &key[me * 4];
    void *ptrs[NATIVE_KINDS] = {(void *)(uintptr_t)mine[0], (void *)(uintptr_t)mine[2],
                                np->scratch};
    size_t sizes[NATIVE_KINDS] = {(size_t)mine[1], (size_t)mine[3], np->algo->scratch_bytes};
    for (int k = 0; k < kinds; k++) {
        CHECK_GOTO(mscclpp_register_memory(comm, ptrs[k], sizes[k], MSCCLPP_TRANSPORT_IPC,
                                           &c->local[k]), r, fail);
        c->base[me * NATIVE_KINDS + k] = ptrs[k];
    }
    /* sends first (small messages, buffered by the bootstrap), then receives: no ordering
     * between the ranks is needed */
    for (int p = 0; p < n; p++)
        for (int k = 0; p != me && k < kinds; k++)
            CHECK_GOTO(mscclpp_regmem_send(comm, c->local[k], p, NATIVE_TAG_BASE + k), r, fail);
    for (int p = 0; p < n; p++)
        for (int k = 0; p != me && k < kinds; k++) {
            mscclpp_regmem_t **m = &c->remote[p * NATIVE_KINDS + k];
            CHECK_GOTO(mscclpp_regmem_recv(comm, p, NATIVE_TAG_BASE + k, m), r, fail);
            c->base[p * NATIVE_KINDS + k] = mscclpp_regmem_ptr(*m);
        }
    /* a rank that maps a peer's memory may still need that peer (the host backend fetches the
     * memory's descriptor from its process): nobody goes on until every mapping is done */
    CHECK_GOTO(mscclpp_bootstrap_barrier(comm->boot), r, fail);
    *out = c;
    return MSCCLPP_OK;
fail:
    ctx_free(np, c);
    return r;
}

/* Agree on every rank's buffers (one all-gather) and fill peer_* of the call. */
static mscclpp_result_t peer_memory(native_plan_t *np, const void *send, void *recv,
                                    mscclpp_native_call_t *call)
{
    mscclpp_comm_t *comm = np->comm;
    const hal_ops_t *hal = comm->hal;
    int n = comm->nranks, me = comm->rank;
    void *ib = NULL, *ob = NULL;
    size_t is = 0, os = 0;
    if (hal->mem_range(send, &ib, &is) != MSCCLPP_OK || hal->mem_range(recv, &ob, &os) != MSCCLPP_OK
        || !is || !os) {
        core_clear_error();
        return ERR_ARG("native algorithm '%s' (rank %d): its buffers must be memory of the %s "
                       "backend (mscclpp_malloc), to be mapped by the other ranks",
                       np->algo->name, me, hal->name);
    }
    uint64_t *rec = &np->recs[me * NATIVE_REC];
    rec[0] = (uintptr_t)ib;
    rec[1] = is;
    rec[2] = (uintptr_t)ob;
    rec[3] = os;
    rec[4] = (uint64_t)((const char *)send - (const char *)ib);
    rec[5] = (uint64_t)((const char *)recv - (const char *)ob);
    CHECK(mscclpp_bootstrap_allgather(comm->boot, np->recs, NATIVE_REC * sizeof *np->recs));
    /* every rank sees the same records, so every rank finds (or misses) the same buffer set
     * in the executor's cache; a hit moves to the front, so the bounds drop the least recently
     * used (NATIVE_MAX_CTXS of this algorithm, MSCCLPP_EXEC_CONTEXTS of all entries), on every
     * rank alike, and a later call with it sets it up again on all ranks */
    mscclpp_executor_t *ex = np->exec;
    native_ctx_t *c = ctx_of(exec_cache_find(ex, &native_ctx_ops, np, np->recs));
    if (!c) {
        bool talked;
        CHECK(exec_cache_make_room(ex, &native_ctx_ops, np, &talked));
        uint64_t *key = malloc((size_t)n * 4 * sizeof *key);
        if (!key) return ERR(MSCCLPP_ERR_NO_MEMORY, "native '%s': out of memory", np->algo->name);
        for (int r = 0; r < n; r++) memcpy(&key[r * 4], &np->recs[r * NATIVE_REC], 4 * sizeof *key);
        mscclpp_result_t res = ctx_build(np, key, &c);
        free(key);
        CHECK(res);
        c->ce.ops = &native_ctx_ops;
        c->ce.owner = np;
        np->n_ctxs++;
        exec_cache_add(ex, &c->ce);
    }
    /* a graph captured now launches the algorithm's kernels with these mappings */
    if (ex->capturing) c->ce.pinned = true;
    void **pin = np->ptrs, **pout = np->ptrs + n, **pscr = np->ptrs + 2 * n;
    for (int r = 0; r < n; r++) {
        pin[r] = c->base[r * NATIVE_KINDS + 0] + np->recs[r * NATIVE_REC + 4];
        pout[r] = c->base[r * NATIVE_KINDS + 1] + np->recs[r * NATIVE_REC + 5];
        pscr[r] = np->scratch ? c->base[r * NATIVE_KINDS + 2] : NULL;
    }
    call->peer_input = pin;
    call->peer_output = pout;
    call->peer_scratch = np->scratch ? pscr : NULL;
    return MSCCLPP_OK;
}

mscclpp_result_t exec_native_execute(mscclpp_executor_t *ex, const struct mscclpp_plan *plan,
                                     const void *send, void *recv, size_t send_bytes,
                                     size_t recv_bytes, mscclpp_dtype_t dtype, mscclpp_redop_t op,
                                     int nblocks, int nthreads, int root,
                                     mscclpp_stream_t stream)
{
    CHECK_ARG(ex != NULL);
    CHECK_ARG(exec_native_of(plan));
    native_plan_t *np = (native_plan_t *)(uintptr_t)plan;
    const mscclpp_native_algorithm_t *a = np->algo;
    mscclpp_comm_t *comm = np->comm;
    CHECK_ARG((int)dtype >= 0 && dtype < MSCCLPP_DTYPE_COUNT);
    CHECK_ARG(op == MSCCLPP_REDOP_PLAN || ((int)op >= 0 && op < MSCCLPP_REDOP_COUNT));
    if (np->exec != ex)
        return ERR_ARG("native algorithm '%s' was registered with another executor", a->name);
    if (nblocks < 0 || nthreads < 0)
        return ERR_ARG("native algorithm '%s': nblocks %d and nthreads_per_block %d must be >= 0 "
                       "(0: the algorithm's)", a->name, nblocks, nthreads);
    if (root < 0 || root >= comm->nranks)
        return ERR_ARG("native algorithm '%s': root %d is not a rank of %d", a->name, root,
                       comm->nranks);
    if ((send_bytes && !send) || (recv_bytes && !recv))
        return ERR_ARG("native algorithm '%s': NULL buffer with a non-zero size", a->name);
    uint64_t msg = exec_message_size(a->collective, send_bytes, recv_bytes);
    if (msg < plan->min_message_size || msg > plan->max_message_size)
        return ERR_ARG("native algorithm '%s' accepts messages of %llu to %llu bytes, got %llu",
                       a->name, (unsigned long long)plan->min_message_size,
                       (unsigned long long)plan->max_message_size, (unsigned long long)msg);
    bool inplace =
        exec_call_in_place(a->collective, comm->rank, send, recv, send_bytes, recv_bytes);
    uint32_t need = inplace ? MSCCLPP_NATIVE_INPLACE : MSCCLPP_NATIVE_OUT_OF_PLACE;
    if (!(a->flags & need))
        return ERR(MSCCLPP_ERR_UNSUPPORTED, "native algorithm '%s' does not serve %s calls",
                   a->name, inplace ? "in-place" : "out-of-place");
    if (stream && stream->ops != comm->hal)
        return ERR_ARG("native algorithm '%s': stream of backend %s, the executor runs on %s",
                       a->name, stream->ops->name, comm->hal->name);
    /* an executor that an earlier collective broke (a plan's or a native algorithm's) runs
     * nothing more: the ranks no longer agree on where they are (mscclpp.h, mscclpp_execute) */
    CHECK(exec_check(ex));
    /* the in-place and out-of-place entries are one algorithm: share state and the broken flag */
    native_plan_t *owner = np->owner;
    if (owner->broken != MSCCLPP_OK)
        return core_error_quiet(owner->broken, "native algorithm '%s' broken by an earlier "
                                "error: %s; destroy the executor and communicator and create new "
                                "ones", a->name, owner->broken_msg);
    CHECK(call_init(owner));

    native_internal_t in;
    mscclpp_native_call_t call;
    call_base(owner, &in, &call);
    call.input = send;
    call.output = recv;
    call.input_bytes = send_bytes;
    call.output_bytes = recv_bytes;
    call.dtype = dtype;
    call.op = op == MSCCLPP_REDOP_PLAN ? MSCCLPP_SUM : op;
    call.root = root;
    if (nblocks) call.nblocks = nblocks;
    if (nthreads) call.nthreads_per_block = nthreads;
    call.scratch = owner->scratch;
    bool host = !strcmp(comm->hal->name, "host");
    if (host && ex->capturing)
        return ERR(MSCCLPP_ERR_UNSUPPORTED,
                   "native algorithm '%s': the host backend runs native "
                   "algorithms synchronously, so they cannot be captured into a graph",
                   a->name);
    /* a sync of the caller's stream asks this executor too: an error of this call is what
     * that sync returns as well, not only this call (for a capture: after each replay) */
    CHECK(ex->capturing ? hal_api_stream_note_capture(stream, ex->source)
                        : hal_api_stream_note(stream, ex->source));
    mscclpp_result_t r = MSCCLPP_OK;
    if (a->flags & MSCCLPP_NATIVE_PEER_MEMORY) {
        /* the per-call exchange is collective: a failure leaves the peers mid-call */
        r = peer_memory(owner, send, recv, &call);
        if (r != MSCCLPP_OK) goto broken;
    }
    hal_stream_t hs = hal_api_stream(stream);
    if (host) {
        /* the host backend runs the algorithm here, synchronously: order it after the work
         * the caller queued first */
        if (hs) {
            CHECK(comm->hal->stream_sync(hs));
            /* what it ran may have failed (a plan's launch that timed out): run nothing on
             * an executor that work broke */
            CHECK(exec_check(ex));
        }
        call.stream = NULL;
    } else {
        call.stream = hs;
    }
    core_clear_error();
    r = a->execute(&call);
    if (r != MSCCLPP_OK) {
        r = algo_error(owner, "execute", r);
        goto broken;
    }
    owner->seq++;
    if (!host && !hs) {
        /* a NULL stream means "wait" (mscclpp_execute): the module launched on the default
         * stream */
        r = comm->hal->stream_sync(NULL);
        if (r != MSCCLPP_OK) goto broken;
    }
    return MSCCLPP_OK;
broken:
    owner->broken = r;
    snprintf(owner->broken_msg, sizeof owner->broken_msg, "%s", mscclpp_last_error());
    /* a collective failed: the executor is broken for good, as after a plan's failure, so
     * that mscclpp_stream_synchronize, mscclpp_executor_get_async_error and every later call
     * report it too (the ranks may be anywhere in the bootstrap or in each other's memory) */
    return exec_poison(ex, r);
}
