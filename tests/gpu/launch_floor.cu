/*
 * launch_floor: what any kernel launch costs on this GPU, the floor under lat_probe's figures
 * (issue 19 items 1 and 5; a measurement tool, not a test). It launches an empty kernel whose
 * one parameter has the interpreter's argument size (kern_args_t, 200 B since the phase
 * trace; __grid_constant__ like kern_cuda_entry) at the grid of a small plan and at one warp,
 * and times per launch:
 *   host     the cudaLaunchKernel call alone (batches of 64, a sync between batches)
 *   total    ITERS back-to-back launches plus one sync (lat_probe's `total`)
 *   sync     one launch plus cudaStreamSynchronize, ITERS times (lat_probe's `call+sync`)
 * and, with a second kernel that only reads one word from device memory and writes one back
 * in thread 0 (one dependent round trip), the same `total`: how much one global-memory round
 * trip adds to a kernel that is otherwise empty.
 * Built by scripts/gpu-check.sh (step floor) with the device's own nvcc:
 *   nvcc -O3 -arch=sm_90 -o launch_floor tests/gpu/launch_floor.cu && ./launch_floor [ITERS]
 */
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

struct args_like {
    unsigned long long w[25]; /* sizeof(kern_args_t) / 8 */
};

__global__ void k_empty(const __grid_constant__ args_like a) { (void)a; }

__global__ void k_one_trip(const __grid_constant__ args_like a, unsigned long long *p)
{
    if (threadIdx.x == 0 && blockIdx.x == 0) p[1] = p[0] + a.w[0];
}

static double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

#define CK(x)                                                                                    \
    do {                                                                                         \
        cudaError_t e_ = (x);                                                                    \
        if (e_ != cudaSuccess) {                                                                 \
            fprintf(stderr, "launch_floor: %s: %s\n", #x, cudaGetErrorString(e_));               \
            exit(1);                                                                             \
        }                                                                                        \
    } while (0)

static void launch(int which, int nb, int nt, args_like *a, unsigned long long *p, cudaStream_t s)
{
    if (which == 0) k_empty<<<nb, nt, 0, s>>>(*a);
    else k_one_trip<<<nb, nt, 0, s>>>(*a, p);
}

static void run(const char *name, int which, int nb, int nt, int iters, unsigned long long *p,
                cudaStream_t s)
{
    args_like a = {};
    a.w[0] = 1;
    for (int i = 0; i < 100; i++) launch(which, nb, nt, &a, p, s);
    CK(cudaStreamSynchronize(s));
    double host = 0;
    int done = 0;
    while (done < iters) {
        int n = iters - done < 64 ? iters - done : 64;
        double t0 = now_us();
        for (int i = 0; i < n; i++) launch(which, nb, nt, &a, p, s);
        host += now_us() - t0;
        CK(cudaStreamSynchronize(s));
        done += n;
    }
    double t0 = now_us();
    for (int i = 0; i < iters; i++) launch(which, nb, nt, &a, p, s);
    CK(cudaStreamSynchronize(s));
    double total = now_us() - t0;
    t0 = now_us();
    for (int i = 0; i < iters; i++) {
        launch(which, nb, nt, &a, p, s);
        CK(cudaStreamSynchronize(s));
    }
    double sync = now_us() - t0;
    CK(cudaGetLastError());
    printf("launch_floor %-9s %dx%d: host %.2f us/launch, total %.2f us/launch, launch+sync "
           "%.2f us (%d launches)\n",
           name, nb, nt, host / iters, total / iters, sync / iters, iters);
}

int main(int argc, char **argv)
{
    int iters = argc > 1 ? atoi(argv[1]) : 2000;
    cudaStream_t s;
    unsigned long long *p;
    CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    CK(cudaMalloc(&p, 64));
    CK(cudaMemset(p, 0, 64));
    run("empty", 0, 1, 32, iters, p, s);
    run("empty", 0, 4, 1024, iters, p, s);
    run("one-trip", 1, 1, 32, iters, p, s);
    run("one-trip", 1, 4, 1024, iters, p, s);
    CK(cudaFree(p));
    CK(cudaStreamDestroy(s));
    return 0;
}
