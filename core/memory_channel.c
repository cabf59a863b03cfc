/*
 * Memory channels driven from the host: data moves by loads and stores through the mapping of
 * the peer's memory; signal adds to the peer's inbound counter, wait watches ours. This is the
 * host backend's channel; on GPU backends the same channel is driven by the interpreter.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "base/debug.h"

struct mscclpp_memory_channel {
    mscclpp_semaphore_t *sem;
    char *dst;        /* peer memory, mapped */
    size_t dst_size;
    char *src;        /* local memory */
    size_t src_size;  /* bytes from src to the end of its allocation */
};

static bool host_driven(const mscclpp_comm_t *comm)
{
    return comm->hal == hal_host_ops();
}

MSCCLPP_API mscclpp_result_t mscclpp_memory_channel_create(mscclpp_semaphore_t *sem,
                                                           const mscclpp_regmem_t *dst, void *src,
                                                           mscclpp_memory_channel_t **chan)
{
    CHECK_ARG(sem != NULL);
    CHECK_ARG(dst != NULL);
    CHECK_ARG(chan != NULL);
    *chan = NULL;
    mscclpp_comm_t *comm = sem->comm;
    if (dst->rank != sem->pair.peer)
        return ERR_ARG("memory channel: destination memory belongs to rank %d, semaphore pairs "
                       "with rank %d", dst->rank, sem->pair.peer);
    if (!dst->ptr)
        return ERR(MSCCLPP_ERR_UNSUPPORTED,
                   "memory channel: memory of rank %d is not mapped here (other node?)", dst->rank);
    size_t src_size = 0;
    if (src) {
        void *base = NULL;
        size_t alloc = 0;
        if (comm->hal->mem_range(src, &base, &alloc) != MSCCLPP_OK)
            return ERR_ARG("memory channel: source %p is not memory from mscclpp_malloc", src);
        src_size = alloc - (size_t)((char *)src - (char *)base);
    }
    mscclpp_memory_channel_t *c = calloc(1, sizeof *c);
    if (!c) return ERR(MSCCLPP_ERR_NO_MEMORY, "memory channel: out of memory");
    c->sem = sem;
    c->dst = dst->ptr;
    c->dst_size = dst->size;
    c->src = src;
    c->src_size = src_size;
    *chan = c;
    return MSCCLPP_OK;
}

static mscclpp_result_t check_host(const mscclpp_memory_channel_t *chan, const char *what)
{
    if (!host_driven(chan->sem->comm))
        return ERR(MSCCLPP_ERR_UNSUPPORTED,
                   "memory channel %s from the host needs the host backend (this is %s): "
                   "GPU backends drive channels from the plan interpreter",
                   what, chan->sem->comm->hal->name);
    return MSCCLPP_OK;
}

static mscclpp_result_t check_range(const char *what, size_t off, size_t bytes, size_t size)
{
    if (off > size || bytes > size - off)
        return ERR_ARG("memory channel %s: [%zu, +%zu) is outside the %zu-byte region", what, off,
                       bytes, size);
    return MSCCLPP_OK;
}

MSCCLPP_API mscclpp_result_t mscclpp_memory_channel_put(mscclpp_memory_channel_t *chan,
                                                        size_t dst_offset, size_t src_offset,
                                                        size_t bytes)
{
    CHECK_ARG(chan != NULL);
    CHECK_ARG(chan->src != NULL);
    CHECK(check_host(chan, "put"));
    CHECK(check_range("put destination", dst_offset, bytes, chan->dst_size));
    CHECK(check_range("put source", src_offset, bytes, chan->src_size));
    memcpy(chan->dst + dst_offset, chan->src + src_offset, bytes);
    return MSCCLPP_OK;
}

MSCCLPP_API mscclpp_result_t mscclpp_memory_channel_get(mscclpp_memory_channel_t *chan,
                                                        size_t src_offset, size_t dst_offset,
                                                        size_t bytes)
{
    CHECK_ARG(chan != NULL);
    CHECK_ARG(chan->src != NULL);
    CHECK(check_host(chan, "get"));
    CHECK(check_range("get source", src_offset, bytes, chan->dst_size));
    CHECK(check_range("get destination", dst_offset, bytes, chan->src_size));
    memcpy(chan->src + dst_offset, chan->dst + src_offset, bytes);
    return MSCCLPP_OK;
}

static mscclpp_result_t do_signal(mscclpp_memory_channel_t *chan, bool relaxed)
{
    CHECK_ARG(chan != NULL);
    CHECK(check_host(chan, "signal"));
    __atomic_fetch_add(chan->sem->pair.outbound, 1, relaxed ? __ATOMIC_RELAXED : __ATOMIC_RELEASE);
    return MSCCLPP_OK;
}

static mscclpp_result_t do_wait(mscclpp_memory_channel_t *chan, bool relaxed)
{
    CHECK_ARG(chan != NULL);
    CHECK(check_host(chan, "wait"));
    sem_pair_t *p = &chan->sem->pair;
    char what[128];
    snprintf(what, sizeof what, "rank %d waiting for a signal from rank %d (tag %d, signal #%llu)",
             chan->sem->comm->rank, p->peer, p->tag, (unsigned long long)p->expected + 1);
    mscclpp_result_t res = core_wait_counter(p->inbound, p->expected + 1, relaxed, what);
    if (res == MSCCLPP_OK) p->expected++;
    return res;
}

MSCCLPP_API mscclpp_result_t mscclpp_memory_channel_signal(mscclpp_memory_channel_t *chan)
{
    return do_signal(chan, false);
}

MSCCLPP_API mscclpp_result_t mscclpp_memory_channel_relaxed_signal(mscclpp_memory_channel_t *chan)
{
    return do_signal(chan, true);
}

MSCCLPP_API mscclpp_result_t mscclpp_memory_channel_wait(mscclpp_memory_channel_t *chan)
{
    return do_wait(chan, false);
}

MSCCLPP_API mscclpp_result_t mscclpp_memory_channel_relaxed_wait(mscclpp_memory_channel_t *chan)
{
    return do_wait(chan, true);
}

MSCCLPP_API mscclpp_result_t mscclpp_memory_channel_flush(mscclpp_memory_channel_t *chan)
{
    CHECK_ARG(chan != NULL);
    CHECK(check_host(chan, "flush"));
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
    return MSCCLPP_OK;
}

MSCCLPP_API mscclpp_result_t mscclpp_memory_channel_destroy(mscclpp_memory_channel_t *chan)
{
    free(chan);
    return MSCCLPP_OK;
}
