/* The host backend's table and its device: the CPU, one device, always present. */
#define _GNU_SOURCE
#include <stdio.h>
#include <string.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "base/debug.h"
#include "hal/host/host.h"

HAL_DEFINE_STUBS("host")

static mscclpp_result_t host_init(void) { return MSCCLPP_OK; }
static void host_fini(void) {}

static mscclpp_result_t host_device_count(int *count)
{
    CHECK_ARG(count != NULL);
    *count = 1;
    return MSCCLPP_OK;
}

static mscclpp_result_t host_device_set(int dev)
{
    if (dev != 0) return ERR_ARG("device_set(%d): the host backend has one device, 0", dev);
    return MSCCLPP_OK;
}

static mscclpp_result_t host_device_get(int *dev)
{
    CHECK_ARG(dev != NULL);
    *dev = 0;
    return MSCCLPP_OK;
}

/* "model name" of /proc/cpuinfo (x86), else "host". */
static void cpu_name(char *name, size_t cap)
{
    snprintf(name, cap, "host");
    FILE *f = fopen("/proc/cpuinfo", "re");
    if (!f) return;
    char line[512];
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "model name", 10) != 0) continue;
        char *colon = strchr(line, ':');
        if (!colon) continue;
        char *v = colon + 1;
        while (*v == ' ' || *v == '\t') v++;
        size_t n = strcspn(v, "\n");
        while (n > 0 && (v[n - 1] == ' ' || v[n - 1] == '\t')) n--;
        if (n > 0) snprintf(name, cap, "%.*s", (int)n, v);
        break;
    }
    fclose(f);
}

static mscclpp_result_t host_device_props(int dev, hal_device_props_t *props)
{
    CHECK_ARG(props != NULL);
    if (dev != 0) return ERR_ARG("device_props(%d): the host backend has one device, 0", dev);
    memset(props, 0, sizeof *props);
    cpu_name(props->name, sizeof props->name);
    struct utsname u;
    snprintf(props->arch, sizeof props->arch, "host-%.26s", uname(&u) == 0 ? u.machine : "unknown");
    props->warp_size = 1;
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    props->multiprocessors = cpus > 0 ? (int)cpus : 1;
    props->max_threads_per_block = 1; /* one host thread runs a whole block */
    long pages = sysconf(_SC_PHYS_PAGES);
    props->total_memory = pages > 0 ? (size_t)pages * host_page_size() : 0;
    props->ipc = true;
    props->multicast = false;
    props->graphs = false;
    props->host_memory = true;
    return MSCCLPP_OK;
}

static const hal_ops_t host_ops = {
    .size = sizeof(hal_ops_t),
    .abi_version = HAL_ABI_VERSION,
    .name = "host",
    .init = host_init,
    .fini = host_fini,
    .device_count = host_device_count,
    .device_set = host_device_set,
    .device_get = host_device_get,
    .device_props = host_device_props,
    .mem_alloc = host_mem_alloc,
    .mem_alloc_shareable = host_mem_alloc_shareable,
    .mem_free = host_mem_free,
    .host_alloc = host_host_alloc,
    .host_free = host_host_free,
    .mem_range = host_mem_range,
    .mem_info = host_mem_info,
    .memcpy_sync = host_memcpy_sync,
    .memset_sync = host_memset_sync,
    .memcpy_async = host_memcpy_async,
    .memset_async = host_memset_async,
    .mem_export = host_mem_export,
    .mem_import = host_mem_import,
    .mem_unimport = host_mem_unimport,
    .mc_granularity = hal_stub_mc_granularity,
    .mc_create = hal_stub_mc_create,
    .mc_import = hal_stub_mc_import,
    .mc_bind = hal_stub_mc_bind,
    .mc_free = hal_stub_mc_free,
    .stream_create = host_stream_create,
    .stream_destroy = host_stream_destroy,
    .stream_sync = host_stream_sync,
    .stream_capturing = host_stream_capturing,
    .stream_begin_capture = host_stream_begin_capture,
    .stream_end_capture = host_stream_end_capture,
    .graph_launch = host_graph_launch,
    .graph_destroy = host_graph_destroy,
    .event_create = host_event_create,
    .event_destroy = host_event_destroy,
    .event_record = host_event_record,
    .event_sync = host_event_sync,
    .event_elapsed_ms = host_event_elapsed_ms,
    .stream_wait_event = host_stream_wait_event,
    .launch = host_launch,
    .launch_scale = host_launch_scale,
    .launch_host_func = host_launch_host_func,
};

const hal_ops_t *host_ops_table(void) { return &host_ops; }
