/*
 * graph.c - building and editing nodes, use counts (the arena: arena.c).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ember/alloc.h"
#include "ir_internal.h"

em_ir_graph *em_ir_graph_new(const char *name) {
    em_ir_graph *g = em_calloc(1, sizeof *g);
    if (!g) return NULL;
    g->arena = em_ir_arena_new();
    if (!g->arena) {
        em_free(g);
        return NULL;
    }
    size_t n = strlen(name ? name : "graph");
    char *nm = em_ir_alloc(g, n + 1);
    g->body = nm ? em_ir_block_new(g, NULL) : NULL;
    if (!g->body) {
        em_ir_graph_free(g);
        return NULL;
    }
    memcpy(nm, name ? name : "graph", n + 1);
    for (size_t i = 0; i < n; i++) {
        char c = nm[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || c == '.'))
            nm[i] = '_';
    }
    g->name = nm;
    return g;
}

void em_ir_graph_free(em_ir_graph *g) {
    if (!g) return;
    em_ir_arena_free(g->arena);
    em_free(g);
}

/* ---- building ---- */

em_ir_block *em_ir_block_new(em_ir_graph *g, em_ir_node *owner) {
    em_ir_block *b = em_ir_alloc(g, sizeof *b);
    if (!b) return NULL;
    b->graph = g;
    b->owner = owner;
    return b;
}

static em_ir_value *value_new(em_ir_graph *g, const em_type *t) {
    em_ir_value *v = em_ir_alloc(g, sizeof *v);
    if (!v) return NULL;
    v->type = *t;
    v->id = g->n_values++;
    return v;
}

/* `name` as a parameter name the text form can read back: characters the
 * parser does not take become '_' ("xs[1]" -> "xs_1_", "*args" -> "_args"),
 * a leading digit gets a '_' (numbers are unnamed values), and a name the
 * block already has gets a suffix (".1", ".2"...). Interned; NULL when
 * memory runs out. */
static const char *param_name(em_ir_block *b, const char *name) {
    char buf[96];
    size_t n = 0;
    if (*name >= '0' && *name <= '9') buf[n++] = '_';
    for (const char *c = name; *c && n < 80; c++)
        buf[n++] = (*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') ||
                           *c == '_' || *c == '.'
                       ? *c
                       : '_';
    buf[n] = '\0';
    for (int k = 1;; k++) {
        bool taken = false;
        for (int i = 0; i < b->n_params && !taken; i++)
            taken = b->params[i]->name && strcmp(b->params[i]->name, buf) == 0;
        if (!taken) break;
        snprintf(buf + n, sizeof buf - n, ".%d", k);
    }
    return em_ir_intern(b->graph, buf, strlen(buf));
}

em_ir_value *em_ir_add_param(em_ir_block *b, const em_type *t, const char *name) {
    em_ir_graph *g = b->graph;
    if (b->n_params == b->cap_params) {
        int cap = b->cap_params ? b->cap_params * 2 : 8;
        em_ir_value **p = em_ir_alloc(g, (size_t)cap * sizeof *p);
        if (!p) return NULL;
        if (b->n_params) memcpy(p, b->params, (size_t)b->n_params * sizeof *p);
        b->params = p;
        b->cap_params = cap;
    }
    em_ir_value *v = value_new(g, t);
    if (!v) return NULL;
    v->block = b;
    v->index = b->n_params;
    if (name && !(v->name = param_name(b, name))) return NULL;
    b->params[b->n_params++] = v;
    return v;
}

em_ir_node *em_ir_node_new(em_ir_graph *g, em_op op, em_ir_value *const *in, int n_in,
                           const em_attrs *attrs, const em_type *out_types, int n_out,
                           em_ir_loc loc) {
    em_ir_node *n = em_ir_alloc(g, sizeof *n);
    if (!n) return NULL;
    n->op = op;
    n->n_in = n_in;
    n->n_out = n_out;
    n->in = em_ir_alloc(g, (size_t)(n_in ? n_in : 1) * sizeof *n->in);
    n->out = em_ir_alloc(g, (size_t)(n_out ? n_out : 1) * sizeof *n->out);
    if (!n->in || !n->out) return NULL;
    if (n_in) memcpy(n->in, in, (size_t)n_in * sizeof *in);
    if (em_ir_set_attrs(g, n, attrs) != EM_OK) return NULL;
    n->loc = loc;
    n->id = g->n_nodes++;
    for (int i = 0; i < n_out; i++) {
        em_ir_value *v = value_new(g, &out_types[i]);
        if (!v) return NULL;
        v->def = n;
        v->index = i;
        n->out[i] = v;
    }
    return n;
}

void em_ir_insert(em_ir_block *b, em_ir_node *n, em_ir_node *before) {
    n->block = b;
    for (int i = 0; i < n->n_out; i++) n->out[i]->block = b;
    n->next = before;
    n->prev = before ? before->prev : b->last;
    if (n->prev)
        n->prev->next = n;
    else
        b->first = n;
    if (before)
        before->prev = n;
    else
        b->last = n;
}

void em_ir_remove(em_ir_node *n) {
    em_ir_block *b = n->block;
    if (!b) return;
    if (n->prev)
        n->prev->next = n->next;
    else
        b->first = n->next;
    if (n->next)
        n->next->prev = n->prev;
    else
        b->last = n->prev;
    n->prev = n->next = NULL;
    n->block = NULL;
}

/* Infers the result type, creates the node, inserts it into b before
 * `before` (NULL: at the end). */
static em_ir_node *build_at(em_ir_block *b, em_ir_node *before, em_op op, em_ir_value *const *in, int n_in,
                            const em_attrs *attrs, em_ir_loc loc) {
    em_type it[64], ot[1]; /* (dispatch's bound on an op's operands) */
    if (n_in > 64) {
        em_error(EM_ERR_VALUE, "%s: too many inputs", em_op_name(op));
        return NULL;
    }
    for (int i = 0; i < n_in; i++) it[i] = in[i]->type;
    if (em_op_infer(op, it, n_in, attrs, ot, 1) != EM_OK) return NULL;
    em_ir_node *n = em_ir_node_new(b->graph, op, in, n_in, attrs, ot, 1, loc);
    if (n) em_ir_insert(b, n, before);
    return n;
}

em_ir_node *em_ir_build(em_ir_block *b, em_op op, em_ir_value *const *in, int n_in,
                        const em_attrs *attrs, em_ir_loc loc) {
    return build_at(b, NULL, op, in, n_in, attrs, loc);
}

em_ir_node *em_ir_build_before(em_ir_node *before, em_op op, em_ir_value *const *in, int n_in,
                               const em_attrs *attrs, em_ir_loc loc) {
    return build_at(before->block, before, op, in, n_in, attrs, loc);
}

em_status em_ir_set_results(em_ir_block *b, em_ir_value *const *values, int n) {
    em_ir_value **r = em_ir_alloc(b->graph, (size_t)(n ? n : 1) * sizeof *r);
    if (!r) return EM_ERR_NOMEM;
    if (n) memcpy(r, values, (size_t)n * sizeof *r);
    b->results = r;
    b->n_results = n;
    return EM_OK;
}

void em_ir_replace_uses(em_ir_block *b, em_ir_value *from, em_ir_value *to) {
    for (em_ir_node *n = b->first; n; n = n->next)
        for (int i = 0; i < n->n_in; i++)
            if (n->in[i] == from) n->in[i] = to;
    for (int i = 0; i < b->n_results; i++)
        if (b->results[i] == from) b->results[i] = to;
}

static void count_block(const em_ir_block *b, int *counts) {
    for (const em_ir_node *n = b->first; n; n = n->next) {
        for (int i = 0; i < n->n_in; i++) counts[n->in[i]->id]++;
        if (n->region) count_block(n->region, counts);
    }
    for (int i = 0; i < b->n_results; i++) counts[b->results[i]->id]++;
}

bool em_ir_may_alias_inputs(const em_ir_node *n) {
    const em_op_info *info = em_op_get(n->op);
    return (info->flags & EM_F_VIEW) || info->kind == EM_KIND_COPY || info->kind == EM_KIND_CAST || n->region;
}

void em_ir_value_strides(const em_ir_value *v, int64_t *strides) {
    const em_type *t = &v->type;
    const em_ir_node *n = v->def;
    em_attrs a;
    if (n && (em_op_get(n->op)->attrs & EM_A_LAYOUT) && em_ir_attrs(n, &a)->n_layout == t->ndim && t->ndim > 0)
        em_layout_strides(t->shape, t->ndim, a.layout, strides);
    else
        em_contiguous_strides(t->shape, t->ndim, strides);
}

void em_ir_shared_memory(const em_ir_graph *g, bool *from_input, bool *to_result) {
    const em_ir_block *b = g->body;
    memset(from_input, 0, (size_t)g->n_values * sizeof *from_input);
    memset(to_result, 0, (size_t)g->n_values * sizeof *to_result);
    for (int i = 0; i < b->n_params; i++) from_input[b->params[i]->id] = true;
    for (const em_ir_node *n = b->first; n; n = n->next) {
        bool any = false;
        for (int i = 0; i < n->n_in; i++) any |= from_input[n->in[i]->id];
        for (int o = 0; o < n->n_out; o++) from_input[n->out[o]->id] = any && em_ir_may_alias_inputs(n);
    }
    for (int r = 0; r < b->n_results; r++) to_result[b->results[r]->id] = true;
    for (const em_ir_node *n = b->last; n; n = n->prev) {
        bool any = false;
        for (int o = 0; o < n->n_out; o++) any |= to_result[n->out[o]->id];
        if (any && em_ir_may_alias_inputs(n))
            for (int i = 0; i < n->n_in; i++) to_result[n->in[i]->id] = true;
    }
}

int em_ir_class(int *parent, int v) {
    while (parent[v] != v) v = parent[v] = parent[parent[v]];
    return v;
}

void em_ir_alias_classes(const em_ir_graph *g, const bool *aliases, int *parent) {
    for (int v = 0; v < g->n_values; v++) parent[v] = v;
    for (const em_ir_node *n = g->body->first; n; n = n->next) {
        if (!aliases[n->id]) continue;
        for (int o = 0; o < n->n_out; o++)
            for (int i = 0; i < n->n_in; i++)
                parent[em_ir_class(parent, n->out[o]->id)] = em_ir_class(parent, n->in[i]->id);
    }
}

bool em_ir_is_scalar_const(const em_ir_node *n) {
    return n->op == EM_OP_FULL && n->out[0]->type.ndim == 0;
}

bool em_ir_reduces_rows(const em_ir_node *n, em_ir_rows *rows) {
    if (em_op_get(n->op)->kind != EM_KIND_REDUCE || n->n_in < 1) return false;
    const em_type *x = &n->in[0]->type;
    em_attrs a;
    int k = em_ir_attrs(n, &a)->n_dims;
    bool seen[EM_MAX_DIMS] = {false};
    if (k < 1 || k > x->ndim) return false;
    for (int i = 0; i < k; i++) {
        int64_t d = a.dims[i] < 0 ? a.dims[i] + x->ndim : a.dims[i];
        if (d < x->ndim - k || d >= x->ndim || seen[d]) return false;
        seen[d] = true;
    }
    rows->ndim = x->ndim;
    rows->k = k;
    memcpy(rows->shape, x->shape, sizeof rows->shape);
    return true;
}

bool em_ir_rows_fit(const em_ir_rows *r, const em_type *t, bool *per_row) {
    bool row = true;
    if (t->ndim > r->ndim) return false;
    for (int i = 0; i < t->ndim; i++) {
        int d = r->ndim - t->ndim + i;
        if (t->shape[i] != 1 && t->shape[i] != r->shape[d]) return false;
        if (d >= r->ndim - r->k && t->shape[i] != 1) row = false;
    }
    if (per_row) *per_row = row;
    return true;
}

bool em_ir_rows_result(const em_ir_rows *r, const em_type *t) {
    int no = r->ndim - r->k;
    if (em_shape_eq(t->shape, t->ndim, r->shape, r->ndim)) return true;
    if ((t->ndim != no && t->ndim != r->ndim) || !em_shape_eq(t->shape, no, r->shape, no)) return false;
    for (int d = no; d < t->ndim; d++)
        if (t->shape[d] != 1) return false;
    return true;
}

void em_ir_count_uses(const em_ir_graph *g, int *counts) {
    memset(counts, 0, (size_t)g->n_values * sizeof *counts);
    count_block(g->body, counts);
}

em_ir_loc em_ir_loc_merge(em_ir_loc a, em_ir_loc b) {
    if (!a.file) return b;
    if (!b.file || strcmp(a.file, b.file) != 0) return a;
    em_ir_loc r = a;
    if (b.line < r.line) r.line = b.line;
    if (b.line_end > r.line_end) r.line_end = b.line_end;
    return r;
}

void em_ir_walk(const em_ir_block *b, void (*fn)(const em_ir_node *, void *), void *ctx) {
    for (const em_ir_node *n = b->first; n; n = n->next) {
        fn(n, ctx);
        if (n->region) em_ir_walk(n->region, fn, ctx);
    }
}

/* ---- printer numbering ---- */

static void number_block(const em_ir_block *b, int *num, int *next) {
    for (int i = 0; i < b->n_params; i++)
        num[b->params[i]->id] = b->params[i]->name ? -1 : (*next)++;
    for (const em_ir_node *n = b->first; n; n = n->next) {
        for (int i = 0; i < n->n_out; i++) num[n->out[i]->id] = n->out[i]->name ? -1 : (*next)++;
        if (n->region) number_block(n->region, num, next);
    }
}

void em_ir_number_values(const em_ir_graph *g, int *num) {
    int next = 0;
    for (int i = 0; i < g->n_values; i++) num[i] = -2; /* not in the graph any more */
    number_block(g->body, num, &next);
}

const char *em_ir_value_ref(const em_ir_value *v, const int *num, char *buf) {
    if (v->name)
        snprintf(buf, 64, "%%%s", v->name);
    else if (num && num[v->id] >= 0)
        snprintf(buf, 64, "%%%d", num[v->id]);
    else
        snprintf(buf, 64, "%%<value %d>", v->id);
    return buf;
}

/* ---- string map ---- */

void em_strmap_init(em_strmap *m) { memset(m, 0, sizeof *m); }

void em_strmap_free(em_strmap *m) {
    free(m->keys);
    free(m->lens);
    free(m->vals);
    em_strmap_init(m);
}

static size_t hash(const char *k, size_t len) {
    size_t h = 1469598103934665603ull;
    for (size_t i = 0; i < len; i++) h = (h ^ (unsigned char)k[i]) * 1099511628211ull;
    return h;
}

void *em_strmap_get(const em_strmap *m, const char *k, size_t len) {
    if (!m->cap) return NULL;
    for (size_t i = hash(k, len) & (m->cap - 1);; i = (i + 1) & (m->cap - 1)) {
        if (!m->keys[i]) return NULL;
        if (m->lens[i] == len && memcmp(m->keys[i], k, len) == 0) return m->vals[i];
    }
}

bool em_strmap_put(em_strmap *m, const char *k, size_t len, void *v) {
    if ((m->len + 1) * 2 > m->cap) {
        em_strmap bigger;
        bigger.cap = m->cap ? m->cap * 2 : 64;
        bigger.len = 0;
        bigger.keys = calloc(bigger.cap, sizeof *bigger.keys);
        bigger.lens = calloc(bigger.cap, sizeof *bigger.lens);
        bigger.vals = calloc(bigger.cap, sizeof *bigger.vals);
        if (!bigger.keys || !bigger.lens || !bigger.vals) {
            em_strmap_free(&bigger);
            return false;
        }
        for (size_t i = 0; i < m->cap; i++)
            if (m->keys[i]) em_strmap_put(&bigger, m->keys[i], m->lens[i], m->vals[i]);
        em_strmap_free(m);
        *m = bigger;
    }
    size_t i = hash(k, len) & (m->cap - 1);
    while (m->keys[i] && !(m->lens[i] == len && memcmp(m->keys[i], k, len) == 0))
        i = (i + 1) & (m->cap - 1);
    if (!m->keys[i]) m->len++;
    m->keys[i] = k;
    m->lens[i] = len;
    m->vals[i] = v;
    return true;
}
