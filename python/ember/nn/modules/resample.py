"""Upsample (and its two fixed-mode forms), PixelShuffle/PixelUnshuffle and
the padding layers (ReflectionPad, ReplicationPad, ZeroPad2d,
ConstantPad), over F.interpolate, F.pixel_shuffle and F.pad."""

from .. import functional as F
from .module import Module


class Upsample(Module):
    def __init__(self, size=None, scale_factor=None, mode="nearest", align_corners=None,
                 recompute_scale_factor=None):
        super().__init__()
        self.size, self.mode, self.align_corners = size, mode, align_corners
        self.scale_factor = float(scale_factor) if isinstance(scale_factor, (int, float)) else scale_factor
        self.recompute_scale_factor = recompute_scale_factor

    def forward(self, input):
        return F.interpolate(input, self.size, self.scale_factor, self.mode, self.align_corners,
                             recompute_scale_factor=self.recompute_scale_factor)

    def extra_repr(self):
        what = f"scale_factor={self.scale_factor!r}" if self.scale_factor is not None else f"size={self.size!r}"
        return f"{what}, mode={self.mode!r}"


class UpsamplingNearest2d(Upsample):
    def __init__(self, size=None, scale_factor=None):
        super().__init__(size, scale_factor, mode="nearest")


class UpsamplingBilinear2d(Upsample):
    def __init__(self, size=None, scale_factor=None):
        super().__init__(size, scale_factor, mode="bilinear", align_corners=True)


class PixelShuffle(Module):
    def __init__(self, upscale_factor):
        super().__init__()
        self.upscale_factor = upscale_factor

    def forward(self, input):
        return F.pixel_shuffle(input, self.upscale_factor)

    def extra_repr(self):
        return f"upscale_factor={self.upscale_factor}"


class PixelUnshuffle(Module):
    def __init__(self, downscale_factor):
        super().__init__()
        self.downscale_factor = downscale_factor

    def forward(self, input):
        return F.pixel_unshuffle(input, self.downscale_factor)

    def extra_repr(self):
        return f"downscale_factor={self.downscale_factor}"


def _pad_module(name, mode, dims):
    def __init__(self, padding, value=0.0):
        Module.__init__(self)
        self.padding = (padding,) * (2 * dims) if isinstance(padding, int) else tuple(padding)
        if len(self.padding) != 2 * dims:
            raise ValueError(f"{name}: padding must be an int or {2 * dims} ints, got {padding!r}")
        self.value = value

    def forward(self, input):
        if mode == "constant":
            return F.pad(input, self.padding, "constant", self.value)
        return F.pad(input, self.padding, mode)

    def extra_repr(self):
        return f"{self.padding}" + (f", value={self.value}" if mode == "constant" else "")

    if mode == "constant" and name == "ZeroPad2d":
        init = lambda self, padding: __init__(self, padding, 0.0)  # noqa: E731
    elif mode == "constant":
        init = lambda self, padding, value: __init__(self, padding, value)  # noqa: E731
    else:
        init = lambda self, padding: __init__(self, padding)  # noqa: E731
    return type(name, (Module,), {"__init__": init, "forward": forward, "extra_repr": extra_repr,
                                  "__doc__": f"F.pad(input, padding, {mode!r}) over the last {dims} dims"})


ReflectionPad1d = _pad_module("ReflectionPad1d", "reflect", 1)
ReflectionPad2d = _pad_module("ReflectionPad2d", "reflect", 2)
ReflectionPad3d = _pad_module("ReflectionPad3d", "reflect", 3)
ReplicationPad1d = _pad_module("ReplicationPad1d", "replicate", 1)
ReplicationPad2d = _pad_module("ReplicationPad2d", "replicate", 2)
ReplicationPad3d = _pad_module("ReplicationPad3d", "replicate", 3)
ZeroPad2d = _pad_module("ZeroPad2d", "constant", 2)
ConstantPad1d = _pad_module("ConstantPad1d", "constant", 1)
ConstantPad2d = _pad_module("ConstantPad2d", "constant", 2)
ConstantPad3d = _pad_module("ConstantPad3d", "constant", 3)
