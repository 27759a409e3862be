/*
 * ew_source.c - the eager elementwise kernels of the CUDA device as CUDA C,
 * generated from the op table.
 *
 * Every elementwise row of ops.def has, per compute dtype of its class, a
 * scalar definition sc_<op>_<dtype> in ops_math.h: the text the CPU's eager
 * kernels and the LLVM backend compile too. A kernel is an op with its
 * operands' stored dtypes and its result's: operands are converted as the
 * eager kernels convert them (em_ew_operand_via, em_ew_operand_dtype:
 * float16 and bfloat16 compute in float32), the call is in the compute
 * dtype, its result is rounded to the result's dtype; a cast is
 * sc_cast_<from>_<to>. The source made here includes ops_math.h verbatim
 * (NVRTC is handed it by name) and makes two kernels of each:
 *
 *   em_cuda_<op>_<in dtypes>_to_<out dtype>_contig(n, out, a[, b[, c]])
 *       every operand contiguous and 16-byte aligned: each thread loads
 *       16 bytes of the widest operand per step (4 floats, 2 doubles, 16
 *       bytes) as one vector, the tail element by element;
 *   em_cuda_<op>_<in dtypes>_to_<out dtype>_strided(n, geometry, out, a[, b[, c]])
 *       any strides, broadcasting included (stride 0): the element's
 *       offsets come from its index, dim by dim.
 *
 * Both are grid-stride loops, so any grid covers any n. One source holds
 * the kernels of many ops of one dtype: NVRTC parses ops_math.h once for
 * them all.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ember/codegen_cuda.h"
#include "ember/strbuf.h"
#include "source_text.h"

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

int em_cuda_ew_uniform(em_dtype dt, em_cuda_ew_kernel *ks, int max) {
    int n = 0;
    for (int i = 0; i < N_ROWS; i++) {
        if (rows[i].dtype != dt) continue;
        if (n < max) {
            em_cuda_ew_kernel *k = &ks[n];
            k->op = rows[i].op;
            k->n_in = rows[i].arity;
            for (int j = 0; j < 3; j++) k->in[j] = dt;
            if (rows[i].shape == SHAPE_WHERE) k->in[0] = EM_DTYPE_BOOL;
            k->out = rows[i].shape == SHAPE_PRED ? EM_DTYPE_BOOL : dt;
        }
        n++;
    }
    return n;
}

/* ---- the source ---- */

static bool is_cast(em_op op) { return em_op_get(op)->kind == EM_KIND_CAST; }

/* The compute dtype of kernel k (its scalar definition's), or -1 when it
 * has none. A cast has none: it is sc_cast_<from>_<to>. */
static int compute_dtype(const em_cuda_ew_kernel *k) {
    em_type in[3];
    for (int i = 0; i < k->n_in && i < 3; i++) in[i] = (em_type){.dtype = k->in[i]};
    em_dtype cd = em_ew_compute_dtype(k->op, in, k->n_in, k->out);
    return row_of(k->op, cd) ? (int)cd : -1;
}

em_status em_cuda_ew_check(const em_cuda_ew_kernel *k) {
    const em_op_info *info = em_op_get(k->op);
    bool ew = info->kind == EM_KIND_CAST || (info->flags & EM_F_ELEMENTWISE);
    if (!ew || (is_cast(k->op) ? k->n_in != 1 : k->n_in != info->n_in) || k->n_in < 1 || k->n_in > 3)
        return em_error(EM_ERR_NOT_IMPLEMENTED, "cuda: %s is not an elementwise op of %d operand%s", info->name,
                        k->n_in, k->n_in == 1 ? "" : "s");
    for (int i = 0; i < k->n_in; i++)
        if (k->in[i] < 0 || k->in[i] >= EM_DTYPE_COUNT) return em_error(EM_ERR_VALUE, "cuda: %s: bad dtype", info->name);
    if (k->out < 0 || k->out >= EM_DTYPE_COUNT) return em_error(EM_ERR_VALUE, "cuda: %s: bad dtype", info->name);
    if (!is_cast(k->op) && compute_dtype(k) < 0) {
        char in[96] = "";
        for (int i = 0; i < k->n_in; i++)
            snprintf(in + strlen(in), sizeof in - strlen(in), "%s%s", i ? ", " : "", em_dtype_long_name(k->in[i]));
        return em_error(EM_ERR_NOT_IMPLEMENTED, "cuda: %s has no scalar definition for (%s) -> %s", info->name, in,
                        em_dtype_long_name(k->out));
    }
    return EM_OK;
}

void em_cuda_ew_name(const em_cuda_ew_kernel *k, em_cuda_layout layout, char *out, size_t n) {
    int w = snprintf(out, n, "em_cuda_%s", em_op_get(k->op)->name);
    for (int i = 0; i < k->n_in && w >= 0 && (size_t)w < n; i++) w += snprintf(out + w, n - (size_t)w, "_%s", em_cuda_sfx(k->in[i]));
    if (w >= 0 && (size_t)w < n)
        snprintf(out + w, n - (size_t)w, "_to_%s_%s", em_cuda_sfx(k->out), layout == EM_CUDA_CONTIG ? "contig" : "strided");
}

/* The element expression of kernel k, operand i read as args[i]: what
 * em_llvm_emit_element does, as text. Operands into their via dtype, then
 * their operand dtype; the call in the compute dtype; its result into the
 * kernel's. */
static void element(em_strbuf *s, const em_cuda_ew_kernel *k, const char *const *args) {
    if (is_cast(k->op)) {
        em_cuda_convert(s, args[0], k->in[0], k->out);
        return;
    }
    em_type in[3];
    for (int i = 0; i < k->n_in; i++) in[i] = (em_type){.dtype = k->in[i]};
    em_dtype cd = (em_dtype)compute_dtype(k), native = em_ew_native_result(k->op, cd);
    em_strbuf call;
    em_strbuf_init(&call);
    em_strbuf_printf(&call, "sc_%s_%s(", row_of(k->op, cd)->name, em_cuda_sfx(cd));
    for (int i = 0; i < k->n_in; i++) {
        em_dtype via = em_ew_operand_via(k->op, i, in, k->n_in, k->out), od = em_ew_operand_dtype(k->op, i, cd);
        em_strbuf first;
        em_strbuf_init(&first);
        em_cuda_convert(&first, args[i], k->in[i], via);
        if (i) em_strbuf_puts(&call, ", ");
        em_cuda_convert(&call, first.data ? first.data : "", via, od);
        free(em_strbuf_take(&first));
    }
    em_strbuf_puts(&call, ")");
    em_cuda_convert(s, call.data ? call.data : "", native, k->out);
    free(em_strbuf_take(&call));
}

static void parameters(em_strbuf *s, const em_cuda_ew_kernel *k) {
    em_strbuf_printf(s, "%s *__restrict__ out", em_cuda_ctype(k->out));
    for (int i = 0; i < k->n_in; i++) em_strbuf_printf(s, ", const %s *__restrict__ in%d", em_cuda_ctype(k->in[i]), i + 1);
}

static size_t size_of(em_dtype dt) { return em_dtype_size(dt); }

static void contig_kernel(em_strbuf *s, const em_cuda_ew_kernel *k) {
    size_t widest = size_of(k->out);
    for (int i = 0; i < k->n_in; i++) widest = size_of(k->in[i]) > widest ? size_of(k->in[i]) : widest;
    int v = (int)(16 / widest); /* elements per vector: 16 bytes of the widest operand */
    char name[160];
    em_cuda_ew_name(k, EM_CUDA_CONTIG, name, sizeof name);
    for (int i = 0; i <= k->n_in; i++) {
        em_dtype dt = i ? k->in[i - 1] : k->out;
        em_strbuf_printf(s, "struct __align__(%zu) %s_v%d { %s e[%d]; };\n", size_of(dt) * (size_t)v, name, i,
                         em_cuda_ctype(dt), v);
    }
    em_strbuf_printf(s, "extern \"C\" __global__ void %s(long long n, ", name);
    parameters(s, k);
    em_strbuf_printf(s, ") {\n"
                        "    long long step = (long long)gridDim.x * blockDim.x;\n"
                        "    long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;\n"
                        "    long long vectors = n / %d;\n"
                        "    for (long long i = t; i < vectors; i += step) {\n",
                     v);
    for (int i = 1; i <= k->n_in; i++)
        em_strbuf_printf(s, "        %s_v%d x%d = ((const %s_v%d *)in%d)[i];\n", name, i, i, name, i, i);
    em_strbuf_printf(s, "        %s_v0 y;\n        for (int j = 0; j < %d; j++) y.e[j] = ", name, v);
    const char *vargs[3] = {"x1.e[j]", "x2.e[j]", "x3.e[j]"};
    element(s, k, vargs);
    em_strbuf_printf(s, ";\n        ((%s_v0 *)out)[i] = y;\n    }\n", name);
    em_strbuf_printf(s, "    for (long long i = vectors * %d + t; i < n; i += step) out[i] = ", v);
    const char *sargs[3] = {"in1[i]", "in2[i]", "in3[i]"};
    element(s, k, sargs);
    em_strbuf_puts(s, ";\n}\n");
}

static void strided_kernel(em_strbuf *s, const em_cuda_ew_kernel *k) {
    char name[160];
    em_cuda_ew_name(k, EM_CUDA_STRIDED, name, sizeof name);
    em_strbuf_printf(s, "extern \"C\" __global__ void %s(long long n, em_cuda_geometry g, ", name);
    parameters(s, k);
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
                     k->n_in + 1, k->n_in + 1);
    const char *args[3] = {"in1[o[1]]", "in2[o[2]]", "in3[o[3]]"};
    element(s, k, args);
    em_strbuf_puts(s, ";\n    }\n}\n");
}

char *em_cuda_ew_source(const em_cuda_ew_kernel *ks, int n) {
    for (int i = 0; i < n; i++)
        if (em_cuda_ew_check(&ks[i]) != EM_OK) return NULL;
    em_strbuf s;
    em_strbuf_init(&s);
    em_strbuf_printf(&s, "/* ember: eager elementwise kernels (generated from ops.def and ops_math.h) */\n"
                         "#include \"ember/ops_math.h\"\n"
                         "struct em_cuda_geometry { int ndim; long long shape[%d]; long long strides[4][%d]; };\n",
                     EM_MAX_DIMS, EM_MAX_DIMS);
    for (int i = 0; i < n; i++) {
        contig_kernel(&s, &ks[i]);
        strided_kernel(&s, &ks[i]);
    }
    return em_cuda_source_take(&s);
}

em_status em_cuda_ew_ptx(const em_cuda_ew_kernel *ks, int n, int sm, char **ptx) {
    return em_cuda_source_ptx(em_cuda_ew_source(ks, n), "ember_ew.cu", sm, ptx);
}
