/*
 * The communicator's memory bookkeeping: peer allocations mapped into this process (through the
 * cache beside the ipc transport, transports/ipc/ipc_map.h), the slabs of shareable memory
 * semaphore counters live in, and their release when the communicator goes. (The exchange of one
 * address with a peer is registered memory's: core/regmem.c.)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/debug.h"
#include "core/core.h"
#include "transports/ipc/ipc_map.h"

mscclpp_result_t comm_import(mscclpp_comm_t *comm, int owner, const hal_mem_handle_t *handle,
                             void **base, void **mapping)
{
    return ipc_map_import(comm->world.maps, owner, handle, base, mapping);
}

void comm_unmap_peer(mscclpp_comm_t *comm, void *mapping)
{
    ipc_map_release(comm->world.maps, mapping);
}

/* ---- counter slabs ----------------------------------------------------------------------- */

#define SLAB_SLOTS 512
#define SLAB_SLOT_BYTES 64

struct sem_slab {
    struct sem_slab *next;
    uint8_t *base;
    int used;
    uint8_t busy[SLAB_SLOTS];
};

struct slab_slot {
    struct sem_slab *slab;
    int index;
};

mscclpp_result_t comm_counter_alloc(mscclpp_comm_t *comm, uint64_t **counter, void **owner)
{
    mscclpp_result_t res = MSCCLPP_OK;
    struct slab_slot *slot = malloc(sizeof *slot);
    if (!slot) return ERR(MSCCLPP_ERR_NO_MEMORY, "semaphore: out of memory");
    pthread_mutex_lock(&comm->lock);
    struct sem_slab *s;
    for (s = comm->slabs; s && s->used == SLAB_SLOTS; s = s->next) {}
    if (!s) {
        s = calloc(1, sizeof *s);
        if (!s) {
            res = ERR(MSCCLPP_ERR_NO_MEMORY, "semaphore: out of memory");
            goto fail;
        }
        void *p = NULL;
        res = comm->hal->mem_alloc_shareable(SLAB_SLOTS * SLAB_SLOT_BYTES, &p);
        if (res != MSCCLPP_OK) {
            free(s);
            goto fail;
        }
        s->base = p;
        res = comm->hal->memset_sync(p, 0, SLAB_SLOTS * SLAB_SLOT_BYTES);
        if (res != MSCCLPP_OK) {
            comm->hal->mem_free(p);
            free(s);
            goto fail;
        }
        s->next = comm->slabs;
        comm->slabs = s;
    }
    int i = 0;
    while (s->busy[i]) i++;
    s->busy[i] = 1;
    s->used++;
    pthread_mutex_unlock(&comm->lock);
    slot->slab = s;
    slot->index = i;
    *counter = (uint64_t *)(s->base + (size_t)i * SLAB_SLOT_BYTES);
    /* a reused slot must start at zero again */
    CHECK(comm->hal->memset_sync(*counter, 0, sizeof(uint64_t)));
    *owner = slot;
    return MSCCLPP_OK;
fail:
    pthread_mutex_unlock(&comm->lock);
    free(slot);
    return res;
}

void comm_counter_free(mscclpp_comm_t *comm, void *owner)
{
    struct slab_slot *slot = owner;
    if (!slot) return;
    pthread_mutex_lock(&comm->lock);
    slot->slab->busy[slot->index] = 0;
    slot->slab->used--;
    pthread_mutex_unlock(&comm->lock);
    free(slot);
}

void comm_release_resources(mscclpp_comm_t *comm)
{
    ipc_map_destroy(comm->world.maps);
    comm->world.maps = NULL;
    while (comm->slabs) {
        struct sem_slab *s = comm->slabs;
        comm->slabs = s->next;
        comm->hal->mem_free(s->base);
        free(s);
    }
}
