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

/* ---- flip, roll: their moves (view_rules.c) over the CPU's copy ---- */

em_status cpu_flip(em_op op, em_tensor *const *in, int n_in, const em_attrs *attrs, em_tensor **out) {
    (void)op;
    (void)n_in;
    return em_flip_apply(in[0], attrs, out[0], em_copy_into);
}

em_status cpu_roll(em_op op, em_tensor *const *in, int n_in, const em_attrs *attrs, em_tensor **out) {
    (void)op;
    (void)n_in;
    return em_roll_apply(in[0], attrs, out[0], em_copy_into);
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
