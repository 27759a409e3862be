/*
 * engine.c - autograd nodes, recording, and the backward engine.
 *
 * Recording (record, autograd's interceptor: dispatch calls it after each
 * op the user runs, ops.h): a node per
 * differentiable op whose inputs require grad, with edges to the nodes that
 * made them (a leaf's edge goes to its AccumulateGrad node, one per leaf,
 * found again through the leaf's weak grad_acc pointer) and the tensors the
 * formula needs. Inputs are saved as themselves (their history is needed
 * for double backward); results are saved as history-less aliases, since a
 * result pointing at its own node would be a reference cycle.
 *
 * Backward: the nodes reachable from the outputs are counted (how many
 * edges lead into each), then run newest first as their counts reach zero.
 * Gradients arriving at a node from several edges are summed; each formula's
 * results are summed down to the input's shape and cast to its dtype before
 * they travel on. Grad mode during backward is create_graph, so a backward
 * with create_graph records the formulas' own ops.
 */
#include <stdio.h>
#include <string.h>

#include "ember/alloc.h"
#include "node.h"

static uint64_t next_seq;
static int64_t live_nodes;
static bool anomaly;               /* anomaly detection (process-wide, as PyTorch's) */
static bool anomaly_check_nan = true; /* ... and whether it checks gradients for NaN */
static char *(*origin_of)(void);  /* the host's "where am I" for anomaly mode */

int64_t em_node_live_count(void) { return __atomic_load_n(&live_nodes, __ATOMIC_RELAXED); }

/* ---- nodes ---- */

/* One allocation holds a node and its arrays (edges, types, saved
 * tensors): recording an op was seven mallocs, the node's six of them. */
static em_node *node_new(int op, int n_in, int n_out) {
    size_t ni = (size_t)(n_in ? n_in : 1), no = (size_t)(n_out ? n_out : 1);
    size_t edges = ni * sizeof(em_edge), in_types = ni * sizeof(em_type), out_types = no * sizeof(em_type);
    size_t saved_in = ni * sizeof(em_saved), saved_out = no * sizeof(em_saved);
    _Static_assert(sizeof(em_node) % 8 == 0 && sizeof(em_edge) % 8 == 0 && sizeof(em_type) % 8 == 0 &&
                       sizeof(em_saved) % 8 == 0,
                   "the arrays after a node stay 8-byte aligned");
    char *block = em_malloc(sizeof(em_node) + edges + in_types + out_types + saved_in + saved_out);
    if (!block) {
        em_error(EM_ERR_NOMEM, "autograd: out of memory for a graph node");
        return NULL;
    }
    em_node *n = (em_node *)(void *)block;
    memset(n, 0, sizeof *n);
    n->refcount = 1;
    n->seq = __atomic_fetch_add(&next_seq, 1, __ATOMIC_RELAXED);
    n->op = op;
    n->n_in = n_in;
    n->n_out = n_out;
    char *p = block + sizeof(em_node);
    n->next = (em_edge *)(void *)p;
    n->in_types = (em_type *)(void *)(p += edges);
    n->out_types = (em_type *)(void *)(p += in_types);
    n->saved_in = (em_saved *)(void *)(p += out_types);
    n->saved_out = (em_saved *)(void *)(p + saved_in);
    memset(n->next, 0, ni * sizeof *n->next);
    memset(n->saved_in, 0, ni * sizeof *n->saved_in);
    memset(n->saved_out, 0, no * sizeof *n->saved_out);
    __atomic_fetch_add(&live_nodes, 1, __ATOMIC_RELAXED);
    if (anomaly && origin_of && op != EM_OP_ACCUMULATE) n->origin = origin_of();
    return n;
}

void em_node_retain(em_node *n) {
    if (n) __atomic_fetch_add(&n->refcount, 1, __ATOMIC_RELAXED);
}

static void release_saved(em_node *n) {
    for (int i = 0; i < n->n_in; i++) {
        em_tensor_release(n->saved_in[i].t);
        n->saved_in[i].t = NULL;
    }
    for (int i = 0; i < n->n_out; i++) {
        if (n->saved_out[i].t) __atomic_sub_fetch(&n->saved_out[i].t->storage->saved_refs, 1, __ATOMIC_RELAXED);
        em_tensor_release(n->saved_out[i].t);
        n->saved_out[i].t = NULL;
    }
}

/* Frees n, and iteratively every node only it kept alive: a recursive
 * release would overflow the stack on a long graph (an RNN over 100k steps). */
void em_node_release(em_node *n) {
    em_node *stack[64], **work = stack;
    size_t cap = 64, top = 0;
    if (n) work[top++] = n;
    while (top) {
        em_node *m = work[--top];
        if (__atomic_sub_fetch(&m->refcount, 1, __ATOMIC_ACQ_REL) != 0) continue;
        for (int i = 0; i < m->n_in; i++) {
            em_node *next = m->next[i].node;
            if (!next) continue;
            if (top == cap) { /* grow the work list (never below the fixed stack) */
                em_node **bigger = em_malloc(2 * cap * sizeof *bigger);
                if (!bigger) { /* out of memory: fall back to recursion for this one */
                    em_node_release(next);
                    continue;
                }
                memcpy(bigger, work, cap * sizeof *work);
                if (work != stack) em_free(work);
                work = bigger;
                cap *= 2;
            }
            work[top++] = next;
        }
        release_saved(m);
        em_grad_hooks_free(m->hooks);
        if (m->custom_free) m->custom_free(m->custom_ctx);
        em_free(m->name);
        em_free(m->origin);
        if (m->variable) {
            em_autograd_meta *vm = em_autograd_meta_of(m->variable);
            if (vm && vm->grad_acc == m) vm->grad_acc = NULL;
            em_tensor_release(m->variable);
        }
        em_free(m); /* (its arrays with it: node_new) */
        __atomic_fetch_sub(&live_nodes, 1, __ATOMIC_RELAXED);
    }
    if (work != stack) em_free(work);
}

/* ---- tensors' autograd state ---- */

bool em_requires_grad(const em_tensor *t) {
    const em_autograd_meta *m = em_autograd_meta_of(t);
    return m && m->requires_grad;
}

em_node *em_grad_fn(const em_tensor *t) {
    const em_autograd_meta *m = em_autograd_meta_of(t);
    return m ? m->grad_fn : NULL;
}

int em_output_nr(const em_tensor *t) {
    const em_autograd_meta *m = em_autograd_meta_of(t);
    return m && m->grad_fn ? m->output_nr : 0;
}

em_tensor *em_tensor_grad(const em_tensor *t) {
    const em_autograd_meta *m = em_autograd_meta_of(t);
    return m ? m->grad : NULL;
}

bool em_tensor_retains_grad(const em_tensor *t) {
    const em_autograd_meta *m = em_autograd_meta_of(t);
    return m && m->retain_hook;
}

static void release_meta(em_tensor *t, uintptr_t state);

/* t's autograd state, made on first need (the layer's release registered
 * before the first one is stored); NULL, the error set, out of memory. */
static const em_interceptor interceptor;

static em_autograd_meta *meta_of(em_tensor *t) {
    em_autograd_meta *m = em_autograd_meta_of(t);
    if (m) return m;
    static bool installed;
    if (!__atomic_load_n(&installed, __ATOMIC_ACQUIRE)) {
        em_tensor_layer_register(EM_LAYER_AUTOGRAD, release_meta);
        em_interceptor_install(EM_INTERCEPT_AUTOGRAD, &interceptor);
        __atomic_store_n(&installed, true, __ATOMIC_RELEASE);
    }
    if (!(m = em_malloc(sizeof *m))) {
        em_error(EM_ERR_NOMEM, "autograd: out of memory");
        return NULL;
    }
    memset(m, 0, sizeof *m);
    uintptr_t none = 0;
    if (!__atomic_compare_exchange_n(&t->layer_state[EM_LAYER_AUTOGRAD], &none, (uintptr_t)m, false,
                                     __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) { /* (another thread's came first) */
        em_free(m);
        return em_autograd_meta_of(t);
    }
    return m;
}

/* retain_grad()'s hook keeps a weak pointer to the tensor (below). */
static void forget_retain_hook(em_grad_hook *h, em_tensor *t);

static void release_meta(em_tensor *t, uintptr_t state) {
    em_autograd_meta *m = (em_autograd_meta *)state;
    em_node_release(m->grad_fn);
    em_tensor_release(m->grad);
    em_grad_hooks_free(m->hooks);
    forget_retain_hook(m->retain_hook, t);
    em_free(m);
}

/* ---- tensors ---- */

em_status em_set_requires_grad(em_tensor *t, bool on) {
    if (on && !em_dtype_is_float(t->dtype))
        return em_error(EM_ERR_RUNTIME,
                        "only Tensors of floating point dtype can require gradients (got %s)",
                        em_dtype_long_name(t->dtype));
    if (!on && em_grad_fn(t))
        return em_error(EM_ERR_RUNTIME,
                        "you can only change requires_grad flags of leaf variables. If you want to "
                        "use a computed variable in a subgraph that doesn't require "
                        "differentiation use var_no_grad = var.detach().");
    if (!on && !em_autograd_meta_of(t)) return EM_OK;
    em_autograd_meta *m = meta_of(t);
    if (!m) return em_last_status();
    m->requires_grad = on;
    return EM_OK;
}

/* t's elements as a new tensor object without history. To a tracer it is
 * the same value as t (it is not an op, but it computes nothing), so saved
 * tensors and detach() results trace as what they alias. */
static em_tensor *alias(em_tensor *t) {
    em_tensor *a = em_tensor_alias(t, t->offset, t->shape, t->strides, t->ndim);
    if (a) {
        a->is_wrapped_number = t->is_wrapped_number;
        a->layer_state[EM_LAYER_TRACE] = t->layer_state[EM_LAYER_TRACE]; /* (a word: no ownership) */
        a->serial = t->serial;
        if (em_trace_gen(a)) em_note_event(EM_EVENT_ALIAS, "detach()", a);
    }
    return a;
}

em_tensor *em_detach(em_tensor *t) { return t ? alias(t) : NULL; }

em_status em_tensor_set_grad(em_tensor *t, em_tensor *g) {
    if (!g && !em_autograd_meta_of(t)) return EM_OK;
    em_autograd_meta *m = meta_of(t);
    if (!m) return em_last_status();
    if (g) em_tensor_retain(g);
    em_tensor_release(m->grad);
    m->grad = g;
    return EM_OK;
}

em_status em_tensor_autograd_reserve(em_tensor *t) { return meta_of(t) ? EM_OK : em_last_status(); }

void em_tensor_detach_(em_tensor *t) {
    em_autograd_meta *m = em_autograd_meta_of(t);
    if (!m) return;
    em_node_release(m->grad_fn);
    m->grad_fn = NULL;
    m->requires_grad = false;
}

/* ---- views of memory written in place (PyTorch's CopySlices) ----
 *
 * A view's history is its base's, cut down to the view. When the memory
 * is written through another tensor (the base, or another view of it),
 * that history is stale: the view's values changed, its grad_fn did not.
 * So a view remembers the memory's version its grad_fn describes, and one
 * whose version is behind gets a new grad_fn, read from the base's current
 * history: AS_STRIDED of the base (refresh_view). A write through a view
 * gives the base a new history: AS_STRIDED_SCATTER of the base's old value
 * and the written view's new one (copy_slices). Both nodes address the
 * base's memory as flat positions, so the base must be contiguous. */

static em_status attach(em_node *n, em_tensor *t, int output_nr);
static em_status gradient_edge(em_tensor *t, em_edge *e);

/* attrs addressing view v inside its contiguous base, as flat positions */
static em_status view_geometry(const em_tensor *v, const char *what, em_attrs *a) {
    const em_tensor *base = v->view_base;
    if (!em_tensor_is_contiguous(base))
        return em_error(EM_ERR_NOT_IMPLEMENTED,
                        "%s: autograd through a view of a non-contiguous tensor whose memory was written in "
                        "place is not supported by ember yet; call .contiguous() on the tensor before viewing it",
                        what);
    memset(a, 0, sizeof *a);
    a->offset = v->offset - base->offset;
    a->n_stride = v->ndim;
    memcpy(a->stride, v->strides, sizeof a->stride);
    a->n_shape = v->ndim;
    memcpy(a->shape, v->shape, sizeof a->shape);
    return EM_OK;
}

/* A node of op with one result of out's type over the given inputs'
 * types, its edges to be filled in by the caller. */
static em_node *memory_node(em_op op, const em_attrs *a, const em_tensor *base, const em_tensor *v, int n_in) {
    em_node *n = node_new(op, n_in, 1);
    if (!n) return NULL;
    n->attrs = *a;
    n->in_types[0] = em_tensor_type(base);
    if (n_in > 1) n->in_types[1] = em_tensor_type(v);
    n->out_types[0] = em_tensor_type(op == EM_OP_AS_STRIDED ? v : base);
    return n;
}

/* v's grad_fn, read again from its base's history if the memory was
 * written since v's grad_fn was made (see above). */
static em_status refresh_view(em_tensor *v) {
    em_tensor *base = v->view_base;
    if (!base || !em_grad_enabled()) return EM_OK;
    uint64_t now = __atomic_load_n(&v->storage->version, __ATOMIC_RELAXED);
    if (v->view_version == now) return EM_OK;
    if (!em_requires_grad(base)) { /* nothing to read: the memory's history is none */
        v->view_version = now;
        return EM_OK;
    }
    em_attrs a;
    em_status st = view_geometry(v, "a view", &a);
    if (st != EM_OK) return st;
    em_node *n = memory_node(EM_OP_AS_STRIDED, &a, base, v, 1);
    if (!n) return em_last_status();
    if ((st = gradient_edge(base, &n->next[0])) != EM_OK) {
        em_node_release(n);
        return st;
    }
    st = attach(n, v, 0);
    em_node_release(n);
    if (st == EM_OK) v->view_version = now;
    return st;
}

/* After a write through view v recorded as node `written` (v's new value):
 * the base's new history is its old value with v's part replaced, and v
 * reads its own from there. */
static em_status copy_slices(em_tensor *v, em_node *written) {
    em_tensor *base = v->view_base;
    em_attrs a;
    em_status st = view_geometry(v, "a write into a view", &a);
    if (st != EM_OK) return st;
    em_node *scatter = memory_node(EM_OP_AS_STRIDED_SCATTER, &a, base, v, 2);
    if (!scatter) return em_last_status();
    if (em_requires_grad(base) && (st = gradient_edge(base, &scatter->next[0])) != EM_OK) {
        em_node_release(scatter);
        return st;
    }
    em_node_retain(written);
    scatter->next[1].node = written;
    scatter->next[1].input_nr = 0;
    st = attach(scatter, base, 0);
    em_node_release(scatter);
    if (st != EM_OK) return st;
    em_node *read = memory_node(EM_OP_AS_STRIDED, &a, base, v, 1);
    if (!read) return em_last_status();
    if ((st = gradient_edge(base, &read->next[0])) != EM_OK) {
        em_node_release(read);
        return st;
    }
    st = attach(read, v, 0);
    em_node_release(read);
    if (st != EM_OK) return st;
    v->view_version = __atomic_load_n(&v->storage->version, __ATOMIC_RELAXED);
    return EM_OK;
}

/* The edge a gradient for t travels along: its grad_fn, or its leaf's
 * AccumulateGrad node (made on first use). */
static em_status gradient_edge(em_tensor *t, em_edge *e) {
    em_status st = refresh_view(t);
    if (st != EM_OK) return st;
    em_autograd_meta *m = meta_of(t);
    if (!m) return em_last_status();
    if (m->grad_fn) {
        em_node_retain(m->grad_fn);
        e->node = m->grad_fn;
        e->input_nr = m->output_nr;
        return EM_OK;
    }
    if (m->grad_acc) {
        em_node_retain(m->grad_acc);
    } else {
        em_node *acc = node_new(EM_OP_ACCUMULATE, 0, 1);
        if (!acc) return em_last_status();
        em_tensor_retain(t);
        acc->variable = t;
        acc->out_types[0] = em_tensor_type(t);
        m->grad_acc = acc; /* weak: the node keeps t alive, not the reverse */
    }
    e->node = m->grad_acc;
    e->input_nr = 0;
    return EM_OK;
}

/* ---- recording ---- */

static bool wants(em_op op, em_tensor *const *in, int n_in) {
    /* the common case first, without a call: no operand autograd ever
     * touched, none a view that could have come to need it */
    bool maybe = false;
    for (int i = 0; i < n_in && !maybe; i++) maybe = in[i] && (em_autograd_meta_of(in[i]) || in[i]->view_base);
    if (!maybe) return false;
    if (!em_grad_enabled() || em_grad_rule_of(op)->kind == EM_GRAD_NONE) return false;
    for (int i = 0; i < n_in; i++) {
        /* (a stale view may have come to require grad: its memory was
         * written with a value that does; a failure here is reported
         * when the op is recorded) */
        if (in[i] && in[i]->view_base) (void)refresh_view(in[i]);
        if (in[i] && em_requires_grad(in[i])) return true;
    }
    return false;
}

static bool saves_in(em_grad_kind k, int i) {
    return k == EM_GRAD_IN || k == EM_GRAD_BOTH || (k == EM_GRAD_IDX && i > 0);
}
static bool saves_out(em_grad_kind k) { return k == EM_GRAD_OUT || k == EM_GRAD_BOTH; }

/* A node for op over in[] with n_out results of the given types; inputs
 * saved as the grad rule says (except `skip`, saved as an alias with its
 * old history: an in-place op's target, about to be overwritten). */
static em_node *make_node(em_op op, em_tensor *const *in, int n_in, const em_attrs *attrs,
                          const em_type *out_types, int n_out, const em_tensor *skip) {
    em_node *n = node_new(op, n_in, n_out);
    if (!n) return NULL;
    if (attrs) n->attrs = *attrs;
    em_grad_kind k = em_grad_rule_of(op)->kind;
    for (int i = 0; i < n_in; i++) {
        n->in_types[i] = em_tensor_type(in[i]);
        if (em_requires_grad(in[i]) && gradient_edge(in[i], &n->next[i]) != EM_OK) goto fail;
        if (!saves_in(k, i)) continue;
        em_tensor *s = in[i];
        if (s == skip) { /* a copy of the value about to be overwritten, with its history */
            bool was = em_set_grad_enabled(false);
            s = em_clone(in[i]);
            em_set_grad_enabled(was);
            if (!s) goto fail;
            const em_autograd_meta *old = em_autograd_meta_of(in[i]);
            em_autograd_meta *sm = old ? meta_of(s) : NULL;
            if (old && !sm) {
                em_tensor_release(s);
                goto fail;
            }
            if (sm) {
                sm->requires_grad = old->requires_grad;
                sm->grad_fn = old->grad_fn;
                em_node_retain(sm->grad_fn);
                sm->output_nr = old->output_nr;
            }
        } else {
            em_tensor_retain(s);
        }
        n->saved_in[i].t = s;
        n->saved_in[i].version = s->storage->version;
    }
    for (int j = 0; j < n_out; j++) n->out_types[j] = out_types[j];
    return n;
fail:
    em_node_release(n);
    return NULL;
}

static em_status save_outputs(em_node *n, em_tensor *const *out) {
    if (!saves_out(em_grad_rule_of((em_op)n->op)->kind)) return EM_OK;
    for (int j = 0; j < n->n_out; j++) {
        if (!(n->saved_out[j].t = alias(out[j]))) return em_last_status();
        __atomic_add_fetch(&out[j]->storage->saved_refs, 1, __ATOMIC_RELAXED);
        n->saved_out[j].version = out[j]->storage->version;
        n->saved_out[j].is_output = true;
    }
    return EM_OK;
}

static em_status attach(em_node *n, em_tensor *t, int output_nr) {
    if (!em_dtype_is_float(t->dtype)) return EM_OK; /* integer results carry no gradient */
    em_autograd_meta *m = meta_of(t);
    if (!m) return em_last_status();
    em_node_retain(n);
    em_node_release(m->grad_fn);
    m->grad_fn = n;
    m->output_nr = output_nr;
    m->requires_grad = true;
    return EM_OK;
}

/* Is t one of the inputs (an op such as contiguous() may return its input
 * itself, which keeps its own history)? */
static bool is_input(const em_tensor *t, em_tensor *const *in, int n_in) {
    for (int i = 0; i < n_in; i++)
        if (in[i] == t) return true;
    return false;
}

/* After an out-of-place op: a node for its results. */
static em_status record(em_op op, em_tensor *const *in, int n_in, const em_attrs *attrs, em_tensor *const *out,
                        int n_out) {
    if (!wants(op, in, n_in)) return EM_OK;
    bool fresh = false;
    for (int j = 0; j < n_out; j++) fresh |= !is_input(out[j], in, n_in);
    if (!fresh) return EM_OK;
    em_type types[8];
    if (n_out > 8) return em_error(EM_ERR_INTERNAL, "autograd: %d results", n_out);
    for (int j = 0; j < n_out; j++) types[j] = em_tensor_type(out[j]);
    em_node *n = make_node(op, in, n_in, attrs, types, n_out, NULL);
    if (!n) return em_last_status();
    em_status st = save_outputs(n, out);
    for (int j = 0; j < n_out && st == EM_OK; j++)
        if (!is_input(out[j], in, n_in)) st = attach(n, out[j], j);
    em_node_release(n); /* the results hold it now */
    return st;
}

/* Around an in-place op writing into `target` (which is also an input):
 * checks, and saves the inputs before the write (begin); then rebases
 * target's history onto the new node (end). */
static em_status inplace_begin(em_op op, em_tensor *const *in, int n_in, const em_attrs *attrs, em_tensor *target,
                               void **state) {
    em_node **pending = (em_node **)state;
    *pending = NULL;
    em_status st = refresh_view(target);
    if (st != EM_OK) return st;
    bool any = em_requires_grad(target);
    for (int i = 0; i < n_in; i++) any |= em_requires_grad(in[i]);
    if (!em_grad_enabled() || !any) return EM_OK;
    const char *name = em_op_get(op)->kind == EM_KIND_CAST ? "copy" : em_op_name(op);
    if (!em_grad_fn(target) && em_requires_grad(target))
        return em_error(EM_ERR_RUNTIME,
                        "a leaf Variable that requires grad is being used in an in-place operation "
                        "(%s_); do it under ember.no_grad(), or on a clone",
                        name);
    if (target->is_view && !target->view_base)
        return em_error(EM_ERR_NOT_IMPLEMENTED,
                        "%s_: in-place operations on this view of a tensor that requires grad are not "
                        "supported by ember's autograd (it is not a view op's result); use an out-of-place "
                        "operation",
                        name);
    if (target->view_base && em_requires_grad(target->view_base) && !em_grad_fn(target->view_base))
        return em_error(EM_ERR_RUNTIME,
                        "a view of a leaf Variable that requires grad is being used in an in-place operation "
                        "(%s_); do it under ember.no_grad(), or on a clone",
                        name);
    em_attrs geometry;
    if (target->view_base && (st = view_geometry(target, name, &geometry)) != EM_OK) return st;
    if (em_grad_rule_of(op)->kind == EM_GRAD_NONE)
        return em_error(EM_ERR_RUNTIME, "%s_: the result is not differentiable, but the tensor it "
                                        "writes into requires grad", name);
    em_type t = em_tensor_type(target);
    *pending = make_node(op, in, n_in, attrs, &t, 1, target);
    return *pending ? EM_OK : em_last_status();
}

static void inplace_end(em_op op, em_tensor *const *in, int n_in, const em_attrs *attrs, em_tensor *target,
                        void *state) {
    (void)op, (void)in, (void)n_in, (void)attrs;
    em_node *pending = state;
    if (!pending) return;
    /* (a failure to save or attach, out of memory, leaves the target's
     * old history; a failure to follow a view leaves the view's own node:
     * its gradient then stops at the view, as it did before views were
     * followed) */
    if (save_outputs(pending, &target) == EM_OK && attach(pending, target, 0) == EM_OK && target->view_base)
        (void)copy_slices(target, pending);
    em_node_release(pending);
}

static void inplace_abort(void *state) { em_node_release(state); }

/* Autograd's place in dispatch's stack (ops.h), installed with the first
 * autograd state (meta_of): before any tensor has some, no op needs it. */
static const em_interceptor interceptor = {
    .name = "autograd",
    .after_op = record,
    .before_inplace = inplace_begin,
    .after_inplace = inplace_end,
    .abort_inplace = inplace_abort,
};

/* ---- hooks, custom functions, anomaly mode ---- */

void em_grad_hooks_free(em_grad_hook *h) {
    while (h) {
        em_grad_hook *next = h->next;
        if (h->free_ctx) h->free_ctx(h->ctx);
        em_free(h);
        h = next;
    }
}

static em_grad_hook *add_hook(em_tensor *t, em_grad_hook_fn fn, void *ctx, void (*free_ctx)(void *)) {
    em_grad_hook *h = em_malloc(sizeof *h);
    if (!h) {
        em_error(EM_ERR_NOMEM, "register_hook: out of memory");
        return NULL;
    }
    em_autograd_meta *m = meta_of(t);
    if (!m) {
        em_free(h);
        return NULL;
    }
    *h = (em_grad_hook){fn, ctx, free_ctx, m->grad_fn ? m->output_nr : 0, NULL};
    em_grad_hook **at = m->grad_fn ? &m->grad_fn->hooks : &m->hooks;
    while (*at) at = &(*at)->next;
    *at = h;
    return h;
}

em_status em_tensor_register_hook(em_tensor *t, em_grad_hook_fn fn, void *ctx, void (*free_ctx)(void *)) {
    if (!em_requires_grad(t))
        return em_error(EM_ERR_RUNTIME, "cannot register a hook on a tensor that doesn't require gradient");
    return add_hook(t, fn, ctx, free_ctx) ? EM_OK : em_last_status();
}

/* A leaf's hooks after accumulation sit in its list with output_nr
 * POST_ACCUMULATE, which run_hooks (output 0) passes over. */
#define POST_ACCUMULATE (-1)

em_status em_tensor_register_post_accumulate_hook(em_tensor *t, em_grad_hook_fn fn, void *ctx,
                                                  void (*free_ctx)(void *)) {
    if (!em_requires_grad(t))
        return em_error(EM_ERR_RUNTIME, "cannot register a hook on a tensor that doesn't require gradient");
    if (em_grad_fn(t))
        return em_error(EM_ERR_RUNTIME, "post accumulate grad hooks cannot be registered on non-leaf tensors");
    em_grad_hook *h = add_hook(t, fn, ctx, free_ctx);
    if (!h) return em_last_status();
    h->output_nr = POST_ACCUMULATE;
    return EM_OK;
}

static em_status run_post_accumulate_hooks(em_tensor *leaf) {
    for (em_grad_hook *h = em_autograd_meta_of(leaf)->hooks; h; h = h->next) {
        if (h->output_nr != POST_ACCUMULATE) continue;
        em_tensor *ignored = NULL;
        em_status st = h->fn(h->ctx, leaf, &ignored);
        em_tensor_release(ignored);
        if (st != EM_OK) return st;
    }
    return EM_OK;
}

/* retain_grad: the hook's ctx is the tensor, weakly: the tensor dying sets
 * it to NULL (em_grad_hook_forget), the hook dying (with its node) clears
 * the tensor's pointer to it. */
static em_status retain_hook_fn(void *ctx, em_tensor *grad, em_tensor **replacement) {
    em_tensor *t = ctx;
    if (!t) return EM_OK;
    em_autograd_meta *m = em_autograd_meta_of(t); /* (it has one: it has this hook) */
    bool was = em_set_grad_enabled(false);
    em_tensor *g = m->grad ? em_add(m->grad, grad) : em_clone(grad);
    em_set_grad_enabled(was);
    if (!g) return em_last_status();
    em_tensor_release(m->grad);
    m->grad = g;
    return EM_OK;
}
static void retain_hook_free(void *ctx) {
    if (ctx) em_autograd_meta_of(ctx)->retain_hook = NULL;
}
static void forget_retain_hook(em_grad_hook *h, em_tensor *t) {
    if (h && h->ctx == t) h->ctx = NULL;
}

em_status em_tensor_retain_grad(em_tensor *t) {
    if (!em_requires_grad(t)) return em_error(EM_ERR_RUNTIME, "can't retain_grad on Tensor that has requires_grad=False");
    em_autograd_meta *m = em_autograd_meta_of(t);
    if (!m->grad_fn || m->retain_hook) return EM_OK;
    return (m->retain_hook = add_hook(t, retain_hook_fn, t, retain_hook_free)) ? EM_OK : em_last_status();
}

/* Runs the hooks on result output_nr's gradient *g (each may replace it). */
static em_status run_hooks(em_grad_hook *h, int output_nr, em_tensor **g) {
    for (; h; h = h->next) {
        if (h->output_nr != output_nr) continue;
        em_tensor *r = NULL;
        em_status st = h->fn(h->ctx, *g, &r);
        if (st != EM_OK) {
            em_tensor_release(r);
            return st;
        }
        if (r) {
            em_tensor_release(*g);
            *g = r;
        }
    }
    return EM_OK;
}

em_status em_autograd_custom(const char *name, em_tensor *const *in, int n_in, em_tensor *const *out, int n_out,
                             em_custom_backward_fn fn, void *ctx, void (*free_ctx)(void *)) {
    em_node *n = node_new(EM_OP_CUSTOM, n_in, n_out);
    if (!n) return em_last_status();
    size_t len = strlen(name);
    if (!(n->name = em_malloc(len + 1))) {
        em_node_release(n);
        return em_error(EM_ERR_NOMEM, "autograd: out of memory");
    }
    memcpy(n->name, name, len + 1);
    for (int i = 0; i < n_in; i++) {
        n->in_types[i] = em_tensor_type(in[i]);
        if (em_requires_grad(in[i]) && gradient_edge(in[i], &n->next[i]) != EM_OK) {
            em_node_release(n);
            return em_last_status();
        }
    }
    for (int j = 0; j < n_out; j++) n->out_types[j] = em_tensor_type(out[j]);
    n->custom_fn = fn; /* the node owns ctx from here */
    n->custom_ctx = ctx;
    n->custom_free = free_ctx;
    for (int j = 0; j < n_out; j++) attach(n, out[j], j);
    em_node_release(n);
    return EM_OK;
}

bool em_autograd_set_anomaly(bool on) {
    bool was = anomaly;
    anomaly = on;
    return was;
}
bool em_autograd_anomaly(void) { return anomaly; }
bool em_autograd_set_anomaly_check_nan(bool on) {
    bool was = anomaly_check_nan;
    anomaly_check_nan = on;
    return was;
}
bool em_autograd_anomaly_check_nan(void) { return anomaly_check_nan; }
void em_autograd_set_origin_fn(char *(*origin)(void)) { origin_of = origin; }

/* Anomaly mode: does the gradient hold a NaN? */
static em_status check_nan(const em_node *n, int i, em_tensor *g) {
    if (!em_dtype_is_float(g->dtype) || !em_tensor_has_data(g)) return EM_OK;
    bool was = em_set_grad_enabled(false);
    em_tensor *m = em_unary(EM_OP_ISNAN, g), *any = m ? em_reduce(EM_OP_ANY, m, NULL, 0, false, 0, 0) : NULL;
    em_set_grad_enabled(was);
    em_tensor *h = any ? em_to_device(any, em_cpu()) : NULL; /* (a device's answer: read on the host) */
    bool nan = h && em_tensor_get_f64(h, 0) != 0;
    em_tensor_release(m);
    em_tensor_release(any);
    em_tensor_release(h);
    if (!h) return em_last_status();
    if (!nan) return EM_OK;
    char name[64];
    return em_error(EM_ERR_RUNTIME, "Function '%s' returned nan values in its %dth output.%s%s",
                    em_node_name(n, name, sizeof name), i,
                    n->origin ? " The forward call that made it:\n" : "", n->origin ? n->origin : "");
}

/* ---- introspection ---- */

const char *em_node_name(const em_node *n, char *buf, size_t size) {
    if (n->op == EM_OP_ACCUMULATE || n->op == EM_OP_CUSTOM) {
        snprintf(buf, size, "%s", n->op == EM_OP_CUSTOM && n->name ? n->name : "AccumulateGrad");
        return buf;
    }
    /* PyTorch's style: MulBackward0, LogSoftmaxBackward0 */
    const char *name = em_op_name((em_op)n->op);
    size_t k = 0;
    bool upper = true;
    for (const char *p = name; *p && k + 1 < size; p++) {
        if (*p == '_') {
            upper = true;
            continue;
        }
        buf[k++] = upper && *p >= 'a' && *p <= 'z' ? (char)(*p - 'a' + 'A') : *p;
        upper = false;
    }
    snprintf(buf + k, size > k ? size - k : 0, "Backward0");
    return buf;
}

bool em_autograd_graph_live(const em_tensor *t) { return em_grad_fn(t) && !em_grad_fn(t)->released; }

int em_node_n_next(const em_node *n) { return n->n_in; }

em_node *em_node_next(const em_node *n, int i, int *input_nr) {
    if (i < 0 || i >= n->n_in) return NULL;
    if (input_nr) *input_nr = n->next[i].input_nr;
    return n->next[i].node;
}

em_tensor *em_node_variable(const em_node *n) { return n->variable; }

/* ---- the engine ---- */

/* Graph bookkeeping for one backward: reachable nodes in a hash table. */
typedef struct {
    em_node *node;
    int deps;          /* edges from nodes still to run */
    em_tensor **grads; /* [n_out] summed incoming gradients */
    bool queued;
} task;

typedef struct {
    task *tasks;
    size_t cap, count;
    size_t *heap; /* indices of ready tasks, max-heap on seq */
    size_t n_heap;
    bool create_graph;
    /* autograd.grad: the gradients captured for its inputs */
    em_tensor *const *capture_in;
    int n_capture;
    em_tensor **captured;
    /* em_autograd_grad_within: the inputs bound the graph (nothing past one
     * runs) and hooks do not run */
    bool within;
} engine;

/* Is n the grad_fn of one of autograd.grad's inputs (within: the graph's edge)? */
static bool is_boundary(const engine *e, const em_node *n) {
    for (int i = 0; e->within && i < e->n_capture; i++)
        if (em_grad_fn(e->capture_in[i]) == n) return true;
    return false;
}

static size_t hash_ptr(const void *p, size_t cap) {
    uint64_t x = (uint64_t)(uintptr_t)p;
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    return (size_t)x & (cap - 1);
}

static task *lookup(engine *e, em_node *n, bool insert) {
    if (!e->cap) return NULL; /* nothing discovered yet (insert always follows a grow) */
    for (size_t h = hash_ptr(n, e->cap);; h = (h + 1) & (e->cap - 1)) {
        if (e->tasks[h].node == n) return &e->tasks[h];
        if (!e->tasks[h].node) {
            if (!insert) return NULL;
            e->tasks[h].node = n;
            e->count++;
            return &e->tasks[h];
        }
    }
}

static em_status grow(engine *e) {
    if ((e->count + 1) * 2 < e->cap) return EM_OK;
    size_t old_cap = e->cap;
    task *old = e->tasks;
    e->cap = old_cap ? old_cap * 2 : 64;
    e->tasks = em_malloc(e->cap * sizeof *e->tasks);
    if (!e->tasks) {
        e->tasks = old;
        e->cap = old_cap;
        return em_error(EM_ERR_NOMEM, "backward: out of memory");
    }
    memset(e->tasks, 0, e->cap * sizeof *e->tasks);
    e->count = 0;
    for (size_t i = 0; i < old_cap; i++)
        if (old[i].node) {
            task *t = lookup(e, old[i].node, true);
            *t = old[i];
        }
    em_free(old);
    return EM_OK;
}

/* Pushes n onto a growable stack of nodes (*cap > 0). */
static em_status push_node(em_node ***stack, size_t *top, size_t *cap, em_node *n) {
    if (*top == *cap) {
        em_node **bigger = em_malloc(2 * *cap * sizeof *bigger);
        if (!bigger) return em_error(EM_ERR_NOMEM, "autograd: out of memory");
        memcpy(bigger, *stack, *cap * sizeof *bigger);
        em_free(*stack);
        *stack = bigger;
        *cap *= 2;
    }
    (*stack)[(*top)++] = n;
    return EM_OK;
}

/* Counts, for every node reachable from the roots, the edges into it. */
static em_status discover(engine *e, em_node *const *roots, int n_roots) {
    size_t cap = 64, top = 0;
    em_node **stack = em_malloc(cap * sizeof *stack);
    if (!stack) return em_error(EM_ERR_NOMEM, "backward: out of memory");
    em_status st = EM_OK;
    for (int r = 0; r < n_roots && st == EM_OK; r++) {
        if (!roots[r] || lookup(e, roots[r], false)) continue;
        if ((st = grow(e)) != EM_OK) break;
        lookup(e, roots[r], true);
        stack[top++] = roots[r];
        while (top && st == EM_OK) {
            em_node *n = stack[--top];
            int n_next = is_boundary(e, n) ? 0 : n->n_in; /* (nothing past a bound) */
            for (int i = 0; i < n_next; i++) {
                em_node *m = n->next[i].node;
                if (!m) continue;
                task *t = lookup(e, m, false);
                if (!t) {
                    if ((st = grow(e)) != EM_OK) break;
                    t = lookup(e, m, true);
                    if ((st = push_node(&stack, &top, &cap, m)) != EM_OK) break;
                }
                t->deps++;
            }
        }
    }
    em_free(stack);
    return st;
}

/* Which ready task runs first: a leaf's accumulation as soon as its
 * gradient is complete (as PyTorch's AccumulateGrad, whose sequence number
 * is the largest), so that post-accumulate hooks (DistributedDataParallel
 * starting a bucket's all_reduce) fire while the rest of backward still
 * runs and a leaf's summed gradients go early; else the newest node. */
static bool newer(const engine *e, size_t a, size_t b) {
    const em_node *x = e->tasks[a].node, *y = e->tasks[b].node;
    bool xa = x->op == EM_OP_ACCUMULATE, ya = y->op == EM_OP_ACCUMULATE;
    if (xa != ya) return xa;
    return x->seq > y->seq;
}

static void push_ready(engine *e, task *t) {
    size_t i = e->n_heap++, idx = (size_t)(t - e->tasks);
    e->heap[i] = idx;
    t->queued = true;
    while (i && newer(e, e->heap[i], e->heap[(i - 1) / 2])) {
        size_t p = (i - 1) / 2, tmp = e->heap[p];
        e->heap[p] = e->heap[i];
        e->heap[i] = tmp;
        i = p;
    }
}

static task *pop_ready(engine *e) {
    size_t top = e->heap[0];
    e->heap[0] = e->heap[--e->n_heap];
    for (size_t i = 0;;) {
        size_t l = 2 * i + 1, r = l + 1, m = i;
        if (l < e->n_heap && newer(e, e->heap[l], e->heap[m])) m = l;
        if (r < e->n_heap && newer(e, e->heap[r], e->heap[m])) m = r;
        if (m == i) break;
        size_t tmp = e->heap[m];
        e->heap[m] = e->heap[i];
        e->heap[i] = tmp;
        i = m;
    }
    return &e->tasks[top];
}

/* Adds g into a node's gradient slot (a sum when several edges meet). */
static em_status deliver(task *t, int slot, em_tensor *g) {
    if (!t->grads) {
        int n = t->node->n_out ? t->node->n_out : 1;
        if (!(t->grads = em_malloc((size_t)n * sizeof *t->grads)))
            return em_error(EM_ERR_NOMEM, "backward: out of memory");
        memset(t->grads, 0, (size_t)n * sizeof *t->grads);
    }
    if (!t->grads[slot]) {
        em_tensor_retain(g);
        t->grads[slot] = g;
        return EM_OK;
    }
    em_tensor *sum = em_add(t->grads[slot], g);
    if (!sum) return em_last_status();
    em_tensor_release(t->grads[slot]);
    t->grads[slot] = sum;
    return EM_OK;
}

/* Can g be the leaf v's .grad as it is? Contiguous, or dense and laid out
 * as v (a channels-last input's gradient, as PyTorch's AccumulateGrad
 * keeps it): otherwise it is cloned row-major. */
static bool laid_out_as(const em_tensor *g, const em_tensor *v) {
    if (em_tensor_is_contiguous(g)) return true;
    if (!em_tensor_is_dense(g) || g->ndim != v->ndim) return false;
    for (int d = 0; d < g->ndim; d++)
        if (g->shape[d] > 1 && g->strides[d] != v->strides[d]) return false;
    return true;
}

/* g summed down to `want`'s shape (undoing broadcasting; a formula may also
 * return a gradient that broadcasts up to it) and cast to its dtype. */
static em_tensor *fit(em_tensor *g, const em_type *want) {
    em_tensor_retain(g);
    if (!em_shape_eq(g->shape, g->ndim, want->shape, want->ndim) && g->ndim >= want->ndim) {
        int64_t dims[EM_MAX_DIMS];
        int nd = 0, lead = g->ndim - want->ndim;
        for (int i = 0; i < g->ndim; i++)
            if (i < lead || (want->shape[i - lead] == 1 && g->shape[i] != 1)) dims[nd++] = i;
        if (nd) {
            em_tensor *s = em_sum(g, dims, nd, true);
            em_tensor *r = s && s->numel == em_shape_numel(want->shape, want->ndim)
                               ? em_reshape(s, want->shape, want->ndim)
                               : (em_tensor_retain(s), s);
            em_tensor_release(s);
            em_tensor_release(g);
            if (!(g = r)) return NULL;
        }
    }
    if (!em_shape_eq(g->shape, g->ndim, want->shape, want->ndim)) {
        em_tensor *x = em_expand(g, want->shape, want->ndim);
        em_tensor_release(g);
        if (!(g = x)) return NULL;
    }
    if (g->dtype != want->dtype) {
        em_tensor *c = em_cast(g, want->dtype);
        em_tensor_release(g);
        g = c;
    }
    return g;
}

static em_status accumulate_leaf(engine *e, em_node *n, em_tensor *g) {
    em_tensor *v = n->variable;
    for (int i = 0; i < e->n_capture; i++) /* autograd.grad: captured, not accumulated */
        if (e->capture_in[i] == v) {
            if (e->captured[i]) {
                em_tensor *s = em_add(e->captured[i], g);
                if (!s) return em_last_status();
                em_tensor_release(e->captured[i]);
                e->captured[i] = s;
            } else {
                em_tensor_retain(g);
                e->captured[i] = g;
            }
            return EM_OK;
        }
    if (e->capture_in) return EM_OK; /* autograd.grad leaves other leaves' .grad alone */
    em_autograd_meta *vm = em_autograd_meta_of(v); /* (a leaf with an AccumulateGrad node has one) */
    em_note_event(EM_EVENT_GRAD_READ, "backward()", v);
    if (!vm->grad || e->create_graph) em_note_event(EM_EVENT_GRAD_WRITE, "backward()", v);
    if (!vm->grad) { /* the first gradient: a tensor of the leaf's own */
        bool sole = g->refcount == 1 && g->storage->refcount == 1 && laid_out_as(g, v) &&
                    !em_grad_fn(g); /* nobody else can see it: no copy needed */
        em_tensor *c = e->create_graph || sole ? (em_tensor_retain(g), g) : em_clone(g);
        if (!c) return em_last_status();
        vm->grad = c;
        return EM_OK;
    }
    if (e->create_graph) { /* out of place, so the sum has history */
        em_tensor *s = em_add(vm->grad, g);
        if (!s) return em_last_status();
        em_tensor_release(vm->grad);
        vm->grad = s;
        return EM_OK;
    }
    em_tensor *ops[2] = {vm->grad, g};
    em_attrs at;
    memset(&at, 0, sizeof at);
    bool was = em_set_grad_enabled(false);
    em_status st = em_op_run_inplace(EM_OP_ADD, ops, 2, &at, vm->grad);
    em_set_grad_enabled(was);
    return st;
}

/* Unpacks a saved tensor for a formula, checking it was not overwritten. */
static em_status unpack(const em_node *n, const em_saved *s, int output_nr, bool create_graph,
                        em_tensor **out) {
    *out = NULL;
    if (!s->t) return EM_OK;
    if (s->t->storage->version != s->version) {
        char name[64];
        char shape[128];
        em_shape_str(s->t->shape, s->t->ndim, shape, sizeof shape);
        return em_error(EM_ERR_RUNTIME,
                        "one of the variables needed for gradient computation has been modified by "
                        "an inplace operation: [%s %s] is at version %llu; expected version %llu "
                        "instead (it is an %s of %s)",
                        em_dtype_long_name(s->t->dtype), shape,
                        (unsigned long long)s->t->storage->version, (unsigned long long)s->version,
                        s->is_output ? "output" : "input", em_node_name(n, name, sizeof name));
    }
    if (s->is_output && create_graph) { /* give it its history back: double backward */
        em_tensor *a = alias(s->t);
        if (!a) return em_last_status();
        em_status st = attach((em_node *)n, a, output_nr);
        if (st != EM_OK) {
            em_tensor_release(a);
            return st;
        }
        *out = a;
        return EM_OK;
    }
    em_tensor_retain(s->t);
    *out = s->t;
    return EM_OK;
}

/* Runs one node: its formula on its summed gradients, results onward. */
static em_status run_node(engine *e, task *t, bool retain_graph) {
    em_node *n = t->node;
    if (n->op == EM_OP_ACCUMULATE) {
        if (!t->grads || !t->grads[0]) return EM_OK;
        em_grad_hook *hooks = em_autograd_meta_of(n->variable)->hooks;
        em_status st = e->within ? EM_OK : run_hooks(hooks, 0, &t->grads[0]);
        if (st == EM_OK) st = accumulate_leaf(e, n, t->grads[0]);
        if (st == EM_OK && !e->within && !e->capture_in && em_autograd_meta_of(n->variable)->hooks)
            st = run_post_accumulate_hooks(n->variable);
        return st;
    }
    if (e->within && n->hooks) {
        char name[64];
        return em_error(EM_ERR_NOT_IMPLEMENTED, "a gradient hook (register_hook or retain_grad) on a "
                        "tensor the function computes, at %s", em_node_name(n, name, sizeof name));
    }
    for (int j = 0; n->hooks && t->grads && j < n->n_out; j++)
        if (t->grads[j]) {
            em_status st = run_hooks(n->hooks, j, &t->grads[j]);
            if (st != EM_OK) return st;
        }
    for (int i = 0; i < e->n_capture; i++) /* autograd.grad of a non-leaf input */
        if (em_grad_fn(e->capture_in[i]) == n && t->grads && t->grads[em_output_nr(e->capture_in[i])]) {
            em_tensor *g = t->grads[em_output_nr(e->capture_in[i])];
            em_tensor_retain(g);
            em_tensor_release(e->captured[i]);
            e->captured[i] = g;
        }
    if (is_boundary(e, n)) return EM_OK; /* what lies past it is not ours */
    if (n->released) {
        char name[64];
        return em_error(EM_ERR_RUNTIME,
                        "Trying to backward through the graph a second time (or directly access "
                        "saved tensors after they have already been freed) at %s. Saved "
                        "intermediate values of the graph are freed when you call .backward() or "
                        "autograd.grad(). Specify retain_graph=True if you need to backward "
                        "through the graph a second time",
                        em_node_name(n, name, sizeof name));
    }
    const em_grad_rule *rule = em_grad_rule_of((em_op)n->op);
    int ni = n->n_in, no = n->n_out;
    em_tensor **buf = em_malloc((size_t)(2 * ni + 2 * no + 2) * sizeof *buf);
    bool *needs = em_malloc((size_t)(ni + 1) * sizeof *needs);
    if (!buf || !needs) {
        em_free(buf);
        em_free(needs);
        return em_error(EM_ERR_NOMEM, "backward: out of memory");
    }
    memset(buf, 0, (size_t)(2 * ni + 2 * no + 2) * sizeof *buf);
    em_tensor **in = buf, **out = buf + ni, **gout = buf + ni + no, **gin = buf + ni + 2 * no;
    em_status st = EM_OK;
    bool any = false;
    unsigned absent = 0;
    for (int i = 0; i < ni; i++) any |= (needs[i] = n->next[i].node != NULL);
    for (int i = 0; i < ni && st == EM_OK; i++) st = unpack(n, &n->saved_in[i], 0, e->create_graph, &in[i]);
    for (int j = 0; j < no && st == EM_OK; j++) st = unpack(n, &n->saved_out[j], j, e->create_graph, &out[j]);
    for (int j = 0; j < no && st == EM_OK; j++) { /* absent gradients are zeros */
        gout[j] = t->grads ? t->grads[j] : NULL;
        if (gout[j]) {
            em_tensor_retain(gout[j]);
            continue;
        }
        if (j < 32) absent |= 1u << j;
        const em_type *ty = &n->out_types[j];
        if (!(gout[j] = em_full_on(ty->device, ty->shape, ty->ndim, 0.0, ty->dtype)))
            st = em_last_status();
    }
    if (st == EM_OK && any) {
        if (n->op == EM_OP_CUSTOM) {
            st = n->custom_fn(n->custom_ctx, gout, no, gin, ni, needs);
        } else if (rule->kind == EM_GRAD_ZERO) {
            for (int i = 0; i < ni && st == EM_OK; i++)
                if (needs[i] && !(gin[i] = em_full_on(n->in_types[i].device, n->in_types[i].shape, n->in_types[i].ndim,
                                                      0.0, n->in_types[i].dtype)))
                    st = em_last_status();
        } else {
            em_bw_ctx c = {n, in, out, needs, absent};
            st = rule->fn(&c, gout, gin);
        }
    }
    for (int i = 0; i < ni && st == EM_OK && anomaly && anomaly_check_nan; i++)
        if (gin[i]) st = check_nan(n, i, gin[i]);
    for (int i = 0; i < ni && st == EM_OK; i++) {
        if (!needs[i] || !gin[i]) continue;
        em_tensor *g = fit(gin[i], &n->in_types[i]);
        if (!g) {
            st = em_last_status();
            break;
        }
        task *next = lookup(e, n->next[i].node, false);
        st = deliver(next, n->next[i].input_nr, g);
        em_tensor_release(g);
    }
    for (int i = 0; i < 2 * ni + 2 * no; i++) em_tensor_release(buf[i]);
    em_free(buf);
    em_free(needs);
    if (st == EM_OK && !retain_graph) {
        release_saved(n);
        n->released = true;
        if (n->custom_free) n->custom_free(n->custom_ctx); /* (what the host saved, with it) */
        n->custom_free = NULL;
        n->custom_ctx = NULL;
    }
    return st;
}

static void drop_grads(task *t) {
    if (!t->grads) return;
    for (int j = 0; j < (t->node->n_out ? t->node->n_out : 1); j++) em_tensor_release(t->grads[j]);
    em_free(t->grads);
    t->grads = NULL;
}

static em_status run(engine *e, em_tensor *const *outputs, em_tensor *const *grads, int n,
                     bool retain_graph) {
    em_node **roots = em_malloc((size_t)(n ? n : 1) * sizeof *roots);
    em_tensor **seeds = em_malloc((size_t)(n ? n : 1) * sizeof *seeds);
    if (!roots || !seeds) {
        em_free(roots);
        em_free(seeds);
        return em_error(EM_ERR_NOMEM, "backward: out of memory");
    }
    memset(seeds, 0, (size_t)(n ? n : 1) * sizeof *seeds);
    em_status st = EM_OK;
    int n_roots = 0;
    for (int i = 0; i < n && st == EM_OK; i++) {
        em_tensor *o = outputs[i];
        if (!em_requires_grad(o)) {
            st = em_error(EM_ERR_RUNTIME, "element %d of tensors does not require grad and does not "
                                          "have a grad_fn", i);
            break;
        }
        if (grads && grads[i]) {
            if (!em_shape_eq(grads[i]->shape, grads[i]->ndim, o->shape, o->ndim)) {
                char a[128], b[128];
                em_shape_str(grads[i]->shape, grads[i]->ndim, a, sizeof a);
                em_shape_str(o->shape, o->ndim, b, sizeof b);
                st = em_error(EM_ERR_RUNTIME, "Mismatch in shape: grad_output[%d] has a shape of %s "
                                              "and output[%d] has a shape of %s", i, a, i, b);
                break;
            }
            em_tensor_retain(grads[i]);
            seeds[i] = grads[i];
        } else if (o->numel != 1) {
            char b[128];
            em_shape_str(o->shape, o->ndim, b, sizeof b);
            st = em_error(EM_ERR_RUNTIME, "grad can be implicitly created only for scalar outputs "
                                          "(output %d has shape %s)", i, b);
            break;
        } else if (!(seeds[i] = em_full_on(o->device, o->shape, o->ndim, 1.0, o->dtype))) {
            st = em_last_status();
            break;
        }
        em_edge edge = {NULL, 0};
        if ((st = gradient_edge(o, &edge)) != EM_OK) break;
        roots[n_roots++] = edge.node; /* a reference, released at the end */
    }
    if (st == EM_OK) st = discover(e, roots, n_roots);
    if (st == EM_OK && !(e->heap = em_malloc((e->count + 1) * sizeof *e->heap)))
        st = em_error(EM_ERR_NOMEM, "backward: out of memory");
    for (int i = 0; i < n && st == EM_OK; i++) { /* seed the roots */
        task *t = lookup(e, roots[i], false);
        em_tensor *o = outputs[i];
        st = deliver(t, em_grad_fn(o) ? em_output_nr(o) : 0, seeds[i]);
    }
    for (size_t i = 0; i < e->cap && st == EM_OK; i++)
        if (e->tasks[i].node && e->tasks[i].deps == 0 && !e->tasks[i].queued) push_ready(e, &e->tasks[i]);
    while (st == EM_OK && e->n_heap) {
        task *t = pop_ready(e);
        st = run_node(e, t, retain_graph);
        drop_grads(t); /* done with them: memory back now, and a gradient that was a view
                          of one of them can become a leaf's .grad without a copy */
        em_node *node = t->node;
        int n_next = is_boundary(e, node) ? 0 : node->n_in;
        for (int i = 0; i < n_next && st == EM_OK; i++) {
            if (!node->next[i].node) continue;
            task *m = lookup(e, node->next[i].node, false);
            if (--m->deps == 0 && !m->queued) push_ready(e, m);
        }
    }
    for (size_t i = 0; i < e->cap; i++)
        if (e->tasks[i].node) drop_grads(&e->tasks[i]);
    for (int i = 0; i < n; i++) em_tensor_release(seeds[i]);
    for (int i = 0; i < n_roots; i++) em_node_release(roots[i]);
    em_free(e->tasks);
    em_free(e->heap);
    em_free(roots);
    em_free(seeds);
    return st;
}

em_status em_backward(em_tensor *const *outputs, em_tensor *const *grads, int n, bool retain_graph,
                      bool create_graph) {
    engine e;
    memset(&e, 0, sizeof e);
    e.create_graph = create_graph;
    bool was = em_set_grad_enabled(create_graph);
    em_status st = run(&e, outputs, grads, n, retain_graph || create_graph);
    em_set_grad_enabled(was);
    return st;
}

static em_status autograd_grad(em_tensor *const *outputs, em_tensor *const *grads, int n, em_tensor *const *inputs,
                      int n_inputs, bool retain_graph, bool create_graph, bool allow_unused, bool within,
                      em_tensor **result) {
    for (int i = 0; i < n_inputs; i++) {
        result[i] = NULL;
        if (!em_requires_grad(inputs[i]))
            return em_error(EM_ERR_RUNTIME, "One of the differentiated Tensors (input %d) does not "
                                            "require grad", i);
    }
    engine e;
    memset(&e, 0, sizeof e);
    e.create_graph = create_graph;
    e.capture_in = inputs;
    e.n_capture = n_inputs;
    e.captured = result;
    e.within = within;
    bool was = em_set_grad_enabled(create_graph);
    em_status st = run(&e, outputs, grads, n, retain_graph || create_graph);
    em_set_grad_enabled(was);
    for (int i = 0; i < n_inputs && st == EM_OK; i++)
        if (!result[i] && !allow_unused)
            st = em_error(EM_ERR_RUNTIME, "One of the differentiated Tensors (input %d) appears to "
                                          "not have been used in the graph. Set allow_unused=True "
                                          "if this is the desired behavior.", i);
    if (st != EM_OK)
        for (int i = 0; i < n_inputs; i++) {
            em_tensor_release(result[i]);
            result[i] = NULL;
        }
    return st;
}

em_status em_autograd_grad(em_tensor *const *outputs, em_tensor *const *grads, int n,
                           em_tensor *const *inputs, int n_inputs, bool retain_graph,
                           bool create_graph, bool allow_unused, em_tensor **result) {
    return autograd_grad(outputs, grads, n, inputs, n_inputs, retain_graph, create_graph, allow_unused, false, result);
}

em_status em_autograd_grad_within(em_tensor *const *outputs, em_tensor *const *grads, int n,
                                  em_tensor *const *inputs, int n_inputs, em_tensor **result) {
    return autograd_grad(outputs, grads, n, inputs, n_inputs, true, false, true, true, result);
}

uint64_t em_autograd_clock(void) { return __atomic_load_n(&next_seq, __ATOMIC_RELAXED); }

em_status em_autograd_visit_saved(em_tensor *const *roots, int n, uint64_t since,
                                  void (*fn)(void *ctx, const em_tensor *t), void *ctx) {
    engine e; /* (its node set) */
    memset(&e, 0, sizeof e);
    size_t cap = 64, top = 0;
    em_node **stack = em_malloc(cap * sizeof *stack);
    em_status st = stack ? EM_OK : em_error(EM_ERR_NOMEM, "autograd: out of memory");
    for (int r = 0; r < n && st == EM_OK; r++) {
        em_node *m = em_grad_fn(roots[r]);
        if (m && top < cap) stack[top++] = m;
        while (top && st == EM_OK) {
            em_node *node = stack[--top];
            if (node->seq < since || lookup(&e, node, false)) continue;
            if ((st = grow(&e)) != EM_OK) break;
            lookup(&e, node, true);
            for (int i = 0; i < node->n_in; i++)
                if (node->saved_in[i].t) fn(ctx, node->saved_in[i].t);
            for (int j = 0; j < node->n_out; j++)
                if (node->saved_out[j].t) fn(ctx, node->saved_out[j].t);
            for (int i = 0; i < node->n_in && st == EM_OK; i++) {
                if (!node->next[i].node) continue;
                st = push_node(&stack, &top, &cap, node->next[i].node);
            }
        }
    }
    em_free(stack);
    em_free(e.tasks);
    return st;
}
