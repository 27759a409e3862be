"""Functions and methods real scripts touch (issue 40, item 3), against
PyTorch: finfo/iinfo, isclose/allclose, addcmul(_)/addcdiv(_),
index_add(_), repeat_interleave, normal, the legacy typed constructors,
Tensor.type, the device predicates and nn.init.orthogonal_; and that they
trace: a compiled function using them matches eager."""

import numpy as np
import pytest

import ember
from conftest import requires_torch, torch

DTYPES = ["float32", "float64", "float16", "bfloat16"]


@requires_torch
@pytest.mark.parametrize("name", DTYPES)
def test_finfo_matches_torch(name):
    e, t = ember.finfo(getattr(ember, name)), torch.finfo(getattr(torch, name))
    for field in ("bits", "eps", "max", "min", "tiny", "resolution"):
        assert getattr(e, field) == getattr(t, field), field


@requires_torch
@pytest.mark.parametrize("name", ["int64", "int32", "int16", "int8", "uint8"])
def test_iinfo_matches_torch(name):
    e, t = ember.iinfo(getattr(ember, name)), torch.iinfo(getattr(torch, name))
    assert (e.bits, e.min, e.max) == (t.bits, t.min, t.max)


def test_finfo_and_iinfo_refuse_the_other_kind():
    with pytest.raises(TypeError, match="not a floating point dtype"):
        ember.finfo(ember.int64)
    with pytest.raises(TypeError, match="not an integer dtype"):
        ember.iinfo(ember.float32)


@requires_torch
@pytest.mark.parametrize("equal_nan", [False, True])
def test_isclose_and_allclose_match_torch(equal_nan):
    a = np.array([1.0, np.nan, np.inf, -np.inf, 1e-9, 2.0, 0.0, np.inf], np.float32)
    b = np.array([1.0 + 1e-6, np.nan, np.inf, np.inf, 0.0, 2.1, -0.0, 1e38], np.float32)
    for rtol, atol in [(1e-5, 1e-8), (0.1, 0.0), (0.0, 0.0)]:
        got = ember.isclose(ember.from_numpy(a), ember.from_numpy(b), rtol, atol, equal_nan).numpy()
        want = torch.isclose(torch.from_numpy(a), torch.from_numpy(b), rtol, atol, equal_nan).numpy()
        np.testing.assert_array_equal(got, want)
        assert ember.allclose(ember.from_numpy(a[:1]), ember.from_numpy(b[:1]), rtol, atol) == \
            torch.allclose(torch.from_numpy(a[:1]), torch.from_numpy(b[:1]), rtol, atol)
    ia, ib = np.array([1, 5, 100, -7]), np.array([1, 6, 100, -7])
    np.testing.assert_array_equal(ember.from_numpy(ia).isclose(ember.from_numpy(ib)).numpy(),
                                  torch.from_numpy(ia).isclose(torch.from_numpy(ib)).numpy())


@requires_torch
def test_addcmul_and_addcdiv_match_torch():
    rng = np.random.default_rng(0)
    x, t1, t2 = (rng.standard_normal((3, 4)).astype(np.float32) for _ in range(3))
    t2 = np.abs(t2) + 0.5
    E, T = (ember.from_numpy(v) for v in (x, t1, t2)), [torch.from_numpy(v) for v in (x, t1, t2)]
    E = list(E)
    for value in (1, 0.5, -2):
        np.testing.assert_allclose(E[0].addcmul(E[1], E[2], value=value).numpy(),
                                   T[0].addcmul(T[1], T[2], value=value).numpy(), rtol=1e-6)
        np.testing.assert_allclose(ember.addcdiv(E[0], E[1], E[2], value=value).numpy(),
                                   torch.addcdiv(T[0], T[1], T[2], value=value).numpy(), rtol=1e-6)
    e, t = E[0].clone(), T[0].clone()
    assert e.addcmul_(E[1], E[2], value=3) is e
    t.addcmul_(T[1], T[2], value=3)
    e.addcdiv_(E[1], E[2], value=-1)
    t.addcdiv_(T[1], T[2], value=-1)
    np.testing.assert_allclose(e.numpy(), t.numpy(), rtol=1e-6)
    with pytest.raises(RuntimeError, match="integer division"):
        ember.addcdiv(ember.zeros(2), ember.tensor([1, 2]), ember.tensor([1, 2]))


@requires_torch
@pytest.mark.parametrize("dim", [0, 1, -1])
def test_index_add_matches_torch_with_repeats(dim):
    base = np.arange(20.0, dtype=np.float32).reshape(4, 5)
    n = base.shape[dim]
    idx = np.array([0, n - 1, 0, 1])
    shape = list(base.shape)
    shape[dim] = 4
    src = np.arange(np.prod(shape), dtype=np.float32).reshape(shape)
    e = ember.from_numpy(base.copy()).index_add_(dim, ember.from_numpy(idx), ember.from_numpy(src), alpha=2)
    t = torch.from_numpy(base.copy()).index_add_(dim, torch.from_numpy(idx), torch.from_numpy(src), alpha=2)
    np.testing.assert_array_equal(e.numpy(), t.numpy())
    out = ember.from_numpy(base).index_add(dim, ember.from_numpy(idx), ember.from_numpy(src))
    np.testing.assert_array_equal(out.numpy(), torch.from_numpy(base).index_add(
        dim, torch.from_numpy(idx), torch.from_numpy(src)).numpy())
    with pytest.raises(IndexError, match="out of range"):
        ember.zeros(2, 2).index_add_(2, ember.tensor([0]), ember.ones(2, 1))


@requires_torch
def test_repeat_interleave_matches_torch():
    x = np.arange(12.0, dtype=np.float32).reshape(3, 4)
    cases = [dict(repeats=2), dict(repeats=2, dim=1), dict(repeats=[1, 0, 2], dim=0), dict(repeats=[3], dim=1)]
    for kw in cases:
        er = dict(kw)
        tr = dict(kw)
        if isinstance(kw["repeats"], list):
            er["repeats"], tr["repeats"] = ember.tensor(kw["repeats"]), torch.tensor(kw["repeats"])
        np.testing.assert_array_equal(ember.from_numpy(x).repeat_interleave(**er).numpy(),
                                      torch.from_numpy(x).repeat_interleave(**tr).numpy())
    np.testing.assert_array_equal(ember.repeat_interleave(ember.tensor([2, 0, 3])).numpy(),
                                  torch.repeat_interleave(torch.tensor([2, 0, 3])).numpy())
    with pytest.raises(RuntimeError, match="same size as input along dim"):
        ember.ones(3).repeat_interleave(ember.tensor([1, 2]))


def test_normal_forms_and_laws():
    ember.manual_seed(0)
    n = ember.normal(ember.full((40000,), 1.0), ember.full((40000,), 2.0))
    assert abs(float(n.mean()) - 1.0) < 0.05 and abs(float(n.std()) - 2.0) < 0.05
    m = ember.normal(3.0, 0.5, size=(40000,))
    assert m.dtype == ember.float32 and abs(float(m.mean()) - 3.0) < 0.02 and abs(float(m.std()) - 0.5) < 0.02
    assert ember.normal(ember.zeros(2, 3)).shape == (2, 3)
    assert ember.normal(ember.zeros(2, 1), ember.ones(3)).shape == (2, 3)
    with pytest.raises(RuntimeError, match="std >= 0"):
        ember.normal(0.0, -1.0, size=(2,))
    g = ember.Generator().manual_seed(5)
    a = ember.normal(0.0, 1.0, size=(4,), generator=g)
    g.manual_seed(5)
    np.testing.assert_array_equal(a.numpy(), ember.normal(0.0, 1.0, size=(4,), generator=g).numpy())


def test_typed_constructors_type_and_device_predicates():
    assert ember.LongTensor([1, 2, 3]).dtype == ember.int64
    assert ember.FloatTensor(2, 3).shape == (2, 3) and ember.FloatTensor(2, 3).dtype == ember.float32
    assert ember.FloatTensor().shape == (0,)
    assert ember.DoubleTensor(ember.ones(2)).dtype == ember.float64
    assert isinstance(ember.LongTensor([1]), ember.LongTensor) and not isinstance(ember.ones(1), ember.LongTensor)
    x = ember.arange(6.0)
    assert x.type() == "ember.FloatTensor" and x.type(ember.float32) is x
    assert x.type(ember.int64).dtype == ember.int64
    assert x.type("torch.LongTensor").dtype == ember.int64 and x.type(ember.ByteTensor).dtype == ember.uint8
    with pytest.raises(ValueError, match="invalid type"):
        x.type("torch.NoSuchTensor")
    assert not (x.is_xpu or x.is_mps or x.is_meta or x.is_sparse or x.is_quantized or x.is_cuda)
    with pytest.raises(TypeError, match="expected data"):
        ember.FloatTensor(2, "3")


@pytest.mark.parametrize("shape,gain", [((6, 4), 1.0), ((4, 6), 2.0), ((3, 2, 4), 1.0)])
def test_orthogonal_init(shape, gain):
    w = ember.empty(*shape)
    assert ember.nn.init.orthogonal_(w, gain=gain) is w
    m = w.numpy().reshape(shape[0], -1).astype(np.float64)
    small = min(m.shape)
    gram = m.T @ m if m.shape[0] >= m.shape[1] else m @ m.T
    np.testing.assert_allclose(gram, gain ** 2 * np.eye(small), atol=1e-5)
    with pytest.raises(ValueError, match="2 or more dimensions"):
        ember.nn.init.orthogonal_(ember.empty(3))


def test_they_trace_and_compile_equal_to_eager():
    def f(x, t1, t2, idx):
        y = x.addcmul(t1, t2, value=0.5).addcdiv(t1, t2.abs() + 1)
        z = ember.zeros(5, 3).index_add(0, idx, y)
        close = ember.isclose(z, z * 1.0)
        return z.repeat_interleave(2, dim=0), close

    ember.manual_seed(1)
    args = (ember.randn(4, 3), ember.randn(4, 3), ember.randn(4, 3), ember.tensor([0, 2, 2, 4]))
    cf = ember.compile(f)
    for _ in range(3):
        got = cf(*args)
    want = f(*args)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g.numpy(), w.numpy())
    assert cf._stats()["compiled_calls"] >= 1


@requires_torch
@pytest.mark.parametrize("offset,dim1,dim2", [(0, 0, 1), (1, 0, 1), (-1, 0, 1), (2, 1, 2), (0, 2, 0),
                                             (-2, -1, -2), (7, 0, 1)])
def test_diagonal_is_torch_s_view(offset, dim1, dim2):
    a = np.arange(60.0, dtype=np.float32).reshape(3, 4, 5)
    e, t = ember.from_numpy(a).diagonal(offset, dim1, dim2), torch.from_numpy(a).diagonal(offset, dim1, dim2)
    assert tuple(e.shape) == tuple(t.shape) and e.stride() == t.stride()
    np.testing.assert_array_equal(e.numpy(), t.numpy())
    np.testing.assert_array_equal(ember.diagonal(ember.from_numpy(a), offset, dim1, dim2).numpy(), t.numpy())


def test_writes_through_the_diagonal_reach_the_tensor():
    x = ember.zeros(3, 4)
    x.diagonal().fill_(7.0)
    x.diagonal(1).add_(1.0)
    want = np.zeros((3, 4), np.float32)
    np.fill_diagonal(want, 7.0)
    want[[0, 1, 2], [1, 2, 3]] += 1.0
    np.testing.assert_array_equal(x.numpy(), want)
    with pytest.raises(RuntimeError, match="identical"):
        x.diagonal(0, 1, 1)
    with pytest.raises(RuntimeError, match="at least 2 dims"):
        ember.ones(3).diagonal()


@requires_torch
def test_diagonal_gradients_first_and_second_order_match_torch():
    rng = np.random.default_rng(0)
    a = rng.standard_normal((3, 4, 5)).astype(np.float64)
    w, tw = ember.from_numpy(a.copy()).requires_grad_(), torch.from_numpy(a.copy()).requires_grad_()
    for m, x in ((ember, w), (torch, tw)):
        y = (x.diagonal(-1, 2, 0) ** 3).sum()
        (g,) = m.autograd.grad(y, x, create_graph=True)
        (g * g).sum().backward()
    np.testing.assert_allclose(w.grad.numpy(), tw.grad.numpy(), rtol=1e-12)


def test_diagonal_compiles_reads_writes_and_backward():
    def f(x, w):
        x.diagonal().add_(1.0)            # a write through the view into an argument
        loss = (w.diagonal(1) * x.diagonal(1)).sum()
        loss.backward()
        return loss.detach()

    def make():
        return ember.arange(16.0).reshape(4, 4), (ember.arange(16.0).reshape(4, 4) / 10).requires_grad_()

    cf = ember.compile(f)
    xe, we = make()
    xc, wc = make()
    for _ in range(3):
        we.grad = wc.grad = None
        np.testing.assert_array_equal(cf(xc, wc).numpy(), f(xe, we).numpy())
        np.testing.assert_array_equal(xc.numpy(), xe.numpy())
        np.testing.assert_array_equal(wc.grad.numpy(), we.grad.numpy())
    assert cf._stats()["eager_calls"] == 0 and cf._stats()["compiled_calls"] >= 1, cf._stats()["fallbacks"]


@requires_torch
def test_aliases_and_small_compositions_match_torch():
    a = np.array([[1.0, np.nan, 3.0], [0.0, 5.0, np.nan]], np.float32)
    e, t = ember.from_numpy(a), torch.from_numpy(a)
    for name, kw in [("nansum", {}), ("nansum", dict(dim=1)), ("nanmean", {}), ("nanmean", dict(dim=0, keepdim=True)),
                     ("count_nonzero", {}), ("count_nonzero", dict(dim=1)), ("deg2rad", {}), ("rad2deg", {}),
                     ("ravel", {}), ("positive", {})]:
        got, want = getattr(ember, name)(e, **kw), getattr(torch, name)(t, **kw)
        assert tuple(got.shape) == tuple(want.shape), name
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-6, equal_nan=True, err_msg=name)
        np.testing.assert_allclose(getattr(e, name)(**kw).numpy(), want.numpy(), rtol=1e-6, equal_nan=True)
    m = np.arange(12.0, dtype=np.float32).reshape(3, 4)
    em, tm = ember.from_numpy(m), torch.from_numpy(m)
    assert float(ember.trace(em)) == float(torch.trace(tm))
    for k in (0, 1, -2):
        np.testing.assert_array_equal(ember.diag(em, k).numpy(), torch.diag(tm, k).numpy())
    np.testing.assert_array_equal(ember.swapaxes(em, 0, 1).numpy(), torch.swapaxes(tm, 0, 1).numpy())
    np.testing.assert_array_equal(em.swapdims(1, 0).numpy(), tm.swapdims(1, 0).numpy())
    np.testing.assert_array_equal(ember.moveaxis(em, 0, 1).numpy(), torch.moveaxis(tm, 0, 1).numpy())
    np.testing.assert_array_equal(em.clamp_min(5).numpy(), tm.clamp_min(5).numpy())
    np.testing.assert_array_equal(em.clamp_max(5).numpy(), tm.clamp_max(5).numpy())
    with pytest.raises(TypeError, match="bool"):
        ember.positive(ember.ones(2, dtype=ember.bool))


@requires_torch
@pytest.mark.parametrize("k", [0, 2, -1])
def test_diag_of_a_vector_and_its_gradient_match_torch(k):
    v = np.array([1.0, 2.0, 3.0], np.float32)
    np.testing.assert_array_equal(ember.diag(ember.from_numpy(v), k).numpy(), torch.diag(torch.from_numpy(v), k).numpy())
    n = 3 + abs(k)
    w = ember.from_numpy(v).requires_grad_()
    (ember.diag(w, k) * ember.arange(float(n * n)).reshape(n, n)).sum().backward()
    tw = torch.from_numpy(v).requires_grad_()
    (torch.diag(tw, k) * torch.arange(float(n * n)).reshape(n, n)).sum().backward()
    np.testing.assert_array_equal(w.grad.numpy(), tw.grad.numpy())
