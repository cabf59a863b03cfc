/*
 * Host backend memory: every allocation is a memfd mapped MAP_SHARED. Shareable allocations
 * (mem_alloc_shareable, what mscclpp_malloc returns) keep their memfd open so that they can be
 * handed to another process (host_share.c), and the fd broker serves that same descriptor (no
 * dup). Plain device and host-mapped allocations are never exported (as on CUDA and HIP), so
 * their memfd is closed once mapped: a process holding many contexts does not run out of
 * descriptors (issue 22 item 6). A registry, sorted by base address, maps any interior pointer
 * to its allocation, for our own allocations and for imported mappings.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "base/debug.h"
#include "hal/host/host.h"

typedef enum {
    ALLOC_DEVICE = 0,    /* mem_alloc */
    ALLOC_SHAREABLE = 1, /* mem_alloc_shareable */
    ALLOC_HOST = 2,      /* host_alloc */
    ALLOC_IMPORTED = 3,  /* mapping of another process's allocation */
} alloc_kind_t;

static const char *const kind_names[] = {"device", "shareable", "host", "imported"};

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
    return alloc_memfd(bytes, ALLOC_DEVICE, ptr);
}

mscclpp_result_t host_mem_alloc_shareable(size_t bytes, void **ptr)
{
    CHECK_ARG(ptr != NULL);
    CHECK_ARG(bytes > 0);
    return alloc_memfd(bytes, ALLOC_SHAREABLE, ptr);
}

mscclpp_result_t host_host_alloc(size_t bytes, void **ptr)
{
    CHECK_ARG(ptr != NULL);
    CHECK_ARG(bytes > 0);
    return alloc_memfd(bytes, ALLOC_HOST, ptr);
}

/* Unmap and close an entry already removed from the registry (outside the lock). */
static void release(host_alloc_t entry)
{
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
    if (a->kind == ALLOC_IMPORTED || (a->kind == ALLOC_HOST) != host) {
        alloc_kind_t kind = a->kind;
        pthread_mutex_unlock(&reg_lock);
        return ERR_ARG("%s(%p): the pointer is %s memory (use %s)", who, ptr, kind_names[kind],
                       kind == ALLOC_IMPORTED ? "mem_unimport"
                       : kind == ALLOC_HOST   ? "host_free"
                                              : "mem_free");
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

mscclpp_result_t host_mem_free(void *ptr) { return free_kind(ptr, false, "mem_free"); }
mscclpp_result_t host_host_free(void *ptr) { return free_kind(ptr, true, "host_free"); }

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
    if (bytes) memmove(dst, src, bytes);
    return MSCCLPP_OK;
}

mscclpp_result_t host_memset_sync(void *dst, int value, size_t bytes)
{
    CHECK_ARG(bytes == 0 || dst != NULL);
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
    if (a->kind != ALLOC_SHAREABLE) {
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
