"""PyTorch functions and Tensor methods that real scripts touch and that are
compositions of ember's ops (issue 40, item 3): finfo and iinfo, isclose and
allclose, addcmul(_) and addcdiv(_), index_add(_), repeat_interleave and
normal. Each follows PyTorch's definition, so it traces and differentiates
as the ops it is made of."""

import builtins
import collections
import numbers

import numpy as _np

from . import _C, _ops
from ._creation import arange, tensor
from ._ops import _export, _method

__all__ = []  # (the functions register themselves with _ops)


# ---------------------------------------------------------------- finfo, iinfo

_NP = {"float32": _np.float32, "float64": _np.float64, "float16": _np.float16, "int64": _np.int64,
       "int32": _np.int32, "int16": _np.int16, "int8": _np.int8, "uint8": _np.uint8, "bool": _np.bool_}


class finfo:
    """The machine limits of a float dtype, as torch.finfo: bits, eps, max,
    min, tiny (smallest_normal), resolution, dtype."""

    def __init__(self, type=None):
        dt = type if type is not None else _C._default_dtype()
        name = str(dt).replace("ember.", "")
        if not dt.is_floating_point:
            raise TypeError(f"finfo: {dt} is not a floating point dtype (use ember.iinfo for integers)")
        if name == "bfloat16":  # (NumPy has none: 8 exponent bits, 7 mantissa bits)
            self.bits, self.eps, self.max = 16, 2.0 ** -7, float.fromhex("0x1.fep127")
            self.tiny = 2.0 ** -126
            self.resolution = 0.01
        else:
            f = _np.finfo(_NP[name])
            self.bits, self.eps, self.max, self.tiny = int(f.bits), float(f.eps), float(f.max), float(f.tiny)
            self.resolution = 10.0 ** -int(f.precision)  # (a Python float, as PyTorch gives it)
        self.min = -self.max
        self.smallest_normal = self.tiny
        self.dtype = name

    def __repr__(self):
        return (f"finfo(resolution={self.resolution:g}, min={self.min:g}, max={self.max:g}, eps={self.eps:g}, "
                f"smallest_normal={self.tiny:g}, tiny={self.tiny:g}, dtype={self.dtype})")


class iinfo:
    """The limits of an integer dtype, as torch.iinfo: bits, min, max, dtype."""

    def __init__(self, type):
        name = str(type).replace("ember.", "")
        if type.is_floating_point or name == "bool":
            raise TypeError(f"iinfo: {type} is not an integer dtype (use ember.finfo for floats)")
        i = _np.iinfo(_NP[name])
        self.bits, self.min, self.max, self.dtype = int(i.bits), int(i.min), int(i.max), name

    def __repr__(self):
        return f"iinfo(min={self.min}, max={self.max}, dtype={self.dtype})"


_export(finfo, "finfo")
_export(iinfo, "iinfo")


# ---------------------------------------------------------------- comparisons

def isclose(input, other, rtol=1e-05, atol=1e-08, equal_nan=False):
    """|input - other| <= atol + rtol * |other|, elementwise (PyTorch's
    definition: infinities equal only themselves; NaNs equal with
    equal_nan)."""
    if not isinstance(other, _C._TensorBase):
        other = tensor(other, dtype=input.dtype)
    if input.dtype != other.dtype:
        raise TypeError(f"isclose: {input.dtype} did not match {other.dtype}")
    if rtol < 0 or atol < 0:
        raise ValueError(f"isclose: rtol ({rtol}) and atol ({atol}) must be non-negative")
    if not input.dtype.is_floating_point:
        return (input - other).abs() <= atol + rtol * other.abs() if input.dtype != _C.bool else input == other
    same = input == other
    finite = input.isfinite() & other.isfinite()
    close = same | (finite & ((input - other).abs() <= atol + rtol * other.abs()))
    if equal_nan:
        close = close | (input.isnan() & other.isnan())
    return close


def allclose(input, other, rtol=1e-05, atol=1e-08, equal_nan=False):
    """True when every element of input is close to other's (isclose)."""
    return builtins.bool(isclose(input, other, rtol, atol, equal_nan).all())


def equal(input, other):
    """True when both have the same shape and the same elements (NaN is
    equal to nothing, as in PyTorch)."""
    return tuple(input.shape) == tuple(other.shape) and builtins.bool((input == other).all())


_method(isclose)
_method(allclose)
_method(equal)


# ---------------------------------------------------------------- fused arithmetic

def addcmul(input, tensor1, tensor2, *, value=1):
    """input + value * tensor1 * tensor2, in one pass and (floats) one
    rounding of the product's sum."""
    if value != 1:  # (value * tensor1 rounded in the result's dtype, not a narrower operand's)
        dt = _C._result_type(input, tensor1, tensor2)
        tensor1 = tensor1.to(dt) * value
    return _ops._mul_add(tensor1, tensor2, input)


def addcdiv(input, tensor1, tensor2, *, value=1):
    """input + value * tensor1 / tensor2 (true division; integer operands
    are refused, as PyTorch does)."""
    if not tensor1.dtype.is_floating_point and not tensor2.dtype.is_floating_point:
        raise RuntimeError("addcdiv: integer division with addcdiv is no longer supported; use "
                           "torch.floor_divide or true division instead")
    return input + value * (tensor1 / tensor2) if value != 1 else input + tensor1 / tensor2


def addcmul_(input, tensor1, tensor2, *, value=1):
    return input.copy_(addcmul(input, tensor1, tensor2, value=value))


def addcdiv_(input, tensor1, tensor2, *, value=1):
    return input.copy_(addcdiv(input, tensor1, tensor2, value=value))


for _fn in (addcmul, addcdiv, addcmul_, addcdiv_):
    _method(_fn)


# ---------------------------------------------------------------- indexing

def _dim(d, ndim, name):
    if not -builtins.max(ndim, 1) <= d < builtins.max(ndim, 1):
        raise IndexError(f"{name}: dimension {d} is out of range for a {ndim}-d tensor")
    return d % builtins.max(ndim, 1)


def index_add(input, dim, index, source, *, alpha=1):
    """A copy of input with source's slices along dim added at index's
    positions (repeats accumulate)."""
    out = input.clone()
    return index_add_(out, dim, index, source, alpha=alpha)


def index_add_(input, dim, index, source, *, alpha=1):
    """input[..., index[i], ...] += alpha * source[..., i, ...] along dim, in
    place; repeated indices accumulate."""
    d = _dim(dim, input.dim(), "index_add_")
    if index.dim() > 1:
        raise IndexError(f"index_add_: index must be a vector, got {index.dim()} dims")
    if source.dim() != input.dim() and not (input.dim() == 0 and source.dim() <= 1):
        raise RuntimeError(f"index_add_: source has {source.dim()} dims, the tensor {input.dim()}")
    if alpha != 1:
        source = source * alpha
    if input.dim() == 0:
        return input.add_(source.sum())
    if index.numel() != source.shape[d]:
        raise RuntimeError(f"index_add_: the index has {index.numel()} entries for {source.shape[d]} "
                           f"slices of the source along dim {d}")
    moved, src = input.movedim(d, 0), source.movedim(d, 0)
    moved.index_put_((index.reshape(-1),), src.to(input.dtype), accumulate=True)
    return input


def repeat_interleave(input, repeats=None, dim=None, *, output_size=None):
    """Each element (or each slice along dim) repeated `repeats` times in
    place; repeats an int or a 1-d tensor of counts. With only a tensor of
    counts, returns the indices repeated (torch.repeat_interleave(counts))."""
    if repeats is None:  # repeat_interleave(counts): arange(n) each repeated counts[i] times
        counts = input
        return repeat_interleave(arange(counts.numel()), counts)
    x = input.reshape(-1) if dim is None else input
    d = 0 if dim is None else _dim(dim, x.dim(), "repeat_interleave")
    n = x.shape[d] if x.dim() else 1
    if isinstance(repeats, numbers.Integral):
        if repeats < 0:
            raise RuntimeError("repeat_interleave: repeats must be non-negative")
        counts = [int(repeats)] * n
    else:
        counts = [int(c) for c in (repeats.reshape(-1).tolist() if hasattr(repeats, "tolist") else repeats)]
        if len(counts) == 1:
            counts = counts * n
        if len(counts) != n:
            raise RuntimeError(f"repeat_interleave: repeats must have the same size as input along dim, "
                               f"got {len(counts)} for {n}")
        if builtins.any(c < 0 for c in counts):
            raise RuntimeError("repeat_interleave: repeats can not be negative")
    idx = [i for i, c in enumerate(counts) for _ in range(c)]
    if output_size is not None and output_size != len(idx):
        raise RuntimeError(f"repeat_interleave: output_size is {output_size}, the repeats make {len(idx)}")
    return x.index_select(d, tensor(idx, dtype=_C.int64))


_method(index_add)
_method(index_add_)
_method(repeat_interleave)


# ---------------------------------------------------------------- sampling

def normal(mean, std=1.0, size=None, *, generator=None, dtype=None):
    """Draws from N(mean, std): mean and std tensors (broadcast) or numbers
    with a size, as torch.normal's forms."""
    from ._creation import randn
    if isinstance(mean, _C._TensorBase) or isinstance(std, _C._TensorBase):
        if size is not None:
            raise RuntimeError("normal: size is only for a float mean and std")
        m = mean if isinstance(mean, _C._TensorBase) else None
        s = std if isinstance(std, _C._TensorBase) else None
        ref = m if m is not None else s
        shape = _ops.broadcast_shapes(m.shape, s.shape) if m is not None and s is not None else ref.shape
        if s is not None and builtins.bool((s < 0).any()):
            raise RuntimeError("normal: expects all elements of std >= 0.0")
        return randn(*shape, dtype=ref.dtype, generator=generator) * std + mean
    if std < 0:
        raise RuntimeError(f"normal: expects std >= 0.0, but found std {std}")
    if size is None:
        raise TypeError("normal: with a float mean and std, give the size")
    size = tuple(size)
    return randn(*size, dtype=dtype, generator=generator) * std + mean


_export(normal, "normal")


# ---------------------------------------------------------------- legacy typed constructors

class _TypedTensorMeta(type):
    def __instancecheck__(cls, obj):
        return isinstance(obj, _C._TensorBase) and obj.dtype == getattr(_C, cls._dtype_name)


def _typed(name, dtype_name):
    """torch.FloatTensor and its kind: FloatTensor(data) a tensor of that
    dtype, FloatTensor(*sizes) an uninitialised one, FloatTensor() an empty
    one; isinstance(x, ember.FloatTensor) checks the dtype."""
    def __new__(cls, *args):
        dt = getattr(_C, dtype_name)
        if len(args) == 1 and not isinstance(args[0], numbers.Integral):
            data = args[0]
            if isinstance(data, _C._TensorBase):
                return data.to(dt)
            return tensor(data, dtype=dt)
        if not builtins.all(isinstance(a, numbers.Integral) for a in args):
            raise TypeError(f"{name}(): expected data (a list, a tensor) or sizes (ints), got {args!r}")
        from ._creation import empty
        return empty(*args, dtype=dt) if args else empty(0, dtype=dt)
    cls = _TypedTensorMeta(name, (), {"__new__": __new__, "_dtype_name": dtype_name,
                                      "__doc__": _typed.__doc__.replace("torch.FloatTensor", f"{name}")})
    return cls


_TYPED = {"FloatTensor": "float32", "DoubleTensor": "float64", "HalfTensor": "float16",
          "BFloat16Tensor": "bfloat16", "LongTensor": "int64", "IntTensor": "int32", "ShortTensor": "int16",
          "CharTensor": "int8", "ByteTensor": "uint8", "BoolTensor": "bool"}
for _name, _dt in _TYPED.items():
    _export(_typed(_name, _dt), _name)


def _type(self, dtype=None, non_blocking=False, **kwargs):
    """x.type(): its type's name ('ember.FloatTensor'); x.type(dtype) or
    x.type('torch.LongTensor'): x converted (itself when it already is)."""
    if dtype is None:
        for name, dt in _TYPED.items():
            if self.dtype == getattr(_C, dt):
                return "ember." + name
        return "ember.Tensor"
    if isinstance(dtype, str):
        short = dtype.rsplit(".", 1)[-1]
        if short not in _TYPED:
            raise ValueError(f"type: invalid type '{dtype}' (one of {', '.join('torch.' + k for k in _TYPED)})")
        dtype = getattr(_C, _TYPED[short])
    elif isinstance(dtype, _TypedTensorMeta):
        dtype = getattr(_C, dtype._dtype_name)
    return self if self.dtype == dtype else self.to(dtype)


_ops._METHODS["type"] = (_type, True)


# ---------------------------------------------------------------- aliases and small compositions

def swapaxes(input, axis0, axis1):
    """transpose under NumPy's name."""
    return input.transpose(axis0, axis1)


def swapdims(input, dim0, dim1):
    """transpose under another name."""
    return input.transpose(dim0, dim1)


def moveaxis(input, source, destination):
    """movedim under NumPy's name."""
    return input.movedim(source, destination)


def ravel(input):
    """The elements as one dim (a view where the layout allows)."""
    return input.reshape(-1)


def clamp_min(input, min):
    return input.clamp(min=min)


def clamp_max(input, max):
    return input.clamp(max=max)


def positive(input):
    """input itself (unary +), refused on bool as PyTorch does."""
    if input.dtype == _C.bool:
        raise TypeError("positive: the + operator on a bool tensor is not supported")
    return input


def deg2rad(input):
    """input * (pi / 180), in a float dtype."""
    x = input if input.dtype.is_floating_point else input.to(_C._default_dtype())
    return x * (3.141592653589793 / 180.0)


def rad2deg(input):
    """input * (180 / pi), in a float dtype."""
    x = input if input.dtype.is_floating_point else input.to(_C._default_dtype())
    return x * (180.0 / 3.141592653589793)


def nansum(input, dim=None, keepdim=False, *, dtype=None):
    """sum with NaNs counted as zero."""
    x = input.masked_fill(input.isnan(), 0) if input.dtype.is_floating_point else input
    out = x.sum() if dim is None else x.sum(dim, keepdim=keepdim)
    return out.to(dtype) if dtype is not None else out


def nanmean(input, dim=None, keepdim=False, *, dtype=None):
    """mean over the elements that are not NaN (NaN where there are none)."""
    if not input.dtype.is_floating_point:
        raise RuntimeError(f"nanmean(): expected a floating point input, got {input.dtype}")
    keep = ~input.isnan()
    total = nansum(input, dim, keepdim)
    count = keep.sum() if dim is None else keep.sum(dim, keepdim=keepdim)
    out = total / count.to(input.dtype)
    return out.to(dtype) if dtype is not None else out


def count_nonzero(input, dim=None):
    """How many elements are not zero (over dim, or all), as int64."""
    nz = input != 0
    return nz.sum() if dim is None else nz.sum(dim)


def trace(input):
    """The sum of a 2-d tensor's main diagonal."""
    if input.dim() != 2:
        raise RuntimeError(f"trace: expected a matrix, but got tensor with dim {input.dim()}")
    return input.diagonal().sum()


def diag(input, diagonal=0):
    """A 1-d input on the diagonal `diagonal` of a square matrix of zeros; a
    2-d input's diagonal `diagonal` (a copy)."""
    if input.dim() == 2:
        return input.diagonal(diagonal).clone()
    if input.dim() != 1:
        raise RuntimeError(f"diag: expected a 1-d or 2-d tensor, got {input.dim()} dims")
    from ._creation import zeros
    n = input.shape[0] + abs(diagonal)
    out = zeros(n, n, dtype=input.dtype)
    if input.requires_grad:  # (a differentiable placement: index_put)
        r0, c0 = (0, diagonal) if diagonal >= 0 else (-diagonal, 0)
        i = arange(r0, r0 + input.shape[0])
        j = arange(c0, c0 + input.shape[0])
        return out.index_put((i, j), input)
    out.diagonal(diagonal).copy_(input)
    return out


for _fn in (swapaxes, swapdims, moveaxis, ravel, clamp_min, clamp_max, positive, deg2rad, rad2deg, nansum, nanmean,
            count_nonzero, trace, diag):
    _method(_fn)


# ---------------------------------------------------------------- torch.svd

_svd_result = collections.namedtuple("svd", ["U", "S", "V"])


def svd(input, some=True, compute_uv=True):
    """torch.svd: (U, S, V) with input = U diag(S) V^T (V, not linalg.svd's
    Vh); some=False gives the full U and V; compute_uv=False gives zeros
    for U and V, as PyTorch's."""
    from . import linalg
    U, S, Vh = linalg.svd(input, full_matrices=not some)
    V = Vh.transpose(-2, -1)
    if not compute_uv:
        m, n, batch = input.shape[-2], input.shape[-1], tuple(input.shape[:-2])
        U, V = S.new_zeros(batch + (m, m)), S.new_zeros(batch + (n, n))  # (full sizes, as PyTorch's)
    return _svd_result(U, S, V)


_method(svd)
