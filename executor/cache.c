/*
 * The executor's one cache (executor/cache.h): plan contexts and native algorithms' buffer sets
 * in one list, most recently used first, bounded by MSCCLPP_EXEC_CONTEXTS. The list is changed
 * by the thread that runs the executor's calls, under ex->lock, since a stream sync may walk
 * the contexts from another thread (state.c).
 */
#include <stdint.h>

#include "base/config.h"
#include "base/debug.h"
#include "executor/exec.h"
#include "hal/hal_api.h"

static void unlink_locked(exec_cache_t *k, exec_cache_entry_t *e)
{
    k->gen++; /* whoever kept a pointer to it looks it up again (executor.c's fast path) */
    if (e->prev) e->prev->next = e->next;
    else k->head = e->next;
    if (e->next) e->next->prev = e->prev;
    else k->tail = e->prev;
    e->prev = e->next = NULL;
}

static void push_front_locked(exec_cache_t *k, exec_cache_entry_t *e)
{
    e->prev = NULL;
    e->next = k->head;
    if (k->head) k->head->prev = e;
    else k->tail = e;
    k->head = e;
}

exec_cache_entry_t *exec_cache_find(mscclpp_executor_t *ex, const exec_cache_ops_t *ops,
                                    const void *owner, const void *key)
{
    exec_cache_entry_t *e = ex->cache.head;
    while (e && !(e->ops == ops && e->owner == owner && ops->match(e, key))) e = e->next;
    if (e && e != ex->cache.head) {
        pthread_mutex_lock(&ex->lock);
        unlink_locked(&ex->cache, e);
        push_front_locked(&ex->cache, e);
        pthread_mutex_unlock(&ex->lock);
    }
    return e;
}

void exec_cache_add(mscclpp_executor_t *ex, exec_cache_entry_t *e)
{
    pthread_mutex_lock(&ex->lock);
    push_front_locked(&ex->cache, e);
    pthread_mutex_unlock(&ex->lock);
}

void exec_cache_changed(mscclpp_executor_t *ex) { ex->cache.gen++; }

void exec_cache_bury(mscclpp_executor_t *ex, exec_cache_entry_t *e)
{
    e->prev = NULL;
    e->next = ex->cache.dead;
    ex->cache.dead = e;
}

/* Free the entries of list `gone` (linked by next), or bury them: pinned ones, and all with
 * `keep` (what queued work may still read could not be waited for). */
static void release(mscclpp_executor_t *ex, exec_cache_entry_t *gone, bool keep)
{
    while (gone) {
        exec_cache_entry_t *e = gone;
        gone = e->next;
        if (e->pinned || keep) exec_cache_bury(ex, e);
        else e->ops->free(ex, e);
    }
}

void exec_cache_remove(mscclpp_executor_t *ex, exec_cache_entry_t *e)
{
    pthread_mutex_lock(&ex->lock);
    unlink_locked(&ex->cache, e);
    pthread_mutex_unlock(&ex->lock);
    release(ex, e, false);
}

/* Whether evicting e may be decided here: not pinned, and not an entry of a point-to-point
 * executor that needs all ranks. */
static bool evictable(const mscclpp_executor_t *ex, const exec_cache_entry_t *e)
{
    return !e->pinned && !(ex->p2p && e->ops->collective);
}

mscclpp_result_t exec_cache_make_room(mscclpp_executor_t *ex, const exec_cache_ops_t *ops,
                                      const void *owner, bool *talked)
{
    *talked = false;
    /* during a capture nothing can be waited for: the bound applies again at the first miss
     * after it */
    if (exec_cannot_drain(ex)) return MSCCLPP_OK;
    int64_t cap = config_get_int(CFG_MSCCLPP_EXEC_CONTEXTS);
    int64_t total = 0, mine = 0;
    for (exec_cache_entry_t *e = ex->cache.head; e; e = e->next) {
        if (!evictable(ex, e)) continue;
        total++;
        mine += e->ops == ops && e->owner == owner;
    }
    /* how many must go so that one more fits: first the owner's own, oldest first, then
     * anyone's */
    int64_t need_own = ops->per_owner > 0 ? mine - (ops->per_owner - 1) : 0;
    int64_t need_all = cap > 0 ? total - (cap - 1) : 0;
    if (need_own <= 0 && need_all <= 0) return MSCCLPP_OK;
    /* launches queued on the executor's streams may use them */
    CHECK(hal_api_source_drain(ex->source));
    exec_cache_entry_t *gone = NULL;
    bool collective = false;
    int dropped = 0;
    pthread_mutex_lock(&ex->lock);
    for (int pass = 0; pass < 2; pass++)
        for (exec_cache_entry_t *e = ex->cache.tail, *prev; e; e = prev) {
            prev = e->prev;
            if (!evictable(ex, e)) continue;
            bool own = e->ops == ops && e->owner == owner;
            if (pass == 0 ? !(own && need_own > 0) : need_all <= 0) continue;
            need_own -= own;
            need_all--;
            collective |= e->ops->collective;
            unlink_locked(&ex->cache, e);
            e->next = gone;
            gone = e;
            dropped++;
        }
    pthread_mutex_unlock(&ex->lock);
    mscclpp_result_t r = MSCCLPP_OK;
    if (collective) {
        /* peers may still read our memory of an evicted context (a rank that ran ahead, a
         * launch queued on a peer's stream): every rank drained its own streams above, and
         * nothing is freed before all are here */
        *talked = true;
        r = mscclpp_bootstrap_barrier(ex->comm->boot);
    }
    /* after a failed barrier a peer may still be in our memory: keep it until the executor
     * goes */
    release(ex, gone, r != MSCCLPP_OK);
    if (dropped)
        INFO(SUBSYS_EXEC,
             "rank %d: dropped the %d least recently used cache entr%s (making room for a %s; "
             "MSCCLPP_EXEC_CONTEXTS=%lld)",
             ex->comm->rank, dropped, dropped == 1 ? "y" : "ies", ops->what, (long long)cap);
    return r;
}

mscclpp_result_t exec_cache_forget(mscclpp_executor_t *ex, const void *base, int *n)
{
    *n = 0;
    bool any = false;
    for (exec_cache_entry_t *e = ex->cache.head; e && !any; e = e->next)
        any = e->ops->holds(e, base);
    if (!any) return MSCCLPP_OK;
    /* a capturing stream cannot be waited for: then nothing is freed here (below) */
    bool defer = exec_cannot_drain(ex);
    if (!defer) CHECK(hal_api_source_drain(ex->source));
    exec_cache_entry_t *gone = NULL;
    pthread_mutex_lock(&ex->lock); /* against a concurrent stream check */
    for (exec_cache_entry_t *e = ex->cache.head, *next; e; e = next) {
        next = e->next;
        if (!e->ops->holds(e, base)) continue;
        unlink_locked(&ex->cache, e);
        e->next = gone;
        gone = e;
        (*n)++;
    }
    pthread_mutex_unlock(&ex->lock);
    release(ex, gone, defer);
    return MSCCLPP_OK;
}

void exec_cache_clear(mscclpp_executor_t *ex, bool dead_too)
{
    pthread_mutex_lock(&ex->lock);
    exec_cache_entry_t *list = ex->cache.head;
    ex->cache.head = ex->cache.tail = NULL;
    ex->cache.gen++;
    pthread_mutex_unlock(&ex->lock);
    if (!dead_too) {
        release(ex, list, false); /* a reset: what graphs launch with stays */
        return;
    }
    for (exec_cache_entry_t *e = list, *next; e; e = next) {
        next = e->next;
        e->ops->free(ex, e);
    }
    for (exec_cache_entry_t *e = ex->cache.dead, *next; e; e = next) {
        next = e->next;
        e->ops->free(ex, e);
    }
    ex->cache.dead = NULL;
}

int exec_cache_drop_owner(mscclpp_executor_t *ex, const void *owner)
{
    exec_cache_entry_t *gone = NULL;
    int n = 0;
    pthread_mutex_lock(&ex->lock);
    for (exec_cache_entry_t *e = ex->cache.head, *next; e; e = next) {
        next = e->next;
        if (e->owner != owner) continue;
        unlink_locked(&ex->cache, e);
        e->next = gone;
        gone = e;
    }
    pthread_mutex_unlock(&ex->lock);
    for (exec_cache_entry_t **pp = &ex->cache.dead; *pp;) {
        exec_cache_entry_t *e = *pp;
        if (e->owner != owner) {
            pp = &e->next;
            continue;
        }
        *pp = e->next;
        e->next = gone;
        gone = e;
    }
    for (exec_cache_entry_t *e = gone, *next; e; e = next) {
        next = e->next;
        e->ops->free(ex, e);
        n++;
    }
    return n;
}
