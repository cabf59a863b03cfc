/*
 * Benchmark: how long one rank takes to make its part of the plans made for a job
 * (mscclpp_plan_make with a rank, as mscclpp_executor_create does for every collective), for
 * large jobs: 1024 ranks on one node, as 8 nodes of 128, as 128 nodes of 8, as 16 of 64, and
 * uneven. Prints one line per layout and collective: the median of `reps` makes in
 * milliseconds of CPU time (this process's; what a loaded machine does not inflate) and of wall
 * time, and the op count of the rank's part; with --json FILE also
 * one JSON record per line. docs/performance.md records its results.
 *
 * usage: bench_plan_make [--ranks N] [--reps R] [--json FILE]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "mscclpp/mscclpp.h"

static double now_ms(clockid_t clk)
{
    struct timespec ts;
    clock_gettime(clk, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
    int n = 1024, reps = 9;
    const char *json = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--ranks") && i + 1 < argc) n = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--reps") && i + 1 < argc) reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--json") && i + 1 < argc) json = argv[++i];
        else {
            fprintf(stderr, "usage: %s [--ranks N] [--reps R] [--json FILE]\n", argv[0]);
            return 2;
        }
    }
    if (n < 2 || reps < 1 || reps > 99) {
        fprintf(stderr, "%s: --ranks >= 2, --reps 1..99\n", argv[0]);
        return 2;
    }
    FILE *jf = json ? fopen(json, "w") : NULL;
    if (json && !jf) {
        perror(json);
        return 1;
    }
    /* ranks per node of each layout (0: the rest, uneven: alternating 96 and 160) */
    const int per_node[] = {n, 128, 8, 64, -1};
    static const char *const colls[] = {"allreduce", "allgather", "reducescatter", "alltoall",
                                        "broadcast", "reduce"};
    int *node_of = malloc(sizeof(int) * (size_t)n);
    if (!node_of) return 1;
    printf("# rank %d's part of a %d-rank job: median of %d makes\n", n / 2 + 1, n, reps);
    printf("# %-14s %-13s %-26s %9s %9s %7s\n", "layout", "collective", "plan", "cpu ms",
           "wall ms", "ops");
    int status = 0;
    for (size_t l = 0; l < sizeof per_node / sizeof per_node[0]; l++) {
        char layout[32];
        if (per_node[l] > 0) {
            if (n % per_node[l]) continue;
            for (int r = 0; r < n; r++) node_of[r] = r / per_node[l];
            snprintf(layout, sizeof layout, "%dx%d", n / per_node[l], per_node[l]);
        } else {
            int node = 0, left = 96;
            for (int r = 0; r < n; r++) {
                node_of[r] = node;
                if (--left == 0) left = (++node % 2) ? 160 : 96;
            }
            snprintf(layout, sizeof layout, "96+160+...");
        }
        for (size_t c = 0; c < sizeof colls / sizeof colls[0]; c++) {
            double t[99], w[99];
            int ops = 0; /* ops of this rank's part (its JSON's op objects) */
            char name[128] = "";
            for (int k = 0; k < reps; k++) {
                mscclpp_plan_t *p = NULL;
                double c0 = now_ms(CLOCK_PROCESS_CPUTIME_ID), w0 = now_ms(CLOCK_MONOTONIC);
                mscclpp_result_t r =
                    mscclpp_plan_make(colls[c], NULL, n, node_of, 0, n / 2 + 1, &p);
                t[k] = now_ms(CLOCK_PROCESS_CPUTIME_ID) - c0;
                w[k] = now_ms(CLOCK_MONOTONIC) - w0;
                if (r != MSCCLPP_OK) {
                    fprintf(stderr, "%s %s: %s\n", layout, colls[c], mscclpp_last_error());
                    status = 1;
                    break;
                }
                if (k == 0) {
                    snprintf(name, sizeof name, "%s", mscclpp_plan_name(p));
                    /* the size of this rank's part, from its JSON (ops = "name" keys of ops) */
                    size_t len = 0;
                    if (mscclpp_plan_to_json(p, NULL, 0, &len) == MSCCLPP_OK) {
                        char *buf = malloc(len + 1);
                        if (buf && mscclpp_plan_to_json(p, buf, len + 1, &len) == MSCCLPP_OK) {
                            for (const char *s = buf; (s = strstr(s, "{\"name\": \"")); s++)
                                ops++;
                        }
                        free(buf);
                    }
                }
                mscclpp_plan_destroy(p);
            }
            if (status) break;
            qsort(t, (size_t)reps, sizeof t[0], cmp_d);
            qsort(w, (size_t)reps, sizeof w[0], cmp_d);
            printf("  %-14s %-13s %-26s %9.3f %9.3f %7d\n", layout, colls[c], name, t[reps / 2],
                   w[reps / 2], ops);
            if (jf)
                fprintf(jf, "{\"ranks\": %d, \"layout\": \"%s\", \"collective\": \"%s\", "
                        "\"plan\": \"%s\", \"cpu_ms_median\": %.4f, \"wall_ms_median\": %.4f, "
                        "\"ops\": %d}\n",
                        n, layout, colls[c], name, t[reps / 2], w[reps / 2], ops);
        }
    }
    free(node_of);
    if (jf) fclose(jf);
    return status;
}
