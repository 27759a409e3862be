/*
 * digits_train.c - trains the digits CNN from C: each run of the model
 * that tools/aot_digits.py compiled ahead of time is one whole training
 * step (forward with dropout and BatchNorm, backward, Adam), with the
 * parameters, Adam's moments and BatchNorm's statistics held in the
 * instance and updated in place.
 *
 *     digits_train OUT/digits_step.so OUT/digits_train.bin [OUT/digits_losses.txt [STATE.safetensors]]
 *
 * Given Python's losses on the same batches, prints the largest relative
 * difference and fails above 1e-5; given a path, saves the trained state
 * there as safetensors (ember.load reads it).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "ember/aot_dlopen.h"

static int fail(const char *what, const char *why) {
    fprintf(stderr, "%s: %s\n", what, why);
    return 1;
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: %s STEP.so TRAIN.bin [LOSSES.txt [STATE.safetensors]]\n", argv[0]);
        return 2;
    }
    ember_aot_api api;
    if (!ember_aot_open(argv[1], &api)) return fail(argv[1], dlerror());
    ember_model *step;
    if (api.create(NULL, &step) != EMBER_OK) return fail(argv[1], api.last_error());
    FILE *f = fopen(argv[2], "rb");
    int64_t head[3]; /* steps, batch, seed */
    ember_tensor_info xi, yi;
    api.input(step, 0, &xi);
    api.input(step, 1, &yi);
    if (!f || fread(head, sizeof *head, 3, f) != 3 || head[1] != xi.shape[0] || xi.ndim != 4)
        return fail(argv[2], "not batches of the model's size");
    int64_t steps = head[0], batch = head[1], pixels = xi.shape[1] * xi.shape[2] * xi.shape[3];
    float *images = malloc((size_t)(steps * batch * pixels) * sizeof *images);
    int64_t *labels = malloc((size_t)(steps * batch) * sizeof *labels);
    if (!images || !labels ||
        fread(images, sizeof *images, (size_t)(steps * batch * pixels), f) != (size_t)(steps * batch * pixels) ||
        fread(labels, sizeof *labels, (size_t)(steps * batch), f) != (size_t)(steps * batch))
        return fail(argv[2], "truncated");
    fclose(f);
    FILE *ref = argc > 3 ? fopen(argv[3], "r") : NULL;
    api.set_rng(step, (uint64_t)head[2], 0); /* (Python: ember.manual_seed(seed)) */
    double worst = 0;
    for (int64_t s = 0; s < steps; s++) {
        float loss;
        int64_t scalar = 0;
        DLTensor in[2] = {{images + s * batch * pixels, {kDLCPU, 0}, 4, xi.dtype, (int64_t *)xi.shape, NULL, 0},
                          {labels + s * batch, {kDLCPU, 0}, 1, yi.dtype, (int64_t *)yi.shape, NULL, 0}};
        DLTensor out = {&loss, {kDLCPU, 0}, 0, {kDLFloat, 32, 1}, &scalar, NULL, 0};
        if (api.run(step, in, 2, &out, 1) != EMBER_OK) return fail(argv[1], api.last_error());
        double want;
        if (ref && fscanf(ref, "%lf", &want) == 1) {
            double rel = fabs(loss - want) / fabs(want);
            worst = rel > worst ? rel : worst;
        }
        if (s == 0 || (s + 1) % 10 == 0) printf("  C step %3lld: loss %.5f\n", (long long)(s + 1), loss);
    }
    if (argc > 4 && api.save_state(step, argv[4]) != EMBER_OK) return fail(argv[4], api.last_error());
    api.destroy(step);
    free(images);
    free(labels);
    if (ref) {
        fclose(ref);
        printf("C: %lld training steps; largest relative difference from Python's losses: %.2e\n", (long long)steps,
               worst);
        if (worst > 1e-5) return fail(argv[1], "the losses differ from Python's by more than 1e-5");
    }
    return 0;
}
