/*
 * cse.c - common subexpression elimination: of two identical pure nodes
 * (same op, same inputs, same attributes, same result types) in the body,
 * the later one goes and its uses read the earlier one's results.
 *
 * Two reductions of the same input that differ only in keepdim compute the
 * same values (BatchNorm's backward takes the mean again, kept, that its
 * forward took flat): the later one becomes a reshape (a view) of the
 * earlier one's result.
 *
 * Random ops are not pure and never merge (two draws are two draws); fused
 * nodes are left alone (their regions would have to be compared). Two
 * nodes are not merged where both results may reach the graph's results:
 * the caller would get one tensor twice where eager gives two (writing
 * into one would change the other).
 */
#include <stdlib.h>
#include <string.h>

#include "ember/passes.h"

_Static_assert(sizeof(double) == sizeof(int64_t), "cse compares INT and DOUBLE attributes as 8 bytes");

/* Are the attributes op reads equal? Doubles by their bits: -0.0 is not
 * 0.0, and NaN equals itself. */
static bool same_attrs(em_op op, const em_attrs *a, const em_attrs *b) {
    uint64_t m = em_op_get(op)->attrs;
    if (em_op_get(op)->kind == EM_KIND_REDUCE) m &= ~EM_A_MASK(EM_A_BIT_KEEPDIM); /* (see the header) */
    for (int bit = 0; bit < EM_A_COUNT; bit++) {
        if (!(m & EM_A_MASK(bit))) continue;
        const em_attr_field *f = em_attr_field_of(bit);
        const char *fa = (const char *)a + f->offset, *fb = (const char *)b + f->offset;
        int na, nb;
        switch (f->kind) {
        case EM_ATTR_INTS: {
            const int64_t *va = em_attr_ints(a, f, &na), *vb = em_attr_ints(b, f, &nb);
            if (na != nb || memcmp(va, vb, (size_t)na * sizeof *va)) return false;
            break;
        }
        case EM_ATTR_INT:
        case EM_ATTR_DOUBLE:
            if (memcmp(fa, fb, sizeof(int64_t))) return false; /* (both 8 bytes) */
            break;
        case EM_ATTR_BOOL:
            if (*(const bool *)fa != *(const bool *)fb) return false;
            break;
        case EM_ATTR_SPECIAL:
            if (bit == EM_A_BIT_SHAPE &&
                (a->n_shape != b->n_shape || memcmp(a->shape, b->shape, (size_t)a->n_shape * sizeof *a->shape)))
                return false;
            if (bit == EM_A_BIT_DTYPE && a->dtype != b->dtype) return false;
            if (bit == EM_A_BIT_VALUE && (memcmp(&a->value, &b->value, sizeof a->value) || a->value_i != b->value_i))
                return false;
            if (bit == EM_A_BIT_ALPHA && em_matmul_alpha(a) != em_matmul_alpha(b)) return false;
            break;
        }
    }
    return true;
}

/* Do a and b differ only in a reduction's keepdim? */
static bool kept_twin(const em_ir_node *a, const em_ir_node *b) {
    return em_op_get(a->op)->kind == EM_KIND_REDUCE && a->n_out == 1 && EM_IR_ATTRS(a)->keepdim != EM_IR_ATTRS(b)->keepdim;
}

static bool same_node(const em_ir_node *a, const em_ir_node *b) {
    if (a->op != b->op || a->n_in != b->n_in || a->n_out != b->n_out) return false;
    for (int i = 0; i < a->n_in; i++)
        if (a->in[i] != b->in[i]) return false;
    if (em_op_get(a->op)->kind == EM_KIND_REDUCE && EM_IR_ATTRS(a)->keepdim != EM_IR_ATTRS(b)->keepdim)
        return a->n_out == 1 && a->out[0]->type.dtype == b->out[0]->type.dtype &&
               same_attrs(a->op, EM_IR_ATTRS(a), EM_IR_ATTRS(b));
    for (int o = 0; o < a->n_out; o++)
        if (!em_type_eq(&a->out[o]->type, &b->out[o]->type)) return false;
    /* (packed by the op's schema, doubles by their bits: what same_attrs
     * compares, without unpacking) */
    return a->attr_size == b->attr_size && (!a->attr_size || !memcmp(a->attr_data, b->attr_data, a->attr_size));
}

/* What replaces n's result: first's, or for a keepdim twin a reshape of
 * it to n's shape, made before n (NULL: out of memory). */
static em_ir_value *merged_value(em_ir_node *first, em_ir_node *n) {
    if (!kept_twin(first, n)) return first->out[0];
    em_attrs a;
    memset(&a, 0, sizeof a);
    a.n_shape = n->out[0]->type.ndim;
    memcpy(a.shape, n->out[0]->type.shape, (size_t)a.n_shape * sizeof a.shape[0]);
    em_ir_node *r = em_ir_build_before(n, EM_OP_RESHAPE, &first->out[0], 1, &a, n->loc);
    return r ? r->out[0] : NULL;
}

static bool mergeable(const em_ir_node *n) {
    return (em_op_get(n->op)->flags & EM_F_PURE) && !n->region;
}

/* A hash of what same_node compares first: op and inputs. */
static size_t hash_node(const em_ir_node *n) {
    size_t h = (size_t)n->op * 0x9E3779B97F4A7C15ull;
    for (int i = 0; i < n->n_in; i++) h = (h ^ (size_t)n->in[i]->id) * 0x100000001B3ull;
    return h;
}

em_status em_pass_cse(em_ir_graph *g, em_strbuf *report) {
    int nv = g->n_values ? g->n_values : 1, n_nodes = 0;
    for (const em_ir_node *n = g->body->first; n; n = n->next) n_nodes++;
    size_t cap = 16;
    while (cap < (size_t)n_nodes * 2) cap *= 2;
    em_ir_node **table = calloc(cap, sizeof *table); /* open addressing over earlier nodes */
    bool *from_input = malloc((size_t)nv * sizeof *from_input), *to_result = malloc((size_t)nv * sizeof *to_result);
    if (!table || !from_input || !to_result) {
        free(table);
        free(from_input);
        free(to_result);
        return em_error(EM_ERR_NOMEM, "out of memory in cse");
    }
    em_ir_shared_memory(g, from_input, to_result);
    int merged = 0;
    for (em_ir_node *n = g->body->first, *next; n; n = next) {
        next = n->next;
        if (!mergeable(n)) continue;
        size_t h = hash_node(n) & (cap - 1);
        while (table[h] && !same_node(table[h], n)) h = (h + 1) & (cap - 1);
        em_ir_node *first = table[h];
        if (!first) {
            table[h] = n;
            continue;
        }
        bool both_results = false;
        for (int o = 0; o < n->n_out; o++)
            both_results |= to_result[n->out[o]->id] && (to_result[first->out[o]->id] || from_input[first->out[o]->id]);
        if (both_results) continue;
        if (kept_twin(first, n)) {
            em_ir_value *v = merged_value(first, n);
            if (!v) {
                free(table);
                free(from_input);
                free(to_result);
                return em_error_prefix(em_last_status(), "cse");
            }
            em_ir_replace_uses(g->body, n->out[0], v);
            to_result[first->out[0]->id] |= to_result[n->out[0]->id];
            em_ir_remove(n);
            merged++;
            continue;
        }
        for (int o = 0; o < n->n_out; o++) {
            em_ir_replace_uses(g->body, n->out[o], first->out[o]);
            to_result[first->out[o]->id] |= to_result[n->out[o]->id];
        }
        em_ir_remove(n);
        merged++;
    }
    free(table);
    free(from_input);
    free(to_result);
    if (report && merged) em_strbuf_printf(report, "cse: %d duplicate node%s merged\n", merged, merged == 1 ? "" : "s");
    return EM_OK;
}
