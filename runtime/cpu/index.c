/*
 * index.c - ops that read or write at positions given by index tensors:
 * index_select, gather, scatter (and scatter_add), index and index_put
 * (advanced indexing, x[i, j] and x[i, j] = v), one_hot, and the two whose
 * result's size depends on the data, nonzero and masked_select.
 *
 * Indices are checked before anything is written, so an out-of-range index
 * raises IndexError and leaves outputs untouched. Reads run in parallel;
 * writes that may collide (scatter, index_put) run in order, so duplicate
 * indices give deterministic results (the last write wins; accumulation adds
 * in index order). Their inference is ../infer/index.c.
 */
#include <string.h>

#include "../infer/index.h"
#include "ember/alloc.h"
#include "ember/ops_math.h"
#include "ember/parallel.h"

#define MAX_OPS (EM_MAX_DIMS + 2)

/* ---- an N-d cursor: a position in a shape and each operand's offset ---- */

typedef struct {
    int nd, n;
    const int64_t *shape;
    int64_t strides[MAX_OPS][EM_MAX_DIMS]; /* elements, per operand */
    int64_t idx[EM_MAX_DIMS];
    int64_t off[MAX_OPS];
} cursor;

static void cursor_seek(cursor *c, int64_t lin) {
    for (int k = 0; k < c->n; k++) c->off[k] = 0;
    for (int d = c->nd - 1; d >= 0; d--) {
        c->idx[d] = c->shape[d] ? lin % c->shape[d] : 0;
        lin = c->shape[d] ? lin / c->shape[d] : 0;
        for (int k = 0; k < c->n; k++) c->off[k] += c->idx[d] * c->strides[k][d];
    }
}

static inline void cursor_next(cursor *c) {
    for (int d = c->nd - 1; d >= 0; d--) {
        c->idx[d]++;
        for (int k = 0; k < c->n; k++) c->off[k] += c->strides[k][d];
        if (c->idx[d] < c->shape[d]) return;
        for (int k = 0; k < c->n; k++) c->off[k] -= c->shape[d] * c->strides[k][d];
        c->idx[d] = 0;
    }
}

static inline int64_t load_index(const em_tensor *t, int64_t off) {
    const char *p = (const char *)em_tensor_data(t);
    switch (t->dtype) {
    case EM_DTYPE_I64: return ((const int64_t *)p)[off];
    case EM_DTYPE_I32: return ((const int32_t *)p)[off];
    case EM_DTYPE_I16: return ((const int16_t *)p)[off];
    case EM_DTYPE_I8: return ((const int8_t *)p)[off];
    case EM_DTYPE_U8: return ((const uint8_t *)p)[off];
    default: return 0;
    }
}

static inline void copy_elem(char *dst, const char *src, size_t item) {
    switch (item) {
    case 1: *dst = *src; break;
    case 2: memcpy(dst, src, 2); break;
    case 4: memcpy(dst, src, 4); break;
    default: memcpy(dst, src, 8); break;
    }
}

/* dst += src, one element of dtype dt (16-bit floats through float32). */
static void add_elem(char *dst, const char *src, em_dtype dt) {
    switch (dt) {
#define ADD(unused, S, T, sfx)                                                                     \
    case EM_DTYPE_##S: *(T *)dst = sc_add_##sfx(*(T *)dst, *(const T *)src); break;
        EM_FOR_DTYPES_ALL(ADD, _)
#undef ADD
    case EM_DTYPE_F16:
        *(uint16_t *)dst = em_sc_f32_to_f16(em_sc_f16_to_f32(*(uint16_t *)dst) +
                                            em_sc_f16_to_f32(*(const uint16_t *)src));
        break;
    case EM_DTYPE_BF16:
        *(uint16_t *)dst = em_sc_f32_to_bf16(em_sc_bf16_to_f32(*(uint16_t *)dst) +
                                             em_sc_bf16_to_f32(*(const uint16_t *)src));
        break;
    default: break;
    }
}

/* The write of scatter and index_put: dst = src, or dst += src. */
static void put_elem(char *dst, const char *src, em_dtype dt, bool accumulate) {
    if (accumulate)
        add_elem(dst, src, dt);
    else
        copy_elem(dst, src, em_dtype_size(dt));
}

/* IndexError for indexing and index_select, RuntimeError for gather and
 * scatter: the exception types PyTorch raises. */
static em_status out_of_range(em_status kind, const char *op, int64_t i, int d, int64_t size) {
    return em_error(kind, "%s: index %lld is out of bounds for dimension %d with size %lld", op, (long long)i,
                    d, (long long)size);
}

/* ---- index_select ---- */

typedef struct {
    const em_tensor *x;
    em_tensor *y;
    const int64_t *idx;
    int64_t n, inner, xs_outer_block;
    cursor inner_cur; /* over x's dims after d */
    int d;
    bool contiguous_inner;
    int n_outer;
    int64_t oshape[EM_MAX_DIMS], ostride[EM_MAX_DIMS];
} isel_ctx;

static void isel_range(void *arg, int64_t b, int64_t e) {
    const isel_ctx *c = arg;
    size_t item = em_dtype_size(c->x->dtype);
    const char *xb = em_tensor_data(c->x);
    char *yb = em_tensor_data(c->y);
    cursor ic = c->inner_cur;
    for (int64_t t = b; t < e; t++) {
        int64_t o = t / c->n, j = t % c->n, xo = 0, rem = o;
        for (int k = c->n_outer - 1; k >= 0; k--) {
            xo += (rem % c->oshape[k]) * c->ostride[k];
            rem /= c->oshape[k];
        }
        xo += c->idx[j] * c->x->strides[c->d];
        char *dst = yb + (size_t)(t * c->inner) * item;
        if (c->contiguous_inner) {
            memcpy(dst, xb + (size_t)xo * item, (size_t)c->inner * item);
        } else {
            cursor_seek(&ic, 0);
            for (int64_t k = 0; k < c->inner; k++, cursor_next(&ic))
                copy_elem(dst + (size_t)k * item, xb + (size_t)(xo + ic.off[0]) * item, item);
        }
    }
}

/* All of ix's values in row-major order, each checked against [-size, size)
 * (negative ones wrapped) when negatives are allowed, else [0, size).
 * NULL with the error set on a bad index. em_free the result. */
static int64_t *load_indices(const em_tensor *ix, int64_t size, bool negatives, em_status kind,
                             const char *op, int d) {
    int64_t n = ix->numel;
    int64_t *idx = em_malloc((size_t)(n ? n : 1) * sizeof *idx);
    if (!idx) {
        em_error(EM_ERR_NOMEM, "%s: out of memory", op);
        return NULL;
    }
    bool contiguous = em_tensor_is_contiguous(ix);
    if (contiguous && ix->dtype == EM_DTYPE_I64) { /* the usual case: a min/max check, a copy */
        const int64_t *v = em_tensor_data(ix);
        int64_t lo = 0, hi = 0;
        for (int64_t j = 0; j < n; j++) {
            lo = v[j] < lo ? v[j] : lo;
            hi = v[j] > hi ? v[j] : hi;
        }
        if (hi < size && lo >= 0) {
            memcpy(idx, v, (size_t)n * sizeof *idx);
            return idx;
        }
    }
    cursor c;
    memset(&c, 0, sizeof c);
    c.nd = ix->ndim;
    c.n = 1;
    c.shape = ix->shape;
    memcpy(c.strides[0], ix->strides, sizeof c.strides[0]);
    cursor_seek(&c, 0);
    for (int64_t j = 0; j < n; j++) {
        int64_t i = load_index(ix, contiguous ? j : c.off[0]);
        if (!contiguous) cursor_next(&c);
        if (negatives && i < 0 && i >= -size) i += size;
        if (i < 0 || i >= size) {
            em_free(idx);
            out_of_range(kind, op, i, d, size);
            return NULL;
        }
        idx[j] = i;
    }
    return idx;
}

/* y = x's slices at idx[0..n) along dim d (y contiguous, shaped like x with
 * dim d of size n, or any shape with that layout). */
static void run_isel(const em_tensor *x, int d, const int64_t *idx, int64_t n, em_tensor *y) {
    isel_ctx c;
    memset(&c, 0, sizeof c);
    c.x = x;
    c.y = y;
    c.d = d;
    c.n = n;
    c.idx = idx;
    c.inner = 1;
    for (int k = c.d + 1; k < x->ndim; k++) c.inner *= x->shape[k];
    int64_t want[EM_MAX_DIMS];
    em_contiguous_strides(x->shape, x->ndim, want);
    c.contiguous_inner = true;
    for (int k = c.d + 1; k < x->ndim; k++) c.contiguous_inner &= x->shape[k] == 1 || x->strides[k] == want[k];
    c.inner_cur.nd = x->ndim - c.d - 1;
    c.inner_cur.n = 1;
    c.inner_cur.shape = x->shape + c.d + 1;
    for (int k = 0; k < c.inner_cur.nd; k++) c.inner_cur.strides[0][k] = x->strides[c.d + 1 + k];
    for (int k = 0; k < c.d; k++) {
        c.oshape[c.n_outer] = x->shape[k];
        c.ostride[c.n_outer++] = x->strides[k];
    }
    int64_t outer = 1;
    for (int k = 0; k < c.d; k++) outer *= x->shape[k];
    if (outer <= 0 || c.n <= 0 || c.inner <= 0) return;
    if (outer == 1 && c.inner == 1) { /* picking single elements: a typed gather */
        size_t item = em_dtype_size(x->dtype);
        const char *xb = em_tensor_data(x);
        char *yb = em_tensor_data(y);
        int64_t xs = x->strides[d];
        switch (item) {
#define PICK(T)                                                                                    \
    for (int64_t j = 0; j < n; j++) ((T *)yb)[j] = ((const T *)xb)[idx[j] * xs];                  \
    break;
        case 1: PICK(uint8_t)
        case 2: PICK(uint16_t)
        case 4: PICK(uint32_t)
        default: PICK(uint64_t)
#undef PICK
        }
        return;
    }
    em_parallel_for(outer * c.n, EM_GRAIN_ELEMENTWISE / (c.inner ? c.inner : 1) + 1, isel_range, &c);
}

em_status cpu_index_select(em_op op, em_tensor *const *in, int n_in, const em_attrs *a,
                           em_tensor **out) {
    const em_tensor *x = in[0], *ix = in[1];
    if (x->ndim == 0) { /* a 0-d input: the index must be 0 */
        for (int64_t j = 0; j < ix->numel; j++)
            if (em_tensor_get_f64(ix, j) != 0) return out_of_range(EM_ERR_INDEX, "index_select", (int64_t)em_tensor_get_f64(ix, j), 0, 1);
        return em_copy_into(out[0], (em_tensor *)x);
    }
    int d = (int)a->dims[0];
    int64_t *idx = load_indices(ix, x->shape[d], false, EM_ERR_INDEX, "index_select", d);
    if (!idx) return em_last_status();
    run_isel(x, d, idx, ix->numel, out[0]);
    em_free(idx);
    return EM_OK;
}

/* ---- gather, scatter ---- */

/* A cursor over ix's shape with operands: 0 = ix, 1 = x (dim d zeroed), 2 = other. */
static void gather_cursor(cursor *c, const em_tensor *ix, const em_tensor *x, int d,
                          const int64_t *other_strides) {
    memset(c, 0, sizeof *c);
    c->nd = ix->ndim;
    c->n = 3;
    c->shape = ix->shape;
    for (int e = 0; e < ix->ndim; e++) {
        c->strides[0][e] = ix->strides[e];
        c->strides[1][e] = e == d || x->ndim == 0 ? 0 : x->strides[e];
        c->strides[2][e] = other_strides ? other_strides[e] : 0;
    }
}

typedef struct {
    const em_tensor *x, *ix;
    em_tensor *y;
    int d;
    int64_t size;
    int64_t bad; /* an out-of-range index, or INT64_MIN */
} gather_ctx;

/* Rows of the index tensor (all its dims but the last) in parallel; each
 * row is one typed loop. */
static void gather_rows(void *arg, int64_t b, int64_t e) {
    gather_ctx *g = arg;
    const em_tensor *ix = g->ix, *x = g->x;
    int nd = ix->ndim;
    int64_t len = nd ? ix->shape[nd - 1] : 1;
    int64_t ys[EM_MAX_DIMS];
    em_contiguous_strides(ix->shape, nd, ys);
    cursor c;
    gather_cursor(&c, ix, x, g->d, ys);
    c.nd = nd ? nd - 1 : 0; /* the cursor walks rows */
    size_t item = em_dtype_size(x->dtype);
    const char *xb = em_tensor_data(x);
    char *yb = em_tensor_data(g->y);
    int64_t xsd = x->ndim ? x->strides[g->d] : 0;
    int64_t ixs = nd ? ix->strides[nd - 1] : 0, xs = nd ? c.strides[1][nd - 1] : 0;
    int64_t rowbuf[256];
    cursor_seek(&c, b);
    for (int64_t r = b; r < e; r++, cursor_next(&c)) {
        for (int64_t k0 = 0; k0 < len; k0 += 256) {
            int64_t m = len - k0 < 256 ? len - k0 : 256;
            bool bad = false;
            if (ix->dtype == EM_DTYPE_I64) { /* the usual index dtype: no per-element switch */
                const int64_t *ip = (const int64_t *)em_tensor_data(ix) + c.off[0] + k0 * ixs;
                for (int64_t k = 0; k < m; k++) {
                    int64_t i = ip[k * ixs];
                    bad |= i < 0 || i >= g->size;
                    rowbuf[k] = c.off[1] + (k0 + k) * xs + i * xsd;
                }
            } else {
                for (int64_t k = 0; k < m; k++) {
                    int64_t i = load_index(ix, c.off[0] + (k0 + k) * ixs);
                    bad |= i < 0 || i >= g->size;
                    rowbuf[k] = c.off[1] + (k0 + k) * xs + i * xsd;
                }
            }
            if (bad) { /* report the first bad index of the row */
                for (int64_t k = 0; k < m; k++) {
                    int64_t i = load_index(ix, c.off[0] + (k0 + k) * ixs);
                    if (i < 0 || i >= g->size) {
                        g->bad = i;
                        return;
                    }
                }
            }
            char *dst = yb + (size_t)(c.off[2] + k0) * item;
            switch (item) {
#define ROW(T)                                                                                     \
    for (int64_t k = 0; k < m; k++) ((T *)dst)[k] = ((const T *)xb)[rowbuf[k]];                   \
    break;
            case 1: ROW(uint8_t)
            case 2: ROW(uint16_t)
            case 4: ROW(uint32_t)
            default: ROW(uint64_t)
#undef ROW
            }
        }
    }
}

/* One element per row of a matrix, x[r, t[r]] (a loss picking each
 * sample's target logit): each read is likely a cache miss, rows apart,
 * and the generic loop's per-row bookkeeping left them one at a time; here
 * the row PICK_AHEAD later is prefetched, so the misses overlap. */
#define PICK_AHEAD 16

static void gather_picks(void *arg, int64_t b, int64_t e) {
    gather_ctx *g = arg;
    const int64_t *ip = em_tensor_data(g->ix);
    int64_t is = g->ix->strides[0], xs0 = g->x->strides[0], xs1 = g->x->strides[1];
    size_t item = em_dtype_size(g->x->dtype);
    const char *xb = em_tensor_data(g->x);
    char *yb = em_tensor_data(g->y);
    for (int64_t r = b; r < e; r++) {
        if (r + PICK_AHEAD < e) {
            int64_t f = ip[(r + PICK_AHEAD) * is];
            if (f >= 0 && f < g->size) __builtin_prefetch(xb + ((r + PICK_AHEAD) * xs0 + f * xs1) * (int64_t)item);
        }
        int64_t i = ip[r * is];
        if (i < 0 || i >= g->size) {
            g->bad = i;
            return;
        }
        const char *src = xb + (r * xs0 + i * xs1) * (int64_t)item;
        if (item == 4)
            ((uint32_t *)yb)[r] = *(const uint32_t *)src;
        else
            ((uint64_t *)yb)[r] = *(const uint64_t *)src;
    }
}

em_status cpu_gather(em_op op, em_tensor *const *in, int n_in, const em_attrs *a, em_tensor **out) {
    gather_ctx g = {in[0], in[1], out[0], (int)a->dims[0], 0, INT64_MIN};
    g.size = in[0]->ndim ? in[0]->shape[g.d] : 1;
    const em_tensor *ix = in[1];
    int64_t len = ix->ndim ? ix->shape[ix->ndim - 1] : 1;
    int64_t rows = len ? ix->numel / len : 0;
    size_t item = em_dtype_size(in[0]->dtype);
    bool picks = g.d == 1 && in[0]->ndim == 2 && ix->ndim == 2 && len == 1 && ix->dtype == EM_DTYPE_I64 &&
                 (item == 4 || item == 8) && em_tensor_is_contiguous(out[0]);
    if (picks && rows)
        em_parallel_for(rows, EM_GRAIN_ELEMENTWISE / 16 + 1, gather_picks, &g);
    else if (rows)
        em_parallel_for(rows, EM_GRAIN_ELEMENTWISE / len + 1, gather_rows, &g);
    return g.bad != INT64_MIN ? out_of_range(EM_ERR_RUNTIME, "gather", g.bad, g.d, g.size) : EM_OK;
}

/* out = x, then out[i at dim d] (+)= src at every index position, in order. */
em_status cpu_scatter(em_op op, em_tensor *const *in, int n_in, const em_attrs *a, em_tensor **out) {
    const em_tensor *x = in[0], *ix = in[1];
    em_tensor *src = in[2], *cast = NULL;
    int d = (int)a->dims[0];
    int64_t size = x->ndim ? x->shape[d] : 1;
    int64_t *checked = load_indices(ix, size, false, EM_ERR_RUNTIME, "scatter", d); /* all, first */
    if (!checked) return em_last_status();
    em_free(checked);
    if (src->dtype != x->dtype && !(src = cast = em_converted(src, x->dtype))) return em_last_status();
    em_status st = em_copy_into(out[0], (em_tensor *)x);
    if (st == EM_OK && ix->numel && ix->ndim == 1 && ix->dtype == EM_DTYPE_I64 &&
        (x->dtype == EM_DTYPE_F32 || x->dtype == EM_DTYPE_F64 || x->dtype == EM_DTYPE_I64)) {
        /* 1-d: a typed loop, in index order (deterministic accumulation) */
        const int64_t *ip = em_tensor_data(ix);
        int64_t is = ix->strides[0], ss = src->ndim ? src->strides[0] : 0, ys = out[0]->strides[0];
        char *yb = em_tensor_data(out[0]);
        const char *sb = em_tensor_data(src);
#define SCATTER_1D(T, ADD)                                                                         \
    for (int64_t t = 0; t < ix->numel; t++) {                                                      \
        T *dst = (T *)yb + ip[t * is] * ys;                                                        \
        T v = ((const T *)sb)[t * ss];                                                             \
        *dst = a->accumulate ? ADD(*dst, v) : v;                                                   \
    }
        if (x->dtype == EM_DTYPE_F32) {
            SCATTER_1D(float, sc_add_f32)
        } else if (x->dtype == EM_DTYPE_F64) {
            SCATTER_1D(double, sc_add_f64)
        } else {
            SCATTER_1D(int64_t, sc_add_i64)
        }
#undef SCATTER_1D
    } else if (st == EM_OK && ix->numel) {
        int64_t ss[EM_MAX_DIMS] = {0};
        if (src->ndim) memcpy(ss, src->strides, sizeof ss);
        cursor c;
        gather_cursor(&c, ix, out[0], d, ss); /* operand 1: out, dim d zeroed */
        size_t item = em_dtype_size(x->dtype);
        char *yb = em_tensor_data(out[0]);
        const char *sb = em_tensor_data(src);
        int64_t ysd = out[0]->ndim ? out[0]->strides[d] : 0;
        cursor_seek(&c, 0);
        for (int64_t t = 0; t < ix->numel; t++, cursor_next(&c)) {
            put_elem(yb + (size_t)(c.off[1] + load_index(ix, c.off[0]) * ysd) * item,
                     sb + (size_t)c.off[2] * item, x->dtype, a->accumulate);
        }
    }
    em_tensor_release(cast);
    return st;
}

/* ---- advanced indexing: index, index_put (their plan: em_adv_plan) ---- */

/* A cursor over the result shape: operand 0 = x's non-indexed dims, 1 = a
 * value tensor broadcast to the result (or the result itself), 2.. = the
 * index tensors broadcast into B's dims. */
static void adv_cursor(cursor *c, const em_adv_plan *p, const em_tensor *x, em_tensor *const *ix,
                       const int64_t *vstrides) {
    memset(c, 0, sizeof *c);
    c->nd = p->nd;
    c->shape = p->shape;
    c->n = 2 + p->k;
    for (int out = 0; out < p->nd; out++) {
        c->strides[0][out] = p->rest_dim[out] >= 0 ? x->strides[p->rest_dim[out]] : 0;
        c->strides[1][out] = vstrides[out];
    }
    for (int j = 0; j < p->k; j++) {
        int64_t bs[EM_MAX_DIMS];
        em_broadcast_strides(ix[j]->shape, ix[j]->strides, ix[j]->ndim, p->nb, bs);
        for (int b = 0; b < p->nb; b++) c->strides[2 + j][p->pos + b] = bs[b];
    }
}

/* Checks every index (negative ones count from the end). */
static em_status adv_check(const char *op, const em_adv_plan *p, const em_tensor *x,
                           em_tensor *const *ix, const em_attrs *a) {
    for (int j = 0; j < p->k; j++) {
        int d = (int)a->dims[j];
        int64_t *checked = load_indices(ix[j], x->shape[d], true, EM_ERR_INDEX, op, d);
        if (!checked) return em_last_status();
        em_free(checked);
    }
    return EM_OK;
}

static inline int64_t adv_offset(const cursor *c, const em_adv_plan *p, const em_tensor *x,
                                 em_tensor *const *ix, const em_attrs *a) {
    int64_t off = c->off[0];
    for (int j = 0; j < p->k; j++) {
        int d = (int)a->dims[j];
        int64_t i = load_index(ix[j], c->off[2 + j]);
        off += (i < 0 ? i + x->shape[d] : i) * x->strides[d];
    }
    return off;
}

typedef struct {
    const em_adv_plan *p;
    const em_tensor *x;
    em_tensor *const *ix;
    const em_attrs *a;
    em_tensor *y;
} index_ctx;

static void index_range(void *arg, int64_t b, int64_t e) {
    const index_ctx *c = arg;
    int64_t ys[EM_MAX_DIMS];
    em_contiguous_strides(c->p->shape, c->p->nd, ys);
    cursor cur;
    adv_cursor(&cur, c->p, c->x, c->ix, ys);
    cursor_seek(&cur, b);
    size_t item = em_dtype_size(c->x->dtype);
    const char *xb = em_tensor_data(c->x);
    char *yb = em_tensor_data(c->y);
    for (int64_t t = b; t < e; t++, cursor_next(&cur))
        copy_elem(yb + (size_t)cur.off[1] * item,
                  xb + (size_t)adv_offset(&cur, c->p, c->x, c->ix, c->a) * item, item);
}

em_status cpu_index(em_op op, em_tensor *const *in, int n_in, const em_attrs *a, em_tensor **out) {
    em_adv_plan p;
    em_type types[EM_MAX_DIMS + 1];
    if (n_in < 2 || n_in > EM_MAX_DIMS + 1)
        return em_error(EM_ERR_INDEX, "index: 1 to %d index tensors, got %d", EM_MAX_DIMS, n_in - 1);
    for (int i = 0; i < n_in; i++) types[i] = em_tensor_type(in[i]);
    em_status st = em_adv_plan_make("index", &types[0], types + 1, n_in - 1, a, &p);
    if (st != EM_OK) return st;
    if (p.k == 1) { /* x[i] along one dim: index_select with the index flattened */
        int d = (int)a->dims[0];
        int64_t *idx = load_indices(in[1], in[0]->shape[d], true, EM_ERR_INDEX, "index", d);
        if (!idx) return em_last_status();
        run_isel(in[0], d, idx, in[1]->numel, out[0]);
        em_free(idx);
        return EM_OK;
    }
    if ((st = adv_check("index", &p, in[0], in + 1, a)) != EM_OK) return st;
    index_ctx c = {&p, in[0], in + 1, a, out[0]};
    em_parallel_for(out[0]->numel, EM_GRAIN_ELEMENTWISE, index_range, &c);
    return EM_OK;
}

/* Is the one index tensor i (1-D, in range for a dim of `size`) start, start
 * + step, ... with step > 0? Then y[..., i, ...] = v is a copy into a
 * strided view of y, as a slice's backward writes its gradient (a compiled
 * step traces it as index_put): no element is written twice. */
static bool progression(const em_tensor *i, int64_t size, int64_t *start, int64_t *step) {
    if (i->ndim != 1 || i->numel < 1) return false;
    int64_t *idx = load_indices(i, size, true, EM_ERR_INDEX, "index_put", 0);
    if (!idx) {
        em_clear_error(); /* (out of range: the general path says so) */
        return false;
    }
    *start = idx[0];
    *step = i->numel > 1 ? idx[1] - idx[0] : 1;
    bool ok = *step > 0;
    for (int64_t j = 1; j < i->numel && ok; j++) ok = idx[j] == *start + j * *step;
    em_free(idx);
    return ok;
}

/* out[i_1..i_k] (+)= values, in index order, into out itself (x's values
 * already there). */
em_status em_index_put_write(em_tensor *y, em_tensor *const *ix, int k, em_tensor *values,
                             const em_attrs *a) {
    em_adv_plan p;
    em_type types[EM_MAX_DIMS + 1];
    if (k < 1 || k > EM_MAX_DIMS)
        return em_error(EM_ERR_INDEX, "index_put: 1 to %d index tensors, got %d", EM_MAX_DIMS, k);
    types[0] = em_tensor_type(y);
    for (int j = 0; j < k; j++) types[1 + j] = em_tensor_type(ix[j]);
    em_status st = em_adv_plan_make("index_put", &types[0], types + 1, k, a, &p);
    if (st != EM_OK) return st;
    em_tensor *v = values, *cast = NULL;
    if (v->dtype != y->dtype && !(v = cast = em_converted(v, y->dtype))) return em_last_status();
    size_t item = em_dtype_size(y->dtype);
    char *yb = em_tensor_data(y);
    const char *vb = em_tensor_data(v);
    int d = (int)a->dims[0];
    int64_t start, step;
    if (k == 1 && !a->accumulate && progression(ix[0], y->shape[d], &start, &step)) {
        int64_t shape[EM_MAX_DIMS], strides[EM_MAX_DIMS];
        memcpy(shape, y->shape, sizeof shape);
        memcpy(strides, y->strides, sizeof strides);
        shape[d] = ix[0]->numel;
        strides[d] *= step;
        em_tensor *view = em_tensor_from_storage(y->storage, y->dtype, y->offset + start * y->strides[d], shape,
                                                 strides, y->ndim);
        st = view ? em_copy_into(view, v) : em_last_status();
        em_tensor_release(view);
        em_tensor_release(cast);
        return st;
    }
    if (k == 1 && !a->accumulate && d == 0 && em_tensor_is_contiguous(y) &&
        (v->numel == 1 || (em_tensor_is_contiguous(v) && em_shape_eq(v->shape, v->ndim, p.shape, p.nd)))) {
        /* y[i] = v with i along dim 0: whole rows, in order (the last write wins) */
        int64_t *idx = load_indices(ix[0], y->shape[0], true, EM_ERR_INDEX, "index_put", 0);
        if (!idx) {
            em_tensor_release(cast);
            return em_last_status();
        }
        int64_t row = y->shape[0] ? y->numel / y->shape[0] : 0;
        size_t rb = (size_t)row * item;
        for (int64_t j = 0; j < ix[0]->numel; j++) {
            char *dst = yb + (size_t)idx[j] * rb;
            if (v->numel != 1)
                memcpy(dst, vb + (size_t)j * rb, rb);
            else
                for (int64_t e = 0; e < row; e++) copy_elem(dst + (size_t)e * item, vb, item);
        }
        em_free(idx);
        em_tensor_release(cast);
        return EM_OK;
    }
    if (k == 1 && a->accumulate && d == 0 && em_tensor_is_contiguous(y) && em_tensor_is_contiguous(v) &&
        em_shape_eq(v->shape, v->ndim, p.shape, p.nd) && (y->dtype == EM_DTYPE_F32 || y->dtype == EM_DTYPE_F64)) {
        /* y[i] += v with i along dim 0 (an embedding's backward): whole rows
         * added in index order, each element summed in the order the
         * general path below sums it, in loops the compiler vectorises */
        int64_t *idx = load_indices(ix[0], y->shape[0], true, EM_ERR_INDEX, "index_put", 0);
        if (!idx) {
            em_tensor_release(cast);
            return em_last_status();
        }
        int64_t row = y->shape[0] ? y->numel / y->shape[0] : 0;
        for (int64_t j = 0; j < ix[0]->numel; j++) {
            if (y->dtype == EM_DTYPE_F32) {
                float *dst = (float *)(void *)yb + idx[j] * row;
                const float *src = (const float *)(const void *)vb + j * row;
                for (int64_t e = 0; e < row; e++) dst[e] += src[e];
            } else {
                double *dst = (double *)(void *)yb + idx[j] * row;
                const double *src = (const double *)(const void *)vb + j * row;
                for (int64_t e = 0; e < row; e++) dst[e] += src[e];
            }
        }
        em_free(idx);
        em_tensor_release(cast);
        return EM_OK;
    }
    if ((st = adv_check("index_put", &p, y, ix, a)) != EM_OK) {
        em_tensor_release(cast);
        return st;
    }
    int64_t vs[EM_MAX_DIMS];
    em_broadcast_strides(v->shape, v->strides, v->ndim, p.nd, vs);
    cursor cur;
    adv_cursor(&cur, &p, y, ix, vs);
    cursor_seek(&cur, 0);
    int64_t total = em_shape_numel(p.shape, p.nd);
    for (int64_t t = 0; t < total; t++, cursor_next(&cur)) {
        put_elem(yb + (size_t)adv_offset(&cur, &p, y, ix, a) * item, vb + (size_t)cur.off[1] * item,
                 y->dtype, a->accumulate);
    }
    em_tensor_release(cast);
    return EM_OK;
}

em_status cpu_index_put(em_op op, em_tensor *const *in, int n_in, const em_attrs *a,
                        em_tensor **out) {
    if (n_in < 3 || n_in > EM_MAX_DIMS + 2)
        return em_error(EM_ERR_INDEX, "index_put: 1 to %d index tensors, got %d", EM_MAX_DIMS, n_in - 2);
    em_status st = em_copy_into(out[0], in[0]);
    return st == EM_OK ? em_index_put_write(out[0], in + 1, n_in - 2, in[n_in - 1], a) : st;
}

/* ---- one_hot ---- */

em_status cpu_one_hot(em_op op, em_tensor *const *in, int n_in, const em_attrs *a, em_tensor **out) {
    const em_tensor *x = in[0];
    int64_t classes = out[0]->shape[x->ndim];
    int64_t *cls = load_indices(x, classes, false, EM_ERR_VALUE, "one_hot", x->ndim);
    if (!cls) return em_last_status();
    int64_t *y = em_tensor_data(out[0]);
    memset(y, 0, (size_t)out[0]->numel * sizeof *y);
    for (int64_t t = 0; t < x->numel; t++) y[t * classes + cls[t]] = 1;
    em_free(cls);
    return EM_OK;
}

/* ---- data-dependent: nonzero, masked_select (they allocate their result) ---- */

static bool nonzero_at(const em_tensor *x, int64_t off) {
    const char *p = (const char *)em_tensor_data(x) + off * (int64_t)em_dtype_size(x->dtype);
    switch (x->dtype) {
#define NZ(unused, S, T, sfx)                                                                      \
    case EM_DTYPE_##S: return sc_cast_##sfx##_b8(*(const T *)p);
        EM_FOR_DTYPES_STORED(NZ, _)
#undef NZ
    default: return false;
    }
}

/* ---- the data-dependent ops on contiguous data, in parallel: count each
 * chunk's hits, then every chunk writes its hits from its prefix offset ---- */

#define CHUNK 65536

/* hits in x[b, e) (contiguous, any dtype: nonzero values; bool masks alike) */
static int64_t count_nonzero(const char *base, em_dtype dt, int64_t b, int64_t e) {
    int64_t n = 0;
    switch (dt) {
#define COUNT(unused, S, T, sfx)                                                                   \
    case EM_DTYPE_##S:                                                                             \
        for (int64_t i = b; i < e; i++) n += sc_cast_##sfx##_b8(((const T *)base)[i]);             \
        break;
        EM_FOR_DTYPES_NUMERIC(COUNT, _)
        EM_FOR_DTYPES_HALF(COUNT, _)
#undef COUNT
    default: /* bool: bytes, nonzero is true */
        for (int64_t i = b; i < e; i++) n += ((const uint8_t *)base)[i] != 0;
        break;
    }
    return n;
}

typedef struct {
    const em_tensor *x, *mask;
    em_tensor *y;
    int64_t numel, *counts; /* per chunk; then each chunk's first output row */
} hits_ctx;

static void count_task(void *arg, int64_t b, int64_t e) {
    hits_ctx *c = arg;
    const em_tensor *m = c->mask ? c->mask : c->x;
    for (int64_t k = b; k < e; k++) {
        int64_t lo = k * CHUNK, hi = lo + CHUNK < c->numel ? lo + CHUNK : c->numel;
        c->counts[k] = count_nonzero(em_tensor_data(m), m->dtype, lo, hi);
    }
}

/* Each chunk's hits in order; returns the total (counts become offsets). */
static int64_t count_hits(hits_ctx *c, int64_t nchunks) {
    em_parallel_for(nchunks, 1, count_task, c);
    int64_t total = 0;
    for (int64_t k = 0; k < nchunks; k++) {
        int64_t n = c->counts[k];
        c->counts[k] = total;
        total += n;
    }
    return total;
}

static bool is_hit(const em_tensor *m, int64_t i) {
    return count_nonzero(em_tensor_data(m), m->dtype, i, i + 1) != 0;
}

static void nonzero_write_task(void *arg, int64_t b, int64_t e) {
    hits_ctx *c = arg;
    const em_tensor *x = c->x;
    int nd = x->ndim;
    int64_t *y = em_tensor_data(c->y);
    for (int64_t k = b; k < e; k++) {
        int64_t lo = k * CHUNK, hi = lo + CHUNK < c->numel ? lo + CHUNK : c->numel;
        int64_t row = c->counts[k], coord[EM_MAX_DIMS], rem = lo;
        for (int d = nd - 1; d >= 0; d--) {
            coord[d] = rem % x->shape[d];
            rem /= x->shape[d];
        }
        for (int64_t i = lo; i < hi; i++) {
            if (is_hit(x, i)) {
                memcpy(y + row * nd, coord, (size_t)nd * sizeof *coord);
                row++;
            }
            for (int d = nd - 1; d >= 0 && ++coord[d] == x->shape[d]; d--) coord[d] = 0;
        }
    }
}

static void masked_write_task(void *arg, int64_t b, int64_t e) {
    hits_ctx *c = arg;
    size_t item = em_dtype_size(c->x->dtype);
    const char *xb = em_tensor_data(c->x);
    const uint8_t *mb = em_tensor_data(c->mask);
    char *yb = em_tensor_data(c->y);
    for (int64_t k = b; k < e; k++) {
        int64_t lo = k * CHUNK, hi = lo + CHUNK < c->numel ? lo + CHUNK : c->numel;
        char *dst = yb + (size_t)c->counts[k] * item;
        for (int64_t i = lo; i < hi; i++)
            if (mb[i]) {
                copy_elem(dst, xb + (size_t)i * item, item);
                dst += item;
            }
    }
}

em_status cpu_nonzero(em_op op, em_tensor *const *in, int n_in, const em_attrs *a, em_tensor **out) {
    const em_tensor *x = in[0];
    if (em_tensor_is_contiguous(x) && x->ndim > 0) {
        int64_t nchunks = (x->numel + CHUNK - 1) / CHUNK;
        hits_ctx c = {x, NULL, NULL, x->numel, em_malloc((size_t)(nchunks ? nchunks : 1) * sizeof(int64_t))};
        if (!c.counts) return EM_ERR_NOMEM;
        int64_t shape[2] = {count_hits(&c, nchunks), x->ndim};
        if ((out[0] = c.y = em_tensor_empty(shape, 2, EM_DTYPE_I64, x->device)))
            em_parallel_for(nchunks, 1, nonzero_write_task, &c);
        em_free(c.counts);
        return out[0] ? EM_OK : em_last_status();
    }
    cursor c;
    memset(&c, 0, sizeof c);
    c.nd = x->ndim;
    c.n = 1;
    c.shape = x->shape;
    memcpy(c.strides[0], x->strides, sizeof c.strides[0]);
    int64_t count = 0;
    cursor_seek(&c, 0);
    for (int64_t t = 0; t < x->numel; t++, cursor_next(&c)) count += nonzero_at(x, c.off[0]);
    int64_t shape[2] = {count, x->ndim};
    if (!(out[0] = em_tensor_empty(shape, 2, EM_DTYPE_I64, x->device))) return em_last_status();
    int64_t *y = em_tensor_data(out[0]);
    cursor_seek(&c, 0);
    for (int64_t t = 0, k = 0; t < x->numel; t++, cursor_next(&c))
        if (nonzero_at(x, c.off[0]))
            for (int d = 0; d < x->ndim; d++) y[k++] = c.idx[d];
    return EM_OK;
}

em_status cpu_masked_select(em_op op, em_tensor *const *in, int n_in, const em_attrs *a,
                            em_tensor **out) {
    const em_tensor *x = in[0], *m = in[1];
    if (em_tensor_is_contiguous(x) && em_tensor_is_contiguous(m) &&
        em_shape_eq(x->shape, x->ndim, m->shape, m->ndim)) {
        int64_t nchunks = (x->numel + CHUNK - 1) / CHUNK;
        hits_ctx c = {x, m, NULL, x->numel, em_malloc((size_t)(nchunks ? nchunks : 1) * sizeof(int64_t))};
        if (!c.counts) return EM_ERR_NOMEM;
        int64_t count = count_hits(&c, nchunks);
        if ((out[0] = c.y = em_tensor_empty(&count, 1, x->dtype, x->device)))
            em_parallel_for(nchunks, 1, masked_write_task, &c);
        em_free(c.counts);
        return out[0] ? EM_OK : em_last_status();
    }
    int64_t bs[EM_MAX_DIMS];
    int nb;
    em_broadcast_shapes(x->shape, x->ndim, m->shape, m->ndim, bs, &nb);
    cursor c;
    memset(&c, 0, sizeof c);
    c.nd = nb;
    c.n = 2;
    c.shape = bs;
    em_broadcast_strides(x->shape, x->strides, x->ndim, nb, c.strides[0]);
    em_broadcast_strides(m->shape, m->strides, m->ndim, nb, c.strides[1]);
    int64_t total = em_shape_numel(bs, nb), count = 0;
    const bool *mb = em_tensor_data(m);
    cursor_seek(&c, 0);
    for (int64_t t = 0; t < total; t++, cursor_next(&c)) count += mb[c.off[1]];
    if (!(out[0] = em_tensor_empty(&count, 1, x->dtype, x->device))) return em_last_status();
    size_t item = em_dtype_size(x->dtype);
    const char *xb = em_tensor_data(x);
    char *yb = em_tensor_data(out[0]);
    cursor_seek(&c, 0);
    for (int64_t t = 0, k = 0; t < total; t++, cursor_next(&c))
        if (mb[c.off[1]]) copy_elem(yb + (size_t)(k++) * item, xb + (size_t)c.off[0] * item, item);
    return EM_OK;
}
