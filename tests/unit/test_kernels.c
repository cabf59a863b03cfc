/*
 * The plan interpreter on the host backend: every op of plan-format §2 on in-process ranks,
 * reductions for every dtype x op, LL8/LL16 packets, double scratch, repeated launches,
 * pipelines, thread-block groups, barriers, semaphores, switch channels, timeouts, and the
 * MSCCL++ reference plans at 4 ranks. Every byte a plan moves is checked.
 */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/debug.h"
#include "kernels/common/kern_dtype.h"
#include "tests/unit/kern_harness.h"

#define MS (1000000ull)

static const mscclpp_dtype_t all_dtypes[] = {MSCCLPP_FLOAT32,  MSCCLPP_FLOAT16, MSCCLPP_BFLOAT16,
                                             MSCCLPP_INT32,    MSCCLPP_UINT32,  MSCCLPP_INT8,
                                             MSCCLPP_UINT8,    MSCCLPP_FLOAT64, MSCCLPP_FP8_E4M3,
                                             MSCCLPP_FP8_E5M2, MSCCLPP_INT64,   MSCCLPP_UINT64};
#define N_DTYPES ((int)(sizeof(all_dtypes) / sizeof(all_dtypes[0])))
static const mscclpp_redop_t all_ops[] = {MSCCLPP_SUM, MSCCLPP_PROD, MSCCLPP_MIN, MSCCLPP_MAX};

/*
 * A plan for n ranks from one gpu template: "$R" is the rank, "$P" the next rank, "$Q" the
 * previous one, "$N" the rank count, "$2R" 2+rank, "$2P" 2+next rank, "$DR" / "$DP" / "$DQ"
 * twice the rank / next rank / previous rank.
 */
static char *mk_plan(const char *hdr, int n, const char *tmpl)
{
    size_t cap = strlen(hdr) + (size_t)n * (strlen(tmpl) + 64) + 64, len = 0;
    char *s = malloc(cap);
    len += (size_t)snprintf(s, cap, "{%s, \"gpus\": [", hdr);
    for (int r = 0; r < n; r++) {
        if (r) s[len++] = ',';
        for (const char *t = tmpl; *t; t++) {
            int v = -1;
            if (t[0] == '$') {
                if (t[1] == 'R') v = r;
                else if (t[1] == 'P') v = (r + 1) % n;
                else if (t[1] == 'Q') v = (r + n - 1) % n;
                else if (t[1] == 'N') v = n;
                else if (t[1] == '2' && t[2] == 'R') v = 2 + r, t++;
                else if (t[1] == '2' && t[2] == 'P') v = 2 + (r + 1) % n, t++;
                else if (t[1] == 'D' && t[2] == 'R') v = 2 * r, t++;
                else if (t[1] == 'D' && t[2] == 'P') v = 2 * ((r + 1) % n), t++;
                else if (t[1] == 'D' && t[2] == 'Q') v = 2 * ((r + n - 1) % n), t++;
            }
            if (v >= 0) {
                len += (size_t)snprintf(s + len, cap - len, "%d", v);
                t++;
            } else {
                s[len++] = *t;
            }
        }
    }
    snprintf(s + len, cap - len, "]}");
    return s;
}

static struct mscclpp_plan *load_plan(const char *hdr, int n, const char *tmpl)
{
    char *json = mk_plan(hdr, n, tmpl);
    struct mscclpp_plan *p = kh_plan_load(json);
    if (!p) fprintf(stderr, "plan was:\n%s\n", json);
    free(json);
    return p;
}

#define HDR_SIMPLE "\"name\":\"t\",\"collective\":\"custom\",\"protocol\":\"Simple\",\"inplace\":false"
#define HDR_LL "\"name\":\"t\",\"collective\":\"custom\",\"protocol\":\"LL\",\"inplace\":false"
#define HDR_LL_DBL HDR_LL ",\"use_double_scratch_buffer\":true"
#define HDR_AR "\"name\":\"t\",\"collective\":\"allreduce\",\"protocol\":\"Simple\",\"inplace\":false"
#define HDR_AR_LL "\"name\":\"t\",\"collective\":\"allreduce\",\"protocol\":\"LL\",\"inplace\":false"
#define HDR_AG "\"name\":\"t\",\"collective\":\"allgather\",\"protocol\":\"Simple\",\"inplace\":false"
#define HDR_AG_LL "\"name\":\"t\",\"collective\":\"allgather\",\"protocol\":\"LL\",\"inplace\":false"

/* One memory channel to the next rank, its input/output/scratch as remote buffers 0/1/2. */
#define PEER_RES                                                                               \
    "\"channels\":[{\"channel_type\":\"memory\",\"connected_to\":[$P]}],"                      \
    "\"remote_buffers\":[{\"rank\":$P,\"type\":\"i\",\"access_channel_types\":[\"memory\"]},"  \
    "{\"rank\":$P,\"type\":\"o\",\"access_channel_types\":[\"memory\"]},"                      \
    "{\"rank\":$P,\"type\":\"s\",\"access_channel_types\":[\"memory\"]}]"
#define TB_PEER                                                                                \
    "\"channels\":[{\"channel_type\":\"memory\",\"channel_ids\":[0]}],"                        \
    "\"remote_buffer_refs\":[{\"access_channel_type\":\"memory\",\"remote_buffer_ids\":[0,1,2]}]"
#define L_(t, i, n) "{\"type\":\"" t "\",\"index\":" #i ",\"size\":" #n "}"
#define R_(b, i, n) "{\"buffer_id\":" #b ",\"index\":" #i ",\"size\":" #n "}"
#define SIGWAIT                                                                                \
    "{\"name\":\"nop\"},{\"name\":\"signal\",\"channel_ids\":[0],\"channel_type\":\"memory\"},"  \
    "{\"name\":\"wait\",\"channel_ids\":[0],\"channel_type\":\"memory\"},{\"name\":\"nop\"}"

/* An allgather-shaped plan `p` (consumed) on 2 ranks, twice per count, every byte checked. */
static void check_allgather_counts(struct mscclpp_plan *p, mscclpp_dtype_t dt,
                                   const size_t *counts, int ncounts)
{
    ck_assert_ptr_nonnull(p);
    kh_world_t *w;
    ck_assert_int_eq(kh_world_create(p, &w), MSCCLPP_OK);
    char msg[256];
    for (int c = 0; c < ncounts; c++) {
        mscclpp_result_t r = kh_check_collective(w, KH_ALLGATHER, counts[c], dt,
                                                 MSCCLPP_REDOP_PLAN, MSCCLPP_PACKET_LL16, false,
                                                 2, msg, sizeof msg);
        ck_assert_msg(r == MSCCLPP_OK, "count %zu: %s", counts[c], msg);
    }
    kh_world_destroy(w);
    plan_free(p);
}

static void fill_bytes(void *p, size_t n, unsigned seed)
{
    unsigned char *b = p;
    for (size_t i = 0; i < n; i++) b[i] = (unsigned char)(seed * 131u + i * 7u + (i >> 8) + 1u);
}

/* Byte range of chunk c (clipped) for buffer size s and chunk size cs. */
static void chunk_range(uint64_t cs, uint64_t s, uint64_t c, uint64_t *off, uint64_t *len)
{
    uint64_t a = c * cs, b = (c + 1) * cs;
    if (a > s) a = s;
    if (b > s) b = s;
    *off = a;
    *len = b - a;
}

/* ---- conversions ------------------------------------------------------------------------- */

START_TEST(test_convert_f16)
{
#if !defined(__FLT16_MAX__)
    /* no _Float16 in this compiler: check round trips and a few known values only */
    ck_assert(kern_f16_to_f32(0x3c00) == 1.0f && kern_f16_to_f32(0x7bff) == 65504.0f);
    for (uint32_t h = 0; h < 65536; h++)
        if (!isnan(kern_f16_to_f32((uint16_t)h)))
            ck_assert_uint_eq(kern_f32_to_f16(kern_f16_to_f32((uint16_t)h)), h);
#else
    /* every f16 value round-trips; random floats round like the compiler's _Float16 */
    for (uint32_t h = 0; h < 65536; h++) {
        float f = kern_f16_to_f32((uint16_t)h);
        _Float16 ref;
        memcpy(&ref, &(uint16_t){(uint16_t)h}, 2);
        if (isnan(f)) {
            ck_assert(isnan((float)ref));
            continue;
        }
        ck_assert_msg(f == (float)ref, "decode %04x: %g vs %g", h, f, (float)ref);
        ck_assert_uint_eq(kern_f32_to_f16(f), h);
    }
    uint32_t x = 12345;
    for (int i = 0; i < 200000; i++) {
        x = x * 1664525u + 1013904223u;
        float f;
        uint32_t u = (x & 0x8fffffffu) | ((x >> 8 & 0x1f) + 100u) << 23; /* around f16 range */
        memcpy(&f, &u, 4);
        _Float16 ref = (_Float16)f;
        uint16_t rb;
        memcpy(&rb, &ref, 2);
        ck_assert_msg(kern_f32_to_f16(f) == rb, "encode %.9g: %04x vs %04x", f,
                      kern_f32_to_f16(f), rb);
    }
#endif
}
END_TEST

/* Nearest code by brute force, ties to even code (fp8 / bf16 reference). */
static uint32_t brute_encode(float f, int codes, float (*dec)(uint32_t), uint32_t maxfin)
{
    uint32_t best = 0;
    double bd = INFINITY;
    for (int c = 0; c < codes; c++) {
        double v = dec((uint32_t)c);
        if (isnan(v) || (uint32_t)(c & ~(codes >> 1)) > maxfin) continue;
        double d = fabs(v - (double)f);
        if (d < bd || (d == bd && (c & 1) == 0 && signbit(v) == signbit(f))) {
            bd = d;
            best = (uint32_t)c;
        }
    }
    return best;
}
static float dec_e4m3(uint32_t c) { return kern_e4m3_to_f32((uint8_t)c); }
static float dec_e5m2(uint32_t c) { return kern_e5m2_to_f32((uint8_t)c); }

START_TEST(test_convert_fp8_bf16)
{
    /* known values */
    ck_assert(kern_e4m3_to_f32(0x7e) == 448.0f);
    ck_assert(isnan(kern_e4m3_to_f32(0x7f)));
    ck_assert(kern_e4m3_to_f32(0x01) == ldexpf(1, -9));
    ck_assert(kern_e5m2_to_f32(0x7b) == 57344.0f);
    ck_assert(isinf(kern_e5m2_to_f32(0x7c)));
    ck_assert_uint_eq(kern_f32_to_e4m3(1000.0f), 0x7e); /* saturates */
    ck_assert_uint_eq(kern_f32_to_e5m2(1e6f), 0x7c);    /* overflows to inf */
    ck_assert_uint_eq(kern_f32_to_bf16(1.0f), 0x3f80);
    ck_assert(kern_bf16_to_f32(0x3f80) == 1.0f);
    /* every code round-trips */
    for (uint32_t c = 0; c < 256; c++) {
        float a = kern_e4m3_to_f32((uint8_t)c), b = kern_e5m2_to_f32((uint8_t)c);
        if (!isnan(a) && c != 0x80) ck_assert_uint_eq(kern_f32_to_e4m3(a), c);
        if (!isnan(b) && c != 0x80) ck_assert_uint_eq(kern_f32_to_e5m2(b), c);
    }
    /* in-range floats round to the nearest code, ties to even */
    uint32_t x = 777;
    for (int i = 0; i < 20000; i++) {
        x = x * 1664525u + 1013904223u;
        float f = ((float)(x >> 8) / 16777216.0f - 0.5f) * 900.0f;
        if (i % 3 == 0) f /= 512.0f;
        uint32_t s = f < 0 ? 0x80u : 0;
        uint32_t want = brute_encode(fabsf(f), 128, dec_e4m3, 0x7e) | s;
        ck_assert_msg(kern_f32_to_e4m3(f) == want, "e4m3 %.9g: %02x vs %02x", f,
                      kern_f32_to_e4m3(f), want);
        float g = f * 64.0f;
        want = brute_encode(fabsf(g), 128, dec_e5m2, 0x7b) | (g < 0 ? 0x80u : 0);
        ck_assert_msg(kern_f32_to_e5m2(g) == want, "e5m2 %.9g: %02x vs %02x", g,
                      kern_f32_to_e5m2(g), want);
        /* bf16: compare against round-half-even on the bits */
        uint32_t u;
        memcpy(&u, &f, 4);
        uint32_t lo = u & 0xffff, hi = u >> 16;
        uint32_t r = hi + (lo > 0x8000 || (lo == 0x8000 && (hi & 1)));
        ck_assert_uint_eq(kern_f32_to_bf16(f), r);
    }
}
END_TEST

/* ---- plain data ops ---------------------------------------------------------------------- */

START_TEST(test_copy_tails)
{
    struct mscclpp_plan *p = load_plan(
        HDR_SIMPLE, 2,
        "{\"id\":$R,\"input_chunks\":4,\"output_chunks\":4,\"scratch_chunks\":0,"
        "\"channels\":[],\"remote_buffers\":[],\"threadblocks\":[{\"id\":0,\"channels\":[],\"ops\":["
        "{\"name\":\"copy\",\"src_buff\":[" L_("i", 0, 1) "],\"dst_buff\":[" L_("o", 3, 1) "]},"
        "{\"name\":\"copy\",\"src_buff\":[" L_("i", 1, 3) "],\"dst_buff\":[" L_("o", 0, 3) "]}"
        "]}]}");
    ck_assert_ptr_nonnull(p);
    kh_world_t *w;
    ck_assert_int_eq(kh_world_create(p, &w), MSCCLPP_OK);
    static const size_t sizes[] = {4, 5, 64, 100, 1000, 4099, 65536 + 3};
    for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
        size_t s = sizes[k];
        ck_assert_int_eq(kh_world_buffers(w, s, s, MSCCLPP_UINT8, KH_SEPARATE), MSCCLPP_OK);
        for (int r = 0; r < 2; r++) fill_bytes(kh_input(w, r), s, (unsigned)(r + 7 * k));
        ck_assert_int_eq(kh_run(w, MSCCLPP_REDOP_PLAN, MSCCLPP_PACKET_LL16, 0), MSCCLPP_OK);
        uint64_t cs;
        ck_assert_int_eq(exec_chunk_bytes(p, 0, s, s, MSCCLPP_UINT8, &cs), MSCCLPP_OK);
        for (int r = 0; r < 2; r++) {
            unsigned char *want = calloc(1, s);
            const unsigned char *in = kh_input(w, r);
            uint64_t so, sl, d0, dl, s1, s1l, e1, e1l;
            chunk_range(cs, s, 0, &so, &sl);
            chunk_range(cs, s, 3, &d0, &dl);
            memcpy(want + d0, in + so, sl < dl ? sl : dl);
            /* chunks [1,4) -> [0,3) as one descriptor each */
            chunk_range(cs, s, 1, &s1, &s1l);
            s1l = s - s1;
            chunk_range(cs, s, 0, &e1, &e1l);
            e1l = (3 * cs < s ? 3 * cs : s);
            memcpy(want + e1, in + s1, s1l < e1l ? s1l : e1l);
            ck_assert_msg(memcmp(want, kh_output(w, r), s) == 0, "size %zu rank %d", s, r);
            free(want);
        }
        char msg[128];
        ck_assert_msg(kh_guards_ok(w, msg, sizeof msg), "%s", msg);
    }
    kh_world_destroy(w);
    plan_free(p);
}
END_TEST

/* put (and pws/pwsf, plain puts on memory channels) + signal/wait: an allgather of 2. */
static void run_put_like(const char *name)
{
    char tmpl[2048];
    snprintf(tmpl, sizeof tmpl,
             "{\"id\":$R,\"input_chunks\":1,\"output_chunks\":2,\"scratch_chunks\":0," PEER_RES
             ",\"threadblocks\":[{\"id\":0," TB_PEER ",\"ops\":["
             "{\"name\":\"copy\",\"src_buff\":[" L_("i", 0, 1) "],\"dst_buff\":[{\"type\":\"o\","
             "\"index\":$R,\"size\":1}]},"
             "{\"name\":\"%s\",\"src_buff\":[" L_("i", 0, 1) "],\"dst_buff\":[{\"buffer_id\":1,"
             "\"index\":$R,\"size\":1}],\"channel_type\":\"memory\"}," SIGWAIT "]}]}",
             name);
    struct mscclpp_plan *p = load_plan(HDR_AG, 2, tmpl);
    ck_assert_ptr_nonnull(p);
    kh_world_t *w;
    ck_assert_int_eq(kh_world_create(p, &w), MSCCLPP_OK);
    static const size_t counts[] = {1, 3, 25, 1000, 4097};
    char msg[256];
    for (size_t k = 0; k < sizeof(counts) / sizeof(counts[0]); k++) {
        mscclpp_result_t r = kh_check_collective(w, KH_ALLGATHER, counts[k], MSCCLPP_FLOAT32,
                                                 MSCCLPP_REDOP_PLAN, MSCCLPP_PACKET_LL16,
                                                 false, 3, msg, sizeof msg);
        ck_assert_msg(r == MSCCLPP_OK, "%s count %zu: %s", name, counts[k], msg);
        r = kh_check_collective(w, KH_ALLGATHER, counts[k] * 3, MSCCLPP_FLOAT16,
                                MSCCLPP_REDOP_PLAN, MSCCLPP_PACKET_LL16, false, 1, msg,
                                sizeof msg);
        ck_assert_msg(r == MSCCLPP_OK, "%s fp16 count %zu: %s", name, counts[k] * 3, msg);
    }
    /* signals balanced: every wait consumed exactly one signal per launch */
    for (int r = 0; r < 2; r++) {
        uint64_t in, exp;
        kh_channel_counts(w, r, 0, &in, &exp);
        ck_assert_uint_eq(in, exp);
        ck_assert_uint_gt(in, 0);
    }
    kh_world_destroy(w);
    plan_free(p);
}

START_TEST(test_put) { run_put_like("put"); }
END_TEST
START_TEST(test_pws) { run_put_like("pws"); }
END_TEST
START_TEST(test_pwsf) { run_put_like("pwsf"); }
END_TEST

/* get: dst (local) <- src (remote), with different indexes on each side (P3). */
START_TEST(test_get)
{
    struct mscclpp_plan *p = load_plan(
        HDR_SIMPLE, 2,
        "{\"id\":$R,\"input_chunks\":2,\"output_chunks\":2,\"scratch_chunks\":0," PEER_RES
        ",\"threadblocks\":[{\"id\":0," TB_PEER ",\"ops\":["
        "{\"name\":\"rlxsignal\",\"channel_ids\":[0],\"channel_type\":\"memory\"},"
        "{\"name\":\"rlxwait\",\"channel_ids\":[0],\"channel_type\":\"memory\"},"
        "{\"name\":\"get\",\"src_buff\":[" R_(0, 1, 1) "],\"dst_buff\":[" L_("o", 0, 1) "],"
        "\"channel_type\":\"memory\"},"
        "{\"name\":\"copy\",\"src_buff\":[" L_("i", 0, 1) "],\"dst_buff\":[" L_("o", 1, 1) "]},"
        SIGWAIT "]}]}");
    ck_assert_ptr_nonnull(p);
    kh_world_t *w;
    ck_assert_int_eq(kh_world_create(p, &w), MSCCLPP_OK);
    static const size_t sizes[] = {8, 36, 1000, 4104};
    for (size_t k = 0; k < 4; k++) {
        size_t s = sizes[k];
        ck_assert_int_eq(kh_world_buffers(w, s, s, MSCCLPP_UINT8, KH_SEPARATE), MSCCLPP_OK);
        for (int r = 0; r < 2; r++) fill_bytes(kh_input(w, r), s, (unsigned)(r + 3 * k + 1));
        ck_assert_int_eq(kh_run(w, MSCCLPP_REDOP_PLAN, MSCCLPP_PACKET_LL16, 0), MSCCLPP_OK);
        uint64_t cs, o0, l0, o1, l1;
        ck_assert_int_eq(exec_chunk_bytes(p, 0, s, s, MSCCLPP_UINT8, &cs), MSCCLPP_OK);
        chunk_range(cs, s, 0, &o0, &l0);
        chunk_range(cs, s, 1, &o1, &l1);
        uint64_t n = l0 < l1 ? l0 : l1;
        for (int r = 0; r < 2; r++) {
            const char *out = kh_output(w, r), *mine = kh_input(w, r),
                       *peer = kh_input(w, 1 - r);
            ck_assert_msg(memcmp(out + o0, peer + o1, n) == 0, "get size %zu rank %d", s, r);
            ck_assert(memcmp(out + o1, mine + o0, n) == 0);
            for (uint64_t i = n; i < l0; i++) ck_assert_int_eq(out[o0 + i], 0);
        }
        char msg[128];
        ck_assert_msg(kh_guards_ok(w, msg, sizeof msg), "%s", msg);
    }
    kh_world_destroy(w);
    plan_free(p);
}
END_TEST

/* re (local), rre (local + remote), res (reduce + send), each with a tail. */
START_TEST(test_re_rre_res)
{
    struct mscclpp_plan *p = load_plan(
        HDR_SIMPLE, 2,
        "{\"id\":$R,\"input_chunks\":2,\"output_chunks\":4,\"scratch_chunks\":0," PEER_RES
        ",\"threadblocks\":[{\"id\":0," TB_PEER ",\"ops\":["
        "{\"name\":\"re\",\"src_buff\":[" L_("i", 0, 1) "," L_("i", 1, 1) "],\"dst_buff\":["
        L_("o", 0, 1) "],\"reduce_op\":\"sum\"},"
        "{\"name\":\"rre\",\"src_buff\":[" L_("i", 0, 1) "," R_(0, 1, 1) "],\"dst_buff\":["
        L_("o", 1, 1) "],\"channel_type\":\"memory\",\"reduce_op\":\"max\"},"
        "{\"name\":\"res\",\"src_buff\":[" L_("i", 1, 1) "," L_("i", 0, 1) "],\"dst_buff\":["
        "{\"type\":\"o\",\"index\":$2R,\"size\":1},{\"buffer_id\":1,\"index\":$2R,\"size\":1}],"
        "\"channel_type\":\"memory\",\"reduce_op\":\"sum\"}," SIGWAIT "]}]}");
    ck_assert_ptr_nonnull(p);
    kh_world_t *w;
    ck_assert_int_eq(kh_world_create(p, &w), MSCCLPP_OK);
    static const size_t counts[] = {2, 10, 250, 1026};
    for (size_t k = 0; k < 4; k++) {
        size_t n = counts[k], half = n / 2;
        ck_assert_int_eq(kh_world_buffers(w, n * 4, 2 * n * 4, MSCCLPP_INT32, KH_SEPARATE),
                         MSCCLPP_OK);
        for (int r = 0; r < 2; r++)
            for (size_t i = 0; i < n; i++)
                ((int32_t *)kh_input(w, r))[i] = (int32_t)(i * 7 + (size_t)r * 1000 - 300);
        /* the plan's ops (sum/max) when the call says MSCCLPP_REDOP_PLAN */
        ck_assert_int_eq(kh_run(w, MSCCLPP_REDOP_PLAN, MSCCLPP_PACKET_LL16, 0), MSCCLPP_OK);
        for (int r = 0; r < 2; r++) {
            const int32_t *in = kh_input(w, r), *pin = kh_input(w, 1 - r), *out = kh_output(w, r);
            for (size_t i = 0; i < half; i++) {
                ck_assert_int_eq(out[i], in[i] + in[half + i]);                       /* re */
                ck_assert_int_eq(out[half + i], in[i] > pin[half + i] ? in[i] : pin[half + i]);
                for (int s = 0; s < 2; s++) {                                         /* res */
                    const int32_t *sin = kh_input(w, s);
                    ck_assert_int_eq(out[(size_t)(2 + s) * half + i], sin[half + i] + sin[i]);
                }
            }
        }
        /* the call's op replaces the plan's: min everywhere */
        ck_assert_int_eq(kh_run(w, MSCCLPP_MIN, MSCCLPP_PACKET_LL16, 0), MSCCLPP_OK);
        for (int r = 0; r < 2; r++) {
            const int32_t *in = kh_input(w, r), *pin = kh_input(w, 1 - r), *out = kh_output(w, r);
            for (size_t i = 0; i < half; i++) {
                ck_assert_int_eq(out[i], in[i] < in[half + i] ? in[i] : in[half + i]);
                ck_assert_int_eq(out[half + i], in[i] < pin[half + i] ? in[i] : pin[half + i]);
            }
        }
        char msg[128];
        ck_assert_msg(kh_guards_ok(w, msg, sizeof msg), "%s", msg);
    }
    kh_world_destroy(w);
    plan_free(p);
}
END_TEST

/* rres all-pairs allreduce: every dtype x op, sizes with tails. */
#define RRES_PLAN                                                                              \
    "{\"id\":$R,\"input_chunks\":$N,\"output_chunks\":$N,\"scratch_chunks\":0," PEER_RES        \
    ",\"threadblocks\":[{\"id\":0," TB_PEER ",\"ops\":["                                        \
    "{\"name\":\"rres\",\"src_buff\":[{\"type\":\"i\",\"index\":$R,\"size\":1},"               \
    "{\"buffer_id\":0,\"index\":$R,\"size\":1}],\"dst_buff\":[{\"type\":\"o\",\"index\":$R,"   \
    "\"size\":1},{\"buffer_id\":1,\"index\":$R,\"size\":1}],\"channel_type\":\"memory\","      \
    "\"reduce_op\":\"sum\"}," SIGWAIT "]}]}"

START_TEST(test_rres_dtypes_ops)
{
    struct mscclpp_plan *p = load_plan(HDR_AR, 2, RRES_PLAN);
    ck_assert_ptr_nonnull(p);
    kh_world_t *w;
    ck_assert_int_eq(kh_world_create(p, &w), MSCCLPP_OK);
    char msg[256];
    for (int d = 0; d < N_DTYPES; d++)
        for (int o = 0; o < 4; o++) {
            static const size_t counts[] = {1, 37, 1000};
            for (int c = 0; c < 3; c++) {
                mscclpp_result_t r =
                    kh_check_collective(w, KH_ALLREDUCE, counts[c], all_dtypes[d], all_ops[o],
                                        MSCCLPP_PACKET_LL16, false, 1, msg, sizeof msg);
                ck_assert_msg(r == MSCCLPP_OK, "%s %s count %zu: %s",
                              mscclpp_dtype_name(all_dtypes[d]), mscclpp_redop_name(all_ops[o]),
                              counts[c], msg);
            }
        }
    kh_world_destroy(w);
    plan_free(p);
}
END_TEST

/* ---- packets ----------------------------------------------------------------------------- */

/* ppkt + upkt allgather, both packet layouts, tails. */
START_TEST(test_ppkt_upkt)
{
    struct mscclpp_plan *p = load_plan(
        HDR_AG_LL, 2,
        "{\"id\":$R,\"input_chunks\":1,\"output_chunks\":2,\"scratch_chunks\":2," PEER_RES
        ",\"threadblocks\":[{\"id\":0," TB_PEER ",\"ops\":["
        "{\"name\":\"ppkt\",\"src_buff\":[" L_("i", 0, 1) "],\"dst_buff\":[{\"buffer_id\":2,"
        "\"index\":$R,\"size\":1}],\"channel_type\":\"memory\"},"
        "{\"name\":\"copy\",\"src_buff\":[" L_("i", 0, 1) "],\"dst_buff\":[{\"type\":\"o\","
        "\"index\":$R,\"size\":1}]},"
        "{\"name\":\"upkt\",\"src_buff\":[{\"type\":\"s\",\"index\":$P,\"size\":1}],"
        "\"dst_buff\":[{\"type\":\"o\",\"index\":$P,\"size\":1}]}]}]}");
    ck_assert_ptr_nonnull(p);
    kh_world_t *w;
    ck_assert_int_eq(kh_world_create(p, &w), MSCCLPP_OK);
    char msg[256];
    for (int pk = 0; pk < 2; pk++) {
        static const struct {
            mscclpp_dtype_t dt;
            size_t count;
        } cases[] = {{MSCCLPP_FLOAT32, 1}, {MSCCLPP_FLOAT32, 3}, {MSCCLPP_FLOAT16, 2},
                     {MSCCLPP_FLOAT16, 6}, {MSCCLPP_UINT8, 4},   {MSCCLPP_UINT8, 1004},
                     {MSCCLPP_FLOAT64, 5}, {MSCCLPP_FLOAT32, 4099}};
        for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
            mscclpp_result_t r = kh_check_collective(w, KH_ALLGATHER, cases[c].count, cases[c].dt,
                                                     MSCCLPP_REDOP_PLAN, (mscclpp_packet_t)pk,
                                                     false, 3, msg, sizeof msg);
            ck_assert_msg(r == MSCCLPP_OK, "LL%s %s count %zu: %s", pk ? "8" : "16",
                          mscclpp_dtype_name(cases[c].dt), cases[c].count, msg);
        }
    }
    kh_world_destroy(w);
    plan_free(p);
}
END_TEST

/* cpkt (local packets) + rppkt (relay to the peer) + upkt. */
START_TEST(test_cpkt_rppkt)
{
    struct mscclpp_plan *p = load_plan(
        HDR_AG_LL, 2,
        "{\"id\":$R,\"input_chunks\":1,\"output_chunks\":2,\"scratch_chunks\":4," PEER_RES
        ",\"threadblocks\":[{\"id\":0," TB_PEER ",\"ops\":["
        "{\"name\":\"cpkt\",\"src_buff\":[" L_("i", 0, 1) "],\"dst_buff\":[{\"type\":\"s\","
        "\"index\":$R,\"size\":1}]},"
        "{\"name\":\"rppkt\",\"src_buff\":[{\"type\":\"s\",\"index\":$R,\"size\":1}],"
        "\"dst_buff\":[{\"buffer_id\":2,\"index\":$2R,\"size\":1}],\"channel_type\":\"memory\"},"
        "{\"name\":\"copy\",\"src_buff\":[" L_("i", 0, 1) "],\"dst_buff\":[{\"type\":\"o\","
        "\"index\":$R,\"size\":1}]},"
        "{\"name\":\"upkt\",\"src_buff\":[{\"type\":\"s\",\"index\":$2P,\"size\":1}],"
        "\"dst_buff\":[{\"type\":\"o\",\"index\":$P,\"size\":1}]}]}]}");
    ck_assert_ptr_nonnull(p);
    kh_world_t *w;
    ck_assert_int_eq(kh_world_create(p, &w), MSCCLPP_OK);
    char msg[256];
    for (int pk = 0; pk < 2; pk++)
        for (size_t count = 1; count < 2000; count = count * 5 + 2) {
            mscclpp_result_t r =
                kh_check_collective(w, KH_ALLGATHER, count, MSCCLPP_INT32, MSCCLPP_REDOP_PLAN,
                                    (mscclpp_packet_t)pk, false, 2, msg, sizeof msg);
            ck_assert_msg(r == MSCCLPP_OK, "count %zu: %s", count, msg);
        }
    kh_world_destroy(w);
    plan_free(p);
}
END_TEST

/*
 * Packet allreduces of 2 ranks; rank R owns chunk R. ppkt sends my copy of the peer's chunk
 * into the peer's scratch slot R; the reduce ops read it from my slot P; results go back as
 * packets into slot 2+R of the peer, which unpacks them.
 */
#define PKT_AR_HEAD                                                                            \
    "{\"id\":$R,\"input_chunks\":2,\"output_chunks\":2,\"scratch_chunks\":4," PEER_RES          \
    ",\"threadblocks\":[{\"id\":0," TB_PEER ",\"ops\":["                                        \
    "{\"name\":\"ppkt\",\"src_buff\":[{\"type\":\"i\",\"index\":$P,\"size\":1}],"              \
    "\"dst_buff\":[{\"buffer_id\":2,\"index\":$R,\"size\":1}],\"channel_type\":\"memory\"},"
#define PKT_AR_TAIL                                                                            \
    "{\"name\":\"upkt\",\"src_buff\":[{\"type\":\"s\",\"index\":$2P,\"size\":1}],"             \
    "\"dst_buff\":[{\"type\":\"o\",\"index\":$P,\"size\":1}]}]}]}"
#define PKT_SRCS                                                                               \
    "\"src_buff\":[{\"type\":\"i\",\"index\":$R,\"size\":1},{\"type\":\"s\",\"index\":$P,"     \
    "\"size\":1}]"

static const char *const pkt_ar_plans[] = {
    /* respkt */
    PKT_AR_HEAD "{\"name\":\"respkt\"," PKT_SRCS ",\"dst_buff\":[{\"type\":\"o\",\"index\":$R,"
                "\"size\":1},{\"buffer_id\":2,\"index\":$2R,\"size\":1}],"
                "\"channel_type\":\"memory\",\"reduce_op\":\"sum\"}," PKT_AR_TAIL,
    /* repkt + ppkt of the result */
    PKT_AR_HEAD "{\"name\":\"repkt\"," PKT_SRCS ",\"dst_buff\":[{\"type\":\"o\",\"index\":$R,"
                "\"size\":1}],\"reduce_op\":\"sum\"},{\"name\":\"nop\"},"
                "{\"name\":\"ppkt\",\"src_buff\":[{\"type\":\"o\",\"index\":$R,\"size\":1}],"
                "\"dst_buff\":[{\"buffer_id\":2,\"index\":$2R,\"size\":1}],"
                "\"channel_type\":\"memory\"}," PKT_AR_TAIL,
    /* recpkt (local packet copy) + rppkt of the copy */
    PKT_AR_HEAD "{\"name\":\"recpkt\"," PKT_SRCS ",\"dst_buff\":[{\"type\":\"o\",\"index\":$R,"
                "\"size\":1},{\"type\":\"s\",\"index\":$2R,\"size\":1}],\"reduce_op\":\"sum\"},"
                "{\"name\":\"rppkt\",\"src_buff\":[{\"type\":\"s\",\"index\":$2R,\"size\":1}],"
                "\"dst_buff\":[{\"buffer_id\":2,\"index\":$2R,\"size\":1}],"
                "\"channel_type\":\"memory\"}," PKT_AR_TAIL,
    /* recspkt: local packet copy and remote packets in one op */
    PKT_AR_HEAD "{\"name\":\"recspkt\"," PKT_SRCS ",\"dst_buff\":[{\"type\":\"o\",\"index\":$R,"
                "\"size\":1},{\"type\":\"s\",\"index\":$2R,\"size\":1},{\"buffer_id\":2,"
                "\"index\":$2R,\"size\":1}],\"channel_type\":\"memory\",\"reduce_op\":\"sum\"},"
                PKT_AR_TAIL,
};
static const char *const pkt_ar_names[] = {"respkt", "repkt", "recpkt", "recspkt"};

START_TEST(test_packet_reduce_ops)
{
    char msg[256];
    for (int v = 0; v < 4; v++) {
        struct mscclpp_plan *p = load_plan(HDR_AR_LL, 2, pkt_ar_plans[v]);
        ck_assert_ptr_nonnull(p);
        kh_world_t *w;
        ck_assert_int_eq(kh_world_create(p, &w), MSCCLPP_OK);
        for (int pk = 0; pk < 2; pk++) {
            static const struct {
                mscclpp_dtype_t dt;
                size_t count;
            } cases[] = {{MSCCLPP_FLOAT32, 2},  {MSCCLPP_FLOAT32, 1002}, {MSCCLPP_FLOAT16, 4},
                         {MSCCLPP_FLOAT16, 20}, {MSCCLPP_FLOAT64, 6},    {MSCCLPP_UINT8, 1000}};
            for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
                mscclpp_result_t r = kh_check_collective(
                    w, KH_ALLREDUCE, cases[c].count, cases[c].dt, MSCCLPP_SUM,
                    (mscclpp_packet_t)pk, false, 3, msg, sizeof msg);
                ck_assert_msg(r == MSCCLPP_OK, "%s LL%s %s count %zu: %s", pkt_ar_names[v],
                              pk ? "8" : "16", mscclpp_dtype_name(cases[c].dt), cases[c].count,
                              msg);
            }
        }
        kh_world_destroy(w);
        plan_free(p);
    }
}
END_TEST

/* Packet reduction of every dtype x op, LL8 and LL16. */
START_TEST(test_packet_dtypes_ops)
{
    struct mscclpp_plan *p = load_plan(HDR_AR_LL, 2, pkt_ar_plans[0]);
    ck_assert_ptr_nonnull(p);
    kh_world_t *w;
    ck_assert_int_eq(kh_world_create(p, &w), MSCCLPP_OK);
    char msg[256];
    for (int d = 0; d < N_DTYPES; d++)
        for (int o = 0; o < 4; o++)
            for (int pk = 0; pk < 2; pk++) {
                size_t count = 8 * 125 / kh_dtype_size(all_dtypes[d]) + 8;
                mscclpp_result_t r =
                    kh_check_collective(w, KH_ALLREDUCE, count, all_dtypes[d], all_ops[o],
                                        (mscclpp_packet_t)pk, false, 1, msg, sizeof msg);
                ck_assert_msg(r == MSCCLPP_OK, "%s %s LL%s: %s", mscclpp_dtype_name(all_dtypes[d]),
                              mscclpp_redop_name(all_ops[o]), pk ? "8" : "16", msg);
            }
    kh_world_destroy(w);
    plan_free(p);
}
END_TEST

/* Double scratch: consecutive launches alternate halves; the flag advances once per launch. */
START_TEST(test_double_scratch)
{
    struct mscclpp_plan *p = load_plan(HDR_LL_DBL, 2, pkt_ar_plans[0]);
    ck_assert_ptr_nonnull(p);
    kh_world_t *w;
    ck_assert_int_eq(kh_world_create(p, &w), MSCCLPP_OK);
    char msg[256];
    uint64_t need2;
    ck_assert_int_eq(exec_scratch_bytes(p, 0, 4096, 4096, MSCCLPP_FLOAT32, &need2), MSCCLPP_OK);
    ck_assert_uint_eq(need2, 2 * 4 * 2048 * 2); /* 4 chunks x 2048 B x LL x double */
    mscclpp_result_t r = kh_check_collective(w, KH_ALLREDUCE, 1024, MSCCLPP_FLOAT32, MSCCLPP_SUM,
                                             MSCCLPP_PACKET_LL16, false, 7, msg, sizeof msg);
    ck_assert_msg(r == MSCCLPP_OK, "%s", msg);
    for (int k = 0; k < 2; k++) ck_assert_uint_eq(kh_state(w, k)->flags[0], 8);
    /* rank 1's scratch chunk 0 receives rank 0's ppkt; even flags used the upper half */
    const uint64_t *upper = (const uint64_t *)((char *)kh_scratch(w, 1) + need2 / 2);
    const uint64_t *lower = (const uint64_t *)kh_scratch(w, 1);
    ck_assert_uint_eq((uint32_t)(upper[0] >> 32), 6);
    ck_assert_uint_eq((uint32_t)(lower[0] >> 32), 7);
    r = kh_check_collective(w, KH_ALLREDUCE, 1000, MSCCLPP_BFLOAT16, MSCCLPP_MAX,
                            MSCCLPP_PACKET_LL8, false, 5, msg, sizeof msg);
    ck_assert_msg(r == MSCCLPP_OK, "%s", msg);
    kh_world_destroy(w);
    plan_free(p);
}
END_TEST

/* ---- pipelines and thread-block groups -------------------------------------------------- */

START_TEST(test_pipeline)
{
    /* copy, put + signal/wait, ppkt + upkt all inside pipelines with a unit below the chunk */
    struct mscclpp_plan *p = load_plan(
        HDR_AG_LL, 2,
        "{\"id\":$R,\"input_chunks\":1,\"output_chunks\":2,\"scratch_chunks\":2," PEER_RES
        ",\"threadblocks\":[{\"id\":0," TB_PEER ",\"ops\":["
        "{\"name\":\"pipeline\",\"iter_context\":{\"unit_size\":64,\"num_chunks\":1},\"ops\":["
        "{\"name\":\"copy\",\"src_buff\":[" L_("i", 0, 1) "],\"dst_buff\":[{\"type\":\"o\","
        "\"index\":$R,\"size\":1}]},"
        "{\"name\":\"put\",\"src_buff\":[" L_("i", 0, 1) "],\"dst_buff\":[{\"buffer_id\":1,"
        "\"index\":$R,\"size\":1}],\"channel_type\":\"memory\"}," SIGWAIT "]},"
        "{\"name\":\"pipeline\",\"iter_context\":{\"unit_size\":48,\"num_chunks\":1},\"ops\":["
        "{\"name\":\"ppkt\",\"src_buff\":[" L_("i", 0, 1) "],\"dst_buff\":[{\"buffer_id\":2,"
        "\"index\":$R,\"size\":1}],\"channel_type\":\"memory\"},"
        "{\"name\":\"upkt\",\"src_buff\":[{\"type\":\"s\",\"index\":$P,\"size\":1}],"
        "\"dst_buff\":[{\"type\":\"o\",\"index\":$P,\"size\":1}]}]}]}]}");
    ck_assert_ptr_nonnull(p);
    kh_world_t *w;
    ck_assert_int_eq(kh_world_create(p, &w), MSCCLPP_OK);
    char msg[256];
    static const size_t counts[] = {1, 16, 17, 100, 1001};
    for (int c = 0; c < 5; c++) {
        /* check before the second pipeline: clear the output after the first and compare */
        mscclpp_result_t r = kh_check_collective(w, KH_ALLGATHER, counts[c], MSCCLPP_FLOAT32,
                                                 MSCCLPP_REDOP_PLAN, MSCCLPP_PACKET_LL16, false,
                                                 2, msg, sizeof msg);
        ck_assert_msg(r == MSCCLPP_OK, "count %zu: %s", counts[c], msg);
    }
    /* balanced: one signal per iteration per rank */
    uint64_t in, exp;
    kh_channel_counts(w, 0, 0, &in, &exp);
    ck_assert_uint_eq(in, exp);
    kh_world_destroy(w);
    plan_free(p);
}
END_TEST

/* The pipeline alone (no packets, nothing else writes the peer's slot) moves every byte. */
START_TEST(test_pipeline_put_only)
{
    struct mscclpp_plan *p = load_plan(
        HDR_AG, 2,
        "{\"id\":$R,\"input_chunks\":1,\"output_chunks\":2,\"scratch_chunks\":0," PEER_RES
        ",\"threadblocks\":[{\"id\":0," TB_PEER ",\"ops\":["
        "{\"name\":\"copy\",\"src_buff\":[" L_("i", 0, 1) "],\"dst_buff\":[{\"type\":\"o\","
        "\"index\":$R,\"size\":1}]},"
        "{\"name\":\"pipeline\",\"iter_context\":{\"unit_size\":32,\"num_chunks\":1},\"ops\":["
        "{\"name\":\"put\",\"src_buff\":[" L_("i", 0, 1) "],\"dst_buff\":[{\"buffer_id\":1,"
        "\"index\":$R,\"size\":1}],\"channel_type\":\"memory\"}," SIGWAIT "]}]}]}");
    static const size_t counts[] = {1, 8, 9, 333};
    check_allgather_counts(p, MSCCLPP_UINT8, counts, 4);
}
END_TEST

/* tbg: 3 blocks each copy a slice; a pipeline of tbg slices on 2 blocks. */
START_TEST(test_tbg)
{
    struct mscclpp_plan *p = load_plan(
        HDR_SIMPLE, 2,
        "{\"id\":$R,\"input_chunks\":1,\"output_chunks\":2,\"scratch_chunks\":0,"
        "\"channels\":[],\"remote_buffers\":[],\"threadblocks\":["
        "{\"id\":0,\"channels\":[],\"ops\":[{\"name\":\"copy\",\"src_buff\":[" L_("i", 0, 1)
        "],\"dst_buff\":[" L_("o", 0, 1) "],\"tbg_info\":{\"tb_id\":0,\"tbg_size\":3}},"
        "{\"name\":\"pipeline\",\"iter_context\":{\"unit_size\":16,\"num_chunks\":1},\"ops\":["
        "{\"name\":\"copy\",\"src_buff\":[" L_("i", 0, 1) "],\"dst_buff\":[" L_("o", 1, 1)
        "],\"tbg_info\":{\"tb_id\":0,\"tbg_size\":2}}]}]},"
        "{\"id\":1,\"channels\":[],\"ops\":[{\"name\":\"copy\",\"src_buff\":[" L_("i", 0, 1)
        "],\"dst_buff\":[" L_("o", 0, 1) "],\"tbg_info\":{\"tb_id\":1,\"tbg_size\":3}},"
        "{\"name\":\"pipeline\",\"iter_context\":{\"unit_size\":16,\"num_chunks\":1},\"ops\":["
        "{\"name\":\"copy\",\"src_buff\":[" L_("i", 0, 1) "],\"dst_buff\":[" L_("o", 1, 1)
        "],\"tbg_info\":{\"tb_id\":1,\"tbg_size\":2}}]}]},"
        "{\"id\":2,\"channels\":[],\"ops\":[{\"name\":\"copy\",\"src_buff\":[" L_("i", 0, 1)
        "],\"dst_buff\":[" L_("o", 0, 1) "],\"tbg_info\":{\"tb_id\":2,\"tbg_size\":3}}]}]}");
    ck_assert_ptr_nonnull(p);
    kh_world_t *w;
    ck_assert_int_eq(kh_world_create(p, &w), MSCCLPP_OK);
    static const size_t sizes[] = {4, 16, 40, 1000, 4100};
    for (int k = 0; k < 5; k++) {
        size_t s = sizes[k];
        ck_assert_int_eq(kh_world_buffers(w, s, 2 * s, MSCCLPP_UINT8, KH_SEPARATE), MSCCLPP_OK);
        for (int r = 0; r < 2; r++) fill_bytes(kh_input(w, r), s, (unsigned)(r * 5 + k));
        ck_assert_int_eq(kh_run(w, MSCCLPP_REDOP_PLAN, MSCCLPP_PACKET_LL16, 0), MSCCLPP_OK);
        for (int r = 0; r < 2; r++) {
            const char *in = kh_input(w, r), *out = kh_output(w, r);
            ck_assert_msg(memcmp(out, in, s) == 0, "tbg size %zu", s);
            ck_assert_msg(memcmp(out + s, in, s) == 0, "pipelined tbg size %zu", s);
        }
        char msg[128];
        ck_assert_msg(kh_guards_ok(w, msg, sizeof msg), "%s", msg);
    }
    kh_world_destroy(w);
    plan_free(p);
}
END_TEST

/* ---- barriers and semaphores ------------------------------------------------------------- */

START_TEST(test_barrier)
{
    /* block 0 writes o0, barrier, block 1 copies o0 -> o1; then both, barrier again, back. */
    struct mscclpp_plan *p = load_plan(
        HDR_SIMPLE, 2,
        "{\"id\":$R,\"input_chunks\":1,\"output_chunks\":3,\"scratch_chunks\":0,"
        "\"channels\":[],\"remote_buffers\":[],\"threadblocks\":["
        "{\"id\":0,\"channels\":[],\"ops\":[{\"name\":\"copy\",\"src_buff\":[" L_("i", 0, 1)
        "],\"dst_buff\":[" L_("o", 0, 1) "]},"
        "{\"name\":\"barrier\",\"barrier_id\":3,\"num_threadblocks\":2},"
        "{\"name\":\"barrier\",\"barrier_id\":3,\"num_threadblocks\":2},"
        "{\"name\":\"copy\",\"src_buff\":[" L_("o", 1, 1) "],\"dst_buff\":[" L_("o", 2, 1) "]}]},"
        "{\"id\":1,\"channels\":[],\"ops\":["
        "{\"name\":\"barrier\",\"barrier_id\":3,\"num_threadblocks\":2},"
        "{\"name\":\"copy\",\"src_buff\":[" L_("o", 0, 1) "],\"dst_buff\":[" L_("o", 1, 1) "]},"
        "{\"name\":\"barrier\",\"barrier_id\":3,\"num_threadblocks\":2}]}]}");
    ck_assert_ptr_nonnull(p);
    kh_world_t *w;
    ck_assert_int_eq(kh_world_create(p, &w), MSCCLPP_OK);
    size_t s = 65536;
    ck_assert_int_eq(kh_world_buffers(w, s, 3 * s, MSCCLPP_UINT8, KH_SEPARATE), MSCCLPP_OK);
    for (int it = 0; it < 30; it++) {
        for (int r = 0; r < 2; r++) {
            fill_bytes(kh_input(w, r), s, (unsigned)(it * 3 + r));
            memset(kh_output(w, r), 0, 3 * s);
        }
        ck_assert_int_eq(kh_run(w, MSCCLPP_REDOP_PLAN, MSCCLPP_PACKET_LL16, 0), MSCCLPP_OK);
        for (int r = 0; r < 2; r++) {
            const char *in = kh_input(w, r), *out = kh_output(w, r);
            for (int c = 0; c < 3; c++)
                ck_assert_msg(memcmp(out + (size_t)c * s, in, s) == 0, "it %d chunk %d", it, c);
        }
        ck_assert_uint_eq(kh_state(w, 0)->barrier[3].count, 0);
    }
    ck_assert_uint_eq(kh_state(w, 0)->barrier[3].gen, 60);
    kh_world_destroy(w);
    plan_free(p);
}
END_TEST

START_TEST(test_semaphores)
{
    /* sem 0 starts at 0: block 1 waits for block 0's release; sem 1 starts at 1 (a mutex). */
    struct mscclpp_plan *p = load_plan(
        HDR_SIMPLE, 2,
        "{\"id\":$R,\"input_chunks\":1,\"output_chunks\":2,\"scratch_chunks\":0,"
        "\"channels\":[],\"remote_buffers\":[],"
        "\"semaphores\":[{\"init_value\":0},{\"init_value\":1}],\"threadblocks\":["
        "{\"id\":0,\"channels\":[],\"ops\":[{\"name\":\"sem_acquire\",\"semaphore_ids\":[1]},"
        "{\"name\":\"copy\",\"src_buff\":[" L_("i", 0, 1) "],\"dst_buff\":[" L_("o", 0, 1) "]},"
        "{\"name\":\"sem_release\",\"semaphore_ids\":[0,1]}]},"
        "{\"id\":1,\"channels\":[],\"ops\":[{\"name\":\"sem_acquire\",\"semaphore_ids\":[0]},"
        "{\"name\":\"sem_acquire\",\"semaphore_ids\":[1]},"
        "{\"name\":\"copy\",\"src_buff\":[" L_("o", 0, 1) "],\"dst_buff\":[" L_("o", 1, 1) "]},"
        "{\"name\":\"sem_release\",\"semaphore_ids\":[1]}]}]}");
    ck_assert_ptr_nonnull(p);
    kh_world_t *w;
    ck_assert_int_eq(kh_world_create(p, &w), MSCCLPP_OK);
    size_t s = 32768 + 12;
    ck_assert_int_eq(kh_world_buffers(w, s, 2 * s, MSCCLPP_UINT8, KH_SEPARATE), MSCCLPP_OK);
    for (int it = 0; it < 30; it++) {
        for (int r = 0; r < 2; r++) {
            fill_bytes(kh_input(w, r), s, (unsigned)(it * 7 + r));
            memset(kh_output(w, r), 0, 2 * s);
        }
        ck_assert_int_eq(kh_run(w, MSCCLPP_REDOP_PLAN, MSCCLPP_PACKET_LL16, 0), MSCCLPP_OK);
        for (int r = 0; r < 2; r++) {
            const char *in = kh_input(w, r), *out = kh_output(w, r);
            ck_assert(memcmp(out, in, s) == 0);
            ck_assert_msg(memcmp(out + s, in, s) == 0, "it %d: block 1 ran before block 0", it);
            const int32_t *sems = (const int32_t *)(kh_state(w, r) + 1);
            ck_assert_int_eq(sems[0], 0);
            ck_assert_int_eq(sems[1], 1);
        }
    }
    kh_world_destroy(w);
    plan_free(p);
}
END_TEST

/* ---- switch channels (host member-pointer emulation) ------------------------------------ */

#define SWITCH_CHANNELS(n, ranks)                                                              \
    "\"channels\":[{\"channel_type\":\"switch\",\"buffer_type\":\"i\",\"rank_groups\":"        \
    "[{\"size\":" #n ",\"ranks\":" ranks "}]},{\"channel_type\":\"switch\",\"buffer_type\":"   \
    "\"o\",\"rank_groups\":[{\"size\":" #n ",\"ranks\":" ranks "}]}],\"remote_buffers\":[]"

START_TEST(test_switch_glres)
{
    struct mscclpp_plan *p = load_plan(
        HDR_AR, 3,
        "{\"id\":$R,\"input_chunks\":3,\"output_chunks\":3,\"scratch_chunks\":0,"
        SWITCH_CHANNELS(3, "[0,1,2]") ",\"threadblocks\":[{\"id\":0,\"channels\":["
        "{\"channel_type\":\"switch\",\"channel_ids\":[0,1]}],\"ops\":[{\"name\":\"glres\","
        "\"src_buff\":[{\"switch_channel_id\":0,\"index\":$R,\"size\":1}],"
        "\"dst_buff\":[{\"switch_channel_id\":1,\"index\":$R,\"size\":1}],"
        "\"channel_type\":\"switch\",\"reduce_op\":\"sum\"}]}]}");
    ck_assert_ptr_nonnull(p);
    kh_world_t *w;
    ck_assert_int_eq(kh_world_create(p, &w), MSCCLPP_OK);
    char msg[256];
    for (int d = 0; d < N_DTYPES; d++)
        for (int o = 0; o < 4; o++) {
            mscclpp_result_t r =
                kh_check_collective(w, KH_ALLREDUCE, 3 * 64 + 5, all_dtypes[d], all_ops[o],
                                    MSCCLPP_PACKET_LL16, false, 1, msg, sizeof msg);
            ck_assert_msg(r == MSCCLPP_OK, "%s %s: %s", mscclpp_dtype_name(all_dtypes[d]),
                          mscclpp_redop_name(all_ops[o]), msg);
        }
    kh_world_destroy(w);
    plan_free(p);
}
END_TEST

START_TEST(test_switch_gstore)
{
    struct mscclpp_plan *p = load_plan(
        HDR_AG, 3,
        "{\"id\":$R,\"input_chunks\":1,\"output_chunks\":3,\"scratch_chunks\":0,"
        SWITCH_CHANNELS(3, "[0,1,2]") ",\"threadblocks\":[{\"id\":0,\"channels\":["
        "{\"channel_type\":\"switch\",\"channel_ids\":[1]}],\"ops\":[{\"name\":\"gstore\","
        "\"src_buff\":[" L_("i", 0, 1) "],"
        "\"dst_buff\":[{\"switch_channel_id\":0,\"index\":$R,\"size\":1}],"
        "\"channel_type\":\"switch\"}]}]}");
    static const size_t counts[] = {1, 5, 64, 1001};
    check_allgather_counts(p, MSCCLPP_FLOAT16, counts, 4);
}
END_TEST

START_TEST(test_switch_gstorepkt)
{
    /* packets into every member's scratch slot 2+R (a switch channel bound to scratch) */
    struct mscclpp_plan *p = load_plan(
        HDR_AG_LL, 2,
        "{\"id\":$R,\"input_chunks\":1,\"output_chunks\":2,\"scratch_chunks\":4,"
        "\"channels\":[{\"channel_type\":\"switch\",\"buffer_type\":\"s\",\"rank_groups\":"
        "[{\"size\":2,\"ranks\":[0,1]}]}],\"remote_buffers\":[],\"threadblocks\":[{\"id\":0,"
        "\"channels\":[{\"channel_type\":\"switch\",\"channel_ids\":[0]}],\"ops\":["
        "{\"name\":\"cpkt\",\"src_buff\":[" L_("i", 0, 1) "],\"dst_buff\":[{\"type\":\"s\","
        "\"index\":$R,\"size\":1}]},"
        "{\"name\":\"gstorepkt\",\"src_buff\":[{\"type\":\"s\",\"index\":$R,\"size\":1}],"
        "\"dst_buff\":[{\"switch_channel_id\":0,\"index\":$2R,\"size\":1}],"
        "\"channel_type\":\"switch\"},"
        "{\"name\":\"upkt\",\"src_buff\":[" L_("s", 2, 1) "],\"dst_buff\":[" L_("o", 0, 1) "]},"
        "{\"name\":\"upkt\",\"src_buff\":[" L_("s", 3, 1) "],\"dst_buff\":[" L_("o", 1, 1) "]}"
        "]}]}");
    ck_assert_ptr_nonnull(p);
    kh_world_t *w;
    ck_assert_int_eq(kh_world_create(p, &w), MSCCLPP_OK);
    char msg[256];
    for (int pk = 0; pk < 2; pk++)
        for (size_t count = 2; count < 3000; count = count * 7 + 2) {
            mscclpp_result_t r =
                kh_check_collective(w, KH_ALLGATHER, count, MSCCLPP_FLOAT16, MSCCLPP_REDOP_PLAN,
                                    (mscclpp_packet_t)pk, false, 2, msg, sizeof msg);
            ck_assert_msg(r == MSCCLPP_OK, "count %zu: %s", count, msg);
        }
    kh_world_destroy(w);
    plan_free(p);
}
END_TEST

/* ---- errors ------------------------------------------------------------------------------ */

/* Each of 2 ranks waits for a signal its peer sends only after its own wait (balanced counts,
 * so it loads; the order deadlocks). */
#define DEADLOCK_RANK                                                                            \
    "{\"id\":$R,\"input_chunks\":1,\"output_chunks\":1,\"scratch_chunks\":0,"                    \
    "\"channels\":[{\"channel_type\":\"memory\",\"connected_to\":[$P]}],\"remote_buffers\":[],"  \
    "\"threadblocks\":[{\"id\":0,\"channels\":[{\"channel_type\":\"memory\",\"channel_ids\":"     \
    "[0]}],\"ops\":[{\"name\":\"nop\"},{\"name\":\"wait\",\"channel_ids\":[0],"                   \
    "\"channel_type\":\"memory\"},{\"name\":\"signal\",\"channel_ids\":[0],"                      \
    "\"channel_type\":\"memory\"}]}]}"

START_TEST(test_deadlock_timeout)
{
    /* both ranks wait for a signal the other sends only after its wait (balanced counts, so it
     * loads; the order deadlocks) */
    struct mscclpp_plan *p = load_plan(HDR_SIMPLE, 2, DEADLOCK_RANK);
    ck_assert_ptr_nonnull(p);
    kh_world_t *w;
    ck_assert_int_eq(kh_world_create(p, &w), MSCCLPP_OK);
    ck_assert_int_eq(kh_world_buffers(w, 64, 64, MSCCLPP_FLOAT32, KH_SEPARATE), MSCCLPP_OK);
    mscclpp_result_t r = kh_run(w, MSCCLPP_REDOP_PLAN, MSCCLPP_PACKET_LL16, 200 * MS);
    ck_assert_int_eq(r, MSCCLPP_ERR_TIMEOUT);
    const char *m = mscclpp_last_error();
    ck_assert_msg(strstr(m, "rank 0 block 0 op 1 (wait)") && strstr(m, "from rank 1") &&
                      strstr(m, "memory channel 0"),
                  "message: %s", m);
    const kern_error_t *e = &kh_state(w, 0)->err;
    ck_assert_int_eq(e->code, MSCCLPP_ERR_TIMEOUT);
    ck_assert_int_eq(e->peer, 1);
    ck_assert_int_eq(e->op, 1);
    /* both ranks waited for each other: both recorded a timeout; the flag still advanced */
    ck_assert_int_eq(kh_state(w, 1)->err.code, MSCCLPP_ERR_TIMEOUT);
    ck_assert_uint_eq(kh_state(w, 0)->flags[0], 2);
    kh_world_destroy(w);
    plan_free(p);
}
END_TEST

/* An LL read whose packets never come (each rank reads before it writes, so both wait): the
 * timeout names the peer whose ops write them, as the other waits do (issue 8). */
START_TEST(test_packet_timeout_peer)
{
    struct mscclpp_plan *p = load_plan(
        HDR_AG_LL, 2,
        "{\"id\":$R,\"input_chunks\":1,\"output_chunks\":2,\"scratch_chunks\":2," PEER_RES
        ",\"threadblocks\":[{\"id\":0," TB_PEER ",\"ops\":["
        "{\"name\":\"upkt\",\"src_buff\":[{\"type\":\"s\",\"index\":$P,\"size\":1}],"
        "\"dst_buff\":[{\"type\":\"o\",\"index\":$P,\"size\":1}]},"
        "{\"name\":\"ppkt\",\"src_buff\":[" L_("i", 0, 1) "],\"dst_buff\":[{\"buffer_id\":2,"
        "\"index\":$R,\"size\":1}],\"channel_type\":\"memory\"}]}]}");
    ck_assert_ptr_nonnull(p);
    kh_world_t *w;
    ck_assert_int_eq(kh_world_create(p, &w), MSCCLPP_OK);
    ck_assert_int_eq(kh_world_buffers(w, 64, 128, MSCCLPP_FLOAT32, KH_SEPARATE), MSCCLPP_OK);
    mscclpp_result_t r = kh_run(w, MSCCLPP_REDOP_PLAN, MSCCLPP_PACKET_LL16, 200 * MS);
    ck_assert_int_eq(r, MSCCLPP_ERR_TIMEOUT);
    const char *m = mscclpp_last_error();
    ck_assert_msg(strstr(m, "rank 0 block 0 op 0 (upkt)") && strstr(m, "LL packets from rank 1"),
                  "message: %s", m);
    ck_assert_uint_eq(kh_state(w, 0)->err.what, KERN_WAIT_PACKET);
    ck_assert_int_eq(kh_state(w, 0)->err.peer, 1);
    ck_assert_int_eq(kh_state(w, 1)->err.peer, 0);
    kh_world_destroy(w);
    plan_free(p);
}
END_TEST

/* A wait of any kind gives up once this rank's proxy has failed (issue 8): a memory-channel
 * wait on a live node-mate used to sit out the whole timeout (and blame that node-mate first)
 * while the proxy already knew the dead peer. Here both ranks' proxies have failed: the
 * deadlocked waits end at once, recorded as proxy failures with no channel. */
START_TEST(test_wait_sees_proxy_error)
{
    struct mscclpp_plan *p = load_plan(HDR_SIMPLE, 2, DEADLOCK_RANK);
    ck_assert_ptr_nonnull(p);
    kh_world_t *w;
    ck_assert_int_eq(kh_world_create(p, &w), MSCCLPP_OK);
    ck_assert_int_eq(kh_world_buffers(w, 64, 64, MSCCLPP_FLOAT32, KH_SEPARATE), MSCCLPP_OK);
    kern_fifo_t *f = calloc(1, sizeof *f + 16 * sizeof(kern_trigger_t));
    ck_assert_ptr_nonnull(f);
    f->size = 16;
    f->err = (uint64_t)(int64_t)MSCCLPP_ERR_REMOTE; /* as proxy_fail publishes it */
    kh_set_fifo(w, f);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    mscclpp_result_t r = kh_run(w, MSCCLPP_REDOP_PLAN, MSCCLPP_PACKET_LL16, 20000 * MS);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double dt = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9;
    ck_assert_int_eq(r, MSCCLPP_ERR_REMOTE);
    ck_assert_msg(dt < 5.0, "the waits took %.2f s to see the failed proxy", dt);
    const char *m = mscclpp_last_error();
    ck_assert_msg(strstr(m, "rank 0 block 0 op 1 (wait)") &&
                      strstr(m, "stopped waiting because this rank's proxy failed"),
                  "message: %s", m);
    const kern_error_t *e = &kh_state(w, 0)->err;
    ck_assert_uint_eq(e->what, KERN_WAIT_PROXY);
    ck_assert_int_eq(e->channel, -1);
    kh_world_destroy(w);
    free(f);
    plan_free(p);
}
END_TEST

/* Every kind of wait is bounded and records what it waited for. */
START_TEST(test_timeout_kinds)
{
    static const struct {
        const char *tb1; /* ops of block 0 */
        uint32_t what;
        int32_t channel;
    } cases[] = {
        {"{\"name\":\"sem_acquire\",\"semaphore_ids\":[1]},"
         "{\"name\":\"sem_release\",\"semaphore_ids\":[1]}", KERN_WAIT_SEMAPHORE, 1},
        {"{\"name\":\"barrier\",\"barrier_id\":5,\"num_threadblocks\":2}", KERN_WAIT_BARRIER, 5},
        {"{\"name\":\"upkt\",\"src_buff\":[" L_("s", 0, 1) "],\"dst_buff\":[" L_("o", 0, 1)
         "]}", KERN_WAIT_PACKET, -1},
    };
    for (int k = 0; k < 3; k++) {
        char tmpl[2048];
        snprintf(tmpl, sizeof tmpl,
                 "{\"id\":0,\"input_chunks\":1,\"output_chunks\":1,\"scratch_chunks\":1,"
                 "\"channels\":[],\"remote_buffers\":[],\"semaphores\":[{\"init_value\":1},"
                 "{\"init_value\":0}],\"threadblocks\":[{\"id\":0,\"channels\":[],\"ops\":["
                 "{\"name\":\"nop\"},%s]},{\"id\":1,\"channels\":[],\"ops\":[]}]}",
                 cases[k].tb1);
        struct mscclpp_plan *p = load_plan(HDR_LL, 1, tmpl);
        ck_assert_ptr_nonnull(p);
        kh_world_t *w;
        ck_assert_int_eq(kh_world_create(p, &w), MSCCLPP_OK);
        ck_assert_int_eq(kh_world_buffers(w, 64, 64, MSCCLPP_FLOAT32, KH_SEPARATE), MSCCLPP_OK);
        mscclpp_result_t r = kh_run(w, MSCCLPP_REDOP_PLAN, MSCCLPP_PACKET_LL8, 100 * MS);
        ck_assert_int_eq(r, MSCCLPP_ERR_TIMEOUT);
        const kern_error_t *e = &kh_state(w, 0)->err;
        ck_assert_uint_eq(e->what, cases[k].what);
        ck_assert_int_eq(e->block, 0);
        ck_assert_int_eq(e->op, 1);
        ck_assert_int_eq(e->channel, cases[k].channel);
        ck_assert_msg(strstr(mscclpp_last_error(), "rank 0 block 0 op 1"), "%s",
                      mscclpp_last_error());
        /* a reset context runs again: the state is clean */
        kh_world_reset(w);
        ck_assert_int_eq(kh_state(w, 0)->err.code, 0);
        ck_assert_uint_eq(kh_state(w, 0)->flags[0], 1);
        kh_world_destroy(w);
        plan_free(p);
    }
}
END_TEST

START_TEST(test_lower_errors)
{
    /* port channels without their proxy resources (the executor gives them): refused, named */
    struct mscclpp_plan *p = load_plan(
        HDR_SIMPLE, 2,
        "{\"id\":$R,\"input_chunks\":1,\"output_chunks\":2,\"scratch_chunks\":0,"
        "\"channels\":[{\"channel_type\":\"port\",\"connected_to\":[$P]}],"
        "\"remote_buffers\":[{\"rank\":$P,\"type\":\"o\",\"access_channel_types\":[\"port\"]}],"
        "\"threadblocks\":[{\"id\":0,\"channels\":[{\"channel_type\":\"port\",\"channel_ids\":"
        "[0]}],\"remote_buffer_refs\":[{\"access_channel_type\":\"port\",\"remote_buffer_ids\":"
        "[0]}],\"ops\":[{\"name\":\"put\",\"src_buff\":[" L_("i", 0, 1) "],\"dst_buff\":["
        R_(0, 0, 1) "],\"channel_ids\":[0],\"channel_type\":\"port\"}]}]}");
    ck_assert_ptr_nonnull(p);
    kh_world_t *w;
    ck_assert_int_eq(kh_world_create(p, &w), MSCCLPP_OK);
    ck_assert_int_eq(kh_world_buffers(w, 64, 128, MSCCLPP_FLOAT32, KH_SEPARATE), MSCCLPP_OK);
    ck_assert_int_eq(kh_run(w, MSCCLPP_REDOP_PLAN, MSCCLPP_PACKET_LL16, 0),
                     MSCCLPP_ERR_INVALID_ARG);
    ck_assert_msg(strstr(mscclpp_last_error(), "ops[0] (put)") &&
                      strstr(mscclpp_last_error(), "port"),
                  "%s", mscclpp_last_error());
    /* sizes that do not split into equal chunks (allgather-shaped) */
    uint64_t cs;
    ck_assert_int_eq(exec_chunk_bytes(p, 0, 64, 100, MSCCLPP_FLOAT32, &cs),
                     MSCCLPP_ERR_INVALID_ARG);
    ck_assert_int_eq(exec_chunk_bytes(p, 0, 6, 12, MSCCLPP_FLOAT32, &cs), MSCCLPP_ERR_INVALID_ARG);
    ck_assert_int_eq(exec_chunk_bytes(p, 0, 100, 200, MSCCLPP_FLOAT32, &cs), MSCCLPP_OK);
    ck_assert_uint_eq(cs, 100);
    kh_world_destroy(w);
    plan_free(p);
}
END_TEST

/* A rank without thread blocks still launches one (empty) block and advances its flag. */
START_TEST(test_empty_rank)
{
    struct mscclpp_plan *p = load_plan(
        HDR_SIMPLE, 2,
        "{\"id\":$R,\"input_chunks\":1,\"output_chunks\":1,\"scratch_chunks\":0,"
        "\"channels\":[],\"remote_buffers\":[],\"threadblocks\":[]}");
    ck_assert_ptr_nonnull(p);
    kh_world_t *w;
    ck_assert_int_eq(kh_world_create(p, &w), MSCCLPP_OK);
    ck_assert_int_eq(kh_world_buffers(w, 0, 0, MSCCLPP_FLOAT32, KH_SEPARATE), MSCCLPP_OK);
    for (int i = 0; i < 3; i++)
        ck_assert_int_eq(kh_run(w, MSCCLPP_REDOP_PLAN, MSCCLPP_PACKET_LL16, 0), MSCCLPP_OK);
    ck_assert_uint_eq(kh_state(w, 1)->flags[0], 4);
    kh_world_destroy(w);
    plan_free(p);
}
END_TEST

/* ---- uneven sizes: grouped chunk layouts and split ops -------------------------------------- */

#define HDR_RS                                                                                 \
    "\"name\":\"t\",\"collective\":\"reducescatter\",\"protocol\":\"Simple\",\"inplace\":false"
#define HDR_A2A                                                                                \
    "\"name\":\"t\",\"collective\":\"alltoall\",\"protocol\":\"Simple\",\"inplace\":false"

/* Channels to the next and previous rank; remote buffers 0/1: their scratch. */
#define PEER2_RES                                                                              \
    "\"channels\":[{\"channel_type\":\"memory\",\"connected_to\":[$P,$Q]}],"                   \
    "\"remote_buffers\":[{\"rank\":$P,\"type\":\"s\",\"access_channel_types\":[\"memory\"]},"  \
    "{\"rank\":$Q,\"type\":\"s\",\"access_channel_types\":[\"memory\"]}]"
#define TB_PEER2                                                                               \
    "\"channels\":[{\"channel_type\":\"memory\",\"channel_ids\":[0,1]}],"                      \
    "\"remote_buffer_refs\":[{\"access_channel_type\":\"memory\",\"remote_buffer_ids\":[0,1]}]"
#define SIGWAIT2                                                                               \
    "{\"name\":\"nop\"},{\"name\":\"signal\",\"channel_ids\":[0,1],\"channel_type\":\"memory\"},"\
    "{\"name\":\"wait\",\"channel_ids\":[0,1],\"channel_type\":\"memory\"},{\"name\":\"nop\"}"

/* Element counts per rank block: odd (short last chunk of every block), tiny, even. */
static const size_t uneven_counts[] = {61, 1027, 1, 3, 64};
#define N_UNEVEN ((int)(sizeof(uneven_counts) / sizeof(uneven_counts[0])))

static void check_uneven(struct mscclpp_plan *p, kh_coll_t coll, bool all_ops_too)
{
    kh_world_t *w;
    ck_assert_int_eq(kh_world_create(p, &w), MSCCLPP_OK);
    char msg[256];
    for (int d = 0; d < N_DTYPES; d++)
        for (int o = 0; o < (all_ops_too ? 4 : 1); o++)
            for (int c = 0; c < N_UNEVEN; c++) {
                mscclpp_redop_t op = all_ops_too ? all_ops[o] : MSCCLPP_REDOP_PLAN;
                mscclpp_result_t r =
                    kh_check_collective(w, coll, uneven_counts[c], all_dtypes[d], op,
                                        MSCCLPP_PACKET_LL16, false, 2, msg, sizeof msg);
                ck_assert_msg(r == MSCCLPP_OK, "%s %s %zu per block: %s",
                              mscclpp_dtype_name(all_dtypes[d]),
                              all_ops_too ? mscclpp_redop_name(op) : "-", uneven_counts[c], msg);
            }
    /* signals balanced */
    for (int r = 0; r < p->nranks; r++)
        for (int g = 0; g < 2; g++) {
            uint64_t in, exp;
            kh_channel_counts(w, r, g, &in, &exp);
            ck_assert_uint_eq(in, exp);
        }
    kh_world_destroy(w);
}

/*
 * Allgather of 3 with 2 chunks per rank block: every rank puts its 2 input chunks into the
 * peers' scratch slots 2r..2r+1, then copies the whole scratch (6 slots) to the output as one
 * descriptor: the output spans rank blocks with a short chunk each, so the copy is split per
 * chunk.
 */
START_TEST(test_uneven_allgather)
{
    struct mscclpp_plan *p = load_plan(
        HDR_AG, 3,
        "{\"id\":$R,\"input_chunks\":2,\"output_chunks\":6,\"scratch_chunks\":6," PEER2_RES
        ",\"threadblocks\":[{\"id\":0," TB_PEER2 ",\"ops\":["
        "{\"name\":\"put\",\"src_buff\":[" L_("i", 0, 2) "," L_("i", 0, 2) "],\"dst_buff\":["
        "{\"buffer_id\":0,\"index\":$DR,\"size\":2},{\"buffer_id\":1,\"index\":$DR,\"size\":2}],"
        "\"channel_type\":\"memory\"}," SIGWAIT2 ","
        "{\"name\":\"copy\",\"src_buff\":[" L_("s", 0, 6) "],\"dst_buff\":[" L_("o", 0, 6) "]},"
        /* both copies write this rank's block: the second after every thread's first */
        "{\"name\":\"nop\"},"
        "{\"name\":\"copy\",\"src_buff\":[" L_("i", 0, 2) "],\"dst_buff\":[{\"type\":\"o\","
        "\"index\":$DR,\"size\":2}]}]}]}");
    ck_assert_ptr_nonnull(p);
    /* 61 floats: blocks of 244 B in 2 chunks of 128 B (the second 116 B); layout of even sizes
     * unchanged */
    uint64_t cs;
    ck_assert_int_eq(exec_chunk_bytes(p, 0, 244, 3 * 244, MSCCLPP_FLOAT32, &cs), MSCCLPP_OK);
    ck_assert_uint_eq(cs, 128);
    ck_assert_int_eq(exec_chunk_bytes(p, 0, 256, 3 * 256, MSCCLPP_FLOAT32, &cs), MSCCLPP_OK);
    ck_assert_uint_eq(cs, 128);
    ck_assert_int_eq(exec_chunk_bytes(p, 0, 10, 30, MSCCLPP_UINT8, &cs), MSCCLPP_OK);
    ck_assert_uint_eq(cs, 5);
    /* an output that is not 3 whole-element blocks */
    ck_assert_int_eq(exec_chunk_bytes(p, 0, 244, 3 * 244 + 4, MSCCLPP_FLOAT32, &cs),
                     MSCCLPP_ERR_INVALID_ARG);
    check_uneven(p, KH_ALLGATHER, false);
    plan_free(p);
}
END_TEST

/*
 * Reducescatter of 3, 2 chunks per rank block of the input: each rank puts the blocks of its
 * two peers into their scratch (one fused put whose pairs are different chunks: split per
 * pair), then reduces its own block with what the peers sent.
 */
START_TEST(test_uneven_reducescatter)
{
    struct mscclpp_plan *p = load_plan(
        HDR_RS, 3,
        "{\"id\":$R,\"input_chunks\":6,\"output_chunks\":2,\"scratch_chunks\":6," PEER2_RES
        ",\"threadblocks\":[{\"id\":0," TB_PEER2 ",\"ops\":["
        "{\"name\":\"put\",\"src_buff\":[{\"type\":\"i\",\"index\":$DP,\"size\":2},"
        "{\"type\":\"i\",\"index\":$DQ,\"size\":2}],\"dst_buff\":["
        "{\"buffer_id\":0,\"index\":$DR,\"size\":2},{\"buffer_id\":1,\"index\":$DR,\"size\":2}],"
        "\"channel_type\":\"memory\"}," SIGWAIT2 ","
        "{\"name\":\"re\",\"src_buff\":[{\"type\":\"i\",\"index\":$DR,\"size\":2},"
        "{\"type\":\"s\",\"index\":$DP,\"size\":2},{\"type\":\"s\",\"index\":$DQ,\"size\":2}],"
        "\"dst_buff\":[" L_("o", 0, 2) "]}]}]}");
    ck_assert_ptr_nonnull(p);
    check_uneven(p, KH_REDUCESCATTER, true);
    plan_free(p);
}
END_TEST

/*
 * Alltoall of 3, 2 chunks per peer block: a fused put of the two peers' blocks into their
 * scratch (split per pair), the own block into the own slots, then the whole scratch to the
 * output in one copy (split per chunk).
 */
START_TEST(test_uneven_alltoall)
{
    struct mscclpp_plan *p = load_plan(
        HDR_A2A, 3,
        "{\"id\":$R,\"input_chunks\":6,\"output_chunks\":6,\"scratch_chunks\":6," PEER2_RES
        ",\"threadblocks\":[{\"id\":0," TB_PEER2 ",\"ops\":["
        "{\"name\":\"put\",\"src_buff\":[{\"type\":\"i\",\"index\":$DP,\"size\":2},"
        "{\"type\":\"i\",\"index\":$DQ,\"size\":2}],\"dst_buff\":["
        "{\"buffer_id\":0,\"index\":$DR,\"size\":2},{\"buffer_id\":1,\"index\":$DR,\"size\":2}],"
        "\"channel_type\":\"memory\"},"
        "{\"name\":\"copy\",\"src_buff\":[{\"type\":\"i\",\"index\":$DR,\"size\":2}],"
        "\"dst_buff\":[{\"type\":\"s\",\"index\":$DR,\"size\":2}]}," SIGWAIT2 ","
        "{\"name\":\"copy\",\"src_buff\":[" L_("s", 0, 6) "],\"dst_buff\":[" L_("o", 0, 6) "]}"
        "]}]}");
    ck_assert_ptr_nonnull(p);
    check_uneven(p, KH_ALLTOALL, false);
    plan_free(p);
}
END_TEST

/*
 * A fused put whose pairs are a full and a short chunk (src i[1], i[3] -> peer's o[1], o[3])
 * must move each pair's own length: the short last chunk may not truncate chunk 1.
 */
START_TEST(test_fused_put_short_chunk)
{
    struct mscclpp_plan *p = load_plan(
        HDR_SIMPLE, 2,
        "{\"id\":$R,\"input_chunks\":4,\"output_chunks\":4,\"scratch_chunks\":0," PEER_RES
        ",\"threadblocks\":[{\"id\":0," TB_PEER ",\"ops\":["
        "{\"name\":\"put\",\"src_buff\":[" L_("i", 1, 1) "," L_("i", 3, 1) "],\"dst_buff\":["
        R_(1, 1, 1) "," R_(1, 3, 1) "],\"channel_type\":\"memory\"},"
        "{\"name\":\"copy\",\"src_buff\":[" L_("i", 0, 1) "],\"dst_buff\":[" L_("o", 0, 1) "]},"
        "{\"name\":\"copy\",\"src_buff\":[" L_("i", 2, 1) "],\"dst_buff\":[" L_("o", 2, 1) "]},"
        SIGWAIT "]}]}");
    ck_assert_ptr_nonnull(p);
    kh_world_t *w;
    ck_assert_int_eq(kh_world_create(p, &w), MSCCLPP_OK);
    static const size_t sizes[] = {61 * 4, 1027 * 4, 65780 * 4, 4, 12, 64 * 4};
    for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
        size_t s = sizes[k];
        ck_assert_int_eq(kh_world_buffers(w, s, s, MSCCLPP_FLOAT32, KH_SEPARATE), MSCCLPP_OK);
        for (int r = 0; r < 2; r++) fill_bytes(kh_input(w, r), s, (unsigned)(r + 3 * k + 1));
        ck_assert_int_eq(kh_run(w, MSCCLPP_REDOP_PLAN, MSCCLPP_PACKET_LL16, 0), MSCCLPP_OK);
        uint64_t cs;
        ck_assert_int_eq(exec_chunk_bytes(p, 0, s, s, MSCCLPP_FLOAT32, &cs), MSCCLPP_OK);
        for (int r = 0; r < 2; r++) {
            const unsigned char *mine = kh_input(w, r), *peer = kh_input(w, 1 - r);
            const unsigned char *out = kh_output(w, r);
            for (uint64_t c = 0; c < 4; c++) {
                uint64_t off, len;
                chunk_range(cs, s, c, &off, &len);
                const unsigned char *want = (c % 2 ? peer : mine) + off;
                ck_assert_msg(memcmp(out + off, want, len) == 0,
                              "size %zu rank %d chunk %llu (%llu bytes at %llu) differs", s, r,
                              (unsigned long long)c, (unsigned long long)len,
                              (unsigned long long)off);
            }
        }
        char msg[128];
        ck_assert_msg(kh_guards_ok(w, msg, sizeof msg), "%s", msg);
    }
    kh_world_destroy(w);
    plan_free(p);
}
END_TEST

/* Errors after a split op name the plan's op index, not the interpreter's. */
START_TEST(test_split_error_index)
{
    struct mscclpp_plan *p = load_plan(
        HDR_SIMPLE, 2,
        "{\"id\":$R,\"input_chunks\":4,\"output_chunks\":4,\"scratch_chunks\":0," PEER_RES
        ",\"threadblocks\":[{\"id\":0," TB_PEER ",\"ops\":["
        "{\"name\":\"put\",\"src_buff\":[" L_("i", 1, 1) "," L_("i", 3, 1) "],\"dst_buff\":["
        R_(1, 1, 1) "," R_(1, 3, 1) "],\"channel_type\":\"memory\"},"
        "{\"name\":\"wait\",\"channel_ids\":[0],\"channel_type\":\"memory\"},"
        "{\"name\":\"signal\",\"channel_ids\":[0],\"channel_type\":\"memory\"}]}]}");
    ck_assert_ptr_nonnull(p);
    kh_world_t *w;
    ck_assert_int_eq(kh_world_create(p, &w), MSCCLPP_OK);
    ck_assert_int_eq(kh_world_buffers(w, 244, 244, MSCCLPP_FLOAT32, KH_SEPARATE), MSCCLPP_OK);
    ck_assert_int_eq(kh_run(w, MSCCLPP_REDOP_PLAN, MSCCLPP_PACKET_LL16, 100 * MS),
                     MSCCLPP_ERR_TIMEOUT);
    const char *m = mscclpp_last_error();
    ck_assert_msg(strstr(m, "rank 0 block 0 op 1 (wait)"), "message: %s", m);
    ck_assert_int_eq(kh_state(w, 0)->err.op, 2); /* the put became two interpreter ops */
    kh_world_destroy(w);
    plan_free(p);
}
END_TEST

/*
 * A reduce whose input descriptor spans rank blocks, against scratch slots, cannot be split:
 * fine when the blocks split evenly, refused (naming the op and the sizes that work) otherwise.
 */
START_TEST(test_uneven_unsplittable)
{
    struct mscclpp_plan *p = load_plan(
        HDR_RS, 2,
        "{\"id\":$R,\"input_chunks\":4,\"output_chunks\":2,\"scratch_chunks\":4,"
        "\"channels\":[],\"remote_buffers\":[],\"threadblocks\":[{\"id\":0,\"channels\":[],"
        "\"ops\":[{\"name\":\"copy\",\"src_buff\":[" L_("i", 0, 4) "],\"dst_buff\":["
        L_("s", 0, 4) "]},{\"name\":\"re\",\"src_buff\":[" L_("i", 0, 4) "," L_("s", 0, 4) "],"
        "\"dst_buff\":[" L_("s", 0, 4) "]}]}]}");
    ck_assert_ptr_nonnull(p);
    kh_world_t *w;
    ck_assert_int_eq(kh_world_create(p, &w), MSCCLPP_OK);
    ck_assert_int_eq(kh_world_buffers(w, 2 * 64 * 4, 64 * 4, MSCCLPP_FLOAT32, KH_SEPARATE),
                     MSCCLPP_OK);
    for (int r = 0; r < 2; r++) {
        float *in = kh_input(w, r);
        for (int i = 0; i < 128; i++) in[i] = (float)(i + 1000 * r);
    }
    ck_assert_int_eq(kh_run(w, MSCCLPP_SUM, MSCCLPP_PACKET_LL16, 0), MSCCLPP_OK);
    /* even: scratch = 2 * input, slot by slot (the copy was split per chunk, the reduce not) */
    for (int r = 0; r < 2; r++) {
        const float *scr = kh_scratch(w, r);
        for (int i = 0; i < 128; i++)
            ck_assert_msg(scr[i] == (float)(2 * (i + 1000 * r)), "rank %d element %d: %g", r, i,
                          (double)scr[i]);
    }
    ck_assert_int_eq(kh_world_buffers(w, 2 * 61 * 4, 61 * 4, MSCCLPP_FLOAT32, KH_SEPARATE),
                     MSCCLPP_OK);
    ck_assert_int_eq(kh_run(w, MSCCLPP_SUM, MSCCLPP_PACKET_LL16, 0), MSCCLPP_ERR_INVALID_ARG);
    const char *m = mscclpp_last_error();
    ck_assert_msg(strstr(m, "ops[1] (re)") && strstr(m, "spans rank blocks") &&
                      strstr(m, "cannot be split"),
                  "message: %s", m);
    kh_world_destroy(w);
    plan_free(p);
}
END_TEST

/* ---- the per-block layout (kern_args.h, KERN_LAYOUT_*) --------------------------------- */

static struct mscclpp_plan *src_plan(const char *rel)
{
    const char *top = getenv("MSCCLPP_TOP_SRCDIR");
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", top ? top : ".", rel);
    return kh_plan_load_file(path);
}

/* Every byte of entries [from, to) of an array of `size`-byte entries is zero. */
static bool zero_entries(const char *arr, size_t size, uint32_t from, uint32_t to)
{
    for (size_t k = (size_t)from * size; k < (size_t)to * size; k++)
        if (arr[k]) return false;
    return true;
}

/*
 * The blob and arguments of one lowering: with args.blk_ops the arrays where KERN_LAYOUT_* puts
 * them, block b's entries from b times the strides, no block over them, the strides the largest
 * block's (nothing padded for nothing) and the padding zero; without, the blocks back to back
 * (the compact layout). Returns whether the layout is there.
 */
static bool check_layout(const exec_lowered_t *lw, const char *what, int rank)
{
    const char *pb = lw->blob;
    const kern_plan_t *kp = lw->blob;
    const kern_args_t *a = &lw->args;
    const uint32_t nb = (uint32_t)lw->nblocks;
    const kern_block_t *kb = (const kern_block_t *)(pb + KERN_PLAN_BLOCKS_OFF);
    ck_assert_uint_eq(kp->off_blocks, KERN_PLAN_BLOCKS_OFF);
    ck_assert_uint_eq(a->n_blocks, nb);
    if (a->blk_ops == 0) {
        ck_assert_uint_eq(a->blk_descs, 0);
        ck_assert_uint_eq(a->blk_ids, 0);
        for (uint32_t b = 1; b < nb; b++) {
            ck_assert_uint_eq(kb[b].first_op, kb[b - 1].first_op + kb[b - 1].n_ops);
            ck_assert_uint_eq(kb[b].first_desc, kb[b - 1].first_desc + kb[b - 1].n_descs);
            ck_assert_uint_eq(kb[b].first_id, kb[b - 1].first_id + kb[b - 1].n_ids);
        }
        return false;
    }
    const uint32_t bo = a->blk_ops, bd = a->blk_descs, bi = a->blk_ids;
    ck_assert_msg(bo <= KERN_STAGE_OPS && bd <= KERN_STAGE_DESCS && bi <= KERN_STAGE_IDS,
                  "%s rank %d: strides %u %u %u", what, rank, bo, bd, bi);
    ck_assert_uint_eq(kp->off_ops, KERN_LAYOUT_OPS_OFF(nb));
    ck_assert_uint_eq(kp->off_descs, KERN_LAYOUT_DESCS_OFF(nb, bo));
    ck_assert_uint_eq(kp->off_ids, KERN_LAYOUT_IDS_OFF(nb, bo, bd));
    ck_assert_uint_eq(kp->n_ops, nb * bo);
    ck_assert_uint_eq(kp->n_descs, nb * bd);
    ck_assert_uint_eq(kp->n_ids, nb * bi);
    uint32_t most[3] = {0, 0, 0};
    for (uint32_t b = 0; b < nb; b++) {
        ck_assert_msg(kb[b].first_op == b * bo && kb[b].first_desc == b * bd &&
                          kb[b].first_id == b * bi,
                      "%s rank %d block %u: first %u %u %u", what, rank, b, kb[b].first_op,
                      kb[b].first_desc, kb[b].first_id);
        ck_assert(kb[b].n_ops <= bo && kb[b].n_descs <= bd && kb[b].n_ids <= bi);
        ck_assert(zero_entries(pb + kp->off_ops, sizeof(kern_op_t), b * bo + kb[b].n_ops,
                               (b + 1) * bo));
        ck_assert(zero_entries(pb + kp->off_descs, sizeof(kern_desc_t),
                               b * bd + kb[b].n_descs, (b + 1) * bd));
        ck_assert(zero_entries(pb + kp->off_ids, sizeof(uint32_t), b * bi + kb[b].n_ids,
                               (b + 1) * bi));
        if (kb[b].n_ops > most[0]) most[0] = kb[b].n_ops;
        if (kb[b].n_descs > most[1]) most[1] = kb[b].n_descs;
        if (kb[b].n_ids > most[2]) most[2] = kb[b].n_ids;
    }
    ck_assert_msg(most[0] == bo && most[1] == bd && most[2] == bi,
                  "%s rank %d: strides %u %u %u, largest block %u %u %u", what, rank, bo, bd, bi,
                  most[0], most[1], most[2]);
    return true;
}

/* Plans of the source tree, a collective each, and whether their blobs take the layout. */
static const struct {
    const char *file;
    kh_coll_t coll;
    size_t count; /* float32 elements (kh_check_collective's count) */
    bool laid;
} layout_plans[] = {
    {"plans/cuda/allreduce_allpairs_small_2.json", KH_ALLREDUCE, 2, true}, /* 8 B, one block */
    {"plans/cuda/allreduce_allpairs_ip_small_4.json", KH_ALLREDUCE, 2, true},
    {"plans/allreduce_1.json", KH_ALLREDUCE, 2, true},
    {"plans/allreduce_pkt_4.json", KH_ALLREDUCE, 1000, true}, /* blocks of 3, 2, 2 ops */
    {"plans/cuda/allreduce_simple_3.json", KH_ALLREDUCE, 3 * 1024 + 5, true},
    {"plans/cuda/alltoall_3.json", KH_ALLTOALL, 517, true},
    {"plans/allgather_3.json", KH_ALLGATHER, 300, true},
};

/* Input and output bytes of layout_plans[k] on n ranks, as kh_check_collective makes them. */
static void layout_bytes(size_t k, int n, size_t *in, size_t *out)
{
    const size_t b = layout_plans[k].count * 4;
    *in = layout_plans[k].coll == KH_ALLTOALL ? b * (size_t)n : b;
    *out = layout_plans[k].coll == KH_ALLREDUCE ? b : b * (size_t)n;
}

static mscclpp_redop_t layout_op(size_t k)
{
    return layout_plans[k].coll == KH_ALLREDUCE ? MSCCLPP_SUM : MSCCLPP_REDOP_PLAN;
}

/* The plan of layout_plans[k] (to plan_free) and a world for it. */
static kh_world_t *layout_world(size_t k, struct mscclpp_plan **p)
{
    kh_world_t *w;
    *p = src_plan(layout_plans[k].file);
    ck_assert_msg(*p != NULL, "cannot load %s", layout_plans[k].file);
    ck_assert_int_eq(kh_world_create(*p, &w), MSCCLPP_OK);
    return w;
}

/*
 * The lowering writes the per-block layout for the plans the launch prologue is about (one
 * block per rank, and blocks of one shape), checked entry by entry (check_layout); a plan whose
 * padding would more than double the arrays stays compact (block 0: 12 copies, blocks 1 and 2:
 * one each).
 */
START_TEST(test_lower_layout)
{
    for (size_t k = 0; k < sizeof layout_plans / sizeof layout_plans[0]; k++) {
        struct mscclpp_plan *p;
        kh_world_t *w = layout_world(k, &p);
        size_t in, out;
        layout_bytes(k, p->nranks, &in, &out);
        ck_assert_int_eq(kh_world_buffers(w, in, out, MSCCLPP_FLOAT32, KH_SEPARATE), MSCCLPP_OK);
        for (int r = 0; r < p->nranks; r++) {
            exec_lowered_t *lw;
            ck_assert_int_eq(kh_lower(w, r, layout_op(k), MSCCLPP_PACKET_LL16, 0, &lw),
                             MSCCLPP_OK);
            ck_assert_msg(check_layout(lw, layout_plans[k].file, r) == layout_plans[k].laid,
                          "%s rank %d: layout %u", layout_plans[k].file, r, lw->args.blk_ops);
            exec_lowered_free(lw);
        }
        kh_world_destroy(w);
        plan_free(p);
    }
    static const char copy[] =
        "{\"name\":\"copy\",\"src_buff\":[" L_("i", 0, 1) "],\"dst_buff\":[" L_("o", 0, 1) "]}";
    char ops[2048] = "";
    for (int i = 0; i < 12; i++)
        snprintf(ops + strlen(ops), sizeof ops - strlen(ops), "%s%s", i ? "," : "", copy);
    char tmpl[4096];
    snprintf(tmpl, sizeof tmpl,
             "{\"id\":$R,\"input_chunks\":1,\"output_chunks\":1,\"scratch_chunks\":0,"
             "\"channels\":[],\"remote_buffers\":[],\"threadblocks\":["
             "{\"id\":0,\"channels\":[],\"ops\":[%s]},{\"id\":1,\"channels\":[],\"ops\":[%s]},"
             "{\"id\":2,\"channels\":[],\"ops\":[%s]}]}",
             ops, copy, copy);
    struct mscclpp_plan *p = load_plan(HDR_SIMPLE, 1, tmpl);
    ck_assert_ptr_nonnull(p);
    kh_world_t *w;
    ck_assert_int_eq(kh_world_create(p, &w), MSCCLPP_OK);
    ck_assert_int_eq(kh_world_buffers(w, 64, 64, MSCCLPP_UINT8, KH_SEPARATE), MSCCLPP_OK);
    exec_lowered_t *lw;
    ck_assert_int_eq(kh_lower(w, 0, MSCCLPP_REDOP_PLAN, MSCCLPP_PACKET_LL16, 0, &lw), MSCCLPP_OK);
    ck_assert_int_eq(lw->nblocks, 3);
    ck_assert(!check_layout(lw, "uneven", 0));
    exec_lowered_free(lw);
    kh_world_destroy(w);
    plan_free(p);
}
END_TEST

/*
 * The same collectives launched with the layout (each block stages its ops from the arguments,
 * kern_run_block) and without it (through the plan's header, from the same blob) give the
 * same bytes: each run checked element by element (kh_check_collective), and every rank's
 * output of the one compared byte for byte with the other's.
 */
START_TEST(test_layout_same_results)
{
    for (size_t k = 0; k < sizeof layout_plans / sizeof layout_plans[0]; k++) {
        struct mscclpp_plan *p;
        kh_world_t *w = layout_world(k, &p);
        void *with[8] = {0};
        size_t in_bytes, out_bytes;
        char msg[256];
        ck_assert_int_le(p->nranks, 8);
        layout_bytes(k, p->nranks, &in_bytes, &out_bytes);
        for (int off = 0; off < 2; off++) {
            kh_set_no_layout(w, off);
            mscclpp_result_t r = kh_check_collective(w, layout_plans[k].coll,
                                                     layout_plans[k].count, MSCCLPP_FLOAT32,
                                                     layout_op(k), MSCCLPP_PACKET_LL16, false, 2,
                                                     msg, sizeof msg);
            ck_assert_msg(r == MSCCLPP_OK, "%s %s the layout: %s", layout_plans[k].file,
                          off ? "without" : "with", msg);
            for (int r = 0; r < p->nranks; r++) {
                if (!off) {
                    with[r] = malloc(out_bytes);
                    memcpy(with[r], kh_output(w, r), out_bytes);
                } else {
                    ck_assert_msg(memcmp(with[r], kh_output(w, r), out_bytes) == 0,
                                  "%s rank %d: the outputs differ", layout_plans[k].file, r);
                    free(with[r]);
                }
            }
        }
        kh_world_destroy(w);
        plan_free(p);
    }
}
END_TEST

/* ---- reference plans at 4 ranks --------------------------------------------------------- */

static struct mscclpp_plan *ref_plan(const char *file)
{
    const char *top = getenv("MSCCLPP_TOP_SRCDIR");
    char path[1024];
    snprintf(path, sizeof path, "%s/tests/plans-reference/%s", top ? top : ".", file);
    struct mscclpp_plan *p = kh_plan_load_file(path);
    if (!p) {
        snprintf(path, sizeof path, "/work/shared/plans-reference/%s", file);
        p = kh_plan_load_file(path);
    }
    return p;
}

static void run_ref(const char *file, kh_coll_t coll, const size_t *counts, int ncounts,
                    bool all_ops_too)
{
    struct mscclpp_plan *p = ref_plan(file);
    ck_assert_msg(p != NULL, "cannot load %s", file);
    ck_assert_int_eq(p->nranks, 4);
    kh_world_t *w;
    ck_assert_int_eq(kh_world_create(p, &w), MSCCLPP_OK);
    char msg[256];
    for (int d = 0; d < N_DTYPES; d++)
        for (int o = 0; o < (all_ops_too ? 4 : 1); o++)
            for (int c = 0; c < ncounts; c++) {
                size_t count = counts[c] / kh_dtype_size(all_dtypes[d]);
                mscclpp_packet_t pk = (d + c) % 2 ? MSCCLPP_PACKET_LL8 : MSCCLPP_PACKET_LL16;
                mscclpp_result_t r =
                    kh_check_collective(w, coll, count, all_dtypes[d],
                                        all_ops_too ? all_ops[o] : MSCCLPP_REDOP_PLAN, pk, true,
                                        2, msg, sizeof msg);
                ck_assert_msg(r == MSCCLPP_OK, "%s %s %s %zu elements: %s", file,
                              mscclpp_dtype_name(all_dtypes[d]),
                              all_ops_too ? mscclpp_redop_name(all_ops[o]) : "-", count, msg);
            }
    kh_world_destroy(w);
    plan_free(p);
}

/* byte sizes per rank, divided by the element size */
START_TEST(test_ref_allreduce)
{
    static const size_t bytes[] = {4096, 4104 * 8, 520};
    run_ref("allreduce_4.json", KH_ALLREDUCE, bytes, 3, true);
}
END_TEST

START_TEST(test_ref_allreduce_pkt)
{
    static const size_t bytes[] = {2048, 16 * 8 * 9, 1000 * 8};
    run_ref("allreduce_pkt_4.json", KH_ALLREDUCE, bytes, 3, true);
}
END_TEST

/*
 * A plan of 1024 threads per block on a backend whose kernel takes fewer (CUDA's launch bound,
 * hal_device_props_t.kernel_max_threads): the lowering caps the count and every block runs as
 * that many threads, striding over the data; the bytes are the collective's. A plan already
 * under the bound keeps its own count.
 */
START_TEST(test_threads_capped)
{
    static const char *files[] = {"allreduce_4.json", "allreduce_pkt_4.json"};
    char msg[256];
    for (int f = 0; f < 2; f++) {
        struct mscclpp_plan *p = ref_plan(files[f]);
        ck_assert_msg(p != NULL, "cannot load %s", files[f]);
        ck_assert_uint_eq(p->threads_per_block, 1024);
        kh_world_t *w;
        ck_assert_int_eq(kh_world_create(p, &w), MSCCLPP_OK);
        kh_set_kernel_max_threads(w, 6);
        for (int pk = 0; pk < 2; pk++) {
            mscclpp_result_t r =
                kh_check_collective(w, KH_ALLREDUCE, 1000 + 3 * pk, MSCCLPP_FLOAT32, MSCCLPP_SUM,
                                    (mscclpp_packet_t)pk, true, 2, msg, sizeof msg);
            ck_assert_msg(r == MSCCLPP_OK, "%s LL%s: %s", files[f], pk ? "8" : "16", msg);
            ck_assert_int_eq(kh_last_threads(w), 6);
        }
        p->threads_per_block = 3; /* under the bound: its own */
        mscclpp_result_t r =
            kh_check_collective(w, KH_ALLREDUCE, 999, MSCCLPP_BFLOAT16, MSCCLPP_MAX,
                                MSCCLPP_PACKET_LL16, true, 1, msg, sizeof msg);
        ck_assert_msg(r == MSCCLPP_OK, "%s, 3 threads: %s", files[f], msg);
        ck_assert_int_eq(kh_last_threads(w), 3);
        kh_world_destroy(w);
        plan_free(p);
    }
}
END_TEST

START_TEST(test_ref_alltoall)
{
    /* per peer block: 2 chunks each */
    static const size_t bytes[] = {64, 8 * 100, 8 * 1000};
    run_ref("alltoall_4.json", KH_ALLTOALL, bytes, 3, false);
    /* per-peer blocks of an odd element count: grouped chunks (2 per block, the second short) */
    struct mscclpp_plan *p = ref_plan("alltoall_4.json");
    uint64_t cs;
    ck_assert_int_eq(exec_chunk_bytes(p, 0, 4 * 1001 * 8, 4 * 1001 * 8, MSCCLPP_FLOAT64, &cs),
                     MSCCLPP_OK);
    ck_assert_uint_eq(cs, 4016); /* ceil(8008 / 2) rounded up to 16 */
    ck_assert_int_eq(exec_chunk_bytes(p, 0, 4 * 1002 * 4, 4 * 1002 * 4, MSCCLPP_FLOAT32, &cs),
                     MSCCLPP_OK);
    ck_assert_uint_eq(cs, 1002 * 2);
    /* sizes that are not 4 whole-element blocks are refused */
    ck_assert_int_eq(exec_chunk_bytes(p, 0, 4 * 1001 * 8 + 8, 4 * 1001 * 8 + 8, MSCCLPP_FLOAT64,
                                      &cs),
                     MSCCLPP_ERR_INVALID_ARG);
    ck_assert_msg(strstr(mscclpp_last_error(), "rank blocks"), "%s", mscclpp_last_error());
    kh_world_t *w;
    ck_assert_int_eq(kh_world_create(p, &w), MSCCLPP_OK);
    static const size_t counts[] = {61, 1027, 1};
    char msg[256];
    for (int d = 0; d < N_DTYPES; d++)
        for (size_t c = 0; c < sizeof(counts) / sizeof(counts[0]); c++) {
            mscclpp_result_t r = kh_check_collective(w, KH_ALLTOALL, counts[c], all_dtypes[d],
                                                     MSCCLPP_REDOP_PLAN, MSCCLPP_PACKET_LL16,
                                                     true, 2, msg, sizeof msg);
            ck_assert_msg(r == MSCCLPP_OK, "alltoall_4 %s %zu per peer: %s",
                          mscclpp_dtype_name(all_dtypes[d]), counts[c], msg);
        }
    kh_world_destroy(w);
    plan_free(p);
}
END_TEST

START_TEST(test_ref_allgather_pkt)
{
    static const size_t bytes[] = {8, 8 * 33, 4096};
    run_ref("allgather_pkt_rppkt_4.json", KH_ALLGATHER, bytes, 3, false);
    /* odd element counts: fine while rank blocks are whole packet words (4 bytes) ... */
    struct mscclpp_plan *p = ref_plan("allgather_pkt_rppkt_4.json");
    kh_world_t *w;
    ck_assert_int_eq(kh_world_create(p, &w), MSCCLPP_OK);
    static const mscclpp_dtype_t dts[] = {MSCCLPP_FLOAT32, MSCCLPP_INT32, MSCCLPP_FLOAT64};
    static const size_t counts[] = {61, 1027};
    char msg[256];
    for (int d = 0; d < 3; d++)
        for (int c = 0; c < 2; c++) {
            mscclpp_result_t r = kh_check_collective(w, KH_ALLGATHER, counts[c], dts[d],
                                                     MSCCLPP_REDOP_PLAN, MSCCLPP_PACKET_LL16,
                                                     true, 2, msg, sizeof msg);
            ck_assert_msg(r == MSCCLPP_OK, "%s %zu: %s", mscclpp_dtype_name(dts[d]), counts[c],
                          msg);
        }
    /* ... and refused, naming the rule, when a rank block would not start on a packet word */
    uint64_t cs;
    ck_assert_int_eq(exec_chunk_bytes(p, 0, 61 * 2, 4 * 61 * 2, MSCCLPP_FLOAT16, &cs),
                     MSCCLPP_ERR_INVALID_ARG);
    ck_assert_msg(strstr(mscclpp_last_error(), "rank blocks"), "%s", mscclpp_last_error());
    kh_world_destroy(w);
    plan_free(p);
}
END_TEST

START_TEST(test_ref_allgather_nvls)
{
    static const size_t bytes[] = {64, 8 * 64, 8 * 1000};
    run_ref("allgather_nvls_zero_copy_4.json", KH_ALLGATHER, bytes, 3, false);
    /* odd element counts: 8 chunks per rank block, the last short */
    struct mscclpp_plan *p = ref_plan("allgather_nvls_zero_copy_4.json");
    kh_world_t *w;
    ck_assert_int_eq(kh_world_create(p, &w), MSCCLPP_OK);
    static const size_t counts[] = {61, 1027, 3};
    char msg[256];
    for (int d = 0; d < N_DTYPES; d++)
        for (int c = 0; c < 3; c++) {
            mscclpp_result_t r = kh_check_collective(w, KH_ALLGATHER, counts[c], all_dtypes[d],
                                                     MSCCLPP_REDOP_PLAN, MSCCLPP_PACKET_LL16,
                                                     true, 2, msg, sizeof msg);
            ck_assert_msg(r == MSCCLPP_OK, "%s %zu: %s", mscclpp_dtype_name(all_dtypes[d]),
                          counts[c], msg);
        }
    kh_world_destroy(w);
    plan_free(p);
}
END_TEST

/*
 * The same tests with every block run as KH_SIMT_THREADS host threads that stride over the
 * data as a GPU block's threads do (kern_host_run_block_simt): the GPU's indexing (thread
 * strides, unrolled steps of several vectors, remainders, heads and tails, the staged ops and
 * the block syncs) checked on the host at every dtype, op, alignment and tail. 5 threads: an
 * odd count, so a step of U vectors per thread and the single-vector remainder both run.
 */
#define KH_SIMT_THREADS 5
static void simt_setup(void) { kh_set_default_threads(KH_SIMT_THREADS); }
static void simt_teardown(void) { kh_set_default_threads(1); }

static Suite *kernels_suite(void)
{
    Suite *s = suite_create("kernels");
    TCase *tc = tcase_create("ops");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_convert_f16);
    tcase_add_test(tc, test_convert_fp8_bf16);
    tcase_add_test(tc, test_copy_tails);
    tcase_add_test(tc, test_put);
    tcase_add_test(tc, test_pws);
    tcase_add_test(tc, test_pwsf);
    tcase_add_test(tc, test_get);
    tcase_add_test(tc, test_re_rre_res);
    tcase_add_test(tc, test_rres_dtypes_ops);
    tcase_add_test(tc, test_ppkt_upkt);
    tcase_add_test(tc, test_cpkt_rppkt);
    tcase_add_test(tc, test_packet_reduce_ops);
    tcase_add_test(tc, test_packet_dtypes_ops);
    tcase_add_test(tc, test_double_scratch);
    tcase_add_test(tc, test_pipeline);
    tcase_add_test(tc, test_pipeline_put_only);
    tcase_add_test(tc, test_tbg);
    tcase_add_test(tc, test_barrier);
    tcase_add_test(tc, test_semaphores);
    tcase_add_test(tc, test_switch_glres);
    tcase_add_test(tc, test_switch_gstore);
    tcase_add_test(tc, test_switch_gstorepkt);
    tcase_add_test(tc, test_deadlock_timeout);
    tcase_add_test(tc, test_timeout_kinds);
    tcase_add_test(tc, test_packet_timeout_peer);
    tcase_add_test(tc, test_wait_sees_proxy_error);
    tcase_add_test(tc, test_lower_errors);
    tcase_add_test(tc, test_empty_rank);
    tcase_add_test(tc, test_uneven_allgather);
    tcase_add_test(tc, test_uneven_reducescatter);
    tcase_add_test(tc, test_uneven_alltoall);
    tcase_add_test(tc, test_fused_put_short_chunk);
    tcase_add_test(tc, test_split_error_index);
    tcase_add_test(tc, test_uneven_unsplittable);
    tcase_add_test(tc, test_lower_layout);
    tcase_add_test(tc, test_layout_same_results);
    suite_add_tcase(s, tc);
    TCase *ref = tcase_create("reference_plans");
    tcase_set_timeout(ref, 600);
    tcase_add_test(ref, test_ref_allreduce);
    tcase_add_test(ref, test_ref_allreduce_pkt);
    tcase_add_test(ref, test_ref_alltoall);
    tcase_add_test(ref, test_ref_allgather_pkt);
    tcase_add_test(ref, test_ref_allgather_nvls);
    suite_add_tcase(s, ref);
    TCase *simt = tcase_create("threads_per_block");
    tcase_set_timeout(simt, 600);
    tcase_add_checked_fixture(simt, simt_setup, simt_teardown);
    tcase_add_test(simt, test_copy_tails);
    tcase_add_test(simt, test_put);
    tcase_add_test(simt, test_get);
    tcase_add_test(simt, test_re_rre_res);
    tcase_add_test(simt, test_rres_dtypes_ops);
    tcase_add_test(simt, test_ppkt_upkt);
    tcase_add_test(simt, test_cpkt_rppkt);
    tcase_add_test(simt, test_packet_reduce_ops);
    tcase_add_test(simt, test_packet_dtypes_ops);
    tcase_add_test(simt, test_double_scratch);
    tcase_add_test(simt, test_pipeline);
    tcase_add_test(simt, test_tbg);
    tcase_add_test(simt, test_barrier);
    tcase_add_test(simt, test_semaphores);
    tcase_add_test(simt, test_switch_glres);
    tcase_add_test(simt, test_switch_gstore);
    tcase_add_test(simt, test_switch_gstorepkt);
    tcase_add_test(simt, test_uneven_allgather);
    tcase_add_test(simt, test_uneven_reducescatter);
    tcase_add_test(simt, test_timeout_kinds);
    tcase_add_test(simt, test_ref_allreduce_pkt);
    tcase_add_test(simt, test_threads_capped);
    tcase_add_test(simt, test_layout_same_results);
    suite_add_tcase(s, simt);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(kernels_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
