/*
 * Plan making (internal): build the loaded-plan structs of executor/plan.h in memory, the way
 * the Python DSL records a program (plan-format §7), for the plans the executor makes for the
 * job at hand (executor/made.c).
 *
 * A maker records the ops of ONE rank, block by block, with chunk descriptors as the DSL does
 * (local buffer, or a peer's buffer through a channel type), channels as per-rank global
 * indices, and the data_sync bits of signal/wait/flush. Emitting runs the DSL's passes on every
 * block (fusion §7.5, data-sync nops §7.4, dependency nops §7.6, collapsed syncs) and instance
 * replication (§7.7, interleaved), so a program written against this API gives the plan the
 * DSL would write for the same calls. In "stub" mode the maker keeps only what connection setup
 * needs of a peer (its channels and the peer buffers it addresses), not its ops.
 *
 * Errors are sticky: recording calls do not return one; the first problem (a limit, no memory)
 * is kept and returned by plan_mk_emit.
 */
#ifndef MSCCLPP_EXECUTOR_PLAN_MAKE_H
#define MSCCLPP_EXECUTOR_PLAN_MAKE_H

#include <stdbool.h>
#include <stdint.h>

#include "executor/plan.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- the arena of loaded plans (plan_load.c) ----------------------------------------------- */

typedef struct plan_arena plan_arena_t;
plan_arena_t *plan_arena_new(void);
/** count x size zeroed bytes that live until plan_arena_destroy; NULL when out of memory. */
void *plan_arena_alloc(plan_arena_t *a, size_t count, size_t size);
void plan_arena_destroy(plan_arena_t *a);

/* ---- recording ------------------------------------------------------------------------------ */

#define PLAN_MK_SYNC_BEFORE 1u
#define PLAN_MK_SYNC_AFTER 2u
#define PLAN_MK_SYNC_BOTH 3u

/* DSL limits the passes keep (python/mscclpp/language/internal/passes.py) */
#define PLAN_MK_FUSE_CHANNELS 8 /* channels (or remote pairs) of a fused op */
#define PLAN_MK_FUSE_DESCS 10   /* descriptors of a fused reduce */

/** A chunk range: `size` chunks from `index` of buffer `buf` of rank `owner` (-1: my own). */
typedef struct {
    int32_t owner;  /* -1: local; else the peer (a remote descriptor) */
    uint8_t buf;    /* plan_buf_t */
    uint32_t index; /* first chunk */
    uint32_t size;  /* chunks */
} plan_mk_desc_t;

static inline plan_mk_desc_t plan_mk_local(int buf, uint32_t index, uint32_t size)
{
    return (plan_mk_desc_t){-1, (uint8_t)buf, index, size};
}

static inline plan_mk_desc_t plan_mk_remote(int owner, int buf, uint32_t index, uint32_t size)
{
    return (plan_mk_desc_t){owner, (uint8_t)buf, index, size};
}

typedef struct plan_mk plan_mk_t;

/**
 * A maker for rank `rank` of an `nranks`-rank plan, its ops replicated over `instances` thread
 * blocks (1: none); `stub`: resources only. Chunk counts are per instance (emitting multiplies
 * them). NULL when out of memory.
 */
plan_mk_t *plan_mk_new(int nranks, int rank, int instances, bool stub);
void plan_mk_free(plan_mk_t *mk);

int plan_mk_rank(const plan_mk_t *mk);
bool plan_mk_is_stub(const plan_mk_t *mk);

/** A stub made for rank `focus`'s part: it keeps the chunks of focus's buffers its packet puts
 *  write (plan_gpu_t.pkt_writes), the writers focus's packet waits name. */
void plan_mk_stub_focus(plan_mk_t *mk, int focus);

/** This rank's chunk counts (per instance); scratch grows with plan_mk_scratch too. */
void plan_mk_dims(plan_mk_t *mk, uint32_t input_chunks, uint32_t output_chunks,
                  uint32_t scratch_chunks);

/**
 * This rank's channel of `ctype` (PLAN_CH_MEMORY or PLAN_CH_PORT) to `peer`, created on first
 * use (one per peer and type; the peer makes its own to this rank, and the i-th of each
 * direction pair up, spec §5.2). Returns its global index.
 */
int plan_mk_chan(plan_mk_t *mk, int ctype, int peer);

/**
 * Declare that this rank addresses buffer `buf` of `owner` through its `ctype` channel (what a
 * transfer op records): for stubs, whose ops are not kept, a generator may declare its
 * resources without recording ops.
 */
void plan_mk_rbuf(plan_mk_t *mk, int ctype, int owner, int buf);

/** Signal / wait / flush on the channels to `peers` (one op each, fused by emitting). */
void plan_mk_signal(plan_mk_t *mk, int tb, int ctype, int peer, bool relaxed, unsigned sync);
void plan_mk_wait(plan_mk_t *mk, int tb, int ctype, int peer, bool relaxed, unsigned sync);
void plan_mk_flush(plan_mk_t *mk, int tb, int peer, unsigned sync);

/** A block-wide sync. */
void plan_mk_nop(plan_mk_t *mk, int tb);

/**
 * `type` over the channel of `ctype` to the peer of the remote descriptor: PLAN_OP_PUT, PWS,
 * PWSF, PPKT, RPPKT (dst remote, src local), PLAN_OP_GET (src remote, dst local).
 */
void plan_mk_xfer(plan_mk_t *mk, int tb, int type, int ctype, plan_mk_desc_t dst,
                  plan_mk_desc_t src);

/** Local ops: PLAN_OP_COPY, CPKT (to packets), UPKT (from packets). */
void plan_mk_copy(plan_mk_t *mk, int tb, int type, plan_mk_desc_t dst, plan_mk_desc_t src);

/**
 * dst = src (op) others[0] (op) ...: PLAN_OP_RE (plain operands) or PLAN_OP_REPKT (operands are
 * packets in scratch), all local; reduce_op MSCCLPP_REDOP_PLAN-style value (MSCCLPP_SUM...).
 */
void plan_mk_reduce(plan_mk_t *mk, int tb, bool packet, plan_mk_desc_t dst, plan_mk_desc_t src,
                    const plan_mk_desc_t *others, int n_others, int reduce_op);

/* ---- emitting ------------------------------------------------------------------------------- */

/**
 * Fill `g` (rank plan_mk_rank) from the maker: chunk counts, channels, remote buffers, and,
 * unless a stub, the blocks after the passes and replication. Allocations come from `arena`.
 * Returns the first recording error, or a limit of plan.h the result would break.
 */
mscclpp_result_t plan_mk_emit(plan_mk_t *mk, plan_arena_t *arena, plan_gpu_t *g);

/** The peers this rank has channels to (each once, ascending); returns how many (<= cap). */
int plan_mk_peers(const plan_mk_t *mk, int *peers, int cap);

#ifdef __cplusplus
}
#endif

#endif
