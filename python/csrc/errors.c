/*
 * errors.c - ember statuses become the exceptions PyTorch raises for the
 * same mistake, carrying the C layer's message.
 */
#include "ember_py.h"

PyObject *em_py_error(PyObject *exc, const char *fmt, ...) {
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    PyErr_SetString(exc, msg);
    return NULL;
}

/* ember.cuda.OutOfMemoryError: a RuntimeError, as torch.cuda's, so that
 * `except RuntimeError` keeps working; made when the module loads. */
PyObject *em_py_cuda_oom_error;
/* ember.distributed.DistBackendError: a RuntimeError, as torch's. */
PyObject *em_py_dist_error;

static int add_error(PyObject *module, PyObject **slot, const char *attr, const char *name, const char *doc) {
    *slot = PyErr_NewExceptionWithDoc(name, doc, PyExc_RuntimeError, NULL);
    if (!*slot) return -1;
    Py_INCREF(*slot);
    if (PyModule_AddObject(module, attr, *slot) < 0) {
        Py_DECREF(*slot);
        return -1;
    }
    return 0;
}

int em_py_errors_init(PyObject *module) {
    if (add_error(module, &em_py_cuda_oom_error, "CudaOutOfMemoryError", "ember.cuda.OutOfMemoryError",
                  "Device memory ran out: the caching allocator freed what it held, asked again, and still got "
                  "nothing. The message says what was asked for and what is held.") < 0)
        return -1;
    return add_error(module, &em_py_dist_error, "DistBackendError", "ember.distributed.DistBackendError",
                     "A collective failed between processes: it timed out (a rank died, hangs, or never made the "
                     "call), the ranks passed different tensors or called different collectives, or MPI failed.");
}

PyObject *em_py_raise(void) {
    if (em_last_status() == EM_ERR_HOST && PyErr_Occurred()) return NULL; /* (already raised) */
    PyObject *exc;
    switch (em_last_status()) {
    case EM_ERR_TYPE: exc = PyExc_TypeError; break;
    case EM_ERR_INDEX: exc = PyExc_IndexError; break;
    case EM_ERR_NOMEM: exc = PyExc_MemoryError; break;
    case EM_ERR_NOT_IMPLEMENTED: exc = PyExc_NotImplementedError; break;
    case EM_ERR_DEVICE_NOMEM: exc = em_py_cuda_oom_error ? em_py_cuda_oom_error : PyExc_RuntimeError; break;
    case EM_ERR_DISTRIBUTED: exc = em_py_dist_error ? em_py_dist_error : PyExc_RuntimeError; break;
    /* PyTorch reports shape, dtype, device and value mistakes of ops as
     * RuntimeError; ValueError/TypeError come from argument parsing, which
     * the binding raises itself. */
    default: exc = PyExc_RuntimeError; break;
    }
    const char *msg = em_last_error();
    PyErr_SetString(exc, msg && *msg ? msg : "ember: unknown error");
    return NULL;
}
