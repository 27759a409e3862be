"""group_norm, instance_norm and local_response_norm, in ember ops (the
statistics are reductions, the rest elementwise, so the fuser and autograd
see ordinary ops)."""

from ..autograd import no_grad


def _affine(x, weight, bias):
    """x * weight + bias, both per channel (dim 1)."""
    shape = (1, -1) + (1,) * (x.ndim - 2)
    if weight is not None:
        x = x * weight.reshape(shape)
    if bias is not None:
        x = x + bias.reshape(shape)
    return x


def group_norm(input, num_groups, weight=None, bias=None, eps=1e-5):
    """Normalises each sample's channels in num_groups groups (over the
    group's channels and all spatial positions), then the per-channel affine."""
    if input.ndim < 2:
        raise RuntimeError(f"group_norm: expected at least 2 dims (N, C, ...), got {tuple(input.shape)}")
    n, c = input.shape[0], input.shape[1]
    if c % num_groups:
        raise RuntimeError(f"Expected number of channels in input to be divisible by num_groups, but got input of "
                           f"shape {list(input.shape)} and num_groups={num_groups}")
    g = input.reshape(n, num_groups, input.numel() // (n * num_groups) if n else c // num_groups)
    mean = g.mean(-1, keepdim=True)
    var = g.var(-1, unbiased=False, keepdim=True)
    y = ((g - mean) / (var + eps).sqrt()).reshape(input.shape)
    return _affine(y, weight, bias)


def instance_norm(input, running_mean=None, running_var=None, weight=None, bias=None, use_input_stats=True,
                  momentum=0.1, eps=1e-5):
    """Normalises each (sample, channel) over its spatial positions; with
    running statistics, updates them from the batch (use_input_stats) or
    normalises with them."""
    if input.ndim < 3:
        raise ValueError(f"instance_norm: expected an input with a batch, channel and spatial dims, got "
                         f"{tuple(input.shape)}")
    dims = tuple(range(2, input.ndim))
    shape = (1, -1) + (1,) * (input.ndim - 2)
    if use_input_stats:
        mean = input.mean(dims, keepdim=True)
        var = input.var(dims, unbiased=False, keepdim=True)
        if running_mean is not None:
            with no_grad():
                n = 1
                for d in dims:
                    n *= input.shape[d]
                running_mean.mul_(1 - momentum).add_(mean.mean(0).reshape(-1) * momentum)
                unbiased = var * (n / max(n - 1, 1))
                running_var.mul_(1 - momentum).add_(unbiased.mean(0).reshape(-1) * momentum)
    else:
        mean, var = running_mean.reshape(shape), running_var.reshape(shape)
    return _affine((input - mean) / (var + eps).sqrt(), weight, bias)


def local_response_norm(input, size, alpha=1e-4, beta=0.75, k=1.0):
    """x / (k + alpha * mean of x^2 over the size neighbouring channels)^beta."""
    from .functional import avg_pool2d, avg_pool3d, pad
    if input.ndim < 3:
        raise ValueError(f"Expected 3D or higher dimensionality input (got {input.ndim} dimensions)")
    if input.numel() == 0:
        return input
    div = (input * input).unsqueeze(1)
    if input.ndim == 3:
        div = pad(div, (0, 0, size // 2, (size - 1) // 2))
        div = avg_pool2d(div, (size, 1), stride=1).squeeze(1)
    else:
        sizes = input.shape
        div = div.reshape(sizes[0], 1, sizes[1], sizes[2], -1)
        div = pad(div, (0, 0, 0, 0, size // 2, (size - 1) // 2))
        div = avg_pool3d(div, (size, 1, 1), stride=1).squeeze(1)
        div = div.reshape(sizes)
    return input / (div * alpha + k) ** beta
