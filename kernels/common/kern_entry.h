/* Entry points of the compiled interpreter, one per backend (see kernels/common/kern_args.h). */
#ifndef MSCCLPP_KERN_ENTRY_H
#define MSCCLPP_KERN_ENTRY_H
#ifdef __cplusplus
extern "C" {
#endif
/**
 * Host backend: run thread block `block` (of `nblocks`) of the interpreter for launch
 * arguments `args` (a kern_args_t). All blocks of a launch run concurrently on host threads;
 * the call returns when this block has finished its ops or recorded an error.
 */
void kern_host_run_block(const void *args, int block, int nblocks);
#ifdef __cplusplus
}
#endif
#endif
