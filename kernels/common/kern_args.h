/*
 * Launch arguments of the plan interpreter, shared by the host (gcc), CUDA (nvcc) and HIP
 * (hipcc) builds and by the executor that produces them (executor/lower.c).
 *
 * Design
 * ------
 * One launch = one rank running one lowered plan. Everything a launch needs is reachable from
 * a kern_args_t (POD, passed by value to the kernel, copied by the HAL at launch):
 *
 *   args.plan   -> kern_plan_t: a position-independent blob made by exec_lower() for one rank
 *                  and one (input size, output size, dtype, op, resources) combination: blocks,
 *                  ops, descriptors (chunk indices already turned into byte offsets and
 *                  lengths, thread-block-group slices applied, block-local channel and buffer
 *                  indices resolved to rank-level ones), and the resolved resources (memory
 *                  channel counters, peer buffer pointers, switch member pointers). Internal
 *                  references are offsets from the blob start, so the executor may copy the
 *                  blob anywhere (device memory) and just point args.plan at the copy.
 *   args.state  -> kern_state_t: per-context device state that persists across launches and is
 *                  only ever advanced on the device: the LL flag of every block (each block
 *                  advances its own as it ends, with no cross-block chain, so replayed graphs
 *                  and interleaved contexts stay correct), the count of blocks finished (the
 *                  last one updates args.last_sig), 16 reusable barrier syncers, the
 *                  plan's counting semaphores (followed in memory by int32_t sems[n_sems]) and
 *                  the error record. Nothing is global: two contexts never share state.
 *   input/output/scratch, dtype, packet type, timeout: per call.
 *
 * Execution: block b interprets plan.blocks[b].ops in order; all threads of a block run every
 * op (data ops stride over threads, per-channel/semaphore work is spread over threads 0..k-1).
 * A pipeline op runs its body n_iter times with offset it*unit; every op of the body is
 * pipeline-aware (packet ops included) and clamps its length at 0. A block's ops, descriptors
 * and ids are contiguous in the blob (kern_block_t), and an op's desc and ids count from its
 * block's first ones, so that the block stages them in shared memory with one cooperative copy
 * as it starts (a block larger than KERN_STAGE_* reads them in place).
 *
 * Packets (LL8 and LL16): the packet image of `len` payload bytes at data offset x occupies
 * [2x, 2x + 2*round_up(len, 4)) of the destination buffer, as 8-byte units
 * [payload word (4 bytes), flag (4 bytes)]; an LL16 packet is two such units and an LL8 packet
 * is one, so both layouts are the same bytes. A reader spins until the unit's flag equals this
 * launch's flag. A partial last word is zero padded. Whatever the packet type, the interpreter
 * moves units in pairs (8 payload bytes) with one 16-byte access where the image is 16-byte
 * aligned, one unit at a time elsewhere: each unit is read and written whole either way
 * (kern_ld_pkt2), so a reader never mixes the payload and the flag of two writes.
 *
 * Errors: the first failing block records kern_error_t (first error wins by CAS on `code`);
 * every wait (signal, packet, barrier, semaphore) polls the record and gives up once set, and
 * gives up itself with MSCCLPP_ERR_TIMEOUT after args.timeout_ns, or with MSCCLPP_ERR_ABORTED
 * once the host set *args.abort (mscclpp_comm_abort on another thread). After a failed launch the
 * context's state (semaphores, barriers, channel counters) is undefined: rebuild it. The error
 * is also noted in the executor's words (args.last_sig[KERN_EXEC_FAILED]): launches queued
 * behind the failure, in any context, fail at once (KERN_WAIT_EARLIER) instead of waiting out
 * their own timeouts for a peer that is gone.
 *
 * Launch fence: a plan's own signals order one launch after the previous launch of the same
 * plan and call shape only (MSCCL++ gives every buffer size its own context). When the executor
 * runs a different context or shape than the previous call, chunk offsets move: a fast rank
 * could write a peer's scratch where that peer still reads the previous call's data. So a
 * launch whose signature (args.sig, see Call signature) differs from the executor's previous
 * launch's (args.last_sig, device memory the last block of a launch that fenced on a new
 * signature updates, the others leaving it equal to their own signature: decided on the device,
 * so a replayed CUDA graph fences where it must), or that has args.fence set,
 * first runs the fence: block 0 writes a fence record (its flag and signature) into spare
 * words of the counter slot of one channel to every peer in plan.fence, and waits for each
 * peer's matching record, which that peer writes only from its own next launch, so after its
 * previous one ended; the other blocks wait until block 0 is through (state.fenced). Records
 * never touch the plan's counters. A record with another signature fails the launch before
 * op 0 (KERN_WAIT_MISMATCH, both signatures in the error): the ranks disagree on the call.
 *
 * One rank can change its call while a peer repeats its previous one, so only one side
 * fences. The side that does not (it runs ops) looks at its fence slots whenever one of its
 * waits polls (kern_spin_poll, the slow path only): a peer's fence record for this very launch
 * means that peer changed its call and this rank did not, and fails the launch with both
 * signatures; this rank then answers the peer's record (KERN_REC_ANSWER) so that the peer's
 * fence fails at once too, naming the same disagreement. One thread answers, once per launch
 * (state.answered), as its block ends; a reader takes a record only when its word reads the
 * same before and after the signature (a record written again under it is polled again, never
 * taken for "the peer moved on"). A rank that never waits for the peer
 * (a broadcast's root) computes only from its own data and ends OK; its peer's fence times out.
 * A rank whose call needs a context it has not built yet goes into the (host) setup exchange
 * instead of launching: before that, its host writes a KERN_REC_SETUP record (with the flag the
 * next launch there would have) into the context of its previous launch (memory channels only),
 * which the peers' launches that repeat their previous call find and answer the same way.
 * The steady path (a loop at one shape) stays fence-free: one compare of the signature.
 *
 * Call signature (args.sig, KERN_SIG_WORDS words, made by the executor): [0] collective,
 * dtype, op, packet type, in-place, rank rotation (broadcast root) and context number;
 * [1] input bytes; [2] output bytes; [3] a digest of the plan; [4] a digest of the tuning table
 * that chose it (reported, not compared). Equal on every rank of an agreeing call.
 *
 * Offsets published at the fence: a plan that addresses a peer's input or output reaches the
 * peer's whole allocation (plan.rbufs holds its base) at an offset that changes from call to
 * call (a tensor inside a caching allocator's segment) and need not equal this rank's. Such a
 * launch always fences, and before writing its fence record to a peer over a memory channel
 * block 0 writes this call's in-allocation offsets (args.io_off) into the peer's counter slot
 * of that channel (the 128-byte slot's words 8-9 for an odd launch flag, 10-11 for an even one,
 * clear of the record's words 1-6: a peer is never more than one launch ahead at its fence);
 * after the waits it reads each owner's offsets from its
 * own slot into the state's roff[] (plan.rpub says which slot and which buffer), which
 * kern_ptr adds to a remote buffer's base. Remote buffers of owners with no memory channel
 * both ways (port channels) keep the offset the executor baked in (this rank's own).
 *
 * Alltoallv (mscclpp_alltoallv, count-exact): args.vtab (NULL for every other launch) is a
 * word of bytes moved, then KERN_VTAB_WORDS words per rank q from word 1: the bytes of this
 * call's block for q (0), its offset from args.input (1), and where the block from q goes, as
 * an offset from args.output (2). Word 0 is UINT64_MAX, or (when the executor counts, for
 * tests) a counter the launch adds every block's bytes to as it moves them. Such a
 * launch fences (its plan reaches the peers' outputs); at the fence block 0 publishes to every
 * peer q, next to its record, the offset in this rank's output allocation where q's block goes
 * (io_off[1] + vtab[q][2]): word KERN_SLOT_VOFF of the memory slot, or KERN_PORT_VOFF of the
 * port slot (word trigger). A peer reads it from its own slot when it moves its block
 * (KERN_OP_PUTV): the word stays until this rank's next fence, which comes after the peer
 * signalled that its block landed (the alltoallv plan waits on every peer). KERN_OP_PUTV is
 * lowered from the plan's put/pws/copy ops of an alltoallv plan (plan.per_peer): destination k
 * of the op is peer q's output (a remote buffer, a port channel, or this rank's own output for
 * q = this rank), the source and the length come from vtab[q], never from the descriptors.
 *
 * Error mailbox: the state lives in device memory, which the host can only read after a
 * device sync. So that a launch on a stream cannot fail unseen, the CAS winner also copies its
 * record into args.mailbox (when not NULL): a kern_error_t in host-pinned, device-mapped memory
 * (ordinary memory on the host backend), written with plain stores, every field before `code`,
 * separated by a system fence. The host polls `code` with an acquire load at any time, without
 * a device sync; once non-zero, the other fields are complete. The state's `code` is never
 * cleared, so a context's mailbox has one writer, once: no atomics on host memory are needed.
 *
 * Phase trace (args.trace, NULL unless MSCCLPP_KERN_TRACE is set; docs/gpu.md): a table of
 * KERN_TRACE_WORDS uint64_t per block (row b at trace + b * KERN_TRACE_WORDS, KERN_MAX_BLOCKS
 * rows), host-visible memory the host reads after the launch. Thread 0 of each block stores
 * kern_clock_ns() (globaltimer on CUDA, the host clock on the host backend, wall_clock64 on
 * HIP) with plain stores at the points KERN_TRACE_*: entry, the prologue done (block synced,
 * ops staged), the launch fence passed or skipped, the end of each of the first
 * KERN_TRACE_OPS ops (word KERN_TRACE_OP + k for op k, a pipeline ending in the slot of its
 * own index, where no op of that index ends at top level nothing is stored) with its
 * KERN_TRACE_INFO word, and the block's exit after the epilogue. Nothing is cleared: a point
 * older than its row's entry (or 0) is not this launch's (the clock only goes forward). A
 * launch that refuses its plan stamps only its entry.
 */
#ifndef MSCCLPP_KERN_ARGS_H
#define MSCCLPP_KERN_ARGS_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define KERN_PLAN_MAGIC 0x4e4c504bu  /* "KPLN" */
#define KERN_STATE_MAGIC 0x5453504bu /* "KPST" */
#define KERN_MAX_BARRIERS 16
#define KERN_MAX_BLOCKS 1024 /* thread blocks per rank (plan-format §5.6) */
/* What a block stages in shared memory (ops, descriptors, ids), ~9 KiB; a block with more
 * reads them from the blob in place. 64 ops is the plan limit; split ops and pipeline bodies
 * may add some. */
#define KERN_STAGE_OPS 80
#define KERN_STAGE_DESCS 320
#define KERN_STAGE_IDS 256

/* Op codes: the same values as plan_op_type_t (executor/plan.h, plan-format §2.1). */
enum {
    KERN_OP_NOP = 0,
    KERN_OP_BARRIER,
    KERN_OP_PUT,
    KERN_OP_PPKT,
    KERN_OP_RPPKT,
    KERN_OP_PWS,
    KERN_OP_PWSF,
    KERN_OP_GET,
    KERN_OP_COPY,
    KERN_OP_CPKT,
    KERN_OP_UPKT,
    KERN_OP_SIGNAL,
    KERN_OP_WAIT,
    KERN_OP_FLUSH,
    KERN_OP_RE,
    KERN_OP_REPKT,
    KERN_OP_RECPKT,
    KERN_OP_RES,
    KERN_OP_RESPKT,
    KERN_OP_RECSPKT,
    KERN_OP_RRE,
    KERN_OP_RRES,
    KERN_OP_GLRES,
    KERN_OP_RLXSIGNAL,
    KERN_OP_RLXWAIT,
    KERN_OP_PIPELINE,
    KERN_OP_SEM_RELEASE,
    KERN_OP_SEM_ACQUIRE,
    KERN_OP_GSTORE,
    KERN_OP_GSTOREPKT,
    KERN_OP_GLRE, /* ours: switch load-reduce into a local buffer, no multicast store */
    KERN_OP__COUNT
};
/* Lowered-only op (no plan op has its code): an alltoallv put (see Alltoallv); kern_op_t.pad
 * holds the plan op it replaces (KERN_OP_PUT, PWS, PWSF or COPY). */
#define KERN_OP_PUTV 64

/* Element types and reduce ops: the values of mscclpp_dtype_t and mscclpp_redop_t. */
enum {
    KERN_DT_F32 = 0,
    KERN_DT_F16 = 1,
    KERN_DT_BF16 = 2,
    KERN_DT_I32 = 3,
    KERN_DT_U32 = 4,
    KERN_DT_I8 = 5,
    KERN_DT_U8 = 6,
    KERN_DT_F64 = 7,
    KERN_DT_E4M3 = 8,
    KERN_DT_E5M2 = 9,
    KERN_DT_I64 = 10,
    KERN_DT_U64 = 11,
    KERN_DT__COUNT
};
enum { KERN_RED_SUM = 0, KERN_RED_PROD = 1, KERN_RED_MIN = 2, KERN_RED_MAX = 3 };

/* Where a descriptor points (kern_desc_t.loc). */
enum {
    KERN_LOC_IN = 0,     /* args.input */
    KERN_LOC_OUT = 1,    /* args.output */
    KERN_LOC_SCR = 2,    /* args.scratch */
    KERN_LOC_REMOTE = 3, /* plan rbufs[idx]: a peer's buffer, mapped */
    KERN_LOC_SWITCH = 4, /* plan switches[idx]: the bound buffer of every member */
    KERN_LOC_PORT = 5,   /* plan rbufs[idx] reached through a port channel: the proxy writes
                          * it; the interpreter only computes the offset (pbufs[idx] + off) */
};
/* kern_desc_t.flags */
#define KERN_DESC_SCRATCH 0x1 /* the buffer is a scratch buffer: add the double-scratch half */
#define KERN_DESC_PACKET 0x2  /* the descriptor addresses a packet image (byte 2*off) */

/** One buffer descriptor of an op, resolved to bytes. */
typedef struct {
    uint64_t off;  /* data offset in bytes from the buffer start (packets: image at 2*off) */
    uint8_t loc;   /* KERN_LOC_* */
    uint8_t flags; /* KERN_DESC_* */
    uint16_t writer; /* packet reads: rank + 1 whose ops write these packets (0: none known),
                      * named when the wait times out */
    uint32_t idx;  /* REMOTE: rank-level remote buffer id; SWITCH: rank-level switch channel */
} kern_desc_t;

/** One op. Descriptors are descs[desc .. desc+n_src) then the n_dst destinations. */
typedef struct {
    uint8_t type;  /* KERN_OP_* */
    uint8_t n_src, n_dst;
    uint8_t n_ids; /* channel ids (signal/wait/flush) or semaphore ids (sem ops) */
    uint8_t redop; /* KERN_RED_* (the call's op, else the plan's, else sum) */
    uint8_t barrier_id;
    uint16_t barrier_nblocks;
    uint16_t n_inner; /* pipeline: the next n_inner ops are its body */
    uint8_t port;     /* 1: the op's channels are port channels (ids index the port table) */
    uint8_t pad;      /* KERN_OP_PUTV: the plan op it replaces */
    uint32_t desc;    /* first descriptor, counted from the block's first_desc */
    uint32_t ids;     /* first id (memory channel or semaphore), from the block's first_id */
    uint32_t n_iter;  /* pipeline iterations */
    uint64_t len;     /* payload bytes the op moves per descriptor (min over its descriptors) */
    uint64_t unit;    /* pipeline unit (bytes) */
} kern_op_t;

typedef struct {
    uint32_t first_op; /* index in the plan's op array */
    uint32_t n_ops;    /* including flattened pipeline bodies */
    uint32_t first_desc, n_descs; /* the block's descriptors in the plan's array */
    uint32_t first_id, n_ids;     /* the block's ids in the plan's id array */
} kern_block_t;

/** A memory channel (semaphore pair) as the interpreter sees it. */
typedef struct {
    uint64_t *inbound;  /* mine: the peer's signal increments it */
    uint64_t *remote;   /* the peer's inbound counter of the matching channel (mapped) */
    uint64_t *expected; /* my count of consumed signals (device memory, persists) */
    int32_t peer;
    int32_t pad;
} kern_chan_t;

/** A switch channel: every member's bound buffer (mapped), optionally a multicast pointer. */
typedef struct {
    uint32_t first_member; /* index in the plan's member pointer array */
    uint32_t n_members;
    void *mc; /* CUDA multicast address (NVLS), or NULL: use the member pointers */
} kern_switch_t;

/*
 * Port channels (spec §2.3/§2.4, MSCCL++'s proxy design). The interpreter pushes 16-byte
 * triggers into a FIFO in host-mapped memory; a host thread of the executor (the proxy,
 * executor/exec_port.c) drains them into transport calls in order, then advances `tail`.
 *   fst: bits 0..31 bytes, 32..63 source offset in the registered allocation of `src loc`
 *   snd: bits 0..31 destination offset in the peer's allocation, 32..41 port channel,
 *        42..51 remote buffer, 52..53 source location (KERN_LOC_IN/OUT/SCR), 54..56 type bits,
 *        63 valid (written last, with release order; the proxy clears the slot)
 * A slot is free again once tail has passed it; a flush waits until tail passed its trigger.
 * The proxy records its first error in `err` (a negative mscclpp_result_t): every port wait
 * polls it and gives up, so the launch fails instead of hanging.
 */
#define KERN_TRIG_DATA 1u
#define KERN_TRIG_SIGNAL 2u
#define KERN_TRIG_FLUSH 4u
#define KERN_TRIG_VALID (1ull << 63)
#define KERN_PORT_MAX_CHANS 1024
#define KERN_PORT_MAX_RBUFS 1024
#define KERN_FENCE_PORT 0x80000000u /* kern_plan_t fence ids: a port channel */
#define KERN_RPUB_NONE 0xffffffffu  /* kern_plan_t rpub: the base already holds the offset */
#define KERN_RPUB_OUT 0x80000000u   /* kern_plan_t rpub: the owner's output offset */
/* A memory channel's 128-byte counter slot: the offsets published at the fence, odd/even flag */
#define KERN_SLOT_OFF_ODD 8u
#define KERN_SLOT_OFF_EVEN 10u
/* Alltoallv: the word of a memory / port counter slot carrying where the peer wants my block */
#define KERN_SLOT_VOFF 12u
#define KERN_PORT_VOFF 7u
#define KERN_VTAB_WORDS 3 /* per rank: bytes, source offset, destination offset (Alltoallv) */
/* Word trigger (snd bit 57): the proxy stores fst into word (snd & 7) of the peer's counter
 * slot of port channel (snd >> 32) & 1023 (a fence record word, see Launch fence). */
#define KERN_TRIG_WORD (1ull << 57)

/* Call signature and fence records (see Launch fence and Call signature). */
#define KERN_SIG_WORDS 5
#define KERN_SIG_CMP 4     /* words compared: the tuning table's digest is only reported */
#define KERN_REC_WORD 1    /* counter slot word holding a record's kind and flag */
#define KERN_REC_SIG 2     /* first of the KERN_SIG_WORDS words of the record's signature */
#define KERN_REC_FENCE 1u  /* record kinds (bits 32..39 of the record word) */
#define KERN_REC_ANSWER 2u /* written by a rank that did not fence, from its running launch */
#define KERN_REC_SETUP \
    3u /* written by the host of a rank that sets up a new context for
                               * its call, into the context of its previous launch */
#define KERN_REC(kind, flag) (((uint64_t)(kind) << 32) | (uint64_t)(flag))
/* args.last_sig's words: the previous launch's signature, then the executor's failure */
#define KERN_EXEC_FAILED KERN_SIG_CMP /* first error of any launch (a negative code), or 0 */
#define KERN_EXEC_WORDS (KERN_SIG_CMP + 1)

typedef struct {
    uint64_t fst, snd;
} kern_trigger_t;

typedef struct {
    uint64_t tail;      /* triggers the proxy has finished (proxy writes, release) */
    uint64_t pad0[7];
    uint64_t err;       /* proxy's first error as (uint64_t)(int64_t)code, 0 if none */
    uint64_t size;      /* slots, a power of two */
    uint64_t pad1[6];
    /* kern_trigger_t slots[size] follow */
} kern_fifo_t;

/** The lowered per-rank plan (header of the blob; arrays follow at the given offsets). */
typedef struct {
    uint32_t magic; /* KERN_PLAN_MAGIC */
    uint32_t bytes; /* whole blob */
    int32_t rank;
    uint32_t n_blocks, n_ops, n_descs, n_ids, n_chans, n_rbufs, n_switch, n_members, n_sems;
    /* byte offsets from the blob start */
    uint32_t off_blocks, off_ops, off_descs, off_ids, off_chans, off_rbufs, off_switch,
        off_members;
    /* port channels: n_ports kern_chan_t at off_ports (inbound, expected, peer; remote unused),
     * n_rbufs uint64_t at off_pbufs (in-allocation offset of each remote buffer for this call) */
    uint32_t n_ports, off_ports, off_pbufs;
    /* launch fence (kern_args_t.fence): n_fence channel ids at off_fence, one per peer this rank
     * and the peer both have a channel to (memory if both have one, else port); KERN_FENCE_PORT
     * marks a port channel id */
    uint32_t n_fence, off_fence;
    /* n_rbufs uint32_t at off_rpub: KERN_RPUB_NONE, or the memory channel whose counter slot
     * carries the owner's published offsets (| KERN_RPUB_OUT for its output buffer) */
    uint32_t off_rpub;
    kern_fifo_t *fifo;    /* host-mapped FIFO of the context's proxy, NULL without ports */
    uint64_t *fifo_head;  /* device counter of claimed slots */
    uint64_t lbase[3];    /* device addresses of the registered input/output/scratch allocations */
} kern_plan_t;

/** Where the exec_lower() blob's block entries start (kern_plan_t.off_blocks): right after
 * the header, 64-byte aligned. Fixed so that a launch whose args.n_blocks is set can read its
 * block's entry without waiting for the header; the interpreter refuses such a launch whose
 * plan says otherwise. */
#define KERN_PLAN_BLOCKS_OFF ((uint32_t)((sizeof(kern_plan_t) + 63u) & ~(size_t)63u))

/** The per-block layout of the exec_lower() blob (kern_args_t.blk_ops not 0): every block owns
 * the same number of entries of the op, descriptor and id arrays (args.blk_ops, blk_descs,
 * blk_ids; a block with fewer leaves the rest zero), so block b's start at entries
 * b * blk_ops, b * blk_descs and b * blk_ids; and the arrays follow the n_blocks block entries
 * in this order, each 64-byte aligned. A block then finds what it stages from the arguments
 * alone and loads it in the same round trip as the header, not in a second one after it (ncu
 * on an H200: that trip, then the block sync, was the 8 B launch's longest stall). The
 * interpreter refuses a launch whose plan says otherwise (KERN_WAIT_PLAN). */
#define KERN_ALIGN64(x) (((x) + 63u) & ~63u)
#define KERN_LAYOUT_OPS_OFF(nb) \
    KERN_ALIGN64(KERN_PLAN_BLOCKS_OFF + (nb) * (uint32_t)sizeof(kern_block_t))
#define KERN_LAYOUT_DESCS_OFF(nb, bo) \
    KERN_ALIGN64(KERN_LAYOUT_OPS_OFF(nb) + (nb) * (bo) * (uint32_t)sizeof(kern_op_t))
#define KERN_LAYOUT_IDS_OFF(nb, bo, bd) \
    KERN_ALIGN64(KERN_LAYOUT_DESCS_OFF(nb, bo) + (nb) * (bd) * (uint32_t)sizeof(kern_desc_t))

/** First error of a launch (all fields valid once code != 0 and the launch has finished). */
typedef struct {
    int32_t code; /* 0 or a negative mscclpp_result_t */
    int32_t rank, block, op, op_type;
    int32_t channel; /* rank-level channel or semaphore/barrier id involved, -1 if none */
    int32_t peer;    /* peer rank waited on, -1 if none */
    uint32_t iter;   /* pipeline iteration */
    uint32_t flag;   /* the launch's LL flag */
    uint32_t what;   /* KERN_WAIT_* */
    uint64_t expected, seen; /* counter values, or packet byte offset in `expected` */
    /* KERN_WAIT_MISMATCH: this launch's signature and the peer's (from its record, whose kind
     * and flag are in `seen`) */
    uint64_t sig[KERN_SIG_WORDS], peer_sig[KERN_SIG_WORDS];
} kern_error_t;

enum {
    KERN_WAIT_NONE = 0,
    KERN_WAIT_SIGNAL,    /* wait / rlxwait on a memory channel */
    KERN_WAIT_PACKET,    /* LL packet flag */
    KERN_WAIT_BARRIER,   /* barrier syncer */
    KERN_WAIT_SEMAPHORE, /* sem_acquire */
    KERN_WAIT_PLAN,      /* malformed plan or launch (block index, magic) */
    KERN_WAIT_PROXY,     /* port channel: FIFO room, a flush, or the proxy reported an error */
    KERN_WAIT_PORT,      /* wait on a port channel (a signal through the proxy) */
    KERN_WAIT_FENCE,     /* the launch fence: block 0 waiting for a peer's record (peer >= 0),
                          * or another block waiting for block 0 (peer -1) */
    KERN_WAIT_MISMATCH,  /* a peer's fence record carries another call signature */
    KERN_WAIT_EARLIER,   /* not run: an earlier launch of the executor failed (`seen`: its code) */
};

typedef struct {
    uint32_t count, gen;
    uint32_t pad[14]; /* one cache line each */
} kern_syncer_t;

/** Per-context device state; int32_t sems[n_sems] follows it in memory, then (8-byte aligned)
 * uint64_t roff[n_rbufs]: each remote buffer's offset for the current launch, published by its
 * owner at the fence (see "Offsets published at the fence"), 0 for the others. */
typedef struct {
    uint32_t magic; /* KERN_STATE_MAGIC */
    uint32_t n_sems;
    uint32_t done; /* blocks finished in the current launch that fences (its last one updates
                    * last_sig) */
    uint32_t pad0[2];
    uint32_t fenced; /* flag of the last launch whose fence block 0 has passed */
    int32_t answered; /* flag of the last launch that answered a peer's record */
    uint32_t pad1[9];
    kern_error_t err;  /* 136 bytes */
    uint32_t pad2[14]; /* the barriers start on a 64-byte boundary */
    kern_syncer_t barrier[KERN_MAX_BARRIERS];
    /* LL flag of block b's next launch: starts at 1 (0 reads as 1), never 0. Block b reads
     * flags[b] as it starts and stores the next value as it ends: each block advances its own
     * once per launch, so all stay equal, with no atomic and no block waiting for another (a
     * context's plan has a fixed block count). */
    uint32_t flags[KERN_MAX_BLOCKS];
} kern_state_t;

/** The LL flag after `f` (skips 0, the flag of zeroed packet memory). */
#define KERN_FLAG_NEXT(f) ((f) + 1u == 0u ? 1u : (f) + 1u)

/* Phase trace (see Phase trace): the words of a block's row */
#define KERN_TRACE_OPS 14   /* ops stamped per block: op indices 0..13 */
#define KERN_TRACE_ENTRY 0  /* kernel entry */
#define KERN_TRACE_STAGED 1 /* prologue done: arguments, header and ops read, block synced */
#define KERN_TRACE_FENCED 2 /* launch fence passed (or skipped: no fence this launch) */
#define KERN_TRACE_EXIT 3   /* block done, after the epilogue (flag, last_sig) */
#define KERN_TRACE_OP 4     /* + k: end of op k */
/* + k: op k's KERN_TRACE_INFO_* word: bit 63 set, the op code at bits 16..23, the op index at
 * 0..15, the block's op count at 32..47 */
#define KERN_TRACE_INFO (KERN_TRACE_OP + KERN_TRACE_OPS)
#define KERN_TRACE_WORDS (KERN_TRACE_INFO + KERN_TRACE_OPS) /* 32: 256 bytes per block */
#define KERN_TRACE_INFO_SET (1ull << 63)
#define KERN_TRACE_INFO_OF(k, type, n_ops) \
    (KERN_TRACE_INFO_SET | ((uint64_t)(n_ops) << 32) | ((uint64_t)(type) << 16) | (uint64_t)(k))

/** Arguments of one launch (passed by value). */
typedef struct {
    const kern_plan_t *plan; /* device address of the lowered plan blob */
    kern_state_t *state;     /* device address of the context state */
    kern_error_t *mailbox;   /* host-mapped copy of the first error, or NULL (see Errors) */
    const uint64_t *abort;   /* host-mapped, nonzero once the communicator was aborted
                              * (mscclpp_comm_abort): every wait gives up; NULL: none */
    const void *input;
    void *output;
    void *scratch;
    uint64_t scratch_bytes; /* whole scratch buffer (both halves with double scratch) */
    uint64_t scratch_half;  /* offset of the upper half (double scratch): the same on all ranks */
    uint64_t timeout_ns;    /* bound of every wait */
    int32_t rank;
    uint8_t dtype;          /* KERN_DT_* */
    uint8_t redop;          /* the call's op (informational: ops carry their own) */
    uint8_t packet;         /* 0 LL16, 1 LL8 (mscclpp_packet_t) */
    uint8_t double_scratch; /* alternate scratch halves by flag parity */
    uint32_t host_spin;     /* host backend: polls before yielding */
    uint32_t clock_khz;     /* HIP: wall_clock64 rate (0: 100 MHz) */
    uint32_t dev_spin;      /* GPU: polls before a wait sleeps (base/wait.h, base_wait_dev_spin) */
    uint32_t fence;         /* 1: fence even if the signature is the previous launch's */
    uint32_t n_blocks;      /* the plan's blocks (the grid), whose entries then start at
                             * KERN_PLAN_BLOCKS_OFF: each block reads its entry in the same
                             * round trip as the header; 0: read it after the header */
    /* the per-block layout's entries per block (KERN_LAYOUT_*, at most KERN_STAGE_*; needs
     * n_blocks): the block stages its ops, descriptors and ids without waiting for the
     * header; blk_ops 0: the blob has no such layout, they are found through the header */
    uint16_t blk_ops, blk_descs, blk_ids;
    uint64_t io_off[2];     /* this call's input/output offsets in their allocations, published
                             * to the peers at the fence */
    uint64_t sig[KERN_SIG_WORDS]; /* this call's signature (see Call signature) */
    uint64_t *last_sig; /* executor-wide device words (KERN_EXEC_WORDS): the previous launch's
                         * signature (all 0: none, or it failed), then the first error of any
                         * launch, after which launches do nothing but fail (Errors); NULL:
                         * decide the fence by args.fence alone */
    uint64_t *vtab;     /* alltoallv's count table (see Alltoallv), else NULL */
    uint64_t *trace;    /* the phase trace's table (see Phase trace), NULL: none */
} kern_args_t;

#ifdef __cplusplus
}
#endif

#endif /* MSCCLPP_KERN_ARGS_H */
