/*
 * node.h - the autograd graph inside the runtime: nodes, saved tensors,
 * the hooks em_op_run calls, and the backward formulas' interface.
 */
#ifndef EMBER_AUTOGRAD_NODE_H
#define EMBER_AUTOGRAD_NODE_H

#include "ember/autograd.h"
#include "ember/ops.h"

/* Where an input's gradient goes: a node and which of its results the input
 * was (AccumulateGrad nodes have one). */
typedef struct {
    em_node *node; /* owned; NULL: the input needs no gradient */
    int input_nr;
} em_edge;

/* A tensor a backward formula needs, with the storage version it had. */
typedef struct {
    em_tensor *t; /* owned; NULL: not saved */
    uint64_t version;
    bool is_output; /* saved without history (it would point back at its node) */
} em_saved;

#define EM_OP_ACCUMULATE EM_OP_COUNT    /* the op of AccumulateGrad nodes */
#define EM_OP_CUSTOM (EM_OP_COUNT + 1) /* the op of a host function's node (em_autograd_custom) */

struct em_grad_hook {
    em_grad_hook_fn fn;
    void *ctx;
    void (*free_ctx)(void *);
    int output_nr; /* on a node: which result's gradient */
    struct em_grad_hook *next;
};

struct em_node {
    int64_t refcount; /* atomic */
    uint64_t seq;     /* creation order: backward runs newest first */
    int op;           /* an em_op, or EM_OP_ACCUMULATE */
    em_attrs attrs;
    int n_in, n_out;
    em_edge *next;      /* [n_in] */
    em_type *in_types;  /* [n_in] */
    em_type *out_types; /* [n_out] */
    em_saved *saved_in; /* [n_in] */
    em_saved *saved_out;/* [n_out] */
    bool released;      /* saved tensors freed by a backward without retain_graph */
    em_tensor *variable; /* AccumulateGrad: the leaf (owned) */
    em_grad_hook *hooks; /* on its results' gradients (owned) */
    /* EM_OP_CUSTOM: the host's backward and its context (owned), a name */
    em_custom_backward_fn custom_fn;
    void *custom_ctx;
    void (*custom_free)(void *);
    char *name;
    char *origin; /* anomaly mode: where it was made (owned) */
};

/* A backward formula: gradients of the inputs (gin[i], new references; NULL
 * where none) from the gradients of the results (gout[j], borrowed, never
 * NULL: absent ones are zeros), with the node's saved tensors unpacked into
 * in[] and out[] (NULL where not saved). Formulas need not match shapes or
 * dtypes: the engine sums each gradient down to its input's shape (undoing
 * broadcasting) and casts it to the input's dtype. */
typedef struct {
    const em_node *node;
    em_tensor *const *in;  /* [n_in] saved inputs */
    em_tensor *const *out; /* [n_out] saved results */
    const bool *needs;     /* [n_in]: which inputs want a gradient */
    unsigned absent;       /* bit j: result j got no gradient (gout[j] is zeros) */
} em_bw_ctx;
typedef em_status (*em_bw_fn)(const em_bw_ctx *c, em_tensor *const *gout, em_tensor **gin);

/* The grad column of ops.def, as a table. */
typedef enum { EM_GRAD_NONE, EM_GRAD_ZERO, EM_GRAD_NOSAVE, EM_GRAD_IN, EM_GRAD_IDX, EM_GRAD_OUT, EM_GRAD_BOTH } em_grad_kind;
/* A tensor's autograd state (autograd.h), behind its EM_LAYER_AUTOGRAD
 * word. requires_grad: gradients flow to the tensor. grad_fn (owned): the
 * node that made it, NULL for a leaf; output_nr: which of that node's
 * results it is. grad (owned): a leaf's accumulated gradient. grad_acc
 * (weak): the leaf's accumulation node while a graph uses it. hooks
 * (owned): a leaf's gradient hooks; retain_hook: retain_grad()'s hook on
 * grad_fn (weak both ways). */
typedef struct em_autograd_meta {
    bool requires_grad;
    int output_nr;
    em_node *grad_fn;
    em_tensor *grad;
    em_node *grad_acc;
    em_grad_hook *hooks;
    em_grad_hook *retain_hook;
} em_autograd_meta;

/* t's autograd state (borrowed), NULL when it has none. */
static inline em_autograd_meta *em_autograd_meta_of(const em_tensor *t) {
    return (em_autograd_meta *)t->layer_state[EM_LAYER_AUTOGRAD];
}

typedef struct {
    em_grad_kind kind;
    em_bw_fn fn;
} em_grad_rule;
const em_grad_rule *em_grad_rule_of(em_op op);

#endif
