/*
 * partition.c - splits a joint forward-backward graph into a forward graph
 * and a backward graph (a compiled function whose results require grad).
 *
 * The joint graph is what the tracer records when a compiled function's
 * results have autograd history: the forward ops, then the ops of the
 * backward formulas run from placeholder gradients of the results (the
 * last params) to the gradients of the inputs (the last results).
 *
 *   forward  = every node the forward results need, and every impure one
 *              (a random op runs even when unused, as eagerly);
 *   backward = every other node the gradients need;
 *   saved    = the values the backward reads from the forward: node results
 *              (the forward graph returns them) and forward inputs (kept by
 *              reference, as eager autograd keeps a parameter).
 *
 * Then recomputation, the rule the min-cut partitioners arrive at for
 * memory: one sweep from the last node to the first; a saved value made by
 * a cheap node (elementwise, a view, a broadcast, a constant; pure and one
 * result) is recomputed in the backward instead when what that needs and
 * is not available there already (saved, recomputed, a forward input:
 * each the cheaper of saving it and recomputing it in turn, a few nodes
 * back) is smaller than the value itself. So gelu(h) is not saved when h
 * is, exp(x)**2 not when x is an input, and no view is saved where its base
 * can be. Saved bytes never grow; the backward's fuser folds the
 * recomputed ops into its kernels. Matmuls, reductions, convolutions and
 * random ops are never recomputed.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ember/alloc.h"
#include "ember/passes.h"

enum { NONE = 0, FWD = 1, BWD = 2, RECOMPUTE = 4 };

static size_t bytes_of(const em_ir_value *v) {
    return (size_t)em_shape_numel(v->type.shape, v->type.ndim) * em_dtype_size(v->type.dtype);
}

static bool recomputable(const em_ir_node *n) {
    unsigned f = em_op_get(n->op)->flags;
    if (!(f & EM_F_PURE) || (f & (EM_F_RANDOM | EM_F_DATA_DEPENDENT)) || n->n_out != 1 || n->region) return false;
    return (f & (EM_F_ELEMENTWISE | EM_F_VIEW | EM_F_BROADCAST)) || em_ir_is_scalar_const(n);
}

typedef struct {
    const em_ir_graph *joint;
    int n_fwd_inputs, n_fwd_results, saved_at;
    unsigned char *node_set; /* [n_nodes] FWD | BWD | RECOMPUTE */
    bool *saved;             /* [n_values] the backward reads it from the forward */
    em_ir_value **map;       /* [n_values] scratch: joint value -> value in the graph being built */
} splitter;

static bool is_fwd_param(const splitter *s, const em_ir_value *v) {
    return !v->def && v->index < s->n_fwd_inputs;
}

/* Marks the nodes of the forward, then of the backward, and the values
 * crossing between them. */
static em_status mark(splitter *s) {
    const em_ir_block *b = s->joint->body;
    int nv = s->joint->n_values;
    bool *need = em_calloc((size_t)nv, sizeof *need);
    if (!need) return em_error(EM_ERR_NOMEM, "partition: out of memory");
    for (int i = 0; i < s->n_fwd_results; i++) need[b->results[i]->id] = true;
    for (const em_ir_node *n = b->last; n; n = n->prev) {
        bool used = !(em_op_get(n->op)->flags & EM_F_PURE);
        for (int j = 0; j < n->n_out && !used; j++) used = need[n->out[j]->id];
        if (!used) continue;
        s->node_set[n->id] |= FWD;
        for (int i = 0; i < n->n_in; i++) need[n->in[i]->id] = true;
    }
    for (int p = s->n_fwd_inputs; p < b->n_params; p++)
        if (need[b->params[p]->id]) {
            em_free(need);
            return em_error(EM_ERR_INTERNAL, "partition: the forward reads the gradient %%%s",
                            b->params[p]->name ? b->params[p]->name : "?");
        }
    memset(need, 0, (size_t)nv * sizeof *need);
    for (int i = s->n_fwd_results; i < b->n_results; i++) need[b->results[i]->id] = true;
    for (const em_ir_node *n = b->last; n; n = n->prev) {
        bool used = false;
        for (int j = 0; j < n->n_out && !used; j++) used = need[n->out[j]->id];
        if (!used) continue;
        if (s->node_set[n->id] & FWD) {
            for (int j = 0; j < n->n_out; j++) s->saved[n->out[j]->id] |= need[n->out[j]->id];
            continue;
        }
        s->node_set[n->id] |= BWD;
        for (int i = 0; i < n->n_in; i++) need[n->in[i]->id] = true;
    }
    for (int p = 0; p < s->n_fwd_inputs; p++) s->saved[b->params[p]->id] = need[b->params[p]->id];
    em_free(need);
    return EM_OK;
}

/* What making u available in the backward would cost in saved bytes: 0
 * when it is already (saved, recomputed, a forward input), else the
 * cheaper of saving it and recomputing it from what its operands cost
 * (looking `depth` nodes back). */
#define RECOMPUTE_DEPTH 4

static bool available(const splitter *s, const em_ir_value *u) {
    return s->saved[u->id] || is_fwd_param(s, u) || (u->def && (s->node_set[u->def->id] & RECOMPUTE));
}

static size_t operands_cost(const splitter *s, const em_ir_node *n, int depth);

static size_t cost(const splitter *s, const em_ir_value *u, int depth) {
    if (available(s, u)) return 0;
    size_t own = bytes_of(u);
    if (!u->def || depth == 0 || !recomputable(u->def)) return own;
    size_t via = operands_cost(s, u->def, depth - 1);
    return via < own ? via : own;
}

static size_t operands_cost(const splitter *s, const em_ir_node *n, int depth) {
    size_t sum = 0;
    for (int i = 0; i < n->n_in; i++) {
        bool twice = false;
        for (int k = 0; k < i && !twice; k++) twice = n->in[k] == n->in[i];
        if (!twice) sum += cost(s, n->in[i], depth);
    }
    return sum;
}

/* Is recomputing n's value better than saving it? Ties go to views (the
 * base is as big, and contiguous). */
static bool worth_recomputing(const splitter *s, const em_ir_node *n, int depth) {
    if (!recomputable(n)) return false;
    size_t via = operands_cost(s, n, depth), own = bytes_of(n->out[0]);
    return via < own || (via == own && (em_op_get(n->op)->flags & EM_F_VIEW));
}

/* Makes u available in the backward the way cost() found cheapest. */
static void make_available(splitter *s, const em_ir_value *u, int depth) {
    if (is_fwd_param(s, u)) s->saved[u->id] = true; /* (kept by reference) */
    if (available(s, u)) return;
    if (u->def && depth > 0 && worth_recomputing(s, u->def, depth - 1)) {
        s->node_set[u->def->id] |= RECOMPUTE;
        for (int i = 0; i < u->def->n_in; i++) make_available(s, u->def->in[i], depth - 1);
    } else {
        s->saved[u->id] = true;
    }
}

/* The recomputation sweep (see the top of the file). */
static void recompute(splitter *s) {
    for (const em_ir_node *n = s->joint->body->last; n; n = n->prev) {
        if (!(s->node_set[n->id] & FWD) || !s->saved[n->out[0]->id]) continue;
        s->saved[n->out[0]->id] = false; /* (so that cost() does not count it available) */
        if (!worth_recomputing(s, n, RECOMPUTE_DEPTH)) {
            s->saved[n->out[0]->id] = true;
            continue;
        }
        s->node_set[n->id] |= RECOMPUTE;
        for (int i = 0; i < n->n_in; i++) make_available(s, n->in[i], RECOMPUTE_DEPTH);
    }
}

static em_status copy_node(splitter *s, em_ir_graph *g, const em_ir_node *n) {
    em_ir_value **in = em_malloc((size_t)(n->n_in + 1) * sizeof *in);
    em_type *types = em_malloc((size_t)(n->n_out + 1) * sizeof *types);
    em_status st = in && types ? EM_OK : em_error(EM_ERR_NOMEM, "partition: out of memory");
    for (int i = 0; i < n->n_in && st == EM_OK; i++)
        if (!(in[i] = s->map[n->in[i]->id]))
            st = em_error(EM_ERR_INTERNAL, "partition: %s reads a value the graph lacks", em_op_name(n->op));
    for (int j = 0; j < n->n_out && st == EM_OK; j++) types[j] = n->out[j]->type;
    em_ir_loc loc = n->loc;
    if (st == EM_OK && loc.file && !(loc.file = em_ir_intern(g, loc.file, strlen(loc.file))))
        st = em_error(EM_ERR_NOMEM, "partition: out of memory");
    em_ir_node *c = st == EM_OK ? em_ir_node_new(g, n->op, in, n->n_in, EM_IR_ATTRS(n), types, n->n_out, loc) : NULL;
    if (st == EM_OK && !c) st = em_error(EM_ERR_NOMEM, "partition: out of memory");
    if (c) {
        em_ir_insert(g->body, c, NULL);
        for (int j = 0; j < n->n_out; j++) s->map[n->out[j]->id] = c->out[j];
    }
    em_free(in);
    em_free(types);
    return st;
}

static em_ir_graph *graph_named(const em_ir_graph *joint, const char *suffix) {
    char name[256];
    snprintf(name, sizeof name, "%s.%s", joint->name, suffix);
    return em_ir_graph_new(name);
}

static em_status set_results(em_ir_graph *g, em_ir_value **vals, int n) {
    em_status st = em_ir_set_results(g->body, vals, n);
    return st == EM_OK ? em_ir_verify(g) : st;
}

/* The forward graph: the forward inputs, the FWD nodes; results: the
 * forward results with the saved node values (in node order) inserted at
 * saved_at. */
static em_status build_forward(splitter *s, em_partition *p) {
    const em_ir_block *b = s->joint->body;
    em_ir_graph *g = p->forward = graph_named(s->joint, "forward");
    int nv = s->joint->n_values;
    em_ir_value **res = em_malloc((size_t)(s->n_fwd_results + nv + 1) * sizeof *res);
    if (!g || !res) {
        em_free(res);
        return em_error(EM_ERR_NOMEM, "partition: out of memory");
    }
    memset(s->map, 0, (size_t)nv * sizeof *s->map);
    em_status st = EM_OK;
    for (int i = 0; i < s->n_fwd_inputs && st == EM_OK; i++)
        if (!(s->map[b->params[i]->id] = em_ir_add_param(g->body, &b->params[i]->type, b->params[i]->name)))
            st = em_error(EM_ERR_NOMEM, "partition: out of memory");
    for (const em_ir_node *n = b->first; n && st == EM_OK; n = n->next)
        if (s->node_set[n->id] & FWD) st = copy_node(s, g, n);
    int k = 0;
    for (int i = 0; i < s->saved_at && st == EM_OK; i++) res[k++] = s->map[b->results[i]->id];
    p->n_saved_results = 0; /* (in the order build_backward makes their inputs) */
    for (const em_ir_node *n = b->first; n && st == EM_OK; n = n->next)
        for (int j = 0; j < n->n_out; j++)
            if (s->saved[n->out[j]->id]) {
                res[k++] = s->map[n->out[j]->id];
                p->n_saved_results++;
            }
    for (int i = s->saved_at; i < s->n_fwd_results && st == EM_OK; i++) res[k++] = s->map[b->results[i]->id];
    if (st == EM_OK) st = set_results(g, res, k);
    em_free(res);
    return st;
}

/* The backward graph: the saved node values, the saved forward inputs and
 * the results' gradients as inputs; the BWD and RECOMPUTE nodes; results:
 * the joint graph's gradients. */
static em_status build_backward(splitter *s, em_partition *p) {
    const em_ir_block *b = s->joint->body;
    em_ir_graph *g = p->backward = graph_named(s->joint, "backward");
    int nv = s->joint->n_values;
    p->saved_inputs = em_malloc((size_t)(s->n_fwd_inputs + 1) * sizeof *p->saved_inputs);
    if (!g || !p->saved_inputs) return em_error(EM_ERR_NOMEM, "partition: out of memory");
    /* (which joint values the forward returns: forward's map is gone, so by value order again) */
    memset(s->map, 0, (size_t)nv * sizeof *s->map);
    em_status st = EM_OK;
    for (const em_ir_node *n = b->first; n && st == EM_OK; n = n->next)
        for (int j = 0; j < n->n_out && st == EM_OK; j++) {
            const em_ir_value *v = n->out[j];
            if (!s->saved[v->id]) continue;
            char name[32];
            snprintf(name, sizeof name, "saved%d", v->id);
            if (!(s->map[v->id] = em_ir_add_param(g->body, &v->type, name)))
                st = em_error(EM_ERR_NOMEM, "partition: out of memory");
        }
    p->n_saved_inputs = 0;
    for (int i = 0; i < s->n_fwd_inputs && st == EM_OK; i++) {
        const em_ir_value *v = b->params[i];
        if (!s->saved[v->id]) continue;
        p->saved_inputs[p->n_saved_inputs++] = i;
        if (!(s->map[v->id] = em_ir_add_param(g->body, &v->type, v->name)))
            st = em_error(EM_ERR_NOMEM, "partition: out of memory");
    }
    for (int i = s->n_fwd_inputs; i < b->n_params && st == EM_OK; i++)
        if (!(s->map[b->params[i]->id] = em_ir_add_param(g->body, &b->params[i]->type, b->params[i]->name)))
            st = em_error(EM_ERR_NOMEM, "partition: out of memory");
    for (const em_ir_node *n = b->first; n && st == EM_OK; n = n->next)
        if (s->node_set[n->id] & (BWD | RECOMPUTE)) st = copy_node(s, g, n);
    int n_res = b->n_results - s->n_fwd_results;
    em_ir_value **res = em_malloc((size_t)(n_res + 1) * sizeof *res);
    if (!res && st == EM_OK) st = em_error(EM_ERR_NOMEM, "partition: out of memory");
    for (int i = 0; i < n_res && st == EM_OK; i++)
        if (!(res[i] = s->map[b->results[s->n_fwd_results + i]->id]))
            st = em_error(EM_ERR_INTERNAL, "partition: gradient %d is not computed", i);
    if (st == EM_OK) st = set_results(g, res, n_res);
    em_free(res);
    return st;
}

/* What was saved and what is recomputed, for explain(). */
static char *report(const splitter *s, const em_partition *p) {
    em_strbuf r;
    em_strbuf_init(&r);
    size_t saved_bytes = 0;
    int n_recomputed = 0;
    const em_ir_block *b = s->joint->body;
    for (const em_ir_node *n = b->first; n; n = n->next) {
        n_recomputed += (s->node_set[n->id] & RECOMPUTE) != 0;
        for (int j = 0; j < n->n_out; j++)
            if (s->saved[n->out[j]->id]) saved_bytes += bytes_of(n->out[j]);
    }
    em_strbuf_printf(&r, "saved for backward: %d value%s made by the forward (%zu bytes), %d of its inputs (by reference)\n",
                     p->n_saved_results, p->n_saved_results == 1 ? "" : "s", saved_bytes, p->n_saved_inputs);
    for (const em_ir_node *n = b->first; n; n = n->next)
        for (int j = 0; j < n->n_out; j++) {
            if (!s->saved[n->out[j]->id]) continue;
            char shape[128];
            em_shape_str(n->out[j]->type.shape, n->out[j]->type.ndim, shape, sizeof shape);
            em_strbuf_printf(&r, "  %%saved%d: %s%s from %s", n->out[j]->id, em_dtype_name(n->out[j]->type.dtype),
                             shape, em_op_name(n->op));
            if (n->loc.file) em_strbuf_printf(&r, " at %s:%d", n->loc.file, n->loc.line);
            em_strbuf_puts(&r, "\n");
        }
    em_strbuf_printf(&r, "recomputed in backward: %d op%s", n_recomputed, n_recomputed == 1 ? "" : "s");
    const char *sep = " (";
    for (const em_ir_node *n = b->first; n; n = n->next)
        if (s->node_set[n->id] & RECOMPUTE) {
            em_strbuf_printf(&r, "%s%s", sep, em_op_name(n->op));
            sep = ", ";
        }
    em_strbuf_puts(&r, n_recomputed ? ")\n" : "\n");
    return em_strbuf_take(&r);
}

em_status em_partition_joint(const em_ir_graph *joint, int n_fwd_inputs, int n_fwd_results, int saved_at,
                             bool recompute_cheap, em_partition *p) {
    memset(p, 0, sizeof *p);
    const em_ir_block *b = joint->body;
    if (n_fwd_inputs < 0 || n_fwd_inputs > b->n_params || n_fwd_results < 0 || n_fwd_results > b->n_results ||
        saved_at < 0 || saved_at > n_fwd_results)
        return em_error(EM_ERR_VALUE, "partition: %d forward inputs of %d, %d forward results of %d", n_fwd_inputs,
                        b->n_params, n_fwd_results, b->n_results);
    for (const em_ir_node *n = b->first; n; n = n->next)
        if (n->region) return em_error(EM_ERR_VALUE, "partition: the joint graph must not be fused yet");
    splitter s = {joint, n_fwd_inputs, n_fwd_results, saved_at, NULL, NULL, NULL};
    s.node_set = em_calloc((size_t)(joint->n_nodes ? joint->n_nodes : 1), 1);
    s.saved = em_calloc((size_t)(joint->n_values ? joint->n_values : 1), sizeof *s.saved);
    s.map = em_calloc((size_t)(joint->n_values ? joint->n_values : 1), sizeof *s.map);
    em_status st = s.node_set && s.saved && s.map ? mark(&s) : em_error(EM_ERR_NOMEM, "partition: out of memory");
    if (st == EM_OK && recompute_cheap) recompute(&s);
    if (st == EM_OK) st = build_forward(&s, p);
    if (st == EM_OK) st = build_backward(&s, p);
    if (st == EM_OK && !(p->report = report(&s, p))) st = em_error(EM_ERR_NOMEM, "partition: out of memory");
    em_free(s.node_set);
    em_free(s.saved);
    em_free(s.map);
    if (st != EM_OK) em_partition_clear(p);
    return st;
}

void em_partition_clear(em_partition *p) {
    em_ir_graph_free(p->forward);
    em_ir_graph_free(p->backward);
    em_free(p->saved_inputs);
    em_free(p->report);
    memset(p, 0, sizeof *p);
}
