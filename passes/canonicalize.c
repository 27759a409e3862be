/*
 * canonicalize.c - algebraic rewrites, from one table of rules.
 *
 * A rule is a row of `rules` below: the op it looks at, the condition under
 * which it holds (a matcher over the node and its operands' producers that
 * checks dtypes and shapes, and captures what the replacement needs), and
 * the replacement (one of the node's values, or a node built in its place).
 * The pass sweeps the body until no rule fires (each rewrite leaves fewer
 * or cheaper nodes, so this ends; a bound guards against a rule that
 * would not), and reports how often each rule fired. The nodes a rewrite
 * bypasses are left for dce.
 *
 * Exactness: every rule gives the eager result bit for bit (pow's kernel
 * itself computes x^2 as x*x and x^0.5 as sqrt(x); a cast chain collapses
 * only when its first cast loses nothing; on floats the additive identity
 * is -0.0, since -0.0 + 0.0 is +0.0: x + 0.0 stays, and x - 0 goes only for
 * +0.0), except one on floating point, which the README lists: a
 * power-of-two scale of a matmul operand moved
 * into BLAS's alpha, which scales every product and partial sum exactly,
 * so the result is eager's unless x * c itself overflows or goes
 * subnormal (values beyond 2^64 times the dtype's normal range's edges,
 * since c is kept within 2^-64..2^64).
 *
 * A rule that replaces a node by an existing value (x * 1 -> x) does not
 * apply where that would make a graph result share memory with a graph
 * input that the eager result did not share: the caller would get its own
 * tensor back, or a view of it, where eager gives a new one.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ember/passes.h"

typedef struct {
    em_ir_value *x, *y; /* captures */
    em_attrs attrs;     /* of a node the replacement builds */
    const em_ir_node *view; /* a view the replacement rebuilds on operand `which`, or NULL */
    int which;
} match;

typedef struct canon canon;
typedef bool (*match_fn)(const canon *c, const em_ir_node *n, double k, match *m);
/* The value replacing n's result, NULL when the rule cannot apply after all. */
typedef em_ir_value *(*replace_fn)(canon *c, em_ir_node *n, const match *m);

typedef struct {
    const char *name; /* what it does, as the report says it */
    em_op op;
    match_fn match;
    double k; /* the constant a matcher looks for, or the op it looks through */
    replace_fn replace;
} rule;

struct canon {
    em_ir_graph *g;
    int cap;             /* entries of the two arrays (values made later grow them) */
    bool *input_memory;  /* per value: may share a graph input's memory */
    bool *result_memory; /* per value: a graph result may share its memory */
};

/* ---- conditions ---- */

static bool same_type(const em_ir_value *a, const em_ir_value *b) { return em_type_eq(&a->type, &b->type); }

/* Is v a scalar constant equal to k? */
static bool const_is(const em_ir_value *v, double k) {
    if (!v->def || !em_ir_is_scalar_const(v->def)) return false;
    const em_attrs *a = EM_IR_ATTRS(v->def);
    em_dtype dt = v->type.dtype;
    return em_dtype_is_float(dt) || dt == EM_DTYPE_BOOL ? a->value == k : (double)a->value_i == k;
}

/* Is v a scalar constant zero that leaves every x unchanged under op: on
 * floats x + (-0.0) and x - (+0.0) (x + 0.0 turns -0.0 into +0.0, which a
 * later division would make -inf into +inf); on integers any 0. */
static bool neutral_zero(const em_ir_value *v, em_op op) {
    if (!const_is(v, 0)) return false;
    if (!em_dtype_is_float(v->type.dtype)) return true;
    return (bool)signbit(EM_IR_ATTRS(v->def)->value) == (op == EM_OP_ADD);
}

/* The node making v when it is op `op`, else NULL. */
static const em_ir_node *made_by(const em_ir_value *v, em_op op) {
    return v->def && v->def->op == op ? v->def : NULL;
}

/* An operand is the constant k (either side of a commutative op): x is the other. */
static bool either_const(const canon *c, const em_ir_node *n, double k, match *m) {
    (void)c;
    for (int i = 0; i < 2; i++)
        if (const_is(n->in[i], k) && same_type(n->in[1 - i], n->out[0])) {
            m->x = n->in[1 - i];
            return true;
        }
    return false;
}

/* x + (-0.0), (-0.0) + x, x - 0.0 on floats (any 0 on integers): x. */
static bool zero_identity(const canon *c, const em_ir_node *n, double k, match *m) {
    (void)c;
    (void)k;
    for (int i = 0; i < (n->op == EM_OP_ADD ? 2 : 1); i++) {
        int z = n->op == EM_OP_ADD ? i : 1;
        if (neutral_zero(n->in[z], n->op) && same_type(n->in[1 - z], n->out[0])) {
            m->x = n->in[1 - z];
            return true;
        }
    }
    return false;
}

/* The right operand is the constant k: x is the left one. */
static bool right_const(const canon *c, const em_ir_node *n, double k, match *m) {
    (void)c;
    m->x = n->in[0];
    return const_is(n->in[1], k) && same_type(n->in[0], n->out[0]);
}

/* op(op(x)) of a unary op that undoes itself: x. */
static bool twice(const canon *c, const em_ir_node *n, double k, match *m) {
    (void)c;
    (void)k;
    const em_ir_node *p = made_by(n->in[0], n->op);
    if (!p || !same_type(p->in[0], n->out[0])) return false;
    m->x = p->in[0];
    return true;
}

/* x - neg(y): x and y. */
static bool minus_neg(const canon *c, const em_ir_node *n, double k, match *m) {
    (void)c;
    (void)k;
    const em_ir_node *p = made_by(n->in[1], EM_OP_NEG);
    if (!p) return false;
    m->x = n->in[0];
    m->y = p->in[0];
    return true;
}

static bool same_branches(const canon *c, const em_ir_node *n, double k, match *m) {
    (void)c;
    (void)k;
    m->x = n->in[1];
    return n->in[1] == n->in[2] && same_type(n->in[1], n->out[0]);
}

/* A cast, a reshape or an expand to the input's own type. */
static bool to_same_type(const canon *c, const em_ir_node *n, double k, match *m) {
    (void)c;
    (void)k;
    m->x = n->in[0];
    return same_type(n->in[0], n->out[0]);
}

/* Can every value of dtype `from` be written exactly in `to`? */
static bool lossless(em_dtype from, em_dtype to) {
    static const int bits[EM_DTYPE_COUNT] = {
        /* the bits a dtype holds exactly: integers' magnitude, floats' significand */
        [EM_DTYPE_BOOL] = 1, [EM_DTYPE_U8] = 8,   [EM_DTYPE_I8] = 7,   [EM_DTYPE_I16] = 15,
        [EM_DTYPE_I32] = 31, [EM_DTYPE_I64] = 63, [EM_DTYPE_F16] = 11, [EM_DTYPE_BF16] = 8,
        [EM_DTYPE_F32] = 24, [EM_DTYPE_F64] = 53,
    };
    if (from == to || from == EM_DTYPE_BOOL) return true;
    bool from_float = em_dtype_is_float(from), to_float = em_dtype_is_float(to);
    if (to == EM_DTYPE_BOOL || (from_float && !to_float)) return false;
    if (from_float) /* f16 and bf16 fit f32 and f64; f32 fits f64 */
        return to == EM_DTYPE_F64 || (to == EM_DTYPE_F32 && from != EM_DTYPE_F64);
    if (to == EM_DTYPE_U8) return false; /* (a signed integer's negatives) */
    return bits[to] >= bits[from];
}

/* cast(cast(x)) whose inner cast loses nothing and stays in x's kind
 * (integers, floats: so the outer conversion sees x's own value the same
 * way): x, and the outer dtype. */
static bool cast_chain(const canon *c, const em_ir_node *n, double k, match *m) {
    (void)c;
    (void)k;
    const em_ir_node *p = made_by(n->in[0], EM_OP_CAST);
    if (!p) return false;
    em_dtype from = p->in[0]->type.dtype, mid = p->out[0]->type.dtype;
    if (!lossless(from, mid) || (from != EM_DTYPE_BOOL && em_dtype_is_float(from) != em_dtype_is_float(mid)))
        return false;
    m->x = p->in[0];
    em_ir_attrs(n, &m->attrs);
    return true;
}

/* permute(permute(x)): x, and the composed order. */
static bool permute_chain(const canon *c, const em_ir_node *n, double k, match *m) {
    (void)c;
    (void)k;
    const em_ir_node *p = made_by(n->in[0], EM_OP_PERMUTE);
    if (!p) return false;
    m->x = p->in[0];
    em_ir_attrs(n, &m->attrs);
    for (int i = 0; i < EM_IR_ATTRS(n)->n_dims; i++) m->attrs.dims[i] = EM_IR_ATTRS(p)->dims[EM_IR_ATTRS(n)->dims[i]];
    return true;
}

static bool identity_permute(const canon *c, const em_ir_node *n, double k, match *m) {
    (void)c;
    (void)k;
    for (int i = 0; i < EM_IR_ATTRS(n)->n_dims; i++)
        if (EM_IR_ATTRS(n)->dims[i] != i) return false;
    m->x = n->in[0];
    return true;
}

/* reshape(reshape(x)): x, and the outer shape. */
static bool reshape_chain(const canon *c, const em_ir_node *n, double k, match *m) {
    (void)c;
    (void)k;
    const em_ir_node *p = made_by(n->in[0], EM_OP_RESHAPE);
    if (!p) return false;
    m->x = p->in[0];
    em_ir_attrs(n, &m->attrs);
    return true;
}

/* A scalar constant scale BLAS's alpha can take exactly: a power of two
 * whose products stay normal numbers of the dtype, or 0 when it is not. */
static double exact_scale(const em_ir_value *c, bool reciprocal) {
    if (!c->def || !em_ir_is_scalar_const(c->def) || !em_dtype_is_float(c->type.dtype)) return 0;
    double k = reciprocal ? 1.0 / EM_IR_ATTRS(c->def)->value : EM_IR_ATTRS(c->def)->value;
    int e;
    if (!isfinite(k) || frexp(fabs(k), &e) != 0.5) return 0;
    return e - 1 >= -64 && e - 1 <= 64 ? k : 0; /* (a scale far from 1 would overflow or go subnormal) */
}

/* matmul(x * c, y), matmul(x, y * c), matmul(x / c, y), also through one
 * view (k.transpose(-2, -1) of a scaled k): the operands unscaled (x
 * is the scaled operand's x, its view rebuilt on it), and the matmul's
 * alpha times c, a power of two. */
static bool scaled_operand(const canon *c, const em_ir_node *n, double k, match *m) {
    (void)c;
    (void)k;
    em_dtype dt = n->out[0]->type.dtype;
    if (dt != EM_DTYPE_F32 && dt != EM_DTYPE_F64) return false;
    for (int i = 0; i < 2; i++) {
        const em_ir_node *p = n->in[i]->def, *view = NULL;
        if (p && (em_op_get(p->op)->flags & EM_F_VIEW) && p->n_in == 1) {
            view = p; /* (a scale commutes with any view: it moves elements only) */
            p = p->in[0]->def;
        }
        if (!p || (p->op != EM_OP_MUL && p->op != EM_OP_DIV)) continue;
        for (int j = 0; j < (p->op == EM_OP_MUL ? 2 : 1); j++) {
            const em_ir_value *x = p->in[j], *s = p->in[1 - j];
            double scale = exact_scale(s, p->op == EM_OP_DIV);
            if (!scale || !same_type(x, p->out[0])) continue;
            em_ir_attrs(n, &m->attrs);
            m->attrs.alpha = em_matmul_alpha(EM_IR_ATTRS(n)) * scale;
            if (fabs(log2(fabs(m->attrs.alpha))) > 64) continue; /* (both scales within 2^64: the product too) */
            m->x = i == 0 ? (em_ir_value *)x : n->in[0];
            m->y = i == 1 ? (em_ir_value *)x : n->in[1];
            m->view = view;
            m->which = i;
            return true;
        }
    }
    return false;
}

/* ---- replacements ---- */

/* The captured value itself, unless that would make a graph result share
 * a graph input's memory where eager's result did not. */
static em_ir_value *keep_x(canon *c, em_ir_node *n, const match *m) {
    if (c->result_memory[n->out[0]->id] && c->input_memory[m->x->id]) return NULL;
    return m->x;
}

/* A node op(ins) in n's place, when its type is n's. */
static em_ir_value *build(em_ir_node *n, em_op op, em_ir_value *const *in, int n_in, const em_attrs *a) {
    em_ir_node *r = em_ir_build_before(n, op, in, n_in, a, n->loc);
    if (!r) {
        em_clear_error(); /* (the rule does not apply) */
        return NULL;
    }
    if (!same_type(r->out[0], n->out[0])) {
        em_ir_remove(r);
        return NULL;
    }
    return r->out[0];
}

static em_ir_value *add_xy(canon *c, em_ir_node *n, const match *m) {
    (void)c;
    em_ir_value *in[2] = {m->x, m->y};
    return build(n, EM_OP_ADD, in, 2, NULL);
}

static em_ir_value *square(canon *c, em_ir_node *n, const match *m) {
    (void)c;
    em_ir_value *in[2] = {m->x, m->x};
    return build(n, EM_OP_MUL, in, 2, NULL);
}

static em_ir_value *square_root(canon *c, em_ir_node *n, const match *m) {
    (void)c;
    if (!em_dtype_is_float(m->x->type.dtype)) return NULL;
    return build(n, EM_OP_SQRT, &m->x, 1, NULL);
}

static em_ir_value *scaled_matmul(canon *c, em_ir_node *n, const match *m) {
    (void)c;
    em_ir_value *in[2] = {m->x, m->y};
    int which = m->which;
    if (m->view) {
        em_ir_node *v = em_ir_build_before(n, m->view->op, &in[which], 1, EM_IR_ATTRS(m->view), m->view->loc);
        if (!v) {
            em_clear_error();
            return NULL;
        }
        if (!same_type(v->out[0], m->view->out[0])) {
            em_ir_remove(v);
            return NULL;
        }
        in[which] = v->out[0];
    }
    em_ir_value *r = build(n, EM_OP_MATMUL, in, 2, &m->attrs);
    if (!r && m->view) em_ir_remove(in[which]->def);
    return r;
}

/* A constant of a shape that no graph result may share: its 0-d value,
 * expanded (a view of one element). */
static bool full_of_shape(const canon *c, const em_ir_node *n, double k, match *m) {
    (void)k;
    if (n->out[0]->type.ndim == 0 || c->result_memory[n->out[0]->id]) return false;
    em_ir_attrs(n, &m->attrs);
    m->attrs.n_shape = 0;
    return true;
}

static em_ir_value *expanded_scalar(canon *c, em_ir_node *n, const match *m) {
    (void)c;
    em_ir_node *s = em_ir_build_before(n, EM_OP_FULL, NULL, 0, &m->attrs, n->loc);
    if (!s) {
        em_clear_error();
        return NULL;
    }
    em_attrs a;
    memset(&a, 0, sizeof a);
    a.n_shape = n->out[0]->type.ndim;
    memcpy(a.shape, n->out[0]->type.shape, (size_t)a.n_shape * sizeof a.shape[0]);
    em_ir_value *r = build(n, EM_OP_EXPAND, &s->out[0], 1, &a);
    if (!r) em_ir_remove(s);
    return r;
}

static em_ir_value *same_op_on_x(canon *c, em_ir_node *n, const match *m) {
    (void)c;
    em_ir_value *x = m->x;
    return build(n, n->op, &x, 1, &m->attrs);
}

/* ---- the gradient of a split: a sum of puts into zeros tiling one dim ---- */

/* The backward of x.split(...) along dim d is, per piece, its gradient put
 * into zeros of x's shape at the piece's range (index_put with an arange),
 * and the engine sums those: k full-size tensors and k - 1 additions where
 * one cat would do. The rule turns such a sum, when its ranges tile dim d
 * exactly, into cat(pieces) + 0.0: the + 0.0 keeps eager's bits (each
 * element was piece + 0 + ... + 0, which turns -0.0 into +0.0 and leaves
 * every other value as it is) and costs nothing once fused. */
#define MAX_PIECES 4096 /* (an RNN's steps: its input projection's gradient) */
#define CAT_OPERANDS 64  /* a cat node's most (dispatch's bound): more pieces make a tree of cats */

typedef struct {
    em_ir_value *src;
    int64_t start, end;
} piece;

/* Is z +0 of v's type (a full, or an expanded scalar full)? */
static bool zeros_like(const em_ir_value *z, const em_ir_value *v) {
    if (!z->def || !em_type_eq(&z->type, &v->type)) return false;
    const em_ir_node *d = z->def;
    if (d->op == EM_OP_EXPAND) d = d->in[0]->def;
    if (!d || d->op != EM_OP_FULL) return false;
    em_dtype dt = d->out[0]->type.dtype;
    return em_dtype_is_float(dt) || dt == EM_DTYPE_BOOL ? EM_IR_ATTRS(d)->value == 0 && !signbit(EM_IR_ATTRS(d)->value)
                                                       : EM_IR_ATTRS(d)->value_i == 0;
}

/* Is v index_put(zeros, arange(start, end), src) along one dim, the dim *dim? */
static bool put_into_zeros(const em_ir_value *v, int *dim, piece *p) {
    const em_ir_node *n = v->def;
    if (!n || n->op != EM_OP_INDEX_PUT || n->n_in != 3 || EM_IR_ATTRS(n)->accumulate || EM_IR_ATTRS(n)->n_dims != 1) return false;
    const em_ir_node *r = n->in[1]->def;
    if (!r || r->op != EM_OP_ARANGE || EM_IR_ATTRS(r)->step != 1 || n->in[1]->type.ndim != 1) return false;
    int d = (int)EM_IR_ATTRS(n)->dims[0];
    const em_type *t = &v->type, *st = &n->in[2]->type;
    if (d < 0 || d >= t->ndim || st->ndim != t->ndim || st->dtype != t->dtype || !zeros_like(n->in[0], v)) return false;
    int64_t start = (int64_t)EM_IR_ATTRS(r)->start, len = n->in[1]->type.shape[0];
    if ((double)start != EM_IR_ATTRS(r)->start || start < 0 || start + len > t->shape[d]) return false;
    for (int i = 0; i < t->ndim; i++)
        if (st->shape[i] != (i == d ? len : t->shape[i])) return false;
    if (*dim >= 0 && *dim != d) return false;
    *dim = d;
    *p = (piece){n->in[2], start, start + len};
    return true;
}

static bool put_or_add(const em_ir_value *v) {
    return v->def && (v->def->op == EM_OP_INDEX_PUT || v->def->op == EM_OP_ADD);
}

/* The pieces of a tree of additions of puts into zeros, or -1. Both
 * operands are looked at before either is descended into, so that an
 * ordinary chain of additions (every add node is tried) fails at once
 * rather than after a walk down the chain. */
static int pieces_of(const em_ir_value *v, const em_type *t, int *dim, piece *out, int n) {
    if (n < 0 || n >= MAX_PIECES || !em_type_eq(&v->type, t)) return -1;
    if (put_into_zeros(v, dim, &out[n])) return n + 1;
    const em_ir_node *d = v->def;
    if (!d || d->op != EM_OP_ADD || d->n_in != 2 || !put_or_add(d->in[0]) || !put_or_add(d->in[1])) return -1;
    return pieces_of(d->in[1], t, dim, out, pieces_of(d->in[0], t, dim, out, n));
}

static int by_start(const void *a, const void *b) {
    int64_t x = ((const piece *)a)->start, y = ((const piece *)b)->start;
    return (x > y) - (x < y);
}

/* The pieces of n in order along their dim, when they tile it; their count, else 0. */
static int tiling(const em_ir_node *n, int *dim, piece *p) {
    *dim = -1;
    int k = pieces_of(n->out[0], &n->out[0]->type, dim, p, 0);
    if (k < 2) return 0;
    qsort(p, (size_t)k, sizeof *p, by_start);
    int64_t at = 0;
    for (int i = 0; i < k; i++) {
        if (p[i].start != at) return 0;
        at = p[i].end;
    }
    return at == n->out[0]->type.shape[*dim] ? k : 0;
}

static bool split_gradient(const canon *c, const em_ir_node *n, double k, match *m) {
    (void)c;
    (void)k;
    (void)m;
    piece *p = malloc(MAX_PIECES * sizeof *p);
    int dim;
    bool tiles = p && tiling(n, &dim, p) > 0;
    free(p);
    return tiles;
}

/* cat of srcs[0..k) along dim before n: one node, or a tree of cats of at
 * most CAT_OPERANDS operands each (the nodes it built are `made`, for
 * undoing); NULL when a node cannot be built. */
static em_ir_value *cat_tree(em_ir_node *n, em_ir_value **srcs, int k, int dim, em_ir_node **made, int *n_made) {
    em_attrs a;
    memset(&a, 0, sizeof a);
    a.n_dims = 1;
    a.dims[0] = dim;
    while (k > 1) {
        int groups = 0;
        for (int i = 0; i < k; i += CAT_OPERANDS, groups++) {
            int len = k - i < CAT_OPERANDS ? k - i : CAT_OPERANDS;
            if (len == 1) {
                srcs[groups] = srcs[i];
                continue;
            }
            em_ir_node *cat = em_ir_build_before(n, EM_OP_CAT, srcs + i, len, &a, n->loc);
            if (!cat) return NULL;
            made[(*n_made)++] = cat;
            srcs[groups] = cat->out[0];
        }
        k = groups;
    }
    return srcs[0];
}

static em_ir_value *cat_plus_zero(canon *c, em_ir_node *n, const match *m) {
    (void)c;
    (void)m;
    piece *p = malloc(MAX_PIECES * sizeof *p);
    em_ir_value **srcs = malloc(MAX_PIECES * sizeof *srcs);
    em_ir_node **made = malloc(MAX_PIECES * sizeof *made);
    int dim, k = p && srcs && made ? tiling(n, &dim, p) : 0, n_made = 0;
    for (int i = 0; i < k; i++) srcs[i] = p[i].src;
    em_ir_value *cat = k ? cat_tree(n, srcs, k, dim, made, &n_made) : NULL, *r = NULL;
    em_attrs a;
    memset(&a, 0, sizeof a);
    a.dtype = n->out[0]->type.dtype;
    em_ir_node *zero = cat ? em_ir_build_before(n, EM_OP_FULL, NULL, 0, &a, n->loc) : NULL; /* +0.0 */
    if (zero) {
        em_ir_value *in[2] = {cat, zero->out[0]};
        r = build(n, EM_OP_ADD, in, 2, NULL);
        if (!r) em_ir_remove(zero);
    }
    if (!r) { /* (undone: the sum stays as it was) */
        em_clear_error();
        while (n_made > 0) em_ir_remove(made[--n_made]);
    }
    free(p);
    free(srcs);
    free(made);
    return r;
}

/* ---- the table ---- */

#define NONE 0
static const rule rules[] = {
    {"x * 1 -> x", EM_OP_MUL, either_const, 1, keep_x},
    {"x + (-0) -> x", EM_OP_ADD, zero_identity, NONE, keep_x},
    {"x - 0 -> x", EM_OP_SUB, zero_identity, NONE, keep_x},
    {"x / 1 -> x", EM_OP_DIV, right_const, 1, keep_x},
    {"neg(neg(x)) -> x", EM_OP_NEG, twice, NONE, keep_x},
    {"x - neg(y) -> x + y", EM_OP_SUB, minus_neg, NONE, add_xy},
    {"pow(x, 2) -> x * x", EM_OP_POW, right_const, 2, square},
    {"pow(x, 0.5) -> sqrt(x)", EM_OP_POW, right_const, 0.5, square_root},
    {"where(c, x, x) -> x", EM_OP_WHERE, same_branches, NONE, keep_x},
    {"cast to its own dtype -> x", EM_OP_CAST, to_same_type, NONE, keep_x},
    {"cast(cast(x)) -> cast(x), the inner cast exact", EM_OP_CAST, cast_chain, NONE, same_op_on_x},
    {"permute(permute(x)) -> permute(x)", EM_OP_PERMUTE, permute_chain, NONE, same_op_on_x},
    {"permute to the same order -> x", EM_OP_PERMUTE, identity_permute, NONE, keep_x},
    {"reshape(reshape(x)) -> reshape(x)", EM_OP_RESHAPE, reshape_chain, NONE, same_op_on_x},
    {"reshape to its own shape -> x", EM_OP_RESHAPE, to_same_type, NONE, keep_x},
    {"expand to its own shape -> x", EM_OP_EXPAND, to_same_type, NONE, keep_x},
    /* a fused kernel then reads the constant as an immediate, not a tensor
     * of copies (a mean's gradient: ones of the input's shape) */
    {"full of a shape -> expand(full())", EM_OP_FULL, full_of_shape, NONE, expanded_scalar},
    {"matmul(x * c, y) -> matmul(x, y) {alpha=c}, c a power of two", EM_OP_MATMUL, scaled_operand, NONE,
     scaled_matmul},
    {"sum of puts into zeros tiling a dim (a split's gradient) -> cat + 0.0", EM_OP_ADD, split_gradient, NONE,
     cat_plus_zero},
};
#define N_RULES ((int)(sizeof rules / sizeof rules[0]))

/* ---- the pass ---- */

/* Room in the per-value arrays for every value the graph has now. */
static bool grow(canon *c) {
    if (c->g->n_values <= c->cap && c->input_memory) return true;
    int cap = c->g->n_values * 2 + 8;
    bool *a = realloc(c->input_memory, (size_t)cap * sizeof *a);
    if (a) c->input_memory = a;
    bool *b = realloc(c->result_memory, (size_t)cap * sizeof *b);
    if (b) c->result_memory = b;
    if (!a || !b) return false;
    memset(a + c->cap, 0, (size_t)(cap - c->cap) * sizeof *a);
    memset(b + c->cap, 0, (size_t)(cap - c->cap) * sizeof *b);
    c->cap = cap;
    return true;
}

/* One sweep: every rule tried on every node; the count of rewrites, or -1
 * when memory ran out. */
static int sweep(canon *c, int *fired) {
    int n_rewrites = 0;
    em_ir_block *b = c->g->body;
    for (em_ir_node *n = b->first, *next; n; n = next) {
        next = n->next;
        if (n->n_out != 1) continue;
        for (int r = 0; r < N_RULES; r++) {
            match m;
            memset(&m, 0, sizeof m);
            if (rules[r].op != n->op || !rules[r].match(c, n, rules[r].k, &m)) continue;
            em_ir_value *v = rules[r].replace(c, n, &m);
            if (!v || v == n->out[0]) continue;
            if (!grow(c)) return -1;
            em_ir_replace_uses(b, n->out[0], v);
            c->input_memory[v->id] |= c->input_memory[n->out[0]->id];
            c->result_memory[v->id] |= c->result_memory[n->out[0]->id];
            em_ir_remove(n); /* (pure, and unused now) */
            fired[r]++;
            n_rewrites++;
            break;
        }
    }
    return n_rewrites;
}

em_status em_pass_canonicalize(em_ir_graph *g, em_strbuf *report) {
    canon c = {g, 0, NULL, NULL};
    int fired[N_RULES] = {0}, rewrites = 1;
    if (!grow(&c)) rewrites = -1;
    if (rewrites > 0) em_ir_shared_memory(g, c.input_memory, c.result_memory);
    for (int round = 0; round < 16 && rewrites > 0; round++) rewrites = sweep(&c, fired);
    free(c.input_memory);
    free(c.result_memory);
    if (rewrites < 0) return em_error(EM_ERR_NOMEM, "out of memory canonicalizing");
    for (int r = 0; report && r < N_RULES; r++)
        if (fired[r]) em_strbuf_printf(report, "canonicalize: %s (%d)\n", rules[r].name, fired[r]);
    return EM_OK;
}
