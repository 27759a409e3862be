/*
 * ops_math.h - the scalar definition of every elementwise op, written once.
 *
 * For each elementwise row of ops.def this file defines sc_<name>_<dtype>
 * for every dtype of the row's class, plus sc_cast_<from>_<to> for every pair
 * of dtypes. Every backend compiles this same text:
 *   - the eager CPU kernels include it (gcc or clang, vectorised loops);
 *   - the LLVM backend compiles it to bitcode with clang at build time and
 *     inlines the functions into each fused kernel (codegen_llvm/);
 *   - the CUDA backend will hand it to NVRTC as source text.
 * So eager and compiled results agree to the last bit: no backend has its own
 * copy of the math. Keep to a C subset all three accept: no globals, no libc
 * beyond <math.h>, branch-free where it matters so loops vectorise. Files that
 * include this must be compiled with -ffp-contract=off (contractions would
 * make results depend on the compiler).
 *
 * float32 transcendentals are polynomial approximations (Cephes) that
 * vectorise; libm's scalar calls are ~40x slower here. Accuracy: exp, log
 * within 2 ulp, tanh and sigmoid within 4 ulp on their whole domains.
 * float64 uses libm.
 */
#ifndef EMBER_OPS_MATH_H
#define EMBER_OPS_MATH_H

#if defined(__CUDACC_RTC__) || defined(__CUDACC__)
#define EM_SC static __device__ __forceinline__
typedef long long em_sc_i64;
typedef unsigned long long em_sc_u64;
typedef int em_sc_i32;
typedef unsigned int em_sc_u32;
#define EM_SC_BOOL bool
static __device__ __forceinline__ float em_sc_u32_as_f32(em_sc_u32 u) { return __uint_as_float(u); }
static __device__ __forceinline__ em_sc_u32 em_sc_f32_as_u32(float f) { return __float_as_uint(f); }
#else
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#define EM_SC static inline
typedef int64_t em_sc_i64;
typedef uint64_t em_sc_u64;
typedef int32_t em_sc_i32;
typedef uint32_t em_sc_u32;
#define EM_SC_BOOL bool
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

#define EM_SC_I64_MAX ((em_sc_i64)0x7fffffffffffffffLL)
#define EM_SC_I64_MIN (-EM_SC_I64_MAX - 1)

/* ---- float32 building blocks ---- */

/* 2^n for integral n in [-150, 128], exact, as the product of two normal
 * powers so results that land in the subnormal range round once. */
EM_SC float em_sc_ldexp_f32(float y, float n) {
    em_sc_i32 n1 = (em_sc_i32)n / 2;
    em_sc_i32 n2 = (em_sc_i32)n - n1;
    float s1 = em_sc_u32_as_f32((em_sc_u32)(n1 + 127) << 23);
    float s2 = em_sc_u32_as_f32((em_sc_u32)(n2 + 127) << 23);
    return y * s1 * s2;
}

/* exp: range reduction x = n ln2 + r, |r| <= ln2/2, degree-6 polynomial. */
EM_SC float sc_exp_f32(float x) {
    float xc = x > 89.0f ? 89.0f : x;
    xc = xc < -104.0f ? -104.0f : xc;
    xc = x != x ? 0.0f : xc; /* keeps NaN away from the int conversion below */
    float n = rintf(xc * 1.44269504088896341f);
    float r = fmaf(-n, 0.693359375f, xc);
    r = fmaf(n, 2.12194440e-4f, r);
    float p = 1.9875691500e-4f;
    p = fmaf(p, r, 1.3981999507e-3f);
    p = fmaf(p, r, 8.3334519073e-3f);
    p = fmaf(p, r, 4.1665795894e-2f);
    p = fmaf(p, r, 1.6666665459e-1f);
    p = fmaf(p, r, 5.0000001201e-1f);
    float y = fmaf(p * r, r, r) + 1.0f;
    y = em_sc_ldexp_f32(y, n);
    return x != x ? x : y;
}

/* log: x = m 2^e with m in [sqrt(1/2), sqrt(2)), degree-9 polynomial in m-1. */
EM_SC float sc_log_f32(float x) {
    /* Subnormals are scaled into the normal range first. */
    bool tiny = x < 1.17549435e-38f;
    float xs = tiny ? x * 33554432.0f : x; /* 2^25 */
    em_sc_u32 bits = em_sc_f32_as_u32(xs);
    float e = (float)((em_sc_i32)((bits >> 23) & 0xffu) - 126) - (tiny ? 25.0f : 0.0f);
    float m = em_sc_u32_as_f32((bits & 0x807fffffu) | 0x3f000000u); /* [0.5, 1) */
    bool lo = m < 0.707106781186547524f;
    e = lo ? e - 1.0f : e;
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
    y = fmaf(e, -2.12194440e-4f, y);
    y = fmaf(z, -0.5f, y);
    float r = m + y;
    r = fmaf(e, 0.693359375f, r);
    /* Special cases: log(0) = -inf, log(<0) = nan, log(inf) = inf, nan. */
    r = x == 0.0f ? -INFINITY : r;
    r = x < 0.0f ? NAN : r;
    r = x == INFINITY ? x : r;
    return x != x ? x : r;
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
    float e = sc_exp_f32(ax + ax);
    float big = 1.0f - 2.0f / (e + 1.0f);
    big = copysignf(big, x);
    return ax < 0.625f ? small : big;
}

EM_SC float sc_sigmoid_f32(float x) { return 1.0f / (1.0f + sc_exp_f32(-x)); }

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

/* ---- float64: libm ---- */

EM_SC double sc_exp_f64(double x) { return exp(x); }
EM_SC double sc_log_f64(double x) { return log(x); }
EM_SC double sc_tanh_f64(double x) { return tanh(x); }
EM_SC double sc_sigmoid_f64(double x) { return 1.0 / (1.0 + exp(-x)); }
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

/* ---- integers: wrap on overflow (two's complement), never UB ---- */

EM_SC em_sc_i64 sc_pow_i64(em_sc_i64 x, em_sc_i64 y) {
    if (y < 0) return x == 1 ? 1 : x == -1 ? ((y & 1) ? -1 : 1) : 0;
    em_sc_u64 r = 1, b = (em_sc_u64)x;
    em_sc_u64 e = (em_sc_u64)y;
    while (e) {
        if (e & 1u) r *= b;
        b *= b;
        e >>= 1;
    }
    return (em_sc_i64)r;
}

/* ---- ops defined alike for several dtypes ---- */

#define EM_SC_ARITH(T, sfx)                                                                        \
    EM_SC T sc_neg_##sfx(T x) { return -x; }                                                       \
    EM_SC T sc_add_##sfx(T a, T b) { return a + b; }                                               \
    EM_SC T sc_sub_##sfx(T a, T b) { return a - b; }                                               \
    EM_SC T sc_mul_##sfx(T a, T b) { return a * b; }
EM_SC_ARITH(float, f32)
EM_SC_ARITH(double, f64)
#undef EM_SC_ARITH

EM_SC float sc_div_f32(float a, float b) { return a / b; }
EM_SC double sc_div_f64(double a, double b) { return a / b; }

/* relu and maximum propagate NaN, like PyTorch. */
EM_SC float sc_relu_f32(float x) { return (x > 0.0f || x != x) ? x : 0.0f; }
EM_SC double sc_relu_f64(double x) { return (x > 0.0 || x != x) ? x : 0.0; }
EM_SC float sc_maximum_f32(float a, float b) { return (a != a || a > b) ? a : b; }
EM_SC double sc_maximum_f64(double a, double b) { return (a != a || a > b) ? a : b; }

EM_SC em_sc_i64 sc_neg_i64(em_sc_i64 x) { return (em_sc_i64)(0u - (em_sc_u64)x); }
EM_SC em_sc_i64 sc_add_i64(em_sc_i64 a, em_sc_i64 b) {
    return (em_sc_i64)((em_sc_u64)a + (em_sc_u64)b);
}
EM_SC em_sc_i64 sc_sub_i64(em_sc_i64 a, em_sc_i64 b) {
    return (em_sc_i64)((em_sc_u64)a - (em_sc_u64)b);
}
EM_SC em_sc_i64 sc_mul_i64(em_sc_i64 a, em_sc_i64 b) {
    return (em_sc_i64)((em_sc_u64)a * (em_sc_u64)b);
}
EM_SC em_sc_i64 sc_relu_i64(em_sc_i64 x) { return x > 0 ? x : 0; }
EM_SC em_sc_i64 sc_maximum_i64(em_sc_i64 a, em_sc_i64 b) { return a > b ? a : b; }

/* bool arithmetic is logical, as in PyTorch (True + True == True). */
EM_SC EM_SC_BOOL sc_add_b8(EM_SC_BOOL a, EM_SC_BOOL b) { return a || b; }
EM_SC EM_SC_BOOL sc_mul_b8(EM_SC_BOOL a, EM_SC_BOOL b) { return a && b; }
EM_SC EM_SC_BOOL sc_maximum_b8(EM_SC_BOOL a, EM_SC_BOOL b) { return a || b; }

/* ---- casts: float -> int saturates and maps NaN to 0 (never UB) ---- */

#define EM_SC_CAST_TO_FLOAT(F, FS, T, TS)                                                          \
    EM_SC T sc_cast_##FS##_##TS(F x) { return (T)x; }
EM_SC_CAST_TO_FLOAT(float, f32, float, f32)
EM_SC_CAST_TO_FLOAT(float, f32, double, f64)
EM_SC_CAST_TO_FLOAT(double, f64, float, f32)
EM_SC_CAST_TO_FLOAT(double, f64, double, f64)
EM_SC_CAST_TO_FLOAT(em_sc_i64, i64, float, f32)
EM_SC_CAST_TO_FLOAT(em_sc_i64, i64, double, f64)
#undef EM_SC_CAST_TO_FLOAT
EM_SC float sc_cast_b8_f32(EM_SC_BOOL x) { return x ? 1.0f : 0.0f; }
EM_SC double sc_cast_b8_f64(EM_SC_BOOL x) { return x ? 1.0 : 0.0; }

EM_SC em_sc_i64 sc_cast_f32_i64(float x) {
    if (x != x) return 0;
    if (x >= 9.22337203685477580800e18f) return EM_SC_I64_MAX;
    if (x < -9.22337203685477580800e18f) return EM_SC_I64_MIN;
    return (em_sc_i64)x;
}
EM_SC em_sc_i64 sc_cast_f64_i64(double x) {
    if (x != x) return 0;
    if (x >= 9.22337203685477580800e18) return EM_SC_I64_MAX;
    if (x < -9.22337203685477580800e18) return EM_SC_I64_MIN;
    return (em_sc_i64)x;
}
EM_SC em_sc_i64 sc_cast_i64_i64(em_sc_i64 x) { return x; }
EM_SC em_sc_i64 sc_cast_b8_i64(EM_SC_BOOL x) { return x ? 1 : 0; }

EM_SC EM_SC_BOOL sc_cast_f32_b8(float x) { return x != 0.0f; }
EM_SC EM_SC_BOOL sc_cast_f64_b8(double x) { return x != 0.0; }
EM_SC EM_SC_BOOL sc_cast_i64_b8(em_sc_i64 x) { return x != 0; }
EM_SC EM_SC_BOOL sc_cast_b8_b8(EM_SC_BOOL x) { return x; }

#endif
