/*
 * The ib transport's data path (issue 10 item 10): needs an RDMA device. Without one it
 * prints a TAP skip with the reason (what discovery says); the
 * no-device paths are tests/multinode/test_ib. With a device: two ranks as two nodes
 * (MSCCLPP_NODE_ID), only ib allowed between them; a port channel moves 3 rounds of bytes
 * (two puts, a signal, a wait, a flush) and a 2x1 allgather plan runs; every byte is checked.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "mscclpp/mscclpp.h"
#include "tests/unit/mp_harness.h"
#include "transports/transport.h"

#define BYTES (1024 * 1024 + 24)

static int body(int rank, int n, const mscclpp_unique_id_t *id, void *arg)
{
    (void)arg;
    char node[32];
    snprintf(node, sizeof node, "ibdev-node-%d", rank);
    setenv("MSCCLPP_NODE_ID", node, 1);
    setenv("MSCCLPP_TRANSPORTS", "ib,ipc", 1);
    mscclpp_comm_t *comm = NULL;
    MP_CHECK(rank, mscclpp_comm_init_rank(id, rank, n, &comm));
    uint8_t *send = NULL, *recv = NULL;
    MP_CHECK(rank, mscclpp_malloc(BYTES, (void **)&send));
    MP_CHECK(rank, mscclpp_malloc(BYTES, (void **)&recv));
    for (size_t i = 0; i < BYTES; i++) send[i] = (uint8_t)(rank * 31 + i * 3);
    int peer = 1 - rank;
    mscclpp_port_channel_t *ch = NULL;
    MP_CHECK(rank, mscclpp_port_channel_create(comm, peer, 9, recv, BYTES, send, BYTES, &ch));
    if (strcmp(mscclpp_port_channel_transport(ch), "ib") != 0)
        return MP_FAIL(rank, "transport %s, want ib", mscclpp_port_channel_transport(ch));
    for (int round = 0; round < 3; round++) {
        size_t h = BYTES / 2;
        MP_CHECK(rank, mscclpp_port_channel_put(ch, 0, 0, h));
        MP_CHECK(rank, mscclpp_port_channel_put(ch, h, h, BYTES - h));
        MP_CHECK(rank, mscclpp_port_channel_signal(ch));
        MP_CHECK(rank, mscclpp_port_channel_wait(ch));
        for (size_t i = 0; i < BYTES; i++)
            if (recv[i] != (uint8_t)(peer * 31 + i * 3 + round))
                return MP_FAIL(rank, "round %d byte %zu: %u", round, i, recv[i]);
        MP_CHECK(rank, mscclpp_port_channel_flush(ch));
        for (size_t i = 0; i < BYTES; i++) send[i]++;
        MP_CHECK(rank, mscclpp_port_channel_signal(ch));
        MP_CHECK(rank, mscclpp_port_channel_wait(ch));
    }
    MP_CHECK(rank, mscclpp_bootstrap_barrier(comm->boot));
    MP_CHECK(rank, mscclpp_port_channel_destroy(ch));

    char path[4096];
    snprintf(path, sizeof path, "%s/tests/multinode/plans/2x1/allgather.json",
             getenv("MSCCLPP_TOP_SRCDIR"));
    mscclpp_plan_t *plan = NULL;
    MP_CHECK(rank, mscclpp_plan_load_file(path, &plan));
    mscclpp_executor_t *ex = NULL;
    MP_CHECK(rank, mscclpp_executor_create(comm, &ex));
    float *in = (float *)send, *out = (float *)recv;
    size_t count = BYTES / 8 / 4 * 4; /* out holds n * count floats */
    for (size_t i = 0; i < count; i++) in[i] = (float)(rank * 100000 + (int)i);
    MP_CHECK(rank, mscclpp_execute(ex, plan, in, out, count * 4, count * 8, MSCCLPP_FLOAT32,
                                   MSCCLPP_SUM, NULL));
    for (size_t i = 0; i < 2 * count; i++)
        if (out[i] != (float)((int)(i / count) * 100000 + (int)(i % count)))
            return MP_FAIL(rank, "allgather over ib: out[%zu] = %g", i, out[i]);
    MP_CHECK(rank, mscclpp_bootstrap_barrier(comm->boot));
    mscclpp_executor_destroy(ex);
    mscclpp_plan_destroy(plan);
    mscclpp_free(send);
    mscclpp_free(recv);
    mscclpp_comm_destroy(comm);
    return 0;
}

int main(void)
{
    setenv("MSCCLPP_HAL", "host", 1);
    char why[256];
    printf("1..1\n"); /* TAP, as the test driver reads it */
    if (tp_status(TP_IB, why, sizeof why) != MSCCLPP_OK) {
        printf("ok 1 - ib port channel and allgather # SKIP needs an RDMA device: %s\n", why);
        return 0;
    }
    printf("# ib: %s\n", why);
    fflush(stdout); /* before the ranks fork */
    int failed = mp_run(2, body, NULL, 120, NULL);
    printf("%s 1 - ib port channel and 2x1 allgather over ib\n", failed ? "not ok" : "ok");
    return failed ? 1 : 0;
}
