"""Conv1d/2d/3d and ConvTranspose1d/2d/3d."""

import math

from ... import _creation
from .. import _windows, functional as F, init
from ..parameter import Parameter
from .module import Module


class _ConvNd(Module):
    _nd = 0

    _transposed = False

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1,
                 groups=1, bias=True, padding_mode="zeros", device=None, dtype=None,
                 output_padding=0):
        super().__init__()
        if groups <= 0:
            raise ValueError("groups must be a positive integer")
        if in_channels % groups:
            raise ValueError("in_channels must be divisible by groups")
        if out_channels % groups:
            raise ValueError("out_channels must be divisible by groups")
        if isinstance(padding, str):
            if padding not in ("same", "valid"):
                raise ValueError(f"Invalid padding string {padding!r}, should be one of "
                                 f"{{'same', 'valid'}}")
            if padding == "same" and any(s != 1 for s in F._pair(stride, self._nd, "stride")):
                raise ValueError("padding='same' is not supported for strided convolutions")
        if padding_mode not in ("zeros", "reflect", "replicate", "circular"):
            raise ValueError(f"padding_mode must be one of {{'zeros', 'reflect', 'replicate', "
                             f"'circular'}}, but got padding_mode={padding_mode!r}")
        n = self._nd
        self.in_channels, self.out_channels = in_channels, out_channels
        self.kernel_size = F._pair(kernel_size, n, "kernel_size")
        self.stride = F._pair(stride, n, "stride")
        self.padding = padding if isinstance(padding, str) else F._pair(padding, n, "padding")
        self.dilation = F._pair(dilation, n, "dilation")
        self.groups, self.padding_mode = groups, padding_mode
        self.output_padding = F._pair(output_padding, n, "output_padding")
        # PyTorch's layouts: (out, in / groups, k...), transposed (in, out / groups, k...)
        shape = ((in_channels, out_channels // groups) if self._transposed
                 else (out_channels, in_channels // groups))
        self.weight = Parameter(_creation.empty(*shape, *self.kernel_size, dtype=dtype,
                                                device=device))
        if bias:
            self.bias = Parameter(_creation.empty(out_channels, dtype=dtype, device=device))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self):
        init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is not None:
            fan_in, _ = init._calculate_fan_in_and_fan_out(self.weight)
            if fan_in != 0:
                bound = 1 / math.sqrt(fan_in)
                init.uniform_(self.bias, -bound, bound)

    def _conv_forward(self, conv, input):
        """conv(input) with this layer's settings; a padding_mode other than
        'zeros' pads the input first (F.pad with that mode), as PyTorch's
        layers do."""
        if self.padding_mode == "zeros":
            return conv(input, self.weight, self.bias, self.stride, self.padding, self.dilation, self.groups)
        return conv(F.pad(input, self._mode_padding(), mode=self.padding_mode), self.weight, self.bias,
                    self.stride, 0, self.dilation, self.groups)

    def _mode_padding(self):
        """F.pad's amounts for padding_mode: (left, right) per dim, last dim
        first; 'same' splits each dim's total, the extra one on the right."""
        pads = []
        for d in reversed(range(self._nd)):
            if self.padding == "same":
                total = self.dilation[d] * (self.kernel_size[d] - 1)
                pads += [total // 2, total - total // 2]
            elif self.padding == "valid":
                pads += [0, 0]
            else:
                pads += [self.padding[d], self.padding[d]]
        return pads

    def extra_repr(self):
        s = (f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, "
             f"stride={self.stride}")
        if self.padding != (0,) * self._nd:
            s += f", padding={self.padding}"  # a string unquoted, as PyTorch prints it
        if self._transposed and self.output_padding != (0,) * self._nd:
            s += f", output_padding={self.output_padding}"
        if self.dilation != (1,) * self._nd:
            s += f", dilation={self.dilation}"
        if self.groups != 1:
            s += f", groups={self.groups}"
        if self.bias is None:
            s += ", bias=False"
        if self.padding_mode != "zeros":
            s += f", padding_mode={self.padding_mode}"
        return s


class Conv1d(_ConvNd):
    """1-d convolution over (N, C, L) input."""
    _nd = 1

    def forward(self, input):
        return self._conv_forward(F.conv1d, input)


class Conv2d(_ConvNd):
    """2-d convolution over (N, C, H, W) input."""
    _nd = 2

    def forward(self, input):
        return self._conv_forward(F.conv2d, input)


class Conv3d(_ConvNd):
    """3-d convolution over (N, C, D, H, W) input."""
    _nd = 3

    def forward(self, input):
        return self._conv_forward(F.conv3d, input)


class _ConvTransposeNd(_ConvNd):
    _transposed = True

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0,
                 output_padding=0, groups=1, bias=True, dilation=1, padding_mode="zeros",
                 device=None, dtype=None):
        if isinstance(padding, str):
            raise ValueError(f"{type(self).__name__}: padding must be an int or a tuple, not "
                             f"{padding!r}")
        if padding_mode != "zeros":
            raise ValueError(f"Only \"zeros\" padding mode is supported for "
                             f"{type(self).__name__}")
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation,
                         groups, bias, padding_mode, device, dtype, output_padding)

    def forward(self, input, output_size=None):
        return _windows._conv_transpose(self._nd, input, self.weight, self.bias, self.stride,
                                        self.padding, self.output_padding, self.groups,
                                        self.dilation, output_size)


class ConvTranspose1d(_ConvTransposeNd):
    """The adjoint of Conv1d: (N, C_in, L) to (N, C_out, L_out)."""
    _nd = 1


class ConvTranspose2d(_ConvTransposeNd):
    """The adjoint of Conv2d, the usual upsampling layer of decoders."""
    _nd = 2


class ConvTranspose3d(_ConvTransposeNd):
    _nd = 3
