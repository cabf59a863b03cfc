/* Logging with levels and subsystems (MSCCLPP_DEBUG, MSCCLPP_DEBUG_SUBSYS, MSCCLPP_DEBUG_FILE). */
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "base/config.h"
#include "base/debug.h"

static pthread_once_t once = PTHREAD_ONCE_INIT;
static log_level_t level = LOG_WARN;
static unsigned subsys_mask = SUBSYS_ALL;
static FILE *out;
static pthread_mutex_t out_lock = PTHREAD_MUTEX_INITIALIZER;
static char host[64];

static void open_file(const char *pattern)
{
    char path[512];
    size_t n = 0;
    for (const char *p = pattern; *p && n + 32 < sizeof path; p++) {
        if (p[0] == '%' && p[1] == 'h') {
            n += (size_t)snprintf(path + n, sizeof path - n, "%s", host);
            p++;
        } else if (p[0] == '%' && p[1] == 'p') {
            n += (size_t)snprintf(path + n, sizeof path - n, "%d", (int)getpid());
            p++;
        } else {
            path[n++] = *p;
        }
    }
    path[n] = '\0';
    FILE *f = fopen(path, "a");
    if (f) {
        setvbuf(f, NULL, _IOLBF, 0);
        out = f;
    }
}

/*
 * fork() copies out_lock as it is: a child forked while another thread was logging would wait
 * for it forever at its first log line. Hold it across fork so that both sides get it free.
 */
static void fork_prepare(void) { pthread_mutex_lock(&out_lock); }
static void fork_release(void) { pthread_mutex_unlock(&out_lock); }

static void init(void)
{
    pthread_atfork(fork_prepare, fork_release, fork_release);
    gethostname(host, sizeof host - 1);
    /* base/config.c parses both; a bad value gives the default, and a warning below */
    level = (log_level_t)config_get_int(CFG_MSCCLPP_DEBUG);
    subsys_mask = (unsigned)config_get_int(CFG_MSCCLPP_DEBUG_SUBSYS);
    out = stderr;
    const char *f = config_get(CFG_MSCCLPP_DEBUG_FILE);
    if (*f) open_file(f);
    if (*f && out == stderr && level >= LOG_WARN)
        fprintf(out, "%s:%d MSCCLPP WARN cannot open MSCCLPP_DEBUG_FILE=\"%s\"; logging to "
                "stderr\n", host, (int)getpid(), f);
    /* Logging variables only warn when bad (base/config_vars.h); printed here, not through
     * WARN, since this runs inside the logger's one-time setup. */
    static const config_id_t vars[] = {CFG_MSCCLPP_DEBUG, CFG_MSCCLPP_DEBUG_SUBSYS};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
        char why[256];
        if (level >= LOG_WARN && config_invalid(vars[i], why, sizeof why))
            fprintf(out, "%s:%d MSCCLPP WARN %s; using the default %s\n", host, (int)getpid(),
                    why, config_table()[vars[i]].def);
    }
}

int log_enabled(log_level_t lv, log_subsys_t subsys)
{
    pthread_once(&once, init);
    return lv <= level && (subsys & subsys_mask) != 0;
}

void log_printf(log_level_t lv, log_subsys_t subsys, const char *file, int line, const char *fmt,
                ...)
{
    (void)subsys;
    static const char *names[] = {"NONE", "WARN", "INFO", "TRACE"};
    char msg[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    /* where: "file.c:LINE " inside the library; nothing for mscclpp_log()'s callers (file NULL) */
    char where[128] = "";
    if (file) {
        const char *base = strrchr(file, '/');
        snprintf(where, sizeof where, "%s:%d ", base ? base + 1 : file, line);
    }
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    pthread_mutex_lock(&out_lock);
    fprintf(out, "%s:%d [%ld.%06ld] MSCCLPP %s %s%s\n", host, (int)getpid(),
            (long)(ts.tv_sec % 100000), ts.tv_nsec / 1000, names[lv], where, msg);
    fflush(out);
    pthread_mutex_unlock(&out_lock);
}

MSCCLPP_API int mscclpp_log_enabled(mscclpp_log_level_t lv)
{
    return lv >= MSCCLPP_LOG_WARN && lv <= MSCCLPP_LOG_TRACE &&
           log_enabled((log_level_t)lv, SUBSYS_NCCL);
}

MSCCLPP_API void mscclpp_log(mscclpp_log_level_t lv, const char *fmt, ...)
{
    if (!fmt || !mscclpp_log_enabled(lv)) return;
    char msg[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    log_printf((log_level_t)lv, SUBSYS_NCCL, NULL, 0, "%s", msg);
}
