/*
 * sort.h - the order keys sort.c sorts by, for the other kernels that must
 * agree with it (unique, searchsorted: runtime/cpu/bucket.c).
 */
#ifndef EMBER_CPU_SORT_H
#define EMBER_CPU_SORT_H

#include <stdint.h>
#include <string.h>

#include "ember/tensor.h"

/* Copies one element of `size` bytes (1, 2, 4 or 8). */
static inline void em_copy_elem(char *dst, const char *src, size_t size) {
    switch (size) {
    case 1: *dst = *src; break;
    case 2: memcpy(dst, src, 2); break;
    case 4: memcpy(dst, src, 4); break;
    default: memcpy(dst, src, 8); break;
    }
}

/* An order key is an unsigned integer that compares as PyTorch orders
 * values of dtype dt: floats with every NaN above +inf and equal to each
 * other, -0 equal to 0; integers and bools by value. 32 bits for every
 * dtype but int64 and float64 (64). */
int em_order_key_bits(em_dtype dt);
/* The key every NaN of a float dtype has. */
uint64_t em_order_nan_key(em_dtype dt);
/* keys[j] = the key of element j of the n at p, st elements apart. */
void em_order_keys(em_dtype dt, const void *p, int64_t st, int64_t n, uint64_t *keys);
/* x's elements (in row-major order) sorted, stably: their keys and their
 * flat indices, new arrays of x->numel (em_free them). */
em_status em_sort_flat(em_tensor *x, uint64_t **keys, int64_t **order);

#endif
