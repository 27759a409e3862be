/*
 * bucket.c - the inference of the ops that count or place values (unique,
 * unique_consecutive, searchsorted, bincount, histc: ../cpu/bucket.c runs
 * them), the same on every device. Where a size depends on the data
 * (unique's values, bincount's bins) it is a placeholder here (0, or
 * minlength); the kernel allocates the real results.
 */
#include <math.h>
#include <string.h>

#include "../kernels.h"

#define TYPE_STR(t, buf) (em_type_str((t), (buf), sizeof(buf)), (buf))

/* The result types before the data is seen (their sizes along the unique
 * dim are 0 here: only running tells them). */
em_status infer_unique(em_op op, const em_type *in, int n_in, const em_attrs *a, em_type *out, int n_out) {
    const em_type *x = &in[0];
    char b[96];
    (void)n_in;
    (void)n_out;
    if (a->n_dims > 1 || (a->n_dims == 1 && (a->dims[0] < 0 || a->dims[0] >= x->ndim)))
        return em_error(EM_ERR_INDEX, "%s: dim %lld out of range for %s", em_op_name(op),
                        (long long)(a->n_dims ? a->dims[0] : 0), TYPE_STR(x, b));
    out[0] = out[1] = out[2] = *x;
    out[1].dtype = out[2].dtype = EM_DTYPE_I64;
    out[2].ndim = 1;
    out[2].shape[0] = 0;
    if (a->n_dims == 0) {
        out[0].ndim = 1;
        out[0].shape[0] = 0;
    } else {
        out[0].shape[a->dims[0]] = 0;
        out[1].ndim = 1;
        out[1].shape[0] = x->shape[a->dims[0]];
    }
    return EM_OK;
}

em_status infer_unique_consecutive(em_op op, const em_type *in, int n_in, const em_attrs *a, em_type *out,
                                   int n_out) {
    return infer_unique(op, in, n_in, a, out, n_out);
}

em_status infer_searchsorted(em_op op, const em_type *in, int n_in, const em_attrs *a, em_type *out, int n_out) {
    const em_type *seq = &in[0], *v = &in[1];
    char b1[96], b2[96];
    (void)op;
    (void)n_in;
    (void)n_out;
    bool rows_match = seq->ndim == v->ndim && seq->ndim >= 1;
    for (int d = 0; rows_match && d < seq->ndim - 1; d++) rows_match = seq->shape[d] == v->shape[d];
    if (seq->ndim != 1 && !rows_match)
        return em_error(EM_ERR_VALUE,
                        "searchsorted: the sorted sequence must be 1-d, or have the values' leading dims "
                        "(all but the last); got %s and values %s",
                        TYPE_STR(seq, b1), TYPE_STR(v, b2));
    if (seq->dtype == EM_DTYPE_BOOL || v->dtype == EM_DTYPE_BOOL)
        return em_error(EM_ERR_TYPE, "searchsorted: bool is not supported (got %s and values %s)",
                        TYPE_STR(seq, b1), TYPE_STR(v, b2));
    if (a->dtype != EM_DTYPE_I64 && a->dtype != EM_DTYPE_I32)
        return em_error(EM_ERR_TYPE, "searchsorted: the result is int64 or int32, not %s", em_dtype_name(a->dtype));
    out[0] = *v;
    out[0].dtype = a->dtype;
    return EM_OK;
}

static em_dtype bincount_dtype(int n_in, const em_type *w) {
    return n_in < 2 ? EM_DTYPE_I64 : w->dtype == EM_DTYPE_F32 ? EM_DTYPE_F32 : EM_DTYPE_F64;
}

em_status infer_bincount(em_op op, const em_type *in, int n_in, const em_attrs *a, em_type *out, int n_out) {
    const em_type *x = &in[0];
    char b1[96], b2[96];
    (void)op;
    (void)n_out;
    if (n_in < 1 || n_in > 2) return em_error(EM_ERR_VALUE, "bincount: takes an input and optional weights");
    if (x->ndim != 1 || em_dtype_is_float(x->dtype))
        return em_error(EM_ERR_VALUE, "bincount: counts a 1-d tensor of non-negative integers, not %s",
                        TYPE_STR(x, b1));
    if (n_in == 2 && (in[1].ndim != 1 || in[1].shape[0] != x->shape[0]))
        return em_error(EM_ERR_VALUE, "bincount: weights %s must be 1-d, one per input value (input %s)",
                        TYPE_STR(&in[1], b2), TYPE_STR(x, b1));
    if (a->minlength < 0) return em_error(EM_ERR_VALUE, "bincount: minlength must be non-negative, got %lld",
                                          (long long)a->minlength);
    out[0] = *x;
    out[0].shape[0] = a->minlength;
    out[0].dtype = bincount_dtype(n_in, &in[1]);
    return EM_OK;
}

em_status infer_histc(em_op op, const em_type *in, int n_in, const em_attrs *a, em_type *out, int n_out) {
    const em_type *x = &in[0];
    char b[96];
    (void)op;
    (void)n_in;
    (void)n_out;
    if (x->dtype != EM_DTYPE_F32 && x->dtype != EM_DTYPE_F64)
        return em_error(EM_ERR_VALUE, "histc: bins float32 or float64 values, not %s", TYPE_STR(x, b));
    if (a->n_shape != 1 || a->shape[0] < 1)
        return em_error(EM_ERR_VALUE, "histc: bins must be positive, got %lld",
                        (long long)(a->n_shape == 1 ? a->shape[0] : 0));
    if (!(a->start <= a->end) || isinf(a->start) || isinf(a->end))
        return em_error(EM_ERR_VALUE, "histc: the range [%g, %g] must be finite with min <= max", a->start, a->end);
    out[0] = *x;
    out[0].ndim = 1;
    out[0].shape[0] = a->shape[0];
    return EM_OK;
}
