"""Fractional max pooling (Graham, 2014), as PyTorch's
F.fractional_max_pool2d and 3d: windows of kernel_size whose starts follow
a pseudo-random sequence per (batch, channel) plane, so that outputs of
output_size (or input size times output_ratio) cover the input.

The sequence for a dim of input size n, output size m and window k, from a
sample u in [0, 1): start_i = floor((i + u) a) - floor(u a) with a = (n -
k) / (m - 1), and the last start n - k (PyTorch's generate_intervals).
Samples come from _random_samples, or ember's random stream (N, C, dims),
the first for the last dim (2-d: width, then height; 3-d: time, height,
width, as PyTorch assigns them). The windows are gathered from the
flattened planes and reduced by max, so the gradient reaches each window's
maximum, as PyTorch's does.
"""

from .. import _C, _creation, _ops


def _prod(values):
    out = 1
    for v in values:
        out *= v
    return out


def _starts(sample, n, m, k):
    """(N, C, m) window starts along one dim, from samples (N, C)."""
    if m == 1:
        return _creation.full(tuple(sample.shape) + (1,), n - k, dtype=_C.int64, device=sample.device)
    alpha = (n - k) / (m - 1)
    i = _creation.arange(m - 1, dtype=sample.dtype)
    u = sample.unsqueeze(-1)
    head = ((i + u) * alpha).floor() - (u * alpha).floor()
    last = _creation.full(tuple(sample.shape) + (1,), n - k, dtype=sample.dtype, device=sample.device)
    return _ops.cat([head, last], -1).to(_C.int64)


def _out_sizes(name, input, dims, kernel, output_size, output_ratio):
    sizes = list(input.shape[-dims:])
    if output_size is not None:
        out = [output_size] * dims if isinstance(output_size, int) else list(output_size)
    elif output_ratio is not None:
        ratio = [output_ratio] * dims if isinstance(output_ratio, (int, float)) else list(output_ratio)
        out = [int(s * r) for s, r in zip(sizes, ratio)]
    else:
        raise ValueError(f"{name} requires specifying either an output_size or an output_ratio")
    for s, o, k in zip(sizes, out, kernel):
        if o + k - 1 > s:
            raise RuntimeError(f"{name}(): pool size {k} too large relative to input size {s} for output size {o}")
    return sizes, out


def _fractional_max_pool(name, dims, input, kernel_size, output_size, output_ratio, return_indices,
                         _random_samples):
    kernel = [kernel_size] * dims if isinstance(kernel_size, int) else list(kernel_size)
    batched = input.ndim == dims + 2
    if input.ndim not in (dims + 1, dims + 2):
        raise RuntimeError(f"{name}(): expected {dims + 1}D or {dims + 2}D input, got {input.ndim}D")
    x = input if batched else input.unsqueeze(0)
    n, c = x.shape[0], x.shape[1]
    sizes, out = _out_sizes(name, x, dims, kernel, output_size, output_ratio)
    samples = _random_samples if _random_samples is not None else _creation.rand(n, c, dims, dtype=x.dtype)
    if tuple(samples.shape) != (n, c, dims):
        raise RuntimeError(f"{name}(): expected _random_samples of shape {(n, c, dims)}, got "
                           f"{tuple(samples.shape)}")
    # the sample each dim uses: 2-d takes (width, height), 3-d (time, height, width)
    order = [1, 0] if dims == 2 else [0, 1, 2]
    flat_index = None
    for d in range(dims):
        starts = _starts(samples[..., order[d]].to(x.dtype), sizes[d], out[d], kernel[d])  # (N, C, out_d)
        pos = starts.unsqueeze(-1) + _creation.arange(kernel[d])  # (N, C, out_d, k_d)
        # as (N, C, out..., k...) with this dim's entries only, times its stride
        view = pos.reshape([n, c] + [out[d] if e == d else 1 for e in range(dims)] +
                           [kernel[d] if e == d else 1 for e in range(dims)])
        stride = 1
        for size in sizes[d + 1:]:
            stride *= size
        term = view * stride
        flat_index = term if flat_index is None else flat_index + term
    # (sizes counted, not -1: a zero-size batch leaves -1 ambiguous)
    n_out, n_kernel, n_in = _prod(out), _prod(kernel), _prod(sizes)
    flat_index = flat_index.expand([n, c] + out + kernel).reshape(n, c, n_out * n_kernel)
    windows = x.reshape(n, c, n_in).gather(2, flat_index).reshape([n, c] + out + [n_kernel])
    values, which = windows.max(-1)
    indices = flat_index.reshape([n, c] + out + [n_kernel]).gather(-1, which.unsqueeze(-1)).squeeze(-1)
    if not batched:
        values, indices = values.squeeze(0), indices.squeeze(0)
    return (values, indices) if return_indices else values


def fractional_max_pool2d(input, kernel_size, output_size=None, output_ratio=None, return_indices=False,
                          _random_samples=None):
    """Fractional max pooling over the last two dims of (N, C, H, W) or (C, H, W)."""
    return _fractional_max_pool("fractional_max_pool2d", 2, input, kernel_size, output_size, output_ratio,
                                return_indices, _random_samples)


def fractional_max_pool3d(input, kernel_size, output_size=None, output_ratio=None, return_indices=False,
                          _random_samples=None):
    """Fractional max pooling over the last three dims of (N, C, T, H, W) or (C, T, H, W)."""
    return _fractional_max_pool("fractional_max_pool3d", 3, input, kernel_size, output_size, output_ratio,
                                return_indices, _random_samples)


fractional_max_pool2d_with_indices = fractional_max_pool2d
fractional_max_pool3d_with_indices = fractional_max_pool3d
