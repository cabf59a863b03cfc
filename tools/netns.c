/* Network + UTS namespaces as nodes for forked launchers (tools/netns.h). */
#define _GNU_SOURCE
#include "tools/netns.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/wait.h>
#include <unistd.h>

/* The network device `name` exists in this namespace. */
static int access_link(const char *name)
{
    char path[64];
    snprintf(path, sizeof path, "/sys/class/net/%s", name);
    return access(path, F_OK) == 0;
}

/* Run `ip ARGS...` quietly; 0 when it exits 0. */
static int ip_cmd(const char *fmt, ...)
{
    char line[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    char *argv[32];
    int argc = 0;
    argv[argc++] = "ip";
    for (char *save = NULL, *t = strtok_r(line, " ", &save); t && argc < 31;
         t = strtok_r(NULL, " ", &save))
        argv[argc++] = t;
    argv[argc] = NULL;
    pid_t pid = fork();
    if (pid < 0) return -1;
    if (pid == 0) {
        int fd = open("/dev/null", O_WRONLY);
        if (fd >= 0) {
            dup2(fd, 1);
            dup2(fd, 2);
        }
        execvp("ip", argv);
        _exit(127);
    }
    int st = 0;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {}
    return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : -1;
}

int netns_create(int nodes, netns_t *ns, char *why, size_t cap)
{
    memset(ns, 0, sizeof *ns);
    if (nodes < 1 || nodes > NETNS_MAX_NODES) {
        snprintf(why, cap, "%d nodes (1..%d)", nodes, NETNS_MAX_NODES);
        return -1;
    }
    if (geteuid() != 0) {
        snprintf(why, cap, "network namespaces need root (euid %d)", (int)geteuid());
        return -1;
    }
    if (ip_cmd("-V") != 0) {
        snprintf(why, cap, "the `ip` command (iproute2) is not installed");
        return -1;
    }
    int pid = (int)getpid();
    ns->nodes = nodes;
    ns->subnet = 20 + pid % 200;
    /* every name carries the whole pid (pid_max is at most 2^22: 7 digits, within IFNAMSIZ),
     * so that netns_sweep can tell whose leftovers they are */
    snprintf(ns->bridge, sizeof ns->bridge, "mbr%d", pid);
    if (ip_cmd("link add %s type bridge", ns->bridge) != 0) {
        snprintf(why, cap, "ip link add %s type bridge failed", ns->bridge);
        return -1;
    }
    ns->made_bridge = 1;
    if (ip_cmd("addr add 10.77.%d.254/24 dev %s", ns->subnet, ns->bridge) != 0 ||
        ip_cmd("link set %s up", ns->bridge) != 0) {
        snprintf(why, cap, "cannot configure bridge %s", ns->bridge);
        goto fail;
    }
    for (int k = 0; k < nodes; k++) {
        const char *peer = ns->peer[k];
        snprintf(ns->ns[k], sizeof ns->ns[k], "mscclpp-%d-n%d", pid, k);
        snprintf(ns->veth[k], sizeof ns->veth[k], "mv%dn%d", pid, k);
        snprintf(ns->peer[k], sizeof ns->peer[k], "mp%dn%d", pid, k);
        if (ip_cmd("netns add %s", ns->ns[k]) != 0) {
            snprintf(why, cap, "ip netns add %s failed", ns->ns[k]);
            goto fail;
        }
        ns->made[k] = 1;
        if (ip_cmd("link add %s type veth peer name %s", ns->veth[k], peer) != 0 ||
            ip_cmd("link set %s netns %s", ns->veth[k], ns->ns[k]) != 0 ||
            ip_cmd("link set %s master %s", peer, ns->bridge) != 0 ||
            ip_cmd("link set %s up", peer) != 0 ||
            ip_cmd("netns exec %s ip addr add 10.77.%d.%d/24 dev %s", ns->ns[k], ns->subnet, k + 1,
                   ns->veth[k]) != 0 ||
            ip_cmd("netns exec %s ip link set %s up", ns->ns[k], ns->veth[k]) != 0 ||
            ip_cmd("netns exec %s ip link set lo up", ns->ns[k]) != 0) {
            snprintf(why, cap, "cannot wire namespace %s (veth %s)", ns->ns[k], ns->veth[k]);
            goto fail;
        }
    }
    return 0;
fail:
    netns_destroy(ns);
    return -1;
}

int netns_enter(const netns_t *ns, int k, char *why, size_t cap)
{
    char path[128];
    snprintf(path, sizeof path, "/var/run/netns/%s", ns->ns[k]);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0 || setns(fd, CLONE_NEWNET) != 0) {
        snprintf(why, cap, "cannot enter %s: %s", path, strerror(errno));
        if (fd >= 0) close(fd);
        return -1;
    }
    close(fd);
    /* as `ip netns exec` does: a private mount namespace with this network namespace's sysfs,
     * where UCX looks for network devices */
    if (unshare(CLONE_NEWNS) != 0 || mount("", "/", NULL, MS_SLAVE | MS_REC, NULL) != 0) {
        snprintf(why, cap, "cannot make a mount namespace: %s", strerror(errno));
        return -1;
    }
    umount2("/sys", MNT_DETACH);
    if (mount(ns->ns[k], "/sys", "sysfs", 0, NULL) != 0) {
        snprintf(why, cap, "cannot mount sysfs for %s: %s", ns->ns[k], strerror(errno));
        return -1;
    }
    char host[64];
    snprintf(host, sizeof host, "mscclpp-node%d", k);
    if (unshare(CLONE_NEWUTS) != 0 || sethostname(host, strlen(host)) != 0) {
        snprintf(why, cap, "cannot set host name %s in a new UTS namespace: %s", host,
                 strerror(errno));
        return -1;
    }
    /* this node's traffic goes over its veth: the bootstrap listens there, and UCX uses it
     * (over tcp, unless the caller chose UCX_TLS: namespaces share /dev/shm) */
    setenv("MSCCLPP_SOCKET_IFNAME", ns->veth[k], 1);
    setenv("UCX_NET_DEVICES", ns->veth[k], 1);
    if (!getenv("UCX_TLS")) setenv("UCX_TLS", "tcp,self", 1);
    return 0;
}

void netns_destroy(netns_t *ns)
{
    /* The veth pairs first, from this namespace's end: deleting one end takes the other at
     * once, while a deleted namespace's devices go only when the kernel gets to it (the ends
     * on the bridge were still listed right after `ip netns del`). */
    for (int k = 0; k < ns->nodes; k++)
        if (ns->peer[k][0] && access_link(ns->peer[k])) ip_cmd("link del %s", ns->peer[k]);
    for (int k = 0; k < ns->nodes; k++)
        if (ns->made[k]) {
            ip_cmd("netns del %s", ns->ns[k]);
            ns->made[k] = 0;
        }
    /* a pair whose move into the namespace failed is still here */
    for (int k = 0; k < ns->nodes; k++)
        if (ns->veth[k][0] && access_link(ns->veth[k])) ip_cmd("link del %s", ns->veth[k]);
    if (ns->made_bridge) ip_cmd("link del %s", ns->bridge);
    ns->made_bridge = 0;
}

/* "<prefix><pid><rest>": the pid, or 0 when `name` is not of that form */
static int name_pid(const char *name, const char *prefix, const char *rest_start)
{
    size_t n = strlen(prefix);
    if (strncmp(name, prefix, n) != 0) return 0;
    char *end = NULL;
    long pid = strtol(name + n, &end, 10);
    if (end == name + n || pid <= 0 || pid > 4194304) return 0;
    if (rest_start ? strncmp(end, rest_start, strlen(rest_start)) != 0 : *end != '\0') return 0;
    return (int)pid;
}

/* The launcher that made these names is gone (its pid is free, or now another process's that
 * is not a launcher of ours: then the leftovers stay, harmless, until that pid is free too). */
static int pid_dead(int pid) { return kill((pid_t)pid, 0) != 0 && errno == ESRCH; }

int netns_sweep(void)
{
    if (geteuid() != 0) return 0;
    int removed = 0;
    /* veth ends and bridges first (deleting an end takes the pair at once), then namespaces */
    DIR *d = opendir("/sys/class/net");
    struct dirent *e;
    while (d && (e = readdir(d))) {
        int pid = name_pid(e->d_name, "mp", "n");
        if (!pid) pid = name_pid(e->d_name, "mv", "n");
        if (!pid) pid = name_pid(e->d_name, "mbr", NULL);
        if (pid && pid_dead(pid) && ip_cmd("link del %s", e->d_name) == 0) removed++;
    }
    if (d) closedir(d);
    d = opendir("/var/run/netns");
    while (d && (e = readdir(d))) {
        int pid = name_pid(e->d_name, "mscclpp-", "-n");
        if (pid && pid_dead(pid) && ip_cmd("netns del %s", e->d_name) == 0) removed++;
    }
    if (d) closedir(d);
    return removed;
}

/* ---- launcher helpers ---------------------------------------------------------------------- */

static netns_t launch_ns;
static int launch_nodes, launch_np, launch_mode; /* 0 none, 1 namespaces, 2 forced node ids */
static int launch_size[NETNS_MAX_NODES];         /* ranks per node, node-major */

int netns_split(const char *spec, int np, int *sizes, int *nodes)
{
    /* "K": np ranks as K nodes, the first np % K one rank larger; "a+b+c": those sizes */
    char *end;
    long k = strtol(spec, &end, 10);
    if (!*end && end != spec) {
        if (k < 1 || k > NETNS_MAX_NODES || (np && k > np)) return -1;
        for (int i = 0; i < k; i++) sizes[i] = np ? np / (int)k + (i < np % (int)k) : 0;
        *nodes = (int)k;
        return 0;
    }
    int n = 0;
    for (const char *q = spec; *q;) {
        long v = strtol(q, &end, 10);
        if (end == q || v < 1 || v > 1 << 16 || n == NETNS_MAX_NODES) return -1;
        sizes[n++] = (int)v;
        if (*end == '+') end++;
        else if (*end) return -1;
        q = end;
    }
    *nodes = n;
    return n ? 0 : -1;
}

int netns_launch_layout(const int *sizes, int nodes, int np)
{
    int sum = 0;
    for (int k = 0; k < nodes && k < NETNS_MAX_NODES; k++) sum += sizes[k];
    if (nodes < 1 || nodes > NETNS_MAX_NODES || sum != np) {
        fprintf(stderr, "mscclpp: node sizes add up to %d ranks, not %d\n", sum, np);
        return -1;
    }
    for (int k = 0; k < nodes; k++) launch_size[k] = sizes[k];
    launch_nodes = nodes;
    launch_np = np;
    launch_mode = 0;
    if (nodes <= 1) return 0;
    int swept = netns_sweep();
    if (swept)
        fprintf(stderr,
                "mscclpp: removed %d namespaces and links left behind by launchers that "
                "are gone\n",
                swept);
    char why[256];
    if (netns_create(nodes, &launch_ns, why, sizeof why) == 0) {
        char ifname[16];
        snprintf(ifname, sizeof ifname, "%s", launch_ns.bridge);
        setenv("MSCCLPP_SOCKET_IFNAME", ifname, 1); /* the root listens on the bridge */
        launch_mode = 1;
        fprintf(stderr, "mscclpp: %d ranks as %d nodes: network namespaces %s..%s on bridge %s "
                        "(10.77.%d.0/24)\n", np, nodes, launch_ns.ns[0], launch_ns.ns[nodes - 1],
                launch_ns.bridge, launch_ns.subnet);
        return 0;
    }
    fprintf(stderr, "mscclpp: cannot make network namespaces (%s); falling back to a forced "
                    "node id per rank (MSCCLPP_NODE_ID): ranks of different nodes still share "
                    "this host's network stack and shared memory\n", why);
    launch_mode = 2;
    return 0;
}

int netns_launch_setup(int nodes, int np)
{
    int sizes[NETNS_MAX_NODES];
    if (nodes <= 1) {
        launch_nodes = nodes;
        launch_np = np;
        launch_mode = 0;
        return 0;
    }
    if (nodes > NETNS_MAX_NODES || nodes > np) return -1;
    for (int k = 0; k < nodes; k++) sizes[k] = np / nodes + (k < np % nodes);
    return netns_launch_layout(sizes, nodes, np);
}

int netns_launch_enter(int rank)
{
    if (launch_nodes <= 1 || launch_mode == 0) return 0;
    int node = 0;
    for (int first = 0; node < launch_nodes - 1 && rank >= first + launch_size[node]; node++)
        first += launch_size[node];
    if (launch_mode == 2) {
        char id[32];
        snprintf(id, sizeof id, "forced-node-%d", node);
        setenv("MSCCLPP_NODE_ID", id, 1);
        return 0;
    }
    char why[256];
    if (netns_enter(&launch_ns, node, why, sizeof why) != 0) {
        fprintf(stderr, "mscclpp: rank %d: %s\n", rank, why);
        return -1;
    }
    return 0;
}

void netns_launch_cleanup(void)
{
    if (launch_mode == 1) netns_destroy(&launch_ns);
    launch_mode = 0;
}
