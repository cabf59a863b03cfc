/*
 * Holds the plan verifier to what execution does (issue 22 item 2): every plan named on the
 * command line is loaded, verified (mscclpp_plan_verify) and run on the host interpreter in this
 * process (tests/unit/kern_harness.c: every rank's blocks as threads, every output element
 * checked; each op with the plan's own reduce_op, float32 and int32, two launches each). A file
 * called ok_*.json must verify and compute its collective exactly (or be refused at launch for
 * the sizes given); wrong_*.json must fail verification with "computes a wrong" and, run anyway,
 * compute something wrong or be refused at launch. One TAP line per file. tests/fuzz/verify_sound.sh makes the files (make_verify_sound.py) and runs this.
 */
#include <libgen.h>
#include <stdio.h>
#include <string.h>

#include "tests/unit/kern_harness.h"

/* The harness's element count for one launch: 16 elements per chunk of the side it counts. */
static int harness_coll(const struct mscclpp_plan *p, kh_coll_t *c, size_t *count)
{
    const plan_gpu_t *g = &p->gpus[0];
    if (!strcmp(p->collective, "allreduce")) *c = KH_ALLREDUCE, *count = g->input_chunks * 16u;
    else if (!strcmp(p->collective, "allgather")) *c = KH_ALLGATHER, *count = g->input_chunks * 16u;
    else if (!strcmp(p->collective, "reducescatter"))
        *c = KH_REDUCESCATTER, *count = g->output_chunks * 16u;
    else if (!strcmp(p->collective, "alltoall"))
        *c = KH_ALLTOALL, *count = g->input_chunks / (uint32_t)p->nranks * 16u;
    else return -1;
    return *count ? 0 : -1;
}

/* The reduction of the reference result, as the verifiers take it: the plan's one explicit
 * reduce_op, else sum (ops without one sum; ops that disagree make the result wrong). */
static mscclpp_redop_t plan_redop(const struct mscclpp_plan *p)
{
    int found = -1, several = 0;
    for (int r = 0; r < p->nranks; r++)
        for (int b = 0; b < p->gpus[r].n_blocks; b++)
            for (int i = 0; i < p->gpus[r].blocks[b].n_ops; i++) {
                int op = p->gpus[r].blocks[b].ops[i].reduce_op;
                if (op == MSCCLPP_REDOP_PLAN) continue;
                if (found >= 0 && op != found) several = 1;
                found = op;
            }
    return found < 0 || several ? MSCCLPP_SUM : (mscclpp_redop_t)found;
}

/* Runs the plan with its own reduce ops (MSCCLPP_REDOP_PLAN), float32 then int32, two launches
 * each; returns OK, MSCCLPP_ERR_INTERNAL for a wrong element, or the launch's error. */
static mscclpp_result_t run(const struct mscclpp_plan *p, char *msg, size_t cap)
{
    kh_coll_t c;
    size_t count;
    if (harness_coll(p, &c, &count)) {
        snprintf(msg, cap, "collective %s is not one the harness checks", p->collective);
        return MSCCLPP_ERR_UNSUPPORTED;
    }
    kh_world_t *w;
    mscclpp_result_t r = kh_world_create(p, &w);
    if (r != MSCCLPP_OK) {
        snprintf(msg, cap, "world: %s", mscclpp_last_error());
        return r;
    }
    static const mscclpp_dtype_t dts[] = {MSCCLPP_FLOAT32, MSCCLPP_INT32};
    for (size_t k = 0; k < sizeof dts / sizeof dts[0] && r == MSCCLPP_OK; k++)
        r = kh_check_collective_ref(w, c, count, dts[k], MSCCLPP_REDOP_PLAN, plan_redop(p),
                                    MSCCLPP_PACKET_LL16, p->inplace, 2, msg, cap);
    kh_world_destroy(w);
    return r;
}

int main(int argc, char **argv)
{
    printf("1..%d\n", argc - 1);
    int failed = 0;
    for (int a = 1; a < argc; a++) {
        char path[4096], msg[1024] = "", vmsg[1024] = "";
        snprintf(path, sizeof path, "%s", argv[a]);
        const char *name = basename(path);
        int want_ok = !strncmp(name, "ok_", 3);
        struct mscclpp_plan *p = kh_plan_load_file(argv[a]);
        const char *why = NULL;
        if (!p) {
            why = "does not load";
        } else {
            mscclpp_result_t v = mscclpp_plan_verify(p);
            snprintf(vmsg, sizeof vmsg, "%s", v == MSCCLPP_OK ? "" : mscclpp_last_error());
            mscclpp_result_t ran = run(p, msg, sizeof msg);
            /* a launch may refuse a plan for the sizes it is given (INVALID_PLAN); a wrong
             * element, a hang (TIMEOUT) or any other failure contradicts "verified" */
            if (want_ok && v != MSCCLPP_OK) why = "accepted by the Python verifier, not by C";
            else if (want_ok && ran == MSCCLPP_ERR_INTERNAL) why = "verified, but computes a wrong result";
            else if (want_ok && ran != MSCCLPP_OK && ran != MSCCLPP_ERR_INVALID_PLAN)
                why = "verified, but its launch fails";
            else if (!want_ok && (v == MSCCLPP_OK || !strstr(vmsg, "computes a wrong")))
                why = "the C verifier does not call it a wrong result";
            else if (!want_ok && ran == MSCCLPP_OK) why = "called wrong, but computes the right result";
            plan_free(p);
        }
        if (why) failed++;
        printf("%s %d - %s%s%s%s%s\n", why ? "not ok" : "ok", a, name, why ? ": " : "",
               why ? why : "", why && msg[0] ? ": " : "", why ? msg : "");
    }
    return failed ? 1 : 0;
}
