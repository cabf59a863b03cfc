/*
 * mscclpp_alltoallv: all-to-all with per-peer counts and displacements (as MPI_Alltoallv).
 *
 * Three paths, every rank on the same one (a bootstrap allgather of a few words per rank,
 * host memory only, decides; it also checks that the count matrices agree - rank i's
 * sendcounts[j] == rank j's recvcounts[i] - and every rank refuses alike when they do not):
 *
 * Direct: every rank sends and receives the same count to and from every peer, blocks packed in
 * rank order (an alltoall: torch's all_to_all_single with equal splits), in buffers that do not
 * overlap and that the backend can share: mscclpp_alltoall on the caller's buffers.
 *
 * Count-exact: both buffers of every rank shareable, not overlapping, not captured into a
 * graph: one launch of the alltoallv plan made for the job (executor/made.c v_alltoall: each
 * rank puts its block for q straight into q's output, memory channels inside a node, port
 * channels across), with this call's counts and displacements in a per-call count table
 * (kern_args_t.vtab, kern_args.h "Alltoallv"); where a block goes in the peer's output is
 * published by that peer at the launch fence. Traffic: exactly the counts; no copies.
 *
 * Staged (anything else: buffers a peer cannot map, in place, a graph capture): a plan
 * addresses buffers in fixed chunks, so the call runs the job's alltoall plan through two
 * staging buffers of nranks blocks of the largest count: pack, mscclpp_alltoall, unpack.
 * Traffic is nranks * the largest count per rank.
 *
 * Copies and launches are queued on the caller's stream (synchronous without one). The staging
 * buffers grow by doubling and are kept until the executor goes (a graph may replay a capture
 * that uses an older pair); a count table is busy until its launch is done (a host function
 * queued behind the launch frees it), so calls in flight on streams each have their own.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>

#include "base/debug.h"
#include "core/core.h"
#include "executor/exec.h"
#include "executor/made.h"
#include "hal/hal_api.h"
#include "kernels/common/kern_args.h"

/* The largest count of a rank that refused its own arguments: above any count it accepts
 * (counts stay below SIZE_MAX / element size / nranks). */
#define A2AV_REFUSED UINT64_MAX
/* Words each rank brings to the agreement: largest count, the two matrix sums, direct (0/1),
 * exact (0/1). */
#define A2AV_WORDS 5

/* A count table of one call (kern_args_t.vtab): host memory the device reads, busy from the
 * call until its launch is done (a host function queued behind it frees it on a stream). */
struct exec_a2av_tab {
    struct exec_a2av_tab *next;
    uint64_t *w;     /* bytes moved, then KERN_VTAB_WORDS per rank (kern_args_t.vtab) */
    uint64_t *moved; /* where the bytes moved go once the launch is done (counting), or NULL */
    int busy;        /* atomic */
};

/* A 64-bit mix of one matrix entry (splitmix64 finaliser), so that sums over entries differ
 * when any entry does (a hash: equal sums do not prove equal matrices, unequal ones disprove). */
static uint64_t entry_hash(uint64_t from, uint64_t to, uint64_t count)
{
    uint64_t x = (from << 40) ^ (to << 20) ^ count ^ 0x9e3779b97f4a7c15ull;
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebull;
    x ^= x >> 31;
    return x + count;
}

/* Whether this rank's call is an alltoall of its own buffers (the direct path, above). */
static bool goes_direct(mscclpp_executor_t *ex, const void *send, const size_t *sendcounts,
                        const size_t *sdispls, const void *recv, const size_t *recvcounts,
                        const size_t *rdispls, size_t es)
{
    int n = ex->comm->nranks;
    size_t c = sendcounts[0];
    for (int j = 0; j < n; j++)
        if (sendcounts[j] != c || recvcounts[j] != c || sdispls[j] != (size_t)j * c ||
            rdispls[j] != (size_t)j * c)
            return false;
    size_t bytes = (size_t)n * c * es; /* fits: counts were checked against SIZE_MAX/es/n */
    uintptr_t s = (uintptr_t)send, r = (uintptr_t)recv;
    if (!c || (s < r + bytes && r < s + bytes)) return false;
    hal_mem_info_t ms, mr;
    exec_mem_of(ex->hal, send, &ms);
    exec_mem_of(ex->hal, recv, &mr);
    return ms.shareable && mr.shareable && bytes <= ms.size - (size_t)(s - (uintptr_t)ms.base) &&
           bytes <= mr.size - (size_t)(r - (uintptr_t)mr.base);
}

/* Bytes from p to the end of its allocation that the peers can map; 0 when not shareable. */
static size_t shareable_room(mscclpp_executor_t *ex, const void *p)
{
    hal_mem_info_t m;
    if (!p) return 0;
    exec_mem_of(ex->hal, p, &m);
    if (!m.shareable || !m.size) return 0;
    return m.size - (size_t)((uintptr_t)p - (uintptr_t)m.base);
}

/* Bytes of a buffer's blocks: the end of the last one, at least one element per rank (what the
 * exact path's plan is lowered for). */
static size_t extent(const size_t *counts, const size_t *displs, int n, size_t es)
{
    size_t end = (size_t)n;
    for (int j = 0; j < n; j++)
        if (counts[j] && displs[j] + counts[j] > end) end = displs[j] + counts[j];
    return end * es; /* fits: counts and displs were checked against SIZE_MAX / es */
}

/*
 * Whether this rank's call can go count-exact: both buffers shareable (the plan writes the
 * peers' outputs and its port channels move its own), their blocks inside their allocations
 * (within 4 GiB of the start: port triggers carry 32-bit offsets), not overlapping, and not
 * captured into a graph (a count table is per call; a replay would run the captured one's).
 */
static bool goes_exact(mscclpp_executor_t *ex, const void *send, const size_t *sendcounts,
                       const size_t *sdispls, const void *recv, const size_t *recvcounts,
                       const size_t *rdispls, size_t es, mscclpp_stream_t stream)
{
    int n = ex->comm->nranks;
    bool capturing = false;
    if (ex->p2p ||
        (stream && (ex->hal->stream_capturing(hal_api_stream(stream), &capturing) != MSCCLPP_OK ||
                    capturing))) {
        core_clear_error();
        return false;
    }
    size_t sx = extent(sendcounts, sdispls, n, es), rx = extent(recvcounts, rdispls, n, es);
    size_t sroom = shareable_room(ex, send), rroom = shareable_room(ex, recv);
    uintptr_t s = (uintptr_t)send, r = (uintptr_t)recv;
    hal_mem_info_t ms, mr;
    if (sx > sroom || rx > rroom || (s < r + rx && r < s + sx)) return false;
    exec_mem_of(ex->hal, send, &ms);
    exec_mem_of(ex->hal, recv, &mr);
    return s - (uintptr_t)ms.base + sx <= UINT32_MAX && r - (uintptr_t)mr.base + rx <= UINT32_MAX;
}

static void tab_done(void *arg)
{
    struct exec_a2av_tab *t = arg;
    if (t->moved)
        __atomic_fetch_add(t->moved, __atomic_load_n(&t->w[0], __ATOMIC_ACQUIRE), __ATOMIC_RELAXED);
    __atomic_store_n(&t->busy, 0, __ATOMIC_RELEASE);
}

/* A free count table (or a new one), marked busy. */
static mscclpp_result_t tab_get(mscclpp_executor_t *ex, struct exec_a2av_tab **out)
{
    struct exec_a2av_tab *t;
    for (t = ex->a2av_tabs; t; t = t->next)
        if (!__atomic_load_n(&t->busy, __ATOMIC_ACQUIRE)) break;
    if (!t) {
        t = calloc(1, sizeof *t);
        if (!t) return ERR(MSCCLPP_ERR_NO_MEMORY, "mscclpp_alltoallv: out of memory");
        size_t bytes = (1 + (size_t)ex->comm->nranks * KERN_VTAB_WORDS) * sizeof(uint64_t);
        mscclpp_result_t r = ex->hal->host_alloc(bytes, (void **)&t->w);
        if (r != MSCCLPP_OK) {
            free(t);
            return r;
        }
        t->next = ex->a2av_tabs;
        ex->a2av_tabs = t;
    }
    t->busy = 1;
    *out = t;
    return MSCCLPP_OK;
}

void exec_alltoallv_release(mscclpp_executor_t *ex)
{
    while (ex->a2av_tabs) {
        struct exec_a2av_tab *t = ex->a2av_tabs;
        ex->a2av_tabs = t->next;
        ex->hal->host_free(t->w);
        free(t);
    }
    if (ex->a2av_plan) plan_free(ex->a2av_plan);
    ex->a2av_plan = NULL;
}

/*
 * The count-exact call: the alltoallv plan (made for this job on first use) on the caller's
 * buffers, one launch; this rank's counts and offsets in bytes go to the launch in a count
 * table (kern_args.h, "Alltoallv"), which is lowered for one element per rank (the same on
 * every rank, so that the call signatures agree).
 */
static mscclpp_result_t run_exact(mscclpp_executor_t *ex, const void *send,
                                  const size_t *sendcounts, const size_t *sdispls, void *recv,
                                  const size_t *rdispls, mscclpp_dtype_t dtype,
                                  mscclpp_stream_t stream)
{
    int n = ex->comm->nranks;
    size_t es = mscclpp_dtype_size(dtype);
    if (!ex->a2av_plan) {
        exec_topo_t t;
        CHECK(exec_topo_init(&t, n, ex->comm->node_id));
        mscclpp_result_t r = exec_made_alltoallv(&t, ex->comm->rank, &ex->a2av_plan);
        exec_topo_fini(&t);
        CHECK(r);
    }
    struct exec_a2av_tab *t = NULL;
    CHECK(tab_get(ex, &t));
    t->moved = ex->a2av_count ? &ex->a2av_moved : NULL;
    t->w[0] = ex->a2av_count ? 0 : UINT64_MAX;
    for (int q = 0; q < n; q++) {
        uint64_t *row = t->w + 1 + (size_t)q * KERN_VTAB_WORDS;
        row[0] = sendcounts[q] * es;
        row[1] = sdispls[q] * es;
        row[2] = rdispls[q] * es;
    }
    ex->a2av_vtab = t->w;
    mscclpp_result_t r = exec_execute(ex, ex->a2av_plan, send, recv, (size_t)n * es, (size_t)n * es,
                                      dtype, MSCCLPP_REDOP_PLAN, MSCCLPP_PACKET_LL16, stream, 0, 0);
    ex->a2av_vtab = NULL;
    /* the table stays busy while a launch may read it: after a failure, for good */
    if (r == MSCCLPP_OK && stream)
        r = ex->hal->launch_host_func(tab_done, t, hal_api_stream(stream));
    else if (r == MSCCLPP_OK) tab_done(t);
    return r;
}

/* Staging pair of at least `bytes` each; a smaller older pair stays kept (exec_keep). */
static mscclpp_result_t stage_get(mscclpp_executor_t *ex, size_t bytes)
{
    if (ex->a2av_bytes >= bytes) return MSCCLPP_OK;
    size_t want = ex->a2av_bytes ? ex->a2av_bytes : 65536;
    while (want < bytes) want = want > SIZE_MAX / 2 ? bytes : 2 * want;
    /* each buffer is kept as soon as it exists: an error after it loses nothing */
    void *in = NULL, *out = NULL;
    CHECK(ex->hal->mem_alloc_shareable(want, &in));
    mscclpp_result_t r = exec_keep(ex, in);
    if (r != MSCCLPP_OK) {
        ex->hal->mem_free(in);
        return r;
    }
    CHECK(ex->hal->mem_alloc_shareable(want, &out));
    r = exec_keep(ex, out);
    if (r != MSCCLPP_OK) {
        ex->hal->mem_free(out);
        return r;
    }
    ex->a2av_in = in;
    ex->a2av_out = out;
    ex->a2av_bytes = want;
    return MSCCLPP_OK;
}

static mscclpp_result_t copy(mscclpp_executor_t *ex, void *dst, const void *src, size_t bytes,
                             mscclpp_stream_t stream)
{
    if (!bytes) return MSCCLPP_OK;
    if (stream) return ex->hal->memcpy_async(dst, src, bytes, hal_api_stream(stream));
    return ex->hal->memcpy_sync(dst, src, bytes);
}

MSCCLPP_API mscclpp_result_t mscclpp_alltoallv(mscclpp_executor_t *exec, const void *send,
                                               const size_t *sendcounts, const size_t *sdispls,
                                               void *recv, const size_t *recvcounts,
                                               const size_t *rdispls, mscclpp_dtype_t dtype,
                                               mscclpp_stream_t stream)
{
    CHECK_ARG(exec != NULL);
    CHECK_ARG(sendcounts != NULL && sdispls != NULL && recvcounts != NULL && rdispls != NULL);
    CHECK_ARG((int)dtype >= 0 && dtype < MSCCLPP_DTYPE_COUNT);
    if (stream && stream->ops != exec->hal)
        return ERR_ARG("mscclpp_alltoallv: the stream belongs to another backend than the "
                       "executor's");
    mscclpp_comm_t *comm = exec->comm;
    int n = comm->nranks, rank = comm->rank;
    size_t es = mscclpp_dtype_size(dtype);
    /* what this rank brings: its largest count, its halves of the matrix check and whether it
     * can go direct; a rank that refuses its own arguments still takes part (largest count
     * REFUSED), so that its peers refuse at once instead of waiting for it until the timeout */
    uint64_t mine[A2AV_WORDS] = {0, 0, 0, 0, 0};
    mscclpp_result_t refused = MSCCLPP_OK;
    for (int j = 0; j < n && refused == MSCCLPP_OK; j++) {
        /* n blocks of the largest count must fit the staging buffer: no count above this */
        size_t lim = SIZE_MAX / es / (size_t)n;
        if (sendcounts[j] > lim || sdispls[j] > SIZE_MAX / es - sendcounts[j] ||
            recvcounts[j] > lim || rdispls[j] > SIZE_MAX / es - recvcounts[j])
            refused = ERR_ARG("mscclpp_alltoallv: rank %d: peer %d's count or displacement "
                              "overflows the address space in %s elements (%d blocks)",
                              rank, j, mscclpp_dtype_name(dtype), n);
        else if ((sendcounts[j] && !send) || (recvcounts[j] && !recv))
            refused = ERR_ARG("mscclpp_alltoallv: rank %d: a NULL buffer with elements to %s "
                              "peer %d",
                              rank, sendcounts[j] && !send ? "send to" : "receive from", j);
        if (refused != MSCCLPP_OK) {
            mine[0] = A2AV_REFUSED;
            break;
        }
        if (sendcounts[j] > mine[0]) mine[0] = sendcounts[j];
        if (recvcounts[j] > mine[0]) mine[0] = recvcounts[j];
        mine[1] += entry_hash((uint64_t)rank, (uint64_t)j, sendcounts[j]);
        mine[2] += entry_hash((uint64_t)j, (uint64_t)rank, recvcounts[j]);
    }
    if (refused == MSCCLPP_OK) {
        mine[3] = goes_direct(exec, send, sendcounts, sdispls, recv, recvcounts, rdispls, es);
        mine[4] =
            goes_exact(exec, send, sendcounts, sdispls, recv, recvcounts, rdispls, es, stream);
    }
    uint64_t *all = malloc((size_t)n * sizeof mine);
    if (!all) return ERR(MSCCLPP_ERR_NO_MEMORY, "mscclpp_alltoallv: out of memory");
    /* the message of this rank's refusal stays the last error while the peers are told */
    core_error_kept_t kept;
    if (refused != MSCCLPP_OK) core_error_keep(&kept);
    for (int k = 0; k < A2AV_WORDS; k++) all[(size_t)rank * A2AV_WORDS + (size_t)k] = mine[k];
    mscclpp_result_t r = mscclpp_bootstrap_allgather(comm->boot, all, sizeof mine);
    if (r != MSCCLPP_OK) {
        free(all);
        return comm_fail(comm, r, false);
    }
    uint64_t block = 0, sent = 0, received = 0;
    int refuser = -1;
    bool direct = true, exact = true;
    for (int i = 0; i < n; i++) {
        const uint64_t *w = all + (size_t)i * A2AV_WORDS;
        if (w[0] == A2AV_REFUSED && refuser < 0) refuser = i;
        if (w[0] > block) block = w[0];
        sent += w[1];
        received += w[2];
        direct = direct && w[3];
        exact = exact && w[4];
    }
    free(all);
    if (refused != MSCCLPP_OK) {
        core_error_put_back(&kept);
        return refused;
    }
    if (refuser >= 0)
        return ERR_ARG("mscclpp_alltoallv: rank %d refused its arguments (its error says why); "
                       "every rank refuses this call",
                       refuser);
    if (sent != received)
        return ERR_ARG("mscclpp_alltoallv: the ranks' counts disagree: rank i's sendcounts[j] "
                       "must equal rank j's recvcounts[i] for every pair (every rank refuses "
                       "this call)");
    if (!block) return MSCCLPP_OK; /* nothing moves anywhere */
    if (block > SIZE_MAX / es / (size_t)n)
        return ERR_ARG("mscclpp_alltoallv: %d blocks of %llu elements overflow the address "
                       "space",
                       n, (unsigned long long)block);
    /* every rank sends `block` elements to every peer, packed: the caller's buffers serve */
    TRACE(SUBSYS_EXEC, "alltoallv: %d blocks of up to %llu elements, %s", n,
          (unsigned long long)block,
          direct  ? "direct (an alltoall of the caller's buffers)"
          : exact ? "count-exact (the caller's buffers)"
                  : "through the staging buffers");
    exec->a2av_ways[direct ? 0 : exact ? 1 : 2]++;
    if (direct) return mscclpp_alltoall(exec, send, recv, (size_t)block, dtype, stream);
    if (exact) return run_exact(exec, send, sendcounts, sdispls, recv, rdispls, dtype, stream);
    size_t bb = (size_t)block * es; /* bytes of one staging block */

    CHECK(stage_get(exec, bb * (size_t)n));
    char *in = exec->a2av_in, *out = exec->a2av_out;
    for (int j = 0; j < n && r == MSCCLPP_OK; j++)
        r = copy(exec, in + (size_t)j * bb, (const char *)send + sdispls[j] * es,
                 sendcounts[j] * es, stream);
    if (r == MSCCLPP_OK) r = mscclpp_alltoall(exec, in, out, (size_t)block, dtype, stream);
    for (int j = 0; j < n && r == MSCCLPP_OK; j++)
        r = copy(exec, (char *)recv + rdispls[j] * es, out + (size_t)j * bb, recvcounts[j] * es,
                 stream);
    return r;
}
