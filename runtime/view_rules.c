/*
 * view_rules.c - what each view op does, said once: from its input's type
 * (and strides) and its attributes, its result's shape (and strides and
 * change of offset). Each VIEW row of ops.def has its rule, view_<name>
 * (em_view_rule); inference asks them for shapes only, which checks
 * the attributes, and the eager view kernel and the code generators' layout
 * propagation (em_view_geometry) ask for strides too, on inputs inference
 * already accepted.
 */
#include <string.h>

#include "kernels.h"

#define TYPE_STR(t, buf) (em_type_str((t), (buf), sizeof(buf)), (buf))

/* The input's shape as the result's, to be changed. */
static void start_from(const em_type *x, const int64_t *strides, em_view_geom *r) {
    memset(r, 0, sizeof *r);
    r->ndim = x->ndim;
    memcpy(r->shape, x->shape, (size_t)x->ndim * sizeof *r->shape);
    if (strides) memcpy(r->strides, strides, (size_t)x->ndim * sizeof *r->strides);
}

/* The dim that slice and select work on (attrs dims[0]), or -1 with an error. */
static int one_dim(em_op op, const em_type *x, const em_attrs *a) {
    int d = a->n_dims == 1 ? (int)a->dims[0] : -1;
    if (d < 0 || d >= x->ndim)
        em_error(EM_ERR_INDEX, "%s: dimension out of range for a %d-d tensor", em_op_name(op), x->ndim);
    return d < x->ndim ? d : -1;
}

/* dims[0] from `start` by `step`, shape[d] elements of it. */
em_status view_slice(const em_type *x, const int64_t *strides, const em_attrs *a, em_view_geom *r) {
    int d = one_dim(EM_OP_SLICE, x, a);
    if (d < 0) return em_last_status();
    int64_t size = x->shape[d], start = (int64_t)a->start, step = (int64_t)a->step;
    int64_t len = a->n_shape == x->ndim ? a->shape[d] : -1;
    if (step <= 0) return em_error(EM_ERR_VALUE, "slice: step must be greater than zero");
    if (len < 0 || start < 0 || (len > 0 && start + (len - 1) * step >= size) || start > size)
        return em_error(EM_ERR_INDEX, "slice: %lld elements from %lld by %lld do not fit dimension %d of size %lld",
                        (long long)len, (long long)start, (long long)step, d, (long long)size);
    start_from(x, strides, r);
    r->shape[d] = len;
    if (strides) {
        r->strides[d] = strides[d] * step;
        r->offset = start * strides[d];
    }
    return EM_OK;
}

/* dims[0] fixed at index `start`; the dim goes away. */
em_status view_select(const em_type *x, const int64_t *strides, const em_attrs *a, em_view_geom *r) {
    int d = one_dim(EM_OP_SELECT, x, a);
    if (d < 0) return em_last_status();
    int64_t size = x->shape[d], start = (int64_t)a->start;
    if (start < 0 || start >= size)
        return em_error(EM_ERR_INDEX, "select: index %lld is out of bounds for dimension %d with size %lld",
                        (long long)start, d, (long long)size);
    memset(r, 0, sizeof *r);
    for (int i = 0; i < x->ndim; i++) {
        if (i == d) continue;
        r->shape[r->ndim] = x->shape[i];
        if (strides) r->strides[r->ndim] = strides[i];
        r->ndim++;
    }
    if (strides) r->offset = start * strides[d];
    return EM_OK;
}

/* PyTorch's rule for viewing a reshape: split the old dims into chunks that
 * are contiguous among themselves; each chunk must map onto whole new dims. */
static bool reshape_strides(const int64_t *shape, const int64_t *strides, int ndim, const int64_t *nshape,
                            int nnd, int64_t *nstrides) {
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

/* The same elements in a new shape (one -1 inferred); a view when the
 * strides allow it, else r->needs_copy. */
em_status view_reshape(const em_type *x, const int64_t *strides, const em_attrs *a, em_view_geom *r) {
    char t[256], s[256];
    int64_t known = 1, numel = em_shape_numel(x->shape, x->ndim);
    int infer_at = -1;
    for (int i = 0; i < a->n_shape; i++) {
        if (a->shape[i] == -1) {
            if (infer_at >= 0) return em_error(EM_ERR_VALUE, "reshape: only one dimension can be inferred");
            infer_at = i;
        } else if (a->shape[i] < 0) {
            return em_error(EM_ERR_VALUE, "reshape: invalid shape dimension %lld", (long long)a->shape[i]);
        } else if (__builtin_mul_overflow(known, a->shape[i], &known)) {
            return em_error(EM_ERR_VALUE, "reshape: shape %s has more elements than fit in memory",
                            (em_shape_str(a->shape, a->n_shape, s, sizeof s), s));
        }
    }
    memset(r, 0, sizeof *r);
    r->ndim = a->n_shape;
    memcpy(r->shape, a->shape, (size_t)a->n_shape * sizeof *r->shape);
    if (infer_at >= 0 && known != 0 && numel % known == 0)
        r->shape[infer_at] = numel / known;
    else if (infer_at >= 0 || known != numel)
        return em_error(EM_ERR_SHAPE, "reshape: shape %s is invalid for input %s of %lld elements",
                        (em_shape_str(a->shape, a->n_shape, s, sizeof s), s), TYPE_STR(x, t), (long long)numel);
    if (strides) r->needs_copy = !reshape_strides(x->shape, strides, x->ndim, r->shape, r->ndim, r->strides);
    return EM_OK;
}

/* The dims reordered: result dim i is input dim dims[i]. */
em_status view_permute(const em_type *x, const int64_t *strides, const em_attrs *a, em_view_geom *r) {
    char t[256];
    if (a->n_dims != x->ndim)
        return em_error(EM_ERR_VALUE, "permute: number of dims in the permutation (%d) does not match the input %s",
                        a->n_dims, TYPE_STR(x, t));
    bool seen[EM_MAX_DIMS] = {false};
    memset(r, 0, sizeof *r);
    r->ndim = x->ndim;
    for (int i = 0; i < a->n_dims; i++) {
        int64_t d = a->dims[i];
        if (d < 0 || d >= x->ndim || seen[d])
            return em_error(EM_ERR_VALUE,
                            "permute: dims are not a permutation of 0..%d (repeated or out of range dim %lld "
                            "for the input %s)",
                            x->ndim - 1, (long long)d, TYPE_STR(x, t));
        seen[d] = true;
        r->shape[i] = x->shape[d];
        if (strides) r->strides[i] = strides[d];
    }
    return EM_OK;
}

/* Size-1 dims grow and new dims appear in front, with stride 0 (-1: the
 * input's size). */
em_status view_expand(const em_type *x, const int64_t *strides, const em_attrs *a, em_view_geom *r) {
    char t[256], s[256];
    int n = a->n_shape, lead = n - x->ndim;
    memset(r, 0, sizeof *r);
    r->ndim = n;
    for (int i = 0; i < n && lead >= 0; i++) {
        int64_t want = a->shape[i], have = i < lead ? 1 : x->shape[i - lead];
        if (want == -1 && i >= lead) want = have;
        if (want < 0 || (i >= lead && want != have && have != 1)) {
            lead = -1;
            break;
        }
        r->shape[i] = want;
        if (strides) r->strides[i] = i < lead || (have == 1 && want != 1) ? 0 : strides[i - lead];
    }
    if (lead < 0)
        return em_error(EM_ERR_SHAPE,
                        "expand: cannot expand %s to shape %s (only dims of size 1 can grow, and new dims go in "
                        "front)",
                        TYPE_STR(x, t), (em_shape_str(a->shape, a->n_shape, s, sizeof s), s));
    return EM_OK;
}

/* The diagonal `diagonal` of the matrices over dims[0] and dims[1] (two
 * different dims), as a last dim after the others. */
em_status view_diagonal(const em_type *x, const int64_t *strides, const em_attrs *a, em_view_geom *r) {
    char t[256];
    int d1 = a->n_dims == 2 ? (int)a->dims[0] : -1, d2 = a->n_dims == 2 ? (int)a->dims[1] : -1;
    if (d1 < 0 || d2 < 0 || d1 >= x->ndim || d2 >= x->ndim || d1 == d2)
        return em_error(EM_ERR_INDEX, "diagonal: dims %d and %d of %s must be two different dims", d1, d2,
                        TYPE_STR(x, t));
    int64_t k = a->diagonal, n1 = x->shape[d1], n2 = x->shape[d2];
    int64_t len = k >= 0 ? (n2 - k < n1 ? n2 - k : n1) : (n1 + k < n2 ? n1 + k : n2);
    if (len < 0) len = 0;
    memset(r, 0, sizeof *r);
    for (int i = 0; i < x->ndim; i++) {
        if (i == d1 || i == d2) continue;
        r->shape[r->ndim] = x->shape[i];
        if (strides) r->strides[r->ndim] = strides[i];
        r->ndim++;
    }
    r->shape[r->ndim] = len;
    if (strides) {
        r->strides[r->ndim] = strides[d1] + strides[d2];
        r->offset = len == 0 ? 0 : k >= 0 ? k * strides[d2] : -k * strides[d1];
    }
    r->ndim++;
    return EM_OK;
}

em_status em_strided_view_fits(em_op op, const em_type *x, const int64_t *shape, int ndim, const int64_t *stride,
                               int n_stride, int64_t offset) {
    const char *name = em_op_name(op);
    if (x->ndim != 1) return em_error(EM_ERR_SHAPE, "%s: the input must be 1-d, got %d dims", name, x->ndim);
    if (n_stride != ndim)
        return em_error(EM_ERR_SHAPE, "%s: %d strides for a view of %d dims", name, n_stride, ndim);
    int64_t last = offset; /* the view's last element */
    bool empty = false;
    for (int d = 0; d < ndim; d++) {
        if (shape[d] < 0 || stride[d] < 0)
            return em_error(EM_ERR_VALUE, "%s: negative size or stride in dim %d", name, d);
        empty |= shape[d] == 0;
        if (shape[d] > 0 && stride[d] > 0 && (shape[d] - 1) > (INT64_MAX - last) / stride[d]) last = INT64_MAX;
        else last += (shape[d] - 1) * stride[d];
    }
    if (offset < 0 || (!empty && last >= x->shape[0]))
        return em_error(EM_ERR_INDEX, "%s: a view from element %lld reaching element %lld does not fit an input "
                                      "of %lld elements", name, (long long)offset, (long long)last,
                        (long long)x->shape[0]);
    return EM_OK;
}

/* The elements [offset + sum(i[d] * stride[d])] of a 1-d input. */
em_status view_as_strided(const em_type *x, const int64_t *strides, const em_attrs *a, em_view_geom *r) {
    em_status st = em_strided_view_fits(EM_OP_AS_STRIDED, x, a->shape, a->n_shape, a->stride, a->n_stride, a->offset);
    if (st != EM_OK) return st;
    memset(r, 0, sizeof *r);
    r->ndim = a->n_shape;
    memcpy(r->shape, a->shape, (size_t)a->n_shape * sizeof *r->shape);
    if (strides) {
        for (int d = 0; d < a->n_shape; d++) r->strides[d] = a->stride[d] * strides[0];
        r->offset = a->offset * strides[0];
    }
    return EM_OK;
}

em_view_fn em_view_rule(em_op op) {
    static const em_view_fn rules[EM_OP_COUNT] = {
#define EM_OP(E, n, kind, ni, no, dts, pr, fl, at, gr) VIEW_RULE_##kind(E, n)
#define VIEW_RULE_VIEW(E, n) [EM_OP_##E] = view_##n,
#define VIEW_RULE_UNARY(E, n)
#define VIEW_RULE_BINARY(E, n)
#define VIEW_RULE_TERNARY(E, n)
#define VIEW_RULE_CAST(E, n)
#define VIEW_RULE_REDUCE(E, n)
#define VIEW_RULE_SCAN(E, n)
#define VIEW_RULE_MATMUL(E, n)
#define VIEW_RULE_COPY(E, n)
#define VIEW_RULE_FACTORY(E, n)
#define VIEW_RULE_RANDOM(E, n)
#define VIEW_RULE_FUSED(E, n)
#define VIEW_RULE_OTHER(E, n)
#include "ember/ops.def"
#undef EM_OP
    };
    return (unsigned)op < EM_OP_COUNT ? rules[op] : NULL;
}

bool em_view_geometry(em_op op, const int64_t *shape, const int64_t *strides, int ndim, const em_attrs *attrs,
                      int64_t *out_shape, int64_t *out_strides, int *out_ndim, int64_t *offset_delta) {
    em_view_fn rule = em_view_rule(op);
    em_type x;
    memset(&x, 0, sizeof x);
    x.ndim = ndim;
    memcpy(x.shape, shape, (size_t)ndim * sizeof *shape);
    em_view_geom r;
    if (!rule || rule(&x, strides, attrs, &r) != EM_OK || r.needs_copy) return false;
    memcpy(out_shape, r.shape, sizeof r.shape);
    memcpy(out_strides, r.strides, sizeof r.strides);
    *out_ndim = r.ndim;
    *offset_delta = r.offset;
    return true;
}

em_status em_view_apply(em_op op, em_tensor *src, const em_attrs *attrs, em_tensor *(*dense_copy)(em_tensor *),
                        em_tensor **out) {
    int64_t shape[EM_MAX_DIMS], strides[EM_MAX_DIMS], off = 0;
    int nd = 0;
    em_tensor *copy = NULL;
    if (!em_view_geometry(op, src->shape, src->strides, src->ndim, attrs, shape, strides, &nd, &off)) {
        if (op != EM_OP_RESHAPE) return em_error(EM_ERR_INTERNAL, "%s: no view geometry", em_op_name(op));
        /* a reshape of strides that allow no view: of a copy, made dense first */
        if (!(copy = dense_copy(src))) return em_last_status();
        src = copy;
        em_view_geometry(op, src->shape, src->strides, src->ndim, attrs, shape, strides, &nd, &off);
    }
    out[0] = em_tensor_alias(src, src->offset + off, shape, strides, nd);
    em_tensor_release(copy);
    return out[0] ? EM_OK : em_last_status();
}

em_status em_flip_apply(em_tensor *x, const em_attrs *a, em_tensor *out, em_status (*copy)(em_tensor *, em_tensor *)) {
    int64_t strides[EM_MAX_DIMS], offset = x->offset;
    memcpy(strides, x->strides, sizeof strides);
    for (int i = 0; i < a->n_dims && x->ndim; i++) { /* (a negative-stride view, read in order) */
        int d = (int)a->dims[i];
        if (x->shape[d] == 0) return EM_OK;
        offset += (x->shape[d] - 1) * strides[d];
        strides[d] = -strides[d];
    }
    em_tensor *v = em_tensor_alias(x, offset, x->shape, strides, x->ndim);
    em_status st = v ? copy(out, v) : em_last_status();
    em_tensor_release(v);
    return st;
}

em_status em_roll_apply(em_tensor *x, const em_attrs *a, em_tensor *out, em_status (*copy)(em_tensor *, em_tensor *)) {
    if (x->numel == 0) return EM_OK;
    int k = a->n_dims;
    for (int mask = 0; mask < (1 << k); mask++) {
        int64_t soff = x->offset, doff = out->offset, shape[EM_MAX_DIMS];
        memcpy(shape, x->shape, sizeof shape);
        for (int i = 0; i < k; i++) {
            int d = (int)a->dims[i];
            int64_t n = x->shape[d], s = ((a->shifts[i] % n) + n) % n;
            /* block 0: out[s, n) <- in[0, n-s); block 1: out[0, s) <- in[n-s, n) */
            bool second = (mask >> i) & 1;
            shape[d] = second ? s : n - s;
            soff += (second ? n - s : 0) * x->strides[d];
            doff += (second ? 0 : s) * out->strides[d];
        }
        if (em_shape_numel(shape, x->ndim) == 0) continue;
        em_tensor *src = em_tensor_alias(x, soff, shape, x->strides, x->ndim);
        em_tensor *dst = src ? em_tensor_alias(out, doff, shape, out->strides, x->ndim) : NULL;
        em_status st = dst ? copy(dst, src) : em_last_status();
        em_tensor_release(src);
        em_tensor_release(dst);
        if (st != EM_OK) return st;
    }
    return EM_OK;
}
