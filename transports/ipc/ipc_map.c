/* The cache of peer allocations mapped into this process (ipc_map.h). */
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/debug.h"
#include "transports/ipc/ipc_map.h"

typedef struct ipc_entry {
    struct ipc_entry *next;
    int owner;
    hal_mem_handle_t handle;
    void *base;
    int refs;
} ipc_entry_t;

struct ipc_map {
    const hal_ops_t *hal;
    int rank; /* this process's rank, for messages */
    pthread_mutex_t lock;
    ipc_entry_t *entries;
};

mscclpp_result_t ipc_map_create(const hal_ops_t *hal, int rank, ipc_map_t **map)
{
    ipc_map_t *m = calloc(1, sizeof *m);
    if (!m) return ERR(MSCCLPP_ERR_NO_MEMORY, "ipc: out of memory");
    m->hal = hal;
    m->rank = rank;
    pthread_mutex_init(&m->lock, NULL);
    *map = m;
    return MSCCLPP_OK;
}

void ipc_map_destroy(ipc_map_t *map)
{
    if (!map) return;
    while (map->entries) {
        ipc_entry_t *e = map->entries;
        map->entries = e->next;
        map->hal->mem_unimport(e->base);
        free(e);
    }
    pthread_mutex_destroy(&map->lock);
    free(map);
}

static bool same_handle(const hal_mem_handle_t *a, const hal_mem_handle_t *b)
{
    return a->kind == b->kind && a->len == b->len && a->alloc_size == b->alloc_size &&
           memcmp(a->data, b->data, a->len) == 0;
}

mscclpp_result_t ipc_map_import(ipc_map_t *map, int owner, const hal_mem_handle_t *handle,
                                void **base, void **mapping)
{
    mscclpp_result_t res = MSCCLPP_OK;
    pthread_mutex_lock(&map->lock);
    ipc_entry_t *e;
    for (e = map->entries; e; e = e->next)
        if (e->owner == owner && same_handle(&e->handle, handle)) break;
    if (!e) {
        e = calloc(1, sizeof *e);
        if (!e) {
            res = ERR(MSCCLPP_ERR_NO_MEMORY, "ipc: out of memory");
            goto out;
        }
        res = map->hal->mem_import(handle, &e->base);
        if (res != MSCCLPP_OK) {
            free(e);
            /* the backend names a process (the fd broker's pid); the caller needs the rank.
             * Recorded, not logged: the owner may have exited because of another rank that
             * failed first, which the caller (comm_fail) looks for before it logs */
            char why[768];
            snprintf(why, sizeof why, "%s", mscclpp_last_error());
            res = core_error_quiet(res, "rank %d: cannot map the memory of rank %d: %s", map->rank,
                                   owner, why);
            core_set_culprit(owner);
            goto out;
        }
        e->owner = owner;
        e->handle = *handle;
        e->next = map->entries;
        map->entries = e;
        TRACE(SUBSYS_MEM, "rank %d: mapped %llu bytes of rank %d at %p", map->rank,
              (unsigned long long)handle->alloc_size, owner, e->base);
    }
    e->refs++;
    *base = e->base;
    *mapping = e;
out:
    pthread_mutex_unlock(&map->lock);
    return res;
}

void ipc_map_release(ipc_map_t *map, void *mapping)
{
    if (!mapping) return;
    pthread_mutex_lock(&map->lock);
    for (ipc_entry_t **pp = &map->entries; *pp; pp = &(*pp)->next) {
        if (*pp != mapping) continue;
        ipc_entry_t *e = *pp;
        if (--e->refs == 0) {
            *pp = e->next;
            map->hal->mem_unimport(e->base);
            free(e);
        }
        break;
    }
    pthread_mutex_unlock(&map->lock);
}
