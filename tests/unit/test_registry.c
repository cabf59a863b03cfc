/*
 * Plan registry (executor/registry.c): selection by collective, world size, ranks per node,
 * in-place, message-size range and tags; deterministic order; loading a directory; which of
 * the source tree's plans a backend's defaults (exec_plans_load_defaults) pick per collective,
 * size and placement.
 */
#include <check.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "executor/plan.h"
#include "executor/registry.h"

static const char *top_srcdir(void)
{
    const char *d = getenv("MSCCLPP_TOP_SRCDIR");
    return d && d[0] ? d : ".";
}

/* A valid plan with `nranks` ranks that does nothing. */
static struct mscclpp_plan *mk(const char *name, const char *coll, int nranks, int inplace,
                               uint64_t min, uint64_t max)
{
    static char text[16384];
    int n = snprintf(text, sizeof text,
                     "{\"name\": \"%s\", \"collective\": \"%s\", \"protocol\": \"Simple\", "
                     "\"inplace\": %s, \"min_message_size\": %llu, \"max_message_size\": %llu, "
                     "\"gpus\": [",
                     name, coll, inplace ? "true" : "false", (unsigned long long)min,
                     (unsigned long long)max);
    for (int r = 0; r < nranks; r++)
        n += snprintf(text + n, sizeof text - (size_t)n,
                      "%s{\"id\": %d, \"input_chunks\": %d, \"output_chunks\": %d, "
                      "\"scratch_chunks\": 0, \"channels\": [], \"remote_buffers\": [], "
                      "\"threadblocks\": [{\"id\": 0, \"channels\": [], \"ops\": [{\"name\": "
                      "\"nop\"}]}]}",
                      r ? ", " : "", r,
                      /* chunk counts as the collective relates them (checked at load) */
                      !strcmp(coll, "reducescatter") || !strcmp(coll, "alltoall") ? nranks : 1,
                      !strcmp(coll, "allgather") || !strcmp(coll, "alltoall") ? nranks : 1);
    snprintf(text + n, sizeof text - (size_t)n, "]}");
    struct mscclpp_plan *p = NULL;
    mscclpp_result_t res = plan_load_json(text, strlen(text), name, &p);
    ck_assert_msg(res == MSCCLPP_OK, "%s", mscclpp_last_error());
    return p;
}

static const struct mscclpp_plan *sel(const exec_registry_t *reg, const char *coll, int nranks,
                                      int rpn, bool inplace, uint64_t bytes, const char *tags)
{
    const struct mscclpp_plan *p = (const void *)(uintptr_t)1;
    mscclpp_result_t r = exec_registry_select(reg, coll, nranks, rpn, inplace, bytes, tags, &p);
    if (r == MSCCLPP_ERR_UNSUPPORTED) {
        ck_assert_ptr_null(p);
        ck_assert_ptr_nonnull(strstr(mscclpp_last_error(), "no registered plan for"));
        return NULL;
    }
    ck_assert_int_eq(r, MSCCLPP_OK);
    ck_assert_ptr_nonnull(p);
    return p;
}

START_TEST(test_size_boundaries)
{
    exec_registry_t reg = EXEC_REGISTRY_INIT;
    struct mscclpp_plan *small = mk("small", "allreduce", 4, 1, 0, 4096);
    struct mscclpp_plan *large = mk("large", "allreduce", 4, 1, 4097, 1 << 20);
    ck_assert_int_eq(exec_registry_register(&reg, small, 0, NULL), MSCCLPP_OK);
    ck_assert_int_eq(exec_registry_register(&reg, large, 0, NULL), MSCCLPP_OK);
    ck_assert_ptr_eq(sel(&reg, "allreduce", 4, 0, true, 0, NULL), small);
    ck_assert_ptr_eq(sel(&reg, "allreduce", 4, 0, true, 4096, NULL), small);
    ck_assert_ptr_eq(sel(&reg, "allreduce", 4, 0, true, 4097, NULL), large);
    ck_assert_ptr_eq(sel(&reg, "allreduce", 4, 0, true, 1 << 20, NULL), large);
    ck_assert_ptr_null(sel(&reg, "allreduce", 4, 0, true, (1 << 20) + 1, NULL));
    ck_assert_ptr_nonnull(strstr(mscclpp_last_error(), "allreduce with 4 ranks"));
    exec_registry_fini(&reg);
    plan_free(small);
    plan_free(large);
}
END_TEST

/* The executor caches its choices per call shape at the registry's generation (select.c):
 * every change that can alter a selection must move it on. */
START_TEST(test_generation)
{
    exec_registry_t reg = EXEC_REGISTRY_INIT;
    struct mscclpp_plan *a = mk("a", "allreduce", 4, 1, 0, 4096);
    struct mscclpp_plan *b = mk("b", "allreduce", 4, 1, 0, 4096);
    uint64_t g = reg.gen;
    ck_assert_int_eq(exec_registry_register(&reg, a, 0, NULL), MSCCLPP_OK);
    ck_assert_uint_gt(reg.gen, g);
    g = reg.gen;
    ck_assert_int_ne(exec_registry_register(&reg, NULL, 0, NULL), MSCCLPP_OK);
    ck_assert_uint_eq(reg.gen, g); /* a refused registration changes nothing */
    uint64_t labels[4] = {0, 0, 1, 1};
    exec_registry_set_layout(&reg, 4, labels);
    ck_assert_uint_gt(reg.gen, g);
    g = reg.gen;
    ck_assert_int_eq(exec_registry_register(&reg, b, 0, NULL), MSCCLPP_OK);
    ck_assert_uint_gt(reg.gen, g);
    exec_registry_fini(&reg);
    plan_free(a);
    plan_free(b);
}
END_TEST

START_TEST(test_collective_world_inplace)
{
    exec_registry_t reg;
    exec_registry_init(&reg);
    struct mscclpp_plan *ar4_in = mk("ar4_in", "allreduce", 4, 1, 0, UINT64_MAX);
    struct mscclpp_plan *ar4_out = mk("ar4_out", "allreduce", 4, 0, 0, UINT64_MAX);
    struct mscclpp_plan *ar2 = mk("ar2", "allreduce", 2, 1, 0, UINT64_MAX);
    struct mscclpp_plan *ag4 = mk("ag4", "allgather", 4, 0, 1024, 1024);
    exec_registry_register(&reg, ar4_in, 0, NULL);
    exec_registry_register(&reg, ar4_out, 0, NULL);
    exec_registry_register(&reg, ar2, 0, NULL);
    exec_registry_register(&reg, ag4, 0, NULL);
    ck_assert_int_eq(reg.count, 4);
    ck_assert_ptr_eq(sel(&reg, "allreduce", 4, 0, true, 64, NULL), ar4_in);
    ck_assert_ptr_eq(sel(&reg, "allreduce", 4, 0, false, 64, NULL), ar4_out);
    ck_assert_ptr_eq(sel(&reg, "allreduce", 2, 0, true, 64, NULL), ar2);
    ck_assert_ptr_null(sel(&reg, "allreduce", 2, 0, false, 64, NULL));
    ck_assert_ptr_null(sel(&reg, "allreduce", 8, 0, true, 64, NULL));
    ck_assert_ptr_null(sel(&reg, "reducescatter", 4, 0, true, 64, NULL));
    /* allgather matches on the output size: 4 ranks x 256 bytes in = 1024 bytes out. */
    ck_assert_uint_eq(exec_message_size("allgather", 256, 1024), 1024);
    ck_assert_uint_eq(exec_message_size("allreduce", 256, 1024), 256);
    ck_assert_uint_eq(exec_message_size("reducescatter", 1024, 256), 1024);
    ck_assert_ptr_eq(sel(&reg, "allgather", 4, 0, false, exec_message_size("allgather", 256, 1024),
                         NULL),
                     ag4);
    ck_assert_ptr_null(sel(&reg, "allgather", 4, 0, false, 256, NULL));
    exec_registry_fini(&reg);
    plan_free(ar4_in);
    plan_free(ar4_out);
    plan_free(ar2);
    plan_free(ag4);
}
END_TEST

/* The one in-place rule (plans' "inplace" and native algorithms' flags both use it). */
START_TEST(test_call_in_place)
{
    static char buf[4096];
    /* allgather: the input is this rank's block of the output */
    ck_assert(exec_call_in_place("allgather", 2, buf + 2 * 64, buf, 64, 256));
    ck_assert(!exec_call_in_place("allgather", 1, buf + 2 * 64, buf, 64, 256));
    /* reducescatter: the output is this rank's block of the input */
    ck_assert(exec_call_in_place("reducescatter", 3, buf, buf + 3 * 64, 256, 64));
    ck_assert(!exec_call_in_place("reducescatter", 0, buf, buf + 3 * 64, 256, 64));
    /* the rest: the same buffer */
    ck_assert(exec_call_in_place("allreduce", 1, buf, buf, 64, 64));
    ck_assert(!exec_call_in_place("allreduce", 1, buf, buf + 64, 64, 64));
    ck_assert(!exec_call_in_place("alltoall", 0, buf, buf + 8, 64, 64));
    ck_assert(exec_call_in_place("broadcast", 0, buf, buf, 64, 64));
    ck_assert(!exec_call_in_place("reduce", 0, buf, buf + 64, 64, 64));
    /* a collective the rule does not know: its plan's author decides */
    ck_assert(exec_call_in_place("test", 0, buf, buf + 8, 64, 64));
    ck_assert(exec_call_in_place(NULL, 0, buf, buf + 8, 64, 64));
}
END_TEST

START_TEST(test_ranks_per_node)
{
    exec_registry_t reg = EXEC_REGISTRY_INIT;
    struct mscclpp_plan *a = mk("rpn8", "allreduce", 16, 1, 0, UINT64_MAX);
    struct mscclpp_plan *b = mk("rpn_any", "allreduce", 16, 1, 0, UINT64_MAX);
    exec_registry_register(&reg, a, 8, NULL);
    exec_registry_register(&reg, b, 0, NULL);
    ck_assert_ptr_eq(sel(&reg, "allreduce", 16, 8, true, 1, NULL), a);
    ck_assert_ptr_eq(sel(&reg, "allreduce", 16, 4, true, 1, NULL), b);
    ck_assert_ptr_eq(sel(&reg, "allreduce", 16, 0, true, 1, NULL), a); /* request: any */
    ck_assert_int_eq(exec_registry_register(&reg, a, -1, NULL), MSCCLPP_ERR_INVALID_ARG);
    exec_registry_fini(&reg);
    plan_free(a);
    plan_free(b);
}
END_TEST

START_TEST(test_tags)
{
    exec_registry_t reg = EXEC_REGISTRY_INIT;
    struct mscclpp_plan *plain = mk("plain", "allreduce", 2, 1, 0, UINT64_MAX);
    struct mscclpp_plan *nvls = mk("nvls", "allreduce", 2, 1, 0, UINT64_MAX);
    struct mscclpp_plan *dflt = mk("dflt", "allreduce", 2, 1, 0, UINT64_MAX);
    exec_registry_register(&reg, plain, 0, NULL);
    exec_registry_register(&reg, nvls, 0, "algo=nvls, gen = 2 ,fast");
    exec_registry_register(&reg, dflt, 0, "default=1,algo=ring");
    ck_assert_ptr_eq(sel(&reg, "allreduce", 2, 0, true, 8, NULL), plain);
    ck_assert_ptr_eq(sel(&reg, "allreduce", 2, 0, true, 8, ""), plain);
    ck_assert_ptr_eq(sel(&reg, "allreduce", 2, 0, true, 8, "algo=nvls"), nvls);
    ck_assert_ptr_eq(sel(&reg, "allreduce", 2, 0, true, 8, "gen=2,algo=nvls"), nvls);
    ck_assert_ptr_eq(sel(&reg, "allreduce", 2, 0, true, 8, "fast"), nvls);
    ck_assert_ptr_eq(sel(&reg, "allreduce", 2, 0, true, 8, "algo"), nvls); /* key present */
    ck_assert_ptr_eq(sel(&reg, "allreduce", 2, 0, true, 8, "default=1"), dflt);
    ck_assert_ptr_eq(sel(&reg, "allreduce", 2, 0, true, 8, "algo=ring"), dflt);
    ck_assert_ptr_null(sel(&reg, "allreduce", 2, 0, true, 8, "algo=tree"));
    ck_assert_ptr_null(sel(&reg, "allreduce", 2, 0, true, 8, "fast=1")); /* bare tag: no value */
    ck_assert_ptr_null(sel(&reg, "allreduce", 2, 0, true, 8, "gen=2,algo=ring"));
    ck_assert_int_eq(exec_registry_register(&reg, plain, 0, "a=1,=2"), MSCCLPP_ERR_INVALID_ARG);
    ck_assert_int_eq(reg.count, 3);
    ck_assert(exec_tags_match(NULL, NULL));
    ck_assert(exec_tags_match(NULL, ",,"));
    ck_assert(!exec_tags_match(NULL, "k"));
    ck_assert(exec_tags_match("k=v,", "k=v"));
    ck_assert(!exec_tags_match("kk=v", "k=v"));
    ck_assert(!exec_tags_match("k=vv", "k=v"));
    exec_registry_fini(&reg);
    plan_free(plain);
    plan_free(nvls);
    plan_free(dflt);
}
END_TEST

START_TEST(test_first_registered_wins)
{
    exec_registry_t reg = EXEC_REGISTRY_INIT;
    struct mscclpp_plan *p[20];
    for (int i = 0; i < 20; i++) {
        char name[16];
        snprintf(name, sizeof name, "p%02d", i);
        /* Overlapping ranges: [i*100, 10000]. */
        p[i] = mk(name, "alltoall", 2, 0, (uint64_t)i * 100, 10000);
        ck_assert_int_eq(exec_registry_register(&reg, p[i], 0, NULL), MSCCLPP_OK);
    }
    ck_assert_int_eq(reg.count, 20);
    for (int rep = 0; rep < 3; rep++) {
        ck_assert_ptr_eq(sel(&reg, "alltoall", 2, 0, false, 5000, NULL), p[0]);
        ck_assert_ptr_eq(sel(&reg, "alltoall", 2, 0, false, 10000, NULL), p[0]);
    }
    exec_registry_fini(&reg);
    ck_assert_int_eq(reg.count, 0);
    ck_assert_ptr_null(reg.entries);
    for (int i = 0; i < 20; i++) plan_free(p[i]);
}
END_TEST

/* A plan the application registers wins over the library's default plans, even when the defaults
 * were loaded first (the executor loads them at creation, before any register call). Among the
 * application's plans the first registered wins. Failed before: registration appended. */
START_TEST(test_registered_before_defaults)
{
    char from[4096];
    snprintf(from, sizeof from, "%s/tests/plans-reference", top_srcdir());
    exec_registry_t reg = EXEC_REGISTRY_INIT;
    struct mscclpp_plan *dflt = mk("default_like", "allreduce", 4, 1, 0, UINT64_MAX);
    int n = 0;
    /* the library's plans: a folder and one more at the back */
    ck_assert_int_eq(exec_registry_load_dir(&reg, from, &n, NULL), MSCCLPP_OK);
    ck_assert_int_gt(n, 0);
    const struct mscclpp_plan *before = sel(&reg, "allreduce", 4, 0, true, 4096, NULL);
    ck_assert_ptr_nonnull(before);
    struct mscclpp_plan *mine = mk("mine", "allreduce", 4, 1, 0, UINT64_MAX);
    struct mscclpp_plan *mine2 = mk("mine2", "allreduce", 4, 1, 0, UINT64_MAX);
    ck_assert_int_eq(exec_registry_register(&reg, mine, 0, NULL), MSCCLPP_OK);
    ck_assert_int_eq(exec_registry_register(&reg, mine2, 0, NULL), MSCCLPP_OK);
    ck_assert_ptr_eq(sel(&reg, "allreduce", 4, 0, true, 4096, NULL), mine);
    ck_assert_int_eq(reg.nfront, 2);
    ck_assert_ptr_eq(reg.entries[0].plan, mine);
    ck_assert_ptr_eq(reg.entries[1].plan, mine2);
    /* a folder the application loads goes behind its plans, in front of the library's */
    int m = 0;
    ck_assert_int_eq(exec_registry_load_dir_first(&reg, from, &m, NULL), MSCCLPP_OK);
    ck_assert_int_eq(m, n);
    ck_assert_int_eq(reg.nfront, 2 + m);
    ck_assert_ptr_eq(sel(&reg, "allreduce", 4, 0, true, 4096, NULL), mine);
    ck_assert_str_eq(reg.entries[2].plan->name, reg.entries[2 + m].plan->name);
    /* the library's plans added later stay behind */
    ck_assert_int_eq(exec_registry_add_made(&reg, dflt), MSCCLPP_OK);
    ck_assert_ptr_eq(reg.entries[reg.count - 1].plan, dflt);
    ck_assert_int_eq(reg.count, 2 + 2 * n + 1);
    exec_registry_fini(&reg); /* frees dflt (made plans are owned) */
    plan_free(mine);
    plan_free(mine2);
}
END_TEST

static void copy_file(const char *from, const char *to)
{
    FILE *in = fopen(from, "rb"), *out = fopen(to, "wb");
    ck_assert_ptr_nonnull(in);
    ck_assert_ptr_nonnull(out);
    char buf[8192];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, in)) > 0) ck_assert_uint_eq(fwrite(buf, 1, n, out), n);
    fclose(in);
    fclose(out);
}

START_TEST(test_load_dir)
{
    char dir[] = "/tmp/mscclpp-test-registry-XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(dir));
    static const char *refs[] = {"alltoall_4.json", "allreduce_pkt_4.json", "allreduce_4.json",
                                 "allgather_pkt_rppkt_4.json"};
    char from[4096], to[4096];
    for (size_t i = 0; i < sizeof refs / sizeof refs[0]; i++) {
        snprintf(from, sizeof from, "%s/tests/plans-reference/%s", top_srcdir(), refs[i]);
        snprintf(to, sizeof to, "%s/%s", dir, refs[i]);
        copy_file(from, to);
    }
    /* Two malformed plans, a file that is not a plan, a directory named like one. */
    snprintf(from, sizeof from, "%s/tests/plans-bad/unknown_op.json", top_srcdir());
    snprintf(to, sizeof to, "%s/b_broken.json", dir);
    copy_file(from, to);
    snprintf(to, sizeof to, "%s/zz_empty.json", dir);
    FILE *f = fopen(to, "w");
    ck_assert_ptr_nonnull(f);
    fclose(f);
    snprintf(to, sizeof to, "%s/README.txt", dir);
    f = fopen(to, "w");
    ck_assert_ptr_nonnull(f);
    fputs("not a plan\n", f);
    fclose(f);
    snprintf(to, sizeof to, "%s/sub.json", dir);
    ck_assert_int_eq(mkdir(to, 0700), 0);

    exec_registry_t reg = EXEC_REGISTRY_INIT;
    int nloaded = -1, nskipped = -1;
    ck_assert_int_eq(exec_registry_load_dir(&reg, dir, &nloaded, &nskipped), MSCCLPP_OK);
    ck_assert_int_eq(nloaded, 4);
    ck_assert_int_eq(nskipped, 2);
    ck_assert_int_eq(reg.count, 4);
    /* Sorted by file name. */
    ck_assert_str_eq(reg.entries[0].plan->name, "allgather_pkt_rppkt_4");
    ck_assert_str_eq(reg.entries[1].plan->name, "allreduce_4");
    ck_assert_str_eq(reg.entries[2].plan->name, "allreduce_pkt_4");
    ck_assert_str_eq(reg.entries[3].plan->name, "alltoall_4");
    for (int i = 0; i < 4; i++) {
        ck_assert_ptr_eq(reg.entries[i].owned, reg.entries[i].plan);
        ck_assert_int_eq(reg.entries[i].ranks_per_node, 0);
    }
    /* Both allreduce plans accept everything; the first by name wins, every time. */
    const struct mscclpp_plan *p = sel(&reg, "allreduce", 4, 4, true, 1 << 20, NULL);
    ck_assert_str_eq(p->name, "allreduce_4");
    p = sel(&reg, "allgather", 4, 0, true, 4096, NULL);
    ck_assert_str_eq(p->name, "allgather_pkt_rppkt_4");
    ck_assert_ptr_null(sel(&reg, "allgather", 4, 0, false, 4096, NULL));
    ck_assert_ptr_null(sel(&reg, "allreduce", 8, 0, true, 4096, NULL));

    /* Loading again appends: the earlier entries keep priority. */
    ck_assert_int_eq(exec_registry_load_dir(&reg, dir, NULL, NULL), MSCCLPP_OK);
    ck_assert_int_eq(reg.count, 8);
    ck_assert_ptr_eq(sel(&reg, "allreduce", 4, 0, true, 64, NULL), reg.entries[1].plan);
    exec_registry_fini(&reg);

    ck_assert_int_eq(exec_registry_load_dir(&reg, "/nonexistent-plan-dir", &nloaded, NULL),
                     MSCCLPP_ERR_SYSTEM);
    ck_assert_ptr_nonnull(strstr(mscclpp_last_error(), "/nonexistent-plan-dir"));
    ck_assert_ptr_nonnull(strstr(mscclpp_last_error(), "No such file"));
    ck_assert_int_eq(nloaded, 0);
    exec_registry_fini(&reg);

    static const char *rm[] = {"alltoall_4.json", "allreduce_pkt_4.json", "allreduce_4.json",
                               "allgather_pkt_rppkt_4.json", "b_broken.json", "zz_empty.json",
                               "README.txt"};
    for (size_t i = 0; i < sizeof rm / sizeof rm[0]; i++) {
        snprintf(to, sizeof to, "%s/%s", dir, rm[i]);
        ck_assert_int_eq(unlink(to), 0);
    }
    snprintf(to, sizeof to, "%s/sub.json", dir);
    ck_assert_int_eq(rmdir(to), 0);
    ck_assert_int_eq(rmdir(dir), 0);
}
END_TEST

/*
 * The default plans of a backend (plans/ as MSCCLPP_PLAN_DIR, exec_plans_load_defaults) and
 * the plan each call picks. By default (MSCCLPP_PLAN_DIRECT=auto) the host backend takes its
 * direct plans for the calls whose ranks all pass shareable buffers (executor/plan_dirs.c
 * direct_default: registered shared_only), the scratch plans otherwise; CUDA likewise from
 * 32 MiB, its scratch plans below. With MSCCLPP_PLAN_DIRECT=on the backend's direct plans
 * (plans/direct/<backend>/) serve the sizes they accept, the scratch plans the rest.
 */
START_TEST(test_backend_defaults)
{
    char dir[4200];
    snprintf(dir, sizeof dir, "%s/plans", top_srcdir());
    ck_assert_int_eq(setenv("MSCCLPP_PLAN_DIR", dir, 1), 0);
    static const struct {
        const char *backend, *coll;
        bool inplace;
        uint64_t bytes;
        /* plan names (%d = ranks; NULL: none) under MSCCLPP_PLAN_DIRECT=auto when a rank's
         * buffers are not shareable, auto when every rank's are (exec_registry_select_fit's
         * `shared`), and on */
        const char *want_auto, *want_shared, *want_on;
    } cases[] = {
        {"host", "allreduce", false, 8, "default_allreduce_pkt_host_%d",
         "default_allreduce_pkt_host_%d", "default_allreduce_pkt_host_%d"},
        {"host", "allreduce", false, 1 << 20, "default_allreduce_simple_host_%d",
         "default_allreduce_simple_host_%d", "default_allreduce_simple_host_%d"},
        {"host", "allreduce", false, (1 << 20) + 1, "default_allreduce_simple_host_%d",
         "direct_allreduce_host_%d", "direct_allreduce_host_%d"},
        {"host", "allreduce", true, 64 << 20, "default_allreduce_simple_ip_host_%d",
         "direct_allreduce_ip_host_%d", "direct_allreduce_ip_host_%d"},
        {"host", "allgather", false, 64 << 10, "default_allgather_%d", "default_allgather_%d",
         "default_allgather_%d"},
        {"host", "allgather", false, 16 << 20, "default_allgather_%d", "direct_allgather_host_%d",
         "direct_allgather_host_%d"},
        {"host", "allgather", true, 16 << 20, NULL, "direct_allgather_ip_host_%d",
         "direct_allgather_ip_host_%d"},
        {"host", "reducescatter", false, 1 << 20, "default_reducescatter_%d",
         "default_reducescatter_%d", "default_reducescatter_%d"},
        {"host", "reducescatter", false, 16 << 20, "default_reducescatter_%d",
         "direct_reducescatter_host_%d", "direct_reducescatter_host_%d"},
        {"host", "reducescatter", true, 16 << 20, NULL, "direct_reducescatter_ip_host_%d",
         "direct_reducescatter_ip_host_%d"},
        {"host", "alltoall", false, 16 << 20, "default_alltoall_%d", "direct_alltoall_host_%d",
         "direct_alltoall_host_%d"},
        {"host", "alltoall", true, 16 << 20, NULL, NULL, NULL}, /* served staged out of place */
        {"host", "broadcast", false, 4096, "default_broadcast_%d", "default_broadcast_%d",
         "default_broadcast_%d"},
        {"host", "broadcast", false, 16 << 20, "default_broadcast_%d", "direct_broadcast_host_%d",
         "direct_broadcast_host_%d"},
        {"host", "broadcast", true, 16 << 20, NULL, "direct_broadcast_ip_host_%d",
         "direct_broadcast_ip_host_%d"},
        /* CUDA's auto: the direct plans from 32 MiB (plan_dirs.c DIRECT_CUDA_FLOOR) on
         * shared buffers; on: from the plans' own smallest size */
        {"cuda", "allreduce", false, 16 << 20, "default_allreduce_simple_cuda_%d",
         "default_allreduce_simple_cuda_%d", "direct_allreduce_cuda_%d"},
        {"cuda", "allreduce", false, (32 << 20) - 4, "default_allreduce_simple_cuda_%d",
         "default_allreduce_simple_cuda_%d", "direct_allreduce_cuda_%d"},
        {"cuda", "allreduce", false, 32 << 20, "default_allreduce_simple_cuda_%d",
         "direct_allreduce_cuda_%d", "direct_allreduce_cuda_%d"},
        {"cuda", "allreduce", false, 64 << 20, "default_allreduce_simple_cuda_%d",
         "direct_allreduce_cuda_%d", "direct_allreduce_cuda_%d"},
        {"cuda", "allreduce", true, 64 << 20, "default_allreduce_simple_ip_cuda_%d",
         "direct_allreduce_ip_cuda_%d", "direct_allreduce_ip_cuda_%d"},
        {"cuda", "allgather", false, 1 << 20, "default_allgather_%d", "default_allgather_%d",
         "default_allgather_%d"},
        {"cuda", "allgather", false, 16 << 20, "default_allgather_cuda_%d",
         "default_allgather_cuda_%d", "direct_allgather_cuda_%d"},
        {"cuda", "allgather", false, 64 << 20, "default_allgather_cuda_%d",
         "direct_allgather_cuda_%d", "direct_allgather_cuda_%d"},
        {"cuda", "reducescatter", false, 64 << 20, "default_reducescatter_cuda_%d",
         "direct_reducescatter_cuda_%d", "direct_reducescatter_cuda_%d"},
        {"cuda", "alltoall", false, 64 << 20, "default_alltoall_cuda_%d",
         "direct_alltoall_cuda_%d", "direct_alltoall_cuda_%d"},
        {"cuda", "broadcast", false, 16 << 20, "default_broadcast_cuda_%d",
         "default_broadcast_cuda_%d", "direct_broadcast_cuda_%d"},
        {"cuda", "broadcast", false, 64 << 20, "default_broadcast_cuda_%d",
         "direct_broadcast_cuda_%d", "direct_broadcast_cuda_%d"},
    };
    static const int ranks[] = {2, 4, 8};
    for (int on = 0; on < 2; on++) {
        if (on) ck_assert_int_eq(setenv("MSCCLPP_PLAN_DIRECT", "on", 1), 0);
        else unsetenv("MSCCLPP_PLAN_DIRECT");
        for (size_t r = 0; r < sizeof ranks / sizeof *ranks; r++) {
            const int n = ranks[r];
            exec_registry_t host = EXEC_REGISTRY_INIT, cuda = EXEC_REGISTRY_INIT;
            exec_plans_load_defaults(&host, "host", n, n);
            exec_plans_load_defaults(&cuda, "cuda", n, n);
            for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
                const exec_registry_t *reg = !strcmp(cases[i].backend, "host") ? &host : &cuda;
                for (int shared = 0; shared < 2; shared++) {
                    const struct mscclpp_plan *p = NULL;
                    uint64_t b = cases[i].bytes, in = b, out = b; /* a call of this size */
                    if (!strcmp(cases[i].coll, "allgather")) in = b / (uint64_t)n;
                    if (!strcmp(cases[i].coll, "reducescatter")) out = b / (uint64_t)n;
                    if (exec_registry_select_fit(reg, cases[i].coll, n, n, cases[i].inplace, b, 0,
                                                 in, out, MSCCLPP_UINT8, shared, &p) != MSCCLPP_OK)
                        p = NULL;
                    const char *fmt = on       ? cases[i].want_on
                                      : shared ? cases[i].want_shared
                                               : cases[i].want_auto;
                    char want[128] = "(none)";
                    if (fmt) snprintf(want, sizeof want, fmt, n);
                    ck_assert_msg(fmt ? p && !strcmp(p->name, want) : !p,
                                  "MSCCLPP_PLAN_DIRECT=%s, %s, %d ranks, %s %s of %llu bytes, %s "
                                  "buffers: got %s, expected %s",
                                  on ? "on" : "auto", cases[i].backend, n, cases[i].coll,
                                  cases[i].inplace ? "in place" : "out of place",
                                  (unsigned long long)b, shared ? "shared" : "unshared",
                                  p ? p->name : "(none)", want);
                    /* the registry's own select (no call) never takes a shared_only plan */
                    if (!shared) {
                        const struct mscclpp_plan *q =
                            sel(reg, cases[i].coll, n, n, cases[i].inplace, b, NULL);
                        ck_assert_ptr_eq(q, p);
                    }
                }
            }
            exec_registry_fini(&host);
            exec_registry_fini(&cuda);
        }
    }
    unsetenv("MSCCLPP_PLAN_DIRECT");
    unsetenv("MSCCLPP_PLAN_DIR");
}
END_TEST

START_TEST(test_arguments)
{
    exec_registry_t reg = EXEC_REGISTRY_INIT;
    const struct mscclpp_plan *p;
    struct mscclpp_plan *plan = mk("a", "allreduce", 1, 1, 0, UINT64_MAX);
    ck_assert_int_eq(exec_registry_register(NULL, plan, 0, NULL), MSCCLPP_ERR_INVALID_ARG);
    ck_assert_int_eq(exec_registry_register(&reg, NULL, 0, NULL), MSCCLPP_ERR_INVALID_ARG);
    ck_assert_int_eq(exec_registry_select(NULL, "allreduce", 1, 0, true, 0, NULL, &p),
                     MSCCLPP_ERR_INVALID_ARG);
    ck_assert_int_eq(exec_registry_select(&reg, NULL, 1, 0, true, 0, NULL, &p),
                     MSCCLPP_ERR_INVALID_ARG);
    ck_assert_int_eq(exec_registry_select(&reg, "allreduce", 1, 0, true, 0, NULL, NULL),
                     MSCCLPP_ERR_INVALID_ARG);
    ck_assert_int_eq(exec_registry_load_dir(NULL, "/tmp", NULL, NULL), MSCCLPP_ERR_INVALID_ARG);
    ck_assert_int_eq(exec_registry_load_dir(&reg, NULL, NULL, NULL), MSCCLPP_ERR_INVALID_ARG);
    /* Empty registry: nothing matches. */
    ck_assert_int_eq(exec_registry_select(&reg, "allreduce", 1, 0, true, 0, NULL, &p),
                     MSCCLPP_ERR_UNSUPPORTED);
    exec_registry_fini(NULL);
    exec_registry_fini(&reg);
    plan_free(plan);
    plan_free(NULL);
}
END_TEST

/* plan_op_name is internal, so it is checked here with the other internal symbols. */
START_TEST(test_op_names)
{
    static const char *names[PLAN_OP__COUNT] = {
        "nop", "barrier", "put", "ppkt", "rppkt", "pws", "pwsf", "get", "copy", "cpkt",
        "upkt", "signal", "wait", "flush", "re", "repkt", "recpkt", "res", "respkt", "recspkt",
        "rre", "rres", "glres", "rlxsignal", "rlxwait", "pipeline", "sem_release",
        "sem_acquire", "gstore", "gstorepkt", "glre"};
    for (int t = 0; t < PLAN_OP__COUNT; t++) ck_assert_str_eq(plan_op_name(t), names[t]);
    ck_assert_ptr_null(plan_op_name(PLAN_OP__COUNT));
    ck_assert_ptr_null(plan_op_name((plan_op_type_t)-1));
}
END_TEST

int main(void)
{
    Suite *s = suite_create("registry");
    TCase *tc = tcase_create("select");
    tcase_add_test(tc, test_size_boundaries);
    tcase_add_test(tc, test_collective_world_inplace);
    tcase_add_test(tc, test_call_in_place);
    tcase_add_test(tc, test_generation);
    tcase_add_test(tc, test_ranks_per_node);
    tcase_add_test(tc, test_tags);
    tcase_add_test(tc, test_first_registered_wins);
    tcase_add_test(tc, test_registered_before_defaults);
    tcase_add_test(tc, test_load_dir);
    tcase_add_test(tc, test_backend_defaults);
    tcase_add_test(tc, test_arguments);
    tcase_add_test(tc, test_op_names);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_ENV);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
