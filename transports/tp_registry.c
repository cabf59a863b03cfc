/*
 * The transports of this build (transport.h): their tables, what is usable here
 * (MSCCLPP_TRANSPORTS, each transport's probe) and the choice per pair of ranks. With
 * MSCCLPP_TEST_TRANSPORT_FAULT set, the tables handed out are tp_fault.c's wrappers.
 */
#include <stdio.h>
#include <string.h>

#include "config.h"
#include "base/config.h"
#include "base/debug.h"
#include "transports/tp_fault.h"
#include "transports/transport.h"

/* The transports' own tables. */
static const tp_ops_t *tp_raw(int id)
{
    switch (id) {
    case TP_IPC: return tp_ipc_ops();
    case TP_IB: return tp_ib_ops();
    case TP_UCX: return tp_ucx_ops();
    default: return NULL;
    }
}

const tp_ops_t *tp_get(int id) { return tp_fault_wrap(id, tp_raw(id)); }

int tp_index(const tp_ops_t *ops)
{
    for (int i = 0; i < TP__COUNT; i++)
        if (ops && tp_get(i) == ops) return i;
    return -1;
}

const tp_ops_t *tp_by_bit(unsigned bit)
{
    for (int i = 0; i < TP__COUNT; i++)
        if (tp_get(i)->bit == bit) return tp_get(i);
    return NULL;
}

bool tp_built(int id)
{
    switch (id) {
    case TP_IPC: return true;
#ifdef MSCCLPP_HAVE_VERBS
    case TP_IB: return true;
#endif
#ifdef MSCCLPP_HAVE_UCX
    case TP_UCX: return true;
#endif
    default: return false;
    }
}

/* Is transport `name` allowed by MSCCLPP_TRANSPORTS (empty: all)? */
static bool allowed(const char *name)
{
    const char *list = config_get(CFG_MSCCLPP_TRANSPORTS);
    if (!*list) return true;
    size_t n = strlen(name);
    for (const char *p = list; *p;) {
        while (*p == ',' || *p == ' ') p++;
        const char *e = p;
        while (*e && *e != ',' && *e != ' ') e++;
        if ((size_t)(e - p) == n && strncmp(p, name, n) == 0) return true;
        p = e;
    }
    return false;
}

mscclpp_result_t tp_status(int id, char *why, size_t cap)
{
    const tp_ops_t *ops = tp_get(id);
    if (!ops) {
        snprintf(why, cap, "unknown transport %d", id);
        return core_error_quiet(MSCCLPP_ERR_INVALID_ARG, "%s", why);
    }
    if (!allowed(ops->name)) {
        snprintf(why, cap, "excluded by MSCCLPP_TRANSPORTS=%s", config_get(CFG_MSCCLPP_TRANSPORTS));
        return core_error_quiet(MSCCLPP_ERR_UNSUPPORTED, "%s: %s", ops->name, why);
    }
    core_clear_error();
    mscclpp_result_t r = ops->probe();
    const char *said = mscclpp_last_error();
    if (r == MSCCLPP_OK)
        snprintf(why, cap, "%s%s%s", tp_built(id) ? "built" : "", *said ? "; " : "", said);
    else snprintf(why, cap, "%s", said);
    if (r == MSCCLPP_OK) core_clear_error();
    return r;
}

mscclpp_result_t tp_select(const tp_world_t *w, int peer, const tp_ops_t **out)
{
    if (peer < 0 || peer >= w->nranks || peer == w->rank)
        return ERR_ARG("rank %d: no transport to rank %d of %d", w->rank, peer, w->nranks);
    tp_peer_t me = {w->rank, w->node_id[w->rank]};
    tp_peer_t them = {peer, w->node_id[peer]};
    const tp_ops_t *best = NULL;
    int best_prio = -1;
    char said[512] = "";
    size_t used = 0;
    for (int i = 0; i < TP__COUNT; i++) {
        const tp_ops_t *ops = tp_get(i);
        const char *why = NULL;
        char buf[160];
        if (!allowed(ops->name)) {
            why = "excluded by MSCCLPP_TRANSPORTS";
        } else if (ops->probe() != MSCCLPP_OK) {
            snprintf(buf, sizeof buf, "%s", mscclpp_last_error());
            why = buf;
        } else {
            int prio = ops->can_connect(&me, &them);
            if (prio < 0) why = "cannot link this pair";
            else if (prio > best_prio) best = ops, best_prio = prio;
        }
        if (why && used < sizeof said)
            used += (size_t)snprintf(said + used, sizeof said - used, "%s%s: %s", used ? "; " : "",
                                     ops->name, why);
    }
    core_clear_error();
    if (!best)
        return ERR(MSCCLPP_ERR_UNSUPPORTED, "rank %d: no transport reaches rank %d (%s node): %s",
                   w->rank, peer, me.node_id == them.node_id ? "same" : "another", said);
    *out = best;
    return MSCCLPP_OK;
}
