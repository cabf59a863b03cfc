# tests/install/: configure + install to another prefix + a pkg-config user program (TAP).
# It builds its own small tree (no GPU backends) in a temporary folder: a few minutes.
TESTS += tests/install/test_install.sh
EXTRA_DIST += tests/install/test_install.sh tests/install/user_program.c
