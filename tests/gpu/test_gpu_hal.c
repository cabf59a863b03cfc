/*
 * The GPU backend through hal_get() on a real device (MSCCLPP_HAL, default cuda): properties,
 * allocation and copies (every byte checked), pinned host memory, streams and event timing,
 * sharing memory with another process on the same device (the way several ranks share one
 * GPU, docs/gpu.md) and within one process, and launches of the interpreter.
 * Prints TAP; without a device or driver it prints "1..0 # SKIP" and exits 77.
 * `test_gpu_hal --probe` only says whether the backend finds a device (exit 0, else 77): the
 * probe tests/gpu/run-gpu-tests.sh uses.
 *
 * The exporting process is forked before anything touches the GPU: a CUDA context does not
 * survive fork().
 */
#define _GNU_SOURCE
#include <poll.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "hal/hal.h"
#include "kernels/common/kern_args.h"
#include "tests/gpu/gpu_tap.h"

#define SHARE_BYTES (4u << 20)
#define IO_TIMEOUT_MS 60000

static const hal_ops_t *ops;

static uint8_t pat(size_t i, unsigned seed) { return (uint8_t)(i * (2 * seed + 1) + seed); }

static void fill(uint8_t *p, size_t n, unsigned seed)
{
    for (size_t i = 0; i < n; i++) p[i] = pat(i, seed);
}

/* Index of the first byte that differs from the pattern, or n. */
static size_t first_bad(const uint8_t *p, size_t n, unsigned seed)
{
    for (size_t i = 0; i < n; i++)
        if (p[i] != pat(i, seed)) return i;
    return n;
}

/* Same over bytes [from, to) of a buffer filled from index 0: the pattern depends on the index
 * in the whole buffer, not in the range checked. Returns the first bad index, or `to`. */
static size_t first_bad_in(const uint8_t *p, size_t from, size_t to, unsigned seed)
{
    for (size_t i = from; i < to; i++)
        if (p[i] != pat(i, seed)) return i;
    return to;
}

static size_t first_not(const uint8_t *p, size_t n, uint8_t v)
{
    for (size_t i = 0; i < n; i++)
        if (p[i] != v) return i;
    return n;
}

static bool io_wait(int fd)
{
    struct pollfd p = {.fd = fd, .events = POLLIN};
    return poll(&p, 1, IO_TIMEOUT_MS) == 1;
}

static bool read_full(int fd, void *buf, size_t len)
{
    size_t got = 0;
    while (got < len) {
        if (!io_wait(fd)) return false;
        ssize_t n = read(fd, (char *)buf + got, len - got);
        if (n <= 0) return false;
        got += (size_t)n;
    }
    return true;
}

/* ----- the other process: a second "rank" on the same device -------------------------------- */

static int exporter(int up, int down)
{
    const hal_ops_t *o;
    if (hal_get(&o) != MSCCLPP_OK) {
        (void)!write(up, "S", 1);
        return 77;
    }
    void *buf = NULL;
    uint8_t *host = malloc(SHARE_BYTES);
    hal_mem_handle_t h;
    if (!host || o->mem_alloc_shareable(SHARE_BYTES, &buf) != MSCCLPP_OK) goto fail;
    fill(host, SHARE_BYTES / 2, 3);
    if (o->memcpy_sync(buf, host, SHARE_BYTES / 2) != MSCCLPP_OK) goto fail;
    if (o->mem_export(buf, &h) != MSCCLPP_OK) goto fail;
    if (write(up, "H", 1) != 1 || write(up, &h, sizeof h) != (ssize_t)sizeof h) goto fail;
    char done;
    if (!read_full(down, &done, 1)) goto fail; /* the importer wrote the second half */
    memset(host, 0, SHARE_BYTES);
    if (o->memcpy_sync(host, buf, SHARE_BYTES) != MSCCLPP_OK) goto fail;
    if (first_bad(host, SHARE_BYTES / 2, 3) != SHARE_BYTES / 2) goto fail;
    if (first_bad(host + SHARE_BYTES / 2, SHARE_BYTES / 2, 9) != SHARE_BYTES / 2) goto fail;
    if (o->mem_free(buf) != MSCCLPP_OK) goto fail;
    free(host);
    return 0;
fail:
    fprintf(stderr, "exporter: %s\n", mscclpp_last_error());
    (void)!write(up, "F", 1);
    return 1;
}

/* ----- subtests ------------------------------------------------------------------------------ */

static bool t_props(void)
{
    int count = 0, dev = -1;
    OK(ops->device_count(&count));
    EXPECT(count > 0, "device_count %d", count);
    OK(ops->device_set(0));
    OK(ops->device_get(&dev));
    EXPECT(dev == 0, "device_get %d after device_set(0)", dev);
    hal_device_props_t p;
    OK(ops->device_props(0, &p));
    diag("%s: %s, %s, warp %d, %d SMs/CUs, %zu MiB, ipc %d, multicast %d", ops->name, p.name,
         p.arch, p.warp_size, p.multiprocessors, p.total_memory >> 20, p.ipc, p.multicast);
    /* the HIP module built for NVIDIA GPUs (hal/hipnv) describes the NVIDIA device it runs on */
    bool nvidia = strcmp(ops->name, "cuda") == 0 || strstr(hal_backend_build(ops), "on NVIDIA");
    EXPECT(p.warp_size == (nvidia ? 32 : 64), "warp size %d", p.warp_size);
    EXPECT(strncmp(p.arch, nvidia ? "sm_" : "gfx", 3) == 0, "arch %s", p.arch);
    EXPECT(p.multiprocessors > 0 && p.max_threads_per_block >= 256 && p.total_memory > 0 &&
               p.name[0],
           "implausible properties");
    EXPECT(ops->device_props(count, &p) == MSCCLPP_ERR_INVALID_ARG, "device %d accepted", count);
    return true;
}

static bool t_alloc_copy(void)
{
    const size_t n = (1u << 20) + 123; /* not a page multiple */
    uint8_t *h = malloc(n), *back = malloc(n);
    void *a = NULL, *b = NULL;
    EXPECT(h && back, "malloc");
    OK(ops->mem_alloc(n, &a));
    OK(ops->mem_alloc_shareable(n, &b));
    memset(back, 0xee, n);
    OK(ops->memcpy_sync(back, a, n));
    EXPECT(first_not(back, n, 0) == n, "new memory is not zeroed");
    fill(h, n, 1);
    OK(ops->memcpy_sync(a, h, n));
    OK(ops->memcpy_sync(b, a, n)); /* device to device */
    OK(ops->memcpy_sync(back, b, n));
    size_t bad = first_bad(back, n, 1);
    EXPECT(bad == n, "byte %zu differs after H2D, D2D, D2H", bad);
    OK(ops->memset_sync((char *)b + 100, 0x5a, 1000));
    OK(ops->memcpy_sync(back, b, n));
    /* the bytes after the set range keep the pattern of their own index (the check used to
     * compare them with the pattern restarted at 0, and failed on a correct memset) */
    size_t before = first_bad_in(back, 0, 100, 1), set = first_not(back + 100, 1000, 0x5a);
    size_t after = first_bad_in(back, 1100, n, 1);
    EXPECT(before == 100 && set == 1000 && after == n,
           "memset touched the wrong bytes: before %zu/100, set %zu/1000, after %zu/%zu", before,
           set, after, n);
    void *base = NULL;
    size_t size = 0;
    OK(ops->mem_range((char *)b + 4097, &base, &size));
    EXPECT(base == b && size >= n, "mem_range: %p + %zu for %p", base, size, b);
    OK(ops->mem_free(a));
    OK(ops->mem_free(b));
    EXPECT(ops->mem_free(a) == MSCCLPP_ERR_INVALID_ARG, "double free accepted");
    free(h);
    free(back);
    return true;
}

/* mem_info over the module's allocation registry (hal/hal_alloc.h): our own allocations are
 * found from any address inside them, shareable ones say so, and an allocation freed and made
 * again never keeps its id. */
static bool t_mem_info(void)
{
    const size_t n = (1u << 20) + 123;
    void *a = NULL, *b = NULL;
    hal_mem_info_t ia, ib, ib2;
    OK(ops->mem_alloc(n, &a));
    OK(ops->mem_alloc_shareable(n, &b));
    OK(ops->mem_info((char *)a + 77, &ia));
    OK(ops->mem_info((char *)b + n - 1, &ib));
    EXPECT(ia.base == a && ia.size >= n && ia.id != 0 && !ia.foreign,
           "plain: base %p (want %p) size %zu id %llu foreign %d", ia.base, a, ia.size,
           (unsigned long long)ia.id, ia.foreign);
    EXPECT(ib.base == b && ib.size >= n && ib.shareable && !ib.foreign && ib.id != ia.id,
           "shareable: base %p (want %p) size %zu shareable %d id %llu (plain's %llu)", ib.base,
           b, ib.size, ib.shareable, (unsigned long long)ib.id, (unsigned long long)ia.id);
    OK(ops->mem_free(b));
    OK(ops->mem_alloc_shareable(n, &b));
    OK(ops->mem_info(b, &ib2));
    EXPECT(ib2.base == b && ib2.id != ib.id, "made again: id %llu, before %llu",
           (unsigned long long)ib2.id, (unsigned long long)ib.id);
    OK(ops->mem_free(a));
    OK(ops->mem_free(b));
    return true;
}

static bool t_host_memory(void)
{
    const size_t n = 65536;
    uint8_t *pinned = NULL;
    void *d = NULL, *base = NULL;
    size_t size = 0;
    OK(ops->host_alloc(n, (void **)&pinned));
    EXPECT(first_not(pinned, n, 0) == n, "pinned memory is not zeroed");
    OK(ops->mem_range(pinned + 10, &base, &size));
    EXPECT(base == pinned && size == n, "mem_range of pinned memory: %p + %zu", base, size);
    OK(ops->mem_alloc(n, &d));
    fill(pinned, n, 2);
    OK(ops->memcpy_sync(d, pinned, n));
    OK(ops->memset_sync(pinned, 0, n));
    EXPECT(first_not(pinned, n, 0) == n, "memset_sync of pinned memory");
    OK(ops->memcpy_sync(pinned, d, n));
    EXPECT(first_bad(pinned, n, 2) == n, "round trip through pinned memory");
    OK(ops->mem_free(d));
    OK(ops->host_free(pinned));
    return true;
}

static bool t_stream_events(void)
{
    const size_t n = 64u << 20;
    hal_stream_t s;
    hal_event_t e0, e1;
    void *a = NULL, *b = NULL;
    uint8_t *h = malloc(4096);
    EXPECT(h != NULL, "malloc");
    OK(ops->stream_create(&s));
    bool capturing = true;
    OK(ops->stream_capturing(s, &capturing));
    EXPECT(!capturing, "a new stream reports capture");
    OK(ops->event_create(&e0));
    OK(ops->event_create(&e1));
    OK(ops->mem_alloc(n, &a));
    OK(ops->mem_alloc(n, &b));
    OK(ops->event_record(e0, s));
    OK(ops->memset_async(a, 0x77, n, s));
    OK(ops->memcpy_async(b, a, n, s));
    OK(ops->event_record(e1, s));
    OK(ops->event_sync(e1));
    OK(ops->stream_sync(s));
    float ms = -1;
    OK(ops->event_elapsed_ms(e0, e1, &ms));
    diag("memset + copy of %zu MiB on a stream: %.3f ms", n >> 20, ms);
    EXPECT(ms > 0 && ms < 10000, "elapsed %f ms", ms);
    OK(ops->memcpy_sync(h, (char *)b + n - 4096, 4096));
    EXPECT(first_not(h, 4096, 0x77) == 4096, "async memset + copy result");
    OK(ops->mem_free(a));
    OK(ops->mem_free(b));
    OK(ops->event_destroy(e0));
    OK(ops->event_destroy(e1));
    OK(ops->stream_destroy(s));
    free(h);
    return true;
}

/* Map the memory of another process on the same device: read its bytes, write ours. */
static bool t_share_across_fork(int up, int down, pid_t child)
{
    char tag = 0;
    hal_mem_handle_t h;
    EXPECT(read_full(up, &tag, 1), "no word from the exporter");
    EXPECT(tag == 'H', "exporter failed ('%c'); see its stderr", tag);
    EXPECT(read_full(up, &h, sizeof h), "short handle");
    diag("handle kind %u (%s), %u bytes, allocation of %llu bytes", h.kind,
         h.kind == HAL_HANDLE_CUDA_FD    ? "cuMem fd"
         : h.kind == HAL_HANDLE_CUDA_IPC ? "cudaIpc"
                                         : "hipIpc",
         h.len, (unsigned long long)h.alloc_size);
    EXPECT(h.alloc_size >= SHARE_BYTES, "alloc_size %llu", (unsigned long long)h.alloc_size);
    void *peer = NULL;
    OK(ops->mem_import(&h, &peer));
    uint8_t *host = malloc(SHARE_BYTES);
    EXPECT(host != NULL, "malloc");
    OK(ops->memcpy_sync(host, peer, SHARE_BYTES));
    size_t bad = first_bad(host, SHARE_BYTES / 2, 3);
    EXPECT(bad == SHARE_BYTES / 2, "peer byte %zu differs", bad);
    EXPECT(first_not(host + SHARE_BYTES / 2, SHARE_BYTES / 2, 0) == SHARE_BYTES / 2,
           "peer's second half is not zero");
    fill(host, SHARE_BYTES / 2, 9);
    OK(ops->memcpy_sync((char *)peer + SHARE_BYTES / 2, host, SHARE_BYTES / 2));
    OK(ops->mem_unimport(peer));
    EXPECT(ops->mem_unimport(peer) == MSCCLPP_ERR_INVALID_ARG, "double unimport accepted");
    free(host);
    EXPECT(write(down, "d", 1) == 1, "cannot tell the exporter");
    int status = 0;
    EXPECT(waitpid(child, &status, 0) == child, "waitpid");
    EXPECT(WIFEXITED(status) && WEXITSTATUS(status) == 0,
           "the exporter did not see our writes (status %d)", status);
    return true;
}

/* Ranks as threads of one process: importing our own export gives usable memory. */
static bool t_share_in_process(void)
{
    const size_t n = 1u << 20;
    void *buf = NULL, *alias = NULL;
    uint8_t *h = malloc(n);
    hal_mem_handle_t handle;
    EXPECT(h != NULL, "malloc");
    OK(ops->mem_alloc_shareable(n, &buf));
    fill(h, n, 5);
    OK(ops->memcpy_sync(buf, h, n));
    OK(ops->mem_export(buf, &handle));
    EXPECT(ops->mem_export((char *)buf + 64, &handle) == MSCCLPP_ERR_INVALID_ARG,
           "export of an interior pointer accepted");
    OK(ops->mem_export(buf, &handle));
    OK(ops->mem_import(&handle, &alias));
    memset(h, 0, n);
    OK(ops->memcpy_sync(h, alias, n));
    EXPECT(first_bad(h, n, 5) == n, "read through the import");
    OK(ops->memset_sync(alias, 0x31, 4096));
    OK(ops->memcpy_sync(h, buf, 4096));
    EXPECT(first_not(h, 4096, 0x31) == 4096, "write through the import not seen");
    OK(ops->mem_unimport(alias));
    OK(ops->mem_free(buf));
    free(h);
    return true;
}

/* A lowered plan with `nblocks` blocks of `nthreads` and no ops, and a fresh state; launch;
 * read state back. */
static bool launch_empty(uint32_t magic, int nblocks, int nthreads, kern_state_t *after,
                         mscclpp_result_t *res)
{
    size_t bytes = sizeof(kern_plan_t) + (size_t)nblocks * sizeof(kern_block_t);
    kern_plan_t *plan = calloc(1, bytes);
    EXPECT(plan != NULL, "calloc");
    plan->magic = magic;
    plan->bytes = (uint32_t)bytes;
    plan->n_blocks = (uint32_t)nblocks;
    plan->off_blocks = sizeof(kern_plan_t);
    plan->off_ops = plan->off_descs = plan->off_ids = plan->off_chans = plan->off_rbufs =
        plan->off_switch = plan->off_members = (uint32_t)bytes;
    kern_state_t st;
    memset(&st, 0, sizeof st);
    st.magic = KERN_STATE_MAGIC; /* flags 0: read as 1 */
    void *dplan = NULL, *dstate = NULL;
    hal_stream_t s;
    OK(ops->mem_alloc(bytes, &dplan));
    OK(ops->mem_alloc(sizeof st, &dstate));
    OK(ops->memcpy_sync(dplan, plan, bytes));
    OK(ops->memcpy_sync(dstate, &st, sizeof st));
    OK(ops->stream_create(&s));
    kern_args_t args;
    memset(&args, 0, sizeof args);
    args.plan = dplan;
    args.state = dstate;
    args.timeout_ns = 5000000000ull;
    *res = ops->launch(&args, sizeof args, nblocks, nthreads, s);
    if (*res == MSCCLPP_OK) {
        OK(ops->stream_sync(s));
        OK(ops->memcpy_sync(after, dstate, sizeof *after));
    }
    OK(ops->stream_destroy(s));
    OK(ops->mem_free(dplan));
    OK(ops->mem_free(dstate));
    free(plan);
    return true;
}

static bool t_launch_empty(bool *skipped)
{
    kern_state_t st;
    mscclpp_result_t res;
    hal_device_props_t p;
    OK(ops->device_props(0, &p));
    /* the kernel's launch bound: its most threads run, one more is refused by name */
    const int most = p.kernel_max_threads;
    EXPECT(most >= 256 && most <= p.max_threads_per_block, "kernel_max_threads %d (device %d)",
           most, p.max_threads_per_block);
    if (!launch_empty(KERN_PLAN_MAGIC, 4, most, &st, &res)) return false;
    if (res == MSCCLPP_ERR_UNSUPPORTED) {
        diag("%s", mscclpp_last_error());
        *skipped = true;
        return true;
    }
    EXPECT(res == MSCCLPP_OK, "launch: %s", mscclpp_last_error());
    EXPECT(st.err.code == 0, "empty plan recorded error %d (block %d, what %u)", st.err.code,
           st.err.block, st.err.what);
    EXPECT(st.magic == KERN_STATE_MAGIC, "state magic changed");
    for (int b = 0; b < 4; b++)
        EXPECT(st.flags[b] == 2, "block %d did not advance its LL flag (%u): did it run?", b,
               st.flags[b]);
    EXPECT(st.flags[4] == 0, "a block past the grid advanced flag 4 (%u)", st.flags[4]);
    /* and a plan with a bad magic is refused by the device, not ignored */
    if (!launch_empty(0xdeadbeefu, 1, 128, &st, &res)) return false;
    EXPECT(res == MSCCLPP_OK, "launch: %s", mscclpp_last_error());
    EXPECT(st.err.code != 0, "a plan with a bad magic ran without error");
    if (!launch_empty(KERN_PLAN_MAGIC, 1, most + 1, &st, &res)) return false;
    EXPECT(res == MSCCLPP_ERR_INVALID_ARG && strstr(mscclpp_last_error(), "takes at most"),
           "a launch of %d threads (kernel bound %d): %d, %s", most + 1, most, (int)res,
           mscclpp_last_error());
    return true;
}

/* Does MSCCLPP_HAL's backend find a device? (no fork: nothing else runs) */
static int probe(void)
{
    int count = 0;
    if (hal_get(&ops) != MSCCLPP_OK || ops->device_count(&count) != MSCCLPP_OK || count < 1) {
        printf("%s: no device (%s)\n", getenv("MSCCLPP_HAL"), mscclpp_last_error());
        return 77;
    }
    hal_device_props_t p;
    if (ops->device_props(0, &p) != MSCCLPP_OK) {
        printf("%s: %d device(s), properties failed: %s\n", ops->name, count,
               mscclpp_last_error());
        return 1;
    }
    const char *build = hal_backend_build(ops);
    printf("%s: %d device(s); device 0: %s (%s, %d SMs/CUs, multicast %s)%s%s\n", ops->name, count,
           p.name, p.arch, p.multiprocessors, p.multicast ? "yes" : "no",
           build[0] ? "; built for " : "", build);
    return 0;
}

int main(int argc, char **argv)
{
    int up[2], down[2];
    if (!getenv("MSCCLPP_HAL")) setenv("MSCCLPP_HAL", "cuda", 1);
    if (argc > 1 && strcmp(argv[1], "--probe") == 0) return probe();
    if (pipe(up) != 0 || pipe(down) != 0) {
        perror("pipe");
        return 1;
    }
    pid_t child = fork();
    if (child < 0) {
        perror("fork");
        return 1;
    }
    if (child == 0) {
        close(up[0]);
        close(down[1]);
        _exit(exporter(up[1], down[0]));
    }
    close(up[1]);
    close(down[0]);

    if (hal_get(&ops) != MSCCLPP_OK) {
        printf("1..0 # SKIP no %s device or driver: %s\n", getenv("MSCCLPP_HAL"),
               mscclpp_last_error());
        close(down[1]);
        waitpid(child, NULL, 0);
        return 77;
    }
    printf("1..8\n");
    tap(t_props(), "device count and properties");
    tap(t_alloc_copy(), "device memory: zeroed, copies, memset, mem_range");
    tap(t_mem_info(), "mem_info: own allocations, shareable, a new id after free");
    tap(t_host_memory(), "pinned mapped host memory");
    tap(t_stream_events(), "streams, async copies, event timing");
    bool forked_ok = t_share_across_fork(up[0], down[1], child);
    if (!forked_ok) {
        close(down[1]);
        waitpid(child, NULL, 0);
    }
    tap(forked_ok, "export/import with another process on the same device");
    tap(t_share_in_process(), "export/import within one process (ranks as threads)");
    bool skipped = false;
    bool ok = t_launch_empty(&skipped);
    if (skipped)
        tap_skip("interpreter launch of an empty plan", "no interpreter in this build");
    else
        tap(ok, "interpreter launch of an empty plan");
    ops->fini();
    return gpu_tap_failed ? 1 : 0;
}
