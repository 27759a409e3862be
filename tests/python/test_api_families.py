"""The rest of PyTorch 1.13's public names (issue 40, item 3) against
PyTorch: the nn modules and functions (AdaptiveLogSoftmaxWithLoss,
CrossMapLRN2d, SyncBatchNorm, DataParallel, multi_head_attention_forward,
...), the optimizers and lr schedulers are in test_optim_more.py, DataPipes,
storages, fake quantization, lobpcg, Tensor.as_subclass and the
__torch_function__ helpers."""

import warnings

import numpy as np
import pytest

import ember
from torchdiff import Arg, arr, check
from conftest import forks_workers  # noqa: E402

torch = pytest.importorskip("torch")


def copy_weights(dst, src):
    dst.load_state_dict({k: ember.tensor(v.detach().numpy()) for k, v in src.state_dict().items()})


# ---------------------------------------------------------------- nn

def test_adaptive_log_softmax_matches_torch():
    tm = torch.nn.AdaptiveLogSoftmaxWithLoss(16, 20, [4, 10, 15], div_value=2.0, head_bias=True).double()
    em = ember.nn.AdaptiveLogSoftmaxWithLoss(16, 20, [4, 10, 15], div_value=2.0, head_bias=True,
                                             dtype=ember.float64)
    copy_weights(em, tm)
    x = np.random.default_rng(0).standard_normal((9, 16))
    t = np.array([0, 3, 4, 9, 10, 14, 15, 19, 2])
    got, want = em(ember.tensor(x), ember.tensor(t)), tm(torch.tensor(x), torch.tensor(t))
    np.testing.assert_allclose(got.output.detach().numpy(), want.output.detach().numpy(), rtol=1e-12)
    np.testing.assert_allclose(got.loss.item(), want.loss.item(), rtol=1e-12)
    got.loss.backward()
    want.loss.backward()
    for (name, p), (_, q) in zip(em.named_parameters(), tm.named_parameters()):
        np.testing.assert_allclose(p.grad.numpy(), q.grad.numpy(), rtol=1e-10, atol=1e-14, err_msg=name)
    np.testing.assert_allclose(em.log_prob(ember.tensor(x)).detach().numpy(),
                               tm.log_prob(torch.tensor(x)).detach().numpy(), rtol=1e-12)
    assert em.predict(ember.tensor(x)).tolist() == tm.predict(torch.tensor(x)).tolist()
    one = em(ember.tensor(x[0]), ember.tensor(t[0]))
    assert tuple(one.output.shape) == ()
    for m, bad in ((ember, 20), (torch, 20)):
        mod = em if m is ember else tm
        with pytest.raises(RuntimeError, match="Target values should be in"):
            mod(m.tensor(x[:1]), m.tensor([bad]))
    for m in (ember, torch):
        with pytest.raises(ValueError, match="cutoffs"):
            m.nn.AdaptiveLogSoftmaxWithLoss(8, 10, [5, 3])


@pytest.mark.parametrize("size", [1, 2, 3, 4, 5, 9])
def test_cross_map_lrn_matches_torch_quirk_included(size):
    check(lambda m, x: m.nn.CrossMapLRN2d(size, 1e-2, 0.75, 1.5)(x), arr("float64", (2, 7, 3, 3)))
    x = ember.randn(1, 4, 2, 2, dtype=ember.float64, requires_grad=True)
    assert ember.autograd.gradcheck(lambda x: ember.nn.CrossMapLRN2d(size, 0.1, 0.75, 1.0)(x), (x,))


def test_deprecated_modules_warn_and_work():
    with pytest.warns(UserWarning, match="NLLLoss2d has been deprecated"):
        loss = ember.nn.NLLLoss2d()
    check(lambda m, x: (m.nn.NLLLoss(), x)[0](x.log_softmax(1), m.zeros(2, 3, 3, dtype=m.int64)),
          arr("float64", (2, 4, 3, 3)))
    assert isinstance(loss, ember.nn.NLLLoss)
    with pytest.warns(UserWarning, match="nn.Container is deprecated"):
        c = ember.nn.Container(fc=ember.nn.Linear(2, 3))
    assert list(dict(c.named_parameters())) == ["fc.weight", "fc.bias"]


def test_data_parallel_is_the_module_with_torch_state_dict_keys():
    tm = torch.nn.DataParallel(torch.nn.Linear(3, 2).double())
    em = ember.nn.DataParallel(ember.nn.Linear(3, 2, dtype=ember.float64))
    assert list(em.state_dict()) == list(tm.state_dict()) == ["module.weight", "module.bias"]
    copy_weights(em, tm)
    x = np.ones((4, 3))
    np.testing.assert_allclose(em(ember.tensor(x)).detach().numpy(), tm(torch.tensor(x)).detach().numpy())
    assert em.device_ids == [] and ember.nn.parallel.data_parallel(em.module, ember.tensor(x)).shape[0] == 4


def test_rnn_cells_share_rnn_cell_base():
    for m in (ember, torch):
        for cls, chunks in (("RNNCell", 1), ("LSTMCell", 4), ("GRUCell", 3)):
            cell = getattr(m.nn, cls)(3, 5)
            assert isinstance(cell, m.nn.RNNCellBase) and cell.weight_ih.shape[0] == chunks * 5
    base = ember.nn.RNNCellBase(3, 4, True, 2)
    assert tuple(base.weight_hh.shape) == (8, 4) and float(base.weight_ih.abs().max()) <= 0.5


def test_sync_batch_norm_alone_is_batch_norm():
    x = ember.randn(6, 3, 4, dtype=ember.float64)
    bn = ember.nn.BatchNorm1d(3, dtype=ember.float64)
    net = ember.nn.Sequential(bn, ember.nn.ReLU())
    synced = ember.nn.SyncBatchNorm.convert_sync_batchnorm(net)
    sbn = synced[0]
    assert isinstance(sbn, ember.nn.SyncBatchNorm) and sbn.weight is bn.weight
    assert sbn.running_mean is bn.running_mean
    ref = ember.nn.BatchNorm1d(3, dtype=ember.float64)
    np.testing.assert_allclose(synced(x).detach().numpy(), ember.nn.functional.relu(ref(x)).detach().numpy())
    np.testing.assert_allclose(bn.running_var.numpy(), ref.running_var.numpy())
    assert int(sbn.num_batches_tracked) == 1
    with pytest.raises(ValueError, match="at least 2D"):
        ember.nn.SyncBatchNorm(3)(ember.ones(3))


def test_uninitialized_parameters_materialize():
    for m in (ember, torch):
        p = m.nn.UninitializedParameter()
        assert isinstance(p, m.nn.parameter.UninitializedParameter) and m.nn.parameter.is_lazy(p)
        p.materialize((2, 3))
        assert type(p) is m.nn.Parameter and tuple(p.shape) == (2, 3) and p.requires_grad
        b = m.nn.UninitializedBuffer()
        b.materialize(4)
        assert type(b) is m.Tensor and tuple(b.shape) == (4,)


def test_factory_kwargs_like_torch():
    for m in (ember, torch):
        assert m.nn.factory_kwargs(None) == {}
        assert m.nn.factory_kwargs({"dtype": m.float64, "factory_kwargs": {"device": "cpu"}}) == \
            {"dtype": m.float64, "device": "cpu"}
        with pytest.raises(TypeError, match="unexpected kwargs"):
            m.nn.factory_kwargs({"foo": 1})
        with pytest.raises(TypeError, match="specified twice"):
            m.nn.factory_kwargs({"dtype": m.float64, "factory_kwargs": {"dtype": m.float32}})


# ---------------------------------------------------------------- nn.functional

@pytest.mark.parametrize("case", ["self", "cross", "separate", "bias_kv", "zero_attn", "static", "unbatched"])
def test_multi_head_attention_forward_matches_torch(case):
    E, H, L, S, N = 8, 2, 3, 5, 2
    rng = np.random.default_rng(1)
    w = {k: rng.standard_normal(s) * 0.3 for k, s in dict(
        in_w=(3 * E, E), in_b=(3 * E,), out_w=(E, E), out_b=(E,), q_w=(E, E), k_w=(E, 6), v_w=(E, 7),
        bias_k=(1, 1, E), bias_v=(1, 1, E), static_k=(N * H, S, E // H), static_v=(N * H, S, E // H)).items()}
    q = rng.standard_normal((L, N, E))
    kv = rng.standard_normal((S, N, E))
    mask = rng.random((L, S)) < 0.2

    def run(m):
        t = {k: m.tensor(v) for k, v in w.items()}
        query = m.tensor(q)
        key = value = query if case == "self" else m.tensor(kv)
        kwargs = dict(attn_mask=m.tensor(mask) if case == "cross" else None)
        bias_k = bias_v = None
        if case == "separate":
            key, value = m.tensor(rng_kv[0]), m.tensor(rng_kv[1])
            kwargs.update(use_separate_proj_weight=True, q_proj_weight=t["q_w"], k_proj_weight=t["k_w"],
                          v_proj_weight=t["v_w"])
        if case == "bias_kv":
            bias_k, bias_v = t["bias_k"], t["bias_v"]
        if case == "static":
            kwargs.update(static_k=t["static_k"], static_v=t["static_v"])
        if case == "unbatched":
            query, key, value = query[:, 0], key[:, 0], value[:, 0]
        out, weights = m.nn.functional.multi_head_attention_forward(
            query, key, value, E, H, t["in_w"], t["in_b"], bias_k, bias_v, case == "zero_attn", 0.0, t["out_w"],
            t["out_b"], training=False, need_weights=True, average_attn_weights=case != "cross", **kwargs)
        return out.detach().numpy(), weights.detach().numpy()
    rng_kv = (np.random.default_rng(2).standard_normal((S, N, 6)), np.random.default_rng(3).standard_normal((S, N, 7)))
    for a, b in zip(run(ember), run(torch)):
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)


def test_functional_helpers():
    F = ember.nn.functional
    assert F.GRID_SAMPLE_INTERPOLATION_MODES == torch.nn.functional.GRID_SAMPLE_INTERPOLATION_MODES
    assert F.GRID_SAMPLE_PADDING_MODES == torch.nn.functional.GRID_SAMPLE_PADDING_MODES
    assert F.DType is type(ember.float32) and F.Tensor is ember.Tensor and ember.linalg.Tensor is ember.Tensor
    F.assert_int_or_pair(3, "k", "{} bad")
    with pytest.raises(AssertionError, match="k bad"):
        F.assert_int_or_pair((1, 2, 3), "k", "{} bad")
    pick = F.boolean_dispatch("flag", 1, False, lambda x, flag=False: ("yes", x), lambda x, flag=False: ("no", x),
                              None, "pick")
    assert pick(1) == ("no", 1) and pick(1, True) == ("yes", 1) and pick(1, flag=True)[0] == "yes"
    assert pick.__name__ == "pick"
    x = ember.randn(1, 2, 8, 8)
    samples = ember.rand(1, 2, 2)
    out, idx = F.fractional_max_pool2d_with_indices(x, 2, output_size=4, _random_samples=samples)
    np.testing.assert_array_equal(out.numpy(), F.fractional_max_pool2d(x, 2, output_size=4,
                                                                       _random_samples=samples).numpy())
    assert idx.dtype == ember.int64
    check(lambda m, x, w, b: m.nn.functional.conv_tbc(x, w, b, 1), arr("float64", (7, 2, 3)),
          arr("float64", (3, 3, 4), seed=1), arr("float64", (4,), seed=2))


class Logged(ember.Tensor):
    calls = []

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        cls.calls.append(func.__name__)
        return "handled"


def test_torch_function_helpers_follow_the_protocol():
    plain = ember.ones(1)
    logged = ember.ones(1).as_subclass(Logged)
    for module in (ember.nn.functional, ember.overrides, ember.autograd):
        assert not module.has_torch_function((plain, 1))
        assert module.has_torch_function((plain, logged))
    assert ember.overrides.has_torch_function_unary(logged) and ember.overrides.has_torch_function_variadic(1, logged)

    def api(x):
        return "plain"
    assert ember.overrides.handle_torch_function(api, (logged,), logged) == "handled" and Logged.calls == ["api"]

    class Refuses(ember.Tensor):
        @classmethod
        def __torch_function__(cls, func, types, args=(), kwargs=None):
            return NotImplemented
    with pytest.raises(TypeError, match="no implementation found"):
        ember.overrides.handle_torch_function(api, (ember.ones(1).as_subclass(Refuses),), 1)
    assert ember.autograd.is_tensor_like(plain) and not ember.autograd.is_tensor_like(3)
    with ember.DisableTorchFunction():
        pass


def test_as_subclass_stays_in_the_graph():
    for m in (ember, torch):
        class Mine(m.Tensor):
            pass
        x = m.ones(3, requires_grad=True)
        y = x.as_subclass(Mine)
        assert type(y) is Mine and y.requires_grad
        (y * 2).sum().backward()
        assert x.grad.tolist() == [2.0, 2.0, 2.0]
        z = m.zeros(2)
        z.as_subclass(Mine).add_(1)
        assert z.tolist() == [1.0, 1.0]


def test_removed_tensor_methods_raise_as_torch():
    for m in (ember, torch):
        x = m.ones(2, 2)
        for name in ("solve", "lstsq", "eig"):
            with pytest.raises(RuntimeError, match="deprecated since version 1.9"):
                getattr(x, name)(x)
        with pytest.raises(RuntimeError, match="reinforce\\(\\) was removed"):
            x.reinforce(1)
        assert x.name is None
    with pytest.raises(RuntimeError, match="deprecated"):
        ember.autograd.variable(1)
    with pytest.raises(RuntimeError, match="Legacy autograd function"):
        ember.autograd.NestedIOFunction()(ember.ones(1))
    assert int(ember.autograd.DeviceType.CUDA) == int(torch.autograd.DeviceType.CUDA)
    assert int(ember.autograd.ProfilerState.KINETO) == int(torch.autograd.ProfilerState.KINETO)
    assert not ember.autograd.kineto_available() and not ember.cudnn_is_acceptable(ember.ones(1))


# ---------------------------------------------------------------- DataPipes

@forks_workers
def test_datapipes_like_torch():
    def pipes(m):
        D = m.utils.data.datapipes.iter
        base = D.IterableWrapper(range(10))
        return [list(base.map(lambda x: x * 2).filter(lambda x: x % 3 != 0).batch(3)),
                list(D.IterableWrapper([[1, 2], [3]]).unbatch()),
                list(D.IterableWrapper(range(3)).zip(D.IterableWrapper("abc"))),
                list(D.IterableWrapper(range(2)).concat(D.IterableWrapper(range(3)))),
                sorted(D.IterableWrapper(range(7)).shuffle()),
                [list(map(int, b)) for b in D.IterableWrapper([[1, 2], [3, 4]]).collate()],
                list(D.IterableWrapper(range(5)).batch(2, drop_last=True))]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert pipes(ember) == pipes(torch)
    with pytest.raises(ValueError, match="Boolean output"):
        list(ember.utils.data.datapipes.iter.IterableWrapper([1]).filter(lambda x: x))

    @ember.utils.data.functional_datapipe("plus_one")
    class PlusOne(ember.utils.data.IterDataPipe):
        def __init__(self, source):
            self.source = source

        def __iter__(self):
            return (x + 1 for x in self.source)
    assert list(ember.utils.data.datapipes.iter.IterableWrapper([1, 2]).plus_one()) == [2, 3]
    sharded = ember.utils.data.datapipes.iter.IterableWrapper(range(8)).sharding_filter()
    got = [b.tolist() for b in ember.utils.data.DataLoader(sharded, batch_size=2, num_workers=2)]
    assert sorted(sum(got, [])) == list(range(8))
    assert ember.utils.data.datapipes.map.SequenceWrapper([1, 2, 3]).map(lambda x: x * 10)[2] == 30
    chunk = ember.utils.data.DataChunk([1, 2])
    assert chunk.as_str() == "[1, 2]" and list(chunk.raw_iterator()) == [1, 2]


# ---------------------------------------------------------------- storages

def test_storages_like_torch():
    for m in (ember, torch):
        base = m.arange(6.0)
        x = base.reshape(2, 3)[1]
        s = x.storage()
        assert type(s).__name__ in ("FloatStorage", "TypedStorage") and s.size() == len(s) == 6
        assert s[4] == 4.0 and s.tolist() == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]
        assert s.data_ptr() == x.data_ptr() - 3 * 4 and s.element_size() == 4 and s.nbytes() == 24
        s[0] = 100
        assert base[0].item() == 100
        assert x.storage_type() is m.FloatStorage
        fs = m.FloatStorage([1, 2, 3])
        t = m.tensor([]).set_(fs)
        assert t.tolist() == [1.0, 2.0, 3.0]
        t.add_(1)
        assert fs.tolist() == [2.0, 3.0, 4.0]
        v = m.tensor([]).set_(fs, 1, (2,), (1,))
        assert v.tolist() == [3.0, 4.0]
        assert len(m.LongStorage(3)) == 3 and m.DoubleStorage(2).element_size() == 8  # (torch: uninitialised)
        with pytest.raises(RuntimeError, match="slices are only supported in UntypedStorage"):
            fs[1:]
        assert fs.clone().fill_(7).tolist() == [7.0] * 3
        assert fs.dtype == m.float32 and not fs.is_shared()
    u = ember.arange(3, dtype=ember.int32).untyped_storage()
    assert len(u) == 12 and u.nbytes() == 12 and u.dtype == ember.uint8 and u[4:8].tolist() == [1, 0, 0, 0]
    assert ember.TypedStorage(wrap_storage=u, dtype=ember.int32).tolist() == [0, 1, 2]
    with pytest.raises(RuntimeError, match="storage of ember.float32"):
        ember.zeros(1).set_(ember.LongStorage(2))
    with pytest.raises(NotImplementedError, match="resized"):
        ember.FloatStorage(2).resize_(3)


# ---------------------------------------------------------------- fake quantization, lobpcg

@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_fake_quantize_like_torch(dtype):
    x = Arg(np.array([0.05, 0.15, 0.25, -0.05, 30.0, -20.0, 1.234, 0.0]), dtype)

    def per_tensor(m, x):
        x = x.clone().requires_grad_()
        y = m.fake_quantize_per_tensor_affine(x, 0.1, 3, -128, 127)
        (y * m.arange(8.0, dtype=y.dtype)).sum().backward()
        return y.detach(), x.grad
    check(per_tensor, x)
    check(lambda m, x: m.fake_quantize_per_tensor_affine(x, m.tensor(0.07), m.tensor(2), 0, 255), x)

    def per_channel(m, x):
        x = x.clone().requires_grad_()
        y = m.fake_quantize_per_channel_affine(x, m.tensor([0.1, 0.05, 0.2]), m.tensor([0, 1, -2], dtype=m.int32),
                                               1, -8, 7)
        y.sum().backward()
        return y.detach(), x.grad
    check(per_channel, arr(dtype, (2, 3, 4)))


@pytest.mark.parametrize("largest", [True, False])
def test_lobpcg_finds_the_extreme_eigenpairs(largest):
    rng = np.random.default_rng(0)
    a = rng.standard_normal((40, 40))
    a = a @ a.T
    want = np.linalg.eigvalsh(a)
    want = want[::-1][:3] if largest else want[:3]
    ember.manual_seed(0)
    E, X = ember.lobpcg(ember.tensor(a), k=3, largest=largest)
    np.testing.assert_allclose(E.numpy(), want, rtol=1e-6)
    resid = a @ X.numpy() - X.numpy() * E.numpy()
    assert np.abs(resid).max() < 1e-5 * np.abs(want).max()
    B = np.diag(rng.random(40) + 1)
    E, X = ember.lobpcg(ember.tensor(a), k=2, B=ember.tensor(B), largest=largest)
    ref = np.sort(np.linalg.eigvals(np.linalg.solve(B, a)).real)
    np.testing.assert_allclose(E.numpy(), ref[::-1][:2] if largest else ref[:2], rtol=1e-6)
    with pytest.raises(ValueError, match="LPBPCG algorithm is not applicable"):
        ember.lobpcg(ember.tensor(a[:10, :10]), k=4)
