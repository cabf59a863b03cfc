/*
 * The multi-process test harness: run a function as N forked ranks that share one bootstrap
 * session, and the set-up those ranks share (forced nodes, timeouts, killed peers). Public API
 * only, so every suite can link it.
 */
#ifndef MSCCLPP_TEST_MP_HARNESS_H
#define MSCCLPP_TEST_MP_HARNESS_H

#include <stdbool.h>

#include "mscclpp/mscclpp.h"

/** A rank body: return 0 on success, anything else is a failure (printed by the harness). */
typedef int (*mp_rank_fn)(int rank, int nranks, const mscclpp_unique_id_t *id, void *arg);

/**
 * Fork `nranks` children (rank 0 creates the unique id and passes it to the others, so no
 * library thread exists in this process when it forks) that each run
 * fn(rank, ...) and exit with its return value, and wait for them all (at most `timeout_s`
 * seconds, then the stragglers are killed). Returns the number of ranks that failed;
 * `failed_ranks` (if not NULL) gets a bit per failed rank.
 */
int mp_run(int nranks, mp_rank_fn fn, void *arg, int timeout_s, unsigned *failed_ranks);

/**
 * If set, every child of mp_run calls it first, before rank 0 makes the unique id (so a rank
 * can move into its node's network namespace, where its bootstrap must listen); a nonzero
 * return fails the rank.
 */
extern int (*mp_child_setup)(int rank);

/** Print a failure message from inside a rank and return 1 (for `return MP_FAIL(...)`). */
int mp_fail(int rank, const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
#define MP_FAIL(rank, ...) mp_fail(rank, __FILE__, __LINE__, __VA_ARGS__)
/** Check a library call inside a rank body. */
#define MP_CHECK(rank, call)                                                                   \
    do {                                                                                       \
        mscclpp_result_t mp_r_ = (call);                                                       \
        if (mp_r_ != MSCCLPP_OK)                                                               \
            return mp_fail(rank, __FILE__, __LINE__, "%s -> %s: %s", #call,                    \
                           mscclpp_result_string(mp_r_), mscclpp_last_error());                \
    } while (0)

/** Seconds on the monotonic clock (how long an error took to come). */
double mp_now_s(void);

/** Write all `n` bytes to `fd` (a pipe between a test's processes); 0, or -1 on an error. */
int mp_write_all(int fd, const void *buf, size_t n);

/** Read exactly `n` bytes from `fd` within `timeout_ms` in all; 0, or -1 on an error, end of
 *  file or the timeout (the process at the other end died or hung). */
int mp_read_all(int fd, void *buf, size_t n, int timeout_ms);

/** MSCCLPP_TIMEOUT of this process from now on, in whole seconds (a plan lowered earlier keeps
 *  the bound it was lowered with). */
void mp_set_timeout(int seconds);

/**
 * Put `rank` on the forced node "<tag>-node-<rank / per_node>" (MSCCLPP_NODE_ID), with UCX over
 * loopback tcp between nodes (UCX_TLS=tcp, UCX_NET_DEVICES=lo unless set: other interfaces come
 * and go on a machine that runs namespace tests, and a worker address that listed one gone made
 * ucp_ep_create fail now and then), and create its communicator. Fails the rank (returns 1)
 * when node detection does not see `per_node` ranks on its node.
 */
int mp_join_node(int rank, int nranks, int per_node, const char *tag, const mscclpp_unique_id_t *id,
                 mscclpp_comm_t **comm);

/** Wait for every rank at the communicator's bootstrap, then, if `die`, end this process with
 *  SIGKILL (a rank killed between calls); returns 1 when the barrier failed. */
int mp_barrier_then_die(int rank, mscclpp_comm_t *comm, bool die);

/** True when `msg` names "rank R" (and not only "rank R0", "rank R1", ...). */
bool mp_names_rank(const char *msg, int r);

/** The source tree: MSCCLPP_TOP_SRCDIR (make check sets it), else ".". */
const char *mp_src_dir(void);

/** The source tree's plans/, made this process's MSCCLPP_PLAN_DIR (the default plans the
 *  executor registers come from there); returned for paths of plan files in it. */
const char *mp_plan_dir(void);

/** The application's own shareable memory as the tests make it on the host backend (what a
 *  cudaMalloc'd tensor is on CUDA: memory the library did not allocate that peers can map): a
 *  memfd of `bytes` mapped MAP_SHARED, its descriptor closed; at `at` (MAP_FIXED, replacing what
 *  was mapped there) unless NULL. NULL on failure; munmap(p, bytes) frees it. */
void *mp_app_map(size_t bytes, void *at);

/** What an executor test opens in a rank: the communicator, its bootstrap, an executor and,
 *  when asked, one plan. */
typedef struct {
    mscclpp_comm_t *comm;
    mscclpp_bootstrap_t *boot;
    mscclpp_executor_t *ex;
    mscclpp_plan_t *plan;
} mp_exec_t;

/** Open `e` (zeroed first) for `rank` of `nranks`; `plan_path` NULL for no plan. Fails the rank
 *  (returns 1, message printed) at the first call that fails; mp_exec_close releases what was
 *  made either way. */
int mp_exec_open(int rank, int nranks, const mscclpp_unique_id_t *id, const char *plan_path,
                 mp_exec_t *e);
/** Destroy the executor, the plan and the communicator of `e` (any of them may be NULL). */
void mp_exec_close(mp_exec_t *e);

#endif
