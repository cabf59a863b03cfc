/*
 * The executor's one cache of what it keeps per set of buffers (issue 21 item 2): a plan's
 * contexts (context.c: scratch, counters, peer mappings, device state) and a native algorithm's
 * peer mappings (native.c) are entries of one list, most recently used first, bounded together
 * by MSCCLPP_EXEC_CONTEXTS, and mscclpp_executor_forget walks it once.
 *
 * An entry is embedded in its owner's object (exec_context_t, native.c's buffer sets) and tells
 * the cache what it is through its ops: how to match a key (opaque to the cache), whether it
 * holds an allocation, how to free it, whether evicting it needs every rank at a barrier, and a
 * bound per owner (a native algorithm keeps at most so many buffer sets of its own).
 *
 * Every rank makes the same calls, so every rank hits, misses and evicts alike: the bound drops
 * the same entries everywhere, and a later call with them builds them again on every rank.
 * An entry a captured graph uses is pinned: never evicted, and once dropped (forget, reset) kept
 * with the dead ones until the executor goes. During a capture nothing is evicted (nothing can
 * be waited for): the bound applies again at the first miss after it.
 */
#ifndef MSCCLPP_EXECUTOR_CACHE_H
#define MSCCLPP_EXECUTOR_CACHE_H

#include <stdbool.h>

#include "mscclpp/mscclpp.h"

typedef struct exec_cache_entry exec_cache_entry_t;

/* What an entry is (its owner's walks pick theirs out of the list without a call). */
typedef enum { EXEC_CACHE_CONTEXT, EXEC_CACHE_NATIVE } exec_cache_kind_t;

typedef struct {
    exec_cache_kind_t kind;
    const char *what; /* for logs: "context", "native buffer set" */
    /* evicting one needs every rank at a barrier first: peers may still read the memory it
     * frees (a context's scratch); a point-to-point executor never evicts these (its ranks
     * cannot all meet) */
    bool collective;
    /* entries of one owner kept at most (0: only the executor's bound) */
    int per_owner;
    /* whether e is the entry of `key` (the owner's own key type) */
    bool (*match)(const exec_cache_entry_t *e, const void *key);
    /* whether e holds this rank's allocation starting at `base` */
    bool (*holds)(const exec_cache_entry_t *e, const void *base);
    /* release e and what it holds; every launch that could use it has ended */
    void (*free)(mscclpp_executor_t *ex, exec_cache_entry_t *e);
} exec_cache_ops_t;

struct exec_cache_entry {
    exec_cache_entry_t *prev, *next; /* the list (the dead list: next only) */
    const exec_cache_ops_t *ops;
    const void *owner; /* the plan (or native algorithm) it serves */
    bool pinned;       /* a captured graph uses it: never evicted, freed with the executor */
};

typedef struct {
    exec_cache_entry_t *head, *tail; /* most recently used first */
    /* dropped, but what they hold may still be used (a graph, a peer mid-setup, work queued
     * during a capture): freed with the executor */
    exec_cache_entry_t *dead;
    /* counts every entry taken out of the list (and every change an owner says invalidates
     * what it handed out, exec_cache_changed): equal counts, every entry seen is still live */
    uint64_t gen;
} exec_cache_t;

/* The entry of (ops, owner, key), moved to the front; NULL on a miss. */
exec_cache_entry_t *exec_cache_find(mscclpp_executor_t *ex, const exec_cache_ops_t *ops,
                                    const void *owner, const void *key);

/* Add a new entry (e->ops and e->owner set) at the front. */
void exec_cache_add(mscclpp_executor_t *ex, exec_cache_entry_t *e);

/*
 * Before an entry of (ops, owner) is added (on a miss, which every rank makes alike): evict the
 * least recently used entries until it fits the owner's bound and MSCCLPP_EXEC_CONTEXTS. The
 * executor's streams are drained first (their error is returned and nothing is evicted), and,
 * when an evicted entry is collective, every rank meets at a barrier (*talked is then true: a
 * failure after it leaves the peers elsewhere).
 */
mscclpp_result_t exec_cache_make_room(mscclpp_executor_t *ex, const exec_cache_ops_t *ops,
                                      const void *owner, bool *talked);

/*
 * Drop every entry that holds this rank's allocation at `base` (mscclpp_executor_forget, a
 * staging buffer or an allocation that was freed); *n gets how many. The launches queued on the
 * executor's streams end first (their error is returned and nothing is dropped); when they
 * cannot be waited for (a capture) and for pinned entries, what is dropped goes to the dead.
 */
mscclpp_result_t exec_cache_forget(mscclpp_executor_t *ex, const void *base, int *n);

/* Take `e` out of the list (the caller drained what used it): freed, or dead when pinned. */
void exec_cache_remove(mscclpp_executor_t *ex, exec_cache_entry_t *e);

/* Keep `e`, not in the list, with the dead until the executor goes. */
void exec_cache_bury(mscclpp_executor_t *ex, exec_cache_entry_t *e);

/* Drop every entry: pinned ones go to the dead; with dead_too the dead are freed as well and
 * nothing is kept (the executor goes). */
void exec_cache_clear(mscclpp_executor_t *ex, bool dead_too);

/* Free every entry of `owner`, dead ones included (the owner goes). How many. */
int exec_cache_drop_owner(mscclpp_executor_t *ex, const void *owner);

/* Something an entry holds changed (a context's lowered plans were flushed): pointers into
 * entries taken before are stale (the generation moves on). */
void exec_cache_changed(mscclpp_executor_t *ex);

#endif /* MSCCLPP_EXECUTOR_CACHE_H */
