/*
 * libmscclpp_nccl: the NCCL 2.28 API over the public libmscclpp API (internal declarations).
 *
 * The types and prototypes come from the toolkit's own nccl.h, so the ABI (enum values, the
 * 128-byte ncclUniqueId, ncclConfig_t) is the one programs were compiled against. Everything
 * here is reached only through the exported nccl* / pnccl* entry points; the version script
 * (nccl/libmscclpp_nccl.map) keeps the shim_* helpers local.
 */
#ifndef MSCCLPP_NCCL_INTERNAL_H
#define MSCCLPP_NCCL_INTERNAL_H

#include <nccl.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <mscclpp/mscclpp.h>
#include <mscclpp/nccl_ext.h>

#define SHIM_COMM_MAGIC 0x6d73636eu /* "mscn": a live communicator of this library */
#define SHIM_MAX_REDOPS 64
#define SHIM_MAX_STREAMS 64

/* Functions of the real NCCL/RCCL (MSCCLPP_NCCL_LIB_PATH); any may be NULL but the first three. */
typedef struct {
    void *handle;
    const char *path;
    ncclResult_t (*GetUniqueId)(ncclUniqueId *);
    ncclResult_t (*CommInitRank)(ncclComm_t *, int, ncclUniqueId, int);
    ncclResult_t (*CommDestroy)(ncclComm_t);
    ncclResult_t (*CommFinalize)(ncclComm_t);
    ncclResult_t (*CommAbort)(ncclComm_t);
    ncclResult_t (*AllReduce)(const void *, void *, size_t, ncclDataType_t, ncclRedOp_t,
                              ncclComm_t, cudaStream_t);
    ncclResult_t (*Broadcast)(const void *, void *, size_t, ncclDataType_t, int, ncclComm_t,
                              cudaStream_t);
    ncclResult_t (*Reduce)(const void *, void *, size_t, ncclDataType_t, ncclRedOp_t, int,
                           ncclComm_t, cudaStream_t);
    ncclResult_t (*AllGather)(const void *, void *, size_t, ncclDataType_t, ncclComm_t,
                              cudaStream_t);
    ncclResult_t (*ReduceScatter)(const void *, void *, size_t, ncclDataType_t, ncclRedOp_t,
                                  ncclComm_t, cudaStream_t);
    ncclResult_t (*AlltoAll)(const void *, void *, size_t, ncclDataType_t, ncclComm_t,
                             cudaStream_t);
    ncclResult_t (*GroupStart)(void);
    ncclResult_t (*GroupEnd)(void);
    ncclResult_t (*RedOpCreatePreMulSum)(ncclRedOp_t *, void *, ncclDataType_t,
                                         ncclScalarResidence_t, ncclComm_t);
    ncclResult_t (*RedOpDestroy)(ncclRedOp_t, ncclComm_t);
    const char *(*GetLastError)(ncclComm_t);
} shim_real_t;

/* A PreMulSum operator: the scalar is read at creation (host) or at each call (device). */
typedef struct {
    bool used;
    ncclDataType_t dtype;
    ncclScalarResidence_t residence;
    const void *scalar_ptr;  /* device residence: read at each call */
    unsigned char value[8];  /* host residence: the scalar, in dtype */
    ncclRedOp_t real_op;     /* the same operator in the fallback library */
    bool has_real_op;
} shim_redop_t;

/* A registration: the handle of ncclCommRegister, listed in its communicator. */
struct shim_reg {
    uint32_t magic;
    struct shim_reg *next;
    ncclComm_t comm;
    void *buff;
    size_t size;
    void *zc_base; /* the allocation the executor may run plans on directly, or NULL */
};

struct ncclComm {
    uint32_t magic;
    int rank, nranks, cuda_dev;
    mscclpp_comm_t *comm;
    mscclpp_executor_t *exec;
    mscclpp_stream_t stream; /* host backend, NULL stream, several communicators: ours */
    mscclpp_stream_t last_stream; /* where this communicator queued work last (or NULL) */
    /* Staging buffers (mscclpp_malloc): plans need registered memory, user buffers are not. */
    void *stage_in, *stage_out;
    size_t stage_bytes;
    /* DSL plans from MSCCLPP_NCCL_PLAN_DIR, tried before the built-in plans. */
    mscclpp_plan_t **plans;
    int nplans;
    uint64_t dsl_logged; /* plans[i] already named in the INFO log */
    /* Wrappers of the caller's native streams (GPU backends). */
    struct {
        void *native;
        mscclpp_stream_t stream;
    } streams[SHIM_MAX_STREAMS];
    int nstreams;
    shim_redop_t redops[SHIM_MAX_REDOPS];
    /*
     * Zero-copy (docs/nccl.md "Zero-copy"): collectives on ncclMemAlloc'd or registered
     * buffers run the plan on them directly. regs: this communicator's registrations; zc: the
     * allocations (their bases) handed to the executor, marked stale by ncclMemFree or
     * ncclCommDeregister and forgotten by the executor before the next group runs.
     */
    bool zero_copy; /* MSCCLPP_NCCL_ZERO_COPY is not 0 */
    bool zc_logged; /* the INFO line said it once */
    struct shim_reg *regs;
    struct {
        void *base;
        bool stale;
    } *zc;
    int nzc, zc_cap;
    /* Point-to-point (nccl_coll.c): an executor of two-rank plans, one plan per (from, to). */
    mscclpp_executor_t *p2p_exec;
    mscclpp_plan_t **p2p_plans; /* nranks * nranks, made on first use */
    bool p2p_sync_after;        /* the group's transfers ran on the host-backend NULL stream
                                 * of a communicator among several: wait for its stream */
    /* Graph capture (docs/nccl.md "Streams"): the call in progress queues into a capture; some
     * call did; staging buffers a graph may still use, freed with the communicator */
    bool capturing, captured_any;
    bool capture_known; /* capturing was asked for the call in progress (shim_stream_captured) */
    void **kept;
    int n_kept, cap_kept;
    ncclComm_t real; /* the parallel communicator of the fallback library, or NULL */
    ncclResult_t async_error;
    pthread_mutex_t lock; /* one call at a time per communicator */
    /*
     * Lifetime (issue 22 item 4): every entry point that uses the communicator enters and
     * leaves (shim_comm_enter/leave). ncclCommDestroy and ncclCommAbort mark it closing, so
     * no new call gets in; abort also interrupts the calls inside (mscclpp_comm_abort); both
     * free it only once the last call left. `life` guards users and closing.
     */
    pthread_mutex_t life;
    pthread_cond_t idle; /* signalled when users drops to 0 (CLOCK_MONOTONIC) */
    int users;           /* calls inside */
    bool closing;        /* destroy or abort started */
    unsigned test_leave_ms; /* MSCCLPP_TEST_NCCL_LEAVE_MS: a call's delay before it leaves */
};

/* errors */
ncclResult_t shim_error(ncclResult_t code, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* the same without the WARN line: a condition the caller may still recover from */
ncclResult_t shim_quiet_error(ncclResult_t code, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
ncclResult_t shim_from_mscclpp(mscclpp_result_t r, const char *what);
const char *shim_last_error(void);
void shim_clear_error(void);
void shim_info(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
bool shim_info_enabled(void);
/** A variable of libmscclpp's table (MSCCLPP_NCCL_* are declared there, base/config_vars.h):
 *  the value in force, "" when unset without a default. Never NULL. */
const char *shim_config(const char *name);

/* checks */
ncclResult_t shim_check_comm(ncclComm_t comm, const char *who);
/* shim_check_comm, then count the call in (refused once destroy or abort started); every
 * successful enter is paired with a shim_comm_leave (nccl/nccl_comm.c) */
ncclResult_t shim_comm_enter(ncclComm_t comm, const char *who);
void shim_comm_leave(ncclComm_t comm);

/* dtype and op helpers (nccl/nccl_util.c) */
size_t shim_dtype_size(ncclDataType_t dt);
const char *shim_dtype_name(ncclDataType_t dt);
bool shim_dtype_map(ncclDataType_t dt, mscclpp_dtype_t *out);
const char *shim_op_name(ncclRedOp_t op);

/* memory allocated by ncclMemAlloc (nccl/nccl_comm.c) */
bool shim_is_our_memory(const void *ptr);

/* true while this process has exactly one live communicator (nccl/nccl_comm.c) */
bool shim_sole_comm(void);

/* zero-copy (nccl/nccl_comm.c) */
/* The allocation base of [p, p + bytes) when the range is ncclMemAlloc'd or registered with c
 * and the executor can run plans on it; else NULL. */
void *shim_zc_base(ncclComm_t c, const void *p, size_t bytes);
/* Remember that base was handed to c's executor (for forgetting it once freed). */
ncclResult_t shim_zc_note(ncclComm_t c, void *base, const char *who);
/* Make c's executor forget the allocations freed or deregistered since the last group. */
ncclResult_t shim_zc_forget_stale(ncclComm_t c, const char *who);

/* fallback (nccl/nccl_fallback.c) */
const shim_real_t *shim_real(void);     /* NULL when unset or unusable (reason logged) */
void shim_note_fallback(const char *why); /* one INFO line per process */
ncclResult_t shim_real_init(ncclComm_t comm); /* parallel real communicator, when configured */

/* streams (nccl/nccl_comm.c, docs/nccl.md "Streams") */
/* The stream a task's work goes on; *sync_after: the call must wait for it (host, NULL). */
ncclResult_t shim_stream_get(ncclComm_t c, cudaStream_t native, mscclpp_stream_t *st,
                             bool *sync_after, const char *who);
/* Order work about to be queued on st after this communicator's work on other streams. */
ncclResult_t shim_stream_enter(ncclComm_t c, mscclpp_stream_t st, const char *who);
/* Whether the stream the call entered (shim_stream_enter) is being captured, asked at most once
 * per call and only by calls that need it: those that change streams, and those that use the
 * staging buffers (a graph may stage through them at any replay: captured_any). */
bool shim_stream_captured(ncclComm_t c);
/* Wait for the work this communicator queued last (before freeing what it uses). */
ncclResult_t shim_stream_drain(ncclComm_t c, const char *who);

/* mscclpp.ext's hook (nccl/nccl_ext.c, include/mscclpp/nccl_ext.h) */
typedef struct {
    const mscclpp_plan_t *plan; /* an added DSL plan for this call, or NULL */
    int index;                  /* its index (mscclpp_nccl_plan_calls) */
    bool selected;              /* the selector chose it (else: the first that fits) */
    int choice;                 /* without a plan: MSCCLPP_NCCL_SELECT_* */
} shim_ext_choice_t;
/* Ask the selector (if any) about a collective; `msg` is the size plans are matched by (the
 * executor's rule on the bytes the plan would run with). An error only for a bad choice. */
ncclResult_t shim_ext_choose(ncclComm_t c, const mscclpp_nccl_request_t *req, uint64_t msg,
                             shim_ext_choice_t *out);
/* Count a call that added plan `index` served. */
void shim_ext_ran(int index);

#endif /* MSCCLPP_NCCL_INTERNAL_H */
