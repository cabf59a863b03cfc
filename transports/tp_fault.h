/*
 * Test-only fault injection over the transports (tp_fault.c, MSCCLPP_TEST_TRANSPORT_FAULT):
 * internal to transports/, used by the registry when it hands out a table.
 */
#ifndef MSCCLPP_TRANSPORTS_TP_FAULT_H
#define MSCCLPP_TRANSPORTS_TP_FAULT_H

#include "transports/transport.h"

/** `raw`, transport `id`'s own table, or, while MSCCLPP_TEST_TRANSPORT_FAULT injects a fault,
 *  the wrapper over it (the same for every call). Decided once per process (again after fork). */
const tp_ops_t *tp_fault_wrap(int id, const tp_ops_t *raw);

#endif /* MSCCLPP_TRANSPORTS_TP_FAULT_H */
