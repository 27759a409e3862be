"""ember.compile(model): a module wrapper whose calls run compiled, sharing
the model's parameters, with train()/eval() as guards."""

import numpy as np
import pytest

import ember

nn = ember.nn
pytestmark = pytest.mark.filterwarnings("ignore:ember.compile")


def model():
    ember.manual_seed(0)
    return nn.Sequential(nn.Linear(6, 16), nn.GELU(), nn.Dropout(0.4), nn.LayerNorm(16),
                         nn.Linear(16, 3))


def test_compiled_module_matches_eager_in_both_modes():
    m = model()
    cm = ember.compile(m)
    x = ember.randn(5, 6)
    with ember.no_grad():
        for mode in ("eval", "train", "eval", "train"):
            getattr(cm, mode)()
            assert m.training == (mode == "train")
            ember.manual_seed(7)
            got = [cm(x).numpy().copy() for _ in range(3)]
            ember.manual_seed(7)
            want = [m(x).numpy().copy() for _ in range(3)]
            for g, w in zip(got, want):
                np.testing.assert_array_equal(g, w)
    specs = cm._specializations()
    assert len(specs) == 2 and all(s["backend"] != "eager" for s in specs)
    assert cm._stats()["hits"] >= 8


def test_a_submodule_mode_is_guarded_too():
    m = model()
    cm = ember.compile(m).eval()
    x = ember.randn(2, 6)
    with ember.no_grad():
        cm(x)
        m[2].train()  # only the dropout: a new specialisation, not a stale one
        ember.manual_seed(3)
        got = cm(x)
        ember.manual_seed(3)
        want = m(x)
    np.testing.assert_array_equal(got.numpy(), want.numpy())
    assert len(cm._specializations()) == 2


def test_shares_parameters_and_state():
    m = model()
    cm = ember.compile(m)
    assert [p is q for p, q in zip(cm.parameters(), m.parameters())] == [True] * 6
    assert list(cm.state_dict()) == ["_orig_mod." + k for k in m.state_dict()]
    m.note = "hello"
    assert cm._orig_mod is m and cm.note == "hello"  # attributes reach the model
    x = ember.randn(2, 6)
    with ember.no_grad():
        cm.eval()
        before = cm(x)
        cm(x)
        m[4].bias.add_(1.0)  # parameters are captured by reference
        after = cm(x)
    np.testing.assert_allclose((after - before).numpy(), np.ones((2, 3)), rtol=1e-6)


def test_with_grad_it_trains_eagerly():
    m = model()
    cm = ember.compile(m)
    loss = cm(ember.randn(4, 6)).sum()
    loss.backward()
    assert all(p.grad is not None for p in m.parameters())


def test_a_captured_tensor_whose_data_changes_is_a_guard_miss():
    w = ember.randn(3)

    @ember.compile
    def f(x):
        return x * w
    x = ember.randn(3)
    f(x)
    f(x)
    w.data = ember.randn(3, dtype=ember.float64)  # what model.double() does to parameters
    r = f(x)
    assert r.dtype == ember.float64
    np.testing.assert_array_equal(r.numpy(), (x * w).numpy())
    assert f._stats()["misses"] == 2
    m = model()
    cm = ember.compile(m).eval()
    with ember.no_grad():
        cm(ember.randn(2, 6))
        m.double()
        x = ember.randn(2, 6, dtype=ember.float64)
        np.testing.assert_array_equal(cm(x).numpy(), m(x).numpy())
