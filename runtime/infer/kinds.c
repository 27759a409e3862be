/*
 * kinds.c - shape, dtype and device inference for the ops a kind
 * describes (elementwise, cast, reductions, scans, matmul, views, copies,
 * factories, fused nodes), and PyTorch's type promotion. The ops with
 * inference of their own have it beside this file (conv.c, pool.c, ...).
 *
 * Inference sees only em_types, never tensors, and is the same on every
 * device, so the eager dispatcher and the IR verifier share it: a graph the
 * verifier accepts is a graph eager mode would have run. Errors name the op
 * and the offending types.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "ember/strbuf.h"
#include "../kernels.h"

#define TYPE_STR(t, buf) (em_type_str((t), (buf), sizeof(buf)), (buf))

/* ---- promotion ---- */

/* PyTorch's lattice: a higher category wins; within floats float16 with
 * bfloat16 is float32; within integers uint8 with a signed type needs the
 * next signed type wide enough (uint8 with int8 is int16); otherwise the
 * wider dtype. */
em_dtype em_promote_types(em_dtype a, em_dtype b) {
    if (a == b) return a;
    em_dtype_category ca = em_dtype_category_of(a), cb = em_dtype_category_of(b);
    if (ca != cb) return ca > cb ? a : b;
    if (em_dtype_is_half(a) && em_dtype_is_half(b)) return EM_DTYPE_F32;
    if (a == EM_DTYPE_U8 || b == EM_DTYPE_U8) {
        em_dtype other = a == EM_DTYPE_U8 ? b : a; /* a signed integer type */
        return other == EM_DTYPE_I8 ? EM_DTYPE_I16 : other;
    }
    return em_dtype_size(a) >= em_dtype_size(b) ? a : b;
}

em_dtype em_result_type(const em_type *const *ops, int n) {
    /* PyTorch: dimensioned operands decide; 0-d operands only matter when
     * their category is higher than every dimensioned operand's. */
    bool have_dim = false, have_zero = false;
    em_dtype dim_dt = EM_DTYPE_BOOL, zero_dt = EM_DTYPE_BOOL;
    for (int i = 0; i < n; i++) {
        if (ops[i]->ndim > 0) {
            dim_dt = have_dim ? em_promote_types(dim_dt, ops[i]->dtype) : ops[i]->dtype;
            have_dim = true;
        } else {
            zero_dt = have_zero ? em_promote_types(zero_dt, ops[i]->dtype) : ops[i]->dtype;
            have_zero = true;
        }
    }
    if (!have_dim) return zero_dt;
    if (!have_zero) return dim_dt;
    return em_dtype_category_of(zero_dt) > em_dtype_category_of(dim_dt) ? zero_dt : dim_dt;
}

em_dtype em_scalar_operand_dtype(em_dtype tensor_dtype, em_dtype_category scalar_cat) {
    if (em_dtype_category_of(tensor_dtype) >= scalar_cat) return tensor_dtype;
    return scalar_cat == EM_CAT_FLOAT ? em_default_float()
           : scalar_cat == EM_CAT_INT ? EM_DTYPE_I64
                                      : EM_DTYPE_BOOL;
}

em_dtype em_ew_compute_dtype(em_op op, const em_type *in, int n_in, em_dtype result) {
    switch (em_op_get(op)->promote) {
    case EM_PROMOTE_LOGICAL: return EM_DTYPE_BOOL;
    case EM_PROMOTE_PRED: return em_dtype_compute(in[0].dtype);
    case EM_PROMOTE_COMPARE: {
        const em_type *ops[EM_ITER_MAX_OPS];
        for (int i = 0; i < n_in; i++) ops[i] = &in[i];
        return em_dtype_compute(em_result_type(ops, n_in));
    }
    default: return em_dtype_compute(result);
    }
}

em_dtype em_ew_operand_dtype(em_op op, int i, em_dtype compute) {
    return (i == 0 && em_op_get(op)->promote == EM_PROMOTE_WHERE) ? EM_DTYPE_BOOL : compute;
}

em_dtype em_ew_operand_via(em_op op, int i, const em_type *in, int n_in, em_dtype result) {
    em_dtype cd = em_ew_compute_dtype(op, in, n_in, result);
    em_dtype want = em_ew_operand_dtype(op, i, cd);
    if (want != EM_DTYPE_F32) return want; /* only half types widen to float32 */
    em_dtype common = result;
    switch (em_op_get(op)->promote) {
    case EM_PROMOTE_PRED: common = in[0].dtype; break;
    case EM_PROMOTE_COMPARE: {
        const em_type *ops[EM_ITER_MAX_OPS];
        for (int k = 0; k < n_in; k++) ops[k] = &in[k];
        common = em_result_type(ops, n_in);
        break;
    }
    default: break;
    }
    return em_dtype_is_half(common) && in[i].dtype != common ? common : want;
}

em_dtype em_ew_native_result(em_op op, em_dtype compute) {
    em_promote p = em_op_get(op)->promote;
    return (p == EM_PROMOTE_COMPARE || p == EM_PROMOTE_PRED) ? EM_DTYPE_BOOL : compute;
}

/* Applies an op's promotion rule to the promoted input dtype. */
static em_status promote_result(em_op op, em_dtype in, em_dtype *out) {
    const em_op_info *info = em_op_get(op);
    switch (info->promote) {
    case EM_PROMOTE_INT_TO_FLOAT: *out = em_dtype_is_float(in) ? in : em_default_float(); break;
    case EM_PROMOTE_SUM: *out = em_dtype_is_float(in) ? in : EM_DTYPE_I64; break;
    case EM_PROMOTE_COMPARE:
    case EM_PROMOTE_PRED:
    case EM_PROMOTE_LOGICAL: *out = EM_DTYPE_BOOL; break;
    case EM_PROMOTE_INDEX: *out = EM_DTYPE_I64; break;
    case EM_PROMOTE_FLOAT_ONLY:
        if (!em_dtype_is_float(in))
            return em_error(EM_ERR_DTYPE,
                            "%s: could not infer output dtype. Input dtype must be floating "
                            "point, got %s",
                            info->name, em_dtype_long_name(in));
        *out = in;
        break;
    default: *out = in; break;
    }
    return EM_OK;
}

static em_status check_no_bool(em_op op, const em_type *in, int n) {
    if (!(em_op_get(op)->flags & EM_F_NO_BOOL)) return EM_OK;
    for (int i = 0; i < n; i++)
        if (in[i].dtype == EM_DTYPE_BOOL) {
            if (op == EM_OP_SUB)
                return em_error(EM_ERR_DTYPE,
                                "sub: subtraction with bool tensors is not supported; to invert "
                                "a mask use logical_not() or ~");
            if (op == EM_OP_NEG)
                return em_error(EM_ERR_DTYPE,
                                "neg: negation of a bool tensor is not supported; to invert a "
                                "mask use logical_not() or ~");
            if (op == EM_OP_RELU)
                return em_error(EM_ERR_DTYPE, "relu: bool inputs are not supported");
            return em_error(EM_ERR_DTYPE, "%s: not supported for bool tensors",
                            em_op_name(op));
        }
    return EM_OK;
}

em_status em_device_mismatch(em_op op, em_device a, em_device b) {
    char sa[16], sb[16];
    return em_error(EM_ERR_DEVICE,
                    "%s: Expected all tensors to be on the same device, but found at least two devices, %s and %s! "
                    "(move one with .to())",
                    em_op_name(op), em_device_str(a, sa), em_device_str(b, sb));
}

em_device em_operands_device(const em_type *in, int n) {
    for (int i = 0; i < n; i++)
        if (!em_is_host_scalar(&in[i])) return in[i].device;
    return n > 0 ? in[0].device : em_cpu();
}

em_status em_check_same_device(em_op op, const em_type *in, int n) {
    em_device d = em_operands_device(in, n);
    for (int i = 0; i < n; i++)
        if (!em_device_eq(in[i].device, d) && !em_is_host_scalar(&in[i])) return em_device_mismatch(op, d, in[i].device);
    return EM_OK;
}

bool em_broadcast_shapes(const int64_t *a, int na, const int64_t *b, int nb, int64_t *out,
                         int *nout) {
    int n = na > nb ? na : nb;
    for (int i = 0; i < n; i++) {
        int64_t da = i < n - na ? 1 : a[i - (n - na)];
        int64_t db = i < n - nb ? 1 : b[i - (n - nb)];
        if (da != db && da != 1 && db != 1) return false;
        out[i] = da == 1 ? db : da;
    }
    *nout = n;
    return true;
}

/* ---- elementwise ---- */

em_status infer_elementwise(em_op op, const em_type *in, int n_in, const em_attrs *attrs,
                            em_type *out, int n_out) {
    (void)attrs;
    (void)n_out;
    em_status st = em_check_same_device(op, in, n_in);
    if (st == EM_OK) st = check_no_bool(op, in, n_in);
    if (st != EM_OK) return st;
    em_type r = in[0];
    r.device = em_operands_device(in, n_in); /* (not a CPU scalar's: x_meta * 2) */
    for (int i = 1; i < n_in; i++) {
        int64_t shape[EM_MAX_DIMS]; /* not r.shape: the inputs must not alias the output */
        if (!em_broadcast_shapes(r.shape, r.ndim, in[i].shape, in[i].ndim, shape, &r.ndim)) {
            char a[256], b[256];
            return em_error(EM_ERR_SHAPE, "%s: cannot broadcast %s with %s", em_op_name(op),
                            TYPE_STR(&in[0], a), TYPE_STR(&in[i], b));
        }
        memcpy(r.shape, shape, sizeof shape);
    }
    const em_op_info *info = em_op_get(op);
    const em_type *ops[EM_ITER_MAX_OPS];
    int first = 0; /* where(cond, a, b): the condition takes no part in promotion */
    if (info->promote == EM_PROMOTE_WHERE) {
        if (in[0].dtype != EM_DTYPE_BOOL)
            return em_error(EM_ERR_DTYPE, "where: expected the condition to be a bool tensor, got %s",
                            em_dtype_long_name(in[0].dtype));
        first = 1;
    }
    for (int i = first; i < n_in; i++) ops[i - first] = &in[i];
    st = promote_result(op, em_result_type(ops, n_in - first), &r.dtype);
    if (st != EM_OK) return st;
    uint32_t defined = info->dtypes;
    em_dtype cd = em_ew_compute_dtype(op, in, n_in, r.dtype);
    if (defined && !(defined & (1u << cd)))
        return em_error(EM_ERR_DTYPE, "%s: not implemented for %s tensors", em_op_name(op),
                        em_dtype_long_name(cd));
    for (int i = r.ndim; i < EM_MAX_DIMS; i++) r.shape[i] = 0;
    out[0] = r;
    return EM_OK;
}

em_status infer_cast(em_op op, const em_type *in, int n_in, const em_attrs *attrs, em_type *out,
                     int n_out) {
    (void)op;
    (void)n_in;
    (void)n_out;
    out[0] = in[0];
    out[0].dtype = attrs->dtype;
    return EM_OK;
}

/* ---- reductions ---- */

em_status infer_reduce(em_op op, const em_type *in, int n_in, const em_attrs *attrs,
                       em_type *out, int n_out) {
    (void)n_in;
    (void)n_out;
    bool reduced[EM_MAX_DIMS] = {false};
    for (int i = 0; i < attrs->n_dims; i++) {
        int64_t d = attrs->dims[i];
        if (d < 0 || d >= (in[0].ndim ? in[0].ndim : 1))
            return em_error(EM_ERR_INDEX, "%s: dimension %lld out of range for a %d-d tensor",
                            em_op_name(op), (long long)d, in[0].ndim);
        if (in[0].ndim && reduced[d])
            return em_error(EM_ERR_VALUE, "%s: dim %lld appears multiple times in the list of dims",
                            em_op_name(op), (long long)d);
        if (in[0].ndim) reduced[d] = true;
    }
    const em_op_info *info = em_op_get(op);
    bool picks = info->promote == EM_PROMOTE_SAME || info->promote == EM_PROMOTE_INDEX;
    em_type r = in[0];
    r.ndim = 0;
    for (int i = 0; i < in[0].ndim; i++) {
        if (!reduced[i])
            r.shape[r.ndim++] = in[0].shape[i];
        else if (attrs->keepdim)
            r.shape[r.ndim++] = 1;
        if (reduced[i] && in[0].shape[i] == 0 && picks) {
            /* PyTorch's exception types: IndexError for a named dim (and for
             * the arg- ops), RuntimeError for a whole-tensor max */
            if (attrs->n_dims == in[0].ndim)
                return em_error(info->promote == EM_PROMOTE_INDEX ? EM_ERR_INDEX : EM_ERR_RUNTIME,
                                "%s(): Expected reduction dim to be specified for input.numel() == "
                                "0 (an empty reduction has no %s). Specify the reduction dim with "
                                "the 'dim' argument.",
                                info->name, info->promote == EM_PROMOTE_INDEX ? "index" : "value");
            return em_error(EM_ERR_INDEX,
                            "%s(): Expected reduction dim %d to have non-zero size (an empty "
                            "reduction has no %s)",
                            info->name, i, info->promote == EM_PROMOTE_INDEX ? "index" : "value");
        }
    }
    if ((op == EM_OP_ARGMAX || op == EM_OP_ARGMIN) && attrs->n_dims != 1 &&
        attrs->n_dims != in[0].ndim)
        return em_error(EM_ERR_VALUE, "%s: takes one dim, or none for the index into the flattened "
                                      "tensor", info->name);
    for (int i = r.ndim; i < EM_MAX_DIMS; i++) r.shape[i] = 0;
    em_status st = promote_result(op, in[0].dtype, &r.dtype);
    if (st != EM_OK) return st;
    out[0] = r;
    return EM_OK;
}

/* ---- matmul: PyTorch's rules for 1-D, 2-D and batched operands ---- */

/* A scale BLAS applies exactly: a power of two, on float32 or float64. */
static em_status check_alpha(em_op op, double alpha, em_dtype dt) {
    int e;
    if (isfinite(alpha) && frexp(fabs(alpha), &e) == 0.5 && (dt == EM_DTYPE_F32 || dt == EM_DTYPE_F64) &&
        (dt == EM_DTYPE_F64 || (float)alpha == alpha))
        return EM_OK;
    char num[32];
    return em_error(EM_ERR_VALUE, "%s: alpha must be a power of two on float32 or float64 operands, got %s on %s",
                    em_op_name(op), em_format_double(alpha, num), em_dtype_long_name(dt));
}

/* A result layout: an order of all of r's dims with the last dim last, so
 * that rows stay rows (BLAS writes them with a leading dimension). */
static em_status check_layout(em_op op, const em_attrs *a, const em_type *r) {
    bool seen[EM_MAX_DIMS] = {false};
    bool ok = a->n_layout == r->ndim && r->ndim >= 2 && a->layout[r->ndim - 1] == r->ndim - 1;
    for (int i = 0; ok && i < a->n_layout; i++) {
        ok = a->layout[i] >= 0 && a->layout[i] < r->ndim && !seen[a->layout[i]];
        if (ok) seen[a->layout[i]] = true;
    }
    if (ok) return EM_OK;
    char s[256];
    return em_error(EM_ERR_VALUE,
                    "%s: layout must order all %d dims of its %s result, the last dim last (got %d entries)",
                    em_op_name(op), r->ndim, TYPE_STR(r, s), a->n_layout);
}

em_status infer_matmul(em_op op, const em_type *in, int n_in, const em_attrs *attrs, em_type *out,
                       int n_out) {
    (void)attrs;
    (void)n_out;
    char a[256], b[256];
    em_status st = em_check_same_device(op, in, n_in);
    if (st != EM_OK) return st;
    const em_type *x = &in[0], *y = &in[1];
    if (x->ndim == 0 || y->ndim == 0)
        return em_error(EM_ERR_SHAPE, "matmul: both arguments need to be at least 1-D, got %s and %s",
                        TYPE_STR(x, a), TYPE_STR(y, b));
    if (x->dtype != y->dtype)
        return em_error(EM_ERR_DTYPE,
                        "matmul: expected both operands to have the same dtype, got %s and %s",
                        em_dtype_long_name(x->dtype), em_dtype_long_name(y->dtype));
    if (x->dtype == EM_DTYPE_BOOL)
        return em_error(EM_ERR_DTYPE, "matmul: not supported for bool tensors");
    int64_t k1 = x->shape[x->ndim - 1];
    int64_t k2 = y->ndim == 1 ? y->shape[0] : y->shape[y->ndim - 2];
    if (k1 != k2)
        return em_error(EM_ERR_SHAPE,
                        "matmul: shapes %s and %s cannot be multiplied (%lld != %lld)",
                        TYPE_STR(x, a), TYPE_STR(y, b), (long long)k1, (long long)k2);
    em_type r = *x;
    int xb = x->ndim > 2 ? x->ndim - 2 : 0, yb = y->ndim > 2 ? y->ndim - 2 : 0;
    if (!em_broadcast_shapes(x->shape, xb, y->shape, yb, r.shape, &r.ndim))
        return em_error(EM_ERR_SHAPE, "matmul: batch dimensions of %s and %s cannot broadcast",
                        TYPE_STR(x, a), TYPE_STR(y, b));
    if (x->ndim >= 2) r.shape[r.ndim++] = x->shape[x->ndim - 2];
    if (y->ndim >= 2) r.shape[r.ndim++] = y->shape[y->ndim - 1];
    for (int i = r.ndim; i < EM_MAX_DIMS; i++) r.shape[i] = 0;
    if (attrs && attrs->n_layout && (st = check_layout(op, attrs, &r)) != EM_OK) return st;
    if (attrs && attrs->alpha != 0 && (st = check_alpha(op, attrs->alpha, x->dtype)) != EM_OK) return st;
    out[0] = r;
    return EM_OK;
}

/* ---- views: their rules (view_rules.c) give the shape ---- */

em_status infer_view(em_op op, const em_type *in, int n_in, const em_attrs *attrs, em_type *out,
                     int n_out) {
    (void)n_in;
    (void)n_out;
    const em_view_fn rule = em_view_rule(op);
    em_view_geom v;
    if (!rule) return em_error(EM_ERR_INTERNAL, "infer_view: %s is not a view", em_op_name(op));
    em_status st = rule(&in[0], NULL, attrs, &v);
    if (st != EM_OK) return st;
    out[0] = in[0];
    out[0].ndim = v.ndim;
    memcpy(out[0].shape, v.shape, sizeof v.shape);
    return EM_OK;
}

/* Scans and normalisations along one dim: the shape is kept. */
em_status infer_scan(em_op op, const em_type *in, int n_in, const em_attrs *attrs, em_type *out,
                     int n_out) {
    (void)n_in;
    (void)n_out;
    int64_t d = attrs->n_dims == 1 ? attrs->dims[0] : -1;
    if (d < 0 || d >= (in[0].ndim ? in[0].ndim : 1))
        return em_error(EM_ERR_INDEX, "%s: dimension out of range for a %d-d tensor",
                        em_op_name(op), in[0].ndim);
    out[0] = in[0];
    return promote_result(op, in[0].dtype, &out[0].dtype);
}

em_status infer_same(em_op op, const em_type *in, int n_in, const em_attrs *attrs, em_type *out,
                     int n_out) {
    (void)op;
    (void)n_in;
    (void)attrs;
    (void)n_out;
    out[0] = in[0];
    return EM_OK;
}

/* ---- creation ---- */

em_status em_arange_length(double start, double end, double step, int64_t *out) {
    if (!isfinite(start) || !isfinite(end))
        return em_error(EM_ERR_VALUE, "arange: unsupported range %g -> %g", start, end);
    if (step == 0 || !isfinite(step))
        return em_error(EM_ERR_VALUE, "arange: step must be nonzero and finite");
    if ((step > 0 && end < start) || (step < 0 && end > start))
        return em_error(EM_ERR_VALUE,
                        "arange: upper bound and larger bound inconsistent with step sign "
                        "(start %g, end %g, step %g)",
                        start, end, step);
    double n = ceil((end - start) / step);
    if (n > 9.0e18) return em_error(EM_ERR_VALUE, "arange: too many elements");
    *out = (int64_t)n;
    return EM_OK;
}

em_status infer_factory(em_op op, const em_type *in, int n_in, const em_attrs *attrs,
                        em_type *out, int n_out) {
    (void)in;
    (void)n_in;
    (void)n_out;
    em_type r;
    memset(&r, 0, sizeof r);
    r.dtype = attrs->dtype;
    r.device = attrs->device.type == EM_DEVICE_CPU ? em_cpu() : attrs->device; /* (zeroed attrs: the CPU) */
    if (op == EM_OP_ARANGE) {
        r.ndim = 1;
        em_status st = em_arange_length(attrs->start, attrs->end, attrs->step, &r.shape[0]);
        if (st != EM_OK) return st;
        if (attrs->dtype == EM_DTYPE_BOOL)
            return em_error(EM_ERR_DTYPE, "arange: not supported for bool");
    } else {
        if (attrs->n_shape < 0 || attrs->n_shape > EM_MAX_DIMS)
            return em_error(EM_ERR_VALUE, "%s: at most %d dimensions", em_op_name(op), EM_MAX_DIMS);
        r.ndim = attrs->n_shape;
        for (int i = 0; i < r.ndim; i++) {
            if (attrs->shape[i] < 0)
                return em_error(EM_ERR_VALUE, "%s: negative dimension %lld", em_op_name(op),
                                (long long)attrs->shape[i]);
            r.shape[i] = attrs->shape[i];
        }
    }
    if ((op == EM_OP_RAND || op == EM_OP_RANDN) && !em_dtype_is_float(attrs->dtype))
        return em_error(EM_ERR_DTYPE, "%s: expected a floating point dtype, got %s",
                        em_op_name(op), em_dtype_long_name(attrs->dtype));
    if (op == EM_OP_EYE && r.ndim != 2)
        return em_error(EM_ERR_VALUE, "eye: expected a 2-d shape, got %d dims", r.ndim);
    if ((op == EM_OP_LINSPACE || op == EM_OP_RANDPERM) && r.ndim != 1)
        return em_error(EM_ERR_VALUE, "%s: expected a 1-d shape", em_op_name(op));
    if (op == EM_OP_RANDINT && !(attrs->end > attrs->start))
        return em_error(EM_ERR_VALUE, "randint: expected low < high, got %g and %g", attrs->start,
                        attrs->end);
    if ((op == EM_OP_RANDINT || op == EM_OP_RANDPERM) && attrs->dtype == EM_DTYPE_BOOL &&
        op == EM_OP_RANDPERM)
        return em_error(EM_ERR_DTYPE, "randperm: not supported for bool");
    out[0] = r;
    return EM_OK;
}

em_status infer_fused(em_op op, const em_type *in, int n_in, const em_attrs *attrs, em_type *out,
                      int n_out) {
    (void)op;
    (void)in;
    (void)n_in;
    (void)attrs;
    (void)out;
    (void)n_out;
    return em_error(EM_ERR_VALUE,
                    "fused: the types of a fused node come from its region; it has no inference");
}
