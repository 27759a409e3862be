"""Tensor creation under PyTorch's names: tensor, as_tensor, zeros/ones/full/
empty and their _like forms, arange, linspace, eye, rand/randn/randint,
randperm. The C factories (ember._C) do the work; this layer accepts
PyTorch's argument spellings (sizes as varargs or one sequence, device='cpu',
requires_grad=False, layout/memory_format left at their defaults).
"""

import numbers

from . import _C
from ._generator import _state_of
from ._tensor import _factory_device, _factory_devices, device as _device

__all__ = []


def _export(fn):
    __all__.append(fn.__name__)
    return fn


def _sizes(name, args):
    """f(2, 3), f((2, 3)), f([2, 3]) or f(ember.Size([2, 3])) -> (2, 3)."""
    if len(args) == 1 and not _is_int(args[0]):
        args = args[0]
        if not isinstance(args, (tuple, list)) and type(args).__name__ != "Size":
            raise TypeError(f"{name}(): size must be a sequence of ints, got "
                            f"{type(args).__name__}")
    for n in args:
        if not _is_int(n):
            raise TypeError(f"{name}(): size must be a sequence of ints, got an element of type "
                            f"{type(n).__name__}")
    return tuple(int(n) for n in args)


def _is_int(n):
    return isinstance(n, numbers.Integral) and not isinstance(n, bool)


def _requiring_grad(t, requires_grad):
    """A new factory tensor, made a leaf that requires grad if asked."""
    return t.requires_grad_() if requires_grad else t


def _check_options(name, device, layout=None):
    """The device a factory makes its result on: `device`, else the
    factory device (ember.device blocks, set_default_device); None for the
    CPU. Refuses sparse layouts and devices this build lacks."""
    if layout is not None and getattr(layout, "_name", None) != "strided":
        raise NotImplementedError(f"{name}(layout={layout!r}): ember's tensors are all strided (dense); sparse "
                                  f"layouts are not implemented")
    if device is None:
        device = _factory_device()
        if device is None:
            return None
    d = device if isinstance(device, _device) else _device(device)
    if d.type == "cuda":
        from . import cuda
        if not cuda.is_available():
            raise cuda._unavailable(name, str(d))
    return None if d.type == "cpu" else d


def _on(device, make):
    """make() with the C factories making results on `device` (a device
    from _check_options; None: the CPU), for the one call."""
    if device is None:
        return make()
    was = _C._set_factory_device(device)
    try:
        return make()
    finally:
        _C._set_factory_device(was)


@_export
def set_default_device(device):
    """Makes `device` (None: the CPU) where factories put tensors given no
    device, in this thread (as PyTorch's; `with ember.device(...)` blocks
    inside it take precedence)."""
    stack = _factory_devices()
    d = None if device is None else _device(device)
    if stack and getattr(stack[0], "_default", False):
        stack.pop(0)
    if d is not None and d.type != "cpu":
        mark = _DefaultDevice(d)
        stack.insert(0, mark)


@_export
def get_default_device():
    """Where factories put tensors given no device (ember.device("cpu")
    unless set or inside a device block)."""
    d = _factory_device()
    return _device("cpu") if d is None else _device(d)


class _DefaultDevice(_device):
    """set_default_device's entry at the bottom of the factory-device stack."""

    __slots__ = ()
    _default = True


@_export
def tensor(data, *, dtype=None, device=None, requires_grad=False):
    """A new tensor holding a copy of `data` (nested sequences, numbers,
    NumPy arrays or tensors); the dtype is inferred like PyTorch's."""
    d = _check_options("tensor", device)
    if isinstance(data, range):  # (a sequence, as PyTorch reads it)
        data = list(data)
    if _cuda_array(data):  # (a copy of another library's CUDA array)
        t = _C._from_cuda_array_interface(data).clone()
        t = t if dtype is None else t.to(dtype)
        return _requiring_grad(t if d is None else t.to(d), requires_grad)
    return _requiring_grad(_C.tensor(data, dtype=dtype, device=d), requires_grad)


def _cuda_array(data):
    """Is data another library's CUDA array (CuPy's, Numba's, PyTorch's)?"""
    return not isinstance(data, _C._TensorBase) and hasattr(type(data), "__cuda_array_interface__")


@_export
def as_tensor(data, dtype=None, device=None):
    """`data` as a tensor, sharing memory when it already is one (or a NumPy
    array) of the requested dtype."""
    d = _check_options("as_tensor", device)
    if isinstance(data, _C._TensorBase):
        placed = device is not None or _factory_device() is not None  # (else it stays where it is)
        t = data if dtype is None or data.dtype == dtype else data.to(dtype)
        return t.to(d or "cpu") if placed else t
    if _cuda_array(data):  # (its memory shared, where it is)
        t = _C._from_cuda_array_interface(data)
        t = t if dtype is None or t.dtype == dtype else t.to(dtype)
        return t if d is None else t.to(d)
    if d is not None:
        return _C.tensor(data, dtype=dtype, device=d)
    if type(data).__module__ == "numpy" and type(data).__name__ == "ndarray":
        try:
            t = _C.from_numpy(data)
        except (TypeError, ValueError):
            return _C.tensor(data, dtype=dtype)
        return t if dtype is None or t.dtype == dtype else t.to(dtype)
    return _C.tensor(data, dtype=dtype)


@_export
def asarray(obj, *, dtype=None, device=None, copy=None):
    """as_tensor, with copy=True forcing a copy."""
    if copy:
        return tensor(obj, dtype=dtype, device=device) if not isinstance(obj, _C._TensorBase) \
            else obj.to(dtype or obj.dtype).clone()
    return as_tensor(obj, dtype=dtype, device=device)


def _factory(name, c_fn):
    def fn(*size, out=None, dtype=None, device=None, requires_grad=False, layout=None,
           pin_memory=False, memory_format=None):
        d = _check_options(name, device, layout)
        if out is not None:
            raise NotImplementedError(f"{name}(): out= is not implemented in ember yet")
        return _requiring_grad(_on(d, lambda: c_fn(_sizes(name, size), dtype=dtype)), requires_grad)
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"{name}(*size, dtype=None): a new tensor of the given size."
    return _export(fn)


def _random_factory(name, c_fn):
    def fn(*size, generator=None, out=None, dtype=None, device=None, requires_grad=False,
           layout=None, pin_memory=False):
        d = _check_options(name, device, layout)
        if out is not None:
            raise NotImplementedError(f"{name}(): out= is not implemented in ember yet")
        t = _on(d, lambda: c_fn(_sizes(name, size), dtype=dtype, generator=_state_of(name, generator)))
        return _requiring_grad(t, requires_grad)
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = (f"{name}(*size, generator=None, dtype=None): a new tensor of the given size, "
                  f"drawn from `generator` (an ember.Generator) or ember's global stream.")
    return _export(fn)


zeros = _factory("zeros", _C.zeros)
ones = _factory("ones", _C.ones)
rand = _random_factory("rand", _C.rand)
randn = _random_factory("randn", _C.randn)
empty = _factory("empty", lambda shape, dtype: _C._empty(shape, dtype))


@_export
def full(size, fill_value, *, dtype=None, device=None, requires_grad=False):
    """A tensor of `size` filled with `fill_value`; the dtype follows the value
    (bool, int64 or the default float) unless given."""
    d = _check_options("full", device)
    if isinstance(fill_value, _C._TensorBase):
        fill_value = fill_value.item()
    return _requiring_grad(_C.full(_sizes("full", (size,)), fill_value, dtype=dtype, device=d), requires_grad)


def _like(name, make):
    def fn(input, *, dtype=None, device=None, requires_grad=False, memory_format=None,
           layout=None):
        if not isinstance(input, _C._TensorBase):
            raise TypeError(f"{name}(): argument 'input' must be a Tensor, not "
                            f"{type(input).__name__}")
        d = _check_options(name, input.device if device is None else device, layout)
        return _requiring_grad(_on(d, lambda: make(tuple(input.shape), dtype or input.dtype)), requires_grad)
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"{name}(input, dtype=None): like input's shape (and dtype unless given)."
    return _export(fn)


zeros_like = _like("zeros_like", lambda s, dt: _C.zeros(s, dtype=dt))
ones_like = _like("ones_like", lambda s, dt: _C.ones(s, dtype=dt))
empty_like = _like("empty_like", lambda s, dt: _C._empty(s, dt))
rand_like = _like("rand_like", lambda s, dt: _C.rand(s, dtype=dt))
randn_like = _like("randn_like", lambda s, dt: _C.randn(s, dtype=dt))


@_export
def full_like(input, fill_value, *, dtype=None, device=None, requires_grad=False,
              memory_format=None):
    d = _check_options("full_like", input.device if device is None else device)
    return _requiring_grad(_C.full(tuple(input.shape), fill_value, dtype=dtype or input.dtype, device=d),
                           requires_grad)


@_export
def randint_like(input, low=0, high=None, *, dtype=None, device=None, requires_grad=False):
    if high is None:
        low, high = 0, low
    d = _check_options("randint_like", input.device if device is None else device)
    return _requiring_grad(_on(d, lambda: _C._randint(int(low), int(high), tuple(input.shape), dtype or input.dtype)),
                           requires_grad)


@_export
def arange(start, end=None, step=1, *, out=None, dtype=None, device=None, requires_grad=False):
    """Values from start (default 0) up to end, exclusive, by step; int64
    unless any bound is a float."""
    d = _check_options("arange", device)
    if end is None:
        return _requiring_grad(_C.arange(start, dtype=dtype, device=d), requires_grad)
    return _requiring_grad(_C.arange(start, end, step, dtype=dtype, device=d), requires_grad)


@_export
def linspace(start, end, steps, *, dtype=None, device=None, requires_grad=False):
    """`steps` values evenly spaced from start to end, both included."""
    d = _check_options("linspace", device)
    if not isinstance(steps, numbers.Integral):
        raise TypeError(f"linspace(): steps must be an int, got {type(steps).__name__}")
    if steps < 0:
        raise RuntimeError(f"linspace(): number of steps must be non-negative, got {steps}")
    return _requiring_grad(_on(d, lambda: _C._linspace(float(start), float(end), int(steps), dtype)), requires_grad)


@_export
def eye(n, m=None, *, dtype=None, device=None, requires_grad=False):
    """An n x m matrix (m defaults to n) with ones on the diagonal."""
    d = _check_options("eye", device)
    m = n if m is None else m
    if n < 0 or m < 0:
        raise RuntimeError(f"eye(): n and m must be non-negative, got n={n}, m={m}")
    return _requiring_grad(_on(d, lambda: _C._eye(int(n), int(m), dtype)), requires_grad)


@_export
def randint(*args, size=None, dtype=None, device=None, requires_grad=False, generator=None):
    """randint(high, size) or randint(low, high, size): integers uniform in
    [low, high), int64 by default."""
    d = _check_options("randint", device)
    state = _state_of("randint", generator)
    args = list(args)
    if size is None:
        if not args or isinstance(args[-1], numbers.Integral):
            raise TypeError("randint() missing the size argument (a tuple of ints)")
        size = args.pop()
    if len(args) == 1:
        low, high = 0, args[0]
    elif len(args) == 2:
        low, high = args
    else:
        raise TypeError("randint() takes (high, size) or (low, high, size)")
    if low >= high:
        raise RuntimeError(f"randint(): expected low < high, got low={low}, high={high}")
    return _requiring_grad(
        _on(d, lambda: _C._randint(int(low), int(high), _sizes("randint", (size,)), dtype, state)), requires_grad)


@_export
def randperm(n, *, dtype=None, device=None, requires_grad=False, generator=None):
    """A random permutation of 0 .. n-1 (int64 by default)."""
    d = _check_options("randperm", device)
    state = _state_of("randperm", generator)
    if n < 0:
        raise RuntimeError(f"randperm(): n must be non-negative, got {n}")
    return _requiring_grad(_on(d, lambda: _C._randperm(int(n), dtype, state)), requires_grad)


@_export
def get_default_dtype():
    """The dtype of floating-point tensors made without an explicit dtype
    (and of float results of integer inputs): float32 unless set."""
    return _C._default_dtype()


@_export
def set_default_dtype(d):
    """Sets the default floating-point dtype (float32, float64, float16 or
    bfloat16) for the whole process, as PyTorch's. Compiled functions guard
    on it: a call under another default traces anew."""
    _C._set_default_dtype(d)


@_export
def is_tensor(obj):
    return isinstance(obj, _C._TensorBase)


@_export
def is_floating_point(input):
    return input.dtype.is_floating_point


@_export
def numel(input):
    return input.numel()
