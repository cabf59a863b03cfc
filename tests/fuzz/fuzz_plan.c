/*
 * Fuzz target over the plan loader (issue 8): every input is loaded as a plan; a plan that
 * loads is verified (mscclpp_plan_verify) and destroyed. Nothing may crash, hang, leak or trip
 * a sanitizer; a rejected input must come with a message.
 *
 * Two drivers:
 *   - libFuzzer (clang -fsanitize=fuzzer): LLVMFuzzerTestOneInput below;
 *   - -DFUZZ_PLAN_STANDALONE (any C compiler): a seeded mutation runner over the corpus
 *     directory, for machines without libFuzzer:  fuzz_plan SEED SECONDS CORPUS_DIR...
 * tests/fuzz/fuzz_plan.sh picks one and runs it for a bounded time.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mscclpp/mscclpp.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static unsigned long n_loaded; /* inputs that loaded (the standalone driver reports it) */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    mscclpp_plan_t *plan = NULL;
    mscclpp_result_t r = mscclpp_plan_load_string((const char *)data, size, &plan);
    if (r == MSCCLPP_OK) {
        n_loaded++;
        (void)mscclpp_plan_verify(plan);
        mscclpp_plan_destroy(plan);
    } else {
        const char *msg = mscclpp_last_error();
        /* Every refusal explains itself: an empty message is a bug worth a crash here. */
        if (!msg || !msg[0]) abort();
        if (plan) abort();
    }
    return 0;
}

#ifdef FUZZ_PLAN_STANDALONE
#include <dirent.h>
#include <time.h>

typedef struct {
    char *data;
    size_t len;
} seed_t;

static uint64_t rng_state;

static uint64_t rnd(void)
{
    /* xorshift64*: reproducible from the seed printed at start */
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 2685821657736338717ull;
}

static int load_dir(const char *dir, seed_t **seeds, size_t *n)
{
    DIR *d = opendir(dir);
    if (!d) {
        perror(dir);
        return -1;
    }
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        FILE *f = fopen(path, "rb");
        if (!f) continue;
        char *buf = malloc(1 << 20);
        size_t len = buf ? fread(buf, 1, 1 << 20, f) : 0;
        fclose(f);
        if (!buf || len == 0) {
            free(buf);
            continue;
        }
        seed_t *s = realloc(*seeds, (*n + 1) * sizeof **seeds);
        if (!s) {
            free(buf);
            break;
        }
        *seeds = s;
        s[*n].data = buf;
        s[*n].len = len;
        (*n)++;
    }
    closedir(d);
    return 0;
}

/* JSON-aware-ish mutations: numbers, keys and structure matter more than random bytes. */
static const char *const tokens[] = {
    "0", "1", "-1", "2", "7", "16", "64", "65", "255", "4294967295", "4294967296",
    "18446744073709551615", "1e308", "0.5", "null", "true", "false", "\"\"", "[]", "{}",
    "\"memory\"", "\"port\"", "\"switch\"", "\"none\"", "\"i\"", "\"o\"", "\"s\"", "\"glre\"",
    "\"glres\"", "\"signal\"", "\"wait\"", "\"rlxwait\"", "\"pipeline\"", "\"barrier\"",
    "\"sem_acquire\"", "\"reduce_op\"", "\"test\"", "[0,0,0,0,0,0,0,0,0]", "\"LL\"",
};

static size_t mutate(char *buf, size_t len, size_t cap)
{
    int n = 1 + (int)(rnd() % 4);
    for (int m = 0; m < n && len > 0; m++) {
        size_t pos = rnd() % len;
        switch (rnd() % 6) {
        case 0: buf[pos] ^= (char)(1u << (rnd() % 8)); break; /* bit flip */
        case 1:                                              /* delete a span */
        {
            size_t k = 1 + rnd() % 16;
            if (pos + k > len) k = len - pos;
            memmove(buf + pos, buf + pos + k, len - pos - k);
            len -= k;
            break;
        }
        case 2:                                              /* duplicate a span */
        {
            size_t k = 1 + rnd() % 64;
            if (pos + k > len) k = len - pos;
            if (len + k > cap) break;
            memmove(buf + pos + k, buf + pos, len - pos);
            len += k;
            break;
        }
        default: /* replace a number or word at pos by a token */
        {
            const char *t = tokens[rnd() % (sizeof tokens / sizeof tokens[0])];
            size_t tl = strlen(t), end = pos;
            while (end < len && (buf[end] == '-' || buf[end] == '.' || buf[end] == '"' ||
                                 (buf[end] >= '0' && buf[end] <= '9') ||
                                 (buf[end] >= 'a' && buf[end] <= 'z')))
                end++;
            if (end == pos) end = pos + 1 < len ? pos + 1 : len;
            if (len - (end - pos) + tl > cap) break;
            memmove(buf + pos + tl, buf + end, len - end);
            memcpy(buf + pos, t, tl);
            len = len - (end - pos) + tl;
            break;
        }
        }
    }
    return len;
}

int main(int argc, char **argv)
{
    if (argc < 4) {
        fprintf(stderr, "usage: %s SEED SECONDS CORPUS_DIR...\n", argv[0]);
        return 2;
    }
    rng_state = strtoull(argv[1], NULL, 0) | 1;
    double secs = atof(argv[2]);
    seed_t *seeds = NULL;
    size_t nseeds = 0;
    for (int i = 3; i < argc; i++)
        if (load_dir(argv[i], &seeds, &nseeds) != 0) return 2;
    if (nseeds == 0) {
        fprintf(stderr, "no seeds in the corpus\n");
        return 2;
    }
    size_t cap = 1 << 21;
    char *buf = malloc(cap);
    if (!buf) return 2;
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    unsigned long runs = 0;
    for (;;) {
        const seed_t *s = &seeds[rnd() % nseeds];
        memcpy(buf, s->data, s->len);
        size_t len = runs < nseeds ? s->len : mutate(buf, s->len, cap);
        (void)LLVMFuzzerTestOneInput((const uint8_t *)buf, len);
        runs++;
        clock_gettime(CLOCK_MONOTONIC, &t);
        if ((double)(t.tv_sec - t0.tv_sec) + (t.tv_nsec - t0.tv_nsec) * 1e-9 >= secs) break;
    }
    printf("fuzz_plan: %lu inputs (%lu loaded), seed %s, no crash\n", runs, n_loaded, argv[1]);
    for (size_t i = 0; i < nseeds; i++) free(seeds[i].data);
    free(seeds);
    free(buf);
    return 0;
}
#endif
