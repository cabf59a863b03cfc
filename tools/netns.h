/*
 * Several "nodes" on one machine for the forked launchers (mscclpp-bench --nodes K): node k is
 * a network namespace and UTS namespace of its own, joined to the others by a veth pair on a
 * bridge, with its own host name and address 10.77.S.(k+1) (S from the launcher's pid). The
 * root of the bootstrap listens on the bridge (10.77.S.254). Needs root and the `ip` command;
 * where they are missing, netns_create says why and the caller falls back to a forced node id
 * per rank (MSCCLPP_NODE_ID).
 */
#ifndef MSCCLPP_TOOLS_NETNS_H
#define MSCCLPP_TOOLS_NETNS_H

#include <stddef.h>

#define NETNS_MAX_NODES 64

typedef struct {
    int nodes;
    int subnet;                    /* S of 10.77.S.0/24 */
    int made_bridge;
    int made[NETNS_MAX_NODES];     /* namespaces created */
    char bridge[16];
    char ns[NETNS_MAX_NODES][32];  /* namespace names */
    char veth[NETNS_MAX_NODES][16];/* device inside namespace k */
    char peer[NETNS_MAX_NODES][16]; /* its other end, on the bridge in the caller's namespace */
} netns_t;

/** Make `nodes` namespaces; 0 on success, else -1 with the reason in `why` (nothing left). */
int netns_create(int nodes, netns_t *ns, char *why, size_t cap);
/** In a forked child: enter node k (network + new UTS namespace, host name, env). 0 or -1. */
int netns_enter(const netns_t *ns, int k, char *why, size_t cap);
/** Remove what netns_create made. */
void netns_destroy(netns_t *ns);
/**
 * Remove the namespaces (mscclpp-<pid>-n<k>) and links (mbr<pid>, mp<pid>n<k>, mv<pid>n<k>)
 * that netns_create made in processes that no longer exist: a launcher killed with SIGKILL
 * cannot clean up after itself. Returns how many were removed (0 without root).
 */
int netns_sweep(void);

#endif

/*
 * Node sizes from a command-line spec: "K" (np ranks as K nodes, the first np % K of them one
 * rank larger; np 0: sizes 0) or "a+b+c" (those sizes, node-major). 0, or -1 when malformed.
 */
int netns_split(const char *spec, int np, int *sizes, int *nodes);

/* As netns_launch_setup, with node k of sizes[k] ranks (node-major); -1 unless they add to np. */
int netns_launch_layout(const int *sizes, int nodes, int np);

/*
 * For a forked launcher of `np` ranks as `nodes` nodes (ranks node-major, the first np % nodes
 * nodes one rank larger). netns_launch_setup (parent, before the bootstrap's unique id is made)
 * creates the namespaces and points the bootstrap root at the bridge, or, where namespaces
 * cannot be made, says so on stderr and falls back to MSCCLPP_NODE_ID per rank.
 * netns_launch_enter (in each child, first thing) moves the rank to its node.
 * netns_launch_cleanup (parent, after the children) removes the namespaces. nodes <= 1: no-op.
 */
int netns_launch_setup(int nodes, int np);
int netns_launch_enter(int rank);
void netns_launch_cleanup(void);
