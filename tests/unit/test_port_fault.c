/*
 * A port channel's transport failing after the launch that issued the operation has ended
 * (issue 8: no error lost). The fault is injected with MSCCLPP_TEST_TRANSPORT_FAULT=put:N
 * (transports/transport.c, test only): rank 0's Nth put fails inside its proxy thread.
 *
 * The plan (written here): 2 ranks on one node (the ipc transport), each puts its input into
 * the peer's scratch through a port channel and copies it to its own output. With no flush,
 * the kernel is done as soon as the trigger is in the FIFO; the put runs later, in the proxy.
 * Every way the caller can learn of the failure must report it with the transport's sentence
 * and the peer: the synchronous call itself, mscclpp_stream_synchronize, and
 * mscclpp_executor_get_async_error; and every later call says the executor is broken.
 * A second plan flushes after the put, so the kernel itself sees the proxy fail: its message
 * ("the proxy failed (port channel 0 to rank 1)") must carry the transport's sentence too.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "mscclpp/mscclpp.h"
#include "tests/unit/mp_harness.h"

#define COUNT 1024 /* floats per rank */
#define TIMEOUT_S 5

enum { MODE_SYNC, MODE_STREAM, MODE_ASYNC, MODE_FLUSH, MODE__COUNT };
static const char *const mode_name[] = {"call without stream", "stream sync", "async query",
                                        "flush on a stream"};

/* Rank r: copy i[0] to o[r] and put i[0] into the peer's scratch chunk r (then flush). */
static char *plan_json(int flush)
{
    char *buf = malloc(8192);
    size_t len = 0;
    len += (size_t)snprintf(buf + len, 8192 - len,
        "{\"format\": \"mscclpp-plan/1\", \"name\": \"port_fault%s\", \"collective\": "
        "\"allgather\", \"protocol\": \"Simple\", \"inplace\": false, \"reuse_resources\": false, "
        "\"num_threads_per_block\": 1024, \"use_double_scratch_buffer\": false, "
        "\"buffer_alignment\": 16, \"min_message_size\": 0, "
        "\"max_message_size\": 18446744073709551615, \"gpus\": [", flush ? "_flush" : "");
    for (int r = 0; r < 2; r++)
        len += (size_t)snprintf(buf + len, 8192 - len,
            "%s{\"id\": %d, \"input_chunks\": 1, \"output_chunks\": 2, \"scratch_chunks\": 2, "
            "\"channels\": [{\"channel_type\": \"port\", \"connected_to\": [%d]}], "
            "\"remote_buffers\": [{\"rank\": %d, \"type\": \"s\", \"access_channel_types\": "
            "[\"port\"]}], \"semaphores\": [], \"threadblocks\": [{\"id\": 0, \"ops\": ["
            "{\"name\": \"copy\", \"src_buff\": [{\"type\": \"i\", \"index\": 0, \"size\": 1}], "
            "\"dst_buff\": [{\"type\": \"o\", \"index\": %d, \"size\": 1}]}, "
            "{\"name\": \"put\", \"src_buff\": [{\"type\": \"i\", \"index\": 0, \"size\": 1}], "
            "\"dst_buff\": [{\"buffer_id\": 0, \"index\": %d, \"size\": 1}], \"channel_ids\": "
            "[0], \"channel_type\": \"port\"}%s], "
            "\"channels\": [{\"channel_type\": \"port\", \"channel_ids\": [0]}], "
            "\"remote_buffer_refs\": [{\"access_channel_type\": \"port\", "
            "\"remote_buffer_ids\": [0]}]}]}",
            r ? ", " : "", r, 1 - r, 1 - r, r, r,
            flush ? ", {\"name\": \"flush\", \"channel_ids\": [0], \"channel_type\": \"port\"}"
                  : "");
    snprintf(buf + len, 8192 - len, "]}");
    return buf;
}

static int names(int rank, const char *what, const char *msg, const char *const *words, int n)
{
    for (int i = 0; i < n; i++)
        if (!strstr(msg, words[i]))
            return MP_FAIL(rank, "%s: the message does not name '%s': %s", what, words[i], msg);
    return 0;
}

static int fault_body(int rank, int n, const mscclpp_unique_id_t *id, void *arg)
{
    int mode = *(int *)arg;
    mp_set_timeout(TIMEOUT_S);
    /* rank 0's second put fails: the first call works, the second fails after its launch */
    if (rank == 0) setenv("MSCCLPP_TEST_TRANSPORT_FAULT", "put:2", 1);
    mscclpp_comm_t *comm = NULL;
    if (mp_join_node(rank, n, n, "port-fault", id, &comm)) return 1; /* one node: ipc */
    char *json = plan_json(mode == MODE_FLUSH);
    mscclpp_plan_t *plan = NULL;
    MP_CHECK(rank, mscclpp_plan_load_string(json, strlen(json), &plan));
    free(json);
    mscclpp_executor_t *ex = NULL;
    MP_CHECK(rank, mscclpp_executor_create(comm, &ex));
    float *in = NULL, *out = NULL;
    MP_CHECK(rank, mscclpp_malloc(COUNT * sizeof(float), (void **)&in));
    MP_CHECK(rank, mscclpp_malloc(2 * COUNT * sizeof(float), (void **)&out));
    for (int i = 0; i < COUNT; i++) in[i] = (float)(rank * 10000 + i);
    mscclpp_stream_t s = NULL;
    if (mode != MODE_SYNC) MP_CHECK(rank, mscclpp_stream_create(&s));
    size_t ib = COUNT * sizeof(float), ob = 2 * ib;

    /* call 1: every put works */
    memset(out, 0, ob);
    MP_CHECK(rank, mscclpp_execute(ex, plan, in, out, ib, ob, MSCCLPP_FLOAT32, MSCCLPP_SUM, s));
    if (s) MP_CHECK(rank, mscclpp_stream_synchronize(s));
    for (int i = 0; i < COUNT; i++)
        if (out[rank * COUNT + i] != in[i])
            return MP_FAIL(rank, "call 1: out[%d] = %g, want %g", rank * COUNT + i,
                           out[rank * COUNT + i], in[i]);
    mscclpp_bootstrap_t *boot = NULL;
    MP_CHECK(rank, mscclpp_comm_bootstrap(comm, &boot));
    MP_CHECK(rank, mscclpp_bootstrap_barrier(boot));

    /* call 2: rank 0's put fails in its proxy */
    const char *const want[] = {"put #2 to rank 1 failed", "MSCCLPP_TEST_TRANSPORT_FAULT",
                                "ipc transport", "rank 0"};
    double t0 = mp_now_s();
    mscclpp_result_t r = mscclpp_execute(ex, plan, in, out, ib, ob, MSCCLPP_FLOAT32,
                                         MSCCLPP_SUM, s);
    char msg[2048];
    snprintf(msg, sizeof msg, "%s", mscclpp_last_error());
    if (rank == 1) {
        if (r == MSCCLPP_OK && s) r = mscclpp_stream_synchronize(s);
        if (r != MSCCLPP_OK) return MP_FAIL(rank, "call 2 on the healthy rank: %s", msg);
    } else if (mode == MODE_SYNC) {
        /* the synchronous call hands every trigger to the transport before it returns */
        if (r != MSCCLPP_ERR_REMOTE)
            return MP_FAIL(rank, "%s: call 2 returned %s, want MSCCLPP_ERR_REMOTE: %s",
                           mode_name[mode], mscclpp_result_string(r), msg);
        if (names(rank, mode_name[mode], msg, want, 4)) return 1;
    } else {
        if (r != MSCCLPP_OK) /* a launch on a stream returns before its triggers are done */
            return MP_FAIL(rank, "%s: call 2's launch: %s", mode_name[mode], msg);
        if (mode == MODE_ASYNC) {
            mscclpp_result_t async = MSCCLPP_OK;
            while (async == MSCCLPP_OK && mp_now_s() - t0 < TIMEOUT_S + 1.0) {
                MP_CHECK(rank, mscclpp_executor_get_async_error(ex, &async));
                if (async == MSCCLPP_OK) usleep(2000);
            }
            r = async;
        } else {
            r = mscclpp_stream_synchronize(s);
        }
        snprintf(msg, sizeof msg, "%s", mscclpp_last_error());
        if (r != MSCCLPP_ERR_REMOTE)
            return MP_FAIL(rank, "%s: got %s, want MSCCLPP_ERR_REMOTE: %s", mode_name[mode],
                           mscclpp_result_string(r), msg);
        if (names(rank, mode_name[mode], msg, want, 4)) return 1;
        if (mode == MODE_FLUSH) {
            /* the kernel's own record names the op and the channel; the proxy adds why */
            const char *const kern[] = {"the proxy failed (port channel 0 to rank 1)",
                                        "op 2 (flush)"};
            if (names(rank, mode_name[mode], msg, kern, 2)) return 1;
        }
    }
    if (rank == 0) {
        double dt = mp_now_s() - t0;
        if (dt > TIMEOUT_S + 1.0)
            return MP_FAIL(rank, "%s: the error took %.2f s", mode_name[mode], dt);
        printf("# %s: rank 0 got %s in %.3f s: %s\n", mode_name[mode], mscclpp_result_string(r),
               dt, msg);
        /* every later call: broken, with the original sentence */
        r = mscclpp_execute(ex, plan, in, out, ib, ob, MSCCLPP_FLOAT32, MSCCLPP_SUM, s);
        snprintf(msg, sizeof msg, "%s", mscclpp_last_error());
        if (r != MSCCLPP_ERR_REMOTE || !strstr(msg, "broken by an earlier error") ||
            !strstr(msg, "put #2 to rank 1 failed"))
            return MP_FAIL(rank, "%s: call 3 returned %s: %s", mode_name[mode],
                           mscclpp_result_string(r), msg);
    }
    MP_CHECK(rank, mscclpp_bootstrap_barrier(boot));
    if (s) mscclpp_stream_destroy(s);
    mscclpp_executor_destroy(ex);
    mscclpp_plan_destroy(plan);
    mscclpp_free(in);
    mscclpp_free(out);
    mscclpp_comm_destroy(comm);
    return 0;
}

START_TEST(t_put_fails_after_launch)
{
    int mode = _i;
    unsigned failed = 0;
    ck_assert_msg(mp_run(2, fault_body, &mode, 60, &failed) == 0, "%s: failed ranks 0x%x",
                  mode_name[mode], failed);
}
END_TEST

/* A malformed knob injects nothing (and says so); a put count never reached changes nothing. */
static int no_fault_body(int rank, int n, const mscclpp_unique_id_t *id, void *arg)
{
    setenv("MSCCLPP_TEST_TRANSPORT_FAULT", arg, 1);
    mscclpp_comm_t *comm = NULL;
    if (mp_join_node(rank, n, n, "port-fault", id, &comm)) return 1; /* one node: ipc */
    char *json = plan_json(1);
    mscclpp_plan_t *plan = NULL;
    MP_CHECK(rank, mscclpp_plan_load_string(json, strlen(json), &plan));
    free(json);
    mscclpp_executor_t *ex = NULL;
    MP_CHECK(rank, mscclpp_executor_create(comm, &ex));
    float *in = NULL, *out = NULL;
    MP_CHECK(rank, mscclpp_malloc(COUNT * sizeof(float), (void **)&in));
    MP_CHECK(rank, mscclpp_malloc(2 * COUNT * sizeof(float), (void **)&out));
    for (int i = 0; i < COUNT; i++) in[i] = (float)(rank * 10000 + i);
    for (int call = 0; call < 3; call++)
        MP_CHECK(rank, mscclpp_execute(ex, plan, in, out, COUNT * sizeof(float),
                                       2 * COUNT * sizeof(float), MSCCLPP_FLOAT32, MSCCLPP_SUM,
                                       NULL));
    if (mp_barrier_then_die(rank, comm, false)) return 1;
    mscclpp_executor_destroy(ex);
    mscclpp_plan_destroy(plan);
    mscclpp_free(in);
    mscclpp_free(out);
    mscclpp_comm_destroy(comm);
    return 0;
}

START_TEST(t_knob_off)
{
    static const char *const specs[] = {"put:1000", "put", "put:0", "wire:1", "put:2x"};
    ck_assert_int_eq(mp_run(2, no_fault_body, (void *)specs[_i], 60, NULL), 0);
}
END_TEST

int main(void)
{
    setenv("MSCCLPP_HAL", "host", 1);
    Suite *s = suite_create("port_fault");
    TCase *tc = tcase_create("host");
    tcase_set_timeout(tc, 120);
    tcase_add_loop_test(tc, t_put_fails_after_launch, 0, MODE__COUNT);
    tcase_add_loop_test(tc, t_knob_off, 0, 5);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
