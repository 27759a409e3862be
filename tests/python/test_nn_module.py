"""ember.nn.Module, its containers, Parameter and nn.init against PyTorch 1.13.

The same small models are built in both libraries from one description,
then everything the Module API reports (names and order of parameters,
buffers, modules, children and state_dict keys, repr, modes, hooks,
load_state_dict's errors) must agree. nn.init is checked by distribution
(the generators differ, so the draws do)."""

import copy
import math
from collections import OrderedDict

import numpy as np
import pytest
import torch

import ember
import ember.nn as enn
from ember.nn import init


def _np(t):
    return t.detach().numpy()


def _dt(t):
    return str(t.dtype).split(".")[-1]


def make_model(lib):
    """One model written for either library (lib is ember or torch):
    Sequential, a custom submodule with a persistent and a non-persistent
    buffer, ModuleList, ModuleDict, a bare Parameter, a module reached by
    two names and a parameter tied between two modules."""
    nn = lib.nn

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(3, 4, 3, padding=1)
            self.bn = nn.BatchNorm2d(4)
            self.register_buffer("scale", lib.ones(4))
            self.register_buffer("calls", lib.zeros(1), persistent=False)

        def forward(self, x):
            return (self.bn(self.conv(x)) * self.scale.reshape(1, 4, 1, 1)).relu()

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.features = nn.Sequential(Block(), nn.Dropout(0.0), nn.MaxPool2d(2))
            self.heads = nn.ModuleList([nn.Linear(16, 5), nn.Linear(16, 5, bias=False)])
            self.extra = nn.ModuleDict(OrderedDict([("proj", nn.Linear(5, 2)), ("act", nn.Tanh())]))
            self.alpha = nn.Parameter(lib.tensor([0.5]))
            self.first_head = self.heads[0]  # the same module under a second name
            self.tied = nn.Linear(5, 2, bias=False)
            self.tied.weight = self.extra["proj"].weight  # one parameter, two modules

        def forward(self, x):
            h = self.features(x).flatten(1)
            h = self.first_head(h) + self.heads[1](h) * self.alpha
            return self.extra["act"](self.extra["proj"](h)) + self.tied(h)

    return Net()


def same_state(em, tm):
    """Copies ember module em's parameters and buffers into torch module tm."""
    ts = tm.state_dict()
    with torch.no_grad():
        for k, v in em.state_dict().items():
            ts[k].copy_(torch.from_numpy(_np(v).copy()))


X = np.random.default_rng(0).standard_normal((2, 3, 4, 4)).astype(np.float32)


@pytest.fixture(autouse=True)
def seeded():
    """Fixed draws, so the statistical checks below are deterministic (their
    margins are several standard errors wide all the same)."""
    ember.manual_seed(0)
    torch.manual_seed(0)


@pytest.fixture
def models():
    return make_model(ember), make_model(torch)


# ---------------------------------------------------------------- traversal and naming

def test_named_parameters(models):
    em, tm = models
    e = [(n, tuple(p.shape)) for n, p in em.named_parameters()]
    assert e == [(n, tuple(p.shape)) for n, p in tm.named_parameters()]
    assert "tied.weight" not in dict(e) and "first_head.weight" not in dict(e)  # deduplicated
    assert all(isinstance(p, enn.Parameter) and p.requires_grad for p in em.parameters())
    assert len(list(em.parameters())) == len(list(tm.parameters()))
    assert [n for n, _ in em.named_parameters(prefix="m", recurse=False)] == \
        [n for n, _ in tm.named_parameters(prefix="m", recurse=False)] == ["m.alpha"]
    assert em.tied.weight is em.extra.proj.weight
    assert em.get_parameter("heads.1.weight") is em.heads[1].weight


def test_named_members_keep_duplicates(models):
    """remove_duplicate=False (PyTorch 2's argument): every name of a shared
    module or a tied parameter."""
    em, tm = models
    names = [n for n, _ in em.named_parameters(remove_duplicate=False)]
    assert names == [n for n, _ in em.named_parameters()] + ["first_head.weight",
                                                             "first_head.bias", "tied.weight"]
    # the same names as state_dict's for the parameters
    assert sorted(names) == sorted(k for k in tm.state_dict() if "bn.running" not in k and
                                   "num_batches" not in k and not k.endswith("scale"))
    assert [n for n, _ in em.named_buffers(remove_duplicate=False)] == \
        [n for n, _ in tm.named_buffers()]  # no shared buffers here
    m = enn.Sequential(enn.BatchNorm1d(2))
    m.add_module("again", m[0])
    assert [n for n, _ in m.named_buffers(remove_duplicate=False)] == \
        ["0.running_mean", "0.running_var", "0.num_batches_tracked", "again.running_mean",
         "again.running_var", "again.num_batches_tracked"]


def test_named_buffers_modules_children(models):
    em, tm = models
    assert [(n, tuple(b.shape)) for n, b in em.named_buffers()] == \
        [(n, tuple(b.shape)) for n, b in tm.named_buffers()]
    assert [(n, type(m).__name__) for n, m in em.named_modules()] == \
        [(n, type(m).__name__) for n, m in tm.named_modules()]
    assert [(n, type(m).__name__) for n, m in em.named_children()] == \
        [(n, type(m).__name__) for n, m in tm.named_children()]
    assert [type(m).__name__ for m in em.children()] == [type(m).__name__ for m in tm.children()]
    assert [type(m).__name__ for m in em.modules()] == [type(m).__name__ for m in tm.modules()]
    assert [n for n, _ in em.named_modules(prefix="root")] == \
        [n for n, _ in tm.named_modules(prefix="root")]
    assert [n for n, _ in em.named_modules(remove_duplicate=False)] == \
        [n for n, _ in tm.named_modules(remove_duplicate=False)]
    assert em.get_submodule("features.0.bn") is em.features[0].bn
    with pytest.raises(AttributeError):
        tm.get_submodule("features.7")
    with pytest.raises(AttributeError):
        em.get_submodule("features.7")


def test_state_dict(models):
    em, tm = models
    es, ts = em.state_dict(), tm.state_dict()
    assert [(k, tuple(v.shape)) for k, v in es.items()] == \
        [(k, tuple(v.shape)) for k, v in ts.items()]
    assert "features.0.calls" not in es  # non-persistent
    assert "tied.weight" in es and "first_head.weight" in es  # every name, as PyTorch
    assert isinstance(es, OrderedDict)
    assert _dt(es["features.0.bn.num_batches_tracked"]) == "int64"
    # detached values that share the parameters' memory
    w = es["heads.0.weight"]
    assert not w.requires_grad and not isinstance(w, enn.Parameter)
    assert w.data_ptr() == em.heads[0].weight.data_ptr()
    assert em.state_dict(keep_vars=True)["heads.0.weight"] is em.heads[0].weight
    assert list(em.state_dict(prefix="p.")) == list(tm.state_dict(prefix="p."))


def test_repr(models):
    em, tm = models
    assert repr(em) == repr(tm)


STANDARD = [
    ("Linear", (3, 4), {}), ("Linear", (3, 4), {"bias": False}), ("Identity", (), {}),
    ("Conv1d", (2, 4, 3), {}), ("Conv1d", (2, 4, 3), {"padding": "same", "dilation": 2}),
    ("Conv2d", (2, 4, 3), {}), ("Conv2d", (2, 4, (3, 2)), {"stride": (2, 1), "padding": 1,
                                                           "dilation": 2, "groups": 2,
                                                           "bias": False}),
    ("Conv2d", (2, 4, 3), {"padding": "valid"}),
    ("MaxPool2d", (2,), {}), ("MaxPool2d", (3, 2, 1), {"dilation": 2, "ceil_mode": True}),
    ("AvgPool2d", (2,), {}), ("AvgPool2d", ((3, 2), 1, 1), {"count_include_pad": False}),
    ("AdaptiveAvgPool2d", ((3, None),), {}), ("AdaptiveAvgPool2d", (1,), {}),
    ("Flatten", (), {}), ("Unflatten", (1, (2, 3)), {}),
    ("LayerNorm", (5,), {}), ("LayerNorm", ([3, 5],), {"eps": 1e-6, "elementwise_affine": False}),
    ("BatchNorm1d", (5,), {}), ("BatchNorm2d", (5,), {"momentum": None, "affine": False}),
    ("BatchNorm2d", (5,), {"eps": 1e-3, "track_running_stats": False}),
    ("Dropout", (), {}), ("Dropout", (0.2,), {"inplace": True}),
    ("Embedding", (10, 3), {}), ("Embedding", (10, 3), {"padding_idx": -1}),
    ("ReLU", (), {}), ("ReLU", (True,), {}), ("ReLU6", (), {}), ("LeakyReLU", (0.2,), {}),
    ("ELU", (), {}), ("GELU", ("tanh",), {}), ("SiLU", (), {}), ("Mish", (), {}),
    ("Softplus", (), {}), ("LogSigmoid", (), {}), ("Hardtanh", (-2.0, 2.0), {}),
    ("Tanh", (), {}), ("Sigmoid", (), {}), ("Softmax", (-1,), {}), ("LogSoftmax", (1,), {}),
    ("CrossEntropyLoss", (), {"label_smoothing": 0.1}), ("NLLLoss", (), {}),
    ("MSELoss", (), {"reduction": "sum"}), ("L1Loss", (), {}), ("BCEWithLogitsLoss", (), {}),
]


@pytest.mark.parametrize("name,args,kw", STANDARD, ids=[f"{n}{a}{k}" for n, a, k in STANDARD])
def test_standard_module_repr_and_names(name, args, kw):
    em, tm = getattr(enn, name)(*args, **kw), getattr(torch.nn, name)(*args, **kw)
    assert repr(em) == repr(tm)
    assert [(n, tuple(p.shape)) for n, p in em.named_parameters()] == \
        [(n, tuple(p.shape)) for n, p in tm.named_parameters()]
    assert [(k, tuple(v.shape)) for k, v in em.state_dict().items()] == \
        [(k, tuple(v.shape)) for k, v in tm.state_dict().items()]


def test_custom_extra_repr():
    def make(nn):
        class Scale(nn.Module):
            def __init__(self):
                super().__init__()
                self.inner = nn.Sequential(nn.Linear(2, 2), nn.ModuleList([nn.ReLU()]))

            def extra_repr(self):
                return "factor=2,\nmode='x'"
        return nn.Sequential(OrderedDict([("scale", Scale()), ("empty", nn.ModuleDict())]))
    assert repr(make(enn)) == repr(make(torch.nn))


# ---------------------------------------------------------------- forward, modes, grads

def test_forward_matches(models):
    em, tm = models
    same_state(em, tm)
    e = em(ember.from_numpy(X.copy()))
    t = tm(torch.from_numpy(X.copy()))
    np.testing.assert_allclose(_np(e), _np(t), rtol=1e-5, atol=1e-6)
    # the running statistics moved the same way
    np.testing.assert_allclose(_np(em.features[0].bn.running_var),
                               _np(tm.features[0].bn.running_var), rtol=1e-5)
    e.sum().backward()
    t.sum().backward()
    tp = dict(tm.named_parameters())
    for n, p in em.named_parameters():
        np.testing.assert_allclose(_np(p.grad), _np(tp[n].grad), rtol=1e-4, atol=1e-6,
                                   err_msg=n)


def test_train_eval(models):
    em, tm = models
    for mode in (False, True):
        assert em.train(mode) is em
        tm.train(mode)
        assert [m.training for m in em.modules()] == [m.training for m in tm.modules()] == \
            [mode] * len(list(em.modules()))
    assert em.eval() is em
    assert not any(m.training for m in em.modules())
    em.features.train()
    assert em.features[0].bn.training and not em.training
    with pytest.raises(ValueError):
        tm.train("yes")
    with pytest.raises(ValueError):
        em.train("yes")


def test_zero_grad(models):
    em, _ = models
    em(ember.from_numpy(X.copy())).sum().backward()
    grads = {n: p.grad for n, p in em.named_parameters()}
    assert all(g is not None and g.numpy().any() for g in grads.values())
    em.zero_grad(set_to_none=False)
    for n, p in em.named_parameters():
        assert p.grad is grads[n]  # zeroed in place
        assert not p.grad.numpy().any() and not p.grad.requires_grad
    em.zero_grad(set_to_none=True)
    assert all(p.grad is None for p in em.parameters())
    em(ember.from_numpy(X.copy())).sum().backward()
    em.zero_grad()  # the default is PyTorch 2's: set_to_none=True
    assert all(p.grad is None for p in em.parameters())


def test_zero_grad_of_a_gradient_with_history():
    for lib in (ember, torch):
        m = lib.nn.Module()
        m.weight = lib.nn.Parameter(lib.ones(3))
        g = lib.autograd.grad(m.weight.pow(3).sum(), m.weight, create_graph=True)[0]
        m.weight.grad = g
        assert m.weight.grad.grad_fn is not None
        m.zero_grad(set_to_none=False)
        assert m.weight.grad is g and g.grad_fn is None and not g.requires_grad
        assert not g.detach().numpy().any()


def test_apply(models):
    em, tm = models
    seen_e, seen_t = [], []
    assert em.apply(lambda m: seen_e.append(type(m).__name__)) is em
    tm.apply(lambda m: seen_t.append(type(m).__name__))
    assert seen_e == seen_t

    def init_linear(m):
        if isinstance(m, enn.Linear):
            init.constant_(m.weight, 0.25)
    em.apply(init_linear)
    assert (em.heads[1].weight.numpy() == 0.25).all() and em.heads[1].weight.grad_fn is None


def test_requires_grad_(models):
    em, _ = models
    assert em.requires_grad_(False) is em
    assert not any(p.requires_grad for p in em.parameters())
    assert not em(ember.from_numpy(X.copy())).requires_grad
    em.heads.requires_grad_()
    assert [n for n, p in em.named_parameters() if p.requires_grad] == \
        ["heads.0.weight", "heads.0.bias", "heads.1.weight"]


@pytest.mark.parametrize("how", ["to", "to_kw", "double", "to_tensor"])
def test_to_float64(models, how):
    em, tm = models
    same_state(em, tm)
    em(ember.from_numpy(X.copy())).sum().backward()
    old = dict(em.named_parameters())
    old_grads = {n: p.grad.numpy().copy() for n, p in old.items()}
    out = {"to": lambda: em.to(ember.float64), "to_kw": lambda: em.to(dtype=ember.float64),
           "double": em.double,
           "to_tensor": lambda: em.to(ember.zeros(1, dtype=ember.float64))}[how]()
    assert out is em
    tm.double()
    for (n, p), (_, tp) in zip(em.named_parameters(), tm.named_parameters()):
        assert isinstance(p, enn.Parameter) and p.requires_grad, n
        assert _dt(p) == "float64", n
        np.testing.assert_allclose(_np(p), _np(tp), rtol=1e-7, err_msg=n)
        # the gradient came along, converted
        assert _dt(p.grad) == "float64"
        np.testing.assert_allclose(p.grad.numpy(), old_grads[n], rtol=1e-7)
    assert [(n, _dt(b)) for n, b in em.named_buffers()] == \
        [(n, _dt(b)) for n, b in tm.named_buffers()]
    # the attributes, the registries and the state_dict agree on the new tensors
    assert em.heads[0].weight is dict(em.named_parameters())["heads.0.weight"]
    assert em.first_head.weight is em.heads[0].weight
    assert em.tied.weight is em.extra["proj"].weight  # still tied
    assert len(list(em.parameters())) == len(old)
    assert em.state_dict(keep_vars=True)["tied.weight"] is em.extra.proj.weight
    y = em(ember.from_numpy(X.astype(np.float64)))
    assert _dt(y) == "float64"
    y.sum().backward()  # the new parameters are leaves that get gradients
    assert em.tied.weight.grad is not None


def test_to_other_arguments(models):
    em, tm = models
    p = em.heads[0].weight
    assert em.to(ember.float32) is em and em.heads[0].weight is p  # nothing to convert
    assert em.to("cpu") is em and em.cpu() is em
    for dt in (torch.int64,):
        with pytest.raises(TypeError):
            tm.to(dt)
    with pytest.raises(TypeError):
        em.to(ember.int64)
    em.half()
    assert _dt(em.heads[0].weight) == "float16"
    assert _dt(em.features[0].bn.num_batches_tracked) == "int64"
    em.float()
    assert _dt(em.heads[0].weight) == "float32"


def test_deepcopy(models):
    em, _ = models
    cp = copy.deepcopy(em)
    assert cp.heads[0].weight is not em.heads[0].weight
    assert isinstance(cp.heads[0].weight, enn.Parameter)
    assert cp.tied.weight is cp.extra.proj.weight and cp.first_head is cp.heads[0]
    with ember.no_grad():
        cp.heads[0].weight.fill_(3.0)
    assert not (em.heads[0].weight.numpy() == 3.0).any()
    em.eval()
    cp = copy.deepcopy(em)
    x = ember.from_numpy(X.copy())
    np.testing.assert_array_equal(_np(cp(x)) * 0, _np(em(x)) * 0)


# ---------------------------------------------------------------- state_dict loading

def test_state_dict_round_trip():
    a, b = make_model(ember), make_model(ember)
    a(ember.from_numpy(X.copy()))  # running stats away from their start
    a.eval()
    b.eval()
    x = ember.from_numpy(X.copy())
    assert not np.allclose(_np(a(x)), _np(b(x)))
    r = b.load_state_dict(a.state_dict())
    assert r.missing_keys == [] and r.unexpected_keys == []
    assert repr(r) == "<All keys matched successfully>"
    np.testing.assert_array_equal(_np(a(x)), _np(b(x)))
    assert int(b.features[0].bn.num_batches_tracked) == 1
    # copies, not shared memory
    assert a.heads[0].weight.data_ptr() != b.heads[0].weight.data_ptr()
    assert b.tied.weight is b.extra.proj.weight


def test_load_into_torch_gives_same_outputs(models):
    em, tm = models
    em(ember.from_numpy(X.copy()))
    em.eval()
    tm.eval()
    tm.load_state_dict({k: torch.from_numpy(_np(v).copy()) for k, v in em.state_dict().items()})
    np.testing.assert_allclose(_np(em(ember.from_numpy(X.copy()))),
                               _np(tm(torch.from_numpy(X.copy()))), rtol=1e-5, atol=1e-6)


def _errors(em, tm, edit, strict=True):
    """load_state_dict on both with the state dict edited by edit(sd, lib);
    returns both exceptions' messages (ember's with ember for torch)."""
    es, ts = em.state_dict(), tm.state_dict()
    edit(es, ember)
    edit(ts, torch)
    with pytest.raises(RuntimeError) as t_exc:
        tm.load_state_dict(ts, strict=strict)
    with pytest.raises(RuntimeError) as e_exc:
        em.load_state_dict(es, strict=strict)
    return str(e_exc.value), str(t_exc.value).replace("torch.", "ember.")


def test_load_state_dict_strict_errors(models):
    em, tm = models

    def missing(sd, lib):
        del sd["heads.1.weight"]
        del sd["features.0.bn.running_mean"]

    def unexpected(sd, lib):
        sd["bogus"] = lib.zeros(2)

    def size(sd, lib):
        sd["extra.proj.bias"] = lib.zeros(3)

    def all_three(sd, lib):
        missing(sd, lib)
        unexpected(sd, lib)
        size(sd, lib)

    for edit in (missing, unexpected, size, all_three):
        e, t = _errors(em, tm, edit)
        assert e == t
        assert e.startswith("Error(s) in loading state_dict for Net:\n\t")
    e, t = _errors(em, tm, size, strict=False)  # a size mismatch is an error either way
    assert e == t and "size mismatch for extra.proj.bias" in e


def test_load_state_dict_not_strict(models):
    em, tm = models
    before = _np(em.heads[0].weight).copy()
    results = []
    for m, lib in ((em, ember), (tm, torch)):
        sd = m.state_dict()
        del sd["heads.1.weight"]
        sd["heads.0.extra"] = lib.zeros(1)
        sd["heads.0.weight"] = lib.ones(5, 16)
        r = m.load_state_dict(sd, strict=False)
        results.append((r.missing_keys, r.unexpected_keys, repr(r)))
        missing, unexpected = r  # a named pair
        assert missing == ["heads.1.weight"] and unexpected == ["heads.0.extra"]
    assert results[0] == results[1]
    assert (em.heads[0].weight.numpy() == 1).all() and not (before == 1).all()
    assert em.heads[0].weight.requires_grad


def test_load_state_dict_bad_values(models):
    em, _ = models
    with pytest.raises(TypeError):
        em.load_state_dict([1, 2])
    sd = em.state_dict()
    sd["alpha"] = [0.5]
    with pytest.raises(RuntimeError, match='While copying the parameter named "alpha"'):
        em.load_state_dict(sd)


# ---------------------------------------------------------------- containers

def _names(mod):
    return [(n, type(m).__name__) for n, m in mod.named_children()]


def test_sequential_ops():
    for nn, lib in ((enn, ember), (torch.nn, torch)):
        s = nn.Sequential(nn.Linear(2, 3), nn.ReLU(), nn.Linear(3, 4), nn.Tanh())
        assert len(s) == 4 and isinstance(s[0], nn.Linear) and isinstance(s[-1], nn.Tanh)
        assert s[-4] is s[0]
        with pytest.raises(IndexError):
            s[4]
        with pytest.raises(IndexError):
            s[-5]
        sl = s[1:3]
        assert type(sl) is nn.Sequential and _names(sl) == [("1", "ReLU"), ("2", "Linear")]
        assert sl[0] is s[1]
        assert _names(s[::2]) == [("0", "Linear"), ("2", "Linear")]
        assert [type(m).__name__ for m in s] == ["Linear", "ReLU", "Linear", "Tanh"]
        s.append(nn.Sigmoid())
        assert _names(s)[-1] == ("4", "Sigmoid")
        s[1] = nn.GELU()
        assert isinstance(s[1], nn.GELU)
        del s[1]
        assert _names(s) == [("0", "Linear"), ("1", "Linear"), ("2", "Tanh"), ("3", "Sigmoid")]
        del s[-2:]
        assert _names(s) == [("0", "Linear"), ("1", "Linear")]
        assert tuple(s(lib.zeros(5, 2)).shape) == (5, 4)
        d = nn.Sequential(OrderedDict([("fc", nn.Linear(2, 2)), ("act", nn.ReLU())]))
        assert _names(d) == [("fc", "Linear"), ("act", "ReLU")] and d.fc is d[0]
        assert _names(d[1:]) == [("act", "ReLU")]
    assert repr(enn.Sequential(OrderedDict([("fc", enn.Linear(2, 2))]))) == \
        repr(torch.nn.Sequential(OrderedDict([("fc", torch.nn.Linear(2, 2))])))
    assert repr(enn.Sequential()) == repr(torch.nn.Sequential()) == "Sequential()"


def test_module_list_ops():
    for nn in (enn, torch.nn):
        ml = nn.ModuleList([nn.Linear(1, 1), nn.ReLU()])
        ml.append(nn.Tanh())
        ml.extend([nn.Sigmoid(), nn.GELU()])
        ml.insert(1, nn.ELU())
        assert [type(m).__name__ for m in ml] == ["Linear", "ELU", "ReLU", "Tanh", "Sigmoid",
                                                  "GELU"]
        assert _names(ml) == [(str(i), type(m).__name__) for i, m in enumerate(ml)]
        assert isinstance(ml[-1], nn.GELU) and ml[-6] is ml[0] and len(ml) == 6
        with pytest.raises(IndexError):
            ml[6]
        sl = ml[1:4]
        assert type(sl) is nn.ModuleList and _names(sl) == [("0", "ELU"), ("1", "ReLU"),
                                                            ("2", "Tanh")]
        assert sl[0] is ml[1]
        ml[0] = nn.Identity()
        assert isinstance(ml[0], nn.Identity)
        del ml[2]
        del ml[-1]
        assert _names(ml) == [("0", "Identity"), ("1", "ELU"), ("2", "Tanh"), ("3", "Sigmoid")]
        del ml[1:3]
        assert _names(ml) == [("0", "Identity"), ("1", "Sigmoid")]
        ml += [nn.ReLU()]
        assert _names(ml)[-1] == ("2", "ReLU")
        assert len(list(nn.ModuleList().parameters())) == 0
        assert len(list(nn.ModuleList([nn.Linear(2, 2)] * 2).parameters())) == 2
    assert repr(enn.ModuleList([enn.ReLU(), enn.Linear(2, 2)])) == \
        repr(torch.nn.ModuleList([torch.nn.ReLU(), torch.nn.Linear(2, 2)]))


def test_module_dict_ops():
    for nn in (enn, torch.nn):
        md = nn.ModuleDict({"a": nn.ReLU(), "b": nn.Linear(2, 2)})
        md["c"] = nn.Tanh()
        md.update({"d": nn.GELU()})
        md.update([("e", nn.ELU())])
        assert list(md.keys()) == list(md) == ["a", "b", "c", "d", "e"] and len(md) == 5
        assert [type(m).__name__ for m in md.values()] == ["ReLU", "Linear", "Tanh", "GELU", "ELU"]
        assert [k for k, _ in md.items()] == list(md.keys())
        assert "b" in md and "z" not in md and md.b is md["b"]
        assert isinstance(md.pop("c"), nn.Tanh) and "c" not in md
        del md["a"]
        assert _names(md) == [("b", "Linear"), ("d", "GELU"), ("e", "ELU")]
        with pytest.raises(KeyError):
            md["zz"]
        assert [n for n, _ in md.named_parameters()] == ["b.weight", "b.bias"]
        md.clear()
        assert len(md) == 0
    assert repr(enn.ModuleDict({"x": enn.ReLU()})) == \
        repr(torch.nn.ModuleDict({"x": torch.nn.ReLU()}))


# ---------------------------------------------------------------- Parameter and attributes

def test_parameter_basics():
    src = ember.from_numpy(np.array([1.0, 2.0], dtype=np.float32))
    p = enn.Parameter(src)
    assert isinstance(p, ember.Tensor) and isinstance(p, enn.Parameter)
    assert p.requires_grad and p.is_leaf and p.grad_fn is None
    assert repr(p) == repr(torch.nn.Parameter(torch.tensor([1.0, 2.0])))
    # the same memory as its source
    assert p.data_ptr() == src.data_ptr()
    src[0] = 5.0
    assert p[0].item() == 5.0
    q = enn.Parameter(ember.zeros(2, dtype=ember.float64), requires_grad=False)
    assert not q.requires_grad
    assert repr(q) == repr(torch.nn.Parameter(torch.zeros(2, dtype=torch.float64),
                                              requires_grad=False)).replace("torch.", "ember.")
    assert tuple(enn.Parameter().shape) == tuple(torch.nn.Parameter().shape) == (0,)
    r = copy.deepcopy(p)
    assert isinstance(r, enn.Parameter) and r.data_ptr() != p.data_ptr()
    assert r.numpy().tolist() == [5.0, 2.0]


def test_attribute_assignment_rules():
    for nn, lib in ((enn, ember), (torch.nn, torch)):
        m = nn.Linear(2, 3)
        with pytest.raises(TypeError, match="cannot assign"):
            m.weight = lib.zeros(3, 2)  # a plain tensor where a Parameter lives
        m.bias = None
        assert [n for n, _ in m.named_parameters()] == ["weight"]
        m.bias = nn.Parameter(lib.zeros(3))
        assert [n for n, _ in m.named_parameters()] == ["weight", "bias"]
        m.register_buffer("buf", lib.zeros(1))
        m.buf = lib.ones(2)  # a buffer takes any tensor
        assert tuple(m.buf.shape) == (2,)
        with pytest.raises(TypeError):
            m.buf = 3
        m.sub = nn.ReLU()
        with pytest.raises(TypeError):
            m.sub = 3
        m.sub = None
        assert "sub" not in dict(m.named_children())
        m.note = "plain attribute"
        assert m.note == "plain attribute" and "note" not in m.state_dict()
        with pytest.raises(KeyError):
            m.register_buffer("note", lib.zeros(1))
        with pytest.raises(KeyError):
            m.register_parameter("a.b", None)
        with pytest.raises(TypeError):
            m.register_parameter("p", lib.zeros(1))
        del m.buf
        assert "buf" not in m.state_dict()
    e_msg, t_msg = [None], [None]
    for nn, out in ((enn, e_msg), (torch.nn, t_msg)):
        with pytest.raises(AttributeError) as exc:
            nn.Linear(2, 3).foo
        out[0] = str(exc.value)
    assert e_msg == t_msg == ["'Linear' object has no attribute 'foo'"]


def test_assignment_before_init():
    for nn, lib in ((enn, ember), (torch.nn, torch)):
        class Early(nn.Module):
            def __init__(self):
                self.w = nn.Parameter(lib.zeros(1))
                super().__init__()
        with pytest.raises(AttributeError):
            Early()


def test_non_persistent_buffer():
    for nn, lib in ((enn, ember), (torch.nn, torch)):
        m = nn.Module()
        m.register_buffer("a", lib.zeros(1))
        m.register_buffer("b", lib.zeros(2), persistent=False)
        m.register_buffer("c", None)
        assert [n for n, _ in m.named_buffers()] == ["a", "b"]
        assert list(m.state_dict()) == ["a"]
        assert m.load_state_dict({"a": lib.ones(1)}).missing_keys == []
        with pytest.raises(RuntimeError, match="Unexpected"):
            m.load_state_dict({"a": lib.ones(1), "b": lib.ones(2)})


# ---------------------------------------------------------------- hooks

def test_forward_hooks():
    results = {}
    for nn, lib in ((enn, ember), (torch.nn, torch)):
        log = []
        m = nn.Linear(2, 2)
        h1 = m.register_forward_pre_hook(lambda mod, args: log.append(("pre", len(args))))
        h2 = m.register_forward_pre_hook(lambda mod, args: args[0] * 0)  # a bare value
        h3 = m.register_forward_hook(lambda mod, args, out: log.append(("post", tuple(out.shape))))
        h4 = m.register_forward_hook(lambda mod, args, out: out + 100)
        x = lib.ones(3, 2)
        with torch.no_grad(), ember.no_grad():
            y = m(x)
        bias = m.bias.detach().numpy()
        np.testing.assert_allclose(y.numpy(), np.broadcast_to(bias + 100, (3, 2)), rtol=1e-6)
        for h in (h2, h4):
            h.remove()
        h4.remove()  # twice is harmless
        with torch.no_grad(), ember.no_grad():
            y = m(x)
        assert not np.allclose(y.numpy(), bias + 100)
        h1.remove()
        h3.remove()
        m(x)
        results[lib.__name__] = log
    assert results["ember"] == results["torch"] == [("pre", 1), ("post", (3, 2))] * 2


def test_hook_sees_submodule_output():
    captured = {}
    model = make_model(ember)
    handle = model.features[0].bn.register_forward_hook(
        lambda mod, args, out: captured.update(shape=tuple(out.shape)))
    model(ember.from_numpy(X.copy()))
    handle.remove()
    assert captured["shape"] == (2, 4, 4, 4)


# ---------------------------------------------------------------- clip_grad

@pytest.mark.parametrize("norm_type", [2.0, 1.0, math.inf, 3])
@pytest.mark.parametrize("max_norm", [0.5, 1e3])
def test_clip_grad_norm(norm_type, max_norm):
    rng = np.random.default_rng(0)
    grads = [rng.standard_normal(s) for s in ((3, 4), (5,), (2, 2, 2))]
    ep = [enn.Parameter(ember.zeros(*g.shape, dtype=ember.float64)) for g in grads]
    tp = [torch.nn.Parameter(torch.zeros(*g.shape, dtype=torch.float64)) for g in grads]
    for g, e, t in zip(grads, ep, tp):
        e.grad = ember.from_numpy(g.copy())
        t.grad = torch.from_numpy(g.copy())
    en = enn.utils.clip_grad_norm_(iter(ep), max_norm, norm_type)
    tn = torch.nn.utils.clip_grad_norm_(iter(tp), max_norm, norm_type)
    np.testing.assert_allclose(en.item(), tn.item(), rtol=1e-10)
    for e, t in zip(ep, tp):
        np.testing.assert_allclose(e.grad.numpy(), t.grad.numpy(), rtol=1e-10)
    enn.utils.clip_grad_value_(ep, 0.1)
    torch.nn.utils.clip_grad_value_(tp, 0.1)
    for e, t in zip(ep, tp):
        np.testing.assert_allclose(e.grad.numpy(), t.grad.numpy(), rtol=1e-10)


# ---------------------------------------------------------------- nn.init

def _uniform_like(e, t, bound):
    """ember's and torch's draws fill [-bound, bound] the same way."""
    ev, tv = _np(e).ravel(), _np(t).ravel()
    n = ev.size
    assert np.abs(ev).max() <= bound * (1 + 1e-6)
    assert np.abs(tv).max() <= bound * (1 + 1e-6)
    if n >= 10_000:
        assert np.abs(ev).max() > 0.99 * bound
        # uniform: std bound/sqrt(3); its mean's std is that / sqrt(n), and
        # the relative error of a sample std about 0.45 / sqrt(n)
        assert abs(ev.mean()) < 6 * bound / math.sqrt(3 * n)
        assert abs(ev.std() / tv.std() - 1) < 4.5 / math.sqrt(n)
        assert abs(ev.std() / (bound / math.sqrt(3)) - 1) < 3 / math.sqrt(n)


def test_linear_default_init():
    ember.manual_seed(0)
    torch.manual_seed(0)
    em, tm = enn.Linear(1000, 1000), torch.nn.Linear(1000, 1000)
    bound = 1 / math.sqrt(1000)
    _uniform_like(em.weight, tm.weight, bound)
    _uniform_like(em.bias, tm.bias, bound)
    assert _dt(em.weight) == "float32" and em.weight.grad_fn is None and em.weight.is_leaf


def test_conv2d_default_init():
    em, tm = enn.Conv2d(64, 128, 3), torch.nn.Conv2d(64, 128, 3)
    bound = 1 / math.sqrt(64 * 9)
    _uniform_like(em.weight, tm.weight, bound)
    _uniform_like(em.bias, tm.bias, bound)
    em, tm = enn.Conv2d(64, 128, 3, groups=4), torch.nn.Conv2d(64, 128, 3, groups=4)
    _uniform_like(em.weight, tm.weight, 1 / math.sqrt(16 * 9))


def test_embedding_default_init():
    em, tm = enn.Embedding(1000, 300), torch.nn.Embedding(1000, 300)
    ev, tv = _np(em.weight), _np(tm.weight)
    assert abs(ev.mean()) < 0.01 and abs(ev.std() - 1) < 0.01
    assert abs(ev.std() / tv.std() - 1) < 0.02
    em = enn.Embedding(10, 4, padding_idx=3)
    assert not em.weight[3].numpy().any() and em.weight[2].numpy().all()


def test_multihead_attention_default_init():
    em, tm = enn.MultiheadAttention(512, 8), torch.nn.MultiheadAttention(512, 8)
    _uniform_like(em.in_proj_weight, tm.in_proj_weight, math.sqrt(6 / (512 + 3 * 512)))
    _uniform_like(em.out_proj.weight, tm.out_proj.weight, 1 / math.sqrt(512))
    assert not em.in_proj_bias.numpy().any() and not em.out_proj.bias.numpy().any()


def test_norm_default_init():
    for em, tm in ((enn.LayerNorm((3, 4)), torch.nn.LayerNorm((3, 4))),
                   (enn.BatchNorm2d(5), torch.nn.BatchNorm2d(5))):
        for (n, e), (_, t) in zip(list(em.state_dict().items()), list(tm.state_dict().items())):
            np.testing.assert_array_equal(_np(e), _np(t), err_msg=n)
            assert _dt(e) == _dt(t)


def test_init_returns_tensor_without_history():
    p = enn.Parameter(ember.zeros(20, 30))
    for fn in (lambda t: init.uniform_(t, -1, 1), lambda t: init.normal_(t, 2, 3),
               lambda t: init.xavier_uniform_(t), lambda t: init.kaiming_normal_(t),
               lambda t: init.trunc_normal_(t), lambda t: init.constant_(t, 2.0),
               init.zeros_, init.ones_, init.eye_, init.xavier_normal_, init.kaiming_uniform_):
        assert fn(p) is p
        assert p.is_leaf and p.grad_fn is None and p.requires_grad


def test_init_exact_fills():
    for name, args in (("zeros_", ()), ("ones_", ()), ("constant_", (1.5,)), ("eye_", ())):
        e, t = ember.empty(3, 4), torch.empty(3, 4)
        getattr(init, name)(e, *args)
        getattr(torch.nn.init, name)(t, *args)
        np.testing.assert_array_equal(e.numpy(), t.numpy())


def _stats(fill, shape=(400, 600)):
    e, t = ember.empty(*shape), torch.empty(*shape)
    fill(init, e)
    fill(torch.nn.init, t)
    return e.numpy().ravel(), t.numpy().ravel()


@pytest.mark.parametrize("kw", [dict(), dict(mode="fan_out"), dict(nonlinearity="relu"),
                                dict(a=0.2, mode="fan_out", nonlinearity="leaky_relu")], ids=str)
def test_kaiming_normal(kw):
    e, t = _stats(lambda m, x: m.kaiming_normal_(x, **kw))
    fan = 600 if kw.get("mode", "fan_in") == "fan_in" else 400
    gain = torch.nn.init.calculate_gain(kw.get("nonlinearity", "leaky_relu"), kw.get("a", 0))
    std = gain / math.sqrt(fan)
    assert abs(e.std() / std - 1) < 0.01 and abs(e.std() / t.std() - 1) < 0.015
    assert abs(e.mean()) < 6 * std / math.sqrt(e.size)


@pytest.mark.parametrize("kw", [dict(), dict(mode="fan_out", nonlinearity="relu")], ids=str)
def test_kaiming_uniform(kw):
    e, t = _stats(lambda m, x: m.kaiming_uniform_(x, **kw))
    fan = 600 if kw.get("mode", "fan_in") == "fan_in" else 400
    gain = math.sqrt(2.0)
    _uniform_like(ember.from_numpy(e), torch.from_numpy(t), gain * math.sqrt(3 / fan))


@pytest.mark.parametrize("gain", [1.0, 5 / 3])
def test_xavier(gain):
    e, t = _stats(lambda m, x: m.xavier_uniform_(x, gain=gain), (300, 200, 3))
    bound = gain * math.sqrt(6 / (200 * 3 + 300 * 3))
    _uniform_like(ember.from_numpy(e), torch.from_numpy(t), bound)
    e, t = _stats(lambda m, x: m.xavier_normal_(x, gain=gain))
    std = gain * math.sqrt(2 / 1000)
    assert abs(e.std() / std - 1) < 0.01 and abs(e.std() / t.std() - 1) < 0.015


@pytest.mark.parametrize("mean,std,a,b", [(0.0, 1.0, -2.0, 2.0), (1.0, 2.0, -1.0, 4.0),
                                          (0.0, 0.02, -0.04, 0.04), (0.0, 1.0, 1.0, 3.0)])
def test_trunc_normal(mean, std, a, b):
    e, t = _stats(lambda m, x: m.trunc_normal_(x, mean, std, a, b))
    assert e.min() >= a and e.max() <= b
    assert abs(e.mean() - t.mean()) < 0.02 * t.std()
    assert abs(e.std() / t.std() - 1) < 0.015
    # both tails reach the bounds on 240000 draws
    width = b - a
    assert e.min() < a + 0.02 * width and e.max() > b - 0.02 * width


def test_uniform_normal():
    e, t = _stats(lambda m, x: m.uniform_(x, -3.0, 1.0))
    assert e.min() >= -3.0 and e.max() <= 1.0 and abs(e.mean() + 1.0) < 0.015
    assert abs(e.std() / t.std() - 1) < 0.01
    e, t = _stats(lambda m, x: m.normal_(x, 2.0, 0.5))
    assert abs(e.mean() - 2.0) < 0.005 and abs(e.std() / 0.5 - 1) < 0.01


def test_calculate_gain():
    for nl in ("linear", "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d",
               "conv_transpose3d", "sigmoid", "tanh", "relu", "leaky_relu", "selu"):
        assert init.calculate_gain(nl) == torch.nn.init.calculate_gain(nl), nl
    for param in (0, 0.2, 1, 3.5):
        assert init.calculate_gain("leaky_relu", param) == \
            torch.nn.init.calculate_gain("leaky_relu", param)
    for bad in (("gelu",), ("leaky_relu", True), ("leaky_relu", "x")):
        with pytest.raises(ValueError):
            torch.nn.init.calculate_gain(*bad)
        with pytest.raises(ValueError):
            init.calculate_gain(*bad)


def test_fan_errors():
    for name in ("xavier_uniform_", "kaiming_normal_", "xavier_normal_"):
        with pytest.raises(ValueError):
            getattr(torch.nn.init, name)(torch.empty(5))
        with pytest.raises(ValueError):
            getattr(init, name)(ember.empty(5))
    with pytest.raises(ValueError):
        torch.nn.init.kaiming_uniform_(torch.empty(3, 4), mode="fan_avg")
    with pytest.raises(ValueError):
        init.kaiming_uniform_(ember.empty(3, 4), mode="fan_avg")
    with pytest.raises(ValueError):
        init.eye_(ember.empty(2, 2, 2))


def test_to_keeps_parameter_identity_for_optimizers_built_before():
    def run(m):
        model = m.nn.Linear(3, 2)
        with m.no_grad():
            model.weight.copy_(m.tensor(np.arange(6.0).reshape(2, 3) / 10))
            model.bias.zero_()
        w = model.weight
        opt = m.optim.SGD(model.parameters(), lr=0.1)
        model.double()
        assert model.weight is w and w.dtype == m.float64 and isinstance(w, m.nn.Parameter)
        model(m.ones(4, 3, dtype=m.float64)).sum().backward()
        opt.step()
        return w.detach().numpy().copy()
    np.testing.assert_allclose(run(ember), run(torch), rtol=1e-12)
    assert str(ember.nn.Parameter(ember.ones(1))).startswith("Parameter containing:")


def test_batchnorm_state_dict_without_num_batches_tracked_loads():
    for m, nn_ in ((ember, enn), (torch, torch.nn)):
        bn = nn_.BatchNorm2d(3)
        sd = {k: v for k, v in bn.state_dict().items() if k != "num_batches_tracked"}
        assert bn.load_state_dict(sd).missing_keys == []
        assert int(bn.num_batches_tracked) == 0
        assert "num_batches_tracked" not in sd  # the caller's dict is left alone
