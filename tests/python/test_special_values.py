"""Every elementwise op of the table over the values where math libraries
disagree: signed zeros, infinities, NaN, subnormals and the edges of exp's
range, eagerly and compiled, against PyTorch (issue 38, item 15). Where
PyTorch's result is a zero, an infinity or a NaN, ember's must be the same
to the bit class (the zero's sign included); elsewhere within the ops'
stated accuracy (a few ulp). Integer division by zero raises in every
rounding mode (item 14)."""

import math

import numpy as np
import pytest

import ember
from conftest import requires_torch, torch

pytestmark = requires_torch

SPECIAL = [-0.0, 0.0, math.inf, -math.inf, math.nan, 1e-45, -1e-45, 1e-40, -1e-40, 0.5, -0.5, 1.0, -1.0, 2.5,
           -2.5, 20.0, -20.0, 88.7, -88.7, 104.5, -104.5, 710.0, -710.0, 1e30, -1e30]
PAIRS = [-0.0, 0.0, math.inf, -math.inf, math.nan, 1.0, -1.0, 2.5, -2.5, 1e-40]


def torch_fn(name):
    F = torch.nn.functional
    return {"gelu": F.gelu, "gelu_tanh": lambda x: F.gelu(x, approximate="tanh"), "silu": F.silu,
            "softplus": F.softplus, "relu": torch.relu}.get(name) or getattr(torch, name)


def ember_fn(name):
    F = ember.nn.functional
    return {"gelu": F.gelu, "gelu_tanh": lambda x: F.gelu(x, approximate="tanh"), "silu": F.silu,
            "softplus": F.softplus, "relu": ember.relu}.get(name) or getattr(ember, name)


UNARY = ["neg", "abs", "sign", "exp", "exp2", "expm1", "log", "log2", "log1p", "sqrt", "rsqrt", "reciprocal", "sin",
         "cos", "tan", "tanh", "sigmoid", "erf", "relu", "gelu", "gelu_tanh", "silu", "softplus", "floor", "ceil",
         "round", "trunc"]
BINARY = ["add", "sub", "mul", "div", "maximum", "minimum", "pow", "fmod", "remainder", "floor_divide", "atan2"]
BINARY = [b for b in BINARY if hasattr(ember, b)]
# float32 ops are accurate to a few ulp (include/ember/ops_math.h states each)
RTOL = {"float32": 3e-6, "float64": 1e-13}


# The exact results, where mpmath has them (60 digits, then rounded to the
# dtype): where PyTorch's kernel is less exact than ember's (it flushes a
# subnormal result to zero, loses a zero's sign, or overflows inside fmod's
# a - trunc(a/b)*b), ember may give the exact value instead of PyTorch's.
mpmath = pytest.importorskip("mpmath")
mp = mpmath.mp
mp.dps = 60
EXACT_UNARY = {
    "neg": lambda x: -x, "abs": abs, "exp": mpmath.exp, "exp2": lambda x: mpmath.power(2, x),
    "expm1": mpmath.expm1, "log": mpmath.log, "log2": lambda x: mpmath.log(x, 2), "log1p": mpmath.log1p,
    "sqrt": mpmath.sqrt, "rsqrt": lambda x: 1 / mpmath.sqrt(x), "reciprocal": lambda x: 1 / x, "sin": mpmath.sin,
    "cos": mpmath.cos, "tan": mpmath.tan, "tanh": mpmath.tanh, "sigmoid": lambda x: 1 / (1 + mpmath.exp(-x)),
    "erf": mpmath.erf, "gelu": lambda x: x * mpmath.ncdf(x), "silu": lambda x: x / (1 + mpmath.exp(-x)),
}
EXACT_BINARY = {
    "fmod": mpmath.fmod, "remainder": lambda a, b: a - b * mpmath.floor(a / b),
    "floor_divide": lambda a, b: mpmath.floor(a / b), "div floor": lambda a, b: mpmath.floor(a / b),
}
# x * g(x) with g > 0: a zero result keeps x's sign (IEEE), which mpmath cannot say
SIGN_OF_INPUT = {"gelu", "gelu_tanh", "silu"}


def exact(name, dtype, args):
    f = EXACT_UNARY.get(name) if len(args) == 1 else EXACT_BINARY.get(name)
    if f is None or not all(math.isfinite(a) for a in args):
        return None
    try:
        v = f(*[mpmath.mpf(a) for a in args])
    except (ValueError, ZeroDivisionError):
        return None
    if not isinstance(v, mpmath.mpf) or mpmath.isnan(v):
        return None
    with np.errstate(over="ignore"):  # (a value past the dtype's range rounds to an infinity)
        r = float(np.array(float(v), dtype=np.float64).astype(dtype)) if abs(v) < 1e308 or mpmath.isinf(v) else \
            math.copysign(math.inf, v)
    if r == 0:
        r = math.copysign(0.0, args[0]) if name in SIGN_OF_INPUT else (math.copysign(0.0, v) if v else None)
    return r


def close(g, w, dtype):
    if math.isnan(w) or math.isinf(w) or w == 0:
        return (math.isnan(g) and math.isnan(w)) or (g == w and math.copysign(1, g) == math.copysign(1, w))
    return math.isfinite(g) and abs(g - w) <= RTOL[dtype] * abs(w) + 1e-300


def compare(got, want, dtype, what, name, inputs):
    """ember's results against PyTorch's, each also accepted if it is the
    exact value where PyTorch's is not (see EXACT_*)."""
    got, want = np.asarray(got, dtype=np.float64).ravel(), np.asarray(want, dtype=np.float64).ravel()
    bad = []
    for i, (g, w) in enumerate(zip(got, want)):
        args = [float(x[i]) for x in inputs]
        if close(g, w, dtype):
            continue
        e = exact(name, dtype, args)
        if e is None or not close(g, e, dtype):
            bad.append((args, g, w, e))
    assert not bad, f"{what}: (inputs, ember, torch, exact) {bad[:6]}"


def special(dtype):
    return np.array(SPECIAL, dtype=dtype)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name", UNARY)
def test_unary_ops_on_special_values(name, dtype):
    x = special(dtype)
    want = torch_fn(name)(torch.tensor(x)).numpy()
    f = ember_fn(name)
    compare(f(ember.tensor(x)).numpy(), want, dtype, f"{name} eager", name, [x])
    compiled = ember.compile(lambda t: f(t) * 1.0)  # (a fused kernel, not a lone op)
    compare(compiled(ember.tensor(x)).numpy(), want, dtype, f"{name} compiled", name, [x])


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name", BINARY)
def test_binary_ops_on_special_values(name, dtype):
    a, b = np.meshgrid(np.array(PAIRS, dtype=dtype), np.array(PAIRS, dtype=dtype))
    a, b = a.ravel(), b.ravel()
    want = getattr(torch, name)(torch.tensor(a), torch.tensor(b)).numpy()
    f = getattr(ember, name)
    compare(f(ember.tensor(a), ember.tensor(b)).numpy(), want, dtype, f"{name} eager", name, [a, b])
    compiled = ember.compile(lambda x, y: f(x, y) * 1.0)
    compare(compiled(ember.tensor(a), ember.tensor(b)).numpy(), want, dtype, f"{name} compiled", name, [a, b])


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("mode", [None, "trunc", "floor"])
def test_division_rounding_modes_on_special_values(mode, dtype):
    a, b = np.meshgrid(np.array(PAIRS, dtype=dtype), np.array(PAIRS, dtype=dtype))
    a, b = a.ravel(), b.ravel()
    want = torch.div(torch.tensor(a), torch.tensor(b), rounding_mode=mode).numpy()
    what = f"div {mode}"
    compare(ember.div(ember.tensor(a), ember.tensor(b), rounding_mode=mode).numpy(), want, dtype, what, what, [a, b])
    compiled = ember.compile(lambda x, y: ember.div(x, y, rounding_mode=mode) * 1.0)
    compare(compiled(ember.tensor(a), ember.tensor(b)).numpy(), want, dtype, f"{what} compiled", what, [a, b])


# ---------------------------------------------------------------- integer division (item 14)

@pytest.mark.parametrize("dtype", ["int64", "int32", "int16", "int8", "uint8"])
@pytest.mark.parametrize("mode", ["trunc", "floor"])
def test_integer_division_by_zero_raises_in_every_rounding_mode(dtype, mode):
    a = ember.tensor([1, 2, 3], dtype=getattr(ember, dtype))
    b = ember.tensor([1, 0, 1], dtype=getattr(ember, dtype))
    with pytest.raises(RuntimeError, match="ZeroDivisionError"):
        ember.div(a, b, rounding_mode=mode)
    compiled = ember.compile(lambda x, y: ember.div(x, y, rounding_mode=mode) + 1)
    with pytest.raises(RuntimeError, match="ZeroDivisionError"):
        compiled(a, b)


@pytest.mark.parametrize("dtype", ["int64", "int32"])
def test_integer_truncating_division_is_exact(dtype):
    """It went through float32 division: 2**24 + 1 came back as 2**24."""
    info = np.iinfo(dtype)
    vals = np.array([info.max, info.min + 1, 2**24 + 1, -(2**24 + 1), 7, -7, 0, 123456789], dtype=dtype)
    divs = np.array([1, -1, 3, -3, 2, 2, 5, -10], dtype=dtype)
    want = torch.div(torch.tensor(vals), torch.tensor(divs), rounding_mode="trunc").numpy()
    got = ember.div(ember.tensor(vals), ember.tensor(divs), rounding_mode="trunc")
    assert got.dtype == getattr(ember, dtype) and got.tolist() == want.tolist()
    compiled = ember.compile(lambda x, y: ember.div(x, y, rounding_mode="trunc") + 0)
    assert compiled(ember.tensor(vals), ember.tensor(divs)).tolist() == want.tolist()
