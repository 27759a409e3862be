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
 * In-place ops (on_inplace) become SSA: the written tensor is rebound to the
 * op's value, and a written input or captured tensor gets a write-back (an
 * extra graph result its caller copies back), unless another tensor of the
 * trace shares its memory, which fails the trace. A draw from an
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
    /* In-place writes into inputs become write-backs. `sources` are the
     * storages of the inputs and captured tensors; `aliased` those another
     * tensor of the trace also sees (a view, the same tensor passed twice),
     * whose in-place writes the graph could not model. */
    em_storage **sources, **aliased;
    int n_sources, n_aliased;
    const em_tensor **source_tensors; /* the inputs and captured tensors themselves */
    int n_source_tensors;
    struct write {
        const em_tensor *t; /* the input written (alive for the trace) */
        int param;          /* its graph input index */
        em_ir_value *value; /* its latest value */
    } *writes;
    int n_writes;
    bool failed;
    char reason[512];
};

/* Appends p to a growable array of pointers (capacity: powers of two). */
static bool push_ptr(void ***arr, int *n, void *p) {
    if ((*n & (*n - 1)) == 0) { /* 0, 1, 2, 4, ...: full */
        void **na = em_malloc((size_t)(*n ? 2 * *n : 4) * sizeof *na);
        if (!na) return false;
        if (*n) memcpy(na, *arr, (size_t)*n * sizeof *na);
        em_free(*arr);
        *arr = na;
    }
    (*arr)[(*n)++] = p;
    return true;
}

static bool holds(em_storage *const *arr, int n, const em_storage *s) {
    for (int i = 0; i < n; i++)
        if (arr[i] == s) return true;
    return false;
}

/* A new input or captured tensor: one sharing a storage with an earlier one
 * makes that storage aliased. */
static bool note_source(struct em_tracer *tr, const em_tensor *t) {
    em_storage *s = t->storage;
    if (!push_ptr((void ***)&tr->source_tensors, &tr->n_source_tensors, (void *)t)) return false;
    if (holds(tr->sources, tr->n_sources, s))
        return holds(tr->aliased, tr->n_aliased, s) || push_ptr((void ***)&tr->aliased, &tr->n_aliased, s);
    return push_ptr((void ***)&tr->sources, &tr->n_sources, s);
}

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
    if (!note_source(tr, t)) return NULL;
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
    /* a view of an input (or the input itself handed back) aliases it */
    for (int i = 0; i < n_in; i++)
        for (int j = 0; j < n_out; j++)
            if (out[j]->storage == in[i]->storage && holds(tr->sources, tr->n_sources, in[i]->storage) &&
                !holds(tr->aliased, tr->n_aliased, in[i]->storage) &&
                !push_ptr((void ***)&tr->aliased, &tr->n_aliased, in[i]->storage))
                em_trace_fail(tr, "out of memory while tracing");
}

/* Appends a node computing op(vin) to the graph; its result value. */
static em_ir_value *emit(em_tracer *tr, em_op op, em_ir_value *const *vin, int n_in, const em_attrs *attrs) {
    em_type in_types[16], out_type;
    for (int i = 0; i < n_in; i++) in_types[i] = vin[i]->type;
    if (em_op_infer(op, in_types, n_in, attrs, &out_type, 1) != EM_OK) return NULL;
    em_ir_node *n = em_ir_node_new(tr->g, op, vin, n_in, attrs, &out_type, 1, current_loc(tr));
    if (!n || !remember(tr, n->out[0])) return NULL;
    em_ir_insert(tr->g->body, n, NULL);
    return n->out[0];
}

/* An in-place op as SSA: out's new value is op(in), cast to out's dtype and
 * broadcast to its shape; later reads of out see it, and an input or
 * captured tensor written this way gets a write-back. Writes the graph
 * could not model (into a view, or into memory another tensor of the trace
 * also sees) fail the trace. */
static void on_inplace(void *ctx, em_op op, em_tensor *const *in, int n_in, const em_attrs *attrs,
                       em_tensor *out) {
    em_tracer *tr = ctx;
    if (tr->failed) return;
    const em_op_info *info = em_op_get(op);
    const char *name = info->kind == EM_KIND_CAST ? "copy" : info->name;
    if (n_in > 16) {
        em_trace_fail(tr, "%s_: too many operands to trace", name);
        return;
    }
    if (em_grad_enabled() && out->requires_grad) {
        em_trace_fail(tr, "%s_: writes into a tensor that requires grad, and compiled graphs do "
                          "not record autograd history yet", name);
        return;
    }
    em_ir_value *vin[16];
    for (int i = 0; i < n_in; i++)
        if (!(vin[i] = value_of(tr, in[i], name))) {
            em_trace_fail(tr, "%s_: %s", name, em_last_error());
            return;
        }
    em_ir_value *old = value_of(tr, out, name); /* (captures an outside tensor written first) */
    if (!old) return;
    bool source = holds(tr->sources, tr->n_sources, out->storage);
    bool is_source_itself = false; /* (not an alias of one, such as its detach()) */
    for (int i = 0; i < tr->n_source_tensors; i++) is_source_itself |= tr->source_tensors[i] == out;
    bool shared = source ? !is_source_itself || holds(tr->aliased, tr->n_aliased, out->storage)
                         : out->storage->refcount > 1;
    if (out->is_view || shared) {
        em_trace_fail(tr,
                      "%s_ writes into a tensor that shares its memory with another one the "
                      "function uses (a view of it, or the same tensor passed twice); such "
                      "writes are not traced yet",
                      name);
        return;
    }
    em_ir_value *v = emit(tr, op, vin, n_in, attrs);
    if (v && v->type.dtype != out->dtype) {
        em_attrs a;
        memset(&a, 0, sizeof a);
        a.dtype = out->dtype;
        v = emit(tr, EM_OP_CAST, &v, 1, &a);
    }
    if (v && !em_shape_eq(v->type.shape, v->type.ndim, out->shape, out->ndim)) {
        em_attrs a;
        memset(&a, 0, sizeof a);
        a.n_shape = out->ndim;
        memcpy(a.shape, out->shape, (size_t)out->ndim * sizeof *a.shape);
        v = emit(tr, EM_OP_EXPAND, &v, 1, &a);
    }
    if (!v) {
        em_trace_fail(tr, "%s_: %s", name, em_last_error());
        return;
    }
    bind(tr, out, v);
    if (!source) return; /* an intermediate: rebinding is all */
    for (int i = 0; i < tr->n_writes; i++)
        if (tr->writes[i].t == out) {
            tr->writes[i].value = v;
            return;
        }
    if (old->def) { /* (an input's first write: its value is still the graph input) */
        em_trace_fail(tr, "%s_: internal error, a written input has no graph input", name);
        return;
    }
    struct write *w = em_malloc((size_t)(tr->n_writes + 1) * sizeof *w);
    if (!w) {
        em_trace_fail(tr, "out of memory while tracing");
        return;
    }
    if (tr->n_writes) memcpy(w, tr->writes, (size_t)tr->n_writes * sizeof *w);
    em_free(tr->writes);
    tr->writes = w;
    tr->writes[tr->n_writes++] = (struct write){out, old->index, v};
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
    else /* state changed by something that is not an op (in-place ops come as on_inplace) */
        em_trace_fail((em_tracer *)ctx,
                      "%s inside a compiled function changes state outside any ember op, so a "
                      "compiled graph could not repeat it (not traced yet)",
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
    tr->hook = (em_trace_hook){on_op, on_event, tr, on_inplace};
    tr->prev_hook = em_set_trace_hook(&tr->hook);
    active = tr;
    return tr;
}

em_status em_trace_add_input(em_tracer *tr, em_tensor *t, const char *name) {
    em_type ty = em_tensor_type(t);
    em_ir_value *v = em_ir_add_param(tr->g->body, &ty, name);
    if (!v || !remember(tr, v) || !note_source(tr, t)) return EM_ERR_NOMEM;
    bind(tr, t, v);
    tr->n_args++;
    return EM_OK;
}

void em_trace_result_clear(em_trace_result *res) {
    em_ir_graph_free(res->graph);
    em_free(res->writes);
    em_free(res->returned_writes);
    for (int i = 0; i < res->n_captured; i++) em_tensor_release(res->captured[i]);
    em_free(res->captured);
    memset(res, 0, sizeof *res);
}

static void tracer_free(em_tracer *tr) {
    em_ir_graph_free(tr->g);
    for (int i = 0; i < tr->n_captured; i++) em_tensor_release(tr->captured[i]);
    em_free(tr->captured);
    em_free(tr->values);
    em_free(tr->sources);
    em_free(tr->aliased);
    em_free(tr->source_tensors);
    em_free(tr->writes);
    em_free(tr);
}

em_status em_trace_end(em_tracer *tr, em_tensor *const *outputs, int n_out, em_trace_result *res) {
    memset(res, 0, sizeof *res);
    em_set_trace_hook(tr->prev_hook);
    if (active == tr) active = NULL;
    em_ir_value *vals[512];
    if (n_out > 256 || tr->n_writes > 256)
        em_trace_fail(tr, "the function returns or writes into more than 256 tensors");
    for (int i = 0; i < n_out && !tr->failed; i++)
        vals[i] = value_of(tr, outputs[i], "return");
    for (int i = 0; i < tr->n_writes && !tr->failed; i++) vals[n_out + i] = tr->writes[i].value;
    if (!tr->failed && em_ir_set_results(tr->g->body, vals, n_out + tr->n_writes) != EM_OK)
        em_trace_fail(tr, "out of memory while tracing");
    int *writes = NULL;
    if (!tr->failed && tr->n_writes && !(writes = em_malloc((size_t)tr->n_writes * sizeof *writes)))
        em_trace_fail(tr, "out of memory while tracing");
    for (int i = 0; writes && i < tr->n_writes; i++) writes[i] = tr->writes[i].param;
    int *returned = NULL;
    if (writes && n_out && !(returned = em_malloc((size_t)n_out * sizeof *returned)))
        em_trace_fail(tr, "out of memory while tracing");
    for (int i = 0; returned && i < n_out; i++) {
        returned[i] = -1;
        for (int k = 0; k < tr->n_writes; k++)
            if (outputs[i] == tr->writes[k].t) returned[i] = k;
    }
    if (!tr->failed && em_ir_verify(tr->g) != EM_OK)
        em_trace_fail(tr, "internal error, the traced graph does not verify: %s", em_last_error());
    if (tr->failed) {
        em_status st = em_error(EM_ERR_NOT_IMPLEMENTED, "%s", tr->reason);
        em_free(writes);
        em_free(returned);
        tracer_free(tr);
        return st;
    }
    res->graph = tr->g;
    res->n_args = tr->n_args;
    res->writes = writes;
    res->n_writes = tr->n_writes;
    res->returned_writes = returned;
    res->captured = tr->captured;
    res->n_captured = tr->n_captured;
    tr->g = NULL;
    tr->captured = NULL;
    tr->n_captured = 0;
    tracer_free(tr);
    return EM_OK;
}
