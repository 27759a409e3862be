/*
 * mpi_ops.c - ember's dtypes and reduce ops as MPI datatypes and ops.
 *
 * MPI's own ops serve where they mean what torch.distributed means (SUM and
 * PRODUCT of every non-half type, MIN and MAX of integers, logical ones for
 * bool). Ops of our own, made once at init, serve the rest: float16 and
 * bfloat16 (computed in float32 and rounded back, pair by pair, as every
 * other half op) and float MIN/MAX, which propagate NaN as torch.maximum
 * does where MPI's compare `a < b`. AVG is SUM followed by a division.
 */
#include "mpi_ops.h"

#include <math.h>
#include <string.h>

#include "ember/ops_math.h"

static MPI_Datatype type_f16 = MPI_DATATYPE_NULL, type_bf16 = MPI_DATATYPE_NULL;
static MPI_Op op_half_sum = MPI_OP_NULL, op_half_prod = MPI_OP_NULL;
static MPI_Op op_nan_min = MPI_OP_NULL, op_nan_max = MPI_OP_NULL;

static float half_in(uint16_t h, bool bf) { return bf ? em_sc_bf16_to_f32(h) : em_sc_f16_to_f32(h); }
static uint16_t half_out(float f, bool bf) { return bf ? em_sc_f32_to_bf16(f) : em_sc_f32_to_f16(f); }

static void half_combine(void *in, void *inout, int *len, MPI_Datatype *dt, bool product) {
    const uint16_t *a = in;
    uint16_t *b = inout;
    bool bf = *dt == type_bf16;
    for (int i = 0; i < *len; i++) {
        float x = half_in(a[i], bf), y = half_in(b[i], bf);
        b[i] = half_out(product ? x * y : x + y, bf);
    }
}
static void half_sum(void *in, void *inout, int *len, MPI_Datatype *dt) { half_combine(in, inout, len, dt, false); }
static void half_prod(void *in, void *inout, int *len, MPI_Datatype *dt) { half_combine(in, inout, len, dt, true); }

/* NaN wins, else the larger (smaller): torch.maximum's rule. */
#define NAN_PICK(NAME, CMP)                                                                        \
    static void NAME(void *in, void *inout, int *len, MPI_Datatype *dt) {                          \
        int n = *len;                                                                              \
        if (*dt == MPI_FLOAT) {                                                                    \
            const float *a = in;                                                                   \
            float *b = inout;                                                                      \
            for (int i = 0; i < n; i++) b[i] = (a[i] != a[i] || a[i] CMP b[i]) ? a[i] : b[i];      \
        } else if (*dt == MPI_DOUBLE) {                                                            \
            const double *a = in;                                                                  \
            double *b = inout;                                                                     \
            for (int i = 0; i < n; i++) b[i] = (a[i] != a[i] || a[i] CMP b[i]) ? a[i] : b[i];      \
        } else {                                                                                   \
            const uint16_t *a = in;                                                                \
            uint16_t *b = inout;                                                                   \
            bool bf = *dt == type_bf16;                                                            \
            for (int i = 0; i < n; i++) {                                                          \
                float x = half_in(a[i], bf), y = half_in(b[i], bf);                                \
                if (x != x || x CMP y) b[i] = a[i];                                                \
            }                                                                                      \
        }                                                                                          \
    }
NAN_PICK(nan_max, >)
NAN_PICK(nan_min, <)

int em_mpi_ops_init(void) {
    int rc;
    if ((rc = MPI_Type_dup(MPI_UINT16_T, &type_f16)) != MPI_SUCCESS) return rc;
    if ((rc = MPI_Type_dup(MPI_UINT16_T, &type_bf16)) != MPI_SUCCESS) return rc;
    if ((rc = MPI_Op_create(half_sum, 1, &op_half_sum)) != MPI_SUCCESS) return rc;
    if ((rc = MPI_Op_create(half_prod, 1, &op_half_prod)) != MPI_SUCCESS) return rc;
    if ((rc = MPI_Op_create(nan_min, 1, &op_nan_min)) != MPI_SUCCESS) return rc;
    return MPI_Op_create(nan_max, 1, &op_nan_max);
}

void em_mpi_ops_free(void) {
    MPI_Op *ops[] = {&op_half_sum, &op_half_prod, &op_nan_min, &op_nan_max};
    for (size_t i = 0; i < sizeof ops / sizeof *ops; i++)
        if (*ops[i] != MPI_OP_NULL) MPI_Op_free(ops[i]);
    if (type_f16 != MPI_DATATYPE_NULL) MPI_Type_free(&type_f16);
    if (type_bf16 != MPI_DATATYPE_NULL) MPI_Type_free(&type_bf16);
}

MPI_Datatype em_mpi_type(em_dtype dt) {
    switch (dt) {
    case EM_DTYPE_F32: return MPI_FLOAT;
    case EM_DTYPE_F64: return MPI_DOUBLE;
    case EM_DTYPE_F16: return type_f16;
    case EM_DTYPE_BF16: return type_bf16;
    case EM_DTYPE_I64: return MPI_INT64_T;
    case EM_DTYPE_I32: return MPI_INT32_T;
    case EM_DTYPE_I16: return MPI_INT16_T;
    case EM_DTYPE_I8: return MPI_INT8_T;
    case EM_DTYPE_U8: return MPI_UINT8_T;
    case EM_DTYPE_BOOL: return MPI_C_BOOL;
    default: return MPI_DATATYPE_NULL;
    }
}

const char *em_reduce_op_name(em_reduce_op op) {
    static const char *names[EM_REDUCE_COUNT] = {"SUM", "AVG", "PRODUCT", "MIN", "MAX"};
    return (unsigned)op < EM_REDUCE_COUNT ? names[op] : "?";
}

em_status em_mpi_op(const char *what, em_dtype dt, em_reduce_op op, MPI_Op *out) {
    if ((unsigned)op >= EM_REDUCE_COUNT) return em_error(EM_ERR_VALUE, "%s: unknown reduce op %d", what, (int)op);
    if (op == EM_REDUCE_AVG && !em_dtype_is_float(dt))
        return em_error(EM_ERR_DTYPE, "%s: ReduceOp.AVG needs a floating-point tensor, got %s", what,
                        em_dtype_long_name(dt));
    bool half = em_dtype_is_half(dt), fl = em_dtype_is_float(dt);
    if (dt == EM_DTYPE_BOOL) {
        /* as torch: SUM and MAX are "any", PRODUCT and MIN "all" */
        *out = (op == EM_REDUCE_SUM || op == EM_REDUCE_MAX) ? MPI_LOR : MPI_LAND;
        return EM_OK;
    }
    switch (op) {
    case EM_REDUCE_SUM:
    case EM_REDUCE_AVG: *out = half ? op_half_sum : MPI_SUM; break;
    case EM_REDUCE_PRODUCT: *out = half ? op_half_prod : MPI_PROD; break;
    case EM_REDUCE_MIN: *out = fl ? op_nan_min : MPI_MIN; break;
    case EM_REDUCE_MAX: *out = fl ? op_nan_max : MPI_MAX; break;
    default: break;
    }
    return EM_OK;
}

void em_mpi_divide(void *buf, int64_t n, em_dtype dt, int divisor) {
    switch (dt) {
    case EM_DTYPE_F32: {
        float *p = buf;
        for (int64_t i = 0; i < n; i++) p[i] /= (float)divisor;
        break;
    }
    case EM_DTYPE_F64: {
        double *p = buf;
        for (int64_t i = 0; i < n; i++) p[i] /= (double)divisor;
        break;
    }
    case EM_DTYPE_F16:
    case EM_DTYPE_BF16: {
        uint16_t *p = buf;
        bool bf = dt == EM_DTYPE_BF16;
        for (int64_t i = 0; i < n; i++) p[i] = half_out(half_in(p[i], bf) / (float)divisor, bf);
        break;
    }
    default: break; /* (em_mpi_op refused AVG of other dtypes) */
    }
}
