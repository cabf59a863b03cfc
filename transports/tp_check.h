/*
 * Argument checks every transport's put and signal make, in one place (ipc, ucx and ib each
 * had their own copy): the bytes of a put lie inside both registrations, a signal's 8-byte
 * counter inside its region and aligned. INVALID_ARG names the transport, the peer and the ranges.
 */
#ifndef MSCCLPP_TRANSPORTS_TP_CHECK_H
#define MSCCLPP_TRANSPORTS_TP_CHECK_H

#include <stdint.h>

#include "base/debug.h"
#include "mscclpp/mscclpp.h"

static inline mscclpp_result_t tp_check_put(const char *tp, int peer, uint64_t dst_off,
                                            uint64_t dst_bytes, uint64_t src_off,
                                            uint64_t src_bytes, uint64_t bytes)
{
    if (dst_off <= dst_bytes && bytes <= dst_bytes - dst_off && src_off <= src_bytes &&
        bytes <= src_bytes - src_off)
        return MSCCLPP_OK;
    return ERR_ARG("%s put to rank %d: %llu bytes at %llu -> %llu leave the registered regions "
                   "(%llu -> %llu bytes)", tp, peer, (unsigned long long)bytes,
                   (unsigned long long)src_off, (unsigned long long)dst_off,
                   (unsigned long long)src_bytes, (unsigned long long)dst_bytes);
}

static inline mscclpp_result_t tp_check_signal(const char *tp, int peer, uint64_t dst_off,
                                               uint64_t dst_bytes)
{
    if (dst_off <= dst_bytes && dst_bytes - dst_off >= sizeof(uint64_t) && dst_off % 8 == 0)
        return MSCCLPP_OK;
    return ERR_ARG("%s signal to rank %d: counter offset %llu outside its %llu-byte region or "
                   "not 8-byte aligned", tp, peer, (unsigned long long)dst_off,
                   (unsigned long long)dst_bytes);
}

#endif /* MSCCLPP_TRANSPORTS_TP_CHECK_H */
