/*
 * layout.c - memory layouts: copies no consumer needs go, and a producer
 * that may choose how its result lies in memory picks the order its
 * consumers read contiguously.
 *
 * Two rules:
 *
 * 1. contiguous(x) -> x, when no graph result may share the copy's memory
 *    (the caller gets a contiguous tensor of its own, as eager gives) and
 *    at most one of its users might copy x itself. Every op reads strided
 *    operands: elementwise ops, reductions and fused kernels index them in
 *    place, matmul hands a transposed matrix to BLAS with its transpose
 *    flag, and reshape copies only where no view exists. So the copy is
 *    made at most once either way, and usually never:
 *    `y.transpose(1, 2).contiguous().view(b, t, c)` becomes a reshape of a
 *    permute, which rule 2 makes a view.
 *
 * 2. A batched matmul (both operands batched, so BLAS runs one GEMM per
 *    batch either way) whose every user permutes its result in one order
 *    that keeps the last dim last gets that order as its layout attribute:
 *    it writes each batch's rows where the permute reads them contiguously
 *    (BLAS's leading dimension puts the rows apart), so the permute is a
 *    contiguous view and a reshape after it costs nothing. Attention's
 *    `(att @ v).transpose(1, 2).reshape(b, t, c)` loses its copy, and so
 *    does the same pattern in a traced backward. Not where a graph result
 *    may share the matmul's memory: results are contiguous, as eager's.
 *
 * Rule 2 comes second so that rule 1 has removed the contiguous() nodes
 * between matmuls and their permutes' readers. Results keep eager's bits:
 * the same BLAS calls compute the same blocks, written elsewhere.
 */
#include <stdlib.h>
#include <string.h>

#include "ember/passes.h"

typedef struct {
    em_ir_graph *g;
    int *uses;        /* per value: node inputs and block results reading it */
    int *copying;     /* per value: users that might copy it (see may_copy) */
    int *permutes;    /* per value: users that are permutes in its first permute user's order, or -1 */
    const em_ir_node **first_permute; /* per value: its first permute user */
    bool *from_input; /* per value: may share a graph input's memory */
    bool *to_result;  /* per value: a graph result may share its memory */
} layout;

/* Might a user make its own copy of an operand that is not contiguous?
 * Views other than reshape never do; elementwise ops and reductions read
 * strided operands in place; matmul copies a matrix BLAS cannot read
 * through its transpose flag; reshape copies where no view exists; other
 * ops we do not know about, so they count. */
static bool may_copy(const em_ir_node *user) {
    const em_op_info *info = em_op_get(user->op);
    if (user->op == EM_OP_RESHAPE) return true;
    if (info->flags & (EM_F_VIEW | EM_F_ELEMENTWISE | EM_F_BROADCAST)) return false;
    return info->kind != EM_KIND_REDUCE;
}

static void count(layout *l) {
    const em_ir_block *b = l->g->body;
    size_t n = (size_t)l->g->n_values;
    em_ir_count_uses(l->g, l->uses);
    memset(l->copying, 0, n * sizeof *l->copying);
    memset(l->permutes, 0, n * sizeof *l->permutes);
    memset(l->first_permute, 0, n * sizeof *l->first_permute);
    for (const em_ir_node *u = b->first; u; u = u->next) {
        if (may_copy(u))
            for (int i = 0; i < u->n_in; i++) l->copying[u->in[i]->id]++;
        if (u->op != EM_OP_PERMUTE) continue;
        int v = u->in[0]->id;
        const em_ir_node *first = l->first_permute[v] ? l->first_permute[v] : u;
        l->first_permute[v] = first;
        bool same = EM_IR_ATTRS(first)->n_dims == EM_IR_ATTRS(u)->n_dims &&
                    !memcmp(EM_IR_ATTRS(first)->dims, EM_IR_ATTRS(u)->dims, (size_t)EM_IR_ATTRS(u)->n_dims * sizeof *EM_IR_ATTRS(u)->dims);
        if (l->permutes[v] >= 0) l->permutes[v] = same ? l->permutes[v] + 1 : -1;
    }
    em_ir_shared_memory(l->g, l->from_input, l->to_result);
}

/* Rule 1; the count of contiguous() nodes dropped, and *bytes the bytes
 * they would have copied. */
static int drop_copies(layout *l, int64_t *bytes) {
    int dropped = 0;
    em_ir_block *b = l->g->body;
    for (em_ir_node *n = b->first, *next; n; n = next) {
        next = n->next;
        if (n->op != EM_OP_CONTIGUOUS || n->n_in != 1 || n->n_out != 1) continue;
        const em_ir_value *v = n->out[0];
        if (l->to_result[v->id] || l->copying[v->id] > 1) continue;
        /* x's readers now include v's: one copy at most among them too */
        l->copying[n->in[0]->id] += l->copying[v->id];
        l->copying[n->in[0]->id] -= 1; /* (the contiguous() itself) */
        *bytes += em_shape_numel(v->type.shape, v->type.ndim) * (int64_t)em_dtype_size(v->type.dtype);
        em_ir_replace_uses(b, n->out[0], n->in[0]);
        em_ir_remove(n);
        dropped++;
    }
    return dropped;
}

/* The permute every user of v applies, when all users are permutes in one
 * order that keeps the last dim last and moves some other; else NULL. */
static const em_ir_node *common_permute(const layout *l, const em_ir_value *v) {
    const em_ir_node *first = l->first_permute[v->id];
    int nd = v->type.ndim;
    if (!first || l->permutes[v->id] != l->uses[v->id] || EM_IR_ATTRS(first)->n_dims != nd ||
        EM_IR_ATTRS(first)->dims[nd - 1] != nd - 1)
        return NULL;
    for (int d = 0; d < nd; d++)
        if (EM_IR_ATTRS(first)->dims[d] != d) return first;
    return NULL; /* (the identity: canonicalize's to remove) */
}

/* Rule 2; the count of matmuls given a layout. */
static int lay_out_products(layout *l) {
    int laid = 0;
    for (em_ir_node *n = l->g->body->first; n; n = n->next) {
        if (n->op != EM_OP_MATMUL || EM_IR_ATTRS(n)->n_layout || n->in[0]->type.ndim < 3 || n->in[1]->type.ndim < 3)
            continue;
        const em_ir_value *v = n->out[0];
        const em_ir_node *p = common_permute(l, v);
        if (!p || l->to_result[v->id]) continue;
        em_attrs a;
        em_ir_attrs(n, &a);
        a.n_layout = v->type.ndim;
        memcpy(a.layout, EM_IR_ATTRS(p)->dims, (size_t)a.n_layout * sizeof *a.layout);
        em_type t;
        em_type in[2] = {n->in[0]->type, n->in[1]->type};
        if (em_op_infer(n->op, in, 2, &a, &t, 1) != EM_OK) { /* (cannot fail: checked above) */
            em_clear_error();
            continue;
        }
        if (em_ir_set_attrs(l->g, n, &a) != EM_OK) return -1;
        laid++;
    }
    return laid;
}

em_status em_pass_layout(em_ir_graph *g, em_strbuf *report) {
    size_t n = (size_t)g->n_values + 1;
    layout l = {g,
                malloc(n * sizeof(int)),
                malloc(n * sizeof(int)),
                malloc(n * sizeof(int)),
                malloc(n * sizeof(em_ir_node *)),
                malloc(n),
                malloc(n)};
    em_status st = EM_OK;
    if (!l.uses || !l.copying || !l.permutes || !l.first_permute || !l.from_input || !l.to_result) {
        st = em_error(EM_ERR_NOMEM, "out of memory choosing layouts");
    } else {
        count(&l);
        int64_t bytes = 0;
        int dropped = drop_copies(&l, &bytes);
        if (dropped) count(&l);
        int laid = lay_out_products(&l);
        if (laid < 0) st = em_last_status();
        if (report && dropped)
            em_strbuf_printf(report, "layout: contiguous() no consumer needs dropped (%d); %lld bytes not copied\n",
                             dropped, (long long)bytes);
        if (report && laid > 0)
            em_strbuf_printf(report, "layout: matmul results written in the order their permute reads (%d)\n", laid);
    }
    free(l.uses);
    free(l.copying);
    free(l.permutes);
    free(l.first_permute);
    free(l.from_input);
    free(l.to_result);
    return st;
}
