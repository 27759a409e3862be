/*
 * guard.c - the conditions under which a compiled specialisation is valid.
 *
 * A guard set is a snapshot of one call: for each argument its kind, and for
 * a tensor its dtype, device, shape, strides (strides of dims of size 0
 * or 1 do not matter and are normalised away) and requires_grad (a trace
 * with grad enabled records backward ops for exactly the tensors that
 * require grad), for a Python scalar or string
 * its value. Checking compares a new call against the snapshot field by
 * field; the first mismatch is described in words for warnings and explain().
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ember/alloc.h"
#include "ember/autograd.h"
#include "ember/frontend.h"
#include "ember/strbuf.h"

typedef struct {
    em_arg_kind kind;
    char *name;
    em_dtype dtype;
    em_device device;
    bool requires_grad;
    int ndim;
    int64_t shape[EM_MAX_DIMS], strides[EM_MAX_DIMS];
    int64_t i;
    double f;
    char *s;
    size_t slen;
} guard;

struct em_guards {
    int n;
    guard *g;
};

static const char *kind_name(em_arg_kind k) {
    switch (k) {
    case EM_ARG_TENSOR: return "a tensor";
    case EM_ARG_INT: return "an int";
    case EM_ARG_FLOAT: return "a float";
    case EM_ARG_BOOL: return "a bool";
    case EM_ARG_NONE: return "None";
    case EM_ARG_STR: return "a str";
    }
    return "?";
}

static void norm_strides(const em_tensor *t, int64_t *out) {
    for (int d = 0; d < t->ndim; d++) out[d] = t->shape[d] > 1 ? t->strides[d] : 0;
    if (t->numel == 0)
        for (int d = 0; d < t->ndim; d++) out[d] = 0;
}

static char *dup(const char *s, size_t n) {
    char *d = em_malloc(n + 1);
    if (d) {
        memcpy(d, s, n);
        d[n] = '\0';
    }
    return d;
}

em_guards *em_guards_new(const em_arg *args, int n) {
    em_guards *gs = em_calloc(1, sizeof *gs);
    if (!gs) return NULL;
    gs->g = em_calloc((size_t)(n ? n : 1), sizeof *gs->g);
    if (!gs->g) {
        em_free(gs);
        return NULL;
    }
    gs->n = n;
    for (int k = 0; k < n; k++) {
        const em_arg *a = &args[k];
        guard *g = &gs->g[k];
        g->kind = a->kind;
        const char *nm = a->name ? a->name : "?";
        if (!(g->name = dup(nm, strlen(nm)))) goto fail;
        switch (a->kind) {
        case EM_ARG_TENSOR:
            g->dtype = a->tensor->dtype;
            g->device = a->tensor->device;
            g->requires_grad = em_requires_grad(a->tensor);
            g->ndim = a->tensor->ndim;
            memcpy(g->shape, a->tensor->shape, sizeof g->shape);
            norm_strides(a->tensor, g->strides);
            break;
        case EM_ARG_INT:
        case EM_ARG_BOOL: g->i = a->i; break;
        case EM_ARG_FLOAT: g->f = a->f; break;
        case EM_ARG_STR:
            if (!(g->s = dup(a->s, a->slen))) goto fail;
            g->slen = a->slen;
            break;
        case EM_ARG_NONE: break;
        }
    }
    return gs;
fail:
    em_guards_free(gs);
    return NULL;
}

void em_guards_free(em_guards *gs) {
    if (!gs) return;
    for (int k = 0; k < gs->n; k++) {
        em_free(gs->g[k].name);
        em_free(gs->g[k].s);
    }
    em_free(gs->g);
    em_free(gs);
}

static bool mismatch(char *why, size_t size, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static bool mismatch(char *why, size_t size, const char *fmt, ...) {
    if (why && size) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(why, size, fmt, ap);
        va_end(ap);
    }
    return false;
}

static bool check_arg(const guard *g, const em_arg *a, int k, char *why, size_t ws);

/* Are the guarded strides of g (normalised) a contiguous layout? */
static bool guarded_contiguous(const guard *g) {
    int64_t contig[EM_MAX_DIMS];
    em_contiguous_strides(g->shape, g->ndim, contig);
    for (int d = 0; d < g->ndim; d++)
        if (g->shape[d] > 1 && g->strides[d] != contig[d]) return false;
    return true;
}

/* Does tensor t differ from guard g in sizes only (em_guards_differ_in_sizes)?
 * Appends the dims that differ to *out. */
static bool sizes_only(const guard *g, const em_tensor *t, em_strbuf *out) {
    if (t->ndim != g->ndim || t->dtype != g->dtype || !em_device_eq(t->device, g->device) ||
        em_requires_grad(t) != g->requires_grad)
        return false;
    int64_t st[EM_MAX_DIMS];
    norm_strides(t, st);
    bool same_shape = em_shape_eq(t->shape, t->ndim, g->shape, g->ndim);
    if (same_shape) return memcmp(st, g->strides, (size_t)t->ndim * sizeof *st) == 0;
    if (!em_tensor_is_contiguous(t) || !guarded_contiguous(g)) return false;
    for (int d = 0; d < t->ndim; d++) {
        if (t->shape[d] == g->shape[d]) continue;
        if (t->shape[d] < 2 || g->shape[d] < 2) return false; /* (0 and 1 are sizes of their own) */
        em_strbuf_printf(out, "%s%s dim %d (%lld, then %lld)", out->len ? "; " : "", g->name, d,
                         (long long)g->shape[d], (long long)t->shape[d]);
    }
    return true;
}

bool em_guards_differ_in_sizes(const em_guards *gs, const em_arg *args, int n, char *varied, size_t vs) {
    if (n != gs->n) return false;
    em_strbuf dims;
    em_strbuf_init(&dims);
    bool ok = true;
    for (int k = 0; k < n && ok; k++) {
        const guard *g = &gs->g[k];
        const em_arg *a = &args[k];
        if (a->kind != g->kind || (a->name != g->name && strcmp(a->name ? a->name : "?", g->name) != 0))
            ok = false;
        else if (g->kind == EM_ARG_TENSOR)
            ok = sizes_only(g, a->tensor, &dims);
        else
            ok = check_arg(g, a, k, NULL, 0);
    }
    ok &= dims.len > 0;
    if (ok && varied && vs) snprintf(varied, vs, "%s", dims.data);
    free(em_strbuf_take(&dims));
    return ok;
}

/* Does argument a (number k + 1) pass guard g? Else `why` says how not. */
static bool check_arg(const guard *g, const em_arg *a, int k, char *why, size_t ws) {
    if (a->name != g->name && strcmp(a->name ? a->name : "?", g->name) != 0)
        return mismatch(why, ws, "argument %d is '%s' instead of '%s'", k + 1,
                        a->name ? a->name : "?", g->name);
    if (a->kind != g->kind)
        return mismatch(why, ws, "%s: %s instead of %s", g->name, kind_name(a->kind),
                        kind_name(g->kind));
    switch (g->kind) {
    case EM_ARG_TENSOR: {
        const em_tensor *t = a->tensor;
        char x[256], y[256];
        if (t->dtype != g->dtype)
            return mismatch(why, ws, "%s: dtype %s != %s", g->name, em_dtype_name(t->dtype),
                            em_dtype_name(g->dtype));
        if (!em_device_eq(t->device, g->device)) {
            char d1[16], d2[16];
            return mismatch(why, ws, "%s: device %s != %s", g->name,
                            em_device_str(t->device, d1), em_device_str(g->device, d2));
        }
        if (!em_shape_eq(t->shape, t->ndim, g->shape, g->ndim)) {
            em_shape_str(t->shape, t->ndim, x, sizeof x);
            em_shape_str(g->shape, g->ndim, y, sizeof y);
            return mismatch(why, ws, "%s: shape %s != %s", g->name, x, y);
        }
        int64_t st[EM_MAX_DIMS];
        norm_strides(t, st);
        if (memcmp(st, g->strides, (size_t)t->ndim * sizeof *st) != 0) {
            em_shape_str(t->strides, t->ndim, x, sizeof x);
            em_shape_str(g->strides, g->ndim, y, sizeof y);
            return mismatch(why, ws, "%s: strides %s != %s", g->name, x, y);
        }
        if (em_requires_grad(t) != g->requires_grad)
            return mismatch(why, ws, "%s: requires_grad %s != %s", g->name,
                            em_requires_grad(t) ? "True" : "False", g->requires_grad ? "True" : "False");
        break;
    }
    case EM_ARG_INT:
        if (a->i != g->i)
            return mismatch(why, ws, "%s: value %lld != %lld", g->name, (long long)a->i,
                            (long long)g->i);
        break;
    case EM_ARG_BOOL:
        if (a->i != g->i && (a->i > 1 || g->i > 1)) /* (grad mode with autocast: function.c) */
            return mismatch(why, ws, "%s: state %lld != %lld", g->name, (long long)a->i, (long long)g->i);
        if (a->i != g->i)
            return mismatch(why, ws, "%s: value %s != %s", g->name, a->i ? "True" : "False",
                            g->i ? "True" : "False");
        break;
    case EM_ARG_FLOAT:
        /* Bitwise, so NaN matches NaN and 0.0 does not match -0.0. */
        if (memcmp(&a->f, &g->f, sizeof g->f) != 0) {
            char x[32], y[32];
            return mismatch(why, ws, "%s: value %s != %s", g->name, em_format_double(a->f, x),
                            em_format_double(g->f, y));
        }
        break;
    case EM_ARG_STR:
        if (a->slen != g->slen || memcmp(a->s, g->s, g->slen) != 0)
            return mismatch(why, ws, "%s: value '%.*s' != '%s'", g->name, (int)a->slen, a->s,
                            g->s);
        break;
    case EM_ARG_NONE: break;
    }
    return true;
}

bool em_guards_check(const em_guards *gs, const em_arg *args, int n, char *why, size_t ws) {
    if (n != gs->n)
        return mismatch(why, ws, "called with %d arguments instead of %d", n, gs->n);
    for (int k = 0; k < n; k++)
        if (!check_arg(&gs->g[k], &args[k], k, why, ws)) return false;
    return true;
}

int em_guards_count(const em_guards *gs) { return gs->n; }
em_arg_kind em_guards_kind(const em_guards *gs, int i) { return gs->g[i].kind; }

char *em_guards_print(const em_guards *gs) {
    em_strbuf b;
    em_strbuf_init(&b);
    for (int k = 0; k < gs->n; k++) {
        const guard *g = &gs->g[k];
        em_strbuf_printf(&b, "%s: ", g->name);
        char x[256], y[256], d[16];
        switch (g->kind) {
        case EM_ARG_TENSOR:
            em_shape_str(g->shape, g->ndim, x, sizeof x);
            em_shape_str(g->strides, g->ndim, y, sizeof y);
            em_strbuf_printf(&b, "tensor dtype=%s device=%s shape=%s strides=%s%s\n",
                             em_dtype_name(g->dtype), em_device_str(g->device, d), x, y,
                             g->requires_grad ? " requires_grad" : "");
            break;
        case EM_ARG_INT: em_strbuf_printf(&b, "int == %lld\n", (long long)g->i); break;
        case EM_ARG_BOOL: em_strbuf_printf(&b, "bool == %s\n", g->i ? "True" : "False"); break;
        case EM_ARG_FLOAT: em_strbuf_printf(&b, "float == %s\n", em_format_double(g->f, x)); break;
        case EM_ARG_STR: em_strbuf_printf(&b, "str == '%s'\n", g->s); break;
        case EM_ARG_NONE: em_strbuf_puts(&b, "None\n"); break;
        }
    }
    return em_strbuf_take(&b);
}
