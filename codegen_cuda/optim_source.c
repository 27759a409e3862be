/*
 * optim_source.c - the optimizers' fused updates as CUDA C: SGD (with and
 * without momentum), Adam and AdamW (with and without amsgrad), RMSprop
 * (plain, centered, with momentum), float32 and float64; one kernel call
 * updates one parameter and its state in place, each element read and
 * written once.
 *
 * The arithmetic is runtime/cpu/optim.c's, operation for operation in the
 * parameter's dtype (itself torch.optim's single-tensor code), and NVRTC
 * compiles without contraction (--fmad=false) and with IEEE division and
 * square roots, so a step on the GPU gives the CPU's bits:
 * test_cuda_host_run checks them against the CPU's steps.
 *
 *   em_cuda_sgd_<T>(n, a, p, g, buf)         buf: NULL without momentum
 *   em_cuda_adam_<T>(n, a, p, g, m, v, vmax) vmax: NULL without amsgrad
 *   em_cuda_rmsprop_<T>(n, a, p, g, sq, ga, buf)  ga: NULL unless centered,
 *                                                 buf: NULL without momentum
 *
 * `a` (em_cuda_optim_args, by value) holds the options as doubles, cast to
 * T in the kernel as the CPU casts them, and the per-step constants the
 * host computes in double (Adam's step size and bias correction).
 */
#include <stdio.h>

#include "ember/codegen_cuda.h"
#include "ember/strbuf.h"
#include "source_text.h"

static const char body[] =
    "struct em_cuda_optim_args {\n"
    "    double lr, momentum, dampening, weight_decay, beta1, beta2, eps, alpha;\n"
    "    double step_size, bias2_sqrt;\n"
    "    int maximize, nesterov, first, decoupled, centered;\n"
    "};\n"
    "static __device__ __forceinline__ float em_sqrt_of(float x) { return sqrtf(x); }\n"
    "static __device__ __forceinline__ double em_sqrt_of(double x) { return sqrt(x); }\n"
    "#define EM_EACH(i, n) \\\n"
    "    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < (n); \\\n"
    "         i += (long long)gridDim.x * blockDim.x)\n"
    "template <class T>\n"
    "static __device__ __forceinline__ void sgd(long long n, const em_cuda_optim_args &a, T *p, "
    "const T *g, T *buf) {\n"
    "    const T lr = (T)a.lr, wd = (T)a.weight_decay, mom = (T)a.momentum;\n"
    "    const T damp = (T)(1 - a.dampening), sign = a.maximize ? (T)-1 : (T)1;\n"
    "    const bool decay = a.weight_decay != 0;\n"
    "    EM_EACH(i, n) {\n"
    "        T d = sign * g[i];\n"
    "        if (decay) d = d + wd * p[i];\n"
    "        if (!buf) {\n"
    "            p[i] = p[i] - lr * d;\n"
    "            continue;\n"
    "        }\n"
    "        T m = a.first ? d : buf[i] * mom + damp * d;\n"
    "        buf[i] = m;\n"
    "        p[i] = p[i] - lr * (a.nesterov ? d + mom * m : m);\n"
    "    }\n"
    "}\n"
    "template <class T>\n"
    "static __device__ __forceinline__ void adam(long long n, const em_cuda_optim_args &a, T *p, "
    "const T *g, T *m,\n"
    "                                            T *v, T *vmax) {\n"
    "    const T b1 = (T)a.beta1, b2 = (T)a.beta2, eps = (T)a.eps, wd = (T)a.weight_decay;\n"
    "    const T omb1 = (T)(1 - a.beta1), omb2 = (T)(1 - a.beta2);\n"
    "    const T decay = (T)(1 - a.lr * a.weight_decay), step = (T)a.step_size;\n"
    "    const T c2 = (T)a.bias2_sqrt, sign = a.maximize ? (T)-1 : (T)1;\n"
    "    const bool coupled = a.weight_decay != 0 && !a.decoupled, decoupled = a.weight_decay != 0 "
    "&& a.decoupled;\n"
    "    EM_EACH(i, n) {\n"
    "        T gi = sign * g[i];\n"
    "        if (decoupled) p[i] = p[i] * decay;\n"
    "        if (coupled) gi = gi + wd * p[i];\n"
    "        T mi = m[i] * b1 + omb1 * gi;\n"
    "        T vi = v[i] * b2 + omb2 * gi * gi;\n"
    "        m[i] = mi;\n"
    "        v[i] = vi;\n"
    "        if (vmax) vi = vmax[i] = vmax[i] > vi ? vmax[i] : vi;\n"
    "        p[i] = p[i] - step * (mi / (em_sqrt_of(vi) / c2 + eps));\n"
    "    }\n"
    "}\n"
    "template <class T>\n"
    "static __device__ __forceinline__ void rmsprop(long long n, const em_cuda_optim_args &a, T "
    "*p, const T *g, T *sq,\n"
    "                                               T *ga, T *buf) {\n"
    "    const T alpha = (T)a.alpha, eps = (T)a.eps, wd = (T)a.weight_decay, oma = (T)(1 - "
    "a.alpha);\n"
    "    const T lr = (T)a.lr, mom = (T)a.momentum, sign = a.maximize ? (T)-1 : (T)1;\n"
    "    const bool decay = a.weight_decay != 0;\n"
    "    EM_EACH(i, n) {\n"
    "        T gi = sign * g[i];\n"
    "        if (decay) gi = gi + wd * p[i];\n"
    "        T s = sq[i] * alpha + oma * gi * gi;\n"
    "        sq[i] = s;\n"
    "        T avg;\n"
    "        if (ga) {\n"
    "            T c = ga[i] * alpha + oma * gi;\n"
    "            ga[i] = c;\n"
    "            avg = em_sqrt_of(s - c * c) + eps;\n"
    "        } else {\n"
    "            avg = em_sqrt_of(s) + eps;\n"
    "        }\n"
    "        if (buf) {\n"
    "            T bi = buf[i] * mom + gi / avg;\n"
    "            buf[i] = bi;\n"
    "            p[i] = p[i] - lr * bi;\n"
    "        } else {\n"
    "            p[i] = p[i] - lr * (gi / avg);\n"
    "        }\n"
    "    }\n"
    "}\n";

static void wrappers(em_strbuf *s, const char *T, const char *sfx) {
    em_strbuf_printf(
        s,
        "extern \"C\" __global__ void em_cuda_sgd_%s(long long n, em_cuda_optim_args a, %s *p, "
        "const %s *g, %s *buf) { sgd(n, a, p, g, buf); }\n",
        sfx, T, T, T);
    em_strbuf_printf(
        s,
        "extern \"C\" __global__ void em_cuda_adam_%s(long long n, em_cuda_optim_args a, %s *p, "
        "const %s *g, %s *m, %s *v, %s *vmax) { adam(n, a, p, g, m, v, vmax); }\n",
        sfx, T, T, T, T, T);
    em_strbuf_printf(
        s,
        "extern \"C\" __global__ void em_cuda_rmsprop_%s(long long n, em_cuda_optim_args a, %s *p, "
        "const %s *g, %s *sq, %s *ga, %s *buf) { rmsprop(n, a, p, g, sq, ga, buf); }\n",
        sfx, T, T, T, T, T);
}

char *em_cuda_optim_source(void) {
    em_strbuf s;
    em_strbuf_init(&s);
    em_strbuf_puts(&s, "/* ember: fused optimizer steps (codegen_cuda/optim_source.c) */\n"
                       "#include \"ember/ops_math.h\"\n");
    em_strbuf_puts(&s, body);
    wrappers(&s, "float", "f32");
    wrappers(&s, "double", "f64");
    return em_cuda_source_take(&s);
}

em_status em_cuda_optim_ptx(int sm, char **ptx) {
    return em_cuda_source_ptx(em_cuda_optim_source(), "ember_optim.cu", sm, ptx);
}
