/*
 * parser.c - reads the text form of a graph (docs/ir.md).
 *
 * A hand-written lexer and recursive-descent parser. Values must be defined
 * before use (so dominance holds by construction) and a fused region may use
 * only its own parameters and values. Errors are reported once, as
 *   file:line:col: error: what
 *   <the offending line>
 *       ^
 * and the partly built graph is freed.
 */
#include <errno.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ember/strbuf.h"
#include "ir_internal.h"

typedef enum {
    T_EOF,
    T_IDENT,  /* graph, add, f32, true, inf ... */
    T_VALUE,  /* %name or %3 */
    T_GLOBAL, /* @name */
    T_NUMBER, /* 12, 0.5, 1e-3 (never signed: '-' is its own token) */
    T_STRING, /* "..." with \" and \\ escapes */
    T_ARROW,  /* -> */
    T_PUNCT,  /* one of ( ) [ ] { } , : = ^ - */
} tok_kind;

typedef struct {
    tok_kind kind;
    const char *s; /* start in the source (after % or @ for values/globals) */
    size_t len;
    int line, col;
    const char *line_start;
} token;

typedef struct {
    const char *src, *pos, *filename, *line_start;
    int line;
    int depth; /* regions open: bounded, so that text cannot exhaust the stack */
    token tok;
    em_ir_graph *g;
    em_strmap names; /* value name -> em_ir_value* */
    em_ir_graph *result;
    jmp_buf fail;
} parser;

/* ---- errors ---- */

__attribute__((format(printf, 3, 4), noreturn)) static void error_at(parser *p, const token *t,
                                                                     const char *fmt, ...) {
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    const char *ls = t->line_start, *le = ls;
    while (*le && *le != '\n') le++;
    int width = (int)(le - ls) > 300 ? 300 : (int)(le - ls);
    em_error(EM_ERR_PARSE, "%s:%d:%d: error: %s\n%.*s\n%*s^", p->filename, t->line, t->col, msg,
             width, ls, t->col - 1, "");
    longjmp(p->fail, 1);
}

#define FAIL(...) error_at(p, &p->tok, __VA_ARGS__)
#define MAX_REGION_DEPTH 32

/* ---- lexer ---- */

static bool is_ident_char(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
           c == '.';
}

static void next(parser *p) {
    for (;;) { /* skip blanks and // comments */
        char c = *p->pos;
        if (c == '\n') {
            p->pos++;
            p->line++;
            p->line_start = p->pos;
        } else if (c == ' ' || c == '\t' || c == '\r') {
            p->pos++;
        } else if (c == '/' && p->pos[1] == '/') {
            while (*p->pos && *p->pos != '\n') p->pos++;
        } else {
            break;
        }
    }
    token *t = &p->tok;
    t->line = p->line;
    t->col = (int)(p->pos - p->line_start) + 1;
    t->line_start = p->line_start;
    t->s = p->pos;
    char c = *p->pos;
    if (!c) {
        t->kind = T_EOF;
        t->len = 0;
        return;
    }
    if (c == '%' || c == '@') {
        const char *s = ++p->pos;
        while (is_ident_char(*p->pos)) p->pos++;
        t->kind = c == '%' ? T_VALUE : T_GLOBAL;
        t->s = s;
        t->len = (size_t)(p->pos - s);
        if (!t->len) FAIL("expected a name after '%c'", c);
        return;
    }
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_') {
        while (is_ident_char(*p->pos)) p->pos++;
        t->kind = T_IDENT;
    } else if (c >= '0' && c <= '9') {
        while ((*p->pos >= '0' && *p->pos <= '9') || *p->pos == '.') p->pos++;
        if (*p->pos == 'e' || *p->pos == 'E') {
            p->pos++;
            if (*p->pos == '+' || *p->pos == '-') p->pos++;
            while (*p->pos >= '0' && *p->pos <= '9') p->pos++;
        }
        t->kind = T_NUMBER;
    } else if (c == '"') {
        p->pos++;
        /* (a backslash escapes the next character, but never the text's end) */
        while (*p->pos && *p->pos != '"' && *p->pos != '\n') p->pos += *p->pos == '\\' && p->pos[1] && p->pos[1] != '\n' ? 2 : 1;
        if (*p->pos != '"') FAIL("unterminated string");
        p->pos++;
        t->kind = T_STRING;
    } else if (c == '-' && p->pos[1] == '>') {
        p->pos += 2;
        t->kind = T_ARROW;
    } else if (strchr("()[]{},:=^-", c)) {
        p->pos++;
        t->kind = T_PUNCT;
    } else {
        t->len = 1;
        FAIL("unexpected character '%c'", c);
    }
    t->len = (size_t)(p->pos - t->s);
}

static bool is_punct(const parser *p, char c) {
    return p->tok.kind == T_PUNCT && p->tok.s[0] == c;
}
static bool is_ident(const parser *p, const char *w) {
    return p->tok.kind == T_IDENT && p->tok.len == strlen(w) && memcmp(p->tok.s, w, p->tok.len) == 0;
}
static bool accept_punct(parser *p, char c) {
    if (!is_punct(p, c)) return false;
    next(p);
    return true;
}
static void expect_punct(parser *p, char c) {
    if (!accept_punct(p, c)) FAIL("expected '%c'", c);
}
static void expect_ident(parser *p, const char *w) {
    if (!is_ident(p, w)) FAIL("expected '%s'", w);
    next(p);
}

/* ---- pieces ---- */

static int64_t parse_int(parser *p) {
    bool neg = accept_punct(p, '-');
    if (p->tok.kind != T_NUMBER) FAIL("expected an integer");
    char buf[64];
    if (p->tok.len > 20) FAIL("integer out of range: %.*s...", 20, p->tok.s);
    memcpy(buf, p->tok.s, p->tok.len);
    buf[p->tok.len] = '\0';
    char *end;
    errno = 0;
    long long v = strtoll(buf, &end, 10);
    if (*end) FAIL("expected an integer, got '%s'", buf);
    if (errno == ERANGE) FAIL("integer out of range: %s", buf);
    next(p);
    return neg ? -v : v;
}

static double parse_double(parser *p) {
    bool neg = accept_punct(p, '-');
    double v;
    if (is_ident(p, "inf"))
        v = INFINITY;
    else if (is_ident(p, "nan"))
        v = NAN;
    else if (p->tok.kind == T_NUMBER) {
        char buf[64];
        size_t n = p->tok.len < 63 ? p->tok.len : 63;
        memcpy(buf, p->tok.s, n);
        buf[n] = '\0';
        char *end;
        v = strtod(buf, &end);
        if (*end) FAIL("malformed number '%s'", buf);
    } else
        FAIL("expected a number");
    next(p);
    return neg ? -v : v;
}

/* A fill value: integer literals are read exactly (an int64 fill value may
 * exceed 2^53), everything else as a double. */
static void parse_value(parser *p, double *d, int64_t *i) {
    bool neg = is_punct(p, '-');
    token num = p->tok;
    if (neg) { /* peek past the sign without consuming it */
        const char *q = p->pos;
        while (*q == ' ') q++;
        num.s = q;
        num.len = 0;
        while (q[num.len] >= '0' && q[num.len] <= '9') num.len++;
        if (!num.len || (q[num.len] && strchr(".eE", q[num.len]))) num.len = 0;
    } else if (p->tok.kind != T_NUMBER || strcspn(p->tok.s, ".eE") < p->tok.len) {
        num.len = 0;
    }
    if (num.len) {
        *i = parse_int(p);
        *d = *i == 0 && neg ? -0.0 : (double)*i; /* "-0" is the float -0.0 (the printer's form of it) */
    } else {
        *d = parse_double(p);
        *i = *d >= -9.2233720368547758e18 && *d < 9.2233720368547758e18 ? (int64_t)*d : 0;
    }
}

static bool parse_bool(parser *p) {
    bool v = is_ident(p, "true");
    if (!v && !is_ident(p, "false")) FAIL("expected true or false");
    next(p);
    return v;
}

static int parse_int_list(parser *p, int64_t *out, int max) {
    expect_punct(p, '[');
    int n = 0;
    if (!is_punct(p, ']')) {
        do {
            if (n == max) FAIL("more than %d entries", max);
            out[n++] = parse_int(p);
        } while (accept_punct(p, ','));
    }
    expect_punct(p, ']');
    return n;
}

static em_type parse_type(parser *p) {
    em_type t;
    memset(&t, 0, sizeof t);
    t.device = em_cpu();
    if (p->tok.kind != T_IDENT || !em_dtype_from_name(p->tok.s, p->tok.len, &t.dtype))
        FAIL("expected a type such as f32[2,3]");
    next(p);
    t.ndim = parse_int_list(p, t.shape, EM_MAX_DIMS);
    int64_t bytes = (int64_t)em_dtype_size(t.dtype);
    for (int i = 0; i < t.ndim; i++) {
        if (t.shape[i] < 0) FAIL("negative dimension in type");
        /* (sizes multiply without overflow everywhere past the parser) */
        if (__builtin_mul_overflow(bytes, t.shape[i], &bytes)) FAIL("a type too large for memory");
    }
    if (p->tok.kind == T_GLOBAL && p->tok.len == 4 && memcmp(p->tok.s, "meta", 4) == 0) { /* @meta */
        next(p);
        t.device = em_meta();
    } else if (p->tok.kind == T_GLOBAL) { /* @cuda:0 */
        if (p->tok.len != 4 || memcmp(p->tok.s, "cuda", 4) != 0) FAIL("unknown device");
        next(p);
        expect_punct(p, ':');
        t.device.type = EM_DEVICE_CUDA;
        int64_t index = parse_int(p);
        if (index < 0 || index > 127) FAIL("device index %lld out of range", (long long)index);
        t.device.index = (int8_t)index;
    }
    return t;
}

static bool numeric_name(const token *t) { return t->s[0] >= '0' && t->s[0] <= '9'; }

/* Defines the name in the current token as value v. */
static void define(parser *p, const token *t, em_ir_value *v) {
    if (em_strmap_get(&p->names, t->s, t->len)) error_at(p, t, "redefinition of %%%.*s", (int)t->len, t->s);
    if (!numeric_name(t) && !(v->name = em_ir_intern(p->g, t->s, t->len))) longjmp(p->fail, 1);
    if (!em_strmap_put(&p->names, t->s, t->len, v)) {
        em_error(EM_ERR_NOMEM, "out of memory parsing");
        longjmp(p->fail, 1);
    }
}

/* A use of a value, which must be visible in block b. */
static em_ir_value *use(parser *p, em_ir_block *b) {
    if (p->tok.kind != T_VALUE) FAIL("expected a value (%%name)");
    em_ir_value *v = em_strmap_get(&p->names, p->tok.s, p->tok.len);
    if (!v) FAIL("use of undefined value %%%.*s", (int)p->tok.len, p->tok.s);
    if (v->block != b)
        FAIL("%%%.*s is defined outside this fused region; pass it in as a region argument",
             (int)p->tok.len, p->tok.s);
    next(p);
    return v;
}

static void parse_params(parser *p, em_ir_block *b) {
    if (is_punct(p, ')')) return;
    do {
        if (p->tok.kind != T_VALUE) FAIL("expected a parameter (%%name: type)");
        token name = p->tok;
        next(p);
        expect_punct(p, ':');
        em_type t = parse_type(p);
        em_ir_value *v = em_ir_add_param(b, &t, NULL);
        if (!v) longjmp(p->fail, 1);
        define(p, &name, v);
    } while (accept_punct(p, ','));
}

static void parse_attrs(parser *p, em_op op, em_attrs *a) {
    uint64_t allowed = em_op_get(op)->attrs & ~(uint64_t)(EM_A_SHAPE | EM_A_DTYPE), seen = 0;
    if (accept_punct(p, '{')) {
        do {
            if (p->tok.kind != T_IDENT) FAIL("expected an attribute name");
            int bit = -1;
            for (int i = 0; i < EM_A_COUNT; i++)
                if (strlen(em_attr_name(i)) == p->tok.len &&
                    memcmp(em_attr_name(i), p->tok.s, p->tok.len) == 0)
                    bit = i;
            if (bit < 0 || !(allowed & EM_A_MASK(bit)))
                FAIL("%s has no attribute '%.*s'", em_op_name(op), (int)p->tok.len, p->tok.s);
            if (seen & EM_A_MASK(bit)) FAIL("attribute '%s' given twice", em_attr_name(bit));
            seen |= EM_A_MASK(bit);
            next(p);
            expect_punct(p, '=');
            const em_attr_field *f = em_attr_field_of(bit);
            char *field = (char *)a + f->offset;
            switch (f->kind) {
            case EM_ATTR_INTS:
                *(int *)(void *)((char *)a + f->count) = parse_int_list(p, (int64_t *)(void *)field, EM_MAX_DIMS);
                break;
            case EM_ATTR_INT: *(int64_t *)(void *)field = parse_int(p); break;
            case EM_ATTR_BOOL: *(bool *)field = parse_bool(p); break;
            case EM_ATTR_DOUBLE: *(double *)(void *)field = parse_double(p); break;
            case EM_ATTR_SPECIAL:
                if (bit == EM_A_BIT_VALUE)
                    parse_value(p, &a->value, &a->value_i);
                else if (bit == EM_A_BIT_ALPHA)
                    a->alpha = parse_double(p);
                break;
            }
        } while (accept_punct(p, ','));
        expect_punct(p, '}');
    }
    if (seen != allowed && (allowed & ~seen & ~EM_A_OPTIONAL)) {
        for (int i = 0; i < EM_A_COUNT; i++)
            if ((allowed & ~seen & ~EM_A_OPTIONAL) & EM_A_MASK(i))
                FAIL("%s is missing attribute '%s'", em_op_name(op), em_attr_name(i));
    }
}

static em_ir_loc parse_loc(parser *p) {
    em_ir_loc loc = {NULL, 0, 0};
    if (!is_ident(p, "loc")) return loc;
    next(p);
    expect_punct(p, '(');
    if (p->tok.kind != T_STRING) FAIL("expected a file name string");
    char buf[4096];
    size_t n = 0;
    for (const char *s = p->tok.s + 1; s < p->tok.s + p->tok.len - 1 && n < sizeof buf - 1; s++) {
        if (*s == '\\') s++;
        buf[n++] = *s;
    }
    if (!(loc.file = em_ir_intern(p->g, buf, n))) longjmp(p->fail, 1);
    next(p);
    expect_punct(p, ':');
    loc.line = loc.line_end = (int)parse_int(p);
    if (accept_punct(p, '-')) loc.line_end = (int)parse_int(p);
    if (loc.line_end < loc.line) FAIL("line range ends before it starts");
    expect_punct(p, ')');
    return loc;
}

static void parse_block_body(parser *p, em_ir_block *b, const char *terminator);

/* A node's most operands and results in IR text: a fused node's, which the
 * fuse pass makes with up to 64 results and any number of inputs (an op of
 * the table takes at most 64, and the verifier says so) */
#define PARSE_MAX_OPERANDS 1024
#define PARSE_MAX_RESULTS 64

static void parse_node(parser *p, em_ir_block *b) {
    token results[PARSE_MAX_RESULTS];
    int n_out = 0;
    do {
        if (p->tok.kind != T_VALUE) FAIL("expected a result value or '%s'", b->owner ? "yield" : "return");
        if (n_out == PARSE_MAX_RESULTS) FAIL("too many results (at most %d)", PARSE_MAX_RESULTS);
        results[n_out++] = p->tok;
        next(p);
    } while (accept_punct(p, ','));
    expect_punct(p, '=');
    if (p->tok.kind != T_IDENT) FAIL("expected an op name");
    token op_tok = p->tok;
    em_op op;
    if (!em_op_from_name(p->tok.s, p->tok.len, &op))
        FAIL("unknown op '%.*s'", (int)p->tok.len, p->tok.s);
    const em_op_info *info = em_op_get(op);
    next(p);
    expect_punct(p, '(');
    em_ir_value *in[PARSE_MAX_OPERANDS];
    int n_in = 0;
    if (!is_punct(p, ')')) {
        do {
            if (n_in == PARSE_MAX_OPERANDS) FAIL("too many operands (at most %d)", PARSE_MAX_OPERANDS);
            in[n_in++] = use(p, b);
        } while (accept_punct(p, ','));
    }
    expect_punct(p, ')');
    if (info->n_in >= 0 && n_in != info->n_in)
        error_at(p, &op_tok, "%s takes %d operand%s, got %d", info->name, info->n_in,
                 info->n_in == 1 ? "" : "s", n_in);
    if (info->n_out >= 0 && n_out != info->n_out)
        error_at(p, &op_tok, "%s has %d result%s, got %d", info->name, info->n_out,
                 info->n_out == 1 ? "" : "s", n_out);
    em_attrs attrs;
    memset(&attrs, 0, sizeof attrs);
    parse_attrs(p, op, &attrs);
    expect_punct(p, ':');
    em_type types[PARSE_MAX_RESULTS];
    int n_types = 0;
    do {
        if (n_types == PARSE_MAX_RESULTS) FAIL("too many result types (at most %d)", PARSE_MAX_RESULTS);
        types[n_types++] = parse_type(p);
    } while (accept_punct(p, ','));
    if (n_types != n_out) FAIL("%d results but %d types", n_out, n_types);
    /* shape and dtype attributes are implied by the result type */
    if (info->attrs & EM_A_SHAPE) {
        attrs.n_shape = types[0].ndim;
        memcpy(attrs.shape, types[0].shape, sizeof attrs.shape);
    }
    if (info->attrs & EM_A_DTYPE) attrs.dtype = types[0].dtype;
    em_ir_loc loc = parse_loc(p);
    em_ir_node *n = em_ir_node_new(p->g, op, in, n_in, &attrs, types, n_out, loc);
    if (!n) longjmp(p->fail, 1);
    em_ir_insert(b, n, NULL);
    for (int i = 0; i < n_out; i++) define(p, &results[i], n->out[i]);
    if (info->kind == EM_KIND_FUSED) {
        if (p->depth == MAX_REGION_DEPTH) FAIL("regions nested more than %d deep", MAX_REGION_DEPTH);
        p->depth++;
        expect_punct(p, '{');
        expect_punct(p, '^');
        expect_punct(p, '(');
        if (!(n->region = em_ir_block_new(p->g, n))) longjmp(p->fail, 1);
        parse_params(p, n->region);
        expect_punct(p, ')');
        expect_punct(p, ':');
        parse_block_body(p, n->region, "yield");
        expect_punct(p, '}');
        p->depth--;
    } else if (is_punct(p, '{')) {
        FAIL("only fused nodes have a region");
    }
}

static void parse_block_body(parser *p, em_ir_block *b, const char *terminator) {
    while (!is_ident(p, terminator)) {
        if (p->tok.kind == T_EOF || is_punct(p, '}')) FAIL("expected '%s' to end the block", terminator);
        parse_node(p, b);
    }
    next(p);
    em_ir_value *res[256];
    int n = 0;
    if (p->tok.kind == T_VALUE) {
        do {
            if (n == 256) FAIL("too many results");
            res[n++] = use(p, b);
        } while (accept_punct(p, ','));
    }
    if (em_ir_set_results(b, res, n) != EM_OK) longjmp(p->fail, 1);
}

em_ir_graph *em_ir_parse(const char *text, const char *filename) {
    parser *p = calloc(1, sizeof *p);
    if (!p) {
        em_error(EM_ERR_NOMEM, "out of memory parsing");
        return NULL;
    }
    p->src = p->pos = p->line_start = text;
    p->filename = filename ? filename : "<input>";
    p->line = 1;
    em_strmap_init(&p->names);
    if (setjmp(p->fail) == 0) {
        next(p);
        expect_ident(p, "graph");
        if (p->tok.kind != T_GLOBAL) FAIL("expected the graph's name (@name)");
        char name[256];
        snprintf(name, sizeof name, "%.*s", (int)p->tok.len, p->tok.s);
        if (!(p->g = em_ir_graph_new(name))) longjmp(p->fail, 1);
        next(p);
        expect_punct(p, '(');
        parse_params(p, p->g->body);
        expect_punct(p, ')');
        if (p->tok.kind != T_ARROW) FAIL("expected '->'");
        next(p);
        expect_punct(p, '(');
        em_type rt[256];
        int n_rt = 0;
        token rt_tok = p->tok;
        if (!is_punct(p, ')')) {
            do {
                if (n_rt == 256) FAIL("too many result types");
                rt[n_rt++] = parse_type(p);
            } while (accept_punct(p, ','));
        }
        expect_punct(p, ')');
        expect_punct(p, '{');
        parse_block_body(p, p->g->body, "return");
        token close = p->tok;
        expect_punct(p, '}');
        if (p->tok.kind != T_EOF) FAIL("unexpected text after the graph");
        em_ir_block *body = p->g->body;
        if (n_rt != body->n_results)
            error_at(p, &close, "the graph declares %d results but returns %d", n_rt,
                     body->n_results);
        for (int i = 0; i < n_rt; i++)
            if (!em_type_eq(&rt[i], &body->results[i]->type)) {
                char a[256], b[256];
                em_type_str(&rt[i], a, sizeof a);
                em_type_str(&body->results[i]->type, b, sizeof b);
                error_at(p, &rt_tok, "result %d is declared %s but returns a %s", i, a, b);
            }
        p->result = p->g;
        p->g = NULL;
    }
    em_ir_graph *result = p->result;
    em_ir_graph_free(p->g);
    em_strmap_free(&p->names);
    free(p);
    return result;
}
