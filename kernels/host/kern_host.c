/* TEMPORARY placeholder until the interpreter lands: runs nothing. */
#include "kernels/common/kern_entry.h"
void kern_host_run_block(const void *args, int block, int nblocks)
{
    (void)args;
    (void)block;
    (void)nblocks;
}
