"""Checkpoints as users write them: nested dicts of state_dicts, optimizer
state, numbers and strings, through ember.save / ember.load; PyTorch's own
.pt files read without PyTorch's code and ember's .pt files read by
torch.load; hostile and malformed files refused with clear errors."""

import collections
import io
import os
import pickle
import zipfile

import numpy as np
import pytest
import torch

import ember
from ember import _torch_format


def nets(m):
    m.manual_seed(0)
    return m.nn.Sequential(m.nn.Conv2d(2, 3, 3), m.nn.BatchNorm2d(3), m.nn.ReLU(), m.nn.Flatten(),
                           m.nn.Linear(12, 4))


def copy_weights(src, dst):
    """torch -> ember (or back) through numpy, by state_dict name."""
    mod = ember if isinstance(dst, ember.nn.Module) else torch
    dst.load_state_dict({k: mod.tensor(v.detach().numpy()) for k, v in src.state_dict().items()})


def same(a, b):
    np.testing.assert_array_equal(np.asarray(a.detach().float().numpy() if hasattr(a, "detach") else a),
                                  np.asarray(b.detach().float().numpy() if hasattr(b, "detach") else b))


# ---------------------------------------------------------------- ember's own checkpoints

def checkpoint():
    net = nets(ember)
    opt = ember.optim.Adam(net.parameters(), lr=1e-3)
    x = ember.randn(5, 2, 4, 4)
    net(x).sum().backward()
    opt.step()
    return net, opt, {"model": net.state_dict(), "optimizer": opt.state_dict(), "epoch": 7,
                      "config": {"lr": 1e-3, "layers": [3, 4], "name": "run-1", "betas": (0.9, 0.999),
                                 "inf": float("inf"), "nan": float("nan"), "none": None, "flag": True,
                                 "blob": b"\x00\x01", "dtype": ember.bfloat16, 5: "int key"}}


@pytest.mark.parametrize("path", ["ck.safetensors", "ck.pt"])
def test_nested_checkpoint_round_trip(tmp_path, path):
    net, opt, ck = checkpoint()
    ember.save(ck, tmp_path / path)
    back = ember.load(tmp_path / path)
    assert back["epoch"] == 7 and isinstance(back["model"], collections.OrderedDict)
    cfg = back["config"]
    assert cfg["layers"] == [3, 4] and cfg["betas"] == (0.9, 0.999) and cfg["name"] == "run-1"
    assert cfg["inf"] == float("inf") and cfg["nan"] != cfg["nan"] and cfg["none"] is None
    assert cfg["flag"] is True and cfg["blob"] == b"\x00\x01" and cfg[5] == "int key"
    assert cfg["dtype"] == ember.bfloat16
    for k, v in ck["model"].items():
        same(back["model"][k], v)
        assert back["model"][k].dtype == v.dtype
    st, st0 = back["optimizer"]["state"], ck["optimizer"]["state"]
    assert set(st) == set(st0) and all(isinstance(k, int) for k in st)
    for i in st0:
        for k in st0[i]:
            same(st[i][k], st0[i][k])


def test_resumed_training_continues_exactly(tmp_path):
    def run(steps, resume_at=None):
        net = nets(ember)
        opt = ember.optim.SGD(net.parameters(), lr=0.1, momentum=0.9)
        rng = np.random.default_rng(0)
        for k in range(steps):
            if k == resume_at:
                ember.save({"model": net.state_dict(), "optimizer": opt.state_dict(), "step": k},
                           tmp_path / "mid.safetensors")
                net = nets(ember)
                opt = ember.optim.SGD(net.parameters(), lr=0.1, momentum=0.9)
                ck = ember.load(tmp_path / "mid.safetensors")
                net.load_state_dict(ck["model"])
                opt.load_state_dict(ck["optimizer"])
                assert ck["step"] == k
            x = ember.tensor(rng.standard_normal((4, 2, 4, 4)), dtype=ember.float32)
            opt.zero_grad()
            net(x).pow(2).mean().backward()
            opt.step()
        return [p.detach().numpy() for p in net.parameters()]
    for a, b in zip(run(6), run(6, resume_at=3)):
        np.testing.assert_array_equal(a, b)


def test_flat_state_dicts_stay_plain_safetensors(tmp_path):
    sd = nets(ember).state_dict()
    ember.save(sd, tmp_path / "m.safetensors")
    assert ember.serialization.load_metadata(tmp_path / "m.safetensors") == {}
    assert list(ember.load(tmp_path / "m.safetensors")) == list(sd)


def test_shared_tensors_stay_shared_and_parameters_come_back():
    w = ember.nn.Parameter(ember.ones(3))
    t = ember.zeros(2, requires_grad=True)
    buf = io.BytesIO()
    ember.save({"a": w, "b": w, "c": [t, t]}, buf, format="safetensors")
    buf.seek(0)
    back = ember.load(buf)
    assert back["a"] is back["b"] and isinstance(back["a"], ember.nn.Parameter)
    assert back["c"][0] is back["c"][1] and back["c"][0].requires_grad


def test_unsupported_objects_are_refused_before_writing(tmp_path):
    p = tmp_path / "x.safetensors"
    with pytest.raises(TypeError, match="cannot store object"):
        ember.save({"f": object()}, p)
    with pytest.raises(TypeError, match="cannot store"):
        ember.save({"f": lambda: 0}, tmp_path / "x.pt")
    assert not p.exists()
    with pytest.raises(ValueError, match="format"):
        ember.save({}, p, format="zip")


# ---------------------------------------------------------------- PyTorch's files

def test_torch_checkpoint_loads_into_an_ember_model(tmp_path):
    tnet = nets(torch)
    topt = torch.optim.Adam(tnet.parameters())
    tnet(torch.randn(3, 2, 4, 4)).sum().backward()
    topt.step()
    torch.save({"model": tnet.state_dict(), "optimizer": topt.state_dict(), "epoch": 2, "note": "hi",
                "param": torch.nn.Parameter(torch.ones(2)), "half": torch.arange(6.0).half().reshape(2, 3),
                "bf16": torch.ones(4, dtype=torch.bfloat16), "ints": torch.arange(5, dtype=torch.int16),
                "view": torch.arange(20.0).reshape(4, 5)[1:, ::2].t(), "mask": torch.tensor([True, False])},
               tmp_path / "t.pth")
    ck = ember.load(tmp_path / "t.pth")
    assert ck["epoch"] == 2 and ck["note"] == "hi"
    enet = nets(ember)
    enet.load_state_dict(ck["model"])
    enet.eval()
    tnet.eval()
    x = np.random.default_rng(1).standard_normal((2, 2, 4, 4)).astype(np.float32)
    np.testing.assert_allclose(enet(ember.tensor(x)).detach().numpy(), tnet(torch.tensor(x)).detach().numpy(),
                               rtol=1e-5, atol=1e-6)
    assert isinstance(ck["param"], ember.nn.Parameter) and ck["param"].requires_grad
    same(ck["half"], torch.arange(6.0).half().reshape(2, 3))
    assert ck["half"].dtype == ember.float16 and ck["bf16"].dtype == ember.bfloat16
    same(ck["ints"], torch.arange(5, dtype=torch.int16))
    same(ck["view"], torch.arange(20.0).reshape(4, 5)[1:, ::2].t())
    assert ck["mask"].tolist() == [True, False]
    assert set(ck["optimizer"]["state"][0]) == {"step", "exp_avg", "exp_avg_sq"}


def test_ember_pt_files_load_in_torch(tmp_path):
    enet = nets(ember)
    ember.save({"model": enet.state_dict(), "epoch": 4, "names": ["a", "b"]}, tmp_path / "e.pt")
    for weights_only in (False, True):
        ck = torch.load(tmp_path / "e.pt", weights_only=weights_only)
        tnet = nets(torch)
        tnet.load_state_dict(ck["model"])
        assert ck["epoch"] == 4 and ck["names"] == ["a", "b"]
    for k, v in enet.state_dict().items():
        same(ck["model"][k], v)
    # a Parameter and the dtypes survive the trip both ways
    ember.save({"p": ember.nn.Parameter(ember.ones(2)), "b": ember.ones(3, dtype=ember.bfloat16)}, tmp_path / "p.pt")
    t = torch.load(tmp_path / "p.pt")
    assert isinstance(t["p"], torch.nn.Parameter) and t["b"].dtype == torch.bfloat16


def test_map_location_spellings(tmp_path):
    torch.save({"w": torch.ones(2)}, tmp_path / "t.pt")
    for loc in (None, "cpu", lambda storage, loc: storage):
        assert ember.load(tmp_path / "t.pt", map_location=loc)["w"].tolist() == [1.0, 1.0]
    if ember.cuda.is_available():  # read, then copied over
        assert ember.load(tmp_path / "t.pt", map_location="cuda:0")["w"].is_cuda
    else:
        with pytest.raises(NotImplementedError, match="CPU"):
            ember.load(tmp_path / "t.pt", map_location="cuda:0")


# ---------------------------------------------------------------- hostile and malformed files

def zip_with(path, members):
    with zipfile.ZipFile(path, "w") as z:
        for name, data in members.items():
            z.writestr(name, data)


class Evil:
    def __init__(self, target):
        self.target = target

    def __reduce__(self):
        return (os.system, (f"touch {self.target}",))


def test_hostile_pickle_is_refused_without_running(tmp_path):
    marker = tmp_path / "pwned"
    bad = pickle.dumps({"w": Evil(marker)}, protocol=2)
    zip_with(tmp_path / "evil.pt", {"archive/data.pkl": bad, "archive/version": b"3\n"})
    with pytest.raises(pickle.UnpicklingError, match=r"refusing to load (posix|os)\.system"):
        ember.load(tmp_path / "evil.pt")
    assert not marker.exists()
    evil_eval = b"\x80\x02cbuiltins\neval\nX\x0b\x00\x00\x00print('hi')\x85R."
    zip_with(tmp_path / "eval.pt", {"archive/data.pkl": evil_eval})
    with pytest.raises(pickle.UnpicklingError, match="refusing to load builtins.eval"):
        ember.load(tmp_path / "eval.pt")


def crafted(tmp_path, numel_claimed, size, stride, offset=0, data=b"\x00" * 16):
    ref = _torch_format._StorageRef("0", "FloatStorage", numel_claimed)
    t = _torch_format._Reduced(_torch_format._Global("torch._utils", "_rebuild_tensor_v2"),
                               (ref, offset, size, stride, False, collections.OrderedDict()))
    buf = io.BytesIO()
    _torch_format._Writer(buf, protocol=2).dump({"w": t})
    zip_with(tmp_path / "c.pt", {"archive/data.pkl": buf.getvalue(), "archive/data/0": data})
    return tmp_path / "c.pt"


@pytest.mark.parametrize("numel,size,stride,offset,match", [
    (4, (100,), (1,), 0, "reaches element"),
    (4, (2, 2), (2, 1), 3, "reaches element"),
    (4, (2,), (1, 1), 0, "malformed tensor geometry"),
    (4, (-1,), (1,), 0, "malformed tensor geometry"),
    (9, (2,), (1,), 0, "holds 16 bytes"),
])
def test_bad_geometry_is_refused(tmp_path, numel, size, stride, offset, match):
    with pytest.raises((ValueError, pickle.UnpicklingError), match=match):
        ember.load(crafted(tmp_path, numel, size, stride, offset))


def test_malformed_archives(tmp_path):
    good = crafted(tmp_path, 4, (4,), (1,))
    assert ember.load(good)["w"].tolist() == [0.0] * 4
    raw = good.read_bytes()
    (tmp_path / "cut.pt").write_bytes(raw[: len(raw) // 2])
    with pytest.raises(ValueError, match="cut.pt"):
        ember.load(tmp_path / "cut.pt")
    zip_with(tmp_path / "nostore.pt", {"archive/data.pkl": zipfile.ZipFile(good).read("archive/data.pkl")})
    with pytest.raises(pickle.UnpicklingError, match="missing from the archive"):
        ember.load(tmp_path / "nostore.pt")
    zip_with(tmp_path / "script.pt", {"archive/data.pkl": b"", "archive/constants.pkl": b""})
    with pytest.raises(ValueError, match="TorchScript"):
        ember.load(tmp_path / "script.pt")
    zip_with(tmp_path / "junk.pt", {"archive/data.pkl": b"\x80\x02}q\x00(X"})
    with pytest.raises(ValueError, match="malformed data.pkl"):
        ember.load(tmp_path / "junk.pt")
    legacy = io.BytesIO()
    torch.save({"w": torch.ones(1)}, legacy, _use_new_zipfile_serialization=False)
    with pytest.raises(ValueError, match="legacy format"):
        ember.load(io.BytesIO(legacy.getvalue()))


def test_malformed_structure_metadata(tmp_path):
    p = tmp_path / "s.safetensors"
    ember.save({"a": [ember.ones(1)]}, p)
    raw = p.read_bytes()
    bad = raw.replace(b'\\"$tensor\\":0', b'\\"$tensor\\":7')
    assert bad != raw
    p.write_bytes(bad)
    with pytest.raises(ValueError, match="tensor index 7 out of range"):
        ember.load(p)


def test_a_whole_model_saves_by_reference_and_loads_only_when_trusted(tmp_path):
    """save(model) pickles the module by reference to its class, as
    torch.save does; load refuses it by default (weights_only, as PyTorch
    2.6) saying how to load a trusted file, and weights_only=False rebuilds
    it: the same outputs, parameters that are Parameters, tied weights
    still one tensor."""
    ember.manual_seed(0)
    model = ember.nn.Sequential(ember.nn.Embedding(7, 4), ember.nn.ReLU(), ember.nn.Linear(4, 7, bias=False))
    model[2].weight = model[0].weight  # tied, as a language model's head
    model.compute_dtype = ember.float64  # (a dtype among the module's attributes)
    p = tmp_path / "model.pt"
    ember.save(model, p)
    with pytest.raises(pickle.UnpicklingError, match="weights_only=False"):
        ember.load(p)
    back = ember.load(p, weights_only=False)
    assert type(back) is ember.nn.Sequential and back[2].weight is back[0].weight
    assert back.compute_dtype == ember.float64
    assert all(isinstance(q, ember.nn.Parameter) and q.requires_grad for q in back.parameters())
    x = ember.tensor([[1, 2, 6]])
    np.testing.assert_array_equal(back(x).detach().numpy(), model(x).detach().numpy())
    # a plain checkpoint still loads either way
    ember.save({"w": model[0].weight}, tmp_path / "ckpt.pt")
    for trusted in (None, False):
        np.testing.assert_array_equal(ember.load(tmp_path / "ckpt.pt", weights_only=trusted)["w"].detach().numpy(),
                                      model[0].weight.detach().numpy())


def test_a_model_that_cannot_be_pickled_is_refused_before_writing(tmp_path):
    model = ember.nn.Linear(2, 2)
    model.hook = lambda t: t  # (a lambda: pickle cannot find it by name)
    p = tmp_path / "m.pt"
    with pytest.raises(TypeError, match="cannot store this object.*state_dict"):
        ember.save(model, p)
    assert not p.exists()
