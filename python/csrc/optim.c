/*
 * optim.c - the fused optimizer updates (include/ember/optim.h) for
 * ember.optim: lists of parameters, gradients and state tensors in, the
 * updates done in place.
 */
#include "ember/alloc.h"
#include "ember/optim.h"
#include "ember_py.h"

/* The tensor lists of one call, all of the parameters' length. */
typedef struct {
    em_tensor **t[5];
    int n;
} lists;

static void lists_free(lists *l) {
    for (int k = 0; k < 5; k++) em_free(l->t[k]);
}

/* objs[k] for k < count: lists of tensors (None entries allowed after the first two) */
static int lists_parse(lists *l, PyObject *const *objs, const char *const *names, int count,
                       const char *what) {
    memset(l, 0, sizeof *l);
    for (int k = 0; k < count; k++) {
        int n = 0;
        if (objs[k] == Py_None) continue;
        if (!(l->t[k] = em_py_tensor_list(objs[k], names[k], k >= 2, &n))) {
            lists_free(l);
            return -1;
        }
        if (k == 0) {
            l->n = n;
        } else if (n != l->n) {
            PyErr_Format(PyExc_ValueError, "%s: %d parameters but %d %s", what, l->n, n, names[k]);
            lists_free(l);
            return -1;
        }
    }
    return 0;
}

/* The updates are not ops, so a trace would not see them: a compiled
 * function that steps an optimizer must fail its trace (and run eagerly). */
static void note_update(const char *what) { em_note_event(EM_EVENT_MUTATION, what, NULL); }

static PyObject *f_sgd_step(PyObject *self, PyObject *args) {
    (void)self;
    note_update("SGD.step()");
    PyObject *o[3], *firsts;
    em_sgd_options opt;
    int nesterov, maximize;
    if (!PyArg_ParseTuple(args, "OOOOddddpp", &o[0], &o[1], &o[2], &firsts, &opt.lr, &opt.momentum,
                          &opt.dampening, &opt.weight_decay, &nesterov, &maximize))
        return NULL;
    opt.nesterov = nesterov;
    opt.maximize = maximize;
    static const char *const names[] = {"params", "grads", "momentum_buffers"};
    lists l;
    if (lists_parse(&l, o, names, 3, "sgd") < 0) return NULL;
    bool *first = em_malloc((size_t)(l.n ? l.n : 1) * sizeof *first);
    PyObject *seq = PySequence_Fast(firsts, "sgd: firsts must be a sequence");
    em_status st = EM_OK;
    if (!first || !seq || PySequence_Fast_GET_SIZE(seq) != l.n) {
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "sgd: one first-step flag per parameter");
        goto fail;
    }
    for (int i = 0; i < l.n; i++) first[i] = PyObject_IsTrue(PySequence_Fast_GET_ITEM(seq, i)) == 1;
    Py_BEGIN_ALLOW_THREADS st = em_sgd_step(l.t[0], l.t[1], l.t[2], first, l.n, &opt);
    Py_END_ALLOW_THREADS Py_DECREF(seq);
    em_free(first);
    lists_free(&l);
    if (st != EM_OK) return em_py_raise();
    Py_RETURN_NONE;
fail:
    Py_XDECREF(seq);
    em_free(first);
    lists_free(&l);
    return NULL;
}

static PyObject *f_adam_step(PyObject *self, PyObject *args) {
    (void)self;
    note_update("Adam.step()");
    PyObject *o[5], *steps;
    em_adam_options opt;
    int decoupled, amsgrad, maximize;
    if (!PyArg_ParseTuple(args, "OOOOOOdddddppp", &o[0], &o[1], &o[2], &o[3], &o[4], &steps, &opt.lr,
                          &opt.beta1, &opt.beta2, &opt.eps, &opt.weight_decay, &decoupled, &amsgrad,
                          &maximize))
        return NULL;
    opt.decoupled = decoupled;
    opt.amsgrad = amsgrad;
    opt.maximize = maximize;
    static const char *const names[] = {"params", "grads", "exp_avgs", "exp_avg_sqs", "max_exp_avg_sqs"};
    lists l;
    if (lists_parse(&l, o, names, 5, "adam") < 0) return NULL;
    int64_t *step = em_malloc((size_t)(l.n ? l.n : 1) * sizeof *step);
    PyObject *seq = PySequence_Fast(steps, "adam: steps must be a sequence");
    em_status st = EM_OK;
    if (!step || !seq || PySequence_Fast_GET_SIZE(seq) != l.n) {
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "adam: one step count per parameter");
        goto fail;
    }
    for (int i = 0; i < l.n; i++) {
        step[i] = PyLong_AsLongLong(PySequence_Fast_GET_ITEM(seq, i));
        if (step[i] == -1 && PyErr_Occurred()) goto fail;
    }
    Py_BEGIN_ALLOW_THREADS st = em_adam_step(l.t[0], l.t[1], l.t[2], l.t[3], l.t[4], step, l.n, &opt);
    Py_END_ALLOW_THREADS Py_DECREF(seq);
    em_free(step);
    lists_free(&l);
    if (st != EM_OK) return em_py_raise();
    Py_RETURN_NONE;
fail:
    Py_XDECREF(seq);
    em_free(step);
    lists_free(&l);
    return NULL;
}

static PyObject *f_rmsprop_step(PyObject *self, PyObject *args) {
    (void)self;
    note_update("RMSprop.step()");
    PyObject *o[5];
    em_rmsprop_options opt;
    int centered, maximize;
    if (!PyArg_ParseTuple(args, "OOOOOdddddpp", &o[0], &o[1], &o[2], &o[3], &o[4], &opt.lr,
                          &opt.alpha, &opt.eps, &opt.weight_decay, &opt.momentum, &centered,
                          &maximize))
        return NULL;
    opt.centered = centered;
    opt.maximize = maximize;
    static const char *const names[] = {"params", "grads", "square_avgs", "grad_avgs", "momentum_buffers"};
    lists l;
    if (lists_parse(&l, o, names, 5, "rmsprop") < 0) return NULL;
    em_status st;
    Py_BEGIN_ALLOW_THREADS st = em_rmsprop_step(l.t[0], l.t[1], l.t[2], l.t[3], l.t[4], l.n, &opt);
    Py_END_ALLOW_THREADS lists_free(&l);
    if (st != EM_OK) return em_py_raise();
    Py_RETURN_NONE;
}

/* _fused_steps_on(tensor) -> whether its device has fused optimizer steps
 * (the CPU, meta, and a device whose table entry provides them) */
static PyObject *f_fused_steps_on(PyObject *self, PyObject *arg) {
    (void)self;
    if (!em_py_is_tensor(arg)) return em_py_error(PyExc_TypeError, "_fused_steps_on: expected a tensor");
    return PyBool_FromLong(em_device_has_fused_steps(em_py_tensor_of(arg)->device));
}

static PyMethodDef optim_methods[] = {
    {"_fused_steps_on", f_fused_steps_on, METH_O, "_fused_steps_on(tensor) -> bool"},
    {"_sgd_step", f_sgd_step, METH_VARARGS,
     "_sgd_step(params, grads, bufs, firsts, lr, momentum, dampening, weight_decay, nesterov, maximize)"},
    {"_adam_step", f_adam_step, METH_VARARGS,
     "_adam_step(params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, steps, lr, beta1, beta2, eps, "
     "weight_decay, decoupled, amsgrad, maximize)"},
    {"_rmsprop_step", f_rmsprop_step, METH_VARARGS,
     "_rmsprop_step(params, grads, square_avgs, grad_avgs, bufs, lr, alpha, eps, weight_decay, "
     "momentum, centered, maximize)"},
    {NULL, NULL, 0, NULL},
};

int em_py_optim_init(PyObject *module) { return PyModule_AddFunctions(module, optim_methods); }
