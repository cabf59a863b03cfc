/*
 * libmscclpp_nccl's extension hook: what mscclpp.ext (Python) uses, in the process, to add DSL
 * plans to the NCCL-API library and to choose, per NCCL call, which algorithm serves it
 * (docs/nccl.md, "Choosing algorithms from Python"). These functions are exported by
 * libmscclpp_nccl.so, not by libmscclpp: a program that links or preloads the NCCL-API library
 * finds them there (Python: ctypes in the already-loaded library).
 *
 * Order of selection for a collective (seed 000): a registered DSL plan, then the library's own
 * algorithms (the default plans), then the real NCCL/RCCL of MSCCLPP_NCCL_LIB_PATH. A selector,
 * when set, decides per call which of those runs.
 */
#ifndef MSCCLPP_NCCL_EXT_H
#define MSCCLPP_NCCL_EXT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/** Interface version of this header (mscclpp_nccl_ext_version returns the library's). */
#define MSCCLPP_NCCL_EXT_VERSION 1

/** What a selector learns of one collective call (MSCCL++'s CollectiveRequest). */
typedef struct {
    const char *collective;   /**< "allreduce", "allgather", "reducescatter", "broadcast",
                               *   "alltoall" (ncclReduce asks as "allreduce") */
    uint64_t message_size;    /**< the NCCL count argument times the element size, bytes */
    int world_size;           /**< ranks of the communicator */
    int n_ranks_per_node;     /**< ranks on this node */
    int rank;                 /**< this rank */
    const void *input_buffer; /**< the caller's send buffer */
    void *output_buffer;      /**< the caller's receive buffer */
    void *stream;             /**< the caller's cudaStream_t / hipStream_t (NULL on the host) */
    int dtype;                /**< mscclpp_dtype_t of the call, -1 when there is none */
    int root;                 /**< broadcast/reduce root (the "root" hint), -1 otherwise */
} mscclpp_nccl_request_t;

/** A selector's answer besides a plan index (mscclpp_nccl_add_plan). */
enum {
    MSCCLPP_NCCL_SELECT_DEFAULT = -1,  /**< the order of selection above, from its start */
    MSCCLPP_NCCL_SELECT_NATIVE = -2,   /**< the library's own algorithms, then the real NCCL */
    MSCCLPP_NCCL_SELECT_FALLBACK = -3, /**< the real NCCL/RCCL (an error when there is none) */
};

/**
 * Choose for one call: the index of a plan added with mscclpp_nccl_add_plan (it must accept
 * the call: collective, world size, message size, in-place rules; otherwise the call fails
 * with ncclInvalidUsage naming the plan), or one of MSCCLPP_NCCL_SELECT_*. Runs in the thread
 * that made the NCCL call, under that communicator's lock; it must not call NCCL on it.
 */
typedef int (*mscclpp_nccl_selector_fn)(const mscclpp_nccl_request_t *request, void *user);

/** The interface version the library implements (MSCCLPP_NCCL_EXT_VERSION it was built with). */
int mscclpp_nccl_ext_version(void);

/**
 * Add a plan (JSON text of `len` bytes, as mscclpp.compile writes it) for every communicator
 * of the process, present and future; *index (may be NULL) gets its index for selectors.
 * Without a selector, plans added here are tried first, in the order added, for every call
 * they accept. Returns 0 (mscclpp_result_t) or the plan loader's error.
 */
int mscclpp_nccl_add_plan(const char *json, size_t len, int *index);

/** Set the selector (NULL: none, the order of selection applies). Returns 0. */
int mscclpp_nccl_set_selector(mscclpp_nccl_selector_fn fn, void *user);

/**
 * Forget the selector and every added plan (mscclpp.ext.AlgorithmCollectionBuilder.reset):
 * later calls select as if none was ever added. Indices are not reused. Returns 0.
 */
int mscclpp_nccl_ext_reset(void);

/** How many collective calls added plan `index` served in this process (tests check which
 * plan ran). Returns 0, or MSCCLPP_ERR_INVALID_ARG for an index never given. */
int mscclpp_nccl_plan_calls(int index, uint64_t *calls);

#ifdef __cplusplus
}
#endif

#endif /* MSCCLPP_NCCL_EXT_H */
