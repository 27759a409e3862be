"""Reductions into positions: scatter_reduce, index_reduce, scatter(...,
reduce=) and segment_reduce, as PyTorch's (sum, prod, mean, amax, amin;
include_self).

Every form comes down to one question: for each flat position p of the
output, reduce the values sent to p (and the input's own value there, with
include_self). The values are ordered by destination with a stable sort,
reduced in runs by a segmented scan (log2(n) passes of elementwise ops, so
it traces, compiles and differentiates as they do: a product's gradient is
the product of the others, zeros included), and each position reads the
end of its run (found by searchsorted: no shape depends on the values). Sums and means use scatter_add directly. amax and
amin share their gradient evenly among the values equal to the result, as
PyTorch's do (an autograd.Function: a chain of pairwise maxima would split
it by pairs instead).
"""

import builtins

from . import _C, _creation, _ops
from ._ops import _export, _method
from ._tensor import Tensor

__all__ = []

_REDUCES = ("sum", "prod", "mean", "amax", "amin")


def _combine(reduce, a, b):
    if reduce == "prod":
        return a * b
    if reduce == "amax":
        return _ops.where((a > b) | a.isnan(), a, b)  # (NaN wins, as PyTorch's max)
    return _ops.where((a < b) | a.isnan(), a, b)


def _runs(dest, vals, reduce, size):
    """(touched, reduced), both of `size` positions: whether anything is
    sent to each position, and the reduction of what is (garbage where
    nothing is). Static shapes throughout, so it compiles: the values are
    sorted by destination and scanned within runs, and each position reads
    the end of its run, found by searchsorted."""
    sd, order = dest.sort(stable=True)
    x = vals[order]
    n = x.shape[0]
    k = 1
    while k < n:  # inclusive scan within runs of equal destinations
        same = sd[k:] == sd[:-k]
        x = _ops.cat([x[:k], _ops.where(same, _combine(reduce, x[:-k], x[k:]), x[k:])])
        k *= 2
    positions = _creation.arange(size)
    end = (_ops.searchsorted(sd, positions, right=True) - 1).clamp(min=0)
    return sd[end] == positions, x[end]


def _reduce_into(base, dest, vals, reduce, include_self):
    """base with the values `vals` (1-d) reduced into its flat positions
    `dest` (1-d int64)."""
    flat = base.reshape(-1)
    if vals.numel() == 0:
        return base.clone()
    if reduce in ("sum", "mean"):
        zeros = _creation.zeros_like(flat)
        total = zeros.scatter_add(0, dest, vals.to(flat.dtype))
        if reduce == "sum":
            out = flat + total if include_self else _ops.where(_touched(flat, dest), total, flat)
            return out.reshape(base.shape)
        count = zeros.scatter_add(0, dest, _creation.ones_like(vals, dtype=flat.dtype))
        touched = count > 0
        if include_self:
            total, count = total + flat, count + 1
        count = _ops.where(count > 0, count, _creation.ones_like(count))
        mean = total / count if flat.dtype.is_floating_point else total.div(count, rounding_mode="floor")
        return _ops.where(touched, mean, flat).reshape(base.shape)
    if reduce in ("amax", "amin"):
        if not _EXTREME:
            _EXTREME.append(_extreme_into_class())
        return _EXTREME[0].apply(base, vals, dest, reduce, include_self)
    touched, red = _runs(dest, vals.to(flat.dtype), reduce, flat.shape[0])
    if include_self:
        red = _combine(reduce, flat, red)
    return _ops.where(touched, red, flat).reshape(base.shape)


def _touched(flat, dest):
    return _creation.zeros(flat.shape[0], dtype=_C.bool, device=flat.device).index_put(
        (dest,), _creation.ones(1, dtype=_C.bool))


def _extreme_into_class():
    """The autograd.Function for amax/amin (made on first use: autograd
    imports after this module)."""
    from .autograd.function import Function

    class ExtremeInto(Function):
        """amax/amin into positions, with PyTorch's gradient: each of the values
        equal to a position's result (the input's own among them, with
        include_self) gets an equal share of its gradient; untouched positions
        pass theirs through."""

        @staticmethod
        def forward(ctx, base, vals, dest, reduce, include_self):
            flat = base.reshape(-1)
            touched, red = _runs(dest, vals.to(flat.dtype), reduce, flat.shape[0])
            if include_self:
                red = _combine(reduce, flat, red)
            out = _ops.where(touched, red, flat)
            ctx.save_for_backward(flat, vals, dest, out, touched)
            ctx.include_self = include_self
            return out.reshape(base.shape)

        @staticmethod
        def backward(ctx, g):
            flat, vals, dest, out, touched = ctx.saved_tensors
            gf = g.reshape(-1)
            hit_v = (vals.to(out.dtype) == out[dest]).to(gf.dtype)
            count = _creation.zeros_like(gf).scatter_add(0, dest, hit_v)
            # (the input's own ties count in the shares even with include_self
            # False, where their gradient is then dropped: PyTorch's formula)
            hit_b = ((flat == out) & touched).to(gf.dtype)
            count = count + hit_b
            share = gf / _ops.where(count > 0, count, _creation.ones_like(count))
            g_base = _ops.where(touched, share * hit_b if ctx.include_self else _creation.zeros_like(gf), gf)
            return g_base.reshape(g.shape), (share[dest] * hit_v).to(vals.dtype), None, None, None

    return ExtremeInto


_EXTREME = []


def _check_reduce(name, reduce):
    if reduce not in _REDUCES:
        raise RuntimeError(f"{name}: reduce argument must be either sum, prod, mean, amax or amin, got {reduce}")


def _scatter_dest(name, input, dim, index):
    """The flat positions in input that scatter along dim sends index's
    elements to (index's own shape)."""
    nd = builtins.max(input.ndim, 1)
    if not -nd <= dim < nd:
        raise IndexError(f"{name}: dimension {dim} is out of range for a {input.ndim}-d tensor")
    d = dim % nd
    if index.dtype != _C.int64:
        raise RuntimeError(f"{name}(): Expected dtype int64 for index")
    if input.ndim == 0:
        shape, strides = (1,), (1,)
    else:
        shape = tuple(input.shape)
        strides = [1] * len(shape)
        for i in range(len(shape) - 2, -1, -1):
            strides[i] = strides[i + 1] * shape[i + 1]
    idx = index.reshape(1) if index.ndim == 0 else index
    if idx.ndim != len(shape):
        raise RuntimeError(f"{name}: Index tensor must have the same number of dimensions as self tensor")
    if idx.numel() and builtins.bool(((idx < 0) | (idx >= shape[d])).any()):
        raise IndexError(f"{name}: index {idx.min().item() if (idx < 0).any() else idx.max().item()} is out of "
                         f"bounds for dimension {d} with size {shape[d]}")
    dest = _creation.zeros(tuple(idx.shape), dtype=_C.int64, device=idx.device)
    for k in range(len(shape)):
        if k == d:
            coord = idx
        else:
            coord = _creation.arange(idx.shape[k]).reshape([-1 if j == k else 1 for j in range(idx.ndim)])
        dest = dest + coord * strides[k]
    return dest.reshape(-1)


def _leading(src, index):
    """src's part that index covers (index may be smaller along any dim)."""
    if src.ndim == 0 or tuple(src.shape) == tuple(index.shape):
        return src.reshape(-1) if src.ndim else src.reshape(1)
    sel = tuple(slice(0, n) for n in index.shape)
    return src[sel].reshape(-1)


@_method
def scatter_reduce(input, dim, index, src, reduce, *, include_self=True):
    """input with src's elements reduced into the positions index names
    along dim: reduce is 'sum', 'prod', 'mean', 'amax' or 'amin';
    include_self=False leaves the input's own values out where something
    arrives."""
    _check_reduce("scatter_reduce", reduce)
    if src.dtype != input.dtype:
        raise RuntimeError(f"scatter_reduce(): Expected self.dtype to be equal to src.dtype, got {input.dtype} "
                           f"and {src.dtype}")
    dest = _scatter_dest("scatter_reduce", input, dim, index)
    return _reduce_into(input, dest, _leading(src, index), reduce, include_self)


@_method
def scatter_reduce_(input, dim, index, src, reduce, *, include_self=True):
    return input.copy_(scatter_reduce(input, dim, index, src, reduce, include_self=include_self))


def scatter_with_reduce(input, dim, index, src, reduce):
    """scatter(..., reduce='add' or 'multiply'): src (a tensor or a number)
    combined into input's values at index's positions."""
    if reduce not in ("add", "multiply"):
        raise RuntimeError(f"scatter(): reduce argument must be either add or multiply, got {reduce!r}")
    if not isinstance(src, Tensor):
        src = _creation.full(tuple(index.shape), src, dtype=input.dtype, device=index.device)
    dest = _scatter_dest("scatter", input, dim, index)
    return _reduce_into(input, dest, _leading(src, index).to(input.dtype),
                        "sum" if reduce == "add" else "prod", True)


@_method
def index_reduce(input, dim, index, source, reduce, *, include_self=True):
    """input with source's slices along dim reduced into the slices index
    names: reduce is 'prod', 'mean', 'amax' or 'amin'."""
    if reduce not in ("prod", "mean", "amax", "amin"):
        raise RuntimeError(f"index_reduce(): Expected reduce to be one of prod, mean, amax or amin but got "
                           f"{reduce}.")
    nd = builtins.max(input.ndim, 1)
    d = dim % nd
    if index.ndim > 1:
        raise IndexError("index_reduce_(): Index is supposed to be a vector")
    idx = index.reshape(-1)
    n = source.shape[d] if source.ndim else 1
    if idx.numel() != n:
        raise IndexError(f"index_reduce_(): Number of indices ({idx.numel()}) should be equal to source.size(dim) "
                         f"({n})")
    if input.ndim == 0:
        full = idx.reshape(1)
    else:
        view = [1] * source.ndim
        view[d] = -1
        full = idx.reshape(view).expand(tuple(source.shape))
    dest = _scatter_dest("index_reduce", input, dim, full.contiguous() if input.ndim else full)
    return _reduce_into(input, dest, source.reshape(-1), reduce, include_self)


@_method
def index_reduce_(input, dim, index, source, reduce, *, include_self=True):
    return input.copy_(index_reduce(input, dim, index, source, reduce, include_self=include_self))


_SEGMENT = {"sum": ("sum", 0.0), "mean": ("mean", float("nan")), "max": ("amax", float("-inf")),
            "min": ("amin", float("inf")), "prod": ("prod", 1.0)}


@_export
def segment_reduce(data, reduce, *, lengths=None, indices=None, offsets=None, axis=0, unsafe=False, initial=None):
    """Reduces data along axis in consecutive segments of the given lengths
    (or between offsets): 'sum', 'mean', 'max', 'min' or 'prod'; lengths
    has data's dims before axis, then the segments. An empty segment is
    `initial`, or the reduction's identity (NaN for mean); a given initial
    takes part in every segment, as PyTorch's does."""
    if reduce not in _SEGMENT:
        raise RuntimeError(f"segment_reduce(): reduction {reduce!r} is not supported (sum, mean, max, min, prod)")
    if indices is not None:
        raise NotImplementedError("segment_reduce(): indices= is not implemented in ember (PyTorch 1.13 has "
                                  "none either); pass lengths or offsets")
    if (lengths is None) == (offsets is None):
        raise RuntimeError("segment_reduce(): give exactly one of lengths and offsets")
    if lengths is None:
        lengths = offsets[..., 1:] - offsets[..., :-1]
    axis = axis % builtins.max(data.ndim, 1)
    if lengths.ndim != axis + 1:
        raise RuntimeError(f"segment_reduce(): Expected axis to be the last dimension of lengths but got {axis}.")
    n, segs = data.shape[axis], lengths.shape[-1]
    if not unsafe and (builtins.bool((lengths < 0).any()) or
                       builtins.bool((lengths.sum(-1) != n).any())):
        raise RuntimeError(f"segment_reduce(): Expected all rows of lengths along axis to sum to data.size(axis) "
                           f"= {n}, and no length to be negative")
    kind, identity = _SEGMENT[reduce]
    # one slot more than the segments: elements past the lengths' total
    # (unsafe=True) go there and are dropped, as PyTorch drops them
    slots = segs + 1
    out_shape = tuple(data.shape[:axis]) + (slots,) + tuple(data.shape[axis + 1:])
    base = _creation.full(out_shape, identity if initial is None else initial, dtype=data.dtype)
    ends = lengths.to(_C.int64).cumsum(-1)  # (..., S)
    where = _creation.arange(n)
    seg = (ends.unsqueeze(-1) <= where).sum(-2)  # (..., n): each position's segment, S past the end
    lead = 1
    for d in data.shape[:axis]:
        lead *= d
    rows = _creation.arange(lead).reshape(tuple(data.shape[:axis]) + (1,)) * slots if axis else 0
    inner = 1
    for d in data.shape[axis + 1:]:
        inner *= d
    slot = (seg + rows).reshape(tuple(data.shape[:axis + 1]) + (1,) * (data.ndim - axis - 1))
    dest = (slot * inner + _creation.arange(inner).reshape(tuple(data.shape[axis + 1:]))).reshape(-1)
    vals = data.reshape(-1)
    if kind == "mean" and initial is not None:  # (PyTorch's: initial joins the sum, not the count)
        total = _reduce_into(base, dest, vals, "sum", True)
        count = _creation.zeros(out_shape, dtype=data.dtype).reshape(-1).scatter_add(
            0, dest, _creation.ones_like(vals)).reshape(out_shape)
        out = _ops.where(count > 0, total / _ops.where(count > 0, count, _creation.ones_like(count)), base)
    else:
        out = _reduce_into(base, dest, vals, kind, initial is not None)
    return out.narrow(axis, 0, segs)
