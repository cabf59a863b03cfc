/*
 * Plans made for the job at hand (internal; executor/made.c): from the rank count and the node
 * of every rank, the default plan of each collective, made in C when an executor needs it and
 * for this rank only (its peers as stubs: what connection setup needs of them), so the cost per
 * rank is its own operations, not the world's.
 *
 * Algorithms (docs/plan-selection.md): one rank: a copy. One node of up to 17 ranks: the DSL's
 * all-pairs programs of plans/, op for op. Several nodes whose ranks each talk to at most 16
 * peers of a kind: hierarchical (memory channels inside a node, port channels between; any
 * number of ranks per node, uneven ones included). Larger: rings over all ranks in node order
 * (alltoall: pairwise exchanges spread over thread blocks of 16 peers).
 */
#ifndef MSCCLPP_EXECUTOR_MADE_H
#define MSCCLPP_EXECUTOR_MADE_H

#include <stdbool.h>
#include <stdint.h>

#include "executor/plan.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Ranks by node. Nodes are numbered by first appearance in rank order (rank 0's is node 0). */
typedef struct {
    int n, nnodes, lmax;
    int *node;  /* per rank */
    int *local; /* per rank: index among its node's ranks (ascending rank order) */
    int *off;   /* nnodes + 1: node k's ranks are ranks[off[k] .. off[k+1]) */
    int *ranks; /* by node, ascending within a node */
} exec_topo_t;

/** From any per-rank node labels (equal labels: one node). */
mscclpp_result_t exec_topo_init(exec_topo_t *t, int n, const uint64_t *node_label);
void exec_topo_fini(exec_topo_t *t);

typedef enum { EXEC_MADE_SIMPLE = 0, EXEC_MADE_PACKET = 1 } exec_made_proto_t;

/** What to make. */
typedef struct {
    const char *collective; /* allreduce, allgather, reducescatter, alltoall, broadcast, reduce */
    exec_made_proto_t proto;
    int root;      /* broadcast, reduce */
    int instances; /* thread blocks of the one-node all-pairs plans (0: 1) */
    uint64_t min_bytes, max_bytes;
} exec_made_spec_t;

/**
 * Make the plan of `spec` for topology `t`: rank `rank`'s part in full, its peers' resources,
 * every other rank's chunk counts (rank -1: every rank in full, for tools and tests).
 * MSCCLPP_ERR_UNSUPPORTED (with a message saying what is made) for a collective or protocol
 * not made for this shape.
 */
mscclpp_result_t exec_made_plan(const exec_topo_t *t, const exec_made_spec_t *spec, int rank,
                                struct mscclpp_plan **out);

/**
 * The count-exact alltoallv plan (executor/alltoallv.c) for `t`: rank `rank`'s part (-1: every
 * rank in full), collective "alltoall", per_peer set: each put goes straight into the peer's
 * output with the call's counts (kern_args.h, "Alltoallv").
 */
mscclpp_result_t exec_made_alltoallv(const exec_topo_t *t, int rank, struct mscclpp_plan **out);

/** Largest message (plan-format §3.2) of the packet plan of `collective` across nodes: every
 *  port put of a packet image at most 16 KiB (docs/multinode.md, "which plan serves which size"). */
uint64_t exec_made_pkt_cap(const exec_topo_t *t, const char *collective);

/** Thread blocks of the one-node all-pairs plans on `backend` (NULL: the generic plans'). */
int exec_made_instances(const char *backend, const char *collective, exec_made_proto_t proto);

/** The collectives plans are made for, in the order of their plans' tables. */
#define EXEC_MADE_NCOLL 6
extern const char *const exec_made_collectives[EXEC_MADE_NCOLL];

/** Whether collective `c` is one plans are made for. */
bool exec_made_collective(const char *c);

/** The algorithm exec_made_plan uses for this shape, in words ("hierarchical", ...). */
const char *exec_made_algorithm(const exec_topo_t *t, const exec_made_spec_t *spec);

#ifdef __cplusplus
}
#endif

#endif
