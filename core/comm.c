/* Communicator: ranks, node membership and the backend in use. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/config.h"
#include "core/core.h"
#include "base/debug.h"
#include "core/bootstrap.h"
#include "transports/ipc/ipc_map.h"
#include "transports/transport.h"

/*
 * FNV-1a over the host name, the kernel's boot id and the network namespace: equal only for
 * ranks of one OS image and network stack, so network namespaces on one machine are separate
 * nodes (how CI tests multi-node). MSCCLPP_NODE_ID replaces all three.
 */
static uint64_t node_hash(void)
{
    char text[768] = {0};
    const char *forced = config_get(CFG_MSCCLPP_NODE_ID);
    if (*forced) {
        snprintf(text, sizeof text, "forced:%s", forced);
    } else {
        gethostname(text, 255);
        FILE *f = fopen("/proc/sys/kernel/random/boot_id", "r");
        if (f) {
            size_t n = strlen(text);
            if (!fgets(text + n, (int)(sizeof text - n), f)) text[n] = '\0';
            fclose(f);
        }
        size_t n = strlen(text);
        ssize_t k = readlink("/proc/self/ns/net", text + n, sizeof text - n - 1);
        if (k > 0) text[n + (size_t)k] = '\0';
    }
    uint64_t h = 1469598103934665603ull;
    for (const char *p = text; *p; p++) h = (h ^ (uint8_t)*p) * 1099511628211ull;
    return h;
}

MSCCLPP_API mscclpp_result_t mscclpp_comm_create(mscclpp_bootstrap_t *boot, mscclpp_comm_t **comm)
{
    CHECK_ARG(boot != NULL);
    CHECK_ARG(comm != NULL);
    *comm = NULL;
    mscclpp_result_t res;
    mscclpp_comm_t *c = calloc(1, sizeof *c);
    if (!c) return ERR(MSCCLPP_ERR_NO_MEMORY, "communicator: out of memory");
    pthread_mutex_init(&c->lock, NULL);
    c->boot = boot;
    CHECK_GOTO(mscclpp_bootstrap_rank(boot, &c->rank), res, fail);
    CHECK_GOTO(mscclpp_bootstrap_size(boot, &c->nranks), res, fail);
    CHECK_GOTO(hal_get(&c->hal), res, fail);

    c->node_id = calloc((size_t)c->nranks, sizeof *c->node_id);
    if (!c->node_id) {
        res = ERR(MSCCLPP_ERR_NO_MEMORY, "communicator: out of memory");
        goto fail;
    }
    c->node_id[c->rank] = node_hash();
    CHECK_GOTO(mscclpp_bootstrap_allgather(boot, c->node_id, sizeof *c->node_id), res, fail);
    for (int r = 0; r < c->nranks; r++) {
        if (c->node_id[r] != c->node_id[c->rank]) continue;
        if (r < c->rank) c->local_rank++;
        c->nlocal++;
    }
    CHECK_GOTO(ipc_map_create(c->hal, c->rank, &c->world.maps), res, fail);
    c->world.rank = c->rank;
    c->world.nranks = c->nranks;
    c->world.local_rank = c->local_rank;
    c->world.nlocal = c->nlocal;
    c->world.node_id = c->node_id;
    c->world.hal = c->hal;
    INFO(SUBSYS_INIT, "rank %d/%d: communicator on backend %s, %d ranks on this node", c->rank,
         c->nranks, c->hal->name, c->nlocal);
    *comm = c;
    return MSCCLPP_OK;
fail:
    free(c->node_id);
    pthread_mutex_destroy(&c->lock);
    free(c);
    return res;
}

MSCCLPP_API mscclpp_result_t mscclpp_comm_init_rank(const mscclpp_unique_id_t *id, int rank,
                                                    int nranks, mscclpp_comm_t **comm)
{
    CHECK_ARG(id != NULL);
    CHECK_ARG(comm != NULL);
    CHECK_ARG(nranks > 0 && rank >= 0 && rank < nranks);
    mscclpp_bootstrap_t *boot = NULL;
    CHECK(mscclpp_bootstrap_create(id, rank, nranks, &boot));
    mscclpp_result_t res = mscclpp_comm_create(boot, comm);
    if (res != MSCCLPP_OK) {
        mscclpp_bootstrap_destroy(boot);
        return res;
    }
    (*comm)->own_boot = true;
    return MSCCLPP_OK;
}

MSCCLPP_API mscclpp_result_t mscclpp_comm_rank(const mscclpp_comm_t *comm, int *rank)
{
    CHECK_ARG(comm != NULL);
    CHECK_ARG(rank != NULL);
    *rank = comm->rank;
    return MSCCLPP_OK;
}

MSCCLPP_API mscclpp_result_t mscclpp_comm_size(const mscclpp_comm_t *comm, int *nranks)
{
    CHECK_ARG(comm != NULL);
    CHECK_ARG(nranks != NULL);
    *nranks = comm->nranks;
    return MSCCLPP_OK;
}

MSCCLPP_API mscclpp_result_t mscclpp_comm_local_size(const mscclpp_comm_t *comm, int *nlocal)
{
    CHECK_ARG(comm != NULL);
    CHECK_ARG(nlocal != NULL);
    *nlocal = comm->nlocal;
    return MSCCLPP_OK;
}

MSCCLPP_API mscclpp_result_t mscclpp_comm_bootstrap(mscclpp_comm_t *comm,
                                                    mscclpp_bootstrap_t **boot)
{
    CHECK_ARG(comm != NULL);
    CHECK_ARG(boot != NULL);
    *boot = comm->boot;
    return MSCCLPP_OK;
}

bool comm_same_node(const mscclpp_comm_t *comm, int peer)
{
    return peer >= 0 && peer < comm->nranks && comm->node_id[peer] == comm->node_id[comm->rank];
}

mscclpp_result_t comm_tp_ctx(mscclpp_comm_t *comm, const tp_ops_t *ops, tp_ctx_t **ctx)
{
    int id = tp_index(ops);
    if (id < 0) return ERR_ARG("comm_tp_ctx: unknown transport table");
    mscclpp_result_t res = MSCCLPP_OK;
    pthread_mutex_lock(&comm->lock);
    if (!comm->tp[id]) res = ops->init(&comm->world, &comm->tp[id]);
    if (res == MSCCLPP_OK) *ctx = comm->tp[id];
    pthread_mutex_unlock(&comm->lock);
    return res;
}

void comm_release_resources(mscclpp_comm_t *comm); /* core/comm_mem.c */

/*
 * Abort: calls in progress on other threads must return, and nothing may be freed under them
 * (issue 22 item 4). So abort only sets flags that every wait of a call polls: `aborted` for
 * host waits (the bootstrap's receive and send loops, the executor's entry), the abort word for
 * the interpreter's waits on every backend. The caller destroys the objects once the calls
 * returned.
 */
MSCCLPP_API mscclpp_result_t mscclpp_comm_abort(mscclpp_comm_t *comm)
{
    CHECK_ARG(comm != NULL);
    if (__atomic_exchange_n(&comm->aborted, 1, __ATOMIC_ACQ_REL)) return MSCCLPP_OK;
    INFO(SUBSYS_INIT, "rank %d/%d: communicator aborted", comm->rank, comm->nranks);
    pthread_mutex_lock(&comm->lock);
    if (comm->abort_word) __atomic_store_n(comm->abort_word, 1, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&comm->lock);
    boot_interrupt(comm->boot);
    return MSCCLPP_OK;
}

mscclpp_result_t comm_fail(mscclpp_comm_t *comm, mscclpp_result_t r, bool logged)
{
    if (r == MSCCLPP_OK || r == MSCCLPP_ERR_ABORTED) return r;
    if (!core_error_logged()) logged = false; /* recorded quietly where it happened */
    int suspect = core_culprit();
    char msg[1024], why[512];
    snprintf(msg, sizeof msg, "%s", mscclpp_last_error());
    bool more = false;
    int from = -1, culprit = -1, waited_for = suspect;
    /* A notice names the rank a peer failed on directly (or one that rank named in turn), so
     * it is nearer the rank that failed first than this rank's own view (the peer it waited
     * for may have stopped, or exited, because of that rank). A live peer may be stalled
     * behind a rank that died and time out as late as this rank did: the bootstrap names a
     * dead rank then (boot_notice with `from` -1). */
    /* A peer that cannot be named (CORE_CULPRIT_UNKNOWN): the bootstrap's notices and a rank
     * whose process is gone say who it was, if anyone. */
    bool unknown = suspect == CORE_CULPRIT_UNKNOWN;
    if (unknown) suspect = waited_for = -1;
    if ((unknown || (suspect >= 0 && suspect < comm->nranks && suspect != comm->rank)) &&
        boot_notice(comm->boot, suspect, &from, &culprit, why, sizeof why) && culprit >= 0 &&
        culprit < comm->nranks && culprit != suspect && culprit != comm->rank) {
        more = true;
        suspect = culprit;
    }
    if (more && from >= 0)
        r = ERR(r, "%s; rank %d had reported that it failed because of rank %d (%s)", msg, from,
                culprit, why);
    else if (more && unknown) /* no peer named: the rank that died is the likeliest writer */
        r = ERR(r, "%s; %s", msg, why);
    else if (more) /* the suspect is alive: stalled behind a rank that died, most likely */
        r = ERR(r, "%s; %s: rank %d is likely stalled behind it", msg, why, waited_for);
    else if (!logged) r = ERR(r, "%s", msg);
    core_set_culprit(suspect);
    if (suspect >= 0 && suspect < comm->nranks && suspect != comm->rank)
        boot_blame(comm->boot, suspect);
    return r;
}

mscclpp_result_t comm_abort_error(const mscclpp_comm_t *comm, const char *what)
{
    return ERR(MSCCLPP_ERR_ABORTED,
               "rank %d: %s: the communicator was aborted (mscclpp_comm_abort)", comm->rank, what);
}

mscclpp_result_t comm_abort_word(mscclpp_comm_t *comm, uint64_t **word)
{
    *word = NULL;
    pthread_mutex_lock(&comm->lock);
    if (!comm->abort_word) {
        void *p = NULL;
        if (comm->hal->host_alloc(sizeof *comm->abort_word, &p) == MSCCLPP_OK) {
            /* an abort before this word existed still reaches the launches */
            __atomic_store_n((uint64_t *)p, comm_aborted(comm) ? 1 : 0, __ATOMIC_RELEASE);
            __atomic_store_n(&comm->abort_word, (uint64_t *)p, __ATOMIC_RELEASE);
        } else {
            INFO(SUBSYS_INIT,
                 "rank %d: no host-mapped abort word (%s): launches end by "
                 "MSCCLPP_TIMEOUT after an abort",
                 comm->rank, mscclpp_last_error());
            core_clear_error();
        }
    }
    *word = comm->abort_word;
    pthread_mutex_unlock(&comm->lock);
    return MSCCLPP_OK;
}

MSCCLPP_API mscclpp_result_t mscclpp_comm_destroy(mscclpp_comm_t *comm)
{
    if (!comm) return MSCCLPP_OK;
    if (comm->hal) { /* MSCCLPP_HAL_COUNT=1: what the communicator's life asked of the backend */
        char when[64];
        snprintf(when, sizeof when, "at mscclpp_comm_destroy of rank %d", comm->rank);
        hal_count_report(when);
    }
    for (int i = 0; i < TP__COUNT; i++) /* the contexts before the world they see */
        if (comm->tp[i]) tp_get(i)->fini(comm->tp[i]);
    comm_release_resources(comm);
    if (comm->own_boot) mscclpp_bootstrap_destroy(comm->boot);
    if (comm->abort_word) comm->hal->host_free(comm->abort_word);
    free(comm->node_id);
    pthread_mutex_destroy(&comm->lock);
    free(comm);
    return MSCCLPP_OK;
}
