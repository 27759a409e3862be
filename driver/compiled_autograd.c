/*
 * compiled_autograd.c - autograd across a compiled function's boundary.
 *
 * A compiled function whose results require grad is traced forward and
 * backward at once (em_trace_backward): the joint graph. Here it is split
 * (passes/partition.c) into a forward graph, which the specialisation
 * compiles and runs as any other, returning besides its results the
 * values the backward needs; and a backward graph, compiled here, which
 * maps those saved values and the results' gradients to the inputs'
 * gradients. Every compiled run then gives its results one autograd node,
 * CompiledFunctionBackward, whose edges lead to the inputs that require
 * grad (arguments and captured parameters) and whose backward runs the
 * compiled backward graph; the engine does the rest as for any node
 * (accumulation into .grad, hooks on parameters, retain_graph, the version
 * checks of what was saved).
 *
 * The backward program is shared by the specialisation and every node its
 * runs made (refcounted): a node may outlive the specialisation (reset()).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compiled_autograd.h"
#include "ember/alloc.h"
#include "ember/autograd.h"
#include "ember/passes.h"

struct em_backward_program {
    int64_t refcount; /* atomic */
    char name[160];   /* for messages: "f" */
    em_compiled *compiled;
    int n_saved_results; /* forward results after the function's own */
    int *saved_inputs, n_saved_inputs; /* forward graph inputs the backward reads */
    int *grad_outputs, n_grad_outputs; /* results with a gradient, in order */
    int *grad_inputs, n_grad_inputs;   /* backward result i: the gradient of graph input grad_inputs[i] */
    char *report;                      /* the partition's: saved and recomputed */
};

/* What one run's node keeps: the program and the saved tensors with their
 * versions then, in one allocation (a node is made at every call). */
typedef struct {
    em_backward_program *bp;
    int n_saved;
    uint64_t *versions; /* [n_saved], after saved[] */
    em_tensor *saved[];
} node_ctx;

static void ctx_free(void *p) {
    node_ctx *c = p;
    for (int i = 0; i < c->n_saved; i++) em_tensor_release(c->saved[i]);
    em_backward_program_release(c->bp);
    em_free(c);
}

/* Per-call scratch arrays of tensors: on the stack when small. */
#define SMALL 32
static em_tensor **scratch(em_tensor **small, int n) {
    if (n <= SMALL) {
        memset(small, 0, SMALL * sizeof *small);
        return small;
    }
    return em_calloc((size_t)n, sizeof(em_tensor *));
}
static void scratch_free(em_tensor **a, em_tensor **small) {
    if (a != small) em_free(a);
}

void em_backward_program_release(em_backward_program *bp) {
    if (!bp || __atomic_sub_fetch(&bp->refcount, 1, __ATOMIC_ACQ_REL) > 0) return;
    em_compiled_free(bp->compiled);
    em_free(bp->saved_inputs);
    em_free(bp->grad_outputs);
    em_free(bp->grad_inputs);
    em_free(bp->report);
    em_free(bp);
}

int em_backward_program_n_saved(const em_backward_program *bp) { return bp->n_saved_results; }
const em_compiled *em_backward_program_compiled(const em_backward_program *bp) { return bp->compiled; }
const char *em_backward_program_report(const em_backward_program *bp) { return bp->report ? bp->report : ""; }

static int *copy_ints(const int *a, int n) {
    int *c = em_malloc((size_t)(n ? n : 1) * sizeof *c);
    if (c && n) memcpy(c, a, (size_t)n * sizeof *c);
    return c;
}

/* An example of graph input v for compiling: contiguous, as every run gives it. */
static em_tensor *example_of(const em_ir_value *v) {
    return em_tensor_empty(v->type.shape, v->type.ndim, v->type.dtype, v->type.device);
}

em_status em_backward_program_new(const char *name, em_ir_graph *joint, const em_joint_layout *layout,
                                  em_tensor *const *examples, const em_compile_opts *opts, em_ir_graph **forward,
                                  em_backward_program **out) {
    *forward = NULL;
    *out = NULL;
    em_partition part;
    em_status st = em_partition_joint(joint, layout->n_inputs, layout->n_fwd_results, layout->n_outputs, true, &part);
    em_ir_graph_free(joint);
    if (st != EM_OK) return st;
    em_backward_program *bp = em_calloc(1, sizeof *bp);
    const em_ir_block *bw = part.backward->body;
    em_tensor **ex = em_calloc((size_t)(bw->n_params + 1), sizeof *ex);
    if (!bp || !ex) {
        em_free(bp);
        em_free(ex);
        em_partition_clear(&part);
        return em_error(EM_ERR_NOMEM, "%s: out of memory compiling the backward", name);
    }
    bp->refcount = 1;
    snprintf(bp->name, sizeof bp->name, "%s", name);
    bp->n_saved_results = part.n_saved_results;
    bp->n_saved_inputs = part.n_saved_inputs;
    bp->n_grad_outputs = layout->n_grad_outputs;
    bp->n_grad_inputs = layout->n_grad_inputs;
    bp->saved_inputs = part.saved_inputs; /* (taken) */
    part.saved_inputs = NULL;
    bp->grad_outputs = copy_ints(layout->grad_outputs, layout->n_grad_outputs);
    bp->grad_inputs = copy_ints(layout->grad_inputs, layout->n_grad_inputs);
    bp->report = part.report;
    part.report = NULL;
    if (!bp->saved_inputs || !bp->grad_outputs || !bp->grad_inputs)
        st = em_error(EM_ERR_NOMEM, "%s: out of memory compiling the backward", name);
    /* examples: the saved values and the gradients as runs give them (contiguous), the saved inputs themselves */
    for (int i = 0; i < bw->n_params && st == EM_OK; i++) {
        int k = i - part.n_saved_results;
        if (k >= 0 && k < part.n_saved_inputs) {
            em_tensor_retain(ex[i] = examples[bp->saved_inputs[k]]);
        } else if (!(ex[i] = example_of(bw->params[i]))) {
            st = em_last_status();
        }
    }
    if (st == EM_OK) {
        em_compile_opts o = *opts;
        o.guards_text = NULL;
        o.spec = NULL;
        st = em_compile(part.backward, ex, bw->n_params, &o, &bp->compiled); /* (graph taken) */
        part.backward = NULL;
    }
    for (int i = 0; i < bw->n_params; i++) em_tensor_release(ex[i]);
    em_free(ex);
    if (st != EM_OK) {
        em_partition_clear(&part);
        em_backward_program_release(bp);
        return st;
    }
    *forward = part.forward;
    part.forward = NULL;
    em_partition_clear(&part);
    *out = bp;
    return EM_OK;
}

/* The node's backward: the compiled backward graph on the saved tensors
 * and the results' gradients. */
static em_status run_backward(void *p, em_tensor *const *gout, int n_out, em_tensor **gin, int n_in,
                              const bool *needs) {
    node_ctx *c = p;
    em_backward_program *bp = c->bp;
    if (em_grad_enabled())
        return em_error(EM_ERR_NOT_IMPLEMENTED,
                        "double backward (create_graph=True) through the compiled function %s is not "
                        "supported yet: its backward is a compiled graph without autograd history; run "
                        "it eagerly (EMBER_COMPILE=0, or call the function without ember.compile)",
                        bp->name);
    for (int i = 0; i < c->n_saved; i++)
        if (c->saved[i]->storage->version != c->versions[i]) {
            char shape[128];
            em_shape_str(c->saved[i]->shape, c->saved[i]->ndim, shape, sizeof shape);
            return em_error(EM_ERR_RUNTIME,
                            "one of the variables needed for gradient computation has been modified by an "
                            "inplace operation: [%s %s] is at version %llu; expected version %llu instead "
                            "(it was saved by the compiled function %s)",
                            em_dtype_long_name(c->saved[i]->dtype), shape,
                            (unsigned long long)c->saved[i]->storage->version,
                            (unsigned long long)c->versions[i], bp->name);
        }
    int n = c->n_saved + n_out;
    em_tensor *small_in[SMALL], *small_res[SMALL];
    em_tensor **in = scratch(small_in, n), **res = scratch(small_res, bp->n_grad_inputs);
    em_status st = in && res ? EM_OK : em_error(EM_ERR_NOMEM, "%s: out of memory in backward", bp->name);
    for (int i = 0; i < c->n_saved && st == EM_OK; i++) {
        em_tensor *t = c->saved[i];
        bool as_traced = i >= bp->n_saved_results || em_tensor_is_contiguous(t); /* (inputs: guarded) */
        if (!(in[i] = as_traced ? (em_tensor_retain(t), t) : em_contiguous(t))) st = em_last_status();
    }
    const em_ir_block *graph = em_compiled_graph(bp->compiled)->body;
    for (int j = 0; j < n_out && st == EM_OK; j++) { /* as compiled: the result's dtype, contiguous */
        em_tensor *g = gout[j];
        const em_type *want = &graph->params[c->n_saved + j]->type;
        if (!em_shape_eq(g->shape, g->ndim, want->shape, want->ndim)) {
            char a[128], b[128];
            em_shape_str(g->shape, g->ndim, a, sizeof a);
            em_shape_str(want->shape, want->ndim, b, sizeof b);
            st = em_error(EM_ERR_RUNTIME, "%s: the gradient of result %d has shape %s, not %s", bp->name,
                          bp->grad_outputs[j], a, b);
        } else if (g->dtype != want->dtype) {
            if (!(in[c->n_saved + j] = em_cast(g, want->dtype))) st = em_last_status();
        } else if (!(in[c->n_saved + j] = em_tensor_is_contiguous(g) ? (em_tensor_retain(g), g) : em_contiguous(g))) {
            st = em_last_status();
        }
    }
    if (st == EM_OK) st = em_compiled_run(bp->compiled, in, n, res, bp->n_grad_inputs);
    for (int i = 0; i < bp->n_grad_inputs && st == EM_OK; i++) {
        if (i < n_in && needs[i]) {
            gin[i] = res[i];
            res[i] = NULL;
        }
    }
    for (int i = 0; in && i < n; i++) em_tensor_release(in[i]);
    for (int i = 0; res && i < bp->n_grad_inputs; i++) em_tensor_release(res[i]);
    scratch_free(in, small_in);
    scratch_free(res, small_res);
    return st;
}

em_status em_backward_program_attach(em_backward_program *bp, em_tensor *const *in, em_tensor **outs,
                                     em_tensor *const *saved_results) {
    int n_saved = bp->n_saved_results + bp->n_saved_inputs;
    node_ctx *c = em_malloc(sizeof *c + (size_t)n_saved * (sizeof(em_tensor *) + sizeof(uint64_t)));
    em_tensor *small_diff[SMALL], *small_rg[SMALL];
    em_tensor **diff = scratch(small_diff, bp->n_grad_inputs), **rg = scratch(small_rg, bp->n_grad_outputs);
    if (!c || !diff || !rg) {
        em_free(c);
        scratch_free(diff, small_diff);
        scratch_free(rg, small_rg);
        return em_error(EM_ERR_NOMEM, "%s: out of memory", bp->name);
    }
    c->versions = (uint64_t *)(c->saved + n_saved);
    for (int i = 0; i < n_saved; i++) {
        em_tensor *t = i < bp->n_saved_results ? saved_results[i] : in[bp->saved_inputs[i - bp->n_saved_results]];
        em_tensor_retain(c->saved[i] = t);
        c->versions[i] = t->storage->version;
    }
    c->n_saved = n_saved;
    __atomic_add_fetch(&bp->refcount, 1, __ATOMIC_RELAXED);
    c->bp = bp;
    for (int i = 0; i < bp->n_grad_inputs; i++) diff[i] = in[bp->grad_inputs[i]];
    em_status st = EM_OK;
    /* each result the node makes must be a tensor of its own: not an input, not returned twice */
    for (int j = 0; j < bp->n_grad_outputs && st == EM_OK; j++) {
        int r = bp->grad_outputs[j];
        em_tensor *t = outs[r];
        bool shared = t->refcount > 1 || em_grad_fn(t) || em_requires_grad(t);
        for (int k = 0; k < j && !shared; k++) shared = rg[k] == t;
        if (shared) {
            em_tensor *a = em_tensor_alias(t, t->offset, t->shape, t->strides, t->ndim);
            if (!a) {
                st = em_last_status();
                break;
            }
            em_tensor_release(outs[r]);
            outs[r] = t = a;
        }
        rg[j] = t;
    }
    if (st == EM_OK)
        st = em_autograd_custom("CompiledFunctionBackward", diff, bp->n_grad_inputs, rg, bp->n_grad_outputs,
                                run_backward, c, ctx_free);
    if (st != EM_OK) ctx_free(c);
    scratch_free(diff, small_diff);
    scratch_free(rg, small_rg);
    return st;
}
