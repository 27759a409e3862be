/*
 * random.c - the Philox generator and the rand/randn kernels.
 *
 * rand: float32 takes 24 bits per element (4 elements per block), float64
 * 53 bits (2 per block); values lie in [0, 1). randn: Box-Muller on one
 * block per pair of elements (cos for the first, sin for the second).
 */
#include <math.h>
#include <pthread.h>

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

void em_philox(uint64_t key, uint64_t counter, uint32_t out[4]) {
    uint32_t c0 = (uint32_t)counter, c1 = (uint32_t)(counter >> 32), c2 = 0, c3 = 0;
    uint32_t k0 = (uint32_t)key, k1 = (uint32_t)(key >> 32);
    for (int r = 0; r < 10; r++) {
        uint64_t p0 = (uint64_t)0xD2511F53u * c0, p1 = (uint64_t)0xCD9E8D57u * c2;
        uint32_t n0 = (uint32_t)(p1 >> 32) ^ c1 ^ k0, n2 = (uint32_t)(p0 >> 32) ^ c3 ^ k1;
        c1 = (uint32_t)p1;
        c3 = (uint32_t)p0;
        c0 = n0;
        c2 = n2;
        k0 += 0x9E3779B9u;
        k1 += 0xBB67AE85u;
    }
    out[0] = c0;
    out[1] = c1;
    out[2] = c2;
    out[3] = c3;
}

static inline double u53(uint32_t hi, uint32_t lo) {
    return (double)((((uint64_t)hi << 32) | lo) >> 11) * 0x1p-53;
}
static inline float u24(uint32_t x) { return (float)(x >> 8) * 0x1p-24f; }

typedef struct {
    em_rng_state s;
    em_op op;
    em_dtype dt;
    void *out;
    int64_t per_block;
} rng_ctx;

static void fill_range(void *arg, int64_t b, int64_t e) {
    const rng_ctx *c = arg;
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
        } else if (c->dt == EM_DTYPE_F32) {
            float u1 = 1.0f - u24(w[0]), u2 = u24(w[1]); /* u1 in (0, 1] */
            float r = sqrtf(-2.0f * logf(u1)), t = 6.28318530717958648f * u2;
            ((float *)c->out)[i] = lane ? r * sinf(t) : r * cosf(t);
        } else {
            double u1 = 1.0 - u53(w[0], w[1]), u2 = u53(w[2], w[3]);
            double r = sqrt(-2.0 * log(u1)), t = 6.28318530717958647692 * u2;
            ((double *)c->out)[i] = lane ? r * sin(t) : r * cos(t);
        }
    }
}

/* randint: low + floor(u * (high - low)) from 53 random bits; randperm: a
 * Fisher-Yates shuffle driven by one Philox stream, sequential (so the same
 * seed gives the same permutation at any thread count). */
static em_status random_ints(em_op op, const em_attrs *a, em_tensor *t) {
    int64_t n = t->numel;
    em_tensor *v = em_tensor_empty(t->shape, t->ndim, EM_DTYPE_I64, t->device);
    if (!v) return em_last_status();
    int64_t *y = em_tensor_data(v);
    em_rng_state s = em_rng_reserve((uint64_t)((n + 1) / 2 + 1));
    uint32_t w[4];
    if (op == EM_OP_RANDINT) {
        double low = a->start, span = a->end - a->start;
        for (int64_t i = 0; i < n; i++) {
            em_philox(s.seed, s.offset + (uint64_t)i / 2, w);
            double u = u53(w[2 * (i % 2)], w[2 * (i % 2) + 1]);
            y[i] = (int64_t)low + (int64_t)floor(u * span);
        }
    } else {
        for (int64_t i = 0; i < n; i++) y[i] = i;
        for (int64_t i = n - 1; i > 0; i--) {
            em_philox(s.seed, s.offset + (uint64_t)i / 2, w);
            int64_t j = (int64_t)floor(u53(w[2 * (i % 2)], w[2 * (i % 2) + 1]) * (double)(i + 1));
            int64_t tmp = y[i];
            y[i] = y[j];
            y[j] = tmp;
        }
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
