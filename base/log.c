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

static const struct {
    const char *name;
    unsigned bit;
} subsys_names[] = {
    {"INIT", SUBSYS_INIT}, {"BOOT", SUBSYS_BOOT}, {"HAL", SUBSYS_HAL},   {"MEM", SUBSYS_MEM},
    {"CHAN", SUBSYS_CHAN}, {"PLAN", SUBSYS_PLAN}, {"EXEC", SUBSYS_EXEC}, {"KERN", SUBSYS_KERN},
    {"NET", SUBSYS_NET},   {"BENCH", SUBSYS_BENCH}, {"ALL", SUBSYS_ALL},
};

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

static void init(void)
{
    gethostname(host, sizeof host - 1);
    const char *lv = config_get(CFG_MSCCLPP_DEBUG);
    if (!strcasecmp(lv, "NONE")) level = LOG_NONE;
    else if (!strcasecmp(lv, "INFO")) level = LOG_INFO;
    else if (!strcasecmp(lv, "TRACE")) level = LOG_TRACE;
    else level = LOG_WARN;

    const char *ss = config_get(CFG_MSCCLPP_DEBUG_SUBSYS);
    if (*ss) {
        unsigned mask = 0;
        char buf[256];
        snprintf(buf, sizeof buf, "%s", ss);
        for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok;
             tok = strtok_r(NULL, ",", &save)) {
            int neg = tok[0] == '^';
            for (size_t i = 0; i < sizeof subsys_names / sizeof subsys_names[0]; i++)
                if (!strcasecmp(tok + neg, subsys_names[i].name)) {
                    if (neg) mask = (mask ? mask : SUBSYS_ALL) & ~subsys_names[i].bit;
                    else mask |= subsys_names[i].bit;
                }
        }
        subsys_mask = mask ? mask : SUBSYS_ALL;
    }
    out = stderr;
    const char *f = config_get(CFG_MSCCLPP_DEBUG_FILE);
    if (*f) open_file(f);
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
    const char *base = strrchr(file, '/');
    base = base ? base + 1 : file;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    pthread_mutex_lock(&out_lock);
    fprintf(out, "%s:%d [%ld.%06ld] MSCCLPP %s %s:%d %s\n", host, (int)getpid(),
            (long)(ts.tv_sec % 100000), ts.tv_nsec / 1000, names[lv], base, line, msg);
    fflush(out);
    pthread_mutex_unlock(&out_lock);
}
