"""More of torch.Tensor's methods (issue 40, item 3): the in-place view
changes (squeeze_, unsqueeze_, t_, transpose_, swapaxes_, swapdims_,
as_strided_, set_), the legacy spellings (new, volatile, output_nr,
apply_, map_, map2_, is_set_to), layout and the named-tensor queries a
real tensor answers (names, has_names), and the methods of functions ember
already has (prelu, hardshrink, take_along_dim, adjoint, unsafe_split...).

Names of families ember does not have (complex, sparse and quantized
tensors, named-tensor renaming, storages) raise NotImplementedError naming
themselves (ember._unsupported).
"""

from . import _C, _creation, _ops, _storage
from ._named_constant import NamedConstant
from ._tensor import Tensor


class layout(NamedConstant):
    """torch.layout: ember's tensors are all strided (the sparse ones are
    names whose use raises NotImplementedError)."""
    __slots__ = ()


for _n in ("strided", "sparse_coo", "sparse_csr", "sparse_csc", "sparse_bsr", "sparse_bsc", "_mkldnn"):
    layout(_n)
LAYOUTS = layout._all
strided = LAYOUTS["strided"]


def _set_view(self, shape, strides, offset=None):
    """self becomes this view of its own memory (the in-place view ops)."""
    return _C._set_geometry(self, self, self.storage_offset() if offset is None else offset, tuple(shape),
                            tuple(strides))


def _like_view(self, view):
    """self reshaped in place as `view` (a view of self) is."""
    return _set_view(self, view.shape, view.stride(), view.storage_offset())


def squeeze_(self, dim=None):
    return _like_view(self, self.squeeze() if dim is None else self.squeeze(dim))


def unsqueeze_(self, dim):
    return _like_view(self, self.unsqueeze(dim))


def t_(self):
    return _like_view(self, self.t())


def transpose_(self, dim0, dim1):
    return _like_view(self, self.transpose(dim0, dim1))


def as_strided_(self, size, stride, storage_offset=None):
    return _set_view(self, size, stride, storage_offset)


def set_(self, source=None, storage_offset=0, size=None, stride=None):
    """self becomes a view of source's memory (source's own geometry, or
    size and stride from storage_offset); with no source, an empty tensor."""
    if source is None:
        source = _creation.empty(0, dtype=self.dtype)
        return _C._set_geometry(self, source, 0, (0,), (1,))
    if isinstance(source, _storage._StorageMixin):  # its memory, as a flat tensor of self's dtype
        values = source._values
        if isinstance(source, _storage.TypedStorage) and values.dtype != self.dtype:
            raise RuntimeError(f"Tensor.set_: expected a storage of {self.dtype}, got one of {values.dtype}")
        source = values.view(self.dtype) if values.dtype != self.dtype else values
        if size is None:
            size, stride, storage_offset = (source.numel(),), (1,), 0
    if not isinstance(source, Tensor):
        raise TypeError(f"Tensor.set_: expected a Tensor or a storage, got {type(source).__name__}")
    if size is None:
        return _C._set_geometry(self, source, source.storage_offset(), tuple(source.shape), tuple(source.stride()))
    if stride is None:
        stride = [1] * len(size)
        for i in range(len(size) - 2, -1, -1):
            stride[i] = stride[i + 1] * max(size[i + 1], 1)
    return _C._set_geometry(self, source, storage_offset, tuple(size), tuple(stride))


def is_set_to(self, tensor):
    """Whether both are the same view of the same memory."""
    return (self.data_ptr() == tensor.data_ptr() and tuple(self.shape) == tuple(tensor.shape)
            and tuple(self.stride()) == tuple(tensor.stride()) and self.dtype == tensor.dtype)


def new(self, *args, **kwargs):
    """The legacy constructor, in self's dtype: new() is empty, new(sizes...)
    or new(ember.Size) uninitialised, new(data) a copy of data."""
    dtype = kwargs.pop("dtype", None) or self.dtype
    if not args:
        return _creation.empty(0, dtype=dtype)
    if len(args) == 1 and not isinstance(args[0], int) and not isinstance(args[0], _C.Size):
        return _creation.tensor(args[0], dtype=dtype)
    return _creation.empty(*args, dtype=dtype)


def apply_(self, callable):
    """Replaces each element by callable(element), in place (Python calls:
    slow, as PyTorch's)."""
    flat = [callable(v) for v in self.reshape(-1).tolist()]
    return self.copy_(_creation.tensor(flat, dtype=self.dtype).reshape(tuple(self.shape)))


def map_(self, tensor, callable):
    """self[i] = callable(self[i], tensor[i]), tensor broadcast to self."""
    other = tensor.broadcast_to(tuple(self.shape)).reshape(-1).tolist()
    flat = [callable(a, b) for a, b in zip(self.reshape(-1).tolist(), other)]
    return self.copy_(_creation.tensor(flat, dtype=self.dtype).reshape(tuple(self.shape)))


def map2_(self, x, y, callable):
    xs = x.broadcast_to(tuple(self.shape)).reshape(-1).tolist()
    ys = y.broadcast_to(tuple(self.shape)).reshape(-1).tolist()
    flat = [callable(a, b, c) for a, b, c in zip(self.reshape(-1).tolist(), xs, ys)]
    return self.copy_(_creation.tensor(flat, dtype=self.dtype).reshape(tuple(self.shape)))


def _output_nr(self):
    """Which result of its grad_fn this tensor is (0 for leaves)."""
    return self._output_nr()


def _real(self):
    """A real tensor's real part: itself."""
    return self


def _imag(self):
    raise RuntimeError("imag is not implemented for tensors with non-complex dtypes.")


def _is_distributed(self):
    return False


def _has_names(self):
    return False


def _names(self):
    return (None,) * self.ndim


def _to_dense(self, dtype=None):
    """A strided tensor is already dense: itself (in dtype if given)."""
    return self if dtype is None else self.to(dtype)


def _device_only(name):
    def fn(self, *args, **kwargs):
        raise RuntimeError(f"Tensor.{name}(): ember has no {name.upper()} device; tensors live on the CPU")
    fn.__name__ = name
    return fn


def _record_stream(self, stream):
    """CUDA's stream bookkeeping: nothing to record for CPU tensors."""


def _adjoint(self):
    return self.transpose(-2, -1)


def _prelu(self, weight):
    from .nn.functional import prelu
    return prelu(self, weight)


def _hardshrink(self, lambd=0.5):
    from .nn.functional import hardshrink
    return hardshrink(self, lambd)


def _take_along_dim(self, indices, dim=None):
    return _ops.take_along_dim(self, indices, dim)


def _as_subclass(self, cls):
    """self as a cls instance (a Tensor subclass) sharing its memory and
    staying in its autograd graph."""
    return _C._as_subclass(self, cls)


def _removed(name, replacement):
    def fn(self, *args, **kwargs):
        raise RuntimeError(f"This function was deprecated since version 1.9 and is now removed. Please use the "
                           f"`torch.linalg.{replacement}` function instead.")
    fn.__name__ = name
    return fn


def _reinforce(self, reward):
    raise RuntimeError("reinforce() was removed.\nUse torch.distributions instead.\n"
                       "See https://pytorch.org/docs/master/distributions.html")


def _sparse_only(name):
    def fn(self, *args, **kwargs):
        raise NotImplementedError(f"Tensor.{name}() is defined for sparse tensors only, which ember does not have")
    fn.__name__ = name
    return fn


for _name, _fn in (("squeeze_", squeeze_), ("unsqueeze_", unsqueeze_), ("t_", t_), ("transpose_", transpose_),
                   ("swapaxes_", transpose_), ("swapdims_", transpose_), ("as_strided_", as_strided_),
                   ("set_", set_), ("is_set_to", is_set_to), ("new", new), ("apply_", apply_), ("map_", map_),
                   ("map2_", map2_), ("real", property(_real)), ("imag", property(_imag)),
                   ("is_distributed", _is_distributed), ("has_names", _has_names), ("names", property(_names)),
                   ("to_dense", _to_dense), ("record_stream", _record_stream), ("adjoint", _adjoint),
                   ("prelu", _prelu), ("hardshrink", _hardshrink), ("take_along_dim", _take_along_dim),
                   ("unsafe_chunk", lambda self, chunks, dim=0: self.chunk(chunks, dim)),
                   ("unsafe_split", lambda self, size, dim=0: self.split(size, dim)),
                   ("unsafe_split_with_sizes", lambda self, sizes, dim=0: self.split_with_sizes(sizes, dim)),
                   ("conj_physical_", lambda self: self), ("layout", property(lambda self: strided)),
                   ("volatile", property(lambda self: False)), ("output_nr", property(_output_nr)),
                   ("xpu", _device_only("xpu")), ("ipu", _device_only("ipu")), ("is_ort", property(lambda s: False)),
                   ("dense_dim", _sparse_only("dense_dim")), ("sparse_dim", _sparse_only("sparse_dim")),
                   ("as_subclass", _as_subclass), ("storage", _storage._storage),
                   ("untyped_storage", _storage._untyped_storage), ("storage_type", _storage._storage_type), ("name", property(lambda self: None)), ("reinforce", _reinforce),
                   ("solve", _removed("solve", "solve")), ("lstsq", _removed("lstsq", "lstsq")),
                   ("eig", _removed("eig", "eig"))):
    if not hasattr(Tensor, _name):
        setattr(Tensor, _name, _fn)
