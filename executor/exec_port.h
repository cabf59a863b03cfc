/*
 * Port channels of an executor context (executor/exec_port.c): transport connections to the
 * peers, the counters their signals set, the remote keys of the buffers port puts write, and
 * the proxy thread that executes the interpreter's triggers (core/proxy.h).
 */
#ifndef MSCCLPP_EXECUTOR_EXEC_PORT_H
#define MSCCLPP_EXECUTOR_EXEC_PORT_H

#include <stdbool.h>
#include <stdint.h>

#include "core/core.h"
#include "executor/lower.h"
#include "executor/plan.h"

typedef struct exec_port exec_port_t;

/** True when some rank of the plan uses port channels (then every rank builds its part). */
bool exec_port_needed(const struct mscclpp_plan *plan);

/* What exec_port_create would refuse before talking to anyone: allocations above 4 GiB, a
 * port peer no transport reaches. `lbytes`: input, output and scratch allocation sizes. */
mscclpp_result_t exec_port_check(mscclpp_comm_t *comm, const struct mscclpp_plan *plan, int vrank,
                                 int rotation, const uint64_t lbytes[3]);

/**
 * Build the port channels of virtual rank `vrank` (physical rank = (v + rotation) % n):
 * connect to every peer a port channel or port remote buffer relates us to (transport chosen
 * per pair, transports/transport.h), register the local buffers `lptr[t]` (`lbytes[t]` bytes;
 * input, output, scratch allocations) and the counters, exchange keys on the bootstrap with
 * `tag`, and start the proxy. Collective over the plan's ranks.
 */
mscclpp_result_t exec_port_create(mscclpp_comm_t *comm, const struct mscclpp_plan *plan, int vrank,
                                  int rotation, void *const lptr[3], const uint64_t lbytes[3],
                                  int tag, exec_port_t **out);

/**
 * Fill the port fields of `res` for a call whose buffers sit at in-allocation offsets
 * peer_off[t][v] (t: input, output; v: virtual rank).
 */
mscclpp_result_t exec_port_fill(exec_port_t *p, uint64_t *const peer_off[2],
                                exec_resources_t *res);

/** The proxy's first error (re-recorded with its message), or MSCCLPP_OK. */
mscclpp_result_t exec_port_error(exec_port_t *p);
/** When the proxy has been inside one transport call for `min_ns` or longer: true, and `buf`
 *  says which (the operation, its peer and port channel, for how long, what waits behind it).
 *  For the message of a launch that timed out while the proxy never failed. */
bool exec_port_stuck(exec_port_t *p, uint64_t min_ns, char *buf, size_t cap);
/** Wait (bounded) until the proxy handled every trigger pushed so far, then exec_port_error. */
mscclpp_result_t exec_port_drain(exec_port_t *p);

/** Stop the proxy, close connections, release registrations. Safe on NULL. */
void exec_port_destroy(exec_port_t *p);

#endif
