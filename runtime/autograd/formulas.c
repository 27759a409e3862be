/*
 * formulas.c - the backward formula of every differentiable op (ops.def's
 * grad column), written with ember ops.
 *
 * Because they are ordinary ops, a backward run with create_graph records
 * them like any other computation, so they can be differentiated again
 * (double backward), and a tracer sees them. Each formula gets the node (its
 * attributes and the types of its inputs and results), the saved tensors the
 * grad column asked for, and the gradients of the results; it returns the
 * gradients of the inputs that need one. It need not match shapes or dtypes
 * exactly: the engine sums a gradient down to its input's shape (undoing
 * broadcasting) and casts it to the input's dtype.
 *
 * Temporaries live in a scope released when the formula returns; an op that
 * fails leaves NULL, which every helper passes through, so a formula is
 * written as straight-line math and checks once at the end.
 */
#include <math.h>
#include <string.h>

#include "node.h"

/* (C11 without POSIX's M_ constants) */
#define LN2 0.69314718055994530942
#define TWO_OVER_SQRTPI 1.12837916709551257390
#define SQRT1_2 0.70710678118654752440
#define SQRT2 1.41421356237309504880

/* ---- a scope of temporaries ---- */

#define SCOPE_MAX 96

typedef struct {
    em_tensor *items[SCOPE_MAX];
    int n;
    bool failed;
} scope;

typedef em_tensor *T;

static T keep(scope *s, T t) {
    if (!t) {
        s->failed = true;
        return NULL;
    }
    if (s->n == SCOPE_MAX) { /* a formula this long is a bug here, not bad input */
        em_tensor_release(t);
        em_error(EM_ERR_INTERNAL, "autograd: a backward formula made more than %d temporaries",
                 SCOPE_MAX);
        s->failed = true;
        return NULL;
    }
    s->items[s->n++] = t;
    return t;
}

static void scope_end(scope *s) {
    for (int i = 0; i < s->n; i++) em_tensor_release(s->items[i]);
}

/* The result a formula hands back: a new reference of a scope value. */
static T give(T t) {
    if (t) em_tensor_retain(t);
    return t;
}

/* Finishes a formula: the status, and on failure no half-made results. */
static em_status finish(scope *s, const em_bw_ctx *c, T *gin) {
    scope_end(s);
    if (!s->failed) return EM_OK;
    for (int i = 0; i < c->node->n_in; i++) {
        em_tensor_release(gin[i]);
        gin[i] = NULL;
    }
    em_status st = em_last_status();
    return st != EM_OK ? st : em_error(EM_ERR_INTERNAL, "autograd: a backward formula failed");
}

static T un(scope *s, em_op op, T a) { return a ? keep(s, em_unary(op, a)) : keep(s, NULL); }
static T bin(scope *s, em_op op, T a, T b) {
    return a && b ? keep(s, em_binary(op, a, b)) : keep(s, NULL);
}
static T ter(scope *s, em_op op, T a, T b, T c) {
    return a && b && c ? keep(s, em_ternary(op, a, b, c)) : keep(s, NULL);
}

#define ADD(a, b) bin(s, EM_OP_ADD, a, b)
#define SUB(a, b) bin(s, EM_OP_SUB, a, b)
#define MUL(a, b) bin(s, EM_OP_MUL, a, b)
#define DIV(a, b) bin(s, EM_OP_DIV, a, b)
#define WHERE(c, a, b) ter(s, EM_OP_WHERE, c, a, b)
#define GT(a, b) bin(s, EM_OP_GT, a, b)
#define GE(a, b) bin(s, EM_OP_GE, a, b)
#define LT(a, b) bin(s, EM_OP_LT, a, b)
#define LE(a, b) bin(s, EM_OP_LE, a, b)
#define EQ(a, b) bin(s, EM_OP_EQ, a, b)

/* A Python-number-like operand: a 0-d tensor that takes the other
 * operand's dtype (PyTorch's wrapped-number rule). */
static T num(scope *s, double v) {
    T t = em_full(NULL, 0, v, EM_DTYPE_F64);
    if (t) t->is_wrapped_number = true;
    return keep(s, t);
}

static T zeros_of(scope *s, const em_type *ty, em_dtype dt) {
    return keep(s, em_full_on(ty->device, ty->shape, ty->ndim, 0.0, dt));
}

static T sum_dim(scope *s, T a, int64_t dim, bool keepdim) {
    return a ? keep(s, em_sum(a, &dim, 1, keepdim)) : keep(s, NULL);
}

/* A reduction's result gradient brought back to the input's shape: the
 * reduced dims put back as size 1 (unless keepdim kept them), then
 * expanded. */
static T unreduce(scope *s, T g, const em_node *n) {
    if (!g) return keep(s, NULL);
    const em_type *in = &n->in_types[0];
    int64_t shape[EM_MAX_DIMS];
    memcpy(shape, in->shape, (size_t)in->ndim * sizeof *shape);
    for (int i = 0; i < n->attrs.n_dims; i++) shape[n->attrs.dims[i]] = 1;
    T k = keep(s, em_reshape(g, shape, in->ndim));
    return k ? keep(s, em_expand(k, in->shape, in->ndim)) : NULL;
}

/* How many elements each result element of a reduction combines. */
static double reduced_count(const em_node *n) {
    double count = 1;
    for (int i = 0; i < n->attrs.n_dims; i++) count *= (double)n->in_types[0].shape[n->attrs.dims[i]];
    return count;
}

#define FORMULA(name) \
    static em_status bw_##name(const em_bw_ctx *c, em_tensor *const *gout, em_tensor **gin)
#define BEGIN                    \
    scope sc = {{NULL}, 0, false}; \
    scope *s = &sc;              \
    T g = gout[0];               \
    (void)g;                     \
    (void)s
#define END return finish(s, c, gin)
#define NEEDS(i) (c->needs[i])
#define X (c->in[0])
#define Y (c->out[0])

/* ---- elementwise, one input ---- */

FORMULA(neg) { BEGIN; gin[0] = give(un(s, EM_OP_NEG, g)); END; }
FORMULA(abs) { BEGIN; gin[0] = give(MUL(g, un(s, EM_OP_SIGN, X))); END; }
FORMULA(exp) { BEGIN; gin[0] = give(MUL(g, Y)); END; }
FORMULA(exp2) { BEGIN; gin[0] = give(MUL(g, MUL(Y, num(s, LN2)))); END; }
FORMULA(expm1) { BEGIN; gin[0] = give(MUL(g, ADD(Y, num(s, 1)))); END; }
FORMULA(log) { BEGIN; gin[0] = give(DIV(g, X)); END; }
FORMULA(log2) { BEGIN; gin[0] = give(DIV(g, MUL(X, num(s, LN2)))); END; }
FORMULA(log1p) { BEGIN; gin[0] = give(DIV(g, ADD(X, num(s, 1)))); END; }
FORMULA(sqrt) { BEGIN; gin[0] = give(DIV(g, MUL(Y, num(s, 2)))); END; }
FORMULA(rsqrt) { BEGIN; gin[0] = give(MUL(g, MUL(MUL(Y, MUL(Y, Y)), num(s, -0.5)))); END; }
FORMULA(reciprocal) { BEGIN; gin[0] = give(MUL(g, un(s, EM_OP_NEG, MUL(Y, Y)))); END; }
FORMULA(sin) { BEGIN; gin[0] = give(MUL(g, un(s, EM_OP_COS, X))); END; }
FORMULA(cos) { BEGIN; gin[0] = give(MUL(g, un(s, EM_OP_NEG, un(s, EM_OP_SIN, X)))); END; }
FORMULA(tan) { BEGIN; gin[0] = give(MUL(g, ADD(MUL(Y, Y), num(s, 1)))); END; }
FORMULA(tanh) { BEGIN; gin[0] = give(MUL(g, SUB(num(s, 1), MUL(Y, Y)))); END; }
FORMULA(sigmoid) { BEGIN; gin[0] = give(MUL(g, MUL(Y, SUB(num(s, 1), Y)))); END; }
FORMULA(erf) {
    BEGIN; /* 2/sqrt(pi) exp(-x^2) */
    T e = un(s, EM_OP_EXP, un(s, EM_OP_NEG, MUL(X, X)));
    gin[0] = give(MUL(g, MUL(e, num(s, TWO_OVER_SQRTPI))));
    END;
}
FORMULA(atan) { BEGIN; gin[0] = give(DIV(g, ADD(MUL(X, X), num(s, 1)))); END; }
FORMULA(asin) { BEGIN; gin[0] = give(MUL(g, un(s, EM_OP_RSQRT, SUB(num(s, 1), MUL(X, X))))); END; }
FORMULA(acos) { BEGIN; gin[0] = give(un(s, EM_OP_NEG, MUL(g, un(s, EM_OP_RSQRT, SUB(num(s, 1), MUL(X, X)))))); END; }
FORMULA(erfc) {
    BEGIN; /* -2/sqrt(pi) exp(-x^2) */
    T e = un(s, EM_OP_EXP, un(s, EM_OP_NEG, MUL(X, X)));
    gin[0] = give(MUL(g, MUL(e, num(s, -TWO_OVER_SQRTPI))));
    END;
}
FORMULA(bessel_j0) { BEGIN; gin[0] = give(un(s, EM_OP_NEG, MUL(g, un(s, EM_OP_BESSEL_J1, X)))); END; }
FORMULA(bessel_y0) { BEGIN; gin[0] = give(un(s, EM_OP_NEG, MUL(g, un(s, EM_OP_BESSEL_Y1, X)))); END; }
FORMULA(bessel_j1) {
    BEGIN; /* J0 - J1/x, and 1/2 at 0 (J1(x)/x -> 1/2); x = 1 in the branch not taken, whose gradient
            * a double backward would otherwise make 0 * inf */
    T zero = EQ(X, num(s, 0)), safe = WHERE(zero, num(s, 1), X);
    T ratio = WHERE(zero, num(s, 0.5), DIV(un(s, EM_OP_BESSEL_J1, safe), safe));
    gin[0] = give(MUL(g, SUB(un(s, EM_OP_BESSEL_J0, X), ratio)));
    END;
}
FORMULA(bessel_y1) { BEGIN; gin[0] = give(MUL(g, SUB(un(s, EM_OP_BESSEL_Y0, X), DIV(un(s, EM_OP_BESSEL_Y1, X), X)))); END; }
FORMULA(relu) { BEGIN; gin[0] = give(WHERE(GT(Y, num(s, 0)), g, num(s, 0))); END; }
FORMULA(gelu) {
    BEGIN; /* Phi(x) + x phi(x) */
    T cdf = MUL(ADD(un(s, EM_OP_ERF, MUL(X, num(s, SQRT1_2))), num(s, 1)), num(s, 0.5));
    T pdf = MUL(un(s, EM_OP_EXP, MUL(MUL(X, X), num(s, -0.5))), num(s, 0.5 * TWO_OVER_SQRTPI * SQRT1_2));
    gin[0] = give(MUL(g, ADD(cdf, MUL(X, pdf))));
    END;
}
FORMULA(gelu_tanh) {
    BEGIN; /* PyTorch's GeluBackward for approximate='tanh' */
    const double beta = SQRT2 * TWO_OVER_SQRTPI * 0.5, kappa = 0.044715;
    T x2 = MUL(X, X);
    T inner = MUL(ADD(X, MUL(MUL(x2, X), num(s, kappa))), num(s, beta));
    T th = un(s, EM_OP_TANH, inner);
    T left = MUL(X, num(s, 0.5));
    T left_d = MUL(ADD(th, num(s, 1)), num(s, 0.5));
    T inner_d = MUL(ADD(MUL(x2, num(s, 3 * kappa)), num(s, 1)), num(s, beta));
    T right_d = MUL(MUL(left, SUB(num(s, 1), MUL(th, th))), inner_d);
    gin[0] = give(MUL(g, ADD(left_d, right_d)));
    END;
}
FORMULA(silu) {
    BEGIN; /* s (1 + x (1 - s)) */
    T sg = un(s, EM_OP_SIGMOID, X);
    gin[0] = give(MUL(g, MUL(sg, ADD(MUL(X, SUB(num(s, 1), sg)), num(s, 1)))));
    END;
}
FORMULA(cast) { BEGIN; gin[0] = give(g); END; }

/* ---- elementwise, two and three inputs ---- */

FORMULA(add) {
    BEGIN;
    for (int i = 0; i < 2; i++)
        if (NEEDS(i)) gin[i] = give(g);
    END;
}
FORMULA(sub) {
    BEGIN;
    if (NEEDS(0)) gin[0] = give(g);
    if (NEEDS(1)) gin[1] = give(un(s, EM_OP_NEG, g));
    END;
}
FORMULA(mul) {
    BEGIN;
    if (NEEDS(0)) gin[0] = give(MUL(g, c->in[1]));
    if (NEEDS(1)) gin[1] = give(MUL(g, c->in[0]));
    END;
}
FORMULA(div) {
    BEGIN;
    T a = c->in[0], b = c->in[1];
    if (NEEDS(0)) gin[0] = give(DIV(g, b));
    if (NEEDS(1)) gin[1] = give(un(s, EM_OP_NEG, DIV(MUL(g, a), MUL(b, b))));
    END;
}
FORMULA(atan2) {
    BEGIN; /* d/dy = x / (x^2 + y^2), d/dx = -y / (x^2 + y^2) */
    T y = c->in[0], x = c->in[1], r = ADD(MUL(x, x), MUL(y, y));
    if (NEEDS(0)) gin[0] = give(DIV(MUL(g, x), r));
    if (NEEDS(1)) gin[1] = give(un(s, EM_OP_NEG, DIV(MUL(g, y), r)));
    END;
}
/* maximum/minimum: the larger (smaller) operand takes the gradient; ties
 * split it in halves, as in PyTorch. */
static em_status minmax_bw(const em_bw_ctx *c, em_tensor *const *gout, em_tensor **gin, em_op wins) {
    BEGIN;
    T a = c->in[0], b = c->in[1];
    T half = MUL(g, num(s, 0.5)), zero = num(s, 0);
    T tie = EQ(a, b);
    if (NEEDS(0)) gin[0] = give(WHERE(tie, half, WHERE(bin(s, wins, a, b), g, zero)));
    if (NEEDS(1)) gin[1] = give(WHERE(tie, half, WHERE(bin(s, wins, b, a), g, zero)));
    END;
}
FORMULA(maximum) { return minmax_bw(c, gout, gin, EM_OP_GT); }
FORMULA(minimum) { return minmax_bw(c, gout, gin, EM_OP_LT); }
FORMULA(pow) {
    BEGIN; /* PyTorch's masks: b == 0 gives a zero base gradient, a == 0 with b >= 0 a zero exponent one */
    T a = c->in[0], b = c->in[1], zero = num(s, 0);
    if (NEEDS(0)) {
        T d = MUL(b, bin(s, EM_OP_POW, a, SUB(b, num(s, 1))));
        gin[0] = give(WHERE(EQ(b, zero), zero, MUL(g, d)));
    }
    if (NEEDS(1)) {
        T d = MUL(Y, un(s, EM_OP_LOG, a));
        T both = bin(s, EM_OP_LOGICAL_AND, EQ(a, zero), GE(b, zero));
        gin[1] = give(WHERE(both, zero, MUL(g, d)));
    }
    END;
}
/* a - q b with q = trunc(a / b) (fmod) or floor(a / b) (remainder) */
static em_status mod_bw(const em_bw_ctx *c, em_tensor *const *gout, em_tensor **gin, em_op round) {
    BEGIN;
    if (NEEDS(0)) gin[0] = give(g);
    if (NEEDS(1)) gin[1] = give(MUL(un(s, EM_OP_NEG, g), un(s, round, DIV(c->in[0], c->in[1]))));
    END;
}
FORMULA(fmod) { return mod_bw(c, gout, gin, EM_OP_TRUNC); }
FORMULA(remainder) { return mod_bw(c, gout, gin, EM_OP_FLOOR); }
FORMULA(where) {
    BEGIN;
    T zero = num(s, 0), cond = c->in[0];
    if (NEEDS(1)) gin[1] = give(WHERE(cond, g, zero));
    if (NEEDS(2)) gin[2] = give(WHERE(cond, zero, g));
    END;
}
FORMULA(clamp) {
    BEGIN; /* PyTorch's clamp_backward_min_max */
    T x = c->in[0], lo = c->in[1], hi = c->in[2], zero = num(s, 0);
    if (NEEDS(0)) gin[0] = give(WHERE(bin(s, EM_OP_LOGICAL_AND, GE(x, lo), LE(x, hi)), g, zero));
    if (NEEDS(1)) gin[1] = give(WHERE(bin(s, EM_OP_LOGICAL_AND, LT(x, lo), LT(lo, hi)), g, zero));
    if (NEEDS(2)) gin[2] = give(WHERE(bin(s, EM_OP_LOGICAL_OR, GT(x, hi), LT(hi, lo)), g, zero));
    END;
}
FORMULA(lerp) {
    BEGIN; /* a + w (e - a) */
    T a = c->in[0], e = c->in[1], w = c->in[2];
    if (NEEDS(0)) gin[0] = give(MUL(g, SUB(num(s, 1), w)));
    if (NEEDS(1)) gin[1] = give(MUL(g, w));
    if (NEEDS(2)) gin[2] = give(MUL(g, SUB(e, a)));
    END;
}
FORMULA(mul_add) {
    BEGIN; /* x a + b */
    if (NEEDS(0)) gin[0] = give(MUL(g, c->in[1]));
    if (NEEDS(1)) gin[1] = give(MUL(g, c->in[0]));
    if (NEEDS(2)) gin[2] = give(g);
    END;
}
FORMULA(softplus) {
    BEGIN; /* sigmoid(beta x) below the threshold, 1 above */
    T bx = MUL(c->in[0], c->in[1]);
    if (NEEDS(0)) gin[0] = give(WHERE(GT(bx, c->in[2]), g, MUL(g, un(s, EM_OP_SIGMOID, bx))));
    if (NEEDS(1) || NEEDS(2)) {
        em_error(EM_ERR_NOT_IMPLEMENTED, "softplus: gradients with respect to beta and threshold");
        s->failed = true;
    }
    END;
}

/* ---- reductions ---- */

FORMULA(sum) { BEGIN; gin[0] = give(unreduce(s, g, c->node)); END; }
FORMULA(mean) {
    BEGIN;
    gin[0] = give(DIV(unreduce(s, g, c->node), num(s, reduced_count(c->node))));
    END;
}
/* Products of the elements before (after) each one along `dim`, exclusive:
 * differentiable and exact with zeros, unlike out / x. */
static T exclusive_cumprod(scope *s, T x, int64_t dim, bool reverse) {
    if (!x) return keep(s, NULL);
    T v = reverse ? keep(s, em_flip(x, &dim, 1)) : x;
    T cp = v ? keep(s, em_scan(EM_OP_CUMPROD, v, dim)) : NULL;
    int64_t n = x->shape[dim];
    T head = v ? keep(s, em_slice(v, dim, 0, 1, 1)) : NULL;
    T ones = head ? keep(s, em_full_on(head->device, head->shape, head->ndim, 1.0, head->dtype)) : NULL;
    T body = cp ? keep(s, em_slice(cp, dim, 0, n - 1, 1)) : NULL;
    T parts[2] = {ones, body};
    T r = ones && body ? keep(s, em_cat(parts, 2, dim)) : keep(s, NULL);
    return reverse && r ? keep(s, em_flip(r, &dim, 1)) : r;
}
FORMULA(prod) {
    BEGIN;
    const em_node *n = c->node;
    T x = X;
    int64_t dim;
    if (n->attrs.n_dims == 1) {
        dim = n->attrs.dims[0];
    } else if (n->attrs.n_dims != n->in_types[0].ndim && n->attrs.n_dims != 0) {
        em_error(EM_ERR_NOT_IMPLEMENTED, "prod: the gradient of a product over %d of %d dims",
                 n->attrs.n_dims, n->in_types[0].ndim);
        s->failed = true;
        END;
    } else { /* all dims (or none of a 0-d input): along the flattened input */
        int64_t flat = x->numel;
        x = keep(s, em_reshape(x, &flat, 1));
        dim = 0;
    }
    if (x && x->shape[dim] == 0) { /* an empty product: no element to differentiate */
        gin[0] = give(zeros_of(s, &n->in_types[0], g->dtype));
        END;
    }
    T others = MUL(exclusive_cumprod(s, x, dim, false), exclusive_cumprod(s, x, dim, true));
    if (others && n->attrs.n_dims != 1) others = keep(s, em_reshape(others, n->in_types[0].shape, n->in_types[0].ndim));
    gin[0] = give(MUL(unreduce(s, g, n), others));
    END;
}
/* amax/amin: the gradient shared evenly by the elements equal to the
 * result (PyTorch's rule for amax; max(dim) takes its gather route). */
/* The reduced gradient gu shared evenly by the elements `mask` selects in
 * each reduced group (the ties at a max, min or inf-norm). */
static T share_among(scope *s, T gu, T mask, const em_node *n) {
    T fm = mask ? keep(s, em_cast(mask, gu->dtype)) : keep(s, NULL);
    T count = fm ? keep(s, em_sum(fm, n->attrs.dims, n->attrs.n_dims, true)) : keep(s, NULL);
    return DIV(MUL(gu, fm), count);
}

static em_status extreme_bw(const em_bw_ctx *c, em_tensor *const *gout, em_tensor **gin) {
    BEGIN;
    const em_node *n = c->node;
    T gu = unreduce(s, g, n);
    gin[0] = give(gu ? share_among(s, gu, EQ(X, unreduce(s, Y, n)), n) : NULL);
    END;
}
FORMULA(amax) { return extreme_bw(c, gout, gin); }
FORMULA(amin) { return extreme_bw(c, gout, gin); }
/* x - mean(x) over the reduced dims */
static T centred(scope *s, T x, const em_node *n) {
    return SUB(x, x ? keep(s, em_mean(x, n->attrs.dims, n->attrs.n_dims, true)) : keep(s, NULL));
}
FORMULA(var) {
    BEGIN; /* 2 (x - mean) / (N - correction) */
    double denom = reduced_count(c->node) - c->node->attrs.correction;
    gin[0] = give(MUL(unreduce(s, g, c->node), MUL(centred(s, X, c->node), num(s, 2.0 / denom))));
    END;
}
FORMULA(std) {
    BEGIN; /* (x - mean) / ((N - correction) std) */
    double denom = reduced_count(c->node) - c->node->attrs.correction;
    T scaled = DIV(g, MUL(Y, num(s, denom)));
    gin[0] = give(MUL(unreduce(s, scaled, c->node), centred(s, X, c->node)));
    END;
}
FORMULA(norm) {
    BEGIN;
    const em_node *n = c->node;
    double p = n->attrs.ord;
    T zero = num(s, 0), x = X;
    T gu = unreduce(s, g, n), yu = unreduce(s, Y, n);
    T r;
    if (p == 0.0) {
        r = zeros_of(s, &n->in_types[0], g->dtype);
    } else if (p == 1.0) {
        r = MUL(gu, un(s, EM_OP_SIGN, x));
    } else if (isinf(p)) { /* the extreme |x|, shared evenly among ties */
        T signed_g = MUL(gu, un(s, EM_OP_SIGN, x));
        r = signed_g ? share_among(s, signed_g, EQ(un(s, EM_OP_ABS, x), yu), n) : NULL;
    } else if (p == 2.0) { /* x / norm, zero where the norm is zero */
        r = WHERE(EQ(yu, zero), zero, MUL(gu, DIV(x, yu)));
    } else { /* x |x|^(p-2) / norm^(p-1) */
        T ax = un(s, EM_OP_ABS, x);
        T num_ = MUL(x, bin(s, EM_OP_POW, ax, num(s, p - 2)));
        T den = bin(s, EM_OP_POW, yu, num(s, p - 1));
        r = WHERE(EQ(yu, zero), zero, MUL(gu, DIV(num_, den)));
    }
    gin[0] = give(r);
    END;
}
FORMULA(logsumexp) {
    BEGIN;
    const em_node *n = c->node;
    gin[0] = give(MUL(unreduce(s, g, n), un(s, EM_OP_EXP, SUB(X, unreduce(s, Y, n)))));
    END;
}

/* ---- scans ---- */

/* Sums from each position to the end of its line along d. */
static T reversed_cumsum(scope *s, T a, int64_t d) {
    T f = a ? keep(s, em_flip(a, &d, 1)) : keep(s, NULL);
    T cs = f ? keep(s, em_scan(EM_OP_CUMSUM, f, d)) : keep(s, NULL);
    return cs ? keep(s, em_flip(cs, &d, 1)) : keep(s, NULL);
}

FORMULA(cumsum) {
    BEGIN; /* the reversed cumulative sum of g */
    int64_t d = c->node->attrs.dims[0];
    if (g->ndim == 0) {
        gin[0] = give(g);
        END;
    }
    gin[0] = give(reversed_cumsum(s, g, d));
    END;
}

FORMULA(cumprod) {
    /* dx[k] = sum over j >= k of g[j] * (the product of x[0..j] but x[k]),
     * per line along d, zeros included:
     *   before the line's first zero: reversed cumsum of g * y, over x[k];
     *   at the first zero z: reversed cumsum of g * y', y' the cumprod with
     *     x[z] taken as 1 (every product that skips x[z] includes x[0..z));
     *   after it: 0 (every such product includes x[z]).
     * Ops only, no read of the data: the same graph serves every input.
     * Differentiating this again (create_graph, which is grad mode here) is
     * right away from zeros only: past a zero the constant 0 has lost how
     * it depends on x[z]. So that case reads the data, and refuses. */
    BEGIN;
    int64_t d = c->node->attrs.dims[0];
    if (g->ndim == 0) {
        gin[0] = give(g);
        END;
    }
    T zero = num(s, 0), one = num(s, 1);
    T is_zero = EQ(X, zero);
    if (em_grad_enabled()) {
        T any_zero = is_zero ? keep(s, em_reduce(EM_OP_ANY, is_zero, NULL, 0, false, 0, 0)) : NULL;
        if (any_zero && em_tensor_has_data(any_zero) && ((uint8_t *)any_zero->storage->data)[any_zero->offset]) {
            em_error(EM_ERR_NOT_IMPLEMENTED,
                     "cumprod: the second derivative (create_graph=True) for an input holding zeros");
            s->failed = true;
            END;
        }
    }
    T zeros_so_far = is_zero ? keep(s, em_scan(EM_OP_CUMSUM, is_zero, d)) : keep(s, NULL);
    T before = EQ(zeros_so_far, zero);
    T first = bin(s, EM_OP_LOGICAL_AND, is_zero, EQ(zeros_so_far, one));
    T at_and_before = DIV(reversed_cumsum(s, MUL(g, Y), d), WHERE(before, X, one));
    T y_skip = WHERE(first, one, X);
    T y1 = y_skip ? keep(s, em_scan(EM_OP_CUMPROD, y_skip, d)) : keep(s, NULL);
    T at_first = reversed_cumsum(s, MUL(g, y1), d);
    gin[0] = give(WHERE(before, at_and_before, WHERE(first, at_first, zero)));
    END;
}
FORMULA(softmax) {
    BEGIN; /* y (g - sum(g y)) */
    int64_t d = c->node->attrs.dims[0];
    T gy = MUL(g, Y);
    gin[0] = give(MUL(Y, SUB(g, g->ndim ? sum_dim(s, gy, d, true) : gy)));
    END;
}
FORMULA(log_softmax) {
    BEGIN; /* g - exp(y) sum(g) */
    int64_t d = c->node->attrs.dims[0];
    gin[0] = give(SUB(g, MUL(un(s, EM_OP_EXP, Y), g->ndim ? sum_dim(s, g, d, true) : g)));
    END;
}

/* ---- matmul ---- */

static T mT(scope *s, T a) { return a ? keep(s, em_transpose(a, -2, -1)) : keep(s, NULL); }
static T unsq(scope *s, T a, int64_t d) { return a ? keep(s, em_unsqueeze(a, d)) : keep(s, NULL); }
static T mm(scope *s, T a, T b) { return a && b ? keep(s, em_matmul(a, b)) : keep(s, NULL); }

/* Is t a matrix stored transposed (column-major), like W.t()? */
static bool column_major(const em_tensor *t) {
    return t->ndim == 2 && t->shape[0] > 1 && t->shape[1] > 1 && t->strides[0] == 1 &&
           t->strides[1] == t->shape[0];
}

/* x @ y laid out like `like`: for a column-major `like` (the W.t() of a
 * Linear layer) as (y^T x^T)^T, so the gradient reaching W is contiguous
 * and its .grad needs no transposing copy (PyTorch's mm_mat2_backward). */
static T mm_like(scope *s, T x, T y, const em_tensor *like) {
    return column_major(like) ? mT(s, mm(s, mT(s, y), mT(s, x))) : mm(s, x, y);
}

FORMULA(matmul) {
    BEGIN; /* matrices (batched): g b^T and a^T g; a 1-d side is a row or column */
    T a = c->in[0], b = c->in[1];
    if (a->ndim == 1 && b->ndim == 1) {
        if (NEEDS(0)) gin[0] = give(MUL(g, b));
        if (NEEDS(1)) gin[1] = give(MUL(g, a));
    } else if (b->ndim == 1) { /* [.., m, k] @ [k] -> [.., m] */
        T gc = unsq(s, g, -1);
        if (NEEDS(0)) gin[0] = give(MUL(gc, b));
        if (NEEDS(1)) gin[1] = give(mm(s, unsq(s, g, -2), a)); /* [.., 1, k], summed by the engine */
    } else if (a->ndim == 1) { /* [k] @ [.., k, n] -> [.., n] */
        T gr = unsq(s, g, -2);
        if (NEEDS(0)) gin[0] = give(mm(s, gr, mT(s, b)));
        if (NEEDS(1)) gin[1] = give(MUL(unsq(s, a, -1), gr));
    } else if (b->ndim == 2 && a->ndim > 2) { /* a Linear layer on [.., m, k]: b's gradient in
                                                 one GEMM over all rows, not a batch summed */
        if (NEEDS(0)) gin[0] = give(mm(s, g, mT(s, b)));
        if (NEEDS(1)) {
            int64_t rows = 1; /* (counted, not -1: with k or n zero, -1 is ambiguous) */
            for (int d = 0; d < a->ndim - 1; d++) rows *= a->shape[d];
            int64_t ka[2] = {rows, a->shape[a->ndim - 1]}, ng[2] = {rows, g->shape[g->ndim - 1]};
            T a2 = keep(s, em_reshape(a, ka, 2)), g2 = keep(s, em_reshape(g, ng, 2));
            gin[1] = give(mm_like(s, mT(s, a2), g2, b));
        }
    } else {
        if (NEEDS(0)) gin[0] = give(mm_like(s, g, mT(s, b), a));
        if (NEEDS(1)) gin[1] = give(mm_like(s, mT(s, a), g, b));
    }
    END;
}

/* ---- views and data movement ---- */

FORMULA(reshape) {
    BEGIN;
    const em_type *in = &c->node->in_types[0];
    gin[0] = give(keep(s, em_reshape(g, in->shape, in->ndim)));
    END;
}
FORMULA(permute) {
    BEGIN;
    int64_t inv[EM_MAX_DIMS];
    for (int i = 0; i < c->node->attrs.n_dims; i++) inv[c->node->attrs.dims[i]] = i;
    gin[0] = give(keep(s, em_permute(g, inv, c->node->attrs.n_dims)));
    END;
}
FORMULA(expand) { BEGIN; gin[0] = give(g); END; } /* the engine sums it down */
FORMULA(contiguous) { BEGIN; gin[0] = give(g); END; }

/* g placed into zeros of the input's shape at positions `idx` (int64, one
 * per element of g along `dim`). Without create_graph a plain strided copy
 * into a view of the zeros does it; with it, index_put, so the placement is
 * itself differentiable. While tracing, index_put too: a graph has no
 * writes into views. */
static T embed(scope *s, const em_node *n, T g, int64_t dim, int64_t start, int64_t step, bool select) {
    const em_type *in = &n->in_types[0];
    T z = zeros_of(s, in, g->dtype);
    if (!z) return NULL;
    if (!em_grad_enabled() && !em_get_trace_hook()) {
        T v = select ? keep(s, em_select(z, dim, start))
                     : keep(s, em_slice(z, dim, start, start + g->shape[dim] * step, step));
        em_attrs at;
        memset(&at, 0, sizeof at);
        at.dtype = g->dtype;
        if (v && em_op_run_inplace(EM_OP_CAST, &g, 1, &at, v) != EM_OK) return keep(s, NULL);
        return v ? z : NULL;
    }
    T vals = select ? unsq(s, g, dim) : g;
    int64_t len = select ? 1 : g->shape[dim];
    T idx = keep(s, em_arange_on(g->device, (double)start, (double)(start + len * step), (double)step, EM_DTYPE_I64));
    return idx && vals ? keep(s, em_index_put(z, &idx, &dim, 1, vals, false)) : keep(s, NULL);
}
FORMULA(slice) {
    BEGIN;
    const em_attrs *at = &c->node->attrs;
    gin[0] = give(embed(s, c->node, g, at->dims[0], (int64_t)at->start, (int64_t)at->step, false));
    END;
}
FORMULA(select) {
    BEGIN;
    const em_attrs *at = &c->node->attrs;
    gin[0] = give(embed(s, c->node, g, at->dims[0], (int64_t)at->start, 1, true));
    END;
}
/* g (the diagonal's entries, a last dim) put on the diagonal of zeros of
 * the input's shape: the input's dims d1 and d2 are moved to the front
 * (a view), g's last dim too, an index_put at the diagonal's positions
 * (differentiable, and traceable), and the dims moved back. */
FORMULA(diagonal) {
    BEGIN;
    const em_type *in = &c->node->in_types[0];
    const em_attrs *at = &c->node->attrs;
    int nd = in->ndim, d1 = (int)at->dims[0], d2 = (int)at->dims[1];
    int64_t perm[EM_MAX_DIMS], inv[EM_MAX_DIMS], gperm[EM_MAX_DIMS], k = at->diagonal, len = g->shape[g->ndim - 1];
    int m = 2;
    perm[0] = d1;
    perm[1] = d2;
    for (int i = 0; i < nd; i++)
        if (i != d1 && i != d2) perm[m++] = i;
    for (int i = 0; i < nd; i++) inv[perm[i]] = i;
    gperm[0] = g->ndim - 1;
    for (int i = 1; i < g->ndim; i++) gperm[i] = i - 1;
    T z = zeros_of(s, in, g->dtype);
    T zp = z ? keep(s, em_permute(z, perm, nd)) : keep(s, NULL);
    T gp = keep(s, em_permute(g, gperm, g->ndim));
    int64_t r0 = k < 0 ? -k : 0, c0 = k > 0 ? k : 0;
    T idx[2] = {keep(s, em_arange_on(g->device, (double)r0, (double)(r0 + len), 1, EM_DTYPE_I64)),
                keep(s, em_arange_on(g->device, (double)c0, (double)(c0 + len), 1, EM_DTYPE_I64))};
    int64_t dims[2] = {0, 1};
    T put = zp && gp && idx[0] && idx[1] ? keep(s, em_index_put(zp, idx, dims, 2, gp, false)) : keep(s, NULL);
    gin[0] = give(put ? keep(s, em_permute(put, inv, nd)) : keep(s, NULL));
    END;
}
FORMULA(flip) {
    BEGIN;
    gin[0] = give(keep(s, em_flip(g, c->node->attrs.dims, c->node->attrs.n_dims)));
    END;
}
FORMULA(roll) {
    BEGIN;
    const em_attrs *at = &c->node->attrs;
    int64_t back[EM_MAX_DIMS];
    for (int i = 0; i < at->n_shifts; i++) back[i] = -at->shifts[i];
    gin[0] = give(keep(s, em_roll(g, back, at->dims, at->n_shifts)));
    END;
}
FORMULA(cat) {
    BEGIN; /* each input's stretch of g */
    int64_t d = c->node->attrs.dims[0], off = 0;
    for (int i = 0; i < c->node->n_in; i++) {
        const em_type *in = &c->node->in_types[i];
        if (in->ndim != g->ndim) { /* a legacy empty 1-d input, which cat skips */
            if (NEEDS(i)) gin[i] = give(zeros_of(s, in, g->dtype));
            continue;
        }
        int64_t len = in->shape[d];
        if (NEEDS(i)) gin[i] = give(keep(s, em_slice(g, d, off, off + len, 1)));
        off += len;
    }
    END;
}
FORMULA(tril) { BEGIN; gin[0] = give(keep(s, em_tril(g, c->node->attrs.diagonal))); END; }
FORMULA(triu) { BEGIN; gin[0] = give(keep(s, em_triu(g, c->node->attrs.diagonal))); END; }

/* ---- indexing ---- */

/* g added into zeros of the input's shape at the indexed positions:
 * the adjoint of reading them. */
static T index_adjoint(scope *s, const em_node *n, T g, T const *idx, int k) {
    T z = zeros_of(s, &n->in_types[0], g->dtype);
    for (int j = 0; j < k; j++)
        if (!idx[j]) return keep(s, NULL);
    return z ? keep(s, em_index_put(z, idx, n->attrs.dims, k, g, true)) : NULL;
}
FORMULA(index_select) {
    BEGIN;
    if (c->node->in_types[0].ndim == 0) /* a 0-d input's one element, selected once: g itself */
        gin[0] = give(keep(s, em_reshape(g, NULL, 0)));
    else
        gin[0] = give(index_adjoint(s, c->node, g, &c->in[1], 1));
    END;
}
FORMULA(index) {
    BEGIN;
    gin[0] = give(index_adjoint(s, c->node, g, &c->in[1], c->node->n_in - 1));
    END;
}
FORMULA(gather) {
    BEGIN;
    T z = zeros_of(s, &c->node->in_types[0], g->dtype);
    gin[0] = give(z ? keep(s, em_scatter(z, c->node->attrs.dims[0], c->in[1], g, true)) : NULL);
    END;
}
/* src's gradient: g read at the index; where src is bigger than the index
 * (scatter reads only its leading part), zeros pad the rest. */
static T pad_to(scope *s, T t, const em_type *want) {
    for (int d = 0; t && d < t->ndim && want->ndim == t->ndim; d++) {
        int64_t extra = want->shape[d] - t->shape[d];
        if (extra <= 0) continue;
        int64_t shape[EM_MAX_DIMS];
        memcpy(shape, t->shape, (size_t)t->ndim * sizeof *shape);
        shape[d] = extra;
        T z = keep(s, em_full_on(t->device, shape, t->ndim, 0.0, t->dtype));
        T parts[2] = {t, z};
        t = z ? keep(s, em_cat(parts, 2, d)) : NULL;
    }
    return t ? t : keep(s, NULL);
}
FORMULA(scatter) {
    BEGIN; /* (input, index, src) */
    int64_t d = c->node->attrs.dims[0];
    T index = c->in[1];
    if (NEEDS(0)) {
        if (c->node->attrs.accumulate) {
            gin[0] = give(g);
        } else { /* overwritten positions get nothing */
            T z = keep(s, em_zeros(NULL, 0, g->dtype));
            gin[0] = give(z ? keep(s, em_scatter(g, d, index, z, false)) : NULL);
        }
    }
    if (NEEDS(2)) {
        T got = keep(s, em_gather(g, d, index));
        gin[2] = give(c->node->in_types[2].ndim ? pad_to(s, got, &c->node->in_types[2]) : got);
    }
    END;
}
FORMULA(index_put) {
    BEGIN; /* (input, indices..., values) */
    int k = c->node->n_in - 2;
    T const *idx = &c->in[1];
    if (NEEDS(0)) {
        if (c->node->attrs.accumulate) {
            gin[0] = give(g);
        } else {
            T z = keep(s, em_zeros(NULL, 0, g->dtype));
            gin[0] = give(z ? keep(s, em_index_put(g, idx, c->node->attrs.dims, k, z, false)) : NULL);
        }
    }
    if (NEEDS(k + 1)) gin[k + 1] = give(keep(s, em_index(g, idx, c->node->attrs.dims, k)));
    END;
}
FORMULA(masked_select) {
    BEGIN; /* g back at the mask's true positions (the mask broadcast to the input) */
    const em_type *in = &c->node->in_types[0];
    T mask = c->in[1];
    int64_t shape[EM_MAX_DIMS];
    int nd;
    if (!em_broadcast_shapes(in->shape, in->ndim, mask->shape, mask->ndim, shape, &nd)) {
        em_error(EM_ERR_INTERNAL, "masked_select backward: shapes do not broadcast");
        s->failed = true;
        END;
    }
    T m = keep(s, em_expand(mask, shape, nd));
    T nz = m ? keep(s, em_nonzero(m)) : keep(s, NULL);
    T idx[EM_MAX_DIMS];
    int64_t dims[EM_MAX_DIMS];
    for (int j = 0; j < nd; j++) {
        idx[j] = nz ? keep(s, em_select(nz, 1, j)) : keep(s, NULL);
        dims[j] = j;
    }
    T z = keep(s, em_full_on(g->device, shape, nd, 0.0, g->dtype));
    bool ok = z && nz;
    for (int j = 0; j < nd; j++) ok = ok && idx[j];
    if (nd == 0) { /* 0-d input and mask: one element or none */
        gin[0] = give(g->numel ? keep(s, em_reshape(g, NULL, 0)) : z);
    } else {
        gin[0] = give(ok ? keep(s, em_index_put(z, idx, dims, nd, g, true)) : keep(s, NULL));
    }
    END;
}

/* ---- the table, from ops.def's grad column ---- */

/* ---- normalisation ---- */

/* layer_norm: with xhat = (x - mean) * rstd and gx = g * weight, PyTorch's
 * dx = rstd * (gx - mean(gx) - xhat * mean(gx * xhat)) over the normalized
 * dims; dweight = g * xhat and dbias = g, which the engine sums down to
 * their shapes. mean and rstd are recomputed from x, in ops (so the
 * formula differentiates again). */
FORMULA(layer_norm) {
    BEGIN;
    const em_node *n = c->node;
    int k = n->attrs.n_dims;
    const int64_t *dims = n->attrs.dims;
    T mean = X ? keep(s, em_mean(X, dims, k, true)) : keep(s, NULL);
    T var = X ? keep(s, em_reduce(EM_OP_VAR, X, dims, k, true, 0.0, 0.0)) : keep(s, NULL);
    T rstd = un(s, EM_OP_RSQRT, ADD(var, num(s, n->attrs.value)));
    T xhat = MUL(SUB(X, mean), rstd);
    T gx = n->n_in > 1 ? MUL(g, c->in[1]) : g;
    if (NEEDS(0)) {
        T m1 = gx ? keep(s, em_mean(gx, dims, k, true)) : keep(s, NULL);
        T gxx = MUL(gx, xhat);
        T m2 = gxx ? keep(s, em_mean(gxx, dims, k, true)) : keep(s, NULL);
        gin[0] = give(MUL(rstd, SUB(SUB(gx, m1), MUL(xhat, m2))));
    }
    if (n->n_in > 1 && NEEDS(1)) gin[1] = give(MUL(g, xhat));
    if (n->n_in > 2 && NEEDS(2)) gin[2] = give(g);
    END;
}

/* ---- sliding windows: each op's gradient is another window op ---- */

/* op(in) with attributes a, its first result; NULL in, NULL out. */
static T run_op(scope *s, em_op op, em_tensor *const *in, int n, const em_attrs *a) {
    for (int i = 0; i < n; i++)
        if (!in[i]) return keep(s, NULL);
    em_tensor *out = NULL;
    return keep(s, em_op_run(op, in, n, a, &out, 1) == EM_OK ? out : NULL);
}

/* a with its shape attribute set to t's shape: the size a gradient op
 * restores. */
static em_attrs shaped(const em_attrs *a, const em_type *t) {
    em_attrs r = *a;
    r.n_layout = 0; /* (a convolution's channels-last result: the ops with a shape take no layout) */
    r.n_shape = t->ndim;
    memcpy(r.shape, t->shape, sizeof r.shape);
    return r;
}

/* t cut down to want's spatial sizes: a convolution of a transposed
 * convolution's big side gives a few positions more when its
 * output_padding reached past the stride (a dilation larger than it). */
static T narrow_to(scope *s, T t, const em_type *want) {
    for (int d = 2; t && d < want->ndim; d++)
        if (t->shape[d] != want->shape[d]) t = keep(s, em_slice(t, d, 0, want->shape[d], 1));
    return t;
}

/* A bias's gradient: g summed over all but the channel dim. */
static T bias_grad(scope *s, T g) {
    int64_t dims[EM_MAX_DIMS];
    int k = 0;
    for (int d = 0; g && d < g->ndim; d++)
        if (d != 1) dims[k++] = d;
    return g ? keep(s, em_sum(g, dims, k, false)) : keep(s, NULL);
}

/* conv(x, w, b): x's gradient is conv_transpose(g, w), w's conv_weight(x, g). */
/* A stride-1 convolution's input gradient is itself a convolution: of g
 * with the weight's channels swapped within each group and its taps
 * reversed, padded by d (k - 1) - p. That is a forward conv (im2col of g,
 * one GEMM of the forward's shape) instead of conv_transpose (a GEMM with
 * a tall output, then col2im's scatter), and as fast as the forward. */
static T conv_input_grad_as_conv(scope *s, const em_node *n, T g, T w) {
    const em_attrs *at = &n->attrs;
    const em_type *wt = &n->in_types[1];
    int nsp = wt->ndim - 2;
    em_attrs a = *at;
    for (int d = 0; d < nsp; d++) {
        int64_t reach = at->dilation[d] * (wt->shape[2 + d] - 1);
        if (at->stride[d] != 1 || at->padding[d] > reach || at->padding[nsp + d] > reach) return NULL;
        a.padding[d] = reach - at->padding[d];
        a.padding[nsp + d] = reach - at->padding[nsp + d];
    }
    int64_t groups = at->groups > 0 ? at->groups : 1, cout = wt->shape[0], cin_g = wt->shape[1];
    int64_t split[EM_MAX_DIMS] = {groups, cout / groups, cin_g}, order[EM_MAX_DIMS] = {0, 2, 1};
    int64_t swapped[EM_MAX_DIMS] = {cin_g * groups, cout / groups}, taps[EM_MAX_SPATIAL];
    for (int d = 0; d < nsp; d++) {
        split[3 + d] = swapped[2 + d] = wt->shape[2 + d];
        order[3 + d] = 3 + d;
        taps[d] = 2 + d;
    }
    T v = w ? keep(s, em_reshape(w, split, nsp + 3)) : keep(s, NULL);
    v = v ? keep(s, em_permute(v, order, nsp + 3)) : v;
    v = v ? keep(s, em_reshape(v, swapped, nsp + 2)) : v;
    v = v ? keep(s, em_flip(v, taps, nsp)) : v;
    T in[2] = {g, v};
    return v ? run_op(s, EM_OP_CONV, in, 2, &a) : keep(s, NULL);
}

FORMULA(conv) {
    BEGIN;
    const em_node *n = c->node;
    if (NEEDS(0)) {
        T direct = conv_input_grad_as_conv(s, n, g, c->in[1]);
        em_attrs a = shaped(&n->attrs, &n->in_types[0]);
        T in[2] = {g, c->in[1]};
        gin[0] = give(direct ? direct : run_op(s, EM_OP_CONV_TRANSPOSE, in, 2, &a));
    }
    if (NEEDS(1)) {
        em_attrs a = shaped(&n->attrs, &n->in_types[1]);
        T in[2] = {X, g};
        gin[1] = give(run_op(s, EM_OP_CONV_WEIGHT, in, 2, &a));
    }
    if (n->n_in > 2 && NEEDS(2)) gin[2] = give(bias_grad(s, g));
    END;
}

/* conv_transpose(x, w, b): x's gradient is conv(g, w), w's
 * conv_weight(g, x) (g is the big side). */
FORMULA(conv_transpose) {
    BEGIN;
    const em_node *n = c->node;
    if (NEEDS(0)) {
        T in[2] = {g, c->in[1]};
        gin[0] = give(narrow_to(s, run_op(s, EM_OP_CONV, in, 2, &n->attrs), &n->in_types[0]));
    }
    if (NEEDS(1)) {
        em_attrs a = shaped(&n->attrs, &n->in_types[1]);
        T in[2] = {g, X};
        gin[1] = give(run_op(s, EM_OP_CONV_WEIGHT, in, 2, &a));
    }
    if (n->n_in > 2 && NEEDS(2)) gin[2] = give(bias_grad(s, g));
    END;
}

/* conv_weight(x, gy) is bilinear: x's gradient is conv_transpose(gy, g)
 * with g as the weight, gy's conv(x, g). */
FORMULA(conv_weight) {
    BEGIN;
    const em_node *n = c->node;
    if (NEEDS(0)) {
        em_attrs a = shaped(&n->attrs, &n->in_types[0]);
        T in[2] = {c->in[1], g};
        gin[0] = give(run_op(s, EM_OP_CONV_TRANSPOSE, in, 2, &a));
    }
    if (NEEDS(1)) {
        T in[2] = {X, g};
        gin[1] = give(narrow_to(s, run_op(s, EM_OP_CONV, in, 2, &n->attrs), &n->in_types[1]));
    }
    END;
}

FORMULA(unfold) {
    BEGIN;
    em_attrs a = shaped(&c->node->attrs, &c->node->in_types[0]);
    gin[0] = give(run_op(s, EM_OP_FOLD, &g, 1, &a));
    END;
}

FORMULA(fold) {
    BEGIN;
    gin[0] = give(run_op(s, EM_OP_UNFOLD, &g, 1, &c->node->attrs));
    END;
}

/* Sorting and selection: g goes back to where each value came from (the
 * indices, result 1), zeros elsewhere; a result without the dim (keepdim
 * false) gets it back first. */
FORMULA(sort) {
    BEGIN;
    const em_node *n = c->node;
    int64_t dim = n->attrs.dims[0];
    if (n->in_types[0].ndim == 0) {
        gin[0] = give(g);
        END;
    }
    T idx = c->out[1];
    bool dropped = n->out_types[0].ndim < n->in_types[0].ndim;
    if (dropped) {
        g = keep(s, em_unsqueeze(g, dim));
        idx = keep(s, em_unsqueeze(idx, dim));
    }
    T z = zeros_of(s, &n->in_types[0], g ? g->dtype : EM_DTYPE_F32);
    gin[0] = give(z && g && idx ? keep(s, em_scatter(z, dim, idx, g, true)) : keep(s, NULL));
    END;
}
#define bw_topk bw_sort
#define bw_kthvalue bw_sort
#define bw_median bw_sort
#define bw_nanmedian bw_sort
#define bw_mode bw_sort

/* Both max pools: g goes to where each max was (the saved indices). */
FORMULA(max_pool) {
    BEGIN;
    em_attrs a = shaped(&c->node->attrs, &c->node->in_types[0]);
    T in[2] = {g, c->out[1]};
    gin[0] = give(run_op(s, EM_OP_MAX_POOL_GRAD, in, 2, &a));
    END;
}
#define bw_adaptive_max_pool bw_max_pool

/* max_pool_grad(gy, idx) adds gy at idx: gy's gradient reads g there. */
FORMULA(max_pool_grad) {
    BEGIN;
    const em_type *gy = &c->node->in_types[0];
    int64_t flat[3] = {gy->shape[0], gy->shape[1], -1};
    T gf = keep(s, em_reshape(g, flat, 3)), idx = keep(s, em_reshape(c->in[1], flat, 3));
    T r = gf && idx ? keep(s, em_gather(gf, 2, idx)) : keep(s, NULL);
    gin[0] = give(r ? keep(s, em_reshape(r, gy->shape, gy->ndim)) : NULL);
    END;
}

FORMULA(avg_pool) {
    BEGIN;
    em_attrs a = shaped(&c->node->attrs, &c->node->in_types[0]);
    gin[0] = give(run_op(s, EM_OP_AVG_POOL_GRAD, &g, 1, &a));
    END;
}

/* avg_pool_grad's adjoint is avg_pool, in whichever ceil_mode gives its
 * gradient input's size. */
FORMULA(avg_pool_grad) {
    BEGIN;
    const em_type *gy = &c->node->in_types[0];
    em_attrs a = c->node->attrs;
    em_type big = c->node->out_types[0], small;
    a.ceil_mode = false;
    a.ceil_mode = em_op_infer(EM_OP_AVG_POOL, &big, 1, &a, &small, 1) != EM_OK ||
                  !em_shape_eq(small.shape, small.ndim, gy->shape, gy->ndim);
    gin[0] = give(run_op(s, EM_OP_AVG_POOL, &g, 1, &a));
    END;
}

FORMULA(adaptive_avg_pool) {
    BEGIN;
    em_attrs a = shaped(&c->node->attrs, &c->node->in_types[0]);
    gin[0] = give(run_op(s, EM_OP_ADAPTIVE_AVG_POOL_GRAD, &g, 1, &a));
    END;
}

FORMULA(adaptive_avg_pool_grad) {
    BEGIN;
    em_attrs a = shaped(&c->node->attrs, &c->node->in_types[0]);
    gin[0] = give(run_op(s, EM_OP_ADAPTIVE_AVG_POOL, &g, 1, &a));
    END;
}

/* ---- linear algebra (PyTorch's formulas, real case) ---- */

static T la1(scope *s, em_op op, T a, T b, bool upper) {
    em_attrs at;
    memset(&at, 0, sizeof at);
    at.upper = upper;
    T in[2] = {a, b};
    return run_op(s, op, in, b ? 2 : 1, &at);
}
/* A^{-T}: the transpose of inv(A) */
static T inv_t(scope *s, T a) { return mT(s, la1(s, EM_OP_INV, a, NULL, false)); }
/* x[..., None, None] */
static T as_matrix_scale(scope *s, T x) { return unsq(s, unsq(s, x, -1), -1); }
static T eye_of(scope *s, int64_t n, const em_tensor *like) {
    return like ? keep(s, em_eye_on(like->device, n, n, like->dtype)) : keep(s, NULL);
}
/* diag_embed(v): v on the diagonal of square matrices */
static T diag_embed(scope *s, T v) {
    return v ? MUL(eye_of(s, v->shape[v->ndim - 1], v), unsq(s, v, -2)) : keep(s, NULL);
}
/* X R^{-T} for upper triangular R: (R^{-1} X^T)^T */
static T right_solve_rt(scope *s, T x, T r) { return mT(s, la1(s, EM_OP_SOLVE_TRIANGULAR, r, mT(s, x), true)); }

/* Y = A^{-1}: gA = -Y^T g Y^T */
FORMULA(inv) {
    BEGIN;
    T yt = mT(s, Y);
    gin[0] = give(un(s, EM_OP_NEG, mm(s, mm(s, yt, g), yt)));
    END;
}

/* X = A^{-1} B: gB = A^{-T} g, gA = -gB X^T (triangular: within A's triangle) */
FORMULA(solve) {
    BEGIN;
    bool tri = c->node->op == EM_OP_SOLVE_TRIANGULAR, up = c->node->attrs.upper;
    T gb = tri ? la1(s, EM_OP_SOLVE_TRIANGULAR, mT(s, X), g, !up) : la1(s, EM_OP_SOLVE, mT(s, X), g, false);
    if (NEEDS(0)) {
        T ga = un(s, EM_OP_NEG, mm(s, gb, mT(s, Y)));
        if (tri) ga = ga ? keep(s, up ? em_triu(ga, 0) : em_tril(ga, 0)) : keep(s, NULL);
        gin[0] = give(ga);
    }
    if (NEEDS(1)) gin[1] = give(gb);
    END;
}
#define bw_solve_triangular bw_solve

/* gA = g det A^{-T} */
/* gA = g cof(A), the cofactor matrix. det(A) A^{-T} is cof(A) only where A
 * is invertible; through the SVD it is defined for every A: cof(A) =
 * det(U) det(Vh) U diag(prod_{j != i} s_j) Vh (the products exclusive, so
 * exact with zero singular values: a rank n-1 matrix has a non-zero
 * gradient). */
FORMULA(det) {
    BEGIN;
    em_attrs at;
    memset(&at, 0, sizeof at);
    em_tensor *usv[3] = {NULL, NULL, NULL};
    if (em_op_run(EM_OP_SVD, &X, 1, &at, usv, 3) != EM_OK) {
        s->failed = true;
        END;
    }
    T u = keep(s, usv[0]), sv = keep(s, usv[1]), vh = keep(s, usv[2]);
    int64_t last = sv->ndim - 1;
    T others = MUL(exclusive_cumprod(s, sv, last, false), exclusive_cumprod(s, sv, last, true));
    T sign = MUL(la1(s, EM_OP_DET, u, NULL, false), la1(s, EM_OP_DET, vh, NULL, false));
    T cof = mm(s, MUL(u, unsq(s, others, -2)), vh);
    gin[0] = give(MUL(as_matrix_scale(s, MUL(g, sign)), cof));
    END;
}

/* (sign, log|det|): gA = g_log A^{-T} (the sign is locally constant) */
FORMULA(slogdet) {
    BEGIN;
    gin[0] = give(MUL(as_matrix_scale(s, gout[1]), inv_t(s, X)));
    END;
}

/* A = L L^T: P = tril(L^T gL), S = (P + tril(P, -1)^T) / 2, gA = L^{-T} S L^{-1} */
FORMULA(cholesky) {
    BEGIN;
    T lt = mT(s, Y);
    T p = mm(s, lt, g);
    p = p ? keep(s, em_tril(p, 0)) : keep(s, NULL);
    T low = p ? keep(s, em_tril(p, -1)) : keep(s, NULL);
    T sym = MUL(ADD(p, mT(s, low)), num(s, 0.5));
    T z = la1(s, EM_OP_SOLVE_TRIANGULAR, lt, sym, true);
    gin[0] = give(mT(s, la1(s, EM_OP_SOLVE_TRIANGULAR, lt, mT(s, z), true)));
    END;
}

/* A = QR with m >= n: M = R gR^T - gQ^T Q, gA = (gQ + Q copyltu(M)) R^{-T},
 * copyltu(M) = tril(M) + tril(M, -1)^T. Wide A (m < n), as PyTorch: A =
 * [X | Y], R = [U | V], X = QU; then gY = Q gV, and X takes the square
 * formula with gQ + Y gV^T. */
static T qr_square_grad(scope *s, T q, T r, T gq, T gr) {
    T mtx = SUB(mm(s, r, mT(s, gr)), mm(s, mT(s, gq), q));
    T lower = mtx ? keep(s, em_tril(mtx, 0)) : keep(s, NULL);
    T strict = mtx ? keep(s, em_tril(mtx, -1)) : keep(s, NULL);
    T inner = ADD(gq, mm(s, q, ADD(lower, mT(s, strict))));
    return right_solve_rt(s, inner, r);
}

FORMULA(qr) {
    BEGIN;
    const em_type *a = &c->node->in_types[0];
    int64_t m = a->shape[a->ndim - 2], n = a->shape[a->ndim - 1];
    if (c->node->attrs.full && m > n) {
        scope_end(s);
        return em_error(EM_ERR_NOT_IMPLEMENTED,
                        "linalg.qr: the gradient of mode 'complete' with rows > columns is not defined (the "
                        "extra columns of Q are arbitrary), as in PyTorch; use mode 'reduced'");
    }
    T q = c->out[0], r = c->out[1], gq = gout[0], gr = gout[1];
    if (m >= n) {
        gin[0] = give(qr_square_grad(s, q, r, gq, gr));
        END;
    }
    int64_t col = a->ndim - 1;
    T y = keep(s, em_slice(X, col, m, n, 1));
    T u = keep(s, em_slice(r, col, 0, m, 1));
    T gu = keep(s, em_slice(gr, col, 0, m, 1)), gv = keep(s, em_slice(gr, col, m, n, 1));
    T gx = qr_square_grad(s, q, u, ADD(gq, mm(s, y, mT(s, gv))), gu);
    T parts[2] = {gx, mm(s, q, gv)};
    gin[0] = give(parts[0] && parts[1] ? keep(s, em_cat(parts, 2, col)) : keep(s, NULL));
    END;
}

/* A = V diag(L) V^T: gA = V (diag(gL) + skew(V^T gV) / 2E) V^T with
 * E_ij = L_j - L_i (1 on the diagonal, where skew is 0) */
FORMULA(eigh) {
    BEGIN;
    T l = c->out[0], v = c->out[1], gl = gout[0], gv = gout[1];
    if (c->absent & 2) { /* eigenvalues only (eigvalsh): V diag(gL) V^T, defined for repeated ones too */
        gin[0] = give(mm(s, MUL(v, unsq(s, gl, -2)), mT(s, v)));
        END;
    }
    int64_t n = v->shape[v->ndim - 1];
    T x = mm(s, mT(s, v), gv);
    T skew = MUL(SUB(x, mT(s, x)), num(s, 0.5));
    T e = ADD(SUB(unsq(s, l, -2), unsq(s, l, -1)), eye_of(s, n, v));
    T inner = ADD(DIV(skew, e), diag_embed(s, gl));
    gin[0] = give(mm(s, mm(s, v, inner), mT(s, v)));
    END;
}

/* A = U diag(S) Vh. As PyTorch's svd_backward: with no gradient for U or
 * Vh (svdvals, the nuclear and spectral norms) the gradient is U diag(gS)
 * Vh, which is defined for repeated singular values (the general formula
 * divides by s_i^2 - s_j^2); full_matrices=True keeps the first k singular
 * vectors, whose gradients are defined, and drops the rest's. */
FORMULA(svd) {
    BEGIN;
    const em_type *a = &c->node->in_types[0];
    int64_t m = a->shape[a->ndim - 2], n = a->shape[a->ndim - 1], k = m < n ? m : n;
    T u = c->out[0], sv = c->out[1], vh = c->out[2], gu = gout[0], gs = gout[1], gvh = gout[2];
    if (c->node->attrs.full && m != n) {
        u = keep(s, em_slice(u, u->ndim - 1, 0, k, 1));
        gu = keep(s, em_slice(gu, gu->ndim - 1, 0, k, 1));
        vh = keep(s, em_slice(vh, vh->ndim - 2, 0, k, 1));
        gvh = keep(s, em_slice(gvh, gvh->ndim - 2, 0, k, 1));
    }
    if ((c->absent & 5) == 5) {
        gin[0] = give(mm(s, MUL(u, unsq(s, gs, -2)), vh));
        END;
    }
    T v = mT(s, vh), gv = mT(s, gvh);
    T x = mm(s, mT(s, u), gu), y = mm(s, mT(s, v), gv);
    T uhgu = SUB(x, mT(s, x)), vhgv = SUB(y, mT(s, y));
    T s2 = MUL(sv, sv);
    T e = ADD(SUB(unsq(s, s2, -2), unsq(s, s2, -1)), eye_of(s, k, sv));
    T ga = DIV(ADD(MUL(uhgu, unsq(s, sv, -2)), MUL(unsq(s, sv, -1), vhgv)), e);
    ga = ADD(ga, diag_embed(s, gs));
    if (m > n) { /* + (I - U U^T) gU S^{-1}, then V^T */
        ga = mm(s, u, ga);
        T gus = DIV(gu, unsq(s, sv, -2));
        ga = SUB(ADD(ga, gus), mm(s, u, mm(s, mT(s, u), gus)));
        ga = mm(s, ga, vh);
    } else if (m < n) { /* + S^{-1} gVh (I - V V^T), after U */
        ga = mm(s, ga, vh);
        T sgv = DIV(gvh, unsq(s, sv, -1));
        ga = SUB(ADD(ga, sgv), mm(s, mm(s, sgv, v), vh));
        ga = mm(s, u, ga);
    } else {
        ga = mm(s, mm(s, u, ga), vh);
    }
    gin[0] = give(ga);
    END;
}

/* ---- flat memory: a view's history read from, and written into, its base
 * (engine.c's stale views and writes through views) ---- */

/* The flat positions, in its base's contiguous memory, of the elements of a
 * view of shape `ty` (strides and offset in a): int64, of that shape. */
static T flat_positions(scope *s, const em_type *ty, const em_attrs *a) {
    T pos = keep(s, em_full_i64(NULL, 0, a->offset, EM_DTYPE_I64));
    for (int d = 0; d < ty->ndim; d++) {
        int64_t rs[EM_MAX_DIMS];
        for (int k = 0; k < ty->ndim; k++) rs[k] = k == d ? ty->shape[d] : 1;
        T r = keep(s, em_arange_on(ty->device, 0, (double)ty->shape[d], 1, EM_DTYPE_I64));
        T step = keep(s, em_full_i64(NULL, 0, a->stride[d], EM_DTYPE_I64));
        r = MUL(r, step);
        r = r ? keep(s, em_reshape(r, rs, ty->ndim)) : keep(s, NULL);
        pos = ADD(pos, r);
    }
    int64_t all = -1;
    return pos ? keep(s, em_reshape(pos, &all, 1)) : keep(s, NULL);
}

static T flat(scope *s, T t) {
    int64_t all = -1;
    return t ? keep(s, em_reshape(t, &all, 1)) : keep(s, NULL);
}

static T shaped_as(scope *s, T t, const em_type *ty) {
    return t ? keep(s, em_reshape(t, ty->shape, ty->ndim)) : keep(s, NULL);
}

/* y = the view of x's memory: gx = g added at the view's positions (summed
 * where a view repeats an element, as an expand does) */
FORMULA(as_strided) {
    BEGIN;
    const em_type *xt = &c->node->in_types[0], *vt = &c->node->out_types[0];
    int64_t n = em_shape_numel(xt->shape, xt->ndim), zero = 0;
    T idx = flat_positions(s, vt, &c->node->attrs);
    T z = keep(s, em_full_on(g->device, &n, 1, 0.0, g->dtype));
    T gf = idx && z ? keep(s, em_index_put(z, &idx, &zero, 1, flat(s, g), true)) : keep(s, NULL);
    gin[0] = give(shaped_as(s, gf, xt));
    END;
}

/* y = x's memory with the view replaced by src: gx = g with the view's
 * positions zeroed, gsrc = g at them */
FORMULA(as_strided_scatter) {
    BEGIN;
    const em_type *xt = &c->node->in_types[0], *vt = &c->node->in_types[1];
    int64_t zero = 0;
    T idx = flat_positions(s, vt, &c->node->attrs);
    T gf = flat(s, g);
    if (NEEDS(0)) {
        T z = keep(s, em_zeros(NULL, 0, g->dtype));
        T cut = idx && gf && z ? keep(s, em_index_put(gf, &idx, &zero, 1, z, false)) : keep(s, NULL);
        gin[0] = give(shaped_as(s, cut, xt));
    }
    if (NEEDS(1)) {
        T picked = idx && gf ? keep(s, em_index(gf, &idx, &zero, 1)) : keep(s, NULL);
        gin[1] = give(shaped_as(s, picked, vt));
    }
    END;
}

#define RULE_NONE(n) {EM_GRAD_NONE, NULL}
#define RULE_ZERO(n) {EM_GRAD_ZERO, NULL}
#define RULE_NOSAVE(n) {EM_GRAD_NOSAVE, bw_##n}
#define RULE_IN(n) {EM_GRAD_IN, bw_##n}
#define RULE_IDX(n) {EM_GRAD_IDX, bw_##n}
#define RULE_OUT(n) {EM_GRAD_OUT, bw_##n}
#define RULE_BOTH(n) {EM_GRAD_BOTH, bw_##n}

static const em_grad_rule rules[EM_OP_COUNT] = {
#define EM_OP(e, n, k, ni, no, dt, pr, fl, at, gr) [EM_OP_##e] = RULE_##gr(n),
#include "ember/ops.def"
#undef EM_OP
};

const em_grad_rule *em_grad_rule_of(em_op op) {
    static const em_grad_rule none = {EM_GRAD_NONE, NULL};
    return (unsigned)op < EM_OP_COUNT ? &rules[op] : &none;
}

bool em_op_differentiable(int op) { return em_grad_rule_of((em_op)op)->kind != EM_GRAD_NONE; }
