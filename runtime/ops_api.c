/*
 * ops_api.c - the short user-facing functions (em_add, em_sum, ...) over
 * em_op_run().
 *
 * They turn convenient arguments into the explicit attributes the op table
 * and the IR use: negative dims wrapped, dim lists sorted, -1 in shapes
 * resolved. So a traced graph never contains an unresolved -1.
 */
#include <string.h>

#include "kernels.h"

static em_tensor *run1(em_op op, em_tensor *const *in, int n, const em_attrs *a) {
    em_tensor *out = NULL;
    return em_op_run(op, in, n, a, &out, 1) == EM_OK ? out : NULL;
}

em_tensor *em_unary(em_op op, em_tensor *a) {
    em_attrs at;
    memset(&at, 0, sizeof at);
    return run1(op, &a, 1, &at);
}

em_tensor *em_binary(em_op op, em_tensor *a, em_tensor *b) {
    em_attrs at;
    memset(&at, 0, sizeof at);
    em_tensor *in[2] = {a, b};
    return run1(op, in, 2, &at);
}

em_tensor *em_neg(em_tensor *a) { return em_unary(EM_OP_NEG, a); }
em_tensor *em_exp(em_tensor *a) { return em_unary(EM_OP_EXP, a); }
em_tensor *em_log(em_tensor *a) { return em_unary(EM_OP_LOG, a); }
em_tensor *em_tanh(em_tensor *a) { return em_unary(EM_OP_TANH, a); }
em_tensor *em_sigmoid(em_tensor *a) { return em_unary(EM_OP_SIGMOID, a); }
em_tensor *em_relu(em_tensor *a) { return em_unary(EM_OP_RELU, a); }
em_tensor *em_add(em_tensor *a, em_tensor *b) { return em_binary(EM_OP_ADD, a, b); }
em_tensor *em_sub(em_tensor *a, em_tensor *b) { return em_binary(EM_OP_SUB, a, b); }
em_tensor *em_mul(em_tensor *a, em_tensor *b) { return em_binary(EM_OP_MUL, a, b); }
em_tensor *em_div(em_tensor *a, em_tensor *b) { return em_binary(EM_OP_DIV, a, b); }
em_tensor *em_maximum(em_tensor *a, em_tensor *b) { return em_binary(EM_OP_MAXIMUM, a, b); }
em_tensor *em_matmul(em_tensor *a, em_tensor *b) { return em_binary(EM_OP_MATMUL, a, b); }

em_tensor *em_pow(em_tensor *a, em_tensor *b) {
    /* PyTorch refuses a negative Python-number exponent on integer tensors
     * (the result would silently be 0). */
    if (a && b && b->is_wrapped_number && !em_dtype_is_float(a->dtype) &&
        !em_dtype_is_float(b->dtype) && em_tensor_get_f64(b, 0) < 0) {
        em_error(EM_ERR_VALUE, "pow: integers to negative integer powers are not allowed");
        return NULL;
    }
    return em_binary(EM_OP_POW, a, b);
}

em_tensor *em_cast(em_tensor *a, em_dtype dtype) {
    em_attrs at;
    memset(&at, 0, sizeof at);
    at.dtype = dtype;
    return run1(EM_OP_CAST, &a, 1, &at);
}

/* dims -> sorted, non-negative, unique; none means all. */
static em_status reduce_dims(const char *op, const em_tensor *a, const int64_t *dims, int n,
                             em_attrs *at) {
    if (n > EM_MAX_DIMS) return em_error(EM_ERR_VALUE, "%s: too many dims", op);
    if (n == 0 || !dims) {
        at->n_dims = a->ndim;
        for (int i = 0; i < a->ndim; i++) at->dims[i] = i;
        return EM_OK;
    }
    bool seen[EM_MAX_DIMS] = {false};
    for (int i = 0; i < n; i++) {
        int d;
        em_status st = em_wrap_dim(op, dims[i], a->ndim, &d);
        if (st != EM_OK) return st;
        if (seen[d])
            return em_error(EM_ERR_VALUE, "%s: dim %d appears multiple times in the list of dims",
                            op, d);
        seen[d] = true;
    }
    at->n_dims = 0; /* (dim 0 or -1 of a 0-d tensor reduces nothing) */
    for (int d = 0; d < a->ndim; d++)
        if (seen[d]) at->dims[at->n_dims++] = d;
    return EM_OK;
}

static em_tensor *reduce(em_op op, em_tensor *a, const int64_t *dims, int n, bool keepdim) {
    em_attrs at;
    memset(&at, 0, sizeof at);
    if (!a || reduce_dims(em_op_name(op), a, dims, n, &at) != EM_OK) return NULL;
    at.keepdim = keepdim;
    return run1(op, &a, 1, &at);
}

em_tensor *em_sum(em_tensor *a, const int64_t *dims, int n, bool keepdim) {
    return reduce(EM_OP_SUM, a, dims, n, keepdim);
}
em_tensor *em_mean(em_tensor *a, const int64_t *dims, int n, bool keepdim) {
    return reduce(EM_OP_MEAN, a, dims, n, keepdim);
}

/* Fills at->shape with the op's inferred result shape (resolving -1). */
static em_status resolve_shape(em_op op, em_tensor *a, const int64_t *shape, int n, em_attrs *at) {
    if (n < 0 || n > EM_MAX_DIMS)
        return em_error(EM_ERR_VALUE, "%s: at most %d dimensions, got %d", em_op_name(op),
                        EM_MAX_DIMS, n);
    at->n_shape = n;
    if (n) memcpy(at->shape, shape, (size_t)n * sizeof *shape);
    em_type in = em_tensor_type(a), out;
    em_status st = em_op_infer(op, &in, 1, at, &out, 1);
    if (st != EM_OK) return st;
    memcpy(at->shape, out.shape, sizeof at->shape);
    return EM_OK;
}

em_tensor *em_reshape(em_tensor *a, const int64_t *shape, int n) {
    em_attrs at;
    memset(&at, 0, sizeof at);
    if (!a || resolve_shape(EM_OP_RESHAPE, a, shape, n, &at) != EM_OK) return NULL;
    return run1(EM_OP_RESHAPE, &a, 1, &at);
}

em_tensor *em_view(em_tensor *a, const int64_t *shape, int n) {
    em_attrs at;
    memset(&at, 0, sizeof at);
    if (!a || resolve_shape(EM_OP_RESHAPE, a, shape, n, &at) != EM_OK) return NULL;
    int64_t s[EM_MAX_DIMS], st[EM_MAX_DIMS];
    int nd;
    if (!em_view_geometry(EM_OP_RESHAPE, a->shape, a->strides, a->ndim, &at, s, st, &nd)) {
        em_error(EM_ERR_SHAPE,
                 "view: size is not compatible with the input's size and stride (at least one "
                 "dimension spans across two contiguous subspaces); use .reshape(...) instead");
        return NULL;
    }
    return run1(EM_OP_RESHAPE, &a, 1, &at);
}

em_tensor *em_permute(em_tensor *a, const int64_t *dims, int n) {
    em_attrs at;
    memset(&at, 0, sizeof at);
    if (!a) return NULL;
    if (n != a->ndim) {
        em_error(EM_ERR_VALUE,
                 "permute: number of dims don't match (the input has %d dims, %d were given)",
                 a->ndim, n);
        return NULL;
    }
    at.n_dims = n;
    for (int i = 0; i < n; i++) {
        int d;
        if (em_wrap_dim("permute", dims[i], a->ndim, &d) != EM_OK) return NULL;
        at.dims[i] = d;
    }
    return run1(EM_OP_PERMUTE, &a, 1, &at);
}

em_tensor *em_transpose(em_tensor *a, int64_t d0, int64_t d1) {
    if (!a) return NULL;
    int x, y;
    if (em_wrap_dim("transpose", d0, a->ndim, &x) != EM_OK ||
        em_wrap_dim("transpose", d1, a->ndim, &y) != EM_OK)
        return NULL;
    if (a->ndim < 2) { /* transposing a 0-d or 1-d tensor is the identity */
        int64_t perm[1] = {0};
        return em_permute(a, perm, a->ndim);
    }
    int64_t perm[EM_MAX_DIMS];
    for (int i = 0; i < a->ndim; i++) perm[i] = i;
    perm[x] = y;
    perm[y] = x;
    return em_permute(a, perm, a->ndim);
}

em_tensor *em_expand(em_tensor *a, const int64_t *shape, int n) {
    em_attrs at;
    memset(&at, 0, sizeof at);
    if (!a || resolve_shape(EM_OP_EXPAND, a, shape, n, &at) != EM_OK) return NULL;
    return run1(EM_OP_EXPAND, &a, 1, &at);
}

em_tensor *em_contiguous(em_tensor *a) { return em_unary(EM_OP_CONTIGUOUS, a); }

static em_tensor *factory(em_op op, const int64_t *shape, int n, em_dtype dtype, double value,
                          int64_t value_i) {
    em_attrs at;
    memset(&at, 0, sizeof at);
    if (n < 0 || n > EM_MAX_DIMS) {
        em_error(EM_ERR_VALUE, "%s: at most %d dimensions, got %d", em_op_name(op), EM_MAX_DIMS,
                 n);
        return NULL;
    }
    at.n_shape = n;
    if (n) memcpy(at.shape, shape, (size_t)n * sizeof *shape);
    at.dtype = dtype;
    at.value = value;
    at.value_i = value_i;
    return run1(op, NULL, 0, &at);
}

/* A float fill value for an integer tensor: truncated, like PyTorch; NaN and
 * values out of range are refused. */
static bool float_to_i64(double v, int64_t *out) {
    if (!(v >= -9.2233720368547758e18 && v < 9.2233720368547758e18)) {
        em_error(EM_ERR_VALUE, "full: value %g cannot be converted to int64 without overflow", v);
        return false;
    }
    *out = (int64_t)v;
    return true;
}

em_tensor *em_full(const int64_t *shape, int n, double value, em_dtype dtype) {
    int64_t vi = 0;
    if (dtype == EM_DTYPE_I64 && !float_to_i64(value, &vi)) return NULL;
    return factory(EM_OP_FULL, shape, n, dtype, value, vi);
}
em_tensor *em_full_i64(const int64_t *shape, int n, int64_t value, em_dtype dtype) {
    return factory(EM_OP_FULL, shape, n, dtype, (double)value, value);
}
em_tensor *em_zeros(const int64_t *shape, int n, em_dtype dtype) {
    return factory(EM_OP_FULL, shape, n, dtype, 0.0, 0);
}
em_tensor *em_ones(const int64_t *shape, int n, em_dtype dtype) {
    return factory(EM_OP_FULL, shape, n, dtype, 1.0, 1);
}
em_tensor *em_rand(const int64_t *shape, int n, em_dtype dtype) {
    return factory(EM_OP_RAND, shape, n, dtype, 0.0, 0);
}
em_tensor *em_randn(const int64_t *shape, int n, em_dtype dtype) {
    return factory(EM_OP_RANDN, shape, n, dtype, 0.0, 0);
}

em_tensor *em_arange(double start, double end, double step, em_dtype dtype) {
    em_attrs at;
    memset(&at, 0, sizeof at);
    at.dtype = dtype;
    at.start = start;
    at.end = end;
    at.step = step;
    int64_t len;
    if (em_arange_length(start, end, step, &len) != EM_OK) return NULL;
    at.n_shape = 1;
    at.shape[0] = len;
    return run1(EM_OP_ARANGE, NULL, 0, &at);
}
