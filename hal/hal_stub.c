/*
 * The report behind every typed stub (HAL_DEFINE_STUBS in hal/hal.h) and the table checker.
 * Kept apart from the loader so a backend module can compile it in.
 */
#include <stddef.h>
#include <string.h>

#include "base/debug.h"
#include "hal/hal.h"

mscclpp_result_t hal_unsupported_op(const char *backend, const char *op)
{
    /* Callers often probe (multicast, graphs): record the message, log only at INFO. */
    INFO(SUBSYS_HAL, "%s: not supported by the %s backend", op, backend);
    return core_error_quiet(MSCCLPP_ERR_UNSUPPORTED, "%s: not supported by the %s backend", op,
                            backend);
}

typedef void (*hal_any_fn)(void);

static const struct {
    const char *name;
    size_t offset;
} slots[] = {
#define HAL_SLOT_ENTRY_(slot, params) {#slot, offsetof(hal_ops_t, slot)},
    HAL_OPS_SLOTS(HAL_SLOT_ENTRY_)
#undef HAL_SLOT_ENTRY_
    {"fini", offsetof(hal_ops_t, fini)},
};

/* Every function slot is listed once: the table is its header plus the slots, nothing else. */
#define HAL_NSLOTS_ (sizeof(slots) / sizeof(slots[0]))
_Static_assert(sizeof(hal_ops_t) == offsetof(hal_ops_t, init) + HAL_NSLOTS_ * sizeof(hal_any_fn),
               "HAL_OPS_SLOTS does not list every function slot of hal_ops_t");

mscclpp_result_t hal_ops_check(const hal_ops_t *ops, const char **bad)
{
    const char *what = NULL;
    if (!ops) what = "table";
    else if (ops->size < sizeof(hal_ops_t)) what = "size";
    else if (ops->abi_version != HAL_ABI_VERSION) what = "abi_version";
    else if (!ops->name || !ops->name[0]) what = "name";
    for (size_t i = 0; !what && i < sizeof(slots) / sizeof(slots[0]); i++) {
        hal_any_fn fn;
        memcpy(&fn, (const char *)ops + slots[i].offset, sizeof fn);
        if (!fn) what = slots[i].name;
    }
    if (bad) *bad = what;
    if (!what) return MSCCLPP_OK;
    if (!ops) return ERR_ARG("HAL table: NULL");
    if (!strcmp(what, "size"))
        return ERR_ARG("HAL table of backend '%s': size %zu is smaller than %zu (older module)",
                       ops->name ? ops->name : "?", ops->size, sizeof(hal_ops_t));
    if (!strcmp(what, "abi_version"))
        return ERR_ARG("HAL table of backend '%s': abi_version %d, expected %d",
                       ops->name ? ops->name : "?", ops->abi_version, HAL_ABI_VERSION);
    if (!strcmp(what, "name")) return ERR_ARG("HAL table: no backend name");
    return ERR_ARG("HAL table of backend '%s': slot %s is NULL", ops->name, what);
}
