/* The spin choice of the one wait policy (base/wait.h), from what a rank can see. */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "base/config.h"
#include "base/wait.h"

static pthread_once_t once = PTHREAD_ONCE_INIT;
static unsigned cpus = 1;
static unsigned local_ranks; /* as the launcher announces them; 0: unknown */
static int64_t forced = -1;  /* MSCCLPP_HOST_SPIN; -1: not set */
static uint64_t slice_ns;    /* MSCCLPP_HOST_SLICE_US in ns; 0: the kernel's */
__thread base_wait_tls_t base_wait_tls;

/* Ranks on this node as the launcher announces them (MPICH/Hydra, Open MPI, Slurm); 0: unknown. */
static unsigned launcher_local_ranks(void)
{
    static const char *vars[] = {"MPI_LOCALNRANKS", "OMPI_COMM_WORLD_LOCAL_SIZE",
                                 "SLURM_NTASKS_PER_NODE"};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
        const char *v = getenv(vars[i]);
        char *end = NULL;
        long n = v ? strtol(v, &end, 10) : 0;
        if (v && end != v && *end == '\0' && n > 0 && n < 1000000) return (unsigned)n;
    }
    return 0;
}

/* Read once: waits start in hot paths (every launch hand-off), where getenv and a syscall per
 * wait would cost more than the spin they choose. */
static void read_once(void)
{
    cpu_set_t set;
    long n = 0;
    if (sched_getaffinity(0, sizeof set, &set) == 0) n = CPU_COUNT(&set);
    if (n <= 0) n = sysconf(_SC_NPROCESSORS_ONLN);
    cpus = n > 0 ? (unsigned)n : 1u;
    local_ranks = launcher_local_ranks();
    if (config_is_set(CFG_MSCCLPP_HOST_SPIN) && config_get(CFG_MSCCLPP_HOST_SPIN)[0])
        forced = config_get_int(CFG_MSCCLPP_HOST_SPIN); /* -1 when invalid: config_check says */
    int64_t us = config_get_int(CFG_MSCCLPP_HOST_SLICE_US);
    slice_ns = us > 0 ? (uint64_t)us * 1000u : 0;
}

/* The calling thread's slice: sched_getattr, then sched_setattr with runtime `ns` (glibc 2.36
 * has no wrappers; the struct is the kernel's sched_attr, version 0). */
static void ask_slice(uint64_t ns)
{
    struct {
        uint32_t size, policy;
        uint64_t flags;
        int32_t nice;
        uint32_t priority;
        uint64_t runtime, deadline, period;
    } a = {0};
    if (syscall(SYS_sched_getattr, 0, &a, (unsigned)sizeof a, 0u) != 0) return;
    if (a.policy != SCHED_OTHER) return; /* real-time, batch or idle: not ours to change */
    a.size = (uint32_t)sizeof a;
    a.flags = 0;
    a.runtime = ns;
    (void)syscall(SYS_sched_setattr, 0, &a, 0u);
}

void base_wait_thread_slice(void)
{
    pthread_once(&once, read_once);
    if (slice_ns) ask_slice(slice_ns);
}

unsigned base_cpu_count(void)
{
    pthread_once(&once, read_once);
    return cpus;
}

uint32_t base_wait_spin(unsigned pollers)
{
    pthread_once(&once, read_once);
    if (forced >= 0) return (uint32_t)forced;
    if (pollers == 0) pollers = local_ranks;
    if (pollers == 0) return BASE_WAIT_SPIN_SHARED;
    return pollers <= cpus ? BASE_WAIT_SPIN_OWN_CORE : BASE_WAIT_SPIN_SHARED;
}
