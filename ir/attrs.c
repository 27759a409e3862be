/*
 * attrs.c - an IR node's attributes, stored by its op's schema.
 *
 * em_attrs holds every attribute any op has (over 700 bytes); an IR node
 * keeps only those its op's schema names (em_op_info.attrs, EM_ATTR_LIST's
 * kinds), packed in the graph's arena: an elementwise node none, a
 * reduction its dims and keepdim. em_ir_attrs unpacks them into a caller's
 * em_attrs, every other field zero.
 *
 * Fields outside the schema are not kept: callers fill em_attrs for a
 * family of ops at once (every reduction gets a correction and an ord,
 * every sliding window a groups), and the schema is what the op means, as
 * IR text, which prints and parses by the same schema, has always said. An
 * op whose kernel or inference read a field its schema lacks would compute
 * otherwise compiled than eagerly: the op harness's compiled-against-eager
 * test, over every row of the table, is what shows none does.
 *
 * Packed form, attribute by attribute in the schema's bit order: INTS an
 * int32 count and its int64s; INT an int64; BOOL a byte; DOUBLE a double;
 * SPECIAL: shape as INTS, dtype an int32, value a double and an int64 (the
 * exact integer fill), alpha a double. Unaligned: read with memcpy.
 */
#include <string.h>

#include "ir_internal.h"

#define FIELD(a, f) ((char *)(a) + (f)->offset)
#define CFIELD(a, f) ((const char *)(a) + (f)->offset)

/* How many bytes attribute `bit` of a takes packed. */
static size_t packed_size(int bit, const em_attrs *a) {
    const em_attr_field *f = em_attr_field_of(bit);
    int n;
    switch (f->kind) {
    case EM_ATTR_INTS:
        em_attr_ints(a, f, &n);
        return sizeof(int32_t) + (size_t)n * sizeof(int64_t);
    case EM_ATTR_INT: return sizeof(int64_t);
    case EM_ATTR_BOOL: return 1;
    case EM_ATTR_DOUBLE: return sizeof(double);
    case EM_ATTR_SPECIAL: break;
    }
    switch (bit) {
    case EM_A_BIT_SHAPE: return sizeof(int32_t) + (size_t)a->n_shape * sizeof(int64_t);
    case EM_A_BIT_DTYPE: return sizeof(int32_t);
    case EM_A_BIT_VALUE: return sizeof(double) + sizeof(int64_t);
    case EM_A_BIT_ALPHA: return sizeof(double);
    default: return 0;
    }
}

static unsigned char *put(unsigned char *p, const void *v, size_t n) {
    memcpy(p, v, n);
    return p + n;
}
static const unsigned char *get(const unsigned char *p, void *v, size_t n) {
    memcpy(v, p, n);
    return p + n;
}

static unsigned char *put_ints(unsigned char *p, const int64_t *v, int n) {
    int32_t c = n;
    p = put(p, &c, sizeof c);
    return put(p, v, (size_t)n * sizeof *v);
}
static const unsigned char *get_ints(const unsigned char *p, int64_t *v, int *n) {
    int32_t c;
    p = get(p, &c, sizeof c);
    *n = c;
    return get(p, v, (size_t)c * sizeof *v);
}

static unsigned char *pack_one(unsigned char *p, int bit, const em_attrs *a) {
    const em_attr_field *f = em_attr_field_of(bit);
    int n;
    switch (f->kind) {
    case EM_ATTR_INTS: {
        const int64_t *v = em_attr_ints(a, f, &n);
        return put_ints(p, v, n);
    }
    case EM_ATTR_INT: return put(p, CFIELD(a, f), sizeof(int64_t));
    case EM_ATTR_BOOL: return put(p, CFIELD(a, f), 1);
    case EM_ATTR_DOUBLE: return put(p, CFIELD(a, f), sizeof(double));
    case EM_ATTR_SPECIAL: break;
    }
    int32_t dt = (int32_t)a->dtype;
    switch (bit) {
    case EM_A_BIT_SHAPE: return put_ints(p, a->shape, a->n_shape);
    case EM_A_BIT_DTYPE: return put(p, &dt, sizeof dt);
    case EM_A_BIT_VALUE: return put(put(p, &a->value, sizeof a->value), &a->value_i, sizeof a->value_i);
    case EM_A_BIT_ALPHA: return put(p, &a->alpha, sizeof a->alpha);
    default: return p;
    }
}

static const unsigned char *unpack_one(const unsigned char *p, int bit, em_attrs *a) {
    const em_attr_field *f = em_attr_field_of(bit);
    switch (f->kind) {
    case EM_ATTR_INTS: return get_ints(p, (int64_t *)(void *)FIELD(a, f), (int *)(void *)((char *)a + f->count));
    case EM_ATTR_INT: return get(p, FIELD(a, f), sizeof(int64_t));
    case EM_ATTR_BOOL: return get(p, FIELD(a, f), 1);
    case EM_ATTR_DOUBLE: return get(p, FIELD(a, f), sizeof(double));
    case EM_ATTR_SPECIAL: break;
    }
    int32_t dt;
    switch (bit) {
    case EM_A_BIT_SHAPE: return get_ints(p, a->shape, &a->n_shape);
    case EM_A_BIT_DTYPE:
        p = get(p, &dt, sizeof dt);
        a->dtype = (em_dtype)dt;
        return p;
    case EM_A_BIT_VALUE: return get(get(p, &a->value, sizeof a->value), &a->value_i, sizeof a->value_i);
    case EM_A_BIT_ALPHA: return get(p, &a->alpha, sizeof a->alpha);
    default: return p;
    }
}

em_status em_ir_set_attrs(em_ir_graph *g, em_ir_node *n, const em_attrs *a) {
    uint64_t mask = em_op_get(n->op)->attrs;
    size_t size = 0;
    for (int bit = 0; a && bit < EM_A_COUNT; bit++)
        if (mask & EM_A_MASK(bit)) size += packed_size(bit, a);
    unsigned char *p = NULL;
    if (size && !(p = em_ir_alloc(g, size))) return em_error(EM_ERR_NOMEM, "out of memory for IR attributes");
    unsigned char *end = p;
    for (int bit = 0; size && bit < EM_A_COUNT; bit++)
        if (mask & EM_A_MASK(bit)) end = pack_one(end, bit, a);
    n->attr_data = p;
    n->attr_size = (uint32_t)size;
    return EM_OK;
}

const em_attrs *em_ir_attrs(const em_ir_node *n, em_attrs *out) {
    memset(out, 0, sizeof *out);
    const unsigned char *p = n->attr_data;
    uint64_t mask = em_op_get(n->op)->attrs;
    for (int bit = 0; p && bit < EM_A_COUNT; bit++)
        if (mask & EM_A_MASK(bit)) p = unpack_one(p, bit, out);
    return out;
}
