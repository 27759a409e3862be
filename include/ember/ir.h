/*
 * ir.h - ember's SSA graph: types, builder, text form, verifier, interpreter.
 *
 * A graph is a body block: parameters (the graph's inputs), nodes in
 * topological order, and results (its outputs). A node applies one op of the
 * op table to values and defines result values; a `fused` node also owns a
 * region, a block whose parameters are bound to the node's inputs and whose
 * results are the node's results. Regions are isolated: their nodes use only
 * the region's own parameters and values.
 *
 * Ownership: a graph owns everything in it (nodes, values, blocks, strings)
 * in one arena, freed at once by em_ir_graph_free. Pointers into a graph are
 * borrowed and live as long as it does. Removed nodes stay in the arena.
 *
 * The text form (docs/ir.md) is the contract: em_ir_print writes exactly
 * what em_ir_parse reads, so print(parse(t)) == t for printer output.
 */
#ifndef EMBER_IR_H
#define EMBER_IR_H

#include "ember/ops.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct em_ir_graph em_ir_graph;
typedef struct em_ir_block em_ir_block;
typedef struct em_ir_node em_ir_node;
typedef struct em_ir_value em_ir_value;

/* Where an op came from in the user's program: file and a line range. */
typedef struct em_ir_loc {
    const char *file; /* interned in the graph; NULL when unknown */
    int line, line_end;
} em_ir_loc;

struct em_ir_value {
    em_type type;
    em_ir_node *def;    /* defining node; NULL for a block parameter */
    em_ir_block *block; /* block the value is defined in */
    int index;          /* result index in def, or parameter index */
    int id;             /* unique within the graph, dense from 0 */
    const char *name;   /* optional, interned: printed as %name */
};

struct em_ir_node {
    em_op op;
    int n_in, n_out;
    em_ir_value **in;
    em_ir_value **out;
    /* Its attributes, packed by its op's schema in the graph's arena (NULL
     * when the schema names none): read them with em_ir_attrs, change
     * them with em_ir_set_attrs. */
    const unsigned char *attr_data;
    uint32_t attr_size;
    em_ir_loc loc;
    em_ir_block *region; /* fused nodes: the kernel body */
    em_ir_block *block;  /* block containing this node */
    em_ir_node *prev, *next;
    int id; /* unique within the graph, dense from 0 */
};

struct em_ir_block {
    em_ir_graph *graph;
    em_ir_node *owner; /* node whose region this is; NULL for the body */
    int n_params, cap_params;
    em_ir_value **params;
    int n_results;
    em_ir_value **results;
    em_ir_node *first, *last;
};

struct em_ir_graph {
    const char *name;
    em_ir_block *body;
    int n_values; /* ids handed out so far */
    int n_nodes;
    struct em_ir_arena *arena;
};

/* ---- building ---- */

/* A new empty graph; `name` is kept with characters outside [A-Za-z0-9_.]
 * replaced by '_'. NULL on allocation failure. */
em_ir_graph *em_ir_graph_new(const char *name);
void em_ir_graph_free(em_ir_graph *g);

/* Arena allocation (zeroed) and string interning; NULL on failure. */
void *em_ir_alloc(em_ir_graph *g, size_t size);
const char *em_ir_intern(em_ir_graph *g, const char *s, size_t len);

em_ir_block *em_ir_block_new(em_ir_graph *g, em_ir_node *owner);
/* Appends a parameter of type `t`; name may be NULL, and is made into a
 * name the text form reads back, unique in the block ("xs[1]" -> "xs_1_"). */
em_ir_value *em_ir_add_param(em_ir_block *b, const em_type *t, const char *name);
/* Creates a node and its result values without inserting it. Types are
 * taken as given (use em_ir_build to infer them). */
em_ir_node *em_ir_node_new(em_ir_graph *g, em_op op, em_ir_value *const *in, int n_in,
                           const em_attrs *attrs, const em_type *out_types, int n_out,
                           em_ir_loc loc);
/* n's attributes, unpacked into *out (the fields its op's schema names;
 * every other field zero); returns out. */
const em_attrs *em_ir_attrs(const em_ir_node *n, em_attrs *out);
/* The same into a temporary of the enclosing block: EM_IR_ATTRS(n)->dims. */
#define EM_IR_ATTRS(n) em_ir_attrs((n), &(em_attrs){0})
/* Gives n the attributes a holds (NULL: none) that n's op's schema names,
 * packed into g's arena (the rest are not the op's: they are dropped). */
em_status em_ir_set_attrs(em_ir_graph *g, em_ir_node *n, const em_attrs *a);
/* Inserts `n` into `b` before `before` (NULL: at the end). */
void em_ir_insert(em_ir_block *b, em_ir_node *n, em_ir_node *before);
/* Unlinks `n` from its block (it stays in the arena). */
void em_ir_remove(em_ir_node *n);
/* Infers the result types through the op table, then creates and appends the
 * node. NULL with the inference error on failure. */
em_ir_node *em_ir_build(em_ir_block *b, em_op op, em_ir_value *const *in, int n_in,
                        const em_attrs *attrs, em_ir_loc loc);
/* The same, inserted before node `before` (in its block). */
em_ir_node *em_ir_build_before(em_ir_node *before, em_op op, em_ir_value *const *in, int n_in,
                               const em_attrs *attrs, em_ir_loc loc);
em_status em_ir_set_results(em_ir_block *b, em_ir_value *const *values, int n);
/* Replaces every use of `from` by `to` among the nodes and results of `b`. */
void em_ir_replace_uses(em_ir_block *b, em_ir_value *from, em_ir_value *to);
/* Is n a scalar constant (a 0-d `full`)? Fused regions may hold these
 * besides elementwise ops; the fuser copies them into each region. */
bool em_ir_is_scalar_const(const em_ir_node *n);
/* Rows, as row kernels reduce them (passes/fuse.c): a reduction's input
 * shape whose trailing k dims are reduced; the others index the rows. */
typedef struct em_ir_rows {
    int ndim, k;
    int64_t shape[EM_MAX_DIMS];
} em_ir_rows;
/* Is n a reduction of its input's trailing dims, each listed once? Sets
 * *rows to them. */
bool em_ir_reduces_rows(const em_ir_node *n, em_ir_rows *rows);
/* Does type t broadcast into the rows' shape? *per_row (if not NULL): is it
 * constant along the reduced dims (one value per row)? */
bool em_ir_rows_fit(const em_ir_rows *r, const em_type *t, bool *per_row);
/* May a value of type t leave a row kernel: the rows' shape, or one value
 * per row (the outer dims, then the reduced ones as 1 or dropped)? */
bool em_ir_rows_result(const em_ir_rows *r, const em_type *t);
/* counts[value id] = number of uses (node inputs and block results), over
 * the whole graph including regions. `counts` has g->n_values entries. */
void em_ir_count_uses(const em_ir_graph *g, int *counts);
/* The smallest location covering both (same file), else a. */
em_ir_loc em_ir_loc_merge(em_ir_loc a, em_ir_loc b);

/* ---- memory sharing ---- */

/* May n's results share memory with its inputs? Views, copies and casts
 * that may hand their input back, and fused regions (which may contain
 * those). */
bool em_ir_may_alias_inputs(const em_ir_node *n);
/* The strides a node's result is made with: contiguous, or as the node's
 * layout attribute orders its dims. */
void em_ir_value_strides(const em_ir_value *v, int64_t *strides);
/* Per body value (arrays of g->n_values): from_input[v], v may share a
 * graph input's memory; to_result[v], a graph result may share v's memory.
 * A pass that replaces one value by another uses these so that a result
 * never comes to share memory that the eager result did not. */
void em_ir_shared_memory(const em_ir_graph *g, bool *from_input, bool *to_result);
/* Classes of body values that may share memory: parent[] (g->n_values
 * entries) becomes a union-find forest joining each body node's results
 * with its inputs where aliases[node id] is true (the memory planners:
 * exec/plan.c, passes/memplan.c); em_ir_class finds a value's class. */
void em_ir_alias_classes(const em_ir_graph *g, const bool *aliases, int *parent);
int em_ir_class(int *parent, int v);

/* ---- text ---- */

/* The graph as text; a malloc'd string the caller frees, NULL on failure. */
char *em_ir_print(const em_ir_graph *g);
/* The graph as Graphviz text (fused kernels as clusters); malloc'd, NULL on
 * failure. */
char *em_ir_to_dot(const em_ir_graph *g);
/* Parses one graph. On error returns NULL and sets a message of the form
 * "file:line:col: error: what\n<the line>\n<caret>". */
em_ir_graph *em_ir_parse(const char *text, const char *filename);

/* Checks arity, types (by re-running inference), dominance, region
 * isolation and the fused-region invariants. EM_OK or an error naming the
 * node as it prints. */
em_status em_ir_verify(const em_ir_graph *g);

/* ---- how a compiled graph runs ---- */

/* What a run does besides computing results, applied in order once the
 * whole graph has run and every value guard has held (so a failing guard
 * leaves every input as it was). WRITE: graph input `input` takes the
 * values of body result `result` (em_assign: the write-back of an in-place
 * update the trace saw). GRAD: the .grad of graph input `input` becomes
 * body result `result`, or None when result is -1. */
typedef enum em_effect_kind { EM_EFFECT_WRITE, EM_EFFECT_GRAD } em_effect_kind;
typedef struct em_effect {
    em_effect_kind kind;
    int input, result;
    /* Its value is also a result handed to the caller or an earlier
     * effect's (after the passes, `return %0, %0`; one gradient cse made
     * for two .grads): applied as a copy, never by taking its memory or
     * handing out its tensor twice. Set by em_effects_mark_copies. */
    bool copy;
} em_effect;

/* Sets effects[j].copy for the graph whose body results the effects name
 * (results 0..n_outputs-1 are handed to the caller). Call it on the graph
 * that runs: the passes decide which results are one value. */
void em_effects_mark_copies(em_effect *effects, int n, const em_ir_block *body, int n_outputs);

/* A graph run as a compiled specialisation: the caller gets body results
 * 0..n_outputs-1; the others feed the value guards and the effects.
 * expected[r] (a NULL array or entry: none) is the value body result r
 * must have, bit for bit: it is compared as soon as its node has run, and a
 * difference stops the run there with EM_ERR_GUARD (nodes after it never
 * run, no effect is applied). Borrowed by whoever is handed it. */
typedef struct em_run_spec {
    int n_outputs;
    em_tensor *const *expected;
    const em_effect *effects;
    int n_effects;
} em_run_spec;

/* Applies effects[0..n) with the graph inputs in[], an effect's result r
 * being values[r] (all borrowed); those marked copy (em_effects_mark_copies)
 * copy their value. Stops at the first failing write-back. */
em_status em_effects_apply(const em_effect *effects, int n, em_tensor *const *in, em_tensor *const *values);

/* ---- interpretation: the reference backend ---- */

typedef struct em_interp em_interp;
/* Runs one node: in[] are its inputs, out[] receives n_out new references.
 * `run_ctx` is what the caller of em_interp_run passed for this run. */
typedef em_status (*em_interp_kernel_fn)(void *ctx, void *run_ctx, const em_ir_node *node,
                                         em_tensor *const *in, em_tensor **out);

/* Prepares to run `g` (which must outlive the interpreter) with the eager
 * kernels; fused nodes run their regions op by op. `spec` (NULL: every body
 * result is returned, no guards, no effects) is copied, its expected values
 * retained. NULL when memory runs out. */
em_interp *em_interp_new(const em_ir_graph *g, const em_run_spec *spec);
/* Runs `node` with `fn` instead (how a backend plugs compiled kernels in). */
void em_interp_set_kernel(em_interp *it, const em_ir_node *node, em_interp_kernel_fn fn, void *ctx);
/* Runs the graph: in[] borrowed; out[] receives new references to the
 * spec's outputs (every body result without a spec); run_ctx is handed to
 * the installed kernels. */
em_status em_interp_run(em_interp *it, void *run_ctx, em_tensor *const *in, int n_in, em_tensor **out,
                        int n_out);
/* Profiling: while on (EMBER_PROFILE=1 sets it at start), every run times
 * each node into the interpreter's totals. em_interp_profile prints them,
 * slowest first, as malloc'd text: NULL when no run was profiled. */
void em_interp_set_profiling(bool on);
bool em_interp_profiling(void);
char *em_interp_profile(const em_interp *it);
/* Prefixes the current error with node n's op and source line, as a
 * failing run reports it ("matmul at model.py:12: ..."). */
em_status em_ir_node_error(const em_ir_node *n);
/* Runs one fused node's region with the eager kernels: in one pass over
 * blocks of its elements where every op is elementwise over one size
 * (em_ew_chain_run), else op by op. */
em_status em_interp_run_region(const em_ir_node *node, em_tensor *const *in, em_tensor **out);
/* Does the region run in one pass (the first case above)? */
bool em_interp_region_is_chain(const em_ir_node *node);
void em_interp_free(em_interp *it);

#ifdef __cplusplus
}
#endif
#endif
