/*
 * compiled_function.c - the object @ember.compile returns.
 *
 * A call turns its arguments into em_args, then:
 *   - compilation disabled (EMBER_COMPILE=0), or already tracing (a compiled
 *     function called from one being traced): call the function as is;
 *   - a cached specialisation's guards pass: run its executable, or call the
 *     function eagerly if that specialisation could not be compiled;
 *   - otherwise, below the cache limit: trace the call (it runs eagerly and
 *     its result is returned), compile, cache under the call's guards;
 *   - at the limit: run eagerly, warning once with the guard that failed.
 * Warnings say why a function runs eagerly, once per function and reason.
 *
 * A trace runs the function on proxies of its tensor arguments: new tensor
 * objects viewing the same memory. So every use the trace sees of an
 * argument really came through that argument, even when the caller passes
 * one tensor twice or passes a tensor the function also reaches as a global
 * (which is then captured on its own). Results that are proxies are handed
 * back as the caller's original objects.
 */
#include "ember_py.h" /* first: Python.h sets the feature macros (strdup, clock_gettime) */

#include <string.h>
#include <time.h>

#include "ember/autograd.h"
#include "ember/passes.h"
#include "ember/strbuf.h"

bool em_py_compile_enabled = true;
static char *package_dir; /* frames in here are ember's own, not the user's */


typedef struct {
    em_guards *guards;
    em_compiled *compiled; /* NULL: this specialisation runs eagerly */
    em_capture *captured;  /* graph inputs after the arguments */
    int n_captured;
    PyObject *externals;   /* [(capture index, dict, key)]: inputs read from dicts per call */
    PyObject *dict_guards; /* [(dict, key, value)]: dict items the trace read as constants */
    em_grad_slot *slots;   /* .grad states guarded and set */
    int n_slots;
    em_arg *cap_args;      /* [n_captured]: scratch for checking the captured guards */
    em_tensor **value_guards; /* values host reads saw (results n_out..) */
    char **value_guard_what;
    int n_value_guards;
    int n_results; /* the graph's: outputs, value guards, write-backs, new gradients */
    em_guards *captured_guards; /* their metadata then: a parameter whose .data was
                                   swapped (model.double()) needs a new trace */
    PyObject *out_template; /* the result's structure (out_template) */
    int n_out;
    int *writes, n_writes; /* inputs the function writes into: copied back after a run */
    int *returned_writes;  /* [n_out]: results that are written inputs (-1: none) */
    /* [n_sharing] per graph input: the first earlier input sharing its
     * memory, or -1, as traced; guarded, since a graph traced on separate
     * tensors reads and writes them as separate (see sharing_of) */
    int *sharing, n_sharing;
    char reason[512];
    double trace_ms; /* the traced call (an eager run with recording) */
    char *traced_ir; /* the graph as traced, before the passes (malloc'd) */
    bool draws_random; /* runs with the GIL held: see python/csrc/generator.c */
    /* A traced graph not compiled yet: its own run made its guards fail
     * for the next call (it found a .grad None and left one there, as a
     * training step's first call does), so it compiles only if a call
     * matches it again. */
    em_ir_graph *pending;
} entry;

/* Why calls ran eagerly, with counts (for _stats and explain). */
typedef struct {
    char *reason;
    int64_t count;
} fallback;

typedef struct {
    PyObject_HEAD PyObject *fn;
    PyObject *dict;
    PyObject *weakreflist;
    char name[128];
    PyObject *arg_names; /* tuple of the positional parameter names, or NULL */
    int cache_limit;
    entry *entries;
    int n_entries;
    bool warned_limit, warned_args;
    char **warned; /* fallback reasons already warned about */
    int n_warned;
    int64_t n_compiled_calls, n_eager_calls, n_traces;
    int64_t n_misses; /* calls no specialisation accepted */
    int64_t n_value_guard_failures; /* runs discarded because a value guard failed */
    int n_retries; /* traces that failed with em_trace_result.retry */
    fallback *fallbacks;
    int n_fallbacks;
    /* The latest call: "compiled", "traced" or "eager", the specialisation
     * that ran or was made (-1: none), and why it ran eagerly. */
    const char *last_event;
    int last_entry;
    char last_reason[1024];
} compiled_fn;

#define MAX_ARGS 64
#define MAX_CAPTURED 4096 /* graph inputs besides the arguments */

/* ---- arguments ---- */

typedef struct {
    const char *name;
    PyObject *key, *value; /* borrowed */
} kwarg;

static int kwarg_cmp(const void *a, const void *b) {
    return strcmp(((const kwarg *)a)->name, ((const kwarg *)b)->name);
}

/* One call's arguments, flattened. Nested tuples, lists and dicts (string
 * keys) are walked depth first: a container is an entry of its own, a
 * string describing its type and length (and a dict's keys), so the guards
 * see the structure; its items follow with names like "xs[1]" or
 * "d['lr']". objs[i] is entry i's Python object. Top-level arguments come
 * positional first, then keyword ones sorted by name, so f(x=a, y=b) and
 * f(y=b, x=a) are one call; top[]/keys[] hold them (keys NULL for
 * positional ones). */
typedef struct {
    em_arg a[MAX_ARGS];
    PyObject *objs[MAX_ARGS];
    char names[MAX_ARGS][64];
    char shapes[MAX_ARGS][160]; /* containers' descriptions */
    int n;
    PyObject *top[MAX_ARGS], *keys[MAX_ARGS];
    int n_top;
} call_args;

/* Adds `o` (named `name`) and, for a container, its items; 0, -1 when it
 * holds something guards cannot describe (*bad names it), -2 with an
 * exception set. */
static int add_arg(call_args *c, PyObject *o, const char *name, const char **bad, PyObject **bad_obj) {
    if (c->n == MAX_ARGS) {
        *bad = "(too many arguments, counting the items of lists, tuples and dicts)";
        *bad_obj = NULL;
        return -1;
    }
    int k = c->n++;
    em_arg *a = &c->a[k];
    memset(a, 0, sizeof *a);
    a->name = name; /* lives through the call: a code object's, a key's, or names[k] */
    c->objs[k] = o;
    if (em_py_is_tensor(o)) {
        a->kind = EM_ARG_TENSOR;
        a->tensor = em_py_tensor_of(o);
    } else if (PyBool_Check(o)) {
        a->kind = EM_ARG_BOOL;
        a->i = o == Py_True;
    } else if (PyLong_Check(o)) {
        int overflow;
        a->kind = EM_ARG_INT;
        a->i = PyLong_AsLongLongAndOverflow(o, &overflow);
        if (overflow) goto unsupported;
    } else if (PyFloat_Check(o)) {
        a->kind = EM_ARG_FLOAT;
        a->f = PyFloat_AS_DOUBLE(o);
    } else if (o == Py_None) {
        a->kind = EM_ARG_NONE;
    } else if (PyUnicode_Check(o)) {
        Py_ssize_t len;
        a->kind = EM_ARG_STR;
        a->s = PyUnicode_AsUTF8AndSize(o, &len);
        if (!a->s) return -2;
        a->slen = (size_t)len;
    } else if (PyTuple_CheckExact(o) || PyList_CheckExact(o)) {
        Py_ssize_t len = PySequence_Fast_GET_SIZE(o);
        a->kind = EM_ARG_STR; /* the structure, guarded by value */
        a->slen = (size_t)snprintf(c->shapes[k], sizeof c->shapes[k], "%s of %zd",
                                   Py_TYPE(o)->tp_name, len);
        a->s = c->shapes[k];
        for (Py_ssize_t i = 0; i < len; i++) {
            char *item = c->names[c->n < MAX_ARGS ? c->n : 0]; /* the item's own slot */
            snprintf(item, sizeof c->names[0], "%s[%zd]", name, i);
            int r = add_arg(c, PySequence_Fast_GET_ITEM(o, i), item, bad, bad_obj);
            if (r < 0) return r;
        }
    } else if (PyDict_CheckExact(o)) {
        a->kind = EM_ARG_STR;
        size_t used = (size_t)snprintf(c->shapes[k], sizeof c->shapes[k], "dict");
        PyObject *key, *value;
        Py_ssize_t pos = 0;
        while (PyDict_Next(o, &pos, &key, &value)) { /* keys in insertion order */
            const char *ks = PyUnicode_Check(key) ? PyUnicode_AsUTF8(key) : NULL;
            if (!ks) {
                PyErr_Clear();
                goto unsupported;
            }
            if (used + strlen(ks) + 3 >= sizeof c->shapes[k]) {
                *bad = "(a dict with too many or too long keys)";
                *bad_obj = o;
                return -1;
            }
            used += (size_t)snprintf(c->shapes[k] + used, sizeof c->shapes[k] - used, "%s'%s'",
                                     pos == 1 ? " of " : ", ", ks);
        }
        a->s = c->shapes[k];
        a->slen = used;
        pos = 0;
        while (PyDict_Next(o, &pos, &key, &value)) {
            char *item = c->names[c->n < MAX_ARGS ? c->n : 0];
            snprintf(item, sizeof c->names[0], "%s['%s']", name, PyUnicode_AsUTF8(key));
            int r = add_arg(c, value, item, bad, bad_obj);
            if (r < 0) return r;
        }
    } else {
        goto unsupported;
    }
    return 0;
unsupported:
    *bad = a->name;
    *bad_obj = o;
    return -1;
}

/* Fills *c from a call. Returns the number of entries, -1 if an argument
 * holds a type guards cannot describe (*bad names it), -2 with an exception
 * set. */
static int collect_args(compiled_fn *cf, PyObject *args, PyObject *kwargs, call_args *c,
                        const char **bad, PyObject **bad_obj) {
    Py_ssize_t np = PyTuple_GET_SIZE(args), nk = kwargs ? PyDict_GET_SIZE(kwargs) : 0;
    c->n = c->n_top = 0;
    if (np + nk > MAX_ARGS) {
        *bad = "(too many arguments)";
        *bad_obj = NULL;
        return -1;
    }
    kwarg kw[MAX_ARGS];
    Py_ssize_t pos = 0;
    for (Py_ssize_t j = 0; j < nk; j++) {
        PyDict_Next(kwargs, &pos, &kw[j].key, &kw[j].value);
        if (!(kw[j].name = PyUnicode_AsUTF8(kw[j].key))) return -2;
    }
    qsort(kw, (size_t)nk, sizeof *kw, kwarg_cmp);
    for (Py_ssize_t i = 0; i < np + nk; i++) {
        PyObject *o;
        const char *name;
        if (i < np) {
            o = PyTuple_GET_ITEM(args, i);
            name = cf->arg_names && i < PyTuple_GET_SIZE(cf->arg_names)
                       ? PyUnicode_AsUTF8(PyTuple_GET_ITEM(cf->arg_names, i))
                       : "*args";
            c->keys[c->n_top] = NULL;
        } else {
            o = kw[i - np].value;
            name = kw[i - np].name;
            c->keys[c->n_top] = kw[i - np].key;
        }
        c->top[c->n_top++] = o;
        int r = add_arg(c, o, name ? name : "?", bad, bad_obj);
        if (r < 0) return r;
    }
    /* grad mode is a guard like the arguments: with it on, captured tensors
     * that require grad fail a trace that compiles under no_grad */
    int r = add_arg(c, em_grad_enabled() ? Py_True : Py_False, "(grad mode)", bad, bad_obj);
    return r < 0 ? r : c->n;
}

/* ---- source locations for the tracer ---- */

static bool user_location(void *ctx, const char **file, int *line) {
    (void)ctx;
    PyFrameObject *f = PyEval_GetFrame(); /* borrowed */
    Py_XINCREF(f);
    bool found = false;
    while (f && !found) {
        PyCodeObject *code = PyFrame_GetCode(f);
        const char *fn = PyUnicode_AsUTF8(code->co_filename);
        if (fn && !(package_dir && strncmp(fn, package_dir, strlen(package_dir)) == 0)) {
            *file = fn; /* owned by the code object, which outlives the trace */
            *line = PyFrame_GetLineNumber(f);
            found = true;
        }
        Py_DECREF(code);
        PyFrameObject *back = PyFrame_GetBack(f);
        Py_DECREF(f);
        f = back;
    }
    Py_XDECREF(f);
    if (!found) PyErr_Clear();
    return found;
}

/* ---- results ---- */

/* A result's structure with its tensors taken out: the template has the
 * result's tuples, lists and dicts, with each tensor replaced by its index
 * in outs[] and None kept. NULL (with *why, no exception) when it holds
 * anything else, or NULL with an exception set. */
static PyObject *out_template(PyObject *r, em_tensor **outs, int *n, char *why, size_t ws) {
    if (em_py_is_tensor(r)) {
        if (*n == 256) {
            snprintf(why, ws, "it returns more than 256 tensors");
            return NULL;
        }
        outs[*n] = em_py_tensor_of(r);
        return PyLong_FromLong((*n)++);
    }
    if (r == Py_None) Py_RETURN_NONE;
    if (PyTuple_CheckExact(r) || PyList_CheckExact(r)) {
        Py_ssize_t len = PySequence_Fast_GET_SIZE(r);
        PyObject *t = PyList_New(len);
        for (Py_ssize_t i = 0; t && i < len; i++) {
            PyObject *item = out_template(PySequence_Fast_GET_ITEM(r, i), outs, n, why, ws);
            if (!item) Py_CLEAR(t);
            else PyList_SET_ITEM(t, i, item);
        }
        if (t && PyTuple_CheckExact(r)) {
            PyObject *tt = PyList_AsTuple(t);
            Py_DECREF(t);
            t = tt;
        }
        return t;
    }
    if (PyDict_CheckExact(r)) {
        PyObject *t = PyDict_New(), *key, *value;
        Py_ssize_t pos = 0;
        while (t && PyDict_Next(r, &pos, &key, &value)) {
            PyObject *item = out_template(value, outs, n, why, ws);
            if (!item || PyDict_SetItem(t, key, item) < 0) Py_CLEAR(t);
            Py_XDECREF(item);
        }
        return t;
    }
    snprintf(why, ws,
             "it returns a %s; compiled functions can return tensors and None, in any nesting of "
             "tuples, lists and dicts",
             Py_TYPE(r)->tp_name);
    return NULL;
}

/* The result for a compiled call: the template filled with outs[] (whose
 * references it takes). */
static PyObject *fill_template(PyObject *t, em_tensor **outs) {
    if (PyLong_CheckExact(t)) {
        long i = PyLong_AsLong(t);
        em_tensor *o = outs[i];
        outs[i] = NULL;
        return em_py_wrap(o);
    }
    if (PyTuple_CheckExact(t) || PyList_CheckExact(t)) {
        Py_ssize_t len = PySequence_Fast_GET_SIZE(t);
        PyObject *r = PyTuple_CheckExact(t) ? PyTuple_New(len) : PyList_New(len);
        for (Py_ssize_t i = 0; r && i < len; i++) {
            PyObject *item = fill_template(PySequence_Fast_GET_ITEM(t, i), outs);
            if (!item) {
                Py_CLEAR(r);
                break;
            }
            if (PyTuple_CheckExact(t))
                PyTuple_SET_ITEM(r, i, item);
            else
                PyList_SET_ITEM(r, i, item);
        }
        return r;
    }
    if (PyDict_CheckExact(t)) {
        PyObject *r = PyDict_New(), *key, *value;
        Py_ssize_t pos = 0;
        while (r && PyDict_Next(t, &pos, &key, &value)) {
            PyObject *item = fill_template(value, outs);
            if (!item || PyDict_SetItem(r, key, item) < 0) Py_CLEAR(r);
            Py_XDECREF(item);
        }
        return r;
    }
    Py_INCREF(t); /* None */
    return t;
}

static PyObject *build_result(PyObject *template, em_tensor **outs, int n) {
    PyObject *r = fill_template(template, outs);
    for (int i = 0; i < n; i++) em_tensor_release(outs[i]); /* any not handed out (on error) */
    return r;
}

/* ---- specialisations ---- */

static void entry_clear(entry *e) {
    em_ir_graph_free(e->pending);
    Py_XDECREF(e->out_template);
    Py_XDECREF(e->externals);
    Py_XDECREF(e->dict_guards);
    free(e->slots);
    free(e->cap_args);
    for (int i = 0; i < e->n_value_guards; i++) {
        em_tensor_release(e->value_guards[i]);
        free(e->value_guard_what[i]);
    }
    free(e->value_guards);
    free(e->value_guard_what);
    free(e->writes);
    free(e->returned_writes);
    free(e->sharing);
    em_guards_free(e->captured_guards);
    free(e->traced_ir);
    em_guards_free(e->guards);
    em_compiled_free(e->compiled);
    for (int i = 0; i < e->n_captured; i++) em_tensor_release(e->captured[i].tensor);
    free(e->captured);
    memset(e, 0, sizeof *e);
}

static entry *add_entry(compiled_fn *cf, const em_arg *args, int n) {
    entry *ne = realloc(cf->entries, (size_t)(cf->n_entries + 1) * sizeof *ne);
    if (!ne) {
        PyErr_NoMemory();
        return NULL;
    }
    cf->entries = ne;
    entry *e = &ne[cf->n_entries];
    memset(e, 0, sizeof *e);
    if (!(e->guards = em_guards_new(args, n))) {
        em_py_raise();
        return NULL;
    }
    cf->n_entries++;
    return e;
}

static int warn(compiled_fn *cf, const char *fmt, ...) {
    char msg[1200];
    va_list ap;
    va_start(ap, fmt);
    int k = snprintf(msg, sizeof msg, "ember.compile(%s): ", cf->name);
    vsnprintf(msg + k, sizeof msg - (size_t)k, fmt, ap);
    va_end(ap);
    return PyErr_WarnEx(PyExc_UserWarning, msg, 1); /* 1: the line calling the function */
}

/* Warns about a fallback unless this function already warned for `reason`. */
static int warn_fallback(compiled_fn *cf, const char *reason) {
    for (int i = 0; i < cf->n_warned; i++)
        if (strcmp(cf->warned[i], reason) == 0) return 0;
    char **w = realloc(cf->warned, (size_t)(cf->n_warned + 1) * sizeof *w);
    size_t len = strlen(reason) + 1;
    char *copy = malloc(len);
    if (!w || !copy) {
        free(copy);
        if (w) cf->warned = w;
        PyErr_NoMemory();
        return -1;
    }
    memcpy(copy, reason, len);
    cf->warned = w;
    cf->warned[cf->n_warned++] = copy;
    return warn(cf, "running eagerly: %s", reason);
}

/* Counts one more call that did not run compiled code for `reason`. */
static void count_fallback(compiled_fn *cf, const char *reason) {
    for (int i = 0; i < cf->n_fallbacks; i++)
        if (strcmp(cf->fallbacks[i].reason, reason) == 0) {
            cf->fallbacks[i].count++;
            return;
        }
    fallback *f = realloc(cf->fallbacks, (size_t)(cf->n_fallbacks + 1) * sizeof *f);
    char *copy = strdup(reason);
    if (!f || !copy) { /* counting is best effort */
        free(copy);
        if (f) cf->fallbacks = f;
        return;
    }
    cf->fallbacks = f;
    cf->fallbacks[cf->n_fallbacks++] = (fallback){copy, 1};
}

/* Records what the current call does (before it runs, so a call that
 * raises is still described). */
static void note_call(compiled_fn *cf, const char *event, int entry_index, const char *reason) {
    cf->last_event = event;
    cf->last_entry = entry_index;
    snprintf(cf->last_reason, sizeof cf->last_reason, "%s", reason ? reason : "");
    if (strcmp(event, "eager") != 0) return;
    cf->n_eager_calls++;
    count_fallback(cf, cf->last_reason);
}

/* Runs f eagerly for `reason`. */
static PyObject *call_eagerly(compiled_fn *cf, int entry_index, const char *reason, PyObject *args,
                              PyObject *kwargs) {
    note_call(cf, "eager", entry_index, reason);
    return PyObject_Call(cf->fn, args, kwargs);
}

/* Compiles e's traced graph (taking it) for inputs shaped like `examples`;
 * when that fails, e runs eagerly from now on and says why. -1 when the
 * warning raised. */
static int compile_entry(compiled_fn *cf, entry *e, em_ir_graph *graph, em_tensor *const *examples, int k) {
    /* per graph result: the value guards' traced values; then the effects:
     * write-backs, then the .grad slots that change */
    em_tensor **expected = calloc((size_t)e->n_results, sizeof *expected);
    em_effect *effects = malloc((size_t)(e->n_writes + e->n_slots + 1) * sizeof *effects);
    if (!expected || !effects) {
        free(expected);
        free(effects);
        em_ir_graph_free(graph);
        PyErr_NoMemory();
        return -1;
    }
    for (int j = 0; j < e->n_value_guards; j++) expected[e->n_out + j] = e->value_guards[j];
    int n_effects = 0;
    for (int j = 0; j < e->n_writes; j++)
        effects[n_effects++] = (em_effect){EM_EFFECT_WRITE, e->writes[j], e->n_out + e->n_value_guards + j};
    for (int j = 0; j < e->n_slots; j++)
        if (e->slots[j].final != EM_SLOT_KEEP)
            effects[n_effects++] = (em_effect){EM_EFFECT_GRAD, e->slots[j].owner, e->slots[j].final >= 0 ? e->slots[j].final : -1};
    em_run_spec spec = {e->n_out, expected, effects, n_effects};
    em_compile_opts opts = {em_dump_mask_from_env(), em_dump_dir_from_env(), getenv("EMBER_BACKEND"),
                            e->guards, &spec};
    em_status st = em_compile(graph, examples, k, &opts, &e->compiled); /* (graph taken) */
    free(expected);
    free(effects);
    if (st != EM_OK) {
        e->compiled = NULL;
        snprintf(e->reason, sizeof e->reason, "compiling failed: %s", em_last_error());
        snprintf(cf->last_reason, sizeof cf->last_reason, "%s", e->reason);
        return warn_fallback(cf, e->reason);
    }
    for (const em_ir_node *node = em_compiled_graph(e->compiled)->body->first; node; node = node->next)
        e->draws_random |= (em_op_get(node->op)->flags & EM_F_RANDOM) != 0;
    return 0;
}

/* The entry's graph inputs for a call: the tensor arguments, then each
 * capture (a captured tensor itself; the .grad its owner has now; an
 * external's value, made later by add_externals). Returns the count. */
static int gather_inputs(const entry *e, const em_arg *a, int n, em_tensor **in) {
    int k = 0;
    for (int i = 0; i < n; i++)
        if (a[i].kind == EM_ARG_TENSOR) in[k++] = a[i].tensor;
    for (int i = 0; i < e->n_captured; i++) {
        const em_capture *c = &e->captured[i];
        in[k] = c->kind == EM_CAPTURE_GRAD ? in[c->owner]->grad : c->tensor;
        k++;
    }
    return k;
}

/* Does every .grad the trace found None still hold None, and every dict
 * item read as a constant still the value it was? */
static int state_unchanged(const entry *e, em_tensor *const *in) {
    for (int i = 0; i < e->n_slots; i++)
        if (e->slots[i].initial == EM_SLOT_NONE && in[e->slots[i].owner]->grad) return 0;
    Py_ssize_t n = e->dict_guards ? PyList_GET_SIZE(e->dict_guards) : 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *g = PyList_GET_ITEM(e->dict_guards, i);
        PyObject *now = PyDict_GetItemWithError(PyTuple_GET_ITEM(g, 0), PyTuple_GET_ITEM(g, 1));
        if (!now) return PyErr_Occurred() ? -1 : 0;
        PyObject *was = PyTuple_GET_ITEM(g, 2);
        if (now == was) continue;
        if (Py_TYPE(now) != Py_TYPE(was)) return 0;
        /* numbers, strings and tuples of them by value; anything else (a
         * tensor, a module) must be the very object the trace saw */
        if (!PyLong_Check(was) && !PyFloat_Check(was) && !PyUnicode_Check(was) && !PyTuple_Check(was))
            return 0;
        int eq = PyObject_RichCompareBool(now, was, Py_EQ);
        if (eq <= 0) return eq;
    }
    return 1;
}

/* Where external j of e goes among the captured inputs. */
static int external_slot(const entry *e, Py_ssize_t j) {
    return (int)PyLong_AsLong(PyTuple_GET_ITEM(PyList_GET_ITEM(e->externals, j), 0));
}

/* Releases the first n externals add_externals made. */
static void release_externals(const entry *e, int n_tensor_args, em_tensor **in, Py_ssize_t n) {
    for (Py_ssize_t j = 0; j < n; j++) em_tensor_release(in[n_tensor_args + external_slot(e, j)]);
}

static Py_ssize_t n_externals(const entry *e) { return e->externals ? PyList_GET_SIZE(e->externals) : 0; }

/* The value of externals' dict items as 0-d float64 tensors, into in[]
 * (new references; -1 with an exception set). */
static int add_externals(const entry *e, int n_tensor_args, em_tensor **in) {
    for (Py_ssize_t i = 0; i < n_externals(e); i++) {
        PyObject *x = PyList_GET_ITEM(e->externals, i);
        PyObject *v = PyDict_GetItemWithError(PyTuple_GET_ITEM(x, 1), PyTuple_GET_ITEM(x, 2));
        double d = v ? PyFloat_AsDouble(v) : -1.0;
        em_tensor *t = d == -1.0 && (!v || PyErr_Occurred()) ? NULL : em_full(NULL, 0, d, EM_DTYPE_F64);
        if (!t) {
            if (!PyErr_Occurred() && !v)
                PyErr_Format(PyExc_KeyError, "compiled function: the dict item %R it reads at every "
                                             "call is gone", PyTuple_GET_ITEM(x, 2));
            else if (!PyErr_Occurred())
                em_py_raise();
            release_externals(e, n_tensor_args, in, i);
            return -1;
        }
        in[n_tensor_args + external_slot(e, i)] = t;
    }
    return 0;
}

#define VALUE_GUARD_FAILED ((PyObject *)1)

/* Runs a specialisation whose guards passed. Returns the result, NULL with
 * an exception, or VALUE_GUARD_FAILED when a value guard failed: then the
 * run changed nothing (no write-back, the random stream restored). */
static PyObject *run_entry(compiled_fn *cf, entry *e, PyObject *args, PyObject *kwargs, em_tensor **in,
                           int n_in, int n_tensor_args) {
    if (e->pending) { /* a call matches it again: now it is worth compiling */
        em_ir_graph *graph = e->pending;
        e->pending = NULL;
        if (compile_entry(cf, e, graph, in, n_in) < 0) return NULL;
    }
    if (!e->compiled) return call_eagerly(cf, (int)(e - cf->entries), e->reason, args, kwargs);
    note_call(cf, "compiled", (int)(e - cf->entries), NULL);
    if (add_externals(e, n_tensor_args, in) < 0) return NULL;
    em_tensor *outs[256];
    em_rng_state rng = em_rng_get_state();
    em_status st;
    bool was = em_set_grad_enabled(false); /* the graph is the computation; no history */
    if (e->draws_random) {
        st = em_compiled_run(e->compiled, in, n_in, outs, e->n_out);
    } else {
        Py_BEGIN_ALLOW_THREADS st = em_compiled_run(e->compiled, in, n_in, outs, e->n_out);
        Py_END_ALLOW_THREADS
    }
    em_set_grad_enabled(was);
    release_externals(e, n_tensor_args, in, n_externals(e));
    if (st != EM_OK) {
        if (st != EM_ERR_GUARD) return em_py_raise();
        em_rng_set_state(rng); /* (the run stopped at the guard, before any write) */
        snprintf(cf->last_reason, sizeof cf->last_reason, "value guard failed: %s", em_last_error());
        return VALUE_GUARD_FAILED;
    }
    for (int j = 0; e->returned_writes && j < e->n_out; j++) /* `return buf` after buf.add_(x) */
        if (e->returned_writes[j] >= 0) {
            em_tensor *target = in[e->writes[e->returned_writes[j]]];
            em_tensor_retain(target);
            em_tensor_release(outs[j]);
            outs[j] = target;
        }
    cf->n_compiled_calls++;
    return build_result(e->out_template, outs, e->n_out);
}

/* A proxy of argument tensor t: a new tensor object viewing its memory.
 * With grad on and t requiring grad, a view with history (an identity
 * expand), so gradients reach t itself through the trace. */
static PyObject *proxy_of(em_tensor *t) {
    if (em_grad_enabled() && t->requires_grad) {
        em_tensor *p = em_expand(t, t->shape, t->ndim);
        return p ? em_py_wrap(p) : em_py_raise();
    }
    return em_py_wrap(em_tensor_alias(t, t->offset, t->shape, t->strides, t->ndim));
}

/* A copy of entry *k's object (and its items) with every tensor replaced by
 * a proxy (a new tensor object viewing the same memory), kept in
 * proxies[entry]; advances *k past the entries it consumed. */
static PyObject *with_proxies(const call_args *c, int *k, PyObject **proxies) {
    int i = (*k)++;
    PyObject *o = c->objs[i];
    if (c->a[i].kind == EM_ARG_TENSOR) {
        proxies[i] = proxy_of(c->a[i].tensor);
        Py_XINCREF(proxies[i]);
        return proxies[i];
    }
    if (PyTuple_CheckExact(o) || PyList_CheckExact(o)) {
        Py_ssize_t len = PySequence_Fast_GET_SIZE(o);
        PyObject *r = PyList_New(len);
        for (Py_ssize_t j = 0; r && j < len; j++) {
            PyObject *item = with_proxies(c, k, proxies);
            if (!item) Py_CLEAR(r);
            else PyList_SET_ITEM(r, j, item);
        }
        if (r && PyTuple_CheckExact(o)) {
            PyObject *t = PyList_AsTuple(r);
            Py_DECREF(r);
            r = t;
        }
        return r;
    }
    if (PyDict_CheckExact(o)) {
        PyObject *r = PyDict_New(), *key, *value;
        Py_ssize_t pos = 0;
        while (r && PyDict_Next(o, &pos, &key, &value)) {
            PyObject *item = with_proxies(c, k, proxies);
            if (!item || PyDict_SetItem(r, key, item) < 0) Py_CLEAR(r);
            Py_XDECREF(item);
        }
        return r;
    }
    Py_INCREF(o);
    return o;
}

/* The call with every tensor argument, at any depth, replaced by a proxy. */
static int proxy_call(PyObject *args, PyObject *kwargs, const call_args *c, PyObject **pargs,
                      PyObject **pkwargs, PyObject **proxies) {
    Py_ssize_t np = PyTuple_GET_SIZE(args);
    *pargs = PyTuple_New(np);
    *pkwargs = kwargs ? PyDict_Copy(kwargs) : NULL;
    if (!*pargs || (kwargs && !*pkwargs)) return -1;
    int k = 0;
    for (int i = 0; i < c->n_top; i++) {
        PyObject *o = with_proxies(c, &k, proxies);
        if (!o) return -1;
        if (i < np) {
            PyTuple_SET_ITEM(*pargs, i, o);
        } else {
            int r = PyDict_SetItem(*pkwargs, c->keys[i], o);
            Py_DECREF(o);
            if (r < 0) return -1;
        }
    }
    return 0;
}

/* Hands proxies in a result (at any depth) back as the caller's objects
 * (new reference). */
static PyObject *unproxy(PyObject *res, const call_args *c, PyObject *const *proxies) {
    for (int i = 0; i < c->n; i++)
        if (proxies[i] && res == proxies[i]) {
            Py_INCREF(c->objs[i]);
            return c->objs[i];
        }
    if (PyDict_CheckExact(res)) {
        PyObject *r = PyDict_New(), *key, *value;
        Py_ssize_t pos = 0;
        while (r && PyDict_Next(res, &pos, &key, &value)) {
            PyObject *item = unproxy(value, c, proxies);
            if (!item || PyDict_SetItem(r, key, item) < 0) Py_CLEAR(r);
            Py_XDECREF(item);
        }
        return r;
    }
    if (!PyTuple_CheckExact(res) && !PyList_CheckExact(res)) {
        Py_INCREF(res);
        return res;
    }
    Py_ssize_t len = PySequence_Fast_GET_SIZE(res);
    PyObject *r = PyTuple_CheckExact(res) ? PyTuple_New(len) : PyList_New(len);
    for (Py_ssize_t k = 0; r && k < len; k++) {
        PyObject *item = unproxy(PySequence_Fast_GET_ITEM(res, k), c, proxies);
        if (!item) {
            Py_CLEAR(r);
            break;
        }
        if (PyTuple_CheckExact(res))
            PyTuple_SET_ITEM(r, k, item);
        else
            PyList_SET_ITEM(r, k, item);
    }
    return r;
}

/* em_args describing an entry's captured inputs as a call finds them
 * (in[0..n_captured), or NULL: as traced), written into e->cap_args; a
 * .grad that is None now is an EM_ARG_NONE, which fails its tensor guard.
 * Runs under the GIL, which makes the per-entry scratch safe. */
static em_arg *captured_args(const entry *e, em_tensor *const *in) {
    static const char *const names[] = {"captured tensor 0", "captured tensor 1", "captured tensor 2",
                                        "captured tensor 3", "captured tensor 4+"};
    em_arg *a = e->cap_args;
    for (int i = 0; i < e->n_captured; i++) {
        memset(&a[i], 0, sizeof a[i]);
        a[i].name = e->captured[i].kind == EM_CAPTURE_GRAD ? "a captured .grad" : names[i < 4 ? i : 4];
        a[i].tensor = !in || e->captured[i].kind == EM_CAPTURE_EXTERNAL ? e->captured[i].tensor : in[i];
        a[i].kind = a[i].tensor ? EM_ARG_TENSOR : EM_ARG_NONE;
    }
    return a;
}

/* Do the captured inputs (in[n_tensor_args..]) still have the dtype, shape,
 * strides and requires_grad the specialisation was compiled for, and the
 * state it read (None gradients, dict items) the values it saw? -1 with an
 * exception set. */
static int captured_unchanged(const entry *e, em_tensor *const *in, int n_tensor_args) {
    if (e->captured_guards &&
        !em_guards_check(e->captured_guards, captured_args(e, in + n_tensor_args), e->n_captured, NULL, 0))
        return 0;
    return state_unchanged(e, in);
}

/* Input i's first earlier input in[0..i) with the same memory, or -1. A
 * call whose inputs share memory unlike the traced ones (a parameter also
 * passed as an argument, a view of it) fails the guards and traces anew. */
static int sharing_of(em_tensor *const *in, int i) {
    for (int j = 0; in[i] && j < i; j++)
        if (in[j] && in[j]->storage == in[i]->storage) return j;
    return -1;
}

static bool sharing_unchanged(const entry *e, em_tensor *const *in, int n_in) {
    if (!e->sharing && e->n_sharing == 0) return true; /* (an entry whose trace failed) */
    if (n_in != e->n_sharing) return false;
    for (int i = 0; i < n_in; i++)
        if (sharing_of(in, i) != e->sharing[i]) return false;
    return true;
}

/* Fills in[] for a call of entry e whose argument guards passed; 1 when its
 * captured inputs and the state it read pass too, 0 when not, -1 with an
 * exception set. *n_in and *n_tensor_args: the input counts. */
static int entry_accepts(const entry *e, const em_arg *a, int n, em_tensor **in, int *n_in,
                         int *n_tensor_args) {
    *n_tensor_args = 0;
    for (int i = 0; i < n; i++) *n_tensor_args += a[i].kind == EM_ARG_TENSOR;
    if (*n_tensor_args > MAX_ARGS || e->n_captured > MAX_CAPTURED) return 0;
    *n_in = gather_inputs(e, a, n, in);
    int ok = captured_unchanged(e, in, *n_tensor_args);
    return ok == 1 ? sharing_unchanged(e, in, *n_in) : ok;
}

/* ---- what a trace records besides ops (optimizers call these) ---- */

/* The compiled function being traced on this thread, and what its trace
 * read from Python dicts. */
typedef struct {
    em_tracer *tr;
    PyObject *externals, *dict_guards; /* lists, as in entry */
    PyObject *guarded;                 /* {(id(dict), key)}: dict_guards without repeats */
    PyObject *const *proxies;          /* per call_args entry: the proxy or NULL */
    const call_args *args;
} trace_ctx;
static _Thread_local trace_ctx *tracing;

const em_tensor *em_py_traced_original(const em_tensor *t) {
    if (!tracing) return NULL;
    for (int i = 0; i < tracing->args->n; i++)
        if (tracing->proxies[i] && em_py_tensor_of(tracing->proxies[i]) == t) return tracing->args->a[i].tensor;
    return NULL;
}

/* _trace_scalar_input(d, key): d[key] (a number) as a 0-d float64 tensor
 * that the compiled graph takes as an input, read again from d at every
 * call (a learning rate a scheduler changes). Outside a trace the same
 * tensor, untracked. */
static PyObject *f_trace_scalar_input(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *d, *key;
    if (!PyArg_ParseTuple(args, "O!O:_trace_scalar_input", &PyDict_Type, &d, &key)) return NULL;
    PyObject *v = PyDict_GetItemWithError(d, key);
    if (!v) return PyErr_Occurred() ? NULL : (PyErr_SetObject(PyExc_KeyError, key), NULL);
    double x = PyFloat_AsDouble(v);
    if (x == -1.0 && PyErr_Occurred()) return NULL;
    const em_trace_hook *hook = em_set_trace_hook(NULL); /* (an input, not an op of the function) */
    em_tensor *t = em_full(NULL, 0, x, EM_DTYPE_F64);
    em_set_trace_hook(hook);
    if (!t) return em_py_raise();
    if (tracing) {
        int idx = em_trace_add_external(tracing->tr, t);
        PyObject *item = idx >= 0 ? Py_BuildValue("(iOO)", idx, d, key) : NULL;
        if (!item || PyList_Append(tracing->externals, item) < 0) {
            Py_XDECREF(item);
            em_tensor_release(t);
            return idx < 0 ? em_py_raise() : NULL;
        }
        Py_DECREF(item);
    }
    return em_py_wrap(t);
}

/* _trace_guard_items(d, keys): the trace treats d[k] for k in keys as
 * constants; a call where one differs (by value for numbers, strings and
 * tuples, else by identity) traces anew. No-op outside a trace. */
static PyObject *f_trace_guard_items(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *d, *keys;
    if (!PyArg_ParseTuple(args, "O!O:_trace_guard_items", &PyDict_Type, &d, &keys)) return NULL;
    if (!tracing) Py_RETURN_NONE;
    PyObject *it = PyObject_GetIter(keys), *k;
    if (!it) return NULL;
    while ((k = PyIter_Next(it))) {
        PyObject *seen = Py_BuildValue("(nO)", (Py_ssize_t)d, k);
        int dup = seen ? PySet_Contains(tracing->guarded, seen) : -1;
        if (dup == 0) dup = PySet_Add(tracing->guarded, seen);
        Py_XDECREF(seen);
        if (dup != 0) { /* (a repeat, or an error) */
            Py_DECREF(k);
            if (dup < 0) break;
            continue;
        }
        PyObject *v = PyDict_GetItemWithError(d, k);
        PyObject *item = v ? Py_BuildValue("(OOO)", d, k, v) : NULL;
        Py_DECREF(k);
        if (!item || PyList_Append(tracing->dict_guards, item) < 0) {
            Py_XDECREF(item);
            Py_DECREF(it);
            if (!PyErr_Occurred()) PyErr_SetString(PyExc_KeyError, "_trace_guard_items: missing key");
            return NULL;
        }
        Py_DECREF(item);
    }
    Py_DECREF(it);
    if (PyErr_Occurred()) return NULL;
    Py_RETURN_NONE;
}

static PyObject *f_is_tracing(PyObject *self, PyObject *unused) {
    (void)self;
    (void)unused;
    return PyBool_FromLong(em_trace_active());
}


/* Moves what a successful trace found into entry e (its compiled graph is
 * already there). False (with e->reason) when memory ran out. */
static bool adopt_trace(entry *e, em_trace_result *tres, trace_ctx *ctx) {
    e->captured = tres->captured;
    e->n_captured = tres->n_captured;
    tres->captured = NULL;
    tres->n_captured = 0;
    e->slots = tres->slots;
    e->n_slots = tres->n_slots;
    tres->slots = NULL;
    tres->n_slots = 0;
    e->value_guards = tres->value_guards;
    e->value_guard_what = (char **)tres->value_guard_what;
    e->n_value_guards = tres->n_value_guards;
    tres->value_guards = NULL;
    tres->value_guard_what = NULL;
    tres->n_value_guards = 0;
    e->externals = ctx->externals;
    e->dict_guards = ctx->dict_guards;
    ctx->externals = ctx->dict_guards = NULL;
    e->n_results = e->n_out + e->n_value_guards + tres->n_writes;
    for (int i = 0; i < e->n_slots; i++) e->n_results += e->slots[i].final >= 0;
    if (tres->n_writes) {
        if (!(e->writes = malloc((size_t)tres->n_writes * sizeof *e->writes))) goto nomem;
        memcpy(e->writes, tres->writes, (size_t)tres->n_writes * sizeof *e->writes);
        e->n_writes = tres->n_writes;
        if (e->n_out && !(e->returned_writes = malloc((size_t)e->n_out * sizeof *e->returned_writes)))
            goto nomem;
        if (e->n_out) memcpy(e->returned_writes, tres->returned_writes, (size_t)e->n_out * sizeof *e->returned_writes);
    }
    if (e->n_captured > MAX_CAPTURED) {
        em_compiled_free(e->compiled);
        e->compiled = NULL;
        snprintf(e->reason, sizeof e->reason, "the function captures more than %d tensors", MAX_CAPTURED);
        return false;
    }
    if (e->n_captured && (!(e->cap_args = malloc((size_t)e->n_captured * sizeof *e->cap_args)) ||
                          !(e->captured_guards = em_guards_new(captured_args(e, NULL), e->n_captured))))
        goto nomem;
    return true;
nomem:
    PyErr_Clear(); /* no guards, no compiled code: run such calls eagerly */
    em_compiled_free(e->compiled);
    e->compiled = NULL;
    snprintf(e->reason, sizeof e->reason, "out of memory for the specialisation's guards");
    return false;
}

/* A captured .grad is found through its owner at every call; the one the
 * trace saw is not kept alive once compiling no longer needs it as an
 * example (it would hold a second copy of every gradient). Its layout
 * lives on in the guards. */
static void drop_traced_grads(entry *e) {
    for (int i = 0; i < e->n_captured; i++)
        if (e->captured[i].kind == EM_CAPTURE_GRAD) {
            em_tensor_release(e->captured[i].tensor);
            e->captured[i].tensor = NULL;
        }
}

/* How many traces that failed only because the function made state that
 * outlives the call (see em_trace_result.retry) a function gets before its
 * calls like that one run eagerly for good. */
#define MAX_RETRIES 3

/* Traces one call, compiles it, caches it; returns the call's (eager) result. */
static PyObject *trace_call(compiled_fn *cf, PyObject *args, PyObject *kwargs, const call_args *c) {
    const em_arg *a = c->a;
    int n = c->n;
    PyObject *pargs = NULL, *pkwargs = NULL, *proxies[MAX_ARGS] = {NULL}, *res = NULL, *out = NULL;
    PyObject *template = NULL;
    trace_ctx ctx = {NULL, PyList_New(0), PyList_New(0), PySet_New(NULL), proxies, c};
    if (!ctx.externals || !ctx.dict_guards || !ctx.guarded) goto done;
    if (proxy_call(args, kwargs, c, &pargs, &pkwargs, proxies) < 0) goto done;
    em_tracer *tr = ctx.tr = em_trace_begin(cf->name, user_location, NULL);
    if (!tr) {
        em_py_raise();
        goto done;
    }
    cf->n_traces++;
    note_call(cf, "traced", cf->n_entries, NULL);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (int i = 0; i < n; i++)
        if (proxies[i] && em_trace_add_input(tr, em_py_tensor_of(proxies[i]), a[i].name, a[i].tensor) != EM_OK)
            em_trace_fail(tr, "out of memory while tracing");
    tracing = &ctx;
    res = PyObject_Call(cf->fn, pargs, pkwargs);
    tracing = NULL;
    em_trace_result tres;
    if (!res) { /* the function raised: nothing to cache */
        em_trace_fail(tr, "the function raised");
        em_trace_end(tr, NULL, 0, &tres);
        goto done;
    }
    em_tensor *outs[256];
    int n_out = 0;
    char why[512] = "";
    if (!(template = out_template(res, outs, &n_out, why, sizeof why))) {
        if (PyErr_Occurred()) {
            PyErr_Clear();
            snprintf(why, sizeof why, "out of memory while recording the result");
        }
        em_trace_fail(tr, "%s", why);
        n_out = 0;
    }
    if (em_trace_count_escapes(tr, outs, n_out)) /* garbage in a reference cycle is no escape */
        PyGC_Collect();
    em_status st = em_trace_end(tr, outs, n_out, &tres);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    if (!(out = unproxy(res, c, proxies))) {
        em_trace_result_clear(&tres);
        goto done;
    }
    if (st != EM_OK && tres.retry && cf->n_retries < MAX_RETRIES) { /* no entry: trace again next call */
        cf->n_retries++;
        snprintf(cf->last_reason, sizeof cf->last_reason, "%s", em_last_error());
        count_fallback(cf, cf->last_reason);
        goto done;
    }
    entry *e = add_entry(cf, a, n);
    if (!e) {
        em_trace_result_clear(&tres);
        Py_CLEAR(out);
        goto done;
    }
    e->out_template = template;
    template = NULL;
    e->n_out = n_out;
    e->trace_ms = (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-6;
    if (st != EM_OK) {
        snprintf(e->reason, sizeof e->reason, "%s", em_last_error());
        snprintf(cf->last_reason, sizeof cf->last_reason, "%s", e->reason);
        if (warn_fallback(cf, e->reason) < 0) Py_CLEAR(out);
        goto done;
    }
    /* Compile: inputs are the tensor arguments, then the captured ones. */
    em_tensor *examples[MAX_ARGS + MAX_CAPTURED];
    int k = 0;
    for (int i = 0; i < n; i++)
        if (a[i].kind == EM_ARG_TENSOR) examples[k++] = a[i].tensor;
    for (int i = 0; i < tres.n_captured && k < MAX_ARGS + MAX_CAPTURED; i++) examples[k++] = tres.captured[i].tensor;
    /* (writes into memory two inputs share fail the trace: the tracer refuses them) */
    e->n_sharing = -1; /* (out of memory: no call matches the entry) */
    if ((e->sharing = malloc((size_t)(k ? k : 1) * sizeof *e->sharing))) {
        e->n_sharing = k;
        for (int i = 0; i < k; i++) e->sharing[i] = sharing_of(examples, i);
    }
    em_ir_graph *graph = tres.graph;
    tres.graph = NULL;
    e->traced_ir = em_ir_print(graph);
    bool defer = false;
    for (int i = 0; i < tres.n_slots; i++)
        defer |= tres.slots[i].initial == EM_SLOT_NONE && tres.slots[i].final >= 0;
    if (!adopt_trace(e, &tres, &ctx)) {
        em_ir_graph_free(graph);
    } else if (defer) {
        e->pending = graph;
    } else if (compile_entry(cf, e, graph, examples, k) < 0) {
        Py_CLEAR(out);
    }
    drop_traced_grads(e);
    em_trace_result_clear(&tres);
done:
    tracing = NULL;
    Py_XDECREF(ctx.externals);
    Py_XDECREF(ctx.dict_guards);
    Py_XDECREF(ctx.guarded);
    Py_XDECREF(template);
    Py_XDECREF(res);
    Py_XDECREF(pargs);
    Py_XDECREF(pkwargs);
    for (int i = 0; i < n; i++) Py_XDECREF(proxies[i]);
    return out;
}

/* Runs the call on the first specialisation whose guards pass and whose
 * value guards hold; NULL with no exception when there is none. */
static PyObject *run_cached(compiled_fn *cf, PyObject *args, PyObject *kwargs, const em_arg *a, int n) {
    em_tensor *in[MAX_ARGS + MAX_CAPTURED];
    for (int i = 0; i < cf->n_entries; i++) {
        entry *e = &cf->entries[i];
        int n_in, n_tensor_args;
        if (!em_guards_check(e->guards, a, n, NULL, 0)) continue;
        int ok = entry_accepts(e, a, n, in, &n_in, &n_tensor_args);
        if (ok < 0) return NULL;
        if (!ok) continue;
        PyObject *r = run_entry(cf, e, args, kwargs, in, n_in, n_tensor_args);
        if (r != VALUE_GUARD_FAILED) return r;
        cf->n_value_guard_failures++;
    }
    return NULL;
}

static PyObject *cf_call(PyObject *self, PyObject *args, PyObject *kwargs) {
    compiled_fn *cf = (compiled_fn *)self;
    if (!em_py_compile_enabled)
        return call_eagerly(cf, -1, "compilation is disabled (EMBER_COMPILE=0 or "
                                    "ember.compiler.disable())", args, kwargs);
    if (em_trace_active()) /* inlined into the caller's trace */
        return call_eagerly(cf, -1, "called while another compiled function is being traced "
                                    "(its ops join that trace)", args, kwargs);
    call_args c; /* (large: on the stack, it costs nothing to set up) */
    const char *bad = NULL;
    PyObject *bad_obj = NULL;
    int n = collect_args(cf, args, kwargs, &c, &bad, &bad_obj);
    const em_arg *a = c.a;
    if (n == -2) return NULL;
    if (n < 0) {
        char why[256];
        snprintf(why, sizeof why, "argument '%s' is a %s, which compiled functions do not support "
                                  "yet (tensors, Python numbers, strings and None are, in any "
                                  "nesting of tuples, lists and dicts with string keys)",
                 bad, bad_obj ? Py_TYPE(bad_obj)->tp_name : "?");
        if (!cf->warned_args) {
            cf->warned_args = true;
            if (warn(cf, "%s; running eagerly", why) < 0) return NULL;
        }
        return call_eagerly(cf, -1, why, args, kwargs);
    }
    PyObject *r = run_cached(cf, args, kwargs, a, n);
    if (r || PyErr_Occurred()) return r;
    cf->n_misses++;
    if (cf->n_entries >= cf->cache_limit) {
        char failed[512] = "", why[700];
        if (cf->n_entries) em_guards_check(cf->entries[cf->n_entries - 1].guards, a, n, failed, sizeof failed);
        if (!failed[0]) snprintf(failed, sizeof failed, "%.500s", cf->last_reason[0] ? cf->last_reason : "?");
        snprintf(why, sizeof why, "cache limit of %d specialisations reached", cf->cache_limit);
        if (!cf->warned_limit) {
            cf->warned_limit = true;
            if (warn(cf, "%s; calls that match none of them run eagerly (this call failed the "
                         "guard %s)", why, failed) < 0)
                return NULL;
        }
        return call_eagerly(cf, -1, why, args, kwargs);
    }
    return trace_call(cf, args, kwargs, &c);
}

/* ---- the type ---- */

static PyObject *cf_new(PyTypeObject *type, PyObject *args, PyObject *kwargs) {
    static char *kw[] = {"fn", "cache_limit", NULL};
    PyObject *fn;
    int limit = -1;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O|i:CompiledFunction", kw, &fn, &limit))
        return NULL;
    if (!PyCallable_Check(fn))
        return em_py_error(PyExc_TypeError, "ember.compile: expected a function, got %s",
                           Py_TYPE(fn)->tp_name);
    compiled_fn *cf = (compiled_fn *)type->tp_alloc(type, 0);
    if (!cf) return NULL;
    Py_INCREF(fn);
    cf->fn = fn;
    if (limit < 0) {
        const char *env = getenv("EMBER_CACHE_LIMIT");
        limit = env && *env ? atoi(env) : 8;
    }
    cf->cache_limit = limit;
    PyObject *qn = PyObject_GetAttrString(fn, "__qualname__");
    if (!qn) {
        PyErr_Clear();
        qn = PyObject_GetAttrString(fn, "__name__");
    }
    const char *s = qn ? PyUnicode_AsUTF8(qn) : NULL;
    snprintf(cf->name, sizeof cf->name, "%s", s ? s : "fn");
    Py_XDECREF(qn);
    PyErr_Clear();
    /* positional parameter names, for graph input names and messages */
    PyObject *code = PyObject_GetAttrString(fn, "__code__");
    if (code) {
        PyObject *names = PyObject_GetAttrString(code, "co_varnames");
        PyObject *argc = PyObject_GetAttrString(code, "co_argcount");
        if (names && argc && PyTuple_Check(names))
            cf->arg_names = PyTuple_GetSlice(names, 0, PyLong_AsSsize_t(argc));
        Py_XDECREF(names);
        Py_XDECREF(argc);
        Py_DECREF(code);
    }
    PyErr_Clear();
    return (PyObject *)cf;
}

static void cf_dealloc(PyObject *self) {
    compiled_fn *cf = (compiled_fn *)self;
    PyObject_GC_UnTrack(self);
    if (cf->weakreflist) PyObject_ClearWeakRefs(self);
    for (int i = 0; i < cf->n_entries; i++) entry_clear(&cf->entries[i]);
    free(cf->entries);
    for (int i = 0; i < cf->n_warned; i++) free(cf->warned[i]);
    free(cf->warned);
    for (int i = 0; i < cf->n_fallbacks; i++) free(cf->fallbacks[i].reason);
    free(cf->fallbacks);
    Py_CLEAR(cf->fn);
    Py_CLEAR(cf->dict);
    Py_CLEAR(cf->arg_names);
    Py_TYPE(self)->tp_free(self);
}

static int cf_traverse(PyObject *self, visitproc visit, void *arg) {
    compiled_fn *cf = (compiled_fn *)self;
    Py_VISIT(cf->fn);
    Py_VISIT(cf->dict);
    return 0;
}

static int cf_clear(PyObject *self) {
    compiled_fn *cf = (compiled_fn *)self;
    Py_CLEAR(cf->fn);
    Py_CLEAR(cf->dict);
    return 0;
}

/* Bound methods: decorating a method compiles calls with self as an argument. */
static PyObject *cf_descr_get(PyObject *self, PyObject *obj, PyObject *type) {
    (void)type;
    if (!obj || obj == Py_None) {
        Py_INCREF(self);
        return self;
    }
    return PyMethod_New(self, obj);
}

/* The graph input index i in words. */
static void input_name(em_strbuf *b, const entry *e, int n_tensor_args, int i) {
    if (i < n_tensor_args) {
        em_strbuf_printf(b, "input %d (argument)", i);
        return;
    }
    const em_capture *c = &e->captured[i - n_tensor_args];
    em_strbuf_printf(b, "input %d (%s)", i,
                     c->kind == EM_CAPTURE_GRAD ? "a captured .grad"
                     : c->kind == EM_CAPTURE_EXTERNAL ? "read at every call" : "captured tensor");
}

/* What a specialisation does besides its graph: value guards, .grad
 * slots, write-backs, inputs read from dicts, guarded dict items. */
static char *describe_state(const entry *e) {
    em_strbuf b;
    em_strbuf_init(&b);
    int n_tensor_args = 0;
    for (int i = 0; e->guards && i < em_guards_count(e->guards); i++)
        n_tensor_args += em_guards_kind(e->guards, i) == EM_ARG_TENSOR;
    em_strbuf_printf(&b, "value guards: %d%s\n", e->n_value_guards,
                     e->n_value_guards ? " (a host read made Python act on these values; a call "
                                         "computing others reruns eagerly)" : "");
    for (int j = 0; j < e->n_value_guards; j++) {
        const em_tensor *t = e->value_guards[j];
        char shape[64], num[32];
        em_shape_str(t->shape, t->ndim, shape, sizeof shape);
        em_strbuf_printf(&b, "  %s of result %d == %s %s [", e->value_guard_what[j], e->n_out + j,
                         em_dtype_name(t->dtype), shape);
        for (int64_t k = 0; k < t->numel && k < 4; k++)
            em_strbuf_printf(&b, "%s%s", k ? ", " : "", em_format_double(em_tensor_get_f64(t, k), num));
        em_strbuf_printf(&b, "%s]\n", t->numel > 4 ? ", ..." : "");
    }
    em_strbuf_printf(&b, ".grad slots: %d\n", e->n_slots);
    for (int j = 0; j < e->n_slots; j++) {
        const em_grad_slot *sl = &e->slots[j];
        em_strbuf_printf(&b, "  .grad of input %d: %s -> %s", sl->owner,
                         sl->initial == EM_SLOT_UNREAD ? "(replaced unread)"
                         : sl->initial == EM_SLOT_NONE ? "None" : "a tensor",
                         sl->final == EM_SLOT_KEEP ? "kept" : sl->final == EM_SLOT_NONE ? "None" : "new value");
        if (sl->final >= 0) em_strbuf_printf(&b, " (result %d)", sl->final);
        em_strbuf_puts(&b, "\n");
    }
    em_strbuf_printf(&b, "write-backs: %d\n", e->n_writes);
    for (int j = 0; j < e->n_writes; j++) {
        em_strbuf_puts(&b, "  ");
        input_name(&b, e, n_tensor_args, e->writes[j]);
        em_strbuf_printf(&b, " <- result %d\n", e->n_out + e->n_value_guards + j);
    }
    for (Py_ssize_t j = 0; j < n_externals(e); j++) {
        PyObject *key = PyTuple_GET_ITEM(PyList_GET_ITEM(e->externals, j), 2);
        const char *k = PyUnicode_Check(key) ? PyUnicode_AsUTF8(key) : NULL;
        if (!k) PyErr_Clear();
        em_strbuf_printf(&b, "input %d: %s read from a param group at every call\n",
                         n_tensor_args + external_slot(e, j), k ? k : "?");
    }
    em_strbuf_printf(&b, "guarded dict items (module modes and tensors, optimizer settings): %zd\n",
                     e->dict_guards ? PyList_GET_SIZE(e->dict_guards) : (Py_ssize_t)0);
    return em_strbuf_take(&b);
}

/* [{backend, dump_path, guards, reason, note, ..., profile}] for tests, explain and demos. */
static PyObject *cf_specializations(PyObject *self, PyObject *unused) {
    (void)unused;
    compiled_fn *cf = (compiled_fn *)self;
    PyObject *list = PyList_New(0);
    for (int i = 0; list && i < cf->n_entries; i++) {
        entry *e = &cf->entries[i];
        char *g = em_guards_print(e->guards);
        char *kernels = e->compiled ? em_compiled_describe(e->compiled) : NULL;
        char *profile = e->compiled ? em_compiled_profile(e->compiled) : NULL;
        char *state = e->compiled || e->pending ? describe_state(e) : NULL;
        double passes_ms = 0, backend_ms = 0;
        if (e->compiled) em_compiled_times(e->compiled, &passes_ms, &backend_ms);
        PyObject *d = Py_BuildValue(
            "{s:s,s:s,s:s,s:s,s:s,s:i,s:d,s:d,s:d,s:s,s:s,s:s,s:s}", "backend",
            e->compiled ? em_compiled_backend(e->compiled) : e->pending ? "pending" : "eager", "dump_path",
            e->compiled ? em_compiled_dump_path(e->compiled) : "", "guards", g ? g : "", "reason",
            e->reason, "note", e->compiled ? em_compiled_note(e->compiled) : "", "captured",
            e->n_captured, "trace_ms", e->trace_ms,
            "passes_ms", passes_ms, "backend_ms", backend_ms, "kernels", kernels ? kernels : "",
            "traced_ir", e->traced_ir ? e->traced_ir : "", "state", state ? state : "", "profile",
            profile ? profile : "");
        free(g);
        free(kernels);
        free(profile);
        free(state);
        if (!d || PyList_Append(list, d) < 0) {
            Py_XDECREF(d);
            Py_DECREF(list);
            return NULL;
        }
        Py_DECREF(d);
    }
    return list;
}

static PyObject *cf_graph(PyObject *self, PyObject *arg) {
    compiled_fn *cf = (compiled_fn *)self;
    long i = PyLong_AsLong(arg);
    if (i == -1 && PyErr_Occurred()) return NULL;
    if (i < 0 || i >= cf->n_entries || !cf->entries[i].compiled)
        return em_py_error(PyExc_IndexError, "no compiled specialisation %ld", i);
    char *text = em_ir_print(em_compiled_graph(cf->entries[i].compiled));
    if (!text) return em_py_raise();
    PyObject *r = PyUnicode_FromString(text);
    free(text);
    return r;
}

static PyObject *cf_stats(PyObject *self, PyObject *unused) {
    (void)unused;
    compiled_fn *cf = (compiled_fn *)self;
    PyObject *reasons = PyDict_New();
    for (int i = 0; reasons && i < cf->n_fallbacks; i++) {
        PyObject *c = PyLong_FromLongLong(cf->fallbacks[i].count);
        if (!c || PyDict_SetItemString(reasons, cf->fallbacks[i].reason, c) < 0) Py_CLEAR(reasons);
        Py_XDECREF(c);
    }
    if (!reasons) return NULL;
    /* hits: calls a compiled specialisation ran; misses: calls none accepted
     * (each then traced, or ran eagerly at the cache limit); recompiles:
     * traces after the first */
    return Py_BuildValue("{s:L,s:L,s:L,s:L,s:L,s:L,s:i,s:i,s:L,s:i,s:N}", "compiled_calls",
                         (long long)cf->n_compiled_calls, "hits", (long long)cf->n_compiled_calls,
                         "misses", (long long)cf->n_misses, "recompiles",
                         (long long)(cf->n_traces > 0 ? cf->n_traces - 1 : 0), "eager_calls",
                         (long long)cf->n_eager_calls, "traces", (long long)cf->n_traces,
                         "specializations", cf->n_entries, "cache_limit", cf->cache_limit,
                         "value_guard_failures", (long long)cf->n_value_guard_failures,
                         "retried_traces", cf->n_retries, "fallbacks", reasons);
}

/* _time_guards(n, *args): nanoseconds per guard evaluation of this call
 * (argument collection, then the latest specialisation's guards over the
 * arguments, its captured tensors and the state it read), averaged over n runs; for
 * bench/bench_compile.py. */
static PyObject *cf_time_guards(PyObject *self, PyObject *args) {
    compiled_fn *cf = (compiled_fn *)self;
    if (PyTuple_GET_SIZE(args) < 1) return em_py_error(PyExc_TypeError, "_time_guards(n, *args)");
    long n = PyLong_AsLong(PyTuple_GET_ITEM(args, 0));
    if (n <= 0 || !cf->n_entries) {
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "_time_guards: n > 0 and a specialisation needed");
        return NULL;
    }
    PyObject *call = PyTuple_GetSlice(args, 1, PyTuple_GET_SIZE(args));
    if (!call) return NULL;
    call_args c;
    const char *bad = NULL;
    PyObject *bad_obj = NULL;
    struct timespec t0, t1;
    bool ok = true;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    em_tensor *in[MAX_ARGS + MAX_CAPTURED];
    const entry *e = &cf->entries[cf->n_entries - 1];
    for (long i = 0; i < n && ok; i++) {
        int k = collect_args(cf, call, NULL, &c, &bad, &bad_obj), n_in, n_tensor_args;
        ok = k >= 0 && em_guards_check(e->guards, c.a, k, NULL, 0) &&
             entry_accepts(e, c.a, k, in, &n_in, &n_tensor_args) == 1;
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    Py_DECREF(call);
    if (!ok) {
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "_time_guards: the call fails the guards");
        return NULL;
    }
    double ns = (double)(t1.tv_sec - t0.tv_sec) * 1e9 + (double)(t1.tv_nsec - t0.tv_nsec);
    return PyFloat_FromDouble(ns / (double)n);
}

/* {event, specialization, reason} of the latest call */
static PyObject *cf_last_call(PyObject *self, PyObject *unused) {
    (void)unused;
    compiled_fn *cf = (compiled_fn *)self;
    if (!cf->last_event) Py_RETURN_NONE;
    PyObject *spec = cf->last_entry >= 0 ? PyLong_FromLong(cf->last_entry) : (Py_INCREF(Py_None), Py_None);
    return Py_BuildValue("{s:s,s:N,s:s}", "event", cf->last_event, "specialization", spec, "reason",
                         cf->last_reason);
}

static PyObject *cf_reset(PyObject *self, PyObject *unused) {
    (void)unused;
    compiled_fn *cf = (compiled_fn *)self;
    for (int i = 0; i < cf->n_entries; i++) entry_clear(&cf->entries[i]);
    cf->n_entries = 0;
    cf->warned_limit = cf->warned_args = false;
    for (int i = 0; i < cf->n_warned; i++) free(cf->warned[i]);
    cf->n_warned = 0;
    for (int i = 0; i < cf->n_fallbacks; i++) free(cf->fallbacks[i].reason);
    cf->n_fallbacks = 0;
    cf->n_compiled_calls = cf->n_eager_calls = cf->n_traces = cf->n_misses = 0;
    cf->n_value_guard_failures = 0;
    cf->n_retries = 0;
    cf->last_event = NULL;
    Py_RETURN_NONE;
}

static PyMethodDef cf_methods[] = {
    {"_specializations", cf_specializations, METH_NOARGS, "the cached specialisations"},
    {"_graph", cf_graph, METH_O, "the optimised IR of specialisation i"},
    {"_stats", cf_stats, METH_NOARGS, "call counters"},
    {"_last_call", cf_last_call, METH_NOARGS, "what the latest call did"},
    {"_time_guards", cf_time_guards, METH_VARARGS, "ns per guard evaluation of a call"},
    {"_reset", cf_reset, METH_NOARGS, "forget every specialisation"},
    {NULL, NULL, 0, NULL},
};

/* functools.update_wrapper fills __dict__ (__name__, __doc__, __wrapped__). */
static PyGetSetDef cf_getset[] = {
    {"__dict__", PyObject_GenericGetDict, PyObject_GenericSetDict, NULL, NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

PyTypeObject em_py_CompiledFunction = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "ember.CompiledFunction",
    .tp_basicsize = sizeof(compiled_fn),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_new = cf_new,
    .tp_dealloc = cf_dealloc,
    .tp_traverse = cf_traverse,
    .tp_clear = cf_clear,
    .tp_call = cf_call,
    .tp_descr_get = cf_descr_get,
    .tp_methods = cf_methods,
    .tp_getset = cf_getset,
    .tp_dictoffset = offsetof(compiled_fn, dict),
    .tp_weaklistoffset = offsetof(compiled_fn, weakreflist),
    .tp_doc = "A function compiled by ember.compile: traced on first call, then run from "
              "cached specialisations while their guards hold.",
};

/* The names of the passes every graph goes through, in order. */
static PyObject *f_pass_pipeline(PyObject *self, PyObject *unused) {
    (void)self;
    (void)unused;
    int n = 0;
    while (em_default_pipeline[n]) n++;
    PyObject *t = PyTuple_New(n);
    for (int i = 0; t && i < n; i++) {
        PyObject *name = PyUnicode_FromString(em_default_pipeline[i]);
        if (!name) {
            Py_CLEAR(t);
            break;
        }
        PyTuple_SET_ITEM(t, i, name);
    }
    return t;
}

static PyObject *f_set_profiling(PyObject *self, PyObject *on) {
    (void)self;
    int v = PyObject_IsTrue(on);
    if (v < 0) return NULL;
    em_interp_set_profiling(v);
    Py_RETURN_NONE;
}

static PyObject *f_profiling(PyObject *self, PyObject *unused) {
    (void)self;
    (void)unused;
    return PyBool_FromLong(em_interp_profiling());
}

static PyMethodDef compile_methods[] = {
    {"_pass_pipeline", f_pass_pipeline, METH_NOARGS, "the passes every graph goes through"},
    {"_set_profiling", f_set_profiling, METH_O, "_set_profiling(on): time every node of compiled runs"},
    {"_profiling", f_profiling, METH_NOARGS, "whether compiled runs time their nodes"},
    {"_trace_scalar_input", f_trace_scalar_input, METH_VARARGS,
     "_trace_scalar_input(d, key): d[key] as a 0-d float64 tensor a compiled graph reads anew at every call"},
    {"_trace_guard_items", f_trace_guard_items, METH_VARARGS,
     "_trace_guard_items(d, keys): a trace treats these items of d as constants, guarded by value"},
    {"_is_tracing", f_is_tracing, METH_NOARGS, "whether a compiled function is being traced on this thread"},
    {NULL, NULL, 0, NULL},
};

int em_py_compile_init(PyObject *module) {
    const char *env = getenv("EMBER_COMPILE");
    em_py_compile_enabled = !(env && strcmp(env, "0") == 0);
    if (PyType_Ready(&em_py_CompiledFunction) < 0) return -1;
    Py_INCREF(&em_py_CompiledFunction);
    if (PyModule_AddObject(module, "CompiledFunction", (PyObject *)&em_py_CompiledFunction) < 0) return -1;
    return PyModule_AddFunctions(module, compile_methods);
}

PyObject *em_py_set_package_dir(PyObject *self, PyObject *arg) {
    (void)self;
    const char *s = PyUnicode_AsUTF8(arg);
    if (!s) return NULL;
    size_t n = strlen(s) + 1;
    char *copy = malloc(n);
    if (!copy) return PyErr_NoMemory();
    memcpy(copy, s, n);
    free(package_dir);
    package_dir = copy;
    Py_RETURN_NONE;
}
