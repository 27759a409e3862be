/*
 * convert.c - Python arguments to ember values: dtypes, shapes, dims,
 * devices, and Python numbers as operands.
 */
#include "ember/cuda.h"
#include "ember/alloc.h"
#include "ember_py.h"

/* ---- dtype objects: ember.float32, ... ---- */

typedef struct {
    PyObject_HEAD em_dtype dt;
} dtype_object;

static PyObject *dtype_objects[EM_DTYPE_COUNT];

static PyObject *dtype_repr(PyObject *self) {
    return PyUnicode_FromFormat("ember.%s", em_dtype_long_name(((dtype_object *)self)->dt));
}

static PyObject *dtype_is_floating_point(PyObject *self, void *closure) {
    (void)closure;
    return PyBool_FromLong(em_dtype_is_float(((dtype_object *)self)->dt));
}

static PyObject *dtype_itemsize(PyObject *self, void *closure) {
    (void)closure;
    return PyLong_FromSize_t(em_dtype_size(((dtype_object *)self)->dt));
}

static PyObject *dtype_reduce(PyObject *self, PyObject *unused) {
    (void)unused; /* pickles as the module attribute it is */
    return PyUnicode_FromString(em_dtype_long_name(((dtype_object *)self)->dt));
}

static PyObject *dtype_module(PyObject *self, void *closure) {
    (void)self; /* pickle finds ember.<name> here without scanning sys.modules */
    (void)closure;
    return PyUnicode_FromString("ember");
}

static PyGetSetDef dtype_getset[] = {
    {"__module__", dtype_module, NULL, "the module the dtype objects live in", NULL},
    {"is_floating_point", dtype_is_floating_point, NULL, "True for float dtypes", NULL},
    {"itemsize", dtype_itemsize, NULL, "bytes per element", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyMethodDef dtype_methods[] = {
    {"__reduce__", dtype_reduce, METH_NOARGS, NULL},
    {NULL, NULL, 0, NULL},
};

PyTypeObject em_py_dtype_type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "ember.dtype",
    .tp_basicsize = sizeof(dtype_object),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_repr = dtype_repr,
    .tp_getset = dtype_getset,
    .tp_methods = dtype_methods,
    .tp_doc = "The element type of a tensor: ember.float32, float64, float16, bfloat16, int64, "
              "int32, int16, int8, uint8 or bool.",
};

int em_py_module_init_dtypes(PyObject *module) {
    if (PyType_Ready(&em_py_dtype_type) < 0) return -1;
    Py_INCREF(&em_py_dtype_type);
    if (PyModule_AddObject(module, "dtype", (PyObject *)&em_py_dtype_type) < 0) return -1;
    for (int i = 0; i < EM_DTYPE_COUNT; i++) {
        dtype_object *d = PyObject_New(dtype_object, &em_py_dtype_type);
        if (!d) return -1;
        d->dt = (em_dtype)i;
        dtype_objects[i] = (PyObject *)d;
        Py_INCREF(d);
        if (PyModule_AddObject(module, em_dtype_long_name((em_dtype)i), (PyObject *)d) < 0) {
            Py_DECREF(d);
            return -1;
        }
    }
    return 0;
}

PyObject *em_py_dtype_object(em_dtype dt) { return dtype_objects[dt]; }

int em_py_dtype_arg(PyObject *o, em_dtype dflt, em_dtype *out) {
    if (!o || o == Py_None) {
        *out = dflt;
        return 0;
    }
    if (o == (PyObject *)&PyFloat_Type || o == (PyObject *)&PyLong_Type ||
        o == (PyObject *)&PyBool_Type) { /* dtype=float etc., as in PyTorch */
        *out = o == (PyObject *)&PyFloat_Type  ? EM_DTYPE_F64
               : o == (PyObject *)&PyLong_Type ? EM_DTYPE_I64
                                               : EM_DTYPE_BOOL;
        return 0;
    }
    if (Py_TYPE(o) != &em_py_dtype_type) {
        /* a dtype ember names but lacks (ember.complex64: _unsupported.py)
         * says why, as a NotImplementedError */
        PyObject *why = PyObject_HasAttrString(o, "_unsupported") ? PyObject_GetAttrString(o, "_unsupported") : NULL;
        if (why) {
            PyErr_SetObject(PyExc_NotImplementedError, why);
            Py_DECREF(why);
            return -1;
        }
        PyErr_Format(PyExc_TypeError, "dtype must be an ember dtype such as ember.float32, not %s",
                     PyUnicode_Check(o) ? "a str" : Py_TYPE(o)->tp_name);
        return -1;
    }
    *out = ((dtype_object *)o)->dt;
    return 0;
}

/* ---- shapes and dims ---- */

static int int_item(PyObject *o, const char *what, int64_t *out) {
    if (PyBool_Check(o) || !PyIndex_Check(o)) {
        PyErr_Format(PyExc_TypeError, "%s: expected an int, got %s", what, Py_TYPE(o)->tp_name);
        return -1;
    }
    long long v = PyLong_AsLongLong(o);
    if (v == -1 && PyErr_Occurred()) return -1;
    *out = v;
    return 0;
}

static int int_sequence(PyObject *seq, const char *what, int64_t *out, int *n) {
    PyObject *fast = PySequence_Fast(seq, "expected a sequence of ints");
    if (!fast) return -1;
    Py_ssize_t len = PySequence_Fast_GET_SIZE(fast);
    if (len > EM_MAX_DIMS) {
        Py_DECREF(fast);
        PyErr_Format(PyExc_ValueError, "%s: at most %d dimensions, got %zd", what, EM_MAX_DIMS, len);
        return -1;
    }
    for (Py_ssize_t i = 0; i < len; i++)
        if (int_item(PySequence_Fast_GET_ITEM(fast, i), what, &out[i]) < 0) {
            Py_DECREF(fast);
            return -1;
        }
    *n = (int)len;
    Py_DECREF(fast);
    return 0;
}

int em_py_shape_args(PyObject *args, const char *what, int64_t *shape, int *n) {
    Py_ssize_t na = PyTuple_GET_SIZE(args);
    if (na == 1 && !PyIndex_Check(PyTuple_GET_ITEM(args, 0)))
        return int_sequence(PyTuple_GET_ITEM(args, 0), what, shape, n);
    return int_sequence(args, what, shape, n);
}

int em_py_dims_arg(PyObject *o, const char *what, int64_t *dims, int *n) {
    if (!o || o == Py_None) {
        *n = 0;
        return 0;
    }
    if (PyIndex_Check(o)) {
        *n = 1;
        return int_item(o, what, dims);
    }
    return int_sequence(o, what, dims, n); /* an empty list reduces all, as in PyTorch */
}

int em_py_device_arg(PyObject *o, const char *what, em_device *out) {
    *out = em_cpu();
    if (!o || o == Py_None) return 0;
    if (PyLong_Check(o)) { /* an index alone means a CUDA device, as in PyTorch */
        PyErr_Format(PyExc_NotImplementedError, "%s: device %S (CUDA) is not available: this build has CPU "
                     "and meta tensors only", what, o);
        return -1;
    }
    PyObject *s = PyObject_Str(o);
    if (!s) return -1;
    const char *d = PyUnicode_AsUTF8(s);
    int rc = -1;
    em_device dev;
    if (!d) {
    } else if (!em_device_parse(d, &dev)) {
        PyErr_Format(PyExc_RuntimeError, "%s: Expected one of cpu, cuda, meta device type at start of device string: "
                     "%s", what, d);
    } else if (dev.type == EM_DEVICE_CUDA && !em_cuda_available(NULL, 0)) {
        char why[1024];
        em_cuda_available(why, sizeof why);
        PyErr_Format(PyExc_NotImplementedError, "%s: device '%s' is not available: tensors live on the CPU (or "
                     "meta) only: %s", what, d, why);
    } else {
        *out = dev;
        rc = 0;
    }
    Py_DECREF(s);
    return rc;
}

/* ---- Python numbers as operands ---- */

em_dtype em_py_number_ref(em_op op, em_dtype tensors_result) {
    /* An op that computes integers in floating point (true division) takes
     * a number's value as it is, not wrapped into the integer dtype. */
    if (em_op_get(op)->promote == EM_PROMOTE_INT_TO_FLOAT && !em_dtype_is_float(tensors_result))
        return em_default_float();
    return tensors_result;
}

em_tensor *em_py_number_operand(PyObject *o, em_op op, int pos, em_dtype tensors_result) {
    if (op == EM_OP_POW && pos == 1 && PyLong_Check(o) && !PyBool_Check(o) &&
        !em_dtype_is_float(tensors_result) && _PyLong_Sign(o) < 0) {
        /* before the number wraps into an unsigned dtype */
        PyErr_SetString(PyExc_RuntimeError, "pow: Integers to negative integer powers are not allowed");
        return NULL;
    }
    return em_py_operand_dtype(o, em_py_number_ref(op, tensors_result));
}

em_tensor *em_py_operand_dtype(PyObject *o, em_dtype ref) {
    if (em_py_is_tensor(o)) {
        em_tensor *t = em_py_tensor_of(o);
        em_tensor_retain(t);
        return t;
    }
    em_tensor *t = NULL;
    if (PyBool_Check(o)) {
        /* bool is the lowest category, so a 0-d bool promotes exactly like a
         * wrapped bool, and ops that refuse bool operands (x - True) see it. */
        t = em_tensor_scalar(o == Py_True, EM_DTYPE_BOOL);
    } else if (PyLong_Check(o)) {
        int overflow = 0;
        long long v = PyLong_AsLongLongAndOverflow(o, &overflow);
        em_dtype dt = em_scalar_operand_dtype(ref, EM_CAT_INT);
        if (overflow && !em_dtype_is_float(dt)) {
            PyErr_SetString(PyExc_RuntimeError,
                            "value cannot be converted to type int64 without overflow");
            return NULL;
        }
        t = overflow ? em_tensor_scalar(PyLong_AsDouble(o), dt) : em_tensor_scalar_i64(v, dt);
    } else if (PyFloat_Check(o)) {
        t = em_tensor_scalar(PyFloat_AS_DOUBLE(o), em_scalar_operand_dtype(ref, EM_CAT_FLOAT));
    } else {
        return NULL; /* not an operand: the caller returns NotImplemented */
    }
    if (!t) {
        em_py_raise();
        return NULL;
    }
    t->is_wrapped_number = true;
    return t;
}

/* A sequence of tensors (or one tensor) as a new array of borrowed
 * pointers; *n its length. `nones`: None entries allowed (left NULL). */
em_tensor **em_py_tensor_list(PyObject *o, const char *what, bool nones, int *n) {
    PyObject *seq = em_py_is_tensor(o) ? PyTuple_Pack(1, o) : PySequence_Tuple(o);
    if (!seq) {
        PyErr_Clear();
        PyErr_Format(PyExc_TypeError, "%s must be a Tensor or a sequence of Tensors, not %s", what,
                     Py_TYPE(o)->tp_name);
        return NULL;
    }
    Py_ssize_t k = PyTuple_GET_SIZE(seq);
    em_tensor **r = em_malloc((size_t)(k ? k : 1) * sizeof *r);
    if (!r) {
        Py_DECREF(seq);
        PyErr_NoMemory();
        return NULL;
    }
    for (Py_ssize_t i = 0; i < k; i++) {
        PyObject *e = PyTuple_GET_ITEM(seq, i);
        if (nones && e == Py_None) {
            r[i] = NULL;
        } else if (em_py_is_tensor(e)) {
            r[i] = em_py_tensor_of(e); /* borrowed: the caller's objects keep them alive */
        } else {
            PyErr_Format(PyExc_TypeError, "%s[%zd] must be a Tensor%s, not %s", what, i,
                         nones ? " or None" : "", Py_TYPE(e)->tp_name);
            em_free(r);
            Py_DECREF(seq);
            return NULL;
        }
    }
    Py_DECREF(seq);
    *n = (int)k;
    return r;
}
