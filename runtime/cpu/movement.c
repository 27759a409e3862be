/*
 * movement.c - ops that move data without arithmetic: flip, roll, cat,
 * tril, triu (CPU kernels; their inference is ../infer/movement.c).
 *
 * Each is built from views of its input and output and the one copy routine,
 * em_copy_into, so they handle every dtype, layout and broadcast the same way
 * the elementwise kernels do.
 */
#include <string.h>

#include "../kernels.h"

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

em_status cpu_cat(em_op op, em_tensor *const *in, int n_in, const em_attrs *attrs, em_tensor **out) {
    (void)op;
    int d = (int)attrs->dims[0];
    int64_t at = 0;
    for (int i = 0; i < n_in; i++) {
        em_type t = em_tensor_type(in[i]);
        if (em_cat_skips(&t) && out[0]->ndim != 1) continue;
        em_status st = copy_block(out[0], d, at, in[i], 0, in[i]->shape[d]);
        if (st != EM_OK) return st;
        at += in[i]->shape[d];
    }
    return EM_OK;
}

/* ---- tril, triu ---- */

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
