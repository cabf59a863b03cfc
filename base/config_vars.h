/*
 * Every MSCCLPP_* environment variable, declared once: X(name, default, doc).
 * mscclpp-info prints this table; code reads values through base/config.h.
 */
CONFIG_VAR(MSCCLPP_DEBUG, "WARN", "Log level: NONE, WARN, INFO or TRACE")
CONFIG_VAR(MSCCLPP_DEBUG_SUBSYS, "ALL",
           "Comma-separated subsystems to log: INIT,BOOT,HAL,MEM,CHAN,PLAN,EXEC,KERN,NET,BENCH or ALL")
CONFIG_VAR(MSCCLPP_DEBUG_FILE, "", "Write logs to this file instead of stderr (%h host, %p pid)")
CONFIG_VAR(MSCCLPP_TIMEOUT, "60",
           "Seconds any wait (bootstrap, semaphore, packet, kernel) may take before it fails with "
           "MSCCLPP_ERR_TIMEOUT")
CONFIG_VAR(MSCCLPP_HAL, "", "Backend: host, cuda or hip (default: first that finds a device)")
CONFIG_VAR(MSCCLPP_HAL_MODULE_DIR, "", "Directory of backend modules (default: the install dir)")
CONFIG_VAR(MSCCLPP_SOCKET_IFNAME, "", "Network interface for the TCP bootstrap (default: first up, non-loopback)")
CONFIG_VAR(MSCCLPP_MASTER_ADDR, "", "Bootstrap root address when no unique id is passed")
CONFIG_VAR(MSCCLPP_MASTER_PORT, "", "Bootstrap root port when no unique id is passed")
CONFIG_VAR(MSCCLPP_BOOTSTRAP_SECRET, "", "Extra secret mixed into address-based bootstrap sessions")
CONFIG_VAR(MSCCLPP_PLAN_DIR, "",
           "Directory of default plans (default: the installed plans, else the source tree's plans/)")
CONFIG_VAR(MSCCLPP_CACHE_DIR, "", "Python DSL: where mscclpp.compile and --install write plans (default ~/.cache/mscclpp)")
CONFIG_VAR(MSCCLPP_HOST_SPIN, "64",
           "Host backend: polls before a wait starts yielding the CPU (raise it when ranks x blocks <= cores)")
CONFIG_VAR(MSCCLPP_CUDA_SHAREABLE, "auto",
           "CUDA backend: how shareable memory is made: auto (cuMem POSIX fds where the device "
           "supports them, else legacy cudaIpc), cumem, or legacy")
CONFIG_VAR(MSCCLPP_TRANSPORTS, "",
           "Comma list of transports peers may use: ipc, ib, ucx (default: all that work; per "
           "pair, ipc within a node, else ib when a device exists, else ucx)")
CONFIG_VAR(MSCCLPP_NODE_ID, "",
           "Force this rank's node identity (any string; ranks with equal values are one node). "
           "Default: host name + boot id + network namespace")
CONFIG_VAR(MSCCLPP_PROXY_FIFO, "512", "Port channels: triggers the proxy FIFO of a context holds")
