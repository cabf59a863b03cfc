/* Host backend of the plan interpreter: the HAL runs each block of a launch on its own thread. */
#include <pthread.h>
#include <stdlib.h>

#include "kernels/common/kern_entry.h"
#include "kernels/common/kern_interp.h"

void kern_host_block_sync(void *barrier) { (void)pthread_barrier_wait(barrier); }

void kern_host_run_block(const void *args, int block, int nblocks)
{
    kern_smem_t sm; /* the block's "shared memory": this thread is the whole block */
    kern_run_block((const kern_args_t *)args, block, nblocks, 0, 1, &sm, NULL);
}

/* ---- several host threads per block (kern_entry.h) ------------------------------------- */

typedef struct {
    const void *args;
    int block, nblocks, nth;
    kern_smem_t sm;
    pthread_barrier_t bar;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    int go; /* 0: wait, 1: run, -1: give up (a thread could not be started) */
} simt_block_t;

typedef struct {
    simt_block_t *blk;
    int tid;
} simt_thread_t;

static void *simt_main(void *arg)
{
    simt_thread_t *t = arg;
    simt_block_t *k = t->blk;
    pthread_mutex_lock(&k->lock);
    while (k->go == 0) pthread_cond_wait(&k->cond, &k->lock);
    int go = k->go;
    pthread_mutex_unlock(&k->lock);
    if (go > 0)
        kern_run_block((const kern_args_t *)k->args, k->block, k->nblocks, t->tid, k->nth,
                       &k->sm, &k->bar);
    return NULL;
}

static void simt_release(simt_block_t *k, int go)
{
    pthread_mutex_lock(&k->lock);
    k->go = go;
    pthread_cond_broadcast(&k->cond);
    pthread_mutex_unlock(&k->lock);
}

int kern_host_run_block_simt(const void *args, int block, int nblocks, int nth)
{
    if (nth <= 1) {
        kern_host_run_block(args, block, nblocks);
        return 0;
    }
    int rc = -1, started = 1;
    simt_block_t *k = calloc(1, sizeof *k);
    simt_thread_t *th = calloc((size_t)nth, sizeof *th);
    pthread_t *ids = calloc((size_t)nth, sizeof *ids);
    if (!k || !th || !ids) goto out_free;
    *k = (simt_block_t){.args = args, .block = block, .nblocks = nblocks, .nth = nth};
    if (pthread_barrier_init(&k->bar, NULL, (unsigned)nth) != 0) goto out_free;
    pthread_mutex_init(&k->lock, NULL);
    pthread_cond_init(&k->cond, NULL);
    for (int t = 0; t < nth; t++) th[t] = (simt_thread_t){k, t};
    /* thread 0 runs here; the others wait at the gate until every one of them exists */
    for (; started < nth; started++)
        if (pthread_create(&ids[started], NULL, simt_main, &th[started]) != 0) break;
    rc = started == nth ? 0 : -1;
    simt_release(k, rc == 0 ? 1 : -1);
    if (rc == 0) simt_main(&th[0]);
    for (int t = 1; t < started; t++) pthread_join(ids[t], NULL);
    pthread_cond_destroy(&k->cond);
    pthread_mutex_destroy(&k->lock);
    pthread_barrier_destroy(&k->bar);
out_free:
    free(ids);
    free(th);
    free(k);
    return rc;
}
