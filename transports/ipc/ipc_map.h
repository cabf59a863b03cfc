/*
 * The peer allocations mapped into this process, one cache per communicator: each allocation a
 * peer exported (a HAL handle) is mapped once and counted, whoever asks for it (the ipc
 * transport's remote keys, registered memory, semaphores). It sits beside the ipc transport,
 * below core, and needs only the HAL.
 */
#ifndef MSCCLPP_TRANSPORTS_IPC_MAP_H
#define MSCCLPP_TRANSPORTS_IPC_MAP_H

#include "hal/hal.h"
#include "mscclpp/mscclpp.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ipc_map ipc_map_t;

/** An empty cache mapping through `hal` for `rank` (named in its messages). */
mscclpp_result_t ipc_map_create(const hal_ops_t *hal, int rank, ipc_map_t **map);
/** Unmap whatever is left and free the cache. Safe on NULL. */
void ipc_map_destroy(ipc_map_t *map);

/**
 * Map the allocation `owner` exported as `handle` (once per cache; thread-safe): its base in
 * this process, and `mapping`, the reference to give back with ipc_map_release().
 */
mscclpp_result_t ipc_map_import(ipc_map_t *map, int owner, const hal_mem_handle_t *handle,
                                void **base, void **mapping);
/** Drop a reference from ipc_map_import(); the last one unmaps. Safe on a NULL mapping. */
void ipc_map_release(ipc_map_t *map, void *mapping);

#ifdef __cplusplus
}
#endif

#endif /* MSCCLPP_TRANSPORTS_IPC_MAP_H */
