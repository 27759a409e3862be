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
 * Scalar constants (0-d `full`) are copied into every region that uses them,
 * so code generators see them as immediates. Matmul, reductions and reshapes
 * end a group. Every member keeps its source location; the fused node's
 * covers them all.
 */
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
    int64_t bytes_saved;        /* intermediates no longer written to memory */
} fuser;

static bool fusible(const em_ir_node *n) {
    unsigned flags = em_op_get(n->op)->flags;
    /* Integer division must raise on a zero divisor, which a fused kernel
     * cannot do: it stays an eager call (see EM_F_INT_DIV). */
    if ((flags & EM_F_INT_DIV) && !em_dtype_is_float(n->out[0]->type.dtype)) return false;
    return (flags & (EM_F_ELEMENTWISE | EM_F_BROADCAST)) != 0 && !n->region;
}

/* Can producer p join group gid rooted at r? */
static bool can_join(const fuser *f, const em_ir_node *p, const em_ir_node *r, int gid) {
    /* Fused nodes made earlier in this pass sit after every root still to
     * come, so they never produce a later group's inputs; the id check keeps
     * the tables in bounds regardless. Users recorded before earlier groups
     * were built sit at or before their replacement, so the position test
     * below errs on the safe side. */
    if (p->id >= f->n_nodes || !fusible(p) || f->group[p->id] != -1) return false;
    for (int o = 0; o < p->n_out; o++) {
        const em_ir_value *v = p->out[o];
        bool outside = false, outside_after_root = true;
        for (int u = 0; u < f->n_users[v->id]; u++) {
            int user = f->users[v->id][u];
            if (user >= 0 && f->group[user] == gid) continue;
            outside = true;
            if (user >= 0 && f->pos[user] <= f->pos[r->id]) outside_after_root = false;
        }
        if (outside && !(outside_after_root && em_type_eq(&v->type, &r->out[0]->type)))
            return false;
    }
    return true;
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
    em_type types[64];
    if (n_outs > 64) {
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
                em_ir_node *c = em_ir_node_new(g, v->def->op, NULL, 0, &v->def->attrs, &v->type, 1,
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
        em_ir_node *c = em_ir_node_new(g, m->op, rin, m->n_in, &m->attrs, &m->out[0]->type, 1, m->loc);
        if (!c) {
            st = EM_ERR_NOMEM;
            goto done;
        }
        em_ir_insert(region, c, NULL);
        map[m->out[0]->id] = c->out[0];
    }
    em_ir_value *yields[64];
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
        if (!out && (em_op_get(members[i]->op)->flags & EM_F_ELEMENTWISE))
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
        for (bool grew = true; grew;) { /* grow to a fixpoint */
            grew = false;
            for (int m = 0; m < n_mem; m++)
                for (int j = 0; j < members[m]->n_in; j++) {
                    em_ir_node *p = members[m]->in[j]->def;
                    if (p && p->n_out == 1 && !em_ir_is_scalar_const(p) && can_join(f, p, r, gid)) {
                        f->group[p->id] = gid;
                        members[n_mem++] = p;
                        grew = true;
                    }
                }
        }
        bool computes = false;
        for (int m = 0; m < n_mem; m++)
            computes |= (em_op_get(members[m]->op)->flags & EM_F_ELEMENTWISE) != 0;
        if (!computes) continue; /* broadcasts alone stay free views */
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
    fuser f = {g, g->body, g->n_nodes, NULL, NULL, NULL, NULL, 0, 0, 0};
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
    if (st == EM_OK && report && f.n_kernels)
        em_strbuf_printf(report, "fuse: %d ops into %d kernel%s; %lld bytes of intermediates not written\n",
                         f.n_fused_ops, f.n_kernels, f.n_kernels == 1 ? "" : "s", (long long)f.bytes_saved);
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
