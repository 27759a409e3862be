/*
 * passes.h - graph-to-graph rewrites. One file per pass in passes/, each
 * with one entry point; all rewrite the graph in place and leave it valid
 * for em_ir_verify. A pass may say what it did (which rules fired, what it
 * fused or merged) as lines appended to a report, which dumps and
 * explain() show; the report may be NULL.
 */
#ifndef EMBER_PASSES_H
#define EMBER_PASSES_H

#include "ember/ir.h"
#include "ember/strbuf.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Every pass, once: X(function suffix, name, help). ORDER PASS */
#define EM_PASS_LIST(X)                                                                            \
    X(canonicalize, "canonicalize", "algebraic rewrites from a table of rules (x*1, neg(neg x), permute chains...)") \
    X(cse, "cse", "merge identical pure nodes (random ops never)")                                \
    X(const_fold, "const-fold", "compute ops on constants at compile time")                       \
    X(dce, "dce", "remove nodes whose results are never used (pure ops only)")                     \
    X(layout, "layout", "drop contiguous() no consumer needs; matmuls write results in the order their permute reads") \
    X(fuse, "fuse", "elementwise chains, row kernels and GEMM epilogues into fused nodes")       \
    X(memplan, "memplan", "order nodes for a lower peak of memory (values made just before first use)")

#define X(fn, name, help) em_status em_pass_##fn(em_ir_graph *g, em_strbuf *report);
EM_PASS_LIST(X)
#undef X

typedef struct em_pass_info {
    const char *name;
    em_status (*run)(em_ir_graph *g, em_strbuf *report);
    const char *help;
} em_pass_info;

/* The pass called `name`, or NULL. */
const em_pass_info *em_pass_find(const char *name);
/* All passes; *n receives their number. */
const em_pass_info *em_pass_all(int *n);

/* The pipeline @ember.compile runs, NULL-terminated. */
extern const char *const em_default_pipeline[];

/* Called after each pass with the graph as it now is. */
typedef void (*em_pass_observer)(void *ctx, int index, const char *pass, const em_ir_graph *g);

/* Runs the named passes in order, verifying after each when `verify` is set;
 * each pass's report lines go to `report` (NULL: none). Errors name the
 * pass that failed. */
em_status em_pass_run_pipeline(em_ir_graph *g, const char *const *names, int n, bool verify,
                               em_pass_observer observer, void *ctx, em_strbuf *report);

/* ---- splitting a joint forward-backward graph (passes/partition.c) ---- */

/* A compiled function's joint graph, split. The joint graph's params are
 * the forward's inputs (the first n_fwd_inputs) and then the gradients of
 * its results that require grad; its results are the forward's (the first
 * n_fwd_results) and then the gradients of its inputs.
 *   forward:  params = the forward inputs; results = the forward results,
 *             with the n_saved_results values the backward needs inserted
 *             before forward result saved_at;
 *   backward: params = those saved values, then the forward inputs
 *             saved_inputs[0..n_saved_inputs) (by index), then the
 *             results' gradients; results = the inputs' gradients. */
typedef struct em_partition {
    em_ir_graph *forward, *backward; /* owned */
    int n_saved_results;
    int *saved_inputs, n_saved_inputs;
    char *report; /* what is saved and what recomputed, lines (owned) */
} em_partition;

/* Splits `joint` (unfused; unchanged). recompute_cheap: elementwise ops
 * and views are recomputed in the backward where that saves fewer bytes. */
em_status em_partition_joint(const em_ir_graph *joint, int n_fwd_inputs, int n_fwd_results, int saved_at,
                             bool recompute_cheap, em_partition *p);
void em_partition_clear(em_partition *p);

#ifdef __cplusplus
}
#endif
#endif
