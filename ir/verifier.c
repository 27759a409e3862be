/*
 * verifier.c - checks a graph's invariants; passes run it after every
 * rewrite in tests and in the compile driver.
 *
 *  - every node is linked into the block it claims, with its arity;
 *  - operands are defined before use in the same block (dominance), so
 *    regions are isolated from the enclosing graph;
 *  - result types equal what the op table infers from the operand types, and
 *    implied attributes (shape, dtype) equal the result type;
 *  - a fused node's region takes its inputs' types, yields its results'
 *    types and holds only elementwise ops, broadcasts, scalar constants and
 *    reductions (a row kernel: see passes/fuse.c).
 * Messages name the node with the printer's numbering.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir_internal.h"

typedef struct {
    const em_ir_graph *g;
    int *num;
    unsigned char *defined; /* by value id */
} verifier;

static em_status fail(verifier *v, const em_ir_node *n, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static em_status fail(verifier *v, const em_ir_node *n, const char *fmt, ...) {
    char what[512], ref[64];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    if (!n) return em_error(EM_ERR_VALUE, "verify @%s: %s", v->g->name, what);
    char where[300] = "";
    if (n->loc.file) snprintf(where, sizeof where, " (%s:%d)", n->loc.file, n->loc.line);
    const char *r = n->n_out ? em_ir_value_ref(n->out[0], v->num, ref) : "<node>";
    return em_error(EM_ERR_VALUE, "verify @%s: %s = %s%s: %s", v->g->name, r, em_op_name(n->op),
                    where, what);
}

static bool region_op_allowed(const em_ir_node *n) {
    const em_op_info *info = em_op_get(n->op);
    if (info->flags & (EM_F_ELEMENTWISE | EM_F_BROADCAST)) return true;
    if (info->kind == EM_KIND_REDUCE) return true;
    return em_ir_is_scalar_const(n);
}

static em_status check_block(verifier *v, const em_ir_block *b);

static em_status check_types(verifier *v, const em_ir_node *n) {
    char a[256], c[256];
    const em_op_info *info = em_op_get(n->op);
    const em_type *t = &n->out[0]->type;
    if ((info->attrs & EM_A_SHAPE) &&
        !em_shape_eq(EM_IR_ATTRS(n)->shape, EM_IR_ATTRS(n)->n_shape, t->shape, t->ndim))
        return fail(v, n, "shape attribute does not match the result type");
    if ((info->attrs & EM_A_DTYPE) && EM_IR_ATTRS(n)->dtype != t->dtype)
        return fail(v, n, "dtype attribute does not match the result type");
    em_type in[64], out[16];
    if (n->n_in > 64 || n->n_out > 16) /* (dispatch's bound; IR text may say anything) */
        return fail(v, n, "%d operands and %d results: an op takes at most 64 and 16", n->n_in, n->n_out);
    for (int i = 0; i < n->n_in; i++) in[i] = n->in[i]->type;
    if (em_op_infer(n->op, in, n->n_in, EM_IR_ATTRS(n), out, n->n_out) != EM_OK)
        return fail(v, n, "%s", em_last_error());
    for (int i = 0; i < n->n_out; i++)
        if (!em_type_eq(&out[i], &n->out[i]->type)) {
            em_type_str(&n->out[i]->type, a, sizeof a);
            em_type_str(&out[i], c, sizeof c);
            return fail(v, n, "result %d has type %s but the operands give %s", i, a, c);
        }
    return EM_OK;
}

static em_status check_fused(verifier *v, const em_ir_node *n) {
    const em_ir_block *r = n->region;
    if (!r) return fail(v, n, "fused node without a region");
    if (r->owner != n) return fail(v, n, "region does not point back at its node");
    if (r->n_params != n->n_in)
        return fail(v, n, "region takes %d parameters for %d inputs", r->n_params, n->n_in);
    for (int i = 0; i < n->n_in; i++)
        if (!em_type_eq(&r->params[i]->type, &n->in[i]->type))
            return fail(v, n, "region parameter %d does not have the type of input %d", i, i);
    if (r->n_results != n->n_out)
        return fail(v, n, "region yields %d values for %d results", r->n_results, n->n_out);
    for (int i = 0; i < n->n_out; i++)
        if (!em_type_eq(&r->results[i]->type, &n->out[i]->type))
            return fail(v, n, "region yield %d does not have the type of result %d", i, i);
    int matmuls = 0;
    for (const em_ir_node *m = r->first; m; m = m->next) {
        if (m->op == EM_OP_MATMUL) { /* a GEMM whose epilogue is the rest of the region */
            if (++matmuls > 1) return fail(v, m, "a fused region holds at most one matmul");
            for (int i = 0; i < m->n_in; i++)
                if (m->in[i]->def)
                    return fail(v, m, "a fused matmul's operands must be region parameters");
        } else if (!region_op_allowed(m)) {
            return fail(v, m, "only elementwise ops, broadcasts, scalar constants, reductions and one "
                              "matmul may be fused");
        }
    }
    return check_block(v, r);
}

static em_status check_block(verifier *v, const em_ir_block *b) {
    char ref[64];
    for (int i = 0; i < b->n_params; i++) {
        const em_ir_value *p = b->params[i];
        if (p->block != b || p->def || p->index != i)
            return fail(v, NULL, "parameter %s is not owned by its block",
                        em_ir_value_ref(p, v->num, ref));
        v->defined[p->id] = 1;
    }
    const em_ir_node *prev = NULL;
    for (const em_ir_node *n = b->first; n; prev = n, n = n->next) {
        if (n->block != b || n->prev != prev) return fail(v, n, "node is not linked into its block");
        const em_op_info *info = em_op_get(n->op);
        if ((info->n_in >= 0 && n->n_in != info->n_in) || (info->n_out >= 0 && n->n_out != info->n_out))
            return fail(v, n, "takes %d operands and %d results, got %d and %d", info->n_in,
                        info->n_out, n->n_in, n->n_out);
        for (int i = 0; i < n->n_in; i++) {
            const em_ir_value *x = n->in[i];
            if (!x) return fail(v, n, "operand %d is missing", i);
            if (x->block != b)
                return fail(v, n, "operand %s is defined in another block",
                            em_ir_value_ref(x, v->num, ref));
            if (!v->defined[x->id])
                return fail(v, n, "operand %s is used before it is defined",
                            em_ir_value_ref(x, v->num, ref));
        }
        em_status st = info->kind == EM_KIND_FUSED ? check_fused(v, n)
                       : n->region ? fail(v, n, "only fused nodes have a region")
                                   : check_types(v, n);
        if (st != EM_OK) return st;
        for (int i = 0; i < n->n_out; i++) {
            const em_ir_value *o = n->out[i];
            if (o->def != n || o->index != i || o->block != b)
                return fail(v, n, "result %d is not owned by the node", i);
            v->defined[o->id] = 1;
        }
    }
    if (b->last != prev) return fail(v, NULL, "block's last node is not the end of its list");
    for (int i = 0; i < b->n_results; i++) {
        const em_ir_value *r = b->results[i];
        if (!r || r->block != b || !v->defined[r->id])
            return fail(v, b->owner, "result %d is not a value of the block", i);
    }
    return EM_OK;
}

em_status em_ir_verify(const em_ir_graph *g) {
    verifier v = {g, NULL, NULL};
    size_t n = (size_t)(g->n_values ? g->n_values : 1);
    v.num = malloc(n * sizeof *v.num);
    v.defined = calloc(n, 1);
    if (!v.num || !v.defined) {
        free(v.num);
        free(v.defined);
        return em_error(EM_ERR_NOMEM, "out of memory verifying @%s", g->name);
    }
    em_ir_number_values(g, v.num);
    em_status st = check_block(&v, g->body);
    free(v.num);
    free(v.defined);
    return st;
}
