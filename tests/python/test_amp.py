"""ember.amp (issue 40, item 2): CPU autocast computes matmuls and
convolutions in bfloat16 as PyTorch's does (the same dtypes, values within
bfloat16's precision of PyTorch's, float32 gradients), compiled functions
specialise on it, and GradScaler scales, unscales, skips overflowing steps
and adapts its scale; the CUDA spellings warn and stay off."""

import warnings

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")


def model(m):
    m.manual_seed(0)
    return m.nn.Sequential(m.nn.Conv2d(2, 4, 3, padding=1), m.nn.ReLU(), m.nn.Flatten(), m.nn.Linear(4 * 5 * 5, 3))


def copy_weights(src, dst):
    with torch.no_grad():
        for (_, a), (_, b) in zip(src.named_parameters(), dst.named_parameters()):
            b.copy_(torch.tensor(a.detach().numpy()))


def test_autocast_runs_matmuls_and_convolutions_in_bfloat16_as_pytorch():
    em, th = model(ember), model(torch)
    copy_weights(em, th)
    x = np.random.default_rng(0).standard_normal((2, 2, 5, 5)).astype(np.float32)
    outs = {}
    for m, net in ((ember, em), (torch, th)):
        xin = m.tensor(x)
        with m.autocast("cpu"):
            conv = net[0](xin)
            y = net(xin)
            mm = xin.flatten(1) @ xin.flatten(1).t()
            add = xin + 1
            with m.autocast("cpu", enabled=False):
                off = xin.flatten(1) @ xin.flatten(1).t()
        outs[m] = (conv, y, mm, add, off)
        assert (conv.dtype, y.dtype, mm.dtype, add.dtype, off.dtype) == \
            (m.bfloat16, m.bfloat16, m.bfloat16, m.float32, m.float32)
        loss = y.float().pow(2).sum()
        loss.backward()
        assert net[0].weight.grad.dtype == m.float32 and net[3].weight.grad.dtype == m.float32
    for e, t in zip(outs[ember], outs[torch]):
        np.testing.assert_allclose(e.float().detach().numpy(), t.float().detach().numpy(), rtol=2e-2, atol=5e-2)
    for (_, a), (_, b) in zip(em.named_parameters(), th.named_parameters()):
        np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=5e-2, atol=5e-2)


def test_autocast_nests_decorates_and_reports_itself():
    assert not ember.is_autocast_cpu_enabled()

    @ember.autocast("cpu")
    def f(x):
        return x @ x, ember.is_autocast_cpu_enabled(), ember.get_autocast_cpu_dtype()

    y, on, dt = f(ember.ones(2, 2))
    assert y.dtype == ember.bfloat16 and on and dt == ember.bfloat16
    assert not ember.is_autocast_cpu_enabled()
    with ember.cpu.amp.autocast():
        assert (ember.ones(2, 2) @ ember.ones(2, 2)).dtype == ember.bfloat16
    with pytest.warns(UserWarning, match="CPU Autocast only supports dtype of ember.bfloat16"):
        with ember.autocast("cpu", dtype=ember.float16):
            assert (ember.ones(2, 2) @ ember.ones(2, 2)).dtype == ember.float32
    # float64 operands are not autocast, as in PyTorch
    with ember.autocast("cpu"):
        assert (ember.ones(2, 2, dtype=ember.float64) @ ember.ones(2, 2, dtype=ember.float64)).dtype == ember.float64


def test_compiled_functions_specialise_on_autocast():
    def f(x, w):
        return (x @ w).relu() + 1

    cf = ember.compile(f)
    x, w = ember.randn(4, 8), ember.randn(8, 3)
    for autocast_on in (False, True, False, True):
        with ember.autocast("cpu", enabled=autocast_on):
            got, want = cf(x, w), f(x, w)
        assert got.dtype == want.dtype == (ember.bfloat16 if autocast_on else ember.float32)
        np.testing.assert_array_equal(got.float().numpy(), want.float().numpy())
    stats = cf._stats()
    assert stats["eager_calls"] == 0 and stats["specializations"] == 2, stats


def test_a_training_step_under_autocast_with_a_grad_scaler():
    net = model(ember)
    opt = ember.optim.SGD(net.parameters(), lr=0.01)
    scaler = ember.amp.GradScaler("cpu", init_scale=1024.0, growth_interval=2)
    x, y = ember.randn(3, 2, 5, 5), ember.tensor([0, 1, 2])
    before = net[3].weight.detach().clone()
    for _ in range(2):
        opt.zero_grad()
        with ember.autocast("cpu"):
            loss = ember.nn.functional.cross_entropy(net(x).float(), y)
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
    assert not net[3].weight.detach().equal(before)
    assert scaler.get_scale() == 2048.0  # two clean steps: grown once


def test_grad_scaler_unscales_skips_overflowing_steps_and_backs_off():
    p = ember.nn.Parameter(ember.ones(3))
    opt = ember.optim.SGD([p], lr=1.0)
    scaler = ember.amp.GradScaler("cpu", init_scale=8.0, growth_factor=2.0, backoff_factor=0.25, growth_interval=3)
    assert scaler.scale(ember.tensor(2.0)).item() == 16.0
    assert [t.item() for t in scaler.scale([ember.tensor(1.0), ember.tensor(3.0)])] == [8.0, 24.0]
    (scaler.scale(p.sum())).backward()
    scaler.unscale_(opt)
    assert p.grad.tolist() == [1.0, 1.0, 1.0]  # unscaled before clipping, say
    with pytest.raises(RuntimeError, match="unscale_\\(\\) has already been called"):
        scaler.unscale_(opt)
    scaler.step(opt)
    scaler.update()
    assert p.detach().tolist() == [0.0, 0.0, 0.0] and scaler.get_scale() == 8.0
    p.grad = ember.tensor([1.0, float("inf"), 0.0])
    scaler.step(opt)  # skipped: an inf
    scaler.update()
    assert p.detach().tolist() == [0.0, 0.0, 0.0] and scaler.get_scale() == 2.0
    state = scaler.state_dict()
    other = ember.amp.GradScaler("cpu")
    other.load_state_dict(state)
    assert other.get_scale() == 2.0 and other.get_backoff_factor() == 0.25


def test_disabled_and_cuda_spellings_pass_through_as_pytorch():
    p = ember.nn.Parameter(ember.ones(2))
    opt = ember.optim.SGD([p], lr=0.5)
    off = ember.amp.GradScaler("cpu", enabled=False)
    loss = off.scale(p.sum())
    assert loss.item() == 2.0 and off.get_scale() == 1.0 and off.state_dict() == {}
    loss.backward()
    off.step(opt)
    off.update()
    assert p.detach().tolist() == [0.5, 0.5]
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        from ember.cuda.amp import GradScaler, autocast
        scaler = GradScaler()
        with autocast():
            r = ember.ones(2, 2) @ ember.ones(2, 2)
    assert not scaler.is_enabled() and r.dtype == ember.float32
    assert any("CUDA is not available" in str(w.message) or "no CUDA autocast" in str(w.message) for w in seen)
