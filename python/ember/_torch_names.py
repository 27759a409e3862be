"""torch's top-level names that other spellings of ember's functions cover
(issue 40, item 3): the in-place function forms (torch.abs_(x) is
x.abs_()), the *_copy forms of the views (a view's values in memory of
their own), the constants, torch's own signatures of functions nn.functional
spells otherwise (reductions given as integers, torch.lstm's flat weights),
deprecated aliases, and the switches scripts set at the top (deterministic
algorithms, matmul precision, printing, anomaly detection).
"""

import builtins
import math
import warnings

from . import _C, _creation, _ops
from ._tensor import Tensor
from .nn import functional as _F

_NAMES = {}


def _name(fn, name=None):
    _NAMES[name or fn.__name__] = fn
    return fn


# ---------------------------------------------------------------- in-place forms

_INPLACE = ("abs_ acos_ acosh_ addmv_ arccos_ arccosh_ arcsin_ arcsinh_ arctan_ arctanh_ asin_ asinh_ atan_ "
            "atanh_ ceil_ clamp_ clamp_max_ clamp_min_ clip_ cos_ cosh_ deg2rad_ detach_ erf_ erfc_ exp2_ exp_ "
            "expm1_ fill_ fix_ floor_ frac_ gcd_ i0_ index_put_ lcm_ ldexp_ log10_ log1p_ log2_ log_ logit_ "
            "nan_to_num_ neg_ negative_ rad2deg_ reciprocal_ round_ rsqrt_ sigmoid_ sin_ sinc_ sinh_ sqrt_ "
            "square_ tan_ tanh_ trunc_ xlogy_ relu_ selu_ celu_").split()


def _inplace_function(name):
    def fn(input, *args, **kwargs):
        return getattr(input, name)(*args, **kwargs)
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"torch.{name}(input, ...): input.{name}(...), in place."
    return fn


def _method_inplace(name, out_of_place):
    """Tensor.<name> in place from the out-of-place method (copy_ back)."""
    def method(self, *args, **kwargs):
        return self.copy_(getattr(self, out_of_place)(*args, **kwargs))
    method.__name__ = method.__qualname__ = name
    return method


for _alias, _target in (("arccos_", "acos"), ("arcsin_", "asin"), ("arctan_", "atan"), ("logit_", "logit"),
                        ("sinc_", "sinc"), ("xlogy_", "xlogy")):
    if not hasattr(Tensor, _alias):
        setattr(Tensor, _alias, _method_inplace(_alias, _target))


for _n in _INPLACE:
    _name(_inplace_function(_n))


# ---------------------------------------------------------------- *_copy

def _copy_of(view_name, fn):
    def copy(input, *args, **kwargs):
        out = fn(input, *args, **kwargs)
        if isinstance(out, (list, tuple)):
            return type(out)(t.clone() for t in out)
        return out.clone()
    copy.__name__ = copy.__qualname__ = view_name + "_copy"
    copy.__doc__ = f"torch.{view_name}_copy: {view_name}'s result in memory of its own."
    return copy


def _slice(input, dim=0, start=None, end=None, step=1):
    sel = [builtins.slice(None)] * input.ndim
    sel[dim] = builtins.slice(start, end, step)
    return input[tuple(sel)]


_VIEWS = {
    "alias": lambda x: x.view(tuple(x.shape)),
    "as_strided": lambda x, *a, **k: x.as_strided(*a, **k),
    "detach": lambda x: x.detach(),
    "diagonal": lambda x, *a, **k: x.diagonal(*a, **k),
    "expand": lambda x, *a, **k: x.expand(*a, **k),
    "permute": lambda x, *a, **k: x.permute(*a, **k),
    "select": lambda x, *a, **k: x.select(*a, **k),
    "slice": _slice,
    "split": lambda x, *a, **k: x.split(*a, **k),
    "split_with_sizes": lambda x, *a, **k: x.split_with_sizes(*a, **k),
    "squeeze": lambda x, *a, **k: x.squeeze(*a, **k),
    "t": lambda x: x.t(),
    "transpose": lambda x, *a, **k: x.transpose(*a, **k),
    "unbind": lambda x, *a, **k: x.unbind(*a, **k),
    "unfold": lambda x, *a, **k: x.unfold(*a, **k),
    "unsqueeze": lambda x, *a, **k: x.unsqueeze(*a, **k),
    "view": lambda x, *a, **k: x.view(*a, **k),
}
for _view, _fn in _VIEWS.items():
    _name(_copy_of(_view, _fn))


# ---------------------------------------------------------------- constants

_NAMES.update(e=math.e, pi=math.pi, inf=math.inf, nan=math.nan)


# ---------------------------------------------------------------- functions under torch's own signatures

def clone(input, *, memory_format=None):
    return input.clone(memory_format=memory_format)


def detach(input):
    return input.detach()


def fill(input, value):
    """A tensor of input's shape and dtype filled with value."""
    return _creation.full_like(input, value.item() if isinstance(value, Tensor) else value)


def t(input):
    return input.t()


def index_put(input, indices, values, accumulate=False):
    return input.index_put(indices, values, accumulate)


def adjoint(input):
    """The conjugate transpose of the last two dims (the transpose, for real
    tensors), as a view."""
    return input.transpose(-2, -1)


def chain_matmul(*matrices):
    """The product of the matrices (deprecated: linalg.multi_dot)."""
    from .linalg import multi_dot
    mats = matrices[0] if len(matrices) == 1 and isinstance(matrices[0], (list, tuple)) else matrices
    if len(mats) == 1:
        return mats[0].clone()
    return multi_dot(list(mats))


def frobenius_norm(input, dim=None, keepdim=False):
    """The Frobenius (2-)norm over dim (all of input when dim is None)."""
    if dim is None:
        return (input * input).sum().sqrt()
    dims = (dim,) if isinstance(dim, int) else tuple(dim)
    return (input * input).sum(dims, keepdim=keepdim).sqrt()


def nuclear_norm(input, dim=None, keepdim=False):
    """The sum of the singular values over the matrices in dims (the last two)."""
    from .linalg import matrix_norm
    if isinstance(dim, bool):
        dim, keepdim = None, dim
    return matrix_norm(input, "nuc", dim=tuple(dim) if dim is not None else (-2, -1), keepdim=keepdim)


def norm_except_dim(v, pow=2, dim=0):
    """The pow-norm of v over every dim but dim, shaped to broadcast against
    v (weight normalisation's); dim=-1 is the norm of all of v."""
    if dim == -1:
        return v.norm(pow)
    d = dim % v.ndim
    dims = [k for k in builtins.range(v.ndim) if k != d]
    return v.abs().pow(pow).sum(dims, keepdim=True).pow(1.0 / pow)


def range(start, end, step=1, *, dtype=None, device=None, requires_grad=False, **_):
    """Points from start to end inclusive, step apart (deprecated: arange
    stops before end)."""
    warnings.warn("torch.range is deprecated and will be removed in a future release because its behavior is "
                  "inconsistent with Python's range builtin. Instead, use torch.arange, which produces values in "
                  "[start, end).")
    n = int(math.floor((end - start) / step)) + 1
    out = _creation.arange(builtins.max(n, 0), dtype=_C.float64) * step + start
    out = out.to(dtype or _creation.get_default_dtype())
    return out.requires_grad_() if requires_grad else out


def scalar_tensor(s, *, dtype=None, device=None, requires_grad=False, **_):
    """A 0-d tensor of s (float32 by default, as torch's, even for ints)."""
    out = _creation.tensor(s, dtype=dtype or _creation.get_default_dtype())
    return out.requires_grad_() if requires_grad else out


def typename(obj):
    """Tensors by their type name, as x.type() spells it ('ember.FloatTensor');
    anything else by its module-qualified class name."""
    if isinstance(obj, Tensor):
        return obj.type()
    module = getattr(type(obj), "__module__", "")
    return (module + "." if module and module != "builtins" else "") + type(obj).__qualname__


def get_device(input):
    """-1 for CPU tensors, the device index for CUDA ones."""
    return input.get_device()


def is_storage(obj):
    return False


def unsafe_chunk(input, chunks, dim=0):
    return input.chunk(chunks, dim)


def unsafe_split(tensor, split_size_or_sections, dim=0):
    return tensor.split(split_size_or_sections, dim)


def unsafe_split_with_sizes(input, split_sizes, dim=0):
    return input.split_with_sizes(split_sizes, dim)


def convolution(input, weight, bias, stride, padding, dilation, transposed, output_padding, groups):
    """ATen's convolution: conv{1,2,3}d or their transposes by input's rank."""
    from .nn import functional as F
    nd = input.ndim - 2
    if transposed:
        fn = getattr(F, f"conv_transpose{nd}d")
        return fn(input, weight, bias, stride, padding, output_padding, groups, dilation)
    return getattr(F, f"conv{nd}d")(input, weight, bias, stride, padding, dilation, groups)


def poisson(input, generator=None):
    """Poisson samples, each element of input its own rate: rates below 10
    by the inverse of the distribution function (40 terms: the rest is
    below 1e-12), larger ones by Hoermann's transformed rejection (PTRS),
    redrawn until every element is accepted."""
    from .special import gammaln
    lam = input.double()
    small = lam < 10
    ls = _ops.where(small, lam, _creation.ones_like(lam))
    u = _creation.rand(*lam.shape, dtype=_C.float64, generator=generator, device=lam.device)
    term = (-ls).exp()
    cdf, count = term, _creation.zeros_like(lam)
    for k in builtins.range(1, 40):
        count = count + (u > cdf).to(lam.dtype)
        term = term * ls / k
        cdf = cdf + term
    out = _ops.where(small, count, _creation.zeros_like(lam))
    big = ~small & (lam > 0)
    if builtins.bool(big.any()):
        lb = _ops.where(big, lam, _creation.full_like(lam, 10.0))
        slam, loglam = lb.sqrt(), lb.log()
        b = 0.931 + 2.53 * slam
        a = -0.059 + 0.02483 * b
        invalpha = 1.1239 + 1.1328 / (b - 3.4)
        vr = 0.9277 - 3.6224 / (b - 2)
        pending = big
        while builtins.bool(pending.any()):
            U = _creation.rand(*lam.shape, dtype=_C.float64, generator=generator, device=lam.device) - 0.5
            V = _creation.rand(*lam.shape, dtype=_C.float64, generator=generator, device=lam.device)
            us = 0.5 - U.abs()
            k = ((2 * a / us + b) * U + lb + 0.43).floor()
            quick = (us >= 0.07) & (V <= vr)
            test = (V.log() + invalpha.log() - (a / (us * us) + b).log()) <= (-lb + k * loglam - gammaln(k + 1))
            ok = pending & (quick | ((k >= 0) & ~((us < 0.013) & (V > us)) & test))
            out = _ops.where(ok, k, out)
            pending = pending & ~ok
    return out.to(input.dtype)


def binomial(count, prob, generator=None):
    """Binomial samples of count trials of probability prob: Bernoulli
    trials summed, drawn a block of trials at a time so memory stays a few
    times the output's."""
    count, prob = _ops.broadcast_tensors(count, prob)
    n = int(count.max().item()) if count.numel() else 0
    total = _creation.zeros(*count.shape, dtype=_C.float64, device=count.device)
    block = builtins.max(1, (1 << 22) // builtins.max(1, count.numel()))
    for first in builtins.range(0, n, block):
        m = builtins.min(block, n - first)
        draws = _creation.rand(*((m,) + tuple(count.shape)), dtype=prob.dtype, generator=generator) < prob
        k = _creation.arange(first, first + m).reshape((m,) + (1,) * count.ndim)
        total = total + (draws & (k < count)).sum(0).to(_C.float64)
    return total.to(count.dtype)


def _removed(name, replacement):
    def fn(*args, **kwargs):
        raise RuntimeError(f"This function was deprecated since version 1.9 and is now removed. Please use the "
                           f"`torch.linalg.{replacement}` function instead.")
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"Removed in PyTorch 1.9 (use linalg.{replacement}); raises as PyTorch 1.13 does."
    return fn


for _fn in (clone, detach, fill, t, index_put, adjoint, chain_matmul, frobenius_norm, nuclear_norm, norm_except_dim,
            range, scalar_tensor, typename, get_device, is_storage, unsafe_chunk, unsafe_split,
            unsafe_split_with_sizes, convolution, poisson, binomial, _F.conv_tbc):
    _name(_fn)
for _old, _new in (("solve", "solve"), ("lstsq", "lstsq"), ("eig", "eig"), ("matrix_rank", "matrix_rank")):
    _name(_removed(_old, _new))


# ---------------------------------------------------------------- torch's functional forms of nn

_REDUCTIONS = {0: "none", 1: "mean", 2: "sum"}


def _reduction(r):
    return _REDUCTIONS[r] if isinstance(r, int) else r


def binary_cross_entropy_with_logits(input, target, weight=None, pos_weight=None, reduction=1):
    from .nn.functional import binary_cross_entropy_with_logits as f
    return f(input, target, weight, reduction=_reduction(reduction), pos_weight=pos_weight)


def cosine_embedding_loss(input1, input2, target, margin=0.0, reduction=1):
    from .nn.functional import cosine_embedding_loss as f
    return f(input1, input2, target, margin, reduction=_reduction(reduction))


def hinge_embedding_loss(input, target, margin=1.0, reduction=1):
    from .nn.functional import hinge_embedding_loss as f
    return f(input, target, margin, reduction=_reduction(reduction))


def margin_ranking_loss(input1, input2, target, margin=0.0, reduction=1):
    from .nn.functional import margin_ranking_loss as f
    return f(input1, input2, target, margin, reduction=_reduction(reduction))


def kl_div(input, target, reduction=1, *, log_target=False):
    from .nn.functional import kl_div as f
    return f(input, target, reduction=_reduction(reduction), log_target=log_target)


def poisson_nll_loss(input, target, log_input, full, eps, reduction):
    from .nn.functional import poisson_nll_loss as f
    return f(input, target, log_input, full, eps=eps, reduction=_reduction(reduction))


def triplet_margin_loss(anchor, positive, negative, margin=1.0, p=2.0, eps=1e-6, swap=False, reduction=1):
    from .nn.functional import triplet_margin_loss as f
    return f(anchor, positive, negative, margin, p, eps, swap, reduction=_reduction(reduction))


def ctc_loss(log_probs, targets, input_lengths, target_lengths, blank=0, reduction=1, zero_infinity=False):
    from .nn.functional import ctc_loss as f
    return f(log_probs, targets, input_lengths, target_lengths, blank, _reduction(reduction), zero_infinity)


def batch_norm(input, weight, bias, running_mean, running_var, training, momentum, eps, cudnn_enabled=True):
    from .nn.functional import batch_norm as f
    return f(input, running_mean, running_var, weight, bias, training, momentum, eps)


def instance_norm(input, weight, bias, running_mean, running_var, use_input_stats, momentum, eps,
                  cudnn_enabled=True):
    from .nn.functional import instance_norm as f
    return f(input, running_mean, running_var, weight, bias, use_input_stats, momentum, eps)


def embedding(weight, indices, padding_idx=-1, scale_grad_by_freq=False, sparse=False):
    from .nn.functional import embedding as f
    return f(indices, weight, None if padding_idx == -1 else padding_idx, None, 2.0, scale_grad_by_freq, sparse)


def native_dropout(input, p, train):
    """(output, keep mask) of dropout."""
    if not train or p == 0:
        return input.clone(), _creation.ones(tuple(input.shape), dtype=_C.bool, device=input.device)
    keep = _creation.rand(*input.shape, dtype=input.dtype, device=input.device) >= p
    scale = 0.0 if p >= 1 else 1.0 / (1.0 - p)
    return input * keep.to(input.dtype) * scale, keep


def feature_dropout(input, p, train):
    from .nn.functional import dropout2d
    return dropout2d(input, p, train)


def feature_dropout_(input, p, train):
    from .nn.functional import dropout2d
    return dropout2d(input, p, train, True)


_MODES = {0: "bilinear", 1: "nearest", 2: "bicubic"}
_PADDINGS = {0: "zeros", 1: "border", 2: "reflection"}


def grid_sampler(input, grid, interpolation_mode, padding_mode, align_corners):
    """nn.functional.grid_sample with its modes as ATen's integers."""
    from .nn.functional import grid_sample
    return grid_sample(input, grid, _MODES[interpolation_mode], _PADDINGS[padding_mode], align_corners)


def affine_grid_generator(theta, size, align_corners):
    from .nn.functional import affine_grid
    return affine_grid(theta, size, align_corners)


def native_group_norm(input, weight, bias, N, C, HxW, group, eps):
    """(out, mean, rstd) of group_norm, the statistics (N, group)."""
    from .nn.functional import group_norm
    out = group_norm(input, group, weight, bias, eps)
    g = input.reshape(N, group, -1)
    return out, g.mean(-1).detach(), (g.var(-1, unbiased=False) + eps).rsqrt().detach()


def max_pool1d_with_indices(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False):
    from .nn.functional import max_pool1d
    return max_pool1d(input, kernel_size, stride, padding, dilation, ceil_mode, return_indices=True)


def adaptive_max_pool1d(input, output_size):
    """(output, indices), as torch's."""
    from .nn.functional import adaptive_max_pool1d as f
    return f(input, output_size, return_indices=True)


for _fn in (binary_cross_entropy_with_logits, cosine_embedding_loss, hinge_embedding_loss, margin_ranking_loss,
            kl_div, poisson_nll_loss, triplet_margin_loss, ctc_loss, batch_norm, instance_norm, embedding,
            native_dropout, feature_dropout, feature_dropout_, grid_sampler, affine_grid_generator, native_group_norm,
            max_pool1d_with_indices, adaptive_max_pool1d):
    _name(_fn)
_name(grid_sampler, "grid_sampler_2d")
_name(grid_sampler, "grid_sampler_3d")


def embedding_renorm_(input, indices, max_norm, norm_type):
    """Rescales, in place, each row of input that indices names whose
    norm_type-norm exceeds max_norm to max_norm / (norm + 1e-7) times it
    (what embedding(max_norm=...) does first); returns input."""
    from .nn.functional import _embedding_renorm_
    return _embedding_renorm_(input, indices.reshape(-1), max_norm, norm_type)


_BAG_MODES = {0: "sum", 1: "mean", 2: "max"}


def embedding_bag(weight, indices, offsets, scale_grad_by_freq=False, mode=0, sparse=False,
                  per_sample_weights=None, include_last_offset=False, padding_idx=None):
    """ATen's embedding_bag: (output, offset2bag, bag_size, max_indices),
    output as nn.functional.embedding_bag's. The three index tensors, each
    bag's: offset2bag each index's bag (PyTorch's float32 sum-mode path
    leaves it empty), bag_size how many non-padding indices it holds (zeros
    in sum mode), max_indices in max mode the row each output element came
    from (bag_size in mean mode, zeros in sum mode). They have one entry per
    bag (PyTorch 1.13's differ with include_last_offset, and its max mode
    there corrupts its heap)."""
    import numpy as np
    from .nn._embedding_bag import _bags
    from .nn.functional import embedding_bag as f
    name = _BAG_MODES.get(mode, mode)
    out = f(indices, weight, offsets, None, 2, scale_grad_by_freq, name, sparse, per_sample_weights,
            include_last_offset, padding_idx)
    bag_ids, bags = _bags(indices, offsets, include_last_offset)
    idx = indices.reshape(-1).long().numpy()
    bag = bag_ids.numpy()
    keep = np.ones(idx.shape, bool) if padding_idx is None else idx != padding_idx % weight.shape[0]
    size = np.bincount(bag[keep], minlength=bags)[:bags]
    as_tensor = _creation.tensor
    if name == "sum":
        zeros = _creation.zeros(bags, dtype=_C.int64)
        return out, as_tensor(bag, dtype=_C.int64), zeros, zeros.clone()
    if name == "mean":
        return out, as_tensor(bag, dtype=_C.int64), as_tensor(size, dtype=_C.int64), as_tensor(size, dtype=_C.int64)
    w = weight.detach().numpy()
    arg = np.zeros((bags, weight.shape[1]), np.int64)
    for b in builtins.range(bags):
        rows = idx[(bag == b) & keep]
        if rows.size:
            arg[b] = rows[np.argmax(w[rows], axis=0)]
    return out, as_tensor(bag, dtype=_C.int64), as_tensor(size, dtype=_C.int64), as_tensor(arg, dtype=_C.int64)


def is_distributed(input):
    """Whether input is a distributed (torch.distributed RPC) tensor: never."""
    return False


def to_dlpack(tensor):
    """A DLPack capsule sharing tensor's memory (ember.from_dlpack reads it back)."""
    return tensor.__dlpack__()


def frombuffer(buffer, *, dtype, count=-1, offset=0, requires_grad=False):
    """A 1-d tensor sharing the memory of an object with the buffer
    protocol: count elements of dtype (all that fit when -1) from byte
    offset. Writes through either show in the other; a read-only buffer
    (bytes) warns, as PyTorch does, and must not be written."""
    import numpy as np
    view = memoryview(buffer)
    if view.readonly:
        warnings.warn("frombuffer: the given buffer is not writable, and ember does not support non-writable "
                      "tensors: writing to this tensor writes to the buffer. Copy it first (bytearray(buffer)) "
                      "to protect its data.", stacklevel=2)
    size = dtype.itemsize
    nbytes = view.nbytes
    if offset < 0 or offset > nbytes or (count == -1 and (nbytes - offset) % size):
        raise ValueError(f"frombuffer: the buffer's length minus offset ({nbytes - offset} bytes) must be a "
                         f"multiple of the element size ({size})")
    n = (nbytes - offset) // size if count == -1 else count
    if n <= 0 or offset + n * size > nbytes:
        raise ValueError(f"frombuffer: requested {n} elements of {size} bytes from offset {offset}, but the "
                         f"buffer holds {nbytes} bytes")
    raw = np.frombuffer(view.cast("B"), dtype=np.uint8, count=n * size, offset=offset)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # (from_numpy's own warning about the same read-only memory)
        out = _C.from_numpy(raw).view(dtype)
    return out.requires_grad_() if requires_grad else out


def from_file(filename, shared=None, size=0, *, dtype=None, layout=None, device=None, pin_memory=False,
              requires_grad=False):
    """size elements of dtype (the default float dtype) read from filename.
    shared=True maps the file: the tensor's memory is the file's, and writes
    go to it (the file must hold size elements); otherwise they are read
    into memory of its own."""
    import numpy as np
    dtype = dtype or _creation.get_default_dtype()
    nbytes = size * dtype.itemsize
    have = __import__("os").path.getsize(filename)
    if have < nbytes:
        raise RuntimeError(f"from_file: file {filename!r} holds {have} bytes, fewer than the {nbytes} bytes of "
                           f"{size} elements of {dtype}")
    if shared:
        raw = np.memmap(filename, dtype=np.uint8, mode="r+", shape=(nbytes,)) if nbytes else np.zeros(0, np.uint8)
    else:
        raw = np.fromfile(filename, dtype=np.uint8, count=nbytes)
    out = _C.from_numpy(raw).view(dtype)
    return out.requires_grad_() if requires_grad else out


def as_strided_(input, size, stride, storage_offset=None):
    return input.as_strided_(size, stride, storage_offset)


def conj_physical_(input):
    """The conjugate, in place: real tensors are their own."""
    return input


for _fn in (embedding_renorm_, embedding_bag, is_distributed, to_dlpack, frombuffer, from_file, as_strided_,
            conj_physical_):
    _name(_fn)


class DisableTorchFunction:
    """Context manager turning __torch_function__ dispatch off: ember's
    functions never dispatch on it, so there is nothing to turn off."""

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


class classproperty:
    """A read-only property of the class itself (torch's helper)."""

    def __init__(self, fn):
        self.fn = fn

    def __get__(self, obj, cls=None):
        return self.fn(cls if cls is not None else type(obj))


def get_file_path(*path_components):
    """A path inside the installed ember package (torch.get_file_path)."""
    import os
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), *path_components)


def cudnn_is_acceptable(tensor):
    """Whether cuDNN could take this tensor: never (ember does not use cuDNN)."""
    return False


for _fn in (DisableTorchFunction, classproperty, get_file_path, cudnn_is_acceptable):
    _name(_fn)


# ---------------------------------------------------------------- the recurrent layers' functional forms

def _rnn_layer(mode, input, hx, params, has_biases, num_layers, dropout, train, bidirectional, batch_first):
    """torch.lstm/gru/rnn_tanh/rnn_relu: an RNN module of the given settings
    over the flat weight list, as cuDNN orders it (each layer and direction:
    w_ih, w_hh[, b_ih, b_hh])."""
    from .nn.modules.rnn import RNNBase
    params = list(params)
    per = 4 if has_biases else 2
    dirs = 2 if bidirectional else 1
    gate = params[0].shape[0] // {"LSTM": 4, "GRU": 3}.get(mode, 1)
    module = RNNBase.__new__(RNNBase)
    from .nn.modules.module import Module
    Module.__init__(module)
    module.mode, module.input_size, module.hidden_size, module.num_layers = mode, input.shape[-1], gate, num_layers
    module.bias, module.batch_first, module.dropout = has_biases, batch_first, float(dropout)
    module.bidirectional, module.proj_size = bidirectional, 0
    module.training = train
    module._names = []
    for k in builtins.range(num_layers * dirs):
        names = [f"p{k}_{j}" for j in builtins.range(per)]
        for n, p in zip(names, params[k * per:(k + 1) * per]):
            module.__dict__[n] = p
        module._names.append(names)
    return module


def lstm(input, hx, params, has_biases, num_layers, dropout, train, bidirectional, batch_first):
    """(output, h_n, c_n) of an LSTM over the flat weights params."""
    m = _rnn_layer("LSTM", input, hx, params, has_biases, num_layers, dropout, train, bidirectional, batch_first)
    out, (h, c) = m.forward(input, tuple(hx))
    return out, h, c


def _single_state(mode):
    def fn(input, hx, params, has_biases, num_layers, dropout, train, bidirectional, batch_first):
        m = _rnn_layer(mode, input, hx, params, has_biases, num_layers, dropout, train, bidirectional,
                       batch_first)
        return m.forward(input, hx)
    fn.__name__ = fn.__qualname__ = {"GRU": "gru", "RNN_TANH": "rnn_tanh", "RNN_RELU": "rnn_relu"}[mode]
    fn.__doc__ = f"(output, h_n) of a {mode} over the flat weights params."
    return fn


def lstm_cell(input, hx, w_ih, w_hh, b_ih=None, b_hh=None):
    """(h, c) of one LSTM step."""
    from .nn.functional import linear
    from .nn.modules.rnn import _lstm_step
    return _lstm_step(linear(input, w_ih, b_ih), hx[0], hx[1], w_hh, b_hh)


def gru_cell(input, hx, w_ih, w_hh, b_ih=None, b_hh=None):
    from .nn.functional import linear
    from .nn.modules.rnn import _gru_step
    return _gru_step(linear(input, w_ih, b_ih), hx, w_hh, b_hh)


def rnn_tanh_cell(input, hx, w_ih, w_hh, b_ih=None, b_hh=None):
    from .nn.functional import linear
    from .nn.modules.rnn import _rnn_step
    return _rnn_step(linear(input, w_ih, b_ih), hx, w_hh, b_hh, False)


def rnn_relu_cell(input, hx, w_ih, w_hh, b_ih=None, b_hh=None):
    from .nn.functional import linear
    from .nn.modules.rnn import _rnn_step
    return _rnn_step(linear(input, w_ih, b_ih), hx, w_hh, b_hh, True)


for _fn in (lstm, _single_state("GRU"), _single_state("RNN_TANH"), _single_state("RNN_RELU"), lstm_cell, gru_cell,
            rnn_tanh_cell, rnn_relu_cell):
    _name(_fn)


# ---------------------------------------------------------------- switches

_STATE = {"deterministic": False, "warn_only": False, "matmul_precision": "highest", "warn_always": False,
          "interop_threads": 1, "default_tensor_type": "ember.FloatTensor"}


def use_deterministic_algorithms(mode, *, warn_only=False):
    """Records the request: ember's CPU kernels are deterministic whatever
    it says (fixed reduction orders, no atomics), so nothing changes."""
    _STATE["deterministic"], _STATE["warn_only"] = bool(mode), bool(warn_only)


def are_deterministic_algorithms_enabled():
    return _STATE["deterministic"]


def is_deterministic_algorithms_warn_only_enabled():
    return _STATE["warn_only"]


def set_deterministic_debug_mode(debug_mode):
    modes = {"default": 0, "warn": 1, "error": 2}
    mode = modes.get(debug_mode, debug_mode) if isinstance(debug_mode, str) else debug_mode
    if mode not in (0, 1, 2):
        raise RuntimeError(f"invalid value of debug_mode, expected one of `default`, `warn`, `error`, but got "
                           f"{debug_mode}")
    use_deterministic_algorithms(mode != 0, warn_only=mode == 1)


def get_deterministic_debug_mode():
    if not _STATE["deterministic"]:
        return 0
    return 1 if _STATE["warn_only"] else 2


def set_float32_matmul_precision(precision):
    """'highest', 'high' or 'medium': ember's float32 matmuls are always
    float32 ('highest'); the setting is kept for get_."""
    if precision not in ("highest", "high", "medium"):
        raise RuntimeError(f"Invalid precision: {precision}; expected 'highest', 'high' or 'medium'")
    _STATE["matmul_precision"] = precision


def get_float32_matmul_precision():
    return _STATE["matmul_precision"]


def set_flush_denormal(mode):
    """False: ember never flushes subnormal numbers, so only False is honoured."""
    return not mode


def set_warn_always(b):
    _STATE["warn_always"] = bool(b)


def is_warn_always_enabled():
    return _STATE["warn_always"]


def set_num_interop_threads(num):
    """ember runs one op at a time (its thread pool splits each op): the
    number is kept for get_num_interop_threads."""
    if num <= 0:
        raise RuntimeError("Expected positive number of threads")
    _STATE["interop_threads"] = int(num)


def get_num_interop_threads():
    return _STATE["interop_threads"]


def init_num_threads():
    """Nothing to do: ember's thread pool starts on first use."""


def compiled_with_cxx11_abi():
    return True


def is_inference_mode_enabled():
    """Whether an inference_mode block is open (ember's inference_mode is
    no_grad, with this count kept)."""
    from .autograd import grad_mode
    return grad_mode.inference_depth() > 0


def set_default_tensor_type(t):
    """torch.FloatTensor or torch.DoubleTensor (or their names): the
    default float dtype, as set_default_dtype."""
    name = t if isinstance(t, str) else getattr(t, "__name__", str(t))
    dt = {"FloatTensor": _C.float32, "DoubleTensor": _C.float64, "HalfTensor": _C.float16,
          "BFloat16Tensor": _C.bfloat16}.get(name.split(".")[-1])
    if dt is None:
        raise TypeError(f"set_default_tensor_type: only the float tensor types are supported, got {name}")
    from ._creation import set_default_dtype
    set_default_dtype(dt)
    _STATE["default_tensor_type"] = name


def is_vulkan_available():
    return False


def vitals_enabled():
    return False


def set_vital(category, name, value):
    return False


def read_vitals():
    return ""


def prepare_multiprocessing_environment(path):
    """Nothing to prepare: ember's worker processes share memory through
    ember.multiprocessing."""


for _fn in (use_deterministic_algorithms, are_deterministic_algorithms_enabled,
            is_deterministic_algorithms_warn_only_enabled, set_deterministic_debug_mode, get_deterministic_debug_mode,
            set_float32_matmul_precision, get_float32_matmul_precision, set_flush_denormal, set_warn_always,
            is_warn_always_enabled, set_num_interop_threads, get_num_interop_threads, init_num_threads,
            compiled_with_cxx11_abi, is_inference_mode_enabled, set_default_tensor_type, is_vulkan_available, vitals_enabled, set_vital,
            read_vitals, prepare_multiprocessing_environment):
    _name(_fn)
_NAMES.update(has_cuda=False, has_cudnn=False, has_lapack=True, has_mkl=False, has_mkldnn=False, has_mps=False,
              has_openmp=False, has_spectral=False)


def names():
    """{name: object} for ember's top level."""
    return dict(_NAMES)

