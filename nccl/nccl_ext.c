/*
 * libmscclpp_nccl: the extension hook of include/mscclpp/nccl_ext.h (mscclpp.ext talks to it
 * from Python with ctypes). Process-wide: plans added here serve every communicator, and one
 * selector decides for every call. The collectives ask shim_ext_choose (nccl_coll.c, run_ours).
 *
 * Added plans live until the process ends, also after mscclpp_nccl_ext_reset: executors key
 * their contexts by plan, so a plan's address must never come back as another plan's.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "nccl/nccl_internal.h"

typedef struct {
    mscclpp_plan_t *plan;
    uint64_t calls; /* collective calls it served (atomic) */
    bool live;      /* false after a reset */
} ext_plan_t;

static pthread_mutex_t ext_lock = PTHREAD_MUTEX_INITIALIZER;
static ext_plan_t *plans;
static int nplans, cap_plans;
static mscclpp_nccl_selector_fn selector;
static void *selector_user;

#define EXT_API __attribute__((visibility("default")))

EXT_API int mscclpp_nccl_ext_version(void) { return MSCCLPP_NCCL_EXT_VERSION; }

EXT_API int mscclpp_nccl_add_plan(const char *json, size_t len, int *index)
{
    if (index) *index = -1;
    if (!json || !len) {
        shim_quiet_error(ncclInvalidArgument, "mscclpp_nccl_add_plan: no plan text");
        return MSCCLPP_ERR_INVALID_ARG;
    }
    mscclpp_plan_t *p = NULL;
    mscclpp_result_t r = mscclpp_plan_load_string(json, len, &p);
    if (r != MSCCLPP_OK) {
        shim_info("mscclpp_nccl_add_plan: %s", mscclpp_last_error());
        return r;
    }
    pthread_mutex_lock(&ext_lock);
    if (nplans == cap_plans) {
        int cap = cap_plans ? 2 * cap_plans : 8;
        ext_plan_t *t = realloc(plans, (size_t)cap * sizeof *t);
        if (!t) {
            pthread_mutex_unlock(&ext_lock);
            mscclpp_plan_destroy(p);
            shim_quiet_error(ncclSystemError, "mscclpp_nccl_add_plan: out of memory");
            return MSCCLPP_ERR_NO_MEMORY;
        }
        plans = t;
        cap_plans = cap;
    }
    int i = nplans++;
    plans[i] = (ext_plan_t){.plan = p, .calls = 0, .live = true};
    pthread_mutex_unlock(&ext_lock);
    if (index) *index = i;
    shim_info("DSL plan '%s' (%s, %d ranks) added as %d", mscclpp_plan_name(p),
              mscclpp_plan_collective(p), mscclpp_plan_world_size(p), i);
    return MSCCLPP_OK;
}

EXT_API int mscclpp_nccl_set_selector(mscclpp_nccl_selector_fn fn, void *user)
{
    pthread_mutex_lock(&ext_lock);
    selector = fn;
    selector_user = user;
    pthread_mutex_unlock(&ext_lock);
    return MSCCLPP_OK;
}

EXT_API int mscclpp_nccl_ext_reset(void)
{
    pthread_mutex_lock(&ext_lock);
    selector = NULL;
    selector_user = NULL;
    for (int i = 0; i < nplans; i++) plans[i].live = false;
    pthread_mutex_unlock(&ext_lock);
    return MSCCLPP_OK;
}

EXT_API int mscclpp_nccl_plan_calls(int index, uint64_t *calls)
{
    if (!calls) return MSCCLPP_ERR_INVALID_ARG;
    pthread_mutex_lock(&ext_lock);
    bool ok = index >= 0 && index < nplans;
    if (ok) *calls = __atomic_load_n(&plans[index].calls, __ATOMIC_RELAXED);
    pthread_mutex_unlock(&ext_lock);
    return ok ? MSCCLPP_OK : MSCCLPP_ERR_INVALID_ARG;
}

/* Whether added plan `p` serves this call by its description (the executor checks the rest). */
static bool plan_fits(const mscclpp_plan_t *p, const char *coll, int nranks, uint64_t msg)
{
    const char *pc = mscclpp_plan_collective(p);
    return pc && !strcmp(pc, coll) && mscclpp_plan_world_size(p) == nranks &&
           msg >= mscclpp_plan_min_message_size(p) && msg <= mscclpp_plan_max_message_size(p);
}

ncclResult_t shim_ext_choose(ncclComm_t c, const mscclpp_nccl_request_t *req, uint64_t msg,
                             shim_ext_choice_t *out)
{
    memset(out, 0, sizeof *out);
    out->index = -1;
    out->choice = MSCCLPP_NCCL_SELECT_DEFAULT;
    pthread_mutex_lock(&ext_lock);
    mscclpp_nccl_selector_fn fn = selector;
    void *user = selector_user;
    int n = nplans;
    pthread_mutex_unlock(&ext_lock);
    if (!n && !fn) return ncclSuccess;
    int pick = MSCCLPP_NCCL_SELECT_DEFAULT;
    /* called without the lock: a Python selector may add plans */
    if (fn) pick = fn(req, user);
    pthread_mutex_lock(&ext_lock);
    ncclResult_t res = ncclSuccess;
    if (pick >= 0) {
        if (pick >= nplans || !plans[pick].live) {
            res =
                shim_error(ncclInvalidUsage, "%s: the selector chose plan %d, which %s",
                           req->collective, pick, pick >= nplans ? "was never added" : "was reset");
        } else if (!plan_fits(plans[pick].plan, req->collective, c->nranks, msg)) {
            const mscclpp_plan_t *p = plans[pick].plan;
            res = shim_error(ncclInvalidUsage,
                             "%s of %llu bytes on %d ranks: the selector chose DSL plan '%s' "
                             "(%s, %d ranks, %llu to %llu bytes), which does not serve it",
                             req->collective, (unsigned long long)req->message_size, c->nranks,
                             mscclpp_plan_name(p), mscclpp_plan_collective(p),
                             mscclpp_plan_world_size(p),
                             (unsigned long long)mscclpp_plan_min_message_size(p),
                             (unsigned long long)mscclpp_plan_max_message_size(p));
        } else {
            out->plan = plans[pick].plan;
            out->index = pick;
            out->selected = true;
        }
    } else if (pick == MSCCLPP_NCCL_SELECT_DEFAULT) {
        /* the first live plan that serves the call */
        for (int i = 0; i < nplans && !out->plan; i++)
            if (plans[i].live && plan_fits(plans[i].plan, req->collective, c->nranks, msg)) {
                out->plan = plans[i].plan;
                out->index = i;
            }
    } else if (pick == MSCCLPP_NCCL_SELECT_NATIVE || pick == MSCCLPP_NCCL_SELECT_FALLBACK) {
        out->choice = pick;
    } else {
        res = shim_error(ncclInvalidUsage,
                         "%s: the selector returned %d, not a plan index or "
                         "MSCCLPP_NCCL_SELECT_*",
                         req->collective, pick);
    }
    pthread_mutex_unlock(&ext_lock);
    return res;
}

void shim_ext_ran(int index)
{
    pthread_mutex_lock(&ext_lock);
    if (index >= 0 && index < nplans) __atomic_add_fetch(&plans[index].calls, 1, __ATOMIC_RELAXED);
    pthread_mutex_unlock(&ext_lock);
}
