/*
 * Public bootstrap API: the object, argument checks, then dispatch through the ops table; and
 * bootstraps the user provides. The TCP bootstrap's entry points (mscclpp_get_unique_id,
 * mscclpp_bootstrap_create*) live with it in core/bootstrap_tcp.c, which uses this file.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "core/bootstrap.h"
#include "base/config.h"
#include "base/debug.h"

mscclpp_result_t boot_new(int rank, int nranks, const boot_ops_t *ops, void *impl,
                          mscclpp_bootstrap_t **boot)
{
    mscclpp_bootstrap_t *b = calloc(1, sizeof *b);
    if (!b) return ERR(MSCCLPP_ERR_NO_MEMORY, "bootstrap: out of memory");
    b->rank = rank;
    b->nranks = nranks;
    b->ops = ops;
    b->impl = impl;
    *boot = b;
    return MSCCLPP_OK;
}

void boot_interrupt(mscclpp_bootstrap_t *boot)
{
    if (!boot || __atomic_exchange_n(&boot->interrupted, 1, __ATOMIC_ACQ_REL)) return;
    if (boot->ops->interrupt) boot->ops->interrupt(boot);
}

int boot_notice(mscclpp_bootstrap_t *boot, int suspect, int *from, int *culprit, char *msg,
                size_t cap)
{
    if (!boot || !boot->ops->notice || __atomic_load_n(&boot->interrupted, __ATOMIC_ACQUIRE))
        return 0;
    return boot->ops->notice(boot, suspect, from, culprit, msg, cap);
}

void boot_blame(mscclpp_bootstrap_t *boot, int culprit)
{
    if (!boot || !boot->ops->blame || __atomic_load_n(&boot->interrupted, __ATOMIC_ACQUIRE)) return;
    boot->ops->blame(boot, culprit);
}

/* A call on an interrupted bootstrap: refused before it talks. */
static mscclpp_result_t interrupted(const mscclpp_bootstrap_t *boot, const char *what)
{
    if (!__atomic_load_n(&boot->interrupted, __ATOMIC_ACQUIRE)) return MSCCLPP_OK;
    return ERR(MSCCLPP_ERR_ABORTED,
               "rank %d: bootstrap %s refused: the communicator was aborted "
               "(mscclpp_comm_abort)",
               boot->rank, what);
}

MSCCLPP_API mscclpp_result_t mscclpp_bootstrap_rank(const mscclpp_bootstrap_t *boot, int *rank)
{
    CHECK_ARG(boot != NULL);
    CHECK_ARG(rank != NULL);
    *rank = boot->rank;
    return MSCCLPP_OK;
}

MSCCLPP_API mscclpp_result_t mscclpp_bootstrap_size(const mscclpp_bootstrap_t *boot, int *nranks)
{
    CHECK_ARG(boot != NULL);
    CHECK_ARG(nranks != NULL);
    *nranks = boot->nranks;
    return MSCCLPP_OK;
}

MSCCLPP_API mscclpp_result_t mscclpp_bootstrap_allgather(mscclpp_bootstrap_t *boot, void *data,
                                                         size_t bytes_per_rank)
{
    CHECK_ARG(boot != NULL);
    CHECK_ARG(data != NULL || bytes_per_rank == 0);
    if (bytes_per_rank == 0 || boot->nranks == 1) return MSCCLPP_OK;
    CHECK(interrupted(boot, "allgather"));
    return boot->ops->allgather(boot, data, bytes_per_rank);
}

MSCCLPP_API mscclpp_result_t mscclpp_bootstrap_send(mscclpp_bootstrap_t *boot, const void *data,
                                                    size_t bytes, int peer, int tag)
{
    CHECK_ARG(boot != NULL);
    CHECK_ARG(data != NULL || bytes == 0);
    CHECK_ARG(peer >= 0 && peer < boot->nranks);
    CHECK_ARG(peer != boot->rank);
    CHECK(interrupted(boot, "send"));
    return boot->ops->send(boot, data, bytes, peer, tag);
}

MSCCLPP_API mscclpp_result_t mscclpp_bootstrap_recv(mscclpp_bootstrap_t *boot, void *data,
                                                    size_t bytes, int peer, int tag)
{
    CHECK_ARG(boot != NULL);
    CHECK_ARG(data != NULL || bytes == 0);
    CHECK_ARG(peer >= 0 && peer < boot->nranks);
    CHECK_ARG(peer != boot->rank);
    CHECK(interrupted(boot, "receive"));
    return boot->ops->recv(boot, data, bytes, peer, tag);
}

MSCCLPP_API mscclpp_result_t mscclpp_bootstrap_barrier(mscclpp_bootstrap_t *boot)
{
    CHECK_ARG(boot != NULL);
    if (boot->nranks == 1) return MSCCLPP_OK;
    CHECK(interrupted(boot, "barrier"));
    return boot->ops->barrier(boot);
}

MSCCLPP_API mscclpp_result_t mscclpp_bootstrap_destroy(mscclpp_bootstrap_t *boot)
{
    if (!boot) return MSCCLPP_OK;
    mscclpp_result_t res = boot->ops->destroy(boot);
    free(boot);
    return res;
}

/* ---- bootstraps provided by the user -------------------------------------------------------- */

typedef struct {
    const mscclpp_bootstrap_ops_t *ops;
    void *ctx;
} custom_boot_t;

static custom_boot_t *custom(mscclpp_bootstrap_t *boot) { return boot->impl; }

static mscclpp_result_t custom_allgather(mscclpp_bootstrap_t *boot, void *data, size_t bytes)
{
    return custom(boot)->ops->allgather(custom(boot)->ctx, data, bytes, config_timeout_ns());
}

static mscclpp_result_t custom_send(mscclpp_bootstrap_t *boot, const void *data, size_t bytes,
                                    int peer, int tag)
{
    return custom(boot)->ops->send(custom(boot)->ctx, data, bytes, peer, tag,
                                   config_timeout_ns());
}

static mscclpp_result_t custom_recv(mscclpp_bootstrap_t *boot, void *data, size_t bytes,
                                    int peer, int tag)
{
    return custom(boot)->ops->recv(custom(boot)->ctx, data, bytes, peer, tag,
                                   config_timeout_ns());
}

static mscclpp_result_t custom_barrier(mscclpp_bootstrap_t *boot)
{
    return custom(boot)->ops->barrier(custom(boot)->ctx, config_timeout_ns());
}

static mscclpp_result_t custom_destroy(mscclpp_bootstrap_t *boot)
{
    custom_boot_t *c = custom(boot);
    if (c->ops->destroy) c->ops->destroy(c->ctx);
    free(c);
    return MSCCLPP_OK;
}

static const boot_ops_t custom_ops = {
    .name = "custom",
    .allgather = custom_allgather,
    .send = custom_send,
    .recv = custom_recv,
    .barrier = custom_barrier,
    .destroy = custom_destroy,
};

MSCCLPP_API mscclpp_result_t mscclpp_bootstrap_create_custom(const mscclpp_bootstrap_ops_t *ops,
                                                             void *ctx, int rank, int nranks,
                                                             mscclpp_bootstrap_t **boot)
{
    CHECK_ARG(boot != NULL);
    *boot = NULL;
    CHECK_ARG(ops != NULL);
    CHECK_ARG(ops->allgather && ops->send && ops->recv && ops->barrier);
    CHECK_ARG(nranks > 0);
    CHECK_ARG(rank >= 0 && rank < nranks);
    custom_boot_t *c = malloc(sizeof *c);
    if (!c) return ERR(MSCCLPP_ERR_NO_MEMORY, "bootstrap: out of memory");
    c->ops = ops;
    c->ctx = ctx;
    mscclpp_result_t res = boot_new(rank, nranks, &custom_ops, c, boot);
    if (res != MSCCLPP_OK) free(c);
    return res;
}

MSCCLPP_API uint64_t mscclpp_timeout_ns(void) { return config_timeout_ns(); }
