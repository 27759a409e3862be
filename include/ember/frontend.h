/*
 * frontend.h - tracing, guards and the compile driver behind @ember.compile.
 *
 * Flow of a compiled call (python/csrc/compiled_function.c drives it):
 *   1. check each cached specialisation's guards against the call's args;
 *      on a hit, run its executable;
 *   2. on a miss, trace: em_trace_begin, register tensor args as inputs, run
 *      the function eagerly (every op reaches the tracer through the
 *      runtime's trace hook), em_trace_end with the results;
 *   3. em_compile: passes, then a backend; the result is cached under guards
 *      made from the args.
 * A trace that meets something it cannot capture (a host sync, a random op,
 * a tensor made from Python data) fails with a reason; the call has already
 * run eagerly, so its result stands and later calls run eagerly too.
 *
 * Ownership: em_tracer, em_guards and em_compiled are unique handles with
 * new/free pairs. Tensors passed in are borrowed unless stated.
 */
#ifndef EMBER_FRONTEND_H
#define EMBER_FRONTEND_H

#include "ember/backend.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- tracing ---- */

typedef struct em_tracer em_tracer;

/* Reports the user's source line calling an op right now; false if unknown.
 * *file must stay valid until the next call. */
typedef bool (*em_loc_fn)(void *ctx, const char **file, int *line);

/* Starts tracing this thread's ops into a graph called `name`. NULL on
 * failure. Traces do not nest: tracing while tracing is an error. */
em_tracer *em_trace_begin(const char *name, em_loc_fn loc, void *loc_ctx);
/* True while this thread is tracing. */
bool em_trace_active(void);
/* Registers `t` as the next graph input (call before the function runs). */
em_status em_trace_add_input(em_tracer *tr, em_tensor *t, const char *name);
/* Marks the trace as failed; the first reason given is kept. */
void em_trace_fail(em_tracer *tr, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

typedef struct em_trace_result {
    em_ir_graph *graph;   /* owned */
    int n_args;           /* graph inputs 0..n_args-1 are the registered args */
    em_tensor **captured; /* n_captured new references: inputs n_args.. */
    int n_captured;
    /* Write-backs: the graph's last n_writes results are the new values of
     * the inputs writes[0..n_writes) (graph input indices) that the traced
     * function updated in place; a caller copies them back after a run. */
    int *writes;
    int n_writes;
    /* returned_writes[i]: for result i that is a written input itself, which
     * write it is (so a caller returns that input, updated); else -1.
     * NULL when there are no writes. */
    int *returned_writes;
} em_trace_result;

/* Stops tracing and frees the tracer. On success fills *res (release it with
 * em_trace_result_clear). If the trace failed, returns
 * EM_ERR_NOT_IMPLEMENTED with the reason as the error message. */
em_status em_trace_end(em_tracer *tr, em_tensor *const *outputs, int n_out, em_trace_result *res);
void em_trace_result_clear(em_trace_result *res);

/* ---- guards ---- */

typedef enum em_arg_kind {
    EM_ARG_TENSOR,
    EM_ARG_INT,
    EM_ARG_FLOAT,
    EM_ARG_BOOL,
    EM_ARG_NONE,
    EM_ARG_STR,
} em_arg_kind;

/* One argument of a call, as the guards see it. */
typedef struct em_arg {
    em_arg_kind kind;
    const char *name; /* for messages: "x", "lr" */
    em_tensor *tensor;
    int64_t i;
    double f;
    const char *s;
    size_t slen;
} em_arg;

typedef struct em_guards em_guards;

/* Guards that accept exactly calls like this one: per tensor its dtype,
 * device, shape and strides; Python scalars and strings by value. */
em_guards *em_guards_new(const em_arg *args, int n);
void em_guards_free(em_guards *g);
/* True when `args` pass every guard. Otherwise false, and `why` (if not NULL)
 * describes the first guard that failed, e.g. "x: shape [7] != [1024]". */
bool em_guards_check(const em_guards *g, const em_arg *args, int n, char *why, size_t why_size);
/* The guards as text (for dumps and explain); malloc'd. */
char *em_guards_print(const em_guards *g);

/* ---- compiling ---- */

enum {
    EM_DUMP_IR = 1u << 0,     /* the traced graph and the final one       */
    EM_DUMP_PASSES = 1u << 1, /* the graph after every pass               */
    EM_DUMP_LLVM = 1u << 2,   /* generated LLVM IR, before and after opt  */
    EM_DUMP_GUARDS = 1u << 3, /* the guards of each specialisation        */
    EM_DUMP_DOT = 1u << 4,    /* the final graph as Graphviz (final.dot)  */
};

/* EMBER_DUMP (a list like "ir,passes,llvm" or "all") as a mask, and the
 * directory (EMBER_DUMP_DIR, default "ember_dump"). */
unsigned em_dump_mask_from_env(void);
const char *em_dump_dir_from_env(void);

typedef struct em_compile_opts {
    unsigned dump_mask;
    const char *dump_dir;
    const char *backend; /* "llvm", "interp" or NULL for the best built */
    const em_guards *guards; /* dumped with the graph when asked */
} em_compile_opts;

typedef struct em_compiled em_compiled;

/* Optimises `graph` (taking ownership) and compiles it for inputs shaped
 * like `examples`. If the chosen backend fails, falls back to the
 * interpreter and records why (em_compiled_note). */
em_status em_compile(em_ir_graph *graph, em_tensor *const *examples, int n_examples,
                     const em_compile_opts *opts, em_compiled **out);
em_status em_compiled_run(em_compiled *c, em_tensor *const *in, int n_in, em_tensor **out,
                          int n_out);
void em_compiled_free(em_compiled *c);
const char *em_compiled_backend(const em_compiled *c);
/* Where this graph's dump went ("" if not dumped). */
const char *em_compiled_dump_path(const em_compiled *c);
/* Why the preferred backend was not used ("" if it was). */
const char *em_compiled_note(const em_compiled *c);
const em_ir_graph *em_compiled_graph(const em_compiled *c);
/* Milliseconds spent in the passes and in the backend's compile. */
void em_compiled_times(const em_compiled *c, double *passes_ms, double *backend_ms);
/* What the backend made (its kernels), as malloc'd text; NULL on failure. */
char *em_compiled_describe(const em_compiled *c);

/* The interpreter as a backend (always available). */
const em_backend *em_interp_backend(void);

#ifdef __cplusplus
}
#endif
#endif
