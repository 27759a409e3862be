"""nn.functional: the stateless side of nn, PyTorch's signatures.

Most of it is composed of ember ops, so autograd differentiates it with
no formulas of its own; convolution, pooling, unfold and fold are ops of
their own (_windows.py), one node each in a compiled graph."""

import math
import numbers
import warnings

from .. import _C, _creation, _ops
from ..autograd import Function, no_grad
from . import _resample

# ---------------------------------------------------------------- activations

def _maybe_inplace(input, fn, inplace):
    """fn(input), or with inplace, input overwritten with it. The graph of
    fn is then built on a copy: copy_ bumps input's version, and a backward
    that saved input itself would find it modified."""
    if not inplace:
        return fn(input)
    return input.copy_(fn(input.clone() if input.requires_grad else input))


def relu(input, inplace=False):
    return input.relu_() if inplace else input.relu()


def relu6(input, inplace=False):
    return hardtanh(input, 0.0, 6.0, inplace)


def _hardtanh(input, min_val, max_val):
    # clamp's gradient passes at the bounds; PyTorch's hardtanh (and relu6)
    # stops it there: only strictly inside do the values flow through
    if not input.is_floating_point():  # bounds take the tensor's type, as PyTorch's Scalars do
        if input.dtype == _C.uint8 and (min_val < 0 or max_val < 0):
            raise RuntimeError("cannot do hardtanh on an unsigned type with negative limits")
        min_val, max_val = int(min_val), int(max_val)
    inside = (input > min_val) & (input < max_val)
    return _ops.where(inside, input, input.detach().clamp(min_val, max_val))


def hardtanh(input, min_val=-1.0, max_val=1.0, inplace=False):
    return _maybe_inplace(input, lambda x: _hardtanh(x, min_val, max_val), inplace)


def leaky_relu(input, negative_slope=0.01, inplace=False):
    return _maybe_inplace(input, lambda x: _ops.where(x > 0, x, x * negative_slope), inplace)


def elu(input, alpha=1.0, inplace=False):
    # expm1 of min(x, 0): the unused branch stays finite, so its zero
    # gradient never meets an inf
    return _maybe_inplace(
        input, lambda x: _ops.where(x > 0, x, x.clamp(max=0.0).expm1() * alpha), inplace)


def gelu(input, approximate="none"):
    return _ops.gelu(input, approximate=approximate)


def silu(input, inplace=False):
    return _maybe_inplace(input, _ops.silu, inplace)


def mish(input, inplace=False):
    return _maybe_inplace(input, lambda x: x * softplus(x).tanh(), inplace)


def softplus(input, beta=1.0, threshold=20.0):
    return _ops.softplus(input, beta, threshold)


def logsigmoid(input):
    return -softplus(-input)


def tanh(input):
    return input.tanh()


def sigmoid(input):
    return input.sigmoid()


def _softmax_dim(name, input, dim):
    if dim is None:  # PyTorch's legacy choice, with its warning
        import warnings
        warnings.warn(f"Implicit dimension choice for {name} has been deprecated. Change the call "
                      f"to include dim=X as an argument.", stacklevel=3)
        dim = 0 if input.ndim in (0, 1, 3) else 1
    return dim


def softmax(input, dim=None, _stacklevel=3, dtype=None):
    return _ops.softmax(input, _softmax_dim("softmax", input, dim), dtype=dtype)


def log_softmax(input, dim=None, _stacklevel=3, dtype=None):
    return _ops.log_softmax(input, _softmax_dim("log_softmax", input, dim), dtype=dtype)


def normalize(input, p=2.0, dim=1, eps=1e-12):
    return input / input.norm(p=p, dim=dim, keepdim=True).clamp(min=eps)


# ---------------------------------------------------------------- linear, embedding, dropout

def linear(input, weight, bias=None):
    """input @ weight.T + bias"""
    if input.ndim == 0 or input.shape[-1] != weight.shape[-1]:
        lead = list(input.shape[:-1]) if input.ndim else []
        raise RuntimeError(
            f"linear: mat1 and mat2 shapes cannot be multiplied "
            f"({math.prod(lead) if lead else 1}x{input.shape[-1] if input.ndim else 0} and "
            f"{weight.shape[-1]}x{weight.shape[0]}): input {list(input.shape)}, weight "
            f"{list(weight.shape)}")
    out = _C.matmul(input, weight.t())
    if bias is not None and bias.dtype != out.dtype and out.dtype == _C._autocast_dtype():
        bias = bias.to(out.dtype)  # (autocast: linear is one op in lower precision, its bias included)
    return out if bias is None else out + bias


def _embedding_renorm_(weight, idx, max_norm, norm_type):
    """Rescales in place the rows of weight idx names whose norm exceeds
    max_norm to max_norm / (norm + 1e-7) times themselves (torch.embedding_renorm_)."""
    with no_grad():
        named = weight.index_select(0, idx)
        norms = named.norm(p=norm_type, dim=1, keepdim=True)
        scale = _ops.where(norms > max_norm, max_norm / (norms + 1e-7), 1.0)
        weight[idx] = named * scale  # a row named twice gets the same value twice
    return weight


def embedding(input, weight, padding_idx=None, max_norm=None, norm_type=2.0,
              scale_grad_by_freq=False, sparse=False):
    """The rows of weight that input (integer indices) names. With max_norm,
    first rescales (in place, as PyTorch does) each named row whose
    norm_type-norm exceeds max_norm to max_norm / (norm + 1e-7) times it.
    scale_grad_by_freq divides each row's gradient by how often input names
    it. sparse=True is accepted, and weight's gradient is dense (ember has
    no sparse tensors): the same values as PyTorch's sparse gradient's."""
    if input.dtype not in (_C.int64, _C.int32):
        raise RuntimeError(f"embedding: expected the indices to be int64 or int32, got {input.dtype}")
    idx = input.reshape(-1)
    if max_norm is not None:
        _embedding_renorm_(weight, idx, max_norm, norm_type)
    rows = weight.index_select(0, idx)
    if padding_idx is not None:
        if padding_idx < 0:
            padding_idx += weight.shape[0]
        # the padding row gets no gradient, but its value is still returned
        # (as in PyTorch, where it need not be zero)
        keep = (idx != padding_idx).unsqueeze(1)
        rows = _ops.where(keep, rows, rows.detach())
    if scale_grad_by_freq and rows.requires_grad:
        counts = _creation.zeros(weight.shape[0], dtype=rows.dtype, device=weight.device).scatter_add(
            0, idx.long(), _creation.ones(idx.shape[0], dtype=rows.dtype, device=idx.device))
        rows = _scale_grad(rows, (1.0 / counts[idx.long()]).unsqueeze(1))
    return rows.reshape(*input.shape, weight.shape[1])


class _ScaleGrad(Function):
    """x itself, its gradient multiplied by scale on the way back."""

    @staticmethod
    def forward(ctx, x, scale):
        ctx.scale = scale
        return x

    @staticmethod
    def backward(ctx, g):
        return g * ctx.scale, None


def _scale_grad(x, scale):
    return _ScaleGrad.apply(x, scale)


def _dropout_elements(input, p, training, inplace, alpha):
    """dropout (alpha False) and alpha_dropout: p's check, the identity in
    eval mode or at p 0, zeros at p 1, else a fresh keep mask per element."""
    if p < 0.0 or p > 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
    if not training or p == 0.0:
        return input
    if p == 1.0:
        return _maybe_inplace(input, lambda x: x * 0.0, inplace)
    keep = (_creation.rand(*input.shape, dtype=input.dtype, device=input.device) >= p).to(input.dtype)
    if alpha:
        scale, shift = _alpha_affine(keep, p)
        return _maybe_inplace(input, lambda x: x * scale + shift, inplace)
    scale = keep * (1.0 / (1.0 - p))
    return _maybe_inplace(input, lambda x: x * scale, inplace)


def dropout(input, p=0.5, training=True, inplace=False):
    """Zeroes each element with probability p, scaling the rest by 1/(1-p)."""
    return _dropout_elements(input, p, training, inplace, False)


def _feature_noise(input, p, alpha):
    """The (keep mask, shift) of (feature) dropout: the mask's shape is the
    input's first two dims then ones (whole channels), scaled by 1/(1-p), or
    for alpha dropout the affine map that keeps SELU's mean and variance."""
    shape = tuple(input.shape[:2]) + (1,) * (input.ndim - 2)
    keep = (_creation.rand(*shape, dtype=input.dtype) >= p).to(input.dtype)
    if not alpha:
        return keep * (1.0 / (1.0 - p)), None
    return _alpha_affine(keep, p)


def _alpha_affine(keep, p):
    """Alpha dropout's (scale, shift) for a 0/1 keep mask: a dropped element
    becomes SELU's saturation value, and the affine map a x + b keeps
    SELU's zero mean and unit variance."""
    a_ = 1.7580993408473766  # SELU's scale * alpha
    a = 1.0 / math.sqrt((a_ * a_ * p + 1) * (1 - p))
    return keep * a, (keep - 1.0) * (a_ * a) + a_ * a * p


def _feature_dropout(input, p, training, inplace, name, dims, alpha=False):
    """Dropout of whole channels (dim 1, or dim 0 of an unbatched input),
    as PyTorch 1.13's dropout1d/2d/3d and feature_alpha_dropout."""
    if p < 0.0 or p > 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
    if dims is not None:
        batched, unbatched = dims + 2, dims + 1
        if name == "dropout1d" and input.ndim not in (batched, unbatched):
            raise RuntimeError(f"dropout1d: Expected 2D or 3D input, but received a {input.ndim}D input. "
                               "Note that dropout1d exists to provide channel-wise dropout on inputs with 1 "
                               "spatial dimension, a channel dimension, and an optional batch dimension "
                               "(i.e. 2D or 3D inputs).")
        if input.ndim not in (batched, unbatched):
            warnings.warn(f"{name}: Received a {input.ndim}-D input to {name}, which is deprecated and will "
                          f"result in an error in a future release. To retain the behavior and silence this "
                          f"warning, please use dropout instead.")
        if input.ndim != batched:  # (PyTorch then treats dim 0 as the channels)
            return _feature_dropout(input.unsqueeze(0), p, training, False, name, None, alpha).squeeze(0) \
                if not inplace else input.copy_(_feature_dropout(input.unsqueeze(0), p, training, False, name,
                                                                 None, alpha).squeeze(0))
    if not training or p == 0.0:
        return input
    if input.ndim < 2:
        raise RuntimeError(f"{name}: Feature dropout requires at least 2 dimensions in the input")
    if p == 1.0:  # (every channel dropped: x * 0, as PyTorch's)
        return _maybe_inplace(input, lambda x: x * 0.0, inplace)
    scale, shift = _feature_noise(input, p, alpha)
    return _maybe_inplace(input, (lambda x: x * scale) if shift is None else (lambda x: x * scale + shift), inplace)


def dropout1d(input, p=0.5, training=True, inplace=False):
    """Zeroes whole channels of (N, C, L) or (C, L) inputs."""
    return _feature_dropout(input, p, training, inplace, "dropout1d", 1)


def dropout2d(input, p=0.5, training=True, inplace=False):
    """Zeroes whole channels of (N, C, H, W) or (C, H, W) inputs."""
    return _feature_dropout(input, p, training, inplace, "dropout2d", 2)


def dropout3d(input, p=0.5, training=True, inplace=False):
    """Zeroes whole channels of (N, C, D, H, W) or (C, D, H, W) inputs."""
    return _feature_dropout(input, p, training, inplace, "dropout3d", 3)


def feature_alpha_dropout(input, p=0.5, training=False, inplace=False):
    """Alpha dropout (see alpha_dropout) of whole channels."""
    return _feature_dropout(input, p, training, inplace, "feature_alpha_dropout", None, alpha=True)


def alpha_dropout(input, p=0.5, training=False, inplace=False):
    """Dropout for SELU networks: dropped elements take SELU's negative
    saturation value and an affine map keeps the mean and variance."""
    return _dropout_elements(input, p, training, inplace, True)


# ---------------------------------------------------------------- normalisation

def _norm_dims(input, normalized_shape, what):
    shape = (normalized_shape,) if isinstance(normalized_shape, numbers.Integral) else \
        tuple(normalized_shape)
    k = len(shape)
    if k == 0 or tuple(input.shape[input.ndim - k:]) != shape or input.ndim < k:
        raise RuntimeError(f"{what}: expected input with shape [*, {', '.join(map(str, shape))}], "
                           f"but got input of size {list(input.shape)}")
    return tuple(range(input.ndim - k, input.ndim))


def layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-5):
    """One op (its kernel reads each row once into cache); the variance is
    biased, as PyTorch's."""
    dims = _norm_dims(input, normalized_shape, "layer_norm")
    if bias is not None and weight is None:
        weight = _C.ones(tuple(bias.shape), dtype=bias.dtype, device=bias.device)
    return _C._layer_norm(input, len(dims), weight, bias, float(eps))


_EPS = {_C.float64: 2.0 ** -52, _C.float32: 2.0 ** -23, _C.float16: 2.0 ** -10,
        _C.bfloat16: 2.0 ** -7}


def rms_norm(input, normalized_shape, weight=None, eps=None):
    dims = _norm_dims(input, normalized_shape, "rms_norm")
    if eps is None:  # PyTorch's default: the machine epsilon of the input's dtype
        eps = _EPS[input.dtype]
    out = input * ((input * input).mean(dims, keepdim=True) + eps).rsqrt()
    return out if weight is None else out * weight


def batch_norm(input, running_mean, running_var, weight=None, bias=None, training=False,
               momentum=0.1, eps=1e-5):
    """Normalises each channel (dim 1) by the batch's statistics when
    training (updating the running ones), by the running ones otherwise."""
    if input.ndim < 2:
        if input.numel() == 0 and all(t is None or t.numel() == 0 for t in (running_mean, running_var)):
            return input * 1.0  # (PyTorch answers an empty 1-d input with an empty result)
        raise RuntimeError(f"batch_norm: expected 2D or more input (got {input.ndim}D input)")
    dims = tuple(d for d in range(input.ndim) if d != 1)
    shape = [1, input.shape[1]] + [1] * (input.ndim - 2)
    if training:
        n = input.numel() // input.shape[1]
        if n <= 1:
            raise ValueError(f"Expected more than 1 value per channel when training, got input "
                             f"size {list(input.shape)}")
        mean = input.mean(dims)
        var = input.var(dims, unbiased=False)
        if running_mean is not None:
            with no_grad():
                running_mean.mul_(1 - momentum).add_(mean.detach() * momentum)
                running_var.mul_(1 - momentum).add_(var.detach() * (momentum * n / (n - 1)))
    else:
        if running_mean is None or running_var is None:
            raise RuntimeError("batch_norm: running_mean and running_var must be defined in "
                               "evaluation mode")
        mean, var = running_mean, running_var
    # x * alpha + beta with per-channel alpha = w / sqrt(var + eps), beta = b -
    # mean * alpha, as PyTorch's CPU kernel computes it: one pass over the
    # input instead of four, and one rounding (a fused multiply-add: x alpha
    # and beta nearly cancel where the mean is large)
    alpha = (var + eps).rsqrt()
    if weight is not None:
        alpha = alpha * weight
    beta = -mean * alpha
    if bias is not None:
        beta = beta + bias
    return _ops._mul_add(input, alpha.reshape(shape), beta.reshape(shape))


# ---------------------------------------------------------------- padding, windows

def pad(input, pad, mode="constant", value=None):
    """Pads (or, with negative amounts, crops) the last len(pad) // 2 dims:
    pad = (left, right) for the last, then (top, bottom) for the one before..."""
    if mode not in ("constant", "reflect", "replicate", "circular"):
        raise NotImplementedError(f"pad: mode={mode!r} is not implemented (ember has 'constant', 'reflect', "
                                  f"'replicate' and 'circular')")
    if len(pad) % 2:
        raise RuntimeError(f"Padding length must be divisible by 2, got {len(pad)}")
    if mode != "constant":
        if value:
            raise RuntimeError(f"Padding mode \"{mode}\" doesn't take in value argument.")
        return _resample.pad_by_index(input, pad, mode)
    if len(pad) // 2 > input.ndim:
        raise RuntimeError(f"Padding length too large: {len(pad)} for a {input.ndim}-d input")
    value = 0.0 if value is None else value
    out = input
    for k in range(len(pad) // 2):
        dim = input.ndim - 1 - k
        before, after = int(pad[2 * k]), int(pad[2 * k + 1])
        if before < 0:
            out = out.narrow(dim, -before, out.shape[dim] + before)
            before = 0
        if after < 0:
            out = out.narrow(dim, 0, out.shape[dim] + after)
            after = 0
        parts = []
        for n in (before, None, after):
            if n is None:
                parts.append(out)
            elif n > 0:
                shape = list(out.shape)
                shape[dim] = n
                parts.append(_creation.full(shape, value, dtype=out.dtype))
        if len(parts) > 1:
            out = _ops.cat(parts, dim)
    return out


from ._windows import (_pair, adaptive_avg_pool1d, adaptive_avg_pool2d, adaptive_avg_pool3d,  # noqa: E402
                       adaptive_max_pool1d, adaptive_max_pool2d, adaptive_max_pool3d, avg_pool1d,
                       avg_pool2d, avg_pool3d, conv1d, conv2d, conv3d, conv_transpose1d,
                       conv_transpose2d, conv_transpose3d, fold, max_pool1d, max_pool2d,
                       max_pool3d, unfold)


# ---------------------------------------------------------------- attention

def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0,
                                 is_causal=False, scale=None):
    """softmax(q k^T * scale + mask) v over the last two dims; is_causal
    lets position i see positions <= i; a bool attn_mask marks what may be
    attended to, a float one is added to the scores."""
    L, S = query.shape[-2], key.shape[-2]
    scale = 1.0 / math.sqrt(query.shape[-1]) if scale is None else scale
    scores = _C.matmul(query, key.transpose(-2, -1)) * scale
    if is_causal:
        if attn_mask is not None:
            raise RuntimeError("scaled_dot_product_attention: give attn_mask or is_causal, not both")
        causal = _creation.ones(L, S, dtype=_C.bool).tril()
        scores = scores.masked_fill(causal.logical_not(), -math.inf)
    elif attn_mask is not None:
        if attn_mask.dtype == _C.bool:
            scores = scores.masked_fill(attn_mask.logical_not(), -math.inf)
        else:
            scores = scores + attn_mask
    weights = scores.softmax(-1)
    if dropout_p > 0.0:
        weights = dropout(weights, dropout_p)
    return _C.matmul(weights, value)


def native_layer_norm(input, normalized_shape, weight, bias, eps):
    """(out, mean, rstd) of layer_norm, the statistics shaped to broadcast
    against the input (the normalised dims kept as 1), as torch's."""
    dims = _norm_dims(input, normalized_shape, "native_layer_norm")
    mean = input.mean(dims, keepdim=True)
    rstd = (input.var(dims, unbiased=False, keepdim=True) + eps).rsqrt()
    return layer_norm(input, normalized_shape, weight, bias, eps), mean, rstd


def native_batch_norm(input, weight, bias, running_mean, running_var, training, momentum, eps):
    """(out, save_mean, save_invstd) of batch_norm: the batch's mean and
    1/sqrt(var + eps) per channel when training, empty tensors otherwise."""
    out = batch_norm(input, running_mean, running_var, weight, bias, training, momentum, eps)
    if not training:
        empty = _creation.zeros(0, dtype=input.dtype)
        return out, empty, empty
    dims = tuple(d for d in range(input.ndim) if d != 1)
    return out, input.mean(dims).detach(), (input.var(dims, unbiased=False) + eps).rsqrt().detach()


def _scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0, need_attn_weights=False,
                                  is_causal=False):
    """PyTorch 1.13's private form: (output, attention weights after
    dropout), the weights returned whether or not need_attn_weights asks."""
    L, S = query.shape[-2], key.shape[-2]
    scores = _C.matmul(query, key.transpose(-2, -1)) * (1.0 / math.sqrt(query.shape[-1]))
    if is_causal:
        scores = scores.masked_fill(_creation.ones(L, S, dtype=_C.bool).tril().logical_not(), -math.inf)
    if attn_mask is not None:
        scores = scores.masked_fill(attn_mask.logical_not(), -math.inf) if attn_mask.dtype == _C.bool else \
            scores + attn_mask
    weights = scores.softmax(-1)
    if dropout_p > 0.0:
        weights = dropout(weights, dropout_p)
    return _C.matmul(weights, value), weights


# ---------------------------------------------------------------- losses

def _reduce(loss, reduction, what):
    if reduction == "mean":
        return loss.mean()
    if reduction == "sum":
        return loss.sum()
    if reduction == "none":
        return loss
    raise ValueError(f"{what}: {reduction} is not a valid value for reduction")


def _check_target(input, target, what):
    if target.dtype.is_floating_point or target.dtype == _C.bool:
        raise RuntimeError(f"{what}: expected scalar type Long but found "
                           f"{repr(target.dtype).split('.')[-1].capitalize()} (target must hold "
                           f"class indices)")
    if target.dtype != _C.int64:
        raise RuntimeError(f"{what}: expected scalar type Long but found "
                           f"{repr(target.dtype).split('.')[-1].capitalize()}")
    batched = input.ndim >= 2
    if batched and target.ndim >= 1 and input.shape[0] != target.shape[0]:
        raise ValueError(f"Expected input batch_size ({input.shape[0]}) to match target "
                         f"batch_size ({target.shape[0]}).")
    want = (input.shape[0],) + tuple(input.shape[2:]) if batched else ()
    if tuple(target.shape) != want:
        raise RuntimeError(f"{what}: expected target of size {list(want)} for input of size "
                           f"{list(input.shape)}, got {list(target.shape)}")


def nll_loss(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None,
             reduction="mean"):
    """-input[i, target[i]] (times weight[target[i]]), ignoring ignore_index."""
    if size_average is not None or reduce is not None:
        raise NotImplementedError("nll_loss: size_average/reduce are deprecated; use reduction")
    return _picked_loss(input, target, weight, ignore_index, reduction, "nll_loss",
                        lambda picked: -picked)


def _picked_loss(input, target, weight, ignore_index, reduction, what, loss_of):
    """nll_loss's reduction of loss_of(input[i, target[i]]) over the samples,
    weighted by weight[target[i]], ignore_index skipped."""
    _check_target(input, target, what)
    cls_dim = 1 if input.ndim >= 2 else 0
    c = input.shape[cls_dim]
    keep = target != ignore_index
    safe = _ops.where(keep, target, 0)
    with no_grad():
        # one bool read: in a compiled function it is a value guard that holds
        # for every in-range batch (min/max reads would change with the data)
        if safe.numel() and not safe.is_meta and bool(((safe < 0) | (safe >= c)).any()):  # (meta: no values)
            bad = int(safe.max()) if int(safe.max()) >= c else int(safe.min())
            raise IndexError(f"nll_loss: Target {bad} is out of bounds (input has {c} classes)")
    picked = loss_of(input.gather(cls_dim, safe.unsqueeze(cls_dim)).squeeze(cls_dim))
    w = keep.to(input.dtype)
    if weight is not None:
        w = w * weight.index_select(0, safe.reshape(-1)).reshape(safe.shape)
    # where, not just the zero weight: when every target is ignored the mean
    # divides by zero, and inf * 0 would send NaN (PyTorch: zero) back
    loss = _ops.where(keep, picked * w, 0.0)
    if reduction == "mean":
        return loss.sum() / w.sum()
    return _reduce(loss, reduction, what)


def cross_entropy(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None,
                  reduction="mean", label_smoothing=0.0):
    """nll_loss of log_softmax over dim 1 (class indices), or the cross
    entropy with class probabilities when target is a float tensor of
    input's shape; label_smoothing mixes in the uniform distribution.

    With class indices and no smoothing, -log_softmax(x)[t] is taken as
    logsumexp(x) - x[t]: one read of the logits and no tensor of their
    size written (the log_softmax of every class would be), and a backward
    of softmax(x) less the one-hot target."""
    if size_average is not None or reduce is not None:
        raise NotImplementedError("cross_entropy: size_average/reduce are deprecated; use reduction")
    if not 0.0 <= label_smoothing <= 1.0:
        raise RuntimeError(f"label_smoothing must be between 0.0 and 1.0. Got: {label_smoothing}")
    if input.ndim == 0:
        raise RuntimeError("cross_entropy: expected an input with a dim of classes ([C] or [N, C, ...]), "
                           "got a 0-d tensor")
    cls_dim = 1 if input.ndim >= 2 else 0
    if input.dtype.is_floating_point and not target.dtype.is_floating_point and label_smoothing == 0.0:
        lse = input.logsumexp(cls_dim)
        return _picked_loss(input, target, weight, ignore_index, reduction, "nll_loss",
                            lambda picked: lse - picked)
    logp = input.log_softmax(cls_dim)
    c = input.shape[cls_dim]
    wshape = [1] * input.ndim
    wshape[cls_dim] = c
    if target.dtype.is_floating_point:
        if tuple(target.shape) != tuple(input.shape):
            raise RuntimeError(f"cross_entropy: expected a target of class probabilities with the "
                               f"input's size {list(input.shape)}, got {list(target.shape)} (use "
                               f"int64 class indices otherwise)")
        if label_smoothing > 0:
            target = target * (1 - label_smoothing) + label_smoothing / c
        terms = logp * target
        if weight is not None:
            terms = terms * weight.reshape(wshape)
        return _reduce(-terms.sum(cls_dim), reduction, "cross_entropy")
    nll = nll_loss(logp, target, weight, ignore_index=ignore_index, reduction=reduction)
    if label_smoothing == 0.0:
        return nll
    mask = target != ignore_index
    keep = mask.to(input.dtype)
    terms = logp if weight is None else logp * weight.reshape(wshape)
    smooth = _ops.where(mask, -terms.sum(cls_dim), 0.0)  # where: as in nll_loss
    if reduction == "mean":
        if weight is None:
            smooth = smooth.sum() / keep.sum()
        else:
            safe = _ops.where(target != ignore_index, target, 0)
            smooth = smooth.sum() / (weight.index_select(0, safe.reshape(-1)).reshape(safe.shape)
                                     * keep).sum()
    else:
        smooth = _reduce(smooth, reduction, "cross_entropy")
    return nll * (1 - label_smoothing) + smooth * (label_smoothing / c)


def _check_same_size(input, target, what):
    if tuple(input.shape) != tuple(target.shape):
        import warnings
        warnings.warn(f"Using a target size ({list(target.shape)}) that is different to the input "
                      f"size ({list(input.shape)}). This will likely lead to incorrect results due "
                      f"to broadcasting. Please ensure they have the same size.", stacklevel=3)


def mse_loss(input, target, size_average=None, reduce=None, reduction="mean"):
    _check_same_size(input, target, "mse_loss")
    d = input - target
    return _reduce(d * d, reduction, "mse_loss")


def l1_loss(input, target, size_average=None, reduce=None, reduction="mean"):
    _check_same_size(input, target, "l1_loss")
    return _reduce((input - target).abs(), reduction, "l1_loss")


def binary_cross_entropy_with_logits(input, target, weight=None, size_average=None, reduce=None,
                                     reduction="mean", pos_weight=None):
    """-[pos_weight * t * log sigmoid(x) + (1 - t) log(1 - sigmoid(x))], in
    the stable form (1 - t) x + (1 + (pos_weight - 1) t) softplus(-x)."""
    if tuple(target.shape) != tuple(input.shape):
        raise ValueError(f"Target size ({list(target.shape)}) must be the same as input size "
                         f"({list(input.shape)})")
    sp = softplus(-input)
    if pos_weight is not None:
        loss = (1 - target) * input + (1 + (pos_weight - 1) * target) * sp
    else:
        loss = (1 - target) * input + sp
    if weight is not None:
        loss = loss * weight
    return _reduce(loss, reduction, "binary_cross_entropy_with_logits")


def one_hot(tensor, num_classes=-1):
    return _ops.one_hot(tensor, num_classes)


# ---------------------------------------------------------------- more losses, norms, resampling

from ._losses import (binary_cross_entropy, cosine_embedding_loss, cosine_similarity, ctc_loss,  # noqa: E402,F401
                      gaussian_nll_loss,
                      hinge_embedding_loss, huber_loss, kl_div, margin_ranking_loss, multilabel_soft_margin_loss,
                      pairwise_distance, poisson_nll_loss, smooth_l1_loss, soft_margin_loss, triplet_margin_loss)
from ._normalization import group_norm, instance_norm, local_response_norm  # noqa: E402,F401
from ._embedding_bag import embedding_bag  # noqa: E402,F401
from ._fractional import fractional_max_pool2d, fractional_max_pool3d  # noqa: E402,F401
from ._resample import affine_grid, grid_sample, interpolate, pixel_shuffle, pixel_unshuffle  # noqa: E402,F401
from ._activations import (celu, celu_, elu_, glu, hardshrink, hardsigmoid, hardswish, hardtanh_,  # noqa: E402,F401
                           leaky_relu_, prelu, relu_, rrelu, rrelu_, selu, selu_, softmin, softshrink, softsign,
                           tanhshrink, threshold, threshold_)


def upsample(input, size=None, scale_factor=None, mode="nearest", align_corners=None):
    """interpolate, under its deprecated name."""
    return interpolate(input, size, scale_factor, mode, align_corners)


def bilinear(input1, input2, weight, bias=None):
    """x1^T A x2 + b per output feature: weight (out, in1, in2)."""
    y = _ops.einsum("...i,oij,...j->...o", input1, weight, input2)
    return y if bias is None else y + bias
from ._more import (channel_shuffle, gumbel_softmax, lp_pool1d, lp_pool2d, max_unpool1d,  # noqa: E402,F401
                    max_unpool2d, max_unpool3d, multi_margin_loss, multilabel_margin_loss, native_channel_shuffle,
                    pdist, triplet_margin_with_distance_loss, upsample_bilinear, upsample_nearest)
from ._more import _with_indices as _wi  # noqa: E402

max_pool1d_with_indices, max_pool2d_with_indices, max_pool3d_with_indices = (
    _wi(max_pool1d), _wi(max_pool2d), _wi(max_pool3d))
adaptive_max_pool1d_with_indices, adaptive_max_pool2d_with_indices, adaptive_max_pool3d_with_indices = (
    _wi(adaptive_max_pool1d), _wi(adaptive_max_pool2d), _wi(adaptive_max_pool3d))


# ---------------------------------------------------------------- torch.nn.functional's helpers and odd names

from ._attention import multi_head_attention_forward  # noqa: E402,F401
from .._tensor import Tensor  # noqa: E402,F401
from ..overrides import (handle_torch_function, has_torch_function, has_torch_function_unary,  # noqa: E402,F401
                         has_torch_function_variadic)

DType = type(_C.float32)
GRID_SAMPLE_INTERPOLATION_MODES = {"bilinear": 0, "nearest": 1, "bicubic": 2}
GRID_SAMPLE_PADDING_MODES = {"zeros": 0, "border": 1, "reflection": 2}


class _BroadcastingList:
    """TorchScript's BroadcastingListN[T] annotation (an int or a list of N
    of them): List[T] here, where nothing checks annotations."""

    def __getitem__(self, types):
        import typing
        return typing.List[types]


BroadcastingList1 = BroadcastingList2 = BroadcastingList3 = _BroadcastingList()


def assert_int_or_pair(arg, arg_name, message):
    assert isinstance(arg, int) or len(arg) == 2, message.format(arg_name)


def boolean_dispatch(arg_name, arg_index, default, if_true, if_false, module_name=None, func_name=None):
    """A function calling if_true or if_false by the boolean argument
    arg_name (or position arg_index; default when absent), as
    max_pool2d(return_indices=...) dispatches in PyTorch."""
    def fn(*args, **kwargs):
        flag = kwargs[arg_name] if arg_name in kwargs else args[arg_index] if arg_index < len(args) else default
        return if_true(*args, **kwargs) if flag else if_false(*args, **kwargs)
    fn.__doc__ = if_true.__doc__ or if_false.__doc__
    if module_name is not None:
        fn.__module__ = module_name
    if func_name is not None:
        fn.__name__ = fn.__qualname__ = func_name
    return fn


def conv_tbc(input, weight, bias, pad=0):
    """1-d convolution of (time, batch, channels) input with a (kernel,
    in, out) weight."""
    out = conv1d(input.permute(1, 2, 0), weight.permute(2, 1, 0), bias, 1, pad)
    return out.permute(2, 0, 1)


def fractional_max_pool2d_with_indices(input, kernel_size, output_size=None, output_ratio=None,
                                       return_indices=False, _random_samples=None):
    return fractional_max_pool2d(input, kernel_size, output_size, output_ratio, True, _random_samples)


def fractional_max_pool3d_with_indices(input, kernel_size, output_size=None, output_ratio=None,
                                       return_indices=False, _random_samples=None):
    return fractional_max_pool3d(input, kernel_size, output_size, output_ratio, True, _random_samples)
