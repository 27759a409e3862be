/*
 * const_fold.c - computes at compile time what depends on constants only.
 *
 * An elementwise op or a cast whose inputs are all `full` constants becomes
 * a constant of its result's shape, holding what the eager kernel gives on
 * the constants (so the folded value has the eager run's bits); an expand
 * or a reshape of a constant becomes one of the new shape. A constant of a
 * shape is a 0-d `full` expanded (a view: fused kernels read it as an
 * immediate, and nothing holds a tensor of copies), except where the graph
 * returns it: the caller gets a tensor of its own, as eagerly. Graph inputs
 * stay inputs, captured tensors included: parameters change between calls.
 * Random ops are never constants. An op that fails on its constants (an
 * integer division by zero) is left to fail at run time, as it does
 * eagerly.
 */
#include <stdlib.h>
#include <string.h>

#include "ember/passes.h"

/* The `full` holding v's value: v's own node, or the 0-d one v expands. */
static const em_ir_node *constant(const em_ir_value *v) {
    const em_ir_node *d = v->def;
    if (d && d->op == EM_OP_EXPAND && d->in[0]->def && em_ir_is_scalar_const(d->in[0]->def)) d = d->in[0]->def;
    return d && d->op == EM_OP_FULL ? d : NULL;
}

/* Is n a constant in its folded form already? */
static bool folded(const em_ir_node *n, const bool *to_result) {
    if (n->op == EM_OP_FULL) return true;
    return n->op == EM_OP_EXPAND && constant(n->out[0]) && !to_result[n->out[0]->id];
}

/* A 0-d tensor holding full node c's value. */
static em_tensor *scalar_of(const em_ir_node *c) {
    em_dtype dt = c->out[0]->type.dtype;
    bool exact_int = !em_dtype_is_float(dt) && dt != EM_DTYPE_BOOL;
    return exact_int ? em_tensor_scalar_i64(EM_IR_ATTRS(c)->value_i, dt) : em_tensor_scalar(EM_IR_ATTRS(c)->value, dt);
}

/* The value n computes from its constant inputs, as a 0-d tensor (new
 * reference), or NULL when n is not such an op or fails on them. */
static em_tensor *fold_value(const em_ir_node *n) {
    const em_op_info *info = em_op_get(n->op);
    if (n->n_in == 0 || n->n_out != 1 || n->region) return NULL;
    for (int i = 0; i < n->n_in; i++)
        if (!constant(n->in[i])) return NULL;
    if (info->kind == EM_KIND_VIEW) /* expand, reshape...: the same value, another shape */
        return (info->flags & EM_F_BROADCAST) || n->op == EM_OP_RESHAPE ? scalar_of(constant(n->in[0])) : NULL;
    if (!(info->flags & EM_F_ELEMENTWISE) || !(info->flags & EM_F_PURE)) return NULL;
    em_tensor *in[4] = {NULL}, *out = NULL;
    bool ok = n->n_in <= 4;
    for (int i = 0; ok && i < n->n_in; i++) ok = (in[i] = scalar_of(constant(n->in[i]))) != NULL;
    if (ok && em_op_run(n->op, in, n->n_in, EM_IR_ATTRS(n), &out, 1) != EM_OK) out = NULL;
    for (int i = 0; i < 4; i++) em_tensor_release(in[i]);
    if (!out) em_clear_error(); /* (left for the run to report, as eagerly) */
    if (out && out->dtype != n->out[0]->type.dtype) { /* (the graph's type rules) */
        em_tensor_release(out);
        out = NULL;
    }
    return out;
}

em_status em_pass_const_fold(em_ir_graph *g, em_strbuf *report) {
    int folded_n = 0, nv = g->n_values ? g->n_values : 1;
    bool *from_input = malloc((size_t)nv * sizeof *from_input), *to_result = malloc((size_t)nv * sizeof *to_result);
    if (!from_input || !to_result) {
        free(from_input);
        free(to_result);
        return em_error(EM_ERR_NOMEM, "out of memory folding constants");
    }
    em_ir_shared_memory(g, from_input, to_result);
    em_status st = EM_OK;
    for (em_ir_node *n = g->body->first, *next; n && st == EM_OK; n = next) {
        next = n->next;
        if (n->out[0] && n->out[0]->id < nv && folded(n, to_result)) continue;
        em_tensor *v = n->n_out == 1 && n->out[0]->id < nv ? fold_value(n) : NULL;
        if (!v) continue;
        const em_type *t = &n->out[0]->type;
        bool expand = t->ndim > 0 && !to_result[n->out[0]->id];
        em_attrs a;
        memset(&a, 0, sizeof a);
        a.n_shape = expand ? 0 : t->ndim;
        memcpy(a.shape, t->shape, (size_t)t->ndim * sizeof *a.shape);
        a.dtype = t->dtype;
        a.value = em_tensor_get_f64(v, 0);
        if (!em_dtype_is_float(t->dtype)) a.value_i = em_load_i64(em_tensor_data(v), t->dtype);
        em_tensor_release(v);
        em_type t0 = *t;
        t0.ndim = a.n_shape;
        em_ir_node *c = em_ir_node_new(g, EM_OP_FULL, NULL, 0, &a, &t0, 1, n->loc), *e = NULL;
        if (c) em_ir_insert(g->body, c, n);
        if (c && expand) {
            em_attrs ea;
            memset(&ea, 0, sizeof ea);
            ea.n_shape = t->ndim;
            memcpy(ea.shape, t->shape, (size_t)t->ndim * sizeof *ea.shape);
            if ((e = em_ir_node_new(g, EM_OP_EXPAND, &c->out[0], 1, &ea, t, 1, n->loc))) em_ir_insert(g->body, e, n);
        }
        if (!c || (expand && !e)) {
            st = em_error(EM_ERR_NOMEM, "out of memory folding constants");
            break;
        }
        em_ir_replace_uses(g->body, n->out[0], (e ? e : c)->out[0]);
        em_ir_remove(n);
        folded_n++;
    }
    free(from_input);
    free(to_result);
    if (st == EM_OK && report && folded_n)
        em_strbuf_printf(report, "const-fold: %d node%s computed at compile time\n", folded_n,
                         folded_n == 1 ? "" : "s");
    return st;
}
