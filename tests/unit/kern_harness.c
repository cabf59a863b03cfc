/* In-process multi-rank harness for the plan interpreter (see kern_harness.h). */
#include "tests/unit/kern_harness.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/debug.h"
#include "kernels/common/kern_dtype.h"
#include "kernels/common/kern_entry.h"

#define KH_GUARD 64
#define KH_GUARD_BYTE 0xa5

typedef struct {
    char *alloc; /* with guards */
    size_t bytes;
} kh_buf_t;

typedef struct {
    kh_buf_t out, in, scr;   /* in.alloc NULL when input lies inside output (or vice versa) */
    char *input, *output;
    void *state;
    size_t state_bytes;
    uint64_t *inbound, *expected; /* per memory channel */
    uint64_t dummy;               /* target of signals on unpaired channels */
    exec_memchan_t *chans;
    void **rbufs;
    exec_switch_t *sw;
    void ***members;
} kh_rank_t;

struct kh_world {
    const struct mscclpp_plan *plan;
    int n;
    kh_rank_t *r;
    size_t in_bytes, out_bytes;
    mscclpp_dtype_t dtype;
    kh_layout_t layout;
    void *fifo; /* a proxy FIFO every rank's launch gets (kh_set_fifo), or NULL */
    int nth;    /* host threads per block (kh_set_threads); 0 or 1: one */
    int max_threads; /* kh_set_kernel_max_threads; 0: off */
    int last_nth;    /* threads per block of the last kh_run */
    bool no_layout;  /* kh_set_no_layout */
};

void kh_set_no_layout(kh_world_t *w, bool off) { w->no_layout = off; }

void kh_set_fifo(kh_world_t *w, void *fifo) { w->fifo = fifo; }

void kh_set_threads(kh_world_t *w, int nth) { w->nth = nth; }

void kh_set_kernel_max_threads(kh_world_t *w, int max) { w->max_threads = max; }

int kh_last_threads(const kh_world_t *w) { return w->last_nth; }

struct mscclpp_plan *kh_plan_load(const char *json)
{
    struct mscclpp_plan *p = NULL;
    if (plan_load_json(json, strlen(json), "test", &p) != MSCCLPP_OK) {
        fprintf(stderr, "kh_plan_load: %s\n", mscclpp_last_error());
        return NULL;
    }
    return p;
}

struct mscclpp_plan *kh_plan_load_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "kh_plan_load_file: %s: cannot open\n", path);
        return NULL;
    }
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *text = malloc((size_t)n + 1);
    struct mscclpp_plan *p = NULL;
    if (text && fread(text, 1, (size_t)n, f) == (size_t)n) {
        text[n] = 0;
        if (plan_load_json(text, (size_t)n, path, &p) != MSCCLPP_OK)
            fprintf(stderr, "kh_plan_load_file: %s\n", mscclpp_last_error());
    }
    free(text);
    fclose(f);
    return p;
}

static void buf_free(kh_buf_t *b)
{
    free(b->alloc);
    b->alloc = NULL;
    b->bytes = 0;
}

static int buf_alloc(kh_buf_t *b, size_t bytes)
{
    buf_free(b);
    b->alloc = malloc(bytes + 2 * KH_GUARD);
    if (!b->alloc) return -1;
    memset(b->alloc, KH_GUARD_BYTE, KH_GUARD);
    memset(b->alloc + KH_GUARD, 0, bytes);
    memset(b->alloc + KH_GUARD + bytes, KH_GUARD_BYTE, KH_GUARD);
    b->bytes = bytes;
    return 0;
}

static char *buf_ptr(kh_buf_t *b) { return b->alloc ? b->alloc + KH_GUARD : NULL; }

static bool buf_guard_ok(const kh_buf_t *b)
{
    if (!b->alloc) return true;
    for (size_t i = 0; i < KH_GUARD; i++)
        if ((unsigned char)b->alloc[i] != KH_GUARD_BYTE ||
            (unsigned char)b->alloc[KH_GUARD + b->bytes + i] != KH_GUARD_BYTE)
            return false;
    return true;
}

void kh_world_reset(kh_world_t *w)
{
    for (int r = 0; r < w->n; r++) {
        kh_rank_t *k = &w->r[r];
        exec_state_init(w->plan, r, k->state, k->state_bytes);
        int nc = w->plan->gpus[r].n_chan[PLAN_CH_MEMORY];
        memset(k->inbound, 0, sizeof(uint64_t) * (size_t)(nc ? nc : 1));
        memset(k->expected, 0, sizeof(uint64_t) * (size_t)(nc ? nc : 1));
        if (k->scr.alloc) memset(buf_ptr(&k->scr), 0, k->scr.bytes);
    }
}

static int kh_default_nth; /* kh_set_default_threads */

void kh_set_default_threads(int nth) { kh_default_nth = nth; }

mscclpp_result_t kh_world_create(const struct mscclpp_plan *plan, kh_world_t **world)
{
    kh_world_t *w = calloc(1, sizeof(*w));
    if (!w) return MSCCLPP_ERR_NO_MEMORY;
    w->plan = plan;
    w->nth = kh_default_nth;
    w->n = plan->nranks;
    w->r = calloc((size_t)w->n, sizeof(kh_rank_t));
    for (int r = 0; r < w->n; r++) {
        kh_rank_t *k = &w->r[r];
        const plan_gpu_t *g = &plan->gpus[r];
        int nc = g->n_chan[PLAN_CH_MEMORY];
        k->state_bytes = exec_state_bytes(plan, r);
        k->state = aligned_alloc(64, k->state_bytes);
        k->inbound = calloc((size_t)(nc ? nc : 1), sizeof(uint64_t));
        k->expected = calloc((size_t)(nc ? nc : 1), sizeof(uint64_t));
        k->chans = calloc((size_t)(nc ? nc : 1), sizeof(exec_memchan_t));
        k->rbufs = calloc((size_t)(g->n_rbufs ? g->n_rbufs : 1), sizeof(void *));
        int ns = g->n_chan[PLAN_CH_SWITCH];
        k->sw = calloc((size_t)(ns ? ns : 1), sizeof(exec_switch_t));
        k->members = calloc((size_t)(ns ? ns : 1), sizeof(void **));
        for (int s = 0; s < ns; s++) {
            k->members[s] = calloc((size_t)g->switches[s].n_ranks, sizeof(void *));
            k->sw[s].n_members = g->switches[s].n_ranks;
            k->sw[s].members = k->members[s];
        }
    }
    /* pair the i-th memory channel A->B with the i-th channel B->A (plan-format §5.2) */
    for (int r = 0; r < w->n; r++) {
        const plan_gpu_t *g = &plan->gpus[r];
        kh_rank_t *k = &w->r[r];
        for (int c = 0; c < g->n_chan[PLAN_CH_MEMORY]; c++) {
            int peer = g->peers[PLAN_CH_MEMORY][c], ord = 0;
            for (int c2 = 0; c2 < c; c2++) ord += g->peers[PLAN_CH_MEMORY][c2] == peer;
            const plan_gpu_t *pg = &plan->gpus[peer];
            uint64_t *out = &k->dummy;
            for (int c2 = 0, seen = 0; c2 < pg->n_chan[PLAN_CH_MEMORY]; c2++)
                if (pg->peers[PLAN_CH_MEMORY][c2] == r && seen++ == ord) {
                    out = &w->r[peer].inbound[c2];
                    break;
                }
            k->chans[c].inbound = &k->inbound[c];
            k->chans[c].outbound = out;
            k->chans[c].expected = &k->expected[c];
        }
    }
    kh_world_reset(w);
    *world = w;
    return MSCCLPP_OK;
}

void kh_world_destroy(kh_world_t *w)
{
    if (!w) return;
    for (int r = 0; r < w->n; r++) {
        kh_rank_t *k = &w->r[r];
        buf_free(&k->in);
        buf_free(&k->out);
        buf_free(&k->scr);
        free(k->state);
        free(k->inbound);
        free(k->expected);
        free(k->chans);
        free(k->rbufs);
        for (int s = 0; s < w->plan->gpus[r].n_chan[PLAN_CH_SWITCH]; s++) free(k->members[s]);
        free(k->members);
        free(k->sw);
    }
    free(w->r);
    free(w);
}

static char *buf_of(kh_world_t *w, int r, int type)
{
    kh_rank_t *k = &w->r[r];
    return type == PLAN_BUF_INPUT ? k->input : type == PLAN_BUF_OUTPUT ? k->output : buf_ptr(&k->scr);
}

mscclpp_result_t kh_world_buffers(kh_world_t *w, size_t in_bytes, size_t out_bytes,
                                  mscclpp_dtype_t dtype, kh_layout_t layout)
{
    w->in_bytes = in_bytes;
    w->out_bytes = out_bytes;
    w->dtype = dtype;
    w->layout = layout;
    for (int r = 0; r < w->n; r++) {
        kh_rank_t *k = &w->r[r];
        uint64_t need = 0;
        CHECK(exec_scratch_bytes(w->plan, r, in_bytes, out_bytes, dtype, &need));
        if (need > k->scr.bytes || !k->scr.alloc)
            if (buf_alloc(&k->scr, need ? need : 64)) return MSCCLPP_ERR_NO_MEMORY;
        buf_free(&k->in);
        buf_free(&k->out);
        switch (layout) {
        case KH_SEPARATE:
            if (buf_alloc(&k->in, in_bytes) || buf_alloc(&k->out, out_bytes))
                return MSCCLPP_ERR_NO_MEMORY;
            k->input = buf_ptr(&k->in);
            k->output = buf_ptr(&k->out);
            break;
        case KH_INPLACE:
            if (buf_alloc(&k->out, out_bytes > in_bytes ? out_bytes : in_bytes))
                return MSCCLPP_ERR_NO_MEMORY;
            k->input = k->output = buf_ptr(&k->out);
            break;
        case KH_INPLACE_AG:
            if (buf_alloc(&k->out, out_bytes)) return MSCCLPP_ERR_NO_MEMORY;
            k->output = buf_ptr(&k->out);
            k->input = k->output + (size_t)r * (out_bytes / (size_t)w->n);
            break;
        case KH_INPLACE_RS:
            if (buf_alloc(&k->in, in_bytes)) return MSCCLPP_ERR_NO_MEMORY;
            k->input = buf_ptr(&k->in);
            k->output = k->input + (size_t)r * (in_bytes / (size_t)w->n);
            break;
        }
    }
    /* peer pointers: remote buffers and switch members */
    for (int r = 0; r < w->n; r++) {
        const plan_gpu_t *g = &w->plan->gpus[r];
        kh_rank_t *k = &w->r[r];
        for (int q = 0; q < g->n_rbufs; q++)
            k->rbufs[q] = buf_of(w, g->rbufs[q].owner, g->rbufs[q].buf);
        for (int s = 0; s < g->n_chan[PLAN_CH_SWITCH]; s++)
            for (int m = 0; m < g->switches[s].n_ranks; m++)
                k->members[s][m] = buf_of(w, g->switches[s].ranks[m], g->switches[s].buf);
    }
    return MSCCLPP_OK;
}

void *kh_input(kh_world_t *w, int rank) { return w->r[rank].input; }
void *kh_output(kh_world_t *w, int rank) { return w->r[rank].output; }
void *kh_scratch(kh_world_t *w, int rank) { return buf_ptr(&w->r[rank].scr); }
kern_state_t *kh_state(kh_world_t *w, int rank) { return w->r[rank].state; }

void kh_channel_counts(kh_world_t *w, int rank, int g, uint64_t *inbound, uint64_t *expected)
{
    *inbound = __atomic_load_n(&w->r[rank].inbound[g], __ATOMIC_ACQUIRE);
    *expected = w->r[rank].expected[g];
}

bool kh_guards_ok(kh_world_t *w, char *msg, size_t cap)
{
    for (int r = 0; r < w->n; r++) {
        kh_rank_t *k = &w->r[r];
        const char *bad = !buf_guard_ok(&k->in) ? "input" : !buf_guard_ok(&k->out) ? "output"
                          : !buf_guard_ok(&k->scr) ? "scratch" : NULL;
        if (bad) {
            snprintf(msg, cap, "rank %d wrote outside its %s buffer", r, bad);
            return false;
        }
    }
    return true;
}

typedef struct {
    const kern_args_t *args;
    int block, nblocks, nth;
} kh_job_t;

static void *kh_block_main(void *arg)
{
    kh_job_t *j = arg;
    if (j->nth > 1) {
        if (kern_host_run_block_simt(j->args, j->block, j->nblocks, j->nth) != 0) {
            fprintf(stderr, "kh_run: could not start %d threads for a block\n", j->nth);
            abort(); /* a test harness: the run cannot be judged */
        }
    } else {
        kern_host_run_block(j->args, j->block, j->nblocks);
    }
    return NULL;
}

mscclpp_result_t kh_lower(kh_world_t *w, int rank, mscclpp_redop_t op, mscclpp_packet_t packet,
                          uint64_t timeout_ns, exec_lowered_t **out)
{
    kh_rank_t *k = &w->r[rank];
    exec_resources_t res = {
        .input = k->input,
        .output = k->output,
        .scratch = buf_ptr(&k->scr),
        .scratch_bytes = k->scr.bytes,
        .state = k->state,
        .n_mem_chans = w->plan->gpus[rank].n_chan[PLAN_CH_MEMORY],
        .mem_chans = k->chans,
        .n_rbufs = w->plan->gpus[rank].n_rbufs,
        .rbufs = k->rbufs,
        .n_switch = w->plan->gpus[rank].n_chan[PLAN_CH_SWITCH],
        .switches = k->sw,
        .timeout_ns = timeout_ns,
        .host_spin = 200,
        .fifo = w->fifo,
        .max_threads = w->max_threads,
    };
    return exec_lower(w->plan, rank, w->in_bytes, w->out_bytes, w->dtype, op, packet, &res, out);
}

mscclpp_result_t kh_run(kh_world_t *w, mscclpp_redop_t op, mscclpp_packet_t packet,
                        uint64_t timeout_ns)
{
    mscclpp_result_t ret = MSCCLPP_OK;
    exec_lowered_t **lw = calloc((size_t)w->n, sizeof(*lw));
    int total = 0;
    for (int r = 0; r < w->n; r++) {
        ret = kh_lower(w, r, op, packet, timeout_ns, &lw[r]);
        if (ret != MSCCLPP_OK) goto free_lowered;
        if (w->no_layout) lw[r]->args.blk_ops = lw[r]->args.blk_descs = lw[r]->args.blk_ids = 0;
        total += lw[r]->nblocks;
    }
    {
        pthread_t *th = calloc((size_t)total, sizeof(pthread_t));
        kh_job_t *jobs = calloc((size_t)total, sizeof(kh_job_t));
        int t = 0;
        for (int r = 0; r < w->n; r++)
            for (int b = 0; b < lw[r]->nblocks; b++, t++) {
                /* under a kernel maximum a block runs as the GPU would launch it */
                const int nth = w->max_threads > 0 ? lw[r]->nthreads : w->nth;
                jobs[t] = (kh_job_t){&lw[r]->args, b, lw[r]->nblocks, nth};
                w->last_nth = nth;
                if (pthread_create(&th[t], NULL, kh_block_main, &jobs[t])) {
                    kh_block_main(&jobs[t]); /* run inline if threads run out */
                    th[t] = 0;
                }
            }
        for (t = 0; t < total; t++)
            if (th[t]) pthread_join(th[t], NULL);
        free(th);
        free(jobs);
    }
    for (int r = 0; r < w->n && ret == MSCCLPP_OK; r++)
        ret = exec_state_error(w->r[r].state, w->plan);
free_lowered:
    for (int r = 0; r < w->n; r++) exec_lowered_free(lw[r]);
    free(lw);
    return ret;
}

/* ---- elements ---------------------------------------------------------------------------- */

size_t kh_dtype_size(mscclpp_dtype_t dt) { return kern_dtype_size((uint32_t)dt); }

double kh_get(const void *buf, size_t i, mscclpp_dtype_t dt)
{
    switch (dt) {
    case MSCCLPP_FLOAT32: return ((const float *)buf)[i];
    case MSCCLPP_FLOAT16: return kern_f16_to_f32(((const uint16_t *)buf)[i]);
    case MSCCLPP_BFLOAT16: return kern_bf16_to_f32(((const uint16_t *)buf)[i]);
    case MSCCLPP_INT32: return ((const int32_t *)buf)[i];
    case MSCCLPP_UINT32: return ((const uint32_t *)buf)[i];
    case MSCCLPP_INT8: return ((const int8_t *)buf)[i];
    case MSCCLPP_UINT8: return ((const uint8_t *)buf)[i];
    case MSCCLPP_FLOAT64: return ((const double *)buf)[i];
    case MSCCLPP_FP8_E4M3: return kern_e4m3_to_f32(((const uint8_t *)buf)[i]);
    case MSCCLPP_FP8_E5M2: return kern_e5m2_to_f32(((const uint8_t *)buf)[i]);
    case MSCCLPP_INT64: return (double)((const int64_t *)buf)[i];
    case MSCCLPP_UINT64: return (double)((const uint64_t *)buf)[i];
    default: return NAN;
    }
}

static int64_t wrap_int(double v, mscclpp_dtype_t dt)
{
    int64_t x = (int64_t)v;
    switch (dt) {
    case MSCCLPP_INT32: return (int32_t)(uint32_t)x;
    case MSCCLPP_UINT32: return (uint32_t)x;
    case MSCCLPP_INT8: return (int8_t)(uint8_t)x;
    case MSCCLPP_UINT8: return (uint8_t)x;
    default: return x;
    }
}

void kh_set(void *buf, size_t i, mscclpp_dtype_t dt, double v)
{
    switch (dt) {
    case MSCCLPP_FLOAT32: ((float *)buf)[i] = (float)v; break;
    case MSCCLPP_FLOAT16: ((uint16_t *)buf)[i] = kern_f32_to_f16((float)v); break;
    case MSCCLPP_BFLOAT16: ((uint16_t *)buf)[i] = kern_f32_to_bf16((float)v); break;
    case MSCCLPP_INT32: ((int32_t *)buf)[i] = (int32_t)wrap_int(v, dt); break;
    case MSCCLPP_UINT32: ((uint32_t *)buf)[i] = (uint32_t)wrap_int(v, dt); break;
    case MSCCLPP_INT8: ((int8_t *)buf)[i] = (int8_t)wrap_int(v, dt); break;
    case MSCCLPP_UINT8: ((uint8_t *)buf)[i] = (uint8_t)wrap_int(v, dt); break;
    case MSCCLPP_FLOAT64: ((double *)buf)[i] = v; break;
    case MSCCLPP_FP8_E4M3: ((uint8_t *)buf)[i] = kern_f32_to_e4m3((float)v); break;
    case MSCCLPP_FP8_E5M2: ((uint8_t *)buf)[i] = kern_f32_to_e5m2((float)v); break;
    /* 64-bit patterns are exact doubles and their results stay so (kh_pattern) */
    case MSCCLPP_INT64: ((int64_t *)buf)[i] = (int64_t)v; break;
    case MSCCLPP_UINT64: ((uint64_t *)buf)[i] = (uint64_t)v; break;
    default: break;
    }
}

static bool is_int(mscclpp_dtype_t dt)
{
    return dt == MSCCLPP_INT32 || dt == MSCCLPP_UINT32 || dt == MSCCLPP_INT8 ||
           dt == MSCCLPP_UINT8;
}

static bool is_int64(mscclpp_dtype_t dt) { return dt == MSCCLPP_INT64 || dt == MSCCLPP_UINT64; }

double kh_eps(mscclpp_dtype_t dt)
{
    switch (dt) {
    case MSCCLPP_FLOAT32: return ldexp(1, -23);
    case MSCCLPP_FLOAT16: return ldexp(1, -10);
    case MSCCLPP_BFLOAT16: return ldexp(1, -7);
    case MSCCLPP_FLOAT64: return ldexp(1, -52);
    case MSCCLPP_FP8_E4M3: return ldexp(1, -3);
    case MSCCLPP_FP8_E5M2: return ldexp(1, -2);
    default: return 0;
    }
}

double kh_pattern(int r, size_t i, int it, mscclpp_dtype_t dt, mscclpp_redop_t op)
{
    uint64_t h = (uint64_t)r * 0x9e3779b97f4a7c15ull + (uint64_t)i * 0xbf58476d1ce4e5b9ull +
                 (uint64_t)it * 0x94d049bb133111ebull;
    h ^= h >> 31;
    h *= 0xd6e8feb86659fd39ull;
    h ^= h >> 29;
    if (is_int64(dt)) {
        /* past 32 bits, yet exact in a double through every reduction of up to 256 ranks:
         * sums of values under 2^44; min/max over the whole range with the low 12 bits clear
         * (the sign bit of uint64 set half the time); products of one value over 2^32 (rank
         * 0's) with -1 and 1 */
        bool u = dt == MSCCLPP_UINT64;
        if (op == MSCCLPP_PROD) {
            if (r == 0) return (double)((h >> 24) | (1ull << 32)) * (u || !(h & 1) ? 1 : -1);
            return u || (h & 2) ? 1 : -1;
        }
        if (op == MSCCLPP_MIN || op == MSCCLPP_MAX) {
            uint64_t b = h & ~0xfffull;
            return u ? (double)b : (double)(int64_t)b;
        }
        h &= (1ull << 44) - 1;
        return u ? (double)h : (double)h - (double)(1ull << 43);
    }
    if (is_int(dt)) {
        /* full range: sums and products wrap */
        switch (dt) {
        case MSCCLPP_INT32: return (double)(int32_t)(uint32_t)h;
        case MSCCLPP_UINT32: return (double)(uint32_t)h;
        case MSCCLPP_INT8: return (double)(int8_t)(uint8_t)h;
        default: return (double)(uint8_t)h;
        }
    }
    if (op == MSCCLPP_PROD) {
        static const double v[4] = {-2, -1, 1, 2};
        return v[h % 4];
    }
    /* halves in [-4, 4]: exact in every float type */
    return ((double)(h % 17) - 8) / 2;
}

double kh_apply(double a, double b, mscclpp_dtype_t dt, mscclpp_redop_t op)
{
    double v;
    switch (op) {
    case MSCCLPP_PROD:
        if (is_int(dt)) {
            uint64_t x = (uint64_t)(int64_t)a * (uint64_t)(int64_t)b;
            return (double)wrap_int((double)(int64_t)(uint32_t)x, dt);
        }
        v = a * b;
        break;
    case MSCCLPP_MIN: v = a < b ? a : b; break;
    case MSCCLPP_MAX: v = a > b ? a : b; break;
    default:
        v = a + b;
        if (is_int(dt)) return (double)wrap_int(v, dt);
        break;
    }
    return v;
}

static bool close_enough(double got, double want, mscclpp_dtype_t dt, int n)
{
    if (is_int(dt) || is_int64(dt)) return got == want;
    if (isnan(want)) return isnan(got);
    return fabs(got - want) <= kh_eps(dt) * n * (1 + fabs(want));
}

mscclpp_result_t kh_check_collective(kh_world_t *w, kh_coll_t coll, size_t count,
                                     mscclpp_dtype_t dt, mscclpp_redop_t op,
                                     mscclpp_packet_t packet, bool inplace, int iters,
                                     char *msg, size_t cap)
{
    return kh_check_collective_ref(w, coll, count, dt, op,
                                   op == MSCCLPP_REDOP_PLAN ? MSCCLPP_SUM : op, packet, inplace,
                                   iters, msg, cap);
}

mscclpp_result_t kh_check_collective_ref(kh_world_t *w, kh_coll_t coll, size_t count,
                                         mscclpp_dtype_t dt, mscclpp_redop_t op,
                                         mscclpp_redop_t ref, mscclpp_packet_t packet,
                                         bool inplace, int iters, char *msg, size_t cap)
{
    int n = w->n;
    size_t es = kh_dtype_size(dt), in_n, out_n;
    kh_layout_t layout = KH_SEPARATE;
    switch (coll) {
    case KH_ALLREDUCE: in_n = out_n = count; layout = inplace ? KH_INPLACE : KH_SEPARATE; break;
    case KH_ALLGATHER: in_n = count; out_n = count * (size_t)n;
        layout = inplace ? KH_INPLACE_AG : KH_SEPARATE; break;
    case KH_REDUCESCATTER: in_n = count * (size_t)n; out_n = count;
        layout = inplace ? KH_INPLACE_RS : KH_SEPARATE; break;
    default: in_n = out_n = count * (size_t)n; layout = inplace ? KH_INPLACE : KH_SEPARATE; break;
    }
    CHECK(kh_world_buffers(w, in_n * es, out_n * es, dt, layout));
    mscclpp_redop_t eff = ref;
    for (int it = 0; it < iters; it++) {
        for (int r = 0; r < n; r++) {
            if (!inplace) memset(kh_output(w, r), 0x5a, out_n * es);
            for (size_t i = 0; i < in_n; i++)
                kh_set(kh_input(w, r), i, dt, kh_pattern(r, i, it, dt, eff));
        }
        mscclpp_result_t ret = kh_run(w, op, packet, 0);
        if (ret != MSCCLPP_OK) {
            snprintf(msg, cap, "iteration %d: launch failed: %s", it, mscclpp_last_error());
            return ret;
        }
        if (!kh_guards_ok(w, msg, cap)) return MSCCLPP_ERR_INTERNAL;
        for (int r = 0; r < n; r++) {
            const void *out = kh_output(w, r);
            for (size_t i = 0; i < out_n; i++) {
                double want;
                int nred = 1;
                switch (coll) {
                case KH_ALLREDUCE:
                case KH_REDUCESCATTER: {
                    size_t src_i = coll == KH_ALLREDUCE ? i : (size_t)r * count + i;
                    /* round each input as it was stored, then reduce in double */
                    double tmp[1];
                    want = 0;
                    for (int s = 0; s < n; s++) {
                        char cell[8];
                        kh_set(cell, 0, dt, kh_pattern(s, src_i, it, dt, eff));
                        tmp[0] = kh_get(cell, 0, dt);
                        want = s == 0 ? tmp[0] : kh_apply(want, tmp[0], dt, eff);
                    }
                    nred = n;
                    break;
                }
                case KH_ALLGATHER: {
                    char cell[8];
                    kh_set(cell, 0, dt, kh_pattern((int)(i / count), i % count, it, dt, eff));
                    want = kh_get(cell, 0, dt);
                    break;
                }
                default: {
                    int s = (int)(i / count);
                    char cell[8];
                    kh_set(cell, 0, dt, kh_pattern(s, (size_t)r * count + i % count, it, dt, eff));
                    want = kh_get(cell, 0, dt);
                    break;
                }
                }
                /* the stored result is rounded to the type once */
                if (!is_int(dt)) {
                    char cell[8];
                    kh_set(cell, 0, dt, want);
                    if (nred == 1) want = kh_get(cell, 0, dt);
                }
                double got = kh_get(out, i, dt);
                bool ok = nred == 1 ? (got == want || (isnan(got) && isnan(want)))
                                    : close_enough(got, want, dt, nred);
                if (!ok) {
                    snprintf(msg, cap,
                             "%s: iteration %d rank %d element %zu of %zu: got %.9g, want %.9g",
                             mscclpp_dtype_name(dt), it, r, i, out_n, got, want);
                    return MSCCLPP_ERR_INTERNAL;
                }
            }
        }
    }
    return MSCCLPP_OK;
}
