/*
 * autograd.h - reverse-mode automatic differentiation, define-by-run.
 *
 * While grad mode is on (the default, per thread), every differentiable op
 * (ops.def's grad column) that reads a tensor with requires_grad records a
 * node: which op, its attributes, the tensors its backward formula needs,
 * and edges to the nodes that made its inputs. Its float results get
 * requires_grad and grad_fn. em_backward walks the nodes from the outputs
 * in reverse order of creation, runs each op's backward formula (written
 * with ember ops, runtime/autograd/formulas.c, so they are traceable and,
 * with create_graph, differentiable again) and accumulates into the .grad
 * of leaves. Saved tensors are checked against the storage version counter,
 * so a value overwritten in place after it was saved is an error, not a
 * wrong gradient; the graph's saved tensors are freed after a backward
 * unless retain_graph.
 *
 * Ownership as in tensor.h: functions returning em_tensor* or em_node*
 * return new references; nodes are refcounted (em_node_release).
 */
#ifndef EMBER_AUTOGRAD_H
#define EMBER_AUTOGRAD_H

#include <stddef.h>

#include "ember/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct em_node em_node;
typedef struct em_grad_hook em_grad_hook;

/* A tensor's autograd state lives behind its EM_LAYER_AUTOGRAD word
 * (tensor.h), made the first time the tensor requires grad, gets a history
 * or a .grad (PyTorch's AutogradMeta): tensors autograd never touched
 * carry none. Only runtime/autograd reads it; these say what it holds. */
bool em_requires_grad(const em_tensor *t);
/* The node that made t (borrowed), NULL for a leaf. */
em_node *em_grad_fn(const em_tensor *t);
/* Which of its grad_fn's results t is (0 for a leaf). */
int em_output_nr(const em_tensor *t);
/* t's .grad (borrowed), NULL for None. */
em_tensor *em_tensor_grad(const em_tensor *t);
/* Has t a retain_grad() hook? */
bool em_tensor_retains_grad(const em_tensor *t);

/* Grad mode, per thread (on by default); em_set_grad_enabled returns the
 * previous setting, for scoped restores. */
bool em_grad_enabled(void);
bool em_set_grad_enabled(bool on);

/* requires_grad of a leaf: only floating-point tensors can require
 * gradients, and a non-leaf cannot stop requiring them (use em_detach). */
em_status em_set_requires_grad(em_tensor *t, bool on);
/* A new tensor sharing t's memory, without history and not requiring grad. */
em_tensor *em_detach(em_tensor *t);
/* t's .grad becomes g (retained; NULL: None) and the old one is released,
 * with no checks and no trace event: a compiled run applying the .grad a
 * traced call left. Fails only out of memory for t's autograd state. */
em_status em_tensor_set_grad(em_tensor *t, em_tensor *g);
/* Makes t's autograd state now, so that a later em_tensor_set_grad on t
 * cannot fail (all-or-nothing updates reserve first). */
em_status em_tensor_autograd_reserve(em_tensor *t);
/* Drops t's history: a leaf again, not requiring grad (Tensor.detach_). */
void em_tensor_detach_(em_tensor *t);

/* Backpropagates from outputs[i] with upstream gradients grads[i] (NULL: a
 * one-element output's implicit 1), accumulating into the .grad of every
 * leaf that requires grad. */
em_status em_backward(em_tensor *const *outputs, em_tensor *const *grads, int n, bool retain_graph,
                      bool create_graph);
/* The gradients of outputs with respect to inputs, returned in result[]
 * (new references; NULL for an unused input when allow_unused) rather than
 * accumulated into .grad. */
em_status em_autograd_grad(em_tensor *const *outputs, em_tensor *const *grads, int n,
                           em_tensor *const *inputs, int n_inputs, bool retain_graph,
                           bool create_graph, bool allow_unused, em_tensor **result);

/* em_autograd_grad for a compiled function's joint trace (frontend/): the
 * inputs bound the graph, so nothing past an input runs (where its gradient
 * goes on is the concern of the node that will stand for the traced
 * computation, which must not be a function of another input); no hook
 * runs (a leaf's will, in the real backward), and a hook on a tensor inside
 * the bound is an error. The graph is retained; unused inputs get NULL. */
em_status em_autograd_grad_within(em_tensor *const *outputs, em_tensor *const *grads, int n,
                                  em_tensor *const *inputs, int n_inputs, em_tensor **result);
/* The creation count of nodes so far: nodes made later have a larger one. */
uint64_t em_autograd_clock(void);
/* Calls fn for every tensor saved by a node behind roots[0..n) (their grad_fns
 * and the nodes they lead to) made since clock `since`: the tensors a
 * graph keeps alive. */
em_status em_autograd_visit_saved(em_tensor *const *roots, int n, uint64_t since,
                                  void (*fn)(void *ctx, const em_tensor *t), void *ctx);

/* Nodes, for introspection (Python's grad_fn). */
void em_node_retain(em_node *n);
void em_node_release(em_node *n);
/* PyTorch's naming: "MulBackward0", "AccumulateGrad". */
const char *em_node_name(const em_node *n, char *buf, size_t size);
/* Does t carry autograd history a later backward() could still use (a
 * grad_fn whose saved tensors were not freed by a backward)? */
bool em_autograd_graph_live(const em_tensor *t);
int em_node_n_next(const em_node *n);
/* The node input i's gradient goes to (borrowed; NULL when that input needs
 * none) and which of its inputs it is. */
em_node *em_node_next(const em_node *n, int i, int *input_nr);
/* The leaf an AccumulateGrad node accumulates into (borrowed), else NULL. */
em_tensor *em_node_variable(const em_node *n);

/* ---- hooks, custom functions, anomaly detection ---- */

/* A gradient hook: sees the gradient of a tensor each time backward computes
 * it, before it is used; setting *replacement (a new reference) replaces it.
 * A failure stops the backward with that status. */
typedef em_status (*em_grad_hook_fn)(void *ctx, em_tensor *grad, em_tensor **replacement);
/* Adds a hook on t's gradient (t requires grad): a leaf's runs before the
 * gradient is accumulated into .grad, a result's when its gradient is
 * complete, before its node's formula. Hooks run in the order they were
 * added. The hook lives with the leaf, or with the node that made t;
 * free_ctx(ctx) runs when it goes (not on failure). */
em_status em_tensor_register_hook(em_tensor *t, em_grad_hook_fn fn, void *ctx, void (*free_ctx)(void *));
/* Adds a hook on a leaf that runs after backward accumulated into its .grad
 * (PyTorch's register_post_accumulate_grad_hook): fn(ctx, leaf, ignored).
 * Not in autograd.grad, which accumulates nothing. DistributedDataParallel
 * starts reducing a bucket of gradients from it. */
em_status em_tensor_register_post_accumulate_hook(em_tensor *t, em_grad_hook_fn fn, void *ctx,
                                                  void (*free_ctx)(void *));
void em_grad_hooks_free(em_grad_hook *h);
/* A result t keeps its gradient in its .grad from now on (summed over
 * backward calls, without history), as a leaf does; a leaf already does. */
em_status em_tensor_retain_grad(em_tensor *t);

/* The backward of a host-defined function: gin[i] (new references, NULL for
 * none) from the results' gradients gout[j] (never NULL: absent ones are
 * zeros); needs[i] says which inputs want one. */
typedef em_status (*em_custom_backward_fn)(void *ctx, em_tensor *const *gout, int n_out, em_tensor **gin,
                                           int n_in, const bool *needs);
/* Records a computation the host ran itself (with grad mode off) as one
 * node named `name`: in[] are the tensors it read (those requiring grad get
 * edges), out[] its fresh results, which get the node as their grad_fn
 * (float ones). On success the node owns ctx (free_ctx runs when it goes);
 * on failure the caller still does. */
em_status em_autograd_custom(const char *name, em_tensor *const *in, int n_in, em_tensor *const *out, int n_out,
                             em_custom_backward_fn fn, void *ctx, void (*free_ctx)(void *));

/* Anomaly detection (off by default; returns the previous setting): every
 * node records where it was made (origin(), an em_malloc'd text from the
 * host, e.g. its stack), and a backward formula that returns a NaN is an
 * error naming the node and that place. */
bool em_autograd_set_anomaly(bool on);
bool em_autograd_anomaly(void);
/* Whether anomaly mode checks the gradients for NaN (on by default; the
 * origins are recorded either way), as detect_anomaly(check_nan=...);
 * returns the previous setting. */
bool em_autograd_set_anomaly_check_nan(bool on);
bool em_autograd_anomaly_check_nan(void);
void em_autograd_set_origin_fn(char *(*origin)(void));

/* Does op have a gradient (ops.def's grad column is not NONE)? */
bool em_op_differentiable(int op);

/* Live node count, for leak tests. */
int64_t em_node_live_count(void);

#ifdef __cplusplus
}
#endif
#endif
