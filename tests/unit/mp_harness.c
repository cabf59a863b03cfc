/* Fork-based multi-rank runner for tests and the set-up its ranks share (see mp_harness.h). */
#define _GNU_SOURCE /* memfd_create */
#include "tests/unit/mp_harness.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

int (*mp_child_setup)(int rank);

int mp_fail(int rank, const char *file, int line, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    fprintf(stderr, "# rank %d: %s:%d: %s\n", rank, file, line, msg);
    return 1;
}

/* In a child: rank 0 creates the id and passes it on; the others read it (see mp_run). */
static int child_id(int rank, int nranks, int id_pipe[2], mscclpp_unique_id_t *id)
{
    if (rank == 0) {
        close(id_pipe[0]);
        if (mscclpp_get_unique_id(id) != MSCCLPP_OK) {
            fprintf(stderr, "# rank 0: unique id: %s\n", mscclpp_last_error());
            return 1; /* the pipe closes with this process: the others fail at once */
        }
        /* One id per reader; a write this small is atomic, so each read gets a whole id. A
           reader that died must not take rank 0 down with SIGPIPE. */
        signal(SIGPIPE, SIG_IGN);
        for (int r = 1; r < nranks; r++)
            if (write(id_pipe[1], id, sizeof *id) != (ssize_t)sizeof *id) return 1;
        close(id_pipe[1]);
        return 0;
    }
    close(id_pipe[1]);
    size_t got = 0;
    while (got < sizeof *id) {
        ssize_t n = read(id_pipe[0], (char *)id + got, sizeof *id - got);
        if (n <= 0) {
            fprintf(stderr, "# rank %d: rank 0 exited before it passed the unique id\n", rank);
            return 1;
        }
        got += (size_t)n;
    }
    close(id_pipe[0]);
    return 0;
}

int mp_run(int nranks, mp_rank_fn fn, void *arg, int timeout_s, unsigned *failed_ranks)
{
    if (failed_ranks) *failed_ranks = 0;
    pid_t pids[64];
    if (nranks > 64) return nranks;
    /*
     * Fork before any library thread exists: rank 0 creates the unique id (its root thread runs
     * in rank 0) and hands it to the others through a pipe. Forking after the root thread
     * started could copy a lock it held (the allocator's under ASan, the log's) into a child.
     */
    int id_pipe[2];
    if (pipe(id_pipe) != 0) {
        perror("# mp_run: pipe");
        return nranks;
    }
    fflush(stdout);
    fflush(stderr);
    for (int r = 0; r < nranks; r++) {
        pid_t pid = fork();
        if (pid == 0) {
            mscclpp_unique_id_t id;
            int rc = mp_child_setup ? mp_child_setup(r) : 0;
            if (rc != 0) fprintf(stderr, "# rank %d: the child setup failed\n", r);
            if (rc == 0) rc = child_id(r, nranks, id_pipe, &id);
            if (rc == 0) rc = fn(r, nranks, &id, arg);
            fflush(stdout);
            fflush(stderr);
            _exit(rc == 0 ? 0 : 1);
        }
        pids[r] = pid;
    }
    close(id_pipe[0]);
    close(id_pipe[1]);
    int failures = 0;
    struct timespec start;
    clock_gettime(CLOCK_MONOTONIC, &start);
    int left = nranks;
    int done[64] = {0};
    while (left > 0) {
        for (int r = 0; r < nranks; r++) {
            if (done[r]) continue;
            int status = 0;
            pid_t p = waitpid(pids[r], &status, WNOHANG);
            if (p == pids[r]) {
                done[r] = 1;
                left--;
                if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
                    failures++;
                    if (failed_ranks && r < 32) *failed_ranks |= 1u << r; /* a 32-bit mask */
                    if (WIFSIGNALED(status))
                        fprintf(stderr, "# rank %d died of signal %d\n", r, WTERMSIG(status));
                }
            }
        }
        struct timespec now;
        clock_gettime(CLOCK_MONOTONIC, &now);
        if (now.tv_sec - start.tv_sec > timeout_s) {
            for (int r = 0; r < nranks; r++)
                if (!done[r]) {
                    fprintf(stderr, "# rank %d still running after %d s: killed\n", r, timeout_s);
                    kill(pids[r], SIGKILL);
                    waitpid(pids[r], NULL, 0);
                    failures++;
                    if (failed_ranks && r < 32) *failed_ranks |= 1u << r; /* a 32-bit mask */
                }
            break;
        }
        usleep(2000);
    }
    return failures;
}

double mp_now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int mp_write_all(int fd, const void *buf, size_t n)
{
    const char *p = buf;
    while (n) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return -1;
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

int mp_read_all(int fd, void *buf, size_t n, int timeout_ms)
{
    char *p = buf;
    double end = mp_now_s() + timeout_ms / 1e3;
    while (n) {
        int left = (int)((end - mp_now_s()) * 1e3);
        struct pollfd pfd = {.fd = fd, .events = POLLIN};
        int r = left > 0 ? poll(&pfd, 1, left) : 0;
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return -1;
        ssize_t got = read(fd, p, n);
        if (got < 0 && errno == EINTR) continue;
        if (got <= 0) return -1;
        p += got;
        n -= (size_t)got;
    }
    return 0;
}

void mp_set_timeout(int seconds)
{
    char t[16];
    snprintf(t, sizeof t, "%d", seconds);
    setenv("MSCCLPP_TIMEOUT", t, 1);
}

int mp_join_node(int rank, int nranks, int per_node, const char *tag, const mscclpp_unique_id_t *id,
                 mscclpp_comm_t **comm)
{
    char node[64];
    snprintf(node, sizeof node, "%s-node-%d", tag, rank / per_node);
    setenv("MSCCLPP_NODE_ID", node, 1);
    setenv("UCX_TLS", "tcp", 1);
    setenv("UCX_NET_DEVICES", "lo", 0);
    MP_CHECK(rank, mscclpp_comm_init_rank(id, rank, nranks, comm));
    int nlocal = 0;
    MP_CHECK(rank, mscclpp_comm_local_size(*comm, &nlocal));
    if (nlocal != per_node)
        return MP_FAIL(rank, "%d ranks on my node, expected %d", nlocal, per_node);
    return 0;
}

int mp_barrier_then_die(int rank, mscclpp_comm_t *comm, bool die)
{
    mscclpp_bootstrap_t *boot = NULL;
    MP_CHECK(rank, mscclpp_comm_bootstrap(comm, &boot));
    MP_CHECK(rank, mscclpp_bootstrap_barrier(boot));
    if (die) raise(SIGKILL);
    return 0;
}

bool mp_names_rank(const char *msg, int r)
{
    char want[24];
    snprintf(want, sizeof want, "rank %d", r);
    size_t n = strlen(want);
    for (const char *p = msg; (p = strstr(p, want)); p++)
        if (p[n] < '0' || p[n] > '9') return true;
    return false;
}

const char *mp_src_dir(void)
{
    const char *top = getenv("MSCCLPP_TOP_SRCDIR");
    return top && top[0] ? top : ".";
}

const char *mp_plan_dir(void)
{
    static char dir[1024];
    snprintf(dir, sizeof dir, "%s/plans", mp_src_dir());
    setenv("MSCCLPP_PLAN_DIR", dir, 1);
    return dir;
}

int mp_exec_open(int rank, int nranks, const mscclpp_unique_id_t *id, const char *plan_path,
                 mp_exec_t *e)
{
    memset(e, 0, sizeof *e);
    if (plan_path) MP_CHECK(rank, mscclpp_plan_load_file(plan_path, &e->plan));
    MP_CHECK(rank, mscclpp_comm_init_rank(id, rank, nranks, &e->comm));
    MP_CHECK(rank, mscclpp_comm_bootstrap(e->comm, &e->boot));
    MP_CHECK(rank, mscclpp_executor_create(e->comm, &e->ex));
    return 0;
}

void mp_exec_close(mp_exec_t *e)
{
    if (e->ex) mscclpp_executor_destroy(e->ex);
    if (e->plan) mscclpp_plan_destroy(e->plan);
    if (e->comm) mscclpp_comm_destroy(e->comm);
    memset(e, 0, sizeof *e);
}

void *mp_app_map(size_t bytes, void *at)
{
    int fd = memfd_create("mp-app-memory", MFD_CLOEXEC);
    if (fd < 0) return NULL;
    void *p = MAP_FAILED;
    if (ftruncate(fd, (off_t)bytes) == 0)
        p = mmap(at, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | (at ? MAP_FIXED : 0), fd, 0);
    close(fd);
    return p == MAP_FAILED ? NULL : p;
}
