/*
 * Tuning tables (internal): the choice `mscclpp-bench --tune` measured per collective and
 * message-size range (plan name, thread blocks, threads per block), loaded by the executor and
 * applied when a collective picks its plan. Format and rules: docs/tuning.md.
 *
 * A table is keyed by backend, device name, rank count and ranks per node; a table written for
 * another machine is refused (an explicit MSCCLPP_TUNING_FILE: an error from
 * mscclpp_executor_create; the default path: a warning, and the table is not used). Entries that
 * name a plan which is not registered, or that does not accept the call, fall back to the
 * registry's own rule (registry.h), with one warning per entry.
 */
#ifndef MSCCLPP_EXECUTOR_TUNING_H
#define MSCCLPP_EXECUTOR_TUNING_H

#include <stdbool.h>
#include <stdint.h>

#include "executor/native_exec.h"
#include "executor/registry.h"
#include "hal/hal.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Format tag and version written in every table ("format", "version"). */
#define EXEC_TUNING_FORMAT "mscclpp-tuning"
#define EXEC_TUNING_VERSION 1

typedef struct {
    char *collective;
    bool inplace;
    uint64_t min_bytes, max_bytes; /* inclusive; max UINT64_MAX when the file says null */
    char *plan;                    /* plan name (mscclpp_plan_name) */
    int nblocks;                   /* the plan's thread blocks (0: not checked) */
    int nthreads;                  /* threads per block for the launch (0: the plan's) */
    bool warned;                   /* the fallback warning was printed */
} exec_tuning_entry_t;

typedef struct exec_tuning {
    char *path;
    exec_tuning_entry_t *entries;
    int count;
    uint64_t digest; /* of the entries: carried in call signatures, so that ranks whose tables
                      * made them pick different plans are told so (executor.c) */
} exec_tuning_t;

/** What the table must have been written for. */
typedef struct {
    const char *backend;
    const char *device;
    int nranks, ranks_per_node;
} exec_tuning_key_t;

/**
 * Parse the table at `path` and check it against `key`. Any problem (unreadable, malformed JSON,
 * wrong format or version, another backend/device/rank count, a bad entry) is
 * MSCCLPP_ERR_INVALID_ARG (MSCCLPP_ERR_SYSTEM when unreadable) with a message naming the file and
 * the reason; *out stays NULL.
 */
mscclpp_result_t exec_tuning_load(const char *path, const exec_tuning_key_t *key,
                                  exec_tuning_t **out);
void exec_tuning_free(exec_tuning_t *t);

/**
 * The default table path: $XDG_CACHE_HOME (else $HOME/.cache) + /mscclpp/tuning/
 * <backend>-<device>-<nranks>.json, the device name with every character other than
 * [A-Za-z0-9._-] replaced by '_'. Returns 0, or -1 when no home directory is known or the path
 * does not fit.
 */
int exec_tuning_default_path(const exec_tuning_key_t *key, char *buf, size_t cap);

/**
 * The table loaded for an executor: MSCCLPP_TUNING_FILE when set (an error when it cannot be
 * used; "none" disables tuning), else the default path when that file exists (a warning, and
 * no table, when it cannot be used). *out is NULL when no table applies.
 */
mscclpp_result_t exec_tuning_open(const exec_tuning_key_t *key, exec_tuning_t **out);

/**
 * The table's choice for a call: the registered plan named by the first entry for `collective`,
 * `inplace` and a range holding `message_bytes`, if that plan matches the call by the registry's
 * rule; *nthreads gets the entry's threads per block. NULL (and *nthreads 0) when the table has
 * no entry or the entry cannot be honoured (warned once per entry). `t` may be NULL.
 */
const struct mscclpp_plan *exec_tuning_pick(exec_tuning_t *t, const exec_registry_t *reg,
                                            const char *collective, int world_size,
                                            int ranks_per_node, bool inplace,
                                            uint64_t message_bytes, int *nthreads);

/**
 * Every registered plan that matches the call by the registry's rule and, when nblocks > 0,
 * runs that many thread blocks; up to `cap` go to `plans`, *n gets how many matched.
 */
void exec_tuning_candidates(const exec_registry_t *reg, const char *collective, int world_size,
                            int ranks_per_node, bool inplace, uint64_t message_bytes, int nblocks,
                            const struct mscclpp_plan **plans, int cap, int *n);

/* ---- the executor's table ---- */

/** This executor's key: backend, the current device's name (in `props`), ranks and ranks per
 *  node. */
void exec_tuning_key_of(const mscclpp_executor_t *ex, hal_device_props_t *props,
                        exec_tuning_key_t *key);

/** Open the executor's tuning table (exec_tuning_open with this device's key). */
mscclpp_result_t exec_tuning_attach(mscclpp_executor_t *ex);

#ifdef __cplusplus
}
#endif

#endif
