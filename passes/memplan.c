/*
 * memplan.c - schedules the block's nodes for a lower peak of memory.
 *
 * A compiled graph runs its nodes in block order, and its backend reuses an
 * intermediate's buffer once the value is dead (exec/plan.c lays the
 * buffers out in one arena, shown in the dumps' backend.txt). The order the
 * tracer recorded is the order eager ran, which is not always the one with
 * the lowest peak: a value computed early but first used much later holds
 * its bytes all the while. This pass moves such a node down to just before
 * its first user when that frees more bytes than it keeps alive: its
 * results' bytes no longer live across the gap, while the inputs whose last
 * use it was now live until the node's new place (except those made by a
 * node that feeds only this one: that node follows it down next). Nodes
 * are visited from the last to the first, so a chain whose end moved
 * follows it. Unless the moves together lower the estimated peak, the
 * order is left as it was.
 *
 * Only pure, non-random nodes move (a random draw's place decides its
 * numbers), never one whose result the graph returns, and never a view (it
 * holds no bytes of its own). The report gives the estimated peak of
 * intermediate bytes before and after: values live from their node to the
 * last use of anything that may share their memory (views, copies, casts);
 * fused nodes count as allocating their results; graph inputs count nothing.
 */
#include <stdlib.h>
#include <string.h>

#include "ember/passes.h"

typedef struct {
    const em_ir_block *b;
    int n_nodes;
    int *pos;       /* node id -> position */
    bool *aliases;  /* node id -> may its results share its inputs' memory? */
    int *parent;    /* value id -> union-find parent (memory-sharing classes) */
    int *last;      /* class root -> last position anything in it is used */
    bool *escapes;  /* class root -> holds a graph input (the caller's memory) */
} liveness;

/* May n's results share its inputs' memory? (Fused nodes are counted as
 * compiled kernels, which allocate.) */
static bool aliases(const em_ir_node *n) { return !n->region && em_ir_may_alias_inputs(n); }

static int64_t bytes_of(const em_ir_value *v) {
    return em_shape_numel(v->type.shape, v->type.ndim) * (int64_t)em_dtype_size(v->type.dtype);
}

static void analyse(liveness *l, const em_ir_graph *g) {
    const em_ir_block *b = l->b;
    int k = 0;
    for (int v = 0; v < g->n_values; v++) {
        l->last[v] = -1;
        l->escapes[v] = false;
    }
    for (const em_ir_node *n = b->first; n; n = n->next) l->pos[n->id] = k++;
    em_ir_alias_classes(g, l->aliases, l->parent);
    l->n_nodes = k;
    for (int i = 0; i < b->n_params; i++) l->escapes[em_ir_class(l->parent, b->params[i]->id)] = true;
    for (const em_ir_node *n = b->first; n; n = n->next) {
        for (int i = 0; i < n->n_in; i++) {
            int c = em_ir_class(l->parent, n->in[i]->id);
            if (l->pos[n->id] > l->last[c]) l->last[c] = l->pos[n->id];
        }
        for (int o = 0; o < n->n_out; o++) { /* (a dead result lives at its node) */
            int c = em_ir_class(l->parent, n->out[o]->id);
            if (l->pos[n->id] > l->last[c]) l->last[c] = l->pos[n->id];
        }
    }
    for (int r = 0; r < b->n_results; r++) l->last[em_ir_class(l->parent, b->results[r]->id)] = k;
}

/* The estimated peak of intermediate bytes, in block order. */
static int64_t peak_bytes(const liveness *l, int64_t *delta) {
    memset(delta, 0, (size_t)(l->n_nodes + 2) * sizeof *delta);
    for (const em_ir_node *n = l->b->first; n; n = n->next) {
        if (aliases(n)) continue;
        for (int o = 0; o < n->n_out; o++) {
            int c = em_ir_class(l->parent, n->out[o]->id);
            if (l->escapes[c]) continue;
            delta[l->pos[n->id]] += bytes_of(n->out[o]);
            delta[l->last[c] + 1] -= bytes_of(n->out[o]);
        }
    }
    int64_t live = 0, peak = 0;
    for (int k = 0; k <= l->n_nodes; k++) {
        live += delta[k];
        peak = live > peak ? live : peak;
    }
    return peak;
}

static bool movable(const em_ir_node *n) {
    unsigned flags = em_op_get(n->op)->flags;
    return (flags & EM_F_PURE) && !(flags & EM_F_RANDOM) && !aliases(n);
}

/* Does p feed only n (and no graph result)? */
static bool feeds_only(const em_ir_block *b, const em_ir_node *p, const em_ir_node *n) {
    for (const em_ir_node *m = p->next; m; m = m->next)
        for (int i = 0; i < m->n_in; i++)
            for (int o = 0; o < p->n_out; o++)
                if (m->in[i] == p->out[o] && m != n) return false;
    for (int r = 0; r < b->n_results; r++)
        for (int o = 0; o < p->n_out; o++)
            if (b->results[r] == p->out[o]) return false;
    return true;
}

/* Should n move down to just before `to`, its first user? */
static bool worth_sinking(const liveness *l, const em_ir_node *n, em_ir_node **to) {
    if (!movable(n)) return false;
    em_ir_node *first = NULL;
    int64_t freed = 0;
    for (em_ir_node *m = n->next; m && !first; m = m->next)
        for (int i = 0; i < m->n_in && !first; i++)
            for (int o = 0; o < n->n_out; o++)
                if (m->in[i] == n->out[o]) first = m;
    for (int o = 0; o < n->n_out; o++) {
        for (int r = 0; r < l->b->n_results; r++)
            if (l->b->results[r] == n->out[o]) return false;
        freed += bytes_of(n->out[o]);
    }
    if (!first || first == n->next) return false;
    int64_t kept = 0; /* inputs whose last use is n: alive until `first` now */
    for (int i = 0; i < n->n_in; i++) {
        int c = em_ir_class(l->parent, n->in[i]->id);
        bool seen = false;
        for (int j = 0; j < i; j++) seen |= em_ir_class(l->parent, n->in[j]->id) == c;
        const em_ir_node *p = n->in[i]->def;
        if (seen || l->escapes[c] || l->last[c] != l->pos[n->id]) continue;
        if (!(p && movable(p) && feeds_only(l->b, p, n))) kept += bytes_of(n->in[i]);
    }
    *to = first;
    return freed > kept;
}

em_status em_pass_memplan(em_ir_graph *g, em_strbuf *report) {
    liveness l = {.b = g->body};
    size_t nv = (size_t)(g->n_values ? g->n_values : 1), nn = (size_t)(g->n_nodes ? g->n_nodes : 1);
    l.pos = malloc(nn * sizeof *l.pos);
    l.parent = malloc(nv * sizeof *l.parent);
    l.aliases = calloc(nn, sizeof *l.aliases);
    l.last = malloc(nv * sizeof *l.last);
    l.escapes = malloc(nv * sizeof *l.escapes);
    int64_t *delta = malloc((nn + 2) * sizeof *delta);
    em_ir_node **order = malloc(nn * sizeof *order);
    em_status st = EM_OK;
    if (!l.pos || !l.parent || !l.aliases || !l.last || !l.escapes || !delta || !order) {
        st = em_error(EM_ERR_NOMEM, "out of memory planning memory");
        goto done;
    }
    for (em_ir_node *n = g->body->first; n; n = n->next) l.aliases[n->id] = aliases(n);
    analyse(&l, g);
    int64_t before = peak_bytes(&l, delta);
    int count = 0, moved = 0;
    for (em_ir_node *n = g->body->first; n; n = n->next) order[count++] = n;
    for (int i = count - 1; i >= 0; i--) {
        em_ir_node *to;
        if (!worth_sinking(&l, order[i], &to)) continue;
        em_ir_remove(order[i]);
        em_ir_insert(g->body, order[i], to);
        analyse(&l, g);
        moved++;
    }
    int64_t after = peak_bytes(&l, delta);
    if (after >= before) { /* (each move was locally good; together they gained nothing) */
        for (int i = 0; i < count; i++) em_ir_remove(order[i]);
        for (int i = 0; i < count; i++) em_ir_insert(g->body, order[i], NULL);
        after = before;
        moved = 0;
    }
    if (report && moved)
        em_strbuf_printf(report, "memplan: %d node%s moved nearer their first use; estimated peak of "
                                 "intermediates %lld -> %lld bytes\n",
                         moved, moved == 1 ? "" : "s", (long long)before, (long long)after);
    else if (report)
        em_strbuf_printf(report, "memplan: order kept; estimated peak of intermediates %lld bytes\n",
                         (long long)before);
done:
    free(l.pos);
    free(l.parent);
    free(l.aliases);
    free(l.last);
    free(l.escapes);
    free(delta);
    free(order);
    return st;
}
