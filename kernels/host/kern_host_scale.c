/* Host backend of the elementwise scaling (kernels/common/kern_scale.h): one host thread. */
#include "kernels/common/kern_entry.h"
#include "kernels/common/kern_scale.h"

void kern_host_scale(const void *args) { kern_scale_range((const kern_scale_args_t *)args, 0, 1); }
