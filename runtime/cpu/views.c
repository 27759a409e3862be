/*
 * views.c - reshape, permute, expand (views) and contiguous.
 *
 * em_view_geometry() is the single definition of what each view op does to
 * shape and strides; the eager kernels below and the LLVM backend's layout
 * propagation both call it. reshape falls back to a copy when the strides
 * cannot express the new shape (view() refuses instead; see ops_api.c).
 */
#include <string.h>

#include "../kernels.h"

/* PyTorch's rule: split the old dims into chunks that are contiguous among
 * themselves; each chunk must map onto whole new dims. */
static bool reshape_strides(const int64_t *shape, const int64_t *strides, int ndim,
                            const int64_t *nshape, int nnd, int64_t *nstrides) {
    int64_t numel = em_shape_numel(shape, ndim);
    if (numel == 0 || ndim == 0) {
        em_contiguous_strides(nshape, nnd, nstrides);
        return true;
    }
    int view_d = nnd - 1;
    int64_t chunk_base = strides[ndim - 1], tensor_numel = 1, view_numel = 1;
    for (int d = ndim - 1; d >= 0; d--) {
        tensor_numel *= shape[d];
        if (d == 0 || (shape[d - 1] != 1 && strides[d - 1] != tensor_numel * chunk_base)) {
            while (view_d >= 0 && (view_numel < tensor_numel || nshape[view_d] == 1)) {
                nstrides[view_d] = view_numel * chunk_base;
                view_numel *= nshape[view_d];
                view_d--;
            }
            if (view_numel != tensor_numel) return false;
            if (d > 0) {
                chunk_base = strides[d - 1];
                tensor_numel = 1;
                view_numel = 1;
            }
        }
    }
    return view_d == -1;
}

bool em_view_geometry(em_op op, const int64_t *shape, const int64_t *strides, int ndim,
                      const em_attrs *attrs, int64_t *out_shape, int64_t *out_strides,
                      int *out_ndim, int64_t *offset_delta) {
    *offset_delta = 0;
    switch (op) {
    case EM_OP_SLICE: { /* dims[0] from start by step, attrs->shape[d] elements */
        int d = (int)attrs->dims[0];
        for (int i = 0; i < ndim; i++) {
            out_shape[i] = shape[i];
            out_strides[i] = strides[i];
        }
        out_shape[d] = attrs->shape[d];
        out_strides[d] = strides[d] * (int64_t)attrs->step;
        *offset_delta = (int64_t)attrs->start * strides[d];
        *out_ndim = ndim;
        return true;
    }
    case EM_OP_SELECT: { /* dims[0] fixed at index start, the dim dropped */
        int d = (int)attrs->dims[0], k = 0;
        for (int i = 0; i < ndim; i++) {
            if (i == d) continue;
            out_shape[k] = shape[i];
            out_strides[k++] = strides[i];
        }
        *offset_delta = (int64_t)attrs->start * strides[d];
        *out_ndim = ndim - 1;
        return true;
    }
    case EM_OP_RESHAPE: {
        int n = attrs->n_shape, infer_at = -1;
        int64_t known = 1, numel = em_shape_numel(shape, ndim);
        for (int i = 0; i < n; i++) {
            out_shape[i] = attrs->shape[i];
            if (attrs->shape[i] == -1)
                infer_at = i;
            else
                known *= attrs->shape[i];
        }
        if (infer_at >= 0) out_shape[infer_at] = known ? numel / known : 0;
        *out_ndim = n;
        return reshape_strides(shape, strides, ndim, out_shape, n, out_strides);
    }
    case EM_OP_PERMUTE:
        for (int i = 0; i < ndim; i++) {
            out_shape[i] = shape[attrs->dims[i]];
            out_strides[i] = strides[attrs->dims[i]];
        }
        *out_ndim = ndim;
        return true;
    case EM_OP_EXPAND: {
        int n = attrs->n_shape, lead = n - ndim;
        for (int i = 0; i < n; i++) {
            int64_t want = attrs->shape[i];
            if (i < lead) {
                out_shape[i] = want;
                out_strides[i] = 0;
                continue;
            }
            int64_t have = shape[i - lead];
            if (want == -1) want = have;
            out_shape[i] = want;
            out_strides[i] = (have == 1 && want != 1) ? 0 : strides[i - lead];
        }
        *out_ndim = n;
        return true;
    }
    default: return false;
    }
}

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
