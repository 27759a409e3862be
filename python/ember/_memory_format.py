"""Memory formats, as PyTorch's: contiguous_format (row-major),
channels_last (a 4-d NCHW tensor laid out NHWC: channels innermost) and
channels_last_3d (NCDHW as NDHWC), and preserve_format.

x.to(memory_format=...), x.contiguous(memory_format=...) and
x.is_contiguous(memory_format=...) follow PyTorch; so does clone (its
default, preserve_format, keeps a channels-last layout).
Module.to(memory_format=...) is accepted and leaves the parameters
row-major (ember's optimizers update parameters as flat memory laid out as
their gradients are).
A channels-last tensor is an ordinary strided tensor (its strides say
NHWC), so every op takes it. Convolutions read a channels-last input as it
lies (runtime/cpu/conv.c), and conv2d returns a channels-last result where
PyTorch 1.13 does (input or weight channels-last; the op's layout
attribute, which a compiled graph keeps). Other ops write their results
row-major, whatever their inputs' layout (PyTorch keeps channels-last
through elementwise ops too); the values are the same either way.
"""

from . import _C
from ._named_constant import NamedConstant

__all__ = ["memory_format", "contiguous_format", "channels_last", "channels_last_3d", "preserve_format",
           "legacy_contiguous_format"]


class memory_format(NamedConstant):
    __slots__ = ()


def _named(name):
    """(how pickles of memory formats made before NamedConstant name them)"""
    return memory_format._all[name]


contiguous_format = memory_format("contiguous_format")
channels_last = memory_format("channels_last")
channels_last_3d = memory_format("channels_last_3d")
preserve_format = memory_format("preserve_format")
legacy_contiguous_format = contiguous_format  # (torch's: the row-major layout by another name)

# for each channels-last format: the rank it applies to and the order of the
# dims in memory, outermost first
_ORDERS = {channels_last: (4, (0, 2, 3, 1)), channels_last_3d: (5, (0, 2, 3, 4, 1))}


def _check(fmt, op):
    if not isinstance(fmt, memory_format):
        raise TypeError(f"{op}: memory_format must be an ember.memory_format, got {type(fmt).__name__}")


def _order(t, fmt, op):
    rank, order = _ORDERS[fmt]
    if t.ndim != rank:
        raise RuntimeError(f"required rank {rank} tensor to use {fmt._name} format (got a {t.ndim}-d tensor in "
                           f"{op})")
    return order


def _strides_of(shape, order):
    """Row-major strides of the dims taken in `order` (outermost first),
    reported in the tensor's own dim order (PyTorch's, size-1 dims
    included)."""
    strides, step = [0] * len(shape), 1
    for d in reversed(order):
        strides[d] = step
        step *= max(shape[d], 1)
    return strides


def is_contiguous_as(t, fmt, op="is_contiguous"):
    _check(fmt, op)
    if fmt in (contiguous_format, preserve_format):
        return _C._TensorBase.is_contiguous(t)
    rank, order = _ORDERS[fmt]
    if t.ndim != rank:
        return False
    want = _strides_of(tuple(t.shape), order)
    # (a dim of size 1 may have any stride, as in PyTorch)
    return all(n == 1 or s == w for n, s, w in zip(t.shape, t.stride(), want))


def to_format(t, fmt, op="contiguous"):
    """t laid out in fmt: itself when it already is (contiguous()), or when
    its strides are fmt's own ones (to(), which, as PyTorch's, also lays out
    a tensor whose size-1 dims make it count as both), else a copy."""
    _check(fmt, op)
    if fmt is preserve_format:
        return t
    if fmt is contiguous_format:
        return _C._TensorBase.contiguous(t)
    order = _order(t, fmt, op)
    want = _strides_of(tuple(t.shape), order)
    if tuple(t.stride()) == tuple(want) or (op == "contiguous" and is_contiguous_as(t, fmt)):
        return t
    inverse = [order.index(d) for d in range(len(order))]
    out = _C._empty(tuple(t.shape[d] for d in order), t.dtype, t.device).permute(*inverse)
    out.copy_(t)
    return out


def suggest(t):
    """The format t is in, as preserve_format keeps it."""
    shape, strides = tuple(t.shape), tuple(t.stride())
    row_major = tuple(_strides_of(shape, tuple(range(t.ndim))))
    for fmt in (channels_last, channels_last_3d):
        rank, order = _ORDERS[fmt]
        if t.ndim != rank or strides == row_major:
            continue
        if strides == tuple(_strides_of(shape, order)) or (not _C._TensorBase.is_contiguous(t)
                                                           and is_contiguous_as(t, fmt)):
            return fmt
    return contiguous_format
