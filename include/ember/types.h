/*
 * types.h - the runtime's type vocabulary: dtypes, devices, shapes.
 *
 * This is all the IR knows of the runtime: a value's type is an em_type
 * (dtype, device, shape). Strides are not part of a type: they are a
 * property of a concrete tensor.
 */
#ifndef EMBER_TYPES_H
#define EMBER_TYPES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ember/dlpack.h"

#include "ember/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Most dimensions a tensor may have. Fixed so shapes live inline in tensors
 * and IR values, without allocation. */
#define EM_MAX_DIMS 8

/* Every dtype, once: X(SUFFIX, ctype, short name used in IR text, PyTorch-style
 * name, category). The order fixes the enum values. float16 and bfloat16 are
 * stored as 16-bit patterns and computed in float32. ORDER DTYPE */
#define EM_DTYPE_LIST(X)                                                                           \
    X(F32, float, "f32", "float32", EM_CAT_FLOAT)                                                  \
    X(F64, double, "f64", "float64", EM_CAT_FLOAT)                                                 \
    X(F16, uint16_t, "f16", "float16", EM_CAT_FLOAT)                                               \
    X(BF16, uint16_t, "bf16", "bfloat16", EM_CAT_FLOAT)                                            \
    X(I64, int64_t, "i64", "int64", EM_CAT_INT)                                                    \
    X(I32, int32_t, "i32", "int32", EM_CAT_INT)                                                    \
    X(I16, int16_t, "i16", "int16", EM_CAT_INT)                                                    \
    X(I8, int8_t, "i8", "int8", EM_CAT_INT)                                                        \
    X(U8, uint8_t, "u8", "uint8", EM_CAT_INT)                                                      \
    X(BOOL, bool, "bool", "bool", EM_CAT_BOOL)

typedef enum em_dtype {
#define X(S, ct, sn, pn, cat) EM_DTYPE_##S,
    EM_DTYPE_LIST(X)
#undef X
        EM_DTYPE_COUNT
} em_dtype;

/* Promotion categories, ordered: a higher category wins (PyTorch's rule). */
typedef enum em_dtype_category { EM_CAT_BOOL = 0, EM_CAT_INT = 1, EM_CAT_FLOAT = 2 } em_dtype_category;

/* Dtype classes name the dtypes an elementwise op is defined for; op rows in
 * ops.def refer to them by name, and each expands X(arg, SUFFIX, ctype, sfx)
 * once per member. sfx is the suffix of C symbols (sc_add_f32); bool's is b8
 * because `bool` is itself a macro in C11. Classes list *compute* dtypes:
 * float16 and bfloat16 compute in float32, so they belong to none. */
#define EM_FOR_DTYPES_FLOAT(X, arg) X(arg, F32, float, f32) X(arg, F64, double, f64)
#define EM_FOR_DTYPES_INT(X, arg)                                                                  \
    X(arg, I64, int64_t, i64) X(arg, I32, int32_t, i32) X(arg, I16, int16_t, i16)                  \
        X(arg, I8, int8_t, i8) X(arg, U8, uint8_t, u8)
#define EM_FOR_DTYPES_NUMERIC(X, arg) EM_FOR_DTYPES_FLOAT(X, arg) EM_FOR_DTYPES_INT(X, arg)
#define EM_FOR_DTYPES_INTBOOL(X, arg) EM_FOR_DTYPES_INT(X, arg) X(arg, BOOL, bool, b8)
#define EM_FOR_DTYPES_BOOLONLY(X, arg) X(arg, BOOL, bool, b8)
#define EM_FOR_DTYPES_ALL(X, arg) EM_FOR_DTYPES_NUMERIC(X, arg) X(arg, BOOL, bool, b8)
#define EM_FOR_DTYPES_NONE(X, arg)
/* Storage-only dtypes, computed in float32. */
#define EM_FOR_DTYPES_HALF(X, arg) X(arg, F16, uint16_t, f16) X(arg, BF16, uint16_t, bf16)
/* Every dtype (compute and storage), for cast tables. */
#define EM_FOR_DTYPES_STORED(X, arg) EM_FOR_DTYPES_ALL(X, arg) EM_FOR_DTYPES_HALF(X, arg)
/* A second copy of STORED, for tables indexed by two dtypes (casts): a macro
 * cannot expand inside its own expansion. A test checks the cast tables are
 * complete, so the two lists cannot drift apart unnoticed. */
#define EM_FOR_DTYPES_STORED_INNER(X, arg)                                                         \
    X(arg, F32, float, f32) X(arg, F64, double, f64) X(arg, I64, int64_t, i64)                     \
        X(arg, I32, int32_t, i32) X(arg, I16, int16_t, i16) X(arg, I8, int8_t, i8)                 \
            X(arg, U8, uint8_t, u8) X(arg, BOOL, bool, b8) X(arg, F16, uint16_t, f16)              \
                X(arg, BF16, uint16_t, bf16)

size_t em_dtype_size(em_dtype dt);
em_dtype_category em_dtype_category_of(em_dtype dt);
bool em_dtype_is_float(em_dtype dt);
/* float16 and bfloat16: stored in 16 bits, computed in float32. */
static inline bool em_dtype_is_half(em_dtype dt) { return dt == EM_DTYPE_F16 || dt == EM_DTYPE_BF16; }
/* The dtype arithmetic on dt happens in (float32 for the 16-bit floats). */
static inline em_dtype em_dtype_compute(em_dtype dt) { return em_dtype_is_half(dt) ? EM_DTYPE_F32 : dt; }
bool em_dtype_is_signed(em_dtype dt);
/* "f32", ... as printed in IR text and error messages. Static storage. */
const char *em_dtype_name(em_dtype dt);
/* "float32", ... as exposed to Python. Static storage. */
const char *em_dtype_long_name(em_dtype dt);
/* Parses an IR short name; returns false if unknown. */
bool em_dtype_from_name(const char *name, size_t len, em_dtype *out);
/* The DLPack dtype of dt (one lane), and back: false when ember has none.
 * kDLUInt bits 8 is uint8 (never bool: older producers such as PyTorch 1.x
 * export bool that way, and the bytes are then read as the 0/1 values
 * they are). */
DLDataType em_dtype_to_dlpack(em_dtype dt);
bool em_dtype_from_dlpack(DLDataType d, em_dtype *out);

/* The default floating-point dtype: of float tensors made without a dtype
 * and of float results computed from integer inputs (exp of an int tensor,
 * true division). float32 until em_set_default_float changes it; one value
 * for the whole process, as PyTorch's set_default_dtype. Compiled functions
 * guard on it (frontend/function.c), since a trace bakes the dtypes in. */
em_dtype em_default_float(void);
/* Sets it; false, changing nothing, for a dtype that is not floating point. */
bool em_set_default_float(em_dtype dt);

/* META: tensors with a shape, dtype and strides but no data (PyTorch's
 * meta device): every op infers its results there and computes nothing. */
typedef enum em_device_type { EM_DEVICE_CPU = 0, EM_DEVICE_CUDA = 1, EM_DEVICE_META = 2 } em_device_type;

typedef struct em_device {
    uint8_t type; /* em_device_type */
    int8_t index; /* -1 for CPU */
} em_device;

static inline em_device em_cpu(void) { return (em_device){EM_DEVICE_CPU, -1}; }
static inline em_device em_meta(void) { return (em_device){EM_DEVICE_META, -1}; }
static inline bool em_device_eq(em_device a, em_device b) {
    return a.type == b.type && a.index == b.index;
}
/* Writes "cpu", "meta" or "cuda:0" into buf (at least 16 bytes); returns buf. */
char *em_device_str(em_device d, char *buf);
/* Reads "cpu", "meta", "cuda" or "cuda:N" (as PyTorch spells devices);
 * false for anything else. */
bool em_device_parse(const char *s, em_device *out);

/* A shape with its rank. Used for IR value types and shape inference. */
typedef struct em_type {
    em_dtype dtype;
    em_device device;
    int ndim;
    int64_t shape[EM_MAX_DIMS];
} em_type;

int64_t em_shape_numel(const int64_t *shape, int ndim);
bool em_type_eq(const em_type *a, const em_type *b);
bool em_shape_eq(const int64_t *a, int na, const int64_t *b, int nb);
/* Formats "f32[2,3]" (with "@cuda:0" when not on the CPU) into buf; returns
 * the number of characters written (snprintf semantics). */
int em_type_str(const em_type *t, char *buf, size_t size);
/* Formats "[2,3]" into buf. */
int em_shape_str(const int64_t *shape, int ndim, char *buf, size_t size);

/* Normalises a possibly negative dim against ndim. Errors (EM_ERR_INDEX)
 * name `op` and the valid range, like PyTorch's "Dimension out of range". */
em_status em_wrap_dim(const char *op, int64_t dim, int ndim, int *out);

#ifdef __cplusplus
}
#endif
#endif
