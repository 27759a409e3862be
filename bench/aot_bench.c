/*
 * aot_bench.c - times a model compiled ahead of time from C (bench_aot.py
 * builds and drives it): instance creation, and runs on inputs read from a
 * file (each input's bytes, in order). Prints one JSON line.
 *
 *     aot_bench MODEL.so IN.bin CALLS
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "ember/aot_dlopen.h"

static double now_us(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e6 + (double)t.tv_nsec * 1e-3;
}

static size_t nbytes(const ember_tensor_info *info) {
    size_t n = info->dtype.bits / 8;
    for (int d = 0; d < info->ndim; d++) n *= (size_t)info->shape[d];
    return n;
}

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
    if (argc != 4) return 2;
    double t0 = now_us();
    ember_aot_api api;
    if (!ember_aot_open(argv[1], &api)) return fprintf(stderr, "%s\n", dlerror()), 1;
    double t_open = now_us() - t0;
    ember_model *m;
    t0 = now_us();
    if (api.create(NULL, &m) != EMBER_OK) return fprintf(stderr, "%s\n", api.last_error()), 1;
    double t_create = now_us() - t0;
    ember_model *m2; /* a second instance: the model is read once per process */
    t0 = now_us();
    if (api.create(NULL, &m2) != EMBER_OK) return 1;
    double t_create2 = now_us() - t0;
    api.destroy(m2);
    int n_in = api.num_inputs(m), n_out = api.num_outputs(m);
    DLTensor in[16], out[16];
    FILE *f = fopen(argv[2], "rb");
    for (int i = 0; i < n_in; i++) {
        ember_tensor_info info;
        api.input(m, i, &info);
        void *p = aligned_alloc(64, (nbytes(&info) + 63) / 64 * 64 + 64);
        if (!f || fread(p, 1, nbytes(&info), f) != nbytes(&info)) return 1;
        in[i] = (DLTensor){p, {kDLCPU, 0}, info.ndim, info.dtype, (int64_t *)info.shape, NULL, 0};
    }
    fclose(f);
    for (int i = 0; i < n_out; i++) {
        ember_tensor_info info;
        api.output(m, i, &info);
        void *p = aligned_alloc(64, (nbytes(&info) + 63) / 64 * 64 + 64);
        out[i] = (DLTensor){p, {kDLCPU, 0}, info.ndim, info.dtype, (int64_t *)info.shape, NULL, 0};
    }
    long calls = atol(argv[3]);
    for (long k = 0; k < calls / 10 + 3; k++)
        if (api.run(m, in, n_in, out, n_out) != EMBER_OK) return fprintf(stderr, "%s\n", api.last_error()), 1;
    double rounds[7];
    for (int r = 0; r < 7; r++) {
        t0 = now_us();
        for (long k = 0; k < calls; k++) api.run(m, in, n_in, out, n_out);
        rounds[r] = (now_us() - t0) / (double)calls;
    }
    qsort(rounds, 7, sizeof *rounds, cmp);
    printf("{\"open_us\": %.1f, \"create_us\": %.1f, \"create2_us\": %.1f, \"run_us\": %.4f, \"best_us\": %.4f}\n",
           t_open, t_create, t_create2, rounds[3], rounds[0]);
    api.destroy(m);
    return 0;
}
