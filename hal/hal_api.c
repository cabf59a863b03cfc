/* Public backend, memory and stream calls (include/mscclpp/mscclpp.h) over the selected HAL. */
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/debug.h"
#include "hal/hal.h"
#include "hal/hal_api.h"
#include "kernels/common/kern_scale.h"

MSCCLPP_API const char *mscclpp_backend_name(void)
{
    const hal_ops_t *ops;
    if (hal_get(&ops) != MSCCLPP_OK) return "none";
    return ops->name;
}

/* The calling thread's device of the selected backend and what it is. */
static mscclpp_result_t current_device(int *dev, hal_device_props_t *props)
{
    const hal_ops_t *ops;
    CHECK(hal_get(&ops));
    *dev = 0;
    memset(props, 0, sizeof *props);
    CHECK(ops->device_get(dev));
    return ops->device_props(*dev, props);
}

MSCCLPP_API mscclpp_result_t mscclpp_device_describe(int *device, char *text, size_t cap)
{
    CHECK_ARG(text != NULL && cap > 0);
    text[0] = '\0';
    int dev;
    hal_device_props_t p;
    CHECK(current_device(&dev, &p));
    if (device) *device = dev;
    snprintf(text, cap, "%s, %s, %d multiprocessors, %.1f GiB", p.name, p.arch,
             p.multiprocessors, (double)p.total_memory / (1 << 30));
    return MSCCLPP_OK;
}

MSCCLPP_API mscclpp_result_t mscclpp_nvls_supported(int *supported)
{
    CHECK_ARG(supported != NULL);
    *supported = 0;
    int dev;
    hal_device_props_t props;
    CHECK(current_device(&dev, &props));
    *supported = props.multicast ? 1 : 0;
    return MSCCLPP_OK;
}

MSCCLPP_API mscclpp_result_t mscclpp_malloc(size_t bytes, void **ptr)
{
    CHECK_ARG(ptr != NULL);
    CHECK_ARG(bytes > 0);
    const hal_ops_t *ops;
    CHECK(hal_get(&ops));
    return ops->mem_alloc_shareable(bytes, ptr);
}

/* The application's frees of library memory so far (hal_api_alloc_gen). */
static uint64_t app_frees;

uint64_t hal_api_alloc_gen(void) { return __atomic_load_n(&app_frees, __ATOMIC_ACQUIRE); }

MSCCLPP_API mscclpp_result_t mscclpp_free(void *ptr)
{
    if (!ptr) return MSCCLPP_OK; /* like free(NULL): cleanup paths need not test */
    const hal_ops_t *ops;
    CHECK(hal_get(&ops));
    /* counted before the memory can be allocated again at this address */
    __atomic_add_fetch(&app_frees, 1, __ATOMIC_RELEASE);
    return ops->mem_free(ptr);
}

MSCCLPP_API mscclpp_result_t mscclpp_memcpy(void *dst, const void *src, size_t bytes)
{
    CHECK_ARG(bytes == 0 || (dst != NULL && src != NULL));
    const hal_ops_t *ops;
    CHECK(hal_get(&ops));
    return ops->memcpy_sync(dst, src, bytes);
}

MSCCLPP_API mscclpp_result_t mscclpp_memset(void *dst, int value, size_t bytes)
{
    CHECK_ARG(bytes == 0 || dst != NULL);
    const hal_ops_t *ops;
    CHECK(hal_get(&ops));
    return ops->memset_sync(dst, value, bytes);
}

/* ---- error sources ------------------------------------------------------------------------ */

typedef struct {
    uint64_t id;
    hal_api_check_fn check;
    void *arg;
} source_t;

static pthread_mutex_t sources_lock = PTHREAD_MUTEX_INITIALIZER;
static source_t *sources;
static int n_sources, cap_sources;
static uint64_t next_source_id = 1;

mscclpp_result_t hal_api_source_add(hal_api_check_fn check, void *arg, uint64_t *id)
{
    CHECK_ARG(check != NULL);
    CHECK_ARG(id != NULL);
    mscclpp_result_t res = MSCCLPP_OK;
    pthread_mutex_lock(&sources_lock);
    if (n_sources == cap_sources) {
        int cap = cap_sources ? 2 * cap_sources : 8;
        source_t *s = realloc(sources, (size_t)cap * sizeof *s);
        if (!s) {
            res = ERR(MSCCLPP_ERR_NO_MEMORY, "out of memory for an error source");
            goto unlock;
        }
        sources = s;
        cap_sources = cap;
    }
    *id = next_source_id++;
    sources[n_sources++] = (source_t){*id, check, arg};
unlock:
    pthread_mutex_unlock(&sources_lock);
    return res;
}

void hal_api_source_remove(uint64_t id)
{
    pthread_mutex_lock(&sources_lock);
    for (int i = 0; i < n_sources; i++)
        if (sources[i].id == id) {
            sources[i] = sources[--n_sources];
            break;
        }
    if (n_sources == 0) {
        free(sources);
        sources = NULL;
        cap_sources = 0;
    }
    pthread_mutex_unlock(&sources_lock);
}

/* Run the check of source `id` if it still exists. */
static mscclpp_result_t source_check(uint64_t id)
{
    mscclpp_result_t res = MSCCLPP_OK;
    pthread_mutex_lock(&sources_lock);
    for (int i = 0; i < n_sources; i++)
        if (sources[i].id == id) {
            res = sources[i].check(sources[i].arg);
            break;
        }
    pthread_mutex_unlock(&sources_lock);
    return res;
}

/* Every live public stream, for hal_api_source_drain (streams_lock; taken before a stream's
 * own lock and sources_lock, never after). */
static pthread_mutex_t streams_lock = PTHREAD_MUTEX_INITIALIZER;
static struct mscclpp_stream **streams;
static int n_streams, cap_streams;

static mscclpp_result_t streams_add(struct mscclpp_stream *s)
{
    mscclpp_result_t res = MSCCLPP_OK;
    pthread_mutex_lock(&streams_lock);
    if (n_streams == cap_streams) {
        int cap = cap_streams ? 2 * cap_streams : 8;
        struct mscclpp_stream **l = realloc(streams, (size_t)cap * sizeof *l);
        if (!l) {
            res = ERR(MSCCLPP_ERR_NO_MEMORY, "out of memory for a stream");
            goto unlock;
        }
        streams = l;
        cap_streams = cap;
    }
    streams[n_streams++] = s;
unlock:
    pthread_mutex_unlock(&streams_lock);
    return res;
}

static void streams_remove(struct mscclpp_stream *s)
{
    pthread_mutex_lock(&streams_lock);
    for (int i = 0; i < n_streams; i++)
        if (streams[i] == s) {
            streams[i] = streams[--n_streams];
            break;
        }
    if (n_streams == 0) {
        free(streams);
        streams = NULL;
        cap_streams = 0;
    }
    pthread_mutex_unlock(&streams_lock);
}

/* Remove `id` from the stream's watch list; true if it was there. */
static bool stream_unwatch(struct mscclpp_stream *s, uint64_t id)
{
    bool found = false;
    pthread_mutex_lock(&s->lock);
    for (int i = 0; i < s->n_watch; i++)
        if (s->watch[i] == id) {
            s->watch[i] = s->watch[--s->n_watch];
            found = true;
            break;
        }
    pthread_mutex_unlock(&s->lock);
    return found;
}

static bool stream_watches(struct mscclpp_stream *s, uint64_t id)
{
    bool found = false;
    pthread_mutex_lock(&s->lock);
    for (int i = 0; i < s->n_watch && !found; i++) found = s->watch[i] == id;
    pthread_mutex_unlock(&s->lock);
    return found;
}

bool hal_api_source_capturing(uint64_t id)
{
    bool any = false;
    pthread_mutex_lock(&streams_lock);
    for (int i = 0; i < n_streams && !any; i++) {
        struct mscclpp_stream *s = streams[i];
        bool capturing = false;
        if (stream_watches(s, id) && s->ops->stream_capturing(s->hal, &capturing) == MSCCLPP_OK)
            any = capturing;
    }
    pthread_mutex_unlock(&streams_lock);
    core_clear_error();
    return any;
}

mscclpp_result_t hal_api_source_drain(uint64_t id)
{
    mscclpp_result_t res = MSCCLPP_OK;
    char first[1024] = "";
    /* held throughout: a stream cannot be destroyed while we sync it */
    pthread_mutex_lock(&streams_lock);
    for (int i = 0; i < n_streams; i++) {
        struct mscclpp_stream *s = streams[i];
        if (!stream_watches(s, id)) continue;
        mscclpp_result_t r = s->ops->stream_sync(s->hal);
        /* checked whatever the sync said: the source's own record names the failure */
        mscclpp_result_t c = stream_unwatch(s, id) ? source_check(id) : MSCCLPP_OK;
        if (c != MSCCLPP_OK) r = c;
        if (r != MSCCLPP_OK && res == MSCCLPP_OK) {
            res = r;
            snprintf(first, sizeof first, "%s", mscclpp_last_error());
        }
    }
    pthread_mutex_unlock(&streams_lock);
    if (res != MSCCLPP_OK) return core_error_quiet(res, "%s", first);
    return MSCCLPP_OK;
}

/* Add `id` to a list of source ids unless it is there (the usual case: one executor per
 * stream). */
static mscclpp_result_t ids_add(uint64_t **list, int *n, int *cap, uint64_t id)
{
    for (int i = 0; i < *n; i++)
        if ((*list)[i] == id) return MSCCLPP_OK;
    if (*n == *cap) {
        int c = *cap ? 2 * *cap : 4;
        uint64_t *l = realloc(*list, (size_t)c * sizeof *l);
        if (!l) return ERR(MSCCLPP_ERR_NO_MEMORY, "stream: out of memory to watch a launch");
        *list = l;
        *cap = c;
    }
    (*list)[(*n)++] = id;
    return MSCCLPP_OK;
}

mscclpp_result_t hal_api_stream_note(mscclpp_stream_t stream, uint64_t id)
{
    if (!stream) return MSCCLPP_OK;
    pthread_mutex_lock(&stream->lock);
    mscclpp_result_t res = ids_add(&stream->watch, &stream->n_watch, &stream->cap_watch, id);
    pthread_mutex_unlock(&stream->lock);
    return res;
}

mscclpp_result_t hal_api_stream_note_capture(mscclpp_stream_t stream, uint64_t id)
{
    if (!stream) return MSCCLPP_OK;
    pthread_mutex_lock(&stream->lock);
    mscclpp_result_t res =
        ids_add(&stream->captured, &stream->n_captured, &stream->cap_captured, id);
    pthread_mutex_unlock(&stream->lock);
    return res;
}

/*
 * After a sync: ask every source that launched on the stream since the last one whether that
 * work failed. `res` is the sync's own result; the first error wins, and its message is the
 * one left for mscclpp_last_error() (later checks still run, so that each source learns of its
 * failure, but may overwrite the message).
 */
static mscclpp_result_t stream_check_sources(mscclpp_stream_t stream, mscclpp_result_t res)
{
    char first[1024] = "";
    if (res != MSCCLPP_OK) snprintf(first, sizeof first, "%s", mscclpp_last_error());
    pthread_mutex_lock(&stream->lock);
    int n = stream->n_watch;
    uint64_t ids[16];
    uint64_t *list = n <= 16 ? ids : malloc((size_t)n * sizeof *list);
    if (list && n) memcpy(list, stream->watch, (size_t)n * sizeof *list);
    else n = 0; /* cannot copy: keep them for the next sync */
    if (list) stream->n_watch = 0;
    pthread_mutex_unlock(&stream->lock);
    /* a sync that gave up on a kernel still running says less than a source whose launch
     * failed (its error names the op and the peer): the source's comes first */
    bool gave_up = res == MSCCLPP_ERR_TIMEOUT;
    for (int i = 0; i < n; i++) {
        mscclpp_result_t r = source_check(list[i]);
        if (r != MSCCLPP_OK && (res == MSCCLPP_OK || gave_up)) {
            gave_up = false;
            res = r;
            snprintf(first, sizeof first, "%s", mscclpp_last_error());
        }
    }
    if (list != ids) free(list);
    if (res != MSCCLPP_OK) return core_error_quiet(res, "%s", first);
    return MSCCLPP_OK;
}

/* ---- streams ------------------------------------------------------------------------------ */

MSCCLPP_API mscclpp_result_t mscclpp_stream_create(mscclpp_stream_t *stream)
{
    CHECK_ARG(stream != NULL);
    const hal_ops_t *ops;
    CHECK(hal_get(&ops));
    struct mscclpp_stream *s = calloc(1, sizeof *s);
    if (!s) return ERR(MSCCLPP_ERR_NO_MEMORY, "mscclpp_stream_create: out of memory");
    mscclpp_result_t res;
    CHECK_GOTO(ops->stream_create(&s->hal), res, free_stream);
    s->ops = ops;
    pthread_mutex_init(&s->lock, NULL);
    res = streams_add(s);
    if (res != MSCCLPP_OK) {
        (void)ops->stream_destroy(s->hal);
        pthread_mutex_destroy(&s->lock);
        goto free_stream;
    }
    *stream = s;
    return MSCCLPP_OK;
free_stream:
    free(s);
    return res;
}

MSCCLPP_API mscclpp_result_t mscclpp_stream_synchronize(mscclpp_stream_t stream)
{
    CHECK_ARG(stream != NULL);
    return stream_check_sources(stream, stream->ops->stream_sync(stream->hal));
}

MSCCLPP_API mscclpp_result_t mscclpp_stream_wrap(void *native, mscclpp_stream_t *stream)
{
    CHECK_ARG(stream != NULL);
    const hal_ops_t *ops;
    CHECK(hal_get(&ops));
    /* a host-backend hal_stream_t is a worker queue the library made; nothing to wrap */
    if (strcmp(ops->name, "host") == 0)
        return ERR(MSCCLPP_ERR_UNSUPPORTED,
                   "mscclpp_stream_wrap: the %s backend has no native streams", ops->name);
    struct mscclpp_stream *s = calloc(1, sizeof *s);
    if (!s) return ERR(MSCCLPP_ERR_NO_MEMORY, "mscclpp_stream_wrap: out of memory");
    s->ops = ops;
    s->hal = (hal_stream_t)native;
    s->borrowed = 1;
    pthread_mutex_init(&s->lock, NULL);
    mscclpp_result_t res = streams_add(s);
    if (res != MSCCLPP_OK) {
        pthread_mutex_destroy(&s->lock);
        free(s);
        return res;
    }
    *stream = s;
    return MSCCLPP_OK;
}

MSCCLPP_API mscclpp_result_t mscclpp_memcpy_async(void *dst, const void *src, size_t bytes,
                                                  mscclpp_stream_t stream)
{
    CHECK_ARG(bytes == 0 || (dst != NULL && src != NULL));
    const hal_ops_t *ops;
    CHECK(hal_get(&ops));
    if (stream && stream->ops != ops) return ERR_ARG("mscclpp_memcpy_async: stream of another backend");
    if (!stream) return ops->memcpy_sync(dst, src, bytes);
    return ops->memcpy_async(dst, src, bytes, stream->hal);
}

MSCCLPP_API mscclpp_result_t mscclpp_memset_async(void *dst, int value, size_t bytes,
                                                  mscclpp_stream_t stream)
{
    CHECK_ARG(bytes == 0 || dst != NULL);
    const hal_ops_t *ops;
    CHECK(hal_get(&ops));
    if (stream && stream->ops != ops) return ERR_ARG("mscclpp_memset_async: stream of another backend");
    if (!stream) return ops->memset_sync(dst, value, bytes);
    return ops->memset_async(dst, value, bytes, stream->hal);
}

MSCCLPP_API mscclpp_result_t mscclpp_stream_launch_host_func(mscclpp_stream_t stream,
                                                             void (*fn)(void *), void *arg)
{
    CHECK_ARG(fn != NULL);
    const hal_ops_t *ops;
    CHECK(hal_get(&ops));
    if (!stream) {
        fn(arg);
        return MSCCLPP_OK;
    }
    return stream->ops->launch_host_func(fn, arg, stream->hal);
}

MSCCLPP_API mscclpp_result_t mscclpp_scale_async(void *dst, const void *src, size_t count,
                                                 mscclpp_dtype_t dtype, int divisor,
                                                 const void *scalar, int scalar_on_device,
                                                 mscclpp_stream_t stream)
{
    CHECK_ARG(count == 0 || (dst != NULL && src != NULL));
    CHECK_ARG((int)dtype >= 0 && dtype < MSCCLPP_DTYPE_COUNT);
    CHECK_ARG(divisor > 0 || scalar != NULL);
    const hal_ops_t *ops;
    CHECK(hal_get(&ops));
    if (stream && stream->ops != ops) return ERR_ARG("mscclpp_scale_async: stream of another backend");
    if (count == 0) return MSCCLPP_OK;
    kern_scale_args_t a;
    memset(&a, 0, sizeof a);
    a.dst = dst;
    a.src = src;
    a.count = count;
    a.dtype = (int32_t)dtype;
    a.divisor = divisor > 0 ? divisor : 0;
    if (divisor <= 0 && scalar_on_device) a.scalar_ptr = scalar;
    else if (divisor <= 0) memcpy(&a.scalar, scalar, kern_dtype_size((uint32_t)dtype));
    return ops->launch_scale(&a, sizeof a, hal_api_stream(stream));
}

MSCCLPP_API mscclpp_result_t mscclpp_stream_wait_stream(mscclpp_stream_t stream,
                                                        mscclpp_stream_t other)
{
    if (!other || other == stream) return MSCCLPP_OK;
    /* a stream destroyed since (destroying synchronizes it) has nothing left to wait for */
    pthread_mutex_lock(&streams_lock);
    bool live = false;
    for (int i = 0; i < n_streams && !live; i++) live = streams[i] == other;
    if (live) pthread_mutex_lock(&other->lock); /* before streams_lock goes: it stays alive */
    pthread_mutex_unlock(&streams_lock);
    if (!live) return MSCCLPP_OK;
    if (!stream) {
        pthread_mutex_unlock(&other->lock);
        return mscclpp_stream_synchronize(other);
    }
    if (stream->ops != other->ops) {
        pthread_mutex_unlock(&other->lock);
        return ERR_ARG("mscclpp_stream_wait_stream: streams of two backends");
    }
    const hal_ops_t *ops = other->ops;
    mscclpp_result_t res = MSCCLPP_OK;
    if (!other->mark) res = ops->event_create(&other->mark);
    if (res == MSCCLPP_OK) res = ops->event_record(other->mark, other->hal);
    if (res == MSCCLPP_OK) res = ops->stream_wait_event(stream->hal, other->mark);
    pthread_mutex_unlock(&other->lock);
    return res;
}

MSCCLPP_API mscclpp_result_t mscclpp_stream_destroy(mscclpp_stream_t stream)
{
    CHECK_ARG(stream != NULL);
    streams_remove(stream); /* first: a drain must not sync a stream being destroyed */
    /* destroy syncs first: what the work recorded must not be lost with the stream */
    mscclpp_result_t res = stream_check_sources(stream, stream->ops->stream_sync(stream->hal));
    if (!stream->borrowed) { /* a wrapped native stream belongs to the caller */
        mscclpp_result_t r = stream->ops->stream_destroy(stream->hal);
        if (res == MSCCLPP_OK) res = r;
    }
    /* a mscclpp_stream_wait_stream that found it live before streams_remove may still hold
     * its lock (to record the mark): let it finish */
    pthread_mutex_lock(&stream->lock);
    hal_event_t mark = stream->mark;
    pthread_mutex_unlock(&stream->lock);
    if (mark) (void)stream->ops->event_destroy(mark);
    pthread_mutex_destroy(&stream->lock);
    free(stream->watch);
    free(stream->captured);
    free(stream);
    return res;
}

/* ---- graphs ------------------------------------------------------------------------------- */

struct mscclpp_graph {
    const hal_ops_t *ops;
    hal_graph_t hal;
    uint64_t *sources; /* error sources whose work the graph replays */
    int n_sources;
};

MSCCLPP_API mscclpp_result_t mscclpp_stream_begin_capture(mscclpp_stream_t stream)
{
    CHECK_ARG(stream != NULL);
    bool capturing = false;
    CHECK(stream->ops->stream_capturing(stream->hal, &capturing));
    if (capturing) return ERR_ARG("mscclpp_stream_begin_capture: the stream is capturing already");
    pthread_mutex_lock(&stream->lock);
    stream->n_captured = 0;
    pthread_mutex_unlock(&stream->lock);
    return stream->ops->stream_begin_capture(stream->hal);
}

MSCCLPP_API mscclpp_result_t mscclpp_stream_end_capture(mscclpp_stream_t stream,
                                                        mscclpp_graph_t *graph)
{
    CHECK_ARG(graph != NULL);
    *graph = NULL;
    CHECK_ARG(stream != NULL);
    struct mscclpp_graph *g = calloc(1, sizeof *g);
    /* the capture ends whatever happens next: a failure here must not leave it open */
    hal_graph_t hg = NULL;
    mscclpp_result_t res = stream->ops->stream_end_capture(stream->hal, &hg);
    pthread_mutex_lock(&stream->lock);
    int n = stream->n_captured;
    uint64_t *ids = stream->captured;
    stream->captured = NULL;
    stream->n_captured = stream->cap_captured = 0;
    pthread_mutex_unlock(&stream->lock);
    if (res == MSCCLPP_OK && !g)
        res = ERR(MSCCLPP_ERR_NO_MEMORY, "mscclpp_stream_end_capture: out of memory");
    if (res != MSCCLPP_OK) {
        if (hg) (void)stream->ops->graph_destroy(hg);
        free(ids);
        free(g);
        return res;
    }
    g->ops = stream->ops;
    g->hal = hg;
    g->sources = ids;
    g->n_sources = n;
    *graph = g;
    return MSCCLPP_OK;
}

MSCCLPP_API mscclpp_result_t mscclpp_stream_is_capturing(mscclpp_stream_t stream, int *capturing)
{
    CHECK_ARG(stream != NULL);
    CHECK_ARG(capturing != NULL);
    bool c = false;
    CHECK(stream->ops->stream_capturing(stream->hal, &c));
    *capturing = c ? 1 : 0;
    return MSCCLPP_OK;
}

MSCCLPP_API mscclpp_result_t mscclpp_graph_launch(mscclpp_graph_t graph, mscclpp_stream_t stream)
{
    CHECK_ARG(graph != NULL);
    CHECK_ARG(stream != NULL);
    if (stream->ops != graph->ops)
        return ERR_ARG("mscclpp_graph_launch: graph of backend %s, stream of %s", graph->ops->name,
                       stream->ops->name);
    /* before the launch, as for a collective: a sync racing with it must ask its sources */
    bool capturing = false;
    CHECK(stream->ops->stream_capturing(stream->hal, &capturing));
    for (int i = 0; i < graph->n_sources; i++)
        CHECK(capturing ? hal_api_stream_note_capture(stream, graph->sources[i])
                        : hal_api_stream_note(stream, graph->sources[i]));
    return graph->ops->graph_launch(graph->hal, stream->hal);
}

MSCCLPP_API mscclpp_result_t mscclpp_graph_destroy(mscclpp_graph_t graph)
{
    if (!graph) return MSCCLPP_OK;
    mscclpp_result_t res = graph->ops->graph_destroy(graph->hal);
    free(graph->sources);
    free(graph);
    return res;
}
