/*
 * sort.c - the inference of the sorting family (sort, topk, kthvalue,
 * median, nanmedian, mode: ../cpu/sort.c runs them), the same on every
 * device: values and int64 indices, the dim kept or dropped.
 */
#include <string.h>

#include "../kernels.h"

#define TYPE_STR(t, buf) (em_type_str((t), (buf), sizeof(buf)), (buf))

em_status infer_sort(em_op op, const em_type *in, int n_in, const em_attrs *a, em_type *out, int n_out) {
    const em_type *x = &in[0];
    const char *name = em_op_name(op);
    char b[96];
    if (a->n_dims != 1 || a->dims[0] < 0 || a->dims[0] >= (x->ndim ? x->ndim : 1))
        return em_error(EM_ERR_INDEX, "%s: dim %lld out of range for %s", name,
                        (long long)(a->n_dims == 1 ? a->dims[0] : -1), TYPE_STR(x, b));
    int d = (int)a->dims[0];
    int64_t len = x->ndim ? x->shape[d] : 1;
    out[0] = *x;
    if (op == EM_OP_TOPK) {
        if (a->k < 0 || a->k > len || (!x->ndim && a->k != 1))
            return em_error(EM_ERR_VALUE, "topk: k = %lld is out of range for %lld values along dim %d of %s",
                            (long long)a->k, (long long)len, d, TYPE_STR(x, b));
        if (x->ndim) out[0].shape[d] = a->k;
    } else if (!em_sort_keeps_row(op)) {
        if (len == 0)
            return em_error(EM_ERR_INDEX, "%s: dim %d of %s is empty, so there is no value to choose", name, d,
                            TYPE_STR(x, b));
        if (op == EM_OP_KTHVALUE && (a->k < 1 || a->k > len))
            return em_error(EM_ERR_VALUE, "kthvalue: k = %lld is out of range for %lld values along dim %d of %s",
                            (long long)a->k, (long long)len, d, TYPE_STR(x, b));
        if (x->ndim && a->keepdim) out[0].shape[d] = 1;
        else if (x->ndim) {
            memmove(out[0].shape + d, out[0].shape + d + 1, (size_t)(x->ndim - d - 1) * sizeof *x->shape);
            out[0].ndim--;
        }
    }
    out[1] = out[0];
    out[1].dtype = EM_DTYPE_I64;
    (void)n_in;
    (void)n_out;
    return EM_OK;
}

/* The selections share sort's inference (the dim dropped or kept). */
#define SELECTION_INFER(name)                                                                      \
    em_status infer_##name(em_op op, const em_type *in, int n_in, const em_attrs *a, em_type *out, int n_out) { \
        return infer_sort(op, in, n_in, a, out, n_out);                                            \
    }
SELECTION_INFER(topk)
SELECTION_INFER(kthvalue)
SELECTION_INFER(median)
SELECTION_INFER(nanmedian)
SELECTION_INFER(mode)
