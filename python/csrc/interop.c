/*
 * interop.c - exchanging tensors with other libraries: DLPack (both ways),
 * the buffer protocol, and pickling support.
 *
 * (Being written: each entry point raises NotImplementedError until then.)
 */
#include "ember_py.h"

PyObject *em_py_tensor_dlpack(PyObject *self, PyObject *args, PyObject *kwargs) {
    (void)self;
    (void)args;
    (void)kwargs;
    return em_py_error(PyExc_NotImplementedError, "__dlpack__ is not implemented in ember yet");
}

PyObject *em_py_tensor_dlpack_device(PyObject *self, PyObject *unused) {
    (void)self;
    (void)unused;
    return em_py_error(PyExc_NotImplementedError,
                       "__dlpack_device__ is not implemented in ember yet");
}

PyObject *em_py_from_dlpack(PyObject *self, PyObject *obj) {
    (void)self;
    (void)obj;
    return em_py_error(PyExc_NotImplementedError, "from_dlpack is not implemented in ember yet");
}

static int getbuffer(PyObject *self, Py_buffer *view, int flags) {
    (void)self;
    (void)flags;
    view->obj = NULL;
    PyErr_SetString(PyExc_NotImplementedError,
                    "the buffer protocol is not implemented for ember tensors yet");
    return -1;
}

PyBufferProcs em_py_tensor_buffer = {getbuffer, NULL};
