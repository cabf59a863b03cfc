/*
 * Plan registry (internal): plans registered with their constraints, and selection of the plan
 * for a call (plan-format §6.3). A plain struct the executor embeds; not thread-safe (owner locks).
 *
 * Matching rule, first match wins (so the choice is deterministic). The order: the plans the
 * application registers (exec_registry_register, exec_registry_load_dir_first) in the order it
 * registered them, then the plans the library loads (exec_registry_load_dir: the default plans)
 * in their order, then the plans made for the job (exec_registry_add_made). A plan registered
 * after the executor loaded its default plans thus still wins over them, as a user expects:
 *   - collective equal (strcmp), world size == plan's len(gpus);
 *   - ranks per node equal, where 0 on either side (plan registered with 0, or a request with
 *     0) matches anything;
 *   - in-place equal to the plan's "inplace";
 *   - message size inside [min_message_size, max_message_size]. The message size is the
 *     OUTPUT size in bytes for "allgather" and the INPUT size for every other collective
 *     (the reference's checkMessageSize); exec_message_size() computes it;
 *   - every required tag present in the plan's tags (see below);
 *   - the plan fits the node layout (exec_registry_set_layout).
 *
 * Tags are "k=v,k2=v2" strings. A required "k=v" needs the plan's tag k with value v; a
 * required bare "k" needs the plan to carry tag k with any value. NULL or "" requires nothing.
 */
#ifndef MSCCLPP_EXECUTOR_REGISTRY_H
#define MSCCLPP_EXECUTOR_REGISTRY_H

#include <stdbool.h>
#include <stdint.h>

#include "executor/plan.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    const struct mscclpp_plan *plan;
    struct mscclpp_plan *owned; /* set when the registry loaded the plan and frees it */
    int ranks_per_node;         /* 0: any */
    char *tags;                 /* copy of the tag string, or NULL */
    bool made;                  /* made for the job (executor/made.c), registered last */
    bool off_layout;            /* joins ranks of two nodes by memory or switch channels */
    bool shared_only;           /* chosen only for calls whose ranks all pass shareable buffers
                                 * (MSCCLPP_PLAN_DIRECT=auto's direct plans: plan_dirs.c) */
    int8_t agreed;              /* shared_only: the last verdict of a call shape it served
                                 * (select.c, exec_select_agreed): 0 none yet, 1 ran, -1 not */
} exec_registry_entry_t;

typedef struct {
    exec_registry_entry_t *entries;
    int count, cap;
    int nfront;             /* entries [0, nfront) are the application's, in its order */
    bool made_first;        /* MSCCLPP_PLAN_MAKE=first: made plans before the others */
    int nranks;             /* the layout set by exec_registry_set_layout (0: none) */
    const uint64_t *labels; /* per rank: node label (borrowed) */
    uint64_t gen;           /* bumped by every change of what a selection could answer: a
                             * choice cached at one generation holds while it stays */
} exec_registry_t;

#define EXEC_REGISTRY_INIT                     \
    {                                          \
        NULL, 0, 0, 0, false, 0, NULL, 0       \
    }

void exec_registry_init(exec_registry_t *reg);
/** Free the table, the tag copies and the plans the registry loaded itself. Safe on NULL. */
void exec_registry_fini(exec_registry_t *reg);

/**
 * The communicator's node layout (`labels[r]`: rank r's node, borrowed for the registry's
 * life). From then on a plan of `nranks` ranks whose memory or switch channels join ranks of
 * different nodes never matches: a one-node plan cannot serve a job across nodes, whatever its
 * rank count (its setup would fail on the first peer of another node).
 */
void exec_registry_set_layout(exec_registry_t *reg, int nranks, const uint64_t *labels);

/** Register a plan made for the job (executor/made.c); the registry owns it. */
mscclpp_result_t exec_registry_add_made(exec_registry_t *reg, struct mscclpp_plan *plan);

/**
 * Register `plan` (held: plan_hold, released at exec_registry_fini, so its caller may destroy
 * it first) with `ranks_per_node` (>= 0, 0:
 * any) and `tags` ("k=v,..." or NULL). Malformed tags (an empty key) are INVALID_ARG.
 */
mscclpp_result_t exec_registry_register(exec_registry_t *reg, const struct mscclpp_plan *plan,
                                        int ranks_per_node, const char *tags);

/**
 * Load every "*.json" regular file of `dir`, in strcmp order of the names, and register each
 * with ranks_per_node 0 and no tags; the registry owns these plans. A file that fails to load
 * (malformed or unreadable) is skipped with a WARN naming it and counted in *nskipped. Either
 * count pointer may be NULL. An unreadable directory is MSCCLPP_ERR_SYSTEM (a missing one is
 * reported without a warning in the log, since "no default plans" is a normal state).
 */
mscclpp_result_t exec_registry_load_dir(exec_registry_t *reg, const char *dir, int *nloaded,
                                        int *nskipped);

/** As exec_registry_load_dir, for a folder the application names (mscclpp_executor_load_plan_dir):
 *  its plans go behind the application's earlier ones and in front of the library's. */
mscclpp_result_t exec_registry_load_dir_first(exec_registry_t *reg, const char *dir,
                                              int *nloaded, int *nskipped);

/** The folder of default plans: MSCCLPP_PLAN_DIR when set, else the installed plans
 *  (executor/plan_dirs.c). */
const char *exec_plan_dir(void);

/**
 * Register the default plans of an executor of `nranks` ranks, `nlocal` per node, on `backend`
 * (executor/plan_dirs.c: MSCCLPP_PLAN_DIR or the installed plans, then MSCCLPP_CACHE_DIR's when
 * set). Never fails: a plan that does not load is skipped with a WARN; no plan at all is a WARN.
 */
void exec_plans_load_defaults(exec_registry_t *reg, const char *backend, int nranks, int nlocal);

/**
 * The first registered plan that matches (see the rule above), or MSCCLPP_ERR_UNSUPPORTED with
 * a message describing the request (not logged as a warning: callers may fall back).
 */
mscclpp_result_t exec_registry_select(const exec_registry_t *reg, const char *collective,
                                      int world_size, int ranks_per_node, bool inplace,
                                      uint64_t message_bytes, const char *tags,
                                      const struct mscclpp_plan **plan);

/**
 * exec_registry_select for one call of `dtype` on `rank`, passing over plans whose chunk layout
 * refuses its sizes (exec_layout_fits): the multi-node packet plans serve small messages but
 * need rank blocks of whole 4-byte words (an allgather of 61 float16 per rank is not), and the
 * Simple plan for the same size takes those calls. Native algorithms are never passed over.
 * `shared`: the call's ranks all pass shareable buffers, so shared_only plans may serve it
 * (exec_registry_select never takes them).
 */
mscclpp_result_t exec_registry_select_fit(const exec_registry_t *reg, const char *collective,
                                          int world_size, int ranks_per_node, bool inplace,
                                          uint64_t message_bytes, int rank, size_t in_bytes,
                                          size_t out_bytes, mscclpp_dtype_t dtype, bool shared,
                                          const struct mscclpp_plan **plan);

/** The message size used for matching: out_bytes for "allgather", in_bytes otherwise. */
uint64_t exec_message_size(const char *collective, uint64_t in_bytes, uint64_t out_bytes);

/**
 * Whether a call's buffers are in place for its collective, as the NCCL API defines it (what
 * a plan's "inplace" and a native algorithm's in-place flag mean): the input is rank's block of
 * the output (allgather), the output rank's block of the input (reducescatter), or the same
 * buffer (allreduce, broadcast, alltoall, reduce). True for a collective this rule does not
 * know (a "test" plan: its author decides) and for NULL.
 */
bool exec_call_in_place(const char *collective, int rank, const void *send, const void *recv,
                        size_t send_bytes, size_t recv_bytes);

/** True when `have` ("k=v,...", may be NULL) satisfies every tag of `want`. */
bool exec_tags_match(const char *have, const char *want);

#ifdef __cplusplus
}
#endif

#endif
