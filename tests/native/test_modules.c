/*
 * Native modules for tests/native/test_native.c, one per variant (-DVARIANT_*):
 *   PROBE    an allreduce that writes what it was called with (launch shape, root, op, dtype,
 *            rank, seq) into its output, without talking to the other ranks;
 *   FAILING  an allreduce that fails, with a message (report_error) or without one; one that
 *            waits for a flag no rank sets, bounded by the services' timeout_ns as native.h
 *            asks of a module; one whose rank 0 alone enters the services' barrier;
 *   BAD_ABI  a module built for another ABI version;
 *   NO_SYMS  a shared object without the module symbols.
 */
#include <stdint.h>
#include <string.h>
#include <time.h>

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

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Wait for a word of the next rank's scratch that nobody writes: a module's own wait on peer
 * memory, which only the module can bound (with the timeout_ns the library hands it). */
static mscclpp_result_t hang_flag(const mscclpp_native_call_t *c)
{
    int peer = (c->rank + 1) % c->nranks;
    const volatile uint64_t *flag = c->peer_scratch[peer];
    uint64_t t0 = now_ns();
    while (*flag != 0xf1a9f1a9u) {
        uint64_t dt = now_ns() - t0;
        if (dt > c->services->timeout_ns)
            return c->services->report_error(MSCCLPP_ERR_TIMEOUT, "rank %d waited %.3f s "
                                             "(timeout_ns %llu) for rank %d's flag", c->rank,
                                             (double)dt / 1e9,
                                             (unsigned long long)c->services->timeout_ns, peer);
        struct timespec nap = {0, 100000};
        nanosleep(&nap, NULL);
    }
    return MSCCLPP_OK;
}

/* Rank 0 enters the library's barrier, the others return at once: the barrier is bounded. */
static mscclpp_result_t barrier_alone(const mscclpp_native_call_t *c)
{
    return c->rank == 0 ? c->services->barrier(c) : MSCCLPP_OK;
}

static const mscclpp_native_algorithm_t algos[] = {
    {.name = "hang_flag", .collective = "allreduce",
     .flags = MSCCLPP_NATIVE_OUT_OF_PLACE | MSCCLPP_NATIVE_PEER_MEMORY, .scratch_bytes = 4096,
     .execute = hang_flag},
    {.name = "barrier_alone", .collective = "allreduce", .flags = MSCCLPP_NATIVE_OUT_OF_PLACE,
     .execute = barrier_alone},
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
