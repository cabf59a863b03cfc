/*
 * Conformance: every plan of the default set (plans/) and of the reference corpus
 * (tests/plans-reference/) runs on this backend at the rank count it is written for — ranks
 * as forked processes — for several sizes (tails included), every dtype and, for reductions,
 * every reduce op; every element of every rank is checked against a reference.
 *
 * Plans tuned for another backend (plans/<other>/) run in the quick mode below: they are the
 * same programs as the generic plans at other block counts and size ranges. So do the in-place
 * twins of a plan (<family>_ip_<N>.json): the same program, run with input == output. The
 * out-of-place plans of plans/direct/ (they read the peers' inputs and write their outputs) run
 * in full: they are generic programs of their own; their backends' variants (plans/direct/host/,
 * plans/direct/cuda/: the same programs at other block counts and size ranges) run quick.
 *
 * Plans that cannot run on a backend are listed with the reason in
 * tests/conformance/exclude-<backend>.txt ("file-name  reason"); they are reported as skips.
 *
 * GPU backends: buffers are device memory, so every rank fills its input and reads its output
 * through host staging buffers and mscclpp_memcpy/mscclpp_memset (never through the device
 * pointer), and the parent process does no device work at all before it forks the ranks (a
 * CUDA context does not survive fork(): the backend's name is asked in a throwaway child).
 *
 * Multi-node plans (plans/multinode/<K>x<L>/, and the flat ones of plans/multinode/flat/) run
 * when CONFORMANCE_SET=multinode (tests/conformance/test_conformance_multinode.sh), each as K
 * nodes: every node a network namespace of its own (tools/netns.c, root), else a forced node id
 * per rank, so port channels cross "nodes" over UCX/TCP. Across namespaces a run costs far more
 * than on one node, so by default the default (hierarchical) plans run a bounded tier: the three
 * sizes, every dtype with sum and every reduce op with float32; MSCCLPP_CONFORMANCE_FULL=1 runs
 * every dtype x op x size of every multi-node plan, the flat ones included. Plans of more than
 * 16 ranks (8 nodes x 8) run only with MSCCLPP_CONFORMANCE_SCALE=1: 64 processes on a small
 * machine take minutes per plan.
 *
 * Environment: MSCCLPP_TOP_SRCDIR (set by make check), CONFORMANCE_FILTER (substring of plan
 * file names to run), CONFORMANCE_QUICK=1 (one size, float32 and int32 only),
 * CONFORMANCE_SET=multinode, MSCCLPP_CONFORMANCE_FULL=1 (above).
 */
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "config.h"
#include "mscclpp/mscclpp.h"
#include "tests/conformance/conf_ref.h"
#include "tests/unit/mp_harness.h"
#include "tools/netns.h"

#define MAX_PLANS 256

#define MAX_PARTIAL 16

/* A dtype/size combination of one plan a backend cannot run, with the reason. */
typedef struct {
    int dtype;   /* mscclpp_dtype_t, -1: any */
    long unit;   /* elements per rank block, -1: any */
    char reason[200];
} partial_skip_t;

typedef struct {
    char path[512];
    char name[128];
    char skip_reason[256];
    int n_partial;
    partial_skip_t partial[MAX_PARTIAL];
    bool quick; /* tuned for another backend: one size, two dtypes (it runs anywhere) */
    int nodes;  /* a multi-node plan for this many nodes (0: one node) */
    bool bounded; /* multi-node CI tier: every dtype with sum, every op with float32 */
} plan_entry_t;

static plan_entry_t plans[MAX_PLANS];
static int n_plans;
static const char *top;

typedef struct {
    const plan_entry_t *entry;
} run_arg_t;

/* ---- reference values -------------------------------------------------------------------- */

static size_t es_of(mscclpp_dtype_t dt) { return mscclpp_dtype_size(dt); }

/* ---- one plan on one rank ---------------------------------------------------------------- */

typedef enum {
    C_ALLREDUCE, C_ALLGATHER, C_REDUCESCATTER, C_ALLTOALL, C_BROADCAST, C_SENDRECV
} coll_t;

static int coll_of(const char *name, coll_t *c)
{
    if (!strcmp(name, "allreduce")) *c = C_ALLREDUCE;
    else if (!strcmp(name, "allgather")) *c = C_ALLGATHER;
    else if (!strcmp(name, "reducescatter")) *c = C_REDUCESCATTER;
    else if (!strcmp(name, "alltoall")) *c = C_ALLTOALL;
    else if (!strcmp(name, "broadcast")) *c = C_BROADCAST;
    else if (!strcmp(name, "sendrecv")) *c = C_SENDRECV; /* rank r's output: rank r-1's input */
    else return -1;
    return 0;
}

static int run_plan_rank(int rank, int nranks, const mscclpp_unique_id_t *id, void *argp)
{
    const run_arg_t *arg = argp;
    mscclpp_plan_t *plan = NULL;
    MP_CHECK(rank, mscclpp_plan_load_file(arg->entry->path, &plan));
    coll_t coll;
    if (coll_of(mscclpp_plan_collective(plan), &coll))
        return MP_FAIL(rank, "collective %s has no reference here", mscclpp_plan_collective(plan));
    int inplace = mscclpp_plan_is_inplace(plan);
    mscclpp_comm_t *comm = NULL;
    MP_CHECK(rank, mscclpp_comm_init_rank(id, rank, nranks, &comm));
    mscclpp_executor_t *ex = NULL;
    MP_CHECK(rank, mscclpp_executor_create(comm, &ex));

    bool quick = (getenv("CONFORMANCE_QUICK") && atoi(getenv("CONFORMANCE_QUICK"))) ||
                 arg->entry->quick;
    /* per-rank element counts ("unit" = count per rank block): small, odd (tails), larger */
    static const size_t units_full[] = {4, 61, 1280};
    static const size_t units_quick[] = {61};
    const size_t *units = quick ? units_quick : units_full;
    int n_units = quick ? 1 : 3;
    bool reduces = coll == C_ALLREDUCE || coll == C_REDUCESCATTER;
    size_t max_bytes = 1280 * (size_t)nranks * 8 + 4096;
    if (mscclpp_plan_min_message_size(plan) < (1u << 24))
        max_bytes += 2 * mscclpp_plan_min_message_size(plan) + (size_t)1280 * nranks * 8;
    uint8_t *bufa = NULL, *bufb = NULL;
    MP_CHECK(rank, mscclpp_malloc(max_bytes, (void **)&bufa));
    MP_CHECK(rank, mscclpp_malloc(max_bytes, (void **)&bufb));
    /* host staging: inputs are built here and copied in, outputs copied out and checked here */
    uint8_t *stage = malloc(max_bytes);
    if (!stage) return MP_FAIL(rank, "out of memory for %zu bytes of staging", max_bytes);
    mscclpp_bootstrap_t *boot = NULL;
    MP_CHECK(rank, mscclpp_comm_bootstrap(comm, &boot));

    int failures = 0, runs = 0;
    for (int dti = 0; dti < MSCCLPP_DTYPE_COUNT; dti++) {
        mscclpp_dtype_t dt = (mscclpp_dtype_t)dti;
        if (quick && dt != MSCCLPP_FLOAT32 && dt != MSCCLPP_INT32) continue;
        size_t es = es_of(dt);
        for (int opi = 0; opi < (reduces ? MSCCLPP_REDOP_COUNT : 1); opi++) {
            mscclpp_redop_t op = reduces ? (mscclpp_redop_t)opi : MSCCLPP_REDOP_PLAN;
            if (arg->entry->bounded && !quick && reduces && op != MSCCLPP_SUM &&
                dt != MSCCLPP_FLOAT32)
                continue;
            for (int u = 0; u < n_units; u++) {
                size_t unit = units[u];
                /* keep the message inside the plan's range: scale small units up */
                uint64_t lo = mscclpp_plan_min_message_size(plan);
                /* message size (plan-format §3.2): unit * nranks elements, every collective */
                size_t per_unit_bytes = es * (size_t)nranks;
                if ((uint64_t)unit * per_unit_bytes < lo)
                    unit = (size_t)((lo + per_unit_bytes - 1) / per_unit_bytes) + units[u] - 1;
                if ((uint64_t)unit * per_unit_bytes > mscclpp_plan_max_message_size(plan))
                    continue;
                size_t n_in, n_out; /* elements */
                switch (coll) {
                case C_ALLREDUCE: n_in = n_out = unit * nranks; break;
                case C_ALLGATHER: n_in = unit; n_out = unit * nranks; break;
                case C_REDUCESCATTER: n_in = unit * nranks; n_out = unit; break;
                case C_ALLTOALL: n_in = n_out = unit * nranks; break;
                default: n_in = n_out = unit * nranks; break;
                }
                /* buffers: out-of-place uses a (send) and b (recv); in-place lays out per §3.3 */
                uint8_t *send, *recv;
                if (!inplace) {
                    send = bufa;
                    recv = bufb;
                } else if (coll == C_ALLGATHER) {
                    recv = bufb;
                    send = bufb + (size_t)rank * n_in * es;
                } else if (coll == C_REDUCESCATTER) {
                    send = bufb;
                    recv = bufb + (size_t)rank * n_out * es;
                } else {
                    send = recv = bufb;
                }
                const partial_skip_t *skip = NULL;
                for (int k = 0; k < arg->entry->n_partial; k++) {
                    const partial_skip_t *ps = &arg->entry->partial[k];
                    if ((ps->dtype < 0 || ps->dtype == dti) &&
                        (ps->unit < 0 || ps->unit == (long)units[u]))
                        skip = ps;
                }
                if (skip) {
                    if (rank == 0)
                        fprintf(stderr, "# %s dtype %s, %zu elements per block: skipped (%s)\n",
                                arg->entry->name, mscclpp_dtype_name(dt), units[u], skip->reason);
                    continue;
                }
                /* poison the receive side, then copy the input in (it may lie inside bufb) */
                MP_CHECK(rank, mscclpp_memset(bufb, 0x5a, max_bytes));
                for (size_t i = 0; i < n_in; i++)
                    conf_store(dt, stage + i * es,
                               conf_input(dt, reduces ? op : MSCCLPP_SUM, rank, i));
                MP_CHECK(rank, mscclpp_memcpy(send, stage, n_in * es));
                memset(stage, 0xa5, n_out * es); /* so a copy that moved nothing is noticed */
                MP_CHECK(rank, mscclpp_bootstrap_barrier(boot));
                mscclpp_result_t r = mscclpp_execute(ex, plan, send, recv, n_in * es, n_out * es,
                                                     dt, op, NULL);
                runs++;
                if (r != MSCCLPP_OK) {
                    failures++;
                    MP_FAIL(rank, "%s dtype %s op %s %zu->%zu bytes: %s: %s", arg->entry->name,
                            mscclpp_dtype_name(dt), mscclpp_redop_name(op), n_in * es, n_out * es,
                            mscclpp_result_string(r), mscclpp_last_error());
                    goto done; /* the context is broken; peers fail too */
                }
                /* check every element of my output, copied out of (device) memory */
                MP_CHECK(rank, mscclpp_memcpy(stage, recv, n_out * es));
                size_t wrong = 0, first = (size_t)-1;
                double got_first = 0, want_first = 0;
                for (size_t i = 0; i < n_out; i++) {
                    double want;
                    switch (coll) {
                    case C_ALLREDUCE:
                    case C_REDUCESCATTER: {
                        size_t src = coll == C_ALLREDUCE ? i : (size_t)rank * n_out + i;
                        double acc = conf_input(dt, op, 0, src);
                        for (int p = 1; p < nranks; p++)
                            acc = conf_combine(op, acc, conf_input(dt, op, p, src));
                        want = conf_wrap(dt, acc);
                        break;
                    }
                    case C_ALLGATHER:
                        want = conf_input(dt, MSCCLPP_SUM, (int)(i / n_in), i % n_in);
                        break;
                    case C_ALLTOALL:
                        want = conf_input(dt, MSCCLPP_SUM, (int)(i / unit),
                                          (size_t)rank * unit + i % unit);
                        break;
                    case C_SENDRECV:
                        want = conf_input(dt, MSCCLPP_SUM, (rank + nranks - 1) % nranks, i);
                        break;
                    default: want = conf_input(dt, MSCCLPP_SUM, 0, i); break;
                    }
                    want = conf_round(dt, want);
                    double got = conf_load(dt, stage + i * es);
                    if (!(fabs(got - want) <= conf_tolerance(dt, nranks, want))) {
                        if (!wrong) {
                            first = i;
                            got_first = got;
                            want_first = want;
                        }
                        wrong++;
                    }
                }
                if (wrong) {
                    failures++;
                    MP_FAIL(rank, "%s dtype %s op %s %zu elements: %zu wrong, first at %zu: got "
                            "%g want %g", arg->entry->name, mscclpp_dtype_name(dt),
                            mscclpp_redop_name(op), n_out, wrong, first, got_first, want_first);
                }
                MP_CHECK(rank, mscclpp_bootstrap_barrier(boot));
                if (failures > 3) goto done;
            }
        }
    }
done:
    if (rank == 0)
        fprintf(stderr, "# %s: %d runs on %d ranks, %d failed\n", arg->entry->name, runs, nranks,
                failures);
    mscclpp_executor_destroy(ex);
    mscclpp_free(bufa);
    mscclpp_free(bufb);
    free(stage);
    mscclpp_plan_destroy(plan);
    mscclpp_comm_destroy(comm);
    return failures ? 1 : 0;
}

START_TEST(t_plan)
{
    const plan_entry_t *e = &plans[_i];
    if (e->skip_reason[0]) {
        fprintf(stderr, "# %s skipped: %s\n", e->name, e->skip_reason);
        return;
    }
    mscclpp_plan_t *plan = NULL;
    ck_assert_msg(mscclpp_plan_load_file(e->path, &plan) == MSCCLPP_OK, "%s: %s", e->name,
                  mscclpp_last_error());
    int n = mscclpp_plan_world_size(plan);
    mscclpp_plan_destroy(plan);
    run_arg_t arg = {e};
    unsigned failed = 0;
    if (e->nodes > 1) {
        /* K nodes: namespaces made here, each rank moves into its node before the bootstrap
         * (or, where namespaces cannot be made, a forced node id per rank; the launcher says) */
        netns_launch_setup(e->nodes, n);
        mp_child_setup = netns_launch_enter;
    }
    int f = mp_run(n, run_plan_rank, &arg, 600, &failed);
    if (e->nodes > 1) {
        mp_child_setup = NULL;
        netns_launch_cleanup();
    }
    ck_assert_msg(f == 0, "%s: %d of %d ranks failed (mask 0x%x)", e->name, f, n, failed);
}
END_TEST

/* A plan whose rank 0 waits for LL packets nobody sends: a timeout naming rank, block and op.
 * (A wait on a signal nobody sends is refused at load now: unbalanced signal/wait counts.) */
static const char *deadlock_plan =
    "{\"name\":\"deadlock\",\"collective\":\"allreduce\",\"protocol\":\"Simple\","
    "\"inplace\":false,\"gpus\":["
    "{\"id\":0,\"input_chunks\":1,\"output_chunks\":1,\"scratch_chunks\":1,"
    "\"channels\":[{\"channel_type\":\"memory\",\"connected_to\":[1]}],\"remote_buffers\":[],"
    "\"threadblocks\":[{\"id\":0,\"channels\":[{\"channel_type\":\"memory\",\"channel_ids\":[0]}],"
    "\"ops\":[{\"name\":\"nop\"},{\"name\":\"upkt\",\"src_buff\":[{\"type\":\"s\","
    "\"index\":0,\"size\":1}],\"dst_buff\":[{\"type\":\"o\",\"index\":0,\"size\":1}]}]}]},"
    "{\"id\":1,\"input_chunks\":1,\"output_chunks\":1,\"scratch_chunks\":0,"
    "\"channels\":[{\"channel_type\":\"memory\",\"connected_to\":[0]}],\"remote_buffers\":[],"
    "\"threadblocks\":[{\"id\":0,\"channels\":[{\"channel_type\":\"memory\",\"channel_ids\":[0]}],"
    "\"ops\":[{\"name\":\"nop\"}]}]}]}";

static int deadlock_rank(int rank, int nranks, const mscclpp_unique_id_t *id, void *argp)
{
    mscclpp_plan_t *plan = NULL;
    MP_CHECK(rank, mscclpp_plan_load_string(deadlock_plan, strlen(deadlock_plan), &plan));
    mscclpp_comm_t *comm = NULL;
    MP_CHECK(rank, mscclpp_comm_init_rank(id, rank, nranks, &comm));
    mscclpp_executor_t *ex = NULL;
    MP_CHECK(rank, mscclpp_executor_create(comm, &ex));
    void *a = NULL, *b = NULL;
    MP_CHECK(rank, mscclpp_malloc(4096, &a));
    MP_CHECK(rank, mscclpp_malloc(4096, &b));
    mscclpp_result_t r = mscclpp_execute(ex, plan, a, b, 1024, 1024, MSCCLPP_FLOAT32, MSCCLPP_SUM,
                                         NULL);
    if (rank == 1) {
        if (r != MSCCLPP_OK) return MP_FAIL(rank, "rank 1 has nothing to wait for: %s",
                                            mscclpp_last_error());
        return 0;
    }
    if (r != MSCCLPP_ERR_TIMEOUT)
        return MP_FAIL(rank, "deadlock returned %s", mscclpp_result_string(r));
    const char *msg = mscclpp_last_error();
    if (!strstr(msg, "rank 0") || !strstr(msg, "block 0") || !strstr(msg, "op 1") ||
        !strstr(msg, "wait"))
        return MP_FAIL(rank, "timeout message does not name rank, block and op: %s", msg);
    fprintf(stderr, "# deadlock reported as: %s\n", msg);
    return 0;
}

START_TEST(t_deadlock_times_out)
{
    setenv("MSCCLPP_TIMEOUT", "2", 1);
    ck_assert_int_eq(mp_run(2, deadlock_rank, NULL, 60, NULL), 0);
}
END_TEST

/* A one-rank communicator: every collective API call (out-of-place and in-place, every op for
 * the reductions) leaves the output equal to the input, through the default 1-rank plans. */
static int one_rank_body(int rank, int nranks, const mscclpp_unique_id_t *id, void *argp)
{
    (void)argp;
    mscclpp_comm_t *comm = NULL;
    MP_CHECK(rank, mscclpp_comm_init_rank(id, rank, nranks, &comm));
    mscclpp_executor_t *ex = NULL;
    MP_CHECK(rank, mscclpp_executor_create(comm, &ex));
    static const size_t counts[] = {1, 61, (1u << 18) + 3};
    const size_t cap = ((1u << 18) + 3) * 4 + 64;
    uint8_t *a = NULL, *b = NULL, *in = malloc(cap), *out = malloc(cap);
    if (!in || !out) return MP_FAIL(rank, "out of memory");
    MP_CHECK(rank, mscclpp_malloc(cap, (void **)&a));
    MP_CHECK(rank, mscclpp_malloc(cap, (void **)&b));
    static const char *names[] = {"allreduce", "allgather", "reducescatter", "alltoall",
                                  "broadcast"};
    int failures = 0;
    for (int c = 0; c < 5; c++) {
        for (int ip = 0; ip < 2; ip++) {
            for (int op = 0; op < MSCCLPP_REDOP_COUNT; op++) {
                if (op > 0 && c != 0 && c != 2) break; /* ops matter only for reductions */
                for (int k = 0; k < 3; k++) {
                    mscclpp_dtype_t dt = k == 1 ? MSCCLPP_INT8 : MSCCLPP_FLOAT32;
                    size_t es = mscclpp_dtype_size(dt), n = counts[k], bytes = n * es;
                    for (size_t i = 0; i < bytes; i++)
                        in[i] = (uint8_t)(i * 7 + (size_t)c * 13 + (size_t)op + 1);
                    if (dt == MSCCLPP_FLOAT32) /* finite floats: keep the exponent byte sane */
                        for (size_t i = 0; i < n; i++) ((float *)(void *)in)[i] = (float)(i % 97);
                    MP_CHECK(rank, mscclpp_memset(b, 0x5a, cap));
                    MP_CHECK(rank, mscclpp_memcpy(a, in, bytes));
                    if (ip) MP_CHECK(rank, mscclpp_memcpy(b, in, bytes));
                    const void *send = ip ? (const void *)b : (const void *)a;
                    mscclpp_redop_t rop = (mscclpp_redop_t)op;
                    mscclpp_result_t r;
                    switch (c) {
                    case 0: r = mscclpp_allreduce(ex, send, b, n, dt, rop, NULL); break;
                    case 1: r = mscclpp_allgather(ex, send, b, n, dt, NULL); break;
                    case 2: r = mscclpp_reducescatter(ex, send, b, n, dt, rop, NULL); break;
                    case 3: r = mscclpp_alltoall(ex, send, b, n, dt, NULL); break;
                    default: r = mscclpp_broadcast(ex, send, b, n, dt, 0, NULL); break;
                    }
                    if (r != MSCCLPP_OK) {
                        failures++;
                        MP_FAIL(rank, "1 rank: %s %s op %s, %zu x %s: %s: %s", names[c],
                                ip ? "in-place" : "out-of-place", mscclpp_redop_name(rop), n,
                                mscclpp_dtype_name(dt), mscclpp_result_string(r),
                                mscclpp_last_error());
                        continue;
                    }
                    memset(out, 0xa5, bytes + 16);
                    MP_CHECK(rank, mscclpp_memcpy(out, b, bytes + 16));
                    size_t bad = 0;
                    while (bad < bytes && out[bad] == in[bad]) bad++;
                    bool tail_ok = true;
                    for (size_t i = bytes; i < bytes + 16; i++) tail_ok &= out[i] == 0x5a;
                    if (bad < bytes || !tail_ok) {
                        failures++;
                        MP_FAIL(rank, "1 rank: %s %s op %s, %zu x %s: %s", names[c],
                                ip ? "in-place" : "out-of-place", mscclpp_redop_name(rop), n,
                                mscclpp_dtype_name(dt),
                                bad < bytes ? "output differs from the input"
                                            : "wrote past the end of the output");
                    }
                }
            }
        }
    }
    mscclpp_free(a);
    mscclpp_free(b);
    free(in);
    free(out);
    mscclpp_executor_destroy(ex);
    mscclpp_comm_destroy(comm);
    return failures ? 1 : 0;
}

START_TEST(t_one_rank_collectives)
{
    char dir[600];
    snprintf(dir, sizeof dir, "%s/plans", top);
    setenv("MSCCLPP_PLAN_DIR", dir, 0); /* the default plans of this tree unless told */
    ck_assert_int_eq(mp_run(1, one_rank_body, NULL, 300, NULL), 0);
}
END_TEST

/* ---- discovery --------------------------------------------------------------------------- */

static int cmp_entry(const void *a, const void *b)
{
    return strcmp(((const plan_entry_t *)a)->name, ((const plan_entry_t *)b)->name);
}

static void add_dir(const char *dir, const char *prefix, const char *filter)
{
    DIR *d = opendir(dir);
    if (!d) {
        fprintf(stderr, "# conformance: cannot open %s\n", dir);
        return;
    }
    struct dirent *de;
    while ((de = readdir(d)) && n_plans < MAX_PLANS) {
        size_t len = strlen(de->d_name);
        if (len < 6 || strcmp(de->d_name + len - 5, ".json")) continue;
        plan_entry_t *e = &plans[n_plans];
        snprintf(e->name, sizeof e->name, "%s%s", prefix, de->d_name);
        if (filter && !strstr(e->name, filter)) continue;
        snprintf(e->path, sizeof e->path, "%s/%s", dir, de->d_name);
        n_plans++;
    }
    closedir(d);
}

static void apply_excludes(const char *backend)
{
    char path[600];
    snprintf(path, sizeof path, "%s/tests/conformance/exclude-%s.txt", top, backend);
    FILE *f = fopen(path, "r");
    if (!f) return;
    char line[512];
    while (fgets(line, sizeof line, f)) {
        if (line[0] == '#' || line[0] == '\n') continue;
        /* FILE[:DTYPE[:UNIT]]  REASON — DTYPE as mscclpp_dtype_name() prints it, or "*" */
        char spec[256] = {0}, reason[256] = {0};
        if (sscanf(line, "%255s %255[^\n]", spec, reason) < 1) continue;
        char *dt = strchr(spec, ':'), *unit = NULL;
        if (dt) {
            *dt++ = '\0';
            unit = strchr(dt, ':');
            if (unit) *unit++ = '\0';
        }
        for (int i = 0; i < n_plans; i++) {
            if (strcmp(plans[i].name, spec)) continue;
            if (!dt) {
                snprintf(plans[i].skip_reason, sizeof plans[i].skip_reason, "%s",
                         reason[0] ? reason : "excluded");
                continue;
            }
            if (plans[i].n_partial == MAX_PARTIAL) continue;
            partial_skip_t *ps = &plans[i].partial[plans[i].n_partial++];
            ps->dtype = -1;
            for (int d = 0; d < MSCCLPP_DTYPE_COUNT; d++)
                if (!strcmp(dt, mscclpp_dtype_name((mscclpp_dtype_t)d))) ps->dtype = d;
            ps->unit = unit && strcmp(unit, "*") ? atol(unit) : -1;
            snprintf(ps->reason, sizeof ps->reason, "%s", reason[0] ? reason : "excluded");
        }
    }
    fclose(f);
}

/* The backend's name, asked in a child that exits at once: selecting a GPU backend creates a
 * device context, and one made here would be unusable in every forked rank (CUDA contexts do not
 * survive fork(); the ranks' mscclpp_malloc would fail with cudaErrorInitializationError). */
static void probe_backend(char *name, size_t size)
{
    snprintf(name, size, "none");
    int fd[2];
    if (pipe(fd)) return;
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid == 0) {
        close(fd[0]);
        const char *n = mscclpp_backend_name();
        (void)!write(fd[1], n, strlen(n));
        _exit(0);
    }
    close(fd[1]);
    if (pid > 0) {
        ssize_t got = read(fd[0], name, size - 1);
        if (got > 0) name[got] = '\0';
        int status;
        while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
        }
    }
    close(fd[0]);
}

/* The multi-node plans: plans/multinode/<K>x<L>/ (the defaults; bounded tier unless full), and
 * in the full tier the flat variants of plans/multinode/flat/<K>x<L>/ (not defaults; the
 * simulator checks them in CI, tests/python/test_default_plans.py). */
static void add_multinode(const char *filter)
{
    bool full = getenv("MSCCLPP_CONFORMANCE_FULL") && atoi(getenv("MSCCLPP_CONFORMANCE_FULL"));
    bool scale = getenv("MSCCLPP_CONFORMANCE_SCALE") && atoi(getenv("MSCCLPP_CONFORMANCE_SCALE"));
    for (int flat = 0; flat < (full ? 2 : 1); flat++) {
        char base[600];
        snprintf(base, sizeof base, "%s/plans/multinode%s", top, flat ? "/flat" : "");
        DIR *d = opendir(base);
        if (!d) {
            fprintf(stderr, "# conformance: cannot open %s\n", base);
            continue;
        }
        struct dirent *de;
        while ((de = readdir(d))) {
            int k, l;
            char tail;
            if (sscanf(de->d_name, "%dx%d%c", &k, &l, &tail) != 2 || k < 2 || l < 1) continue;
            char dir[1024], prefix[300];
            snprintf(dir, sizeof dir, "%s/%s", base, de->d_name);
            snprintf(prefix, sizeof prefix, "multinode/%s%s/", flat ? "flat/" : "", de->d_name);
            int first = n_plans;
            add_dir(dir, prefix, filter);
            for (int i = first; i < n_plans; i++) {
                plans[i].nodes = k;
                plans[i].bounded = !full;
                if (k * l > 16 && !scale)
                    snprintf(plans[i].skip_reason, sizeof plans[i].skip_reason,
                             "%d ranks: the scale tier (MSCCLPP_CONFORMANCE_SCALE=1; "
                             "tests/multinode/test_scale.sh)", k * l);
#ifndef MSCCLPP_HAVE_UCX
                snprintf(plans[i].skip_reason, sizeof plans[i].skip_reason,
                         "built without UCX: no transport between nodes");
#endif
            }
        }
        closedir(d);
    }
    /* MSCCL++-style programs' plans (tests/multinode/programs/<program>_<K>x<L>.json): every
     * element checked at one size and two dtypes (every size, dtype and op when full) */
    char dir[600];
    snprintf(dir, sizeof dir, "%s/tests/multinode/programs", top);
    int first = n_plans;
    add_dir(dir, "multinode-programs/", filter);
    for (int i = first; i < n_plans; i++) {
        const char *us = strrchr(plans[i].name, '_');
        int k = 0, l = 0;
        if (!us || sscanf(us, "_%dx%d.json", &k, &l) != 2 || k < 2) {
            snprintf(plans[i].skip_reason, sizeof plans[i].skip_reason,
                     "the name does not end in _<nodes>x<ranks per node>.json");
            continue;
        }
        plans[i].nodes = k;
        plans[i].quick = !full;
#ifndef MSCCLPP_HAVE_UCX
        snprintf(plans[i].skip_reason, sizeof plans[i].skip_reason,
                 "built without UCX: no transport between nodes");
#endif
    }
}

int main(void)
{
    top = getenv("MSCCLPP_TOP_SRCDIR");
    if (!top) top = ".";
    const char *filter = getenv("CONFORMANCE_FILTER");
    const char *set = getenv("CONFORMANCE_SET");
    bool multinode = set && !strcmp(set, "multinode");
    char dir[600];
    if (multinode) {
        add_multinode(filter);
        goto discovered;
    }
    snprintf(dir, sizeof dir, "%s/plans", top);
    add_dir(dir, "", filter);
    snprintf(dir, sizeof dir, "%s/plans/host", top); /* backend-tuned variants: valid anywhere */
    add_dir(dir, "host/", filter);
    snprintf(dir, sizeof dir, "%s/plans/cuda", top);
    add_dir(dir, "cuda/", filter);
    /* plans that address the peers' input and output: generic, in full; then the backends'
     * variants of them (quick, below) */
    snprintf(dir, sizeof dir, "%s/plans/direct", top);
    add_dir(dir, "direct/", filter);
    snprintf(dir, sizeof dir, "%s/plans/direct/host", top);
    add_dir(dir, "direct/host/", filter);
    snprintf(dir, sizeof dir, "%s/plans/direct/cuda", top);
    add_dir(dir, "direct/cuda/", filter);
    snprintf(dir, sizeof dir, "%s/tests/plans-reference", top);
    add_dir(dir, "", filter);
discovered:
    qsort(plans, (size_t)n_plans, sizeof plans[0], cmp_entry);
    char backend[64];
    probe_backend(backend, sizeof backend);
    apply_excludes(backend);
    /* Plans tuned for another backend (plans/<other>/) are the same programs at other block
     * counts and size ranges: proving they run here needs one size and two dtypes, and their
     * many blocks per rank make a full run slow on CPU ranks. This backend's own run in full. */
    size_t blen = strlen(backend);
    for (int i = 0; i < n_plans; i++) {
        const char *slash = strchr(plans[i].name, '/');
        if (plans[i].nodes) continue; /* multi-node plans: their tier is set above */
        bool direct = slash && !strncmp(plans[i].name, "direct/", 7);
        bool generic = direct && !strchr(slash + 1, '/'); /* not a backend's */
        if (direct && !generic) plans[i].quick = true;    /* direct/<backend>/: generic programs */
        if (slash && !generic &&
            !((size_t)(slash - plans[i].name) == blen && !strncmp(plans[i].name, backend, blen)))
            plans[i].quick = true;
        /* in-place twins (<family>_ip_<N>.json) are their out-of-place program run with input
         * == output: one size and two dtypes prove the aliasing, the twin proves the rest */
        if (strstr(plans[i].name, "_ip_")) plans[i].quick = true;
    }

    Suite *s = suite_create("conformance");
    TCase *tc = tcase_create(multinode ? "multinode" : backend);
    tcase_set_timeout(tc, 900);
    if (!filter && !multinode) {
        tcase_add_test(tc, t_deadlock_times_out);
        tcase_add_test(tc, t_one_rank_collectives);
    }
    if (n_plans > 0) tcase_add_loop_test(tc, t_plan, 0, n_plans);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
