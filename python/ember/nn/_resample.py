"""Resampling by index: pad's reflect/replicate/circular modes,
interpolate (nearest, nearest-exact, linear, bilinear, bicubic, trilinear,
area), grid_sample (bilinear or trilinear, nearest, bicubic; zeros, border, reflection) and
pixel_shuffle/unshuffle.

Every one is index_select / gather at indices computed here once (host
integers for the separable ones, tensors for grid_sample) and a weighted
sum, so autograd, double backward and the compiler come from those ops:
index_select's gradient is index_add, gather's is scatter-add."""

import math

import numpy as np

from .. import _C, _ops
from .._creation import arange, tensor


def _index(idx, device=None):
    return tensor(idx, dtype=_C.int64, device=device)


# ---------------------------------------------------------------- pad

def _pad_index(n, before, after, mode, dim):
    if mode == "reflect" and (before >= n or after >= n):
        raise RuntimeError(f"Argument #4: Padding size should be less than the corresponding input dimension, but "
                           f"got: padding ({before}, {after}) at dimension {dim} of input {n}")
    if mode == "circular" and (before > n or after > n):
        raise RuntimeError(f"Padding value causes wrapping around more than once (padding ({before}, {after}) of a "
                           f"dim of {n})")
    if n == 0:
        raise RuntimeError(f"{mode} padding of an empty dim (dim {dim})")
    idx = []
    for j in range(-before, n + after):
        if mode == "reflect":
            k = -j if j < 0 else (2 * (n - 1) - j if j >= n else j)
        elif mode == "replicate":
            k = min(max(j, 0), n - 1)
        else:  # circular
            k = j % n
        idx.append(k)
    return idx


def pad_by_index(input, pad, mode):
    """pad for mode reflect, replicate or circular: the last len(pad) // 2
    dims, (left, right) of the last first. A negative amount crops: the
    output's positions map to the input's by the same rule, so reflections
    are taken about the input's own edges, as PyTorch's are (circular
    padding crops first and wraps around what is left, as PyTorch's does)."""
    if len(pad) // 2 + 1 > input.ndim:
        raise NotImplementedError(f"pad: mode={mode!r} pads at most the {input.ndim - 1} last dims of a "
                                  f"{input.ndim}-d input (there must be a batch or channel dim before them)")
    out = input
    for k in range(len(pad) // 2):
        dim = input.ndim - 1 - k
        before, after = int(pad[2 * k]), int(pad[2 * k + 1])
        if mode == "circular" and (before < 0 or after < 0):  # (PyTorch wraps around what is left)
            lo, hi = max(-before, 0), max(-after, 0)
            out = out.narrow(dim, lo, out.shape[dim] - lo - hi)
            before, after = max(before, 0), max(after, 0)
        if before or after:
            out = out.index_select(dim, _index(_pad_index(out.shape[dim], before, after, mode, dim), out.device))
    return out


# ---------------------------------------------------------------- interpolate

_MODES = {"nearest": None, "nearest-exact": None, "linear": 1, "bilinear": 2, "bicubic": 2, "trilinear": 3,
          "area": None}


def _out_sizes(input, size, scale_factor, recompute):
    spatial = input.ndim - 2
    if (size is None) == (scale_factor is None):
        raise ValueError("only one of size or scale_factor should be defined")
    if size is not None:
        sizes = [int(size)] * spatial if isinstance(size, int) else [int(s) for s in size]
        if len(sizes) != spatial:
            raise ValueError(f"Input and output must have the same number of spatial dimensions, but got input with "
                             f"spatial dimensions of {list(input.shape[2:])} and output size of {sizes}.")
        return sizes, [None] * spatial
    scales = [float(scale_factor)] * spatial if isinstance(scale_factor, (int, float)) else \
        [float(s) for s in scale_factor]
    if len(scales) != spatial:
        raise ValueError(f"Input and scale_factor must have the same number of spatial dimensions, but got input "
                         f"with spatial dimensions of {list(input.shape[2:])} and scale_factor of shape {scales}.")
    sizes = [int(math.floor(n * s)) for n, s in zip(input.shape[2:], scales)]
    return sizes, [None] * spatial if recompute else scales


def _src_scale(n_in, n_out, align_corners, scale):
    """PyTorch's area_pixel_compute_scale."""
    if align_corners:
        return (n_in - 1) / (n_out - 1) if n_out > 1 else 0.0
    return 1.0 / scale if scale is not None and scale > 0 else n_in / n_out


def _taps(mode, n_in, n_out, align_corners, scale):
    """[(indices, weights)] per tap along one dim: the output is the sum over
    taps of x[indices] * weights."""
    s = _src_scale(n_in, n_out, align_corners, scale)
    if mode in ("nearest", "nearest-exact"):  # in float32, as PyTorch computes these indices
        off = np.float32(0.5 if mode == "nearest-exact" else 0.0)
        ns = np.float32(1.0 / scale if scale is not None and scale > 0 else n_in / n_out)
        return [([min(int(np.floor((np.float32(d) + off) * ns)), n_in - 1) for d in range(n_out)], None)]
    srcs = []
    for d in range(n_out):
        x = d * s if align_corners else s * (d + 0.5) - 0.5
        srcs.append(x)
    if mode == "bicubic":
        a = -0.75
        idx, wts = [[], [], [], []], [[], [], [], []]
        for x in srcs:
            i = math.floor(x)
            t = x - i
            w = [((a * (t + 1) - 5 * a) * (t + 1) + 8 * a) * (t + 1) - 4 * a,
                 ((a + 2) * t - (a + 3)) * t * t + 1,
                 ((a + 2) * (1 - t) - (a + 3)) * (1 - t) * (1 - t) + 1,
                 ((a * (2 - t) - 5 * a) * (2 - t) + 8 * a) * (2 - t) - 4 * a]
            for k in range(4):
                idx[k].append(min(max(i - 1 + k, 0), n_in - 1))
                wts[k].append(w[k])
        return list(zip(idx, wts))
    i0s, i1s, w0s, w1s = [], [], [], []
    for x in srcs:
        x = max(x, 0.0) if not align_corners else x
        i0 = min(int(math.floor(x)), n_in - 1)
        i1 = i0 + 1 if i0 < n_in - 1 else i0
        w1 = x - i0
        i0s.append(i0)
        i1s.append(i1)
        w0s.append(1.0 - w1)
        w1s.append(w1)
    return [(i0s, w0s), (i1s, w1s)]


def interpolate(input, size=None, scale_factor=None, mode="nearest", align_corners=None,
                recompute_scale_factor=None, antialias=False):
    """Resizes the spatial dims (all but batch and channel) by size or
    scale_factor, as torch.nn.functional.interpolate."""
    if mode not in _MODES:
        raise NotImplementedError(f"interpolate: mode={mode!r} is not implemented (ember has "
                                  f"{', '.join(_MODES)})")
    if antialias:
        raise NotImplementedError("interpolate: antialias=True is not implemented in ember")
    if align_corners is not None and mode in ("nearest", "nearest-exact", "area"):
        raise ValueError("align_corners option can only be set with the interpolating modes: linear | bilinear | "
                         "bicubic | trilinear")
    need = _MODES[mode]
    if need is not None and input.ndim != need + 2:
        raise NotImplementedError(f"Got {input.ndim}D input, but {mode} mode needs {need + 2}D input")
    if input.ndim < 3 or input.ndim > 5:
        raise NotImplementedError(f"Input Error: Only 3D, 4D and 5D input Tensors supported (got {input.ndim}D)")
    sizes, scales = _out_sizes(input, size, scale_factor, recompute_scale_factor)
    if mode == "area":
        from ._windows import adaptive_avg_pool1d, adaptive_avg_pool2d, adaptive_avg_pool3d
        return (adaptive_avg_pool1d, adaptive_avg_pool2d, adaptive_avg_pool3d)[input.ndim - 3](input, sizes)
    out = input
    for k, (n_out, scale) in enumerate(zip(sizes, scales)):
        dim = 2 + k
        n_in = out.shape[dim]
        if n_out == n_in and scale in (None, 1.0) and mode in ("nearest", "nearest-exact"):
            continue
        acc = None
        for idx, w in _taps(mode, n_in, n_out, bool(align_corners), scale):
            part = out.index_select(dim, _index(idx, out.device))
            if w is not None:
                shape = [1] * out.ndim
                shape[dim] = n_out
                part = part * tensor(w, dtype=out.dtype, device=out.device).reshape(shape)
            acc = part if acc is None else acc + part
        out = acc
    return out


# ---------------------------------------------------------------- grid_sample

def _unnormalize(coord, n, align_corners):
    return (coord + 1) / 2 * (n - 1) if align_corners else ((coord + 1) * n - 1) / 2


def _reflect(x, lo, hi):
    """Reflects x into [lo, hi] (twice the span is a period)."""
    span = hi - lo
    if span <= 0:
        return x * 0 + lo
    x = (x - lo).abs()
    flips = (x / span).floor()
    extra = x - flips * span
    even = (flips % 2) == 0
    return _ops.where(even, extra + lo, span - extra + lo)


def _source(coord, n, padding_mode, align_corners):
    x = _unnormalize(coord, n, align_corners)
    if padding_mode == "border":
        x = x.clamp(0, n - 1)
    elif padding_mode == "reflection":
        x = _reflect(x, 0, n - 1) if align_corners else _reflect(x, -0.5, n - 0.5)
        x = x.clamp(0, n - 1)
    return x


def _cubic_weights(t):
    """Keys' cubic convolution weights (A = -0.75, PyTorch's) of the four
    taps at offsets -1, 0, 1, 2 from floor(x), for t = x - floor(x)."""
    a = -0.75

    def near(d):
        return ((a + 2) * d - (a + 3)) * d * d + 1

    def far(d):
        return ((a * d - 5 * a) * d + 8 * a) * d - 4 * a
    return [far(t + 1), near(t), near(1 - t), far(2 - t)]


def grid_sample(input, grid, mode="bilinear", padding_mode="zeros", align_corners=None):
    """Samples input (N, C, H, W) at grid (N, Ho, Wo, 2), or (N, C, D, H, W)
    at (N, Do, Ho, Wo, 3); the grid's last dim holds x (width), y (height)
    and z (depth) in [-1, 1]. mode: bilinear (trilinear for 5-d), nearest,
    or bicubic (4-d inputs, as PyTorch's)."""
    if mode not in ("bilinear", "nearest", "bicubic"):
        raise ValueError(f"nn.functional.grid_sample(): expected mode to be 'bilinear', 'nearest' or 'bicubic', "
                         f"but got: '{mode}'")
    if padding_mode not in ("zeros", "border", "reflection"):
        raise ValueError(f"nn.functional.grid_sample(): expected padding_mode to be 'zeros', 'border', or "
                         f"'reflection', but got: '{padding_mode}'")
    if input.ndim not in (4, 5):
        raise RuntimeError(f"grid_sampler(): expected 4D or 5D input and grid with same number of dimensions, "
                           f"but got input with sizes {list(input.shape)}")
    if mode == "bicubic" and input.ndim != 4:
        raise RuntimeError("grid_sampler(): bicubic interpolation only supports 4D input")
    spatial = input.ndim - 2
    if grid.ndim != input.ndim or grid.shape[-1] != spatial or grid.shape[0] != input.shape[0]:
        raise RuntimeError(f"grid_sample(): expected grid of shape (N, *out, {spatial}) for input "
                           f"{tuple(input.shape)}, got {tuple(grid.shape)}")
    align = bool(align_corners)
    n, c = input.shape[0], input.shape[1]
    sizes = list(input.shape[2:])  # (D,) H, W
    out_sizes = list(grid.shape[1:-1])
    count = 1
    for k in out_sizes:
        count *= k
    flat = input.reshape(n, c, -1)
    # the coordinates per input dim, outermost first (the grid lists x first)
    coords = [grid[..., spatial - 1 - d] for d in range(spatial)]

    def tap(idx):
        """input at integer positions idx (one per dim), 0 outside it."""
        inside, lin = None, None
        for k, (i, size) in enumerate(zip(idx, sizes)):
            ok = (i >= 0) & (i <= size - 1)
            inside = ok if inside is None else inside & ok
            ci = i.clamp(0, size - 1)
            lin = ci if lin is None else lin * size + ci
        lin = lin.to(_C.int64).reshape(n, 1, count).expand(n, c, count)
        v = flat.gather(2, lin).reshape(n, c, *out_sizes)
        return v * inside.to(input.dtype).unsqueeze(1)

    if mode == "bicubic":
        return _grid_bicubic(coords, sizes, tap, padding_mode, align)
    src = [_source(x, size, padding_mode, align) for x, size in zip(coords, sizes)]
    if mode == "nearest":
        return tap([x.round() for x in src])
    lows = [x.floor() for x in src]
    fracs = [(x - lo).unsqueeze(1) for x, lo in zip(src, lows)]
    out = None
    for corner in range(2 ** spatial):  # every corner of the cell, its weight the product of the dims'
        idx, weight = [], None
        for d in range(spatial):
            up = (corner >> (spatial - 1 - d)) & 1
            idx.append(lows[d] + up)
            w = fracs[d] if up else 1 - fracs[d]
            weight = w if weight is None else weight * w
        term = tap(idx) * weight
        out = term if out is None else out + term
    return out


def _grid_bicubic(coords, sizes, tap, padding_mode, align):
    """Bicubic grid sampling as PyTorch's: the coordinates unnormalised
    without padding, sixteen taps around floor(x), each tap's position
    clipped or reflected by the padding mode (zeros: 0 outside)."""
    (y, x), (h, w) = coords, sizes
    ix, iy = _unnormalize(x, w, align), _unnormalize(y, h, align)
    x0, y0 = ix.floor(), iy.floor()
    wx, wy = _cubic_weights((ix - x0).unsqueeze(1)), _cubic_weights((iy - y0).unsqueeze(1))

    def bounded(i, size):
        if padding_mode == "border":
            return i.clamp(0, size - 1)
        if padding_mode == "reflection":
            r = _reflect(i, 0, size - 1) if align else _reflect(i, -0.5, size - 0.5)
            return r.clamp(0, size - 1)
        return i
    out = None
    for j in range(4):
        yj = bounded(y0 - 1 + j, h)
        for i in range(4):
            term = tap([yj, bounded(x0 - 1 + i, w)]) * (wy[j] * wx[i])
            out = term if out is None else out + term
    return out


def affine_grid(theta, size, align_corners=None):
    """The (N, H, W, 2) grid of theta (N, 2, 3) applied to the normalised
    coordinates of an image of size (N, C, H, W)."""
    if len(size) != 4 or theta.ndim != 3 or tuple(theta.shape[1:]) != (2, 3):
        raise NotImplementedError(f"affine_grid: only 2-d (theta (N, 2, 3), size (N, C, H, W)) is implemented, "
                                  f"got theta {tuple(theta.shape)} and size {list(size)}")
    n, _, h, w = size

    def lin(k):
        if k == 1:
            return tensor([0.0], dtype=theta.dtype, device=theta.device)
        v = arange(k, dtype=theta.dtype, device=theta.device) * (2.0 / (k - 1)) - 1
        return v if align_corners else v * ((k - 1) / k)
    xs, ys = lin(w), lin(h)
    base = _ops.stack([xs.reshape(1, w).expand(h, w), ys.reshape(h, 1).expand(h, w),
                       tensor(1.0, dtype=theta.dtype, device=theta.device).expand(h, w)], -1)  # (H, W, 3)
    return (base.reshape(1, h * w, 3) @ theta.transpose(1, 2)).reshape(n, h, w, 2)


# ---------------------------------------------------------------- pixel shuffle

def pixel_shuffle(input, upscale_factor):
    """(*, C r^2, H, W) -> (*, C, H r, W r)."""
    r = int(upscale_factor)
    *lead, c, h, w = input.shape
    if c % (r * r):
        raise RuntimeError(f"pixel_shuffle expects its input's 'channel' dimension to be divisible by the square of "
                           f"upscale_factor, but input.size(-3)={c} is not divisible by {r * r}")
    x = input.reshape(*lead, c // (r * r), r, r, h, w)
    k = len(lead)
    x = x.permute(*range(k), k, k + 3, k + 1, k + 4, k + 2)
    return x.reshape(*lead, c // (r * r), h * r, w * r)


def pixel_unshuffle(input, downscale_factor):
    """(*, C, H r, W r) -> (*, C r^2, H, W)."""
    r = int(downscale_factor)
    *lead, c, h, w = input.shape
    if h % r or w % r:
        raise RuntimeError(f"pixel_unshuffle expects height and width to be divisible by downscale_factor, got "
                           f"{h} x {w} and {r}")
    x = input.reshape(*lead, c, h // r, r, w // r, r)
    k = len(lead)
    x = x.permute(*range(k), k, k + 2, k + 4, k + 1, k + 3)
    return x.reshape(*lead, c * r * r, h // r, w // r)
