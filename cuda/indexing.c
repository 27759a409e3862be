/*
 * indexing.c - the CUDA device's indexing and joining ops: index (x[i, j]),
 * index_put (x[i, j] = v, and += v with accumulate), index_select (an
 * embedding's lookup), each one advanced-indexing kernel
 * (codegen_cuda/adv_source.c) over the plan every device shares
 * (runtime/infer/index.h); and cat, each input copied into its slice of
 * the result by the elementwise copy kernel.
 *
 * Index tensors of any integer dtype are made int64 on the device first.
 * An index out of range raises the CPU's IndexError, read back from a word
 * the kernel reports into (a wait for the kernel), where PyTorch's
 * device-side assert would end the process's use of the GPU.
 */
#include <string.h>

#include "../runtime/infer/index.h"
#include "internal.h"
#include "ember/codegen_cuda.h"

bool em_cuda_indexing_op(em_op op) {
    return op == EM_OP_INDEX || op == EM_OP_INDEX_PUT || op == EM_OP_INDEX_SELECT ||
           op == EM_OP_CAT;
}

static em_status adv_ptx(const void *spec, int sm, char **ptx) {
    return em_cuda_adv_ptx(spec, 1, sm, ptx);
}

/* The failing index tensor's dim for value v: the first whose range v
 * misses (every index was checked on the device; this only names it). */
static int failing_dim(const em_cuda_adv_geometry *g, const int64_t *dims, long long v) {
    for (int j = 0; j < g->k; j++) {
        long long w = v < 0 && g->wrap ? v + g->size[j] : v;
        if (w < 0 || w >= g->size[j]) return (int)dims[j];
    }
    return (int)dims[0];
}

/* Runs advanced indexing: get (out[p] = x[at(p)], out contiguous over the
 * plan's shape) or put (out[at(p)] = from[p], where x is out, already a
 * copy of the input) over the k int64 index tensors ix along dims. */
static em_status run_adv(cuda_dev *d, const char *op_name, em_op op, em_tensor *x,
                         em_tensor *const *ix, int k, const int64_t *dims, bool wrap,
                         bool accumulate, em_tensor *out, em_tensor *from) {
    em_type xt = em_tensor_type(x), it[EM_MAX_DIMS];
    for (int j = 0; j < k; j++) it[j] = em_tensor_type(ix[j]);
    em_attrs a;
    memset(&a, 0, sizeof a);
    a.n_dims = k;
    for (int j = 0; j < k; j++) a.dims[j] = dims[j];
    em_adv_plan p;
    em_status st = em_adv_plan_make(op_name, &xt, it, k, &a, &p);
    if (st != EM_OK) return st;
    em_cuda_adv_kernel kk = {op, x->dtype, accumulate};
    if ((st = em_cuda_adv_check(&kk)) != EM_OK) return st;
    int64_t other[EM_MAX_DIMS] = {0}, n = 1;
    for (int i = 0; i < p.nd; i++) n *= p.shape[i];
    if (n == 0) return EM_OK;
    if (op == EM_OP_INDEX) {
        em_contiguous_strides(p.shape, p.nd, other);
    } else { /* (the values, broadcast to the plan's shape: aligned right) */
        for (int i = 0; i < from->ndim; i++) {
            int r = p.nd - from->ndim + i;
            other[r] = from->shape[i] == 1 ? 0 : from->strides[i];
        }
    }
    em_cuda_adv_geometry g;
    em_cuda_adv_geometry_of(x, (const em_tensor *const *)ix, k, dims, p.nb, p.pos, p.shape,
                            p.rest_dim, p.nd, other, wrap, &g);
    char name[96];
    em_cuda_adv_name(&kk, name, sizeof name);
    CUfunction fn;
    if ((st = em_cuda_dev_kernel(d, name, NULL, adv_ptx, &kk, &fn)) != EM_OK) return st;
    uint64_t bad = 0;
    if ((st = em_cuda_dev_word(d, (long long)INT64_MIN, &bad)) != EM_OK) return st;
    CUdeviceptr o = em_cuda_address(out),
                f = op == EM_OP_INDEX ? em_cuda_address(x) : em_cuda_address(from), w = bad;
    long long count = n;
    void *params[] = {&count, &g, &o, &f, &w};
    st = em_cuda_dev_launch(d, fn, em_cuda_dev_blocks_for(d, count), params, name);
    long long seen = (long long)INT64_MIN;
    if (st == EM_OK) st = em_cuda_dev_read_word(d, bad, &seen);
    em_cuda_dev_scratch_free(d, bad);
    if (st == EM_OK && seen != (long long)INT64_MIN) {
        int dim = failing_dim(&g, dims, seen);
        st = em_error(EM_ERR_INDEX,
                      "%s: index %lld is out of bounds for dimension %d with size %lld", op_name,
                      seen, dim, (long long)x->shape[dim]);
    }
    return st;
}

/* The index tensors in[first..first+k) as int64 on the device (new
 * references in ix[]); false (with the error) when one cannot be. */
static bool int64_indices(cuda_dev *d, em_tensor *const *in, int k, em_device dev, em_tensor **ix) {
    for (int j = 0; j < k; j++) {
        em_tensor *moved = em_cuda_dev_on_device(in[j], dev);
        ix[j] = moved ? em_cuda_dev_converted(d, moved, EM_DTYPE_I64) : NULL;
        em_tensor_release(moved);
        if (!ix[j]) {
            for (int i = 0; i < j; i++) em_tensor_release(ix[i]);
            return false;
        }
    }
    return true;
}

static em_status run_index(cuda_dev *d, em_op op, em_tensor *const *in, int n_in,
                           const em_attrs *attrs, em_tensor *out) {
    bool put = op == EM_OP_INDEX_PUT;
    int k = put ? n_in - 2 : n_in - 1;
    if (k < 1 || k > EM_MAX_DIMS)
        return em_error(EM_ERR_INDEX, "%s: 1 to %d index tensors, got %d", em_op_name(op),
                        EM_MAX_DIMS, k);
    em_tensor *ix[EM_MAX_DIMS] = {NULL}, *values = NULL, *moved = NULL;
    if (!int64_indices(d, in + 1, k, out->device, ix)) return em_last_status();
    em_status st = EM_OK;
    if (put) {
        moved = em_cuda_dev_on_device(in[n_in - 1], out->device);
        values = moved ? em_cuda_dev_converted(d, moved, out->dtype) : NULL;
        if (!values) st = em_last_status();
        if (st == EM_OK) st = em_cuda_dev_copy_into(d, out, in[0]); /* (out starts as x) */
    }
    if (st == EM_OK)
        st = run_adv(d, em_op_name(op), op, put ? out : in[0], ix, k, attrs->dims, true,
                     put && attrs->accumulate, out, values);
    for (int j = 0; j < k; j++) em_tensor_release(ix[j]);
    em_tensor_release(values);
    em_tensor_release(moved);
    return st;
}

/* x.index_select(dim, i): x[..., i, ...] with i flattened, negative
 * values out of range (as the CPU's). */
static em_status run_index_select(cuda_dev *d, em_tensor *const *in, const em_attrs *attrs,
                                  em_tensor *out) {
    em_tensor *x = in[0];
    if (x->ndim == 0)
        return em_error(EM_ERR_NOT_IMPLEMENTED,
                        "index_select: no kernel for it on cuda yet for a 0-d input");
    em_tensor *ix = NULL;
    if (!int64_indices(d, in + 1, 1, out->device, &ix)) return em_last_status();
    int64_t flat = ix->numel;
    em_tensor *line = em_reshape(ix, &flat, 1);
    em_status st = line ? EM_OK : em_last_status();
    if (st == EM_OK)
        st = run_adv(d, "index_select", EM_OP_INDEX, x, &line, 1, attrs->dims, false, false, out,
                     NULL);
    em_tensor_release(line);
    em_tensor_release(ix);
    return st;
}

/* cat: each input into its slice of out along dims[0] (1-d empty inputs,
 * which PyTorch's cat skips, add nothing); device-free. */
em_status em_cuda_cat(em_tensor *const *in, int n_in, const em_attrs *attrs, em_tensor *out) {
    int dim = (int)attrs->dims[0];
    int64_t at = 0;
    for (int i = 0; i < n_in; i++) {
        em_tensor *t = in[i];
        if (t->numel == 0) {
            if (t->ndim == out->ndim) at += t->shape[dim];
            continue;
        }
        int64_t shape[EM_MAX_DIMS];
        memcpy(shape, out->shape, sizeof shape);
        shape[dim] = t->shape[dim];
        em_tensor *slice = em_tensor_alias(out, out->offset + at * out->strides[dim], shape,
                                           out->strides, out->ndim);
        if (!slice) return em_last_status();
        em_status st = em_assign_copy(slice, t);
        em_tensor_release(slice);
        if (st != EM_OK) return st;
        at += t->shape[dim];
    }
    return EM_OK;
}

em_status em_cuda_run_indexing(cuda_dev *d, em_op op, em_tensor *const *in, int n_in,
                               const em_attrs *attrs, em_tensor **out) {
    switch (op) {
    case EM_OP_INDEX_SELECT:
        return run_index_select(d, in, attrs, out[0]);
    case EM_OP_CAT:
        return em_cuda_cat(in, n_in, attrs, out[0]);
    default:
        return run_index(d, op, in, n_in, attrs, out[0]);
    }
}

/* ---- gather and scatter ---- */

static em_status index_ptx(const void *spec, int sm, char **ptx) {
    return em_cuda_index_ptx(spec, 1, sm, ptx);
}

/* out = gather(x, d, index), or x with src scattered into it along d
 * (added with accumulate). A word on the device catches the first index
 * out of range; it is read back (which waits for the kernel), and such an
 * index raises the CPU's error. */
em_status em_cuda_run_gather_scatter(cuda_dev *d, em_op op, em_tensor *const *in,
                                     const em_attrs *attrs, em_tensor *out) {
    bool scatter = op == EM_OP_SCATTER;
    int dim = (int)attrs->dims[0];
    em_tensor *x = in[0];
    em_cuda_index_kernel k = {op, x->dtype, in[1]->dtype, scatter && attrs->accumulate};
    em_status st = em_cuda_index_check(&k);
    if (st != EM_OK) return st;
    em_tensor *ix = em_cuda_dev_on_device(in[1], out->device);
    em_tensor *moved = scatter ? em_cuda_dev_on_device(in[2], out->device) : NULL;
    em_tensor *src = moved ? em_cuda_dev_converted(d, moved, x->dtype) : NULL;
    if (!ix || (scatter && !src)) st = em_last_status();
    if (st == EM_OK && scatter)
        st = em_cuda_run_elementwise(d, EM_OP_CAST, &x, 1, out); /* (out starts as x) */
    uint64_t bad = 0;
    long long seen = INT64_MIN;
    if (st == EM_OK && ix->numel > 0) {
        st = em_cuda_dev_word(d, seen, &bad);
        em_cuda_index_geometry g;
        if (scatter)
            em_cuda_scatter_geometry(out, ix, src, dim, &g);
        else
            em_cuda_gather_geometry(x, ix, out, dim, &g);
        char name[96];
        em_cuda_index_name(&k, name, sizeof name);
        CUfunction fn;
        if (st == EM_OK) st = em_cuda_dev_kernel(d, name, NULL, index_ptx, &k, &fn);
        long long n = ix->numel;
        CUdeviceptr o = em_cuda_address(out), a = em_cuda_address(ix);
        CUdeviceptr b = scatter ? em_cuda_address(src) : em_cuda_address(x), w = bad;
        /* (gather: out, x, index; scatter: out, index, src) */
        void *params[] = {
            &n, &g, &o, scatter ? (void *)&a : (void *)&b, scatter ? (void *)&b : (void *)&a, &w};
        if (st == EM_OK) st = em_cuda_dev_launch(d, fn, em_cuda_dev_blocks_for(d, n), params, name);
        if (st == EM_OK) st = em_cuda_dev_read_word(d, bad, &seen);
        if (st == EM_OK && seen != INT64_MIN)
            st = em_error(EM_ERR_RUNTIME,
                          "%s: index %lld is out of bounds for dimension %d with size %lld",
                          em_op_name(op), seen, dim, (long long)(x->ndim ? x->shape[dim] : 1));
        em_cuda_dev_scratch_free(d, bad);
    }
    em_tensor_release(ix);
    em_tensor_release(moved);
    em_tensor_release(src);
    return st;
}
