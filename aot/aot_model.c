/*
 * aot_model.c - the C ABI of a model compiled ahead of time
 * (include/ember/aot.h): what every shared object ember.aot.compile
 * writes links in, with the static runtime beneath it. No Python, no LLVM.
 *
 * The model (aot_format.h) is read once per process: its description is
 * parsed, its graph's text parsed back into the graph the code was
 * compiled from. Each instance then has its own program (program.h: the
 * kernels' launch records, a frame for its arena), its own state tensors
 * (weights the graph only reads point into the shared object's bytes;
 * state it updates is copied) and its own random stream, so instances on
 * different threads share nothing they write.
 *
 * Every run checks its arguments before anything runs (dtype, ndim,
 * shape, device, data, strides; outputs too, which may not overlap
 * themselves or the inputs), and allocates what it hands back before the
 * graph runs, so a bad call changes no state and touches no memory
 * outside the buffers it was handed. Calls on one instance take turns on
 * its lock; instances share only what no call writes.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define EMBER_AOT_BUILDING
#include "../exec/program.h"
#include "aot_format.h"
#include "ember/aot.h"
#include "ember/autograd.h"
#include "ember/frontend.h"
#include "ember/random.h"
#include "ember/strbuf.h"
#include "../io/safetensors.h"

/* What the model's object defines (aot.c, the backend). */
extern const char ember_aot_description[] __attribute__((visibility("hidden")));
extern const unsigned char ember_aot_data[] __attribute__((visibility("hidden")));
extern void *const ember_aot_functions[] __attribute__((visibility("hidden")));
extern const char ember_aot_cpu[] __attribute__((visibility("hidden")));

#define NAME_CAP 256

typedef struct {
    em_aot_role role;
    char name[NAME_CAP];
    const em_type *type; /* the graph parameter's */
    int owner;           /* EM_AOT_GRAD: the input whose .grad it is */
    int64_t at, nbytes;  /* its embedded bytes, or at -1 */
} input_def;

/* The model, as read once per process. */
static struct {
    em_status status;
    char error[1024];
    char name[NAME_CAP];
    em_ir_graph *g;
    int n_inputs, n_args, n_out;
    input_def *inputs;
    char (*out_names)[64];
    em_effect *effects;
    int n_effects;
    em_tensor **expected; /* per graph result: a value guard's value, or NULL */
    struct guard_def {
        int result;
        int64_t at, nbytes;
        char what[64]; /* how the trace read the value (".item()") */
    } *guards;
    int n_guards;
    em_grad_slot *slots;
    int n_slots;
    bool random, external;
    int64_t data_bytes;
    const char *program;
    size_t program_len;
} model;
static pthread_once_t model_once = PTHREAD_ONCE_INIT;
static pthread_mutex_t rng_lock = PTHREAD_MUTEX_INITIALIZER;

struct ember_model {
    /* Held by every call that uses the instance's scratch or state: calls
     * on one instance from several threads take turns (aot.h). */
    pthread_mutex_t lock;
    em_llvm_program prog;
    em_tensor **state; /* per graph input: the instance's tensor (NULL for arguments and grads) */
    em_rng_state rng;
    em_tensor **in, **out, **res; /* a run's (under lock) */
};

/* The instance's lock, from functions that take it const (the lock is the
 * one thing they change). */
static void lock_model(const ember_model *m) { pthread_mutex_lock((pthread_mutex_t *)&m->lock); }
static void unlock_model(const ember_model *m) { pthread_mutex_unlock((pthread_mutex_t *)&m->lock); }

static ember_status status_of(em_status st) {
    switch (st) {
    case EM_OK: return EMBER_OK;
    case EM_ERR_GUARD: return EMBER_ERR_GUARD;
    case EM_ERR_NOMEM: return EMBER_ERR_NOMEM;
    default: return EMBER_ERR_RUNTIME;
    }
}

static ember_status fail(ember_status code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static ember_status fail(ember_status code, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    em_verror(EM_ERR_VALUE, fmt, ap);
    va_end(ap);
    return code;
}

/* ---- reading the model ---- */

/* A tensor of type ty over the embedded bytes at `at` (read only). */
static void no_release(void *ctx, void *data, size_t n) { (void)ctx, (void)data, (void)n; }
static em_tensor *embedded(const em_type *ty, int64_t at, int64_t nbytes) {
    int64_t need = em_shape_numel(ty->shape, ty->ndim) * (int64_t)em_dtype_size(ty->dtype);
    if (at < 0 || nbytes != need || at > model.data_bytes - nbytes) {
        em_error(EM_ERR_VALUE, "the model's bytes at %lld (%lld) do not hold a %s", (long long)at, (long long)nbytes,
                 em_dtype_name(ty->dtype));
        return NULL;
    }
    em_storage *s = em_storage_wrap((void *)(ember_aot_data + at), (size_t)(need ? need : 1), em_cpu(), no_release, NULL);
    if (!s) return NULL;
    int64_t strides[EM_MAX_DIMS];
    em_contiguous_strides(ty->shape, ty->ndim, strides);
    em_tensor *t = em_tensor_from_storage(s, ty->dtype, 0, ty->shape, strides, ty->ndim);
    em_storage_release(s);
    return t;
}

static em_status read_inputs(em_words *w) {
    em_words_expect(w, "inputs");
    model.n_inputs = (int)em_words_int(w, 0, 1 << 20);
    model.n_args = (int)em_words_int(w, 0, model.n_inputs);
    if (w->failed) return em_words_status(w);
    if (!(model.inputs = calloc((size_t)model.n_inputs + 1, sizeof *model.inputs))) return EM_ERR_NOMEM;
    for (int i = 0; i < model.n_inputs && !w->failed; i++) {
        input_def *d = &model.inputs[i];
        char word[NAME_CAP];
        em_words_expect(w, "input");
        em_words_word(w, word, sizeof word);
        int r = 0;
        while (r < EM_AOT_N_ROLES && strcmp(word, em_aot_role_names[r]) != 0) r++;
        if (r == EM_AOT_N_ROLES && !w->failed) return em_error(EM_ERR_PARSE, "model: unknown role '%s'", word);
        d->role = (em_aot_role)r;
        em_words_word(w, d->name, sizeof d->name); /* (its type is the graph parameter's) */
        d->owner = (int)em_words_int(w, -1, model.n_inputs - 1);
        d->at = em_words_int(w, -1, INT64_MAX / 2);
        d->nbytes = em_words_int(w, 0, INT64_MAX / 2);
        if ((d->role == EM_AOT_ARG) != (i < model.n_args) || (d->role == EM_AOT_GRAD && d->owner < 0))
            return em_error(EM_ERR_PARSE, "model: input %d (%s) has the wrong role", i, d->name);
    }
    em_words_expect(w, "outputs");
    model.n_out = (int)em_words_int(w, 0, 1 << 20);
    if (w->failed) return em_words_status(w);
    if (!(model.out_names = calloc((size_t)model.n_out + 1, sizeof *model.out_names))) return EM_ERR_NOMEM;
    for (int i = 0; i < model.n_out; i++) {
        em_words_expect(w, "output");
        em_words_word(w, model.out_names[i], sizeof model.out_names[i]);
    }
    return em_words_status(w);
}

static em_status read_effects(em_words *w) {
    em_words_expect(w, "effects");
    model.n_effects = (int)em_words_int(w, 0, 1 << 20);
    if (w->failed) return em_words_status(w);
    if (!(model.effects = calloc((size_t)model.n_effects + 1, sizeof *model.effects))) return EM_ERR_NOMEM;
    for (int j = 0; j < model.n_effects; j++) {
        em_words_expect(w, "effect");
        model.effects[j].kind = (em_effect_kind)em_words_int(w, EM_EFFECT_WRITE, EM_EFFECT_GRAD);
        model.effects[j].input = (int)em_words_int(w, 0, model.n_inputs - 1);
        model.effects[j].result = (int)em_words_int(w, -1, 1 << 20);
    }
    em_words_expect(w, "guards");
    model.n_guards = (int)em_words_int(w, 0, 1 << 20);
    if (w->failed) return em_words_status(w);
    if (!(model.guards = calloc((size_t)model.n_guards + 1, sizeof *model.guards))) return EM_ERR_NOMEM;
    for (int j = 0; j < model.n_guards; j++) {
        em_words_expect(w, "guard");
        model.guards[j].result = (int)em_words_int(w, 0, 1 << 20);
        model.guards[j].at = em_words_int(w, 0, INT64_MAX / 2);
        model.guards[j].nbytes = em_words_int(w, 0, INT64_MAX / 2);
        em_words_word(w, model.guards[j].what, sizeof model.guards[j].what);
    }
    em_words_expect(w, "slots");
    model.n_slots = (int)em_words_int(w, 0, 1 << 20);
    if (w->failed) return em_words_status(w);
    if (!(model.slots = calloc((size_t)model.n_slots + 1, sizeof *model.slots))) return EM_ERR_NOMEM;
    for (int j = 0; j < model.n_slots; j++) {
        em_words_expect(w, "slot");
        model.slots[j].owner = (int)em_words_int(w, 0, model.n_inputs - 1);
        model.slots[j].initial = (int)em_words_int(w, -2, model.n_inputs - 1);
        model.slots[j].final = (int)em_words_int(w, -2, 1 << 20);
    }
    char word[32];
    em_words_expect(w, "random");
    model.random = em_words_int(w, 0, 1) != 0;
    em_words_expect(w, "weights");
    em_words_word(w, word, sizeof word);
    model.external = strcmp(word, "external") == 0;
    em_words_expect(w, "data");
    model.data_bytes = em_words_int(w, 0, INT64_MAX / 2);
    return em_words_status(w);
}

/* "<word> <bytes>\n<bytes of text>": the text (a copy, NUL-terminated),
 * w moved past it. */
static char *read_text(em_words *w, const char *word, size_t *len) {
    em_words_expect(w, word);
    long long n = em_words_int(w, 0, INT64_MAX / 2);
    size_t rest;
    const char *at = w->failed ? NULL : em_words_rest(w, &rest);
    if (!at) return NULL;
    if ((size_t)n > rest) {
        em_error(EM_ERR_PARSE, "model: the %s text claims %lld bytes, %zu are left", word, n, rest);
        return NULL;
    }
    char *t = malloc((size_t)n + 1);
    if (!t) return NULL;
    memcpy(t, at, (size_t)n);
    t[n] = 0;
    w->at = at + n;
    *len = (size_t)n;
    return t;
}

/* Checks the description against the graph and makes the guards' values. */
static em_status check_model(void) {
    const em_ir_block *b = model.g->body;
    if (b->n_params != model.n_inputs || b->n_results < model.n_out)
        return em_error(EM_ERR_PARSE, "model: %d inputs and %d outputs described, the graph has %d and %d",
                        model.n_inputs, model.n_out, b->n_params, b->n_results);
    for (int i = 0; i < model.n_inputs; i++) model.inputs[i].type = &b->params[i]->type;
    for (int j = 0; j < model.n_effects; j++)
        if (model.effects[j].result >= b->n_results)
            return em_error(EM_ERR_PARSE, "model: effect %d reads result %d of %d", j, model.effects[j].result,
                            b->n_results);
    if (!(model.expected = calloc((size_t)b->n_results + 1, sizeof *model.expected))) return EM_ERR_NOMEM;
    for (int j = 0; j < model.n_guards; j++) {
        int r = model.guards[j].result;
        if (r >= b->n_results || model.expected[r])
            return em_error(EM_ERR_PARSE, "model: value guard %d of result %d", j, r);
        if (!(model.expected[r] = embedded(&b->results[r]->type, model.guards[j].at, model.guards[j].nbytes)))
            return em_last_status();
    }
    return EM_OK;
}

static em_status read_model(void) {
    const char *d = ember_aot_description;
    em_words w;
    em_words_init(&w, d, strlen(d), "model description");
    em_words_expect(&w, "ember-aot");
    if (em_words_int(&w, EM_AOT_FORMAT, EM_AOT_FORMAT) != EM_AOT_FORMAT || w.failed) return em_words_status(&w);
    em_words_expect(&w, "name");
    em_words_word(&w, model.name, sizeof model.name);
    em_status st = w.failed ? em_words_status(&w) : read_inputs(&w);
    if (st == EM_OK) st = read_effects(&w);
    if (st != EM_OK) return st;
    size_t ir_len;
    char *ir = read_text(&w, "ir", &ir_len);
    if (!ir) return em_last_status();
    model.g = em_ir_parse(ir, "model");
    free(ir);
    if (!model.g || (st = em_ir_verify(model.g)) != EM_OK) return em_last_status();
    if (!(model.program = read_text(&w, "program", &model.program_len))) return em_last_status();
    return check_model();
}

static void read_once(void) {
    model.status = read_model();
    if (model.status != EM_OK)
        snprintf(model.error, sizeof model.error, "%s: cannot read the model: %s", model.name, em_last_error());
}

/* ---- instances ---- */

void ember_model_destroy(ember_model *m) {
    if (!m) return;
    for (int i = 0; m->state && i < model.n_inputs; i++) em_tensor_release(m->state[i]);
    free(m->state);
    free(m->in);
    free(m->out);
    free(m->res);
    em_llvm_program_clear(&m->prog);
    pthread_mutex_destroy(&m->lock);
    free(m);
}

/* The state as embedded (aot_format.h). */
static em_status embedded_state(ember_model *m) {
    for (int i = model.n_args; i < model.n_inputs; i++) {
        const input_def *d = &model.inputs[i];
        if (d->at < 0) continue;
        em_tensor *t = embedded(d->type, d->at, d->nbytes);
        if (!t) return em_last_status();
        if (d->role != EM_AOT_WEIGHT) { /* (it changes: its own copy) */
            em_tensor *c = em_clone(t);
            em_tensor_release(t);
            if (!(t = c)) return em_last_status();
        }
        if (d->role == EM_AOT_GRAD) {
            if (!m->state[d->owner]) { /* (owners come first: captured before their .grad) */
                em_tensor_release(t);
                return em_error(EM_ERR_NOT_IMPLEMENTED, "the .grad of an argument (%s) ahead of time", d->name);
            }
            em_status st = em_tensor_set_grad(m->state[d->owner], t);
            em_tensor_release(t); /* (the owner holds it now) */
            if (st != EM_OK) return st;
        } else
            m->state[i] = t;
    }
    return EM_OK;
}

static ember_status load_state_file(ember_model *m, const char *path, bool all);

/* The .safetensors file beside this shared object (external weights).
 * Loaded through a descriptor (ember.aot.load opens /proc/self/fd/N, so a
 * file exported again loads anew), the object's path is the link's. */
static void default_weights(char *out, size_t cap) {
    Dl_info info;
    out[0] = 0;
    if (!dladdr((void *)(uintptr_t)ember_model_create, &info) || !info.dli_fname) return;
    snprintf(out, cap, "%s", info.dli_fname);
    if (strncmp(out, "/proc/self/fd/", 14) == 0) {
        ssize_t n = readlink(info.dli_fname, out, cap - 1);
        out[n > 0 ? n : 0] = 0;
        size_t len = strlen(out), tag = strlen(" (deleted)");
        if (len > tag && strcmp(out + len - tag, " (deleted)") == 0) out[len - tag] = 0;
    }
    char *slash = strrchr(out, '/'), *dot = strrchr(out, '.');
    if (dot && (!slash || dot > slash)) *dot = 0;
    if (strlen(out) + 13 < cap) strcat(out, ".safetensors");
}

#if defined(__x86_64__)
/* Does this CPU have feature w? (Compiled for any x86-64: it runs before
 * anything that may not.) */
__attribute__((target("arch=x86-64"))) static int cpu_supports(const char *w) {
#define FEATURE(name)                                                                                                 \
    if (strcmp(w, name) == 0) return __builtin_cpu_supports(name);
    EM_AOT_CPU_FEATURES(FEATURE)
#undef FEATURE
    return 1; /* (a feature this runtime does not know to check) */
}

/* Is w one of the words of list (NULL: none)? */
__attribute__((target("arch=x86-64"))) static int listed(const char *list, const char *w) {
    size_t n = strlen(w);
    for (const char *p = list ? strstr(list, w) : NULL; p; p = strstr(p + 1, w))
        if ((p == list || p[-1] == ' ' || p[-1] == ',') && (p[n] == 0 || p[n] == ' ' || p[n] == ',')) return 1;
    return 0;
}

/* The first feature the model's code may use that this CPU lacks (or that
 * EMBER_AOT_CPU_LACKS names: how the tests play an older CPU), or 0. */
__attribute__((target("arch=x86-64"))) static int missing_feature(char *word, size_t cap) {
    __builtin_cpu_init();
    const char *lacks = getenv("EMBER_AOT_CPU_LACKS");
    for (const char *p = ember_aot_cpu; *p;) {
        size_t n = 0;
        while (*p == ' ') p++;
        while (*p && *p != ' ') {
            if (n + 1 < cap) word[n++] = *p;
            p++;
        }
        word[n] = 0;
        if (n && (!cpu_supports(word) || listed(lacks, word))) return 1;
    }
    return 0;
}
#endif

ember_status ember_model_create(const char *weights_path, ember_model **out) {
    if (!out) return fail(EMBER_ERR_ARGUMENT, "ember_model_create: out is NULL");
    *out = NULL;
#if defined(__x86_64__)
    char feature[32];
    if (missing_feature(feature, sizeof feature))
        return fail(EMBER_ERR_RUNTIME, "this model was compiled for a CPU with %s, which this one lacks (the model's "
                    "code needs %s): compile it with ember.aot.compile on a machine like the one that runs it",
                    feature, ember_aot_cpu);
#endif
    pthread_once(&model_once, read_once);
    if (model.status != EM_OK) return fail(EMBER_ERR_RUNTIME, "%s", model.error);
    ember_model *m = calloc(1, sizeof *m);
    if (m) pthread_mutex_init(&m->lock, NULL);
    if (!m || !(m->state = calloc((size_t)model.n_inputs + 1, sizeof *m->state)) ||
        !(m->in = calloc((size_t)model.n_inputs + 1, sizeof *m->in)) ||
        !(m->out = calloc((size_t)model.n_out + 1, sizeof *m->out)) ||
        !(m->res = calloc((size_t)model.n_out + 1, sizeof *m->res))) {
        ember_model_destroy(m);
        return fail(EMBER_ERR_NOMEM, "ember_model_create: out of memory");
    }
    m->rng = (em_rng_state){EM_DEFAULT_SEED, 0};
    em_status st = em_llvm_program_load(model.program, model.program_len, model.g,
                                        (em_llvm_graph_fn)ember_aot_functions[0],
                                        (const em_llvm_kernel_fn *)(ember_aot_functions + 1), -1, &m->prog);
    if (st == EM_OK) {
        em_run_spec spec = {model.n_out, model.expected, model.effects, model.n_effects};
        st = em_llvm_program_copy_spec(&m->prog, &spec);
    }
    if (st == EM_OK) st = em_llvm_program_resolve(&m->prog);
    if (st == EM_OK) st = embedded_state(m);
    if (st != EM_OK) {
        ember_model_destroy(m);
        return fail(status_of(st), "%s: %s", model.name, em_last_error());
    }
    char beside[4096];
    if (!weights_path && model.external) {
        default_weights(beside, sizeof beside);
        weights_path = beside;
    }
    if (weights_path) {
        ember_status es = load_state_file(m, weights_path, model.external);
        if (es != EMBER_OK) {
            ember_model_destroy(m);
            return es;
        }
    }
    *out = m;
    return EMBER_OK;
}

/* ---- what the model takes and gives ---- */

int ember_abi_version(void) { return EMBER_AOT_ABI_VERSION; }

const char *ember_model_name(void) {
    pthread_once(&model_once, read_once);
    return model.name;
}

const char *ember_last_error(void) { return em_last_error(); }

int ember_model_num_inputs(const ember_model *m) { return m ? model.n_args : -1; }
int ember_model_num_outputs(const ember_model *m) { return m ? model.n_out : -1; }
int ember_model_num_states(const ember_model *m) { return m ? model.n_inputs - model.n_args : -1; }
int ember_model_draws_random(const ember_model *m) { return m && model.random; }

static void info_of(const char *name, const em_type *ty, ember_tensor_info *info) {
    info->name = name;
    info->dtype = em_dtype_to_dlpack(ty->dtype);
    info->ndim = ty->ndim;
    info->shape = ty->shape;
}

ember_status ember_model_input(const ember_model *m, int i, ember_tensor_info *info) {
    if (!m || !info || i < 0 || i >= model.n_args)
        return fail(EMBER_ERR_ARGUMENT, "ember_model_input: no input %d (the model has %d)", i, model.n_args);
    info_of(model.inputs[i].name, model.inputs[i].type, info);
    return EMBER_OK;
}

ember_status ember_model_output(const ember_model *m, int i, ember_tensor_info *info) {
    if (!m || !info || i < 0 || i >= model.n_out)
        return fail(EMBER_ERR_ARGUMENT, "ember_model_output: no output %d (the model has %d)", i, model.n_out);
    info_of(model.out_names[i], &model.g->body->results[i]->type, info);
    return EMBER_OK;
}

/* The tensor state i (graph input n_args + i) holds now, or NULL. */
static em_tensor *state_now(const ember_model *m, int i) {
    const input_def *d = &model.inputs[model.n_args + i];
    return d->role == EM_AOT_GRAD ? m->state[d->owner] ? em_tensor_grad(m->state[d->owner]) : NULL
                                  : m->state[model.n_args + i];
}

ember_status ember_model_state(const ember_model *m, int i, ember_tensor_info *info) {
    int n = model.n_inputs - model.n_args;
    if (!m || !info || i < 0 || i >= n)
        return fail(EMBER_ERR_ARGUMENT, "ember_model_state: no state %d (the model has %d)", i, n);
    info_of(model.inputs[model.n_args + i].name, model.inputs[model.n_args + i].type, info);
    lock_model(m);
    if (!state_now(m, i)) info->ndim = -1;
    unlock_model(m);
    return EMBER_OK;
}

/* ---- checking the caller's tensors ---- */

static void shape_text(const int64_t *shape, int ndim, char *buf, size_t cap) {
    size_t k = (size_t)snprintf(buf, cap, "[");
    for (int d = 0; d < ndim && k < cap; d++) k += (size_t)snprintf(buf + k, cap - k, "%s%lld", d ? ", " : "", (long long)shape[d]);
    if (k < cap) snprintf(buf + k, cap - k, "]");
}

/* dl as a tensor of type ty (`what` i, `name`, for messages): checked,
 * then wrapped (a new reference in *t, over the caller's memory). */
static ember_status wrap(const DLTensor *dl, const em_type *ty, const char *what, int i, const char *name, em_tensor **t) {
    char want[160], got[160];
    if (dl->device.device_type != kDLCPU)
        return fail(EMBER_ERR_DEVICE, "%s %d (%s): on DLPack device type %d; the model runs on the CPU (kDLCPU)", what, i,
                    name, (int)dl->device.device_type);
    em_dtype dt;
    if (!em_dtype_from_dlpack(dl->dtype, &dt) || dt != ty->dtype)
        return fail(EMBER_ERR_DTYPE, "%s %d (%s): DLPack dtype (code %u, bits %u, lanes %u); expected %s", what, i, name,
                    dl->dtype.code, dl->dtype.bits, dl->dtype.lanes, em_dtype_long_name(ty->dtype));
    if (dl->ndim != ty->ndim) {
        shape_text(ty->shape, ty->ndim, want, sizeof want);
        return fail(EMBER_ERR_SHAPE, "%s %d (%s): %d dimensions; expected %d, shape %s", what, i, name, (int)dl->ndim,
                    ty->ndim, want);
    }
    if (ty->ndim && !dl->shape) return fail(EMBER_ERR_ARGUMENT, "%s %d (%s): shape is NULL", what, i, name);
    for (int d = 0; d < ty->ndim; d++)
        if (dl->shape[d] != ty->shape[d]) {
            shape_text(ty->shape, ty->ndim, want, sizeof want);
            shape_text(dl->shape, dl->ndim, got, sizeof got);
            return fail(EMBER_ERR_SHAPE, "%s %d (%s): shape %s; expected %s", what, i, name, got, want);
        }
    int64_t numel = em_shape_numel(ty->shape, ty->ndim), size = (int64_t)em_dtype_size(dt);
    if (!dl->data && numel) return fail(EMBER_ERR_NULL_DATA, "%s %d (%s): data is NULL", what, i, name);
    int64_t strides[EM_MAX_DIMS], extent = numel ? 1 : 0;
    if (dl->strides) {
        for (int d = 0; d < ty->ndim; d++) {
            if (dl->strides[d] < 0)
                return fail(EMBER_ERR_SHAPE, "%s %d (%s): stride %lld of dim %d is negative (not supported)", what, i,
                            name, (long long)dl->strides[d], d);
            if (dl->strides[d] > (INT64_MAX / 4) / (ty->shape[d] ? ty->shape[d] : 1) / size)
                return fail(EMBER_ERR_SHAPE, "%s %d (%s): stride %lld of dim %d is too large", what, i, name,
                            (long long)dl->strides[d], d);
            strides[d] = dl->strides[d];
            if (numel) extent += (ty->shape[d] - 1) * strides[d];
        }
    } else {
        em_contiguous_strides(ty->shape, ty->ndim, strides);
        extent = numel;
    }
    /* (an offset that wraps the address space round points before data:
     * no buffer starts there; found by tests/fuzz/fuzz_aot.c) */
    if (dl->byte_offset > UINTPTR_MAX - (uintptr_t)dl->data)
        return fail(EMBER_ERR_ARGUMENT, "%s %d (%s): byte_offset %llu goes past the end of the address space", what, i,
                    name, (unsigned long long)dl->byte_offset);
    char *data = (char *)((uintptr_t)dl->data + (uintptr_t)dl->byte_offset);
    if ((uintptr_t)data % (uintptr_t)size)
        return fail(EMBER_ERR_ARGUMENT, "%s %d (%s): data is not aligned to its %lld-byte elements", what, i, name,
                    (long long)size);
    static char empty[64] __attribute__((aligned(64)));
    em_storage *s = em_storage_wrap(numel ? data : empty, (size_t)(extent ? extent * size : 1), em_cpu(), no_release, NULL);
    *t = s ? em_tensor_from_storage(s, dt, 0, ty->shape, strides, ty->ndim) : NULL;
    em_storage_release(s);
    return *t ? EMBER_OK : fail(status_of(em_last_status()), "%s %d (%s): %s", what, i, name, em_last_error());
}

/* Do two of t's elements share an address? (sufficient, as PyTorch's
 * check: dims by increasing stride, each stride at least the span of the
 * dims below it) Checked before a run, since writing such an output fails
 * only after the run has changed the instance's state. */
static bool self_overlapping(const em_tensor *t) {
    int order[EM_MAX_DIMS], n = 0;
    for (int d = 0; d < t->ndim; d++)
        if (t->shape[d] > 1) order[n++] = d;
    for (int i = 1; i < n; i++) /* (insertion sort: at most 8) */
        for (int j = i; j > 0 && t->strides[order[j]] < t->strides[order[j - 1]]; j--) {
            int tmp = order[j];
            order[j] = order[j - 1];
            order[j - 1] = tmp;
        }
    int64_t span = 1; /* elements the dims so far reach */
    for (int i = 0; i < n; i++) {
        int d = order[i];
        if (t->strides[d] < span) return true;
        span = t->strides[d] * (t->shape[d] - 1) + span;
    }
    return false;
}

/* The bytes [lo, hi) a wrapped tensor reaches. */
static void span(const em_tensor *t, uintptr_t *lo, uintptr_t *hi) {
    *lo = (uintptr_t)em_tensor_data(t);
    int64_t extent = 0;
    for (int d = 0; d < t->ndim; d++) extent += (t->shape[d] - 1) * t->strides[d];
    *hi = *lo + (uintptr_t)((extent + 1) * (int64_t)em_dtype_size(t->dtype));
    if (em_shape_numel(t->shape, t->ndim) == 0) *hi = *lo;
}

/* The .grads as the trace saw them: None where it saw None, a tensor where
 * it read one. */
static ember_status check_slots(const ember_model *m) {
    for (int j = 0; j < model.n_slots; j++) {
        const em_grad_slot *sl = &model.slots[j];
        const em_tensor *owner = m->state[sl->owner];
        const char *name = model.inputs[sl->owner].name;
        if (!owner) return fail(EMBER_ERR_RUNTIME, "%s: the .grad of an argument (%s) ahead of time", model.name, name);
        if (sl->initial == EM_SLOT_NONE && em_tensor_grad(owner))
            return fail(EMBER_ERR_GUARD, "%s: guard failed: %s.grad is a tensor, and the step was traced with it None "
                        "(zero it with set_to_none=True inside the step)", model.name, name);
        if (sl->initial >= 0 && !em_tensor_grad(owner))
            return fail(EMBER_ERR_GUARD, "%s: guard failed: %s.grad is None, and the step was traced with a gradient there",
                        model.name, name);
    }
    return EMBER_OK;
}

/* ---- running ---- */

/* Checks and wraps the inputs (in[0..n_args)) and the outputs (out, may be
 * NULL), fills in[] with the state; EMBER_OK or the first problem. */
static ember_status prepare(ember_model *m, const DLTensor *inputs, int n_inputs, const DLTensor *outputs,
                            int n_outputs, em_tensor **in, em_tensor **out) {
    if (!m) return fail(EMBER_ERR_ARGUMENT, "ember_model_run: the model is NULL");
    if (n_inputs != model.n_args || (n_inputs && !inputs))
        return fail(EMBER_ERR_ARGUMENT, "%s: takes %d inputs, got %d%s", model.name, model.n_args, n_inputs,
                    n_inputs && !inputs ? " (and a NULL array)" : "");
    if (n_outputs != model.n_out || (n_outputs && !outputs && out))
        return fail(EMBER_ERR_ARGUMENT, "%s: returns %d outputs, got room for %d", model.name, model.n_out, n_outputs);
    for (int i = 0; i < model.n_args; i++) {
        ember_status es = wrap(&inputs[i], model.inputs[i].type, "input", i, model.inputs[i].name, &in[i]);
        if (es != EMBER_OK) return es;
    }
    for (int i = 0; out && i < model.n_out; i++) {
        ember_status es = wrap(&outputs[i], &model.g->body->results[i]->type, "output", i, model.out_names[i], &out[i]);
        if (es != EMBER_OK) return es;
        if (self_overlapping(out[i]))
            return fail(EMBER_ERR_SHAPE, "%s: output %d (%s): its strides give two elements one address (a stride "
                        "of 0?); each output element needs its own memory", model.name, i, model.out_names[i]);
        uintptr_t lo, hi, lo2, hi2;
        span(out[i], &lo, &hi);
        for (int j = 0; j < model.n_args + i; j++) {
            span(j < model.n_args ? in[j] : out[j - model.n_args], &lo2, &hi2);
            if (lo < hi2 && lo2 < hi)
                return fail(EMBER_ERR_ARGUMENT, "%s: output %d (%s) overlaps %s %d", model.name, i, model.out_names[i],
                            j < model.n_args ? "input" : "output", j < model.n_args ? j : j - model.n_args);
        }
    }
    ember_status es = check_slots(m);
    if (es != EMBER_OK) return es;
    for (int i = model.n_args; i < model.n_inputs; i++) {
        em_tensor *t = model.inputs[i].role == EM_AOT_GRAD ? em_tensor_grad(m->state[model.inputs[i].owner]) : m->state[i];
        if (!t) return fail(EMBER_ERR_GUARD, "%s: guard failed: %s is None", model.name, model.inputs[i].name);
        em_tensor_retain(in[i] = t);
    }
    return EMBER_OK;
}

/* Runs the graph on in[] (results into res[0..n_out)). */
static ember_status run_graph(ember_model *m, em_tensor **in, em_tensor **res) {
    if (model.random) {
        pthread_mutex_lock(&rng_lock); /* (the runtime's stream is the process's) */
        em_rng_set_state(m->rng);
    }
    em_status st = em_llvm_program_run(&m->prog, in, res);
    if (model.random) {
        m->rng = em_rng_get_state();
        pthread_mutex_unlock(&rng_lock);
    }
    if (st == EM_ERR_GUARD) { /* (say how the trace read the values it relied on) */
        char how[256] = "";
        size_t k = 0;
        for (int j = 0; j < model.n_guards && k + 1 < sizeof how; j++) {
            int n = snprintf(how + k, sizeof how - k, "%s%s", j ? ", " : "", model.guards[j].what);
            k += n > 0 ? (size_t)n : 0;
        }
        return fail(EMBER_ERR_GUARD, "%s: guard failed: %s (the traced function read it with %s and acted on it)",
                    model.name, em_last_error(), how);
    }
    return st == EM_OK ? EMBER_OK : fail(status_of(st), "%s: %s", model.name, em_last_error());
}

static void release_all(em_tensor **t, int n) {
    for (int i = 0; i < n; i++) {
        em_tensor_release(t[i]);
        t[i] = NULL;
    }
}

/* Result i into the caller's output: a copy of the bytes when both are
 * laid out contiguously (the common case, and a call's cost for a small
 * model), else a strided copy. */
static ember_status copy_out(em_tensor *res, em_tensor *out, int i) {
    if (em_tensor_is_contiguous(res) && em_tensor_is_contiguous(out) && res->dtype == out->dtype) {
        memcpy(em_tensor_data(out), em_tensor_data(res),
               (size_t)em_shape_numel(res->shape, res->ndim) * em_dtype_size(res->dtype));
        return EMBER_OK;
    }
    em_attrs at;
    memset(&at, 0, sizeof at);
    at.dtype = out->dtype;
    if (em_op_run_inplace(EM_OP_CAST, &res, 1, &at, out) == EM_OK) return EMBER_OK;
    return fail(status_of(em_last_status()), "%s: output %d: %s", model.name, i, em_last_error());
}

ember_status ember_model_run(ember_model *m, const DLTensor *inputs, int n_inputs, const DLTensor *outputs,
                             int n_outputs) {
    if (!m) return fail(EMBER_ERR_ARGUMENT, "ember_model_run: the model is NULL");
    if (n_outputs == model.n_out && n_outputs && !outputs)
        return fail(EMBER_ERR_ARGUMENT, "%s: outputs is NULL", model.name);
    lock_model(m);
    em_tensor **in = m->in, **out = m->out, **res = m->res;
    ember_status es = prepare(m, inputs, n_inputs, outputs, n_outputs, in, out);
    if (es == EMBER_OK) es = run_graph(m, in, res);
    for (int i = 0; es == EMBER_OK && i < model.n_out; i++) es = copy_out(res[i], out[i], i);
    release_all(in, model.n_inputs);
    release_all(out, model.n_out);
    release_all(res, model.n_out);
    unlock_model(m);
    return es;
}

/* What run_alloc hands out: a managed tensor with its geometry inline. */
typedef struct {
    DLManagedTensor managed;
    int64_t shape[EM_MAX_DIMS], strides[EM_MAX_DIMS];
} managed;

static void managed_delete(DLManagedTensor *self) {
    if (!self) return;
    em_tensor_release(self->manager_ctx);
    free(self);
}

ember_status ember_model_run_alloc(ember_model *m, const DLTensor *inputs, int n_inputs, DLManagedTensor **outputs,
                                   int n_outputs) {
    if (!m) return fail(EMBER_ERR_ARGUMENT, "ember_model_run_alloc: the model is NULL");
    if (n_outputs && !outputs) return fail(EMBER_ERR_ARGUMENT, "%s: outputs is NULL", model.name);
    /* the outputs' records first: no allocation that can fail after the run changed the state */
    managed **held = calloc((size_t)model.n_out + 1, sizeof *held);
    for (int i = 0; held && i < model.n_out; i++)
        if (!(held[i] = calloc(1, sizeof **held))) {
            for (int k = 0; k < i; k++) free(held[k]);
            free(held);
            held = NULL;
        }
    if (!held) return fail(EMBER_ERR_NOMEM, "%s: out of memory for the outputs", model.name);
    lock_model(m);
    em_tensor **in = m->in, **res = m->res;
    ember_status es = prepare(m, inputs, n_inputs, NULL, n_outputs, in, NULL);
    if (es == EMBER_OK) es = run_graph(m, in, res);
    int handed = 0;
    for (int i = 0; es == EMBER_OK && i < model.n_out; i++) {
        /* the result itself, unless its memory is another's (an input, the state): then a copy */
        bool shared = !em_tensor_is_contiguous(res[i]);
        for (int j = 0; j < model.n_inputs && !shared; j++) shared = in[j]->storage == res[i]->storage;
        em_tensor *t = shared ? em_clone(res[i]) : res[i];
        managed *x = held[i];
        if (!t) {
            for (int k = 0; k < i; k++) managed_delete(outputs[k]);
            handed = 0;
            es = fail(EMBER_ERR_NOMEM, "%s: out of memory for output %d", model.name, i);
            break;
        }
        handed = i + 1;
        if (!shared) em_tensor_retain(t);
        memcpy(x->shape, t->shape, (size_t)t->ndim * sizeof *t->shape);
        memcpy(x->strides, t->strides, (size_t)t->ndim * sizeof *t->strides);
        x->managed.dl_tensor = (DLTensor){em_tensor_data(t), {kDLCPU, 0}, t->ndim, em_dtype_to_dlpack(t->dtype),
                                          x->shape, x->strides, 0};
        x->managed.manager_ctx = t;
        x->managed.deleter = managed_delete;
        outputs[i] = &x->managed;
    }
    release_all(in, model.n_inputs);
    release_all(res, model.n_out);
    unlock_model(m);
    for (int i = handed; i < model.n_out; i++) free(held[i]); /* (those not handed out) */
    free(held);
    return es;
}

/* ---- state ---- */

static ember_status save_state_locked(ember_model *m, const char *path);

ember_status ember_model_save_state(ember_model *m, const char *path) {
    if (!m || !path) return fail(EMBER_ERR_ARGUMENT, "ember_model_save_state: NULL %s", m ? "path" : "model");
    lock_model(m);
    ember_status es = save_state_locked(m, path);
    unlock_model(m);
    return es;
}

static ember_status save_state_locked(ember_model *m, const char *path) {
    int n = model.n_inputs - model.n_args, k = 0;
    em_tensor **v = calloc((size_t)n + 1, sizeof *v);
    const char **names = calloc((size_t)n + 1, sizeof *names);
    em_status st = v && names ? EM_OK : em_error(EM_ERR_NOMEM, "out of memory saving %s", path);
    for (int i = 0; st == EM_OK && i < n; i++)
        if ((v[k] = state_now(m, i))) names[k++] = model.inputs[model.n_args + i].name;
    if (st == EM_OK) st = em_st_write_tensors(path, v, names, k);
    free(v);
    free(names);
    return st == EM_OK ? EMBER_OK : fail(st == EM_ERR_NOMEM ? EMBER_ERR_NOMEM : EMBER_ERR_IO, "%s", em_last_error());
}

/* Replaces the state the file names (all: every state with values must be
 * there). Checks everything first: a file that does not fit changes nothing. */
static ember_status load_state_file(ember_model *m, const char *path, bool all) {
    em_st_file f;
    if (em_st_read(path, &f) != EM_OK) return fail(EMBER_ERR_IO, "%s", em_last_error());
    int n = model.n_inputs - model.n_args;
    const em_st_tensor **found = calloc((size_t)n + 1, sizeof *found);
    ember_status es = found ? EMBER_OK : fail(EMBER_ERR_NOMEM, "out of memory reading %s", path);
    for (int i = 0; es == EMBER_OK && i < n; i++) {
        const input_def *d = &model.inputs[model.n_args + i];
        const em_st_tensor *t = found[i] = em_st_find(&f, d->name);
        char want[160], got[160];
        if (!t) { /* (gradients are optional: absent, they are None) */
            if (all && d->role != EM_AOT_GRAD)
                es = fail(EMBER_ERR_IO, "%s: no tensor '%s' (the model's %s)", path, d->name, em_aot_role_names[d->role]);
            continue;
        }
        shape_text(d->type->shape, d->type->ndim, want, sizeof want);
        shape_text(t->shape, t->ndim, got, sizeof got);
        if (t->dtype != d->type->dtype)
            es = fail(EMBER_ERR_DTYPE, "%s: '%s' is %s; the model's is %s", path, d->name, em_dtype_long_name(t->dtype),
                      em_dtype_long_name(d->type->dtype));
        else if (!em_shape_eq(t->shape, t->ndim, d->type->shape, d->type->ndim))
            es = fail(EMBER_ERR_SHAPE, "%s: '%s' has shape %s; the model's has %s", path, d->name, got, want);
    }
    /* every new tensor made before any replaces the old: out of memory changes nothing either */
    em_tensor **fresh = es == EMBER_OK ? calloc((size_t)n + 1, sizeof *fresh) : NULL;
    if (es == EMBER_OK && !fresh) es = fail(EMBER_ERR_NOMEM, "out of memory reading %s", path);
    for (int i = 0; es == EMBER_OK && i < n; i++) {
        const input_def *d = &model.inputs[model.n_args + i];
        if (!found[i]) continue;
        if (!(fresh[i] = em_tensor_empty(d->type->shape, d->type->ndim, d->type->dtype, em_cpu()))) {
            es = fail(EMBER_ERR_NOMEM, "out of memory reading %s", path);
            break;
        }
        memcpy(em_tensor_data(fresh[i]), found[i]->data, found[i]->nbytes);
        /* (whatever takes a .grad below has its autograd state made now) */
        em_tensor *takes = d->role == EM_AOT_GRAD ? m->state[d->owner] : fresh[i];
        if (takes && em_tensor_autograd_reserve(takes) != EM_OK) {
            es = fail(EMBER_ERR_NOMEM, "out of memory reading %s", path);
            break;
        }
    }
    for (int i = 0; es != EMBER_OK && fresh && i < n; i++) em_tensor_release(fresh[i]);
    for (int i = 0; es == EMBER_OK && i < n; i++) {
        const input_def *d = &model.inputs[model.n_args + i];
        if (!fresh[i]) continue;
        em_tensor *t = fresh[i];
        if (d->role == EM_AOT_GRAD) { /* (cannot fail: reserved above) */
            (void)em_tensor_set_grad(m->state[d->owner], t);
            em_tensor_release(t);
            continue;
        }
        em_tensor **slot = &m->state[model.n_args + i];
        if (*slot && em_tensor_grad(*slot)) { /* (a new tensor: its .grad moves over) */
            (void)em_tensor_set_grad(t, em_tensor_grad(*slot));
            (void)em_tensor_set_grad(*slot, NULL);
        }
        em_tensor_release(*slot);
        *slot = t;
    }
    free(fresh);
    free(found);
    em_st_close(&f);
    return es;
}

ember_status ember_model_load_state(ember_model *m, const char *path) {
    if (!m || !path) return fail(EMBER_ERR_ARGUMENT, "ember_model_load_state: NULL %s", m ? "path" : "model");
    lock_model(m);
    ember_status es = load_state_file(m, path, false);
    unlock_model(m);
    return es;
}

void ember_model_set_rng(ember_model *m, uint64_t seed, uint64_t offset) {
    if (!m) return;
    lock_model(m);
    m->rng = (em_rng_state){seed, offset};
    unlock_model(m);
}

void ember_model_get_rng(const ember_model *m, uint64_t *seed, uint64_t *offset) {
    em_rng_state r = {0, 0};
    if (m) {
        lock_model(m);
        r = m->rng;
        unlock_model(m);
    }
    if (seed) *seed = r.seed;
    if (offset) *offset = r.offset;
}
