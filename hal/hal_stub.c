/*
 * The report behind every typed stub (HAL_DEFINE_STUBS in hal/hal.h). Kept apart from the loader
 * so a backend module can compile it in; the loader's table check is hal.c's (hal_ops_check).
 */
#include "base/debug.h"
#include "hal/hal.h"

mscclpp_result_t hal_unsupported_op(const char *backend, const char *op)
{
    /* Callers often probe (multicast, graphs): record the message, log only at INFO. */
    INFO(SUBSYS_HAL, "%s: not supported by the %s backend", op, backend);
    return core_error_quiet(MSCCLPP_ERR_UNSUPPORTED, "%s: not supported by the %s backend", op,
                            backend);
}
