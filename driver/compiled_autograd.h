/*
 * compiled_autograd.h - a compiled function's backward graph and the
 * autograd node its runs give their results (compiled_autograd.c).
 */
#ifndef EMBER_FRONTEND_COMPILED_AUTOGRAD_H
#define EMBER_FRONTEND_COMPILED_AUTOGRAD_H

#include "ember/frontend.h"

typedef struct em_backward_program em_backward_program;

/* Where things are in a joint trace's graph (em_trace_result). */
typedef struct em_joint_layout {
    int n_inputs;      /* the forward's inputs: the graph's params before the results' gradients */
    int n_outputs;     /* the function's results: the first graph results */
    int n_fwd_results; /* the graph results before the inputs' gradients */
    const int *grad_outputs; /* results with a gradient (the params after n_inputs, in order) */
    int n_grad_outputs;
    const int *grad_inputs; /* graph inputs whose gradients the last graph results are */
    int n_grad_inputs;
} em_joint_layout;

/* Splits the joint graph (taken) and compiles its backward with `opts`
 * (the forward inputs `examples`, as traced); *forward receives the forward
 * graph, for the caller to compile: its results are the function's
 * n_outputs, then em_backward_program_n_saved values for the backward,
 * then the rest of the forward results. */
em_status em_backward_program_new(const char *name, em_ir_graph *joint, const em_joint_layout *layout,
                                  em_tensor *const *examples, const em_compile_opts *opts, em_ir_graph **forward,
                                  em_backward_program **out);
void em_backward_program_release(em_backward_program *bp);
int em_backward_program_n_saved(const em_backward_program *bp);
const em_compiled *em_backward_program_compiled(const em_backward_program *bp);
/* What the partition saved and recomputed, lines. */
const char *em_backward_program_report(const em_backward_program *bp);

/* After a run of the forward graph on inputs in[]: gives the results
 * outs[] that have gradients one CompiledFunctionBackward node, which keeps
 * the saved values (saved_results[0..n_saved), and the saved inputs).
 * A result that is not a tensor of its own (an input, one returned twice)
 * is replaced in outs[] by an alias. */
em_status em_backward_program_attach(em_backward_program *bp, em_tensor *const *in, em_tensor **outs,
                                     em_tensor *const *saved_results);

#endif
