/*
 * mscclpp-info: what this build of libmscclpp is and finds on this machine — how it was built,
 * backends and their devices, transports, and every MSCCLPP_* variable with its value, default
 * and meaning (and the MSCCLPP_* variables set that the library does not know).
 */
#include <dirent.h>
#include <errno.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "base/config.h"
#include "base/self.h"
#include "executor/registry.h"
#include "base/wait.h"
#include "transports/transport.h"
#include "hal/hal.h"
#include "mscclpp/mscclpp.h"

static void usage(const char *prog)
{
    printf("usage: %s [--build|--backends|--plans|--config|--version|--help]\n"
           "       %s --plan COLLECTIVE NRANKS SIZE [--nodes K]\n"
           "Prints how libmscclpp was built, the backends and devices it finds, the transports\n"
           "built in, and the MSCCLPP_* environment variables (value, default, meaning); a\n"
           "variable set in the environment that the library does not know is named too.\n"
           "  --build     only the build configuration\n"
           "  --backends  only the backends, devices and transports\n"
           "  --plans     only the plans in force: the folders an executor loads, in order,\n"
           "              with their counts, then the cache, made plans and tuning table\n"
           "  --config    only the variables\n"
           "  --version   the version of mscclpp-info and of libmscclpp\n"
           "  --plan COLLECTIVE NRANKS SIZE [--nodes K]\n"
           "              which plan serves that call (SIZE in bytes as mscclpp-bench counts\n"
           "              them, K/M/G allowed), out of place and in place, where it comes from\n"
           "              and the other plans that match: NRANKS local ranks (as K nodes) ask\n"
           "              the executor (mscclpp-bench COLLECTIVE --np NRANKS --which)\n"
           "Exit status: 0, or 1 when a variable's value is invalid or an MSCCLPP_* variable is\n"
           "unknown (so a job script can check its environment first), 2 for bad usage.\n",
           prog, prog);
}

/* --plan: the executor decides for a world of NRANKS ranks, so ask it in one: run
 * mscclpp-bench --which (beside this program, or on PATH) with that many forked ranks. */
static int which_plan(int argc, char **argv, int i)
{
    if (argc - i < 4) {
        fprintf(stderr, "mscclpp-info: --plan needs COLLECTIVE NRANKS SIZE (e.g. --plan "
                        "allreduce 8 1M)\n");
        return 2;
    }
    char *args[16];
    int n = 0;
    static char bench[PATH_MAX + 32] = "mscclpp-bench";
    char self[PATH_MAX], last[PATH_MAX];
    ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
    if (len > 0) {
        self[len] = '\0';
        char *dir = dirname(self);
        snprintf(last, sizeof last, "%s", dir);
        char cand[PATH_MAX + 32];
        /* in a build tree the program runs from tools/.libs; the bench's wrapper is in tools/ */
        const char *up = !strcmp(basename(last), ".libs") ? "/.." : "";
        snprintf(cand, sizeof cand, "%.4000s%s/mscclpp-bench", dir, up);
        if (access(cand, X_OK) == 0) memcpy(bench, cand, sizeof cand);
    }
    args[n++] = bench;
    args[n++] = argv[i + 1];
    args[n++] = "--np";
    args[n++] = argv[i + 2];
    args[n++] = "-b";
    args[n++] = argv[i + 3];
    args[n++] = "-e";
    args[n++] = argv[i + 3];
    args[n++] = "--which";
    for (int k = i + 4; k < argc && n < 14; k++) {
        if (!strcmp(argv[k], "--nodes") && k + 1 < argc) {
            args[n++] = argv[k++];
            args[n++] = argv[k];
        } else {
            fprintf(stderr, "mscclpp-info: --plan: unexpected '%s' (only --nodes K may "
                            "follow)\n", argv[k]);
            return 2;
        }
    }
    args[n] = NULL;
    fflush(NULL);
    execvp(bench, args);
    fprintf(stderr, "mscclpp-info: --plan runs mscclpp-bench, which was not found beside this "
                    "program or on PATH (%s)\n", strerror(errno));
    return 1;
}

static void print_build(void)
{
    printf("Build (configure of libmscclpp %s):\n", PACKAGE_VERSION);
    printf("  arguments   : %s\n", MSCCLPP_BUILD_ARGS[0] ? MSCCLPP_BUILD_ARGS : "(none)");
    printf("  C compiler  : %s\n", MSCCLPP_BUILD_CC);
    printf("  backends    : host%s%s (modules: %s)\n",
#ifdef MSCCLPP_HAVE_CUDA
           ", cuda",
#else
           "",
#endif
#ifdef MSCCLPP_HAVE_ROCM
           ", hip",
#else
           "",
#endif
           MSCCLPP_HAL_MODULES[0] ? MSCCLPP_HAL_MODULES : "none");
    printf("  CUDA        : %s\n  HIP         : %s\n", MSCCLPP_BUILD_CUDA, MSCCLPP_BUILD_HIP);
    printf("  transports  : ipc%s%s\n",
#ifdef MSCCLPP_HAVE_UCX
           ", ucx",
#else
           "",
#endif
#ifdef MSCCLPP_HAVE_VERBS
           ", ib");
#else
           "");
#endif
    printf("  MPI         : %s\n  NCCL API    : %s\n", MSCCLPP_BUILD_MPI, MSCCLPP_BUILD_NCCL);
}

static void print_backends(void)
{
    hal_backend_info_t info[8];
    int n = hal_list_backends(info, 8);
    printf("Backends:\n");
    for (int i = 0; i < n && i < 8; i++) {
        printf("  %-5s %-10s %d device(s)  %s\n", info[i].name,
               info[i].status == MSCCLPP_OK ? "available" : "unavailable", info[i].devices,
               info[i].path ? info[i].path : "");
        if (info[i].build && info[i].build[0]) printf("        built for: %s\n", info[i].build);
        if (info[i].status != MSCCLPP_OK)
            printf("        (%s: %s)\n", mscclpp_result_string(info[i].status),
                   info[i].error && info[i].error[0] ? info[i].error : "no detail");
    }
    const hal_ops_t *ops = NULL;
    if (hal_get(&ops) != MSCCLPP_OK) {
        printf("Selected backend: none (%s)\n", mscclpp_last_error());
        return;
    }
    const char *build = hal_backend_build(ops);
    printf("Selected backend: %s%s%s%s\n", ops->name,
           config_is_set(CFG_MSCCLPP_HAL) ? " (from MSCCLPP_HAL)" : "",
           build[0] ? ", built for " : "", build);
    int count = 0;
    if (ops->device_count(&count) != MSCCLPP_OK) count = 0;
    for (int d = 0; d < count; d++) {
        hal_device_props_t p;
        if (ops->device_props(d, &p) != MSCCLPP_OK) continue;
        printf("  device %d: %s, arch %s, warp %d, %d multiprocessors, %.1f GiB, ipc %s, "
               "multicast %s\n",
               d, p.name, p.arch, p.warp_size, p.multiprocessors,
               (double)p.total_memory / (1 << 30), p.ipc ? "yes" : "no",
               p.multicast ? "yes" : "no");
    }
}

static void print_transports(void)
{
    /* per pair of ranks: ipc within a node, else ib when usable, else ucx (transport.h) */
    printf("Transports (chosen per pair of ranks: ipc within a node, else ib, else ucx):\n");
    for (int i = 0; i < TP__COUNT; i++) {
        char why[256];
        mscclpp_result_t r = tp_status(i, why, sizeof why);
        printf("  %-4s %-8s %s\n", tp_get(i)->name, r == MSCCLPP_OK ? "usable" : "unusable",
               *why ? why : (r == MSCCLPP_OK ? "" : mscclpp_result_string(r)));
        if (i == TP_UCX && tp_built(TP_UCX)) { /* GPU memory this UCX cannot reach */
            tp_ucx_staging_info(why, sizeof why);
            printf("       staging: %s\n", why);
        }
    }
    printf("Bootstraps: tcp");
#ifdef MSCCLPP_HAVE_MPI
    printf(", mpi");
#endif
    printf("\n");
}

/* Plan files of the registry, one line per folder in registration order (a call runs the
 * first registered plan that serves it). */
static void print_plan_groups(const exec_registry_t *reg)
{
    int i = 0;
    while (i < reg->count) {
        const char *f = mscclpp_plan_file(reg->entries[i].plan);
        size_t len = f && strrchr(f, '/') ? (size_t)(strrchr(f, '/') - f) : 0;
        int n = 1;
        while (i + n < reg->count) {
            const char *g = mscclpp_plan_file(reg->entries[i + n].plan);
            if (!g || !f || strncmp(f, g, len) || g[len] != '/' || strchr(g + len + 1, '/'))
                break;
            n++;
        }
        printf("    %d plan%s from %.*s/%s\n", n, n == 1 ? "" : "s", (int)len, f ? f : "?",
               reg->entries[i].shared_only
                   ? " (MSCCLPP_PLAN_DIRECT=auto: for calls whose ranks all pass shareable "
                     "buffers)"
                   : "");
        i += n;
    }
}

/* The multi-node layouts of a plan folder (multinode/<nodes>x<ranks per node>/). */
static void print_layouts(const char *dir)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/multinode", dir);
    DIR *d = opendir(path);
    if (!d) return;
    printf("    multi-node plans, registered first for a job of that layout: %s/", path);
    const char *sep = " ";
    struct dirent *e;
    int nodes, per_node;
    char end;
    while ((e = readdir(d)))
        if (sscanf(e->d_name, "%dx%d%c", &nodes, &per_node, &end) == 2)
            printf("%s%s", sep, e->d_name), sep = ", ";
    closedir(d);
    printf("\n");
}

/*
 * The plans in force and where they come from: what executor/plan_dirs.c registers for an
 * executor on the selected backend (the same function), then the plans made for the job and the
 * tuning table, which depend on the job (mscclpp-info --plan answers for one call).
 */
static void print_plans(void)
{
    const hal_ops_t *ops = NULL;
    const char *backend = hal_get(&ops) == MSCCLPP_OK ? ops->name : "host";
    const char *dir = exec_plan_dir();
    const char *from = *config_get(CFG_MSCCLPP_PLAN_DIR) ? "from MSCCLPP_PLAN_DIR"
                       : *self_build_plan_dir()
                           ? "the source tree's: this library runs from its build folder"
                           : "the installed plans";
    printf("Plans (an executor registers them in this order; a call runs the first that serves "
           "it):\n");
    printf("  plan folder: %s (%s)\n", *dir ? dir : "none", *dir ? from : "none compiled in");
    exec_registry_t reg = EXEC_REGISTRY_INIT;
    exec_plans_load_defaults(&reg, backend, 1, 1);
    print_plan_groups(&reg);
    if (reg.count == 0) printf("    no plan found\n");
    if (*dir) print_layouts(dir);
    exec_registry_fini(&reg);
    const char *cache = config_get(CFG_MSCCLPP_CACHE_DIR);
    printf("  Python DSL cache: %s\n",
           !*cache ? "not read (MSCCLPP_CACHE_DIR is unset)"
           : *config_get(CFG_MSCCLPP_PLAN_DIR) ? "not read (MSCCLPP_PLAN_DIR is set)"
                                                : "read after the plan folder (above)");
    const char *make = config_get(CFG_MSCCLPP_PLAN_MAKE);
    printf("  plans made for the job: %s (MSCCLPP_PLAN_MAKE=%s)\n",
           !strcmp(make, "off")     ? "none"
           : !strcmp(make, "first") ? "before the registered plans"
                                    : "after the registered plans",
           make);
    const char *tuning = config_get(CFG_MSCCLPP_TUNING_FILE);
    printf("  tuning table (applied before all of these): %s\n",
           !*tuning ? "~/.cache/mscclpp/tuning/<backend>-<device>-<nranks>.json when it exists"
           : !strcmp(tuning, "none") ? "none (MSCCLPP_TUNING_FILE=none)"
                                     : tuning);
    printf("  which plan serves a call: mscclpp-info --plan COLLECTIVE NRANKS SIZE\n");
}

/* Every variable with the value in force (as the library parses it), its default and meaning;
 * returns 1 when a value is invalid (library calls would fail), else 0. */
static int print_config(void)
{
    const config_entry_t *t = config_table();
    int bad = 0;
    printf("Configuration (environment variables; \"in force\" is what the library uses):\n");
    for (int i = 0; i < CFG__COUNT; i++) {
        char now[512];
        config_describe((config_id_t)i, now, sizeof now);
        if (i == CFG_MSCCLPP_HOST_SPIN && !config_invalid((config_id_t)i, NULL, 0) &&
            !(config_is_set((config_id_t)i) && config_get((config_id_t)i)[0]))
            snprintf(now, sizeof now, "chosen: %u polls for one poller per core of %u, %u when "
                     "they share cores (default)", base_wait_spin(1), base_cpu_count(),
                     base_wait_spin(base_cpu_count() + 1));
        if (!strncmp(now, "INVALID", 7)) bad = 1;
        printf("  %-24s in force: %s\n      %s (default: \"%s\")\n", t[i].name, now, t[i].doc,
               t[i].def);
    }
    return bad;
}

static void print_unknown_one(const char *name, const char *nearest, void *ctx)
{
    (void)ctx;
    if (nearest) printf("  %s: not a variable of libmscclpp (did you mean %s?)\n", name, nearest);
    else printf("  %s: not a variable of libmscclpp\n", name);
}

/* MSCCLPP_* variables set that nothing reads (typos); returns 1 when there is one. */
static int print_unknown(void)
{
    if (!config_unknown(NULL, NULL)) return 0;
    printf("Unknown variables (set in the environment, read by nothing):\n");
    config_unknown(print_unknown_one, NULL);
    return 1;
}

int main(int argc, char **argv)
{
    int want_build = 1, want_config = 1, want_backends = 1, want_plans = 1, only = 0;
    int major, minor, patch;
    mscclpp_version(&major, &minor, &patch);
    for (int i = 1; i < argc; i++) {
        int *sel = !strcmp(argv[i], "--build")      ? &want_build
                   : !strcmp(argv[i], "--config")   ? &want_config
                   : !strcmp(argv[i], "--backends") ? &want_backends
                   : !strcmp(argv[i], "--plans")    ? &want_plans
                                                    : NULL;
        if (sel) {
            if (!only++) want_build = want_config = want_backends = want_plans = 0;
            *sel = 1;
        } else if (!strcmp(argv[i], "--plan")) {
            return which_plan(argc, argv, i);
        } else if (!strcmp(argv[i], "--version") || !strcmp(argv[i], "-V")) {
            printf("mscclpp-info %s (libmscclpp %d.%d.%d)\n", PACKAGE_VERSION, major, minor,
                   patch);
            return 0;
        } else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            usage("mscclpp-info");
            return 0;
        } else {
            fprintf(stderr, "mscclpp-info: unknown option '%s' (expected --build, --backends, "
                            "--plans, --config, --plan, --version or --help)\n", argv[i]);
            return 2;
        }
    }
    printf("libmscclpp %d.%d.%d\n", major, minor, patch);
    if (want_build) print_build();
    if (want_backends) {
        print_backends();
        print_transports();
    }
    if (want_plans) print_plans();
    /* exit 1 when a variable is invalid or unknown, so scripts can check a job's environment */
    int bad = 0;
    if (want_config) {
        bad |= print_config();
        bad |= print_unknown();
    }
    return bad;
}
