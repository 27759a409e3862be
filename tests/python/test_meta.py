"""The meta device (issue 41, item 1; issue 42 builds on it): tensors with a
shape, a dtype and strides but no data, as PyTorch's meta device.

Every op's inference is device-free, so an op on meta tensors infers its
results and computes nothing (test_op_harness.test_meta_against_eager runs
every op of the table so, against the eager CPU results' shapes, dtypes and
strides). These tests are the user's side: making meta tensors, moving
them and modules, building a model without allocating, training steps that
only check shapes, and every read of data refused by name.
"""

import pickle
import warnings

import numpy as np
import pytest

import ember
import ember.nn as nn
import ember.nn.functional as F


def meta(*shape, dtype=None):
    return ember.empty(*shape, dtype=dtype, device="meta")


# ---- devices and factories ----

def test_device_objects():
    d = ember.device("meta")
    assert (d.type, d.index, str(d), repr(d)) == ("meta", None, "meta", "device(type='meta')")
    assert ember.device("cpu:0").index == 0 and ember.device(d) == d
    assert ember.device("cuda", 1) == "cuda:1" and ember.device(2) == ember.device("cuda:2")
    assert pickle.loads(pickle.dumps(d)) == d
    with pytest.raises(RuntimeError, match="Expected one of cpu, cuda, meta"):
        ember.device("tpu")
    with pytest.raises(RuntimeError, match="Invalid device string"):
        ember.device("cuda:x")


@pytest.mark.parametrize("make", [
    lambda **k: ember.zeros(2, 3, **k), lambda **k: ember.ones((2, 3), **k), lambda **k: ember.empty(2, 3, **k),
    lambda **k: ember.full((2, 3), 7.0, **k), lambda **k: ember.rand(2, 3, **k), lambda **k: ember.randn(2, 3, **k),
    lambda **k: ember.arange(6, **k).reshape(2, 3), lambda **k: ember.eye(2, 3, **k),
    lambda **k: ember.linspace(0, 1, 6, **k).reshape(2, 3), lambda **k: ember.randint(0, 9, (2, 3), **k),
    lambda **k: ember.randperm(6, **k).reshape(2, 3), lambda **k: ember.tensor([[1., 2, 3], [4, 5, 6]], **k),
], ids=["zeros", "ones", "empty", "full", "rand", "randn", "arange", "eye", "linspace", "randint", "randperm",
        "tensor"])
def test_factories_make_meta_tensors(make):
    cpu = make()
    for t in (make(device="meta"), make(device=ember.device("meta"))):
        assert t.is_meta and not t.is_cpu and t.device == ember.device("meta")
        assert (t.shape, t.dtype, t.stride()) == (cpu.shape, cpu.dtype, cpu.stride())
    with ember.device("meta"):
        t = make()
    assert t.is_meta
    assert make().is_cpu  # (the block is over)


def test_meta_factories_draw_no_random_numbers():
    ember.manual_seed(3)
    ember.randn(1000, device="meta")
    ember.rand(10, 10, device="meta").uniform_()
    a = ember.randn(4)
    ember.manual_seed(3)
    assert ember.equal(a, ember.randn(4))


def test_like_factories_and_new_methods_keep_the_device():
    x = meta(2, 3, dtype=ember.float64)
    for t in (ember.zeros_like(x), ember.ones_like(x), ember.empty_like(x), ember.rand_like(x), ember.randn_like(x),
              ember.full_like(x, 2.0), x.new_zeros(4), x.new_ones(1), x.new_empty(2), x.new_full((2,), 1.0),
              x.new_tensor([1.0])):
        assert t.is_meta and t.dtype == ember.float64
    assert ember.zeros_like(x, device="cpu").is_cpu


def test_default_device():
    assert ember.get_default_device() == ember.device("cpu")
    ember.set_default_device("meta")
    try:
        assert ember.get_default_device() == ember.device("meta")
        assert ember.zeros(2).is_meta and nn.Linear(2, 3).weight.is_meta
        with ember.device("cpu"):  # a block inside it takes precedence
            assert ember.zeros(2).is_cpu
        assert ember.zeros(2).is_meta
    finally:
        ember.set_default_device(None)
    assert ember.zeros(2).is_cpu and ember.get_default_device() == ember.device("cpu")


def test_device_blocks_are_per_thread():
    import threading
    seen = []
    with ember.device("meta"):
        t = threading.Thread(target=lambda: seen.append(ember.zeros(1).device.type))
        t.start()
        t.join()
    assert seen == ["cpu"]


# ---- ops ----

def test_ops_infer_and_compute_nothing():
    a, b = meta(4, 5), meta(5, 6)
    c = (a @ b).relu().softmax(-1)
    assert c.is_meta and c.shape == (4, 6)
    v = a.t()
    assert v.is_meta and v.stride() == (1, 5) and v.contiguous().stride() == (4, 1)
    assert a[1:, ::2].shape == (3, 3) and a.reshape(20).shape == (20,) and a.sum(0).shape == (5,)
    s, i = a.sort(-1)
    assert s.is_meta and i.dtype == ember.int64
    assert ember.cat([a, a], 0).shape == (8, 5) and a.data_ptr() == 0


def test_host_scalars_join_meta_operands():
    x = meta(2, 3)
    for r in (x + 2, 2 * x, x / ember.tensor(3.0), ember.where(x > 0, x, 0.0), x.pow(2)):
        assert r.is_meta and r.shape == (2, 3)
    with pytest.raises(RuntimeError, match="same device.*meta and cpu"):
        x + ember.ones(3)


def test_ops_whose_result_shape_depends_on_the_data_refuse():
    x = meta(5)
    for f in (ember.nonzero, lambda t: t[t > 0], ember.unique, lambda t: ember.masked_select(t, t > 0)):
        with pytest.raises(NotImplementedError, match="meta"):
            f(x)


def test_in_place_ops_check_and_write_nothing():
    x = meta(2, 3)
    assert x.add_(1) is x and x.mul_(ember.tensor(2.0)) is x
    x.copy_(ember.ones(2, 3))  # (copying into meta reads nothing)
    x.zero_().fill_(1.0).uniform_().normal_()
    x[0] = 5.0
    assert x.is_meta
    with pytest.raises(RuntimeError, match="broadcast"):
        x.add_(meta(4))


# ---- every read of data is refused by name ----

@pytest.mark.parametrize("read,match", [
    (lambda t: t.sum().item(), r"\.item\(\) cannot be called on meta tensors"),
    (lambda t: bool(t.sum()), r"bool\(tensor\) cannot be called on meta tensors"),
    (lambda t: float(t.sum()), "meta tensors"),
    (lambda t: t.tolist(), "meta tensor"),
    (lambda t: t.numpy(), "meta tensor to NumPy"),
    (lambda t: np.asarray(t), "meta tensor to NumPy"),
    (lambda t: t.cpu(), "Cannot copy out of meta tensor; no data!"),
    (lambda t: t.to("cpu"), "Cannot copy out of meta tensor; no data!"),
    (lambda t: ember.ones(2, 3).copy_(t), "Cannot copy out of meta tensor; no data!"),
    (lambda t: t.__dlpack__(), "meta"),
    (lambda t: memoryview(t), "meta"),
])
def test_reading_data_raises(read, match):
    with pytest.raises((NotImplementedError, BufferError, TypeError), match=match):
        read(meta(2, 3))


def test_printing_and_pickling():
    x = meta(2, 3, dtype=ember.float64)
    assert repr(x) == "tensor(..., device='meta', size=(2, 3), dtype=ember.float64)"
    assert "requires_grad=True" in repr(meta(1).requires_grad_())
    y = pickle.loads(pickle.dumps(x))
    assert y.is_meta and (y.shape, y.dtype) == (x.shape, x.dtype)


def test_saving_a_meta_tensor_refuses_before_touching_the_file(tmp_path):
    for name in ("w.safetensors", "w.pt"):
        path = tmp_path / name
        path.write_bytes(b"old")
        with pytest.raises(NotImplementedError, match="meta tensor"):
            ember.save({"w": meta(2)}, path)
        assert path.read_bytes() == b"old"


def test_loading_inside_a_meta_block_loads_data(tmp_path):
    ember.save({"w": ember.arange(4.0)}, tmp_path / "w.safetensors")
    ember.save({"w": ember.arange(4.0)}, tmp_path / "w.pt")
    with ember.device("meta"):
        for name in ("w.safetensors", "w.pt"):
            w = ember.load(tmp_path / name)["w"]
            assert w.is_cpu and w.tolist() == [0, 1, 2, 3]


# ---- moving ----

def test_to_meta_keeps_shape_dtype_and_dense_strides():
    a = ember.randn(3, 4, dtype=ember.float64)
    m = a.to("meta")
    assert m.is_meta and (m.shape, m.dtype, m.stride()) == (a.shape, a.dtype, a.stride())
    assert a.t().to("meta").stride() == (1, 4)
    assert a.to("meta", ember.float32).dtype == ember.float32
    assert a.to(meta(1)).is_meta and m.to("meta") is m
    assert a[:, ::2].to("meta").stride() == (2, 1)  # (not dense: row-major)


def test_moving_a_tensor_that_requires_grad_is_recorded():
    x = ember.randn(2, requires_grad=True)
    y = x.to("meta")  # (PyTorch's ToCopyBackward0: a gradient would go back to the CPU)
    assert y.is_meta and y.requires_grad and y.grad_fn.name() == "ToCopyBackward0"
    with pytest.raises(NotImplementedError, match="meta"):
        y.sum().backward()  # (there is no gradient on meta to copy back)
    with ember.no_grad():
        assert x.to("meta").is_meta
    assert x.detach().to("meta").is_meta


@pytest.mark.skipif(ember.cuda.is_available(), reason="this machine has a CUDA device for ember")
def test_cuda_stays_unavailable_by_name():
    with pytest.raises(NotImplementedError, match="cuda"):
        ember.zeros(2, device="cuda")
    with pytest.raises(NotImplementedError, match="cuda"):
        ember.zeros(2).to("cuda:0")


# ---- modules and training ----

def _cnn():
    return nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Flatten(), nn.Linear(8 * 4 * 4, 10))


def test_a_model_built_in_a_meta_block_allocates_nothing():
    with ember.device("meta"):
        model = nn.Sequential(nn.Embedding(100, 16), nn.TransformerEncoderLayer(16, 2, 32, batch_first=True),
                              nn.LayerNorm(16), nn.Linear(16, 100))
        rnn = nn.LSTM(16, 8, batch_first=True)
    assert all(p.is_meta for p in list(model.parameters()) + list(rnn.parameters()))
    tokens = ember.zeros(2, 7, dtype=ember.int64, device="meta")
    out = model(tokens)
    assert out.is_meta and out.shape == (2, 7, 100)
    assert rnn(model[0](tokens))[0].shape == (2, 7, 8)


def test_a_training_step_on_meta_checks_shapes_only():
    model = _cnn().to("meta")
    assert all(t.is_meta for t in list(model.parameters()) + list(model.buffers()))
    for opt in (ember.optim.SGD(model.parameters(), lr=0.1, momentum=0.9), ember.optim.Adam(model.parameters()),
                ember.optim.AdamW(model.parameters()), ember.optim.RMSprop(model.parameters())):
        opt.zero_grad()
        loss = F.cross_entropy(model(ember.randn(2, 3, 8, 8, device="meta")),
                               ember.zeros(2, dtype=ember.int64, device="meta"))
        loss.backward()
        opt.step()
        assert loss.is_meta and all(p.grad.is_meta and p.grad.shape == p.shape for p in model.parameters())
        assert all(s.is_meta for st in opt.state.values() for s in st.values()
                   if isinstance(s, ember.Tensor) and s.ndim)


def test_to_empty_then_load_state_dict_materialises():
    ember.manual_seed(0)
    ref = _cnn()
    with ember.device("meta"):
        model = _cnn()
    model.to_empty(device="cpu")
    assert all(t.is_cpu for t in list(model.parameters()) + list(model.buffers()))
    model.load_state_dict(ref.state_dict())
    x = ember.randn(2, 3, 8, 8)
    model.eval()
    ref.eval()
    assert ember.equal(model(x), ref(x))


def test_module_moves_keep_parameter_identity():
    model = nn.Linear(3, 4)
    w = model.weight
    opt = ember.optim.SGD(model.parameters(), lr=0.1)
    model.to("meta")
    assert model.weight is w and w.is_meta and opt.param_groups[0]["params"][0] is w
    with pytest.raises(NotImplementedError, match="Cannot copy out of meta tensor"):
        model.cpu()


# ---- the compiler ----

def test_compiled_calls_with_meta_tensors_run_eagerly_and_say_why():
    @ember.compile
    def f(x, y):
        return (x * y).sum(1).relu()

    a, b = ember.randn(4, 5), ember.randn(4, 5)
    want = f(a, b)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        r = f(a.to("meta"), b.to("meta"))
    assert r.is_meta and r.shape == (4,)
    assert any("a tensor on meta: compiled code runs on the CPU only" in str(w.message) for w in seen)
    assert ember.equal(f(a, b), want) and f._stats()["compiled_calls"] >= 1



def _tokens(*shape):
    return ember.zeros(*shape, dtype=ember.int64, device="meta")


MODULES = [
    ("conv1d", lambda: nn.Conv1d(3, 4, 3), lambda: (meta(2, 3, 10),)),
    ("conv2d", lambda: nn.Conv2d(3, 4, 3, stride=2, padding=1), lambda: (meta(2, 3, 9, 9),)),
    ("conv3d", lambda: nn.Conv3d(2, 3, 3), lambda: (meta(1, 2, 5, 5, 5),)),
    ("conv_transpose2d", lambda: nn.ConvTranspose2d(3, 4, 3, stride=2), lambda: (meta(2, 3, 5, 5),)),
    ("batch_norm1d", lambda: nn.BatchNorm1d(4), lambda: (meta(3, 4),)),
    ("group_norm", lambda: nn.GroupNorm(2, 4), lambda: (meta(2, 4, 3, 3),)),
    ("instance_norm", lambda: nn.InstanceNorm2d(3, affine=True), lambda: (meta(2, 3, 4, 4),)),
    ("attention", lambda: nn.MultiheadAttention(8, 2, batch_first=True), lambda: (meta(2, 5, 8),) * 3),
    ("transformer", lambda: nn.Transformer(8, 2, 1, 1, 16, batch_first=True), lambda: (meta(2, 5, 8), meta(2, 4, 8))),
    ("gru", lambda: nn.GRU(4, 5, bidirectional=True), lambda: (meta(3, 2, 4),)),
    ("rnn", lambda: nn.RNN(4, 5), lambda: (meta(3, 2, 4),)),
    ("bilinear", lambda: nn.Bilinear(3, 4, 5), lambda: (meta(2, 3), meta(2, 4))),
    ("upsample", lambda: nn.Upsample(scale_factor=2, mode="bilinear"), lambda: (meta(1, 2, 3, 3),)),
    ("adaptive_pool", lambda: nn.AdaptiveAvgPool2d(3), lambda: (meta(1, 2, 7, 7),)),
    ("pixel_shuffle", lambda: nn.PixelShuffle(2), lambda: (meta(1, 8, 3, 3),)),
    ("embedding_bag", lambda: nn.EmbeddingBag(10, 4), lambda: (_tokens(2, 3),)),
    ("embedding", lambda: nn.Embedding(10, 4, padding_idx=0), lambda: (_tokens(2, 3),)),
    ("prelu", lambda: nn.PReLU(), lambda: (meta(2, 3),)),
]


@pytest.mark.parametrize("make,inputs", [m[1:] for m in MODULES], ids=[m[0] for m in MODULES])
def test_modules_run_forward_and_backward_on_meta(make, inputs):
    """Each module built in a meta block gives results of its CPU twin's
    shapes, and gradients on meta."""
    with ember.device("meta"):
        m = make()
    assert all(p.is_meta for p in m.parameters())
    out = m(*inputs())
    out = out[0] if isinstance(out, tuple) else out
    cpu_inputs = [ember.zeros(*t.shape, dtype=t.dtype) for t in inputs()]
    want = make()(*cpu_inputs)
    want = want[0] if isinstance(want, tuple) else want
    assert out.is_meta and out.shape == want.shape and out.dtype == want.dtype
    if out.requires_grad:  # (modules with parameters)
        out.sum().backward()
        assert all(p.grad is None or (p.grad.is_meta and p.grad.shape == p.shape) for p in m.parameters())


@pytest.mark.parametrize("name", ["w.safetensors", "w.pt"])
def test_load_onto_meta_reads_no_data(tmp_path, name):
    w = ember.randn(3, 4, dtype=ember.float64)
    state = {"w": w, "wt": w.t(), "n": ember.tensor(7), "flags": ember.tensor([True, False])}
    ember.save(state, tmp_path / name)
    cpu = ember.load(tmp_path / name)
    got = ember.load(tmp_path / name, map_location="meta")
    assert set(got) == set(cpu)
    for k in cpu:
        assert got[k].is_meta and (got[k].shape, got[k].dtype) == (cpu[k].shape, cpu[k].dtype), k
        assert got[k].stride() == cpu[k].stride(), k
    if not ember.cuda.is_available():
        with pytest.raises(NotImplementedError, match="map_location"):
            ember.load(tmp_path / name, map_location="cuda")


def test_load_onto_meta_still_checks_the_file(tmp_path):
    path = tmp_path / "w.safetensors"
    ember.save({"w": ember.randn(64)}, path)
    path.write_bytes(path.read_bytes()[:-16])  # (its data cut short)
    with pytest.raises(ValueError, match="w.safetensors"):
        ember.load(path, map_location="meta")


def test_load_a_pytorch_checkpoint_onto_meta(tmp_path):
    torch = pytest.importorskip("torch")
    lin = torch.nn.Linear(5, 3)
    torch.save(lin.state_dict(), tmp_path / "lin.pt")
    sd = ember.load(tmp_path / "lin.pt", map_location="meta")
    assert {k: (tuple(v.shape), v.is_meta) for k, v in sd.items()} == {"weight": ((3, 5), True), "bias": ((3,), True)}
    with ember.device("meta"):
        model = nn.Linear(5, 3)
    model.load_state_dict(sd)
    assert model.weight.is_meta
