/*
 * views.c - reshape, permute, expand (views), contiguous and
 * as_strided_scatter.
 *
 * What each view op does to shape and strides is its rule in view_rules.c
 * (em_view_geometry); the eager kernel below applies it. reshape falls
 * back to a copy when the strides cannot express the new shape (view()
 * refuses instead; see ops_api.c). as_strided_scatter's inference is
 * ../infer/views.c.
 */
#include <string.h>

#include "../kernels.h"

static em_status copy_contiguous(em_tensor *in, em_tensor **out) {
    em_tensor *c = em_tensor_empty(in->shape, in->ndim, in->dtype, in->device);
    if (!c) return em_last_status();
    em_status st = em_copy_into(c, in);
    if (st != EM_OK) {
        em_tensor_release(c);
        return st;
    }
    *out = c;
    return EM_OK;
}

static em_tensor *dense_copy(em_tensor *t) {
    em_tensor *c = NULL;
    return copy_contiguous(t, &c) == EM_OK ? c : NULL;
}

em_status cpu_view(em_op op, em_tensor *const *in, int n_in, const em_attrs *attrs, em_tensor **out) {
    (void)n_in;
    return em_view_apply(op, in[0], attrs, dense_copy, out);
}

em_status cpu_contiguous(em_op op, em_tensor *const *in, int n_in, const em_attrs *attrs, em_tensor **out) {
    (void)op;
    (void)attrs;
    if (em_tensor_is_contiguous(in[0])) {
        em_tensor_retain(in[0]);
        out[0] = in[0];
        return EM_OK;
    }
    return copy_contiguous(in[0], out);
}

em_status cpu_fused(em_op op, em_tensor *const *in, int n_in, const em_attrs *attrs, em_tensor **out) {
    (void)op;
    (void)in;
    (void)attrs;
    (void)out;
    return em_error(EM_ERR_VALUE,
                    "fused: a fused node runs only inside a compiled graph (the IR interpreter "
                    "or a backend executes its region)");
}

/* ---- as_strided_scatter: a copy of 1-d x with a strided view of it
 * replaced by src (a traced write into a view, made SSA) ---- */

em_status cpu_as_strided_scatter(em_op op, em_tensor *const *in, int n_in, const em_attrs *a, em_tensor **out) {
    (void)op;
    (void)n_in;
    em_tensor *x = in[0], *src = in[1];
    /* (a compiled graph may hand x's own memory as the result: x dies here) */
    em_status st = em_tensor_data(out[0]) == em_tensor_data(x) ? EM_OK : em_copy_into(out[0], x);
    if (st != EM_OK) return st;
    int64_t strides[EM_MAX_DIMS];
    for (int d = 0; d < src->ndim; d++) strides[d] = a->stride[d] * out[0]->strides[0];
    em_tensor *view = em_tensor_alias(out[0], out[0]->offset + a->offset * out[0]->strides[0], src->shape, strides,
                                      src->ndim);
    if (!view) return em_last_status();
    st = em_copy_into(view, src);
    em_tensor_release(view);
    return st;
}
