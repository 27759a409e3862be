"""Max, average and adaptive pooling over 1, 2 and 3 spatial dims, and
Fold/Unfold."""

from .. import _windows, functional as F
from .module import Module


class _MaxPoolNd(Module):
    _nd = 0

    def __init__(self, kernel_size, stride=None, padding=0, dilation=1, return_indices=False,
                 ceil_mode=False):
        super().__init__()
        self.kernel_size, self.stride = kernel_size, stride if stride is not None else kernel_size
        self.padding, self.dilation = padding, dilation
        self.return_indices, self.ceil_mode = return_indices, ceil_mode

    def forward(self, input):
        fn = (F.max_pool1d, F.max_pool2d, F.max_pool3d)[self._nd - 1]
        return fn(input, self.kernel_size, self.stride, self.padding, self.dilation,
                  self.ceil_mode, self.return_indices)

    def extra_repr(self):
        return (f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}, "
                f"dilation={self.dilation}, ceil_mode={self.ceil_mode}")


class MaxPool1d(_MaxPoolNd):
    _nd = 1


class MaxPool2d(_MaxPoolNd):
    _nd = 2


class MaxPool3d(_MaxPoolNd):
    _nd = 3


class _AvgPoolNd(Module):
    _nd = 0

    def __init__(self, kernel_size, stride=None, padding=0, ceil_mode=False,
                 count_include_pad=True, divisor_override=None):
        super().__init__()
        self.kernel_size, self.stride = kernel_size, stride if stride is not None else kernel_size
        self.padding, self.ceil_mode = padding, ceil_mode
        self.count_include_pad, self.divisor_override = count_include_pad, divisor_override

    def forward(self, input):
        return _windows._avg_pool(self._nd, input, self.kernel_size, self.stride, self.padding,
                                  self.ceil_mode, self.count_include_pad, self.divisor_override)

    def extra_repr(self):
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class AvgPool1d(_AvgPoolNd):
    _nd = 1

    def __init__(self, kernel_size, stride=None, padding=0, ceil_mode=False,
                 count_include_pad=True):
        super().__init__(kernel_size, stride, padding, ceil_mode, count_include_pad)


class AvgPool2d(_AvgPoolNd):
    _nd = 2


class AvgPool3d(_AvgPoolNd):
    _nd = 3


class _AdaptivePoolNd(Module):
    _nd = 0
    _max = False

    def __init__(self, output_size, return_indices=False):
        super().__init__()
        self.output_size = output_size
        if self._max:
            self.return_indices = return_indices

    def forward(self, input):
        if self._max:
            fn = (F.adaptive_max_pool1d, F.adaptive_max_pool2d, F.adaptive_max_pool3d)[self._nd - 1]
            return fn(input, self.output_size, self.return_indices)
        fn = (F.adaptive_avg_pool1d, F.adaptive_avg_pool2d, F.adaptive_avg_pool3d)[self._nd - 1]
        return fn(input, self.output_size)

    def extra_repr(self):
        return f"output_size={self.output_size}"


class AdaptiveAvgPool1d(_AdaptivePoolNd):
    _nd = 1

    def __init__(self, output_size):
        super().__init__(output_size)


class AdaptiveAvgPool2d(AdaptiveAvgPool1d):
    _nd = 2


class AdaptiveAvgPool3d(AdaptiveAvgPool1d):
    _nd = 3


class AdaptiveMaxPool1d(_AdaptivePoolNd):
    _nd = 1
    _max = True


class AdaptiveMaxPool2d(AdaptiveMaxPool1d):
    _nd = 2


class AdaptiveMaxPool3d(AdaptiveMaxPool1d):
    _nd = 3


class Unfold(Module):
    def __init__(self, kernel_size, dilation=1, padding=0, stride=1):
        super().__init__()
        self.kernel_size, self.dilation, self.padding, self.stride = (kernel_size, dilation,
                                                                      padding, stride)

    def forward(self, input):
        return F.unfold(input, self.kernel_size, self.dilation, self.padding, self.stride)

    def extra_repr(self):
        return (f"kernel_size={self.kernel_size}, dilation={self.dilation}, "
                f"padding={self.padding}, stride={self.stride}")


class Fold(Module):
    def __init__(self, output_size, kernel_size, dilation=1, padding=0, stride=1):
        super().__init__()
        self.output_size, self.kernel_size = output_size, kernel_size
        self.dilation, self.padding, self.stride = dilation, padding, stride

    def forward(self, input):
        return F.fold(input, self.output_size, self.kernel_size, self.dilation, self.padding,
                      self.stride)

    def extra_repr(self):
        return (f"output_size={self.output_size}, kernel_size={self.kernel_size}, "
                f"dilation={self.dilation}, padding={self.padding}, stride={self.stride}")


class _MaxUnpoolNd(Module):
    _n = 0

    def __init__(self, kernel_size, stride=None, padding=0):
        super().__init__()
        self.kernel_size, self.stride, self.padding = kernel_size, stride if stride is not None else kernel_size, \
            padding

    def forward(self, input, indices, output_size=None):
        fn = (F.max_unpool1d, F.max_unpool2d, F.max_unpool3d)[self._n - 1]
        return fn(input, indices, self.kernel_size, self.stride, self.padding, output_size)

    def extra_repr(self):
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class MaxUnpool1d(_MaxUnpoolNd):
    """The adjoint of MaxPool1d(return_indices=True): each value at its index, zeros elsewhere."""
    _n = 1


class MaxUnpool2d(_MaxUnpoolNd):
    """The adjoint of MaxPool2d(return_indices=True)."""
    _n = 2


class MaxUnpool3d(_MaxUnpoolNd):
    """The adjoint of MaxPool3d(return_indices=True)."""
    _n = 3


class _LPPoolNd(Module):
    def __init__(self, norm_type, kernel_size, stride=None, ceil_mode=False):
        super().__init__()
        self.norm_type, self.kernel_size, self.stride, self.ceil_mode = norm_type, kernel_size, stride, ceil_mode

    def extra_repr(self):
        return f"norm_type={self.norm_type}, kernel_size={self.kernel_size}, stride={self.stride}, " \
               f"ceil_mode={self.ceil_mode}"


class LPPool1d(_LPPoolNd):
    """The p-norm of each window: (sum x^p)^(1/p)."""

    def forward(self, input):
        return F.lp_pool1d(input, self.norm_type, self.kernel_size, self.stride, self.ceil_mode)


class LPPool2d(_LPPoolNd):
    """The p-norm of each 2-d window."""

    def forward(self, input):
        return F.lp_pool2d(input, self.norm_type, self.kernel_size, self.stride, self.ceil_mode)


class _FractionalMaxPoolNd(Module):
    """Fractional max pooling (F.fractional_max_pool2d/3d): fresh random
    window positions at every call unless _random_samples are given."""
    _dims = 2

    def __init__(self, kernel_size, output_size=None, output_ratio=None, return_indices=False,
                 _random_samples=None):
        super().__init__()
        if output_size is None and output_ratio is None:
            raise ValueError(f"FractionalMaxPool{self._dims}d requires specifying either an output size, or a "
                             "pooling ratio")
        if output_size is not None and output_ratio is not None:
            raise ValueError("only one of output_size and output_ratio may be specified")
        ratios = [output_ratio] * self._dims if isinstance(output_ratio, (int, float)) else (output_ratio or [])
        if any(not 0 < r < 1 for r in ratios):
            raise ValueError(f"output_ratio must be between 0 and 1 (got {output_ratio})")
        self.kernel_size, self.output_size, self.output_ratio = kernel_size, output_size, output_ratio
        self.return_indices = return_indices
        self.register_buffer("_random_samples", _random_samples)

    def forward(self, input):
        fn = F.fractional_max_pool2d if self._dims == 2 else F.fractional_max_pool3d
        return fn(input, self.kernel_size, self.output_size, self.output_ratio, self.return_indices,
                  _random_samples=self._random_samples)


class FractionalMaxPool2d(_FractionalMaxPoolNd):
    _dims = 2


class FractionalMaxPool3d(_FractionalMaxPoolNd):
    _dims = 3
