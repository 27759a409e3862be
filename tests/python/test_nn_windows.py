"""The sliding-window ops (runtime/cpu/conv.c, pool.c, window.c) against
PyTorch 1.13: convolution in 1 to 3 dims and its transpose, max, average and
adaptive pooling with indices, fold; their gradients, second derivatives
(each op's gradient is another window op, so it differentiates again),
their errors, and a compiled CNN step, which holds one node per layer.
(conv1d/conv2d, max/avg/adaptive_avg_pool2d and unfold are covered case by
case in test_nn_functional.py.)"""

import numpy as np
import pytest
import torch
import torch.nn.functional as TF

import ember
import ember.nn as enn
import ember.nn.functional as EF
from ember.autograd import gradcheck
from test_nn_functional import check, check_module, raises_like, rnd

pytestmark = pytest.mark.filterwarnings("ignore:Using padding='same' with even kernel")

CONV3D = [dict(), dict(stride=2, padding=1), dict(stride=(1, 2, 1), dilation=(2, 1, 1)),
          dict(groups=2, padding="same"), dict(padding=(0, 1, 2), bias=False)]


@pytest.mark.parametrize("cfg", CONV3D, ids=[str(c) for c in CONV3D])
def test_conv3d(cfg):
    cfg = dict(cfg)
    bias = rnd((6,), 2) if cfg.pop("bias", True) else None
    g = cfg.get("groups", 1)
    check(lambda m, F, x, w, b: F.conv3d(x, w, b, **cfg), rnd((2, 4, 5, 6, 5), 0),
          rnd((6, 4 // g, 3, 2, 3), 1), bias)


CONVT = [dict(), dict(stride=2), dict(stride=2, padding=1, output_padding=1),
         dict(stride=(2, 3), padding=(1, 0), output_padding=(0, 2), groups=2),
         dict(dilation=3, stride=2, output_padding=2),  # output padding past the stride
         dict(bias=False, dilation=2, padding=2)]


@pytest.mark.parametrize("nd", [1, 2, 3])
@pytest.mark.parametrize("cfg", CONVT, ids=[str(c) for c in CONVT])
def test_conv_transpose(cfg, nd):
    cfg = {k: (v[:nd] if isinstance(v, tuple) else v) for k, v in cfg.items()}
    cfg = {k: (v * 3 if isinstance(v, tuple) and len(v) < nd else v) for k, v in cfg.items()}
    cfg = {k: (v[:nd] if isinstance(v, tuple) else v) for k, v in cfg.items()}
    bias = rnd((6,), 2) if cfg.pop("bias", True) else None
    g = cfg.get("groups", 1)
    spatial, kernel = (5, 4, 3)[:nd], (3, 2, 3)[:nd]
    name = f"conv_transpose{nd}d"
    check(lambda m, F, x, w, b: getattr(F, name)(x, w, b, **cfg), rnd((2, 4) + spatial, 0),
          rnd((4, 6 // g) + kernel, 1), bias)


def test_conv_transpose_modules_and_output_size():
    for nd in (1, 2, 3):
        em = getattr(enn, f"ConvTranspose{nd}d")(4, 6, 3, stride=2, padding=1, groups=2,
                                                 dtype=ember.float64)
        tm = getattr(torch.nn, f"ConvTranspose{nd}d")(4, 6, 3, stride=2, padding=1, groups=2,
                                                      dtype=torch.float64)
        x = rnd((2, 4) + (5, 4, 3)[:nd])
        check_module(em, tm, x)
        size = [s * 2 for s in (5, 4, 3)[:nd]]  # one more than the default: output_padding 1
        check_module(em, tm, x, call=lambda mod, a: mod(a, output_size=size))
        assert "ConvTranspose" in repr(em)
    em, tm = enn.Conv3d(4, 6, 2, padding=1, dtype=ember.float64), \
        torch.nn.Conv3d(4, 6, 2, padding=1, dtype=torch.float64)
    check_module(em, tm, rnd((2, 4, 3, 4, 5)))


POOLS = [dict(kernel_size=2), dict(kernel_size=3, stride=2, padding=1),
         dict(kernel_size=3, stride=2, ceil_mode=True), dict(kernel_size=2, stride=1, dilation=2)]


@pytest.mark.parametrize("nd", [1, 2, 3])
@pytest.mark.parametrize("cfg", POOLS, ids=[str(c) for c in POOLS])
def test_max_pool_with_indices(cfg, nd):
    fn = f"max_pool{nd}d"
    check(lambda m, F, x: getattr(F, fn)(x, return_indices=True, **cfg),
          rnd((2, 3) + (9, 8, 7)[:nd]))
    check(lambda m, F, x: getattr(F, fn)(x, **cfg), rnd((3,) + (9, 8, 7)[:nd]))  # unbatched


@pytest.mark.parametrize("nd", [1, 3])
@pytest.mark.parametrize("cfg", [dict(kernel_size=2), dict(kernel_size=3, stride=2, padding=1),
                                 dict(kernel_size=3, stride=2, padding=1, ceil_mode=True,
                                      count_include_pad=False)])
def test_avg_pool_1d_3d(cfg, nd):
    fn = f"avg_pool{nd}d"
    check(lambda m, F, x: getattr(F, fn)(x, **cfg), rnd((2, 3) + (9, 8, 7)[:nd]))


def test_avg_pool_divisor_override():
    check(lambda m, F, x: F.avg_pool3d(x, 2, 2, 1, divisor_override=3), rnd((2, 3, 5, 4, 5)))
    check(lambda m, F, x: F.avg_pool2d(x, 3, 2, 1, True, False, 5), rnd((2, 3, 7, 6)))


@pytest.mark.parametrize("nd", [1, 2, 3])
@pytest.mark.parametrize("out", [1, 3, (2, 4, 3), None])
def test_adaptive_pools(out, nd):
    if isinstance(out, tuple):
        out = out[:nd] if nd > 1 else out[0]
    elif out is None:
        out = (None,) + (3,) * (nd - 1) if nd > 1 else 4
    x = rnd((2, 3) + (7, 9, 5)[:nd])
    check(lambda m, F, x: getattr(F, f"adaptive_avg_pool{nd}d")(x, out), x)
    check(lambda m, F, x: getattr(F, f"adaptive_max_pool{nd}d")(x, out, True), x)


def test_pool_modules():
    x = rnd((2, 3, 6, 7, 8))
    for name, args in (("MaxPool3d", (2,)), ("AvgPool3d", (3, 2, 1)), ("AdaptiveAvgPool3d", (2,)),
                       ("AdaptiveMaxPool3d", (3,)), ("MaxPool1d", (3, 2)), ("AvgPool1d", (2,))):
        inp = x[:, :, :, 0, 0] if name.endswith("1d") else x
        check_module(getattr(enn, name)(*args), getattr(torch.nn, name)(*args), inp)


def test_max_pool_nan_and_ties():
    x = np.zeros((1, 1, 4, 4))
    x[0, 0, 0, 1] = x[0, 0, 1, 0] = np.nan  # two NaNs in one window: PyTorch keeps the last
    x[0, 0, 2:, 2:] = 1.0                    # ties: the first
    check(lambda m, F, x: F.max_pool2d(x, 2, return_indices=True), x)


@pytest.mark.parametrize("shape,kw", [
    ((2, 3, 8, 8), dict(kernel_size=2)),
    ((1, 2, 9, 7), dict(kernel_size=3, stride=2)),
    ((2, 1, 5, 33), dict(kernel_size=(2, 3), stride=(1, 2))),
    ((3, 4, 4, 4), dict(kernel_size=2)),
    ((1, 1, 40, 1), dict(kernel_size=(4, 1))),
], ids=["2x2", "3x3_s2", "2x3_s12", "4x4", "column"])
def test_max_pool_float32_whole_windows(shape, kw):
    """float32 pools over whole windows take a vector path (gathers, 16
    outputs of a plane at once, across its rows): values, indices, NaNs
    (the last in a window wins), ties (the first) and the gradient, as
    PyTorch; planes whose outputs are not a multiple of 16 included."""
    rng = np.random.default_rng(0)
    x = rng.integers(-3, 4, size=shape).astype(np.float32)  # many ties
    x.flat[rng.choice(x.size, x.size // 10, replace=False)] = np.nan
    check(lambda m, F, x: F.max_pool2d(x, return_indices=True, **kw), x)
    x = rng.standard_normal(shape).astype(np.float32)
    check(lambda m, F, x: F.max_pool2d(x, **kw), x, rtol=1e-6, atol=1e-6)


def test_fold():
    cols = rnd((2, 3 * 2 * 3, 21))
    check(lambda m, F, c: F.fold(c, (6, 7), (2, 3), dilation=(2, 1), padding=1, stride=(2, 1)),
          cols)
    check(lambda m, F, c: F.fold(c, (5, 5), 2), rnd((3 * 4, 16)))  # unbatched
    em, tm = enn.Fold((5, 5), 2), torch.nn.Fold((5, 5), 2)
    check_module(em, tm, rnd((2, 8, 16)))
    check_module(enn.Unfold(2, padding=1), torch.nn.Unfold(2, padding=1), rnd((2, 3, 4, 5)))


def test_float32_and_thread_independence():
    x = rnd((5, 6, 9, 9), 0, dtype=np.float32)
    w = rnd((8, 6, 3, 3), 1, dtype=np.float32)
    tol = dict(rtol=1e-5, atol=1e-5)  # sums of 54 products
    check(lambda m, F, x, w: F.conv2d(x, w, padding=1), x, w, **tol)
    check(lambda m, F, x, w: F.conv_transpose2d(x, w[:, :, :2], stride=2), x, w[:6], **tol)
    # the weight gradient's sum over samples splits by the shapes only
    ex, ew = ember.tensor(x, requires_grad=True), ember.tensor(w, requires_grad=True)
    grads = []
    for threads in (1, 2, 3):
        old = ember.get_num_threads()
        ember.set_num_threads(threads)
        try:
            ex.grad = ew.grad = None
            EF.conv2d(ex, ew, padding=1).square().sum().backward()
            grads.append((ex.grad.numpy().copy(), ew.grad.numpy().copy()))
        finally:
            ember.set_num_threads(old)
    for gx, gw in grads[1:]:
        np.testing.assert_array_equal(gx, grads[0][0])
        np.testing.assert_array_equal(gw, grads[0][1])


# ---------------------------------------------------------------- second derivatives

def _double_backward(m, F, fn, x, w):
    """d/d(x, w) of |d fn(x, w) / d(x, w) . v|^2: differentiates the
    gradient ops themselves."""
    y = fn(F, x, w)
    v = m.from_numpy(np.linspace(-1, 1, y.numel()).reshape(tuple(y.shape)))
    gx, gw = m.autograd.grad((y * v).sum(), (x, w), create_graph=True)
    return m.autograd.grad((gx * gx).sum() + (gw * gw).sum(), (x, w))


@pytest.mark.parametrize("fn", [
    lambda F, x, w: F.conv2d(x, w, stride=2, padding=1, groups=2),
    lambda F, x, w: F.conv_transpose2d(x, w, stride=2, output_padding=1, groups=2),
    lambda F, x, w: F.max_pool2d(F.conv2d(x, w, padding=1, groups=2), 2) ** 2,
    lambda F, x, w: F.avg_pool2d(F.conv2d(x, w, groups=2), 2, ceil_mode=True) ** 2,
    lambda F, x, w: F.adaptive_avg_pool2d(F.conv2d(x, w, groups=2), 3) ** 2,
    lambda F, x, w: F.fold(F.unfold(x, 2) * w.reshape(1, -1, 1)[:, :16], (5, 5), 2) ** 2,
], ids=["conv", "conv_transpose", "max_pool", "avg_pool_ceil", "adaptive_avg", "unfold_fold"])
def test_second_derivatives(fn):
    x, w = rnd((2, 4, 5, 5), 0), rnd((4, 2, 3, 3), 1)
    results = []
    for m, F in ((ember, EF), (torch, TF)):
        xs, ws = m.from_numpy(x.copy()).requires_grad_(), m.from_numpy(w.copy()).requires_grad_()
        results.append(_double_backward(m, F, fn, xs, ws))
    for e, t in zip(*results):
        np.testing.assert_allclose(e.numpy(), t.numpy(), rtol=1e-7, atol=1e-9)


def test_gradcheck_windows():
    p = lambda shape, seed: ember.from_numpy(rnd(shape, seed)).requires_grad_()  # noqa: E731
    assert gradcheck(lambda x, w, b: EF.conv3d(x, w, b, stride=2, padding=1),
                     (p((1, 2, 3, 3, 3), 0), p((2, 2, 2, 2, 2), 1), p((2,), 2)))
    assert gradcheck(lambda x, w: EF.conv_transpose1d(x, w, stride=2, output_padding=1, groups=2),
                     (p((2, 4, 3), 0), p((4, 1, 3), 1)))
    assert gradcheck(lambda x: EF.fold(x, (3, 4), 2), (p((1, 8, 6), 0),))
    assert gradcheck(lambda x: EF.adaptive_max_pool1d(x, 3), (p((2, 2, 7), 0),))


# ---------------------------------------------------------------- errors

def test_window_errors_match_pytorch():
    raises_like(lambda m, F, x, w: F.conv3d(x, w), rnd((1, 3, 4, 4, 4)), rnd((2, 4, 2, 2, 2)))
    raises_like(lambda m, F, x, w: F.conv3d(x, w), rnd((1, 3, 1, 4, 4)), rnd((2, 3, 2, 2, 2)))
    raises_like(lambda m, F, x, w: F.conv_transpose2d(x, w, stride=2, output_padding=2),
                rnd((1, 3, 4, 4)), rnd((3, 2, 2, 2)))
    raises_like(lambda m, F, x, w: F.conv_transpose2d(x, w), rnd((1, 4, 4, 4)), rnd((3, 2, 2, 2)))
    raises_like(lambda m, F, x: F.max_pool3d(x, 2, padding=2), rnd((1, 1, 4, 4, 4)))
    raises_like(lambda m, F, x: F.avg_pool1d(x, 5), rnd((1, 2, 3)))
    raises_like(lambda m, F, x: F.max_pool2d(x, 2), rnd((2, 2)))
    raises_like(lambda m, F, x: F.fold(x, (4, 4), 2), rnd((1, 7, 9)))


def test_window_errors_name_the_op():
    with pytest.raises(RuntimeError, match="max_pool.*float32 or float64"):
        EF.max_pool2d(ember.ones(1, 1, 4, 4, dtype=ember.int64), 2)
    with pytest.raises(RuntimeError, match="conv: .*groups=3"):
        EF.conv2d(ember.ones(1, 4, 4, 4), ember.ones(3, 1, 2, 2), groups=3)
    with pytest.raises(RuntimeError, match="conv: expected a 4-d weight of dtype f32, the input's"):
        ember._C._window(ember._C._op_ids()["conv"], [ember.ones(1, 2, 4, 4),
                                                      ember.ones(2, 2, 2, 2, dtype=ember.float64)],
                         [], [1, 1], [0, 0, 0, 0], [1, 1], 1, False, True, 0, [])
    ids = ember._C._op_ids()
    gy, idx = ember.ones(1, 1, 2, 2), ember.tensor([[[[0, 1], [2, 99]]]])
    with pytest.raises(IndexError, match="max_pool_grad: an index is outside"):
        ember._C._window(ids["max_pool_grad"], [gy, idx], [], [], [], [], 1, False, True, 0,
                         [1, 1, 3, 3])
    with pytest.raises(RuntimeError, match="stride must be positive"):
        EF.conv2d(ember.ones(1, 1, 4, 4), ember.ones(1, 1, 2, 2), stride=0)


# ---------------------------------------------------------------- compiled

class SmallCNN(enn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = enn.Conv2d(1, 4, 3, padding=1)
        self.conv2 = enn.Conv2d(4, 8, 3, stride=2, padding=1, groups=2)
        self.pool = enn.MaxPool2d(2)
        self.avg = enn.AdaptiveAvgPool2d(1)
        self.fc = enn.Linear(8, 3)

    def forward(self, x):
        x = self.pool(EF.relu(self.conv1(x)))
        x = self.avg(EF.relu(self.conv2(x)))
        return self.fc(x.flatten(1))


def test_compiled_cnn_step_matches_eager_with_a_node_per_layer():
    def make():
        ember.manual_seed(0)
        model = SmallCNN()
        opt = ember.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)

        def step(x, y):
            loss = EF.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            return loss
        return model, step

    rng = np.random.default_rng(0)
    batches = [(ember.tensor(rng.standard_normal((4, 1, 8, 8)).astype(np.float32)),
                ember.tensor(rng.integers(0, 3, 4))) for _ in range(4)]
    em, eager = make()
    cm, step = make()
    compiled = ember.compile(step)
    for x, y in batches:
        np.testing.assert_array_equal(compiled(x, y).numpy(), eager(x, y).numpy())
    for (_, a), (_, b) in zip(em.named_parameters(), cm.named_parameters()):
        np.testing.assert_array_equal(a.detach().numpy(), b.detach().numpy())
    ir = ember.compiler.explain(compiled, *batches[0], print_report=False).specialization["traced_ir"]
    for op, count in (("conv(", 2), ("conv_transpose(", 1), ("conv_weight(", 2), ("max_pool(", 1),
                      ("max_pool_grad(", 1), ("adaptive_avg_pool(", 1),
                      ("adaptive_avg_pool_grad(", 1)):
        assert ir.count(f"= {op}") == count, op
    assert "slice(" not in ir and "stack" not in ir
