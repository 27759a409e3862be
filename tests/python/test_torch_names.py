"""torch's top-level spellings that ember covers with its own functions
(python/ember/_torch_names.py) and the in-place view methods
(python/ember/_tensor_more.py), each against PyTorch 1.13 on the same
values: a program written for torch that calls them gets torch's answers."""

import math
import warnings

import numpy as np
import pytest

import ember
from torchdiff import Arg, arr, check, raises_like_torch

torch = pytest.importorskip("torch")


def both(a):
    """The same values as an ember and a torch tensor."""
    return ember.tensor(a), torch.tensor(a)


@pytest.mark.parametrize("name", ["abs_", "exp_", "sigmoid_", "clamp_", "relu_", "sinc_", "logit_", "arcsin_"])
def test_in_place_function_spellings_write_into_their_input(name):
    def fn(m, x):
        y = x.clone()
        args = {"clamp_": (-0.5, 0.5)}.get(name, ())
        out = getattr(m, name)(y, *args)
        assert out is y
        return y
    check(fn, arr("float32", (3, 4), kind="unit"))


@pytest.mark.parametrize("name,args", [("permute", ((1, 0, 2),)), ("transpose", (0, 2)), ("select", (1, 1)),
                                       ("diagonal", ()), ("unsqueeze", (1,)), ("expand", ((2, 2, 3, 4),)),
                                       ("slice", (2, 1, 4, 2)), ("unfold", (2, 2, 1)), ("view", ((6, 4),)),
                                       ("alias", ()), ("split", (1,)), ("unbind", (0,))])
def test_copy_forms_hold_the_view_values_in_memory_of_their_own(name, args):
    def fn(m, x):
        out = getattr(m, name + "_copy")(x, *args)
        outs = out if isinstance(out, (list, tuple)) else [out]
        x.add_(100)
        return outs  # unchanged by the write into x: none of them is a view
    check(fn, arr("float32", (2, 3, 4)))


def test_constants():
    for name in ("e", "pi", "inf"):
        assert getattr(ember, name) == getattr(torch, name)
    assert math.isnan(ember.nan)


def test_linear_algebra_spellings():
    a, b, c = arr("float64", (3, 4)), arr("float64", (4, 5), seed=1), arr("float64", (5, 2), seed=2)
    check(lambda m, a, b, c: m.chain_matmul(a, b, c), a, b, c)
    check(lambda m, a: m.chain_matmul(a), a)
    check(lambda m, a: m.frobenius_norm(a), arr("float64", (2, 3, 4)))
    check(lambda m, a: m.frobenius_norm(a, (0,), True), arr("float64", (2, 3, 4)))
    check(lambda m, a: m.nuclear_norm(a), a)
    check(lambda m, a: m.nuclear_norm(a, (0, 2), keepdim=True), arr("float64", (3, 4, 5)))
    for dim in (0, 1, 2, -1):
        check(lambda m, a: m.norm_except_dim(a, 2, dim), arr("float64", (3, 4, 5)))
    check(lambda m, a: m.norm_except_dim(a, 3, 1), arr("float64", (3, 4, 5)))
    check(lambda m, a: m.adjoint(a), arr("float32", (2, 3, 4)))
    raises_like_torch(lambda m, a: m.solve(a, a), arr("float64", (3, 3)))
    raises_like_torch(lambda m, a: m.matrix_rank(a), arr("float64", (3, 3)))


def test_creation_spellings():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for args in ((1, 4), (0, 1, 0.25), (5,), (3, -1, -0.5)):
            check(lambda m: m.range(*args))
        check(lambda m: m.range(0, 3, dtype=m.int64))
    check(lambda m: m.scalar_tensor(3))
    check(lambda m: m.scalar_tensor(2.5, dtype=m.float64))
    check(lambda m, x: m.fill(x, 7), arr("int32", (2, 3)))
    check(lambda m, x: m.clone(x), arr("float32", (2, 3)))
    check(lambda m, x: m.detach(x), arr("float32", (2, 3)))
    check(lambda m, x: m.t(x), arr("float32", (2, 3)))


def test_index_put_and_unsafe_splits():
    check(lambda m, x, i: m.index_put(x, (i,), m.ones(2, 4), True), arr("float32", (5, 4)),
          Arg([1, 1], "int64"))
    check(lambda m, x: m.unsafe_chunk(x, 3, 1), arr("float32", (2, 7)))
    check(lambda m, x: m.unsafe_split(x, 2), arr("float32", (5, 2)))
    check(lambda m, x: m.unsafe_split_with_sizes(x, [1, 3], 1), arr("float32", (2, 4)))


def test_typename_and_devices():
    assert ember.typename(ember.ones(2, dtype=ember.float64)) == ember.ones(2, dtype=ember.float64).type()
    assert ember.typename(3) == "int" and ember.typename(ember.nn.Linear(1, 1)) == "ember.nn.modules.linear.Linear"
    assert ember.get_device(ember.ones(1)) == torch.get_device(torch.ones(1)) == -1
    assert not ember.is_storage(ember.ones(1))


def test_convolution_spellings():
    x, w, b = arr("float64", (7, 2, 3)), arr("float64", (3, 3, 4), seed=1), arr("float64", (4,), seed=2)
    check(lambda m, x, w, b: m.conv_tbc(x, w, b, 1), x, w, b)
    x, w = arr("float64", (2, 3, 6, 5)), arr("float64", (4, 3, 3, 2), seed=1)
    check(lambda m, x, w: m.convolution(x, w, None, [2, 1], [1, 0], [1, 2], False, [0, 0], 1), x, w)
    wt = arr("float64", (3, 2, 3, 3), seed=3)
    check(lambda m, x, w: m.convolution(x, w, None, [2, 2], [1, 1], [1, 1], True, [1, 0], 1), x, wt)


def test_losses_take_torch_integer_reductions():
    x, y, t = arr("float64", (4, 5)), arr("float64", (4, 5), seed=1), arr("float64", (4,), kind="sign", seed=2)
    for r in (0, 1, 2):
        check(lambda m, x, y: m.binary_cross_entropy_with_logits(x, y.sigmoid(), None, None, r), x, y)
        check(lambda m, x, y, t: m.cosine_embedding_loss(x, y, t, 0.1, r), x, y, t)
        check(lambda m, x, y: m.hinge_embedding_loss(x, y.sign(), 1.0, r), x, y)
        check(lambda m, x, y: m.margin_ranking_loss(x, y, y.sign(), 0.2, r), x, y)
        check(lambda m, x, y: m.kl_div(x.log_softmax(1), y.softmax(1), r), x, y)
        check(lambda m, x, y: m.poisson_nll_loss(x, y.abs(), True, False, 1e-8, r), x, y)
        check(lambda m, x, y: m.triplet_margin_loss(x, y, x.flip(0), 1.0, 2.0, 1e-6, False, r), x, y)


def test_normalisation_and_embedding_spellings():
    x = arr("float64", (3, 4, 5))
    w, b = arr("float64", (4,), seed=1), arr("float64", (4,), seed=2)
    check(lambda m, x, w, b: m.batch_norm(x, w, b, None, None, True, 0.1, 1e-5, False), x, w, b)
    check(lambda m, x, w, b: m.instance_norm(x, w, b, None, None, True, 0.1, 1e-5, False), x, w, b)
    check(lambda m, x, w, b: m.native_group_norm(x, w, b, 3, 4, 5, 2, 1e-5), x, w, b)
    table = arr("float64", (6, 3))
    check(lambda m, t, i: m.embedding(t, i), table, Arg([[0, 5], [2, 2]], "int64"))
    check(lambda m, x: m.max_pool1d_with_indices(x, 2, 1, 1), x)
    check(lambda m, x: m.adaptive_max_pool1d(x, 3), x)


def test_grid_sampler_spellings():
    img, grid = arr("float64", (1, 2, 5, 4)), arr("float64", (1, 3, 3, 2), kind="unit", seed=1)
    for mode in (0, 1, 2):
        for pad in (0, 1, 2):
            check(lambda m, i, g: m.grid_sampler(i, g, mode, pad, False), img, grid)
    check(lambda m, i, g: m.grid_sampler_2d(i, g, 0, 0, True), img, grid)
    theta = arr("float64", (2, 2, 3))
    check(lambda m, t: m.affine_grid_generator(t, [2, 1, 3, 4], False), theta)


def test_native_dropout_keeps_its_mask():
    x = ember.ones(1000, dtype=ember.float64)
    out, keep = ember.native_dropout(x, 0.25, True)
    assert keep.dtype == ember.bool
    np.testing.assert_allclose(out.numpy(), keep.numpy() / 0.75)
    assert 0.6 < keep.double().mean().item() < 0.9
    out, keep = ember.native_dropout(x, 0.25, False)
    assert bool(keep.all()) and np.array_equal(out.numpy(), x.numpy())


@pytest.mark.parametrize("mode,states", [("lstm", 2), ("gru", 1), ("rnn_tanh", 1), ("rnn_relu", 1)])
@pytest.mark.parametrize("bidirectional", [False, True])
def test_recurrent_functions_over_flat_weights(mode, states, bidirectional):
    gates = {"lstm": 4, "gru": 3}.get(mode, 1)
    layers, dirs, hidden, feat = 2, 1 + bidirectional, 3, 4
    rng = np.random.default_rng(0)
    params = []
    for layer in range(layers):
        for _ in range(dirs):
            inp = feat if layer == 0 else hidden * dirs
            params += [rng.standard_normal((gates * hidden, inp)), rng.standard_normal((gates * hidden, hidden)),
                       rng.standard_normal(gates * hidden), rng.standard_normal(gates * hidden)]
    x = rng.standard_normal((5, 2, feat))
    hx = [rng.standard_normal((layers * dirs, 2, hidden)) for _ in range(states)]

    def run(m):
        h = tuple(m.tensor(h) for h in hx) if states == 2 else m.tensor(hx[0])
        return getattr(m, mode)(m.tensor(x), h, [m.tensor(p) for p in params], True, layers, 0.0, False,
                                bidirectional, False)
    got, want = run(ember), run(torch)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g.numpy(), w.numpy(), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("name,gates", [("lstm_cell", 4), ("gru_cell", 3), ("rnn_tanh_cell", 1),
                                        ("rnn_relu_cell", 1)])
def test_recurrent_cells(name, gates):
    x, h = arr("float64", (2, 4)), arr("float64", (2, 3), seed=1)
    wi, wh = arr("float64", (gates * 3, 4), seed=2), arr("float64", (gates * 3, 3), seed=3)
    bi, bh = arr("float64", (gates * 3,), seed=4), arr("float64", (gates * 3,), seed=5)
    if name == "lstm_cell":
        check(lambda m, x, h, wi, wh, bi, bh: m.lstm_cell(x, (h, h * 0.5), wi, wh, bi, bh), x, h, wi, wh, bi, bh)
    else:
        check(lambda m, x, h, wi, wh, bi, bh: getattr(m, name)(x, h, wi, wh, bi, bh), x, h, wi, wh, bi, bh)


def test_poisson_and_binomial_draw_their_distributions():
    g = ember.Generator().manual_seed(7)
    for rate in (0.5, 3.0, 25.0, 400.0):
        s = ember.poisson(ember.full((40000,), rate, dtype=ember.float64), generator=g).numpy()
        assert np.all(s == np.round(s)) and np.all(s >= 0)
        assert abs(s.mean() - rate) < 5 * math.sqrt(rate / s.size)
        assert abs(s.var() / rate - 1) < 0.05
    assert ember.poisson(ember.zeros(3)).sum().item() == 0
    n, p = ember.full((40000,), 30.0), ember.full((40000,), 0.2)
    s = ember.binomial(n, p, generator=g).numpy()
    assert abs(s.mean() - 6.0) < 0.05 and abs(s.var() - 4.8) < 0.25 and s.max() <= 30
    g1, g2 = ember.Generator().manual_seed(1), ember.Generator().manual_seed(1)
    rates = ember.tensor([1.0, 12.0, 100.0])
    assert ember.equal(ember.poisson(rates, generator=g1), ember.poisson(rates, generator=g2))


def test_switches_round_trip_like_torch():
    for m in (ember, torch):
        m.use_deterministic_algorithms(True, warn_only=True)
        assert m.are_deterministic_algorithms_enabled() and m.is_deterministic_algorithms_warn_only_enabled()
        assert m.get_deterministic_debug_mode() == 1
        m.use_deterministic_algorithms(False)
        assert m.get_deterministic_debug_mode() == 0
        m.set_deterministic_debug_mode("error")
        assert m.are_deterministic_algorithms_enabled()
        m.set_deterministic_debug_mode(0)
        m.set_float32_matmul_precision("medium")
        assert m.get_float32_matmul_precision() == "medium"
        m.set_float32_matmul_precision("highest")
        m.set_warn_always(True)
        assert m.is_warn_always_enabled()
        m.set_warn_always(False)
        assert not m.is_inference_mode_enabled()
        with m.inference_mode():
            with m.inference_mode():
                assert m.is_inference_mode_enabled()
            assert m.is_inference_mode_enabled()
        assert not m.is_inference_mode_enabled()


def test_default_tensor_type_sets_the_default_dtype():
    try:
        ember.set_default_tensor_type("torch.DoubleTensor")
        assert ember.ones(1).dtype == ember.float64
        ember.set_default_tensor_type(ember.FloatTensor)
        assert ember.ones(1).dtype == ember.float32
        with pytest.raises(TypeError, match="set_default_tensor_type"):
            ember.set_default_tensor_type("torch.LongTensor")
    finally:
        ember.set_default_dtype(ember.float32)


@pytest.mark.parametrize("options", [dict(precision=2), dict(precision=6, sci_mode=True), dict(threshold=5),
                                     dict(threshold=5, edgeitems=1), dict(linewidth=30), dict(profile="full"),
                                     dict(profile="short")])
def test_printoptions_print_like_torch(options):
    values = np.linspace(-3.14159, 1234.5678, 24).reshape(4, 6)
    e, t = both(values.astype(np.float32))
    try:
        ember.set_printoptions(**options)
        torch.set_printoptions(**options)
        assert str(e).replace("ember.", "torch.") == str(t)
        assert str(e[0, :3]) == str(t[0, :3])
    finally:
        ember.set_printoptions(profile="default", sci_mode=None)
        torch.set_printoptions(profile="default", sci_mode=None)


# ---------------------------------------------------------------- in-place views and Tensor odds

@pytest.mark.parametrize("step", [lambda x: x.squeeze_(), lambda x: x.squeeze_(1), lambda x: x.unsqueeze_(0),
                                  lambda x: x.unsqueeze_(-1), lambda x: x.transpose_(0, 2),
                                  lambda x: x.swapaxes_(0, 1), lambda x: x.swapdims_(1, 2),
                                  lambda x: x[0, 0].t_(), lambda x: x.as_strided_((2, 2), (1, 3), 1)])
def test_in_place_views_change_the_tensor_itself(step):
    def fn(m, x):
        y = x.clone()
        before = y.data_ptr()
        out = step(y)
        assert out is y or out.shape == y[0, 0].shape
        assert y.data_ptr() == before or out is not y
        return out, out.contiguous()
    check(fn, arr("float32", (3, 1, 4)))


def test_set_shares_storage_and_is_set_to():
    for m in (ember, torch):
        a, b = m.arange(6.0), m.zeros(2)
        b.set_(a)
        assert b.is_set_to(a) and tuple(b.shape) == (6,)
        b.add_(1)
        assert a[0].item() == 1
        c = m.zeros(1)
        c.set_(a, 1, (2, 2), (2, 1))
        assert c.tolist() == [[2.0, 3.0], [4.0, 5.0]]
        assert not c.is_set_to(a)
        d = m.ones(3)
        d.set_()
        assert d.numel() == 0


def test_new_and_map():
    for m in (ember, torch):
        x = m.ones(2, 3, dtype=m.float64)
        assert x.new(2).dtype == m.float64 and tuple(x.new(2, 4).shape) == (2, 4)
        assert x.new([1, 2]).tolist() == [1.0, 2.0]
        y = m.arange(3.0)
        y.apply_(lambda v: v * 10)
        assert y.tolist() == [0.0, 10.0, 20.0]
        y.map_(m.ones(3), lambda a, b: a + b)
        assert y.tolist() == [1.0, 11.0, 21.0]
        y.map2_(m.ones(3), m.full((3,), 2.0), lambda a, b, c: a * c - b)
        assert y.tolist() == [1.0, 21.0, 41.0]


def test_tensor_odds_like_torch():
    check(lambda m, x: x.real, arr("float32", (2, 3)))
    check(lambda m, x, w: x.prelu(w), arr("float32", (2, 3, 4)), arr("float32", (3,), seed=1))
    check(lambda m, x: x.hardshrink(0.3), arr("float32", (2, 3), kind="unit"))
    check(lambda m, x, i: x.take_along_dim(i, 1), arr("float32", (3, 4)), Arg([[0], [3], [1]], "int64"))
    check(lambda m, x: x.adjoint(), arr("float32", (2, 3)))
    check(lambda m, x: x.to_dense(), arr("float32", (2, 3)))
    for m in (ember, torch):
        x = m.ones(2, requires_grad=True)
        a, b = x.split(1)
        assert (a.output_nr, b.output_nr, x.output_nr) == (0, 1, 0)
        assert m.ones(1).names == (None,) and not m.ones(1).has_names()
        assert m.ones(1).layout is m.strided and repr(m.strided) == f"{m.__name__}.strided"
        with pytest.raises(RuntimeError):
            m.ones(1).imag


# ---------------------------------------------------------------- windows, switches, buffers, futures

@pytest.mark.parametrize("name", ["hann_window", "hamming_window", "blackman_window", "bartlett_window",
                                  "kaiser_window"])
@pytest.mark.parametrize("length", [0, 1, 2, 7, 64])
@pytest.mark.parametrize("periodic", [True, False])
def test_windows_like_torch(name, length, periodic):
    check(lambda m: getattr(m, name)(length, periodic), atol=2e-7)
    check(lambda m: getattr(m, name)(length, periodic, dtype=m.float64))
    raises_like_torch(lambda m: getattr(m, name)(4, dtype=m.int64))
    raises_like_torch(lambda m: getattr(m, name)(-1))


def test_window_parameters():
    check(lambda m: m.hamming_window(9, False, 0.5, 0.5, dtype=m.float64))
    check(lambda m: m.kaiser_window(9, True, 5.0, dtype=m.float64))
    assert ember.hann_window(4, requires_grad=True).requires_grad


def test_autocast_switches_drive_cpu_autocast():
    assert not ember.is_autocast_cpu_enabled()
    ember.set_autocast_cpu_enabled(True)
    try:
        assert ember.is_autocast_cpu_enabled() and ember.get_autocast_cpu_dtype() == ember.bfloat16
        assert (ember.ones(2, 2) @ ember.ones(2, 2)).dtype == ember.bfloat16
    finally:
        ember.set_autocast_cpu_enabled(False)
    assert (ember.ones(2, 2) @ ember.ones(2, 2)).dtype == ember.float32
    for m in (ember, torch):
        with pytest.raises(RuntimeError, match="Bfloat16"):
            m.set_autocast_cpu_dtype(m.float16)
        assert m.autocast_increment_nesting() == 1 and m.autocast_decrement_nesting() == 0
        m.set_autocast_cache_enabled(False)
        assert not m.is_autocast_cache_enabled()
        m.set_autocast_cache_enabled(True)
        assert m.get_autocast_gpu_dtype() == m.float16
    with pytest.warns(UserWarning, match="CUDA"):
        ember.set_autocast_enabled(True)
    assert not ember.is_autocast_enabled()


def test_anomaly_switches_and_check_nan():
    class NanGrad(ember.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return g * float("nan")

    x = ember.ones(2, requires_grad=True)
    ember.set_anomaly_enabled(True, check_nan=False)
    try:
        assert ember.is_anomaly_enabled() and not ember.is_anomaly_check_nan_enabled()
        NanGrad.apply(x).sum().backward()  # stacks recorded, NaN not checked
        assert np.isnan(x.grad.numpy()).all()
        ember.set_anomaly_enabled(True)
        assert ember.is_anomaly_check_nan_enabled()
        with pytest.raises(RuntimeError, match="nan"):
            NanGrad.apply(x).sum().backward()
    finally:
        ember.set_anomaly_enabled(False)
    assert not ember.is_anomaly_enabled() and ember.is_anomaly_check_nan_enabled()
    with ember.autograd.detect_anomaly(check_nan=False):
        assert ember.is_anomaly_enabled() and not ember.is_anomaly_check_nan_enabled()
    assert not ember.is_anomaly_enabled() and ember.is_anomaly_check_nan_enabled()


def test_frombuffer_shares_memory():
    import array
    a = array.array("f", [1, 2, 3, 4])
    for m in (ember, torch):
        t = m.frombuffer(a, dtype=m.float32, count=2, offset=4)
        assert t.tolist() == [2.0, 3.0]
    t = ember.frombuffer(a, dtype=ember.float32)
    t[0] = 9
    assert a[0] == 9
    b = bytearray(b"\x01\x00\x02\x00\x03")
    check(lambda m: m.frombuffer(bytearray(b), dtype=m.int16, count=2))
    for m in (ember, torch):
        with pytest.raises(ValueError):
            m.frombuffer(bytearray(5), dtype=m.int16)
        with pytest.warns(UserWarning, match="not writable"):
            assert m.frombuffer(b"\x01\x02", dtype=m.uint8).tolist() == [1, 2]


def test_from_file_reads_or_maps(tmp_path):
    path = str(tmp_path / "values.bin")
    np.arange(6, dtype=np.float32).tofile(path)
    check(lambda m: m.from_file(path, size=4))
    check(lambda m: m.from_file(path, False, 3, dtype=m.float64) if m is ember else m.from_file(path, False, 3,
                                                                                               dtype=m.float64))
    mapped = ember.from_file(path, True, 6)
    mapped[1] = 100
    del mapped
    assert np.fromfile(path, dtype=np.float32)[1] == 100
    with pytest.raises(RuntimeError, match="fewer"):
        ember.from_file(path, size=7)


def test_embedding_renorm_and_bag_like_torch():
    w = arr("float64", (6, 3))
    i = Arg([0, 2, 2, 5, 1], "int64")
    check(lambda m, w, i: m.embedding_renorm_(w, i, 1.0, 2.0), w, i)
    o = Arg([0, 2, 2], "int64")
    for mode in (0, 1):
        check(lambda m, w, i, o: m.embedding_bag(w, i, o, False, mode), w, i, o)
        check(lambda m, w, i, o: m.embedding_bag(w, i, o, False, mode, False, None, False, 2), w, i, o)
    check(lambda m, w, i, o: m.embedding_bag(w, i, o, False, 2), w, i, o)


def test_small_spellings():
    x = ember.arange(6.0)
    assert ember.as_strided_(x, (2, 2), (1, 2), 1) is x and x.tolist() == [[1.0, 3.0], [2.0, 4.0]]
    assert ember.conj_physical_(x) is x and not ember.is_distributed(x)
    assert ember.legacy_contiguous_format is ember.contiguous_format
    np.testing.assert_array_equal(ember.from_dlpack(ember.to_dlpack(ember.arange(3))).numpy(), [0, 1, 2])


def test_fork_wait_and_futures():
    fut = ember.fork(lambda a, b: a + b, ember.ones(2), 2)
    assert fut.done() and ember.wait(fut).tolist() == [3.0, 3.0]
    bad = ember.jit.fork(lambda: 1 / 0)
    with pytest.raises(ZeroDivisionError):
        ember.jit.wait(bad)
    f = ember.futures.Future()
    chained = f.then(lambda done: done.value() * 2)
    seen = []
    f.add_done_callback(lambda done: seen.append(done.value()))
    assert not f.done() and not chained.done()
    f.set_result(21)
    assert chained.wait() == 42 and seen == [21]
    with pytest.raises(RuntimeError, match="already"):
        f.set_result(1)
    assert ember.futures.collect_all([f, chained]).wait() == [f, chained]
    assert ember.futures.wait_all([f, chained]) == [21, 42]
    e = ember.futures.Future()
    failed = e.then(lambda done: done.value())
    e.set_exception(ValueError("boom"))
    with pytest.raises(ValueError, match="boom"):
        failed.wait()
