/*
 * The interpreter's phase trace (MSCCLPP_KERN_TRACE=PREFIX; kernels/common/kern_args.h, "Phase
 * trace"; docs/gpu.md): where the time of one launch goes, block by block, stamped by the
 * device's own clock. When the variable is set the executor allocates one host-visible table
 * (the HAL's pinned, device-mapped memory; ordinary memory on the host backend) of
 * KERN_MAX_BLOCKS rows, passes it to every launch (kern_args_t.trace; a launch overwrites the
 * rows of its blocks) and keeps what the last launch was. At mscclpp_executor_destroy, once the
 * executor's stream work is drained, it writes PREFIX.rank<R>.txt with that launch's rows and
 * prints one line per phase (min and max over the blocks) to stderr. Unset: nothing is
 * allocated or written and every launch carries NULL.
 *
 * The file (tests/gpu/kern_trace.py reads it): '#' comments, then "key value" lines (rank,
 * plan, collective, in_bytes, out_bytes, blocks, threads, launches, base_ns: the earliest entry
 * stamp, on the device's clock), then one line per block:
 *   block B entry=0.000 staged=U fenced=U op0:NAME=U ... exit=U
 * U in microseconds from base_ns, "-" for a point the block did not reach. A CUDA graph keeps
 * the table pointer it was captured with: replays stamp the same table (not needed: the trace
 * is for direct launches).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/config.h"
#include "base/debug.h"
#include "executor/exec.h"

struct exec_trace {
    uint64_t *table; /* KERN_MAX_BLOCKS * KERN_TRACE_WORDS words, host-visible */
    char prefix[512];
    /* the last launch */
    char plan[128], collective[24];
    uint64_t in_bytes, out_bytes, launches;
    int nblocks, nthreads;
};

#define TRACE_TABLE_BYTES ((size_t)KERN_MAX_BLOCKS * KERN_TRACE_WORDS * sizeof(uint64_t))

mscclpp_result_t exec_trace_attach(mscclpp_executor_t *ex)
{
    const char *prefix = config_get(CFG_MSCCLPP_KERN_TRACE);
    ex->trace = NULL;
    if (!prefix || !*prefix) return MSCCLPP_OK;
    if (strlen(prefix) >= sizeof ex->trace->prefix - 32)
        return ERR_ARG("MSCCLPP_KERN_TRACE: the path prefix is longer than %zu characters; "
                       "set a shorter one (the files are PREFIX.rank<R>.txt)",
                       sizeof ex->trace->prefix - 32);
    exec_trace_t *t = calloc(1, sizeof *t);
    if (!t)
        return ERR(MSCCLPP_ERR_NO_MEMORY, "rank %d: MSCCLPP_KERN_TRACE: out of memory",
                   ex->comm->rank);
    mscclpp_result_t r = ex->hal->host_alloc(TRACE_TABLE_BYTES, (void **)&t->table);
    if (r != MSCCLPP_OK) {
        free(t);
        return ERR(r, "rank %d: MSCCLPP_KERN_TRACE: no host-mapped table of %zu bytes",
                   ex->comm->rank, TRACE_TABLE_BYTES);
    }
    memset(t->table, 0, TRACE_TABLE_BYTES);
    snprintf(t->prefix, sizeof t->prefix, "%s", prefix);
    ex->trace = t;
    return MSCCLPP_OK;
}

void exec_trace_launch(mscclpp_executor_t *ex, const exec_context_t *c, exec_lowcache_t *l,
                       int nthreads)
{
    exec_trace_t *t = ex->trace;
    l->low->args.trace = t ? t->table : NULL;
    if (!t) return;
    snprintf(t->plan, sizeof t->plan, "%s", c->plan->name ? c->plan->name : "?");
    snprintf(t->collective, sizeof t->collective, "%s",
             c->plan->collective ? c->plan->collective : "?");
    t->in_bytes = l->in_bytes;
    t->out_bytes = l->out_bytes;
    t->nblocks = l->low->nblocks;
    t->nthreads = nthreads;
    t->launches++;
}

/* Word w of a block's row when this launch stamped it, else 0: the kernel clears nothing, and
 * a stamp older than the row's entry is an earlier launch's (kern_args.h, "Phase trace"). */
static uint64_t stamp(const uint64_t *row, uint32_t w)
{
    return row[w] != 0 && row[w] >= row[KERN_TRACE_ENTRY] ? row[w] : 0;
}

/* one point of a row, in microseconds from base ("-": not reached) */
static void put_us(FILE *f, const char *key, uint64_t ns, uint64_t base)
{
    if (ns == 0 || ns < base) fprintf(f, " %s=-", key);
    else fprintf(f, " %s=%.3f", key, (double)(ns - base) / 1e3);
}

/* min and max over the blocks of point w (microseconds from base), -1 when no block has it */
static void phase_range(const exec_trace_t *t, uint32_t w, uint64_t base, double *lo, double *hi)
{
    *lo = *hi = -1;
    for (int b = 0; b < t->nblocks; b++) {
        uint64_t ns = stamp(t->table + (size_t)b * KERN_TRACE_WORDS, w);
        if (ns == 0 || ns < base) continue;
        double us = (double)(ns - base) / 1e3;
        if (*lo < 0 || us < *lo) *lo = us;
        if (us > *hi) *hi = us;
    }
}

static mscclpp_result_t write_file(const mscclpp_executor_t *ex, const exec_trace_t *t,
                                   uint64_t base)
{
    char path[sizeof t->prefix + 32];
    snprintf(path, sizeof path, "%s.rank%d.txt", t->prefix, ex->comm->rank);
    FILE *f = fopen(path, "w");
    if (!f)
        return ERR(MSCCLPP_ERR_SYSTEM, "rank %d: MSCCLPP_KERN_TRACE: cannot write %s: %s",
                   ex->comm->rank, path, strerror(errno));
    fprintf(f, "# mscclpp interpreter phase trace (MSCCLPP_KERN_TRACE): the executor's last "
               "launch, microseconds from base_ns\n");
    fprintf(f,
            "rank %d\nplan %s\ncollective %s\nin_bytes %" PRIu64 "\nout_bytes %" PRIu64
            "\nblocks %d\nthreads %d\nlaunches %" PRIu64 "\nbase_ns %" PRIu64 "\n",
            ex->comm->rank, t->plan, t->collective, t->in_bytes, t->out_bytes, t->nblocks,
            t->nthreads, t->launches, base);
    for (int b = 0; b < t->nblocks; b++) {
        const uint64_t *row = t->table + (size_t)b * KERN_TRACE_WORDS;
        fprintf(f, "block %d", b);
        put_us(f, "entry", row[KERN_TRACE_ENTRY], base);
        put_us(f, "staged", stamp(row, KERN_TRACE_STAGED), base);
        put_us(f, "fenced", stamp(row, KERN_TRACE_FENCED), base);
        for (uint32_t k = 0; k < KERN_TRACE_OPS; k++) {
            uint64_t info = row[KERN_TRACE_INFO + k];
            if (!(info & KERN_TRACE_INFO_SET) || !stamp(row, KERN_TRACE_OP + k)) continue;
            char key[48];
            snprintf(key, sizeof key, "op%u:%s", k, exec_op_name((int)((info >> 16) & 0xff)));
            put_us(f, key, row[KERN_TRACE_OP + k], base);
        }
        put_us(f, "exit", stamp(row, KERN_TRACE_EXIT), base);
        fputc('\n', f);
    }
    if (fclose(f) != 0)
        return ERR(MSCCLPP_ERR_SYSTEM, "rank %d: MSCCLPP_KERN_TRACE: writing %s failed: %s",
                   ex->comm->rank, path, strerror(errno));
    /* one line per phase: when the blocks reached it */
    static const struct {
        uint32_t w;
        const char *name;
    } phase[] = {
        {KERN_TRACE_STAGED, "staged"}, {KERN_TRACE_FENCED, "fenced"}, {KERN_TRACE_EXIT, "exit"}};
    for (size_t i = 0; i < sizeof phase / sizeof phase[0]; i++) {
        double lo, hi;
        phase_range(t, phase[i].w, base, &lo, &hi);
        if (lo < 0) /* no block got there: a refused plan stamps only its entry */
            fprintf(stderr, "mscclpp kern trace rank %d %s (%d blocks): %s not reached\n",
                    ex->comm->rank, t->plan, t->nblocks, phase[i].name);
        else
            fprintf(stderr, "mscclpp kern trace rank %d %s (%d blocks): %s at %.3f .. %.3f us\n",
                    ex->comm->rank, t->plan, t->nblocks, phase[i].name, lo, hi);
    }
    for (uint32_t k = 0; k < KERN_TRACE_OPS; k++) {
        double lo, hi;
        phase_range(t, KERN_TRACE_OP + k, base, &lo, &hi);
        if (lo < 0) continue;
        fprintf(stderr, "mscclpp kern trace rank %d %s (%d blocks): op%u ends at %.3f .. %.3f us\n",
                ex->comm->rank, t->plan, t->nblocks, k, lo, hi);
    }
    return MSCCLPP_OK;
}

mscclpp_result_t exec_trace_finish(mscclpp_executor_t *ex)
{
    exec_trace_t *t = ex->trace;
    mscclpp_result_t r = MSCCLPP_OK;
    if (!t) return MSCCLPP_OK;
    if (t->launches > 0 && t->nblocks > 0 && t->nblocks <= KERN_MAX_BLOCKS) {
        uint64_t base = 0; /* the earliest entry */
        for (int b = 0; b < t->nblocks; b++) {
            uint64_t e = t->table[(size_t)b * KERN_TRACE_WORDS + KERN_TRACE_ENTRY];
            if (e != 0 && (base == 0 || e < base)) base = e;
        }
        r = write_file(ex, t, base);
    }
    ex->hal->host_free(t->table);
    free(t);
    ex->trace = NULL;
    return r;
}
