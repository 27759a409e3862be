"""Fake quantization, as PyTorch's (quantization-aware training): a float
tensor rounded to the grid of an integer type, q = clamp(round(x / scale) +
zero_point, quant_min, quant_max), and mapped back, (q - zero_point) *
scale, all in float. Rounding is half to even on x * (1 / scale), 1 / scale
taken in float32, as PyTorch's kernel does. The gradient is the
straight-through estimator: 1 where round(x / scale) + zero_point falls
inside [quant_min, quant_max], 0 outside."""

from . import _C, _creation, _ops

__all__ = ["fake_quantize_per_tensor_affine", "fake_quantize_per_channel_affine"]


def _fake_quantize(input, scale, zero_point, quant_min, quant_max, what):
    if quant_min > quant_max:
        raise RuntimeError(f"{what}: `quant_min` should be less than or equal to `quant_max`, got {quant_min} and "
                           f"{quant_max}")
    if not input.dtype.is_floating_point:
        raise RuntimeError(f"{what}: expected a floating-point input, got {input.dtype}")
    # PyTorch's kernel: inv_scale = 1.0f / (float)scale, whatever input's dtype
    scale32 = scale.float() if isinstance(scale, _C._TensorBase) else _creation.tensor(scale, dtype=_C.float32)
    inv = (1.0 / scale32).to(input.dtype)
    zp = zero_point.to(input.dtype) if isinstance(zero_point, _C._TensorBase) else float(zero_point)
    scale_t = scale32.to(input.dtype)
    x = input.detach()
    q = (x * inv).round() + zp
    inside = (q >= quant_min) & (q <= quant_max)
    out = (q.clamp(quant_min, quant_max) - zp) * scale_t
    # straight through: the identity's gradient inside the range, none outside
    return _ops.where(inside, input + (out - input).detach(), out)


def fake_quantize_per_tensor_affine(input, scale, zero_point, quant_min, quant_max):
    """One scale and zero point (numbers or 0-d tensors) for all of input."""
    return _fake_quantize(input, scale, zero_point, quant_min, quant_max, "fake_quantize_per_tensor_affine")


def fake_quantize_per_channel_affine(input, scale, zero_point, axis, quant_min, quant_max):
    """A scale and zero point per index of dim axis (1-d tensors as long as it)."""
    what = "fake_quantize_per_channel_affine"
    axis = axis % input.ndim if input.ndim else 0
    n = input.shape[axis]
    if scale.ndim != 1 or scale.shape[0] != n or zero_point.ndim != 1 or zero_point.shape[0] != n:
        raise RuntimeError(f"{what}: scale and zero_point must be 1-d of length {n} (input's dim {axis}), got "
                           f"{list(scale.shape)} and {list(zero_point.shape)}")
    shape = [1] * input.ndim
    shape[axis] = n
    return _fake_quantize(input, scale.reshape(shape), zero_point.reshape(shape), quant_min, quant_max, what)
