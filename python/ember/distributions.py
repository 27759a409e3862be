"""ember.distributions, as torch.distributions for what RL and VAE code uses:
Normal, Categorical, Bernoulli, Uniform, MultivariateNormal and Independent,
each with sample, rsample (where reparameterisable), log_prob, entropy,
mean, variance and stddev, and kl_divergence between two of one kind.

Draws come from ember's global stream (ember.manual_seed). sample() runs
without autograd; rsample() is differentiable in the parameters (the
reparameterisation trick: loc + scale * eps). Shapes follow PyTorch:
sample(sample_shape) has shape sample_shape + batch_shape + event_shape.
With validate_args=True (or Distribution.set_default_validate_args(True))
parameters and log_prob's values are checked against their supports.
"""

import math
import numbers

import sys

from . import _C, _creation, _ops, linalg
from .autograd import no_grad
from .nn import functional as F

__all__ = ["Distribution", "ExponentialFamily", "Normal", "Categorical", "Bernoulli", "Uniform",
           "MultivariateNormal", "Independent", "kl_divergence", "register_kl"]

_LOG_SQRT_2PI = 0.5 * math.log(2 * math.pi)
_em = sys.modules[__package__]  # (the ember package: finfo, bernoulli, multinomial, erf)


def _as_tensor(v, like=None):
    if isinstance(v, _C._TensorBase):
        return v if v.is_floating_point() else v.to(_C._default_dtype())
    dtype = like.dtype if isinstance(like, _C._TensorBase) else _creation.get_default_dtype()
    return _creation.tensor(float(v), dtype=dtype)


def _broadcast(*values):
    ref = next((v for v in values if isinstance(v, _C._TensorBase)), None)
    ts = [_as_tensor(v, ref) for v in values]
    if len({t.dtype for t in ts}) > 1:
        dt = _float_result(ts)
        ts = [t.to(dt) for t in ts]
    return _ops.broadcast_tensors(*ts)


def _float_result(ts):
    return _C.float64 if any(t.dtype == _C.float64 for t in ts) else _C._default_dtype()


def _shape(sample_shape):
    if isinstance(sample_shape, numbers.Integral):
        return (int(sample_shape),)
    return tuple(sample_shape)


class Distribution:
    """Base of distributions: batch_shape (independent parameters),
    event_shape (the shape of one draw), sample, rsample, log_prob, entropy,
    mean, variance, stddev."""

    has_rsample = False
    _validate_default = False

    @staticmethod
    def set_default_validate_args(value):
        Distribution._validate_default = bool(value)

    def __init__(self, batch_shape=(), event_shape=(), validate_args=None):
        self._batch_shape = _C.Size(tuple(batch_shape))
        self._event_shape = _C.Size(tuple(event_shape))
        self._validate = Distribution._validate_default if validate_args is None else bool(validate_args)

    @property
    def batch_shape(self):
        return self._batch_shape

    @property
    def event_shape(self):
        return self._event_shape

    def _extended_shape(self, sample_shape=()):
        return _C.Size(_shape(sample_shape) + tuple(self._batch_shape) + tuple(self._event_shape))

    def sample(self, sample_shape=()):
        with no_grad():
            return self.rsample(sample_shape)

    def rsample(self, sample_shape=()):
        raise NotImplementedError(f"{type(self).__name__}.rsample: this distribution cannot be "
                                  f"reparameterised; use sample()")

    def sample_n(self, n):
        return self.sample((n,))

    def log_prob(self, value):
        raise NotImplementedError(f"{type(self).__name__}.log_prob")

    def entropy(self):
        raise NotImplementedError(f"{type(self).__name__}.entropy")

    def perplexity(self):
        return self.entropy().exp()

    @property
    def stddev(self):
        return self.variance.sqrt()

    def _check(self, ok, what):
        if self._validate and not bool(ok.all()):
            raise ValueError(f"{type(self).__name__}: {what}")

    def __repr__(self):
        return f"{type(self).__name__}(batch_shape={tuple(self.batch_shape)}, event_shape={tuple(self.event_shape)})"


class ExponentialFamily(Distribution):
    pass


class _Located(Distribution):
    """Distributions whose mean and mode are their loc (the Normals)."""

    @property
    def mean(self):
        return self.loc

    @property
    def mode(self):
        return self.loc


class Normal(_Located, ExponentialFamily):
    """N(loc, scale^2), elementwise."""

    has_rsample = True

    def __init__(self, loc, scale, validate_args=None):
        self.loc, self.scale = _broadcast(loc, scale)
        super().__init__(self.loc.shape, (), validate_args)
        self._check(self.scale > 0, "scale must be positive")

    @property
    def stddev(self):
        return self.scale

    @property
    def variance(self):
        return self.scale.pow(2)

    def rsample(self, sample_shape=()):
        eps = _creation.randn(self._extended_shape(sample_shape), dtype=self.loc.dtype)
        return self.loc + eps * self.scale

    def log_prob(self, value):
        value = _as_tensor(value, self.loc)
        return -((value - self.loc) ** 2) / (2 * self.variance) - self.scale.log() - _LOG_SQRT_2PI

    def cdf(self, value):
        value = _as_tensor(value, self.loc)
        return 0.5 * (1 + _em.erf((value - self.loc) / (self.scale * math.sqrt(2))))

    def icdf(self, value):
        raise NotImplementedError("Normal.icdf: ember has no erfinv yet")

    def entropy(self):
        return 0.5 + _LOG_SQRT_2PI + self.scale.log()


class Uniform(Distribution):
    """Uniform on [low, high), elementwise."""

    has_rsample = True

    def __init__(self, low, high, validate_args=None):
        self.low, self.high = _broadcast(low, high)
        super().__init__(self.low.shape, (), validate_args)
        self._check(self.low < self.high, "low must be below high")

    @property
    def mean(self):
        return (self.high + self.low) / 2

    @property
    def mode(self):
        return self.mean * float("nan")

    @property
    def stddev(self):
        return (self.high - self.low) / 12 ** 0.5

    @property
    def variance(self):
        return (self.high - self.low).pow(2) / 12

    def rsample(self, sample_shape=()):
        u = _creation.rand(self._extended_shape(sample_shape), dtype=self.low.dtype)
        return self.low + u * (self.high - self.low)

    def log_prob(self, value):
        value = _as_tensor(value, self.low)
        if self._validate:
            self._check((value >= self.low) & (value < self.high), "the value is outside the support")
        inside = ((self.low <= value) & (value < self.high)).to(self.low.dtype)
        return inside.log() - (self.high - self.low).log()

    def cdf(self, value):
        value = _as_tensor(value, self.low)
        return ((value - self.low) / (self.high - self.low)).clamp(0, 1)

    def entropy(self):
        return (self.high - self.low).log()


def _logits_of_probs(probs, binary):
    eps = _em.finfo(probs.dtype).eps
    p = probs.clamp(eps, 1 - eps)
    return (p.log() - (-p).log1p()) if binary else p.log()


class Bernoulli(ExponentialFamily):
    """1 with probability probs (or sigmoid(logits)), else 0; elementwise."""

    def __init__(self, probs=None, logits=None, validate_args=None):
        if (probs is None) == (logits is None):
            raise ValueError("Either `probs` or `logits` must be specified, but not both.")
        if probs is not None:
            (self.probs,) = _broadcast(probs)
            self.logits = _logits_of_probs(self.probs, True)
        else:
            (self.logits,) = _broadcast(logits)
            self.probs = self.logits.sigmoid()
        super().__init__(self.probs.shape, (), validate_args)
        if probs is not None:
            self._check((self.probs >= 0) & (self.probs <= 1), "probs must lie in [0, 1]")

    @property
    def mean(self):
        return self.probs

    @property
    def mode(self):
        return (self.probs >= 0.5).to(self.probs.dtype)

    @property
    def variance(self):
        return self.probs * (1 - self.probs)

    def sample(self, sample_shape=()):
        with no_grad():
            p = self.probs.expand(*self._extended_shape(sample_shape))
            return _em.bernoulli(p)

    def log_prob(self, value):
        value = _as_tensor(value, self.probs)
        if self._validate:
            self._check((value == 0) | (value == 1), "the value is not 0 or 1")
        logits, value = _ops.broadcast_tensors(self.logits, value)
        return -F.binary_cross_entropy_with_logits(logits, value, reduction="none")

    def entropy(self):
        return F.binary_cross_entropy_with_logits(self.logits, self.probs, reduction="none")


class Categorical(Distribution):
    """Draws an index of the last dim with probability probs (normalised)
    or softmax(logits)."""

    def __init__(self, probs=None, logits=None, validate_args=None):
        if (probs is None) == (logits is None):
            raise ValueError("Either `probs` or `logits` must be specified, but not both.")
        if probs is not None:
            probs = _as_tensor(probs)
            if probs.ndim < 1:
                raise ValueError("`probs` parameter must be at least one-dimensional.")
            self.probs = probs / probs.sum(-1, keepdim=True)
            self.logits = _logits_of_probs(self.probs, False)
        else:
            logits = _as_tensor(logits)
            if logits.ndim < 1:
                raise ValueError("`logits` parameter must be at least one-dimensional.")
            self.logits = logits - logits.logsumexp(-1, keepdim=True)
            self.probs = self.logits.softmax(-1)
        self._num_events = self.probs.shape[-1]
        super().__init__(self.probs.shape[:-1], (), validate_args)
        if probs is not None:
            self._check(probs >= 0, "probs must be non-negative")

    @property
    def param_shape(self):
        return self.probs.shape

    @property
    def mean(self):
        return _creation.full(self._extended_shape(), float("nan"), dtype=self.probs.dtype)

    @property
    def mode(self):
        return self.probs.argmax(-1)

    @property
    def variance(self):
        return _creation.full(self._extended_shape(), float("nan"), dtype=self.probs.dtype)

    def sample(self, sample_shape=()):
        shape = _shape(sample_shape)
        n = math.prod(shape)
        with no_grad():
            flat = self.probs.reshape(-1, self._num_events)
            drawn = _em.multinomial(flat, n, True) if n else flat.new_zeros((flat.shape[0], 0)).long()
            # [batch, n] -> sample_shape + batch_shape
            drawn = drawn.t().reshape(*shape, *self.batch_shape)
        return drawn

    def log_prob(self, value):
        value = value if isinstance(value, _C._TensorBase) else _creation.tensor(value)
        if self._validate:
            self._check((value >= 0) & (value < self._num_events), "the value is not a valid category")
        value = value.long().unsqueeze(-1)
        value, logits = _ops.broadcast_tensors(value, self.logits)
        return logits.gather(-1, value[..., :1]).squeeze(-1)

    def entropy(self):
        logits = self.logits.clamp(min=_em.finfo(self.logits.dtype).min)
        return -(logits * self.probs).sum(-1)

    def enumerate_support(self, expand=True):
        values = _creation.arange(self._num_events).reshape(-1, *([1] * len(self.batch_shape)))
        return values.expand(-1, *self.batch_shape) if expand else values


class MultivariateNormal(_Located):
    """N(loc, Sigma) over the last dim, Sigma given as covariance_matrix,
    precision_matrix or its Cholesky factor scale_tril."""

    has_rsample = True

    def __init__(self, loc, covariance_matrix=None, precision_matrix=None, scale_tril=None, validate_args=None):
        loc = _as_tensor(loc)
        if loc.ndim < 1:
            raise ValueError("loc must be at least one-dimensional.")
        if (covariance_matrix is not None) + (scale_tril is not None) + (precision_matrix is not None) != 1:
            raise ValueError("Exactly one of covariance_matrix or precision_matrix or scale_tril may be specified.")
        if scale_tril is not None:
            tril = _as_tensor(scale_tril)
        elif covariance_matrix is not None:
            tril = linalg.cholesky(_as_tensor(covariance_matrix))
        else:
            tril = linalg.cholesky(linalg.inv(_as_tensor(precision_matrix)))
        if tril.ndim < 2:
            raise ValueError("the scale matrix must be at least two-dimensional, with optional leading batch dims")
        k = loc.shape[-1]
        batch = _ops.broadcast_shapes(tuple(tril.shape[:-2]), tuple(loc.shape[:-1]))
        self.loc = loc.expand(*batch, k)
        self.scale_tril = tril.expand(*batch, k, k)
        super().__init__(batch, (k,), validate_args)

    @property
    def covariance_matrix(self):
        return self.scale_tril @ self.scale_tril.transpose(-1, -2)

    @property
    def precision_matrix(self):
        return linalg.inv(self.covariance_matrix)

    @property
    def variance(self):
        return self.scale_tril.pow(2).sum(-1)

    def rsample(self, sample_shape=()):
        eps = _creation.randn(self._extended_shape(sample_shape), dtype=self.loc.dtype)
        return self.loc + (self.scale_tril @ eps.unsqueeze(-1)).squeeze(-1)

    def _half_log_det(self):
        return self.scale_tril.diagonal(0, -2, -1).log().sum(-1)

    def log_prob(self, value):
        diff = _as_tensor(value, self.loc) - self.loc
        shape = _ops.broadcast_shapes(tuple(diff.shape[:-1]), tuple(self.scale_tril.shape[:-2]))
        k = self.event_shape[0]
        tril = self.scale_tril.expand(*shape, k, k)
        z = linalg.solve_triangular(tril, diff.expand(*shape, k).unsqueeze(-1), upper=False).squeeze(-1)
        m = z.pow(2).sum(-1)
        return -0.5 * (k * math.log(2 * math.pi) + m) - self._half_log_det()

    def entropy(self):
        k = self.event_shape[0]
        return 0.5 * k * (1.0 + math.log(2 * math.pi)) + self._half_log_det()


class Independent(Distribution):
    """base_distribution with its rightmost reinterpreted_batch_ndims batch
    dims read as event dims: log_prob and entropy sum over them."""

    def __init__(self, base_distribution, reinterpreted_batch_ndims, validate_args=None):
        n = int(reinterpreted_batch_ndims)
        b = tuple(base_distribution.batch_shape)
        if n > len(b):
            raise ValueError(f"Expected reinterpreted_batch_ndims <= len(base_distribution.batch_shape), actual "
                             f"{n} vs {len(b)}")
        self.base_dist = base_distribution
        self.reinterpreted_batch_ndims = n
        cut = len(b) - n
        super().__init__(b[:cut], b[cut:] + tuple(base_distribution.event_shape), validate_args)

    @property
    def has_rsample(self):
        return self.base_dist.has_rsample

    @property
    def mean(self):
        return self.base_dist.mean

    @property
    def mode(self):
        return self.base_dist.mode

    @property
    def variance(self):
        return self.base_dist.variance

    def sample(self, sample_shape=()):
        return self.base_dist.sample(sample_shape)

    def rsample(self, sample_shape=()):
        return self.base_dist.rsample(sample_shape)

    def _sum_rightmost(self, t):
        n = self.reinterpreted_batch_ndims
        return t.sum(tuple(range(-n, 0))) if n else t

    def log_prob(self, value):
        return self._sum_rightmost(self.base_dist.log_prob(value))

    def entropy(self):
        return self._sum_rightmost(self.base_dist.entropy())


# ---- KL divergence ----

_KL = {}


def register_kl(type_p, type_q):
    """@register_kl(P, Q) on fn(p, q): kl_divergence for that pair."""
    def deco(fn):
        _KL[(type_p, type_q)] = fn
        return fn
    return deco


def kl_divergence(p, q):
    """KL(p || q), batched, for the registered pairs of kinds (the most
    specific registered pair wins, as in PyTorch)."""
    best = None
    for (tp, tq), fn in _KL.items():
        if isinstance(p, tp) and isinstance(q, tq):
            rank = (type(p).__mro__.index(tp), type(q).__mro__.index(tq))
            if best is None or rank < best[0]:
                best = (rank, fn)
    if best is None:
        raise NotImplementedError(f"kl_divergence: no formula for {type(p).__name__} and {type(q).__name__} "
                                  f"in ember (register one with ember.distributions.register_kl)")
    return best[1](p, q)


@register_kl(Normal, Normal)
def _kl_normal_normal(p, q):
    var_ratio = (p.scale / q.scale).pow(2)
    t1 = ((p.loc - q.loc) / q.scale).pow(2)
    return 0.5 * (var_ratio + t1 - 1 - var_ratio.log())


@register_kl(Uniform, Uniform)
def _kl_uniform_uniform(p, q):
    result = ((q.high - q.low) / (p.high - p.low)).log()
    outside = (q.low > p.low) | (q.high < p.high)
    return _ops.where(outside, float("inf"), result)


@register_kl(Bernoulli, Bernoulli)
def _kl_bernoulli_bernoulli(p, q):
    t1 = p.probs * (F.softplus(-q.logits) - F.softplus(-p.logits))
    t1 = _ops.where(q.probs == 0, float("inf"), t1)
    t1 = _ops.where(p.probs == 0, 0.0, t1)
    t2 = (1 - p.probs) * (F.softplus(q.logits) - F.softplus(p.logits))
    t2 = _ops.where(q.probs == 1, float("inf"), t2)
    t2 = _ops.where(p.probs == 1, 0.0, t2)
    return t1 + t2


@register_kl(Categorical, Categorical)
def _kl_categorical_categorical(p, q):
    t = p.probs * (p.logits - q.logits)
    t = _ops.where(q.probs == 0, float("inf"), t)
    t = _ops.where(p.probs == 0, 0.0, t)
    return t.sum(-1)


@register_kl(MultivariateNormal, MultivariateNormal)
def _kl_mvn_mvn(p, q):
    if p.event_shape != q.event_shape:
        raise ValueError("KL-divergence between two Multivariate Normals with different event shapes cannot "
                         "be computed")
    k = p.event_shape[0]
    shape = _ops.broadcast_shapes(tuple(p.batch_shape), tuple(q.batch_shape))
    qt = q.scale_tril.expand(*shape, k, k)
    pt = p.scale_tril.expand(*shape, k, k)
    term = linalg.solve_triangular(qt, pt, upper=False).pow(2).sum((-2, -1))
    diff = (q.loc - p.loc).expand(*shape, k).unsqueeze(-1)
    maha = linalg.solve_triangular(qt, diff, upper=False).pow(2).sum((-2, -1))
    return q._half_log_det() - p._half_log_det() + 0.5 * (term + maha - k)


@register_kl(Independent, Independent)
def _kl_independent_independent(p, q):
    if p.reinterpreted_batch_ndims != q.reinterpreted_batch_ndims:
        raise NotImplementedError("kl_divergence: Independent distributions that reinterpret different numbers "
                                  "of dims")
    return p._sum_rightmost(kl_divergence(p.base_dist, q.base_dist))
