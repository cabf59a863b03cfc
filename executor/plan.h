/*
 * A loaded execution plan (internal): the JSON of docs/plan-format.md turned into flat,
 * fixed-size structs, validated once at load time. Chunk indices stay abstract here; the
 * executor turns them into bytes per call (executor/lower.c).
 *
 * Every index in a loaded plan is in range: a plan that loads is safe to run.
 */
#ifndef MSCCLPP_EXECUTOR_PLAN_H
#define MSCCLPP_EXECUTOR_PLAN_H

#include <stdbool.h>
#include <stdint.h>

#include "mscclpp/mscclpp.h"

#ifdef __cplusplus
extern "C" {
#endif

/*
 * Limits checked at load (P19). MSCCL++'s executor has fixed per-block tables (plan-format §5.6: 64 ops
 * per block, 10 descriptors per op); ours streams ops and descriptors from a blob, so the op
 * and descriptor limits are only sanity bounds sized for 64-rank plans (a reduce over 64 ranks
 * has 64 sources; a packet reduce-copy-send 2 + 63 destinations). The DSL's `--target mscclpp`
 * keeps MSCCL++'s limits for plans meant for MSCCL++.
 */
#define PLAN_MAX_OPS_PER_BLOCK 65535 /* including flattened pipeline bodies (n_inner: 16 bits) */
#define PLAN_MAX_CHANNELS_PER_BLOCK 16 /* per channel type */
#define PLAN_MAX_RBUFS_PER_BLOCK 16  /* per access type */
#define PLAN_MAX_CHANNELS_PER_OP 8
#define PLAN_MAX_DESCS 72            /* src_buff / dst_buff entries per op */
#define PLAN_MAX_SEMS_PER_OP 16
#define PLAN_MAX_BARRIERS 16
#define PLAN_MAX_BLOCKS 1024
#define PLAN_MAX_THREADS 1024
#define PLAN_MAX_SWITCH_MEMBERS 64

/* Op kinds, in the order of plan-format §2.1 (values match the reference enum). */
typedef enum {
    PLAN_OP_NOP = 0,
    PLAN_OP_BARRIER,
    PLAN_OP_PUT,
    PLAN_OP_PPKT,
    PLAN_OP_RPPKT,
    PLAN_OP_PWS,
    PLAN_OP_PWSF,
    PLAN_OP_GET,
    PLAN_OP_COPY,
    PLAN_OP_CPKT,
    PLAN_OP_UPKT,
    PLAN_OP_SIGNAL,
    PLAN_OP_WAIT,
    PLAN_OP_FLUSH,
    PLAN_OP_RE,
    PLAN_OP_REPKT,
    PLAN_OP_RECPKT,
    PLAN_OP_RES,
    PLAN_OP_RESPKT,
    PLAN_OP_RECSPKT,
    PLAN_OP_RRE,
    PLAN_OP_RRES,
    PLAN_OP_GLRES,
    PLAN_OP_RLXSIGNAL,
    PLAN_OP_RLXWAIT,
    PLAN_OP_PIPELINE,
    PLAN_OP_SEM_RELEASE,
    PLAN_OP_SEM_ACQUIRE,
    PLAN_OP_GSTORE,
    PLAN_OP_GSTOREPKT,
    /* Ours (not in the reference enum, spec §2.1 "not executable"): the unfused switch reduce:
     * dst[0] (local) <- reduce over the switch members of src[0], no multicast store. */
    PLAN_OP_GLRE,
    PLAN_OP__COUNT
} plan_op_type_t;

typedef enum {
    PLAN_CH_NONE = 0,
    PLAN_CH_MEMORY = 1,
    PLAN_CH_PORT = 2,
    PLAN_CH_SWITCH = 3,
    PLAN_CH__COUNT
} plan_chan_type_t;

typedef enum { PLAN_BUF_INPUT = 0, PLAN_BUF_OUTPUT = 1, PLAN_BUF_SCRATCH = 2 } plan_buf_t;

typedef enum {
    PLAN_DESC_LOCAL = 0,  /* {"type", "index", "size"} */
    PLAN_DESC_REMOTE = 1, /* {"buffer_id", ...}: block-local remote ref of the op's channel type */
    PLAN_DESC_SWITCH = 2, /* {"switch_channel_id", ...}: block-local switch channel */
} plan_desc_kind_t;

typedef struct {
    uint8_t kind;   /* plan_desc_kind_t */
    uint8_t buf;    /* PLAN_DESC_LOCAL: plan_buf_t; otherwise the resolved owner buffer type */
    uint16_t ref;   /* REMOTE: block-local remote-buffer index; SWITCH: block-local channel */
    uint32_t index; /* first chunk */
    uint32_t size;  /* number of chunks (0 allowed) */
} plan_desc_t;

typedef struct {
    uint8_t type;         /* plan_op_type_t */
    uint8_t channel_type; /* plan_chan_type_t */
    int8_t reduce_op;     /* mscclpp_redop_t from "reduce_op", or MSCCLPP_REDOP_PLAN if absent */
    uint8_t n_src, n_dst, n_channels, n_sems;
    uint8_t barrier_id;        /* barrier */
    uint16_t barrier_nblocks;  /* barrier: num_threadblocks */
    uint16_t tbg_id, tbg_size; /* thread-block group slice; tbg_size 0 (no tbg_info) or 1: whole */
    uint16_t n_inner;          /* pipeline: the next n_inner ops of the block are its body */
    uint32_t num_chunks;       /* pipeline iter_context.num_chunks */
    uint64_t unit_size;        /* pipeline iter_context.unit_size (bytes) */
    uint8_t channel_ids[PLAN_MAX_CHANNELS_PER_OP]; /* block-local, of channel_type */
    uint8_t sem_ids[PLAN_MAX_SEMS_PER_OP];         /* gpu-level semaphore ids */
    plan_desc_t *src; /* n_src entries (the plan's arena; NULL when none) */
    plan_desc_t *dst; /* n_dst entries */
} plan_op_t;

typedef struct {
    int n_ops;
    plan_op_t *ops; /* pipeline op followed by its flattened body */
    /* block-local channel index -> global channel index of that type (memory, port, switch) */
    uint8_t n_chan[PLAN_CH__COUNT];
    uint16_t chan[PLAN_CH__COUNT][PLAN_MAX_CHANNELS_PER_BLOCK];
    /* block-local remote-buffer index -> gpu-level remote buffer id, per access type
     * (index PLAN_CH_MEMORY or PLAN_CH_PORT) */
    uint8_t n_rbuf[PLAN_CH__COUNT];
    uint16_t rbuf[PLAN_CH__COUNT][PLAN_MAX_RBUFS_PER_BLOCK];
} plan_block_t;

typedef struct {
    uint8_t buf;    /* bound buffer type */
    int n_ranks;
    int *ranks;     /* members, in file order */
} plan_switch_t;

typedef struct {
    int owner;      /* rank owning the buffer */
    uint8_t buf;    /* plan_buf_t */
    uint8_t access; /* bit (1 << PLAN_CH_MEMORY) | (1 << PLAN_CH_PORT) */
} plan_rbuf_t;

/* Chunks of a rank's buffer that a made plan's peer writes packets into (plan_gpu_t). */
typedef struct {
    int owner;      /* rank owning the buffer */
    uint8_t buf;    /* plan_buf_t */
    uint32_t index; /* first chunk */
    uint32_t size;  /* chunks */
} plan_pkt_write_t;

typedef struct {
    int id;
    uint32_t input_chunks, output_chunks, scratch_chunks;
    int n_chan[PLAN_CH__COUNT]; /* memory and port: channels; switch: rank groups */
    int *peers[PLAN_CH__COUNT]; /* memory/port: global channel index -> peer rank */
    plan_switch_t *switches;    /* n_chan[PLAN_CH_SWITCH] entries */
    int n_rbufs;
    plan_rbuf_t *rbufs;
    int n_sems;
    int32_t *sem_init;
    int n_blocks;
    plan_block_t *blocks;
    /* A made plan's peer stub (no blocks): the chunks of the focus rank's buffers its packet
     * puts write, so that the focus's packet waits name their writer (lower.c). NULL in loaded
     * plans, whose peers' ops say it. */
    int n_pkt_writes;
    plan_pkt_write_t *pkt_writes;
} plan_gpu_t;

struct mscclpp_plan {
    char *name;            /* "name"; when null (the 0.9 DSL), the file name without .json */
    char *file;            /* the file it was loaded from; NULL for a string or a made plan */
    char *collective;      /* "allreduce", "allgather", ... as written */
    int format_version;    /* 0: MSCCL++ 0.9 (no "format"), 1: "mscclpp-plan/1" */
    bool packet_protocol;  /* protocol == "LL" */
    bool inplace;
    bool reuse_resources;
    bool double_scratch;
    uint32_t alignment;    /* buffer_alignment: a power of two in [1, 2^30], default 16 */
    uint32_t threads_per_block;
    uint64_t min_message_size, max_message_size;
    int root;              /* "root" (broadcast, reduce): the rank the plan is written for */
    int nranks;            /* len(gpus) */
    /* A made plan (executor/made.c) of one rank: only gpus[part_rank] has thread blocks; the
     * peers it talks to carry their channels and those of their remote buffers that part_rank
     * owns, every other rank its chunk counts. Loaded plans are whole (partial false). */
    bool partial;
    int part_rank;
    /* A made alltoallv plan (executor/alltoallv.c): its put/pws/pwsf/copy ops from the input
     * move each peer's count of this call (KERN_OP_PUTV, kern_args.h "Alltoallv"), not their
     * chunks; run only by mscclpp_alltoallv, which passes the counts. */
    bool per_peer;
    plan_gpu_t *gpus;      /* gpus[r].id == r */
    void *arena;           /* owner of every allocation above (plan_free releases it) */
    /* Holders besides the one that made the plan: each executor context and registry entry
     * that keeps it takes one (plan_hold), so a plan outlives its caller's
     * mscclpp_plan_destroy while an executor still runs or announces on it (0 at creation;
     * __atomic builtins). */
    int holders;
};

/** Load from a JSON text; errors name the JSON path and the rule (MSCCLPP_ERR_INVALID_PLAN). */
mscclpp_result_t plan_load_json(const char *json, size_t len, const char *source,
                                struct mscclpp_plan **plan);
/** One more holder of `plan` (a context or registry entry that keeps it); plan_free drops one.
 *  The count is bookkeeping, not the plan's contents: holders keep a const plan. */
void plan_hold(const struct mscclpp_plan *plan);
/** Drop one holder (the maker's: mscclpp_plan_destroy); frees the plan when none is left. */
void plan_free(struct mscclpp_plan *plan);
const char *plan_op_name(plan_op_type_t type);

/** Thread blocks of a plan: the largest count any rank runs (every rank launches its own;
 *  executor/plan_api.c). */
int exec_plan_nblocks(const struct mscclpp_plan *plan);

/** Checks of mscclpp_plan_verify() beyond load (executor/plan_verify.c). */
mscclpp_result_t plan_verify(const struct mscclpp_plan *plan);

#ifdef __cplusplus
}
#endif

#endif
