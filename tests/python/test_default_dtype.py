"""set_default_dtype: the float dtype of tensors made without one and of
float results of integer inputs, as PyTorch's, and a guard for compiled
functions (a trace bakes its dtypes in, so another default traces anew)."""

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")


@pytest.fixture
def restore_default():
    yield
    ember.set_default_dtype(ember.float32)
    torch.set_default_dtype(torch.float32)


MAKERS = {
    "tensor of floats": lambda m: m.tensor([1.5, 2.0]),
    "0-d tensor": lambda m: m.tensor(2.5),
    "as_tensor": lambda m: m.as_tensor([1.0]),
    "tensor of ints": lambda m: m.tensor([1, 2]),
    "tensor of float32 numpy": lambda m: m.tensor(np.ones(2, dtype=np.float32)),
    "from_numpy float32": lambda m: m.from_numpy(np.ones(2, dtype=np.float32)),
    "zeros": lambda m: m.zeros(2),
    "ones": lambda m: m.ones(2, 3),
    "empty": lambda m: m.empty(2),
    "full of a float": lambda m: m.full((2,), 1.5),
    "full of an int": lambda m: m.full((2,), 3),
    "rand": lambda m: m.rand(2),
    "randn": lambda m: m.randn(2),
    "eye": lambda m: m.eye(2),
    "arange of floats": lambda m: m.arange(0.0, 1.0, 0.5),
    "arange of ints": lambda m: m.arange(3),
    "linspace": lambda m: m.linspace(0, 1, 3),
    "logspace": lambda m: m.logspace(0, 1, 3),
    "int / int": lambda m: m.arange(3) / 2,
    "int * float": lambda m: m.ones(2, dtype=m.int32) * 1.5,
    "sqrt of int": lambda m: m.tensor(3).sqrt(),
    "mean of float32": lambda m: m.ones(2, dtype=m.float32).mean(),
    "float()": lambda m: m.tensor([1, 2]).float(),
    "new_zeros": lambda m: m.zeros(2, dtype=m.float32).new_zeros(2),
    "Linear weight": lambda m: m.nn.Linear(2, 2).weight,
    "Conv2d weight": lambda m: m.nn.Conv2d(1, 1, 2).weight,
    "square mask": lambda m: m.nn.Transformer.generate_square_subsequent_mask(3),
    "erf of int": lambda m: m.special.erf(m.arange(3)),
    "dtype=float": lambda m: m.ones(2, dtype=float),
}


@pytest.mark.parametrize("default", ["float64", "float16", "bfloat16"])
@pytest.mark.parametrize("what", sorted(MAKERS))
def test_made_tensors_take_the_default_like_torch(what, default, restore_default):
    ember.set_default_dtype(getattr(ember, default))
    torch.set_default_dtype(getattr(torch, default))
    assert ember.get_default_dtype() == getattr(ember, default)
    got = MAKERS[what](ember)
    try:
        want = str(MAKERS[what](torch).dtype).split(".")[-1]
    except RuntimeError as e:  # PyTorch 1.13's CPU build lacks some half kernels
        assert "not implemented for" in str(e)
        want = default
    assert str(got.dtype).split(".")[-1] == want


def test_only_float_types_can_be_the_default(restore_default):
    for m in (ember, torch):
        with pytest.raises(TypeError, match="floating-point"):
            m.set_default_dtype(m.int64)
        assert m.get_default_dtype() == m.float32


def test_printing_names_dtypes_other_than_the_default(restore_default):
    for default in ("float64", "float32"):
        ember.set_default_dtype(getattr(ember, default))
        torch.set_default_dtype(getattr(torch, default))
        for dt in ("float32", "float64", "float16", "int64"):
            e = ember.ones(2, dtype=getattr(ember, dt))
            t = torch.ones(2, dtype=getattr(torch, dt))
            assert repr(e).replace("ember.", "torch.") == repr(t)
            assert repr(e[:0]).replace("ember.", "torch.") == repr(t[:0])


def test_compiled_functions_guard_on_the_default(restore_default):
    @ember.compile
    def f(x):
        return (x * 1.5).exp() + ember.ones(3)

    x = ember.arange(3)
    assert f(x).dtype == ember.float32
    ember.set_default_dtype(ember.float64)
    got = f(x)
    assert got.dtype == ember.float64
    np.testing.assert_allclose(got.numpy(), np.exp(np.arange(3) * 1.5) + 1, rtol=1e-15)
    assert f(x).dtype == ember.float64
    ember.set_default_dtype(ember.float32)
    assert f(x).dtype == ember.float32
    stats = f._stats()
    # one trace per default; the repeat calls of each run compiled
    assert stats["traces"] == 2 and stats["compiled_calls"] == 2 and stats["eager_calls"] == 0, stats
