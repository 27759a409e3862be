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
 *                   order, as the CPU's selection).
 *
 * Sorting a whole line per block is PyTorch's segmented-sort shape; one
 * line's network of P log^2 P / 2 compare-exchanges in global memory is
 * the price of being exact for any length (shared-memory tiles are later
 * work, to be measured on a GPU).
 */
#include <string.h>

#include "device_internal.h"
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
    long long blocks = em_cuda_dev_blocks_for(d, lines * EM_CUDA_THREADS), most = SCRATCH_BYTES / (P * 16);
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
        CUdeviceptr vp = em_cuda_address(v), ip = em_cuda_address(iv), xp = em_cuda_address(x), kp = keys, xi = idx;
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
    return em_tensor_alias(t, t->offset + (t->ndim ? start * t->strides[dim] : 0), shape, strides, nd);
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

em_status em_cuda_select(em_op op, em_tensor *const *in, const em_attrs *a, em_tensor **out) {
    em_tensor *x = in[0];
    int dim = x->ndim ? (int)a->dims[0] : 0;
    bool top = op == EM_OP_TOPK;
    em_tensor *full[2] = {NULL, NULL};
    em_status st = sorted_copy(x, dim, top && a->descending, full);
    if (st != EM_OK) return st;
    int64_t start = top ? 0 : a->k - 1, count = top ? a->k : 1;
    bool drop = !top && !a->keepdim && x->ndim;
    em_tensor *v = along(full[0], dim, start, count, drop), *i = along(full[1], dim, start, count, drop);
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
