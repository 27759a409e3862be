"""dtypes and promotion, creation, conversions and printing against PyTorch."""

import subprocess
import sys

import numpy as np
import pytest

import ember
from conftest import subprocess_env
from torchdiff import ALL_DTYPES, Arg, arr, check, raises_like_torch, torch

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")

# ---- dtypes ----


@pytest.mark.parametrize("name", ALL_DTYPES)
def test_dtype_objects(name):
    dt = getattr(ember, name)
    assert repr(dt) == f"ember.{name}" and str(dt) == f"ember.{name}"
    if torch is not None:
        tdt = getattr(torch, name)
        assert dt.is_floating_point == tdt.is_floating_point
        assert dt.itemsize == torch.tensor([], dtype=tdt).element_size()


def test_dtype_aliases_and_default():
    assert ember.float is ember.float32 and ember.double is ember.float64
    assert ember.half is ember.float16 and ember.long is ember.int64
    assert ember.int is ember.int32 and ember.short is ember.int16
    assert ember.get_default_dtype() is ember.float32
    assert ember.zeros(2).dtype is ember.float32 and ember.tensor([1.5]).dtype is ember.float32


@pytest.mark.parametrize("a", ALL_DTYPES)
@pytest.mark.parametrize("b", ALL_DTYPES)
def test_promote_types_and_can_cast(a, b):
    if torch is None:
        pytest.skip("PyTorch is not installed")
    ea, eb, ta, tb = getattr(ember, a), getattr(ember, b), getattr(torch, a), getattr(torch, b)
    assert repr(ember.promote_types(ea, eb)).split(".")[1] == str(torch.promote_types(ta, tb)).split(".")[1]
    assert ember.can_cast(ea, eb) == torch.can_cast(ta, tb)


@pytest.mark.parametrize("scalar", [1, 2.5, True, -3])
@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_result_type_with_scalars(dtype, scalar):
    check(lambda m, x: m.result_type(x, scalar), arr(dtype, (2,)))
    check(lambda m, x: m.result_type(x, m.tensor(scalar)), arr(dtype, (2,)))


CONVERSIONS = ["float", "double", "half", "bfloat16", "long", "int", "short", "char", "byte",
               "bool"]


@pytest.mark.parametrize("src", ALL_DTYPES)
@pytest.mark.parametrize("method", CONVERSIONS)
def test_conversion_methods(method, src):
    values = Arg(np.array([0.0, 1.0, -1.5, 2.7, 100.0, -0.0, 255.0]), src) if src != "bool" \
        else arr("bool", (7,))
    if src == "uint8":
        values = Arg(np.array([0, 1, 2, 3, 100, 200, 255]), src)
    check(lambda m, x: getattr(x, method)(), values)


@pytest.mark.parametrize("dst", ALL_DTYPES)
def test_to_dtype(dst):
    check(lambda m, x: x.to(getattr(m, dst)), arr("float32", (3, 4)))
    check(lambda m, x: x.to(dtype=getattr(m, dst)), arr("int64", (3, 4), view=lambda m, t: t.t()))
    check(lambda m, x: x.type_as(m.zeros(1, dtype=getattr(m, dst))), arr("float64", (3,)))


def test_to_same_dtype_returns_self_and_copy_forces():
    x = ember.ones(3)
    assert x.to(ember.float32) is x
    assert x.to("cpu") is x
    y = x.to(ember.float32, copy=True)
    assert y is not x and y.data_ptr() != x.data_ptr()


def test_float_to_int_conversion_truncates():
    check(lambda m, x: x.long(), Arg(np.array([2.9, -2.9, 0.5, -0.5]), "float32"))
    check(lambda m, x: x.to(m.uint8), Arg(np.array([0.0, 1.9, 255.0, 100.5]), "float64"))


# ---- creation ----

TENSOR_DATA = [
    ([1, 2, 3], None), ([1.0, 2, 3], None), ([True, False], None), ([[1, 2], [3, 4]], None),
    (3.5, None), (7, None), (True, None), ([], None), ([[], []], None), ([1, 2.5, True], None),
    ([1, 2], "float64"), ([1.7, -1.7], "int32"), ([300, -1], "uint8"), ([0.1, 2.0], "bfloat16"),
    ([1, 0, 2], "bool"), ((1, 2), "int8"), ([[1.5], [2.5]], "float16"),
]


@pytest.mark.parametrize("data,dtype", TENSOR_DATA, ids=repr)
def test_tensor_from_python_data(data, dtype):
    check(lambda m: m.tensor(data) if dtype is None else m.tensor(data, dtype=getattr(m, dtype)))


def test_tensor_from_mixed_and_nested_tensors():
    check(lambda m: m.tensor([m.tensor(1.5), 2]))
    check(lambda m: m.tensor([[m.tensor(1), 2], [3, 4]]))
    check(lambda m, x: m.tensor(x), arr("int32", (2, 3)))


def test_tensor_errors_like_torch():
    raises_like_torch(lambda m: m.tensor([[1, 2], [3]]))
    with pytest.raises(TypeError, match="str"):  # (PyTorch 1.13: ValueError "too many dimensions")
        ember.tensor(["a"])
    raises_like_torch(lambda m: m.tensor([1, [2]]))
    raises_like_torch(lambda m: m.tensor(2**64))


def test_tensor_from_numpy_copies_and_as_tensor_shares():
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    t = ember.tensor(a)
    a[0, 0] = 100
    assert t[0, 0].item() == 0
    s = ember.as_tensor(a)
    a[0, 1] = 200
    assert s[0, 1].item() == 200
    assert ember.as_tensor(s) is s
    assert ember.as_tensor(s, dtype=ember.float64).dtype is ember.float64
    assert ember.as_tensor([1, 2]).dtype is ember.int64
    assert ember.asarray(a).data_ptr() == s.data_ptr()


FACTORIES = [
    ("zeros", lambda m: m.zeros(2, 3)), ("zeros tuple", lambda m: m.zeros((2, 3))),
    ("zeros list int", lambda m: m.zeros([4], dtype=m.int32)), ("zeros 0-d", lambda m: m.zeros(())),
    ("ones", lambda m: m.ones(3, dtype=m.bfloat16)), ("ones empty", lambda m: m.ones(0, 3)),
    ("full float", lambda m: m.full((2, 2), 1.5)), ("full int", lambda m: m.full((2,), 7)),
    ("full bool", lambda m: m.full((2,), True)), ("full dtype", lambda m: m.full([3], 2, dtype=m.float16)),
    ("full big int", lambda m: m.full((1,), 2**53 + 1)),
    ("full float into int32", lambda m: m.full((3,), -2.7, dtype=m.int32)),
    ("full float into uint8", lambda m: m.full((3,), 7.9, dtype=m.uint8)),
    ("empty shape", lambda m: m.empty(2, 3).shape), ("empty dtype", lambda m: m.empty(2, dtype=m.int8).dtype),
    ("zeros_like", lambda m: m.zeros_like(m.ones(2, 3, dtype=m.int16))),
    ("ones_like dtype", lambda m: m.ones_like(m.ones(2), dtype=m.float64)),
    ("full_like", lambda m: m.full_like(m.ones(2, 2), 3.25)),
    ("full_like int", lambda m: m.full_like(m.ones(2, dtype=m.int64), 2.7)),
    ("empty_like", lambda m: m.empty_like(m.ones(2, 5, dtype=m.uint8)).shape),
    ("arange int", lambda m: m.arange(5)), ("arange float", lambda m: m.arange(0, 1, 0.25)),
    ("arange neg", lambda m: m.arange(5, -3, -2)), ("arange dtype", lambda m: m.arange(4, dtype=m.float64)),
    ("arange float end", lambda m: m.arange(2.5)), ("arange empty", lambda m: m.arange(3, 3)),
    ("arange 0.1 steps", lambda m: m.arange(1, 2.5, 0.1)),
    ("linspace", lambda m: m.linspace(0, 1, 5)), ("linspace one", lambda m: m.linspace(2, 3, 1)),
    ("linspace zero", lambda m: m.linspace(2, 3, 0)), ("linspace int", lambda m: m.linspace(0, 10, 4, dtype=m.int64)),
    ("linspace down", lambda m: m.linspace(3, -3, 7, dtype=m.float64)),
    ("eye", lambda m: m.eye(3)), ("eye rect", lambda m: m.eye(2, 4, dtype=m.int32)),
    ("eye zero", lambda m: m.eye(0)),
]


@pytest.mark.parametrize("name,fn", FACTORIES, ids=[c[0] for c in FACTORIES])
def test_factories(name, fn):
    check(fn)


def test_factory_errors_like_torch():
    raises_like_torch(lambda m: m.zeros(-1))
    raises_like_torch(lambda m: m.arange(0, 5, 0))
    raises_like_torch(lambda m: m.arange(0, 5, -1))
    raises_like_torch(lambda m: m.linspace(0, 1, -1))
    raises_like_torch(lambda m: m.randint(5, 5, (2,)))
    raises_like_torch(lambda m: m.eye(-1))
    raises_like_torch(lambda m: m.randperm(-1))
    raises_like_torch(lambda m: m.zeros(2, 3.5))


def test_random_factories_shapes_dtypes_and_ranges():
    ember.manual_seed(0)
    r = ember.rand(1000, dtype=ember.float64)
    assert r.dtype is ember.float64 and 0 <= r.min().item() and r.max().item() < 1
    n = ember.randn(20000)
    assert abs(n.mean().item()) < 0.05 and abs(n.std().item() - 1) < 0.05
    i = ember.randint(3, 7, (5000,))
    assert i.dtype is ember.int64 and i.min().item() == 3 and i.max().item() == 6
    i2 = ember.randint(10, (2, 3), dtype=ember.int16)
    assert i2.dtype is ember.int16 and tuple(i2.shape) == (2, 3)
    p = ember.randperm(50)
    assert sorted(p.tolist()) == list(range(50)) and p.dtype is ember.int64
    assert ember.rand_like(ember.ones(2, 3, dtype=ember.float16)).dtype is ember.float16
    assert ember.randn_like(ember.ones(4)).shape == (4,)
    assert 0 <= ember.randint_like(ember.ones(3), 5).min().item()


def _draws():
    ember.manual_seed(1234)
    return [ember.rand(1000).tolist(), ember.randn(3, 333).tolist(),
            ember.randint(0, 100, (777,)).tolist(), ember.randperm(100).tolist(),
            ember.rand(5, dtype=ember.bfloat16).float().tolist()]


def test_manual_seed_repeats_and_thread_count_does_not_matter():
    a = _draws()
    assert a == _draws()
    old = ember.get_num_threads()
    try:
        ember.set_num_threads(1)
        b = _draws()
    finally:
        ember.set_num_threads(old)
    assert a == b
    ember.manual_seed(1235)
    assert ember.rand(1000).tolist() != a[0]


def test_manual_seed_same_across_processes():
    code = ("import ember; ember.manual_seed(7); "
            "print(ember.randn(5).tolist(), ember.randint(0, 9, (5,)).tolist())")
    outs = {subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                           env=subprocess_env(**env)).stdout
            for env in ({}, {"OMP_NUM_THREADS": "1"})}
    assert len(outs) == 1


# ---- Python-level conversions ----

def test_item_and_python_numbers():
    for dtype, v in [("float32", 2.5), ("float64", -1.25), ("float16", 0.5), ("bfloat16", 3.0),
                     ("int64", -7), ("int32", 9), ("int16", -3), ("int8", 5), ("uint8", 200),
                     ("bool", True)]:
        check(lambda m: m.tensor(v, dtype=getattr(m, dtype)).item())
        check(lambda m: m.tensor([v], dtype=getattr(m, dtype)).item())
        check(lambda m: float(m.tensor(v, dtype=getattr(m, dtype))))
        check(lambda m: int(m.tensor(v, dtype=getattr(m, dtype))))
        check(lambda m: bool(m.tensor(v, dtype=getattr(m, dtype))))


def test_tolist():
    for dtype in ALL_DTYPES:
        check(lambda m, x: x.tolist(), arr(dtype, (2, 3)))
        check(lambda m, x: x.tolist(), arr(dtype, ()))
        check(lambda m, x: x.t().tolist(), arr(dtype, (2, 3)))


def test_ambiguous_truth_and_item_errors():
    raises_like_torch(lambda m: bool(m.ones(2)), match="ambiguous")
    raises_like_torch(lambda m: m.ones(2).item())
    raises_like_torch(lambda m: float(m.ones(0)))
    raises_like_torch(lambda m: int(m.ones(3)))
    check(lambda m: bool(m.zeros(1, 1)))
    check(lambda m: [1, 2, 3][m.tensor(1)])  # __index__


def test_len_and_misc_methods():
    check(lambda m, x: len(x), arr("float32", (3, 4)))
    raises_like_torch(lambda m, x: len(x), arr("float32", ()))
    check(lambda m, x: (x.dim(), x.ndim, x.numel(), x.nelement(), x.element_size(),
                        x.is_floating_point(), x.is_contiguous(), x.t().is_contiguous()),
          arr("float16", (3, 4)))
    check(lambda m, x: (x.size(), x.size(1), x.size(-1), x.shape, x.stride(), x.t().stride()),
          arr("int8", (3, 4)))
    check(lambda m, x: m.numel(x), arr("float32", (3, 4)))
    check(lambda m, x: m.is_tensor(x), arr("float32", (3, 4)))


# ---- printing ----

REPRS = [
    ("small float", lambda m: m.tensor([1.5, -2.25, 3.0])),
    ("ints", lambda m: m.arange(10)),
    ("int-valued floats", lambda m: m.tensor([1.0, 2.0, -3.0])),
    ("bool", lambda m: m.tensor([True, False])),
    ("0-d", lambda m: m.tensor(3.25)), ("0-d int", lambda m: m.tensor(-4)),
    ("empty", lambda m: m.zeros(0)), ("empty 2d", lambda m: m.zeros(2, 0)),
    ("empty int", lambda m: m.zeros(0, dtype=m.int64)),
    ("2d", lambda m: m.arange(12.0).reshape(3, 4) / 7),
    ("3d", lambda m: m.arange(24).reshape(2, 3, 4)),
    ("sci", lambda m: m.tensor([1e-5, 1.0, 1e5])),
    ("large", lambda m: m.tensor([1e10, 2e10])),
    ("inf nan", lambda m: m.tensor([float("inf"), float("-inf"), float("nan"), 1.5])),
    ("float64", lambda m: m.tensor([1.5, 2.5], dtype=m.float64)),
    ("float16", lambda m: m.tensor([1.5, 2.5], dtype=m.float16)),
    ("bfloat16", lambda m: m.tensor([1.5, 2.5], dtype=m.bfloat16)),
    ("int32", lambda m: m.tensor([1, -2], dtype=m.int32)),
    ("uint8", lambda m: m.tensor([1, 255], dtype=m.uint8)),
    ("int8 0-d", lambda m: m.tensor(5, dtype=m.int8)),
    ("summarised 1d", lambda m: m.arange(2000)),
    ("summarised 2d", lambda m: m.arange(3000.0).reshape(50, 60)),
    ("summarised 3d", lambda m: m.arange(5000).reshape(10, 10, 50)),
    ("long rows wrap", lambda m: m.arange(30.0) / 3),
    ("negative zero", lambda m: m.tensor([-0.0, 0.0])),
    ("wide ints", lambda m: m.tensor([1, 100000000000])),
    ("view", lambda m: m.arange(12.0).reshape(3, 4).t()[1:]),
]


@pytest.mark.parametrize("name,fn", REPRS, ids=[c[0] for c in REPRS])
def test_repr_matches_torch(name, fn):
    if torch is None:
        pytest.skip("PyTorch is not installed")
    assert repr(fn(ember)) == repr(fn(torch)).replace("torch.", "ember.")
    assert str(fn(ember)) == str(fn(torch)).replace("torch.", "ember.")


def test_format_of_0d():
    assert f"{ember.tensor(2.5):.2f}" == "2.50"
