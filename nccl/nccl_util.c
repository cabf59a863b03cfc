/* libmscclpp_nccl: errors, logging, data types and host-side element math. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "nccl/nccl_internal.h"

/* NCCL keeps one last-error string; ours is per thread so concurrent communicators (one
 * thread per rank, ncclCommInitAll) do not overwrite each other's explanation. */
static _Thread_local char last_error[1024];

const char *shim_last_error(void)
{
    return last_error;
}

void shim_clear_error(void)
{
    last_error[0] = '\0';
}

/* The NCCL calls that read errors live here, beside the errors (the rest: nccl_comm.c). */
const char *ncclGetErrorString(ncclResult_t result)
{
    switch (result) {
    case ncclSuccess: return "no error";
    case ncclUnhandledCudaError: return "unhandled cuda error";
    case ncclSystemError: return "unhandled system error (run with MSCCLPP_DEBUG=INFO for details)";
    case ncclInternalError: return "internal error (a bug in libmscclpp_nccl: please report it)";
    case ncclInvalidArgument: return "invalid argument (run with MSCCLPP_DEBUG=WARN for details)";
    case ncclInvalidUsage: return "invalid usage (run with MSCCLPP_DEBUG=WARN for details)";
    case ncclRemoteError: return "remote process exited or there was a network error";
    case ncclInProgress: return "NCCL operation in progress";
    default: return "unknown result code";
    }
}

const char *ncclGetLastError(ncclComm_t comm)
{
    (void)comm; /* one message per thread, whichever communicator failed */
    return shim_last_error();
}

ncclResult_t shim_error(ncclResult_t code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_error, sizeof last_error, fmt, ap);
    va_end(ap);
    /* WARN through the core library's logger, so a failing job's log says why */
    mscclpp_log(MSCCLPP_LOG_WARN, "NCCL %s (%s)", last_error, ncclGetErrorString(code));
    return code;
}

ncclResult_t shim_quiet_error(ncclResult_t code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_error, sizeof last_error, fmt, ap);
    va_end(ap);
    return code;
}

ncclResult_t shim_from_mscclpp(mscclpp_result_t r, const char *what)
{
    ncclResult_t code;
    switch (r) {
    case MSCCLPP_OK: return ncclSuccess;
    case MSCCLPP_ERR_INVALID_ARG: code = ncclInvalidArgument; break;
    case MSCCLPP_ERR_INVALID_PLAN:
    case MSCCLPP_ERR_UNSUPPORTED:
    /* a call interrupted by ncclCommAbort on another thread ran on a communicator that the
     * program was destroying: NCCL allows no use of it from then on */
    case MSCCLPP_ERR_ABORTED: code = ncclInvalidUsage; break;
    case MSCCLPP_ERR_SYSTEM:
    case MSCCLPP_ERR_NO_MEMORY: code = ncclSystemError; break;
    case MSCCLPP_ERR_REMOTE:
    case MSCCLPP_ERR_TIMEOUT: code = ncclRemoteError; break;
    default: code = ncclInternalError; break;
    }
    return shim_error(code, "%s: %s (%s)", what, mscclpp_last_error(), mscclpp_result_string(r));
}

bool shim_info_enabled(void) { return mscclpp_log_enabled(MSCCLPP_LOG_INFO) != 0; }

void shim_info(const char *fmt, ...)
{
    if (!shim_info_enabled()) return;
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    mscclpp_log(MSCCLPP_LOG_INFO, "NCCL %s", msg);
}

const char *shim_config(const char *name)
{
    const char *v = mscclpp_config_get(name); /* declared in libmscclpp's table */
    return v ? v : "";
}

ncclResult_t shim_check_comm(ncclComm_t comm, const char *who)
{
    if (!comm) return shim_error(ncclInvalidArgument, "%s: comm is NULL", who);
    if (comm->magic != SHIM_COMM_MAGIC)
        return shim_error(ncclInvalidArgument,
                          "%s: comm %p is not a live communicator of libmscclpp_nccl (destroyed, "
                          "or created by another NCCL library)", who, (void *)comm);
    return ncclSuccess;
}

size_t shim_dtype_size(ncclDataType_t dt)
{
    switch (dt) {
    case ncclInt8:
    case ncclUint8:
    case ncclFloat8e4m3:
    case ncclFloat8e5m2: return 1;
    case ncclFloat16:
    case ncclBfloat16: return 2;
    case ncclInt32:
    case ncclUint32:
    case ncclFloat32: return 4;
    case ncclInt64:
    case ncclUint64:
    case ncclFloat64: return 8;
    default: return 0;
    }
}

const char *shim_dtype_name(ncclDataType_t dt)
{
    static const char *names[] = {"ncclInt8",    "ncclUint8",     "ncclInt32",
                                  "ncclUint32",  "ncclInt64",     "ncclUint64",
                                  "ncclFloat16", "ncclFloat32",   "ncclFloat64",
                                  "ncclBfloat16", "ncclFloat8e4m3", "ncclFloat8e5m2"};
    return (int)dt >= 0 && dt < ncclNumTypes ? names[dt] : "invalid dtype";
}

bool shim_dtype_map(ncclDataType_t dt, mscclpp_dtype_t *out)
{
    switch (dt) {
    case ncclInt8: *out = MSCCLPP_INT8; return true;
    case ncclUint8: *out = MSCCLPP_UINT8; return true;
    case ncclInt32: *out = MSCCLPP_INT32; return true;
    case ncclUint32: *out = MSCCLPP_UINT32; return true;
    case ncclFloat16: *out = MSCCLPP_FLOAT16; return true;
    case ncclFloat32: *out = MSCCLPP_FLOAT32; return true;
    case ncclFloat64: *out = MSCCLPP_FLOAT64; return true;
    case ncclBfloat16: *out = MSCCLPP_BFLOAT16; return true;
    case ncclFloat8e4m3: *out = MSCCLPP_FP8_E4M3; return true;
    case ncclFloat8e5m2: *out = MSCCLPP_FP8_E5M2; return true;
    case ncclInt64: *out = MSCCLPP_INT64; return true;
    case ncclUint64: *out = MSCCLPP_UINT64; return true;
    default: return false;
    }
}

const char *shim_op_name(ncclRedOp_t op)
{
    switch (op) {
    case ncclSum: return "ncclSum";
    case ncclProd: return "ncclProd";
    case ncclMax: return "ncclMax";
    case ncclMin: return "ncclMin";
    case ncclAvg: return "ncclAvg";
    default: return (int)op >= (int)ncclNumOps ? "PreMulSum" : "invalid op";
    }
}
