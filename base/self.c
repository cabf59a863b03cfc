/* Where the running library lives (base/self.h). */
#define _GNU_SOURCE
#include "base/self.h"

#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/* Compiled in by Makefile.am: the build folder's .libs and the source tree's plans/. */
#ifndef MSCCLPP_BUILD_LIBDIR
#define MSCCLPP_BUILD_LIBDIR ""
#endif
#ifndef MSCCLPP_SRC_PLAN_DIR
#define MSCCLPP_SRC_PLAN_DIR ""
#endif

static pthread_once_t self_once = PTHREAD_ONCE_INIT;
static bool self_built;

/* The folder of the file this function was loaded from equals the build's .libs. */
static void self_find(void)
{
    Dl_info info;
    char file[PATH_MAX], libs[PATH_MAX];
    if (!MSCCLPP_BUILD_LIBDIR[0]) return;
    if (!dladdr((void *)&self_find, &info) || !info.dli_fname || !info.dli_fname[0]) return;
    if (!realpath(info.dli_fname, file) || !realpath(MSCCLPP_BUILD_LIBDIR, libs)) return;
    char exe[PATH_MAX];
    bool in_program = realpath("/proc/self/exe", exe) && strcmp(file, exe) == 0;
    char *slash = strrchr(file, '/');
    if (!slash) return;
    *slash = '\0';
    self_built = strcmp(file, libs) == 0;
    if (self_built || !in_program) return;
    /* a static link puts this code into the program itself: an installed program reads
     * installed paths only; one still in the build folder (a tool of the build, such as
     * mscclpp-info, linked with the library's objects) is the build's, as its libmscclpp.so */
    size_t n = strlen(libs);
    if (n < 6 || strcmp(libs + n - 6, "/.libs")) return;
    libs[n - 5] = '\0'; /* the build folder, with its slash */
    self_built = strncmp(exe, libs, n - 5) == 0;
}

bool self_in_build_tree(void)
{
    pthread_once(&self_once, self_find);
    return self_built;
}

const char *self_build_plan_dir(void)
{
    return self_in_build_tree() ? MSCCLPP_SRC_PLAN_DIR : "";
}

const char *self_build_module_dir(void)
{
    return self_in_build_tree() ? MSCCLPP_BUILD_LIBDIR : "";
}
