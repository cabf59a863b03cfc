/*
 * Where the running library lives: an installed copy, or the build folder it was made in
 * (<builddir>/.libs, as libtool leaves it, where the build tree's programs - the libtool wrappers
 * of ./build/tools/... and the tests - load it from). An uninstalled build reads its plans from
 * the source tree and its backend modules from the build folder, so that the README's commands
 * run straight from a fresh build; an installed library never reads either.
 */
#ifndef MSCCLPP_BASE_SELF_H
#define MSCCLPP_BASE_SELF_H

#include <stdbool.h>

#ifdef __cplusplus
extern "C" {
#endif

/** True when this library was loaded from the build folder it was made in (its file sits in
 * <abs_top_builddir>/.libs, symbolic links resolved). False for an installed copy, a static
 * link, or a build outside automake (no build folder compiled in). */
bool self_in_build_tree(void);
/** The source tree's plans/ when self_in_build_tree(), else "". */
const char *self_build_plan_dir(void);
/** The build folder's .libs (where the backend modules are) when self_in_build_tree(), else "". */
const char *self_build_module_dir(void);

#ifdef __cplusplus
}
#endif

#endif
