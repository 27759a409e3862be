/*
 * index_source.c - gather and scatter as CUDA C: torch.gather's
 * out[p] = x[p with dim d := index[p]] and scatter's
 * out[p with dim d := index[p]] = src[p] (or += with accumulate), over
 * every position p of the index tensor.
 *
 *   em_cuda_gather_<T>_<I>(n, g, out, x, index, bad)
 *   em_cuda_scatter_<T>_<I>(n, g, out, index, src, bad)
 *   em_cuda_scatter_add_<T>_<I>(n, g, out, index, src, bad)
 *
 * One thread per index position, a grid-stride loop. The caller's
 * geometry gives the index's shape and, per position, the offsets in the
 * index, in the tensor read along its own dims (x for gather, src for
 * scatter) and in the tensor addressed through the index (x for gather,
 * out for scatter, its dim d left out: `step` and `size` are that dim's
 * stride and length). An index out of [0, size) writes nothing: the
 * first such value goes into *bad (which the caller set to INT64_MIN)
 * and the caller raises the CPU's error, where PyTorch's device-side
 * assert would end the process's use of the GPU.
 *
 * A gather or a plain scatter moves elements as their bits, so it exists
 * for every dtype. Accumulation adds with atomics (float32, float64,
 * int32, int64: integers wrap as the CPU's), so duplicate indices add in
 * an order the hardware picks: float sums may differ from the CPU's in
 * their last bits, as PyTorch's CUDA scatter_add differs. A plain scatter
 * with duplicate indices keeps one of the values, which one unspecified
 * (PyTorch documents the same).
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <string.h>

#include "ember/codegen_cuda.h"
#include "ember/strbuf.h"
#include "ember/tensor.h"
#include "source_text.h"

static bool adds_atomically(em_dtype dt) {
    return dt == EM_DTYPE_F32 || dt == EM_DTYPE_F64 || dt == EM_DTYPE_I32 || dt == EM_DTYPE_I64;
}

em_status em_cuda_index_check(const em_cuda_index_kernel *k) {
    if (k->op != EM_OP_GATHER && k->op != EM_OP_SCATTER)
        return em_error(EM_ERR_NOT_IMPLEMENTED, "cuda: %s is not gather or scatter",
                        (unsigned)k->op < EM_OP_COUNT ? em_op_name(k->op) : "(bad op)");
    if (k->dtype < 0 || k->dtype >= EM_DTYPE_COUNT) return em_error(EM_ERR_VALUE, "cuda: gather/scatter: bad dtype");
    if (k->index != EM_DTYPE_I64 && k->index != EM_DTYPE_I32)
        return em_error(EM_ERR_DTYPE, "cuda: %s: the index must be int64 or int32, got %s", em_op_name(k->op),
                        em_dtype_long_name(k->index));
    if (k->accumulate && (k->op != EM_OP_SCATTER || !adds_atomically(k->dtype)))
        return em_error(EM_ERR_NOT_IMPLEMENTED,
                        "scatter with accumulate: no kernel for it on cuda yet for %s (atomic adds: float32, "
                        "float64, int32, int64)",
                        em_dtype_long_name(k->dtype));
    return EM_OK;
}

void em_cuda_index_name(const em_cuda_index_kernel *k, char *out, size_t n) {
    snprintf(out, n, "em_cuda_%s%s_%s_%s", k->op == EM_OP_GATHER ? "gather" : "scatter", k->accumulate ? "_add" : "",
             em_cuda_sfx(k->dtype), em_cuda_sfx(k->index));
}

static void kernel(em_strbuf *s, const em_cuda_index_kernel *k) {
    char name[96];
    em_cuda_index_name(k, name, sizeof name);
    const char *T = em_cuda_ctype(k->dtype), *I = em_cuda_ctype(k->index);
    bool gather = k->op == EM_OP_GATHER;
    if (gather)
        em_strbuf_printf(s, "extern \"C\" __global__ void %s(long long n, em_cuda_index_geometry g, %s *__restrict__ out, "
                            "const %s *__restrict__ x, const %s *__restrict__ index, long long *bad) {\n",
                         name, T, T, I);
    else
        em_strbuf_printf(s, "extern \"C\" __global__ void %s(long long n, em_cuda_index_geometry g, %s *out, "
                            "const %s *__restrict__ index, const %s *__restrict__ src, long long *bad) {\n",
                         name, T, I, T);
    em_strbuf_puts(s, "    long long step = (long long)gridDim.x * blockDim.x;\n"
                      "    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += step) {\n"
                      "        long long rem = i, at_index = 0, at_read = 0, at_addressed = 0;\n"
                      "        for (int d = g.ndim - 1; d >= 0; d--) {\n"
                      "            long long c = rem % g.shape[d];\n"
                      "            rem /= g.shape[d];\n"
                      "            at_index += c * g.index[d];\n"
                      "            at_read += c * g.read[d];\n"
                      "            at_addressed += c * g.addressed[d];\n"
                      "        }\n"
                      "        long long j = (long long)index[at_index];\n"
                      "        if (j < 0 || j >= g.size) {\n"
                      "            atomicCAS((unsigned long long *)bad, 0x8000000000000000ull, (unsigned long long)j);\n"
                      "            continue;\n"
                      "        }\n");
    if (gather)
        em_strbuf_puts(s, "        out[at_read] = x[at_addressed + j * g.step];\n");
    else if (!k->accumulate)
        em_strbuf_puts(s, "        out[at_addressed + j * g.step] = src[at_read];\n");
    else if (k->dtype == EM_DTYPE_I64)
        em_strbuf_puts(s, "        atomicAdd((unsigned long long *)&out[at_addressed + j * g.step], "
                          "(unsigned long long)src[at_read]);\n");
    else
        em_strbuf_puts(s, "        atomicAdd(&out[at_addressed + j * g.step], src[at_read]);\n");
    em_strbuf_puts(s, "    }\n}\n");
}

char *em_cuda_index_source(const em_cuda_index_kernel *ks, int n) {
    for (int i = 0; i < n; i++)
        if (em_cuda_index_check(&ks[i]) != EM_OK) return NULL;
    em_strbuf s;
    em_strbuf_init(&s);
    em_strbuf_printf(&s, "/* ember: gather and scatter (codegen_cuda/index_source.c) */\n"
                         "#include \"ember/ops_math.h\"\n"
                         "struct em_cuda_index_geometry {\n"
                         "    int ndim;\n"
                         "    long long shape[%d], index[%d], read[%d], addressed[%d];\n"
                         "    long long step, size;\n"
                         "};\n",
                     EM_MAX_DIMS, EM_MAX_DIMS, EM_MAX_DIMS, EM_MAX_DIMS);
    for (int i = 0; i < n; i++) kernel(&s, &ks[i]);
    return em_cuda_source_take(&s);
}

em_status em_cuda_index_ptx(const em_cuda_index_kernel *ks, int n, int sm, char **ptx) {
    return em_cuda_source_ptx(em_cuda_index_source(ks, n), "ember_index.cu", sm, ptx);
}

int em_cuda_index_all(em_cuda_index_kernel *ks, int max) {
    static const em_dtype dts[] = {EM_DTYPE_F32, EM_DTYPE_F64, EM_DTYPE_F16, EM_DTYPE_BF16, EM_DTYPE_I64,
                                   EM_DTYPE_I32, EM_DTYPE_I16,  EM_DTYPE_I8,  EM_DTYPE_U8,   EM_DTYPE_BOOL};
    static const em_dtype ixs[] = {EM_DTYPE_I64, EM_DTYPE_I32};
    int n = 0;
    for (size_t d = 0; d < sizeof dts / sizeof *dts; d++)
        for (size_t i = 0; i < 2; i++)
            for (int form = 0; form < 3; form++) {
                em_cuda_index_kernel k = {form == 0 ? EM_OP_GATHER : EM_OP_SCATTER, dts[d], ixs[i], form == 2};
                if (form == 2 && !adds_atomically(dts[d])) continue;
                if (n < max) ks[n] = k;
                n++;
            }
    return n;
}

/* The positions: the index's shape and strides; `read` walks its tensor's
 * own dims, `addressed` all of its tensor's but d. */
static void geometry(const em_tensor *addressed, const em_tensor *index, const em_tensor *read, int d,
                     em_cuda_index_geometry *g) {
    memset(g, 0, sizeof *g);
    g->ndim = index->ndim;
    for (int i = 0; i < index->ndim; i++) {
        g->shape[i] = index->shape[i];
        g->index[i] = index->strides[i];
        g->read[i] = i < read->ndim ? read->strides[i] : 0;
        g->addressed[i] = i < addressed->ndim && i != d ? addressed->strides[i] : 0;
    }
    g->step = addressed->ndim ? addressed->strides[d] : 0;
    g->size = addressed->ndim ? addressed->shape[d] : 1;
}

void em_cuda_gather_geometry(const em_tensor *x, const em_tensor *index, const em_tensor *out, int d,
                             em_cuda_index_geometry *g) {
    geometry(x, index, out, d, g);
}

void em_cuda_scatter_geometry(const em_tensor *out, const em_tensor *index, const em_tensor *src, int d,
                              em_cuda_index_geometry *g) {
    geometry(out, index, src, d, g);
}
