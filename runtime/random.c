/*
 * random.c - the Philox generator and the rand/randn kernels.
 *
 * rand: float32 takes 24 bits per element (4 elements per block), float64
 * 53 bits (2 per block); values lie in [0, 1). randn: Box-Muller on one
 * block per pair of elements (cos for the first, sin for the second). The
 * arithmetic is ops_random.h's, which the CUDA code generator compiles too.
 */
#include <math.h>
#include <pthread.h>

#include "ember/alloc.h"
#include "ember/ops_math.h"
#include "ember/ops_random.h"
#include "ember/parallel.h"
#include "ember/random.h"
#include "kernels.h"

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static em_rng_state state = {EM_DEFAULT_SEED, 0};

void em_manual_seed(uint64_t seed) {
    pthread_mutex_lock(&lock);
    state.seed = seed;
    state.offset = 0;
    pthread_mutex_unlock(&lock);
}

em_rng_state em_rng_get_state(void) {
    pthread_mutex_lock(&lock);
    em_rng_state s = state;
    pthread_mutex_unlock(&lock);
    return s;
}

void em_rng_set_state(em_rng_state s) {
    pthread_mutex_lock(&lock);
    state = s;
    pthread_mutex_unlock(&lock);
}

em_rng_state em_rng_reserve(uint64_t n) {
    pthread_mutex_lock(&lock);
    em_rng_state s = state;
    state.offset += n;
    pthread_mutex_unlock(&lock);
    return s;
}

void em_philox(uint64_t key, uint64_t counter, uint32_t out[4]) { em_sc_philox(key, counter, out); }

static inline double u53(uint32_t hi, uint32_t lo) { return em_sc_u53(hi, lo); }
static inline float u24(uint32_t x) { return em_sc_u24(x); }

typedef struct {
    em_rng_state s;
    em_op op;
    em_dtype dt;
    void *out;
    int64_t per_block;
    int64_t low; /* randint */
    double span;
} rng_ctx;

/* randperm's swap targets: j[i] uniform in [0, i]. */
static void perm_targets(void *arg, int64_t b, int64_t e) {
    const rng_ctx *c = arg;
    int64_t *j = c->out;
    uint32_t w[4];
    for (int64_t i = b; i < e; i++) {
        em_philox(c->s.seed, c->s.offset + (uint64_t)i / 2, w);
        j[i] = (int64_t)floor(u53(w[2 * (i % 2)], w[2 * (i % 2) + 1]) * (double)(i + 1));
    }
}

/* Element i takes lane i % per_block of Philox block i / per_block, so any
 * split of the range gives the same numbers. float32 normals run in chunks:
 * the Philox words first, then Box-Muller over whole arrays with
 * ops_math.h's vectorised log, sin and cos. */
#define RCHUNK 256 /* elements per chunk (even) */

static void normals_f32(const rng_ctx *c, int64_t b, int64_t e) {
    em_sc_u32 w0[RCHUNK / 2], w1[RCHUNK / 2];
    float cs[RCHUNK / 2], sn[RCHUNK / 2];
    float *out = c->out;
    for (int64_t c0 = b & ~(int64_t)1; c0 < e; c0 += RCHUNK) {
        int64_t blocks = (e - c0 + 1) / 2 < RCHUNK / 2 ? (e - c0 + 1) / 2 : RCHUNK / 2;
        uint64_t first = (uint64_t)c0 / 2;
        for (int64_t k = 0; k < blocks; k++) {
            uint32_t w[4];
            em_philox(c->s.seed, c->s.offset + first + (uint64_t)k, w);
            w0[k] = w[0];
            w1[k] = w[1];
        }
        for (int64_t k = 0; k < blocks; k++) em_sc_normal_pair_f32(w0[k], w1[k], &cs[k], &sn[k]);
        for (int64_t k = 0; k < blocks; k++) {
            int64_t i = c0 + 2 * k;
            if (i >= b && i < e) out[i] = cs[k];
            if (i + 1 >= b && i + 1 < e) out[i + 1] = sn[k];
        }
    }
}

static void fill_range(void *arg, int64_t b, int64_t e) {
    const rng_ctx *c = arg;
    if (c->op == EM_OP_RANDN && c->dt == EM_DTYPE_F32) {
        normals_f32(c, b, e);
        return;
    }
    uint32_t w[4];
    uint64_t have = UINT64_MAX;
    for (int64_t i = b; i < e; i++) {
        uint64_t blk = (uint64_t)i / (uint64_t)c->per_block;
        int lane = (int)((uint64_t)i % (uint64_t)c->per_block);
        if (blk != have) {
            em_philox(c->s.seed, c->s.offset + blk, w);
            have = blk;
        }
        if (c->op == EM_OP_RAND) {
            if (c->dt == EM_DTYPE_F32)
                ((float *)c->out)[i] = u24(w[lane]);
            else
                ((double *)c->out)[i] = u53(w[2 * lane], w[2 * lane + 1]);
        } else if (c->op == EM_OP_RANDINT) {
            double u = u53(w[2 * lane], w[2 * lane + 1]);
            ((int64_t *)c->out)[i] = c->low + (int64_t)floor(u * c->span);
        } else { /* float64 normals */
            ((double *)c->out)[i] = em_sc_normal_f64(w, lane);
        }
    }
}

/* randint: low + floor(u * (high - low)) from 53 random bits, in parallel;
 * randperm: a Fisher-Yates shuffle whose swap targets are drawn first (in
 * parallel), then applied in order (so the same seed gives the same
 * permutation at any thread count). */
static em_status random_ints(em_op op, const em_attrs *a, em_tensor *t) {
    int64_t n = t->numel;
    em_tensor *v = em_tensor_empty(t->shape, t->ndim, EM_DTYPE_I64, t->device);
    if (!v) return em_last_status();
    int64_t *y = em_tensor_data(v);
    rng_ctx c = {.op = EM_OP_RANDINT, .dt = EM_DTYPE_I64, .out = y, .per_block = 2};
    c.s = em_rng_reserve((uint64_t)((n + 1) / 2 + 1));
    if (op == EM_OP_RANDINT) {
        c.low = (int64_t)a->start;
        c.span = a->end - a->start;
        em_parallel_for(n, EM_GRAIN_ELEMENTWISE / 8, fill_range, &c);
    } else {
        int64_t *j = em_malloc((size_t)(n ? n : 1) * sizeof *j);
        if (!j) {
            em_tensor_release(v);
            return EM_ERR_NOMEM;
        }
        c.out = j; /* j[i] = floor(u_i * (i + 1)): randint with span i + 1, by element */
        c.op = EM_OP_RANDPERM;
        em_parallel_for(n, EM_GRAIN_ELEMENTWISE / 8, perm_targets, &c);
        for (int64_t i = 0; i < n; i++) y[i] = i;
        for (int64_t i = n - 1; i > 0; i--) {
            int64_t tmp = y[i];
            y[i] = y[j[i]];
            y[j[i]] = tmp;
        }
        em_free(j);
    }
    em_status st = em_copy_into(t, v);
    em_tensor_release(v);
    return st;
}

em_status cpu_random(em_op op, em_tensor *const *in, int n_in, const em_attrs *attrs, em_tensor **out) {
    if (op == EM_OP_RANDINT || op == EM_OP_RANDPERM) return random_ints(op, attrs, out[0]);
    (void)in;
    (void)attrs;
    if (em_dtype_is_half(out[0]->dtype)) { /* drawn in float32, then rounded */
        em_tensor *f = em_tensor_empty(out[0]->shape, out[0]->ndim, EM_DTYPE_F32, out[0]->device);
        if (!f) return em_last_status();
        em_tensor *tmp[1] = {f};
        em_status st = cpu_random(op, in, n_in, attrs, tmp);
        if (st == EM_OK) st = em_copy_into(out[0], f);
        em_tensor_release(f);
        return st;
    }
    em_tensor *t = out[0];
    rng_ctx c = {.op = op, .dt = t->dtype, .out = em_tensor_data(t)};
    c.per_block = op == EM_OP_RANDN ? 2 : t->dtype == EM_DTYPE_F32 ? 4 : 2;
    c.s = em_rng_reserve((uint64_t)((t->numel + c.per_block - 1) / c.per_block));
    em_parallel_for(t->numel, EM_GRAIN_ELEMENTWISE / 8, fill_range, &c);
    return EM_OK;
}
