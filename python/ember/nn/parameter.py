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
