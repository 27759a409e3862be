/*
 * compile.c - the compile driver: passes, then a backend, with dumps.
 *
 * The pipeline is the caller's, else EMBER_PASSES (a comma-separated list),
 * else em_default_pipeline, verified after every pass; what the passes
 * report is kept for explain(). The
 * backend is LLVM when ember was built with it, else the interpreter; if a
 * backend fails on a graph the driver falls back to the interpreter, which
 * runs every graph, and records why. Dumps (EMBER_DUMP) go to one directory
 * per compiled graph: the traced IR, the IR after every pass, the backend's
 * code and the guards, as text a person can read and ember-opt can parse.
 */
#define _POSIX_C_SOURCE 200809L /* clock_gettime */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "ember/alloc.h"
#include "ember/frontend.h"
#include "ember/passes.h"
#include "ember/strbuf.h"

struct em_compiled {
    em_ir_graph *graph;
    const em_backend *backend;
    void *state;
    char dump_path[1024];
    char note[512];
    double passes_ms, backend_ms; /* compile time by stage, for explain() */
    char *passes;                 /* the pipeline run, comma-separated */
    char *pass_report;            /* what the passes said they did */
    bool dynamic_sizes;           /* compiled for sizes read at run time */
};

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

/* ---- the interpreter as a backend ---- */

static em_status interp_compile(const em_ir_graph *g, const em_backend_opts *opts, void **state) {
    em_interp *it = em_interp_new(g, opts->spec);
    if (!it) return em_error(EM_ERR_NOMEM, "out of memory preparing @%s", g->name);
    *state = it;
    return EM_OK;
}

static em_status interp_run(void *state, em_tensor *const *in, int n_in, em_tensor **out, int n_out) {
    return em_interp_run(state, NULL, in, n_in, out, n_out);
}

static char *interp_describe(void *state) {
    (void)state;
    char *s = malloc(64);
    if (s) snprintf(s, 64, "every node runs its eager kernel (IR interpreter)\n");
    return s;
}

static char *interp_profile(void *state) { return em_interp_profile(state); }

static void interp_free(void *state) { em_interp_free(state); }

static const em_backend interp_backend = {"interp",
                                          interp_compile,
                                          interp_run,
                                          interp_describe,
                                          interp_profile,
                                          interp_free,
                                          NULL /* (no code) */,
                                          NULL /* (nor any to cache) */,
                                          NULL /* (nor ahead of time) */};

const em_backend *em_interp_backend(void) { return &interp_backend; }

const em_backend *em_backend_named(const char *name, bool *known) {
    *known = true;
#define EM_BACKEND_TRY(n, fn)                                                                      \
    if (!name || !strcmp(name, #n)) {                                                              \
        const em_backend *b = fn();                                                                \
        if (b || name) return b;                                                                   \
    }
    EM_BACKEND_LIST(EM_BACKEND_TRY)
#undef EM_BACKEND_TRY
    *known = false;
    return NULL;
}

/* ---- dumps ---- */

unsigned em_dump_mask_from_env(void) {
    const char *env = getenv("EMBER_DUMP");
    if (!env || !*env || strcmp(env, "0") == 0) return 0;
    unsigned mask = 0;
    char buf[256];
    snprintf(buf, sizeof buf, "%s", env);
    for (char *tok = strtok(buf, ", "); tok; tok = strtok(NULL, ", ")) {
        if (!strcmp(tok, "all") || !strcmp(tok, "1"))
            mask |= EM_DUMP_IR | EM_DUMP_PASSES | EM_DUMP_LLVM | EM_DUMP_GUARDS | EM_DUMP_DOT;
        else if (!strcmp(tok, "ir"))
            mask |= EM_DUMP_IR | EM_DUMP_GUARDS;
        else if (!strcmp(tok, "passes"))
            mask |= EM_DUMP_PASSES;
        else if (!strcmp(tok, "llvm"))
            mask |= EM_DUMP_LLVM;
        else if (!strcmp(tok, "guards"))
            mask |= EM_DUMP_GUARDS;
        else if (!strcmp(tok, "dot"))
            mask |= EM_DUMP_DOT;
    }
    return mask;
}

const char *em_dump_dir_from_env(void) {
    const char *env = getenv("EMBER_DUMP_DIR");
    return env && *env ? env : "ember_dump";
}

static bool make_dirs(const char *path) {
    char buf[1024];
    snprintf(buf, sizeof buf, "%s", path);
    for (char *p = buf + 1; *p; p++)
        if (*p == '/') {
            *p = '\0';
            if (mkdir(buf, 0777) != 0 && errno != EEXIST) return false;
            *p = '/';
        }
    return mkdir(buf, 0777) == 0 || errno == EEXIST;
}

static void write_file(const char *dir, const char *name, const char *text) {
    char path[1400];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    if (!f) return; /* dumps are best effort: never fail a compile */
    fputs(text, f);
    fclose(f);
}

static void dump_graph(const char *dir, const char *name, const em_ir_graph *g) {
    char *text = em_ir_print(g);
    if (text) write_file(dir, name, text);
    free(text);
}

typedef struct {
    const char *dir;
} dump_ctx;

static void dump_after_pass(void *ctx, int index, const char *pass, const em_ir_graph *g) {
    char name[64];
    snprintf(name, sizeof name, "%d-after-%s.ir", index + 1, pass);
    dump_graph(((dump_ctx *)ctx)->dir, name, g);
}

static void dump_backend_text(void *ctx, const char *name, const char *text) {
    write_file(((dump_ctx *)ctx)->dir, name, text);
}

/* ---- the driver ---- */

/* The pipeline a compile runs into names[0..max): the caller's, EMBER_PASSES
 * (split in buf) or the default. Its length, or -1 when it has more than
 * max passes. */
static int pipeline_of(const em_compile_opts *opts, char *buf, size_t size, const char **names, int max) {
    const char *const *list = opts->passes ? opts->passes : em_default_pipeline;
    const char *env = getenv("EMBER_PASSES");
    int n = 0;
    if (!opts->passes && env && *env) {
        snprintf(buf, size, "%s", env);
        for (char *save, *tok = strtok_r(buf, ", ", &save); tok; tok = strtok_r(NULL, ", ", &save)) {
            if (n == max) return -1;
            names[n++] = tok;
        }
        return n;
    }
    for (; list[n]; n++) {
        if (n == max) return -1;
        names[n] = list[n];
    }
    return n;
}

static int dump_counter;

em_status em_compile(em_ir_graph *graph, em_tensor *const *examples, int n_examples,
                     const em_compile_opts *opts, em_compiled **out) {
    em_compiled *c = em_calloc(1, sizeof *c);
    if (!c) {
        em_ir_graph_free(graph);
        return EM_ERR_NOMEM;
    }
    c->graph = graph;
    dump_ctx dc = {NULL};
    if (opts->dump_mask && opts->dump_dir) {
        int k = __atomic_fetch_add(&dump_counter, 1, __ATOMIC_RELAXED);
        snprintf(c->dump_path, sizeof c->dump_path, "%s/%s-%d", opts->dump_dir, graph->name, k);
        if (make_dirs(c->dump_path))
            dc.dir = c->dump_path;
        else
            c->dump_path[0] = '\0';
    }
    if (dc.dir && (opts->dump_mask & EM_DUMP_IR)) dump_graph(dc.dir, "0-traced.ir", graph);
    if (dc.dir && (opts->dump_mask & EM_DUMP_GUARDS) && opts->guards_text)
        write_file(dc.dir, "guards.txt", opts->guards_text);
    const char *names[64];
    char env_buf[1024];
    int n_passes = pipeline_of(opts, env_buf, sizeof env_buf, names, 64);
    em_strbuf report, used;
    em_strbuf_init(&report);
    em_strbuf_init(&used);
    for (int i = 0; i < n_passes; i++) em_strbuf_printf(&used, "%s%s", i ? ", " : "", names[i]);
    c->passes = em_strbuf_take(&used);
    double t0 = now_ms();
    em_status st = n_passes < 0 ? em_error(EM_ERR_VALUE, "EMBER_PASSES: more than 64 passes")
                                : em_pass_run_pipeline(graph, names, n_passes, true,
                                                       dc.dir && (opts->dump_mask & EM_DUMP_PASSES) ? dump_after_pass : NULL,
                                                       &dc, &report);
    c->pass_report = em_strbuf_take(&report);
    if (st != EM_OK) {
        em_compiled_free(c);
        return st;
    }
    c->passes_ms = now_ms() - t0;
    if (dc.dir && (opts->dump_mask & EM_DUMP_PASSES)) /* (what the passes did; empty when nothing) */
        write_file(dc.dir, "passes.txt", c->pass_report ? c->pass_report : "");
    if (dc.dir && (opts->dump_mask & EM_DUMP_IR)) dump_graph(dc.dir, "final.ir", graph);
    if (dc.dir && (opts->dump_mask & EM_DUMP_DOT)) {
        char *dot = em_ir_to_dot(graph);
        if (dot) write_file(dc.dir, "final.dot", dot);
        free(dot);
    }

    bool known;
    const em_backend *want = em_backend_named(opts->backend, &known);
    if (opts->backend && !known) { /* (EMBER_BACKEND=typo: the best built, and a note) */
        want = em_backend_named(NULL, &known);
        snprintf(c->note, sizeof c->note, "no backend named '%s'; using %s", opts->backend, want->name);
    } else if (opts->backend && !want) {
        snprintf(c->note, sizeof c->note, "ember was built without the %s backend; using the interpreter",
                 opts->backend);
    }
    em_backend_opts bo = {examples, n_examples, NULL, NULL, opts->spec, opts->dynamic_sizes};
    c->dynamic_sizes = opts->dynamic_sizes;
    if (dc.dir && (opts->dump_mask & EM_DUMP_LLVM)) {
        bo.dump = dump_backend_text;
        bo.dump_ctx = &dc;
    }
    t0 = now_ms();
    if (want && want != &interp_backend) {
        if (want->compile(graph, &bo, &c->state) == EM_OK) {
            c->backend = want;
        } else {
            snprintf(c->note, sizeof c->note, "the %s backend failed (%s); using the interpreter",
                     want->name, em_last_error());
            c->state = NULL;
        }
    }
    if (!c->backend) {
        if ((st = interp_backend.compile(graph, &bo, &c->state)) != EM_OK) {
            em_compiled_free(c);
            return st;
        }
        c->backend = &interp_backend;
    }
    c->backend_ms = now_ms() - t0;
    if (dc.dir) {
        char *desc = c->backend->describe(c->state);
        if (desc) write_file(dc.dir, "backend.txt", desc);
        free(desc);
    }
    *out = c;
    return EM_OK;
}

em_status em_compiled_run(em_compiled *c, em_tensor *const *in, int n_in, em_tensor **out,
                          int n_out) {
    return c->backend->run(c->state, in, n_in, out, n_out);
}

void em_compiled_free(em_compiled *c) {
    if (!c) return;
    free(c->passes);
    free(c->pass_report);
    if (c->backend && c->state) c->backend->free(c->state);
    em_ir_graph_free(c->graph);
    em_free(c);
}

const char *em_compiled_backend(const em_compiled *c) { return c->backend->name; }
const char *em_compiled_dump_path(const em_compiled *c) { return c->dump_path; }
const char *em_compiled_note(const em_compiled *c) { return c->note; }
const char *em_compiled_code_id(const em_compiled *c) {
    return c->backend->code_id ? c->backend->code_id(c->state) : NULL;
}
bool em_compiled_dynamic_sizes(const em_compiled *c) { return c->dynamic_sizes; }
const em_ir_graph *em_compiled_graph(const em_compiled *c) { return c->graph; }
void em_compiled_times(const em_compiled *c, double *passes_ms, double *backend_ms) {
    *passes_ms = c->passes_ms;
    *backend_ms = c->backend_ms;
}
char *em_compiled_describe(const em_compiled *c) { return c->backend->describe(c->state); }
const char *em_compiled_passes(const em_compiled *c) { return c->passes ? c->passes : ""; }
const char *em_compiled_pass_report(const em_compiled *c) { return c->pass_report ? c->pass_report : ""; }
char *em_compiled_profile(const em_compiled *c) { return c->backend->profile(c->state); }

#ifndef EMBER_HAVE_LLVM
const em_backend *em_llvm_backend(void) { return NULL; }
#endif
