/*
 * printer.c - writes a graph as text (docs/ir.md), exactly as parser.c reads
 * it back.
 *
 *   graph @gelu(%x: f32[1024]) -> (f32[1024]) {
 *     %0 = full() {value=0.5} : f32[] loc("demo.py":4)
 *     %1 = mul(%x, %0) : f32[1024] loc("demo.py":4)
 *     return %1
 *   }
 *
 * Unnamed values are numbered in order of definition. Attributes print in
 * EM_ATTR_LIST order; shape and dtype never print, because they always equal
 * the result type's.
 */
#include <stdlib.h>
#include <string.h>

#include "ember/strbuf.h"
#include "ir_internal.h"

typedef struct {
    em_strbuf *b;
    const int *num;
} printer;

static void put_value(printer *p, const em_ir_value *v) {
    char buf[64];
    em_strbuf_puts(p->b, em_ir_value_ref(v, p->num, buf));
}

static void put_type(printer *p, const em_type *t) {
    char buf[256];
    em_type_str(t, buf, sizeof buf);
    em_strbuf_puts(p->b, buf);
}

static void put_ints(printer *p, const int64_t *v, int n) {
    em_strbuf_puts(p->b, "[");
    for (int i = 0; i < n; i++) em_strbuf_printf(p->b, "%s%lld", i ? "," : "", (long long)v[i]);
    em_strbuf_puts(p->b, "]");
}

static void put_attrs(printer *p, const em_ir_node *n) {
    uint64_t mask = em_op_get(n->op)->attrs & ~(uint64_t)(EM_A_SHAPE | EM_A_DTYPE);
    const em_attrs *a = EM_IR_ATTRS(n);
    if (!a->n_layout) mask &= ~(uint64_t)EM_A_LAYOUT; /* (optional: left out at their defaults) */
    if (a->alpha == 0) mask &= ~(uint64_t)EM_A_ALPHA;
    if (!mask) return;
    char num[32];
    bool first = true;
    em_strbuf_puts(p->b, " {");
    for (int bit = 0; bit < EM_A_COUNT; bit++) {
        if (!(mask & EM_A_MASK(bit))) continue;
        em_strbuf_printf(p->b, "%s%s=", first ? "" : ", ", em_attr_name(bit));
        first = false;
        const em_attr_field *f = em_attr_field_of(bit);
        const char *field = (const char *)a + f->offset;
        int count = 0;
        switch (f->kind) {
        case EM_ATTR_INTS: {
            const int64_t *v = em_attr_ints(a, f, &count);
            put_ints(p, v, count);
            break;
        }
        case EM_ATTR_INT: em_strbuf_printf(p->b, "%lld", (long long)*(const int64_t *)(const void *)field); break;
        case EM_ATTR_BOOL: em_strbuf_puts(p->b, *(const bool *)field ? "true" : "false"); break;
        case EM_ATTR_DOUBLE: em_strbuf_puts(p->b, em_format_double(*(const double *)(const void *)field, num)); break;
        case EM_ATTR_SPECIAL:
            if (bit == EM_A_BIT_ALPHA) {
                em_strbuf_puts(p->b, em_format_double(a->alpha, num));
            } else if (bit == EM_A_BIT_VALUE) { /* at the precision of the value's dtype */
                if (n->out[0]->type.dtype == EM_DTYPE_I64)
                    em_strbuf_printf(p->b, "%lld", (long long)a->value_i);
                else if (n->out[0]->type.dtype == EM_DTYPE_F32)
                    em_strbuf_puts(p->b, em_format_float((float)a->value, num));
                else
                    em_strbuf_puts(p->b, em_format_double(a->value, num));
            }
            break; /* (shape and dtype: the result type says them) */
        }
    }
    em_strbuf_puts(p->b, "}");
}

static void put_string(printer *p, const char *s) {
    em_strbuf_puts(p->b, "\"");
    for (; *s; s++) {
        if (*s == '"' || *s == '\\') em_strbuf_puts(p->b, "\\");
        em_strbuf_add(p->b, s, 1);
    }
    em_strbuf_puts(p->b, "\"");
}

static void put_loc(printer *p, em_ir_loc loc) {
    if (!loc.file) return;
    em_strbuf_puts(p->b, " loc(");
    put_string(p, loc.file);
    if (loc.line_end > loc.line)
        em_strbuf_printf(p->b, ":%d-%d)", loc.line, loc.line_end);
    else
        em_strbuf_printf(p->b, ":%d)", loc.line);
}

static void put_block(printer *p, const em_ir_block *b, int depth);

static void indent(printer *p, int depth) {
    for (int i = 0; i < depth; i++) em_strbuf_puts(p->b, "  ");
}

static void put_params(printer *p, const em_ir_block *b) {
    for (int i = 0; i < b->n_params; i++) {
        if (i) em_strbuf_puts(p->b, ", ");
        put_value(p, b->params[i]);
        em_strbuf_puts(p->b, ": ");
        put_type(p, &b->params[i]->type);
    }
}

static void put_node(printer *p, const em_ir_node *n, int depth) {
    indent(p, depth);
    for (int i = 0; i < n->n_out; i++) {
        if (i) em_strbuf_puts(p->b, ", ");
        put_value(p, n->out[i]);
    }
    em_strbuf_printf(p->b, " = %s(", em_op_name(n->op));
    for (int i = 0; i < n->n_in; i++) {
        if (i) em_strbuf_puts(p->b, ", ");
        put_value(p, n->in[i]);
    }
    em_strbuf_puts(p->b, ")");
    put_attrs(p, n);
    em_strbuf_puts(p->b, " : ");
    for (int i = 0; i < n->n_out; i++) {
        if (i) em_strbuf_puts(p->b, ", ");
        put_type(p, &n->out[i]->type);
    }
    put_loc(p, n->loc);
    if (n->region) {
        em_strbuf_puts(p->b, " {\n");
        indent(p, depth);
        em_strbuf_puts(p->b, "^(");
        put_params(p, n->region);
        em_strbuf_puts(p->b, "):\n");
        put_block(p, n->region, depth + 1);
        indent(p, depth);
        em_strbuf_puts(p->b, "}");
    }
    em_strbuf_puts(p->b, "\n");
}

static void put_block(printer *p, const em_ir_block *b, int depth) {
    for (const em_ir_node *n = b->first; n; n = n->next) put_node(p, n, depth);
    indent(p, depth);
    em_strbuf_puts(p->b, b->owner ? "yield" : "return");
    for (int i = 0; i < b->n_results; i++) {
        em_strbuf_puts(p->b, i ? ", " : " ");
        put_value(p, b->results[i]);
    }
    em_strbuf_puts(p->b, "\n");
}

char *em_ir_print(const em_ir_graph *g) {
    int *num = malloc((size_t)(g->n_values ? g->n_values : 1) * sizeof *num);
    if (!num) {
        em_error(EM_ERR_NOMEM, "out of memory printing graph @%s", g->name);
        return NULL;
    }
    em_ir_number_values(g, num);
    em_strbuf b;
    em_strbuf_init(&b);
    printer p = {&b, num};
    em_strbuf_printf(&b, "graph @%s(", g->name);
    put_params(&p, g->body);
    em_strbuf_puts(&b, ") -> (");
    for (int i = 0; i < g->body->n_results; i++) {
        if (i) em_strbuf_puts(&b, ", ");
        put_type(&p, &g->body->results[i]->type);
    }
    em_strbuf_puts(&b, ") {\n");
    put_block(&p, g->body, 1);
    em_strbuf_puts(&b, "}\n");
    free(num);
    return em_strbuf_take(&b);
}
