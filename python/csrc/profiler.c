/*
 * profiler.c - ember._C's profiler functions (include/ember/profiler.h),
 * for ember.profiler: start, stop (the events as tuples) and the clock.
 */
#include "ember/alloc.h"
#include "ember/profiler.h"
#include "ember_py.h"

static PyObject *f_start(PyObject *self, PyObject *args) {
    (void)self;
    int shapes = 0;
    if (!PyArg_ParseTuple(args, "|p:_profiler_start", &shapes)) return NULL;
    if (em_profiler_start(shapes) != EM_OK) return em_py_raise();
    Py_RETURN_NONE;
}

/* _profiler_stop() -> ([(name, start_ns, dur_ns, thread, shapes)], dropped) */
static PyObject *f_stop(PyObject *self, PyObject *unused) {
    (void)self, (void)unused;
    em_profile_event *ev = NULL;
    int64_t n = 0, dropped = 0;
    if (em_profiler_stop(&ev, &n, &dropped) != EM_OK) return em_py_raise();
    PyObject *list = PyList_New((Py_ssize_t)n);
    for (int64_t i = 0; list && i < n; i++) {
        PyObject *t = Py_BuildValue("(sLLLs)", ev[i].name, (long long)ev[i].start_ns, (long long)ev[i].dur_ns,
                                    (long long)ev[i].thread, ev[i].shapes);
        if (!t) Py_CLEAR(list);
        else PyList_SET_ITEM(list, (Py_ssize_t)i, t);
    }
    em_free(ev);
    if (!list) return NULL;
    return Py_BuildValue("(NL)", list, (long long)dropped);
}

static PyObject *f_now(PyObject *self, PyObject *unused) {
    (void)self, (void)unused;
    return PyLong_FromLongLong(em_profiler_now_ns());
}

static PyObject *f_thread(PyObject *self, PyObject *unused) {
    (void)self, (void)unused;
    return PyLong_FromLongLong(em_profiler_thread());
}

static PyObject *f_active(PyObject *self, PyObject *unused) {
    (void)self, (void)unused;
    return PyBool_FromLong(em_profiler_active());
}

PyMethodDef em_py_profiler_methods[] = {
    {"_profiler_start", f_start, METH_VARARGS, "_profiler_start(record_shapes=False): the eager profiler starts"},
    {"_profiler_stop", f_stop, METH_NOARGS,
     "_profiler_stop() -> ([(name, start_ns, dur_ns, thread, shapes)], dropped): it stops"},
    {"_profiler_now", f_now, METH_NOARGS, "_profiler_now() -> ns since the start, on the profiler's clock"},
    {"_profiler_thread", f_thread, METH_NOARGS, "_profiler_thread() -> the calling thread's number in events"},
    {"_profiler_active", f_active, METH_NOARGS, "_profiler_active() -> whether the profiler is recording"},
    {NULL, NULL, 0, NULL},
};
