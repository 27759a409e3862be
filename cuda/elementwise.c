/*
 * elementwise.c - the CUDA device's elementwise ops and casts, and what is
 * built on its copy kernel: contiguous(), reshape's copy, dtype
 * conversions. Kernels are the generated ones (codegen_cuda/ew_source.c):
 * the 16-byte-vector layout where every operand is contiguous and aligned,
 * any strides and broadcasts otherwise; a host scalar operand is copied
 * over first.
 */
#define _POSIX_C_SOURCE 200809L
#include <string.h>

#include "internal.h"
#include "ember/codegen_cuda.h"

/* A 0-d host operand (a Python number's wrapping, a CPU scalar) copied to
 * the device, where a kernel can read it. */
em_tensor *em_cuda_dev_on_device(em_tensor *t, em_device dev) {
    if (t->device.type == EM_DEVICE_CUDA) {
        em_tensor_retain(t);
        return t;
    }
    return em_to_device(t, dev);
}

static em_status ew_ptx(const void *spec, int sm, char **ptx) {
    return em_cuda_ew_ptx(spec, 1, sm, ptx);
}

/* Is t contiguous over out's shape and its address 16-byte aligned? */
static bool vector_ready(const em_tensor *t, const em_tensor *out) {
    return em_tensor_is_contiguous(t) && em_shape_eq(t->shape, t->ndim, out->shape, out->ndim) &&
           (em_cuda_address(t) & 15) == 0;
}

/* out = op(in...) elementwise (a cast: one operand), out given. */
em_status em_cuda_run_elementwise(cuda_dev *d, em_op op, em_tensor *const *in, int n_in,
                                  em_tensor *out) {
    if (n_in > 3)
        return em_error(EM_ERR_NOT_IMPLEMENTED, "cuda: %s: more than 3 operands", em_op_name(op));
    em_tensor *x[3] = {NULL};
    em_status st = EM_OK;
    for (int i = 0; i < n_in && st == EM_OK; i++)
        if (!(x[i] = em_cuda_dev_on_device(in[i], out->device))) st = em_last_status();
    em_cuda_ew_kernel k = {op, n_in, {0}, out->dtype};
    for (int i = 0; i < n_in && st == EM_OK; i++) k.in[i] = x[i]->dtype;
    if (st == EM_OK) st = em_cuda_ew_check(&k);
    long long n = out->numel;
    if (st == EM_OK && n > 0) {
        bool contig = em_tensor_is_contiguous(out) && (em_cuda_address(out) & 15) == 0;
        for (int i = 0; i < n_in; i++) contig = contig && vector_ready(x[i], out);
        char name[200], other[200];
        em_cuda_ew_name(&k, contig ? EM_CUDA_CONTIG : EM_CUDA_STRIDED, name, sizeof name);
        em_cuda_ew_name(&k, contig ? EM_CUDA_STRIDED : EM_CUDA_CONTIG, other, sizeof other);
        CUfunction fn;
        st = em_cuda_dev_kernel(d, name, other, ew_ptx, &k, &fn);
        CUdeviceptr ptrs[4] = {em_cuda_address(out)};
        for (int i = 0; i < n_in; i++) ptrs[i + 1] = em_cuda_address(x[i]);
        em_cuda_geometry g;
        memset(&g, 0, sizeof g);
        void *params[6];
        int np = 0;
        params[np++] = &n;
        if (!contig) {
            g.ndim = out->ndim;
            for (int dim = 0; dim < out->ndim; dim++) {
                g.shape[dim] = out->shape[dim];
                g.strides[0][dim] = out->strides[dim];
            }
            for (int i = 0; i < n_in; i++) { /* (aligned to the right; broadcast dims step 0) */
                int lead = out->ndim - x[i]->ndim;
                for (int dim = 0; dim < x[i]->ndim; dim++)
                    g.strides[i + 1][lead + dim] = x[i]->shape[dim] == 1 ? 0 : x[i]->strides[dim];
            }
            params[np++] = &g;
        }
        for (int i = 0; i <= n_in; i++) params[np++] = &ptrs[i];
        if (st == EM_OK) {
            long long per_thread = contig ? 16 / (long long)em_dtype_size(out->dtype) : 1;
            st = em_cuda_dev_launch(
                d, fn, em_cuda_dev_blocks_for(d, (n + per_thread - 1) / per_thread), params, name);
        }
    }
    for (int i = 0; i < n_in; i++) em_tensor_release(x[i]);
    return st;
}

/* x as a new device tensor of dtype dt (x itself, retained, when it is). */
em_tensor *em_cuda_dev_converted(cuda_dev *d, em_tensor *x, em_dtype dt) {
    if (x->dtype == dt) {
        em_tensor_retain(x);
        return x;
    }
    em_tensor *y = em_tensor_empty(x->shape, x->ndim, dt, x->device);
    if (y && em_cuda_run_elementwise(d, EM_OP_CAST, &x, 1, y) != EM_OK) {
        em_tensor_release(y);
        y = NULL;
    }
    return y;
}

/* ---- views and copies ---- */

em_status em_cuda_run_view(em_op op, em_tensor *const *in, const em_attrs *attrs, em_tensor **out,
                           cuda_dev *d) {
    (void)d;
    return em_view_apply(op, in[0], attrs, em_contiguous, out); /* (the copy: this device's contiguous()) */
}

em_status em_cuda_run_contiguous(cuda_dev *d, em_tensor *x, em_tensor **out) {
    if (em_tensor_is_contiguous(x)) {
        em_tensor_retain(x);
        out[0] = x;
        return EM_OK;
    }
    if (!(out[0] = em_tensor_empty(x->shape, x->ndim, x->dtype, x->device)))
        return em_last_status();
    em_status st = em_cuda_run_elementwise(d, EM_OP_CAST, &x, 1, out[0]);
    if (st != EM_OK) {
        em_tensor_release(out[0]);
        out[0] = NULL;
    }
    return st;
}

em_status em_cuda_dev_ew_into(cuda_dev *d, em_op op, em_tensor *const *in, int n_in,
                              em_tensor *out) {
    return em_cuda_run_elementwise(d, op, in, n_in, out);
}

em_status em_cuda_dev_copy_into(cuda_dev *d, em_tensor *out, em_tensor *x) {
    return em_cuda_run_elementwise(d, EM_OP_CAST, &x, 1, out);
}
