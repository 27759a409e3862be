"""More of PyTorch's API (issue 40, item 3), against PyTorch 1.13: the
inverse trigonometric ops and erfc (kernels of the op table), the
hyperbolic functions and their inverses, logs and sums of exponentials,
sign and part functions, shape helpers, activations and their modules,
parameter containers and nn.init's remaining functions. Values to a few
ulp and float64 gradients to 1e-9, at the points where naive formulas
cancel or overflow."""

import warnings

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")

X32 = np.array([-30., -2.5, -1e-6, 0.0, 1e-6, 0.7, 3.0, 50.0], dtype=np.float32)
X64 = np.array([-2.5, -0.6, -1e-7, 0.0, 1e-7, 0.3, 1.5, 40.0])


def same(a, b, rtol=2e-6):
    a = a if isinstance(a, (tuple, list)) else [a]
    b = b if isinstance(b, (tuple, list)) else [b]
    assert len(a) == len(b)
    for u, v in zip(a, b):
        u, v = np.asarray(u.detach().numpy()), np.asarray(v.detach().numpy())
        assert u.shape == v.shape and u.dtype == v.dtype, (u.shape, v.shape, u.dtype, v.dtype)
        np.testing.assert_allclose(u.astype(float), v.astype(float), rtol=rtol, atol=1e-30, equal_nan=True)


def both(fn, *arrays):
    return fn(ember, *[ember.tensor(a) for a in arrays]), fn(torch, *[torch.tensor(a) for a in arrays])


UNARY = ["atan", "arctan", "asin", "arcsin", "acos", "arccos", "erfc", "sinh", "cosh", "asinh", "arcsinh",
         "log10", "frac", "sgn", "signbit", "isposinf", "isneginf", "nan_to_num", "isreal"]


@pytest.mark.parametrize("name", UNARY)
def test_unary_values_match_pytorch(name):
    x = np.clip(X32, -0.99, 0.99) if name in ("asin", "arcsin", "acos", "arccos") else X32
    same(*both(lambda m, t: getattr(m, name)(t), x))
    if name not in ("signbit", "isposinf", "isneginf", "isreal"):
        same(*both(lambda m, t: getattr(t, name)(), x))


def test_inverse_hyperbolics_near_their_edges():
    same(*both(lambda m, t: m.acosh(t), np.array([1.0, 1 + 1e-6, 2.0, 10.0, 1e20], np.float32)))
    same(*both(lambda m, t: m.atanh(t), np.array([-0.999, -0.5, 0, 1e-7, 0.3, 0.99, 1.0], np.float32)))
    same(*both(lambda m, t: m.asinh(t), np.array([-1e20, -3, 1e-8, 2.0, 1e12], np.float32)))


@pytest.mark.parametrize("name", ["sinh", "cosh", "asinh", "atanh", "atan", "asin", "acos", "erfc", "log10",
                                  "acosh", "frac"])
def test_float64_gradients_match_pytorch(name):
    x = {"acosh": X64[X64 > 1.0] + 0.5, "atanh": np.clip(X64, -0.9, 0.9), "asin": np.clip(X64, -0.9, 0.9),
         "acos": np.clip(X64, -0.9, 0.9), "log10": np.abs(X64) + 0.1}.get(name, X64)
    grads = []
    for m in (ember, torch):
        t = m.tensor(x, requires_grad=True)
        getattr(m, name)(t).sum().backward()
        grads.append(t.grad)
    np.testing.assert_allclose(grads[0].numpy(), grads[1].numpy(), rtol=1e-9, atol=1e-12)


def test_binary_functions():
    a, b = X32, X32[::-1].copy()
    for name in ("atan2", "arctan2", "logaddexp", "logaddexp2", "hypot", "fmax", "fmin"):
        same(*both(lambda m, x, y: getattr(m, name)(x, y), a, b))
    same(*both(lambda m, x, y: m.copysign(x, -y), a, b))
    same(*both(lambda m, x: m.copysign(x, -0.0), a))
    same(*both(lambda m, x, v: m.heaviside(x, v), a, np.array([0.5], np.float32)))
    same(*both(lambda m, x, e: m.ldexp(x, e), a, np.array([3], np.int64)))
    same(*both(lambda m, x: m.float_power(x.abs(), 2), a))
    nan = np.array([np.nan, 1.0, np.inf, -np.inf], np.float32)
    same(*both(lambda m, x, y: m.fmax(x, y), nan, nan[::-1].copy()))
    same(*both(lambda m, x: m.nan_to_num(x, nan=2.0, posinf=9.0), nan))
    inf = np.array([-np.inf, -np.inf, np.inf, 1.0], np.float32)
    same(*both(lambda m, x, y: m.logaddexp(x, y), inf, np.array([-np.inf, 0.0, np.inf, 2.0], np.float32)))


def test_predicates():
    e = ember.tensor([3])
    assert ember.is_nonzero(e) and not ember.is_complex(e) and ember.is_signed(e)
    assert not ember.tensor([1], dtype=ember.uint8).is_signed()
    assert e.is_same_size(ember.tensor([4])) and not e.is_same_size(ember.ones(2))
    with pytest.raises(RuntimeError, match="ambiguous"):
        ember.is_nonzero(ember.ones(2))


M = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
V = np.array([1.5, -2.0, 0.25, 4.0], np.float32)


@pytest.mark.parametrize("case", [
    lambda m, t, v: m.diff(t, n=2, dim=1),
    lambda m, t, v: t.diff(prepend=t[..., :1], append=t[..., -1:]),
    lambda m, t, v: [m.rot90(t, k, (1, 2)) for k in (-1, 0, 1, 2, 3)],
    lambda m, t, v: m.kron(t[0], t[1, :2]),
    lambda m, t, v: m.meshgrid(v[:3], v[:2], indexing="ij"),
    lambda m, t, v: m.meshgrid(v[:3], v[:2], v, indexing="xy"),
    lambda m, t, v: [m.tril_indices(4, 3, -1), m.triu_indices(3, 5, 1), m.tril_indices(3, 3)],
    lambda m, t, v: m.cartesian_prod(v[:3], v[:2]),
    lambda m, t, v: [m.combinations(v, 2), m.combinations(v[:3], 2, True), m.combinations(v, 3)],
    lambda m, t, v: m.block_diag(t[0], t[1, :2], v[:2]),
    lambda m, t, v: [m.vander(v, 3), m.vander(v, increasing=True)],
    lambda m, t, v: [m.tensordot(t, t.permute(2, 1, 0), dims=([1, 2], [1, 0])),
                     m.tensordot(t, t.permute(1, 2, 0), 2)],
    lambda m, t, v: [m.trapz(t, dim=1), m.trapezoid(t, t * 0.5 + t ** 2), m.trapezoid(t, dx=0.5)],
    lambda m, t, v: [m.diag_embed(t, 1, 0, 2), m.diag_embed(t, -1), m.diagflat(t[0], -1)],
    lambda m, t, v: [*m.std_mean(t, 1), *m.var_mean(t), *m.aminmax(t, dim=2)],
    lambda m, t, v: [m.atleast_3d(v), *m.atleast_2d([t[0, 0, 0], v[:2]]), m.atleast_1d(t[0, 0, 0])],
    lambda m, t, v: [m.column_stack([v[:3], t[0, :, :2]]), m.dstack([t[0], t[1]]), m.row_stack([v, v])],
    lambda m, t, v: [*m.hsplit(t, 3), *m.vsplit(t, [1]), *m.dsplit(t, 2)],
])
def test_shape_helpers_match_pytorch(case):
    same(*both(case, M, V))


def test_shape_helpers_are_differentiable():
    t = ember.tensor(M.astype(np.float64), requires_grad=True)
    out = ember.kron(t[0], t[1, :2]).sum() + ember.diag_embed(t).sum() + ember.tensordot(t, t, ([0, 1, 2], [0, 1, 2]))
    out.backward()
    tt = torch.tensor(M.astype(np.float64), requires_grad=True)
    (torch.kron(tt[0], tt[1, :2]).sum() + torch.diag_embed(tt).sum() + torch.tensordot(tt, tt, ([0, 1, 2], [0, 1, 2]))
     ).backward()
    np.testing.assert_allclose(t.grad.numpy(), tt.grad.numpy(), rtol=1e-12)


ACTS = [("SELU", ()), ("CELU", (0.7,)), ("Softsign", ()), ("Softshrink", (0.6,)), ("Hardshrink", (0.6,)),
        ("Tanhshrink", ()), ("Threshold", (0.5, -2.0)), ("Hardsigmoid", ()), ("Hardswish", ()),
        ("Softmin", (1,)), ("Softmax2d", ()), ("GLU", (1,))]


@pytest.mark.parametrize("name,args", ACTS, ids=[a[0] for a in ACTS])
def test_activation_modules_and_gradients_match_pytorch(name, args):
    x = np.linspace(-4.05, 4.05, 40).reshape(1, 40, 1)  # (no point on a kink: PyTorch's own two kernels differ there)
    xs = []
    for m in (ember, torch):
        t = m.tensor(x, requires_grad=True)
        y = getattr(m.nn, name)(*args)(t)
        (y * m.linspace(0.5, 1.5, y.numel(), dtype=m.float64).reshape(y.shape)).sum().backward()
        xs.append((y, t.grad))
    same(xs[0][0], xs[1][0], rtol=1e-10)
    same(xs[0][1], xs[1][1], rtol=1e-7)
    assert repr(getattr(ember.nn, name)(*args)).split("(")[0] == name


def test_prelu_rrelu_and_in_place_forms():
    x = np.linspace(-2, 2, 12).reshape(2, 3, 2)
    outs = []
    for m in (ember, torch):
        t = m.tensor(x, requires_grad=True)
        p = m.nn.PReLU(3, 0.1).double()
        r = m.nn.RReLU()
        r.eval()
        y = p(t).sum() + r(t).sum() + m.nn.functional.prelu(t, m.tensor([0.2], dtype=m.float64)).sum()
        y.backward()
        outs.append((y, t.grad, p.weight.grad))
    for a, b in zip(*outs):
        same(a, b, rtol=1e-10)
    ember.manual_seed(0)
    y = ember.nn.functional.rrelu(ember.full((1000,), -1.0), training=True)
    assert (-1 / 3 <= y.numpy()).all() and (y.numpy() <= -1 / 8).all() and y.numpy().std() > 0.02
    z = ember.tensor([-1.0, 2.0])
    ember.nn.functional.relu_(z)
    assert z.tolist() == [0.0, 2.0]
    for fn in ("elu_", "leaky_relu_", "hardtanh_", "selu_", "celu_"):
        t = ember.tensor([-1.0, 2.0])
        assert getattr(ember.nn.functional, fn)(t) is t
    with pytest.raises(RuntimeError, match="Halving dimension must be even"):
        ember.nn.functional.glu(ember.ones(3), 0)


def test_parameter_containers_register_their_parameters():
    class M(ember.nn.Module):
        def __init__(self):
            super().__init__()
            self.pl = ember.nn.ParameterList([ember.nn.Parameter(ember.ones(2)), ember.zeros(3)])
            self.pd = ember.nn.ParameterDict({"a": ember.ones(2, 2)})

    m = M()
    assert [n for n, _ in m.named_parameters()] == ["pl.0", "pl.1", "pd.a"]
    assert isinstance(m.pl[1], ember.nn.Parameter) and m.pl[-1] is m.pl[1] and len(m.pl) == 2
    m.pl.append(ember.ones(1))
    m.pd["b"] = ember.zeros(1)
    assert len(list(m.parameters())) == 5 and "b" in m.pd and list(m.pd.keys()) == ["a", "b"]
    assert set(m.state_dict()) == {"pl.0", "pl.1", "pl.2", "pd.a", "pd.b"}
    with pytest.raises(TypeError):
        m.pl.append([1.0])


def test_init_dirac_sparse_and_the_deprecated_spellings():
    w, t = ember.empty(6, 3, 3, 3), torch.empty(6, 3, 3, 3)
    ember.nn.init.dirac_(w, 2)
    torch.nn.init.dirac_(t, 2)
    assert np.array_equal(w.numpy(), t.numpy())
    s = ember.empty(10, 4)
    ember.nn.init.sparse_(s, 0.3)
    assert ((s.numpy() == 0).sum(0) == 3).all()
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        ember.nn.init.normal(ember.empty(3))
        ember.nn.init.xavier_uniform(ember.empty(3, 4))
    assert [str(r.message) for r in rec][0] == "nn.init.normal is now deprecated in favor of nn.init.normal_."


def test_the_new_table_ops_compile():
    f = ember.compile(lambda a, b: (ember.atan2(a, b) + a.asin() * b.acos() + a.atan().erfc()).sum())
    a, b = ember.tensor([-0.9, -0.2, 0.1, 0.3, 0.99]), ember.tensor([0.5, -0.3, 0.2, 0.9, -0.1])
    want = (ember.atan2(a, b) + a.asin() * b.acos() + a.atan().erfc()).sum().item()
    for _ in range(3):
        assert f(a, b).item() == pytest.approx(want, rel=1e-6)
    stats = f._stats()
    assert stats["compiled_calls"] == 2 and stats["eager_calls"] == 0, stats  # (the new ops ran compiled)


def test_activations_at_infinities():
    x = np.array([-np.inf, -5.0, 5.0, np.inf], np.float32)
    for name, args in [("hardsigmoid", ()), ("hardswish", ()), ("threshold", (0.5, -2.0)), ("softshrink", ()),
                       ("hardshrink", ()), ("selu", ()), ("celu", ()), ("softsign", ())]:
        same(*both(lambda m, t: getattr(m.nn.functional, name)(t, *args), x))


# ---------------------------------------------------------------- _tensor_extras

XS = np.array([[3., 1, 4, 1, 5, 9, 2, 6, 5, 3, 5], [2, 7, 1, 8, 2, 8, 1, 8, 2, 8, 4]], np.float32)


@pytest.mark.parametrize("case", [
    lambda m, t: [*t.cummax(1), *t.cummin(1), *m.cummax(t[0], 0)],
    lambda m, t: [t.logcumsumexp(1), m.logcumsumexp(m.tensor([-1000., 0., -2000., 5.]), 0)],
    lambda m, t: [t.unfold(1, 3, 2), t.unfold(0, 1, 1), t.unfold(1, 11, 4)],
    lambda m, t: [m.quantile(t, q, dim=1, keepdim=True, interpolation=i)
                  for q in (0.3, m.tensor([0.1, 0.5, 0.9])) for i in ("linear", "lower", "higher", "midpoint",
                                                                        "nearest")],
    lambda m, t: [m.quantile(t, 0.25), m.quantile(t[0], m.tensor([0.0, 1.0]))],
    lambda m, t: [m.cov(t), m.corrcoef(t), m.cov(t, correction=0), m.cov(t[0])],
    lambda m, t: [m.dist(t[0], t[1], 3), m.dist(t[0], t[1]), t.renorm(2, 0, 5.0), t.renorm(1, 1, 3.0)],
    lambda m, t: [t.index_copy(1, m.tensor([0, 2]), t[:, :2] * 0), t.index_fill(1, m.tensor([0, 2]), -1.0)],
    lambda m, t: [t.masked_scatter(t > 4, m.arange(30.)), t.take(m.tensor([[0, 5], [12, 21]])),
                  t.put(m.tensor([0, 1, 0]), m.tensor([9., 8, 7]), accumulate=True)],
    lambda m, t: [m.addmv(t[:, 0], t[:, :3], t[0, :3], beta=0.5, alpha=2), m.addr(t[0, :3], t[0, :2], t[1, :3]),
                  m.addbmm(t[0, :4].reshape(2, 2), t[:, :4].reshape(2, 2, 2), t[:, 4:8].reshape(2, 2, 2))],
])
def test_tensor_extras_match_pytorch(case):
    same(*both(case, XS), rtol=1e-5)


def test_nan_handling_of_running_extremes_and_quantiles():
    x = XS.copy()
    x[0, 2] = np.nan
    same(*both(lambda m, t: [*t.cummax(1), *t.cummin(1)], x))
    same(*both(lambda m, t: [m.nanquantile(t, 0.5, dim=1), m.quantile(t, 0.5, dim=1)], x))


def test_in_place_spellings_and_fills():
    w = ember.ones(3, 3)
    assert w.tril_() is w and w.sum().item() == 6.0
    z, tz = ember.zeros(5, 3), torch.zeros(5, 3)
    z.fill_diagonal_(2.0, wrap=True)
    tz.fill_diagonal_(2.0, wrap=True)
    assert np.array_equal(z.numpy(), tz.numpy())
    x = ember.tensor([1.0, -2.0])
    v = x._version
    x.clamp_min_(0.0)
    assert x.tolist() == [1.0, 0.0] and x._version > v
    ember.manual_seed(0)
    r = ember.empty(2000)
    r.random_(0, 10)
    assert r.min().item() == 0 and r.max().item() == 9
    r.geometric_(0.3)
    assert r.min().item() >= 1 and abs(r.mean().item() - 1 / 0.3) < 0.3
    r.log_normal_(0.0, 0.5)
    assert r.min().item() > 0
    r.cauchy_()
    assert abs(r.median().item()) < 0.2


def test_real_tensor_identities():
    x = ember.ones(3)
    assert x.conj() is x and not x.is_conj() and ember.real(x) is x and x.resolve_neg() is x
    assert x.ndimension() == 1 and x.get_device() == -1 and not x.is_pinned()
    with pytest.raises(RuntimeError, match="non-complex"):
        ember.imag(x)


def test_scans_compile_and_differentiate():
    x = ember.tensor(XS.astype(np.float64), requires_grad=True)
    f = ember.compile(lambda t: t.logcumsumexp(1).sum() + t.cummax(1).values.sum())
    for _ in range(3):
        y = f(x)
    stats = f._stats()
    assert stats["compiled_calls"] == 2 and stats["eager_calls"] == 0, stats
    y.backward()
    t = torch.tensor(XS.astype(np.float64), requires_grad=True)
    (t.logcumsumexp(1).sum() + t.cummax(1).values.sum()).backward()
    np.testing.assert_allclose(y.item(), (torch.tensor(XS).double().logcumsumexp(1).sum()
                                          + torch.tensor(XS).double().cummax(1).values.sum()).item(), rtol=1e-12)
    np.testing.assert_allclose(x.grad.numpy(), t.grad.numpy(), rtol=1e-9)


def test_logaddexp_slopes_at_ties_are_halves():
    grads = []
    for m in (ember, torch):
        a = m.tensor([1.0, 2.0, -3.0], dtype=m.float64, requires_grad=True)
        b = m.tensor([1.0, 0.5, -3.0], dtype=m.float64, requires_grad=True)
        m.logaddexp(a, b).sum().backward()
        grads.append((a.grad.numpy(), b.grad.numpy()))
    np.testing.assert_allclose(grads[0][0], grads[1][0], rtol=1e-12)
    np.testing.assert_allclose(grads[0][1], grads[1][1], rtol=1e-12)


# ---------------------------------------------------------------- nn/_more.py

def test_max_unpool_inverts_max_pool_as_pytorch():
    x = np.random.default_rng(3).standard_normal((2, 3, 6, 8)).astype(np.float32)
    outs = []
    for m in (ember, torch):
        t = m.tensor(x)
        y, i = m.nn.functional.max_pool2d(t, 2, return_indices=True)
        u = m.nn.MaxUnpool2d(2)(y, i)
        u2 = m.nn.functional.max_unpool2d(y, i, 2, output_size=(7, 9))
        y1, i1 = m.nn.functional.max_pool1d_with_indices(t[0], 3, 2)
        outs.append([u, u2, m.nn.functional.max_unpool1d(y1, i1, 3, 2), *m.nn.functional.max_pool2d_with_indices(t, 3)])
    same(outs[0], outs[1])


@pytest.mark.filterwarnings("ignore:nn.functional.upsample")  # (both deprecate upsample_*, as they should)
def test_pooling_shuffles_distances_and_losses_match_pytorch():
    rng = np.random.default_rng(4)
    x = rng.standard_normal((2, 4, 6, 6))
    s = rng.standard_normal((5, 6))
    tgt = np.array([1, 0, 5, 3, 2])
    ml = np.array([[3, 0, -1, 1, 0, 0], [1, 2, 4, -1, 0, 0], [5, -1, 0, 0, 0, 0], [0, 1, 2, 3, 4, 5],
                   [-1, 0, 0, 0, 0, 0]])
    w = np.linspace(0.5, 1.5, 6)

    def run(m):
        F = m.nn.functional
        t = m.tensor(x, requires_grad=True)
        sc = m.tensor(s, requires_grad=True)
        outs = [F.lp_pool2d(t.abs(), 2, 2), F.lp_pool1d(t[0, 0].abs(), 3, 2, 1), m.nn.LPPool2d(1.5, 3)(t.abs()),
                m.nn.ChannelShuffle(2)(t.detach()), F.channel_shuffle(t.detach(), 4),  # (PyTorch: no derivative)
                F.pdist(sc), F.pdist(sc, 1),
                F.upsample_nearest(t, scale_factor=2), F.upsample_bilinear(t, size=(9, 9)),
                F.multi_margin_loss(sc, m.tensor(tgt)), F.multi_margin_loss(sc, m.tensor(tgt), p=2, margin=0.5,
                                                                            weight=m.tensor(w)),
                m.nn.MultiMarginLoss(reduction="none")(sc, m.tensor(tgt)),
                F.multilabel_margin_loss(sc, m.tensor(ml)), m.nn.MultiLabelMarginLoss(reduction="sum")(sc, m.tensor(ml)),
                F.triplet_margin_with_distance_loss(sc, sc * 0.5, sc.flip(0), margin=2.0),
                m.nn.TripletMarginWithDistanceLoss(distance_function=lambda a, b: (a - b).abs().sum(-1), swap=True)(
                    sc, sc * 0.5, sc.flip(0))]
        sum(o.sum() for o in outs).backward()
        return outs + [t.grad, sc.grad]
    same(run(ember), run(torch), rtol=1e-9)


def test_gumbel_softmax_samples_and_its_straight_through_gradient():
    ember.manual_seed(0)
    logits = ember.tensor(np.log([0.1, 0.2, 0.7]), requires_grad=True)
    soft = ember.nn.functional.gumbel_softmax(logits.expand(4000, 3), tau=0.5)
    assert np.allclose(soft.detach().numpy().sum(1), 1.0, atol=1e-6)
    hard = ember.nn.functional.gumbel_softmax(logits.expand(4000, 3), hard=True)
    counts = hard.detach().numpy().mean(0)
    assert set(np.unique(hard.detach().numpy())) <= {0.0, 1.0} and np.allclose(counts, [0.1, 0.2, 0.7], atol=0.03)
    (hard * ember.tensor([1.0, 2.0, 3.0])).sum().backward()
    assert logits.grad is not None and np.abs(logits.grad.numpy()).sum() > 0  # (the soft sample's gradient)


def test_lazy_linear_takes_its_input_size_on_the_first_call():
    ember.manual_seed(0)
    m = ember.nn.LazyLinear(3)
    assert "uninitialized" in repr(m)
    y = m(ember.ones(2, 5))
    assert type(m) is ember.nn.Linear and tuple(m.weight.shape) == (3, 5) and m.in_features == 5
    assert tuple(y.shape) == (2, 3) and len(list(m.parameters())) == 2


def test_functional_ops_at_the_top_level():
    assert ember.conv2d is ember.nn.functional.conv2d and ember.layer_norm is ember.nn.functional.layer_norm
    t = ember.ones(4)
    assert ember.dropout(t, 0.5, False) is t
    assert ember.dropout_(ember.ones(4), 0.0, True).tolist() == [1.0] * 4
    same(ember.pdist(ember.eye(3)), torch.pdist(torch.eye(3)))


# ---------------------------------------------------------------- linalg

def test_linalg_additions_match_pytorch():
    rng = np.random.default_rng(0)
    A = rng.standard_normal((3, 4, 4))
    A[1] = 0
    M = rng.standard_normal((2, 4, 4)) * 0.7
    v = [rng.standard_normal(s) for s in [(3,), (3, 4), (4, 5), (5,)]]
    T, B = rng.standard_normal((2, 3, 6)), rng.standard_normal((2, 3))
    same(*both(lambda m, a: list(m.linalg.inv_ex(a)), A), rtol=1e-9)
    same(*both(lambda m, a: [m.linalg.solve_ex(a, a[..., 0]).info, m.linalg.cholesky_ex(-a[0] @ a[0].mT).info], A))
    same(*both(lambda m, x: [m.linalg.matrix_exp(x), m.linalg.matrix_exp(x * 10), m.matrix_exp(x[0])], M),
         rtol=1e-12)
    same(*both(lambda m, x: [m.linalg.cond(x), m.linalg.cond(x, -2), m.linalg.cond(x, "fro"),
                             m.linalg.cond(x, 1)], M), rtol=1e-10)
    same(*both(lambda m, *xs: m.linalg.multi_dot(list(xs)), *v), rtol=1e-12)
    same(*both(lambda m, *xs: m.linalg.multi_dot(list(xs[1:3])), *v), rtol=1e-12)
    same(*both(lambda m, x: [m.linalg.vander(x[0, 0], N=5), m.linalg.vecdot(x[0], x[1]),
                             m.linalg.diagonal(x, offset=1), m.linalg.matmul(x[0], x[1])], M), rtol=1e-12)
    same(*both(lambda m, t: m.linalg.tensorinv(t.reshape(6, 2, 3), 1), T), rtol=1e-10)
    same(*both(lambda m, t, b: m.linalg.tensorsolve(t, b), T, B), rtol=1e-10)


def test_linalg_errors_are_linalg_errors():
    with pytest.raises(ember.linalg.LinAlgError, match="singular"):
        ember.linalg.inv(ember.zeros(2, 2))
    with pytest.raises(RuntimeError, match="positive-definite"):  # (a RuntimeError, as PyTorch's)
        ember.linalg.cholesky(-ember.eye(2))
    with pytest.raises(ember.linalg.LinAlgError):
        ember.linalg.inv_ex(ember.zeros(2, 2), check_errors=True)
    x = ember.tensor(np.eye(3) * 2, requires_grad=True)
    ember.linalg.matrix_exp(x).sum().backward()  # (differentiable: matmuls)
    np.testing.assert_allclose(x.grad.numpy().diagonal(), np.exp(2.0), rtol=1e-12)
