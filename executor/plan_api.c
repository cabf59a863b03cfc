/* Public plan API (load, destroy, getters) and the dtype / reduce-op names of mscclpp.h. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

#include "base/debug.h"
#include "executor/plan.h"

#define PLAN_MAX_FILE_BYTES ((size_t)1 << 30) /* sanity bound on a plan file */

MSCCLPP_API mscclpp_result_t mscclpp_plan_load_file(const char *path, mscclpp_plan_t **plan)
{
    CHECK_ARG(path != NULL);
    CHECK_ARG(plan != NULL);
    *plan = NULL;
    mscclpp_result_t res = MSCCLPP_OK;
    FILE *f = fopen(path, "rb");
    if (!f) return ERR_SYS("cannot open plan file %s: %m", path);
    struct stat st;
    if (fstat(fileno(f), &st) != 0) {
        res = ERR_SYS("cannot stat plan file %s: %m", path);
        goto close_file;
    }
    if (!S_ISREG(st.st_mode)) {
        res = ERR_ARG("plan file %s is not a regular file", path);
        goto close_file;
    }
    if ((uint64_t)st.st_size > PLAN_MAX_FILE_BYTES) {
        res = ERR(MSCCLPP_ERR_INVALID_PLAN, "plan file %s is too large (%lld bytes, limit %zu)",
                  path, (long long)st.st_size, PLAN_MAX_FILE_BYTES);
        goto close_file;
    }
    size_t size = (size_t)st.st_size;
    char *buf = malloc(size + 1);
    if (!buf) {
        res = ERR(MSCCLPP_ERR_NO_MEMORY, "no memory to read plan file %s (%zu bytes)", path, size);
        goto close_file;
    }
    size_t got = fread(buf, 1, size, f);
    if (got != size || ferror(f)) {
        res = ERR_SYS("cannot read plan file %s: %m", path);
        goto free_buf;
    }
    buf[size] = '\0';
    /* The file is read once here; the executor never goes back to it (plan-format P26). */
    res = plan_load_json(buf, size, path, plan);

free_buf:
    free(buf);
close_file:
    fclose(f);
    return res;
}

MSCCLPP_API mscclpp_result_t mscclpp_plan_load_string(const char *json, size_t len,
                                                      mscclpp_plan_t **plan)
{
    CHECK_ARG(json != NULL);
    CHECK_ARG(plan != NULL);
    return plan_load_json(json, len, "<string>", plan);
}

MSCCLPP_API mscclpp_result_t mscclpp_plan_destroy(mscclpp_plan_t *plan)
{
    plan_free(plan);
    return MSCCLPP_OK;
}

MSCCLPP_API mscclpp_result_t mscclpp_plan_verify(const mscclpp_plan_t *plan)
{
    CHECK_ARG(plan != NULL);
    return plan_verify(plan);
}

MSCCLPP_API mscclpp_result_t mscclpp_plan_chunks(const mscclpp_plan_t *plan, int rank,
                                                 uint32_t *input_chunks, uint32_t *output_chunks,
                                                 uint32_t *scratch_chunks)
{
    CHECK_ARG(plan != NULL);
    if (rank < 0 || rank >= plan->nranks)
        return ERR_ARG("rank %d is not in plan '%s' (%d ranks)", rank, plan->name, plan->nranks);
    const plan_gpu_t *g = &plan->gpus[rank];
    if (input_chunks) *input_chunks = g->input_chunks;
    if (output_chunks) *output_chunks = g->output_chunks;
    if (scratch_chunks) *scratch_chunks = g->scratch_chunks;
    return MSCCLPP_OK;
}

MSCCLPP_API const char *mscclpp_plan_name(const mscclpp_plan_t *plan)
{
    return plan ? plan->name : NULL;
}

MSCCLPP_API const char *mscclpp_plan_file(const mscclpp_plan_t *plan)
{
    return plan ? plan->file : NULL;
}

MSCCLPP_API const char *mscclpp_plan_collective(const mscclpp_plan_t *plan)
{
    return plan ? plan->collective : NULL;
}

MSCCLPP_API int mscclpp_plan_world_size(const mscclpp_plan_t *plan)
{
    return plan ? plan->nranks : 0;
}

MSCCLPP_API int mscclpp_plan_is_inplace(const mscclpp_plan_t *plan)
{
    return plan ? plan->inplace : 0;
}

MSCCLPP_API uint64_t mscclpp_plan_min_message_size(const mscclpp_plan_t *plan)
{
    return plan ? plan->min_message_size : 0;
}

MSCCLPP_API uint64_t mscclpp_plan_max_message_size(const mscclpp_plan_t *plan)
{
    return plan ? plan->max_message_size : 0;
}

static const struct {
    const char *name;
    size_t size;
} dtypes[MSCCLPP_DTYPE_COUNT] = {
    [MSCCLPP_FLOAT32] = {"float32", 4},   [MSCCLPP_FLOAT16] = {"float16", 2},
    [MSCCLPP_BFLOAT16] = {"bfloat16", 2}, [MSCCLPP_INT32] = {"int32", 4},
    [MSCCLPP_UINT32] = {"uint32", 4},     [MSCCLPP_INT8] = {"int8", 1},
    [MSCCLPP_UINT8] = {"uint8", 1},       [MSCCLPP_FLOAT64] = {"float64", 8},
    [MSCCLPP_FP8_E4M3] = {"fp8_e4m3", 1}, [MSCCLPP_FP8_E5M2] = {"fp8_e5m2", 1},
    [MSCCLPP_INT64] = {"int64", 8},       [MSCCLPP_UINT64] = {"uint64", 8},
};

MSCCLPP_API size_t mscclpp_dtype_size(mscclpp_dtype_t dtype)
{
    if ((int)dtype < 0 || dtype >= MSCCLPP_DTYPE_COUNT) return 0;
    return dtypes[dtype].size;
}

MSCCLPP_API const char *mscclpp_dtype_name(mscclpp_dtype_t dtype)
{
    if ((int)dtype < 0 || dtype >= MSCCLPP_DTYPE_COUNT) return NULL;
    return dtypes[dtype].name;
}

MSCCLPP_API const char *mscclpp_redop_name(mscclpp_redop_t op)
{
    switch (op) {
    case MSCCLPP_SUM: return "sum";
    case MSCCLPP_PROD: return "prod";
    case MSCCLPP_MIN: return "min";
    case MSCCLPP_MAX: return "max";
    case MSCCLPP_REDOP_PLAN: return "plan";
    default: return NULL;
    }
}

int exec_plan_nblocks(const struct mscclpp_plan *plan)
{
    int nb = 0;
    for (int r = 0; r < plan->nranks; r++)
        if (plan->gpus[r].n_blocks > nb) nb = plan->gpus[r].n_blocks;
    return nb;
}

MSCCLPP_API int mscclpp_plan_num_blocks(const mscclpp_plan_t *plan)
{
    return plan ? exec_plan_nblocks(plan) : 0;
}
