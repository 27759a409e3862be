/*
 * adv_source.c - advanced indexing as CUDA C: x[i_1, ..., i_k] (index,
 * and index_select, its one-index case) and x[i_1, ..., i_k] = v or += v
 * (index_put), over the plan ../runtime/infer/index.h makes: the index
 * tensors broadcast to a shape B, which takes the indexed dims' place in
 * the result (or comes first when they are not adjacent).
 *
 *   em_cuda_index_<T>(n, g, out, x, bad)        out[p] = x[at(p)]
 *   em_cuda_index_put_<T>(n, g, out, v, bad)    out[at(p)] = v[p]
 *   em_cuda_index_put_add_<T>(n, g, out, v, bad)  out[at(p)] += v[p] (atomics)
 *
 * One thread per position p of the indexing result (a grid-stride loop).
 * at(p) is x's offset: x's strides along the result dims outside B, plus,
 * for each index tensor j, its value at p (its int64 copy, broadcast by
 * zero strides) times x's stride along the dim it indexes. Negative
 * values count from the end (index, index_put) or are out of range
 * (index_select, as the CPU's); one out of range writes nothing and goes
 * into *bad, which the caller reads and raises as the CPU's IndexError.
 * Accumulation adds with atomics (float32, float64, int32, int64), so
 * repeated positions add in the hardware's order, as PyTorch's CUDA
 * index_put_(accumulate=True) does.
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

em_status em_cuda_adv_check(const em_cuda_adv_kernel *k) {
    if (k->op != EM_OP_INDEX && k->op != EM_OP_INDEX_PUT)
        return em_error(EM_ERR_NOT_IMPLEMENTED, "cuda: %s is not index or index_put",
                        (unsigned)k->op < EM_OP_COUNT ? em_op_name(k->op) : "(bad op)");
    if (k->dtype < 0 || k->dtype >= EM_DTYPE_COUNT)
        return em_error(EM_ERR_VALUE, "cuda: index: bad dtype");
    if (k->accumulate && (k->op != EM_OP_INDEX_PUT || !adds_atomically(k->dtype)))
        return em_error(
            EM_ERR_NOT_IMPLEMENTED,
            "index_put with accumulate: no kernel for it on cuda yet for %s (atomic adds: float32, "
            "float64, int32, int64)",
            em_dtype_long_name(k->dtype));
    return EM_OK;
}

void em_cuda_adv_name(const em_cuda_adv_kernel *k, char *out, size_t n) {
    snprintf(out, n, "em_cuda_%s%s_%s", k->op == EM_OP_INDEX ? "index" : "index_put",
             k->accumulate ? "_add" : "", em_cuda_sfx(k->dtype));
}

static void kernel(em_strbuf *s, const em_cuda_adv_kernel *k) {
    char name[96];
    em_cuda_adv_name(k, name, sizeof name);
    const char *T = em_cuda_ctype(k->dtype);
    bool get = k->op == EM_OP_INDEX;
    em_strbuf_printf(
        s,
        "extern \"C\" __global__ void %s(long long n, em_cuda_adv_geometry g, %s *out, "
        "const %s *__restrict__ from, long long *bad) {\n",
        name, T, T);
    em_strbuf_puts(s, "    long long step = (long long)gridDim.x * blockDim.x;\n"
                      "    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i "
                      "< n; i += step) {\n"
                      "        long long rem = i, at_x = 0, at_other = 0, at_ix[EM_ADV_MAX];\n"
                      "        for (int j = 0; j < g.k; j++) at_ix[j] = 0;\n"
                      "        for (int d = g.nd - 1; d >= 0; d--) {\n"
                      "            long long c = rem % g.shape[d];\n"
                      "            rem /= g.shape[d];\n"
                      "            at_x += c * g.x[d];\n"
                      "            at_other += c * g.other[d];\n"
                      "            for (int j = 0; j < g.k; j++) at_ix[j] += c * g.ix[j][d];\n"
                      "        }\n"
                      "        bool inside = true;\n"
                      "        for (int j = 0; j < g.k && inside; j++) {\n"
                      "            long long v = ((const long long *)g.ptr[j])[at_ix[j]], w = v;\n"
                      "            if (w < 0 && g.wrap) w += g.size[j];\n"
                      "            if (w < 0 || w >= g.size[j]) {\n"
                      "                atomicCAS((unsigned long long *)bad, 0x8000000000000000ull, "
                      "(unsigned long long)v);\n"
                      "                inside = false;\n"
                      "            }\n"
                      "            at_x += w * g.step[j];\n"
                      "        }\n"
                      "        if (!inside) continue;\n");
    if (get)
        em_strbuf_puts(s, "        out[at_other] = from[at_x];\n");
    else if (!k->accumulate)
        em_strbuf_puts(s, "        out[at_x] = from[at_other];\n");
    else if (k->dtype == EM_DTYPE_I64)
        em_strbuf_puts(s, "        atomicAdd((unsigned long long *)&out[at_x], (unsigned long "
                          "long)from[at_other]);\n");
    else
        em_strbuf_puts(s, "        atomicAdd(&out[at_x], from[at_other]);\n");
    em_strbuf_puts(s, "    }\n}\n");
}

char *em_cuda_adv_source(const em_cuda_adv_kernel *ks, int n) {
    for (int i = 0; i < n; i++)
        if (em_cuda_adv_check(&ks[i]) != EM_OK) return NULL;
    em_strbuf s;
    em_strbuf_init(&s);
    em_strbuf_printf(&s,
                     "/* ember: advanced indexing (codegen_cuda/adv_source.c) */\n"
                     "#include \"ember/ops_math.h\"\n"
                     "#define EM_ADV_MAX %d\n"
                     "struct em_cuda_adv_geometry {\n"
                     "    int nd, k, wrap;\n"
                     "    long long shape[%d], x[%d], other[%d];\n"
                     "    long long ix[%d][%d];\n"
                     "    long long step[%d], size[%d];\n"
                     "    unsigned long long ptr[%d];\n"
                     "};\n",
                     EM_MAX_DIMS, EM_MAX_DIMS, EM_MAX_DIMS, EM_MAX_DIMS, EM_MAX_DIMS, EM_MAX_DIMS,
                     EM_MAX_DIMS, EM_MAX_DIMS, EM_MAX_DIMS);
    for (int i = 0; i < n; i++) kernel(&s, &ks[i]);
    return em_cuda_source_take(&s);
}

em_status em_cuda_adv_ptx(const em_cuda_adv_kernel *ks, int n, int sm, char **ptx) {
    return em_cuda_source_ptx(em_cuda_adv_source(ks, n), "ember_adv.cu", sm, ptx);
}

int em_cuda_adv_all(em_cuda_adv_kernel *ks, int max) {
    static const em_dtype dts[] = {EM_DTYPE_F32, EM_DTYPE_F64, EM_DTYPE_F16, EM_DTYPE_BF16,
                                   EM_DTYPE_I64, EM_DTYPE_I32, EM_DTYPE_I16, EM_DTYPE_I8,
                                   EM_DTYPE_U8,  EM_DTYPE_BOOL};
    int n = 0;
    for (size_t d = 0; d < sizeof dts / sizeof *dts; d++)
        for (int form = 0; form < 3; form++) {
            em_cuda_adv_kernel k = {form == 0 ? EM_OP_INDEX : EM_OP_INDEX_PUT, dts[d], form == 2};
            if (form == 2 && !adds_atomically(dts[d])) continue;
            if (n < max) ks[n] = k;
            n++;
        }
    return n;
}

void em_cuda_adv_geometry_of(const struct em_tensor *x, const struct em_tensor *const *ix, int k,
                             const int64_t *dims, int nb, int pos, const int64_t *shape,
                             const int *rest_dim, int nd, const int64_t *other_strides, bool wrap,
                             em_cuda_adv_geometry *g) {
    memset(g, 0, sizeof *g);
    g->nd = nd;
    g->wrap = wrap;
    for (int d = 0; d < nd; d++) {
        g->shape[d] = shape[d];
        g->x[d] = rest_dim[d] >= 0 ? x->strides[rest_dim[d]] : 0;
        g->other[d] = other_strides[d];
    }
    g->k = k;
    for (int j = 0; j < k; j++) {
        const struct em_tensor *t = ix[j];
        for (int b = 0; b < nb; b++) { /* (t aligned to B's right end; broadcast dims step 0) */
            int td = b - (nb - t->ndim);
            g->ix[j][pos + b] = td >= 0 && t->shape[td] != 1 ? t->strides[td] : 0;
        }
        g->step[j] = x->strides[dims[j]];
        g->size[j] = x->shape[dims[j]];
        g->ptr[j] = (unsigned long long)(uintptr_t)em_tensor_data(t);
    }
}
