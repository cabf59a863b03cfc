/*
 * Tuning tables (executor/tuning.c): a good table loads; every malformed or mismatched one is
 * refused with a message naming the file and the reason; the default path; picking a plan from
 * the table against a registry (including entries that cannot be honoured).
 */
#include <check.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "executor/plan.h"
#include "executor/registry.h"
#include "executor/tuning.h"

static char dir[64];

static const exec_tuning_key_t key = {
    .backend = "host", .device = "Test CPU @ 2GHz", .nranks = 2, .ranks_per_node = 2};

static void setup(void)
{
    snprintf(dir, sizeof dir, "/tmp/test_tuning.XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(dir));
}

static void teardown(void)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    ck_assert_int_eq(system(cmd), 0);
}

/* Write `text` to dir/name; returns the path (static). */
static const char *put(const char *name, const char *text)
{
    static char path[256];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs(text, f);
    ck_assert_int_eq(fclose(f), 0);
    return path;
}

#define HEAD(fmt, ver, backend, device, nranks, rpn)                                              \
    "{\"format\": \"" fmt "\", \"version\": " ver ", \"backend\": \"" backend                    \
    "\", \"device\": \"" device "\", \"nranks\": " nranks ", \"ranks_per_node\": " rpn ", "
#define GOOD_HEAD HEAD("mscclpp-tuning", "1", "host", "Test CPU @ 2GHz", "2", "2")
#define ENTRY(coll, ip, lo, hi, plan, nb, nt)                                                    \
    "{\"collective\": \"" coll "\", \"inplace\": " ip ", \"min_bytes\": " lo                     \
    ", \"max_bytes\": " hi ", \"plan\": \"" plan "\", \"nblocks\": " nb ", \"nthreads\": " nt "}"

START_TEST(good_table_loads)
{
    const char *path =
        put("good.json", GOOD_HEAD "\"entries\": [" ENTRY("allreduce", "false", "0", "1024",
                                                          "p_small", "1", "0") ", "
                                   ENTRY("allreduce", "false", "1025", "null", "p_big", "4",
                                         "512") "]}");
    exec_tuning_t *t = NULL;
    ck_assert_msg(exec_tuning_load(path, &key, &t) == MSCCLPP_OK, "%s", mscclpp_last_error());
    ck_assert_int_eq(t->count, 2);
    ck_assert_str_eq(t->path, path);
    ck_assert_str_eq(t->entries[0].plan, "p_small");
    ck_assert_uint_eq(t->entries[0].max_bytes, 1024);
    ck_assert_uint_eq(t->entries[1].min_bytes, 1025);
    ck_assert_uint_eq(t->entries[1].max_bytes, UINT64_MAX);
    ck_assert_int_eq(t->entries[1].nblocks, 4);
    ck_assert_int_eq(t->entries[1].nthreads, 512);
    ck_assert(!t->entries[1].inplace);
    exec_tuning_free(t);
}
END_TEST

/* Each bad table: the call fails, *out stays NULL, and the message names the file and why. */
static const struct {
    const char *name, *text, *why;
} bad[] = {
    {"notjson.json", "{\"format\": ", "not valid JSON"},
    {"array.json", "[1, 2]", "top level must be an object"},
    {"format.json", HEAD("other", "1", "host", "Test CPU @ 2GHz", "2", "2") "\"entries\": []}",
     "format \"other\""},
    {"version.json",
     HEAD("mscclpp-tuning", "99", "host", "Test CPU @ 2GHz", "2", "2") "\"entries\": []}",
     "version 99"},
    {"backend.json",
     HEAD("mscclpp-tuning", "1", "cuda", "Test CPU @ 2GHz", "2", "2") "\"entries\": []}",
     "backend \"cuda\""},
    {"device.json", HEAD("mscclpp-tuning", "1", "host", "NVIDIA H100", "2", "2") "\"entries\": []}",
     "device \"NVIDIA H100\""},
    {"nranks.json",
     HEAD("mscclpp-tuning", "1", "host", "Test CPU @ 2GHz", "4", "4") "\"entries\": []}",
     "written for 4 ranks"},
    {"rpn.json",
     HEAD("mscclpp-tuning", "1", "host", "Test CPU @ 2GHz", "2", "1") "\"entries\": []}",
     "1 ranks per node"},
    {"noentries.json", GOOD_HEAD "\"x\": 1}", "\"entries\" must be an array"},
    {"entry.json",
     GOOD_HEAD "\"entries\": [" ENTRY("allreduce", "false", "0", "10", "p", "-1", "0") "]}",
     "entries[0].\"nblocks\""},
    {"range.json",
     GOOD_HEAD "\"entries\": [" ENTRY("allreduce", "false", "100", "10", "p", "1", "0") "]}",
     "entries[0].\"max_bytes\""},
    {"threads.json",
     GOOD_HEAD "\"entries\": [" ENTRY("allreduce", "false", "0", "10", "p", "1", "1.5") "]}",
     "entries[0].\"nthreads\""},
    {"inplace.json",
     GOOD_HEAD "\"entries\": [" ENTRY("allreduce", "1", "0", "10", "p", "1", "0") "]}",
     "\"inplace\" must be true or false"},
    {"dup.json", GOOD_HEAD "\"nranks\": 2, \"entries\": []}", "not valid JSON"},
    /* issue 22: accepted silently before (the entry was never used, or the launch refused) */
    {"collective.json",
     GOOD_HEAD "\"entries\": [" ENTRY("allreduce", "false", "0", "10", "p", "1", "0") ", " ENTRY(
         "allreduc", "false", "11", "20", "p", "1", "0") "]}",
     "entries[1].\"collective\": \"allreduc\" is not a collective"},
    {"threads5000.json",
     GOOD_HEAD "\"entries\": [" ENTRY("allreduce", "false", "0", "10", "p", "1", "5000") "]}",
     "entries[0].\"nthreads\" must be an integer in [0, 1024]"},
};

START_TEST(bad_table_refused)
{
    const char *path = put(bad[_i].name, bad[_i].text);
    exec_tuning_t *t = (exec_tuning_t *)(uintptr_t)1;
    mscclpp_result_t r = exec_tuning_load(path, &key, &t);
    ck_assert_int_eq(r, MSCCLPP_ERR_INVALID_ARG);
    ck_assert_ptr_null(t);
    const char *msg = mscclpp_last_error();
    ck_assert_msg(strstr(msg, path) != NULL, "%s: message does not name the file: %s",
                  bad[_i].name, msg);
    ck_assert_msg(strstr(msg, bad[_i].why) != NULL, "%s: message lacks \"%s\": %s", bad[_i].name,
                  bad[_i].why, msg);
}
END_TEST

START_TEST(missing_file)
{
    exec_tuning_t *t = NULL;
    ck_assert_int_eq(exec_tuning_load("/nonexistent/t.json", &key, &t), MSCCLPP_ERR_SYSTEM);
    ck_assert_ptr_nonnull(strstr(mscclpp_last_error(), "/nonexistent/t.json"));
}
END_TEST

START_TEST(default_path)
{
    char buf[512];
    setenv("XDG_CACHE_HOME", "/x/cache", 1);
    ck_assert_int_eq(exec_tuning_default_path(&key, buf, sizeof buf), 0);
    ck_assert_str_eq(buf, "/x/cache/mscclpp/tuning/host-Test_CPU___2GHz-2.json");
    unsetenv("XDG_CACHE_HOME");
    setenv("HOME", "/home/u", 1);
    ck_assert_int_eq(exec_tuning_default_path(&key, buf, sizeof buf), 0);
    ck_assert_str_eq(buf, "/home/u/.cache/mscclpp/tuning/host-Test_CPU___2GHz-2.json");
    ck_assert_int_eq(exec_tuning_default_path(&key, buf, 10), -1);
}
END_TEST

/* A plan with `nblocks` blocks on each of 2 ranks that does nothing. */
static struct mscclpp_plan *mk(const char *name, int nblocks, uint64_t min, uint64_t max)
{
    static char text[8192];
    int n = snprintf(text, sizeof text,
                     "{\"name\": \"%s\", \"collective\": \"allreduce\", \"protocol\": \"Simple\", "
                     "\"inplace\": false, \"min_message_size\": %llu, \"max_message_size\": %llu, "
                     "\"gpus\": [",
                     name, (unsigned long long)min, (unsigned long long)max);
    for (int r = 0; r < 2; r++) {
        n += snprintf(text + n, sizeof text - (size_t)n,
                      "%s{\"id\": %d, \"input_chunks\": 1, \"output_chunks\": 1, "
                      "\"scratch_chunks\": 0, \"channels\": [], \"remote_buffers\": [], "
                      "\"threadblocks\": [", r ? ", " : "", r);
        for (int b = 0; b < nblocks; b++)
            n += snprintf(text + n, sizeof text - (size_t)n,
                          "%s{\"id\": %d, \"channels\": [], \"ops\": [{\"name\": \"nop\"}]}",
                          b ? ", " : "", b);
        n += snprintf(text + n, sizeof text - (size_t)n, "]}");
    }
    snprintf(text + n, sizeof text - (size_t)n, "]}");
    struct mscclpp_plan *p = NULL;
    ck_assert_msg(plan_load_json(text, strlen(text), name, &p) == MSCCLPP_OK, "%s",
                  mscclpp_last_error());
    return p;
}

START_TEST(pick_from_table)
{
    struct mscclpp_plan *a = mk("plan_a", 1, 0, UINT64_MAX), *b = mk("plan_b", 4, 0, 4096);
    exec_registry_t reg;
    exec_registry_init(&reg);
    ck_assert_int_eq(exec_registry_register(&reg, a, 0, NULL), MSCCLPP_OK);
    ck_assert_int_eq(exec_registry_register(&reg, b, 0, NULL), MSCCLPP_OK);
    ck_assert_int_eq(exec_plan_nblocks(b), 4);

    const struct mscclpp_plan *list[4];
    int n = 0;
    exec_tuning_candidates(&reg, "allreduce", 2, 2, false, 100, 0, list, 4, &n);
    ck_assert_int_eq(n, 2);
    exec_tuning_candidates(&reg, "allreduce", 2, 2, false, 100, 4, list, 4, &n);
    ck_assert_int_eq(n, 1);
    ck_assert_ptr_eq(list[0], b);
    exec_tuning_candidates(&reg, "allreduce", 2, 2, false, 8192, 0, list, 4, &n);
    ck_assert_int_eq(n, 1); /* plan_b stops at 4096 */

    const char *path = put(
        "pick.json", GOOD_HEAD "\"entries\": [" ENTRY("allreduce", "false", "0", "4096", "plan_b",
                                                     "4", "256") ", "
                     ENTRY("allreduce", "false", "4097", "null", "plan_b", "4", "0") ", "
                     ENTRY("allgather", "false", "0", "null", "plan_gone", "1", "0") "]}");
    exec_tuning_t *t = NULL;
    ck_assert_msg(exec_tuning_load(path, &key, &t) == MSCCLPP_OK, "%s", mscclpp_last_error());
    int nth = -1;
    /* without the table the registry's first match (plan_a) wins; the table moves it to b */
    ck_assert_ptr_null(exec_tuning_pick(NULL, &reg, "allreduce", 2, 2, false, 100, &nth));
    ck_assert_ptr_eq(exec_tuning_pick(t, &reg, "allreduce", 2, 2, false, 100, &nth), b);
    ck_assert_int_eq(nth, 256);
    /* in-place has no entry */
    ck_assert_ptr_null(exec_tuning_pick(t, &reg, "allreduce", 2, 2, true, 100, &nth));
    ck_assert_int_eq(nth, 0);
    /* the entry holds, but plan_b does not accept 8192 bytes: warned once, default rule */
    ck_assert_ptr_null(exec_tuning_pick(t, &reg, "allreduce", 2, 2, false, 8192, &nth));
    ck_assert(t->entries[1].warned);
    /* a plan that is not registered */
    ck_assert_ptr_null(exec_tuning_pick(t, &reg, "allgather", 2, 2, false, 8, &nth));
    ck_assert(t->entries[2].warned);
    /* another world size never matches */
    ck_assert_ptr_null(exec_tuning_pick(t, &reg, "allreduce", 3, 3, false, 100, &nth));
    exec_tuning_free(t);
    exec_registry_fini(&reg);
    plan_free(a);
    plan_free(b);
}
END_TEST

/* The launch shape is checked before anything runs: a plan's block count is fixed. */
START_TEST(launch_shape_checked)
{
    mscclpp_unique_id_t id;
    mscclpp_comm_t *comm = NULL;
    mscclpp_executor_t *ex = NULL;
    setenv("MSCCLPP_TUNING_FILE", "none", 1);
    ck_assert_int_eq(mscclpp_get_unique_id(&id), MSCCLPP_OK);
    ck_assert_msg(mscclpp_comm_init_rank(&id, 0, 1, &comm) == MSCCLPP_OK, "%s",
                  mscclpp_last_error());
    ck_assert_msg(mscclpp_executor_create(comm, &ex) == MSCCLPP_OK, "%s", mscclpp_last_error());
    ck_assert_ptr_null(mscclpp_executor_tuning_file(ex));
    struct mscclpp_plan *b = mk("plan_b", 4, 0, 4096);
    ck_assert_int_eq(mscclpp_plan_num_blocks(b), 4);
    char buf[64];
    mscclpp_result_t r = mscclpp_execute_launch(ex, b, buf, buf + 32, 8, 8, MSCCLPP_FLOAT32,
                                                MSCCLPP_SUM, MSCCLPP_PACKET_LL16, 2, 0, NULL);
    ck_assert_int_eq(r, MSCCLPP_ERR_UNSUPPORTED);
    ck_assert_ptr_nonnull(strstr(mscclpp_last_error(), "plan 'plan_b' runs 4 thread blocks"));
    r = mscclpp_execute_launch(ex, b, buf, buf + 32, 8, 8, MSCCLPP_FLOAT32, MSCCLPP_SUM,
                               MSCCLPP_PACKET_LL16, 4, 2048, NULL);
    ck_assert_int_eq(r, MSCCLPP_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(mscclpp_last_error(), "nthreads_per_block 2048"));
    /* the right shape passes the launch checks and reaches the plan's own (2 ranks, not 1) */
    r = mscclpp_execute_launch(ex, b, buf, buf + 32, 8, 8, MSCCLPP_FLOAT32, MSCCLPP_SUM,
                               MSCCLPP_PACKET_LL16, 4, 64, NULL);
    ck_assert_int_eq(r, MSCCLPP_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(mscclpp_last_error(), "written for 2 ranks"));
    plan_free(b);
    ck_assert_int_eq(mscclpp_executor_destroy(ex), MSCCLPP_OK);
    ck_assert_int_eq(mscclpp_comm_destroy(comm), MSCCLPP_OK);
    unsetenv("MSCCLPP_TUNING_FILE");
}
END_TEST

int main(void)
{
    Suite *s = suite_create("tuning");
    TCase *tc = tcase_create("table");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, good_table_loads);
    tcase_add_loop_test(tc, bad_table_refused, 0, (int)(sizeof bad / sizeof bad[0]));
    tcase_add_test(tc, missing_file);
    tcase_add_test(tc, default_path);
    tcase_add_test(tc, pick_from_table);
    tcase_add_test(tc, launch_shape_checked);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
