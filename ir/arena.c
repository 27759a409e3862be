/*
 * arena.c - a graph's memory: bump allocation in chunks, freed all at once
 * with the graph (every node, value, block, name and attribute record of
 * a graph lives here).
 */
#include <string.h>

#include "ember/alloc.h"
#include "ir_internal.h"

typedef struct chunk {
    struct chunk *next;
    size_t used, size;
    _Alignas(16) char data[];
} chunk;

struct em_ir_arena {
    chunk *head;
};

#define CHUNK_SIZE (64 * 1024)

void *em_ir_alloc(em_ir_graph *g, size_t size) {
    size = (size + 15) & ~(size_t)15;
    chunk *c = g->arena->head;
    if (!c || c->used + size > c->size) {
        size_t cs = size > CHUNK_SIZE ? size : CHUNK_SIZE;
        chunk *n = em_malloc(sizeof *n + cs);
        if (!n) return NULL;
        n->used = 0;
        n->size = cs;
        /* A big one-off allocation gets its own chunk behind the current. */
        if (c && size > CHUNK_SIZE) {
            n->next = c->next;
            c->next = n;
        } else {
            n->next = c;
            g->arena->head = n;
        }
        c = n;
    }
    void *p = c->data + c->used;
    c->used += size;
    memset(p, 0, size);
    return p;
}

const char *em_ir_intern(em_ir_graph *g, const char *s, size_t len) {
    char *p = em_ir_alloc(g, len + 1);
    if (!p) return NULL;
    memcpy(p, s, len);
    p[len] = '\0';
    return p;
}

struct em_ir_arena *em_ir_arena_new(void) { return em_calloc(1, sizeof(struct em_ir_arena)); }

void em_ir_arena_free(struct em_ir_arena *a) {
    if (!a) return;
    for (chunk *c = a->head, *n; c; c = n) {
        n = c->next;
        em_free(c);
    }
    em_free(a);
}
