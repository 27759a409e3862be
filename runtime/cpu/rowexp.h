/*
 * rowexp.h - the two halves of a float32 row's softmax, shared by softmax
 * and log_softmax (scan.c) and logsumexp (reduce.c): the row's max, then
 * the sum of exp(x - max) in float lanes added in a fixed order, so the
 * result does not depend on the number of threads and the three ops agree
 * to the bit on the same row.
 */
#ifndef EMBER_CPU_ROWEXP_H
#define EMBER_CPU_ROWEXP_H

#include "ember/ops_math.h"
#include "ember/ops_fold.h"

/* The max of x[0..n), NaN if any element is NaN, -inf for an empty row. */
static inline float row_max_f32(const float *x, int64_t n) {
    return (float)em_fold_max_run_f32(x, n, false, -INFINITY); /* (ops_fold.h: amax's own fold) */
}

#define ROWEXP_LANES 16 /* sum lanes: two AVX2 vectors, or one AVX-512 vector */

/* The sum of exp(x[i] - m), each term also stored to e[i] when e is not
 * NULL (softmax keeps them). Two loops without a branch inside: both
 * vectorise. */
static inline float row_sumexp_f32(const float *restrict x, float *restrict e, int64_t n, float m) {
    float l[ROWEXP_LANES] = {0}, sum = 0.0f;
    int64_t i = 0;
    if (e) {
        for (; i + ROWEXP_LANES <= n; i += ROWEXP_LANES)
            for (int k = 0; k < ROWEXP_LANES; k++) l[k] += e[i + k] = sc_exp_f32(x[i + k] - m);
        for (; i < n; i++) sum += e[i] = sc_exp_f32(x[i] - m);
    } else {
        for (; i + ROWEXP_LANES <= n; i += ROWEXP_LANES)
            for (int k = 0; k < ROWEXP_LANES; k++) l[k] += sc_exp_f32(x[i + k] - m);
        for (; i < n; i++) sum += sc_exp_f32(x[i] - m);
    }
    for (int w = ROWEXP_LANES / 2; w > 0; w /= 2) /* (pairwise, in a fixed order) */
        for (int k = 0; k < w; k++) l[k] += l[k + w];
    return sum + l[0];
}

#endif
