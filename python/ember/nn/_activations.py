"""More of nn.functional's activations (issue 40, item 3), PyTorch's
definitions composed of ember's ops: selu, celu, softsign, softshrink,
hardshrink, tanhshrink, threshold, hardsigmoid, hardswish, glu, prelu,
rrelu, softmin, and the in-place spellings (relu_, elu_, leaky_relu_,
hardtanh_, selu_, celu_, threshold_, rrelu_)."""

from .. import _creation, _ops
from .functional import _maybe_inplace as _inplace  # (defined before functional imports this module)

_SELU_ALPHA = 1.6732632423543772848170429916717
_SELU_SCALE = 1.0507009873554804934193349852946




def selu(input, inplace=False):
    """scale * (max(0, x) + min(0, alpha (e^x - 1)))."""
    return _inplace(input, lambda x: _SELU_SCALE * _ops.where(x > 0, x, _SELU_ALPHA * x.expm1()), inplace)


def celu(input, alpha=1.0, inplace=False):
    """max(0, x) + min(0, alpha (e^(x / alpha) - 1))."""
    if alpha == 0:
        raise RuntimeError("ZeroDivisionError: celu: alpha must not be 0")
    return _inplace(input, lambda x: _ops.where(x > 0, x, alpha * (x / alpha).expm1()), inplace)


def softsign(input):
    return input / (1.0 + input.abs())


def softshrink(input, lambd=0.5):
    """x - lambd above lambd, x + lambd below -lambd, 0 between."""
    if lambd < 0:
        raise RuntimeError(f"softshrink: lambda must be greater or equal to 0, but found to be {lambd}.")
    return _ops.where(input > lambd, input - lambd, _ops.where(input < -lambd, input + lambd,
                                                              _creation.zeros_like(input)))


def hardshrink(input, lambd=0.5):
    """x where |x| > lambd, else 0 (NaN stays NaN)."""
    return _ops.where((input >= -lambd) & (input <= lambd), _creation.zeros_like(input), input)


def tanhshrink(input):
    return input - input.tanh()


def threshold(input, threshold, value, inplace=False):
    """x above threshold, value elsewhere (NaN stays NaN)."""
    return _inplace(input, lambda x: _ops.where(x <= threshold, _creation.full_like(x, value), x), inplace)


def hardsigmoid(input, inplace=False):
    """relu6(x + 3) / 6; its slope is 0 at -3 and 3, as PyTorch's."""
    def fn(x):
        return _ops.where(x <= -3.0, _creation.zeros_like(x), _ops.where(x >= 3.0, _creation.ones_like(x),
                                                                         x / 6.0 + 0.5))
    return _inplace(input, fn, inplace)


def hardswish(input, inplace=False):
    """x relu6(x + 3) / 6, with PyTorch's slopes at -3 and 3."""
    def fn(x):
        # (PyTorch's vectorised kernel, which takes most elements: slope 1 from
        # 3 on; its scalar tail gives 1.5 at exactly 3)
        # (below -3, x * 0 as PyTorch's: -0.0, and NaN at -inf)
        return _ops.where(x >= 3.0, x, x * (x + 3.0).clamp(min=0.0) / 6.0)
    return _inplace(input, fn, inplace)


def glu(input, dim=-1):
    """a * sigmoid(b), the halves of input along dim."""
    n = input.shape[dim]
    if n % 2:
        raise RuntimeError(f"glu: Halving dimension must be even, but dimension {dim % input.ndim} is size {n}")
    a, b = input.chunk(2, dim)
    return a * b.sigmoid()


def prelu(input, weight):
    """max(0, x) + weight min(0, x), weight per channel (dim 1) or one."""
    if weight.numel() != 1 and (input.ndim < 2 or weight.numel() != input.shape[1]):
        raise RuntimeError(f"prelu: Mismatch of parameter numbers and input channel size. Found parameter "
                           f"numbers = {weight.numel()} and channel size = "
                           f"{input.shape[1] if input.ndim >= 2 else 1}.")
    w = weight.reshape([1, -1] + [1] * (input.ndim - 2)) if weight.numel() != 1 else weight.reshape(())
    return _ops.where(input > 0, input, w * input)


def rrelu(input, lower=1.0 / 8, upper=1.0 / 3, training=False, inplace=False):
    """Leaky ReLU with a slope drawn from U(lower, upper) per element while
    training, (lower + upper) / 2 otherwise."""
    def fn(x):
        if training:
            slope = _creation.rand(*x.shape, dtype=x.dtype, device=x.device) * (upper - lower) + lower
        else:
            slope = (lower + upper) / 2.0
        return _ops.where(x > 0, x, x * slope)  # (0 takes the slope, as PyTorch's)
    return _inplace(input, fn, inplace)


def softmin(input, dim=None, _stacklevel=3, dtype=None):
    x = input if dtype is None else input.to(dtype)
    return (-x).softmax(dim)


def relu_(input):
    return input.relu_()


def elu_(input, alpha=1.0):
    from .functional import elu
    return elu(input, alpha, True)


def leaky_relu_(input, negative_slope=0.01):
    from .functional import leaky_relu
    return leaky_relu(input, negative_slope, True)


def hardtanh_(input, min_val=-1.0, max_val=1.0):
    from .functional import hardtanh
    return hardtanh(input, min_val, max_val, True)


def selu_(input):
    return selu(input, True)


def celu_(input, alpha=1.0):
    return celu(input, alpha, True)


def threshold_(input, threshold_, value):
    return threshold(input, threshold_, value, True)


def rrelu_(input, lower=1.0 / 8, upper=1.0 / 3, training=False):
    return rrelu(input, lower, upper, training, True)
