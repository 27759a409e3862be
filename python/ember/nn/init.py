"""nn.init: PyTorch's initialisations, so an ember model starts from the
same distributions a PyTorch model does (the same laws, not the same
draws: the generators differ). Each fills its tensor in place, without
recording a gradient, and returns it."""

import math
import warnings

from .. import _creation, _ops
from ..autograd import no_grad
from .._tensor import Tensor  # noqa: F401 (torch.nn.init.Tensor, as PyTorch's module has it)


def calculate_gain(nonlinearity, param=None):
    """The recommended gain for a nonlinearity (PyTorch's table)."""
    linear = ["linear", "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d",
              "conv_transpose3d", "sigmoid"]
    if nonlinearity in linear:
        return 1.0
    if nonlinearity == "tanh":
        return 5.0 / 3
    if nonlinearity == "relu":
        return math.sqrt(2.0)
    if nonlinearity == "leaky_relu":
        slope = 0.01 if param is None else param
        if isinstance(slope, bool) or not isinstance(slope, (int, float)):
            raise ValueError(f"negative_slope {slope} not a valid number")
        return math.sqrt(2.0 / (1 + slope ** 2))
    if nonlinearity == "selu":
        return 3.0 / 4
    raise ValueError(f"Unsupported nonlinearity {nonlinearity}")


def _calculate_fan_in_and_fan_out(tensor):
    if tensor.dim() < 2:
        raise ValueError("Fan in and fan out can not be computed for tensor with fewer than 2 "
                         "dimensions")
    receptive = 1
    for n in tensor.shape[2:]:
        receptive *= n
    return tensor.shape[1] * receptive, tensor.shape[0] * receptive


def _fan(tensor, mode):
    mode = mode.lower()
    if mode not in ("fan_in", "fan_out"):
        raise ValueError(f"Mode {mode} not supported, please use one of fan_in, fan_out")
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    return fan_in if mode == "fan_in" else fan_out


def _fill(tensor, values):
    with no_grad():
        tensor.copy_(values)
    return tensor


def uniform_(tensor, a=0.0, b=1.0):
    return _fill(tensor, _creation.rand(*tensor.shape, dtype=tensor.dtype, device=tensor.device) * (b - a) + a)


def normal_(tensor, mean=0.0, std=1.0):
    return _fill(tensor, _creation.randn(*tensor.shape, dtype=tensor.dtype, device=tensor.device) * std + mean)


def trunc_normal_(tensor, mean=0.0, std=1.0, a=-2.0, b=2.0):
    """Normal(mean, std) restricted to [a, b]: draws outside are drawn again."""
    if not a < b:
        raise ValueError(f"trunc_normal_: need a < b, got a={a}, b={b}")
    with no_grad():
        v = _creation.randn(*tensor.shape, dtype=tensor.dtype, device=tensor.device) * std + mean
        for _ in range(1000):
            outside = (v < a) | (v > b)
            if not outside.any():
                return _fill(tensor, v)
            v = _ops.where(outside, _creation.randn(*tensor.shape, dtype=tensor.dtype, device=tensor.device) * std + mean, v)
    raise RuntimeError(f"trunc_normal_: [{a}, {b}] holds too little of Normal({mean}, {std}) to "
                       f"sample from by rejection")


def constant_(tensor, val):
    with no_grad():
        tensor.fill_(val)
    return tensor


def ones_(tensor):
    return constant_(tensor, 1.0)


def zeros_(tensor):
    return constant_(tensor, 0.0)


def eye_(tensor):
    if tensor.dim() != 2:
        raise ValueError("Only tensors with 2 dimensions are supported")
    return _fill(tensor, _creation.eye(*tensor.shape, dtype=tensor.dtype))


def xavier_uniform_(tensor, gain=1.0):
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    a = gain * math.sqrt(6.0 / float(fan_in + fan_out))
    return uniform_(tensor, -a, a)


def xavier_normal_(tensor, gain=1.0):
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    return normal_(tensor, 0.0, gain * math.sqrt(2.0 / float(fan_in + fan_out)))


def kaiming_uniform_(tensor, a=0, mode="fan_in", nonlinearity="leaky_relu"):
    if 0 in tensor.shape:
        return tensor
    std = calculate_gain(nonlinearity, a) / math.sqrt(_fan(tensor, mode))
    bound = math.sqrt(3.0) * std
    return uniform_(tensor, -bound, bound)


def kaiming_normal_(tensor, a=0, mode="fan_in", nonlinearity="leaky_relu"):
    if 0 in tensor.shape:
        return tensor
    std = calculate_gain(nonlinearity, a) / math.sqrt(_fan(tensor, mode))
    return normal_(tensor, 0.0, std)


def orthogonal_(tensor, gain=1.0):
    """Fills tensor (2 or more dims, flattened after the first) with a
    (semi-)orthogonal matrix: the Q of a QR decomposition of a normal
    matrix, its columns' signs set by R's diagonal so that Q is uniformly
    distributed (Saxe et al. 2013, as PyTorch does), times gain."""
    if tensor.dim() < 2:
        raise ValueError("Only tensors with 2 or more dimensions are supported")
    if tensor.numel() == 0:
        return tensor
    rows = tensor.shape[0]
    cols = tensor.numel() // rows
    flat = _creation.randn(rows, cols, dtype=tensor.dtype)
    if rows < cols:
        flat = flat.t()
    from .. import linalg
    q, r = linalg.qr(flat)
    q = q * _diagonal(r).sign()
    if rows < cols:
        q = q.t()
    return _fill(tensor, (q * gain).reshape(tensor.shape))


def _diagonal(m):
    """The main diagonal of a 2-d tensor (a copy)."""
    n = min(m.shape[0], m.shape[1])
    idx = _creation.arange(n)
    return m[idx, idx]


def dirac_(tensor, groups=1):
    """Fills a 3-, 4- or 5-d convolution weight with the Dirac delta: each
    output channel passes its input channel through (per group)."""
    if tensor.dim() not in (3, 4, 5):
        raise ValueError("Only tensors with 3, 4, or 5 dimensions are supported")
    out_per = tensor.shape[0] // groups
    if tensor.shape[0] % groups:
        raise ValueError("dim 0 must be divisible by groups")
    n = min(out_per, tensor.shape[1])
    w = _creation.zeros(*tensor.shape, dtype=tensor.dtype, device=tensor.device)
    centre = [k // 2 for k in tensor.shape[2:]]
    for g in range(groups):
        for d in range(n):
            w[(g * out_per + d, d, *centre)] = 1
    return _fill(tensor, w)


def sparse_(tensor, sparsity, std=0.01):
    """A 2-d tensor from N(0, std) with ceil(sparsity * rows) of each
    column's entries zeroed."""
    if tensor.dim() != 2:
        raise ValueError("Only tensors with 2 dimensions are supported")
    rows, cols = tensor.shape
    zeros = int(math.ceil(sparsity * rows))
    w = _creation.randn(rows, cols, dtype=tensor.dtype) * std
    for c in range(cols):
        idx = _creation.randperm(rows)[:zeros]
        w[idx, c] = 0
    return _fill(tensor, w)


def _deprecated(name):
    new = globals()[name + "_"]

    def old(*args, **kwargs):
        warnings.warn(f"nn.init.{name} is now deprecated in favor of nn.init.{name}_.", stacklevel=2)
        return new(*args, **kwargs)
    old.__name__, old.__doc__ = name, f"Deprecated: nn.init.{name}_."
    globals()[name] = old


for _name in ("uniform", "normal", "constant", "xavier_uniform", "xavier_normal", "kaiming_uniform",
              "kaiming_normal", "orthogonal", "sparse", "dirac", "eye"):
    _deprecated(_name)
