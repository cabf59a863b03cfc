/*
 * Chunk and scratch geometry of a plan for one call, and the splitting of plan ops into
 * interpreter ops (layout.h). Chunk -> byte rules (plan-format §3.1-3.2, 3.7, 3.8, with our
 * decisions):
 *   - sizes need only be multiples of the element size;
 *   - chunk size CS = S/C when C divides S into pieces that are multiples of the element size
 *     (of max(4, element size) when the plan moves packets: packet units are 8-byte aligned)
 *     -- identical to the reference whenever the reference accepts the size -- otherwise
 *     ceil(S/C) rounded up to lcm(buffer_alignment, that granule); chunk c of an input or
 *     output buffer is [c*CS, min((c+1)*CS, S)) (may be empty), scratch chunk c is at c*CS;
 *   - allgather / reducescatter / alltoall sides holding one block per rank use the grouped
 *     layout (layout.h, exec_chunk_bytes), so rounding never moves a rank's block.
 */
#include "executor/layout.h"

#include <stdlib.h>
#include <string.h>

#include "base/debug.h"

uint64_t exec_elem_size(mscclpp_dtype_t dt)
{
    switch (dt) {
    case MSCCLPP_FLOAT64:
    case MSCCLPP_INT64:
    case MSCCLPP_UINT64: return 8;
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

bool exec_op_is_packet(int type)
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
                if (exec_op_is_packet(blk->ops[i].type)) return true;
        }
    return false;
}

/*
 * Granule of chunk offsets: the element size, and 4 bytes (one packet payload word) when the
 * plan moves packets, so that every packet unit is 8-byte aligned.
 */
uint64_t exec_size_word(const struct mscclpp_plan *plan, uint64_t es)
{
    return plan_uses_packets(plan) && es < 4 ? 4 : es;
}

/* Alignment unit of rounded chunk sizes and tbg slices: lcm(buffer_alignment, word). */
static uint64_t size_unit(const struct mscclpp_plan *plan, uint64_t es)
{
    uint64_t a = plan->alignment ? plan->alignment : 16;
    uint64_t w = exec_size_word(plan, es);
    return a / gcd64(a, w) * w;
}

static uint64_t side_chunk(uint64_t size, uint32_t chunks, uint64_t word, uint64_t unit)
{
    if (size % chunks == 0 && (size / chunks) % word == 0) return size / chunks;
    return exec_round_up((size + chunks - 1) / chunks, unit);
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


uint64_t exec_side_off(const exec_side_t *sd, uint64_t c)
{
    if (!sd->chunks) return c * sd->cs < sd->size ? c * sd->cs : sd->size;
    uint64_t grp = c / sd->per, sub = c % sd->per;
    if (grp >= sd->groups) return sd->size;
    uint64_t o = sub * sd->cs;
    return grp * sd->gsize + (o < sd->gsize ? o : sd->gsize);
}

enum { LAYOUT_OK = 0, LAYOUT_MISMATCH, LAYOUT_BLOCKS_IN, LAYOUT_BLOCKS_OUT };

static int side_layout(const struct mscclpp_plan *plan, int rank, int buf, uint64_t size,
                       uint64_t es, exec_side_t *sd)
{
    const plan_gpu_t *g = &plan->gpus[rank];
    uint64_t unit = size_unit(plan, es), word = exec_size_word(plan, es);
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
                        uint64_t es, exec_side_t *si, exec_side_t *so, uint64_t *cs)
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
    exec_side_t si, so;
    return chunk_layout(plan, rank, in, out, es, &si, &so, cs);
}

bool exec_layout_fits(const struct mscclpp_plan *plan, int rank, size_t in_bytes,
                      size_t out_bytes, mscclpp_dtype_t dtype)
{
    uint64_t es = exec_elem_size(dtype), cs;
    if (!plan || rank < 0 || rank >= plan->nranks || es == 0 || in_bytes % es || out_bytes % es)
        return false;
    return chunk_quiet(plan, rank, in_bytes, out_bytes, es, &cs) == LAYOUT_OK;
}

mscclpp_result_t exec_chunk_bytes(const struct mscclpp_plan *plan, int rank, size_t in_bytes,
                                  size_t out_bytes, mscclpp_dtype_t dtype, uint64_t *chunk)
{
    CHECK_ARG(plan != NULL && chunk != NULL);
    CHECK_ARG(rank >= 0 && rank < plan->nranks);
    uint64_t es = exec_elem_size(dtype);
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
                       (unsigned long long)exec_size_word(plan, es), n,
                       (unsigned long long)(n * exec_size_word(plan, es)), n,
                       (unsigned long long)exec_size_word(plan, es));
    }
    if (bad) {
        return ERR_ARG("plan '%s' rank %d: input %zu B in %u chunks and output %zu B in %u "
                       "chunks do not split into equal chunks (sizes must be in the ratio of the "
                       "chunk counts, and divide into chunks of a multiple of %llu bytes unless "
                       "input and output have the same blocks of chunks)",
                       plan->name, rank, in_bytes, g->input_chunks, out_bytes, g->output_chunks,
                       (unsigned long long)exec_size_word(plan, es));
    }
    return MSCCLPP_OK;
}

/* Logical scratch bytes of `rank` (one half), 0 when it cannot be computed. */
static uint64_t scratch_logical(const struct mscclpp_plan *plan, int rank, uint64_t in,
                                uint64_t out, uint64_t es, bool pkt)
{
    uint64_t cs;
    if (chunk_quiet(plan, rank, in, out, es, &cs)) return 0;
    return exec_round_up(cs * plan->gpus[rank].scratch_chunks * (pkt ? 2 : 1), 64);
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
    uint64_t es = exec_elem_size(dtype);
    if (plan->double_scratch)
        *bytes = 2 * scratch_half(plan, in_bytes, out_bytes, es, pkt);
    else
        *bytes = scratch_logical(plan, rank, in_bytes, out_bytes, es, pkt);
    return MSCCLPP_OK;
}

uint64_t exec_scratch_for_allocs(const struct mscclpp_plan *plan, int rank, uint64_t in_alloc,
                                 uint64_t out_alloc, mscclpp_dtype_t dtype)
{
    const plan_gpu_t *g = &plan->gpus[rank];
    uint64_t cap_in = in_alloc, cap_out = out_alloc;
    if (plan->max_message_size && cap_in > plan->max_message_size) cap_in = plan->max_message_size;
    if (plan->max_message_size && cap_out > plan->max_message_size)
        cap_out = plan->max_message_size;
    /* exec_scratch_bytes wants consistent sizes: derive both from the largest chunk any call
     * on these buffers can have, rounded up so that the lowering's chunk size (a ceiling
     * rounded to the alignment) never exceeds it */
    uint64_t cin = g->input_chunks, cout = g->output_chunks;
    uint64_t per_chunk = 0, unit = plan->alignment > 64 ? plan->alignment : 64;
    if (cin) per_chunk = (cap_in + cin - 1) / cin;
    if (cout && (!cin || (cap_out + cout - 1) / cout < per_chunk))
        per_chunk = (cap_out + cout - 1) / cout;
    per_chunk = exec_round_up(per_chunk, unit);
    uint64_t bytes = 0;
    if (per_chunk > 0 && exec_scratch_bytes(plan, rank, per_chunk * cin, per_chunk * cout, dtype,
                                            &bytes) != MSCCLPP_OK) {
        core_clear_error();
        bytes = 0;
    }
    /* sizes the lowering would refuse anyway: still give the plan room (LL and double scratch
     * at most double it twice) so the error comes from the lowering, with its explanation */
    if (g->scratch_chunks && bytes == 0) bytes = (per_chunk + 64) * g->scratch_chunks * 4;
    return bytes;
}

mscclpp_result_t exec_layout_get(const struct mscclpp_plan *plan, int rank, size_t in_bytes,
                                 size_t out_bytes, mscclpp_dtype_t dtype, exec_layout_t *lay)
{
    memset(lay, 0, sizeof *lay);
    CHECK(exec_chunk_bytes(plan, rank, in_bytes, out_bytes, dtype, &lay->cs));
    lay->in = in_bytes;
    lay->out = out_bytes;
    lay->es = exec_elem_size(dtype);
    lay->word = exec_size_word(plan, lay->es);
    lay->unit = size_unit(plan, lay->es);
    lay->pkt = plan_uses_packets(plan);
    chunk_layout(plan, rank, in_bytes, out_bytes, lay->es, &lay->si, &lay->so, &lay->cs);
    lay->scr_owner = calloc((size_t)plan->nranks, sizeof(uint64_t));
    if (!lay->scr_owner) return ERR(MSCCLPP_ERR_NO_MEMORY, "exec_layout_get: out of memory");
    for (int r = 0; r < plan->nranks; r++) {
        lay->scr_owner[r] = scratch_logical(plan, r, in_bytes, out_bytes, lay->es, lay->pkt);
        if (lay->scr_owner[r] > lay->half) lay->half = lay->scr_owner[r];
    }
    if (!plan->double_scratch) lay->half = 0;
    lay->scratch = plan->double_scratch ? 2 * lay->half : lay->scr_owner[rank];
    return MSCCLPP_OK;
}

void exec_layout_free(exec_layout_t *lay)
{
    free(lay->scr_owner);
    lay->scr_owner = NULL;
}

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
bool exec_desc_gapped(const struct mscclpp_plan *plan, int rank, const plan_desc_t *d,
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
        if (exec_desc_gapped(plan, rank, d[k], &per)) {
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

void exec_op_split(const struct mscclpp_plan *plan, int rank, const plan_block_t *blk, int i,
                     exec_split_t *sp)
{
    const plan_op_t *op = &blk->ops[i];
    memset(sp, 0, sizeof(*sp));
    sp->n_units = 1;
    sp->pieces[0] = 1;
    sp->count = 1;
    /* op types and descriptor counts are the loader's (plan_load.c) */
    if (op->type == PLAN_OP_PIPELINE || op->n_src + op->n_dst == 0) return;
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
int exec_plan_op_of(const struct mscclpp_plan *plan, int rank, int b, int kop)
{
    if (!plan || rank < 0 || rank >= plan->nranks || kop < 0) return -1;
    const plan_gpu_t *g = &plan->gpus[rank];
    if (b < 0 || b >= g->n_blocks) return -1;
    const plan_block_t *blk = &g->blocks[b];
    int64_t k = 0;
    for (int i = 0; i < blk->n_ops; i++) {
        exec_split_t sp;
        exec_op_split(plan, rank, blk, i, &sp);
        k += sp.count;
        if (kop < k) return i;
    }
    return -1;
}
