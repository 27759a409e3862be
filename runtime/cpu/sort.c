/*
 * sort.c - sorting and selection along one dim: sort, topk, kthvalue,
 * median, nanmedian, mode.
 *
 * Every value becomes an order key: an unsigned integer that compares as
 * PyTorch orders the values (floats: NaN above +inf, -0 equal to 0; signed
 * integers offset by their sign bit; descending: the key's complement).
 * Keys of at most 32 bits travel with their index in one uint64_t (key <<
 * 32 | index), 64-bit keys in a pair (sort_items.h sorts both). Long rows
 * go through a radix sort and short ones a merge sort, both stable; topk,
 * kthvalue and the medians select by radix in linear time, whatever the
 * data. Values are read back from the input at the chosen indices, so they
 * keep the input's bits (-0 stays -0). Rows are independent: the pool
 * splits them, and each row is the same work on any thread count. Their
 * inference is ../infer/sort.c.
 */
#include <math.h>
#include <string.h>

#include "../kernels.h"
#include "ember/alloc.h"
#include "ember/ops_math.h"
#include "ember/parallel.h"
#include "sort.h"

/* ---- order keys ---- */

static inline uint64_t key_bits32(uint32_t u) { return (u & 0x80000000u) ? ~u : (u | 0x80000000u); }
static inline uint64_t key_f32(float v) {
    uint32_t u = 0;
    if (v != v) u = 0x7fc00000u; /* every NaN is the one NaN */
    else if (v != 0.0f) memcpy(&u, &v, sizeof u); /* -0 is 0 */
    return key_bits32(u) & 0xffffffffu;
}
static inline uint64_t key_f64(double v) {
    uint64_t u = 0;
    if (v != v) u = 0x7ff8000000000000u;
    else if (v != 0.0) memcpy(&u, &v, sizeof u);
    return (u >> 63) ? ~u : (u | 0x8000000000000000u);
}
static inline uint64_t key_f16(uint16_t v) { return key_f32(sc_cast_f16_f32(v)); }
static inline uint64_t key_bf16(uint16_t v) { return key_f32(sc_cast_bf16_f32(v)); }
static inline uint64_t key_i64(int64_t v) { return (uint64_t)v ^ 0x8000000000000000u; }
static inline uint64_t key_i32(int32_t v) { return (uint32_t)v ^ 0x80000000u; }
static inline uint64_t key_i16(int16_t v) { return key_i32(v); }
static inline uint64_t key_i8(int8_t v) { return key_i32(v); }
static inline uint64_t key_u8(uint8_t v) { return v; }
static inline uint64_t key_b8(bool v) { return v; }

int em_order_key_bits(em_dtype dt) { return dt == EM_DTYPE_I64 || dt == EM_DTYPE_F64 ? 64 : 32; }

uint64_t em_order_nan_key(em_dtype dt) {
    if (dt == EM_DTYPE_F64) return key_f64(NAN);
    return em_dtype_is_float(dt) ? key_f32(NAN) : ~(uint64_t)0;
}

#define KEY_CASE(STORE, S, T, sfx)                                                                 \
    case EM_DTYPE_##S:                                                                             \
        for (int64_t j = 0; j < n; j++) {                                                          \
            uint64_t key = key_##sfx(((const T *)p)[j * st]) ^ flip;                               \
            STORE;                                                                                 \
        }                                                                                          \
        break;

void em_order_keys(em_dtype dt, const void *p, int64_t st, int64_t n, uint64_t *keys) {
    uint64_t flip = 0;
    switch (dt) {
        EM_FOR_DTYPES_STORED(KEY_CASE, keys[j] = key)
    default: break;
    }
}

/* ---- the two item layouts ---- */

typedef struct {
    uint64_t key, idx;
} wide_item;

#define ITEM uint64_t
#define SFX packed
#define DIGITS(it) (it)
#define LESS(a, b) ((a) < (b))
#include "sort_items.h"
#undef ITEM
#undef SFX
#undef DIGITS
#undef LESS

#define ITEM wide_item
#define SFX wide
#define DIGITS(it) ((it).key)
#define LESS(a, b) ((a).key < (b).key || ((a).key == (b).key && (a).idx < (b).idx))
#include "sort_items.h"
#undef ITEM
#undef SFX
#undef DIGITS
#undef LESS

#define P_KEY(it) ((it) >> 32)
#define P_IDX(it) ((int64_t)((it) & 0xffffffffu))

/* Keys of at most 32 bits pack with indices below 2^32. */
static bool use_packed(em_dtype dt, int64_t n) { return em_order_key_bits(dt) == 32 && n <= (int64_t)UINT32_MAX; }

static void build_packed(em_dtype dt, const void *p, int64_t st, int64_t n, uint64_t flip, uint64_t *a) {
    flip &= 0xffffffffu;
    switch (dt) {
        EM_FOR_DTYPES_STORED(KEY_CASE, a[j] = key << 32 | (uint64_t)j)
    default: break;
    }
}

static void build_wide(em_dtype dt, const void *p, int64_t st, int64_t n, uint64_t flip, wide_item *a) {
    if (em_order_key_bits(dt) == 32) flip &= 0xffffffffu;
    switch (dt) {
        EM_FOR_DTYPES_STORED(KEY_CASE, a[j] = ((wide_item){key, (uint64_t)j}))
    default: break;
    }
}

/* ---- one row ---- */

typedef struct {
    em_op op;
    const em_tensor *x;
    em_tensor *val, *ind;
    int dim, n_outer;
    int64_t len;  /* the row: x's size along dim */
    int64_t k;    /* topk: how many; kthvalue: which, from 0 */
    bool descending, sorted;
    int64_t oshape[EM_MAX_DIMS]; /* the dims other than dim */
    int64_t xst[EM_MAX_DIMS], vst[EM_MAX_DIMS], ist[EM_MAX_DIMS];
    int64_t xs, vs, is; /* strides along dim; results of one value per row: 0 */
    em_status status;
} sel_ctx;

/* Where row r starts in x, val and ind (elements). */
static void row_offsets(const sel_ctx *c, int64_t r, int64_t *xo, int64_t *vo, int64_t *io) {
    *xo = *vo = *io = 0;
    for (int d = c->n_outer - 1; d >= 0; d--) {
        int64_t k = r % c->oshape[d];
        r /= c->oshape[d];
        *xo += k * c->xst[d];
        *vo += k * c->vst[d];
        *io += k * c->ist[d];
    }
}

/* Writes result j of a row: x's element at index i and the index. */
static inline void put(const sel_ctx *c, const char *xp, char *vp, int64_t *ip, int64_t j, int64_t i,
                       size_t size) {
    em_copy_elem(vp + (size_t)(j * c->vs) * size, xp + (size_t)(i * c->xs) * size, size);
    ip[j * c->is] = i;
}

/* topk of at most this many: one pass keeping the best in a sorted array
 * (few values displace one once it fills), instead of selecting by radix. */
#define SMALL_K 32

/* The row's op over its items a (t: scratch), for one layout. */
#define DEFINE_ROW(SFX, ITEM, IDX, KEY, LE)                                                        \
    static void row_##SFX(const sel_ctx *c, ITEM *a, ITEM *t, const char *xp, char *vp, int64_t *ip, \
                          int lo, int hi) {                                                        \
        em_dtype dt = c->x->dtype;                                                                 \
        size_t size = em_dtype_size(dt);                                                           \
        int64_t n = c->len;                                                                        \
        if (c->op == EM_OP_SORT || (c->op == EM_OP_TOPK && c->k == n && c->sorted)) {              \
            ITEM *s = sort_##SFX(a, t, n, lo, hi);                                                 \
            for (int64_t j = 0; j < c->k; j++) put(c, xp, vp, ip, j, (int64_t)IDX(s[j]), size);    \
            return;                                                                                \
        }                                                                                          \
        if (c->op == EM_OP_TOPK && c->k <= SMALL_K) { /* one pass, the best k kept in order */  \
            int64_t m = 0, k = c->k;                                                               \
            for (int64_t j = 0; j < n; j++) {                                                      \
                ITEM v = a[j];                                                                     \
                if (m == k && LE(t[k - 1], v)) continue;                                           \
                int64_t i = m < k ? m++ : k - 1;                                                   \
                for (; i > 0 && !LE(t[i - 1], v); i--) t[i] = t[i - 1];                            \
                t[i] = v;                                                                          \
            }                                                                                      \
            for (int64_t i = 1; !c->sorted && i < m; i++) { /* unsorted: in input order */         \
                ITEM v = t[i];                                                                     \
                int64_t j = i;                                                                     \
                for (; j > 0 && IDX(t[j - 1]) > IDX(v); j--) t[j] = t[j - 1];                     \
                t[j] = v;                                                                          \
            }                                                                                      \
            for (int64_t j = 0; j < m; j++) put(c, xp, vp, ip, j, (int64_t)IDX(t[j]), size);       \
            return;                                                                                \
        }                                                                                          \
        if (c->op == EM_OP_TOPK) {                                                                 \
            if (c->k == 0) return;                                                                 \
            ITEM th = select_##SFX(a, t, n, c->k - 1, lo, hi);                                     \
            int64_t m = 0;                                                                         \
            for (int64_t j = 0; j < n; j++)                                                        \
                if (LE(a[j], th)) t[m++] = a[j];                                                   \
            ITEM *s = c->sorted ? sort_##SFX(t, a, m, lo, hi) : t;                                 \
            for (int64_t j = 0; j < m; j++) put(c, xp, vp, ip, j, (int64_t)IDX(s[j]), size);       \
            return;                                                                                \
        }                                                                                          \
        if (c->op == EM_OP_MODE) { /* the longest run; the smallest value of equal runs; its last index */ \
            ITEM *s = sort_##SFX(a, t, n, lo, hi);                                                 \
            int64_t best = 0, best_len = 0;                                                        \
            for (int64_t b = 0, e; b < n; b = e) {                                                 \
                for (e = b + 1; e < n && KEY(s[e]) == KEY(s[b]); e++) {}                           \
                if (e - b > best_len) {                                                            \
                    best_len = e - b;                                                              \
                    best = e - 1;                                                                  \
                }                                                                                  \
            }                                                                                      \
            put(c, xp, vp, ip, 0, (int64_t)IDX(s[best]), size);                                    \
            return;                                                                                \
        }                                                                                          \
        int64_t k = c->k; /* kthvalue */                                                           \
        if (c->op == EM_OP_MEDIAN || c->op == EM_OP_NANMEDIAN) {                                   \
            uint64_t nan = em_order_nan_key(dt);                                                   \
            int64_t nans = 0, first = -1;                                                          \
            if (em_dtype_is_float(dt))                                                             \
                for (int64_t j = 0; j < n; j++)                                                    \
                    if (KEY(a[j]) == nan && nans++ == 0) first = j;                                \
            int64_t m = c->op == EM_OP_MEDIAN ? n : n - nans;                                      \
            if ((c->op == EM_OP_MEDIAN && nans) || m == 0) { /* NaN: the first (median), any */     \
                put(c, xp, vp, ip, 0, first < 0 ? 0 : first, size);                               \
                return;                                                                            \
            }                                                                                      \
            k = (m - 1) / 2;                                                                       \
        }                                                                                          \
        put(c, xp, vp, ip, 0, (int64_t)IDX(select_##SFX(a, t, n, k, lo, hi)), size);               \
    }

#define W_IDX(it) ((it).idx)
#define W_KEY(it) ((it).key)
#define P_LE(a, b) ((a) <= (b))
#define W_LE(a, b) (!LESS_W(b, a))
#define LESS_W(a, b) ((a).key < (b).key || ((a).key == (b).key && (a).idx < (b).idx))
DEFINE_ROW(packed, uint64_t, P_IDX, P_KEY, P_LE)
DEFINE_ROW(wide, wide_item, W_IDX, W_KEY, W_LE)

static void rows_task(void *arg, int64_t b, int64_t e) {
    sel_ctx *c = arg;
    em_dtype dt = c->x->dtype;
    bool packed = use_packed(dt, c->len);
    size_t item = packed ? sizeof(uint64_t) : sizeof(wide_item), size = em_dtype_size(dt);
    size_t n = (size_t)(c->len ? c->len : 1);
    void *a = em_malloc(n * item), *t = em_malloc(n * item);
    if (!a || !t) {
        c->status = EM_ERR_NOMEM; /* a racy write of one value: any writer says the same */
        em_free(a);
        em_free(t);
        return;
    }
    uint64_t flip = c->descending ? ~(uint64_t)0 : 0;
    int hi = packed ? 7 : em_order_key_bits(dt) / 8 - 1, lo = packed ? 4 : 0;
    for (int64_t r = b; r < e; r++) {
        int64_t xo, vo, io;
        row_offsets(c, r, &xo, &vo, &io);
        const char *xp = (const char *)em_tensor_data(c->x) + (size_t)xo * size;
        char *vp = (char *)em_tensor_data(c->val) + (size_t)vo * size;
        int64_t *ip = (int64_t *)em_tensor_data(c->ind) + io;
        if (packed) {
            build_packed(dt, xp, c->xs, c->len, flip, a);
            row_packed(c, a, t, xp, vp, ip, lo, hi);
        } else {
            build_wide(dt, xp, c->xs, c->len, flip, a);
            row_wide(c, a, t, xp, vp, ip, lo, hi);
        }
    }
    em_free(a);
    em_free(t);
}

/* ---- the ops ---- */

em_status cpu_sort(em_op op, em_tensor *const *in, int n_in, const em_attrs *a, em_tensor **out) {
    (void)n_in;
    const em_tensor *x = in[0];
    sel_ctx c;
    memset(&c, 0, sizeof c);
    c.op = op;
    c.x = x;
    c.val = out[0];
    c.ind = out[1];
    c.dim = x->ndim ? (int)a->dims[0] : 0;
    c.len = x->ndim ? x->shape[c.dim] : 1;
    c.descending = a->descending;
    c.sorted = a->sorted;
    c.k = op == EM_OP_SORT ? c.len : op == EM_OP_TOPK ? a->k : a->k - 1;
    if (x->ndim) {
        c.xs = x->strides[c.dim];
        if (em_sort_keeps_row(op)) {
            c.vs = out[0]->strides[c.dim];
            c.is = out[1]->strides[c.dim];
        }
    }
    bool kept = em_sort_keeps_row(op) || a->keepdim; /* the results have x's dims */
    for (int d = 0, o = 0; d < x->ndim; d++) {
        if (d == c.dim) continue;
        int rd = kept ? d : (d < c.dim ? d : d - 1);
        c.oshape[o] = x->shape[d];
        c.xst[o] = x->strides[d];
        c.vst[o] = out[0]->strides[rd];
        c.ist[o] = out[1]->strides[rd];
        o++;
        c.n_outer = o;
    }
    int64_t rows = 1;
    for (int d = 0; d < c.n_outer; d++) rows *= c.oshape[d];
    if (rows == 0 || (c.len == 0 && em_sort_keeps_row(op))) return EM_OK;
    int64_t grain = c.len >= 16384 ? 1 : 16384 / c.len;
    em_parallel_for(rows, grain, rows_task, &c);
    return c.status;
}
#define SELECTION_CPU(name)                                                                        \
    em_status cpu_##name(em_op op, em_tensor *const *in, int n_in, const em_attrs *a, em_tensor **out) { \
        return cpu_sort(op, in, n_in, a, out);                                                     \
    }
SELECTION_CPU(topk)
SELECTION_CPU(kthvalue)
SELECTION_CPU(median)
SELECTION_CPU(nanmedian)
SELECTION_CPU(mode)

/* ---- for unique: one flat sort ---- */

em_status em_sort_flat(em_tensor *x, uint64_t **keys, int64_t **order) {
    em_tensor *d = em_dense(x);
    if (!d) return em_last_status();
    int64_t n = d->numel;
    size_t cap = (size_t)(n ? n : 1);
    bool packed = use_packed(d->dtype, n);
    size_t item = packed ? sizeof(uint64_t) : sizeof(wide_item);
    void *a = em_malloc(cap * item), *t = em_malloc(cap * item);
    *keys = em_malloc(cap * sizeof **keys);
    *order = em_malloc(cap * sizeof **order);
    em_status st = a && t && *keys && *order ? EM_OK : EM_ERR_NOMEM;
    if (st == EM_OK && packed) {
        build_packed(d->dtype, em_tensor_data(d), 1, n, 0, a);
        uint64_t *s = sort_packed(a, t, n, 4, 7);
        for (int64_t i = 0; i < n; i++) {
            (*keys)[i] = P_KEY(s[i]);
            (*order)[i] = P_IDX(s[i]);
        }
    } else if (st == EM_OK) {
        build_wide(d->dtype, em_tensor_data(d), 1, n, 0, a);
        wide_item *s = sort_wide(a, t, n, 0, em_order_key_bits(d->dtype) / 8 - 1);
        for (int64_t i = 0; i < n; i++) {
            (*keys)[i] = s[i].key;
            (*order)[i] = (int64_t)s[i].idx;
        }
    }
    em_free(a);
    em_free(t);
    em_tensor_release(d);
    if (st != EM_OK) {
        em_free(*keys);
        em_free(*order);
        *keys = NULL;
        *order = NULL;
        return em_error(st, "unique: out of memory sorting %lld values", (long long)n);
    }
    return EM_OK;
}
