/*
 * In-process multi-rank harness for the plan interpreter: N ranks of one loaded plan run as
 * threads of this process (every thread block of every rank on its own thread, through
 * kern_host_run_block), with plain malloc'ed buffers; each rank's resources point straight at
 * the other ranks' buffers and counters. Used by test_kernels and meant as the seed of the
 * conformance suite: kh_check_collective() fills inputs, runs a plan and checks every element
 * of every rank against the expected collective.
 */
#ifndef MSCCLPP_TESTS_KERN_HARNESS_H
#define MSCCLPP_TESTS_KERN_HARNESS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "executor/lower.h"
#include "executor/plan.h"

/** How input and output of each rank lie in memory. */
typedef enum {
    KH_SEPARATE = 0,  /**< distinct buffers */
    KH_INPLACE,       /**< input == output (allreduce, alltoall in place) */
    KH_INPLACE_AG,    /**< input = output + rank * out_bytes / N (allgather in place) */
    KH_INPLACE_RS,    /**< output = input + rank * in_bytes / N (reducescatter in place) */
} kh_layout_t;

typedef enum { KH_ALLREDUCE, KH_ALLGATHER, KH_REDUCESCATTER, KH_ALLTOALL } kh_coll_t;

typedef struct kh_world kh_world_t;

/** Load a plan from JSON text (the executor's loader); NULL on error (message printed). */
struct mscclpp_plan *kh_plan_load(const char *json);
/** Load a plan file; NULL on error. */
struct mscclpp_plan *kh_plan_load_file(const char *path);

/** A world for `plan` (plan->nranks ranks): states, channel counters. The plan is borrowed. */
mscclpp_result_t kh_world_create(const struct mscclpp_plan *plan, kh_world_t **world);
void kh_world_destroy(kh_world_t *w);

/**
 * (Re)allocate every rank's input/output for these sizes and layout, zeroed, with guard bytes
 * around them; grows the scratch buffers (zeroed) when these sizes need more.
 */
mscclpp_result_t kh_world_buffers(kh_world_t *w, size_t in_bytes, size_t out_bytes,
                                  mscclpp_dtype_t dtype, kh_layout_t layout);
void *kh_input(kh_world_t *w, int rank);
void *kh_output(kh_world_t *w, int rank);
void *kh_scratch(kh_world_t *w, int rank);
kern_state_t *kh_state(kh_world_t *w, int rank);
/** Signal counters of rank's memory channel g: inbound (received) and expected (consumed). */
void kh_channel_counts(kh_world_t *w, int rank, int g, uint64_t *inbound, uint64_t *expected);

/**
 * One launch on every rank: lower (dtype of kh_world_buffers), run all blocks of all ranks
 * concurrently, join, then report the first recorded error (lowest rank first).
 * timeout_ns 0 = MSCCLPP_TIMEOUT.
 */
mscclpp_result_t kh_run(kh_world_t *w, mscclpp_redop_t op, mscclpp_packet_t packet,
                        uint64_t timeout_ns);

/** exec_lower() for `rank` of the world with its resources, as kh_run lowers it. */
mscclpp_result_t kh_lower(kh_world_t *w, int rank, mscclpp_redop_t op, mscclpp_packet_t packet,
                          uint64_t timeout_ns, exec_lowered_t **out);

/** Launch without the blob's per-block layout (args.blk_* cleared): every block finds its ops
 *  through the plan's header, from the same blob (kern_args.h, KERN_LAYOUT_*). */
void kh_set_no_layout(kh_world_t *w, bool off);

/** Hand every rank's next launches this proxy FIFO (a kern_fifo_t; NULL: none), as a context
 *  with port channels does; no proxy thread serves it. */
void kh_set_fifo(kh_world_t *w, void *fifo);

/**
 * Run every block as `nth` host threads (kern_host_run_block_simt) that stride over the data
 * as a GPU block's threads do; 0 or 1: one thread per block, as the host backend runs.
 */
void kh_set_threads(kh_world_t *w, int nth);
/** Threads per block of the worlds created from now on in this process (default 1). */
void kh_set_default_threads(int nth);
/**
 * Run as a GPU backend whose kernel takes at most `max` threads per block (0: off): the lowering
 * gets it as exec_resources_t.max_threads (capping the plan's num_threads_per_block) and every
 * block then runs as the lowered count of host threads, instead of kh_set_threads's.
 */
void kh_set_kernel_max_threads(kh_world_t *w, int max);
/** Host threads per block of the last kh_run (the lowered count under a kernel maximum). */
int kh_last_threads(const kh_world_t *w);

/** Guard bytes around every buffer untouched? Otherwise false and a message. */
bool kh_guards_ok(kh_world_t *w, char *msg, size_t cap);

/** Re-initialise states and channel counters (after a failed launch). */
void kh_world_reset(kh_world_t *w);

/* ---- element helpers ---- */
size_t kh_dtype_size(mscclpp_dtype_t dt);
double kh_get(const void *buf, size_t i, mscclpp_dtype_t dt);
/** Store v converted (round to nearest even; integers wrap). */
void kh_set(void *buf, size_t i, mscclpp_dtype_t dt, double v);
/** Tolerance scale of plan-format §8 (0 for integers). */
double kh_eps(mscclpp_dtype_t dt);
/** Test pattern of element i of rank r in iteration it, chosen so that `op` stays in range. */
double kh_pattern(int r, size_t i, int it, mscclpp_dtype_t dt, mscclpp_redop_t op);
/** a op b in double (integers: exact, wrapped to the type). */
double kh_apply(double a, double b, mscclpp_dtype_t dt, mscclpp_redop_t op);

/**
 * Conformance check: `count` elements per rank (allreduce: per buffer; allgather: per rank
 * input; reducescatter: per rank output; alltoall: per peer block), `iters` launches with
 * fresh data each, every element of every rank's output checked (bit-exact for moves and
 * integers, plan-format §8 tolerance for floats) and the guards checked. in-place layouts as the
 * reference tests build them. Returns MSCCLPP_OK, the launch error, or MSCCLPP_ERR_INTERNAL
 * with a message in msg for a wrong element.
 */
mscclpp_result_t kh_check_collective(kh_world_t *w, kh_coll_t coll, size_t count,
                                     mscclpp_dtype_t dt, mscclpp_redop_t op,
                                     mscclpp_packet_t packet, bool inplace, int iters,
                                     char *msg, size_t cap);
/**
 * kh_check_collective with the reduction of the expected result given apart from the call's:
 * `op` MSCCLPP_REDOP_PLAN runs each op of the plan with its own reduce_op (sum where it has
 * none), checked against `ref`.
 */
mscclpp_result_t kh_check_collective_ref(kh_world_t *w, kh_coll_t coll, size_t count,
                                         mscclpp_dtype_t dt, mscclpp_redop_t op,
                                         mscclpp_redop_t ref, mscclpp_packet_t packet,
                                         bool inplace, int iters, char *msg, size_t cap);

#endif
