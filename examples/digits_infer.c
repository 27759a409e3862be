/*
 * digits_infer.c - classifies the digits test set with the CNN that
 * tools/aot_digits.py trained in Python and compiled ahead of time: no
 * Python, no ember library, only the model's shared object.
 *
 *     digits_infer OUT/digits_cnn.so OUT/digits_test.bin
 *
 * The model takes the whole test set as one batch (its input shape is the
 * one it was compiled for; the model says which).
 */
#include <stdio.h>
#include <stdlib.h>

#include "ember/aot_dlopen.h"

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: %s MODEL.so TEST.bin\n", argv[0]);
        return 2;
    }
    ember_aot_api api;
    if (!ember_aot_open(argv[1], &api)) {
        fprintf(stderr, "%s: %s\n", argv[1], dlerror());
        return 1;
    }
    ember_model *model;
    if (api.create(NULL, &model) != EMBER_OK) {
        fprintf(stderr, "%s\n", api.last_error());
        return 1;
    }
    ember_tensor_info in, out;
    api.input(model, 0, &in);
    api.output(model, 0, &out);
    FILE *f = fopen(argv[2], "rb");
    int64_t n = 0;
    if (!f || fread(&n, sizeof n, 1, f) != 1 || in.ndim != 4 || n != in.shape[0] || out.ndim != 2) {
        fprintf(stderr, "%s: not a test set of the model's %lld images\n", argv[2], (long long)in.shape[0]);
        return 1;
    }
    int64_t pixels = in.shape[1] * in.shape[2] * in.shape[3], classes = out.shape[1];
    float *images = malloc((size_t)(n * pixels) * sizeof *images);
    int64_t *labels = malloc((size_t)n * sizeof *labels);
    float *logits = malloc((size_t)(n * classes) * sizeof *logits);
    if (!images || !labels || !logits || fread(images, sizeof *images, (size_t)(n * pixels), f) != (size_t)(n * pixels) ||
        fread(labels, sizeof *labels, (size_t)n, f) != (size_t)n) {
        fprintf(stderr, "%s: truncated\n", argv[2]);
        return 1;
    }
    fclose(f);
    DLTensor x = {images, {kDLCPU, 0}, 4, in.dtype, (int64_t *)in.shape, NULL, 0};
    DLTensor y = {logits, {kDLCPU, 0}, 2, out.dtype, (int64_t *)out.shape, NULL, 0};
    if (api.run(model, &x, 1, &y, 1) != EMBER_OK) {
        fprintf(stderr, "%s\n", api.last_error());
        return 1;
    }
    int64_t correct = 0;
    for (int64_t i = 0; i < n; i++) {
        int64_t best = 0;
        for (int64_t c = 1; c < classes; c++)
            if (logits[i * classes + c] > logits[i * classes + best]) best = c;
        correct += best == labels[i];
    }
    printf("C: test accuracy %.2f%% (%lld/%lld), model %s from %s\n", 100.0 * (double)correct / (double)n,
           (long long)correct, (long long)n, api.model_name(), argv[1]);
    api.destroy(model);
    free(images);
    free(labels);
    free(logits);
    return 0;
}
