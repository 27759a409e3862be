/*
 * function.c - compiled functions: the specialisation cache behind
 * @ember.compile and the protocol of one call (include/ember/frontend.h).
 *
 * A call (em_function_call):
 *   - compilation disabled, or this thread already tracing (a compiled
 *     function called from one being traced: its ops join that trace): the
 *     host runs the function eagerly;
 *   - a cached specialisation accepts the call: its executable runs (or the
 *     host runs the function eagerly if it could not be compiled);
 *   - otherwise, below the cache limit: a trace (the host runs the function
 *     on proxies while the tracer records; em_function_trace_end compiles
 *     and caches the graph under guards made from the call);
 *   - at the limit: eagerly, with a warning once.
 * A specialisation accepts a call when the call passes its guards (the
 * arguments and grad mode), its captured tensors still have the metadata
 * they were traced with, the .grads it found None still are, the host state
 * its trace read still holds (host->state_holds), and its inputs share
 * memory as the traced ones did; then its value guards must hold during the
 * run, or the run is discarded (nothing written) and the next one is tried.
 *
 * A trace runs the function on proxies of its tensor arguments: new tensor
 * objects viewing the same memory. So every use the trace sees of an
 * argument really came through that argument, even when the caller passes
 * one tensor twice or passes a tensor the function also reaches as a global
 * (which is then captured on its own).
 *
 * Nothing here knows Python: the host supplies what only it can
 * (em_function_host), and warnings come back as text for it to show.
 */
#define _POSIX_C_SOURCE 200809L /* clock_gettime, strdup */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ember/alloc.h"
#include "ember/autograd.h"
#include "ember/frontend.h"
#include "ember/passes.h"
#include "ember/random.h"
#include "ember/strbuf.h"
#include "../aot/aot_export.h"
#include "../driver/compiled_autograd.h"

#define MAX_CAPTURED 4096 /* graph inputs besides the arguments */
#define MAX_IN (EM_FUNCTION_MAX_ARGS + 1 + MAX_CAPTURED)
/* How many traces that failed only because the function made state that
 * outlives the call (em_trace_result.retry) a function gets before its
 * calls like that one run eagerly for good. */
#define MAX_RETRIES 3
/* Specialisations beyond the cache limit that run the machine code of
 * another (dynamic shapes: the same graph at another size costs a trace
 * and a memory plan, not a compile). */
#define MAX_INSTANCES 256

/* ---- switches ---- */

static int enabled = -1; /* -1: not read from EMBER_COMPILE yet */

bool em_compile_enabled(void) {
    int e = __atomic_load_n(&enabled, __ATOMIC_RELAXED);
    if (e < 0) {
        const char *env = getenv("EMBER_COMPILE");
        e = !(env && strcmp(env, "0") == 0);
        int unread = -1;
        __atomic_compare_exchange_n(&enabled, &unread, e, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED);
        e = __atomic_load_n(&enabled, __ATOMIC_RELAXED);
    }
    return e == 1;
}

void em_compile_set_enabled(bool on) { __atomic_store_n(&enabled, on ? 1 : 0, __ATOMIC_RELAXED); }
const char *const *em_compile_passes(void) { return em_default_pipeline; }
void em_compile_set_profiling(bool on) { em_interp_set_profiling(on); }
bool em_compile_profiling(void) { return em_interp_profiling(); }

/* ---- the function and its specialisations ---- */

typedef struct spec {
    em_guards *guards;
    em_compiled *compiled; /* NULL: pending, or runs eagerly for `reason` */
    /* A traced graph not compiled yet: its own run made its guards fail for
     * the next call (it found a .grad None and left one there, as a
     * training step's first call does), so it compiles only if a call
     * matches it again. */
    em_ir_graph *pending;
    em_capture *captured; /* graph inputs after the arguments */
    int n_captured;
    em_guards *captured_guards; /* their metadata then: a parameter whose .data was
                                   swapped (model.double()) needs a new trace */
    em_arg *cap_args;           /* [n_captured]: scratch for checking them */
    em_grad_slot *slots;        /* .grad states guarded and set */
    int n_slots;
    em_tensor **value_guards; /* values host reads saw (results n_out..) */
    char **value_guard_what;
    int n_value_guards;
    int n_out;
    int *writes, n_writes; /* inputs the function writes into */
    int *returned_writes;  /* [n_out]: results that are written inputs (-1: none) */
    em_returned_view *returned_views; /* [n_out]: results that are views of written inputs */
    /* [n_sharing] per graph input: the first earlier input sharing its
     * memory, or -1, as traced; guarded, since a graph traced on separate
     * tensors reads and writes them as separate (see sharing_of) */
    int *sharing, n_sharing;
    void *data; /* the host's */
    char reason[512];
    double trace_ms;  /* the traced call (an eager run with recording) */
    char *traced_ir;  /* the graph as traced, before the passes */
    bool draws_random; /* runs holding the host's lock */
    int index;         /* in the function's list */
    /* Results that require grad (a joint trace): which results have
     * gradients, and of which graph inputs the graph's last results are the
     * gradients, until compiled; then the backward, and the number of
     * values the forward returns for it after the function's results. */
    int *grad_outputs, n_grad_outputs;
    int *grad_inputs, n_grad_inputs;
    em_backward_program *backward;
    int n_saved;
    /* Compiled for sizes read at run time (dynamic shapes), and the
     * specialisation whose machine code it runs (-1: its own). */
    bool dynamic_sizes;
    int shares_code_with;
} spec;

/* Where a specialisation's results past the function's own begin (value
 * guards, write-backs, .grads): after the values saved for its backward. */
static int first_extra(const spec *s) { return s->n_out + s->n_saved; }

/* A reason calls run eagerly: how many did, and whether the host was
 * told (once per reason per function). */
typedef struct {
    char *reason;
    int64_t count;
    bool warned;
} fallback;

struct em_function {
    char name[128];
    em_function_host host;
    int cache_limit;
    /* Each specialisation has its own allocation: a run that released the
     * host's lock keeps its pointer while another call adds one. */
    spec **specs;
    int n_specs;
    bool warned_limit;
    int64_t n_compiled_calls, n_eager_calls, n_traces, n_misses, n_value_guard_failures;
    int n_retries;
    fallback *fallbacks;
    int n_fallbacks;
    const char *last_event; /* the latest call: "compiled", "traced" or "eager" */
    int last_spec;
    char last_reason[1024];
    char warning[1200];
    char **passes; /* NULL-terminated; NULL: the default pipeline */
    /* Dynamic shapes: ember.compile(dynamic=) (-1: None, sizes found to
     * vary make later compiles dynamic; 0: never; 1: from the first);
     * whether compiles are for sizes read at run time now, and why; set
     * when a specialisation beyond the cache limit needed code of its own
     * (no more such traces). */
    int dynamic;
    bool sizes_vary;
    char varying[512];
    bool instances_exhausted;
    /* em_function_export_next: the export asked for (NULL: none), the
     * random stream before its call, and how it went */
    struct export_request *export;
};

/* An export ahead of time asked for, with its own copies of the options. */
struct export_request {
    em_aot_opts opts;
    em_tensor **named;
    char **names;
    bool traced;      /* its call began tracing */
    bool done;        /* the shared object was written */
    em_rng_state rng; /* before the traced call */
    char why[1024];   /* why not, when it was not */
};

/* A trace in progress between em_function_call and its end. The arguments
 * are the host's (valid until the trace ends); proxies are references. */
struct em_pending_trace {
    em_tracer *tr;
    em_arg args[EM_FUNCTION_MAX_ARGS + 1];
    int n;
    em_tensor *proxies[EM_FUNCTION_MAX_ARGS + 1];
    struct timespec t0;
};

em_function *em_function_new(const char *name, int cache_limit, const em_function_host *host) {
    em_function *f = em_calloc(1, sizeof *f);
    if (!f) return NULL;
    snprintf(f->name, sizeof f->name, "%s", name ? name : "fn");
    if (host) f->host = *host;
    if (cache_limit < 0) {
        const char *env = getenv("EMBER_CACHE_LIMIT");
        cache_limit = env && *env ? atoi(env) : 8;
    }
    f->cache_limit = cache_limit;
    f->last_spec = -1;
    f->dynamic = -1;
    return f;
}

static void spec_clear(em_function *f, spec *s) {
    em_ir_graph_free(s->pending);
    if (s->data && f->host.release) f->host.release(s->data);
    em_free(s->slots);
    em_free(s->cap_args);
    for (int i = 0; i < s->n_value_guards; i++) {
        em_tensor_release(s->value_guards[i]);
        em_free(s->value_guard_what[i]);
    }
    em_free(s->value_guards);
    em_free(s->value_guard_what);
    em_free(s->writes);
    em_free(s->returned_writes);
    em_free(s->returned_views);
    em_free(s->sharing);
    em_guards_free(s->captured_guards);
    free(s->traced_ir);
    em_guards_free(s->guards);
    em_compiled_free(s->compiled);
    em_backward_program_release(s->backward);
    em_free(s->grad_outputs);
    em_free(s->grad_inputs);
    for (int i = 0; i < s->n_captured; i++) {
        em_tensor_release(s->captured[i].tensor);
        em_tensor_release(s->captured[i].snapshot);
    }
    em_free(s->captured);
    memset(s, 0, sizeof *s);
}

void em_function_reset(em_function *f) {
    for (int i = 0; i < f->n_specs; i++) {
        spec_clear(f, f->specs[i]);
        em_free(f->specs[i]);
    }
    f->n_specs = 0;
    f->warned_limit = false;
    for (int i = 0; i < f->n_fallbacks; i++) free(f->fallbacks[i].reason);
    f->n_fallbacks = 0;
    f->n_compiled_calls = f->n_eager_calls = f->n_traces = f->n_misses = 0;
    f->n_value_guard_failures = 0;
    f->n_retries = 0;
    f->last_event = NULL;
    em_function_set_dynamic(f, f->dynamic); /* (what was seen to vary is forgotten too) */
}

void em_function_set_dynamic(em_function *f, int mode) {
    f->dynamic = mode < 0 ? -1 : mode > 0;
    f->sizes_vary = f->dynamic == 1;
    snprintf(f->varying, sizeof f->varying, "%s", f->dynamic == 1 ? "every dim (dynamic=True)" : "");
    f->instances_exhausted = false;
}

/* Specialisations with machine code of their own (what the cache limit
 * counts). */
static int n_code(const em_function *f) {
    int n = 0;
    for (int i = 0; i < f->n_specs; i++) n += f->specs[i]->shares_code_with < 0;
    return n;
}

/* After a call no specialisation accepted: do sizes vary? When the call
 * differs from one only in sizes (em_guards_differ_in_sizes), or marks
 * dims dynamic (ember.compiler.mark_dynamic), compiles from now on read
 * sizes at run time. */
static void note_varying_sizes(em_function *f, const em_arg *a, int n) {
    if (f->dynamic == 0 || f->sizes_vary) return;
    char dims[400] = "";
    for (int k = 0; k < n; k++) {
        const em_tensor *t = a[k].kind == EM_ARG_TENSOR ? a[k].tensor : NULL;
        for (int d = 0; t && d < t->ndim; d++)
            if (em_tensor_dynamic_dims(t) >> d & 1) {
                size_t len = strlen(dims);
                snprintf(dims + len, sizeof dims - len, "%s%s dim %d (mark_dynamic)", len ? "; " : "",
                         a[k].name ? a[k].name : "?", d);
            }
    }
    for (int i = 0; i < f->n_specs && !dims[0]; i++)
        em_guards_differ_in_sizes(f->specs[i]->guards, a, n, dims, sizeof dims);
    if (!dims[0]) return;
    f->sizes_vary = true;
    snprintf(f->varying, sizeof f->varying, "%s", dims);
}

static void free_passes(char **passes) {
    for (int i = 0; passes && passes[i]; i++) free(passes[i]);
    free(passes);
}

em_status em_function_set_passes(em_function *f, const char *const *names, int n) {
    char **list = NULL;
    if (n >= 0) {
        for (int i = 0; i < n; i++)
            if (!em_pass_find(names[i])) return em_error(EM_ERR_VALUE, "ember.compile: unknown pass '%s'", names[i]);
        if (!(list = calloc((size_t)n + 1, sizeof *list))) return em_error(EM_ERR_NOMEM, "out of memory");
        for (int i = 0; i < n; i++)
            if (!(list[i] = strdup(names[i]))) {
                free_passes(list);
                return em_error(EM_ERR_NOMEM, "out of memory");
            }
    }
    free_passes(f->passes);
    f->passes = list;
    return EM_OK;
}

static void export_free(struct export_request *x) {
    if (!x) return;
    for (int i = 0; i < x->opts.n_named; i++) {
        em_tensor_release(x->named[i]);
        free(x->names[i]);
    }
    free(x->named);
    free(x->names);
    free((char *)x->opts.path);
    free((char *)x->opts.runtime_dir);
    free((char *)x->opts.cc);
    free((char *)x->opts.link_flags);
    free(x);
}

void em_function_free(em_function *f) {
    if (!f) return;
    em_function_reset(f);
    export_free(f->export);
    free_passes(f->passes);
    free(f->specs);
    free(f->fallbacks);
    em_free(f);
}

/* ---- counters and warnings ---- */

/* The record of `reason`, made if new; NULL when memory runs out (the
 * records are best effort: they count and warn, they decide nothing). */
static fallback *fallback_of(em_function *f, const char *reason) {
    for (int i = 0; i < f->n_fallbacks; i++)
        if (strcmp(f->fallbacks[i].reason, reason) == 0) return &f->fallbacks[i];
    fallback *fb = realloc(f->fallbacks, (size_t)(f->n_fallbacks + 1) * sizeof *fb);
    char *copy = strdup(reason);
    if (!fb || !copy) {
        free(copy);
        if (fb) f->fallbacks = fb;
        return NULL;
    }
    f->fallbacks = fb;
    fb[f->n_fallbacks] = (fallback){copy, 0, false};
    return &fb[f->n_fallbacks++];
}

/* Sets call->warning, the first time for this reason, to say why calls
 * like this one run eagerly: `how` words it, around the reason (%s). */
static void warn_as(em_function *f, em_call *call, const char *how, const char *reason) {
    fallback *fb = fallback_of(f, reason);
    if (!fb || fb->warned) return;
    fb->warned = true;
    int k = snprintf(f->warning, sizeof f->warning, "ember.compile(%s): ", f->name);
    snprintf(f->warning + k, sizeof f->warning - (size_t)k, how, reason);
    call->warning = f->warning;
}

static void warn_fallback(em_function *f, em_call *call, const char *reason) {
    warn_as(f, call, "running eagerly: %s", reason);
}

/* Counts one more call that did not run compiled code for `reason`. */
static void count_fallback(em_function *f, const char *reason) {
    fallback *fb = fallback_of(f, reason);
    if (fb) fb->count++;
}

/* Records what the current call does (before it runs, so a call that
 * fails is still described). */
static void note_call(em_function *f, const char *event, int spec_index, const char *reason) {
    f->last_event = event;
    f->last_spec = spec_index;
    snprintf(f->last_reason, sizeof f->last_reason, "%s", reason ? reason : "");
    if (strcmp(event, "eager") != 0) return;
    f->n_eager_calls++;
    count_fallback(f, f->last_reason);
}

static em_status eager(em_function *f, em_call *call, int spec_index, const char *reason) {
    note_call(f, "eager", spec_index, reason);
    call->kind = EM_CALL_EAGER;
    call->reason = f->last_reason;
    return EM_OK;
}

/* A call with nothing decided yet. */
static void call_init(em_call *call) {
    call->kind = EM_CALL_EAGER;
    call->n_out = 0;
    call->data = NULL;
    call->reason = "";
    call->warning = NULL;
    call->proxies = NULL;
    call->trace = NULL;
}

void em_function_eager(em_function *f, const char *reason, em_call *call) {
    call_init(call);
    eager(f, call, -1, reason);
    warn_as(f, call, "%s; running eagerly", reason);
}

/* ---- compiling a traced specialisation ---- */

/* How s's graph (of n_results results) runs: the value guards' traced
 * values, then the effects (write-backs, then the .grad slots that
 * change). Free run->expected and run->effects. */
static em_status run_spec_of(const spec *s, int n_results, em_run_spec *run) {
    em_tensor **expected = em_calloc((size_t)(n_results ? n_results : 1), sizeof *expected);
    em_effect *effects = em_malloc((size_t)(s->n_writes + s->n_slots + 1) * sizeof *effects);
    if (!expected || !effects) {
        em_free(expected);
        em_free(effects);
        return EM_ERR_NOMEM;
    }
    int base = first_extra(s);
    for (int j = 0; j < s->n_value_guards; j++) expected[base + j] = s->value_guards[j];
    int n_effects = 0;
    for (int j = 0; j < s->n_writes; j++)
        effects[n_effects++] = (em_effect){EM_EFFECT_WRITE, s->writes[j], base + s->n_value_guards + j, false};
    for (int j = 0; j < s->n_slots; j++)
        if (s->slots[j].final != EM_SLOT_KEEP)
            effects[n_effects++] = (em_effect){EM_EFFECT_GRAD, s->slots[j].owner,
                                               s->slots[j].final >= 0 ? s->slots[j].final + s->n_saved : -1, false};
    *run = (em_run_spec){base, expected, effects, n_effects};
    return EM_OK;
}

/* Compiles s's traced graph (taking it) for inputs shaped like `examples`;
 * when that fails, s runs eagerly from now on and says why. */
static em_status compile_spec_as(em_function *f, spec *s, em_call *call, em_ir_graph *graph,
                                 em_tensor *const *examples, int k, em_compile_opts opts) {
    if (s->n_grad_outputs) { /* a joint graph: split; the backward is compiled here, the forward below */
        em_joint_layout layout = {k,
                                  s->n_out,
                                  graph->body->n_results - s->n_grad_inputs,
                                  s->grad_outputs,
                                  s->n_grad_outputs,
                                  s->grad_inputs,
                                  s->n_grad_inputs};
        em_ir_graph *forward;
        if (em_backward_program_new(f->name, graph, &layout, examples, &opts, &forward, &s->backward) != EM_OK) {
            snprintf(s->reason, sizeof s->reason, "compiling its backward failed: %s", em_last_error());
            snprintf(f->last_reason, sizeof f->last_reason, "%s", s->reason);
            warn_fallback(f, call, s->reason);
            return EM_OK; /* (the specialisation stands, running eagerly) */
        }
        graph = forward;
        s->n_saved = em_backward_program_n_saved(s->backward);
    }
    em_run_spec run;
    if (run_spec_of(s, graph->body->n_results, &run) != EM_OK) {
        em_ir_graph_free(graph);
        snprintf(s->reason, sizeof s->reason, "out of memory compiling");
        return em_error(EM_ERR_NOMEM, "%s: out of memory compiling", f->name);
    }
    opts.spec = &run;
    em_status st = em_compile(graph, examples, k, &opts, &s->compiled); /* (graph taken) */
    em_free((void *)run.expected);
    em_free((void *)run.effects);
    if (st != EM_OK) {
        s->compiled = NULL;
        snprintf(s->reason, sizeof s->reason, "compiling failed: %s", em_last_error());
        snprintf(f->last_reason, sizeof f->last_reason, "%s", s->reason);
        warn_fallback(f, call, s->reason);
        return EM_OK; /* (the specialisation stands, running eagerly) */
    }
    for (const em_ir_node *node = em_compiled_graph(s->compiled)->body->first; node; node = node->next)
        s->draws_random |= (em_op_get(node->op)->flags & EM_F_RANDOM) != 0;
    const char *code = em_compiled_code_id(s->compiled);
    for (int j = 0; code && j < f->n_specs && s->shares_code_with < 0; j++) {
        const spec *o = f->specs[j];
        const char *other = o != s && o->compiled && o->shares_code_with < 0 ? em_compiled_code_id(o->compiled) : NULL;
        if (other && strcmp(code, other) == 0) s->shares_code_with = j;
    }
    if (s->shares_code_with < 0 && n_code(f) > f->cache_limit) f->instances_exhausted = true;
    return EM_OK;
}

static em_status compile_spec(em_function *f, spec *s, em_call *call, em_ir_graph *graph,
                              em_tensor *const *examples, int k) {
    unsigned dump = em_dump_mask_from_env();
    /* (the guards go to the driver as text: it knows no guards) */
    char *guards_text = (dump & EM_DUMP_GUARDS) ? em_guards_print(s->guards) : NULL;
    em_compile_opts opts = {dump, em_dump_dir_from_env(), getenv("EMBER_BACKEND"),
                            guards_text, NULL, (const char *const *)f->passes, s->dynamic_sizes};
    em_status st = compile_spec_as(f, s, call, graph, examples, k, opts);
    free(guards_text);
    return st;
}

/* ---- exporting ahead of time ---- */

em_status em_function_export_next(em_function *f, const em_aot_opts *opts) {
    struct export_request *x = calloc(1, sizeof *x);
    int n = opts->n_named;
    if (!x || !(x->named = calloc((size_t)(n ? n : 1), sizeof *x->named)) ||
        !(x->names = calloc((size_t)(n ? n : 1), sizeof *x->names))) {
        export_free(x);
        return em_error(EM_ERR_NOMEM, "out of memory");
    }
    x->opts = *opts;
    x->opts.path = strdup(opts->path);
    x->opts.runtime_dir = strdup(opts->runtime_dir ? opts->runtime_dir : "");
    x->opts.cc = opts->cc ? strdup(opts->cc) : NULL;
    x->opts.link_flags = opts->link_flags ? strdup(opts->link_flags) : NULL;
    bool ok = x->opts.path && x->opts.runtime_dir && (!opts->cc || x->opts.cc) &&
              (!opts->link_flags || x->opts.link_flags);
    x->opts.n_named = 0;
    for (int i = 0; i < n && ok; i++, x->opts.n_named++) {
        em_tensor_retain(x->named[i] = opts->named[i]);
        ok = (x->names[i] = strdup(opts->names[i])) != NULL;
    }
    x->opts.named = x->named;
    x->opts.names = (const char *const *)x->names;
    if (!ok) {
        export_free(x);
        return em_error(EM_ERR_NOMEM, "out of memory");
    }
    snprintf(x->why, sizeof x->why, "the function was not called");
    export_free(f->export);
    f->export = x;
    return EM_OK;
}

em_status em_function_export_status(const em_function *f) {
    if (!f->export) return em_error(EM_ERR_VALUE, "%s: no export was asked for", f->name);
    if (f->export->done) return EM_OK;
    return em_error(EM_ERR_NOT_IMPLEMENTED, "ember.aot.compile(%s): %s", f->name, f->export->why);
}

/* install's export: s's trace (graph taken) becomes a shared object, then
 * the state the traced call changed is put back. */
static em_status export_spec(em_function *f, spec *s, const struct em_pending_trace *pt, em_ir_graph *graph,
                             em_tensor *const *inputs, int k) {
    struct export_request *x = f->export;
    const char *arg_names[EM_FUNCTION_MAX_ARGS + 1];
    int n_args = 0;
    for (int i = 0; i < pt->n; i++)
        if (pt->args[i].kind == EM_ARG_TENSOR) arg_names[n_args++] = pt->args[i].name;
    em_run_spec run;
    if (run_spec_of(s, graph->body->n_results, &run) != EM_OK) {
        em_ir_graph_free(graph);
        return em_error(EM_ERR_NOMEM, "%s: out of memory exporting", f->name);
    }
    em_aot_trace t = {graph,         inputs,       k,
                      n_args,        arg_names,    s->captured,
                      s->n_captured, s->n_out,     s->slots,
                      s->n_slots,    (const char *const *)s->value_guard_what,
                      &run,          (const char *const *)f->passes};
    em_status st = em_aot_export(&x->opts, &t); /* (graph taken) */
    em_aot_restore(&t);
    em_rng_set_state(x->rng);
    em_free((void *)run.expected);
    em_free((void *)run.effects);
    x->done = st == EM_OK;
    if (st != EM_OK) snprintf(x->why, sizeof x->why, "%s", em_last_error());
    snprintf(s->reason, sizeof s->reason, "exported ahead of time, not compiled here");
    return st;
}

/* ---- does a specialisation accept a call? ---- */

/* s's graph inputs for a call: the tensor arguments, then each capture (a
 * captured tensor itself; the .grad its owner has now; an external's slot,
 * filled at run time). Returns the count. */
static int gather_inputs(const spec *s, const em_arg *a, int n, em_tensor **in) {
    int k = 0;
    for (int i = 0; i < n; i++)
        if (a[i].kind == EM_ARG_TENSOR) in[k++] = a[i].tensor;
    for (int i = 0; i < s->n_captured; i++) {
        const em_capture *c = &s->captured[i];
        in[k] = c->kind == EM_CAPTURE_GRAD ? em_tensor_grad(in[c->owner]) : c->tensor;
        k++;
    }
    return k;
}

/* em_args describing s's captured inputs as a call finds them
 * (in[0..n_captured), or NULL: as traced), written into s->cap_args; a
 * .grad that is None now is an EM_ARG_NONE, which fails its tensor guard.
 * (Calls of one function are serialised by its host, which makes the
 * per-specialisation scratch safe.) */
static em_arg *captured_args(const spec *s, em_tensor *const *in) {
    static const char *const names[] = {"captured tensor 0", "captured tensor 1", "captured tensor 2",
                                        "captured tensor 3", "captured tensor 4+"};
    em_arg *a = s->cap_args;
    for (int i = 0; i < s->n_captured; i++) {
        memset(&a[i], 0, sizeof a[i]);
        a[i].name = s->captured[i].kind == EM_CAPTURE_GRAD ? "a captured .grad" : names[i < 4 ? i : 4];
        a[i].tensor = !in || s->captured[i].kind == EM_CAPTURE_EXTERNAL ? s->captured[i].tensor : in[i];
        a[i].kind = a[i].tensor ? EM_ARG_TENSOR : EM_ARG_NONE;
    }
    return a;
}

/* Input i's first earlier input in[0..i) with the same memory, or -1. A
 * call whose inputs share memory unlike the traced ones (a parameter also
 * passed as an argument, a view of it) fails the guards and traces anew. */
static int sharing_of(em_tensor *const *in, int i) {
    for (int j = 0; in[i] && j < i; j++)
        if (in[j] && in[j]->storage == in[i]->storage) return j;
    return -1;
}

/* Fills in[] for a call of s whose argument guards passed; 1 when its
 * captured inputs, the .grads it found None, the host state it read and
 * the inputs' sharing of memory are as traced, 0 when not, -1 on a host
 * error. *n_in and *n_targs: the input counts. */
static int spec_accepts(em_function *f, const spec *s, const em_arg *a, int n, em_tensor **in,
                        int *n_in, int *n_targs) {
    *n_targs = 0;
    for (int i = 0; i < n; i++) *n_targs += a[i].kind == EM_ARG_TENSOR;
    if (*n_targs > EM_FUNCTION_MAX_ARGS || s->n_captured > MAX_CAPTURED) return 0;
    *n_in = gather_inputs(s, a, n, in);
    if (s->captured_guards &&
        !em_guards_check(s->captured_guards, captured_args(s, in + *n_targs), s->n_captured, NULL, 0))
        return 0;
    for (int i = 0; i < s->n_slots; i++)
        if (s->slots[i].initial == EM_SLOT_NONE && em_tensor_grad(in[s->slots[i].owner])) return 0;
    if (s->data && f->host.state_holds) {
        int ok = f->host.state_holds(s->data);
        if (ok < 0) em_error(EM_ERR_HOST, "%s: checking the state a trace read failed", f->name);
        const char *what = ok == 0 && f->host.state_miss ? f->host.state_miss(s->data) : NULL;
        if (what) snprintf(f->last_reason, sizeof f->last_reason, "the Python value %.400s changed", what);
        if (ok != 1) return ok;
    }
    if (!s->sharing && s->n_sharing == 0) return 1; /* (a specialisation whose trace failed) */
    if (*n_in != s->n_sharing) return 0;
    for (int i = 0; i < *n_in; i++)
        if (sharing_of(in, i) != s->sharing[i]) return 0;
    return 1;
}

static em_arg grad_mode_arg(void) {
    em_arg g;
    memset(&g, 0, sizeof g);
    /* grad mode is a guard like the arguments: with it on, captured tensors
     * that require grad fail a trace that compiles under no_grad */
    g.kind = EM_ARG_BOOL;
    g.name = "(grad mode)";
    g.i = em_grad_enabled();
    /* autocast and the default float dtype are two more: a graph traced
     * under autocast holds its casts, one traced under another default
     * holds that dtype. Folded into one number that is grad mode's own 0
     * or 1 when both are as they start (no autocast, float32), more
     * otherwise, each combination its own. */
    int autocast = em_autocast_dtype();
    em_dtype dflt = em_default_float();
    int64_t state = (autocast + 1) + (int64_t)(EM_DTYPE_COUNT + 1) * (dflt == EM_DTYPE_F32 ? 0 : dflt + 1);
    if (state > 0) {
        g.name = "(grad mode, autocast, default dtype)";
        g.i += 2 * state;
    }
    return g;
}

/* args and grad mode into all[]; the count, or -1 when there are too many. */
static int with_grad_mode(const em_arg *args, int n, em_arg *all) {
    if (n < 0 || n > EM_FUNCTION_MAX_ARGS) return -1;
    memcpy(all, args, (size_t)n * sizeof *all);
    all[n] = grad_mode_arg();
    return n + 1;
}

int em_function_check(em_function *f, int i, const em_arg *args, int n) {
    em_arg all[EM_FUNCTION_MAX_ARGS + 1];
    em_tensor *in[MAX_IN];
    int n_all = with_grad_mode(args, n, all), n_in, n_targs;
    if (i < 0 || i >= f->n_specs || n_all < 0) return 0;
    const spec *s = f->specs[i];
    if (!em_guards_check(s->guards, all, n_all, NULL, 0)) return 0;
    return spec_accepts(f, s, all, n_all, in, &n_in, &n_targs);
}

/* ---- running a specialisation ---- */

static void release_externals(const spec *s, em_tensor **captured_in) {
    for (int i = 0; i < s->n_captured; i++)
        if (s->captured[i].kind == EM_CAPTURE_EXTERNAL) {
            em_tensor_release(captured_in[i]);
            captured_in[i] = NULL;
        }
}

/* Runs specialisation s, which accepts the call. 1 when the call is done
 * (compiled, or to run eagerly), 0 when a value guard failed (the run
 * changed nothing: no write-back, the random stream restored), -1 on error. */
static int run_spec(em_function *f, spec *s, em_call *call, em_tensor **in, int n_in, int n_targs) {
    int index = s->index;
    if (s->pending) { /* a call matches it again: now it is worth compiling */
        em_ir_graph *graph = s->pending;
        s->pending = NULL;
        if (compile_spec(f, s, call, graph, in, n_in) != EM_OK) return -1;
    }
    if (!s->compiled) {
        eager(f, call, index, s->reason);
        return 1;
    }
    note_call(f, "compiled", index, NULL);
    for (int i = 0; i < s->n_captured; i++) /* (the host fills them, or none is missed) */
        if (s->captured[i].kind == EM_CAPTURE_EXTERNAL) in[n_targs + i] = NULL;
    if (s->data && f->host.externals && f->host.externals(s->data, in + n_targs) != EM_OK) {
        release_externals(s, in + n_targs);
        return -1;
    }
    for (int i = 0; i < s->n_captured; i++)
        if (s->captured[i].kind == EM_CAPTURE_EXTERNAL && !in[n_targs + i]) {
            release_externals(s, in + n_targs);
            em_error(EM_ERR_INTERNAL, "compiled %s: the host supplied no value for input %d", f->name,
                     n_targs + i);
            return -1;
        }
    em_rng_state rng = em_rng_get_state();
    /* with a backward, the values saved for it follow the results (in
     * call->outs itself when they fit) */
    em_tensor **outs = call->outs;
    if (first_extra(s) > EM_FUNCTION_MAX_OUTPUTS && !(outs = em_calloc((size_t)first_extra(s), sizeof *outs))) {
        release_externals(s, in + n_targs);
        em_error(EM_ERR_NOMEM, "compiled %s: out of memory", f->name);
        return -1;
    }
    bool was = em_set_grad_enabled(false); /* the graph is the computation; no history */
    bool unlock = !s->draws_random && f->host.unlock && f->host.relock;
    void *token = unlock ? f->host.unlock() : NULL;
    em_status st = em_compiled_run(s->compiled, in, n_in, outs, first_extra(s));
    if (unlock) f->host.relock(token);
    em_set_grad_enabled(was);
    if (s->backward && st == EM_OK) {
        if (outs != call->outs) memcpy(call->outs, outs, (size_t)s->n_out * sizeof *outs);
        st = em_backward_program_attach(s->backward, in, call->outs, outs + s->n_out);
        for (int j = 0; j < s->n_out && st != EM_OK; j++) {
            em_tensor_release(call->outs[j]);
            call->outs[j] = NULL;
        }
        for (int j = s->n_out; j < first_extra(s); j++) { /* (the node holds its own references) */
            em_tensor_release(outs[j]);
            outs[j] = NULL;
        }
    }
    if (outs != call->outs) em_free(outs);
    release_externals(s, in + n_targs);
    if (st == EM_ERR_GUARD) {
        em_rng_set_state(rng); /* (the run stopped at the guard, before any write) */
        snprintf(f->last_reason, sizeof f->last_reason, "value guard failed: %s", em_last_error());
        f->n_value_guard_failures++;
        return 0;
    }
    if (st != EM_OK) return -1;
    for (int j = 0; s->returned_writes && j < s->n_out; j++) /* `return buf` after buf.add_(x) */
        if (s->returned_writes[j] >= 0) {
            em_tensor *target = in[s->writes[s->returned_writes[j]]];
            em_tensor_retain(target);
            em_tensor_release(call->outs[j]);
            call->outs[j] = target;
        }
    for (int j = 0; s->returned_views && !s->backward && j < s->n_out; j++) /* `return buf.view(n)` after it */
        if (s->returned_views[j].write >= 0) {
            em_tensor *view = em_returned_view_of(&s->returned_views[j], in[s->writes[s->returned_views[j].write]]);
            if (!view) continue;
            em_tensor_release(call->outs[j]);
            call->outs[j] = view;
        }
    f->n_compiled_calls++;
    call->kind = EM_CALL_COMPILED;
    call->n_out = s->n_out;
    call->data = s->data;
    return 1;
}

/* ---- tracing ---- */

/* A proxy of argument tensor t: a new tensor object viewing its memory.
 * With grad on and t requiring grad, a view with history (an identity
 * expand), so gradients reach t itself through the trace. */
static em_tensor *proxy_of(em_tensor *t) {
    if (em_grad_enabled() && em_requires_grad(t)) return em_expand(t, t->shape, t->ndim);
    return em_tensor_alias(t, t->offset, t->shape, t->strides, t->ndim);
}

static void pending_free(struct em_pending_trace *pt) {
    for (int i = 0; i < pt->n; i++) em_tensor_release(pt->proxies[i]);
    em_free(pt);
}

static double ms_since(const struct timespec *t0) {
    struct timespec t1;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    return (double)(t1.tv_sec - t0->tv_sec) * 1e3 + (double)(t1.tv_nsec - t0->tv_nsec) * 1e-6;
}

static em_status begin_trace(em_function *f, const em_arg *all, int n, em_call *call) {
    struct em_pending_trace *pt = em_calloc(1, sizeof *pt);
    if (!pt) return em_error(EM_ERR_NOMEM, "out of memory starting a trace of %s", f->name);
    memcpy(pt->args, all, (size_t)n * sizeof *all);
    pt->n = n;
    for (int i = 0; i < n; i++)
        if (all[i].kind == EM_ARG_TENSOR && !(pt->proxies[i] = proxy_of(all[i].tensor))) {
            pending_free(pt);
            return em_last_status();
        }
    if (!(pt->tr = em_trace_begin(f->name, f->host.loc, f->host.loc_ctx))) {
        pending_free(pt);
        return em_last_status();
    }
    if (f->export && !f->export->done) {
        if (em_trace_snapshot_captures(pt->tr, f->export->opts.named, f->export->opts.n_named) != EM_OK)
            em_trace_fail(pt->tr, "out of memory copying the state");
        f->export->traced = true;
        f->export->rng = em_rng_get_state();
    }
    f->n_traces++;
    note_call(f, "traced", f->n_specs, NULL);
    clock_gettime(CLOCK_MONOTONIC, &pt->t0);
    for (int i = 0; i < n; i++)
        if (pt->proxies[i] && em_trace_add_input(pt->tr, pt->proxies[i], all[i].name, all[i].tensor) != EM_OK)
            em_trace_fail(pt->tr, "out of memory while tracing");
    call->kind = EM_CALL_TRACE;
    call->proxies = pt->proxies;
    call->trace = pt;
    return EM_OK;
}

void em_function_trace_abort(em_function *f, em_call *call) {
    (void)f;
    struct em_pending_trace *pt = call->trace;
    if (!pt) return;
    em_trace_result tres;
    em_trace_fail(pt->tr, "the function raised");
    em_trace_end(pt->tr, NULL, 0, &tres); /* (nothing to cache) */
    pending_free(pt);
    call->trace = NULL;
    call->proxies = NULL;
}

static spec *add_spec(em_function *f, const em_arg *args, int n) {
    spec **ns = realloc(f->specs, (size_t)(f->n_specs + 1) * sizeof *ns);
    if (!ns) return NULL;
    f->specs = ns;
    spec *s = em_calloc(1, sizeof *s);
    if (!s || !(s->guards = em_guards_new(args, n))) {
        em_free(s);
        return NULL;
    }
    s->index = f->n_specs;
    s->shares_code_with = -1;
    s->dynamic_sizes = f->sizes_vary;
    f->specs[f->n_specs++] = s;
    return s;
}

/* Moves what a successful trace found into s. False (with s->reason) when
 * the specialisation cannot run compiled. */
static bool adopt_trace(spec *s, em_trace_result *tres) {
    if (tres->n_grad_outputs) { /* (the results' gradients: the backward graph's inputs, not the forward's) */
        int n = tres->n_grad_outputs, first = tres->n_captured - n;
        if (!(s->grad_outputs = em_malloc((size_t)n * sizeof *s->grad_outputs))) {
            snprintf(s->reason, sizeof s->reason, "out of memory");
            return false;
        }
        for (int i = 0; i < n; i++) {
            s->grad_outputs[i] = tres->captured[first + i].owner;
            em_tensor_release(tres->captured[first + i].tensor);
            em_tensor_release(tres->captured[first + i].snapshot);
        }
        s->n_grad_outputs = n;
        tres->n_captured = first;
        s->grad_inputs = tres->grad_inputs;
        s->n_grad_inputs = tres->n_input_grads;
        tres->grad_inputs = NULL;
        tres->n_input_grads = 0;
    }
    s->captured = tres->captured;
    s->n_captured = tres->n_captured;
    tres->captured = NULL;
    tres->n_captured = 0;
    s->slots = tres->slots;
    s->n_slots = tres->n_slots;
    tres->slots = NULL;
    tres->n_slots = 0;
    s->value_guards = tres->value_guards;
    s->value_guard_what = (char **)tres->value_guard_what;
    s->n_value_guards = tres->n_value_guards;
    tres->value_guards = NULL;
    tres->value_guard_what = NULL;
    tres->n_value_guards = 0;
    s->writes = tres->writes;
    s->n_writes = tres->n_writes;
    s->returned_writes = tres->returned_writes;
    s->returned_views = tres->returned_views;
    tres->writes = tres->returned_writes = NULL;
    tres->returned_views = NULL;
    tres->n_writes = 0;
    if (s->n_captured > MAX_CAPTURED) {
        snprintf(s->reason, sizeof s->reason, "the function captures more than %d tensors", MAX_CAPTURED);
        return false;
    }
    if (s->n_captured && (!(s->cap_args = em_malloc((size_t)s->n_captured * sizeof *s->cap_args)) ||
                          !(s->captured_guards = em_guards_new(captured_args(s, NULL), s->n_captured)))) {
        snprintf(s->reason, sizeof s->reason, "out of memory for the specialisation's guards");
        return false;
    }
    return true;
}

/* A captured .grad is found through its owner at every call; the one the
 * trace saw is not kept alive once compiling no longer needs it as an
 * example (it would hold a second copy of every gradient). Its layout
 * lives on in the guards. */
static void drop_traced_grads(spec *s) {
    for (int i = 0; i < s->n_captured; i++)
        if (s->captured[i].kind == EM_CAPTURE_GRAD) {
            em_tensor_release(s->captured[i].tensor);
            s->captured[i].tensor = NULL;
        }
}

/* The rest of trace_end once the trace succeeded: s takes the trace and is
 * compiled (or left pending). */
static em_status install(em_function *f, spec *s, em_call *call, const struct em_pending_trace *pt,
                         em_trace_result *tres) {
    em_tensor *examples[MAX_IN];
    int k = 0;
    for (int i = 0; i < pt->n; i++)
        if (pt->args[i].kind == EM_ARG_TENSOR) examples[k++] = pt->args[i].tensor;
    for (int i = 0; i < tres->n_captured - tres->n_grad_outputs && k < MAX_IN; i++) /* (not the results' gradients) */
        examples[k++] = tres->captured[i].tensor;
    /* (writes into memory two inputs share fail the trace: the tracer refuses them) */
    s->n_sharing = -1; /* (out of memory: no call matches the specialisation) */
    if ((s->sharing = em_malloc((size_t)(k ? k : 1) * sizeof *s->sharing))) {
        s->n_sharing = k;
        for (int i = 0; i < k; i++) s->sharing[i] = sharing_of(examples, i);
    }
    em_ir_graph *graph = tres->graph;
    tres->graph = NULL;
    s->traced_ir = em_ir_print(graph);
    bool defer = false;
    for (int i = 0; i < tres->n_slots; i++)
        defer |= tres->slots[i].initial == EM_SLOT_NONE && tres->slots[i].final >= 0;
    em_status st = EM_OK;
    if (!adopt_trace(s, tres)) {
        em_ir_graph_free(graph);
        if (f->export) snprintf(f->export->why, sizeof f->export->why, "%s", s->reason);
    } else if (f->export && f->export->traced && !f->export->done)
        st = export_spec(f, s, pt, graph, examples, k);
    else if (defer)
        s->pending = graph;
    else
        st = compile_spec(f, s, call, graph, examples, k);
    drop_traced_grads(s);
    return st;
}

em_status em_function_trace_end(em_function *f, em_call *call, em_tensor *const *outs, int n_out,
                                void *data, const char *why) {
    struct em_pending_trace *pt = call->trace;
    call->trace = NULL;
    call->proxies = NULL;
    if (!pt) return em_error(EM_ERR_INTERNAL, "trace_end: no trace in progress");
    if (why) {
        em_trace_fail(pt->tr, "%s", why);
        n_out = 0;
    }
    if (n_out > EM_FUNCTION_MAX_OUTPUTS) {
        em_trace_fail(pt->tr, "it returns more than %d tensors", EM_FUNCTION_MAX_OUTPUTS);
        n_out = 0;
    }
    bool history = false; /* results that require grad: a joint trace, forward and backward */
    for (int i = 0; i < n_out && !why && em_grad_enabled(); i++) history |= em_autograd_graph_live(outs[i]);
    if (history && !f->export) em_trace_backward(pt->tr, outs, n_out);
    if (em_trace_count_escapes(pt->tr, outs, n_out) && f->host.collect)
        f->host.collect(); /* garbage in a reference cycle is no escape */
    em_trace_result tres;
    em_status st = em_trace_end(pt->tr, outs, n_out, &tres);
    double trace_ms = ms_since(&pt->t0);
    if (st != EM_OK && f->export && !f->export->done)
        snprintf(f->export->why, sizeof f->export->why, "it cannot be captured as one graph: %s", em_last_error());
    if (st != EM_OK && tres.retry && f->n_retries < MAX_RETRIES) { /* no spec: trace again next call */
        f->n_retries++;
        snprintf(f->last_reason, sizeof f->last_reason, "%s", em_last_error());
        count_fallback(f, f->last_reason);
        if (data && f->host.release) f->host.release(data);
        pending_free(pt);
        return EM_OK;
    }
    char reason[512];
    snprintf(reason, sizeof reason, "%s", st != EM_OK ? em_last_error() : "");
    spec *s = add_spec(f, pt->args, pt->n);
    if (!s) {
        em_trace_result_clear(&tres);
        if (data && f->host.release) f->host.release(data);
        pending_free(pt);
        return em_error(EM_ERR_NOMEM, "out of memory caching a specialisation of %s", f->name);
    }
    s->data = data;
    s->n_out = n_out;
    s->trace_ms = trace_ms;
    if (st != EM_OK) {
        snprintf(s->reason, sizeof s->reason, "%s", reason);
        snprintf(f->last_reason, sizeof f->last_reason, "%s", reason);
        warn_fallback(f, call, reason);
        st = EM_OK;
    } else {
        st = install(f, s, call, pt, &tres);
    }
    em_trace_result_clear(&tres);
    pending_free(pt);
    return st;
}

/* ---- one call ---- */

/* Runs the call on the first specialisation whose guards pass and whose
 * value guards hold: 1 when one did (or said to run eagerly), 0 when none
 * did, -1 on error. */
static int run_cached(em_function *f, const em_arg *a, int n, em_call *call) {
    em_tensor *in[MAX_IN];
    for (int i = 0; i < f->n_specs; i++) {
        spec *s = f->specs[i];
        int n_in, n_targs;
        if (!em_guards_check(s->guards, a, n, NULL, 0)) continue;
        int ok = spec_accepts(f, s, a, n, in, &n_in, &n_targs);
        if (ok < 0) return -1;
        if (!ok) continue;
        int r = run_spec(f, s, call, in, n_in, n_targs);
        if (r != 0) return r;
    }
    return 0;
}

em_status em_function_call(em_function *f, const em_arg *args, int n, em_call *call) {
    call_init(call);
    if (!em_compile_enabled())
        return eager(f, call, -1, "compilation is disabled (EMBER_COMPILE=0 or ember.compiler.disable())");
    if (em_trace_active()) /* inlined into the caller's trace */
        return eager(f, call, -1, "called while another compiled function is being traced (its ops "
                                  "join that trace)");
    em_arg all[EM_FUNCTION_MAX_ARGS + 1];
    int n_all = with_grad_mode(args, n, all);
    if (n_all < 0) {
        em_function_eager(f, "too many arguments, counting the items of lists, tuples and dicts", call);
        return EM_OK;
    }
    int r = run_cached(f, all, n_all, call);
    if (r < 0) return em_last_status();
    if (r > 0) return EM_OK;
    f->n_misses++;
    note_varying_sizes(f, all, n_all);
    bool template = false; /* (code compiled for sizes read at run time, which a trace may share) */
    for (int i = 0; i < f->n_specs; i++) template |= f->specs[i]->dynamic_sizes && f->specs[i]->shares_code_with < 0;
    bool instance_room = template && !f->instances_exhausted && f->n_specs < f->cache_limit + MAX_INSTANCES;
    if (n_code(f) >= f->cache_limit && !instance_room) {
        char failed[512] = "";
        if (f->n_specs) em_guards_check(f->specs[f->n_specs - 1]->guards, all, n_all, failed, sizeof failed);
        if (!failed[0]) snprintf(failed, sizeof failed, "%.500s", f->last_reason[0] ? f->last_reason : "?");
        char why[128];
        snprintf(why, sizeof why, "cache limit of %d specialisations reached", f->cache_limit);
        if (!f->warned_limit) {
            f->warned_limit = true;
            snprintf(f->warning, sizeof f->warning,
                     "ember.compile(%s): %s; calls that match none of them run eagerly (this call "
                     "failed the guard %s)", f->name, why, failed);
            call->warning = f->warning;
        }
        return eager(f, call, -1, why);
    }
    return begin_trace(f, all, n_all, call);
}

/* ---- what explain() shows ---- */

void em_function_stats_get(const em_function *f, em_function_stats *s) {
    s->compiled_calls = f->n_compiled_calls;
    s->eager_calls = f->n_eager_calls;
    s->traces = f->n_traces;
    s->misses = f->n_misses;
    s->value_guard_failures = f->n_value_guard_failures;
    s->retried_traces = f->n_retries;
    s->specializations = f->n_specs;
    s->code_objects = n_code(f);
    s->cache_limit = f->cache_limit;
    s->dynamic = f->dynamic;
    s->sizes_vary = f->sizes_vary;
    s->varying = f->varying;
    s->n_fallbacks = 0;
    for (int i = 0; i < f->n_fallbacks; i++) s->n_fallbacks += f->fallbacks[i].count > 0;
}

const char *em_function_fallback(const em_function *f, int i, int64_t *count) {
    for (int j = 0; j < f->n_fallbacks; j++) /* (the i-th reason some call ran eagerly for) */
        if (f->fallbacks[j].count > 0 && i-- == 0) {
            *count = f->fallbacks[j].count;
            return f->fallbacks[j].reason;
        }
    return NULL;
}

void em_function_last_call(const em_function *f, em_last_call *lc) {
    lc->event = f->last_event;
    lc->specialization = f->last_spec;
    lc->reason = f->last_reason;
}

/* The graph input index i in words. */
static void input_name(em_strbuf *b, const spec *s, int n_targs, int i) {
    if (i < n_targs) {
        em_strbuf_printf(b, "input %d (argument)", i);
        return;
    }
    const em_capture *c = &s->captured[i - n_targs];
    em_strbuf_printf(b, "input %d (%s)", i,
                     c->kind == EM_CAPTURE_GRAD       ? "a captured .grad"
                     : c->kind == EM_CAPTURE_EXTERNAL ? "read at every call"
                                                      : "captured tensor");
}

/* What a specialisation does besides its graph: value guards, .grad slots,
 * write-backs, and what the host says of the state it read. */
static char *describe_state(const em_function *f, const spec *s) {
    em_strbuf b;
    em_strbuf_init(&b);
    int n_targs = 0;
    for (int i = 0; i < em_guards_count(s->guards); i++) n_targs += em_guards_kind(s->guards, i) == EM_ARG_TENSOR;
    em_strbuf_printf(&b, "value guards: %d%s\n", s->n_value_guards,
                     s->n_value_guards ? " (a host read made Python act on these values; a call "
                                         "computing others reruns eagerly)"
                                       : "");
    for (int j = 0; j < s->n_value_guards; j++) {
        const em_tensor *t = s->value_guards[j];
        char shape[64], num[32];
        em_shape_str(t->shape, t->ndim, shape, sizeof shape);
        em_strbuf_printf(&b, "  %s of result %d == %s %s [", s->value_guard_what[j], first_extra(s) + j,
                         em_dtype_name(t->dtype), shape);
        for (int64_t k = 0; k < t->numel && k < 4; k++)
            em_strbuf_printf(&b, "%s%s", k ? ", " : "", em_format_double(em_tensor_get_f64(t, k), num));
        em_strbuf_printf(&b, "%s]\n", t->numel > 4 ? ", ..." : "");
    }
    em_strbuf_printf(&b, ".grad slots: %d\n", s->n_slots);
    for (int j = 0; j < s->n_slots; j++) {
        const em_grad_slot *sl = &s->slots[j];
        em_strbuf_printf(&b, "  .grad of input %d: %s -> %s", sl->owner,
                         sl->initial == EM_SLOT_UNREAD ? "(replaced unread)"
                         : sl->initial == EM_SLOT_NONE ? "None"
                                                       : "a tensor",
                         sl->final == EM_SLOT_KEEP ? "kept" : sl->final == EM_SLOT_NONE ? "None" : "new value");
        if (sl->final >= 0) em_strbuf_printf(&b, " (result %d)", sl->final + s->n_saved);
        em_strbuf_puts(&b, "\n");
    }
    em_strbuf_printf(&b, "write-backs: %d\n", s->n_writes);
    for (int j = 0; j < s->n_writes; j++) {
        em_strbuf_puts(&b, "  ");
        input_name(&b, s, n_targs, s->writes[j]);
        em_strbuf_printf(&b, " <- result %d\n", first_extra(s) + s->n_value_guards + j);
    }
    char *host = s->data && f->host.describe ? f->host.describe(s->data, n_targs) : NULL;
    if (host) em_strbuf_puts(&b, host);
    free(host);
    return em_strbuf_take(&b);
}

em_status em_function_spec(const em_function *f, int i, em_spec_info *info) {
    memset(info, 0, sizeof *info);
    if (i < 0 || i >= f->n_specs)
        return em_error(EM_ERR_INDEX, "%s has no specialisation %d (it has %d)", f->name, i, f->n_specs);
    const spec *s = f->specs[i];
    const em_compiled *c = s->compiled;
    info->backend = c ? em_compiled_backend(c) : s->pending ? "pending" : "eager";
    info->reason = s->reason;
    info->note = c ? em_compiled_note(c) : "";
    info->dump_path = c ? em_compiled_dump_path(c) : "";
    info->passes = c ? em_compiled_passes(c) : "";
    info->pass_report = c ? em_compiled_pass_report(c) : "";
    info->n_captured = s->n_captured;
    info->trace_ms = s->trace_ms;
    info->dynamic_sizes = s->dynamic_sizes;
    info->shares_code_with = s->shares_code_with;
    if (c) em_compiled_times(c, &info->passes_ms, &info->backend_ms);
    info->guards = em_guards_print(s->guards);
    info->traced_ir = s->traced_ir ? strdup(s->traced_ir) : NULL;
    if (c) {
        info->graph = em_ir_print(em_compiled_graph(c));
        info->kernels = em_compiled_describe(c);
        info->profile = em_compiled_profile(c);
    }
    if (c || s->pending) info->state = describe_state(f, s);
    info->partition = s->backward ? em_backward_program_report(s->backward) : "";
    if (s->backward) {
        info->backward_graph = em_ir_print(em_compiled_graph(em_backward_program_compiled(s->backward)));
        info->backward_kernels = em_compiled_describe(em_backward_program_compiled(s->backward));
        info->backward_profile = em_compiled_profile(em_backward_program_compiled(s->backward));
    }
    return EM_OK;
}

void em_spec_info_clear(em_spec_info *info) {
    free(info->guards);
    free(info->traced_ir);
    free(info->graph);
    free(info->kernels);
    free(info->state);
    free(info->profile);
    free(info->backward_graph);
    free(info->backward_kernels);
    free(info->backward_profile);
    memset(info, 0, sizeof *info);
}
