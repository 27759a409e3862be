"""More Tensor methods and functions of PyTorch's (issue 40, item 3),
composed of ember's ops: the in-place spellings of out-of-place methods
(x.tril_(k) is x.copy_(x.tril(k)), bumping the version as PyTorch's do),
index_copy/index_fill/masked_scatter/put/take, take_along_dim, dist,
renorm, cov and corrcoef, cummax/cummin, quantile and nanquantile,
Tensor.unfold's sliding windows, addmv/addr/addbmm, fill_diagonal_, the
random fills PyTorch has (random_, cauchy_, log_normal_, geometric_), and
the real-tensor identities (conj, real, resolve_conj, is_conj, ...)."""

import builtins
import math
import numbers

from . import _C, _creation, _ops
from ._math_extras import _inplace as _inplace_method
from ._ops import _export, _method
from ._tensor import Tensor

__all__ = []  # (the functions register themselves with _ops)




# ---------------------------------------------------------------- in-place spellings

for _name in ("divide", "multiply", "subtract", "true_divide", "not_equal", "greater", "greater_equal", "less",
              "less_equal", "negative", "absolute", "clamp_min", "clamp_max", "fix", "square", "sinc", "logit",
              "xlogy", "deg2rad", "rad2deg", "addmm", "baddbmm", "cumsum", "cumprod", "tril", "triu",
              "float_power", "digamma", "erfinv", "lgamma", "i0", "polygamma", "mvlgamma", "atan2", "arctan2"):
    if hasattr(Tensor, _name) or hasattr(_ops, _name):
        _inplace_method(_name + "_", lambda self, *a, _n=_name, **k: getattr(self, _n)(*a, **k))


# ---------------------------------------------------------------- indexing

def _index_shape(input, dim, index, name):
    if index.ndim > 1:
        raise IndexError(f"{name}(): Index is supposed to be a vector")
    return dim % builtins.max(input.ndim, 1)


def _set_slices(input, dim, index, value, name):
    """A copy of input whose slices `index` along dim are set to value (a
    0-d input as one element along dim 0)."""
    if input.ndim == 0:
        v = value.reshape(-1) if isinstance(value, Tensor) else value
        return _set_slices(input.reshape(1), dim, index, v, name).reshape(())
    d = _index_shape(input, dim, index, name)
    out = input.clone()
    sel = [slice(None)] * input.ndim
    sel[d] = index.reshape(-1)
    out[tuple(sel)] = value
    return out


@_method
def index_copy(input, dim, index, source):
    """input with the slices `index` along dim replaced by source's."""
    return _set_slices(input, dim, index, source, "index_copy")


@_method
def index_fill(input, dim, index, value):
    """input with the slices `index` along dim set to value."""
    return _set_slices(input, dim, index, value, "index_fill")


@_method
def masked_scatter(input, mask, source):
    """input with the positions where mask is True taken from source's
    elements, in order."""
    shape = _ops.broadcast_shapes(input.shape, mask.shape)  # (input and mask broadcast together)
    m = mask.broadcast_to(shape) if tuple(mask.shape) != tuple(shape) else mask
    n = builtins.int(m.sum().item())
    if source.numel() < n:
        raise RuntimeError("masked_scatter: expected source to have at least as many elements as ones in mask")
    out = input.broadcast_to(shape).clone()
    out[m] = source.reshape(-1)[:n]
    return out


@_method
def take(input, index):
    """input as if flattened, at index (any shape)."""
    return input.reshape(-1)[index]


@_method
def put(input, index, source, accumulate=False):
    """input as if flattened, with index's positions set to (or, with
    accumulate, added) source's elements."""
    flat = input.reshape(-1).clone()
    flat = flat.index_put((index.reshape(-1),), source.reshape(-1), accumulate)
    return flat.reshape(input.shape)


for _name, _fn in (("index_copy_", index_copy), ("index_fill_", index_fill), ("masked_scatter_", masked_scatter),
                   ("put_", put)):
    _inplace_method(_name, _fn)


@_method
def fill_diagonal_(input, fill_value, wrap=False):
    """Fills the main diagonal (all dims of equal size, or a tall matrix
    with wrap) in place."""
    if input.ndim < 2:
        raise RuntimeError("fill_diagonal_: dimensions must larger than 1")
    if input.ndim > 2 and len(set(input.shape)) != 1:
        raise RuntimeError("fill_diagonal_: all dimensions of input must be of equal length")
    n = builtins.min(input.shape)
    if input.ndim == 2 and wrap and input.shape[0] > input.shape[1]:
        rows = [r for r in range(input.shape[0]) if r % (input.shape[1] + 1) < input.shape[1]]
        idx = (_creation.tensor(rows, dtype=_C.int64),
               _creation.tensor([r % (input.shape[1] + 1) for r in rows], dtype=_C.int64))
    else:
        i = _creation.arange(n)
        idx = (i,) * input.ndim
    input[idx] = fill_value
    return input


# ---------------------------------------------------------------- reductions and statistics

@_method
def dist(input, other, p=2):
    """The p-norm of input - other."""
    return (input - other).norm(p)


@_method
def renorm(input, p, dim, maxnorm):
    """Each slice along dim rescaled to p-norm at most maxnorm."""
    d = dim % input.ndim
    others = tuple(i for i in range(input.ndim) if i != d)
    norms = input.norm(p, others, keepdim=True) if others else input.abs()
    scale = _ops.where(norms > maxnorm, maxnorm / (norms + 1e-7), _creation.ones_like(norms))
    return input * scale


_inplace_method("renorm_", renorm)


@_method
def cov(input, *, correction=1, fweights=None, aweights=None):
    """The covariance of input's rows (variables) over its columns
    (observations). The weights' sums and the normaliser are computed in
    the weights' own dtype, as PyTorch's are."""
    x = input.reshape(1, -1) if input.ndim < 2 else input
    if not x.dtype.is_floating_point:
        x = x.to(_C._default_dtype())
    w = fweights
    if aweights is not None:
        w = aweights if w is None else w * aweights
    if w is None:
        mean = x.mean(1, keepdim=True)
        norm = x.shape[1] - correction
    else:
        wsum = w.sum()
        mean = (x * w).sum(1, keepdim=True) / wsum
        if not correction:
            norm = wsum
        elif aweights is None:
            norm = wsum - correction
        else:
            norm = wsum - correction * (w * aweights).sum() / wsum
    xc = x - mean
    c = xc @ (xc * w if w is not None else xc).t()
    # degrees of freedom <= 0 divide by 0 (inf, or NaN for 0/0), as PyTorch's
    c = c / norm.clamp(min=0) if isinstance(norm, Tensor) else c / norm if norm > 0 else c / 0.0
    return c.reshape(()) if x.shape[0] == 1 else c  # (one variable: a 0-d result, as NumPy's)


@_method
def corrcoef(input):
    """Pearson's correlation coefficients of input's rows, clipped to [-1, 1]."""
    c = cov(input)
    if c.ndim == 0:
        return c / c
    d = _ops.diagonal(c).sqrt()
    return (c / d.reshape(-1, 1) / d.reshape(1, -1)).clamp(-1.0, 1.0)


def _scan(input, dim, combine):
    """The inclusive scan of combine(earlier, later) along dim by doubling
    (Hillis-Steele): log2(n) passes of elementwise ops, so it traces,
    compiles and differentiates as they do. combine takes and returns
    tuples of tensors of input's shape."""
    d = dim % builtins.max(input.ndim, 1)
    n = input.shape[d] if input.ndim else 1
    pos = _creation.arange(n).reshape([n if i == d else 1 for i in range(input.ndim)]) if input.ndim else None
    state = combine(None, None, init=input)
    k = 1
    while k < n:
        shifted = tuple(_ops.cat([t.narrow(d, 0, k), t.narrow(d, 0, n - k)], d) for t in state)
        merged = combine(shifted, state)
        state = tuple(_ops.where(pos >= k, m, t) for m, t in zip(merged, state))
        k *= 2
    return state


def _running_extreme(input, dim, larger, name):
    """(values, indices) of the running max (min) along dim: ties take the
    later index, and a NaN, once seen, stays, as PyTorch's."""
    if input.ndim == 0:
        return _CUM[name](input.clone(), _creation.zeros((), dtype=_C.int64))
    d = dim % input.ndim
    n = input.shape[d]
    idx0 = _creation.arange(n).reshape([n if i == d else 1 for i in range(input.ndim)]).expand(input.shape)

    def combine(earlier, later, init=None):
        if init is not None:
            return init, idx0
        (ve, ie), (vl, il) = earlier, later
        take_later = (vl >= ve) if larger else (vl <= ve)
        if input.dtype.is_floating_point:
            take_later = (take_later & ~ve.isnan()) | vl.isnan()
        return _ops.where(take_later, vl, ve), _ops.where(take_later, il, ie)
    values, indices = _scan(input, d, combine)
    return _CUM[name](values, indices)


def _named(name, fields):
    from collections import namedtuple
    t = namedtuple(name, fields)
    t.__module__ = "ember.return_types"
    return t


_CUM = {"cummax": _named("cummax", ["values", "indices"]), "cummin": _named("cummin", ["values", "indices"])}


@_method
def cummax(input, dim):
    """The running maximum along dim and where it was."""
    return _running_extreme(input, dim, True, "cummax")


@_method
def cummin(input, dim):
    """The running minimum along dim and where it was."""
    return _running_extreme(input, dim, False, "cummin")


@_method
def logcumsumexp(input, dim):
    """log(cumsum(exp(x))) along dim, as a scan of logaddexp (each step
    stable, no prefix underflowing against a later maximum)."""
    x = input if input.dtype.is_floating_point else input.to(_C._default_dtype())
    if x.ndim == 0:
        return x.clone()

    def combine(earlier, later, init=None):
        if init is not None:
            return (init,)
        return (_ops.logaddexp(earlier[0], later[0]),)
    return _scan(x, dim, combine)[0]


def _quantile(input, q, dim, keepdim, interpolation, ignore_nan, name):
    if interpolation not in ("linear", "lower", "higher", "midpoint", "nearest"):
        raise ValueError(f"{name}() interpolation must be one of linear, lower, higher, midpoint or nearest. "
                         f"Got {interpolation}")
    scalar_q = isinstance(q, numbers.Number)
    qs = _creation.tensor([q] if scalar_q else q, dtype=input.dtype) if not isinstance(q, Tensor) else \
        q.reshape(-1).to(input.dtype)
    if builtins.bool(((qs < 0) | (qs > 1)).any().item()):
        raise RuntimeError(f"{name}() q values must be in the range [0, 1]")
    zero_d = input.ndim == 0
    if zero_d:  # (one element along dim 0; the result stays 0-d, keepdim or not)
        if dim is not None and dim not in (0, -1):
            raise IndexError(f"{name}(): dimension out of range (expected to be in range of [-1, 0], but got {dim})")
        input, keepdim = input.reshape(1), False
    x = input.reshape(-1) if dim is None else input.movedim(dim, -1)
    srt = x.sort(-1).values  # NaN last
    n = x.shape[-1]
    if ignore_nan:
        count = (~x.isnan()).sum(-1, keepdim=True).to(input.dtype)
    else:
        count = _creation.full_like(x[..., :1], n)
    pos = qs * (count - 1)  # (..., len(q))
    lo = pos.floor().clamp(min=0)
    hi = pos.ceil().clamp(min=0)
    if interpolation == "lower":
        pos = lo
    elif interpolation == "higher":
        pos = hi
    elif interpolation == "nearest":
        pos = pos.round()
    lo_v = srt.gather(-1, pos.floor().clamp(0, builtins.max(n - 1, 0)).long())
    hi_v = srt.gather(-1, pos.ceil().clamp(0, builtins.max(n - 1, 0)).long())
    frac = pos - pos.floor()
    out = lo_v + (hi_v - lo_v) * (0.5 if interpolation == "midpoint" else frac) \
        if interpolation in ("linear", "midpoint") else lo_v
    if interpolation == "midpoint":
        out = _ops.where(lo == hi, lo_v, (lo_v + hi_v) * 0.5)
    if not ignore_nan:
        has_nan = x.isnan().any(-1, keepdim=True)
        out = _ops.where(has_nan, _creation.full_like(out, math.nan), out)
    else:
        out = _ops.where(count == 0, _creation.full_like(out, math.nan), out)
    out = out.movedim(-1, 0)  # q first, as PyTorch's
    if keepdim:
        if dim is None:
            out = out.reshape((out.shape[0],) + (1,) * input.ndim)
        else:
            out = out.unsqueeze(dim % input.ndim + 1)
    return out[0] if scalar_q else out


@_method
def quantile(input, q, dim=None, keepdim=False, *, interpolation="linear"):
    """The q-th quantiles (q a number or a 1-d tensor) along dim, or of all."""
    return _quantile(input, q, dim, keepdim, interpolation, False, "quantile")


@_method
def nanquantile(input, q, dim=None, keepdim=False, *, interpolation="linear"):
    """quantile, ignoring NaNs."""
    return _quantile(input, q, dim, keepdim, interpolation, True, "nanquantile")


# ---------------------------------------------------------------- products

@_method
def addmv(input, mat, vec, *, beta=1, alpha=1):
    r = mat @ vec
    return (input * beta if beta != 1 else input) + (r * alpha if alpha != 1 else r) if beta != 0 else r * alpha


@_method
def addr(input, vec1, vec2, *, beta=1, alpha=1):
    r = vec1.reshape(-1, 1) * vec2.reshape(1, -1)
    return (input * beta if beta != 1 else input) + (r * alpha if alpha != 1 else r) if beta != 0 else r * alpha


@_method
def addbmm(input, batch1, batch2, *, beta=1, alpha=1):
    r = (batch1 @ batch2).sum(0)
    return (input * beta if beta != 1 else input) + (r * alpha if alpha != 1 else r) if beta != 0 else r * alpha


for _name, _fn in (("addmv_", addmv), ("addr_", addr), ("addbmm_", addbmm)):
    _inplace_method(_name, _fn)


# ---------------------------------------------------------------- windows

def _unfold_method(self, dimension, size, step):
    """Tensor.unfold: the windows of `size` elements, `step` apart, along
    dimension, as a new last dim (a copy here, a view in PyTorch)."""
    d = dimension % builtins.max(self.ndim, 1)
    n = self.shape[d] if self.ndim else 1
    if size > n:
        raise RuntimeError(f"maximum size for tensor at dimension {d} is {n} but size is {size}")
    if step <= 0:
        raise RuntimeError(f"step is {step} but must be > 0")
    if self.ndim == 0:  # (PyTorch's: the one element as a window of `size`)
        return self.reshape(1)[:size]
    count = (n - size) // step + 1
    starts = _creation.arange(count) * step
    idx = (starts.reshape(-1, 1) + _creation.arange(size).reshape(1, -1)).reshape(-1)
    picked = self.index_select(d, idx)  # (.., count * size, ..)
    shape = list(self.shape)
    shape[d:d + 1] = [count, size]
    return picked.reshape(shape).movedim(d + 1, -1)


_ops._METHODS["unfold"] = (_unfold_method, True)


# ---------------------------------------------------------------- random fills

def _fill_from(self, values):
    from .autograd import no_grad
    with no_grad():
        return self.copy_(values)


def _random_(self, from_=0, to=None, *, generator=None):
    """Integers from [from, to) (to: the dtype's top + 1 by default)."""
    if to is None:
        to, from_ = from_, 0
        if to == 0:
            to = 2 ** 24 if self.dtype.is_floating_point else 2 ** 31
    return _fill_from(self, _creation.randint(from_, to, tuple(self.shape), dtype=self.dtype))


def _cauchy_(self, median=0.0, sigma=1.0, *, generator=None):
    u = _creation.rand(*self.shape, dtype=self.dtype, device=self.device)
    return _fill_from(self, median + sigma * (math.pi * (u - 0.5)).tan())


def _log_normal_(self, mean=1.0, std=2.0, *, generator=None):
    return _fill_from(self, (_creation.randn(*self.shape, dtype=self.dtype, device=self.device) * std + mean).exp())


def _geometric_(self, p, *, generator=None):
    u = _creation.rand(*self.shape, dtype=_C.float64, device=self.device)
    return _fill_from(self, ((1.0 - u).log() / math.log1p(-p)).ceil().clamp(min=1).to(self.dtype))


for _name, _fn in (("random_", _random_), ("cauchy_", _cauchy_), ("log_normal_", _log_normal_),
                   ("geometric_", _geometric_)):
    _ops._METHODS[_name] = (_fn, True)


# ---------------------------------------------------------------- real tensors

for _name, _fn in (("conj", lambda self: self), ("resolve_conj", lambda self: self),
                   ("resolve_neg", lambda self: self), ("conj_physical", lambda self: self.clone()),
                   ("is_conj", lambda self: False), ("is_neg", lambda self: False),
                   ("is_inference", lambda self: False), ("ndimension", lambda self: self.ndim),
                   ("get_device", lambda self: -1 if self.is_cpu or self.is_meta else self.device.index or 0),
                   ("is_pinned", lambda self: False),
                   ("pin_memory", lambda self: self), ("is_shared", lambda self: False),
                   ("share_memory_", lambda self: self)):
    _ops._METHODS[_name] = (_fn, True)

for _name in ("conj", "resolve_conj", "resolve_neg", "conj_physical", "is_conj", "is_neg", "is_inference"):
    _export(_ops._METHODS[_name][0], _name)


@_export
def real(input):
    """A real tensor's real part: itself."""
    return input


@_export
def imag(input):
    raise RuntimeError("imag is not implemented for tensors with non-complex dtypes.")


# ---------------------------------------------------------------- nn.functional at the top level

def _functional_aliases():
    """torch.<name> for the nn.functional functions PyTorch exports at its
    top level with the same signature (torch.conv2d is F.conv2d)."""
    from .nn import functional as F
    for name in ("conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d",
                 "max_pool1d", "max_pool2d", "max_pool3d", "avg_pool1d", "adaptive_avg_pool1d", "pixel_shuffle",
                 "pixel_unshuffle", "cosine_similarity", "pairwise_distance", "pdist", "layer_norm", "group_norm",
                 "dropout", "alpha_dropout", "feature_alpha_dropout", "selu", "celu", "threshold", "prelu",
                 "rrelu", "hardshrink", "bilinear", "channel_shuffle", "native_channel_shuffle", "selu_",
                 "celu_", "threshold_", "rrelu_", "relu_", "native_layer_norm", "native_batch_norm"):
        if not hasattr(_ops, name) and hasattr(F, name):
            _export(getattr(F, name), name)
    for name, fn in (("dropout_", F.dropout), ("alpha_dropout_", F.alpha_dropout),
                     ("feature_alpha_dropout_", F.feature_alpha_dropout)):
        _export(lambda input, p, train, _fn=fn: _fn(input, p, train, True), name)


# ---------------------------------------------------------------- sum_to_size

def _sum_to_size(self, *size):
    """The sum of self down to `size`, a shape self broadcasts from (what a
    broadcast's gradient is summed to)."""
    from ._creation import _sizes
    target = _sizes("sum_to_size", size)
    shape = tuple(self.shape)
    lead = len(shape) - len(target)
    if lead < 0 or any(t not in (1, s) for t, s in zip(target, shape[lead:])):
        raise RuntimeError(f"size {list(target)} is not expandable to size {list(shape)}")
    dims = list(range(lead)) + [lead + i for i, t in enumerate(target) if t == 1 and shape[lead + i] != 1]
    out = self.sum(dims, keepdim=True) if dims else self
    return out.reshape(target) if lead or dims else out


Tensor.sum_to_size = _sum_to_size


# ---------------------------------------------------------------- scatter into views

def _into_view(input, src, view, name):
    """A copy of input with view(copy) replaced by src (the *_scatter ops:
    the inverse of a view, differentiable to both)."""
    out = input.clone()
    part = view(out)
    if tuple(part.shape) != tuple(src.shape):
        raise RuntimeError(f"{name}: expected src to have a size equal to the slice of self. src size = "
                           f"{list(src.shape)}, slice size = {list(part.shape)}")
    part.copy_(src)
    return out


@_method
def diagonal_scatter(input, src, offset=0, dim1=0, dim2=1):
    """input with its (offset, dim1, dim2) diagonal replaced by src."""
    return _into_view(input, src, lambda t: t.diagonal(offset, dim1, dim2), "diagonal_scatter")


@_method
def select_scatter(input, src, dim, index):
    """input with its index-th slice along dim replaced by src."""
    return _into_view(input, src, lambda t: t.select(dim, index), "select_scatter")


@_method
def slice_scatter(input, src, dim=0, start=None, end=None, step=1):
    """input with the slice start:end:step along dim replaced by src."""
    def view(t):
        sel = [builtins.slice(None)] * t.ndim
        sel[dim] = builtins.slice(start, end, step)
        return t[tuple(sel)]
    return _into_view(input, src, view, "slice_scatter")


@_method
def split_with_sizes(input, split_sizes, dim=0):
    """Pieces of the given sizes along dim (they must add up to its size)."""
    n = input.shape[dim]
    if builtins.sum(split_sizes) != n:
        raise RuntimeError(f"split_with_sizes expects split_sizes to sum exactly to {n} (input tensor's size at "
                           f"dimension {dim}), but got split_sizes={list(split_sizes)}")
    return input.split(list(split_sizes), dim)


@_method
def narrow_copy(input, dim, start, length):
    """narrow, as a new tensor of its own."""
    return input.narrow(dim, start, length).clone()


@_export
def constant_pad_nd(input, pad, value=0):
    """nn.functional.pad with mode='constant'."""
    from .nn.functional import pad as _pad
    return _pad(input, pad, "constant", value)


# ---------------------------------------------------------------- strided views of memory

def _strided_extent(name, size, stride, offset):
    size, stride = tuple(int(n) for n in size), tuple(int(s) for s in stride)
    if len(size) != len(stride):
        raise RuntimeError(f"mismatch in length of strides and shape: {len(size)} sizes, {len(stride)} strides")
    if any(n < 0 for n in size) or any(s < 0 for s in stride) or offset < 0:
        raise RuntimeError(f"{name}: negative sizes, strides and offsets are not allowed (size {list(size)}, "
                           f"stride {list(stride)}, storage_offset {offset})")
    if any(n == 0 for n in size):
        return size, stride, 0
    return size, stride, offset + builtins.sum((n - 1) * s for n, s in zip(size, stride)) + 1


@_method
def as_strided(input, size, stride, storage_offset=None):
    """A view of input's memory: element i is memory[storage_offset + sum(i[d]
    * stride[d])] (storage_offset defaults to input's own). Writes through
    it reach input. Differentiable where input is the whole of its memory,
    laid out row-major (the gradient sums where elements overlap)."""
    offset = input.storage_offset() if storage_offset is None else int(storage_offset)
    size, stride, need = _strided_extent("as_strided", size, stride, offset)
    total = input._storage_size()
    if need > total:
        raise RuntimeError(f"setStorage: sizes {list(size)}, strides {list(stride)}, storage offset {offset}, and "
                           f"itemsize {input.element_size()} requiring a storage size of "
                           f"{need * input.element_size()} are out of bounds for storage of size "
                           f"{total * input.element_size()}")
    whole = input.is_contiguous() and input.storage_offset() == 0 and input.numel() == total
    if whole:
        flat = input.reshape(-1)
    elif input.requires_grad:
        raise NotImplementedError("as_strided: the gradient through a view that is not the whole of its memory "
                                  "is not implemented in ember; call it on the base tensor, or on .contiguous()")
    else:
        flat = _C._storage_view(input, 0, (total,), (1,))
    return _C._op(_ops._ID["as_strided"], [flat], {"shape": list(size), "stride": list(stride), "offset": offset})


@_method
def as_strided_scatter(input, src, size, stride, storage_offset=None):
    """A copy of input (row-major) whose as_strided(size, stride,
    storage_offset) view is replaced by src; differentiable to both."""
    offset = 0 if storage_offset is None else int(storage_offset)
    size, stride, need = _strided_extent("as_strided_scatter", size, stride, offset)
    if need > input.numel():
        raise RuntimeError(f"as_strided_scatter: size {list(size)} and stride {list(stride)} from offset {offset} "
                           f"reach element {need - 1} of a tensor of {input.numel()}")
    if tuple(src.shape) != size:
        raise RuntimeError(f"expected src to have a size equal to the slice of self. src size = {list(src.shape)}, "
                           f"slice size = {list(size)}")
    flat = input.contiguous().reshape(-1)
    out = _C._op(_ops._ID["as_strided_scatter"], [flat, src.to(input.dtype)], {"stride": list(stride),
                                                                              "offset": offset})
    return out.reshape(tuple(input.shape))


@_export
def empty_strided(size, stride, *, dtype=None, layout=None, device=None, requires_grad=False, pin_memory=False):
    """An uninitialised tensor with the given sizes and strides (over memory
    just large enough for them)."""
    size, stride, need = _strided_extent("empty_strided", size, stride, 0)
    base = _creation.empty(builtins.max(need, 1), dtype=dtype, device=device)
    out = _C._storage_view(base, 0, size, stride)
    return out.requires_grad_() if requires_grad else out


def _new_empty_strided(self, size, stride, *, dtype=None, layout=None, device=None, requires_grad=False,
                       pin_memory=False):
    return empty_strided(size, stride, dtype=dtype or self.dtype, device=device, requires_grad=requires_grad)


Tensor.new_empty_strided = _new_empty_strided
