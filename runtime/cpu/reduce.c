/*
 * reduce.c - sum and mean over any list of dims.
 *
 * The input's dims split into kept dims K (the output's, in order) and
 * reduced dims R; each group is coalesced. Two strategies:
 *   rows:    each output sums its R-space; the R-space is cut into fixed
 *            blocks of BLOCK elements whose partial sums are added in order,
 *            so results do not depend on the number of threads;
 *   columns: when K's innermost dim is contiguous and R's is not (sum over
 *            dim 0 of a matrix), tiles of adjacent outputs accumulate whole
 *            rows at a time, which vectorises and streams memory once.
 * float32 and float64 accumulate in double; integers and bool in int64
 * (wrapping), as PyTorch's sum promotes them to int64.
 */
#include <string.h>

#include "../kernels.h"
#include "ember/alloc.h"
#include "ember/parallel.h"

#define BLOCK 65536
#define TILE 256

typedef union {
    double f;
    int64_t i;
} acc_t;

typedef struct {
    const char *base;
    em_dtype dt;
    bool int_acc;
    int nk, nr;
    int64_t kshape[EM_MAX_DIMS], kstride[EM_MAX_DIMS];
    int64_t rshape[EM_MAX_DIMS], rstride[EM_MAX_DIMS];
    int64_t knumel, rnumel, nblocks;
    acc_t *partial; /* rows strategy: knumel * nblocks */
    em_tensor *out;
    bool mean;
} plan_t;

/* Sum in double of n floats at p with `stride` (elements), unrolled into
 * independent accumulators so the compiler vectorises the contiguous case
 * while the order of additions stays fixed. */
#define SUM_FLOAT(T, sfx)                                                                          \
    static double sum_float_##sfx(const char *p, int64_t stride, int64_t n) {                     \
        const T *x = (const T *)p;                                                                 \
        double a[8] = {0};                                                                         \
        int64_t i = 0;                                                                             \
        if (stride == 1)                                                                           \
            for (; i + 8 <= n; i += 8)                                                             \
                for (int j = 0; j < 8; j++) a[j] += x[i + j];                                      \
        for (; i < n; i++) a[0] += x[i * stride];                                                  \
        return ((a[0] + a[1]) + (a[2] + a[3])) + ((a[4] + a[5]) + (a[6] + a[7]));                 \
    }
SUM_FLOAT(float, f32)
SUM_FLOAT(double, f64)

/* Sum of n elements at p with `stride` (elements), in the accumulator type. */
static acc_t run_sum(em_dtype dt, const char *p, int64_t stride, int64_t n) {
    acc_t r;
    switch (dt) {
    case EM_DTYPE_F32: r.f = sum_float_f32(p, stride, n); return r;
    case EM_DTYPE_F64: r.f = sum_float_f64(p, stride, n); return r;
    case EM_DTYPE_I64: {
        const int64_t *x = (const int64_t *)p;
        uint64_t a = 0;
        for (int64_t i = 0; i < n; i++) a += (uint64_t)x[i * stride];
        r.i = (int64_t)a;
        return r;
    }
    default: {
        const bool *x = (const bool *)p;
        int64_t a = 0;
        for (int64_t i = 0; i < n; i++) a += x[i * stride];
        r.i = a;
        return r;
    }
    }
}

static void acc_add(bool int_acc, acc_t *a, acc_t b) {
    if (int_acc)
        a->i = (int64_t)((uint64_t)a->i + (uint64_t)b.i);
    else
        a->f += b.f;
}

/* Element offset of linear index `lin` in a coalesced group. */
static int64_t group_offset(const int64_t *shape, const int64_t *stride, int n, int64_t lin) {
    int64_t off = 0;
    for (int d = n - 1; d >= 0; d--) {
        off += (lin % shape[d]) * stride[d];
        lin /= shape[d];
    }
    return off;
}

/* Sum over R-linear range [rb, re) for the output whose kept offset is koff. */
static acc_t reduce_range(const plan_t *p, int64_t koff, int64_t rb, int64_t re) {
    acc_t acc = {0};
    size_t item = em_dtype_size(p->dt);
    if (p->nr == 0) { /* nothing reduced: a copy */
        return run_sum(p->dt, p->base + koff * (int64_t)item, 1, 1);
    }
    int last = p->nr - 1;
    int64_t inner = p->rshape[last];
    for (int64_t pos = rb; pos < re;) {
        int64_t j = pos % inner, n = inner - j;
        if (n > re - pos) n = re - pos;
        int64_t off = koff + group_offset(p->rshape, p->rstride, p->nr, pos);
        acc_add(p->int_acc, &acc, run_sum(p->dt, p->base + off * (int64_t)item, p->rstride[last], n));
        pos += n;
    }
    return acc;
}

static void store(const plan_t *p, int64_t o, acc_t acc) {
    void *d = em_tensor_data(p->out);
    double cnt = (double)p->rnumel;
    switch (p->out->dtype) {
    case EM_DTYPE_F32: ((float *)d)[o] = (float)(p->mean ? acc.f / cnt : acc.f); break;
    case EM_DTYPE_F64: ((double *)d)[o] = p->mean ? acc.f / cnt : acc.f; break;
    case EM_DTYPE_I64: ((int64_t *)d)[o] = acc.i; break;
    default: ((bool *)d)[o] = acc.i != 0; break;
    }
}

static void rows_task(void *arg, int64_t b, int64_t e) {
    plan_t *p = arg;
    for (int64_t t = b; t < e; t++) {
        int64_t o = t / p->nblocks, blk = t % p->nblocks;
        int64_t koff = group_offset(p->kshape, p->kstride, p->nk, o);
        int64_t rb = blk * BLOCK, re = rb + BLOCK < p->rnumel ? rb + BLOCK : p->rnumel;
        acc_t a = reduce_range(p, koff, rb, re);
        if (p->nblocks == 1)
            store(p, o, a);
        else
            p->partial[t] = a;
    }
}

/* columns: tiles of TILE adjacent outputs along K's contiguous inner dim. */
static void columns_task(void *arg, int64_t b, int64_t e) {
    plan_t *p = arg;
    int64_t kin = p->kshape[p->nk - 1], tiles = (kin + TILE - 1) / TILE;
    size_t item = em_dtype_size(p->dt);
    for (int64_t t = b; t < e; t++) {
        int64_t ko = t / tiles, k0 = (t % tiles) * TILE;
        int64_t len = kin - k0 < TILE ? kin - k0 : TILE;
        int64_t koff = group_offset(p->kshape, p->kstride, p->nk - 1, ko) + k0;
        acc_t acc[TILE];
        memset(acc, 0, sizeof acc);
        for (int64_t r = 0; r < p->rnumel; r++) {
            const char *row =
                p->base + (koff + group_offset(p->rshape, p->rstride, p->nr, r)) * (int64_t)item;
            switch (p->dt) {
            case EM_DTYPE_F32:
                for (int64_t j = 0; j < len; j++) acc[j].f += ((const float *)row)[j];
                break;
            case EM_DTYPE_F64:
                for (int64_t j = 0; j < len; j++) acc[j].f += ((const double *)row)[j];
                break;
            case EM_DTYPE_I64:
                for (int64_t j = 0; j < len; j++)
                    acc[j].i = (int64_t)((uint64_t)acc[j].i + (uint64_t)((const int64_t *)row)[j]);
                break;
            default:
                for (int64_t j = 0; j < len; j++) acc[j].i += ((const bool *)row)[j];
                break;
            }
        }
        int64_t o0 = ko * kin + k0;
        for (int64_t j = 0; j < len; j++) store(p, o0 + j, acc[j]);
    }
}

/* Gathers the given dims of x into shape/stride and coalesces them. */
static int group_dims(const em_tensor *x, const int *dims, int n, int64_t *shape, int64_t *stride) {
    int64_t st[1][EM_MAX_DIMS];
    for (int i = 0; i < n; i++) {
        shape[i] = x->shape[dims[i]];
        st[0][i] = x->strides[dims[i]];
    }
    int m = em_coalesce_dims(shape, n, st, 1);
    for (int i = 0; i < m; i++) stride[i] = st[0][i];
    return m;
}

em_status cpu_reduce(em_op op, em_tensor *const *in, const em_attrs *attrs, em_tensor **out) {
    em_tensor *x = in[0];
    plan_t p;
    memset(&p, 0, sizeof p);
    p.base = em_tensor_data(x);
    p.dt = x->dtype;
    p.int_acc = !em_dtype_is_float(x->dtype);
    p.out = out[0];
    p.mean = op == EM_OP_MEAN;

    bool red[EM_MAX_DIMS] = {false};
    for (int i = 0; i < attrs->n_dims; i++) red[attrs->dims[i]] = true;
    int kd[EM_MAX_DIMS], rd[EM_MAX_DIMS], nk = 0, nr = 0;
    for (int d = 0; d < x->ndim; d++) {
        if (red[d])
            rd[nr++] = d;
        else
            kd[nk++] = d;
    }
    p.nk = group_dims(x, kd, nk, p.kshape, p.kstride);
    p.nr = group_dims(x, rd, nr, p.rshape, p.rstride);
    p.knumel = out[0]->numel;
    p.rnumel = 1;
    for (int i = 0; i < nr; i++) p.rnumel *= x->shape[rd[i]];
    if (p.knumel == 0) return EM_OK;
    if (p.rnumel == 0) { /* empty reduction: 0 for sum, nan for mean */
        acc_t z = {0};
        if (p.mean) z.f = 0.0 / 0.0;
        for (int64_t o = 0; o < p.knumel; o++) store(&p, o, z);
        return EM_OK;
    }

    bool columns = p.nk > 0 && p.nr > 0 && p.kstride[p.nk - 1] == 1 && p.rstride[p.nr - 1] != 1;
    if (columns) {
        int64_t kin = p.kshape[p.nk - 1], tiles = (kin + TILE - 1) / TILE;
        int64_t tasks = (p.knumel / kin) * tiles;
        int64_t grain = (EM_GRAIN_ELEMENTWISE / (p.rnumel * TILE)) + 1;
        em_parallel_for(tasks, grain, columns_task, &p);
        return EM_OK;
    }
    p.nblocks = (p.rnumel + BLOCK - 1) / BLOCK;
    int64_t tasks = p.knumel * p.nblocks;
    if (p.nblocks > 1) {
        p.partial = em_malloc((size_t)tasks * sizeof *p.partial);
        if (!p.partial) return EM_ERR_NOMEM;
    }
    int64_t per_task = p.rnumel < BLOCK ? p.rnumel : BLOCK;
    em_parallel_for(tasks, EM_GRAIN_ELEMENTWISE / per_task + 1, rows_task, &p);
    if (p.nblocks > 1) {
        for (int64_t o = 0; o < p.knumel; o++) {
            acc_t a = p.partial[o * p.nblocks];
            for (int64_t b = 1; b < p.nblocks; b++) acc_add(p.int_acc, &a, p.partial[o * p.nblocks + b]);
            store(&p, o, a);
        }
        em_free(p.partial);
    }
    return EM_OK;
}
