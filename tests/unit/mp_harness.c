/* Fork-based multi-rank runner for tests (see mp_harness.h). */
#include "tests/unit/mp_harness.h"

#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

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

int mp_run(int nranks, mp_rank_fn fn, void *arg, int timeout_s, unsigned *failed_ranks)
{
    mscclpp_unique_id_t id;
    if (failed_ranks) *failed_ranks = 0;
    if (mscclpp_get_unique_id(&id) != MSCCLPP_OK) {
        fprintf(stderr, "# mp_run: unique id: %s\n", mscclpp_last_error());
        return nranks;
    }
    pid_t pids[64];
    if (nranks > 64) return nranks;
    fflush(stdout);
    fflush(stderr);
    for (int r = 0; r < nranks; r++) {
        pid_t pid = fork();
        if (pid == 0) {
            int rc = fn(r, nranks, &id, arg);
            fflush(stdout);
            fflush(stderr);
            _exit(rc == 0 ? 0 : 1);
        }
        pids[r] = pid;
    }
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
                    if (failed_ranks) *failed_ranks |= 1u << r;
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
                    if (failed_ranks) *failed_ranks |= 1u << r;
                }
            break;
        }
        usleep(2000);
    }
    return failures;
}
