/*
 * dce.c - dead code elimination.
 *
 * One backward sweep per block: a node whose results are all unused and
 * whose op is pure goes, and its operands lose a use, so whole dead chains
 * disappear in one pass. Random ops are not pure (they advance the
 * generator) and stay.
 */
#include <stdlib.h>

#include "ember/passes.h"

static void sweep(em_ir_block *b, int *uses) {
    for (em_ir_node *n = b->last, *prev; n; n = prev) {
        prev = n->prev;
        bool dead = (em_op_get(n->op)->flags & EM_F_PURE) != 0;
        for (int i = 0; i < n->n_out && dead; i++) dead = uses[n->out[i]->id] == 0;
        if (dead) {
            for (int i = 0; i < n->n_in; i++) uses[n->in[i]->id]--;
            em_ir_remove(n);
        } else if (n->region) {
            sweep(n->region, uses);
        }
    }
}

em_status em_pass_dce(em_ir_graph *g, em_strbuf *report) {
    (void)report;
    int *uses = malloc((size_t)(g->n_values ? g->n_values : 1) * sizeof *uses);
    if (!uses) return em_error(EM_ERR_NOMEM, "out of memory");
    em_ir_count_uses(g, uses);
    sweep(g->body, uses);
    free(uses);
    return EM_OK;
}
