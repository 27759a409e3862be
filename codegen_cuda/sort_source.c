/*
 * sort_source.c - sorting along lines as CUDA C: em_cuda_sort_<T>, the
 * values and their int64 indices of each line in order, for every stored
 * dtype.
 *
 * The CPU's order (runtime/cpu/sort.c): every value becomes an unsigned
 * 64-bit order key (floats: NaN above +inf, -0 equal to 0; signed integers
 * offset by their sign bit; descending: the key's complement), and equal
 * keys keep their input order (the sort is stable). Here each line's
 * (key, index) pairs sort by a bitonic network over the line padded to a
 * power of two (padding sorts last): with the index breaking ties every
 * pair is distinct, so the network's result is the stable sort's, the
 * CPU's. Values are read back from the input at the sorted indices, so
 * they keep their bits (-0 stays -0), as the CPU's do.
 *
 *   em_cuda_sort_<T>(n_lines, g, P, descending, values, indices, x, keys, idx)
 *
 * One block per line (a grid-stride loop over lines): the pairs live in
 * `keys` and `idx`, P entries per block (global scratch the caller sizes
 * as gridDim.x * P), and the block's threads share each step of the
 * network, a barrier between steps. The network is the same whatever the
 * thread count, so one thread (test_cuda_host_run) computes what a block
 * does.
 */
#include <stdio.h>

#include "ember/codegen_cuda.h"
#include "ember/strbuf.h"
#include "source_text.h"

static const char body[] =
    "struct em_cuda_line_geometry {\n"
    "    int k_ndim;\n"
    "    long long k_shape[EM_SORT_DIMS], k_in[EM_SORT_DIMS], k_out[EM_SORT_DIMS];\n"
    "    long long len, in_step, out_step;\n"
    "};\n"
    "typedef unsigned long long em_key;\n"
    "static __device__ __forceinline__ em_key em_key_bits32(unsigned u) {\n"
    "    return (u & 0x80000000u) ? (em_key)(~u) : (em_key)(u | 0x80000000u);\n"
    "}\n"
    "static __device__ __forceinline__ em_key em_key_f32(float v) {\n"
    "    union { float f; unsigned u; } c;\n"
    "    c.f = v;\n"
    "    unsigned u = v != v ? 0x7fc00000u : v == 0.0f ? 0u : c.u; /* one NaN; -0 is 0 */\n"
    "    return em_key_bits32(u) & 0xffffffffull;\n"
    "}\n"
    "static __device__ __forceinline__ em_key em_key_f64(double v) {\n"
    "    union { double f; em_key u; } c;\n"
    "    c.f = v;\n"
    "    em_key u = v != v ? 0x7ff8000000000000ull : v == 0.0 ? 0ull : c.u;\n"
    "    return (u >> 63) ? ~u : (u | 0x8000000000000000ull);\n"
    "}\n"
    "static __device__ __forceinline__ em_key em_key_f16(em_sc_f16 v) { return "
    "em_key_f32(sc_cast_f16_f32(v)); }\n"
    "static __device__ __forceinline__ em_key em_key_bf16(em_sc_bf16 v) { return "
    "em_key_f32(sc_cast_bf16_f32(v)); }\n"
    "static __device__ __forceinline__ em_key em_key_i64(em_sc_i64 v) { return (em_key)v ^ "
    "0x8000000000000000ull; }\n"
    "static __device__ __forceinline__ em_key em_key_i32(em_sc_i32 v) { return "
    "(em_key)((unsigned)v ^ 0x80000000u); }\n"
    "static __device__ __forceinline__ em_key em_key_i16(em_sc_i16 v) { return "
    "em_key_i32((em_sc_i32)v); }\n"
    "static __device__ __forceinline__ em_key em_key_i8(em_sc_i8 v) { return "
    "em_key_i32((em_sc_i32)v); }\n"
    "static __device__ __forceinline__ em_key em_key_u8(em_sc_u8 v) { return (em_key)v; }\n"
    "static __device__ __forceinline__ em_key em_key_b8(bool v) { return (em_key)v; }\n"
    "/* does pair a come after pair b? (padding: index -1, after everything) */\n"
    "static __device__ __forceinline__ bool em_after(em_key ka, long long ia, em_key kb, long long "
    "ib) {\n"
    "    if (ia < 0 || ib < 0) return ia < 0 && ib >= 0;\n"
    "    return ka > kb || (ka == kb && ia > ib);\n"
    "}\n"
    "template <class T, em_key (*KEY)(T)>\n"
    "static __device__ __forceinline__ void sort_lines(long long n_lines, const "
    "em_cuda_line_geometry &g, long long P,\n"
    "                                                  int descending, T *values, long long "
    "*indices, const T *x,\n"
    "                                                  em_key *keys, long long *idx) {\n"
    "    em_key *k = keys + (long long)blockIdx.x * P;\n"
    "    long long *ix = idx + (long long)blockIdx.x * P;\n"
    "    em_key flip = descending ? ~0ull : 0ull;\n"
    "    for (long long line = blockIdx.x; line < n_lines; line += gridDim.x) {\n"
    "        long long rem = line, at_in = 0, at_out = 0;\n"
    "        for (int d = g.k_ndim - 1; d >= 0; d--) {\n"
    "            long long c = rem % g.k_shape[d];\n"
    "            rem /= g.k_shape[d];\n"
    "            at_in += c * g.k_in[d];\n"
    "            at_out += c * g.k_out[d];\n"
    "        }\n"
    "        for (long long i = threadIdx.x; i < P; i += blockDim.x) {\n"
    "            bool real = i < g.len;\n"
    "            k[i] = real ? KEY(x[at_in + i * g.in_step]) ^ flip : 0;\n"
    "            ix[i] = real ? i : -1;\n"
    "        }\n"
    "        __syncthreads();\n"
    "        for (long long size = 2; size <= P; size <<= 1)\n"
    "            for (long long stride = size >> 1; stride > 0; stride >>= 1) {\n"
    "                for (long long i = threadIdx.x; i < P; i += blockDim.x) {\n"
    "                    long long j = i ^ stride;\n"
    "                    if (j <= i) continue;\n"
    "                    bool up = (i & size) == 0; /* this run ascends */\n"
    "                    bool out_of_order = up ? em_after(k[i], ix[i], k[j], ix[j]) : "
    "em_after(k[j], ix[j], k[i], ix[i]);\n"
    "                    if (out_of_order) {\n"
    "                        em_key tk = k[i];\n"
    "                        k[i] = k[j];\n"
    "                        k[j] = tk;\n"
    "                        long long ti = ix[i];\n"
    "                        ix[i] = ix[j];\n"
    "                        ix[j] = ti;\n"
    "                    }\n"
    "                }\n"
    "                __syncthreads();\n"
    "            }\n"
    "        for (long long i = threadIdx.x; i < g.len; i += blockDim.x) {\n"
    "            values[at_out + i * g.out_step] = x[at_in + ix[i] * g.in_step];\n"
    "            indices[at_out + i * g.out_step] = ix[i];\n"
    "        }\n"
    "        __syncthreads();\n"
    "    }\n"
    "}\n";

static const em_dtype sorted_dtypes[] = {EM_DTYPE_F32, EM_DTYPE_F64, EM_DTYPE_F16, EM_DTYPE_BF16,
                                         EM_DTYPE_I64, EM_DTYPE_I32, EM_DTYPE_I16, EM_DTYPE_I8,
                                         EM_DTYPE_U8,  EM_DTYPE_BOOL};

char *em_cuda_sort_source(void) {
    em_strbuf s;
    em_strbuf_init(&s);
    em_strbuf_printf(&s,
                     "/* ember: sorting along lines (codegen_cuda/sort_source.c) */\n"
                     "#include \"ember/ops_math.h\"\n"
                     "#define EM_SORT_DIMS %d\n",
                     EM_MAX_DIMS);
    em_strbuf_puts(&s, body);
    for (size_t i = 0; i < sizeof sorted_dtypes / sizeof *sorted_dtypes; i++) {
        const char *T = em_cuda_ctype(sorted_dtypes[i]);
        em_strbuf_printf(&s,
                         "extern \"C\" __global__ void em_cuda_sort_%s(long long n_lines, "
                         "em_cuda_line_geometry g, "
                         "long long P, int descending, %s *values, long long *indices, const %s "
                         "*__restrict__ x, "
                         "em_key *keys, long long *idx) {\n"
                         "    sort_lines<%s, em_key_%s>(n_lines, g, P, descending, values, "
                         "indices, x, keys, idx);\n}\n",
                         em_cuda_sfx(sorted_dtypes[i]), T, T, T, em_cuda_sfx(sorted_dtypes[i]));
    }
    return em_cuda_source_take(&s);
}

em_status em_cuda_sort_ptx(int sm, char **ptx) {
    return em_cuda_source_ptx(em_cuda_sort_source(), "ember_sort.cu", sm, ptx);
}

void em_cuda_sort_name(em_dtype dt, char *out, size_t n) {
    snprintf(out, n, "em_cuda_sort_%s", em_cuda_sfx(dt));
}
