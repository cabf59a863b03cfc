/*
 * Native modules for tests/native/test_native.c, one per variant (-DVARIANT_*):
 *   PROBE    an allreduce that writes what it was called with (launch shape, root, op, dtype,
 *            rank, seq) into its output, without talking to the other ranks;
 *   FAILING  an allreduce that fails, with a message (report_error) or without one;
 *   BAD_ABI  a module built for another ABI version;
 *   NO_SYMS  a shared object without the module symbols.
 */
#include <stdint.h>
#include <string.h>

#include <mscclpp/native.h>

#if defined(VARIANT_PROBE)
static mscclpp_result_t probe(const mscclpp_native_call_t *c)
{
    int32_t v[10] = {c->nblocks, c->nthreads_per_block, c->root, (int32_t)c->op,
                     (int32_t)c->dtype, c->rank, c->nranks, (int32_t)c->seq,
                     c->peer_input != NULL, c->abi_version == MSCCLPP_NATIVE_ABI_VERSION};
    if (c->output_bytes < sizeof v)
        return c->services->report_error(MSCCLPP_ERR_INVALID_ARG, "probe needs %zu output bytes",
                                          sizeof v);
    memcpy(c->output, v, sizeof v);
    return MSCCLPP_OK;
}

static const mscclpp_native_algorithm_t algos[] = {
    {.name = "probe_allreduce", .collective = "allreduce",
     .flags = MSCCLPP_NATIVE_INPLACE | MSCCLPP_NATIVE_OUT_OF_PLACE, .nblocks = 7,
     .nthreads_per_block = 96, .execute = probe},
    {.name = "probe_broadcast", .collective = "broadcast",
     .flags = MSCCLPP_NATIVE_INPLACE | MSCCLPP_NATIVE_OUT_OF_PLACE, .execute = probe},
};
MSCCLPP_NATIVE_MODULE(algos)

#elif defined(VARIANT_FAILING)
static mscclpp_result_t fail_msg(const mscclpp_native_call_t *c)
{
    return c->services->report_error(MSCCLPP_ERR_REMOTE, "deliberate failure on rank %d, call %llu",
                                     c->rank, (unsigned long long)c->seq);
}

static mscclpp_result_t fail_silent(const mscclpp_native_call_t *c)
{
    (void)c;
    return (mscclpp_result_t)42; /* not a result code at all */
}

static mscclpp_result_t init_fails(const mscclpp_native_call_t *c, void **state)
{
    (void)state;
    return c->services->report_error(MSCCLPP_ERR_SYSTEM, "init could not open its device");
}

static const mscclpp_native_algorithm_t algos[] = {
    {.name = "fail_msg", .collective = "allreduce", .flags = MSCCLPP_NATIVE_OUT_OF_PLACE,
     .execute = fail_msg},
    {.name = "fail_silent", .collective = "allreduce", .flags = MSCCLPP_NATIVE_OUT_OF_PLACE,
     .execute = fail_silent},
    {.name = "init_fails", .collective = "allreduce", .flags = MSCCLPP_NATIVE_OUT_OF_PLACE,
     .init = init_fails, .execute = fail_silent},
};
MSCCLPP_NATIVE_MODULE(algos)

#elif defined(VARIANT_BAD_ABI)
static mscclpp_result_t nothing(const mscclpp_native_call_t *c)
{
    (void)c;
    return MSCCLPP_OK;
}
static const mscclpp_native_algorithm_t algos[] = {
    {.name = "future", .collective = "allreduce", .flags = MSCCLPP_NATIVE_OUT_OF_PLACE,
     .execute = nothing},
};
/* what a module built against a later header would export */
MSCCLPP_NATIVE_EXPORT const uint32_t mscclpp_native_abi_version = 99;
MSCCLPP_NATIVE_EXPORT const mscclpp_native_module_desc_t mscclpp_native_module = {99, 1, algos};

#else /* VARIANT_NO_SYMS */
__attribute__((visibility("default"))) int not_a_native_module(void) { return 1; }
#endif
