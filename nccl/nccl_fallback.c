/*
 * libmscclpp_nccl: the real NCCL or RCCL behind MSCCLPP_NCCL_LIB_PATH, for what our plans do
 * not serve (64-bit integer reductions, no plan for the size or world, ...).
 *
 * Loaded once per process with RTLD_DEEPBIND: when this library is LD_PRELOADed, the real
 * library's calls to its own nccl* entry points must bind inside it, not back to ours.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "nccl/nccl_internal.h"

static pthread_once_t load_once = PTHREAD_ONCE_INIT;
static shim_real_t real;
static bool real_ok;

static pthread_once_t note_once = PTHREAD_ONCE_INIT;
static char note_why[512];

static void *sym(const char *name)
{
    return dlsym(real.handle, name);
}

static void load(void)
{
    const char *path = shim_config("MSCCLPP_NCCL_LIB_PATH");
    if (!*path) return;
    struct stat st;
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
        shim_info("MSCCLPP_NCCL_LIB_PATH=%s is a directory; it must name the library file "
                  "(e.g. .../libnccl.so.2); no fallback", path);
        return;
    }
    real.handle = dlopen(path, RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND);
    if (!real.handle) {
        const char *e = dlerror();
        shim_info("cannot load MSCCLPP_NCCL_LIB_PATH=%s: %s; no fallback", path, e ? e : "?");
        return;
    }
    real.path = path;
    *(void **)&real.GetUniqueId = sym("ncclGetUniqueId");
    *(void **)&real.CommInitRank = sym("ncclCommInitRank");
    *(void **)&real.CommDestroy = sym("ncclCommDestroy");
    *(void **)&real.CommFinalize = sym("ncclCommFinalize");
    *(void **)&real.CommAbort = sym("ncclCommAbort");
    *(void **)&real.AllReduce = sym("ncclAllReduce");
    *(void **)&real.Broadcast = sym("ncclBroadcast");
    *(void **)&real.Reduce = sym("ncclReduce");
    *(void **)&real.AllGather = sym("ncclAllGather");
    *(void **)&real.ReduceScatter = sym("ncclReduceScatter");
    *(void **)&real.AlltoAll = sym("ncclAlltoAll");
    *(void **)&real.GroupStart = sym("ncclGroupStart");
    *(void **)&real.GroupEnd = sym("ncclGroupEnd");
    *(void **)&real.RedOpCreatePreMulSum = sym("ncclRedOpCreatePreMulSum");
    *(void **)&real.RedOpDestroy = sym("ncclRedOpDestroy");
    *(void **)&real.GetLastError = sym("ncclGetLastError");
    if (!real.GetUniqueId || !real.CommInitRank || !real.CommDestroy) {
        shim_info("MSCCLPP_NCCL_LIB_PATH=%s lacks ncclGetUniqueId/ncclCommInitRank/"
                  "ncclCommDestroy; no fallback", path);
        dlclose(real.handle);
        memset(&real, 0, sizeof real);
        return;
    }
    real_ok = true;
}

const shim_real_t *shim_real(void)
{
    pthread_once(&load_once, load);
    return real_ok ? &real : NULL;
}

static void note(void)
{
    shim_info("falling back to %s for requests our plans do not serve (first: %s); later "
              "fallbacks are not logged", real.path ? real.path : "the real NCCL", note_why);
}

void shim_note_fallback(const char *why)
{
    /* the first caller's reason is the one logged; later callers find the once done */
    static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
    pthread_mutex_lock(&lock);
    if (!note_why[0]) snprintf(note_why, sizeof note_why, "%s", why);
    pthread_mutex_unlock(&lock);
    pthread_once(&note_once, note);
}

/*
 * A real communicator beside ours, so a request can move to it at any call: rank 0 makes the
 * real unique id and the bootstrap carries it to everyone (collective, like ncclCommInitRank).
 */
ncclResult_t shim_real_init(ncclComm_t comm)
{
    const shim_real_t *r = shim_real();
    /* every rank must agree on whether to go on: a rank without the library tells the others */
    int ok = r != NULL;
    int *oks = calloc((size_t)comm->nranks, sizeof *oks);
    unsigned char *ids = calloc((size_t)comm->nranks, NCCL_UNIQUE_ID_BYTES);
    ncclResult_t res = ncclSuccess;
    mscclpp_bootstrap_t *boot = NULL;
    if (!oks || !ids) {
        res = shim_error(ncclSystemError, "ncclCommInitRank: out of memory (rank %d)", comm->rank);
        goto out;
    }
    mscclpp_result_t m = mscclpp_comm_bootstrap(comm->comm, &boot);
    if (m != MSCCLPP_OK) {
        res = shim_from_mscclpp(m, "ncclCommInitRank: bootstrap of the fallback");
        goto out;
    }
    oks[comm->rank] = ok;
    m = mscclpp_bootstrap_allgather(boot, oks, sizeof *oks);
    if (m != MSCCLPP_OK) {
        res = shim_from_mscclpp(m, "ncclCommInitRank: agreeing on the fallback library");
        goto out;
    }
    for (int i = 0; i < comm->nranks; i++) ok = ok && oks[i];
    if (!ok) {
        if (r) shim_info("rank %d: some rank could not load MSCCLPP_NCCL_LIB_PATH; no fallback",
                         comm->rank);
        goto out;
    }
    ncclUniqueId id;
    memset(&id, 0, sizeof id);
    if (comm->rank == 0) {
        ncclResult_t rr = r->GetUniqueId(&id);
        if (rr != ncclSuccess) memset(&id, 0xff, sizeof id); /* tells the others it failed */
        memcpy(ids, &id, sizeof id);
    }
    m = mscclpp_bootstrap_allgather(boot, ids, NCCL_UNIQUE_ID_BYTES);
    if (m != MSCCLPP_OK) {
        res = shim_from_mscclpp(m, "ncclCommInitRank: sending the fallback's unique id");
        goto out;
    }
    memcpy(&id, ids, sizeof id);
    bool all_ff = true;
    for (size_t i = 0; i < sizeof id; i++) all_ff = all_ff && (unsigned char)id.internal[i] == 0xff;
    if (all_ff) {
        shim_info("rank %d: the fallback's ncclGetUniqueId failed on rank 0; no fallback",
                  comm->rank);
        goto out;
    }
    ncclResult_t rr = r->CommInitRank(&comm->real, comm->nranks, id, comm->rank);
    if (rr != ncclSuccess) {
        comm->real = NULL;
        res = shim_error(rr, "ncclCommInitRank: the fallback library %s failed on rank %d: %s",
                         r->path, comm->rank,
                         r->GetLastError ? r->GetLastError(NULL) : "(no message)");
    }
out:
    free(oks);
    free(ids);
    return res;
}
