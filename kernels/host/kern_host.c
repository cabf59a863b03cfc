/* Host backend of the plan interpreter: the HAL runs each block of a launch on its own thread. */
#include "kernels/common/kern_entry.h"
#include "kernels/common/kern_interp.h"

void kern_host_run_block(const void *args, int block, int nblocks)
{
    kern_run_block((const kern_args_t *)args, block, nblocks, 0, 1);
}
