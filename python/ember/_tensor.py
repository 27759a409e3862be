"""ember.Tensor: the C tensor type plus what reads better in Python."""

import ctypes as _ctypes
import operator as _operator
import sys as _sys

from . import _C


class device:
    """Where a tensor's memory lives. ember runs on the CPU for now."""

    __slots__ = ("type", "index")

    def __init__(self, type="cpu", index=None):
        self.type = type
        self.index = index

    def __repr__(self):
        return f"device(type='{self.type}')" if self.index is None else \
            f"device(type='{self.type}', index={self.index})"

    def __str__(self):
        return self.type if self.index is None else f"{self.type}:{self.index}"

    def __eq__(self, other):
        return str(self) == str(other)

    def __hash__(self):
        return hash(str(self))


_CPU = device("cpu")


def _dtype_name(dt):
    """'float32' for ember.float32: the module attribute a dtype pickles as
    (its __reduce__ returns that name, per pickle's protocol)."""
    return dt.__reduce__()


def _byteswap_to_little(data, itemsize):
    """`data` (bytes of `itemsize`-byte elements in host order) in
    little-endian order; swapping is its own inverse, so this also turns
    little-endian bytes into host order."""
    if _sys.byteorder == "little" or itemsize == 1:
        return bytes(data)
    out = bytearray(len(data))
    for k in range(itemsize):
        out[k::itemsize] = data[itemsize - 1 - k::itemsize]
    return bytes(out)


def _rebuild_tensor(data, dtype, shape):
    """The inverse of Tensor.__reduce__ (pickle calls it by this module-level
    name, so keep it): a new contiguous tensor of dtype `dtype` (a name such
    as 'float32') and `shape` holding `data`, its elements' raw little-endian
    bytes in row-major order. Checks everything before touching memory, since
    a pickle may come from anywhere."""
    dt = getattr(_C, dtype, None) if isinstance(dtype, str) else None
    if not isinstance(dt, _C.dtype):
        raise TypeError(f"cannot rebuild a tensor: unknown dtype {dtype!r}")
    try:
        shape = tuple(_operator.index(n) for n in shape)
    except TypeError:
        raise TypeError(f"cannot rebuild a tensor: shape must be a sequence of ints, "
                        f"got {shape!r}") from None
    if any(n < 0 for n in shape):
        raise ValueError(f"cannot rebuild a tensor: negative size in shape {list(shape)}")
    data = bytes(memoryview(data).cast("B"))
    numel = 1
    for n in shape:
        numel *= n
    nbytes = numel * dt.itemsize
    if len(data) != nbytes:
        raise ValueError(f"cannot rebuild a {dtype} tensor of shape {list(shape)}: it needs "
                         f"{nbytes} bytes of data, got {len(data)}")
    t = _C.zeros(shape, dtype=dt)
    if nbytes:
        _ctypes.memmove(t.data_ptr(), _byteswap_to_little(data, dt.itemsize), nbytes)
    return t


class Tensor(_C._TensorBase):
    """A multi-dimensional array with a C core (see ember.tensor)."""

    __slots__ = ()

    @property
    def device(self):
        return _CPU

    def numpy(self):
        """A NumPy array sharing this tensor's memory."""
        import numpy as np
        return np.asarray(self)

    def __array__(self, dtype=None):
        import numpy as np
        a = np.asarray(self)
        return a if dtype is None else a.astype(dtype, copy=False)

    def __reduce__(self):
        """Pickles as (_rebuild_tensor, (bytes, dtype name, shape)): the raw
        little-endian bytes of a contiguous copy, so every dtype (bfloat16
        included), 0-d, empty and non-contiguous tensors round-trip exactly.
        The result never shares memory with this tensor."""
        c = self.contiguous()
        nbytes = c.numel() * c.element_size()
        raw = _ctypes.string_at(c.data_ptr(), nbytes) if nbytes else b""
        return (_rebuild_tensor,
                (_byteswap_to_little(raw, c.element_size()), _dtype_name(self.dtype),
                 tuple(self.shape)))

    def tolist(self):
        """The values as (nested) Python lists of numbers."""
        # NumPy has no bfloat16; its values are exactly float32 values. (Of a
        # copy: exporting this tensor's own memory would pin it for good.)
        return (self.float() if self.dtype == _C.bfloat16 else self.clone()).numpy().tolist()

    def __repr__(self):
        from ._tensor_str import tensor_repr
        _C._note_side_effect("printing a tensor (text is a side effect)")
        return tensor_repr(self)

    __str__ = __repr__

    def __format__(self, spec):
        if self.ndim == 0:
            return self.item().__format__(spec)
        return object.__format__(self, spec)

    def backward(self, gradient=None, retain_graph=None, create_graph=False, inputs=None):
        """Accumulates the gradient of this tensor into the .grad of the
        leaves it was computed from (see ember.autograd.backward)."""
        from .autograd import backward
        backward(self, gradient, retain_graph, create_graph, inputs)

    def register_hook(self, hook):
        """Calls hook(grad) with this tensor's gradient each time backward
        computes it (a leaf's before it is accumulated into .grad); a
        Tensor it returns replaces the gradient. Returns a handle whose
        remove() turns the hook off."""
        from .autograd.graph import RemovableHandle
        if not self.requires_grad:
            raise RuntimeError("cannot register a hook on a tensor that doesn't require gradient")
        handle = RemovableHandle(hook)
        _C._register_hook(self, handle)
        return handle

    def register_post_accumulate_grad_hook(self, hook):
        """Calls hook(self) each time backward has accumulated a gradient
        into this leaf's .grad (its return value is ignored). Returns a
        handle whose remove() turns the hook off."""
        from .autograd.graph import RemovableHandle
        if not self.requires_grad:
            raise RuntimeError("cannot register a hook on a tensor that doesn't require gradient")
        if self.grad_fn is not None:
            raise RuntimeError("post accumulate grad hooks cannot be registered on non-leaf tensors")
        handle = RemovableHandle(hook)
        _C._register_post_accumulate_grad_hook(self, lambda leaf: handle(leaf) and None)
        return handle

    def retain_grad(self):
        """Keep this (non-leaf) tensor's gradient in .grad after backward."""
        _C._retain_grad(self)

    @property
    def retains_grad(self):
        """Does this non-leaf tensor keep its .grad (retain_grad())?"""
        return _C._retains_grad(self)

    @property
    def data(self):
        """This tensor's values without history (shares memory). Assigning
        a tensor makes this one take its memory, dtype and shape."""
        return self.detach()

    @data.setter
    def data(self, value):
        _C._set_data(self, value)
