"""Every eager op against NumPy (and PyTorch where noted), table-driven.

Sections: elementwise unary ops (with special values and ulp bounds),
binary ops (with broadcasting, views and pow), Python scalars and type
promotion (with PyTorch as the reference), reductions, matmul, views,
factories and random numbers, and property-based tests (hypothesis).

Tolerances. Results that IEEE arithmetic defines exactly (neg, relu, add,
sub, mul, div, maximum, integer ops, casts) are compared exactly against
NumPy computing in the result dtype. float32 exp/log/tanh/sigmoid are
polynomial approximations (include/ember/ops_math.h: exp and log within
2 ulp, tanh and sigmoid within 4 ulp): 4 ulp of float32 is ~4.8e-7 relative,
so rtol=1e-5 leaves a 20x margin and atol=1e-6 covers results near zero
(tanh(x) ~ x, sigmoid of large negative x) and subnormal results, where an
ulp is an absolute, not a relative, quantity. float64 transcendentals use
libm, within 1 ulp of NumPy's: rtol=1e-13.
"""

import operator

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from hypothesis.extra import numpy as hnp

import ember
from conftest import EM_DTYPES, NP_DTYPES, assert_close, dtype_name, requires_torch, torch

ALL = ("float32", "float64", "int64", "bool")
NUMERIC = ("float32", "float64", "int64")
FLOATS = ("float32", "float64")

# float32 transcendentals: see the module docstring.
F32_TRANSCENDENTAL = dict(rtol=1e-5, atol=1e-6)
F64_TRANSCENDENTAL = dict(rtol=1e-13, atol=1e-15)
# powf and x*x*x: within 1.5 ulp (~1.8e-7 relative) of the exact result.
F32_POW = dict(rtol=1e-6, atol=0)
F64_POW = dict(rtol=1e-13, atol=0)


def sample(dtype, shape, kind="any", seed=0):
    """Deterministic test data: normal floats (x2), ints in [-5, 5], random
    bools. kind="positive" gives floats >= 0.1 and ints in [1, 5];
    kind="small" gives ints in [0, 4] (non-negative integer exponents)."""
    rng = np.random.default_rng(seed)
    if dtype == "bool":
        return np.asarray(rng.random(shape) < 0.5)
    if dtype == "int64":
        lo, hi = {"any": (-5, 6), "positive": (1, 6), "small": (0, 5)}[kind]
        return np.asarray(rng.integers(lo, hi, shape, dtype=np.int64))
    x = rng.standard_normal(shape) * 2
    if kind in ("positive", "small"):
        x = np.abs(x) + 0.1
    return np.asarray(x, dtype=NP_DTYPES[dtype])


def float_result(dtype):
    """The dtype of exp/log/div/... of a `dtype` input: ints and bools become float32."""
    return dtype if dtype in FLOATS else "float32"


# ---- layouts: the same values as a contiguous tensor, a view, or an empty tensor ----
# Each entry: base shape, and a function (numpy base) -> (ember tensor, numpy equivalent).

def _view(em_fn, np_fn):
    return lambda a: (em_fn(ember.tensor(a)), np_fn(a))


_same = _view(lambda x: x, lambda a: a)
LAYOUTS = {
    "contiguous": ((3, 4), _same),
    "0-d": ((), _same),
    "empty": ((0,), _same),
    "empty-3d": ((2, 0, 3), _same),
    ".T": ((4, 3), _view(lambda x: x.T, lambda a: a.T)),
    "t()": ((4, 3), _view(lambda x: x.t(), lambda a: a.T)),
    "transpose(0,1)": ((2, 3, 4), _view(lambda x: x.transpose(0, 1),
                                         lambda a: a.transpose(1, 0, 2))),
    "transpose(-1,-3)": ((2, 3, 4), _view(lambda x: x.transpose(-1, -3),
                                           lambda a: np.swapaxes(a, -1, -3))),
    "permute": ((2, 3, 4), _view(lambda x: x.permute(2, 0, 1), lambda a: a.transpose(2, 0, 1))),
    "expand": ((3, 1), _view(lambda x: x.expand(3, 4), lambda a: np.broadcast_to(a, (3, 4)))),
    "numpy-strided": ((3, 8), lambda a: (ember.from_numpy(a[:, ::2]), a[:, ::2])),
}
NON_CONTIGUOUS = {".T", "t()", "transpose(0,1)", "transpose(-1,-3)", "permute", "expand",
                  "numpy-strided"}


def make(layout, dtype, kind="any", seed=0):
    shape, fn = LAYOUTS[layout]
    x, a = fn(sample(dtype, shape, kind, seed))
    if layout in NON_CONTIGUOUS:  # the test exercises what it claims to
        assert not x.is_contiguous()
    assert tuple(x.shape) == a.shape
    return x, a


# ====================================================================================
# Elementwise unary ops
# ====================================================================================

def _sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


UNARY = {
    # name: (NumPy reference, dtypes the op accepts, input kind)
    "neg": (np.negative, NUMERIC, "any"),
    "exp": (np.exp, ALL, "any"),
    "log": (np.log, ALL, "positive"),
    "tanh": (np.tanh, ALL, "any"),
    "sigmoid": (_sigmoid, ALL, "any"),
    "relu": (lambda x: np.maximum(x, 0).astype(x.dtype), NUMERIC, "any"),
}
EXACT_UNARY = {"neg", "relu"}


def unary_reference(op, a):
    """(expected array, tolerance dict) for unary op `op` on NumPy array a."""
    ref, _, _ = UNARY[op]
    if op in EXACT_UNARY:
        return ref(a), dict(rtol=0, atol=0)
    out = float_result(dtype_name(a.dtype))
    with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
        expected = ref(a.astype(np.float64)).astype(NP_DTYPES[out])
    return expected, (F32_TRANSCENDENTAL if out == "float32" else F64_TRANSCENDENTAL)


def call_unary(op, x, style):
    if style == "function":
        return getattr(ember, op)(x)
    if style == "method":
        return getattr(x, op)()
    assert op == "neg" and style == "operator"
    return -x


UNARY_CASES = [(op, dt, style) for op, (_, dts, _) in UNARY.items() for dt in dts
               for style in ("function", "method") + (("operator",) if op == "neg" else ())]


@pytest.mark.parametrize("op,dtype,style", UNARY_CASES)
def test_unary_dtypes_and_styles(op, dtype, style):
    x, a = make("contiguous", dtype, UNARY[op][2])
    expected, tol = unary_reference(op, a)
    assert_close(call_unary(op, x, style), expected, **tol)


@pytest.mark.parametrize("layout", list(LAYOUTS))
@pytest.mark.parametrize("op", list(UNARY))
def test_unary_layouts(op, layout):
    """Views, 0-d and empty tensors (float32)."""
    x, a = make(layout, "float32", UNARY[op][2])
    expected, tol = unary_reference(op, a)
    assert_close(getattr(ember, op)(x), expected, **tol)


def test_unary_does_not_modify_input():
    x, a = make("contiguous", "float32")
    before = a.copy()
    for op in UNARY:
        getattr(ember, op)(x)
    np.testing.assert_array_equal(x.numpy(), before)


def test_float32_transcendentals_wide_range():
    """exp/log/tanh/sigmoid over their whole useful float32 range (200k points
    each), against NumPy in float64 rounded to float32; tolerances in the
    module docstring."""
    rng = np.random.default_rng(7)
    cases = {
        "exp": rng.uniform(-103, 88, 200_000),
        "log": np.exp(rng.uniform(np.log(1e-37), np.log(3e38), 200_000)),
        "tanh": rng.uniform(-12, 12, 200_000),
        "sigmoid": rng.uniform(-80, 80, 200_000),
    }
    for op, x in cases.items():
        x = x.astype(np.float32)
        expected = UNARY[op][0](x.astype(np.float64)).astype(np.float32)
        assert_close(getattr(ember, op)(ember.from_numpy(x)), expected, **F32_TRANSCENDENTAL)


def ulp_distance(a, b):
    """Number of float32 values between a and b (elementwise, finite inputs)."""
    def ordered(x):
        i = x.astype(np.float32).view(np.int32).astype(np.int64)
        return np.where(i < 0, -(i & 0x7FFFFFFF), i)
    return np.abs(ordered(a) - ordered(b))


@pytest.mark.parametrize("op,max_ulp,lo,hi", [("exp", 2, -103.0, 88.0), ("log", 2, 1e-37, 3e38),
                                              ("tanh", 4, -12.0, 12.0),
                                              ("sigmoid", 4, -80.0, 80.0)])
def test_float32_transcendentals_ulp_bound(op, max_ulp, lo, hi):
    """The accuracy ops_math.h documents (exp/log 2 ulp, tanh/sigmoid 4 ulp),
    measured against the correctly rounded float32 result (NumPy in float64,
    rounded once: within 0.5 ulp of exact, so the integer ulp distance stays
    within the documented bound)."""
    rng = np.random.default_rng(8)
    if op == "log":  # log-uniform over the positive normal range
        x = np.exp(rng.uniform(np.log(lo), np.log(hi), 200_000))
    else:
        x = rng.uniform(lo, hi, 200_000)
    x = x.astype(np.float32)
    expected = UNARY[op][0](x.astype(np.float64)).astype(np.float32)
    got = getattr(ember, op)(ember.from_numpy(x)).numpy()
    assert ulp_distance(got, expected).max() <= max_ulp


# ---- special values ----

_inf, _nan = float("inf"), float("nan")
SPECIAL_UNARY = [
    # (op, input, expected): for float32 and float64
    ("exp", _inf, _inf), ("exp", -_inf, 0.0), ("exp", _nan, _nan), ("exp", 0.0, 1.0),
    ("exp", 1000.0, _inf), ("exp", -1000.0, 0.0),
    ("log", 0.0, -_inf), ("log", -0.0, -_inf), ("log", -1.0, _nan), ("log", _inf, _inf),
    ("log", _nan, _nan), ("log", 1.0, 0.0), ("log", -_inf, _nan),
    ("tanh", _inf, 1.0), ("tanh", -_inf, -1.0), ("tanh", _nan, _nan), ("tanh", 0.0, 0.0),
    ("tanh", 30.0, 1.0), ("tanh", -30.0, -1.0),
    ("sigmoid", -1000.0, 0.0), ("sigmoid", 1000.0, 1.0), ("sigmoid", _inf, 1.0),
    ("sigmoid", -_inf, 0.0), ("sigmoid", _nan, _nan), ("sigmoid", 0.0, 0.5),
    ("relu", _nan, _nan), ("relu", -_inf, 0.0), ("relu", _inf, _inf), ("relu", -1.0, 0.0),
    ("neg", _inf, -_inf), ("neg", _nan, _nan),
]
SPECIAL_UNARY_F32 = [
    # float32 only: these saturate in float32 but not in float64. sigmoid(-100)
    # is e^-100 = 3.7e-44, a float32 subnormal that ember rounds correctly
    # (PyTorch gives 0: its exp(100) overflows first).
    ("exp", 89.0, _inf), ("exp", -104.0, 0.0), ("sigmoid", -100.0, float(np.float32(3.7200759e-44))),
    ("sigmoid", -120.0, 0.0), ("sigmoid", 100.0, 1.0), ("tanh", 10.0, 1.0),
]
SPECIAL_CASES = ([(op, v, e, dt) for op, v, e in SPECIAL_UNARY for dt in FLOATS] +
                 [(op, v, e, "float32") for op, v, e in SPECIAL_UNARY_F32])


@pytest.mark.parametrize("op,value,expected,dtype", SPECIAL_CASES)
def test_unary_special_values(op, value, expected, dtype):
    """Exact results at IEEE special values and where results saturate."""
    # A 3-element tensor (the vector loop) and a 0-d tensor (the scalar path).
    x = ember.tensor([value, value, value], dtype=EM_DTYPES[dtype])
    assert_close(getattr(ember, op)(x), np.full(3, expected, NP_DTYPES[dtype]))
    assert_close(getattr(ember, op)(ember.tensor(value, dtype=EM_DTYPES[dtype])),
                 np.array(expected, NP_DTYPES[dtype]))


@pytest.mark.parametrize("dtype", FLOATS)
def test_maximum_propagates_nan(dtype):
    a = ember.tensor([_nan, 1.0, _nan, -_inf, 2.0], dtype=EM_DTYPES[dtype])
    b = ember.tensor([1.0, _nan, _nan, 0.0, _inf], dtype=EM_DTYPES[dtype])
    expected = np.array([_nan, _nan, _nan, 0.0, _inf], NP_DTYPES[dtype])
    assert_close(ember.maximum(a, b), expected)
    assert_close(ember.maximum(b, a), expected)
    assert_close(a.maximum(0.0), np.array([_nan, 1.0, _nan, 0.0, 2.0], NP_DTYPES[dtype]))


# ====================================================================================
# Elementwise binary ops
# ====================================================================================

BINARY = {
    # name: (NumPy reference, Python operator or None, dtypes the op accepts)
    "add": (np.add, operator.add, ALL),
    "sub": (np.subtract, operator.sub, NUMERIC),
    "mul": (np.multiply, operator.mul, ALL),
    "div": (np.true_divide, operator.truediv, ALL),
    "maximum": (np.maximum, None, ALL),
    "pow": (np.power, operator.pow, NUMERIC),
}


def binary_inputs(op, dtype):
    """Input kinds for (a, b): pow needs positive float bases and small
    non-negative integer exponents."""
    if op == "pow":
        return ("positive", "any") if dtype in FLOATS else ("any", "small")
    return ("any", "any")


def binary_reference(op, a, b):
    """(expected, tolerance) for op(a, b) on NumPy arrays of one dtype."""
    out = dtype_name(a.dtype)
    if op == "div":
        out = float_result(out)
    rd = NP_DTYPES[out]
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        if op == "pow" and out in FLOATS:  # powf/pow vs the float64 result
            expected = np.power(a.astype(np.float64), b.astype(np.float64)).astype(rd)
            return expected, (F32_POW if out == "float32" else F64_POW)
        # IEEE add/sub/mul/div/max in the result dtype: exact.
        return BINARY[op][0](a.astype(rd), b.astype(rd)).astype(rd), dict(rtol=0, atol=0)


def call_binary(op, x, y, style):
    if style == "function":
        return getattr(ember, op)(x, y)
    if style == "method":
        return getattr(x, op)(y)
    return BINARY[op][1](x, y)


BINARY_CASES = [(op, dt, style) for op, (_, pyop, dts) in BINARY.items() for dt in dts
                for style in ("function", "method") + (("operator",) if pyop else ())]


@pytest.mark.parametrize("op,dtype,style", BINARY_CASES)
def test_binary_dtypes_and_styles(op, dtype, style):
    ka, kb = binary_inputs(op, dtype)
    x, a = make("contiguous", dtype, ka, seed=1)
    y, b = make("contiguous", dtype, kb, seed=2)
    expected, tol = binary_reference(op, a, b)
    assert_close(call_binary(op, x, y, style), expected, **tol)


BROADCAST_SHAPES = [
    ((3, 1), (4,)), ((4,), (3, 1)), ((2, 1, 5), (3, 1)), ((3, 1), (2, 1, 5)),
    ((), (2, 3)), ((2, 3), ()), ((), ()), ((1,), (5,)), ((5, 1, 1), (1, 4, 1)),
    ((0,), (1,)), ((2, 0, 3), (3,)), ((2, 0, 3), (1, 1, 1)),
]


@pytest.mark.parametrize("sa,sb", BROADCAST_SHAPES, ids=str)
@pytest.mark.parametrize("op,dtype", [(op, dt) for op in BINARY for dt in ("float32", "int64")])
def test_binary_broadcasting(op, dtype, sa, sb):
    ka, kb = binary_inputs(op, dtype)
    a, b = sample(dtype, sa, ka, seed=3), sample(dtype, sb, kb, seed=4)
    expected, tol = binary_reference(op, a, b)
    assert_close(getattr(ember, op)(ember.tensor(a), ember.tensor(b)), expected, **tol)


@pytest.mark.parametrize("layout", sorted(NON_CONTIGUOUS))
@pytest.mark.parametrize("op", list(BINARY))
def test_binary_non_contiguous(op, layout):
    """A view on either side, against a contiguous operand (float32)."""
    ka, kb = binary_inputs(op, "float32")
    x, a = make(layout, "float32", ka, seed=5)
    b = sample("float32", a.shape, kb, seed=6)
    y = ember.tensor(b)
    expected, tol = binary_reference(op, a, b)
    assert_close(getattr(ember, op)(x, y), expected, **tol)
    if op != "pow":  # pow's inputs are not interchangeable (positive bases)
        expected, tol = binary_reference(op, b, a)
        assert_close(getattr(ember, op)(y, x), expected, **tol)


def test_binary_both_views_and_broadcast():
    a = sample("float64", (4, 3), seed=7)
    b = sample("float64", (3, 1), seed=8)
    x = ember.tensor(a).T                      # (3, 4), strides (1, 3)
    y = ember.tensor(b).expand(3, 4)           # stride 0 along dim 1
    assert_close(x * y + x, a.T * b + a.T)
    assert_close(ember.tensor(b) - x, b - a.T)  # implicit broadcast of (3,1) with (3,4)


def test_binary_result_is_new_and_inputs_unchanged():
    x, a = make("contiguous", "float32", seed=9)
    y, b = make("contiguous", "float32", seed=10)
    r = x + y
    assert r is not x and r is not y
    np.testing.assert_array_equal(x.numpy(), a)
    np.testing.assert_array_equal(y.numpy(), b)


def test_bool_arithmetic_is_logical():
    """As in PyTorch: True + True == True, * is and, maximum is or."""
    a = ember.tensor([True, True, False, False])
    b = ember.tensor([True, False, True, False])
    assert_close(a + b, np.array([True, True, True, False]))
    assert_close(a * b, np.array([True, False, False, False]))
    assert_close(ember.maximum(a, b), np.array([True, True, True, False]))


def test_int64_arithmetic_wraps():
    big = np.array([2**62, -2**63], np.int64)
    x = ember.tensor(big)
    with np.errstate(over="ignore"):
        assert_close(x + x, big + big)
        assert_close(x * ember.tensor([4, 1]), big * np.array([4, 1]))


# ---- pow ----

POW_EXPONENTS = [2, 3, 0.5, -1, 1.7, 0, 1, -2, 2.0]


@pytest.mark.parametrize("exponent", POW_EXPONENTS, ids=repr)
@pytest.mark.parametrize("dtype", FLOATS)
def test_pow_python_scalar_exponent(dtype, exponent):
    a = sample(dtype, (4, 5), "positive", seed=11)
    a[0, 0] = 0.0  # 0 ** -1 = inf, 0 ** 0 = 1
    with np.errstate(divide="ignore"):
        expected = np.power(a.astype(np.float64), float(exponent)).astype(a.dtype)
    tol = F32_POW if dtype == "float32" else F64_POW
    x = ember.tensor(a)
    assert_close(x ** exponent, expected, **tol)
    assert_close(ember.pow(x, exponent), expected, **tol)
    assert_close(x.pow(exponent), expected, **tol)


@pytest.mark.parametrize("exponent,result", [(2, "int64"), (3, "int64"), (0, "int64"),
                                             (1, "int64"), (0.5, "float32"), (1.7, "float32")],
                         ids=repr)
def test_pow_int_tensor_scalar_exponent(exponent, result):
    a = sample("int64", (6,), "positive", seed=12)
    x = ember.tensor(a)
    if result == "int64":
        expected = a ** exponent
        assert_close(x ** exponent, expected)
    else:
        expected = np.power(a.astype(np.float64), exponent).astype(np.float32)
        assert_close(x ** exponent, expected, **F32_POW)


def test_pow_negative_base_fractional_exponent_is_nan():
    x = ember.tensor([-4.0, -8.0, 4.0])
    assert_close(x ** 0.5, np.array([_nan, _nan, 2.0], np.float32))
    with np.errstate(invalid="ignore"):
        expected = np.power(np.array([-4.0, -8.0, 4.0], np.float32), np.float32(1.7))
    assert_close(x ** 1.7, expected, **F32_POW)


def test_pow_scalar_base():
    x = ember.tensor([0, 1, 2, 3])
    assert_close(2 ** x, np.array([1, 2, 4, 8]))
    assert_close(2.0 ** x, np.array([1.0, 2.0, 4.0, 8.0], np.float32))
    f = ember.tensor([0.5, 2.0], dtype=ember.float64)
    assert_close(3 ** f, np.power(3.0, np.array([0.5, 2.0])), **F64_POW)


def test_pow_tensor_exponent_int_negative():
    """Tensor exponents are not rejected (only Python-number ones are); the
    integer results of negative powers follow PyTorch: 2**-1 == 0,
    1**-2 == 1, (-1)**-3 == -1."""
    x = ember.tensor([2, 1, -1, 3])
    y = ember.tensor([-1, -2, -3, 2])
    assert_close(x ** y, np.array([0, 1, -1, 9]))


def test_int_pow_negative_python_exponent_raises():
    x = ember.tensor([1, 2, 3])
    for e in (-1, -2):
        with pytest.raises(RuntimeError, match="(?i)negative integer powers"):
            x ** e


# ====================================================================================
# Python scalars and type promotion
# ====================================================================================

def t_(dtype, shape=(3,)):
    """A small ember tensor of `dtype` holding 1, 2, 3 / True, False, True."""
    return ember.tensor(sample_values(dtype, shape))


def sample_values(dtype, shape=(3,)):
    base = np.array([1, 2, 3, 2, 1, 3])[:int(np.prod(shape, dtype=np.int64))]
    if dtype == "bool":
        return (base % 2 == 1).reshape(shape)
    return base.reshape(shape).astype(NP_DTYPES[dtype])


SCALAR_CASES = [
    # (description, function of ember, expected dtype name, expected values)
    ("2 * int", lambda: 2 * t_("int64"), "int64", [2, 4, 6]),
    ("int * 2", lambda: t_("int64") * 2, "int64", [2, 4, 6]),
    ("int / 2", lambda: t_("int64") / 2, "float32", [0.5, 1.0, 1.5]),
    ("2 / int", lambda: 2 / t_("int64"), "float32", [2.0, 1.0, 2 / 3]),
    ("int + 2.5", lambda: t_("int64") + 2.5, "float32", [3.5, 4.5, 5.5]),
    ("2.5 + int", lambda: 2.5 + t_("int64"), "float32", [3.5, 4.5, 5.5]),
    ("bool + 1", lambda: t_("bool") + 1, "int64", [2, 1, 2]),
    ("1 + bool", lambda: 1 + t_("bool"), "int64", [2, 1, 2]),
    ("bool + 2.5", lambda: t_("bool") + 2.5, "float32", [3.5, 2.5, 3.5]),
    ("bool + True", lambda: t_("bool") + True, "bool", [True, True, True]),
    ("bool * False", lambda: t_("bool") * False, "bool", [False, False, False]),
    ("int + True", lambda: t_("int64") + True, "int64", [2, 3, 4]),
    ("float32 + 2", lambda: t_("float32") + 2, "float32", [3.0, 4.0, 5.0]),
    ("float32 * 0.1", lambda: t_("float32") * 0.1, "float32",
     np.array([1, 2, 3], np.float32) * np.float32(0.1)),
    ("float64 + 2.5", lambda: t_("float64") + 2.5, "float64", [3.5, 4.5, 5.5]),
    ("float64 * 0.1", lambda: t_("float64") * 0.1, "float64", np.array([1.0, 2, 3]) * 0.1),
    ("2 - float32", lambda: 2 - t_("float32"), "float32", [1.0, 0.0, -1.0]),
    ("int - 1", lambda: t_("int64") - 1, "int64", [0, 1, 2]),
    ("1 - int", lambda: 1 - t_("int64"), "int64", [0, -1, -2]),
    ("int / int", lambda: t_("int64") / t_("int64"), "float32", [1.0, 1.0, 1.0]),
    ("maximum(int, 2)", lambda: ember.maximum(t_("int64"), 2), "int64", [2, 2, 3]),
    ("maximum(int, 1.5)", lambda: ember.maximum(t_("int64"), 1.5), "float32", [1.5, 2.0, 3.0]),
    ("maximum(2, int)", lambda: ember.maximum(2, t_("int64")), "int64", [2, 2, 3]),
    ("bool ** 2", lambda: t_("bool") ** 2, "int64", [1, 0, 1]),
    ("2 ** bool", lambda: 2 ** t_("bool"), "int64", [2, 1, 2]),
    ("bool ** 0.5", lambda: t_("bool") ** 0.5, "float32", [1.0, 0.0, 1.0]),
    ("float32 ** bool", lambda: t_("float32") ** t_("bool"), "float32", [1.0, 1.0, 3.0]),
    ("int ** bool", lambda: t_("int64") ** t_("bool"), "int64", [1, 1, 3]),
    ("int + 2**40", lambda: t_("int64") + 2**40, "int64", [2**40 + 1, 2**40 + 2, 2**40 + 3]),
    ("float32 + 2**70", lambda: t_("float32") + 2**70, "float32", [2.0**70] * 3),
    # 0-d tensors: dimensioned tensors decide within a category ...
    ("f32[3] + f64[]", lambda: t_("float32") + t_("float64", ()), "float32", [2.0, 3.0, 4.0]),
    ("f64[] + f32[3]", lambda: t_("float64", ()) + t_("float32"), "float32", [2.0, 3.0, 4.0]),
    ("int[3] + int[]", lambda: t_("int64") + t_("int64", ()), "int64", [2, 3, 4]),
    # ... a 0-d tensor of a higher category lifts the result to its dtype ...
    ("int[3] + f64[]", lambda: t_("int64") + t_("float64", ()), "float64", [2.0, 3.0, 4.0]),
    ("bool[3] + int[]", lambda: t_("bool") + t_("int64", ()), "int64", [2, 1, 2]),
    ("int[3] * f32[]", lambda: t_("int64") * t_("float32", ()), "float32", [1.0, 2.0, 3.0]),
    # ... two 0-d tensors promote normally ...
    ("f32[] + f64[]", lambda: t_("float32", ()) + t_("float64", ()), "float64", 2.0),
    ("int[] + f32[]", lambda: t_("int64", ()) + t_("float32", ()), "float32", 2.0),
    # ... and a 0-d tensor outranks a Python number of its category.
    ("f64[] + 2.5", lambda: t_("float64", ()) + 2.5, "float64", 3.5),
    ("int[] + 2.5", lambda: t_("int64", ()) + 2.5, "float32", 3.5),
    ("f32[] * 2", lambda: t_("float32", ()) * 2, "float32", 2.0),
    ("bool[] + 1", lambda: t_("bool", ()) + 1, "int64", 2),
]


@pytest.mark.parametrize("desc,fn,dtype,values", SCALAR_CASES, ids=[c[0] for c in SCALAR_CASES])
def test_scalar_and_0d_promotion(desc, fn, dtype, values):
    """Result dtypes follow PyTorch's rules (the table states each one; the
    torch cross-check below confirms the same rules over all combinations).
    Values are exact: every case is exactly representable or computed in the
    same dtype on both sides."""
    expected = np.asarray(values, dtype=NP_DTYPES[dtype])
    assert_close(fn(), expected, rtol=0, atol=0)


def _torch_or_ember(lib, dtype, shape):
    a = sample_values(dtype, shape)
    return lib.tensor(a)


def _outcome(fn):
    """('ok', result) or ('error', exception type)."""
    try:
        return "ok", fn()
    except Exception as e:  # noqa: BLE001 - the type is compared below
        return "error", type(e)


def _check_against_torch(ember_fn, torch_fn):
    ek, er = _outcome(ember_fn)
    tk, tr = _outcome(torch_fn)
    if tk == "error":
        assert ek == "error", f"PyTorch raises {tr.__name__}, ember returns {er.dtype}"
        assert er is RuntimeError, f"PyTorch raises {tr.__name__}, ember raises {er.__name__}"
        return
    assert ek == "ok", f"PyTorch returns {tr.dtype}, ember raises {er.__name__}"
    assert dtype_name(er.dtype) == dtype_name(tr.dtype), \
        f"ember gives {er.dtype}, PyTorch gives {tr.dtype}"
    assert tuple(er.shape) == tuple(tr.shape)
    # Small integer-valued inputs: results agree to float32 rounding.
    np.testing.assert_allclose(er.numpy().astype(np.float64), tr.numpy().astype(np.float64),
                               rtol=1e-6, atol=0, equal_nan=True)


TENSOR_TORCH_OPS = {"add": operator.add, "sub": operator.sub, "mul": operator.mul,
                    "div": operator.truediv, "pow": operator.pow,
                    "maximum": lambda a, b: a.maximum(b) if isinstance(a, ember.Tensor)
                    else torch.maximum(a, b)}
RANKS = [((3,), (3,)), ((3,), ()), ((), (3,)), ((), ())]


@requires_torch
@pytest.mark.parametrize("sa,sb", RANKS, ids=lambda s: "x".join(map(str, s)) or "0d")
@pytest.mark.parametrize("da", ALL)
@pytest.mark.parametrize("db", ALL)
@pytest.mark.parametrize("op", list(TENSOR_TORCH_OPS))
def test_promotion_matches_torch_tensor_tensor(op, da, db, sa, sb):
    """Every dtype pair, dimensioned and 0-d: same result dtype and values as
    PyTorch, or an error where PyTorch raises one."""
    f = TENSOR_TORCH_OPS[op]
    _check_against_torch(lambda: f(_torch_or_ember(ember, da, sa), _torch_or_ember(ember, db, sb)),
                         lambda: f(_torch_or_ember(torch, da, sa), _torch_or_ember(torch, db, sb)))


SCALAR_TORCH_OPS = {k: v for k, v in TENSOR_TORCH_OPS.items() if k != "maximum"}


@requires_torch
@pytest.mark.parametrize("shape", [(3,), ()], ids=["dim", "0d"])
@pytest.mark.parametrize("scalar", [2, -1, 2.5, True], ids=repr)
@pytest.mark.parametrize("side", ["tensor-op-scalar", "scalar-op-tensor"])
@pytest.mark.parametrize("dtype", ALL)
@pytest.mark.parametrize("op", list(SCALAR_TORCH_OPS))
def test_promotion_matches_torch_python_scalar(op, dtype, side, scalar, shape):
    f = SCALAR_TORCH_OPS[op]

    def run(lib):
        x = _torch_or_ember(lib, dtype, shape)
        return f(x, scalar) if side == "tensor-op-scalar" else f(scalar, x)
    _check_against_torch(lambda: run(ember), lambda: run(torch))


@requires_torch
@pytest.mark.parametrize("op", ["neg", "exp", "log", "tanh", "sigmoid", "relu"])
@pytest.mark.parametrize("dtype", ALL)
def test_unary_dtype_matches_torch(op, dtype):
    _check_against_torch(lambda: getattr(ember, op)(_torch_or_ember(ember, dtype, (3,))),
                         lambda: getattr(torch, op)(_torch_or_ember(torch, dtype, (3,))))


# ====================================================================================
# Reductions: sum and mean
# ====================================================================================

REDUCE_DIMS = [None, 0, 1, 2, -1, -3, (0, 2), (2, 0), (-1, 0), (0, 1, 2), ()]


def np_sum(a, dim, keepdim):
    """NumPy's sum with PyTorch's dtypes: ints and bools sum to int64;
    floats accumulate in float64 (ember accumulates in double too)."""
    axis = None if dim == () else dim
    acc = np.int64 if a.dtype.kind in "bi" else np.float64
    return np.sum(a.astype(acc), axis=axis, keepdims=keepdim)


@pytest.mark.parametrize("keepdim", [False, True])
@pytest.mark.parametrize("dim", REDUCE_DIMS, ids=repr)
@pytest.mark.parametrize("dtype", ALL)
def test_sum(dtype, dim, keepdim):
    a = sample(dtype, (3, 4, 5), seed=20)
    x = ember.tensor(a)
    out = dtype if dtype in FLOATS else "int64"
    expected = np_sum(a, dim, keepdim).astype(NP_DTYPES[out])
    # float sums: one rounding of a double accumulation vs NumPy's pairwise
    # float64 sum, then both rounded to the result dtype.
    tol = dict(rtol=1e-6, atol=1e-6) if dtype == "float32" else dict(rtol=1e-12, atol=1e-12)
    kwargs = {} if dim is None else {"dim": dim}
    assert_close(x.sum(keepdim=keepdim, **kwargs), expected, **tol)
    assert_close(ember.sum(x, keepdim=keepdim, **kwargs), expected, **tol)


@pytest.mark.parametrize("keepdim", [False, True])
@pytest.mark.parametrize("dim", REDUCE_DIMS, ids=repr)
@pytest.mark.parametrize("dtype", FLOATS)
def test_mean(dtype, dim, keepdim):
    a = sample(dtype, (3, 4, 5), seed=21)
    x = ember.tensor(a)
    axis = None if dim == () else dim
    expected = np.mean(a.astype(np.float64), axis=axis, keepdims=keepdim).astype(a.dtype)
    tol = dict(rtol=1e-6, atol=1e-6) if dtype == "float32" else dict(rtol=1e-12, atol=1e-12)
    kwargs = {} if dim is None else {"dim": dim}
    assert_close(x.mean(keepdim=keepdim, **kwargs), expected, **tol)
    assert_close(ember.mean(x, keepdim=keepdim, **kwargs), expected, **tol)


@pytest.mark.parametrize("layout", sorted(NON_CONTIGUOUS))
@pytest.mark.parametrize("dim", [None, 0, -1, (0, 1)], ids=repr)
def test_sum_mean_non_contiguous(layout, dim):
    x, a = make(layout, "float64", seed=22)  # every such layout has >= 2 dims
    assert_close(x.sum(dim), np_sum(a, dim, False), rtol=1e-12, atol=1e-12)
    axis = None if dim is None else dim
    assert_close(x.mean(dim), np.mean(a, axis=axis), rtol=1e-12, atol=1e-12)


def test_int_and_bool_sums_are_int64():
    assert_close(ember.tensor([[True, False], [True, True]]).sum(), np.int64(3))
    assert_close(ember.tensor([[True, False], [True, True]]).sum(0), np.array([2, 1]))
    assert_close(ember.tensor([2**62, 2**62, -5]).sum(), np.int64(2**63 - 5))


@pytest.mark.parametrize("dtype", ["int64", "bool"])
def test_mean_of_int_raises(dtype):
    with pytest.raises(RuntimeError, match="floating point"):
        t_(dtype).mean()
    with pytest.raises(RuntimeError, match="floating point"):
        t_(dtype).mean(0)


def test_mean_with_dtype_argument():
    assert_close(t_("int64").mean(dtype=ember.float32), np.float32(2.0))
    assert_close(t_("int64").sum(dtype=ember.float64), np.float64(6.0))


def test_sum_mean_of_0d():
    x = ember.tensor(5.0)
    for r in (x.sum(), x.sum(0), x.sum(-1), x.mean(), x.sum(0, keepdim=True)):
        assert_close(r, np.float32(5.0))


@pytest.mark.parametrize("shape,dim,sum_expected", [
    ((0,), None, np.float32(0)),
    ((2, 0, 3), None, np.float32(0)),
    ((2, 0, 3), 1, np.zeros((2, 3), np.float32)),
    ((2, 0, 3), (0, 1), np.zeros(3, np.float32)),
    ((2, 0, 3), 2, np.zeros((2, 0), np.float32)),  # nothing reduced away: empty result
], ids=str)
def test_empty_reductions(shape, dim, sum_expected):
    """sum of nothing is 0; mean of nothing is nan (0/0), as in PyTorch."""
    x = ember.zeros(*shape)
    assert_close(x.sum(dim), sum_expected)
    mean_expected = np.full_like(sum_expected, np.nan) if sum_expected.size else sum_expected
    assert_close(x.mean(dim), mean_expected)
    assert_close(ember.zeros(*shape, dtype=ember.int64).sum(dim), sum_expected.astype(np.int64))
    assert_close(ember.zeros(*shape, dtype=ember.bool).sum(dim), sum_expected.astype(np.int64))


def test_large_reductions():
    """1<<20 float32 values, and a column sum of a (1000, 300) matrix.
    ember accumulates float32 in double and rounds once, so the result is
    within 1 float32 ulp (~6e-8 relative) of the float64 sum, plus double
    rounding of order n * 1e-16; rtol=1e-6 for totals whose magnitude may be
    much smaller than the sum of magnitudes is covered by atol=1e-4."""
    rng = np.random.default_rng(30)
    v = rng.standard_normal(1 << 20).astype(np.float32)
    x = ember.from_numpy(v)
    assert_close(x.sum(), np.float32(v.astype(np.float64).sum()), rtol=1e-6, atol=1e-4)
    assert_close(x.mean(), np.float32(v.astype(np.float64).mean()), rtol=1e-6, atol=1e-9)
    m = rng.standard_normal((1000, 300)).astype(np.float32)
    e = ember.from_numpy(m)
    assert_close(e.sum(0), m.astype(np.float64).sum(0).astype(np.float32), rtol=1e-6, atol=1e-4)
    assert_close(e.sum(1), m.astype(np.float64).sum(1).astype(np.float32), rtol=1e-6, atol=1e-4)
    assert_close(e.T.sum(1), m.astype(np.float64).sum(0).astype(np.float32), rtol=1e-6, atol=1e-4)
    ones = ember.ones(1 << 20, dtype=ember.int64)
    assert_close(ones.sum(), np.int64(1 << 20))


def test_reductions_do_not_depend_on_thread_count():
    """Sums are cut into fixed blocks, so the result is bit-identical."""
    rng = np.random.default_rng(31)
    x = ember.from_numpy(rng.standard_normal((300, 5000)).astype(np.float32))
    old = ember.get_num_threads()
    try:
        ember.set_num_threads(1)
        r1 = [x.sum().item(), x.sum(0).numpy().copy(), x.sum(1).numpy().copy()]
        ember.set_num_threads(2)
        r2 = [x.sum().item(), x.sum(0).numpy().copy(), x.sum(1).numpy().copy()]
    finally:
        ember.set_num_threads(old)
    assert r1[0] == r2[0]
    np.testing.assert_array_equal(r1[1], r2[1])
    np.testing.assert_array_equal(r1[2], r2[2])


# ====================================================================================
# matmul
# ====================================================================================

MATMUL_SHAPES = [
    ((4,), (4,)), ((3, 4), (4,)), ((4,), (4, 5)), ((3, 4), (4, 5)),
    ((2, 3, 4), (4, 5)), ((3, 4), (2, 4, 5)), ((2, 3, 4), (2, 4, 5)),
    ((2, 1, 3, 4), (5, 4, 2)), ((1, 3, 4), (6, 4, 5)), ((4,), (2, 4, 5)), ((2, 3, 4), (4,)),
    ((1, 1), (1, 1)), ((3, 0), (0, 5)), ((0,), (0,)), ((0, 4), (4, 5)), ((2, 0, 4), (4, 5)),
]


def matmul_tolerance(dtype, k):
    """BLAS sums k products in its own order: error grows like k * eps."""
    if dtype == "int64":
        return dict(rtol=0, atol=0)
    eps = 1.2e-7 if dtype == "float32" else 2.3e-16
    return dict(rtol=0, atol=max(k, 1) * eps * 16)  # |a|,|b| <= ~4 here: |products| <= 16


@pytest.mark.parametrize("sa,sb", MATMUL_SHAPES, ids=str)
@pytest.mark.parametrize("dtype", NUMERIC)
def test_matmul(dtype, sa, sb):
    a, b = sample(dtype, sa, seed=40), sample(dtype, sb, seed=41)
    expected = np.matmul(a, b)
    tol = matmul_tolerance(dtype, sa[-1])
    x, y = ember.tensor(a), ember.tensor(b)
    assert_close(x @ y, expected, **tol)
    assert_close(ember.matmul(x, y), expected, **tol)
    assert_close(x.matmul(y), expected, **tol)


@pytest.mark.parametrize("dtype", NUMERIC)
def test_matmul_transposed_and_strided_operands(dtype):
    a, b = sample(dtype, (5, 3), seed=42), sample(dtype, (5, 4), seed=43)
    x, y = ember.tensor(a), ember.tensor(b)
    tol = matmul_tolerance(dtype, 5)
    assert_close(x.T @ y, a.T @ b, **tol)                       # a.T @ b
    assert_close(y.T @ x, b.T @ a, **tol)
    assert_close(x.T @ x, a.T @ a, **tol)                       # same storage twice
    assert_close(x @ x.T, a @ a.T, **matmul_tolerance(dtype, 3))
    assert_close(y.transpose(0, 1) @ ember.tensor(a[:, 0]), b.T @ a[:, 0], **tol)
    c = sample(dtype, (4, 10), seed=44)
    xs = ember.from_numpy(c[:, ::2])                            # column stride 2
    assert_close(xs @ ember.tensor(a), c[:, ::2] @ a, **tol)
    col = ember.tensor(sample(dtype, (5, 1), seed=45)).expand(5, 3)   # stride 0
    assert_close(col.T @ x, np.broadcast_to(col.numpy(), (5, 3)).T @ a, **tol)
    p = ember.tensor(sample(dtype, (4, 2, 5), seed=46)).permute(1, 0, 2)  # (2, 4, 5)
    assert_close(p @ y, p.numpy() @ b, **tol)


def test_matmul_large_float32_vs_float64():
    """A (128, 512) @ (512, 64) product against NumPy in float64: each output
    sums 512 products of N(0,1) values, so the float32 error is ~sqrt(512)
    * eps * |row|*|col|; rtol/atol of 1e-4 is far above that."""
    rng = np.random.default_rng(47)
    a = rng.standard_normal((128, 512)).astype(np.float32)
    b = rng.standard_normal((512, 64)).astype(np.float32)
    expected = (a.astype(np.float64) @ b.astype(np.float64)).astype(np.float32)
    assert_close(ember.from_numpy(a) @ ember.from_numpy(b), expected, rtol=1e-4, atol=1e-4)


BLOCKED_MATMULS = [  # name, a's shape, b's shape, product, its inner dim
    ("rows, with a tail", (200, 300), (300, 100), lambda a, b: a @ b, 300),
    ("columns, b transposed", (40, 300), (500, 300), lambda a, b: a @ b.T, 300),
    ("a transposed", (300, 130), (300, 90), lambda a, b: a.T @ b, 300),
    ("three batches", (3, 100, 64), (3, 64, 120), lambda a, b: a @ b, 64),
    ("broadcast batch", (3, 1, 90, 64), (2, 64, 70), lambda a, b: a @ b, 64),
    ("folded batch", (4, 50, 64), (64, 33), lambda a, b: a @ b, 64),
    ("k of 2", (600, 2), (2, 800), lambda a, b: a @ b, 2),
    ("many small batches", (300, 4, 5), (300, 5, 3), lambda a, b: a @ b, 5),
]


@pytest.mark.parametrize("threads", [1, 2, 3, 4])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name,sa,sb,fn,k", BLOCKED_MATMULS, ids=[c[0] for c in BLOCKED_MATMULS])
def test_matmul_cut_into_blocks_over_the_pool(name, sa, sb, fn, k, dtype, threads):
    """GEMMs run as blocks of rows, columns or batches on ember's pool, one
    single-threaded BLAS call each: every thread count and cut gives NumPy's
    product, tails past the 16-row alignment included."""
    a, b = sample(dtype, sa, seed=48), sample(dtype, sb, seed=49)
    expected = fn(a.astype(np.float64), b.astype(np.float64)).astype(NP_DTYPES[dtype])
    old = ember.get_num_threads()
    try:
        ember.set_num_threads(threads)
        got = fn(ember.tensor(a), ember.tensor(b))
    finally:
        ember.set_num_threads(old)
    assert_close(got, expected, **matmul_tolerance(dtype, k))


def test_matmul_leaves_openblas_thread_count_as_it_was():
    """ember's GEMMs set OpenBLAS to one thread while they run (its threads
    would fight the pool's); NumPy shares the library, so the count must be
    put back afterwards."""
    import ctypes
    try:
        lib = ctypes.CDLL("libopenblas.so.0")
        lib.openblas_get_num_threads()
    except (OSError, AttributeError) as e:
        pytest.skip(f"libopenblas.so.0 not loadable here: {e}")
    before = lib.openblas_get_num_threads()
    x = ember.randn(256, 256)
    (x @ x).sum().item()
    assert lib.openblas_get_num_threads() == before


def test_matmul_empty_k_gives_zeros():
    for dtype in NUMERIC:
        x = ember.zeros(3, 0, dtype=EM_DTYPES[dtype])
        y = ember.zeros(0, 2, dtype=EM_DTYPES[dtype])
        assert_close(x @ y, np.zeros((3, 2), NP_DTYPES[dtype]))


@pytest.mark.parametrize("sa,sb", [((3, 4), (5, 6)), ((4,), (5,)), ((2, 3), (2,)),
                                   ((2, 3, 4), (3, 4, 5)), ((7,), (3, 4))], ids=str)
def test_matmul_inner_dim_mismatch(sa, sb):
    with pytest.raises(RuntimeError, match="matmul"):
        ember.ones(*sa) @ ember.ones(*sb)


@pytest.mark.parametrize("da,db", [("float32", "float64"), ("int64", "float32"),
                                   ("float64", "int64")])
def test_matmul_dtype_mismatch(da, db):
    with pytest.raises(RuntimeError, match="same dtype"):
        ember.ones(2, 3, dtype=EM_DTYPES[da]) @ ember.ones(3, 2, dtype=EM_DTYPES[db])


def test_matmul_bool_and_0d_rejected():
    with pytest.raises(RuntimeError, match="bool"):
        ember.ones(2, 2, dtype=ember.bool) @ ember.ones(2, 2, dtype=ember.bool)
    with pytest.raises(RuntimeError, match="at least 1-D"):
        ember.tensor(2.0) @ ember.ones(3)


# ====================================================================================
# Views: reshape, view, transpose, permute, expand, contiguous, .T, t()
# ====================================================================================

def shares_memory(x, y):
    return np.shares_memory(x.numpy(), y.numpy())


VIEW_CASES = [
    # (name, ember function, NumPy function, base shape)
    ("reshape", lambda x: x.reshape(4, 6), lambda a: a.reshape(4, 6), (2, 3, 4)),
    ("reshape(-1)", lambda x: x.reshape(-1), lambda a: a.reshape(-1), (2, 3, 4)),
    ("reshape(2,-1,3)", lambda x: x.reshape(2, -1, 3), lambda a: a.reshape(2, -1, 3), (2, 3, 4)),
    ("reshape(tuple)", lambda x: x.reshape((6, 4)), lambda a: a.reshape(6, 4), (2, 3, 4)),
    ("reshape([])", lambda x: x.reshape([]), lambda a: a.reshape(()), (1, 1)),
    ("ember.reshape", lambda x: ember.reshape(x, (3, 8)), lambda a: a.reshape(3, 8), (2, 3, 4)),
    ("reshape-empty", lambda x: x.reshape(3, 0, 5), lambda a: a.reshape(3, 0, 5), (2, 0, 3)),
    ("view", lambda x: x.view(6, 4), lambda a: a.reshape(6, 4), (2, 3, 4)),
    ("view(-1)", lambda x: x.view(-1), lambda a: a.reshape(-1), (2, 3, 4)),
    ("transpose", lambda x: x.transpose(0, 2), lambda a: a.transpose(2, 1, 0), (2, 3, 4)),
    ("transpose-neg", lambda x: x.transpose(-1, 0), lambda a: a.transpose(2, 1, 0), (2, 3, 4)),
    ("ember.transpose", lambda x: ember.transpose(x, 1, 2), lambda a: a.transpose(0, 2, 1),
     (2, 3, 4)),
    ("permute", lambda x: x.permute(1, 2, 0), lambda a: a.transpose(1, 2, 0), (2, 3, 4)),
    ("permute-tuple", lambda x: x.permute((2, 0, 1)), lambda a: a.transpose(2, 0, 1), (2, 3, 4)),
    ("permute-neg", lambda x: x.permute(-1, 0, 1), lambda a: a.transpose(2, 0, 1), (2, 3, 4)),
    ("ember.permute", lambda x: ember.permute(x, (1, 0, 2)), lambda a: a.transpose(1, 0, 2),
     (2, 3, 4)),
    (".T", lambda x: x.T, lambda a: a.T, (2, 3, 4)),
    (".T-1d", lambda x: x.T, lambda a: a.T, (5,)),
    ("t()", lambda x: x.t(), lambda a: a.T, (3, 4)),
    ("t()-1d", lambda x: x.t(), lambda a: a, (4,)),
    ("expand", lambda x: x.expand(2, 3, 4), lambda a: np.broadcast_to(a, (2, 3, 4)), (3, 1)),
    ("expand(-1)", lambda x: x.expand(2, -1, 4), lambda a: np.broadcast_to(a, (2, 3, 4)),
     (3, 1)),
    ("expand-tuple", lambda x: x.expand((5, 3)), lambda a: np.broadcast_to(a, (5, 3)), (3,)),
    ("expand-0d", lambda x: x.expand(2, 2), lambda a: np.broadcast_to(a, (2, 2)), ()),
    ("expand-to-0", lambda x: x.expand(0, 3), lambda a: np.broadcast_to(a, (0, 3)), (1, 3)),
    ("permute-0d", lambda x: x.permute(), lambda a: a, ()),
]


@pytest.mark.parametrize("name,em_fn,np_fn,shape", VIEW_CASES, ids=[c[0] for c in VIEW_CASES])
def test_views_share_memory(name, em_fn, np_fn, shape):
    """Values equal NumPy's, and writes to the base are seen through the view."""
    a = np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape)
    base = ember.tensor(a)
    v = em_fn(base)
    assert_close(v, np_fn(a))
    if v.numel() == 0:
        return
    assert shares_memory(v, base)
    base.numpy()[...] += 100  # through the base's NumPy view ...
    assert_close(v, np_fn(a + np.float32(100)))  # ... visible through the view


def test_view_strides_match_numpy():
    x = ember.zeros(2, 3, 4)
    assert x.stride() == (12, 4, 1)
    assert x.T.stride() == (1, 4, 12)
    assert x.permute(1, 0, 2).stride() == (4, 12, 1)
    assert x.transpose(0, 1).shape == (3, 2, 4)
    assert ember.zeros(3, 1).expand(3, 5).stride() == (1, 0)
    assert ember.zeros(3).expand(2, 3).stride() == (0, 1)


def test_reshape_copies_when_not_viewable():
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    x = ember.tensor(a)
    r = x.T.reshape(6)  # (3,2) with strides (1,3): no view can express this
    assert_close(r, a.T.reshape(6))
    assert r.is_contiguous()
    x.numpy()[0, 0] = -1.0  # the copy is independent of the base
    assert r.numpy()[0] == 0.0
    e = ember.tensor(a[:, :1]).expand(2, 4)  # stride-0 dims
    assert_close(e.reshape(8), np.broadcast_to(a[:, :1], (2, 4)).reshape(8))


def test_reshape_views_when_possible():
    x = ember.zeros(4, 6)
    v = x.T.reshape(6, 2, 2)  # splitting the strided dim keeps it a view
    assert shares_memory(v, x)
    w = x.reshape(2, 2, 6).transpose(0, 1).reshape(2, 12)  # not viewable: copy
    assert_close(w, np.zeros((2, 12), np.float32))
    assert not shares_memory(w, x)


def test_view_refuses_to_copy():
    x = ember.zeros(2, 3)
    with pytest.raises(RuntimeError, match=r"reshape"):
        x.T.view(6)
    with pytest.raises(RuntimeError, match=r"reshape"):
        x.T.view(-1)


def test_contiguous():
    a = np.arange(12.0).reshape(3, 4)
    x = ember.tensor(a)
    assert x.is_contiguous()
    assert x.contiguous() is x  # already contiguous: the same object
    assert ember.contiguous(x) is x
    t = x.T
    assert not t.is_contiguous()
    c = t.contiguous()
    assert c is not t and c.is_contiguous() and not shares_memory(c, x)
    assert_close(c, a.T)
    assert c.stride() == (3, 1)


def test_zero_size_tensors_are_contiguous_as_in_pytorch():
    import torch
    for shape in [(2, 0, 3), (0,), (3, 0), (0, 4, 1)]:
        x, t = ember.zeros(*shape), torch.zeros(*shape)
        pairs = [(x, t), (x.transpose(0, -1), t.transpose(0, -1))]
        if len(shape) > 1:
            pairs.append((x[:, ::2], t[:, ::2]))
        for a, b in pairs:
            assert a.is_contiguous() == b.is_contiguous() and a.stride() == b.stride(), (shape, a.stride())
            assert a.contiguous() is a


def test_transpose_of_1d_and_0d():
    x = ember.tensor([1.0, 2.0])
    assert_close(x.transpose(0, -1), np.array([1.0, 2.0], np.float32))
    assert_close(ember.tensor(3.0).T, np.float32(3.0))


# ====================================================================================
# Factories and random numbers
# ====================================================================================

FACTORY_CASES = [
    # (description, function, expected)
    ("zeros(2,3)", lambda: ember.zeros(2, 3), np.zeros((2, 3), np.float32)),
    ("zeros((2,3))", lambda: ember.zeros((2, 3)), np.zeros((2, 3), np.float32)),
    ("zeros([2,3])", lambda: ember.zeros([2, 3]), np.zeros((2, 3), np.float32)),
    ("zeros()", lambda: ember.zeros(()), np.zeros((), np.float32)),
    ("zeros(0)", lambda: ember.zeros(0), np.zeros(0, np.float32)),
    ("zeros int64", lambda: ember.zeros(3, dtype=ember.int64), np.zeros(3, np.int64)),
    ("zeros bool", lambda: ember.zeros(3, dtype=ember.bool), np.zeros(3, bool)),
    ("ones", lambda: ember.ones(2, 2), np.ones((2, 2), np.float32)),
    ("ones float64", lambda: ember.ones(2, dtype=ember.float64), np.ones(2)),
    ("ones bool", lambda: ember.ones(2, dtype=ember.bool), np.ones(2, bool)),
    ("ones device=cpu", lambda: ember.ones(2, device="cpu"), np.ones(2, np.float32)),
    ("full int", lambda: ember.full((2,), 3), np.full(2, 3, np.int64)),
    ("full bool", lambda: ember.full((2,), True), np.full(2, True)),
    ("full float", lambda: ember.full((2, 2), 1.5), np.full((2, 2), 1.5, np.float32)),
    ("full int dtype=float64", lambda: ember.full((2,), 3, dtype=ember.float64),
     np.full(2, 3.0)),
    ("full float dtype=int64", lambda: ember.full((2,), 2.0, dtype=ember.int64),
     np.full(2, 2, np.int64)),
    ("full -inf", lambda: ember.full((1,), float("-inf")), np.full(1, -np.inf, np.float32)),
    ("full 2**53+1", lambda: ember.full((1,), 2**53 + 1), np.full(1, 2**53 + 1, np.int64)),
    ("full -2**63", lambda: ember.full((1,), -2**63), np.full(1, -2**63, np.int64)),
    ("arange(5)", lambda: ember.arange(5), np.arange(5, dtype=np.int64)),
    ("arange(2,7)", lambda: ember.arange(2, 7), np.arange(2, 7, dtype=np.int64)),
    ("arange(1,10,3)", lambda: ember.arange(1, 10, 3), np.arange(1, 10, 3, dtype=np.int64)),
    ("arange(5,0,-2)", lambda: ember.arange(5, 0, -2), np.array([5, 3, 1], np.int64)),
    ("arange(5.0)", lambda: ember.arange(5.0), np.arange(5, dtype=np.float32)),
    ("arange(0,1,0.25)", lambda: ember.arange(0, 1, 0.25), np.arange(0, 1, 0.25, np.float32)),
    ("arange(1,2.5)", lambda: ember.arange(1, 2.5), np.array([1.0, 2.0], np.float32)),
    ("arange(0.5,3)", lambda: ember.arange(0.5, 3), np.array([0.5, 1.5, 2.5], np.float32)),
    ("arange(3,3)", lambda: ember.arange(3, 3), np.zeros(0, np.int64)),
    ("arange dtype", lambda: ember.arange(3, dtype=ember.float64), np.arange(3.0)),
    ("arange kw", lambda: ember.arange(start=1, end=4, step=1), np.arange(1, 4)),
    ("arange(0-d tensor)", lambda: ember.arange(ember.tensor(3)), np.arange(3)),
    ("arange(-1,1,0.1) length", lambda: ember.arange(-1, 1, 0.1),
     (-1 + np.arange(20) * 0.1).astype(np.float32)),
]


@pytest.mark.parametrize("desc,fn,expected", FACTORY_CASES, ids=[c[0] for c in FACTORY_CASES])
def test_factories(desc, fn, expected):
    """Dtypes inferred like PyTorch (full from its fill value; arange is int64
    unless any argument is a float); values exact (arange computes start +
    i*step in double and rounds once, as NumPy's float64 reference does)."""
    assert_close(fn(), expected)


@requires_torch
@pytest.mark.parametrize("args", [(5,), (2, 7), (1, 10, 3), (5.0,), (0, 1, 0.25), (1, 2.5),
                                  (0.5, 3), (-1, 1, 0.1), (10, 0, -3), (0, 1, 1 / 3)], ids=str)
def test_arange_matches_torch(args):
    e, t = ember.arange(*args), torch.arange(*args)
    assert dtype_name(e.dtype) == dtype_name(t.dtype)
    assert tuple(e.shape) == tuple(t.shape)
    # float32 results: the same double computation rounded once.
    np.testing.assert_allclose(e.numpy(), t.numpy(), rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("args", [(0, 5, 0), (0, 5, -1), (5, 0), (5, 0, 1), (0, 5, 0.0),
                                  (0, float("inf")), (0, 5, float("nan"))], ids=str)
def test_arange_bad_arguments(args):
    with pytest.raises(RuntimeError, match="arange"):
        ember.arange(*args)


@pytest.fixture
def restore_rng_and_threads():
    old = ember.get_num_threads()
    yield
    ember.set_num_threads(old)
    ember.manual_seed(0)


@pytest.mark.parametrize("dtype", FLOATS)
def test_rand_in_unit_interval(dtype, restore_rng_and_threads):
    ember.manual_seed(1)
    x = ember.rand(100_000, dtype=EM_DTYPES[dtype])
    assert dtype_name(x.dtype) == dtype and tuple(x.shape) == (100_000,)
    a = x.numpy()
    assert a.min() >= 0.0 and a.max() < 1.0
    # Uniform on [0,1): mean 1/2, std 1/sqrt(12); the standard error of the
    # mean over 1e5 samples is 0.29/316 ~ 9e-4, so 5e-3 is > 5 sigma.
    assert abs(a.mean() - 0.5) < 5e-3
    assert abs(a.std() - 12 ** -0.5) < 5e-3
    assert len(np.unique(a)) > 99_000  # not stuck on a few values


@pytest.mark.parametrize("dtype", FLOATS)
def test_randn_moments(dtype, restore_rng_and_threads):
    ember.manual_seed(2)
    x = ember.randn(100_000, dtype=EM_DTYPES[dtype])
    assert dtype_name(x.dtype) == dtype
    a = x.numpy().astype(np.float64)
    # Standard errors over 1e5 N(0,1) samples: mean 1/316 ~ 3.2e-3, std
    # ~2.2e-3; the bounds below are ~5 sigma.
    assert abs(a.mean()) < 0.016
    assert abs(a.std() - 1.0) < 0.012
    assert abs(((a > 0).mean()) - 0.5) < 0.008       # symmetric
    assert 0.95 < (np.abs(a) < 1.96).mean() / 0.95 < 1.05
    assert np.isfinite(a).all()


def test_random_shapes_and_default_dtype():
    assert tuple(ember.rand(2, 3).shape) == (2, 3)
    assert tuple(ember.randn((4, 1)).shape) == (4, 1)
    assert tuple(ember.randn().shape) == ()
    assert tuple(ember.rand(0, 3).shape) == (0, 3)
    assert ember.rand(2).dtype is ember.float32 and ember.randn(2).dtype is ember.float32


def test_manual_seed_reproducible(restore_rng_and_threads):
    ember.manual_seed(123)
    a1, b1 = ember.randn(1000).numpy().copy(), ember.rand(7, 3).numpy().copy()
    ember.manual_seed(123)
    a2, b2 = ember.randn(1000).numpy().copy(), ember.rand(7, 3).numpy().copy()
    np.testing.assert_array_equal(a1, a2)
    np.testing.assert_array_equal(b1, b2)
    ember.manual_seed(124)
    a3 = ember.randn(1000).numpy()
    assert not np.array_equal(a1, a3)
    # consecutive draws differ
    ember.manual_seed(123)
    c1, c2 = ember.randn(1000).numpy().copy(), ember.randn(1000).numpy().copy()
    assert not np.array_equal(c1, c2)


@pytest.mark.parametrize("fn", ["rand", "randn"])
def test_random_independent_of_thread_count(fn, restore_rng_and_threads):
    vals = []
    for n in (1, 2):
        ember.set_num_threads(n)
        assert ember.get_num_threads() == n
        ember.manual_seed(99)
        vals.append(getattr(ember, fn)(300_000).numpy().copy())
    np.testing.assert_array_equal(vals[0], vals[1])


# ====================================================================================
# Property-based tests (hypothesis)
# ====================================================================================

# No example database: the tests leave no files behind.
PROPERTY_SETTINGS = settings(max_examples=60, deadline=None, database=None)


@PROPERTY_SETTINGS
@given(shapes=hnp.mutually_broadcastable_shapes(num_shapes=2, min_dims=0, max_dims=4,
                                                min_side=0, max_side=4),
       dtype=st.sampled_from(["float32", "float64", "int64"]),
       op=st.sampled_from(["add", "mul"]),
       seed=st.integers(0, 2**32 - 1))
def test_property_broadcast_add_mul(shapes, dtype, op, seed):
    (sa, sb), result_shape = shapes
    a, b = sample(dtype, sa, seed=seed), sample(dtype, sb, seed=seed + 1)
    expected = getattr(np, {"add": "add", "mul": "multiply"}[op])(a, b)
    r = getattr(ember, op)(ember.tensor(a), ember.tensor(b))
    assert tuple(r.shape) == result_shape
    assert_close(r, expected)  # exact: one IEEE operation per element


@PROPERTY_SETTINGS
@given(shape=hnp.array_shapes(min_dims=1, max_dims=4, min_side=1, max_side=4),
       data=st.data())
def test_property_permute_round_trip(shape, data):
    perm = data.draw(st.permutations(range(len(shape))))
    inverse = list(np.argsort(perm))
    a = np.arange(int(np.prod(shape)), dtype=np.float64).reshape(shape)
    x = ember.tensor(a)
    p = x.permute(*perm)
    assert_close(p, a.transpose(perm))
    assert_close(p.permute(*inverse), a)
    # reshape of a permuted view (a copy unless viewable) matches NumPy's
    assert_close(p.reshape(-1), a.transpose(perm).reshape(-1))
    assert_close(p.contiguous().reshape(shape[::-1]), a.transpose(perm).reshape(shape[::-1]))


@PROPERTY_SETTINGS
@given(shape=hnp.array_shapes(min_dims=0, max_dims=4, min_side=0, max_side=4),
       data=st.data())
def test_property_reshape_round_trip(shape, data):
    n = int(np.prod(shape))
    a = np.arange(n, dtype=np.int64).reshape(shape)
    x = ember.tensor(a)
    flat = x.reshape(-1)
    assert_close(flat, a.reshape(-1))
    assert_close(flat.reshape(shape), a)
    # a random factorisation of n into up to 3 dims, with one -1
    if n > 0:
        d1 = data.draw(st.sampled_from([d for d in range(1, n + 1) if n % d == 0]))
        new = (d1, -1)
        assert_close(x.reshape(*new), a.reshape(new))
        assert_close(x.reshape(*new).reshape(shape), a)
        assert shares_memory(x.reshape(*new), x)
