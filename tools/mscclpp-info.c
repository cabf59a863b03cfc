/*
 * mscclpp-info: what this build of libmscclpp finds on this machine — backends and their
 * devices, transports, and every MSCCLPP_* variable with its value, default and meaning.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "base/config.h"
#include "base/wait.h"
#include "transports/transport.h"
#include "hal/hal.h"
#include "mscclpp/mscclpp.h"

static void usage(const char *prog)
{
    printf("usage: %s [--config|--backends|--help]\n"
           "Prints the backends and devices libmscclpp finds, the transports built in, and the\n"
           "MSCCLPP_* environment variables (value, default, meaning).\n",
           prog);
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

int main(int argc, char **argv)
{
    int want_config = 1, want_backends = 1;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--config")) want_backends = 0;
        else if (!strcmp(argv[i], "--backends")) want_config = 0;
        else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            usage(argv[0]);
            return 0;
        } else {
            fprintf(stderr, "mscclpp-info: unknown option '%s'\n", argv[i]);
            usage(argv[0]);
            return 2;
        }
    }
    int major, minor, patch;
    mscclpp_version(&major, &minor, &patch);
    printf("libmscclpp %d.%d.%d\n", major, minor, patch);
    if (want_backends) {
        print_backends();
        print_transports();
    }
    /* exit 1 when a variable is invalid, so scripts can check a job's environment first */
    if (want_config && print_config()) return 1;
    return 0;
}
