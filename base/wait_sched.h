/*
 * The GPU side of the one wait policy (base/wait.h), as plain macros so that the interpreter's
 * device code (kernels/common/kern_port.h, compiled by nvcc and hipcc) can include it: a device
 * thread polls BASE_WAIT_DEV_SPIN times, then sleeps briefly between polls, and longer after
 * BASE_WAIT_DEV_LONG_FACTOR times as many polls. The executor hands the spin to the interpreter
 * in its launch arguments (kern_args_t.dev_spin, from base_wait_dev_spin()).
 */
#ifndef MSCCLPP_BASE_WAIT_SCHED_H
#define MSCCLPP_BASE_WAIT_SCHED_H

#define BASE_WAIT_DEV_SPIN 1024u
#define BASE_WAIT_DEV_LONG_FACTOR 64u

#endif /* MSCCLPP_BASE_WAIT_SCHED_H */
