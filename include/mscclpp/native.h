/*
 * libmscclpp — native algorithms: collectives written as C, CUDA or HIP code.
 *
 * A native algorithm is a function the executor calls instead of interpreting a plan. It lives
 * in a shared module (gcc, nvcc or hipcc output; `mscclpp.compile_native` in Python builds and
 * caches one) that exports, through MSCCLPP_NATIVE_MODULE(), an ABI version and a table of
 * algorithms. The library loads the module with dlopen (mscclpp_native_load), checks the ABI
 * version, and registers its algorithms in an executor's registry
 * (mscclpp_executor_register_native), where they are selected by collective, rank count,
 * in-place and message size exactly like plans, tuned like plans (mscclpp-bench --tune, the
 * tuning table names them) and run through the same calls (mscclpp_execute_launch, and the
 * collectives such as mscclpp_allreduce when chosen).
 *
 * The module needs no link to libmscclpp: everything it may call in the library comes through
 * the services table of each call. Only the types of <mscclpp/mscclpp.h> are used.
 *
 * ABI rules (MSCCLPP_NATIVE_ABI_VERSION): fields are only ever appended to the structs below;
 * each struct the library hands over starts with its own size, so a module can tell which
 * fields exist. A change that is not an append bumps the version, and the library refuses a
 * module built for another version (MSCCLPP_ERR_UNSUPPORTED, naming both versions).
 *
 * A minimal module (see examples/native/ for a complete allreduce):
 *
 *     #include <mscclpp/native.h>
 *     static mscclpp_result_t run(const mscclpp_native_call_t *call) { ... return MSCCLPP_OK; }
 *     static const mscclpp_native_algorithm_t algos[] = {
 *         {.name = "my_allreduce", .collective = "allreduce",
 *          .flags = MSCCLPP_NATIVE_INPLACE | MSCCLPP_NATIVE_OUT_OF_PLACE |
 *                   MSCCLPP_NATIVE_PEER_MEMORY,
 *          .scratch_bytes = 1 << 20, .execute = run},
 *     };
 *     MSCCLPP_NATIVE_MODULE(algos)
 */
#ifndef MSCCLPP_NATIVE_H
#define MSCCLPP_NATIVE_H

#include <stddef.h>
#include <stdint.h>

#include "mscclpp/mscclpp.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Version of the structs and symbols below. Version 1: libmscclpp 0.1. */
#define MSCCLPP_NATIVE_ABI_VERSION 1u

/** Algorithm flags (mscclpp_native_algorithm_t.flags). */
enum {
    MSCCLPP_NATIVE_INPLACE = 1u << 0,     /**< serves calls with input == output */
    MSCCLPP_NATIVE_OUT_OF_PLACE = 1u << 1, /**< serves calls with distinct buffers */
    /**
     * Wants every rank's input, output and scratch mapped into this process
     * (mscclpp_native_call_t.peer_input and friends). The library registers and exchanges the
     * buffers the first time a set of allocations is seen (a context, cached like a plan's) and
     * exchanges the per-call offsets on every call (one bootstrap all-gather), so the ranks may
     * pass buffers at different offsets of their allocations. Only ranks of one node (shared
     * memory, CUDA/HIP IPC) can be mapped: on several nodes such an algorithm is refused.
     */
    MSCCLPP_NATIVE_PEER_MEMORY = 1u << 2,
};

struct mscclpp_native_call;

/**
 * What the library offers a native algorithm during a call (and during init). Every function
 * takes the call it was handed. Waits are bounded by MSCCLPP_TIMEOUT (timeout_ns).
 */
typedef struct mscclpp_native_services {
    uint32_t size; /**< sizeof(mscclpp_native_services_t) of the library */
    /** Host-side barrier of every rank of the communicator (over the bootstrap). */
    mscclpp_result_t (*barrier)(const struct mscclpp_native_call *call);
    /** Host-side all-gather: data holds nranks slots of bytes_per_rank (see bootstrap). */
    mscclpp_result_t (*allgather)(const struct mscclpp_native_call *call, void *data,
                                  size_t bytes_per_rank);
    /**
     * Record an error for mscclpp_last_error() (printf-style) and return `result`; the library
     * prefixes it with the algorithm's name and rank when the algorithm returns the error.
     */
    mscclpp_result_t (*report_error)(mscclpp_result_t result, const char *fmt, ...)
        __attribute__((format(printf, 2, 3)));
    /** Log at INFO (MSCCLPP_DEBUG=INFO shows it). */
    void (*log_info)(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
    uint64_t timeout_ns; /**< the bound of every wait (MSCCLPP_TIMEOUT) */
} mscclpp_native_services_t;

/** One call of a native algorithm (and, with no buffers, its init). Valid during the call. */
typedef struct mscclpp_native_call {
    uint32_t size;        /**< sizeof(mscclpp_native_call_t) of the library */
    uint32_t abi_version; /**< MSCCLPP_NATIVE_ABI_VERSION of the library */
    const mscclpp_native_services_t *services;
    void *internal;       /**< the library's; pass the call to the services */
    mscclpp_comm_t *comm; /**< the communicator (its public API works from the module only
                           *   when the module links libmscclpp) */
    mscclpp_executor_t *executor;
    const char *backend;  /**< "host", "cuda" or "hip" */
    int rank, nranks, nranks_per_node;
    const void *input;    /**< this rank's buffers (device memory on GPU backends) */
    void *output;
    size_t input_bytes, output_bytes;
    mscclpp_dtype_t dtype;
    mscclpp_redop_t op;   /**< never MSCCLPP_REDOP_PLAN: that becomes MSCCLPP_SUM */
    int root;             /**< broadcast and reduce root; 0 otherwise */
    /** Launch shape: the caller's (execute(..., nblocks, nthreads_per_block), the tuning
     * table), else the algorithm's defaults; 0 when neither gives one. */
    int nblocks, nthreads_per_block;
    /**
     * cudaStream_t / hipStream_t to launch on (NULL: the legacy default stream; the library
     * then waits for the device after the call). NULL on the host backend, where the call runs
     * synchronously: the library has waited for the caller's stream first.
     */
    void *stream;
    void *state; /**< what init stored for this executor (NULL without init) */
    /**
     * With MSCCLPP_NATIVE_PEER_MEMORY: nranks pointers each, indexed by rank, the entry of
     * this rank being its own buffer: every rank's input and output of this call, and every
     * rank's scratch (scratch_bytes each). NULL otherwise.
     */
    void *const *peer_input;
    void *const *peer_output;
    void *const *peer_scratch;
    void *scratch;        /**< this rank's scratch (device memory), or NULL */
    size_t scratch_bytes; /**< the algorithm's scratch_bytes */
    uint64_t seq;         /**< calls of this algorithm on this executor before this one */
} mscclpp_native_call_t;

/** One algorithm of a module. Unused fields are zero. */
typedef struct mscclpp_native_algorithm {
    const char *name;       /**< selectable name (tuning tables, Python), unique in a module */
    const char *collective; /**< "allreduce", "allgather", "reducescatter", "alltoall",
                             *   "broadcast" (message sizes as for plans) */
    uint32_t flags;         /**< MSCCLPP_NATIVE_*; at least one of INPLACE, OUT_OF_PLACE */
    int min_ranks, max_ranks;                  /**< 0: no bound */
    uint64_t min_message_size, max_message_size; /**< bytes; max 0: no bound */
    size_t scratch_bytes;   /**< device memory per rank the library allocates (0: none) */
    int nblocks, nthreads_per_block; /**< defaults of the launch shape (0: none) */
    /**
     * Called once per executor at registration (no buffers, seq 0) to set up *state; may be
     * NULL. A failure makes the registration fail with the algorithm's message.
     */
    mscclpp_result_t (*init)(const mscclpp_native_call_t *call, void **state);
    /** Run one call. Collective: every rank calls it with the same sizes. Required. */
    mscclpp_result_t (*execute)(const mscclpp_native_call_t *call);
    /** Release what init made (when the executor goes or the module is destroyed). */
    void (*fini)(void *state);
} mscclpp_native_algorithm_t;

/** The table a module exports (symbol "mscclpp_native_module"). */
typedef struct mscclpp_native_module_desc {
    uint32_t abi_version; /**< MSCCLPP_NATIVE_ABI_VERSION the module was built with */
    uint32_t count;
    const mscclpp_native_algorithm_t *algorithms;
} mscclpp_native_module_desc_t;

#ifdef __cplusplus
#define MSCCLPP_NATIVE_EXPORT extern "C" __attribute__((visibility("default")))
#else
#define MSCCLPP_NATIVE_EXPORT __attribute__((visibility("default")))
#endif

/**
 * Export `algos` (an array of mscclpp_native_algorithm_t) and the ABI version the module is
 * built with: symbols "mscclpp_native_abi_version" (checked first, at load) and
 * "mscclpp_native_module". Use once per module, at file scope.
 */
#define MSCCLPP_NATIVE_MODULE(algos)                                                           \
    MSCCLPP_NATIVE_EXPORT const uint32_t mscclpp_native_abi_version =                         \
        MSCCLPP_NATIVE_ABI_VERSION;                                                            \
    MSCCLPP_NATIVE_EXPORT const mscclpp_native_module_desc_t mscclpp_native_module = {        \
        MSCCLPP_NATIVE_ABI_VERSION, (uint32_t)(sizeof(algos) / sizeof((algos)[0])), (algos)};

/* ---------------------------------------------------------------------------------------------
 * Loading and registering (the library's side)
 * ------------------------------------------------------------------------------------------- */

typedef struct mscclpp_native mscclpp_native_t;

/**
 * Load a module with dlopen and check it: MSCCLPP_ERR_SYSTEM when it cannot be opened (the
 * dlerror text), MSCCLPP_ERR_INVALID_ARG when a symbol is missing or an algorithm is malformed
 * (no name, an unknown collective, no execute, no in-place flag, duplicate names),
 * MSCCLPP_ERR_UNSUPPORTED when it was built for another MSCCLPP_NATIVE_ABI_VERSION.
 */
MSCCLPP_API mscclpp_result_t mscclpp_native_load(const char *path, mscclpp_native_t **mod);

/**
 * Unload a module. Destroy the executors it is registered with first (their registries keep
 * its algorithms, as they keep plans). Safe on NULL.
 */
MSCCLPP_API mscclpp_result_t mscclpp_native_destroy(mscclpp_native_t *mod);

/** Number of algorithms of a module (0 for NULL). */
MSCCLPP_API int mscclpp_native_count(const mscclpp_native_t *mod);
/** Name and collective of algorithm `i`, or NULL when out of range. */
MSCCLPP_API const char *mscclpp_native_name(const mscclpp_native_t *mod, int i);
MSCCLPP_API const char *mscclpp_native_collective(const mscclpp_native_t *mod, int i);

/**
 * Register algorithm `name` of `mod` (NULL: every algorithm of the module) in the registry of
 * `exec`, the executor over `comm` (its calls use that communicator's bootstrap), as
 * mscclpp_executor_register_plan registers a plan (before the default plans, after the plans
 * registered earlier: the first match wins). The
 * collectives, mscclpp_executor_select_plan, mscclpp_executor_list_plans and the tuner then
 * see it. Runs the algorithm's init (collective when init talks to the other ranks). *plan
 * (may be NULL) gets a handle of the (last) algorithm registered: pass it to
 * mscclpp_execute_launch (or mscclpp_execute); mscclpp_plan_name and the other plan queries
 * work on it; it belongs to the module (mscclpp_plan_destroy does nothing to it).
 * MSCCLPP_ERR_UNSUPPORTED when the communicator's rank count is outside the algorithm's
 * bounds or it wants peer memory on ranks of several nodes; MSCCLPP_ERR_INVALID_ARG for an
 * unknown name.
 */
MSCCLPP_API mscclpp_result_t mscclpp_executor_register_native(mscclpp_executor_t *exec,
                                                              mscclpp_comm_t *comm,
                                                              mscclpp_native_t *mod,
                                                              const char *name,
                                                              int ranks_per_node,
                                                              const char *tags,
                                                              const mscclpp_plan_t **plan);

/**
 * Release what the native algorithms registered with `exec` hold for it (peer mappings,
 * scratch, the state their init made), before the executor's communicator is destroyed. They
 * stay registered and set up again on their next call. mscclpp_native_destroy does the same
 * for every executor. Safe on NULL.
 */
MSCCLPP_API mscclpp_result_t mscclpp_executor_release_natives(mscclpp_executor_t *exec);

/** 1 when `plan` is a native algorithm's handle, 0 for a plan loaded from JSON (or NULL). */
MSCCLPP_API int mscclpp_plan_is_native(const mscclpp_plan_t *plan);

#ifdef __cplusplus
}
#endif

#endif /* MSCCLPP_NATIVE_H */
