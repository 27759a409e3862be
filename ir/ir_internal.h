/*
 * ir_internal.h - helpers shared by the files of ir/ (not public).
 */
#ifndef EMBER_IR_INTERNAL_H
#define EMBER_IR_INTERNAL_H

#include "ember/ir.h"

/* A graph's arena (arena.c): made empty, and freed with all it holds. */
struct em_ir_arena *em_ir_arena_new(void);
void em_ir_arena_free(struct em_ir_arena *a);

/* Calls fn(node, ctx) for every node of `b`, regions included (pre-order). */
void em_ir_walk(const em_ir_block *b, void (*fn)(const em_ir_node *, void *), void *ctx);

/* num[value id] = the number the printer gives the value (%N), or -1 for a
 * named value. `num` has g->n_values entries. Verifier messages use the same
 * numbers, so they match the printed graph. */
void em_ir_number_values(const em_ir_graph *g, int *num);
/* Writes "%name" or "%N" for v into buf (64 bytes). */
const char *em_ir_value_ref(const em_ir_value *v, const int *num, char *buf);

/* An open-addressing map from strings to pointers (the parser's symbols). */
typedef struct {
    const char **keys;
    size_t *lens;
    void **vals;
    size_t cap, len;
} em_strmap;
void em_strmap_init(em_strmap *m);
void em_strmap_free(em_strmap *m);
void *em_strmap_get(const em_strmap *m, const char *k, size_t len);
/* Stores k -> v (k must outlive the map); false on allocation failure. */
bool em_strmap_put(em_strmap *m, const char *k, size_t len, void *v);

#endif
