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
 * traced call left. */
void em_tensor_set_grad(em_tensor *t, em_tensor *g);

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

/* Does op have a gradient (ops.def's grad column is not NONE)? */
bool em_op_differentiable(int op);

/* Live node count, for leak tests. */
int64_t em_node_live_count(void);

#ifdef __cplusplus
}
#endif
#endif
