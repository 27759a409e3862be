/*
 * distributed.c - ember._C's side of ember.distributed: process groups as
 * capsules, collectives queued on include/ember/distributed.h, and the
 * Work handle they return. Without MPI only _dist_available() (False) is
 * here, and ember.distributed says what to install.
 */
#include "ember_py.h"

#ifdef EMBER_HAVE_MPI
#include "ember/distributed.h"

static const char *const PG_CAPSULE = "ember.distributed.ProcessGroup";

static em_pg *pg_of(PyObject *cap) {
    em_pg *pg = PyCapsule_GetPointer(cap, PG_CAPSULE);
    if (!pg && !PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "process group is gone");
    return pg;
}

/* ---- Work ---- */

typedef struct {
    PyObject_HEAD em_work *w;
    PyObject *keep; /* the Python tensors, alive as long as the handle */
    int result;     /* 0 unknown, 1 finished well */
} work_object;

static void work_dealloc(work_object *self) {
    em_work_release(self->w);
    Py_XDECREF(self->keep);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int check_signals(void *ctx) {
    (void)ctx;
    PyGILState_STATE g = PyGILState_Ensure();
    int stop = PyErr_CheckSignals() < 0;
    PyGILState_Release(g);
    return stop;
}

static PyObject *work_wait(work_object *self, PyObject *noargs) {
    (void)noargs;
    if (self->result != 1) {
        em_status st;
        Py_BEGIN_ALLOW_THREADS st = em_work_wait(self->w, 0.1, check_signals, NULL);
        Py_END_ALLOW_THREADS if (st == EM_ERR_HOST) return NULL; /* (KeyboardInterrupt pending) */
        if (st != EM_OK) return em_py_raise();
        self->result = 1;
    }
    Py_RETURN_TRUE;
}

static PyObject *work_is_completed(work_object *self, PyObject *noargs) {
    (void)noargs;
    return PyBool_FromLong(em_work_done(self->w));
}

static PyObject *work_source(work_object *self, PyObject *noargs) {
    (void)noargs;
    return PyLong_FromLong(em_work_source(self->w));
}

static PyMethodDef work_methods[] = {
    {"wait", (PyCFunction)work_wait, METH_NOARGS,
     "Blocks until the collective finished (within the group's timeout); raises its error."},
    {"is_completed", (PyCFunction)work_is_completed, METH_NOARGS, "Has it finished (well or not)?"},
    {"_source", (PyCFunction)work_source, METH_NOARGS, "The group rank a finished recv came from."},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject work_type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "ember._C.Work",
    .tp_basicsize = sizeof(work_object),
    .tp_dealloc = (destructor)work_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A queued collective: wait() for it, is_completed() to ask.",
    .tp_methods = work_methods,
};

static PyObject *work_wrap(em_status st, em_work *w, PyObject *keep) {
    if (st != EM_OK) return em_py_raise();
    work_object *o = PyObject_New(work_object, &work_type);
    if (!o) {
        em_work_release(w);
        return NULL;
    }
    o->w = w;
    o->keep = keep;
    Py_XINCREF(keep);
    o->result = 0;
    return (PyObject *)o;
}

/* A tensor argument, or NULL for None where `optional`. */
static int tensor_arg(PyObject *o, const char *what, bool optional, em_tensor **t) {
    if (optional && o == Py_None) {
        *t = NULL;
        return 0;
    }
    if (!em_py_is_tensor(o)) {
        PyErr_Format(PyExc_TypeError, "%s: expected a Tensor, got %s", what, Py_TYPE(o)->tp_name);
        return -1;
    }
    *t = em_py_tensor_of(o);
    return 0;
}

/* ---- functions ---- */

static PyObject *f_init(PyObject *self, PyObject *args) {
    (void)self;
    double timeout;
    if (!PyArg_ParseTuple(args, "d", &timeout)) return NULL;
    em_pg *world;
    em_status st;
    Py_BEGIN_ALLOW_THREADS st = em_dist_init(timeout, &world);
    Py_END_ALLOW_THREADS if (st != EM_OK) return em_py_raise();
    return PyCapsule_New(world, PG_CAPSULE, NULL);
}

static PyObject *f_finalize(PyObject *self, PyObject *noargs) {
    (void)self, (void)noargs;
    em_status st;
    Py_BEGIN_ALLOW_THREADS st = em_dist_finalize();
    Py_END_ALLOW_THREADS if (st != EM_OK) return em_py_raise();
    Py_RETURN_NONE;
}

static PyObject *f_info(PyObject *self, PyObject *cap) {
    (void)self;
    em_pg *pg = pg_of(cap);
    if (!pg) return NULL;
    PyObject *ranks = PyList_New(em_pg_size(pg));
    if (!ranks) return NULL;
    for (int r = 0; r < em_pg_size(pg); r++) PyList_SET_ITEM(ranks, r, PyLong_FromLong(em_pg_global_rank(pg, r)));
    return Py_BuildValue("iiNdi", em_pg_rank(pg), em_pg_size(pg), ranks, em_pg_timeout(pg), em_pg_id(pg));
}

static PyObject *f_new_group(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *cap, *list;
    double timeout;
    if (!PyArg_ParseTuple(args, "OOd", &cap, &list, &timeout)) return NULL;
    em_pg *world = pg_of(cap);
    if (!world) return NULL;
    PyObject *seq = PySequence_Fast(list, "new_group: ranks must be a sequence of ints");
    if (!seq) return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    int *ranks = PyMem_Malloc(sizeof(int) * (size_t)(n ? n : 1));
    if (!ranks) {
        Py_DECREF(seq);
        return PyErr_NoMemory();
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        long r = PyLong_AsLong(PySequence_Fast_GET_ITEM(seq, i));
        if (r == -1 && PyErr_Occurred()) {
            Py_DECREF(seq);
            PyMem_Free(ranks);
            return NULL;
        }
        ranks[i] = (int)r;
    }
    Py_DECREF(seq);
    em_pg *pg = NULL;
    em_status st;
    Py_BEGIN_ALLOW_THREADS st = em_pg_new_group(world, ranks, (int)n, timeout, &pg);
    Py_END_ALLOW_THREADS PyMem_Free(ranks);
    if (st != EM_OK) return em_py_raise();
    if (!pg) Py_RETURN_NONE;
    return PyCapsule_New(pg, PG_CAPSULE, NULL);
}

static PyObject *f_destroy_group(PyObject *self, PyObject *cap) {
    (void)self;
    em_pg *pg = pg_of(cap);
    if (!pg) return NULL;
    Py_BEGIN_ALLOW_THREADS em_pg_destroy(pg);
    Py_END_ALLOW_THREADS if (PyCapsule_SetPointer(cap, (void *)1) < 0) return NULL;
    PyCapsule_SetName(cap, "ember.distributed.destroyed");
    Py_RETURN_NONE;
}

/* _collective(kind, group, a, b, root_or_peer, op_or_tag): the one entry of
 * every queued call; a and b are tensors (b may be None), returns a Work. */
static PyObject *f_collective(PyObject *self, PyObject *args) {
    (void)self;
    const char *kind;
    PyObject *cap, *ao, *bo;
    int root, op;
    if (!PyArg_ParseTuple(args, "sOOOii", &kind, &cap, &ao, &bo, &root, &op)) return NULL;
    em_pg *pg = pg_of(cap);
    if (!pg) return NULL;
    em_tensor *a = NULL, *b = NULL;
    bool needs_a = strcmp(kind, "barrier") != 0;
    bool a_optional = !strcmp(kind, "gather") || !strcmp(kind, "scatter");
    if (needs_a && tensor_arg(ao, kind, a_optional, &a) < 0) return NULL;
    if (tensor_arg(bo, kind, true, &b) < 0) return NULL;
    /* Not an op: a compiled function that calls it must not be traced past
     * it (its trace fails and the call runs eagerly). */
    em_note_event(EM_EVENT_MUTATION, kind, a);
    em_work *w = NULL;
    em_status st;
    em_reduce_op rop = (em_reduce_op)op;
    if (!strcmp(kind, "all_reduce")) st = em_pg_all_reduce(pg, a, rop, &w);
    else if (!strcmp(kind, "reduce")) st = em_pg_reduce(pg, a, root, rop, &w);
    else if (!strcmp(kind, "broadcast")) st = em_pg_broadcast(pg, a, root, &w);
    else if (!strcmp(kind, "all_gather")) st = em_pg_all_gather(pg, a, b, &w);
    else if (!strcmp(kind, "reduce_scatter")) st = em_pg_reduce_scatter(pg, a, b, rop, &w);
    else if (!strcmp(kind, "gather")) st = em_pg_gather(pg, a, b, root, &w);
    else if (!strcmp(kind, "scatter")) st = em_pg_scatter(pg, b, a, root, &w);
    else if (!strcmp(kind, "barrier")) st = em_pg_barrier(pg, &w);
    else if (!strcmp(kind, "send")) st = em_pg_send(pg, a, root, op, &w);
    else if (!strcmp(kind, "recv")) st = em_pg_recv(pg, a, root, op, &w);
    else return em_py_error(PyExc_ValueError, "unknown collective %s", kind);
    PyObject *keep = PyTuple_Pack(2, ao, bo);
    if (!keep) {
        if (st == EM_OK) em_work_release(w);
        return NULL;
    }
    PyObject *r = work_wrap(st, w, keep);
    Py_DECREF(keep);
    return r;
}

/* _dist_end_trace(what): a trace in progress ends here (the call runs
 * eagerly), `what` named as the reason: DistributedDataParallel's forward
 * says so before its buckets' copies would give a vaguer one. */
static PyObject *f_end_trace(PyObject *self, PyObject *what) {
    (void)self;
    const char *text = PyUnicode_AsUTF8(what);
    if (!text) return NULL;
    em_note_event(EM_EVENT_MUTATION, text, NULL);
    Py_RETURN_NONE;
}

static PyObject *f_version(PyObject *self, PyObject *noargs) {
    (void)self, (void)noargs;
    return PyUnicode_FromString(em_dist_backend_version());
}

static PyObject *f_stats(PyObject *self, PyObject *noargs) {
    (void)self, (void)noargs;
    em_dist_stats s = em_dist_get_stats();
    return Py_BuildValue("{sLsLsL}", "collectives", (long long)s.collectives, "bytes", (long long)s.bytes,
                         "works_alive", (long long)s.works_alive);
}

static PyObject *f_available(PyObject *self, PyObject *noargs) {
    (void)self, (void)noargs;
    Py_RETURN_TRUE;
}

static PyMethodDef dist_methods[] = {
    {"_dist_available", f_available, METH_NOARGS, "Was ember built with MPI?"},
    {"_dist_init", f_init, METH_VARARGS, "(timeout_s) -> the world group"},
    {"_dist_finalize", f_finalize, METH_NOARGS, NULL},
    {"_dist_group_info", f_info, METH_O, "group -> (rank, size, global ranks, timeout_s, id)"},
    {"_dist_new_group", f_new_group, METH_VARARGS, "(world, ranks, timeout_s) -> group, or None off it"},
    {"_dist_destroy_group", f_destroy_group, METH_O, NULL},
    {"_dist_collective", f_collective, METH_VARARGS, "(kind, group, a, b, root_or_peer, op_or_tag) -> Work"},
    {"_dist_version", f_version, METH_NOARGS, "the MPI library's version"},
    {"_dist_end_trace", f_end_trace, METH_O, "(what): a trace in progress fails, naming what"},
    {"_dist_stats", f_stats, METH_NOARGS, NULL},
    {NULL, NULL, 0, NULL},
};

int em_py_distributed_init(PyObject *module) {
    if (PyType_Ready(&work_type) < 0) return -1;
    Py_INCREF(&work_type);
    if (PyModule_AddObject(module, "Work", (PyObject *)&work_type) < 0) {
        Py_DECREF(&work_type);
        return -1;
    }
    return PyModule_AddFunctions(module, dist_methods);
}

#else /* no MPI */

static PyObject *f_available(PyObject *self, PyObject *noargs) {
    (void)self, (void)noargs;
    Py_RETURN_FALSE;
}

static PyMethodDef dist_methods[] = {
    {"_dist_available", f_available, METH_NOARGS, "Was ember built with MPI?"},
    {NULL, NULL, 0, NULL},
};

int em_py_distributed_init(PyObject *module) { return PyModule_AddFunctions(module, dist_methods); }

#endif
