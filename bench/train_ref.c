/*
 * train_ref.c - the hand-written C limit for bench_train.py: one SGD step
 * of the MLP 784-512-512-10 (ReLU, softmax cross-entropy, mean over the
 * batch) with the same OpenBLAS sgemm calls a library must make and
 * single-pass loops for everything else. No allocation in the step: the
 * floor a library built on OpenBLAS can approach.
 *
 *   gcc -O3 -march=native -shared -fPIC train_ref.c -o libtrain_ref.so -lopenblas -lm
 */
#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    int b, d0, d1, d2, d3;
    float *w1, *b1, *w2, *b2, *w3, *b3;      /* weights (out x in), biases */
    float *g1, *gb1, *g2, *gb2, *g3, *gb3;   /* their gradients */
    float *h1, *h2, *out, *d_out, *d_h2, *d_h1;
} mlp;

static float *alloc(size_t n) { return calloc(n, sizeof(float)); }

mlp *mlp_new(int b, int d0, int d1, int d2, int d3) {
    mlp *m = calloc(1, sizeof *m);
    m->b = b, m->d0 = d0, m->d1 = d1, m->d2 = d2, m->d3 = d3;
    m->w1 = alloc((size_t)d1 * d0), m->b1 = alloc(d1), m->g1 = alloc((size_t)d1 * d0), m->gb1 = alloc(d1);
    m->w2 = alloc((size_t)d2 * d1), m->b2 = alloc(d2), m->g2 = alloc((size_t)d2 * d1), m->gb2 = alloc(d2);
    m->w3 = alloc((size_t)d3 * d2), m->b3 = alloc(d3), m->g3 = alloc((size_t)d3 * d2), m->gb3 = alloc(d3);
    m->h1 = alloc((size_t)b * d1), m->h2 = alloc((size_t)b * d2), m->out = alloc((size_t)b * d3);
    m->d_out = alloc((size_t)b * d3), m->d_h2 = alloc((size_t)b * d2), m->d_h1 = alloc((size_t)b * d1);
    srand(0);
    float *ws[3] = {m->w1, m->w2, m->w3};
    int fan[3] = {d0, d1, d2}, n[3] = {d1 * d0, d2 * d1, d3 * d2};
    for (int k = 0; k < 3; k++)
        for (int i = 0; i < n[k]; i++) ws[k][i] = ((float)rand() / RAND_MAX * 2 - 1) / sqrtf((float)fan[k]);
    return m;
}

/* out = relu?(x W^T + bias) for x (b x in) */
static void layer(int b, int in, int out, const float *x, const float *w, const float *bias, float *y,
                  int relu) {
    for (int i = 0; i < b; i++) memcpy(y + (size_t)i * out, bias, (size_t)out * sizeof *y);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, b, out, in, 1.0f, x, in, w, in, 1.0f, y, out);
    if (relu)
        for (size_t i = 0; i < (size_t)b * out; i++) y[i] = y[i] > 0 ? y[i] : 0;
}

/* gW = dy^T x, gb = column sums of dy, dx = dy W (masked by relu of x's layer) */
static void layer_back(int b, int in, int out, const float *x, const float *w, const float *dy, float *gw,
                       float *gb, float *dx, const float *x_act) {
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, out, in, b, 1.0f, dy, out, x, in, 0.0f, gw, in);
    memset(gb, 0, (size_t)out * sizeof *gb);
    for (int i = 0; i < b; i++)
        for (int j = 0; j < out; j++) gb[j] += dy[(size_t)i * out + j];
    if (!dx) return;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, b, in, out, 1.0f, dy, out, w, in, 0.0f, dx, in);
    for (size_t i = 0; i < (size_t)b * in; i++)
        if (x_act[i] <= 0) dx[i] = 0;
}

static void sgd(float *w, const float *g, size_t n, float lr) {
    for (size_t i = 0; i < n; i++) w[i] -= lr * g[i];
}

/* One step on x (b x d0) with labels y; returns the loss. */
float mlp_step(mlp *m, const float *x, const long *y, float lr) {
    int b = m->b;
    layer(b, m->d0, m->d1, x, m->w1, m->b1, m->h1, 1);
    layer(b, m->d1, m->d2, m->h1, m->w2, m->b2, m->h2, 1);
    layer(b, m->d2, m->d3, m->h2, m->w3, m->b3, m->out, 0);
    double loss = 0;
    for (int i = 0; i < b; i++) { /* softmax cross-entropy and its gradient */
        float *o = m->out + (size_t)i * m->d3, *d = m->d_out + (size_t)i * m->d3, mx = o[0];
        for (int j = 1; j < m->d3; j++) mx = o[j] > mx ? o[j] : mx;
        double s = 0;
        for (int j = 0; j < m->d3; j++) s += exp(o[j] - mx);
        loss += log(s) + mx - o[y[i]];
        for (int j = 0; j < m->d3; j++) d[j] = (float)(exp(o[j] - mx) / s) / b;
        d[y[i]] -= 1.0f / b;
    }
    layer_back(b, m->d2, m->d3, m->h2, m->w3, m->d_out, m->g3, m->gb3, m->d_h2, m->h2);
    layer_back(b, m->d1, m->d2, m->h1, m->w2, m->d_h2, m->g2, m->gb2, m->d_h1, m->h1);
    layer_back(b, m->d0, m->d1, x, m->w1, m->d_h1, m->g1, m->gb1, NULL, NULL);
    sgd(m->w1, m->g1, (size_t)m->d1 * m->d0, lr), sgd(m->b1, m->gb1, m->d1, lr);
    sgd(m->w2, m->g2, (size_t)m->d2 * m->d1, lr), sgd(m->b2, m->gb2, m->d2, lr);
    sgd(m->w3, m->g3, (size_t)m->d3 * m->d2, lr), sgd(m->b3, m->gb3, m->d3, lr);
    return (float)(loss / b);
}

/* The GEMMs of a GPT-2 block's forward alone (qkv, q k^T and weights @ v
 * per batch and head, the output projection, the two MLP layers): a floor
 * under any implementation of the block on OpenBLAS. Buffers are made once
 * by block_new. */
typedef struct {
    int b, t, c, h;
    float *x, *wqkv, *qkv, *att, *y, *wproj, *proj, *wfc, *fc, *wfc2, *out;
} block;

block *block_new(int b, int t, int c, int h) {
    block *k = calloc(1, sizeof *k);
    k->b = b, k->t = t, k->c = c, k->h = h;
    size_t bt = (size_t)b * t;
    k->x = alloc(bt * c), k->wqkv = alloc((size_t)3 * c * c), k->qkv = alloc(bt * 3 * c);
    k->att = alloc((size_t)b * h * t * t), k->y = alloc(bt * c), k->wproj = alloc((size_t)c * c);
    k->proj = alloc(bt * c), k->wfc = alloc((size_t)4 * c * c), k->fc = alloc(bt * 4 * c);
    k->wfc2 = alloc((size_t)4 * c * c), k->out = alloc(bt * c);
    return k;
}

void block_gemms(block *k) {
    int bt = k->b * k->t, c = k->c, t = k->t, hd = c / k->h;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, bt, 3 * c, c, 1, k->x, c, k->wqkv, c, 0, k->qkv, 3 * c);
    for (int b = 0; b < k->b; b++)
        for (int h = 0; h < k->h; h++) {
            const float *q = k->qkv + (size_t)b * t * 3 * c + h * hd, *kk = q + c, *v = q + 2 * c;
            float *a = k->att + ((size_t)b * k->h + h) * t * t;
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, t, t, hd, 1, q, 3 * c, kk, 3 * c, 0, a, t);
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, t, hd, t, 1, a, t, v, 3 * c, 0,
                        k->y + (size_t)b * t * c + h * hd, c);
        }
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, bt, c, c, 1, k->y, c, k->wproj, c, 0, k->proj, c);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, bt, 4 * c, c, 1, k->proj, c, k->wfc, c, 0, k->fc, 4 * c);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, bt, c, 4 * c, 1, k->fc, 4 * c, k->wfc2, 4 * c, 0, k->out, c);
}
