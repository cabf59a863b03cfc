# tests/fuzz/: the plan-loader fuzz target (issue 8). fuzz_plan.sh builds tests/fuzz/fuzz_plan.c
# with the loader sources (libFuzzer + ASan/UBSan when clang has them, else a seeded mutation
# runner) and runs it for FUZZ_PLAN_SECONDS (20) over tests/fuzz/plan-corpus.
TESTS += tests/fuzz/fuzz_plan.sh
EXTRA_DIST += tests/fuzz/fuzz_plan.sh tests/fuzz/fuzz_plan.c tests/fuzz/plan-corpus/README.md \
	tests/fuzz/plan-corpus/allgather_2.json tests/fuzz/plan-corpus/allreduce_pkt_2.json \
	tests/fuzz/plan-corpus/broadcast_2.json tests/fuzz/plan-corpus/pipeline_sem_barrier_2.json \
	tests/fuzz/plan-corpus/switch_glre_2.json tests/fuzz/verify_agree.py
# The sanitizer run (scripts/run-tests.sh calls it) and what is checked where.
EXTRA_DIST += scripts/sanitize.sh docs/plan-checks.md
# The verifier held to execution: verify_sound.sh makes mutants (make_verify_sound.py) and
# verify_sound_run runs each on the host interpreter (issue 22 item 2).
check_PROGRAMS += tests/fuzz/verify_sound_run
tests_fuzz_verify_sound_run_SOURCES = tests/fuzz/verify_sound_run.c tests/unit/kern_harness.c
tests_fuzz_verify_sound_run_LDADD = $(MSCCLPP_INTERNAL_LIBS)
TESTS += tests/fuzz/verify_sound.sh
EXTRA_DIST += tests/fuzz/verify_sound.sh tests/fuzz/make_verify_sound.py
