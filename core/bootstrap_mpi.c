/*
 * MPI bootstrap (library mscclpp_mpi): a custom bootstrap (mscclpp_bootstrap_create_custom)
 * over a duplicate of the user's communicator, so libmscclpp itself never links MPI. Every
 * operation is a nonblocking MPI call completed by an MPI_Test loop that backs off as every wait
 * of the library does (base/wait.h, header-only, with the spin of threads that share cores) and
 * gives up after the timeout the library passes (MSCCLPP_TIMEOUT), so a dead or missing peer
 * never blocks a caller forever. It uses only the public API.
 */
#include <limits.h>
#include <pthread.h>
#include <stdlib.h>

#include "base/clock.h"
#include "base/wait.h"
#include "mscclpp/mscclpp_mpi.h"

/* The wait policy's per-thread state (base/wait.h): libmscclpp keeps its own copy hidden. */
__thread base_wait_tls_t base_wait_tls;

/* Error helpers on the public API (this library cannot see the core's internals). */
#define ERR(result, ...) mscclpp_report_error((result), __VA_ARGS__)
#define ERR_ARG(...) ERR(MSCCLPP_ERR_INVALID_ARG, __VA_ARGS__)
#define CHECK(expr)                                      \
    do {                                                 \
        mscclpp_result_t check_res_ = (expr);            \
        if (check_res_ != MSCCLPP_OK) return check_res_; \
    } while (0)
#define CHECK_ARG(cond)                                                            \
    do {                                                                           \
        if (!(cond)) return ERR_ARG("%s: invalid argument (%s)", __func__, #cond); \
    } while (0)

typedef struct {
    MPI_Comm comm;
    pthread_mutex_t lock; /* serializes our MPI calls */
    int rank, nranks;
    int tag_ub;
    int broken; /* an operation timed out with a request still in flight */
} mpi_boot_t;

static mscclpp_result_t mpi_error(int rank, int rc, const char *call)
{
    char msg[MPI_MAX_ERROR_STRING] = "";
    int len = 0;
    MPI_Error_string(rc, msg, &len);
    return ERR(MSCCLPP_ERR_REMOTE, "rank %d: %s failed: %s", rank, call, msg);
}

/* Test `req` until it completes or `deadline`; returns MSCCLPP_ERR_TIMEOUT (quietly) then. */
static mscclpp_result_t wait_req(mpi_boot_t *m, MPI_Request *req, MPI_Status *status,
                                 uint64_t deadline, const char *call)
{
    base_wait_t w; /* the one wait policy; the deadline is the caller's */
    base_wait_init(&w, 0, BASE_WAIT_SPIN_SHARED);
    for (;;) {
        int flag = 0;
        pthread_mutex_lock(&m->lock);
        int rc = MPI_Test(req, &flag, status ? status : MPI_STATUS_IGNORE);
        pthread_mutex_unlock(&m->lock);
        if (rc != MPI_SUCCESS) return mpi_error(m->rank, rc, call);
        if (flag) return MSCCLPP_OK;
        if (base_now_ns() >= deadline) return MSCCLPP_ERR_TIMEOUT;
        (void)base_wait_pause(&w);
    }
}

static mscclpp_result_t check_usable(mpi_boot_t *m)
{
    if (m->broken)
        return ERR(MSCCLPP_ERR_REMOTE,
                   "rank %d: MPI bootstrap is unusable after an earlier timeout", m->rank);
    return MSCCLPP_OK;
}

static mscclpp_result_t check_msg(mpi_boot_t *m, size_t bytes, int tag)
{
    if (tag < 0 || tag > m->tag_ub)
        return ERR_ARG("rank %d: tag %d is outside the MPI tag range [0, %d]", m->rank, tag,
                       m->tag_ub);
    if (bytes > INT_MAX)
        return ERR(MSCCLPP_ERR_UNSUPPORTED,
                   "rank %d: MPI bootstrap messages are limited to %d bytes", m->rank, INT_MAX);
    return MSCCLPP_OK;
}

static mscclpp_result_t mpi_send(void *ctx, const void *data, size_t bytes, int peer, int tag,
                                 uint64_t timeout_ns)
{
    mpi_boot_t *m = ctx;
    CHECK(check_usable(m));
    CHECK(check_msg(m, bytes, tag));
    uint64_t deadline = base_now_ns() + timeout_ns;
    MPI_Request req;
    pthread_mutex_lock(&m->lock);
    int rc = MPI_Isend(data, (int)bytes, MPI_BYTE, peer, tag, m->comm, &req);
    pthread_mutex_unlock(&m->lock);
    if (rc != MPI_SUCCESS) return mpi_error(m->rank, rc, "MPI_Isend");
    mscclpp_result_t res = wait_req(m, &req, NULL, deadline, "MPI_Isend");
    if (res == MSCCLPP_ERR_TIMEOUT) {
        /* The caller may free the buffer once we return: withdraw the send. */
        pthread_mutex_lock(&m->lock);
        MPI_Cancel(&req);
        MPI_Request_free(&req);
        pthread_mutex_unlock(&m->lock);
        return ERR(MSCCLPP_ERR_TIMEOUT,
                   "rank %d: timed out after %.1f s sending tag %d to rank %d (MPI)", m->rank,
                   (double)timeout_ns / 1e9, tag, peer);
    }
    return res;
}

static mscclpp_result_t mpi_recv(void *ctx, void *data, size_t bytes, int peer, int tag,
                                 uint64_t timeout_ns)
{
    mpi_boot_t *m = ctx;
    CHECK(check_usable(m));
    CHECK(check_msg(m, bytes, tag));
    uint64_t deadline = base_now_ns() + timeout_ns;
    /* Probe first so that a size mismatch is reported instead of truncating. */
    MPI_Message msg;
    MPI_Status status;
    base_wait_t w;
    base_wait_init(&w, 0, BASE_WAIT_SPIN_SHARED);
    for (;;) {
        int flag = 0;
        pthread_mutex_lock(&m->lock);
        int rc = MPI_Improbe(peer, tag, m->comm, &flag, &msg, &status);
        pthread_mutex_unlock(&m->lock);
        if (rc != MPI_SUCCESS) return mpi_error(m->rank, rc, "MPI_Improbe");
        if (flag) break;
        if (base_now_ns() >= deadline)
            return ERR(MSCCLPP_ERR_TIMEOUT,
                       "rank %d: timed out after %.1f s waiting to receive tag %d from rank %d "
                       "(MPI)",
                       m->rank, (double)timeout_ns / 1e9, tag, peer);
        (void)base_wait_pause(&w);
    }
    int count = 0;
    MPI_Get_count(&status, MPI_BYTE, &count);
    void *buf = data;
    if ((size_t)count != bytes) {
        buf = malloc(count > 0 ? (size_t)count : 1);
        if (!buf) return ERR(MSCCLPP_ERR_NO_MEMORY, "rank %d: out of memory", m->rank);
    }
    MPI_Request req;
    pthread_mutex_lock(&m->lock);
    int rc = MPI_Imrecv(buf, count, MPI_BYTE, &msg, &req);
    pthread_mutex_unlock(&m->lock);
    mscclpp_result_t res = rc == MPI_SUCCESS ? wait_req(m, &req, NULL, deadline, "MPI_Imrecv")
                                             : mpi_error(m->rank, rc, "MPI_Imrecv");
    if (res == MSCCLPP_ERR_TIMEOUT) {
        m->broken = 1; /* a matched receive cannot be withdrawn; MPI may still write buf */
        res = ERR(MSCCLPP_ERR_TIMEOUT,
                  "rank %d: timed out after %.1f s receiving tag %d from rank %d (MPI)", m->rank,
                  (double)timeout_ns / 1e9, tag, peer);
    }
    if (buf != data) {
        if (res == MSCCLPP_OK)
            res = ERR_ARG("rank %d: message from rank %d with tag %d has %d bytes, expected %zu",
                          m->rank, peer, tag, count, bytes);
        if (!m->broken) free(buf);
    }
    return res;
}

/* Complete a collective request or mark the bootstrap unusable. */
static mscclpp_result_t wait_collective(mpi_boot_t *m, MPI_Request *req, uint64_t timeout_ns,
                                        const char *call)
{
    mscclpp_result_t res = wait_req(m, req, NULL, base_now_ns() + timeout_ns, call);
    if (res == MSCCLPP_ERR_TIMEOUT) {
        m->broken = 1;
        res = ERR(MSCCLPP_ERR_TIMEOUT,
                  "rank %d: %s did not complete within %.1f s (a rank of the communicator is "
                  "missing or slow)",
                  m->rank, call, (double)timeout_ns / 1e9);
    }
    return res;
}

static mscclpp_result_t mpi_allgather(void *ctx, void *data, size_t bytes_per_rank,
                                      uint64_t timeout_ns)
{
    mpi_boot_t *m = ctx;
    CHECK(check_usable(m));
    if (bytes_per_rank > INT_MAX)
        return ERR(MSCCLPP_ERR_UNSUPPORTED,
                   "rank %d: MPI allgather is limited to %d bytes per rank", m->rank, INT_MAX);
    MPI_Request req;
    pthread_mutex_lock(&m->lock);
    int rc = MPI_Iallgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, data, (int)bytes_per_rank, MPI_BYTE,
                            m->comm, &req);
    pthread_mutex_unlock(&m->lock);
    if (rc != MPI_SUCCESS) return mpi_error(m->rank, rc, "MPI_Iallgather");
    return wait_collective(m, &req, timeout_ns, "MPI_Iallgather");
}

static mscclpp_result_t mpi_barrier(void *ctx, uint64_t timeout_ns)
{
    mpi_boot_t *m = ctx;
    CHECK(check_usable(m));
    MPI_Request req;
    pthread_mutex_lock(&m->lock);
    int rc = MPI_Ibarrier(m->comm, &req);
    pthread_mutex_unlock(&m->lock);
    if (rc != MPI_SUCCESS) return mpi_error(m->rank, rc, "MPI_Ibarrier");
    return wait_collective(m, &req, timeout_ns, "MPI_Ibarrier");
}

static void mpi_destroy(void *ctx)
{
    mpi_boot_t *m = ctx;
    if (!m) return;
    int finalized = 0;
    MPI_Finalized(&finalized);
    /* after MPI_Finalize the duplicate is gone already; with requests in flight (after a
     * timeout) leave the communicator alone */
    if (!finalized && !m->broken) MPI_Comm_free(&m->comm);
    pthread_mutex_destroy(&m->lock);
    free(m);
}

static const mscclpp_bootstrap_ops_t mpi_ops = {
    .allgather = mpi_allgather,
    .send = mpi_send,
    .recv = mpi_recv,
    .barrier = mpi_barrier,
    .destroy = mpi_destroy,
};

MSCCLPP_API mscclpp_result_t mscclpp_bootstrap_create_mpi(MPI_Comm comm, mscclpp_bootstrap_t **boot)
{
    CHECK_ARG(boot != NULL);
    *boot = NULL;
    CHECK_ARG(comm != MPI_COMM_NULL);
    int inited = 0, finalized = 0;
    MPI_Initialized(&inited);
    MPI_Finalized(&finalized);
    if (!inited || finalized)
        return ERR_ARG("mscclpp_bootstrap_create_mpi: MPI is not initialized (call MPI_Init "
                       "first) or already finalized");
    int rank, size;
    int rc = MPI_Comm_rank(comm, &rank);
    if (rc == MPI_SUCCESS) rc = MPI_Comm_size(comm, &size);
    if (rc != MPI_SUCCESS) return mpi_error(-1, rc, "MPI_Comm_rank/size");

    mpi_boot_t *m = calloc(1, sizeof *m);
    if (!m) return ERR(MSCCLPP_ERR_NO_MEMORY, "rank %d: out of memory", rank);
    pthread_mutex_init(&m->lock, NULL);
    mscclpp_result_t res;
    MPI_Request req;
    rc = MPI_Comm_idup(comm, &m->comm, &req);
    if (rc != MPI_SUCCESS) {
        res = mpi_error(rank, rc, "MPI_Comm_idup");
        goto free_m;
    }
    m->rank = rank;
    m->nranks = size;
    res = wait_req(m, &req, NULL, base_now_ns() + mscclpp_timeout_ns(), "MPI_Comm_idup");
    if (res == MSCCLPP_ERR_TIMEOUT) {
        res = ERR(MSCCLPP_ERR_TIMEOUT,
                  "rank %d: MPI_Comm_idup did not complete within %.1f s (a rank did not call "
                  "mscclpp_bootstrap_create_mpi)",
                  rank, (double)mscclpp_timeout_ns() / 1e9);
        goto free_m; /* leak the pending duplicate: it cannot be cancelled */
    }
    if (res != MSCCLPP_OK) goto free_m;
    MPI_Comm_set_errhandler(m->comm, MPI_ERRORS_RETURN);
    int *ub = NULL, found = 0;
    MPI_Comm_get_attr(m->comm, MPI_TAG_UB, &ub, &found);
    m->tag_ub = found && ub ? *ub : 32767;
    res = mscclpp_bootstrap_create_custom(&mpi_ops, m, rank, size, boot);
    if (res != MSCCLPP_OK) goto free_comm;
    return MSCCLPP_OK;

free_comm:
    MPI_Comm_free(&m->comm);
free_m:
    pthread_mutex_destroy(&m->lock);
    free(m);
    return res;
}
