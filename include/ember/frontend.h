/*
 * frontend.h - tracing, guards and the compile driver behind @ember.compile.
 *
 * Flow of a compiled call (em_function_call drives it; the Python binding
 * only turns arguments and results into C and back):
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
 * Ownership: em_tracer, em_guards, em_compiled and em_function are unique
 * handles with new/free pairs. Tensors passed in are borrowed unless stated.
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
/* True while this thread is tracing; the tracer itself, or NULL. */
bool em_trace_active(void);
em_tracer *em_trace_current(void);
/* While this thread traces, the caller's tensor that argument t stands for
 * (em_trace_add_input's `original`: where autograd accumulates t's
 * gradient), else NULL. */
const em_tensor *em_trace_original(const em_tensor *t);
/* Registers `t` as the next graph input (call before the function runs).
 * `original` (or NULL) is the caller's tensor when t is a proxy of it: the
 * autograd engine accumulates into the original's .grad. */
em_status em_trace_add_input(em_tracer *tr, em_tensor *t, const char *name, const em_tensor *original);
/* Registers `t`, a tensor the caller made during the trace, as a graph input
 * the caller supplies anew at every call (a learning rate read from an
 * optimizer's param group), named `name` in the graph ("lr"; NULL:
 * "external<i>"). Its index among the captures, or -1. */
int em_trace_add_external(em_tracer *tr, em_tensor *t, const char *name);
/* Keeps a copy of every captured tensor as it was before the call
 * (em_capture.snapshot: the state an ahead-of-time export embeds and puts
 * back): known[0..n) (a model's parameters and buffers, an optimizer's
 * state) are copied now, since the function may write one before reading
 * it; any other when the trace first meets it. */
em_status em_trace_snapshot_captures(em_tracer *tr, em_tensor *const *known, int n);
/* Marks the trace as failed; the first reason given is kept. */
void em_trace_fail(em_tracer *tr, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* How many tensors created during the trace are still alive besides
 * `outputs` and the gradients it left in .grad: state the function kept
 * (an optimizer's moments, a cached buffer) that a graph could not
 * recreate. A caller may collect garbage and ask again. */
int em_trace_count_escapes(em_tracer *tr, em_tensor *const *outputs, int n_out);

/* Graph inputs after the arguments. */
typedef enum em_capture_kind {
    EM_CAPTURE_TENSOR,   /* a tensor from outside (parameter, buffer, optimizer state), by identity */
    EM_CAPTURE_GRAD,     /* the .grad of graph input `owner`, whichever tensor it is at call time */
    EM_CAPTURE_EXTERNAL, /* supplied by the caller at every call (em_trace_add_external) */
    EM_CAPTURE_GRAD_OUTPUT, /* a joint trace's gradient of result `owner` (em_trace_backward) */
} em_capture_kind;

typedef struct em_capture {
    em_capture_kind kind;
    em_tensor *tensor;   /* a reference: the tensor as traced */
    int owner;           /* EM_CAPTURE_GRAD: graph input index of the tensor it is the .grad of */
    em_tensor *snapshot; /* a copy of its values when the trace first met it, or NULL
                            (em_trace_snapshot_captures) */
} em_capture;

/* A .grad the function read or replaced: of graph input `owner`. */
enum { EM_SLOT_NONE = -1, EM_SLOT_UNREAD = -2, EM_SLOT_KEEP = -2 };
typedef struct em_grad_slot {
    int owner;
    int initial; /* EM_SLOT_UNREAD: replaced before any read (no guard); EM_SLOT_NONE: was
                    None; else the graph input index of the gradient read */
    int final;   /* EM_SLOT_KEEP: still the tensor it was (updated in place through
                    the write-backs, if at all); EM_SLOT_NONE: set to None; else the
                    graph result index holding the new gradient */
} em_grad_slot;

/* A view of a graph input, as the trace saw it (em_trace_result's
 * returned_views): it holds for an input of the shape and strides traced. */
typedef struct em_returned_view {
    int write;      /* the write (em_trace_result.writes) whose input it views; -1: none */
    int64_t offset; /* elements past the input's own offset */
    int ndim, input_ndim;
    int64_t shape[EM_MAX_DIMS], strides[EM_MAX_DIMS];
    int64_t input_shape[EM_MAX_DIMS], input_strides[EM_MAX_DIMS];
} em_returned_view;

/* The view r describes of `input` (a new reference), or NULL when input's
 * shape or strides differ from the traced ones (the caller then keeps the
 * graph's result, equal in values). */
em_tensor *em_returned_view_of(const em_returned_view *r, em_tensor *input);

/* The graph's results, in order: the function's n_out outputs; the values
 * of the value guards; the write-backs; the new gradients of the slots. */
typedef struct em_trace_result {
    em_ir_graph *graph;     /* owned */
    int n_args;             /* graph inputs 0..n_args-1 are the registered args */
    em_capture *captured;   /* n_captured: inputs n_args.. */
    int n_captured;
    int n_out;
    /* Value guards: a host read (.item(), bool(t), .tolist()) made Python
     * act on these values; results n_out.. must equal them, bit for bit,
     * or the call's run is discarded and it runs eagerly. References. */
    em_tensor **value_guards;
    const char **value_guard_what; /* interned: ".item()", "bool(tensor)" */
    int n_value_guards;
    /* Write-backs: the next n_writes results are the new values of the
     * inputs writes[0..n_writes) (graph input indices) that the traced
     * function updated in place; a caller copies them back after a run. */
    int *writes;
    int n_writes;
    /* returned_writes[i]: for output i that is a written input itself, which
     * write it is (so a caller returns that input, updated); else -1.
     * NULL when there are no writes. */
    int *returned_writes;
    /* returned_views[i]: output i is a view of written input write (sharing
     * its memory, as `e.view(4)` after `e.add_(x)`): the caller returns that
     * view of the input, updated, so that it aliases the input as eager's
     * does (the graph's own result is a copy of the values). NULL when no
     * output is such a view; write -1 for outputs that are not. */
    struct em_returned_view *returned_views;
    em_grad_slot *slots;
    int n_slots;
    /* A joint trace (em_trace_backward): the last n_grad_outputs captures
     * are the gradients of results (EM_CAPTURE_GRAD_OUTPUT), and the last
     * n_input_grads graph results the gradients of the graph inputs
     * grad_inputs[0..n_input_grads) (inputs given none have no result). */
    int n_grad_outputs;
    int *grad_inputs, n_input_grads;
    /* The trace failed because the function created state that outlives
     * the call; the next call may find it in place and trace well. */
    bool retry;
} em_trace_result;

/* Makes the trace a joint forward-backward trace: call it with the
 * function's results before em_trace_end when some have autograd history.
 * Runs, and records, the backward from those results to every graph input
 * that requires grad (autograd.grad stopped at the inputs), each result's
 * gradient a new graph input. A failure fails the trace; the results'
 * history stays usable either way. */
#define EM_TRACE_MAX_GRAD_OUTPUTS 256
em_status em_trace_backward(em_tracer *tr, em_tensor *const *outputs, int n_out);
/* Stops tracing and frees the tracer. On success fills *res (release it with
 * em_trace_result_clear). If the trace failed, returns
 * EM_ERR_NOT_IMPLEMENTED with the reason as the error message (and
 * res->retry set when another trace may succeed). */
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
 * device, shape, strides and requires_grad; Python scalars and strings by
 * value. */
em_guards *em_guards_new(const em_arg *args, int n);
void em_guards_free(em_guards *g);
/* True when `args` pass every guard. Otherwise false, and `why` (if not NULL)
 * describes the first guard that failed, e.g. "x: shape [7] != [1024]". */
bool em_guards_check(const em_guards *g, const em_arg *args, int n, char *why, size_t why_size);
/* Do args fail the guards only because sizes changed? True when every
 * argument passes but for tensors of the same rank, dtype, device and
 * requires_grad, both laid out contiguously, whose sizes differ in dims
 * where both are 2 or more (0 and 1 are not sizes like the others: code
 * treats them apart). `varied` (if not NULL) receives those dims, e.g.
 * "x dim 0 (128, then 77)". */
bool em_guards_differ_in_sizes(const em_guards *g, const em_arg *args, int n, char *varied, size_t varied_size);
/* How many arguments the guards describe, and argument i's kind. */
int em_guards_count(const em_guards *g);
em_arg_kind em_guards_kind(const em_guards *g, int i);
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
    const char *guards_text; /* the guards as em_guards_print writes them: dumped with the graph when asked */
    const em_run_spec *spec; /* how the graph runs (em_backend_opts), or NULL */
    /* the passes to run, NULL-terminated; NULL: EMBER_PASSES (comma-
     * separated) when set, else the default pipeline (em_compile_passes) */
    const char *const *passes;
    /* compile for sizes read at run time (em_backend_opts.dynamic_sizes) */
    bool dynamic_sizes;
} em_compile_opts;

typedef struct em_compiled em_compiled;

/* Optimises `graph` (taking ownership) and compiles it for inputs shaped
 * like `examples`. If the chosen backend fails, falls back to the
 * interpreter and records why (em_compiled_note). */
em_status em_compile(em_ir_graph *graph, em_tensor *const *examples, int n_examples,
                     const em_compile_opts *opts, em_compiled **out);
/* Runs the compiled graph: out[] receives the spec's outputs and the
 * spec's effects are applied. EM_ERR_GUARD: a value guard failed and the
 * run stopped before writing any input (the caller runs the call eagerly). */
em_status em_compiled_run(em_compiled *c, em_tensor *const *in, int n_in, em_tensor **out,
                          int n_out);
void em_compiled_free(em_compiled *c);
const char *em_compiled_backend(const em_compiled *c);
/* Where this graph's dump went ("" if not dumped). */
const char *em_compiled_dump_path(const em_compiled *c);
/* Why the preferred backend was not used ("" if it was). */
const char *em_compiled_note(const em_compiled *c);
/* What identifies c's machine code (compiled executables with equal ids
 * share it), or NULL: its backend generates none. */
const char *em_compiled_code_id(const em_compiled *c);
/* Was c compiled for sizes read at run time? */
bool em_compiled_dynamic_sizes(const em_compiled *c);
const em_ir_graph *em_compiled_graph(const em_compiled *c);
/* Milliseconds spent in the passes and in the backend's compile. */
void em_compiled_times(const em_compiled *c, double *passes_ms, double *backend_ms);
/* The passes that ran ("canonicalize, cse, ...") and what they reported
 * (lines; "" when nothing). Borrowed. */
const char *em_compiled_passes(const em_compiled *c);
const char *em_compiled_pass_report(const em_compiled *c);
/* What the backend made (its kernels), as malloc'd text; NULL on failure. */
char *em_compiled_describe(const em_compiled *c);
/* Per-node times of its profiled runs (EMBER_PROFILE), slowest first, as
 * malloc'd text; NULL when none was profiled. */
char *em_compiled_profile(const em_compiled *c);

/* ---- compiled functions: the driver behind @ember.compile ---- */

/* Compilation switch for every compiled function (EMBER_COMPILE=0 starts
 * it off): off, calls run eagerly, for debugging. */
bool em_compile_enabled(void);
void em_compile_set_enabled(bool on);
/* The passes every graph goes through, NULL-terminated. */
const char *const *em_compile_passes(void);
/* Per-node profiling of compiled runs (EMBER_PROFILE=1 starts it on). */
void em_compile_set_profiling(bool on);
bool em_compile_profiling(void);

/* What the host language (the Python binding; a C program) provides to a
 * compiled function. Every member may be NULL. A specialisation keeps the
 * `data` its host handed em_function_trace_end: the state its trace read
 * from host objects (dict items taken as constants, inputs read from them
 * at every call) and the structure of its result. */
typedef struct em_function_host {
    em_loc_fn loc; /* the user's source line of each traced op */
    void *loc_ctx;
    /* 1 when the host state `data` recorded still holds, 0 when not, -1
     * when checking failed (the host's error is pending). */
    int (*state_holds)(void *data);
    /* Stores, at their capture index in captured[], new references to the
     * inputs the host supplies at every call (em_trace_add_external).
     * EM_ERR_HOST with the host's error pending on failure. */
    em_status (*externals)(void *data, em_tensor **captured);
    /* Lines describing `data` for explain (first_input: the graph input
     * index of capture 0), malloc'd, or NULL. */
    char *(*describe)(void *data, int first_input);
    void (*release)(void *data);
    /* Called around a compiled run that reaches no host code, so that other
     * host threads may run meanwhile (not around a graph drawing random
     * numbers: the global generator is the host lock's). */
    void *(*unlock)(void);
    void (*relock)(void *token);
    /* Frees unreachable host objects (a reference cycle may keep a tensor
     * alive that a trace would otherwise take for state the function kept). */
    void (*collect)(void);
    /* After state_holds(data) said 0: what no longer holds, with where the
     * trace read it ("global SCALE (train.py:12)"), borrowed, or NULL. */
    const char *(*state_miss)(void *data);
} em_function_host;

typedef struct em_function em_function;
#define EM_FUNCTION_MAX_ARGS 64    /* flattened arguments of one call */
#define EM_FUNCTION_MAX_OUTPUTS 256 /* tensors in one result */

/* A compiled function: its specialisations (each with its guards, graph,
 * executable, write-backs, value guards and .grad slots), the cache limit
 * (< 0: EMBER_CACHE_LIMIT, default 8) and counters. `name` names its graphs
 * and messages; `host` is copied. NULL when memory runs out. */
em_function *em_function_new(const char *name, int cache_limit, const em_function_host *host);
void em_function_free(em_function *f);
/* The passes its graphs go through from now on (names[0..n), copied; n < 0:
 * the default, see em_compile_opts). An error naming an unknown pass. */
em_status em_function_set_passes(em_function *f, const char *const *names, int n);

typedef enum em_call_kind {
    EM_CALL_COMPILED, /* a specialisation ran: outs[0..n_out), and its `data` */
    EM_CALL_EAGER,    /* the host runs the function itself; `reason` says why */
    EM_CALL_TRACE,    /* the host runs the function on proxies[] (argument i's
                         proxy, or NULL for a non-tensor) while a trace records
                         it, then calls em_function_trace_end (or _abort when
                         the function raised); the call's result is that run's */
} em_call_kind;

typedef struct em_call {
    em_call_kind kind;
    em_tensor *outs[EM_FUNCTION_MAX_OUTPUTS]; /* COMPILED: new references */
    int n_out;
    void *data;          /* COMPILED: the specialisation's host data */
    const char *reason;  /* EAGER: why; valid until the function's next call */
    const char *warning; /* the host shows it once (a fallback's first time,
                            the cache limit); valid until the next call */
    em_tensor **proxies; /* TRACE: per argument, borrowed */
    struct em_pending_trace *trace; /* TRACE: private */
} em_call;

/* One call with arguments args[0..n) (n <= EM_FUNCTION_MAX_ARGS; the
 * host's flattened arguments; grad mode is added by the driver): runs the
 * first specialisation whose guards, captured tensors, host state and
 * value guards accept it, or says to trace or to run eagerly. An error
 * status when a compiled run failed (an op's error) or a host callback did
 * (EM_ERR_HOST). */
em_status em_function_call(em_function *f, const em_arg *args, int n, em_call *call);
/* Ends the trace of `call`: outs[0..n_out) are the tensors the function
 * returned (borrowed); `data` the host's record for the specialisation
 * (taken: released through host->release when not kept), or, with `why`
 * non-NULL, the reason its result cannot come from a graph. Compiles
 * unless the trace failed; call->warning may be set. */
em_status em_function_trace_end(em_function *f, em_call *call, em_tensor *const *outs, int n_out,
                                void *data, const char *why);
/* Ends the trace of a call whose function raised: nothing is cached. */
void em_function_trace_abort(em_function *f, em_call *call);
/* Records a call the host ran eagerly for its own `reason` (arguments the
 * guards cannot describe); call->warning is set the first time. */
void em_function_eager(em_function *f, const char *reason, em_call *call);

/* 1 when specialisation i would accept args (its guards, captured tensors,
 * sharing and host state), 0 when not, -1 on a host error. Runs nothing:
 * for timing the guards. */
int em_function_check(em_function *f, int i, const em_arg *args, int n);

typedef struct em_function_stats {
    int64_t compiled_calls; /* calls a compiled specialisation ran */
    int64_t eager_calls, traces;
    int64_t misses;               /* calls no specialisation accepted */
    int64_t value_guard_failures; /* runs discarded by a value guard */
    int retried_traces, specializations, cache_limit;
    int code_objects; /* specialisations with machine code of their own (the
                         others run one of theirs: dynamic shapes) */
    int n_fallbacks;  /* reasons calls ran eagerly: em_function_fallback */
    int dynamic;      /* em_function_set_dynamic's mode */
    bool sizes_vary;  /* compiles are for sizes read at run time now */
    const char *varying; /* which dims were seen to vary (borrowed; "" when none) */
} em_function_stats;
void em_function_stats_get(const em_function *f, em_function_stats *s);
/* Fallback reason i and how many calls ran eagerly for it (borrowed). */
const char *em_function_fallback(const em_function *f, int i, int64_t *count);

/* What the latest call did: "compiled", "traced" or "eager" (NULL before
 * any call), the specialisation that ran or was made (-1: none), and why
 * it ran eagerly. Borrowed. */
typedef struct em_last_call {
    const char *event;
    int specialization;
    const char *reason;
} em_last_call;
void em_function_last_call(const em_function *f, em_last_call *lc);

/* Specialisation i for explain: its backend ("llvm", "interp"; "pending":
 * traced, compiled when a call matches it again; "eager": not compilable,
 * for `reason`), and its texts (malloc'd, NULL when there is none). */
typedef struct em_spec_info {
    const char *backend, *reason, *note, *dump_path; /* borrowed */
    const char *passes, *pass_report;                /* borrowed; "" when not compiled */
    int n_captured;
    double trace_ms, passes_ms, backend_ms;
    char *guards, *traced_ir, *graph, *kernels, *state, *profile;
    /* results that require grad: the backward graph after its passes and
     * its kernels (malloc'd), and what the partition saved and recomputed
     * (borrowed); NULL and "" otherwise */
    char *backward_graph, *backward_kernels, *backward_profile;
    const char *partition;
    /* compiled for sizes read at run time; the specialisation whose machine
     * code it runs (-1: its own) */
    bool dynamic_sizes;
    int shares_code_with;
} em_spec_info;
em_status em_function_spec(const em_function *f, int i, em_spec_info *info);
void em_spec_info_clear(em_spec_info *info);
/* Forgets every specialisation and counter. */
void em_function_reset(em_function *f);
/* Dynamic shapes, as torch.compile's `dynamic`: mode < 0 (None): once a
 * call misses only because sizes changed (em_guards_differ_in_sizes), or
 * passes a tensor with dims marked dynamic, later specialisations are
 * compiled for sizes read at run time, so that one graph at other sizes
 * runs the same machine code: each new size costs a trace and a memory
 * plan, not a compile, and does not count against the cache limit (up to
 * 256 such); 0: never; 1: from the first call. */
void em_function_set_dynamic(em_function *f, int mode);
/* The dims of t marked dynamic (ember.compiler.mark_dynamic), a bit each,
 * in its EM_LAYER_COMPILE word (tensor.h): a compiled function called
 * with t compiles for sizes read at run time. Not inherited by views or
 * results. */
static inline uint32_t em_tensor_dynamic_dims(const em_tensor *t) {
    return (uint32_t)t->layer_state[EM_LAYER_COMPILE];
}
static inline void em_tensor_mark_dynamic(em_tensor *t, int dim) {
    t->layer_state[EM_LAYER_COMPILE] |= (uintptr_t)1 << dim;
}

/* ---- ahead of time (aot/aot.c) ---- */

/* What ember.aot.compile asks for. */
typedef struct em_aot_opts {
    const char *path; /* the shared object, "out/model.so"; its header is
                         "out/model.h", external weights "out/model.safetensors" */
    bool external_weights;
    /* names of the state, by identity: tensor named[i] is names[i] (a
     * state_dict key, "optimizer.state.fc.weight.exp_avg"); others are
     * called "captured.<i>" */
    em_tensor *const *named;
    const char *const *names;
    int n_named;
    const char *runtime_dir; /* the AOT runtime's libraries and headers (libember_aot.a ...,
                                include/ember/aot.h) */
    const char *cc;          /* the C compiler driver that links (NULL: $CC, else cc) */
    const char *link_flags;  /* extra flags for the link, or NULL */
} em_aot_opts;

/* Makes the next traced call of f an export ahead of time: the call runs
 * eagerly, as a first call does, while its trace is recorded; then,
 * instead of compiling the graph for this process, writes the shared
 * object opts->path and its header, and puts the state the call changed
 * back as it was (the captured tensors' values, .grads, the random
 * stream): the shared object embeds that state, from before the call.
 * opts is copied. */
em_status em_function_export_next(em_function *f, const em_aot_opts *opts);
/* After that call: EM_OK when the shared object was written; else an
 * error saying why not (the trace's reason, or the export's). */
em_status em_function_export_status(const em_function *f);

/* The interpreter as a backend (always available). */


#ifdef __cplusplus
}
#endif
#endif
