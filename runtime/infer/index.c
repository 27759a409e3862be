/*
 * index.c - the inference of the indexing ops (index_select, gather,
 * scatter, index, index_put, one_hot, nonzero, masked_select:
 * ../cpu/index.c runs them), the same on every device, and the plan of
 * advanced indexing that the kernels of index and index_put walk too.
 */
#include <string.h>

#include "index.h"

#define TYPE_STR(t, buf) (em_type_str((t), (buf), sizeof(buf)), (buf))

static em_status check_gather_like(const char *op, const em_type *x, const em_type *ix, int d) {
    if (d < 0 || d >= (x->ndim ? x->ndim : 1))
        return em_error(EM_ERR_INDEX, "%s: dimension out of range for a %d-d tensor", op, x->ndim);
    if (!em_is_index_dtype(ix->dtype))
        return em_error(EM_ERR_DTYPE, "%s: expected an integer index, got %s", op, em_dtype_long_name(ix->dtype));
    if (ix->ndim != x->ndim && !(x->ndim == 0 && ix->ndim <= 1))
        return em_error(EM_ERR_SHAPE, "%s: index has %d dims but the input has %d", op, ix->ndim,
                        x->ndim);
    for (int e = 0; e < ix->ndim && x->ndim; e++)
        if (e != d && ix->shape[e] > x->shape[e])
            return em_error(EM_ERR_SHAPE,
                            "%s: index size %lld exceeds the input's %lld in dimension %d", op,
                            (long long)ix->shape[e], (long long)x->shape[e], e);
    return EM_OK;
}

em_status em_adv_plan_make(const char *op, const em_type *x, const em_type *ix, int k,
                          const em_attrs *a, em_adv_plan *p) {
    memset(p, 0, sizeof *p);
    p->k = k;
    if (k < 1 || k > x->ndim || a->n_dims != k)
        return em_error(EM_ERR_INDEX, "%s: %d index tensors for a %d-d tensor", op, k, x->ndim);
    bool indexed[EM_MAX_DIMS] = {false}, adjacent = true;
    for (int j = 0; j < k; j++) {
        int d = (int)a->dims[j];
        if (d < 0 || d >= x->ndim || indexed[d] || (j && d <= a->dims[j - 1]))
            return em_error(EM_ERR_INDEX, "%s: bad list of indexed dims", op);
        if (j && d != a->dims[j - 1] + 1) adjacent = false;
        indexed[d] = true;
        if (!em_is_index_dtype(ix[j].dtype))
            return em_error(EM_ERR_DTYPE,
                            "%s: tensors used as indices must be integer (or bool masks), got %s",
                            op, em_dtype_long_name(ix[j].dtype));
        int64_t bs[EM_MAX_DIMS];
        int nb;
        if (!em_broadcast_shapes(p->bshape, p->nb, ix[j].shape, ix[j].ndim, bs, &nb)) {
            char sa[128], sb[128];
            em_shape_str(p->bshape, p->nb, sa, sizeof sa);
            em_shape_str(ix[j].shape, ix[j].ndim, sb, sizeof sb);
            return em_error(EM_ERR_INDEX,
                            "%s: shape mismatch: indexing tensors could not be broadcast together "
                            "with shapes %s and %s",
                            op, sa, sb);
        }
        memcpy(p->bshape, bs, sizeof bs);
        p->nb = nb;
    }
    p->pos = adjacent ? (int)a->dims[0] : 0;
    int rest = 0;
    p->nd = x->ndim - k + p->nb;
    if (p->nd > EM_MAX_DIMS) return em_error(EM_ERR_VALUE, "%s: result has too many dims", op);
    for (int out = 0; out < p->nd; out++) {
        if (out >= p->pos && out < p->pos + p->nb) {
            p->shape[out] = p->bshape[out - p->pos];
            p->rest_dim[out] = -1;
            continue;
        }
        while (indexed[rest]) rest++;
        p->shape[out] = x->shape[rest];
        p->rest_dim[out] = rest++;
    }
    return EM_OK;
}

em_status infer_index_select(em_op op, const em_type *in, int n_in, const em_attrs *a,
                             em_type *out, int n_out) {
    const em_type *x = &in[0], *ix = &in[1];
    int d = (int)a->dims[0];
    if (d < 0 || d >= (x->ndim ? x->ndim : 1))
        return em_error(EM_ERR_INDEX, "index_select: dimension out of range for a %d-d tensor", x->ndim);
    if (!em_is_index_dtype(ix->dtype))
        return em_error(EM_ERR_DTYPE, "index_select: expected an integer index, got %s",
                        em_dtype_long_name(ix->dtype));
    if (ix->ndim > 1)
        return em_error(EM_ERR_INDEX, "index_select: the index must be 0-d or 1-d, got %d dims",
                        ix->ndim);
    out[0] = *x;
    if (x->ndim) out[0].shape[d] = em_shape_numel(ix->shape, ix->ndim);
    return EM_OK;
}

em_status infer_gather(em_op op, const em_type *in, int n_in, const em_attrs *a, em_type *out,
                       int n_out) {
    em_status st = check_gather_like("gather", &in[0], &in[1], (int)a->dims[0]);
    if (st != EM_OK) return st;
    out[0] = in[1];
    out[0].dtype = in[0].dtype;
    return EM_OK;
}

em_status infer_scatter(em_op op, const em_type *in, int n_in, const em_attrs *a, em_type *out,
                        int n_out) {
    const em_type *x = &in[0], *ix = &in[1], *src = &in[2];
    em_status st = check_gather_like("scatter", x, ix, (int)a->dims[0]);
    if (st != EM_OK) return st;
    if (src->ndim != 0) {
        if (src->ndim != ix->ndim)
            return em_error(EM_ERR_SHAPE, "scatter: src has %d dims but the index has %d", src->ndim,
                            ix->ndim);
        for (int e = 0; e < ix->ndim; e++)
            if (ix->shape[e] > src->shape[e])
                return em_error(EM_ERR_SHAPE, "scatter: index size %lld exceeds src's %lld in dimension %d",
                                (long long)ix->shape[e], (long long)src->shape[e], e);
        if (src->dtype != x->dtype)
            return em_error(EM_ERR_DTYPE, "scatter: expected src to have the input's dtype %s, got %s",
                            em_dtype_long_name(x->dtype), em_dtype_long_name(src->dtype));
    }
    out[0] = *x;
    return EM_OK;
}

em_status infer_index(em_op op, const em_type *in, int n_in, const em_attrs *a, em_type *out,
                      int n_out) {
    em_adv_plan p;
    em_status st = em_adv_plan_make("index", &in[0], in + 1, n_in - 1, a, &p);
    if (st != EM_OK) return st;
    out[0] = in[0];
    out[0].ndim = p.nd;
    memset(out[0].shape, 0, sizeof out[0].shape);
    memcpy(out[0].shape, p.shape, (size_t)p.nd * sizeof *p.shape);
    return EM_OK;
}

/* index_put(x, i_1..i_k, values): inputs are x, the k indices, then the
 * values, which broadcast to the shape x[i_1..i_k] would have. */
em_status infer_index_put(em_op op, const em_type *in, int n_in, const em_attrs *a, em_type *out,
                          int n_out) {
    em_adv_plan p;
    if (n_in < 3) return em_error(EM_ERR_VALUE, "index_put: expected a tensor, indices and values");
    em_status st = em_adv_plan_make("index_put", &in[0], in + 1, n_in - 2, a, &p);
    if (st != EM_OK) return st;
    const em_type *v = &in[n_in - 1];
    int64_t bs[EM_MAX_DIMS];
    int nb;
    if (!em_broadcast_shapes(v->shape, v->ndim, p.shape, p.nd, bs, &nb) ||
        !em_shape_eq(bs, nb, p.shape, p.nd)) {
        char s1[256], s2[256];
        em_shape_str(v->shape, v->ndim, s1, sizeof s1);
        em_shape_str(p.shape, p.nd, s2, sizeof s2);
        return em_error(EM_ERR_SHAPE, "index_put: shape mismatch: value tensor of shape %s cannot be "
                                      "broadcast to indexing result of shape %s", s1, s2);
    }
    out[0] = in[0];
    return EM_OK;
}

em_status infer_one_hot(em_op op, const em_type *in, int n_in, const em_attrs *a, em_type *out,
                        int n_out) {
    const em_type *x = &in[0];
    if (x->dtype != EM_DTYPE_I64)
        return em_error(EM_ERR_DTYPE, "one_hot: expected an int64 tensor of class indices, got %s",
                        em_dtype_long_name(x->dtype));
    if (a->n_shape != x->ndim + 1 || !em_shape_eq(a->shape, x->ndim, x->shape, x->ndim))
        return em_error(EM_ERR_SHAPE, "one_hot: the result shape must be the input's plus the classes");
    out[0] = *x;
    out[0].ndim = x->ndim + 1;
    out[0].shape[x->ndim] = a->shape[x->ndim];
    return EM_OK;
}

em_status infer_nonzero(em_op op, const em_type *in, int n_in, const em_attrs *a, em_type *out,
                        int n_out) {
    out[0] = in[0];
    out[0].dtype = EM_DTYPE_I64;
    out[0].ndim = 2; /* [count, ndim]: count known only after running */
    out[0].shape[0] = 0;
    out[0].shape[1] = in[0].ndim;
    return EM_OK;
}

em_status infer_masked_select(em_op op, const em_type *in, int n_in, const em_attrs *a,
                              em_type *out, int n_out) {
    if (in[1].dtype != EM_DTYPE_BOOL)
        return em_error(EM_ERR_DTYPE, "masked_select: expected a bool mask, got %s",
                        em_dtype_long_name(in[1].dtype));
    int64_t bs[EM_MAX_DIMS];
    int nb;
    if (!em_broadcast_shapes(in[0].shape, in[0].ndim, in[1].shape, in[1].ndim, bs, &nb))
    {
        char a[128], b[128];
        em_type_str(&in[0], a, sizeof a);
        em_type_str(&in[1], b, sizeof b);
        return em_error(EM_ERR_SHAPE, "masked_select: the mask %s does not broadcast with the input %s",
                        b, a);
    }
    out[0] = in[0];
    out[0].ndim = 1;
    out[0].shape[0] = 0; /* known only after running */
    return EM_OK;
}
