"""LayerNorm, RMSNorm, BatchNorm1d/2d."""

import numbers

from ... import _C, _creation, _ops
from .. import functional as F, init
from ..parameter import Parameter
from .module import Module


def _shape(normalized_shape):
    if isinstance(normalized_shape, numbers.Integral):
        return (int(normalized_shape),)
    return tuple(int(n) for n in normalized_shape)


class LayerNorm(Module):
    def __init__(self, normalized_shape, eps=1e-5, elementwise_affine=True, bias=True, device=None,
                 dtype=None):
        super().__init__()
        self.normalized_shape = _shape(normalized_shape)
        self.eps, self.elementwise_affine = eps, elementwise_affine
        if elementwise_affine:
            self.weight = Parameter(_creation.ones(*self.normalized_shape, dtype=dtype))
            if bias:
                self.bias = Parameter(_creation.zeros(*self.normalized_shape, dtype=dtype))
            else:
                self.register_parameter("bias", None)
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)

    def reset_parameters(self):
        if self.weight is not None:
            init.ones_(self.weight)
        if self.bias is not None:
            init.zeros_(self.bias)

    def forward(self, input):
        return F.layer_norm(input, self.normalized_shape, self.weight, self.bias, self.eps)

    def extra_repr(self):
        return (f"{self.normalized_shape}, eps={self.eps}, "
                f"elementwise_affine={self.elementwise_affine}")


class RMSNorm(Module):
    def __init__(self, normalized_shape, eps=None, elementwise_affine=True, device=None,
                 dtype=None):
        super().__init__()
        self.normalized_shape = _shape(normalized_shape)
        self.eps, self.elementwise_affine = eps, elementwise_affine
        if elementwise_affine:
            self.weight = Parameter(_creation.ones(*self.normalized_shape, dtype=dtype))
        else:
            self.register_parameter("weight", None)

    def reset_parameters(self):
        if self.weight is not None:
            init.ones_(self.weight)

    def forward(self, input):
        return F.rms_norm(input, self.normalized_shape, self.weight, self.eps)

    def extra_repr(self):
        return (f"{self.normalized_shape}, eps={self.eps}, "
                f"elementwise_affine={self.elementwise_affine}")


class _BatchNorm(Module):
    _dims = ()

    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=True,
                 track_running_stats=True, device=None, dtype=None):
        super().__init__()
        self.num_features, self.eps, self.momentum = num_features, eps, momentum
        self.affine, self.track_running_stats = affine, track_running_stats
        if affine:
            self.weight = Parameter(_creation.ones(num_features, dtype=dtype))
            self.bias = Parameter(_creation.zeros(num_features, dtype=dtype))
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)
        if track_running_stats:
            self.register_buffer("running_mean", _creation.zeros(num_features, dtype=dtype))
            self.register_buffer("running_var", _creation.ones(num_features, dtype=dtype))
            self.register_buffer("num_batches_tracked", _creation.tensor(0, dtype=_C.int64))
        else:
            self.register_buffer("running_mean", None)
            self.register_buffer("running_var", None)
            self.register_buffer("num_batches_tracked", None)

    def reset_running_stats(self):
        if self.track_running_stats:
            self.running_mean.zero_()
            self.running_var.fill_(1)
            self.num_batches_tracked.zero_()

    def reset_parameters(self):
        self.reset_running_stats()
        if self.affine:
            init.ones_(self.weight)
            init.zeros_(self.bias)

    def _upgrade_state_dict(self, state_dict, prefix):
        # PyTorch's rule: state dicts from before num_batches_tracked load
        # with the count at zero
        key = prefix + "num_batches_tracked"
        if self.track_running_stats and key not in state_dict and \
                prefix + "running_mean" in state_dict:
            state_dict[key] = _creation.tensor(0, dtype=_C.int64)

    def _check_input_dim(self, input):
        if input.ndim not in self._dims:
            raise ValueError(f"expected {' or '.join(f'{d}D' for d in self._dims)} input (got "
                             f"{input.ndim}D input)")

    def forward(self, input):
        self._check_input_dim(input)
        if input.shape[1] != self.num_features:
            raise RuntimeError(f"{type(self).__name__}: expected input with {self.num_features} "
                               f"channels (dim 1), got size {list(input.shape)}")
        momentum = 0.0 if self.momentum is None else self.momentum
        if self.training and self.track_running_stats:
            self.num_batches_tracked.add_(1)
            if self.momentum is None:  # a cumulative moving average
                momentum = 1.0 / float(self.num_batches_tracked.item())
        # batch statistics when training, or when there are no running ones
        use_batch = self.training or not self.track_running_stats
        return self._normalize(input, use_batch, momentum)

    def _normalize(self, input, use_batch, momentum):
        return F.batch_norm(input, self.running_mean, self.running_var, self.weight, self.bias,
                            use_batch, momentum, self.eps)

    def extra_repr(self):
        return (f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, "
                f"affine={self.affine}, track_running_stats={self.track_running_stats}")


class BatchNorm1d(_BatchNorm):
    """Over (N, C) or (N, C, L) input."""
    _dims = (2, 3)


class BatchNorm2d(_BatchNorm):
    """Over (N, C, H, W) input."""
    _dims = (4,)


class BatchNorm3d(_BatchNorm):
    """Over (N, C, D, H, W) input."""
    _dims = (5,)


class _InstanceNorm(_BatchNorm):
    """Per (sample, channel) statistics over the spatial dims; by default no
    affine and no running statistics (PyTorch's defaults)."""
    _spatial = 1

    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=False, track_running_stats=False,
                 device=None, dtype=None):
        super().__init__(num_features, eps, momentum, affine, track_running_stats, device, dtype)

    def forward(self, input):
        batched = self._spatial + 2
        if input.ndim not in (batched, batched - 1):
            raise ValueError(f"expected {batched - 1}D or {batched}D input (got {input.ndim}D input)")
        x = input if input.ndim == batched else input.unsqueeze(0)
        if x.shape[1] != self.num_features and self.affine:
            raise ValueError(f"expected input's size at dim=1 to match num_features ({self.num_features}), but got: "
                             f"{x.shape[1]}.")
        use_input_stats = self.training or not self.track_running_stats
        y = F.instance_norm(x, self.running_mean, self.running_var, self.weight, self.bias, use_input_stats,
                            0.1 if self.momentum is None else self.momentum, self.eps)
        return y if input.ndim == batched else y.squeeze(0)


class InstanceNorm1d(_InstanceNorm):
    _spatial = 1


class InstanceNorm2d(_InstanceNorm):
    _spatial = 2


class InstanceNorm3d(_InstanceNorm):
    _spatial = 3


class GroupNorm(Module):
    """Normalises num_groups groups of channels per sample (F.group_norm)."""

    def __init__(self, num_groups, num_channels, eps=1e-5, affine=True, device=None, dtype=None):
        super().__init__()
        if num_channels % num_groups:
            raise ValueError("num_channels must be divisible by num_groups")
        self.num_groups, self.num_channels, self.eps, self.affine = num_groups, num_channels, eps, affine
        if affine:
            self.weight = Parameter(_creation.ones(num_channels, dtype=dtype))
            self.bias = Parameter(_creation.zeros(num_channels, dtype=dtype))
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)

    def forward(self, input):
        return F.group_norm(input, self.num_groups, self.weight, self.bias, self.eps)

    def extra_repr(self):
        return f"{self.num_groups}, {self.num_channels}, eps={self.eps}, affine={self.affine}"


class LocalResponseNorm(Module):
    def __init__(self, size, alpha=1e-4, beta=0.75, k=1.0):
        super().__init__()
        self.size, self.alpha, self.beta, self.k = size, alpha, beta, k

    def forward(self, input):
        return F.local_response_norm(input, self.size, self.alpha, self.beta, self.k)

    def extra_repr(self):
        return f"{self.size}, alpha={self.alpha}, beta={self.beta}, k={self.k}"


class CrossMapLRN2d(Module):
    """The legacy (Lua Torch) cross-channel LRN: x * (k + alpha / size *
    S_c) ** -beta, S_c a running sum of squares over channels, computed as
    PyTorch's does, quirk included: its window reaches size // 2 + 1
    channels ahead and (size - 1) // 2 behind, and channel 0, once in, is
    never taken out (so it differs from LocalResponseNorm)."""

    def __init__(self, size, alpha=1e-4, beta=0.75, k=1):
        super().__init__()
        self.size, self.alpha, self.beta, self.k = size, alpha, beta, k

    def forward(self, input):
        if input.ndim != 4:
            raise ValueError(f"CrossMapLRN2d: Expected input to be 4D, got {input.ndim}D instead.")
        channels = input.shape[1]
        pre_pad = int((self.size - 1) / 2 + 1)
        square = input * input
        # prefix[k]: the sum of the squares of channels below k
        prefix = _creation.zeros_like(square[:, :1]).expand(-1, channels + 1, -1, -1).clone()
        prefix[:, 1:] = square.cumsum(1)
        c = _creation.arange(channels)
        high = (c + pre_pad - 1).clamp(max=channels - 1) + 1
        low = (c - pre_pad + 1).clamp(min=1)
        # channel 0, plus channels low .. high-1 (empty when low >= high)
        window = prefix.index_select(1, high) - prefix.index_select(1, _ops.minimum(low, high))
        scale = window + square[:, :1]
        return input * (scale * (self.alpha / self.size) + self.k).pow(-self.beta)

    def extra_repr(self):
        return f"{self.size}, alpha={self.alpha}, beta={self.beta}, k={self.k}"
