/*
 * MSCCLPP_* variables (base/config.c): one parser per kind, a bad value is an error (or, for the
 * logging variables, a warning naming the default used), and mscclpp-info shows the value in
 * force. Each test runs in its own forked process (Check's default), so setenv stays local.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/config.h"
#include "base/debug.h"
#include "base/wait.h"
#include "mscclpp/mscclpp.h"

/* `value` for `var` is refused: config_check names it, and the first call that needs a device
 * fails with the same message instead of running with the default. */
static void check_refused(const char *var, const char *value, const char *accepted)
{
    setenv(var, value, 1);
    ck_assert_int_eq(config_check(), MSCCLPP_ERR_INVALID_ARG);
    const char *m = mscclpp_last_error();
    char want[256];
    snprintf(want, sizeof want, "%s=\"%s\"", var, value);
    ck_assert_msg(strstr(m, want) && strstr(m, accepted), "message: '%s'", m);
    void *p = NULL;
    ck_assert_int_eq(mscclpp_malloc(64, &p), MSCCLPP_ERR_INVALID_ARG);
    ck_assert_ptr_null(p);
    ck_assert_msg(strstr(mscclpp_last_error(), want), "malloc: '%s'", mscclpp_last_error());
}

START_TEST(t_timeout_abc) { check_refused("MSCCLPP_TIMEOUT", "abc", "number of seconds"); }
END_TEST
START_TEST(t_timeout_zero) { check_refused("MSCCLPP_TIMEOUT", "0", "number of seconds"); }
END_TEST
START_TEST(t_timeout_negative) { check_refused("MSCCLPP_TIMEOUT", "-5", "number of seconds"); }
END_TEST
START_TEST(t_timeout_trailing) { check_refused("MSCCLPP_TIMEOUT", "10s", "number of seconds"); }
END_TEST
START_TEST(t_timeout_nan) { check_refused("MSCCLPP_TIMEOUT", "nan", "number of seconds"); }
END_TEST
START_TEST(t_host_spin_bad) { check_refused("MSCCLPP_HOST_SPIN", "-1", "integer from 0"); }
END_TEST
START_TEST(t_host_spin_text) { check_refused("MSCCLPP_HOST_SPIN", "lots", "integer from 0"); }
END_TEST
START_TEST(t_master_port_bad) { check_refused("MSCCLPP_MASTER_PORT", "70000", "port number"); }
END_TEST
START_TEST(t_shareable_bad) { check_refused("MSCCLPP_CUDA_SHAREABLE", "maybe", "auto, cumem"); }
END_TEST

START_TEST(t_good_values)
{
    setenv("MSCCLPP_TIMEOUT", "2.5", 1);
    setenv("MSCCLPP_HOST_SPIN", "100", 1);
    setenv("MSCCLPP_MASTER_PORT", "29500", 1);
    setenv("MSCCLPP_DEBUG", "info", 1);
    ck_assert_int_eq(config_check(), MSCCLPP_OK);
    ck_assert_uint_eq(config_timeout_ns(), 2500000000ull);
    ck_assert_int_eq(config_get_int(CFG_MSCCLPP_HOST_SPIN), 100);
    ck_assert_uint_eq(base_wait_spin(1), 100); /* MSCCLPP_HOST_SPIN wins over the choice */
    ck_assert_int_eq(config_get_int(CFG_MSCCLPP_MASTER_PORT), 29500);
    ck_assert_int_eq(config_get_int(CFG_MSCCLPP_DEBUG), LOG_INFO);
    /* a changed environment is parsed again (tools and tests setenv between calls) */
    setenv("MSCCLPP_TIMEOUT", "7", 1);
    ck_assert_uint_eq(config_timeout_ns(), 7000000000ull);
    /* unset or empty: the default, no error */
    unsetenv("MSCCLPP_TIMEOUT");
    ck_assert_uint_eq(config_timeout_ns(), 60000000000ull);
    setenv("MSCCLPP_TIMEOUT", "", 1);
    ck_assert_int_eq(config_check(), MSCCLPP_OK);
    ck_assert_uint_eq(config_timeout_ns(), 60000000000ull);
    /* a putenv'd string changed in place: the same pointer, another value (config_timeout_ns
     * keeps the last value per thread, keyed on the text) */
    static char put[] = "MSCCLPP_TIMEOUT=3";
    ck_assert_int_eq(putenv(put), 0);
    ck_assert_uint_eq(config_timeout_ns(), 3000000000ull);
    put[sizeof put - 2] = '4';
    ck_assert_uint_eq(config_timeout_ns(), 4000000000ull);
    unsetenv("MSCCLPP_TIMEOUT");
    ck_assert_uint_eq(config_timeout_ns(), 60000000000ull);
}
END_TEST

/* A bad value still reads as the default where code needs a number (never 0 or garbage). */
START_TEST(t_bad_reads_default)
{
    setenv("MSCCLPP_TIMEOUT", "-5", 1);
    ck_assert_uint_eq(config_timeout_ns(), 60000000000ull);
    char why[256];
    ck_assert_int_eq(config_invalid(CFG_MSCCLPP_TIMEOUT, why, sizeof why), 1);
    ck_assert_ptr_nonnull(strstr(why, "MSCCLPP_TIMEOUT=\"-5\""));
}
END_TEST

/* Point MSCCLPP_DEBUG_FILE at a new temporary file (named in path, 32 bytes). */
static void log_to_temp(char *path)
{
    snprintf(path, 32, "/tmp/mscclpp-test-log-XXXXXX");
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    close(fd);
    setenv("MSCCLPP_DEBUG_FILE", path, 1);
}

/* The file's text (at most cap - 1 bytes); removes the file. */
static void slurp_and_remove(const char *path, char *text, size_t cap)
{
    FILE *f = fopen(path, "r");
    ck_assert_ptr_nonnull(f);
    size_t n = fread(text, 1, cap - 1, f);
    text[n] = '\0';
    fclose(f);
    unlink(path);
}

/* Logging variables warn, naming the default used, and calls go on. */
static void check_log_warning(const char *var, const char *value, const char *def)
{
    char path[32];
    log_to_temp(path);
    setenv(var, value, 1);
    ck_assert_int_eq(config_check(), MSCCLPP_OK);
    ck_assert(log_enabled(LOG_WARN, SUBSYS_INIT)); /* starts the logger */
    void *p = NULL;
    ck_assert_int_eq(mscclpp_malloc(64, &p), MSCCLPP_OK);
    mscclpp_free(p);
    char text[4096];
    slurp_and_remove(path, text, sizeof text);
    char want[256];
    snprintf(want, sizeof want, "%s=\"%s\"", var, value);
    ck_assert_msg(strstr(text, want), "log: '%s'", text);
    snprintf(want, sizeof want, "using the default %s", def);
    ck_assert_msg(strstr(text, want), "log: '%s'", text);
}

START_TEST(t_debug_bogus) { check_log_warning("MSCCLPP_DEBUG", "bogus", "WARN"); }
END_TEST
START_TEST(t_debug_subsys_bogus) { check_log_warning("MSCCLPP_DEBUG_SUBSYS", "INIT,NOPE", "ALL"); }
END_TEST

/* mscclpp-info prints the value in force for each variable and exits 1 on an invalid one. */
static int run_info_args(const char *env, const char *args, char *out, size_t cap)
{
    const char *top = getenv("MSCCLPP_TOP_BUILDDIR");
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "env %s %s/tools/mscclpp-info %s 2>&1", env, top ? top : ".",
             args);
    FILE *p = popen(cmd, "r");
    ck_assert_ptr_nonnull(p);
    size_t n = fread(out, 1, cap - 1, p);
    out[n] = '\0';
    int status = pclose(p);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static int run_info(const char *env, char *out, size_t cap)
{
    return run_info_args(env, "--config", out, cap);
}

START_TEST(t_info_shows_value_in_force)
{
    static char out[16384];
    ck_assert_int_eq(run_info("MSCCLPP_TIMEOUT=30 MSCCLPP_DEBUG=bogus", out, sizeof out), 0);
    ck_assert_msg(strstr(out, "MSCCLPP_TIMEOUT          in force: 30 (set)"), "%s", out);
    ck_assert_msg(strstr(out, "in force: WARN (default, because MSCCLPP_DEBUG=\"bogus\""), "%s",
                  out);
    ck_assert_msg(strstr(out, "MSCCLPP_HOST_SPIN        in force: chosen:"), "%s", out);
    ck_assert_int_eq(run_info("MSCCLPP_TIMEOUT=abc", out, sizeof out), 1);
    ck_assert_msg(strstr(out, "in force: INVALID: MSCCLPP_TIMEOUT=\"abc\""), "%s", out);
}
END_TEST

/* mscclpp-info --plans: the folders an executor registers plans from, in order, and why
 * (issue 21 item 9). */
START_TEST(t_info_plans)
{
    static char out[16384], env[1200], want[1200];
    const char *src = getenv("MSCCLPP_TOP_SRCDIR");
    char dir[1024];
    if (!src || !realpath(src, dir)) snprintf(dir, sizeof dir, "%s", src ? src : "..");
    snprintf(env, sizeof env, "MSCCLPP_PLAN_DIR=%s/plans MSCCLPP_CACHE_DIR=/tmp", dir);
    ck_assert_int_eq(run_info_args(env, "--plans", out, sizeof out), 0);
    snprintf(want, sizeof want, "plan folder: %s/plans (from MSCCLPP_PLAN_DIR)", dir);
    ck_assert_msg(strstr(out, want), "%s", out);
    /* the backend's folder first, then the generic one, each with its count; before them
     * (MSCCLPP_PLAN_DIRECT=auto, host backend) the direct plans, for calls on shareable buffers */
    snprintf(want, sizeof want,
             "plans from %s/plans/direct/host/ (MSCCLPP_PLAN_DIRECT=auto: for calls whose ranks "
             "all pass shareable buffers)\n",
             dir);
    char *direct = strstr(out, want);
    snprintf(want, sizeof want, "plans from %s/plans/host/\n", dir);
    char *host = strstr(out, want);
    snprintf(want, sizeof want, "plans from %s/plans/\n", dir);
    char *generic = strstr(out, want);
    ck_assert_msg(direct && host && generic && direct < host && host < generic, "%s", out);
    /* MSCCLPP_PLAN_DIRECT=off: no direct plans */
    snprintf(env, sizeof env, "MSCCLPP_PLAN_DIR=%s/plans MSCCLPP_PLAN_DIRECT=off", dir);
    ck_assert_int_eq(run_info_args(env, "--plans", out, sizeof out), 0);
    ck_assert_msg(strstr(out, "plans/host/") && !strstr(out, "plans/direct/"), "%s", out);
    ck_assert_msg(strstr(out, "registered first for a job of that layout") && strstr(out, "8x8"),
                  "%s", out);
    /* MSCCLPP_PLAN_DIRECT=on: the backend's direct plans before its own folder */
    snprintf(env, sizeof env, "MSCCLPP_PLAN_DIR=%s/plans MSCCLPP_PLAN_DIRECT=on", dir);
    ck_assert_int_eq(run_info_args(env, "--plans", out, sizeof out), 0);
    snprintf(want, sizeof want, "plans from %s/plans/direct/host/\n", dir);
    direct = strstr(out, want);
    snprintf(want, sizeof want, "plans from %s/plans/host/\n", dir);
    host = strstr(out, want);
    ck_assert_msg(direct && host && direct < host, "%s", out);
    snprintf(env, sizeof env, "MSCCLPP_PLAN_DIR=%s/plans MSCCLPP_CACHE_DIR=/tmp", dir);
    ck_assert_int_eq(run_info_args(env, "--plans", out, sizeof out), 0);
    ck_assert_msg(strstr(out, "Python DSL cache: not read (MSCCLPP_PLAN_DIR is set)"), "%s", out);
    ck_assert_msg(!strstr(out, "MSCCLPP_TIMEOUT"), "--plans alone: %s", out);
    /* a build-tree tool reads the source tree's plans, as the build's libmscclpp.so does */
    ck_assert_int_eq(run_info_args("-u MSCCLPP_PLAN_DIR", "--plans", out, sizeof out), 0);
    ck_assert_msg(strstr(out, "(the source tree's: this library runs from its build folder)"),
                  "%s", out);
    ck_assert_int_eq(run_info_args("MSCCLPP_PLAN_DIR=/no/such/folder MSCCLPP_PLAN_MAKE=off",
                                   "--plans", out, sizeof out),
                     0);
    ck_assert_msg(strstr(out, "    no plan found") &&
                      strstr(out, "plans made for the job: none (MSCCLPP_PLAN_MAKE=off)"),
                  "%s", out);
}
END_TEST

/* Variables of code built on the library (libmscclpp_nccl) live in the same table: the public
 * reader sees them, mscclpp-info lists them, and mscclpp_log writes through the library's logger
 * under the subsystem NCCL. */
START_TEST(t_public_config_and_log)
{
    unsetenv("MSCCLPP_NCCL_ZERO_COPY");
    ck_assert_str_eq(mscclpp_config_get("MSCCLPP_NCCL_ZERO_COPY"), "1");
    setenv("MSCCLPP_NCCL_ZERO_COPY", "0", 1);
    ck_assert_str_eq(mscclpp_config_get("MSCCLPP_NCCL_ZERO_COPY"), "0");
    ck_assert_str_eq(mscclpp_config_get("MSCCLPP_NCCL_LIB_PATH"), "");
    ck_assert_ptr_null(mscclpp_config_get("MSCCLPP_NO_SUCH_VARIABLE"));
    ck_assert_ptr_null(mscclpp_config_get(NULL));

    static char out[32768];
    ck_assert_int_eq(run_info("MSCCLPP_NCCL_PLAN_DIR=/some/plans", out, sizeof out), 0);
    ck_assert_msg(strstr(out, "MSCCLPP_NCCL_PLAN_DIR") && strstr(out, "/some/plans (set)"), "%s",
                  out);
    ck_assert_msg(strstr(out, "MSCCLPP_NCCL_LIB_PATH"), "%s", out);

    char path[32];
    log_to_temp(path);
    setenv("MSCCLPP_DEBUG", "INFO", 1);
    setenv("MSCCLPP_DEBUG_SUBSYS", "NCCL", 1);
    ck_assert(mscclpp_log_enabled(MSCCLPP_LOG_INFO));
    ck_assert(!mscclpp_log_enabled(MSCCLPP_LOG_TRACE));
    ck_assert(!log_enabled(LOG_INFO, SUBSYS_EXEC)); /* only the subsystem asked for */
    mscclpp_log(MSCCLPP_LOG_INFO, "NCCL hello %d", 7);
    mscclpp_log(MSCCLPP_LOG_TRACE, "not printed");
    char text[4096];
    slurp_and_remove(path, text, sizeof text);
    ck_assert_msg(strstr(text, "MSCCLPP INFO NCCL hello 7\n"), "log: '%s'", text);
    ck_assert_msg(!strstr(text, "not printed"), "log: '%s'", text);
}
END_TEST

/* An MSCCLPP_* variable nothing reads (a typo) is named, with the variable it is nearest to:
 * by mscclpp-info (exit 1) and at library init under MSCCLPP_DEBUG=WARN, once (issue 21 item 9).
 * The tools' and tests' own variables (MSCCLPP_TOP_SRCDIR, ...) are not typos. */
START_TEST(t_unknown_variables)
{
    static char out[32768];
    ck_assert_int_eq(run_info("MSCCLPP_DEBG=INFO MSCCLPP_FROBNICATE=1 MSCCLPP_TOP_SRCDIR=/x", out,
                              sizeof out),
                     1);
    ck_assert_msg(strstr(out, "MSCCLPP_DEBG: not a variable of libmscclpp (did you mean "
                              "MSCCLPP_DEBUG?)"),
                  "%s", out);
    ck_assert_msg(strstr(out, "MSCCLPP_FROBNICATE: not a variable of libmscclpp\n"), "%s", out);
    ck_assert_msg(!strstr(out, "MSCCLPP_TOP_SRCDIR: not"), "%s", out);

    char path[32];
    log_to_temp(path);
    setenv("MSCCLPP_DEBUG", "WARN", 1);
    setenv("MSCCLPP_TIMOUT", "5", 1);
    ck_assert_int_eq(config_check(), MSCCLPP_OK);
    ck_assert_int_eq(config_check(), MSCCLPP_OK); /* once per process */
    unsetenv("MSCCLPP_TIMOUT");
    char text[4096];
    slurp_and_remove(path, text, sizeof text);
    const char *w = "MSCCLPP_TIMOUT is not a variable of libmscclpp (did you mean MSCCLPP_TIMEOUT?)";
    const char *first = strstr(text, w);
    ck_assert_msg(first, "log: '%s'", text);
    ck_assert_msg(!strstr(first + 1, w), "warned twice: '%s'", text);
}
END_TEST

/* --version and --build: which library, and how it was configured */
START_TEST(t_info_version_and_build)
{
    static char out[16384];
    ck_assert_int_eq(run_info_args("", "--version", out, sizeof out), 0);
    ck_assert_msg(!strncmp(out, "mscclpp-info ", 13) && strstr(out, "(libmscclpp "), "%s", out);
    ck_assert_int_eq(run_info_args("", "--build", out, sizeof out), 0);
    ck_assert_msg(strstr(out, "Build (configure of libmscclpp") && strstr(out, "C compiler  :") &&
                      strstr(out, "backends    : host") && strstr(out, "transports  : ipc") &&
                      !strstr(out, "Configuration ("),
                  "%s", out);
    ck_assert_int_eq(run_info_args("", "--bogus", out, sizeof out), 2);
    ck_assert_msg(strstr(out, "unknown option '--bogus' (expected --build"), "%s", out);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("config");
    TCase *tc = tcase_create("config");
    tcase_add_test(tc, t_timeout_abc);
    tcase_add_test(tc, t_timeout_zero);
    tcase_add_test(tc, t_timeout_negative);
    tcase_add_test(tc, t_timeout_trailing);
    tcase_add_test(tc, t_timeout_nan);
    tcase_add_test(tc, t_host_spin_bad);
    tcase_add_test(tc, t_host_spin_text);
    tcase_add_test(tc, t_master_port_bad);
    tcase_add_test(tc, t_shareable_bad);
    tcase_add_test(tc, t_good_values);
    tcase_add_test(tc, t_bad_reads_default);
    tcase_add_test(tc, t_debug_bogus);
    tcase_add_test(tc, t_debug_subsys_bogus);
    tcase_add_test(tc, t_info_shows_value_in_force);
    tcase_add_test(tc, t_public_config_and_log);
    tcase_add_test(tc, t_info_plans);
    tcase_add_test(tc, t_unknown_variables);
    tcase_add_test(tc, t_info_version_and_build);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
