/*
 * movement.c - ops that move data without arithmetic: flip, roll, cat,
 * tril, triu (inference and CPU kernels).
 *
 * Each is built from views of its input and output and the one copy routine,
 * em_copy_into, so they handle every dtype, layout and broadcast the same way
 * the elementwise kernels do.
 */
#include <string.h>

#include "../kernels.h"

#define TYPE_STR(t, buf) (em_type_str((t), (buf), sizeof(buf)), (buf))

static em_status check_dims(em_op op, const em_attrs *a, int ndim) {
    bool seen[EM_MAX_DIMS] = {false};
    for (int i = 0; i < a->n_dims; i++) {
        if (a->dims[i] < 0 || a->dims[i] >= (ndim ? ndim : 1))
            return em_error(EM_ERR_INDEX, "%s: dimension %lld out of range for a %d-d tensor",
                            em_op_name(op), (long long)a->dims[i], ndim);
        if (ndim && seen[a->dims[i]])
            return em_error(EM_ERR_VALUE, "%s: dim %lld appears multiple times", em_op_name(op),
                            (long long)a->dims[i]);
        if (ndim) seen[a->dims[i]] = true;
    }
    return EM_OK;
}

/* A view of t: dim d restricted to [start, start + len). */
static em_tensor *narrowed(const em_tensor *t, int d, int64_t start, int64_t len) {
    int64_t shape[EM_MAX_DIMS];
    memcpy(shape, t->shape, sizeof shape);
    shape[d] = len;
    return em_tensor_alias(t, t->offset + start * t->strides[d], shape, t->strides, t->ndim);
}

/* Copies src's [start, start+len) along d into dst's [dstart, ...). */
static em_status copy_block(em_tensor *dst, int d, int64_t dstart, const em_tensor *src,
                            int64_t sstart, int64_t len) {
    if (len <= 0) return EM_OK;
    em_tensor *a = narrowed(dst, d, dstart, len), *b = a ? narrowed(src, d, sstart, len) : NULL;
    em_status st = a && b ? em_copy_into(a, b) : em_last_status();
    em_tensor_release(a);
    em_tensor_release(b);
    return st;
}

/* ---- flip ---- */

em_status infer_flip(em_op op, const em_type *in, int n_in, const em_attrs *attrs, em_type *out,
                     int n_out) {
    (void)n_in;
    (void)n_out;
    em_status st = check_dims(op, attrs, in[0].ndim);
    if (st == EM_OK) out[0] = in[0];
    return st;
}

/* A negative-stride view read in order, copied. */
em_status cpu_flip(em_op op, em_tensor *const *in, int n_in, const em_attrs *attrs, em_tensor **out) {
    (void)op;
    const em_tensor *x = in[0];
    int64_t strides[EM_MAX_DIMS], offset = x->offset;
    memcpy(strides, x->strides, sizeof strides);
    for (int i = 0; i < attrs->n_dims && x->ndim; i++) {
        int d = (int)attrs->dims[i];
        if (x->shape[d] == 0) return EM_OK;
        offset += (x->shape[d] - 1) * strides[d];
        strides[d] = -strides[d];
    }
    em_tensor *v = em_tensor_alias(x, offset, x->shape, strides, x->ndim);
    em_status st = v ? em_copy_into(out[0], v) : em_last_status();
    em_tensor_release(v);
    return st;
}

/* ---- roll ---- */

em_status infer_roll(em_op op, const em_type *in, int n_in, const em_attrs *attrs, em_type *out,
                     int n_out) {
    (void)n_in;
    (void)n_out;
    if (attrs->n_shifts != attrs->n_dims || attrs->n_dims == 0)
        return em_error(EM_ERR_VALUE, "roll: expected as many shifts as dims, got %d and %d",
                        attrs->n_shifts, attrs->n_dims);
    em_status st = check_dims(op, attrs, in[0].ndim);
    if (st == EM_OK) out[0] = in[0];
    return st;
}

/* out = in shifted by s along each rolled dim: every rolled dim splits into
 * two blocks, so 2^k block copies do it in one pass over memory. */
em_status cpu_roll(em_op op, em_tensor *const *in, int n_in, const em_attrs *attrs, em_tensor **out) {
    (void)op;
    const em_tensor *x = in[0];
    if (x->numel == 0) return EM_OK;
    int k = attrs->n_dims;
    for (int mask = 0; mask < (1 << k); mask++) {
        int64_t soff = x->offset, doff = out[0]->offset, shape[EM_MAX_DIMS];
        memcpy(shape, x->shape, sizeof shape);
        for (int i = 0; i < k; i++) {
            int d = (int)attrs->dims[i];
            int64_t n = x->shape[d], s = ((attrs->shifts[i] % n) + n) % n;
            /* block 0: out[s, n) <- in[0, n-s); block 1: out[0, s) <- in[n-s, n) */
            bool second = (mask >> i) & 1;
            shape[d] = second ? s : n - s;
            soff += (second ? n - s : 0) * x->strides[d];
            doff += (second ? 0 : s) * out[0]->strides[d];
        }
        if (em_shape_numel(shape, x->ndim) == 0) continue;
        em_tensor *src = em_tensor_alias(x, soff, shape, x->strides, x->ndim);
        em_tensor *dst = src ? em_tensor_alias(out[0], doff, shape, out[0]->strides, x->ndim) : NULL;
        em_status st = dst ? em_copy_into(dst, src) : em_last_status();
        em_tensor_release(src);
        em_tensor_release(dst);
        if (st != EM_OK) return st;
    }
    return EM_OK;
}

/* ---- cat ---- */

/* PyTorch's legacy rule: 1-d empty tensors may be concatenated with anything
 * and are skipped. */
static bool legacy_empty(const em_type *t) { return t->ndim == 1 && t->shape[0] == 0; }

em_status infer_cat(em_op op, const em_type *in, int n_in, const em_attrs *attrs, em_type *out,
                    int n_out) {
    (void)op;
    (void)n_out;
    char a[256], b[256];
    if (n_in < 1) return em_error(EM_ERR_VALUE, "cat: expected a non-empty list of tensors");
    int ref = 0;
    while (ref < n_in - 1 && legacy_empty(&in[ref])) ref++;
    const em_type *r = &in[ref];
    if (r->ndim == 0) return em_error(EM_ERR_VALUE, "cat: zero-dimensional tensors cannot be concatenated");
    int d = attrs->n_dims == 1 ? (int)attrs->dims[0] : -1;
    if (d < 0 || d >= r->ndim)
        return em_error(EM_ERR_INDEX, "cat: dimension out of range for %d-d tensors", r->ndim);
    em_type res = *r;
    res.shape[d] = 0;
    const em_type *ops[64];
    int n_ops = 0;
    for (int i = 0; i < n_in; i++) {
        if (legacy_empty(&in[i]) && !legacy_empty(r)) continue;
        if (!em_device_eq(in[i].device, r->device))
            return em_error(EM_ERR_DEVICE, "cat: expected all tensors on the same device");
        bool fits = in[i].ndim == r->ndim;
        for (int e = 0; e < r->ndim && fits; e++) fits = e == d || in[i].shape[e] == r->shape[e];
        if (!fits)
            return em_error(EM_ERR_SHAPE,
                            "cat: sizes of tensors must match except in dimension %d: tensor %d "
                            "is %s, tensor %d is %s",
                            d, ref, TYPE_STR(r, a), i, TYPE_STR(&in[i], b));
        res.shape[d] += in[i].shape[d];
        if (n_ops < 64) ops[n_ops++] = &in[i];
    }
    res.dtype = em_result_type(ops, n_ops);
    out[0] = res;
    return EM_OK;
}

em_status cpu_cat(em_op op, em_tensor *const *in, int n_in, const em_attrs *attrs, em_tensor **out) {
    (void)op;
    int d = (int)attrs->dims[0];
    int64_t at = 0;
    for (int i = 0; i < n_in; i++) {
        em_type t = em_tensor_type(in[i]);
        if (legacy_empty(&t) && out[0]->ndim != 1) continue;
        em_status st = copy_block(out[0], d, at, in[i], 0, in[i]->shape[d]);
        if (st != EM_OK) return st;
        at += in[i]->shape[d];
    }
    return EM_OK;
}

/* ---- tril, triu ---- */

em_status infer_tril(em_op op, const em_type *in, int n_in, const em_attrs *attrs, em_type *out,
                     int n_out) {
    (void)n_in;
    (void)n_out;
    (void)attrs;
    if (in[0].ndim < 2)
        return em_error(EM_ERR_SHAPE, "%s: expected a tensor with at least 2 dims, got %d",
                        em_op_name(op), in[0].ndim);
    out[0] = in[0];
    return EM_OK;
}
em_status infer_triu(em_op op, const em_type *in, int n_in, const em_attrs *attrs, em_type *out,
                     int n_out) {
    return infer_tril(op, in, n_in, attrs, out, n_out);
}

/* A copy, then the other triangle of every matrix zeroed row by row (the
 * output is contiguous, and zero bytes are zero in every dtype). */
em_status cpu_tril(em_op op, em_tensor *const *in, int n_in, const em_attrs *attrs, em_tensor **out) {
    em_status st = em_copy_into(out[0], in[0]);
    if (st != EM_OK) return st;
    em_tensor *y = out[0];
    int64_t rows = y->shape[y->ndim - 2], cols = y->shape[y->ndim - 1], k = attrs->diagonal;
    int64_t mats = rows && cols ? y->numel / (rows * cols) : 0;
    size_t item = em_dtype_size(y->dtype);
    char *base = em_tensor_data(y);
    bool lower = op == EM_OP_TRIL;
    for (int64_t m = 0; m < mats; m++)
        for (int64_t i = 0; i < rows; i++) {
            char *row = base + (size_t)((m * rows + i) * cols) * item;
            /* tril keeps j <= i + k; triu keeps j >= i + k */
            int64_t lo = lower ? i + k + 1 : 0, hi = lower ? cols : i + k;
            lo = lo < 0 ? 0 : lo > cols ? cols : lo;
            hi = hi < 0 ? 0 : hi > cols ? cols : hi;
            if (hi > lo) memset(row + (size_t)lo * item, 0, (size_t)(hi - lo) * item);
        }
    return EM_OK;
}
em_status cpu_triu(em_op op, em_tensor *const *in, int n_in, const em_attrs *attrs, em_tensor **out) {
    return cpu_tril(op, in, n_in, attrs, out);
}
