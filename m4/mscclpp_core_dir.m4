# MSCCLPP_CORE_DIR_SAFE_RM
# ------------------------
# Autoconf's tests clean up after themselves with "rm -f core conftest..." (a stale core dump),
# and its exit trap runs "rm -f core *.core ... && rm -rf conftest* confdefs.h". In a build tree
# "core" is our object folder (core/), so each of those prints "rm: cannot remove 'core': Is a
# directory", and the failing first rm of the trap leaves confdefs.h behind. Shadow rm with a
# shell function that drops a "core" operand while core is a directory; everything else goes to
# the real rm unchanged. A function (not an alias) also covers libtool's $RM and the exit trap,
# which runs after this point. Expanded right after AC_INIT, before the first compiler test.
AC_DEFUN([MSCCLPP_CORE_DIR_SAFE_RM], [
rm ()
{
    for mscclpp_rm_arg do
        shift
        if test "x$mscclpp_rm_arg" = xcore && test -d core; then :; else
            set -- "$[@]" "$mscclpp_rm_arg"
        fi
    done
    command rm "$[@]"
}
])
