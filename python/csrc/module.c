/*
 * module.c - the ember._C module: functions, types and dtypes.
 *
 * The Python package (python/ember) re-exports these under PyTorch's names
 * and adds what is better written in Python (printing, the compile
 * decorator's wrapper).
 */
#include "ember/atomic_file.h"
#include "ember/checksum.h"
#include "ember/codegen_cuda.h"
#include "ember/cuda.h"
#include "ember/alloc.h"
#include "ember/parallel.h"
#include "ember/random.h"
#include "capture.h"
#include "ember_py.h"

/* ---- functional forms of the ops ---- */

static PyObject *need_tensor(PyObject *o, const char *what) {
    if (em_py_is_tensor(o)) return o;
    return em_py_error(PyExc_TypeError, "%s(): argument 'input' must be a Tensor, not %s", what,
                       Py_TYPE(o)->tp_name);
}

static PyObject *f_contiguous(PyObject *self, PyObject *x) {
    (void)self;
    if (!need_tensor(x, "contiguous")) return NULL;
    return em_py_wrap(em_contiguous(em_py_tensor_of(x)));
}

static PyObject *f_matmul(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *a, *b;
    if (!PyArg_UnpackTuple(args, "matmul", 2, 2, &a, &b)) return NULL;
    if (!need_tensor(a, "matmul") || !need_tensor(b, "matmul")) return NULL;
    return em_py_wrap(em_matmul(em_py_tensor_of(a), em_py_tensor_of(b)));
}

/* ---- creation ---- */

/* zeros(*shape, dtype=None, device=None) and friends. */
static PyObject *factory(PyObject *args, PyObject *kwargs, const char *name, em_op op, double value,
                         bool has_fill) {
    PyObject *dtype = Py_None, *device = Py_None, *fill = NULL, *gen = Py_None;
    if (kwargs) {
        PyObject *k, *v;
        Py_ssize_t pos = 0;
        while (PyDict_Next(kwargs, &pos, &k, &v)) {
            const char *s = PyUnicode_AsUTF8(k);
            if (s && !strcmp(s, "dtype"))
                dtype = v;
            else if (s && !strcmp(s, "device"))
                device = v;
            else if (s && !strcmp(s, "requires_grad") && !PyObject_IsTrue(v))
                continue;
            else if (s && !strcmp(s, "generator") && (op == EM_OP_RAND || op == EM_OP_RANDN))
                gen = v; /* a Generator's [seed, offset] list (see generator.c) */
            else
                return em_py_error(PyExc_TypeError, "%s() got an unexpected keyword argument '%s'",
                                   name, s ? s : "?");
        }
    }
    PyObject *shape_args = args;
    if (has_fill) { /* full(size, fill_value) */
        if (PyTuple_GET_SIZE(args) != 2)
            return em_py_error(PyExc_TypeError, "full() takes a size and a fill_value");
        shape_args = PyTuple_GetSlice(args, 0, 1);
        fill = PyTuple_GET_ITEM(args, 1);
        if (!shape_args) return NULL;
    }
    int64_t shape[EM_MAX_DIMS];
    int n;
    int rc = em_py_shape_args(shape_args, name, shape, &n);
    if (has_fill) Py_DECREF(shape_args);
    em_device dev;
    if (rc < 0 || em_py_device_arg(device, name, &dev) < 0) return NULL;
    em_dtype dflt = em_default_float();
    bool exact_int = false;
    long long ivalue = 0;
    if (fill) { /* PyTorch infers full()'s dtype from the fill value */
        if (PyBool_Check(fill)) {
            dflt = EM_DTYPE_BOOL;
        } else if (PyLong_Check(fill)) {
            dflt = EM_DTYPE_I64;
            int overflow;
            ivalue = PyLong_AsLongLongAndOverflow(fill, &overflow);
            exact_int = !overflow;
        }
        value = PyFloat_AsDouble(fill);
        if (value == -1.0 && PyErr_Occurred()) return NULL;
    }
    em_dtype dt;
    if (em_py_dtype_arg(dtype, dflt, &dt) < 0) return NULL;
    em_rng_state global;
    if ((op == EM_OP_RAND || op == EM_OP_RANDN) && em_py_rng_swap_in(gen, &global) < 0) return NULL;
    /* (for this one factory op; without device=, where _set_factory_device says) */
    em_device was = em_set_default_device(device == Py_None ? em_default_device() : dev);
    em_tensor *t = op == EM_OP_RAND    ? em_rand(shape, n, dt)
                   : op == EM_OP_RANDN ? em_randn(shape, n, dt)
                   : exact_int && dt == EM_DTYPE_I64 ? em_full_i64(shape, n, ivalue, dt)
                                                     : em_full(shape, n, value, dt);
    em_set_default_device(was);
    if (op == EM_OP_RAND || op == EM_OP_RANDN) return em_py_rng_swap_out(gen, global, t);
    return em_py_wrap(t);
}

static PyObject *f_zeros(PyObject *s, PyObject *a, PyObject *k) {
    (void)s;
    return factory(a, k, "zeros", EM_OP_FULL, 0.0, false);
}
static PyObject *f_ones(PyObject *s, PyObject *a, PyObject *k) {
    (void)s;
    return factory(a, k, "ones", EM_OP_FULL, 1.0, false);
}
static PyObject *f_full(PyObject *s, PyObject *a, PyObject *k) {
    (void)s;
    return factory(a, k, "full", EM_OP_FULL, 0.0, true);
}
static PyObject *f_rand(PyObject *s, PyObject *a, PyObject *k) {
    (void)s;
    return factory(a, k, "rand", EM_OP_RAND, 0.0, false);
}
static PyObject *f_randn(PyObject *s, PyObject *a, PyObject *k) {
    (void)s;
    return factory(a, k, "randn", EM_OP_RANDN, 0.0, false);
}

/* _set_factory_device(device) -> the one before, as a str: the device the C
 * factories make their results on until set back (ember/_creation.py sets
 * it around one factory call, so ember's own temporaries stay where their
 * operands are). */
static PyObject *f_set_factory_device(PyObject *self, PyObject *arg) {
    (void)self;
    em_device d;
    if (em_py_device_arg(arg, "set_default_device", &d) < 0) return NULL;
    char was[16];
    em_device_str(em_set_default_device(d), was);
    return PyUnicode_FromString(was);
}

/* arange(end) / arange(start, end, step=1), dtype inferred like PyTorch. */
static PyObject *f_arange(PyObject *self, PyObject *args, PyObject *kwargs) {
    (void)self;
    static char *kw[] = {"start", "end", "step", "dtype", "device", NULL};
    PyObject *a = NULL, *b = Py_None, *c = NULL, *dtype = Py_None, *device = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O|OO$OO:arange", kw, &a, &b, &c, &dtype, &device))
        return NULL;
    em_device dev;
    if (em_py_device_arg(device, "arange", &dev) < 0) return NULL;
    PyObject *start = b == Py_None ? NULL : a, *end = b == Py_None ? a : b;
    double v[3] = {0, 0, 1};
    PyObject *objs[3] = {start, end, c};
    bool any_float = false;
    for (int i = 0; i < 3; i++) {
        if (!objs[i]) continue;
        if (em_py_is_tensor(objs[i])) {
            PyObject *it = em_py_tensor_item(em_py_tensor_of(objs[i]), "arange() of a tensor");
            if (!it) return NULL;
            any_float |= PyFloat_Check(it);
            v[i] = PyFloat_AsDouble(it);
            Py_DECREF(it);
        } else {
            if (!PyNumber_Check(objs[i]))
                return em_py_error(PyExc_TypeError, "arange(): expected numbers, got %s",
                                   Py_TYPE(objs[i])->tp_name);
            any_float |= !PyIndex_Check(objs[i]);
            v[i] = PyFloat_AsDouble(objs[i]);
        }
        if (v[i] == -1.0 && PyErr_Occurred()) return NULL;
    }
    em_dtype dt;
    if (em_py_dtype_arg(dtype, any_float ? em_default_float() : EM_DTYPE_I64, &dt) < 0) return NULL;
    em_device was = em_set_default_device(device == Py_None ? em_default_device() : dev);
    em_tensor *t = em_arange(v[0], v[1], v[2], dt);
    em_set_default_device(was);
    return em_py_wrap(t);
}

/* ---- reductions and shapes as functions ---- */

static PyObject *call_method(PyObject *args, PyObject *kwargs, const char *name) {
    Py_ssize_t n = PyTuple_GET_SIZE(args);
    if (n < 1) return em_py_error(PyExc_TypeError, "%s() missing the input tensor", name);
    PyObject *x = PyTuple_GET_ITEM(args, 0);
    if (!need_tensor(x, name)) return NULL;
    PyObject *m = PyObject_GetAttrString(x, name), *rest = PyTuple_GetSlice(args, 1, n), *r = NULL;
    if (m && rest) r = PyObject_Call(m, rest, kwargs);
    Py_XDECREF(m);
    Py_XDECREF(rest);
    return r;
}
#define METHOD_FN(name)                                                                            \
    static PyObject *f_##name(PyObject *s, PyObject *a, PyObject *k) {                             \
        (void)s;                                                                                   \
        return call_method(a, k, #name);                                                           \
    }
METHOD_FN(sum)
METHOD_FN(mean)
METHOD_FN(reshape)
METHOD_FN(permute)
METHOD_FN(transpose)

/* ---- runtime controls ---- */

static PyObject *f_manual_seed(PyObject *self, PyObject *arg) {
    (void)self;
    unsigned long long s = PyLong_AsUnsignedLongLongMask(arg);
    if (PyErr_Occurred()) return NULL;
    /* not an op: a trace could not repeat the reseed, so it fails instead */
    em_note_event(EM_EVENT_MUTATION, "ember.manual_seed() (it resets the random stream)", NULL);
    em_manual_seed(s);
    Py_RETURN_NONE;
}
/* _rng_state() -> (seed, offset) of the global random stream, and
 * _set_rng_state(seed, offset): torch.get_rng_state's and set_rng_state's
 * core. Neither is an op: a trace could not repeat what they read or
 * write, so it fails and the call runs eagerly. */
static PyObject *f_rng_state(PyObject *self, PyObject *unused) {
    (void)self;
    (void)unused;
    em_note_event(EM_EVENT_MUTATION, "ember.get_rng_state() (it reads the random stream's position)", NULL);
    em_rng_state s = em_rng_get_state();
    return Py_BuildValue("(KK)", (unsigned long long)s.seed, (unsigned long long)s.offset);
}

static PyObject *f_set_rng_state(PyObject *self, PyObject *args) {
    (void)self;
    unsigned long long seed, offset;
    if (!PyArg_ParseTuple(args, "KK:_set_rng_state", &seed, &offset)) return NULL;
    em_note_event(EM_EVENT_MUTATION, "ember.set_rng_state() (it moves the random stream)", NULL);
    em_rng_set_state((em_rng_state){seed, offset});
    Py_RETURN_NONE;
}

/* _note_side_effect(what): Python code about to do something a compiled
 * graph could not repeat (printing a tensor); a trace fails and says so. */
static PyObject *f_note_side_effect(PyObject *self, PyObject *arg) {
    (void)self;
    const char *what = PyUnicode_AsUTF8(arg);
    if (!what) return NULL;
    em_note_event(EM_EVENT_MUTATION, what, NULL);
    Py_RETURN_NONE;
}
/* _default_dtype() and _set_default_dtype(dtype): the default float dtype */
static PyObject *f_default_dtype(PyObject *self, PyObject *unused) {
    (void)self;
    (void)unused;
    return Py_NewRef(em_py_dtype_object(em_default_float())); /* (a borrowed one) */
}
static PyObject *f_set_default_dtype(PyObject *self, PyObject *arg) {
    (void)self;
    em_dtype dt;
    if (arg == Py_None || em_py_dtype_arg(arg, EM_DTYPE_F32, &dt) < 0) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_TypeError, "set_default_dtype(): expected a dtype, got None");
        return NULL;
    }
    if (!em_set_default_float(dt)) {
        PyErr_Format(PyExc_TypeError, "set_default_dtype(): only floating-point types are supported as the "
                     "default type, got %s", em_dtype_long_name(dt));
        return NULL;
    }
    Py_RETURN_NONE;
}
static PyObject *f_get_num_threads(PyObject *self, PyObject *unused) {
    (void)self;
    (void)unused;
    return PyLong_FromLong(em_get_num_threads());
}
static PyObject *f_set_num_threads(PyObject *self, PyObject *arg) {
    (void)self;
    long n = PyLong_AsLong(arg);
    if (n == -1 && PyErr_Occurred()) return NULL;
    if (n < 1) return em_py_error(PyExc_ValueError, "set_num_threads: expected a positive number");
    em_set_num_threads((int)n);
    Py_RETURN_NONE;
}
static PyObject *f_empty_cache(PyObject *self, PyObject *unused) {
    (void)self;
    (void)unused;
    em_cpu_empty_cache();
    Py_RETURN_NONE;
}
static PyObject *f_memory_stats(PyObject *self, PyObject *unused) {
    (void)self;
    (void)unused;
    em_cpu_alloc_stats s;
    em_cpu_alloc_get_stats(&s);
    return Py_BuildValue("{s:n,s:n,s:n,s:n,s:L,s:L,s:L}", "in_use", (Py_ssize_t)s.in_use, "peak_in_use",
                         (Py_ssize_t)s.peak, "cached", (Py_ssize_t)s.cached, "cache_limit",
                         (Py_ssize_t)s.cache_limit, "hits", (long long)s.hits, "misses", (long long)s.misses,
                         "live_tensors", (long long)em_tensor_live_count());
}
static PyObject *f_reset_peak_memory_stats(PyObject *self, PyObject *unused) {
    (void)self;
    (void)unused;
    em_cpu_reset_peak();
    Py_RETURN_NONE;
}
static PyObject *f_set_tensor_class(PyObject *self, PyObject *cls) {
    (void)self;
    if (!PyType_Check(cls) || !PyType_IsSubtype((PyTypeObject *)cls, &em_py_TensorBase))
        return em_py_error(PyExc_TypeError, "expected a subclass of _TensorBase");
    Py_INCREF(cls);
    em_py_tensor_class = (PyTypeObject *)cls;
    Py_RETURN_NONE;
}
static PyObject *f_has_llvm(PyObject *self, PyObject *unused) {
    (void)self;
    (void)unused;
    return PyBool_FromLong(em_llvm_backend() != NULL);
}

/* _cuda_status() -> (the CUDA devices ember can use, why it cannot use CUDA
 * or "", whether it can) */
static PyObject *f_cuda_status(PyObject *self, PyObject *unused) {
    (void)self;
    (void)unused;
    char why[1024];
    bool available = em_cuda_available(why, sizeof why);
    return Py_BuildValue("(isO)", em_cuda_device_count(), why, available ? Py_True : Py_False);
}

/* _cuda_device(index) -> (name, (major, minor), total memory, multiprocessors):
 * starts the device */
static PyObject *f_cuda_device(PyObject *self, PyObject *arg) {
    (void)self;
    int index = (int)PyLong_AsLong(arg);
    if (index == -1 && PyErr_Occurred()) return NULL;
    em_cuda_properties p;
    if (em_cuda_device_properties(index, &p) != EM_OK) return em_py_raise();
    return Py_BuildValue("(s(ii)Ki)", p.name, p.major, p.minor, (unsigned long long)p.total_memory, p.multiprocessors);
}

static PyObject *f_cuda_synchronize(PyObject *self, PyObject *arg) {
    (void)self;
    int index = (int)PyLong_AsLong(arg);
    if (index == -1 && PyErr_Occurred()) return NULL;
    em_status st;
    Py_BEGIN_ALLOW_THREADS
    st = em_cuda_synchronize(index);
    Py_END_ALLOW_THREADS
    if (st != EM_OK) return em_py_raise();
    Py_RETURN_NONE;
}

/* _cuda_allow_tf32(on or None) -> whether float32 CUDA matmuls may use
 * TF32 (after setting it, unless None) */
static PyObject *f_cuda_allow_tf32(PyObject *self, PyObject *arg) {
    (void)self;
    if (arg != Py_None) em_cuda_set_allow_tf32(PyObject_IsTrue(arg) == 1);
    return PyBool_FromLong(em_cuda_allow_tf32());
}

/* ---- CUDA events: a capsule each ---- */

static const char *const EVENT_CAPSULE = "ember.cuda_event";

static void event_destructor(PyObject *capsule) {
    em_cuda_event_free(PyCapsule_GetPointer(capsule, EVENT_CAPSULE));
}

/* _cuda_stream_handle(index) -> the device's stream as an int (0: none) */
static PyObject *f_cuda_stream_handle(PyObject *self, PyObject *arg) {
    (void)self;
    long index = PyLong_AsLong(arg);
    if (index == -1 && PyErr_Occurred()) return NULL;
    uint64_t stream = 0;
    if (em_cuda_stream_handle((int)index, &stream) != EM_OK) return em_py_raise();
    return PyLong_FromUnsignedLongLong(stream);
}

/* _cuda_precompile(sm, threads) -> (kernels ready, of them compiled now)
 * (em_cuda_precompile; NVRTC runs without the GIL) */
static PyObject *f_cuda_precompile(PyObject *self, PyObject *args) {
    (void)self;
    int sm = 0, threads = 1;
    if (!PyArg_ParseTuple(args, "ii:_cuda_precompile", &sm, &threads)) return NULL;
    em_cuda_precompile_counts c;
    em_status st;
    Py_BEGIN_ALLOW_THREADS st = em_cuda_precompile(sm, threads, &c);
    Py_END_ALLOW_THREADS if (st != EM_OK) return em_py_raise();
    return Py_BuildValue("(ii)", c.kernels, c.compiled);
}

/* _cuda_event_new(index, timing) -> capsule */
static PyObject *f_cuda_event_new(PyObject *self, PyObject *args) {
    (void)self;
    int index, timing;
    if (!PyArg_ParseTuple(args, "ip:_cuda_event_new", &index, &timing)) return NULL;
    em_cuda_event *e = em_cuda_event_new(index, timing);
    if (!e) return em_py_raise();
    PyObject *c = PyCapsule_New(e, EVENT_CAPSULE, event_destructor);
    if (!c) em_cuda_event_free(e);
    return c;
}

/* _cuda_event(capsule, "record" | "synchronize" | "query") -> None or bool */
static PyObject *f_cuda_event(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *c;
    const char *what;
    if (!PyArg_ParseTuple(args, "Os:_cuda_event", &c, &what)) return NULL;
    em_cuda_event *e = PyCapsule_GetPointer(c, EVENT_CAPSULE);
    if (!e) return NULL;
    em_status st = EM_OK;
    if (!strcmp(what, "record")) {
        st = em_cuda_event_record(e);
    } else if (!strcmp(what, "synchronize")) {
        Py_BEGIN_ALLOW_THREADS
        st = em_cuda_event_synchronize(e);
        Py_END_ALLOW_THREADS
    } else if (!strcmp(what, "query")) {
        int q = em_cuda_event_query(e);
        if (q < 0) return em_py_raise();
        return PyBool_FromLong(q);
    } else {
        return em_py_error(PyExc_ValueError, "_cuda_event: unknown request %s", what);
    }
    if (st != EM_OK) return em_py_raise();
    Py_RETURN_NONE;
}

/* _cuda_event_elapsed(start, end) -> milliseconds */
static PyObject *f_cuda_event_elapsed(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *a, *b;
    if (!PyArg_ParseTuple(args, "OO:_cuda_event_elapsed", &a, &b)) return NULL;
    em_cuda_event *s = PyCapsule_GetPointer(a, EVENT_CAPSULE), *e = s ? PyCapsule_GetPointer(b, EVENT_CAPSULE) : NULL;
    if (!s || !e) return NULL;
    double ms = 0;
    em_status st;
    Py_BEGIN_ALLOW_THREADS
    st = em_cuda_event_elapsed_ms(s, e, &ms);
    Py_END_ALLOW_THREADS
    if (st != EM_OK) return em_py_raise();
    return PyFloat_FromDouble(ms);
}

/* _cuda_memory(index, what): "stats" -> dict in torch.cuda.memory_stats'
 * names, "empty" empties the cache, "reset" resets the peaks */
static PyObject *f_cuda_memory(PyObject *self, PyObject *args) {
    (void)self;
    int index;
    const char *what;
    if (!PyArg_ParseTuple(args, "is:_cuda_memory", &index, &what)) return NULL;
    if (!strcmp(what, "empty")) {
        em_cuda_empty_cache_of(index);
        Py_RETURN_NONE;
    }
    if (!strcmp(what, "reset")) {
        em_cuda_reset_peak_memory_stats(index);
        Py_RETURN_NONE;
    }
    em_cuda_memory_stats st;
    if (em_cuda_memory_stats_of(index, &st) != EM_OK) return em_py_raise();
    return Py_BuildValue("{s:n,s:n,s:n,s:n,s:L,s:L,s:L,s:L,s:L,s:L,s:L}", "allocated_bytes.all.current",
                         (Py_ssize_t)st.allocated, "allocated_bytes.all.peak", (Py_ssize_t)st.max_allocated,
                         "reserved_bytes.all.current", (Py_ssize_t)st.reserved, "reserved_bytes.all.peak",
                         (Py_ssize_t)st.max_reserved, "segment.all.current", st.segments, "allocation.all.allocated",
                         st.allocations, "allocation.all.freed", st.frees, "num_alloc_retries", st.ooms,
                         "num_ooms", st.ooms, "segment.all.allocated", st.segment_allocs, "segment.all.freed",
                         st.segment_frees);
}

static PyObject *f_clear_cache(PyObject *self, PyObject *unused) {
    (void)self;
    (void)unused;
    const em_backend *b = em_llvm_backend();
    if (b && b->clear_cache && b->clear_cache() != EM_OK) return em_py_raise();
    Py_RETURN_NONE;
}

/* _crc32(buffer, crc=0): ZIP's CRC-32 of a bytes-like object, continuing
 * from crc (zlib.crc32's contract, several times its speed). */
static PyObject *f_crc32(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer view;
    unsigned int crc = 0;
    if (!PyArg_ParseTuple(args, "y*|I:_crc32", &view, &crc)) return NULL;
    Py_BEGIN_ALLOW_THREADS
    crc = em_crc32(crc, view.buf, (size_t)view.len);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&view);
    return PyLong_FromUnsignedLong(crc);
}

/* ---- atomic replacement of a file (ember.save): one capsule per write ---- */

static const char ATOMIC[] = "ember.atomic_file";

static void atomic_destroy(PyObject *cap) {
    em_atomic_file *a = PyCapsule_GetPointer(cap, ATOMIC);
    if (!a) return;
    if (a->tmp[0]) em_atomic_abort(a); /* (never committed: the old file stays) */
    PyMem_RawFree(a);
}

static PyObject *atomic_error(const em_atomic_file *a) {
    if (em_last_status() == EM_ERR_VALUE) return em_py_error(PyExc_ValueError, "%s", em_last_error());
    PyObject *args = Py_BuildValue("(is)", a->err, em_last_error());
    if (args) PyErr_SetObject(PyExc_OSError, args);
    Py_XDECREF(args);
    return NULL;
}

static em_atomic_file *atomic_of(PyObject *cap) {
    em_atomic_file *a = PyCapsule_GetPointer(cap, ATOMIC);
    if (a && !a->tmp[0]) {
        PyErr_SetString(PyExc_ValueError, "this atomic write is already finished");
        return NULL;
    }
    return a;
}

/* _atomic_begin(path) -> a handle whose fd writes the new contents */
static PyObject *f_atomic_begin(PyObject *self, PyObject *arg) {
    (void)self;
    PyObject *bytes;
    if (!PyUnicode_FSConverter(arg, &bytes)) return NULL;
    em_atomic_file *a = PyMem_RawMalloc(sizeof *a);
    if (!a) {
        Py_DECREF(bytes);
        return PyErr_NoMemory();
    }
    em_status st;
    Py_BEGIN_ALLOW_THREADS
    st = em_atomic_open(a, PyBytes_AS_STRING(bytes), 0666);
    Py_END_ALLOW_THREADS
    Py_DECREF(bytes);
    if (st != EM_OK) {
        PyObject *r = atomic_error(a);
        PyMem_RawFree(a);
        return r;
    }
    PyObject *cap = PyCapsule_New(a, ATOMIC, atomic_destroy);
    if (!cap) {
        em_atomic_abort(a);
        PyMem_RawFree(a);
    }
    return cap;
}

static PyObject *f_atomic_fileno(PyObject *self, PyObject *cap) {
    (void)self;
    em_atomic_file *a = atomic_of(cap);
    return a ? PyLong_FromLong(a->fd) : NULL;
}

static PyObject *f_atomic_commit(PyObject *self, PyObject *cap) {
    (void)self;
    em_atomic_file *a = atomic_of(cap);
    if (!a) return NULL;
    em_status st;
    Py_BEGIN_ALLOW_THREADS
    st = em_atomic_commit(a);
    Py_END_ALLOW_THREADS
    if (st != EM_OK) return atomic_error(a);
    Py_RETURN_NONE;
}

static PyObject *f_atomic_abort(PyObject *self, PyObject *cap) {
    (void)self;
    em_atomic_file *a = PyCapsule_GetPointer(cap, ATOMIC);
    if (!a) return NULL;
    if (a->tmp[0]) em_atomic_abort(a);
    Py_RETURN_NONE;
}

#define KW (PyCFunction)(void (*)(void))
static PyMethodDef module_methods[] = {
    {"_atomic_begin", f_atomic_begin, METH_O, "_atomic_begin(path): start replacing a file atomically"},
    {"_atomic_fileno", f_atomic_fileno, METH_O, "the descriptor of an atomic write's new file"},
    {"_atomic_commit", f_atomic_commit, METH_O, "sync and rename an atomic write's new file into place"},
    {"_atomic_abort", f_atomic_abort, METH_O, "give up an atomic write (the old file stays)"},
    {"_crc32", f_crc32, METH_VARARGS, "_crc32(buffer, crc=0): the CRC-32 of ZIP and zlib"},
    {"contiguous", f_contiguous, METH_O, "contiguous copy unless already contiguous"},
    {"matmul", f_matmul, METH_VARARGS, "matrix product"},
    {"sum", KW f_sum, METH_VARARGS | METH_KEYWORDS, "sum(x, dim=None, keepdim=False)"},
    {"mean", KW f_mean, METH_VARARGS | METH_KEYWORDS, "mean(x, dim=None, keepdim=False)"},
    {"reshape", KW f_reshape, METH_VARARGS | METH_KEYWORDS, "reshape(x, shape)"},
    {"permute", KW f_permute, METH_VARARGS | METH_KEYWORDS, "permute(x, dims)"},
    {"transpose", KW f_transpose, METH_VARARGS | METH_KEYWORDS, "transpose(x, dim0, dim1)"},
    {"zeros", KW f_zeros, METH_VARARGS | METH_KEYWORDS, "zeros(*shape, dtype=None)"},
    {"ones", KW f_ones, METH_VARARGS | METH_KEYWORDS, "ones(*shape, dtype=None)"},
    {"full", KW f_full, METH_VARARGS | METH_KEYWORDS, "full(shape, fill_value, dtype=None)"},
    {"rand", KW f_rand, METH_VARARGS | METH_KEYWORDS, "uniform [0, 1) samples"},
    {"randn", KW f_randn, METH_VARARGS | METH_KEYWORDS, "standard normal samples"},
    {"arange", KW f_arange, METH_VARARGS | METH_KEYWORDS, "arange([start,] end[, step])"},
    {"_set_factory_device", f_set_factory_device, METH_O, "_set_factory_device(device) -> the one before"},
    {"tensor", KW em_py_tensor_new, METH_VARARGS | METH_KEYWORDS, "tensor(data, dtype=None)"},
    {"from_numpy", em_py_from_numpy, METH_O, "a tensor sharing a NumPy array's memory"},
    {"_storage_view", em_py_storage_view, METH_VARARGS, "_storage_view(base, offset, size, stride)"},
    {"from_dlpack", em_py_from_dlpack, METH_O, "a tensor sharing a DLPack producer's memory"},
    {"_from_cuda_array_interface", em_py_from_cuda_array_interface, METH_O,
     "a tensor sharing the memory of an object with __cuda_array_interface__"},
    {"_cuda_stream_handle", f_cuda_stream_handle, METH_O, "_cuda_stream_handle(index) -> int (0: none)"},
    {"manual_seed", f_manual_seed, METH_O, "seed the random generator"},
    {"_rng_state", f_rng_state, METH_NOARGS, "(seed, offset) of the global random stream"},
    {"_set_rng_state", f_set_rng_state, METH_VARARGS, "_set_rng_state(seed, offset)"},
    {"_note_side_effect", f_note_side_effect, METH_O, "tell a trace about a side effect it cannot repeat"},
    {"_default_dtype", f_default_dtype, METH_NOARGS, "the default floating-point dtype"},
    {"_set_default_dtype", f_set_default_dtype, METH_O, "set the default floating-point dtype"},
    {"get_num_threads", f_get_num_threads, METH_NOARGS, "threads used by kernels"},
    {"set_num_threads", f_set_num_threads, METH_O, "set the threads used by kernels"},
    {"empty_cache", f_empty_cache, METH_NOARGS, "free cached CPU memory blocks"},
    {"memory_stats", f_memory_stats, METH_NOARGS, "CPU allocator statistics"},
    {"reset_peak_memory_stats", f_reset_peak_memory_stats, METH_NOARGS,
     "start a new peak_in_use from the bytes in use now"},
    {"_set_tensor_class", f_set_tensor_class, METH_O, NULL},
    {"_has_llvm", f_has_llvm, METH_NOARGS, NULL},
    {"_clear_cache", f_clear_cache, METH_NOARGS, NULL},
    {"_cuda_status", f_cuda_status, METH_NOARGS, "(devices the driver reports, why ember cannot use CUDA)"},
    {"_cuda_device", f_cuda_device, METH_O, "_cuda_device(index) -> (name, (major, minor), memory, multiprocessors)"},
    {"_cuda_allow_tf32", f_cuda_allow_tf32, METH_O, "_cuda_allow_tf32(on or None) -> bool"},
    {"_cuda_precompile", f_cuda_precompile, METH_VARARGS, "_cuda_precompile(sm, threads) -> (kernels, compiled now)"},
    {"_cuda_event_new", f_cuda_event_new, METH_VARARGS, "_cuda_event_new(index, timing) -> capsule"},
    {"_cuda_event", f_cuda_event, METH_VARARGS, "_cuda_event(capsule, 'record'|'synchronize'|'query')"},
    {"_cuda_event_elapsed", f_cuda_event_elapsed, METH_VARARGS, "_cuda_event_elapsed(start, end) -> ms"},
    {"_cuda_synchronize", f_cuda_synchronize, METH_O, "_cuda_synchronize(index): waits for its queued work"},
    {"_cuda_memory", f_cuda_memory, METH_VARARGS, "_cuda_memory(index, \"stats\"|\"empty\"|\"reset\")"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "ember._C", "ember's C core", -1, module_methods,
    NULL,                  NULL,       NULL,             NULL,
};

PyMODINIT_FUNC PyInit__C(void) {
    PyObject *m = PyModule_Create(&module_def);
    if (!m) return NULL;
    if (em_py_errors_init(m) < 0 || em_py_tensor_type_init(m) < 0 || em_py_module_init_dtypes(m) < 0 ||
        em_py_compile_init(m) < 0 || em_py_autograd_init(m) < 0 || em_py_optim_init(m) < 0 ||
        em_py_distributed_init(m) < 0 || PyModule_AddFunctions(m, em_py_op_methods) < 0 ||
        PyModule_AddFunctions(m, em_py_capture_methods) < 0 || PyModule_AddFunctions(m, em_py_profiler_methods) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    em_cuda_device_register(); /* (no driver call until a tensor goes to "cuda") */
    return m;
}
