"""More of nn.functional (issue 40, item 3), PyTorch's definitions in
ember's ops: max_unpool1d/2d/3d (the adjoint of max_pool's indices),
lp_pool1d/2d, channel_shuffle, gumbel_softmax, pdist, the *_with_indices
spellings of the max pools, the deprecated upsample_nearest and
upsample_bilinear, and the multi_margin, multilabel_margin and
triplet_margin_with_distance losses."""

import numbers
import warnings

from .. import _creation, _ops


def _tuple(v, n):
    return tuple(v) if isinstance(v, (tuple, list)) else (v,) * n


def _max_unpool(input, indices, kernel_size, stride, padding, output_size, n, name):
    k = _tuple(kernel_size, n)
    s = _tuple(stride if stride is not None else kernel_size, n)
    p = _tuple(padding, n)
    spatial = tuple(input.shape[-n:])
    default = tuple((spatial[i] - 1) * s[i] - 2 * p[i] + k[i] for i in range(n))
    if output_size is None:
        out = default
    else:
        out = tuple(output_size)[-n:]
        for i in range(n):
            lo, hi = default[i] - s[i], default[i] + s[i]
            if not lo < out[i] < hi:
                raise ValueError(f"{name}: invalid output_size {tuple(output_size)} (dim {i} must be between "
                                 f"{lo + 1} and {hi - 1})")
    if tuple(indices.shape) != tuple(input.shape):
        raise RuntimeError(f"{name}: Expected shape of indices to be same as that of the input tensor "
                           f"({tuple(input.shape)}) but got indices tensor with shape: {tuple(indices.shape)}")
    lead = tuple(input.shape[:-n])
    plane = 1
    for d in out:
        plane *= d
    flat = input.reshape(lead + (-1,))
    idx = indices.reshape(lead + (-1,))
    top = int(idx.max().item()) if flat.shape[-1] else -1
    if top >= plane:
        raise RuntimeError(f"{name}: Found an invalid max index {top} (output volumes are of size "
                           f"{'x'.join(map(str, out))})")
    zeros = _creation.zeros(*(lead + (plane,)), dtype=input.dtype)
    return zeros.scatter(-1, idx, flat).reshape(lead + out)


def max_unpool1d(input, indices, kernel_size, stride=None, padding=0, output_size=None):
    return _max_unpool(input, indices, kernel_size, stride, padding, output_size, 1, "max_unpool1d")


def max_unpool2d(input, indices, kernel_size, stride=None, padding=0, output_size=None):
    return _max_unpool(input, indices, kernel_size, stride, padding, output_size, 2, "max_unpool2d")


def max_unpool3d(input, indices, kernel_size, stride=None, padding=0, output_size=None):
    return _max_unpool(input, indices, kernel_size, stride, padding, output_size, 3, "max_unpool3d")


def lp_pool1d(input, norm_type, kernel_size, stride=None, ceil_mode=False):
    """(sum over each window of x^p)^(1/p)."""
    from .functional import avg_pool1d
    k = kernel_size if isinstance(kernel_size, numbers.Integral) else kernel_size[0]
    out = avg_pool1d(input.pow(norm_type), kernel_size, stride, 0, ceil_mode)
    return (out.sign() * out.abs().relu()).mul(k).pow(1.0 / norm_type)


def lp_pool2d(input, norm_type, kernel_size, stride=None, ceil_mode=False):
    from .functional import avg_pool2d
    kw, kh = _tuple(kernel_size, 2)
    out = avg_pool2d(input.pow(norm_type), kernel_size, stride, 0, ceil_mode)
    return (out.sign() * out.abs().relu()).mul(kw * kh).pow(1.0 / norm_type)


def channel_shuffle(input, groups):
    """The channels (dim 1) regrouped: (g, c/g) -> (c/g, g)."""
    n, c = input.shape[0], input.shape[1]
    if c % groups:
        raise RuntimeError(f"Number of channels must be divisible by groups. Got {c} channels and {groups} groups.")
    rest = tuple(input.shape[2:])
    return input.reshape((n, groups, c // groups) + rest).transpose(1, 2).reshape((n, c) + rest)


native_channel_shuffle = channel_shuffle


def gumbel_softmax(logits, tau=1.0, hard=False, eps=1e-10, dim=-1):
    """softmax((logits + g) / tau), g Gumbel noise; hard: the one-hot of its
    argmax, with the soft sample's gradient (straight-through)."""
    u = _creation.rand(*logits.shape, dtype=logits.dtype, device=logits.device)
    gumbels = -(-(u.clamp(min=1e-20)).log()).log()  # (-log of an exponential draw)
    y = ((logits + gumbels) / tau).softmax(dim)
    if not hard:
        return y
    index = y.argmax(dim, keepdim=True)
    y_hard = _creation.zeros_like(logits).scatter(dim, index, 1.0)
    return y_hard - y.detach() + y


def pdist(input, p=2):
    """The p-norm distances between the rows of a 2-d input, i < j, in
    row-major order."""
    if input.ndim != 2:
        raise RuntimeError(f"pdist only supports 2D tensors, got: {input.ndim}D")
    n = input.shape[0]
    from .. import triu_indices
    i, j = triu_indices(n, n, 1)
    from ..linalg import vector_norm
    return vector_norm(input[i] - input[j], p, -1)


def _with_indices(fn):
    def pool(*args, **kwargs):
        kwargs["return_indices"] = True
        return fn(*args, **kwargs)
    pool.__name__ = fn.__name__ + "_with_indices"
    return pool


def upsample_nearest(input, size=None, scale_factor=None):
    """Deprecated: interpolate(mode='nearest')."""
    warnings.warn("nn.functional.upsample_nearest is deprecated. Use nn.functional.interpolate instead.")
    from .functional import interpolate
    return interpolate(input, size, scale_factor, mode="nearest")


def upsample_bilinear(input, size=None, scale_factor=None):
    """Deprecated: interpolate(mode='bilinear', align_corners=True)."""
    warnings.warn("nn.functional.upsample_bilinear is deprecated. Use nn.functional.interpolate instead.")
    from .functional import interpolate
    return interpolate(input, size, scale_factor, mode="bilinear", align_corners=True)


def multi_margin_loss(input, target, p=1, margin=1.0, weight=None, size_average=None, reduce=None,
                      reduction="mean"):
    """sum over i != y of max(0, margin - x[y] + x[i])^p / C, per sample."""
    from .functional import _reduce
    if p not in (1, 2):
        raise ValueError("only p == 1 and p == 2 supported")
    x = input if input.ndim == 2 else input.reshape(1, -1)
    t = target.reshape(-1, 1)
    c = x.shape[1]
    xy = x.gather(1, t)
    m = (margin - xy + x).relu()
    if p == 2:
        m = m * m
    if weight is not None:
        m = m * weight[t]
    not_y = _creation.arange(c).reshape(1, -1) != t
    loss = (m * not_y).sum(1) / c
    loss = loss if input.ndim == 2 else loss.reshape(())
    return _reduce(loss, reduction, "multi_margin_loss")


def multilabel_margin_loss(input, target, size_average=None, reduce=None, reduction="mean"):
    """For each sample: sum over its target classes j (target's entries up
    to the first -1) and the other classes i of max(0, 1 - (x[j] - x[i])) / C."""
    from .functional import _reduce
    x = input if input.ndim == 2 else input.reshape(1, -1)
    t = target if target.ndim == 2 else target.reshape(1, -1)
    c = x.shape[1]
    valid = (t >= 0).long().cumprod(1).bool()  # (entries before the first -1)
    tj = _ops.where(valid, t, _creation.zeros_like(t))
    is_target = _creation.zeros(*x.shape, dtype=x.dtype, device=x.device).scatter_add(1, tj, valid.to(x.dtype)) > 0
    xj = x.gather(1, tj)  # (n, c): the target classes' scores, slot by slot
    diff = (1.0 - (xj.unsqueeze(2) - x.unsqueeze(1))).relu()  # (n, slot, class)
    mask = valid.unsqueeze(2) & ~is_target.unsqueeze(1)
    loss = (diff * mask).sum((1, 2)) / c
    loss = loss if input.ndim == 2 else loss.reshape(())
    return _reduce(loss, reduction, "multilabel_margin_loss")


def triplet_margin_with_distance_loss(anchor, positive, negative, *, distance_function=None, margin=1.0,
                                      swap=False, reduction="mean"):
    """max(d(a, p) - d(a, n) + margin, 0) for any distance function
    (pairwise_distance by default)."""
    from ._losses import pairwise_distance
    from .functional import _reduce
    d = distance_function or pairwise_distance
    d_ap, d_an = d(anchor, positive), d(anchor, negative)
    if swap:
        d_an = _ops.minimum(d_an, d(positive, negative))
    return _reduce((d_ap - d_an + margin).clamp(min=0), reduction, "triplet_margin_with_distance_loss")
