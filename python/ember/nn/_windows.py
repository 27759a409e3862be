"""Convolution, pooling, unfold and fold: PyTorch's functions over the
sliding-window ops of the op table (runtime/cpu/conv.c, pool.c, window.c).

Each function is one op (a compiled graph holds one node per layer), and
each op's gradient is another (conv_transpose and conv_weight for conv,
max_pool_grad for the max pools, ...). This layer only turns PyTorch's
arguments into the ops' attributes: one value per spatial dim, padding
before and after each dim, unbatched inputs given a batch of one. The
ops check every size and name what does not fit."""

import numbers

from .. import _C, _memory_format

_IDS = _C._op_ids()


def _pair(v, n=2, what="argument"):
    if isinstance(v, numbers.Integral):
        return (int(v),) * n
    v = tuple(int(x) for x in v)
    if len(v) == 1:
        return v * n
    if len(v) != n:
        raise ValueError(f"{what} must be an int or a tuple of {n} ints, got {v}")
    return v


def _window(op, tensors, kernel=(), stride=(), padding=(), dilation=(), groups=1, ceil_mode=False,
            count_include_pad=True, divisor=0, shape=(), layout=None):
    return _C._window(_IDS[op], tensors, list(kernel), list(stride), list(padding), list(dilation),
                      int(groups), bool(ceil_mode), bool(count_include_pad), int(divisor or 0),
                      list(shape), layout)


def _batched(input, nd, what):
    """(input with a batch dim, whether one was added): PyTorch takes an
    unbatched (C, spatial...) input too."""
    if input.ndim == nd + 1:
        return input.unsqueeze(0), True
    if input.ndim != nd + 2:
        raise RuntimeError(f"{what}: expected {nd + 1}D (unbatched) or {nd + 2}D (batched) input, "
                           f"but got input of size: {list(input.shape)}")
    return input, False


def _unbatch(out, added):
    if not added:
        return out
    if isinstance(out, tuple):
        return tuple(o.squeeze(0) for o in out)
    return out.squeeze(0)


# ---------------------------------------------------------------- convolution

def _same_padding(kernel, dilation, stride, what):
    """'same': the total d * (k - 1) split, the odd one out at the end (as
    PyTorch pads)."""
    if any(s != 1 for s in stride):
        raise RuntimeError(f"{what}: padding='same' is not supported for strided convolutions")
    total = [d * (k - 1) for d, k in zip(dilation, kernel)]
    return [t // 2 for t in total] + [t - t // 2 for t in total]


def _conv(nd, input, weight, bias, stride, padding, dilation, groups):
    what = f"conv{nd}d"
    x, added = _batched(input, nd, what)
    if weight.ndim != nd + 2:
        raise RuntimeError(f"{what}: expected a {nd + 2}-d weight, got size {list(weight.shape)}")
    stride = _pair(stride, nd, "stride")
    dilation = _pair(dilation, nd, "dilation")
    kernel = tuple(weight.shape[2:])
    if isinstance(padding, str):
        if padding == "valid":
            pads = [0] * (2 * nd)
        elif padding == "same":
            pads = _same_padding(kernel, dilation, stride, what)
        else:
            raise RuntimeError(f"{what}: invalid padding string {padding!r}, should be one of "
                               f"{{'valid', 'same'}}")
    else:
        pads = list(_pair(padding, nd, "padding")) * 2
    tensors = [x, weight] if bias is None else [x, weight, bias]
    out = _window("conv", tensors, stride=stride, padding=pads, dilation=dilation, groups=groups,
                  layout=_result_layout(nd, x, weight))
    return _unbatch(out, added)


def _result_layout(nd, x, weight):
    """conv's result layout: channels-last where PyTorch 1.13 keeps it (a
    2-d convolution whose input or weight is channels-last; its conv3d and
    transposed convolutions return row-major results), else row-major
    (None). The kernel reads any channels-last input in place either way."""
    if nd != 2 or (x.is_contiguous() and weight.is_contiguous()):
        return None
    last = _memory_format.channels_last
    if _memory_format.suggest(x) is last or _memory_format.suggest(weight) is last:
        return [0, 2, 3, 1]
    return None


def conv1d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """1-d convolution (cross-correlation, as in PyTorch) over (N, C, L)."""
    return _conv(1, input, weight, bias, stride, padding, dilation, groups)


def conv2d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """2-d convolution over (N, C, H, W): one op, im2col and a GEMM per
    sample and group."""
    return _conv(2, input, weight, bias, stride, padding, dilation, groups)


def conv3d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """3-d convolution over (N, C, D, H, W)."""
    return _conv(3, input, weight, bias, stride, padding, dilation, groups)


def _conv_transpose(nd, input, weight, bias, stride, padding, output_padding, groups, dilation,
                    output_size=None):
    what = f"conv_transpose{nd}d"
    x, added = _batched(input, nd, what)
    if weight.ndim != nd + 2:
        raise RuntimeError(f"{what}: expected a {nd + 2}-d weight, got size {list(weight.shape)}")
    if isinstance(padding, str):
        raise ValueError(f"{what}: padding must be an int or a tuple, not {padding!r}")
    stride, dilation = _pair(stride, nd, "stride"), _pair(dilation, nd, "dilation")
    pad, extra = _pair(padding, nd, "padding"), _pair(output_padding, nd, "output_padding")
    kernel = weight.shape[2:]
    size = [(i - 1) * s - 2 * p + d * (k - 1) + 1
            for i, s, p, d, k in zip(x.shape[2:], stride, pad, dilation, kernel)]
    if output_size is not None:  # ConvTranspose's forward(x, output_size): the extra it implies
        want = [int(v) for v in output_size][-nd:]
        extra = tuple(w - s for w, s in zip(want, size))
    for e, s, d in zip(extra, stride, dilation):
        if not 0 <= e < max(s, d):
            raise RuntimeError(f"{what}: output padding must be smaller than either stride or "
                               f"dilation, got output_padding={list(extra)}, "
                               f"stride={list(stride)}, dilation={list(dilation)}")
    shape = [x.shape[0], weight.shape[1] * groups] + [s + e for s, e in zip(size, extra)]
    tensors = [x, weight] if bias is None else [x, weight, bias]
    out = _window("conv_transpose", tensors, stride=stride, padding=list(pad) * 2,
                  dilation=dilation, groups=groups, shape=shape)
    return _unbatch(out, added)


def conv_transpose1d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1,
                     dilation=1):
    return _conv_transpose(1, input, weight, bias, stride, padding, output_padding, groups, dilation)


def conv_transpose2d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1,
                     dilation=1):
    """The adjoint of conv2d in its input (the gradient conv2d's input gets):
    weight is (C_in, C_out / groups, kH, kW)."""
    return _conv_transpose(2, input, weight, bias, stride, padding, output_padding, groups, dilation)


def conv_transpose3d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1,
                     dilation=1):
    return _conv_transpose(3, input, weight, bias, stride, padding, output_padding, groups, dilation)


# ---------------------------------------------------------------- unfold, fold

def unfold(input, kernel_size, dilation=1, padding=0, stride=1):
    """Sliding blocks as columns: (N, C*kH*kW, L) for a (N, C, H, W) input,
    (C*kH*kW, L) for an unbatched (C, H, W) one."""
    if input.ndim not in (3, 4):
        raise NotImplementedError(f"unfold: only 3D or 4D input tensors are supported, got "
                                  f"{input.ndim}D")
    x, added = _batched(input, 2, "unfold")
    out = _window("unfold", [x], kernel=_pair(kernel_size, 2, "kernel_size"),
                  stride=_pair(stride, 2, "stride"), padding=list(_pair(padding, 2, "padding")) * 2,
                  dilation=_pair(dilation, 2, "dilation"))
    return _unbatch(out, added)


def fold(input, output_size, kernel_size, dilation=1, padding=0, stride=1):
    """The adjoint of unfold: (N, C*kH*kW, L) blocks summed into (N, C, H,
    W) of output_size (overlaps add)."""
    if input.ndim not in (2, 3):
        raise NotImplementedError(f"fold: only 2D or 3D input tensors are supported, got "
                                  f"{input.ndim}D")
    x = input.unsqueeze(0) if input.ndim == 2 else input
    k = _pair(kernel_size, 2, "kernel_size")
    size = _pair(output_size, 2, "output_size")
    if x.shape[1] % (k[0] * k[1]):
        raise RuntimeError(f"fold: expected size of input's dimension 1 to be divisible by the "
                           f"product of kernel_size, but got input.size(1)={x.shape[1]} and "
                           f"kernel_size={list(k)}")
    shape = [x.shape[0], x.shape[1] // (k[0] * k[1])] + list(size)
    out = _window("fold", [x], kernel=k, stride=_pair(stride, 2, "stride"),
                  padding=list(_pair(padding, 2, "padding")) * 2,
                  dilation=_pair(dilation, 2, "dilation"), shape=shape)
    return out.squeeze(0) if input.ndim == 2 else out


# ---------------------------------------------------------------- pooling

def _pool_args(nd, kernel_size, stride, padding):
    k = _pair(kernel_size, nd, "kernel_size")
    s = k if stride is None or (not isinstance(stride, numbers.Integral) and len(stride) == 0) \
        else _pair(stride, nd, "stride")
    return k, s, list(_pair(padding, nd, "padding")) * 2


def _max_pool(nd, input, kernel_size, stride, padding, dilation, ceil_mode, return_indices):
    what = f"max_pool{nd}d"
    x, added = _batched(input, nd, what)
    k, s, p = _pool_args(nd, kernel_size, stride, padding)
    out = _window("max_pool", [x], kernel=k, stride=s, padding=p,
                  dilation=_pair(dilation, nd, "dilation"), ceil_mode=ceil_mode)
    out = _unbatch(out, added)
    return out if return_indices else out[0]


def max_pool1d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
               return_indices=False):
    return _max_pool(1, input, kernel_size, stride, padding, dilation, ceil_mode, return_indices)


def max_pool2d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
               return_indices=False):
    """The max of each window (a NaN wins); with return_indices also where
    it is, as an index into the input's H*W plane."""
    return _max_pool(2, input, kernel_size, stride, padding, dilation, ceil_mode, return_indices)


def max_pool3d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
               return_indices=False):
    return _max_pool(3, input, kernel_size, stride, padding, dilation, ceil_mode, return_indices)


def _avg_pool(nd, input, kernel_size, stride, padding, ceil_mode, count_include_pad,
              divisor_override):
    what = f"avg_pool{nd}d"
    x, added = _batched(input, nd, what)
    k, s, p = _pool_args(nd, kernel_size, stride, padding)
    if divisor_override is not None and int(divisor_override) == 0:
        raise RuntimeError(f"{what}: divisor must be not zero")
    out = _window("avg_pool", [x], kernel=k, stride=s, padding=p, ceil_mode=ceil_mode,
                  count_include_pad=count_include_pad, divisor=divisor_override or 0)
    return _unbatch(out, added)


def avg_pool1d(input, kernel_size, stride=None, padding=0, ceil_mode=False,
               count_include_pad=True):
    return _avg_pool(1, input, kernel_size, stride, padding, ceil_mode, count_include_pad, None)


def avg_pool2d(input, kernel_size, stride=None, padding=0, ceil_mode=False,
               count_include_pad=True, divisor_override=None):
    return _avg_pool(2, input, kernel_size, stride, padding, ceil_mode, count_include_pad,
                     divisor_override)


def avg_pool3d(input, kernel_size, stride=None, padding=0, ceil_mode=False,
               count_include_pad=True, divisor_override=None):
    return _avg_pool(3, input, kernel_size, stride, padding, ceil_mode, count_include_pad,
                     divisor_override)


def _adaptive_size(nd, x, output_size, what):
    """Output sizes; None (for all, or for one) keeps the input's size."""
    if output_size is None or isinstance(output_size, numbers.Integral):
        output_size = (output_size,) * nd
    output_size = tuple(output_size)
    if len(output_size) == 1 and nd > 1:
        output_size = output_size * nd
    if len(output_size) != nd:
        raise ValueError(f"{what}: output_size must be an int or a tuple of {nd}, got "
                         f"{output_size}")
    return [size if o is None else int(o) for o, size in zip(output_size, x.shape[2:])]


def _adaptive(op, nd, input, output_size, what):
    x, added = _batched(input, nd, what)
    shape = list(x.shape[:2]) + _adaptive_size(nd, x, output_size, what)
    return _unbatch(_window(op, [x], shape=shape), added)


def adaptive_avg_pool1d(input, output_size):
    return _adaptive("adaptive_avg_pool", 1, input, output_size, "adaptive_avg_pool1d")


def adaptive_avg_pool2d(input, output_size):
    """Averages over PyTorch's adaptive windows: cell i of n covers
    [floor(i*H/n), ceil((i+1)*H/n))."""
    return _adaptive("adaptive_avg_pool", 2, input, output_size, "adaptive_avg_pool2d")


def adaptive_avg_pool3d(input, output_size):
    return _adaptive("adaptive_avg_pool", 3, input, output_size, "adaptive_avg_pool3d")


def adaptive_max_pool1d(input, output_size, return_indices=False):
    out = _adaptive("adaptive_max_pool", 1, input, output_size, "adaptive_max_pool1d")
    return out if return_indices else out[0]


def adaptive_max_pool2d(input, output_size, return_indices=False):
    out = _adaptive("adaptive_max_pool", 2, input, output_size, "adaptive_max_pool2d")
    return out if return_indices else out[0]


def adaptive_max_pool3d(input, output_size, return_indices=False):
    out = _adaptive("adaptive_max_pool", 3, input, output_size, "adaptive_max_pool3d")
    return out if return_indices else out[0]
