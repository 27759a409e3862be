/*
 * tensor.c - ember._C._TensorBase: the C half of ember.Tensor.
 *
 * A Python tensor owns one reference to an em_tensor, and the em_tensor
 * points back at its Python object while it lives, so a tensor that comes
 * back from C (an op returning its input, a compiled function returning an
 * argument) is the same Python object. Operators accept Python numbers,
 * which become 0-d "wrapped" tensors of the dtype PyTorch's promotion rules
 * give them. Host reads (.item(), NumPy export) are reported to the tracer.
 */
#include "ember_py.h"

static void tensor_dealloc(PyObject *self) {
    em_py_tensor *p = (em_py_tensor *)self;
    if (p->weakreflist) PyObject_ClearWeakRefs(self);
    if (p->t) {
        em_py_set_object(p->t, NULL);
        em_tensor_release(p->t);
        p->t = NULL;
    }
    Py_TYPE(self)->tp_free(self);
}

static PyObject *tensor_new_direct(PyTypeObject *type, PyObject *args, PyObject *kwargs) {
    (void)type;
    (void)args;
    (void)kwargs;
    return em_py_error(PyExc_TypeError,
                       "ember.Tensor cannot be constructed directly; use ember.tensor(data), "
                       "ember.from_numpy(array) or a factory such as ember.zeros(shape)");
}

#define T(o) em_py_tensor_of(o)

/* ---- ember.Size: a tuple that prints like torch.Size ---- */

static PyObject *size_repr(PyObject *self) {
    PyObject *list = PySequence_List(self);
    if (!list) return NULL;
    PyObject *r = PyUnicode_FromFormat("ember.Size(%R)", list);
    Py_DECREF(list);
    return r;
}

PyTypeObject em_py_Size = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "ember.Size",
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_repr = size_repr,
    .tp_doc = "The shape of a tensor: a tuple of ints.",
};

PyObject *em_py_shape_tuple(const int64_t *shape, int ndim) {
    PyObject *t = PyTuple_New(ndim);
    if (!t) return NULL;
    for (int i = 0; i < ndim; i++) {
        PyObject *v = PyLong_FromLongLong(shape[i]);
        if (!v) {
            Py_DECREF(t);
            return NULL;
        }
        PyTuple_SET_ITEM(t, i, v);
    }
    PyObject *args = PyTuple_Pack(1, t);
    Py_DECREF(t);
    if (!args) return NULL;
    PyObject *s = PyTuple_Type.tp_new(&em_py_Size, args, NULL);
    Py_DECREF(args);
    return s;
}

/* ---- properties ---- */

static PyObject *get_shape(PyObject *self, void *c) {
    (void)c;
    return em_py_shape_tuple(T(self)->shape, T(self)->ndim);
}
static PyObject *get_dtype(PyObject *self, void *c) {
    (void)c;
    PyObject *d = em_py_dtype_object(T(self)->dtype);
    Py_INCREF(d);
    return d;
}
static PyObject *get_ndim(PyObject *self, void *c) {
    (void)c;
    return PyLong_FromLong(T(self)->ndim);
}
/* (type, index) of the tensor's device: ember.Tensor.device builds its
 * device object from them. */
static PyObject *get_device_key(PyObject *self, void *c) {
    (void)c;
    em_device d = T(self)->device;
    return Py_BuildValue("(ii)", (int)d.type, (int)d.index);
}
static PyObject *get_is_meta(PyObject *self, void *c) {
    (void)c;
    return PyBool_FromLong(T(self)->device.type == EM_DEVICE_META);
}
static PyObject *get_is_cpu(PyObject *self, void *c) {
    (void)c;
    return PyBool_FromLong(T(self)->device.type == EM_DEVICE_CPU);
}

static PyObject *get_T(PyObject *self, void *c) {
    (void)c;
    em_tensor *t = T(self);
    int64_t perm[EM_MAX_DIMS];
    for (int i = 0; i < t->ndim; i++) perm[i] = t->ndim - 1 - i;
    return em_py_wrap(em_permute(t, perm, t->ndim));
}

/* NumPy's view of the tensor: zero-copy; NumPy keeps this object alive. */
static PyObject *get_array_interface(PyObject *self, void *c) {
    (void)c;
    em_tensor *t = T(self);
    if (t->device.type == EM_DEVICE_META)
        return em_py_error(PyExc_NotImplementedError, "Cannot convert a meta tensor to NumPy: it has no data");
    if (t->device.type != EM_DEVICE_CPU)
        return em_py_error(PyExc_TypeError,
                           "can't convert a CUDA tensor to NumPy; copy it to the CPU with .cpu()");
    /* NumPy typestrs; a dtype without one (bfloat16: NumPy has no such type)
     * is refused as PyTorch refuses it. */
    static const char *typestr[EM_DTYPE_COUNT] = {
        [EM_DTYPE_F32] = "<f4", [EM_DTYPE_F64] = "<f8", [EM_DTYPE_F16] = "<f2",
        [EM_DTYPE_I64] = "<i8", [EM_DTYPE_I32] = "<i4", [EM_DTYPE_I16] = "<i2",
        [EM_DTYPE_I8] = "|i1",  [EM_DTYPE_U8] = "|u1",  [EM_DTYPE_BOOL] = "|b1"};
    if (!typestr[t->dtype])
        return em_py_error(PyExc_TypeError,
                           "Got unsupported ScalarType %s: NumPy has no %s type; convert the "
                           "tensor first, e.g. with .float()",
                           t->dtype == EM_DTYPE_BF16 ? "BFloat16" : em_dtype_long_name(t->dtype),
                           em_dtype_long_name(t->dtype));
    em_note_host_sync("NumPy conversion", t);
    t->storage->exported = true;
    PyObject *shape = PyTuple_New(t->ndim), *strides = PyTuple_New(t->ndim);
    if (!shape || !strides) goto fail;
    for (int i = 0; i < t->ndim; i++) {
        PyObject *n = PyLong_FromLongLong(t->shape[i]);
        PyObject *st = PyLong_FromLongLong(t->strides[i] * (int64_t)em_dtype_size(t->dtype));
        if (n) PyTuple_SET_ITEM(shape, i, n); /* steals n */
        if (st) PyTuple_SET_ITEM(strides, i, st); /* steals st */
        if (!n || !st) goto fail;
    }
    /* "N" steals shape, strides and the address; Py_BuildValue releases them
     * on failure too. */
    PyObject *d = Py_BuildValue("{s:N,s:s,s:(N,O),s:N,s:i}", "shape", shape, "typestr",
                                typestr[t->dtype], "data", PyLong_FromVoidPtr(em_tensor_data(t)),
                                Py_False, "strides", strides, "version", 3);
    return d;
fail:
    Py_XDECREF(shape);
    Py_XDECREF(strides);
    return NULL;
}

static PyGetSetDef tensor_getset[] = {
    {"shape", get_shape, NULL, "the size of each dimension (an ember.Size)", NULL},
    {"dtype", get_dtype, NULL, "the element type", NULL},
    {"ndim", get_ndim, NULL, "number of dimensions", NULL},
    {"is_cpu", get_is_cpu, NULL, "True for tensors in CPU memory", NULL},
    {"is_meta", get_is_meta, NULL, "True for meta tensors (a shape, a dtype and strides; no data)", NULL},
    {"_device_key", get_device_key, NULL, "(type code, index) of the tensor's device", NULL},
    {"T", get_T, NULL, "the tensor with its dimensions reversed", NULL},
    {"__array_interface__", get_array_interface, NULL, "NumPy array interface (zero-copy)", NULL},
    {"requires_grad", em_py_get_requires_grad, em_py_set_requires_grad,
     "do gradients flow to this tensor?", NULL},
    {"grad", em_py_get_grad, em_py_set_grad, "a leaf's accumulated gradient (or None)", NULL},
    {"grad_fn", em_py_get_grad_fn, NULL, "the autograd node that made this tensor (None for leaves)",
     NULL},
    {"is_leaf", em_py_get_is_leaf, NULL, "made by the user rather than by a recorded op?", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

/* ---- operators ---- */

/* a op b where either may be a Python number; NotImplemented if neither
 * is a tensor or the other is not a number. */
static PyObject *binary(PyObject *a, PyObject *b, em_op op) {
    bool at = em_py_is_tensor(a), bt = em_py_is_tensor(b);
    if (!at && !bt) Py_RETURN_NOTIMPLEMENTED;
    em_tensor *x = em_py_number_operand(a, op, 0, at ? T(a)->dtype : T(b)->dtype);
    if (!x) {
        if (PyErr_Occurred()) return NULL;
        Py_RETURN_NOTIMPLEMENTED;
    }
    em_tensor *y = em_py_number_operand(b, op, 1, at ? T(a)->dtype : T(b)->dtype);
    if (!y) {
        em_tensor_release(x);
        if (PyErr_Occurred()) return NULL;
        Py_RETURN_NOTIMPLEMENTED;
    }
    em_tensor *r = op == EM_OP_POW ? em_pow(x, y) : em_binary(op, x, y);
    em_tensor_release(x);
    em_tensor_release(y);
    return em_py_wrap(r);
}

#define NB_BINARY(name, op)                                                                        \
    static PyObject *name(PyObject *a, PyObject *b) { return binary(a, b, op); }
NB_BINARY(nb_add, EM_OP_ADD)
NB_BINARY(nb_sub, EM_OP_SUB)
NB_BINARY(nb_mul, EM_OP_MUL)
NB_BINARY(nb_div, EM_OP_DIV)
NB_BINARY(nb_floordiv, EM_OP_FLOOR_DIVIDE)
NB_BINARY(nb_mod, EM_OP_REMAINDER)
NB_BINARY(nb_and, EM_OP_BITWISE_AND)
NB_BINARY(nb_or, EM_OP_BITWISE_OR)
NB_BINARY(nb_xor, EM_OP_BITWISE_XOR)
NB_BINARY(nb_lshift, EM_OP_BITWISE_LEFT_SHIFT)
NB_BINARY(nb_rshift, EM_OP_BITWISE_RIGHT_SHIFT)
static PyObject *nb_matmul(PyObject *a, PyObject *b) {
    if (!em_py_is_tensor(a) || !em_py_is_tensor(b)) Py_RETURN_NOTIMPLEMENTED;
    return em_py_wrap(em_matmul(T(a), T(b)));
}
static PyObject *nb_pow(PyObject *a, PyObject *b, PyObject *mod) {
    if (mod != Py_None) return em_py_error(PyExc_TypeError, "pow() with a modulus is not supported");
    return binary(a, b, EM_OP_POW);
}
static PyObject *nb_neg(PyObject *a) { return em_py_wrap(em_neg(T(a))); }
static PyObject *nb_abs(PyObject *a) { return em_py_wrap(em_unary(EM_OP_ABS, T(a))); }
static PyObject *nb_invert(PyObject *a) { return em_py_wrap(em_unary(EM_OP_BITWISE_NOT, T(a))); }
static PyObject *nb_pos(PyObject *a) {
    Py_INCREF(a);
    return a;
}

/* x op= y writes into x, so other references to x see the change (as in
 * PyTorch); the result must keep x's shape and dtype. */
#define NB_INPLACE(name, op)                                                                       \
    static PyObject *name(PyObject *a, PyObject *b) {                                              \
        if (!em_py_is_tensor(a)) Py_RETURN_NOTIMPLEMENTED;                                         \
        PyObject *objs[2] = {a, b};                                                                \
        return em_py_inplace(op, a, objs, 2);                                                      \
    }
NB_INPLACE(nb_iadd, EM_OP_ADD)
NB_INPLACE(nb_isub, EM_OP_SUB)
NB_INPLACE(nb_imul, EM_OP_MUL)
NB_INPLACE(nb_idiv, EM_OP_DIV)
NB_INPLACE(nb_ifloordiv, EM_OP_FLOOR_DIVIDE)
NB_INPLACE(nb_imod, EM_OP_REMAINDER)
NB_INPLACE(nb_iand, EM_OP_BITWISE_AND)
NB_INPLACE(nb_ior, EM_OP_BITWISE_OR)
NB_INPLACE(nb_ixor, EM_OP_BITWISE_XOR)
NB_INPLACE(nb_ilshift, EM_OP_BITWISE_LEFT_SHIFT)
NB_INPLACE(nb_irshift, EM_OP_BITWISE_RIGHT_SHIFT)
static PyObject *nb_ipow(PyObject *a, PyObject *b, PyObject *mod) {
    if (mod != Py_None) return em_py_error(PyExc_TypeError, "pow() with a modulus is not supported");
    if (!em_py_is_tensor(a)) Py_RETURN_NOTIMPLEMENTED;
    PyObject *objs[2] = {a, b};
    return em_py_inplace(EM_OP_POW, a, objs, 2);
}
static PyObject *nb_imatmul(PyObject *a, PyObject *b) {
    (void)a;
    (void)b;
    return em_py_error(PyExc_RuntimeError, "in-place matrix multiplication (@=) is not supported; "
                                           "write x = x @ y");
}

static PyObject *item_or_error(PyObject *self, const char *what) {
    em_tensor *t = T(self);
    if (t->numel != 1)
        return em_py_error(PyExc_ValueError,
                           "%s: only one element tensors can be converted to Python scalars (this "
                           "one has %lld)",
                           what, (long long)t->numel);
    return em_py_tensor_item(t, what);
}

static int nb_bool(PyObject *self) {
    em_tensor *t = T(self);
    if (t->numel != 1) {
        PyErr_Format(PyExc_RuntimeError, "Boolean value of Tensor with %s is ambiguous",
                     t->numel ? "more than one value" : "no values");
        return -1;
    }
    if (em_tensor_require_data(t, "bool(tensor)") != EM_OK) {
        em_py_raise();
        return -1;
    }
    em_note_host_sync("bool(tensor)", t);
    em_tensor *h = em_to_device(t, em_cpu()); /* (a device's value: copied over, which waits for it) */
    if (!h) {
        em_py_raise();
        return -1;
    }
    int r = em_tensor_get_f64(h, 0) != 0.0;
    em_tensor_release(h);
    return r;
}

static PyObject *nb_float(PyObject *self) {
    PyObject *v = item_or_error(self, "float(tensor)");
    if (!v) return NULL;
    PyObject *f = PyNumber_Float(v);
    Py_DECREF(v);
    return f;
}

static PyObject *nb_int(PyObject *self) {
    PyObject *v = item_or_error(self, "int(tensor)");
    if (!v) return NULL;
    PyObject *i = PyNumber_Long(v);
    Py_DECREF(v);
    return i;
}

/* operator.index(t): a one-element integer tensor stands for its value
 * (list[t], range(t)), as in PyTorch. */
static PyObject *nb_index(PyObject *self) {
    em_tensor *t = T(self);
    if (em_dtype_is_float(t->dtype) || t->numel != 1)
        return em_py_error(PyExc_TypeError,
                           "only integer tensors of a single element can be converted to an index "
                           "(got a %s tensor of %lld elements)",
                           em_dtype_long_name(t->dtype), (long long)t->numel);
    PyObject *v = em_py_tensor_item(t, "operator.index(tensor)");
    if (!v) return NULL;
    PyObject *i = PyNumber_Long(v);
    Py_DECREF(v);
    return i;
}

static PyNumberMethods tensor_as_number = {
    .nb_add = nb_add,
    .nb_subtract = nb_sub,
    .nb_multiply = nb_mul,
    .nb_true_divide = nb_div,
    .nb_floor_divide = nb_floordiv,
    .nb_remainder = nb_mod,
    .nb_power = nb_pow,
    .nb_negative = nb_neg,
    .nb_positive = nb_pos,
    .nb_absolute = nb_abs,
    .nb_invert = nb_invert,
    .nb_and = nb_and,
    .nb_or = nb_or,
    .nb_xor = nb_xor,
    .nb_lshift = nb_lshift,
    .nb_rshift = nb_rshift,
    .nb_bool = nb_bool,
    .nb_float = nb_float,
    .nb_int = nb_int,
    .nb_index = nb_index,
    .nb_matrix_multiply = nb_matmul,
    .nb_inplace_add = nb_iadd,
    .nb_inplace_subtract = nb_isub,
    .nb_inplace_multiply = nb_imul,
    .nb_inplace_true_divide = nb_idiv,
    .nb_inplace_floor_divide = nb_ifloordiv,
    .nb_inplace_remainder = nb_imod,
    .nb_inplace_power = nb_ipow,
    .nb_inplace_and = nb_iand,
    .nb_inplace_or = nb_ior,
    .nb_inplace_xor = nb_ixor,
    .nb_inplace_lshift = nb_ilshift,
    .nb_inplace_rshift = nb_irshift,
    .nb_inplace_matrix_multiply = nb_imatmul,
};

/* Comparisons return bool tensors, as in PyTorch; against objects that are
 * neither tensors nor numbers they fall back to Python's default. */
static PyObject *richcompare(PyObject *a, PyObject *b, int op) {
    static const em_op ops[] = {EM_OP_LT, EM_OP_LE, EM_OP_EQ, EM_OP_NE, EM_OP_GT, EM_OP_GE};
    return binary(a, b, ops[op]);
}

static Py_hash_t tensor_hash(PyObject *self) { /* by identity, like PyTorch */
    Py_hash_t h = (Py_hash_t)((uintptr_t)self >> 4);
    return h == -1 ? -2 : h;
}

static Py_ssize_t tensor_len(PyObject *self) {
    em_tensor *t = T(self);
    if (t->ndim == 0) {
        PyErr_SetString(PyExc_TypeError, "len() of a 0-d tensor");
        return -1;
    }
    return (Py_ssize_t)t->shape[0];
}

/* Indexing itself (mp_subscript, mp_ass_subscript) is defined in Python
 * (ember/_indexing.py), which composes it from the view and index ops. */
static PyMappingMethods tensor_as_mapping = {tensor_len, NULL, NULL};

/* ---- methods ---- */

#define UNARY_METHOD(name, fn)                                                                     \
    static PyObject *m_##name(PyObject *self, PyObject *unused) {                                  \
        (void)unused;                                                                              \
        return em_py_wrap(fn(T(self)));                                                            \
    }
UNARY_METHOD(neg, em_neg)
UNARY_METHOD(exp, em_exp)
UNARY_METHOD(log, em_log)
UNARY_METHOD(tanh, em_tanh)
UNARY_METHOD(sigmoid, em_sigmoid)
UNARY_METHOD(relu, em_relu)
/* fn(self, memory_format, op) of ember._memory_format: the channels-last
 * layouts, which only calls that name a memory format reach */
static PyObject *memory_format_call(const char *fn, PyObject *self, PyObject *fmt, const char *op) {
    PyObject *mod = PyImport_ImportModule("ember._memory_format");
    if (!mod) return NULL;
    PyObject *r = PyObject_CallMethod(mod, fn, "OOs", self, fmt, op);
    Py_DECREF(mod);
    return r;
}

/* contiguous(memory_format=None), is_contiguous(memory_format=None) */
static PyObject *m_contiguous(PyObject *self, PyObject *args, PyObject *kwargs) {
    static char *kw[] = {"memory_format", NULL};
    PyObject *fmt = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|O:contiguous", kw, &fmt)) return NULL;
    if (fmt != Py_None) return memory_format_call("to_format", self, fmt, "contiguous");
    return em_py_wrap(em_contiguous(T(self)));
}

/* Methods take a tensor or a number; anything else is a TypeError (the
 * operators instead return NotImplemented, so Python can try the other side). */
static PyObject *binary_method(PyObject *self, PyObject *o, em_op op) {
    PyObject *r = binary(self, o, op);
    if (r == Py_NotImplemented) {
        Py_DECREF(r);
        return em_py_error(PyExc_TypeError, "%s(): argument 'other' must be a Tensor or a number, not %s",
                           em_op_name(op), Py_TYPE(o)->tp_name);
    }
    return r;
}
static PyObject *m_add(PyObject *self, PyObject *o) { return binary_method(self, o, EM_OP_ADD); }
static PyObject *m_sub(PyObject *self, PyObject *o) { return binary_method(self, o, EM_OP_SUB); }
static PyObject *m_mul(PyObject *self, PyObject *o) { return binary_method(self, o, EM_OP_MUL); }
static PyObject *m_div(PyObject *self, PyObject *o) { return binary_method(self, o, EM_OP_DIV); }
static PyObject *m_pow(PyObject *self, PyObject *o) { return binary_method(self, o, EM_OP_POW); }
static PyObject *m_maximum(PyObject *self, PyObject *o) {
    return binary_method(self, o, EM_OP_MAXIMUM);
}
static PyObject *m_matmul(PyObject *self, PyObject *o) {
    if (!em_py_is_tensor(o))
        return em_py_error(PyExc_TypeError, "matmul: expected a tensor, got %s", Py_TYPE(o)->tp_name);
    return em_py_wrap(em_matmul(T(self), T(o)));
}

static PyObject *reduce_method(PyObject *self, PyObject *args, PyObject *kwargs, em_op op) {
    static char *kw[] = {"dim", "keepdim", "dtype", NULL};
    PyObject *dim = Py_None, *dtype = Py_None;
    int keepdim = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|OpO", kw, &dim, &keepdim, &dtype)) return NULL;
    int64_t dims[EM_MAX_DIMS];
    int n;
    if (em_py_dims_arg(dim, em_op_name(op), dims, &n) < 0) return NULL;
    em_tensor *x = T(self), *cast = NULL;
    if (dtype != Py_None) {
        em_dtype dt;
        if (em_py_dtype_arg(dtype, x->dtype, &dt) < 0) return NULL;
        if (!(cast = em_cast(x, dt))) return em_py_raise();
        x = cast;
    }
    em_tensor *r = op == EM_OP_SUM ? em_sum(x, dims, n, keepdim) : em_mean(x, dims, n, keepdim);
    em_tensor_release(cast);
    return em_py_wrap(r);
}
static PyObject *m_sum(PyObject *self, PyObject *args, PyObject *kwargs) {
    return reduce_method(self, args, kwargs, EM_OP_SUM);
}
static PyObject *m_mean(PyObject *self, PyObject *args, PyObject *kwargs) {
    return reduce_method(self, args, kwargs, EM_OP_MEAN);
}

static PyObject *m_reshape(PyObject *self, PyObject *args) {
    int64_t s[EM_MAX_DIMS];
    int n;
    if (em_py_shape_args(args, "reshape", s, &n) < 0) return NULL;
    return em_py_wrap(em_reshape(T(self), s, n));
}
/* x.view(dtype): the same bytes read as another dtype, as PyTorch's: with
 * a different element size the last dim (contiguous) is rescaled, and the
 * other strides and the offset must divide evenly. A new tensor object on
 * the same memory, without history (it is not differentiable). */
static PyObject *view_as_dtype(em_tensor *x, em_dtype dt) {
    int64_t a = (int64_t)em_dtype_size(x->dtype), b = (int64_t)em_dtype_size(dt);
    const char *from = em_dtype_long_name(x->dtype), *to = em_dtype_long_name(dt);
    int64_t shape[EM_MAX_DIMS], strides[EM_MAX_DIMS], off = x->offset;
    int nd = x->ndim, last = nd - 1;
    memcpy(shape, x->shape, sizeof shape);
    memcpy(strides, x->strides, sizeof strides);
    if (a != b) {
        if (nd == 0)
            return em_py_error(PyExc_RuntimeError, "self.dim() cannot be 0 to view %s as %s (different element sizes)",
                               from, to);
        if (strides[last] != 1)
            return em_py_error(PyExc_RuntimeError,
                               "self.stride(-1) must be 1 to view %s as %s (different element sizes), but got %lld",
                               from, to, (long long)strides[last]);
        if ((shape[last] * a) % b)
            return em_py_error(PyExc_RuntimeError,
                               "self.size(-1) must be divisible by %lld to view %s as %s (different element sizes), "
                               "but got %lld",
                               (long long)(b / a > 1 ? b / a : 1), from, to, (long long)shape[last]);
        if ((off * a) % b)
            return em_py_error(PyExc_RuntimeError,
                               "self.storage_offset() must be divisible by %lld to view %s as %s (different "
                               "element sizes), but got %lld",
                               (long long)(b / a), from, to, (long long)off);
        for (int d = 0; d < last; d++) {
            if ((strides[d] * a) % b)
                return em_py_error(PyExc_RuntimeError,
                                   "self.stride(%d) must be divisible by %lld to view %s as %s (different element "
                                   "sizes), but got %lld",
                                   d, (long long)(b / a), from, to, (long long)strides[d]);
            strides[d] = strides[d] * a / b;
        }
        shape[last] = shape[last] * a / b;
        off = off * a / b;
    }
    em_tensor *r = em_tensor_from_storage(x->storage, dt, off, shape, strides, nd);
    if (!r) return em_py_raise();
    r->is_view = true;
    /* (values a compiled graph could not follow: the trace stops here) */
    em_note_event(EM_EVENT_MUTATION, "view(dtype), a reinterpretation of a tensor's bytes,", x);
    return em_py_wrap(r);
}

static PyObject *m_view(PyObject *self, PyObject *args) {
    int64_t s[EM_MAX_DIMS];
    int n;
    if (PyTuple_GET_SIZE(args) == 1 && (Py_TYPE(PyTuple_GET_ITEM(args, 0)) == &em_py_dtype_type ||
                                        PyType_Check(PyTuple_GET_ITEM(args, 0)))) {
        em_dtype dt;
        if (em_py_dtype_arg(PyTuple_GET_ITEM(args, 0), T(self)->dtype, &dt) < 0) return NULL;
        return view_as_dtype(T(self), dt);
    }
    if (em_py_shape_args(args, "view", s, &n) < 0) return NULL;
    return em_py_wrap(em_view(T(self), s, n));
}
static PyObject *m_expand(PyObject *self, PyObject *args) {
    int64_t s[EM_MAX_DIMS];
    int n;
    if (em_py_shape_args(args, "expand", s, &n) < 0) return NULL;
    return em_py_wrap(em_expand(T(self), s, n));
}
static PyObject *m_permute(PyObject *self, PyObject *args) {
    int64_t s[EM_MAX_DIMS];
    int n;
    if (em_py_shape_args(args, "permute", s, &n) < 0) return NULL;
    return em_py_wrap(em_permute(T(self), s, n));
}
static PyObject *m_transpose(PyObject *self, PyObject *args) {
    long long d0, d1;
    if (!PyArg_ParseTuple(args, "LL:transpose", &d0, &d1)) return NULL;
    return em_py_wrap(em_transpose(T(self), d0, d1));
}
static PyObject *m_t(PyObject *self, PyObject *unused) {
    (void)unused;
    if (T(self)->ndim > 2)
        return em_py_error(PyExc_RuntimeError,
                           "t() expects a tensor with <= 2 dimensions, but self is %d-D",
                           T(self)->ndim);
    return em_py_wrap(em_transpose(T(self), 0, -1));
}

static PyObject *cast_to(PyObject *self, em_dtype dt) {
    if (T(self)->dtype == dt) { /* PyTorch returns the tensor itself */
        Py_INCREF(self);
        return self;
    }
    return em_py_wrap(em_cast(T(self), dt));
}
/* to(dtype), to(device), to(device, dtype), to(other), each optionally
 * followed by non_blocking and copy (positional or keyword), and
 * to(dtype=..., device=...). */
static PyObject *m_to(PyObject *self, PyObject *args, PyObject *kwargs) {
    static char *kw[] = {"arg0", "arg1", "arg2", "arg3", "dtype", "device", "non_blocking", "copy", "memory_format",
                         NULL};
    PyObject *pos[4] = {Py_None, Py_None, Py_None, Py_None}, *dtype = Py_None, *device = Py_None;
    PyObject *fmt = Py_None;
    em_tensor *other = NULL;
    int non_blocking = 0, copy = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|OOOO$OOppO:to", kw, &pos[0], &pos[1], &pos[2], &pos[3], &dtype,
                                     &device, &non_blocking, &copy, &fmt))
        return NULL;
    int flags = 0; /* positional bools: non_blocking, then copy */
    for (int i = 0; i < 4; i++) {
        PyObject *p = pos[i];
        if (p == Py_None) continue;
        if (PyBool_Check(p)) {
            if (flags++ == 0)
                non_blocking = p == Py_True;
            else
                copy = p == Py_True;
        } else if (Py_TYPE(p) == &em_py_dtype_type || PyType_Check(p)) {
            dtype = p;
        } else if (em_py_is_tensor(p)) { /* to(other): other's dtype and device */
            dtype = em_py_dtype_object(T(p)->dtype);
            other = T(p);
        } else {
            device = p;
        }
    }
    (void)non_blocking; /* (copies on the host are synchronous) */
    em_device dev = T(self)->device;
    if (other)
        dev = other->device;
    else if (device != Py_None && em_py_device_arg(device, "to", &dev) < 0)
        return NULL;
    em_dtype dt;
    if (em_py_dtype_arg(dtype, T(self)->dtype, &dt) < 0) return NULL;
    PyObject *r;
    if (!em_device_eq(dev, T(self)->device)) {
        em_tensor *moved = em_to_device_recorded(T(self), dev); /* (its gradient goes back) */
        if (!moved) return em_py_raise();
        if (moved->dtype != dt) {
            em_tensor *cast = em_cast(moved, dt);
            em_tensor_release(moved);
            moved = cast;
        }
        r = em_py_wrap(moved);
    } else {
        r = copy && dt == T(self)->dtype ? em_py_wrap(em_clone(T(self))) /* own memory */
                                         : cast_to(self, dt);
    }
    if (!r || fmt == Py_None) return r;
    PyObject *laid = memory_format_call("to_format", r, fmt, "to");
    Py_DECREF(r);
    return laid;
}
static PyObject *m_float(PyObject *s, PyObject *u) { (void)u; return cast_to(s, EM_DTYPE_F32); }
static PyObject *m_double(PyObject *s, PyObject *u) { (void)u; return cast_to(s, EM_DTYPE_F64); }
static PyObject *m_long(PyObject *s, PyObject *u) { (void)u; return cast_to(s, EM_DTYPE_I64); }
static PyObject *m_bool(PyObject *s, PyObject *u) { (void)u; return cast_to(s, EM_DTYPE_BOOL); }

static PyObject *m_item(PyObject *self, PyObject *unused) {
    (void)unused;
    return item_or_error(self, ".item()");
}
static PyObject *m_numel(PyObject *self, PyObject *unused) {
    (void)unused;
    return PyLong_FromLongLong(T(self)->numel);
}
static PyObject *m_dim(PyObject *self, PyObject *unused) {
    (void)unused;
    return PyLong_FromLong(T(self)->ndim);
}
static PyObject *m_is_contiguous(PyObject *self, PyObject *args, PyObject *kwargs) {
    static char *kw[] = {"memory_format", NULL};
    PyObject *fmt = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|O:is_contiguous", kw, &fmt)) return NULL;
    if (fmt != Py_None) return memory_format_call("is_contiguous_as", self, fmt, "is_contiguous");
    return PyBool_FromLong(em_tensor_is_contiguous(T(self)));
}
static PyObject *m_element_size(PyObject *self, PyObject *unused) {
    (void)unused;
    return PyLong_FromSize_t(em_dtype_size(T(self)->dtype));
}
static PyObject *m_output_nr(PyObject *self, PyObject *unused) {
    (void)unused;
    return PyLong_FromLong(em_grad_fn(T(self)) ? em_output_nr(T(self)) : 0);
}
static PyObject *m_storage_offset(PyObject *self, PyObject *unused) {
    (void)unused;
    return PyLong_FromLongLong(T(self)->offset);
}
/* _storage_size(): how many elements of this tensor's dtype its memory holds */
static PyObject *m_storage_size(PyObject *self, PyObject *unused) {
    (void)unused;
    return PyLong_FromSize_t(T(self)->storage->nbytes / em_dtype_size(T(self)->dtype));
}
/* _address(what): the first element's address, for ember's own code that
 * reads or writes the memory (saving, pickling, shared memory); a meta
 * tensor has none, and `what` names the reader in the error. */
static PyObject *m_address(PyObject *self, PyObject *what) {
    const char *w = PyUnicode_Check(what) ? PyUnicode_AsUTF8(what) : NULL;
    if (!w) return em_py_error(PyExc_TypeError, "_address(what): what must be a str");
    if (em_tensor_require_data(T(self), w) != EM_OK) return em_py_raise();
    if (T(self)->device.type != EM_DEVICE_CPU) {
        char dev[16];
        return em_py_error(PyExc_NotImplementedError, "%s reads tensors in host memory; this one is on %s (copy it "
                           "with .cpu() first)", w, em_device_str(T(self)->device, dev));
    }
    return PyLong_FromVoidPtr(em_tensor_data(T(self)));
}
static PyObject *m_data_ptr(PyObject *self, PyObject *unused) {
    (void)unused;
    /* (0 for a meta tensor, as PyTorch's: no memory) */
    return PyLong_FromVoidPtr(em_tensor_has_data(T(self)) ? em_tensor_data(T(self)) : NULL);
}

static PyObject *dim_or_all(PyObject *self, PyObject *args, const int64_t *vals, const char *what) {
    em_tensor *t = T(self);
    PyObject *dim = Py_None;
    if (!PyArg_ParseTuple(args, "|O", &dim)) return NULL;
    if (dim == Py_None) {
        if (vals == t->shape) return em_py_shape_tuple(vals, t->ndim);
        PyObject *r = PyTuple_New(t->ndim);
        for (int i = 0; r && i < t->ndim; i++) PyTuple_SET_ITEM(r, i, PyLong_FromLongLong(vals[i]));
        return r;
    }
    long long d = PyLong_AsLongLong(dim);
    if (d == -1 && PyErr_Occurred()) return NULL;
    if (t->ndim == 0)
        return em_py_error(PyExc_IndexError,
                           "%s: dimension specified as %lld but the tensor has no dimensions", what, d);
    int w;
    if (em_wrap_dim(what, d, t->ndim, &w) != EM_OK) return em_py_raise();
    return PyLong_FromLongLong(vals[w]);
}
static PyObject *m_size(PyObject *self, PyObject *args) {
    return dim_or_all(self, args, T(self)->shape, "size");
}
static PyObject *m_stride(PyObject *self, PyObject *args) {
    return dim_or_all(self, args, T(self)->strides, "stride");
}

static PyMethodDef tensor_methods[] = {
    {"neg", m_neg, METH_NOARGS, "-x"},
    {"exp", m_exp, METH_NOARGS, "e ** x, elementwise"},
    {"log", m_log, METH_NOARGS, "natural logarithm, elementwise"},
    {"tanh", m_tanh, METH_NOARGS, "hyperbolic tangent, elementwise"},
    {"sigmoid", m_sigmoid, METH_NOARGS, "1 / (1 + exp(-x)), elementwise"},
    {"relu", m_relu, METH_NOARGS, "max(x, 0), elementwise"},
    {"add", m_add, METH_O, "x + other"},
    {"sub", m_sub, METH_O, "x - other"},
    {"mul", m_mul, METH_O, "x * other"},
    {"div", m_div, METH_O, "x / other (true division)"},
    {"pow", m_pow, METH_O, "x ** exponent"},
    {"maximum", m_maximum, METH_O, "elementwise maximum (propagates NaN)"},
    {"matmul", m_matmul, METH_O, "matrix product with PyTorch's broadcasting rules"},
    {"sum", (PyCFunction)(void (*)(void))m_sum, METH_VARARGS | METH_KEYWORDS,
     "sum(dim=None, keepdim=False, dtype=None)"},
    {"mean", (PyCFunction)(void (*)(void))m_mean, METH_VARARGS | METH_KEYWORDS,
     "mean(dim=None, keepdim=False, dtype=None)"},
    {"reshape", m_reshape, METH_VARARGS, "reshape(*shape): a view when possible, else a copy"},
    {"view", m_view, METH_VARARGS, "view(*shape): a view sharing memory, or an error"},
    {"expand", m_expand, METH_VARARGS, "expand(*sizes): broadcast view (-1 keeps a size)"},
    {"permute", m_permute, METH_VARARGS, "permute(*dims): view with dims reordered"},
    {"transpose", m_transpose, METH_VARARGS, "transpose(dim0, dim1): view with two dims swapped"},
    {"t", m_t, METH_NOARGS, "transpose of a tensor with at most 2 dims"},
    {"contiguous", (PyCFunction)(void (*)(void))m_contiguous, METH_VARARGS | METH_KEYWORDS,
     "the tensor itself if laid out so (row-major by default), else a copy"},
    {"to", (PyCFunction)(void (*)(void))m_to, METH_VARARGS | METH_KEYWORDS, "to(dtype)"},
    {"float", m_float, METH_NOARGS, "to(ember.float32)"},
    {"double", m_double, METH_NOARGS, "to(ember.float64)"},
    {"long", m_long, METH_NOARGS, "to(ember.int64)"},
    {"bool", m_bool, METH_NOARGS, "to(ember.bool)"},
    {"detach", em_py_detach, METH_NOARGS, "a tensor sharing this one's memory, without history"},
    {"detach_", em_py_detach_, METH_NOARGS, "drops this tensor's history in place"},
    {"requires_grad_", (PyCFunction)(void (*)(void))em_py_requires_grad_,
     METH_VARARGS | METH_KEYWORDS, "requires_grad_(requires_grad=True): sets it, returns self"},
    {"item", m_item, METH_NOARGS, "the value of a one-element tensor as a Python number"},
    {"numel", m_numel, METH_NOARGS, "number of elements"},
    {"dim", m_dim, METH_NOARGS, "number of dimensions"},
    {"size", m_size, METH_VARARGS, "size(dim=None)"},
    {"stride", m_stride, METH_VARARGS, "stride(dim=None), in elements"},
    {"is_contiguous", (PyCFunction)(void (*)(void))m_is_contiguous, METH_VARARGS | METH_KEYWORDS,
     "row-major without gaps (or laid out as memory_format)?"},
    {"element_size", m_element_size, METH_NOARGS, "bytes per element"},
    {"_address", m_address, METH_O, "_address(what): the data's address, for ember's own readers"},
    {"data_ptr", m_data_ptr, METH_NOARGS, "address of the first element"},
    {"storage_offset", m_storage_offset, METH_NOARGS, "where the first element lies in the memory, in elements"},
    {"_storage_size", m_storage_size, METH_NOARGS, "how many elements the memory holds"},
    {"_output_nr", m_output_nr, METH_NOARGS, "which result of its grad_fn this tensor is"},
    {"__dlpack__", (PyCFunction)(void (*)(void))em_py_tensor_dlpack, METH_VARARGS | METH_KEYWORDS,
     "a DLPack capsule sharing this tensor's memory"},
    {"__dlpack_device__", em_py_tensor_dlpack_device, METH_NOARGS, "(device type, device id)"},
    {NULL, NULL, 0, NULL},
};

PyTypeObject em_py_TensorBase = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "ember._C._TensorBase",
    .tp_basicsize = sizeof(em_py_tensor),
    .tp_dealloc = tensor_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
    .tp_new = tensor_new_direct,
    .tp_as_number = &tensor_as_number,
    .tp_as_mapping = &tensor_as_mapping,
    .tp_as_buffer = &em_py_tensor_buffer,
    .tp_richcompare = richcompare,
    .tp_hash = tensor_hash,
    .tp_methods = tensor_methods,
    .tp_getset = tensor_getset,
    .tp_weaklistoffset = offsetof(em_py_tensor, weakreflist),
    .tp_doc = "The C part of ember.Tensor.",
};

int em_py_tensor_type_init(PyObject *module) {
    em_py_Size.tp_base = &PyTuple_Type;
    if (PyType_Ready(&em_py_TensorBase) < 0 || PyType_Ready(&em_py_Size) < 0) return -1;
    em_py_tensor_base = em_py_tensor_class = &em_py_TensorBase; /* (wrap.c's: the type it wraps in) */
    Py_INCREF(&em_py_TensorBase);
    Py_INCREF(&em_py_Size);
    if (PyModule_AddObject(module, "_TensorBase", (PyObject *)&em_py_TensorBase) < 0) return -1;
    if (PyModule_AddObject(module, "Size", (PyObject *)&em_py_Size) < 0) return -1;
    return 0;
}
