/*
 * reduce.c - the CUDA device's reductions (codegen_cuda/reduce_source.c:
 * one block per output, one thread per output, or split across the GPU,
 * as em_cuda_reduce_plan picks; var, std and logsumexp after a first
 * reduction for their centers) and ops along lines (cumsum, cumprod,
 * softmax, log_softmax, layer_norm: codegen_cuda/line_source.c).
 */
#define _POSIX_C_SOURCE 200809L
#include <string.h>

#include "internal.h"
#include "ember/codegen_cuda.h"

/* ---- reductions ---- */

static em_status reduce_ptx(const void *spec, int sm, char **ptx) {
    return em_cuda_reduce_ptx(spec, 1, sm, ptx);
}

/* out = op over attrs' dims of x (out contiguous, its elements in the kept
 * dims' row-major order), each output folded around centers[o] (a device
 * array of doubles, or 0) with parameter p. */
static em_status reduce_into(cuda_dev *d, em_op op, em_tensor *x, const em_attrs *attrs,
                             em_tensor *out, CUdeviceptr centers, double p) {
    em_cuda_reduce_kernel k = {op, x->dtype, out->dtype, attrs->ord};
    em_status st = em_cuda_reduce_check(&k);
    if (st != EM_OK) return st;
    if (!em_tensor_is_contiguous(out))
        return em_error(EM_ERR_INTERNAL, "cuda: %s: the result is not contiguous", em_op_name(op));
    em_cuda_reduce_geometry g;
    memset(&g, 0, sizeof g);
    bool reduced[EM_MAX_DIMS] = {false};
    for (int i = 0; i < attrs->n_dims; i++)
        if (attrs->dims[i] >= 0 && attrs->dims[i] < x->ndim) reduced[attrs->dims[i]] = true;
    long long n_out = 1, n_red = 1;
    for (int dim = 0; dim < x->ndim; dim++) {
        if (reduced[dim]) {
            g.r_shape[g.r_ndim] = x->shape[dim];
            g.r_in[g.r_ndim++] = x->strides[dim];
            n_red *= x->shape[dim];
        } else {
            g.k_shape[g.k_ndim] = x->shape[dim];
            g.k_in[g.k_ndim++] = x->strides[dim];
            n_out *= x->shape[dim];
        }
    }
    long long step = 1; /* (the result: row-major over the kept dims) */
    for (int i = g.k_ndim - 1; i >= 0; i--) {
        g.k_out[i] = step;
        step *= g.k_shape[i];
    }
    if (n_out == 0) return EM_OK;
    long long chunks = 1;
    em_cuda_reduce_layout layout =
        em_cuda_reduce_plan(n_out, n_red, d->sms, EM_CUDA_THREADS, &chunks);
    bool block = layout != EM_CUDA_REDUCE_THREAD;
    char name[200], other[200];
    em_cuda_reduce_name(&k, layout, name, sizeof name);
    em_cuda_reduce_name(&k,
                        chunks > 1 ? EM_CUDA_REDUCE_JOIN
                        : block    ? EM_CUDA_REDUCE_THREAD
                                   : EM_CUDA_REDUCE_BLOCK,
                        other, sizeof other);
    CUfunction fn;
    if ((st = em_cuda_dev_kernel(d, name, other, reduce_ptx, &k, &fn)) != EM_OK) return st;
    CUdeviceptr o = em_cuda_address(out), i = em_cuda_address(x);
    if (chunks == 1) {
        void *params[] = {&n_out, &n_red, &g, &o, &i, &centers, &p};
        return em_cuda_dev_launch(
            d, fn, block ? (n_out < 65535 ? n_out : 65535) : em_cuda_dev_blocks_for(d, n_out),
            params, name);
    }
    CUfunction join; /* (loaded with the split kernel, as `other`) */
    uint64_t part = 0;
    if ((st = em_cuda_dev_kernel(d, other, NULL, reduce_ptx, &k, &join)) != EM_OK) return st;
    pthread_mutex_lock(&d->lock);
    st = em_cuda_alloc(d->alloc, (size_t)(n_out * chunks) * EM_CUDA_REDUCE_PARTIAL_BYTES, &part);
    pthread_mutex_unlock(&d->lock);
    if (st != EM_OK) return st;
    CUdeviceptr partials = part;
    void *split_params[] = {&n_out, &n_red, &g, &partials, &i, &centers, &p, &chunks};
    void *join_params[] = {&n_out, &n_red, &g, &o, &partials, &centers, &p, &chunks};
    st = em_cuda_dev_launch(d, fn, n_out * chunks, split_params, name);
    if (st == EM_OK) st = em_cuda_dev_launch(d, join, n_out, join_params, other);
    /* (the partials' block is reused only by work queued after the join,
     * on the same stream) */
    pthread_mutex_lock(&d->lock);
    em_cuda_release(d->alloc, part);
    pthread_mutex_unlock(&d->lock);
    return st;
}

/* A reduction. var and std fold squared deviations around the mean, and
 * logsumexp exp(x - max) around the max: a first reduction makes those
 * centers, in double (the fold's value type, as the CPU's first pass). */
em_status em_cuda_run_reduce(cuda_dev *d, em_op op, em_tensor *x, const em_attrs *attrs,
                             em_tensor *out) {
    em_reduction red = em_op_get(op)->reduction;
    if (red != EM_RED_SUMSQDEV && red != EM_RED_SUMEXP)
        return reduce_into(d, op, x, attrs, out, 0, attrs->ord);
    em_tensor *xf = NULL, *first = NULL, *centers = NULL;
    em_status st = EM_OK;
    /* (logsumexp of integers: of their float values, as the CPU's) */
    if (!(xf = em_cuda_dev_converted(d, x, red == EM_RED_SUMEXP ? out->dtype : EM_DTYPE_F64)))
        st = em_last_status();
    if (st == EM_OK) {
        em_dtype fd = red == EM_RED_SUMEXP ? xf->dtype : EM_DTYPE_F64;
        if (!(first = em_tensor_empty(out->shape, out->ndim, fd, out->device)))
            st = em_last_status();
    }
    if (st == EM_OK)
        st = reduce_into(d, red == EM_RED_SUMEXP ? EM_OP_AMAX : EM_OP_MEAN, xf, attrs, first, 0,
                         0.0);
    if (st == EM_OK && !(centers = em_cuda_dev_converted(d, first, EM_DTYPE_F64)))
        st = em_last_status();
    /* (var and std fold x itself around the mean of its float64 values) */
    if (st == EM_OK)
        st = red == EM_RED_SUMSQDEV
                 ? reduce_into(d, op, x, attrs, out, em_cuda_address(centers), attrs->correction)
                 : reduce_into(d, op, xf, attrs, out, em_cuda_address(centers), 0.0);
    em_tensor_release(xf);
    em_tensor_release(first);
    em_tensor_release(centers);
    return st;
}

/* ---- ops along lines: cumsum, cumprod, softmax, log_softmax, layer_norm ---- */

static em_status line_ptx(const void *spec, int sm, char **ptx) {
    return em_cuda_line_ptx(spec, 1, sm, ptx);
}

bool em_cuda_line_op(em_op op) {
    return op == EM_OP_CUMSUM || op == EM_OP_CUMPROD || op == EM_OP_SOFTMAX ||
           op == EM_OP_LOG_SOFTMAX || op == EM_OP_LAYER_NORM;
}

/* Along dim `dim` of x (the scans, softmax), or along its last n_norm dims
 * made one (layer_norm, whose input, weight and bias are made contiguous
 * for it), into out (new, contiguous). */
em_status em_cuda_run_lines(cuda_dev *d, em_op op, em_tensor *const *in, int n_in,
                            const em_attrs *attrs, em_tensor *out) {
    bool norm = op == EM_OP_LAYER_NORM;
    em_tensor *x[3] = {NULL};
    em_status st = EM_OK;
    for (int i = 0; i < n_in && i < 3 && st == EM_OK; i++) {
        if (norm)
            x[i] = em_contiguous(in[i]);
        else {
            x[i] = in[i];
            em_tensor_retain(x[i]);
        }
        if (!x[i]) st = em_last_status();
    }
    em_cuda_line_kernel k = {op, in[0]->dtype, out->dtype, norm ? n_in : 1};
    if (st == EM_OK) st = em_cuda_line_check(&k);
    em_cuda_line_geometry g;
    memset(&g, 0, sizeof g);
    long long n_lines = 1;
    if (st == EM_OK) {
        em_tensor *t = x[0];
        int first_line_dim = norm ? t->ndim - attrs->n_dims : (t->ndim ? (int)attrs->dims[0] : 0);
        g.len = 1;
        if (norm) { /* (contiguous: the trailing dims are one line) */
            for (int dim = first_line_dim; dim < t->ndim; dim++) g.len *= t->shape[dim];
            g.in_step = g.out_step = 1;
        } else if (t->ndim) {
            g.len = t->shape[first_line_dim];
            g.in_step = t->strides[first_line_dim];
            g.out_step = out->strides[first_line_dim];
        }
        for (int dim = 0; dim < t->ndim; dim++) {
            bool along = norm ? dim >= first_line_dim : dim == first_line_dim;
            if (along) continue;
            g.k_shape[g.k_ndim] = t->shape[dim];
            g.k_in[g.k_ndim] = t->strides[dim];
            g.k_out[g.k_ndim++] = out->strides[dim];
            n_lines *= t->shape[dim];
        }
    }
    if (st == EM_OK && n_lines > 0 && g.len > 0) {
        bool block = g.len >= 512 || n_lines < (long long)d->sms * 4;
        char name[200], other[200];
        em_cuda_line_name(&k, block ? EM_CUDA_LINE_BLOCK : EM_CUDA_LINE_THREAD, name, sizeof name);
        em_cuda_line_name(&k, block ? EM_CUDA_LINE_THREAD : EM_CUDA_LINE_BLOCK, other,
                          sizeof other);
        CUfunction fn;
        st = em_cuda_dev_kernel(d, name, other, line_ptx, &k, &fn);
        CUdeviceptr ptrs[4] = {em_cuda_address(out), em_cuda_address(x[0]),
                               n_in > 1 && norm ? em_cuda_address(x[1]) : 0,
                               n_in > 2 && norm ? em_cuda_address(x[2]) : 0};
        double eps = norm ? attrs->value : 0.0;
        void *params[7];
        int np = 0;
        params[np++] = &n_lines;
        params[np++] = &g;
        params[np++] = &ptrs[0];
        params[np++] = &ptrs[1];
        for (int i = 1; norm && i < n_in; i++) params[np++] = &ptrs[i + 1];
        params[np++] = &eps;
        if (st == EM_OK)
            st = em_cuda_dev_launch(d, fn,
                                    block ? (n_lines < 65535 ? n_lines : 65535)
                                          : em_cuda_dev_blocks_for(d, n_lines),
                                    params, name);
    }
    for (int i = 0; i < 3; i++) em_tensor_release(x[i]);
    return st;
}
