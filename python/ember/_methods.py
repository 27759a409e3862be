"""Tensor methods defined in Python: PyTorch's method names over the
functional API of _ops.py, in-place variants, indexing and conversions.
Methods implemented in C (ember._C._TensorBase) are left alone unless the
Python version accepts more of PyTorch's arguments (add's alpha, say).
"""

from . import _C, _indexing, _ops, cuda
from ._tensor import Tensor

_ID = _ops._ID

# x.name(...) == ember.name(x, ...): what _ops.py marked as methods; those
# made from the op table only where _TensorBase has no C method of the name
for _name, (_fn, _over_c) in _ops._METHODS.items():
    if _over_c or not hasattr(Tensor, _name):
        setattr(Tensor, _name, _fn)


def _where(self, condition, other):
    """x.where(condition, y): x where condition, else y."""
    return _ops.where(condition, self, other)


Tensor.where = _where
Tensor.repeat = lambda self, *sizes: _ops.repeat(self, *sizes)
Tensor.tile = lambda self, *dims: _ops.tile(self, dims[0] if len(dims) == 1 and not isinstance(dims[0], int) else dims)
Tensor.flip = lambda self, *dims: _ops.flip(self, dims[0] if len(dims) == 1 and not isinstance(dims[0], int) else dims)


# ---- in place: x.op_(...) writes into x and returns it ----

def _inplace(row):
    """x.<name>_(...) for an elementwise op of the table: the result, cast to
    x's dtype, written into x."""
    op, name = row["id"], row["name"]
    if row["kind"] == "unary":
        def fn(self):
            return _C._ew_(op, self, self)
    else:
        def fn(self, other):
            return _C._ew_(op, self, self, other)
    fn.__name__ = fn.__qualname__ = name + "_"
    return fn


# every elementwise op with a method, but predicates (isnan_ has no meaning
# in x's dtype, and PyTorch has none); the definitions below that take more
# arguments replace their plain forms
for _row in _ops._ELEMENTWISE:
    if _row["method"] and _row["promote"] != "pred":
        setattr(Tensor, _row["name"] + "_", _inplace(_row))


def add_(self, other, *, alpha=1):
    if alpha != 1:
        other = other * alpha
    return _C._ew_(_ID["add"], self, self, other)


def sub_(self, other, *, alpha=1):
    if alpha != 1:
        other = other * alpha
    return _C._ew_(_ID["sub"], self, self, other)


def div_(self, other, *, rounding_mode=None):
    if rounding_mode is None:
        return _C._ew_(_ID["div"], self, self, other)
    return self.copy_(_ops.div(self, other, rounding_mode=rounding_mode))


def clamp_(self, min=None, max=None):
    if min is None and max is None:
        raise RuntimeError("clamp_: at least one of 'min' or 'max' must not be None")
    nan = _ops._nan_bounds(min, max)
    if nan is not None and self.is_floating_point():
        return self.copy_(_ops.clamp(self, min, max))
    return _C._ew_(_ID["clamp"], self, self, _ops._bound(self, min, False), _ops._bound(self, max, True))


def lerp_(self, end, weight):
    return _C._ew_(_ID["lerp"], self, self, end, weight)


def copy_(self, src):
    """Copies src (broadcast, converted) into this tensor."""
    return _C._ew_(_ID["cast"], self, src)


def fill_(self, value):
    return _C._ew_(_ID["cast"], self, value)


def zero_(self):
    return _C._ew_(_ID["cast"], self, 0)


def masked_fill_(self, mask, value):
    return _C._ew_(_ID["where"], self, mask, value, self)


def scatter_(self, dim, index, src=None, *, value=None, reduce=None):
    return self.copy_(_ops.scatter(self, dim, index, src, value=value, reduce=reduce))


def scatter_add_(self, dim, index, src):
    return self.copy_(_ops.scatter_add(self, dim, index, src))


def index_put_(self, indices, values, accumulate=False):
    return _indexing.index_put(self, indices, values, accumulate, inplace=True)


def index_put(self, indices, values, accumulate=False):
    return _indexing.index_put(self, indices, values, accumulate, inplace=False)


for _fn in (add_, sub_, div_, clamp_, lerp_, copy_, fill_, zero_, masked_fill_, scatter_,
            scatter_add_, index_put_, index_put):
    setattr(Tensor, _fn.__name__, _fn)
Tensor.clip_ = clamp_


# ---- indexing and iteration ----

Tensor.__getitem__ = _indexing.getitem
Tensor.__setitem__ = _indexing.setitem


def _iter(self):
    if self.ndim == 0:
        raise TypeError("iteration over a 0-d tensor")
    return iter(_ops.unbind(self, 0))


def _contains(self, value):
    return bool((self == value).any())


Tensor.__iter__ = _iter
Tensor.__contains__ = _contains


# ---- conversions and shapes ----

def _to_dtype(meth, name):
    cast = _C._TensorBase.to
    dtype = getattr(_C, name)

    def fn(self, memory_format=None):
        """self in this dtype (itself when it already is); memory_format as
        PyTorch's: preserve_format (the default) keeps a channels-last
        layout."""
        out = cast(self, dtype)
        if out is self or (memory_format is None and self.ndim not in (4, 5)):  # (the common case, kept cheap)
            return out
        from . import _memory_format as mf
        fmt = mf.suggest(self) if memory_format in (None, mf.preserve_format) else memory_format
        return mf.to_format(out, fmt, meth)
    fn.__name__ = fn.__qualname__ = meth
    return fn


for _meth, _dt in [("half", "float16"), ("bfloat16", "bfloat16"), ("int", "int32"), ("short", "int16"),
                   ("char", "int8"), ("byte", "uint8"), ("float", "float32"), ("double", "float64"),
                   ("long", "int64"), ("bool", "bool")]:
    setattr(Tensor, _meth, _to_dtype(_meth, _dt))


def _clone(self, *, memory_format=None):
    """A copy with its own memory: row-major, or in memory_format (the
    default, preserve_format, keeps a channels-last layout)."""
    copy = _C._TensorBase.to(self, self.dtype, copy=True)
    if memory_format is None and self.ndim not in (4, 5):  # (the common case, kept cheap)
        return copy
    from . import _memory_format as mf
    fmt = mf.suggest(self) if memory_format in (None, mf.preserve_format) else memory_format
    return copy if fmt is mf.contiguous_format else mf.to_format(copy, fmt, "clone")


Tensor.clone = _clone
Tensor.cpu = lambda self: self if self.is_cpu else self.to("cpu")


def _cuda(self, device=None, non_blocking=False):
    """A copy on a CUDA device: this build has none (ember.cuda)."""
    return self.to(cuda._device(device))


Tensor.cuda = _cuda
Tensor.is_cuda = property(lambda self: self.device.type == "cuda", doc="Is this tensor on a CUDA device?")
for _pred in ("is_xpu", "is_mps", "is_ipu", "is_hpu", "is_vulkan", "is_mkldnn", "is_quantized",
              "is_sparse", "is_sparse_csr", "is_nested"):
    setattr(Tensor, _pred, property(lambda self: False, doc="False: a dense CPU tensor"))
Tensor.type_as = lambda self, other: self.to(other.dtype)
Tensor.expand_as = lambda self, other: self.expand(*other.shape)
Tensor.view_as = lambda self, other: self.view(*other.shape)
Tensor.reshape_as = lambda self, other: self.reshape(*other.shape)
Tensor.is_floating_point = lambda self: self.dtype.is_floating_point
Tensor.nelement = lambda self: self.numel()
def _matrix_transpose(name):
    def get(self):
        if self.ndim == 0:  # (a 0-d tensor is its own transpose, as in PyTorch)
            return self
        if self.ndim < 2 or (name == "H" and self.ndim != 2):
            what = "matrices (2-D tensors)" if name == "H" else "matrices or batches of matrices"
            raise RuntimeError(f"tensor.{name} is only supported on {what}. Got {self.ndim}-D tensor.")
        return self.transpose(-2, -1)
    return property(get, doc="the last two dims swapped (conjugated too for H and mH: real tensors here)")


Tensor.mT = _matrix_transpose("mT")
Tensor.mH = _matrix_transpose("mH")
Tensor.H = _matrix_transpose("H")
Tensor._version = property(lambda self: _C._version(self), doc="the storage's version counter")


def _new(fill):
    def fn(self, *size, dtype=None, device=None, requires_grad=False, layout=None, pin_memory=False):
        return fill(_ops._sizes(size), dtype=dtype or self.dtype, device=device or self.device,
                    requires_grad=requires_grad)
    return fn


def _install_new():
    from . import _creation
    Tensor.new_zeros = _new(_creation.zeros)
    Tensor.new_ones = _new(_creation.ones)
    Tensor.new_empty = _new(_creation.empty)
    Tensor.new_full = lambda self, size, fill_value, *, dtype=None, device=None, requires_grad=False, \
        layout=None, pin_memory=False: _creation.full(size, fill_value, dtype=dtype or self.dtype, device=device or self.device,
                                                      requires_grad=requires_grad)
    Tensor.new_tensor = lambda self, data, *, dtype=None, device=None, requires_grad=False, layout=None, \
        pin_memory=False: _creation.tensor(data, dtype=dtype or self.dtype, device=device or self.device,
                                           requires_grad=requires_grad)


def _rmod(self, other):
    """other % self. A Python function, as PyTorch's, so that
    Tensor.__rmod__(2.5, t) (two operands in either order) is t's remainder
    too."""
    return _ops.remainder(other, self)


Tensor.__rmod__ = _rmod
Tensor.__rdiv__ = Tensor.__rtruediv__  # (PyTorch keeps Python 2's name)


# ---- resizing ----

def resize_(self, *sizes, memory_format=None):
    """Makes this tensor contiguous with `sizes` over its own memory, which
    grows when too small (its old contents kept, the new part
    uninitialised), as PyTorch's resize_."""
    from ._creation import _sizes
    _C._resize_(self, _sizes("resize_", sizes))
    if memory_format is not None:
        from . import _memory_format as mf
        if memory_format not in (mf.contiguous_format, mf.preserve_format):
            raise NotImplementedError(f"resize_: memory_format={memory_format} is not implemented in ember "
                                      "(resized tensors are row-major)")
    return self


def resize_as_(self, the_template, memory_format=None):
    """resize_ to the_template's shape."""
    return resize_(self, tuple(the_template.shape), memory_format=memory_format)


def _resize(self, *sizes):
    """The deprecated out-of-place resize: a reshape to sizes of the same
    number of elements."""
    import warnings
    from ._creation import _sizes
    warnings.warn("non-inplace resize is deprecated")
    return self.reshape(_sizes("resize", sizes))


def _resize_as(self, tensor):
    import warnings
    warnings.warn("non-inplace resize_as is deprecated")
    return self.reshape(tuple(tensor.shape))


Tensor.resize_, Tensor.resize_as_, Tensor.resize, Tensor.resize_as = resize_, resize_as_, _resize, _resize_as
_ops._export(resize_as_)
_ops._export(zero_)
