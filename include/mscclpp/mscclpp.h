/*
 * libmscclpp — collective communication through execution plans.
 *
 * One public header for the C API. Every function returns an mscclpp_result_t; on failure
 * mscclpp_last_error() gives a message for the calling thread. Output arguments come last.
 */
#ifndef MSCCLPP_MSCCLPP_H
#define MSCCLPP_MSCCLPP_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(MSCCLPP_BUILDING_LIBRARY)
#define MSCCLPP_API __attribute__((visibility("default")))
#else
#define MSCCLPP_API
#endif

#define MSCCLPP_VERSION_MAJOR 0
#define MSCCLPP_VERSION_MINOR 1
#define MSCCLPP_VERSION_PATCH 0

/* ---------------------------------------------------------------------------------------------
 * Results and errors
 * ------------------------------------------------------------------------------------------- */

/** Result of every library call: 0 is success, negative values are errors by kind. */
typedef enum {
    MSCCLPP_OK = 0,
    MSCCLPP_ERR_INVALID_ARG = -1,  /**< a bad argument (NULL, out of range, wrong size) */
    MSCCLPP_ERR_INVALID_PLAN = -2, /**< a plan that does not parse or validate */
    MSCCLPP_ERR_UNSUPPORTED = -3,  /**< the backend or build cannot do this */
    MSCCLPP_ERR_SYSTEM = -4,       /**< a system or driver call failed (see the message) */
    MSCCLPP_ERR_REMOTE = -5,       /**< a peer failed, closed or sent something invalid */
    MSCCLPP_ERR_TIMEOUT = -6,      /**< a wait exceeded MSCCLPP_TIMEOUT */
    MSCCLPP_ERR_INTERNAL = -7,     /**< a bug in the library */
    MSCCLPP_ERR_NO_MEMORY = -8,    /**< an allocation failed */
    MSCCLPP_ERR_ABORTED = -9,      /**< the communicator was aborted (mscclpp_comm_abort) */
} mscclpp_result_t;

/** Short constant name of a result ("MSCCLPP_ERR_TIMEOUT"). Never NULL. */
MSCCLPP_API const char *mscclpp_result_string(mscclpp_result_t result);

/** Message of the last error seen by the calling thread ("" if none). Never NULL. */
MSCCLPP_API const char *mscclpp_last_error(void);

/** Library version as three integers; any pointer may be NULL. */
MSCCLPP_API void mscclpp_version(int *major, int *minor, int *patch);

/* ---------------------------------------------------------------------------------------------
 * Bootstrap: out-of-band exchange between ranks (TCP, or MPI in <mscclpp/mscclpp_mpi.h>)
 * ------------------------------------------------------------------------------------------- */

#define MSCCLPP_UNIQUE_ID_BYTES 128

/** Identifies one bootstrap session: root address and a random secret. Copy it to all ranks. */
typedef struct {
    char internal[MSCCLPP_UNIQUE_ID_BYTES];
} mscclpp_unique_id_t;

typedef struct mscclpp_bootstrap mscclpp_bootstrap_t;

/**
 * Create a unique id and start its root service in this process (like ncclGetUniqueId).
 * The root service runs in a background thread until every rank has joined or
 * MSCCLPP_TIMEOUT passes. The listen address comes from MSCCLPP_SOCKET_IFNAME or
 * MSCCLPP_MASTER_ADDR/MSCCLPP_MASTER_PORT when set.
 */
MSCCLPP_API mscclpp_result_t mscclpp_get_unique_id(mscclpp_unique_id_t *id);

/** Join the bootstrap session `id` as `rank` of `nranks` (collective). */
MSCCLPP_API mscclpp_result_t mscclpp_bootstrap_create(const mscclpp_unique_id_t *id, int rank,
                                                      int nranks, mscclpp_bootstrap_t **boot);

/**
 * Join a bootstrap session named by an address: "ip:port", "interface:ip:port", or NULL to
 * use MSCCLPP_MASTER_ADDR and MSCCLPP_MASTER_PORT. Rank 0 listens there and serves as root.
 * The secret is derived from the address and MSCCLPP_BOOTSTRAP_SECRET (when set), so this form
 * is only as secret as those inputs: set MSCCLPP_BOOTSTRAP_SECRET to a private value on every
 * rank, or use mscclpp_get_unique_id, when other users can reach the port.
 */
MSCCLPP_API mscclpp_result_t mscclpp_bootstrap_create_from_address(const char *address, int rank,
                                                                   int nranks,
                                                                   mscclpp_bootstrap_t **boot);

MSCCLPP_API mscclpp_result_t mscclpp_bootstrap_rank(const mscclpp_bootstrap_t *boot, int *rank);
MSCCLPP_API mscclpp_result_t mscclpp_bootstrap_size(const mscclpp_bootstrap_t *boot, int *nranks);

/**
 * All-gather: `data` holds nranks slots of `bytes_per_rank` bytes; this rank's slot
 * (data + rank * bytes_per_rank) is sent, every other slot is filled in.
 */
MSCCLPP_API mscclpp_result_t mscclpp_bootstrap_allgather(mscclpp_bootstrap_t *boot, void *data,
                                                         size_t bytes_per_rank);

/** Send `bytes` to `peer` with `tag`; messages between a pair with the same tag keep order. */
MSCCLPP_API mscclpp_result_t mscclpp_bootstrap_send(mscclpp_bootstrap_t *boot, const void *data,
                                                    size_t bytes, int peer, int tag);

/** Receive exactly `bytes` from `peer` with `tag`; a size mismatch is an error. */
MSCCLPP_API mscclpp_result_t mscclpp_bootstrap_recv(mscclpp_bootstrap_t *boot, void *data,
                                                    size_t bytes, int peer, int tag);

MSCCLPP_API mscclpp_result_t mscclpp_bootstrap_barrier(mscclpp_bootstrap_t *boot);

/** Close the session. Safe on NULL. */
MSCCLPP_API mscclpp_result_t mscclpp_bootstrap_destroy(mscclpp_bootstrap_t *boot);

/**
 * A bootstrap you provide (over an existing MPI, PMIx or job-launcher channel): the library
 * calls these with your `ctx`. Each must return within `timeout_ns` nanoseconds (the
 * MSCCLPP_TIMEOUT in force) with MSCCLPP_ERR_TIMEOUT if it cannot finish, and report failures
 * with mscclpp_report_error() so mscclpp_last_error() explains them. Arguments are checked
 * before a call (peer in range and not this rank; data non-NULL when bytes > 0).
 * mscclpp_bootstrap_create_mpi() (<mscclpp/mscclpp_mpi.h>, library mscclpp_mpi) is one.
 */
typedef struct {
    /** All-gather: data holds nranks slots of bytes_per_rank; this rank's slot is filled. */
    mscclpp_result_t (*allgather)(void *ctx, void *data, size_t bytes_per_rank,
                                  uint64_t timeout_ns);
    mscclpp_result_t (*send)(void *ctx, const void *data, size_t bytes, int peer, int tag,
                             uint64_t timeout_ns);
    /** Receive exactly `bytes` (a size mismatch is an error) from `peer` with `tag`. */
    mscclpp_result_t (*recv)(void *ctx, void *data, size_t bytes, int peer, int tag,
                             uint64_t timeout_ns);
    mscclpp_result_t (*barrier)(void *ctx, uint64_t timeout_ns);
    /** Release ctx; called once by mscclpp_bootstrap_destroy. May be NULL. */
    void (*destroy)(void *ctx);
} mscclpp_bootstrap_ops_t;

/** Wrap a bootstrap you provide; `ops` must stay valid until the bootstrap is destroyed. */
MSCCLPP_API mscclpp_result_t mscclpp_bootstrap_create_custom(const mscclpp_bootstrap_ops_t *ops,
                                                             void *ctx, int rank, int nranks,
                                                             mscclpp_bootstrap_t **boot);

/** The bound of every wait (MSCCLPP_TIMEOUT) in nanoseconds. */
MSCCLPP_API uint64_t mscclpp_timeout_ns(void);

/**
 * Record an error for mscclpp_last_error() from code outside the library (a custom bootstrap)
 * and log it like the library's own; returns `result` (printf-style message).
 */
MSCCLPP_API mscclpp_result_t mscclpp_report_error(mscclpp_result_t result, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/**
 * The value in force of a variable of the library's configuration table (every MSCCLPP_*
 * variable, the NCCL-API library's included; `mscclpp-info --config` lists them): the
 * environment's text, else the default ("" when there is none). NULL when the table declares no
 * variable of that name. For code built on the library, so that its variables are declared,
 * documented and listed in one place.
 */
MSCCLPP_API const char *mscclpp_config_get(const char *name);

/** Levels of mscclpp_log(), as MSCCLPP_DEBUG names them. */
typedef enum {
    MSCCLPP_LOG_WARN = 1,
    MSCCLPP_LOG_INFO = 2,
    MSCCLPP_LOG_TRACE = 3,
} mscclpp_log_level_t;

/** True when mscclpp_log() at `level` would print (MSCCLPP_DEBUG, MSCCLPP_DEBUG_SUBSYS). */
MSCCLPP_API int mscclpp_log_enabled(mscclpp_log_level_t level);

/**
 * Log a line through the library's logger (MSCCLPP_DEBUG_FILE, host, pid and time), under the
 * subsystem NCCL: for the libraries built on this one (libmscclpp_nccl).
 */
MSCCLPP_API void mscclpp_log(mscclpp_log_level_t level, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* ---------------------------------------------------------------------------------------------
 * Communicator
 * ------------------------------------------------------------------------------------------- */

typedef struct mscclpp_comm mscclpp_comm_t;

/**
 * Create a communicator over an existing bootstrap (collective). The communicator borrows
 * `boot`: destroy the communicator first.
 */
MSCCLPP_API mscclpp_result_t mscclpp_comm_create(mscclpp_bootstrap_t *boot, mscclpp_comm_t **comm);

/** NCCL-style shortcut: TCP bootstrap from `id` owned by the communicator (collective). */
MSCCLPP_API mscclpp_result_t mscclpp_comm_init_rank(const mscclpp_unique_id_t *id, int rank,
                                                    int nranks, mscclpp_comm_t **comm);

MSCCLPP_API mscclpp_result_t mscclpp_comm_rank(const mscclpp_comm_t *comm, int *rank);
MSCCLPP_API mscclpp_result_t mscclpp_comm_size(const mscclpp_comm_t *comm, int *nranks);
/** Ranks that share this rank's node (same host name, boot id and network namespace, or the
 * same MSCCLPP_NODE_ID). */
MSCCLPP_API mscclpp_result_t mscclpp_comm_local_size(const mscclpp_comm_t *comm, int *nlocal);
MSCCLPP_API mscclpp_result_t mscclpp_comm_bootstrap(mscclpp_comm_t *comm,
                                                    mscclpp_bootstrap_t **boot);
/**
 * Free the communicator. Destroy its executors first, and call it only once every call on the
 * communicator and its executors has returned (mscclpp_comm_abort makes running calls return).
 */
MSCCLPP_API mscclpp_result_t mscclpp_comm_destroy(mscclpp_comm_t *comm);
/**
 * Abort the communicator (as ncclCommAbort aborts its operations), from any thread: every call
 * in progress on it, on its bootstrap (when the communicator owns it or not) and on its
 * executors gives up at its next poll (within about 10 ms on the host backend) and returns
 * MSCCLPP_ERR_ABORTED, and every later call that needs a peer fails at once the same way. Peers
 * are not told: their waits on this rank end with their own timeout or when this rank's
 * connections close. Frees nothing: destroy the executors and then the communicator once the
 * interrupted calls have returned. Calling it again does nothing.
 */
MSCCLPP_API mscclpp_result_t mscclpp_comm_abort(mscclpp_comm_t *comm);

/* ---------------------------------------------------------------------------------------------
 * Backend, memory and streams (through the HAL of the selected backend)
 * ------------------------------------------------------------------------------------------- */

/** Name of the backend in use ("host", "cuda", "hip"); selects one on first use. */
MSCCLPP_API const char *mscclpp_backend_name(void);

/**
 * The calling thread's device of the selected backend: its index in *device (may be NULL) and a
 * one-line description in text[cap] ("NVIDIA H100 80GB HBM3, sm_90, 132 multiprocessors,
 * 79.1 GiB"; on the host backend the CPU). Errors: INVALID_ARG (text NULL or cap 0), the
 * backend's own error if no backend can be selected or the device cannot be queried.
 */
MSCCLPP_API mscclpp_result_t mscclpp_device_describe(int *device, char *text, size_t cap);

/** Whether the calling thread's device of the selected backend supports NVLink SHARP multicast
 * (NVLS: CUDA multicast objects, sm_90+ with a fabric that has it). Sets *supported to 1 or 0;
 * 0 on the host and HIP backends. Errors: INVALID_ARG (NULL), the backend's own error if no
 * backend can be selected. */
MSCCLPP_API mscclpp_result_t mscclpp_nvls_supported(int *supported);

/** Device memory that peers can map (memfd on the host backend, cuMem on CUDA). */
MSCCLPP_API mscclpp_result_t mscclpp_malloc(size_t bytes, void **ptr);
/** Free memory from mscclpp_malloc. Finish (synchronize) the collectives that use it first.
 * An executor's state for buffers in freed memory is rebuilt at their next use, even when a
 * new allocation comes back at the same address; that rebuild is collective, so ranks that
 * free and allocate again must do it alike (as the same program on every rank does). */
MSCCLPP_API mscclpp_result_t mscclpp_free(void *ptr);
/** Synchronous copy/set between any memory the backend knows. */
MSCCLPP_API mscclpp_result_t mscclpp_memcpy(void *dst, const void *src, size_t bytes);
MSCCLPP_API mscclpp_result_t mscclpp_memset(void *dst, int value, size_t bytes);

/** An ordered work queue: a CUDA/HIP stream, or a worker queue on the host backend. */
typedef struct mscclpp_stream *mscclpp_stream_t;
MSCCLPP_API mscclpp_result_t mscclpp_stream_create(mscclpp_stream_t *stream);
/**
 * Wait for the work queued on `stream`. Returns the first error of that work: the stream's
 * own, or the error a collective queued on it recorded (a wait that timed out, naming plan,
 * rank, block, op and peer); the executor that queued it is then broken (mscclpp_execute).
 */
MSCCLPP_API mscclpp_result_t mscclpp_stream_synchronize(mscclpp_stream_t stream);
/** Synchronize (returning what mscclpp_stream_synchronize would), then free the stream. */
MSCCLPP_API mscclpp_result_t mscclpp_stream_destroy(mscclpp_stream_t stream);
/**
 * Wrap a stream the caller already has (a cudaStream_t or hipStream_t of the backend in use;
 * NULL is the legacy default stream) without taking it over: mscclpp_stream_destroy frees only
 * the wrapper. The host backend has no native streams: MSCCLPP_ERR_UNSUPPORTED there.
 */
MSCCLPP_API mscclpp_result_t mscclpp_stream_wrap(void *native, mscclpp_stream_t *stream);
/**
 * Queue a copy (or a fill) on `stream`, ordered with the work queued there; the call returns at
 * once. Source and destination may be device memory or host memory (pinned memory lets a GPU
 * copy run without the host). A NULL stream copies now, as mscclpp_memcpy does.
 */
MSCCLPP_API mscclpp_result_t mscclpp_memcpy_async(void *dst, const void *src, size_t bytes,
                                                  mscclpp_stream_t stream);
MSCCLPP_API mscclpp_result_t mscclpp_memset_async(void *dst, int value, size_t bytes,
                                                  mscclpp_stream_t stream);
/**
 * Queue fn(arg) on `stream` (cudaLaunchHostFunc): it runs on a thread of the library once the
 * work queued before it is done, and the work queued after it waits for it. fn must not call
 * libmscclpp or the device runtime, and should be short. A NULL stream runs it now.
 */
MSCCLPP_API mscclpp_result_t mscclpp_stream_launch_host_func(mscclpp_stream_t stream,
                                                             void (*fn)(void *), void *arg);
/**
 * Make the work queued on `stream` from now on wait for the work queued on `other` so far,
 * without blocking the host (an event recorded on `other` and waited for on `stream`). A NULL
 * `other` has nothing queued; a NULL `stream` (synchronous) waits for `other` now.
 */
MSCCLPP_API mscclpp_result_t mscclpp_stream_wait_stream(mscclpp_stream_t stream,
                                                        mscclpp_stream_t other);

/* ---------------------------------------------------------------------------------------------
 * Graphs: capture work queued on a stream once, replay it many times (docs/graphs.md)
 * ------------------------------------------------------------------------------------------- */

/** Work captured from a stream: a CUDA/HIP graph (instantiated), or a recording of the host
 * backend's stream tasks. */
typedef struct mscclpp_graph *mscclpp_graph_t;

/**
 * Begin capturing `stream` (not NULL): until mscclpp_stream_end_capture, the work queued on it
 * (mscclpp_execute*, the collectives, graph launches) is recorded, not run. CUDA/HIP: a stream
 * capture in global mode (cudaStreamBeginCapture). A collective called while capturing takes
 * the capture-safe path: whatever it must set up first (connections, scratch, the lowered
 * plan) is done at once, outside the graph; nothing it needs on a replay lives on the host.
 * Synchronizing a capturing stream fails and invalidates the capture, as on CUDA.
 * Errors: INVALID_ARG (NULL, a stream capturing already), the backend's own.
 */
MSCCLPP_API mscclpp_result_t mscclpp_stream_begin_capture(mscclpp_stream_t stream);
/**
 * End the capture of `stream` and return what it recorded in *graph (destroy it with
 * mscclpp_graph_destroy). Errors: INVALID_ARG when the stream is not capturing or the capture
 * was invalidated (the message says by what); *graph is then NULL.
 */
MSCCLPP_API mscclpp_result_t mscclpp_stream_end_capture(mscclpp_stream_t stream,
                                                        mscclpp_graph_t *graph);
/** Whether work queued on `stream` now is captured (a capture of ours or the application's,
 * e.g. torch.cuda.graph on a wrapped stream): *capturing 1 or 0. */
MSCCLPP_API mscclpp_result_t mscclpp_stream_is_capturing(mscclpp_stream_t stream, int *capturing);
/**
 * Queue one replay of `graph` on `stream` (not NULL; it may differ from the captured stream).
 * Collectives replay with the buffers, sizes and plans of their capture and read the buffers'
 * contents at replay time; every rank replays its graphs in the same order, as it would call
 * the collectives. Synchronize the stream to wait: that sync returns an error a replayed
 * collective recorded, as for a direct call.
 */
MSCCLPP_API mscclpp_result_t mscclpp_graph_launch(mscclpp_graph_t graph, mscclpp_stream_t stream);
/** Free a graph; launches of it already queued still run. NULL is a no-op. */
MSCCLPP_API mscclpp_result_t mscclpp_graph_destroy(mscclpp_graph_t graph);

/* ---------------------------------------------------------------------------------------------
 * Registered memory, semaphores, channels
 * ------------------------------------------------------------------------------------------- */

/** Transport bits for registration. */
enum {
    MSCCLPP_TRANSPORT_IPC = 1u << 0, /**< CUDA/HIP IPC, or shared memory on the host backend */
    MSCCLPP_TRANSPORT_UCX = 1u << 1,
    MSCCLPP_TRANSPORT_IB = 1u << 2,
};

typedef struct mscclpp_regmem mscclpp_regmem_t;

/** Register [ptr, ptr+bytes) (inside memory from mscclpp_malloc) for the given transports. */
MSCCLPP_API mscclpp_result_t mscclpp_register_memory(mscclpp_comm_t *comm, void *ptr, size_t bytes,
                                                     unsigned transports, mscclpp_regmem_t **mem);
/** Send a registration to `peer` (the peer calls mscclpp_regmem_recv with the same tag). */
MSCCLPP_API mscclpp_result_t mscclpp_regmem_send(mscclpp_comm_t *comm, const mscclpp_regmem_t *mem,
                                                 int peer, int tag);
/** Receive a peer's registration and map it locally. */
MSCCLPP_API mscclpp_result_t mscclpp_regmem_recv(mscclpp_comm_t *comm, int peer, int tag,
                                                 mscclpp_regmem_t **mem);
/** Versioned wire encoding of a registration; `*len` gets the bytes needed. */
MSCCLPP_API mscclpp_result_t mscclpp_regmem_serialize(const mscclpp_regmem_t *mem, void *buf,
                                                      size_t cap, size_t *len);
MSCCLPP_API mscclpp_result_t mscclpp_regmem_deserialize(mscclpp_comm_t *comm, const void *buf,
                                                        size_t len, mscclpp_regmem_t **mem);
/** Local address of the memory (mapped, for a peer's registration). */
MSCCLPP_API void *mscclpp_regmem_ptr(const mscclpp_regmem_t *mem);
MSCCLPP_API size_t mscclpp_regmem_size(const mscclpp_regmem_t *mem);
MSCCLPP_API int mscclpp_regmem_rank(const mscclpp_regmem_t *mem);
MSCCLPP_API mscclpp_result_t mscclpp_regmem_destroy(mscclpp_regmem_t *mem);

typedef struct mscclpp_semaphore mscclpp_semaphore_t;

/**
 * A memory-based semaphore pair with `peer` (collective between the two ranks, matched by
 * `tag`): each side's signal increments the other side's inbound counter.
 */
MSCCLPP_API mscclpp_result_t mscclpp_semaphore_create(mscclpp_comm_t *comm, int peer, int tag,
                                                      mscclpp_semaphore_t **sem);
MSCCLPP_API mscclpp_result_t mscclpp_semaphore_destroy(mscclpp_semaphore_t *sem);

typedef struct mscclpp_memory_channel mscclpp_memory_channel_t;

/**
 * A memory channel: semaphore `sem` (owned by the caller), the peer's registered memory `dst`
 * and local memory `src`. Data moves by direct loads/stores; put/get offsets are in bytes.
 */
MSCCLPP_API mscclpp_result_t mscclpp_memory_channel_create(mscclpp_semaphore_t *sem,
                                                           const mscclpp_regmem_t *dst, void *src,
                                                           mscclpp_memory_channel_t **chan);
MSCCLPP_API mscclpp_result_t mscclpp_memory_channel_put(mscclpp_memory_channel_t *chan,
                                                        size_t dst_offset, size_t src_offset,
                                                        size_t bytes);
MSCCLPP_API mscclpp_result_t mscclpp_memory_channel_get(mscclpp_memory_channel_t *chan,
                                                        size_t src_offset, size_t dst_offset,
                                                        size_t bytes);
MSCCLPP_API mscclpp_result_t mscclpp_memory_channel_signal(mscclpp_memory_channel_t *chan);
MSCCLPP_API mscclpp_result_t mscclpp_memory_channel_relaxed_signal(mscclpp_memory_channel_t *chan);
/** Wait for one signal from the peer; bounded by MSCCLPP_TIMEOUT. */
MSCCLPP_API mscclpp_result_t mscclpp_memory_channel_wait(mscclpp_memory_channel_t *chan);
MSCCLPP_API mscclpp_result_t mscclpp_memory_channel_relaxed_wait(mscclpp_memory_channel_t *chan);
/** Make earlier puts visible to the peer (a fence for memory channels). */
MSCCLPP_API mscclpp_result_t mscclpp_memory_channel_flush(mscclpp_memory_channel_t *chan);
MSCCLPP_API mscclpp_result_t mscclpp_memory_channel_destroy(mscclpp_memory_channel_t *chan);

typedef struct mscclpp_port_channel mscclpp_port_channel_t;

/**
 * A port channel with `peer` (collective between the two ranks, matched by `tag`), driven from
 * the host: data moves through a transport (ipc within a node, ib or ucx across nodes; see
 * mscclpp-info), not by loads and stores. This rank exposes [`recv`, +`recv_bytes`) for the
 * peer's puts and puts from [`send`, +`send_bytes`); both must be memory from mscclpp_malloc
 * (either may be NULL with 0 bytes). Plans use port channels through the executor instead.
 */
MSCCLPP_API mscclpp_result_t mscclpp_port_channel_create(mscclpp_comm_t *comm, int peer, int tag,
                                                         void *recv, size_t recv_bytes,
                                                         void *send, size_t send_bytes,
                                                         mscclpp_port_channel_t **chan);
/** Start copying send[src_offset, +bytes) to the peer's recv[dst_offset, ...). */
MSCCLPP_API mscclpp_result_t mscclpp_port_channel_put(mscclpp_port_channel_t *chan,
                                                      size_t dst_offset, size_t src_offset,
                                                      size_t bytes);
/** Signal the peer after every put before it has landed. */
MSCCLPP_API mscclpp_result_t mscclpp_port_channel_signal(mscclpp_port_channel_t *chan);
/**
 * Wait until every put and signal issued so far completed at the peer (bounded). Over
 * transports that emulate one-sided operations (UCX over tcp) the peer must be inside a call of
 * its channel (wait, flush) meanwhile; flush before the last signal/wait exchange, not after.
 */
MSCCLPP_API mscclpp_result_t mscclpp_port_channel_flush(mscclpp_port_channel_t *chan);
/** Wait for one signal from the peer; bounded by MSCCLPP_TIMEOUT. */
MSCCLPP_API mscclpp_result_t mscclpp_port_channel_wait(mscclpp_port_channel_t *chan);
/** Name of the transport the channel uses ("ipc", "ucx", "ib"); NULL for NULL. */
MSCCLPP_API const char *mscclpp_port_channel_transport(const mscclpp_port_channel_t *chan);
/** Close at once, without flushing (flush first while the peer still waits on the channel). */
MSCCLPP_API mscclpp_result_t mscclpp_port_channel_destroy(mscclpp_port_channel_t *chan);

/* ---------------------------------------------------------------------------------------------
 * Execution plans and the executor
 * ------------------------------------------------------------------------------------------- */

typedef enum {
    MSCCLPP_FLOAT32 = 0,
    MSCCLPP_FLOAT16 = 1,
    MSCCLPP_BFLOAT16 = 2,
    MSCCLPP_INT32 = 3,
    MSCCLPP_UINT32 = 4,
    MSCCLPP_INT8 = 5,
    MSCCLPP_UINT8 = 6,
    MSCCLPP_FLOAT64 = 7,
    MSCCLPP_FP8_E4M3 = 8,
    MSCCLPP_FP8_E5M2 = 9,
    MSCCLPP_INT64 = 10,
    MSCCLPP_UINT64 = 11,
    MSCCLPP_DTYPE_COUNT
} mscclpp_dtype_t;

typedef enum {
    MSCCLPP_SUM = 0,
    MSCCLPP_PROD = 1,
    MSCCLPP_MIN = 2,
    MSCCLPP_MAX = 3,
    MSCCLPP_REDOP_COUNT,
    MSCCLPP_REDOP_PLAN = -1, /**< use the reduce_op written in the plan */
} mscclpp_redop_t;

typedef enum {
    MSCCLPP_PACKET_LL16 = 0, /**< 16-byte packets, 8 payload bytes (default) */
    MSCCLPP_PACKET_LL8 = 1,  /**< 8-byte packets, 4 payload bytes */
} mscclpp_packet_t;

/** Size in bytes of one element of `dtype`, 0 if invalid. */
MSCCLPP_API size_t mscclpp_dtype_size(mscclpp_dtype_t dtype);
MSCCLPP_API const char *mscclpp_dtype_name(mscclpp_dtype_t dtype);
MSCCLPP_API const char *mscclpp_redop_name(mscclpp_redop_t op);

/**
 * Queue an elementwise scaling of `count` elements of `dtype` on `stream`: dst[i] = src[i] *
 * scalar, or, when `divisor` > 0, dst[i] = src[i] / divisor (what NCCL's PreMulSum and ncclAvg
 * need; dst may be src). Integers multiply (wrapping) and divide (truncating) in their own
 * type, float16/bfloat16/fp8 in float. The scalar is `scalar` (its bytes in `dtype`), read now,
 * or, with scalar_on_device, read from device memory at `scalar` when the work runs. A NULL
 * stream scales now. Errors: INVALID_ARG (NULL buffers or scalar, dtype out of range).
 */
MSCCLPP_API mscclpp_result_t mscclpp_scale_async(void *dst, const void *src, size_t count,
                                                 mscclpp_dtype_t dtype, int divisor,
                                                 const void *scalar, int scalar_on_device,
                                                 mscclpp_stream_t stream);

typedef struct mscclpp_plan mscclpp_plan_t;

/** Load and validate a plan file. The file is read once; errors name the JSON path. */
MSCCLPP_API mscclpp_result_t mscclpp_plan_load_file(const char *path, mscclpp_plan_t **plan);
/** Load and validate a plan from a JSON string of `len` bytes. */
MSCCLPP_API mscclpp_result_t mscclpp_plan_load_string(const char *json, size_t len,
                                                      mscclpp_plan_t **plan);
/** Release the plan. An executor that ran or registered it holds it as long as it keeps it
 *  (a context, a registry entry), so destroying a plan after a call is safe; the memory goes
 *  with the last holder. */
MSCCLPP_API mscclpp_result_t mscclpp_plan_destroy(mscclpp_plan_t *plan);
/**
 * Check a loaded plan more deeply than loading does: simulate one launch of every rank chunk by
 * chunk, for no particular size (docs/plan-checks.md §2). Every thread block steps through its
 * ops; signals and waits pair up per channel, semaphores count, barriers gather their blocks,
 * packet reads wait for their packets, pipeline bodies run twice; the data each op moves is
 * followed and ordered with vector clocks; at the end each rank's output is compared with the
 * collective's result. `python3 -m mscclpp verify` gives the same verdict on every plan.
 *
 * @param plan a plan from mscclpp_plan_load_file() or mscclpp_plan_load_string().
 * @return MSCCLPP_OK, or MSCCLPP_ERR_INVALID_PLAN when the plan deadlocks (a wait whose signal
 *         never comes, a packet read that no op writes, a barrier never full, a semaphore never
 *         released), races (data read or written without the signal, barrier or nop that
 *         orders it), leaves counters for the next launch, or computes a wrong result (the
 *         message names the rank, thread block, op and chunk); MSCCLPP_ERR_INVALID_ARG for a
 *         NULL plan; MSCCLPP_ERR_NO_MEMORY. Cost: about the plan's ops times the chunks they
 *         cover (all default plans together: about 1 s of CPU).
 */
MSCCLPP_API mscclpp_result_t mscclpp_plan_verify(const mscclpp_plan_t *plan);
/**
 * Chunk counts of `rank`'s buffers (gpus[rank].input_chunks, output_chunks, scratch_chunks):
 * input and output sizes of a call must be in the ratio of the first two. Any output pointer
 * may be NULL. Returns MSCCLPP_ERR_INVALID_ARG for a NULL plan or a rank outside the plan.
 */
MSCCLPP_API mscclpp_result_t mscclpp_plan_chunks(const mscclpp_plan_t *plan, int rank,
                                                 uint32_t *input_chunks, uint32_t *output_chunks,
                                                 uint32_t *scratch_chunks);
MSCCLPP_API const char *mscclpp_plan_name(const mscclpp_plan_t *plan);
/** The file a plan was loaded from (mscclpp_plan_load_file, a plan directory), as given; NULL
 * for a plan loaded from a string, made by the library for the job, or a NULL plan. */
MSCCLPP_API const char *mscclpp_plan_file(const mscclpp_plan_t *plan);
MSCCLPP_API const char *mscclpp_plan_collective(const mscclpp_plan_t *plan);
MSCCLPP_API int mscclpp_plan_world_size(const mscclpp_plan_t *plan);
MSCCLPP_API int mscclpp_plan_is_inplace(const mscclpp_plan_t *plan);
MSCCLPP_API uint64_t mscclpp_plan_min_message_size(const mscclpp_plan_t *plan);
MSCCLPP_API uint64_t mscclpp_plan_max_message_size(const mscclpp_plan_t *plan);

/**
 * The plan the library makes for a job of `nranks` ranks, rank r on node `node_of[r]` (any
 * labels: equal labels are one node; NULL: one node), for `collective` ("allreduce",
 * "allgather", "reducescatter", "alltoall", "broadcast", "reduce") with `protocol` "Simple" or
 * "LL" (packets; made for allreduce on one node), rooted at `root` (broadcast, reduce). The
 * executor makes these itself (docs/plan-selection.md); this call is for tools and tests:
 * `rank` -1 makes every rank's part (a whole plan, for mscclpp_plan_verify and
 * mscclpp_plan_to_json), a rank makes that rank's part only, as the executor does.
 * MSCCLPP_ERR_UNSUPPORTED (naming what is made) for a collective or protocol not made.
 */
MSCCLPP_API mscclpp_result_t mscclpp_plan_make(const char *collective, const char *protocol,
                                               int nranks, const int *node_of, int root, int rank,
                                               mscclpp_plan_t **plan);

/**
 * The plan as JSON (docs/plan-format.md), as the DSL writes it: into `buf` (`cap` bytes, NUL
 * terminated) when not NULL; *len gets the length without the NUL either way (call with a NULL
 * buffer first to size one). A plan of one rank's part is written with "rank_subset".
 */
MSCCLPP_API mscclpp_result_t mscclpp_plan_to_json(const mscclpp_plan_t *plan, char *buf, size_t cap,
                                                  size_t *len);

typedef struct mscclpp_executor mscclpp_executor_t;

/** An executor over `comm`: caches contexts (connections, scratch) per plan and buffers. */
MSCCLPP_API mscclpp_result_t mscclpp_executor_create(mscclpp_comm_t *comm,
                                                     mscclpp_executor_t **exec);
/**
 * Drop every cached context (collective across ranks). A broken executor (see mscclpp_execute)
 * is not reset: this returns its error.
 */
MSCCLPP_API mscclpp_result_t mscclpp_executor_reset(mscclpp_executor_t *exec);
/**
 * Free the executor. Work it queued on streams not synchronized since is waited for first (each
 * wait of it bounded by MSCCLPP_TIMEOUT), and the error that work recorded is returned.
 */
MSCCLPP_API mscclpp_result_t mscclpp_executor_destroy(mscclpp_executor_t *exec);
/**
 * Poll, without blocking or synchronizing any stream, for an error recorded by a collective
 * this executor queued (like ncclCommGetAsyncError). Sets *result to MSCCLPP_OK, or to the
 * error that broke the executor, whose message mscclpp_last_error() then returns; the call
 * itself returns MSCCLPP_OK unless an argument is invalid.
 */
MSCCLPP_API mscclpp_result_t mscclpp_executor_get_async_error(mscclpp_executor_t *exec,
                                                              mscclpp_result_t *result);

/**
 * Run `plan` on this rank (collective: every rank of the plan calls it with the same plan and
 * sizes). `op` replaces the plan's reduce_op unless MSCCLPP_REDOP_PLAN. Work is queued on
 * `stream`; synchronize the stream to wait for it. A NULL stream uses the executor's own and
 * waits. An in-place plan must be called in place, as NCCL defines it (allgather: send is this
 * rank's block of recv; reducescatter: recv is this rank's block of send; others: send ==
 * recv); otherwise the call fails with MSCCLPP_ERR_INVALID_ARG.
 *
 * Failures: every wait is bounded by MSCCLPP_TIMEOUT. Once a collective failed (a timeout, a
 * peer that died or sent garbage, setup that broke midway), whether the call returned the
 * error or mscclpp_stream_synchronize did, the executor is broken for good, since the ranks no
 * longer agree on where they are: every later call on it (execute, the collectives below,
 * reset) returns that error at once, with the message "executor broken by an earlier error:
 * <original>; destroy it (and the communicator) and create new ones". Recover as with
 * ncclCommAbort: destroy the executor and the communicator on every rank, bootstrap a new
 * communicator (a new unique id) and create a new executor. Errors in the arguments (bad
 * sizes, sizes that are not whole elements of `dtype`, buffers not from mscclpp_malloc) are
 * reported before any rank talks and break nothing.
 *
 * Ranks that disagree on a call (plan, collective, sizes, dtype, op, root, in-place-ness) get
 * MSCCLPP_ERR_INVALID_ARG on every rank, from the call or the stream's sync, with a message
 * naming both ranks' calls and what differs ("ranks disagree on a call: rank 0 calls ...,
 * rank 1 calls ...: they differ in size"), before any byte of the disagreeing call is read
 * outside its buffers. Such an error does not break the executor: the next call of every rank
 * first resynchronises the executors (collectively: every rank must make one, having seen the
 * error), and runs right when the ranks agree again.
 */
MSCCLPP_API mscclpp_result_t mscclpp_execute(mscclpp_executor_t *exec, const mscclpp_plan_t *plan,
                                             const void *send, void *recv, size_t send_bytes,
                                             size_t recv_bytes, mscclpp_dtype_t dtype,
                                             mscclpp_redop_t op, mscclpp_stream_t stream);
/** As mscclpp_execute, choosing the packet layout. */
MSCCLPP_API mscclpp_result_t mscclpp_execute_ex(mscclpp_executor_t *exec,
                                                const mscclpp_plan_t *plan, const void *send,
                                                void *recv, size_t send_bytes, size_t recv_bytes,
                                                mscclpp_dtype_t dtype, mscclpp_redop_t op,
                                                mscclpp_packet_t packet, mscclpp_stream_t stream);

/* Plan registry: plans selected by collective, world size, ranks per node, in-place, size. */

/** Register a plan (the executor holds it: mscclpp_plan_destroy may come before or after the
 *  executor's destroy). The plans you register are matched before the default plans the
 *  executor loaded at creation, in the order you registered them (docs/plan-selection.md). */
MSCCLPP_API mscclpp_result_t mscclpp_executor_register_plan(mscclpp_executor_t *exec,
                                                            const mscclpp_plan_t *plan,
                                                            int ranks_per_node, const char *tags);
/** Load every *.json plan of a directory into the registry (default: the installed plans), in
 *  file-name order, matched as registered plans: after your earlier ones, before the defaults. */
MSCCLPP_API mscclpp_result_t mscclpp_executor_load_plan_dir(mscclpp_executor_t *exec,
                                                            const char *dir, int *nloaded);
/**
 * Find the registered plan for a call by the registry's rule (first match; the tuning table is
 * not consulted: mscclpp_executor_choose_plan is what collective calls run);
 * MSCCLPP_ERR_UNSUPPORTED if none matches.
 */
MSCCLPP_API mscclpp_result_t mscclpp_executor_select_plan(mscclpp_executor_t *exec,
                                                          const char *collective, int inplace,
                                                          uint64_t message_bytes, const char *tags,
                                                          const mscclpp_plan_t **plan);

/* ---------------------------------------------------------------------------------------------
 * Launch shape and auto-tuning (docs/tuning.md)
 * ------------------------------------------------------------------------------------------- */

/**
 * Thread blocks per rank of `plan`: the largest count any rank of the plan runs (0 for NULL).
 * The count is part of the plan (each block runs its own list of operations), so changing it
 * means choosing another plan: the DSL writes variants (e.g. `instances`), and the tuner picks
 * among the registered ones.
 */
MSCCLPP_API int mscclpp_plan_num_blocks(const mscclpp_plan_t *plan);

/**
 * Bytes that one call of `plan` with these sizes reads and writes, all ranks together: every
 * operation's sources and destinations once (packet operations: twice on their packet side; a
 * source a put or copy repeats for several destinations once), signals and waits nothing. mscclpp-bench divides it by a copy bandwidth it measures to print
 * the bound of its "bound" column. MSCCLPP_ERR_UNSUPPORTED for a native algorithm (what it
 * moves is its own); size errors as mscclpp_execute reports them.
 */
MSCCLPP_API mscclpp_result_t mscclpp_plan_traffic(const mscclpp_plan_t *plan, size_t send_bytes,
                                                  size_t recv_bytes, mscclpp_dtype_t dtype,
                                                  uint64_t *bytes);

/**
 * The fewest bytes any implementation of `collective` ("allreduce", "allgather",
 * "reducescatter", "alltoall", "broadcast", "reduce") must read and write for one call with these
 * per-rank sizes, all `nranks` ranks together, when every rank can address its peers' buffers:
 * each input element read once and each output element written once (allreduce: 2 S per rank;
 * allgather: (N+1)/N S per rank of output size S); `inplace`: what already lies where it belongs
 * is not moved. mscclpp-bench divides it by the copy bandwidth for its "ideal" column, and
 * mscclpp_plan_traffic / this ratio says how many extra bytes a plan moves.
 * MSCCLPP_ERR_INVALID_ARG for an unknown collective or nranks < 1.
 */
MSCCLPP_API mscclpp_result_t mscclpp_collective_min_traffic(const char *collective, int nranks,
                                                            size_t send_bytes, size_t recv_bytes,
                                                            int inplace, uint64_t *bytes);

/**
 * As mscclpp_execute_ex, with the launch shape of the seeds' `execute(..., nblocks,
 * nthreads_per_block)`:
 *   - `nblocks`: 0 for the plan's own; otherwise it must equal mscclpp_plan_num_blocks(plan),
 *     else MSCCLPP_ERR_UNSUPPORTED (pick a variant with mscclpp_executor_list_plans instead).
 *   - `nthreads_per_block`: 0 for the plan's num_threads_per_block (1024 when the plan has
 *     none); otherwise the threads each block is launched with, 1 to 1024. Either is capped at
 *     the most the backend's interpreter kernel takes (CUDA: 512, its launch bound). The
 *     interpreter strides every copy and reduction over the block's threads, so any count is
 *     correct; it changes speed only. On the host backend one host thread runs a whole block,
 *     so the value is checked and has no effect there.
 */
MSCCLPP_API mscclpp_result_t mscclpp_execute_launch(mscclpp_executor_t *exec,
                                                    const mscclpp_plan_t *plan, const void *send,
                                                    void *recv, size_t send_bytes,
                                                    size_t recv_bytes, mscclpp_dtype_t dtype,
                                                    mscclpp_redop_t op, mscclpp_packet_t packet,
                                                    int nblocks, int nthreads_per_block,
                                                    mscclpp_stream_t stream);

/**
 * Every registered plan that would serve the call (the registry's rule without "first match
 * wins") and, when `nblocks` > 0, runs that many thread blocks. Up to `cap` plans are stored in
 * `plans` in registration order; `*nplans` gets how many matched (may exceed `cap`).
 */
MSCCLPP_API mscclpp_result_t mscclpp_executor_list_plans(mscclpp_executor_t *exec,
                                                         const char *collective, int inplace,
                                                         uint64_t message_bytes, int nblocks,
                                                         const mscclpp_plan_t **plans, int cap,
                                                         int *nplans);

/**
 * The plan (and threads per block, 0: the plan's) that a collective call such as
 * mscclpp_allreduce runs for this message size, chosen as the call chooses it
 * (docs/plan-selection.md): the tuning table's entry when one is loaded and its plan is
 * registered and accepts the call, else the first registered plan, else the plan made for the
 * job. The plan is of the placement asked for: MSCCLPP_ERR_UNSUPPORTED when an in-place call
 * would run an out-of-place plan on a copy of its input (ask again with inplace 0 and stage the
 * input yourself).
 */
MSCCLPP_API mscclpp_result_t mscclpp_executor_choose_plan(mscclpp_executor_t *exec,
                                                          const char *collective, int inplace,
                                                          uint64_t message_bytes,
                                                          const mscclpp_plan_t **plan,
                                                          int *nthreads_per_block);

/**
 * Path of the tuning table the executor applies, or NULL. mscclpp_executor_create loads
 * MSCCLPP_TUNING_FILE (failing with a message naming the file and the reason when the table is
 * malformed or written for another backend, device, rank count or format version; "none"
 * disables tuning), else ~/.cache/mscclpp/tuning/<backend>-<device>-<nranks>.json when it
 * exists (a warning, and no table, when it cannot be used).
 */
MSCCLPP_API const char *mscclpp_executor_tuning_file(mscclpp_executor_t *exec);

/**
 * What a tuning table for this executor is keyed by: the device name (into `device`, may be
 * NULL) and the default table path (into `path`, may be NULL). The backend is
 * mscclpp_backend_name(); ranks and ranks per node are the communicator's.
 */
MSCCLPP_API mscclpp_result_t mscclpp_executor_tuning_target(mscclpp_executor_t *exec,
                                                            char *device, size_t device_cap,
                                                            char *path, size_t path_cap);

/* Collectives with default plans (counts in elements, NCCL conventions). */
MSCCLPP_API mscclpp_result_t mscclpp_allreduce(mscclpp_executor_t *exec, const void *send,
                                               void *recv, size_t count, mscclpp_dtype_t dtype,
                                               mscclpp_redop_t op, mscclpp_stream_t stream);
/** recv holds nranks * send_count elements. */
MSCCLPP_API mscclpp_result_t mscclpp_allgather(mscclpp_executor_t *exec, const void *send,
                                               void *recv, size_t send_count,
                                               mscclpp_dtype_t dtype, mscclpp_stream_t stream);
/** send holds nranks * recv_count elements. */
MSCCLPP_API mscclpp_result_t mscclpp_reducescatter(mscclpp_executor_t *exec, const void *send,
                                                   void *recv, size_t recv_count,
                                                   mscclpp_dtype_t dtype, mscclpp_redop_t op,
                                                   mscclpp_stream_t stream);
/** send and recv hold nranks * count elements; block r of send goes to rank r. */
MSCCLPP_API mscclpp_result_t mscclpp_alltoall(mscclpp_executor_t *exec, const void *send,
                                              void *recv, size_t count, mscclpp_dtype_t dtype,
                                              mscclpp_stream_t stream);
/**
 * All-to-all with counts and displacements per peer (as MPI_Alltoallv; counts and
 * displacements in elements, arrays of nranks in host memory): recvcounts[j] elements from rank
 * j land at recv + rdispls[j]; sendcounts[j] elements at send + sdispls[j] go to rank j. Rank
 * i's sendcounts[j] must equal rank j's recvcounts[i]: when the ranks' counts disagree, every
 * rank returns MSCCLPP_ERR_INVALID_ARG and nothing moves. send and recv may be the same
 * buffer (every send block is read before any receive block is written). The call agrees on
 * the largest count with the other ranks on the host (a bootstrap exchange of 32 bytes per
 * rank; no device synchronisation) and runs the alltoall plans with blocks of that size
 * through staging buffers the executor keeps: it moves nranks x the largest count per rank
 * (docs/plan-selection.md). When every rank sends and receives one count to and from every
 * peer, blocks packed in rank order, in buffers that do not overlap and that the backend can
 * share (mscclpp_malloc, device memory), the alltoall runs on send and recv themselves: no
 * copies. Elements of recv outside the received blocks are not written.
 */
MSCCLPP_API mscclpp_result_t mscclpp_alltoallv(mscclpp_executor_t *exec, const void *send,
                                               const size_t *sendcounts, const size_t *sdispls,
                                               void *recv, const size_t *recvcounts,
                                               const size_t *rdispls, mscclpp_dtype_t dtype,
                                               mscclpp_stream_t stream);
MSCCLPP_API mscclpp_result_t mscclpp_broadcast(mscclpp_executor_t *exec, const void *send,
                                               void *recv, size_t count, mscclpp_dtype_t dtype,
                                               int root, mscclpp_stream_t stream);
/** Reduce to `root`: its recv gets the reduction of every rank's send (count elements); the
 *  other ranks' recv is not written. */
MSCCLPP_API mscclpp_result_t mscclpp_reduce(mscclpp_executor_t *exec, const void *send, void *recv,
                                            size_t count, mscclpp_dtype_t dtype, mscclpp_redop_t op,
                                            int root, mscclpp_stream_t stream);

#ifdef __cplusplus
}
#endif

#endif /* MSCCLPP_MSCCLPP_H */
