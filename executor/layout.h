/*
 * Layout: where a plan's chunks lie in bytes for one call (chunk size, the grouped layout of
 * per-rank blocks, scratch size and halves), and how a plan op splits into interpreter ops
 * when its descriptors' bytes do not line up. It depends on the plan and the call's sizes
 * only: the context sizes its scratch with it, the lowering places descriptors with it, and
 * the error decoder maps a recorded interpreter op back to the plan's op with it.
 */
#ifndef MSCCLPP_EXECUTOR_LAYOUT_H
#define MSCCLPP_EXECUTOR_LAYOUT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "executor/plan.h"
#include "mscclpp/mscclpp.h"

#ifdef __cplusplus
extern "C" {
#endif

/**
 * Chunk size in bytes for these message sizes (plan-format §3.1, our tail rule). Granule W = the
 * element size, at least 4 bytes when the plan uses packets. A buffer of S bytes and C chunks is
 * G rank blocks of S/G bytes, each split into C/G chunks: G = nranks for the output of
 * allgather, the input of reducescatter and both sides of alltoall, else 1. CS = S/C when C
 * divides S into multiples of W (then chunk c = [c*CS, (c+1)*CS), the reference's layout), else
 * ceil((S/G)/(C/G)) rounded up to lcm(buffer_alignment, W); chunk c of input or output =
 * block c/(C/G) at (c/(C/G))*(S/G), sub-chunk c%(C/G) at + (c%(C/G))*CS, clipped to the block
 * (may be empty); scratch chunk c at c*CS. Input side if input_chunks > 0, else output. Errors
 * (INVALID_ARG): sizes not multiples of the element size; rounded chunks on a side with G > 1
 * whose C is not a multiple of G or whose S/G is not a multiple of W; input and output chunk
 * sizes that differ, or that need rounding while the two sides' blocks differ (chunks per block,
 * bytes per block).
 */
mscclpp_result_t exec_chunk_bytes(const struct mscclpp_plan *plan, int rank, size_t in_bytes,
                                  size_t out_bytes, mscclpp_dtype_t dtype, uint64_t *chunk);

/**
 * Whether exec_chunk_bytes accepts these sizes and dtype on `rank`, without setting an error:
 * a packet plan refuses rank blocks that are not whole 4-byte words, and a collective call then
 * falls to the next registered plan (exec_registry_select_fit).
 */
bool exec_layout_fits(const struct mscclpp_plan *plan, int rank, size_t in_bytes,
                      size_t out_bytes, mscclpp_dtype_t dtype);

/**
 * Scratch bytes `rank` needs for these sizes: scratch_chunks * chunk, x2 when the plan uses
 * packets (protocol LL or any packet op), x2 with use_double_scratch_buffer, rounded up to 64.
 */
mscclpp_result_t exec_scratch_bytes(const struct mscclpp_plan *plan, int rank, size_t in_bytes,
                                    size_t out_bytes, mscclpp_dtype_t dtype, uint64_t *bytes);

/** Scratch a context on allocations of these sizes allocates: enough for the largest call
 *  they allow (capped by the plan's max_message_size). */
uint64_t exec_scratch_for_allocs(const struct mscclpp_plan *plan, int rank, uint64_t in_alloc,
                                 uint64_t out_alloc, mscclpp_dtype_t dtype);

static inline uint64_t exec_round_up(uint64_t v, uint64_t a) { return a ? (v + a - 1) / a * a : v; }

/** Bytes of one element, 0 for an invalid dtype. */
uint64_t exec_elem_size(mscclpp_dtype_t dt);

/** Op types that read or write LL packets. */
bool exec_op_is_packet(int type);

/** Granule of chunk offsets: the element size, at least 4 bytes when the plan moves packets. */
uint64_t exec_size_word(const struct mscclpp_plan *plan, uint64_t es);

/** Byte layout of the input or output buffer for one call. */
typedef struct {
    uint64_t size;   /**< S */
    uint32_t chunks; /**< C; 0 when the plan gives none (then chunk c is at c*cs, clipped) */
    uint32_t groups; /**< G */
    uint32_t per;    /**< C/G */
    uint64_t gsize;  /**< S/G */
    uint64_t cs;     /**< chunk size (the same on both sides) */
    bool exact;      /**< CS * C == S */
} exec_side_t;

/** Offset of chunk c (c <= C: the end of the last chunk is S) in a side's layout. */
uint64_t exec_side_off(const exec_side_t *sd, uint64_t c);

/** Everything the lowering needs to place descriptors for one call of one rank. */
typedef struct {
    uint64_t in, out;    /**< the call's sizes */
    uint64_t es;         /**< element size */
    uint64_t word;       /**< exec_size_word() */
    uint64_t unit;       /**< lcm(buffer_alignment, word): tbg slices */
    uint64_t cs;         /**< chunk size */
    exec_side_t si, so;  /**< input and output layouts */
    bool pkt;            /**< the plan uses packets: scratch doubles */
    uint64_t half;       /**< double scratch: this call's half (max over ranks), else 0 */
    uint64_t scratch;    /**< scratch bytes this rank needs (exec_scratch_bytes()) */
    uint64_t *scr_owner; /**< per rank: its logical scratch (bound of peers' scratch) */
} exec_layout_t;

/** The layout of a call (errors of exec_chunk_bytes); release with exec_layout_free(). */
mscclpp_result_t exec_layout_get(const struct mscclpp_plan *plan, int rank, size_t in_bytes,
                                 size_t out_bytes, mscclpp_dtype_t dtype, exec_layout_t *lay);

void exec_layout_free(exec_layout_t *lay);

/* ---- splitting plan ops into several interpreter ops ---------------------------------------
 *
 * A kern op moves one length per descriptor. Two cases need more than one kern op per plan op:
 *   - pairs: put/ppkt/pws/pwsf/get move src[k] -> dst[k]; when the pairs can differ in length
 *     (different chunks, e.g. a short last chunk next to full ones), each pair becomes its own
 *     kern op;
 *   - chunks: a descriptor spanning rank blocks of a grouped layout is contiguous in its buffer
 *     but skips the unused tail of each short chunk in scratch slots (or in a buffer with other
 *     blocks); when such descriptors meet descriptors of another layout, a plain or packet
 *     copy/put/get becomes one kern op per chunk.
 * The decision depends on the plan only (never on the sizes), so that the error decoder can map
 * a recorded kern op index back to the plan's op index. Reduce ops never split: their
 * descriptors all carry the same result range, so the minimum length is the right one; one that
 * would need a chunk split is refused when the sizes make the layouts differ.
 */
typedef struct {
    bool pairs;                      /**< one unit per pair, else one unit for the whole op */
    int n_units;                     /**< units (pairs or 1) */
    uint32_t pieces[PLAN_MAX_DESCS]; /**< kern ops per unit (chunks, or 1) */
    bool conflict;                   /**< needs a chunk split it cannot have */
    uint32_t count;                  /**< kern ops in all */
} exec_split_t;

/** How op i of block `blk` of `rank` splits. */
void exec_op_split(const struct mscclpp_plan *plan, int rank, const plan_block_t *blk, int i,
                   exec_split_t *sp);

/** Plan op index of kern op `kop` of block b (-1 if out of range). */
int exec_plan_op_of(const struct mscclpp_plan *plan, int rank, int b, int kop);

/** Does d span rank blocks of a grouped layout (so that, in bytes, it may skip short tails)?
 *  *per: chunks per block. */
bool exec_desc_gapped(const struct mscclpp_plan *plan, int rank, const plan_desc_t *d,
                      uint32_t *per);

#ifdef __cplusplus
}
#endif

#endif /* MSCCLPP_EXECUTOR_LAYOUT_H */
