/*
 * ember_py.h - shared declarations of the ember._C extension.
 *
 * Ownership conventions (CPython's): functions returning PyObject* return a
 * new reference or NULL with an exception set. em_py_wrap STEALS the tensor
 * reference it is given (it becomes the Python object's). Borrowed pointers
 * are marked as such where they appear.
 */
#ifndef EMBER_PY_H
#define EMBER_PY_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "ember/autograd.h"
#include "ember/frontend.h"
#include "ember/ops.h"
#include "ember/random.h"

/* The Python object wrapping t (borrowed; NULL: none yet), kept in its
 * EM_LAYER_PYTHON word (tensor.h), so a tensor always surfaces as the same
 * object. The object owns the tensor, so the word needs no release. */
static inline PyObject *em_py_object_of(const em_tensor *t) { return (PyObject *)t->layer_state[EM_LAYER_PYTHON]; }
static inline void em_py_set_object(em_tensor *t, PyObject *o) { t->layer_state[EM_LAYER_PYTHON] = (uintptr_t)o; }

/* The C part of every ember.Tensor: one reference to an em_tensor. */
typedef struct {
    PyObject_HEAD em_tensor *t;
    PyObject *weakreflist;
} em_py_tensor;

extern PyTypeObject em_py_TensorBase;
extern PyTypeObject em_py_dtype_type;
extern PyTypeObject em_py_Size;
extern PyTypeObject em_py_CompiledFunction;

/* The Python class instances are created as (ember.Tensor, set at import). */
extern PyTypeObject *em_py_tensor_class;
/* _TensorBase itself, for the type checks of the files below tensor.c (wrap.c). */
extern PyTypeObject *em_py_tensor_base;
/* Is o a tensor (an instance of _TensorBase or a subclass)? Inline: every
 * operand of every op asks. */
static inline bool em_py_is_tensor(PyObject *o) { return PyObject_TypeCheck(o, em_py_tensor_base); }

/* ---- tensors (tensor.c) ---- */

static inline em_tensor *em_py_tensor_of(PyObject *o) { return ((em_py_tensor *)o)->t; }
/* Wraps t (stolen), reusing its live Python object if it has one. NULL
 * (with the pending ember error raised) if t is NULL. */
PyObject *em_py_wrap(em_tensor *t);
/* A new Python object of `type` (ember.Tensor or a subclass) for t, which
 * has none yet (stolen reference). */
PyObject *em_py_wrap_new(PyTypeObject *type, em_tensor *t);
PyObject *em_py_shape_tuple(const int64_t *shape, int ndim);
int em_py_tensor_type_init(PyObject *module);

/* ---- errors (errors.c) ---- */
/* Raises the Python exception for em_last_status() with em_last_error(). */
PyObject *em_py_raise(void);
int em_py_errors_init(PyObject *module);
/* Raises `exc` with a message; returns NULL. */
PyObject *em_py_error(PyObject *exc, const char *fmt, ...);

/* ---- conversions (convert.c) ---- */
/* The ember dtype object for dt (borrowed). */
PyObject *em_py_dtype_object(em_dtype dt);
/* Parses a dtype argument (an ember dtype or None -> dflt). */
int em_py_dtype_arg(PyObject *o, em_dtype dflt, em_dtype *out);
/* Shape from f(2, 3), f((2, 3)) or f([2, 3]); `what` names the function. */
int em_py_shape_args(PyObject *args, const char *what, int64_t *shape, int *n);
/* A sequence or int of dims (dim=1, dim=(0, 2)); None means all. */
int em_py_dims_arg(PyObject *o, const char *what, int64_t *dims, int *n);
/* A device argument: None (the CPU), "cpu", "meta" or an ember.device;
 * CUDA and unknown devices raise, naming `what`. */
int em_py_device_arg(PyObject *o, const char *what, em_device *out);
/* Operand conversion for elementwise ops: a tensor (new reference) from a
 * tensor, or from the Python number at operand position `pos` of `op`
 * combined with tensors whose result type is `tensors_result` (PyTorch's
 * wrapped-number promotion). NULL with no exception set when o is neither. */
em_tensor *em_py_number_operand(PyObject *o, em_op op, int pos, em_dtype tensors_result);
/* The same against a reference dtype (the promoted dtype of the tensors a
 * number is combined with). */
em_tensor *em_py_operand_dtype(PyObject *o, em_dtype ref);
int em_py_module_init_dtypes(PyObject *module);
/* A tensor or a sequence of tensors as a new em_malloc'd array of borrowed
 * pointers (the objects keep them alive), its length in *n; with `nones`,
 * None entries are allowed and left NULL. NULL with an exception set if an
 * entry is not a tensor; `what` names the argument. */
em_tensor **em_py_tensor_list(PyObject *o, const char *what, bool nones, int *n);

/* ---- construction (tensor_new.c) ---- */
PyObject *em_py_tensor_new(PyObject *self, PyObject *args, PyObject *kwargs);
PyObject *em_py_from_numpy(PyObject *self, PyObject *arr);
/* _C._storage_view(base, offset, size, stride): a bounds-checked view of base's storage. */
PyObject *em_py_storage_view(PyObject *self, PyObject *args);
/* The value of a one-element tensor; `what` names the host read for the tracer. */
PyObject *em_py_tensor_item(em_tensor *t, const char *what);

/* ---- generic op entry points (ops.c) ---- */
extern PyMethodDef em_py_op_methods[];
extern PyMethodDef em_py_profiler_methods[];
/* op in place into out: out.op_(*objs); returns out (new reference). */
PyObject *em_py_inplace(em_op op, PyObject *out, PyObject *const *objs, int n);

/* ---- generators (generator.c) ---- */
/* A random op on an ember.Generator, whose state `gen` is a list [seed,
 * offset], or on the global state when `gen` is None:
 *     if (em_py_rng_swap_in(gen, &global) < 0) return NULL;
 *     return em_py_rng_swap_out(gen, global, em_randperm(n, dt));
 * swap_out puts the global state back, stores the generator's advanced
 * offset and wraps t (stolen) like em_py_wrap. */
int em_py_rng_swap_in(PyObject *gen, em_rng_state *global);
PyObject *em_py_rng_swap_out(PyObject *gen, em_rng_state global, em_tensor *t);

/* ---- ember.distributed (distributed.c) ---- */
int em_py_distributed_init(PyObject *module);

/* ---- interop (interop.c) ---- */
PyObject *em_py_tensor_dlpack(PyObject *self, PyObject *args, PyObject *kwargs);
PyObject *em_py_tensor_dlpack_device(PyObject *self, PyObject *unused);
PyObject *em_py_from_dlpack(PyObject *self, PyObject *obj);
PyObject *em_py_from_cuda_array_interface(PyObject *self, PyObject *obj);
extern PyBufferProcs em_py_tensor_buffer;

/* ---- autograd (autograd.c) ---- */
extern PyTypeObject em_py_Node;
int em_py_autograd_init(PyObject *module);
PyObject *em_py_get_requires_grad(PyObject *self, void *unused);
int em_py_set_requires_grad(PyObject *self, PyObject *v, void *unused);
PyObject *em_py_get_grad(PyObject *self, void *unused);
int em_py_set_grad(PyObject *self, PyObject *v, void *unused);
PyObject *em_py_get_grad_fn(PyObject *self, void *unused);
PyObject *em_py_get_is_leaf(PyObject *self, void *unused);
PyObject *em_py_detach(PyObject *self, PyObject *unused);
PyObject *em_py_detach_(PyObject *self, PyObject *unused);
PyObject *em_py_requires_grad_(PyObject *self, PyObject *args, PyObject *kwargs);

/* ---- optimizers (optim.c) ---- */
int em_py_optim_init(PyObject *module);

/* ---- compile (compiled_function.c) ---- */
int em_py_compile_init(PyObject *module);

#endif
