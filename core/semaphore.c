/* Memory-based semaphores: my inbound counter lives in my shareable memory; the peer maps it. */
#include <stdio.h>
#include <stdlib.h>

#include "core/core.h"
#include "base/debug.h"

MSCCLPP_API mscclpp_result_t mscclpp_semaphore_create(mscclpp_comm_t *comm, int peer, int tag,
                                                      mscclpp_semaphore_t **sem)
{
    CHECK_ARG(comm != NULL);
    CHECK_ARG(sem != NULL);
    CHECK_ARG(peer >= 0 && peer < comm->nranks);
    *sem = NULL;
    if (peer == comm->rank) return ERR_ARG("semaphore: rank %d cannot pair with itself", peer);
    mscclpp_result_t res;
    mscclpp_semaphore_t *s = calloc(1, sizeof *s);
    if (!s) return ERR(MSCCLPP_ERR_NO_MEMORY, "semaphore: out of memory");
    s->comm = comm;
    s->pair.peer = peer;
    s->pair.tag = tag;
    CHECK_GOTO(comm_counter_alloc(comm, &s->pair.inbound, &s->slot_owner), res, fail);
    void *theirs = NULL;
    CHECK_GOTO(comm_exchange_address(comm, peer, tag, s->pair.inbound, sizeof(uint64_t), &theirs,
                                     &s->peer_mapping),
               res, fail_counter);
    s->pair.outbound = theirs;
    *sem = s;
    return MSCCLPP_OK;
fail_counter:
    comm_counter_free(comm, s->slot_owner);
fail:
    free(s);
    return res;
}

MSCCLPP_API mscclpp_result_t mscclpp_semaphore_destroy(mscclpp_semaphore_t *sem)
{
    if (!sem) return MSCCLPP_OK;
    comm_unmap_peer(sem->comm, sem->peer_mapping);
    comm_counter_free(sem->comm, sem->slot_owner);
    free(sem);
    return MSCCLPP_OK;
}
