/*
 * random.h - the random generator: counter-based Philox4x32-10.
 *
 * State is (seed, offset). Each random op reserves a range of Philox
 * counters and derives element i from counter offset + i / lanes, so results
 * are reproducible and independent of the number of threads, and the same
 * on every device that implements Philox.
 */
#ifndef EMBER_RANDOM_H
#define EMBER_RANDOM_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct em_rng_state {
    uint64_t seed;
    uint64_t offset; /* next unused Philox counter */
} em_rng_state;

/* The seed a fresh process starts from (a fixed value, like PyTorch's). */
#define EM_DEFAULT_SEED 67280421310721ULL

void em_manual_seed(uint64_t seed);
em_rng_state em_rng_get_state(void);
void em_rng_set_state(em_rng_state s);
/* Reserves `n` counters; returns the state to generate them from. */
em_rng_state em_rng_reserve(uint64_t n);

/* One Philox4x32-10 block: four 32-bit words for (key, counter). */
void em_philox(uint64_t key, uint64_t counter, uint32_t out[4]);

#ifdef __cplusplus
}
#endif
#endif
