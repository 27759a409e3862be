/*
 * elementwise.c - eager CPU kernels for every elementwise op and cast.
 *
 * The inner loops are generated from ops.def: for each elementwise row and
 * each compute dtype of its class, one loop calling sc_<op>_<dtype> from
 * ops_math.h (the same definition the code generators compile), with fast
 * paths the compiler vectorises: all operands contiguous, and operands that
 * are broadcast scalars. Ops whose class includes float32 also get float16
 * and bfloat16 loops that convert while loading and storing. Everything else
 * about iteration is em_iter's job.
 *
 * The driver runs an op in one of three ways: operands already in the
 * dtypes the loop wants (the common case); all-float16 (or bfloat16)
 * operands through the converting loops; otherwise inputs are first cast
 * into temporaries, and a result of another dtype than the loop's is written
 * through a temporary too. In-place ops reuse the driver with a given,
 * possibly strided, result tensor.
 */
#include <string.h>

#include "../kernels.h"
#include "ember/alloc.h"
#include "ember/parallel.h"
#include "ember/ops_math.h"

#define SZ(T) ((int64_t)sizeof(T))
/* operand k, element i: contiguous when stride == sizeof, else by stride */
#define AT(T, k, i) (*(T *)(p[k] + (i) * s[k]))

/* ---- loop bodies by shape and arity ----
 * OUT/IN: C types of the result and of each input; F: the scalar function.
 * LOAD/STORE convert between memory and compute types (identity except for
 * the 16-bit floats). */

#define ID(x) (x)

#define LOOP1(name, OUT, IN, F, LOAD, STORE)                                                       \
    static void name(char **p, const int64_t *s, int64_t n) {                                      \
        if (s[0] == SZ(OUT) && s[1] == SZ(IN)) {                                                   \
            OUT *o = (OUT *)p[0];                                                                  \
            const IN *a = (const IN *)p[1];                                                        \
            for (int64_t i = 0; i < n; i++) o[i] = STORE(F(LOAD(a[i])));                           \
        } else if (s[0] == SZ(OUT) && s[1] == 0) { /* a broadcast scalar: fill (zeros, full) */   \
            OUT *o = (OUT *)p[0];                                                                  \
            const OUT v = STORE(F(LOAD(*(const IN *)p[1])));                                       \
            for (int64_t i = 0; i < n; i++) o[i] = v;                                              \
        } else {                                                                                   \
            for (int64_t i = 0; i < n; i++) AT(OUT, 0, i) = STORE(F(LOAD(AT(const IN, 1, i))));   \
        }                                                                                          \
    }

#define LOOP2(name, OUT, IN, F, LOAD, STORE)                                                       \
    static void name(char **p, const int64_t *s, int64_t n) {                                      \
        OUT *o = (OUT *)p[0];                                                                      \
        const IN *a = (const IN *)p[1], *b = (const IN *)p[2];                                     \
        if (s[0] == SZ(OUT) && s[1] == SZ(IN) && s[2] == SZ(IN)) {                                 \
            for (int64_t i = 0; i < n; i++) o[i] = STORE(F(LOAD(a[i]), LOAD(b[i])));               \
        } else if (s[0] == SZ(OUT) && s[1] == SZ(IN) && s[2] == 0) {                               \
            const IN bv = b[0]; /* hoisted: o may alias b, so b[0] would be reloaded */            \
            for (int64_t i = 0; i < n; i++) o[i] = STORE(F(LOAD(a[i]), LOAD(bv)));                 \
        } else if (s[0] == SZ(OUT) && s[1] == 0 && s[2] == SZ(IN)) {                               \
            const IN av = a[0];                                                                    \
            for (int64_t i = 0; i < n; i++) o[i] = STORE(F(LOAD(av), LOAD(b[i])));                 \
        } else {                                                                                   \
            for (int64_t i = 0; i < n; i++)                                                        \
                AT(OUT, 0, i) = STORE(F(LOAD(AT(const IN, 1, i)), LOAD(AT(const IN, 2, i))));      \
        }                                                                                          \
    }

/* Ternary ops mostly take a tensor and two broadcast scalars (clamp, lerp,
 * softplus): that case, and all-contiguous, are the fast paths. */
#define LOOP3(name, OUT, IN0, IN, F, LOAD0, LOAD, STORE)                                           \
    static void name(char **p, const int64_t *s, int64_t n) {                                      \
        OUT *o = (OUT *)p[0];                                                                      \
        const IN0 *a = (const IN0 *)p[1];                                                          \
        const IN *b = (const IN *)p[2], *c = (const IN *)p[3];                                     \
        if (s[0] == SZ(OUT) && s[1] == SZ(IN0) && s[2] == SZ(IN) && s[3] == SZ(IN)) {              \
            for (int64_t i = 0; i < n; i++) o[i] = STORE(F(LOAD0(a[i]), LOAD(b[i]), LOAD(c[i])));  \
        } else if (s[0] == SZ(OUT) && s[1] == SZ(IN0) && s[2] == 0 && s[3] == 0) {                 \
            const IN bv = b[0], cv = c[0]; /* hoisted, as in LOOP2 */                              \
            for (int64_t i = 0; i < n; i++) o[i] = STORE(F(LOAD0(a[i]), LOAD(bv), LOAD(cv)));      \
        } else if (s[0] == SZ(OUT) && s[1] == SZ(IN0) && s[2] == SZ(IN) && s[3] == 0) {            \
            const IN cv = c[0]; /* lerp(a, b, w) */                                                \
            for (int64_t i = 0; i < n; i++) o[i] = STORE(F(LOAD0(a[i]), LOAD(b[i]), LOAD(cv)));    \
        } else if (s[0] == SZ(OUT) && s[1] == SZ(IN0) && s[2] == 0 && s[3] == SZ(IN)) {            \
            const IN bv = b[0]; /* where(mask, v, x): masked_fill */                               \
            for (int64_t i = 0; i < n; i++) o[i] = STORE(F(LOAD0(a[i]), LOAD(bv), LOAD(c[i])));    \
        } else {                                                                                   \
            for (int64_t i = 0; i < n; i++)                                                        \
                AT(OUT, 0, i) = STORE(F(LOAD0(AT(const IN0, 1, i)), LOAD(AT(const IN, 2, i)),       \
                                        LOAD(AT(const IN, 3, i))));                                \
        }                                                                                          \
    }

/* Bools live in memory as bytes read as uint8 (nonzero is true, as the code
 * generators read them): gcc vectorises neither selects on loaded bools nor
 * their negation, but does on bytes. M(sfx) is the memory type, LD(sfx)
 * the conversion to the compute type. */
#define M(sfx) M_##sfx
#define M_f32 float
#define M_f64 double
#define M_i64 em_sc_i64
#define M_i32 em_sc_i32
#define M_i16 em_sc_i16
#define M_i8 em_sc_i8
#define M_u8 em_sc_u8
#define M_b8 em_sc_u8
#define LD(sfx) LD_##sfx
#define LD_f32 ID
#define LD_f64 ID
#define LD_i64 ID
#define LD_i32 ID
#define LD_i16 ID
#define LD_i8 ID
#define LD_u8 ID
#define LD_b8 AS_BOOL
#define M_f16 em_sc_u16
#define M_bf16 em_sc_u16
#define LD_f16 ID
#define LD_bf16 ID
#define AS_BOOL(x) ((bool)(x))

/* loop_<op>_<dtype> for each shape and arity */
#define DEF_SAME_1(op, T, sfx) LOOP1(loop_##op##_##sfx, M(sfx), M(sfx), sc_##op##_##sfx, LD(sfx), ID)
#define DEF_SAME_2(op, T, sfx) LOOP2(loop_##op##_##sfx, M(sfx), M(sfx), sc_##op##_##sfx, LD(sfx), ID)
#define DEF_SAME_3(op, T, sfx)                                                                     \
    LOOP3(loop_##op##_##sfx, M(sfx), M(sfx), M(sfx), sc_##op##_##sfx, LD(sfx), LD(sfx), ID)
#define DEF_PRED_1(op, T, sfx) LOOP1(loop_##op##_##sfx, em_sc_u8, M(sfx), sc_##op##_##sfx, LD(sfx), ID)
#define DEF_PRED_2(op, T, sfx) LOOP2(loop_##op##_##sfx, em_sc_u8, M(sfx), sc_##op##_##sfx, LD(sfx), ID)
#define DEF_WHERE_3(op, T, sfx)                                                                    \
    LOOP3(loop_##op##_##sfx, M(sfx), em_sc_u8, M(sfx), sc_##op##_##sfx, AS_BOOL, LD(sfx), ID)

#define APPLY(m, ...) m(__VA_ARGS__)
#define DEF_LOOP(arg, S, T, sfx) APPLY(DEF_LOOP_, UNPACK arg, T, sfx)
#define DEF_LOOP_(op, arity, shape, T, sfx) DEF_##shape##_##arity(op, T, sfx)
#define UNPACK(...) __VA_ARGS__
#define GEN_LOOPS(E, n, dts, arity, shape) EM_FOR_DTYPES_##dts(DEF_LOOP, (n, arity, shape))
#define EM_OP(E, n, kind, ni, no, dts, pr, fl, at, gr) EM_EW_ROW_##kind(GEN_LOOPS, E, n, dts, pr)
#include "ember/ops.def"
#undef EM_OP

/* float16 / bfloat16 loops: SAME-shape ops whose class holds float32 */
#define HALF_SAME_1(op, H, LD, ST) LOOP1(loop_##op##_##H, em_sc_u16, em_sc_u16, sc_##op##_f32, LD, ST)
#define HALF_SAME_2(op, H, LD, ST) LOOP2(loop_##op##_##H, em_sc_u16, em_sc_u16, sc_##op##_f32, LD, ST)
#define HALF_SAME_3(op, H, LD, ST)                                                                 \
    LOOP3(loop_##op##_##H, em_sc_u16, em_sc_u16, em_sc_u16, sc_##op##_f32, LD, LD, ST)
#define HALF_PRED_1(op, H, LD, ST)
#define HALF_PRED_2(op, H, LD, ST)
#define HALF_WHERE_3(op, H, LD, ST)
#define HALF_BOTH(op, arity, shape)                                                                \
    HALF_##shape##_##arity(op, f16, em_sc_f16_to_f32, em_sc_f32_to_f16)                          \
        HALF_##shape##_##arity(op, bf16, em_sc_bf16_to_f32, em_sc_f32_to_bf16)
#define HALF_IF_FLOAT(op, arity, shape) HALF_BOTH(op, arity, shape)
#define HALF_IF_NUMERIC HALF_IF_FLOAT
#define HALF_IF_ALL HALF_IF_FLOAT
#define HALF_IF_INT(op, arity, shape)
#define HALF_IF_INTBOOL(op, arity, shape)
#define HALF_IF_BOOLONLY(op, arity, shape)
#define GEN_HALF(E, n, dts, arity, shape) HALF_IF_##dts(n, arity, shape)
#define EM_OP(E, n, kind, ni, no, dts, pr, fl, at, gr) EM_EW_ROW_##kind(GEN_HALF, E, n, dts, pr)
#include "ember/ops.def"
#undef EM_OP

/* ---- float32 fmod, remainder and floor_divide on contiguous data: the
 * exact one-step fmod of ops_math.h over a block (vectorised), fmodf for
 * the rare elements it does not cover, then the rest of each op's formula
 * (sc_remainder_f32 and sc_floor_divide_f32 with that fmod: the same
 * results, bit for bit). Other layouts take the generated loops. ---- */
#define FBLK 256

static void fmod_block(const float *a, const float *b, float *m, int64_t n) {
    em_sc_i32 done[FBLK];
    for (int64_t i = 0; i < n; i++) m[i] = em_sc_fmodf_step(a[i], b[i], &done[i]);
    for (int64_t i = 0; i < n; i++)
        if (!done[i]) m[i] = fmodf(a[i], b[i]);
}

static void loop_fmod_family_f32(em_op op, char **p, const int64_t *s, int64_t n, em_loop_fn slow) {
    if (s[0] != 4 || s[1] != 4 || s[2] != 4) {
        slow(p, s, n);
        return;
    }
    float *o = (float *)p[0];
    const float *a = (const float *)p[1], *b = (const float *)p[2];
    for (int64_t i0 = 0; i0 < n; i0 += FBLK) {
        int64_t k = n - i0 < FBLK ? n - i0 : FBLK;
        float m[FBLK];
        fmod_block(a + i0, b + i0, m, k);
        if (op == EM_OP_FMOD) {
            memcpy(o + i0, m, (size_t)k * sizeof *m);
        } else if (op == EM_OP_REMAINDER) {
            for (int64_t i = 0; i < k; i++) { /* sc_remainder_f32's correction */
                float bi = b[i0 + i], mi = m[i];
                o[i0 + i] = (mi != 0 && ((bi < 0) != (mi < 0))) ? mi + bi : mi;
            }
        } else {
            for (int64_t i = 0; i < k; i++) o[i0 + i] = em_sc_floor_divide_from_fmod_f32(a[i0 + i], b[i0 + i], m[i]);
        }
    }
}
static void loop_fmod_fast_f32(char **p, const int64_t *s, int64_t n) {
    loop_fmod_family_f32(EM_OP_FMOD, p, s, n, loop_fmod_f32);
}
static void loop_remainder_fast_f32(char **p, const int64_t *s, int64_t n) {
    loop_fmod_family_f32(EM_OP_REMAINDER, p, s, n, loop_remainder_f32);
}
static void loop_floor_divide_fast_f32(char **p, const int64_t *s, int64_t n) {
    loop_fmod_family_f32(EM_OP_FLOOR_DIVIDE, p, s, n, loop_floor_divide_f32);
}

/* ---- the loop tables ---- */

/* ew_loops[op][compute dtype] */
#define ENTRY(op, S, T, sfx) [EM_DTYPE_##S] = loop_##op##_##sfx,
#define TABLE_ROW(E, n, dts, arity, shape) [EM_OP_##E] = {EM_FOR_DTYPES_##dts(ENTRY, n)},
static const em_loop_fn ew_loops[EM_OP_COUNT][EM_DTYPE_COUNT] = {
#define EM_OP(E, n, kind, ni, no, dts, pr, fl, at, gr) EM_EW_ROW_##kind(TABLE_ROW, E, n, dts, pr)
#include "ember/ops.def"
#undef EM_OP
};

/* half_loops[op][0: float16, 1: bfloat16] */
#define HALF_ENTRY_SAME(op) {loop_##op##_f16, loop_##op##_bf16}
#define HALF_ENTRY_PRED(op) {NULL, NULL}
#define HALF_ENTRY_WHERE(op) {NULL, NULL}
#define HALF_ROW_YES(E, n, shape) [EM_OP_##E] = HALF_ENTRY_##shape(n),
#define HALF_ROW_FLOAT HALF_ROW_YES
#define HALF_ROW_NUMERIC HALF_ROW_YES
#define HALF_ROW_ALL HALF_ROW_YES
#define HALF_ROW_INT(E, n, shape)
#define HALF_ROW_INTBOOL(E, n, shape)
#define HALF_ROW_BOOLONLY(E, n, shape)
#define HALF_TABLE_ROW(E, n, dts, arity, shape) HALF_ROW_##dts(E, n, shape)
static const em_loop_fn half_loops[EM_OP_COUNT][2] = {
#define EM_OP(E, n, kind, ni, no, dts, pr, fl, at, gr) EM_EW_ROW_##kind(HALF_TABLE_ROW, E, n, dts, pr)
#include "ember/ops.def"
#undef EM_OP
};

/* ---- casts: cast_loops[from][to] ---- */

#define DEF_CAST(FS, FT, fsfx, TS, TT, tsfx)                                                       \
    LOOP1(loop_cast_##fsfx##_##tsfx, M(tsfx), M(fsfx), sc_cast_##fsfx##_##tsfx, LD(fsfx), ID)
#define CAST_INNER(from, S, T, sfx) APPLY(DEF_CAST, UNPACK from, S, T, sfx)
#define CAST_OUTER(unused, S, T, sfx) EM_FOR_DTYPES_STORED_INNER(CAST_INNER, (S, T, sfx))
EM_FOR_DTYPES_STORED(CAST_OUTER, _)

#define CAST_ENTRY_2(FS, FT, fsfx, TS, TT, tsfx) [EM_DTYPE_##TS] = loop_cast_##fsfx##_##tsfx,
#define CAST_ENTRY(from, S, T, sfx) APPLY(CAST_ENTRY_2, UNPACK from, S, T, sfx)
#define CAST_ROW(unused, S, T, sfx)                                                                \
    [EM_DTYPE_##S] = {EM_FOR_DTYPES_STORED_INNER(CAST_ENTRY, (S, T, sfx))},
static const em_loop_fn cast_loops[EM_DTYPE_COUNT][EM_DTYPE_COUNT] = {
    EM_FOR_DTYPES_STORED(CAST_ROW, _)};

bool em_cast_table_complete(void) {
    for (int a = 0; a < EM_DTYPE_COUNT; a++)
        for (int b = 0; b < EM_DTYPE_COUNT; b++)
            if (!cast_loops[a][b]) return false;
    return true;
}

/* ---- same-dtype copies of transposed data: 16 x 16 blocks through a
 * buffer, so every cache line read or written is used whole at once (a
 * run-by-run copy reads one line per element, and power-of-two row strides
 * make those lines fight over the same cache sets) ---- */
#define BLK 16

typedef struct {
    const em_iter *it;
    int64_t rows, cols, brows, bcols; /* the two innermost dims, in blocks */
    size_t item;
} tr_ctx;

#define TRANSPOSE_BLOCK(T)                                                                         \
    {                                                                                              \
        T buf[BLK][BLK];                                                                           \
        for (int64_t c = 0; c < nc; c++) { /* source: contiguous along the rows */                 \
            const char *sp = src + (c0 + c) * ss_c + r0 * ss_r;                                    \
            for (int64_t r = 0; r < nr; r++) buf[r][c] = *(const T *)(sp + r * ss_r);              \
        }                                                                                          \
        for (int64_t r = 0; r < nr; r++) {                                                         \
            char *dp = dst + (r0 + r) * ds_r + c0 * ds_c;                                          \
            for (int64_t c = 0; c < nc; c++) *(T *)(dp + c * ds_c) = buf[r][c];                    \
        }                                                                                          \
    }

static void transpose_blocks(void *arg, int64_t b, int64_t e) {
    const tr_ctx *x = arg;
    const em_iter *it = x->it;
    int last = it->ndim - 1;
    int64_t ds_r = it->strides[0][last - 1], ds_c = it->strides[0][last];
    int64_t ss_r = it->strides[1][last - 1], ss_c = it->strides[1][last];
    for (int64_t t = b; t < e; t++) {
        int64_t bc = t % x->bcols, br = (t / x->bcols) % x->brows, outer = t / (x->bcols * x->brows);
        char *dst = it->data[0];
        const char *src = it->data[1];
        for (int d = last - 2; d >= 0; d--) {
            int64_t i = outer % it->shape[d];
            outer /= it->shape[d];
            dst += i * it->strides[0][d];
            src += i * it->strides[1][d];
        }
        int64_t r0 = br * BLK, c0 = bc * BLK;
        int64_t nr = x->rows - r0 < BLK ? x->rows - r0 : BLK, nc = x->cols - c0 < BLK ? x->cols - c0 : BLK;
        switch (x->item) {
        case 1: TRANSPOSE_BLOCK(uint8_t) break;
        case 2: TRANSPOSE_BLOCK(uint16_t) break;
        case 4: TRANSPOSE_BLOCK(uint32_t) break;
        default: TRANSPOSE_BLOCK(uint64_t) break;
        }
    }
}

em_status em_copy_into(em_tensor *dst, em_tensor *src) {
    em_loop_fn loop = cast_loops[src->dtype][dst->dtype];
    em_iter it;
    em_iter_init(&it, dst, &src, 1);
    int last = it.ndim - 1;
    size_t item = em_dtype_size(src->dtype);
    if (src->dtype == dst->dtype && it.ndim >= 2 && it.shape[last] >= BLK && it.shape[last - 1] >= BLK &&
        it.strides[0][last] == (int64_t)item && it.strides[1][last - 1] == (int64_t)item &&
        it.strides[1][last] > 64) { /* dst rows contiguous, src columns contiguous */
        tr_ctx x = {&it, it.shape[last - 1], it.shape[last], (it.shape[last - 1] + BLK - 1) / BLK,
                    (it.shape[last] + BLK - 1) / BLK, item};
        int64_t outer = it.numel / (x.rows * x.cols);
        em_parallel_for(outer * x.brows * x.bcols, EM_GRAIN_ELEMENTWISE / (BLK * BLK) + 1,
                        transpose_blocks, &x);
        return EM_OK;
    }
    em_iter_run(&it, loop, EM_GRAIN_ELEMENTWISE);
    return EM_OK;
}

em_status cpu_cast(em_op op, em_tensor *const *in, int n_in, const em_attrs *attrs, em_tensor **out) {
    (void)op;
    (void)attrs;
    return em_copy_into(out[0], in[0]);
}

/* ---- the driver ---- */

em_tensor *em_converted(em_tensor *src, em_dtype dt) {
    em_tensor *t = em_tensor_empty(src->shape, src->ndim, dt, src->device);
    if (t && em_copy_into(t, src) != EM_OK) {
        em_tensor_release(t);
        return NULL;
    }
    return t;
}

em_tensor *em_dense(em_tensor *t) {
    if (!t || em_tensor_is_contiguous(t)) {
        if (t) em_tensor_retain(t);
        return t;
    }
    return em_converted(t, t->dtype);
}

/* Integer division by zero has no value to give, so the eager kernels of
 * the EM_F_INT_DIV ops raise as PyTorch does; `divisor` is already in the
 * computation's integer dtype (a zero made by wrapping counts). */
static em_status check_divisor(em_op op, em_tensor *divisor) {
    if (divisor->numel == 0) return EM_OK;
    /* a broadcast dim repeats its elements: one of each is enough */
    int64_t shape[EM_MAX_DIMS];
    for (int d = 0; d < divisor->ndim; d++) shape[d] = divisor->strides[d] == 0 ? 1 : divisor->shape[d];
    em_tensor *each = em_tensor_alias(divisor, divisor->offset, shape, divisor->strides, divisor->ndim);
    em_tensor *dense = each ? em_dense(each) : NULL;
    em_tensor_release(each);
    if (!dense) return em_last_status();
    /* an integer is zero exactly when all its bytes are */
    size_t size = em_dtype_size(dense->dtype);
    const unsigned char *p = em_tensor_data(dense);
    bool zero = false;
    for (int64_t i = 0; i < dense->numel && !zero; i++, p += size) {
        unsigned char any = 0;
        for (size_t b = 0; b < size; b++) any |= p[b];
        zero = any == 0;
    }
    em_tensor_release(dense);
    return zero ? em_error(EM_ERR_RUNTIME, "%s: ZeroDivisionError: integer division by zero", em_op_name(op))
                : EM_OK;
}

/* The loop of elementwise op `op` computing in dtype cd. */
static em_loop_fn loop_of(em_op op, em_dtype cd) {
    em_loop_fn loop = ew_loops[op][cd];
    if (cd == EM_DTYPE_F32) /* the fmod family's bulk loops */
        loop = op == EM_OP_FMOD ? loop_fmod_fast_f32
               : op == EM_OP_REMAINDER ? loop_remainder_fast_f32
               : op == EM_OP_FLOOR_DIVIDE ? loop_floor_divide_fast_f32
                                          : loop;
    return loop;
}

/* Does the loop read operands of these dtypes and write the result's
 * directly, with no conversion on either side? */
static bool is_direct(em_op op, const em_type *in, int n, em_dtype result, em_dtype cd) {
    bool direct = result == em_ew_native_result(op, cd);
    for (int i = 0; i < n && direct; i++) direct = in[i].dtype == em_ew_operand_dtype(op, i, cd);
    return direct;
}

em_loop_fn em_ew_direct_loop(em_op op, const em_type *in, int n_in, em_dtype result) {
    const em_op_info *info = em_op_get(op);
    if (info->kind == EM_KIND_CAST) return n_in == 1 ? cast_loops[in[0].dtype][result] : NULL;
    if (info->kind != EM_KIND_UNARY && info->kind != EM_KIND_BINARY && info->kind != EM_KIND_TERNARY)
        return NULL;
    if (n_in != info->n_in) return NULL;
    em_dtype cd = em_ew_compute_dtype(op, in, n_in, result);
    /* (integer division and integer pow check their operands first) */
    if (!em_dtype_is_float(cd) && ((info->flags & EM_F_INT_DIV) || op == EM_OP_POW)) return NULL;
    return is_direct(op, in, n_in, result, cd) ? loop_of(op, cd) : NULL;
}

em_status em_elementwise_into(em_op op, em_tensor *const *in, em_tensor *out) {
    const em_op_info *info = em_op_get(op);
    int n = info->n_in;
    em_type types[EM_ITER_MAX_OPS - 1];
    for (int i = 0; i < n; i++) types[i] = em_tensor_type(in[i]);
    em_dtype cd = em_ew_compute_dtype(op, types, n, out->dtype);
    em_dtype native = em_ew_native_result(op, cd);
    em_loop_fn loop = loop_of(op, cd);
    if (!loop)
        return em_error(EM_ERR_DTYPE, "%s: not implemented for %s", info->name, em_dtype_long_name(cd));

    bool direct = is_direct(op, types, n, out->dtype, cd);
    int64_t grain = (info->flags & EM_F_COSTLY) ? EM_GRAIN_COSTLY : EM_GRAIN_ELEMENTWISE;
    bool int_div = (info->flags & EM_F_INT_DIV) && !em_dtype_is_float(cd);
    /* PyTorch refuses a negative Python-number exponent on integers (the
     * result would silently be 0); tensor exponents are not checked. */
    if (op == EM_OP_POW && !em_dtype_is_float(cd) && in[1]->is_wrapped_number &&
        em_tensor_get_f64(in[1], 0) < 0)
        return em_error(EM_ERR_VALUE, "pow: Integers to negative integer powers are not allowed");
    em_iter it;
    if (direct) {
        em_status st = int_div ? check_divisor(op, in[1]) : EM_OK;
        if (st != EM_OK) return st;
        em_iter_init(&it, out, in, n);
        em_iter_run(&it, loop, grain);
        return EM_OK;
    }
    if (em_dtype_is_half(out->dtype) && native == EM_DTYPE_F32) {
        em_loop_fn hl = half_loops[op][out->dtype == EM_DTYPE_BF16];
        bool all_half = hl != NULL;
        for (int i = 0; i < n && all_half; i++) all_half = in[i]->dtype == out->dtype;
        if (all_half) {
            em_iter_init(&it, out, in, n);
            em_iter_run(&it, hl, grain);
            return EM_OK;
        }
    }
    /* General path: inputs into the loop's dtypes, the result through a
     * temporary of the loop's dtype when it differs from out's. */
    em_tensor *args[EM_ITER_MAX_OPS - 1], *tmp[EM_ITER_MAX_OPS - 1] = {NULL}, *res = out;
    em_status st = EM_OK;
    for (int i = 0; i < n; i++) {
        args[i] = in[i];
        em_dtype want = em_ew_operand_dtype(op, i, cd), via = em_ew_operand_via(op, i, types, n, out->dtype);
        if (in[i]->dtype == want && via == want) continue;
        if (via != want) { /* rounded to the common half dtype first */
            em_tensor *h = em_converted(in[i], via);
            tmp[i] = h ? em_converted(h, want) : NULL;
            em_tensor_release(h);
        } else {
            tmp[i] = em_converted(in[i], want);
        }
        if (!tmp[i]) {
            st = em_last_status();
            goto done;
        }
        args[i] = tmp[i];
    }
    if (int_div && (st = check_divisor(op, args[1])) != EM_OK) goto done;
    if (out->dtype != native &&
        !(res = em_tensor_empty(out->shape, out->ndim, native, out->device))) {
        st = em_last_status();
        res = out;
        goto done;
    }
    em_iter_init(&it, res, args, n);
    em_iter_run(&it, loop, grain);
    if (res != out) st = em_copy_into(out, res);
done:
    if (res != out) em_tensor_release(res);
    for (int i = 0; i < n; i++) em_tensor_release(tmp[i]);
    return st;
}

em_status cpu_elementwise(em_op op, em_tensor *const *in, int n_in, const em_attrs *attrs, em_tensor **out) {
    (void)attrs;
    return em_elementwise_into(op, in, out[0]);
}
