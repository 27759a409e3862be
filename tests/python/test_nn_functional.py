"""ember.nn.functional and the modules built on it, against PyTorch 1.13.

Every case runs the same computation on the same values in both libraries
and compares the outputs, then backpropagates the same random upstream
gradient through both and compares the gradient of every input and weight.
Where PyTorch 1.13 lacks a function (rms_norm,
scaled_dot_product_attention) the reference is its formula written with
torch ops. float64 comparisons are tight (rtol 1e-7); float32 ones are
within a few ulp of accumulated rounding (rtol 1e-5)."""

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as TF

import ember
import ember.nn as enn
import ember.nn.functional as EF
from ember.autograd import gradcheck

# PyTorch's own notices: F.tanh/F.sigmoid's deprecation (called here on purpose) and the
# copy its asymmetric padding="same" makes
pytestmark = [pytest.mark.filterwarnings("ignore:nn.functional.(tanh|sigmoid) is deprecated"),
              pytest.mark.filterwarnings("ignore:Using padding='same' with even kernel")]

F64 = dict(rtol=1e-7, atol=1e-10)
F32 = dict(rtol=1e-5, atol=1e-6)


# ---------------------------------------------------------------- helpers

def rnd(shape, seed=0, lo=-2.0, hi=2.0, dtype=np.float64):
    """Deterministic uniform values in [lo, hi)."""
    return np.random.default_rng(seed).uniform(lo, hi, shape).astype(dtype)


class K:
    """A constant input (indices, masks, targets, running statistics): a
    tensor of `dtype` on each side that does not require grad."""

    def __init__(self, values, dtype=None):
        self.values = np.asarray(values)
        self.dtype = dtype

    def make(self, m):
        t = m.from_numpy(np.array(self.values, copy=True))
        return t if self.dtype is None else t.to(getattr(m, self.dtype))


def _make(m, a):
    """A float ndarray becomes a leaf that requires grad; K its constant."""
    if isinstance(a, K):
        return a.make(m)
    if isinstance(a, np.ndarray):
        t = m.from_numpy(np.array(a, copy=True))
        return t.requires_grad_() if a.dtype.kind == "f" else t
    return a


def _flat(out):
    if isinstance(out, (tuple, list)):
        return [y for o in out for y in _flat(o)]
    return [out]


def _dt(t):
    return str(t.dtype).split(".")[-1]


def _close(e, t, rtol, atol, what):
    assert (e is None) == (t is None), f"{what}: ember {e!r} vs torch {t!r}"
    if t is None:
        return
    assert tuple(e.shape) == tuple(t.shape), f"{what}: shape {tuple(e.shape)} vs {tuple(t.shape)}"
    assert _dt(e) == _dt(t), f"{what}: dtype {e.dtype} vs {t.dtype}"
    np.testing.assert_allclose(e.detach().numpy(), t.detach().numpy(), rtol=rtol, atol=atol,
                               equal_nan=True, err_msg=what)


def compare(fe, ft, args, rtol=1e-7, atol=1e-10, grad=True, seed=1234, weights=()):
    """Runs fe on ember tensors and ft on torch tensors made from the same
    `args`, compares the outputs, then (with grad) backpropagates the same
    random upstream gradient through both and compares the .grad of every
    differentiable input and of every (ember, torch) pair in `weights`.
    Returns (ember inputs, torch inputs, ember outputs, torch outputs)."""
    e_in = [_make(ember, a) for a in args]
    t_in = [_make(torch, a) for a in args]
    e_out, t_out = _flat(fe(*e_in)), _flat(ft(*t_in))
    assert len(e_out) == len(t_out)
    for i, (e, t) in enumerate(zip(e_out, t_out)):
        _close(e, t, rtol, atol, f"output {i}")
    if not grad:
        return e_in, t_in, e_out, t_out
    rng = np.random.default_rng(seed)
    e_seeds, t_seeds, e_roots, t_roots = [], [], [], []
    for e, t in zip(e_out, t_out):
        if t is None or not t.requires_grad:
            assert e is None or not e.requires_grad
            continue
        assert e.requires_grad, "ember output does not require grad where torch's does"
        g = rng.standard_normal(tuple(t.shape)).astype(t.detach().numpy().dtype)
        e_roots.append(e)
        t_roots.append(t)
        e_seeds.append(ember.from_numpy(g.copy()))
        t_seeds.append(torch.from_numpy(g.copy()))
    if not t_roots:
        return e_in, t_in, e_out, t_out
    ember.autograd.backward(e_roots, e_seeds)
    torch.autograd.backward(t_roots, t_seeds)
    pairs = [(e, t, f"grad of input {i}") for i, (e, t) in enumerate(zip(e_in, t_in))
             if isinstance(t, torch.Tensor) and t.requires_grad]
    pairs += [(e, t, f"grad of {name}") for name, e, t in weights]
    for e, t, what in pairs:
        if t.grad is None:
            assert e.grad is None or not e.grad.numpy().any(), f"{what}: torch has none"
        else:
            assert e.grad is not None, f"{what}: ember has none"
            _close(e.grad, t.grad, rtol, atol, what)
    return e_in, t_in, e_out, t_out


def check(fn, *args, **kw):
    """compare() for fn(m, F, *inputs) written once for both libraries (m is
    ember or torch, F its nn.functional)."""
    return compare(lambda *a: fn(ember, EF, *a), lambda *a: fn(torch, TF, *a), args, **kw)


def copy_into_torch(em, tm):
    """Gives torch module `tm` the parameters and buffers of ember module
    `em` (their state_dict keys must agree)."""
    es, ts = em.state_dict(), tm.state_dict()
    assert list(es) == list(ts)
    with torch.no_grad():
        for k, v in es.items():
            ts[k].copy_(torch.from_numpy(v.numpy().copy()))


def check_module(em, tm, *args, call=None, **kw):
    """compare() of two modules with the same state, weights' grads included."""
    copy_into_torch(em, tm)
    call = call or (lambda mod, *a: mod(*a))
    tp = dict(tm.named_parameters())
    weights = [(n, p, tp[n]) for n, p in em.named_parameters()]
    return compare(lambda *a: call(em, *a), lambda *a: call(tm, *a), args, weights=weights, **kw)


def raises_like(fn, *args, match=None):
    """Both libraries raise from fn(m, F, *inputs), with the same exception
    type; returns ember's exception."""
    with pytest.raises(Exception) as t_exc:
        fn(torch, TF, *[_make(torch, a) for a in args])
    with pytest.raises(type(t_exc.value), match=match) as e_exc:
        fn(ember, EF, *[_make(ember, a) for a in args])
    return e_exc.value


# ---------------------------------------------------------------- linear

@pytest.mark.parametrize("xshape", [(5,), (4, 5), (2, 3, 5)])
@pytest.mark.parametrize("bias", [True, False])
def test_linear(xshape, bias):
    b = rnd((3,), 2) if bias else None
    check(lambda m, F, x, w, b: F.linear(x, w, b), rnd(xshape, 0), rnd((3, 5), 1), b)


@pytest.mark.parametrize("bias", [True, False])
def test_linear_module(bias):
    em = enn.Linear(5, 3, bias=bias, dtype=ember.float64)
    tm = torch.nn.Linear(5, 3, bias=bias, dtype=torch.float64)
    check_module(em, tm, rnd((2, 4, 5)))


def test_linear_float32():
    em, tm = enn.Linear(7, 6), torch.nn.Linear(7, 6)
    check_module(em, tm, rnd((4, 7), dtype=np.float32), **F32)


def test_identity():
    check_module(enn.Identity(3, foo=1), torch.nn.Identity(3, foo=1), rnd((2, 3)))


# ---------------------------------------------------------------- activations

# random values plus the kinks (0, 6, +-1) and a few large ones
ACT_X = np.concatenate([rnd((30,), 7, -4, 8), [0.0, 6.0, -1.0, 1.0, 25.0, -25.0]]).reshape(4, 9)

ACTIVATIONS = [
    ("relu", lambda F, x: F.relu(x)),
    ("relu6", lambda F, x: F.relu6(x)),
    ("leaky_relu", lambda F, x: F.leaky_relu(x)),
    ("leaky_relu_0.2", lambda F, x: F.leaky_relu(x, 0.2)),
    ("elu", lambda F, x: F.elu(x)),
    ("elu_0.5", lambda F, x: F.elu(x, alpha=0.5)),
    ("gelu", lambda F, x: F.gelu(x)),
    ("gelu_tanh", lambda F, x: F.gelu(x, approximate="tanh")),
    ("silu", lambda F, x: F.silu(x)),
    ("mish", lambda F, x: F.mish(x)),
    ("softplus", lambda F, x: F.softplus(x)),
    ("softplus_beta", lambda F, x: F.softplus(x, beta=2.0, threshold=5.0)),
    ("logsigmoid", lambda F, x: F.logsigmoid(x)),
    ("hardtanh", lambda F, x: F.hardtanh(x)),
    ("hardtanh_range", lambda F, x: F.hardtanh(x, -0.5, 6.0)),
    ("tanh", lambda F, x: F.tanh(x)),
    ("sigmoid", lambda F, x: F.sigmoid(x)),
    ("softmax_0", lambda F, x: F.softmax(x, dim=0)),
    ("softmax_1", lambda F, x: F.softmax(x, dim=1)),
    ("log_softmax_0", lambda F, x: F.log_softmax(x, dim=0)),
    ("log_softmax_-1", lambda F, x: F.log_softmax(x, dim=-1)),
]


@pytest.mark.parametrize("name,fn", ACTIVATIONS, ids=[a[0] for a in ACTIVATIONS])
def test_activation(name, fn):
    check(lambda m, F, x: fn(F, x), ACT_X)


@pytest.mark.parametrize("name,fn", ACTIVATIONS, ids=[a[0] for a in ACTIVATIONS])
def test_activation_float32(name, fn):
    check(lambda m, F, x: fn(F, x), ACT_X.astype(np.float32), **F32)


INPLACE = [
    ("relu", lambda F, x: F.relu(x, inplace=True)),
    ("relu6", lambda F, x: F.relu6(x, inplace=True)),
    ("leaky_relu", lambda F, x: F.leaky_relu(x, 0.1, inplace=True)),
    ("elu", lambda F, x: F.elu(x, inplace=True)),
    ("silu", lambda F, x: F.silu(x, inplace=True)),
    ("mish", lambda F, x: F.mish(x, inplace=True)),
    ("hardtanh", lambda F, x: F.hardtanh(x, inplace=True)),
]


@pytest.mark.parametrize("name,fn", INPLACE, ids=[a[0] for a in INPLACE])
def test_activation_inplace(name, fn):
    """In place on an intermediate: the result is that tensor, modified, and
    the gradient still reaches the leaf."""
    def run(m, F, x):
        y = x * 1.0
        out = fn(F, y)
        assert out is y
        return y
    check(run, ACT_X)


def test_activation_inplace_without_grad():
    for name, fn in INPLACE:
        y, ty = ember.from_numpy(ACT_X.copy()), torch.from_numpy(ACT_X.copy())
        out = fn(EF, y)
        fn(TF, ty)
        assert out is y
        np.testing.assert_allclose(y.numpy(), ty.numpy(), rtol=1e-12, err_msg=name)


MODULES_ACT = [
    ("ReLU", {}), ("ReLU", {"inplace": True}), ("ReLU6", {}), ("LeakyReLU", {}),
    ("LeakyReLU", {"negative_slope": 0.2, "inplace": True}), ("ELU", {"alpha": 0.5}),
    ("GELU", {}), ("GELU", {"approximate": "tanh"}), ("SiLU", {}), ("SiLU", {"inplace": True}),
    ("Mish", {}), ("Mish", {"inplace": True}), ("Softplus", {"beta": 2.0, "threshold": 5.0}),
    ("LogSigmoid", {}), ("Hardtanh", {"min_val": -0.5, "max_val": 2.0}),
    ("Hardtanh", {"inplace": True}), ("Tanh", {}), ("Sigmoid", {}), ("Softmax", {"dim": 1}),
    ("LogSoftmax", {"dim": -1}),
]


@pytest.mark.parametrize("name,kw", MODULES_ACT, ids=[f"{n}{k}" for n, k in MODULES_ACT])
def test_activation_module(name, kw):
    em, tm = getattr(enn, name)(**kw), getattr(torch.nn, name)(**kw)
    assert repr(em) == repr(tm)
    # on an intermediate, so that inplace modules may modify it
    check_module(em, tm, ACT_X, call=lambda mod, x: mod(x * 1.0))


def test_softmax_implicit_dim_warns():
    x = rnd((2, 3, 4))
    for f in ("softmax", "log_softmax"):
        with pytest.warns(UserWarning):
            t = getattr(TF, f)(torch.from_numpy(x))
        with pytest.warns(UserWarning, match="Implicit dimension"):
            e = getattr(EF, f)(ember.from_numpy(x))
        _close(e, t, **F64, what=f)


def test_softmax_dtype():
    check(lambda m, F, x: F.softmax(x, dim=1, dtype=m.float64), rnd((3, 4), dtype=np.float32))
    check(lambda m, F, x: F.log_softmax(x, dim=1, dtype=m.float64), rnd((3, 4), dtype=np.float32))


# ---------------------------------------------------------------- normalisation

@pytest.mark.parametrize("shape", [(5,), (4, 5)])
@pytest.mark.parametrize("affine", ["both", "weight", "none"])
def test_layer_norm(shape, affine):
    w = rnd(shape, 1) if affine != "none" else None
    b = rnd(shape, 2) if affine == "both" else None
    check(lambda m, F, x, w, b: F.layer_norm(x, shape, w, b, eps=1e-5), rnd((3, 4, 5)), w, b)


def test_layer_norm_float32():
    check(lambda m, F, x, w, b: F.layer_norm(x, (6,), w, b), rnd((4, 6), 0, dtype=np.float32),
          rnd((6,), 1, dtype=np.float32), rnd((6,), 2, dtype=np.float32), **F32)


@pytest.mark.parametrize("affine", ["both", "weight", "bias", "none"])
def test_layer_norm_long_float32_rows(affine):
    """Rows of 1027 (the float32 kernel's 16 lanes and a tail), a constant
    row (variance 0) and rows of large values, against PyTorch with
    gradients; a transposed (non-contiguous) input too."""
    x = rnd((6, 1027), 0, dtype=np.float32)
    x[1] = 0.75
    x[2] = x[2] * 1e4 + 3e4
    w = rnd((1027,), 1, dtype=np.float32) if affine in ("both", "weight") else None
    b = rnd((1027,), 2, dtype=np.float32) if affine in ("both", "bias") else None
    tol = dict(rtol=2e-4, atol=2e-4)
    check(lambda m, F, x, w, b: F.layer_norm(x, (1027,), w, b), x, w, b, **tol)
    xt = np.ascontiguousarray(x.T)
    check(lambda m, F, x, w, b: F.layer_norm(x.t(), (1027,), w, b), xt, w, b, **tol)


@pytest.mark.parametrize("affine", ["both", "weight", "none"])
def test_layer_norm_streamed_output(affine):
    """An output of 16 MiB and more is written with streaming stores
    (ops_stream.h) in 64-byte blocks after a plain head: rows of
    1027 floats start at every alignment. Against PyTorch, and bit for bit
    against the same rows normalised alone (a small output: plain stores)."""
    x = rnd((4100, 1027), 3, dtype=np.float32)  # 16.8 MB of output
    w = rnd((1027,), 1, dtype=np.float32) if affine != "none" else None
    b = rnd((1027,), 2, dtype=np.float32) if affine == "both" else None
    ew, eb = (ember.from_numpy(a) if a is not None else None for a in (w, b))
    big = EF.layer_norm(ember.from_numpy(x), (1027,), ew, eb).numpy()
    tw, tb = (torch.from_numpy(a) if a is not None else None for a in (w, b))
    np.testing.assert_allclose(big, TF.layer_norm(torch.from_numpy(x), (1027,), tw, tb).numpy(),
                               rtol=2e-4, atol=2e-4)
    for r0 in (0, 17, 4093):
        alone = EF.layer_norm(ember.from_numpy(x[r0:r0 + 7].copy()), (1027,), ew, eb).numpy()
        np.testing.assert_array_equal(big[r0:r0 + 7], alone)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_layer_norm_half_dtypes(dtype):
    x, w, b = rnd((5, 40), 0), rnd((40,), 1), rnd((40,), 2)
    e = EF.layer_norm(ember.from_numpy(x).to(getattr(ember, dtype)), (40,),
                      ember.from_numpy(w).to(getattr(ember, dtype)), ember.from_numpy(b).to(getattr(ember, dtype)))
    half = getattr(torch, dtype)  # (PyTorch 1.13 has no float16 layer_norm on the CPU: float32, rounded)
    tx, tw, tb = (torch.from_numpy(a).to(half).float() for a in (x, w, b))
    t = TF.layer_norm(tx, (40,), tw, tb).to(half)
    assert e.dtype == getattr(ember, dtype)
    np.testing.assert_allclose(e.float().numpy(), t.float().numpy(), rtol=2e-2, atol=2e-2)


def test_layer_norm_compiled_equals_eager():
    w, b = ember.randn(64), ember.randn(64)
    fn = lambda x: EF.layer_norm(x, (64,), w, b).relu() * 2.0  # noqa: E731
    cf = ember.compile(fn)
    x = ember.randn(8, 64)
    with ember.no_grad():
        cf(x)
        y = cf(x)
    assert cf._stats()["compiled_calls"] == 1
    np.testing.assert_array_equal(y.numpy(), fn(x).numpy())
    assert "layer_norm(" in cf._graph(0)


@pytest.mark.parametrize("shape,affine", [((5,), True), ((4, 5), True), ((5,), False)])
def test_layer_norm_module(shape, affine):
    em = enn.LayerNorm(shape, eps=1e-4, elementwise_affine=affine, dtype=ember.float64)
    tm = torch.nn.LayerNorm(shape, eps=1e-4, elementwise_affine=affine, dtype=torch.float64)
    if affine:  # away from the ones/zeros they start at
        with ember.no_grad():
            em.weight.copy_(ember.from_numpy(rnd(shape, 5)))
            em.bias.copy_(ember.from_numpy(rnd(shape, 6)))
    assert repr(em) == repr(tm)
    check_module(em, tm, rnd((2, 4, 5)))


def _torch_rms_norm(x, shape, w=None, eps=None):
    dims = tuple(range(x.ndim - len(shape), x.ndim))
    eps = torch.finfo(x.dtype).eps if eps is None else eps
    out = x * torch.rsqrt(x.pow(2).mean(dims, keepdim=True) + eps)
    return out if w is None else out * w


@pytest.mark.parametrize("shape", [(5,), (4, 5)])
@pytest.mark.parametrize("eps", [None, 1e-3])
@pytest.mark.parametrize("affine", [True, False])
def test_rms_norm(shape, eps, affine):
    w = rnd(shape, 1) if affine else None
    compare(lambda x, w: EF.rms_norm(x, shape, w, eps),
            lambda x, w: _torch_rms_norm(x, shape, w, eps), [rnd((3, 4, 5)), w])


def test_rms_norm_float32_default_eps():
    shape = (6,)
    compare(lambda x, w: EF.rms_norm(x, shape, w), lambda x, w: _torch_rms_norm(x, shape, w),
            [rnd((4, 6), dtype=np.float32) * 1e-3, rnd((6,), 1, dtype=np.float32)], **F32)


def test_rms_norm_module():
    em = enn.RMSNorm([4, 5], eps=1e-6, dtype=ember.float64)
    assert [n for n, _ in em.named_parameters()] == ["weight"]
    with ember.no_grad():
        em.weight.copy_(ember.from_numpy(rnd((4, 5), 3)))
    w = torch.from_numpy(em.weight.detach().numpy().copy()).requires_grad_()
    compare(em, lambda x: _torch_rms_norm(x, (4, 5), w, 1e-6), [rnd((2, 4, 5))],
            weights=[("weight", em.weight, w)])
    assert repr(em) == "RMSNorm((4, 5), eps=1e-06, elementwise_affine=True)"
    assert list(enn.RMSNorm(3, elementwise_affine=False).parameters()) == []


@pytest.mark.parametrize("shape", [(6, 3), (5, 3, 4), (4, 3, 2, 3)])
@pytest.mark.parametrize("affine", [True, False])
def test_batch_norm_functional_train(shape, affine):
    c = shape[1]
    w, b = (rnd((c,), 1), rnd((c,), 2)) if affine else (None, None)
    rm, rv = rnd((c,), 3), rnd((c,), 4, 0.5, 2.0)
    e_in, t_in, _, _ = check(
        lambda m, F, x, rm, rv, w, b: F.batch_norm(x, rm, rv, w, b, training=True, momentum=0.3,
                                                   eps=1e-3),
        rnd(shape), K(rm), K(rv), w, b)
    for i in (1, 2):  # the running statistics, updated in place
        _close(e_in[i], t_in[i], **F64, what=f"running stat {i}")


def test_batch_norm_functional_eval():
    rm, rv = rnd((3,), 3), rnd((3,), 4, 0.5, 2.0)
    e_in, t_in, _, _ = check(
        lambda m, F, x, rm, rv, w, b: F.batch_norm(x, rm, rv, w, b, training=False),
        rnd((5, 3, 4)), K(rm), K(rv), rnd((3,), 1), rnd((3,), 2))
    for i in (1, 2):  # untouched
        np.testing.assert_array_equal(e_in[i].numpy(), (rm, rv)[i - 1])


def test_batch_norm_functional_no_running_stats():
    check(lambda m, F, x: F.batch_norm(x, None, None, training=True), rnd((5, 3)))


@pytest.mark.parametrize("cls,shape", [("BatchNorm1d", (6, 3)), ("BatchNorm1d", (4, 3, 5)),
                                       ("BatchNorm2d", (4, 3, 2, 3))])
@pytest.mark.parametrize("momentum", [0.1, 0.5, None])
def test_batch_norm_module_steps(cls, shape, momentum):
    """Several training steps (outputs, grads, running statistics and the
    batch counter after each), then eval mode on the running statistics."""
    em = getattr(enn, cls)(3, momentum=momentum, dtype=ember.float64)
    tm = getattr(torch.nn, cls)(3, momentum=momentum, dtype=torch.float64)
    with ember.no_grad():
        em.weight.copy_(ember.from_numpy(rnd((3,), 10)))
        em.bias.copy_(ember.from_numpy(rnd((3,), 11)))
    copy_into_torch(em, tm)
    assert repr(em) == repr(tm)
    for step in range(4):
        x = rnd(shape, 20 + step) * (step + 1) + step  # statistics that move
        tp = dict(tm.named_parameters())
        compare(em, tm, [x], weights=[(n, p, tp[n]) for n, p in em.named_parameters()],
                seed=step)
        for (n, b), (_, tb) in zip(em.named_buffers(), tm.named_buffers()):
            _close(b, tb, **F64, what=n)
        em.zero_grad()
        tm.zero_grad()
    assert int(em.num_batches_tracked) == 4
    em.eval()
    tm.eval()
    compare(em, tm, [rnd(shape, 99)])
    for (n, b), (_, tb) in zip(em.named_buffers(), tm.named_buffers()):
        _close(b, tb, **F64, what=n + " after eval")


@pytest.mark.parametrize("affine,track", [(False, True), (True, False), (False, False)])
def test_batch_norm_module_options(affine, track):
    em = enn.BatchNorm2d(3, affine=affine, track_running_stats=track, dtype=ember.float64)
    tm = torch.nn.BatchNorm2d(3, affine=affine, track_running_stats=track, dtype=torch.float64)
    assert repr(em) == repr(tm)
    assert [n for n, _ in em.named_parameters()] == [n for n, _ in tm.named_parameters()]
    assert list(em.state_dict()) == list(tm.state_dict())
    x = rnd((2, 3, 4, 4))
    check_module(em, tm, x)
    em.eval()
    tm.eval()
    check_module(em, tm, x + 1)  # without running stats, eval still uses the batch's


def test_batch_norm_float32():
    em, tm = enn.BatchNorm1d(4), torch.nn.BatchNorm1d(4)
    check_module(em, tm, rnd((8, 4), dtype=np.float32), **F32)
    _close(em.running_var, tm.running_var, **F32, what="running_var")


# ---------------------------------------------------------------- convolution

CONV2D = [
    dict(),
    dict(stride=2),
    dict(stride=(2, 1), padding=(1, 2)),
    dict(padding=1, dilation=2),
    dict(dilation=(1, 2), stride=(1, 3)),
    dict(groups=2),
    dict(groups=4, out=8),  # depthwise
    dict(padding="same"),
    dict(padding="same", kernel=(2, 3)),  # even kernel: PyTorch pads one more at the end
    dict(padding="same", kernel=(4, 4), dilation=(1, 3)),
    dict(padding="valid", stride=2),
    dict(bias=False, padding=1),
    dict(unbatched=True, padding=1, stride=2),
]


def _conv_args(cfg, nd):
    cfg = dict(cfg)
    c, o = 4, cfg.pop("out", 6)
    kernel = cfg.pop("kernel", (3, 2)[:nd] if nd == 2 else (3,))
    groups = cfg.get("groups", 1)
    bias = cfg.pop("bias", True)
    spatial = (7, 8)[:nd] if nd == 2 else (9,)
    xshape = (c,) + spatial if cfg.pop("unbatched", False) else (2, c) + spatial
    args = [rnd(xshape, 0), rnd((o, c // groups) + tuple(kernel), 1),
            rnd((o,), 2) if bias else None]
    return cfg, args, kernel


@pytest.mark.parametrize("cfg", CONV2D, ids=[str(c) for c in CONV2D])
def test_conv2d(cfg):
    kw, args, _ = _conv_args(cfg, 2)
    check(lambda m, F, x, w, b: F.conv2d(x, w, b, **kw), *args)


CONV1D = [dict(), dict(stride=2, padding=1), dict(dilation=2, padding=2), dict(groups=2),
          dict(padding="same"), dict(padding="same", kernel=(4,)), dict(padding="valid"),
          dict(bias=False), dict(unbatched=True, stride=2)]


@pytest.mark.parametrize("cfg", CONV1D, ids=[str(c) for c in CONV1D])
def test_conv1d(cfg):
    kw, args, _ = _conv_args(cfg, 1)
    check(lambda m, F, x, w, b: F.conv1d(x, w, b, **kw), *args)


def test_conv2d_float32():
    check(lambda m, F, x, w, b: F.conv2d(x, w, b, padding=1, stride=2),
          rnd((2, 3, 9, 9), 0, dtype=np.float32), rnd((5, 3, 3, 3), 1, dtype=np.float32),
          rnd((5,), 2, dtype=np.float32), **F32)


@pytest.mark.parametrize("cfg", CONV2D, ids=[str(c) for c in CONV2D])
def test_conv2d_module(cfg):
    kw, args, kernel = _conv_args(cfg, 2)
    c, o = 4, args[1].shape[0]
    em = enn.Conv2d(c, o, kernel, bias=args[2] is not None, dtype=ember.float64, **kw)
    tm = torch.nn.Conv2d(c, o, kernel, bias=args[2] is not None, dtype=torch.float64, **kw)
    assert repr(em) == repr(tm)
    check_module(em, tm, args[0])


@pytest.mark.parametrize("cfg", CONV1D, ids=[str(c) for c in CONV1D])
def test_conv1d_module(cfg):
    kw, args, kernel = _conv_args(cfg, 1)
    c, o = 4, args[1].shape[0]
    em = enn.Conv1d(c, o, kernel, bias=args[2] is not None, dtype=ember.float64, **kw)
    tm = torch.nn.Conv1d(c, o, kernel, bias=args[2] is not None, dtype=torch.float64, **kw)
    assert repr(em) == repr(tm)
    check_module(em, tm, args[0])


def test_conv_module_bad_arguments():
    for kw in (dict(padding="same", stride=2), dict(padding="full"), dict(groups=3),
               dict(groups=0)):
        with pytest.raises(ValueError):
            torch.nn.Conv2d(4, 6, 3, **kw)
        with pytest.raises(ValueError):
            enn.Conv2d(4, 6, 3, **kw)


# ---------------------------------------------------------------- pooling

MAXPOOL = [
    dict(kernel_size=2),
    dict(kernel_size=3, stride=2),
    dict(kernel_size=3, stride=2, padding=1),
    dict(kernel_size=(2, 3), stride=(1, 2), padding=(1, 1)),
    dict(kernel_size=2, dilation=2),
    dict(kernel_size=3, stride=2, dilation=(2, 1), padding=1),
    dict(kernel_size=2, ceil_mode=True),
    dict(kernel_size=3, stride=2, padding=1, ceil_mode=True),
    dict(kernel_size=(3, 2), stride=(3, 2), ceil_mode=True),
]


@pytest.mark.parametrize("cfg", MAXPOOL, ids=[str(c) for c in MAXPOOL])
@pytest.mark.parametrize("unbatched", [False, True])
def test_max_pool2d(cfg, unbatched):
    shape = (3, 7, 9) if unbatched else (2, 3, 7, 9)
    check(lambda m, F, x: F.max_pool2d(x, **cfg), rnd(shape))
    em, tm = enn.MaxPool2d(**cfg), torch.nn.MaxPool2d(**cfg)
    assert repr(em) == repr(tm)
    check_module(em, tm, rnd(shape, 5))


def test_max_pool2d_ties_and_nan():
    """Ties: the first maximum of each window gets the gradient; NaN wins."""
    x = np.zeros((1, 2, 4, 4))
    x[0, 0, 1, 1] = 1.0
    x[0, 1, 2, 2] = np.nan
    for kw in (dict(kernel_size=2, stride=1), dict(kernel_size=3, stride=1, padding=1),
               dict(kernel_size=2, dilation=2, ceil_mode=True)):
        check(lambda m, F, x: F.max_pool2d(x, **kw), x)


AVGPOOL = [
    dict(kernel_size=2),
    dict(kernel_size=3, stride=2),
    dict(kernel_size=3, stride=2, padding=1),
    dict(kernel_size=3, stride=2, padding=1, count_include_pad=False),
    dict(kernel_size=(2, 4), stride=(1, 2), padding=(1, 2), count_include_pad=False),
    dict(kernel_size=2, divisor_override=3),
    dict(kernel_size=3, padding=1, divisor_override=2),
    # ceil_mode: the last windows run past the input (and its padding)
    dict(kernel_size=2, ceil_mode=True),
    dict(kernel_size=3, stride=2, ceil_mode=True),
    dict(kernel_size=3, stride=2, padding=1, ceil_mode=True),
    dict(kernel_size=3, stride=2, padding=1, ceil_mode=True, count_include_pad=False),
    dict(kernel_size=(2, 4), stride=(3, 2), padding=(1, 2), ceil_mode=True),
    dict(kernel_size=(3, 2), stride=(2, 3), padding=(1, 1), ceil_mode=True, count_include_pad=False),
    dict(kernel_size=4, stride=3, padding=2, ceil_mode=True),
    dict(kernel_size=3, stride=2, ceil_mode=True, divisor_override=5),
]


@pytest.mark.parametrize("cfg", AVGPOOL, ids=[str(c) for c in AVGPOOL])
@pytest.mark.parametrize("unbatched", [False, True])
def test_avg_pool2d(cfg, unbatched):
    shape = (3, 7, 9) if unbatched else (2, 3, 7, 9)
    check(lambda m, F, x: F.avg_pool2d(x, **cfg), rnd(shape))
    em, tm = enn.AvgPool2d(**cfg), torch.nn.AvgPool2d(**cfg)
    assert repr(em) == repr(tm)
    check_module(em, tm, rnd(shape, 5))


@pytest.mark.parametrize("cfg", [dict(ceil_mode=True), dict(ceil_mode=True, count_include_pad=False),
                                 dict(count_include_pad=False)], ids=str)
def test_avg_pool2d_partial_windows_compile(cfg):
    """The per-place counts of partial windows are built from traced ops,
    so such a pool compiles (it fell back to eager) and matches eager."""
    def pool(x):
        return EF.avg_pool2d(x, 3, 2, 1, **cfg)
    compiled = ember.compile(pool)
    for seed in range(3):
        x = ember.tensor(rnd((2, 3, 7, 9), seed=seed))
        np.testing.assert_array_equal(compiled(x).numpy(), pool(x).numpy())
    assert compiled._stats()["compiled_calls"] >= 1 and compiled._stats()["eager_calls"] == 0


@pytest.mark.parametrize("out", [(4, 3), 2, (3, 5), (5, 7), 1, (None, 4), (3, None), (10, 12)])
@pytest.mark.parametrize("unbatched", [False, True])
def test_adaptive_avg_pool2d(out, unbatched):
    shape = (3, 8, 9) if unbatched else (2, 3, 8, 9)
    check(lambda m, F, x: F.adaptive_avg_pool2d(x, out), rnd(shape))
    em, tm = enn.AdaptiveAvgPool2d(out), torch.nn.AdaptiveAvgPool2d(out)
    assert repr(em) == repr(tm)
    check_module(em, tm, rnd(shape, 5))


def test_pool_float32():
    x = rnd((2, 3, 8, 8), dtype=np.float32)
    check(lambda m, F, x: F.max_pool2d(x, 3, 2, 1), x, **F32)
    check(lambda m, F, x: F.avg_pool2d(x, 3, 2, 1, count_include_pad=False), x, **F32)
    check(lambda m, F, x: F.adaptive_avg_pool2d(x, (3, 5)), x, **F32)


# ---------------------------------------------------------------- flatten

def test_flatten_unflatten_modules():
    for em, tm in ((enn.Flatten(), torch.nn.Flatten()), (enn.Flatten(0, 2), torch.nn.Flatten(0, 2)),
                   (enn.Unflatten(1, (3, 4)), torch.nn.Unflatten(1, (3, 4))),
                   (enn.Unflatten(-1, [2, 2]), torch.nn.Unflatten(-1, [2, 2]))):
        assert repr(em) == repr(tm)
        x = rnd((2, 12, 2, 4)) if isinstance(em, enn.Flatten) else rnd((2, 12, 4))
        check_module(em, tm, x)


# ---------------------------------------------------------------- embedding

IDX = np.array([[1, 2, 3, 2], [0, 9, 2, 1]])


@pytest.mark.parametrize("padding_idx", [None, 2, -8])
@pytest.mark.parametrize("dtype", ["int64", "int32"])
def test_embedding(padding_idx, dtype):
    # the padding row is not zero here: the lookup still returns it, only
    # its gradient is zero
    check(lambda m, F, i, w: F.embedding(i, w, padding_idx), K(IDX, dtype), rnd((10, 4)))
    check(lambda m, F, i, w: F.embedding(i, w, padding_idx), K(IDX[0, 1], dtype), rnd((10, 4)))


def test_embedding_module():
    em = enn.Embedding(10, 4, padding_idx=2, dtype=ember.float64)
    tm = torch.nn.Embedding(10, 4, padding_idx=2, dtype=torch.float64)
    assert repr(em) == repr(tm)
    assert not em.weight[2].numpy().any()  # the padding row starts at zero
    check_module(em, tm, K(IDX))
    assert not em.weight.grad[2].numpy().any()


def test_embedding_from_pretrained():
    w = rnd((5, 3))
    em = enn.Embedding.from_pretrained(ember.from_numpy(w.copy()))
    tm = torch.nn.Embedding.from_pretrained(torch.from_numpy(w.copy()))
    assert not em.weight.requires_grad and not tm.weight.requires_grad
    check_module(em, tm, K([[4, 0], [1, 1]]))
    em = enn.Embedding.from_pretrained(ember.from_numpy(w.copy()), freeze=False, padding_idx=1)
    tm = torch.nn.Embedding.from_pretrained(torch.from_numpy(w.copy()), freeze=False,
                                            padding_idx=1)
    assert repr(em) == repr(tm)
    check_module(em, tm, K([[4, 1], [1, 3]]))  # row 1 kept as given, no gradient


@pytest.mark.parametrize("norm_type", [2.0, 1.0, 3.0])
@pytest.mark.parametrize("padding_idx", [None, 2])
def test_embedding_max_norm_renormalises_the_named_rows_in_place(norm_type, padding_idx):
    """Rows named by the input (row 2 twice) whose norm exceeds max_norm are
    scaled to it in the weight itself, as PyTorch does; others untouched;
    then the lookup and its gradients match."""
    em = enn.Embedding(10, 4, padding_idx=padding_idx, max_norm=1.5, norm_type=norm_type,
                       dtype=ember.float64)
    tm = torch.nn.Embedding(10, 4, padding_idx=padding_idx, max_norm=1.5, norm_type=norm_type,
                            dtype=torch.float64)
    assert repr(em) == repr(tm)
    w = rnd((10, 4), seed=3) * 2
    w[3] *= 0.1  # a named row under the limit
    with ember.no_grad():
        em.weight.copy_(ember.from_numpy(w.copy()))
    with torch.no_grad():
        tm.weight.copy_(torch.from_numpy(w.copy()))
    check_module(em, tm, K(IDX))
    np.testing.assert_allclose(em.weight.detach().numpy(), tm.weight.detach().numpy(),
                               rtol=1e-12, atol=1e-15)
    named = sorted(set(IDX.ravel().tolist()))
    others = [r for r in range(10) if r not in named]
    np.testing.assert_array_equal(em.weight.detach().numpy()[others], w[others])
    assert not np.array_equal(em.weight.detach().numpy()[named], w[named])


def test_embedding_float32():
    em, tm = enn.Embedding(7, 3), torch.nn.Embedding(7, 3)
    check_module(em, tm, K([0, 6, 6, 3]), **F32)


# ---------------------------------------------------------------- dropout

def test_dropout_identity_cases():
    x = rnd((3, 4))
    check(lambda m, F, x: F.dropout(x, 0.0), x)
    check(lambda m, F, x: F.dropout(x, 0.7, training=False), x)
    em, tm = enn.Dropout(0.3), torch.nn.Dropout(0.3)
    assert repr(em) == repr(tm)
    em.eval()
    tm.eval()
    check_module(em, tm, x)
    check(lambda m, F, x: F.dropout(x, 1.0), x)  # all zeros, zero gradient


@pytest.mark.parametrize("p", [0.1, 0.5, 0.8])
@pytest.mark.parametrize("how", ["functional", "module", "inplace"])
def test_dropout_statistics(p, how):
    """About a fraction p zeroed, the rest scaled by 1/(1-p), and the same
    mask on the gradient. With n = 200000 the zero fraction's standard
    deviation is at most 0.0011: 0.01 is over 8 of them."""
    ember.manual_seed(0)
    n = 200_000
    x = ember.from_numpy(rnd((n // 100, 100), 3, 0.5, 2.0)).requires_grad_()
    if how == "functional":
        y = EF.dropout(x, p)
    elif how == "module":
        y = enn.Dropout(p)(x)
    else:
        y = x * 1.0
        assert EF.dropout(y, p, inplace=True) is y
    y.backward(ember.ones(*x.shape, dtype=ember.float64))
    xv, yv, g = x.detach().numpy(), y.detach().numpy(), x.grad.numpy()
    dropped = yv == 0
    assert abs(dropped.mean() - p) < 0.01
    np.testing.assert_allclose(yv[~dropped], xv[~dropped] / (1 - p), rtol=1e-12)
    np.testing.assert_array_equal(g[dropped], 0.0)
    np.testing.assert_allclose(g[~dropped], 1 / (1 - p), rtol=1e-12)


def test_dropout_masks_differ_between_calls():
    x = ember.ones(1000, dtype=ember.float64)
    assert (EF.dropout(x, 0.5).numpy() != EF.dropout(x, 0.5).numpy()).any()


def test_dropout_bad_p():
    for p in (-0.1, 1.5):
        raises_like(lambda m, F, x: F.dropout(x, p), rnd((3,)))
        with pytest.raises(ValueError):
            torch.nn.Dropout(p)
        with pytest.raises(ValueError):
            enn.Dropout(p)


# ---------------------------------------------------------------- attention

def _torch_sdpa(q, k, v, attn_mask=None, is_causal=False, scale=None):
    """The definition: softmax(q k^T * scale + mask) v (PyTorch 1.13 has no
    scaled_dot_product_attention)."""
    L, S = q.shape[-2], k.shape[-2]
    scale = 1 / math.sqrt(q.shape[-1]) if scale is None else scale
    scores = q @ k.transpose(-2, -1) * scale
    if is_causal:
        attn_mask = torch.ones(L, S, dtype=torch.bool).tril()
    if attn_mask is not None:
        if attn_mask.dtype == torch.bool:
            scores = scores.masked_fill(~attn_mask, -math.inf)
        else:
            scores = scores + attn_mask
    return torch.softmax(scores, -1) @ v


def _bool_mask(shape, seed):
    m = np.random.default_rng(seed).random(shape) < 0.6
    m[..., 0] = True  # every query sees something
    return m


SDPA = [
    dict(),
    dict(scale=0.3),
    dict(is_causal=True),
    dict(is_causal=True, L=6),
    dict(mask=("bool", (4, 6))),
    dict(mask=("bool", (2, 1, 4, 6))),
    dict(mask=("float", (4, 6))),
    dict(mask=("float", (2, 3, 4, 6)), scale=2.0),
]


@pytest.mark.parametrize("cfg", SDPA, ids=[str(c) for c in SDPA])
def test_scaled_dot_product_attention(cfg):
    L = cfg.get("L", 4)
    args = [rnd((2, 3, L, 8), 0), rnd((2, 3, 6, 8), 1), rnd((2, 3, 6, 5), 2)]
    kind, shape = cfg.get("mask", (None, None))
    if kind == "bool":
        args.append(K(_bool_mask(shape, 3)))
    elif kind == "float":
        args.append(rnd(shape, 3, -3.0, 1.0))  # a learned bias: it gets a gradient too
    else:
        args.append(None)
    kw = dict(is_causal=cfg.get("is_causal", False), scale=cfg.get("scale"))
    compare(lambda q, k, v, m: EF.scaled_dot_product_attention(q, k, v, attn_mask=m, **kw),
            lambda q, k, v, m: _torch_sdpa(q, k, v, attn_mask=m, **kw), args)


def test_scaled_dot_product_attention_float32_3d():
    args = [rnd((3, 4, 8), 0, dtype=np.float32), rnd((3, 5, 8), 1, dtype=np.float32),
            rnd((3, 5, 8), 2, dtype=np.float32)]
    compare(EF.scaled_dot_product_attention, _torch_sdpa, args, **F32)


def test_scaled_dot_product_attention_dropout():
    q, k, v = (ember.from_numpy(rnd((2, 4, 8), i)) for i in range(3))
    assert not EF.scaled_dot_product_attention(q, k, v, dropout_p=1.0).numpy().any()
    ember.manual_seed(1)
    a = EF.scaled_dot_product_attention(q, k, v, dropout_p=0.5).numpy()
    ember.manual_seed(1)
    b = EF.scaled_dot_product_attention(q, k, v, dropout_p=0.5).numpy()
    np.testing.assert_array_equal(a, b)
    assert not np.allclose(a, EF.scaled_dot_product_attention(q, k, v).numpy())


MHA = [
    dict(),
    dict(batch_first=True),
    dict(cross=True),
    dict(cross=True, batch_first=True),
    dict(attn_mask="bool"),
    dict(attn_mask="float", batch_first=True),
    dict(attn_mask="bool3d", cross=True),
    dict(attn_mask="float3d", cross=True, batch_first=True),
    dict(key_padding_mask="bool", cross=True),
    dict(key_padding_mask="float"),
    dict(key_padding_mask="bool", attn_mask="bool", batch_first=True),
    dict(key_padding_mask="bool", attn_mask="float", cross=True),
    dict(need_weights=False),
    dict(need_weights=False, cross=True, batch_first=True),
    dict(average_attn_weights=False, cross=True),
    dict(average_attn_weights=False, key_padding_mask="bool", batch_first=True),
    dict(bias=False),
    dict(unbatched=True),
    dict(unbatched=True, cross=True, key_padding_mask="bool", attn_mask="float"),
    dict(unbatched=True, attn_mask="bool3d", average_attn_weights=False),
]


def _mha_case(cfg, dtype=np.float64, E=8, H=2, N=3, L=4):
    bf, cross, unb = cfg.get("batch_first", False), cfg.get("cross", False), cfg.get("unbatched")
    S = 5 if cross else L

    def shape(n):
        return (n, E) if unb else (N, n, E) if bf else (n, N, E)
    args = [rnd(shape(L), 0, dtype=dtype)]
    if cross:
        args += [rnd(shape(S), 1, dtype=dtype), rnd(shape(S), 2, dtype=dtype)]
    am, kpm = cfg.get("attn_mask"), cfg.get("key_padding_mask")
    nb = 1 if unb else N
    masks = {}
    if am:
        mshape = (nb * H, L, S) if am.endswith("3d") else (L, S)
        # True = may NOT attend (MultiheadAttention's convention)
        masks["attn_mask"] = K(~_bool_mask(mshape, 3)) if am.startswith("bool") else \
            K(rnd(mshape, 3, -3.0, 1.0).astype(dtype))
    if kpm:
        kshape = (S,) if unb else (N, S)
        masks["key_padding_mask"] = K(~_bool_mask(kshape, 4)) if kpm == "bool" else \
            K(rnd(kshape, 4, -3.0, 0.0).astype(dtype))
    kw = {k: cfg[k] for k in ("need_weights", "average_attn_weights") if k in cfg}
    names = list(masks)

    def call(mod, *a):
        x = a[:3] if cross else a[:1] * 3  # self-attention: the same tensor three times
        return mod(*x, **dict(zip(names, a[3 if cross else 1:])), **kw)
    return args + list(masks.values()), call


@pytest.mark.parametrize("cfg", MHA, ids=[str(c) for c in MHA])
def test_multihead_attention(cfg):
    em = enn.MultiheadAttention(8, 2, bias=cfg.get("bias", True),
                                batch_first=cfg.get("batch_first", False), dtype=ember.float64)
    tm = torch.nn.MultiheadAttention(8, 2, bias=cfg.get("bias", True),
                                     batch_first=cfg.get("batch_first", False),
                                     dtype=torch.float64)
    # biases away from their zero start, so that a mix-up would show
    with ember.no_grad():
        for n, p in em.named_parameters():
            if "bias" in n:
                p.copy_(ember.from_numpy(rnd(tuple(p.shape), 9)))
    args, call = _mha_case(cfg)
    check_module(em, tm, *args, call=call)


def test_multihead_attention_float32():
    em, tm = enn.MultiheadAttention(16, 4), torch.nn.MultiheadAttention(16, 4)
    args, call = _mha_case(dict(cross=True, key_padding_mask="bool"), np.float32, E=16, H=4)
    check_module(em, tm, *args, call=call, **F32)


def test_multihead_attention_eval_no_grad():
    """Eval mode under no_grad (where PyTorch may take its fused path)."""
    em = enn.MultiheadAttention(8, 2, batch_first=True, dtype=ember.float64)
    tm = torch.nn.MultiheadAttention(8, 2, batch_first=True, dtype=torch.float64)
    copy_into_torch(em, tm)
    em.eval()
    tm.eval()
    x = rnd((3, 4, 8))
    with ember.no_grad():
        e = em(*[ember.from_numpy(x)] * 3)
    with torch.no_grad():
        t = tm(*[torch.from_numpy(x)] * 3)
    _close(e[0], t[0], **F64, what="output")
    _close(e[1], t[1], **F64, what="weights")


def test_multihead_attention_dropout():
    """Dropout on the attention weights while training only: the returned
    weights have zeros and the rest scaled by 1/(1-p); eval matches PyTorch."""
    em = enn.MultiheadAttention(8, 2, dropout=0.5, dtype=ember.float64)
    tm = torch.nn.MultiheadAttention(8, 2, dropout=0.5, dtype=torch.float64)
    copy_into_torch(em, tm)
    x = ember.from_numpy(rnd((6, 2, 8)))
    ember.manual_seed(0)
    _, w = em(x, x, x, average_attn_weights=False)
    em.eval()
    _, w_eval = em(x, x, x, average_attn_weights=False)
    w, w_eval = w.detach().numpy(), w_eval.detach().numpy()
    dropped = w == 0
    assert 0.3 < dropped.mean() < 0.7
    np.testing.assert_allclose(w[~dropped], 2 * w_eval[~dropped], rtol=1e-12)
    tm.eval()
    xt = torch.from_numpy(rnd((6, 2, 8)))
    _close(em(x, x, x)[0], tm(xt, xt, xt)[0], **F64, what="eval output")


def test_multihead_attention_structure():
    em, tm = enn.MultiheadAttention(8, 2), torch.nn.MultiheadAttention(8, 2)
    assert [(n, tuple(p.shape)) for n, p in em.named_parameters()] == \
        [(n, tuple(p.shape)) for n, p in tm.named_parameters()]
    assert repr(em) == repr(tm)  # (out_proj a NonDynamicallyQuantizableLinear, as PyTorch's)
    with pytest.raises(AssertionError):
        torch.nn.MultiheadAttention(8, 3)
    with pytest.raises(AssertionError):
        enn.MultiheadAttention(8, 3)
    with pytest.raises(AssertionError):  # embedding size of the input
        em(*[ember.zeros(4, 2, 6)] * 3)


# ---------------------------------------------------------------- losses

def _targets(shape, c, seed, ignore=None):
    t = np.random.default_rng(seed).integers(0, c, shape)
    if ignore is not None:
        t.flat[::3] = ignore
    return t


CE = [
    dict(),
    dict(reduction="sum"),
    dict(reduction="none"),
    dict(weight=True),
    dict(weight=True, reduction="sum"),
    dict(weight=True, reduction="none"),
    dict(ignore=-100),
    dict(ignore_index=1),
    dict(ignore_index=1, weight=True),
    dict(ignore_index=1, weight=True, reduction="none"),
    dict(label_smoothing=0.1),
    dict(label_smoothing=0.2, weight=True),
    dict(label_smoothing=0.2, weight=True, ignore_index=2),
    dict(label_smoothing=0.2, weight=True, ignore_index=2, reduction="sum"),
    dict(label_smoothing=0.3, ignore=-100, reduction="none"),
    dict(label_smoothing=0.3, weight=True, reduction="none"),
    dict(label_smoothing=1.0),
    dict(nd=True),
    dict(nd=True, weight=True, ignore_index=0),
    dict(nd=True, label_smoothing=0.2, weight=True, ignore_index=0),
    dict(nd=True, label_smoothing=0.2, reduction="none"),
    dict(unbatched=True),
    dict(unbatched=True, weight=True, label_smoothing=0.1),
]


def _ce_args(cfg, c=4, dtype=np.float64):
    shape = (c,) if cfg.get("unbatched") else (2, c, 3, 3) if cfg.get("nd") else (6, c)
    tshape = shape[:1] + shape[2:] if len(shape) > 1 else ()
    ignore = cfg.get("ignore", cfg.get("ignore_index"))
    target = _targets(tshape, c, 5, ignore if not cfg.get("unbatched") else None)
    weight = K(rnd((c,), 6, 0.2, 2.0).astype(dtype)) if cfg.get("weight") else None
    kw = {k: cfg[k] for k in ("reduction", "ignore_index", "label_smoothing") if k in cfg}
    return [rnd(shape, 0, -3, 3, dtype=dtype), K(target), weight], kw


@pytest.mark.parametrize("cfg", CE, ids=[str(c) for c in CE])
def test_cross_entropy(cfg):
    args, kw = _ce_args(cfg)
    check(lambda m, F, x, t, w: F.cross_entropy(x, t, weight=w, **kw), *args)
    em, tm = enn.CrossEntropyLoss(_make(ember, args[2]), **kw), \
        torch.nn.CrossEntropyLoss(_make(torch, args[2]), **kw)
    assert repr(em) == repr(tm)
    check_module(em, tm, *args[:2])


def test_cross_entropy_float32():
    args, kw = _ce_args(dict(weight=True, label_smoothing=0.1), dtype=np.float32)
    check(lambda m, F, x, t, w: F.cross_entropy(x, t, weight=w, **kw), *args, **F32)


PROBS = [dict(), dict(reduction="sum"), dict(reduction="none"), dict(weight=True),
         dict(weight=True, reduction="none"), dict(label_smoothing=0.2),
         dict(label_smoothing=0.2, weight=True, reduction="sum"), dict(nd=True),
         dict(nd=True, weight=True, label_smoothing=0.1), dict(unbatched=True)]


@pytest.mark.parametrize("cfg", PROBS, ids=[str(c) for c in PROBS])
def test_cross_entropy_probabilities(cfg):
    args, kw = _ce_args(cfg)
    shape = args[0].shape
    p = np.exp(rnd(shape, 7))
    p /= p.sum(axis=1 if len(shape) > 1 else 0, keepdims=True)
    # the target probabilities are differentiable too
    check(lambda m, F, x, t, w: F.cross_entropy(x, t, weight=w, **kw), args[0], p, args[2])


NLL = [dict(), dict(reduction="sum"), dict(reduction="none"), dict(weight=True),
       dict(weight=True, ignore_index=1), dict(weight=True, ignore_index=1, reduction="sum"),
       dict(ignore=-100, reduction="none"), dict(nd=True, weight=True),
       dict(nd=True, ignore_index=2, reduction="none"), dict(unbatched=True)]


@pytest.mark.parametrize("cfg", NLL, ids=[str(c) for c in NLL])
def test_nll_loss(cfg):
    args, kw = _ce_args(cfg)
    check(lambda m, F, x, t, w: F.nll_loss(x, t, weight=w, **kw), *args)
    em, tm = enn.NLLLoss(_make(ember, args[2]), **kw), torch.nn.NLLLoss(_make(torch, args[2]), **kw)
    assert repr(em) == repr(tm)
    check_module(em, tm, *args[:2])


def test_all_targets_ignored():
    """The mean is 0/0 = NaN, but no NaN flows back: the gradient is zero."""
    for ls in (0.0, 0.2):
        for w in (None, K(rnd((4,), 6, 0.2, 2.0))):
            _, _, e, _ = check(lambda m, F, x, t, w: F.cross_entropy(x, t, w, ignore_index=1,
                                                                     label_smoothing=ls),
                               rnd((3, 4)), K([1, 1, 1]), w)
            assert np.isnan(e[0].item())
    check(lambda m, F, x, t: F.nll_loss(x, t, ignore_index=1), rnd((3, 4)), K([1, 1, 1]))


@pytest.mark.parametrize("name", ["mse_loss", "l1_loss"])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_regression_losses(name, reduction):
    check(lambda m, F, x, y: getattr(F, name)(x, y, reduction=reduction), rnd((3, 4, 5), 0),
          rnd((3, 4, 5), 1))
    cls = {"mse_loss": "MSELoss", "l1_loss": "L1Loss"}[name]
    em, tm = getattr(enn, cls)(reduction=reduction), getattr(torch.nn, cls)(reduction=reduction)
    assert repr(em) == repr(tm)
    check_module(em, tm, rnd((6,), 2, dtype=np.float32), rnd((6,), 3, dtype=np.float32), **F32)


def test_regression_loss_broadcast_warns():
    for name in ("mse_loss", "l1_loss"):
        with pytest.warns(UserWarning):
            getattr(TF, name)(torch.zeros(3, 1), torch.zeros(3))
        with pytest.warns(UserWarning, match="target size"):
            e = getattr(EF, name)(ember.zeros(3, 1), ember.zeros(3))
        assert tuple(e.shape) == ()


BCE = [dict(), dict(reduction="sum"), dict(reduction="none"), dict(weight=True),
       dict(pos_weight=True), dict(weight=True, pos_weight=True, reduction="none"),
       dict(extreme=True, pos_weight=True)]


@pytest.mark.parametrize("cfg", BCE, ids=[str(c) for c in BCE])
def test_binary_cross_entropy_with_logits(cfg):
    x = rnd((4, 5), 0, -60, 60) if cfg.get("extreme") else rnd((4, 5), 0, -3, 3)
    t = rnd((4, 5), 1, 0.0, 1.0)
    t[0] = np.round(t[0])  # some hard labels too
    w = K(rnd((5,), 2, 0.1, 2.0)) if cfg.get("weight") else None
    pw = K(rnd((5,), 3, 0.5, 3.0)) if cfg.get("pos_weight") else None
    red = cfg.get("reduction", "mean")
    check(lambda m, F, x, t, w, pw: F.binary_cross_entropy_with_logits(x, t, w, reduction=red,
                                                                        pos_weight=pw),
          x, t, w, pw)
    em = enn.BCEWithLogitsLoss(_make(ember, w), reduction=red, pos_weight=_make(ember, pw))
    tm = torch.nn.BCEWithLogitsLoss(_make(torch, w), reduction=red, pos_weight=_make(torch, pw))
    assert repr(em) == repr(tm)
    check_module(em, tm, x, K(t))


# ---------------------------------------------------------------- pad, unfold, normalize, one_hot

PADS = [(1, 2), (0, 0), (1, 1, 2, 0), (-1, 2, 0, -2), (2, -1, 1, 1, -1, 3),
        (1, 0, 0, 1, 0, 2, 1, 1)]


@pytest.mark.parametrize("p", PADS, ids=[str(p) for p in PADS])
@pytest.mark.parametrize("value", [None, 2.5])
def test_pad(p, value):
    kw = {} if value is None else {"value": value}
    check(lambda m, F, x: F.pad(x, p, **kw), rnd((2, 3, 4, 5)))


def test_pad_errors():
    raises_like(lambda m, F, x: F.pad(x, (1, 2, 3)), rnd((2, 3)))
    raises_like(lambda m, F, x: F.pad(x, (1,) * 6), rnd((2, 3)))


UNFOLD = [dict(kernel_size=2), dict(kernel_size=(2, 3)), dict(kernel_size=3, stride=2, padding=1),
          dict(kernel_size=2, dilation=(2, 1), stride=(1, 2)),
          dict(kernel_size=(1, 3), padding=(0, 2))]


@pytest.mark.parametrize("cfg", UNFOLD, ids=[str(c) for c in UNFOLD])
@pytest.mark.parametrize("unbatched", [False, True])
def test_unfold(cfg, unbatched):
    check(lambda m, F, x: F.unfold(x, **cfg), rnd((3, 7, 8) if unbatched else (2, 3, 7, 8)))


@pytest.mark.parametrize("kw", [{}, {"p": 1.0}, {"p": 3.0, "dim": 0}, {"dim": -1, "eps": 0.5}],
                         ids=str)
def test_normalize(kw):
    x = rnd((4, 3, 5))
    x[1, :, 2] = 0.0  # a zero vector along dim 1: the eps clamp
    x[2, 1, :] = 0.0  # and along dim -1
    check(lambda m, F, x: F.normalize(x, **kw), x)


def test_one_hot():
    idx = np.array([[0, 3, 1], [2, 2, 0]])
    for n in (-1, 5):
        e = EF.one_hot(ember.from_numpy(idx), n)
        t = TF.one_hot(torch.from_numpy(idx), n)
        assert _dt(e) == _dt(t) == "int64"
        np.testing.assert_array_equal(e.numpy(), t.numpy())
    raises_like(lambda m, F, i: F.one_hot(i, 3), K(idx))  # a class index >= num_classes
    raises_like(lambda m, F, i: F.one_hot(i), K(np.array([0.0, 1.0])))  # float indices


# ---------------------------------------------------------------- gradcheck

def _p(shape, seed, lo=-2.0, hi=2.0):
    return ember.from_numpy(rnd(shape, seed, lo, hi)).requires_grad_()


def test_gradcheck_conv2d():
    assert gradcheck(lambda x, w, b: EF.conv2d(x, w, b, stride=(1, 2), padding=1),
                     (_p((1, 2, 4, 4), 0), _p((3, 2, 2, 2), 1), _p((3,), 2)))
    assert gradcheck(lambda x, w: EF.conv2d(x, w, groups=2, dilation=2, padding="same"),
                     (_p((2, 4, 5, 5), 0), _p((2, 2, 2, 3), 1)))


def test_gradcheck_pools():
    x = _p((1, 2, 5, 5), 3)
    assert gradcheck(lambda x: EF.max_pool2d(x, 3, 2, padding=1, ceil_mode=True), (x,))
    assert gradcheck(lambda x: EF.max_pool2d(x, 2, 1, dilation=2), (x,))
    assert gradcheck(lambda x: EF.avg_pool2d(x, 3, 2, padding=1, count_include_pad=False), (x,))
    assert gradcheck(lambda x: EF.adaptive_avg_pool2d(x, (2, 3)), (x,))


def test_gradcheck_norms():
    assert gradcheck(lambda x, w, b: EF.layer_norm(x, (3, 4), w, b),
                     (_p((2, 3, 4), 0), _p((3, 4), 1), _p((3, 4), 2)))
    assert gradcheck(lambda x, w, b: EF.batch_norm(x, None, None, w, b, training=True),
                     (_p((4, 3, 2), 0), _p((3,), 1), _p((3,), 2)))
    rm, rv = ember.zeros(3, dtype=ember.float64), ember.ones(3, dtype=ember.float64)
    assert gradcheck(lambda x: EF.batch_norm(x, rm, rv, training=True), (_p((5, 3), 4),))
    assert gradcheck(lambda x, w: EF.rms_norm(x, (4,), w, 1e-5), (_p((3, 4), 0), _p((4,), 1)))


def test_gradcheck_cross_entropy_label_smoothing():
    w = ember.from_numpy(rnd((4,), 6, 0.2, 2.0))
    t = ember.from_numpy(np.array([0, 3, 1, 1, 2]))
    assert gradcheck(lambda x: EF.cross_entropy(x, t, weight=w, label_smoothing=0.15,
                                                ignore_index=1), (_p((5, 4), 0),))
    tp = ember.from_numpy(np.full((5, 4), 0.25))
    assert gradcheck(lambda x: EF.cross_entropy(x, tp, label_smoothing=0.3), (_p((5, 4), 1),))


def test_gradcheck_multihead_attention():
    ember.manual_seed(0)
    mha = enn.MultiheadAttention(4, 2, dtype=ember.float64)
    mask = ember.from_numpy(~_bool_mask((3, 5), 0))
    args = (_p((3, 2, 4), 0), _p((5, 2, 4), 1), _p((5, 2, 4), 2), mha.in_proj_weight,
            mha.in_proj_bias, mha.out_proj.weight)
    assert gradcheck(lambda q, k, v, *_: mha(q, k, v, attn_mask=mask)[0], args)
    assert gradcheck(lambda q, k, v, *_: mha(q, k, v)[1], args)


def test_gradcheck_activations_and_sdpa():
    x = ember.from_numpy(ACT_X[:2, :6] + 0.01).requires_grad_()  # off the kinks
    for name, fn in ACTIVATIONS:
        assert gradcheck(lambda x: fn(EF, x), (x,)), name
    assert gradcheck(lambda q, k, v: EF.scaled_dot_product_attention(q, k, v, is_causal=True),
                     (_p((2, 3, 4), 0), _p((2, 3, 4), 1), _p((2, 3, 2), 2)))


# ---------------------------------------------------------------- bad input

def test_cross_entropy_bad_targets():
    x = rnd((3, 4))
    # class indices as floats, of the wrong shape for probabilities
    raises_like(lambda m, F, x, t: F.cross_entropy(x, t), x, K([0.0, 1.0, 2.0]))
    raises_like(lambda m, F, x, t: F.cross_entropy(x, t), x, K([0, 1, 2], "int32"))
    raises_like(lambda m, F, x, t: F.nll_loss(x, t), x, K([0, 1, 2], "int32"))
    e = raises_like(lambda m, F, x, t: F.cross_entropy(x, t), x, K([0, 1]))
    assert isinstance(e, ValueError)
    assert "Expected input batch_size (3) to match target batch_size (2)" in str(e)
    for bad in ([0, 4, 1], [0, -1, 1], [0, 1, 7]):
        e = raises_like(lambda m, F, x, t: F.cross_entropy(x, t), x, K(bad))
        assert isinstance(e, IndexError)
    raises_like(lambda m, F, x, t: F.cross_entropy(x, t, ignore_index=7), x, K([0, 7, 9]))
    raises_like(lambda m, F, x, t: F.nll_loss(x, t), rnd((2, 3, 4)), K([[0, 1, 2], [0, 1, 1]]))
    raises_like(lambda m, F, x, t: F.cross_entropy(x, t, reduction="avg"), x, K([0, 1, 2]))
    raises_like(lambda m, F, x, t: F.cross_entropy(x, t, label_smoothing=1.5), x, K([0, 1, 2]))
    with pytest.raises(RuntimeError, match=r"cross_entropy: expected an input with a dim of classes"):
        ember.nn.functional.cross_entropy(ember.tensor(1.0), ember.tensor(0))
    raises_like(lambda m, F, x, t: F.binary_cross_entropy_with_logits(x, t), x, rnd((3, 1)))


def test_linear_shape_mismatch():
    em, tm = enn.Linear(4, 3), torch.nn.Linear(4, 3)
    for shape in ((2, 5), (2, 6, 5), (5,)):
        with pytest.raises(RuntimeError) as t_exc:
            tm(torch.zeros(*shape))
        with pytest.raises(RuntimeError) as e_exc:
            em(ember.zeros(*shape))
        # the shapes as PyTorch names them: "(2x5 and 4x3)"
        want = str(t_exc.value).split("multiplied ")[1]
        assert want in str(e_exc.value)


def test_conv_bad_inputs():
    raises_like(lambda m, F, x, w: F.conv2d(x, w), rnd((2, 5, 6, 6)), rnd((4, 3, 3, 3)))
    raises_like(lambda m, F, x, w: F.conv2d(x, w, groups=2), rnd((2, 4, 6, 6)), rnd((4, 4, 3, 3)))
    raises_like(lambda m, F, x, w: F.conv2d(x, w), rnd((6, 6)), rnd((4, 3, 3, 3)))
    raises_like(lambda m, F, x, w: F.conv2d(x, w), rnd((1, 3, 2, 2)), rnd((4, 3, 3, 3)))
    raises_like(lambda m, F, x, w: F.conv2d(x, w, stride=2, padding="same"),
                rnd((1, 3, 5, 5)), rnd((4, 3, 3, 3)))
    raises_like(lambda m, F, x, w: F.conv2d(x, w, padding="full"), rnd((1, 3, 5, 5)),
                rnd((4, 3, 3, 3)))
    raises_like(lambda m, F, x, w: F.conv1d(x, w), rnd((2, 5, 6)), rnd((4, 3, 3)))
    with pytest.raises(RuntimeError):
        torch.nn.Conv2d(3, 4, 3)(torch.zeros(1, 2, 5, 5))
    with pytest.raises(RuntimeError, match="channels"):
        enn.Conv2d(3, 4, 3)(ember.zeros(1, 2, 5, 5))


def test_batch_norm_bad_inputs():
    for cls, shape in (("BatchNorm1d", (2, 3, 4, 5)), ("BatchNorm1d", (3,)),
                       ("BatchNorm2d", (2, 3, 4)), ("BatchNorm2d", (2, 3))):
        with pytest.raises(ValueError) as t_exc:
            getattr(torch.nn, cls)(3)(torch.zeros(*shape))
        with pytest.raises(ValueError) as e_exc:
            getattr(enn, cls)(3)(ember.zeros(*shape))
        assert str(e_exc.value) == str(t_exc.value)
    for cls, shape in (("BatchNorm1d", (2, 4)), ("BatchNorm2d", (2, 4, 3, 3))):
        tm, em = getattr(torch.nn, cls)(3), getattr(enn, cls)(3)
        with pytest.raises(RuntimeError):
            tm(torch.zeros(*shape))
        with pytest.raises(RuntimeError):
            em(ember.zeros(*shape))
        tm.eval()
        em.eval()
        with pytest.raises(RuntimeError):
            tm(torch.zeros(*shape))
        with pytest.raises(RuntimeError):
            em(ember.zeros(*shape))
    # one value per channel: no variance to normalise by
    raises_like(lambda m, F, x: F.batch_norm(x, None, None, training=True), rnd((1, 3)))


def test_other_bad_inputs():
    raises_like(lambda m, F, x: F.layer_norm(x, (4,)), rnd((3, 5)))
    raises_like(lambda m, F, x: F.layer_norm(x, (3, 4)), rnd((4, 3)))
    raises_like(lambda m, F, i, w: F.embedding(i, w), K([0.0, 1.0]), rnd((5, 2)))
    raises_like(lambda m, F, i, w: F.embedding(i, w), K([0, 5]), rnd((5, 2)))
    raises_like(lambda m, F, x: F.max_pool2d(x, 2), rnd((4, 4)))
    raises_like(lambda m, F, x: F.max_pool2d(x, 2, padding=2), rnd((1, 4, 4)))
    raises_like(lambda m, F, x: F.avg_pool2d(x, 3, padding=2), rnd((1, 4, 4)))
    raises_like(lambda m, F, x: F.max_pool2d(x, 5), rnd((1, 4, 4)))
    raises_like(lambda m, F, x: F.adaptive_avg_pool2d(x, 2), rnd((4, 4)))
    raises_like(lambda m, F, x, w: F.linear(x, w), rnd((2, 3)), rnd((2, 4)))
