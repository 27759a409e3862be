/*
 * tensor_new.c - tensors from Python data: ember.tensor (always a copy),
 * ember.from_numpy (zero-copy, through the buffer protocol), and back to
 * Python numbers (.item()).
 */
#include "ember_py.h"

/* ---- zero-copy from buffers ---- */

static void release_buffer(void *ctx, void *data, size_t nbytes) {
    (void)data;
    (void)nbytes;
    PyGILState_STATE gs = PyGILState_Ensure(); /* the last reference may drop anywhere */
    PyBuffer_Release((Py_buffer *)ctx);
    PyMem_RawFree(ctx);
    PyGILState_Release(gs);
}

/* The dtype of a PEP 3118 element format (native or little-endian, one
 * item): the formats memoryview and NumPy produce, with the itemsize
 * deciding what the C types whose size varies ('l') mean. */
static bool format_dtype(const char *f, Py_ssize_t itemsize, em_dtype *out) {
    if (!f) f = "B";
    if (*f == '<' || *f == '=' || *f == '@') f++;
    if (!f[0] || f[1]) return false;
    switch (*f) {
    case 'f': *out = EM_DTYPE_F32; return itemsize == 4;
    case 'd': *out = EM_DTYPE_F64; return itemsize == 8;
    case 'e': *out = EM_DTYPE_F16; return itemsize == 2;
    case 'l': /* C long: 8 bytes on LP64, 4 on Windows */
        *out = itemsize == 4 ? EM_DTYPE_I32 : EM_DTYPE_I64;
        return itemsize == 4 || itemsize == 8;
    case 'q': *out = EM_DTYPE_I64; return itemsize == 8;
    case 'i': *out = EM_DTYPE_I32; return itemsize == 4;
    case 'h': *out = EM_DTYPE_I16; return itemsize == 2;
    case 'b': *out = EM_DTYPE_I8; return itemsize == 1;
    case 'B': *out = EM_DTYPE_U8; return itemsize == 1;
    case '?': *out = EM_DTYPE_BOOL; return itemsize == 1;
    default: return false;
    }
}

static void unsupported_format(const Py_buffer *view) {
    PyErr_Format(PyExc_TypeError,
                 "can't convert an array of element format '%s' (itemsize %zd); the supported "
                 "types are float32, float64, float16, int64, int32, int16, int8, uint8 and bool",
                 view->format ? view->format : "B", view->itemsize);
}

/* A tensor sharing the memory of a buffer-protocol object (a NumPy array). */
static em_tensor *from_buffer(PyObject *obj) {
    Py_buffer *view = PyMem_RawMalloc(sizeof *view);
    if (!view) {
        PyErr_NoMemory();
        return NULL;
    }
    if (PyObject_GetBuffer(obj, view, PyBUF_RECORDS) < 0) { /* strided, writable, with format */
        PyErr_Clear();
        if (PyObject_GetBuffer(obj, view, PyBUF_RECORDS_RO) < 0) {
            PyMem_RawFree(view);
            return NULL;
        }
        if (PyErr_WarnEx(PyExc_UserWarning,
                         "the given NumPy array is not writable; ember does not support "
                         "read-only tensors, so writing to this tensor is undefined behaviour",
                         1) < 0)
            goto fail;
    }
    em_dtype dt;
    if (!format_dtype(view->format, view->itemsize, &dt)) {
        unsupported_format(view);
        goto fail;
    }
    if (view->ndim > EM_MAX_DIMS) {
        PyErr_Format(PyExc_ValueError, "arrays with more than %d dimensions are not supported",
                     EM_MAX_DIMS);
        goto fail;
    }
    int64_t shape[EM_MAX_DIMS], strides[EM_MAX_DIMS];
    int64_t extent = 1;
    bool empty = false;
    for (int i = 0; i < view->ndim; i++) {
        shape[i] = view->shape[i];
        Py_ssize_t st = view->strides ? view->strides[i] : 0;
        if (st < 0) {
            PyErr_SetString(PyExc_ValueError,
                            "at least one stride in the given array is negative; ember tensors "
                            "cannot have negative strides (copy the array first)");
            goto fail;
        }
        if (st % view->itemsize) {
            PyErr_SetString(PyExc_ValueError,
                            "the given array has strides that are not a multiple of its element "
                            "size (copy the array first)");
            goto fail;
        }
        strides[i] = st / view->itemsize;
        if (shape[i] == 0) empty = true;
    }
    if (!view->strides) em_contiguous_strides(shape, view->ndim, strides); /* C-contiguous */
    for (int i = 0; i < view->ndim; i++) extent += (shape[i] - 1) * strides[i];
    size_t nbytes = empty ? 0 : (size_t)extent * (size_t)view->itemsize;
    em_storage *s = em_storage_wrap(view->buf, nbytes, em_cpu(), release_buffer, view);
    if (!s) {
        em_py_raise();
        goto fail;
    }
    em_tensor *t = em_tensor_from_storage(s, dt, 0, shape, strides, view->ndim);
    em_storage_release(s); /* on failure this also releases the buffer */
    if (!t) em_py_raise();
    return t;
fail:
    PyBuffer_Release(view);
    PyMem_RawFree(view);
    return NULL;
}

/* Copies element by element through byte strides of any sign. */
static void copy_strided(char *dst, const char *src, const Py_buffer *v, int d, size_t item,
                         int64_t *pos) {
    if (d == v->ndim) {
        memcpy(dst + (size_t)*pos * item, src, item);
        (*pos)++;
        return;
    }
    for (Py_ssize_t i = 0; i < v->shape[d]; i++)
        copy_strided(dst, src + i * (v->strides ? v->strides[d] : 0), v, d + 1, item, pos);
}

/* A new contiguous tensor with a copy of a buffer's contents: what
 * ember.tensor(array) does, for any strides and read-only arrays alike. */
static em_tensor *copy_buffer(PyObject *obj) {
    Py_buffer view;
    if (PyObject_GetBuffer(obj, &view, PyBUF_RECORDS_RO) < 0) return NULL;
    em_tensor *t = NULL;
    em_dtype dt;
    if (!format_dtype(view.format, view.itemsize, &dt)) {
        unsupported_format(&view);
    } else if (view.ndim > EM_MAX_DIMS) {
        PyErr_Format(PyExc_ValueError, "arrays with more than %d dimensions are not supported",
                     EM_MAX_DIMS);
    } else {
        int64_t shape[EM_MAX_DIMS];
        for (int i = 0; i < view.ndim; i++) shape[i] = view.shape[i];
        if (!(t = em_tensor_empty(shape, view.ndim, dt, em_cpu()))) {
            em_py_raise();
        } else if (t->numel && (!view.strides || PyBuffer_IsContiguous(&view, 'C'))) {
            memcpy(em_tensor_data(t), view.buf, (size_t)t->numel * em_dtype_size(dt));
        } else if (t->numel) {
            int64_t pos = 0;
            copy_strided(em_tensor_data(t), view.buf, &view, 0, (size_t)view.itemsize, &pos);
        }
    }
    PyBuffer_Release(&view);
    return t;
}

PyObject *em_py_from_numpy(PyObject *self, PyObject *arr) {
    (void)self;
    if (!PyObject_CheckBuffer(arr) || PyBytes_Check(arr) || PyByteArray_Check(arr))
        return em_py_error(PyExc_TypeError, "from_numpy: expected a NumPy array, got %s",
                           Py_TYPE(arr)->tp_name);
    em_tensor *t = from_buffer(arr);
    return t ? em_py_wrap(t) : NULL;
}

/* _storage_view(base, offset, size, stride): a tensor over base's storage
 * with the given geometry in elements of base's dtype, every reachable
 * element checked to lie inside it (ValueError otherwise). For readers of
 * files whose tensors are views of shared storages (PyTorch checkpoints);
 * not a differentiable op, so base must not require grad. */
static int int64_tuple(PyObject *o, const char *what, int64_t *out, int *n) {
    PyObject *seq = PySequence_Fast(o, "_storage_view: size and stride must be sequences");
    if (!seq) return -1;
    Py_ssize_t len = PySequence_Fast_GET_SIZE(seq);
    if (len > EM_MAX_DIMS) {
        Py_DECREF(seq);
        PyErr_Format(PyExc_ValueError, "tensors have at most %d dimensions, got a %s of %zd",
                     EM_MAX_DIMS, what, len);
        return -1;
    }
    for (Py_ssize_t i = 0; i < len; i++) {
        long long v = PyLong_AsLongLong(PySequence_Fast_GET_ITEM(seq, i));
        if (v == -1 && PyErr_Occurred()) {
            Py_DECREF(seq);
            return -1;
        }
        out[i] = v;
    }
    *n = (int)len;
    Py_DECREF(seq);
    return 0;
}

PyObject *em_py_storage_view(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *base, *size, *stride;
    long long offset;
    if (!PyArg_ParseTuple(args, "OLOO:_storage_view", &base, &offset, &size, &stride)) return NULL;
    if (!em_py_is_tensor(base))
        return em_py_error(PyExc_TypeError, "_storage_view: expected a tensor, got %s",
                           Py_TYPE(base)->tp_name);
    em_tensor *b = em_py_tensor_of(base);
    if (em_requires_grad(b))
        return em_py_error(PyExc_ValueError, "_storage_view: the base must not require grad");
    int64_t shape[EM_MAX_DIMS], strides[EM_MAX_DIMS];
    int ndim, nstrides;
    if (int64_tuple(size, "size", shape, &ndim) < 0 || int64_tuple(stride, "stride", strides, &nstrides) < 0)
        return NULL;
    if (ndim != nstrides)
        return em_py_error(PyExc_ValueError, "_storage_view: %d sizes but %d strides", ndim, nstrides);
    return em_py_wrap(em_tensor_from_storage(b->storage, b->dtype, offset, shape, strides, ndim));
}

/* ---- nested Python data ---- */

static bool is_seq(PyObject *o) { return PyList_Check(o) || PyTuple_Check(o); }

/* The promotion category of a leaf, or -1 (with TypeError) if it is not a
 * number. */
static int leaf_category(PyObject *o) {
    if (PyBool_Check(o)) return EM_CAT_BOOL;
    if (PyLong_Check(o)) return EM_CAT_INT;
    if (PyFloat_Check(o)) return EM_CAT_FLOAT;
    if (em_py_is_tensor(o) && em_py_tensor_of(o)->numel == 1)
        return em_dtype_category_of(em_py_tensor_of(o)->dtype);
    if (PyIndex_Check(o)) return EM_CAT_INT;
    if (PyNumber_Check(o) && !is_seq(o)) return EM_CAT_FLOAT;
    PyErr_Format(PyExc_TypeError, "tensor(): could not convert an element of type %s to a number",
                 Py_TYPE(o)->tp_name);
    return -1;
}

typedef struct {
    int ndim;
    int64_t shape[EM_MAX_DIMS];
    int cat;
    char *out;
    em_dtype dt;
    int64_t pos;
} walker;

/* Whether integer dtype dt holds v, by PyTorch's rule (c10::overflows):
 * uint8 also takes negatives down to -255, which wrap. */
static bool fits(em_dtype dt, double v) {
    double lo, hi; /* [lo, hi) */
    switch (dt) {
    case EM_DTYPE_I32: lo = -2147483648.0, hi = 2147483648.0; break;
    case EM_DTYPE_I16: lo = -32768.0, hi = 32768.0; break;
    case EM_DTYPE_I8: lo = -128.0, hi = 128.0; break;
    case EM_DTYPE_U8: lo = -255.0, hi = 256.0; break;
    default: lo = -9223372036854775808.0, hi = 9223372036854775808.0; break;
    }
    return v >= lo && v < hi; /* false for NaN */
}

static int overflow(em_dtype dt) {
    PyErr_Format(PyExc_RuntimeError, "value cannot be converted to type %s without overflow",
                 em_dtype_long_name(dt));
    return -1;
}

static int store_leaf(walker *w, PyObject *o) {
    if (em_py_is_tensor(o)) {
        em_tensor *t = em_py_tensor_of(o);
        PyObject *v = em_py_tensor_item(t, "tensor() of a tensor element");
        if (!v) return -1;
        int r = store_leaf(w, v);
        Py_DECREF(v);
        return r;
    }
    char *p = w->out + w->pos * (int64_t)em_dtype_size(w->dt);
    w->pos++;
    if (w->dt == EM_DTYPE_BOOL) {
        int b = PyObject_IsTrue(o);
        if (b < 0) return -1;
        *(bool *)p = b;
        return 0;
    }
    if (em_dtype_is_float(w->dt) || PyFloat_Check(o)) {
        double v = PyFloat_AsDouble(o);
        if (v == -1.0 && PyErr_Occurred()) return -1;
        if (!em_dtype_is_float(w->dt) && !fits(w->dt, trunc(v))) return overflow(w->dt);
        em_store_f64(p, w->dt, v);
        return 0;
    }
    /* integers (and bools) into an integer dtype: exact, wrapping into the
     * narrower types as a C cast does */
    long long v = PyLong_AsLongLong(o);
    if (v == -1 && PyErr_Occurred()) {
        if (PyErr_ExceptionMatches(PyExc_OverflowError)) {
            PyErr_Clear();
            PyErr_SetString(PyExc_RuntimeError, "Overflow when unpacking long");
        }
        return -1;
    }
    if (w->dt != EM_DTYPE_I64 && !fits(w->dt, (double)v)) return overflow(w->dt); /* (int64: checked above) */
    em_store_i64(p, w->dt, v);
    return 0;
}

/* Checks the nesting of `o` below dim `d` against the inferred shape; with
 * w->out set, stores the leaves; otherwise collects their category. */
static int walk(walker *w, PyObject *o, int d) {
    if (d == w->ndim) {
        if (is_seq(o)) {
            PyErr_Format(PyExc_TypeError, "expected a number at dim %d, got a sequence", d);
            return -1;
        }
        if (w->out) return store_leaf(w, o);
        int c = leaf_category(o);
        if (c < 0) return -1;
        if (c > w->cat) w->cat = c;
        return 0;
    }
    if (!is_seq(o)) {
        PyErr_Format(PyExc_TypeError, "expected sequence of length %lld at dim %d (got %s)",
                     (long long)w->shape[d], d, Py_TYPE(o)->tp_name);
        return -1;
    }
    Py_ssize_t n = PySequence_Fast_GET_SIZE(o);
    if (n != w->shape[d]) {
        PyErr_Format(PyExc_ValueError, "expected sequence of length %lld at dim %d (got %zd)",
                     (long long)w->shape[d], d, n);
        return -1;
    }
    for (Py_ssize_t i = 0; i < n; i++)
        if (walk(w, PySequence_Fast_GET_ITEM(o, i), d + 1) < 0) return -1;
    return 0;
}

static em_tensor *from_nested(PyObject *data, PyObject *dtype_arg) {
    walker w = {0};
    w.cat = EM_CAT_BOOL;
    for (PyObject *o = data; is_seq(o); o = PySequence_Fast_GET_ITEM(o, 0)) {
        if (w.ndim == EM_MAX_DIMS) {
            PyErr_Format(PyExc_ValueError, "tensor(): at most %d dimensions", EM_MAX_DIMS);
            return NULL;
        }
        w.shape[w.ndim++] = PySequence_Fast_GET_SIZE(o);
        if (PySequence_Fast_GET_SIZE(o) == 0) break;
    }
    bool empty = em_shape_numel(w.shape, w.ndim) == 0;
    if (!empty && walk(&w, data, 0) < 0) return NULL;
    em_dtype dflt = w.cat == EM_CAT_FLOAT ? em_default_float()
                    : w.cat == EM_CAT_INT ? EM_DTYPE_I64
                    : empty ? em_default_float()
                            : EM_DTYPE_BOOL;
    if (em_py_dtype_arg(dtype_arg, dflt, &w.dt) < 0) return NULL;
    em_tensor *t = em_tensor_empty(w.shape, w.ndim, w.dt, em_cpu());
    if (!t) {
        em_py_raise();
        return NULL;
    }
    w.out = em_tensor_data(t);
    if (!empty && walk(&w, data, 0) < 0) {
        em_tensor_release(t);
        return NULL;
    }
    return t;
}

static PyObject *tensor_new(PyObject *data, PyObject *dtype);

PyObject *em_py_tensor_new(PyObject *self, PyObject *args, PyObject *kwargs) {
    (void)self;
    static char *kw[] = {"data", "dtype", "device", NULL};
    PyObject *data, *dtype = Py_None, *device = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O|O$O:tensor", kw, &data, &dtype, &device))
        return NULL;
    em_device dev;
    if (em_py_device_arg(device, "tensor", &dev) < 0) return NULL;
    PyObject *r = tensor_new(data, dtype);
    if (!r || dev.type == EM_DEVICE_CPU) return r;
    em_tensor *moved = em_to_device(em_py_tensor_of(r), dev);
    Py_DECREF(r);
    return em_py_wrap(moved);
}

/* ember.tensor(data, dtype) on the CPU. */
static PyObject *tensor_new(PyObject *data, PyObject *dtype) {
    em_tensor *src = NULL;
    if (em_py_is_tensor(data)) {
        src = em_py_tensor_of(data);
        em_tensor_retain(src);
    } else if (PyObject_CheckBuffer(data) && !PyBytes_Check(data) && !PyByteArray_Check(data)) {
        /* a copy of memory whose contents nothing guards: a trace cannot
         * take it for a constant (ember.from_numpy shares it instead) */
        em_note_event(EM_EVENT_MUTATION, "copying a NumPy array (or another buffer) into a tensor (its contents "
                      "are not guarded; pass it as an argument, or share it with ember.from_numpy)", NULL);
        if (!(src = copy_buffer(data))) return NULL;
    }
    if (src) { /* always a copy, like torch.tensor (a buffer is copied already) */
        em_dtype dt;
        if (em_py_dtype_arg(dtype, src->dtype, &dt) < 0) {
            em_tensor_release(src);
            return NULL;
        }
        if (dt == src->dtype && !em_py_is_tensor(data)) return em_py_wrap(src);
        em_tensor *t = em_cast(src, dt);
        em_tensor_release(src);
        return em_py_wrap(t);
    }
    if (PyList_Check(data) || PyTuple_Check(data)) {
        /* Fast sequences throughout: lists and tuples only. */
        em_tensor *t = from_nested(data, dtype);
        return t ? em_py_wrap(t) : NULL;
    }
    walker w = {0};
    int c = leaf_category(data);
    if (c < 0) return NULL;
    em_dtype dflt = c == EM_CAT_FLOAT ? em_default_float() : c == EM_CAT_INT ? EM_DTYPE_I64 : EM_DTYPE_BOOL;
    if (em_py_dtype_arg(dtype, dflt, &w.dt) < 0) return NULL;
    em_tensor *t = em_tensor_empty(NULL, 0, w.dt, em_cpu());
    if (!t) return em_py_raise();
    w.out = em_tensor_data(t);
    if (store_leaf(&w, data) < 0) {
        em_tensor_release(t);
        return NULL;
    }
    return em_py_wrap(t);
}

PyObject *em_py_tensor_item(em_tensor *t, const char *what) {
    if (em_tensor_require_data(t, what) != EM_OK) return em_py_raise();
    em_note_host_sync(what, t);
    em_tensor *h = em_to_device(t, em_cpu()); /* (a device's value: copied over, which waits for it) */
    if (!h) return em_py_raise();
    const void *p = em_tensor_data(h);
    PyObject *r = h->dtype == EM_DTYPE_BOOL        ? PyBool_FromLong(*(const bool *)p)
                  : em_dtype_is_float(h->dtype) ? PyFloat_FromDouble(em_load_f64(p, h->dtype))
                                                : PyLong_FromLongLong(em_load_i64(p, h->dtype));
    em_tensor_release(h);
    return r;
}
