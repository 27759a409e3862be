/*
 * aot.c - ahead of time: one traced specialisation -> a shared object
 * with the C ABI of include/ember/aot.h, and its header.
 *
 * The graph goes through the passes as for a compiled call, then is
 * printed and parsed back, so that the graph the backend compiles and the
 * one the shared object's runtime parses from the same text have the same
 * node and value ids (the program's description names them). The backend
 * writes position-independent object code (backend.h compile_object);
 * this file writes what the runtime needs besides (aot_format.h: the
 * description, the embedded bytes), assembles the bytes in with the
 * assembler's .incbin (no copy of a model's weights through a compiler),
 * and links everything with the system's C compiler driver against the
 * static AOT runtime (aot_model.c and what it uses: the IR, the program,
 * the eager runtime), so the result needs libc, libm and BLAS only.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "aot_export.h"
#include "ember/atomic_file.h"
#include "aot_format.h"
#include "ember/autograd.h"
#include "ember/strbuf.h"
#include "../io/safetensors.h"

extern char **environ;

#ifndef EMBER_AOT_LINK_LIBS
#define EMBER_AOT_LINK_LIBS "-lopenblas -lm -lpthread"
#endif

/* ---- names ---- */

/* s with every character outside [A-Za-z0-9_.-] replaced by '_' (the
 * description's words; C identifiers use ident()). */
static void word_of(const char *s, char *out, size_t cap) {
    size_t i = 0;
    for (; s && s[i] && i + 1 < cap; i++) {
        char c = s[i];
        bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
                  c == '.' || c == '-';
        out[i] = ok ? c : '_';
    }
    out[i] = 0;
    if (!i && cap > 1) snprintf(out, cap, "_");
}

static void ident(const char *s, char *out, size_t cap) {
    word_of(s, out, cap);
    for (char *c = out; *c; c++)
        if (*c == '.' || *c == '-') *c = '_';
    if (out[0] >= '0' && out[0] <= '9' && strlen(out) + 1 < cap) {
        memmove(out + 1, out, strlen(out) + 1);
        out[0] = '_';
    }
}

/* The name of input i of graph g: an argument's; a named tensor's; the
 * .grad of its owner's; a value read from Python at every call by the
 * graph's name for it ("external.lr": an optimizer's learning rate, fixed
 * ahead of time, as state); else "captured.<i>". */
static void input_name(const em_aot_opts *o, const em_aot_trace *t, const em_ir_graph *g, int i, char *out,
                       size_t cap) {
    if (i < t->n_args) return word_of(t->arg_names[i] ? t->arg_names[i] : "input", out, cap);
    const em_capture *c = &t->captured[i - t->n_args];
    if (c->kind == EM_CAPTURE_GRAD) {
        char owner[200];
        input_name(o, t, g, c->owner, owner, sizeof owner);
        snprintf(out, cap, "%s.grad", owner);
        return;
    }
    if (c->kind == EM_CAPTURE_EXTERNAL && g->body->params[i]->name) {
        char name[200];
        word_of(g->body->params[i]->name, name, sizeof name);
        snprintf(out, cap, "external.%s", name);
        return;
    }
    for (int k = 0; k < o->n_named; k++)
        if (o->named[k] == c->tensor) return word_of(o->names[k], out, cap);
    snprintf(out, cap, "captured.%d", i - t->n_args);
}

static em_aot_role role_of(const em_aot_trace *t, int i) {
    if (i < t->n_args) return EM_AOT_ARG;
    if (t->captured[i - t->n_args].kind == EM_CAPTURE_GRAD) return EM_AOT_GRAD;
    for (int j = 0; j < t->spec->n_effects; j++)
        if (t->spec->effects[j].kind == EM_EFFECT_WRITE && t->spec->effects[j].input == i) return EM_AOT_STATE;
    return EM_AOT_WEIGHT;
}

/* The values a captured input embeds: as before the call. */
static em_tensor *state_of(const em_aot_trace *t, int i) {
    const em_capture *c = &t->captured[i - t->n_args];
    return c->snapshot ? c->snapshot : c->tensor;
}

/* ---- the embedded bytes ---- */

typedef struct {
    FILE *f;
    int64_t size;
} blob;

/* Appends t's values (contiguous) at a 64-byte boundary; its offset, or -1. */
static int64_t blob_add(blob *b, em_tensor *t) {
    em_tensor *c = em_contiguous(t);
    if (!c) return -1;
    static const char zeros[EM_AOT_ALIGN];
    int64_t pad = (EM_AOT_ALIGN - b->size % EM_AOT_ALIGN) % EM_AOT_ALIGN;
    size_t n = (size_t)em_shape_numel(c->shape, c->ndim) * em_dtype_size(c->dtype);
    bool ok = fwrite(zeros, 1, (size_t)pad, b->f) == (size_t)pad && (!n || fwrite(em_tensor_data(c), 1, n, b->f) == n);
    em_tensor_release(c);
    if (!ok) return -1;
    b->size += pad;
    int64_t at = b->size;
    b->size += (int64_t)n;
    return at;
}

/* ---- the description ---- */

static bool draws_random(const em_ir_graph *g) {
    for (const em_ir_node *n = g->body->first; n; n = n->next)
        if (em_op_get(n->op)->flags & EM_F_RANDOM) return true;
    return false;
}

/* The description of graph g (its text `ir`, its program `program`), the
 * embedded bytes written to b as it goes. */
static char *describe(const em_aot_opts *o, const em_aot_trace *t, const em_ir_graph *g, const char *ir,
                      const char *program, blob *b) {
    em_strbuf s;
    em_strbuf_init(&s);
    char name[256];
    word_of(g->name, name, sizeof name);
    em_strbuf_printf(&s, "ember-aot %d\nname %s\ninputs %d %d\n", EM_AOT_FORMAT, name, g->body->n_params, t->n_args);
    for (int i = 0; i < g->body->n_params; i++) {
        em_aot_role role = role_of(t, i);
        input_name(o, t, g, i, name, sizeof name);
        em_strbuf_printf(&s, "input %s %s", em_aot_role_names[role], name); /* (its type: the graph's) */
        int owner = role == EM_AOT_GRAD ? t->captured[i - t->n_args].owner : -1;
        int64_t at = -1, n = 0;
        em_tensor *v = role == EM_AOT_ARG ? NULL : state_of(t, i);
        if (v && !o->external_weights) {
            if ((at = blob_add(b, v)) < 0) {
                em_strbuf_free(&s);
                return NULL;
            }
            n = em_shape_numel(v->shape, v->ndim) * (int64_t)em_dtype_size(v->dtype);
        }
        em_strbuf_printf(&s, " %d %lld %lld\n", owner, (long long)at, (long long)n);
    }
    em_strbuf_printf(&s, "outputs %d\n", t->n_out);
    for (int i = 0; i < t->n_out; i++) em_strbuf_printf(&s, "output out%d\n", i);
    em_strbuf_printf(&s, "effects %d\n", t->spec->n_effects);
    for (int j = 0; j < t->spec->n_effects; j++)
        em_strbuf_printf(&s, "effect %d %d %d\n", (int)t->spec->effects[j].kind, t->spec->effects[j].input,
                         t->spec->effects[j].result);
    int n_guards = 0, nr = g->body->n_results;
    for (int r = 0; t->spec->expected && r < nr; r++) n_guards += t->spec->expected[r] != NULL;
    em_strbuf_printf(&s, "guards %d\n", n_guards);
    for (int r = 0; t->spec->expected && r < nr; r++) {
        em_tensor *want = t->spec->expected[r];
        if (!want) continue;
        int64_t at = blob_add(b, want);
        if (at < 0) {
            em_strbuf_free(&s);
            return NULL;
        }
        const char *what = r - t->n_out >= 0 && t->value_guard_what ? t->value_guard_what[r - t->n_out] : "value";
        size_t n = 0; /* (one word: ".item()", "bool(tensor)") */
        for (; what[n] && n + 1 < sizeof name; n++) name[n] = what[n] > ' ' && what[n] < 127 ? what[n] : '_';
        snprintf(name + n, sizeof name - n, "%s", n ? "" : "value");
        em_strbuf_printf(&s, "guard %d %lld %lld %s\n", r, (long long)at,
                         (long long)(em_shape_numel(want->shape, want->ndim) * (int64_t)em_dtype_size(want->dtype)),
                         name);
    }
    em_strbuf_printf(&s, "slots %d\n", t->n_slots);
    for (int j = 0; j < t->n_slots; j++)
        em_strbuf_printf(&s, "slot %d %d %d\n", t->slots[j].owner, t->slots[j].initial, t->slots[j].final);
    em_strbuf_printf(&s, "random %d\nweights %s\ndata %lld\n", draws_random(g) ? 1 : 0,
                     o->external_weights ? "external" : "embedded", (long long)b->size);
    em_strbuf_printf(&s, "ir %zu\n%s", strlen(ir), ir);
    em_strbuf_printf(&s, "program %zu\n%s", strlen(program), program);
    return em_strbuf_take(&s);
}

/* ---- files ---- */

/* Replaces path with text, atomically (a failure leaves the old file). */
static em_status write_file(const char *path, const char *text) {
    em_atomic_file f;
    em_status st = em_atomic_open(&f, path, 0666);
    if (st == EM_OK) st = em_atomic_write(&f, text, strlen(text));
    if (st == EM_OK) return em_atomic_commit(&f);
    if (f.tmp[0]) em_atomic_abort(&f);
    return em_error(em_last_status(), "ember.aot: %s", em_last_error());
}

/* The assembly that places the description and the bytes in the object. */
static char *data_asm(const char *dir) {
    em_strbuf s;
    em_strbuf_init(&s);
    static const char *const syms[2] = {EM_AOT_DESCRIPTION, EM_AOT_DATA};
    static const char *const files[2] = {"description.txt", "data.bin"};
    em_strbuf_puts(&s, "\t.section .rodata.ember_aot,\"a\"\n");
    for (int i = 0; i < 2; i++) {
        em_strbuf_printf(&s, "\t.balign %d\n\t.globl %s\n\t.hidden %s\n\t.type %s, @object\n%s:\n\t.incbin \"%s/%s\"\n",
                         EM_AOT_ALIGN, syms[i], syms[i], syms[i], syms[i], dir, files[i]);
        em_strbuf_puts(&s, "\t.byte 0\n"); /* (a NUL after the text; the data never empty) */
    }
    em_strbuf_printf(&s, "\t.globl %s\n\t.hidden %s\n%s:\n\t.asciz \"", EM_AOT_CPU, EM_AOT_CPU, EM_AOT_CPU);
#if defined(__x86_64__)
    __builtin_cpu_init();
#define FEATURE(name)                                                                                                 \
    if (__builtin_cpu_supports(name)) em_strbuf_puts(&s, name " ");
    EM_AOT_CPU_FEATURES(FEATURE)
#undef FEATURE
#endif
    em_strbuf_puts(&s, "\"\n\t.section .note.GNU-stack,\"\",@progbits\n");
    return em_strbuf_take(&s);
}

/* Runs argv (no shell), its output into log; EM_OK when it exits 0. */
static em_status run_command(char *const *argv, const char *log) {
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_adddup2(&fa, 1, 2);
    pid_t pid;
    int rc = posix_spawnp(&pid, argv[0], &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    if (rc != 0) return em_error(EM_ERR_RUNTIME, "ember.aot: cannot run %s: %s", argv[0], strerror(rc));
    int status;
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR) return em_error(EM_ERR_RUNTIME, "ember.aot: waiting for %s: %s", argv[0], strerror(errno));
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return EM_OK;
    char out[2048] = "";
    FILE *f = fopen(log, "r");
    if (f) {
        size_t n = fread(out, 1, sizeof out - 1, f);
        out[n] = 0;
        fclose(f);
    }
    return em_error(EM_ERR_RUNTIME, "ember.aot: linking failed (%s):\n%s", argv[0], out);
}

/* Splits s at spaces into argv[*n..] (copies in *store). */
static void split_words(const char *s, char **argv, int *n, int cap) {
    char *copy = strdup(s ? s : ""), *save = NULL;
    for (char *w = copy ? strtok_r(copy, " ", &save) : NULL; w && *n < cap; w = strtok_r(NULL, " ", &save))
        argv[(*n)++] = strdup(w);
    free(copy);
}

static em_status link_object(const em_aot_opts *o, const char *dir, const char *out) {
    char *argv[64];
    int n = 0;
    const char *cc = o->cc && *o->cc ? o->cc : getenv("CC") && *getenv("CC") ? getenv("CC") : "cc";
    char paths[7][4200];
    snprintf(paths[0], sizeof paths[0], "%s/graph.o", dir);
    snprintf(paths[1], sizeof paths[1], "%s/data.S", dir);
    static const char *const libs[4] = {"libember_aot.a", "libember_program.a", "libember_ir.a",
                                        "libember_runtime.a"};
    for (int i = 0; i < 4; i++) snprintf(paths[2 + i], sizeof paths[2 + i], "%s/%s", o->runtime_dir, libs[i]);
    argv[n++] = strdup(cc);
    argv[n++] = strdup("-shared");
    argv[n++] = strdup("-o");
    argv[n++] = strdup(out);
    argv[n++] = strdup(paths[0]);
    argv[n++] = strdup(paths[1]);
    argv[n++] = strdup("-Wl,--whole-archive"); /* (the C ABI: nothing in the model's code calls it) */
    argv[n++] = strdup(paths[2]);
    argv[n++] = strdup("-Wl,--no-whole-archive");
    argv[n++] = strdup("-Wl,--start-group");
    for (int i = 1; i < 4; i++) argv[n++] = strdup(paths[2 + i]);
    argv[n++] = strdup("-Wl,--end-group");
    split_words(EMBER_AOT_LINK_LIBS, argv, &n, 48);
    split_words(o->link_flags, argv, &n, 56);
    argv[n++] = strdup("-Wl,-z,noexecstack");
    argv[n++] = strdup("-Wl,--as-needed");
    argv[n] = NULL;
    em_status st = EM_OK;
    for (int i = 0; i < n; i++)
        if (!argv[i]) st = em_error(EM_ERR_NOMEM, "out of memory linking");
    snprintf(paths[6], sizeof paths[6], "%s/link.log", dir);
    if (st == EM_OK) st = run_command(argv, paths[6]);
    for (int i = 0; i < n; i++) free(argv[i]);
    return st;
}

/* The C type of a dtype in the typed wrappers. */
static const char *c_type(em_dtype dt) {
    switch (dt) {
    case EM_DTYPE_F32: return "float";
    case EM_DTYPE_F64: return "double";
    case EM_DTYPE_I64: return "int64_t";
    case EM_DTYPE_I32: return "int32_t";
    case EM_DTYPE_I16: return "int16_t";
    case EM_DTYPE_I8: return "int8_t";
    case EM_DTYPE_BOOL:
    case EM_DTYPE_U8: return "uint8_t";
    default: return "uint16_t"; /* (float16, bfloat16: their bits) */
    }
}

/* array[index] = a DLTensor over `data` of type ty (static shape). */
static void wrapper_tensor(em_strbuf *s, const char *array, int index, const char *data, const em_type *ty) {
    em_strbuf_printf(s, "    static const int64_t %s%d_shape[%d] = {", array, index, ty->ndim ? ty->ndim : 1);
    for (int d = 0; d < ty->ndim; d++) em_strbuf_printf(s, "%s%lld", d ? ", " : "", (long long)ty->shape[d]);
    DLDataType dl = em_dtype_to_dlpack(ty->dtype);
    em_strbuf_printf(s, "%s};\n", ty->ndim ? "" : "0");
    em_strbuf_printf(s, "    %s[%d] = (DLTensor){(void *)%s, {kDLCPU, 0}, %d, {%u, %u, 1}, (int64_t *)%s%d_shape, NULL, 0};\n",
                     array, index, data, ty->ndim, dl.code, dl.bits, array, index);
}

/* model.h: the model's inputs and outputs, and a typed run function. */
static char *header_text(const em_aot_trace *t, const em_ir_graph *g, const char *stem) {
    em_strbuf s;
    em_strbuf_init(&s);
    char id[200], guard[256], nm[200];
    ident(stem, id, sizeof id);
    char upper[200]; /* (the include guard's and the macros' case) */
    snprintf(upper, sizeof upper, "%s", id);
    for (char *c = upper; *c; c++)
        if (*c >= 'a' && *c <= 'z') *c = (char)(*c - 'a' + 'A');
    snprintf(guard, sizeof guard, "EMBER_MODEL_%s_H", upper);
    em_strbuf_printf(&s, "/* %s.h - generated by ember.aot.compile for @%s: the typed wrappers of\n"
                         " * ember/aot.h for this model (link or dlopen %s.so). */\n",
                     stem, g->name, stem);
    em_strbuf_printf(&s, "#ifndef %s\n#define %s\n\n#include <stdint.h>\n\n#include \"ember/aot.h\"\n\n", guard, guard);
    em_strbuf_printf(&s, "#define %s_NUM_INPUTS %d\n#define %s_NUM_OUTPUTS %d\n\n", upper, t->n_args, upper, t->n_out);
    em_strbuf_printf(&s, "/* Runs the model on contiguous buffers:\n");
    for (int i = 0; i < t->n_args; i++) {
        char ty[128];
        em_type_str(&g->body->params[i]->type, ty, sizeof ty);
        word_of(t->arg_names[i] ? t->arg_names[i] : "input", nm, sizeof nm);
        em_strbuf_printf(&s, " *   input %d  %s: %s\n", i, nm, ty);
    }
    for (int i = 0; i < t->n_out; i++) {
        char ty[128];
        em_type_str(&g->body->results[i]->type, ty, sizeof ty);
        em_strbuf_printf(&s, " *   output %d out%d: %s\n", i, i, ty);
    }
    em_strbuf_printf(&s, " */\nstatic inline ember_status %s_run(ember_model *m", id);
    for (int i = 0; i < t->n_args; i++) {
        ident(t->arg_names[i] ? t->arg_names[i] : "input", nm, sizeof nm);
        em_strbuf_printf(&s, ", const %s *in_%s", c_type(g->body->params[i]->type.dtype), nm);
    }
    for (int i = 0; i < t->n_out; i++) em_strbuf_printf(&s, ", %s *out%d", c_type(g->body->results[i]->type.dtype), i);
    em_strbuf_printf(&s, ") {\n    DLTensor in[%d], out[%d];\n", t->n_args ? t->n_args : 1, t->n_out ? t->n_out : 1);
    for (int i = 0; i < t->n_args; i++) {
        char data[240];
        ident(t->arg_names[i] ? t->arg_names[i] : "input", nm, sizeof nm);
        snprintf(data, sizeof data, "in_%s", nm);
        wrapper_tensor(&s, "in", i, data, &g->body->params[i]->type);
    }
    for (int i = 0; i < t->n_out; i++) {
        char data[64];
        snprintf(data, sizeof data, "out%d", i);
        wrapper_tensor(&s, "out", i, data, &g->body->results[i]->type);
    }
    em_strbuf_printf(&s, "    return ember_model_run(m, in, %d, out, %d);\n}\n\n#endif\n", t->n_args, t->n_out);
    return em_strbuf_take(&s);
}

/* ---- the export ---- */

/* The external weights file: every non-argument input with values, by name. */
static em_status write_weights(const em_aot_opts *o, const em_aot_trace *t, const em_ir_graph *g, const char *path) {
    em_tensor **v = calloc((size_t)(t->n_inputs + 1), sizeof *v);
    char(*names)[256] = calloc((size_t)(t->n_inputs + 1), sizeof *names);
    const char **np = calloc((size_t)(t->n_inputs + 1), sizeof *np);
    int n = 0;
    em_status st = v && names && np ? EM_OK : em_error(EM_ERR_NOMEM, "out of memory writing %s", path);
    for (int i = t->n_args; st == EM_OK && i < t->n_inputs; i++)
        if ((v[n] = state_of(t, i))) {
            input_name(o, t, g, i, names[n], sizeof names[n]);
            np[n] = names[n];
            n++;
        }
    if (st == EM_OK) st = em_st_write_tensors(path, v, np, n);
    free(v);
    free(names);
    free(np);
    return st;
}

/* Removes the scratch directory and what is in it. */
static void remove_dir(const char *dir) {
    static const char *const files[] = {"graph.o", "data.S", "data.bin", "description.txt", "link.log"};
    char p[4200];
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        snprintf(p, sizeof p, "%s/%s", dir, files[i]);
        unlink(p);
    }
    rmdir(dir);
}

/* path without its ".so" (or other extension) */
static void stem_of(const char *path, char *out, size_t cap) {
    snprintf(out, cap, "%s", path);
    char *slash = strrchr(out, '/'), *dot = strrchr(out, '.');
    if (dot && (!slash || dot > slash)) *dot = 0;
}

static em_status export_graph(const em_aot_opts *o, const em_aot_trace *t, const em_ir_graph *g, const char *ir,
                              em_tensor *const *examples, const char *dir) {
    const em_backend *be = em_llvm_backend();
    char p[4200], stem[4096];
    snprintf(p, sizeof p, "%s/graph.o", dir);
    em_backend_opts bo = {examples, t->n_inputs, NULL, NULL, t->spec, false};
    char *program = NULL, *desc = NULL, *text = NULL;
    em_status st = be->compile_object(g, &bo, p, EM_AOT_TABLE, &program);
    blob b = {NULL, 0};
    snprintf(p, sizeof p, "%s/data.bin", dir);
    if (st == EM_OK && !(b.f = fopen(p, "wb")))
        st = em_error(EM_ERR_RUNTIME, "ember.aot: cannot write %s: %s", p, strerror(errno));
    if (st == EM_OK && !(desc = describe(o, t, g, ir, program, &b)))
        st = em_error(EM_ERR_RUNTIME, "ember.aot: writing the model's data failed: %s", strerror(errno));
    if (b.f && fclose(b.f) != 0 && st == EM_OK)
        st = em_error(EM_ERR_RUNTIME, "ember.aot: writing the model's data failed: %s", strerror(errno));
    snprintf(p, sizeof p, "%s/description.txt", dir);
    if (st == EM_OK) st = write_file(p, desc);
    snprintf(p, sizeof p, "%s/data.S", dir);
    if (st == EM_OK && !(text = data_asm(dir))) st = em_error(EM_ERR_NOMEM, "out of memory");
    if (st == EM_OK) st = write_file(p, text);
    free(text);
    text = NULL;
    stem_of(o->path, stem, sizeof stem);
    /* the linker writes beside the model, which is replaced only when whole */
    em_atomic_file so;
    bool linking = st == EM_OK && (st = em_atomic_open(&so, o->path, 0777)) == EM_OK;
    if (linking) {
        em_atomic_close_fd(&so);
        em_atomic_tmp_path(&so, p, sizeof p);
        st = link_object(o, dir, p);
        if (st == EM_OK) st = em_atomic_commit(&so);
        else em_atomic_abort(&so);
    }
    if (st != EM_OK && !strstr(em_last_error(), "ember.aot")) st = em_error(st, "ember.aot: %s", em_last_error());
    if (st == EM_OK && o->external_weights) {
        snprintf(p, sizeof p, "%s.safetensors", stem);
        st = write_weights(o, t, g, p);
    }
    const char *base = strrchr(stem, '/') ? strrchr(stem, '/') + 1 : stem;
    if (st == EM_OK && !(text = header_text(t, g, base))) st = em_error(EM_ERR_NOMEM, "out of memory");
    snprintf(p, sizeof p, "%s.h", stem);
    if (st == EM_OK) st = write_file(p, text);
    free(text);
    free(desc);
    free(program);
    return st;
}

em_status em_aot_export(const em_aot_opts *o, const em_aot_trace *t) {
    const em_backend *be = em_llvm_backend();
    if (!be || !be->compile_object) {
        em_ir_graph_free(t->graph);
        return em_error(EM_ERR_NOT_IMPLEMENTED, "ember.aot.compile needs the LLVM backend, and this ember was "
                                                "built without LLVM");
    }
    for (int j = 0; j < t->n_slots; j++)
        if (t->slots[j].owner < t->n_args) {
            em_ir_graph_free(t->graph);
            return em_error(EM_ERR_NOT_IMPLEMENTED, "ember.aot.compile: the function reads or sets the .grad of "
                            "its argument '%s'; ahead of time, gradients belong to the model's state (parameters "
                            "reached through a module or a closure)", t->arg_names[t->slots[j].owner]);
        }
    /* the passes (the interpreter as the backend: no code made here) */
    em_compile_opts co = {0, NULL, "interp", NULL, t->spec, t->passes, false};
    em_compiled *c = NULL;
    em_status st = em_compile(t->graph, t->inputs, t->n_inputs, &co, &c); /* (graph taken) */
    if (st != EM_OK) return st;
    char *ir = em_ir_print(em_compiled_graph(c));
    em_compiled_free(c);
    if (!ir) return em_error(EM_ERR_NOMEM, "out of memory exporting");
    em_ir_graph *g = em_ir_parse(ir, "aot");
    if (!g || (st = em_ir_verify(g)) != EM_OK) {
        st = em_error(EM_ERR_INTERNAL, "ember.aot: the graph's text does not read back: %s", em_last_error());
        em_ir_graph_free(g);
        free(ir);
        return st;
    }
    /* examples: the arguments as traced, the state as it will be (contiguous) */
    em_tensor **examples = calloc((size_t)(t->n_inputs + 1), sizeof *examples);
    const char *tmp = getenv("TMPDIR");
    char dirbuf[4096];
    snprintf(dirbuf, sizeof dirbuf, "%s/ember-aot-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    char *made = examples ? mkdtemp(dirbuf) : NULL;
    if (!examples || !made) {
        st = examples ? em_error(EM_ERR_RUNTIME, "ember.aot: cannot make a scratch directory: %s", strerror(errno))
                      : em_error(EM_ERR_NOMEM, "out of memory exporting");
    } else {
        for (int i = 0; i < t->n_inputs; i++) examples[i] = i < t->n_args ? t->inputs[i] : state_of(t, i);
        st = export_graph(o, t, g, ir, examples, made);
        remove_dir(made);
    }
    free(examples);
    em_ir_graph_free(g);
    free(ir);
    return st;
}

void em_aot_restore(const em_aot_trace *t) {
    em_attrs at;
    bool grad_mode = em_set_grad_enabled(false); /* (writes into parameters, as optimizers make them) */
    for (int i = 0; i < t->n_captured; i++) {
        const em_capture *c = &t->captured[i];
        if (!c->snapshot || c->kind == EM_CAPTURE_GRAD || !c->tensor) continue;
        memset(&at, 0, sizeof at);
        at.dtype = c->tensor->dtype;
        em_tensor *src = c->snapshot;
        if (em_op_run_inplace(EM_OP_CAST, &src, 1, &at, c->tensor) != EM_OK) em_clear_error();
    }
    /* the .grads: as they were (None, or the tensor traced with its values) */
    for (int j = 0; j < t->n_slots; j++) {
        const em_grad_slot *sl = &t->slots[j];
        if (sl->owner < t->n_args || sl->owner >= t->n_inputs) continue; /* (an argument's is the caller's) */
        em_tensor *owner = t->captured[sl->owner - t->n_args].tensor;
        em_tensor *was = NULL;
        if (sl->initial >= t->n_args && sl->initial < t->n_inputs) {
            const em_capture *g = &t->captured[sl->initial - t->n_args];
            was = g->tensor;
            if (g->snapshot && was) {
                memset(&at, 0, sizeof at);
                at.dtype = was->dtype;
                em_tensor *src = g->snapshot;
                if (em_op_run_inplace(EM_OP_CAST, &src, 1, &at, was) != EM_OK) em_clear_error();
            }
        } else if (sl->initial != EM_SLOT_NONE) {
            continue; /* (unread: nothing to put back) */
        }
        if (em_tensor_grad(owner) == was) continue;
        if (em_tensor_set_grad(owner, was) != EM_OK) em_clear_error(); /* (out of memory: left as it is) */
    }
    em_set_grad_enabled(grad_mode);
}
