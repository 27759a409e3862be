"""Every differentiable op's backward formula: gradcheck against central
finite differences (float64), the same gradients PyTorch computes (its
conventions at ties and kinks included), and double backward on a subset.

Each case names the op it covers; the test also walks the recorded graph to
make sure that op's node is really there, and a last test requires a case
for every op that ops.def marks differentiable."""

import numpy as np
import pytest
import torch

import ember
from ember.autograd import gradcheck, gradgradcheck


class P:
    """A float64 input that requires grad: values uniform in [lo, hi),
    kept `gap` away from the points in `avoid` (kinks, poles)."""

    def __init__(self, shape, lo=-2.0, hi=2.0, seed=0, avoid=(), gap=0.05):
        v = np.random.default_rng(seed).uniform(lo, hi, shape)
        for a in avoid:
            near = np.abs(v - a) < gap
            v[near] = a + np.where(v[near] >= a, gap, -gap) * 2
        self.values = v

    def make(self, m):
        return m.tensor(self.values, dtype=m.float64, requires_grad=True)


class Z(P):
    """A P with exact zeros at the given (row, col) places."""

    def __init__(self, shape, zeros, **kw):
        super().__init__(shape, **kw)
        for i, j in zeros:
            self.values[i, j] = 0.0


class C:
    """A constant input (indices, masks, conditions): no gradient."""

    def __init__(self, values, dtype="int64"):
        self.values, self.dtype = np.asarray(values), dtype

    def make(self, m):
        return m.tensor(self.values, dtype=getattr(m, self.dtype))


def _grad_of(m, make, shape, gy):
    """The gradient of make(x0) in x0 (a constant input) for upstream gy,
    with its graph: reaches the ops gradients are (conv_weight,
    max_pool_grad, ...) as functions of gy."""
    x0 = m.tensor(np.random.default_rng(5).uniform(-2, 2, shape), dtype=m.float64, requires_grad=True)
    return m.autograd.grad(make(x0), x0, gy, create_graph=True)[0]


def _conv_weight_grad(m, x, gy):
    """conv's weight gradient as a function of its input and upstream."""
    w = m.zeros(3, 2, 2, 3, dtype=m.float64, requires_grad=True)
    y = m.nn.functional.conv2d(x, w, stride=(2, 1), padding=1)
    return m.autograd.grad(y, w, gy, create_graph=True)[0]


def F(m):
    """torch.nn.functional or ember for the activations spelled there."""
    return m.nn.functional if m is torch else m


def _setitem(m, x, key, v):
    y = x * 1
    y[key] = v
    return y


CASES = [
    ("neg", lambda m, x: -x, [P((3, 4))]),
    ("abs", lambda m, x: x.abs(), [P((3, 4), avoid=[0])]),
    ("sign", lambda m, x: x.sign() * x, [P((3, 4), avoid=[0])]),
    ("exp", lambda m, x: x.exp(), [P((3, 4))]),
    ("exp2", lambda m, x: m.exp2(x), [P((3, 4))]),
    ("expm1", lambda m, x: x.expm1(), [P((3, 4))]),
    ("log", lambda m, x: x.log(), [P((3, 4), 0.2, 3)]),
    ("log2", lambda m, x: x.log2(), [P((3, 4), 0.2, 3)]),
    ("log1p", lambda m, x: x.log1p(), [P((3, 4), -0.5, 3)]),
    ("sqrt", lambda m, x: x.sqrt(), [P((3, 4), 0.2, 3)]),
    ("rsqrt", lambda m, x: x.rsqrt(), [P((3, 4), 0.2, 3)]),
    ("reciprocal", lambda m, x: x.reciprocal(), [P((3, 4), avoid=[0], gap=0.2)]),
    ("sin", lambda m, x: x.sin(), [P((3, 4))]),
    ("cos", lambda m, x: x.cos(), [P((3, 4))]),
    ("tan", lambda m, x: x.tan(), [P((3, 4), -1.2, 1.2)]),
    ("tanh", lambda m, x: x.tanh(), [P((3, 4))]),
    ("sigmoid", lambda m, x: x.sigmoid(), [P((3, 4))]),
    ("erf", lambda m, x: x.erf(), [P((3, 4))]),
    ("erfc", lambda m, x: x.erfc(), [P((3, 4))]),
    ("bessel_j0", lambda m, x: m.special.bessel_j0(x), [P((3, 4), -30, 30)]),
    ("bessel_j1", lambda m, x: m.special.bessel_j1(x), [Z((3, 4), [(1, 1)], lo=-30, hi=30)]),
    ("bessel_y0", lambda m, x: m.special.bessel_y0(x), [P((3, 4), 0.5, 30)]),
    ("bessel_y1", lambda m, x: m.special.bessel_y1(x), [P((3, 4), 0.5, 30)]),
    ("atan", lambda m, x: x.atan(), [P((3, 4))]),
    ("asin", lambda m, x: x.asin(), [P((3, 4), -0.9, 0.9)]),
    ("acos", lambda m, x: x.acos(), [P((3, 4), -0.9, 0.9)]),
    ("atan2", lambda m, y, x: m.atan2(y, x), [P((3, 4)), P((4,), seed=1, avoid=[0.0])]),
    ("relu", lambda m, x: x.relu(), [P((3, 4), avoid=[0])]),
    ("gelu", lambda m, x: F(m).gelu(x), [P((3, 4), -4, 4)]),
    ("gelu_tanh", lambda m, x: F(m).gelu(x, approximate="tanh"), [P((3, 4), -4, 4)]),
    ("silu", lambda m, x: F(m).silu(x), [P((3, 4), -4, 4)]),
    ("floor", lambda m, x: x.floor() + x, [P((3, 4), avoid=[-1, 0, 1])]),
    ("ceil", lambda m, x: x.ceil() * x, [P((3, 4), avoid=[-1, 0, 1])]),
    ("round", lambda m, x: x.round() * x, [P((3, 4), avoid=[-1.5, -0.5, 0.5, 1.5])]),
    ("trunc", lambda m, x: x.trunc() * x, [P((3, 4), avoid=[-1, 0, 1])]),
    # float32 rounding is far coarser than gradcheck's default step
    ("cast", lambda m, x: x.float().double() * x, [P((3, 4))], dict(eps=1e-3, atol=1e-3, rtol=1e-2)),
    ("add", lambda m, x, y: x + y, [P((3, 4)), P((4,), seed=1)]),
    ("add", lambda m, x, y: m.add(x, y, alpha=2.5), [P((3, 1)), P((1, 4), seed=1)]),
    ("sub", lambda m, x, y: x - y, [P((3, 4)), P((3, 1), seed=1)]),
    ("mul", lambda m, x, y: x * y, [P((2, 3, 4)), P((3, 1), seed=1)]),
    ("mul", lambda m, x: x * 3.0, [P((3, 4))]),
    ("div", lambda m, x, y: x / y, [P((3, 4)), P((4,), seed=1, avoid=[0], gap=0.3)]),
    ("maximum", lambda m, x, y: m.maximum(x, y), [P((3, 4)), P((4,), seed=1)]),
    ("minimum", lambda m, x, y: m.minimum(x, y), [P((3, 4)), P((3, 4), seed=1)]),
    ("pow", lambda m, x, y: x ** y, [P((3, 4), 0.3, 2), P((3, 4), -2, 2, seed=1)]),
    ("pow", lambda m, x: x ** 3, [P((3, 4))]),
    ("pow", lambda m, y: 2.0 ** y, [P((3, 4))]),
    ("fmod", lambda m, x, y: m.fmod(x, y), [P((3, 4), -5, 5), P((4,), 0.7, 1.3, seed=1)]),
    ("remainder", lambda m, x, y: m.remainder(x, y), [P((3, 4), -5, 5), P((4,), 0.7, 1.3, seed=1)]),
    ("floor_divide", lambda m, x, y: m.floor_divide(x, y) * x,
     [P((3, 4), -5, 5), P((4,), 0.7, 1.3, seed=1)]),
    ("where", lambda m, c, x, y: m.where(c, x, y),
     [C(np.arange(12).reshape(3, 4) % 3 == 0, "bool"), P((3, 4)), P((4,), seed=1)]),
    ("where", lambda m, x: x.masked_fill(x > 0.5, 0.0), [P((3, 4), avoid=[0.5])]),
    ("clamp", lambda m, x: x.clamp(-0.5, 0.7), [P((3, 4), avoid=[-0.5, 0.7])]),
    ("clamp", lambda m, x, lo, hi: m.clamp(x, lo, hi),
     [P((3, 4), -2, 2), P((4,), -1.5, -0.2, seed=1), P((3, 1), 0.2, 1.5, seed=2)]),
    ("lerp", lambda m, a, b, w: m.lerp(a, b, w), [P((3, 4)), P((3, 4), seed=1), P((4,), seed=2)]),
    ("softplus", lambda m, x: F(m).softplus(x, beta=2.0, threshold=3.0), [P((3, 4), -3, 3, avoid=[1.5])]),
    ("mul_add", lambda m, x, a, b: m.addcmul(b, x, a), [P((3, 4)), P((4,), seed=1), P((3, 1), seed=2)]),
    ("sum", lambda m, x: x.sum(), [P((3, 4))]),
    ("sum", lambda m, x: x.sum(1), [P((3, 4))]),
    ("sum", lambda m, x: x.sum((0, 2), keepdim=True), [P((2, 3, 4))]),
    ("mean", lambda m, x: x.mean(), [P((3, 4))]),
    ("mean", lambda m, x: x.mean(-1, keepdim=True), [P((3, 4))]),
    ("prod", lambda m, x: x.prod(), [P((3, 4), 0.5, 1.5)]),
    ("prod", lambda m, x: x.prod(1), [P((3, 4))]),
    # zeros in a product: the gradient still flows to the zero factors
    # (its double backward goes through cumprod's at zeros, which refuses)
    ("prod", lambda m, x: (x * C([[1, 0, 1, 1], [0, 1, 0, 1], [1, 1, 1, 1]], "float64").make(m)).prod(1),
     [P((3, 4))], dict(double=False)),
    ("amax", lambda m, x: x.amax(1), [P((3, 4))]),
    ("amax", lambda m, x: x.amax(), [P((3, 4))]),
    ("amin", lambda m, x: x.amin(0, keepdim=True), [P((3, 4))]),
    ("amax", lambda m, x: x.max(), [P((3, 4))]),
    ("var", lambda m, x: x.var(1), [P((3, 4))]),
    ("var", lambda m, x: x.var(unbiased=False), [P((3, 4))]),
    ("std", lambda m, x: x.std(0), [P((3, 4))]),
    ("std", lambda m, x: x.std(), [P((3, 4))]),
    ("norm", lambda m, x: x.norm(), [P((3, 4))]),
    ("norm", lambda m, x: x.norm(p=1, dim=1), [P((3, 4), avoid=[0])]),
    ("norm", lambda m, x: x.norm(p=3, dim=0), [P((3, 4), avoid=[0])]),
    ("norm", lambda m, x: x.norm(p=float("inf"), dim=1), [P((3, 4))]),
    ("logsumexp", lambda m, x: x.logsumexp(1), [P((3, 4))]),
    ("cumsum", lambda m, x: x.cumsum(1), [P((3, 4))]),
    ("cumsum", lambda m, x: x.cumsum(0), [P((3, 4))]),
    ("cumprod", lambda m, x: x.cumprod(1), [P((3, 4), 0.5, 1.5)]),
    # zeros: a line's first zero gets the products that skip it; after it, 0
    ("cumprod", lambda m, x: x.cumprod(1),
     [Z((4, 5), [(0, 1), (1, 0), (1, 2), (2, 4), (3, 2), (3, 3)], lo=0.5, hi=1.5)], dict(double=False)),
    ("cumprod", lambda m, x: x.cumprod(0), [Z((4, 3), [(1, 0), (0, 1), (3, 1)], lo=-1.5, hi=1.5)],
     dict(double=False)),
    ("softmax", lambda m, x: x.softmax(1), [P((3, 4))]),
    ("softmax", lambda m, x: x.softmax(0), [P((3, 4))]),
    ("log_softmax", lambda m, x: x.log_softmax(-1), [P((3, 4))]),
    ("layer_norm", lambda m, x, w, b: m.nn.functional.layer_norm(x, (4,), w, b),
     [P((3, 4)), P((4,), seed=1), P((4,), seed=2)]),
    ("layer_norm", lambda m, x: m.nn.functional.layer_norm(x, (2, 3)), [P((2, 2, 3))]),
    ("matmul", lambda m, a, b: a @ b, [P((3, 4)), P((4, 5), seed=1)]),
    ("matmul", lambda m, a, b: a @ b, [P((2, 3, 4)), P((4, 5), seed=1)]),
    ("matmul", lambda m, a, b: a @ b, [P((2, 1, 3, 4)), P((3, 4, 2), seed=1)]),
    ("matmul", lambda m, a, b: a @ b, [P((4,)), P((4,), seed=1)]),
    ("matmul", lambda m, a, b: a @ b, [P((2, 3, 4)), P((4,), seed=1)]),
    ("matmul", lambda m, a, b: a @ b, [P((4,)), P((2, 4, 3), seed=1)]),
    ("reshape", lambda m, x: x.reshape(6, 2), [P((3, 4))]),
    ("reshape", lambda m, x: x.t().reshape(-1), [P((3, 4))]),
    ("permute", lambda m, x: x.permute(2, 0, 1) * C(np.arange(24).reshape(4, 2, 3), "float64").make(m),
     [P((2, 3, 4))]),
    ("expand", lambda m, x: x.expand(2, 3, 4) * C(np.arange(24).reshape(2, 3, 4), "float64").make(m),
     [P((3, 1))]),
    ("slice", lambda m, x: x[1:3, ::2], [P((4, 5))]),
    ("slice", lambda m, x: x[:, 1:], [P((4, 5))]),
    ("select", lambda m, x: x[1], [P((4, 5))]),
    ("select", lambda m, x: x[:, -1], [P((4, 5))]),
    ("diagonal", lambda m, x: x.diagonal(1), [P((4, 5))]),
    ("diagonal", lambda m, x: x.diagonal(-1, 2, 0), [P((3, 4, 5))]),
    ("flip", lambda m, x: x.flip(0) * C(np.arange(20).reshape(4, 5), "float64").make(m), [P((4, 5))]),
    ("roll", lambda m, x: x.roll(2, 1) * C(np.arange(20).reshape(4, 5), "float64").make(m), [P((4, 5))]),
    ("cat", lambda m, x, y: m.cat([x, y, x], 1), [P((2, 3)), P((2, 2), seed=1)]),
    ("cat", lambda m, x, y: m.stack([x, y]), [P((2, 3)), P((2, 3), seed=1)]),
    ("tril", lambda m, x: x.tril(), [P((4, 4))]),
    ("triu", lambda m, x: x.triu(1), [P((3, 4))]),
    ("index_select", lambda m, x, i: x.index_select(1, i), [P((3, 4)), C([0, 2, 2, 3])]),
    ("gather", lambda m, x, i: x.gather(1, i), [P((3, 4)), C([[0, 1], [3, 3], [2, 0]])]),
    ("scatter", lambda m, x, i, s: x.scatter(1, i, s),
     [P((3, 4)), C([[0, 1], [3, 2], [2, 0]]), P((3, 2), seed=1)]),
    ("scatter", lambda m, x, i, s: x.scatter_add(0, i, s),
     [P((3, 4)), C([[0, 1, 2, 0], [2, 2, 1, 0]]), P((2, 4), seed=1)]),
    ("as_strided_scatter", lambda m, x: _write_through_a_view(x), [P((3, 4))]),
    ("as_strided", lambda m, x: _read_a_stale_view(x), [P((3, 4))]),
    ("index", lambda m, x: x[[0, 2, 2]], [P((3, 4))]),
    ("index", lambda m, x, i: x[:, i], [P((3, 4)), C([[0, 1], [3, 3]])]),
    ("masked_select", lambda m, x: x[x > 0.3], [P((3, 4), avoid=[0.3])]),
    ("index_put", lambda m, x, v: _setitem(m, x, C([0, 2]).make(m), v), [P((3, 4)), P((4,), seed=1)]),
    ("index_put", lambda m, x, v: x.index_put((C([0, 2, 0]).make(m),), v, accumulate=True),
     [P((3, 4)), P((3, 4), seed=1)]),
    ("masked_select", lambda m, x: x.masked_select(C([True, False, True, True], "bool").make(m)),
     [P((3, 4))]),
    ("contiguous", lambda m, x: x.t().contiguous(), [P((3, 4))]),
    ("conv", lambda m, x, w, b: m.nn.functional.conv2d(x, w, b, stride=2, padding=1, groups=2),
     [P((2, 4, 5, 5)), P((4, 2, 2, 3), seed=1), P((4,), seed=2)]),
    ("conv_transpose", lambda m, x, w: m.nn.functional.conv_transpose1d(x, w, stride=2, output_padding=1),
     [P((2, 3, 4)), P((3, 2, 3), seed=1)]),
    ("conv_weight", _conv_weight_grad, [P((2, 2, 4, 5)), P((2, 3, 3, 5), seed=1)]),
    ("unfold", lambda m, x: m.nn.functional.unfold(x, 2, padding=1, stride=2), [P((2, 2, 3, 4))]),
    ("fold", lambda m, x: m.nn.functional.fold(x, (4, 5), 2), [P((2, 8, 12))]),
    ("max_pool", lambda m, x: m.nn.functional.max_pool2d(x, 2, padding=1), [P((2, 2, 4, 5))]),
    ("adaptive_max_pool", lambda m, x: m.nn.functional.adaptive_max_pool1d(x, 3), [P((2, 2, 7))]),
    ("max_pool_grad", lambda m, g: _grad_of(m, lambda x: m.nn.functional.max_pool2d(x, 2), (2, 2, 4, 4), g),
     [P((2, 2, 2, 2))]),
    ("avg_pool", lambda m, x: m.nn.functional.avg_pool2d(x, 3, 2, 1, ceil_mode=True, count_include_pad=False),
     [P((2, 2, 6, 5))]),
    ("avg_pool_grad", lambda m, g: _grad_of(m, lambda x: m.nn.functional.avg_pool2d(x, 3, 2, 1, True),
                                            (2, 2, 6, 5), g), [P((2, 2, 4, 3))]),
    ("adaptive_avg_pool", lambda m, x: m.nn.functional.adaptive_avg_pool2d(x, (3, 2)), [P((2, 2, 7, 5))]),
    ("adaptive_avg_pool_grad",
     lambda m, g: _grad_of(m, lambda x: m.nn.functional.adaptive_avg_pool2d(x, 3), (2, 2, 7, 5), g),
     [P((2, 2, 3, 3))]),
    ("sort", lambda m, x: m.sort(x, 1, descending=True).values, [P((3, 4))]),
    ("topk", lambda m, x: m.topk(x, 2, 0).values, [P((3, 4))]),
    ("kthvalue", lambda m, x: m.kthvalue(x, 2, 1, keepdim=True).values, [P((3, 4))]),
    ("median", lambda m, x: m.median(x, 0).values, [P((3, 4))]),
    ("median", lambda m, x: m.median(x), [P((3, 4))]),
    ("nanmedian", lambda m, x: m.nanmedian(x, 1).values, [P((3, 4))]),
    ("mode", lambda m, x: m.mode(x, 1).values, [P((3, 4))]),
    ("inv", lambda m, a: m.linalg.inv(a), [P((2, 3, 3))]),
    ("solve", lambda m, a, b: m.linalg.solve(a, b), [P((2, 3, 3)), P((2, 3, 2), seed=1)]),
    ("solve_triangular", lambda m, a, b: m.linalg.solve_triangular(a + 3 * m.eye(3, dtype=m.float64), b, upper=True),
     [P((3, 3)), P((3, 2), seed=1)]),
    ("det", lambda m, a: m.linalg.det(a), [P((2, 3, 3))]),
    ("slogdet", lambda m, a: m.linalg.slogdet(a)[1], [P((2, 3, 3))]),
    ("cholesky", lambda m, a: m.linalg.cholesky(a @ a.mT + m.eye(3, dtype=m.float64)), [P((2, 3, 3))]),
    ("qr", lambda m, a: tuple(m.linalg.qr(a)), [P((4, 3))]),
    ("qr", lambda m, a: tuple(m.linalg.qr(a)), [P((2, 3, 3), seed=1)]),
    # eigenvectors and singular vectors up to their signs: their squares
    ("eigh", lambda m, a: (lambda r: (r[0], r[1] * r[1]))(m.linalg.eigh(a + a.mT)), [P((3, 3))]),
    ("svd", lambda m, a: (lambda r: (r[0] * r[0], r[1], r[2] * r[2]))(m.linalg.svd(a, full_matrices=False)),
     [P((4, 3))]),
    ("svd", lambda m, a: (lambda r: (r[0] * r[0], r[1], r[2] * r[2]))(m.linalg.svd(a, full_matrices=False)),
     [P((2, 4), seed=1)]),
    ("svd", lambda m, a: m.linalg.svdvals(a), [P((3, 3), seed=2)]),
]


def _write_through_a_view(x):
    """h's column written through a view of its transpose: h's history is
    the memory's old value with the column replaced (PyTorch's CopySlices)."""
    h = x * 1
    h.t()[1].mul_(x[:, 2] * 1)
    return h * h


def _read_a_stale_view(x):
    """A view taken before its base was written in place reads its history
    again from the base's (PyTorch's view regeneration)."""
    h = x * 1
    v = h[1:, ::2]
    h.mul_(x)
    return v * v


def _node_names(out):
    """The names of every node in the graph behind `out` (a tensor or a tuple)."""
    seen, stack, names = set(), [o.grad_fn for o in _outputs(out)], set()
    while stack:
        n = stack.pop()
        if n is None or n in seen:
            continue
        seen.add(n)
        names.add(n.name())
        stack.extend(f for f, _ in n.next_functions)
    return names


def _backward_name(op):
    return "".join(p.capitalize() for p in op.split("_")) + "Backward0"


def _outputs(r):
    return [r] if not isinstance(r, (tuple, list)) else list(r)


@pytest.mark.parametrize("case", CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_gradcheck(case):
    op, fn, specs, *opts = case
    opts = dict(opts[0]) if opts else {}
    opts.pop("double", None)
    xs = [s.make(ember) for s in specs]
    out = fn(ember, *xs)
    assert _backward_name(op) in _node_names(out), f"{op} was not recorded"
    assert gradcheck(lambda *a: fn(ember, *a), tuple(xs), **opts)


@pytest.mark.parametrize("case", CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_same_gradients_as_torch(case):
    """One backward with the same upstream gradient in both libraries."""
    op, fn, specs, *_ = case
    if op == "floor_divide":
        pytest.skip("PyTorch 1.13 has no derivative for floor_divide; ember's is zero, like floor's")
    if op.startswith("bessel_"):
        pytest.skip("PyTorch 1.13 has no derivative for special.bessel_*; gradcheck checks ember's")
    grads = {}
    for m in (ember, torch):
        xs = [s.make(m) for s in specs]
        outs = _outputs(fn(m, *xs))
        seeds = [m.tensor(np.random.default_rng(7).standard_normal(tuple(o.shape)), dtype=m.float64)
                 for o in outs]
        m.autograd.backward(outs, seeds)
        grads[m] = [x.grad for x in xs if x.requires_grad]
    for g, want in zip(grads[ember], grads[torch]):
        np.testing.assert_allclose(g.numpy(), want.numpy(), rtol=1e-10, atol=1e-12)


def _double(case):
    return case[0] in DOUBLE and (len(case) < 4 or case[3].get("double", True))


DOUBLE = ["exp", "log", "sqrt", "tanh", "sigmoid", "gelu", "gelu_tanh", "silu", "sin", "mul", "div",
          "pow", "maximum", "where", "clamp", "lerp", "mul_add", "atan", "asin", "acos", "atan2", "erfc", "bessel_j0", "bessel_j1",
          "bessel_y0", "bessel_y1", "sum", "mean", "prod", "amax", "var", "std",
          "norm", "logsumexp", "cumsum", "cumprod", "softmax", "log_softmax", "layer_norm", "matmul", "slice",
          "select",
          "cat", "index", "gather", "index_put", "erf", "rsqrt", "reciprocal", "softplus", "conv",
          "conv_transpose", "conv_weight", "unfold", "fold", "avg_pool", "avg_pool_grad", "adaptive_avg_pool",
          "max_pool_grad", "sort", "topk", "kthvalue", "median", "mode", "inv", "solve", "solve_triangular",
          "det", "slogdet", "cholesky", "eigh", "svd"]


@pytest.mark.parametrize("case", [c for c in CASES if _double(c)],
                         ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES) if _double(c)])
def test_gradgradcheck(case):
    op, fn, specs, *_ = case
    xs = [s.make(ember) for s in specs]
    assert gradgradcheck(lambda *a: fn(ember, *a), tuple(xs))


def test_every_differentiable_op_has_a_case():
    covered = {c[0] for c in CASES}
    missing = [op for op in ember._C._differentiable_ops() if op not in covered]
    assert not missing, f"no gradcheck case for {missing}"


def test_cumprod_second_derivative_at_zeros_refuses():
    """cumprod's gradient is exact at zeros, but differentiating it again
    there is not: create_graph over an input holding a zero raises a
    NotImplementedError that says so, instead of a wrong second derivative.
    Away from zeros it works (test_gradgradcheck)."""
    x = ember.tensor([[2.0, 0.0, 3.0]], dtype=ember.float64, requires_grad=True)
    with pytest.raises(NotImplementedError, match="cumprod: the second derivative"):
        ember.autograd.grad(x.cumprod(1).sum(), x, create_graph=True)
    (g,) = ember.autograd.grad(x.cumprod(1).sum(), x)  # first order: fine
    assert g.tolist() == [[1.0 + 0.0 + 0.0, 2.0 + 6.0, 0.0]]


def test_cumprod_gradient_in_a_compiled_step_with_and_without_zeros():
    """The gradient is ops only, so the graph traced on an input without
    zeros is right on one with them (the division it used to do gave NaN)."""
    w = ember.ones(6, dtype=ember.float64, requires_grad=True)

    def step(x):
        w.grad = None
        (w * x).cumprod(0).sum().backward()
        return w.grad * 1

    compiled = ember.compile(step)
    for values in ([1.5, 2.0, 0.5, 1.0, 3.0, 2.0], [1.5, 0.0, 2.0, 0.0, 1.0, 1.0],
                   [0.0, 1.0, 2.0, 3.0, 4.0, 5.0], [1.5, 2.0, 0.5, 1.0, 3.0, 0.0]):
        x = ember.tensor(values, dtype=ember.float64)
        want = step(x).numpy()
        xt = torch.tensor(values, dtype=torch.float64)
        wt = torch.ones(6, dtype=torch.float64, requires_grad=True)
        (wt * xt).cumprod(0).sum().backward()
        np.testing.assert_allclose(want, wt.grad.numpy(), rtol=1e-12)
        np.testing.assert_array_equal(compiled(x).numpy(), want)
    assert compiled._stats()["compiled_calls"] >= 2
