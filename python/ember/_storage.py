"""Storages, as torch's: the memory under a tensor, seen as one flat run of
elements. x.storage() is a TypedStorage of x's dtype over all of x's
memory (from its start, whatever x's offset and strides), x.untyped_storage()
the same bytes; writes through a storage show in every tensor over that
memory. FloatStorage(n), LongStorage([1, 2]) ... make new ones, and
x.set_(storage, offset, size, stride) views one.

A storage is a 1-d tensor over the memory underneath (`_values`), so
indexing, fill_, copy_ and tolist are tensor ops. Storages stay on the CPU,
cannot be resized (resize_ raises), and are not shared between processes
(is_shared is False; DataLoader workers copy batches into shared memory
themselves)."""

from . import _C, _creation

__all__ = ["UntypedStorage", "TypedStorage", "Storage", "StorageBase"]


def _whole_memory(t):
    """A 1-d tensor of t's dtype over all of t's memory."""
    return _C._storage_view(t.detach(), 0, (t._storage_size(),), (1,))


class _StorageMixin:
    """What both kinds share; _values is the 1-d tensor over the memory."""

    def size(self):
        return int(self._values.numel())

    __len__ = size

    def nbytes(self):
        return self.size() * self.element_size()

    def data_ptr(self):
        return self._values.data_ptr()

    def element_size(self):
        return self._values.element_size()

    @property
    def device(self):
        return self._values.device

    is_cuda = False
    is_sparse = False

    def is_shared(self):
        return False

    def is_pinned(self):
        return False

    def cpu(self):
        return self

    def tolist(self):
        return self._values.tolist()

    def __iter__(self):
        return iter(self.tolist())

    def __getitem__(self, index):
        if isinstance(index, slice):
            if not isinstance(self, UntypedStorage):
                raise RuntimeError("slices are only supported in UntypedStorage.__getitem__")
            return self._wrap(self._values[index])
        return self._values[index].item()

    def __setitem__(self, index, value):
        self._values[index] = value

    def fill_(self, value):
        self._values.fill_(value)
        return self

    def copy_(self, source, non_blocking=None):
        other = source._values if isinstance(source, _StorageMixin) else source
        if other.numel() != self.size():
            raise RuntimeError(f"size mismatch: copy_ of a storage of {other.numel()} elements into one of "
                               f"{self.size()}")
        self._values.copy_(other.reshape(-1).to(self._values.dtype))
        return self

    def clone(self):
        return self._wrap(self._values.clone())

    def resize_(self, size):
        raise NotImplementedError(f"{type(self).__name__}.resize_: ember's storages cannot be resized; make a new "
                                  f"one (or resize_ the tensor)")

    def pin_memory(self):
        return self

    def share_memory_(self):
        return self


class UntypedStorage(_StorageMixin):
    """Bytes: UntypedStorage(n) makes n zero bytes."""

    def __init__(self, size=0, *, device=None):
        self._values = _creation.zeros(int(size), dtype=_C.uint8)

    @classmethod
    def _wrap(cls, values):
        out = cls.__new__(cls)
        out._values = values.view(_C.uint8) if values.dtype != _C.uint8 else values
        return out

    def element_size(self):
        return 1

    @property
    def dtype(self):
        return _C.uint8

    def untyped(self):
        return self

    def type(self, dtype=None):
        return "ember.UntypedStorage" if dtype is None else TypedStorage(wrap_storage=self, dtype=dtype)

    def __repr__(self):
        return f"{self._values.tolist()}\n[ember.UntypedStorage of size {self.size()}]"

    def __reduce__(self):
        return (UntypedStorage._wrap, (self._values.clone(),))


class TypedStorage(_StorageMixin):
    """Elements of a dtype: TypedStorage(n, dtype=...), TypedStorage(sequence,
    dtype=...), or TypedStorage(wrap_storage=untyped, dtype=...)."""

    _fixed_dtype = None

    def __init__(self, *args, dtype=None, device=None, wrap_storage=None):
        dtype = self._fixed_dtype or dtype or _creation.get_default_dtype()
        if wrap_storage is not None:
            if args:
                raise TypeError("TypedStorage(wrap_storage=...) takes no positional arguments")
            raw = wrap_storage._values
            if raw.numel() % dtype.itemsize:
                raise RuntimeError(f"TypedStorage: an untyped storage of {raw.numel()} bytes is not a whole "
                                   f"number of {dtype} elements")
            self._values = raw.view(dtype)
        elif not args:
            self._values = _creation.empty(0, dtype=dtype)
        elif len(args) == 1 and isinstance(args[0], int):
            self._values = _creation.zeros(args[0], dtype=dtype)
        elif len(args) == 1:
            self._values = _creation.tensor(list(args[0]), dtype=dtype).reshape(-1)
        else:
            raise TypeError(f"{type(self).__name__}(): expected a size, a sequence, or wrap_storage")
        self.dtype = dtype

    @classmethod
    def _wrap(cls, values):
        out = cls.__new__(cls)
        out._values, out.dtype = values, values.dtype
        return out

    def untyped(self):
        return UntypedStorage._wrap(self._values)

    _untyped_storage = property(untyped)

    def type(self, dtype=None):
        name = _LEGACY_BY_DTYPE.get(self.dtype)
        if dtype is None:
            return f"ember.{name.__name__}" if name else "ember.TypedStorage"
        return TypedStorage(wrap_storage=self.untyped(), dtype=dtype)

    def pickle_storage_type(self):
        return _LEGACY_BY_DTYPE[self.dtype].__name__.replace("Storage", "")

    def __repr__(self):
        return (" " + "\n ".join(str(v) for v in self.tolist()) + "\n" if self.size() else "") + \
            f"[ember.storage.TypedStorage(dtype={str(self.dtype).split('.')[-1]}, device=cpu) of size {self.size()}]"

    def __reduce__(self):
        return (TypedStorage._wrap, (self._values.clone(),))


Storage = TypedStorage
StorageBase = UntypedStorage

_LEGACY = {"Float": _C.float32, "Double": _C.float64, "Half": _C.float16, "BFloat16": _C.bfloat16,
           "Long": _C.int64, "Int": _C.int32, "Short": _C.int16, "Char": _C.int8, "Byte": _C.uint8,
           "Bool": _C.bool}
_LEGACY_BY_DTYPE = {}
for _kind, _dt in _LEGACY.items():
    _cls = type(f"{_kind}Storage", (TypedStorage,), {"_fixed_dtype": _dt, "__module__": __name__,
                                                     "__doc__": f"A TypedStorage of {_dt}."})
    globals()[_cls.__name__] = _cls
    __all__.append(_cls.__name__)
    _LEGACY_BY_DTYPE[_dt] = _cls


def _storage(self):
    """x's memory as a TypedStorage of x's dtype."""
    return _LEGACY_BY_DTYPE[self.dtype]._wrap(_whole_memory(self))


def _untyped_storage(self):
    return UntypedStorage._wrap(_whole_memory(self))


def _storage_type(self):
    return _LEGACY_BY_DTYPE[self.dtype]
