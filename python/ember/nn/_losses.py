"""The losses PyTorch users reach for after cross entropy and MSE, and the
distances they use: smooth_l1, huber, kl_div, binary_cross_entropy,
margin_ranking, hinge_embedding, soft_margin, multilabel_soft_margin,
cosine_embedding, triplet_margin, poisson_nll, gaussian_nll;
cosine_similarity, pairwise_distance; ctc_loss. Each is PyTorch's formula in ember
ops, so its gradient and compiled form come from the ops."""

import math
import warnings

from .. import _ops
from ..autograd import no_grad
from .functional import _reduce  # (functional imports this module after defining it)


def _same_size(input, target, what):
    if tuple(input.shape) != tuple(target.shape):
        warnings.warn(f"{what}: Using a target size ({tuple(target.shape)}) that is different to the input size "
                      f"({tuple(input.shape)}). This will likely lead to incorrect results due to broadcasting. "
                      f"Please ensure they have the same size.", stacklevel=3)


def smooth_l1_loss(input, target, size_average=None, reduce=None, reduction="mean", beta=1.0):
    """0.5 d^2 / beta where |d| < beta, else |d| - beta / 2 (beta 0: L1)."""
    if beta < 0:
        raise RuntimeError("smooth_l1_loss does not support negative values for beta.")
    _same_size(input, target, "smooth_l1_loss")
    d = (input - target).abs()
    loss = d if beta == 0 else _ops.where(d < beta, d * d * (0.5 / beta), d - 0.5 * beta)
    return _reduce(loss, reduction, "smooth_l1_loss")


def huber_loss(input, target, reduction="mean", delta=1.0):
    """0.5 d^2 where |d| <= delta, else delta (|d| - delta / 2)."""
    if delta <= 0:
        raise RuntimeError("huber_loss does not support non-positive values for delta.")
    _same_size(input, target, "huber_loss")
    d = (input - target).abs()
    loss = _ops.where(d <= delta, d * d * 0.5, (d - 0.5 * delta) * delta)
    return _reduce(loss, reduction, "huber_loss")


def kl_div(input, target, size_average=None, reduce=None, reduction="mean", log_target=False):
    """target (log target) log(target / exp(input)) summed as reduction says;
    'batchmean' divides the sum by the batch size (the true KL divergence)."""
    if log_target:
        loss = target.exp() * (target - input)
    else:  # target log(target) with 0 log 0 = 0
        loss = _ops.where(target > 0, target * _ops.where(target > 0, target, 1.0).log(), 0.0) - target * input
    if reduction == "batchmean":
        return loss.sum() / (input.shape[0] if input.ndim else 1)
    if reduction == "mean":
        warnings.warn("reduction: 'mean' divides the total loss by both the batch size and the support size."
                      "'batchmean' divides only by the batch size, and aligns with the KL div math definition."
                      "'mean' will be changed to behave the same as 'batchmean' in the next major release.",
                      stacklevel=2)
    return _reduce(loss, reduction, "kl_div")


def binary_cross_entropy(input, target, weight=None, size_average=None, reduce=None, reduction="mean"):
    """-(t log x + (1 - t) log(1 - x)) for probabilities x, the logs clamped
    at -100 as PyTorch clamps them."""
    if tuple(target.shape) != tuple(input.shape):
        raise ValueError(f"Using a target size ({tuple(target.shape)}) that is different to the input size "
                         f"({tuple(input.shape)}) is deprecated. Please ensure they have the same size.")
    with no_grad():
        if input.numel() and bool(((input < 0) | (input > 1)).any()):
            raise RuntimeError("all elements of input should be between 0 and 1")
    loss = -(target * input.log().clamp(min=-100) + (1 - target) * (1 - input).log().clamp(min=-100))
    if weight is not None:
        loss = loss * weight
    return _reduce(loss, reduction, "binary_cross_entropy")


def margin_ranking_loss(input1, input2, target, margin=0.0, size_average=None, reduce=None, reduction="mean"):
    """max(0, -y (x1 - x2) + margin)."""
    return _reduce((-target * (input1 - input2) + margin).clamp(min=0), reduction, "margin_ranking_loss")


def hinge_embedding_loss(input, target, margin=1.0, size_average=None, reduce=None, reduction="mean"):
    """x where y = 1, max(0, margin - x) where y = -1."""
    loss = _ops.where(target != 1, (margin - input).clamp(min=0), 0.0) + _ops.where(target != -1, input, 0.0)
    return _reduce(loss, reduction, "hinge_embedding_loss")


def soft_margin_loss(input, target, size_average=None, reduce=None, reduction="mean"):
    """log(1 + exp(-y x))."""
    return _reduce((-target * input).exp().log1p(), reduction, "soft_margin_loss")


def multilabel_soft_margin_loss(input, target, weight=None, size_average=None, reduce=None, reduction="mean"):
    """The per-class binary logistic loss, averaged over the classes."""
    from .functional import logsigmoid
    loss = -(target * logsigmoid(input) + (1 - target) * logsigmoid(-input))
    if weight is not None:
        loss = loss * weight
    loss = loss.sum(-1) / input.shape[-1]
    return _reduce(loss, reduction, "multilabel_soft_margin_loss")


def cosine_similarity(x1, x2, dim=1, eps=1e-8):
    """x1 . x2 / max(|x1| |x2|, eps) along dim (inputs broadcast first, so a
    size-1 dim of either is repeated before its norm is taken)."""
    x1, x2 = _ops.broadcast_tensors(x1, x2)
    w12 = (x1 * x2).sum(dim)
    n1 = (x1 * x1).sum(dim)
    n2 = (x2 * x2).sum(dim)
    return w12 / (n1 * n2).clamp(min=eps * eps).sqrt()


def pairwise_distance(x1, x2, p=2.0, eps=1e-6, keepdim=False):
    """|x1 - x2 + eps|_p over the last dim."""
    from ..linalg import vector_norm
    return vector_norm(x1 - x2 + eps, p, -1, keepdim)


def cosine_embedding_loss(input1, input2, target, margin=0.0, size_average=None, reduce=None, reduction="mean"):
    """1 - cos(x1, x2) where y = 1, max(0, cos(x1, x2) - margin) where y = -1."""
    eps = 1e-12
    prod = (input1 * input2).sum(-1)
    mag = ((input1 * input1).sum(-1) + eps) * ((input2 * input2).sum(-1) + eps)
    cos = prod / mag.sqrt()
    loss = _ops.where(target == 1, 1 - cos, 0.0) + _ops.where(target == -1, (cos - margin).clamp(min=0), 0.0)
    return _reduce(loss, reduction, "cosine_embedding_loss")


def triplet_margin_loss(anchor, positive, negative, margin=1.0, p=2, eps=1e-6, swap=False, size_average=None,
                        reduce=None, reduction="mean"):
    """max(d(a, p) - d(a, n) + margin, 0), d the p-norm distance (swap: the
    negative's distance to the positive when shorter)."""
    d_ap = pairwise_distance(anchor, positive, p, eps)
    d_an = pairwise_distance(anchor, negative, p, eps)
    if swap:
        d_an = _ops.minimum(d_an, pairwise_distance(positive, negative, p, eps))
    return _reduce((d_ap - d_an + margin).clamp(min=0), reduction, "triplet_margin_loss")


def poisson_nll_loss(input, target, log_input=True, full=False, size_average=None, eps=1e-8, reduce=None,
                     reduction="mean"):
    """exp(x) - t x (log_input), else x - t log(x + eps); full adds Stirling's
    approximation of log(t!) where t > 1."""
    loss = input.exp() - target * input if log_input else input - target * (input + eps).log()
    if full:
        safe = _ops.where(target > 1, target, 2.0)
        stirling = safe * safe.log() - safe + 0.5 * (2 * math.pi * safe).log()
        loss = loss + _ops.where(target > 1, stirling, 0.0)
    return _reduce(loss, reduction, "poisson_nll_loss")


def gaussian_nll_loss(input, target, var, full=False, eps=1e-6, reduction="mean"):
    """0.5 (log var + (x - t)^2 / var), var clamped at eps (full: + 0.5 log 2 pi)."""
    if var.ndim == input.ndim - 1 or (var.ndim == input.ndim and var.shape[-1] == 1 and input.shape[-1] != 1):
        var = var if var.ndim == input.ndim else var.unsqueeze(-1)
    elif tuple(var.shape) != tuple(input.shape):
        raise ValueError("var is of incorrect size")
    with no_grad():
        if bool((var < 0).any()):
            raise ValueError("var has negative entry/entries")
    v = var + (var.clamp(min=eps) - var).detach()  # clamped, with the gradient of var itself (as PyTorch)
    loss = 0.5 * (v.log() + (input - target) ** 2 / v)
    if full:
        loss = loss + 0.5 * math.log(2 * math.pi)
    return _reduce(loss, reduction, "gaussian_nll_loss")


_NEG = -1e30  # "log 0" that stays finite, so no inf - inf reaches a gradient


def ctc_loss(log_probs, targets, input_lengths, target_lengths, blank=0, reduction="mean", zero_infinity=False):
    """Connectionist temporal classification: -log p(target | input), the
    sum over every alignment of the target (with blanks and repeats) to the
    input frames, by the forward recursion in log space over the extended
    target (blank, y1, blank, y2, ..., blank). log_probs (T, N, C) are
    log-softmax outputs; targets (N, S) padded or 1-d concatenated. The
    gradient is autograd's through the recursion (PyTorch computes the same
    with its backward recursion). 'mean' divides each loss by its target
    length, then averages."""
    from .. import _creation
    T, N, C = log_probs.shape
    in_lens = [int(v) for v in (input_lengths.tolist() if hasattr(input_lengths, "tolist") else input_lengths)]
    tg_lens = [int(v) for v in (target_lengths.tolist() if hasattr(target_lengths, "tolist") else target_lengths)]
    if len(in_lens) != N or len(tg_lens) != N:
        raise RuntimeError(f"ctc_loss: expected {N} input_lengths and target_lengths, got {len(in_lens)} and "
                           f"{len(tg_lens)}")
    if any(n > T or n < 0 for n in in_lens):
        raise RuntimeError(f"ctc_loss: Expected input_lengths to have value at most {T}, but got {max(in_lens)}")
    flat = targets.tolist()
    if targets.ndim == 1:
        seqs, at = [], 0
        for n in tg_lens:
            seqs.append(flat[at:at + n])
            at += n
    else:
        seqs = [row[:n] for row, n in zip(flat, tg_lens)]
    if any(len(sq) != n for sq, n in zip(seqs, tg_lens)):
        raise RuntimeError("ctc_loss: a target is shorter than its target_length")
    L = 2 * max(tg_lens + [0]) + 1
    ext, skip = [], []
    for sq in seqs:
        e = [blank] * L
        e[1:2 * len(sq):2] = sq
        ext.append(e)
        skip.append([s >= 2 and e[s] != blank and e[s] != e[s - 2] for s in range(L)])
    ext_t = _creation.tensor(ext)  # (int64 indices into the classes)
    skip_t = _creation.tensor(skip)
    valid = _creation.tensor([[s < 2 * n + 1 for s in range(L)] for n in tg_lens])
    neg = _creation.full((N, 1), _NEG, dtype=log_probs.dtype)
    neg2 = _creation.full((N, 2), _NEG, dtype=log_probs.dtype)

    def emit(t):
        return _ops.where(valid, log_probs[t].gather(1, ext_t), _NEG)

    start = _creation.tensor([[s < 2 for s in range(L)] for _ in range(N)])
    alpha = _ops.where(start, emit(0), _NEG)
    for t in range(1, T):
        a1 = _ops.cat([neg, alpha[:, :-1]], 1)
        a2 = _ops.where(skip_t, _ops.cat([neg2, alpha[:, :-2]], 1), _NEG)
        new = _ops.logsumexp(_ops.stack([alpha, a1, a2]), 0) + emit(t)
        live = _creation.tensor([[t < n] for n in in_lens])
        alpha = _ops.where(live, new, alpha)
    last = _creation.tensor([[2 * n] for n in tg_lens], dtype=ext_t.dtype)
    ends = _ops.cat([alpha.gather(1, last), alpha.gather(1, (last - 1).clamp(min=0))], 1)
    ends = _ops.where(_creation.tensor([[True, n > 0] for n in tg_lens]), ends, _NEG)
    ll = _ops.logsumexp(ends, 1)
    ll = _ops.where(ll < _NEG / 2, float("-inf"), ll)
    loss = -ll
    if zero_infinity:
        loss = _ops.where(loss == float("inf"), 0.0, loss)
    if reduction == "mean":
        lens = _creation.tensor([max(n, 1) for n in tg_lens], dtype=log_probs.dtype)
        return (loss / lens).mean()
    return _reduce(loss, reduction, "ctc_loss")
