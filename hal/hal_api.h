/* Internal view of the public memory/stream wrappers (hal/hal_api.c). */
#ifndef MSCCLPP_HAL_API_H
#define MSCCLPP_HAL_API_H

#include "hal/hal.h"

/** A public stream: the HAL stream of the backend that created it. */
struct mscclpp_stream {
    const hal_ops_t *ops;
    hal_stream_t hal;
    int borrowed; /* mscclpp_stream_wrap: the native stream belongs to the caller */
};

/** The HAL stream behind a public stream (NULL for a NULL stream: synchronous). */
static inline hal_stream_t hal_api_stream(mscclpp_stream_t stream)
{
    return stream ? stream->hal : NULL;
}

#endif /* MSCCLPP_HAL_API_H */
