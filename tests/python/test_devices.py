"""The eager library on each device: every test takes the `device` fixture
(conftest.py), "cpu" and "cuda". A CUDA case runs where ember has a CUDA
device and skips elsewhere with the reason (ember.cuda.why_unavailable()).

Each test computes on `device` and checks against NumPy or PyTorch on the
CPU, so the CPU cases are real tests too, and a CUDA case checks the GPU's
kernels against the same references: elementwise ops in every float width,
reductions, ops along lines, matmul and convolution, random numbers (the
CPU's for the same seed), autograd, a training step of a module moved with
.to(device), DLPack, and loading a checkpoint onto the device.
"""

import math

import numpy as np
import pytest

import ember
import ember.nn.functional as F
from conftest import requires_torch, torch


def on(device, a, dtype=None):
    t = ember.tensor(a, dtype=dtype)
    return t.to(device)


def check(t, expected, device, rtol=1e-6, atol=1e-6):
    assert t.device.type == device, f"the result is on {t.device}, not {device}"
    np.testing.assert_allclose(t.cpu().double().numpy(), np.asarray(expected, np.float64),
                               rtol=rtol, atol=atol, equal_nan=True)


RNG = np.random.default_rng(7)
A = RNG.standard_normal((33, 65)).astype(np.float32)
B = RNG.standard_normal((33, 65)).astype(np.float32)


@pytest.mark.parametrize("dtype,rtol", [(ember.float32, 1e-6), (ember.float64, 1e-12), (ember.float16, 1e-3),
                                        (ember.bfloat16, 1e-2)])
def test_elementwise(device, dtype, rtol):
    a, b = on(device, A, dtype), on(device, B, dtype)
    ref_a, ref_b = a.cpu().double().numpy(), b.cpu().double().numpy()
    check(a + b, ref_a + ref_b, device, rtol, 1e-6)
    check(a * b, ref_a * ref_b, device, rtol, 1e-6)
    check((a - b).abs(), np.abs(ref_a - ref_b), device, rtol, 1e-6)
    check(ember.exp(a), np.exp(ref_a), device, max(rtol, 1e-5), 1e-6)
    gelu = ref_a * 0.5 * (1.0 + np.vectorize(math.erf)(ref_a / math.sqrt(2.0)))
    check(F.gelu(a), gelu, device, max(rtol, 1e-5), 1e-6)
    check(a.T + b.T, (ref_a + ref_b).T, device, rtol, 1e-6)  # strided
    check(a + b[:1], ref_a + ref_b[:1], device, rtol, 1e-6)  # broadcast


def test_integer_elementwise_wraps(device):
    a = on(device, np.array([2**62, -2**63, 7], np.int64))
    got = (a * 4 + 1).cpu().numpy()
    np.testing.assert_array_equal(got, np.array([2**62, -2**63, 7], np.int64) * 4 + 1)


@pytest.mark.parametrize("op", ["sum", "mean", "amax", "amin", "prod", "var", "std", "logsumexp", "norm"])
@pytest.mark.parametrize("dim", [0, 1, None])
def test_reductions(device, op, dim):
    a = on(device, A[:, :20] * 0.5)
    x = A[:, :20].astype(np.float64) * 0.5
    np_op = {"sum": np.sum, "mean": np.mean, "amax": np.max, "amin": np.min, "prod": np.prod,
             "var": lambda v, axis: np.var(v, axis=axis, ddof=1), "std": lambda v, axis: np.std(v, axis=axis, ddof=1),
             "logsumexp": lambda v, axis: np.log(np.sum(np.exp(v), axis=axis)),
             "norm": lambda v, axis: np.sqrt(np.sum(v * v, axis=axis))}[op]
    if dim is None and op == "logsumexp":
        got = ember.logsumexp(a, dim=(0, 1))
    elif op == "norm":
        got = a.norm(dim=dim) if dim is not None else a.norm()
    else:
        got = getattr(a, op)(dim) if dim is not None else getattr(a, op)()
    check(got, np_op(x, axis=dim), device, 1e-5, 1e-5)


def test_arg_reductions_take_the_first_index_and_nan_wins(device):
    x = np.array([[1.0, 3.0, 3.0, np.nan, 2.0], [5.0, 5.0, -1.0, 0.0, 5.0]], np.float32)
    a = on(device, x)
    np.testing.assert_array_equal(a.argmax(1).cpu().numpy(), [3, 0])
    np.testing.assert_array_equal(a.argmin(1).cpu().numpy(), [3, 2])


@pytest.mark.parametrize("dim", [0, 1])
def test_ops_along_lines(device, dim):
    a = on(device, A)
    x = A.astype(np.float64)
    e = np.exp(x - x.max(axis=dim, keepdims=True))
    check(F.softmax(a, dim=dim), e / e.sum(axis=dim, keepdims=True), device, 1e-5, 1e-7)
    check(F.log_softmax(a, dim=dim), np.log(e / e.sum(axis=dim, keepdims=True)), device, 1e-5, 1e-5)
    check(a.cumsum(dim), np.cumsum(x, axis=dim), device, 1e-5, 1e-5)
    ints = on(device, np.arange(12).reshape(3, 4) % 5)
    np.testing.assert_array_equal(ints.cumsum(dim).cpu().numpy(), np.cumsum(np.arange(12).reshape(3, 4) % 5, dim))


def test_layer_norm(device):
    w, b = RNG.standard_normal(65).astype(np.float32), RNG.standard_normal(65).astype(np.float32)
    got = F.layer_norm(on(device, A), (65,), on(device, w), on(device, b), eps=1e-5)
    x = A.astype(np.float64)
    mean, var = x.mean(axis=1, keepdims=True), x.var(axis=1, keepdims=True)
    check(got, (x - mean) / np.sqrt(var + 1e-5) * w + b, device, 1e-5, 1e-5)


def test_matmul_and_convolution(device):
    a, b = on(device, A), on(device, B.T.copy())
    check(a @ b, A.astype(np.float64) @ B.T.astype(np.float64), device, 1e-4, 1e-4)
    img = RNG.standard_normal((2, 3, 9, 9)).astype(np.float32)
    k = RNG.standard_normal((4, 3, 3, 3)).astype(np.float32)
    got = F.conv2d(on(device, img), on(device, k), padding=1)
    want = F.conv2d(ember.tensor(img.astype(np.float64)), ember.tensor(k.astype(np.float64)), padding=1)
    check(got, want.numpy(), device, 1e-4, 1e-4)


def test_random_numbers_are_the_cpus(device):
    """The same seed gives the same numbers on every device (Philox, drawn
    by element index)."""
    ember.manual_seed(11)
    cpu = ember.randn(1001), ember.rand(7, 3, dtype=ember.float64)
    ember.manual_seed(11)
    dev = ember.randn(1001, device=device), ember.rand(7, 3, dtype=ember.float64, device=device)
    for c, d in zip(cpu, dev):
        assert d.device.type == device
        np.testing.assert_array_equal(d.cpu().numpy(), c.numpy())


def test_autograd(device):
    x = on(device, A[:4, :5]).requires_grad_()
    y = (F.gelu(x) * x).sum()
    y.backward()
    xr = ember.tensor(A[:4, :5].astype(np.float64)).requires_grad_()
    (F.gelu(xr) * xr).sum().backward()
    check(x.grad, xr.grad.numpy(), device, 1e-5, 1e-6)


def test_training_step_of_a_module_moved_to_the_device(device):
    ember.manual_seed(0)
    model = ember.nn.Sequential(ember.nn.Linear(65, 16), ember.nn.ReLU(), ember.nn.Linear(16, 3))
    reference = ember.nn.Sequential(ember.nn.Linear(65, 16), ember.nn.ReLU(), ember.nn.Linear(16, 3))
    reference.load_state_dict(model.state_dict())
    model.to(device)
    assert all(p.device.type == device for p in model.parameters())
    target = np.arange(33) % 3
    losses = []
    for m in (model, reference):
        dev = device if m is model else "cpu"
        opt = ember.optim.AdamW(m.parameters(), lr=1e-2)
        for _ in range(3):
            loss = F.cross_entropy(m(on(dev, A)), on(dev, target))
            opt.zero_grad()
            loss.backward()
            opt.step()
        losses.append(loss.item())
    assert abs(losses[0] - losses[1]) <= 1e-4 * abs(losses[1])


def test_dlpack_round_trip(device):
    a = on(device, A)
    b = ember.from_dlpack(a)
    assert b.device == a.device
    np.testing.assert_array_equal(b.cpu().numpy(), A)


@requires_torch
def test_dlpack_with_pytorch(device):
    if device == "cuda" and not torch.cuda.is_available():
        pytest.skip("PyTorch has no CUDA device")
    t = torch.arange(6.0, device=device).reshape(2, 3)
    e = ember.from_dlpack(t)
    assert e.device.type == device
    back = torch.from_dlpack(e * 2)
    assert torch.equal(back.cpu(), (t * 2).cpu())


def test_checkpoint_loads_onto_the_device(device, tmp_path):
    path = tmp_path / "m.safetensors"
    ember.save({"w": ember.tensor(A)}, str(path))
    state = ember.load(str(path), map_location=device)
    assert state["w"].device.type == device
    np.testing.assert_array_equal(state["w"].cpu().numpy(), A)


def test_values_reach_python_from_the_device(device):
    """item(), tolist(), bool(), printing and pickling read a device's values
    (copied over, which waits for them); NumPy's zero-copy view refuses, as
    PyTorch's .numpy() does."""
    a = on(device, np.array([[1.5, -2.0], [3.25, 0.0]], np.float32))
    assert a[1, 0].item() == 3.25 and a.tolist() == [[1.5, -2.0], [3.25, 0.0]]
    assert bool(a[0, 0]) and not bool(a[1, 1])
    assert a.get_device() == (0 if device == "cuda" else -1) and a.is_cuda == (device == "cuda")
    text = repr(a)
    assert "3.2500" in text and (("device='cuda:0'" in text) == (device == "cuda"))
    import pickle
    back = pickle.loads(pickle.dumps(a))  # (on the device it came from, as PyTorch's)
    assert back.tolist() == a.tolist() and back.device == a.device
    if device == "cuda":
        with pytest.raises(TypeError, match="cpu"):
            a.numpy()


def test_in_place_ops_and_copies_between_devices(device):
    a = on(device, A[:3, :4].copy())
    a.mul_(2).add_(1)
    a[0].zero_()
    want = A[:3, :4].astype(np.float64) * 2 + 1
    want[0] = 0
    check(a, want, device)
    host = ember.zeros(3, 4)
    host.copy_(a)  # device -> CPU
    check(host, want, "cpu")
    b = on(device, np.zeros((3, 4), np.float32))
    b.copy_(ember.tensor(A[:3, :4]))  # CPU -> device
    check(b, A[:3, :4], device)
    if device == "cuda":
        with pytest.raises(RuntimeError, match="cuda:0 and cpu|cpu and cuda:0"):
            a + ember.ones(3, 4)
        assert (a + 1).device.type == "cuda"  # (a Python number joins any device)


def test_factories_on_the_device(device):
    z = ember.zeros(2, 3, device=device)
    f = ember.full((2, 3), 2.5, device=device, dtype=ember.float64)
    r = ember.arange(6, device=device).reshape(2, 3)
    assert z.device.type == f.device.type == r.device.type == device
    check(z + f + r, np.arange(6).reshape(2, 3) + 2.5, device)


def test_the_cuda_module_answers(device):
    if device != "cuda":
        assert ember.cuda.is_available() == (ember.cuda.device_count() > 0)
        return
    assert ember.cuda.device_count() >= 1 and ember.cuda.why_unavailable() == ""
    assert ember.cuda.get_device_name() and len(ember.cuda.get_device_capability()) == 2
    props = ember.cuda.get_device_properties(0)
    assert props.name == ember.cuda.get_device_name() and (props.major, props.minor) == ember.cuda.get_device_capability()
    assert props.multi_processor_count >= 1 and "_CudaDeviceProperties(name=" in repr(props)
    if "stand-in" in ember.cuda.get_device_name():
        pytest.skip("the host stand-in for a CUDA device has no allocator of its own")
    x = ember.ones(1 << 20, device="cuda")
    assert ember.cuda.memory_allocated() >= 4 << 20 and ember.cuda.memory_reserved() >= ember.cuda.memory_allocated()
    assert ember.cuda.max_memory_allocated() >= ember.cuda.memory_allocated()
    del x
    ember.cuda.synchronize()
    ember.cuda.empty_cache()
    assert ember.cuda.memory_stats()["allocation.all.freed"] >= 1


def test_moving_to_a_device_is_differentiable(device):
    """x.to(device) records its copy (PyTorch's ToCopyBackward0): the
    gradient comes back to x's device."""
    x = ember.tensor(A[:2, :3]).requires_grad_()
    y = x.to(device)
    assert y.grad_fn is not None or device == "cpu"
    (y * y).sum().backward()
    assert x.grad.device.type == "cpu"
    np.testing.assert_allclose(x.grad.numpy(), 2 * A[:2, :3], rtol=1e-6)


@pytest.mark.parametrize("name", ["m.safetensors", "m.pt"])
def test_saving_tensors_that_live_on_the_device(device, tmp_path, name):
    """save() writes a device's values (copied to the host); they load onto
    the CPU, or back onto the device with map_location."""
    model = ember.nn.Linear(4, 3).to(device)
    path = tmp_path / name
    ember.save(model.state_dict(), str(path))
    back = ember.load(str(path))
    for k, v in model.state_dict().items():
        assert back[k].device.type == "cpu"
        np.testing.assert_array_equal(back[k].numpy(), v.cpu().numpy())
    again = ember.load(str(path), map_location=device)
    assert all(v.device.type == device for v in again.values())


def test_events_time_and_streams_order_the_work(device):
    """torch.cuda.Event and Stream, as scripts time and order GPU work: an
    event's elapsed_time in milliseconds (non-negative, and not before its
    start), a side stream's work in order (ember has one stream a device)."""
    if device != "cuda":
        return
    start, end = ember.cuda.Event(enable_timing=True), ember.cuda.Event(enable_timing=True)
    a = ember.randn(256, 256, device="cuda")
    start.record()
    for _ in range(5):
        a = a * 1.0001
    end.record()
    end.synchronize()
    assert end.query() and start.elapsed_time(end) >= 0.0
    untimed = ember.cuda.Event()
    untimed.record()
    with pytest.raises(RuntimeError, match="enable_timing"):
        untimed.elapsed_time(end)
    with pytest.raises(RuntimeError, match="recorded"):
        ember.cuda.Event(enable_timing=True).elapsed_time(end)
    s = ember.cuda.Stream()
    with ember.cuda.stream(s):
        b = a + 1
    s.wait_stream(ember.cuda.current_stream())
    s.synchronize()
    assert s == ember.cuda.current_stream() and s.query()
    check(b, a.cpu().numpy().astype(np.float64) + 1, "cuda")


def test_index_put_and_copy_gradients_across_devices(device):
    """x[index] = v writes on x's device (never by the CPU's kernel into a
    device's memory); y.copy_(x_cpu) carries x's gradient back to the CPU."""
    x = on(device, np.zeros((4, 3), np.float32))
    x[ember.tensor([0, 2]).to(device)] = 5.0
    want = np.zeros((4, 3))
    want[[0, 2]] = 5.0
    check(x, want, device)
    src = ember.tensor(A[:2, :3]).requires_grad_()
    dst = on(device, np.zeros((2, 3), np.float32))
    dst.copy_(src)
    (dst * 3).sum().backward()
    assert src.grad is not None and src.grad.device.type == "cpu"
    np.testing.assert_allclose(src.grad.numpy(), np.full((2, 3), 3.0))


def test_anomaly_mode_reads_a_devices_gradients(device):
    """detect_anomaly's NaN check reads each gradient's answer on the host
    (copied over from a device), finding a NaN there as on the CPU."""
    x = on(device, np.array([1.0, 4.0], np.float32)).requires_grad_()
    with ember.autograd.detect_anomaly():
        x.sqrt().sum().backward()
        y = on(device, np.array([-1.0, 4.0], np.float32)).requires_grad_()
        with pytest.raises(RuntimeError, match="nan"):
            y.sqrt().sum().backward()
    check(x.grad, 0.5 / np.sqrt([1.0, 4.0]), device)


class _Producer:
    """Another library's CUDA array: only its __cuda_array_interface__."""

    def __init__(self, interface):
        self.interface = interface

    @property
    def __cuda_array_interface__(self):
        return self.interface


def test_cuda_array_interface_both_ways(device):
    """A CUDA tensor exports Numba's CUDA array interface (version 3: shape,
    typestr, pointer, byte strides, its stream), and ember.as_tensor shares
    another library's CUDA array through it (ember.tensor copies); with
    PyTorch on the GPU, both ways against torch's CUDA tensors."""
    if device != "cuda":
        assert not hasattr(on(device, np.ones(2, np.float32)), "__cuda_array_interface__")
        return
    a = on(device, np.arange(12, dtype=np.float32).reshape(3, 4))
    i = a.__cuda_array_interface__
    assert i["shape"] == (3, 4) and i["typestr"] == "<f4" and i["version"] == 3 and i["strides"] is None
    assert i["data"] == (a.data_ptr(), False)
    assert a.t().__cuda_array_interface__["strides"] == (4, 16)
    shared = ember.as_tensor(_Producer(a.t().__cuda_array_interface__))
    assert shared.device.type == "cuda" and shared.shape == (4, 3)
    a.add_(1)  # (one memory: the change shows through the other)
    np.testing.assert_array_equal(shared.cpu().numpy(), a.t().cpu().numpy())
    copied = ember.tensor(_Producer(a.__cuda_array_interface__))
    a.zero_()
    assert copied.sum().item() == sum(range(1, 13))
    with pytest.raises(RuntimeError, match="requires grad"):
        a.clone().requires_grad_().__cuda_array_interface__
    with pytest.raises(TypeError, match="bfloat16"):
        a.bfloat16().__cuda_array_interface__
    base = dict(a.__cuda_array_interface__)
    for change, err, match in (({"mask": object()}, NotImplementedError, "mask"),
                               ({"version": 1}, ValueError, "version 1"),
                               ({"stream": 0}, ValueError, "stream 0"),
                               ({"typestr": "<c8"}, TypeError, "typestr"),
                               ({"strides": (4, 3)}, ValueError, "multiple")):
        with pytest.raises(err, match=match):
            ember.as_tensor(_Producer({**base, **change}))
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        return
    tt = torch.as_tensor(a, device="cuda")  # (torch reads ember's interface: shared)
    a.fill_(3.0)
    torch.cuda.synchronize()
    assert tt.data_ptr() == a.data_ptr() and tt.sum().item() == 36.0
    src = torch.arange(6, dtype=torch.float64, device="cuda").reshape(2, 3)
    e = ember.as_tensor(src)  # (ember reads torch's: shared)
    src.mul_(2)
    torch.cuda.synchronize()
    np.testing.assert_array_equal(e.cpu().numpy(), src.cpu().numpy())
