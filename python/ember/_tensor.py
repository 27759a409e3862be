"""ember.Tensor: the C tensor type plus what reads better in Python."""

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

    def tolist(self):
        """The values as (nested) Python lists of numbers."""
        return self.numpy().tolist()

    def __iter__(self):
        raise NotImplementedError(
            "iterating over a tensor needs indexing, which is not implemented in ember yet")

    def __repr__(self):
        from ._tensor_str import tensor_repr
        return tensor_repr(self)

    __str__ = __repr__

    def __format__(self, spec):
        if self.ndim == 0:
            return self.item().__format__(spec)
        return object.__format__(self, spec)
