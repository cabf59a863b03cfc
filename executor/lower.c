/*
 * Lowering of a loaded plan into the interpreter's launch arguments (see lower.h for the
 * executor's side and kernels/common/kern_args.h for the layout).
 *
 * Chunk -> byte rules (plan-format §3.1-3.2, 3.7, 3.8, with our decisions):
 *   - sizes need only be multiples of the element size;
 *   - chunk size CS = S/C when C divides S into pieces that are multiples of the element size
 *     (of max(4, element size) when the plan moves packets: packet units are 8-byte aligned)
 *     -- identical to the reference whenever the reference accepts the size -- otherwise
 *     ceil(S/C) rounded up to lcm(buffer_alignment, that granule); chunk c of an input or
 *     output buffer is [c*CS, min((c+1)*CS, S)) (may be empty), scratch chunk c is at c*CS;
 *   - allgather / reducescatter / alltoall sides holding one block per rank use the grouped
 *     layout (lower.h, exec_chunk_bytes), so rounding never moves a rank's block;
 *   - an op moves, per descriptor, the minimum of its descriptors' lengths (tails work); plan
 *     ops whose pairs or chunks can differ in length become several kern ops (see "splitting");
 *   - thread-block-group slices split that length in units of the alignment, the byte tail
 *     going to the last slice; pipeline bodies are pipeline-aware, clamped at 0;
 *   - every descriptor is checked against the size of the buffer it reaches, so a lowered plan
 *     never touches memory outside its buffers.
 */
#include "executor/lower.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/config.h"
#include "base/debug.h"

_Static_assert((int)KERN_OP__COUNT == (int)PLAN_OP__COUNT, "kernel and plan op tables differ");
_Static_assert((int)KERN_OP_GSTOREPKT == (int)PLAN_OP_GSTOREPKT &&
                   (int)KERN_OP_PIPELINE == (int)PLAN_OP_PIPELINE &&
                   (int)KERN_OP_RRES == (int)PLAN_OP_RRES &&
                   (int)KERN_OP_SEM_ACQUIRE == (int)PLAN_OP_SEM_ACQUIRE,
               "kernel op codes must equal plan op codes");
_Static_assert((int)KERN_LOC_IN == (int)PLAN_BUF_INPUT && (int)KERN_LOC_OUT == (int)PLAN_BUF_OUTPUT &&
                   (int)KERN_LOC_SCR == (int)PLAN_BUF_SCRATCH,
               "local descriptor locations are plan buffer types");
_Static_assert((int)KERN_DT_E5M2 == (int)MSCCLPP_FP8_E5M2 &&
                   (int)KERN_DT_F64 == (int)MSCCLPP_FLOAT64 &&
                   (int)KERN_DT__COUNT == (int)MSCCLPP_DTYPE_COUNT,
               "kernel dtypes are mscclpp_dtype_t");
_Static_assert((int)KERN_RED_MAX == (int)MSCCLPP_MAX && (int)KERN_RED_PROD == (int)MSCCLPP_PROD,
               "kernel reduce ops are mscclpp_redop_t");
_Static_assert(KERN_MAX_BARRIERS == PLAN_MAX_BARRIERS, "barrier count");
_Static_assert(KERN_MAX_PTRS >= PLAN_MAX_SWITCH_MEMBERS && KERN_MAX_PTRS >= PLAN_MAX_DESCS,
               "pointer arrays of one op");

static const char *const op_names[PLAN_OP__COUNT] = {
    "nop",       "barrier", "put",    "ppkt",      "rppkt",     "pws",         "pwsf",
    "get",       "copy",    "cpkt",   "upkt",      "signal",    "wait",        "flush",
    "re",        "repkt",   "recpkt", "res",       "respkt",    "recspkt",     "rre",
    "rres",      "glres",   "rlxsignal", "rlxwait", "pipeline", "sem_release", "sem_acquire",
    "gstore",    "gstorepkt", "glre"};

const char *exec_op_name(int type)
{
    return type >= 0 && type < PLAN_OP__COUNT ? op_names[type] : "?";
}

static const char *buf_name(int buf)
{
    return buf == PLAN_BUF_INPUT ? "input" : buf == PLAN_BUF_OUTPUT ? "output" : "scratch";
}

static uint64_t elem_size(mscclpp_dtype_t dt)
{
    switch (dt) {
    case MSCCLPP_FLOAT64: return 8;
    case MSCCLPP_FLOAT32:
    case MSCCLPP_INT32:
    case MSCCLPP_UINT32: return 4;
    case MSCCLPP_FLOAT16:
    case MSCCLPP_BFLOAT16: return 2;
    case MSCCLPP_INT8:
    case MSCCLPP_UINT8:
    case MSCCLPP_FP8_E4M3:
    case MSCCLPP_FP8_E5M2: return 1;
    default: return 0;
    }
}

static uint64_t gcd64(uint64_t a, uint64_t b)
{
    while (b) {
        uint64_t t = a % b;
        a = b;
        b = t;
    }
    return a;
}

static uint64_t round_up(uint64_t v, uint64_t a) { return a ? (v + a - 1) / a * a : v; }

static bool op_is_packet(int type)
{
    switch (type) {
    case PLAN_OP_PPKT:
    case PLAN_OP_RPPKT:
    case PLAN_OP_CPKT:
    case PLAN_OP_UPKT:
    case PLAN_OP_REPKT:
    case PLAN_OP_RECPKT:
    case PLAN_OP_RESPKT:
    case PLAN_OP_RECSPKT:
    case PLAN_OP_GSTOREPKT: return true;
    default: return false;
    }
}

/* Packet ops anywhere in the plan (any rank) double the scratch, as protocol "LL" does. */
static bool plan_uses_packets(const struct mscclpp_plan *plan)
{
    if (plan->packet_protocol) return true;
    for (int r = 0; r < plan->nranks; r++)
        for (int b = 0; b < plan->gpus[r].n_blocks; b++) {
            const plan_block_t *blk = &plan->gpus[r].blocks[b];
            for (int i = 0; i < blk->n_ops; i++)
                if (op_is_packet(blk->ops[i].type)) return true;
        }
    return false;
}

/* Alignment unit of chunk sizes and tbg slices. */
/*
 * Granule of chunk offsets: the element size, and 4 bytes (one packet payload word) when the
 * plan moves packets, so that every packet unit is 8-byte aligned.
 */
static uint64_t size_word(const struct mscclpp_plan *plan, uint64_t es)
{
    return plan_uses_packets(plan) && es < 4 ? 4 : es;
}

/* Alignment unit of rounded chunk sizes and tbg slices: lcm(buffer_alignment, word). */
static uint64_t size_unit(const struct mscclpp_plan *plan, uint64_t es)
{
    uint64_t a = plan->alignment ? plan->alignment : 16;
    uint64_t w = size_word(plan, es);
    return a / gcd64(a, w) * w;
}

static uint64_t side_chunk(uint64_t size, uint32_t chunks, uint64_t word, uint64_t unit)
{
    if (size % chunks == 0 && (size / chunks) % word == 0) return size / chunks;
    return round_up((size + chunks - 1) / chunks, unit);
}

/*
 * Grouped chunk layout. A collective whose result places each rank's data at a fixed position
 * (rank r's block of an allgather output, the per-peer blocks of an alltoall) views a buffer of
 * S bytes and C chunks as G rank blocks of S/G bytes, each split into C/G chunks of CS bytes
 * (the last chunk of a block short, possibly empty): chunk c = block c/(C/G), sub-chunk
 * c%(C/G). Rounding then never moves a block boundary. G = 1 is the plain layout; when CS*C ==
 * S the grouped layout equals the plain one (and the reference's).
 */
static uint32_t collective_groups(const struct mscclpp_plan *plan, int buf)
{
    const char *c = plan->collective ? plan->collective : "";
    if (strcmp(c, "allgather") == 0) return buf == PLAN_BUF_OUTPUT ? (uint32_t)plan->nranks : 1;
    if (strcmp(c, "reducescatter") == 0)
        return buf == PLAN_BUF_INPUT ? (uint32_t)plan->nranks : 1;
    if (strcmp(c, "alltoall") == 0) return (uint32_t)plan->nranks;
    return 1;
}

/* Rank blocks of one side as the plan's chunk count allows (size independent). */
static uint32_t side_groups(const struct mscclpp_plan *plan, int rank, int buf)
{
    const plan_gpu_t *g = &plan->gpus[rank];
    uint32_t c = buf == PLAN_BUF_INPUT ? g->input_chunks : g->output_chunks;
    uint32_t n = collective_groups(plan, buf);
    return c && n > 1 && c % n == 0 ? n : 1;
}

/* Byte layout of the input or output buffer for one call. */
typedef struct {
    uint64_t size;   /* S */
    uint32_t chunks; /* C; 0 when the plan gives none (then chunk c is at c*cs, clipped) */
    uint32_t groups; /* G */
    uint32_t per;    /* C/G */
    uint64_t gsize;  /* S/G */
    uint64_t cs;     /* chunk size (the same on both sides) */
    bool exact;      /* CS * C == S */
} side_t;

/* Offset of chunk c (c <= C: the end of the last chunk is S) in a side's layout. */
static uint64_t side_off(const side_t *sd, uint64_t c)
{
    if (!sd->chunks) return c * sd->cs < sd->size ? c * sd->cs : sd->size;
    uint64_t grp = c / sd->per, sub = c % sd->per;
    if (grp >= sd->groups) return sd->size;
    uint64_t o = sub * sd->cs;
    return grp * sd->gsize + (o < sd->gsize ? o : sd->gsize);
}

enum { LAYOUT_OK = 0, LAYOUT_MISMATCH, LAYOUT_BLOCKS_IN, LAYOUT_BLOCKS_OUT };

static int side_layout(const struct mscclpp_plan *plan, int rank, int buf, uint64_t size,
                       uint64_t es, side_t *sd)
{
    const plan_gpu_t *g = &plan->gpus[rank];
    uint64_t unit = size_unit(plan, es), word = size_word(plan, es);
    memset(sd, 0, sizeof(*sd));
    sd->size = size;
    sd->chunks = buf == PLAN_BUF_INPUT ? g->input_chunks : g->output_chunks;
    sd->groups = 1;
    if (!sd->chunks) return LAYOUT_OK;
    uint32_t n = collective_groups(plan, buf);
    bool flat_exact = size % sd->chunks == 0 && (size / sd->chunks) % word == 0;
    if (!flat_exact && n > 1 &&
        (sd->chunks % n != 0 || size % n != 0 || (size / n) % word != 0))
        return buf == PLAN_BUF_INPUT ? LAYOUT_BLOCKS_IN : LAYOUT_BLOCKS_OUT;
    sd->groups = side_groups(plan, rank, buf);
    sd->per = sd->chunks / sd->groups;
    sd->gsize = size / sd->groups;
    sd->cs = side_chunk(sd->gsize, sd->per, word, unit);
    sd->exact = sd->cs * sd->per == sd->gsize;
    return LAYOUT_OK;
}

/* Both sides' layouts and the common chunk size, without reporting (LAYOUT_*). */
static int chunk_layout(const struct mscclpp_plan *plan, int rank, uint64_t in, uint64_t out,
                        uint64_t es, side_t *si, side_t *so, uint64_t *cs)
{
    int r = side_layout(plan, rank, PLAN_BUF_INPUT, in, es, si);
    if (r == LAYOUT_OK) r = side_layout(plan, rank, PLAN_BUF_OUTPUT, out, es, so);
    if (r != LAYOUT_OK) return r;
    *cs = si->chunks ? si->cs : so->cs;
    if (si->chunks && so->chunks) {
        /* rounded layouts agree only when both sides have the same blocks of chunks */
        bool same = si->per == so->per && si->gsize == so->gsize;
        if (si->cs != so->cs || !((si->exact && so->exact) || same)) return LAYOUT_MISMATCH;
    }
    si->cs = so->cs = *cs;
    return LAYOUT_OK;
}

static int chunk_quiet(const struct mscclpp_plan *plan, int rank, uint64_t in, uint64_t out,
                       uint64_t es, uint64_t *cs)
{
    side_t si, so;
    return chunk_layout(plan, rank, in, out, es, &si, &so, cs);
}

mscclpp_result_t exec_chunk_bytes(const struct mscclpp_plan *plan, int rank, size_t in_bytes,
                                  size_t out_bytes, mscclpp_dtype_t dtype, uint64_t *chunk)
{
    CHECK_ARG(plan != NULL && chunk != NULL);
    CHECK_ARG(rank >= 0 && rank < plan->nranks);
    uint64_t es = elem_size(dtype);
    if (es == 0) return ERR_ARG("plan '%s': invalid dtype %d", plan->name, (int)dtype);
    if (in_bytes % es || out_bytes % es)
        return ERR_ARG("plan '%s': input size %zu and output size %zu must be multiples of the "
                       "element size (%llu bytes)",
                       plan->name, in_bytes, out_bytes, (unsigned long long)es);
    const plan_gpu_t *g = &plan->gpus[rank];
    int bad = chunk_quiet(plan, rank, in_bytes, out_bytes, es, chunk);
    if (bad == LAYOUT_BLOCKS_IN || bad == LAYOUT_BLOCKS_OUT) {
        bool in = bad == LAYOUT_BLOCKS_IN;
        int buf = in ? PLAN_BUF_INPUT : PLAN_BUF_OUTPUT;
        uint32_t n = collective_groups(plan, buf);
        return ERR_ARG("plan '%s' rank %d (%s): the %s (%zu B in %u chunks) holds %u rank blocks; "
                       "unless it splits into equal chunks of a multiple of %llu bytes, its "
                       "chunk count must be a multiple of %u and its size a multiple of %llu "
                       "bytes (%u blocks of a multiple of %llu bytes)",
                       plan->name, rank, plan->collective, in ? "input" : "output",
                       in ? in_bytes : out_bytes, in ? g->input_chunks : g->output_chunks, n,
                       (unsigned long long)size_word(plan, es), n,
                       (unsigned long long)(n * size_word(plan, es)), n,
                       (unsigned long long)size_word(plan, es));
    }
    if (bad) {
        return ERR_ARG("plan '%s' rank %d: input %zu B in %u chunks and output %zu B in %u "
                       "chunks do not split into equal chunks (sizes must be in the ratio of the "
                       "chunk counts, and divide into chunks of a multiple of %llu bytes unless "
                       "input and output have the same blocks of chunks)",
                       plan->name, rank, in_bytes, g->input_chunks, out_bytes, g->output_chunks,
                       (unsigned long long)size_word(plan, es));
    }
    return MSCCLPP_OK;
}

/* Logical scratch bytes of `rank` (one half), 0 when it cannot be computed. */
static uint64_t scratch_logical(const struct mscclpp_plan *plan, int rank, uint64_t in,
                                uint64_t out, uint64_t es, bool pkt)
{
    uint64_t cs;
    if (chunk_quiet(plan, rank, in, out, es, &cs)) return 0;
    return round_up(cs * plan->gpus[rank].scratch_chunks * (pkt ? 2 : 1), 64);
}

/* Offset of the upper scratch half: the same on every rank (max over ranks). */
static uint64_t scratch_half(const struct mscclpp_plan *plan, uint64_t in, uint64_t out,
                             uint64_t es, bool pkt)
{
    uint64_t h = 0;
    for (int r = 0; r < plan->nranks; r++) {
        uint64_t s = scratch_logical(plan, r, in, out, es, pkt);
        if (s > h) h = s;
    }
    return h;
}

mscclpp_result_t exec_scratch_bytes(const struct mscclpp_plan *plan, int rank, size_t in_bytes,
                                    size_t out_bytes, mscclpp_dtype_t dtype, uint64_t *bytes)
{
    uint64_t cs;
    CHECK(exec_chunk_bytes(plan, rank, in_bytes, out_bytes, dtype, &cs));
    CHECK_ARG(bytes != NULL);
    bool pkt = plan_uses_packets(plan);
    uint64_t es = elem_size(dtype);
    if (plan->double_scratch)
        *bytes = 2 * scratch_half(plan, in_bytes, out_bytes, es, pkt);
    else
        *bytes = scratch_logical(plan, rank, in_bytes, out_bytes, es, pkt);
    return MSCCLPP_OK;
}

size_t exec_state_bytes(const struct mscclpp_plan *plan, int rank)
{
    if (!plan || rank < 0 || rank >= plan->nranks) return 0;
    return round_up(sizeof(kern_state_t) + sizeof(int32_t) * (size_t)plan->gpus[rank].n_sems, 64);
}

mscclpp_result_t exec_state_init(const struct mscclpp_plan *plan, int rank, void *image,
                                 size_t bytes)
{
    CHECK_ARG(plan != NULL && image != NULL);
    CHECK_ARG(rank >= 0 && rank < plan->nranks);
    if (bytes < exec_state_bytes(plan, rank))
        return ERR_ARG("exec_state_init: %zu bytes given, the state of rank %d needs %zu", bytes,
                       rank, exec_state_bytes(plan, rank));
    const plan_gpu_t *g = &plan->gpus[rank];
    memset(image, 0, bytes);
    kern_state_t *st = image;
    st->magic = KERN_STATE_MAGIC;
    st->flag = 1;
    st->n_sems = (uint32_t)g->n_sems;
    int32_t *sems = (int32_t *)(st + 1);
    for (int i = 0; i < g->n_sems; i++) sems[i] = g->sem_init[i];
    return MSCCLPP_OK;
}

/* ---- splitting plan ops into several interpreter ops ---------------------------------------
 *
 * A kern op moves one length per descriptor. Two cases need more than one kern op per plan op:
 *   - pairs: put/ppkt/pws/pwsf/get move src[k] -> dst[k]; when the pairs can differ in length
 *     (different chunks, e.g. a short last chunk next to full ones), each pair becomes its own
 *     kern op;
 *   - chunks: a descriptor spanning rank blocks of a grouped layout is contiguous in its buffer
 *     but skips the unused tail of each short chunk in scratch slots (or in a buffer with other
 *     blocks); when such descriptors meet descriptors of another layout, a plain or packet
 *     copy/put/get becomes one kern op per chunk.
 * The decision depends on the plan only (never on the sizes), so that exec_state_error() can map
 * a recorded kern op index back to the plan's op index. Reduce ops never split: their
 * descriptors all carry the same result range, so the minimum length is the right one; one that
 * would need a chunk split is refused when the sizes make the layouts differ.
 */

typedef struct {
    bool pairs;                       /* one unit per pair, else one unit for the whole op */
    int n_units;                      /* units (pairs or 1) */
    uint32_t pieces[PLAN_MAX_DESCS];  /* kern ops per unit (chunks, or 1) */
    bool conflict;                    /* needs a chunk split it cannot have */
    uint32_t count;                   /* kern ops in all */
} split_t;

static bool op_has_pairs(int type)
{
    return type == PLAN_OP_PUT || type == PLAN_OP_PPKT || type == PLAN_OP_PWS ||
           type == PLAN_OP_PWSF || type == PLAN_OP_GET;
}

static bool op_chunk_splittable(int type)
{
    return op_has_pairs(type) || type == PLAN_OP_COPY || type == PLAN_OP_CPKT ||
           type == PLAN_OP_UPKT;
}

static bool desc_same(const plan_desc_t *a, const plan_desc_t *b)
{
    return a->buf == b->buf && a->index == b->index && a->size == b->size;
}

/* Does d span rank blocks of a grouped layout (so that, in bytes, it may skip short tails)? */
static bool desc_gapped(const struct mscclpp_plan *plan, int rank, const plan_desc_t *d,
                        uint32_t *per)
{
    if (d->buf != PLAN_BUF_INPUT && d->buf != PLAN_BUF_OUTPUT) return false;
    const plan_gpu_t *g = &plan->gpus[rank];
    uint32_t c = d->buf == PLAN_BUF_INPUT ? g->input_chunks : g->output_chunks;
    uint32_t n = side_groups(plan, rank, d->buf);
    if (n <= 1 || c / n <= 1 || d->size <= 1) return false;
    *per = c / n;
    return d->index / *per != (d->index + d->size - 1) / *per;
}

/*
 * Chunk pieces of one unit (its descriptors): 1 when every descriptor has the same byte layout
 * (none spans rank blocks, or all span them alike), else the common chunk count, or 0 when the
 * descriptors have different chunk counts.
 */
static uint32_t unit_pieces(const struct mscclpp_plan *plan, int rank, const plan_desc_t *const *d,
                            int n)
{
    int gapped = 0;
    uint32_t per0 = 0;
    bool alike = true;
    for (int k = 0; k < n; k++) {
        uint32_t per = 0;
        if (desc_gapped(plan, rank, d[k], &per)) {
            gapped++;
            if (gapped == 1) per0 = per;
            if (d[k]->buf != d[0]->buf || d[k]->size != d[0]->size ||
                d[k]->index % per != d[0]->index % per0)
                alike = false;
        }
    }
    if (gapped == 0 || (gapped == n && alike)) return 1;
    for (int k = 1; k < n; k++)
        if (d[k]->size != d[0]->size) return 0;
    return d[0]->size;
}

/* Is op i of the block inside a pipeline body? */
static bool op_in_pipeline(const plan_block_t *blk, int i)
{
    for (int p = 0; p < i; p++)
        if (blk->ops[p].type == PLAN_OP_PIPELINE && i <= p + blk->ops[p].n_inner) return true;
    return false;
}

static void op_split(const struct mscclpp_plan *plan, int rank, const plan_block_t *blk, int i,
                     split_t *sp)
{
    const plan_op_t *op = &blk->ops[i];
    memset(sp, 0, sizeof(*sp));
    sp->n_units = 1;
    sp->pieces[0] = 1;
    sp->count = 1;
    if (op->type >= PLAN_OP__COUNT || op->type == PLAN_OP_PIPELINE || op->n_src > PLAN_MAX_DESCS ||
        op->n_dst > PLAN_MAX_DESCS || op->n_src + op->n_dst == 0)
        return;
    if (op_has_pairs(op->type) && op->n_src > 0 && op->n_dst > 1) {
        for (int k = 1; k < op->n_dst; k++) {
            int sk = k < op->n_src ? k : op->n_src - 1;
            if (!desc_same(&op->src[sk], &op->src[0]) || !desc_same(&op->dst[k], &op->dst[0]))
                sp->pairs = true;
        }
    }
    const plan_desc_t *d[2 * PLAN_MAX_DESCS];
    /* whether a chunk split is allowed; asked only when one is needed (op_in_pipeline scans the
     * block: asking for every op would be quadratic in blocks of thousands of ops) */
    int can = -1;
    if (sp->pairs) {
        sp->n_units = op->n_dst;
        for (int k = 0; k < op->n_dst; k++) {
            d[0] = &op->src[k < op->n_src ? k : op->n_src - 1];
            d[1] = &op->dst[k];
            sp->pieces[k] = unit_pieces(plan, rank, d, 2);
        }
    } else {
        int n = 0;
        for (int k = 0; k < op->n_src; k++) d[n++] = &op->src[k];
        for (int k = 0; k < op->n_dst; k++) d[n++] = &op->dst[k];
        sp->pieces[0] = unit_pieces(plan, rank, d, n);
    }
    sp->count = 0;
    for (int u = 0; u < sp->n_units; u++) {
        if (sp->pieces[u] != 1 && can < 0)
            can = op_chunk_splittable(op->type) && !op_in_pipeline(blk, i);
        if (sp->pieces[u] != 1 && !can) {
            sp->conflict = true;
            sp->pieces[u] = 1;
        } else if (sp->pieces[u] == 0) {
            sp->conflict = true;
            sp->pieces[u] = 1;
        }
        sp->count += sp->pieces[u];
    }
}

/* Plan op index of kern op `kop` of a block (-1 if out of range). */
static int plan_op_of(const struct mscclpp_plan *plan, int rank, int b, int kop)
{
    if (!plan || rank < 0 || rank >= plan->nranks || kop < 0) return -1;
    const plan_gpu_t *g = &plan->gpus[rank];
    if (b < 0 || b >= g->n_blocks) return -1;
    const plan_block_t *blk = &g->blocks[b];
    int64_t k = 0;
    for (int i = 0; i < blk->n_ops; i++) {
        split_t sp;
        op_split(plan, rank, blk, i, &sp);
        k += sp.count;
        if (kop < k) return i;
    }
    return -1;
}

/* ---- lowering ----------------------------------------------------------------------------- */

typedef struct {
    const struct mscclpp_plan *plan;
    int rank;
    const plan_gpu_t *g;
    const exec_resources_t *res;
    uint64_t in, out, es, cs, unit;
    side_t si, so; /* input and output layouts */
    bool pkt;
    uint64_t scr_local;  /* bytes of my scratch usable per half */
    uint64_t *scr_owner; /* per rank: logical scratch (peers' scratch bound) */
    int b, i;            /* op being lowered, for messages */
} lower_t;

#define OPFMT "plan '%s' gpus[%d].threadblocks[%d].ops[%d] (%s)"
#define OPARGS(L, op) (L)->plan->name, (L)->rank, (L)->b, (L)->i, exec_op_name((op)->type)

static mscclpp_result_t lower_desc_range(lower_t *L, const plan_desc_t *d, int buf,
                                         kern_desc_t *kd, uint64_t *len);

/* A remote descriptor of a port op: the proxy writes the owner's buffer; we keep its id. */
static mscclpp_result_t lower_port_desc(lower_t *L, const plan_block_t *blk, const plan_op_t *op,
                                        const plan_desc_t *d, const char *side, int j,
                                        kern_desc_t *kd, uint64_t *len, uint64_t *bound)
{
    const plan_gpu_t *g = L->g;
    if (d->ref >= blk->n_rbuf[PLAN_CH_PORT])
        return ERR(MSCCLPP_ERR_INVALID_PLAN,
                   OPFMT ": %s[%d].buffer_id %u has no port remote buffer in its block",
                   OPARGS(L, op), side, j, d->ref);
    int q = blk->rbuf[PLAN_CH_PORT][d->ref];
    if (q >= g->n_rbufs || q >= KERN_PORT_MAX_RBUFS)
        return ERR(MSCCLPP_ERR_INVALID_PLAN, OPFMT ": %s[%d] remote buffer %d out of range",
                   OPARGS(L, op), side, j, q);
    if (!L->res->fifo || !L->res->pbufs)
        return ERR_ARG(OPFMT ": port channel resources (proxy FIFO) are missing", OPARGS(L, op));
    const plan_rbuf_t *rb = &g->rbufs[q];
    kd->loc = KERN_LOC_PORT;
    kd->idx = (uint32_t)q;
    *bound = rb->buf == PLAN_BUF_INPUT    ? L->in
             : rb->buf == PLAN_BUF_OUTPUT ? L->out
                                          : L->scr_owner[rb->owner];
    return lower_desc_range(L, d, rb->buf, kd, len);
}

/* Resolve one descriptor: location, byte offset, length, and the size of the buffer it hits. */
static mscclpp_result_t lower_desc(lower_t *L, const plan_block_t *blk, const plan_op_t *op,
                                   const plan_desc_t *d, const char *side, int j,
                                   kern_desc_t *kd, uint64_t *len, uint64_t *bound)
{
    const plan_gpu_t *g = L->g;
    const exec_resources_t *res = L->res;
    int buf;
    memset(kd, 0, sizeof(*kd));
    switch (d->kind) {
    case PLAN_DESC_LOCAL:
        buf = d->buf;
        if (buf > PLAN_BUF_SCRATCH)
            return ERR(MSCCLPP_ERR_INVALID_PLAN, OPFMT ": %s[%d] has buffer type %d", OPARGS(L, op),
                       side, j, buf);
        kd->loc = (uint8_t)buf;
        *bound = buf == PLAN_BUF_INPUT ? L->in : buf == PLAN_BUF_OUTPUT ? L->out : L->scr_local;
        break;
    case PLAN_DESC_REMOTE: {
        if (op->channel_type == PLAN_CH_PORT) return lower_port_desc(L, blk, op, d, side, j, kd,
                                                                     len, bound);
        if (op->channel_type != PLAN_CH_MEMORY || d->ref >= blk->n_rbuf[PLAN_CH_MEMORY])
            return ERR(MSCCLPP_ERR_INVALID_PLAN,
                       OPFMT ": %s[%d].buffer_id %u has no memory remote buffer in its block",
                       OPARGS(L, op), side, j, d->ref);
        int q = blk->rbuf[PLAN_CH_MEMORY][d->ref];
        if (q >= g->n_rbufs)
            return ERR(MSCCLPP_ERR_INVALID_PLAN, OPFMT ": %s[%d] remote buffer %d out of range",
                       OPARGS(L, op), side, j, q);
        const plan_rbuf_t *rb = &g->rbufs[q];
        buf = rb->buf;
        if (!res->rbufs || q >= res->n_rbufs || !res->rbufs[q])
            return ERR_ARG(OPFMT ": remote buffer %d (the %s buffer of rank %d) has no mapped "
                           "pointer in the resources",
                           OPARGS(L, op), q, buf_name(buf), rb->owner);
        kd->loc = KERN_LOC_REMOTE;
        kd->idx = (uint32_t)q;
        *bound = buf == PLAN_BUF_INPUT    ? L->in
                 : buf == PLAN_BUF_OUTPUT ? L->out
                                          : L->scr_owner[rb->owner];
        break;
    }
    case PLAN_DESC_SWITCH: {
        if (d->ref >= blk->n_chan[PLAN_CH_SWITCH])
            return ERR(MSCCLPP_ERR_INVALID_PLAN,
                       OPFMT ": %s[%d].switch_channel_id %u has no switch channel in its block",
                       OPARGS(L, op), side, j, d->ref);
        int s = blk->chan[PLAN_CH_SWITCH][d->ref];
        if (s >= g->n_chan[PLAN_CH_SWITCH])
            return ERR(MSCCLPP_ERR_INVALID_PLAN, OPFMT ": switch channel %d out of range",
                       OPARGS(L, op), s);
        const plan_switch_t *sw = &g->switches[s];
        buf = sw->buf;
        if (!res->switches || s >= res->n_switch || res->switches[s].n_members != sw->n_ranks ||
            !res->switches[s].members)
            return ERR_ARG(OPFMT ": switch channel %d (%d members) is missing from the resources "
                           "or has another member count",
                           OPARGS(L, op), s, sw->n_ranks);
        *bound = buf == PLAN_BUF_INPUT ? L->in : buf == PLAN_BUF_OUTPUT ? L->out : UINT64_MAX;
        for (int m = 0; m < sw->n_ranks; m++) {
            if (!res->switches[s].members[m])
                return ERR_ARG(OPFMT ": switch channel %d member %d (rank %d) has no pointer",
                               OPARGS(L, op), s, m, sw->ranks[m]);
            if (buf == PLAN_BUF_SCRATCH && L->scr_owner[sw->ranks[m]] < *bound)
                *bound = L->scr_owner[sw->ranks[m]];
        }
        kd->loc = KERN_LOC_SWITCH;
        kd->idx = (uint32_t)s;
        break;
    }
    default:
        return ERR(MSCCLPP_ERR_INVALID_PLAN, OPFMT ": %s[%d] has descriptor kind %d",
                   OPARGS(L, op), side, j, d->kind);
    }
    return lower_desc_range(L, d, buf, kd, len);
}

/* Byte offset and length of descriptor d on a buffer of type `buf`. */
static mscclpp_result_t lower_desc_range(lower_t *L, const plan_desc_t *d, int buf,
                                         kern_desc_t *kd, uint64_t *len)
{
    uint64_t off, end;
    if (buf != PLAN_BUF_SCRATCH) {
        const side_t *sd = buf == PLAN_BUF_INPUT ? &L->si : &L->so;
        off = side_off(sd, d->index);
        end = side_off(sd, (uint64_t)d->index + d->size);
    } else {
        /* scratch chunk c is slot c, at c*CS */
        off = (uint64_t)d->index * L->cs;
        end = ((uint64_t)d->index + d->size) * L->cs;
        kd->flags |= KERN_DESC_SCRATCH;
    }
    kd->off = off;
    *len = end - off;
    return MSCCLPP_OK;
}

/* Is descriptor j of this side in packet form for op `type`? */
static bool desc_is_packet(int type, bool is_dst, int j)
{
    switch (type) {
    case PLAN_OP_CPKT:
    case PLAN_OP_PPKT: return is_dst;
    case PLAN_OP_UPKT: return !is_dst;
    case PLAN_OP_RPPKT:
    case PLAN_OP_GSTOREPKT: return true;
    case PLAN_OP_REPKT:
    case PLAN_OP_RESPKT:
    case PLAN_OP_RECPKT:
    case PLAN_OP_RECSPKT: return j >= 1;
    default: return false;
    }
}

/* Memory channel ids of signal/wait/flush ops -> rank-level channel indices. */
static mscclpp_result_t lower_channels(lower_t *L, const plan_block_t *blk, const plan_op_t *op,
                                       uint32_t *ids)
{
    const plan_gpu_t *g = L->g;
    const exec_resources_t *res = L->res;
    if (op->n_channels == 0) return MSCCLPP_OK;
    if (op->channel_type == PLAN_CH_PORT) {
        for (int k = 0; k < op->n_channels; k++) {
            int id = op->channel_ids[k];
            if (id >= blk->n_chan[PLAN_CH_PORT])
                return ERR(MSCCLPP_ERR_INVALID_PLAN,
                           OPFMT ": channel_ids[%d] = %d, the block has %d port channels",
                           OPARGS(L, op), k, id, blk->n_chan[PLAN_CH_PORT]);
            int gc = blk->chan[PLAN_CH_PORT][id];
            if (gc >= g->n_chan[PLAN_CH_PORT] || gc >= KERN_PORT_MAX_CHANS)
                return ERR(MSCCLPP_ERR_INVALID_PLAN, OPFMT ": port channel %d out of range",
                           OPARGS(L, op), gc);
            if (!res->ports || gc >= res->n_ports || !res->ports[gc].inbound ||
                !res->ports[gc].expected || !res->fifo)
                return ERR_ARG(OPFMT ": port channel %d (to rank %d) has no proxy resources",
                               OPARGS(L, op), gc, g->peers[PLAN_CH_PORT][gc]);
            ids[k] = (uint32_t)gc;
        }
        return MSCCLPP_OK;
    }
    if (op->channel_type != PLAN_CH_MEMORY)
        return ERR(MSCCLPP_ERR_INVALID_PLAN, OPFMT ": channel_ids need channel_type memory",
                   OPARGS(L, op));
    for (int k = 0; k < op->n_channels; k++) {
        int id = op->channel_ids[k];
        if (id >= blk->n_chan[PLAN_CH_MEMORY])
            return ERR(MSCCLPP_ERR_INVALID_PLAN,
                       OPFMT ": channel_ids[%d] = %d, the block has %d memory channels",
                       OPARGS(L, op), k, id, blk->n_chan[PLAN_CH_MEMORY]);
        int gc = blk->chan[PLAN_CH_MEMORY][id];
        if (gc >= g->n_chan[PLAN_CH_MEMORY])
            return ERR(MSCCLPP_ERR_INVALID_PLAN, OPFMT ": memory channel %d out of range",
                       OPARGS(L, op), gc);
        if (op->type != PLAN_OP_FLUSH) {
            if (!res->mem_chans || gc >= res->n_mem_chans || !res->mem_chans[gc].inbound ||
                !res->mem_chans[gc].outbound || !res->mem_chans[gc].expected)
                return ERR_ARG(OPFMT ": memory channel %d (to rank %d) has no counters in the "
                               "resources",
                               OPARGS(L, op), gc, g->peers[PLAN_CH_MEMORY][gc]);
        }
        ids[k] = (uint32_t)gc;
    }
    return MSCCLPP_OK;
}

static mscclpp_result_t lower_op(lower_t *L, const plan_block_t *blk, const plan_op_t *op,
                                 mscclpp_redop_t callop, kern_op_t *ko, kern_desc_t *kd,
                                 uint32_t *ids)
{
    const plan_gpu_t *g = L->g;
    memset(ko, 0, sizeof(*ko));
    ko->type = op->type;
    if (op->type >= PLAN_OP__COUNT)
        return ERR(MSCCLPP_ERR_INVALID_PLAN, "plan '%s' gpus[%d].threadblocks[%d].ops[%d]: op "
                   "type %d", L->plan->name, L->rank, L->b, L->i, op->type);
    if (op->channel_type == PLAN_CH_PORT) {
        switch (op->type) {
        case PLAN_OP_PUT:
        case PLAN_OP_PWS:
        case PLAN_OP_PWSF:
            CHECK(lower_channels(L, blk, op, ids));
            ko->n_ids = op->n_channels;
            /* fall through */
        case PLAN_OP_SIGNAL:
        case PLAN_OP_WAIT:
        case PLAN_OP_RLXSIGNAL:
        case PLAN_OP_RLXWAIT:
        case PLAN_OP_FLUSH: ko->port = 1; break;
        default:
            return ERR(MSCCLPP_ERR_UNSUPPORTED,
                       OPFMT ": this op is not implemented on port channels (put, pws, pwsf, "
                       "signal, wait and flush are)", OPARGS(L, op));
        }
    }

    /* ids */
    switch (op->type) {
    case PLAN_OP_SIGNAL:
    case PLAN_OP_WAIT:
    case PLAN_OP_RLXSIGNAL:
    case PLAN_OP_RLXWAIT:
    case PLAN_OP_FLUSH:
        CHECK(lower_channels(L, blk, op, ids));
        ko->n_ids = op->n_channels;
        break;
    case PLAN_OP_SEM_ACQUIRE:
    case PLAN_OP_SEM_RELEASE:
        for (int k = 0; k < op->n_sems; k++) {
            if (op->sem_ids[k] >= g->n_sems)
                return ERR(MSCCLPP_ERR_INVALID_PLAN, OPFMT ": semaphore_ids[%d] = %d, rank has %d",
                           OPARGS(L, op), k, op->sem_ids[k], g->n_sems);
            ids[k] = op->sem_ids[k];
        }
        ko->n_ids = op->n_sems;
        break;
    case PLAN_OP_BARRIER:
        if (op->barrier_id >= PLAN_MAX_BARRIERS || op->barrier_nblocks < 1 ||
            op->barrier_nblocks > g->n_blocks)
            return ERR(MSCCLPP_ERR_INVALID_PLAN,
                       OPFMT ": barrier_id %d / num_threadblocks %d out of range (%d blocks)",
                       OPARGS(L, op), op->barrier_id, op->barrier_nblocks, g->n_blocks);
        ko->barrier_id = op->barrier_id;
        ko->barrier_nblocks = op->barrier_nblocks;
        break;
    default: break;
    }

    /* reduce op: the call's, else the plan's, else sum */
    int red = callop != MSCCLPP_REDOP_PLAN ? (int)callop
              : op->reduce_op >= 0        ? op->reduce_op
                                          : MSCCLPP_SUM;
    if (red < 0 || red >= MSCCLPP_REDOP_COUNT)
        return ERR(MSCCLPP_ERR_INVALID_PLAN, OPFMT ": reduce op %d", OPARGS(L, op), red);
    ko->redop = (uint8_t)red;

    if (op->type == PLAN_OP_PIPELINE) return MSCCLPP_OK; /* caller fills iterations */

    /* descriptors */
    if (op->n_src > PLAN_MAX_DESCS || op->n_dst > PLAN_MAX_DESCS)
        return ERR(MSCCLPP_ERR_INVALID_PLAN, OPFMT ": too many descriptors", OPARGS(L, op));
    uint64_t len = UINT64_MAX, bounds[2 * PLAN_MAX_DESCS];
    int nd = 0;
    for (int j = 0; j < op->n_src; j++, nd++) {
        uint64_t l;
        CHECK(lower_desc(L, blk, op, &op->src[j], "src_buff", j, &kd[nd], &l, &bounds[nd]));
        if (desc_is_packet(op->type, false, j)) kd[nd].flags |= KERN_DESC_PACKET;
        if (l < len) len = l;
    }
    for (int j = 0; j < op->n_dst; j++, nd++) {
        uint64_t l;
        CHECK(lower_desc(L, blk, op, &op->dst[j], "dst_buff", j, &kd[nd], &l, &bounds[nd]));
        if (desc_is_packet(op->type, true, j)) kd[nd].flags |= KERN_DESC_PACKET;
        if (l < len) len = l;
    }
    if (nd == 0) len = 0;
    ko->n_src = op->n_src;
    ko->n_dst = op->n_dst;

    /* ops that need descriptors of a given shape */
    switch (op->type) {
    case PLAN_OP_GLRES:
        if (op->n_src < 1 || op->n_dst < 1 || kd[0].loc != KERN_LOC_SWITCH ||
            kd[op->n_src].loc != KERN_LOC_SWITCH)
            return ERR(MSCCLPP_ERR_INVALID_PLAN, OPFMT ": needs switch source and destination",
                       OPARGS(L, op));
        break;
    case PLAN_OP_GLRE:
        if (op->n_src < 1 || op->n_dst < 1 || kd[0].loc != KERN_LOC_SWITCH ||
            kd[op->n_src].loc == KERN_LOC_SWITCH)
            return ERR(MSCCLPP_ERR_INVALID_PLAN,
                       OPFMT ": needs a switch source and a local destination", OPARGS(L, op));
        break;
    case PLAN_OP_GSTORE:
    case PLAN_OP_GSTOREPKT:
        if (op->n_src < 1 || op->n_dst < 1 || kd[op->n_src].loc != KERN_LOC_SWITCH ||
            kd[0].loc == KERN_LOC_SWITCH)
            return ERR(MSCCLPP_ERR_INVALID_PLAN,
                       OPFMT ": needs a local source and a switch destination", OPARGS(L, op));
        break;
    case PLAN_OP_COPY:
    case PLAN_OP_CPKT:
    case PLAN_OP_UPKT:
    case PLAN_OP_RPPKT:
    case PLAN_OP_PUT:
    case PLAN_OP_PPKT:
    case PLAN_OP_PWS:
    case PLAN_OP_PWSF:
    case PLAN_OP_GET:
    case PLAN_OP_RE:
    case PLAN_OP_RES:
    case PLAN_OP_RRE:
    case PLAN_OP_RRES:
    case PLAN_OP_REPKT:
    case PLAN_OP_RESPKT:
    case PLAN_OP_RECPKT:
    case PLAN_OP_RECSPKT:
        if (op->n_src < 1 || op->n_dst < 1)
            return ERR(MSCCLPP_ERR_INVALID_PLAN, OPFMT ": needs src_buff and dst_buff",
                       OPARGS(L, op));
        for (int j = 0; j < nd; j++)
            if (kd[j].loc == KERN_LOC_SWITCH)
                return ERR(MSCCLPP_ERR_INVALID_PLAN,
                           OPFMT ": a switch descriptor is only valid in glres/glre/gstore/"
                                 "gstorepkt",
                           OPARGS(L, op));
        break;
    default: break;
    }

    /* thread-block group: slice j of n of every descriptor */
    if (op->tbg_size > 1) {
        uint64_t n = op->tbg_size, j = op->tbg_id;
        if (j >= n)
            return ERR(MSCCLPP_ERR_INVALID_PLAN, OPFMT ": tbg_info tb_id %u >= tbg_size %u",
                       OPARGS(L, op), op->tbg_id, op->tbg_size);
        uint64_t units = len / L->unit, tail = len % L->unit;
        uint64_t q = units / n, r = units % n;
        uint64_t start = (j * q + (j < r ? j : r)) * L->unit;
        uint64_t size = (q + (j < r ? 1 : 0)) * L->unit + (j == n - 1 ? tail : 0);
        for (int k = 0; k < nd; k++) kd[k].off += start;
        len = size;
    }
    ko->len = len;

    /* every byte the op can touch lies inside its buffer */
    bool pkt_op = op_is_packet(op->type);
    for (int k = 0; k < nd; k++) {
        uint64_t ext = kd[k].flags & KERN_DESC_PACKET ? 2 * (kd[k].off + round_up(len, 4))
                                                       : kd[k].off + len;
        if (pkt_op && (kd[k].off % 4) != 0)
            return ERR(MSCCLPP_ERR_INVALID_PLAN,
                       OPFMT ": packet descriptor offset %llu is not a multiple of 4 bytes",
                       OPARGS(L, op), (unsigned long long)kd[k].off);
        if (len && ext > bounds[k])
            return ERR(MSCCLPP_ERR_INVALID_PLAN,
                       OPFMT ": %s[%d] reaches byte %llu of a %s buffer of %llu bytes for these "
                       "sizes",
                       OPARGS(L, op), k < op->n_src ? "src_buff" : "dst_buff",
                       k < op->n_src ? k : k - op->n_src, (unsigned long long)ext,
                       kd[k].flags & KERN_DESC_SCRATCH ? "scratch" : "input/output",
                       (unsigned long long)bounds[k]);
    }
    return MSCCLPP_OK;
}

/* One kern op's view of a plan op: pair `pair` only (if >= 0), chunk `chunk` of it (if >= 0);
 * its descriptors live in `store` (2 * PLAN_MAX_DESCS entries). */
static void op_piece(const plan_op_t *po, int pair, int64_t chunk, plan_op_t *v,
                     plan_desc_t *store)
{
    *v = *po;
    v->src = store;
    v->dst = store + PLAN_MAX_DESCS;
    if (po->n_src) memcpy(v->src, po->src, po->n_src * sizeof(plan_desc_t));
    if (po->n_dst) memcpy(v->dst, po->dst, po->n_dst * sizeof(plan_desc_t));
    if (pair >= 0) {
        v->n_src = 1;
        v->n_dst = 1;
        v->src[0] = po->src[pair < po->n_src ? pair : po->n_src - 1];
        v->dst[0] = po->dst[pair];
        if (po->channel_type == PLAN_CH_PORT && pair < po->n_channels) {
            v->channel_ids[0] = po->channel_ids[pair]; /* one channel per destination */
            v->n_channels = 1;
        }
    }
    if (chunk >= 0) {
        for (int k = 0; k < v->n_src; k++) {
            v->src[k].index += (uint32_t)chunk;
            v->src[k].size = 1;
        }
        for (int k = 0; k < v->n_dst; k++) {
            v->dst[k].index += (uint32_t)chunk;
            v->dst[k].size = 1;
        }
    }
}

/*
 * An op whose descriptors have different byte layouts across rank blocks but that cannot be
 * split per chunk (a reduce, a pipeline body, descriptors of different chunk counts): fine when
 * the chunks are even for these sizes, refused otherwise.
 */
static mscclpp_result_t check_unsplit(lower_t *L, const plan_op_t *op)
{
    for (int k = 0; k < op->n_src + op->n_dst; k++) {
        const plan_desc_t *d = k < op->n_src ? &op->src[k] : &op->dst[k - op->n_src];
        uint32_t per;
        if (!desc_gapped(L->plan, L->rank, d, &per)) continue;
        const side_t *sd = d->buf == PLAN_BUF_INPUT ? &L->si : &L->so;
        if (sd->exact) continue;
        return ERR_ARG(OPFMT ": %s[%d] (chunks %u..%u) spans rank blocks of the %s, whose %u "
                       "chunks per block are uneven for %llu B, and this op cannot be split per "
                       "chunk (a reduce, a pipeline body, or descriptors of different sizes); "
                       "use sizes whose rank blocks split into %u chunks of a multiple of %llu "
                       "bytes",
                       OPARGS(L, op), k < op->n_src ? "src_buff" : "dst_buff",
                       k < op->n_src ? k : k - op->n_src, d->index, d->index + d->size - 1,
                       buf_name(d->buf), per, (unsigned long long)sd->size, per,
                       (unsigned long long)size_word(L->plan, L->es));
    }
    return MSCCLPP_OK;
}

mscclpp_result_t exec_lower(const struct mscclpp_plan *plan, int rank, size_t in_bytes,
                            size_t out_bytes, mscclpp_dtype_t dtype, mscclpp_redop_t op,
                            mscclpp_packet_t packet, const exec_resources_t *res,
                            exec_lowered_t **lowered)
{
    mscclpp_result_t ret = MSCCLPP_OK;
    CHECK_ARG(plan != NULL && res != NULL && lowered != NULL);
    CHECK_ARG(rank >= 0 && rank < plan->nranks);
    CHECK_ARG(op == MSCCLPP_REDOP_PLAN || (op >= 0 && op < MSCCLPP_REDOP_COUNT));
    CHECK_ARG(packet == MSCCLPP_PACKET_LL16 || packet == MSCCLPP_PACKET_LL8);
    CHECK_ARG(res->state != NULL);
    *lowered = NULL;

    lower_t L = {.plan = plan, .rank = rank, .g = &plan->gpus[rank], .res = res};
    L.in = in_bytes;
    L.out = out_bytes;
    L.es = elem_size(dtype);
    CHECK(exec_chunk_bytes(plan, rank, in_bytes, out_bytes, dtype, &L.cs));
    chunk_layout(plan, rank, in_bytes, out_bytes, L.es, &L.si, &L.so, &L.cs);
    L.unit = size_unit(plan, L.es);
    L.pkt = plan_uses_packets(plan);
    const plan_gpu_t *g = L.g;

    uint64_t need;
    CHECK(exec_scratch_bytes(plan, rank, in_bytes, out_bytes, dtype, &need));
    if (need > 0 && (!res->scratch || res->scratch_bytes < need))
        return ERR_ARG("plan '%s' rank %d needs %llu bytes of scratch for these sizes, the "
                       "resources give %llu",
                       plan->name, rank, (unsigned long long)need,
                       (unsigned long long)(res->scratch ? res->scratch_bytes : 0));
    /* The halves alternate by call, so they must stay where they are when the message size
     * changes: a rank one call ahead writes into the other half of its peer's scratch, and a
     * half that moved with the size would overlap packets the peer has not read yet. */
    uint64_t half = 0;
    if (plan->double_scratch) {
        half = scratch_half(plan, L.in, L.out, L.es, L.pkt);
        if (res->scratch_half) {
            if (half > res->scratch_half)
                return ERR_ARG("plan '%s' rank %d needs %llu bytes per scratch half for these "
                               "sizes, the context's halves are %llu bytes",
                               plan->name, rank, (unsigned long long)half,
                               (unsigned long long)res->scratch_half);
            half = res->scratch_half;
        }
    }
    L.scr_local = plan->double_scratch ? half : res->scratch_bytes;

    L.scr_owner = calloc((size_t)plan->nranks, sizeof(uint64_t));
    if (!L.scr_owner) return ERR(MSCCLPP_ERR_NO_MEMORY, "exec_lower: out of memory");
    for (int r = 0; r < plan->nranks; r++)
        L.scr_owner[r] = scratch_logical(plan, r, L.in, L.out, L.es, L.pkt);

    /* sizes of the blob */
    uint32_t nblocks = g->n_blocks > 0 ? (uint32_t)g->n_blocks : 1;
    uint64_t n_ops = 0, n_descs = 0, n_ids = 0, n_members = 0;
    for (int b = 0; b < g->n_blocks; b++)
        for (int i = 0; i < g->blocks[b].n_ops; i++) {
            const plan_op_t *o = &g->blocks[b].ops[i];
            split_t sp;
            op_split(plan, rank, &g->blocks[b], i, &sp);
            n_ops += sp.count;
            for (int u = 0; u < sp.n_units; u++)
                n_descs += (uint64_t)sp.pieces[u] * (sp.pairs ? 2 : (uint64_t)o->n_src + o->n_dst);
            n_ids += (uint64_t)sp.count *
                     (uint64_t)(o->n_channels > o->n_sems ? o->n_channels : o->n_sems);
        }
    int n_chans = g->n_chan[PLAN_CH_MEMORY], n_switch = g->n_chan[PLAN_CH_SWITCH];
    for (int s = 0; s < n_switch; s++) n_members += (uint64_t)g->switches[s].n_ranks;

    uint64_t off = round_up(sizeof(kern_plan_t), 64);
    uint64_t o_blocks = off;
    off = round_up(off + nblocks * sizeof(kern_block_t), 64);
    uint64_t o_ops = off;
    off = round_up(off + n_ops * sizeof(kern_op_t), 64);
    uint64_t o_descs = off;
    off = round_up(off + n_descs * sizeof(kern_desc_t), 64);
    uint64_t o_ids = off;
    off = round_up(off + n_ids * sizeof(uint32_t), 64);
    uint64_t o_chans = off;
    off = round_up(off + (uint64_t)n_chans * sizeof(kern_chan_t), 64);
    uint64_t o_rbufs = off;
    off = round_up(off + (uint64_t)g->n_rbufs * sizeof(void *), 64);
    uint64_t o_switch = off;
    off = round_up(off + (uint64_t)n_switch * sizeof(kern_switch_t), 64);
    uint64_t o_members = off;
    off = round_up(off + n_members * sizeof(void *), 64);
    int n_ports = g->n_chan[PLAN_CH_PORT];
    uint64_t o_ports = off;
    off = round_up(off + (uint64_t)n_ports * sizeof(kern_chan_t), 64);
    uint64_t o_pbufs = off;
    off = round_up(off + (uint64_t)g->n_rbufs * sizeof(uint64_t), 64);
    if (off > UINT32_MAX) {
        ret = ERR_ARG("plan '%s' rank %d: lowered plan too large (%llu bytes)", plan->name, rank,
                      (unsigned long long)off);
        goto free_owner;
    }

    exec_lowered_t *lw = calloc(1, sizeof(*lw));
    char *blob = aligned_alloc(64, (size_t)off);
    if (!lw || !blob) {
        free(lw);
        free(blob);
        ret = ERR(MSCCLPP_ERR_NO_MEMORY, "exec_lower: out of memory (%llu bytes)",
                  (unsigned long long)off);
        goto free_owner;
    }
    memset(blob, 0, (size_t)off);
    kern_plan_t *kp = (kern_plan_t *)blob;
    kern_block_t *kb = (kern_block_t *)(blob + o_blocks);
    kern_op_t *ko = (kern_op_t *)(blob + o_ops);
    kern_desc_t *kd = (kern_desc_t *)(blob + o_descs);
    uint32_t *kids = (uint32_t *)(blob + o_ids);
    kern_chan_t *kc = (kern_chan_t *)(blob + o_chans);
    void **krb = (void **)(blob + o_rbufs);
    kern_switch_t *ksw = (kern_switch_t *)(blob + o_switch);
    void **kmem = (void **)(blob + o_members);

    kp->magic = KERN_PLAN_MAGIC;
    kp->bytes = (uint32_t)off;
    kp->rank = rank;
    kp->n_blocks = nblocks;
    kp->n_ops = (uint32_t)n_ops;
    kp->n_descs = (uint32_t)n_descs;
    kp->n_ids = (uint32_t)n_ids;
    kp->n_chans = (uint32_t)n_chans;
    kp->n_rbufs = (uint32_t)g->n_rbufs;
    kp->n_switch = (uint32_t)n_switch;
    kp->n_members = (uint32_t)n_members;
    kp->n_sems = (uint32_t)g->n_sems;
    kp->off_blocks = (uint32_t)o_blocks;
    kp->off_ops = (uint32_t)o_ops;
    kp->off_descs = (uint32_t)o_descs;
    kp->off_ids = (uint32_t)o_ids;
    kp->off_chans = (uint32_t)o_chans;
    kp->off_rbufs = (uint32_t)o_rbufs;
    kp->off_switch = (uint32_t)o_switch;
    kp->off_members = (uint32_t)o_members;
    kp->n_ports = (uint32_t)n_ports;
    kp->off_ports = (uint32_t)o_ports;
    kp->off_pbufs = (uint32_t)o_pbufs;
    kp->fifo = (kern_fifo_t *)res->fifo;
    kp->fifo_head = res->fifo_head;
    for (int t = 0; t < 3; t++) kp->lbase[t] = (uint64_t)(uintptr_t)res->lbase[t];
    {
        kern_chan_t *kpc = (kern_chan_t *)(blob + o_ports);
        uint64_t *kpb = (uint64_t *)(blob + o_pbufs);
        for (int c = 0; c < n_ports; c++) {
            kpc[c].peer = g->peers[PLAN_CH_PORT][c];
            if (res->ports && c < res->n_ports) {
                kpc[c].inbound = res->ports[c].inbound;
                kpc[c].expected = res->ports[c].expected;
            }
        }
        for (int q = 0; q < g->n_rbufs; q++) kpb[q] = res->pbufs ? res->pbufs[q] : 0;
    }

    /* resources */
    for (int c = 0; c < n_chans; c++) {
        kc[c].peer = g->peers[PLAN_CH_MEMORY][c];
        if (res->mem_chans && c < res->n_mem_chans) {
            kc[c].inbound = res->mem_chans[c].inbound;
            kc[c].remote = res->mem_chans[c].outbound;
            kc[c].expected = res->mem_chans[c].expected;
        }
    }
    for (int q = 0; q < g->n_rbufs; q++)
        krb[q] = res->rbufs && q < res->n_rbufs ? res->rbufs[q] : NULL;
    uint32_t mfirst = 0;
    for (int s = 0; s < n_switch; s++) {
        ksw[s].first_member = mfirst;
        ksw[s].n_members = (uint32_t)g->switches[s].n_ranks;
        if (res->switches && s < res->n_switch) {
            ksw[s].mc = res->switches[s].mc;
            for (int m = 0; m < g->switches[s].n_ranks && m < res->switches[s].n_members; m++)
                kmem[mfirst + m] = res->switches[s].members ? res->switches[s].members[m] : NULL;
        }
        mfirst += (uint32_t)g->switches[s].n_ranks;
    }

    /* blocks and ops */
    uint32_t oi = 0, di = 0, ii = 0;
    for (int b = 0; b < g->n_blocks; b++) {
        const plan_block_t *blk = &g->blocks[b];
        kb[b].first_op = oi;
        L.b = b;
        for (int i = 0; i < blk->n_ops; i++) {
            const plan_op_t *po = &blk->ops[i];
            kern_op_t *k = &ko[oi];
            L.i = i;
            split_t sp;
            op_split(plan, rank, blk, i, &sp);
            if (sp.conflict) CHECK_GOTO(check_unsplit(&L, po), ret, free_lowered);
            for (int u = 0; u < sp.n_units; u++)
                for (uint32_t t = 0; t < sp.pieces[u]; t++) {
                    plan_op_t v;
                    plan_desc_t store[2 * PLAN_MAX_DESCS];
                    const plan_op_t *lo = po;
                    if (sp.pairs || sp.pieces[u] > 1) {
                        op_piece(po, sp.pairs ? u : -1, sp.pieces[u] > 1 ? (int64_t)t : -1, &v,
                                 store);
                        lo = &v;
                    }
                    CHECK_GOTO(lower_op(&L, blk, lo, op, &ko[oi], kd + di, kids + ii), ret,
                               free_lowered);
                    ko[oi].desc = di;
                    ko[oi].ids = ii;
                    di += (uint32_t)lo->n_src + lo->n_dst;
                    ii += (uint32_t)(lo->n_channels > lo->n_sems ? lo->n_channels : lo->n_sems);
                    oi++;
                }
            if (po->type == PLAN_OP_PIPELINE) {
                uint64_t word = size_word(plan, L.es);
                if (po->unit_size == 0 || po->unit_size % word) {
                    ret = ERR(MSCCLPP_ERR_INVALID_PLAN,
                              OPFMT ": iter_context.unit_size %llu must be a positive multiple of "
                              "%llu bytes",
                              OPARGS(&L, po), (unsigned long long)po->unit_size,
                              (unsigned long long)word);
                    goto free_lowered;
                }
                if (i + po->n_inner >= blk->n_ops) {
                    ret = ERR(MSCCLPP_ERR_INVALID_PLAN,
                              OPFMT ": pipeline body of %u ops runs past the block's %d ops",
                              OPARGS(&L, po), po->n_inner, blk->n_ops);
                    goto free_lowered;
                }
                for (int j = 1; j <= po->n_inner; j++)
                    if (blk->ops[i + j].type == PLAN_OP_PIPELINE) {
                        ret = ERR(MSCCLPP_ERR_INVALID_PLAN, OPFMT ": nested pipeline",
                                  OPARGS(&L, po));
                        goto free_lowered;
                    }
                uint64_t total = (uint64_t)po->num_chunks * L.cs;
                uint64_t iters = (total + po->unit_size - 1) / po->unit_size;
                if (iters > UINT32_MAX) {
                    ret = ERR_ARG(OPFMT ": %llu pipeline iterations", OPARGS(&L, po),
                                  (unsigned long long)iters);
                    goto free_lowered;
                }
                /* the body as lowered: split ops count once per kern op */
                uint64_t inner = 0;
                for (int j = 1; j <= po->n_inner; j++) {
                    split_t bs;
                    op_split(plan, rank, blk, i + j, &bs);
                    inner += bs.count;
                }
                if (inner > UINT16_MAX) {
                    ret = ERR(MSCCLPP_ERR_INVALID_PLAN,
                              OPFMT ": pipeline body lowers to %llu ops (at most %u)",
                              OPARGS(&L, po), (unsigned long long)inner, (unsigned)UINT16_MAX);
                    goto free_lowered;
                }
                k->n_iter = (uint32_t)iters;
                k->unit = po->unit_size;
                k->n_inner = (uint16_t)inner;
            }
        }
        kb[b].n_ops = oi - kb[b].first_op;
    }

    lw->blob = blob;
    lw->blob_bytes = (size_t)off;
    lw->nblocks = (int)nblocks;
    lw->nthreads = plan->threads_per_block ? (int)plan->threads_per_block : 1024;
    kern_args_t *a = &lw->args;
    a->plan = kp;
    a->state = res->state;
    a->input = res->input;
    a->output = res->output;
    a->scratch = res->scratch;
    a->scratch_bytes = res->scratch_bytes;
    a->scratch_half = half;
    a->timeout_ns = res->timeout_ns ? res->timeout_ns : config_timeout_ns();
    a->rank = rank;
    a->dtype = (uint8_t)dtype;
    a->redop = (uint8_t)(op == MSCCLPP_REDOP_PLAN ? MSCCLPP_SUM : op);
    a->packet = (uint8_t)packet;
    a->double_scratch = plan->double_scratch ? 1 : 0;
    if (res->host_spin) {
        a->host_spin = res->host_spin;
    } else {
        int64_t spin = config_get_int(CFG_MSCCLPP_HOST_SPIN);
        a->host_spin = spin < 0 ? 0 : spin > 1000000000 ? 1000000000u : (uint32_t)spin;
    }
    a->clock_khz = res->clock_khz;
    free(L.scr_owner);
    *lowered = lw;
    return MSCCLPP_OK;

free_lowered:
    free(blob);
    free(lw);
free_owner:
    free(L.scr_owner);
    return ret;
}

void exec_lowered_free(exec_lowered_t *lowered)
{
    if (!lowered) return;
    free(lowered->blob);
    free(lowered);
}

mscclpp_result_t exec_state_error(const void *state, const struct mscclpp_plan *plan)
{
    CHECK_ARG(state != NULL);
    const kern_state_t *st = state;
    const kern_error_t *e = &st->err;
    if (e->code == 0) return MSCCLPP_OK;
    const char *name = plan && plan->name ? plan->name : "?";
    char where[96] = "";
    if (e->iter) snprintf(where, sizeof(where), " (pipeline iteration %u)", e->iter);
    mscclpp_result_t code = (mscclpp_result_t)e->code;
    const char *opn = exec_op_name(e->op_type);
    /* the interpreter records its own op index; split plan ops make it differ from the plan's */
    int pop = plan_op_of(plan, e->rank, e->block, e->op);
    if (pop < 0) pop = e->op;
    switch (e->what) {
    case KERN_WAIT_SIGNAL:
        return ERR(code,
                   "plan '%s': rank %d block %d op %d (%s)%s timed out waiting for a signal from "
                   "rank %d on memory channel %d (expected %llu, got %llu)",
                   name, e->rank, e->block, pop, opn, where, e->peer, e->channel,
                   (unsigned long long)e->expected, (unsigned long long)e->seen);
    case KERN_WAIT_PACKET:
        return ERR(code,
                   "plan '%s': rank %d block %d op %d (%s)%s timed out waiting for LL packets "
                   "with flag %llu (last seen flag %llu)",
                   name, e->rank, e->block, pop, opn, where, (unsigned long long)e->expected,
                   (unsigned long long)e->seen);
    case KERN_WAIT_BARRIER:
        return ERR(code,
                   "plan '%s': rank %d block %d op %d (%s)%s timed out in barrier %d: %llu of "
                   "%llu blocks arrived",
                   name, e->rank, e->block, pop, opn, where, e->channel,
                   (unsigned long long)e->seen, (unsigned long long)e->expected);
    case KERN_WAIT_SEMAPHORE:
        return ERR(code,
                   "plan '%s': rank %d block %d op %d (%s)%s timed out acquiring semaphore %d "
                   "(value %lld)",
                   name, e->rank, e->block, pop, opn, where, e->channel,
                   (long long)(int64_t)e->seen);
    case KERN_WAIT_PORT:
        return ERR(code,
                   "plan '%s': rank %d block %d op %d (%s)%s timed out waiting for a signal from "
                   "rank %d on port channel %d (expected %llu, got %llu)",
                   name, e->rank, e->block, pop, opn, where, e->peer, e->channel,
                   (unsigned long long)e->expected, (unsigned long long)e->seen);
    case KERN_WAIT_PROXY:
        if (code == MSCCLPP_ERR_TIMEOUT)
            return ERR(code,
                       "plan '%s': rank %d block %d op %d (%s)%s timed out waiting for the proxy "
                       "on port channel %d to rank %d (FIFO position %llu, proxy at %llu)",
                       name, e->rank, e->block, pop, opn, where, e->channel, e->peer,
                       (unsigned long long)e->expected, (unsigned long long)e->seen);
        return ERR(code,
                   "plan '%s': rank %d block %d op %d (%s)%s: the proxy failed (port channel %d "
                   "to rank %d)", name, e->rank, e->block, pop, opn, where, e->channel, e->peer);
    case KERN_WAIT_PLAN:
        return ERR(code,
                   "plan '%s': rank %d block %d: the launch does not match its lowered plan or "
                   "state (launched %llu blocks, plan has %llu; bad magic?)",
                   name, e->rank, e->block, (unsigned long long)e->expected,
                   (unsigned long long)e->seen);
    default:
        return ERR(code, "plan '%s': rank %d block %d op %d (%s)%s failed", name, e->rank,
                   e->block, pop, opn, where);
    }
}
