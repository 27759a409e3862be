/*
 * window_source.c - the sliding-window kernels of the CUDA device as CUDA
 * C, over the geometry ../runtime/infer/window.h defines for every device
 * (the big side: a convolution's or pool's input; the small side: the
 * positions a window stops at; three spatial dims, leading ones of size 1):
 *
 *   em_cuda_im2col_<T>(n, g, col, x)     col[n, c*K + tap, l] = x at that
 *       tap of window l, 0 in the padding: a convolution's columns, which
 *       cuBLAS multiplies (cuda/window.c makes conv, conv_weight and
 *       conv_transpose of them);
 *   em_cuda_col2im_<T>(n, g, x, col)     x[n, c, j] = the sum of the column
 *       entries that read j: conv_transpose's (an input gradient's) last
 *       step. One thread per x element gathers its taps in tap order, the
 *       order the CPU's col2im adds them in, so no atomics and the CPU's
 *       bits from the same columns;
 *   em_cuda_max_pool_<T>(n, g, y, idx, x)  each window's max and where it
 *       was in its plane, the CPU's rule: the first of equal values, a NaN
 *       over any number (the last NaN), -inf and -1 for a window wholly in
 *       the padding;
 *   em_cuda_max_pool_grad_<T>(planes, g, gx, gy, idx)  gx[plane][idx[o]] +=
 *       gy[o]: one thread per plane, in o's order, as the CPU adds, so the
 *       same bits where windows overlap (a GPU's atomics would add in any
 *       order).
 *
 * float32 and float64, the dtypes the window ops take. x (and im2col's and
 * max_pool's input) is read through strides (channels-last inputs too);
 * every result is contiguous.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <string.h>

#include "ember/codegen_cuda.h"
#include "ember/strbuf.h"
#include "source_text.h"
#include "../runtime/infer/window.h"

_Static_assert(EM_MAX_SPATIAL == 3, "the window kernels are written for three spatial dims");

static const char body[] =
    "struct em_cuda_window_geometry {\n"
    "    long long in[3], out[3], k[3], s[3], p[3], d[3];\n"
    "    long long in_numel, out_numel, k_numel, channels;\n"
    "    long long x_n, x_c, x_s[3];\n"
    "    long long p_hi[3];         /* pools: the padding after (ceil_mode's reach) */\n"
    "    long long adaptive, include_pad, divisor;\n"
    "};\n"
    "/* Window of small-side position o along dim a (pools): taps [*lo, *hi) of\n"
    " * the big side, *step apart; *span what it covers with the padding. The\n"
    " * CPU's window_of (runtime/cpu/pool.c). */\n"
    "static __device__ __forceinline__ void em_window(const em_cuda_window_geometry &g, int a, "
    "long long o,\n"
    "                                                 long long *lo, long long *hi, long long "
    "*step, long long *span) {\n"
    "    if (g.adaptive) {\n"
    "        *lo = o * g.in[a] / g.out[a];\n"
    "        *hi = ((o + 1) * g.in[a] + g.out[a] - 1) / g.out[a];\n"
    "        *step = 1;\n"
    "        *span = *hi - *lo;\n"
    "        return;\n"
    "    }\n"
    "    long long start = o * g.s[a] - g.p[a], d = g.d[a], end = start + (g.k[a] - 1) * d + 1;\n"
    "    long long cap = g.in[a] + g.p_hi[a];\n"
    "    *span = (end < cap ? end : cap) - start;\n"
    "    *lo = start < 0 ? start + (-start + d - 1) / d * d : start;\n"
    "    *hi = end < g.in[a] ? end : g.in[a];\n"
    "    if (*hi < *lo) *hi = *lo;\n"
    "    *step = d;\n"
    "}\n"
    "template <class T>\n"
    "static __device__ __forceinline__ void im2col(long long n, const em_cuda_window_geometry &g, "
    "T *col,\n"
    "                                              const T *x) {\n"
    "    long long step = (long long)gridDim.x * blockDim.x, L = g.out_numel, K = g.k_numel;\n"
    "    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += step) {\n"
    "        long long l = i % L, r = i / L, tap = r % K, nc = r / K, c = nc % g.channels, s = nc "
    "/ g.channels;\n"
    "        long long o2 = l % g.out[2], o1 = l / g.out[2] % g.out[1], o0 = l / (g.out[2] * "
    "g.out[1]);\n"
    "        long long k2 = tap % g.k[2], k1 = tap / g.k[2] % g.k[1], k0 = tap / (g.k[2] * "
    "g.k[1]);\n"
    "        long long j0 = o0 * g.s[0] - g.p[0] + k0 * g.d[0], j1 = o1 * g.s[1] - g.p[1] + k1 * "
    "g.d[1];\n"
    "        long long j2 = o2 * g.s[2] - g.p[2] + k2 * g.d[2];\n"
    "        bool inside = j0 >= 0 && j0 < g.in[0] && j1 >= 0 && j1 < g.in[1] && j2 >= 0 && j2 < "
    "g.in[2];\n"
    "        col[i] = inside ? x[s * g.x_n + c * g.x_c + j0 * g.x_s[0] + j1 * g.x_s[1] + j2 * "
    "g.x_s[2]] : (T)0;\n"
    "    }\n"
    "}\n"
    "/* the small-side position o along dim a whose window reads j at tap t, or -1 */\n"
    "static __device__ __forceinline__ long long em_window_at(const em_cuda_window_geometry &g, "
    "int a, long long j,\n"
    "                                                       long long t) {\n"
    "    long long u = j + g.p[a] - t * g.d[a];\n"
    "    if (u < 0 || u % g.s[a] != 0 || u / g.s[a] >= g.out[a]) return -1;\n"
    "    return u / g.s[a];\n"
    "}\n"
    "template <class T>\n"
    "static __device__ __forceinline__ void col2im(long long n, const em_cuda_window_geometry &g, "
    "T *x,\n"
    "                                              const T *col) {\n"
    "    long long step = (long long)gridDim.x * blockDim.x, L = g.out_numel, K = g.k_numel;\n"
    "    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += step) {\n"
    "        long long j2 = i % g.in[2], j1 = i / g.in[2] % g.in[1], j0 = i / (g.in[2] * g.in[1]) "
    "% g.in[0];\n"
    "        long long nc = i / g.in_numel;\n"
    "        T sum = (T)0;\n"
    "        for (long long k0 = 0; k0 < g.k[0]; k0++) {\n"
    "            long long o0 = em_window_at(g, 0, j0, k0);\n"
    "            if (o0 < 0) continue;\n"
    "            for (long long k1 = 0; k1 < g.k[1]; k1++) {\n"
    "                long long o1 = em_window_at(g, 1, j1, k1);\n"
    "                if (o1 < 0) continue;\n"
    "                for (long long k2 = 0; k2 < g.k[2]; k2++) {\n"
    "                    long long o2 = em_window_at(g, 2, j2, k2);\n"
    "                    if (o2 < 0) continue;\n"
    "                    long long tap = (k0 * g.k[1] + k1) * g.k[2] + k2, l = (o0 * g.out[1] + "
    "o1) * g.out[2] + o2;\n"
    "                    sum += col[(nc * K + tap) * L + l];\n"
    "                }\n"
    "            }\n"
    "        }\n"
    "        x[i] = sum;\n"
    "    }\n"
    "}\n"
    "template <class T>\n"
    "static __device__ __forceinline__ void max_pool(long long n, const em_cuda_window_geometry "
    "&g, T *y,\n"
    "                                                long long *idx, const T *x) {\n"
    "    long long step = (long long)gridDim.x * blockDim.x, L = g.out_numel;\n"
    "    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += step) {\n"
    "        long long l = i % L, nc = i / L, c = nc % g.channels, s = nc / g.channels;\n"
    "        long long o[3] = {l / (g.out[2] * g.out[1]), l / g.out[2] % g.out[1], l % g.out[2]};\n"
    "        long long lo[3], hi[3], st[3], span;\n"
    "        for (int a = 0; a < 3; a++) em_window(g, a, o[a], &lo[a], &hi[a], &st[a], &span);\n"
    "        const T *plane = x + s * g.x_n + c * g.x_c;\n"
    "        T best = -(T)INFINITY;\n"
    "        long long at = -1;\n"
    "        if (lo[0] < hi[0] && lo[1] < hi[1] && lo[2] < hi[2]) {\n"
    "            at = (lo[0] * g.in[1] + lo[1]) * g.in[2] + lo[2];\n"
    "            best = plane[lo[0] * g.x_s[0] + lo[1] * g.x_s[1] + lo[2] * g.x_s[2]];\n"
    "        }\n"
    "        for (long long i0 = lo[0]; i0 < hi[0]; i0 += st[0])\n"
    "            for (long long i1 = lo[1]; i1 < hi[1]; i1 += st[1])\n"
    "                for (long long i2 = lo[2]; i2 < hi[2]; i2 += st[2]) {\n"
    "                    T v = plane[i0 * g.x_s[0] + i1 * g.x_s[1] + i2 * g.x_s[2]];\n"
    "                    if (v > best || v != v) {\n"
    "                        best = v;\n"
    "                        at = (i0 * g.in[1] + i1) * g.in[2] + i2;\n"
    "                    }\n"
    "                }\n"
    "        y[i] = best;\n"
    "        idx[i] = at;\n"
    "    }\n"
    "}\n"
    "/* an index outside its plane goes into *bad (the caller set it to -1) */\n"
    "template <class T>\n"
    "static __device__ __forceinline__ void max_pool_grad(long long planes, const "
    "em_cuda_window_geometry &g, T *gx,\n"
    "                                                     const T *gy, const long long *idx, long "
    "long *bad) {\n"
    "    long long step = (long long)gridDim.x * blockDim.x;\n"
    "    for (long long pl = (long long)blockIdx.x * blockDim.x + threadIdx.x; pl < planes; pl += "
    "step) {\n"
    "        T *x = gx + pl * g.in_numel;\n"
    "        for (long long j = 0; j < g.in_numel; j++) x[j] = (T)0;\n"
    "        for (long long o = 0; o < g.out_numel; o++) {\n"
    "            long long at = idx[pl * g.out_numel + o];\n"
    "            if (at < 0) continue; /* (an empty window's mark) */\n"
    "            if (at >= g.in_numel) {\n"
    "                *bad = at;\n"
    "                continue;\n"
    "            }\n"
    "            x[at] += gy[pl * g.out_numel + o];\n"
    "        }\n"
    "    }\n"
    "}\n"
    "/* the divisor of window o's average, and its element count */\n"
    "static __device__ __forceinline__ long long em_avg_divisor(const em_cuda_window_geometry &g, "
    "const long long *o,\n"
    "                                                         long long *lo, long long *hi, long "
    "long *count) {\n"
    "    long long st, span[3];\n"
    "    for (int a = 0; a < 3; a++) em_window(g, a, o[a], &lo[a], &hi[a], &st, &span[a]);\n"
    "    *count = (hi[0] - lo[0]) * (hi[1] - lo[1]) * (hi[2] - lo[2]);\n"
    "    return g.divisor ? g.divisor : g.include_pad && !g.adaptive ? span[0] * span[1] * span[2] "
    ": *count;\n"
    "}\n"
    "/* each window's mean (summed in double: within the CPU's rounding, not its bits) */\n"
    "template <class T>\n"
    "static __device__ __forceinline__ void avg_pool(long long n, const em_cuda_window_geometry "
    "&g, T *y, const T *x) {\n"
    "    long long step = (long long)gridDim.x * blockDim.x, L = g.out_numel;\n"
    "    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += step) {\n"
    "        long long l = i % L, nc = i / L, c = nc % g.channels, s = nc / g.channels;\n"
    "        long long o[3] = {l / (g.out[2] * g.out[1]), l / g.out[2] % g.out[1], l % g.out[2]};\n"
    "        long long lo[3], hi[3], count, div = em_avg_divisor(g, o, lo, hi, &count);\n"
    "        if (count <= 0) {\n"
    "            y[i] = (T)0;\n"
    "            continue;\n"
    "        }\n"
    "        const T *plane = x + s * g.x_n + c * g.x_c;\n"
    "        double sum = 0;\n"
    "        for (long long i0 = lo[0]; i0 < hi[0]; i0++)\n"
    "            for (long long i1 = lo[1]; i1 < hi[1]; i1++)\n"
    "                for (long long i2 = lo[2]; i2 < hi[2]; i2++)\n"
    "                    sum += (double)plane[i0 * g.x_s[0] + i1 * g.x_s[1] + i2 * g.x_s[2]];\n"
    "        y[i] = (T)sum / (T)div;\n"
    "    }\n"
    "}\n"
    "/* the small-side positions [*first, *last] along dim a whose windows\n"
    " * may hold big-side position j (a superset: callers check) */\n"
    "static __device__ __forceinline__ void em_windows_over(const em_cuda_window_geometry &g, int "
    "a, long long j,\n"
    "                                                       long long *first, long long *last) {\n"
    "    long long f, l;\n"
    "    if (g.adaptive) {\n"
    "        f = j * g.out[a] / g.in[a] - 1;\n"
    "        l = ((j + 1) * g.out[a] + g.in[a] - 1) / g.in[a];\n"
    "    } else {\n"
    "        long long reach = (g.k[a] - 1) * g.d[a];\n"
    "        f = (j + g.p[a] - reach) / g.s[a] - 1;\n"
    "        l = (j + g.p[a]) / g.s[a];\n"
    "    }\n"
    "    *first = f < 0 ? 0 : f;\n"
    "    *last = l < g.out[a] - 1 ? l : g.out[a] - 1;\n"
    "}\n"
    "/* gx[j] = the sum, over the windows holding j in the CPU's order (the\n"
    " * small side's, ascending), of gy[o] / divisor: the CPU's bits */\n"
    "template <class T>\n"
    "static __device__ __forceinline__ void avg_pool_grad(long long n, const "
    "em_cuda_window_geometry &g, T *gx,\n"
    "                                                     const T *gy) {\n"
    "    long long step = (long long)gridDim.x * blockDim.x;\n"
    "    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += step) {\n"
    "        long long j[3] = {i / (g.in[2] * g.in[1]) % g.in[0], i / g.in[2] % g.in[1], i % "
    "g.in[2]};\n"
    "        long long nc = i / g.in_numel, f[3], e[3];\n"
    "        for (int a = 0; a < 3; a++) em_windows_over(g, a, j[a], &f[a], &e[a]);\n"
    "        const T *plane = gy + nc * g.out_numel;\n"
    "        T sum = (T)0;\n"
    "        long long o[3];\n"
    "        for (o[0] = f[0]; o[0] <= e[0]; o[0]++)\n"
    "            for (o[1] = f[1]; o[1] <= e[1]; o[1]++)\n"
    "                for (o[2] = f[2]; o[2] <= e[2]; o[2]++) {\n"
    "                    long long lo[3], hi[3], count, div = em_avg_divisor(g, o, lo, hi, "
    "&count);\n"
    "                    if (count <= 0 || j[0] < lo[0] || j[0] >= hi[0] || j[1] < lo[1] || j[1] "
    ">= hi[1] ||\n"
    "                        j[2] < lo[2] || j[2] >= hi[2])\n"
    "                        continue;\n"
    "                    sum += plane[(o[0] * g.out[1] + o[1]) * g.out[2] + o[2]] / (T)div;\n"
    "                }\n"
    "        gx[i] = sum;\n"
    "    }\n"
    "}\n";

static void wrappers(em_strbuf *s, const char *T, const char *sfx) {
    em_strbuf_printf(s,
                     "extern \"C\" __global__ void em_cuda_im2col_%s(long long n, "
                     "em_cuda_window_geometry g, %s *col, "
                     "const %s *__restrict__ x) { im2col(n, g, col, x); }\n",
                     sfx, T, T);
    em_strbuf_printf(s,
                     "extern \"C\" __global__ void em_cuda_col2im_%s(long long n, "
                     "em_cuda_window_geometry g, %s *x, "
                     "const %s *__restrict__ col) { col2im(n, g, x, col); }\n",
                     sfx, T, T);
    em_strbuf_printf(s,
                     "extern \"C\" __global__ void em_cuda_max_pool_%s(long long n, "
                     "em_cuda_window_geometry g, %s *y, "
                     "long long *idx, const %s *__restrict__ x) { max_pool(n, g, y, idx, x); }\n",
                     sfx, T, T);
    em_strbuf_printf(s,
                     "extern \"C\" __global__ void em_cuda_avg_pool_%s(long long n, "
                     "em_cuda_window_geometry g, %s *y, "
                     "const %s *__restrict__ x) { avg_pool(n, g, y, x); }\n",
                     sfx, T, T);
    em_strbuf_printf(s,
                     "extern \"C\" __global__ void em_cuda_avg_pool_grad_%s(long long n, "
                     "em_cuda_window_geometry g, "
                     "%s *gx, const %s *__restrict__ gy) { avg_pool_grad(n, g, gx, gy); }\n",
                     sfx, T, T);
    em_strbuf_printf(
        s,
        "extern \"C\" __global__ void em_cuda_max_pool_grad_%s(long long planes, "
        "em_cuda_window_geometry g, "
        "%s *gx, const %s *__restrict__ gy, const long long *__restrict__ idx, long long *bad) "
        "{ max_pool_grad(planes, g, gx, gy, idx, bad); }\n",
        sfx, T, T);
}

char *em_cuda_window_source(void) {
    em_strbuf s;
    em_strbuf_init(&s);
    em_strbuf_puts(&s, "/* ember: sliding windows (codegen_cuda/window_source.c) */\n"
                       "#include \"ember/ops_math.h\"\n");
    em_strbuf_puts(&s, body);
    wrappers(&s, "float", "f32");
    wrappers(&s, "double", "f64");
    return em_cuda_source_take(&s);
}

em_status em_cuda_window_ptx(int sm, char **ptx) {
    return em_cuda_source_ptx(em_cuda_window_source(), "ember_window.cu", sm, ptx);
}

void em_cuda_window_name(const char *kernel, em_dtype dt, char *out, size_t n) {
    snprintf(out, n, "em_cuda_%s_%s", kernel, dt == EM_DTYPE_F64 ? "f64" : "f32");
}

void em_cuda_window_geometry_of(const struct em_window_geom *w, int64_t channels,
                                const int64_t *x_strides, em_cuda_window_geometry *g) {
    memset(g, 0, sizeof *g);
    for (int a = 0; a < 3; a++) {
        g->in[a] = w->in[a];
        g->out[a] = w->out[a];
        g->k[a] = w->k[a];
        g->s[a] = w->s[a];
        g->p[a] = w->p[a];
        g->d[a] = w->d[a];
    }
    g->in_numel = w->in_numel;
    g->out_numel = w->out_numel;
    g->k_numel = w->k_numel;
    g->channels = channels;
    if (!x_strides) return;
    g->x_n = x_strides[0];
    g->x_c = x_strides[1];
    for (int i = 0; i < w->n; i++)
        g->x_s[3 - w->n + i] = x_strides[2 + i]; /* (leading dims: size 1) */
}
