/*
 * aot_run.c - a C program over the installed header alone (ember/aot.h):
 * loads a model's shared object with dlopen and drives it the way a C
 * user would; the Python tests (test_aot.py) give it models and inputs and
 * compare what it writes with eager ember.
 *
 *   aot_run run MODEL.so IN.bin OUT.bin [RUNS]
 *       reads the inputs (each input's bytes, contiguous, in order), runs
 *       RUNS times (default 1), writes each run's outputs
 *   aot_run bad MODEL.so IN.bin
 *       the bad-input table: each bad call must fail with its code and
 *       leave the model usable; prints one line per case
 *   aot_run threads MODEL.so IN.bin N
 *       N instances on N threads, 20 runs each, all equal to one instance's
 *   aot_run shared MODEL.so IN.bin N [steps]
 *       one instance on N threads, 20 runs each (its calls take turns): a
 *       model's every result, a training step's final state, as in a row
 *   aot_run state MODEL.so IN.bin STATE.safetensors
 *       runs once, saves the state, loads it into a new instance
 *   aot_run loop MODEL.so IN.bin N
 *       N creates, runs and destroys (for leak checkers)
 */
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ember/aot_dlopen.h"

static ember_aot_api api;

static void die(const char *what) {
    fprintf(stderr, "aot_run: %s: %s\n", what, api.last_error ? api.last_error() : dlerror());
    exit(1);
}

static void load_api(const char *path) {
    if (!ember_aot_open(path, &api)) die(path);
}

/* One model's tensors: DLTensors over buffers of the model's shapes. */
typedef struct {
    int n;
    DLTensor t[64];
    size_t bytes[64];
} tensors;

static size_t nbytes(const ember_tensor_info *info) {
    size_t n = info->dtype.bits / 8;
    for (int d = 0; d < info->ndim; d++) n *= (size_t)info->shape[d];
    return n;
}

static void make(ember_model *m, bool inputs, tensors *ts) {
    ts->n = inputs ? api.num_inputs(m) : api.num_outputs(m);
    if (ts->n > 64) die("too many tensors");
    for (int i = 0; i < ts->n; i++) {
        ember_tensor_info info;
        if ((inputs ? api.input : api.output)(m, i, &info) != EMBER_OK) die("info");
        ts->bytes[i] = nbytes(&info);
        ts->t[i] = (DLTensor){calloc(1, ts->bytes[i] + 64), {kDLCPU, 0}, info.ndim, info.dtype,
                              (int64_t *)info.shape, NULL, 0};
    }
}

static void read_inputs(const char *path, tensors *in) {
    FILE *f = fopen(path, "rb");
    if (!f) die(path);
    for (int i = 0; i < in->n; i++)
        if (fread(in->t[i].data, 1, in->bytes[i], f) != in->bytes[i]) die("short input file");
    fclose(f);
}

/* A new instance (from weights, or NULL: its own), its inputs read from
 * in_path, and buffers for its outputs. */
static ember_model *instance(const char *weights, const char *in_path, tensors *in, tensors *out) {
    ember_model *m;
    if (api.create(weights, &m) != EMBER_OK) die("create");
    make(m, true, in);
    make(m, false, out);
    read_inputs(in_path, in);
    return m;
}

static void free_tensors(tensors *ts) {
    for (int i = 0; i < ts->n; i++) free(ts->t[i].data);
}

static int cmd_run(const char *in_path, const char *out_path, int runs) {
    tensors in, out;
    ember_model *m = instance(NULL, in_path, &in, &out);
    FILE *f = fopen(out_path, "wb");
    if (!f) die(out_path);
    for (int r = 0; r < runs; r++) {
        if (api.run(m, in.t, in.n, out.t, out.n) != EMBER_OK) die("run");
        for (int i = 0; i < out.n; i++) fwrite(out.t[i].data, 1, out.bytes[i], f);
    }
    fclose(f);
    api.destroy(m);
    return 0;
}

/* ---- the bad-input table ---- */

static int bad_case(ember_model *m, const char *name, ember_status want, tensors *in, tensors *out, int n_in,
                    int n_out) {
    ember_status got = api.run(m, in ? in->t : NULL, n_in, out ? out->t : NULL, n_out);
    printf("%s: %d %s\n", name, (int)got, api.last_error());
    return got == want ? 0 : 1;
}

static int cmd_bad(const char *in_path) {
    tensors in, out, good;
    ember_model *m = instance(NULL, in_path, &in, &out);
    good = in;
    int fails = 0;
    fails += bad_case(m, "no inputs", EMBER_ERR_ARGUMENT, NULL, &out, in.n, out.n);
    fails += bad_case(m, "one input too many", EMBER_ERR_ARGUMENT, &in, &out, in.n + 1, out.n);
    fails += bad_case(m, "one output too few", EMBER_ERR_ARGUMENT, &in, &out, in.n, out.n - 1);
    in.t[0].dtype.code = kDLComplex;
    fails += bad_case(m, "dtype", EMBER_ERR_DTYPE, &in, &out, in.n, out.n);
    in = good;
    in.t[0].ndim = in.t[0].ndim + 1;
    fails += bad_case(m, "ndim", EMBER_ERR_SHAPE, &in, &out, in.n, out.n);
    in = good;
    int64_t shape[8];
    memcpy(shape, in.t[0].shape, (size_t)in.t[0].ndim * sizeof *shape);
    shape[0] += 1;
    in.t[0].shape = shape;
    fails += bad_case(m, "shape", EMBER_ERR_SHAPE, &in, &out, in.n, out.n);
    in = good;
    in.t[0].device.device_type = kDLCUDA;
    fails += bad_case(m, "device", EMBER_ERR_DEVICE, &in, &out, in.n, out.n);
    in = good;
    in.t[0].data = NULL;
    fails += bad_case(m, "NULL data", EMBER_ERR_NULL_DATA, &in, &out, in.n, out.n);
    in = good;
    int64_t strides[8];
    for (int d = 0; d < in.t[0].ndim; d++) strides[d] = -1;
    in.t[0].strides = in.t[0].ndim ? strides : NULL;
    if (in.t[0].ndim) fails += bad_case(m, "negative strides", EMBER_ERR_SHAPE, &in, &out, in.n, out.n);
    in = good;
    tensors o2 = out;
    o2.t[0].dtype.code = kDLInt;
    fails += bad_case(m, "output dtype", EMBER_ERR_DTYPE, &in, &o2, in.n, out.n);
    o2 = out;
    o2.t[0].data = in.t[0].data;
    fails += bad_case(m, "output overlaps an input", EMBER_ERR_ARGUMENT, &in, &o2, in.n, out.n);
    o2 = out;
    int64_t zero[8] = {0};
    o2.t[0].strides = o2.t[0].ndim ? zero : NULL;
    if (o2.t[0].ndim && out.bytes[0] > (size_t)o2.t[0].dtype.bits / 8)
        fails += bad_case(m, "output elements overlap", EMBER_ERR_SHAPE, &in, &o2, in.n, out.n);
    fails += api.create("/tmp", &(ember_model *){NULL}) == EMBER_ERR_IO ? 0 : 1;
    printf("weights a directory: %s\n", api.last_error());
    fails += api.run(NULL, in.t, in.n, out.t, out.n) == EMBER_ERR_ARGUMENT ? 0 : 1;
    ember_tensor_info info;
    fails += api.input(m, 99, &info) == EMBER_ERR_ARGUMENT ? 0 : 1;
    fails += api.load_state(m, "/nonexistent/state.safetensors") == EMBER_ERR_IO ? 0 : 1;
    printf("missing state file: %s\n", api.last_error());
    /* and after all that, a good run still works */
    fails += bad_case(m, "good", EMBER_OK, &in, &out, in.n, out.n);
    DLManagedTensor *res[64];
    if (api.run_alloc(m, in.t, in.n, res, out.n) != EMBER_OK) die("run_alloc");
    for (int i = 0; i < out.n; i++) {
        if (memcmp(res[i]->dl_tensor.data, out.t[i].data, out.bytes[i]) != 0) fails++;
        res[i]->deleter(res[i]);
    }
    api.destroy(m);
    printf("%d unexpected\n", fails);
    return fails != 0;
}

/* ---- threads ---- */

typedef struct {
    tensors *in;
    tensors *want;
    int bad;
} worker;

static void *work(void *arg) {
    worker *w = arg;
    ember_model *m;
    if (api.create(NULL, &m) != EMBER_OK) {
        w->bad = 1;
        return NULL;
    }
    tensors out;
    make(m, false, &out);
    for (int r = 0; r < 20; r++) {
        if (api.run(m, w->in->t, w->in->n, out.t, out.n) != EMBER_OK) w->bad = 1;
        for (int i = 0; i < out.n; i++) w->bad |= memcmp(out.t[i].data, w->want->t[i].data, out.bytes[i]) != 0;
    }
    free_tensors(&out);
    api.destroy(m);
    return NULL;
}

static int cmd_threads(const char *in_path, int n) {
    tensors in, want;
    ember_model *m = instance(NULL, in_path, &in, &want);
    if (api.run(m, in.t, in.n, want.t, want.n) != EMBER_OK) die("run");
    pthread_t th[16];
    worker w[16];
    n = n > 16 ? 16 : n;
    for (int i = 0; i < n; i++) {
        w[i] = (worker){&in, &want, 0};
        pthread_create(&th[i], NULL, work, &w[i]);
    }
    int bad = 0;
    for (int i = 0; i < n; i++) {
        pthread_join(th[i], NULL);
        bad |= w[i].bad;
    }
    api.destroy(m);
    printf("%d threads: %s\n", n, bad ? "DIFFERENT" : "equal");
    return bad;
}

/* One instance on n threads, 20 runs each, taking turns on its lock: for a
 * model, every run gives the single-threaded result; for a training step
 * ("steps"), the instance ends where one that ran 20 n steps in a row does. */
typedef struct {
    ember_model *m;
    tensors *in, *want;
    bool steps;
    int bad;
} sharer;

static void *share(void *arg) {
    sharer *s = arg;
    tensors out;
    make(s->m, false, &out);
    for (int r = 0; r < 20; r++) {
        if (api.run(s->m, s->in->t, s->in->n, out.t, out.n) != EMBER_OK) s->bad = 1;
        for (int i = 0; !s->steps && i < out.n; i++)
            s->bad |= memcmp(out.t[i].data, s->want->t[i].data, out.bytes[i]) != 0;
    }
    free_tensors(&out);
    return NULL;
}

static int cmd_shared(const char *in_path, int n, bool steps) {
    tensors in, want, in2, last1, last2;
    ember_model *ref = instance(NULL, in_path, &in, &want);
    ember_model *m = instance(NULL, in_path, &in2, &last2);
    if (api.run(ref, in.t, in.n, want.t, want.n) != EMBER_OK) die("run");
    for (int k = 1; steps && k < 20 * n; k++)
        if (api.run(ref, in.t, in.n, want.t, want.n) != EMBER_OK) die("run");
    pthread_t th[16];
    sharer w[16];
    n = n > 16 ? 16 : n;
    for (int i = 0; i < n; i++) {
        w[i] = (sharer){m, &in, &want, steps, 0};
        pthread_create(&th[i], NULL, share, &w[i]);
    }
    int bad = 0;
    for (int i = 0; i < n; i++) {
        pthread_join(th[i], NULL);
        bad |= w[i].bad;
    }
    make(ref, false, &last1);
    if (api.run(ref, in.t, in.n, last1.t, last1.n) != EMBER_OK || api.run(m, in.t, in.n, last2.t, last2.n) != EMBER_OK)
        die("run");
    for (int i = 0; i < last1.n; i++) bad |= memcmp(last1.t[i].data, last2.t[i].data, last1.bytes[i]) != 0;
    tensors *all[] = {&in, &want, &in2, &last1, &last2};
    for (int i = 0; i < 5; i++) free_tensors(all[i]);
    api.destroy(ref);
    api.destroy(m);
    printf("one instance, %d threads: %s\n", n, bad ? "DIFFERENT" : "equal");
    return bad;
}

static int cmd_state(const char *in_path, const char *state) {
    tensors in, out1, in2, out2;
    ember_model *a = instance(NULL, in_path, &in, &out1);
    if (api.run(a, in.t, in.n, out1.t, out1.n) != EMBER_OK) die("run");
    if (api.save_state(a, state) != EMBER_OK) die("save_state");
    ember_model *b = instance(state, in_path, &in2, &out2);
    /* the two instances now hold the same state: their next runs agree */
    if (api.run(a, in.t, in.n, out1.t, out1.n) != EMBER_OK || api.run(b, in.t, in.n, out2.t, out2.n) != EMBER_OK)
        die("run");
    int same = 1;
    for (int i = 0; i < out1.n; i++) same &= memcmp(out1.t[i].data, out2.t[i].data, out1.bytes[i]) == 0;
    printf("state round trip: %s\n", same ? "equal" : "DIFFERENT");
    api.destroy(a);
    api.destroy(b);
    return !same;
}

static int cmd_loop(const char *in_path, int n) {
    for (int k = 0; k < n; k++) {
        tensors in, out;
        ember_model *m = instance(NULL, in_path, &in, &out);
        if (api.run(m, in.t, in.n, out.t, out.n) != EMBER_OK) die("run");
        free_tensors(&in);
        free_tensors(&out);
        api.destroy(m);
    }
    printf("%d loops\n", n);
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 4) {
        fprintf(stderr, "usage: aot_run run|bad|threads|shared|state|loop MODEL.so IN.bin [...]\n");
        return 2;
    }
    load_api(argv[2]);
    if (!strcmp(argv[1], "run")) return cmd_run(argv[3], argc > 4 ? argv[4] : "/dev/null", argc > 5 ? atoi(argv[5]) : 1);
    if (!strcmp(argv[1], "bad")) return cmd_bad(argv[3]);
    if (!strcmp(argv[1], "threads")) return cmd_threads(argv[3], argc > 4 ? atoi(argv[4]) : 4);
    if (!strcmp(argv[1], "shared"))
        return cmd_shared(argv[3], argc > 4 ? atoi(argv[4]) : 4, argc > 5 && !strcmp(argv[5], "steps"));
    if (!strcmp(argv[1], "state") && argc > 4) return cmd_state(argv[3], argv[4]);
    if (!strcmp(argv[1], "loop")) return cmd_loop(argv[3], argc > 4 ? atoi(argv[4]) : 10);
    return 2;
}
