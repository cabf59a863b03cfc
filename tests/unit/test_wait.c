/*
 * The one wait policy (base/wait.h): the spin choice from cores and pollers, a bounded wait,
 * and short sleeps that really are short (the waiting thread's timer slack is lowered; with
 * Linux's default 50 us slack a 1 us nanosleep took 55-190 us, the cliff of issue 8 item 7).
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/wait.h"

START_TEST(t_spin_choice)
{
    unsigned cpus = base_cpu_count();
    ck_assert_uint_ge(cpus, 1);
    ck_assert_uint_eq(base_wait_spin(1), BASE_WAIT_SPIN_OWN_CORE);
    ck_assert_uint_eq(base_wait_spin(cpus), BASE_WAIT_SPIN_OWN_CORE);
    ck_assert_uint_eq(base_wait_spin(cpus + 1), BASE_WAIT_SPIN_SHARED);
}
END_TEST

/* Unknown pollers: the ranks the launcher announces, else shared cores. */
START_TEST(t_spin_from_launcher)
{
    unsetenv("MPI_LOCALNRANKS");
    unsetenv("OMPI_COMM_WORLD_LOCAL_SIZE");
    unsetenv("SLURM_NTASKS_PER_NODE");
    setenv("MPI_LOCALNRANKS", "1", 1); /* one rank on this node: it has a core */
    ck_assert_uint_eq(base_wait_spin(0), BASE_WAIT_SPIN_OWN_CORE);
}
END_TEST

START_TEST(t_spin_unknown)
{
    unsetenv("MPI_LOCALNRANKS");
    unsetenv("OMPI_COMM_WORLD_LOCAL_SIZE");
    unsetenv("SLURM_NTASKS_PER_NODE");
    ck_assert_uint_eq(base_wait_spin(0), BASE_WAIT_SPIN_SHARED);
}
END_TEST

/* A wait on a flag nobody sets ends at its deadline, not before and not much after. */
START_TEST(t_deadline)
{
    base_wait_t w;
    uint64_t t0 = base_now_ns();
    base_wait_init(&w, 20000000ull, 64); /* 20 ms */
    unsigned steps = 0;
    while (base_wait_pause(&w)) steps++;
    uint64_t dt = base_now_ns() - t0;
    ck_assert_uint_ge(dt, 20000000ull);
    ck_assert_msg(dt < 2000000000ull, "waited %llu ns", (unsigned long long)dt);
    ck_assert_uint_gt(steps, 0);
}
END_TEST

/* Once a wait sleeps, its thread's timer slack is the policy's, so 1 us sleeps stay short. */
START_TEST(t_sleeps_are_short)
{
    ck_assert_int_eq(prctl(PR_SET_TIMERSLACK, 50000ul, 0, 0, 0), 0); /* Linux's default */
    base_wait_t w;
    base_wait_init(&w, 0, 0);
    while (!base_wait_idle(&w)) base_wait_pause(&w);
    base_wait_pause(&w); /* the first sleep */
    ck_assert_int_eq(prctl(PR_GET_TIMERSLACK, 0, 0, 0, 0), (int)BASE_WAIT_TIMER_SLACK_NS);
}
END_TEST

/* A wait whose end a poll notices (a GPU stream) sleeps at most a share of the time waited so
 * far, so the sleep spanning the end overshoots it by a bounded share (issue 19 item 5). */
START_TEST(t_relative_sleeps)
{
    uint32_t n = 2 + BASE_WAIT_YIELDS + 10; /* deep in the sleep phase: the policy's longest */
    ck_assert_uint_eq(base_wait_sleep_ns(n, 2), BASE_WAIT_SLEEP_MAX_NS);
    const uint32_t y = BASE_WAIT_YIELDS;
    ck_assert_uint_eq(base_wait_sleep_rel_ns(n, 2, y, 0), BASE_WAIT_SLEEP_MIN_NS);
    ck_assert_uint_eq(base_wait_sleep_rel_ns(n, 2, y, 160000), 160000 / BASE_WAIT_SLEEP_REL);
    ck_assert_uint_eq(base_wait_sleep_rel_ns(n, 2, y, 1000000000ull), BASE_WAIT_SLEEP_MAX_NS);
    ck_assert_uint_eq(base_wait_sleep_rel_ns(2 + y, 2, y, 1000000000ull),
                      BASE_WAIT_SLEEP_MIN_NS); /* never longer than the policy's */
    /* and the wait still ends at its deadline */
    base_wait_t w;
    uint64_t t0 = base_now_ns();
    base_wait_init(&w, 20000000ull, 8);
    while (base_wait_pause_rel(&w)) {
    }
    uint64_t dt = base_now_ns() - t0;
    ck_assert_uint_ge(dt, 20000000ull);
    ck_assert_msg(dt < 2000000000ull, "waited %llu ns", (unsigned long long)dt);
}
END_TEST

/* A wait whose spin ran out in vain limits the next wait's spin to BASE_WAIT_SPIN_SHARED; each
 * wait doubles the limit again, up to what its caller asks (issue 22 item 9: two ranks on one
 * core each spun 2000 polls per exchange while the other could not run). */
START_TEST(t_spin_adapts)
{
    base_wait_t w;
    base_wait_init(&w, 0, BASE_WAIT_SPIN_OWN_CORE);
    ck_assert_uint_eq(w.spin, BASE_WAIT_SPIN_OWN_CORE); /* nothing learnt yet */
    for (uint32_t i = 0; i <= BASE_WAIT_SPIN_OWN_CORE; i++) base_wait_pause(&w);
    uint32_t want = BASE_WAIT_SPIN_SHARED;
    for (int wait = 0; want < BASE_WAIT_SPIN_OWN_CORE; wait++, want *= 2) {
        base_wait_init(&w, 0, BASE_WAIT_SPIN_OWN_CORE); /* each ends at once: no spin ran out */
        ck_assert_msg(w.spin == want, "wait %d: spin %u, want %u", wait, w.spin, want);
    }
    base_wait_init(&w, 0, BASE_WAIT_SPIN_OWN_CORE);
    ck_assert_uint_eq(w.spin, BASE_WAIT_SPIN_OWN_CORE);
    base_wait_init(&w, 0, 8); /* never more than asked */
    ck_assert_uint_eq(w.spin, 8);

    /* the interpreter's stateless steps learn the same way */
    for (uint32_t n = 0; n <= BASE_WAIT_SPIN_OWN_CORE; n++)
        base_wait_step(n, BASE_WAIT_SPIN_OWN_CORE);
    base_wait_step(0, BASE_WAIT_SPIN_OWN_CORE);
    ck_assert_uint_eq(base_wait_tls.spin, BASE_WAIT_SPIN_SHARED);
    base_wait_step(0, BASE_WAIT_SPIN_OWN_CORE);
    ck_assert_uint_eq(base_wait_tls.spin, 2 * BASE_WAIT_SPIN_SHARED);
}
END_TEST

/* A wait that yielded all its yields in vain and went on to sleep limits the next wait's yields
 * to BASE_WAIT_YIELDS_SHARED; each wait doubles the limit again (issue 22 item 9: two ranks on
 * one core took turns of 64 yields, ~0.17 ms, since each yield came back to the waiter). A wait
 * that ends while it yields changes nothing. */
START_TEST(t_yields_adapt)
{
    base_wait_t w;
    base_wait_init(&w, 0, 4);
    ck_assert_uint_eq(w.yields, BASE_WAIT_YIELDS); /* nothing learnt yet */
    while (!base_wait_idle(&w)) base_wait_pause(&w);
    base_wait_init(&w, 0, 4); /* ended in its last yield: not in vain */
    ck_assert_uint_eq(w.yields, BASE_WAIT_YIELDS);
    while (!base_wait_idle(&w)) base_wait_pause(&w);
    base_wait_pause(&w); /* the first sleep: every yield was in vain */
    uint32_t want = BASE_WAIT_YIELDS_SHARED;
    for (int wait = 0; want < BASE_WAIT_YIELDS; wait++, want *= 2) {
        base_wait_init(&w, 0, 4); /* each ends at once */
        ck_assert_msg(w.yields == want, "wait %d: %u yields, want %u", wait, w.yields, want);
    }
    base_wait_init(&w, 0, 4);
    ck_assert_uint_eq(w.yields, BASE_WAIT_YIELDS);
    base_wait_init(&w, 0, 4);
    ck_assert_uint_eq(w.yields, BASE_WAIT_YIELDS); /* never more */

    /* after vain yields the sleeps start long enough to leave the core (a sleep of a few
     * microseconds ends before the thread is switched out: in a VM it cost 20-40 us and gave
     * the core to no one) */
    ck_assert_uint_eq(base_wait_sleep_at(4 + BASE_WAIT_YIELDS, 4, BASE_WAIT_YIELDS),
                      BASE_WAIT_SLEEP_MIN_NS);
    ck_assert_uint_eq(base_wait_sleep_at(4 + BASE_WAIT_YIELDS_SHARED, 4, BASE_WAIT_YIELDS_SHARED),
                      BASE_WAIT_SLEEP_MIN_NS << BASE_WAIT_SLEEP_BLOCK_STEP);
    ck_assert_uint_eq(
        base_wait_sleep_at(4 + BASE_WAIT_YIELDS_SHARED + 10, 4, BASE_WAIT_YIELDS_SHARED),
        BASE_WAIT_SLEEP_MAX_NS);

    /* the interpreter's stateless steps learn the same way */
    for (uint32_t n = 0; n <= 4 + BASE_WAIT_YIELDS; n++) base_wait_step(n, 4);
    base_wait_step(0, 4);
    ck_assert_uint_eq(base_wait_tls.yields, BASE_WAIT_YIELDS_SHARED);
    base_wait_step(0, 4);
    ck_assert_uint_eq(base_wait_tls.yields, 2 * BASE_WAIT_YIELDS_SHARED);
}
END_TEST

/* The calling thread's sched_attr runtime: the custom slice of a SCHED_OTHER thread (Linux
 * 6.12+; 0 when it has none). */
static uint64_t my_runtime(void)
{
    struct {
        uint32_t size, policy;
        uint64_t flags;
        int32_t nice;
        uint32_t priority;
        uint64_t runtime, deadline, period;
    } a = {0};
    ck_assert_int_eq((int)syscall(SYS_sched_getattr, 0, &a, (unsigned)sizeof a, 0u), 0);
    return a.runtime;
}

static int kernel_has_custom_slice(void)
{
    struct utsname u;
    int major = 0, minor = 0;
    if (uname(&u) != 0 || sscanf(u.release, "%d.%d", &major, &minor) != 2) return 0;
    return major > 6 || (major == 6 && minor >= 12);
}

/* A polling thread of the library asks for the short slice of MSCCLPP_HOST_SLICE_US as it
 * starts, so that it runs as soon as it wakes beside busy processes (issue 22 item 9); the
 * kernel reports a custom slice as the thread's sched_attr runtime. */
START_TEST(t_waiter_slice)
{
    setenv("MSCCLPP_HOST_SLICE_US", "100", 1);
    if (!kernel_has_custom_slice()) {
        printf("# t_waiter_slice: kernel before 6.12 (no custom slices): nothing to check\n");
        return;
    }
    ck_assert_uint_ne(my_runtime(), 100000);
    base_wait_thread_slice();
    ck_assert_uint_eq(my_runtime(), 100000);
}
END_TEST

START_TEST(t_waiter_slice_off)
{
    unsetenv("MSCCLPP_HOST_SLICE_US"); /* the default: the kernel's slice */
    uint64_t before = my_runtime();
    base_wait_thread_slice();
    ck_assert_uint_eq(my_runtime(), before);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("wait");
    TCase *tc = tcase_create("wait");
    tcase_add_test(tc, t_spin_choice);
    tcase_add_test(tc, t_spin_from_launcher);
    tcase_add_test(tc, t_spin_unknown);
    tcase_add_test(tc, t_deadline);
    tcase_add_test(tc, t_sleeps_are_short);
    tcase_add_test(tc, t_relative_sleeps);
    tcase_add_test(tc, t_waiter_slice);
    tcase_add_test(tc, t_waiter_slice_off);
    tcase_add_test(tc, t_spin_adapts);
    tcase_add_test(tc, t_yields_adapt);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
