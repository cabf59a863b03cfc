/*
 * Seeded mutation runner for fuzz_boot.c, for machines without libFuzzer: runs every seed of
 * the corpus, then mutated copies of them (bit flips, interesting integers at random offsets,
 * inserts, deletes, splices) until the time is up. A crash or a case running past 5 s writes
 * the input to fuzz_boot-crash.bin (or $FUZZ_BOOT_ARTIFACT) and fails; so does a descriptor
 * left open after the run. Prints TAP.
 *
 *   fuzz_boot [-t seconds] [-s seed] [corpus-dir]
 *
 * Defaults: $FUZZ_BOOT_SECONDS or 20 s, seed $FUZZ_BOOT_SEED or 1,
 * $MSCCLPP_TOP_SRCDIR/tests/fuzz/boot-corpus.
 */
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len);

#define MAX_INPUT 4096
#define MAX_SEEDS 256

static uint8_t *seeds[MAX_SEEDS];
static size_t seed_len[MAX_SEEDS];
static int nseeds;
static uint8_t cur[MAX_INPUT];
static size_t cur_len;
static const char *artifact = "fuzz_boot-crash.bin";

static uint64_t rng_state;
static uint64_t rnd(void)
{
    rng_state += 0x9e3779b97f4a7c15ull;
    uint64_t z = rng_state;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}
static size_t below(size_t n) { return n ? (size_t)(rnd() % n) : 0; }

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Save the input at hand and leave (async-signal-safe calls only). */
static void on_fatal(int sig)
{
    int fd = open(artifact, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd >= 0) {
        (void)!write(fd, cur, cur_len);
        close(fd);
    }
    static const char hang[] = "not ok 1 - fuzz_boot: a case ran past 5 s (hang); input saved\n";
    static const char crash[] = "not ok 1 - fuzz_boot: crash (signal); input saved\n";
    if (sig == SIGALRM)
        (void)!write(1, hang, sizeof hang - 1);
    else
        (void)!write(1, crash, sizeof crash - 1);
    _exit(1);
}

static void load_corpus(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d) return;
    struct dirent *e;
    while ((e = readdir(d)) && nseeds < MAX_SEEDS) {
        if (e->d_name[0] == '.') continue;
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        FILE *f = fopen(path, "rb");
        if (!f) continue;
        uint8_t *buf = malloc(MAX_INPUT);
        size_t n = buf ? fread(buf, 1, MAX_INPUT, f) : 0;
        fclose(f);
        if (!buf || n == 0) {
            free(buf);
            continue;
        }
        seeds[nseeds] = buf;
        seed_len[nseeds++] = n;
    }
    closedir(d);
}

static void put_be32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (24 - 8 * i));
}

static void mutate(void)
{
    static const uint32_t interesting[] = {0,          1,          2,          3,
                                           4,          5,          0x7f,       0x80,
                                           0xff,       0x100,      0xffff,     1u << 20,
                                           (1u << 20) + 1, 0x7fffffff, 0x80000000, 0xffffffff};
    int rounds = 1 + (int)below(8);
    for (int r = 0; r < rounds; r++) {
        switch (below(8)) {
        case 0: /* flip a bit */
            if (cur_len) cur[below(cur_len)] ^= (uint8_t)(1u << below(8));
            break;
        case 1: /* a random byte */
            if (cur_len) cur[below(cur_len)] = (uint8_t)rnd();
            break;
        case 2: /* an interesting 32-bit value, big-endian as on the wire */
            if (cur_len >= 4)
                put_be32(cur + below(cur_len - 3),
                         interesting[below(sizeof interesting / sizeof interesting[0])]);
            break;
        case 3: { /* insert random bytes */
            size_t n = 1 + below(16), at = below(cur_len + 1);
            if (cur_len + n > MAX_INPUT) break;
            memmove(cur + at + n, cur + at, cur_len - at);
            for (size_t i = 0; i < n; i++) cur[at + i] = (uint8_t)rnd();
            cur_len += n;
            break;
        }
        case 4: { /* delete a range */
            if (cur_len < 2) break;
            size_t at = below(cur_len), n = 1 + below(cur_len - at);
            memmove(cur + at, cur + at + n, cur_len - at - n);
            cur_len -= n;
            break;
        }
        case 5: { /* duplicate a range (repeats a chunk: a second hello, a second frame) */
            if (!cur_len) break;
            size_t at = below(cur_len), n = 1 + below(cur_len - at);
            if (cur_len + n > MAX_INPUT) break;
            memmove(cur + at + n, cur + at, cur_len - at);
            cur_len += n;
            break;
        }
        case 6: { /* splice the tail of another seed */
            int s = (int)below((size_t)nseeds);
            size_t at = below(cur_len + 1), from = below(seed_len[s]);
            size_t n = seed_len[s] - from;
            if (at + n > MAX_INPUT) n = MAX_INPUT - at;
            memcpy(cur + at, seeds[s] + from, n);
            cur_len = at + n;
            break;
        }
        default: /* truncate */
            if (cur_len) cur_len = below(cur_len) + 1;
            break;
        }
    }
}

static int open_fds(void)
{
    int n = 0;
    for (int fd = 0; fd < 4096; fd++)
        if (fcntl(fd, F_GETFD) != -1) n++;
    return n;
}

int main(int argc, char **argv)
{
    double seconds = getenv("FUZZ_BOOT_SECONDS") ? atof(getenv("FUZZ_BOOT_SECONDS")) : 20;
    uint64_t seed = getenv("FUZZ_BOOT_SEED") ? strtoull(getenv("FUZZ_BOOT_SEED"), NULL, 0) : 1;
    if (getenv("FUZZ_BOOT_ARTIFACT")) artifact = getenv("FUZZ_BOOT_ARTIFACT");
    int opt;
    while ((opt = getopt(argc, argv, "t:s:")) != -1) {
        if (opt == 't')
            seconds = atof(optarg);
        else if (opt == 's')
            seed = strtoull(optarg, NULL, 0);
        else {
            fprintf(stderr, "usage: %s [-t seconds] [-s seed] [corpus-dir]\n", argv[0]);
            return 2;
        }
    }
    char dir[4096];
    if (optind < argc)
        snprintf(dir, sizeof dir, "%s", argv[optind]);
    else
        snprintf(dir, sizeof dir, "%s/tests/fuzz/boot-corpus",
                 getenv("MSCCLPP_TOP_SRCDIR") ? getenv("MSCCLPP_TOP_SRCDIR") : ".");
    setenv("MSCCLPP_DEBUG", "NONE", 1); /* refusals are the point here, not news */
    printf("1..1\n");
    load_corpus(dir);
    if (nseeds == 0) {
        printf("not ok 1 - fuzz_boot: no seeds in %s\n", dir);
        return 1;
    }
    signal(SIGSEGV, on_fatal);
    signal(SIGBUS, on_fatal);
    signal(SIGABRT, on_fatal);
    signal(SIGFPE, on_fatal);
    signal(SIGILL, on_fatal);
    signal(SIGALRM, on_fatal);
    signal(SIGPIPE, SIG_IGN);
    rng_state = seed;
    int fds_before = open_fds();
    double t0 = now_s(), end = t0 + seconds;
    unsigned long cases = 0, per[2] = {0, 0};
    for (int s = 0; s < nseeds; s++) {
        memcpy(cur, seeds[s], seed_len[s]);
        cur_len = seed_len[s];
        alarm(5);
        LLVMFuzzerTestOneInput(cur, cur_len);
        cases++;
        per[cur[0] & 1]++;
    }
    while (now_s() < end) {
        int s = (int)below((size_t)nseeds);
        memcpy(cur, seeds[s], seed_len[s]);
        cur_len = seed_len[s];
        mutate();
        if (!cur_len) continue;
        alarm(5);
        LLVMFuzzerTestOneInput(cur, cur_len);
        cases++;
        per[cur[0] & 1]++;
    }
    alarm(0);
    int leaked = open_fds() - fds_before;
    printf("# fuzz_boot: %lu cases (%lu root, %lu rank) from %d seeds in %.1f s, seed %llu: "
           "0 crashes, 0 hangs, %d descriptors left open\n",
           cases, per[0], per[1], nseeds, now_s() - t0, (unsigned long long)seed, leaked);
    if (leaked != 0) {
        printf("not ok 1 - fuzz_boot: %d descriptors left open\n", leaked);
        return 1;
    }
    printf("ok 1 - fuzz_boot: %lu cases, no crash, no hang, no descriptor leak\n", cases);
    for (int s = 0; s < nseeds; s++) free(seeds[s]);
    return 0;
}
