/*
 * trace.c - records the ops a function runs into an SSA graph.
 *
 * The runtime calls on_op after every user-level op. Each tensor the trace
 * has seen carries its graph value in (trace_gen, trace_value), so mapping a
 * tensor to its value is O(1) and a freed tensor can never be confused with
 * a new one at the same address. A tensor the trace has not seen is:
 *   - a Python number the binding wrapped: a scalar constant node;
 *   - older than the trace (a module parameter, a global): a captured input,
 *     held by reference;
 *   - born during the trace without an op (ember.tensor(...)): the trace
 *     fails, because its values may differ on the next call.
 * Random ops are recorded like any op: they are not pure (dce keeps them)
 * and not elementwise (never fused), so a compiled graph runs their eager
 * kernels in traced order, each reserving its Philox counters from the
 * global stream when it runs: every call draws fresh numbers, the same ones
 * the eager function would after the same seed. A draw from an
 * ember.Generator (a swap of that stream) and host syncs fail the trace
 * for now (value guards come later); failing is always safe because the
 * function has run eagerly anyway.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "ember/alloc.h"
#include "ember/autograd.h"
#include "ember/frontend.h"

struct em_tracer {
    em_ir_graph *g;
    uint32_t gen;
    uint64_t serial_start;
    em_trace_hook hook;
    const em_trace_hook *prev_hook;
    em_loc_fn loc_fn;
    void *loc_ctx;
    em_ir_value **values; /* value id -> value */
    int cap_values;
    int n_args;
    em_tensor **captured;
    int n_captured, cap_captured;
    const char *last_file_src, *last_file; /* cache of the interned file name */
    bool failed;
    char reason[512];
};

static uint32_t next_gen = 1;
static _Thread_local em_tracer *active;

bool em_trace_active(void) { return active != NULL; }

void em_trace_fail(em_tracer *tr, const char *fmt, ...) {
    if (tr->failed) return;
    tr->failed = true;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(tr->reason, sizeof tr->reason, fmt, ap);
    va_end(ap);
}

static bool remember(em_tracer *tr, em_ir_value *v) {
    if (v->id >= tr->cap_values) {
        int cap = tr->cap_values ? tr->cap_values : 64;
        while (cap <= v->id) cap *= 2;
        em_ir_value **nv = em_calloc((size_t)cap, sizeof *nv);
        if (!nv) return false;
        if (tr->cap_values) memcpy(nv, tr->values, (size_t)tr->cap_values * sizeof *nv);
        em_free(tr->values);
        tr->values = nv;
        tr->cap_values = cap;
    }
    tr->values[v->id] = v;
    return true;
}

static void bind(em_tracer *tr, em_tensor *t, em_ir_value *v) {
    t->trace_gen = tr->gen;
    t->trace_value = (uint32_t)v->id;
}

static em_ir_loc current_loc(em_tracer *tr) {
    em_ir_loc loc = {NULL, 0, 0};
    const char *file;
    int line;
    if (!tr->loc_fn || !tr->loc_fn(tr->loc_ctx, &file, &line)) return loc;
    if (file != tr->last_file_src || !tr->last_file || strcmp(file, tr->last_file) != 0) {
        tr->last_file = em_ir_intern(tr->g, file, strlen(file));
        tr->last_file_src = file;
    }
    loc.file = tr->last_file;
    loc.line = loc.line_end = line;
    return loc;
}

static em_ir_value *capture(em_tracer *tr, em_tensor *t) {
    if (tr->n_captured == tr->cap_captured) {
        int cap = tr->cap_captured ? tr->cap_captured * 2 : 8;
        em_tensor **nc = em_calloc((size_t)cap, sizeof *nc);
        if (!nc) return NULL;
        if (tr->n_captured) memcpy(nc, tr->captured, (size_t)tr->n_captured * sizeof *nc);
        em_free(tr->captured);
        tr->captured = nc;
        tr->cap_captured = cap;
    }
    char name[32];
    snprintf(name, sizeof name, "captured%d", tr->n_captured);
    em_type ty = em_tensor_type(t);
    em_ir_value *v = em_ir_add_param(tr->g->body, &ty, name);
    if (!v || !remember(tr, v)) return NULL;
    em_tensor_retain(t);
    tr->captured[tr->n_captured++] = t;
    bind(tr, t, v);
    return v;
}

/* The graph value of tensor t, creating a constant or captured input. */
static em_ir_value *value_of(em_tracer *tr, em_tensor *t, const char *op) {
    if (t->trace_gen == tr->gen) return tr->values[t->trace_value];
    if (t->is_wrapped_number && t->ndim == 0) {
        em_attrs a;
        memset(&a, 0, sizeof a);
        a.dtype = t->dtype;
        a.value = em_tensor_get_f64(t, 0);
        if (!em_dtype_is_float(t->dtype)) a.value_i = em_load_i64(em_tensor_data(t), t->dtype);
        em_type ty = em_tensor_type(t);
        em_ir_node *n = em_ir_node_new(tr->g, EM_OP_FULL, NULL, 0, &a, &ty, 1, current_loc(tr));
        if (!n || !remember(tr, n->out[0])) return NULL;
        em_ir_insert(tr->g->body, n, NULL);
        return n->out[0]; /* not bound: the same Python number may be reused */
    }
    if (t->serial >= tr->serial_start) {
        em_trace_fail(tr,
                      "%s: uses a tensor created inside the function without an ember op (for "
                      "example ember.tensor() or ember.from_numpy()); its values could differ on "
                      "the next call. Create it outside the function and pass it in",
                      op);
        return NULL;
    }
    return capture(tr, t);
}

static void on_op(void *ctx, em_op op, em_tensor *const *in, int n_in, const em_attrs *attrs,
                  em_tensor *const *out, int n_out) {
    em_tracer *tr = ctx;
    if (tr->failed) return;
    const em_op_info *info = em_op_get(op);
    for (int j = 0; j < n_out && em_grad_enabled(); j++)
        if (out[j] && out[j]->requires_grad) {
            em_trace_fail(tr,
                          "%s: an input requires grad, and compiled graphs do not record autograd "
                          "history yet (call it under ember.no_grad() to compile inference)",
                          info->name);
            return;
        }
    if (info->flags & EM_F_DATA_DEPENDENT) {
        em_trace_fail(tr,
                      "%s: its result's shape depends on the input's values, which a compiled "
                      "graph cannot know in advance",
                      info->name);
        return;
    }
    em_ir_value *vin[16];
    em_type types[16];
    if (n_in > 16 || n_out > 16) {
        em_trace_fail(tr, "%s: too many operands to trace", info->name);
        return;
    }
    for (int i = 0; i < n_in; i++)
        if (!(vin[i] = value_of(tr, in[i], info->name))) {
            em_trace_fail(tr, "%s: %s", info->name, em_last_error());
            return;
        }
    for (int i = 0; i < n_out; i++) types[i] = em_tensor_type(out[i]);
    em_ir_node *n = em_ir_node_new(tr->g, op, vin, n_in, attrs, types, n_out, current_loc(tr));
    if (!n) {
        em_trace_fail(tr, "out of memory while tracing");
        return;
    }
    em_ir_insert(tr->g->body, n, NULL);
    for (int i = 0; i < n_out; i++) {
        if (!remember(tr, n->out[i])) {
            em_trace_fail(tr, "out of memory while tracing");
            return;
        }
        bind(tr, out[i], n->out[i]);
    }
}

static void on_event(void *ctx, em_trace_event ev, const char *what, const em_tensor *t) {
    (void)t;
    if (ev == EM_EVENT_RNG_SWAP)
        em_trace_fail((em_tracer *)ctx,
                      "%s draws from an ember.Generator inside a compiled function; compiled "
                      "graphs draw from the global stream (ember.manual_seed) only, for now",
                      what);
    else if (ev == EM_EVENT_HOST_SYNC)
        em_trace_fail((em_tracer *)ctx,
                      "%s reads a tensor's values on the host inside a compiled function; the "
                      "compiled graph cannot depend on them yet (value guards come later)",
                      what);
    else
        em_trace_fail((em_tracer *)ctx,
                      "%s writes into a tensor inside a compiled function; in-place updates "
                      "are not traced yet (they need write-backs)",
                      what);
}

em_tracer *em_trace_begin(const char *name, em_loc_fn loc, void *loc_ctx) {
    if (active) {
        em_error(EM_ERR_RUNTIME, "cannot start a trace of %s while tracing %s", name,
                 active->g->name);
        return NULL;
    }
    em_tracer *tr = em_calloc(1, sizeof *tr);
    if (!tr) return NULL;
    if (!(tr->g = em_ir_graph_new(name))) {
        em_free(tr);
        return NULL;
    }
    tr->gen = __atomic_fetch_add(&next_gen, 1, __ATOMIC_RELAXED);
    tr->serial_start = em_tensor_next_serial(); /* tensors born from now on */
    tr->loc_fn = loc;
    tr->loc_ctx = loc_ctx;
    tr->hook = (em_trace_hook){on_op, on_event, tr};
    tr->prev_hook = em_set_trace_hook(&tr->hook);
    active = tr;
    return tr;
}

em_status em_trace_add_input(em_tracer *tr, em_tensor *t, const char *name) {
    em_type ty = em_tensor_type(t);
    em_ir_value *v = em_ir_add_param(tr->g->body, &ty, name);
    if (!v || !remember(tr, v)) return EM_ERR_NOMEM;
    bind(tr, t, v);
    tr->n_args++;
    return EM_OK;
}

void em_trace_result_clear(em_trace_result *res) {
    em_ir_graph_free(res->graph);
    for (int i = 0; i < res->n_captured; i++) em_tensor_release(res->captured[i]);
    em_free(res->captured);
    memset(res, 0, sizeof *res);
}

static void tracer_free(em_tracer *tr) {
    em_ir_graph_free(tr->g);
    for (int i = 0; i < tr->n_captured; i++) em_tensor_release(tr->captured[i]);
    em_free(tr->captured);
    em_free(tr->values);
    em_free(tr);
}

em_status em_trace_end(em_tracer *tr, em_tensor *const *outputs, int n_out, em_trace_result *res) {
    memset(res, 0, sizeof *res);
    em_set_trace_hook(tr->prev_hook);
    if (active == tr) active = NULL;
    em_ir_value *vals[256];
    if (n_out > 256) em_trace_fail(tr, "the function returns more than 256 tensors");
    for (int i = 0; i < n_out && !tr->failed; i++)
        vals[i] = value_of(tr, outputs[i], "return");
    if (!tr->failed && em_ir_set_results(tr->g->body, vals, n_out) != EM_OK)
        em_trace_fail(tr, "out of memory while tracing");
    if (!tr->failed && em_ir_verify(tr->g) != EM_OK)
        em_trace_fail(tr, "internal error, the traced graph does not verify: %s", em_last_error());
    if (tr->failed) {
        em_status st = em_error(EM_ERR_NOT_IMPLEMENTED, "%s", tr->reason);
        tracer_free(tr);
        return st;
    }
    res->graph = tr->g;
    res->n_args = tr->n_args;
    res->captured = tr->captured;
    res->n_captured = tr->n_captured;
    tr->g = NULL;
    tr->captured = NULL;
    tr->n_captured = 0;
    tracer_free(tr);
    return EM_OK;
}
