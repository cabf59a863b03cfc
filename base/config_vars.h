/*
 * Every MSCCLPP_* environment variable, declared once: CONFIG_VAR(name, kind, default, doc).
 * `kind` says how base/config.c parses it and what a bad value does:
 *   STR        any text
 *   SECONDS    a number > 0 (fractions allowed)      bad: calls fail with MSCCLPP_ERR_INVALID_ARG
 *   COUNT      an integer >= 0                       bad: calls fail
 *   PORT       an integer 0..65535                   bad: calls fail
 *   SHAREABLE  auto, cumem or legacy                 bad: calls fail
 *   LEVEL      NONE, WARN, INFO or TRACE             bad: a warning naming the default used
 *   SUBSYS     subsystem names, ^ to exclude         bad: a warning naming the default used
 * (logging variables only warn: a typo in them should not stop a job). mscclpp-info prints this
 * table with the value in force; code reads values through base/config.h.
 */
CONFIG_VAR(MSCCLPP_DEBUG, LEVEL, "WARN", "Log level: NONE, WARN, INFO or TRACE")
CONFIG_VAR(MSCCLPP_DEBUG_SUBSYS, SUBSYS, "ALL",
           "Comma-separated subsystems to log: INIT,BOOT,HAL,MEM,CHAN,PLAN,EXEC,KERN,NET,BENCH,"
           "NCCL or ALL; ^NAME excludes one")
CONFIG_VAR(MSCCLPP_DEBUG_FILE, STR, "",
           "Write logs to this file instead of stderr (%h host, %p pid)")
CONFIG_VAR(MSCCLPP_TIMEOUT, SECONDS, "60",
           "Seconds any wait (bootstrap, semaphore, packet, kernel) may take before it fails with "
           "MSCCLPP_ERR_TIMEOUT")
CONFIG_VAR(MSCCLPP_HAL, STR, "",
           "Backend: host, cuda or hip (default: first that finds a device); hip takes the AMD "
           "build, else the NVIDIA one (hipnv)")
CONFIG_VAR(MSCCLPP_HAL_MODULE_DIR, STR, "",
           "Directory of backend modules (default: the install dir; an uninstalled build: its own "
           ".libs)")
CONFIG_VAR(MSCCLPP_SOCKET_IFNAME, STR, "",
           "Network interface for the TCP bootstrap (default: first up, non-loopback)")
CONFIG_VAR(MSCCLPP_MASTER_ADDR, STR, "", "Bootstrap root address when no unique id is passed")
CONFIG_VAR(MSCCLPP_MASTER_PORT, PORT, "", "Bootstrap root port when no unique id is passed")
CONFIG_VAR(MSCCLPP_BOOTSTRAP_SECRET, STR, "",
           "Extra secret mixed into address-based bootstrap sessions")
CONFIG_VAR(MSCCLPP_PLAN_DIR, STR, "",
           "Directory of default plans (default: the installed plans; an uninstalled build, loaded "
           "from its build folder: the source tree's plans/)")
CONFIG_VAR(MSCCLPP_PLAN_MAKE, STR, "last",
           "Plans made for the job (docs/plan-selection.md): last (after every registered plan), "
           "first (before them: to compare with plan files), or off")
CONFIG_VAR(MSCCLPP_PLAN_DIRECT, STR, "auto",
           "Direct plans (plans/direct/<backend>/: the peers' input and output addressed, the "
           "fewest bytes) before the backend's own: auto (the default; where measured faster: on "
           "the host backend for the calls whose ranks all pass shareable buffers, agreed by "
           "every rank at every such call), on (always; the ranks must then change their buffers "
           "together), or off (docs/plan-selection.md)")
CONFIG_VAR(MSCCLPP_TUNING_FILE, STR, "",
           "Tuning table (mscclpp-bench --tune) the executor applies; none: no table (default: "
           "~/.cache/mscclpp/tuning/<backend>-<device>-<nranks>.json when it exists)")
CONFIG_VAR(MSCCLPP_CACHE_DIR, STR, "",
           "Python DSL: where mscclpp.compile and --install write plans (Python's default "
           "~/.cache/mscclpp); when set (the Python package sets it for its processes), "
           "executors also load its plans, after the default ones")
CONFIG_VAR(MSCCLPP_HOST_SPIN, COUNT, "",
           "Polls a host-side wait spins before it yields the CPU (default: chosen from the cores "
           "and the threads that poll on the node; see base/wait.h)")
CONFIG_VAR(MSCCLPP_HOST_SLICE_US, COUNT, "0",
           "Time slice in microseconds the library's polling threads ask of the Linux scheduler "
           "(sched_setattr runtime of a SCHED_OTHER thread; kernels >= 6.12), e.g. 100: a short "
           "slice lets a waiter run as soon as it wakes beside busy processes, without a larger "
           "share of the CPU; 0 (default) leaves the kernel's slice (base/wait.h, "
           "docs/performance.md)")
CONFIG_VAR(MSCCLPP_CUDA_SHAREABLE, SHAREABLE, "auto",
           "CUDA backend: how shareable memory is made: auto (cuMem POSIX fds where the device "
           "supports them, else legacy cudaIpc), cumem, or legacy")
CONFIG_VAR(MSCCLPP_BOOTSTRAP_HANDSHAKE_TIMEOUT, SECONDS, "2",
           "Seconds a connection to a bootstrap listener may take to send its hello or handshake "
           "before it is dropped")
CONFIG_VAR(MSCCLPP_BOOTSTRAP_MAX_PENDING, COUNT, "64",
           "Connections a bootstrap listener holds before their hello or handshake is complete; "
           "beyond that the oldest is dropped")
CONFIG_VAR(MSCCLPP_TRANSPORTS, STR, "",
           "Comma list of transports peers may use: ipc, ib, ucx (default: all that work; per "
           "pair, ipc within a node, else ib when a device exists, else ucx)")
CONFIG_VAR(MSCCLPP_UCX_STAGING, STR, "auto",
           "ucx transport, memory it cannot access (GPU memory without CUDA/ROCm support in "
           "UCX): auto stages it through pinned host buffers; always stages every registration "
           "(tests the path on the host backend); never hands every pointer to UCX")
CONFIG_VAR(MSCCLPP_UCX_STAGE_CHUNK, COUNT, "1048576",
           "ucx transport, staging: bytes of one pinned bounce buffer, the most one staged "
           "message carries (at least 4096)")
CONFIG_VAR(MSCCLPP_NODE_ID, STR, "",
           "Force this rank's node identity (any string; ranks with equal values are one node). "
           "Default: host name + boot id + network namespace")
CONFIG_VAR(MSCCLPP_EXEC_CONTEXTS, COUNT, "64",
           "Contexts (plan + buffer allocations: scratch, counters, peer mappings, descriptors) an "
           "executor keeps; a call on another pair of allocations past it drops the least "
           "recently used one on every rank alike. 0: no bound")
CONFIG_VAR(MSCCLPP_PROXY_FIFO, COUNT, "512", "Port channels: triggers the proxy FIFO of a context holds")
CONFIG_VAR(MSCCLPP_PROXY_HOT_US, COUNT, "",
           "Port channels: microseconds an idle proxy keeps polling (yielding) after its last "
           "trigger or inbound message before it sleeps; 0: at once. Default: 1000 where the "
           "node's pollers have a core each, else 0")
CONFIG_VAR(MSCCLPP_TEST_TRANSPORT_FAULT, STR, "",
           "Test only: OP:N (OP connect, put, signal or flush) makes the Nth such transport call "
           "of the process fail with MSCCLPP_ERR_REMOTE, moving nothing; OP:N:MS delays that "
           "call MS milliseconds instead (transports/tp_fault.c)")
CONFIG_VAR(MSCCLPP_HAL_COUNT, COUNT, "0",
           "Test and measurement: 1 counts every backend (HAL) operation of the process and "
           "prints the counts per operation to stderr at exit (hal/hal.c; docs/performance.md)")
CONFIG_VAR(MSCCLPP_KERN_TRACE, STR, "",
           "Measurement: path prefix; the interpreter stamps each block's phases (entry, "
           "prologue, launch fence, each of its first 14 ops, exit) with the device clock and "
           "mscclpp_executor_destroy writes the last launch's stamps to PREFIX.rank<R>.txt "
           "(read by tests/gpu/kern_trace.py; docs/gpu.md)")
CONFIG_VAR(MSCCLPP_HAL_SYNC_CHECK, COUNT, "0",
           "Test only, host backend: 1 fails (and logs) every backend call that CUDA/HIP may make "
           "wait for the device (allocations and frees, synchronous copies and sets, the NULL "
           "stream, async copies of pageable memory) when a proxy thread makes it while a launch "
           "runs: the GPU deadlock where a kernel waits for its proxy (hal/host/host_check.c)")
CONFIG_VAR(MSCCLPP_TEST_NCCL_LEAVE_MS, COUNT, "0",
           "Test only: milliseconds every NCCL-API call waits, its work done, before it leaves "
           "its communicator (nccl/nccl_coll.c run_comm): a destroy or abort that did not wait "
           "for the calls inside would free under them")
CONFIG_VAR(MSCCLPP_NCCL_PLAN_DIR, STR, "",
           "NCCL-API library: ':' list of directories whose DSL plans (*.json) serve the NCCL "
           "calls before the built-in ones (docs/nccl.md)")
CONFIG_VAR(MSCCLPP_NCCL_ZERO_COPY, STR, "1",
           "NCCL-API library: 0 copies every buffer through the library's own instead of "
           "running plans on the caller's buffers (docs/nccl.md)")
CONFIG_VAR(MSCCLPP_NCCL_LIB_PATH, STR, "",
           "NCCL-API library: the real NCCL/RCCL library file (e.g. .../libnccl.so.2) that "
           "serves what libmscclpp_nccl does not; unset: no fallback (docs/nccl.md)")
