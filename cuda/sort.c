/*
 * sort.c - sorting and selection on the CUDA device: sort is the generated
 * bitonic kernel (codegen_cuda/sort_source.c: the CPU's stable order, one
 * block per line); topk and kthvalue are compositions of it through
 * dispatch (device-free: test_cuda_compositions runs them on the CPU
 * against its own kernels):
 *
 *   topk(x, k)      the first k of a sort (descending for the largest); not
 *                   `sorted`: those k put back in input order, by sorting
 *                   their indices and gathering the values that way;
 *   kthvalue(x, k)  the k-th of an ascending sort (NaN last, ties in input
 *                   order, as the CPU's selection);
 *   median          the lower median of that sort, or, where a line holds a
 *                   NaN, its first NaN (PyTorch's: the median of NaN is NaN);
 *   nanmedian       the lower median of the numbers (a line of NaNs: its
 *                   first); the position per line comes from a NaN count.
 *
 * Sorting a whole line per block is PyTorch's segmented-sort shape; one
 * line's network of P log^2 P / 2 compare-exchanges in global memory is
 * the price of being exact for any length (shared-memory tiles are later
 * work, to be measured on a GPU).
 */
#include <string.h>

#include "internal.h"
#include "ember/codegen_cuda.h"

static em_status sort_ptx(const void *spec, int sm, char **ptx) {
    (void)spec;
    return em_cuda_sort_ptx(sm, ptx);
}

/* The blocks' scratch, at most this many bytes (lines beyond the blocks
 * it allows wait for a block: the kernel is a grid-stride loop). */
#define SCRATCH_BYTES (256LL << 20)

em_status em_cuda_run_sort(cuda_dev *d, em_tensor *x, const em_attrs *a, em_tensor **out) {
    em_tensor *v = out[0], *iv = out[1];
    if (!em_shape_eq(v->strides, v->ndim, iv->strides, iv->ndim))
        return em_error(EM_ERR_INTERNAL, "cuda: sort: its two results are laid out differently");
    int dim = x->ndim ? (int)a->dims[0] : 0;
    em_cuda_line_geometry g;
    memset(&g, 0, sizeof g);
    g.len = x->ndim ? x->shape[dim] : 1;
    g.in_step = x->ndim ? x->strides[dim] : 0;
    g.out_step = v->ndim ? v->strides[dim] : 0;
    long long lines = 1;
    for (int i = 0; i < x->ndim; i++) {
        if (i == dim) continue;
        g.k_shape[g.k_ndim] = x->shape[i];
        g.k_in[g.k_ndim] = x->strides[i];
        g.k_out[g.k_ndim++] = v->strides[i];
        lines *= x->shape[i];
    }
    if (lines == 0 || g.len == 0) return EM_OK;
    long long P = 1;
    while (P < g.len) P <<= 1;
    long long blocks = em_cuda_dev_blocks_for(d, lines * EM_CUDA_THREADS),
              most = SCRATCH_BYTES / (P * 16);
    if (blocks > lines) blocks = lines;
    if (blocks > most) blocks = most > 0 ? most : 1;
    char name[64];
    em_cuda_sort_name(x->dtype, name, sizeof name);
    CUfunction fn;
    em_status st = em_cuda_dev_kernel(d, name, NULL, sort_ptx, NULL, &fn);
    uint64_t keys = 0, idx = 0;
    if (st == EM_OK) st = em_cuda_dev_scratch(d, (size_t)(blocks * P) * 8, &keys);
    if (st == EM_OK) st = em_cuda_dev_scratch(d, (size_t)(blocks * P) * 8, &idx);
    if (st == EM_OK) {
        int descending = a->descending;
        CUdeviceptr vp = em_cuda_address(v), ip = em_cuda_address(iv), xp = em_cuda_address(x),
                    kp = keys, xi = idx;
        void *params[] = {&lines, &g, &P, &descending, &vp, &ip, &xp, &kp, &xi};
        st = em_cuda_dev_launch(d, fn, blocks, params, name);
    }
    em_cuda_dev_scratch_free(d, keys);
    em_cuda_dev_scratch_free(d, idx);
    return st;
}

/* The first k along dim of t (a view), or, with keepdim false, position k
 * alone with dim dropped. */
static em_tensor *along(em_tensor *t, int dim, int64_t start, int64_t k, bool drop) {
    int64_t shape[EM_MAX_DIMS], strides[EM_MAX_DIMS];
    int nd = 0;
    for (int i = 0; i < t->ndim; i++) {
        if (i == dim && drop) continue;
        shape[nd] = i == dim ? k : t->shape[i];
        strides[nd++] = t->strides[i];
    }
    return em_tensor_alias(t, t->offset + (t->ndim ? start * t->strides[dim] : 0), shape, strides,
                           nd);
}

static em_status sorted_copy(em_tensor *x, int dim, bool descending, em_tensor **out) {
    em_attrs s;
    memset(&s, 0, sizeof s);
    s.n_dims = 1;
    s.dims[0] = dim;
    s.descending = descending;
    s.stable = true;
    return em_op_run(EM_OP_SORT, &x, 1, &s, out, 2);
}

/* a op b elementwise, b a number (an int64 0-d tensor on a's device). */
static em_tensor *with_number(em_op op, em_tensor *a, int64_t b) {
    em_tensor *n = em_tensor_scalar((double)b, EM_DTYPE_I64),
              *nd = n ? em_to_device(n, a->device) : NULL, *r = NULL;
    em_attrs at;
    memset(&at, 0, sizeof at);
    em_tensor *pair[2] = {a, nd};
    if (nd && em_op_run(op, pair, 2, &at, &r, 1) != EM_OK) r = NULL;
    em_tensor_release(n);
    em_tensor_release(nd);
    return r;
}

static em_tensor *where(em_tensor *cond, em_tensor *a, em_tensor *b) {
    em_attrs at;
    memset(&at, 0, sizeof at);
    em_tensor *ops[3] = {cond, a, b}, *r = NULL;
    return cond && a && b && em_op_run(EM_OP_WHERE, ops, 3, &at, &r, 1) == EM_OK ? r : NULL;
}

/* median and nanmedian: each line's position in the ascending sort (a
 * keepdim int64 tensor) from its NaN count, then the values and indices
 * gathered there. */
static em_status medians(em_op op, em_tensor *x, const em_attrs *a, em_tensor **out) {
    if (x->ndim == 0) { /* (one element: itself, at 0) */
        em_tensor *zero = em_tensor_scalar(0.0, EM_DTYPE_I64);
        em_status st = zero ? em_assign_copy(out[0], x) : em_last_status();
        if (st == EM_OK) st = em_assign_copy(out[1], zero);
        em_tensor_release(zero);
        return st;
    }
    int dim = (int)a->dims[0];
    int64_t n = x->shape[dim];
    em_tensor *full[2] = {NULL, NULL}, *nans = NULL, *isnan = NULL;
    em_status st = sorted_copy(x, dim, false, full);
    em_attrs r;
    memset(&r, 0, sizeof r);
    r.n_dims = 1;
    r.dims[0] = dim;
    r.keepdim = true;
    r.dtype = EM_DTYPE_I64;
    if (st == EM_OK && em_dtype_is_float(x->dtype)) {
        em_attrs e;
        memset(&e, 0, sizeof e);
        st = em_op_run(EM_OP_ISNAN, &x, 1, &e, &isnan, 1);
        if (st == EM_OK) st = em_op_run(EM_OP_SUM, &isnan, 1, &r, &nans, 1);
    } else if (st == EM_OK) { /* (no NaNs: a count of zeros) */
        int64_t shape[EM_MAX_DIMS];
        memcpy(shape, x->shape, sizeof shape);
        shape[dim] = 1;
        em_tensor *zero = em_tensor_scalar(0.0, EM_DTYPE_I64);
        nans = em_tensor_empty(shape, x->ndim, EM_DTYPE_I64, x->device);
        st = nans && zero ? em_assign_copy(nans, zero) : em_last_status();
        em_tensor_release(zero);
    }
    em_tensor *pos = NULL;
    if (st == EM_OK) {
        em_tensor *neg = op == EM_OP_MEDIAN ? NULL : with_number(EM_OP_MUL, nans, -1);
        em_tensor *m = neg ? with_number(EM_OP_ADD, neg, n) : NULL; /* n - nans */
        em_tensor_release(neg);
        if (op == EM_OP_MEDIAN) { /* a NaN: the first of them, at n - nans; else (n - 1) / 2 */
            em_tensor *has = with_number(EM_OP_GT, nans, 0),
                      *first_nan = with_number(EM_OP_SUB, nans, n);
            em_tensor *at_nan = first_nan ? with_number(EM_OP_MUL, first_nan, -1) : NULL;
            em_tensor *mid = with_number(EM_OP_MUL, nans, 0),
                      *midv = mid ? with_number(EM_OP_ADD, mid, (n - 1) / 2) : NULL;
            pos = where(has, at_nan, midv);
            em_tensor *objs[] = {has, first_nan, at_nan, mid, midv};
            for (int i = 0; i < 5; i++) em_tensor_release(objs[i]);
        } else { /* m = n - nans numbers: (m - 1) / 2, or 0 when none */
            em_tensor *none = m ? with_number(EM_OP_EQ, m, 0) : NULL,
                      *m1 = m ? with_number(EM_OP_SUB, m, 1) : NULL;
            em_tensor *half = m1 ? with_number(EM_OP_FLOOR_DIVIDE, m1, 2) : NULL;
            em_tensor *zero = m ? with_number(EM_OP_MUL, m, 0) : NULL;
            pos = where(none, zero, half);
            em_tensor *objs[] = {none, m1, half, zero};
            for (int i = 0; i < 4; i++) em_tensor_release(objs[i]);
        }
        em_tensor_release(m);
        if (!pos) st = em_last_status();
    }
    em_tensor *v = NULL, *i = NULL;
    if (st == EM_OK) {
        em_attrs g;
        memset(&g, 0, sizeof g);
        g.n_dims = 1;
        g.dims[0] = dim;
        em_tensor *pv[2] = {full[0], pos}, *pi[2] = {full[1], pos};
        st = em_op_run(EM_OP_GATHER, pv, 2, &g, &v, 1);
        if (st == EM_OK) st = em_op_run(EM_OP_GATHER, pi, 2, &g, &i, 1);
    }
    em_tensor *vr = v ? em_reshape(v, out[0]->shape, out[0]->ndim) : NULL;
    em_tensor *ir = i ? em_reshape(i, out[1]->shape, out[1]->ndim) : NULL;
    if (st == EM_OK && (!vr || !ir)) st = em_last_status();
    if (st == EM_OK) st = em_assign_copy(out[0], vr);
    if (st == EM_OK) st = em_assign_copy(out[1], ir);
    em_tensor *objs[] = {full[0], full[1], nans, isnan, pos, v, i, vr, ir};
    for (int j = 0; j < 9; j++) em_tensor_release(objs[j]);
    return st;
}

em_status em_cuda_select(em_op op, em_tensor *const *in, const em_attrs *a, em_tensor **out) {
    em_tensor *x = in[0];
    if (op == EM_OP_MEDIAN || op == EM_OP_NANMEDIAN) return medians(op, x, a, out);
    int dim = x->ndim ? (int)a->dims[0] : 0;
    bool top = op == EM_OP_TOPK;
    em_tensor *full[2] = {NULL, NULL};
    em_status st = sorted_copy(x, dim, top && a->descending, full);
    if (st != EM_OK) return st;
    int64_t start = top ? 0 : a->k - 1, count = top ? a->k : 1;
    bool drop = !top && !a->keepdim && x->ndim;
    em_tensor *v = along(full[0], dim, start, count, drop),
              *i = along(full[1], dim, start, count, drop);
    if (!v || !i) st = em_last_status();
    if (st == EM_OK && top && !a->sorted && x->ndim) {
        /* those k in input order: their indices sorted, the values gathered by that order */
        em_tensor *by_index[2] = {NULL, NULL}, *gathered = NULL;
        st = sorted_copy(i, dim, false, by_index);
        if (st == EM_OK) {
            em_attrs ga;
            memset(&ga, 0, sizeof ga);
            ga.n_dims = 1;
            ga.dims[0] = dim;
            em_tensor *pair[2] = {v, by_index[1]};
            st = em_op_run(EM_OP_GATHER, pair, 2, &ga, &gathered, 1);
        }
        if (st == EM_OK) st = em_assign_copy(out[0], gathered);
        if (st == EM_OK) st = em_assign_copy(out[1], by_index[0]);
        em_tensor_release(by_index[0]);
        em_tensor_release(by_index[1]);
        em_tensor_release(gathered);
    } else {
        if (st == EM_OK) st = em_assign_copy(out[0], v);
        if (st == EM_OK) st = em_assign_copy(out[1], i);
    }
    em_tensor *objs[] = {full[0], full[1], v, i};
    for (int j = 0; j < 4; j++) em_tensor_release(objs[j]);
    return st;
}
