"""Sampling as PyTorch spells it: bernoulli, multinomial and the in-place
fills uniform_, normal_, exponential_, bernoulli_, each composed from
ember's uniform and normal draws (rand, randn: Philox, reproducible for a
seed) and ordinary ops. So a compiled function that samples records the
draws as random ops of its graph: every call draws fresh numbers, the ones
the eager function draws after the same ember.manual_seed. A `generator`
(an ember.Generator) draws from its own stream, eagerly.

The numbers are not PyTorch's (its CPU generator is another), the
distributions are: multinomial without replacement is the Gumbel top-k
sampler, which draws what successive sampling without replacement draws."""

import math
import numbers

from . import _C
from ._creation import rand, randn
from ._ops import _method
from ._sorting import searchsorted

__all__ = []  # (the functions register themselves with _ops)


def _uniform(shape, dtype, generator, device=None):
    return rand(*shape, dtype=dtype, generator=generator, device=device)


def _check_float(name, t):
    if not t.is_floating_point():
        raise RuntimeError(f"{name}: expected a floating-point tensor, got {t.dtype}")


@_method
def uniform_(input, a=0.0, b=1.0, *, generator=None):
    """Fills input with draws from U[a, b)."""
    _check_float("uniform_", input)
    u = _uniform(tuple(input.shape), input.dtype, generator, input.device)
    return input.copy_(u * (b - a) + a)


@_method
def normal_(input, mean=0.0, std=1.0, *, generator=None):
    """Fills input with draws from N(mean, std**2)."""
    _check_float("normal_", input)
    if std < 0:
        raise RuntimeError(f"normal_: expects std >= 0.0, but found std {std}")
    return input.copy_(randn(*input.shape, dtype=input.dtype, generator=generator, device=input.device) * std + mean)


@_method
def exponential_(input, lambd=1.0, *, generator=None):
    """Fills input with draws from Exp(lambd): -log(1 - U) / lambd."""
    _check_float("exponential_", input)
    if lambd <= 0:
        raise RuntimeError(f"exponential_: expects lambda > 0.0, but found lambda={lambd}")
    u = _uniform(tuple(input.shape), input.dtype, generator, input.device)
    return input.copy_(-(-u).log1p() / lambd)


@_method
def bernoulli(input, p=None, *, generator=None, out=None):
    """1 with probability input (or the number p), else 0, in input's dtype."""
    if out is not None:
        raise NotImplementedError("bernoulli(): out= is not implemented in ember yet")
    if p is None:
        _check_float("bernoulli", input)
    return _C._empty(tuple(input.shape), input.dtype, input.device).bernoulli_(input if p is None else p, generator=generator)


@_method
def bernoulli_(input, p=0.5, *, generator=None):
    """Fills input with 1 with probability p (a number or a tensor), else 0."""
    if isinstance(p, numbers.Number):
        if not 0 <= p <= 1:
            raise RuntimeError(f"bernoulli_ expects p to be in [0, 1], but got p={p}")
        u = _uniform(tuple(input.shape), input.dtype if input.is_floating_point() else _C._default_dtype(), generator, input.device)
        return input.copy_(u < p)
    prob = p.broadcast_to(tuple(input.shape))
    u = _uniform(tuple(input.shape), prob.dtype, generator, input.device)
    return input.copy_(u < prob)


@_method
def multinomial(input, num_samples, replacement=False, *, generator=None):
    """num_samples indices per row of input (non-negative weights, not
    necessarily summing to one), as int64: with replacement by inverse
    CDF, without by the Gumbel top-k trick."""
    if input.ndim not in (1, 2):
        raise RuntimeError(f"multinomial: prob_dist must be 1 or 2 dim, got {input.ndim}")
    _check_float("multinomial", input)
    n = input.shape[-1]
    if not isinstance(num_samples, numbers.Integral) or num_samples <= 0:
        raise RuntimeError(f"multinomial: cannot sample n_sample <= 0 samples, got {num_samples}")
    if not replacement and num_samples > n:
        raise RuntimeError("multinomial: cannot sample n_sample > prob_dist.size(-1) samples without replacement")
    w = input if input.ndim == 2 else input.unsqueeze(0)
    if bool(((w < 0) | ~w.isfinite()).any()):
        raise RuntimeError("multinomial: probability tensor contains either `inf`, `nan` or element < 0")
    if bool((w.sum(-1) <= 0).any()):
        raise RuntimeError("multinomial: invalid multinomial distribution (sum of probabilities <= 0)")
    rows = w.shape[0]
    if replacement:
        cdf = w.double().cumsum(-1)
        cdf = cdf / cdf[:, -1:]
        u = _uniform((rows, num_samples), cdf.dtype, generator)
        idx = searchsorted(cdf, u, right=True).clamp(max=n - 1)
    else:
        u = _uniform((rows, n), w.dtype, generator)
        tiny = 1e-30 if w.dtype != _C.float16 else 1e-7
        # log(w) + Gumbel noise; zero weights never win while a positive one is left
        keys = w.clamp(min=tiny).log() - (-(u.clamp(min=tiny)).log()).log()
        keys = keys.masked_fill(w == 0, -math.inf)
        idx = keys.topk(num_samples, dim=-1).indices
    return idx if input.ndim == 2 else idx.squeeze(0)
