/*
 * reduce.c - reductions over any list of dims: sum, mean, prod, amax, amin,
 * argmax, argmin, all, any, var, std, norm, logsumexp.
 *
 * The input's dims split into kept dims K (the output's, in order) and
 * reduced dims R; each group is coalesced. Every reduction is a "kind" with
 * one per-element update rule, instantiated per dtype into run functions
 * (a contiguous or strided run of one output's elements) and column
 * functions (one element of each of TILE adjacent outputs). Two strategies:
 *   rows:    each output reduces its R-space in fixed blocks of BLOCK
 *            elements whose partial results combine in order, so results do
 *            not depend on the number of threads;
 *   columns: when K's innermost dim is contiguous and R's is not (a sum over
 *            dim 0), tiles of up to TILE adjacent outputs take a whole row at
 *            a time, which vectorises and reads memory once; the rows go in
 *            fixed blocks of about BLOCK elements whose partial results
 *            combine in order, so each thread streams its own contiguous
 *            rows (see columns_task).
 * Floats accumulate in double, integers and bool in int64 (wrapping). var
 * and logsumexp take two passes: the mean (or the max) first, then the sum of
 * squared deviations (of exp(x - max)).
 */
#include <math.h>
#include <string.h>

#include "../kernels.h"
#include "ember/alloc.h"
#include "ember/ops_math.h"
#include "ember/parallel.h"
#include "minmax.h"
#include "rowexp.h"

#define BLOCK 65536
#define TILE 1024            /* outputs per column task: 8 KB of double lanes, in L1 */
#define COLUMN_BLOCK 262144  /* elements per block of rows in the columns strategy */

typedef enum {
    K_SUM,
    K_PROD,
    K_MAX,
    K_MIN,
    K_ARGMAX,
    K_ARGMIN,
    K_ALL,
    K_ANY,
    K_SUMSQDEV, /* sum (x - param)^2 */
    K_SUMABS,
    K_SUMPOW,   /* sum |x|^param */
    K_MAXABS,
    K_MINABS,
    K_COUNTNZ,
    K_SUMEXP,   /* sum exp(x - param) */
    K_COUNT
} red_kind;

/* f for float data, i for integer data; idx for arg-reductions. */
typedef struct {
    double f;
    int64_t i;
    int64_t idx;
} acc_t;

static acc_t combine(red_kind k, bool fl, acc_t a, acc_t b);

/* ---- per-element update rules ----
 * F: float data as double x; I: integer data as int64 x. A is the acc_t. */
#define F_K_SUM(A, x, j, P) (A).f += (x)
#define F_K_PROD(A, x, j, P) (A).f *= (x)
/* NaN wins and stays, as in PyTorch */
#define F_K_MAX(A, x, j, P) (A).f = em_fold_max_step((A).f, (x), false)
#define F_K_MIN(A, x, j, P) (A).f = em_fold_max_step((A).f, (x), true)
#define F_K_ARGMAX(A, x, j, P)                                                                     \
    if ((A).idx < 0 || ((A).f == (A).f && ((x) > (A).f || (x) != (x)))) {                          \
        (A).f = (x);                                                                               \
        (A).idx = (j);                                                                             \
    }
#define F_K_ARGMIN(A, x, j, P)                                                                     \
    if ((A).idx < 0 || ((A).f == (A).f && ((x) < (A).f || (x) != (x)))) {                          \
        (A).f = (x);                                                                               \
        (A).idx = (j);                                                                             \
    }
#define F_K_ALL(A, x, j, P) (A).i &= ((x) != 0)
#define F_K_ANY(A, x, j, P) (A).i |= ((x) != 0)
#define F_K_SUMSQDEV(A, x, j, P) (A).f += ((x) - (P)) * ((x) - (P))
#define F_K_SUMABS(A, x, j, P) (A).f += fabs(x)
#define F_K_SUMPOW(A, x, j, P) (A).f += pow(fabs(x), (P))
#define F_K_MAXABS(A, x, j, P) F_K_MAX(A, fabs(x), j, P)
#define F_K_MINABS(A, x, j, P) F_K_MIN(A, fabs(x), j, P)
#define F_K_COUNTNZ(A, x, j, P) (A).f += ((x) != 0)
#define F_K_SUMEXP(A, x, j, P) (A).f += exp((x) - (P))

#define I_K_SUM(A, x, j, P) (A).i = (int64_t)((uint64_t)(A).i + (uint64_t)(x))
#define I_K_PROD(A, x, j, P) (A).i = (int64_t)((uint64_t)(A).i * (uint64_t)(x))
#define I_K_MAX(A, x, j, P) (A).i = (x) > (A).i ? (x) : (A).i
#define I_K_MIN(A, x, j, P) (A).i = (x) < (A).i ? (x) : (A).i
#define I_K_ARGMAX(A, x, j, P)                                                                     \
    if ((A).idx < 0 || (x) > (A).i) {                                                              \
        (A).i = (x);                                                                               \
        (A).idx = (j);                                                                             \
    }
#define I_K_ARGMIN(A, x, j, P)                                                                     \
    if ((A).idx < 0 || (x) < (A).i) {                                                              \
        (A).i = (x);                                                                               \
        (A).idx = (j);                                                                             \
    }
#define I_K_ALL(A, x, j, P) (A).i &= ((x) != 0)
#define I_K_ANY(A, x, j, P) (A).i |= ((x) != 0)

/* Element i of a run as double / int64. */
#define LD_FLOAT(T, sfx, p) sc_cast_##sfx##_f64(p)
#define LD_INT(T, sfx, p) ((int64_t)(p))

/* run_<kind>_<dtype>: fold n elements at ptr (stride in elements), whose
 * reduced indices start at j0, into *acc. */
#define RUN(FAM, KIND, T, sfx, LD)                                                                 \
    static void run_##KIND##_##sfx(acc_t *acc, const char *ptr, int64_t stride, int64_t n,         \
                                   int64_t j0, double param) {                                     \
        const T *x = (const T *)ptr;                                                               \
        acc_t a = *acc;                                                                            \
        int64_t i = 0;                                                                             \
        (void)param;                                                                               \
        if (stride == 1 && (KIND == K_ARGMAX || KIND == K_ARGMIN) && (T)0.5 != 0 && sizeof(T) >= 4) { \
            double bv;                                                                             \
            int64_t bi;                                                                            \
            bool mn = KIND == K_ARGMIN;                                                            \
            i = sizeof(T) == 4 ? vargminmax_f32((const float *)x, n, mn, &bv, &bi)                 \
                               : vargminmax_f64((const double *)x, n, mn, &bv, &bi);               \
            if (i) { /* the lanes' winner against the earlier ranges in a */                       \
                acc_t b = {bv, 0, j0 + bi};                                                        \
                a = combine(KIND, true, a, b);                                                     \
            }                                                                                      \
        }                                                                                          \
        for (; i < n; i++) {                                                                       \
            FAM##_##KIND(a, LD(T, sfx, x[i * stride]), j0 + i, param);                             \
        }                                                                                          \
        *acc = a;                                                                                  \
    }
/* col_<kind>_<dtype>: one row of len adjacent outputs' elements. */
#define COL(FAM, KIND, T, sfx, LD)                                                                 \
    static void col_##KIND##_##sfx(acc_t *acc, const char *row, int64_t len, int64_t j,            \
                                   const double *param) {                                          \
        const T *x = (const T *)row;                                                               \
        for (int64_t c = 0; c < len; c++) {                                                        \
            FAM##_##KIND(acc[c], LD(T, sfx, x[c]), j, param ? param[c] : 0.0);                     \
        }                                                                                          \
    }


/* Contiguous runs fold into LANES independent accumulators, combined into
 * the result in a fixed order at the end of the run, so the loop vectorises
 * and results still do not depend on the thread count. UPD(l, v, P) updates
 * a lane with element v; FOLD(A, l) folds a finished lane into the acc_t. */
#define LANES EM_FOLD_LANES
#define LANE_RUN(FAM, KIND, T, sfx, LD, LT, LDX, INIT, UPD, FOLD)                                  \
    static void run_##KIND##_##sfx(acc_t *acc, const char *ptr, int64_t stride, int64_t n,         \
                                   int64_t j0, double param) {                                     \
        const T *x = (const T *)ptr;                                                               \
        int64_t i = 0;                                                                             \
        acc_t a = *acc;                                                                            \
        (void)j0;                                                                                  \
        if (stride == 1 && (KIND == K_MAX || KIND == K_MIN) && (T)0.5 != 0 && sizeof(T) == 4) {   \
            a.f = em_fold_max_run_f32((const float *)x, n, KIND == K_MIN, a.f); /* ops_fold.h */   \
            i = n;                                                                                 \
        } else if (stride == 1 && IS_MINMAX(KIND) && (T)0.5 != 0 && sizeof(T) >= 4) {             \
            double vl[16];                                                                         \
            bool mn = KIND == K_MIN || KIND == K_MINABS, ab = KIND == K_MAXABS || KIND == K_MINABS; \
            i = sizeof(T) == 4 ? em_fold_vminmax_f32((const float *)x, n, mn, ab, vl)              \
                               : em_fold_vminmax_f64((const double *)x, n, mn, ab, vl);            \
            int lanes = sizeof(T) == 4 ? EM_FOLD_VF32 : EM_FOLD_VF64;                              \
            for (int k = 0; k < lanes && i > 0; k++) FOLD(a, vl[k]);                               \
        }                                                                                          \
        if (stride == 1 && KIND == K_SUM && sizeof(T) == 4 && (T)0.5 != 0) { /* ops_fold.h */      \
            a.f = em_fold_sum_run_f32((const float *)x, n, a.f);                                   \
            i = n;                                                                                 \
        }                                                                                          \
        if (stride == 1 && n - i >= LANES) {                                                       \
            LT l[LANES];                                                                           \
            for (int k = 0; k < LANES; k++) l[k] = INIT;                                           \
            for (; i + LANES <= n; i += LANES)                                                     \
                for (int k = 0; k < LANES; k++) {                                                  \
                    LT v = LDX(x[i + k]);                                                          \
                    UPD(l[k], v, param);                                                           \
                }                                                                                  \
            for (int k = 0; k < LANES; k++) FOLD(a, l[k]);                                         \
        }                                                                                          \
        for (; i < n; i++) { /* the tail (and strided runs) by the same rules */                  \
            LT t = INIT, v = LDX(x[i * stride]);                                                   \
            UPD(t, v, param);                                                                      \
            FOLD(a, t);                                                                            \
        }                                                                                          \
        *acc = a;                                                                                  \
    }

/* The same rules across a row of up to TILE adjacent outputs (the columns
 * strategy): lane c is output c, so the loop over c vectorises. */
#define LANE_COL(KIND, T, sfx, LT, LDX, INIT, UPD, FOLD)                                          \
    static void linit_##KIND##_##sfx(void *lanes, int64_t len) {                                   \
        LT *l = lanes;                                                                             \
        for (int64_t c = 0; c < len; c++) l[c] = INIT;                                             \
    }                                                                                              \
    static void lcol_##KIND##_##sfx(void *lanes, const char *row, int64_t len,                     \
                                    const double *param) {                                         \
        LT *l = lanes;                                                                             \
        const T *x = (const T *)row;                                                               \
        if (param)                                                                                 \
            for (int64_t c = 0; c < len; c++) {                                                    \
                LT v = LDX(x[c]);                                                                  \
                UPD(l[c], v, param[c]);                                                            \
            }                                                                                      \
        else                                                                                       \
            for (int64_t c = 0; c < len; c++) {                                                    \
                LT v = LDX(x[c]);                                                                  \
                UPD(l[c], v, 0.0);                                                                 \
            }                                                                                      \
    }                                                                                              \
    static void lfold_##KIND##_##sfx(acc_t *acc, const void *lanes, int64_t len) {                 \
        const LT *l = lanes;                                                                       \
        for (int64_t c = 0; c < len; c++) FOLD(acc[c], l[c]);                                      \
    }

#define IS_MINMAX(KIND) (KIND == K_MAX || KIND == K_MIN || KIND == K_MAXABS || KIND == K_MINABS)

/* lane rules: floats as double lanes, integers as int64 lanes */
#define L_SUM(l, v, P) l += v
#define L_PROD(l, v, P) l *= v
#define L_MAX(l, v, P) l = em_fold_max_lane(l, v, false) /* NaN wins and stays */
#define L_MIN(l, v, P) l = em_fold_max_lane(l, v, true)
#define L_MAXABS(l, v, P) L_MAX(l, fabs(v), P)
#define L_MINABS(l, v, P) L_MIN(l, fabs(v), P)
#define L_SUMSQDEV(l, v, P) l += (v - P) * (v - P)
#define L_SUMABS(l, v, P) l += fabs(v)
#define L_COUNTNZ(l, v, P) l += (v != 0)
/* exp(x - max) in float for float32 and the 16-bit floats (ops_math.h's
 * vectorised exp, as PyTorch computes it in float), libm's for float64 */
#define L_SUMEXP_F32(l, v, P) l += (double)sc_exp_f32((float)(v - P))
#define L_SUMEXP_F64(l, v, P) l += exp(v - P)
#define L_ISUM(l, v, P) l = (int64_t)((uint64_t)l + (uint64_t)v)
#define L_IPROD(l, v, P) l = (int64_t)((uint64_t)l * (uint64_t)v)
#define L_IMAX(l, v, P) l = v > l ? v : l
#define L_IMIN(l, v, P) l = v < l ? v : l

#define FOLD_SUM(A, l) (A).f += (l)
#define FOLD_PROD(A, l) (A).f *= (l)
#define FOLD_MAX(A, l) F_K_MAX(A, l, 0, 0)
#define FOLD_MIN(A, l) F_K_MIN(A, l, 0, 0)
#define FOLD_ISUM(A, l) I_K_SUM(A, l, 0, 0)
#define FOLD_IPROD(A, l) I_K_PROD(A, l, 0, 0)
#define FOLD_IMAX(A, l) I_K_MAX(A, l, 0, 0)
#define FOLD_IMIN(A, l) I_K_MIN(A, l, 0, 0)

#define LDF(sfx) sc_cast_##sfx##_f64
#define LDI(x) ((int64_t)(x))
#define LANE_BOTH(FAM, KIND, T, sfx, LD, LT, LDX, INIT, UPD, FOLD)                                 \
    LANE_RUN(FAM, KIND, T, sfx, LD, LT, LDX, INIT, UPD, FOLD)                                      \
    LANE_COL(KIND, T, sfx, LT, LDX, INIT, UPD, FOLD)
#define FLOAT_LANE_RUNS(T, sfx, SUMEXP)                                                            \
    LANE_BOTH(F, K_SUM, T, sfx, LD_FLOAT, double, LDF(sfx), 0.0, L_SUM, FOLD_SUM)                   \
    LANE_BOTH(F, K_PROD, T, sfx, LD_FLOAT, double, LDF(sfx), 1.0, L_PROD, FOLD_PROD)                \
    LANE_BOTH(F, K_MAX, T, sfx, LD_FLOAT, double, LDF(sfx), -INFINITY, L_MAX, FOLD_MAX)             \
    LANE_BOTH(F, K_MIN, T, sfx, LD_FLOAT, double, LDF(sfx), INFINITY, L_MIN, FOLD_MIN)              \
    LANE_BOTH(F, K_MAXABS, T, sfx, LD_FLOAT, double, LDF(sfx), 0.0, L_MAXABS, FOLD_MAX)             \
    LANE_BOTH(F, K_MINABS, T, sfx, LD_FLOAT, double, LDF(sfx), INFINITY, L_MINABS, FOLD_MIN)        \
    LANE_BOTH(F, K_SUMSQDEV, T, sfx, LD_FLOAT, double, LDF(sfx), 0.0, L_SUMSQDEV, FOLD_SUM)         \
    LANE_BOTH(F, K_SUMABS, T, sfx, LD_FLOAT, double, LDF(sfx), 0.0, L_SUMABS, FOLD_SUM)             \
    LANE_BOTH(F, K_COUNTNZ, T, sfx, LD_FLOAT, double, LDF(sfx), 0.0, L_COUNTNZ, FOLD_SUM)           \
    LANE_BOTH(F, K_SUMEXP, T, sfx, LD_FLOAT, double, LDF(sfx), 0.0, SUMEXP, FOLD_SUM)
#define INT_LANE_RUNS(T, sfx)                                                                      \
    LANE_BOTH(I, K_SUM, T, sfx, LD_INT, int64_t, LDI, 0, L_ISUM, FOLD_ISUM)                         \
    LANE_BOTH(I, K_PROD, T, sfx, LD_INT, int64_t, LDI, 1, L_IPROD, FOLD_IPROD)                      \
    LANE_BOTH(I, K_MAX, T, sfx, LD_INT, int64_t, LDI, INT64_MIN, L_IMAX, FOLD_IMAX)                 \
    LANE_BOTH(I, K_MIN, T, sfx, LD_INT, int64_t, LDI, INT64_MAX, L_IMIN, FOLD_IMIN)

/* kinds whose runs are LANE_RUNs, and the rest (plain sequential runs) */
#define FLOAT_LANE_KINDS(X, T, sfx)                                                                \
    X(F, K_SUM, T, sfx, LD_FLOAT) X(F, K_PROD, T, sfx, LD_FLOAT) X(F, K_MAX, T, sfx, LD_FLOAT)     \
    X(F, K_MIN, T, sfx, LD_FLOAT) X(F, K_MAXABS, T, sfx, LD_FLOAT)                                 \
    X(F, K_MINABS, T, sfx, LD_FLOAT) X(F, K_SUMSQDEV, T, sfx, LD_FLOAT)                            \
    X(F, K_SUMABS, T, sfx, LD_FLOAT) X(F, K_COUNTNZ, T, sfx, LD_FLOAT)                             \
    X(F, K_SUMEXP, T, sfx, LD_FLOAT)
#define FLOAT_SEQ_KINDS(X, T, sfx)                                                                 \
    X(F, K_ARGMAX, T, sfx, LD_FLOAT) X(F, K_ARGMIN, T, sfx, LD_FLOAT)                              \
    X(F, K_ALL, T, sfx, LD_FLOAT) X(F, K_ANY, T, sfx, LD_FLOAT) X(F, K_SUMPOW, T, sfx, LD_FLOAT)
#define FLOAT_KINDS(X, T, sfx) FLOAT_LANE_KINDS(X, T, sfx) FLOAT_SEQ_KINDS(X, T, sfx)
#define INT_LANE_KINDS(X, T, sfx)                                                                  \
    X(I, K_SUM, T, sfx, LD_INT) X(I, K_PROD, T, sfx, LD_INT) X(I, K_MAX, T, sfx, LD_INT)           \
    X(I, K_MIN, T, sfx, LD_INT)
#define INT_SEQ_KINDS(X, T, sfx)                                                                   \
    X(I, K_ARGMAX, T, sfx, LD_INT) X(I, K_ARGMIN, T, sfx, LD_INT) X(I, K_ALL, T, sfx, LD_INT)      \
    X(I, K_ANY, T, sfx, LD_INT)
#define INT_KINDS(X, T, sfx) INT_LANE_KINDS(X, T, sfx) INT_SEQ_KINDS(X, T, sfx)

#define GEN_FLOAT_AS(T, sfx, SUMEXP)                                                               \
    FLOAT_LANE_RUNS(T, sfx, SUMEXP) FLOAT_SEQ_KINDS(RUN, T, sfx) FLOAT_KINDS(COL, T, sfx)
#define GEN_F32(unused, S, T, sfx) GEN_FLOAT_AS(T, sfx, L_SUMEXP_F32)
#define GEN_INT(unused, S, T, sfx) INT_LANE_RUNS(T, sfx) INT_SEQ_KINDS(RUN, T, sfx) INT_KINDS(COL, T, sfx)
GEN_FLOAT_AS(float, f32, L_SUMEXP_F32)
GEN_FLOAT_AS(double, f64, L_SUMEXP_F64)
EM_FOR_DTYPES_HALF(GEN_F32, _)
EM_FOR_DTYPES_INTBOOL(GEN_INT, _)

typedef void (*run_fn)(acc_t *, const char *, int64_t, int64_t, int64_t, double);
typedef void (*col_fn)(acc_t *, const char *, int64_t, int64_t, const double *);

#define RUN_ENTRY(FAM, KIND, T, sfx, LD) [KIND] = run_##KIND##_##sfx,
#define COL_ENTRY(FAM, KIND, T, sfx, LD) [KIND] = col_##KIND##_##sfx,
#define FLOAT_ROW(unused, S, T, sfx) [EM_DTYPE_##S] = {FLOAT_KINDS(RUN_ENTRY, T, sfx)},
#define INT_ROW(unused, S, T, sfx) [EM_DTYPE_##S] = {INT_KINDS(RUN_ENTRY, T, sfx)},
static const run_fn run_table[EM_DTYPE_COUNT][K_COUNT] = {
    EM_FOR_DTYPES_FLOAT(FLOAT_ROW, _) EM_FOR_DTYPES_HALF(FLOAT_ROW, _) EM_FOR_DTYPES_INTBOOL(INT_ROW, _)};
#define FLOAT_COL_ROW(unused, S, T, sfx) [EM_DTYPE_##S] = {FLOAT_KINDS(COL_ENTRY, T, sfx)},
#define INT_COL_ROW(unused, S, T, sfx) [EM_DTYPE_##S] = {INT_KINDS(COL_ENTRY, T, sfx)},
static const col_fn col_table[EM_DTYPE_COUNT][K_COUNT] = {
    EM_FOR_DTYPES_FLOAT(FLOAT_COL_ROW, _) EM_FOR_DTYPES_HALF(FLOAT_COL_ROW, _)
        EM_FOR_DTYPES_INTBOOL(INT_COL_ROW, _)};

typedef void (*linit_fn)(void *, int64_t);
typedef void (*lcol_fn)(void *, const char *, int64_t, const double *);
typedef void (*lfold_fn)(acc_t *, const void *, int64_t);
typedef struct {
    linit_fn init;
    lcol_fn col;
    lfold_fn fold;
} lane_col_t;
#define LANE_ENTRY(FAM, KIND, T, sfx, LD) [KIND] = {linit_##KIND##_##sfx, lcol_##KIND##_##sfx, lfold_##KIND##_##sfx},
#define FLOAT_LANE_ROW(unused, S, T, sfx) [EM_DTYPE_##S] = {FLOAT_LANE_KINDS(LANE_ENTRY, T, sfx)},
#define INT_LANE_ROW(unused, S, T, sfx) [EM_DTYPE_##S] = {INT_LANE_KINDS(LANE_ENTRY, T, sfx)},
static const lane_col_t lane_col_table[EM_DTYPE_COUNT][K_COUNT] = {
    EM_FOR_DTYPES_FLOAT(FLOAT_LANE_ROW, _) EM_FOR_DTYPES_HALF(FLOAT_LANE_ROW, _)
        EM_FOR_DTYPES_INTBOOL(INT_LANE_ROW, _)};

/* ---- identities and combining partial results (in order) ---- */

static acc_t identity(red_kind k, bool is_float) {
    acc_t a = {0.0, 0, -1};
    switch (k) {
    case K_PROD: a.f = 1.0; a.i = 1; break;
    case K_MAX: a.f = -INFINITY; a.i = INT64_MIN; break;
    case K_MIN: a.f = INFINITY; a.i = INT64_MAX; break;
    case K_MAXABS: a.f = 0.0; break;
    case K_MINABS: a.f = INFINITY; break;
    case K_ALL: a.i = 1; break;
    default: break;
    }
    (void)is_float;
    return a;
}

/* a (an earlier range) combined with b (the next): the same result as one
 * pass over both, ties going to the earlier index. */
static acc_t combine(red_kind k, bool fl, acc_t a, acc_t b) {
    switch (k) {
    case K_SUM:
        if (fl)
            a.f += b.f;
        else
            a.i = (int64_t)((uint64_t)a.i + (uint64_t)b.i);
        return a;
    case K_PROD:
        if (fl)
            a.f *= b.f;
        else
            a.i = (int64_t)((uint64_t)a.i * (uint64_t)b.i);
        return a;
    case K_MAX:
    case K_MAXABS:
        if (fl) {
            F_K_MAX(a, b.f, 0, 0);
        } else {
            I_K_MAX(a, b.i, 0, 0);
        }
        return a;
    case K_MIN:
    case K_MINABS:
        if (fl) {
            F_K_MIN(a, b.f, 0, 0);
        } else {
            I_K_MIN(a, b.i, 0, 0);
        }
        return a;
    case K_ARGMAX:
        if (b.idx < 0) return a;
        if (fl) {
            F_K_ARGMAX(a, b.f, b.idx, 0);
        } else {
            I_K_ARGMAX(a, b.i, b.idx, 0);
        }
        return a;
    case K_ARGMIN:
        if (b.idx < 0) return a;
        if (fl) {
            F_K_ARGMIN(a, b.f, b.idx, 0);
        } else {
            I_K_ARGMIN(a, b.i, b.idx, 0);
        }
        return a;
    case K_ALL: a.i &= b.i; return a;
    case K_ANY: a.i |= b.i; return a;
    default: a.f += b.f; return a; /* the sums */
    }
}

/* a[i] = combine(a[i], b[i]) for i < n; float sums (most column
 * reductions) without combine's switch per element. */
static void combine_all(red_kind k, bool fl, acc_t *a, const acc_t *b, int64_t n) {
    if (fl && (k == K_SUM || k == K_SUMSQDEV || k == K_SUMABS || k == K_SUMPOW || k == K_COUNTNZ ||
               k == K_SUMEXP)) {
        for (int64_t i = 0; i < n; i++) a[i].f += b[i].f;
        return;
    }
    for (int64_t i = 0; i < n; i++) a[i] = combine(k, fl, a[i], b[i]);
}

/* ---- plans ---- */

typedef struct {
    const char *base;
    em_dtype dt;
    bool fl;
    red_kind kind;
    run_fn run;
    col_fn col;
    lane_col_t lane; /* .col NULL: the kind has no lane form */
    int nk, nr;
    int64_t kshape[EM_MAX_DIMS], kstride[EM_MAX_DIMS];
    int64_t rshape[EM_MAX_DIMS], rstride[EM_MAX_DIMS];
    int64_t knumel, rnumel, nblocks;
    int64_t block_rows;  /* columns: rows per block */
    const double *param; /* per output, or NULL */
    acc_t *partial;      /* rows: knumel * nblocks; columns: knumel * (nblocks - 1) */
    acc_t *result;       /* knumel */
} plan_t;

static int64_t group_offset(const int64_t *shape, const int64_t *stride, int n, int64_t lin) {
    int64_t off = 0;
    for (int d = n - 1; d >= 0; d--) {
        off += (lin % shape[d]) * stride[d];
        lin /= shape[d];
    }
    return off;
}

static acc_t reduce_range(const plan_t *p, int64_t o, int64_t rb, int64_t re) {
    acc_t acc = identity(p->kind, p->fl);
    int64_t koff = group_offset(p->kshape, p->kstride, p->nk, o);
    size_t item = em_dtype_size(p->dt);
    double param = p->param ? p->param[o] : 0.0;
    if (p->nr == 0) { /* nothing (or only size-1 dims) reduced */
        p->run(&acc, p->base + koff * (int64_t)item, 1, 1, 0, param);
        return acc;
    }
    int last = p->nr - 1;
    int64_t inner = p->rshape[last];
    for (int64_t pos = rb; pos < re;) {
        int64_t j = pos % inner, n = inner - j;
        if (n > re - pos) n = re - pos;
        int64_t off = koff + group_offset(p->rshape, p->rstride, p->nr, pos);
        acc_t part = identity(p->kind, p->fl);
        p->run(&part, p->base + off * (int64_t)item, p->rstride[last], n, pos, param);
        acc = combine(p->kind, p->fl, acc, part);
        pos += n;
    }
    return acc;
}

static void rows_task(void *arg, int64_t b, int64_t e) {
    plan_t *p = arg;
    for (int64_t t = b; t < e; t++) {
        int64_t o = t / p->nblocks, blk = t % p->nblocks;
        int64_t rb = blk * BLOCK, re = rb + BLOCK < p->rnumel ? rb + BLOCK : p->rnumel;
        p->partial[t] = reduce_range(p, o, rb, re);
    }
}

/* Columns: task t is a block of rows across one tile of adjacent outputs;
 * tasks go outer kept index, row block, tile, i.e. in memory order, so a
 * thread's contiguous share of them is a contiguous stretch of the input
 * (parallel.c deals shares in order). A tile per task over all rows instead
 * read each row a tile at a time, 4 KB apart, and on two threads each core
 * read half of its columns from rows the other core had just written (the
 * elementwise kernel before it split the rows): a compiled (x * 2).sum(0)
 * over 1024x1024 took 0.47 ms on two threads, 0.33 ms on one. */
static void columns_task(void *arg, int64_t b, int64_t e) {
    plan_t *p = arg;
    int64_t kin = p->kshape[p->nk - 1], tiles = (kin + TILE - 1) / TILE;
    size_t item = em_dtype_size(p->dt);
    acc_t acc[TILE];
    union {
        double f[TILE];
        int64_t i[TILE];
    } lanes;
    for (int64_t t = b; t < e; t++) {
        int64_t ko = t / tiles / p->nblocks, blk = t / tiles % p->nblocks, k0 = (t % tiles) * TILE;
        int64_t len = kin - k0 < TILE ? kin - k0 : TILE;
        int64_t r0 = blk * p->block_rows;
        int64_t r1 = r0 + p->block_rows < p->rnumel ? r0 + p->block_rows : p->rnumel;
        int64_t koff = group_offset(p->kshape, p->kstride, p->nk - 1, ko) + k0;
        int64_t o0 = ko * kin + k0;
        const double *param = p->param ? p->param + o0 : NULL;
        for (int64_t c = 0; c < len; c++) acc[c] = identity(p->kind, p->fl);
        if (p->lane.col) p->lane.init(&lanes, len);
        for (int64_t r = r0; r < r1; r++) {
            const char *row =
                p->base + (koff + group_offset(p->rshape, p->rstride, p->nr, r)) * (int64_t)item;
            if (p->lane.col)
                p->lane.col(&lanes, row, len, param);
            else
                p->col(acc, row, len, r, param);
        }
        if (p->lane.col) p->lane.fold(acc, &lanes, len);
        acc_t *out = blk == 0 ? p->result : p->partial + (blk - 1) * p->knumel;
        memcpy(out + o0, acc, (size_t)len * sizeof *acc);
    }
}

/* Gathers the given dims of x into shape/stride and coalesces them. */
static int group_dims(const em_tensor *x, const int *dims, int n, int64_t *shape, int64_t *stride) {
    int64_t st[1][EM_MAX_DIMS];
    for (int i = 0; i < n; i++) {
        shape[i] = x->shape[dims[i]];
        st[0][i] = x->strides[dims[i]];
    }
    int m = em_coalesce_dims(shape, n, st, 1);
    for (int i = 0; i < m; i++) stride[i] = st[0][i];
    return m;
}

/* Reduces x over attrs->dims with `kind` into result[knumel] (a new array,
 * em_free it); param[o] per output or NULL. */
static em_status reduce(em_tensor *x, const em_attrs *attrs, red_kind kind, const double *param,
                        acc_t **result, int64_t *knumel, int64_t *rnumel) {
    plan_t p;
    memset(&p, 0, sizeof p);
    p.base = em_tensor_data(x);
    p.dt = x->dtype;
    p.fl = em_dtype_is_float(x->dtype);
    p.kind = kind;
    p.run = run_table[p.dt][kind];
    p.col = col_table[p.dt][kind];
    p.lane = lane_col_table[p.dt][kind];
    p.param = param;
    if (!p.run || !p.col)
        return em_error(EM_ERR_INTERNAL, "reduce: kind %d not defined for %s", (int)kind,
                        em_dtype_long_name(p.dt));
    bool red[EM_MAX_DIMS] = {false};
    for (int i = 0; i < attrs->n_dims; i++) red[attrs->dims[i]] = true;
    int kd[EM_MAX_DIMS], rd[EM_MAX_DIMS], nk = 0, nr = 0;
    p.knumel = p.rnumel = 1;
    for (int d = 0; d < x->ndim; d++) {
        if (red[d]) {
            rd[nr++] = d;
            p.rnumel *= x->shape[d];
        } else {
            kd[nk++] = d;
            p.knumel *= x->shape[d];
        }
    }
    p.nk = group_dims(x, kd, nk, p.kshape, p.kstride);
    p.nr = group_dims(x, rd, nr, p.rshape, p.rstride);
    *knumel = p.knumel;
    *rnumel = p.rnumel;
    p.result = em_malloc((size_t)(p.knumel ? p.knumel : 1) * sizeof *p.result);
    if (!p.result) return EM_ERR_NOMEM;
    *result = p.result;
    if (p.knumel == 0) return EM_OK;
    if (p.rnumel == 0) {
        for (int64_t o = 0; o < p.knumel; o++) p.result[o] = identity(kind, p.fl);
        return EM_OK;
    }
    bool columns = p.nk > 0 && p.nr > 0 && p.kstride[p.nk - 1] == 1 && p.rstride[p.nr - 1] != 1;
    if (columns) {
        int64_t kin = p.kshape[p.nk - 1], tiles = (kin + TILE - 1) / TILE;
        int64_t width = kin < TILE ? kin : TILE;
        /* (blocks count whole rows: with wider rows, a block of one tile's
         * rows would leave every thread reading all rows for its tiles) */
        p.block_rows = kin < COLUMN_BLOCK ? COLUMN_BLOCK / kin : 1;
        p.nblocks = (p.rnumel + p.block_rows - 1) / p.block_rows;
        if (p.nblocks > 1) { /* block 0 goes straight to the result */
            p.partial = em_malloc((size_t)(p.knumel * (p.nblocks - 1)) * sizeof *p.partial);
            if (!p.partial) return EM_ERR_NOMEM;
        }
        int64_t rows = p.rnumel < p.block_rows ? p.rnumel : p.block_rows;
        em_parallel_for((p.knumel / kin) * p.nblocks * tiles,
                        EM_GRAIN_ELEMENTWISE / (rows * width) + 1, columns_task, &p);
        for (int64_t b = 1; b < p.nblocks; b++)
            combine_all(kind, p.fl, p.result, p.partial + (b - 1) * p.knumel, p.knumel);
        em_free(p.partial);
        return EM_OK;
    }
    p.nblocks = (p.rnumel + BLOCK - 1) / BLOCK;
    int64_t tasks = p.knumel * p.nblocks;
    p.partial = p.nblocks == 1 ? p.result : em_malloc((size_t)tasks * sizeof *p.partial);
    if (!p.partial) return EM_ERR_NOMEM;
    int64_t per_task = p.rnumel < BLOCK ? p.rnumel : BLOCK;
    em_parallel_for(tasks, EM_GRAIN_ELEMENTWISE / per_task + 1, rows_task, &p);
    if (p.nblocks > 1) {
        for (int64_t o = 0; o < p.knumel; o++) {
            acc_t a = p.partial[o * p.nblocks];
            for (int64_t b = 1; b < p.nblocks; b++)
                a = combine(kind, p.fl, a, p.partial[o * p.nblocks + b]);
            p.result[o] = a;
        }
        em_free(p.partial);
    }
    return EM_OK;
}

/* ---- the ops ---- */

/* The kernel's per-element rule for op: its reduction (the op table's)
 * and, for a p-norm, its ord. */
static red_kind kind_of(em_op op, double ord) {
    static const red_kind rule[] = {
        /* ORDER em_reduction */
        [EM_RED_SUM] = K_SUM,       [EM_RED_PROD] = K_PROD,         [EM_RED_MAX] = K_MAX,
        [EM_RED_MIN] = K_MIN,       [EM_RED_ARGMAX] = K_ARGMAX,     [EM_RED_ARGMIN] = K_ARGMIN,
        [EM_RED_ALL] = K_ALL,       [EM_RED_ANY] = K_ANY,           [EM_RED_SUMSQDEV] = K_SUMSQDEV,
        [EM_RED_SUMEXP] = K_SUMEXP,
    };
    em_reduction r = em_op_get(op)->reduction;
    if (r != EM_RED_PNORM) return rule[r];
    return ord == 2.0         ? K_SUMSQDEV /* (about 0: no first pass) */
           : ord == 1.0       ? K_SUMABS
           : ord == INFINITY  ? K_MAXABS
           : ord == -INFINITY ? K_MINABS
           : ord == 0.0       ? K_COUNTNZ
                              : K_SUMPOW;
}

/* The final value of output o as a double (floats) or int64 (the rest). */
static void finish(em_op op, const em_attrs *a, acc_t acc, int64_t n, const double *param,
                   int64_t o, double *f, int64_t *i) {
    *f = acc.f;
    *i = acc.i;
    switch (op) {
    case EM_OP_MEAN: *f = acc.f / (double)n; break;
    case EM_OP_ARGMAX:
    case EM_OP_ARGMIN: *i = acc.idx; break;
    case EM_OP_VAR:
    case EM_OP_STD: {
        double dof = (double)n - a->correction;
        *f = acc.f / (dof > 0 ? dof : 0.0);
        if (op == EM_OP_STD) *f = sqrt(*f);
        break;
    }
    case EM_OP_NORM:
        if (a->ord == 2.0)
            *f = sqrt(acc.f);
        else if (a->ord != 1.0 && a->ord != 0.0 && isfinite(a->ord))
            *f = pow(acc.f, 1.0 / a->ord);
        break;
    case EM_OP_LOGSUMEXP: {
        double m = param[o];
        *f = isinf(m) ? m : m + log(acc.f);
        break;
    }
    default: break;
    }
}

#define STORE(unused, S, T, sfx)                                                                   \
    case EM_DTYPE_##S:                                                                             \
        ((T *)d)[o] = fl ? sc_cast_f64_##sfx(f) : sc_cast_i64_##sfx(i);                            \
        break;

/* logsumexp of a contiguous float32 row: its max and sum of exp(x - max)
 * while the row stays in cache (rowexp.h, the softmax kernel's own halves),
 * where the general path reads memory twice and widens every term to
 * double. Eager logsumexp over trailing dims and the compiled row kernels
 * (em_reduce_row) both take it, so they agree to the bit. */
static float lse_row_f32(const float *x, int64_t n) {
    float m = row_max_f32(x, n);
    return isinf(m) ? m : (float)((double)m + log((double)row_sumexp_f32(x, NULL, n, m)));
}

typedef struct {
    const float *x;
    float *y;
    int64_t n;
} lse_rows_ctx;

static void lse_rows_task(void *arg, int64_t r0, int64_t r1) {
    const lse_rows_ctx *c = arg;
    for (int64_t r = r0; r < r1; r++) c->y[r] = lse_row_f32(c->x + r * c->n, c->n);
}

/* logsumexp of float32 x over its trailing dims (a non-contiguous x copied
 * first) into a contiguous y, rows split across the pool; false (nothing
 * done) where the reduced dims are not the trailing ones. */
static bool lse_rows(em_tensor *x, const em_attrs *attrs, em_tensor *y, em_status *st) {
    int k = attrs->n_dims;
    bool trailing = x->dtype == EM_DTYPE_F32 && y->dtype == EM_DTYPE_F32 && k >= 1 && k <= x->ndim &&
                    em_tensor_is_contiguous(y);
    bool seen[EM_MAX_DIMS] = {false};
    for (int i = 0; trailing && i < k; i++) {
        int d = attrs->dims[i];
        trailing = d >= x->ndim - k && d < x->ndim && !seen[d];
        if (trailing) seen[d] = true;
    }
    if (!trailing) return false;
    em_tensor *dense = x;
    if (em_tensor_is_contiguous(x))
        em_tensor_retain(x);
    else if (!(dense = em_converted(x, x->dtype))) {
        *st = em_last_status();
        return true;
    }
    int64_t n = 1;
    for (int d = x->ndim - k; d < x->ndim; d++) n *= x->shape[d];
    lse_rows_ctx c = {em_tensor_data(dense), em_tensor_data(y), n};
    if (y->numel) em_parallel_for(y->numel, EM_GRAIN_ELEMENTWISE / (n * 8 + 1) + 1, lse_rows_task, &c);
    em_tensor_release(dense);
    *st = EM_OK;
    return true;
}

em_status cpu_reduce(em_op op, em_tensor *const *in, int n_in, const em_attrs *attrs, em_tensor **out) {
    em_status lse_st;
    if (op == EM_OP_LOGSUMEXP && lse_rows(in[0], attrs, out[0], &lse_st)) return lse_st;
    em_tensor *x = in[0], *cast = NULL;
    em_reduction red = em_op_get(op)->reduction;
    if (red == EM_RED_SUMEXP && !em_dtype_is_float(x->dtype)) { /* computed in float */
        if (!(cast = em_converted(x, out[0]->dtype))) return em_last_status();
        x = cast;
    }
    red_kind kind = kind_of(op, attrs->ord);
    double *param = NULL;
    acc_t *pass1 = NULL, *res = NULL;
    int64_t knumel, rnumel;
    em_status st = EM_OK;
    /* First passes: the mean for squared deviations (var, std), the max for
     * sums of exp(x - max) (logsumexp). */
    if (red == EM_RED_SUMSQDEV || red == EM_RED_SUMEXP) {
        red_kind first = red == EM_RED_SUMEXP ? K_MAX : K_SUM;
        if ((st = reduce(x, attrs, first, NULL, &pass1, &knumel, &rnumel)) != EM_OK) goto done;
        if (!(param = em_malloc((size_t)(knumel ? knumel : 1) * sizeof *param))) {
            st = EM_ERR_NOMEM;
            goto done;
        }
        for (int64_t o = 0; o < knumel; o++) {
            double m = first == K_SUM ? pass1[o].f / (double)rnumel : pass1[o].f;
            param[o] = m;
        }
    }
    if (kind == K_SUMPOW) { /* (a p-norm's p per output) */
        int64_t n = out[0]->numel;
        if (!(param = em_malloc((size_t)(n ? n : 1) * sizeof *param))) {
            st = EM_ERR_NOMEM;
            goto done;
        }
        for (int64_t o = 0; o < n; o++) param[o] = attrs->ord;
    }
    /* exp(x - max) is taken with max 0 where max is infinite (the result is
     * then the max itself); the second pass reads a copy with that change. */
    double *p2 = param;
    double *adj = NULL;
    if (red == EM_RED_SUMEXP) {
        if (!(adj = em_malloc((size_t)(knumel ? knumel : 1) * sizeof *adj))) {
            st = EM_ERR_NOMEM;
            goto done;
        }
        for (int64_t o = 0; o < knumel; o++) adj[o] = isinf(param[o]) ? 0.0 : param[o];
        p2 = adj;
    }
    st = reduce(x, attrs, kind, p2, &res, &knumel, &rnumel);
    if (st == EM_OK) {
        bool fl = em_dtype_is_float(x->dtype) && red != EM_RED_ARGMAX && red != EM_RED_ARGMIN &&
                  red != EM_RED_ALL && red != EM_RED_ANY;
        void *d = em_tensor_data(out[0]);
        for (int64_t o = 0; o < knumel; o++) {
            double f;
            int64_t i;
            finish(op, attrs, res[o], rnumel, param, o, &f, &i);
            switch (out[0]->dtype) {
                EM_FOR_DTYPES_STORED(STORE, _)
            default: break;
            }
        }
    }
    em_free(adj);
done:
    em_free(res);
    em_free(pass1);
    em_free(param);
    em_tensor_release(cast);
    return st;
}

/* ---- one contiguous row (compiled row kernels) ---- */

/* A contiguous row as the rows strategy folds it: blocks of BLOCK elements,
 * each one run from the identity, combined in order. */
static acc_t fold_row(red_kind kind, em_dtype dt, const char *x, int64_t n, double param) {
    bool fl = em_dtype_is_float(dt);
    size_t item = em_dtype_size(dt);
    acc_t acc = identity(kind, fl);
    for (int64_t b = 0; b < n; b += BLOCK) {
        int64_t len = n - b < BLOCK ? n - b : BLOCK;
        acc_t part = identity(kind, fl);
        run_table[dt][kind](&part, x + b * (int64_t)item, 1, len, b, param);
        part = combine(kind, fl, identity(kind, fl), part);
        acc = b == 0 ? part : combine(kind, fl, acc, part);
    }
    return acc;
}

void em_reduce_row(em_op op, const em_attrs *attrs, em_dtype dt, const void *x, int64_t n,
                   em_dtype out_dt, void *out) {
    if (op == EM_OP_LOGSUMEXP && dt == EM_DTYPE_F32 && out_dt == EM_DTYPE_F32) {
        *(float *)out = lse_row_f32(x, n);
        return;
    }
    em_reduction red = em_op_get(op)->reduction;
    red_kind kind = kind_of(op, attrs->ord);
    double param = 0.0, p2;
    if (red == EM_RED_SUMSQDEV || red == EM_RED_SUMEXP) { /* the first pass, as cpu_reduce */
        red_kind first = red == EM_RED_SUMEXP ? K_MAX : K_SUM;
        acc_t p1 = fold_row(first, dt, x, n, 0.0);
        param = first == K_SUM ? p1.f / (double)n : p1.f;
    }
    if (kind == K_SUMPOW) param = attrs->ord;
    p2 = red == EM_RED_SUMEXP && isinf(param) ? 0.0 : param;
    acc_t acc = fold_row(kind, dt, x, n, p2);
    double f;
    int64_t i;
    finish(op, attrs, acc, n, &param, 0, &f, &i);
    bool fl = em_dtype_is_float(dt) && red != EM_RED_ARGMAX && red != EM_RED_ARGMIN &&
              red != EM_RED_ALL && red != EM_RED_ANY;
    void *d = out;
    int64_t o = 0;
    switch (out_dt) {
        EM_FOR_DTYPES_STORED(STORE, _)
    default: break;
    }
}

