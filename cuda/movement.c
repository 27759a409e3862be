/*
 * movement.c - the CUDA device's data-movement ops, built from ops it has
 * kernels for (copies, where, scatter, reductions, indexing) through
 * dispatch, so each is device-free: tests/c/test_cuda_compositions.c runs
 * them on CPU tensors against the CPU's own kernels.
 *
 *   flip, roll     the CPU's moves (em_flip_apply, em_roll_apply in
 *                  runtime/view_rules.c) over em_assign_copy;
 *   tril, triu     where(keep, x, 0), keep the [rows, cols] triangle made
 *                  on the host and broadcast over the batch;
 *   one_hot        zeros, then ones scattered along the new last dim; the
 *                  classes checked first by two reductions (amin, amax);
 *   nonzero        the mask's positions found on the host: a result whose
 *                  size depends on the data needs the data there (PyTorch's
 *                  CUDA nonzero synchronises too); only the mask travels;
 *   masked_select  nonzero of the (broadcast) mask, then x indexed at
 *                  those positions on the device.
 */
#include <string.h>

#include "internal.h"
#include "ember/codegen_cuda.h"

bool em_cuda_movement_op(em_op op) {
    return op == EM_OP_FLIP || op == EM_OP_ROLL || op == EM_OP_TRIL || op == EM_OP_TRIU ||
           op == EM_OP_ONE_HOT || op == EM_OP_NONZERO || op == EM_OP_MASKED_SELECT;
}

/* tril keeps j <= i + k, triu j >= i + k, of the last two dims. */
static em_status run_triangle(em_op op, em_tensor *x, const em_attrs *a, em_tensor *out) {
    int64_t rows = x->shape[x->ndim - 2], cols = x->shape[x->ndim - 1], k = a->diagonal,
            shape[2] = {rows, cols};
    if (x->numel == 0) return EM_OK;
    em_tensor *keep = em_tensor_empty(shape, 2, EM_DTYPE_BOOL, em_cpu()),
              *zero = em_tensor_scalar(0.0, x->dtype);
    em_tensor *keep_there = NULL, *zero_there = NULL, *kept = NULL;
    em_status st = keep && zero ? EM_OK : em_last_status();
    if (st == EM_OK) {
        bool *kp = em_tensor_data(keep);
        for (int64_t i = 0; i < rows; i++)
            for (int64_t j = 0; j < cols; j++)
                kp[i * cols + j] = op == EM_OP_TRIL ? j <= i + k : j >= i + k;
        keep_there = em_to_device(keep, x->device);
        zero_there = em_to_device(zero, x->device);
        if (!keep_there || !zero_there) st = em_last_status();
    }
    if (st == EM_OK) {
        em_attrs w;
        memset(&w, 0, sizeof w);
        em_tensor *ops[3] = {keep_there, x, zero_there};
        st = em_op_run(EM_OP_WHERE, ops, 3, &w, &kept, 1);
    }
    if (st == EM_OK) st = em_assign_copy(out, kept);
    em_tensor *objs[] = {keep, zero, keep_there, zero_there, kept};
    for (int i = 0; i < 5; i++) em_tensor_release(objs[i]);
    return st;
}

/* An int64 0-d device tensor's value. */
static em_status read_i64(em_tensor *t, long long *v) {
    em_tensor *h = em_to_device(t, em_cpu());
    if (!h) return em_last_status();
    *v = (long long)((const int64_t *)em_tensor_data(h))[0];
    em_tensor_release(h);
    return EM_OK;
}

static em_status run_one_hot(em_tensor *x, em_tensor *out) {
    int64_t classes = out->shape[x->ndim];
    if (x->numel == 0) return EM_OK;
    /* the classes first: the smallest and largest values, on the host */
    em_attrs r;
    memset(&r, 0, sizeof r);
    r.n_dims = x->ndim;
    for (int i = 0; i < x->ndim; i++) r.dims[i] = i;
    em_tensor *lo = NULL, *hi = NULL;
    long long vlo = 0, vhi = 0;
    em_status st = em_op_run(EM_OP_AMIN, &x, 1, &r, &lo, 1);
    if (st == EM_OK) st = em_op_run(EM_OP_AMAX, &x, 1, &r, &hi, 1);
    if (st == EM_OK) st = read_i64(lo, &vlo);
    if (st == EM_OK) st = read_i64(hi, &vhi);
    em_tensor_release(lo);
    em_tensor_release(hi);
    if (st != EM_OK) return st;
    if (vlo < 0 || vhi >= classes)
        return em_error(EM_ERR_VALUE,
                        "one_hot: index %lld is out of bounds for dimension %d with size %lld",
                        vlo < 0 ? vlo : vhi, x->ndim, (long long)classes);
    em_tensor *zero = em_tensor_scalar(0.0, EM_DTYPE_I64),
              *one = em_tensor_scalar(1.0, EM_DTYPE_I64);
    st = zero && one ? em_assign_copy(out, zero) : em_last_status();
    int64_t shape[EM_MAX_DIMS];
    memcpy(shape, x->shape, sizeof shape);
    shape[x->ndim] = 1;
    em_tensor *column = st == EM_OK ? em_reshape(x, shape, x->ndim + 1) : NULL, *ones = NULL,
              *put = NULL;
    if (st == EM_OK && !column) st = em_last_status();
    if (st == EM_OK && !(ones = em_to_device(one, out->device))) st = em_last_status();
    if (st == EM_OK) {
        em_attrs a;
        memset(&a, 0, sizeof a);
        a.n_dims = 1;
        a.dims[0] = x->ndim;
        em_tensor *ins[3] = {out, column, ones};
        st = em_op_run(EM_OP_SCATTER, ins, 3, &a, &put, 1);
    }
    if (st == EM_OK) st = em_assign_copy(out, put);
    em_tensor *objs[] = {zero, one, column, ones, put};
    for (int i = 0; i < 5; i++) em_tensor_release(objs[i]);
    return st;
}

/* The positions of m's nonzero elements, [count, ndim] int64 on the host
 * (the CPU's kernel over m's host copy). */
static em_tensor *positions_on_host(em_tensor *m) {
    em_tensor *h = em_to_device(m, em_cpu()), *pos = NULL;
    if (!h) return NULL;
    em_attrs a;
    memset(&a, 0, sizeof a);
    if (em_cpu_device.run(EM_OP_NONZERO, &h, 1, &a, &pos) != EM_OK) pos = NULL;
    em_tensor_release(h);
    return pos;
}

static em_status run_nonzero(em_tensor *x, em_tensor **out) {
    em_tensor *pos = positions_on_host(x);
    if (!pos) return em_last_status();
    out[0] = em_to_device(pos, x->device);
    em_tensor_release(pos);
    return out[0] ? EM_OK : em_last_status();
}

/* x[mask] with both broadcast to one shape: the mask's positions, then x
 * indexed there by one int64 column per dim. */
static em_status run_masked_select(em_tensor *const *in, em_tensor **out) {
    em_tensor *x = in[0], *m = in[1];
    int64_t shape[EM_MAX_DIMS];
    int nd;
    if (!em_broadcast_shapes(x->shape, x->ndim, m->shape, m->ndim, shape, &nd))
        return em_error(EM_ERR_SHAPE, "masked_select: the mask does not broadcast with the input");
    int64_t one = 1;
    if (nd == 0) { /* (scalars: as one-element vectors) */
        shape[0] = 1;
        nd = 1;
    }
    em_tensor *xr = x->ndim ? (em_tensor_retain(x), x) : em_reshape(x, &one, 1);
    em_tensor *mr = m->ndim ? (em_tensor_retain(m), m) : em_reshape(m, &one, 1);
    em_tensor *xb = xr ? em_expand(xr, shape, nd) : NULL,
              *mb = mr ? em_expand(mr, shape, nd) : NULL;
    em_tensor *pos = xb && mb ? positions_on_host(mb) : NULL,
              *dpos = pos ? em_to_device(pos, x->device) : NULL;
    em_status st = dpos ? EM_OK : em_last_status();
    em_tensor *cols[EM_MAX_DIMS + 1] = {xb};
    for (int i = 0; i < nd && st == EM_OK; i++) { /* column i of the positions */
        em_attrs s;
        memset(&s, 0, sizeof s);
        s.n_dims = 1;
        s.dims[0] = 1;
        s.start = i;
        if (em_op_run(EM_OP_SELECT, &dpos, 1, &s, &cols[i + 1], 1) != EM_OK) st = em_last_status();
    }
    if (st == EM_OK) {
        em_attrs a;
        memset(&a, 0, sizeof a);
        a.n_dims = nd;
        for (int i = 0; i < nd; i++) a.dims[i] = i;
        st = em_op_run(EM_OP_INDEX, cols, nd + 1, &a, out, 1);
    }
    for (int i = 1; i <= nd; i++) em_tensor_release(cols[i]);
    em_tensor *objs[] = {xr, mr, xb, mb, pos, dpos};
    for (int i = 0; i < 6; i++) em_tensor_release(objs[i]);
    return st;
}

em_status em_cuda_run_movement(cuda_dev *d, em_op op, em_tensor *const *in, int n_in,
                               const em_attrs *attrs, em_tensor **out) {
    (void)d;
    (void)n_in;
    switch (op) {
    case EM_OP_FLIP:
        return em_flip_apply(in[0], attrs, out[0], em_assign_copy);
    case EM_OP_ROLL:
        return em_roll_apply(in[0], attrs, out[0], em_assign_copy);
    case EM_OP_TRIL:
    case EM_OP_TRIU:
        return run_triangle(op, in[0], attrs, out[0]);
    case EM_OP_ONE_HOT:
        return run_one_hot(in[0], out[0]);
    case EM_OP_NONZERO:
        return run_nonzero(in[0], out);
    default:
        return run_masked_select(in, out);
    }
}
