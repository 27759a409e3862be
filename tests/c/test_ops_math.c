/*
 * test_ops_math.c - accuracy of the scalar definitions every backend shares.
 *
 *  - float32 transcendentals against double-precision libm, on ~1M inputs
 *    spread over every float32 (every 4099th bit pattern), with the bounds
 *    ops_math.h states (exhaustive runs measured the figures in its header);
 *  - float16 conversions exhaustively against the compiler's _Float16
 *    (which rounds to nearest even), bfloat16 against a reference;
 *  - the integer edge cases that would trap or be undefined in plain C.
 */
#include <stdlib.h>

#include "check.h"
#include "ember/ops_math.h"

static double ulp_err(float got, double want) {
    if (isnan(want)) return isnan(got) ? 0 : 1e9;
    if (isinf(want)) return got == (float)want ? 0 : 1e9;
    float w = (float)want;
    if (got == w) return 0;
    if (isinf(w)) w = copysignf(3.4028235e38f, w);
    double u = fabs((double)nextafterf(w, INFINITY) - (double)w);
    if (fabsf(w) < 1.17549435e-38f) u = 1.401298464e-45; /* subnormal spacing */
    return fabs((double)got - want) / u;
}

static double d_sigmoid(double x) { return 1.0 / (1.0 + exp(-x)); }

static void test_float32_accuracy(void) {
    struct {
        const char *name;
        float (*f)(float);
        double (*ref)(double);
        double bound; /* ulp */
    } fs[] = {
        {"exp", sc_exp_f32, exp, 1.5},          {"exp2", sc_exp2_f32, exp2, 1.5},
        {"expm1", sc_expm1_f32, expm1, 2.0},    {"log", sc_log_f32, log, 1.0},
        {"log2", sc_log2_f32, log2, 2.0},       {"log1p", sc_log1p_f32, log1p, 3.0},
        {"sin", sc_sin_f32, sin, 2.0},          {"cos", sc_cos_f32, cos, 2.0},
        {"tan", sc_tan_f32, tan, 3.0},          {"tanh", sc_tanh_f32, tanh, 1.5},
        {"erf", sc_erf_f32, erf, 3.0},          {"sigmoid", sc_sigmoid_f32, d_sigmoid, 3.0},
    };
    for (size_t k = 0; k < sizeof fs / sizeof *fs; k++) {
        double worst = 0;
        float at = 0;
        for (uint64_t b = 0; b < (1ull << 32); b += 4099) {
            uint32_t u = (uint32_t)b;
            float x;
            memcpy(&x, &u, 4);
            if (isnan(x) || fabsf(x) > 1e9f) continue; /* trig: huge |x| lose accuracy */
            double e = ulp_err(fs[k].f(x), fs[k].ref((double)x));
            if (e > worst) {
                worst = e;
                at = x;
            }
        }
        CHECK_MSG(worst <= fs[k].bound, "%s: %.3g ulp at %.9g (bound %.1f)", fs[k].name, worst,
                  (double)at, fs[k].bound);
    }
    /* special values */
    CHECK(sc_exp_f32(INFINITY) == INFINITY && sc_exp_f32(-INFINITY) == 0.0f);
    CHECK(isnan(sc_exp_f32(NAN)) && isnan(sc_log_f32(-1.0f)) && sc_log_f32(0.0f) == -INFINITY);
    CHECK(sc_tanh_f32(INFINITY) == 1.0f && sc_tanh_f32(-INFINITY) == -1.0f);
    CHECK(sc_erf_f32(INFINITY) == 1.0f && sc_erf_f32(-INFINITY) == -1.0f && isnan(sc_erf_f32(NAN)));
    CHECK(sc_sigmoid_f32(-200.0f) == 0.0f && sc_sigmoid_f32(200.0f) == 1.0f);
    CHECK(isnan(sc_sin_f32(INFINITY)) && isnan(sc_cos_f32(NAN)));
    CHECK(sc_log2_f32(8.0f) == 3.0f && sc_exp2_f32(10.0f) == 1024.0f);
    CHECK(sc_expm1_f32(1e-10f) == 1e-10f && sc_log1p_f32(1e-10f) == 1e-10f);
}

static void test_half_conversions(void) {
#ifdef __FLT16_MAX__
    int bad = 0;
    for (uint32_t h = 0; h < 65536; h++) { /* every float16 widens exactly */
        _Float16 r;
        uint16_t hb = (uint16_t)h;
        memcpy(&r, &hb, 2);
        float a = em_sc_f16_to_f32(hb), b = (float)r;
        if (!(a == b || (isnan(a) && isnan(b))) || (a == 0 && signbit(a) != signbit(b))) bad++;
    }
    CHECK_MSG(bad == 0, "%d float16 values widen wrongly", bad);
    bad = 0;
    for (uint64_t b = 0; b < (1ull << 32); b += 257) { /* narrowing rounds to nearest even */
        uint32_t u = (uint32_t)b;
        float x;
        memcpy(&x, &u, 4);
        _Float16 r = (_Float16)x;
        uint16_t want;
        memcpy(&want, &r, 2);
        uint16_t got = em_sc_f32_to_f16(x);
        if (isnan(x) ? (got & 0x7c00) != 0x7c00 || !(got & 0x3ff) : got != want) bad++;
    }
    CHECK_MSG(bad == 0, "%d float32 values narrow to float16 wrongly", bad);
#endif
    /* bfloat16: the top 16 bits, rounded to nearest even */
    CHECK(em_sc_f32_to_bf16(1.0f) == 0x3f80);
    CHECK(em_sc_f32_to_bf16(em_sc_u32_as_f32(0x3f808000u)) == 0x3f80); /* tie to even */
    CHECK(em_sc_f32_to_bf16(em_sc_u32_as_f32(0x3f818000u)) == 0x3f82); /* tie to even (up) */
    CHECK(em_sc_f32_to_bf16(em_sc_u32_as_f32(0x3f808001u)) == 0x3f81);
    CHECK(em_sc_f32_to_bf16(INFINITY) == 0x7f80 && (em_sc_f32_to_bf16(NAN) & 0x7f80) == 0x7f80);
    CHECK(em_sc_f32_to_bf16(NAN) & 0x7f);
    CHECK(em_sc_bf16_to_f32(0xc040) == -3.0f);
}

static void test_integer_edges(void) {
    CHECK(sc_floor_divide_i64(EM_SC_I64_MIN, -1) == EM_SC_I64_MIN); /* wraps, no trap */
    CHECK(sc_fmod_i32(INT32_MIN, -1) == 0 && sc_remainder_i32(INT32_MIN, -1) == 0);
    CHECK(sc_floor_divide_i64(-7, 2) == -4 && sc_remainder_i64(-7, 2) == 1 && sc_fmod_i64(-7, 2) == -1);
    CHECK(sc_floor_divide_u8(200, 255) == 0 && sc_fmod_u8(200, 255) == 200);
    CHECK(sc_floor_divide_i8(5, 0) == 0); /* defined; the eager kernel raises first */
    CHECK(sc_add_i32(INT32_MAX, 1) == INT32_MIN && sc_mul_i16(300, 300) == (int16_t)90000);
    CHECK(sc_neg_i8(-128) == -128 && sc_abs_i64(EM_SC_I64_MIN) == EM_SC_I64_MIN);
    CHECK(sc_bitwise_left_shift_i32(1, 31) == INT32_MIN && sc_bitwise_left_shift_i32(1, 32) == 0);
    CHECK(sc_bitwise_right_shift_i8(-8, 100) == -1 && sc_bitwise_right_shift_i8(8, -1) == 0);
    CHECK(sc_pow_i32(3, 4) == 81 && sc_pow_i64(2, -1) == 0 && sc_pow_i64(-1, -3) == -1);
    CHECK(sc_cast_f32_u8(-1.0f) == 255 && sc_cast_f32_u8(300.0f) == 44); /* like PyTorch */
    CHECK(sc_cast_f32_i64(NAN) == 0 && sc_cast_f64_i64(1e300) == EM_SC_I64_MAX);
    CHECK(sc_cast_f16_b8(0x8000) == false && sc_cast_bf16_b8(0x0001) == true);
}

int main(void) {
    RUN(test_float32_accuracy);
    RUN(test_half_conversions);
    RUN(test_integer_edges);
    return check_report();
}
