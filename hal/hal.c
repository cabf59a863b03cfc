/*
 * Backend selection: the built-in host backend and the modules configure listed
 * (MSCCLPP_HAL_MODULES), each loaded with dlopen from the module directory and initialized at
 * most once per process. hal_get() caches one choice; hal_select() chooses without caching.
 *
 * "hipnv" is the HIP module built a second way, against HIP's NVIDIA platform (hal/hipnv): its
 * table is named "hip" and it is the HIP backend on an NVIDIA GPU. MSCCLPP_HAL=hip takes it when
 * the AMD build finds no device; the default order never does (on NVIDIA the CUDA backend is
 * the one to use: hipnv exists to run the HIP code on a GPU we have, docs/gpu.md).
 */
#include <dlfcn.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <stdarg.h>
#include <stddef.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "base/config.h"
#include "base/debug.h"
#include "base/services.h"
#include "base/self.h"
#include "hal/hal.h"
#include "hal/host/host.h"

#ifndef MSCCLPP_HAL_MODULES
#define MSCCLPP_HAL_MODULES ""
#endif
#ifndef MSCCLPP_HAL_MODULE_DIR
#define MSCCLPP_HAL_MODULE_DIR ""
#endif

#define HAL_MAX_BACKENDS 8
#define HAL_NAME_MAX 16

/* One backend we know of, with the outcome of its (single) load + init + device count. */
typedef struct {
    char name[HAL_NAME_MAX];
    char path[512];
    bool tried;
    mscclpp_result_t status;
    char error[512];
    int devices;
    const hal_ops_t *ops;
    char build[256]; /* the module's mscclpp_hal_module_build(), "" without one */
    hal_module_counts_fn counts; /* its mscclpp_hal_module_counts, or NULL */
} hal_backend_t;

/* vsnprintf: the messages are truncated on purpose when paths are long. */
static void set_error(hal_backend_t *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void set_error(hal_backend_t *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(b->error, sizeof b->error, fmt, ap);
    va_end(ap);
}

static pthread_mutex_t backends_lock = PTHREAD_MUTEX_INITIALIZER;
static hal_backend_t backends[HAL_MAX_BACKENDS];
static int nbackends;

static bool valid_name(const char *name)
{
    size_t n = strlen(name);
    if (n == 0 || n >= HAL_NAME_MAX) return false;
    for (size_t i = 0; i < n; i++) {
        char c = name[i];
        if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_')) return false;
    }
    return true;
}

/* The HIP module built for NVIDIA GPUs: a second build of "hip", not a backend of its own. */
#define HAL_HIPNV "hipnv"

/* Names of the configured modules in order (at most cap). */
static int module_names(char names[][HAL_NAME_MAX], int cap)
{
    const char *p = MSCCLPP_HAL_MODULES;
    int n = 0;
    while (*p && n < cap) {
        while (*p == ' ') p++;
        size_t len = strcspn(p, " ");
        if (len > 0 && len < HAL_NAME_MAX) {
            memcpy(names[n], p, len);
            names[n][len] = '\0';
            if (strcmp(names[n], "host") != 0) n++;
        }
        p += len;
    }
    return n;
}

static bool module_built(const char *name)
{
    char names[HAL_MAX_BACKENDS][HAL_NAME_MAX];
    int n = module_names(names, HAL_MAX_BACKENDS);
    for (int i = 0; i < n; i++)
        if (!strcmp(names[i], name)) return true;
    return false;
}

/* Known backend names: host, cuda, hip and whatever configure listed. */
static bool known_name(const char *name)
{
    if (!strcmp(name, "host") || !strcmp(name, "cuda") || !strcmp(name, "hip")) return true;
    return module_built(name);
}

/* Called with backends_lock held. */
static hal_backend_t *backend_slot(const char *name)
{
    for (int i = 0; i < nbackends; i++)
        if (!strcmp(backends[i].name, name)) return &backends[i];
    if (nbackends == HAL_MAX_BACKENDS) return NULL;
    hal_backend_t *b = &backends[nbackends++];
    memset(b, 0, sizeof *b);
    snprintf(b->name, sizeof b->name, "%s", name);
    return b;
}

static void module_path(const char *name, char *path, size_t cap)
{
    const char *dir = config_get(CFG_MSCCLPP_HAL_MODULE_DIR);
    if (!dir[0]) dir = self_build_module_dir(); /* an uninstalled build: its own .libs */
    if (!dir[0]) dir = MSCCLPP_HAL_MODULE_DIR;
    if (dir[0]) snprintf(path, cap, "%s/libmscclpp-hal-%s.so", dir, name);
    else snprintf(path, cap, "libmscclpp-hal-%s.so", name); /* the dynamic loader's search */
}

/* dlopen + entry + table check; the message goes to b->error. Lock held. */
/* ---- the table check (hal.h): every module's table before it is used -------------------- */

typedef void (*hal_any_fn)(void);

static const struct {
    const char *name;
    size_t offset;
} slots[] = {
#define HAL_SLOT_ENTRY_(slot, params, args) {#slot, offsetof(hal_ops_t, slot)},
    HAL_OPS_SLOTS(HAL_SLOT_ENTRY_)
#undef HAL_SLOT_ENTRY_
    {"fini", offsetof(hal_ops_t, fini)},
};

/* Every function slot is listed once: the table is its header plus the slots, nothing else. */
#define HAL_NSLOTS_ (sizeof(slots) / sizeof(slots[0]))
_Static_assert(sizeof(hal_ops_t) == offsetof(hal_ops_t, init) + HAL_NSLOTS_ * sizeof(hal_any_fn),
               "HAL_OPS_SLOTS does not list every function slot of hal_ops_t");

mscclpp_result_t hal_ops_check(const hal_ops_t *ops, const char **bad)
{
    const char *what = NULL;
    if (!ops) what = "table";
    else if (ops->size < sizeof(hal_ops_t)) what = "size";
    else if (ops->abi_version != HAL_ABI_VERSION) what = "abi_version";
    else if (!ops->name || !ops->name[0]) what = "name";
    for (size_t i = 0; !what && i < sizeof(slots) / sizeof(slots[0]); i++) {
        hal_any_fn fn;
        memcpy(&fn, (const char *)ops + slots[i].offset, sizeof fn);
        if (!fn) what = slots[i].name;
    }
    if (bad) *bad = what;
    if (!what) return MSCCLPP_OK;
    if (!ops) return ERR_ARG("HAL table: NULL");
    if (!strcmp(what, "size"))
        return ERR_ARG("HAL table of backend '%s': size %zu is smaller than %zu (older module)",
                       ops->name ? ops->name : "?", ops->size, sizeof(hal_ops_t));
    if (!strcmp(what, "abi_version"))
        return ERR_ARG("HAL table of backend '%s': abi_version %d, expected %d",
                       ops->name ? ops->name : "?", ops->abi_version, HAL_ABI_VERSION);
    if (!strcmp(what, "name")) return ERR_ARG("HAL table: no backend name");
    return ERR_ARG("HAL table of backend '%s': slot %s is NULL", ops->name, what);
}

static mscclpp_result_t module_load(hal_backend_t *b)
{
    module_path(b->name, b->path, sizeof b->path);
    void *handle = dlopen(b->path, RTLD_NOW | RTLD_LOCAL);
    if (!handle) {
        const char *why = dlerror();
        set_error(b, "cannot load %s: %s", b->path, why ? why : "?");
        return MSCCLPP_ERR_UNSUPPORTED;
    }
    /* Hand over the base services first: the module logs, records errors and reads variables
     * through them from its first call on (base/services.h). */
    base_services_bind_fn bind;
    void *bind_sym = dlsym(handle, BASE_SERVICES_BIND);
    memcpy(&bind, &bind_sym, sizeof bind);
    if (!bind_sym) {
        set_error(b, "%s has no symbol %s: it was built for an older library (base services "
                  "version 0, this library has %d); rebuild the module", b->path,
                  BASE_SERVICES_BIND, BASE_SERVICES_VERSION);
        dlclose(handle);
        return MSCCLPP_ERR_UNSUPPORTED;
    }
    int version = bind(base_services());
    if (version != BASE_SERVICES_VERSION) {
        set_error(b, "%s was built against base services version %d, this library has %d; "
                  "rebuild the module", b->path, version, BASE_SERVICES_VERSION);
        dlclose(handle);
        return MSCCLPP_ERR_UNSUPPORTED;
    }
    hal_module_entry_fn entry;
    void *sym = dlsym(handle, HAL_MODULE_ENTRY);
    memcpy(&entry, &sym, sizeof entry);
    if (!sym) {
        set_error(b, "%s has no symbol %s", b->path, HAL_MODULE_ENTRY);
        dlclose(handle);
        return MSCCLPP_ERR_UNSUPPORTED;
    }
    const hal_ops_t *ops = entry();
    const char *bad = NULL;
    if (!ops || hal_ops_check(ops, &bad) != MSCCLPP_OK) {
        set_error(b, "%s: invalid HAL table (%s: %s)", b->path,
                 bad ? bad : "NULL", mscclpp_last_error());
        dlclose(handle);
        return MSCCLPP_ERR_UNSUPPORTED;
    }
    /* optional: what the module was built for (mscclpp-info; HIP on AMD or on NVIDIA) */
    hal_module_build_fn build;
    void *build_sym = dlsym(handle, HAL_MODULE_BUILD);
    memcpy(&build, &build_sym, sizeof build);
    const char *text = build_sym ? build() : NULL;
    snprintf(b->build, sizeof b->build, "%s", text ? text : "");
    void *counts_sym = dlsym(handle, HAL_MODULE_COUNTS); /* optional too */
    memcpy(&b->counts, &counts_sym, sizeof b->counts);
    /* Never dlclose a loaded module: it may own threads and driver state until exit. */
    b->ops = ops;
    return MSCCLPP_OK;
}

/* Load (modules), init and count devices, once per backend. Lock held. */
static void backend_try(hal_backend_t *b)
{
    if (b->tried) return;
    b->tried = true;
    b->status = MSCCLPP_OK;
    if (!strcmp(b->name, "host")) {
        snprintf(b->path, sizeof b->path, "(built in)");
        b->ops = host_ops_table();
    } else {
        b->status = module_load(b);
        if (b->status != MSCCLPP_OK) {
            INFO(SUBSYS_HAL, "backend %s: %s", b->name, b->error);
            return;
        }
    }
    mscclpp_result_t res = b->ops->init();
    if (res == MSCCLPP_OK) res = b->ops->device_count(&b->devices);
    if (res != MSCCLPP_OK) {
        b->status = res;
        b->devices = 0;
        const char *why = mscclpp_last_error(); /* modules record theirs here too */
        set_error(b, "%s (%s): init failed: %s", b->name, b->path, why && *why ? why : "?");
        core_clear_error();
        INFO(SUBSYS_HAL, "backend %s: %s", b->name, b->error);
        return;
    }
    INFO(SUBSYS_HAL, "backend %s (%s): %d device(s)", b->name, b->path, b->devices);
}

/* Why a tried backend cannot be used (status and devices of its one try). */
static void unusable_why(const hal_backend_t *b, char *why, size_t cap)
{
    if (b->status != MSCCLPP_OK) snprintf(why, cap, "backend unavailable: %s", b->error);
    else snprintf(why, cap, "backend %s found no device", b->path);
}

static mscclpp_result_t select_forced(const char *name, const hal_ops_t **ops)
{
    if (!valid_name(name) || !known_name(name))
        return ERR(MSCCLPP_ERR_UNSUPPORTED,
                   "MSCCLPP_HAL=%s: unknown backend (known: host, cuda, hip; modules built: %s)",
                   name, MSCCLPP_HAL_MODULES[0] ? MSCCLPP_HAL_MODULES : "none");
    /* hip: the AMD build, then the NVIDIA one (hipnv) when it was built */
    const char *tries[2] = {name, NULL};
    if (!strcmp(name, "hip") && module_built(HAL_HIPNV)) tries[1] = HAL_HIPNV;
    char why[2][600] = {"", ""};
    for (int t = 0; t < 2 && tries[t]; t++) {
        pthread_mutex_lock(&backends_lock);
        hal_backend_t *b = backend_slot(tries[t]);
        if (!b) {
            pthread_mutex_unlock(&backends_lock);
            return ERR(MSCCLPP_ERR_INTERNAL, "MSCCLPP_HAL=%s: too many backends", name);
        }
        backend_try(b);
        hal_backend_t copy = *b;
        pthread_mutex_unlock(&backends_lock);
        if (copy.status == MSCCLPP_OK && copy.devices >= 1) {
            *ops = copy.ops;
            return MSCCLPP_OK;
        }
        unusable_why(&copy, why[t], sizeof why[t]);
    }
    if (tries[1])
        return ERR(MSCCLPP_ERR_UNSUPPORTED,
                   "MSCCLPP_HAL=%s: neither HIP build is usable: AMD: %s; "
                   "NVIDIA (%s): %s",
                   name, why[0], tries[1], why[1]);
    return ERR(MSCCLPP_ERR_UNSUPPORTED, "MSCCLPP_HAL=%s: %s", name, why[0]);
}

mscclpp_result_t hal_select(const char *name, const hal_ops_t **ops)
{
    CHECK_ARG(ops != NULL);
    if (name && name[0]) return select_forced(name, ops);

    char names[HAL_MAX_BACKENDS][HAL_NAME_MAX];
    int n = module_names(names, HAL_MAX_BACKENDS - 1);
    const hal_ops_t *chosen = NULL;
    pthread_mutex_lock(&backends_lock);
    for (int i = 0; i < n && !chosen; i++) {
        if (!strcmp(names[i], HAL_HIPNV)) continue; /* only when asked for (MSCCLPP_HAL=hip) */
        hal_backend_t *b = backend_slot(names[i]);
        if (!b) break;
        backend_try(b);
        if (b->status == MSCCLPP_OK && b->devices > 0) chosen = b->ops;
    }
    char host_error[sizeof backends[0].error] = "";
    if (!chosen) {
        hal_backend_t *b = backend_slot("host");
        if (b) {
            backend_try(b);
            if (b->status == MSCCLPP_OK && b->devices > 0) chosen = b->ops;
            else snprintf(host_error, sizeof host_error, "%s", b->error);
        }
    }
    pthread_mutex_unlock(&backends_lock);
    if (!chosen)
        return ERR(MSCCLPP_ERR_UNSUPPORTED, "no usable backend (tried: %s%shost: %s)",
                   MSCCLPP_HAL_MODULES, MSCCLPP_HAL_MODULES[0] ? " " : "", host_error);
    INFO(SUBSYS_HAL, "selected backend %s", chosen->name);
    *ops = chosen;
    return MSCCLPP_OK;
}

/* ---- counting (hal.h: hal_count_enable) -------------------------------------------------- */

/* One backend is counted: the first one wrapped. count_real is set once, under count_lock, and
 * read without it afterwards (acquire): hal_host_ops() reads it at every call. */
static atomic_bool count_on;
static pthread_mutex_t count_lock = PTHREAD_MUTEX_INITIALIZER;
static const hal_ops_t *_Atomic count_real;
static _Atomic uint64_t count_calls[HAL_NSLOTS_];

enum {
#define HAL_COUNT_INDEX_(slot, params, args) COUNT_##slot,
    HAL_OPS_SLOTS(HAL_COUNT_INDEX_)
#undef HAL_COUNT_INDEX_
    COUNT_fini,
};
_Static_assert(COUNT_fini + 1 == HAL_NSLOTS_, "the counted slots are the table's slots");

static const hal_ops_t *counted(int slot)
{
    atomic_fetch_add_explicit(&count_calls[slot], 1, memory_order_relaxed);
    return atomic_load_explicit(&count_real, memory_order_acquire);
}

#define HAL_COUNT_FN_(slot, params, args) \
    static mscclpp_result_t count_##slot params { return counted(COUNT_##slot)->slot args; }
HAL_OPS_SLOTS(HAL_COUNT_FN_)
#undef HAL_COUNT_FN_
static void count_fini(void) { counted(COUNT_fini)->fini(); }

static hal_ops_t count_ops = {
    .size = sizeof(hal_ops_t),
    .abi_version = HAL_ABI_VERSION,
#define HAL_COUNT_SLOT_(slot, params, args) .slot = count_##slot,
    HAL_OPS_SLOTS(HAL_COUNT_SLOT_)
#undef HAL_COUNT_SLOT_
    .fini = count_fini,
};

void hal_count_enable(void) { atomic_store(&count_on, true); }

int hal_count_slots(void) { return (int)HAL_NSLOTS_; }

const char *hal_count_slot_name(int i)
{
    return i >= 0 && i < (int)HAL_NSLOTS_ ? slots[i].name : "?";
}

void hal_count_read(uint64_t *counts)
{
    for (size_t i = 0; i < HAL_NSLOTS_; i++)
        counts[i] = atomic_load_explicit(&count_calls[i], memory_order_relaxed);
}

static atomic_bool count_print_on; /* MSCCLPP_HAL_COUNT=1: hal_count_report prints */

int hal_count_module(const char **names, uint64_t *counts, int cap)
{
    const hal_ops_t *real = atomic_load(&count_real);
    hal_module_counts_fn mc = NULL;
    pthread_mutex_lock(&backends_lock);
    for (int i = 0; real && i < nbackends; i++)
        if (backends[i].tried && backends[i].ops == real) mc = backends[i].counts;
    pthread_mutex_unlock(&backends_lock);
    return mc ? mc(names, counts, cap) : 0;
}

static void count_print_line(const char *when)
{
    const hal_ops_t *real = atomic_load(&count_real);
    if (!real) return;
    char line[2048];
    int len = snprintf(line, sizeof line, "mscclpp: HAL operations of pid %d (backend %s) %s:",
                       (int)getpid(), real->name, when);
    for (size_t i = 0; i < HAL_NSLOTS_ && len < (int)sizeof line; i++) {
        uint64_t n = atomic_load(&count_calls[i]);
        if (n) len += snprintf(line + len, sizeof line - (size_t)len, " %s=%llu", slots[i].name,
                               (unsigned long long)n);
    }
    fprintf(stderr, "%s\n", line);
    /* the counted module's own counts of its driver calls (HAL_MODULE_COUNTS), if it keeps any */
    const char *names[32];
    uint64_t counts[32];
    int n = hal_count_module(names, counts, 32);
    if (n <= 0) return;
    len = snprintf(line, sizeof line, "mscclpp: driver calls of pid %d (backend %s) %s:",
                   (int)getpid(), real->name, when);
    for (int i = 0; i < n && i < 32 && len < (int)sizeof line; i++)
        len += snprintf(line + len, sizeof line - (size_t)len, " %s=%llu", names[i],
                        (unsigned long long)counts[i]);
    fprintf(stderr, "%s\n", line);
}

static void count_print(void) { count_print_line("at exit"); }

void hal_count_report(const char *when)
{
    if (atomic_load(&count_print_on)) count_print_line(when);
}

const hal_ops_t *hal_count_wrap(const hal_ops_t *real)
{
    if (!real || real == &count_ops || !atomic_load(&count_on)) return real;
    pthread_mutex_lock(&count_lock);
    if (!atomic_load(&count_real)) {
        count_ops.name = real->name;
        atomic_store_explicit(&count_real, real, memory_order_release);
    }
    pthread_mutex_unlock(&count_lock);
    return atomic_load(&count_real) == real ? &count_ops : real;
}

/* hal_host_ops' answer: the counting table when the host backend is the one counted. */
static const hal_ops_t *count_host(const hal_ops_t *host)
{
    return atomic_load_explicit(&count_real, memory_order_acquire) == host ? &count_ops : host;
}

const hal_ops_t *hal_host_ops(void) { return count_host(host_ops_table()); }

static pthread_once_t get_once = PTHREAD_ONCE_INIT;
static const hal_ops_t *get_ops;
static mscclpp_result_t get_result;
static char get_error[512];

static void get_select(void)
{
    /* The first call that needs a device refuses a bad MSCCLPP_* value (base/config_vars.h)
     * instead of running with a default the user did not ask for. */
    get_result = config_check();
    if (get_result == MSCCLPP_OK) get_result = hal_select(config_get(CFG_MSCCLPP_HAL), &get_ops);
    if (get_result == MSCCLPP_OK && config_get_int(CFG_MSCCLPP_HAL_COUNT) > 0) {
        hal_count_enable();
        atomic_store(&count_print_on, true);
        atexit(count_print);
    }
    if (get_result == MSCCLPP_OK) get_ops = hal_count_wrap(get_ops);
    if (get_result != MSCCLPP_OK) snprintf(get_error, sizeof get_error, "%s", mscclpp_last_error());
}

mscclpp_result_t hal_get(const hal_ops_t **ops)
{
    CHECK_ARG(ops != NULL);
    pthread_once(&get_once, get_select);
    /* Every caller, in any thread, sees the selection's error message (logged once). */
    if (get_result != MSCCLPP_OK) return core_error_quiet(get_result, "%s", get_error);
    *ops = get_ops;
    return MSCCLPP_OK;
}

int hal_list_backends(hal_backend_info_t *out, int cap)
{
    char names[HAL_MAX_BACKENDS][HAL_NAME_MAX];
    int n = module_names(names, HAL_MAX_BACKENDS - 1);
    snprintf(names[n++], HAL_NAME_MAX, "host");
    int count = 0;
    pthread_mutex_lock(&backends_lock);
    for (int i = 0; i < n; i++) {
        hal_backend_t *b = backend_slot(names[i]);
        if (!b) break;
        backend_try(b);
        if (out && count < cap) {
            out[count].name = b->name;
            out[count].path = b->path;
            out[count].status = b->status;
            out[count].error = b->error;
            out[count].devices = b->devices;
            out[count].build = b->build;
        }
        count++;
    }
    pthread_mutex_unlock(&backends_lock);
    return count;
}

const char *hal_backend_build(const hal_ops_t *ops)
{
    const char *text = "";
    pthread_mutex_lock(&backends_lock);
    for (int i = 0; i < nbackends; i++)
        if (backends[i].tried && backends[i].ops == ops) text = backends[i].build;
    pthread_mutex_unlock(&backends_lock);
    return text;
}
