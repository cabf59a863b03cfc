/*
 * Tests that drive one transport directly: a port link (core/port_setup.h) to the peer over a
 * named transport, offering one buffer (#0) and a counter region (slot 0), as a C API port
 * channel does. Header-only: the suites that include it link the library's own objects.
 */
#ifndef MSCCLPP_TESTS_MN_LINK_H
#define MSCCLPP_TESTS_MN_LINK_H

#include <stdlib.h>
#include <string.h>

#include "core/port_setup.h"

/* Open a link to `peer` over transport `name` alone (MSCCLPP_TRANSPORTS for the choice). */
static inline mscclpp_result_t mn_link_open(mscclpp_comm_t *comm, const char *name, int peer,
                                            port_link_t *link)
{
    const char *was = getenv("MSCCLPP_TRANSPORTS");
    char *saved = was ? strdup(was) : NULL;
    setenv("MSCCLPP_TRANSPORTS", name, 1);
    mscclpp_result_t r = port_link_open(comm, peer, link);
    if (saved) setenv("MSCCLPP_TRANSPORTS", saved, 1);
    else unsetenv("MSCCLPP_TRANSPORTS");
    free(saved);
    return r;
}

/* Offer `buf` (registered as mbuf) and the counter region `cnt` (registered as mcnt) and
 * exchange: the peer's are link->theirs.buf[0] and link->theirs.counters. */
static inline mscclpp_result_t mn_link_exchange(mscclpp_comm_t *comm, port_link_t *link, int tag,
                                                tp_mem_t *mbuf, void *buf, size_t buf_bytes,
                                                tp_mem_t *mcnt, void *cnt, size_t cnt_bytes)
{
    static const uint64_t slot0 = 0;
    link->mine.counters_mem = mcnt;
    link->mine.counters = cnt;
    link->mine.counters_bytes = cnt_bytes;
    link->mine.nslots = 1;
    link->mine.slots = &slot0;
    link->mine.bufs = 1;
    link->mine.buf_mem[0] = mbuf;
    link->mine.buf[0] = buf;
    link->mine.buf_bytes[0] = buf_bytes;
    port_link_t *links[1] = {link};
    return port_links_exchange(comm, links, 1, tag);
}

#endif /* MSCCLPP_TESTS_MN_LINK_H */
