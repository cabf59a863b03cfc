/* Public backend, memory and stream calls (include/mscclpp/mscclpp.h) over the selected HAL. */
#include <stdlib.h>

#include "base/debug.h"
#include "hal/hal.h"
#include "hal/hal_api.h"

MSCCLPP_API const char *mscclpp_backend_name(void)
{
    const hal_ops_t *ops;
    if (hal_get(&ops) != MSCCLPP_OK) return "none";
    return ops->name;
}

MSCCLPP_API mscclpp_result_t mscclpp_malloc(size_t bytes, void **ptr)
{
    CHECK_ARG(ptr != NULL);
    CHECK_ARG(bytes > 0);
    const hal_ops_t *ops;
    CHECK(hal_get(&ops));
    return ops->mem_alloc_shareable(bytes, ptr);
}

MSCCLPP_API mscclpp_result_t mscclpp_free(void *ptr)
{
    if (!ptr) return MSCCLPP_OK; /* like free(NULL): cleanup paths need not test */
    const hal_ops_t *ops;
    CHECK(hal_get(&ops));
    return ops->mem_free(ptr);
}

MSCCLPP_API mscclpp_result_t mscclpp_memcpy(void *dst, const void *src, size_t bytes)
{
    CHECK_ARG(bytes == 0 || (dst != NULL && src != NULL));
    const hal_ops_t *ops;
    CHECK(hal_get(&ops));
    return ops->memcpy_sync(dst, src, bytes);
}

MSCCLPP_API mscclpp_result_t mscclpp_memset(void *dst, int value, size_t bytes)
{
    CHECK_ARG(bytes == 0 || dst != NULL);
    const hal_ops_t *ops;
    CHECK(hal_get(&ops));
    return ops->memset_sync(dst, value, bytes);
}

MSCCLPP_API mscclpp_result_t mscclpp_stream_create(mscclpp_stream_t *stream)
{
    CHECK_ARG(stream != NULL);
    const hal_ops_t *ops;
    CHECK(hal_get(&ops));
    struct mscclpp_stream *s = calloc(1, sizeof *s);
    if (!s) return ERR(MSCCLPP_ERR_NO_MEMORY, "mscclpp_stream_create: out of memory");
    mscclpp_result_t res;
    CHECK_GOTO(ops->stream_create(&s->hal), res, free_stream);
    s->ops = ops;
    *stream = s;
    return MSCCLPP_OK;
free_stream:
    free(s);
    return res;
}

MSCCLPP_API mscclpp_result_t mscclpp_stream_synchronize(mscclpp_stream_t stream)
{
    CHECK_ARG(stream != NULL);
    return stream->ops->stream_sync(stream->hal);
}

MSCCLPP_API mscclpp_result_t mscclpp_stream_destroy(mscclpp_stream_t stream)
{
    CHECK_ARG(stream != NULL);
    mscclpp_result_t res = stream->ops->stream_destroy(stream->hal);
    free(stream);
    return res;
}
