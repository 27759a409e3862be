/*
 * compiled_function.c - the object @ember.compile returns: a thin layer over
 * the compile driver (em_function, frontend/function.c).
 *
 * A call is flattened into the driver's arguments (nested tuples, lists and
 * dicts walked depth first; tensors, numbers, strings and None), and the
 * driver says what to do: hand back a compiled run's tensors in the
 * result's structure, run the function eagerly, or run it on the proxies it
 * made while its tracer records. The binding supplies what only Python
 * knows: the user's source line of each traced op, the dict items a trace
 * read as constants (module modes, optimizer settings: _trace_guard_items),
 * the inputs read from dicts at every call (a learning rate:
 * _trace_scalar_input), garbage collection, and the GIL, released around
 * compiled runs.
 */
#include "ember_py.h" /* first: Python.h sets the feature macros */

#include <string.h>
#include <time.h>

#include "capture.h"
#include "ember/strbuf.h"

static char *package_dir; /* frames in here are ember's own, not the user's */

typedef struct {
    PyObject_HEAD PyObject *fn;
    PyObject *dict;
    PyObject *weakreflist;
    PyObject *arg_names; /* tuple of the positional parameter names, or NULL */
    em_function *f;
    bool fullgraph; /* raise rather than run eagerly (ember.compile(fullgraph=True)) */
} compiled_fn;

/* ember.compile(fn, fullgraph=True) met what would run fn eagerly. */
static PyObject *graph_break(compiled_fn *cf, const char *why) {
    PyObject *qn = PyObject_GetAttrString(cf->fn, "__qualname__");
    PyErr_Clear();
    PyErr_Format(PyExc_RuntimeError, "ember.compile(%S, fullgraph=True): the call cannot run as one compiled "
                 "graph: %s", qn ? qn : Py_None, why && *why ? why : "(no reason recorded)");
    Py_XDECREF(qn);
    return NULL;
}

#define MAX_ARGS EM_FUNCTION_MAX_ARGS

/* ---- structures: one walk over nested tuples, lists and dicts ---- */

/* Is o a named tuple (a tuple subclass with _make: sort's and max's
 * results, the linalg results)? */
static bool is_named_tuple(PyObject *o) {
    if (!PyTuple_Check(o) || PyTuple_CheckExact(o)) return false;
    int has = PyObject_HasAttrString((PyObject *)Py_TYPE(o), "_make");
    return has > 0;
}

/* A copy of o's tuples, named tuples, lists and dicts (exact types) with
 * every other object replaced by leaf(o, ctx) (a new reference, or NULL
 * with an exception set). enter(ctx), if given, is called for each
 * container before its items: the order in which arguments are flattened. */
typedef PyObject *(*leaf_fn)(PyObject *o, void *ctx);
static PyObject *tree_map(PyObject *o, leaf_fn leaf, void (*enter)(void *), void *ctx) {
    if (is_named_tuple(o)) { /* its items mapped, the same type made again */
        PyObject *items = PySequence_List(o);
        PyObject *mapped = items ? tree_map(items, leaf, enter, ctx) : NULL;
        PyObject *make = mapped ? PyObject_GetAttrString((PyObject *)Py_TYPE(o), "_make") : NULL;
        PyObject *r = make ? PyObject_CallOneArg(make, mapped) : NULL;
        Py_XDECREF(items);
        Py_XDECREF(mapped);
        Py_XDECREF(make);
        return r;
    }
    bool is_tuple = PyTuple_CheckExact(o);
    if (is_tuple || PyList_CheckExact(o)) {
        if (enter) enter(ctx);
        Py_ssize_t len = PySequence_Fast_GET_SIZE(o);
        PyObject *r = is_tuple ? PyTuple_New(len) : PyList_New(len);
        for (Py_ssize_t i = 0; r && i < len; i++) {
            PyObject *item = tree_map(PySequence_Fast_GET_ITEM(o, i), leaf, enter, ctx);
            if (!item) Py_CLEAR(r);
            else if (is_tuple) PyTuple_SET_ITEM(r, i, item);
            else PyList_SET_ITEM(r, i, item);
        }
        return r;
    }
    if (PyDict_CheckExact(o)) {
        if (enter) enter(ctx);
        PyObject *r = PyDict_New(), *key, *value;
        Py_ssize_t pos = 0;
        while (r && PyDict_Next(o, &pos, &key, &value)) { /* (insertion order) */
            PyObject *item = tree_map(value, leaf, enter, ctx);
            if (!item || PyDict_SetItem(r, key, item) < 0) Py_CLEAR(r);
            Py_XDECREF(item);
        }
        return r;
    }
    return leaf(o, ctx);
}

static PyObject *same(PyObject *o) {
    Py_INCREF(o);
    return o;
}

/* ---- arguments ---- */

typedef struct {
    const char *name;
    PyObject *key, *value; /* borrowed */
} kwarg;

static int kwarg_cmp(const void *a, const void *b) {
    return strcmp(((const kwarg *)a)->name, ((const kwarg *)b)->name);
}

/* One call's arguments, flattened: a container is an entry of its own, a
 * string describing its type and length (and a dict's keys), so the guards
 * see the structure; its items follow with names like "xs[1]" or
 * "d['lr']". objs[i] is entry i's object. Top-level arguments come
 * positional first, then keyword ones sorted by name, so f(x=a, y=b) and
 * f(y=b, x=a) are one call. */
typedef struct {
    em_arg a[MAX_ARGS];
    PyObject *objs[MAX_ARGS];
    char names[MAX_ARGS][64];
    char shapes[MAX_ARGS][160]; /* containers' descriptions */
    int n;
    PyObject *top[MAX_ARGS], *keys[MAX_ARGS]; /* keys NULL for positional ones */
    int n_top;
} call_args;

/* Adds `o` (named `name`) and, for a container, its items; 0, -1 when it
 * holds something guards cannot describe (*bad names it), -2 with an
 * exception set. */
static int add_arg(call_args *c, PyObject *o, const char *name, const char **bad, PyObject **bad_obj) {
    *bad_obj = o;
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
    *bad = name;
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
        if (overflow) return -1;
    } else if (PyFloat_Check(o)) {
        a->kind = EM_ARG_FLOAT;
        a->f = PyFloat_AS_DOUBLE(o);
    } else if (o == Py_None) {
        a->kind = EM_ARG_NONE;
    } else if (PyUnicode_Check(o)) {
        Py_ssize_t len;
        a->kind = EM_ARG_STR;
        if (!(a->s = PyUnicode_AsUTF8AndSize(o, &len))) return -2;
        a->slen = (size_t)len;
    } else if (PyTuple_CheckExact(o) || PyList_CheckExact(o) || PyDict_CheckExact(o)) {
        a->kind = EM_ARG_STR; /* the structure, guarded by value */
        bool is_dict = PyDict_CheckExact(o);
        size_t used = (size_t)snprintf(c->shapes[k], sizeof c->shapes[k], "%s", Py_TYPE(o)->tp_name);
        if (!is_dict) used += (size_t)snprintf(c->shapes[k] + used, sizeof c->shapes[k] - used, " of %zd",
                                               PySequence_Fast_GET_SIZE(o));
        PyObject *key, *value;
        Py_ssize_t pos = 0, i = 0;
        while (is_dict ? PyDict_Next(o, &pos, &key, &value) : i < PySequence_Fast_GET_SIZE(o)) {
            char *item = c->names[c->n < MAX_ARGS ? c->n : 0]; /* the item's own slot */
            if (is_dict) {
                const char *ks = PyUnicode_Check(key) ? PyUnicode_AsUTF8(key) : NULL;
                *bad_obj = o;
                *bad = ks ? "(a dict with too many or too long keys)" : name;
                if (!ks) PyErr_Clear();
                if (!ks || used + strlen(ks) + 3 >= sizeof c->shapes[k]) return -1;
                used += (size_t)snprintf(c->shapes[k] + used, sizeof c->shapes[k] - used, "%s'%s'",
                                         pos == 1 ? " of " : ", ", ks);
                snprintf(item, sizeof c->names[0], "%s['%s']", name, ks);
            } else {
                value = PySequence_Fast_GET_ITEM(o, i);
                snprintf(item, sizeof c->names[0], "%s[%zd]", name, i++);
            }
            int r = add_arg(c, value, item, bad, bad_obj);
            if (r < 0) return r;
        }
        a->s = c->shapes[k];
        a->slen = used;
    } else {
        return -1;
    }
    return 0;
}

/* Fills *c from a call: the number of entries, -1 if an argument holds a
 * type guards cannot describe (*bad names it), -2 with an exception set. */
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
        PyObject *o = i < np ? PyTuple_GET_ITEM(args, i) : kw[i - np].value;
        const char *name = i >= np ? kw[i - np].name
                           : cf->arg_names && i < PyTuple_GET_SIZE(cf->arg_names)
                               ? PyUnicode_AsUTF8(PyTuple_GET_ITEM(cf->arg_names, i))
                               : "*args";
        c->keys[c->n_top] = i < np ? NULL : kw[i - np].key;
        c->top[c->n_top++] = o;
        int r = add_arg(c, o, name ? name : "?", bad, bad_obj);
        if (r < 0) return r;
    }
    return c->n;
}

/* ---- the host: what the driver asks of Python ---- */

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

/* A specialisation's host data is a tuple (template, externals, guards):
 * the result's structure with each tensor replaced by its index among the
 * outputs; [(capture index, dict, key)], inputs read from dicts at every
 * call; the guards on the Python state the trace read (capture.c). */
#define TEMPLATE(d) PyTuple_GET_ITEM((PyObject *)(d), 0)
#define EXTERNALS(d) PyTuple_GET_ITEM((PyObject *)(d), 1)
#define STATE_GUARDS(d) PyTuple_GET_ITEM((PyObject *)(d), 2)

/* The guard that failed last on this thread, for the driver's messages. */
static _Thread_local PyObject *last_miss;

/* Is everything the trace read from Python (globals, closure cells,
 * attributes, items; module modes and optimizer settings) still what it
 * was? Numbers, strings and tuples by value, anything else by identity. */
static int host_state_holds(void *data) {
    return em_py_state_guards_hold(STATE_GUARDS(data), &last_miss);
}

static const char *host_state_miss(void *data) {
    (void)data;
    const char *s = last_miss ? PyUnicode_AsUTF8(last_miss) : NULL;
    if (!s) PyErr_Clear();
    return s;
}

/* The dict items read at every call, as 0-d float64 tensors. */
static em_status host_externals(void *data, em_tensor **captured) {
    PyObject *externals = EXTERNALS(data);
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(externals); i++) {
        PyObject *x = PyList_GET_ITEM(externals, i);
        PyObject *v = PyDict_GetItemWithError(PyTuple_GET_ITEM(x, 1), PyTuple_GET_ITEM(x, 2));
        double d = v ? PyFloat_AsDouble(v) : -1.0;
        if (!v && !PyErr_Occurred())
            PyErr_Format(PyExc_KeyError, "compiled function: the dict item %R it reads at every call is "
                                         "gone", PyTuple_GET_ITEM(x, 2));
        if (PyErr_Occurred()) return em_error(EM_ERR_HOST, "a compiled function's input raised");
        em_tensor *t = em_full(NULL, 0, d, EM_DTYPE_F64);
        if (!t) return em_last_status();
        captured[PyLong_AsLong(PyTuple_GET_ITEM(x, 0))] = t;
    }
    return EM_OK;
}

static char *host_describe(void *data, int first_input) {
    em_strbuf b;
    em_strbuf_init(&b);
    PyObject *externals = EXTERNALS(data);
    for (Py_ssize_t j = 0; j < PyList_GET_SIZE(externals); j++) {
        PyObject *x = PyList_GET_ITEM(externals, j), *key = PyTuple_GET_ITEM(x, 2);
        const char *k = PyUnicode_Check(key) ? PyUnicode_AsUTF8(key) : NULL;
        if (!k) PyErr_Clear();
        em_strbuf_printf(&b, "input %ld: %s read from a param group at every call\n",
                         first_input + PyLong_AsLong(PyTuple_GET_ITEM(x, 0)), k ? k : "?");
    }
    PyObject *guards = STATE_GUARDS(data);
    Py_ssize_t n = em_py_state_guards_count(guards);
    em_strbuf_printf(&b, "guards on Python state (globals, closure variables, attributes, items; module modes "
                         "and optimizer settings): %zd\n", n);
    for (Py_ssize_t i = 0; i < n; i++) {
        const char *w = PyUnicode_AsUTF8(em_py_state_guards_what(guards, i));
        if (!w) PyErr_Clear();
        em_strbuf_printf(&b, "  %s\n", w ? w : "?");
    }
    return em_strbuf_take(&b);
}

static void host_release(void *data) { Py_DECREF((PyObject *)data); }
static void *host_unlock(void) { return PyEval_SaveThread(); }
static void host_relock(void *token) { PyEval_RestoreThread(token); }
static void host_collect(void) { PyGC_Collect(); }

static const em_function_host python_host = {user_location, NULL,          host_state_holds,
                                             host_externals, host_describe,  host_release,
                                             host_unlock,    host_relock,    host_collect,
                                             host_state_miss};

/* ---- what a trace records besides ops (optimizers and modules call these) ---- */

/* What the trace on this thread reads from Python: the inputs it reads
 * from dicts at every call (as in the host data), and the recorder of
 * the state it reads and changes (ember._capture.Recorder). */
typedef struct {
    PyObject *externals, *recorder;
} trace_ctx;
static _Thread_local trace_ctx *tracing;

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
    if (tracing && em_trace_current()) {
        const char *name = PyUnicode_Check(key) ? PyUnicode_AsUTF8(key) : NULL; /* ("lr") */
        if (!name) PyErr_Clear();
        int idx = em_trace_add_external(em_trace_current(), t, name);
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
 * tuples, else by identity) traces anew. For ember's own code, which the
 * trace does not watch (module modes, optimizer settings). No-op outside
 * a trace. */
static PyObject *f_trace_guard_items(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *d, *keys;
    if (!PyArg_ParseTuple(args, "O!O:_trace_guard_items", &PyDict_Type, &d, &keys)) return NULL;
    if (!tracing) Py_RETURN_NONE;
    return PyObject_CallMethod(tracing->recorder, "guard_items", "OO", d, keys);
}

/* _trace_fail(why): the trace under way cannot be replayed (why says it,
 * with its line); the call goes on eagerly. No-op outside a trace. */
static PyObject *f_trace_fail(PyObject *self, PyObject *arg) {
    (void)self;
    const char *why = PyUnicode_AsUTF8(arg);
    if (!why) return NULL;
    if (em_trace_current()) em_trace_fail(em_trace_current(), "%s", why);
    Py_RETURN_NONE;
}

static PyObject *f_is_tracing(PyObject *self, PyObject *unused) {
    (void)self;
    (void)unused;
    return PyBool_FromLong(em_trace_active());
}

/* ---- a call ---- */

static int warn(const char *msg) {
    return msg ? PyErr_WarnEx(PyExc_UserWarning, msg, 1) : 0; /* 1: the line calling the function */
}

/* The result's structure with each tensor replaced by its index in outs[]:
 * NULL with ctx->why when it holds anything but tensors and None. */
typedef struct {
    em_tensor *outs[EM_FUNCTION_MAX_OUTPUTS];
    int n;
    char why[512];
} template_ctx;

/* Python values a result may hold beside tensors: constants of the
 * specialisation (a shape, a count, a value a value guard checks), which
 * its guards keep what the trace returned. */
static bool is_constant(PyObject *o) {
    return o == Py_None || PyBool_Check(o) || PyLong_CheckExact(o) || PyFloat_CheckExact(o) ||
           PyUnicode_CheckExact(o) || PyObject_TypeCheck(o, &em_py_Size) || PyObject_TypeCheck(o, &em_py_dtype_type);
}

static PyObject *template_leaf(PyObject *o, void *vctx) {
    template_ctx *t = vctx;
    if (is_constant(o)) return same(o);
    if (!em_py_is_tensor(o))
        snprintf(t->why, sizeof t->why, "it returns a %s; compiled functions can return tensors, None, "
                 "numbers, strings, sizes and dtypes, in any nesting of tuples, named tuples, lists and dicts",
                 Py_TYPE(o)->tp_name);
    else if (t->n == EM_FUNCTION_MAX_OUTPUTS)
        snprintf(t->why, sizeof t->why, "it returns more than %d tensors", EM_FUNCTION_MAX_OUTPUTS);
    if (t->why[0]) {
        PyErr_SetString(PyExc_TypeError, t->why); /* (stops the walk) */
        return NULL;
    }
    t->outs[t->n] = em_py_tensor_of(o);
    PyObject *i = PyLong_FromLong(t->n++); /* (an output's slot: a slice, which no constant is) */
    PyObject *slot = i ? PySlice_New(i, NULL, NULL) : NULL;
    Py_XDECREF(i);
    return slot;
}

/* A compiled call's result: the template filled with outs[], whose
 * references it takes. */
static PyObject *fill_leaf(PyObject *o, void *outs) {
    if (!PySlice_Check(o)) return same(o); /* (a constant) */
    em_tensor **slot = &((em_tensor **)outs)[PyLong_AsLong(((PySliceObject *)o)->start)], *t = *slot;
    *slot = NULL;
    return em_py_wrap(t);
}

/* The call's arguments with every tensor replaced by its proxy, walking the
 * objects in flattening order (k counts entries, containers included). */
typedef struct {
    const call_args *c;
    PyObject **proxies;
    int k;
} proxy_ctx;

static void proxy_enter(void *ctx) { ((proxy_ctx *)ctx)->k++; }
static PyObject *proxy_leaf(PyObject *o, void *vctx) {
    proxy_ctx *p = vctx;
    PyObject *proxy = p->proxies[p->k++];
    return same(proxy ? proxy : o);
}

/* Proxies in a result become the caller's objects again. */
static PyObject *unproxy_leaf(PyObject *o, void *vctx) {
    proxy_ctx *p = vctx;
    for (int i = 0; i < p->c->n; i++)
        if (p->proxies[i] == o) return same(p->c->objs[i]);
    return same(o);
}

static int proxy_call(PyObject *args, PyObject *kwargs, proxy_ctx *p, PyObject **pargs, PyObject **pkwargs) {
    Py_ssize_t np = PyTuple_GET_SIZE(args);
    *pargs = PyTuple_New(np);
    *pkwargs = kwargs ? PyDict_Copy(kwargs) : NULL;
    if (!*pargs || (kwargs && !*pkwargs)) return -1;
    for (int i = 0; i < p->c->n_top; i++) {
        PyObject *o = tree_map(p->c->top[i], proxy_leaf, proxy_enter, p);
        if (!o) return -1;
        if (i < np) {
            PyTuple_SET_ITEM(*pargs, i, o);
            continue;
        }
        int r = PyDict_SetItem(*pkwargs, p->c->keys[i], o);
        Py_DECREF(o);
        if (r < 0) return -1;
    }
    return 0;
}

/* A new ember._capture.Recorder, or NULL with an exception. */
static PyObject *new_recorder(void) {
    PyObject *mod = PyImport_ImportModule("ember._capture");
    PyObject *r = mod ? PyObject_CallMethod(mod, "Recorder", NULL) : NULL;
    Py_XDECREF(mod);
    return r;
}

/* Why the recorded trace cannot be replayed (a side effect, or the
 * recorder's failure), into why; "" when it can. True for a side effect:
 * the reads were recorded as well as ever, so the eager specialisation
 * keeps their guards (see trace_call). */
static bool recorded_why(PyObject *recorder, char *why, size_t n) {
    PyObject *effect = PyObject_GetAttrString(recorder, "effect");
    PyObject *failure = PyObject_GetAttrString(recorder, "failure");
    const char *e = effect && effect != Py_None ? PyUnicode_AsUTF8(effect) : NULL;
    const char *f = failure && failure != Py_None ? PyUnicode_AsUTF8(failure) : NULL;
    if (e)
        snprintf(why, n, "%s, which a compiled call would not repeat; calls with these guards run eagerly", e);
    else if (f)
        snprintf(why, n, "%s", f);
    Py_XDECREF(effect);
    Py_XDECREF(failure);
    PyErr_Clear();
    return e != NULL;
}

/* The recorder's guards as capture.c's table (a new reference), or NULL. */
static PyObject *state_guards(PyObject *recorder) {
    PyObject *mod = PyImport_ImportModule("ember._capture");
    PyObject *list = PyObject_GetAttrString(recorder, "guards");
    PyObject *absent = mod ? PyObject_GetAttrString(mod, "ABSENT") : NULL;
    PyObject *t = list && absent && PyList_Check(list) ? em_py_state_guards_new(list, absent) : NULL;
    Py_XDECREF(mod);
    Py_XDECREF(list);
    Py_XDECREF(absent);
    return t;
}

/* Runs the function on the driver's proxies while its trace records; the
 * call's result is that run's. */
static PyObject *trace_call(compiled_fn *cf, PyObject *args, PyObject *kwargs, const call_args *c,
                            em_call *call) {
    PyObject *proxies[MAX_ARGS] = {NULL}, *pargs = NULL, *pkwargs = NULL, *res = NULL, *out = NULL;
    trace_ctx ctx = {PyList_New(0), new_recorder()};
    proxy_ctx p = {c, proxies, 0};
    char why[1200] = "";
    for (int i = 0; i < c->n; i++)
        if (call->proxies[i]) {
            em_tensor_retain(call->proxies[i]);
            proxies[i] = em_py_wrap(call->proxies[i]);
        }
    em_py_capture cap;
    if (ctx.externals && ctx.recorder && proxy_call(args, kwargs, &p, &pargs, &pkwargs) == 0) {
        int watching = em_py_capture_begin(ctx.recorder, &cap);
        if (watching == 0)
            snprintf(why, sizeof why, "another trace function is installed (a debugger or a coverage tool), so "
                     "ember cannot see what the function reads from Python; calls with these guards run eagerly");
        if (watching >= 0) {
            tracing = &ctx;
            res = PyObject_Call(cf->fn, pargs, pkwargs);
            tracing = NULL;
        }
        if (watching > 0 && !em_py_capture_end(&cap) && !why[0])
            snprintf(why, sizeof why, "recording what it reads from Python failed");
    }
    if (!res) {
        em_function_trace_abort(cf->f, call);
        goto done;
    }
    bool effect = !why[0] && recorded_why(ctx.recorder, why, sizeof why);
    PyObject *fin = PyObject_CallMethod(ctx.recorder, "finish", NULL);
    Py_XDECREF(fin);
    PyErr_Clear();
    template_ctx t = {.n = 0};
    PyObject *template = tree_map(res, template_leaf, NULL, &t), *data = NULL, *guards = NULL;
    /* A trace with a side effect runs eagerly, but only while the state it
     * read is as it was: a function that caches something on its first
     * call (self.mask = ..., read back on later calls) is traced again
     * once the cache is filled, and compiles then. */
    if (template && (!why[0] || effect)) guards = state_guards(ctx.recorder);
    if (template && guards) data = Py_BuildValue("(NON)", template, ctx.externals, guards);
    else Py_XDECREF(template);
    if (!data && !t.why[0] && !why[0]) snprintf(t.why, sizeof t.why, "out of memory while recording the result");
    PyErr_Clear(); /* (why says it) */
    em_function_stats before;
    em_function_stats_get(cf->f, &before);
    const char *fail = why[0] ? why : data ? NULL : t.why;
    em_status st = em_function_trace_end(cf->f, call, t.outs, data && !why[0] ? t.n : 0, data, fail);
    if (st == EM_OK && cf->fullgraph) { /* (a specialisation that runs eagerly: the trace failed for good) */
        em_function_stats after;
        em_function_stats_get(cf->f, &after);
        em_spec_info s;
        if (after.specializations > before.specializations) {
            em_function_spec(cf->f, after.specializations - 1, &s);
            bool failed = s.reason && s.reason[0];
            char reason[1100];
            snprintf(reason, sizeof reason, "%s", failed ? s.reason : "");
            em_spec_info_clear(&s);
            if (failed) {
                graph_break(cf, reason);
                goto done;
            }
        }
    }
    out = st == EM_OK ? tree_map(res, unproxy_leaf, NULL, &p) : em_py_raise();
    if (out && warn(call->warning) < 0) Py_CLEAR(out);
done:
    Py_XDECREF(ctx.externals);
    Py_XDECREF(ctx.recorder);
    Py_XDECREF(res);
    Py_XDECREF(pargs);
    Py_XDECREF(pkwargs);
    for (int i = 0; i < c->n; i++) Py_XDECREF(proxies[i]);
    return out;
}

static PyObject *cf_call(PyObject *self, PyObject *args, PyObject *kwargs) {
    compiled_fn *cf = (compiled_fn *)self;
    call_args c; /* (large: on the stack, it costs nothing to set up) */
    em_call call;
    const char *bad = NULL;
    PyObject *bad_obj = NULL;
    int n = collect_args(cf, args, kwargs, &c, &bad, &bad_obj);
    if (n == -2) return NULL;
    if (n < 0) {
        char why[256];
        if (!bad_obj)
            snprintf(why, sizeof why, "it is called with more than %d arguments%s; pass the tensors in fewer "
                     "arguments, or let the function read them (a list of parameters, say) from state", MAX_ARGS,
                     strstr(bad, "counting") ? ", counting the items of lists, tuples and dicts" : "");
        else
            snprintf(why, sizeof why, "argument '%s' is a %s, which compiled functions do not support "
                                      "yet (tensors, Python numbers, strings and None are, in any "
                                      "nesting of tuples, lists and dicts with string keys)",
                     bad, Py_TYPE(bad_obj)->tp_name);
        em_function_eager(cf->f, why, &call);
    } else if (em_function_call(cf->f, c.a, n, &call) != EM_OK) {
        return em_py_raise();
    }
    if (call.kind == EM_CALL_TRACE) return trace_call(cf, args, kwargs, &c, &call);
    if (call.kind == EM_CALL_EAGER && cf->fullgraph && em_compile_enabled()) return graph_break(cf, call.reason);
    if (warn(call.warning) < 0) return NULL; /* (no warning comes with compiled results) */
    if (call.kind == EM_CALL_EAGER) return PyObject_Call(cf->fn, args, kwargs);
    PyObject *r = tree_map(TEMPLATE(call.data), fill_leaf, NULL, call.outs);
    for (int i = 0; i < call.n_out; i++) em_tensor_release(call.outs[i]); /* any not handed out */
    return r;
}

/* ---- the type ---- */

/* passes=[...]: the pipeline this function's graphs go through. */
static int set_passes(compiled_fn *cf, PyObject *passes) {
    PyObject *seq = PySequence_Fast(passes, "ember.compile: passes must be a list of pass names");
    if (!seq) return -1;
    const char *names[64];
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    int rc = n > 64 ? (PyErr_SetString(PyExc_ValueError, "ember.compile: at most 64 passes"), -1) : 0;
    for (Py_ssize_t i = 0; rc == 0 && i < n; i++)
        if (!(names[i] = PyUnicode_AsUTF8(PySequence_Fast_GET_ITEM(seq, i)))) rc = -1;
    if (rc == 0 && em_function_set_passes(cf->f, names, (int)n) != EM_OK) {
        PyErr_SetString(PyExc_ValueError, em_last_error()); /* (a wrong argument, as PyTorch says it) */
        rc = -1;
    }
    Py_DECREF(seq);
    return rc;
}

static PyObject *cf_new(PyTypeObject *type, PyObject *args, PyObject *kwargs) {
    static char *kw[] = {"fn", "cache_limit", "passes", "dynamic", "fullgraph", NULL};
    PyObject *fn, *passes = Py_None, *dynamic = Py_None;
    int limit = -1, fullgraph = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O|iOOp:CompiledFunction", kw, &fn, &limit, &passes, &dynamic,
                                     &fullgraph))
        return NULL;
    int dyn = dynamic == Py_None ? -1 : PyObject_IsTrue(dynamic);
    if (dyn == -1 && PyErr_Occurred()) return NULL;
    if (!PyCallable_Check(fn))
        return em_py_error(PyExc_TypeError, "ember.compile: expected a function, got %s", Py_TYPE(fn)->tp_name);
    PyObject *qn = PyObject_GetAttrString(fn, "__qualname__");
    if (!qn) {
        PyErr_Clear();
        qn = PyObject_GetAttrString(fn, "__name__");
    }
    const char *s = qn ? PyUnicode_AsUTF8(qn) : NULL;
    em_function *f = em_function_new(s ? s : "fn", limit, &python_host);
    Py_XDECREF(qn);
    PyErr_Clear();
    compiled_fn *cf = f ? (compiled_fn *)type->tp_alloc(type, 0) : NULL;
    if (!cf) {
        em_function_free(f);
        return PyErr_NoMemory();
    }
    cf->f = f;
    cf->fullgraph = fullgraph;
    em_function_set_dynamic(f, dyn);
    Py_INCREF(fn);
    cf->fn = fn;
    if (passes != Py_None && set_passes(cf, passes) < 0) {
        Py_DECREF(cf);
        return NULL;
    }
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
    em_function_free(cf->f);
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
    if (!obj || obj == Py_None) return same(self);
    return PyMethod_New(self, obj);
}

/* ---- the driver's explain data as Python objects ---- */

/* [{backend, guards, reason, ..., profile}]: each specialisation. */
static PyObject *cf_specializations(PyObject *self, PyObject *unused) {
    (void)unused;
    compiled_fn *cf = (compiled_fn *)self;
    em_function_stats st;
    em_function_stats_get(cf->f, &st);
    PyObject *list = PyList_New(0);
    for (int i = 0; list && i < st.specializations; i++) {
        em_spec_info s;
        em_function_spec(cf->f, i, &s);
#define T(x) ((x) ? (x) : "")
        PyObject *d = Py_BuildValue("{s:s,s:s,s:s,s:s,s:s,s:i,s:d,s:d,s:d,s:s,s:s,s:s,s:s,s:s,s:s,s:s,s:s,s:s,s:s,s:O,s:i}",
                                    "backend", s.backend,
                                    "dump_path", s.dump_path, "guards", T(s.guards), "reason", s.reason, "note",
                                    s.note, "captured", s.n_captured, "trace_ms", s.trace_ms, "passes_ms",
                                    s.passes_ms, "backend_ms", s.backend_ms, "kernels", T(s.kernels),
                                    "traced_ir", T(s.traced_ir), "state", T(s.state), "profile", T(s.profile),
                                    "passes", s.passes, "pass_report", s.pass_report, "backward",
                                    T(s.backward_graph), "backward_kernels", T(s.backward_kernels), "partition",
                                    s.partition ? s.partition : "", "backward_profile", T(s.backward_profile),
                                    "dynamic_sizes", s.dynamic_sizes ? Py_True : Py_False, "shares_code_with",
                                    s.shares_code_with);
#undef T
        em_spec_info_clear(&s);
        if (!d || PyList_Append(list, d) < 0) Py_CLEAR(list);
        Py_XDECREF(d);
    }
    return list;
}

/* _graph(i): the optimised IR of specialisation i. */
static PyObject *cf_graph(PyObject *self, PyObject *arg) {
    compiled_fn *cf = (compiled_fn *)self;
    long i = PyLong_AsLong(arg);
    if (i == -1 && PyErr_Occurred()) return NULL;
    em_spec_info s;
    em_function_spec(cf->f, (int)i, &s);
    PyObject *r = s.graph ? PyUnicode_FromString(s.graph)
                          : em_py_error(PyExc_IndexError, "no compiled specialisation %ld", i);
    em_spec_info_clear(&s);
    return r;
}

static PyObject *cf_stats(PyObject *self, PyObject *unused) {
    (void)unused;
    compiled_fn *cf = (compiled_fn *)self;
    em_function_stats s;
    em_function_stats_get(cf->f, &s);
    PyObject *reasons = PyDict_New();
    for (int i = 0; reasons && i < s.n_fallbacks; i++) {
        int64_t count;
        const char *reason = em_function_fallback(cf->f, i, &count);
        PyObject *n = PyLong_FromLongLong(count);
        if (!n || PyDict_SetItemString(reasons, reason, n) < 0) Py_CLEAR(reasons);
        Py_XDECREF(n);
    }
    if (!reasons) return NULL;
    /* hits: calls a compiled specialisation ran; misses: calls none accepted
     * (each then traced, or ran eagerly at the cache limit); recompiles:
     * traces after the first */
    return Py_BuildValue("{s:L,s:L,s:L,s:L,s:L,s:L,s:i,s:i,s:L,s:i,s:N,s:i,s:O,s:O,s:s}", "compiled_calls",
                         (long long)s.compiled_calls, "hits", (long long)s.compiled_calls, "misses",
                         (long long)s.misses, "recompiles", (long long)(s.traces > 0 ? s.traces - 1 : 0),
                         "eager_calls", (long long)s.eager_calls, "traces", (long long)s.traces,
                         "specializations", s.specializations, "cache_limit", s.cache_limit,
                         "value_guard_failures", (long long)s.value_guard_failures, "retried_traces",
                         s.retried_traces, "fallbacks", reasons, "code_objects", s.code_objects, "dynamic",
                         s.dynamic < 0 ? Py_None : s.dynamic ? Py_True : Py_False, "sizes_vary",
                         s.sizes_vary ? Py_True : Py_False, "varying", s.varying);
}

/* _time_guards(n, *args): nanoseconds per guard evaluation of this call
 * (argument collection, then the latest specialisation's guards over the
 * arguments, its captured tensors and the state it read), averaged over n
 * runs; for bench/bench_compile.py. */
static PyObject *cf_time_guards(PyObject *self, PyObject *args) {
    compiled_fn *cf = (compiled_fn *)self;
    em_function_stats s;
    em_function_stats_get(cf->f, &s);
    long n = PyTuple_GET_SIZE(args) ? PyLong_AsLong(PyTuple_GET_ITEM(args, 0)) : 0;
    if (n <= 0 || !s.specializations)
        return PyErr_Occurred() ? NULL : em_py_error(PyExc_ValueError, "_time_guards(n, *args): n > 0 and a "
                                                     "specialisation needed");
    PyObject *call = PyTuple_GetSlice(args, 1, PyTuple_GET_SIZE(args));
    if (!call) return NULL;
    call_args c;
    const char *bad;
    PyObject *bad_obj;
    int ok = 1;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (long i = 0; i < n && ok == 1; i++) {
        int k = collect_args(cf, call, NULL, &c, &bad, &bad_obj);
        ok = k < 0 ? 0 : em_function_check(cf->f, s.specializations - 1, c.a, k);
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    Py_DECREF(call);
    if (ok != 1)
        return PyErr_Occurred() ? NULL : em_py_error(PyExc_ValueError, "_time_guards: the call fails the guards");
    double ns = (double)(t1.tv_sec - t0.tv_sec) * 1e9 + (double)(t1.tv_nsec - t0.tv_nsec);
    return PyFloat_FromDouble(ns / (double)n);
}

/* {event, specialization, reason} of the latest call */
static PyObject *cf_last_call(PyObject *self, PyObject *unused) {
    (void)unused;
    em_last_call lc;
    em_function_last_call(((compiled_fn *)self)->f, &lc);
    if (!lc.event) Py_RETURN_NONE;
    PyObject *spec = lc.specialization >= 0 ? PyLong_FromLong(lc.specialization) : same(Py_None);
    return Py_BuildValue("{s:s,s:N,s:s}", "event", lc.event, "specialization", spec, "reason", lc.reason);
}

static PyObject *cf_reset(PyObject *self, PyObject *unused) {
    (void)unused;
    em_function_reset(((compiled_fn *)self)->f);
    Py_RETURN_NONE;
}

/* _export_next(path, external, tensors, names, runtime_dir, link_flags):
 * the next traced call exports the function ahead of time
 * (em_function_export_next); ember.aot.compile drives it. */
static PyObject *cf_export_next(PyObject *self, PyObject *args) {
    const char *path, *runtime_dir, *flags;
    int external;
    PyObject *tensors, *names;
    if (!PyArg_ParseTuple(args, "spO!O!ss:_export_next", &path, &external, &PyList_Type, &tensors, &PyList_Type,
                          &names, &runtime_dir, &flags))
        return NULL;
    Py_ssize_t n = PyList_GET_SIZE(tensors);
    if (PyList_GET_SIZE(names) != n) return em_py_error(PyExc_ValueError, "_export_next: one name per tensor");
    em_tensor **named = PyMem_Calloc((size_t)n + 1, sizeof *named);
    const char **nm = PyMem_Calloc((size_t)n + 1, sizeof *nm);
    PyObject *r = named && nm ? NULL : PyErr_NoMemory();
    for (Py_ssize_t i = 0; !r && i < n; i++) {
        PyObject *t = PyList_GET_ITEM(tensors, i);
        if (!em_py_is_tensor(t)) {
            r = em_py_error(PyExc_TypeError, "_export_next: tensors must be ember tensors");
            break;
        }
        named[i] = em_py_tensor_of(t);
        if (!(nm[i] = PyUnicode_AsUTF8(PyList_GET_ITEM(names, i)))) r = Py_None; /* (error set) */
    }
    if (!r) {
        em_aot_opts o = {path, external != 0, named, nm, (int)n, runtime_dir, NULL, flags};
        r = em_function_export_next(((compiled_fn *)self)->f, &o) == EM_OK ? Py_None : em_py_raise();
        Py_XINCREF(r);
    } else {
        r = NULL;
    }
    PyMem_Free(named);
    PyMem_Free(nm);
    return r;
}

/* _export_status(): None once the export was written, else raises why not. */
static PyObject *cf_export_status(PyObject *self, PyObject *unused) {
    (void)unused;
    if (em_function_export_status(((compiled_fn *)self)->f) != EM_OK) return em_py_raise();
    Py_RETURN_NONE;
}

static PyMethodDef cf_methods[] = {
    {"_export_next", cf_export_next, METH_VARARGS, "export the next traced call ahead of time"},
    {"_export_status", cf_export_status, METH_NOARGS, "whether the export was written"},
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

/* ---- module functions ---- */

/* The names of the passes every graph goes through, in order. */
static PyObject *f_pass_pipeline(PyObject *self, PyObject *unused) {
    (void)self;
    (void)unused;
    PyObject *list = PyList_New(0);
    for (const char *const *p = em_compile_passes(); list && *p; p++) {
        PyObject *name = PyUnicode_FromString(*p);
        if (!name || PyList_Append(list, name) < 0) Py_CLEAR(list);
        Py_XDECREF(name);
    }
    return list ? PyList_AsTuple(list) : NULL;
}

static PyObject *f_set_profiling(PyObject *self, PyObject *on) {
    (void)self;
    int v = PyObject_IsTrue(on);
    if (v < 0) return NULL;
    em_compile_set_profiling(v);
    Py_RETURN_NONE;
}

static PyObject *f_profiling(PyObject *self, PyObject *unused) {
    (void)self;
    (void)unused;
    return PyBool_FromLong(em_compile_profiling());
}

static PyObject *f_set_compile_enabled(PyObject *self, PyObject *arg) {
    (void)self;
    int b = PyObject_IsTrue(arg);
    if (b < 0) return NULL;
    em_compile_set_enabled(b);
    Py_RETURN_NONE;
}

static PyObject *f_compile_enabled(PyObject *self, PyObject *unused) {
    (void)self;
    (void)unused;
    return PyBool_FromLong(em_compile_enabled());
}

static PyObject *f_set_package_dir(PyObject *self, PyObject *arg) {
    (void)self;
    const char *s = PyUnicode_AsUTF8(arg);
    char *copy = s ? strdup(s) : NULL;
    if (!copy) return s ? PyErr_NoMemory() : NULL;
    free(package_dir);
    package_dir = copy;
    em_py_capture_set_own_dir(copy);
    Py_RETURN_NONE;
}

static PyMethodDef compile_methods[] = {
    {"_pass_pipeline", f_pass_pipeline, METH_NOARGS, "the passes every graph goes through"},
    {"_set_profiling", f_set_profiling, METH_O, "_set_profiling(on): time every node of compiled runs"},
    {"_profiling", f_profiling, METH_NOARGS, "whether compiled runs time their nodes"},
    {"_set_compile_enabled", f_set_compile_enabled, METH_O, "compile (True) or run every compiled function eagerly"},
    {"_compile_enabled", f_compile_enabled, METH_NOARGS, "whether compiled functions compile"},
    {"_set_package_dir", f_set_package_dir, METH_O, "frames under this directory are ember's own"},
    {"_trace_scalar_input", f_trace_scalar_input, METH_VARARGS,
     "_trace_scalar_input(d, key): d[key] as a 0-d float64 tensor a compiled graph reads anew at every call"},
    {"_trace_guard_items", f_trace_guard_items, METH_VARARGS,
     "_trace_guard_items(d, keys): a trace treats these items of d as constants, guarded by value"},
    {"_trace_fail", f_trace_fail, METH_O, "_trace_fail(why): the trace under way runs eagerly, for why"},
    {"_is_tracing", f_is_tracing, METH_NOARGS, "whether a compiled function is being traced on this thread"},
    {NULL, NULL, 0, NULL},
};

int em_py_compile_init(PyObject *module) {
    if (PyType_Ready(&em_py_CompiledFunction) < 0) return -1;
    Py_INCREF(&em_py_CompiledFunction);
    if (PyModule_AddObject(module, "CompiledFunction", (PyObject *)&em_py_CompiledFunction) < 0) return -1;
    return PyModule_AddFunctions(module, compile_methods);
}
