/*
 * ops.c - generic entry points the ember package builds its API on.
 *
 * Rather than one C wrapper per function and method, the Python layer
 * (python/ember/_ops.py) calls these with op ids from the op table:
 *   _ew(op, *operands)        an elementwise op; Python numbers are operands
 *   _ew_(op, out, *operands)  the same, in place into `out`
 *   _reduce, _scan, the views, data movement, indexing and factories.
 * The hottest operators (+, *, @, comparisons) stay in the C number
 * protocol (tensor.c), where they cost no Python frame.
 */
#include "ember/alloc.h"
#include "ember/autograd.h"
#include "ember_py.h"

#define MAX_OPERANDS 8

/* Tensors for an elementwise call: Python numbers take the dtype PyTorch's
 * wrapped-number rule gives them against the tensor operands (for where(),
 * against the two value operands). New references in t[]; NULL on error. */
static int ew_operands(em_op op, PyObject *const *objs, int n, em_tensor **t) {
    const em_type *types[MAX_OPERANDS];
    em_type store[MAX_OPERANDS];
    int nt = 0, first = em_op_get(op)->promote == EM_PROMOTE_WHERE ? 1 : 0;
    for (int i = first; i < n; i++)
        if (em_py_is_tensor(objs[i])) {
            store[nt] = em_tensor_type(em_py_tensor_of(objs[i]));
            types[nt] = &store[nt];
            nt++;
        }
    if (nt == 0 && !(first && em_py_is_tensor(objs[0]))) {
        PyErr_Format(PyExc_TypeError, "%s(): argument 'input' (position 1) must be Tensor, not %s",
                     em_op_name(op), Py_TYPE(objs[0])->tp_name);
        return -1;
    }
    em_dtype ref = nt ? em_result_type(types, nt) : em_default_float();
    if (nt == 0) { /* where(cond, 1.0, 2): both values are numbers */
        int cat = EM_CAT_BOOL;
        for (int i = first; i < n; i++)
            cat = PyFloat_Check(objs[i]) ? EM_CAT_FLOAT
                  : PyLong_Check(objs[i]) && !PyBool_Check(objs[i]) && cat < EM_CAT_INT
                      ? EM_CAT_INT
                      : cat;
        ref = cat == EM_CAT_FLOAT ? em_default_float() : cat == EM_CAT_INT ? EM_DTYPE_I64 : EM_DTYPE_BOOL;
    }
    for (int i = 0; i < n; i++) {
        t[i] = em_py_number_operand(objs[i], op, i, ref);
        if (!t[i]) {
            for (int j = 0; j < i; j++) em_tensor_release(t[j]);
            if (!PyErr_Occurred())
                PyErr_Format(PyExc_TypeError, "%s(): argument %d must be a Tensor or a number, not %s",
                             em_op_name(op), i + 1, Py_TYPE(objs[i])->tp_name);
            return -1;
        }
    }
    return 0;
}

static int op_arg(PyObject *o, em_op *op) {
    long v = PyLong_AsLong(o);
    if (v == -1 && PyErr_Occurred()) return -1;
    if (v < 0 || v >= EM_OP_COUNT) {
        PyErr_SetString(PyExc_ValueError, "unknown op id");
        return -1;
    }
    *op = (em_op)v;
    return 0;
}

static PyObject *f_ew(PyObject *self, PyObject *args) {
    (void)self;
    Py_ssize_t na = PyTuple_GET_SIZE(args);
    em_op op;
    if (na < 2 || op_arg(PyTuple_GET_ITEM(args, 0), &op) < 0) {
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_TypeError, "_ew(op, *operands)");
        return NULL;
    }
    int n = (int)na - 1;
    if (n != em_op_get(op)->n_in)
        return em_py_error(PyExc_TypeError, "%s() takes %d tensor arguments, got %d", em_op_name(op),
                           em_op_get(op)->n_in, n);
    em_tensor *t[MAX_OPERANDS];
    if (ew_operands(op, &PyTuple_GET_ITEM(args, 1), n, t) < 0) return NULL;
    em_attrs at;
    memset(&at, 0, sizeof at);
    em_tensor *out = NULL;
    em_status st = em_op_run(op, t, n, &at, &out, 1);
    for (int i = 0; i < n; i++) em_tensor_release(t[i]);
    return st == EM_OK ? em_py_wrap(out) : em_py_raise();
}

PyObject *em_py_inplace(em_op op, PyObject *out, PyObject *const *objs, int n) {
    if (!em_py_is_tensor(out))
        return em_py_error(PyExc_TypeError, "%s_(): the tensor to write into must be a Tensor",
                           em_op_name(op));
    em_tensor *t[MAX_OPERANDS];
    bool is_copy = em_op_get(op)->kind == EM_KIND_CAST;
    if (is_copy && n == 1 && !em_py_is_tensor(objs[0])) {
        /* fill_(value): the number converts straight to the tensor's dtype */
        t[0] = em_py_operand_dtype(objs[0], em_py_tensor_of(out)->dtype);
        if (!t[0])
            return PyErr_Occurred() ? NULL
                                    : em_py_error(PyExc_TypeError, "fill_(): expected a number, got %s",
                                                  Py_TYPE(objs[0])->tp_name);
    } else if (ew_operands(op, objs, n, t) < 0) {
        return NULL;
    }
    em_attrs at;
    memset(&at, 0, sizeof at);
    if (is_copy) at.dtype = em_py_tensor_of(out)->dtype;
    em_tensor *dst = em_py_tensor_of(out);
    if (is_copy && n == 1 && !em_device_eq(t[0]->device, dst->device)) {
        /* x.copy_(y) across devices: y copied over first, by a recorded
         * copy where it needs a gradient (which goes back to y's device) */
        bool record = em_grad_enabled() && em_requires_grad(t[0]) && t[0]->ndim > 0 && em_tensor_has_data(dst);
        em_tensor *moved = record ? em_to_device_recorded(t[0], dst->device) : em_copy_source(t[0], dst);
        em_tensor_release(t[0]);
        if (!(t[0] = moved)) return em_py_raise();
    }
    em_status st = em_op_run_inplace(op, t, n, &at, dst);
    for (int i = 0; i < n; i++) em_tensor_release(t[i]);
    if (st != EM_OK) return em_py_raise();
    Py_INCREF(out);
    return out;
}

static PyObject *f_ew_(PyObject *self, PyObject *args) {
    (void)self;
    Py_ssize_t na = PyTuple_GET_SIZE(args);
    em_op op;
    if (na < 3 || op_arg(PyTuple_GET_ITEM(args, 0), &op) < 0) {
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_TypeError, "_ew_(op, out, *operands)");
        return NULL;
    }
    return em_py_inplace(op, PyTuple_GET_ITEM(args, 1), &PyTuple_GET_ITEM(args, 2), (int)na - 2);
}

static em_tensor *tensor_arg(PyObject *o, const char *what) {
    if (em_py_is_tensor(o)) return em_py_tensor_of(o);
    PyErr_Format(PyExc_TypeError, "%s: expected a Tensor, got %s", what, Py_TYPE(o)->tp_name);
    return NULL;
}

/* ---- reductions and scans ---- */

static PyObject *f_reduce(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *opo, *x, *dim;
    int keepdim;
    double correction, ord;
    if (!PyArg_ParseTuple(args, "OOOpdd", &opo, &x, &dim, &keepdim, &correction, &ord)) return NULL;
    em_op op;
    int64_t dims[EM_MAX_DIMS];
    int n;
    em_tensor *t = tensor_arg(x, "reduction");
    if (!t || op_arg(opo, &op) < 0 || em_py_dims_arg(dim, em_op_name(op), dims, &n) < 0) return NULL;
    return em_py_wrap(em_reduce(op, t, dims, n, keepdim, correction, ord));
}

static PyObject *f_scan(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *opo, *x;
    long long dim;
    if (!PyArg_ParseTuple(args, "OOL", &opo, &x, &dim)) return NULL;
    em_op op;
    em_tensor *t = tensor_arg(x, "scan");
    if (!t || op_arg(opo, &op) < 0) return NULL;
    return em_py_wrap(em_scan(op, t, dim));
}

/* ---- views ---- */

static PyObject *f_slice(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *x;
    long long dim, start, end, step;
    if (!PyArg_ParseTuple(args, "OLLLL", &x, &dim, &start, &end, &step)) return NULL;
    em_tensor *t = tensor_arg(x, "slice");
    return t ? em_py_wrap(em_slice(t, dim, start, end, step)) : NULL;
}

/* _mark_dynamic(x, dim): ember.compiler.mark_dynamic; _dynamic_dims(x):
 * the dims marked, as a list */
static PyObject *f_mark_dynamic(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *x;
    long long dim;
    if (!PyArg_ParseTuple(args, "OL", &x, &dim)) return NULL;
    em_tensor *t = tensor_arg(x, "mark_dynamic");
    if (!t) return NULL;
    if (dim < -t->ndim || dim >= t->ndim || t->ndim == 0)
        return em_py_error(PyExc_IndexError, "mark_dynamic: dim %lld is out of range for a tensor of %d dims", dim,
                           t->ndim);
    em_tensor_mark_dynamic(t, (int)(dim < 0 ? dim + t->ndim : dim));
    Py_RETURN_NONE;
}

static PyObject *f_dynamic_dims(PyObject *self, PyObject *x) {
    (void)self;
    em_tensor *t = tensor_arg(x, "_dynamic_dims");
    PyObject *l = t ? PyList_New(0) : NULL;
    for (int d = 0; l && d < t->ndim; d++) {
        PyObject *i = em_tensor_dynamic_dims(t) >> d & 1 ? PyLong_FromLong(d) : NULL;
        if (i && PyList_Append(l, i) < 0) Py_CLEAR(l);
        Py_XDECREF(i);
    }
    return l;
}

/* _split(x, dim, sizes) -> tuple of views sharing one SplitBackward0 node */
static PyObject *f_split(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *x, *seq;
    long long dim;
    int with_sizes = 1;
    if (!PyArg_ParseTuple(args, "OLO|p", &x, &dim, &seq, &with_sizes)) return NULL;
    em_tensor *t = tensor_arg(x, "split");
    PyObject *fast = t ? PySequence_Fast(seq, "split: sizes must be a sequence of ints") : NULL;
    if (!fast) return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(fast);
    int64_t *sizes = n > 0 && n < (1 << 24) ? PyMem_Malloc((size_t)n * sizeof *sizes) : NULL;
    em_tensor **outs = sizes ? PyMem_Calloc((size_t)n, sizeof *outs) : NULL;
    PyObject *r = NULL;
    if (!outs) {
        if (n > 0) PyErr_NoMemory();
        else PyErr_SetString(PyExc_RuntimeError, "split: expected at least one piece");
        goto done;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        sizes[i] = PyLong_AsLongLong(PySequence_Fast_GET_ITEM(fast, i));
        if (sizes[i] == -1 && PyErr_Occurred()) goto done;
    }
    if (em_split(t, dim, sizes, (int)n, with_sizes, outs) != EM_OK) {
        em_py_raise();
        goto done;
    }
    if ((r = PyTuple_New(n)))
        for (Py_ssize_t i = 0; i < n; i++) {
            PyObject *o = em_py_wrap(outs[i]);
            outs[i] = NULL;
            if (!o) {
                Py_CLEAR(r);
                break;
            }
            PyTuple_SET_ITEM(r, i, o);
        }
done:
    for (Py_ssize_t i = 0; outs && i < n; i++) em_tensor_release(outs[i]);
    PyMem_Free(outs);
    PyMem_Free(sizes);
    Py_DECREF(fast);
    return r;
}

static PyObject *f_select(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *x;
    long long dim, index;
    if (!PyArg_ParseTuple(args, "OLL", &x, &dim, &index)) return NULL;
    em_tensor *t = tensor_arg(x, "select");
    return t ? em_py_wrap(em_select(t, dim, index)) : NULL;
}

static PyObject *f_diagonal(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *x;
    long long offset, dim1, dim2;
    if (!PyArg_ParseTuple(args, "OLLL", &x, &offset, &dim1, &dim2)) return NULL;
    em_tensor *t = tensor_arg(x, "diagonal");
    return t ? em_py_wrap(em_diagonal(t, offset, dim1, dim2)) : NULL;
}

static PyObject *f_unsqueeze(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *x;
    long long dim;
    if (!PyArg_ParseTuple(args, "OL", &x, &dim)) return NULL;
    em_tensor *t = tensor_arg(x, "unsqueeze");
    return t ? em_py_wrap(em_unsqueeze(t, dim)) : NULL;
}

static PyObject *f_squeeze(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *x, *dim = Py_None;
    if (!PyArg_ParseTuple(args, "O|O", &x, &dim)) return NULL;
    int64_t dims[EM_MAX_DIMS];
    int n;
    em_tensor *t = tensor_arg(x, "squeeze");
    if (!t || em_py_dims_arg(dim, "squeeze", dims, &n) < 0) return NULL;
    return em_py_wrap(em_squeeze(t, dims, n));
}

/* ---- movement ---- */

static PyObject *f_flip(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *x, *dim;
    if (!PyArg_ParseTuple(args, "OO", &x, &dim)) return NULL;
    int64_t dims[EM_MAX_DIMS];
    int n;
    em_tensor *t = tensor_arg(x, "flip");
    if (!t || em_py_dims_arg(dim, "flip", dims, &n) < 0) return NULL;
    return em_py_wrap(em_flip(t, dims, n));
}

static PyObject *f_roll(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *x, *shifts, *dim;
    if (!PyArg_ParseTuple(args, "OOO", &x, &shifts, &dim)) return NULL;
    int64_t s[EM_MAX_DIMS], dims[EM_MAX_DIMS];
    int ns, nd;
    em_tensor *t = tensor_arg(x, "roll");
    if (!t || em_py_dims_arg(shifts, "roll", s, &ns) < 0 || em_py_dims_arg(dim, "roll", dims, &nd) < 0)
        return NULL;
    if (ns != nd)
        return em_py_error(PyExc_RuntimeError, "roll: shifts (%d) and dims (%d) should have the same size",
                           ns, nd);
    return em_py_wrap(em_roll(t, s, dims, nd));
}

/* Borrowed tensor pointers from a sequence of tensors; returns the count. */
static int tensor_list(PyObject *seq, const char *what, em_tensor **out, int max) {
    PyObject *fast = PySequence_Fast(seq, "expected a sequence of tensors");
    if (!fast) return -1;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(fast);
    if (n > max) {
        Py_DECREF(fast);
        PyErr_Format(PyExc_ValueError, "%s: at most %d tensors", what, max);
        return -1;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *o = PySequence_Fast_GET_ITEM(fast, i);
        if (!em_py_is_tensor(o)) {
            Py_DECREF(fast);
            PyErr_Format(PyExc_TypeError, "%s: expected a sequence of Tensors, item %zd is %s", what,
                         i, Py_TYPE(o)->tp_name);
            return -1;
        }
        out[i] = em_py_tensor_of(o);
    }
    Py_DECREF(fast); /* the caller's sequence keeps the tensors alive */
    return (int)n;
}

static PyObject *f_cat(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *seq;
    long long dim;
    if (!PyArg_ParseTuple(args, "OL", &seq, &dim)) return NULL;
    em_tensor *ts[64];
    int n = tensor_list(seq, "cat", ts, 64);
    if (n < 0) return NULL;
    return em_py_wrap(em_cat(ts, n, dim));
}

static PyObject *f_triangle(PyObject *args, bool lower) {
    PyObject *x;
    long long k;
    if (!PyArg_ParseTuple(args, "OL", &x, &k)) return NULL;
    em_tensor *t = tensor_arg(x, lower ? "tril" : "triu");
    return t ? em_py_wrap(lower ? em_tril(t, k) : em_triu(t, k)) : NULL;
}
static PyObject *f_tril(PyObject *self, PyObject *args) {
    (void)self;
    return f_triangle(args, true);
}
static PyObject *f_triu(PyObject *self, PyObject *args) {
    (void)self;
    return f_triangle(args, false);
}

/* ---- indexing ---- */

static PyObject *f_index_select(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *x, *ix;
    long long dim;
    if (!PyArg_ParseTuple(args, "OLO", &x, &dim, &ix)) return NULL;
    em_tensor *t = tensor_arg(x, "index_select"), *i = t ? tensor_arg(ix, "index_select") : NULL;
    return i ? em_py_wrap(em_index_select(t, dim, i)) : NULL;
}

static PyObject *f_gather(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *x, *ix;
    long long dim;
    if (!PyArg_ParseTuple(args, "OLO", &x, &dim, &ix)) return NULL;
    em_tensor *t = tensor_arg(x, "gather"), *i = t ? tensor_arg(ix, "gather") : NULL;
    return i ? em_py_wrap(em_gather(t, dim, i)) : NULL;
}

static PyObject *f_scatter(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *x, *ix, *src;
    long long dim;
    int acc;
    if (!PyArg_ParseTuple(args, "OLOOp", &x, &dim, &ix, &src, &acc)) return NULL;
    em_tensor *t = tensor_arg(x, "scatter"), *i = t ? tensor_arg(ix, "scatter") : NULL;
    if (!i) return NULL;
    em_tensor *s = em_py_operand_dtype(src, t->dtype);
    if (!s) return PyErr_Occurred() ? NULL : em_py_error(PyExc_TypeError, "scatter: src must be a Tensor or a number");
    PyObject *r = em_py_wrap(em_scatter(t, dim, i, s, acc));
    em_tensor_release(s);
    return r;
}

static PyObject *f_index(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *x, *seq, *dimo;
    if (!PyArg_ParseTuple(args, "OOO", &x, &seq, &dimo)) return NULL;
    em_tensor *t = tensor_arg(x, "index"), *ix[EM_MAX_DIMS];
    int64_t dims[EM_MAX_DIMS];
    int n, nd;
    if (!t || (n = tensor_list(seq, "index", ix, EM_MAX_DIMS)) < 0 ||
        em_py_dims_arg(dimo, "index", dims, &nd) < 0)
        return NULL;
    return em_py_wrap(em_index(t, ix, dims, n));
}

/* _index_put(x, indices, dims, values, accumulate, inplace) */
static PyObject *f_index_put(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *x, *seq, *dimo, *vals;
    int acc, inplace;
    if (!PyArg_ParseTuple(args, "OOOOpp", &x, &seq, &dimo, &vals, &acc, &inplace)) return NULL;
    em_tensor *t = tensor_arg(x, "index_put"), *ix[EM_MAX_DIMS];
    int64_t dims[EM_MAX_DIMS];
    int n, nd;
    if (!t || (n = tensor_list(seq, "index_put", ix, EM_MAX_DIMS)) < 0 ||
        em_py_dims_arg(dimo, "index_put", dims, &nd) < 0)
        return NULL;
    em_tensor *v = em_py_operand_dtype(vals, t->dtype);
    if (!v) return PyErr_Occurred() ? NULL : em_py_error(PyExc_TypeError, "index_put: values must be a Tensor or a number");
    if (!inplace) {
        PyObject *r = em_py_wrap(em_index_put(t, ix, dims, n, v, acc));
        em_tensor_release(v);
        return r;
    }
    em_tensor *in[EM_MAX_DIMS + 2];
    in[0] = t;
    for (int j = 0; j < n; j++) in[1 + j] = ix[j];
    in[1 + n] = v;
    em_attrs at;
    memset(&at, 0, sizeof at);
    at.n_dims = n;
    memcpy(at.dims, dims, (size_t)n * sizeof *dims);
    at.accumulate = acc;
    em_status st = em_op_run_inplace(EM_OP_INDEX_PUT, in, n + 2, &at, t);
    em_tensor_release(v);
    if (st != EM_OK) return em_py_raise();
    Py_INCREF(x);
    return x;
}

static PyObject *f_one_hot(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *x;
    long long n;
    if (!PyArg_ParseTuple(args, "OL", &x, &n)) return NULL;
    em_tensor *t = tensor_arg(x, "one_hot");
    return t ? em_py_wrap(em_one_hot(t, n)) : NULL;
}

/* _layer_norm(x, k, weight, bias, eps): weight and bias tensors or None. */
static PyObject *f_layer_norm(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *x, *w, *b;
    int k;
    double eps;
    if (!PyArg_ParseTuple(args, "OiOOd", &x, &k, &w, &b, &eps)) return NULL;
    em_tensor *t = tensor_arg(x, "layer_norm"), *wt = NULL, *bt = NULL;
    if (!t || (w != Py_None && !(wt = tensor_arg(w, "layer_norm"))) ||
        (b != Py_None && !(bt = tensor_arg(b, "layer_norm"))))
        return NULL;
    return em_py_wrap(em_layer_norm(t, k, wt, bt, eps));
}

/* _window(op, tensors, kernel, stride, padding, dilation, groups, ceil_mode,
 * count_include_pad, divisor, shape[, layout]): a sliding-window op (convolution,
 * pooling, unfold, fold and their gradients) with its attributes, the ones
 * it does not take ignored; a tensor, or (values, indices) for the max
 * pools. The Python layer works out the sizes; the op's inference checks
 * every one of them. */
static PyObject *f_window(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *op_o, *seq, *kernel, *stride, *padding, *dilation, *shape, *layout = NULL;
    long long groups, divisor;
    int ceil_mode, include_pad;
    if (!PyArg_ParseTuple(args, "OOOOOOLppLO|O", &op_o, &seq, &kernel, &stride, &padding, &dilation, &groups,
                          &ceil_mode, &include_pad, &divisor, &shape, &layout))
        return NULL;
    em_op op;
    if (op_arg(op_o, &op) < 0) return NULL;
    const em_op_info *info = em_op_get(op);
    if (info->kind != EM_KIND_OTHER || !(info->attrs & (EM_A_KERNEL | EM_A_STRIDE | EM_A_SHAPE)) || info->n_out > 2)
        return em_py_error(PyExc_ValueError, "_window: %s is not a sliding-window op", info->name);
    em_tensor *ts[3];
    int n = tensor_list(seq, info->name, ts, 3);
    if (n < 0) return NULL;
    em_attrs a;
    memset(&a, 0, sizeof a);
    if (em_py_dims_arg(kernel, info->name, a.kernel, &a.n_kernel) < 0 ||
        em_py_dims_arg(stride, info->name, a.stride, &a.n_stride) < 0 ||
        em_py_dims_arg(padding, info->name, a.padding, &a.n_padding) < 0 ||
        em_py_dims_arg(dilation, info->name, a.dilation, &a.n_dilation) < 0 ||
        em_py_dims_arg(shape, info->name, a.shape, &a.n_shape) < 0 ||
        (layout && layout != Py_None && em_py_dims_arg(layout, info->name, a.layout, &a.n_layout) < 0))
        return NULL;
    a.groups = groups;
    a.ceil_mode = ceil_mode;
    a.count_include_pad = include_pad;
    a.divisor = divisor;
    em_tensor *out[2] = {NULL, NULL};
    int n_out = info->n_out;
    if (em_op_run(op, ts, n, &a, out, n_out) != EM_OK) return em_py_raise();
    if (n_out == 1) return em_py_wrap(out[0]);
    PyObject *v = em_py_wrap(out[0]), *i = em_py_wrap(out[1]);
    if (!v || !i) {
        Py_XDECREF(v);
        Py_XDECREF(i);
        return NULL;
    }
    return Py_BuildValue("(NN)", v, i);
}

/* One attribute of _op's dict into a, by its kind in the attribute table.
 * Negative dims count from the end of the first input's dims (0-d: 1). */
static int attr_arg(PyObject *v, int bit, const em_op_info *info, int ndim, em_attrs *a) {
    const em_attr_field *f = em_attr_field_of(bit);
    char *base = (char *)a;
    switch (f->kind) {
    case EM_ATTR_INTS: {
        int *n = (int *)(void *)(base + f->count);
        int64_t *vals = (int64_t *)(void *)(base + f->offset);
        if (em_py_dims_arg(v, info->name, vals, n) < 0) return -1;
        if (bit == EM_A_BIT_DIMS)
            for (int i = 0; i < *n; i++) {
                int d;
                if (em_wrap_dim(info->name, vals[i], ndim ? ndim : 1, &d) != EM_OK) {
                    em_py_raise();
                    return -1;
                }
                vals[i] = d;
            }
        return 0;
    }
    case EM_ATTR_INT: {
        long long x = PyLong_AsLongLong(v);
        if (x == -1 && PyErr_Occurred()) return -1;
        *(int64_t *)(void *)(base + f->offset) = x;
        return 0;
    }
    case EM_ATTR_BOOL: {
        int x = PyObject_IsTrue(v);
        if (x < 0) return -1;
        *(bool *)(base + f->offset) = x;
        return 0;
    }
    case EM_ATTR_DOUBLE: {
        double x = PyFloat_AsDouble(v);
        if (x == -1.0 && PyErr_Occurred()) return -1;
        *(double *)(void *)(base + f->offset) = x;
        return 0;
    }
    default:
        if (bit == EM_A_BIT_SHAPE) return em_py_dims_arg(v, info->name, a->shape, &a->n_shape);
        if (bit == EM_A_BIT_DTYPE) return em_py_dtype_arg(v, em_default_float(), &a->dtype);
        PyErr_Format(PyExc_TypeError, "_op: %s's attribute %s is not taken here", info->name, em_attr_name(bit));
        return -1;
    }
}

/* _op(op, tensors, attrs): runs any op of the table, its attributes given by
 * name ({"dims": [1], "k": 3}); those left out are 0. Returns its result,
 * or a tuple of them. */
static PyObject *f_op(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *op_o, *seq, *attrs;
    if (!PyArg_ParseTuple(args, "OOO!", &op_o, &seq, &PyDict_Type, &attrs)) return NULL;
    em_op op;
    if (op_arg(op_o, &op) < 0) return NULL;
    const em_op_info *info = em_op_get(op);
    em_tensor *ts[16];
    int n = tensor_list(seq, info->name, ts, 16);
    if (n < 0) return NULL;
    em_attrs a;
    memset(&a, 0, sizeof a);
    PyObject *key, *value;
    Py_ssize_t pos = 0;
    while (PyDict_Next(attrs, &pos, &key, &value)) {
        const char *name = PyUnicode_AsUTF8(key);
        if (!name) return NULL;
        int bit = 0;
        while (bit < EM_A_COUNT && strcmp(em_attr_name(bit), name) != 0) bit++;
        if (bit == EM_A_COUNT || !(info->attrs & EM_A_MASK(bit)))
            return em_py_error(PyExc_TypeError, "_op: %s takes no attribute '%s'", info->name, name);
        if (attr_arg(value, bit, info, n ? ts[0]->ndim : 0, &a) < 0) return NULL;
    }
    if (info->flags & EM_F_DATA_DEPENDENT && n) em_note_host_sync(info->name, ts[0]);
    int n_out = info->n_out < 0 ? 1 : info->n_out;
    em_tensor *out[4] = {NULL, NULL, NULL, NULL};
    if (n_out > 4) return em_py_error(PyExc_ValueError, "_op: %s has more than 4 results", info->name);
    if (em_op_run(op, ts, n, &a, out, n_out) != EM_OK) return em_py_raise();
    if (n_out == 1) return em_py_wrap(out[0]);
    PyObject *t = PyTuple_New(n_out);
    for (int i = 0; i < n_out; i++) {
        PyObject *w = t ? em_py_wrap(out[i]) : NULL; /* (steals out[i]) */
        if (!w) {
            for (int j = t ? i + 1 : i; j < n_out; j++) em_tensor_release(out[j]);
            Py_XDECREF(t);
            return NULL;
        }
        PyTuple_SET_ITEM(t, i, w);
    }
    return t;
}

static PyObject *f_nonzero(PyObject *self, PyObject *x) {
    (void)self;
    em_tensor *t = tensor_arg(x, "nonzero");
    if (t) em_note_host_sync("nonzero()", t); /* its size depends on the values */
    return t ? em_py_wrap(em_nonzero(t)) : NULL;
}

static PyObject *f_masked_select(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *x, *m;
    if (!PyArg_ParseTuple(args, "OO", &x, &m)) return NULL;
    em_tensor *t = tensor_arg(x, "masked_select"), *mt = t ? tensor_arg(m, "masked_select") : NULL;
    return mt ? em_py_wrap(em_masked_select(t, mt)) : NULL;
}

/* ---- factories ---- */

static PyObject *f_empty(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *shape, *dtype, *device = Py_None;
    if (!PyArg_ParseTuple(args, "OO|O", &shape, &dtype, &device)) return NULL;
    int64_t s[EM_MAX_DIMS];
    int n;
    em_dtype dt;
    em_device dev;
    PyObject *t = PyTuple_Pack(1, shape);
    int rc = t ? em_py_shape_args(t, "empty", s, &n) : -1;
    Py_XDECREF(t);
    if (rc < 0 || em_py_dtype_arg(dtype, em_default_float(), &dt) < 0) return NULL;
    if (device == Py_None) return em_py_wrap(em_empty(s, n, dt));
    if (em_py_device_arg(device, "empty", &dev) < 0) return NULL;
    em_device was = em_set_default_device(dev);
    em_tensor *r = em_empty(s, n, dt);
    em_set_default_device(was);
    return em_py_wrap(r);
}

static PyObject *f_linspace(PyObject *self, PyObject *args) {
    (void)self;
    double a, b;
    long long steps;
    PyObject *dtype;
    em_dtype dt;
    if (!PyArg_ParseTuple(args, "ddLO", &a, &b, &steps, &dtype) ||
        em_py_dtype_arg(dtype, em_default_float(), &dt) < 0)
        return NULL;
    return em_py_wrap(em_linspace(a, b, steps, dt));
}

static PyObject *f_eye(PyObject *self, PyObject *args) {
    (void)self;
    long long n, m;
    PyObject *dtype;
    em_dtype dt;
    if (!PyArg_ParseTuple(args, "LLO", &n, &m, &dtype) || em_py_dtype_arg(dtype, em_default_float(), &dt) < 0)
        return NULL;
    return em_py_wrap(em_eye(n, m, dt));
}

static PyObject *f_randint(PyObject *self, PyObject *args) {
    (void)self;
    long long lo, hi;
    PyObject *shape, *dtype, *gen = Py_None;
    if (!PyArg_ParseTuple(args, "LLOO|O", &lo, &hi, &shape, &dtype, &gen)) return NULL;
    int64_t s[EM_MAX_DIMS];
    int n;
    em_dtype dt;
    em_rng_state global;
    PyObject *t = PyTuple_Pack(1, shape);
    int rc = t ? em_py_shape_args(t, "randint", s, &n) : -1;
    Py_XDECREF(t);
    if (rc < 0 || em_py_dtype_arg(dtype, EM_DTYPE_I64, &dt) < 0 ||
        em_py_rng_swap_in(gen, &global) < 0)
        return NULL;
    return em_py_rng_swap_out(gen, global, em_randint(lo, hi, s, n, dt));
}

static PyObject *f_randperm(PyObject *self, PyObject *args) {
    (void)self;
    long long n;
    PyObject *dtype, *gen = Py_None;
    em_dtype dt;
    em_rng_state global;
    if (!PyArg_ParseTuple(args, "LO|O", &n, &dtype, &gen) ||
        em_py_dtype_arg(dtype, EM_DTYPE_I64, &dt) < 0 || em_py_rng_swap_in(gen, &global) < 0)
        return NULL;
    return em_py_rng_swap_out(gen, global, em_randperm(n, dt));
}

/* ---- dtype rules ---- */

/* The dtype an elementwise op on these operands (tensors and numbers)
 * gives: result_type(a, b), as PyTorch's, and _result_type(*operands) for
 * ember's compositions of three or more (addcmul's). */
static PyObject *result_type_of(PyObject *const *objs, int n) {
    em_tensor *t[MAX_OPERANDS];
    if (ew_operands(EM_OP_ADD, objs, n, t) < 0) return NULL;
    em_type store[MAX_OPERANDS];
    const em_type *types[MAX_OPERANDS];
    for (int i = 0; i < n; i++) {
        store[i] = em_tensor_type(t[i]);
        types[i] = &store[i];
    }
    em_dtype r = em_result_type(types, n);
    for (int i = 0; i < n; i++) em_tensor_release(t[i]);
    PyObject *d = em_py_dtype_object(r);
    Py_INCREF(d);
    return d;
}

static PyObject *f_result_type(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *a, *b;
    if (!PyArg_ParseTuple(args, "OO:result_type", &a, &b)) return NULL;
    PyObject *objs[2] = {a, b};
    return result_type_of(objs, 2);
}

/* _resize_(t, shape): Tensor.resize_'s core (em_tensor_resize). Not an op:
 * a trace could not repeat it, so it fails and the call runs eagerly. */
static PyObject *f_resize(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *t, *shape_obj;
    if (!PyArg_ParseTuple(args, "OO:_resize_", &t, &shape_obj)) return NULL;
    if (!em_py_is_tensor(t)) return em_py_error(PyExc_TypeError, "resize_(): expected a Tensor");
    int64_t shape[EM_MAX_DIMS];
    int ndim = 0;
    PyObject *one = PyTuple_Pack(1, shape_obj);
    int bad = !one || em_py_shape_args(one, "resize_", shape, &ndim) < 0;
    Py_XDECREF(one);
    if (bad) return NULL;
    em_note_event(EM_EVENT_MUTATION, "Tensor.resize_() (it changes a tensor's shape and memory in place)",
                  em_py_tensor_of(t));
    if (em_requires_grad(em_py_tensor_of(t)))
        return em_py_error(PyExc_RuntimeError, "cannot resize variables that require grad");
    if (em_tensor_resize(em_py_tensor_of(t), shape, ndim) != EM_OK) return em_py_raise();
    Py_INCREF(t);
    return t;
}

/* _set_geometry(t, source, offset, shape, strides): t becomes a view of
 * source's memory (source may be t itself) with that geometry. Not an op:
 * a trace could not repeat it. */
static PyObject *f_set_geometry(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *t, *src, *shape_obj, *stride_obj;
    long long offset;
    if (!PyArg_ParseTuple(args, "OOLOO:_set_geometry", &t, &src, &offset, &shape_obj, &stride_obj)) return NULL;
    if (!em_py_is_tensor(t) || !em_py_is_tensor(src))
        return em_py_error(PyExc_TypeError, "_set_geometry(): expected tensors");
    int64_t shape[EM_MAX_DIMS], strides[EM_MAX_DIMS];
    int ndim = 0, nstrides = 0;
    PyObject *a = PyTuple_Pack(1, shape_obj), *b = PyTuple_Pack(1, stride_obj);
    int bad = !a || !b || em_py_shape_args(a, "set_", shape, &ndim) < 0 ||
              em_py_shape_args(b, "set_", strides, &nstrides) < 0;
    Py_XDECREF(a);
    Py_XDECREF(b);
    if (bad) return NULL;
    if (ndim != nstrides) return em_py_error(PyExc_RuntimeError, "set_: %d sizes but %d strides", ndim, nstrides);
    em_tensor *tt = em_py_tensor_of(t), *ss = em_py_tensor_of(src);
    if (tt->dtype != ss->dtype)
        return em_py_error(PyExc_RuntimeError, "set_: the source's dtype (%s) is not the tensor's (%s)",
                           em_dtype_name(ss->dtype), em_dtype_name(tt->dtype));
    em_note_event(EM_EVENT_MUTATION, "an in-place change of a tensor's shape or memory (set_, squeeze_, ...)", tt);
    if (em_requires_grad(tt))
        return em_py_error(PyExc_RuntimeError, "an in-place change of a tensor's shape or memory (set_, squeeze_, "
                                               "transpose_, ...) is not supported for tensors that require grad");
    if (em_tensor_set_geometry(tt, ss->storage, offset, shape, strides, ndim) != EM_OK) return em_py_raise();
    Py_INCREF(t);
    return t;
}

static PyObject *f_result_type_n(PyObject *self, PyObject *args) {
    (void)self;
    Py_ssize_t n = PyTuple_GET_SIZE(args);
    if (n < 1 || n > MAX_OPERANDS)
        return em_py_error(PyExc_TypeError, "_result_type takes 1 to %d operands, got %zd", MAX_OPERANDS, n);
    return result_type_of(&PyTuple_GET_ITEM(args, 0), (int)n);
}

static PyObject *f_promote_types(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *a, *b;
    em_dtype x, y;
    if (!PyArg_ParseTuple(args, "OO:promote_types", &a, &b) ||
        em_py_dtype_arg(a, em_default_float(), &x) < 0 || em_py_dtype_arg(b, em_default_float(), &y) < 0)
        return NULL;
    PyObject *d = em_py_dtype_object(em_promote_types(x, y));
    Py_INCREF(d);
    return d;
}

static PyObject *f_can_cast(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *a, *b;
    em_dtype x, y;
    if (!PyArg_ParseTuple(args, "OO:can_cast", &a, &b) ||
        em_py_dtype_arg(a, em_default_float(), &x) < 0 || em_py_dtype_arg(b, em_default_float(), &y) < 0)
        return NULL;
    return PyBool_FromLong(em_can_cast(x, y));
}

/* ---- introspection ---- */

static PyObject *f_op_ids(PyObject *self, PyObject *unused) {
    (void)self;
    (void)unused;
    PyObject *d = PyDict_New();
    for (int i = 0; d && i < EM_OP_COUNT; i++) {
        PyObject *v = PyLong_FromLong(i);
        if (!v || PyDict_SetItemString(d, em_op_name((em_op)i), v) < 0) {
            Py_XDECREF(v);
            Py_DECREF(d);
            return NULL;
        }
        Py_DECREF(v);
    }
    return d;
}

/* _op_table(): the op table as Python sees it, one dict per op: name, id,
 * kind ("unary", "binary", ...), promote ("same", "pred", ...), and the
 * flags the Python layer reads (method: PyTorch has a Tensor method for
 * it; hidden: it has no Python name of its own). _ops.py and _methods.py
 * make the elementwise functions and methods from it. */
/* The dtypes an elementwise row computes in (its scalar definitions), by
 * name; None: any (the other kinds, which their inference checks). */
static PyObject *row_dtypes(const em_op_info *info) {
    if (!info->dtypes) Py_RETURN_NONE;
    PyObject *l = PyList_New(0);
    for (int d = 0; l && d < EM_DTYPE_COUNT; d++) {
        if (!(info->dtypes & (1u << d))) continue;
        PyObject *n = PyUnicode_FromString(em_dtype_name((em_dtype)d));
        if (!n || PyList_Append(l, n) < 0) Py_CLEAR(l);
        Py_XDECREF(n);
    }
    return l;
}

/* The names of the attributes a row takes. */
static PyObject *row_attrs(const em_op_info *info) {
    PyObject *l = PyList_New(0);
    for (int b = 0; l && b < EM_A_COUNT; b++) {
        if (!(info->attrs & EM_A_MASK(b))) continue;
        PyObject *n = PyUnicode_FromString(em_attr_name(b));
        if (!n || PyList_Append(l, n) < 0) Py_CLEAR(l);
        Py_XDECREF(n);
    }
    return l;
}

static PyObject *f_op_table(PyObject *self, PyObject *unused) {
    (void)self;
    (void)unused;
    static const char *const kinds[] = {/* ORDER em_op_kind */ "unary", "binary", "ternary", "cast", "reduce",
                                        "scan", "matmul", "view", "copy", "other", "factory", "random", "fused"};
    static const char *const promotes[] = {/* ORDER em_promote */ "none", "same", "int_to_float", "sum",
                                           "float_only", "match", "attr", "compare", "pred", "logical",
                                           "where", "index"};
    _Static_assert(sizeof kinds / sizeof *kinds == EM_KIND_FUSED + 1, "a name per em_op_kind");
    _Static_assert(sizeof promotes / sizeof *promotes == EM_PROMOTE_INDEX + 1, "a name per em_promote");
    PyObject *t = PyTuple_New(EM_OP_COUNT);
    for (int i = 0; t && i < EM_OP_COUNT; i++) {
        const em_op_info *info = em_op_get((em_op)i);
        PyObject *dtypes = row_dtypes(info), *attrs = row_attrs(info);
        PyObject *row = dtypes && attrs
                            ? Py_BuildValue("{s:s,s:i,s:s,s:s,s:O,s:O,s:i,s:i,s:N,s:N,s:O,s:O,s:O,s:O,s:O}", "name",
                                            info->name, "id", i, "kind", kinds[info->kind], "promote",
                                            promotes[info->promote], "method",
                                            info->flags & EM_F_NO_METHOD ? Py_False : Py_True, "hidden",
                                            info->flags & EM_F_HIDDEN ? Py_True : Py_False, "n_in", info->n_in,
                                            "n_out", info->n_out, "dtypes", dtypes, "attrs", attrs,
                                            "differentiable", em_op_differentiable(i) ? Py_True : Py_False, "pure",
                                            info->flags & EM_F_PURE ? Py_True : Py_False, "view",
                                            info->flags & EM_F_VIEW ? Py_True : Py_False, "random",
                                            info->flags & EM_F_RANDOM ? Py_True : Py_False, "data_dependent",
                                            info->flags & EM_F_DATA_DEPENDENT ? Py_True : Py_False)
                            : NULL;
        if (!row) {
            Py_XDECREF(dtypes);
            Py_XDECREF(attrs);
            Py_CLEAR(t);
        } else {
            PyTuple_SET_ITEM(t, i, row);
        }
    }
    return t;
}

static PyObject *f_version(PyObject *self, PyObject *x) {
    (void)self;
    em_tensor *t = tensor_arg(x, "_version");
    return t ? PyLong_FromUnsignedLongLong(t->storage->version) : NULL;
}

PyMethodDef em_py_op_methods[] = {
    {"_ew", f_ew, METH_VARARGS, "_ew(op, *operands): an elementwise op"},
    {"_ew_", f_ew_, METH_VARARGS, "_ew_(op, out, *operands): an elementwise op in place"},
    {"_reduce", f_reduce, METH_VARARGS, "_reduce(op, x, dim, keepdim, correction, ord)"},
    {"_scan", f_scan, METH_VARARGS, "_scan(op, x, dim)"},
    {"_slice", f_slice, METH_VARARGS, "_slice(x, dim, start, end, step)"},
    {"_mark_dynamic", f_mark_dynamic, METH_VARARGS, "_mark_dynamic(x, dim): ember.compiler.mark_dynamic"},
    {"_dynamic_dims", f_dynamic_dims, METH_O, "_dynamic_dims(x): the dims of x marked dynamic"},
    {"_split", f_split, METH_VARARGS, "_split(x, dim, sizes, with_sizes=True): views sharing one autograd node"},
    {"_select", f_select, METH_VARARGS, "_select(x, dim, index)"},
    {"_unsqueeze", f_unsqueeze, METH_VARARGS, "_unsqueeze(x, dim)"},
    {"_squeeze", f_squeeze, METH_VARARGS, "_squeeze(x, dim=None)"},
    {"_flip", f_flip, METH_VARARGS, "_flip(x, dims)"},
    {"_roll", f_roll, METH_VARARGS, "_roll(x, shifts, dims)"},
    {"_cat", f_cat, METH_VARARGS, "_cat(tensors, dim)"},
    {"_tril", f_tril, METH_VARARGS, "_tril(x, diagonal)"},
    {"_diagonal", f_diagonal, METH_VARARGS, "_diagonal(x, offset, dim1, dim2): a view"},
    {"_triu", f_triu, METH_VARARGS, "_triu(x, diagonal)"},
    {"_index_select", f_index_select, METH_VARARGS, "_index_select(x, dim, index)"},
    {"_gather", f_gather, METH_VARARGS, "_gather(x, dim, index)"},
    {"_scatter", f_scatter, METH_VARARGS, "_scatter(x, dim, index, src, accumulate)"},
    {"_index", f_index, METH_VARARGS, "_index(x, indices, dims)"},
    {"_index_put", f_index_put, METH_VARARGS, "_index_put(x, indices, dims, values, acc, inplace)"},
    {"_one_hot", f_one_hot, METH_VARARGS, "_one_hot(x, num_classes)"},
    {"_op", f_op, METH_VARARGS, "_op(op, tensors, attrs): any op of the table, attributes by name"},
    {"_nonzero", f_nonzero, METH_O, "_nonzero(x)"},
    {"_layer_norm", f_layer_norm, METH_VARARGS, "_layer_norm(x, k, weight, bias, eps)"},
    {"_window", f_window, METH_VARARGS,
     "_window(op, tensors, kernel, stride, padding, dilation, groups, ceil_mode, count_include_pad, divisor, shape[, "
     "layout])"},
    {"_masked_select", f_masked_select, METH_VARARGS, "_masked_select(x, mask)"},
    {"_empty", f_empty, METH_VARARGS, "_empty(shape, dtype, device=None)"},
    {"_linspace", f_linspace, METH_VARARGS, "_linspace(start, end, steps, dtype)"},
    {"_eye", f_eye, METH_VARARGS, "_eye(n, m, dtype)"},
    {"_randint", f_randint, METH_VARARGS, "_randint(low, high, shape, dtype, generator=None)"},
    {"_randperm", f_randperm, METH_VARARGS, "_randperm(n, dtype, generator=None)"},
    {"result_type", f_result_type, METH_VARARGS, "the dtype an op on the two operands gives"},
    {"_result_type", f_result_type_n, METH_VARARGS, "the dtype an elementwise op on all the operands gives"},
    {"_resize_", f_resize, METH_VARARGS, "_resize_(t, shape): Tensor.resize_"},
    {"_set_geometry", f_set_geometry, METH_VARARGS, "_set_geometry(t, source, offset, shape, strides)"},
    {"promote_types", f_promote_types, METH_VARARGS, "the smallest dtype both promote to"},
    {"can_cast", f_can_cast, METH_VARARGS, "can results of dtype `from` be written into `to`?"},
    {"_op_ids", f_op_ids, METH_NOARGS, "{op name: op id}"},
    {"_op_table", f_op_table, METH_NOARGS, "the op table: one dict per op (kind, arity, dtypes, attributes, flags)"},
    {"_version", f_version, METH_O, "the version counter of a tensor's storage"},
    {NULL, NULL, 0, NULL},
};
