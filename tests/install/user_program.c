/*
 * A user's program, built against an installed libmscclpp with pkg-config only (mscclpp and
 * mscclpp_mpi): prints the version, finds the installed default plans through the path compiled
 * into the library, and touches the MPI bootstrap library so that it is loaded too.
 * `user_program list COLLECTIVE` prints instead the name of every plan the executor registered
 * at creation that serves an 8-byte out-of-place call of COLLECTIVE ("plan: NAME").
 */
#include <stdio.h>
#include <string.h>

#include <mscclpp/mscclpp.h>
#include <mscclpp/mscclpp_mpi.h>

int main(int argc, char **argv)
{
    int major, minor, patch, nloaded = 0;
    mscclpp_version(&major, &minor, &patch);
    printf("version %d.%d.%d\n", major, minor, patch);

    mscclpp_unique_id_t id;
    mscclpp_comm_t *comm = NULL;
    mscclpp_executor_t *exec = NULL;
    mscclpp_result_t rc = mscclpp_get_unique_id(&id);
    if (rc == MSCCLPP_OK) rc = mscclpp_comm_init_rank(&id, 0, 1, &comm);
    if (rc == MSCCLPP_OK) rc = mscclpp_executor_create(comm, &exec);
    if (rc == MSCCLPP_OK && argc == 3 && !strcmp(argv[1], "list")) {
        const mscclpp_plan_t *plans[64];
        int n = 0;
        rc = mscclpp_executor_list_plans(exec, argv[2], 0, 8, 0, plans, 64, &n);
        for (int i = 0; rc == MSCCLPP_OK && i < n && i < 64; i++)
            printf("plan: %s\n", mscclpp_plan_name(plans[i]));
        mscclpp_executor_destroy(exec);
        mscclpp_comm_destroy(comm);
        return rc == MSCCLPP_OK ? 0 : 1;
    }
    /* NULL: the default plan directory, the one compiled into the library at install time */
    if (rc == MSCCLPP_OK) rc = mscclpp_executor_load_plan_dir(exec, NULL, &nloaded);
    if (rc != MSCCLPP_OK) {
        fprintf(stderr, "user_program: %s: %s\n", mscclpp_result_string(rc), mscclpp_last_error());
        return 1;
    }
    printf("default plans loaded: %d\n", nloaded);
    /* a reference to the MPI bootstrap: the program needs libmscclpp_mpi at load time */
    printf("mpi bootstrap: %s\n", mscclpp_bootstrap_create_mpi ? "linked" : "missing");
    mscclpp_executor_destroy(exec);
    mscclpp_comm_destroy(comm);
    return nloaded > 0 ? 0 : 1;
}
