/*
 * The ib transport where no RDMA device exists (issue 10 item 10): everything that needs no
 * device. Discovery says why ib cannot be used (here and in mscclpp-info); its init, memory
 * registration for ib, a port channel and a plan restricted to ib fail at once with an error
 * naming the transport and the reason, on every rank, without hanging; remote keys meant for
 * another transport or malformed are refused before the ib code reads them. The data path
 * itself needs a device: tests/multinode/test_ib_device (skips with the reason here).
 * On a machine with a device, the no-device cases are left out (and say so).
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "config.h"
#include "base/debug.h"
#include "core/core.h"
#include "mscclpp/mscclpp.h"
#include "tests/unit/mp_harness.h"
#include "transports/transport.h"

/* What discovery says about ib here: the reason it is unusable. */
static char ib_why[256];

START_TEST(t_discovery)
{
    char why[256];
    ck_assert_int_eq(tp_status(TP_IB, why, sizeof why), MSCCLPP_ERR_UNSUPPORTED);
#ifdef MSCCLPP_HAVE_VERBS
    ck_assert(tp_built(TP_IB));
    /* built: the reason is the device list (ENOSYS without a driver, or 0 devices) */
    ck_assert_msg(strstr(why, "built; no RDMA device (ibv_get_device_list:") ||
                      strstr(why, "built; 0 RDMA devices"), "%s", why);
#else
    ck_assert(!tp_built(TP_IB));
    ck_assert_msg(strstr(why, "not built: configure found no libibverbs"), "%s", why);
#endif
    /* selection never proposes ib between two nodes: its probe fails first */
    ck_assert_int_ne(tp_get(TP_IB)->probe(), MSCCLPP_OK);
    /* every slot is set, so a caller never jumps through NULL */
    const char *bad = NULL;
    ck_assert_int_eq(tp_ops_check(tp_get(TP_IB), &bad), MSCCLPP_OK);
    /* MSCCLPP_TRANSPORTS=ib,ipc: allowed, but still unusable for the same reason */
    setenv("MSCCLPP_TRANSPORTS", "ib,ipc", 1);
    char why2[256];
    ck_assert_int_eq(tp_status(TP_IB, why2, sizeof why2), MSCCLPP_ERR_UNSUPPORTED);
    ck_assert_str_eq(why, why2);
    setenv("MSCCLPP_TRANSPORTS", "ucx", 1);
    ck_assert_int_eq(tp_status(TP_IB, why2, sizeof why2), MSCCLPP_ERR_UNSUPPORTED);
    ck_assert_msg(strstr(why2, "excluded by MSCCLPP_TRANSPORTS=ucx"), "%s", why2);
    unsetenv("MSCCLPP_TRANSPORTS");
}
END_TEST

START_TEST(t_init_without_device)
{
    tp_ctx_t *ctx = NULL;
    core_clear_error();
    ck_assert_int_eq(tp_get(TP_IB)->init(NULL, &ctx), MSCCLPP_ERR_UNSUPPORTED);
    ck_assert_ptr_null(ctx);
#ifdef MSCCLPP_HAVE_VERBS
    ck_assert_str_eq(mscclpp_last_error(), "ib transport: no RDMA device");
#else
    ck_assert_ptr_nonnull(strstr(mscclpp_last_error(), "not supported by the ib transport"));
#endif
    /* fini of nothing is harmless */
    tp_get(TP_IB)->fini(NULL);
}
END_TEST

/* mscclpp-info names ib, "unusable", and the reason discovery gave. */
START_TEST(t_info)
{
    char cmd[4200], line[512];
    snprintf(cmd, sizeof cmd, "%s/tools/mscclpp-info 2>&1", getenv("MSCCLPP_TOP_BUILDDIR"));
    FILE *p = popen(cmd, "r");
    ck_assert_ptr_nonnull(p);
    int found = 0;
    while (fgets(line, sizeof line, p))
        if (!strncmp(line, "  ib ", 5)) {
            found = 1;
            ck_assert_msg(strstr(line, "unusable") && strstr(line, ib_why), "%s (want %s)", line,
                          ib_why);
        }
    ck_assert_int_eq(pclose(p), 0);
    ck_assert_msg(found, "mscclpp-info lists no ib line");
}
END_TEST

/* Remote keys: checked by the common header before the ib code sees a byte (no endpoint). */
START_TEST(t_rkey_refused)
{
    const tp_ops_t *ib = tp_get(TP_IB);
    struct {
        uint32_t magic, version, total, bit;
        const char *want;
    } cases[] = {
        {0x12345678u, TP_RKEY_VERSION, 32, MSCCLPP_TRANSPORT_IB, "not a remote key"},
        {TP_RKEY_MAGIC, TP_RKEY_VERSION + 1, 32, MSCCLPP_TRANSPORT_IB, "remote key version"},
        {TP_RKEY_MAGIC, TP_RKEY_VERSION, 32, MSCCLPP_TRANSPORT_UCX, "remote key of transport"},
        {TP_RKEY_MAGIC, TP_RKEY_VERSION, 4096, MSCCLPP_TRANSPORT_IB, "remote key says 4096"},
        {TP_RKEY_MAGIC, TP_RKEY_VERSION, 8, MSCCLPP_TRANSPORT_IB, "remote key says 8"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        uint8_t buf[64];
        wire_writer_t w = {buf, sizeof buf, 0, false};
        wire_put_u32(&w, cases[i].magic);
        wire_put_u32(&w, cases[i].version);
        wire_put_u32(&w, cases[i].total);
        wire_put_u32(&w, cases[i].bit);
        wire_put_u64(&w, 0x1000);
        wire_put_u64(&w, 4096);
        wire_reader_t r = {buf, w.len, 0, false};
        tp_rmem_t *rm = (tp_rmem_t *)0x1;
        ck_assert_int_eq(tp_rmem_unpack(ib, NULL, &r, &rm, NULL), MSCCLPP_ERR_REMOTE);
        ck_assert_msg(strstr(mscclpp_last_error(), cases[i].want) &&
                          strstr(mscclpp_last_error(), "ib"), "case %zu: %s", i,
                      mscclpp_last_error());
        /* a truncated key: the header alone is refused too */
        wire_reader_t t = {buf, 10, 0, false};
        ck_assert_int_eq(tp_rmem_unpack(ib, NULL, &t, &rm, NULL), MSCCLPP_ERR_REMOTE);
    }
}
END_TEST

/* Two ranks on two nodes, only ib allowed between them. */
static int ib_only_body(int rank, int n, const mscclpp_unique_id_t *id, void *arg)
{
    (void)arg;
    mp_set_timeout(10);
    mscclpp_comm_t *comm = NULL;
    if (mp_join_node(rank, n, 1, "ib", id, &comm)) return 1;
    void *buf = NULL;
    MP_CHECK(rank, mscclpp_malloc(4096, &buf));
    /* registering for ib: refused, naming the transport and why */
    mscclpp_regmem_t *m = NULL;
    mscclpp_result_t r = mscclpp_register_memory(comm, buf, 4096, MSCCLPP_TRANSPORT_IB, &m);
    if (r != MSCCLPP_ERR_UNSUPPORTED || m)
        return MP_FAIL(rank, "register for ib: %s", mscclpp_result_string(r));
    if (!strstr(mscclpp_last_error(), "ib"))
        return MP_FAIL(rank, "register for ib names no transport: %s", mscclpp_last_error());
    /* argument errors come first, whatever the transport */
    if (mscclpp_register_memory(comm, NULL, 4096, MSCCLPP_TRANSPORT_IB, &m) !=
        MSCCLPP_ERR_INVALID_ARG)
        return MP_FAIL(rank, "register NULL for ib: %s", mscclpp_last_error());
    if (mscclpp_register_memory(NULL, buf, 4096, MSCCLPP_TRANSPORT_IB, &m) !=
        MSCCLPP_ERR_INVALID_ARG)
        return MP_FAIL(rank, "register with no communicator: %s", mscclpp_last_error());

    setenv("MSCCLPP_TRANSPORTS", "ib", 1);
    /* a port channel: no transport reaches the peer, and the message says why for ib */
    double t0 = mp_now_s();
    mscclpp_port_channel_t *ch = NULL;
    r = mscclpp_port_channel_create(comm, 1 - rank, 3, buf, 4096, buf, 4096, &ch);
    double dt = mp_now_s() - t0;
    char want[64];
    snprintf(want, sizeof want, "no transport reaches rank %d", 1 - rank);
    if (r != MSCCLPP_ERR_UNSUPPORTED || ch || !strstr(mscclpp_last_error(), want) ||
        !strstr(mscclpp_last_error(), "ib: ") || !strstr(mscclpp_last_error(), ib_why))
        return MP_FAIL(rank, "port channel over ib only: %s: %s", mscclpp_result_string(r),
                       mscclpp_last_error());
    if (dt > 1.0) return MP_FAIL(rank, "the refusal took %.2f s", dt);

    /* a plan with port channels between the nodes: refused before any data moves */
    char path[4096];
    snprintf(path, sizeof path, "%s/tests/multinode/plans/2x1/allgather.json",
             getenv("MSCCLPP_TOP_SRCDIR"));
    mscclpp_plan_t *plan = NULL;
    MP_CHECK(rank, mscclpp_plan_load_file(path, &plan));
    mscclpp_executor_t *ex = NULL;
    MP_CHECK(rank, mscclpp_executor_create(comm, &ex));
    float *in = NULL, *out = NULL;
    MP_CHECK(rank, mscclpp_malloc(1024 * 4, (void **)&in));
    MP_CHECK(rank, mscclpp_malloc(2048 * 4, (void **)&out));
    t0 = mp_now_s();
    r = mscclpp_execute(ex, plan, in, out, 1024 * 4, 2048 * 4, MSCCLPP_FLOAT32, MSCCLPP_SUM,
                        NULL);
    dt = mp_now_s() - t0;
    if (r == MSCCLPP_OK) return MP_FAIL(rank, "a plan across nodes ran over ib only");
    if (!strstr(mscclpp_last_error(), "ib: ") || !strstr(mscclpp_last_error(), ib_why))
        return MP_FAIL(rank, "the plan's error does not say why ib is unusable: %s",
                       mscclpp_last_error());
    if (dt > 2.0) return MP_FAIL(rank, "the refusal took %.2f s", dt);
    printf("# rank %d: %s in %.3f s: %s\n", rank, mscclpp_result_string(r), dt,
           mscclpp_last_error());
    unsetenv("MSCCLPP_TRANSPORTS");
    mscclpp_executor_destroy(ex);
    mscclpp_plan_destroy(plan);
    mscclpp_free(in);
    mscclpp_free(out);
    mscclpp_free(buf);
    mscclpp_comm_destroy(comm);
    return 0;
}

START_TEST(t_ib_only_refused) { ck_assert_int_eq(mp_run(2, ib_only_body, NULL, 60, NULL), 0); }
END_TEST

int main(void)
{
    setenv("MSCCLPP_HAL", "host", 1);
    mscclpp_result_t st = tp_status(TP_IB, ib_why, sizeof ib_why);
    Suite *s = suite_create("ib");
    TCase *tc = tcase_create("no_device");
    tcase_set_timeout(tc, 120);
    if (st == MSCCLPP_OK) {
        /* a device exists: these cases describe a machine without one */
        printf("1..0 # SKIP this machine has an RDMA device (%s); see test_ib_device\n", ib_why);
        return 0;
    }
    tcase_add_test(tc, t_discovery);
    tcase_add_test(tc, t_init_without_device);
    tcase_add_test(tc, t_info);
    tcase_add_test(tc, t_rkey_refused);
    tcase_add_test(tc, t_ib_only_refused);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
