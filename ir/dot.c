/*
 * dot.c - a graph as Graphviz text (EMBER_DUMP=dot): one box per node
 * labelled with its op and result types, an edge per use, block parameters
 * and results as ovals, and each fused kernel drawn as a cluster holding its
 * region. Render with `dot -Tsvg graph.dot -o graph.svg`.
 */
#include <stdlib.h>

#include "ember/ir.h"
#include "ember/strbuf.h"

static void put_type(em_strbuf *b, const em_type *t) {
    em_strbuf_printf(b, "%s[", em_dtype_name(t->dtype));
    for (int i = 0; i < t->ndim; i++) em_strbuf_printf(b, "%s%lld", i ? "," : "", (long long)t->shape[i]);
    em_strbuf_puts(b, "]");
}

/* The dot id of the thing that produces v: its node, or the parameter. */
static void put_source(em_strbuf *b, const em_ir_value *v) {
    if (v->def)
        em_strbuf_printf(b, "n%d", v->def->id);
    else
        em_strbuf_printf(b, "v%d", v->id);
}

static void put_block(em_strbuf *b, const em_ir_block *blk, int depth);

static void put_node(em_strbuf *b, const em_ir_node *n, int depth) {
    if (n->region) { /* a fused kernel: its body as a cluster, fed by the node's inputs */
        em_strbuf_printf(b, "%*ssubgraph cluster_%d {\n%*s  label=\"fused #%d\"; style=rounded; color=\"#c06000\";\n",
                         depth * 2, "", n->id, depth * 2, "", n->id);
        put_block(b, n->region, depth + 1);
        em_strbuf_printf(b, "%*s  n%d [label=\"results\", shape=point];\n", depth * 2, "", n->id);
        for (int i = 0; i < n->region->n_results; i++) {
            em_strbuf_printf(b, "%*s  ", depth * 2, "");
            put_source(b, n->region->results[i]);
            em_strbuf_printf(b, " -> n%d;\n", n->id);
        }
        em_strbuf_printf(b, "%*s}\n", depth * 2, "");
        for (int i = 0; i < n->n_in && i < n->region->n_params; i++) {
            em_strbuf_printf(b, "%*s", depth * 2, "");
            put_source(b, n->in[i]);
            em_strbuf_printf(b, " -> v%d [style=dashed];\n", n->region->params[i]->id);
        }
        return;
    }
    em_strbuf_printf(b, "%*sn%d [label=\"%s\\n", depth * 2, "", n->id, em_op_name(n->op));
    for (int j = 0; j < n->n_out; j++) {
        if (j) em_strbuf_puts(b, ", ");
        put_type(b, &n->out[j]->type);
    }
    em_strbuf_puts(b, "\", shape=box];\n");
    for (int i = 0; i < n->n_in; i++) {
        em_strbuf_printf(b, "%*s", depth * 2, "");
        put_source(b, n->in[i]);
        em_strbuf_printf(b, " -> n%d;\n", n->id);
    }
}

static void put_block(em_strbuf *b, const em_ir_block *blk, int depth) {
    for (int i = 0; i < blk->n_params; i++) {
        const em_ir_value *p = blk->params[i];
        em_strbuf_printf(b, "%*sv%d [label=\"%%%s\\n", depth * 2, "", p->id, p->name ? p->name : "");
        put_type(b, &p->type);
        em_strbuf_puts(b, "\", shape=oval];\n");
    }
    for (const em_ir_node *n = blk->first; n; n = n->next) put_node(b, n, depth);
}

char *em_ir_to_dot(const em_ir_graph *g) {
    em_strbuf b;
    em_strbuf_init(&b);
    em_strbuf_printf(&b, "digraph \"%s\" {\n  rankdir=TB; node [fontname=\"monospace\"];\n", g->name);
    put_block(&b, g->body, 1);
    for (int i = 0; i < g->body->n_results; i++) {
        em_strbuf_printf(&b, "  r%d [label=\"result %d\", shape=oval, style=bold];\n  ", i, i);
        put_source(&b, g->body->results[i]);
        em_strbuf_printf(&b, " -> r%d;\n", i);
    }
    em_strbuf_puts(&b, "}\n");
    return em_strbuf_take(&b);
}
