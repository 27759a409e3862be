/*
 * ops_api.c - the short user-facing functions (em_add, em_sum, ...) over
 * em_op_run().
 *
 * They turn convenient arguments into the explicit attributes the op table
 * and the IR use: negative dims wrapped, dim lists sorted, -1 in shapes
 * resolved. So a traced graph never contains an unresolved -1.
 */
#include <string.h>

#include "ember/alloc.h"
#include "kernels.h"
#include "memory.h"

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

em_tensor *em_ternary(em_op op, em_tensor *a, em_tensor *b, em_tensor *c) {
    em_attrs at;
    memset(&at, 0, sizeof at);
    em_tensor *in[3] = {a, b, c};
    return run1(op, in, 3, &at);
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

em_tensor *em_pow(em_tensor *a, em_tensor *b) { return em_binary(EM_OP_POW, a, b); }

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

em_tensor *em_reduce(em_op op, em_tensor *a, const int64_t *dims, int n_dims, bool keepdim,
                     double correction, double ord) {
    em_attrs at;
    memset(&at, 0, sizeof at);
    if (!a || reduce_dims(em_op_name(op), a, dims, n_dims, &at) != EM_OK) return NULL;
    at.keepdim = keepdim;
    at.correction = correction;
    at.ord = ord;
    return run1(op, &a, 1, &at);
}

em_tensor *em_scan(em_op op, em_tensor *a, int64_t dim) {
    em_attrs at;
    memset(&at, 0, sizeof at);
    int d;
    if (!a || em_wrap_dim(em_op_name(op), dim, a->ndim, &d) != EM_OK) return NULL;
    at.n_dims = 1;
    at.dims[0] = a->ndim ? d : 0;
    return run1(op, &a, 1, &at);
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
    int64_t s[EM_MAX_DIMS], st[EM_MAX_DIMS], off;
    int nd;
    if (!em_view_geometry(EM_OP_RESHAPE, a->shape, a->strides, a->ndim, &at, s, st, &nd, &off)) {
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
em_tensor *em_clone(em_tensor *a) { return a ? em_cast(a, a->dtype) : NULL; }

/* t's elements, contiguous, copied between the memories of two devices
 * that hold data (through the host where neither is it). */
static em_tensor *copy_across(em_tensor *t, em_device d) {
    const em_device_memory *from = em_device_memory_of(t->device), *to = em_device_memory_of(d);
    char a[16], b[16];
    if (!from || !to) {
        em_error(EM_ERR_NOT_IMPLEMENTED, "to(): copies from %s to %s are not implemented in this build",
                 em_device_str(t->device, a), em_device_str(d, b));
        return NULL;
    }
    em_tensor *c = em_contiguous(t); /* (on t's device) */
    em_tensor *r = c ? em_tensor_empty(t->shape, t->ndim, t->dtype, d) : NULL;
    size_t nbytes = (size_t)t->numel * em_dtype_size(t->dtype);
    em_status st = r ? EM_OK : em_last_status();
    if (st == EM_OK && nbytes) {
        if (t->device.type == EM_DEVICE_CPU) {
            st = to->from_host(r->device.index, em_tensor_data(r), em_tensor_data(c), nbytes);
        } else if (d.type == EM_DEVICE_CPU) {
            st = from->to_host(c->device.index, em_tensor_data(r), em_tensor_data(c), nbytes);
        } else { /* two devices: through the host */
            em_tensor *h = em_tensor_empty(t->shape, t->ndim, t->dtype, em_cpu());
            st = h ? from->to_host(c->device.index, em_tensor_data(h), em_tensor_data(c), nbytes) : em_last_status();
            if (st == EM_OK) st = to->from_host(r->device.index, em_tensor_data(r), em_tensor_data(h), nbytes);
            em_tensor_release(h);
        }
    }
    em_tensor_release(c);
    if (st != EM_OK) {
        em_tensor_release(r);
        return NULL;
    }
    return r;
}

em_tensor *em_to_device(em_tensor *t, em_device d) {
    if (d.type == EM_DEVICE_CUDA && d.index < 0) d.index = 0; /* ("cuda": cuda:0, as em_storage_new says) */
    if (em_device_eq(t->device, d)) {
        em_tensor_retain(t);
        return t;
    }
    if (!em_tensor_has_data(t)) {
        em_error(EM_ERR_NOT_IMPLEMENTED, "Cannot copy out of meta tensor; no data!");
        return NULL;
    }
    if (d.type != EM_DEVICE_META) return copy_across(t, d);
    /* Strides kept where they cover the memory densely (PyTorch's
     * preserve_format), else row-major. */
    em_tensor *r = em_tensor_empty(t->shape, t->ndim, t->dtype, d);
    if (r && em_tensor_is_dense(t) && t->numel > 0) memcpy(r->strides, t->strides, sizeof r->strides);
    return r;
}

bool em_equal_bits(em_tensor *a, em_tensor *b) {
    if (!em_tensor_has_data(a) || !em_tensor_has_data(b)) return false;
    if (a->dtype != b->dtype || !em_shape_eq(a->shape, a->ndim, b->shape, b->ndim)) return false;
    em_tensor *c = em_contiguous(a), *d = em_contiguous(b);
    bool same = c && d &&
                memcmp(em_tensor_data(c), em_tensor_data(d), (size_t)a->numel * em_dtype_size(a->dtype)) == 0;
    em_tensor_release(c);
    em_tensor_release(d);
    return same;
}

/* Is value target's own memory, element for element (a compiled write
 * done in place through a view of target)? */
static bool same_memory(const em_tensor *target, const em_tensor *value) {
    return value->storage == target->storage && value->offset == target->offset && value->dtype == target->dtype &&
           em_shape_eq(value->shape, value->ndim, target->shape, target->ndim) &&
           memcmp(value->strides, target->strides, (size_t)target->ndim * sizeof *target->strides) == 0;
}

em_status em_assign(em_tensor *target, em_tensor *value) {
    if (value == target || same_memory(target, value)) { /* computed in target's own memory: a write all the same */
        __atomic_fetch_add(&target->storage->version, 1, __ATOMIC_RELAXED);
        return EM_OK;
    }
    if (em_tensor_adopt_storage(target, value)) return EM_OK; /* no copy: nobody can tell */
    return em_assign_copy(target, value);
}

em_tensor *em_copy_source(em_tensor *value, em_tensor *target) {
    bool here = em_device_eq(value->device, target->device) || !em_tensor_has_data(value) ||
                !em_tensor_has_data(target) || (value->ndim == 0 && value->device.type == EM_DEVICE_CPU) ||
                !em_device_memory_of(value->device) || !em_device_memory_of(target->device);
    if (!here) return em_to_device(value, target->device);
    em_tensor_retain(value);
    return value;
}

em_status em_assign_copy(em_tensor *target, em_tensor *value) {
    if (value == target || same_memory(target, value)) {
        __atomic_fetch_add(&target->storage->version, 1, __ATOMIC_RELAXED);
        return EM_OK;
    }
    em_attrs at;
    memset(&at, 0, sizeof at);
    at.dtype = target->dtype;
    em_tensor *src = em_copy_source(value, target);
    if (!src) return em_last_status();
    em_status st = em_op_run_inplace(EM_OP_CAST, &src, 1, &at, target); /* target.copy_(value) */
    em_tensor_release(src);
    return st;
}

/* The device factories make their results on, per thread: the CPU unless
 * set (ember.device("meta") as a context, set_default_device). */
static _Thread_local em_device default_device = {EM_DEVICE_CPU, -1};

em_device em_default_device(void) { return default_device; }

em_device em_set_default_device(em_device d) {
    em_device old = default_device;
    default_device = d;
    return old;
}

/* A factory op (no operands) on the default device. */
static em_tensor *run_factory(em_op op, em_attrs *at) {
    at->device = default_device;
    return run1(op, NULL, 0, at);
}

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
    return run_factory(op, &at);
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
    if (!em_dtype_is_float(dtype) && dtype != EM_DTYPE_BOOL && !float_to_i64(value, &vi)) return NULL;
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

/* The factories on an explicit device: the default device, set for the
 * one op. */
em_tensor *em_full_on(em_device d, const int64_t *shape, int n, double value, em_dtype dtype) {
    em_device was = em_set_default_device(d);
    em_tensor *t = em_full(shape, n, value, dtype);
    em_set_default_device(was);
    return t;
}
em_tensor *em_arange_on(em_device d, double start, double end, double step, em_dtype dtype) {
    em_device was = em_set_default_device(d);
    em_tensor *t = em_arange(start, end, step, dtype);
    em_set_default_device(was);
    return t;
}
em_tensor *em_eye_on(em_device d, int64_t n, int64_t m, em_dtype dtype) {
    em_device was = em_set_default_device(d);
    em_tensor *t = em_eye(n, m, dtype);
    em_set_default_device(was);
    return t;
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
    return run_factory(EM_OP_ARANGE, &at);
}

/* ---- views ---- */

em_tensor *em_slice(em_tensor *a, int64_t dim, int64_t start, int64_t end, int64_t step) {
    em_attrs at;
    memset(&at, 0, sizeof at);
    int d;
    if (!a || em_wrap_dim("slice", dim, a->ndim, &d) != EM_OK) return NULL;
    if (a->ndim == 0) {
        em_error(EM_ERR_INDEX, "slice: cannot slice a 0-d tensor");
        return NULL;
    }
    if (step <= 0) {
        em_error(EM_ERR_VALUE, "slice: step must be greater than zero");
        return NULL;
    }
    int64_t n = a->shape[d];
    start = start < 0 ? start + n : start; /* Python's clamping */
    end = end < 0 ? end + n : end;
    start = start < 0 ? 0 : start > n ? n : start;
    end = end < start ? start : end > n ? n : end;
    at.n_dims = 1;
    at.dims[0] = d;
    at.start = (double)start;
    at.step = (double)step;
    at.n_shape = a->ndim;
    memcpy(at.shape, a->shape, sizeof at.shape);
    at.shape[d] = (end - start + step - 1) / step;
    return run1(EM_OP_SLICE, &a, 1, &at);
}

em_tensor *em_diagonal(em_tensor *a, int64_t offset, int64_t dim1, int64_t dim2) {
    em_attrs at;
    memset(&at, 0, sizeof at);
    int d1, d2;
    if (!a) return NULL;
    if (a->ndim < 2) {
        em_error(EM_ERR_VALUE, "diagonal: a tensor of at least 2 dims, got %d", a->ndim);
        return NULL;
    }
    if (em_wrap_dim("diagonal", dim1, a->ndim, &d1) != EM_OK || em_wrap_dim("diagonal", dim2, a->ndim, &d2) != EM_OK)
        return NULL;
    if (d1 == d2) {
        em_error(EM_ERR_VALUE, "diagonal: dimensions cannot be identical %lld, %lld", (long long)dim1, (long long)dim2);
        return NULL;
    }
    at.n_dims = 2;
    at.dims[0] = d1;
    at.dims[1] = d2;
    at.diagonal = offset;
    return run1(EM_OP_DIAGONAL, &a, 1, &at);
}

em_tensor *em_select(em_tensor *a, int64_t dim, int64_t index) {
    em_attrs at;
    memset(&at, 0, sizeof at);
    int d;
    if (!a) return NULL;
    if (a->ndim == 0) {
        em_error(EM_ERR_INDEX, "invalid index of a 0-dim tensor; use tensor.item() to convert it "
                               "to a Python number");
        return NULL;
    }
    if (em_wrap_dim("select", dim, a->ndim, &d) != EM_OK) return NULL;
    int64_t n = a->shape[d];
    if (index < -n || index >= n) {
        em_error(EM_ERR_INDEX, "select: index %lld is out of bounds for dimension %d with size %lld",
                 (long long)index, d, (long long)n);
        return NULL;
    }
    at.n_dims = 1;
    at.dims[0] = d;
    at.start = (double)(index < 0 ? index + n : index);
    return run1(EM_OP_SELECT, &a, 1, &at);
}

em_tensor *em_unsqueeze(em_tensor *a, int64_t dim) {
    if (!a) return NULL;
    int d;
    if (em_wrap_dim("unsqueeze", dim, a->ndim + 1, &d) != EM_OK) return NULL;
    if (a->ndim == EM_MAX_DIMS) {
        em_error(EM_ERR_VALUE, "unsqueeze: tensors have at most %d dims", EM_MAX_DIMS);
        return NULL;
    }
    int64_t shape[EM_MAX_DIMS];
    for (int i = 0, k = 0; i <= a->ndim; i++) shape[i] = i == d ? 1 : a->shape[k++];
    return em_reshape(a, shape, a->ndim + 1);
}

em_tensor *em_squeeze(em_tensor *a, const int64_t *dims, int n) {
    if (!a) return NULL;
    bool drop[EM_MAX_DIMS] = {false};
    for (int i = 0; i < n; i++) {
        int d;
        if (em_wrap_dim("squeeze", dims[i], a->ndim, &d) != EM_OK) return NULL;
        if (a->ndim) drop[d] = a->shape[d] == 1;
    }
    int64_t shape[EM_MAX_DIMS];
    int k = 0;
    for (int i = 0; i < a->ndim; i++)
        if (!(n ? drop[i] : a->shape[i] == 1)) shape[k++] = a->shape[i];
    return em_reshape(a, shape, k);
}

/* ---- movement ---- */

static em_status dim_list(const char *op, const em_tensor *a, const int64_t *dims, int n, em_attrs *at) {
    if (n > EM_MAX_DIMS) return em_error(EM_ERR_VALUE, "%s: too many dims", op);
    at->n_dims = n;
    for (int i = 0; i < n; i++) {
        int d;
        em_status st = em_wrap_dim(op, dims[i], a->ndim, &d);
        if (st != EM_OK) return st;
        at->dims[i] = d;
    }
    return EM_OK;
}

em_tensor *em_flip(em_tensor *a, const int64_t *dims, int n) {
    em_attrs at;
    memset(&at, 0, sizeof at);
    if (!a || dim_list("flip", a, dims, n, &at) != EM_OK) return NULL;
    return run1(EM_OP_FLIP, &a, 1, &at);
}

em_tensor *em_roll(em_tensor *a, const int64_t *shifts, const int64_t *dims, int n) {
    em_attrs at;
    memset(&at, 0, sizeof at);
    if (!a || dim_list("roll", a, dims, n, &at) != EM_OK) return NULL;
    at.n_shifts = n;
    memcpy(at.shifts, shifts, (size_t)n * sizeof *shifts);
    return run1(EM_OP_ROLL, &a, 1, &at);
}

em_tensor *em_cat(em_tensor *const *ts, int n, int64_t dim) {
    em_attrs at;
    memset(&at, 0, sizeof at);
    if (n < 1) {
        em_error(EM_ERR_VALUE, "cat: expected a non-empty list of tensors");
        return NULL;
    }
    int ref = 0; /* the first tensor that is not a legacy empty 1-d one */
    while (ref < n - 1 && ts[ref]->ndim == 1 && ts[ref]->shape[0] == 0) ref++;
    int d;
    if (em_wrap_dim("cat", dim, ts[ref]->ndim, &d) != EM_OK) return NULL;
    at.n_dims = 1;
    at.dims[0] = d;
    em_tensor *out = NULL;
    return em_op_run(EM_OP_CAT, ts, n, &at, &out, 1) == EM_OK ? out : NULL;
}

static em_tensor *triangle(em_op op, em_tensor *a, int64_t k) {
    em_attrs at;
    memset(&at, 0, sizeof at);
    at.diagonal = k;
    return run1(op, &a, 1, &at);
}
em_tensor *em_tril(em_tensor *a, int64_t diagonal) { return triangle(EM_OP_TRIL, a, diagonal); }
em_tensor *em_triu(em_tensor *a, int64_t diagonal) { return triangle(EM_OP_TRIU, a, diagonal); }

/* ---- indexing ---- */

static em_tensor *along(em_op op, em_tensor *a, int64_t dim, em_tensor *const *more, int n_more,
                        bool accumulate) {
    em_attrs at;
    memset(&at, 0, sizeof at);
    int d;
    if (!a || em_wrap_dim(em_op_name(op), dim, a->ndim, &d) != EM_OK) return NULL;
    at.n_dims = 1;
    at.dims[0] = d;
    at.accumulate = accumulate;
    em_tensor *in[3] = {a, n_more > 0 ? more[0] : NULL, n_more > 1 ? more[1] : NULL};
    return run1(op, in, 1 + n_more, &at);
}
em_tensor *em_index_select(em_tensor *a, int64_t dim, em_tensor *index) {
    return along(EM_OP_INDEX_SELECT, a, dim, &index, 1, false);
}
em_tensor *em_gather(em_tensor *a, int64_t dim, em_tensor *index) {
    return along(EM_OP_GATHER, a, dim, &index, 1, false);
}
em_tensor *em_scatter(em_tensor *a, int64_t dim, em_tensor *index, em_tensor *src, bool accumulate) {
    em_tensor *more[2] = {index, src};
    return along(EM_OP_SCATTER, a, dim, more, 2, accumulate);
}

static em_tensor *advanced(em_op op, em_tensor *a, em_tensor *const *idx, const int64_t *dims,
                           int k, em_tensor *values, bool accumulate) {
    em_attrs at;
    memset(&at, 0, sizeof at);
    if (!a || k < 1 || k > EM_MAX_DIMS) {
        if (a) em_error(EM_ERR_INDEX, "%s: expected 1 to %d index tensors", em_op_name(op), EM_MAX_DIMS);
        return NULL;
    }
    em_tensor *in[EM_MAX_DIMS + 2];
    in[0] = a;
    at.n_dims = k;
    for (int j = 0; j < k; j++) {
        at.dims[j] = dims[j];
        in[1 + j] = idx[j];
    }
    at.accumulate = accumulate;
    int n = 1 + k;
    if (values) in[n++] = values;
    return run1(op, in, n, &at);
}
em_tensor *em_index(em_tensor *a, em_tensor *const *idx, const int64_t *dims, int k) {
    return advanced(EM_OP_INDEX, a, idx, dims, k, NULL, false);
}
em_tensor *em_index_put(em_tensor *a, em_tensor *const *idx, const int64_t *dims, int k,
                        em_tensor *values, bool accumulate) {
    return advanced(EM_OP_INDEX_PUT, a, idx, dims, k, values, accumulate);
}

em_tensor *em_layer_norm(em_tensor *x, int k, em_tensor *weight, em_tensor *bias, double eps) {
    em_attrs at;
    memset(&at, 0, sizeof at);
    if (!x) return NULL;
    if (k < 1 || k > x->ndim || (bias && !weight)) {
        em_error(EM_ERR_VALUE, "layer_norm: %d normalized dims of a %d-d input%s", k, x->ndim,
                 bias && !weight ? ", and a bias needs a weight" : "");
        return NULL;
    }
    at.n_dims = k;
    for (int i = 0; i < k; i++) at.dims[i] = x->ndim - k + i;
    at.value = eps;
    em_tensor *in[3] = {x, weight, bias};
    return run1(EM_OP_LAYER_NORM, in, 1 + (weight != NULL) + (bias != NULL), &at);
}

em_tensor *em_one_hot(em_tensor *a, int64_t num_classes) {
    em_attrs at;
    memset(&at, 0, sizeof at);
    if (!a) return NULL;
    if (a->ndim >= EM_MAX_DIMS || num_classes < 0) {
        em_error(EM_ERR_VALUE, "one_hot: bad number of classes or too many dims");
        return NULL;
    }
    at.n_shape = a->ndim + 1;
    memcpy(at.shape, a->shape, (size_t)a->ndim * sizeof *a->shape);
    at.shape[a->ndim] = num_classes;
    return run1(EM_OP_ONE_HOT, &a, 1, &at);
}

em_tensor *em_nonzero(em_tensor *a) { return em_unary(EM_OP_NONZERO, a); }
em_tensor *em_masked_select(em_tensor *a, em_tensor *mask) {
    return em_binary(EM_OP_MASKED_SELECT, a, mask);
}

/* ---- more factories ---- */

em_tensor *em_empty(const int64_t *shape, int n, em_dtype dtype) {
    return factory(EM_OP_EMPTY, shape, n, dtype, 0.0, 0);
}

em_tensor *em_eye(int64_t n, int64_t m, em_dtype dtype) {
    int64_t shape[2] = {n, m};
    return factory(EM_OP_EYE, shape, 2, dtype, 0.0, 0);
}

em_tensor *em_linspace(double start, double end, int64_t steps, em_dtype dtype) {
    em_attrs at;
    memset(&at, 0, sizeof at);
    if (steps < 0) {
        em_error(EM_ERR_VALUE, "linspace: number of steps must be non-negative");
        return NULL;
    }
    at.n_shape = 1;
    at.shape[0] = steps;
    at.dtype = dtype;
    at.start = start;
    at.end = end;
    return run_factory(EM_OP_LINSPACE, &at);
}

em_tensor *em_randint(int64_t low, int64_t high, const int64_t *shape, int n, em_dtype dtype) {
    em_attrs at;
    memset(&at, 0, sizeof at);
    if (n < 0 || n > EM_MAX_DIMS) {
        em_error(EM_ERR_VALUE, "randint: at most %d dimensions", EM_MAX_DIMS);
        return NULL;
    }
    at.n_shape = n;
    if (n) memcpy(at.shape, shape, (size_t)n * sizeof *shape);
    at.dtype = dtype;
    at.start = (double)low;
    at.end = (double)high;
    return run_factory(EM_OP_RANDINT, &at);
}

em_tensor *em_randperm(int64_t n, em_dtype dtype) {
    int64_t shape[1] = {n};
    if (n < 0) {
        em_error(EM_ERR_VALUE, "randperm: n must be non-negative");
        return NULL;
    }
    return factory(EM_OP_RANDPERM, shape, 1, dtype, 0.0, 0);
}
