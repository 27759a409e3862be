/*
 * capture.c - what a compiled function's trace reads from Python state and
 * does to it, observed opcode by opcode, and the guards that check, at
 * every later call, that what it read is still what it was.
 *
 * While ember.compile traces a call (the function runs eagerly once), a C
 * trace function (PyEval_SetTrace, this thread only) asks CPython for an
 * event before each instruction. At the instructions of frames outside
 * ember's own package that read or change state that outlives the call it
 * reads the operands off the frame's value stack (the one use of CPython's
 * internal frame layout, 3.11 and 3.12) and hands them to the recorder,
 * ember/_capture.py, which decides what to guard (a global, a closure
 * cell, an attribute, a dict or list item) and what is a side effect a
 * replay would skip (which makes the call run eagerly). In every frame,
 * ember's included, it tells the recorder the objects the call makes (a
 * call's result, a list, a function, a cell), which are the call's own.
 *
 * The guards (kinds in _capture.py's order) become a C table
 * (em_py_state_guards) that a call checks before it runs compiled code:
 * a dict's items are skipped at once while its version tag is the one the
 * check last saw hold, so a guard costs a few nanoseconds on the calls
 * where nothing changed.
 */
#include "ember_py.h" /* first: Python.h sets the feature macros */

#include <string.h>

/* CPython's frame layout, for the value stack and the cells (as Dynamo). */
#define Py_BUILD_CORE 1
#include <internal/pycore_code.h>
#include <internal/pycore_frame.h>
#undef Py_BUILD_CORE

#include "capture.h"

#if PY_VERSION_HEX < 0x030B0000 || PY_VERSION_HEX >= 0x030D0000
#error "capture.c reads CPython 3.11 and 3.12 frames; another version needs its layout here"
#endif

/* ---- the opcodes (numbers from the opcode module: they differ by version) ---- */

enum { OP_LOAD_GLOBAL, OP_LOAD_ATTR, OP_LOAD_METHOD, OP_LOAD_DEREF, OP_LOAD_CLASSDEREF, OP_BINARY_SUBSCR,
       OP_STORE_ATTR, OP_DELETE_ATTR, OP_STORE_GLOBAL, OP_DELETE_GLOBAL, OP_STORE_DEREF, OP_DELETE_DEREF,
       OP_STORE_SUBSCR, OP_DELETE_SUBSCR, OP_GET_ITER, OP_CONTAINS_OP, OP_UNPACK_SEQUENCE, OP_UNPACK_EX,
       OP_COMPARE_OP, OP_CALL, OP_BINARY_SLICE, OP_STORE_SLICE, OP_EXTENDED_ARG, OP_LOAD_CLOSURE,
       /* instructions whose result is an object the call makes (seen on top at the frame's next one) */
       OP_MAKE_FUNCTION, OP_CALL_FUNCTION_EX, OP_BUILD_LIST, OP_BUILD_MAP, OP_BUILD_SET, OP_BUILD_CONST_KEY_MAP,
       OP_BINARY_OP, N_WATCHED };
static const char *const watched_names[N_WATCHED] = {
    "LOAD_GLOBAL", "LOAD_ATTR", "LOAD_METHOD", "LOAD_DEREF", "LOAD_CLASSDEREF", "BINARY_SUBSCR", "STORE_ATTR",
    "DELETE_ATTR", "STORE_GLOBAL", "DELETE_GLOBAL", "STORE_DEREF", "DELETE_DEREF", "STORE_SUBSCR",
    "DELETE_SUBSCR", "GET_ITER", "CONTAINS_OP", "UNPACK_SEQUENCE", "UNPACK_EX", "COMPARE_OP", "CALL",
    "BINARY_SLICE", "STORE_SLICE", "EXTENDED_ARG",
    "LOAD_CLOSURE", "MAKE_FUNCTION",
    "CALL_FUNCTION_EX",
    "BUILD_LIST", "BUILD_MAP", "BUILD_SET", "BUILD_CONST_KEY_MAP", "BINARY_OP"};
static int watched_of[256]; /* opcode -> OP_* or -1 */
static int caches_of[256];  /* inline cache units after each opcode */
static bool opcodes_ready;

static int load_opcodes(void) {
    PyObject *mod = PyImport_ImportModule("opcode");
    PyObject *map = mod ? PyObject_GetAttrString(mod, "opmap") : NULL;
    PyObject *caches = mod ? PyObject_GetAttrString(mod, "_inline_cache_entries") : NULL;
    int rc = map && caches ? 0 : -1;
    for (int i = 0; i < 256; i++) {
        watched_of[i] = -1;
        PyObject *c = caches && PySequence_Check(caches) && i < PySequence_Size(caches) ? PySequence_GetItem(caches, i)
                                                                                         : NULL;
        caches_of[i] = c ? (int)PyLong_AsLong(c) : 0;
        Py_XDECREF(c);
    }
    for (int k = 0; rc == 0 && k < N_WATCHED; k++) {
        PyObject *v = PyDict_GetItemString(map, watched_names[k]); /* borrowed; absent in some versions */
        if (v) watched_of[PyLong_AsLong(v) & 255] = k;
    }
    Py_XDECREF(mod);
    Py_XDECREF(map);
    Py_XDECREF(caches);
    PyErr_Clear();
    opcodes_ready = rc == 0;
    return rc;
}

/* ---- code objects, decoded once ---- */

/* Per code unit: the watched opcode starting there (or -1) and its whole
 * argument (EXTENDED_ARG folded in); skip: ember's own code. */
typedef struct {
    bool skip;
    Py_ssize_t n;
    int8_t *op;
    int32_t *arg;
} decoded;

static PyObject *decoded_cache; /* code -> capsule(decoded) */
static char *own_dir;           /* frames in here are ember's own */

static void decoded_free(PyObject *cap) {
    decoded *d = PyCapsule_GetPointer(cap, "ember.decoded");
    if (!d) return;
    PyMem_Free(d->op);
    PyMem_Free(d->arg);
    PyMem_Free(d);
}

static decoded *decode(PyCodeObject *co) {
    PyObject *cap = PyDict_GetItemWithError(decoded_cache, (PyObject *)co);
    if (cap) return PyCapsule_GetPointer(cap, "ember.decoded");
    if (PyErr_Occurred()) return NULL;
    decoded *d = PyMem_Calloc(1, sizeof *d);
    PyObject *bytes = PyCode_GetCode(co); /* (deoptimised: plain opcodes, zeroed caches) */
    if (!d || !bytes) goto fail;
    const char *file = PyUnicode_AsUTF8(co->co_filename);
    d->skip = !file || (own_dir && strncmp(file, own_dir, strlen(own_dir)) == 0);
    PyErr_Clear();
    const unsigned char *c = (const unsigned char *)PyBytes_AS_STRING(bytes);
    d->n = PyBytes_GET_SIZE(bytes) / 2;
    d->op = PyMem_Malloc((size_t)(d->n ? d->n : 1));
    d->arg = PyMem_Malloc((size_t)(d->n ? d->n : 1) * sizeof *d->arg);
    if (!d->op || !d->arg) goto fail;
    memset(d->op, -1, (size_t)d->n);
    int32_t ext = 0;
    for (Py_ssize_t i = 0; i < d->n;) {
        int op = c[2 * i];
        int32_t a = (int32_t)c[2 * i + 1] | (ext << 8);
        int w = watched_of[op];
        if (w == OP_EXTENDED_ARG) {
            ext = a;
            i++;
            continue;
        }
        ext = 0;
        d->op[i] = (int8_t)w;
        d->arg[i] = a;
        i += 1 + caches_of[op];
    }
    Py_DECREF(bytes);
    cap = PyCapsule_New(d, "ember.decoded", decoded_free);
    if (!cap || PyDict_SetItem(decoded_cache, (PyObject *)co, cap) < 0) {
        Py_XDECREF(cap);
        return NULL;
    }
    Py_DECREF(cap);
    return d;
fail:
    Py_XDECREF(bytes);
    if (d) {
        PyMem_Free(d->op);
        PyMem_Free(d->arg);
        PyMem_Free(d);
    }
    if (!PyErr_Occurred()) PyErr_NoMemory();
    return NULL;
}

/* ---- the frame's internals ---- */

static _PyInterpreterFrame *iframe(PyFrameObject *f) { return f->f_frame; }

/* The value i places below the top of the stack (0: TOS), or NULL. */
static PyObject *peek(PyFrameObject *f, int i) {
    _PyInterpreterFrame *x = iframe(f);
    int depth = x->stacktop - x->f_code->co_nlocalsplus;
    return i < depth ? x->localsplus[x->stacktop - 1 - i] : NULL;
}

static PyObject *frame_function(PyFrameObject *f) {
#if PY_VERSION_HEX >= 0x030C0000
    return iframe(f)->f_funcobj;
#else
    return (PyObject *)iframe(f)->f_func;
#endif
}

/* ---- the recorder ---- */

typedef em_py_recording recording;
static _Thread_local recording *active;

/* The frames whose last instruction makes an object (a call, a list, a
 * function), to be read off the top of their stack at their next one: a
 * frame's next instruction may come after a callee's many. */
static int pending_find(recording *r, PyFrameObject *f) {
    for (int i = r->n_pending - 1; i >= 0; i--)
        if (r->pending[i].frame == f) return i;
    return -1;
}

static void pending_drop(recording *r, PyFrameObject *f) {
    int i = pending_find(r, f);
    if (i >= 0) r->pending[i] = r->pending[--r->n_pending];
}

static void pending_set(recording *r, PyFrameObject *f, int op) {
    int i = pending_find(r, f);
    if (i < 0 && r->n_pending == EM_PY_MAX_PENDING) { /* (deeper than any real call stack: stop knowing) */
        r->failed = true;
        return;
    }
    if (i < 0) i = r->n_pending++;
    r->pending[i].frame = f;
    r->pending[i].op = op;
}

/* Is o worth telling the recorder the call made it: a mutable object, not
 * a tensor (the tracer's) or a value of an immutable type? */
static bool could_be_state(PyObject *o) {
    return !(o == Py_None || PyLong_CheckExact(o) || PyFloat_CheckExact(o) || PyUnicode_CheckExact(o) ||
             PyTuple_CheckExact(o) || PyBool_Check(o) || PyBytes_CheckExact(o) || em_py_is_tensor(o));
}

static PyObject *where(PyFrameObject *f) {
    PyCodeObject *co = PyFrame_GetCode(f);
    PyObject *w = PyUnicode_FromFormat("%U:%d", co->co_filename, PyFrame_GetLineNumber(f));
    Py_DECREF(co);
    return w;
}

/* rec.<method>(*args, where): a failure stops recording (the trace then
 * fails: what was read can no longer be known). */
static void tell(recording *r, PyFrameObject *f, const char *method, const char *fmt, ...) {
    if (r->failed) return;
    va_list ap;
    va_start(ap, fmt);
    PyObject *args = Py_VaBuildValue(fmt, ap);
    va_end(ap);
    PyObject *w = where(f), *full = NULL, *res = NULL;
    if (args && w) {
        PyObject *tail = PyTuple_Pack(1, w);
        full = tail ? PySequence_Concat(args, tail) : NULL;
        Py_XDECREF(tail);
    }
    PyObject *fn = full ? PyObject_GetAttrString(r->rec, method) : NULL;
    if (fn) res = PyObject_Call(fn, full, NULL);
    if (!res) { /* (the recorder's own failure: said as the trace's) */
        r->failed = true;
        PyObject *type, *value, *tb;
        PyErr_Fetch(&type, &value, &tb);
        PyObject *res2 = PyObject_CallMethod(r->rec, "broken", "sO", method, value ? value : Py_None);
        Py_XDECREF(res2);
        Py_XDECREF(type);
        Py_XDECREF(value);
        Py_XDECREF(tb);
        PyErr_Clear();
    }
    Py_XDECREF(res);
    Py_XDECREF(fn);
    Py_XDECREF(full);
    Py_XDECREF(args);
    Py_XDECREF(w);
}

static PyObject *name_at(PyCodeObject *co, int i) {
    return i >= 0 && i < PyTuple_GET_SIZE(co->co_names) ? PyTuple_GET_ITEM(co->co_names, i) : Py_None;
}

static PyObject *local_name(PyCodeObject *co, int i) {
    return i >= 0 && i < PyTuple_GET_SIZE(co->co_localsplusnames) ? PyTuple_GET_ITEM(co->co_localsplusnames, i)
                                                                   : Py_None;
}

/* LOAD_ATTR's name index (3.12: the low bit of its argument says "a method"). */
static int attr_arg_of(int a) {
#if PY_VERSION_HEX >= 0x030C0000
    return a >> 1;
#else
    return a;
#endif
}

/* A binary operation's or comparison's operands (the top two): an
 * operand that can hold state has its contents read whole. */
static void tell_operands(recording *r, PyFrameObject *f) {
    for (int k = 0; k < 2; k++) {
        PyObject *x = peek(f, k);
        if (x && could_be_state(x)) tell(r, f, "iterate", "(O)", x);
    }
}

/* f(*args, **kwargs), flags & 1 when kwargs is there: stack [NULL, f, args,
 * kwargs?]. The call is told as CALL's are, with the positional arguments
 * and the keyword values; both containers are read whole. */
static void tell_call_ex(recording *r, PyFrameObject *f, int flags) {
    PyObject *kwargs = flags & 1 ? peek(f, 0) : NULL, *args = peek(f, flags & 1), *fn = peek(f, 1 + (flags & 1));
    if (!args || !fn) return;
    tell(r, f, "iterate", "(O)", args);
    if (kwargs) tell(r, f, "iterate", "(O)", kwargs);
    /* (only a list or tuple is copied: another iterable would be used up) */
    PyObject *all = PyList_Check(args) || PyTuple_Check(args) ? PySequence_List(args) : PyList_New(0);
    PyObject *values = kwargs && PyDict_Check(kwargs) ? PyDict_Values(kwargs) : NULL;
    if (all && values) {
        Py_ssize_t n = PyList_GET_SIZE(all);
        if (PyList_SetSlice(all, n, n, values) < 0) Py_CLEAR(all);
    }
    PyObject *tuple = all ? PyList_AsTuple(all) : NULL;
    if (tuple) tell(r, f, "call", "(OOO)", fn, Py_None, tuple);
    Py_XDECREF(tuple);
    Py_XDECREF(values);
    Py_XDECREF(all);
    PyErr_Clear();
}

/* The instruction about to run in f. */
static void on_instruction(recording *r, PyFrameObject *f) {
    PyCodeObject *co = PyFrame_GetCode(f);
    decoded *d = decode(co);
    if (!d) {
        PyErr_Clear();
        r->failed = true;
        Py_DECREF(co);
        return;
    }
    int pi = pending_find(r, f);
    if (pi >= 0) { /* the object the frame's previous instruction made */
        PyObject *made = peek(f, 0);
        if (made && could_be_state(made)) tell(r, f, "made", "(O)", made);
        pending_drop(r, f);
    }
    Py_ssize_t i = PyFrame_GetLasti(f) / 2;
    int op = i >= 0 && i < d->n ? d->op[i] : -1, a = op >= 0 ? d->arg[i] : 0;
    if (d->skip && (op == OP_LOAD_ATTR || op == OP_LOAD_METHOD)) { /* ember's code reading a module's setting */
        PyObject *obj = peek(f, 0);
        if (obj && !em_py_is_tensor(obj))
            tell(r, f, "load_own_attr", "(OO)", obj, name_at(co, op == OP_LOAD_ATTR ? attr_arg_of(a) : a));
        op = -1;
    }
    if (d->skip && op != OP_CALL && op < OP_LOAD_CLOSURE) /* ember's own code: otherwise only what it makes */
        op = -1;
    PyObject *x, *y;
    const int attr_arg = attr_arg_of(a);
    switch (op) {
    case OP_LOAD_GLOBAL:
        tell(r, f, "load_global", "(NNO)", PyFrame_GetGlobals(f), PyFrame_GetBuiltins(f), name_at(co, a >> 1));
        break;
    case OP_LOAD_ATTR:
    case OP_LOAD_METHOD:
        if ((x = peek(f, 0))) tell(r, f, "load_attr", "(OO)", x, name_at(co, op == OP_LOAD_ATTR ? attr_arg : a));
        break;
    case OP_LOAD_DEREF:
    case OP_LOAD_CLASSDEREF:
    case OP_STORE_DEREF:
    case OP_DELETE_DEREF: {
        _PyInterpreterFrame *fr = iframe(f);
        PyObject *cell = a < co->co_nlocalsplus ? fr->localsplus[a] : NULL;
        bool free_var = a < co->co_nlocalsplus && (_PyLocals_GetKind(co->co_localspluskinds, a) & CO_FAST_FREE);
        PyObject *fn = frame_function(f);
        if (cell && PyCell_Check(cell) && free_var)
            tell(r, f, op == OP_LOAD_DEREF || op == OP_LOAD_CLASSDEREF ? "load_deref" : "store_deref", "(OOO)",
                 cell, fn ? fn : Py_None, local_name(co, a));
        break;
    }
    case OP_LOAD_CLOSURE: { /* a cell of this frame's own, made since the call began, given to a function */
        PyObject *cell = a < co->co_nlocalsplus ? iframe(f)->localsplus[a] : NULL;
        if (cell && PyCell_Check(cell) && (_PyLocals_GetKind(co->co_localspluskinds, a) & CO_FAST_CELL))
            tell(r, f, "made", "(O)", cell);
        break;
    }
    case OP_BINARY_SUBSCR:
        if ((x = peek(f, 1)) && (y = peek(f, 0))) tell(r, f, "subscr", "(OO)", x, y);
        break;
    case OP_GET_ITER:
    case OP_CONTAINS_OP:
    case OP_UNPACK_SEQUENCE: /* (a, b = items) */
    case OP_UNPACK_EX:
        if ((x = peek(f, 0))) tell(r, f, "iterate", "(O)", x);
        break;
    case OP_COMPARE_OP: /* (items == other: both read whole) */
        tell_operands(r, f);
        break;
    case OP_BINARY_SLICE: /* (3.12: container[start:end], the container under the two bounds) */
        if ((x = peek(f, 2))) tell(r, f, "iterate", "(O)", x);
        break;
    case OP_STORE_SLICE: /* (3.12: container[start:end] = value) */
        if ((x = peek(f, 2))) tell(r, f, "store_subscr", "(O)", x);
        break;
    case OP_STORE_ATTR:
    case OP_DELETE_ATTR:
        if ((x = peek(f, 0))) tell(r, f, "store_attr", "(OO)", x, name_at(co, a));
        break;
    case OP_STORE_SUBSCR:
    case OP_DELETE_SUBSCR:
        if ((x = peek(f, 1))) tell(r, f, "store_subscr", "(O)", x);
        break;
    case OP_STORE_GLOBAL:
    case OP_DELETE_GLOBAL:
        tell(r, f, "store_global", "(O)", name_at(co, a));
        break;
    case OP_CALL: { /* stack: [NULL or method, callable or self, args[a]] */
        if (d->skip) { /* (ember's own: its result only, a Function's ctx say) */
            pending_set(r, f, op);
            break;
        }
        PyObject *m = peek(f, a + 1), *c = peek(f, a);
        PyObject *args = PyTuple_New(a);
        for (int k = 0; args && k < a; k++) {
            PyObject *v = peek(f, a - 1 - k);
            Py_XINCREF(v ? v : Py_None);
            PyTuple_SET_ITEM(args, k, v ? v : Py_None);
        }
        if (args && c) tell(r, f, "call", "(OOO)", m ? m : c, m ? c : Py_None, args);
        Py_XDECREF(args);
        PyErr_Clear();
        pending_set(r, f, op);
        break;
    }
    case OP_CALL_FUNCTION_EX:
        if (!d->skip) tell_call_ex(r, f, a);
        pending_set(r, f, op);
        break;
    case OP_BINARY_OP: /* (items + more: read whole; the result is the call's own) */
        if (!d->skip) tell_operands(r, f);
        pending_set(r, f, op);
        break;
    case OP_MAKE_FUNCTION:
    case OP_BUILD_LIST:
    case OP_BUILD_MAP:
    case OP_BUILD_SET:
    case OP_BUILD_CONST_KEY_MAP:
        pending_set(r, f, op);
        break;
    default:
        break;
    }
    Py_DECREF(co);
}

static int trace_fn(PyObject *obj, PyFrameObject *f, int what, PyObject *arg) {
    (void)obj;
    (void)arg;
    recording *r = active;
    if (!r || r->failed) return 0;
    if (what == PyTrace_CALL) { /* a new frame: events per opcode, unless it is ember's */
        PyCodeObject *co = PyFrame_GetCode(f);
        decoded *d = decode(co);
        Py_DECREF(co);
        if (!d) {
            PyErr_Clear();
            r->failed = true;
            return 0;
        }
        if (PyObject_SetAttrString((PyObject *)f, "f_trace_opcodes", Py_True) < 0 ||
            PyObject_SetAttrString((PyObject *)f, "f_trace_lines", Py_False) < 0) {
            PyErr_Clear();
            r->failed = true;
        }
    } else if (what == PyTrace_OPCODE) {
        on_instruction(r, f);
    } else if (what == PyTrace_RETURN || what == PyTrace_EXCEPTION) {
        pending_drop(r, f); /* (an instruction that raised made nothing) */
    }
    return 0;
}

int em_py_capture_begin(PyObject *recorder, em_py_capture *c) {
    c->installed = false;
    if (!opcodes_ready && load_opcodes() < 0) return -1;
    if (!decoded_cache && !(decoded_cache = PyDict_New())) return -1;
    PyThreadState *ts = PyThreadState_Get();
    if (ts->c_tracefunc || active) /* (a debugger, coverage, or a trace already under way) */
        return 0;
    memset(&c->rec, 0, sizeof c->rec);
    c->rec.rec = recorder;
    active = &c->rec;
    PyEval_SetTrace(trace_fn, NULL);
    c->installed = true;
    return 1;
}

bool em_py_capture_end(em_py_capture *c) {
    if (!c->installed) return false;
    PyEval_SetTrace(NULL, NULL);
    active = NULL;
    c->installed = false;
    return !c->rec.failed;
}

void em_py_capture_set_own_dir(const char *dir) {
    free(own_dir);
    own_dir = dir ? strdup(dir) : NULL;
    if (decoded_cache) PyDict_Clear(decoded_cache);
}

/* ---- guards ---- */

/* The kinds, as ember/_capture.py numbers them. */
enum { GK_DICT, GK_CELL, GK_LIST_ITEM, GK_LIST, GK_DICT_ALL, GK_TYPE, GK_MEMBER, GK_SET, GK_KINDS };

typedef struct {
    int kind;
    PyObject *container, *key, *value, *what; /* strong */
    uint64_t version;                         /* GK_DICT(_ALL): the tag the items last held under */
} guard;

struct em_py_state_guards {
    guard *g;
    Py_ssize_t n;
};

static PyObject *absent; /* _capture.ABSENT */

static void guards_free(PyObject *cap) {
    em_py_state_guards *t = PyCapsule_GetPointer(cap, "ember.state_guards");
    if (!t) return;
    for (Py_ssize_t i = 0; i < t->n; i++) {
        Py_XDECREF(t->g[i].container);
        Py_XDECREF(t->g[i].key);
        Py_XDECREF(t->g[i].value);
        Py_XDECREF(t->g[i].what);
    }
    PyMem_Free(t->g);
    PyMem_Free(t);
}

static uint64_t dict_version(PyObject *d) {
#if defined(__GNUC__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations" /* (3.12 deprecates the tag; it is there until 3.14) */
#endif
    return ((PyDictObject *)d)->ma_version_tag;
#if defined(__GNUC__)
#pragma GCC diagnostic pop
#endif
}

PyObject *em_py_state_guards_new(PyObject *list, PyObject *absent_marker) {
    absent = absent_marker;
    Py_ssize_t n = PyList_GET_SIZE(list);
    em_py_state_guards *t = PyMem_Calloc(1, sizeof *t);
    if (t) t->g = PyMem_Calloc((size_t)(n ? n : 1), sizeof *t->g);
    if (!t || !t->g) {
        PyMem_Free(t);
        return PyErr_NoMemory();
    }
    PyObject *cap = PyCapsule_New(t, "ember.state_guards", guards_free);
    if (!cap) {
        PyMem_Free(t->g);
        PyMem_Free(t);
        return NULL;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *e = PyList_GET_ITEM(list, i); /* (kind, container, key, value, what) */
        int kind = PyTuple_Check(e) && PyTuple_GET_SIZE(e) == 5 ? (int)PyLong_AsLong(PyTuple_GET_ITEM(e, 0)) : -1;
        if (kind < 0 || kind >= GK_KINDS) {
            PyErr_Clear();
            Py_DECREF(cap);
            return em_py_error(PyExc_RuntimeError, "internal error: a malformed state guard");
        }
        guard *g = &t->g[t->n++];
        g->kind = kind;
        g->container = Py_NewRef(PyTuple_GET_ITEM(e, 1));
        g->key = Py_NewRef(PyTuple_GET_ITEM(e, 2));
        g->value = Py_NewRef(PyTuple_GET_ITEM(e, 3));
        g->what = Py_NewRef(PyTuple_GET_ITEM(e, 4));
        /* No tag yet: the first check compares the values. (The dict's tag
         * now is no proof that the guard holds: a trace that stored into
         * the item after reading it, self.mask = ..., left the dict at a
         * new tag with a value the guard does not accept.) */
        g->version = UINT64_MAX;
    }
    return cap;
}

/* now is the value was stands for: the same object, or an equal number,
 * string, bytes or tuple of them (values a graph bakes in by value). */
static int same_value(PyObject *now, PyObject *was) {
    if (now == was) return 1;
    if (!now || Py_TYPE(now) != Py_TYPE(was)) return 0;
    if (!(PyLong_CheckExact(was) || PyFloat_CheckExact(was) || PyUnicode_CheckExact(was) ||
          PyBytes_CheckExact(was) || PyTuple_CheckExact(was)))
        return 0;
    return PyObject_RichCompareBool(now, was, Py_EQ);
}

static int guard_holds(guard *g) {
    switch (g->kind) {
    case GK_DICT: {
        uint64_t v = dict_version(g->container);
        if (v == g->version) return 1; /* (unchanged since it last held) */
        PyObject *now = PyDict_GetItemWithError(g->container, g->key);
        if (!now && PyErr_Occurred()) return -1;
        int ok = same_value(now ? now : absent, g->value);
        if (ok > 0) g->version = v;
        return ok;
    }
    case GK_DICT_ALL: {
        uint64_t v = dict_version(g->container);
        if (v == g->version) return 1;
        int ok = PyObject_RichCompareBool(g->container, g->value, Py_EQ); /* (a copy: items by ==) */
        if (ok > 0) g->version = v;
        return ok;
    }
    case GK_CELL: {
        PyObject *now = PyCell_GET(g->container);
        return same_value(now ? now : absent, g->value);
    }
    case GK_LIST_ITEM: {
        Py_ssize_t i = PyLong_AsSsize_t(g->key);
        Py_ssize_t n = PyList_GET_SIZE(g->container);
        if (i < 0) i += n;
        return i >= 0 && i < n ? same_value(PyList_GET_ITEM(g->container, i), g->value) : 0;
    }
    case GK_LIST: { /* a snapshot: the same length, each item the same */
        Py_ssize_t n = PyList_GET_SIZE(g->container);
        if (n != PyTuple_GET_SIZE(g->value)) return 0;
        for (Py_ssize_t i = 0; i < n; i++) {
            int ok = same_value(PyList_GET_ITEM(g->container, i), PyTuple_GET_ITEM(g->value, i));
            if (ok <= 0) return ok;
        }
        return 1;
    }
    case GK_TYPE: {
        PyObject *now = _PyType_Lookup((PyTypeObject *)g->container, g->key); /* borrowed, no code runs */
        return same_value(now ? now : absent, g->value);
    }
    case GK_MEMBER: { /* a __slots__ member: a C descriptor, no code of the user's runs */
        PyObject *now = PyObject_GetAttr(g->container, g->key);
        if (!now) {
            PyErr_Clear();
            return same_value(absent, g->value);
        }
        int ok = same_value(now, g->value);
        Py_DECREF(now);
        return ok;
    }
    case GK_SET: /* a frozenset copy: the same items, by == */
        return PyAnySet_Check(g->container) ? PyObject_RichCompareBool(g->container, g->value, Py_EQ) : 0;
    default:
        return 0;
    }
}

int em_py_state_guards_hold(PyObject *cap, PyObject **failed_what) {
    em_py_state_guards *t = PyCapsule_GetPointer(cap, "ember.state_guards");
    if (!t) return -1;
    for (Py_ssize_t i = 0; i < t->n; i++) {
        int ok = guard_holds(&t->g[i]);
        if (ok <= 0) {
            if (failed_what) *failed_what = t->g[i].what;
            return ok;
        }
    }
    return 1;
}

Py_ssize_t em_py_state_guards_count(PyObject *cap) {
    em_py_state_guards *t = PyCapsule_GetPointer(cap, "ember.state_guards");
    return t ? t->n : 0;
}

PyObject *em_py_state_guards_what(PyObject *cap, Py_ssize_t i) {
    em_py_state_guards *t = PyCapsule_GetPointer(cap, "ember.state_guards");
    return t && i >= 0 && i < t->n ? t->g[i].what : NULL;
}

/* ---- helpers the recorder uses (no code of the user's runs in them) ---- */

/* _type_lookup(type, name): the attribute the type's MRO holds under name,
 * without calling anything (absent: _capture.ABSENT), as attribute lookup
 * finds it before descriptors run. */
static PyObject *f_type_lookup(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *type, *name, *dflt;
    if (!PyArg_ParseTuple(args, "O!UO:_type_lookup", &PyType_Type, &type, &name, &dflt)) return NULL;
    PyObject *v = _PyType_Lookup((PyTypeObject *)type, name);
    return Py_NewRef(v ? v : dflt);
}

/* _instance_dict(obj): obj's own __dict__ as attribute lookup reads it
 * (None when it has none), without calling a __dict__ property. */
static PyObject *f_instance_dict(PyObject *self, PyObject *obj) {
    (void)self;
    PyObject **p = _PyObject_GetDictPtr(obj);
    if (p && *p) return Py_NewRef(*p);
    if (p && !*p && Py_TYPE(obj)->tp_flags & Py_TPFLAGS_MANAGED_DICT) {
        PyObject *d = PyObject_GenericGetDict(obj, NULL); /* (materialises a managed dict) */
        if (d) return d;
        PyErr_Clear();
    }
    Py_RETURN_NONE;
}

/* _state_guards(list, absent): the recorder's guards as a table. */
static PyObject *f_state_guards(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *list, *marker;
    if (!PyArg_ParseTuple(args, "O!O:_state_guards", &PyList_Type, &list, &marker)) return NULL;
    return em_py_state_guards_new(list, marker);
}

PyMethodDef em_py_capture_methods[] = {
    {"_state_guards", f_state_guards, METH_VARARGS, "_state_guards(list, absent): a table of guards"},
    {"_type_lookup", f_type_lookup, METH_VARARGS, "_type_lookup(type, name, default): an MRO lookup, nothing run"},
    {"_instance_dict", f_instance_dict, METH_O, "_instance_dict(obj): obj's own __dict__ or None, nothing run"},
    {NULL, NULL, 0, NULL},
};
