"""nn.Parameter: a tensor that a Module registers as one of its parameters."""

from .. import _C
from .._tensor import Tensor


class Parameter(Tensor):
    """A leaf tensor that requires grad (by default) and that assigning to a
    Module attribute registers in the module's parameters. It shares the
    memory of the tensor it is made from."""

    __slots__ = ()

    def __new__(cls, data=None, requires_grad=True):
        if data is None:
            data = _C.zeros((0,))
        return _C._make_subclass(cls, data, requires_grad)

    def __repr__(self):
        return "Parameter containing:\n" + super().__repr__()

    __str__ = __repr__

    def __reduce_ex__(self, protocol):
        return (Parameter, (self.detach(), self.requires_grad))

    def __deepcopy__(self, memo):
        if id(self) not in memo:
            memo[id(self)] = Parameter(self.detach().clone(), self.requires_grad)
        return memo[id(self)]


class UninitializedTensorMixin:
    """A parameter or buffer whose shape is not known yet (a lazy module's,
    before its first input): materialize gives it one and makes it the
    class it stands for."""

    __slots__ = ()
    cls_to_become = None

    def materialize(self, shape, device=None, dtype=None):
        from .. import _creation
        shape = (shape,) if isinstance(shape, int) else tuple(shape)
        _C._set_data(self, _creation.empty(shape, dtype=dtype or self.dtype))
        self.__class__ = self.cls_to_become

    @property
    def shape(self):
        raise RuntimeError("Can't access the shape of an uninitialized parameter or buffer. This error usually "
                           "happens in `load_state_dict` when trying to load an uninitialized parameter into an "
                           "initialized one. Call `forward` to initialize the parameters before accessing their "
                           "attributes.")

    def __repr__(self):
        return f"<{type(self).__name__}>"

    __str__ = __repr__

    def __reduce_ex__(self, protocol):
        return (type(self), (self.requires_grad,))


class UninitializedParameter(UninitializedTensorMixin, Parameter):
    __slots__ = ()
    cls_to_become = Parameter

    def __new__(cls, requires_grad=True, device=None, dtype=None):
        from .. import _creation
        return _C._make_subclass(cls, _creation.empty(0, dtype=dtype), requires_grad)


class UninitializedBuffer(UninitializedTensorMixin, Tensor):
    __slots__ = ()
    cls_to_become = Tensor

    def __new__(cls, requires_grad=False, device=None, dtype=None):
        from .. import _creation
        return _C._make_subclass(cls, _creation.empty(0, dtype=dtype), requires_grad)


def is_lazy(param):
    """Whether param is a lazy module's parameter or buffer still without a shape."""
    return isinstance(param, UninitializedTensorMixin)
