/*
 * op_table.c - ops.def expanded into the op table: each op's name, kind,
 * arity, promotion rule, flags, attributes, compute dtypes and reduction.
 * Data only: what runs an op is the dispatcher's (dispatch.c), so every
 * layer can read the table without depending on the kernels.
 */
#include <stddef.h>
#include <string.h>

#include "ember/ops.h"

#define DTYPE_BIT(unused, S, T, sfx) | (1u << EM_DTYPE_##S)
/* The dtypes column: a dtype class for elementwise rows, a reduction's
 * rule for REDUCE rows. */
#define DTYPES_FOR(kind, dts) DTYPES_FOR_##kind(dts)
#define DTYPES_FOR_EW(dts) 0u EM_FOR_DTYPES_##dts(DTYPE_BIT, _)
#define DTYPES_FOR_UNARY DTYPES_FOR_EW
#define DTYPES_FOR_BINARY DTYPES_FOR_EW
#define DTYPES_FOR_TERNARY DTYPES_FOR_EW
#define DTYPES_FOR_CAST DTYPES_FOR_EW
#define DTYPES_FOR_REDUCE(dts) 0u
#define DTYPES_FOR_SCAN DTYPES_FOR_EW
#define DTYPES_FOR_MATMUL DTYPES_FOR_EW
#define DTYPES_FOR_VIEW DTYPES_FOR_EW
#define DTYPES_FOR_COPY DTYPES_FOR_EW
#define DTYPES_FOR_FACTORY DTYPES_FOR_EW
#define DTYPES_FOR_RANDOM DTYPES_FOR_EW
#define DTYPES_FOR_FUSED DTYPES_FOR_EW
#define DTYPES_FOR_OTHER DTYPES_FOR_EW
#define REDUCTION_FOR(kind, dts) REDUCTION_FOR_##kind(dts)
#define REDUCTION_FOR_REDUCE(dts) EM_RED_##dts
#define REDUCTION_FOR_UNARY(dts) EM_RED_NONE
#define REDUCTION_FOR_BINARY REDUCTION_FOR_UNARY
#define REDUCTION_FOR_TERNARY REDUCTION_FOR_UNARY
#define REDUCTION_FOR_CAST REDUCTION_FOR_UNARY
#define REDUCTION_FOR_SCAN REDUCTION_FOR_UNARY
#define REDUCTION_FOR_MATMUL REDUCTION_FOR_UNARY
#define REDUCTION_FOR_VIEW REDUCTION_FOR_UNARY
#define REDUCTION_FOR_COPY REDUCTION_FOR_UNARY
#define REDUCTION_FOR_FACTORY REDUCTION_FOR_UNARY
#define REDUCTION_FOR_RANDOM REDUCTION_FOR_UNARY
#define REDUCTION_FOR_FUSED REDUCTION_FOR_UNARY
#define REDUCTION_FOR_OTHER REDUCTION_FOR_UNARY
static const em_op_info op_table[EM_OP_COUNT] = {
#define EM_OP(E, n, kind, ni, no, dts, pr, fl, at, gr)                                                 \
    [EM_OP_##E] = {#n,                                                                             \
                   EM_KIND_##kind,                                                                 \
                   ni,                                                                             \
                   no,                                                                             \
                   EM_PROMOTE_##pr,                                                                \
                   fl,                                                                             \
                   at,                                                                             \
                   DTYPES_FOR(kind, dts),                                                          \
                   REDUCTION_FOR(kind, dts)},
#include "ember/ops.def"
#undef EM_OP
};

const em_op_info *em_op_get(em_op op) { return &op_table[op]; }

bool em_op_from_name(const char *name, size_t len, em_op *out) {
    for (int i = 0; i < EM_OP_COUNT; i++)
        if (strlen(op_table[i].name) == len && memcmp(op_table[i].name, name, len) == 0) {
            *out = (em_op)i;
            return true;
        }
    return false;
}

const char *em_attr_name(int bit) {
    static const char *const names[EM_A_COUNT] = {
#define X(E, n, k) #n,
        EM_ATTR_LIST(X)
#undef X
    };
    return bit >= 0 && bit < EM_A_COUNT ? names[bit] : "?";
}

#define FIELD_INTS(n) {EM_ATTR_INTS, offsetof(em_attrs, n), offsetof(em_attrs, n_##n)}
#define FIELD_INT(n) {EM_ATTR_INT, offsetof(em_attrs, n), 0}
#define FIELD_BOOL(n) {EM_ATTR_BOOL, offsetof(em_attrs, n), 0}
#define FIELD_DOUBLE(n) {EM_ATTR_DOUBLE, offsetof(em_attrs, n), 0}
#define FIELD_SPECIAL(n) {EM_ATTR_SPECIAL, 0, 0}

const em_attr_field *em_attr_field_of(int bit) {
    static const em_attr_field fields[EM_A_COUNT] = {
#define X(E, n, k) FIELD_##k(n),
        EM_ATTR_LIST(X)
#undef X
    };
    static const em_attr_field none = {EM_ATTR_SPECIAL, 0, 0};
    return bit >= 0 && bit < EM_A_COUNT ? &fields[bit] : &none;
}
