"""Lazy modules, as PyTorch's: the size of a layer's input (in_features,
in_channels, num_features) is left out and read from the first input, or
from the shapes of a state dict loaded before any call. Until then the
module has no parameters; then it builds them (initialised as the full
module does, from the random stream at that moment) and becomes the full
module (LazyConv2d becomes a Conv2d), as PyTorch's lazy modules do."""

from ... import _creation
from .conv import Conv1d, Conv2d, Conv3d, ConvTranspose1d, ConvTranspose2d, ConvTranspose3d
from .linear import Linear
from .module import Module
from .normalization import BatchNorm1d, BatchNorm2d, BatchNorm3d, InstanceNorm1d, InstanceNorm2d, InstanceNorm3d


class _LazyModule(Module):
    """Holds the full module's other arguments until its input size is known."""

    cls_to_become = None

    def __init__(self, *args, **kwargs):
        Module.__init__(self)
        self._lazy = (args, kwargs)

    def has_uninitialized_params(self):
        return "_lazy" in self.__dict__

    def initialize_parameters(self, size, dtype=None):
        """Builds the full module for input size `size` and becomes it."""
        args, kwargs = self._lazy
        kwargs = dict(kwargs)
        if dtype is not None and kwargs.get("dtype") is None:
            kwargs["dtype"] = dtype
        made = self.cls_to_become(size, *args, **kwargs)
        del self.__dict__["_lazy"]
        training = self.training
        self.__dict__.update(made.__dict__)
        self.training = training
        self.__class__ = self.cls_to_become

    def _size_of_weight(self, shape):
        return shape[1]

    def _size_of_input(self, input):
        return input.shape[1] if input.ndim > self._unbatched_rank else input.shape[0]

    def _upgrade_state_dict(self, state_dict, prefix):
        if not self.has_uninitialized_params():
            return
        for key in ("weight", "running_mean"):
            value = state_dict.get(prefix + key)
            if value is not None:
                size = value.shape[0] if key == "running_mean" else self._size_of_weight(tuple(value.shape))
                self.initialize_parameters(size, value.dtype)
                return

    def forward(self, input, *args, **kwargs):
        self.initialize_parameters(self._size_of_input(input),
                                   input.dtype if input.dtype.is_floating_point else None)
        return self.forward(input, *args, **kwargs)

    def extra_repr(self):
        args, kwargs = self._lazy
        return "0 (uninitialized), " + ", ".join([repr(a) for a in args] + [f"{k}={v!r}" for k, v in kwargs.items()])


class LazyLinear(_LazyModule):
    """Linear whose in_features is the last dim of its first input."""
    cls_to_become = Linear

    def _size_of_weight(self, shape):
        return shape[1]

    def _size_of_input(self, input):
        return input.shape[-1]


def _lazy_conv(name, full, nd, transposed):
    def size_of_weight(self, shape):
        groups = self._lazy[1].get("groups", 1)
        return shape[0] if transposed else shape[1] * groups
    cls = type(name, (_LazyModule,), {"cls_to_become": full, "_unbatched_rank": nd + 1,
                                      "_size_of_weight": size_of_weight,
                                      "__doc__": f"{full.__name__} whose in_channels is its first input's."})
    return cls


LazyConv1d = _lazy_conv("LazyConv1d", Conv1d, 1, False)
LazyConv2d = _lazy_conv("LazyConv2d", Conv2d, 2, False)
LazyConv3d = _lazy_conv("LazyConv3d", Conv3d, 3, False)
LazyConvTranspose1d = _lazy_conv("LazyConvTranspose1d", ConvTranspose1d, 1, True)
LazyConvTranspose2d = _lazy_conv("LazyConvTranspose2d", ConvTranspose2d, 2, True)
LazyConvTranspose3d = _lazy_conv("LazyConvTranspose3d", ConvTranspose3d, 3, True)


def _lazy_norm(name, full, unbatched_rank):
    return type(name, (_LazyModule,), {"cls_to_become": full, "_unbatched_rank": unbatched_rank,
                                       "_size_of_weight": lambda self, shape: shape[0],
                                       "__doc__": f"{full.__name__} whose num_features is its first input's."})


LazyBatchNorm1d = _lazy_norm("LazyBatchNorm1d", BatchNorm1d, 1)
LazyBatchNorm2d = _lazy_norm("LazyBatchNorm2d", BatchNorm2d, 3)
LazyBatchNorm3d = _lazy_norm("LazyBatchNorm3d", BatchNorm3d, 4)
LazyInstanceNorm1d = _lazy_norm("LazyInstanceNorm1d", InstanceNorm1d, 2)
LazyInstanceNorm2d = _lazy_norm("LazyInstanceNorm2d", InstanceNorm2d, 3)
LazyInstanceNorm3d = _lazy_norm("LazyInstanceNorm3d", InstanceNorm3d, 4)

for _cls in (LazyConv1d, LazyConv2d, LazyConv3d, LazyConvTranspose1d, LazyConvTranspose2d, LazyConvTranspose3d,
             LazyBatchNorm1d, LazyBatchNorm2d, LazyBatchNorm3d, LazyInstanceNorm1d, LazyInstanceNorm2d,
             LazyInstanceNorm3d):
    _cls.__module__ = __name__
del _creation
