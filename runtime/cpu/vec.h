/*
 * vec.h - the float vectors of the hand-tiled kernels (conv_direct.c,
 * conv_last.c): GCC's vector extension at the width the build targets (16
 * floats with AVX-512, 8 with AVX2, 4 otherwise), with loads and stores
 * that make no alignment promise. Files that use them are built with
 * -ffp-contract=fast, so that their multiply-adds become FMAs.
 */
#ifndef EMBER_CPU_VEC_H
#define EMBER_CPU_VEC_H

#include <string.h>

#if defined(__AVX512F__)
#define VL 16
#elif defined(__AVX2__)
#define VL 8
#else
#define VL 4
#endif

typedef float vf __attribute__((vector_size(VL * sizeof(float))));

static inline vf vload(const float *p) {
    vf v;
    memcpy(&v, p, sizeof v);
    return v;
}

static inline void vstore(float *p, vf v) { memcpy(p, &v, sizeof v); }

/* A load kept in a register: gcc otherwise folds a value used by several
 * multiply-adds into each of them as a memory operand, loading it again
 * per use (28 loads per 24 FMAs in conv_weight's tile instead of 10). */
static inline vf vload_reg(const float *p) {
    vf v = vload(p);
#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
    __asm__("" : "+v"(v));
#endif
    return v;
}

#endif
