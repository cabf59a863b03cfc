# tests/fuzz/boot.mk: the bootstrap parser fuzz target and its seeded runner (a bounded
# FUZZ_BOOT_SECONDS, default 20 s, run of make check). tests/fuzz/fuzz_boot_libfuzzer.sh builds
# the same target with clang's libFuzzer where that is installed.
EXTRA_DIST += tests/fuzz/fuzz_boot_corpus.py tests/fuzz/fuzz_boot_libfuzzer.sh \
	tests/fuzz/boot-corpus
check_PROGRAMS += tests/fuzz/fuzz_boot
TESTS += tests/fuzz/fuzz_boot
tests_fuzz_fuzz_boot_SOURCES = tests/fuzz/fuzz_boot.c tests/fuzz/fuzz_boot_main.c
tests_fuzz_fuzz_boot_LDADD = $(MSCCLPP_INTERNAL_LIBS) $(JANSSON_LIBS) -ldl
TESTS += tests/fuzz/fuzz_boot_libfuzzer.sh
