/*
 * Several ranks on one GPU without CUDA MPS: detect it and warn once per process.
 *
 * Without MPS the contexts of processes sharing a GPU time-slice: a plan's kernel that waits for
 * a peer rank on the same GPU runs only when the scheduler switches to that peer's context, so
 * every collective takes milliseconds (measured on an H100: 4.5 ms per allreduce at every size,
 * docs/gpu.md) although it stays correct. Users rarely guess why, so the first launch on each
 * device checks:
 *
 * 1. Is MPS active for this context? The driver says so itself
 *    (CU_DEVICE_ATTRIBUTE_MPS_ENABLED, CUDA 12.3+ drivers). That is the only reliable answer:
 *    a pipe directory (CUDA_MPS_PIPE_DIRECTORY, /tmp/nvidia-mps) can be stale, belong to another
 *    user, or name a daemon this process did not connect to. Only on drivers that do not know
 *    the attribute do we fall back to the presence of the control pipe.
 * 2. Does another process of this machine launch plans on the same GPU? Each process binds an
 *    abstract Unix socket named after the device's UUID (nothing in the file system, released by
 *    the kernel when the process exits, even by a crash); a second process finds the name taken
 *    (EADDRINUSE). UUIDs, unlike ordinals, are the same in every process whatever
 *    CUDA_VISIBLE_DEVICES says, and distinguish MIG instances, which do not time-slice each
 *    other. The communicator would know the local ranks too, but the HAL does not see it, and
 *    this also catches two independent jobs sharing a GPU, which time-slice just the same.
 *
 * The first process on a GPU therefore stays quiet and every later one warns, once. Nothing here
 * can fail a launch: a check that cannot be made is skipped (logged at INFO).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "hal/cuda/cuda_internal.h"

#define MPS_MAX_DEVICES 64

static pthread_mutex_t mps_lock = PTHREAD_MUTEX_INITIALIZER;
static bool checked[MPS_MAX_DEVICES];
static int claim_fd[MPS_MAX_DEVICES]; /* kept open (close-on-exec) for the process's life */
static bool warned;

/* 1 MPS on, 0 off, -1 unknown. */
static int mps_enabled(int ordinal)
{
    CUdevice dev;
    int on = 0;
    if (cuda_drv.have_base && cuda_drv.device_get(&dev, ordinal) == CUDA_SUCCESS &&
        cuda_drv.device_get_attribute(&on, CU_DEVICE_ATTRIBUTE_MPS_ENABLED, dev) == CUDA_SUCCESS)
        return on != 0;
    /* an older driver: a control pipe suggests a daemon that clients connect to */
    const char *dir = getenv("CUDA_MPS_PIPE_DIRECTORY");
    char path[512];
    snprintf(path, sizeof path, "%s/control", dir && dir[0] ? dir : "/tmp/nvidia-mps");
    struct stat st;
    if (stat(path, &st) == 0) return 1;
    return -1;
}

/* 1 another process holds this GPU's name, 0 we claimed it, -1 could not tell. */
static int claim_device(int ordinal, const char **uuid_out, char *uuid, size_t size)
{
    struct cudaDeviceProp prop;
    if (cudaGetDeviceProperties(&prop, ordinal) != cudaSuccess) {
        (void)cudaGetLastError();
        return -1;
    }
    size_t n = 0;
    for (int i = 0; i < 16 && n + 3 <= size; i++)
        n += (size_t)snprintf(uuid + n, size - n, "%02x", (unsigned char)prop.uuid.bytes[i]);
    *uuid_out = uuid;
    int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    if (fd < 0) return -1;
    struct sockaddr_un addr = {.sun_family = AF_UNIX};
    /* abstract name: a leading NUL, then the text (not NUL-terminated) */
    int len = snprintf(addr.sun_path + 1, sizeof addr.sun_path - 1, "mscclpp-gpu-%s", uuid);
    socklen_t alen = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + (size_t)len);
    if (bind(fd, (struct sockaddr *)&addr, alen) == 0) {
        claim_fd[ordinal] = fd;
        return 0;
    }
    int err = errno;
    close(fd);
    return err == EADDRINUSE ? 1 : -1;
}

/*
 * Every launch calls this; only the first on a device does the check. The launch path must not
 * pay for asking which device it is on (cudaGetDevice and a lock per launch, issue 19 item 5),
 * so a thread that has seen its device checked asks again only every MPS_RECHECK launches, or
 * after it chose another device through the HAL (cuda_mps_device_changed): a thread that
 * switches with its own cudaSetDevice has its new device checked within MPS_RECHECK launches.
 */
#define MPS_RECHECK 256u

static __thread bool thread_checked; /* this thread's current device has been checked */
static __thread unsigned thread_launches;

void cuda_mps_device_changed(void) { thread_checked = false; }

void cuda_mps_check(void)
{
    if (thread_checked && (++thread_launches % MPS_RECHECK) != 0) return;
    int ordinal = -1;
    if (cudaGetDevice(&ordinal) != cudaSuccess || ordinal < 0 || ordinal >= MPS_MAX_DEVICES) {
        (void)cudaGetLastError();
        return;
    }
    thread_checked = true;
    if (__atomic_load_n(&checked[ordinal], __ATOMIC_ACQUIRE)) return;
    pthread_mutex_lock(&mps_lock);
    if (checked[ordinal]) {
        pthread_mutex_unlock(&mps_lock);
        return;
    }
    int mps = mps_enabled(ordinal);
    char uuid[40] = "";
    const char *id = "?";
    int shared = mps == 1 ? 0 : claim_device(ordinal, &id, uuid, sizeof uuid);
    if (mps == 1) {
        INFO(SUBSYS_HAL, "cuda: device %d runs under CUDA MPS", ordinal);
    } else if (shared == 1 && !warned) {
        warned = true;
        WARN(SUBSYS_HAL,
             "cuda: another process launches on GPU %d (UUID %s) and CUDA MPS is %s: the "
             "processes' kernels time-slice, so every collective between ranks on this GPU "
             "takes milliseconds. Start MPS before the ranks, as the user who runs them: "
             "`nvidia-cuda-mps-control -d` (stop it with `echo quit | nvidia-cuda-mps-control`)",
             ordinal, id, mps == 0 ? "off" : "not detected");
    } else if (shared < 0) {
        INFO(SUBSYS_HAL, "cuda: could not tell whether other processes share GPU %d", ordinal);
    }
    __atomic_store_n(&checked[ordinal], true, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&mps_lock);
}
