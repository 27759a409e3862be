/*
 * ew_source.c - the eager elementwise kernels of the CUDA device as CUDA C,
 * generated from the op table.
 *
 * Every elementwise row of ops.def has, per compute dtype of its class, a
 * scalar definition sc_<op>_<dtype> in ops_math.h: the text the CPU's eager
 * kernels and the LLVM backend compile too. The source made here includes
 * that header verbatim (NVRTC is handed it by name) and wraps each scalar
 * function in two kernels:
 *
 *   em_cuda_<op>_<dtype>_contig(n, out, a[, b[, c]])
 *       every operand contiguous and 16-byte aligned: each thread loads
 *       16 bytes of the widest operand per step (4 floats, 2 doubles, 16
 *       bytes) as one vector, the tail element by element;
 *   em_cuda_<op>_<dtype>_strided(n, geometry, out, a[, b[, c]])
 *       any strides, broadcasting included (stride 0): the element's
 *       offsets come from its index, dim by dim.
 *
 * Both are grid-stride loops, so any grid covers any n. One source holds
 * the kernels of many ops of one dtype: NVRTC parses ops_math.h once for
 * them all.
 */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ember/codegen_cuda.h"
#include "ember/strbuf.h"

/* ---- the op table's elementwise rows ---- */

typedef enum { SHAPE_SAME, SHAPE_PRED, SHAPE_WHERE } ew_shape;
#define EM_EW_SHAPE_SAME_ SHAPE_SAME
#define EM_EW_SHAPE_PRED_ SHAPE_PRED
#define EM_EW_SHAPE_WHERE_ SHAPE_WHERE

typedef struct {
    em_op op;
    const char *name;
    int arity;
    ew_shape shape;
    em_dtype dtype;
    const char *sfx;
} ew_row;

#define APPLY(m, ...) m(__VA_ARGS__)
#define UNPACK(...) __VA_ARGS__
#define CAT_SHAPE(s) EM_EW_SHAPE_##s##_
#define ROW_(E, n, arity, shape, S, sfx) {EM_OP_##E, #n, arity, CAT_SHAPE(shape), EM_DTYPE_##S, #sfx},
#define ROW(arg, S, T, sfx) APPLY(ROW_, UNPACK arg, S, sfx)
#define GEN_ROWS(E, n, dts, arity, shape) EM_FOR_DTYPES_##dts(ROW, (E, n, arity, shape))
static const ew_row rows[] = {
#define EM_OP(E, n, kind, ni, no, dts, pr, fl, at, gr) EM_EW_ROW_##kind(GEN_ROWS, E, n, dts, pr)
#include "ember/ops.def"
#undef EM_OP
};
#define N_ROWS ((int)(sizeof rows / sizeof *rows))

static const ew_row *row_of(em_op op, em_dtype dt) {
    for (int i = 0; i < N_ROWS; i++)
        if (rows[i].op == op && rows[i].dtype == dt) return &rows[i];
    return NULL;
}

bool em_cuda_ew_defined(em_op op, em_dtype dt) { return row_of(op, dt) != NULL; }

int em_cuda_ew_ops(em_dtype dt, em_op *ops, int max) {
    int n = 0;
    for (int i = 0; i < N_ROWS; i++)
        if (rows[i].dtype == dt) {
            if (n < max) ops[n] = rows[i].op;
            n++;
        }
    return n;
}

/* ---- the headers, embedded at build time ---- */

extern const unsigned char em_cuda_ops_math_h[], em_cuda_trig_table_h[];
extern const size_t em_cuda_ops_math_h_size, em_cuda_trig_table_h_size;
static char *header_text[2];
static const char *const header_names[2] = {"ember/ops_math.h", "ops_math_trig_table.h"};
static pthread_once_t headers_once = PTHREAD_ONCE_INIT;

static char *as_string(const unsigned char *bytes, size_t n) {
    char *s = malloc(n + 1);
    if (s) {
        memcpy(s, bytes, n);
        s[n] = '\0';
    }
    return s;
}

static void make_headers(void) {
    header_text[0] = as_string(em_cuda_ops_math_h, em_cuda_ops_math_h_size);
    header_text[1] = as_string(em_cuda_trig_table_h, em_cuda_trig_table_h_size);
}

int em_cuda_headers(const char *const **texts, const char *const **names) {
    pthread_once(&headers_once, make_headers);
    if (!header_text[0] || !header_text[1]) return -1;
    *texts = (const char *const *)header_text;
    *names = header_names;
    return 2;
}

/* ---- the source ---- */

/* The type a dtype has in device code (ops_math.h's names). */
static const char *device_type(em_dtype dt) {
    switch (dt) {
    case EM_DTYPE_F32: return "float";
    case EM_DTYPE_F64: return "double";
    case EM_DTYPE_I64: return "em_sc_i64";
    case EM_DTYPE_I32: return "em_sc_i32";
    case EM_DTYPE_I16: return "em_sc_i16";
    case EM_DTYPE_I8: return "em_sc_i8";
    case EM_DTYPE_U8: return "em_sc_u8";
    case EM_DTYPE_F16: return "em_sc_f16";
    case EM_DTYPE_BF16: return "em_sc_bf16";
    default: return "bool";
    }
}

void em_cuda_ew_name(em_op op, em_dtype dt, em_cuda_layout layout, char *out, size_t n) {
    const ew_row *r = row_of(op, dt);
    snprintf(out, n, "em_cuda_%s_%s_%s", r ? r->name : "undefined", r ? r->sfx : "none",
             layout == EM_CUDA_CONTIG ? "contig" : "strided");
}

/* Operand k's type (0: the result, then the inputs) and size. */
static const char *operand_type(const ew_row *r, int k) {
    if (k == 0) return r->shape == SHAPE_PRED ? "bool" : device_type(r->dtype);
    if (k == 1 && r->shape == SHAPE_WHERE) return "bool";
    return device_type(r->dtype);
}

static size_t operand_size(const ew_row *r, int k) {
    return strcmp(operand_type(r, k), "bool") == 0 ? 1 : em_dtype_size(r->dtype);
}

static void parameters(em_strbuf *s, const ew_row *r) {
    em_strbuf_printf(s, "%s *__restrict__ out", operand_type(r, 0));
    for (int i = 1; i <= r->arity; i++) em_strbuf_printf(s, ", const %s *__restrict__ in%d", operand_type(r, i), i);
}

static void call(em_strbuf *s, const ew_row *r, const char *const *args) {
    em_strbuf_printf(s, "sc_%s_%s(", r->name, r->sfx);
    for (int i = 0; i < r->arity; i++) em_strbuf_printf(s, "%s%s", i ? ", " : "", args[i]);
    em_strbuf_puts(s, ")");
}

static void contig_kernel(em_strbuf *s, const ew_row *r) {
    size_t widest = 1;
    for (int k = 0; k <= r->arity; k++) widest = operand_size(r, k) > widest ? operand_size(r, k) : widest;
    int v = (int)(16 / widest); /* elements per vector */
    char name[128];
    em_cuda_ew_name(r->op, r->dtype, EM_CUDA_CONTIG, name, sizeof name);
    for (int k = 0; k <= r->arity; k++)
        em_strbuf_printf(s, "struct __align__(%zu) %s_v%d { %s e[%d]; };\n", operand_size(r, k) * (size_t)v, name, k,
                         operand_type(r, k), v);
    em_strbuf_printf(s, "extern \"C\" __global__ void %s(long long n, ", name);
    parameters(s, r);
    em_strbuf_puts(s, ") {\n"
                      "    long long step = (long long)gridDim.x * blockDim.x;\n"
                      "    long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;\n");
    em_strbuf_printf(s, "    long long vectors = n / %d;\n    for (long long i = t; i < vectors; i += step) {\n", v);
    for (int k = 1; k <= r->arity; k++)
        em_strbuf_printf(s, "        %s_v%d x%d = ((const %s_v%d *)in%d)[i];\n", name, k, k, name, k, k);
    em_strbuf_printf(s, "        %s_v0 y;\n        for (int j = 0; j < %d; j++) y.e[j] = ", name, v);
    const char *vargs[3] = {"x1.e[j]", "x2.e[j]", "x3.e[j]"};
    call(s, r, vargs);
    em_strbuf_printf(s, ";\n        ((%s_v0 *)out)[i] = y;\n    }\n", name);
    em_strbuf_printf(s, "    for (long long i = vectors * %d + t; i < n; i += step) out[i] = ", v);
    const char *sargs[3] = {"in1[i]", "in2[i]", "in3[i]"};
    call(s, r, sargs);
    em_strbuf_puts(s, ";\n}\n");
}

static void strided_kernel(em_strbuf *s, const ew_row *r) {
    char name[128];
    em_cuda_ew_name(r->op, r->dtype, EM_CUDA_STRIDED, name, sizeof name);
    em_strbuf_printf(s, "extern \"C\" __global__ void %s(long long n, em_cuda_geometry g, ", name);
    parameters(s, r);
    em_strbuf_printf(s, ") {\n"
                        "    long long step = (long long)gridDim.x * blockDim.x;\n"
                        "    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += step) {\n"
                        "        long long rem = i, o[%d] = {0};\n"
                        "        for (int d = g.ndim - 1; d >= 0; d--) {\n"
                        "            long long idx = rem %% g.shape[d];\n"
                        "            rem /= g.shape[d];\n"
                        "            for (int k = 0; k < %d; k++) o[k] += idx * g.strides[k][d];\n"
                        "        }\n"
                        "        out[o[0]] = ",
                     r->arity + 1, r->arity + 1);
    const char *args[3] = {"in1[o[1]]", "in2[o[2]]", "in3[o[3]]"};
    call(s, r, args);
    em_strbuf_puts(s, ";\n    }\n}\n");
}

char *em_cuda_ew_source(const em_op *ops, int n, em_dtype dt) {
    em_strbuf s;
    em_strbuf_init(&s);
    em_strbuf_printf(&s, "/* ember: eager elementwise kernels, %s (generated from ops.def and ops_math.h) */\n"
                         "#include \"ember/ops_math.h\"\n"
                         "struct em_cuda_geometry { int ndim; long long shape[%d]; long long strides[4][%d]; };\n",
                     em_dtype_long_name(dt), EM_MAX_DIMS, EM_MAX_DIMS);
    for (int i = 0; i < n; i++) {
        const ew_row *r = row_of(ops[i], dt);
        if (!r) {
            free(em_strbuf_take(&s));
            em_error(EM_ERR_NOT_IMPLEMENTED, "cuda: %s has no scalar definition for %s", em_op_get(ops[i])->name,
                     em_dtype_long_name(dt));
            return NULL;
        }
        contig_kernel(&s, r);
        strided_kernel(&s, r);
    }
    char *text = em_strbuf_take(&s);
    if (!text) em_error(EM_ERR_NOMEM, "out of memory generating CUDA C");
    return text;
}

em_status em_cuda_ew_ptx(const em_op *ops, int n, em_dtype dt, int sm, char **ptx) {
    *ptx = NULL;
    const char *const *texts, *const *names;
    int n_headers = em_cuda_headers(&texts, &names);
    if (n_headers < 0) return em_error(EM_ERR_NOMEM, "out of memory");
    char *src = em_cuda_ew_source(ops, n, dt);
    if (!src) return em_last_status();
    char name[64];
    snprintf(name, sizeof name, "ember_ew_%s.cu", em_dtype_name(dt));
    em_status st = em_nvrtc_compile(src, name, n_headers, texts, names, sm, ptx, NULL);
    free(src);
    return st;
}
