/*
 * fuse.c - groups chains of elementwise ops and broadcasts into one fused
 * node each, so a chain runs as one loop over memory instead of one pass
 * (and one temporary) per op.
 *
 * Groups grow backwards from a root, the last not-yet-fused elementwise node
 * in the block: a producer joins when it is elementwise or a broadcast and
 * every use of its result lies inside the group, or else when its result has
 * the root's shape and every outside use comes after the root, in which case
 * the result becomes an extra output of the fused node. Those two rules keep
 * the graph acyclic with the fused node placed where the root was: all of the
 * group's inputs are defined before the root and all outside uses of its
 * outputs come after it. Growth repeats until nothing more joins, so a
 * producer shared by two members joins once both have.
 *
 * Reductions join too, making a row kernel: every reduction in a group
 * reduces the same trailing dims of the same shape S (the rows), keeps its
 * dims when a member uses it (so it broadcasts back over its row), and every
 * member's result broadcasts into S. A code generator then computes a row's
 * reductions and everything around them while the row is in cache: softmax,
 * layer norm, cross-entropy and their backwards, as users write them, each
 * become one kernel. A reduction joins only over rows of 2 to 65536 elements
 * (a row is one thread's work; longer ones are better split as eager does),
 * never of a broadcast (eager reduces that view as it is), and a result
 * used outside the group must then be S-shaped or one value per row.
 *
 * A group without reductions may also take in one matmul that produces one
 * of its inputs, as a GEMM epilogue: the product has the root's type
 * (float32 or float64), only members use it, and no member computes its
 * operands. A code generator then applies the group to each block of the
 * product right after the BLAS call that made it, while the block is in
 * cache: a Linear layer's bias, its activation and a residual add cost no
 * pass over memory of their own.
 *
 * Scalar constants (0-d `full`) are copied into every region that uses them,
 * so code generators see them as immediates. Other matmuls, other
 * reductions and reshapes end a group. Every member keeps its source location; the fused
 * node's covers them all.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ember/passes.h"

typedef struct {
    em_ir_graph *g;
    em_ir_block *b;
    int n_nodes;     /* node ids below this existed before the pass */
    int *pos;        /* node id -> position in the block */
    int *group;      /* node id -> group number, -1 if none */
    int **users;     /* value id -> user node ids (-1 marks a block result) */
    int *n_users;
    int n_kernels, n_fused_ops; /* for the report */
    int n_row_kernels, n_reductions, n_epilogues;
    int64_t bytes_saved;        /* intermediates no longer written to memory */
    /* the rows of the group being grown; has_rows false until a reduction joins */
    bool has_rows;
    em_ir_rows rows;
} fuser;

#define MAX_ROW 65536
#define MAX_FUSED_OUTPUTS 64 /* results of one fused node (em_llvm_launch's operand table, the interpreter) */

/* A reduction a row kernel computes (see the header); sets *rows. */
static bool row_reduction(const em_ir_node *n, em_ir_rows *rows) {
    if (n->region || n->n_out != 1 || !em_ir_reduces_rows(n, rows)) return false;
    const em_type *x = &n->in[0]->type;
    int64_t row = em_shape_numel(x->shape + x->ndim - rows->k, rows->k);
    int64_t outer = em_shape_numel(x->shape, x->ndim - rows->k);
    if (row < 2 || row > MAX_ROW || outer < 1) return false;
    if (n->op == EM_OP_LOGSUMEXP && !em_dtype_is_float(x->dtype)) return false;
    const em_ir_node *p = n->in[0]->def;
    return !(p && (em_op_get(p->op)->flags & EM_F_BROADCAST));
}

static bool fusible(const em_ir_node *n) {
    unsigned flags = em_op_get(n->op)->flags;
    /* Integer division must raise on a zero divisor, which a fused kernel
     * cannot do: it stays an eager call (see EM_F_INT_DIV). */
    if ((flags & EM_F_INT_DIV) && !em_dtype_is_float(n->out[0]->type.dtype)) return false;
    em_ir_rows rows;
    return ((flags & (EM_F_ELEMENTWISE | EM_F_BROADCAST)) != 0 && !n->region) || row_reduction(n, &rows);
}

/* Makes `rows` the group's, if every member (members[0] the root) but the
 * reductions broadcasts into them and the root may leave. */
static bool adopt_rows(fuser *f, const em_ir_rows *rows, em_ir_node *const *members, int n_mem) {
    if (!em_ir_rows_result(rows, &members[0]->out[0]->type)) return false;
    for (int m = 0; m < n_mem; m++)
        if (em_op_get(members[m]->op)->kind != EM_KIND_REDUCE &&
            !em_ir_rows_fit(rows, &members[m]->out[0]->type, NULL))
            return false;
    f->rows = *rows;
    f->has_rows = true;
    return true;
}

/* Can producer p join group gid rooted at r? (A reduction joining a group
 * without one sets its rows: see adopt_rows.) */
static bool can_join(fuser *f, const em_ir_node *p, const em_ir_node *r, int gid, em_ir_node *const *members,
                     int n_mem) {
    /* Fused nodes made earlier in this pass sit after every root still to
     * come, so they never produce a later group's inputs; the id check keeps
     * the tables in bounds regardless. Users recorded before earlier groups
     * were built sit at or before their replacement, so the position test
     * below errs on the safe side. */
    if (p->id >= f->n_nodes || !fusible(p) || f->group[p->id] != -1) return false;
    em_ir_rows own; /* a reduction's rows */
    bool reduction = row_reduction(p, &own);
    if (reduction && !EM_IR_ATTRS(p)->keepdim) return false; /* a member uses it: it must broadcast back */
    if (reduction && f->has_rows) {
        if (own.k != f->rows.k || !em_shape_eq(own.shape, own.ndim, f->rows.shape, f->rows.ndim)) return false;
    } else if (!reduction && f->has_rows && !em_ir_rows_fit(&f->rows, &p->out[0]->type, NULL)) {
        return false;
    }
    /* results used outside are judged against the group's rows, or those a
     * joining reduction would set; without rows, they have the root's type */
    const em_ir_rows *rows = f->has_rows ? &f->rows : reduction ? &own : NULL;
    for (int o = 0; o < p->n_out; o++) {
        const em_ir_value *v = p->out[o];
        bool outside = false, outside_after_root = true;
        for (int u = 0; u < f->n_users[v->id]; u++) {
            int user = f->users[v->id][u];
            if (user >= 0 && f->group[user] == gid) continue;
            outside = true;
            if (user >= 0 && f->pos[user] <= f->pos[r->id]) outside_after_root = false;
        }
        if (!outside) continue;
        bool may_leave = rows ? em_ir_rows_result(rows, &v->type) : em_type_eq(&v->type, &r->out[0]->type);
        if (!outside_after_root || !may_leave) return false;
    }
    return !reduction || f->has_rows || adopt_rows(f, &own, members, n_mem);
}

/* The matmul group gid (root r, without rows) takes in as its GEMM
 * epilogue (see the header), or NULL. */
static em_ir_node *epilogue_gemm(const fuser *f, int gid, em_ir_node *const *members, int n_mem,
                                 const em_ir_node *r) {
    for (int m = 0; m < n_mem; m++)
        for (int i = 0; i < members[m]->n_in; i++) {
            em_ir_node *p = members[m]->in[i]->def;
            if (!p || p->op != EM_OP_MATMUL || p->id >= f->n_nodes || f->group[p->id] != -1 || EM_IR_ATTRS(p)->n_layout)
                continue; /* (an epilogue writes the product contiguously) */
            em_dtype dt = p->out[0]->type.dtype;
            if ((dt != EM_DTYPE_F32 && dt != EM_DTYPE_F64) || !em_type_eq(&p->out[0]->type, &r->out[0]->type))
                continue;
            bool inside = true;
            const em_ir_value *v = p->out[0];
            for (int u = 0; u < f->n_users[v->id] && inside; u++)
                inside = f->users[v->id][u] >= 0 && f->group[f->users[v->id][u]] == gid;
            for (int k = 0; k < p->n_in && inside; k++)
                inside = p->in[k]->type.dtype == dt && !(p->in[k]->def && f->group[p->in[k]->def->id] == gid);
            if (inside) return p;
        }
    return NULL;
}

/* How many results a fused node of group gid would have: the members'
 * whose results are used outside it (or are graph results). */
static int group_outputs(const fuser *f, int gid, em_ir_node *const *members, int n_mem) {
    int n = 0;
    for (int i = 0; i < n_mem; i++) {
        const em_ir_value *v = members[i]->out[0];
        bool out = i == 0; /* (the root's result always leaves) */
        for (int u = 0; u < f->n_users[v->id] && !out; u++) out = f->users[v->id][u] < 0 || f->group[f->users[v->id][u]] != gid;
        n += out;
    }
    return n;
}

/* Replaces the members of group gid (root r) by one fused node. */
static em_status build_fused(fuser *f, em_ir_node *r, int gid, em_ir_node **members, int n_mem) {
    em_ir_graph *g = f->g;
    /* Inputs: values used by members, defined outside the group and not
     * scalar constants, in order of first use. Outputs: the root's result,
     * then member results used outside the group. */
    int cap_in = 0, n_in = 0, n_outs = 0;
    for (int i = 0; i < n_mem; i++) cap_in += members[i]->n_in;
    em_ir_value **ins = malloc((size_t)(cap_in + 1) * sizeof *ins);
    em_ir_value **outs = malloc((size_t)(n_mem + 1) * sizeof *outs);
    em_ir_value **map = calloc((size_t)g->n_values, sizeof *map); /* old value -> region value */
    em_status st = EM_OK;
    if (!ins || !outs || !map) {
        st = em_error(EM_ERR_NOMEM, "out of memory fusing");
        goto done;
    }
    for (int i = 0; i < n_mem; i++)
        for (int k = 0; k < members[i]->n_in; k++) {
            em_ir_value *v = members[i]->in[k];
            if ((v->def && (f->group[v->def->id] == gid || em_ir_is_scalar_const(v->def))) || map[v->id])
                continue;
            map[v->id] = v; /* marks "already an input" until the region exists */
            ins[n_in++] = v;
        }
    outs[n_outs++] = r->out[0];
    for (int i = 0; i < n_mem; i++) {
        if (members[i] == r) continue;
        em_ir_value *v = members[i]->out[0];
        for (int u = 0; u < f->n_users[v->id]; u++) {
            int user = f->users[v->id][u];
            if (user < 0 || f->group[user] != gid) {
                outs[n_outs++] = v;
                break;
            }
        }
    }
    em_type types[MAX_FUSED_OUTPUTS];
    if (n_outs > MAX_FUSED_OUTPUTS) { /* (fuse_block keeps groups within the bound) */
        st = em_error(EM_ERR_INTERNAL, "fuse: too many outputs");
        goto done;
    }
    em_ir_loc loc = members[0]->loc;
    for (int i = 0; i < n_outs; i++) types[i] = outs[i]->type;
    for (int i = 1; i < n_mem; i++) loc = em_ir_loc_merge(loc, members[i]->loc);
    em_ir_node *fn = em_ir_node_new(g, EM_OP_FUSED, ins, n_in, NULL, types, n_outs, loc);
    em_ir_block *region = fn ? em_ir_block_new(g, fn) : NULL;
    if (!region) {
        st = EM_ERR_NOMEM;
        goto done;
    }
    fn->region = region;
    for (int i = 0; i < n_in; i++) {
        map[ins[i]->id] = em_ir_add_param(region, &ins[i]->type, NULL);
        if (!map[ins[i]->id]) {
            st = EM_ERR_NOMEM;
            goto done;
        }
    }
    for (int i = 0; i < n_mem; i++) {
        em_ir_node *m = members[i];
        em_ir_value *rin[16];
        for (int k = 0; k < m->n_in; k++) {
            em_ir_value *v = m->in[k];
            if (!map[v->id]) { /* a scalar constant: copy it into the region */
                em_ir_node *c = em_ir_node_new(g, v->def->op, NULL, 0, EM_IR_ATTRS(v->def), &v->type, 1,
                                               v->def->loc);
                if (!c) {
                    st = EM_ERR_NOMEM;
                    goto done;
                }
                em_ir_insert(region, c, NULL);
                map[v->id] = c->out[0];
            }
            rin[k] = map[v->id];
        }
        em_ir_node *c = em_ir_node_new(g, m->op, rin, m->n_in, EM_IR_ATTRS(m), &m->out[0]->type, 1, m->loc);
        if (!c) {
            st = EM_ERR_NOMEM;
            goto done;
        }
        em_ir_insert(region, c, NULL);
        map[m->out[0]->id] = c->out[0];
    }
    em_ir_value *yields[MAX_FUSED_OUTPUTS];
    for (int i = 0; i < n_outs; i++) yields[i] = map[outs[i]->id];
    if ((st = em_ir_set_results(region, yields, n_outs)) != EM_OK) goto done;
    em_ir_insert(f->b, fn, r);
    for (int i = 0; i < n_outs; i++) em_ir_replace_uses(f->b, outs[i], fn->out[i]);
    for (int i = 0; i < n_mem; i++) em_ir_remove(members[i]);
    f->n_kernels++;
    f->n_fused_ops += n_mem;
    for (int i = 0; i < n_mem; i++) { /* members whose results stay inside the kernel */
        bool out = false;
        for (int j = 0; j < n_outs && !out; j++) out = outs[j] == members[i]->out[0];
        const em_type *t = &members[i]->out[0]->type;
        if (!out && ((em_op_get(members[i]->op)->flags & EM_F_ELEMENTWISE) || members[i]->op == EM_OP_MATMUL))
            f->bytes_saved += em_shape_numel(t->shape, t->ndim) * (int64_t)em_dtype_size(t->dtype);
    }
done:
    free(ins);
    free(outs);
    free(map);
    return st;
}

static em_status fuse_block(fuser *f) {
    em_ir_block *b = f->b;
    int n_nodes = 0;
    for (em_ir_node *n = b->first; n; n = n->next) f->pos[n->id] = n_nodes++;
    em_ir_node **order = malloc((size_t)(n_nodes + 1) * sizeof *order);
    em_ir_node **members = malloc((size_t)(n_nodes + 1) * sizeof *members);
    if (!order || !members) {
        free(order);
        free(members);
        return em_error(EM_ERR_NOMEM, "out of memory fusing");
    }
    int k = 0;
    for (em_ir_node *n = b->first; n; n = n->next) order[k++] = n;
    em_status st = EM_OK;
    int next_gid = 0;
    for (int i = n_nodes - 1; i >= 0 && st == EM_OK; i--) {
        em_ir_node *r = order[i];
        if (!fusible(r) || f->group[r->id] != -1 || r->n_out != 1) continue;
        int gid = next_gid++, n_mem = 1;
        f->group[r->id] = gid;
        members[0] = r;
        em_ir_rows rows;
        f->has_rows = false;
        if (row_reduction(r, &rows)) adopt_rows(f, &rows, members, 1);
        for (bool grew = true; grew;) { /* grow to a fixpoint */
            grew = false;
            for (int m = 0; m < n_mem; m++)
                for (int j = 0; j < members[m]->n_in; j++) {
                    em_ir_node *p = members[m]->in[j]->def;
                    if (p && p->n_out == 1 && !em_ir_is_scalar_const(p) &&
                        can_join(f, p, r, gid, members, n_mem)) {
                        f->group[p->id] = gid;
                        members[n_mem++] = p;
                        grew = true;
                    }
                }
        }
        bool computes = false;
        int reductions = 0;
        for (int m = 0; m < n_mem; m++) {
            computes |= (em_op_get(members[m]->op)->flags & EM_F_ELEMENTWISE) != 0;
            reductions += em_op_get(members[m]->op)->kind == EM_KIND_REDUCE;
        }
        /* A fused node has at most MAX_FUSED_OUTPUTS results (a kernel's
         * operands, the interpreter's bound). An elementwise group with
         * more (an RNN's steps, each result kept for the backward) gives
         * back its latest members, which are the group as it was before
         * they joined; they form groups of their own later. A row group
         * stays unfused. */
        if (n_mem > 1 && group_outputs(f, gid, members, n_mem) > MAX_FUSED_OUTPUTS) {
            if (reductions)
                computes = false;
            else
                while (n_mem > 1 && group_outputs(f, gid, members, n_mem) > MAX_FUSED_OUTPUTS)
                    f->group[members[--n_mem]->id] = -1;
        }
        /* broadcasts alone stay free views; a reduction alone runs eagerly */
        if (!computes) {
            for (int m = 0; m < n_mem; m++) f->group[members[m]->id] = -2;
            continue;
        }
        f->n_row_kernels += reductions > 0;
        f->n_reductions += reductions;
        em_ir_node *gemm = reductions ? NULL : epilogue_gemm(f, gid, members, n_mem, r);
        if (gemm) {
            f->group[gemm->id] = gid;
            members[n_mem++] = gemm;
            f->n_epilogues++;
        }
        /* members in block order */
        int w = 0;
        for (int j = 0; j <= i; j++)
            if (f->group[order[j]->id] == gid) members[w++] = order[j];
        st = build_fused(f, r, gid, members, w);
    }
    free(order);
    free(members);
    return st;
}

em_status em_pass_fuse(em_ir_graph *g, em_strbuf *report) {
    fuser f;
    memset(&f, 0, sizeof f);
    f.g = g;
    f.b = g->body;
    f.n_nodes = g->n_nodes;
    size_t nn = (size_t)(g->n_nodes ? g->n_nodes : 1), nv = (size_t)(g->n_values ? g->n_values : 1);
    f.pos = calloc(nn, sizeof *f.pos);
    f.group = malloc(nn * sizeof *f.group);
    f.users = calloc(nv, sizeof *f.users);
    f.n_users = calloc(nv, sizeof *f.n_users);
    int *cap = calloc(nv, sizeof *cap);
    em_status st = EM_OK;
    if (!f.pos || !f.group || !f.users || !f.n_users || !cap) {
        st = em_error(EM_ERR_NOMEM, "out of memory fusing");
        goto done;
    }
    for (size_t i = 0; i < nn; i++) f.group[i] = -1;
    /* users of every body value: node ids, -1 for a use as a graph result */
    for (em_ir_node *n = g->body->first; n; n = n->next)
        for (int i = 0; i < n->n_in; i++) {
            em_ir_value *v = n->in[i];
            if (f.n_users[v->id] == cap[v->id]) {
                cap[v->id] = cap[v->id] ? cap[v->id] * 2 : 4;
                int *u = realloc(f.users[v->id], (size_t)cap[v->id] * sizeof *u);
                if (!u) {
                    st = em_error(EM_ERR_NOMEM, "out of memory fusing");
                    goto done;
                }
                f.users[v->id] = u;
            }
            f.users[v->id][f.n_users[v->id]++] = n->id;
        }
    for (int i = 0; i < g->body->n_results; i++) {
        em_ir_value *v = g->body->results[i];
        int *u = realloc(f.users[v->id], (size_t)(f.n_users[v->id] + 1) * sizeof *u);
        if (!u) {
            st = em_error(EM_ERR_NOMEM, "out of memory fusing");
            goto done;
        }
        f.users[v->id] = u;
        u[f.n_users[v->id]++] = -1;
        cap[v->id] = f.n_users[v->id];
    }
    st = fuse_block(&f);
    if (st == EM_OK && report && f.n_kernels) {
        char rows[96] = "", gemms[64] = "";
        if (f.n_row_kernels)
            snprintf(rows, sizeof rows, " (%d row kernel%s, holding %d reduction%s)", f.n_row_kernels,
                     f.n_row_kernels == 1 ? "" : "s", f.n_reductions, f.n_reductions == 1 ? "" : "s");
        if (f.n_epilogues)
            snprintf(gemms, sizeof gemms, " (%d GEMM epilogue%s)", f.n_epilogues, f.n_epilogues == 1 ? "" : "s");
        em_strbuf_printf(report, "fuse: %d ops into %d kernel%s%s%s; %lld bytes of intermediates not written\n",
                         f.n_fused_ops, f.n_kernels, f.n_kernels == 1 ? "" : "s", rows, gemms,
                         (long long)f.bytes_saved);
    }
done:
    if (f.users)
        for (size_t i = 0; i < nv; i++) free(f.users[i]);
    free(f.users);
    free(f.n_users);
    free(f.pos);
    free(f.group);
    free(cap);
    return st;
}
