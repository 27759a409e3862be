"""Memory formats (issue 40, item 2): channels_last and channels_last_3d
strides as PyTorch's through to(), contiguous(), clone() and Module.to();
a channels-last model and batch train to the same values as row-major ones,
eagerly and compiled."""

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")


@pytest.mark.parametrize("shape,fmt", [((2, 3, 4, 5), "channels_last"), ((1, 3, 1, 1), "channels_last"),
                                       ((2, 1, 4, 5), "channels_last"), ((2, 3, 2, 4, 5), "channels_last_3d")])
def test_strides_and_predicates_as_pytorch(shape, fmt):
    def run(m):
        x = m.arange(int(np.prod(shape)), dtype=m.float32).reshape(shape)
        f = getattr(m, fmt)
        y = x.to(memory_format=f)
        z = x.contiguous(memory_format=f)
        return (y.stride(), z.stride(), y.is_contiguous(), y.is_contiguous(memory_format=f),
                x.is_contiguous(memory_format=f), y.clone().stride(),
                y.clone(memory_format=m.contiguous_format).stride(), y.contiguous().stride(), y.tolist(),
                y.to(m.float64, memory_format=f).stride())

    assert run(ember) == run(torch)


def test_wrong_ranks_and_types_are_refused():
    with pytest.raises(RuntimeError, match="required rank 4 tensor to use channels_last format"):
        ember.zeros(2, 3).contiguous(memory_format=ember.channels_last)
    with pytest.raises(TypeError, match="memory_format must be an ember.memory_format"):
        ember.zeros(2, 3).contiguous(memory_format="channels_last")
    assert repr(ember.channels_last) == "ember.channels_last"
    assert not ember.zeros(2, 3).is_contiguous(memory_format=ember.channels_last)


def test_a_channels_last_model_trains_like_a_row_major_one_eager_and_compiled():
    def build(fmt):
        ember.manual_seed(0)
        net = ember.nn.Sequential(ember.nn.Conv2d(3, 4, 3, padding=1), ember.nn.BatchNorm2d(4), ember.nn.ReLU(),
                                  ember.nn.Conv2d(4, 2, 3), ember.nn.Flatten(), ember.nn.Linear(2 * 4 * 4, 3))
        if fmt is not None:
            assert net.to(memory_format=fmt) is net  # (accepted; the parameters stay row-major)
        return net, ember.optim.SGD(net.parameters(), lr=0.1, momentum=0.9)

    def step_of(net, opt):
        def step(x, y):
            opt.zero_grad()
            loss = ember.nn.functional.cross_entropy(net(x), y)
            loss.backward()
            opt.step()
            return loss.detach()
        return step

    ember.manual_seed(1)
    x, y = ember.randn(4, 3, 6, 6), ember.tensor([0, 1, 2, 1])
    ref_net, ref_opt = build(None)
    ref = [step_of(ref_net, ref_opt)(x, y).item() for _ in range(3)]
    for compiled in (False, True):
        net, opt = build(ember.channels_last)
        step = step_of(net, opt)
        step = ember.compile(step) if compiled else step
        xl = x.to(memory_format=ember.channels_last)
        got = [step(xl, y).item() for _ in range(3)]
        np.testing.assert_allclose(got, ref, rtol=1e-5)
        for a, b in zip(net.parameters(), ref_net.parameters()):
            np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=1e-4, atol=1e-6)


CONV_CASES = [  # (N, C, H, W, O, kernel, stride, padding, dilation, groups)
    # few output channels per group, or float64: im2row and a GEMM
    (2, 8, 9, 7, 6, 3, 1, 1, 1, 1), (3, 6, 10, 10, 9, 3, 2, 1, 1, 3), (1, 4, 5, 5, 4, 1, 1, 0, 1, 1),
    (2, 16, 12, 12, 8, 1, 2, 0, 1, 2), (4, 8, 6, 6, 8, 3, 1, 2, 2, 8), (1, 5, 1, 9, 3, (1, 3), 1, (0, 1), 1, 1),
    (2, 4, 3, 3, 5, 3, 1, 0, 1, 1),
    # float32 with a vector of output channels or more: conv_last.c's tiles (blocks of 1 to 4 vectors, a
    # partial one, groups, the last tile overlapping, padding, stride and dilation)
    (2, 3, 20, 20, 16, 7, 2, 3, 1, 1), (3, 6, 10, 10, 48, 3, 2, 1, 1, 3), (2, 16, 12, 12, 80, 1, 2, 0, 1, 2),
    (2, 64, 7, 7, 100, 3, 1, 1, 1, 1), (2, 130, 5, 6, 33, 3, 2, 0, 1, 1), (4, 32, 6, 6, 64, 3, 1, 2, 2, 2),
    (1, 5, 3, 9, 17, (1, 3), 1, (0, 1), 1, 1)]


@pytest.mark.parametrize("case", CONV_CASES)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_conv2d_reads_channels_last_in_place_and_keeps_it_as_pytorch(case, dtype):
    n, c, h, w, o, k, s, p, d, g = case
    kk = (k, k) if isinstance(k, int) else k
    rng = np.random.default_rng(0)
    x, wt, b = rng.standard_normal((n, c, h, w)), rng.standard_normal((o, c // g) + kk), rng.standard_normal(o)
    results = {}
    for m in (ember, torch):
        for fmt_x, fmt_w in ((m.channels_last, m.contiguous_format), (m.contiguous_format, m.channels_last)):
            xm = m.tensor(x.astype(dtype)).contiguous(memory_format=fmt_x).requires_grad_()
            wm = m.tensor(wt.astype(dtype)).contiguous(memory_format=fmt_w).requires_grad_()
            bm = m.tensor(b.astype(dtype)).requires_grad_()
            y = m.nn.functional.conv2d(xm, wm, bm, stride=s, padding=p, dilation=d, groups=g)
            (y * y).sum().backward()
            results[m, fmt_x is m.channels_last] = (
                y.is_contiguous(memory_format=m.channels_last), y.is_contiguous(),
                [t.detach().numpy() for t in (y, xm.grad, wm.grad, bm.grad)])
    tol = 1e-5 if dtype == "float32" else 1e-12
    for x_last in (True, False):
        (e_last, e_rows, got), (t_last, t_rows, want) = results[ember, x_last], results[torch, x_last]
        assert (e_last, e_rows) == (t_last, t_rows)
        for a, r in zip(got, want):  # (errors relative to the largest value: float32 sums of squares)
            np.testing.assert_allclose(a, r, rtol=tol, atol=tol * np.abs(r).max())


def test_conv1d_and_conv3d_read_channels_innermost_inputs_and_return_row_major_as_pytorch_113():
    rng = np.random.default_rng(1)
    x, w = rng.standard_normal((3, 17, 8)), rng.standard_normal((5, 8, 3))  # conv1d over (N, L, C).transpose(1, 2)
    x3, w3 = rng.standard_normal((2, 4, 5, 6, 7)), rng.standard_normal((3, 4, 3, 3, 3))
    for m in (ember, torch):
        y = m.nn.functional.conv1d(m.tensor(x).transpose(1, 2), m.tensor(w), padding=1)
        y3 = m.nn.functional.conv3d(m.tensor(x3).contiguous(memory_format=m.channels_last_3d), m.tensor(w3),
                                    stride=(1, 2, 1), padding=1)
        if m is ember:
            got = (y.is_contiguous(), y3.is_contiguous(), y.numpy(), y3.numpy())
        else:
            np.testing.assert_allclose(got[2], y.numpy(), rtol=1e-12, atol=1e-12)
            np.testing.assert_allclose(got[3], y3.numpy(), rtol=1e-12, atol=1e-12)
            assert got[:2] == (y.is_contiguous(), y3.is_contiguous()) == (True, True)


def test_a_compiled_channels_last_conv_equals_eager_and_says_its_layout(tmp_path, monkeypatch):
    monkeypatch.setenv("EMBER_DUMP", "ir")
    monkeypatch.setenv("EMBER_DUMP_DIR", str(tmp_path))
    ember.manual_seed(0)
    conv = ember.nn.Conv2d(6, 8, 3, padding=1, stride=2)

    def f(x):
        return ember.relu(conv(x)) * 2

    cf = ember.compile(f)
    x = ember.randn(2, 6, 10, 10).to(memory_format=ember.channels_last)
    with ember.no_grad():
        for xi in (x, x, x.contiguous(), x.contiguous(), x):
            want, got = f(xi), cf(xi)
            np.testing.assert_array_equal(got.numpy(), want.numpy())
            assert got.stride() == want.stride()  # (the layout too: channels-last exactly where eager's is)
    assert cf._stats()["compiled_calls"] >= 3
    ir = "".join(p.read_text() for p in tmp_path.rglob("final.ir"))
    assert "conv(%x" in ir and "layout=[0,2,3,1]" in ir, ir


def test_a_channels_last_leaf_keeps_its_gradient_channels_last_without_a_copy():
    """The engine takes a first gradient as the leaf's .grad without a copy
    where it is laid out as the leaf (contiguous, or dense with the leaf's
    strides), as PyTorch's AccumulateGrad; else it clones it row-major."""
    rng = np.random.default_rng(4)
    x0, w0 = rng.standard_normal((2, 4, 6, 6)), rng.standard_normal((8, 4, 3, 3))
    got = {}
    for m in (ember, torch):
        x = m.tensor(x0).contiguous(memory_format=m.channels_last).requires_grad_()
        xr = m.tensor(x0).requires_grad_()
        w = m.tensor(w0)
        for leaf in (x, xr):
            y = m.nn.functional.conv2d(leaf, w, padding=1)
            (y * y).sum().backward()
        got[m] = (x.grad.is_contiguous(memory_format=m.channels_last), x.grad.numpy(), xr.grad.numpy())
    assert got[ember][0] and got[torch][0]
    np.testing.assert_allclose(got[ember][1], got[torch][1], rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(got[ember][2], got[torch][2], rtol=1e-12, atol=1e-12)
