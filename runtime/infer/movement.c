/*
 * movement.c - the inference of the ops that move data without arithmetic
 * (flip, roll, cat, tril, triu: ../cpu/movement.c runs them), the same on
 * every device.
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

em_status infer_flip(em_op op, const em_type *in, int n_in, const em_attrs *attrs, em_type *out,
                     int n_out) {
    (void)n_in;
    (void)n_out;
    em_status st = check_dims(op, attrs, in[0].ndim);
    if (st == EM_OK) out[0] = in[0];
    return st;
}

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

em_status infer_cat(em_op op, const em_type *in, int n_in, const em_attrs *attrs, em_type *out,
                    int n_out) {
    (void)op;
    (void)n_out;
    char a[256], b[256];
    if (n_in < 1) return em_error(EM_ERR_VALUE, "cat: expected a non-empty list of tensors");
    int ref = 0;
    while (ref < n_in - 1 && em_cat_skips(&in[ref])) ref++;
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
        if (em_cat_skips(&in[i]) && !em_cat_skips(r)) continue;
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
