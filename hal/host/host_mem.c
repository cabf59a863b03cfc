/*
 * Host backend memory: every allocation is a memfd mapped MAP_SHARED. Shareable allocations
 * (mem_alloc_shareable, what mscclpp_malloc returns) keep their memfd open so that they can be
 * handed to another process (host_share.c), and the fd broker serves that same descriptor (no
 * dup). Plain device and host-mapped allocations are never exported (as on CUDA and HIP), so
 * their memfd is closed once mapped: a process holding many contexts does not run out of
 * descriptors (issue 22 item 6). A registry, sorted by base address, maps any interior pointer
 * to its allocation, for our own allocations and for imported mappings.
 *
 * Foreign memory (mem_info): a shared file mapping the application made itself (a memfd or a
 * /dev/shm file mapped MAP_SHARED from offset 0) is found in /proc/self/maps, its file opened
 * again (/proc/self/map_files, else the process's fd table, else its path) and entered in the
 * registry as "foreign": from then on it is exported like our own shareable memory (the broker
 * serves that descriptor), and it is never unmapped by us. Each mem_info call checks that the
 * mapping is still the same file (one stat of /proc/self/map_files when permitted, else a read
 * of /proc/self/maps); a mapping replaced at the same address gets a new entry and a new id.
 * Private memory (malloc, the stack) cannot be shared: mem_info reports it unknown, and
 * remembers the private ranges it saw so that probing them again costs no /proc read.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <stdio.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "base/debug.h"
#include "hal/host/host.h"

typedef enum {
    ALLOC_DEVICE = 0,    /* mem_alloc */
    ALLOC_SHAREABLE = 1, /* mem_alloc_shareable */
    ALLOC_HOST = 2,      /* host_alloc */
    ALLOC_IMPORTED = 3,  /* mapping of another process's allocation */
    ALLOC_FOREIGN = 4,   /* the application's own shared file mapping (mem_info) */
} alloc_kind_t;

static const char *const kind_names[] = {"device", "shareable", "host", "imported", "foreign"};

typedef struct {
    uintptr_t base;
    size_t size;    /* bytes asked for */
    size_t map_len; /* mapped: size rounded up to pages */
    int fd;         /* memfd (own allocations), -1 for imports */
    alloc_kind_t kind;
    uint64_t id;    /* own: our id; imported: the exporter's broker key */
    uint8_t cookie[HOST_COOKIE_BYTES]; /* imported: the exporter's broker secret */
    hal_fdb_ticket_t ticket;           /* own, exported: what the broker serves its memfd as */
    bool exported;
    bool freed;     /* own allocation freed while self-imports still hold it */
    int refs;       /* own: self-imports; imported: imports */
    pid_t pid;      /* imported: the exporter */
    dev_t dev;      /* foreign: the mapped file, to tell a replaced mapping apart */
    ino_t ino;
} host_alloc_t;

static pthread_mutex_t reg_lock = PTHREAD_MUTEX_INITIALIZER;
static host_alloc_t *reg;
static size_t reg_count, reg_cap;
static uint64_t reg_next_id = 1;

/* Keep the registry consistent across fork(): no thread can hold the lock at the fork. */
static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;
static void reg_prepare(void) { pthread_mutex_lock(&reg_lock); }
static void reg_release(void) { pthread_mutex_unlock(&reg_lock); }
static void reg_atfork(void) { pthread_atfork(reg_prepare, reg_release, reg_release); }

size_t host_page_size(void)
{
    static _Atomic size_t page;
    size_t p = atomic_load_explicit(&page, memory_order_relaxed);
    if (!p) {
        long v = sysconf(_SC_PAGESIZE);
        p = v > 0 ? (size_t)v : 4096;
        atomic_store_explicit(&page, p, memory_order_relaxed);
    }
    return p;
}

size_t host_round_pages(size_t bytes)
{
    size_t page = host_page_size();
    if (bytes > SIZE_MAX - page) return 0;
    return (bytes + page - 1) / page * page;
}

/* Index of the first entry with base > addr. Lock held. */
static size_t reg_upper(uintptr_t addr)
{
    size_t lo = 0, hi = reg_count;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (reg[mid].base <= addr) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

/* Entry containing addr, or NULL. Lock held. */
static host_alloc_t *reg_find(uintptr_t addr)
{
    size_t i = reg_upper(addr);
    if (i == 0) return NULL;
    host_alloc_t *a = &reg[i - 1];
    /* A zero-byte tail would never match; sizes are > 0. */
    return addr - a->base < a->size ? a : NULL;
}

static host_alloc_t *reg_find_base(uintptr_t base)
{
    host_alloc_t *a = reg_find(base);
    return a && a->base == base ? a : NULL;
}

/* Exported by this process: the broker here serves it (after fork() the parent's does). */
static bool served_here(const host_alloc_t *a)
{
    return a->exported && a->ticket.pid == (uint32_t)getpid();
}

static mscclpp_result_t reg_insert(const host_alloc_t *entry)
{
    if (reg_count == reg_cap) {
        size_t cap = reg_cap ? reg_cap * 2 : 64;
        host_alloc_t *n = realloc(reg, cap * sizeof *n);
        if (!n) return ERR(MSCCLPP_ERR_NO_MEMORY, "host memory registry: out of memory");
        reg = n;
        reg_cap = cap;
    }
    size_t i = reg_upper(entry->base);
    memmove(&reg[i + 1], &reg[i], (reg_count - i) * sizeof *reg);
    reg[i] = *entry;
    reg_count++;
    return MSCCLPP_OK;
}

static void reg_remove(host_alloc_t *a)
{
    size_t i = (size_t)(a - reg);
    memmove(&reg[i], &reg[i + 1], (reg_count - i - 1) * sizeof *reg);
    reg_count--;
}

static mscclpp_result_t alloc_memfd(size_t bytes, alloc_kind_t kind, void **ptr)
{
    pthread_once(&atfork_once, reg_atfork);
    size_t map_len = host_round_pages(bytes);
    if (map_len == 0) return ERR_ARG("host %s allocation of %zu bytes: too large", kind_names[kind],
                                     bytes);
    mscclpp_result_t res = MSCCLPP_OK;
    int fd = memfd_create("mscclpp", MFD_CLOEXEC);
    if (fd < 0)
        return ERR(errno == ENOMEM ? MSCCLPP_ERR_NO_MEMORY : MSCCLPP_ERR_SYSTEM,
                   "memfd_create for %zu bytes: %m", bytes);
    if (ftruncate(fd, (off_t)map_len) != 0) {
        res = ERR(errno == ENOSPC || errno == EFBIG ? MSCCLPP_ERR_NO_MEMORY : MSCCLPP_ERR_SYSTEM,
                  "ftruncate of a memfd to %zu bytes: %m", map_len);
        goto close_fd;
    }
    void *p = mmap(NULL, map_len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) {
        res = ERR(errno == ENOMEM ? MSCCLPP_ERR_NO_MEMORY : MSCCLPP_ERR_SYSTEM,
                  "mmap of a %zu-byte memfd: %m", map_len);
        goto close_fd;
    }
    if (kind != ALLOC_SHAREABLE) {
        close(fd); /* the mapping keeps the memory; nothing will export it */
        fd = -1;
    }
    host_alloc_t entry = {.base = (uintptr_t)p, .size = bytes, .map_len = map_len, .fd = fd,
                          .kind = kind};
    pthread_mutex_lock(&reg_lock);
    entry.id = reg_next_id++;
    res = reg_insert(&entry);
    pthread_mutex_unlock(&reg_lock);
    if (res != MSCCLPP_OK) goto unmap;
    TRACE(SUBSYS_MEM, "host %s alloc %p, %zu bytes (fd %d)", kind_names[kind], p, bytes, fd);
    *ptr = p;
    return MSCCLPP_OK;
unmap:
    munmap(p, map_len);
close_fd:
    if (fd >= 0) close(fd);
    return res;
}

mscclpp_result_t host_mem_alloc(size_t bytes, void **ptr)
{
    CHECK_ARG(ptr != NULL);
    CHECK_ARG(bytes > 0);
    CHECK(host_check_call("mem_alloc", "a device memory allocation"));
    return alloc_memfd(bytes, ALLOC_DEVICE, ptr);
}

mscclpp_result_t host_mem_alloc_shareable(size_t bytes, void **ptr)
{
    CHECK_ARG(ptr != NULL);
    CHECK_ARG(bytes > 0);
    CHECK(host_check_call("mem_alloc_shareable", "a device memory allocation"));
    return alloc_memfd(bytes, ALLOC_SHAREABLE, ptr);
}

mscclpp_result_t host_host_alloc(size_t bytes, void **ptr)
{
    CHECK_ARG(ptr != NULL);
    CHECK_ARG(bytes > 0);
    CHECK(host_check_call("host_alloc", "a page-locked host memory allocation"));
    return alloc_memfd(bytes, ALLOC_HOST, ptr);
}

/* Unmap and close an entry already removed from the registry (outside the lock). */
static void release(host_alloc_t entry)
{
    if (entry.kind == ALLOC_FOREIGN) { /* the application's mapping: only our fd goes */
        if (entry.fd >= 0) close(entry.fd);
        return;
    }
    if (munmap((void *)entry.base, entry.map_len) != 0)
        WARN(SUBSYS_MEM, "munmap of %p (%zu bytes): %m", (void *)entry.base, entry.map_len);
    if (entry.fd >= 0) close(entry.fd);
}

static mscclpp_result_t free_kind(void *ptr, bool host, const char *who)
{
    CHECK_ARG(ptr != NULL);
    pthread_mutex_lock(&reg_lock);
    host_alloc_t *a = reg_find_base((uintptr_t)ptr);
    if (!a || a->freed) {
        pthread_mutex_unlock(&reg_lock);
        return ERR_ARG("%s(%p): not the base of a live host-backend allocation", who, ptr);
    }
    if (a->kind == ALLOC_IMPORTED || a->kind == ALLOC_FOREIGN || (a->kind == ALLOC_HOST) != host) {
        alloc_kind_t kind = a->kind;
        pthread_mutex_unlock(&reg_lock);
        return ERR_ARG("%s(%p): the pointer is %s memory (%s)", who, ptr, kind_names[kind],
                       kind == ALLOC_IMPORTED  ? "use mem_unimport"
                       : kind == ALLOC_FOREIGN ? "the application's own mapping: unmap it"
                       : kind == ALLOC_HOST    ? "use host_free"
                                               : "use mem_free");
    }
    /* Freeing stops the broker serving it (withdrawn outside our lock: no lock nesting). */
    bool withdraw = served_here(a);
    uint64_t key = a->ticket.key;
    a->exported = false;
    if (a->refs > 0) {
        /* Self-imports still use the mapping: the last mem_unimport releases it. */
        a->freed = true;
        pthread_mutex_unlock(&reg_lock);
        if (withdraw) hal_fdb_withdraw(key);
        return MSCCLPP_OK;
    }
    host_alloc_t entry = *a;
    reg_remove(a);
    pthread_mutex_unlock(&reg_lock);
    if (withdraw) hal_fdb_withdraw(key);
    release(entry);
    return MSCCLPP_OK;
}

mscclpp_result_t host_mem_free(void *ptr)
{
    CHECK(host_check_call("mem_free", "freeing device memory waits for the device"));
    return free_kind(ptr, false, "mem_free");
}

mscclpp_result_t host_host_free(void *ptr)
{
    CHECK(host_check_call("host_free", "freeing page-locked memory waits for the device"));
    return free_kind(ptr, true, "host_free");
}

bool host_reg_known(const void *p)
{
    pthread_mutex_lock(&reg_lock);
    bool known = reg_find((uintptr_t)p) != NULL;
    pthread_mutex_unlock(&reg_lock);
    return known;
}

mscclpp_result_t host_mem_range(const void *ptr, void **base, size_t *size)
{
    CHECK_ARG(ptr != NULL);
    CHECK_ARG(base != NULL || size != NULL);
    pthread_mutex_lock(&reg_lock);
    host_alloc_t *a = reg_find((uintptr_t)ptr);
    uintptr_t b = a ? a->base : 0;
    size_t n = a ? a->size : 0;
    pthread_mutex_unlock(&reg_lock);
    if (!a) return ERR_ARG("mem_range(%p): not inside any host-backend allocation", ptr);
    if (base) *base = (void *)b;
    if (size) *size = n;
    return MSCCLPP_OK;
}

mscclpp_result_t host_memcpy_sync(void *dst, const void *src, size_t bytes)
{
    CHECK_ARG(bytes == 0 || (dst != NULL && src != NULL));
    CHECK(host_check_call("memcpy_sync", "a copy on the NULL stream, which on CUDA waits for the "
                          "kernel's stream"));
    if (bytes) memmove(dst, src, bytes);
    return MSCCLPP_OK;
}

mscclpp_result_t host_memset_sync(void *dst, int value, size_t bytes)
{
    CHECK_ARG(bytes == 0 || dst != NULL);
    CHECK(host_check_call("memset_sync", "a device memory set on the NULL stream"));
    if (bytes) memset(dst, value, bytes);
    return MSCCLPP_OK;
}

mscclpp_result_t host_reg_export(void *base, host_export_t *ex, int *memfd)
{
    pthread_mutex_lock(&reg_lock);
    host_alloc_t *a = reg_find_base((uintptr_t)base);
    if (!a || a->freed || a->kind == ALLOC_IMPORTED) {
        bool imported = a && a->kind == ALLOC_IMPORTED;
        pthread_mutex_unlock(&reg_lock);
        if (imported)
            return ERR_ARG("mem_export(%p): imported memory cannot be exported again", base);
        return ERR_ARG("mem_export(%p): not the base of a live host-backend allocation", base);
    }
    if (a->kind != ALLOC_SHAREABLE && a->kind != ALLOC_FOREIGN) {
        alloc_kind_t kind = a->kind;
        pthread_mutex_unlock(&reg_lock);
        return ERR_ARG("mem_export(%p): %s memory cannot be exported; allocate it with "
                       "mem_alloc_shareable (mscclpp_malloc)",
                       base, kind_names[kind]);
    }
    ex->id = a->id;
    ex->size = a->size;
    /* served_here: one ticket per export lifetime, the same handle again; else the memfd
     * itself, which the broker borrows (it stays open until mem_free, after the withdraw) */
    *memfd = -1;
    if (served_here(a)) ex->ticket = a->ticket;
    else *memfd = a->fd;
    pthread_mutex_unlock(&reg_lock);
    return MSCCLPP_OK;
}

mscclpp_result_t host_reg_set_export(void *base, host_export_t *ex, bool *superseded)
{
    pthread_mutex_lock(&reg_lock);
    host_alloc_t *a = reg_find_base((uintptr_t)base);
    if (!a || a->freed || a->kind == ALLOC_IMPORTED || a->id != ex->id) {
        pthread_mutex_unlock(&reg_lock);
        return ERR_ARG("mem_export(%p): the allocation was freed while being exported", base);
    }
    *superseded = served_here(a);
    if (*superseded) {
        ex->ticket = a->ticket;
    } else {
        a->ticket = ex->ticket;
        a->exported = true;
    }
    pthread_mutex_unlock(&reg_lock);
    return MSCCLPP_OK;
}

static bool cookie_equal(const uint8_t *a, const uint8_t *b)
{
    uint8_t diff = 0; /* constant time: do not leak how many bytes matched */
    for (int i = 0; i < HOST_COOKIE_BYTES; i++) diff |= (uint8_t)(a[i] ^ b[i]);
    return diff == 0;
}

/* Own allocation this process serves under broker key `key`, or NULL. Lock held. */
static host_alloc_t *reg_find_export(uint64_t key)
{
    for (size_t i = 0; i < reg_count; i++)
        if (reg[i].kind != ALLOC_IMPORTED && served_here(&reg[i]) && reg[i].ticket.key == key)
            return &reg[i];
    return NULL;
}

mscclpp_result_t host_reg_self_import(uint64_t key, const uint8_t cookie[HOST_COOKIE_BYTES],
                                      void **base)
{
    pthread_mutex_lock(&reg_lock);
    host_alloc_t *a = reg_find_export(key);
    if (!a) {
        pthread_mutex_unlock(&reg_lock);
        return ERR(MSCCLPP_ERR_REMOTE,
                   "mem_import: this process no longer exports the allocation of key %llu "
                   "(freed?)",
                   (unsigned long long)key);
    }
    if (!cookie_equal(a->ticket.secret, cookie)) {
        pthread_mutex_unlock(&reg_lock);
        return ERR(MSCCLPP_ERR_REMOTE,
                   "mem_import: broker key %llu refused: the handle's cookie does not match",
                   (unsigned long long)key);
    }
    a->refs++;
    *base = (void *)a->base;
    pthread_mutex_unlock(&reg_lock);
    return MSCCLPP_OK;
}

bool host_reg_find_import(pid_t pid, uint64_t id, const uint8_t cookie[HOST_COOKIE_BYTES],
                          void **base)
{
    bool found = false;
    pthread_mutex_lock(&reg_lock);
    for (size_t i = 0; i < reg_count && !found; i++) {
        host_alloc_t *a = &reg[i];
        if (a->kind == ALLOC_IMPORTED && a->pid == pid && a->id == id &&
            cookie_equal(a->cookie, cookie)) {
            a->refs++;
            *base = (void *)a->base;
            found = true;
        }
    }
    pthread_mutex_unlock(&reg_lock);
    return found;
}

mscclpp_result_t host_reg_add_import(void *base, size_t size, size_t map_len, pid_t pid,
                                     uint64_t id, const uint8_t cookie[HOST_COOKIE_BYTES])
{
    pthread_once(&atfork_once, reg_atfork);
    host_alloc_t entry = {.base = (uintptr_t)base, .size = size, .map_len = map_len, .fd = -1,
                          .kind = ALLOC_IMPORTED, .id = id, .refs = 1, .pid = pid};
    memcpy(entry.cookie, cookie, HOST_COOKIE_BYTES);
    pthread_mutex_lock(&reg_lock);
    mscclpp_result_t res = reg_insert(&entry);
    pthread_mutex_unlock(&reg_lock);
    return res;
}

mscclpp_result_t host_mem_unimport(void *base)
{
    CHECK_ARG(base != NULL);
    CHECK(host_check_call("mem_unimport", "unmapping a peer's memory"));
    pthread_mutex_lock(&reg_lock);
    host_alloc_t *a = reg_find_base((uintptr_t)base);
    if (!a || a->refs == 0) {
        pthread_mutex_unlock(&reg_lock);
        return ERR_ARG("mem_unimport(%p): not the base of an imported allocation", base);
    }
    if (--a->refs > 0 || (a->kind != ALLOC_IMPORTED && !a->freed)) {
        pthread_mutex_unlock(&reg_lock);
        return MSCCLPP_OK;
    }
    host_alloc_t entry = *a;
    reg_remove(a);
    pthread_mutex_unlock(&reg_lock);
    release(entry);
    return MSCCLPP_OK;
}

/* ---- mem_info: our allocations, imports, and the application's shared mappings ------------ */

/* One line of /proc/self/maps. */
typedef struct {
    uintptr_t start, end;
    char perms[8];
    unsigned long long offset, ino;
    unsigned maj, min;
    char path[256];
} map_line_t;

/* Private ranges seen by mem_info (ring, under reg_lock): probing them again reads no /proc. A
 * stale range only makes memory mapped there later look private, which callers treat as memory
 * to stage: safe. */
#define PRIV_RANGES 32
static struct {
    uintptr_t start, end;
} priv_ranges[PRIV_RANGES];
static int priv_next;

static bool priv_known(uintptr_t p)
{
    for (int i = 0; i < PRIV_RANGES; i++)
        if (p >= priv_ranges[i].start && p < priv_ranges[i].end) return true;
    return false;
}

/* The mapping of this process that contains addr (false when none, or /proc is unreadable). */
static bool maps_find(uintptr_t addr, map_line_t *m)
{
    FILE *f = fopen("/proc/self/maps", "re");
    if (!f) return false;
    char line[512];
    bool found = false;
    while (!found && fgets(line, sizeof line, f)) {
        unsigned long s, e;
        int pos = 0;
        memset(m, 0, sizeof *m);
        if (sscanf(line, "%lx-%lx %7s %llx %x:%x %llu %n", &s, &e, m->perms, &m->offset, &m->maj,
                   &m->min, &m->ino, &pos) < 7)
            continue;
        if (addr < s || addr >= e) continue;
        m->start = s;
        m->end = e;
        if (pos > 0) {
            size_t n = strcspn(line + pos, "\n");
            snprintf(m->path, sizeof m->path, "%.*s", (int)n, line + pos);
        }
        found = true;
    }
    fclose(f);
    return found;
}

static bool same_file(int fd, dev_t dev, ino_t ino, size_t bytes)
{
    struct stat st;
    return fstat(fd, &st) == 0 && st.st_dev == dev && st.st_ino == ino &&
           (uint64_t)st.st_size >= bytes;
}

/* A descriptor of the file mapped as m, opened read-write, or -1: through /proc/self/map_files
 * (needs CAP_SYS_ADMIN or CAP_CHECKPOINT_RESTORE), else a descriptor the process still holds,
 * else the file's path while it has one. */
static int foreign_open(const map_line_t *m)
{
    dev_t dev = makedev(m->maj, m->min);
    size_t bytes = m->end - m->start;
    char path[320];
    snprintf(path, sizeof path, "/proc/self/map_files/%lx-%lx", (unsigned long)m->start,
             (unsigned long)m->end);
    int fd = open(path, O_RDWR | O_CLOEXEC);
    if (fd >= 0 && same_file(fd, dev, (ino_t)m->ino, bytes)) return fd;
    if (fd >= 0) close(fd);
    DIR *d = opendir("/proc/self/fd");
    if (d) {
        struct dirent *e;
        int self = dirfd(d);
        while ((e = readdir(d))) {
            char *end = NULL;
            long n = strtol(e->d_name, &end, 10);
            if (!end || *end || n < 0 || n == self) continue;
            if (!same_file((int)n, dev, (ino_t)m->ino, bytes)) continue;
            snprintf(path, sizeof path, "/proc/self/fd/%ld", n);
            fd = open(path, O_RDWR | O_CLOEXEC); /* a new description, read-write */
            if (fd >= 0 && same_file(fd, dev, (ino_t)m->ino, bytes)) break;
            if (fd >= 0) close(fd);
            fd = -1;
        }
        closedir(d);
        if (fd >= 0) return fd;
    }
    if (m->path[0] == '/' && !strstr(m->path, " (deleted)")) {
        fd = open(m->path, O_RDWR | O_CLOEXEC);
        if (fd >= 0 && same_file(fd, dev, (ino_t)m->ino, bytes)) return fd;
        if (fd >= 0) close(fd);
    }
    return -1;
}

/* Whether the foreign entry still describes the mapping at its address. */
static bool foreign_current(uintptr_t base, size_t len, dev_t dev, ino_t ino)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/self/map_files/%lx-%lx", (unsigned long)base,
             (unsigned long)(base + len));
    struct stat st;
    if (stat(path, &st) == 0) return st.st_dev == dev && st.st_ino == ino;
    if (errno == ENOENT) return false; /* no mapping with exactly this range any more */
    map_line_t m;
    return maps_find(base, &m) && m.start == base && m.end == base + len && m.perms[3] == 's' &&
           makedev(m.maj, m.min) == dev && (ino_t)m.ino == ino;
}

/* Drop a foreign entry that no longer describes its mapping (if it is still the entry `id`). */
static void foreign_drop(uintptr_t base, uint64_t id)
{
    pthread_mutex_lock(&reg_lock);
    host_alloc_t *a = reg_find_base(base);
    if (!a || a->kind != ALLOC_FOREIGN || a->id != id) {
        pthread_mutex_unlock(&reg_lock);
        return;
    }
    bool withdraw = served_here(a);
    uint64_t key = a->ticket.key;
    host_alloc_t entry = *a;
    reg_remove(a);
    pthread_mutex_unlock(&reg_lock);
    if (withdraw) hal_fdb_withdraw(key);
    TRACE(SUBSYS_MEM, "host: foreign mapping %p (%zu bytes) is gone or replaced", (void *)base,
          entry.size);
    release(entry);
}

/* Drop foreign entries whose mappings are gone: each holds a descriptor that keeps the file's
 * memory alive. Run before adopting another mapping (rarely: once per new mapping). */
static void foreign_sweep(void)
{
    for (;;) {
        uintptr_t base = 0;
        uint64_t id = 0;
        size_t len = 0;
        dev_t dev = 0;
        ino_t ino = 0;
        bool stale = false;
        pthread_mutex_lock(&reg_lock);
        size_t n = reg_count;
        pthread_mutex_unlock(&reg_lock);
        for (size_t i = 0; i < n && !stale; i++) {
            pthread_mutex_lock(&reg_lock);
            bool have = i < reg_count && reg[i].kind == ALLOC_FOREIGN;
            if (have) {
                base = reg[i].base;
                id = reg[i].id;
                len = reg[i].map_len;
                dev = reg[i].dev;
                ino = reg[i].ino;
            }
            pthread_mutex_unlock(&reg_lock);
            stale = have && !foreign_current(base, len, dev, ino);
        }
        if (!stale) return;
        foreign_drop(base, id);
    }
}

/* Adopt the application's shared mapping m (found by mem_info). */
static mscclpp_result_t foreign_adopt(const map_line_t *m, int fd)
{
    host_alloc_t entry = {.base = m->start, .size = m->end - m->start,
                          .map_len = m->end - m->start, .fd = fd, .kind = ALLOC_FOREIGN,
                          .dev = makedev(m->maj, m->min), .ino = (ino_t)m->ino};
    pthread_once(&atfork_once, reg_atfork);
    pthread_mutex_lock(&reg_lock);
    mscclpp_result_t res = MSCCLPP_OK;
    if (reg_find(m->start)) { /* another thread was first */
        pthread_mutex_unlock(&reg_lock);
        close(fd);
        return MSCCLPP_OK;
    }
    entry.id = reg_next_id++;
    res = reg_insert(&entry);
    pthread_mutex_unlock(&reg_lock);
    if (res != MSCCLPP_OK) {
        close(fd);
        return res;
    }
    TRACE(SUBSYS_MEM, "host: adopted the application's mapping %p (%zu bytes, %s)",
          (void *)m->start, entry.size, m->path);
    return MSCCLPP_OK;
}

mscclpp_result_t host_mem_info(const void *ptr, hal_mem_info_t *info)
{
    CHECK_ARG(ptr != NULL);
    CHECK_ARG(info != NULL);
    memset(info, 0, sizeof *info);
    uintptr_t p = (uintptr_t)ptr;
    for (int attempt = 0; attempt < 3; attempt++) {
        pthread_mutex_lock(&reg_lock);
        host_alloc_t *a = reg_find(p);
        if (a && a->freed) a = NULL; /* freed by the application: nothing to use */
        if (a && a->kind != ALLOC_FOREIGN) {
            info->base = (void *)a->base;
            info->size = a->size;
            info->id = a->id | (a->kind == ALLOC_IMPORTED ? 1ull << 63 : 0);
            info->shareable = a->kind == ALLOC_SHAREABLE; /* the others keep no memfd */
            pthread_mutex_unlock(&reg_lock);
            return MSCCLPP_OK;
        }
        if (a) {
            host_alloc_t copy = *a;
            pthread_mutex_unlock(&reg_lock);
            if (foreign_current(copy.base, copy.map_len, copy.dev, copy.ino)) {
                info->base = (void *)copy.base;
                info->size = copy.size;
                info->id = copy.id;
                info->shareable = true;
                info->foreign = true;
                return MSCCLPP_OK;
            }
            foreign_drop(copy.base, copy.id);
            continue;
        }
        bool priv = priv_known(p);
        pthread_mutex_unlock(&reg_lock);
        if (priv) return MSCCLPP_OK;
        map_line_t m;
        if (!maps_find(p, &m)) return MSCCLPP_OK;
        if (m.perms[3] != 's' || m.perms[0] != 'r' || m.perms[1] != 'w' || m.offset != 0 ||
            m.ino == 0) {
            if (m.perms[3] != 's') {
                pthread_mutex_lock(&reg_lock);
                priv_ranges[priv_next].start = m.start;
                priv_ranges[priv_next].end = m.end;
                priv_next = (priv_next + 1) % PRIV_RANGES;
                pthread_mutex_unlock(&reg_lock);
            }
            return MSCCLPP_OK;
        }
        foreign_sweep();
        int fd = foreign_open(&m);
        if (fd < 0) {
            TRACE(SUBSYS_MEM, "host: cannot reopen the file mapped at %p (%s): not shareable",
                  ptr, m.path);
            return MSCCLPP_OK;
        }
        CHECK(foreign_adopt(&m, fd));
    }
    return MSCCLPP_OK; /* the mapping kept changing under us: treat it as unknown */
}
