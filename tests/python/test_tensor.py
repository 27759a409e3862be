"""Tensor creation and interop: ember.tensor, from_numpy/numpy() zero-copy
exchange, properties and conversions, printing (against PyTorch's repr),
object identity and reference counts, and features not implemented yet.
"""

import gc
import sys
import warnings

import numpy as np
import pytest

import ember
from conftest import EM_DTYPES, NP_DTYPES, assert_close, dtype_name, requires_torch, torch


# ====================================================================================
# ember.tensor
# ====================================================================================

TENSOR_CASES = [
    # (description, data, dtype keyword or None, expected array)
    ("ints", [1, 2, 3], None, np.array([1, 2, 3], np.int64)),
    ("floats", [1.5, -2.0], None, np.array([1.5, -2.0], np.float32)),
    ("bools", [True, False], None, np.array([True, False])),
    ("bool < int", [True, 2], None, np.array([1, 2], np.int64)),
    ("int < float", [1, 2.5], None, np.array([1.0, 2.5], np.float32)),
    ("bool < float", [True, 0.5], None, np.array([1.0, 0.5], np.float32)),
    ("nested lists", [[1, 2], [3, 4]], None, np.array([[1, 2], [3, 4]], np.int64)),
    ("nested tuples", ((1.0, 2.0), (3.0, 4.0)), None, np.array([[1, 2], [3, 4]], np.float32)),
    ("lists and tuples", [(1, 2), [3, 4]], None, np.array([[1, 2], [3, 4]], np.int64)),
    ("3-d", [[[1], [2]], [[3], [4]]], None, np.arange(1, 5).reshape(2, 2, 1)),
    ("float inside nested ints", [[1, 2], [3, 4.5]], None,
     np.array([[1, 2], [3, 4.5]], np.float32)),
    ("empty", [], None, np.zeros(0, np.float32)),
    ("empty 2-d", [[], []], None, np.zeros((2, 0), np.float32)),
    ("empty int dtype", [], ember.int64, np.zeros(0, np.int64)),
    ("dtype=float64", [1, 2], ember.float64, np.array([1.0, 2.0])),
    ("dtype=float32 from bool", [True, False], ember.float32, np.array([1.0, 0.0], np.float32)),
    ("dtype=int64 truncates", [1.7, -1.7], ember.int64, np.array([1, -1], np.int64)),
    ("dtype=bool", [0, 2, -1], ember.bool, np.array([False, True, True])),
    ("large int exact", [2**62 + 1, -2**63], None, np.array([2**62 + 1, -2**63], np.int64)),
    ("float32 rounding", [0.1], None, np.array([0.1], np.float32)),
    ("0-d tensors as elements", [ember.tensor(1.5), 2], None, np.array([1.5, 2.0], np.float32)),
    ("scalar float", 3.5, None, np.array(3.5, np.float32)),
    ("scalar int", 7, None, np.array(7, np.int64)),
    ("scalar bool", True, None, np.array(True)),
    ("scalar with dtype", 2.5, ember.float64, np.array(2.5)),
    ("scalar int to float", 3, ember.float32, np.array(3.0, np.float32)),
]


@pytest.mark.parametrize("desc,data,dtype,expected", TENSOR_CASES,
                         ids=[c[0] for c in TENSOR_CASES])
def test_tensor_from_python_data(desc, data, dtype, expected):
    t = ember.tensor(data) if dtype is None else ember.tensor(data, dtype=dtype)
    assert_close(t, expected)


@requires_torch
@pytest.mark.parametrize("desc,data,dtype,expected", TENSOR_CASES,
                         ids=[c[0] for c in TENSOR_CASES])
def test_tensor_dtype_inference_matches_torch(desc, data, dtype, expected):
    e = ember.tensor(data) if dtype is None else ember.tensor(data, dtype=dtype)
    if isinstance(data, list):  # torch.tensor does not take ember tensors as elements
        data = [v.item() if isinstance(v, ember.Tensor) else v for v in data]
    t = torch.tensor(data, dtype=None if dtype is None else getattr(torch, dtype_name(dtype)))
    assert dtype_name(e.dtype) == dtype_name(t.dtype)
    assert tuple(e.shape) == tuple(t.shape)
    np.testing.assert_array_equal(e.numpy(), t.numpy())


@pytest.mark.parametrize("data", [[[1, 2], [3]], [[1], [2, 3]], [[[1, 2]], [[3]]],
                                  [[1, 2], [3, 4], [5]]], ids=str)
def test_tensor_ragged_raises_value_error(data):
    with pytest.raises(ValueError, match="expected sequence of length"):
        ember.tensor(data)


@pytest.mark.parametrize("data", [[[1, 2], 3], [1, [2]]], ids=str)
def test_tensor_mixed_nesting_raises_type_error(data):
    # A number where a sequence belongs (or the reverse) is a TypeError in
    # PyTorch; a sequence of the wrong length is a ValueError (test above).
    with pytest.raises(TypeError, match="sequence|number"):
        ember.tensor(data)


@pytest.mark.parametrize("data", ["a", ["a"], [1, "a"], [[1.0], ["x"]], None, [None], {1: 2}],
                         ids=repr)
def test_tensor_non_numbers_raise_type_error(data):
    with pytest.raises(TypeError):
        ember.tensor(data)


def test_tensor_from_int_overflow():
    with pytest.raises(RuntimeError, match="[Oo]verflow"):
        ember.tensor([2**64])


@pytest.mark.parametrize("dtype", list(NP_DTYPES))
def test_tensor_from_numpy_array_is_a_copy(dtype):
    a = np.array([[1, 0, 3], [4, 5, 0]]).astype(NP_DTYPES[dtype])
    t = ember.tensor(a)
    expected = a.copy()
    assert_close(t, expected)
    a[...] = a[0, 0]  # modifying the array afterwards ...
    assert_close(t, expected)  # ... leaves the tensor as it was
    assert not np.shares_memory(t.numpy(), a)


def test_tensor_from_numpy_with_dtype_and_layouts():
    a = np.arange(12, dtype=np.float64).reshape(3, 4)
    assert_close(ember.tensor(a, dtype=ember.float32), a.astype(np.float32))
    assert_close(ember.tensor(a.T), a.T)
    assert_close(ember.tensor(a[:, 1::2]), a[:, 1::2])
    assert ember.tensor(a.T).is_contiguous()  # the copy is contiguous, like torch.tensor


def test_tensor_from_numpy_negative_strides():
    """torch.tensor copies reversed arrays; ember.tensor is documented as
    always a copy, so it has no reason to refuse them."""
    a = np.arange(5, dtype=np.int64)
    assert_close(ember.tensor(a[::-1]), np.array([4, 3, 2, 1, 0]))


def test_tensor_from_read_only_array_copies_without_warning():
    """ember.tensor copies, so the read-only warning from_numpy gives does not apply."""
    a = np.arange(3.0)
    a.flags.writeable = False
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert_close(ember.tensor(a), np.arange(3.0))


@pytest.mark.parametrize("value,expected", [(np.float64(2.5), np.array(2.5)),
                                            (np.float32(1.5), np.array(1.5, np.float32)),
                                            (np.int64(3), np.array(3, np.int64)),
                                            (np.bool_(True), np.array(True))], ids=repr)
def test_tensor_from_numpy_scalar(value, expected):
    """NumPy scalars become 0-d tensors of their dtype, silently (as in torch)."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        t = ember.tensor(value)
    assert_close(t, expected)


def test_tensor_from_tensor_is_a_copy():
    x = ember.tensor([1.0, 2.0])
    y = ember.tensor(x)
    assert y is not x and not np.shares_memory(x.numpy(), y.numpy())
    assert_close(y, np.array([1.0, 2.0], np.float32))
    assert_close(ember.tensor(x, dtype=ember.int64), np.array([1, 2]))


def test_tensor_class_cannot_be_constructed_directly():
    with pytest.raises(TypeError, match="ember.tensor"):
        ember.Tensor()


# ====================================================================================
# from_numpy and numpy(): zero-copy both ways
# ====================================================================================

@pytest.mark.parametrize("dtype", list(NP_DTYPES))
def test_from_numpy_shares_memory_both_ways(dtype):
    a = np.zeros((2, 3), NP_DTYPES[dtype])
    t = ember.from_numpy(a)
    assert t.dtype is EM_DTYPES[dtype]
    assert t.data_ptr() == a.ctypes.data
    a[1, 2] = 1  # write through NumPy, read through ember
    assert t.tolist()[1][2] == 1
    t.numpy()[0, 1] = 1  # write through the tensor's array, read through NumPy
    assert a[0, 1] == 1
    assert np.shares_memory(t.numpy(), a)


NUMPY_VIEWS = {
    "a[::2]": lambda a: a[::2],
    "a.T": lambda a: a.T,
    "a[1:]": lambda a: a[1:],
    "a[1:, 2:]": lambda a: a[1:, 2:],
    "a[:, ::3]": lambda a: a[:, ::3],
    "a[2]": lambda a: a[2],
    "0-d a[1, 1]": lambda a: a[1, 1, ...],
    "empty a[:0]": lambda a: a[:0],
}


@pytest.mark.parametrize("name", list(NUMPY_VIEWS))
def test_from_numpy_non_contiguous_and_offset(name):
    view = NUMPY_VIEWS[name]
    base = np.arange(24, dtype=np.float64).reshape(4, 6)
    a = view(base)
    t = ember.from_numpy(a)
    assert_close(t, a)
    assert t.shape == a.shape
    assert t.stride() == tuple(s // 8 for s in a.strides)
    assert t.is_contiguous() == a.flags.c_contiguous or a.size <= 1
    if a.size:
        assert t.data_ptr() == a.ctypes.data  # no copy, offset kept
        base[...] += 1000  # still the same memory
        assert_close(t, view(base))
        assert_close(t + 1, view(base) + 1)  # ops read the strided memory correctly


def test_from_numpy_memory_outlives_the_array():
    a = np.arange(1000, dtype=np.float32)
    expected = a.copy()
    t = ember.from_numpy(a[10:])
    del a
    gc.collect()
    assert_close(t, expected[10:])
    assert_close(t.sum(), np.float32(expected[10:].astype(np.float64).sum()), rtol=1e-7)


def test_numpy_outlives_the_tensor():
    ember.manual_seed(3)
    t = ember.randn(1000)
    n = t.numpy()
    expected = n.copy()
    v = t.T.numpy()  # a view's array keeps the storage alive too
    del t
    gc.collect()
    ember.randn(1000)  # reuse of freed memory would show up here
    np.testing.assert_array_equal(n, expected)
    np.testing.assert_array_equal(v, expected)


def test_numpy_is_zero_copy_and_views_share_storage():
    x = ember.zeros(3, 4)
    n = x.numpy()
    assert n.dtype == np.float32 and n.shape == (3, 4) and n.flags.writeable
    assert n.ctypes.data == x.data_ptr()
    assert np.shares_memory(x.T.numpy(), n)
    assert x.T.numpy().strides == (4, 16)
    n[0, 0] = 5.0
    assert x.T.tolist()[0][0] == 5.0
    assert np.asarray(x) is not None and np.shares_memory(np.asarray(x), n)


@pytest.mark.parametrize("np_dtype", [np.complex64, np.uint64, np.uint32, np.uint16],
                         ids=lambda d: np.dtype(d).name)
def test_from_numpy_unsupported_dtype(np_dtype):
    with pytest.raises(TypeError, match="supported types are float32, .*bool"):
        ember.from_numpy(np.zeros(3, np_dtype))


@pytest.mark.parametrize("view", [lambda a: a[::-1], lambda a: a[:, ::-1],
                                  lambda a: a[::-2, :]], ids=["[::-1]", "[:, ::-1]", "[::-2]"])
def test_from_numpy_negative_strides(view):
    with pytest.raises(ValueError, match="negative"):
        ember.from_numpy(view(np.zeros((4, 4))))


@pytest.mark.parametrize("obj", [[1, 2], 3.0, b"abc", bytearray(b"ab"), "s", None], ids=repr)
def test_from_numpy_rejects_non_arrays(obj):
    with pytest.raises(TypeError, match="from_numpy"):
        ember.from_numpy(obj)


def test_from_numpy_read_only_warns():
    a = np.arange(3.0)
    a.flags.writeable = False
    with pytest.warns(UserWarning, match="not writable"):
        t = ember.from_numpy(a)
    assert_close(t, np.arange(3.0))


# ====================================================================================
# Properties and conversions
# ====================================================================================

def test_shape_is_a_size_tuple():
    x = ember.zeros(2, 3)
    s = x.shape
    assert isinstance(s, ember.Size) and isinstance(s, tuple)
    assert s == (2, 3) and s[0] == 2 and list(s) == [2, 3]
    assert repr(s) == "ember.Size([2, 3])"
    assert repr(ember.tensor(1.0).shape) == "ember.Size([])"
    assert repr(ember.zeros(0).shape) == "ember.Size([0])"
    assert x.size() == (2, 3) and isinstance(x.size(), ember.Size)


def test_geometry_accessors():
    x = ember.zeros(2, 3, 4, dtype=ember.float64)
    assert x.dtype is ember.float64
    assert x.ndim == 3 and x.dim() == 3
    assert x.numel() == 24
    assert x.size(0) == 2 and x.size(-1) == 4 and x.size(1) == 3
    assert x.stride() == (12, 4, 1) and x.stride(0) == 12 and x.stride(-1) == 1
    assert x.is_contiguous() and not x.transpose(0, 2).is_contiguous()
    assert len(x) == 2
    assert x.element_size() == 8
    assert x.is_cpu and str(x.device) == "cpu"
    z = ember.tensor(5)
    assert z.ndim == 0 and z.dim() == 0 and z.numel() == 1 and z.shape == () and z.stride() == ()
    e = ember.zeros(2, 0, 3)
    assert e.numel() == 0 and len(e) == 2 and e.shape == (2, 0, 3)


def test_size_and_stride_dim_out_of_range():
    x = ember.zeros(2, 3)
    for bad in (2, -3):
        with pytest.raises(IndexError, match="out of range"):
            x.size(bad)
        with pytest.raises(IndexError, match="out of range"):
            x.stride(bad)


def test_len_of_0d_raises():
    with pytest.raises(TypeError, match="0-d"):
        len(ember.tensor(1.0))


@pytest.mark.parametrize("value,dtype,pytype", [(2.5, ember.float32, float),
                                                (0.1, ember.float64, float),
                                                (7, ember.int64, int),
                                                (True, ember.bool, bool)], ids=str)
def test_item_and_python_numbers(value, dtype, pytype):
    t = ember.tensor(value, dtype=dtype)
    assert type(t.item()) is pytype and t.item() == value
    assert float(t) == float(value) and int(t) == int(value) and bool(t) is bool(value)
    assert type(float(t)) is float and type(int(t)) is int
    one = ember.tensor([value], dtype=dtype)  # one element, one dim: also fine
    assert one.item() == value and float(one) == float(value)


def test_item_of_float32_is_the_float32_value():
    assert ember.tensor(0.1).item() == float(np.float32(0.1))


@pytest.mark.parametrize("convert", [bool, float, int, lambda t: t.item()],
                         ids=["bool", "float", "int", "item"])
@pytest.mark.parametrize("shape", [(2,), (0,), (2, 2)], ids=str)
def test_conversions_need_one_element(convert, shape):
    # PyTorch's types: RuntimeError for bool(), ValueError for the numbers
    with pytest.raises(RuntimeError if convert is bool else ValueError) as e:
        convert(ember.zeros(*shape))
    assert ("ambiguous" if convert is bool else "only one element") in str(e.value)


def test_bool_of_one_element():
    assert bool(ember.tensor([0.0])) is False
    assert bool(ember.tensor([[3]])) is True
    assert bool(ember.tensor(float("nan"))) is True  # nan != 0, as in Python and torch


@pytest.mark.parametrize("data", [[[1, 2], [3, 4]], [1.5, -2.0], [True, False], [], [[]], 3,
                                  2.5, True], ids=str)
def test_tolist(data):
    out = ember.tensor(data).tolist()
    assert out == data
    if data and isinstance(data, list) and isinstance(data[0], list) and data[0]:
        assert type(out[0][0]) is type(data[0][0])


def test_tolist_of_view():
    x = ember.tensor([[1, 2, 3], [4, 5, 6]])
    assert x.T.tolist() == [[1, 4], [2, 5], [3, 6]]
    assert ember.tensor([1, 2]).expand(2, 2).tolist() == [[1, 2], [1, 2]]


CAST_CASES = [
    ("float", lambda t: t.float(), np.float32),
    ("double", lambda t: t.double(), np.float64),
    ("long", lambda t: t.long(), np.int64),
    ("bool", lambda t: t.bool(), np.bool_),
    ("to(float32)", lambda t: t.to(ember.float32), np.float32),
    ("to(dtype=float64)", lambda t: t.to(dtype=ember.float64), np.float64),
    ("to(int64)", lambda t: t.to(ember.int64), np.int64),
    ("to(bool)", lambda t: t.to(ember.bool), np.bool_),
    ("to(ember.double)", lambda t: t.to(ember.double), np.float64),
    ("to(ember.long)", lambda t: t.to(ember.long), np.int64),
    ("to(ember.float)", lambda t: t.to(ember.float), np.float32),
]


@pytest.mark.parametrize("src", list(NP_DTYPES))
@pytest.mark.parametrize("name,fn,np_dtype", CAST_CASES, ids=[c[0] for c in CAST_CASES])
def test_casts(src, name, fn, np_dtype):
    """Casts match NumPy's astype: floats truncate toward zero, nonzero is True."""
    a = np.array([[0.0, -1.7, 2.5], [1.0, 3.0, -0.25]]).astype(NP_DTYPES[src])
    t = ember.tensor(a)
    r = fn(t)
    assert_close(r, a.astype(np_dtype))
    if np.dtype(np_dtype) == a.dtype:
        assert r is t  # same dtype: the very same object, as in PyTorch
    else:
        assert r is not t


def test_cast_of_view():
    a = np.arange(6, dtype=np.float32).reshape(2, 3) - 2.5
    assert_close(ember.tensor(a).T.long(), a.T.astype(np.int64))


def test_to_cpu_keeps_the_tensor():
    x = ember.ones(2)
    assert x.to("cpu") is x
    assert x.to(device="cpu") is x
    assert_close(x.to(ember.int64, "cpu"), np.ones(2, np.int64))


# ====================================================================================
# repr: exactly PyTorch's
# ====================================================================================

_rng = np.random.default_rng(0)
REPR_CASES = {
    "float32 small": np.array([0.1, -0.25, 1.5], np.float32),
    "integers in float": np.array([1.0, 2.0, -3.0], np.float32),
    "zeros": np.zeros(3, np.float32),
    "large magnitudes (sci)": np.array([1e10, 1.0, 3.0], np.float32),
    "large integer-valued": np.array([123456789.0, 2.0], np.float32),
    "range > 1000x (sci)": np.array([1.0, 1e4], np.float32),
    "tiny values (sci)": np.array([1e-5, 0.5], np.float32),
    "only tiny": np.array([1e-7, 2e-7], np.float32),
    "int64": np.array([1, -20, 300], np.int64),
    "int64 extremes": np.array([-2**63, 2**63 - 1], np.int64),
    "bool": np.array([True, False]),
    "bool 2-d": np.array([[True, False], [False, True]]),
    "float64 (dtype suffix)": np.array([0.1, 0.2]),
    "float64 2-d": np.arange(6, dtype=np.float64).reshape(2, 3),
    "float64 sci": np.array([1e-10, 1.0]),
    "0-d float32": np.array(3.5, np.float32),
    "0-d negative": np.array(-0.5, np.float32),
    "0-d int64": np.array(7, np.int64),
    "0-d bool": np.array(True),
    "0-d float64": np.array(2.0),
    "0-d nan": np.array(np.nan, np.float32),
    "empty (0,)": np.zeros(0, np.float32),
    "empty (2, 0)": np.zeros((2, 0), np.float32),
    "empty int64": np.zeros(0, np.int64),
    "empty float64 (2, 0)": np.zeros((2, 0)),
    "empty bool (0, 3)": np.zeros((0, 3), bool),
    "randn 50x50 (summarised)": _rng.standard_normal((50, 50)).astype(np.float32),
    "randn 2000 (summarised)": _rng.standard_normal(2000).astype(np.float32),
    "int 40x50 (summarised)": np.arange(2000).reshape(40, 50),
    "3-d": (np.arange(24, dtype=np.float32).reshape(2, 3, 4) / 7),
    "3-d int": np.arange(24).reshape(2, 3, 4),
    "4-d": _rng.standard_normal((2, 2, 2, 3)).astype(np.float32),
    "3-d summarised": _rng.standard_normal((10, 10, 20)).astype(np.float32),
    "negative values": np.array([-1.5, -0.001, -100.0], np.float32),
    "nan and inf": np.array([np.nan, np.inf, -np.inf, 1.0], np.float32),
    "nan and inf with fractions": np.array([np.nan, np.inf, -np.inf, 1.5], np.float32),
    "all nan": np.array([np.nan, np.nan], np.float32),
    "line wrapping": np.arange(30, dtype=np.float32) * 1.1,
    "line wrapping int": np.arange(100) * 12345,
    "sci line wrapping": _rng.standard_normal(20).astype(np.float32) * 1e6,
    "float64 line wrapping": _rng.standard_normal(20),
    "negative zero": np.array([-0.0, 1.0], np.float32),
    "rounding to 4 digits": np.array([0.123456789, 1.0], np.float32),
}


@requires_torch
@pytest.mark.parametrize("name", list(REPR_CASES))
def test_repr_matches_torch(name):
    a = REPR_CASES[name]
    expected = repr(torch.tensor(a)).replace("torch.", "ember.")
    t = ember.tensor(a)
    assert repr(t) == expected
    assert str(t) == expected


@requires_torch
def test_repr_of_views_and_results_matches_torch():
    a = np.arange(12, dtype=np.float32).reshape(3, 4) / 3
    assert repr(ember.tensor(a).T) == repr(torch.tensor(a).T).replace("torch.", "ember.")
    e = ember.tensor(a).sum(0)
    assert repr(e) == repr(torch.tensor(a).sum(0)).replace("torch.", "ember.")


def test_repr_without_torch():
    """A few fixed strings, so printing is checked even without PyTorch."""
    assert repr(ember.tensor([1.0, 2.5])) == "tensor([1.0000, 2.5000])"
    assert repr(ember.tensor([1, 2])) == "tensor([1, 2])"
    assert repr(ember.tensor(2.0, dtype=ember.float64)) == "tensor(2., dtype=ember.float64)"
    assert repr(ember.zeros(2, 0)) == "tensor([], size=(2, 0))"
    assert repr(ember.tensor([True])) == "tensor([True])"
    assert f"{ember.tensor(2.5):.2f}" == "2.50"


# ====================================================================================
# Identity, reference counts, live tensors
# ====================================================================================

def test_ops_returning_their_input_return_the_same_object():
    x = ember.ones(2, 3)
    assert x.contiguous() is x
    assert ember.contiguous(x) is x
    assert x.to(x.dtype) is x
    assert x.float() is x
    assert (+x) is x
    y = x.T
    assert y.contiguous() is not y


def test_refcount_unchanged_by_ops():
    x = ember.ones(3, 3)
    y = ember.ones(3)
    before_x, before_y = sys.getrefcount(x), sys.getrefcount(y)
    for _ in range(5):
        results = [x + y, x * 2, 2 - x, x / y, x ** 2, -x, x.exp(), ember.relu(x), x @ y,
                   x.sum(), x.mean(0), x.reshape(9), x.view(9), x.T, x.permute(1, 0),
                   x.transpose(0, 1), y.expand(3, 3), x.contiguous(), x.to(ember.float32),
                   x.float(), x.double(), x.numpy(), x.shape,
                   ember.maximum(x, y), repr(x), x.tolist(), float(x.sum())]
        del results
    for bad in (lambda: x + ember.ones(4), lambda: x @ ember.ones(2), lambda: x.view(4),
                lambda: x.sum(5)):
        with pytest.raises((RuntimeError, IndexError)):
            bad()
    gc.collect()
    assert sys.getrefcount(x) == before_x
    assert sys.getrefcount(y) == before_y


def test_live_tensors_return_to_start():
    gc.collect()
    start = ember.memory_stats()["live_tensors"]
    ts = [ember.randn(10, 10) for _ in range(10)]
    views = [t.T for t in ts]
    arrays = [t.numpy() for t in ts]
    results = [(t @ v).sum(0) for t, v in zip(ts, views)]
    assert ember.memory_stats()["live_tensors"] >= start + 30
    del ts, views, arrays, results
    gc.collect()
    assert ember.memory_stats()["live_tensors"] == start
    # errors leak nothing either
    for _ in range(10):
        with pytest.raises(RuntimeError):
            ember.ones(2, 3) + ember.ones(4)
    gc.collect()
    assert ember.memory_stats()["live_tensors"] == start


def test_from_numpy_releases_the_array():
    a = np.zeros(100)
    before = sys.getrefcount(a)
    t = ember.from_numpy(a)
    assert sys.getrefcount(a) > before  # the tensor holds the buffer
    del t
    gc.collect()
    assert sys.getrefcount(a) == before


def test_memory_stats_keys():
    stats = ember.memory_stats()
    for key in ("in_use", "peak_in_use", "cached", "cache_limit", "hits", "misses", "live_tensors"):
        assert isinstance(stats[key], int) and stats[key] >= 0
    ember.empty_cache()
    assert ember.memory_stats()["cached"] == 0


@pytest.mark.parametrize("numel", [1000, 128 * 512, 512 * 784], ids=["4KiB", "256KiB", "1.5MiB"])
def test_peak_memory_since_the_last_reset(numel):
    gc.collect()
    ember.reset_peak_memory_stats()
    start = ember.memory_stats()
    assert start["peak_in_use"] == start["in_use"]
    t = ember.ones(numel)
    held = ember.memory_stats()
    assert held["in_use"] >= start["in_use"] + numel * 4
    assert held["in_use"] <= held["peak_in_use"] <= held["in_use"] + 256  # (+ an op's 0-d temporaries)
    del t
    gc.collect()
    after = ember.memory_stats()
    assert after["in_use"] == start["in_use"]  # small blocks count too, and come back
    assert after["peak_in_use"] >= held["in_use"]  # the peak stays until the next reset
    ember.reset_peak_memory_stats()
    assert ember.memory_stats()["peak_in_use"] == after["in_use"]


@pytest.mark.parametrize("numel", [128 * 512, 512 * 784], ids=["256KiB", "1.5MiB"])
def test_freed_blocks_are_reused_from_the_cache(numel):
    # activations a training step makes and frees every call must not map
    # fresh pages each time (medium and large blocks are cached)
    ember.empty_cache()
    t = ember.ones(numel)
    del t
    gc.collect()
    before = ember.memory_stats()
    assert before["cached"] >= numel * 4
    t = ember.zeros(numel)
    after = ember.memory_stats()
    assert after["hits"] == before["hits"] + 1 and after["misses"] == before["misses"]
    assert float(t.sum()) == 0.0  # a reused block is still initialised by its op


# ====================================================================================
# view(dtype): the same bytes read as another dtype
# ====================================================================================

@pytest.mark.parametrize("src,dst", [("float32", "int32"), ("float32", "int16"), ("float32", "uint8"),
                                     ("int16", "float32"), ("float64", "int64"), ("bfloat16", "int16"),
                                     ("uint8", "float64"), ("bool", "uint8")])
def test_view_as_dtype_matches_pytorch(src, dst):
    torch = pytest.importorskip("torch")
    a = np.arange(48).reshape(3, 16)

    def run(m):
        x = m.tensor(a).to(getattr(m, src))
        v = x[1:].view(getattr(m, dst))
        shared = v.view(getattr(m, src))
        return v.float().tolist() if dst == "bfloat16" else v.tolist(), tuple(v.shape), shared.equal(x[1:])

    assert run(ember) == run(torch)


def test_view_as_dtype_shares_memory_and_refuses_misfits_as_pytorch():
    x = ember.zeros(2, 4)
    v = x.view(ember.int32)
    v[0, 1] = 1065353216  # the bits of 1.0f
    assert x[0, 1].item() == 1.0
    with pytest.raises(RuntimeError, match=r"self.size\(-1\) must be divisible by 2"):
        ember.zeros(3).view(ember.float64)
    with pytest.raises(RuntimeError, match=r"self.stride\(-1\) must be 1"):
        ember.zeros(4, 4).t().view(ember.int16)
    with pytest.raises(RuntimeError, match=r"self.dim\(\) cannot be 0"):
        ember.zeros(()).view(ember.int16)
    assert ember.zeros(()).view(ember.int32).shape == ()


def test_tensors_hash_by_identity():
    x, y = ember.ones(2), ember.ones(2)
    assert len({x, y, x}) == 2
