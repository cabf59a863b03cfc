/*
 * Plan loading and validation: the JSON of plan-format §1 turned into the flat structs of
 * executor/plan.h. Every rule that fails reports MSCCLPP_ERR_INVALID_PLAN with the source, the
 * JSON path and the rule, so a plan that loads is safe to run: no index reaches outside a
 * buffer, a table or a limit of plan-format §5.6.
 *
 * Decisions beyond the spec (plan-format §10 lists ours):
 *   - "name": null (the 0.9 DSL writes it) takes the file name without ".json" ("unnamed" for
 *     strings); "" is refused.
 *   - buffer_alignment: a power of two in [1, 2^30].
 *   - Integers too big for jansson's json_int_t (max_message_size 18446744073709551615) make us
 *     parse again with every integer read as a double; 2^64 then stands for 2^64-1.
 *   - rank_subset (partial plans) is refused: every rank must be listed.
 *   - Unpaired channel counts between two ranks are accepted (setup pads them, plan-format §5.2).
 *   - An unknown key is an error naming its path (with the nearest known key when one is close:
 *     "max_mesage_size"), as is an unknown collective. The known keys are those of
 *     docs/plan-format.md plus what MSCCL++'s DSL writes and its reader ignores (a switch
 *     channel's "buff", a descriptor's "rank", glre's "buffer_type"/"buffer_offset"/"dst_chunk"/
 *     "size"). A duplicate key keeps its last value (jansson's behaviour).
 */
#include <float.h>
#include <limits.h>
#include <math.h>
#include <stdalign.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "base/debug.h"
#include "base/names.h"
#include "executor/plan.h"
#include "executor/plan_make.h"

#define PLAN_MAX_RANKS (1 << 20)        /* sanity bound: arrays are allocated per rank */
#define PLAN_MAX_GPU_CHANNELS 65535     /* block tables store global indices in 16 bits */
#define PLAN_MAX_GPU_RBUFS 65535
#define PLAN_MAX_GPU_SEMS 65535
#define PLAN_MAX_ALIGNMENT (1u << 30)

/* ------------------------------------------------------------------------------------------ */
/* Arena: every allocation of a plan comes from here and is released at once by plan_free()
 * (plan_make.h: made plans use it too). */

typedef struct arena_block {
    struct arena_block *next;
    size_t cap, used;
    alignas(max_align_t) unsigned char data[];
} arena_block_t;

struct plan_arena {
    arena_block_t *head;
};

#define ARENA_CHUNK (64 * 1024)

plan_arena_t *plan_arena_new(void) { return calloc(1, sizeof(plan_arena_t)); }

void *plan_arena_alloc(plan_arena_t *a, size_t count, size_t size)
{
    if (size && count > SIZE_MAX / size / 2) return NULL;
    size_t n = count * size;
    size_t al = alignof(max_align_t);
    n = (n + al - 1) / al * al;
    if (n == 0) n = al;
    arena_block_t *h = a->head;
    if (h && h->cap - h->used >= n) {
        void *p = h->data + h->used;
        h->used += n;
        return p;
    }
    size_t cap = n > ARENA_CHUNK ? n : ARENA_CHUNK;
    arena_block_t *b = calloc(1, sizeof *b + cap);
    if (!b) return NULL;
    b->cap = cap;
    b->used = n;
    /* A large allocation gets its own block behind the head, so the head keeps its free space. */
    if (h && n >= ARENA_CHUNK / 4) {
        b->next = h->next;
        h->next = b;
    } else {
        b->next = h;
        a->head = b;
    }
    return b->data;
}

void plan_arena_destroy(plan_arena_t *a)
{
    if (!a) return;
    for (arena_block_t *b = a->head, *next; b; b = next) {
        next = b->next;
        free(b);
    }
    free(a);
}

/* ------------------------------------------------------------------------------------------ */
/* Loader state: the current JSON path for error messages. */

typedef struct {
    const char *source;
    char path[512];
    size_t path_len;
    plan_arena_t *arena;
    struct mscclpp_plan *plan;
    /* barriers of the rank being parsed: blocks gathered by each id, and where it was first used */
    int bar_rank;
    uint16_t bar_nb[PLAN_MAX_BARRIERS];
    char bar_where[PLAN_MAX_BARRIERS][160];
} ld_t;

static void path_set(ld_t *ld, size_t len)
{
    ld->path_len = len;
    ld->path[len] = '\0';
}

static size_t path_appendf(ld_t *ld, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static size_t path_appendf(ld_t *ld, const char *fmt, ...)
{
    size_t old = ld->path_len;
    size_t room = sizeof ld->path - old;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(ld->path + old, room, fmt, ap);
    va_end(ap);
    if (n < 0) n = 0;
    ld->path_len = (size_t)n >= room ? sizeof ld->path - 1 : old + (size_t)n;
    return old;
}

/* Enter member `key` / element `i`; returns the length to restore with path_set(). */
static size_t path_key(ld_t *ld, const char *key)
{
    return path_appendf(ld, "%s%s", ld->path_len ? "." : "", key);
}

static size_t path_idx(ld_t *ld, size_t i) { return path_appendf(ld, "[%zu]", i); }

static mscclpp_result_t ld_err(ld_t *ld, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static mscclpp_result_t ld_err(ld_t *ld, const char *fmt, ...)
{
    char msg[640];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return core_error(MSCCLPP_ERR_INVALID_PLAN, __FILE__, __LINE__, "%s: %s%s%s", ld->source,
                      ld->path_len ? ld->path : "", ld->path_len ? ": " : "", msg);
}

static mscclpp_result_t ld_nomem(ld_t *ld)
{
    return ERR(MSCCLPP_ERR_NO_MEMORY, "%s: out of memory while loading the plan", ld->source);
}

static void *ld_alloc(ld_t *ld, size_t count, size_t size)
{
    return plan_arena_alloc(ld->arena, count, size);
}

#define LD_ALLOC(ld, ptr, count)                                              \
    do {                                                                      \
        (ptr) = ld_alloc((ld), (size_t)(count), sizeof *(ptr));               \
        if (!(ptr)) return ld_nomem(ld);                                      \
    } while (0)

static const char *jtype(const json_t *v)
{
    switch (json_typeof(v)) {
    case JSON_OBJECT: return "an object";
    case JSON_ARRAY: return "an array";
    case JSON_STRING: return "a string";
    case JSON_INTEGER: return "an integer";
    case JSON_REAL: return "a number";
    case JSON_TRUE:
    case JSON_FALSE: return "a boolean";
    case JSON_NULL: return "null";
    }
    return "a value";
}

/* ------------------------------------------------------------------------------------------ */
/* Typed readers. The *_val functions check a value at the current path; the get_* functions
 * look up a member, enter its path, and leave the path as it was. */

static mscclpp_result_t u64_val(ld_t *ld, const json_t *v, uint64_t min, uint64_t max,
                                uint64_t *out)
{
    uint64_t x;
    if (json_is_integer(v)) {
        json_int_t i = json_integer_value(v);
        if (i < 0)
            return ld_err(ld, "%" JSON_INTEGER_FORMAT " is negative (expected %llu..%llu)", i,
                          (unsigned long long)min, (unsigned long long)max);
        x = (uint64_t)i;
    } else if (json_is_real(v)) {
        /* Integers are reals when the text held one too big for json_int_t (see top). */
        double d = json_real_value(v);
        if (!isfinite(d) || d != floor(d))
            return ld_err(ld, "%g is not an integer", d);
        if (d < 0)
            return ld_err(ld, "%.0f is negative (expected %llu..%llu)", d,
                          (unsigned long long)min, (unsigned long long)max);
        if (d > 18446744073709551616.0)
            return ld_err(ld, "%.0f does not fit in 64 bits", d);
        /* 2^64-1 has no double; it reads back as 2^64. */
        x = d == 18446744073709551616.0 ? UINT64_MAX : (uint64_t)d;
    } else {
        return ld_err(ld, "expected a non-negative integer, got %s", jtype(v));
    }
    if (x < min || x > max)
        return ld_err(ld, "%llu is out of range (expected %llu..%llu)", (unsigned long long)x,
                      (unsigned long long)min, (unsigned long long)max);
    *out = x;
    return MSCCLPP_OK;
}

/* Member `key` of `obj` (an object): NULL when absent; an error when required and absent.
 * JSON null counts as absent for optional keys. */
static mscclpp_result_t get_member(ld_t *ld, const json_t *obj, const char *key, bool required,
                                   json_t **out)
{
    json_t *v = json_object_get(obj, key);
    if (v && json_is_null(v) && !required) v = NULL;
    if (!v && required) {
        size_t p = path_key(ld, key);
        mscclpp_result_t res = ld_err(ld, "required key is missing");
        path_set(ld, p);
        return res;
    }
    *out = v;
    return MSCCLPP_OK;
}

static mscclpp_result_t get_u64(ld_t *ld, const json_t *obj, const char *key, bool required,
                                uint64_t min, uint64_t max, uint64_t def, uint64_t *out)
{
    json_t *v;
    CHECK(get_member(ld, obj, key, required, &v));
    if (!v) {
        *out = def;
        return MSCCLPP_OK;
    }
    size_t p = path_key(ld, key);
    mscclpp_result_t res = u64_val(ld, v, min, max, out);
    path_set(ld, p);
    return res;
}

static mscclpp_result_t get_u32(ld_t *ld, const json_t *obj, const char *key, bool required,
                                uint32_t min, uint32_t max, uint32_t def, uint32_t *out)
{
    uint64_t x;
    CHECK(get_u64(ld, obj, key, required, min, max, def, &x));
    *out = (uint32_t)x;
    return MSCCLPP_OK;
}

static mscclpp_result_t get_bool(ld_t *ld, const json_t *obj, const char *key, bool required,
                                 bool def, bool *out)
{
    json_t *v;
    CHECK(get_member(ld, obj, key, required, &v));
    if (!v) {
        *out = def;
        return MSCCLPP_OK;
    }
    if (!json_is_boolean(v)) {
        size_t p = path_key(ld, key);
        mscclpp_result_t res = ld_err(ld, "expected true or false, got %s", jtype(v));
        path_set(ld, p);
        return res;
    }
    *out = json_is_true(v);
    return MSCCLPP_OK;
}

static mscclpp_result_t get_typed(ld_t *ld, const json_t *obj, const char *key, bool required,
                                  json_type type, const char *what, json_t **out)
{
    json_t *v;
    CHECK(get_member(ld, obj, key, required, &v));
    if (v && json_typeof(v) != type) {
        size_t p = path_key(ld, key);
        mscclpp_result_t res = ld_err(ld, "expected %s, got %s", what, jtype(v));
        path_set(ld, p);
        return res;
    }
    *out = v;
    return MSCCLPP_OK;
}

static mscclpp_result_t get_str(ld_t *ld, const json_t *obj, const char *key, bool required,
                                const char **out)
{
    json_t *v;
    CHECK(get_typed(ld, obj, key, required, JSON_STRING, "a string", &v));
    *out = v ? json_string_value(v) : NULL;
    return MSCCLPP_OK;
}

static mscclpp_result_t get_array(ld_t *ld, const json_t *obj, const char *key, bool required,
                                  json_t **out)
{
    return get_typed(ld, obj, key, required, JSON_ARRAY, "an array", out);
}

static mscclpp_result_t get_object(ld_t *ld, const json_t *obj, const char *key, bool required,
                                   json_t **out)
{
    return get_typed(ld, obj, key, required, JSON_OBJECT, "an object", out);
}

static mscclpp_result_t expect_object(ld_t *ld, const json_t *v)
{
    if (!json_is_object(v)) return ld_err(ld, "expected an object, got %s", jtype(v));
    return MSCCLPP_OK;
}

/* ------------------------------------------------------------------------------------------ */
/* Known keys, per kind of object. */

static const char *const keys_top[] = {
    "name", "collective", "protocol", "inplace", "reuse_resources", "use_double_scratch_buffer",
    "buffer_alignment", "min_message_size", "max_message_size", "num_threads_per_block", "gpus",
    "format", "root", "rank_subset", NULL};
static const char *const keys_gpu[] = {"id", "input_chunks", "output_chunks", "scratch_chunks",
                                       "threadblocks", "channels", "remote_buffers",
                                       "semaphores", NULL};
static const char *const keys_gpu_chan[] = {"channel_type", "connected_to", "buffer_type",
                                            "rank_groups", "buff", NULL};
static const char *const keys_rank_group[] = {"size", "ranks", NULL};
static const char *const keys_rbuf[] = {"rank", "type", "access_channel_types", NULL};
static const char *const keys_sem[] = {"init_value", NULL};
static const char *const keys_block[] = {"id", "ops", "channels", "remote_buffer_refs", NULL};
static const char *const keys_block_chan[] = {"channel_type", "channel_ids", "buff", NULL};
static const char *const keys_block_rbuf[] = {"access_channel_type", "remote_buffer_ids", NULL};
static const char *const keys_op[] = {
    "name", "channel_type", "channel_ids", "src_buff", "dst_buff", "tbg_info", "barrier_id",
    "num_threadblocks", "semaphore_ids", "iter_context", "ops", "reduce_op",
    /* MSCCL++'s unfused switch reduce writes these (plan-format §2.1); its reader ignores them */
    "buffer_type", "buffer_offset", "dst_chunk", "size", NULL};
static const char *const keys_desc[] = {"type", "buffer_id", "switch_channel_id", "index",
                                        "size", "rank", NULL};
static const char *const keys_iter[] = {"unit_size", "num_chunks", NULL};
static const char *const keys_tbg[] = {"tb_id", "tbg_size", NULL};

static void join_names(const char *const *names, char *out, size_t cap)
{
    size_t len = 0;
    out[0] = '\0';
    for (; *names && len < cap; names++) {
        int n = snprintf(out + len, cap - len, "%s%s", len ? ", " : "", *names);
        if (n < 0) break;
        len += (size_t)n;
    }
}

/* Every key of `obj` must be one of `known`. */
static mscclpp_result_t check_keys(ld_t *ld, const json_t *obj, const char *const *known)
{
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)obj, key, v) {
        const char *const *k = known;
        while (*k && strcmp(*k, key)) k++;
        if (*k) continue;
        path_key(ld, key);
        const char *near = names_nearest(key, known);
        if (near) return ld_err(ld, "unknown key (did you mean \"%s\"?)", near);
        char list[400];
        join_names(known, list, sizeof list);
        return ld_err(ld, "unknown key (expected %s)", list);
    }
    return MSCCLPP_OK;
}

/* ------------------------------------------------------------------------------------------ */
/* Names */

static const char *const op_names[PLAN_OP__COUNT] = {
    [PLAN_OP_NOP] = "nop",         [PLAN_OP_BARRIER] = "barrier",
    [PLAN_OP_PUT] = "put",         [PLAN_OP_PPKT] = "ppkt",
    [PLAN_OP_RPPKT] = "rppkt",     [PLAN_OP_PWS] = "pws",
    [PLAN_OP_PWSF] = "pwsf",       [PLAN_OP_GET] = "get",
    [PLAN_OP_COPY] = "copy",       [PLAN_OP_CPKT] = "cpkt",
    [PLAN_OP_UPKT] = "upkt",       [PLAN_OP_SIGNAL] = "signal",
    [PLAN_OP_WAIT] = "wait",       [PLAN_OP_FLUSH] = "flush",
    [PLAN_OP_RE] = "re",           [PLAN_OP_REPKT] = "repkt",
    [PLAN_OP_RECPKT] = "recpkt",   [PLAN_OP_RES] = "res",
    [PLAN_OP_RESPKT] = "respkt",   [PLAN_OP_RECSPKT] = "recspkt",
    [PLAN_OP_RRE] = "rre",         [PLAN_OP_RRES] = "rres",
    [PLAN_OP_GLRES] = "glres",     [PLAN_OP_RLXSIGNAL] = "rlxsignal",
    [PLAN_OP_RLXWAIT] = "rlxwait", [PLAN_OP_PIPELINE] = "pipeline",
    [PLAN_OP_SEM_RELEASE] = "sem_release", [PLAN_OP_SEM_ACQUIRE] = "sem_acquire",
    [PLAN_OP_GSTORE] = "gstore",   [PLAN_OP_GSTOREPKT] = "gstorepkt",
    [PLAN_OP_GLRE] = "glre",
};

const char *plan_op_name(plan_op_type_t type)
{
    if ((int)type < 0 || type >= PLAN_OP__COUNT) return NULL;
    return op_names[type];
}

static const char *const chan_names[PLAN_CH__COUNT] = {"none", "memory", "port", "switch"};
static const char *const chunk_keys[] = {"input_chunks", "output_chunks", "scratch_chunks"};

static int lookup_op(const char *name)
{
    for (int i = 0; i < PLAN_OP__COUNT; i++)
        if (!strcmp(op_names[i], name)) return i;
    return -1;
}

static int lookup_chan(const char *name)
{
    for (int i = 0; i < PLAN_CH__COUNT; i++)
        if (!strcmp(chan_names[i], name)) return i;
    return -1;
}

static mscclpp_result_t chan_val(ld_t *ld, const json_t *v, bool allow_none, bool allow_switch,
                                 int *out)
{
    if (!json_is_string(v)) return ld_err(ld, "expected a string, got %s", jtype(v));
    const char *s = json_string_value(v);
    int t = lookup_chan(s);
    if (t < 0)
        return ld_err(ld, "unknown channel type \"%s\" (expected memory, port, switch%s)", s,
                      allow_none ? " or none" : "");
    if (t == PLAN_CH_NONE && !allow_none)
        return ld_err(ld, "channel type \"none\" is not allowed here (expected memory, port%s)",
                      allow_switch ? " or switch" : "");
    if (t == PLAN_CH_SWITCH && !allow_switch)
        return ld_err(ld, "channel type \"switch\" is not allowed here (expected memory or port)");
    *out = t;
    return MSCCLPP_OK;
}

static mscclpp_result_t buf_val(ld_t *ld, const json_t *v, uint8_t *out)
{
    if (!json_is_string(v)) return ld_err(ld, "expected \"i\", \"o\" or \"s\", got %s", jtype(v));
    const char *s = json_string_value(v);
    if (!strcmp(s, "i")) *out = PLAN_BUF_INPUT;
    else if (!strcmp(s, "o")) *out = PLAN_BUF_OUTPUT;
    else if (!strcmp(s, "s")) *out = PLAN_BUF_SCRATCH;
    else return ld_err(ld, "unknown buffer type \"%s\" (expected \"i\", \"o\" or \"s\")", s);
    return MSCCLPP_OK;
}

static mscclpp_result_t get_buf(ld_t *ld, const json_t *obj, const char *key, uint8_t *out)
{
    json_t *v;
    CHECK(get_member(ld, obj, key, true, &v));
    size_t p = path_key(ld, key);
    mscclpp_result_t res = buf_val(ld, v, out);
    path_set(ld, p);
    return res;
}

static uint32_t gpu_chunks(const plan_gpu_t *g, int buf)
{
    return buf == PLAN_BUF_INPUT ? g->input_chunks
           : buf == PLAN_BUF_OUTPUT ? g->output_chunks
                                    : g->scratch_chunks;
}

/* ------------------------------------------------------------------------------------------ */
/* gpus[r]: chunk counts, channels, remote buffers, semaphores (pass 1, before any block). */

static const char *const old_keys[] = {"inputChunks", "outputChunks", "scratchChunks",
                                       "chunkGroups", "connectedTo", "threadBlocks"};

/* The pre-0.9 camelCase format: refuse it by name instead of reporting missing keys. */
static mscclpp_result_t check_old_format(ld_t *ld, const json_t *obj)
{
    if (!json_is_object(obj)) return MSCCLPP_OK;
    for (size_t k = 0; k < sizeof old_keys / sizeof old_keys[0]; k++) {
        if (json_object_get(obj, old_keys[k])) {
            size_t p = path_key(ld, old_keys[k]);
            mscclpp_result_t res =
                ld_err(ld, "the old MSCCL++ plan format (camelCase keys) is not supported; "
                           "regenerate the plan with the MSCCL++ 0.9 DSL or newer");
            path_set(ld, p);
            return res;
        }
    }
    return MSCCLPP_OK;
}

static mscclpp_result_t parse_peer_list(ld_t *ld, int rank, const json_t *list, int *peers,
                                        int *n)
{
    size_t i;
    json_t *v;
    json_array_foreach(list, i, v) {
        size_t p = path_idx(ld, i);
        uint64_t peer;
        CHECK(u64_val(ld, v, 0, UINT64_MAX, &peer));
        if (peer >= (uint64_t)ld->plan->nranks)
            return ld_err(ld, "peer rank %llu is out of range (the plan has %d ranks)",
                          (unsigned long long)peer, ld->plan->nranks);
        if ((int)peer == rank) return ld_err(ld, "a channel to the rank itself (%d)", rank);
        peers[(*n)++] = (int)peer;
        path_set(ld, p);
    }
    return MSCCLPP_OK;
}

static mscclpp_result_t parse_switch_entry(ld_t *ld, int rank, const json_t *entry,
                                           plan_gpu_t *g)
{
    uint8_t buf;
    json_t *groups;
    CHECK(get_buf(ld, entry, "buffer_type", &buf));
    CHECK(get_array(ld, entry, "rank_groups", true, &groups));
    size_t pg = path_key(ld, "rank_groups");
    size_t i;
    json_t *grp;
    json_array_foreach(groups, i, grp) {
        size_t p = path_idx(ld, i);
        json_t *ranks;
        CHECK(expect_object(ld, grp));
        CHECK(check_keys(ld, grp, keys_rank_group));
        CHECK(get_array(ld, grp, "ranks", true, &ranks));
        size_t pr = path_key(ld, "ranks");
        size_t n = json_array_size(ranks);
        if (n == 0) return ld_err(ld, "a switch channel needs at least one rank");
        if (n > PLAN_MAX_SWITCH_MEMBERS)
            return ld_err(ld, "%zu ranks exceed the limit of %d per switch channel", n,
                          PLAN_MAX_SWITCH_MEMBERS);
        plan_switch_t *sw = &g->switches[g->n_chan[PLAN_CH_SWITCH]++];
        sw->buf = buf;
        LD_ALLOC(ld, sw->ranks, n);
        bool member = false;
        size_t j;
        json_t *v;
        json_array_foreach(ranks, j, v) {
            size_t pj = path_idx(ld, j);
            uint64_t r;
            CHECK(u64_val(ld, v, 0, UINT64_MAX, &r));
            if (r >= (uint64_t)ld->plan->nranks)
                return ld_err(ld, "rank %llu is out of range (the plan has %d ranks)",
                              (unsigned long long)r, ld->plan->nranks);
            for (int k = 0; k < sw->n_ranks; k++)
                if (sw->ranks[k] == (int)r) return ld_err(ld, "rank %d is listed twice", (int)r);
            sw->ranks[sw->n_ranks++] = (int)r;
            member |= (int)r == rank;
            path_set(ld, pj);
        }
        if (!member) return ld_err(ld, "rank %d is not a member of its own switch channel", rank);
        path_set(ld, pr);
        path_set(ld, p);
    }
    path_set(ld, pg);
    return MSCCLPP_OK;
}

static mscclpp_result_t parse_gpu_channels(ld_t *ld, int rank, const json_t *chans, plan_gpu_t *g)
{
    /* Count first: global indices are positions in each type's concatenation (plan-format §1.3) */
    size_t count[PLAN_CH__COUNT] = {0};
    size_t i;
    json_t *e;
    json_array_foreach(chans, i, e) {
        size_t p = path_idx(ld, i);
        json_t *tv, *list;
        int t;
        CHECK(expect_object(ld, e));
        CHECK(check_old_format(ld, e));
        CHECK(check_keys(ld, e, keys_gpu_chan));
        CHECK(get_member(ld, e, "channel_type", true, &tv));
        size_t pt = path_key(ld, "channel_type");
        CHECK(chan_val(ld, tv, false, true, &t));
        path_set(ld, pt);
        if (t == PLAN_CH_SWITCH) {
            CHECK(get_array(ld, e, "rank_groups", true, &list));
        } else {
            CHECK(get_array(ld, e, "connected_to", true, &list));
        }
        count[t] += json_array_size(list);
        path_set(ld, p);
    }
    for (int t = PLAN_CH_MEMORY; t < PLAN_CH__COUNT; t++) {
        if (count[t] > PLAN_MAX_GPU_CHANNELS)
            return ld_err(ld, "%zu %s channels exceed the limit of %d per rank", count[t],
                          chan_names[t], PLAN_MAX_GPU_CHANNELS);
    }
    LD_ALLOC(ld, g->peers[PLAN_CH_MEMORY], count[PLAN_CH_MEMORY]);
    LD_ALLOC(ld, g->peers[PLAN_CH_PORT], count[PLAN_CH_PORT]);
    LD_ALLOC(ld, g->switches, count[PLAN_CH_SWITCH]);
    json_array_foreach(chans, i, e) {
        size_t p = path_idx(ld, i);
        int t = lookup_chan(json_string_value(json_object_get(e, "channel_type")));
        if (t == PLAN_CH_SWITCH) {
            CHECK(parse_switch_entry(ld, rank, e, g));
        } else {
            size_t pc = path_key(ld, "connected_to");
            CHECK(parse_peer_list(ld, rank, json_object_get(e, "connected_to"), g->peers[t],
                                  &g->n_chan[t]));
            path_set(ld, pc);
        }
        path_set(ld, p);
    }
    return MSCCLPP_OK;
}

static mscclpp_result_t parse_remote_buffers(ld_t *ld, int rank, const json_t *list,
                                             plan_gpu_t *g)
{
    size_t n = json_array_size(list);
    if (n > PLAN_MAX_GPU_RBUFS)
        return ld_err(ld, "%zu remote buffers exceed the limit of %d per rank", n,
                      PLAN_MAX_GPU_RBUFS);
    LD_ALLOC(ld, g->rbufs, n);
    size_t i;
    json_t *e;
    json_array_foreach(list, i, e) {
        size_t p = path_idx(ld, i);
        plan_rbuf_t *rb = &g->rbufs[i];
        uint64_t owner;
        json_t *access;
        CHECK(expect_object(ld, e));
        CHECK(check_keys(ld, e, keys_rbuf));
        CHECK(get_u64(ld, e, "rank", true, 0, UINT64_MAX, 0, &owner));
        if (owner >= (uint64_t)ld->plan->nranks) {
            path_key(ld, "rank");
            return ld_err(ld, "owner rank %llu is out of range (the plan has %d ranks)",
                          (unsigned long long)owner, ld->plan->nranks);
        }
        if ((int)owner == rank) {
            path_key(ld, "rank");
            return ld_err(ld, "a remote buffer of the rank itself (%d)", rank);
        }
        rb->owner = (int)owner;
        CHECK(get_buf(ld, e, "type", &rb->buf));
        CHECK(get_array(ld, e, "access_channel_types", true, &access));
        size_t pa = path_key(ld, "access_channel_types");
        size_t j;
        json_t *v;
        json_array_foreach(access, j, v) {
            size_t pj = path_idx(ld, j);
            int t;
            CHECK(chan_val(ld, v, false, false, &t));
            rb->access |= (uint8_t)(1u << t);
            path_set(ld, pj);
        }
        path_set(ld, pa);
        path_set(ld, p);
    }
    g->n_rbufs = (int)n;
    return MSCCLPP_OK;
}

static mscclpp_result_t parse_semaphores(ld_t *ld, const json_t *list, plan_gpu_t *g)
{
    size_t n = json_array_size(list);
    if (n > PLAN_MAX_GPU_SEMS)
        return ld_err(ld, "%zu semaphores exceed the limit of %d per rank", n, PLAN_MAX_GPU_SEMS);
    LD_ALLOC(ld, g->sem_init, n);
    size_t i;
    json_t *e;
    json_array_foreach(list, i, e) {
        size_t p = path_idx(ld, i);
        uint64_t init;
        CHECK(expect_object(ld, e));
        CHECK(check_keys(ld, e, keys_sem));
        CHECK(get_u64(ld, e, "init_value", true, 0, INT32_MAX, 0, &init));
        g->sem_init[i] = (int32_t)init;
        path_set(ld, p);
    }
    g->n_sems = (int)n;
    return MSCCLPP_OK;
}

static mscclpp_result_t parse_gpu(ld_t *ld, int rank, const json_t *jg, plan_gpu_t *g)
{
    uint64_t id;
    json_t *v;
    CHECK(expect_object(ld, jg));
    CHECK(check_old_format(ld, jg));
    CHECK(check_keys(ld, jg, keys_gpu));
    CHECK(get_u64(ld, jg, "id", true, 0, UINT64_MAX, 0, &id));
    if (id != (uint64_t)rank) {
        size_t p = path_key(ld, "id");
        mscclpp_result_t res = ld_err(ld, "%llu does not match its position %d in gpus",
                                      (unsigned long long)id, rank);
        path_set(ld, p);
        return res;
    }
    g->id = rank;
    CHECK(get_u32(ld, jg, "input_chunks", true, 0, UINT32_MAX, 0, &g->input_chunks));
    CHECK(get_u32(ld, jg, "output_chunks", true, 0, UINT32_MAX, 0, &g->output_chunks));
    CHECK(get_u32(ld, jg, "scratch_chunks", true, 0, UINT32_MAX, 0, &g->scratch_chunks));

    CHECK(get_array(ld, jg, "channels", true, &v));
    size_t p = path_key(ld, "channels");
    CHECK(parse_gpu_channels(ld, rank, v, g));
    path_set(ld, p);

    CHECK(get_array(ld, jg, "remote_buffers", true, &v));
    p = path_key(ld, "remote_buffers");
    CHECK(parse_remote_buffers(ld, rank, v, g));
    path_set(ld, p);

    CHECK(get_array(ld, jg, "semaphores", false, &v));
    if (v) {
        p = path_key(ld, "semaphores");
        CHECK(parse_semaphores(ld, v, g));
        path_set(ld, p);
    }
    /* threadblocks are checked in pass 2; make sure the key is there before doing any. */
    CHECK(get_array(ld, jg, "threadblocks", true, &v));
    return MSCCLPP_OK;
}

/* ------------------------------------------------------------------------------------------ */
/* threadblocks[b]: block tables */

static mscclpp_result_t parse_block_channels(ld_t *ld, const json_t *list, const plan_gpu_t *g,
                                             plan_block_t *blk)
{
    size_t i;
    json_t *e;
    json_array_foreach(list, i, e) {
        size_t p = path_idx(ld, i);
        json_t *tv, *ids;
        int t;
        CHECK(expect_object(ld, e));
        CHECK(check_keys(ld, e, keys_block_chan));
        CHECK(get_member(ld, e, "channel_type", true, &tv));
        size_t pt = path_key(ld, "channel_type");
        CHECK(chan_val(ld, tv, false, true, &t));
        path_set(ld, pt);
        CHECK(get_array(ld, e, "channel_ids", true, &ids));
        size_t pi = path_key(ld, "channel_ids");
        size_t j;
        json_t *v;
        json_array_foreach(ids, j, v) {
            size_t pj = path_idx(ld, j);
            uint64_t c;
            CHECK(u64_val(ld, v, 0, UINT64_MAX, &c));
            if (c >= (uint64_t)g->n_chan[t])
                return ld_err(ld, "%s channel %llu is out of range (gpus[%d] has %d %s %s)",
                              chan_names[t], (unsigned long long)c, g->id, g->n_chan[t],
                              chan_names[t],
                              t == PLAN_CH_SWITCH ? "channels (rank groups)" : "channels");
            if (blk->n_chan[t] >= PLAN_MAX_CHANNELS_PER_BLOCK)
                return ld_err(ld, "more than %d %s channels in one thread block",
                              PLAN_MAX_CHANNELS_PER_BLOCK, chan_names[t]);
            blk->chan[t][blk->n_chan[t]++] = (uint16_t)c;
            path_set(ld, pj);
        }
        path_set(ld, pi);
        path_set(ld, p);
    }
    return MSCCLPP_OK;
}

static mscclpp_result_t parse_block_rbufs(ld_t *ld, const json_t *list, const plan_gpu_t *g,
                                          plan_block_t *blk)
{
    size_t i;
    json_t *e;
    json_array_foreach(list, i, e) {
        size_t p = path_idx(ld, i);
        json_t *tv, *ids;
        int t;
        CHECK(expect_object(ld, e));
        CHECK(check_keys(ld, e, keys_block_rbuf));
        CHECK(get_member(ld, e, "access_channel_type", true, &tv));
        size_t pt = path_key(ld, "access_channel_type");
        CHECK(chan_val(ld, tv, false, false, &t));
        path_set(ld, pt);
        CHECK(get_array(ld, e, "remote_buffer_ids", true, &ids));
        size_t pi = path_key(ld, "remote_buffer_ids");
        size_t j;
        json_t *v;
        json_array_foreach(ids, j, v) {
            size_t pj = path_idx(ld, j);
            uint64_t q;
            CHECK(u64_val(ld, v, 0, UINT64_MAX, &q));
            if (q >= (uint64_t)g->n_rbufs)
                return ld_err(ld, "remote buffer %llu is out of range (gpus[%d] has %d remote "
                                  "buffers)",
                              (unsigned long long)q, g->id, g->n_rbufs);
            if (!(g->rbufs[q].access & (1u << t)))
                return ld_err(ld, "remote buffer %llu is not accessible through %s channels "
                                  "(gpus[%d].remote_buffers[%llu].access_channel_types)",
                              (unsigned long long)q, chan_names[t], g->id,
                              (unsigned long long)q);
            if (blk->n_rbuf[t] >= PLAN_MAX_RBUFS_PER_BLOCK)
                return ld_err(ld, "more than %d %s-access remote buffers in one thread block",
                              PLAN_MAX_RBUFS_PER_BLOCK, chan_names[t]);
            blk->rbuf[t][blk->n_rbuf[t]++] = (uint16_t)q;
            path_set(ld, pj);
        }
        path_set(ld, pi);
        path_set(ld, p);
    }
    return MSCCLPP_OK;
}

/* ------------------------------------------------------------------------------------------ */
/* Operations */

#define CH_BIT(t) (1u << (t))
#define CH_MP (CH_BIT(PLAN_CH_MEMORY) | CH_BIT(PLAN_CH_PORT))

/* What an op needs: channel types it may use (0: none), minimum src/dst descriptors. */
typedef struct {
    uint8_t chans;
    uint8_t min_src, min_dst;
    bool needs_channel_ids; /* signal/wait/flush */
    bool pairs;             /* src[i] goes with dst[i]: n_src == n_dst */
} op_rule_t;

static const op_rule_t op_rules[PLAN_OP__COUNT] = {
    [PLAN_OP_NOP] = {0, 0, 0, false, false},
    [PLAN_OP_BARRIER] = {0, 0, 0, false, false},
    [PLAN_OP_PUT] = {CH_MP, 1, 1, false, true},
    [PLAN_OP_PPKT] = {CH_MP, 1, 1, false, true},
    [PLAN_OP_RPPKT] = {CH_MP, 1, 1, false, false},
    [PLAN_OP_PWS] = {CH_MP, 1, 1, false, true},
    [PLAN_OP_PWSF] = {CH_MP, 1, 1, false, true},
    [PLAN_OP_GET] = {CH_BIT(PLAN_CH_MEMORY), 1, 1, false, true},
    [PLAN_OP_COPY] = {0, 1, 1, false, false},
    [PLAN_OP_CPKT] = {0, 1, 1, false, false},
    [PLAN_OP_UPKT] = {0, 1, 1, false, false},
    [PLAN_OP_SIGNAL] = {CH_MP, 0, 0, true, false},
    [PLAN_OP_WAIT] = {CH_MP, 0, 0, true, false},
    [PLAN_OP_FLUSH] = {CH_BIT(PLAN_CH_PORT), 0, 0, true, false},
    [PLAN_OP_RE] = {0, 1, 1, false, false},
    [PLAN_OP_REPKT] = {0, 1, 1, false, false},
    [PLAN_OP_RECPKT] = {0, 1, 2, false, false},
    [PLAN_OP_RES] = {CH_BIT(PLAN_CH_MEMORY), 1, 1, false, false},
    [PLAN_OP_RESPKT] = {CH_BIT(PLAN_CH_MEMORY), 1, 1, false, false},
    [PLAN_OP_RECSPKT] = {CH_BIT(PLAN_CH_MEMORY), 1, 2, false, false},
    [PLAN_OP_RRE] = {CH_BIT(PLAN_CH_MEMORY), 1, 1, false, false},
    [PLAN_OP_RRES] = {CH_BIT(PLAN_CH_MEMORY), 1, 1, false, false},
    [PLAN_OP_GLRES] = {CH_BIT(PLAN_CH_SWITCH), 1, 1, false, false},
    [PLAN_OP_RLXSIGNAL] = {CH_MP, 0, 0, true, false},
    [PLAN_OP_RLXWAIT] = {CH_MP, 0, 0, true, false},
    [PLAN_OP_PIPELINE] = {0, 0, 0, false, false},
    [PLAN_OP_SEM_RELEASE] = {0, 0, 0, false, false},
    [PLAN_OP_SEM_ACQUIRE] = {0, 0, 0, false, false},
    [PLAN_OP_GSTORE] = {CH_BIT(PLAN_CH_SWITCH), 1, 1, false, false},
    [PLAN_OP_GSTOREPKT] = {CH_BIT(PLAN_CH_SWITCH), 1, 1, false, false},
    [PLAN_OP_GLRE] = {CH_BIT(PLAN_CH_SWITCH), 1, 1, false, false},
};

#define DESC_NONE (-1)

/* The descriptor kind an op reads at position `pos` of src_buff or dst_buff (plan-format §2.4–2.6),
 * or DESC_NONE where it reads nothing. */
static int desc_expect(const plan_op_t *op, bool dst, int pos)
{
    switch (op->type) {
    case PLAN_OP_COPY:
    case PLAN_OP_CPKT:
    case PLAN_OP_UPKT: return pos == 0 ? PLAN_DESC_LOCAL : DESC_NONE;
    case PLAN_OP_PUT:
    case PLAN_OP_PWS:
    case PLAN_OP_PWSF:
    case PLAN_OP_PPKT: return dst ? PLAN_DESC_REMOTE : PLAN_DESC_LOCAL;
    case PLAN_OP_RPPKT:
        return dst ? PLAN_DESC_REMOTE : pos == 0 ? PLAN_DESC_LOCAL : DESC_NONE;
    case PLAN_OP_GET: return dst ? PLAN_DESC_LOCAL : PLAN_DESC_REMOTE;
    case PLAN_OP_RE:
    case PLAN_OP_REPKT:
        return !dst ? PLAN_DESC_LOCAL : pos == 0 ? PLAN_DESC_LOCAL : DESC_NONE;
    case PLAN_OP_RECPKT:
        return !dst ? PLAN_DESC_LOCAL : pos <= 1 ? PLAN_DESC_LOCAL : DESC_NONE;
    case PLAN_OP_RES:
    case PLAN_OP_RESPKT:
        return !dst ? PLAN_DESC_LOCAL : pos == 0 ? PLAN_DESC_LOCAL : PLAN_DESC_REMOTE;
    case PLAN_OP_RECSPKT:
        return !dst ? PLAN_DESC_LOCAL : pos <= 1 ? PLAN_DESC_LOCAL : PLAN_DESC_REMOTE;
    case PLAN_OP_RRE:
        return dst ? (pos == 0 ? PLAN_DESC_LOCAL : DESC_NONE)
                   : (pos == 0 ? PLAN_DESC_LOCAL : PLAN_DESC_REMOTE);
    case PLAN_OP_RRES: return pos == 0 ? PLAN_DESC_LOCAL : PLAN_DESC_REMOTE;
    case PLAN_OP_GLRES: return pos == 0 ? PLAN_DESC_SWITCH : DESC_NONE;
    case PLAN_OP_GLRE: return pos != 0 ? DESC_NONE : dst ? PLAN_DESC_LOCAL : PLAN_DESC_SWITCH;
    case PLAN_OP_GSTORE:
    case PLAN_OP_GSTOREPKT:
        return pos != 0 ? DESC_NONE : dst ? PLAN_DESC_SWITCH : PLAN_DESC_LOCAL;
    default: return DESC_NONE;
    }
}

/* A memory put may also store into this rank's own buffers: a destination with a "type" is
 * local (plan-format §2.4), so one load of the source feeds the peers' stores and the local one
 * (the copy of a rank's own block in an allgather or broadcast). Port puts are one proxy
 * transfer per channel: their destinations stay remote. */
static bool local_put_dst(const plan_op_t *op, const json_t *jd)
{
    if (op->type != PLAN_OP_PUT || op->channel_type != PLAN_CH_MEMORY || !json_is_object(jd))
        return false;
    const json_t *t = json_object_get(jd, "type");
    return t && !json_is_null(t);
}

static int max_descs(const plan_op_t *op, bool dst)
{
    int n = 0;
    while (n < PLAN_MAX_DESCS && desc_expect(op, dst, n) != DESC_NONE) n++;
    return n;
}

static const char *const desc_key[] = {"type", "buffer_id", "switch_channel_id"};
static const char *const desc_what[] = {"a local buffer (\"type\")",
                                        "a remote buffer (\"buffer_id\")",
                                        "a switch channel (\"switch_channel_id\")"};

/* index/size against `count` chunks; `whose` names the owner for remote/switch buffers. */
static mscclpp_result_t check_range(ld_t *ld, const plan_desc_t *d,
                                    uint32_t count, int buf, const char *whose)
{
    if ((uint64_t)d->index + d->size <= count) return MSCCLPP_OK;
    bool index_bad = d->index > count || (d->index == count && d->size > 0);
    size_t p = path_key(ld, index_bad ? "index" : "size");
    mscclpp_result_t res;
    if (index_bad)
        res = ld_err(ld, "%u is out of range for %s=%u%s", d->index, chunk_keys[buf], count,
                     whose);
    else
        res = ld_err(ld, "%u chunks from index %u end past %s=%u%s", d->size, d->index,
                     chunk_keys[buf], count, whose);
    path_set(ld, p);
    return res;
}

static mscclpp_result_t parse_desc(ld_t *ld, int rank, const plan_block_t *blk, const json_t *jd,
                                   const plan_op_t *op, int kind, plan_desc_t *d)
{
    const plan_gpu_t *g = &ld->plan->gpus[rank];
    CHECK(expect_object(ld, jd));
    CHECK(check_keys(ld, jd, keys_desc));
    json_t *kv = json_object_get(jd, desc_key[kind]);
    if (!kv || json_is_null(kv)) {
        for (int other = 0; other < 3; other++) {
            json_t *ov = json_object_get(jd, desc_key[other]);
            if (other != kind && ov && !json_is_null(ov)) {
                size_t p = path_key(ld, desc_key[other]);
                mscclpp_result_t res = ld_err(ld, "%s needs %s here, not %s",
                                              plan_op_name(op->type), desc_what[kind],
                                              desc_what[other]);
                path_set(ld, p);
                return res;
            }
        }
        return ld_err(ld, "%s needs %s here: required key \"%s\" is missing",
                      plan_op_name(op->type), desc_what[kind], desc_key[kind]);
    }
    d->kind = (uint8_t)kind;
    uint32_t index, size;
    CHECK(get_u32(ld, jd, "index", true, 0, UINT32_MAX, 0, &index));
    CHECK(get_u32(ld, jd, "size", true, 0, UINT32_MAX, 0, &size));
    d->index = index;
    d->size = size;

    if (kind == PLAN_DESC_LOCAL) {
        size_t p = path_key(ld, "type");
        CHECK(buf_val(ld, kv, &d->buf));
        path_set(ld, p);
        return check_range(ld, d, gpu_chunks(g, d->buf), d->buf, "");
    }

    size_t p = path_key(ld, desc_key[kind]);
    uint64_t k;
    CHECK(u64_val(ld, kv, 0, UINT64_MAX, &k));
    char whose[64];
    if (kind == PLAN_DESC_REMOTE) {
        int t = op->channel_type;
        if (k >= blk->n_rbuf[t])
            return ld_err(ld, "%llu is out of range (the thread block has %d %s-access remote "
                              "buffers in remote_buffer_refs)",
                          (unsigned long long)k, blk->n_rbuf[t], chan_names[t]);
        path_set(ld, p);
        const plan_rbuf_t *rb = &g->rbufs[blk->rbuf[t][k]];
        d->ref = (uint16_t)k;
        d->buf = rb->buf;
        snprintf(whose, sizeof whose, " of rank %d (remote buffer %d)", rb->owner,
                 blk->rbuf[t][k]);
        return check_range(ld, d, gpu_chunks(&ld->plan->gpus[rb->owner], d->buf), d->buf,
                           whose);
    }
    if (k >= blk->n_chan[PLAN_CH_SWITCH])
        return ld_err(ld, "%llu is out of range (the thread block has %d switch channels)",
                      (unsigned long long)k, blk->n_chan[PLAN_CH_SWITCH]);
    path_set(ld, p);
    const plan_switch_t *sw = &g->switches[blk->chan[PLAN_CH_SWITCH][k]];
    d->ref = (uint16_t)k;
    d->buf = sw->buf;
    /* The switch channel's buffer is the bound buffer on every member: check them all. */
    for (int m = 0; m < sw->n_ranks; m++) {
        const plan_gpu_t *mg = &ld->plan->gpus[sw->ranks[m]];
        snprintf(whose, sizeof whose, " of rank %d (switch channel %d)", mg->id,
                 blk->chan[PLAN_CH_SWITCH][k]);
        CHECK(check_range(ld, d, gpu_chunks(mg, d->buf), d->buf, whose));
    }
    return MSCCLPP_OK;
}

static mscclpp_result_t parse_desc_list(ld_t *ld, int rank, const plan_block_t *blk,
                                        const json_t *jop, plan_op_t *op, bool dst)
{
    const char *key = dst ? "dst_buff" : "src_buff";
    json_t *list;
    CHECK(get_array(ld, jop, key, false, &list));
    size_t n = list ? json_array_size(list) : 0;
    int max = max_descs(op, dst);
    size_t p = path_key(ld, key);
    if (n > PLAN_MAX_DESCS)
        return ld_err(ld, "%zu descriptors exceed the limit of %d per op", n, PLAN_MAX_DESCS);
    if (n > (size_t)max) {
        if (max == 0) return ld_err(ld, "%s takes no %s", plan_op_name(op->type), key);
        return ld_err(ld, "%s takes at most %d %s entries, got %zu", plan_op_name(op->type), max,
                      key, n);
    }
    plan_desc_t *arr = NULL;
    if (n) LD_ALLOC(ld, arr, n);
    if (dst) op->dst = arr;
    else op->src = arr;
    for (size_t i = 0; i < n; i++) {
        size_t pi = path_idx(ld, i);
        const json_t *jd = json_array_get(list, i);
        int kind = desc_expect(op, dst, (int)i);
        if (dst && local_put_dst(op, jd)) kind = PLAN_DESC_LOCAL;
        CHECK(parse_desc(ld, rank, blk, jd, op, kind, &arr[i]));
        path_set(ld, pi);
    }
    if (dst) op->n_dst = (uint8_t)n;
    else op->n_src = (uint8_t)n;
    path_set(ld, p);
    return MSCCLPP_OK;
}

static mscclpp_result_t parse_reduce_op(ld_t *ld, const json_t *jop, plan_op_t *op)
{
    const char *s;
    CHECK(get_str(ld, jop, "reduce_op", false, &s));
    op->reduce_op = MSCCLPP_REDOP_PLAN;
    if (!s) return MSCCLPP_OK;
    static const char *const names[MSCCLPP_REDOP_COUNT] = {"sum", "prod", "min", "max"};
    for (int i = 0; i < MSCCLPP_REDOP_COUNT; i++) {
        if (!strcmp(s, names[i])) {
            op->reduce_op = (int8_t)i;
            return MSCCLPP_OK;
        }
    }
    size_t p = path_key(ld, "reduce_op");
    mscclpp_result_t res =
        ld_err(ld, "unknown reduction \"%s\" (expected sum, prod, min or max)", s);
    path_set(ld, p);
    return res;
}

static mscclpp_result_t parse_channel_ids(ld_t *ld, const json_t *jop, const plan_block_t *blk,
                                          plan_op_t *op)
{
    json_t *ids;
    CHECK(get_array(ld, jop, "channel_ids", false, &ids));
    size_t n = ids ? json_array_size(ids) : 0;
    if (n == 0) return MSCCLPP_OK;
    size_t p = path_key(ld, "channel_ids");
    if (!op_rules[op->type].chans)
        return ld_err(ld, "%s uses no channels", plan_op_name(op->type));
    if (n > PLAN_MAX_CHANNELS_PER_OP)
        return ld_err(ld, "%zu channels exceed the limit of %d per op", n,
                      PLAN_MAX_CHANNELS_PER_OP);
    int t = op->channel_type;
    size_t i;
    json_t *v;
    json_array_foreach(ids, i, v) {
        size_t pi = path_idx(ld, i);
        uint64_t c;
        CHECK(u64_val(ld, v, 0, UINT64_MAX, &c));
        if (c >= blk->n_chan[t])
            return ld_err(ld, "%s channel %llu is out of range (the thread block has %d %s "
                              "channels)",
                          chan_names[t], (unsigned long long)c, blk->n_chan[t], chan_names[t]);
        op->channel_ids[i] = (uint8_t)c;
        path_set(ld, pi);
    }
    op->n_channels = (uint8_t)n;
    path_set(ld, p);
    return MSCCLPP_OK;
}

static mscclpp_result_t parse_tbg(ld_t *ld, const json_t *jop, plan_op_t *op)
{
    json_t *tbg;
    CHECK(get_object(ld, jop, "tbg_info", false, &tbg));
    if (!tbg) return MSCCLPP_OK;
    size_t p = path_key(ld, "tbg_info");
    CHECK(check_keys(ld, tbg, keys_tbg));
    uint32_t id, size;
    CHECK(get_u32(ld, tbg, "tbg_size", true, 1, UINT16_MAX, 1, &size));
    CHECK(get_u32(ld, tbg, "tb_id", true, 0, UINT16_MAX, 0, &id));
    if (id >= size) {
        path_key(ld, "tb_id");
        return ld_err(ld, "%u is out of range for tbg_size=%u", id, size);
    }
    op->tbg_id = (uint16_t)id;
    op->tbg_size = (uint16_t)size;
    path_set(ld, p);
    return MSCCLPP_OK;
}

static mscclpp_result_t parse_sem_ids(ld_t *ld, const json_t *jop, const plan_gpu_t *g,
                                      plan_op_t *op)
{
    json_t *ids;
    CHECK(get_array(ld, jop, "semaphore_ids", true, &ids));
    size_t p = path_key(ld, "semaphore_ids");
    size_t n = json_array_size(ids);
    if (n == 0) return ld_err(ld, "%s needs at least one semaphore id", plan_op_name(op->type));
    if (n > PLAN_MAX_SEMS_PER_OP)
        return ld_err(ld, "%zu semaphore ids exceed the limit of %d per op", n,
                      PLAN_MAX_SEMS_PER_OP);
    size_t i;
    json_t *v;
    json_array_foreach(ids, i, v) {
        size_t pi = path_idx(ld, i);
        uint64_t s;
        CHECK(u64_val(ld, v, 0, UINT64_MAX, &s));
        if (s >= (uint64_t)g->n_sems)
            return ld_err(ld, "semaphore %llu is out of range (gpus[%d] has %d semaphores)",
                          (unsigned long long)s, g->id, g->n_sems);
        if (s > UINT8_MAX)
            return ld_err(ld, "semaphore %llu is beyond the 256 an op can name",
                          (unsigned long long)s);
        op->sem_ids[i] = (uint8_t)s;
        path_set(ld, pi);
    }
    op->n_sems = (uint8_t)n;
    path_set(ld, p);
    return MSCCLPP_OK;
}

/* Parses op `jop` into blk->ops[*pos] and, for a pipeline, its body right after it. */
static mscclpp_result_t parse_op(ld_t *ld, int rank, plan_block_t *blk, const json_t *jop,
                                 bool in_pipeline, int *pos)
{
    const plan_gpu_t *g = &ld->plan->gpus[rank];
    plan_op_t *op = &blk->ops[(*pos)++];
    const char *name;
    CHECK(expect_object(ld, jop));
    CHECK(check_keys(ld, jop, keys_op));
    CHECK(get_str(ld, jop, "name", true, &name));
    int type = lookup_op(name);
    if (type < 0) {
        path_key(ld, "name");
        return ld_err(ld, "unknown operation \"%s\"", name);
    }
    op->type = (uint8_t)type;
    const op_rule_t *rule = &op_rules[type];

    /* Channel type: absent means none, except for ops that only ever use one kind (reduce-send
     * ops written before they carried channel_type, flush, and the switch ops). An explicit
     * "none" on an op that needs a channel is an error. */
    json_t *tv;
    int t = PLAN_CH_NONE;
    CHECK(get_member(ld, jop, "channel_type", false, &tv));
    if (tv) {
        size_t p = path_key(ld, "channel_type");
        CHECK(chan_val(ld, tv, true, true, &t));
        if (rule->chans && !(rule->chans & CH_BIT(t)))
            return ld_err(ld, "%s cannot use %s channels (it takes %s%s%s)", name, chan_names[t],
                          rule->chans & CH_BIT(PLAN_CH_MEMORY) ? "memory" : "",
                          (rule->chans & CH_BIT(PLAN_CH_MEMORY)) &&
                                  (rule->chans & ~CH_BIT(PLAN_CH_MEMORY))
                              ? " or "
                              : "",
                          rule->chans & CH_BIT(PLAN_CH_PORT)     ? "port"
                          : rule->chans & CH_BIT(PLAN_CH_SWITCH) ? "switch"
                                                                 : "");
        path_set(ld, p);
    }
    if (rule->chans && t == PLAN_CH_NONE) {
        if (rule->chans == CH_BIT(PLAN_CH_MEMORY)) t = PLAN_CH_MEMORY;
        else if (rule->chans == CH_BIT(PLAN_CH_SWITCH)) t = PLAN_CH_SWITCH;
        else if (rule->chans == CH_BIT(PLAN_CH_PORT)) t = PLAN_CH_PORT;
        else
            return ld_err(ld, "%s needs channel_type \"memory\" or \"port\"", name);
    }
    /* Ops that use no channel keep none whatever the file says. */
    op->channel_type = rule->chans ? (uint8_t)t : PLAN_CH_NONE;

    CHECK(parse_channel_ids(ld, jop, blk, op));
    CHECK(parse_desc_list(ld, rank, blk, jop, op, false));
    CHECK(parse_desc_list(ld, rank, blk, jop, op, true));
    CHECK(parse_reduce_op(ld, jop, op));
    CHECK(parse_tbg(ld, jop, op));

    if (op->n_src < rule->min_src) {
        path_key(ld, "src_buff");
        return ld_err(ld, "%s needs at least %d source descriptor%s, got %d", name,
                      rule->min_src, rule->min_src > 1 ? "s" : "", op->n_src);
    }
    if (op->n_dst < rule->min_dst) {
        path_key(ld, "dst_buff");
        return ld_err(ld, "%s needs at least %d destination descriptor%s, got %d", name,
                      rule->min_dst, rule->min_dst > 1 ? "s" : "", op->n_dst);
    }
    if (rule->pairs && op->n_src != op->n_dst) {
        path_key(ld, "src_buff");
        return ld_err(ld, "%s pairs src_buff[i] with dst_buff[i]: %d sources for %d "
                          "destinations",
                      name, op->n_src, op->n_dst);
    }
    /* Every descriptor covers as many chunks as src_buff[0]: an op moves or reduces element i
     * of each onto element i of the others (a reduce into a larger destination leaves its tail
     * unwritten; into a smaller one, it writes past it). */
    for (int k = 1; k < op->n_src + op->n_dst; k++) {
        bool dst = k >= op->n_src;
        int i = dst ? k - op->n_src : k;
        const plan_desc_t *d = dst ? &op->dst[i] : &op->src[i];
        if (d->size == op->src[0].size) continue;
        path_appendf(ld, ".%s[%d].size", dst ? "dst_buff" : "src_buff", i);
        return ld_err(ld, "%u chunks where src_buff[0] has %u (every descriptor of %s covers "
                          "the same number of chunks)",
                      d->size, op->src[0].size, name);
    }
    if (rule->needs_channel_ids && op->n_channels == 0) {
        path_key(ld, "channel_ids");
        return ld_err(ld, "%s needs at least one channel id", name);
    }
    /* Port data ops push one proxy request per destination, on channel_ids[i]. */
    if (t == PLAN_CH_PORT && rule->min_dst > 0 && op->n_channels != op->n_dst) {
        path_key(ld, "channel_ids");
        return ld_err(ld, "%s on port channels needs one channel id per destination: %d "
                          "channel ids for %d destinations",
                      name, op->n_channels, op->n_dst);
    }

    switch (type) {
    case PLAN_OP_BARRIER: {
        uint32_t id, nb;
        CHECK(get_u32(ld, jop, "barrier_id", true, 0, UINT32_MAX, 0, &id));
        if (id >= PLAN_MAX_BARRIERS) {
            path_key(ld, "barrier_id");
            return ld_err(ld, "%u is out of range (at most %d barriers, ids 0..%d)", id,
                          PLAN_MAX_BARRIERS, PLAN_MAX_BARRIERS - 1);
        }
        CHECK(get_u32(ld, jop, "num_threadblocks", true, 0, UINT32_MAX, 0, &nb));
        if (nb < 1 || nb > (uint32_t)g->n_blocks) {
            path_key(ld, "num_threadblocks");
            return ld_err(ld, "%u is out of range (expected 1..%d, the rank's thread blocks)", nb,
                          g->n_blocks);
        }
        op->barrier_id = (uint8_t)id;
        op->barrier_nblocks = (uint16_t)nb;
        /* One barrier gathers one number of blocks: blocks counting differently never meet. */
        if (ld->bar_rank != rank) {
            ld->bar_rank = rank;
            memset(ld->bar_nb, 0, sizeof ld->bar_nb);
        }
        if (!ld->bar_nb[id]) {
            ld->bar_nb[id] = (uint16_t)nb;
            snprintf(ld->bar_where[id], sizeof ld->bar_where[id], "%.159s", ld->path);
        } else if (ld->bar_nb[id] != nb) {
            path_key(ld, "num_threadblocks");
            return ld_err(ld, "%u, but %s uses barrier %u with %u: the blocks of one barrier "
                              "must agree on how many meet there",
                          nb, ld->bar_where[id], id, ld->bar_nb[id]);
        }
        break;
    }
    case PLAN_OP_SEM_ACQUIRE:
    case PLAN_OP_SEM_RELEASE: CHECK(parse_sem_ids(ld, jop, g, op)); break;
    case PLAN_OP_PIPELINE: {
        if (in_pipeline) {
            path_key(ld, "name");
            return ld_err(ld, "nested pipelines are not supported");
        }
        json_t *ctx, *body;
        CHECK(get_object(ld, jop, "iter_context", true, &ctx));
        size_t p = path_key(ld, "iter_context");
        CHECK(check_keys(ld, ctx, keys_iter));
        CHECK(get_u64(ld, ctx, "unit_size", true, 1, UINT64_MAX, 0, &op->unit_size));
        CHECK(get_u32(ld, ctx, "num_chunks", true, 1, UINT32_MAX, 0, &op->num_chunks));
        path_set(ld, p);
        CHECK(get_array(ld, jop, "ops", true, &body));
        p = path_key(ld, "ops");
        size_t i;
        json_t *inner;
        json_array_foreach(body, i, inner) {
            size_t pi = path_idx(ld, i);
            CHECK(parse_op(ld, rank, blk, inner, true, pos));
            path_set(ld, pi);
        }
        op->n_inner = (uint16_t)json_array_size(body);
        path_set(ld, p);
        break;
    }
    default: break;
    }
    return MSCCLPP_OK;
}

/* Ops in a block once pipelines are flattened; ops that are not objects count as one. */
static size_t count_ops(const json_t *ops)
{
    size_t n = 0, i;
    json_t *op;
    json_array_foreach(ops, i, op) {
        n++;
        json_t *name = json_object_get(op, "name");
        json_t *body = json_object_get(op, "ops");
        if (json_is_string(name) && !strcmp(json_string_value(name), "pipeline") &&
            json_is_array(body))
            n += json_array_size(body);
    }
    return n;
}

static mscclpp_result_t parse_block(ld_t *ld, int rank, size_t b, const json_t *jb,
                                    plan_block_t *blk)
{
    const plan_gpu_t *g = &ld->plan->gpus[rank];
    uint64_t id;
    json_t *v;
    CHECK(expect_object(ld, jb));
    CHECK(check_keys(ld, jb, keys_block));
    CHECK(get_u64(ld, jb, "id", true, 0, UINT64_MAX, 0, &id));
    if (id != b) {
        path_key(ld, "id");
        return ld_err(ld, "%llu does not match its position %zu in threadblocks (ids must be "
                          "0..n-1 in order)",
                      (unsigned long long)id, b);
    }
    CHECK(get_array(ld, jb, "channels", true, &v));
    size_t p = path_key(ld, "channels");
    CHECK(parse_block_channels(ld, v, g, blk));
    path_set(ld, p);
    CHECK(get_array(ld, jb, "remote_buffer_refs", false, &v));
    if (v) {
        p = path_key(ld, "remote_buffer_refs");
        CHECK(parse_block_rbufs(ld, v, g, blk));
        path_set(ld, p);
    }
    CHECK(get_array(ld, jb, "ops", true, &v));
    p = path_key(ld, "ops");
    size_t n = count_ops(v);
    if (n > PLAN_MAX_OPS_PER_BLOCK)
        return ld_err(ld, "%zu ops (pipeline bodies included) exceed the limit of %d per thread "
                          "block",
                      n, PLAN_MAX_OPS_PER_BLOCK);
    LD_ALLOC(ld, blk->ops, n);
    int pos = 0;
    size_t i;
    json_t *jop;
    json_array_foreach(v, i, jop) {
        size_t pi = path_idx(ld, i);
        CHECK(parse_op(ld, rank, blk, jop, false, &pos));
        path_set(ld, pi);
    }
    blk->n_ops = pos;
    path_set(ld, p);
    return MSCCLPP_OK;
}

/* ------------------------------------------------------------------------------------------ */
/* Whole-plan checks (pass 3): what can be checked once every rank is loaded and that would
 * otherwise compute garbage or deadlock at run time (issue 8 item 8). Deeper, slower checks are
 * in plan_verify.c (mscclpp_plan_verify). */

/* Scratch of more than this many times the larger of input/output is refused: no collective we
 * know needs more than nranks (allgather through scratch) times the input, and a typo or a
 * mutated plan asking for 2^32 chunks would otherwise allocate terabytes on every rank. */
#define PLAN_MAX_SCRATCH_RATIO 256

/* The collective fixes how input and output sizes relate; chunks are the same size on every
 * buffer (spec §3.1), so their counts must relate the same way. */
static mscclpp_result_t check_collective_chunks(ld_t *ld, int rank)
{
    const struct mscclpp_plan *plan = ld->plan;
    const plan_gpu_t *g = &plan->gpus[rank];
    const char *c = plan->collective;
    uint64_t in = g->input_chunks, out = g->output_chunks, n = (uint64_t)plan->nranks;
    if (strcmp(c, "test") && strcmp(c, "custom")) {
        /* collectives with a reference result: every rank's buffers have one shape */
        const plan_gpu_t *g0 = &plan->gpus[0];
        if (in != g0->input_chunks || out != g0->output_chunks) {
            bool bad_in = in != g0->input_chunks;
            path_appendf(ld, "gpus[%d].%s", rank, bad_in ? "input_chunks" : "output_chunks");
            return ld_err(ld, "%llu differs from gpus[0].%s=%u: every rank of a%s %s has "
                              "buffers of one size",
                          (unsigned long long)(bad_in ? in : out),
                          bad_in ? "input_chunks" : "output_chunks",
                          bad_in ? g0->input_chunks : g0->output_chunks,
                          c[0] == 'a' ? "n" : "", c);
        }
    }
    if (!strcmp(c, "alltoall") && in % n) {
        path_appendf(ld, "gpus[%d].input_chunks", rank);
        return ld_err(ld, "%llu chunks do not split into %d equal blocks: an alltoall sends "
                          "input_chunks/nranks chunks to each rank",
                      (unsigned long long)in, plan->nranks);
    }
    if (in == 0 || out == 0) return MSCCLPP_OK; /* in-place plans may name one side only */
    uint64_t want_out;
    const char *why;
    if (!strcmp(c, "allgather")) {
        want_out = n * in;
        why = "the output is nranks times the input";
    } else if (!strcmp(c, "reducescatter")) {
        if (in == n * out) return MSCCLPP_OK;
        path_appendf(ld, "gpus[%d].input_chunks", rank);
        return ld_err(ld, "%llu chunks do not fit a reducescatter of %d ranks with "
                          "output_chunks=%llu: the input is nranks times the output, so chunks "
                          "would differ in size (expected %llu)",
                      (unsigned long long)in, plan->nranks, (unsigned long long)out,
                      (unsigned long long)(n * out));
    } else if (!strcmp(c, "allreduce") || !strcmp(c, "alltoall") || !strcmp(c, "broadcast") ||
               !strcmp(c, "reduce")) {
        want_out = in;
        why = "input and output have the same size";
    } else {
        return MSCCLPP_OK; /* "test", "custom", sendrecv...: sizes are the caller's */
    }
    if (out == want_out) return MSCCLPP_OK;
    path_appendf(ld, "gpus[%d].output_chunks", rank);
    return ld_err(ld, "%llu chunks do not fit an %s of %d ranks with input_chunks=%llu: %s, so "
                      "chunks would differ in size (expected %llu)",
                  (unsigned long long)out, c, plan->nranks, (unsigned long long)in, why,
                  (unsigned long long)want_out);
}

static mscclpp_result_t check_scratch(ld_t *ld, int rank)
{
    const plan_gpu_t *g = &ld->plan->gpus[rank];
    uint64_t ref = g->input_chunks > g->output_chunks ? g->input_chunks : g->output_chunks;
    if (ref == 0) ref = 1;
    if ((uint64_t)g->scratch_chunks <= ref * PLAN_MAX_SCRATCH_RATIO) return MSCCLPP_OK;
    path_appendf(ld, "gpus[%d].scratch_chunks", rank);
    return ld_err(ld, "%u scratch chunks for %llu chunks of input/output would make the scratch "
                      "buffer %llux the message on every rank (limit %dx): refused as a "
                      "malformed plan",
                  g->scratch_chunks, (unsigned long long)ref,
                  (unsigned long long)(g->scratch_chunks / ref), PLAN_MAX_SCRATCH_RATIO);
}

/* Signal/wait counts of one channel (or semaphore) per launch. Ops in a pipeline body run once
 * per iteration, a count known only with the sizes; they are kept apart, with their pipeline's
 * iter_context when every such op of the channel shares one. */
typedef struct {
    uint64_t sig, wait;           /* outside pipelines (semaphores: release, acquire) */
    uint64_t psig, pwait;         /* inside pipelines */
    uint64_t unit;                /* the pipelines' unit_size ... */
    uint32_t chunks;              /* ... and num_chunks */
    uint8_t keys;                 /* 0: no pipelined op, 1: one iter_context, 2: several */
} bal_t;

static void bal_add(bal_t *b, bool wait, const plan_op_t *pipe)
{
    if (!pipe) {
        if (wait) b->wait++;
        else b->sig++;
        return;
    }
    if (wait) b->pwait++;
    else b->psig++;
    if (b->keys == 0) {
        b->keys = 1;
        b->unit = pipe->unit_size;
        b->chunks = pipe->num_chunks;
    } else if (b->unit != pipe->unit_size || b->chunks != pipe->num_chunks) {
        b->keys = 2;
    }
}

/* Can the pipelined counts of a and b be compared (same iterations on both sides)? */
static bool bal_comparable(const bal_t *a, const bal_t *b, bool same_chunks)
{
    if (a->keys == 0 && b->keys == 0) return true;
    /* one side pipelined and the other not, or different pipelines: the counts meet only for
     * some sizes; mscclpp_plan_verify() runs such plans instead */
    return a->keys == 1 && b->keys == 1 && same_chunks && a->unit == b->unit &&
           a->chunks == b->chunks;
}

typedef struct {
    int peer, ord; /* ord: this channel is the ord-th from the rank to peer (memory, then port) */
    int type, g;
} chan_key_t;

static int chan_key_cmp(const void *x, const void *y)
{
    const chan_key_t *a = x, *b = y;
    if (a->peer != b->peer) return a->peer < b->peer ? -1 : 1;
    return a->ord < b->ord ? -1 : a->ord > b->ord;
}

static const char *times(uint64_t n) { return n == 1 ? "time" : "times"; }

/* Count every rank's signals and waits per channel, then compare each channel with its pair on
 * the peer (spec §5.2: the i-th channel from A to B, memory then port, is connected to the i-th
 * from B to A). A wait without its signal deadlocks; a signal without its wait leaves the
 * counter ahead, so the next launch's wait passes before the data lands (a race). */
static mscclpp_result_t check_balance(ld_t *ld)
{
    const struct mscclpp_plan *plan = ld->plan;
    int n = plan->nranks;
    bal_t **bal[PLAN_CH__COUNT] = {NULL};
    chan_key_t **keys = NULL;
    int *nkeys = NULL;
    LD_ALLOC(ld, bal[PLAN_CH_MEMORY], n);
    LD_ALLOC(ld, bal[PLAN_CH_PORT], n);
    LD_ALLOC(ld, keys, n);
    LD_ALLOC(ld, nkeys, n);
    for (int r = 0; r < n; r++) {
        const plan_gpu_t *g = &plan->gpus[r];
        for (int t = PLAN_CH_MEMORY; t <= PLAN_CH_PORT; t++)
            LD_ALLOC(ld, bal[t][r], g->n_chan[t]);
        bal_t *sem;
        LD_ALLOC(ld, sem, g->n_sems);
        for (int b = 0; b < g->n_blocks; b++) {
            const plan_block_t *blk = &g->blocks[b];
            const plan_op_t *pipe = NULL;
            int pipe_end = -1;
            for (int i = 0; i < blk->n_ops; i++) {
                const plan_op_t *op = &blk->ops[i];
                if (i > pipe_end) pipe = NULL;
                if (op->type == PLAN_OP_PIPELINE) {
                    pipe = op;
                    pipe_end = i + op->n_inner;
                    continue;
                }
                bool wait = false, counts = false;
                int nids = op->n_channels;
                switch (op->type) {
                case PLAN_OP_WAIT:
                case PLAN_OP_RLXWAIT: wait = true; counts = true; break;
                case PLAN_OP_SIGNAL:
                case PLAN_OP_RLXSIGNAL: counts = true; break;
                case PLAN_OP_PWS:
                case PLAN_OP_PWSF:
                    /* a signal per destination on port channels; plain puts on memory (P9) */
                    counts = op->channel_type == PLAN_CH_PORT;
                    break;
                case PLAN_OP_SEM_ACQUIRE:
                case PLAN_OP_SEM_RELEASE:
                    for (int k = 0; k < op->n_sems; k++)
                        bal_add(&sem[op->sem_ids[k]], op->type == PLAN_OP_SEM_ACQUIRE, pipe);
                    break;
                default: break;
                }
                if (!counts) continue;
                int t = op->channel_type;
                for (int k = 0; k < nids; k++)
                    bal_add(&bal[t][r][blk->chan[t][op->channel_ids[k]]], wait, pipe);
            }
        }
        for (int s = 0; s < g->n_sems; s++) {
            const bal_t *x = &sem[s];
            if (!bal_comparable(x, x, true)) continue;
            if (x->sig == x->wait && x->psig == x->pwait) continue;
            path_appendf(ld, "gpus[%d].semaphores[%d]", r, s);
            return ld_err(ld, "rank %d releases semaphore %d %llu %s and acquires it %llu %s "
                              "per launch: semaphores persist across launches, so a plan must "
                              "leave each at its initial value (later launches deadlock or "
                              "race)",
                          r, s, (unsigned long long)(x->sig + x->psig), times(x->sig + x->psig),
                          (unsigned long long)(x->wait + x->pwait), times(x->wait + x->pwait));
        }
        /* Channels of r sorted by (peer, ordinal), to find a peer's matching channel. */
        int nk = g->n_chan[PLAN_CH_MEMORY] + g->n_chan[PLAN_CH_PORT];
        LD_ALLOC(ld, keys[r], nk);
        int *seen;
        LD_ALLOC(ld, seen, n);
        for (int t = PLAN_CH_MEMORY, j = 0; t <= PLAN_CH_PORT; t++)
            for (int c = 0; c < g->n_chan[t]; c++, j++) {
                int p = g->peers[t][c];
                keys[r][j] = (chan_key_t){p, seen[p]++, t, c};
            }
        qsort(keys[r], (size_t)nk, sizeof(chan_key_t), chan_key_cmp);
        nkeys[r] = nk;
    }
    for (int a = 0; a < n; a++) {
        for (int j = 0; j < nkeys[a]; j++) {
            const chan_key_t *ka = &keys[a][j];
            int b = ka->peer;
            chan_key_t probe = {a, ka->ord, 0, 0};
            const chan_key_t *kb =
                bsearch(&probe, keys[b], (size_t)nkeys[b], sizeof(chan_key_t), chan_key_cmp);
            const bal_t *x = &bal[ka->type][a][ka->g];
            static const bal_t none;
            const bal_t *y = kb ? &bal[kb->type][b][kb->g] : &none;
            bool same = plan->gpus[a].input_chunks == plan->gpus[b].input_chunks &&
                        plan->gpus[a].output_chunks == plan->gpus[b].output_chunks;
            if (!bal_comparable(x, y, same)) continue;
            uint64_t s = x->sig + x->psig, w = y->wait + y->pwait;
            char mine[96], theirs[96];
            snprintf(mine, sizeof mine, "%s channel %d", chan_names[ka->type], ka->g);
            if (kb)
                snprintf(theirs, sizeof theirs, "paired with rank %d's %s channel %d", b,
                         chan_names[kb->type], kb->g);
            else
                snprintf(theirs, sizeof theirs, "paired with no channel: rank %d lists fewer "
                         "channels to rank %d", b, a);
            if (x->sig != y->wait || x->psig != y->pwait) {
                path_appendf(ld, "gpus[%d].channels", a);
                return ld_err(ld, "rank %d signals rank %d %llu %s per launch on %s (%s) but "
                                  "rank %d waits %llu %s on it: %s",
                              a, b, (unsigned long long)s, times(s), mine, theirs, b,
                              (unsigned long long)w, times(w),
                              s < w ? "the extra waits deadlock"
                                    : "the extra signals race with the next launch's waits");
            }
            if (!kb && (x->wait || x->pwait)) {
                uint64_t xw = x->wait + x->pwait;
                path_appendf(ld, "gpus[%d].channels", a);
                return ld_err(ld, "rank %d waits for rank %d %llu %s per launch on %s, which "
                                  "has no channel paired on rank %d: the waits deadlock",
                              a, b, (unsigned long long)xw, times(xw), mine, b);
            }
        }
    }
    return MSCCLPP_OK;
}

static mscclpp_result_t check_plan(ld_t *ld)
{
    for (int r = 0; r < ld->plan->nranks; r++) {
        CHECK(check_collective_chunks(ld, r));
        CHECK(check_scratch(ld, r));
    }
    return check_balance(ld);
}

/* ------------------------------------------------------------------------------------------ */
/* Top level */

/* Collectives a plan may name: those with a reference result (checked by
 * mscclpp_plan_verify() and `python3 -m mscclpp verify`), and "test" / "custom" (sizes and
 * results are the author's). */
static const char *const collectives[] = {"allreduce", "allgather", "reducescatter",
                                          "alltoall",  "broadcast", "reduce",
                                          "sendrecv",  "test",      "custom",
                                          NULL};

static mscclpp_result_t check_collective_name(ld_t *ld, const char *s)
{
    for (const char *const *c = collectives; *c; c++)
        if (!strcmp(*c, s)) return MSCCLPP_OK;
    path_key(ld, "collective");
    char list[200];
    join_names(collectives, list, sizeof list);
    const char *near = names_nearest(s, collectives);
    if (near)
        return ld_err(ld, "unknown collective \"%s\" (did you mean \"%s\"? expected %s)", s, near,
                      list);
    return ld_err(ld, "unknown collective \"%s\" (expected %s)", s, list);
}

/* "root" (broadcast, reduce): the rank the plan is written for. A call with another root runs
 * it with ranks rotated so that the call's root plays the plan's (executor/select.c). */
static mscclpp_result_t parse_root(ld_t *ld, const json_t *root)
{
    uint64_t r;
    CHECK(get_u64(ld, root, "root", false, 0, UINT64_MAX, 0, &r));
    if (r < (uint64_t)ld->plan->nranks) {
        ld->plan->root = (int)r;
        return MSCCLPP_OK;
    }
    path_key(ld, "root");
    return ld_err(ld, "%llu is out of range (the plan has %d ranks)", (unsigned long long)r,
                  ld->plan->nranks);
}

static mscclpp_result_t set_name(ld_t *ld, const json_t *root)
{
    json_t *v;
    CHECK(get_member(ld, root, "name", true, &v));
    size_t p = path_key(ld, "name");
    const char *name;
    char derived[256];
    if (json_is_null(v)) {
        /* The 0.9 DSL writes "name": null; the file name identifies the plan instead. */
        const char *base = strrchr(ld->source, '/');
        base = base ? base + 1 : ld->source;
        size_t n = strlen(base);
        if (n > 5 && !strcmp(base + n - 5, ".json")) n -= 5;
        if (ld->source[0] == '<' || n == 0) snprintf(derived, sizeof derived, "unnamed");
        else snprintf(derived, sizeof derived, "%.*s", (int)n, base);
        name = derived;
    } else if (json_is_string(v)) {
        name = json_string_value(v);
        if (!name[0]) return ld_err(ld, "must not be empty");
    } else {
        return ld_err(ld, "expected a string, got %s", jtype(v));
    }
    path_set(ld, p);
    size_t n = strlen(name) + 1;
    LD_ALLOC(ld, ld->plan->name, n);
    memcpy(ld->plan->name, name, n);
    return MSCCLPP_OK;
}

static mscclpp_result_t parse_top(ld_t *ld, const json_t *root)
{
    struct mscclpp_plan *plan = ld->plan;
    json_t *v;
    const char *s;

    CHECK(check_old_format(ld, root));
    json_t *gpus = json_object_get(root, "gpus");
    if (json_is_array(gpus) && json_array_size(gpus) > 0) {
        size_t p = path_appendf(ld, "gpus[0]");
        CHECK(check_old_format(ld, json_array_get(gpus, 0)));
        path_set(ld, p);
    }
    CHECK(check_keys(ld, root, keys_top));

    CHECK(get_member(ld, root, "format", false, &v));
    if (!v) {
        plan->format_version = 0;
    } else {
        size_t p = path_key(ld, "format");
        if (!json_is_string(v)) return ld_err(ld, "expected a string, got %s", jtype(v));
        if (strcmp(json_string_value(v), "mscclpp-plan/1"))
            return ld_err(ld, "unknown format version \"%s\" (this library reads "
                              "\"mscclpp-plan/1\" and the unversioned MSCCL++ 0.9 format)",
                          json_string_value(v));
        plan->format_version = 1;
        path_set(ld, p);
    }
    CHECK(get_member(ld, root, "rank_subset", false, &v));
    if (v) {
        path_key(ld, "rank_subset");
        return ld_err(ld, "partial plans are not supported: gpus must list every rank");
    }

    CHECK(set_name(ld, root));
    CHECK(get_str(ld, root, "collective", true, &s));
    if (!s[0]) {
        path_key(ld, "collective");
        return ld_err(ld, "must not be empty");
    }
    CHECK(check_collective_name(ld, s));
    LD_ALLOC(ld, plan->collective, strlen(s) + 1);
    memcpy(plan->collective, s, strlen(s) + 1);

    CHECK(get_str(ld, root, "protocol", true, &s));
    if (!strcmp(s, "LL")) {
        plan->packet_protocol = true;
    } else if (strcmp(s, "Simple")) {
        path_key(ld, "protocol");
        return ld_err(ld, "unknown protocol \"%s\" (expected \"Simple\" or \"LL\")", s);
    }
    CHECK(get_bool(ld, root, "inplace", true, false, &plan->inplace));
    CHECK(get_bool(ld, root, "reuse_resources", false, false, &plan->reuse_resources));
    CHECK(get_bool(ld, root, "use_double_scratch_buffer", false, false, &plan->double_scratch));
    CHECK(get_u32(ld, root, "buffer_alignment", false, 1, PLAN_MAX_ALIGNMENT, 16,
                  &plan->alignment));
    if (plan->alignment & (plan->alignment - 1)) {
        path_key(ld, "buffer_alignment");
        return ld_err(ld, "%u is not a power of two", plan->alignment);
    }
    CHECK(get_u64(ld, root, "min_message_size", false, 0, UINT64_MAX, 0,
                  &plan->min_message_size));
    CHECK(get_u64(ld, root, "max_message_size", false, 0, UINT64_MAX, UINT64_MAX,
                  &plan->max_message_size));
    if (plan->min_message_size > plan->max_message_size) {
        path_key(ld, "min_message_size");
        return ld_err(ld, "%llu is larger than max_message_size=%llu",
                      (unsigned long long)plan->min_message_size,
                      (unsigned long long)plan->max_message_size);
    }
    CHECK(get_u32(ld, root, "num_threads_per_block", false, 1, PLAN_MAX_THREADS, 1024,
                  &plan->threads_per_block));

    CHECK(get_array(ld, root, "gpus", true, &gpus));
    size_t pg = path_key(ld, "gpus");
    size_t n = json_array_size(gpus);
    if (n == 0) return ld_err(ld, "a plan needs at least one rank");
    if (n > PLAN_MAX_RANKS)
        return ld_err(ld, "%zu ranks exceed the limit of %d", n, PLAN_MAX_RANKS);
    plan->nranks = (int)n;
    path_set(ld, pg);
    CHECK(parse_root(ld, root));
    path_key(ld, "gpus");
    LD_ALLOC(ld, plan->gpus, n);

    /* Pass 1: everything but thread blocks, so descriptors can check their owner's counts. */
    for (size_t r = 0; r < n; r++) {
        size_t p = path_idx(ld, r);
        CHECK(parse_gpu(ld, (int)r, json_array_get(gpus, r), &plan->gpus[r]));
        path_set(ld, p);
    }
    /* Pass 2: thread blocks and ops. */
    for (size_t r = 0; r < n; r++) {
        size_t p = path_idx(ld, r);
        plan_gpu_t *g = &plan->gpus[r];
        json_t *tbs = json_object_get(json_array_get(gpus, r), "threadblocks");
        size_t pt = path_key(ld, "threadblocks");
        size_t nb = json_array_size(tbs);
        if (nb > PLAN_MAX_BLOCKS)
            return ld_err(ld, "%zu thread blocks exceed the limit of %d", nb, PLAN_MAX_BLOCKS);
        LD_ALLOC(ld, g->blocks, nb);
        g->n_blocks = (int)nb;
        for (size_t b = 0; b < nb; b++) {
            size_t pb = path_idx(ld, b);
            CHECK(parse_block(ld, (int)r, b, json_array_get(tbs, b), &g->blocks[b]));
            path_set(ld, pb);
        }
        path_set(ld, pt);
        path_set(ld, p);
    }
    path_set(ld, pg);
    /* Pass 3: checks across ranks (paths are whole, so start from the root). */
    size_t p0 = ld->path_len;
    path_set(ld, 0);
    CHECK(check_plan(ld));
    path_set(ld, p0);
    return MSCCLPP_OK;
}

mscclpp_result_t plan_load_json(const char *json, size_t len, const char *source,
                                struct mscclpp_plan **plan)
{
    CHECK_ARG(plan != NULL);
    *plan = NULL;
    CHECK_ARG(json != NULL || len == 0);
    if (!source) source = "<string>";

    json_error_t jerr;
    json_t *root = json_loadb(json ? json : "", len, 0, &jerr);
    if (!root && strstr(jerr.text, "too big")) {
        /* max_message_size = 2^64-1 overflows json_int_t: read every integer as a double. */
        root = json_loadb(json, len, JSON_DECODE_INT_AS_REAL, &jerr);
    }
    if (!root)
        return ERR(MSCCLPP_ERR_INVALID_PLAN, "%s: JSON syntax error at line %d, column %d: %s",
                   source, jerr.line, jerr.column, jerr.text);

    mscclpp_result_t res = MSCCLPP_OK;
    ld_t ld = {.source = source, .bar_rank = -1};
    ld.arena = plan_arena_new();
    if (!ld.arena) {
        res = ld_nomem(&ld);
        goto drop_json;
    }
    ld.plan = plan_arena_alloc(ld.arena, 1, sizeof *ld.plan);
    if (!ld.plan) {
        res = ld_nomem(&ld);
        goto free_arena;
    }
    ld.plan->arena = ld.arena;
    if (!json_is_object(root)) {
        res = ld_err(&ld, "the plan must be a JSON object, got %s", jtype(root));
        goto free_arena;
    }
    CHECK_GOTO(parse_top(&ld, root), res, free_arena);
    if (source[0] != '<') { /* a file: "where did this plan come from" (mscclpp_plan_file) */
        size_t n = strlen(source) + 1;
        ld.plan->file = ld_alloc(&ld, n, 1);
        if (!ld.plan->file) {
            res = ld_nomem(&ld);
            goto free_arena;
        }
        memcpy(ld.plan->file, source, n);
    }
    json_decref(root);
    *plan = ld.plan;
    INFO(SUBSYS_PLAN, "loaded plan \"%s\" (%s, %d ranks) from %s", ld.plan->name,
         ld.plan->collective, ld.plan->nranks, source);
    return MSCCLPP_OK;

free_arena:
    plan_arena_destroy(ld.arena);
drop_json:
    json_decref(root);
    return res;
}

void plan_hold(const struct mscclpp_plan *plan)
{
    if (plan) __atomic_fetch_add(&((struct mscclpp_plan *)plan)->holders, 1, __ATOMIC_RELAXED);
}

void plan_free(struct mscclpp_plan *plan)
{
    if (!plan) return;
    /* others still hold it: the last one frees it (acquire: their reads come first) */
    if (__atomic_fetch_sub(&plan->holders, 1, __ATOMIC_ACQ_REL) > 0) return;
    plan_arena_destroy(plan->arena);
}
