/*
 * Unit test of mscclpp-bench's data helpers (TAP): the software half/bfloat16/fp8 encodings
 * (exhaustive round trips and known bit patterns), integer wrap-around, the size rounding of
 * each collective, and that the checker accepts a correct output and counts every wrong element.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tools/bench_data.h"

static int ntest, nfail;

static void ok(int cond, const char *name)
{
    ntest++;
    if (!cond) nfail++;
    printf("%sok %d - %s\n", cond ? "" : "not ", ntest, name);
}

static unsigned bits(mscclpp_dtype_t dt, double v)
{
    unsigned char buf[8] = {0};
    bench_store(dt, buf, 0, v);
    if (dt == MSCCLPP_FP8_E4M3 || dt == MSCCLPP_FP8_E5M2) return buf[0];
    return (unsigned)(buf[0] | buf[1] << 8);
}

/* Every non-NaN pattern decodes and encodes back to itself. */
static int round_trip(mscclpp_dtype_t dt, unsigned npatterns)
{
    for (unsigned p = 0; p < npatterns; p++) {
        unsigned char in[2] = {(unsigned char)p, (unsigned char)(p >> 8)}, out[2] = {0, 0};
        double v = bench_load(dt, in, 0);
        if (isnan(v)) continue;
        bench_store(dt, out, 0, v);
        if (memcmp(in, out, npatterns > 256 ? 2 : 1) != 0) {
            printf("# %s: pattern 0x%x -> %g -> 0x%x\n", bench_dtype_name(dt), p, v,
                   (unsigned)(out[0] | out[1] << 8));
            return 0;
        }
    }
    return 1;
}

static double reduce2(mscclpp_redop_t op, double a, double b)
{
    switch (op) {
    case MSCCLPP_PROD: return a * b;
    case MSCCLPP_MIN: return fmin(a, b);
    case MSCCLPP_MAX: return fmax(a, b);
    default: return a + b;
    }
}

/* Build the right output of `coll` for `rank` the slow way, check it, then break it. */
static int check_collective(bench_coll_t coll, mscclpp_dtype_t dt, mscclpp_redop_t op, int n,
                            int rank, size_t bytes)
{
    size_t es = mscclpp_dtype_size(dt);
    bench_shape_t s;
    if (!bench_shape(coll, bytes, es, n, &s)) return 0;
    int root = n - 1;
    unsigned char *out = malloc(s.recv_count * es);
    double *acc = calloc(s.recv_count, sizeof(double));
    for (size_t j = 0; j < s.recv_count; j++) {
        size_t b = j / s.block, k = j % s.block;
        switch (coll) {
        case BENCH_ALLREDUCE:
        case BENCH_REDUCESCATTER: {
            size_t idx = coll == BENCH_ALLREDUCE ? j : (size_t)rank * s.block + j;
            /* reduce in the dtype, rank by rank, as a kernel would */
            unsigned char t[8];
            bench_store(dt, t, 0, bench_pattern(dt, op, 1, 0, idx));
            for (int r = 1; r < n; r++) {
                double v = reduce2(op, bench_load(dt, t, 0), bench_pattern(dt, op, 1, r, idx));
                bench_store(dt, t, 0, v);
            }
            acc[j] = bench_load(dt, t, 0);
            break;
        }
        case BENCH_ALLGATHER: acc[j] = bench_pattern(dt, op, 0, (int)b, k); break;
        case BENCH_ALLTOALL: acc[j] = bench_pattern(dt, op, 0, (int)b, rank * s.block + k); break;
        default: acc[j] = bench_pattern(dt, op, 0, root, j); break;
        }
        bench_store(dt, out, j, acc[j]);
    }
    int good = bench_check(coll, dt, op, rank, n, root, &s, out) == 0;
    /* a far-off value in two places, and a poisoned buffer */
    bench_store(dt, out, 0, acc[0] + 64);
    bench_store(dt, out, s.recv_count - 1, acc[s.recv_count - 1] - 64);
    size_t expect_wrong = s.recv_count > 1 ? 2 : 1;
    int bad = bench_check(coll, dt, op, rank, n, root, &s, out) == expect_wrong;
    memset(out, BENCH_POISON, s.recv_count * es);
    int poisoned = bench_check(coll, dt, op, rank, n, root, &s, out) == s.recv_count;
    if (!(good && bad && poisoned))
        printf("# %s %s %s n=%d rank=%d: good %d bad %d poisoned %d\n", bench_coll_name(coll),
               bench_dtype_name(dt), bench_redop_name(op), n, rank, good, bad, poisoned);
    free(out);
    free(acc);
    return good && bad && poisoned;
}

int main(void)
{
    printf("1..17\n");
    ok(bits(MSCCLPP_FLOAT16, 1.0) == 0x3C00 && bits(MSCCLPP_FLOAT16, -2.0) == 0xC000 &&
           bits(MSCCLPP_FLOAT16, 65504) == 0x7BFF && bits(MSCCLPP_FLOAT16, 0x1p-24) == 0x0001 &&
           bits(MSCCLPP_FLOAT16, 1.0 / 3) == 0x3555 && bits(MSCCLPP_FLOAT16, 1e6) == 0x7C00,
       "half: known encodings (normal, subnormal, rounding, overflow)");
    ok(bits(MSCCLPP_BFLOAT16, 1.0) == 0x3F80 && bits(MSCCLPP_BFLOAT16, 3.0) == 0x4040 &&
           bits(MSCCLPP_BFLOAT16, -256) == 0xC380 && bits(MSCCLPP_BFLOAT16, 1.0 + 0x1p-8) == 0x3F80,
       "bfloat16: known encodings (ties to even)");
    ok(bits(MSCCLPP_FP8_E4M3, 1.0) == 0x38 && bits(MSCCLPP_FP8_E4M3, 448) == 0x7E &&
           bits(MSCCLPP_FP8_E4M3, 0x1p-9) == 0x01 && bits(MSCCLPP_FP8_E4M3, 1000) == 0x7F &&
           bits(MSCCLPP_FP8_E4M3, -16) == 0xD8,
       "fp8 e4m3: known encodings (max 448, subnormal, overflow is NaN)");
    ok(bits(MSCCLPP_FP8_E5M2, 1.0) == 0x3C && bits(MSCCLPP_FP8_E5M2, 57344) == 0x7B &&
           bits(MSCCLPP_FP8_E5M2, 0x1p-16) == 0x01 && bits(MSCCLPP_FP8_E5M2, 1e6) == 0x7C &&
           bits(MSCCLPP_FP8_E5M2, 9) == 0x48,
       "fp8 e5m2: known encodings (max, subnormal, infinity, 9 rounds to 8)");
    ok(round_trip(MSCCLPP_FLOAT16, 1u << 16) && round_trip(MSCCLPP_BFLOAT16, 1u << 16) &&
           round_trip(MSCCLPP_FP8_E4M3, 256) && round_trip(MSCCLPP_FP8_E5M2, 256),
       "every non-NaN half/bfloat16/fp8 pattern round-trips");
    {
        unsigned char b[4];
        int w = 1;
        bench_store(MSCCLPP_INT8, b, 0, 130);
        w &= bench_load(MSCCLPP_INT8, b, 0) == -126;
        bench_store(MSCCLPP_UINT8, b, 1, -1);
        w &= bench_load(MSCCLPP_UINT8, b, 1) == 255;
        bench_store(MSCCLPP_UINT32, b, 0, 4294967296.0 + 5);
        w &= bench_load(MSCCLPP_UINT32, b, 0) == 5;
        ok(w, "integers wrap modulo 2^bits");
    }
    {
        /* -o avg: the sum over 3 ranks divided by 3, truncated toward zero for integers; the
         * undivided sum is wrong wherever it is not 0 */
        bench_shape_t s;
        int32_t out[64], sum[64];
        int w = bench_shape(BENCH_ALLREDUCE, sizeof out, 4, 3, &s), nonzero = 0, negative = 0;
        for (size_t j = 0; j < s.recv_count; j++) {
            double t = 0;
            for (int r = 0; r < 3; r++) t += bench_pattern(MSCCLPP_INT32, BENCH_AVG, 1, r, j);
            sum[j] = (int32_t)t;
            out[j] = sum[j] / 3;
            nonzero += sum[j] != 0;
            negative += sum[j] < 0 && sum[j] % 3 != 0;
        }
        w &= bench_check(BENCH_ALLREDUCE, MSCCLPP_INT32, BENCH_AVG, 0, 3, 0, &s, out) == 0;
        w &= bench_check(BENCH_ALLREDUCE, MSCCLPP_INT32, BENCH_AVG, 0, 3, 0, &s, sum) ==
             (size_t)nonzero;
        ok(w && negative > 0, "avg: the sum divided by the ranks, integers truncated toward zero");
    }
    {
        unsigned char b[16];
        int64_t x;
        bench_store(MSCCLPP_INT64, b, 1, -1099511627781.0); /* -(2^40 + 5) */
        memcpy(&x, b + 8, 8);
        bench_store(MSCCLPP_UINT64, b, 0, 1099511627781.0);
        ok(x == -1099511627781LL && bench_load(MSCCLPP_INT64, b, 1) == -1099511627781.0 &&
               bench_load(MSCCLPP_UINT64, b, 0) == 1099511627781.0,
           "int64/uint64 store and load all 64 bits");
    }
    {
        bench_shape_t s;
        int w = bench_shape(BENCH_ALLGATHER, 1000, 4, 3, &s) && s.block == 83 &&
                s.send_count == 83 && s.recv_count == 249 &&
                bench_shape_bytes(BENCH_ALLGATHER, &s, 4) == 996;
        w &= bench_shape(BENCH_REDUCESCATTER, 1000, 4, 3, &s) && s.send_count == 249 &&
             s.recv_count == 83 && bench_shape_bytes(BENCH_REDUCESCATTER, &s, 4) == 996;
        w &= bench_shape(BENCH_ALLTOALL, 64, 8, 3, &s) && s.block == 2 && s.send_count == 6;
        w &= bench_shape(BENCH_ALLREDUCE, 10, 4, 8, &s) && s.send_count == 2;
        w &= !bench_shape(BENCH_ALLGATHER, 8, 4, 4, &s);
        ok(w, "sizes round down to whole per-rank blocks; too small is skipped");
    }
    ok(fabs(bench_busbw_factor(BENCH_ALLREDUCE, 4) - 1.5) < 1e-12 &&
           fabs(bench_busbw_factor(BENCH_ALLGATHER, 4) - 0.75) < 1e-12 &&
           fabs(bench_busbw_factor(BENCH_ALLTOALL, 8) - 0.875) < 1e-12 &&
           bench_busbw_factor(BENCH_BROADCAST, 8) == 1.0,
       "bus bandwidth factors as nccl-tests");
    ok(bench_coll_parse("reducescatter") == BENCH_REDUCESCATTER && bench_coll_parse("foo") < 0 &&
           bench_dtype_parse("bf16") == MSCCLPP_BFLOAT16 &&
           bench_dtype_parse("fp8e5m2") == MSCCLPP_FP8_E5M2 && bench_dtype_parse("x") < 0 &&
           bench_dtype_parse("int64") == MSCCLPP_INT64 &&
           bench_dtype_parse("uint64") == MSCCLPP_UINT64 &&
           bench_redop_parse("max") == MSCCLPP_MAX && bench_redop_parse("avg") == BENCH_AVG &&
           bench_redop_parse("mean") < 0 && !strcmp(bench_redop_name(BENCH_AVG), "avg"),
       "names parse");
    {
        /* Pattern values are exact in their dtype and prod inputs keep int8 products small. */
        int w = 1;
        for (int dt = 0; dt < MSCCLPP_DTYPE_COUNT; dt++)
            for (int op = 0; op < MSCCLPP_REDOP_COUNT; op++)
                for (int r = 0; r < 8; r++)
                    for (size_t i = 0; i < 4096; i++) {
                        double v = bench_pattern(dt, op, op != MSCCLPP_SUM || r & 1, r, i);
                        unsigned char t[8], poison[8];
                        size_t es = mscclpp_dtype_size(dt);
                        memset(poison, BENCH_POISON, sizeof(poison));
                        bench_store(dt, t, 0, v);
                        w &= bench_load(dt, t, 0) == v && memcmp(t, poison, es) != 0;
                    }
        size_t i = 0;
        for (; i < 4096; i++) {
            double p = 1;
            for (int r = 0; r < 8; r++) p *= bench_pattern(MSCCLPP_INT8, MSCCLPP_PROD, 1, r, i);
            if (fabs(p) > 127) break;
        }
        ok(w && i == 4096, "patterns are exact, never the poison, products fit int8 for 8 ranks");
    }
    static const bench_coll_t colls[] = {BENCH_ALLREDUCE, BENCH_ALLGATHER, BENCH_REDUCESCATTER,
                                         BENCH_ALLTOALL, BENCH_BROADCAST};
    for (size_t c = 0; c < 4; c++) {
        int w = 1;
        for (int dt = 0; dt < MSCCLPP_DTYPE_COUNT; dt++)
            for (int op = 0; op < MSCCLPP_REDOP_COUNT; op++)
                for (int n = 2; n <= 8; n += 3)
                    w &= check_collective(colls[c], dt, op, n, n - 1, 4096);
        char name[96];
        snprintf(name, sizeof(name), "%s: right output passes, 2 wrong elements and poison are "
                 "counted", bench_coll_name(colls[c]));
        ok(w, name);
    }
    /* broadcast does not reduce: one op is enough */
    {
        int w = 1;
        for (int dt = 0; dt < MSCCLPP_DTYPE_COUNT; dt++)
            for (int n = 2; n <= 8; n += 3) w &= check_collective(colls[4], dt, 0, n, 0, 4096);
        ok(w, "broadcast: right output passes, 2 wrong elements and poison are counted");
    }
    return nfail ? 1 : 0;
}
