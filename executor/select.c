/*
 * Which plan serves a call (select.h): tuning table, registered plans, plans made for the job;
 * the made plans themselves (made when the executor is created, rooted ones per root on first
 * use); a cache of the choice per call shape; and the message for a call nothing serves.
 */
#include "executor/select.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/config.h"
#include "base/debug.h"
#include "executor/exec.h"
#include "executor/layout.h"
#include "executor/made.h"
#include "executor/tuning.h"

/* Largest message of the made packet allreduce: where LL wins over Simple on one node
 * (plans/_common.py: PACKET_MAX_MESSAGE; the host backend moves packets slowly, see
 * HOST_PACKET_MAX_MESSAGE). */
#define MADE_PKT_MAX 262144u
#define MADE_PKT_MAX_HOST 64u

/* A rooted plan made for one root other than 0. */
typedef struct exec_made_root {
    struct exec_made_root *next;
    struct mscclpp_plan *plan;
} exec_made_root_t;

struct exec_made {
    exec_topo_t topo;
    exec_made_root_t *rooted;
};

static bool is_rooted(const char *c) { return !strcmp(c, "broadcast") || !strcmp(c, "reduce"); }

/* ---- making ---------------------------------------------------------------------------------- */

static mscclpp_result_t make_one(mscclpp_executor_t *ex, const char *coll, exec_made_proto_t proto,
                                 int root, struct mscclpp_plan **out)
{
    bool host = !strcmp(ex->hal->name, "host");
    exec_made_spec_t s = {.collective = coll,
                          .proto = proto,
                          .root = root,
                          .instances = exec_made_instances(ex->hal->name, coll, proto)};
    if (proto == EXEC_MADE_PACKET && ex->made->topo.nnodes == 1)
        s.max_bytes = host ? MADE_PKT_MAX_HOST : MADE_PKT_MAX;
    else if (proto == EXEC_MADE_PACKET) /* across nodes: the packet images' cap (made.h) */
        s.max_bytes = exec_made_pkt_cap(&ex->made->topo, coll);
    return exec_made_plan(&ex->made->topo, &s, ex->comm->rank, out);
}

mscclpp_result_t exec_select_attach(mscclpp_executor_t *ex)
{
    const char *mode = config_get(CFG_MSCCLPP_PLAN_MAKE);
    if (strcmp(mode, "last") && strcmp(mode, "first") && strcmp(mode, "off"))
        return ERR_ARG("MSCCLPP_PLAN_MAKE=\"%s\": last, first or off", mode);
    const char *direct = config_get(CFG_MSCCLPP_PLAN_DIRECT); /* read by plan_dirs.c */
    if (strcmp(direct, "auto") && strcmp(direct, "on") && strcmp(direct, "off"))
        return ERR_ARG("MSCCLPP_PLAN_DIRECT=\"%s\": auto, on or off", direct);
    ex->made = calloc(1, sizeof *ex->made);
    if (!ex->made) return ERR(MSCCLPP_ERR_NO_MEMORY, "executor: out of memory");
    CHECK(exec_topo_init(&ex->made->topo, ex->comm->nranks, ex->comm->node_id));
    exec_registry_set_layout(&ex->registry, ex->comm->nranks, ex->comm->node_id);
    ex->registry.made_first = !strcmp(mode, "first");
    ex->registry.gen++; /* what a selection answers changed */
    if (!strcmp(mode, "off")) {
        INFO(SUBSYS_EXEC, "MSCCLPP_PLAN_MAKE=off: no plans made for the job");
        return MSCCLPP_OK;
    }
    int made = 0;
    /* the packet allreduce first: the Simple one serves every size, small ones after it */
    for (int proto = EXEC_MADE_PACKET; proto >= EXEC_MADE_SIMPLE; proto--) {
        for (int i = 0; i < EXEC_MADE_NCOLL; i++) {
            struct mscclpp_plan *p = NULL;
            mscclpp_result_t r =
                make_one(ex, exec_made_collectives[i], (exec_made_proto_t)proto, 0, &p);
            if (r == MSCCLPP_ERR_UNSUPPORTED) { /* e.g. no packet plan for this shape */
                core_clear_error();
                continue;
            }
            CHECK(r);
            r = exec_registry_add_made(&ex->registry, p);
            if (r != MSCCLPP_OK) {
                plan_free(p);
                return r;
            }
            made++;
        }
    }
    INFO(SUBSYS_EXEC, "rank %d: made %d plans for %d ranks on %d node(s)", ex->comm->rank, made,
         ex->comm->nranks, ex->made->topo.nnodes);
    return MSCCLPP_OK;
}

void exec_select_detach(mscclpp_executor_t *ex)
{
    if (!ex->made) return;
    while (ex->made->rooted) {
        exec_made_root_t *m = ex->made->rooted;
        ex->made->rooted = m->next;
        plan_free(m->plan);
        free(m);
    }
    exec_topo_fini(&ex->made->topo);
    free(ex->made);
    ex->made = NULL;
}

/* The made plan like `p` (a made rooted plan of root 0) for `root`, made on first use. */
static mscclpp_result_t made_for_root(mscclpp_executor_t *ex, const struct mscclpp_plan *p,
                                      int root, const struct mscclpp_plan **out)
{
    for (exec_made_root_t *m = ex->made->rooted; m; m = m->next)
        if (m->plan->root == root && !strcmp(m->plan->collective, p->collective) &&
            m->plan->packet_protocol == p->packet_protocol) {
            *out = m->plan;
            return MSCCLPP_OK;
        }
    exec_made_root_t *m = calloc(1, sizeof *m);
    if (!m) return ERR(MSCCLPP_ERR_NO_MEMORY, "executor: out of memory");
    mscclpp_result_t r =
        make_one(ex, p->collective, p->packet_protocol ? EXEC_MADE_PACKET : EXEC_MADE_SIMPLE, root,
                 &m->plan);
    if (r != MSCCLPP_OK) {
        free(m);
        return r;
    }
    m->plan->min_message_size = p->min_message_size;
    m->plan->max_message_size = p->max_message_size;
    m->next = ex->made->rooted;
    ex->made->rooted = m;
    *out = m->plan;
    return MSCCLPP_OK;
}

static bool entry_is_made(const exec_registry_t *reg, const struct mscclpp_plan *p)
{
    for (int i = reg->count - 1; i >= 0; i--)
        if (reg->entries[i].plan == p) return reg->entries[i].made;
    return false;
}

/* ---- choosing ---------------------------------------------------------------------------------- */

/* The tuning table's plan, then the registry's first that fits, for one placement. */
static mscclpp_result_t choose_placed(mscclpp_executor_t *ex, const exec_call_t *call, bool inplace,
                                      exec_choice_t *out)
{
    mscclpp_comm_t *comm = ex->comm;
    uint64_t msg = exec_message_size(call->collective, call->in_bytes, call->out_bytes);
    int nth = 0;
    const struct mscclpp_plan *shared = NULL;
    const struct mscclpp_plan *p = exec_tuning_pick(ex->tuning, &ex->registry, call->collective,
                                                    comm->nranks, comm->nlocal, inplace, msg, &nth);
    if (p && !exec_native_of(p) &&
        !exec_layout_fits(p, comm->rank, call->in_bytes, call->out_bytes, call->dtype)) {
        p = NULL; /* the table's plan refuses these sizes: the registry's next that fits */
        nth = 0;
    }
    if (!p) {
        mscclpp_result_t r = exec_registry_select_fit(
            &ex->registry, call->collective, comm->nranks, comm->nlocal, inplace, msg, comm->rank,
            call->in_bytes, call->out_bytes, call->dtype, false, &p);
        if (r != MSCCLPP_OK) return r;
        /* where every rank's buffers are shareable, a shared_only plan before it may serve */
        const struct mscclpp_plan *q = NULL;
        if (exec_registry_select_fit(&ex->registry, call->collective, comm->nranks, comm->nlocal,
                                     inplace, msg, comm->rank, call->in_bytes, call->out_bytes,
                                     call->dtype, true, &q) == MSCCLPP_OK &&
            q != p)
            shared = q;
    }
    out->plan = p;
    out->nthreads = nth;
    out->staged = call->inplace && !inplace;
    out->rotation = 0;
    out->shared = shared;
    out->shared_staged = out->staged;
    out->shared_rotation = 0;
    if (is_rooted(call->collective)) {
        if (entry_is_made(&ex->registry, p) && p->root != call->root)
            CHECK(made_for_root(ex, p, call->root, &out->plan));
        else if (!entry_is_made(&ex->registry, p))
            out->rotation = (call->root - p->root + comm->nranks) % comm->nranks;
        if (shared) /* loaded, never made */
            out->shared_rotation = (call->root - shared->root + comm->nranks) % comm->nranks;
    }
    return MSCCLPP_OK;
}

/* What is served, for a call nothing serves (issue 20 item 5). */
static mscclpp_result_t none_served(mscclpp_executor_t *ex, const exec_call_t *call)
{
    mscclpp_comm_t *comm = ex->comm;
    uint64_t msg = exec_message_size(call->collective, call->in_bytes, call->out_bytes);
    char have[512] = "";
    size_t len = 0;
    int shown = 0, total = 0;
    for (int i = 0; i < ex->registry.count; i++) {
        const struct mscclpp_plan *p = ex->registry.entries[i].plan;
        if (strcmp(p->collective, call->collective)) continue;
        total++;
        if (shown < 4 && len + 120 < sizeof have) {
            len += (size_t)snprintf(
                have + len, sizeof have - len, "%s'%s' (%d ranks, %s, %llu..%llu bytes%s)",
                shown ? ", " : "", p->name, p->nranks, p->inplace ? "in-place" : "out-of-place",
                (unsigned long long)p->min_message_size, (unsigned long long)p->max_message_size,
                ex->registry.entries[i].off_layout ? ", not this layout" : "");
            shown++;
        }
    }
    const char *made = !strcmp(config_get(CFG_MSCCLPP_PLAN_MAKE), "off")
                           ? "MSCCLPP_PLAN_MAKE=off: no plans are made for the job"
                       : exec_made_collective(call->collective)
                           ? "plans made for the job refuse these sizes"
                           : "plans are made for allreduce, allgather, reducescatter, alltoall, "
                             "broadcast and reduce only";
    return core_error_quiet(MSCCLPP_ERR_UNSUPPORTED,
                            "no %s plan serves %d ranks on %d node(s), %llu-byte messages of %s "
                            "(%zu/%zu bytes in/out), %s: %s; registered for %s: %s%s. Add "
                            "one with mscclpp_executor_register_plan (a DSL plan: python3 -m "
                            "mscclpp compile; docs/plan-selection.md)",
                            call->collective, comm->nranks, ex->made->topo.nnodes,
                            (unsigned long long)msg, mscclpp_dtype_name(call->dtype),
                            call->in_bytes, call->out_bytes,
                            call->inplace ? "in place" : "out of place", made, call->collective,
                            total ? have : "none", total > shown ? ", ..." : "");
}

/* The cache: the last choices per call shape (a direct-mapped table), valid while the
 * registry stays at the generation it was chosen at (registry.h: a registration or a new
 * layout moves it on). */
uint64_t exec_call_hash(const exec_call_t *c)
{
    uint64_t h = EXEC_HASH_SEED;
    for (const char *s = c->collective; *s; s++) h = (h ^ (uint8_t)*s) * 1099511628211ull;
    uint64_t v[5] = {c->in_bytes, c->out_bytes, (uint64_t)c->dtype, (uint64_t)c->root,
                     (uint64_t)c->inplace};
    for (int i = 0; i < 5; i++) h = (h ^ v[i]) * 1099511628211ull;
    return h;
}

static uint32_t shape_hash(const exec_call_t *c)
{
    return (uint32_t)(exec_call_hash(c) >> 32) % EXEC_SELECT_CACHE;
}

/* The cache slot holding `call`'s shape, or NULL. */
static exec_select_slot_t *slot_of(const mscclpp_executor_t *ex, const exec_call_t *call)
{
    const exec_select_slot_t *slot = &ex->chosen[shape_hash(call)];
    if (slot->valid && slot->gen == ex->registry.gen && slot->in_bytes == call->in_bytes &&
        slot->out_bytes == call->out_bytes && slot->dtype == call->dtype &&
        slot->root == call->root && slot->inplace == call->inplace &&
        !strcmp(slot->collective, call->collective))
        return (exec_select_slot_t *)slot;
    return NULL;
}

int exec_select_verdict(const mscclpp_executor_t *ex, const exec_call_t *call)
{
    const exec_select_slot_t *slot = slot_of(ex, call);
    return slot ? slot->verdict : 0;
}

/* The registry entry of `plan`, or NULL. */
static exec_registry_entry_t *entry_of(exec_registry_t *reg, const struct mscclpp_plan *plan)
{
    for (int i = 0; i < reg->count; i++)
        if (reg->entries[i].plan == plan) return &reg->entries[i];
    return NULL;
}

void exec_select_agreed(mscclpp_executor_t *ex, const exec_call_t *call,
                        const struct mscclpp_plan *shared, bool all_shared)
{
    exec_select_slot_t *slot = slot_of(ex, call);
    if (slot) slot->verdict = all_shared ? 1 : -1;
    exec_registry_entry_t *e = entry_of(&ex->registry, shared);
    if (e) e->agreed = all_shared ? 1 : -1;
    INFO(SUBSYS_EXEC, "rank %d: %s of %zu/%zu bytes%s runs plan '%s' (agreed per call): %s",
         ex->comm->rank, call->collective, call->in_bytes, call->out_bytes,
         call->inplace ? " in place" : "",
         all_shared ? shared->name
         : slot     ? slot->choice.plan->name
                    : "(scratch)",
         all_shared ? "every rank's buffers are shareable"
                    : "a rank's buffers are not shareable (or the plan does not take them)");
}

/*
 * An in-place call no plan for every buffer serves in place (the scratch allgather,
 * reducescatter and broadcast are out of place only): it runs staged on the out-of-place plan,
 * but where every rank's buffers are shareable, a shared_only in-place plan (the direct plans'
 * _ip variants) serves it as it is, with no staging copy. Before, such a call took the
 * out-of-place direct plan, staged, under auto while `on` took the in-place one.
 */
static void shared_in_place(mscclpp_executor_t *ex, const exec_call_t *call, exec_choice_t *out)
{
    mscclpp_comm_t *comm = ex->comm;
    const struct mscclpp_plan *q = NULL;
    uint64_t msg = exec_message_size(call->collective, call->in_bytes, call->out_bytes);
    if (exec_registry_select_fit(&ex->registry, call->collective, comm->nranks, comm->nlocal, true,
                                 msg, comm->rank, call->in_bytes, call->out_bytes, call->dtype,
                                 true, &q) != MSCCLPP_OK) {
        core_clear_error(); /* none: the staged choice stands */
        return;
    }
    if (q == out->plan) return; /* not shared_only: choose_placed would have found it */
    out->shared = q;
    out->shared_staged = false;
    out->shared_rotation =
        is_rooted(call->collective) ? (call->root - q->root + comm->nranks) % comm->nranks : 0;
}

mscclpp_result_t exec_select(mscclpp_executor_t *ex, const exec_call_t *call, exec_choice_t *out)
{
    exec_select_slot_t *slot = slot_of(ex, call);
    if (slot) {
        *out = slot->choice;
        return MSCCLPP_OK;
    }
    slot = &ex->chosen[shape_hash(call)];
    mscclpp_result_t r = choose_placed(ex, call, call->inplace, out);
    if (r == MSCCLPP_ERR_UNSUPPORTED && call->inplace) {
        core_clear_error();
        r = choose_placed(ex, call, false, out);
        if (r == MSCCLPP_OK) shared_in_place(ex, call, out);
    }
    if (r == MSCCLPP_ERR_UNSUPPORTED) {
        core_clear_error();
        return none_served(ex, call);
    }
    CHECK(r);
    if (strlen(call->collective) < sizeof slot->collective) {
        *slot = (exec_select_slot_t){.valid = true,
                                     .gen = ex->registry.gen,
                                     .in_bytes = call->in_bytes,
                                     .out_bytes = call->out_bytes,
                                     .dtype = call->dtype,
                                     .root = call->root,
                                     .inplace = call->inplace,
                                     .choice = *out,
                                     .verdict = 0};
        strcpy(slot->collective, call->collective);
    }
    return MSCCLPP_OK;
}

/* ---- the public calls that ask which plan serves a call ------------------------------------ */

MSCCLPP_API mscclpp_result_t mscclpp_executor_list_plans(mscclpp_executor_t *exec,
                                                         const char *collective, int inplace,
                                                         uint64_t message_bytes, int nblocks,
                                                         const mscclpp_plan_t **plans, int cap,
                                                         int *nplans)
{
    CHECK_ARG(exec != NULL);
    CHECK_ARG(collective != NULL);
    CHECK_ARG(nplans != NULL);
    CHECK_ARG(cap >= 0 && (cap == 0 || plans != NULL));
    exec_tuning_candidates(&exec->registry, collective, exec->comm->nranks, exec->comm->nlocal,
                           inplace != 0, message_bytes, nblocks, plans, cap, nplans);
    return MSCCLPP_OK;
}

MSCCLPP_API mscclpp_result_t mscclpp_executor_choose_plan(mscclpp_executor_t *exec,
                                                          const char *collective, int inplace,
                                                          uint64_t message_bytes,
                                                          const mscclpp_plan_t **plan,
                                                          int *nthreads_per_block)
{
    CHECK_ARG(exec != NULL);
    CHECK_ARG(collective != NULL);
    CHECK_ARG(plan != NULL);
    /* the call a collective of this message size makes (the data type only decides whether a
     * plan's chunks split the sizes: bytes, the finest) */
    int n = exec->comm->nranks;
    uint64_t in = message_bytes, out = message_bytes;
    if (!strcmp(collective, "allgather")) in = message_bytes / (uint64_t)n;
    if (!strcmp(collective, "reducescatter")) out = message_bytes / (uint64_t)n;
    exec_call_t call = {collective, inplace != 0, (size_t)in, (size_t)out, MSCCLPP_UINT8, 0};
    exec_choice_t ch;
    CHECK(exec_select(exec, &call, &ch));
    /* MSCCLPP_PLAN_DIRECT=auto's shared_only plan: what the next call of this size runs, by
     * the last agreement of a call it served (none yet: as if every rank's buffers were
     * shareable; each call agrees anew, executor.c) */
    const exec_registry_entry_t *se = ch.shared ? entry_of(&exec->registry, ch.shared) : NULL;
    if (se && se->agreed >= 0) {
        ch.plan = ch.shared;
        ch.staged = ch.shared_staged;
    }
    /* a plan of the placement asked for: an in-place call served by an out-of-place plan stages
     * its input, which a caller running the plan itself must do (mscclpp_execute_launch) */
    if (ch.staged)
        return core_error_quiet(MSCCLPP_ERR_UNSUPPORTED,
                                "no in-place %s plan for %llu bytes: an "
                                "in-place call runs out-of-place plan '%s' on a copy of its "
                                "input",
                                collective, (unsigned long long)message_bytes, ch.plan->name);
    *plan = ch.plan;
    if (nthreads_per_block) *nthreads_per_block = ch.nthreads;
    return MSCCLPP_OK;
}

MSCCLPP_API const char *mscclpp_executor_tuning_file(mscclpp_executor_t *exec)
{
    if (!exec) return NULL;
    return exec->tuning ? exec->tuning->path : NULL;
}

MSCCLPP_API mscclpp_result_t mscclpp_executor_tuning_target(mscclpp_executor_t *exec, char *device,
                                                            size_t device_cap, char *path,
                                                            size_t path_cap)
{
    CHECK_ARG(exec != NULL);
    hal_device_props_t props;
    exec_tuning_key_t key;
    exec_tuning_key_of(exec, &props, &key);
    if (device && device_cap &&
        (size_t)snprintf(device, device_cap, "%s", key.device) >= device_cap)
        return ERR_ARG("tuning target: device name \"%s\" does not fit %zu bytes", key.device,
                       device_cap);
    if (path && path_cap && exec_tuning_default_path(&key, path, path_cap))
        return ERR_ARG("tuning target: no default path (HOME and XDG_CACHE_HOME unset, or the "
                       "path is longer than %zu bytes)",
                       path_cap);
    return MSCCLPP_OK;
}
