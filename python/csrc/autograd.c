/*
 * autograd.c - autograd's Python face: the tensor attributes (requires_grad,
 * grad, grad_fn, is_leaf), backward/detach, grad mode, autograd.grad, and
 * ember._C.Node, the type grad_fn objects have.
 *
 * The graph itself lives in the runtime (runtime/autograd/); this file only
 * converts arguments and results.
 */
#include "ember/autograd.h"
#include "ember/frontend.h"
#include "ember/alloc.h"
#include "ember_py.h"

#define T(o) em_py_tensor_of(o)

/* ---- Node: a grad_fn seen from Python ---- */

typedef struct {
    PyObject_HEAD em_node *node; /* one reference */
} py_node;

static PyObject *node_wrap(em_node *n) {
    if (!n) Py_RETURN_NONE;
    py_node *o = PyObject_New(py_node, &em_py_Node);
    if (!o) return NULL;
    em_node_retain(n);
    o->node = n;
    return (PyObject *)o;
}

static void node_dealloc(PyObject *self) {
    em_node_release(((py_node *)self)->node);
    PyObject_Free(self);
}

static PyObject *node_name(PyObject *self, PyObject *unused) {
    (void)unused;
    char buf[96];
    return PyUnicode_FromString(em_node_name(((py_node *)self)->node, buf, sizeof buf));
}

static PyObject *node_repr(PyObject *self) {
    char buf[96];
    return PyUnicode_FromFormat("<%s object at %p>", em_node_name(((py_node *)self)->node, buf, sizeof buf),
                                (void *)self);
}

/* ((next node or None, input_nr), ...) as in PyTorch */
static PyObject *node_next_functions(PyObject *self, void *unused) {
    (void)unused;
    em_node *n = ((py_node *)self)->node;
    int k = em_node_n_next(n);
    PyObject *r = PyTuple_New(k);
    for (int i = 0; r && i < k; i++) {
        int nr = 0;
        em_node *m = em_node_next(n, i, &nr);
        PyObject *pair = Py_BuildValue("(Ni)", node_wrap(m), m ? nr : 0);
        if (!pair) {
            Py_CLEAR(r);
            break;
        }
        PyTuple_SET_ITEM(r, i, pair);
    }
    return r;
}

static PyObject *node_variable(PyObject *self, void *unused) {
    (void)unused;
    em_tensor *v = em_node_variable(((py_node *)self)->node);
    if (!v)
        return em_py_error(PyExc_AttributeError, "only AccumulateGrad nodes have a 'variable'");
    em_tensor_retain(v);
    return em_py_wrap(v);
}

static PyObject *node_richcompare(PyObject *a, PyObject *b, int op) {
    if (!PyObject_TypeCheck(b, &em_py_Node) || (op != Py_EQ && op != Py_NE)) Py_RETURN_NOTIMPLEMENTED;
    bool same = ((py_node *)a)->node == ((py_node *)b)->node;
    return PyBool_FromLong(op == Py_EQ ? same : !same);
}

static Py_hash_t node_hash(PyObject *self) { return _Py_HashPointer(((py_node *)self)->node); }

static PyMethodDef node_methods[] = {
    {"name", node_name, METH_NOARGS, "the node's name, e.g. 'MulBackward0'"},
    {NULL, NULL, 0, NULL},
};
static PyGetSetDef node_getset[] = {
    {"next_functions", node_next_functions, NULL, "where the gradients of the inputs go", NULL},
    {"variable", node_variable, NULL, "the leaf an AccumulateGrad node accumulates into", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

PyTypeObject em_py_Node = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "ember._C.Node",
    .tp_basicsize = sizeof(py_node),
    .tp_dealloc = node_dealloc,
    .tp_repr = node_repr,
    .tp_hash = node_hash,
    .tp_richcompare = node_richcompare,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "a node of the autograd graph (a tensor's grad_fn)",
    .tp_methods = node_methods,
    .tp_getset = node_getset,
};

/* ---- tensor attributes ---- */

PyObject *em_py_get_requires_grad(PyObject *self, void *unused) {
    (void)unused;
    return PyBool_FromLong(em_requires_grad(T(self)));
}

/* Autograd state changes are not ops: inside a trace they fail it (the
 * compiled graph could not repeat them), and the function runs eagerly. */
static void note_state_change(const char *what, const em_tensor *t) {
    em_note_event(EM_EVENT_MUTATION, what, t);
}

int em_py_set_requires_grad(PyObject *self, PyObject *v, void *unused) {
    (void)unused;
    note_state_change("setting requires_grad", T(self));
    int on = v ? PyObject_IsTrue(v) : 0;
    if (on < 0) return -1;
    if (em_set_requires_grad(T(self), on) != EM_OK) {
        em_py_raise();
        return -1;
    }
    return 0;
}

/* The tensor whose .grad `self` shows: itself, or in a trace, for a proxy
 * of an argument, the caller's tensor (where backward accumulates). */
static em_tensor *grad_owner(PyObject *self) {
    const em_tensor *o = em_trace_original(T(self));
    return o ? (em_tensor *)o : T(self);
}

PyObject *em_py_get_grad(PyObject *self, void *unused) {
    (void)unused;
    em_tensor *t = grad_owner(self);
    em_note_event(EM_EVENT_GRAD_READ, ".grad", t); /* a trace guards what it finds */
    em_tensor *g = em_tensor_grad(t);
    if (!g) Py_RETURN_NONE;
    em_tensor_retain(g);
    return em_py_wrap(g);
}

int em_py_set_grad(PyObject *self, PyObject *v, void *unused) {
    (void)unused;
    em_tensor *t = grad_owner(self);
    if (v && v != Py_None) {
        if (!em_py_is_tensor(v)) {
            PyErr_Format(PyExc_TypeError, "assigned grad expected to be a Tensor or None but got %s",
                         Py_TYPE(v)->tp_name);
            return -1;
        }
        em_tensor *g = T(v);
        if (g->dtype != t->dtype) {
            PyErr_Format(PyExc_RuntimeError, "assigned grad has data of type %s, the tensor is %s",
                         em_dtype_long_name(g->dtype), em_dtype_long_name(t->dtype));
            return -1;
        }
        if (!em_shape_eq(g->shape, g->ndim, t->shape, t->ndim)) {
            char a[128], b[128];
            em_shape_str(g->shape, g->ndim, a, sizeof a);
            em_shape_str(t->shape, t->ndim, b, sizeof b);
            PyErr_Format(PyExc_RuntimeError, "assigned grad has data of a different size: %s, the tensor is %s", a, b);
            return -1;
        }
    } else {
        v = NULL;
    }
    em_note_event(EM_EVENT_GRAD_WRITE, ".grad assignment", t); /* a trace sets it after a run */
    if (em_tensor_set_grad(t, v ? T(v) : NULL) != EM_OK) {
        em_py_raise();
        return -1;
    }
    return 0;
}

PyObject *em_py_get_grad_fn(PyObject *self, void *unused) {
    (void)unused;
    return node_wrap(em_grad_fn(T(self)));
}

PyObject *em_py_get_is_leaf(PyObject *self, void *unused) {
    (void)unused;
    return PyBool_FromLong(em_grad_fn(grad_owner(self)) == NULL);
}

/* ---- tensor methods ---- */

PyObject *em_py_detach(PyObject *self, PyObject *unused) {
    (void)unused;
    return em_py_wrap(em_detach(T(self)));
}

PyObject *em_py_detach_(PyObject *self, PyObject *unused) {
    (void)unused;
    em_tensor *t = T(self);
    note_state_change("detach_()", t);
    em_tensor_detach_(t);
    Py_INCREF(self);
    return self;
}

PyObject *em_py_requires_grad_(PyObject *self, PyObject *args, PyObject *kwargs) {
    static char *kw[] = {"requires_grad", NULL};
    int on = 1;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|p:requires_grad_", kw, &on)) return NULL;
    note_state_change("requires_grad_()", T(self));
    if (em_set_requires_grad(T(self), on) != EM_OK) return em_py_raise();
    Py_INCREF(self);
    return self;
}

/* _backward(tensors, grad_tensors, retain_graph, create_graph) */
static PyObject *f_backward(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *outs, *grads;
    int retain, create;
    if (!PyArg_ParseTuple(args, "OOpp", &outs, &grads, &retain, &create)) return NULL;
    int n = 0, ng = 0;
    em_tensor **o = em_py_tensor_list(outs, "tensors", false, &n);
    if (!o) return NULL;
    em_tensor **g = grads == Py_None ? NULL : em_py_tensor_list(grads, "grad_tensors", true, &ng);
    if (grads != Py_None && !g) {
        em_free(o);
        return NULL;
    }
    if (g && ng != n) {
        em_free(o);
        em_free(g);
        return em_py_error(PyExc_RuntimeError, "got %d tensors and %d gradients", n, ng);
    }
    em_status st;
    if (em_trace_active()) { /* the tracer asks Python for source lines: keep the GIL */
        st = em_backward(o, g, n, retain, create);
    } else {
        Py_BEGIN_ALLOW_THREADS st = em_backward(o, g, n, retain, create);
        Py_END_ALLOW_THREADS
    }
    em_free(o);
    em_free(g);
    if (st != EM_OK) return em_py_raise();
    Py_RETURN_NONE;
}

/* _grad(outputs, grad_outputs, inputs, retain_graph, create_graph, allow_unused) */
static PyObject *f_grad(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *outs, *grads, *ins;
    int retain, create, unused;
    if (!PyArg_ParseTuple(args, "OOOppp", &outs, &grads, &ins, &retain, &create, &unused)) return NULL;
    int n = 0, ng = 0, ni = 0;
    em_tensor **o = em_py_tensor_list(outs, "outputs", false, &n), **g = NULL, **in = NULL, **res = NULL;
    PyObject *r = NULL;
    if (!o) return NULL;
    if (grads != Py_None && !(g = em_py_tensor_list(grads, "grad_outputs", true, &ng))) goto done;
    if (g && ng != n) {
        em_py_error(PyExc_RuntimeError, "grad requires one grad_output per output: got %d outputs and %d grad_outputs", n, ng);
        goto done;
    }
    if (!(in = em_py_tensor_list(ins, "inputs", false, &ni))) goto done;
    if (!(res = em_malloc((size_t)(ni ? ni : 1) * sizeof *res))) {
        PyErr_NoMemory();
        goto done;
    }
    em_status st;
    if (em_trace_active()) { /* (as in f_backward) */
        st = em_autograd_grad(o, g, n, in, ni, retain, create, unused, res);
    } else {
        Py_BEGIN_ALLOW_THREADS st = em_autograd_grad(o, g, n, in, ni, retain, create, unused, res);
        Py_END_ALLOW_THREADS
    }
    if (st != EM_OK) {
        em_py_raise();
        goto done;
    }
    r = PyTuple_New(ni);
    for (int i = 0; i < ni; i++) {
        PyObject *e;
        if (res[i]) {
            e = r ? em_py_wrap(res[i]) : (em_tensor_release(res[i]), NULL);
        } else {
            e = Py_None;
            Py_INCREF(e);
        }
        if (r && e) {
            PyTuple_SET_ITEM(r, i, e);
        } else if (r) {
            Py_CLEAR(r);
        }
    }
done:
    em_free(o);
    em_free(g);
    em_free(in);
    em_free(res);
    return r;
}

static PyObject *f_is_grad_enabled(PyObject *self, PyObject *unused) {
    (void)self;
    (void)unused;
    return PyBool_FromLong(em_grad_enabled());
}

/* _set_grad_enabled(on) -> the previous setting */
static PyObject *f_set_grad_enabled(PyObject *self, PyObject *arg) {
    (void)self;
    int on = PyObject_IsTrue(arg);
    if (on < 0) return NULL;
    return PyBool_FromLong(em_set_grad_enabled(on));
}

/* _set_autocast(dtype or None) -> the previous one (a dtype or None) */
static PyObject *f_set_autocast(PyObject *self, PyObject *arg) {
    (void)self;
    int want = -1;
    if (arg != Py_None) {
        em_dtype dt;
        if (em_py_dtype_arg(arg, EM_DTYPE_BF16, &dt) < 0) return NULL;
        want = (int)dt;
    }
    int old = em_set_autocast_dtype(want);
    if (old < 0) Py_RETURN_NONE;
    PyObject *d = em_py_dtype_object((em_dtype)old);
    Py_INCREF(d);
    return d;
}

/* _autocast_dtype() -> autocast's dtype, or None when it is off */
static PyObject *f_autocast_dtype(PyObject *self, PyObject *unused) {
    (void)self;
    (void)unused;
    int dt = em_autocast_dtype();
    if (dt < 0) Py_RETURN_NONE;
    PyObject *d = em_py_dtype_object((em_dtype)dt);
    Py_INCREF(d);
    return d;
}

static PyObject *f_node_live_count(PyObject *self, PyObject *unused) {
    (void)self;
    (void)unused;
    return PyLong_FromLongLong(em_node_live_count());
}

/* _make_subclass(cls, data, requires_grad): a `cls` instance (nn.Parameter)
 * sharing data's memory, a leaf without history. */
static PyObject *f_make_subclass(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *cls, *data;
    int rg;
    if (!PyArg_ParseTuple(args, "O!Op", &PyType_Type, &cls, &data, &rg)) return NULL;
    if (!PyType_IsSubtype((PyTypeObject *)cls, &em_py_TensorBase))
        return em_py_error(PyExc_TypeError, "_make_subclass: %s is not a Tensor class",
                           ((PyTypeObject *)cls)->tp_name);
    if (!em_py_is_tensor(data))
        return em_py_error(PyExc_TypeError, "data must be a Tensor, not %s", Py_TYPE(data)->tp_name);
    em_tensor *t = em_detach(T(data));
    if (!t) return em_py_raise();
    if (rg && em_set_requires_grad(t, true) != EM_OK) {
        em_tensor_release(t);
        return em_py_raise();
    }
    return em_py_wrap_new((PyTypeObject *)cls, t);
}

/* _as_subclass(t, cls): a `cls` instance aliasing t's memory and staying
 * in t's autograd graph (an expand to its own shape: a view whose
 * gradient is the identity), as Tensor.as_subclass. */
static PyObject *f_as_subclass(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *data, *cls;
    if (!PyArg_ParseTuple(args, "OO!", &data, &PyType_Type, &cls)) return NULL;
    if (!PyType_IsSubtype((PyTypeObject *)cls, &em_py_TensorBase))
        return em_py_error(PyExc_TypeError, "as_subclass: %s is not a Tensor class", ((PyTypeObject *)cls)->tp_name);
    if (!em_py_is_tensor(data))
        return em_py_error(PyExc_TypeError, "as_subclass: expected a Tensor, not %s", Py_TYPE(data)->tp_name);
    em_tensor *t = T(data), *v = em_expand(t, t->shape, t->ndim);
    if (!v) return em_py_raise();
    if (em_py_object_of(v)) { /* (a fresh view has no Python object yet) */
        em_tensor_release(v);
        return em_py_error(PyExc_RuntimeError, "as_subclass: the alias already has a Python object");
    }
    return em_py_wrap_new((PyTypeObject *)cls, v);
}

/* The names of the ops that have a backward formula (for the test that
 * every one of them is gradchecked). */
static PyObject *f_differentiable_ops(PyObject *self, PyObject *unused) {
    (void)self;
    (void)unused;
    PyObject *r = PyList_New(0);
    for (int op = 0; r && op < EM_OP_COUNT; op++) {
        if (!em_op_differentiable(op)) continue;
        PyObject *name = PyUnicode_FromString(em_op_name((em_op)op));
        if (!name || PyList_Append(r, name) < 0) Py_CLEAR(r);
        Py_XDECREF(name);
    }
    return r;
}

/* _set_data(t, src): t takes src's memory, dtype and shape, keeping its
 * identity and autograd flags (PyTorch's `t.data = src`, which Module.to()
 * uses so that optimizers keep holding the model's parameters). */
static PyObject *f_set_data(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *a, *b;
    if (!PyArg_ParseTuple(args, "OO", &a, &b)) return NULL;
    if (!em_py_is_tensor(a) || !em_py_is_tensor(b))
        return em_py_error(PyExc_TypeError, "data must be set to a Tensor, got %s", Py_TYPE(b)->tp_name);
    em_tensor *t = T(a), *src = T(b);
    note_state_change("assigning .data", t);
    if (em_requires_grad(t) && !em_dtype_is_float(src->dtype))
        return em_py_error(PyExc_RuntimeError, "data set to a tensor of dtype %s, but this tensor "
                           "requires grad and only floating point tensors can",
                           em_dtype_long_name(src->dtype));
    em_tensor_set_data(t, src);
    Py_RETURN_NONE;
}

/* ---- hooks and custom functions: Python callables the engine calls back
 * (it runs without the GIL, so every call takes it; a Python exception stays
 * pending and the engine stops with EM_ERR_HOST, which em_py_raise passes
 * through) ---- */

static void free_pyobject(void *ctx) {
    PyGILState_STATE g = PyGILState_Ensure();
    Py_XDECREF((PyObject *)ctx);
    PyGILState_Release(g);
}

/* A borrowed em_tensor as a Python object (a new reference to it). */
static PyObject *wrap_borrowed(em_tensor *t) {
    em_tensor_retain(t);
    return em_py_wrap(t);
}

static em_status call_hook(void *ctx, em_tensor *grad, em_tensor **replacement) {
    PyGILState_STATE g = PyGILState_Ensure();
    em_status st = EM_OK;
    PyObject *arg = wrap_borrowed(grad), *r = arg ? PyObject_CallOneArg((PyObject *)ctx, arg) : NULL;
    Py_XDECREF(arg);
    if (!r) {
        st = em_error(EM_ERR_HOST, "a gradient hook raised");
    } else if (r != Py_None) {
        if (!em_py_is_tensor(r)) {
            PyErr_Format(PyExc_TypeError, "a gradient hook must return a Tensor or None, not %s", Py_TYPE(r)->tp_name);
            st = em_error(EM_ERR_HOST, "a gradient hook returned a non-tensor");
        } else {
            *replacement = T(r);
            em_tensor_retain(*replacement);
        }
    }
    Py_XDECREF(r);
    PyGILState_Release(g);
    return st;
}

/* (t, fn) -> `registrar`(t, fn as a hook), for the two kinds of hook. */
static PyObject *register_with(PyObject *args, const char *what,
                               em_status (*registrar)(em_tensor *, em_grad_hook_fn, void *, void (*)(void *))) {
    PyObject *t, *fn;
    if (!PyArg_ParseTuple(args, "OO", &t, &fn)) return NULL;
    if (!em_py_is_tensor(t)) return em_py_error(PyExc_TypeError, "%s: expected a Tensor", what);
    Py_INCREF(fn);
    if (registrar(T(t), call_hook, fn, free_pyobject) != EM_OK) {
        Py_DECREF(fn);
        return em_py_raise();
    }
    Py_RETURN_NONE;
}

/* _register_hook(t, fn): fn(grad) -> Tensor or None, on t's gradient */
static PyObject *f_register_hook(PyObject *self, PyObject *args) {
    (void)self;
    return register_with(args, "register_hook", em_tensor_register_hook);
}

/* _register_post_accumulate_grad_hook(t, fn): fn(t) after backward
 * accumulated into t.grad (a leaf) */
static PyObject *f_register_post_accumulate_hook(PyObject *self, PyObject *args) {
    (void)self;
    return register_with(args, "register_post_accumulate_grad_hook", em_tensor_register_post_accumulate_hook);
}

/* The backward of an autograd.Function: ctx is fn(*grads) -> one value per
 * input (a Tensor or None). */
static em_status call_custom(void *ctx, em_tensor *const *gout, int n_out, em_tensor **gin, int n_in,
                             const bool *needs) {
    PyGILState_STATE g = PyGILState_Ensure();
    em_status st = EM_OK;
    PyObject *grads = PyTuple_New(n_out), *r = NULL;
    for (int j = 0; grads && j < n_out; j++) {
        PyObject *w = wrap_borrowed(gout[j]);
        if (!w) Py_CLEAR(grads);
        else PyTuple_SET_ITEM(grads, j, w);
    }
    r = grads ? PyObject_Call((PyObject *)ctx, grads, NULL) : NULL;
    if (!r) st = em_error(EM_ERR_HOST, "a custom function's backward raised");
    PyObject *seq = r ? PySequence_Fast(r, "backward must return a sequence") : NULL;
    if (r && !seq) st = em_error(EM_ERR_HOST, "a custom function's backward returned a non-sequence");
    if (seq && PySequence_Fast_GET_SIZE(seq) != n_in) {
        PyErr_Format(PyExc_RuntimeError, "function backward returned an incorrect number of gradients (expected %d, got %zd)",
                     n_in, PySequence_Fast_GET_SIZE(seq));
        st = em_error(EM_ERR_HOST, "wrong number of gradients");
    }
    for (int i = 0; seq && st == EM_OK && i < n_in; i++) {
        PyObject *o = PySequence_Fast_GET_ITEM(seq, i);
        if (o == Py_None || !needs[i]) continue;
        if (!em_py_is_tensor(o)) {
            PyErr_Format(PyExc_TypeError, "function backward must return Tensors or None, got %s at index %d",
                         Py_TYPE(o)->tp_name, i);
            st = em_error(EM_ERR_HOST, "a non-tensor gradient");
            break;
        }
        gin[i] = T(o);
        em_tensor_retain(gin[i]);
    }
    if (st != EM_OK)
        for (int i = 0; i < n_in; i++) {
            em_tensor_release(gin[i]);
            gin[i] = NULL;
        }
    Py_XDECREF(seq);
    Py_XDECREF(r);
    Py_XDECREF(grads);
    PyGILState_Release(g);
    return st;
}

/* _custom_function(name, inputs, outputs, backward): records the node */
static PyObject *f_custom_function(PyObject *self, PyObject *args) {
    (void)self;
    const char *name;
    PyObject *ins, *outs, *fn;
    if (!PyArg_ParseTuple(args, "sOOO", &name, &ins, &outs, &fn)) return NULL;
    int ni = 0, no = 0;
    em_tensor **in = em_py_tensor_list(ins, "inputs", false, &ni), **out = in ? em_py_tensor_list(outs, "outputs", false, &no) : NULL;
    PyObject *r = NULL;
    if (out) {
        Py_INCREF(fn);
        if (em_autograd_custom(name, in, ni, out, no, call_custom, fn, free_pyobject) != EM_OK) {
            Py_DECREF(fn);
            em_py_raise();
        } else {
            r = Py_None;
            Py_INCREF(r);
        }
    }
    em_free(in);
    em_free(out);
    return r;
}

/* Anomaly mode's origin of a node: Python's stack, as traceback.format_stack() */
static char *python_stack(void) {
    PyGILState_STATE g = PyGILState_Ensure();
    char *text = NULL;
    PyObject *exc_type, *exc, *tb;
    PyErr_Fetch(&exc_type, &exc, &tb);
    PyObject *mod = PyImport_ImportModule("traceback");
    PyObject *lines = mod ? PyObject_CallMethod(mod, "format_stack", NULL) : NULL;
    Py_ssize_t n = lines ? PyList_Size(lines) : 0; /* the innermost frames: where it happened */
    PyObject *last = lines ? PyList_GetSlice(lines, n > 6 ? n - 6 : 0, n) : NULL;
    PyObject *sep = last ? PyUnicode_FromString("") : NULL;
    PyObject *joined = sep ? PyUnicode_Join(sep, last) : NULL;
    const char *utf8 = joined ? PyUnicode_AsUTF8(joined) : NULL;
    if (utf8 && (text = em_malloc(strlen(utf8) + 1))) memcpy(text, utf8, strlen(utf8) + 1);
    Py_XDECREF(joined);
    Py_XDECREF(sep);
    Py_XDECREF(last);
    Py_XDECREF(lines);
    Py_XDECREF(mod);
    PyErr_Clear();
    PyErr_Restore(exc_type, exc, tb);
    PyGILState_Release(g);
    return text;
}

static PyObject *f_retain_grad(PyObject *self, PyObject *t) {
    (void)self;
    if (!em_py_is_tensor(t)) return em_py_error(PyExc_TypeError, "retain_grad: expected a Tensor");
    if (em_tensor_retain_grad(T(t)) != EM_OK) return em_py_raise();
    Py_RETURN_NONE;
}

static PyObject *f_retains_grad(PyObject *self, PyObject *t) {
    (void)self;
    if (!em_py_is_tensor(t)) return em_py_error(PyExc_TypeError, "retains_grad: expected a Tensor");
    return PyBool_FromLong(em_tensor_retains_grad(T(t)));
}

static PyObject *f_set_anomaly(PyObject *self, PyObject *arg) {
    (void)self;
    int on = PyObject_IsTrue(arg);
    if (on < 0) return NULL;
    em_autograd_set_origin_fn(python_stack);
    return PyBool_FromLong(em_autograd_set_anomaly(on));
}

static PyObject *f_set_anomaly_check_nan(PyObject *self, PyObject *arg) {
    (void)self;
    int on = PyObject_IsTrue(arg);
    if (on < 0) return NULL;
    return PyBool_FromLong(em_autograd_set_anomaly_check_nan(on));
}

static PyObject *f_anomaly_check_nan(PyObject *self, PyObject *unused) {
    (void)self;
    (void)unused;
    return PyBool_FromLong(em_autograd_anomaly_check_nan());
}

static PyObject *f_anomaly(PyObject *self, PyObject *unused) {
    (void)self;
    (void)unused;
    return PyBool_FromLong(em_autograd_anomaly());
}

static PyMethodDef autograd_methods[] = {
    {"_set_data", f_set_data, METH_VARARGS, "_set_data(t, src): t.data = src"},
    {"_as_subclass", f_as_subclass, METH_VARARGS, "_as_subclass(t, cls): t as a cls instance, in t's graph"},
    {"_differentiable_ops", f_differentiable_ops, METH_NOARGS, "names of the ops with a gradient"},
    {"_backward", f_backward, METH_VARARGS, "_backward(tensors, grad_tensors, retain_graph, create_graph)"},
    {"_grad", f_grad, METH_VARARGS, "_grad(outputs, grad_outputs, inputs, retain_graph, create_graph, allow_unused)"},
    {"is_grad_enabled", f_is_grad_enabled, METH_NOARGS, "is grad mode on (in this thread)?"},
    {"_set_grad_enabled", f_set_grad_enabled, METH_O, "sets grad mode; returns the previous one"},
    {"_autocast_dtype", f_autocast_dtype, METH_NOARGS, "autocast's dtype, or None when off"},
    {"_set_autocast", f_set_autocast, METH_O, "_set_autocast(dtype or None): autocast's dtype; the previous"},
    {"_node_live_count", f_node_live_count, METH_NOARGS, "live autograd nodes (leak tests)"},
    {"_make_subclass", f_make_subclass, METH_VARARGS, "_make_subclass(cls, data, requires_grad)"},
    {"_register_hook", f_register_hook, METH_VARARGS, "_register_hook(t, fn): fn(grad) on t's gradient"},
    {"_register_post_accumulate_grad_hook", f_register_post_accumulate_hook, METH_VARARGS,
     "_register_post_accumulate_grad_hook(t, fn): fn(t) after backward accumulated into t.grad"},
    {"_custom_function", f_custom_function, METH_VARARGS, "_custom_function(name, inputs, outputs, backward)"},
    {"_retain_grad", f_retain_grad, METH_O, "_retain_grad(t): a result keeps its .grad"},
    {"_retains_grad", f_retains_grad, METH_O, "_retains_grad(t)"},
    {"_set_anomaly", f_set_anomaly, METH_O, "anomaly detection on or off; returns the previous setting"},
    {"_anomaly", f_anomaly, METH_NOARGS, "is anomaly detection on?"},
    {"_set_anomaly_check_nan", f_set_anomaly_check_nan, METH_O,
     "whether anomaly mode checks gradients for NaN; returns the previous setting"},
    {"_anomaly_check_nan", f_anomaly_check_nan, METH_NOARGS, "does anomaly mode check gradients for NaN?"},
    {NULL, NULL, 0, NULL},
};

int em_py_autograd_init(PyObject *module) {
    if (PyType_Ready(&em_py_Node) < 0) return -1;
    Py_INCREF(&em_py_Node);
    if (PyModule_AddObject(module, "Node", (PyObject *)&em_py_Node) < 0) return -1;
    return PyModule_AddFunctions(module, autograd_methods);
}
