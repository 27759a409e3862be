/*
 * interop.c - exchanging tensors with other libraries without copying:
 * DLPack both ways (Tensor.__dlpack__, __dlpack_device__, ember.from_dlpack)
 * and the buffer protocol (memoryview(t), NumPy's PEP 3118 path). Pickling
 * is in python/ember/_tensor.py.
 *
 * Contract: every export keeps the tensor's memory alive for as long as the
 * consumer holds it (a DLPack capsule or managed tensor retains the
 * em_tensor; a Py_buffer holds the Python object), and every import keeps
 * the producer's memory alive for as long as any ember view of it lives (the
 * storage's release calls the producer's deleter). Nothing here aborts on
 * bad input: malformed capsules, unsupported dtypes or devices and
 * impossible buffer requests raise Python exceptions.
 *
 * Depends on the runtime's public headers and ember_py.h only. The dtype
 * tables below cover every em_dtype; the static assertion makes a new dtype
 * fail to compile until they are extended.
 */
#include "ember/cuda.h"
#include "ember_py.h"

#include "ember/dlpack.h"

static const char CAPSULE_NAME[] = "dltensor";
static const char USED_CAPSULE_NAME[] = "used_dltensor";

_Static_assert(EM_DTYPE_COUNT == 10, "a new dtype needs a PEP 3118 format here");

/* ember dtype -> PEP 3118 (struct module) format, native order and size.
 * bfloat16 has none. */
static const char *const buffer_formats[EM_DTYPE_COUNT] = {
    [EM_DTYPE_F32] = "f", [EM_DTYPE_F64] = "d",  [EM_DTYPE_F16] = "e", [EM_DTYPE_BF16] = NULL,
    [EM_DTYPE_I64] = "q", [EM_DTYPE_I32] = "i",  [EM_DTYPE_I16] = "h", [EM_DTYPE_I8] = "b",
    [EM_DTYPE_U8] = "B",  [EM_DTYPE_BOOL] = "?",
};

/* "float64", "complex64", "int4x2"... for error messages ("unknown8" for a code
 * DLPack 0.8 does not define; the caller prints the numbers too). */
static void dl_dtype_str(DLDataType d, char *buf, size_t size) {
    static const char *codes[] = {"int", "uint", "float", "opaque", "bfloat", "complex", "bool"};
    const char *code = d.code < sizeof codes / sizeof *codes ? codes[d.code] : "unknown";
    if (d.lanes == 1)
        snprintf(buf, size, "%s%u", code, (unsigned)d.bits);
    else
        snprintf(buf, size, "%s%ux%u", code, (unsigned)d.bits, (unsigned)d.lanes);
}

/* "cuda:0", "rocm:1"... for error messages (DLDeviceType values). */
static void dl_device_str(DLDevice d, char *buf, size_t size) {
    static const char *names[] = {NULL,     "cpu",       "cuda",    "cuda_host",    "opencl",
                                  NULL,     NULL,        "vulkan",  "metal",        "vpi",
                                  "rocm",   "rocm_host", "ext_dev", "cuda_managed", "oneapi",
                                  "webgpu", "hexagon"};
    const char *n = d.device_type >= 0 && d.device_type < (int)(sizeof names / sizeof *names)
                        ? names[d.device_type]
                        : NULL;
    if (n)
        snprintf(buf, size, "%s:%d", n, (int)d.device_id);
    else
        snprintf(buf, size, "device type %d:%d", (int)d.device_type, (int)d.device_id);
}

static PyObject *device_error(DLDevice d) {
    char dev[48];
    dl_device_str(d, dev, sizeof dev);
    if (em_cuda_available(NULL, 0))
        return em_py_error(PyExc_RuntimeError,
                           "from_dlpack: the tensor is on %s (DLPack device type %d); ember tensors "
                           "live in CPU memory and on this machine's CUDA devices (%d) only: copy it to "
                           "the CPU first (for example with .cpu())",
                           dev, (int)d.device_type, em_cuda_device_count());
    return em_py_error(PyExc_RuntimeError,
                       "from_dlpack: the tensor is on %s (DLPack device type %d); ember tensors "
                       "live in CPU memory only: copy it to the CPU first (for example with "
                       ".cpu())",
                       dev, (int)d.device_type);
}

/* ---- export: Tensor.__dlpack__ ---- */

/* What __dlpack__ hands out: the managed tensor with its geometry inline,
 * so one allocation (and one free in the deleter) covers it all. */
typedef struct {
    DLManagedTensor managed; /* first: the deleter casts back */
    int64_t shape[EM_MAX_DIMS];
    int64_t strides[EM_MAX_DIMS];
} exported_tensor;

/* The deleter consumers call when done (from any thread, with or without the
 * GIL): drops the reference __dlpack__ took and frees the block. Raw
 * allocator calls only, which need no GIL. */
static void exported_deleter(DLManagedTensor *self) {
    em_tensor_release((em_tensor *)self->manager_ctx); /* the capsule's reference */
    PyMem_RawFree(self); /* self is the exported_tensor's first member */
}

/* Destructor of the capsule __dlpack__ returns. A consumer renames the
 * capsule "used_dltensor" and takes over the managed tensor; only a capsule
 * that was never consumed still owns it. */
static void capsule_destructor(PyObject *capsule) {
    if (!PyCapsule_IsValid(capsule, CAPSULE_NAME)) return; /* consumed: not ours */
    DLManagedTensor *m = PyCapsule_GetPointer(capsule, CAPSULE_NAME);
    if (m && m->deleter) m->deleter(m);
}

PyObject *em_py_tensor_dlpack(PyObject *self, PyObject *args, PyObject *kwargs) {
    static char *kw[] = {"stream", NULL};
    PyObject *stream = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|O:__dlpack__", kw, &stream)) return NULL;
    em_tensor *t = em_py_tensor_of(self); /* borrowed */
    bool cuda = t->device.type == EM_DEVICE_CUDA;
    if (t->device.type != EM_DEVICE_CPU && !cuda) {
        char dev[16];
        return em_py_error(PyExc_BufferError,
                           "__dlpack__: exporting %s tensors is not supported yet; copy the "
                           "tensor to the CPU first",
                           em_device_str(t->device, dev));
    }
    if (cuda) {
        /* The consumer reads on its stream (DLPack's `stream`): ember's work
         * on the tensor is finished first, which orders it before any. */
        em_status st;
        Py_BEGIN_ALLOW_THREADS
        st = em_cuda_synchronize(t->device.index);
        Py_END_ALLOW_THREADS
        if (st != EM_OK) return em_py_raise();
    } else if (stream != Py_None)
        return em_py_error(PyExc_RuntimeError,
                           "__dlpack__: stream must be None for CPU tensors, got %s (streams "
                           "only order work on GPU devices)",
                           Py_TYPE(stream)->tp_name);
    em_note_event(EM_EVENT_MUTATION, "exporting a tensor's memory (DLPack)", t);
    t->storage->exported = true;
    exported_tensor *e = PyMem_RawCalloc(1, sizeof *e);
    if (!e) return PyErr_NoMemory();
    for (int i = 0; i < t->ndim; i++) {
        e->shape[i] = t->shape[i];
        e->strides[i] = t->strides[i];
    }
    DLTensor *dl = &e->managed.dl_tensor;
    /* data points at the first element and byte_offset is 0, as PyTorch and
     * NumPy export: some consumers (PyTorch 1.x) ignore byte_offset. An empty
     * tensor may have no memory (NULL data, when it came from PyTorch); it
     * gets a dummy address nobody reads, because PyTorch 1.x never calls the
     * deleter of a DLTensor whose data is NULL, which would leak t. */
    static max_align_t no_data;
    dl->data = t->storage->data ? em_tensor_data(t) : (void *)&no_data;
    dl->device = cuda ? (DLDevice){kDLCUDA, t->device.index < 0 ? 0 : t->device.index} : (DLDevice){kDLCPU, 0};
    dl->ndim = t->ndim;
    dl->dtype = em_dtype_to_dlpack(t->dtype);
    dl->shape = e->shape;
    dl->strides = e->strides;
    dl->byte_offset = 0;
    em_tensor_retain(t); /* owned by the managed tensor; released by exported_deleter */
    e->managed.manager_ctx = t;
    e->managed.deleter = exported_deleter;
    PyObject *capsule = PyCapsule_New(&e->managed, CAPSULE_NAME, capsule_destructor);
    /* The new capsule owns e until a consumer renames it; if it could not be
     * made, nobody else has seen e: undo the retain and the allocation. */
    if (!capsule) exported_deleter(&e->managed);
    return capsule;
}

PyObject *em_py_tensor_dlpack_device(PyObject *self, PyObject *unused) {
    (void)unused;
    em_device d = em_py_tensor_of(self)->device;
    if (d.type == EM_DEVICE_CUDA) return Py_BuildValue("(ii)", kDLCUDA, (int)d.index);
    return Py_BuildValue("(ii)", kDLCPU, 0);
}

/* ---- import: ember.from_dlpack ---- */

/* Storage release for imported memory: hands the managed tensor back to its
 * producer. The last ember reference may drop on any thread, and producers'
 * deleters may touch Python objects (NumPy's does), so take the GIL. */
static void release_managed(void *ctx, void *data, size_t nbytes) {
    (void)data;
    (void)nbytes;
    DLManagedTensor *m = ctx;
    PyGILState_STATE gs = PyGILState_Ensure();
    if (m->deleter) m->deleter(m);
    PyGILState_Release(gs);
}

/* The geometry of `dl` checked and converted: shape, strides (elements) and
 * the bytes from the first element to the end of the last. -1 with a Python
 * exception if the tensor cannot be an ember tensor. */
static int import_geometry(const DLTensor *dl, size_t item, int64_t *shape, int64_t *strides,
                           size_t *nbytes) {
    if (dl->ndim < 0 || dl->ndim > EM_MAX_DIMS) {
        em_py_error(PyExc_ValueError,
                    "from_dlpack: tensors with %d dimensions are not supported (ember tensors "
                    "have at most %d)",
                    (int)dl->ndim, EM_MAX_DIMS);
        return -1;
    }
    if (dl->ndim > 0 && !dl->shape) {
        em_py_error(PyExc_ValueError, "from_dlpack: malformed DLTensor (shape is NULL)");
        return -1;
    }
    bool empty = false;
    for (int i = 0; i < dl->ndim; i++) {
        shape[i] = dl->shape[i];
        if (shape[i] < 0) {
            em_py_error(PyExc_ValueError,
                        "from_dlpack: malformed DLTensor (dimension %d has "
                        "negative size %lld)",
                        i, (long long)shape[i]);
            return -1;
        }
        if (shape[i] == 0) empty = true;
    }
    if (!dl->strides) {
        em_contiguous_strides(shape, dl->ndim, strides);
    } else {
        for (int i = 0; i < dl->ndim; i++) {
            strides[i] = dl->strides[i];
            if (strides[i] < 0 && shape[i] > 1) {
                em_py_error(PyExc_ValueError,
                            "from_dlpack: dimension %d has a negative stride (%lld); ember "
                            "tensors cannot have negative strides (copy the tensor first)",
                            i, (long long)strides[i]);
                return -1;
            }
            if (shape[i] <= 1) strides[i] = strides[i] < 0 ? 0 : strides[i];
        }
    }
    /* Last element's index: sum of (size - 1) * stride, checked for overflow
     * since the producer's numbers are untrusted. */
    int64_t last = 0, n;
    if (!empty) {
        for (int i = 0; i < dl->ndim; i++)
            if (__builtin_mul_overflow(shape[i] - 1, strides[i], &n) ||
                __builtin_add_overflow(last, n, &last))
                goto overflow;
    }
    uint64_t bytes = 0;
    if (!empty && __builtin_mul_overflow((uint64_t)last + 1, (uint64_t)item, &bytes)) goto overflow;
    *nbytes = (size_t)bytes;
    return 0;
overflow:
    em_py_error(PyExc_ValueError, "from_dlpack: malformed DLTensor (its extent overflows)");
    return -1;
}

/* Memory ember can hold: the host's, or a CUDA device's where ember has
 * that device. */
static bool importable(DLDevice d) {
    if (d.device_type == kDLCPU) return true;
    return d.device_type == kDLCUDA && d.device_id >= 0 && d.device_id < em_cuda_device_count();
}

/* A tensor over the managed tensor's memory. On success the capsule is
 * renamed "used_dltensor" and the managed tensor belongs to the new tensor's
 * storage; on failure the capsule is untouched (its destructor still owns
 * the managed tensor) unless noted below. */
static em_tensor *import_managed(PyObject *capsule, DLManagedTensor *m) {
    const DLTensor *dl = &m->dl_tensor;
    if (!importable(dl->device)) {
        device_error(dl->device);
        return NULL;
    }
    em_device where = dl->device.device_type == kDLCUDA ? (em_device){EM_DEVICE_CUDA, (int8_t)dl->device.device_id}
                                                        : em_cpu();
    em_dtype dt;
    if (!em_dtype_from_dlpack(dl->dtype, &dt)) {
        char name[40];
        dl_dtype_str(dl->dtype, name, sizeof name);
        em_py_error(PyExc_TypeError,
                    "from_dlpack: unsupported DLPack dtype %s (code %u, bits %u, lanes %u); "
                    "ember supports float16/32/64, bfloat16, int8/16/32/64, uint8 and bool",
                    name, (unsigned)dl->dtype.code, (unsigned)dl->dtype.bits,
                    (unsigned)dl->dtype.lanes);
        return NULL;
    }
    size_t item = em_dtype_size(dt), nbytes;
    int64_t shape[EM_MAX_DIMS], strides[EM_MAX_DIMS];
    if (import_geometry(dl, item, shape, strides, &nbytes) < 0) return NULL;
    char *data = dl->data ? (char *)dl->data + dl->byte_offset : NULL;
    if (nbytes && !data) {
        em_py_error(PyExc_ValueError, "from_dlpack: malformed DLTensor (data is NULL)");
        return NULL;
    }
    if (nbytes && (uintptr_t)data % item) {
        em_py_error(PyExc_ValueError,
                    "from_dlpack: the data of this %s tensor is not aligned to its %zu-byte "
                    "elements; ember needs aligned memory (copy the tensor first)",
                    em_dtype_long_name(dt), item);
        return NULL;
    }
    /* Ownership: renaming the capsule takes the managed tensor over from it
     * (its destructor no longer calls the deleter); from here we must. */
    if (PyCapsule_SetName(capsule, USED_CAPSULE_NAME) < 0) return NULL;
    em_storage *s = em_storage_wrap(data, nbytes, where, release_managed, m);
    if (!s) {
        if (m->deleter) m->deleter(m); /* em_storage_wrap does not release on failure */
        em_py_raise();
        return NULL;
    }
    em_tensor *t = em_tensor_from_storage(s, dt, 0, shape, strides, dl->ndim);
    em_storage_release(s); /* the tensor holds its own; on failure this calls the deleter */
    if (!t) em_py_raise();
    return t;
}

/* obj.__dlpack__(stream=stream): a new reference, or NULL. */
static PyObject *call_dlpack_on_stream(PyObject *obj, int stream) {
    PyObject *fn = PyObject_GetAttrString(obj, "__dlpack__"), *args = PyTuple_New(0),
             *kwargs = Py_BuildValue("{s:i}", "stream", stream);
    PyObject *r = fn && args && kwargs ? PyObject_Call(fn, args, kwargs) : NULL;
    Py_XDECREF(fn);
    Py_XDECREF(args);
    Py_XDECREF(kwargs);
    return r;
}

/* Calls obj.__dlpack_device__() when it exists and refuses devices ember
 * cannot hold before anything is exported: 0 for the host (or unknown), 1
 * for a CUDA device, -1 with an exception. */
static int check_producer_device(PyObject *obj) {
    PyObject *dev = PyObject_CallMethod(obj, "__dlpack_device__", NULL); /* new reference */
    if (!dev) {
        if (!PyErr_ExceptionMatches(PyExc_AttributeError)) return -1;
        PyErr_Clear(); /* optional: the DLTensor's own device is checked on import */
        return 0;
    }
    int type, id, r = 0;
    if (!PyTuple_Check(dev) || !PyArg_ParseTuple(dev, "ii", &type, &id)) {
        PyErr_Clear();
        em_py_error(PyExc_TypeError,
                    "from_dlpack: %s.__dlpack_device__() must return a (device_type, "
                    "device_id) tuple of ints",
                    Py_TYPE(obj)->tp_name);
        r = -1;
    } else if (!importable((DLDevice){type, id})) {
        device_error((DLDevice){type, id});
        r = -1;
    } else if (type == kDLCUDA) {
        r = 1;
    }
    Py_DECREF(dev);
    return r;
}

PyObject *em_py_from_dlpack(PyObject *self, PyObject *obj) {
    (void)self;
    PyObject *capsule = NULL, *result = NULL;
    if (PyCapsule_CheckExact(obj)) {
        capsule = obj;
        Py_INCREF(capsule); /* released at the end, like one we made */
    } else if (PyObject_HasAttrString(obj, "__dlpack__")) {
        int on = check_producer_device(obj);
        if (on < 0) return NULL;
        /* (a CUDA producer makes its data ready for the legacy default
         * stream, 1, which ember's blocking streams wait for) */
        capsule = on == 1 ? call_dlpack_on_stream(obj, 1) : PyObject_CallMethod(obj, "__dlpack__", NULL);
        if (!capsule) return NULL;
    } else {
        return em_py_error(PyExc_TypeError,
                           "from_dlpack: expected an object with a __dlpack__ method (a tensor "
                           "of NumPy, PyTorch, JAX, ...) or a DLPack capsule, got %s",
                           Py_TYPE(obj)->tp_name);
    }
    if (!PyCapsule_IsValid(capsule, CAPSULE_NAME)) {
        if (PyCapsule_IsValid(capsule, USED_CAPSULE_NAME))
            em_py_error(PyExc_RuntimeError,
                        "from_dlpack: this DLPack capsule was already consumed; a capsule can "
                        "be turned into a tensor only once (call __dlpack__() again for a new "
                        "one)");
        else
            em_py_error(PyExc_TypeError,
                        "from_dlpack: expected a DLPack capsule named 'dltensor', got %s",
                        PyCapsule_CheckExact(capsule) ? "a capsule of another kind"
                                                      : Py_TYPE(capsule)->tp_name);
        goto done;
    }
    DLManagedTensor *m = PyCapsule_GetPointer(capsule, CAPSULE_NAME); /* borrowed */
    if (!m) goto done;
    em_tensor *t = import_managed(capsule, m);
    if (t) result = em_py_wrap(t); /* steals t */
done:
    /* If not consumed, this capsule's destructor hands the managed tensor
     * back to its producer once the last reference goes. */
    Py_DECREF(capsule);
    return result;
}

/* ---- the buffer protocol ---- */

/* Row-major without gaps, as CPython means it: size-1 dims have any stride,
 * and an empty tensor is contiguous. */
static bool is_c_contiguous(const em_tensor *t) {
    return t->numel == 0 || em_tensor_is_contiguous(t);
}

/* Column-major (Fortran order) without gaps. */
static bool is_f_contiguous(const em_tensor *t) {
    if (t->numel == 0) return true;
    int64_t s = 1;
    for (int i = 0; i < t->ndim; i++) {
        if (t->shape[i] == 1) continue;
        if (t->strides[i] != s) return false;
        s *= t->shape[i];
    }
    return true;
}

/* bf_getbuffer: the tensor's memory as it is (never a copy). `view->obj`
 * holds a reference to self until PyBuffer_Release, so the memory outlives
 * the Python name; shape and strides (in bytes) live in one block per view,
 * kept in view->internal and freed by releasebuffer. */
static int getbuffer(PyObject *self, Py_buffer *view, int flags) {
    em_tensor *t = em_py_tensor_of(self); /* borrowed */
    const char *fmt = buffer_formats[t->dtype];
    view->obj = NULL;
    if (t->device.type != EM_DEVICE_CPU) {
        char dev[16];
        em_py_error(PyExc_BufferError,
                    "can't export the memory of a %s tensor through the buffer protocol; copy "
                    "it to the CPU first",
                    em_device_str(t->device, dev));
        return -1;
    }
    if ((flags & PyBUF_FORMAT) && !fmt) {
        em_py_error(PyExc_BufferError,
                    "%s has no PEP 3118 buffer format, so a %s tensor can't be exported "
                    "through the buffer protocol; convert it with .float() first, or share it "
                    "with DLPack (__dlpack__)",
                    em_dtype_long_name(t->dtype), em_dtype_long_name(t->dtype));
        return -1;
    }
    bool c = is_c_contiguous(t), f = is_f_contiguous(t);
    const char *want = NULL;
    if ((flags & PyBUF_C_CONTIGUOUS) == PyBUF_C_CONTIGUOUS && !c)
        want = "a C-contiguous";
    else if ((flags & PyBUF_F_CONTIGUOUS) == PyBUF_F_CONTIGUOUS && !f)
        want = "a Fortran-contiguous";
    else if ((flags & PyBUF_ANY_CONTIGUOUS) == PyBUF_ANY_CONTIGUOUS && !c && !f)
        want = "a contiguous";
    else if ((flags & PyBUF_STRIDES) != PyBUF_STRIDES && !c)
        want = "a contiguous (stride-less)";
    if (want) {
        char shape[128];
        em_shape_str(t->shape, t->ndim, shape, sizeof shape);
        em_py_error(PyExc_BufferError,
                    "%s buffer was requested but this %s tensor of shape %s is not laid out "
                    "that way; call .contiguous() first",
                    want, em_dtype_long_name(t->dtype), shape);
        return -1;
    }
    bool nd = (flags & PyBUF_ND) == PyBUF_ND, strided = (flags & PyBUF_STRIDES) == PyBUF_STRIDES;
    Py_ssize_t item = (Py_ssize_t)em_dtype_size(t->dtype);
    Py_ssize_t *geom = NULL; /* owned by the view: shape then strides */
    if (nd && t->ndim > 0) {
        if (!(geom = PyMem_Malloc(2 * (size_t)t->ndim * sizeof *geom))) {
            PyErr_NoMemory();
            return -1;
        }
        for (int i = 0; i < t->ndim; i++) {
            geom[i] = (Py_ssize_t)t->shape[i];
            geom[t->ndim + i] = (Py_ssize_t)t->strides[i] * item;
        }
    }
    em_note_event(EM_EVENT_MUTATION, "exporting a tensor's memory (buffer protocol)", t);
    t->storage->exported = true;
    view->buf = em_tensor_data(t);
    Py_INCREF(self);
    view->obj = self; /* the view's reference; PyBuffer_Release drops it */
    view->len = (Py_ssize_t)t->numel * item;
    view->itemsize = item;
    view->readonly = 0;
    /* Without PyBUF_ND the consumer sees flat bytes: ndim 1, no shape. */
    view->ndim = nd ? t->ndim : 1;
    view->format = (flags & PyBUF_FORMAT) ? (char *)fmt : NULL;
    view->shape = geom;
    view->strides = geom && strided ? geom + t->ndim : NULL;
    view->suboffsets = NULL;
    view->internal = geom;
    return 0;
}

/* bf_releasebuffer: frees what getbuffer allocated for this view (the
 * reference in view->obj is dropped by PyBuffer_Release itself). */
static void releasebuffer(PyObject *self, Py_buffer *view) {
    (void)self;
    PyMem_Free(view->internal);
    view->internal = NULL;
}

PyBufferProcs em_py_tensor_buffer = {getbuffer, releasebuffer};

/* ---- the CUDA array interface (Numba's, version 2 and 3: CuPy, PyTorch) ---- */

static void release_pyobject(void *ctx, void *data, size_t nbytes) {
    (void)data;
    (void)nbytes;
    PyGILState_STATE gs = PyGILState_Ensure();
    Py_DECREF((PyObject *)ctx);
    PyGILState_Release(gs);
}

/* The ember dtype of a typestr ("<f4", "|b1", ...): false if none. */
static bool dtype_of_typestr(const char *s, em_dtype *dt) {
    if (!s || strlen(s) != 3 || (s[0] != '<' && s[0] != '|' && s[0] != '=')) return false;
    static const struct {
        const char *code;
        em_dtype dt;
    } codes[] = {{"f2", EM_DTYPE_F16}, {"f4", EM_DTYPE_F32}, {"f8", EM_DTYPE_F64}, {"i1", EM_DTYPE_I8},
                 {"i2", EM_DTYPE_I16}, {"i4", EM_DTYPE_I32}, {"i8", EM_DTYPE_I64}, {"u1", EM_DTYPE_U8},
                 {"b1", EM_DTYPE_BOOL}};
    for (size_t i = 0; i < sizeof codes / sizeof *codes; i++)
        if (!strcmp(s + 1, codes[i].code)) {
            *dt = codes[i].dt;
            return true;
        }
    return false;
}

/* Reads n int64 values from a tuple of ints into out; -1 with an error. */
static int int_tuple(PyObject *t, const char *what, int64_t *out, int *n) {
    if (!PyTuple_Check(t) || PyTuple_GET_SIZE(t) > EM_MAX_DIMS) {
        em_py_error(PyExc_TypeError, "__cuda_array_interface__: %s must be a tuple of at most %d ints", what,
                    EM_MAX_DIMS);
        return -1;
    }
    *n = (int)PyTuple_GET_SIZE(t);
    for (int i = 0; i < *n; i++) {
        long long v = PyLong_AsLongLong(PyTuple_GET_ITEM(t, i));
        if (v == -1 && PyErr_Occurred()) return -1;
        out[i] = v;
    }
    return 0;
}

/* _from_cuda_array_interface(obj) -> a tensor over obj's CUDA memory
 * (obj.__cuda_array_interface__), holding obj alive; its stream (version
 * 3) waited for first. */
PyObject *em_py_from_cuda_array_interface(PyObject *self, PyObject *obj) {
    (void)self;
    PyObject *cai = PyObject_GetAttrString(obj, "__cuda_array_interface__");
    if (!cai) return NULL;
    PyObject *result = NULL;
    if (!PyDict_Check(cai)) {
        em_py_error(PyExc_TypeError, "__cuda_array_interface__ must be a dict, got %s", Py_TYPE(cai)->tp_name);
        goto done;
    }
    PyObject *shape_o = PyDict_GetItemString(cai, "shape"), *typestr = PyDict_GetItemString(cai, "typestr");
    PyObject *data = PyDict_GetItemString(cai, "data"), *strides_o = PyDict_GetItemString(cai, "strides");
    PyObject *version = PyDict_GetItemString(cai, "version"), *mask = PyDict_GetItemString(cai, "mask");
    PyObject *stream = PyDict_GetItemString(cai, "stream");
    if (!shape_o || !typestr || !data || !version) {
        em_py_error(PyExc_ValueError, "__cuda_array_interface__ needs shape, typestr, data and version");
        goto done;
    }
    long ver = PyLong_AsLong(version);
    if (ver == -1 && PyErr_Occurred()) goto done;
    if (ver < 2) {
        em_py_error(PyExc_ValueError, "__cuda_array_interface__ version %ld: ember reads versions 2 and 3", ver);
        goto done;
    }
    if (mask && mask != Py_None) {
        em_py_error(PyExc_NotImplementedError, "__cuda_array_interface__ with a mask: ember has no masked tensors");
        goto done;
    }
    em_dtype dt;
    const char *ts = PyUnicode_Check(typestr) ? PyUnicode_AsUTF8(typestr) : NULL;
    if (!ts || !dtype_of_typestr(ts, &dt)) {
        em_py_error(PyExc_TypeError, "__cuda_array_interface__: unsupported typestr %R (ember reads float16/32/64, "
                                     "int8/16/32/64, uint8 and bool)", typestr);
        goto done;
    }
    int64_t shape[EM_MAX_DIMS], strides[EM_MAX_DIMS];
    int nd = 0, ns = 0;
    if (int_tuple(shape_o, "shape", shape, &nd) < 0) goto done;
    size_t item = em_dtype_size(dt);
    if (strides_o && strides_o != Py_None) {
        if (int_tuple(strides_o, "strides", strides, &ns) < 0) goto done;
        if (ns != nd) {
            em_py_error(PyExc_ValueError, "__cuda_array_interface__: %d strides for %d dims", ns, nd);
            goto done;
        }
        for (int i = 0; i < nd; i++)
            if (strides[i] % (int64_t)item) {
                em_py_error(PyExc_ValueError, "__cuda_array_interface__: stride %lld bytes is not a multiple of "
                                              "the %zu-byte elements", (long long)strides[i], item);
                goto done;
            }
        for (int i = 0; i < nd; i++) strides[i] /= (int64_t)item;
    } else {
        em_contiguous_strides(shape, nd, strides);
    }
    if (!PyTuple_Check(data) || PyTuple_GET_SIZE(data) != 2) {
        em_py_error(PyExc_TypeError, "__cuda_array_interface__: data must be (pointer, read_only)");
        goto done;
    }
    unsigned long long ptr = PyLong_AsUnsignedLongLong(PyTuple_GET_ITEM(data, 0));
    if (ptr == (unsigned long long)-1 && PyErr_Occurred()) goto done;
    /* the memory spanned, from the lowest element to the highest */
    int64_t lo = 0, hi = 0, numel = 1;
    for (int i = 0; i < nd; i++) {
        if (shape[i] < 0) {
            em_py_error(PyExc_ValueError, "__cuda_array_interface__: negative size in shape");
            goto done;
        }
        numel *= shape[i];
    }
    for (int i = 0; numel && i < nd; i++) {
        int64_t reach = (shape[i] - 1) * strides[i];
        if (reach < 0) lo += reach;
        else hi += reach;
    }
    if (lo < 0) {
        em_py_error(PyExc_ValueError, "__cuda_array_interface__: negative strides are not supported by ember");
        goto done;
    }
    if (numel && !ptr) {
        em_py_error(PyExc_ValueError, "__cuda_array_interface__: a null pointer for %lld elements", (long long)numel);
        goto done;
    }
    if (numel && ptr % item) {
        em_py_error(PyExc_ValueError, "__cuda_array_interface__: the data is not aligned to its %zu-byte elements",
                    item);
        goto done;
    }
    int index = 0;
    if (numel && em_cuda_pointer_device(ptr, &index) != EM_OK) {
        em_py_raise();
        goto done;
    }
    if (stream && stream != Py_None) { /* (version 3: wait for the producer's work) */
        unsigned long long s = PyLong_AsUnsignedLongLong(stream);
        if (s == (unsigned long long)-1 && PyErr_Occurred()) goto done;
        if (s == 0) {
            em_py_error(PyExc_ValueError, "__cuda_array_interface__: stream 0 is ambiguous (the spec disallows it)");
            goto done;
        }
        /* (1 and 2, the legacy and per-thread default streams, ember's
         * blocking streams wait for already) */
        if (s > 2 && em_cuda_wait_stream(s) != EM_OK) {
            em_py_raise();
            goto done;
        }
    }
    size_t nbytes = numel ? (size_t)(hi + 1) * item : 0;
    Py_INCREF(obj); /* (the storage holds the producer alive) */
    em_storage *st = em_storage_wrap((void *)(uintptr_t)ptr, nbytes, (em_device){EM_DEVICE_CUDA, (int8_t)index},
                                     release_pyobject, obj);
    if (!st) {
        Py_DECREF(obj);
        em_py_raise();
        goto done;
    }
    em_tensor *t = em_tensor_from_storage(st, dt, 0, shape, strides, nd);
    em_storage_release(st);
    if (!t) {
        em_py_raise();
        goto done;
    }
    result = em_py_wrap(t);
done:
    Py_DECREF(cai);
    return result;
}
