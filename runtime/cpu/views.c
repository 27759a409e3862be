/*
 * views.c - reshape, permute, expand (views) and contiguous.
 *
 * What each view op does to shape and strides is its rule in view_rules.c
 * (em_view_geometry); the eager kernel below applies it. reshape falls
 * back to a copy when the strides cannot express the new shape (view()
 * refuses instead; see ops_api.c).
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

em_status cpu_view(em_op op, em_tensor *const *in, int n_in, const em_attrs *attrs, em_tensor **out) {
    int64_t shape[EM_MAX_DIMS], strides[EM_MAX_DIMS], off;
    int nd;
    em_tensor *src = in[0], *copy = NULL;
    if (!em_view_geometry(op, src->shape, src->strides, src->ndim, attrs, shape, strides, &nd,
                          &off)) {
        if (op != EM_OP_RESHAPE)
            return em_error(EM_ERR_INTERNAL, "%s: no view geometry", em_op_name(op));
        /* reshape of a tensor whose strides do not allow a view: copy first. */
        em_status st = copy_contiguous(src, &copy);
        if (st != EM_OK) return st;
        src = copy;
        em_view_geometry(op, src->shape, src->strides, src->ndim, attrs, shape, strides, &nd, &off);
    }
    out[0] = em_tensor_alias(src, src->offset + off, shape, strides, nd);
    em_tensor_release(copy);
    return out[0] ? EM_OK : em_last_status();
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
