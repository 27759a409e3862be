/*
 * ops_math.h - the scalar definition of every elementwise op, written once.
 *
 * For each elementwise row of ops.def this file defines sc_<name>_<dtype>
 * for every compute dtype of the row's class, and sc_cast_<from>_<to> for
 * every pair of stored dtypes. Every backend compiles this same text:
 *   - the eager CPU kernels include it (gcc or clang, vectorised loops);
 *   - the LLVM backend compiles it to bitcode with clang at build time and
 *     inlines the functions into each fused kernel (codegen_llvm/);
 *   - the CUDA backend will hand it to NVRTC as source text.
 * So eager and compiled results agree to the last bit: no backend has its own
 * copy of the math. Keep to a C subset all three accept: no globals but one
 * read-only table (the bits of 2/pi, ops_math_trig_table.h), no libc
 * beyond <math.h>, branch-free where it matters so loops vectorise, no
 * undefined behaviour for any input (integers wrap; division by zero and
 * overflowing divisions return defined values, and the eager kernels check
 * for integer division by zero before they run). Files that include this must
 * be compiled with -ffp-contract=off (contractions would make results depend
 * on the compiler).
 *
 * float32 transcendentals are polynomial approximations that vectorise;
 * libm's scalar calls are ~40x slower here. Their worst errors against
 * double-precision libm, measured over all float32 inputs (the
 * trigonometric ones reduce every finite float exactly; tests/c/test_ops_math.c
 * re-checks a sample):
 *   exp 1.02, exp2 1.03, expm1 1.48, log 0.89, log2 1.81, log1p 2.42,
 *   sin 1.58, cos 1.56, tan 2.7, tanh 1.32, erf 2.45, sigmoid 2.71 ulp.
 * float64 uses libm. float16 and bfloat16 are computed in float32 and
 * rounded to nearest even.
 */
#ifndef EMBER_OPS_MATH_H
#define EMBER_OPS_MATH_H

#if defined(__CUDACC_RTC__) || defined(__CUDACC__)
#define EM_SC static __device__ __forceinline__
#define EM_SC_TABLE static __device__ const
typedef long long em_sc_i64;
typedef unsigned long long em_sc_u64;
typedef int em_sc_i32;
typedef unsigned int em_sc_u32;
typedef short em_sc_i16;
typedef unsigned short em_sc_u16;
typedef signed char em_sc_i8;
typedef unsigned char em_sc_u8;
static __device__ __forceinline__ float em_sc_u32_as_f32(em_sc_u32 u) { return __uint_as_float(u); }
static __device__ __forceinline__ em_sc_u32 em_sc_f32_as_u32(float f) { return __float_as_uint(f); }
/* NVRTC has no <math.h>: its two constants, as bits */
#ifndef INFINITY
#define INFINITY __int_as_float(0x7f800000)
#endif
#ifndef NAN
#define NAN __int_as_float(0x7fc00000)
#endif
#else
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
/* POSIX's Bessel functions, which strict C11 leaves undeclared */
double j0(double);
double j1(double);
double y0(double);
double y1(double);
double lgamma_r(double, int *);
/* always inlined: a call left in a loop (gcc gives up inlining in big
 * loops) keeps the loop scalar */
#define EM_SC static inline __attribute__((always_inline))
#define EM_SC_TABLE static const
typedef int64_t em_sc_i64;
typedef uint64_t em_sc_u64;
typedef int32_t em_sc_i32;
typedef uint32_t em_sc_u32;
typedef int16_t em_sc_i16;
typedef uint16_t em_sc_u16;
typedef int8_t em_sc_i8;
typedef uint8_t em_sc_u8;
EM_SC float em_sc_u32_as_f32(em_sc_u32 u) {
    union {
        em_sc_u32 u;
        float f;
    } v;
    v.u = u;
    return v.f;
}
EM_SC em_sc_u32 em_sc_f32_as_u32(float f) {
    union {
        em_sc_u32 u;
        float f;
    } v;
    v.f = f;
    return v.u;
}
#endif
#define EM_SC_BOOL bool
/* The C types of the 16-bit float dtypes (their bit patterns). */
typedef em_sc_u16 em_sc_f16;
typedef em_sc_u16 em_sc_bf16;

#define EM_SC_I64_MAX ((em_sc_i64)0x7fffffffffffffffLL)
#define EM_SC_I64_MIN (-EM_SC_I64_MAX - 1)

/* ================================================================ float16 / bfloat16 */

/* float16 bits -> float32, exactly (subnormals, inf and NaN included). */
EM_SC float em_sc_f16_to_f32(em_sc_f16 h) {
    em_sc_u32 o = (em_sc_u32)(h & 0x7fffu) << 13;
    em_sc_u32 exp = o & (0x7c00u << 13);
    em_sc_u32 normal = o + ((em_sc_u32)(127 - 15) << 23);
    em_sc_u32 special = normal + ((em_sc_u32)(128 - 16) << 23); /* inf / NaN */
    /* subnormal: let the float unit normalise it */
    float sub = em_sc_u32_as_f32(o + ((em_sc_u32)(127 - 15 + 1) << 23)) -
                em_sc_u32_as_f32((em_sc_u32)(127 - 15 + 1) << 23);
    em_sc_u32 r = exp == (0x7c00u << 13) ? special : exp == 0 ? em_sc_f32_as_u32(sub) : normal;
    return em_sc_u32_as_f32(r | ((em_sc_u32)(h & 0x8000u) << 16));
}

/* float32 -> float16 bits, rounding to nearest even; NaN stays NaN. */
EM_SC em_sc_f16 em_sc_f32_to_f16(float f) {
    em_sc_u32 x = em_sc_f32_as_u32(f);
    em_sc_u32 sign = (x >> 16) & 0x8000u;
    em_sc_u32 ax = x & 0x7fffffffu;
    /* subnormal results: align the 10 mantissa bits at the bottom with one
     * float addition (which rounds to nearest even), then subtract the bias */
    const em_sc_u32 magic = (em_sc_u32)((127 - 15) + (23 - 10) + 1) << 23;
    em_sc_u32 sub = em_sc_f32_as_u32(em_sc_u32_as_f32(ax) + em_sc_u32_as_f32(magic)) - magic;
    em_sc_u32 norm = (ax + ((em_sc_u32)(15 - 127) << 23) + 0xfffu + ((ax >> 13) & 1u)) >> 13;
    em_sc_u32 r = ax > 0x7f800000u         ? 0x7e00u /* NaN */
                  : ax >= 0x47800000u      ? 0x7c00u /* >= 65536: inf */
                  : ax < (113u << 23)      ? sub
                                           : norm;
    return (em_sc_f16)(r | sign);
}

EM_SC float em_sc_bf16_to_f32(em_sc_bf16 h) { return em_sc_u32_as_f32((em_sc_u32)h << 16); }

EM_SC em_sc_bf16 em_sc_f32_to_bf16(float f) {
    em_sc_u32 x = em_sc_f32_as_u32(f);
    em_sc_u32 rounded = (x + 0x7fffu + ((x >> 16) & 1u)) >> 16;
    return (em_sc_bf16)(f != f ? ((x >> 16) | 0x40u) : rounded);
}

/* ================================================================ float32 building blocks */

/* y * 2^n for integral n in [-150, 128], as the product of two normal
 * powers so results that land in the subnormal range round once. */
EM_SC float em_sc_ldexp_f32(float y, float n) {
    em_sc_i32 n1 = (em_sc_i32)n / 2;
    em_sc_i32 n2 = (em_sc_i32)n - n1;
    float s1 = em_sc_u32_as_f32((em_sc_u32)(n1 + 127) << 23);
    float s2 = em_sc_u32_as_f32((em_sc_u32)(n2 + 127) << 23);
    return y * s1 * s2;
}

/* e^r - 1 for |r| <= ln2/2 (degree-6 minimax, Cephes). */
EM_SC float em_sc_expm1_core(float r) {
    float p = 1.9875691500e-4f;
    p = fmaf(p, r, 1.3981999507e-3f);
    p = fmaf(p, r, 8.3334519073e-3f);
    p = fmaf(p, r, 4.1665795894e-2f);
    p = fmaf(p, r, 1.6666665459e-1f);
    p = fmaf(p, r, 5.0000001201e-1f);
    return fmaf(p * r, r, r);
}

/* exp: range reduction x = n ln2 + r, |r| <= ln2/2. Below -104 (-inf
 * included: a causal mask's) e^x rounds to +0, which is selected rather
 * than computed: the computation would underflow through subnormals, a
 * microcode assist per element on Intel cores (softmax of a masked row ran
 * four times slower). */
EM_SC float sc_exp_f32(float x) {
    bool zero = x < -104.0f;
    float xc = x > 89.0f ? 89.0f : x;
    xc = x != x || zero ? 0.0f : xc; /* keeps NaN away from the int conversion below */
    float n = rintf(xc * 1.44269504088896341f);
    float r = fmaf(-n, 0.693359375f, xc);
    r = fmaf(n, 2.12194440e-4f, r);
    float y = em_sc_ldexp_f32(em_sc_expm1_core(r) + 1.0f, n);
    return x != x ? x : zero ? 0.0f : y;
}

/* 2^x: the fraction is exact (x - rint(x)), so large x stays accurate. */
EM_SC float sc_exp2_f32(float x) {
    bool zero = x < -151.0f; /* +0, selected as in sc_exp_f32 */
    float xc = x > 129.0f ? 129.0f : x;
    xc = x != x || zero ? 0.0f : xc;
    float n = rintf(xc);
    float r = (xc - n) * 0.693147180559945309f;
    float y = em_sc_ldexp_f32(em_sc_expm1_core(r) + 1.0f, n);
    return x != x ? x : zero ? 0.0f : y;
}

/* e^x - 1: with x = n ln2 + r, e^x - 1 = 2^n (e^r - 1) + (2^n - 1), which
 * keeps full relative accuracy for every x (no cancellation near 0). */
EM_SC float sc_expm1_f32(float x) {
    bool minus_one = x < -104.0f; /* -1, selected as in sc_exp_f32 */
    float xc = x > 89.0f ? 89.0f : x;
    xc = x != x || minus_one ? 0.0f : xc;
    float n = rintf(xc * 1.44269504088896341f);
    float r = fmaf(-n, 0.693359375f, xc);
    r = fmaf(n, 2.12194440e-4f, r);
    float p = em_sc_expm1_core(r);
    float y = em_sc_ldexp_f32(p, n) + (em_sc_ldexp_f32(1.0f, n) - 1.0f);
    /* for large n the -1 is below an ulp (and 2^n alone may overflow) */
    y = n > 30.0f ? em_sc_ldexp_f32(p + 1.0f, n) - 1.0f : y;
    y = x == 0.0f ? x : y; /* (the reduction turns -0 into +0: expm1(-0) is -0) */
    return x != x ? x : minus_one ? -1.0f : y;
}

/* log(m) for m in [sqrt(1/2), sqrt(2)) written as 1 + f: degree-9 Cephes
 * polynomial; *e receives the binary exponent of x. Special inputs give
 * garbage: callers select the special results. */
EM_SC float em_sc_log_core(float x, float *e) {
    bool tiny = x < 1.17549435e-38f; /* subnormals are scaled up first */
    float xs = tiny ? x * 33554432.0f : x; /* 2^25 */
    em_sc_u32 bits = em_sc_f32_as_u32(xs);
    float ex = (float)((em_sc_i32)((bits >> 23) & 0xffu) - 126) - (tiny ? 25.0f : 0.0f);
    float m = em_sc_u32_as_f32((bits & 0x807fffffu) | 0x3f000000u); /* [0.5, 1) */
    bool lo = m < 0.707106781186547524f;
    ex = lo ? ex - 1.0f : ex;
    m = lo ? m + m - 1.0f : m - 1.0f;
    float z = m * m;
    float p = 7.0376836292e-2f;
    p = fmaf(p, m, -1.1514610310e-1f);
    p = fmaf(p, m, 1.1676998740e-1f);
    p = fmaf(p, m, -1.2420140846e-1f);
    p = fmaf(p, m, 1.4249322787e-1f);
    p = fmaf(p, m, -1.6668057665e-1f);
    p = fmaf(p, m, 2.0000714765e-1f);
    p = fmaf(p, m, -2.4999993993e-1f);
    p = fmaf(p, m, 3.3333331174e-1f);
    float y = p * m * z;
    y = fmaf(z, -0.5f, y);
    *e = ex;
    return m + y;
}

/* The IEEE results of log at 0, negatives, +inf and NaN. */
EM_SC float em_sc_log_special(float x, float r) {
    r = x == 0.0f ? -INFINITY : r;
    r = x < 0.0f ? NAN : r;
    r = x == INFINITY ? x : r;
    return x != x ? x : r;
}

EM_SC float sc_log_f32(float x) {
    float e, lm = em_sc_log_core(x, &e);
    /* e * ln2 in two parts (Cephes): the high part is exact */
    float r = fmaf(e, -2.12194440e-4f, lm);
    r = fmaf(e, 0.693359375f, r);
    return em_sc_log_special(x, r);
}

/* log2: the exponent adds exactly, so log2(2^k) == k. */
EM_SC float sc_log2_f32(float x) {
    float e, lm = em_sc_log_core(x, &e);
    return em_sc_log_special(x, fmaf(lm, 1.44269504088896341f, e));
}

/* log(1 + x) with the correction for the rounding of 1 + x (Goldberg). */
EM_SC float sc_log1p_f32(float x) {
    float u = 1.0f + x;
    float lu = sc_log_f32(u);
    float r = lu * (x / (u - 1.0f));
    r = u == 1.0f ? x : r;
    r = u == INFINITY ? u : r;
    return x == -1.0f ? -INFINITY : x < -1.0f ? NAN : x != x ? x : r;
}

/* tanh: odd polynomial near 0, 1 - 2/(exp(2|x|)+1) elsewhere. */
EM_SC float sc_tanh_f32(float x) {
    float ax = fabsf(x);
    float z = x * x;
    float p = -5.70498872745e-3f;
    p = fmaf(p, z, 2.06390887954e-2f);
    p = fmaf(p, z, -5.37397155531e-2f);
    p = fmaf(p, z, 1.33314422036e-1f);
    p = fmaf(p, z, -3.33332819422e-1f);
    float small = fmaf(p * z, x, x);
    small = x == 0.0f ? x : small; /* (-0 + +0 would be +0: tanh(-0) is -0) */
    float e = sc_exp_f32(ax + ax);
    float big = 1.0f - 2.0f / (e + 1.0f);
    big = copysignf(big, x);
    return ax < 0.625f ? small : big;
}

/* sigmoid from e = exp(-|x|) (never overflows): 1/(1+e) for x >= 0, e/(1+e)
 * below, which stays accurate down to the subnormal results. */
EM_SC float sc_sigmoid_f32(float x) {
    float e = sc_exp_f32(-fabsf(x));
    float r = 1.0f / (1.0f + e);
    return x >= 0.0f ? r : (x != x ? x : e * r);
}

/* ---- sin, cos, tan: Payne-Hanek reduction by pi/2 for every finite
 * float, then float polynomials on [-pi/4, pi/4].
 * |x| = m 2^(k-150) with m a 24-bit integer (k the biased exponent), so
 * |x| 2/pi mod 4 = m T[k] mod 4, where T[k] = (2/pi 2^(k-150)) mod 4 is
 * tabulated to ~106 bits (ops_math_trig_table.h). m T_hi is exact as a
 * double pair (fma), the rest is small; the reduced argument keeps ~80
 * absolute bits, far more than the ~2^-30 closeness of the worst float to a
 * multiple of pi/2 needs. Branch-free (a table gather), so loops vectorise. */
#include "ops_math_trig_table.h"

/* r in [-pi/4, pi/4] and the quadrant q (0..3) with |x| = r + q pi/2 (mod
 * 2pi); callers apply x's sign (sin and tan are odd, cos even). Non-finite
 * x give garbage here and NaN in the callers. */
EM_SC float em_sc_trig_reduce(float x, em_sc_i32 *q) {
    em_sc_u32 ax = em_sc_f32_as_u32(x) & 0x7fffffffu;
    em_sc_u32 k = ax >> 23;
    /* subnormals share k = 1's scale; a signed index lets gathers vectorise */
    em_sc_i32 row = (em_sc_i32)(k == 0 ? 1u : k > 254u ? 254u : k) - 1;
    double m = (double)((ax & 0x7fffffu) | (k ? 0x800000u : 0u));
    double thi = em_sc_two_over_pi_hi[row], tlo = em_sc_two_over_pi_lo[row];
    double ph = m * thi;
    double pl = fma(m, thi, -ph);         /* ph + pl == m * thi exactly */
    ph = ph - 4.0 * rint(ph * 0.25);      /* mod 4, exact: ph in [-2, 2] */
    double s = ph + pl;                   /* TwoSum: s + e == ph + pl */
    double bb = s - ph;
    double e = (ph - (s - bb)) + (pl - bb);
    double n = rint(s);
    double f = (s - n) + (e + m * tlo);   /* s - n is exact */
    *q = (em_sc_i32)n & 3;
    return (float)(f * 1.5707963267948966);
}

EM_SC float em_sc_sin_poly(float r) { /* Cephes sinf */
    float z = r * r;
    float p = fmaf(-1.9515295891e-4f, z, 8.3321608736e-3f);
    p = fmaf(p, z, -1.6666654611e-1f);
    return fmaf(p * z, r, r);
}

EM_SC float em_sc_cos_poly(float r) { /* Cephes cosf */
    float z = r * r;
    float p = fmaf(2.443315711809948e-5f, z, -1.388731625493765e-3f);
    p = fmaf(p, z, 4.166664568298827e-2f);
    return fmaf(p * z, z, fmaf(-0.5f, z, 1.0f));
}

EM_SC float sc_sin_f32(float x) {
    em_sc_i32 q;
    float r = em_sc_trig_reduce(x, &q);
    float s = em_sc_sin_poly(r), c = em_sc_cos_poly(r);
    float v = (q & 1) ? c : s;
    v = (q & 2) ? -v : v;
    v = (em_sc_f32_as_u32(x) >> 31) ? -v : v;
    return x - x == 0.0f ? v : NAN; /* inf - inf and NaN - NaN are NaN */
}

EM_SC float sc_cos_f32(float x) {
    em_sc_i32 q;
    float r = em_sc_trig_reduce(x, &q);
    float s = em_sc_sin_poly(r), c = em_sc_cos_poly(r);
    float v = (q & 1) ? s : c;
    v = ((q + 1) & 2) ? -v : v;
    return x - x == 0.0f ? v : NAN;
}

EM_SC float sc_tan_f32(float x) {
    em_sc_i32 q;
    float r = em_sc_trig_reduce(x, &q);
    float z = r * r; /* Cephes tanf */
    float p = 9.38540185543e-3f;
    p = fmaf(p, z, 3.11992232697e-3f);
    p = fmaf(p, z, 2.44301354525e-2f);
    p = fmaf(p, z, 5.34112807005e-2f);
    p = fmaf(p, z, 1.33387994085e-1f);
    p = fmaf(p, z, 3.33331568548e-1f);
    float t = fmaf(p * z, r, r);
    float v = (q & 1) ? -1.0f / t : t;
    v = (em_sc_f32_as_u32(x) >> 31) ? -v : v;
    return x - x == 0.0f ? v : NAN;
}

/* erf: x * P(x^2) below 1, 1 - exp(Q(|x| - 2.5)) (Q fits log erfc) up to 4,
 * +-1 beyond (where erf rounds to 1 in float32). Coefficients from
 * tools/fit_erf.py. */
EM_SC float sc_erf_f32(float x) {
    float ax = fabsf(x), z = x * x;
    float p = 7.933494e-05f;
    p = fmaf(p, z, -0.00080348464f);
    p = fmaf(p, z, 0.0051912186f);
    p = fmaf(p, z, -0.0268554f);
    p = fmaf(p, z, 0.11283626f);
    p = fmaf(p, z, -0.3761263f);
    p = fmaf(p, z, 1.1283792f);
    float small = x * p;
    /* (u is not clamped to 4: past it the value below is not selected, and
     * with a clamp in front of sc_exp_f32's own gcc does not vectorise the
     * eager loop, 16x slower) */
    float u = ax - 2.5f;
    float q = 1.7774614e-08f;
    q = fmaf(q, u, -4.1048512e-08f);
    q = fmaf(q, u, -1.7580898e-07f);
    q = fmaf(q, u, 1.8449596e-06f);
    q = fmaf(q, u, -1.2728678e-05f);
    q = fmaf(q, u, 7.693985e-05f);
    q = fmaf(q, u, -0.00042095053f);
    q = fmaf(q, u, 0.0021655257f);
    q = fmaf(q, u, -0.010858067f);
    q = fmaf(q, u, -0.94389373f);
    q = fmaf(q, u, -5.3526807f);
    q = fmaf(q, u, -7.806815f);
    float big = ax >= 4.0f ? 1.0f : 1.0f - sc_exp_f32(q);
    big = copysignf(big, x);
    return ax < 1.0f ? small : (x != x ? x : big);
}

/* Inverse trigonometry and erfc in float32: libm's float functions (glibc's
 * are within 1 ulp, with C's special values: atan2's signed zeros and
 * infinities as PyTorch's). Rarely hot, so no polynomials of our own. */
EM_SC float sc_atan_f32(float x) { return atanf(x); }
EM_SC float sc_asin_f32(float x) { return asinf(x); }
EM_SC float sc_acos_f32(float x) { return acosf(x); }
EM_SC float sc_erfc_f32(float x) { return erfcf(x); }
EM_SC float sc_atan2_f32(float y, float x) { return atan2f(y, x); }
/* Bessel functions: libm's double ones, rounded (PyTorch computes its
 * float32 ones in float32, 1e-7 from the exact values at best) */
EM_SC float sc_bessel_j0_f32(float x) { return (float)j0((double)x); }
EM_SC float sc_bessel_j1_f32(float x) { return (float)j1((double)x); }
EM_SC float sc_bessel_y0_f32(float x) { return (float)y0((double)x); }
EM_SC float sc_bessel_y1_f32(float x) { return (float)y1((double)x); }

/* ---- activations built from the above */

EM_SC float sc_gelu_f32(float x) { return 0.5f * x * (1.0f + sc_erf_f32(x * 0.707106781186547524f)); }
EM_SC float sc_gelu_tanh_f32(float x) {
    float inner = 0.797884560802865355f * (x + 0.044715f * x * x * x);
    return 0.5f * x * (1.0f + sc_tanh_f32(inner));
}
EM_SC float sc_silu_f32(float x) { return x * sc_sigmoid_f32(x); }
EM_SC float sc_softplus_f32(float x, float beta, float threshold) {
    float bx = beta * x;
    return bx > threshold ? x : sc_log1p_f32(sc_exp_f32(bx)) / beta;
}

/* ---- float64: libm */

EM_SC double sc_exp_f64(double x) { return exp(x); }
EM_SC double sc_exp2_f64(double x) { return exp2(x); }
EM_SC double sc_expm1_f64(double x) { return expm1(x); }
EM_SC double sc_log_f64(double x) { return log(x); }
EM_SC double sc_log2_f64(double x) { return log2(x); }
EM_SC double sc_log1p_f64(double x) { return log1p(x); }
EM_SC double sc_tanh_f64(double x) { return tanh(x); }
EM_SC double sc_sigmoid_f64(double x) {
    double e = exp(-fabs(x)), r = 1.0 / (1.0 + e);
    return x >= 0.0 ? r : (x != x ? x : e * r);
}
EM_SC double sc_sin_f64(double x) { return sin(x); }
EM_SC double sc_cos_f64(double x) { return cos(x); }
EM_SC double sc_tan_f64(double x) { return tan(x); }
EM_SC double sc_erf_f64(double x) { return erf(x); }
EM_SC double sc_atan_f64(double x) { return atan(x); }
EM_SC double sc_asin_f64(double x) { return asin(x); }
EM_SC double sc_acos_f64(double x) { return acos(x); }
EM_SC double sc_erfc_f64(double x) { return erfc(x); }
EM_SC double sc_atan2_f64(double y, double x) { return atan2(y, x); }
/* (y0 and y1 of a negative x: NaN, libm's domain error, as PyTorch's) */
EM_SC double sc_bessel_j0_f64(double x) { return j0(x); }
EM_SC double sc_bessel_j1_f64(double x) { return j1(x); }
EM_SC double sc_bessel_y0_f64(double x) { return x < 0 ? NAN : y0(x); }
EM_SC double sc_bessel_y1_f64(double x) { return x < 0 ? NAN : y1(x); }

/* The gamma family. lgamma: libm's (its global sign variable would race
 * between threads, so lgamma_r on the host). */
EM_SC double sc_lgamma_kernel_f64(double x) {
#if defined(__CUDACC_RTC__) || defined(__CUDACC__)
    return lgamma(x);
#else
    int sign;
    return lgamma_r(x, &sign);
#endif
}
#define EM_SC_PI 3.14159265358979323846
/* digamma: psi(x) = psi(x + n) - sum 1/(x + k), x + n >= 8, then
 * log y - 1/(2y) - sum B_2k / (2k y^2k); below 0 the reflection psi(x) =
 * psi(1 - x) - pi / tan(pi x), tan taken of x - nearbyint(x) so it keeps
 * its digits near the integers. -+inf at +-0, NaN at the negative
 * integers and -inf (PyTorch's). */
EM_SC double sc_digamma_kernel_f64(double x) {
    if (x == 0) return signbit(x) ? INFINITY : -INFINITY;
    if (x != x) return x;
    if (x == -INFINITY || (x < 0 && x == floor(x))) return NAN;
    double y = x < 0 ? 1.0 - x : x, recip = 0.0;
    for (int k = 0; k < 8 && y < 8.0; k++) {
        recip += 1.0 / y;
        y += 1.0;
    }
    double out = y;
    if (y != INFINITY) {
        double inv = 1.0 / y, inv2 = inv * inv;
        out = log(y) - 0.5 * inv -
              inv2 * (1.0 / 12 - inv2 * (1.0 / 120 - inv2 * (1.0 / 252 - inv2 * (1.0 / 240 - inv2 * (1.0 / 132 - inv2 * (691.0 / 32760 - inv2 * (1.0 / 12))))))) -
              recip;
    }
    return x < 0 ? out - EM_SC_PI / tan(EM_SC_PI * (x - nearbyint(x))) : out;
}
/* trigamma: psi'(x) = psi'(x + n) + sum 1/(x + k)^2 up to 12, then the
 * asymptotic series to 1/y^11; below 1/2 the reflection psi'(x) =
 * pi^2 / sin^2(pi x) - psi'(1 - x). */
EM_SC double sc_trigamma_kernel_f64(double x) {
    if (x == INFINITY) return 0.0;
    int neg = x < 0.5;
    double result = 0.0;
    if (neg) {
        double s = sin(EM_SC_PI * (x - nearbyint(x)));
        result = -(EM_SC_PI * EM_SC_PI) / (s * s);
    }
    double y = neg ? 1.0 - x : x;
    for (int k = 0; k < 12 && y < 12.0; k++) {
        result += 1.0 / (y * y);
        y += 1.0;
    }
    double inv = 1.0 / y, i2 = inv * inv;
    result += inv * (1.0 + inv * (0.5 + inv * (1.0 / 6 - i2 * (1.0 / 30 - i2 * (1.0 / 42 - i2 * (1.0 / 30 - i2 * (5.0 / 66)))))));
    return neg ? -result : result;
}
/* exp(-|x|) I_nu(x), nu 0 or 1 (odd in x for nu = 1): the power series
 * sum (x^2/4)^k / (k! (k + nu)!) up to |x| = 30, stopped once a term no
 * longer moves the sum (at most 60), then Hankel's asymptotic expansion,
 * 30 terms, which is within 1e-16 from 30 on. */
EM_SC double em_sc_scaled_i(double x, int nu) {
    if (x != x) return x;
    double ax = fabs(x), out;
    if (ax <= 30.0) {
        double q = ax * ax * 0.25, term = 1.0, total = 1.0;
        for (int k = 1; k < 60; k++) {
            term *= q / (double)(k * (k + nu)); /* (the division off the chain of products) */
            total += term;
            if (term < total * 1e-17) break;
        }
        if (nu) total = total * ax * 0.5;
        out = total * exp(-ax);
    } else if (ax == INFINITY) {
        out = 0.0;
    } else {
        double t = 1.0, total = 1.0;
        for (int k = 1; k < 30; k++) {
            t = t * ((4.0 * nu * nu - (double)((2 * k - 1) * (2 * k - 1))) / (8.0 * k)) / ax;
            total += k % 2 == 0 ? t : -t;
        }
        out = total / sqrt(2.0 * EM_SC_PI * ax);
    }
    return nu && x < 0 ? -out : out;
}
EM_SC double sc_i0e_kernel_f64(double x) { return em_sc_scaled_i(x, 0); }
EM_SC double sc_i1e_kernel_f64(double x) { return em_sc_scaled_i(x, 1); }
#undef EM_SC_PI
EM_SC float sc_i0e_kernel_f32(float x) { return (float)em_sc_scaled_i((double)x, 0); }
EM_SC float sc_i1e_kernel_f32(float x) { return (float)em_sc_scaled_i((double)x, 1); }
EM_SC float sc_lgamma_kernel_f32(float x) { return (float)sc_lgamma_kernel_f64((double)x); }
EM_SC float sc_digamma_kernel_f32(float x) { return (float)sc_digamma_kernel_f64((double)x); }
EM_SC float sc_trigamma_kernel_f32(float x) { return (float)sc_trigamma_kernel_f64((double)x); }
EM_SC double sc_gelu_f64(double x) { return 0.5 * x * (1.0 + erf(x * 0.70710678118654752440)); }
EM_SC double sc_gelu_tanh_f64(double x) {
    return 0.5 * x * (1.0 + tanh(0.79788456080286535588 * (x + 0.044715 * x * x * x)));
}
EM_SC double sc_silu_f64(double x) { return x * sc_sigmoid_f64(x); }
EM_SC double sc_softplus_f64(double x, double beta, double threshold) {
    double bx = beta * x;
    return bx > threshold ? x : log1p(exp(bx)) / beta;
}

/* ---- orthogonal polynomials of x and degree n (torch.special's): each
 * element runs its own three-term recurrence to its degree, in the
 * element's dtype, with PyTorch's branches (the closed trigonometric forms
 * of the Chebyshev polynomials for large n inside (-1, 1), their values at
 * the ends, Hermite's NaN past n = 128 in float32 and 512 in float64). The
 * degree is truncated to an integer; NaN and degrees outside int64 count
 * as negative (0), where a C cast would be undefined. Rarely hot: the loops
 * do not vectorise. Written for float64 (a macro: T is double). */

EM_SC em_sc_i64 em_sc_degree(double n) {
    return (n != n || n >= 9.2233720368547758e18 || n < -9.2233720368547758e18) ? (em_sc_i64)-1 : (em_sc_i64)n;
}

#define EM_SC_POLYNOMIALS(T, sfx, FABS, COS, SIN, ACOS)                                     \
    /* the Chebyshev recurrence r_k = 2y r_(k-1) - r_(k-2) from r_0 = 1, r_1 = first */            \
    EM_SC T em_sc_cheb_rec_##sfx(T y2, T first, em_sc_i64 n) {                                       \
        if (n == 0) return (T)1;                                                                   \
        T p = (T)1, q = first, r = first;                                                          \
        for (em_sc_i64 k = 2; k <= n && q == q; k++) {                                             \
            r = y2 * q - p;                                                                        \
            p = q;                                                                                 \
            q = r;                                                                                 \
        }                                                                                          \
        return r;                                                                                  \
    }                                                                                              \
    EM_SC T em_sc_chebyshev_polynomial_t_##sfx(T x, T nf) {                                           \
        em_sc_i64 n = em_sc_degree(nf);                                                            \
        if (n < 0) return (T)0;                                                                    \
        if (FABS(x) == (T)1) return (x > 0 || n % 2 == 0) ? (T)1 : (T)-1;                           \
        if (n > 6 && FABS(x) < (T)1) return COS((T)n * ACOS(x));                                   \
        return em_sc_cheb_rec_##sfx(x + x, x, n);                                                  \
    }                                                                                              \
    EM_SC T em_sc_chebyshev_polynomial_u_##sfx(T x, T nf) {                                           \
        em_sc_i64 n = em_sc_degree(nf);                                                            \
        if (n < 0) return (T)0;                                                                    \
        if (FABS(x) == (T)1) return (x > 0 || n % 2 == 0) ? (T)(n + 1) : -(T)(n + 1);              \
        if (n > 8 && FABS(x) < (T)1) {                                                             \
            T t = ACOS(x);                                                                         \
            if (SIN(t) != (T)0) return SIN((T)(n + 1) * t) / SIN(t);                               \
            return (T)(n + 1) * COS((T)(n + 1) * t) / x;                                           \
        }                                                                                          \
        return em_sc_cheb_rec_##sfx(x + x, x + x, n);                                              \
    }                                                                                              \
    EM_SC T em_sc_chebyshev_polynomial_v_##sfx(T x, T nf) {                                           \
        em_sc_i64 n = em_sc_degree(nf);                                                            \
        if (n < 0) return (T)0;                                                                    \
        if (FABS(x) == (T)1) {                                                                     \
            if (x > 0) return (T)1;                                                                \
            return n % 2 == 0 ? (T)(n + n + 1) : -(T)(n + n + 1);                                  \
        }                                                                                          \
        if (n > 8 && FABS(x) < (T)1) {                                                             \
            T t = ACOS(x);                                                                         \
            if (SIN(t / (T)2) != (T)1) return COS(((T)n + (T)0.5) * t) / COS(t / (T)2);            \
            return n % 2 == 0 ? (T)(n + n + 1) : -(T)(n + n + 1);                                  \
        }                                                                                          \
        return em_sc_cheb_rec_##sfx(x + x, x + x - (T)1, n);                                       \
    }                                                                                              \
    EM_SC T em_sc_chebyshev_polynomial_w_##sfx(T x, T nf) {                                           \
        em_sc_i64 n = em_sc_degree(nf);                                                            \
        if (n < 0) return (T)0;                                                                    \
        if (FABS(x) == (T)1) {                                                                     \
            if (x > 0) return (T)(n + n + 1);                                                      \
            return n % 2 == 0 ? (T)1 : (T)-1;                                                      \
        }                                                                                          \
        if (n > 8 && FABS(x) < (T)1) {                                                             \
            T t = ACOS(x);                                                                         \
            if (COS(t / (T)2) != (T)1) return SIN(((T)n + (T)0.5) * t) / SIN(t / (T)2);            \
            if (x > 0) return (T)(n + n + 1);                                                      \
            return n % 2 == 0 ? (T)1 : (T)-1;                                                      \
        }                                                                                          \
        return em_sc_cheb_rec_##sfx(x + x, x + x + (T)1, n);                                       \
    }                                                                                              \
    /* the shifted forms, on [0, 1]: y = 2x - 1 */                                                 \
    EM_SC T em_sc_shifted_chebyshev_polynomial_t_##sfx(T x, T nf) {                                   \
        em_sc_i64 n = em_sc_degree(nf);                                                            \
        T y = x + x - (T)1;                                                                        \
        if (n < 0) return (T)0;                                                                    \
        if (x == (T)1) return (T)1;                                                                \
        if (x == (T)0) return n % 2 == 0 ? (T)1 : (T)-1;                                           \
        if (n > 6 && FABS(y) < (T)1) return COS((T)n * ACOS(y));                                   \
        return em_sc_cheb_rec_##sfx(y + y, y, n);                                                  \
    }                                                                                              \
    EM_SC T em_sc_shifted_chebyshev_polynomial_u_##sfx(T x, T nf) {                                   \
        em_sc_i64 n = em_sc_degree(nf);                                                            \
        T y = x + x - (T)1;                                                                        \
        if (n < 0) return (T)0;                                                                    \
        if (x == (T)1) return (T)(n + 1);                                                          \
        if (x == (T)0) return n % 2 == 0 ? (T)(n + 1) : -(T)(n + 1);                               \
        if (n > 6 && FABS(y) < (T)1) {                                                             \
            T t = ACOS(y);                                                                         \
            if (SIN(t) != (T)0) return SIN((T)(n + 1) * t) / SIN(t);                               \
            return (T)(n + 1) * COS((T)(n + 1) * t) / y;                                           \
        }                                                                                          \
        return em_sc_cheb_rec_##sfx(y + y, y + y, n);                                              \
    }                                                                                              \
    EM_SC T em_sc_shifted_chebyshev_polynomial_v_##sfx(T x, T nf) {                                   \
        em_sc_i64 n = em_sc_degree(nf);                                                            \
        T y = x + x - (T)1;                                                                        \
        if (n < 0) return (T)0;                                                                    \
        if (x == (T)1) return (T)1;                                                                \
        if (x == (T)0) return n % 2 == 0 ? (T)(n + n + 1) : -(T)(n + n + 1);                       \
        if (n > 6 && FABS(y) < (T)1) {                                                             \
            T t = ACOS(y);                                                                         \
            if (SIN(t / (T)2) != (T)1) return COS(((T)n + (T)0.5) * t) / COS(t / (T)2);            \
            return n % 2 == 0 ? (T)(n + n + 1) : -(T)(n + n + 1);                                  \
        }                                                                                          \
        return em_sc_cheb_rec_##sfx(y + y, y + y - (T)1, n);                                       \
    }                                                                                              \
    EM_SC T em_sc_shifted_chebyshev_polynomial_w_##sfx(T x, T nf) {                                   \
        em_sc_i64 n = em_sc_degree(nf);                                                            \
        T y = x + x - (T)1;                                                                        \
        if (n < 0) return (T)0;                                                                    \
        if (x == (T)1) return (T)(n + n + 1);                                                      \
        if (x == (T)0) return n % 2 == 0 ? (T)1 : (T)-1;                                           \
        if (n > 4 && FABS(y) < (T)1) {                                                             \
            T t = ACOS(y);                                                                         \
            if (COS(t / (T)2) != (T)1) return SIN(((T)n + (T)0.5) * t) / SIN(t / (T)2);            \
            return n % 2 == 0 ? (T)1 : (T)-1;                                                      \
        }                                                                                          \
        return em_sc_cheb_rec_##sfx(y + y, y + y + (T)1, n);                                       \
    }                                                                                              \
    EM_SC T em_sc_hermite_h_##sfx(T x, T nf, em_sc_i64 limit) {                                             \
        em_sc_i64 n = em_sc_degree(nf);                                                            \
        if (n < 0) return (T)0;                                                                    \
        if (n == 0) return (T)1;                                                                   \
        if (n == 1) return x + x;                                                                  \
        if (n > limit) return (T)NAN;                                                             \
        T p = (T)1, q = x + x, r = (T)0;                                                           \
        for (em_sc_i64 k = 2; k < n + n; k += 2) {                                                 \
            r = (x + x) * q - (T)k * p;                                                            \
            p = q;                                                                                 \
            q = r;                                                                                 \
        }                                                                                          \
        return r;                                                                                  \
    }                                                                                              \
    EM_SC T em_sc_hermite_he_##sfx(T x, T nf, em_sc_i64 limit) {                                            \
        em_sc_i64 n = em_sc_degree(nf);                                                            \
        if (n < 0) return (T)0;                                                                    \
        if (n == 0) return (T)1;                                                                   \
        if (n == 1) return x;                                                                      \
        if (n > limit) return (T)NAN;                                                             \
        T p = (T)1, q = x, r = x;                                                                  \
        for (em_sc_i64 k = 1; k < n; k++) {                                                        \
            r = x * q - (T)k * p;                                                                  \
            p = q;                                                                                 \
            q = r;                                                                                 \
        }                                                                                          \
        return r;                                                                                  \
    }                                                                                              \
    EM_SC T em_sc_laguerre_polynomial_l_##sfx(T x, T nf) {                                            \
        em_sc_i64 n = em_sc_degree(nf);                                                            \
        if (n < 0) return (T)0;                                                                    \
        if (FABS(x) == (T)0 || n == 0) return (T)1;                                                \
        if (n == 1) return (T)1 - x;                                                               \
        T p = (T)1, q = (T)1 - x, r = q;                                                           \
        for (em_sc_i64 k = 1; k < n && q == q; k++) {                                              \
            r = (((T)(k + k) + ((T)1 - x)) * q - (T)k * p) / (T)(k + 1);                           \
            p = q;                                                                                 \
            q = r;                                                                                 \
        }                                                                                          \
        return r;                                                                                  \
    }                                                                                              \
    EM_SC T em_sc_legendre_polynomial_p_##sfx(T x, T nf) {                                            \
        em_sc_i64 n = em_sc_degree(nf);                                                            \
        if (n < 0) return (T)0;                                                                    \
        if (FABS(x) == (T)1) return (x > 0 || n % 2 == 0) ? (T)1 : (T)-1;                           \
        if (n == 0) return (T)1;                                                                   \
        if (n == 1) return x;                                                                      \
        T p = (T)1, q = x, r = x;                                                                  \
        for (em_sc_i64 k = 1; k < n && q == q; k++) {                                              \
            r = ((T)(k + k + 1) * x * q - (T)k * p) / (T)(k + 1);                                  \
            p = q;                                                                                 \
            q = r;                                                                                 \
        }                                                                                          \
        return r;                                                                                  \
    }

EM_SC_POLYNOMIALS(double, f64, fabs, cos, sin, acos)
#undef EM_SC_POLYNOMIALS

/* float32 computes in float64 and rounds once (the recurrences cancel: in
 * float32 they lose digits PyTorch's float32 kernels lose too); float64 as
 * is. Hermite keeps PyTorch's per-dtype degree limits. */
#define EM_SC_POLYNOMIAL(name)                                                                     \
    EM_SC double sc_##name##_f64(double x, double n) { return em_sc_##name##_f64(x, n); }          \
    EM_SC float sc_##name##_f32(float x, float n) { return (float)em_sc_##name##_f64(x, n); }
EM_SC_POLYNOMIAL(chebyshev_polynomial_t)
EM_SC_POLYNOMIAL(chebyshev_polynomial_u)
EM_SC_POLYNOMIAL(chebyshev_polynomial_v)
EM_SC_POLYNOMIAL(chebyshev_polynomial_w)
EM_SC_POLYNOMIAL(shifted_chebyshev_polynomial_t)
EM_SC_POLYNOMIAL(shifted_chebyshev_polynomial_u)
EM_SC_POLYNOMIAL(shifted_chebyshev_polynomial_v)
EM_SC_POLYNOMIAL(shifted_chebyshev_polynomial_w)
EM_SC_POLYNOMIAL(laguerre_polynomial_l)
EM_SC_POLYNOMIAL(legendre_polynomial_p)
#undef EM_SC_POLYNOMIAL
EM_SC double sc_hermite_polynomial_h_f64(double x, double n) { return em_sc_hermite_h_f64(x, n, 512); }
EM_SC float sc_hermite_polynomial_h_f32(float x, float n) { return (float)em_sc_hermite_h_f64(x, n, 128); }
EM_SC double sc_hermite_polynomial_he_f64(double x, double n) { return em_sc_hermite_he_f64(x, n, 512); }
EM_SC float sc_hermite_polynomial_he_f32(float x, float n) { return (float)em_sc_hermite_he_f64(x, n, 128); }

/* ---- ops defined alike for float32 and float64 */

#define EM_SC_FLOAT_OPS(T, sfx, SQRT, FMOD, FLOOR, ONE)                                            \
    EM_SC T sc_sqrt_##sfx(T x) { return SQRT(x); }                                                 \
    EM_SC T sc_rsqrt_##sfx(T x) { return ONE / SQRT(x); }                                          \
    EM_SC T sc_reciprocal_##sfx(T x) { return ONE / x; }                                           \
    EM_SC T sc_div_##sfx(T a, T b) { return a / b; }                                               \
    EM_SC T sc_relu_##sfx(T x) { return x < 0 ? 0 : x; } /* NaN stays NaN, -0 stays -0 (PyTorch) */ \
    /* maximum, minimum and clamp propagate NaN, like PyTorch; two selects, not ||, so loops     \
     * vectorise */                                                                                \
    EM_SC T sc_maximum_##sfx(T a, T b) {                                                           \
        T r = a > b ? a : b;                                                                       \
        return a != a ? a : r;                                                                     \
    }                                                                                              \
    EM_SC T sc_minimum_##sfx(T a, T b) {                                                           \
        T r = a < b ? a : b;                                                                       \
        return a != a ? a : r;                                                                     \
    }                                                                                              \
    /* clamp: a NaN x stays NaN (both tests fail); a NaN bound is ignored, as  \
     * std::max and std::min treat it in PyTorch's scalar kernel */            \
    EM_SC T sc_clamp_##sfx(T x, T lo, T hi) {                                                      \
        T r = x < lo ? lo : x;                                                                     \
        return r > hi ? hi : r;                                                                    \
    }                                                                                              \
    EM_SC T sc_abs_##sfx(T x) { return x < 0 ? -x : x == 0 ? 0 : x; }                              \
    EM_SC T sc_sign_##sfx(T x) { return x > 0 ? ONE : x < 0 ? -ONE : 0; } /* NaN: 0, as PyTorch */ \
    EM_SC T sc_floor_##sfx(T x) { return FLOOR(x); }                                               \
    EM_SC T sc_fmod_##sfx(T a, T b) { return FMOD(a, b); }                                         \
    /* Python's %: the result takes the divisor's sign (PyTorch's formula) */                      \
    EM_SC T sc_remainder_##sfx(T a, T b) {                                                         \
        T m = FMOD(a, b);                                                                          \
        return (m != 0 && ((b < 0) != (m < 0))) ? m + b : m;                                       \
    }                                                                                              \
    /* PyTorch's div_floor_floating, so // agrees with it to the last bit */                       \
    /* (with m = fmod(a, b) given, for kernels that compute it in bulk) */                       \
    EM_SC T em_sc_floor_divide_from_fmod_##sfx(T a, T b, T m) {                                    \
        T d = (a - m) / b;                                                                         \
        d = (m != 0 && ((b < 0) != (m < 0))) ? d - ONE : d;                                        \
        T fd = FLOOR(d);                                                                           \
        T r = d != 0 ? (d - fd > ONE / 2 ? fd + ONE : fd) : (T)copysign(0.0, a / b);               \
        return b == 0 ? a / b : r;                                                                 \
    }                                                                                              \
    EM_SC T sc_floor_divide_##sfx(T a, T b) {                                                      \
        return em_sc_floor_divide_from_fmod_##sfx(a, b, FMOD(a, b));                               \
    }                                                                                              \
    /* PyTorch's lerp: exact at both ends */                                                       \
    EM_SC T sc_lerp_##sfx(T a, T b, T w) {                                                         \
        return (w < ONE / 2 && w > -ONE / 2) ? a + w * (b - a) : b - (b - a) * (ONE - w);          \
    }
/* fmod(a, b) for float32 in one branch-free exact step when |a| < 2^51 |b|
 * (*done = 1; any quotient of everyday data), computed in double: q =
 * trunc(A / B) is then within one of the true quotient, A - q B is exact
 * (fma; the remainder needs no more than 25 bits), and one correction
 * either way makes it exact. Otherwise *done = 0 and the result is
 * unspecified: callers use fmodf for those elements. The eager kernels run
 * it over whole arrays (it vectorises; fmodf does not). */
EM_SC float em_sc_fmodf_step(float a, float b, em_sc_i32 *done) {
    double A = fabs((double)a), B = fabs((double)b);
    double q = trunc(A / B);
    double r = fma(-q, B, A);
    r = r < 0.0 ? r + B : r;
    r = r >= B ? r - B : r;
    *done = A < 0x1p51 * B && B < INFINITY; /* (B infinite: 0 * inf in the fma) */
    return copysignf((float)r, a);
}

EM_SC_FLOAT_OPS(float, f32, sqrtf, fmodf, floorf, 1.0f)
EM_SC_FLOAT_OPS(double, f64, sqrt, fmod, floor, 1.0)
#undef EM_SC_FLOAT_OPS

EM_SC float sc_ceil_f32(float x) { return ceilf(x); }
EM_SC double sc_ceil_f64(double x) { return ceil(x); }
EM_SC float sc_round_f32(float x) { return rintf(x); } /* half to even */
EM_SC double sc_round_f64(double x) { return rint(x); }
EM_SC float sc_trunc_f32(float x) { return truncf(x); }
EM_SC double sc_trunc_f64(double x) { return trunc(x); }

/* pow: the common exponents are exact products, as in PyTorch's kernel. */
EM_SC float sc_pow_f32(float x, float y) {
    if (y == 2.0f) return x * x;
    if (y == 3.0f) return x * x * x;
    if (y == 0.5f) return sqrtf(x);
    if (y == 1.0f) return x;
    if (y == -1.0f) return 1.0f / x;
    if (y == -2.0f) return 1.0f / (x * x);
    if (y == 0.0f) return 1.0f;
    return powf(x, y);
}
EM_SC double sc_pow_f64(double x, double y) {
    if (y == 2.0) return x * x;
    if (y == 3.0) return x * x * x;
    if (y == 0.5) return sqrt(x);
    if (y == 1.0) return x;
    if (y == -1.0) return 1.0 / x;
    if (y == -2.0) return 1.0 / (x * x);
    if (y == 0.0) return 1.0;
    return pow(x, y);
}

/* ================================================================ integers
 * Arithmetic goes through an unsigned type (UT) so it wraps instead of
 * overflowing; division-like ops define b == 0 (0: the eager kernels raise
 * before running) and MIN / -1 (wraps), so no backend can trap. */

#define EM_SC_INT_OPS(T, sfx, UT, BITS)                                                            \
    EM_SC T sc_neg_##sfx(T x) { return (T)(0u - (UT)x); }                                          \
    EM_SC T sc_add_##sfx(T a, T b) { return (T)((UT)a + (UT)b); }                                  \
    EM_SC T sc_sub_##sfx(T a, T b) { return (T)((UT)a - (UT)b); }                                  \
    EM_SC T sc_mul_##sfx(T a, T b) { return (T)((UT)a * (UT)b); }                                  \
    EM_SC T sc_mul_add_##sfx(T x, T a, T b) { return (T)((UT)x * (UT)a + (UT)b); }                 \
    EM_SC T sc_abs_##sfx(T x) { return x < 0 ? (T)(0u - (UT)x) : x; }                              \
    EM_SC T sc_sign_##sfx(T x) { return (T)((x > 0) - (x < 0)); }                                  \
    EM_SC T sc_relu_##sfx(T x) { return x > 0 ? x : 0; }                                           \
    EM_SC T sc_maximum_##sfx(T a, T b) { return a > b ? a : b; }                                   \
    EM_SC T sc_minimum_##sfx(T a, T b) { return a < b ? a : b; }                                   \
    EM_SC T sc_clamp_##sfx(T x, T lo, T hi) { return sc_minimum_##sfx(sc_maximum_##sfx(x, lo), hi); } \
    EM_SC T sc_floor_##sfx(T x) { return x; }                                                      \
    EM_SC T sc_ceil_##sfx(T x) { return x; }                                                       \
    EM_SC T sc_round_##sfx(T x) { return x; }                                                      \
    EM_SC T sc_trunc_##sfx(T x) { return x; }                                                      \
    /* C's %: the result takes the dividend's sign (MIN % -1 is 0, not a trap) */                  \
    EM_SC T sc_fmod_##sfx(T a, T b) {                                                              \
        return (b == 0 || ((T)-1 < 0 && b == (T)-1)) ? 0 : (T)(a % b);                             \
    }                                                                                              \
    EM_SC T sc_remainder_##sfx(T a, T b) {                                                         \
        T m = sc_fmod_##sfx(a, b);                                                                 \
        return (m != 0 && ((b < 0) != (m < 0))) ? (T)(m + b) : m;                                  \
    }                                                                                              \
    EM_SC T sc_floor_divide_##sfx(T a, T b) {                                                      \
        if (b == 0) return 0;                                                                      \
        if ((T)-1 < 0 && b == (T)-1) return sc_neg_##sfx(a); /* MIN / -1 wraps */                  \
        T q = (T)(a / b);                                                                          \
        return (T)(((a % b) != 0 && ((a < 0) != (b < 0))) ? q - 1 : q);                            \
    }                                                                                              \
    EM_SC T sc_pow_##sfx(T x, T y) {                                                               \
        if (y < 0) return (T)(x == 1 ? 1 : x == (T)-1 ? ((y & 1) ? -1 : 1) : 0);                   \
        em_sc_u64 r = 1, b = (em_sc_u64)(em_sc_i64)x, e = (em_sc_u64)(em_sc_i64)y;                 \
        while (e) {                                                                                \
            if (e & 1u) r *= b;                                                                    \
            b *= b;                                                                                \
            e >>= 1;                                                                               \
        }                                                                                          \
        return (T)r;                                                                               \
    }                                                                                              \
    EM_SC T sc_bitwise_and_##sfx(T a, T b) { return (T)(a & b); }                                  \
    EM_SC T sc_bitwise_or_##sfx(T a, T b) { return (T)(a | b); }                                   \
    EM_SC T sc_bitwise_xor_##sfx(T a, T b) { return (T)(a ^ b); }                                  \
    EM_SC T sc_bitwise_not_##sfx(T a) { return (T)(~a); }                                          \
    /* shifts by a negative amount or by the width or more give 0 (or -1 for                       \
     * a right shift of a negative value), as in PyTorch */                                        \
    EM_SC T sc_bitwise_left_shift_##sfx(T a, T b) {                                                \
        return (b < 0 || b >= BITS) ? 0 : (T)((UT)a << b);                                         \
    }                                                                                              \
    EM_SC T sc_bitwise_right_shift_##sfx(T a, T b) {                                               \
        return (b < 0 || b >= BITS) ? (T)(a < 0 ? -1 : 0) : (T)(a >> b);                           \
    }
EM_SC_INT_OPS(em_sc_i64, i64, em_sc_u64, 64)
EM_SC_INT_OPS(em_sc_i32, i32, em_sc_u32, 32)
EM_SC_INT_OPS(em_sc_i16, i16, unsigned, 16)
EM_SC_INT_OPS(em_sc_i8, i8, unsigned, 8)
EM_SC_INT_OPS(em_sc_u8, u8, unsigned, 8)
#undef EM_SC_INT_OPS

/* ================================================================ float and int alike */

#define EM_SC_ALL_NUMERIC(T, sfx)                                                                  \
    EM_SC EM_SC_BOOL sc_eq_##sfx(T a, T b) { return a == b; }                                      \
    EM_SC EM_SC_BOOL sc_ne_##sfx(T a, T b) { return a != b; }                                      \
    EM_SC EM_SC_BOOL sc_lt_##sfx(T a, T b) { return a < b; }                                       \
    EM_SC EM_SC_BOOL sc_le_##sfx(T a, T b) { return a <= b; }                                      \
    EM_SC EM_SC_BOOL sc_gt_##sfx(T a, T b) { return a > b; }                                       \
    EM_SC EM_SC_BOOL sc_ge_##sfx(T a, T b) { return a >= b; }                                      \
    EM_SC EM_SC_BOOL sc_isnan_##sfx(T x) { return x != x; }                                        \
    EM_SC EM_SC_BOOL sc_isinf_##sfx(T x) { return x - x != x - x && x == x; }                      \
    EM_SC EM_SC_BOOL sc_isfinite_##sfx(T x) { return x - x == x - x; }                             \
    EM_SC T sc_where_##sfx(EM_SC_BOOL c, T a, T b) { return c ? a : b; }
EM_SC_ALL_NUMERIC(float, f32)
EM_SC_ALL_NUMERIC(double, f64)
EM_SC_ALL_NUMERIC(em_sc_i64, i64)
EM_SC_ALL_NUMERIC(em_sc_i32, i32)
EM_SC_ALL_NUMERIC(em_sc_i16, i16)
EM_SC_ALL_NUMERIC(em_sc_i8, i8)
EM_SC_ALL_NUMERIC(em_sc_u8, u8)
EM_SC_ALL_NUMERIC(EM_SC_BOOL, b8)
#undef EM_SC_ALL_NUMERIC

#define EM_SC_FLOAT_ARITH(T, sfx)                                                                  \
    EM_SC T sc_neg_##sfx(T x) { return -x; }                                                       \
    EM_SC T sc_add_##sfx(T a, T b) { return a + b; }                                               \
    EM_SC T sc_sub_##sfx(T a, T b) { return a - b; }                                               \
    EM_SC T sc_mul_##sfx(T a, T b) { return a * b; }
EM_SC_FLOAT_ARITH(float, f32)
EM_SC_FLOAT_ARITH(double, f64)
/* one rounding, as PyTorch's vectorised addcmul and batch norm (fmaf is
 * the FMA instruction where the target has one, and LLVM's llvm.fma) */
EM_SC float sc_mul_add_f32(float x, float a, float b) { return fmaf(x, a, b); }
EM_SC double sc_mul_add_f64(double x, double a, double b) { return fma(x, a, b); }
#undef EM_SC_FLOAT_ARITH

/* ================================================================ bool
 * Arithmetic on bool is logical, as in PyTorch (True + True == True). */

/* Bitwise forms of the logical ones (bools hold 0 or 1): no short-circuit
 * branches, so loops vectorise. */
EM_SC EM_SC_BOOL sc_add_b8(EM_SC_BOOL a, EM_SC_BOOL b) { return a | b; }
EM_SC EM_SC_BOOL sc_mul_b8(EM_SC_BOOL a, EM_SC_BOOL b) { return a & b; }
EM_SC EM_SC_BOOL sc_maximum_b8(EM_SC_BOOL a, EM_SC_BOOL b) { return a | b; }
EM_SC EM_SC_BOOL sc_minimum_b8(EM_SC_BOOL a, EM_SC_BOOL b) { return a & b; }
EM_SC EM_SC_BOOL sc_sign_b8(EM_SC_BOOL x) { return x; }
EM_SC EM_SC_BOOL sc_logical_not_b8(EM_SC_BOOL x) { return x ^ 1; }
EM_SC EM_SC_BOOL sc_logical_and_b8(EM_SC_BOOL a, EM_SC_BOOL b) { return a & b; }
EM_SC EM_SC_BOOL sc_logical_or_b8(EM_SC_BOOL a, EM_SC_BOOL b) { return a | b; }
EM_SC EM_SC_BOOL sc_logical_xor_b8(EM_SC_BOOL a, EM_SC_BOOL b) { return a ^ b; }
EM_SC EM_SC_BOOL sc_bitwise_and_b8(EM_SC_BOOL a, EM_SC_BOOL b) { return a & b; }
EM_SC EM_SC_BOOL sc_bitwise_or_b8(EM_SC_BOOL a, EM_SC_BOOL b) { return a | b; }
EM_SC EM_SC_BOOL sc_bitwise_xor_b8(EM_SC_BOOL a, EM_SC_BOOL b) { return a ^ b; }
EM_SC EM_SC_BOOL sc_bitwise_not_b8(EM_SC_BOOL a) { return a ^ 1; }

/* ================================================================ casts
 * float -> integer: through int64, saturating, NaN -> 0, then wrapping to
 * the narrower type (so -1.0 -> uint8 is 255, as in PyTorch); never UB.
 * Casts to float16/bfloat16 go through float32 (as PyTorch does); casts from
 * them widen to float32 first. */

EM_SC em_sc_i64 em_sc_f64_to_i64_sat(double x) {
    if (x != x) return 0;
    if (x >= 9.22337203685477580800e18) return EM_SC_I64_MAX;
    if (x < -9.22337203685477580800e18) return EM_SC_I64_MIN;
    return (em_sc_i64)x;
}

/* Every source dtype as (C type, suffix, how to read it as T). */
#define EM_SC_CAST_TO(T, tsfx, FROM_FLOAT)                                                         \
    EM_SC T sc_cast_f32_##tsfx(float x) { return FROM_FLOAT((double)x); }                          \
    EM_SC T sc_cast_f64_##tsfx(double x) { return FROM_FLOAT(x); }                                 \
    EM_SC T sc_cast_f16_##tsfx(em_sc_f16 x) { return FROM_FLOAT((double)em_sc_f16_to_f32(x)); }   \
    EM_SC T sc_cast_bf16_##tsfx(em_sc_bf16 x) { return FROM_FLOAT((double)em_sc_bf16_to_f32(x)); } \
    EM_SC T sc_cast_i64_##tsfx(em_sc_i64 x) { return (T)x; }                                       \
    EM_SC T sc_cast_i32_##tsfx(em_sc_i32 x) { return (T)x; }                                       \
    EM_SC T sc_cast_i16_##tsfx(em_sc_i16 x) { return (T)x; }                                       \
    EM_SC T sc_cast_i8_##tsfx(em_sc_i8 x) { return (T)x; }                                         \
    EM_SC T sc_cast_u8_##tsfx(em_sc_u8 x) { return (T)x; }                                         \
    EM_SC T sc_cast_b8_##tsfx(EM_SC_BOOL x) { return (T)(x ? 1 : 0); }

#define EM_SC_I64_FROM(x) em_sc_f64_to_i64_sat(x)
#define EM_SC_I32_FROM(x) ((em_sc_i32)em_sc_f64_to_i64_sat(x))
#define EM_SC_I16_FROM(x) ((em_sc_i16)em_sc_f64_to_i64_sat(x))
#define EM_SC_I8_FROM(x) ((em_sc_i8)em_sc_f64_to_i64_sat(x))
#define EM_SC_U8_FROM(x) ((em_sc_u8)em_sc_f64_to_i64_sat(x))
#define EM_SC_F64_FROM(x) (x)
EM_SC_CAST_TO(em_sc_i64, i64, EM_SC_I64_FROM)
EM_SC_CAST_TO(em_sc_i32, i32, EM_SC_I32_FROM)
EM_SC_CAST_TO(em_sc_i16, i16, EM_SC_I16_FROM)
EM_SC_CAST_TO(em_sc_i8, i8, EM_SC_I8_FROM)
EM_SC_CAST_TO(em_sc_u8, u8, EM_SC_U8_FROM)
EM_SC_CAST_TO(double, f64, EM_SC_F64_FROM)
#undef EM_SC_CAST_TO

/* to float32: direct conversions (a double rounds once) */
EM_SC float sc_cast_f32_f32(float x) { return x; }
EM_SC float sc_cast_f64_f32(double x) { return (float)x; }
EM_SC float sc_cast_f16_f32(em_sc_f16 x) { return em_sc_f16_to_f32(x); }
EM_SC float sc_cast_bf16_f32(em_sc_bf16 x) { return em_sc_bf16_to_f32(x); }
EM_SC float sc_cast_i64_f32(em_sc_i64 x) { return (float)x; }
EM_SC float sc_cast_i32_f32(em_sc_i32 x) { return (float)x; }
EM_SC float sc_cast_i16_f32(em_sc_i16 x) { return (float)x; }
EM_SC float sc_cast_i8_f32(em_sc_i8 x) { return (float)x; }
EM_SC float sc_cast_u8_f32(em_sc_u8 x) { return (float)x; }
EM_SC float sc_cast_b8_f32(EM_SC_BOOL x) { return x ? 1.0f : 0.0f; }

/* to bool: nonzero */
#define EM_SC_TO_BOOL(T, sfx)                                                                      \
    EM_SC EM_SC_BOOL sc_cast_##sfx##_b8(T x) { return x != 0; }
EM_SC_TO_BOOL(float, f32)
EM_SC_TO_BOOL(double, f64)
EM_SC_TO_BOOL(em_sc_i64, i64)
EM_SC_TO_BOOL(em_sc_i32, i32)
EM_SC_TO_BOOL(em_sc_i16, i16)
EM_SC_TO_BOOL(em_sc_i8, i8)
EM_SC_TO_BOOL(em_sc_u8, u8)
#undef EM_SC_TO_BOOL
EM_SC EM_SC_BOOL sc_cast_b8_b8(EM_SC_BOOL x) { return x; }
EM_SC EM_SC_BOOL sc_cast_f16_b8(em_sc_f16 x) { return (x & 0x7fffu) != 0; }
EM_SC EM_SC_BOOL sc_cast_bf16_b8(em_sc_bf16 x) { return (x & 0x7fffu) != 0; }

/* to float16 / bfloat16: through float32 */
#define EM_SC_TO_HALF(sfx, T)                                                                      \
    EM_SC em_sc_f16 sc_cast_##sfx##_f16(T x) { return em_sc_f32_to_f16(sc_cast_##sfx##_f32(x)); }  \
    EM_SC em_sc_bf16 sc_cast_##sfx##_bf16(T x) { return em_sc_f32_to_bf16(sc_cast_##sfx##_f32(x)); }
EM_SC_TO_HALF(f32, float)
EM_SC_TO_HALF(f64, double)
EM_SC_TO_HALF(i64, em_sc_i64)
EM_SC_TO_HALF(i32, em_sc_i32)
EM_SC_TO_HALF(i16, em_sc_i16)
EM_SC_TO_HALF(i8, em_sc_i8)
EM_SC_TO_HALF(u8, em_sc_u8)
EM_SC_TO_HALF(b8, EM_SC_BOOL)
#undef EM_SC_TO_HALF
EM_SC em_sc_f16 sc_cast_f16_f16(em_sc_f16 x) { return x; }
EM_SC em_sc_bf16 sc_cast_bf16_bf16(em_sc_bf16 x) { return x; }
EM_SC em_sc_bf16 sc_cast_f16_bf16(em_sc_f16 x) { return em_sc_f32_to_bf16(em_sc_f16_to_f32(x)); }
EM_SC em_sc_f16 sc_cast_bf16_f16(em_sc_bf16 x) { return em_sc_f32_to_f16(em_sc_bf16_to_f32(x)); }

#endif
