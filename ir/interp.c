/*
 * interp.c - runs a graph with the eager kernels: the reference backend.
 *
 * Every node runs through em_op_run (or a kernel a backend installed for it;
 * fused nodes without one run their region as one chain of the eager loops
 * where it is elementwise, else op by op). Each value is released
 * right after its last use, so peak memory follows the graph's liveness.
 * The LLVM backend runs its profiled runs here, with its compiled kernels
 * installed for the fused nodes (its usual runs are one generated function
 * doing the same steps in the same order). Value guards (the run spec's
 * expected values) are compared right after the node computing them, so a
 * failing one stops the run before anything later runs: a backend writing
 * inputs in place relies on that. The spec's effects (write-backs, .grad
 * updates) follow the last node.
 *
 * Profiling (em_interp_set_profiling, EMBER_PROFILE): each run then times
 * every node with the monotonic clock and adds it to the interpreter's
 * per-node totals, which em_interp_profile prints, slowest first. Off, a run
 * pays one relaxed load of the switch.
 */
#define _POSIX_C_SOURCE 200809L /* clock_gettime */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ember/alloc.h"
#include "ember/autograd.h"
#include "ember/strbuf.h"
#include "ir_internal.h"

typedef struct {
    em_interp_kernel_fn fn;
    void *ctx;
} kernel_slot;

struct em_interp {
    const em_ir_graph *g;
    kernel_slot *kernels;   /* by node id */
    const em_ir_node **order; /* body nodes in order */
    int n_order;
    int *release_start;      /* per node: range in release_ids of values dying after it */
    int *release_ids;
    int *pos;                /* per value: position of the node making it; -1 graph inputs */
    /* value guards (the spec's expected): expected[r] per body result, and
     * per position + 1 (0: before the first node) the results to compare
     * then, a range in check_ids */
    em_tensor **expected;
    int *check_start;
    int *check_ids;
    int n_outputs; /* body results returned */
    em_effect *effects; /* the spec's, their results as value ids */
    int n_effects;
    /* profiling: per position, nanoseconds summed over the profiled runs
     * (atomic: runs may overlap) */
    int64_t *prof_ns;
    int64_t prof_runs;
};

static int profiling = -1; /* atomic; -1: not read from EMBER_PROFILE yet */

void em_interp_set_profiling(bool on) { __atomic_store_n(&profiling, on ? 1 : 0, __ATOMIC_RELAXED); }

bool em_interp_profiling(void) {
    int p = __atomic_load_n(&profiling, __ATOMIC_RELAXED);
    if (p < 0) {
        const char *env = getenv("EMBER_PROFILE");
        p = env && *env && strcmp(env, "0") != 0;
        int unread = -1;
        __atomic_compare_exchange_n(&profiling, &unread, p, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED);
        p = __atomic_load_n(&profiling, __ATOMIC_RELAXED);
    }
    return p == 1;
}

static int64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static em_status set_expected(em_interp *it, em_tensor *const *expected);

em_interp *em_interp_new(const em_ir_graph *g, const em_run_spec *spec) {
    em_interp *it = em_calloc(1, sizeof *it);
    if (!it) return NULL;
    it->g = g;
    it->n_outputs = spec ? spec->n_outputs : g->body->n_results;
    int nv = g->n_values ? g->n_values : 1, nn = g->n_nodes ? g->n_nodes : 1;
    int *last = em_malloc((size_t)nv * sizeof *last);
    it->kernels = em_calloc((size_t)nn, sizeof *it->kernels);
    it->order = em_calloc((size_t)nn, sizeof *it->order);
    it->release_start = em_calloc((size_t)nn + 1, sizeof *it->release_start);
    it->release_ids = em_calloc((size_t)nv, sizeof *it->release_ids);
    it->pos = em_calloc((size_t)nv, sizeof *it->pos);
    it->prof_ns = em_calloc((size_t)nn, sizeof *it->prof_ns);
    if (!last || !it->kernels || !it->order || !it->release_start || !it->release_ids || !it->pos ||
        !it->prof_ns) {
        em_free(last);
        em_interp_free(it);
        return NULL;
    }
    /* last[v] = index of the last node using v; -1 unused; n+1 for results. */
    for (int i = 0; i < nv; i++) last[i] = it->pos[i] = -1;
    int k = 0;
    for (const em_ir_node *n = g->body->first; n; n = n->next, k++) {
        it->order[k] = n;
        for (int i = 0; i < n->n_out; i++) it->pos[n->out[i]->id] = k;
        for (int i = 0; i < n->n_in; i++) last[n->in[i]->id] = k;
        for (int i = 0; i < n->n_out; i++)
            if (last[n->out[i]->id] < k) last[n->out[i]->id] = k; /* unused: dies at once */
    }
    it->n_order = k;
    for (int i = 0; i < g->body->n_results; i++) last[g->body->results[i]->id] = k + 1;
    /* Bucket the values by the node after which they die (params unused by
     * any node die after node 0's slot, which is harmless: they are only
     * references to the caller's tensors). */
    int *count = em_calloc((size_t)k + 1, sizeof *count);
    if (!count) {
        em_free(last);
        em_interp_free(it);
        return NULL;
    }
    for (int v = 0; v < g->n_values; v++)
        if (last[v] >= 0 && last[v] < k) count[last[v]]++;
    for (int i = 0; i < k; i++) it->release_start[i + 1] = it->release_start[i] + count[i];
    memset(count, 0, (size_t)(k + 1) * sizeof *count);
    for (int v = 0; v < g->n_values; v++)
        if (last[v] >= 0 && last[v] < k) it->release_ids[it->release_start[last[v]] + count[last[v]]++] = v;
    em_free(count);
    em_free(last);
    if (spec && spec->n_effects) {
        it->effects = em_malloc((size_t)spec->n_effects * sizeof *it->effects);
        if (!it->effects) {
            em_interp_free(it);
            return NULL;
        }
        memcpy(it->effects, spec->effects, (size_t)spec->n_effects * sizeof *it->effects);
        em_effects_mark_copies(it->effects, spec->n_effects, g->body, spec->n_outputs);
        for (int j = 0; j < spec->n_effects; j++) /* (results by value id: read from the slots) */
            if (spec->effects[j].result >= 0) it->effects[j].result = g->body->results[spec->effects[j].result]->id;
        it->n_effects = spec->n_effects;
    }
    if (spec && set_expected(it, spec->expected) != EM_OK) {
        em_interp_free(it);
        return NULL;
    }
    return it;
}

void em_interp_set_kernel(em_interp *it, const em_ir_node *node, em_interp_kernel_fn fn, void *ctx) {
    it->kernels[node->id] = (kernel_slot){fn, ctx};
}


static em_status set_expected(em_interp *it, em_tensor *const *expected) {
    const em_ir_block *b = it->g->body;
    if (!expected) return EM_OK;
    int nr = b->n_results;
    it->expected = em_calloc((size_t)(nr ? nr : 1), sizeof *it->expected);
    it->check_start = em_calloc((size_t)it->n_order + 2, sizeof *it->check_start);
    it->check_ids = em_calloc((size_t)(nr ? nr : 1), sizeof *it->check_ids);
    if (!it->expected || !it->check_start || !it->check_ids) return EM_ERR_NOMEM;
    /* bucket by position + 1, in position order */
    for (int r = 0; r < nr; r++)
        if (expected[r]) it->check_start[it->pos[b->results[r]->id] + 2]++;
    for (int k = 0; k <= it->n_order; k++) it->check_start[k + 1] += it->check_start[k];
    for (int r = 0; r < nr; r++) {
        if (!expected[r]) continue;
        int at = it->pos[b->results[r]->id] + 1;
        it->check_ids[it->check_start[at]++] = r;
        em_tensor_retain(expected[r]);
        it->expected[r] = expected[r];
    }
    for (int k = it->n_order + 1; k > 0; k--) it->check_start[k] = it->check_start[k - 1];
    it->check_start[0] = 0;
    return EM_OK;
}

void em_interp_free(em_interp *it) {
    if (!it) return;
    for (int r = 0; it->expected && r < it->g->body->n_results; r++) em_tensor_release(it->expected[r]);
    em_free(it->expected);
    em_free(it->check_start);
    em_free(it->check_ids);
    em_free(it->pos);
    em_free(it->kernels);
    em_free(it->order);
    em_free(it->release_start);
    em_free(it->release_ids);
    em_free(it->prof_ns);
    em_free(it->effects);
    em_free(it);
}

em_status em_ir_node_error(const em_ir_node *n) {
    char where[300] = "";
    if (n->loc.file) snprintf(where, sizeof where, " at %s:%d", n->loc.file, n->loc.line);
    return em_error_prefix(em_last_status() ? em_last_status() : EM_ERR_RUNTIME, "%s%s",
                           em_op_name(n->op), where);
}

/* Compares the value guards due at position `at` (node at - 1 has run). */
static em_status check_expected(const em_interp *it, int at, em_tensor **slots) {
    if (!it->check_start) return EM_OK;
    for (int j = it->check_start[at]; j < it->check_start[at + 1]; j++) {
        int r = it->check_ids[j];
        if (!em_equal_bits(slots[it->g->body->results[r]->id], it->expected[r]))
            return em_error(EM_ERR_GUARD, "@%s: result %d differs from the value the trace saw",
                            it->g->name, r);
    }
    return EM_OK;
}

static em_status run_node_with(const em_interp *it, void *run_ctx, const em_ir_node *n, em_tensor **in,
                               em_tensor **out);

/* Runs one node of a block whose values live in `slots`. A fused node may
 * take any number of inputs (the gradients of 140 rows summed in one
 * region); an op of the table at most dispatch's 64. */
static em_status run_node(const em_interp *it, void *run_ctx, const em_ir_node *n, em_tensor **slots) {
    em_tensor *few_in[64], *out[64] = {NULL};
    if (n->n_out > 64) return em_error(EM_ERR_INTERNAL, "node too wide to run");
    em_tensor **in = n->n_in <= 64 ? few_in : em_malloc((size_t)n->n_in * sizeof *in);
    if (!in) return EM_ERR_NOMEM;
    for (int i = 0; i < n->n_in; i++) in[i] = slots[n->in[i]->id];
    em_status st = run_node_with(it, run_ctx, n, in, out);
    if (in != few_in) em_free(in);
    if (st != EM_OK) return st;
    for (int i = 0; i < n->n_out; i++) slots[n->out[i]->id] = out[i];
    return EM_OK;
}

static em_status run_node_with(const em_interp *it, void *run_ctx, const em_ir_node *n, em_tensor **in,
                               em_tensor **out) {
    em_status st;
    const kernel_slot *ks = it ? &it->kernels[n->id] : NULL;
    if (ks && ks->fn)
        st = ks->fn(ks->ctx, run_ctx, n, in, out);
    else if (n->region)
        st = em_interp_run_region(n, in, out);
    else
        st = em_op_run(n->op, in, n->n_in, EM_IR_ATTRS(n), out, n->n_out);
    return st == EM_OK ? EM_OK : em_ir_node_error(n);
}

/* ---- a fused node of elementwise ops, as one chain ----
 *
 * A region whose ops are elementwise over one size N (operands of one
 * element broadcast) runs as one em_ew_chain_run: no tensor per
 * intermediate, which is most of a small node's cost. Nodes of one element
 * over operands of one element (a constant, a scalar's arithmetic) run
 * first, op by op, and join the chain as broadcast operands. Anything else
 * (a reduction, a view, a partial broadcast) runs op by op below. */

#define CHAIN_FEW 48 /* regions of up to this many values are planned on the stack */

static int64_t type_numel(const em_type *t) { return em_shape_numel(t->shape, t->ndim); }

static bool is_chain_op(const em_ir_node *n) {
    em_op_kind k = em_op_get(n->op)->kind;
    return n->n_out == 1 && !n->region && n->n_in >= 1 && n->n_in <= 3 &&
           (k == EM_KIND_UNARY || k == EM_KIND_BINARY || k == EM_KIND_TERNARY || k == EM_KIND_CAST);
}

/* The chain's size and step count, or false when the region is not one:
 * each node is a step over numel elements or a scalar node. */
static bool chain_shape(const em_ir_block *r, int64_t *numel_out, int *n_steps_out) {
    int64_t numel = 0;
    for (const em_ir_node *n = r->first; n; n = n->next)
        for (int i = 0; i < n->n_out; i++) {
            int64_t m = type_numel(&n->out[i]->type);
            numel = m > numel ? m : numel;
        }
    if (numel <= 1) return false;
    int n_steps = 0;
    for (const em_ir_node *n = r->first; n; n = n->next) {
        bool scalar = n->n_out == 1 && type_numel(&n->out[0]->type) == 1;
        for (int i = 0; i < n->n_in && scalar; i++) scalar = type_numel(&n->in[i]->type) == 1;
        if (scalar) continue;
        if (!is_chain_op(n) || type_numel(&n->out[0]->type) != numel) return false;
        for (int i = 0; i < n->n_in; i++) {
            int64_t m = type_numel(&n->in[i]->type);
            if (m != numel && m != 1) return false;
        }
        n_steps++;
    }
    *numel_out = numel;
    *n_steps_out = n_steps;
    return true;
}

bool em_interp_region_is_chain(const em_ir_node *node) {
    int64_t numel;
    int n_steps;
    return node->region && chain_shape(node->region, &numel, &n_steps);
}

/* Runs the region as a chain if it is one: 1 ran, 0 not a chain (nothing
 * ran that matters), or an error status (negated). */
static int run_region_as_chain(const em_ir_node *node, em_tensor *const *in, em_tensor **out) {
    const em_ir_block *r = node->region;
    int64_t numel;
    int n_steps, lo = INT32_MAX, hi = -1, n_nodes = 0;
    if (!chain_shape(r, &numel, &n_steps)) return 0;
    for (int i = 0; i < r->n_params; i++) {
        int id = r->params[i]->id;
        lo = id < lo ? id : lo, hi = id > hi ? id : hi;
    }
    for (const em_ir_node *n = r->first; n; n = n->next, n_nodes++)
        for (int i = 0; i < n->n_out; i++) {
            int id = n->out[i]->id;
            lo = id < lo ? id : lo, hi = id > hi ? id : hi;
        }
    int span = hi - lo + 1, n_slots = r->n_params + n_nodes;
    int few_slot_of[CHAIN_FEW * 2];
    em_tensor *few_tensors[CHAIN_FEW];
    em_type few_types[CHAIN_FEW];
    em_ew_step few_steps[CHAIN_FEW];
    bool heap = span > CHAIN_FEW * 2 || n_slots > CHAIN_FEW;
    int *slot_of = heap ? em_malloc((size_t)span * sizeof *slot_of) : few_slot_of;
    em_tensor **tensors = heap ? em_calloc((size_t)n_slots, sizeof *tensors) : few_tensors;
    em_type *types = heap ? em_malloc((size_t)n_slots * sizeof *types) : few_types;
    em_ew_step *steps = heap ? em_malloc((size_t)(n_steps ? n_steps : 1) * sizeof *steps) : few_steps;
    if (!heap) memset(few_tensors, 0, sizeof few_tensors);
    int rc = slot_of && tensors && types && steps ? 1 : -EM_ERR_NOMEM;
    int ns = 0, k = 0;
    for (int i = 0; rc == 1 && i < r->n_params; i++) {
        slot_of[r->params[i]->id - lo] = ns;
        types[ns] = r->params[i]->type;
        tensors[ns++] = in[i];
        em_tensor_retain(in[i]);
    }
    for (const em_ir_node *n = r->first; rc == 1 && n; n = n->next) {
        em_tensor *res = NULL;
        int slot = ns++;
        slot_of[n->out[0]->id - lo] = slot;
        types[slot] = n->out[0]->type;
        if (type_numel(&n->out[0]->type) == numel) { /* a step */
            em_ew_step *st = &steps[k++];
            st->op = n->op;
            st->n_in = n->n_in;
            st->out = slot;
            for (int i = 0; i < n->n_in; i++) st->in[i] = slot_of[n->in[i]->id - lo];
            continue;
        }
        em_tensor *a[64]; /* a scalar node, run now */
        for (int i = 0; i < n->n_in && i < 64; i++) a[i] = tensors[slot_of[n->in[i]->id - lo]];
        em_status st = n->n_in > 64 ? EM_ERR_INTERNAL : em_op_run(n->op, a, n->n_in, EM_IR_ATTRS(n), &res, 1);
        if (st != EM_OK) rc = -(int)em_ir_node_error(n);
        tensors[slot] = res;
    }
    /* The results a step computes are written straight into their tensors. */
    for (int i = 0; rc == 1 && i < r->n_results; i++) {
        int slot = slot_of[r->results[i]->id - lo];
        if (tensors[slot]) continue;
        const em_type *t = &types[slot];
        if (!(tensors[slot] = em_tensor_empty(t->shape, t->ndim, t->dtype, t->device)))
            rc = -(int)em_last_status();
    }
    if (rc == 1 && !em_ew_chain_run(steps, n_steps, tensors, types, ns, numel)) rc = 0;
    for (int i = 0; rc == 1 && i < r->n_results; i++) {
        out[i] = tensors[slot_of[r->results[i]->id - lo]];
        em_tensor_retain(out[i]);
    }
    for (int i = 0; i < ns; i++) em_tensor_release(tensors[i]);
    if (heap) {
        em_free(slot_of);
        em_free(tensors);
        em_free(types);
        em_free(steps);
    }
    return rc;
}

em_status em_interp_run_region(const em_ir_node *node, em_tensor *const *in, em_tensor **out) {
    int chained = run_region_as_chain(node, in, out);
    if (chained != 0) return chained > 0 ? EM_OK : (em_status)-chained;
    const em_ir_block *r = node->region;
    const em_ir_graph *g = r->graph;
    em_tensor **slots = em_calloc((size_t)(g->n_values ? g->n_values : 1), sizeof *slots);
    if (!slots) return EM_ERR_NOMEM;
    em_status st = EM_OK;
    for (int i = 0; i < r->n_params; i++) {
        em_tensor_retain(in[i]);
        slots[r->params[i]->id] = in[i];
    }
    for (const em_ir_node *n = r->first; n && st == EM_OK; n = n->next) st = run_node(NULL, NULL, n, slots);
    if (st == EM_OK)
        for (int i = 0; i < r->n_results; i++) {
            out[i] = slots[r->results[i]->id];
            em_tensor_retain(out[i]);
        }
    /* (only the region's own values are held: no sweep of the whole graph's) */
    for (int i = 0; i < r->n_params; i++) em_tensor_release(slots[r->params[i]->id]);
    for (const em_ir_node *n = r->first; n; n = n->next)
        for (int i = 0; i < n->n_out; i++) em_tensor_release(slots[n->out[i]->id]);
    em_free(slots);
    return st;
}

void em_effects_mark_copies(em_effect *effects, int n, const em_ir_block *body, int n_outputs) {
    for (int j = 0; j < n; j++) {
        effects[j].copy = false;
        if (effects[j].result < 0) continue;
        const em_ir_value *v = body->results[effects[j].result];
        for (int i = 0; i < n_outputs && !effects[j].copy; i++) effects[j].copy = body->results[i] == v;
        for (int k = 0; k < j && !effects[j].copy; k++)
            effects[j].copy = effects[k].result >= 0 && body->results[effects[k].result] == v;
    }
}

em_status em_effects_apply(const em_effect *effects, int n, em_tensor *const *in, em_tensor *const *values) {
    for (int j = 0; j < n; j++) {
        const em_effect *e = &effects[j];
        em_tensor *v = e->result >= 0 ? values[e->result] : NULL;
        if (e->kind == EM_EFFECT_GRAD) {
            /* a shared value gets a tensor of its own, as eager's .grads are:
             * accumulating into one .grad must not change another */
            em_tensor *g = v && e->copy ? em_clone(v) : v;
            if (v && !g) return em_last_status();
            em_tensor_set_grad(in[e->input], g);
            if (g != v) em_tensor_release(g);
            continue;
        }
        em_status st = e->copy ? em_assign_copy(in[e->input], v) : em_assign(in[e->input], v);
        if (st != EM_OK) return st;
    }
    return EM_OK;
}

em_status em_interp_run(em_interp *it, void *run_ctx, em_tensor *const *in, int n_in, em_tensor **out,
                        int n_out) {
    const em_ir_graph *g = it->g;
    const em_ir_block *b = g->body;
    if (n_in != b->n_params || n_out != it->n_outputs)
        return em_error(EM_ERR_VALUE, "@%s takes %d inputs and returns %d results, got %d and %d",
                        g->name, b->n_params, it->n_outputs, n_in, n_out);
    for (int i = 0; i < n_in; i++) {
        em_type t = em_tensor_type(in[i]);
        if (!em_type_eq(&t, &b->params[i]->type)) {
            char x[256], y[256];
            em_type_str(&t, x, sizeof x);
            em_type_str(&b->params[i]->type, y, sizeof y);
            return em_error(EM_ERR_VALUE, "@%s: input %d is %s, the graph expects %s", g->name, i,
                            x, y);
        }
    }
    em_tensor **slots = em_calloc((size_t)(g->n_values ? g->n_values : 1), sizeof *slots);
    if (!slots) return EM_ERR_NOMEM;
    for (int i = 0; i < n_in; i++) {
        em_tensor_retain(in[i]);
        slots[b->params[i]->id] = in[i];
    }
    em_status st = check_expected(it, 0, slots);
    bool prof = em_interp_profiling();
    for (int k = 0; k < it->n_order && st == EM_OK; k++) {
        int64_t t0 = prof ? now_ns() : 0;
        st = run_node(it, run_ctx, it->order[k], slots);
        if (prof) __atomic_add_fetch(&it->prof_ns[k], now_ns() - t0, __ATOMIC_RELAXED);
        if (st == EM_OK) st = check_expected(it, k + 1, slots);
        for (int j = it->release_start[k]; j < it->release_start[k + 1]; j++) {
            int v = it->release_ids[j];
            em_tensor_release(slots[v]);
            slots[v] = NULL;
        }
    }
    if (st == EM_OK) st = em_effects_apply(it->effects, it->n_effects, in, slots);
    if (st == EM_OK)
        for (int i = 0; i < n_out; i++) {
            out[i] = slots[b->results[i]->id];
            em_tensor_retain(out[i]);
        }
    if (prof) __atomic_add_fetch(&it->prof_runs, 1, __ATOMIC_RELAXED); /* (stopped ones too: their nodes counted) */
    for (int i = 0; i < g->n_values; i++) em_tensor_release(slots[i]);
    em_free(slots);
    return st;
}

/* How node n runs: its installed kernel, its region as one chain or op by
 * op, or its eager kernel. */
static void describe_node(em_strbuf *b, const em_interp *it, const em_ir_node *n) {
    em_strbuf_printf(b, "%s", em_op_name(n->op));
    if (n->region) {
        int ops = 0;
        for (const em_ir_node *m = n->region->first; m; m = m->next) ops++;
        em_strbuf_printf(b, " of %d op%s", ops, ops == 1 ? "" : "s");
    }
    if (n->n_out) {
        char t[160];
        em_type_str(&n->out[0]->type, t, sizeof t);
        em_strbuf_printf(b, " -> %s", t);
    }
    em_strbuf_printf(b, ", %s", it->kernels[n->id].fn          ? "compiled kernel"
                               : em_interp_region_is_chain(n) ? "eager loops in one pass"
                               : n->region                    ? "op by op"
                                                              : "eager kernel");
    if (n->loc.file) {
        const char *base = strrchr(n->loc.file, '/');
        em_strbuf_printf(b, ", %s:%d", base ? base + 1 : n->loc.file, n->loc.line);
    }
}

static _Thread_local const int64_t *by_ns; /* (qsort has no context argument) */

static int slower_first(const void *x, const void *y) {
    int64_t a = by_ns[*(const int *)x], b = by_ns[*(const int *)y];
    return a < b ? 1 : a > b ? -1 : *(const int *)x - *(const int *)y;
}

char *em_interp_profile(const em_interp *it) {
    int64_t runs = __atomic_load_n(&it->prof_runs, __ATOMIC_RELAXED);
    if (runs == 0) return NULL;
    int n = it->n_order;
    int64_t *ns = em_malloc((size_t)(n ? n : 1) * sizeof *ns);
    int *idx = em_malloc((size_t)(n ? n : 1) * sizeof *idx);
    if (!ns || !idx) {
        em_free(ns);
        em_free(idx);
        return NULL;
    }
    int64_t total = 0;
    for (int k = 0; k < n; k++) {
        ns[k] = __atomic_load_n(&it->prof_ns[k], __ATOMIC_RELAXED);
        total += ns[k];
        idx[k] = k;
    }
    int *num = em_malloc((size_t)(it->g->n_values ? it->g->n_values : 1) * sizeof *num);
    if (!num) {
        em_free(ns);
        em_free(idx);
        return NULL;
    }
    em_ir_number_values(it->g, num); /* %N as em_ir_print (and explain) show the graph */
    by_ns = ns;
    qsort(idx, (size_t)n, sizeof *idx, slower_first);
    em_strbuf b;
    em_strbuf_init(&b);
    em_strbuf_printf(&b, "%lld profiled runs, %.1f us per run in its %d nodes (slowest first)\n",
                     (long long)runs, (double)total / 1e3 / (double)runs, n);
    for (int j = 0; j < n; j++) {
        const em_ir_node *node = it->order[idx[j]];
        em_strbuf_printf(&b, "%9.1f us %5.1f%%  ", (double)ns[idx[j]] / 1e3 / (double)runs,
                         total ? 100.0 * (double)ns[idx[j]] / (double)total : 0.0);
        char ref[64];
        if (node->n_out) em_strbuf_printf(&b, "%s = ", em_ir_value_ref(node->out[0], num, ref));
        describe_node(&b, it, node);
        em_strbuf_printf(&b, "\n");
    }
    em_free(num);
    em_free(ns);
    em_free(idx);
    return em_strbuf_take(&b);
}
