/*
 * trace.c - records the ops a function runs into an SSA graph.
 *
 * The runtime calls on_op after every user-level op. Each tensor the trace
 * has seen carries its graph value in its trace mark (em_trace_mark), so mapping a
 * tensor to its value is O(1) and a freed tensor can never be confused with
 * a new one at the same address. A tensor the trace has not seen is:
 *   - a Python number the binding wrapped: a scalar constant node;
 *   - older than the trace (a module parameter, a global): a captured input,
 *     held by reference;
 *   - born during the trace without an op (ember.tensor(...)): the trace
 *     fails, because its values may differ on the next call.
 *
 * What a training step does besides ops becomes graph structure too:
 *   - Autograd: the backward formulas are ember ops, so backward() traces
 *     as the ops it runs; saved tensors are aliases with their source's
 *     value. The graph itself records no history; a function returning a
 *     tensor whose graph is still usable fails the trace.
 *   - In-place ops (on_inplace) become SSA: the written tensor is rebound to
 *     the op's value, and a written input or captured tensor gets a
 *     write-back (an extra graph result its caller copies back), unless
 *     another tensor of the trace shares its memory, which fails the trace.
 *   - .grad (GRAD_READ/GRAD_WRITE events): an input's .grad is a slot. Its
 *     state when first read (None, or a tensor, which becomes an input
 *     found through its owner at every call) is guarded; its state at the
 *     end (None, unchanged, or a new value) is applied after a run.
 *   - Host reads (.item(), bool(t)): value guards, extra results a caller
 *     compares with the values the trace saw.
 *   - Random ops are not pure (dce keeps them) and not elementwise (never
 *     fused), so a compiled graph runs their eager kernels in traced order,
 *     each drawing from the global Philox stream: every call draws fresh
 *     numbers, the ones eager would after the same seed. A draw from an
 *     ember.Generator (a swap of that stream) fails the trace.
 *   - State the function keeps (a tensor born in the trace still alive after
 *     it, not a result: an optimizer's new moments, a cached buffer) could
 *     not be recreated by a graph. The tracer watches its tensors die
 *     (on_free) and fails such a trace with `retry` set: the next call
 *     finds that state in place and usually traces well.
 * Failing is always safe because the function has run eagerly anyway.
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
    bool snapshots; /* em_trace_snapshot_captures */
    em_tensor **pre, **pre_copy; /* tensors copied when the trace began, and their copies */
    int n_pre;
    em_loc_fn loc_fn;
    void *loc_ctx;
    em_ir_value **values; /* value id -> value */
    int cap_values;
    int n_args;
    em_capture *captured; /* graph inputs n_args.. */
    int n_captured, cap_captured;
    const em_tensor **originals; /* per argument: the caller's tensor a proxy stands for */
    const char *last_file_src, *last_file; /* cache of the interned file name */
    /* In-place writes into inputs become write-backs. `sources` are the
     * storages of the inputs and captured tensors; `aliased` those two of
     * them share (the same tensor passed twice), whose in-place writes the
     * graph could not model. */
    em_storage **sources, **aliased;
    int n_sources, n_aliased;
    /* After a write into memory, the tensors over it bound to values older
     * than the write are stale: in eager they show the new values. Per
     * written storage, the id of the first value of its newest write, and
     * (functionalisation, as PyTorch's) the memory itself as SSA: `flat`,
     * a 1-d value of the `numel` elements from `offset` of the root (a
     * contiguous tensor over all of it that the trace writes). A stale
     * tensor is read again as a view of `flat`; a write into any view of
     * it makes a new `flat` (as_strided_scatter), and the root's new value
     * becomes `target`'s write-back when the root is an input. Where no
     * root is known (flat NULL: a written input that is not contiguous),
     * reading a stale tensor fails the trace. */
    /* A mark holds a reference on its storage: a storage born in the trace
     * and freed during it must not lend its address (the allocator's
     * caches hand it straight back) to a later one, which would inherit
     * this mark's memory and read another tensor's values. */
    struct mark {
        em_storage *s;
        int id;
        em_ir_value *flat;
        int64_t offset, numel;
        em_tensor *root;   /* an input or captured tensor, or NULL: memory born in the trace */
        em_type root_type; /* its shape */
    } *marks;
    int n_marks;
    const em_tensor **source_tensors; /* the inputs and captured tensors themselves */
    int *source_index;                /* ... and their graph input indices */
    int n_source_tensors;
    struct slot {
        em_tensor *obj; /* whose .grad (an input: alive for the trace) */
        int owner, initial;
        const em_tensor *initial_grad;
    } *slots;
    int n_slots;
    struct value_guard {
        em_ir_value *value;
        em_tensor *seen; /* a reference: the values the trace saw */
        char *what;
    } *guards;
    int n_guards;
    /* Tensors born in the trace that are still alive: an open-addressing
     * set (NULL empty, TOMB deleted). */
    const em_tensor **born;
    size_t born_cap, born_used;
    struct write {
        const em_tensor *t; /* the input written (alive for the trace) */
        int param;          /* its graph input index */
        em_ir_value *value; /* its latest value */
    } *writes;
    int n_writes;
    /* A joint trace (em_trace_backward): the node clock when the trace
     * began, the results' gradient placeholders, and the gradients found for
     * graph inputs (references) */
    uint64_t clock_start;
    int n_grad_outputs;
    em_tensor **input_grads;
    int *grad_inputs, n_input_grads;
    bool failed, retry;
    char reason[512];
};

/* ---- the set of live tensors born in the trace ---- */

#define TOMB ((const em_tensor *)1)

static size_t born_hash(const em_tensor *t, size_t cap) {
    uintptr_t h = (uintptr_t)t;
    h ^= h >> 17;
    h *= 0x9E3779B97F4A7C15ull;
    return (size_t)(h >> 20) & (cap - 1);
}

static bool born_add(struct em_tracer *tr, const em_tensor *t) {
    if ((tr->born_used + 1) * 2 > tr->born_cap) { /* grow (and drop tombstones) */
        size_t cap = tr->born_cap ? tr->born_cap * 2 : 256;
        const em_tensor **nb = em_calloc(cap, sizeof *nb);
        if (!nb) return false;
        size_t used = 0;
        for (size_t i = 0; i < tr->born_cap; i++) {
            const em_tensor *x = tr->born[i];
            if (!x || x == TOMB) continue;
            size_t h = born_hash(x, cap);
            while (nb[h]) h = (h + 1) & (cap - 1);
            nb[h] = x;
            used++;
        }
        em_free(tr->born);
        tr->born = nb;
        tr->born_cap = cap;
        tr->born_used = used;
    }
    size_t h = born_hash(t, tr->born_cap), free_at = (size_t)-1;
    for (; tr->born[h]; h = (h + 1) & (tr->born_cap - 1)) {
        if (tr->born[h] == t) return true;
        if (tr->born[h] == TOMB && free_at == (size_t)-1) free_at = h;
    }
    if (free_at != (size_t)-1) {
        tr->born[free_at] = t;
    } else {
        tr->born[h] = t;
        tr->born_used++;
    }
    return true;
}

static void born_remove(struct em_tracer *tr, const em_tensor *t) {
    if (!tr->born_cap) return;
    for (size_t h = born_hash(t, tr->born_cap); tr->born[h]; h = (h + 1) & (tr->born_cap - 1))
        if (tr->born[h] == t) {
            tr->born[h] = TOMB;
            return;
        }
}

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

/* Makes room for element n of an array of `size`-byte elements holding n
 * (the tracer's small per-trace lists); false, failing the trace, when
 * memory runs out. */
static bool room_for_one(struct em_tracer *tr, void **arr, int n, size_t size) {
    void *na = em_malloc((size_t)(n + 1) * size);
    if (!na) {
        em_trace_fail(tr, "out of memory while tracing");
        return false;
    }
    if (n) memcpy(na, *arr, (size_t)n * size);
    em_free(*arr);
    *arr = na;
    return true;
}

static bool holds(em_storage *const *arr, int n, const em_storage *s) {
    for (int i = 0; i < n; i++)
        if (arr[i] == s) return true;
    return false;
}

/* A new input or captured tensor: one sharing a storage with an earlier one
 * makes that storage aliased. */
static bool note_source(struct em_tracer *tr, const em_tensor *t, int index) {
    em_storage *s = t->storage;
    int n = tr->n_source_tensors;
    if ((n & (n - 1)) == 0) { /* (grows like push_ptr, which grows source_tensors next) */
        int *ni = em_malloc((size_t)(n ? 2 * n : 4) * sizeof *ni);
        if (!ni) return false;
        if (n) memcpy(ni, tr->source_index, (size_t)n * sizeof *ni);
        em_free(tr->source_index);
        tr->source_index = ni;
    }
    tr->source_index[n] = index;
    if (!push_ptr((void ***)&tr->source_tensors, &tr->n_source_tensors, (void *)t)) return false;
    if (holds(tr->sources, tr->n_sources, s))
        return holds(tr->aliased, tr->n_aliased, s) || push_ptr((void ***)&tr->aliased, &tr->n_aliased, s);
    return push_ptr((void ***)&tr->sources, &tr->n_sources, s);
}

static uint32_t next_gen = 1;
static _Thread_local em_tracer *active;

bool em_trace_active(void) { return active != NULL; }

em_tracer *em_trace_current(void) { return active; }

const em_tensor *em_trace_original(const em_tensor *t) {
    em_tracer *tr = active;
    for (int i = 0; tr && i < tr->n_args; i++) /* (the arguments are the first sources) */
        if (tr->source_tensors[i] == t) return tr->originals[i];
    return NULL;
}

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
    em_trace_mark(t, tr->gen, (uint32_t)v->id);
    if (t->serial >= tr->serial_start && !born_add(tr, t)) em_trace_fail(tr, "out of memory while tracing");
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

/* A new graph input for tensor t from outside; name (or NULL: "captured<i>",
 * "grad<i>", "external<i>") is its graph parameter's. */
static em_ir_value *capture(em_tracer *tr, em_tensor *t, em_capture_kind kind, int owner, const char *name) {
    if (tr->n_captured == tr->cap_captured) {
        int cap = tr->cap_captured ? tr->cap_captured * 2 : 8;
        em_capture *nc = em_calloc((size_t)cap, sizeof *nc);
        if (!nc) return NULL;
        if (tr->n_captured) memcpy(nc, tr->captured, (size_t)tr->n_captured * sizeof *nc);
        em_free(tr->captured);
        tr->captured = nc;
        tr->cap_captured = cap;
    }
    char made[32];
    snprintf(made, sizeof made,
             kind == EM_CAPTURE_GRAD            ? "grad%d"
             : kind == EM_CAPTURE_EXTERNAL      ? "external%d"
             : kind == EM_CAPTURE_GRAD_OUTPUT ? "grad_result%d"
                                                : "captured%d",
             kind == EM_CAPTURE_GRAD_OUTPUT ? owner : tr->n_captured);
    if (!name) name = made;
    em_type ty = em_tensor_type(t);
    em_ir_value *v = em_ir_add_param(tr->g->body, &ty, name);
    if (!v || !remember(tr, v)) return NULL;
    em_tensor *snapshot = NULL;
    for (int i = 0; tr->snapshots && i < tr->n_pre && !snapshot; i++)
        if (tr->pre[i] == t) em_tensor_retain(snapshot = tr->pre_copy[i]);
    if (tr->snapshots && !snapshot) { /* (a copy the trace does not see: the hook is off meanwhile) */
        const em_trace_hook *h = em_set_trace_hook(tr->prev_hook);
        snapshot = em_clone(t);
        em_set_trace_hook(h);
        if (!snapshot) return NULL;
    }
    em_tensor_retain(t);
    tr->captured[tr->n_captured++] = (em_capture){kind, t, owner, snapshot};
    bind(tr, t, v);
    born_remove(tr, t); /* (an external is new, but an input, not state the function keeps) */
    if (!note_source(tr, t, v->index)) return NULL;
    return v;
}

/* A tensor the function made without an ember op. From Python data
 * (ember.tensor([1., 2.]), an index interpolate builds): a constant, its
 * values as this call made them, which hold for every call that passes
 * the guards (the Python values it came from are guarded: literals,
 * arguments by value, state by capture.c, tensor values by value guards);
 * the graph takes a private copy of it as an input, never written back.
 * Over memory ember does not own (ember.from_numpy of an array the
 * function reaches): that memory, by reference, as a captured tensor. */
static em_ir_value *constant(em_tracer *tr, em_tensor *t) {
    born_remove(tr, t);
    if (!em_storage_is_own(t->storage)) return capture(tr, t, EM_CAPTURE_TENSOR, -1, NULL);
    const em_trace_hook *h = em_set_trace_hook(NULL); /* (the copy is no op of the function's) */
    bool was = em_set_grad_enabled(false);
    em_tensor *copy = em_clone(t);
    em_set_grad_enabled(was);
    em_set_trace_hook(h);
    if (!copy) return NULL;
    char name[32];
    snprintf(name, sizeof name, "constant%d", tr->n_captured);
    em_ir_value *v = capture(tr, copy, EM_CAPTURE_TENSOR, -1, name);
    em_tensor_release(copy); /* (the capture holds it) */
    if (v) bind(tr, t, v);
    born_remove(tr, t); /* (kept by whoever made it: not state of the function's) */
    return v;
}

static em_ir_value *emit(em_tracer *tr, em_op op, em_ir_value *const *vin, int n_in, const em_attrs *attrs);

/* Where tensor t lies in a mark's memory: its first element's index in
 * flat, or -1 when it does not lie inside (or is of another dtype). */
static int64_t place_in_memory(const struct mark *m, const em_tensor *t) {
    int64_t off = t->offset - m->offset, last = off;
    if (t->dtype != m->flat->type.dtype || off < 0) return -1;
    for (int d = 0; d < t->ndim; d++) {
        if (t->shape[d] == 0) return off < m->numel ? off : -1;
        if (t->strides[d] < 0) return -1;
        last += (t->shape[d] - 1) * t->strides[d];
    }
    return last < m->numel ? off : -1;
}

/* Does t cover the mark's memory exactly, element for element? */
static bool is_whole_memory(const struct mark *m, const em_tensor *t) {
    return t->offset == m->offset && t->numel == m->numel && em_tensor_is_contiguous(t);
}

static em_ir_value *reshaped(em_tracer *tr, em_ir_value *v, const int64_t *shape, int ndim) {
    if (em_shape_eq(v->type.shape, v->type.ndim, shape, ndim)) return v;
    em_attrs a;
    memset(&a, 0, sizeof a);
    a.n_shape = ndim;
    memcpy(a.shape, shape, (size_t)ndim * sizeof *shape);
    return emit(tr, EM_OP_RESHAPE, &v, 1, &a);
}

/* Tensor t's values now: a view of the memory's newest value. */
static em_ir_value *view_of_memory(em_tracer *tr, const struct mark *m, const em_tensor *t) {
    int64_t off = place_in_memory(m, t);
    if (off < 0) return NULL;
    if (is_whole_memory(m, t)) return reshaped(tr, m->flat, t->shape, t->ndim);
    em_attrs a;
    memset(&a, 0, sizeof a);
    a.n_shape = a.n_stride = t->ndim;
    memcpy(a.shape, t->shape, (size_t)t->ndim * sizeof *t->shape);
    memcpy(a.stride, t->strides, (size_t)t->ndim * sizeof *t->strides);
    a.offset = off;
    em_ir_value *flat = m->flat;
    return emit(tr, EM_OP_AS_STRIDED, &flat, 1, &a);
}

/* The graph value of tensor t, creating a constant or captured input. */
static em_ir_value *value_of(em_tracer *tr, em_tensor *t, const char *op) {
    if (em_trace_gen(t) == tr->gen) {
        for (int i = 0; i < tr->n_marks; i++)
            if (tr->marks[i].s == t->storage && (int)em_trace_value(t) < tr->marks[i].id) {
                em_ir_value *v = tr->marks[i].flat ? view_of_memory(tr, &tr->marks[i], t) : NULL;
                if (v) {
                    bind(tr, t, v);
                    return v;
                }
                em_trace_fail(tr,
                              "%s: reads a view of a tensor (or an alias such as its detach()) "
                              "taken before the function updated that tensor in place; such "
                              "reads are not traced yet (take the view after the update)",
                              op);
                return NULL;
            }
        return tr->values[em_trace_value(t)];
    }
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
    if (t->serial >= tr->serial_start) return constant(tr, t);
    return capture(tr, t, EM_CAPTURE_TENSOR, -1, NULL);
}

/* The most operands or results one op takes (dispatch's bound, MAX_IO):
 * cat and stack of more are trees of cats (ember/_ops.py). */
#define EM_TRACE_MAX_OPERANDS 64

/* Compiled code runs on the CPU: an op with a tensor elsewhere (meta) fails
 * the trace, and calls like it run eagerly. True when it did. */
static bool off_the_cpu(em_tracer *tr, const char *name, em_tensor *const *ts, int n) {
    for (int i = 0; i < n; i++)
        if (ts[i] && ts[i]->device.type != EM_DEVICE_CPU) {
            char dev[16];
            em_trace_fail(tr, "%s: a tensor on %s: compiled code runs on the CPU only, so calls like this one run "
                          "eagerly", name, em_device_str(ts[i]->device, dev));
            return true;
        }
    return false;
}

static void on_op(void *ctx, em_op op, em_tensor *const *in, int n_in, const em_attrs *attrs,
                  em_tensor *const *out, int n_out) {
    em_tracer *tr = ctx;
    if (tr->failed) return;
    const em_op_info *info = em_op_get(op);
    if (off_the_cpu(tr, info->name, in, n_in) || off_the_cpu(tr, info->name, out, n_out)) return;
    if (info->flags & EM_F_DATA_DEPENDENT) {
        em_trace_fail(tr,
                      "%s: its result's shape depends on the input's values, which a compiled "
                      "graph cannot know in advance",
                      info->name);
        return;
    }
    em_ir_value *vin[EM_TRACE_MAX_OPERANDS];
    em_type types[EM_TRACE_MAX_OPERANDS];
    if (n_in > EM_TRACE_MAX_OPERANDS || n_out > EM_TRACE_MAX_OPERANDS) { /* (dispatch's own bound) */
        em_trace_fail(tr, "%s: more than %d operands", info->name, EM_TRACE_MAX_OPERANDS);
        return;
    }
    for (int i = 0; i < n_in; i++)
        if (!(vin[i] = value_of(tr, in[i], info->name))) {
            em_trace_fail(tr, "%s: %s", info->name, em_last_error());
            return;
        }
    for (int i = 0; i < n_out; i++) types[i] = em_tensor_type(out[i]);
    em_clear_error();
    em_ir_node *n = em_ir_node_new(tr->g, op, vin, n_in, attrs, types, n_out, current_loc(tr));
    if (!n) { /* (out of memory, or an attribute the IR cannot keep) */
        em_trace_fail(tr, "%s: %s", info->name, em_last_status() != EM_OK ? em_last_error() : "out of memory while tracing");
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

/* Appends a node computing op(vin) to the graph; its result value. */
static em_ir_value *emit(em_tracer *tr, em_op op, em_ir_value *const *vin, int n_in, const em_attrs *attrs) {
    em_type in_types[EM_TRACE_MAX_OPERANDS], out_type;
    if (n_in > EM_TRACE_MAX_OPERANDS) return NULL;
    for (int i = 0; i < n_in; i++) in_types[i] = vin[i]->type;
    if (em_op_infer(op, in_types, n_in, attrs, &out_type, 1) != EM_OK) return NULL;
    em_ir_node *n = em_ir_node_new(tr->g, op, vin, n_in, attrs, &out_type, 1, current_loc(tr));
    if (!n || !remember(tr, n->out[0])) return NULL;
    em_ir_insert(tr->g->body, n, NULL);
    return n->out[0];
}

static bool same_geometry(const em_tensor *a, const em_tensor *b) {
    return a->offset == b->offset && a->dtype == b->dtype && em_shape_eq(a->shape, a->ndim, b->shape, b->ndim) &&
           memcmp(a->strides, b->strides, (size_t)a->ndim * sizeof *a->strides) == 0;
}

static int mark_of(const em_tracer *tr, const em_storage *s) {
    for (int i = 0; i < tr->n_marks; i++)
        if (tr->marks[i].s == s) return i;
    return -1;
}

/* A new mark for storage s, holding a reference on it (struct mark); its
 * index, or -1 with the trace failed when memory runs out. */
static int add_mark(em_tracer *tr, em_storage *s) {
    if (!room_for_one(tr, (void **)&tr->marks, tr->n_marks, sizeof *tr->marks)) return -1;
    em_storage_retain(s);
    tr->marks[tr->n_marks] = (struct mark){s, 0, NULL, 0, 0, NULL, {0}};
    return tr->n_marks++;
}

/* Does t reach one element through two indices (a broadcast, an overlapping
 * as_strided)? Its dims by stride, each must step past all the smaller ones. */
static bool overlapping(const em_tensor *t) {
    int idx[EM_MAX_DIMS], n = 0;
    for (int d = 0; d < t->ndim; d++)
        if (t->shape[d] > 1) idx[n++] = d;
    for (int i = 1; i < n; i++)
        for (int j = i; j > 0 && t->strides[idx[j]] < t->strides[idx[j - 1]]; j--) {
            int x = idx[j];
            idx[j] = idx[j - 1];
            idx[j - 1] = x;
        }
    int64_t extent = 1; /* the elements the dims so far reach */
    for (int k = 0; k < n; k++) {
        int d = idx[k];
        if (t->strides[d] < extent) return true;
        extent += (t->shape[d] - 1) * t->strides[d];
    }
    return false;
}

/* The memory under `out` as SSA (struct mark): its root is the input or
 * captured tensor over that storage, or (memory born in the trace) the
 * live tensor that owns it, and must be contiguous. The mark's index, or
 * -1 where there is no such root. */
static int new_memory(em_tracer *tr, em_tensor *out, bool source) {
    em_tensor *root = NULL;
    bool input = false;
    if (source) {
        if (holds(tr->aliased, tr->n_aliased, out->storage)) return -1;
        for (int i = 0; i < tr->n_source_tensors && !root; i++)
            if (tr->source_tensors[i]->storage == out->storage) root = (em_tensor *)tr->source_tensors[i];
        input = true;
    } else if (!out->is_view) {
        root = out;
    } else {
        for (size_t h = 0; h < tr->born_cap && !root; h++) {
            const em_tensor *x = tr->born[h];
            if (x && x != TOMB && x->storage == out->storage && !x->is_view) root = (em_tensor *)x;
        }
    }
    if (!root || !em_tensor_is_contiguous(root) || root->dtype != out->dtype) return -1;
    em_ir_value *rv = value_of(tr, root, "a write into a view");
    int64_t numel = root->numel;
    em_ir_value *flat = rv ? reshaped(tr, rv, &numel, 1) : NULL;
    if (!flat) {
        em_trace_fail(tr, "out of memory while tracing");
        return -1;
    }
    int m = mark_of(tr, out->storage);
    if (m < 0 && (m = add_mark(tr, out->storage)) < 0) return -1;
    struct mark *mk = &tr->marks[m];
    mk->flat = flat;
    mk->offset = root->offset;
    mk->numel = numel;
    mk->root = input ? root : NULL;
    mk->root_type = em_tensor_type(root);
    return m;
}

/* A write-back of input `t`'s new value v at the end of the call. */
static void record_write(em_tracer *tr, em_tensor *t, em_ir_value *v, const char *name) {
    for (int i = 0; i < tr->n_writes; i++)
        if (tr->writes[i].t == t) {
            tr->writes[i].value = v;
            return;
        }
    int param = -1;
    for (int i = 0; i < tr->n_source_tensors && param < 0; i++)
        if (tr->source_tensors[i] == t) param = tr->source_index[i];
    if (param < 0) {
        em_trace_fail(tr, "%s_: internal error, a written input has no graph input", name);
        return;
    }
    if (!room_for_one(tr, (void **)&tr->writes, tr->n_writes, sizeof *tr->writes)) return;
    tr->writes[tr->n_writes++] = (struct write){t, param, v};
}

/* out's new values v, written into memory m: a new value of the whole
 * memory, which the tensors over it read from now on (value_of). */
static void write_memory(em_tracer *tr, struct mark *m, em_tensor *out, em_ir_value *v, int first_id,
                         const char *name) {
    int64_t off = place_in_memory(m, out);
    bool whole = off >= 0 && is_whole_memory(m, out);
    if (off < 0 || (!whole && overlapping(out))) {
        em_trace_fail(tr,
                      "%s_ writes into a view that %s; such writes are not traced yet", name,
                      off < 0 ? "reaches past the tensor it was taken from (or reads it as another dtype)"
                              : "reaches one element more than once");
        return;
    }
    em_ir_value *flat;
    if (whole) {
        flat = reshaped(tr, v, &m->numel, 1);
    } else {
        em_attrs a;
        memset(&a, 0, sizeof a);
        a.n_stride = out->ndim;
        memcpy(a.stride, out->strides, (size_t)out->ndim * sizeof *out->strides);
        a.offset = off;
        em_ir_value *ins[2] = {m->flat, v};
        flat = emit(tr, EM_OP_AS_STRIDED_SCATTER, ins, 2, &a);
    }
    if (!flat) {
        em_trace_fail(tr, "%s_: %s", name, em_last_error());
        return;
    }
    m->flat = flat;
    m->id = first_id;
    bind(tr, out, v);
    if (!m->root) return;
    em_ir_value *rv = whole ? reshaped(tr, v, m->root_type.shape, m->root_type.ndim)
                            : reshaped(tr, flat, m->root_type.shape, m->root_type.ndim);
    if (!rv) {
        em_trace_fail(tr, "%s_: %s", name, em_last_error());
        return;
    }
    bind(tr, m->root, rv);
    record_write(tr, m->root, rv, name);
}

/* An in-place op as SSA: out's new value is op(in), cast to out's dtype and
 * broadcast to its shape; later reads of out see it, and an input or
 * captured tensor written this way gets a write-back. Writes the graph
 * could not model (into a view, or into memory another tensor of the trace
 * also sees) fail the trace. */
/* Is t referenced only by views that name it as their base (tensor.h)? The
 * user no longer holds it; its views keep it for autograd's sake. */
static bool alive_only_as_a_base(const em_tensor *t) {
    int64_t views = __atomic_load_n(&t->view_refs, __ATOMIC_ACQUIRE);
    return views > 0 && __atomic_load_n(&t->refcount, __ATOMIC_ACQUIRE) == views;
}

static void on_inplace(void *ctx, em_op op, em_tensor *const *in, int n_in, const em_attrs *attrs,
                       em_tensor *out) {
    em_tracer *tr = ctx;
    if (tr->failed) return;
    const em_op_info *info = em_op_get(op);
    const char *name = info->kind == EM_KIND_CAST ? "copy" : info->name;
    if (off_the_cpu(tr, name, in, n_in) || off_the_cpu(tr, name, &out, 1)) return;
    if (n_in > EM_TRACE_MAX_OPERANDS) {
        em_trace_fail(tr, "%s_: more than %d operands", name, EM_TRACE_MAX_OPERANDS);
        return;
    }
    em_ir_value *vin[EM_TRACE_MAX_OPERANDS];
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
    /* `p.data.add_(...)`: a write through an alias of a source with the very
     * source's geometry is a write to the source itself */
    em_tensor *target = out;
    if (source && !is_source_itself && !holds(tr->aliased, tr->n_aliased, out->storage))
        for (int i = 0; i < tr->n_source_tensors; i++) {
            const em_tensor *s = tr->source_tensors[i];
            if (s->storage == out->storage && same_geometry(s, out)) {
                target = (em_tensor *)s;
                is_source_itself = true;
                if (!(old = value_of(tr, target, name))) return; /* (its graph input: the write-back's) */
                break;
            }
        }
    /* (autograd's saved results hold the memory too, but a write makes them
     * unusable rather than changes them: their value is the one saved) */
    int64_t holders = out->storage->refcount - __atomic_load_n(&out->storage->saved_refs, __ATOMIC_RELAXED) -
                      (mark_of(tr, out->storage) >= 0); /* (nor does a mark: struct mark) */
    /* (nor does a base that only its views keep alive: of one storage's
     * tensors only the root can be that, and views name it) */
    if (out->view_base && alive_only_as_a_base(out->view_base)) holders--;
    bool shared = source ? !is_source_itself || holds(tr->aliased, tr->n_aliased, out->storage)
                         : holders > 1; /* (views of an input are watched by marks) */
    /* (a view whose storage nothing else holds, such as a gradient the
     * engine adopted, is as good as a tensor of its own) */
    bool conflict = (out->is_view && holders > 1) || shared;
    int m = mark_of(tr, out->storage);
    if ((m < 0 || !tr->marks[m].flat) && (conflict || (source && is_source_itself)))
        m = new_memory(tr, out, source);
    if (tr->failed) return;
    bool memory = m >= 0 && tr->marks[m].flat;
    if (conflict && !memory) {
        em_trace_fail(tr,
                      "%s_ writes into a tensor that shares its memory with another one the "
                      "function uses (the same tensor passed twice, or views of memory that no "
                      "contiguous tensor of the function covers); such writes are not traced yet",
                      name);
        return;
    }
    int first_id = tr->g->n_values; /* (the id the write's first value gets) */
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
    if (memory) {
        write_memory(tr, &tr->marks[m], out, v, first_id, name);
        return;
    }
    bind(tr, out, v);
    if (target != out) bind(tr, target, v);
    if (!source) return; /* an intermediate: rebinding is all */
    if ((m = mark_of(tr, out->storage)) < 0 && (m = add_mark(tr, out->storage)) < 0)
        return; /* (a source not contiguous: no memory as SSA) */
    tr->marks[m].id = v->id;
    for (int i = 0; i < tr->n_writes; i++)
        if (tr->writes[i].t == target) {
            tr->writes[i].value = v;
            return;
        }
    if (old->def) { /* (an input's first write: its value is still the graph input) */
        em_trace_fail(tr, "%s_: internal error, a written input has no graph input", name);
        return;
    }
    if (!room_for_one(tr, (void **)&tr->writes, tr->n_writes, sizeof *tr->writes)) return;
    tr->writes[tr->n_writes++] = (struct write){target, old->index, v};
}

/* The graph input index of t if it is an input a call can reach again (an
 * argument, as proxy or as the caller's original, or a captured tensor,
 * capturing it if it is older than the trace); -1 for tensors born in the
 * trace and aliases of inputs, whose state dies with the call. */
static int input_index(em_tracer *tr, em_tensor *t) {
    for (int i = 0; i < tr->n_source_tensors; i++)
        if (tr->source_tensors[i] == t) return tr->source_index[i];
    for (int i = 0; i < tr->n_args; i++)
        if (tr->originals[i] == t) return i;
    if (em_trace_gen(t) == tr->gen || t->serial >= tr->serial_start) return -1;
    em_ir_value *v = capture(tr, t, EM_CAPTURE_TENSOR, -1, NULL);
    return v ? v->index : -1;
}

static struct slot *slot_of(em_tracer *tr, const em_tensor *t) {
    for (int i = 0; i < tr->n_slots; i++)
        if (tr->slots[i].obj == t) return &tr->slots[i];
    return NULL;
}

/* t's .grad is read or about to be replaced: the first time, its state
 * then becomes the slot's guarded initial state (a read) or is ignored (a
 * replacement). */
static void on_grad(em_tracer *tr, em_tensor *t, bool read) {
    if (slot_of(tr, t)) return;
    int owner = input_index(tr, t);
    if (owner < 0) return;
    if (!room_for_one(tr, (void **)&tr->slots, tr->n_slots, sizeof *tr->slots)) return;
    struct slot *s = &tr->slots[tr->n_slots++];
    *s = (struct slot){t, owner, EM_SLOT_UNREAD, NULL};
    if (!read) return;
    if (!em_tensor_grad(t)) {
        s->initial = EM_SLOT_NONE;
        return;
    }
    if (em_trace_gen(em_tensor_grad(t)) == tr->gen) {
        em_trace_fail(tr, ".grad: the gradient of an input is also another input of the function; "
                          "such sharing is not traced");
        return;
    }
    em_ir_value *v = capture(tr, em_tensor_grad(t), EM_CAPTURE_GRAD, owner, NULL);
    if (!v) {
        em_trace_fail(tr, "out of memory while tracing");
        return;
    }
    s->initial = v->index;
    s->initial_grad = em_tensor_grad(t);
}

/* A host read of t's values: Python acts on them, so the graph guards them. */
static void on_host_read(em_tracer *tr, const char *what, const em_tensor *ct) {
    em_tensor *t = (em_tensor *)ct; /* (value_of binds; the values are not touched) */
    if (!t) {
        em_trace_fail(tr, "%s reads values on the host that a compiled graph cannot guard", what);
        return;
    }
    em_ir_value *v = value_of(tr, t, what);
    if (!v) {
        em_trace_fail(tr, "%s: %s", what, em_last_error());
        return;
    }
    const em_trace_hook *h = em_set_trace_hook(NULL); /* (copying is not the function's op) */
    em_tensor *seen = em_clone(t);
    em_set_trace_hook(h);
    size_t len = strlen(what) + 1;
    char *w = em_malloc(len);
    if (!seen || !w || !room_for_one(tr, (void **)&tr->guards, tr->n_guards, sizeof *tr->guards)) {
        em_tensor_release(seen);
        em_free(w);
        em_trace_fail(tr, "out of memory while tracing");
        return;
    }
    memcpy(w, what, len);
    tr->guards[tr->n_guards++] = (struct value_guard){v, seen, w};
}

static void on_event(void *ctx, em_trace_event ev, const char *what, const em_tensor *t) {
    em_tracer *tr = ctx;
    if (tr->failed) return;
    switch (ev) {
    case EM_EVENT_RNG_SWAP:
        em_trace_fail(tr,
                      "%s draws from an ember.Generator inside a compiled function; compiled "
                      "graphs draw from the global stream (ember.manual_seed) only, for now",
                      what);
        return;
    case EM_EVENT_HOST_SYNC: on_host_read(tr, what, t); return;
    case EM_EVENT_GRAD_READ:
    case EM_EVENT_GRAD_WRITE: on_grad(tr, (em_tensor *)t, ev == EM_EVENT_GRAD_READ); return;
    case EM_EVENT_ALIAS:
        if (t->serial >= tr->serial_start && !born_add(tr, t)) em_trace_fail(tr, "out of memory while tracing");
        return;
    case EM_EVENT_MUTATION: /* state changed by something that is not an op */
        em_trace_fail(tr,
                      "%s inside a compiled function changes state outside any ember op, so a "
                      "compiled graph could not repeat it (not traced yet)",
                      what);
        return;
    }
}

static void on_free(void *ctx, const em_tensor *t) {
    em_tracer *tr = ctx;
    if (em_trace_gen(t) == tr->gen) born_remove(tr, t);
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
    tr->clock_start = em_autograd_clock();
    tr->loc_fn = loc;
    tr->loc_ctx = loc_ctx;
    tr->hook = (em_trace_hook){on_op, on_event, tr, on_inplace, on_free};
    tr->prev_hook = em_set_trace_hook(&tr->hook);
    active = tr;
    return tr;
}

em_status em_trace_snapshot_captures(em_tracer *tr, em_tensor *const *known, int n) {
    tr->snapshots = true;
    tr->pre = em_calloc((size_t)n + 1, sizeof *tr->pre);
    tr->pre_copy = em_calloc((size_t)n + 1, sizeof *tr->pre_copy);
    if (!tr->pre || !tr->pre_copy) return em_error(EM_ERR_NOMEM, "out of memory copying the state");
    const em_trace_hook *h = em_set_trace_hook(tr->prev_hook);
    for (int i = 0; i < n; i++, tr->n_pre++) {
        if (!(tr->pre_copy[i] = em_clone(known[i]))) break;
        em_tensor_retain(tr->pre[i] = known[i]);
    }
    em_set_trace_hook(h);
    return tr->n_pre == n ? EM_OK : em_last_status();
}

em_status em_trace_add_input(em_tracer *tr, em_tensor *t, const char *name, const em_tensor *original) {
    if (tr->n_captured) return em_error(EM_ERR_INTERNAL, "trace: arguments come before captured tensors");
    em_type ty = em_tensor_type(t);
    em_ir_value *v = em_ir_add_param(tr->g->body, &ty, name);
    if (!v || !remember(tr, v) || !note_source(tr, t, v->index) ||
        !push_ptr((void ***)&tr->originals, &tr->n_args, (void *)original))
        return EM_ERR_NOMEM;
    bind(tr, t, v);
    return EM_OK;
}

int em_trace_add_external(em_tracer *tr, em_tensor *t, const char *name) {
    if (em_trace_gen(t) == tr->gen) {
        em_error(EM_ERR_VALUE, "trace: an external input must be a new tensor");
        return -1;
    }
    em_ir_value *v = capture(tr, t, EM_CAPTURE_EXTERNAL, -1, name);
    if (!v) {
        em_trace_fail(tr, "out of memory while tracing");
        return -1;
    }
    return tr->n_captured - 1;
}

void em_trace_result_clear(em_trace_result *res) {
    em_ir_graph_free(res->graph);
    em_free(res->writes);
    em_free(res->returned_writes);
    em_free(res->returned_views);
    for (int i = 0; i < res->n_captured; i++) {
        em_tensor_release(res->captured[i].tensor);
        em_tensor_release(res->captured[i].snapshot);
    }
    em_free(res->captured);
    for (int i = 0; i < res->n_value_guards; i++) {
        em_tensor_release(res->value_guards[i]);
        em_free((char *)res->value_guard_what[i]);
    }
    em_free(res->value_guards);
    em_free(res->value_guard_what);
    em_free(res->slots);
    em_free(res->grad_inputs);
    memset(res, 0, sizeof *res);
}

static void tracer_free(em_tracer *tr) {
    em_ir_graph_free(tr->g);
    for (int i = 0; i < tr->n_captured; i++) {
        em_tensor_release(tr->captured[i].tensor);
        em_tensor_release(tr->captured[i].snapshot);
    }
    for (int i = 0; i < tr->n_pre; i++) {
        em_tensor_release(tr->pre[i]);
        em_tensor_release(tr->pre_copy[i]);
    }
    em_free(tr->pre);
    em_free(tr->pre_copy);
    em_free(tr->captured);
    em_free(tr->originals);
    em_free(tr->values);
    em_free(tr->sources);
    em_free(tr->aliased);
    for (int i = 0; i < tr->n_marks; i++) em_storage_release(tr->marks[i].s);
    em_free(tr->marks);
    em_free(tr->source_tensors);
    em_free(tr->source_index);
    em_free(tr->writes);
    em_free(tr->slots);
    for (int i = 0; i < tr->n_guards; i++) {
        em_tensor_release(tr->guards[i].seen);
        em_free(tr->guards[i].what);
    }
    em_free(tr->guards);
    em_free(tr->born);
    for (int i = 0; i < tr->n_input_grads; i++) em_tensor_release(tr->input_grads[i]);
    em_free(tr->input_grads);
    em_free(tr->grad_inputs);
    em_free(tr);
}

/* A live tensor born in the trace that is neither a result nor a gradient
 * the trace leaves in a .grad: kept by the function (NULL if none). */
static const em_tensor *first_escape(em_tracer *tr, em_tensor *const *outputs, int n_out, int *count) {
    const em_tensor *first = NULL;
    *count = 0;
    for (size_t i = 0; i < tr->born_cap; i++) {
        const em_tensor *t = tr->born[i];
        if (!t || t == TOMB || em_trace_gen(t) != tr->gen) continue;
        if (alive_only_as_a_base(t)) continue; /* (what keeps its views is what counts) */
        bool kept = false;
        for (int k = 0; k < n_out && !kept; k++) kept = outputs[k] == t;
        for (int k = 0; k < tr->n_slots && !kept; k++) kept = em_tensor_grad(tr->slots[k].obj) == t;
        if (kept) continue;
        if (!first) first = t;
        ++*count;
    }
    return first;
}

int em_trace_count_escapes(em_tracer *tr, em_tensor *const *outputs, int n_out) {
    int n;
    first_escape(tr, outputs, n_out, &n);
    return n;
}

/* Fails the trace if the function kept a tensor it made (see first_escape). */
static void check_escapes(em_tracer *tr, em_tensor *const *outputs, int n_out) {
    int n;
    const em_tensor *t = first_escape(tr, outputs, n_out, &n);
    if (!t || tr->failed) return;
    char shape[128], where[300] = "";
    em_shape_str(t->shape, t->ndim, shape, sizeof shape);
    const em_ir_value *v = em_trace_value(t) < (uint32_t)tr->cap_values ? tr->values[em_trace_value(t)] : NULL;
    if (v && v->def) {
        const em_ir_node *d = v->def;
        int k = snprintf(where, sizeof where, ", made by %s", em_op_name(d->op));
        if (d->loc.file) snprintf(where + k, sizeof where - (size_t)k, " at %s:%d", d->loc.file, d->loc.line);
    }
    em_trace_fail(tr,
                  "the function keeps %d tensor%s it created (%s %s%s) alive after it returns, in "
                  "an attribute, a list or a dict (optimizer state, a cached buffer); a compiled "
                  "graph could not recreate %s. This call ran eagerly; the next one traces again, "
                  "with that state in place",
                  n, n == 1 ? "" : "s", em_dtype_name(t->dtype), shape, where, n == 1 ? "it" : "them");
    tr->retry = true;
}

/* Outputs that are views of a written input (not the input itself): their
 * geometry relative to it, for the caller to return that view after the
 * write-back (em_trace_result.returned_views). False only out of memory. */
static bool note_returned_views(em_tracer *tr, em_tensor *const *outputs, int n_out, em_trace_result *res) {
    for (int i = 0; i < n_out; i++)
        for (int w = 0; w < tr->n_writes; w++) {
            const em_tensor *o = outputs[i], *t = tr->writes[w].t;
            if (o == t || o->storage != t->storage || res->returned_writes[i] >= 0) continue;
            if (!res->returned_views) {
                if (!(res->returned_views = em_calloc((size_t)n_out, sizeof *res->returned_views))) return false;
                for (int j = 0; j < n_out; j++) res->returned_views[j].write = -1;
            }
            em_returned_view *r = &res->returned_views[i];
            *r = (em_returned_view){w, o->offset - t->offset, o->ndim, t->ndim, {0}, {0}, {0}, {0}};
            memcpy(r->shape, o->shape, (size_t)o->ndim * sizeof *o->shape);
            memcpy(r->strides, o->strides, (size_t)o->ndim * sizeof *o->strides);
            memcpy(r->input_shape, t->shape, (size_t)t->ndim * sizeof *t->shape);
            memcpy(r->input_strides, t->strides, (size_t)t->ndim * sizeof *t->strides);
            break;
        }
    return true;
}

em_tensor *em_returned_view_of(const em_returned_view *r, em_tensor *input) {
    if (input->ndim != r->input_ndim || !em_shape_eq(input->shape, input->ndim, r->input_shape, r->input_ndim) ||
        memcmp(input->strides, r->input_strides, (size_t)r->input_ndim * sizeof *r->input_strides) != 0 ||
        input->offset + r->offset < 0)
        return NULL;
    return em_tensor_alias(input, input->offset + r->offset, r->shape, r->strides, r->ndim);
}

static bool fill_result(em_tracer *tr, em_tensor *const *outputs, int n_out, em_trace_result *res) {
    int n_res = n_out + tr->n_guards + tr->n_writes + tr->n_slots + tr->n_input_grads;
    em_ir_value **vals = em_malloc((size_t)(n_res ? n_res : 1) * sizeof *vals);
    res->slots = em_malloc((size_t)(tr->n_slots ? tr->n_slots : 1) * sizeof *res->slots);
    if (!vals || !res->slots) goto nomem;
    int k = 0;
    for (int i = 0; i < n_out && !tr->failed; i++) vals[k++] = value_of(tr, outputs[i], "return");
    for (int i = 0; i < tr->n_guards; i++) vals[k++] = tr->guards[i].value;
    for (int i = 0; i < tr->n_writes; i++) vals[k++] = tr->writes[i].value;
    for (int i = 0; i < tr->n_slots && !tr->failed; i++) {
        const struct slot *s = &tr->slots[i];
        em_grad_slot *r = &res->slots[res->n_slots++];
        *r = (em_grad_slot){s->owner, s->initial, EM_SLOT_NONE};
        em_tensor *g = em_tensor_grad(s->obj);
        if (!g) continue;
        if (s->initial >= 0 && g == s->initial_grad) {
            r->final = EM_SLOT_KEEP;
            continue;
        }
        r->final = k;
        vals[k++] = value_of(tr, g, ".grad");
    }
    for (int i = 0; i < tr->n_input_grads && !tr->failed; i++) vals[k++] = value_of(tr, tr->input_grads[i], "backward");
    if (tr->failed) goto fail;
    if (tr->n_input_grads) {
        if (!(res->grad_inputs = em_malloc((size_t)tr->n_input_grads * sizeof *res->grad_inputs))) goto nomem;
        memcpy(res->grad_inputs, tr->grad_inputs, (size_t)tr->n_input_grads * sizeof *res->grad_inputs);
        res->n_input_grads = tr->n_input_grads;
    }
    res->n_grad_outputs = tr->n_grad_outputs;
    if (em_ir_set_results(tr->g->body, vals, k) != EM_OK) goto nomem;
    em_free(vals);
    vals = NULL;
    if (tr->n_writes) {
        if (!(res->writes = em_malloc((size_t)tr->n_writes * sizeof *res->writes))) goto nomem;
        for (int i = 0; i < tr->n_writes; i++) res->writes[i] = tr->writes[i].param;
        res->n_writes = tr->n_writes;
        if (n_out && !(res->returned_writes = em_malloc((size_t)n_out * sizeof *res->returned_writes)))
            goto nomem;
        for (int i = 0; res->returned_writes && i < n_out; i++) {
            res->returned_writes[i] = -1;
            for (int w = 0; w < tr->n_writes; w++)
                if (outputs[i] == tr->writes[w].t) res->returned_writes[i] = w;
        }
        if (!note_returned_views(tr, outputs, n_out, res)) goto nomem;
    }
    if (tr->n_guards) {
        res->value_guards = em_malloc((size_t)tr->n_guards * sizeof *res->value_guards);
        res->value_guard_what = em_malloc((size_t)tr->n_guards * sizeof *res->value_guard_what);
        if (!res->value_guards || !res->value_guard_what) goto nomem;
        for (int i = 0; i < tr->n_guards; i++) {
            res->value_guards[i] = tr->guards[i].seen;
            res->value_guard_what[i] = tr->guards[i].what;
        }
        res->n_value_guards = tr->n_guards;
        tr->n_guards = 0; /* moved */
    }
    return true;
nomem:
    em_trace_fail(tr, "out of memory while tracing");
fail:
    em_free(vals);
    return false;
}

static void forget_born(void *tr, const em_tensor *t) { born_remove(tr, t); }

em_status em_trace_backward(em_tracer *tr, em_tensor *const *outputs, int n_out) {
    if (tr->failed) return EM_OK;
    if (tr->n_grad_outputs || n_out > EM_TRACE_MAX_GRAD_OUTPUTS) {
        em_trace_fail(tr, tr->n_grad_outputs ? "internal error: the backward was traced twice"
                                             : "it returns too many tensors that require grad");
        return EM_OK;
    }
    /* what the gradients are wanted of: the inputs that require grad */
    int n_in = 0;
    em_tensor **in = em_malloc((size_t)(tr->n_source_tensors + 1) * sizeof *in);
    int *in_index = em_malloc((size_t)(tr->n_source_tensors + 1) * sizeof *in_index);
    em_tensor **grads = em_calloc((size_t)(tr->n_source_tensors + 1), sizeof *grads);
    em_tensor *roots[EM_TRACE_MAX_GRAD_OUTPUTS], *seeds[EM_TRACE_MAX_GRAD_OUTPUTS];
    int n_roots = 0;
    if (!in || !in_index || !grads) {
        em_trace_fail(tr, "out of memory while tracing");
        goto done;
    }
    for (int i = 0; i < tr->n_source_tensors; i++)
        if (em_requires_grad(tr->source_tensors[i])) {
            in[n_in] = (em_tensor *)tr->source_tensors[i];
            in_index[n_in++] = tr->source_index[i];
        }
    /* each result's gradient: an input of the graph, ones for this run */
    const em_trace_hook *h = em_set_trace_hook(tr->prev_hook);
    for (int i = 0; i < n_out && !tr->failed; i++) {
        em_tensor *o = outputs[i];
        if (!em_requires_grad(o) || !em_autograd_graph_live(o)) continue;
        em_tensor *seed = em_ones(o->shape, o->ndim, o->dtype);
        em_set_trace_hook(h);
        if (!seed || !capture(tr, seed, EM_CAPTURE_GRAD_OUTPUT, i, NULL)) em_trace_fail(tr, "out of memory while tracing");
        em_set_trace_hook(tr->prev_hook);
        em_tensor_release(seed); /* (the capture holds it) */
        roots[n_roots] = o;
        seeds[n_roots++] = seed;
        tr->n_grad_outputs++;
    }
    em_set_trace_hook(h);
    if (tr->failed) goto done;
    if (em_autograd_grad_within(roots, seeds, n_roots, in, n_in, grads) != EM_OK) {
        em_trace_fail(tr, "its backward cannot be traced: %s", em_last_error());
        goto done;
    }
    tr->input_grads = grads;
    tr->grad_inputs = in_index;
    for (int i = 0; i < n_in; i++)
        if (grads[i]) {
            born_remove(tr, grads[i]); /* (results, not state) */
            grads[tr->n_input_grads] = grads[i];
            in_index[tr->n_input_grads++] = in_index[i];
        }
    grads = NULL;
    in_index = NULL;
    /* the forward's saved tensors live on with the results' history */
    if (em_autograd_visit_saved(outputs, n_out, tr->clock_start, forget_born, tr) != EM_OK)
        em_trace_fail(tr, "out of memory while tracing");
done:
    em_free(in);
    em_free(in_index);
    em_free(grads);
    return EM_OK;
}

em_status em_trace_end(em_tracer *tr, em_tensor *const *outputs, int n_out, em_trace_result *res) {
    memset(res, 0, sizeof *res);
    for (int i = 0; i < n_out && !tr->failed && !tr->n_grad_outputs; i++)
        if (em_autograd_graph_live(outputs[i]))
            em_trace_fail(tr, "the function returns a tensor with autograd history (result %d) that "
                              "a later backward() could use; compiled graphs do not build autograd "
                              "graphs, so such functions run eagerly (call backward() inside the "
                              "function, or run it under ember.no_grad())", i);
    check_escapes(tr, outputs, n_out);
    em_set_trace_hook(tr->prev_hook);
    if (active == tr) active = NULL;
    if (n_out > 4096 || tr->n_writes > 4096) em_trace_fail(tr, "the function returns or writes into too many tensors");
    res->n_out = n_out;
    if (!tr->failed && fill_result(tr, outputs, n_out, res) && em_ir_verify(tr->g) != EM_OK)
        em_trace_fail(tr, "internal error, the traced graph does not verify: %s", em_last_error());
    if (tr->failed) {
        bool retry = tr->retry;
        em_status st = em_error(EM_ERR_NOT_IMPLEMENTED, "%s", tr->reason);
        em_trace_result_clear(res);
        res->retry = retry;
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
