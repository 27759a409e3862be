/*
 * elementwise.c - eager CPU kernels for every elementwise op and cast.
 *
 * The inner loops are generated from ops.def: for each elementwise row and
 * each dtype of its class, one loop calling sc_<op>_<dtype> from ops_math.h
 * (the same definition the code generators compile), with fast paths the
 * compiler vectorises: all operands contiguous, and one operand a broadcast
 * scalar. Everything else about iteration is em_iter's job.
 *
 * Inputs whose dtype differs from the op's compute dtype are cast first
 * (into a temporary), so every loop sees a single dtype.
 */
#include "../kernels.h"
#include "ember/ops_math.h"

/* ---- generated inner loops ---- */

#define SZ(T) ((int64_t)sizeof(T))

#define DEF_UNARY(name, S, T, sfx)                                                                 \
    static void loop_##name##_##sfx(char **p, const int64_t *s, int64_t n) {                       \
        if (s[0] == SZ(T) && s[1] == SZ(T)) {                                                      \
            T *o = (T *)p[0];                                                                      \
            const T *a = (const T *)p[1];                                                          \
            for (int64_t i = 0; i < n; i++) o[i] = sc_##name##_##sfx(a[i]);                        \
        } else if (s[0] == SZ(T) && s[1] == 0) {                                                   \
            T *o = (T *)p[0];                                                                      \
            T v = sc_##name##_##sfx(*(const T *)p[1]);                                             \
            for (int64_t i = 0; i < n; i++) o[i] = v;                                              \
        } else {                                                                                   \
            for (int64_t i = 0; i < n; i++)                                                        \
                *(T *)(p[0] + i * s[0]) = sc_##name##_##sfx(*(const T *)(p[1] + i * s[1]));        \
        }                                                                                          \
    }

#define DEF_BINARY(name, S, T, sfx)                                                                \
    static void loop_##name##_##sfx(char **p, const int64_t *s, int64_t n) {                       \
        T *o = (T *)p[0];                                                                          \
        const T *a = (const T *)p[1], *b = (const T *)p[2];                                        \
        if (s[0] == SZ(T) && s[1] == SZ(T) && s[2] == SZ(T)) {                                     \
            for (int64_t i = 0; i < n; i++) o[i] = sc_##name##_##sfx(a[i], b[i]);                  \
        } else if (s[0] == SZ(T) && s[1] == SZ(T) && s[2] == 0) {                                  \
            T bv = b[0];                                                                           \
            for (int64_t i = 0; i < n; i++) o[i] = sc_##name##_##sfx(a[i], bv);                    \
        } else if (s[0] == SZ(T) && s[1] == 0 && s[2] == SZ(T)) {                                  \
            T av = a[0];                                                                           \
            for (int64_t i = 0; i < n; i++) o[i] = sc_##name##_##sfx(av, b[i]);                    \
        } else {                                                                                   \
            for (int64_t i = 0; i < n; i++)                                                        \
                *(T *)(p[0] + i * s[0]) = sc_##name##_##sfx(*(const T *)(p[1] + i * s[1]),         \
                                                            *(const T *)(p[2] + i * s[2]));        \
        }                                                                                          \
    }

#define GEN_LOOPS(E, n, dts, arity) EM_FOR_DTYPES_##dts(DEF_LOOP_##arity, n)
#define DEF_LOOP_1 DEF_UNARY
#define DEF_LOOP_2 DEF_BINARY
#define EM_OP(E, n, kind, ni, no, dts, pr, fl, at) EM_EW_ROW_##kind(GEN_LOOPS, E, n, dts)
#include "ember/ops.def"
#undef EM_OP

/* ---- the loop table: ew_loops[op][compute dtype] ---- */

#define ENTRY(name, S, T, sfx) [EM_DTYPE_##S] = loop_##name##_##sfx,
#define TABLE_ROW(E, n, dts, arity) [EM_OP_##E] = {EM_FOR_DTYPES_##dts(ENTRY, n)},
static const em_loop_fn ew_loops[EM_OP_COUNT][EM_DTYPE_COUNT] = {
#define EM_OP(E, n, kind, ni, no, dts, pr, fl, at) EM_EW_ROW_##kind(TABLE_ROW, E, n, dts)
#include "ember/ops.def"
#undef EM_OP
};

/* ---- casts: cast_loops[from][to] ---- */

#define DEF_CAST(FS, FT, fsfx, TS, TT, tsfx)                                                       \
    static void loop_cast_##fsfx##_##tsfx(char **p, const int64_t *s, int64_t n) {                \
        if (s[0] == SZ(TT) && s[1] == SZ(FT)) {                                                    \
            TT *o = (TT *)p[0];                                                                    \
            const FT *a = (const FT *)p[1];                                                        \
            for (int64_t i = 0; i < n; i++) o[i] = sc_cast_##fsfx##_##tsfx(a[i]);                  \
        } else {                                                                                   \
            for (int64_t i = 0; i < n; i++)                                                        \
                *(TT *)(p[0] + i * s[0]) = sc_cast_##fsfx##_##tsfx(*(const FT *)(p[1] + i * s[1])); \
        }                                                                                          \
    }
#define UNPACK(...) __VA_ARGS__
#define APPLY(m, ...) m(__VA_ARGS__)
#define CAST_INNER(from, S, T, sfx) APPLY(DEF_CAST, UNPACK from, S, T, sfx)
#define CAST_OUTER(unused, S, T, sfx) EM_FOR_DTYPES_ALL_INNER(CAST_INNER, (S, T, sfx))
EM_FOR_DTYPES_ALL(CAST_OUTER, _)

#define CAST_ENTRY_2(FS, FT, fsfx, TS, TT, tsfx) [EM_DTYPE_##TS] = loop_cast_##fsfx##_##tsfx,
#define CAST_ENTRY(from, S, T, sfx) APPLY(CAST_ENTRY_2, UNPACK from, S, T, sfx)
#define CAST_ROW(unused, S, T, sfx) [EM_DTYPE_##S] = {EM_FOR_DTYPES_ALL_INNER(CAST_ENTRY, (S, T, sfx))},
static const em_loop_fn cast_loops[EM_DTYPE_COUNT][EM_DTYPE_COUNT] = {
    EM_FOR_DTYPES_ALL(CAST_ROW, _)};

em_status em_copy_into(em_tensor *dst, em_tensor *src) {
    em_loop_fn loop = cast_loops[src->dtype][dst->dtype];
    if (!loop)
        return em_error(EM_ERR_INTERNAL, "copy: no cast from %s to %s", em_dtype_name(src->dtype),
                        em_dtype_name(dst->dtype));
    em_iter it;
    em_iter_init(&it, dst, &src, 1);
    em_iter_run(&it, loop, EM_GRAIN_ELEMENTWISE);
    return EM_OK;
}

em_status cpu_cast(em_op op, em_tensor *const *in, const em_attrs *attrs, em_tensor **out) {
    (void)op;
    (void)attrs;
    return em_copy_into(out[0], in[0]);
}

em_status cpu_elementwise(em_op op, em_tensor *const *in, const em_attrs *attrs, em_tensor **out) {
    (void)attrs;
    const em_op_info *info = em_op_get(op);
    em_dtype cd = em_op_compute_dtype(op, out[0]->dtype);
    em_loop_fn loop = ew_loops[op][cd];
    if (!loop)
        return em_error(EM_ERR_DTYPE, "%s: not implemented for %s", info->name,
                        em_dtype_name(cd));
    em_tensor *args[EM_ITER_MAX_OPS - 1], *tmp[EM_ITER_MAX_OPS - 1] = {NULL};
    em_status st = EM_OK;
    for (int i = 0; i < info->n_in; i++) {
        args[i] = in[i];
        if (in[i]->dtype == cd) continue;
        tmp[i] = em_tensor_empty(in[i]->shape, in[i]->ndim, cd, in[i]->device);
        if (!tmp[i]) {
            st = em_last_status();
            goto done;
        }
        if ((st = em_copy_into(tmp[i], in[i])) != EM_OK) goto done;
        args[i] = tmp[i];
    }
    em_iter it;
    em_iter_init(&it, out[0], args, info->n_in);
    em_iter_run(&it, loop, EM_GRAIN_ELEMENTWISE);
done:
    for (int i = 0; i < info->n_in; i++) em_tensor_release(tmp[i]);
    return st;
}

bool em_cast_table_complete(void) {
    for (int a = 0; a < EM_DTYPE_COUNT; a++)
        for (int b = 0; b < EM_DTYPE_COUNT; b++)
            if (!cast_loops[a][b]) return false;
    return true;
}
