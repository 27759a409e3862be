/*
 * ops_random.h - the random generator's arithmetic, written once for every
 * device, as ops_math.h is for the elementwise ops: Philox4x32-10 and the
 * transforms from its words to rand and randn values. The CPU's kernels
 * (runtime/random.c) include it, and the CUDA code generator hands the same
 * text to NVRTC (codegen_cuda/random_source.c). So a seed gives the same
 * float32 numbers on both: the same words, the same operations in the same
 * order, ops_math.h's log, sin and cos, no contraction. (float64 normals use
 * each device's libm-grade log, sin and cos: within their ulp bounds.)
 * Include ops_math.h first.
 */
#ifndef EMBER_OPS_RANDOM_H
#define EMBER_OPS_RANDOM_H

/* Philox4x32-10 (Salmon et al., SC'11): block `counter` of stream `key`. */
EM_SC void em_sc_philox(em_sc_u64 key, em_sc_u64 counter, em_sc_u32 out[4]) {
    em_sc_u32 c0 = (em_sc_u32)counter, c1 = (em_sc_u32)(counter >> 32), c2 = 0, c3 = 0;
    em_sc_u32 k0 = (em_sc_u32)key, k1 = (em_sc_u32)(key >> 32);
    for (int r = 0; r < 10; r++) {
        em_sc_u64 p0 = (em_sc_u64)0xD2511F53u * c0, p1 = (em_sc_u64)0xCD9E8D57u * c2;
        em_sc_u32 n0 = (em_sc_u32)(p1 >> 32) ^ c1 ^ k0, n2 = (em_sc_u32)(p0 >> 32) ^ c3 ^ k1;
        c1 = (em_sc_u32)p1;
        c3 = (em_sc_u32)p0;
        c0 = n0;
        c2 = n2;
        k0 += 0x9E3779B9u;
        k1 += 0xBB67AE85u;
    }
    out[0] = c0;
    out[1] = c1;
    out[2] = c2;
    out[3] = c3;
}

/* Uniform in [0, 1) from 24 bits (float32) or 53 bits (float64). */
EM_SC float em_sc_u24(em_sc_u32 x) { return (float)(x >> 8) * 0x1p-24f; }
EM_SC double em_sc_u53(em_sc_u32 hi, em_sc_u32 lo) {
    return (double)((((em_sc_u64)hi << 32) | lo) >> 11) * 0x1p-53;
}

/* A float32 normal pair (Box-Muller) from a block's first two words:
 * *a = r cos t, *b = r sin t. */
EM_SC void em_sc_normal_pair_f32(em_sc_u32 w0, em_sc_u32 w1, float *a, float *b) {
    float u1 = 1.0f - em_sc_u24(w0); /* (0, 1] */
    float u2 = em_sc_u24(w1);
    float r = sqrtf(-2.0f * sc_log_f32(u1));
    float t = 6.28318530717958648f * u2;
    *a = r * sc_cos_f32(t);
    *b = r * sc_sin_f32(t);
}

/* A float64 normal (Box-Muller) from a block's four words: lane 0 is
 * r cos t, lane 1 r sin t. */
EM_SC double em_sc_normal_f64(const em_sc_u32 w[4], int lane) {
    double u1 = 1.0 - em_sc_u53(w[0], w[1]), u2 = em_sc_u53(w[2], w[3]);
    double r = sqrt(-2.0 * log(u1)), t = 6.28318530717958647692 * u2;
    return lane ? r * sin(t) : r * cos(t);
}

#endif
