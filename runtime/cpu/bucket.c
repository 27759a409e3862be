/*
 * bucket.c - counting and bucketing: unique, unique_consecutive,
 * searchsorted, bincount, histc.
 *
 * Values are compared through sort.c's order keys, so unique and
 * searchsorted agree with sort on every dtype (NaN above +inf, -0 equal
 * to 0). As in PyTorch, a NaN is never equal to another NaN when unique
 * and unique_consecutive count flat values; slices (the dim= forms) are
 * equal when their keys are. unique, unique_consecutive and bincount make
 * results whose size depends on the data, so they allocate their own
 * (EM_F_DATA_DEPENDENT: the tracer leaves them to eager). Their inference
 * is ../infer/bucket.c.
 */
#include <math.h>
#include <string.h>

#include "../kernels.h"
#include "ember/alloc.h"
#include "ember/ops_math.h"
#include "sort.h"

/* ---- unique, unique_consecutive ---- */

/* Runs of equal values in key order (flat: key i belongs to element
 * order[i]); run_start[u] is where run u begins. A NaN is a run of its own. */
static int64_t find_runs(const uint64_t *keys, int64_t n, uint64_t nan, int64_t *run_start) {
    int64_t u = 0;
    for (int64_t i = 0; i < n; i++)
        if (i == 0 || keys[i] != keys[i - 1] || keys[i] == nan) run_start[u++] = i;
    return u;
}

/* Makes the three results of a flat unique from n keys in run order
 * (order[i]: the element key i came from; NULL: i itself). */
static em_status flat_results(em_tensor *x, const uint64_t *keys, const int64_t *order, em_tensor **out) {
    int64_t n = x->numel;
    uint64_t nan = em_dtype_is_float(x->dtype) ? em_order_nan_key(x->dtype) : ~(uint64_t)0;
    int64_t *start = em_malloc((size_t)(n + 1) * sizeof *start);
    em_tensor *d = em_dense(x);
    if (!start || !d) {
        em_free(start);
        em_tensor_release(d);
        return start ? em_last_status() : EM_ERR_NOMEM;
    }
    int64_t u = find_runs(keys, n, nan, start);
    start[u] = n;
    out[0] = em_tensor_empty(&u, 1, x->dtype, x->device);
    out[1] = em_tensor_empty(x->shape, x->ndim, EM_DTYPE_I64, x->device);
    out[2] = em_tensor_empty(&u, 1, EM_DTYPE_I64, x->device);
    if (out[0] && out[1] && out[2]) {
        size_t size = em_dtype_size(x->dtype);
        const char *xp = em_tensor_data(d);
        char *vp = em_tensor_data(out[0]);
        int64_t *inv = em_tensor_data(out[1]), *cnt = em_tensor_data(out[2]);
        for (int64_t r = 0; r < u; r++) {
            int64_t first = order ? order[start[r]] : start[r];
            em_copy_elem(vp + (size_t)r * size, xp + (size_t)first * size, size);
            cnt[r] = start[r + 1] - start[r];
            for (int64_t i = start[r]; i < start[r + 1]; i++) inv[order ? order[i] : i] = r;
        }
    }
    em_free(start);
    em_tensor_release(d);
    return out[0] && out[1] && out[2] ? EM_OK : em_last_status();
}

/* Slices along dim d: n_slices of len elements; keys[s * len + e] is the
 * key of element e of slice s (the other dims in row-major order), and
 * offs[e] where that element lies from the slice's start. */
typedef struct {
    int64_t n_slices, len, step; /* step: x's stride along d */
    uint64_t *keys;
    int64_t *offs;
} slices;

static em_status slices_of(const em_tensor *x, int d, slices *sl) {
    sl->n_slices = x->shape[d];
    sl->len = sl->n_slices ? x->numel / sl->n_slices : 0;
    sl->step = x->strides[d];
    size_t len = (size_t)(sl->len ? sl->len : 1);
    sl->offs = em_malloc(len * sizeof *sl->offs);
    sl->keys = em_malloc(len * (size_t)(sl->n_slices ? sl->n_slices : 1) * sizeof *sl->keys);
    if (!sl->offs || !sl->keys) return EM_ERR_NOMEM;
    int64_t idx[EM_MAX_DIMS] = {0};
    for (int64_t e = 0; e < sl->len; e++) {
        int64_t off = 0;
        for (int k = 0; k < x->ndim; k++) off += k == d ? 0 : idx[k] * x->strides[k];
        sl->offs[e] = off;
        for (int k = x->ndim - 1; k >= 0; k--) {
            if (k == d) continue;
            if (++idx[k] < x->shape[k]) break;
            idx[k] = 0;
        }
    }
    size_t size = em_dtype_size(x->dtype);
    const char *base = em_tensor_data(x);
    for (int64_t s = 0; s < sl->n_slices; s++)
        for (int64_t e = 0; e < sl->len; e++)
            em_order_keys(x->dtype, base + (size_t)(s * sl->step + sl->offs[e]) * size, 1, 1,
                          &sl->keys[s * sl->len + e]);
    return EM_OK;
}

static int slice_cmp(const slices *sl, int64_t a, int64_t b) {
    const uint64_t *ka = sl->keys + a * sl->len, *kb = sl->keys + b * sl->len;
    for (int64_t e = 0; e < sl->len; e++)
        if (ka[e] != kb[e]) return ka[e] < kb[e] ? -1 : 1;
    return 0;
}

/* Stable merge sort of slice numbers by their keys. */
static void sort_slices(const slices *sl, int64_t *a, int64_t *t, int64_t n) {
    if (n < 2) return;
    int64_t h = n / 2;
    sort_slices(sl, a, t, h);
    sort_slices(sl, a + h, t, n - h);
    int64_t i = 0, j = h, o = 0;
    while (i < h && j < n) t[o++] = slice_cmp(sl, a[j], a[i]) < 0 ? a[j++] : a[i++];
    while (i < h) t[o++] = a[i++];
    while (j < n) t[o++] = a[j++];
    memcpy(a, t, (size_t)n * sizeof *a);
}

/* unique(dim=d) and unique_consecutive(dim=d): order[] is the slices in
 * the order their runs are found (sorted, or as they lie). */
static em_status slice_results(const em_tensor *x, int d, const slices *sl, const int64_t *order,
                               em_tensor **out) {
    int64_t n = sl->n_slices, u = 0;
    int64_t *start = em_malloc((size_t)(n + 1) * sizeof *start);
    if (!start) return EM_ERR_NOMEM;
    for (int64_t i = 0; i < n; i++)
        if (i == 0 || slice_cmp(sl, order[i], order[i - 1]) != 0) start[u++] = i;
    start[u] = n;
    int64_t shape[EM_MAX_DIMS];
    memcpy(shape, x->shape, (size_t)x->ndim * sizeof *shape);
    shape[d] = u;
    out[0] = em_tensor_empty(shape, x->ndim, x->dtype, x->device);
    out[1] = em_tensor_empty(&n, 1, EM_DTYPE_I64, x->device);
    out[2] = em_tensor_empty(&u, 1, EM_DTYPE_I64, x->device);
    if (out[0] && out[1] && out[2]) {
        /* out[0] is contiguous: the same walk over the other dims, with its strides */
        slices ol = {u, sl->len, out[0]->strides[d], NULL, NULL};
        size_t size = em_dtype_size(x->dtype);
        const char *xp = em_tensor_data(x);
        char *vp = em_tensor_data(out[0]);
        int64_t *inv = em_tensor_data(out[1]), *cnt = em_tensor_data(out[2]);
        int64_t inner = 1;
        for (int k = d + 1; k < x->ndim; k++) inner *= x->shape[k];
        for (int64_t r = 0; r < u; r++) {
            int64_t s = order[start[r]];
            for (int64_t e = 0; e < sl->len; e++) { /* out's offset of element e: (outer, inner) */
                int64_t oo = (e / inner) * ol.step * u + e % inner;
                em_copy_elem(vp + (size_t)(r * ol.step + oo) * size, xp + (size_t)(s * sl->step + sl->offs[e]) * size,
                          size);
            }
            cnt[r] = start[r + 1] - start[r];
            for (int64_t i = start[r]; i < start[r + 1]; i++) inv[order[i]] = r;
        }
    }
    em_free(start);
    return out[0] && out[1] && out[2] ? EM_OK : em_last_status();
}

static em_status unique_any(em_op op, em_tensor *x, const em_attrs *a, em_tensor **out) {
    bool sorted = op == EM_OP_UNIQUE;
    if (a->n_dims == 0) {
        if (sorted) {
            uint64_t *keys;
            int64_t *order;
            em_status st = em_sort_flat(x, &keys, &order);
            if (st != EM_OK) return st;
            st = flat_results(x, keys, order, out);
            em_free(keys);
            em_free(order);
            return st;
        }
        em_tensor *d = em_dense(x);
        uint64_t *keys = em_malloc((size_t)(x->numel ? x->numel : 1) * sizeof *keys);
        em_status st = d && keys ? EM_OK : d ? EM_ERR_NOMEM : em_last_status();
        if (st == EM_OK) {
            em_order_keys(x->dtype, em_tensor_data(d), 1, x->numel, keys);
            st = flat_results(x, keys, NULL, out);
        }
        em_free(keys);
        em_tensor_release(d);
        return st;
    }
    int dim = (int)a->dims[0];
    slices sl = {0, 0, 0, NULL, NULL};
    int64_t n = x->shape[dim];
    int64_t *order = em_malloc((size_t)(n ? n : 1) * sizeof *order), *tmp = em_malloc((size_t)(n ? n : 1) * sizeof *tmp);
    em_status st = order && tmp ? slices_of(x, dim, &sl) : EM_ERR_NOMEM;
    if (st == EM_OK) {
        for (int64_t i = 0; i < n; i++) order[i] = i;
        if (sorted) sort_slices(&sl, order, tmp, n);
        st = slice_results(x, dim, &sl, order, out);
    }
    em_free(order);
    em_free(tmp);
    em_free(sl.keys);
    em_free(sl.offs);
    return st == EM_ERR_NOMEM ? em_error(st, "%s: out of memory", em_op_name(op)) : st;
}

em_status cpu_unique(em_op op, em_tensor *const *in, int n_in, const em_attrs *a, em_tensor **out) {
    (void)n_in;
    em_tensor *res[3] = {NULL, NULL, NULL};
    em_status st = unique_any(op, in[0], a, res);
    for (int i = 0; i < 3; i++) {
        if (st == EM_OK) out[i] = res[i];
        else em_tensor_release(res[i]);
    }
    return st;
}
em_status cpu_unique_consecutive(em_op op, em_tensor *const *in, int n_in, const em_attrs *a, em_tensor **out) {
    return cpu_unique(op, in, n_in, a, out);
}

/* ---- searchsorted ---- */

em_status cpu_searchsorted(em_op op, em_tensor *const *in, int n_in, const em_attrs *a, em_tensor **out) {
    (void)op;
    (void)n_in;
    em_dtype dt = em_promote_types(in[0]->dtype, in[1]->dtype);
    em_tensor *seq = in[0]->dtype == dt ? em_dense(in[0]) : em_converted(in[0], dt);
    em_tensor *v = in[1]->dtype == dt ? em_dense(in[1]) : em_converted(in[1], dt);
    const em_tensor *sq = in[0], *vv = in[1];
    int64_t m = sq->shape[sq->ndim - 1], rows = 1, per_row = vv->numel; /* 1-d: one row for all values */
    if (sq->ndim > 1) {
        for (int d = 0; d < sq->ndim - 1; d++) rows *= sq->shape[d];
        per_row = vv->shape[vv->ndim - 1];
    }
    uint64_t *sk = em_malloc((size_t)(m ? m : 1) * sizeof *sk), *vk = em_malloc((size_t)(per_row ? per_row : 1) * sizeof *vk);
    em_status st = seq && v ? (sk && vk ? EM_OK : EM_ERR_NOMEM) : em_last_status();
    size_t size = em_dtype_size(dt);
    for (int64_t r = 0; st == EM_OK && r < rows; r++) {
        em_order_keys(dt, (const char *)em_tensor_data(seq) + (size_t)(r * m) * size, 1, m, sk);
        em_order_keys(dt, (const char *)em_tensor_data(v) + (size_t)(r * per_row) * size, 1, per_row, vk);
        for (int64_t i = 0; i < per_row; i++) {
            int64_t lo = 0, hi = m; /* the first place where seq > v (right) or seq >= v */
            while (lo < hi) {
                int64_t mid = lo + (hi - lo) / 2;
                bool before = a->right ? sk[mid] <= vk[i] : sk[mid] < vk[i];
                if (before) lo = mid + 1;
                else hi = mid;
            }
            if (out[0]->dtype == EM_DTYPE_I32) ((int32_t *)em_tensor_data(out[0]))[r * per_row + i] = (int32_t)lo;
            else ((int64_t *)em_tensor_data(out[0]))[r * per_row + i] = lo;
        }
    }
    em_free(sk);
    em_free(vk);
    em_tensor_release(seq);
    em_tensor_release(v);
    return st;
}

/* ---- bincount ---- */

em_status cpu_bincount(em_op op, em_tensor *const *in, int n_in, const em_attrs *a, em_tensor **out) {
    (void)op;
    em_tensor *x = em_converted(in[0], EM_DTYPE_I64);
    em_dtype odt = n_in == 2 ? (in[1]->dtype == EM_DTYPE_F32 ? EM_DTYPE_F32 : EM_DTYPE_F64) : EM_DTYPE_I64;
    em_tensor *w = n_in == 2 ? em_converted(in[1], odt) : NULL;
    if (!x || (n_in == 2 && !w)) {
        em_tensor_release(x);
        return em_last_status();
    }
    const int64_t *v = em_tensor_data(x);
    int64_t n = x->numel, bins = a->minlength;
    em_status st = EM_OK;
    for (int64_t i = 0; i < n && st == EM_OK; i++) {
        if (v[i] < 0)
            st = em_error(EM_ERR_VALUE, "bincount: input[%lld] = %lld; it counts non-negative integers only",
                          (long long)i, (long long)v[i]);
        else if (v[i] >= bins) bins = v[i] + 1;
    }
    if (st == EM_OK && !(out[0] = em_tensor_empty(&bins, 1, odt, in[0]->device))) st = em_last_status();
    if (st == EM_OK) {
        void *o = em_tensor_data(out[0]);
        memset(o, 0, (size_t)bins * em_dtype_size(odt));
        if (odt == EM_DTYPE_I64)
            for (int64_t i = 0; i < n; i++) ((int64_t *)o)[v[i]]++;
        else if (odt == EM_DTYPE_F32)
            for (int64_t i = 0; i < n; i++) ((float *)o)[v[i]] += ((const float *)em_tensor_data(w))[i];
        else
            for (int64_t i = 0; i < n; i++) ((double *)o)[v[i]] += ((const double *)em_tensor_data(w))[i];
    }
    em_tensor_release(x);
    em_tensor_release(w);
    return st;
}

/* ---- histc ---- */

#define HISTC(T)                                                                                   \
    do {                                                                                           \
        const T *p = em_tensor_data(d);                                                            \
        T *h = em_tensor_data(out[0]), l = (T)lo, r = (T)hi;                                       \
        for (int64_t i = 0; i < bins; i++) h[i] = 0;                                               \
        for (int64_t i = 0; i < d->numel; i++) {                                                   \
            T v = p[i];                                                                            \
            if (!(v >= l && v <= r)) continue;                                                     \
            int64_t pos = (int64_t)((v - l) * (T)bins / (r - l)); /* PyTorch's formula */          \
            h[pos < bins ? pos : bins - 1] += 1;                                                   \
        }                                                                                          \
    } while (0)

em_status cpu_histc(em_op op, em_tensor *const *in, int n_in, const em_attrs *a, em_tensor **out) {
    (void)op;
    (void)n_in;
    em_tensor *d = em_dense(in[0]);
    if (!d) return em_last_status();
    double lo = a->start, hi = a->end;
    bool f32 = d->dtype == EM_DTYPE_F32;
    if (lo == hi && d->numel) { /* the data's range */
        lo = INFINITY;
        hi = -INFINITY;
        for (int64_t i = 0; i < d->numel; i++) {
            double v = f32 ? ((const float *)em_tensor_data(d))[i] : ((const double *)em_tensor_data(d))[i];
            lo = v < lo ? v : lo;
            hi = v > hi ? v : hi;
        }
    }
    if (lo == hi) {
        lo -= 1;
        hi += 1;
    }
    if (isinf(lo) || isinf(hi) || isnan(lo) || isnan(hi)) {
        em_tensor_release(d);
        return em_error(EM_ERR_VALUE, "histc: the range of the values [%g, %g] is not finite", lo, hi);
    }
    int64_t bins = a->shape[0];
    if (f32) HISTC(float);
    else HISTC(double);
    em_tensor_release(d);
    return EM_OK;
}
