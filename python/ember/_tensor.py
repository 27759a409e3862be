"""ember.Tensor: the C tensor type plus what reads better in Python."""

import ctypes as _ctypes
import operator as _operator
import sys as _sys
import threading as _threading

from . import _C


_DEVICE_TYPES = ("cpu", "cuda", "meta")  # (em_device_type's order)


class device:
    """Where a tensor's memory lives: "cpu"; "meta", tensors with a shape,
    a dtype and strides but no data (every op infers its result there and
    computes nothing); or "cuda" (not in this build: ember.cuda).

    As a context manager, the device the factories (ember.zeros, nn
    modules' parameters, ...) make tensors on inside the block, as PyTorch's
    `with torch.device("meta"):`: a model built there allocates nothing."""

    __slots__ = ("type", "index")

    def __init__(self, type="cpu", index=None):
        if isinstance(type, device):
            type, index = type.type, type.index
        elif isinstance(type, int) and not isinstance(type, bool):
            type, index = "cuda", type
        elif not isinstance(type, str):
            raise TypeError(f"device(): expected a str, an int or a device, got {_type_name(type)}")
        elif ":" in type:
            if index is not None:
                raise RuntimeError(f"device(): type (string) must not include an index because index was passed "
                                   f"explicitly: {type}")
            type, _, number = type.partition(":")
            if not number.isdigit():
                raise RuntimeError(f"Invalid device string: '{type}:{number}'")
            index = int(number)
        if type not in _DEVICE_TYPES:
            raise RuntimeError(f"Expected one of cpu, cuda, meta device type at start of device string: {type}")
        if index is not None and (not isinstance(index, int) or index < 0):
            raise RuntimeError(f"Device index must not be negative, got {index}")
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

    def __reduce__(self):
        return (device, (self.type, self.index))

    def __enter__(self):
        stack = _factory_devices()
        stack.append(self)
        return self

    def __exit__(self, *exc):
        _factory_devices().pop()
        return False


def _type_name(o):
    return type(o).__name__


_threads = _threading.local()


def _factory_devices():
    """This thread's stack of factory devices (device blocks, and
    set_default_device at the bottom)."""
    stack = getattr(_threads, "devices", None)
    if stack is None:
        stack = _threads.devices = []
    return stack


def _factory_device():
    """The device factories use when given none: the innermost `with
    ember.device(...)` block's, else set_default_device's, else None (the
    CPU)."""
    stack = getattr(_threads, "devices", None)
    return stack[-1] if stack else None


_CPU = device("cpu")
_META = device("meta")
_DEVICE_OF_KEY = {(0, -1): _CPU, (2, -1): _META}


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


def _rebuilt_type(dtype, shape):
    """(dtype, shape) of a pickled tensor, checked: a pickle may come from
    anywhere."""
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
    return dt, shape


def _rebuild_tensor(data, dtype, shape, device=None):
    """The inverse of Tensor.__reduce__ (pickle calls it by this module-level
    name, so keep it): a new contiguous tensor of dtype `dtype` (a name such
    as 'float32') and `shape` holding `data`, its elements' raw little-endian
    bytes in row-major order, on `device` (a name such as 'cuda:0'; absent:
    the CPU), as PyTorch restores a tensor on the device it was pickled from.
    Checks everything before touching memory."""
    dt, shape = _rebuilt_type(dtype, shape)
    if device is not None:
        if not isinstance(device, str) or not device.startswith("cuda"):
            raise ValueError(f"cannot rebuild a tensor on device {device!r}: only 'cuda' tensors pickle with a device")
        from . import cuda
        if not cuda.is_available():
            raise RuntimeError(f"Attempting to deserialize a tensor on {device}, but CUDA is not available "
                               f"({cuda.why_unavailable()}); load it with ember.load(..., map_location='cpu')")
        return _rebuild_tensor(data, dtype, shape).to(device)
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
        _ctypes.memmove(t._address("unpickling"), _byteswap_to_little(data, dt.itemsize), nbytes)
    return t


def _rebuild_meta_tensor(dtype, shape):
    """The inverse of a meta tensor's __reduce__: a new meta tensor of dtype
    `dtype` (a name) and `shape`."""
    dt, shape = _rebuilt_type(dtype, shape)
    return _C.zeros(shape, dtype=dt, device="meta")


class Tensor(_C._TensorBase):
    """A multi-dimensional array with a C core (see ember.tensor)."""

    __slots__ = ()

    @property
    def device(self):
        key = self._device_key
        d = _DEVICE_OF_KEY.get(key)
        return d if d is not None else device(_DEVICE_TYPES[key[0]], key[1] if key[1] >= 0 else None)

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
        included), 0-d, empty and non-contiguous tensors round-trip exactly;
        a CUDA tensor adds its device's name and unpickles on it.
        The result never shares memory with this tensor."""
        if self.is_meta:  # (nothing but its type to keep)
            return (_rebuild_meta_tensor, (_dtype_name(self.dtype), tuple(self.shape)))
        c = self.contiguous() if self.is_cpu else self.detach().cpu()  # (a device's: its values, on the CPU)
        nbytes = c.numel() * c.element_size()
        raw = _ctypes.string_at(c._address("pickling"), nbytes) if nbytes else b""
        args = (_byteswap_to_little(raw, c.element_size()), _dtype_name(self.dtype), tuple(self.shape))
        # (a device's tensor names its device, and unpickles there)
        return (_rebuild_tensor, args if self.is_cpu else args + (str(self.device),))

    @property
    def __cuda_array_interface__(self):
        """Numba's CUDA array interface (version 3), as CuPy, Numba and
        PyTorch read it: a CUDA tensor's shape, typestr, data pointer, byte
        strides (None when contiguous) and the stream its work is queued on
        (consumers wait for it). Other tensors have none (hasattr is False),
        as PyTorch's CPU tensors."""
        if not self.is_cuda:
            raise AttributeError(f"Can't get __cuda_array_interface__ on non-CUDA tensor type: {self.type()} "
                                 "If CUDA data is required use tensor.cuda() to copy tensor to device memory.")
        if self.requires_grad:
            raise RuntimeError("Can't get __cuda_array_interface__ on Variable that requires grad. If gradients "
                               "aren't required, use var.detach() to get Variable that doesn't require grad.")
        codes = {_C.float16: "<f2", _C.float32: "<f4", _C.float64: "<f8", _C.int8: "|i1", _C.int16: "<i2",
                 _C.int32: "<i4", _C.int64: "<i8", _C.uint8: "|u1", _C.bool: "|b1"}
        if self.dtype not in codes:
            raise TypeError(f"dtype {self.dtype} is not supported by __cuda_array_interface__ (it has no typestr)")
        size = self.element_size()
        strides = None if self.is_contiguous() else tuple(s * size for s in self.stride())
        stream = _C._cuda_stream_handle(self.device.index or 0)
        return {"shape": tuple(self.shape), "typestr": codes[self.dtype],
                "data": (self.data_ptr() if self.numel() else 0, False), "strides": strides,
                "stream": stream or None, "version": 3}

    def tolist(self):
        """The values as (nested) Python lists of numbers."""
        # NumPy has no bfloat16; its values are exactly float32 values. (Of a
        # copy: exporting this tensor's own memory would pin it for good.)
        h = self if self.is_cpu else self.detach().cpu()  # (a device's values: copied over)
        return (h.float() if self.dtype == _C.bfloat16 else h.clone()).numpy().tolist()

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
