/*
 * linalg.c - the inference of the linear-algebra ops (../cpu/linalg.c runs
 * them on LAPACK), the same on every device: float32 or float64 matrices
 * in the last two dims, a batch before them, square where the op needs it,
 * sizes that fit LAPACK's 32-bit integers, and each result's shape.
 */
#include <limits.h>

#include "../kernels.h"

#define TYPE_STR(t, buf) (em_type_str((t), (buf), sizeof(buf)), (buf))

/* x holds matrices (square ones if `square`) of float32 or float64. */
static em_status la_check(em_op op, const em_type *x, bool square) {
    const char *name = em_op_name(op);
    char b[96];
    if (x->dtype != EM_DTYPE_F32 && x->dtype != EM_DTYPE_F64)
        return em_error(EM_ERR_VALUE, "linalg.%s: expected a float32 or float64 tensor, got %s", name, TYPE_STR(x, b));
    if (x->ndim < 2)
        return em_error(EM_ERR_VALUE, "linalg.%s: The input tensor A must have at least 2 dimensions (got %s).", name,
                        TYPE_STR(x, b));
    int64_t m = x->shape[x->ndim - 2], n = x->shape[x->ndim - 1];
    if (square && m != n)
        return em_error(EM_ERR_VALUE, "linalg.%s: A must be batches of square matrices, but they are %lld by %lld matrices",
                        name, (long long)m, (long long)n);
    if (m > INT_MAX / 8 || n > INT_MAX / 8 || (m && n > INT_MAX / m))
        return em_error(EM_ERR_VALUE, "linalg.%s: %s is too large for LAPACK's 32-bit sizes", name, TYPE_STR(x, b));
    return EM_OK;
}

/* B of A X = B: A's dtype and batch dims, A's rows. */
static em_status la_check_rhs(em_op op, const em_type *A, const em_type *B) {
    char b1[96], b2[96];
    bool ok = B->dtype == A->dtype && B->ndim == A->ndim && B->shape[B->ndim - 2] == A->shape[A->ndim - 2];
    for (int d = 0; ok && d < A->ndim - 2; d++) ok = A->shape[d] == B->shape[d];
    if (!ok)
        return em_error(EM_ERR_VALUE,
                        "linalg.%s: Incompatible shapes of A and B for the equation AX = B (%s and %s): B needs "
                        "A's dtype, batch dims and rows",
                        em_op_name(op), TYPE_STR(A, b1), TYPE_STR(B, b2));
    return la_check(op, B, false);
}

/* t with its last two dims (rows, cols); cols < 0: one dim fewer (rows). */
static em_type mats(const em_type *t, int64_t rows, int64_t cols) {
    em_type r = *t;
    if (cols < 0) {
        r.ndim--;
        r.shape[r.ndim - 1] = rows;
    } else {
        r.shape[r.ndim - 2] = rows;
        r.shape[r.ndim - 1] = cols;
    }
    return r;
}

em_status infer_inv(em_op op, const em_type *in, int n_in, const em_attrs *a, em_type *out, int n_out) {
    em_status st = la_check(op, &in[0], true);
    if (st == EM_OK) out[0] = in[0];
    return st;
}
em_status infer_cholesky(em_op op, const em_type *in, int n_in, const em_attrs *a, em_type *out, int n_out) {
    return infer_inv(op, in, n_in, a, out, n_out);
}

em_status infer_solve(em_op op, const em_type *in, int n_in, const em_attrs *a, em_type *out, int n_out) {
    em_status st = la_check(op, &in[0], op != EM_OP_LSTSQ);
    if (st == EM_OK) st = la_check_rhs(op, &in[0], &in[1]);
    if (st != EM_OK) return st;
    out[0] = in[1];
    if (op == EM_OP_LSTSQ) {
        out[0].shape[out[0].ndim - 2] = in[0].shape[in[0].ndim - 1];
        out[1] = in[0]; /* the rank of each matrix */
        out[1].ndim -= 2;
        out[1].dtype = EM_DTYPE_I64;
    }
    return EM_OK;
}
em_status infer_solve_triangular(em_op op, const em_type *in, int n_in, const em_attrs *a, em_type *out,
                                 int n_out) {
    return infer_solve(op, in, n_in, a, out, n_out);
}
em_status infer_lstsq(em_op op, const em_type *in, int n_in, const em_attrs *a, em_type *out, int n_out) {
    return infer_solve(op, in, n_in, a, out, n_out);
}

em_status infer_det(em_op op, const em_type *in, int n_in, const em_attrs *a, em_type *out, int n_out) {
    em_status st = la_check(op, &in[0], true);
    if (st != EM_OK) return st;
    out[0] = in[0];
    out[0].ndim -= 2;
    if (n_out > 1) out[1] = out[0];
    return EM_OK;
}
em_status infer_slogdet(em_op op, const em_type *in, int n_in, const em_attrs *a, em_type *out, int n_out) {
    return infer_det(op, in, n_in, a, out, n_out);
}

em_status infer_qr(em_op op, const em_type *in, int n_in, const em_attrs *a, em_type *out, int n_out) {
    em_status st = la_check(op, &in[0], false);
    if (st != EM_OK) return st;
    int64_t m = in[0].shape[in[0].ndim - 2], n = in[0].shape[in[0].ndim - 1], k = m < n ? m : n;
    out[0] = mats(&in[0], m, a->full ? m : k);
    out[1] = mats(&in[0], a->full ? m : k, n);
    return EM_OK;
}

em_status infer_eigh(em_op op, const em_type *in, int n_in, const em_attrs *a, em_type *out, int n_out) {
    em_status st = la_check(op, &in[0], true);
    if (st != EM_OK) return st;
    out[0] = mats(&in[0], in[0].shape[in[0].ndim - 1], -1);
    out[1] = in[0];
    return EM_OK;
}

em_status infer_svd(em_op op, const em_type *in, int n_in, const em_attrs *a, em_type *out, int n_out) {
    em_status st = la_check(op, &in[0], false);
    if (st != EM_OK) return st;
    int64_t m = in[0].shape[in[0].ndim - 2], n = in[0].shape[in[0].ndim - 1], k = m < n ? m : n;
    out[0] = mats(&in[0], m, a->full ? m : k);
    out[1] = mats(&in[0], k, -1);
    out[2] = mats(&in[0], a->full ? n : k, n);
    return EM_OK;
}

em_status infer_ldl_factor(em_op op, const em_type *in, int n_in, const em_attrs *a, em_type *out, int n_out) {
    em_status st = la_check(op, &in[0], true);
    if (st != EM_OK) return st;
    out[0] = in[0];
    out[1] = mats(&in[0], in[0].shape[in[0].ndim - 1], -1); /* the pivots */
    out[1].dtype = EM_DTYPE_I32;
    out[2] = in[0]; /* info, per matrix */
    out[2].ndim -= 2;
    out[2].dtype = EM_DTYPE_I32;
    return EM_OK;
}

em_status infer_ldl_solve(em_op op, const em_type *in, int n_in, const em_attrs *a, em_type *out, int n_out) {
    char b1[96], b2[96];
    em_status st = la_check(op, &in[0], true);
    if (st == EM_OK) st = la_check_rhs(op, &in[0], &in[2]);
    if (st != EM_OK) return st;
    em_type want = mats(&in[0], in[0].shape[in[0].ndim - 1], -1);
    want.dtype = EM_DTYPE_I32;
    if (!em_type_eq(&in[1], &want))
        return em_error(EM_ERR_VALUE, "linalg.ldl_solve: expected pivots of type %s (ldl_factor's), got %s",
                        TYPE_STR(&want, b1), TYPE_STR(&in[1], b2));
    out[0] = in[2];
    return EM_OK;
}
