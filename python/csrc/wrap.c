/*
 * wrap.c - an em_tensor as a Python object, and the test for one: what
 * every file of the extension needs of the tensor type, below tensor.c
 * (its methods), so that no file calls back up into it. tensor.c sets the
 * type pointers when it readies the type (em_py_tensor_type_init);
 * ember.Tensor, the Python subclass, becomes the class results are
 * wrapped in (module.c's _set_tensor_class).
 */
#include "ember_py.h"

PyTypeObject *em_py_tensor_base;  /* ember._C._TensorBase */
PyTypeObject *em_py_tensor_class; /* what new results are: ember.Tensor once set */

PyObject *em_py_wrap_new(PyTypeObject *type, em_tensor *t) {
    PyObject *o = type->tp_alloc(type, 0);
    if (!o) {
        em_tensor_release(t);
        return NULL;
    }
    ((em_py_tensor *)o)->t = t;
    em_py_set_object(t, o);
    return o;
}

PyObject *em_py_wrap(em_tensor *t) {
    if (!t) return em_py_raise();
    if (em_py_object_of(t)) {
        PyObject *o = em_py_object_of(t);
        Py_INCREF(o);
        em_tensor_release(t); /* the Python object already holds one */
        return o;
    }
    return em_py_wrap_new(em_py_tensor_class, t);
}

