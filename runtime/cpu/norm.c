/*
 * norm.c - layer_norm as one op: over the trailing dims (attrs dims, the
 * last k), y = (x - mean) / sqrt(var + eps) * weight + bias, the variance
 * biased (divided by n), weight and bias optional (inputs 2 and 3).
 *
 * Each row (one element of the leading dims) is independent, so the thread
 * pool splits rows. A float32 row is read three times while it stays in
 * cache: its sum, its squared deviations from the mean (two passes, not
 * sum of squares minus square of sum, which cancels), then the output, all
 * in float lanes that add in a fixed order (the result does not depend on
 * the number of threads). An output too big for the cache is written with
 * streaming stores (ops_stream.h): no read of the output's lines before they
 * are written, and no stall when an output row lies a page from its input
 * row. Other dtypes go through a double buffer. This is
 * what lets the eager op run near memory speed, where the composition of
 * mean, var and four elementwise ops read and wrote the data eight times.
 * (Its inference: ../infer/norm.c.)
 */
#include <math.h>
#include <string.h>

#include "../kernels.h"
#include "ember/alloc.h"
#include "ember/parallel.h"
#include "ember/ops_stream.h"

typedef struct {
    const em_tensor *x, *w, *b; /* x contiguous; w, b contiguous or NULL */
    em_tensor *y;
    int64_t n; /* elements per row */
    double eps;
    em_status status;
} norm_ctx;

#define L 64 /* float lanes: four 16-float vectors, whose adds do not wait on each other */

/* Sum of v[0..n) in L lanes added pairwise, in a fixed order. */
static float lane_sum(const float *v, int64_t n, float shift, bool squares) {
    float l[L] = {0}, tail = 0.0f;
    int64_t i = 0;
    if (squares)
        for (; i + L <= n; i += L)
            for (int k = 0; k < L; k++) l[k] += (v[i + k] - shift) * (v[i + k] - shift);
    else
        for (; i + L <= n; i += L)
            for (int k = 0; k < L; k++) l[k] += v[i + k];
    for (; i < n; i++) tail += squares ? (v[i] - shift) * (v[i] - shift) : v[i];
    for (int w = L / 2; w > 0; w /= 2)
        for (int k = 0; k < w; k++) l[k] += l[k + w];
    return l[0] + tail;
}

/* y[0..len) = (x - mean) * rstd * w + b, w and b optional. */
static inline void normalize(const float *x, const float *w, const float *b, float mean, float rstd,
                             float *restrict y, int64_t len) {
    if (w && b)
        for (int64_t i = 0; i < len; i++) y[i] = (x[i] - mean) * rstd * w[i] + b[i];
    else if (w)
        for (int64_t i = 0; i < len; i++) y[i] = (x[i] - mean) * rstd * w[i];
    else
        for (int64_t i = 0; i < len; i++) y[i] = (x[i] - mean) * rstd;
}

static void rows_f32(const norm_ctx *c, int64_t r0, int64_t r1) {
    const float *w = c->w ? em_tensor_data(c->w) : NULL, *b = c->b ? em_tensor_data(c->b) : NULL;
    int64_t n = c->n;
    bool stream = em_stream_pays((size_t)c->y->numel * sizeof(float)); /* ops_stream.h */
    for (int64_t r = r0; r < r1; r++) {
        const float *x = (const float *)em_tensor_data(c->x) + r * n;
        float *y = (float *)em_tensor_data(c->y) + r * n;
        float mean = lane_sum(x, n, 0.0f, false) / (float)n;
        float var = lane_sum(x, n, mean, true) / (float)n;
        float rstd = 1.0f / sqrtf(var + (float)c->eps);
        int64_t i = stream ? em_stream_head(y, n) : n;
        normalize(x, w, b, mean, rstd, y, i);
        for (; i + EM_STREAM_F32 <= n; i += EM_STREAM_F32) {
            float v[EM_STREAM_F32];
            normalize(x + i, w ? w + i : NULL, b ? b + i : NULL, mean, rstd, v, EM_STREAM_F32);
            em_stream_block_f32(y + i, v);
        }
        normalize(x + i, w ? w + i : NULL, b ? b + i : NULL, mean, rstd, y + i, n - i);
    }
    if (stream) em_stream_fence();
}

/* Any float dtype through a row buffer of doubles (and double math). */
static void rows_any(norm_ctx *c, int64_t r0, int64_t r1) {
    int64_t n = c->n;
    double *buf = em_malloc((size_t)(n ? n : 1) * sizeof *buf);
    if (!buf) {
        c->status = EM_ERR_NOMEM; /* (every writer says the same) */
        return;
    }
    em_dtype dt = c->x->dtype;
    size_t item = em_dtype_size(dt);
    const char *wd = c->w ? em_tensor_data(c->w) : NULL, *bd = c->b ? em_tensor_data(c->b) : NULL;
    for (int64_t r = r0; r < r1; r++) {
        const char *x = (const char *)em_tensor_data(c->x) + r * n * (int64_t)item;
        char *y = (char *)em_tensor_data(c->y) + r * n * (int64_t)item;
        double s = 0, ss = 0;
        for (int64_t i = 0; i < n; i++) s += buf[i] = em_load_f64(x + i * (int64_t)item, dt);
        double mean = s / (double)n;
        for (int64_t i = 0; i < n; i++) ss += (buf[i] - mean) * (buf[i] - mean);
        double rstd = 1.0 / sqrt(ss / (double)n + c->eps);
        for (int64_t i = 0; i < n; i++) {
            double v = (buf[i] - mean) * rstd;
            if (wd) v *= em_load_f64(wd + i * (int64_t)item, dt);
            if (bd) v += em_load_f64(bd + i * (int64_t)item, dt);
            em_store_f64(y + i * (int64_t)item, dt, v);
        }
    }
    em_free(buf);
}

static void rows_task(void *arg, int64_t r0, int64_t r1) {
    norm_ctx *c = arg;
    if (c->x->dtype == EM_DTYPE_F32)
        rows_f32(c, r0, r1);
    else
        rows_any(c, r0, r1);
}

em_status cpu_layer_norm(em_op op, em_tensor *const *in, int n_in, const em_attrs *a, em_tensor **out) {
    (void)op;
    em_tensor *x = em_dense(in[0]), *w = n_in > 1 ? em_dense(in[1]) : NULL, *b = n_in > 2 ? em_dense(in[2]) : NULL;
    norm_ctx c = {x, w, b, out[0], 1, a->value, EM_OK};
    if (!x || (n_in > 1 && !w) || (n_in > 2 && !b)) c.status = em_last_status();
    for (int i = 0; i < a->n_dims; i++) c.n *= in[0]->shape[a->dims[i]];
    int64_t rows = c.n ? in[0]->numel / c.n : 0;
    if (c.status == EM_OK && rows) em_parallel_for(rows, EM_GRAIN_ELEMENTWISE / (c.n * 4) + 1, rows_task, &c);
    em_tensor_release(x);
    em_tensor_release(w);
    em_tensor_release(b);
    return c.status == EM_OK ? EM_OK : em_error(c.status, "layer_norm: out of memory");
}
