/*
 * mscclpp-bench: collective benchmark with the conventions of nccl-tests (sizes, columns,
 * bus bandwidth, checking). Ranks are processes: forked here (--np N) or started by mpiexec.
 * Only the public API is used, so the tool measures what an application would see.
 */
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "mscclpp/mscclpp.h"
#include "mscclpp/native.h"
#ifdef MSCCLPP_HAVE_MPI
#include "mscclpp/mscclpp_mpi.h"
#endif
#include "tools/bench_data.h"
#include "tools/bench_plot.h"
#include "tools/bench_tune.h"
#include "tools/netns.h"

#define EXIT_USAGE 2
#define DEFAULT_TIME_LIMIT 900.0

typedef struct {
    int coll; /* bench_coll_t; -1 when a plan decides */
    const char *plan_path, *plan_dir, *json_path, *csv_path;
    size_t min_bytes, max_bytes, step_bytes;
    unsigned long step_factor; /* 0: linear steps of step_bytes */
    int dtypes[MSCCLPP_DTYPE_COUNT], ndtypes;
    int ops[BENCH_NOPS], nops;
    int iters, warmup, check, root, np, mpi;
    int nodes; /* --nodes K or a+b+c: the --np ranks as that many nodes (tools/netns.h) */
    const char *nodes_spec;
    int node_size[NETNS_MAX_NODES];
    int tcp_boot; /* under mpiexec: TCP bootstrap from a broadcast unique id, not MPI's */
    double time_limit;
    const char *plot_path; /* --plot FILE.svg */
    int average;           /* -a: 0 rank 0's time, 1 mean, 2 min, 3 max over ranks */
    int blocking;          /* -z 1: wait for each call before the next */
    int graph_launches;    /* -G N: time N replays of a graph of the -n calls (0: direct) */
    int cycles;            /* -N: run the whole sweep this many times */
    tune_opts_t tune; /* --tune: tune.path set */
    const char *natives[8]; /* --native MODULE.so: native algorithms to register */
    int nnatives;
    int which; /* --which: print the plan each call of the sweep runs, run nothing */
    int malloc_bufs; /* --malloc: the buffers from malloc (host backend), not mscclpp_malloc */
} opts_t;

/* One column group of a row (out-of-place or in-place). */
typedef struct {
    int ran;               /* 0: not run for this plan */
    mscclpp_result_t err;  /* first error of any rank */
    int err_rank;          /* rank that reported it */
    double time_us;        /* max over ranks */
    long long wrong;       /* summed over ranks; -1 when not checked */
    char msg[256];         /* this rank's error message, when it failed here */
    mscclpp_result_t local_err; /* this rank's error, when it failed here */
    const char *plan;      /* name of the plan that ran; NULL when unknown */
    uint64_t moved;        /* bytes the plan reads and writes, all ranks (0: unknown) */
    double bound;          /* algbw bound (GB/s) from moved and the copy bandwidth; 0: none */
    uint64_t least;        /* the fewest bytes the collective needs, all ranks (0: unknown) */
    double ideal;          /* algbw bound (GB/s) from least and the copy bandwidth; 0: none */
} column_t;

typedef struct {
    const opts_t *o;
    int rank, nranks;
    const char *launcher;
    mscclpp_comm_t *comm;
    mscclpp_bootstrap_t *boot; /* for barriers and exchanging results */
    mscclpp_executor_t *exec;
    mscclpp_stream_t stream; /* NULL: synchronous calls */
    mscclpp_plan_t *plan;
    mscclpp_native_t *natives[8]; /* --native modules, loaded */
    bench_coll_t coll;
    int run_oop, run_ip;
    void *sendbuf, *recvbuf;
    int malloc_bufs; /* from malloc (--malloc), not mscclpp_malloc */
    size_t buf_bytes;
    unsigned char *host;   /* staging for checks, buf_bytes */
    void *xchg;            /* nranks * 8 bytes for allgathers of results */
    FILE *json, *csv;
    int use_mpi;
    void *mpi_send, *mpi_recv;
    double bw_sum;
    double copy_gbps; /* this row: all ranks copying at once, read + written bytes (0: none) */
    size_t copy_bytes; /* this row: bytes each rank copied */
    int bounds;        /* the table has the bound columns (not when tuning) */
    int bw_count, failed_calls;
    long long wrong_total;
    bench_plot_t *plot; /* rank 0 with --plot */
    int nblocks, nthreads; /* launch shape for b->plan (0: the plan's) */
} bench_t;

static void usage(FILE *f, const char *prog)
{
    fprintf(f,
            "usage: %s COLLECTIVE [options]\n"
            "       %s --plan FILE [options]\n"
            "COLLECTIVE: allreduce, allgather, reducescatter, alltoall, broadcast\n"
            "  -b, --minbytes N      smallest size (default 32M; K/M/G suffixes)\n"
            "  -e, --maxbytes N      largest size (default 32M)\n"
            "  -f, --stepfactor N    multiply the size by N between rows (default 2)\n"
            "  -i, --stepbytes N     add N bytes between rows instead\n"
            "  -d, --datatype T      float, half, bfloat16, int32, uint32, int8, uint8, double,\n"
            "                        fp8e4m3, fp8e5m2, int64, uint64 or all (default float)\n"
            "  -o, --op OP           sum, prod, min, max, avg or all (default sum)\n"
            "  -n, --iters N         timed iterations (default 20)\n"
            "  -w, --warmup_iters N  warmup iterations (default 5)\n"
            "  -c, --check 0|1       check results (default 1)\n"
            "  -r, --root N          broadcast root (default 0; with --plan: the plan's root)\n"
            "      --np N            fork N local ranks (otherwise: mpiexec -n N, or 1 rank)\n"
            "      --plan FILE       run this plan (mscclpp_execute) instead of a collective\n"
            "      --plan-dir DIR    load the default plans from DIR\n"
            "      --native FILE.so  register the native algorithms of a module (include/\n"
            "                        mscclpp/native.h) after the plans: the tuner times them,\n"
            "                        a tuning table can choose them (repeatable, 8 at most)\n"
            "      --json FILE       write one JSON record per row to FILE\n"
            "      --csv FILE        write the rows to FILE as CSV (a header line, then one line\n"
            "                        per row; the fields of --json)\n"
            "      --which           run nothing: print, per size and placement, the plan a call\n"
            "                        runs, where it comes from, and the other plans that match\n"
            "      --malloc          host backend: allocate the buffers with malloc (memory\n"
            "                        the peers cannot map: plans that reach the peers' buffers\n"
            "                        run on staged copies) instead of mscclpp_malloc\n"
            "      --mpi             under mpiexec: also time the MPI collective\n"
            "      --bootstrap mpi|tcp  under mpiexec: bootstrap over MPI (default) or over TCP\n"
            "                        from a unique id that rank 0 broadcasts\n"
            "      --time-limit SEC  with --np: kill the ranks after SEC seconds (default %.0f)\n"
            "      --plot FILE.svg   draw busbw and time against size (one line per plan and\n"
            "                        placement, MPI's with --mpi) into FILE.svg\n"
            "  -a, --average 0..3    time reported over ranks: 0 rank 0, 1 mean, 2 min, 3 max\n"
            "                        (default 1, as nccl-tests)\n"
            "  -z, --blocking 0|1    1: wait for each call before starting the next (default 0)\n"
            "  -N, --run_cycles N    run the whole sweep N times (default 1)\n"
            "  -G, --cudagraph N     capture the -n timed calls into one graph (a CUDA/HIP\n"
            "                        graph; the host backend's recording) and time N replays\n"
            "                        of it, as nccl-tests; the check also runs through a\n"
            "                        graph (default 0: direct calls)\n"
            "  -g 1, -t 1            accepted for nccl-tests command lines (one rank per\n"
            "                        process); other values are refused\n"
            "      --tune FILE       sweep plans x blocks x threads per size, write the tuning\n"
            "                        table (FILE 'default': the executor's default path);\n"
            "                        COLLECTIVE optional (default: all five); docs/tuning.md\n"
            "      --tune-blocks L   thread-block counts to try, e.g. 1,4 (default: every plan's)\n"
            "      --tune-threads L  threads per block to try, e.g. 0,512,1024 (0: the plan's;\n"
            "                        default 0 on host, 0,256,512,1024 on GPUs)\n"
            "      --nodes K|a+b+..  with --np: run the ranks as K nodes (the first np %% K one\n"
            "                        rank larger), or nodes of a, b, ... ranks (node-major), each\n"
            "                        a network and UTS namespace of its own (root), else a forced\n"
            "                        node id per rank\n"
            "  -h, --help            this text\n"
            "  -V, --version         the version of mscclpp-bench and of libmscclpp\n"
            "Sizes are nccl-tests sizes: allgather output, reducescatter input, buffer otherwise.\n"
            "Exit status: 0 all good, 1 a check or call failed, 2 bad usage.\n",
            prog, prog, DEFAULT_TIME_LIMIT);
}

/* --- argument parsing ----------------------------------------------------------------------- */

static int parse_size(const char *s, size_t *out)
{
    char *end;
    errno = 0;
    if (*s == '-') return -1;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || end == s) return -1;
    unsigned shift = 0;
    switch (*end) {
    case 'k': case 'K': shift = 10, end++; break;
    case 'm': case 'M': shift = 20, end++; break;
    case 'g': case 'G': shift = 30, end++; break;
    default: break;
    }
    if (*end != '\0' || (shift && v > (SIZE_MAX >> shift))) return -1;
    *out = (size_t)(v << shift);
    return 0;
}

static int parse_int(const char *s, int lo, int hi, int *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end != '\0' || v < lo || v > hi) return -1;
    *out = (int)v;
    return 0;
}

enum { OPT_NP = 256, OPT_PLAN, OPT_PLAN_DIR, OPT_JSON, OPT_MPI, OPT_TIME_LIMIT, OPT_BOOT,
       OPT_PLOT, OPT_TUNE, OPT_TUNE_BLOCKS, OPT_TUNE_THREADS, OPT_NODES, OPT_NATIVE, OPT_CSV,
       OPT_WHICH, OPT_MALLOC };

/* What a value of each option may be, for the one-line answer to a bad one. */
#define ACCEPT_SIZE "a size in bytes, optionally with K, M or G (1K = 1024)"
#define ACCEPT_DTYPES                                                                             \
    "float, half, bfloat16, int32, uint32, int8, uint8, double, fp8e4m3, fp8e5m2, int64, uint64 " \
    "or all"
#define ACCEPT_OPS "sum, prod, min, max, avg or all"

/* Edit distance of two short option names (insert, delete, substitute), capped at 3. */
static int option_distance(const char *a, const char *b)
{
    size_t n = strlen(a), m = strlen(b);
    if (n > 31 || m > 31) return 3;
    int d[32][32];
    for (size_t i = 0; i <= n; i++) d[i][0] = (int)i;
    for (size_t j = 0; j <= m; j++) d[0][j] = (int)j;
    for (size_t i = 1; i <= n; i++)
        for (size_t j = 1; j <= m; j++) {
            int x = d[i - 1][j - 1] + (a[i - 1] != b[j - 1]);
            if (d[i - 1][j] + 1 < x) x = d[i - 1][j] + 1;
            if (d[i][j - 1] + 1 < x) x = d[i][j - 1] + 1;
            d[i][j] = x;
        }
    return d[n][m] > 3 ? 3 : d[n][m];
}

/* One line for an option the tool does not know: the nearest long option when one is close. */
static void unknown_option(const char *prog, const char *arg, const struct option *opts)
{
    const char *name = arg;
    while (*name == '-') name++;
    char key[64];
    snprintf(key, sizeof key, "%.*s", (int)strcspn(name, "="), name);
    const char *best = NULL;
    int bd = 3;
    for (const struct option *o = opts; o->name; o++) {
        int d = option_distance(key, o->name);
        if (d < bd) {
            bd = d;
            best = o->name;
        }
    }
    if (best && arg[1] == '-')
        fprintf(stderr, "%s: unknown option '%s' (did you mean --%s?); %s --help lists the "
                        "options\n", prog, arg, best, prog);
    else
        fprintf(stderr, "%s: unknown option '%s'; %s --help lists the options\n", prog, arg,
                prog);
}

/*
 * nccl-tests options that have no meaning here (-g GPUs per thread, -t threads per process):
 * their neutral value is accepted so that copied command lines run; anything else gets a
 * sentence saying what to use. Returns 0, or EXIT_USAGE after printing.
 */
static int nccl_tests_flag(int c, const char *arg, const char *prog)
{
    int v;
    if (parse_int(arg, 0, 1 << 20, &v) == 0 && v == 1) return 0;
    fprintf(stderr,
            "%s: -%c %s: mscclpp-bench runs one rank per process, one GPU each; "
            "for %s ranks use --np %s (forked here) or mpiexec -n %s\n",
            prog, c, arg, arg, arg, arg);
    return EXIT_USAGE;
}

/* Returns 0, EXIT_USAGE after printing why, or -1 for --help (printed). */
static int parse_args(int argc, char **argv, opts_t *o)
{
    static const struct option longopts[] = {
        {"minbytes", required_argument, NULL, 'b'},  {"maxbytes", required_argument, NULL, 'e'},
        {"stepfactor", required_argument, NULL, 'f'}, {"stepbytes", required_argument, NULL, 'i'},
        {"datatype", required_argument, NULL, 'd'},  {"op", required_argument, NULL, 'o'},
        {"iters", required_argument, NULL, 'n'},     {"warmup_iters", required_argument, NULL, 'w'},
        {"check", required_argument, NULL, 'c'},     {"root", required_argument, NULL, 'r'},
        {"np", required_argument, NULL, OPT_NP},     {"plan", required_argument, NULL, OPT_PLAN},
        {"plan-dir", required_argument, NULL, OPT_PLAN_DIR},
        {"json", required_argument, NULL, OPT_JSON}, {"mpi", no_argument, NULL, OPT_MPI},
        {"time-limit", required_argument, NULL, OPT_TIME_LIMIT},
        {"bootstrap", required_argument, NULL, OPT_BOOT},
        {"plot", required_argument, NULL, OPT_PLOT}, {"average", required_argument, NULL, 'a'},
        {"blocking", required_argument, NULL, 'z'}, {"run_cycles", required_argument, NULL, 'N'},
        {"ngpus", required_argument, NULL, 'g'},    {"nthreads", required_argument, NULL, 't'},
        {"cudagraph", required_argument, NULL, 'G'},
        {"tune", required_argument, NULL, OPT_TUNE},
        {"native", required_argument, NULL, OPT_NATIVE},
        {"tune-blocks", required_argument, NULL, OPT_TUNE_BLOCKS},
        {"tune-threads", required_argument, NULL, OPT_TUNE_THREADS},
        {"nodes", required_argument, NULL, OPT_NODES},
        {"csv", required_argument, NULL, OPT_CSV},   {"version", no_argument, NULL, 'V'},
        {"which", no_argument, NULL, OPT_WHICH},
        {"malloc", no_argument, NULL, OPT_MALLOC},
        {"help", no_argument, NULL, 'h'},            {NULL, 0, NULL, 0},
    };
    const char *prog = "mscclpp-bench"; /* argv[0] may be libtool's lt- wrapper target */
    memset(o, 0, sizeof(*o));
    o->coll = -1;
    o->min_bytes = o->max_bytes = 32u << 20;
    o->step_factor = 2;
    o->dtypes[0] = MSCCLPP_FLOAT32, o->ndtypes = 1;
    o->ops[0] = MSCCLPP_SUM, o->nops = 1;
    o->iters = 20, o->warmup = 5, o->check = 1;
    o->time_limit = DEFAULT_TIME_LIMIT;
    o->average = 1, o->cycles = 1; /* nccl-tests' -a default: the mean over ranks */
    int c, v;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":b:e:f:i:d:o:n:w:c:r:hVa:z:N:g:t:G:", longopts, NULL)) !=
           -1) {
        const char *bad = NULL;
        switch (c) {
        case 'b': if (parse_size(optarg, &o->min_bytes)) bad = "-b: expected " ACCEPT_SIZE; break;
        case 'e': if (parse_size(optarg, &o->max_bytes)) bad = "-e: expected " ACCEPT_SIZE; break;
        case 'f':
            if (parse_int(optarg, 2, 1 << 20, &v)) bad = "-f: expected an integer >= 2";
            else o->step_factor = (unsigned long)v;
            break;
        case 'i':
            if (parse_size(optarg, &o->step_bytes) || o->step_bytes == 0)
                bad = "-i: expected " ACCEPT_SIZE ", at least 1";
            else o->step_factor = 0;
            break;
        case 'd':
            if (strcmp(optarg, "all") == 0) {
                for (v = 0; v < MSCCLPP_DTYPE_COUNT; v++) o->dtypes[v] = v;
                o->ndtypes = MSCCLPP_DTYPE_COUNT;
            } else if ((v = bench_dtype_parse(optarg)) >= 0) {
                o->dtypes[0] = v, o->ndtypes = 1;
            } else {
                bad = "-d: expected " ACCEPT_DTYPES;
            }
            break;
        case 'o':
            if (strcmp(optarg, "all") == 0) {
                for (v = 0; v < BENCH_NOPS; v++) o->ops[v] = v;
                o->nops = BENCH_NOPS;
            } else if ((v = bench_redop_parse(optarg)) >= 0) {
                o->ops[0] = v, o->nops = 1;
            } else {
                bad = "-o: expected " ACCEPT_OPS;
            }
            break;
        case 'n':
            if (parse_int(optarg, 1, 1 << 30, &o->iters)) bad = "-n: expected a count >= 1";
            break;
        case 'w':
            if (parse_int(optarg, 0, 1 << 30, &o->warmup)) bad = "-w: expected a count >= 0";
            break;
        case 'c': if (parse_int(optarg, 0, 1, &o->check)) bad = "-c: expected 0 or 1"; break;
        case 'r': if (parse_int(optarg, 0, 1 << 20, &o->root)) bad = "-r: expected a rank"; break;
        case OPT_NP:
            if (parse_int(optarg, 1, 1024, &o->np)) bad = "--np: expected 1 to 1024 ranks";
            break;
        case OPT_NODES: o->nodes_spec = optarg; break;
        case OPT_PLAN: o->plan_path = optarg; break;
        case OPT_PLAN_DIR: o->plan_dir = optarg; break;
        case OPT_NATIVE:
            if (o->nnatives == (int)(sizeof o->natives / sizeof *o->natives))
                bad = "--native: 8 modules at most";
            else
                o->natives[o->nnatives++] = optarg;
            break;
        case OPT_JSON: o->json_path = optarg; break;
        case OPT_CSV: o->csv_path = optarg; break;
        case OPT_WHICH: o->which = 1; break;
        case OPT_MALLOC: o->malloc_bufs = 1; break;
        case OPT_MPI: o->mpi = 1; break;
        case OPT_BOOT:
            if (strcmp(optarg, "tcp") == 0) o->tcp_boot = 1;
            else if (strcmp(optarg, "mpi") == 0) o->tcp_boot = 0;
            else bad = "--bootstrap: expected mpi or tcp";
            break;
        case OPT_TIME_LIMIT: {
            char *end;
            o->time_limit = strtod(optarg, &end);
            if (end == optarg || *end || !(o->time_limit > 0))
                bad = "--time-limit: expected seconds > 0";
            break;
        }
        case OPT_PLOT: o->plot_path = optarg; break;
        case 'a':
            if (parse_int(optarg, 0, 3, &o->average))
                bad = "-a: expected 0 (rank 0), 1 (mean), 2 (min) or 3 (max)";
            break;
        case 'z': if (parse_int(optarg, 0, 1, &o->blocking)) bad = "-z: expected 0 or 1"; break;
        case 'N':
            if (parse_int(optarg, 1, 1 << 20, &o->cycles))
                bad = "-N: expected a count >= 1 (0, run forever, is not supported)";
            break;
        case 'g':
        case 't':
            if (nccl_tests_flag(c, optarg, prog)) return EXIT_USAGE;
            break;
        case 'G':
            if (parse_int(optarg, 0, 1 << 20, &o->graph_launches))
                bad = "-G: expected a count >= 0";
            break;
        case OPT_TUNE: o->tune.path = optarg; break;
        case OPT_TUNE_BLOCKS:
            if (tune_parse_list(optarg, 1, 1 << 16, o->tune.blocks, &o->tune.nblocks))
                bad = "--tune-blocks: expected comma-separated counts >= 1";
            break;
        case OPT_TUNE_THREADS:
            if (tune_parse_list(optarg, 0, 1024, o->tune.threads, &o->tune.nthreads))
                bad = "--tune-threads: expected comma-separated counts in 0..1024";
            break;
        case 'h': usage(stdout, prog); return -1;
        case 'V': {
            int major, minor, patch;
            mscclpp_version(&major, &minor, &patch);
            printf("mscclpp-bench %s (libmscclpp %d.%d.%d)\n", PACKAGE_VERSION, major, minor,
                   patch);
            return -1;
        }
        case ':':
            fprintf(stderr, "%s: option '%s' needs a value; %s --help says which\n", prog,
                    argv[optind - 1], prog);
            return EXIT_USAGE;
        default:
            unknown_option(prog, argv[optind - 1], longopts);
            return EXIT_USAGE;
        }
        if (bad) {
            fprintf(stderr, "%s: bad value '%s' for %s\n", prog, optarg, bad);
            return EXIT_USAGE;
        }
    }
    if (optind < argc) {
        if (o->plan_path) {
            fprintf(stderr, "%s: give a COLLECTIVE or --plan, not both\n", prog);
            return EXIT_USAGE;
        }
        if ((o->coll = bench_coll_parse(argv[optind])) < 0) {
            fprintf(stderr, "%s: unknown collective '%s' (expected allreduce, allgather, "
                            "reducescatter, alltoall or broadcast)\n", prog, argv[optind]);
            return EXIT_USAGE;
        }
        if (++optind < argc) {
            fprintf(stderr, "%s: unexpected argument '%s' (one COLLECTIVE, then options)\n", prog,
                    argv[optind]);
            return EXIT_USAGE;
        }
    } else if (!o->plan_path && !o->tune.path) {
        fprintf(stderr, "%s: give a COLLECTIVE (allreduce, allgather, reducescatter, alltoall, "
                        "broadcast) or --plan FILE; %s --help lists the options\n", prog, prog);
        return EXIT_USAGE;
    }
    if (o->tune.path) {
        /* recorded in the table, so a reader knows how it was made */
        static char cmd[1024];
        size_t len = 0;
        for (int i = 0; i < argc && len < sizeof cmd; i++)
            len += (size_t)snprintf(cmd + len, sizeof cmd - len, "%s%s", i ? " " : "",
                                    i ? argv[i] : prog);
        o->tune.command = cmd;
    }
    if (o->tune.path && o->plan_path) {
        fprintf(stderr, "%s: --tune sweeps the registered plans (add some with --plan-dir); "
                        "--plan is not for it\n", prog);
        return EXIT_USAGE;
    }
    if (o->nodes_spec) {
        if (netns_split(o->nodes_spec, o->np, o->node_size, &o->nodes)) {
            fprintf(stderr,
                    "%s: --nodes %s: a node count (1..%d, at most --np) or node sizes "
                    "a+b+...\n",
                    prog, o->nodes_spec, NETNS_MAX_NODES);
            return EXIT_USAGE;
        }
        int sum = 0;
        for (int k = 0; k < o->nodes; k++) sum += o->node_size[k];
        if (!o->np && strchr(o->nodes_spec, '+')) o->np = sum;
        if (!o->np || (o->nodes > 1 && sum != o->np)) {
            fprintf(stderr, "%s: --nodes %s needs --np N%s\n", prog, o->nodes_spec,
                    o->np ? " equal to the sum of the node sizes" : "");
            return EXIT_USAGE;
        }
    }
    if (o->min_bytes > o->max_bytes) {
        fprintf(stderr, "%s: -b %zu is larger than -e %zu\n", prog, o->min_bytes, o->max_bytes);
        return EXIT_USAGE;
    }
    if (o->step_factor && o->min_bytes == 0) {
        fprintf(stderr, "%s: -b 0 with -f never grows; give -b >= 1 or -i\n", prog);
        return EXIT_USAGE;
    }
    return 0;
}

/* --- helpers -------------------------------------------------------------------------------- */

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void report(const bench_t *b, const char *what, mscclpp_result_t rc)
{
    fprintf(stderr, "mscclpp-bench: rank %d: %s: %s: %s\n", b->rank, what,
            mscclpp_result_string(rc), mscclpp_last_error());
}

/* Share each rank's result of a step; all ranks then take the same branch. -1: bootstrap broke. */
static int agree(bench_t *b, mscclpp_result_t *rc, int *who)
{
    int32_t *all = b->xchg;
    all[b->rank] = *rc;
    mscclpp_result_t brc = mscclpp_bootstrap_allgather(b->boot, all, sizeof(int32_t));
    if (brc != MSCCLPP_OK) {
        report(b, "exchanging results", brc);
        return -1;
    }
    *who = -1;
    for (int r = 0; r < b->nranks; r++)
        if (all[r] != MSCCLPP_OK) {
            *rc = (mscclpp_result_t)all[r];
            *who = r;
            break;
        }
    return 0;
}

/* The time every rank reports: -a 0 rank 0's, 1 the mean, 2 the minimum, 3 the maximum. */
static int time_over_ranks(bench_t *b, double *v)
{
    double *all = b->xchg;
    all[b->rank] = *v;
    mscclpp_result_t rc = mscclpp_bootstrap_allgather(b->boot, all, sizeof(double));
    if (rc != MSCCLPP_OK) {
        report(b, "exchanging times", rc);
        return -1;
    }
    double sum = 0, lo = all[0], hi = all[0];
    for (int r = 0; r < b->nranks; r++) {
        sum += all[r];
        if (all[r] < lo) lo = all[r];
        if (all[r] > hi) hi = all[r];
    }
    switch (b->o->average) {
    case 0: *v = all[0]; break;
    case 1: *v = sum / b->nranks; break;
    case 2: *v = lo; break;
    default: *v = hi; break;
    }
    return 0;
}

static int mean_over_ranks(bench_t *b, double *v)
{
    double *all = b->xchg;
    all[b->rank] = *v;
    mscclpp_result_t rc = mscclpp_bootstrap_allgather(b->boot, all, sizeof(double));
    if (rc != MSCCLPP_OK) {
        report(b, "exchanging times", rc);
        return -1;
    }
    double sum = 0;
    for (int r = 0; r < b->nranks; r++) sum += all[r];
    *v = sum / b->nranks;
    return 0;
}

static int sum_over_ranks(bench_t *b, long long *v)
{
    int64_t *all = b->xchg;
    all[b->rank] = *v;
    mscclpp_result_t rc = mscclpp_bootstrap_allgather(b->boot, all, sizeof(int64_t));
    if (rc != MSCCLPP_OK) {
        report(b, "exchanging check results", rc);
        return -1;
    }
    *v = 0;
    for (int r = 0; r < b->nranks; r++) *v += all[r];
    return 0;
}

/* --- the bound column ----------------------------------------------------------------------- */

/*
 * The memory bandwidth the ranks get together at one row's size: every rank copies a buffer of
 * that size to another of the same backend (device to device; memcpy on the host backend) at the
 * same time, -n times, best of 3 runs; the bytes read and written per second are summed over the
 * ranks. Timed per size because a copy that fits a cache runs several times faster than one that
 * does not: one copy timed at the largest size made small rows look faster than memory (issue
 * 21 item 8: 189 % of the bound). The ranks of a node share that memory on the host backend, so
 * a plan's row can be no faster than the bytes it moves / this bandwidth (issue 11; with one GPU
 * per rank the bound is looser). Returns -1 only when the ranks can no longer talk; a failed
 * copy leaves copy_gbps 0 (no bound for the row).
 */
static int measure_copy(bench_t *b, size_t bytes)
{
    if (bytes > b->buf_bytes) bytes = b->buf_bytes;
    b->copy_gbps = 0;
    b->copy_bytes = bytes;
    if (!bytes) return 0;
    double bw = -1e300; /* a failure on any rank makes the mean negative: no bound */
    const int iters = b->o->iters, trials = 3;
    /* first touch, and the check's pattern no longer matters: the columns ran already */
    mscclpp_result_t rc = mscclpp_memcpy(b->recvbuf, b->sendbuf, bytes);
    double best = 0;
    for (int k = 0; k < trials; k++) {
        mscclpp_result_t brc = mscclpp_bootstrap_barrier(b->boot);
        if (brc != MSCCLPP_OK) {
            report(b, "barrier", brc);
            return -1;
        }
        if (rc != MSCCLPP_OK) continue;
        double t0 = now_s();
        for (int i = 0; i < iters && rc == MSCCLPP_OK; i++)
            rc = mscclpp_memcpy(b->recvbuf, b->sendbuf, bytes);
        double t = now_s() - t0;
        if (rc == MSCCLPP_OK && t > 0 && (best == 0 || t < best)) best = t;
    }
    if (rc == MSCCLPP_OK && best > 0) bw = 2.0 * (double)bytes * iters / best;
    if (rc != MSCCLPP_OK) report(b, "copy bandwidth (the row's bound is left out)", rc);
    if (mean_over_ranks(b, &bw)) return -1;
    b->copy_gbps = bw > 0 ? bw * b->nranks / 1e9 : 0;
    return 0;
}

/*
 * Bytes the column's plan moves and the algbw bound they imply (0 when either is unknown); and
 * the ideal: the fewest bytes the collective itself needs (mscclpp_collective_min_traffic) at
 * the same copy bandwidth, so that a plan moving extra bytes shows it (bound below ideal).
 */
static void column_bound(bench_t *b, const bench_shape_t *s, mscclpp_dtype_t dt, uint64_t msg,
                         int inplace, size_t size, column_t *c)
{
    c->moved = 0;
    c->bound = 0;
    c->least = 0;
    c->ideal = 0;
    if (!c->ran || c->err != MSCCLPP_OK || b->copy_gbps <= 0) return;
    const mscclpp_plan_t *p = b->plan;
    const char *coll = bench_coll_name(b->coll);
    size_t esz = mscclpp_dtype_size(dt);
    uint64_t least = 0;
    if (mscclpp_collective_min_traffic(coll, b->nranks, s->send_count * esz, s->recv_count * esz,
                                       inplace, &least) == MSCCLPP_OK &&
        least > 0) {
        c->least = least;
        c->ideal = (double)size * b->copy_gbps / (double)least;
    }
    /* the plan the call ran: an in-place call with no in-place plan runs the out-of-place one */
    if (!p && mscclpp_executor_choose_plan(b->exec, coll, inplace, msg, &p, NULL) != MSCCLPP_OK &&
        (!inplace || mscclpp_executor_choose_plan(b->exec, coll, 0, msg, &p, NULL) != MSCCLPP_OK))
        p = NULL;
    size_t es = mscclpp_dtype_size(dt);
    uint64_t moved = 0;
    if (!p || mscclpp_plan_traffic(p, s->send_count * es, s->recv_count * es, dt, &moved) !=
                  MSCCLPP_OK || moved == 0)
        return; /* a native algorithm, or no plan: no bound */
    c->moved = moved;
    c->bound = (double)size * b->copy_gbps / (double)moved; /* GB/s, as algbw */
}

/* --- one collective call -------------------------------------------------------------------- */

static mscclpp_result_t bench_call_op(bench_t *b, const void *send, void *recv,
                                      const bench_shape_t *s, mscclpp_dtype_t dt,
                                      mscclpp_redop_t op)
{
    size_t esize = mscclpp_dtype_size(dt);
    if (b->plan)
        return mscclpp_execute_launch(b->exec, b->plan, send, recv, s->send_count * esize,
                                      s->recv_count * esize, dt,
                                      bench_coll_reduces(b->coll) ? op : MSCCLPP_REDOP_PLAN,
                                      MSCCLPP_PACKET_LL16, b->nblocks, b->nthreads, b->stream);
    switch (b->coll) {
    case BENCH_ALLREDUCE:
        return mscclpp_allreduce(b->exec, send, recv, s->block, dt, op, b->stream);
    case BENCH_ALLGATHER: return mscclpp_allgather(b->exec, send, recv, s->block, dt, b->stream);
    case BENCH_REDUCESCATTER:
        return mscclpp_reducescatter(b->exec, send, recv, s->block, dt, op, b->stream);
    case BENCH_ALLTOALL: return mscclpp_alltoall(b->exec, send, recv, s->block, dt, b->stream);
    default:
        return mscclpp_broadcast(b->exec, send, recv, s->block, dt, b->o->root, b->stream);
    }
}

/* One call; -o avg: a sum, then the result divided by the ranks on the same stream. */
static mscclpp_result_t bench_call(bench_t *b, const void *send, void *recv,
                                   const bench_shape_t *s, mscclpp_dtype_t dt, mscclpp_redop_t op)
{
    int avg = op == BENCH_AVG && bench_coll_reduces(b->coll);
    mscclpp_result_t rc = bench_call_op(b, send, recv, s, dt, avg ? MSCCLPP_SUM : op);
    if (rc != MSCCLPP_OK || !avg) return rc;
    return mscclpp_scale_async(recv, recv, s->recv_count, dt, b->nranks, NULL, 0, b->stream);
}

static mscclpp_result_t bench_sync(bench_t *b)
{
    return b->stream ? mscclpp_stream_synchronize(b->stream) : MSCCLPP_OK;
}

/* -G: capture `ncalls` calls on the bench's stream into *graph (the capture always ends). */
static mscclpp_result_t bench_capture(bench_t *b, const void *send, void *recv,
                                      const bench_shape_t *s, mscclpp_dtype_t dt,
                                      mscclpp_redop_t op, int ncalls, mscclpp_graph_t *graph)
{
    *graph = NULL;
    if (!b->stream) return mscclpp_stream_begin_capture(NULL); /* the error says why */
    mscclpp_result_t rc = mscclpp_stream_begin_capture(b->stream);
    if (rc != MSCCLPP_OK) return rc;
    for (int i = 0; i < ncalls && rc == MSCCLPP_OK; i++) rc = bench_call(b, send, recv, s, dt, op);
    /* ended either way; a failed call's message stays the thread's last error */
    mscclpp_result_t end = mscclpp_stream_end_capture(b->stream, graph);
    if (rc != MSCCLPP_OK) {
        mscclpp_graph_destroy(*graph);
        *graph = NULL;
        return rc;
    }
    return end;
}

/* One call, or (-G) one replay of a graph of one call: what the check runs. */
static mscclpp_result_t bench_call_once(bench_t *b, const void *send, void *recv,
                                        const bench_shape_t *s, mscclpp_dtype_t dt,
                                        mscclpp_redop_t op)
{
    if (!b->o->graph_launches) return bench_call(b, send, recv, s, dt, op);
    mscclpp_graph_t g = NULL;
    mscclpp_result_t rc = bench_capture(b, send, recv, s, dt, op, 1, &g);
    if (rc == MSCCLPP_OK) rc = mscclpp_graph_launch(g, b->stream);
    if (rc == MSCCLPP_OK) rc = bench_sync(b);
    mscclpp_result_t d = mscclpp_graph_destroy(g);
    return rc != MSCCLPP_OK ? rc : d;
}

/* Poison the output, fill this rank's input, run once and count wrong elements. */
static mscclpp_result_t check_once(bench_t *b, char *send, char *recv, const bench_shape_t *s,
                                   mscclpp_dtype_t dt, mscclpp_redop_t op, int inplace,
                                   long long *wrong)
{
    size_t esize = mscclpp_dtype_size(dt);
    size_t sb = s->send_count * esize, rb = s->recv_count * esize;
    mscclpp_result_t rc;
    if (b->o->graph_launches) {
        /* A capture cannot grow a plan's scratch (a GPU stream cannot drain while captured):
         * one direct call at this size first, as a program warms up before its capture. The
         * poison and the input below are laid after it, so only the replay can pass. */
        rc = bench_call(b, send, recv, s, dt, op);
        if (rc == MSCCLPP_OK) rc = bench_sync(b);
        if (rc != MSCCLPP_OK) return rc;
    }
    /* In place, the output region is the whole buffer (reducescatter: the input). */
    rc = mscclpp_memset(b->recvbuf, BENCH_POISON, inplace && sb > rb ? sb : rb);
    if (rc != MSCCLPP_OK) return rc;
    bench_fill(b->coll, dt, op, b->rank, b->host, s->send_count);
    /* A non-root broadcast rank's buffer stays poisoned: only the root's data may arrive. */
    if (!(inplace && b->coll == BENCH_BROADCAST && b->rank != b->o->root)) {
        rc = mscclpp_memcpy(send, b->host, sb);
        if (rc != MSCCLPP_OK) return rc;
    }
    rc = bench_call_once(b, send, recv, s, dt, op);
    if (rc == MSCCLPP_OK) rc = bench_sync(b);
    if (rc != MSCCLPP_OK) return rc;
    rc = mscclpp_memcpy(b->host, recv, rb);
    if (rc != MSCCLPP_OK) return rc;
    *wrong = (long long)bench_check(b->coll, dt, op, b->rank, b->nranks, b->o->root, s, b->host);
    return MSCCLPP_OK;
}

/*
 * Keep the message of a local failure for the table (ranks other than 0 print it themselves),
 * and drain what the failed call may have queued before the buffers are touched again.
 */
static void note_failure(bench_t *b, column_t *col, const char *what, mscclpp_result_t rc)
{
    if (rc == MSCCLPP_OK) return;
    snprintf(col->msg, sizeof(col->msg), "%s", mscclpp_last_error());
    col->local_err = rc;
    if (b->rank != 0) report(b, what, rc);
    (void)bench_sync(b);
}

/*
 * agree() on a column's step. When the ranks can no longer talk (a peer died), no table row
 * will show rank 0's own error: rank 0 prints it here (the others printed theirs already).
 */
static int agree_column(bench_t *b, column_t *col, const char *what, mscclpp_result_t *rc)
{
    if (agree(b, rc, &col->err_rank) == 0) return 0;
    if (b->rank == 0 && col->local_err != MSCCLPP_OK)
        fprintf(stderr, "mscclpp-bench: rank 0: %s: %s: %s\n", what,
                mscclpp_result_string(col->local_err), col->msg);
    return -1;
}

/* Check (when asked), warm up and time one placement. Returns -1 if the bootstrap broke. */
static int run_column(bench_t *b, const bench_shape_t *s, mscclpp_dtype_t dt, mscclpp_redop_t op,
                      int inplace, column_t *col)
{
    size_t esize = mscclpp_dtype_size(dt);
    size_t sb = s->send_count * esize, rb = s->recv_count * esize;
    char *send = b->sendbuf, *recv = b->recvbuf;
    if (inplace) {
        /* NCCL's in-place layouts (plan-format §3.3). */
        send = recv = b->recvbuf;
        if (b->coll == BENCH_ALLGATHER) send = recv + (size_t)b->rank * sb;
        if (b->coll == BENCH_REDUCESCATTER) recv = send + (size_t)b->rank * rb;
    }
    memset(col, 0, sizeof(*col));
    col->ran = 1;
    col->wrong = -1;
    col->err_rank = -1;
    mscclpp_result_t rc = MSCCLPP_OK;
    const char *what = inplace ? "in-place" : "out-of-place";
    if (b->o->check) {
        long long wrong = 0;
        rc = check_once(b, send, recv, s, dt, op, inplace, &wrong);
        note_failure(b, col, what, rc);
        if (agree_column(b, col, what, &rc)) return -1;
        if (rc != MSCCLPP_OK) {
            col->err = rc;
            return 0;
        }
        if (sum_over_ranks(b, &wrong)) return -1;
        col->wrong = wrong;
    }
    for (int i = 0; i < b->o->warmup && rc == MSCCLPP_OK; i++)
        rc = bench_call(b, send, recv, s, dt, op);
    if (rc == MSCCLPP_OK) rc = bench_sync(b);
    note_failure(b, col, what, rc);
    if (agree_column(b, col, what, &rc)) return -1;
    if (rc != MSCCLPP_OK) {
        col->err = rc;
        return 0;
    }
    /* -G: the timed calls captured once (not timed), then replayed */
    mscclpp_graph_t graph = NULL;
    int launches = b->o->graph_launches;
    if (launches) {
        rc = bench_capture(b, send, recv, s, dt, op, b->o->iters, &graph);
        note_failure(b, col, what, rc);
        if (agree(b, &rc, &col->err_rank)) {
            mscclpp_graph_destroy(graph);
            return -1;
        }
        if (rc != MSCCLPP_OK) {
            col->err = rc;
            return 0;
        }
    }
    rc = mscclpp_bootstrap_barrier(b->boot);
    if (rc != MSCCLPP_OK) {
        report(b, "barrier", rc);
        mscclpp_graph_destroy(graph);
        return -1;
    }
    double t0 = now_s();
    if (graph) {
        for (int i = 0; i < launches && rc == MSCCLPP_OK; i++) {
            rc = mscclpp_graph_launch(graph, b->stream);
            if (b->o->blocking && rc == MSCCLPP_OK) rc = bench_sync(b);
        }
    } else {
        for (int i = 0; i < b->o->iters && rc == MSCCLPP_OK; i++) {
            rc = bench_call(b, send, recv, s, dt, op);
            if (b->o->blocking && rc == MSCCLPP_OK) rc = bench_sync(b);
        }
    }
    if (rc == MSCCLPP_OK) rc = bench_sync(b);
    double t = (now_s() - t0) * 1e6 / b->o->iters / (launches ? launches : 1);
    mscclpp_result_t drc = mscclpp_graph_destroy(graph);
    if (rc == MSCCLPP_OK) rc = drc;
    note_failure(b, col, what, rc);
    if (agree_column(b, col, what, &rc)) return -1;
    if (rc != MSCCLPP_OK) {
        col->err = rc;
        return 0;
    }
    /* the tuner averages over ranks (every rank then picks the same plan) */
    if (b->o->tune.path ? mean_over_ranks(b, &t) : time_over_ranks(b, &t)) return -1;
    col->time_us = t;
    return 0;
}

/* --- MPI comparison ------------------------------------------------------------------------- */

#ifdef MSCCLPP_HAVE_MPI
static MPI_Datatype mpi_dtype(mscclpp_dtype_t dt)
{
    switch (dt) {
    case MSCCLPP_FLOAT32: return MPI_FLOAT;
    case MSCCLPP_FLOAT64: return MPI_DOUBLE;
    case MSCCLPP_INT32: return MPI_INT32_T;
    case MSCCLPP_UINT32: return MPI_UINT32_T;
    case MSCCLPP_INT8: return MPI_INT8_T;
    case MSCCLPP_UINT8: return MPI_UINT8_T;
    case MSCCLPP_INT64: return MPI_INT64_T;
    case MSCCLPP_UINT64: return MPI_UINT64_T;
    default: return MPI_DATATYPE_NULL; /* half, bfloat16, fp8: no standard MPI type */
    }
}

static MPI_Op mpi_op(mscclpp_redop_t op)
{
    switch (op) {
    case MSCCLPP_PROD: return MPI_PROD;
    case MSCCLPP_MIN: return MPI_MIN;
    case MSCCLPP_MAX: return MPI_MAX;
    default: return MPI_SUM;
    }
}

static int mpi_call(bench_t *b, const bench_shape_t *s, MPI_Datatype t, MPI_Op op)
{
    int blk = (int)s->block, root = b->o->root;
    switch (b->coll) {
    case BENCH_ALLREDUCE:
        return MPI_Allreduce(b->mpi_send, b->mpi_recv, blk, t, op, MPI_COMM_WORLD);
    case BENCH_ALLGATHER:
        return MPI_Allgather(b->mpi_send, blk, t, b->mpi_recv, blk, t, MPI_COMM_WORLD);
    case BENCH_REDUCESCATTER:
        return MPI_Reduce_scatter_block(b->mpi_send, b->mpi_recv, blk, t, op, MPI_COMM_WORLD);
    case BENCH_ALLTOALL:
        return MPI_Alltoall(b->mpi_send, blk, t, b->mpi_recv, blk, t, MPI_COMM_WORLD);
    default: return MPI_Bcast(b->mpi_send, blk, t, root, MPI_COMM_WORLD);
    }
}

/* Time the same collective with MPI (out of place); < 0 when MPI has no such type. */
static double time_mpi(bench_t *b, const bench_shape_t *s, mscclpp_dtype_t dt, mscclpp_redop_t op)
{
    MPI_Datatype t = mpi_dtype(dt);
    if (op == BENCH_AVG && bench_coll_reduces(b->coll)) return -1; /* MPI has no average */
    if (t == MPI_DATATYPE_NULL || s->send_count > INT32_MAX || s->recv_count > INT32_MAX)
        return -1;
    bench_fill(b->coll, dt, op, b->rank, b->mpi_send, s->send_count);
    for (int i = 0; i < b->o->warmup; i++)
        if (mpi_call(b, s, t, mpi_op(op)) != MPI_SUCCESS) return -1;
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    for (int i = 0; i < b->o->iters; i++)
        if (mpi_call(b, s, t, mpi_op(op)) != MPI_SUCCESS) return -1;
    double local = (MPI_Wtime() - t0) * 1e6 / b->o->iters, global = local;
    MPI_Allreduce(&local, &global, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    return global;
}
#endif

/* --- printing ------------------------------------------------------------------------------- */

#define RANK_LINE 256

/* Every rank's host, pid and device, gathered for rank 0's header as nccl-tests prints them
 * ("#  Rank  0 Pid ... on HOST device 0 [NAME]"). Returns -1 when the ranks cannot talk. */
static int describe_ranks(bench_t *b, char **lines)
{
    char *all = calloc((size_t)b->nranks, RANK_LINE);
    if (!all) {
        fprintf(stderr, "mscclpp-bench: rank %d: out of memory\n", b->rank);
        return -1;
    }
    char host[64] = "?", dev[RANK_LINE - 96] = "";
    gethostname(host, sizeof host - 1);
    int idx = -1;
    if (mscclpp_device_describe(&idx, dev, sizeof dev) != MSCCLPP_OK)
        snprintf(dev, sizeof dev, "(unknown: %s)", mscclpp_last_error());
    snprintf(all + (size_t)b->rank * RANK_LINE, RANK_LINE, "#  Rank %2d Pid %6d on %10s device %2d [%s]",
             b->rank, (int)getpid(), host, idx, dev);
    mscclpp_result_t rc = mscclpp_bootstrap_allgather(b->boot, all, RANK_LINE);
    if (rc != MSCCLPP_OK) {
        report(b, "exchanging device names", rc);
        free(all);
        return -1;
    }
    *lines = all;
    return 0;
}

static void print_header(const bench_t *b, const char *ranks)
{
    const opts_t *o = b->o;
    static const char *const avg[] = {"rank 0's", "the mean over ranks", "the minimum over ranks",
                                      "the maximum over ranks"};
    printf("# mscclpp-bench %s: %s, %d rank(s) (%s), backend %s\n", PACKAGE_VERSION,
           b->plan ? mscclpp_plan_collective(b->plan) : bench_coll_name(b->coll), b->nranks,
           b->launcher, mscclpp_backend_name());
    for (int r = 0; ranks && r < b->nranks; r++) printf("%s\n", ranks + (size_t)r * RANK_LINE);
    if (b->plan)
        printf("# plan %s (%s, %s)\n", o->plan_path,
               mscclpp_plan_name(b->plan) ? mscclpp_plan_name(b->plan) : "unnamed",
               b->run_ip ? "in-place: in-place column only" : "out-of-place column only");
    if (!b->plan && mscclpp_executor_tuning_file(b->exec))
        printf("# tuning table %s\n", mscclpp_executor_tuning_file(b->exec));
    printf("# minBytes %zu maxBytes %zu step: %zu(%s) warmup iters: %d iters: %d validation: %d "
           "average: %d (time is %s)\n",
           o->min_bytes, o->max_bytes, o->step_factor ? (size_t)o->step_factor : o->step_bytes,
           o->step_factor ? "factor" : "bytes", o->warmup, o->iters, o->check, o->average,
           avg[o->average]);
    if (o->graph_launches)
        printf("# graphs: the %d timed calls captured into one graph, replayed %d times; time "
               "is per call\n",
               o->iters, o->graph_launches);
    if (b->bounds)
        printf("# bound = the algbw if the plan's bytes moved ran at the copy bandwidth of the row's "
               "size (%d ranks each copying a buffer of that size at once, device to device, -n "
               "copies, best of 3; --json has it as copy_gbps); %% = algbw / bound; ideal = the "
               "algbw if only the collective's fewest bytes moved at that bandwidth (a plan that "
               "moves more has bound < ideal)\n",
               b->nranks);
    printf("#\n");
    printf("# %10s  %12s  %8s  %6s  %6s  %29s  %29s%s%s\n", "", "", "", "", "", "out-of-place",
           "in-place", b->use_mpi ? "  MPI (out-of-place)" : "",
           b->bounds ? "        bound: oop      in-place   ideal:  oop  in-place" : "");
    printf("# %10s  %12s  %8s  %6s  %6s  %7s %7s %7s %6s  %7s %7s %7s %6s", "size", "count",
           "type", "redop", "root", "time", "algbw", "busbw", "#wrong", "time", "algbw", "busbw",
           "#wrong");
    if (b->use_mpi) printf("  %9s %6s", "time", "ratio");
    if (b->bounds)
        printf("  %8s %6s %8s %6s  %8s %8s", "bound", "%", "bound", "%", "ideal", "ideal");
    printf("\n# %10s  %12s  %8s  %6s  %6s  %7s %7s %7s %6s  %7s %7s %7s %6s", "(B)", "(elements)",
           "", "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)", "");
    if (b->use_mpi) printf("  %9s %6s", "(us)", "mpi/us");
    if (b->bounds)
        printf("  %8s %6s %8s %6s  %8s %8s", "(GB/s)", "", "(GB/s)", "", "(GB/s)", "(GB/s)");
    printf("\n");
    fflush(stdout);
}

static void print_column(const bench_t *b, const column_t *c, size_t bytes)
{
    if (!c->ran) {
        printf("  %7s %7s %7s %6s", "n/a", "n/a", "n/a", "n/a");
        return;
    }
    if (c->err != MSCCLPP_OK) {
        printf("  %7s %7s %7s %6s", "error", "-", "-", "-");
        return;
    }
    double algbw = (double)bytes / 1e3 / c->time_us;
    double busbw = algbw * bench_busbw_factor(b->coll, b->nranks);
    char wrong[32];
    if (c->wrong < 0)
        snprintf(wrong, sizeof(wrong), "N/A");
    else
        snprintf(wrong, sizeof(wrong), "%lld", c->wrong);
    printf("  %7.*f %7.2f %7.2f %6s", c->time_us < 10000 ? 2 : 0, c->time_us, algbw, busbw, wrong);
}

/* --- --json and --csv records (jansson) ------------------------------------------------------ */

/* A real rounded to `decimals`, as the table prints it; null for NaN/inf. */
static json_t *jreal(double v, int decimals)
{
    if (!isfinite(v)) return json_null();
    double scale = pow(10, decimals);
    return json_real(round(v * scale) / scale);
}

static json_t *jstr(const char *s) { return s ? json_string(s) : json_null(); }

static json_t *column_record(const bench_t *b, const column_t *c, size_t bytes)
{
    if (!c->ran) return json_null();
    if (c->err != MSCCLPP_OK)
        return json_pack("{s:o, s:s, s:i}", "plan", jstr(c->plan), "error",
                         mscclpp_result_string(c->err), "error_rank", c->err_rank);
    double algbw = (double)bytes / 1e3 / c->time_us;
    json_t *o = json_pack("{s:o, s:o, s:o, s:o, s:o}", "plan", jstr(c->plan), "time_us",
                          jreal(c->time_us, 3), "algbw", jreal(algbw, 4), "busbw",
                          jreal(algbw * bench_busbw_factor(b->coll, b->nranks), 4), "wrong",
                          c->wrong < 0 ? json_null() : json_integer(c->wrong));
    /* the bound column: bytes the plan moves, the algbw they allow at the row's copy
       bandwidth, and the share of it reached (null when unknown: a native algorithm, no copy) */
    int known = c->bound > 0;
    json_object_set_new(o, "bytes_moved", known ? json_integer((json_int_t)c->moved) : json_null());
    json_object_set_new(o, "bound_algbw", known ? jreal(c->bound, 4) : json_null());
    json_object_set_new(o, "bound_pct", known ? jreal(algbw / c->bound * 100, 2) : json_null());
    /* the ideal: the collective's fewest bytes at the same bandwidth */
    int least = c->ideal > 0;
    json_object_set_new(o, "min_bytes", least ? json_integer((json_int_t)c->least) : json_null());
    json_object_set_new(o, "ideal_algbw", least ? jreal(c->ideal, 4) : json_null());
    json_object_set_new(o, "ideal_pct", least ? jreal(algbw / c->ideal * 100, 2) : json_null());
    json_object_set_new(o, "error", json_null());
    return o;
}

/* One row as a record: what --json writes (one line each) and --csv flattens. */
static json_t *row_record(bench_t *b, size_t bytes, size_t count, mscclpp_dtype_t dt,
                          const char *opname, int root, const column_t *const cols[2],
                          double mpi_us)
{
    json_t *rec = json_object();
    json_object_set_new(rec, "collective",
                        json_string(b->plan ? mscclpp_plan_collective(b->plan)
                                            : bench_coll_name(b->coll)));
    /* "plan": the plan of the first column that ran (each column names its own too);
       "plan_file": the --plan path, null for the default plans */
    json_object_set_new(rec, "plan", jstr(cols[0]->ran ? cols[0]->plan : cols[1]->plan));
    json_object_set_new(rec, "plan_file", jstr(b->o->plan_path));
    /* the plan a collective call runs (the tuning table's or the registry's choice) */
    json_t *sel = json_object();
    for (int k = 0; k < 2 && !b->plan; k++) {
        const mscclpp_plan_t *p = NULL;
        int ok = cols[k]->ran && mscclpp_executor_choose_plan(b->exec, bench_coll_name(b->coll),
                                                              k, bytes, &p, NULL) == MSCCLPP_OK;
        json_object_set_new(sel, k ? "in_place" : "out_of_place",
                            ok ? jstr(mscclpp_plan_name(p)) : json_null());
    }
    json_object_set_new(rec, "selected_plan", sel);
    json_object_set_new(rec, "tuning_file", jstr(mscclpp_executor_tuning_file(b->exec)));
    json_object_set_new(rec, "nranks", json_integer(b->nranks));
    json_object_set_new(rec, "copy_gbps", b->copy_gbps > 0 ? jreal(b->copy_gbps, 4) : json_null());
    json_object_set_new(rec, "copy_bytes", b->copy_gbps > 0 ? json_integer((json_int_t)b->copy_bytes)
                                                            : json_null());
    json_object_set_new(rec, "backend", json_string(mscclpp_backend_name()));
    json_object_set_new(rec, "size", json_integer((json_int_t)bytes));
    json_object_set_new(rec, "count", json_integer((json_int_t)count));
    json_object_set_new(rec, "type", json_string(bench_dtype_name(dt)));
    json_object_set_new(rec, "redop", json_string(opname));
    json_object_set_new(rec, "root", json_integer(root));
    json_object_set_new(rec, "average", json_integer(b->o->average));
    json_object_set_new(rec, "out_of_place", column_record(b, cols[0], bytes));
    json_object_set_new(rec, "in_place", column_record(b, cols[1], bytes));
    const column_t *ref = cols[0]->ran ? cols[0] : cols[1];
    int mpi = b->use_mpi && mpi_us >= 0;
    json_object_set_new(rec, "mpi_time_us", mpi ? jreal(mpi_us, 3) : json_null());
    json_object_set_new(rec, "mpi_ratio", mpi && ref->err == MSCCLPP_OK
                                              ? jreal(mpi_us / ref->time_us, 4)
                                              : json_null());
    return rec;
}

#define RECORD_FLAGS (JSON_COMPACT | JSON_REAL_PRECISION(15) | JSON_ENCODE_ANY)

/* The CSV columns: the record's fields, those of the two placements prefixed. */
static const char *const csv_top[] = {"collective", "plan", "plan_file", "tuning_file",
                                      "nranks", "backend", "size", "count", "type", "redop",
                                      "root", "average", "copy_gbps", "copy_bytes",
                                      "mpi_time_us", "mpi_ratio"};
static const char *const csv_col[] = {"plan",   "time_us",     "algbw",     "busbw", "wrong",
                                      "bytes_moved", "bound_algbw", "bound_pct", "min_bytes",
                                      "ideal_algbw", "ideal_pct", "error", "error_rank"};
#define N_CSV(a) (sizeof(a) / sizeof((a)[0]))

static void csv_header(FILE *f)
{
    for (size_t i = 0; i < N_CSV(csv_top); i++) fprintf(f, "%s%s", i ? "," : "", csv_top[i]);
    fputs(",selected_plan.out_of_place,selected_plan.in_place", f);
    for (int k = 0; k < 2; k++)
        for (size_t i = 0; i < N_CSV(csv_col); i++)
            fprintf(f, ",%s.%s", k ? "in_place" : "out_of_place", csv_col[i]);
    fputc('\n', f);
}

/* A field: empty for null or absent, a string quoted when it needs it (RFC 4180). */
static void csv_field(FILE *f, const json_t *v)
{
    if (!v || json_is_null(v)) return;
    if (json_is_string(v)) {
        const char *s = json_string_value(v);
        if (!s[strcspn(s, ",\"\r\n")]) {
            fputs(s, f);
            return;
        }
        fputc('"', f);
        for (; *s; s++) {
            if (*s == '"') fputc('"', f);
            fputc(*s, f);
        }
        fputc('"', f);
        return;
    }
    char *t = json_dumps(v, RECORD_FLAGS);
    if (t) fputs(t, f);
    free(t);
}

static void csv_row(FILE *f, const json_t *rec)
{
    for (size_t i = 0; i < N_CSV(csv_top); i++) {
        if (i) fputc(',', f);
        csv_field(f, json_object_get(rec, csv_top[i]));
    }
    const json_t *sel = json_object_get(rec, "selected_plan");
    fputc(',', f);
    csv_field(f, json_object_get(sel, "out_of_place"));
    fputc(',', f);
    csv_field(f, json_object_get(sel, "in_place"));
    for (int k = 0; k < 2; k++) {
        const json_t *c = json_object_get(rec, k ? "in_place" : "out_of_place");
        for (size_t i = 0; i < N_CSV(csv_col); i++) {
            fputc(',', f);
            csv_field(f, json_object_get(c, csv_col[i]));
        }
    }
    fputc('\n', f);
}

/* --plot: one series per plan and placement (and dtype/op when the sweep has several). */
static void plot_row(bench_t *b, size_t bytes, mscclpp_dtype_t dt, mscclpp_redop_t op,
                     const column_t *const cols[2], double mpi_us)
{
    const opts_t *o = b->o;
    char suffix[64] = "", name[256];
    int nops = bench_coll_reduces(b->coll) ? o->nops : 1;
    if (o->ndtypes > 1 || nops > 1)
        snprintf(suffix, sizeof(suffix), ", %s%s%s", bench_dtype_name(dt), nops > 1 ? " " : "",
                 nops > 1 ? bench_redop_name(op) : "");
    double factor = bench_busbw_factor(b->coll, b->nranks);
    for (int k = 0; k < 2; k++) {
        const column_t *c = cols[k];
        if (!c->ran || c->err != MSCCLPP_OK) continue;
        snprintf(name, sizeof(name), "%s (%s)%s",
                 c->plan ? c->plan : bench_coll_name(b->coll), k ? "in-place" : "out-of-place",
                 suffix);
        if (bench_plot_add(b->plot, name, bytes, c->time_us,
                           (double)bytes / 1e3 / c->time_us * factor))
            fprintf(stderr, "mscclpp-bench: --plot: out of memory; the picture misses rows\n");
    }
    if (mpi_us > 0) {
        snprintf(name, sizeof(name), "MPI %s%s", bench_coll_name(b->coll), suffix);
        if (bench_plot_add(b->plot, name, bytes, mpi_us, (double)bytes / 1e3 / mpi_us * factor))
            fprintf(stderr, "mscclpp-bench: --plot: out of memory; the picture misses rows\n");
    }
}

static void emit_row(bench_t *b, size_t bytes, size_t count, mscclpp_dtype_t dt,
                     mscclpp_redop_t op, const column_t *oop, const column_t *ip, double mpi_us)
{
    int reduce = bench_coll_reduces(b->coll);
    const char *opname = reduce ? bench_redop_name(op) : "none";
    int root = b->coll == BENCH_BROADCAST ? b->o->root : -1;
    const column_t *cols[2] = {oop, ip};
    for (int k = 0; k < 2; k++) {
        const column_t *c = cols[k];
        if (!c->ran) continue;
        if (c->err != MSCCLPP_OK) {
            b->failed_calls++;
        } else {
            b->bw_sum += (double)bytes / 1e3 / c->time_us * bench_busbw_factor(b->coll, b->nranks);
            b->bw_count++;
            if (c->wrong > 0) b->wrong_total += c->wrong;
        }
    }
    if (b->rank != 0) return;
    printf("%12zu  %12zu  %8s  %6s  %6d", bytes, count, bench_dtype_name(dt), opname, root);
    print_column(b, oop, bytes);
    print_column(b, ip, bytes);
    const column_t *ref = oop->ran ? oop : ip;
    if (b->use_mpi) {
        if (mpi_us < 0)
            printf("  %9s %6s", "n/a", "n/a");
        else if (ref->err != MSCCLPP_OK)
            printf("  %9.2f %6s", mpi_us, "-");
        else
            printf("  %9.2f %6.2f", mpi_us, mpi_us / ref->time_us);
    }
    for (int k = 0; k < 2 && b->bounds; k++) {
        const column_t *c = cols[k];
        if (c->bound > 0)
            printf("  %8.2f %6.1f", c->bound, (double)bytes / 1e3 / c->time_us / c->bound * 100);
        else
            printf("  %8s %6s", "-", "-");
    }
    for (int k = 0; k < 2 && b->bounds; k++) {
        const column_t *c = cols[k];
        if (c->ideal > 0)
            printf("  %8.2f", c->ideal);
        else
            printf("  %8s", "-");
    }
    printf("\n");
    for (int k = 0; k < 2; k++) {
        const column_t *c = cols[k];
        if (!c->ran || c->err == MSCCLPP_OK) continue;
        printf("#   %s failed on rank %d: %s%s%s\n", k ? "in-place" : "out-of-place", c->err_rank,
               mscclpp_result_string(c->err), c->err_rank == 0 ? ": " : " (see its stderr)",
               c->err_rank == 0 ? c->msg : "");
    }
    fflush(stdout);
    if (b->plot) plot_row(b, bytes, dt, op, cols, mpi_us);
    if (b->json || b->csv) {
        json_t *rec = row_record(b, bytes, count, dt, opname, root, cols, mpi_us);
        if (!rec) {
            fprintf(stderr, "mscclpp-bench: out of memory for the --json/--csv record\n");
            return;
        }
        if (b->json) {
            json_dumpf(rec, b->json, RECORD_FLAGS);
            fputc('\n', b->json);
            fflush(b->json);
        }
        if (b->csv) {
            csv_row(b->csv, rec);
            fflush(b->csv);
        }
        json_decref(rec);
    }
}

/* --- the sweep ------------------------------------------------------------------------------ */

/*
 * The plan a call of this row runs: --plan's, or the one the executor selects for the
 * collective (an in-place call with no in-place plan runs the out-of-place plan on a staged copy
 * of the input, as run_collective does).
 */
static const char *column_plan(bench_t *b, uint64_t msg, int inplace)
{
    if (b->plan) return mscclpp_plan_name(b->plan);
    const mscclpp_plan_t *p = NULL;
    const char *coll = bench_coll_name(b->coll);
    /* the executor's own choice (the tuning table, MSCCLPP_PLAN_DIRECT=auto's agreement on the
     * calls just made: mscclpp_executor_choose_plan), not the registry's alone */
    if (mscclpp_executor_choose_plan(b->exec, coll, inplace, msg, &p, NULL) != MSCCLPP_OK &&
        (!inplace || mscclpp_executor_choose_plan(b->exec, coll, 0, msg, &p, NULL) != MSCCLPP_OK))
        return NULL;
    return p ? mscclpp_plan_name(p) : NULL;
}

/* Runs one row; returns -1 if the ranks can no longer talk. */
static int run_row(bench_t *b, size_t bytes, mscclpp_dtype_t dt, mscclpp_redop_t op)
{
    size_t esize = mscclpp_dtype_size(dt);
    bench_shape_t s;
    if (!bench_shape(b->coll, bytes, esize, b->nranks, &s)) return 0; /* rounds to nothing */
    size_t size = bench_shape_bytes(b->coll, &s, esize);
    /* message size, as plans count it: allgather output, input otherwise */
    uint64_t msg = b->coll == BENCH_ALLGATHER ? s.recv_count * esize : s.send_count * esize;
    if (b->plan) {
        /* Only the sizes the plan accepts. */
        if (msg < mscclpp_plan_min_message_size(b->plan) ||
            msg > mscclpp_plan_max_message_size(b->plan))
            return 0;
    }
    column_t oop = {0}, ip = {0};
    if (b->run_oop && run_column(b, &s, dt, op, 0, &oop)) return -1;
    if (b->run_ip && run_column(b, &s, dt, op, 1, &ip)) return -1;
    if (oop.ran) oop.plan = column_plan(b, msg, 0);
    if (ip.ran) ip.plan = column_plan(b, msg, 1);
    if (measure_copy(b, size)) return -1;
    column_bound(b, &s, dt, msg, 0, size, &oop);
    column_bound(b, &s, dt, msg, 1, size, &ip);
    double mpi_us = -1;
#ifdef MSCCLPP_HAVE_MPI
    if (b->use_mpi) mpi_us = time_mpi(b, &s, dt, op);
#endif
    emit_row(b, size, size / esize, dt, op, &oop, &ip, mpi_us);
    return 0;
}

static int run_sweep(bench_t *b)
{
    const opts_t *o = b->o;
    int nops = bench_coll_reduces(b->coll) ? o->nops : 1;
    for (int d = 0; d < o->ndtypes; d++)
        for (int k = 0; k < nops; k++)
            for (size_t bytes = o->min_bytes; bytes <= o->max_bytes;) {
                if (run_row(b, bytes, (mscclpp_dtype_t)o->dtypes[d], (mscclpp_redop_t)o->ops[k]))
                    return -1;
                size_t next = o->step_factor ? bytes * o->step_factor : bytes + o->step_bytes;
                if (next <= bytes) break; /* overflow */
                bytes = next;
            }
    return 0;
}

/* --- --which: the plan each call runs ------------------------------------------------------- */

#define WHICH_MAX_CANDIDATES 16

static void which_row(bench_t *b, size_t size, uint64_t msg, int inplace)
{
    const char *coll = bench_coll_name(b->coll);
    const mscclpp_plan_t *p = b->plan;
    int nthreads = 0, staged = 0;
    mscclpp_result_t rc = MSCCLPP_OK;
    if (!p) {
        rc = mscclpp_executor_choose_plan(b->exec, coll, inplace, msg, &p, &nthreads);
        /* an in-place call without an in-place plan runs the out-of-place one on a copy */
        if (rc != MSCCLPP_OK && inplace &&
            mscclpp_executor_choose_plan(b->exec, coll, 0, msg, &p, &nthreads) == MSCCLPP_OK) {
            rc = MSCCLPP_OK;
            staged = 1;
        }
    }
    const char *where = inplace ? (staged ? "in-place (staged)" : "in-place") : "out-of-place";
    if (rc != MSCCLPP_OK) {
        printf("%12zu  %-17s  none: %s\n", size, where, mscclpp_last_error());
        return;
    }
    char threads[32];
    if (nthreads) snprintf(threads, sizeof threads, "%d", nthreads);
    else snprintf(threads, sizeof threads, "plan's");
    const char *file = mscclpp_plan_file(p);
    printf("%12zu  %-17s  %-40s %7s  %s\n", size, where, mscclpp_plan_name(p), threads,
           file ? file : "(not from a file: made for the job or registered by the program)");
    if (b->plan) return;
    /* MSCCLPP_PLAN_DIRECT=auto registers a backend's direct plans (host; CUDA from 32 MiB) for
     * calls whose ranks all pass shareable buffers only (docs/plan-selection.md): others run
     * the next plan that matches */
    const char *dm = mscclpp_config_get("MSCCLPP_PLAN_DIRECT");
    char dirpart[64];
    snprintf(dirpart, sizeof dirpart, "/direct/%s/", mscclpp_backend_name());
    if ((!dm || !*dm || !strcmp(dm, "auto")) && file && strstr(file, dirpart))
        printf("%12s  %-17s  (MSCCLPP_PLAN_DIRECT=auto: when every rank's buffers are shareable, "
               "mscclpp_malloc or registered; otherwise the first of the others)\n",
               "", "");
    const mscclpp_plan_t *cands[WHICH_MAX_CANDIDATES];
    int n = 0;
    if (mscclpp_executor_list_plans(b->exec, coll, staged ? 0 : inplace, msg, 0, cands,
                                    WHICH_MAX_CANDIDATES, &n) != MSCCLPP_OK || n < 2)
        return;
    printf("%12s  %-17s  other plans that match, in registry order:", "", "");
    for (int i = 0; i < n && i < WHICH_MAX_CANDIDATES; i++)
        if (cands[i] != p) printf(" %s", mscclpp_plan_name(cands[i]));
    printf("%s\n", n > WHICH_MAX_CANDIDATES ? " ..." : "");
}

/* --which: rank 0 prints the choice for every size of the sweep; nothing runs. */
static int bench_which(bench_t *b)
{
    const opts_t *o = b->o;
    if (b->rank == 0) {
        printf("# mscclpp-bench %s --which: %s, %d rank(s) (%s), backend %s\n", PACKAGE_VERSION,
               b->plan ? mscclpp_plan_collective(b->plan) : bench_coll_name(b->coll), b->nranks,
               b->launcher, mscclpp_backend_name());
        const char *tf = mscclpp_executor_tuning_file(b->exec);
        printf("# tuning table: %s\n", tf ? tf : "none");
        printf("# %10s  %-17s  %-40s %7s  %s\n", "size (B)", "placement", "plan", "threads",
               "from");
        size_t esize = mscclpp_dtype_size((mscclpp_dtype_t)o->dtypes[0]);
        for (size_t bytes = o->min_bytes; bytes <= o->max_bytes;) {
            bench_shape_t s;
            if (bench_shape(b->coll, bytes, esize, b->nranks, &s)) {
                size_t size = bench_shape_bytes(b->coll, &s, esize);
                uint64_t msg = b->coll == BENCH_ALLGATHER ? s.recv_count * esize
                                                          : s.send_count * esize;
                for (int ip = 0; ip < 2; ip++)
                    if (ip ? b->run_ip : b->run_oop) which_row(b, size, msg, ip);
            }
            size_t next = o->step_factor ? bytes * o->step_factor : bytes + o->step_bytes;
            if (next <= bytes) break;
            bytes = next;
        }
        fflush(stdout);
    }
    mscclpp_result_t rc = mscclpp_bootstrap_barrier(b->boot);
    if (rc != MSCCLPP_OK) {
        report(b, "barrier", rc);
        return 1;
    }
    return 0;
}

/* --- tuning (tools/mscclpp-tune.c runs the sweep; this times one candidate) ---------------- */

static int tune_time(void *ctx, bench_coll_t coll, const mscclpp_plan_t *plan, int nblocks,
                     int nthreads, size_t bytes, int inplace, double *mean_us, char *why,
                     size_t why_cap)
{
    bench_t *b = ctx;
    size_t esize = mscclpp_dtype_size(b->o->tune.dtype);
    bench_shape_t s;
    if (!bench_shape(coll, bytes, esize, b->nranks, &s)) return 1;
    b->coll = coll;
    b->plan = (mscclpp_plan_t *)plan; /* borrowed from the registry; not destroyed here */
    b->nblocks = nblocks;
    b->nthreads = nthreads;
    column_t col;
    int r = run_column(b, &s, b->o->tune.dtype, b->o->tune.op, inplace, &col);
    b->plan = NULL;
    if (r) return -1;
    if (col.err != MSCCLPP_OK) {
        snprintf(why, why_cap, "%s on rank %d", mscclpp_result_string(col.err), col.err_rank);
        return 1;
    }
    if (col.wrong > 0) {
        snprintf(why, why_cap, "%lld wrong elements", col.wrong);
        return 1;
    }
    *mean_us = col.time_us;
    return 0;
}

static int bench_tune_rank(bench_t *b)
{
    tune_opts_t t = b->o->tune;
    int nlocal = 1;
    if (mscclpp_comm_local_size(b->comm, &nlocal) != MSCCLPP_OK) return 1;
    if (b->o->coll >= 0) {
        t.colls[0] = b->o->coll, t.ncolls = 1;
    } else {
        for (int c = 0; c < BENCH_COLL_COUNT; c++) t.colls[c] = c;
        t.ncolls = BENCH_COLL_COUNT;
    }
    t.min_bytes = b->o->min_bytes, t.max_bytes = b->o->max_bytes;
    t.step_factor = b->o->step_factor, t.step_bytes = b->o->step_bytes;
    t.dtype = (mscclpp_dtype_t)b->o->dtypes[0];
    t.op = (mscclpp_redop_t)b->o->ops[0];
    if (t.op == BENCH_AVG) t.op = MSCCLPP_SUM; /* the plans of the sum serve the average */
    if (!t.nthreads) {
        /* the host backend runs a block on one thread: other counts only cost sweep time */
        static const int gpu[] = {0, 256, 512, 1024};
        int host = !strcmp(mscclpp_backend_name(), "host");
        t.nthreads = host ? 1 : 4;
        for (int i = 0; i < t.nthreads; i++) t.threads[i] = host ? 0 : gpu[i];
    }
    tune_env_t env = {.ctx = b, .time_plan = tune_time, .exec = b->exec, .rank = b->rank,
                      .nranks = b->nranks, .nlocal = nlocal};
    return bench_tune(&env, &t);
}

/* Everything a rank does once it has a communicator. Returns the rank's exit status. */
static int bench_rank(const opts_t *o, mscclpp_comm_t *comm, const char *launcher, int use_mpi)
{
    bench_t b = {.o = o, .comm = comm, .launcher = launcher, .use_mpi = use_mpi};
    int status = 1;
    mscclpp_result_t rc;
    b.coll = (bench_coll_t)o->coll;
    b.run_oop = b.run_ip = 1;
    if ((rc = mscclpp_comm_rank(comm, &b.rank)) != MSCCLPP_OK ||
        (rc = mscclpp_comm_size(comm, &b.nranks)) != MSCCLPP_OK ||
        (rc = mscclpp_comm_bootstrap(comm, &b.boot)) != MSCCLPP_OK) {
        report(&b, "communicator", rc);
        return 1;
    }
    if (o->plan_path) {
        if ((rc = mscclpp_plan_load_file(o->plan_path, &b.plan)) != MSCCLPP_OK) {
            report(&b, o->plan_path, rc);
            return 1;
        }
        int c = bench_coll_parse(mscclpp_plan_collective(b.plan));
        if (c < 0 && o->check) {
            fprintf(stderr, "mscclpp-bench: %s: collective '%s' is not one the tool can check "
                            "(run it unchecked with -c 0)\n",
                    o->plan_path, mscclpp_plan_collective(b.plan));
            goto fail_plan;
        }
        if (c < 0) {
            /* Unchecked "test"/"custom" plans: time them with the buffer shape their chunk
             * counts ask for (output nranks x input, input nranks x output, or equal). */
            uint32_t in = 0, out = 0;
            (void)mscclpp_plan_chunks(b.plan, 0, &in, &out, NULL);
            c = in && out == (uint32_t)b.nranks * in   ? BENCH_ALLGATHER
                : out && in == (uint32_t)b.nranks * out ? BENCH_REDUCESCATTER
                                                        : BENCH_ALLREDUCE;
        }
        if (mscclpp_plan_world_size(b.plan) != b.nranks) {
            fprintf(stderr, "mscclpp-bench: %s is for %d ranks, running %d\n", o->plan_path,
                    mscclpp_plan_world_size(b.plan), b.nranks);
            goto fail_plan;
        }
        b.coll = (bench_coll_t)c;
        /* A plan is written for one placement; run only that column. */
        b.run_ip = mscclpp_plan_is_inplace(b.plan) ? 1 : 0;
        b.run_oop = !b.run_ip;
    }
    if (b.coll == BENCH_BROADCAST && o->root >= b.nranks) {
        fprintf(stderr, "mscclpp-bench: root %d is not a rank (%d ranks)\n", o->root, b.nranks);
        goto fail_plan;
    }
    if ((rc = mscclpp_executor_create(comm, &b.exec)) != MSCCLPP_OK) {
        report(&b, "executor", rc);
        goto fail_plan;
    }
    if (o->plan_dir && (rc = mscclpp_executor_load_plan_dir(b.exec, o->plan_dir, NULL)) !=
                           MSCCLPP_OK) {
        report(&b, o->plan_dir, rc);
        goto fail_exec;
    }
    for (int i = 0; i < o->nnatives; i++) {
        if ((rc = mscclpp_native_load(o->natives[i], &b.natives[i])) != MSCCLPP_OK ||
            (rc = mscclpp_executor_register_native(b.exec, comm, b.natives[i], NULL, 0, NULL,
                                                   NULL)) != MSCCLPP_OK) {
            report(&b, o->natives[i], rc);
            goto fail_exec;
        }
    }
    if (mscclpp_stream_create(&b.stream) != MSCCLPP_OK) b.stream = NULL; /* synchronous calls */
    /* Every nccl-tests size fits in max_bytes for every collective; round up for alignment. */
    b.buf_bytes = (o->max_bytes + 255) & ~(size_t)255;
    if (o->malloc_bufs) {
        /* the application's private memory: only the host backend's kernels can use it */
        if (strcmp(mscclpp_backend_name(), "host")) {
            fprintf(stderr, "mscclpp-bench: --malloc needs the host backend (this is %s)\n",
                    mscclpp_backend_name());
            goto fail_bufs;
        }
        b.malloc_bufs = 1;
        if (!(b.sendbuf = malloc(b.buf_bytes)) || !(b.recvbuf = malloc(b.buf_bytes))) {
            fprintf(stderr, "mscclpp-bench: rank %d: out of memory for %zu-byte buffers\n",
                    b.rank, b.buf_bytes);
            goto fail_bufs;
        }
    } else if ((rc = mscclpp_malloc(b.buf_bytes, &b.sendbuf)) != MSCCLPP_OK ||
               (rc = mscclpp_malloc(b.buf_bytes, &b.recvbuf)) != MSCCLPP_OK) {
        report(&b, "mscclpp_malloc", rc);
        goto fail_bufs;
    }
    b.host = malloc(b.buf_bytes);
    b.xchg = calloc((size_t)b.nranks, 8);
    if (use_mpi) {
        b.mpi_send = malloc(b.buf_bytes);
        b.mpi_recv = malloc(b.buf_bytes);
    }
    if (!b.host || !b.xchg || (use_mpi && (!b.mpi_send || !b.mpi_recv))) {
        fprintf(stderr, "mscclpp-bench: rank %d: out of memory for %zu-byte buffers\n", b.rank,
                b.buf_bytes);
        goto fail_host;
    }
    if (b.rank == 0 && o->json_path && !(b.json = fopen(o->json_path, "w"))) {
        fprintf(stderr, "mscclpp-bench: cannot write %s: %s\n", o->json_path, strerror(errno));
        goto fail_host; /* other ranks then fail at the first exchange, bounded by the timeout */
    }
    if (b.rank == 0 && o->csv_path) {
        if (!(b.csv = fopen(o->csv_path, "w"))) {
            fprintf(stderr, "mscclpp-bench: cannot write %s: %s\n", o->csv_path, strerror(errno));
            goto fail_host;
        }
        csv_header(b.csv);
    }
    if (b.rank == 0 && o->plot_path) {
        char title[256];
        snprintf(title, sizeof(title), "mscclpp-bench %s, %d ranks, backend %s",
                 b.plan ? mscclpp_plan_collective(b.plan) : bench_coll_name(b.coll), b.nranks,
                 mscclpp_backend_name());
        if (!(b.plot = bench_plot_new(title))) {
            fprintf(stderr, "mscclpp-bench: out of memory for --plot\n");
            goto fail_host;
        }
    }
    if (o->tune.path) {
        status = bench_tune_rank(&b);
        goto done;
    }
    if (o->which) {
        status = bench_which(&b);
        goto done;
    }
    b.bounds = 1;
    char *ranks = NULL;
    if (describe_ranks(&b, &ranks)) goto done;
    if (b.rank == 0) print_header(&b, ranks);
    free(ranks);
    int swept = 0;
    for (int cycle = 0; cycle < o->cycles && swept == 0; cycle++) swept = run_sweep(&b);
    if (swept == 0) {
        if (b.rank == 0) {
            /* Calls that failed were not checked: never "0 OK" above them. */
            if (b.failed_calls)
                printf("# Failed calls         : %d FAILED (their output was not checked)\n",
                       b.failed_calls);
            printf("# Out of bounds values : %lld %s\n", b.wrong_total,
                   b.wrong_total || b.failed_calls ? "FAILED" : "OK");
            printf("# Avg bus bandwidth    : %g \n#\n",
                   b.bw_count ? b.bw_sum / b.bw_count : 0.0);
            fflush(stdout);
        }
        status = b.wrong_total || b.failed_calls ? 1 : 0;
        if (b.plot && bench_plot_write(b.plot, o->plot_path) != 0) {
            fprintf(stderr, "mscclpp-bench: cannot write %s: %s\n", o->plot_path,
                    strerror(errno));
            status = 1;
        }
    }
done:
fail_host:
    if (b.json) fclose(b.json);
    if (b.csv) fclose(b.csv);
    bench_plot_free(b.plot);
    free(b.mpi_send);
    free(b.mpi_recv);
    free(b.xchg);
    free(b.host);
fail_bufs:
    /* Work a failed call left queued (the executor's staging copies) must not outlive the
       buffers it reads. */
    if (b.stream) {
        /* an error the stream still holds is a failed call like any other */
        mscclpp_result_t src = mscclpp_stream_synchronize(b.stream);
        if (src != MSCCLPP_OK && status == 0) {
            report(&b, "stream", src);
            status = 1;
        }
    }
    if (b.malloc_bufs) {
        free(b.recvbuf);
        free(b.sendbuf);
    } else {
        if (b.recvbuf) mscclpp_free(b.recvbuf);
        if (b.sendbuf) mscclpp_free(b.sendbuf);
    }
    if (b.stream) mscclpp_stream_destroy(b.stream);
fail_exec:
    mscclpp_executor_release_natives(b.exec);
    mscclpp_executor_destroy(b.exec);
    for (int i = 0; i < o->nnatives; i++) mscclpp_native_destroy(b.natives[i]);
fail_plan:
    if (b.plan) mscclpp_plan_destroy(b.plan);
    return status;
}

/* --- launchers ------------------------------------------------------------------------------ */

/*
 * The forked launcher cleans up on every path (issue 22 item 8): a signal that would end it
 * (Ctrl-C, kill, a closed terminal) is caught, forwarded to the ranks, and the launcher removes
 * its network namespaces before it dies of that signal; each rank asks the kernel to kill it
 * when the launcher dies (PR_SET_PDEATHSIG), so even a launcher killed with SIGKILL leaves no
 * rank running; what such a launcher leaves of its namespaces the next launcher sweeps away
 * (netns_sweep).
 */
static const int launcher_signals[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT};
#define N_LAUNCHER_SIGNALS (sizeof launcher_signals / sizeof launcher_signals[0])
static volatile sig_atomic_t launcher_signal; /* the first one caught */
static pid_t launcher_pid;
static struct sigaction launcher_old[N_LAUNCHER_SIGNALS]; /* dispositions before ours */

static void on_launcher_signal(int sig)
{
    if (!launcher_signal) launcher_signal = sig;
}

/* A signal the launcher was started with ignored (nohup, a background job of a script) stays
 * ignored, in the launcher and its ranks. */
static void launcher_signals_catch(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_launcher_signal;
    sigemptyset(&sa.sa_mask);
    for (size_t i = 0; i < N_LAUNCHER_SIGNALS; i++) {
        sigaction(launcher_signals[i], NULL, &launcher_old[i]);
        if (launcher_old[i].sa_handler != SIG_IGN) sigaction(launcher_signals[i], &sa, NULL);
    }
}

static void launcher_signals_restore(void)
{
    for (size_t i = 0; i < N_LAUNCHER_SIGNALS; i++)
        sigaction(launcher_signals[i], &launcher_old[i], NULL);
}

/* In a forked rank, first thing: the launcher's dispositions back, and death with it. */
static void rank_bind_to_launcher(void)
{
    launcher_signals_restore();
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != launcher_pid) _exit(1); /* the launcher died before the prctl */
}

/*
 * A forked rank: get the session's unique id, join, run, and leave without atexit handlers.
 * Rank 0 creates the id (its root thread lives in rank 0) and hands it to the others through
 * `id_pipe`: the ranks are forked before any library thread exists, so no child inherits a lock
 * (allocator, log) that a thread of the parent held at fork time.
 */
static void fork_child(const opts_t *o, int id_pipe[2], int rank)
{
    mscclpp_unique_id_t id;
    mscclpp_comm_t *comm = NULL;
    int status = 1;
    rank_bind_to_launcher();
    if (netns_launch_enter(rank) != 0) _exit(1);
    mscclpp_result_t rc = MSCCLPP_OK;
    if (rank == 0) {
        close(id_pipe[0]);
        rc = mscclpp_get_unique_id(&id);
        if (rc != MSCCLPP_OK) {
            fprintf(stderr, "mscclpp-bench: rank 0: mscclpp_get_unique_id: %s: %s\n",
                    mscclpp_result_string(rc), mscclpp_last_error());
            fflush(NULL);
            _exit(1); /* closing the pipe tells the others */
        }
        /* Writes of one id are atomic (below PIPE_BUF), so each reader gets a whole one; a rank
           that died before reading must not take rank 0 down with SIGPIPE. */
        signal(SIGPIPE, SIG_IGN);
        for (int r = 1; r < o->np; r++)
            if (write(id_pipe[1], &id, sizeof id) != (ssize_t)sizeof id) {
                fprintf(stderr, "mscclpp-bench: rank 0: passing the unique id: %s\n",
                        strerror(errno));
                break;
            }
        close(id_pipe[1]);
    } else {
        close(id_pipe[1]);
        size_t got = 0;
        while (got < sizeof id) {
            ssize_t n = read(id_pipe[0], (char *)&id + got, sizeof id - got);
            if (n < 0 && errno == EINTR) continue;
            if (n <= 0) {
                fprintf(stderr, "mscclpp-bench: rank %d: rank 0 exited before it passed the "
                                "unique id\n", rank);
                fflush(NULL);
                _exit(1);
            }
            got += (size_t)n;
        }
        close(id_pipe[0]);
    }
    rc = mscclpp_comm_init_rank(&id, rank, o->np, &comm);
    if (rc != MSCCLPP_OK) {
        fprintf(stderr, "mscclpp-bench: rank %d: mscclpp_comm_init_rank: %s: %s\n", rank,
                mscclpp_result_string(rc), mscclpp_last_error());
    } else {
        status = bench_rank(o, comm, "forked", 0);
        mscclpp_comm_destroy(comm);
    }
    fflush(NULL);
    _exit(status);
}

/* The launcher was told to stop: pass the signal on to the ranks still running, give them
 * 2 s to go, then kill what is left. */
static void stop_ranks(const opts_t *o, pid_t *pids, int *done, int *left, int sig)
{
    fprintf(stderr, "mscclpp-bench: %s: stopping the ranks\n", strsignal(sig));
    for (int r = 0; r < o->np; r++)
        if (pids[r] && !done[r]) kill(pids[r], sig);
    double until = now_s() + 2;
    while (*left > 0) {
        for (int r = 0; r < o->np; r++) {
            if (!pids[r] || done[r]) continue;
            if (now_s() > until) kill(pids[r], SIGKILL);
            if (waitpid(pids[r], NULL, now_s() > until ? 0 : WNOHANG) == pids[r]) {
                done[r] = 1;
                (*left)--;
            }
        }
        if (*left > 0) nanosleep(&(struct timespec){0, 5 * 1000 * 1000}, NULL);
    }
}

static int run_forked(const opts_t *o)
{
    launcher_pid = getpid();
    launcher_signals_catch();
    if (o->nodes > 1 && netns_launch_layout(o->node_size, o->nodes, o->np)) return 1;
    pid_t *pids = calloc((size_t)o->np, sizeof(pid_t));
    int *done = calloc((size_t)o->np, sizeof(int));
    int id_pipe[2] = {-1, -1};
    int status = 0, left = 0;
    if (!pids || !done) {
        fprintf(stderr, "mscclpp-bench: out of memory\n");
        status = 1;
        goto out;
    }
    if (launcher_signal) goto out; /* while the namespaces were made */
    if (pipe(id_pipe) != 0) {
        fprintf(stderr, "mscclpp-bench: pipe: %s\n", strerror(errno));
        status = 1;
        goto out;
    }
    fflush(NULL);
    for (int r = 0; r < o->np; r++) {
        pid_t pid = fork();
        if (pid == 0) fork_child(o, id_pipe, r);
        if (pid < 0) {
            fprintf(stderr, "mscclpp-bench: fork for rank %d: %s\n", r, strerror(errno));
            status = 1;
            break;
        }
        pids[r] = pid;
        left++;
    }
    close(id_pipe[0]);
    close(id_pipe[1]);
    /*
     * Wait for the ranks, bounded by --time-limit. When a rank dies, the others are left to
     * notice and exit with their own error (the library bounds that by MSCCLPP_TIMEOUT), so that
     * what they report shows; only ranks still running MSCCLPP_TIMEOUT + a grace period later
     * are killed.
     */
    const double grace_s = 5;
    double deadline = now_s() + o->time_limit;
    double kill_at = status != 0 ? now_s() : 0; /* 0: nobody died */
    int first_dead = -1;
    while (left > 0) {
        if (launcher_signal) {
            stop_ranks(o, pids, done, &left, launcher_signal);
            break;
        }
        for (int r = 0; r < o->np; r++) {
            int ws;
            if (!pids[r] || done[r] || waitpid(pids[r], &ws, WNOHANG) != pids[r]) continue;
            done[r] = 1;
            left--;
            if (WIFEXITED(ws) && WEXITSTATUS(ws) == 0) continue;
            status = 1;
            if (WIFSIGNALED(ws)) {
                fprintf(stderr, "mscclpp-bench: rank %d killed by signal %d (%s)\n", r,
                        WTERMSIG(ws), strsignal(WTERMSIG(ws)));
                if (first_dead < 0) {
                    first_dead = r;
                    kill_at = now_s() + (double)mscclpp_timeout_ns() / 1e9 + grace_s;
                }
            } else if (WEXITSTATUS(ws) != 1) {
                fprintf(stderr, "mscclpp-bench: rank %d exited with status %d\n", r,
                        WEXITSTATUS(ws));
            }
        }
        if (left == 0) break;
        double now = now_s();
        int kill_now = 0;
        if (now > deadline) {
            fprintf(stderr, "mscclpp-bench: ranks still running after %.0f s (--time-limit); "
                            "killing them\n", o->time_limit);
            kill_now = 1;
        } else if (kill_at > 0 && now > kill_at) {
            fprintf(stderr, "mscclpp-bench: ranks still running %.0f s after rank %d died "
                            "(MSCCLPP_TIMEOUT + %.0f s); killing them\n",
                    (double)mscclpp_timeout_ns() / 1e9 + grace_s, first_dead, grace_s);
            kill_now = 1;
        }
        if (kill_now) {
            status = 1;
            for (int r = 0; r < o->np; r++)
                if (pids[r] && !done[r]) {
                    fprintf(stderr, "mscclpp-bench: rank %d: killed by the launcher\n", r);
                    kill(pids[r], SIGKILL);
                    waitpid(pids[r], NULL, 0);
                    done[r] = 2;
                    left--;
                }
        }
        if (left > 0) nanosleep(&(struct timespec){0, 5 * 1000 * 1000}, NULL);
    }
out:
    free(pids);
    free(done);
    netns_launch_cleanup();
    launcher_signals_restore();
    if (launcher_signal) {
        /* die of the signal, as the caller (a shell) expects of a stopped program */
        fflush(NULL);
        signal(launcher_signal, SIG_DFL);
        raise(launcher_signal);
        return 128 + launcher_signal;
    }
    return status;
}

/* Rank and size from the launcher's environment (MPICH/Hydra PMI, Open MPI, PMIx). */
static int launcher_env(int *rank, int *size)
{
    static const char *const pairs[][2] = {
        {"PMI_RANK", "PMI_SIZE"},
        {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"},
        {"PMIX_RANK", "PMIX_SIZE"},
    };
    for (size_t i = 0; i < sizeof(pairs) / sizeof(pairs[0]); i++) {
        const char *r = getenv(pairs[i][0]), *s = getenv(pairs[i][1]);
        if (r && s) {
            *rank = atoi(r);
            *size = atoi(s);
            return 1;
        }
    }
    return 0;
}

#ifdef MSCCLPP_HAVE_MPI
static int run_mpi(const opts_t *o, int argc, char **argv)
{
    int provided, status = 1;
    if (MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided) != MPI_SUCCESS) {
        fprintf(stderr, "mscclpp-bench: MPI_Init_thread failed\n");
        return 1;
    }
    mscclpp_bootstrap_t *boot = NULL;
    mscclpp_comm_t *comm = NULL;
    mscclpp_result_t rc = MSCCLPP_OK;
    if (o->tcp_boot) {
        /* nccl-tests style: rank 0 makes the id, MPI carries it, the library's TCP does the rest */
        int rank, size;
        mscclpp_unique_id_t id;
        memset(&id, 0, sizeof(id));
        MPI_Comm_rank(MPI_COMM_WORLD, &rank);
        MPI_Comm_size(MPI_COMM_WORLD, &size);
        int32_t ok = rank == 0 ? mscclpp_get_unique_id(&id) : MSCCLPP_OK;
        if (ok != MSCCLPP_OK) rc = (mscclpp_result_t)ok;
        MPI_Bcast(&ok, 1, MPI_INT32_T, 0, MPI_COMM_WORLD);
        MPI_Bcast(&id, (int)sizeof(id), MPI_BYTE, 0, MPI_COMM_WORLD);
        if (ok == MSCCLPP_OK)
            rc = mscclpp_comm_init_rank(&id, rank, size, &comm);
        else if (rc == MSCCLPP_OK)
            rc = (mscclpp_result_t)ok;
    } else {
        rc = mscclpp_bootstrap_create_mpi(MPI_COMM_WORLD, &boot);
        if (rc == MSCCLPP_OK) rc = mscclpp_comm_create(boot, &comm);
    }
    if (rc != MSCCLPP_OK) {
        fprintf(stderr, "mscclpp-bench: %s bootstrap: %s: %s\n", o->tcp_boot ? "TCP" : "MPI",
                mscclpp_result_string(rc), mscclpp_last_error());
    } else {
        status = bench_rank(o, comm, "mpiexec", o->mpi);
    }
    mscclpp_comm_destroy(comm);
    mscclpp_bootstrap_destroy(boot);
    /* Every rank agrees on the status (results are exchanged), so a plain finalize is safe. */
    MPI_Finalize();
    return status;
}
#endif

int main(int argc, char **argv)
{
    opts_t o;
    int rc = parse_args(argc, argv, &o);
    if (rc < 0) return 0;
    if (rc) return rc;
    int env_rank = 0, env_size = 0;
    int under_mpi = launcher_env(&env_rank, &env_size);
    if (under_mpi && o.np) {
        fprintf(stderr, "mscclpp-bench: --np forks ranks itself; do not combine it with mpiexec\n");
        return EXIT_USAGE;
    }
    if ((o.mpi || o.tcp_boot) && !under_mpi) {
        fprintf(stderr, "mscclpp-bench: --mpi and --bootstrap are for runs under mpiexec -n N\n");
        return EXIT_USAGE;
    }
    if (under_mpi) {
#ifdef MSCCLPP_HAVE_MPI
        return run_mpi(&o, argc, argv);
#else
        fprintf(stderr, "mscclpp-bench: started by mpiexec (rank %d of %d) but built without "
                        "MPI; use --np N instead\n", env_rank, env_size);
        return EXIT_USAGE;
#endif
    }
    if (o.np) return run_forked(&o);
    /* One rank, no launcher. */
    mscclpp_unique_id_t id;
    mscclpp_comm_t *comm = NULL;
    mscclpp_result_t r = mscclpp_get_unique_id(&id);
    if (r == MSCCLPP_OK) r = mscclpp_comm_init_rank(&id, 0, 1, &comm);
    if (r != MSCCLPP_OK) {
        fprintf(stderr, "mscclpp-bench: %s: %s\n", mscclpp_result_string(r), mscclpp_last_error());
        return 1;
    }
    rc = bench_rank(&o, comm, "single", 0);
    mscclpp_comm_destroy(comm);
    return rc;
}
