"""Differential testing against PyTorch: run one function with `ember` and
with `torch` as its module argument, on the same input values, and compare
what comes back.

ember spells its API like PyTorch's, so a case is written once:

    check(lambda m, x, y: m.where(x > 0, x, y), arr("float32", (3, 4)), arr("int64", (4,)))

Inputs are `Arg`s (a NumPy array plus the dtype to convert it to on each
side, which reaches bfloat16 that NumPy lacks) or plain Python values.
Results may be tensors, numbers, bools, or (named) tuples and lists of them.
When PyTorch raises, ember must raise the same exception type (or a
subclass), unless PyTorch 1.13's CPU build simply lacks a kernel for a half
type ("not implemented for 'Half'"), where ember, which has one, must match
PyTorch run in float32 and rounded.

Tolerances per result dtype: float results agree to a few ulp of their
dtype (ember's float32 transcendentals are polynomials within 3 ulp, see
include/ember/ops_math.h), integer and bool results exactly.
"""

import numbers

import numpy as np
import pytest

import ember

try:
    import torch
except ImportError:
    torch = None

FLOAT_DTYPES = ("float32", "float64", "float16", "bfloat16")
INT_DTYPES = ("int64", "int32", "int16", "int8", "uint8")
ALL_DTYPES = FLOAT_DTYPES + INT_DTYPES + ("bool",)

# rtol, atol by result dtype. float16 keeps 11 significant bits, bfloat16 8:
# a result computed in float32 and rounded may differ by one ulp of those.
TOLERANCES = {
    "float64": (1e-12, 1e-14),
    "float32": (1e-5, 1e-6),
    "float16": (2e-3, 1e-5),
    "bfloat16": (1.6e-2, 1e-5),
}


class Arg:
    """An input: `values` (a NumPy array) as a tensor of `dtype` on each side,
    optionally through `view(m, t)` (a transpose, a slice, ...)."""

    def __init__(self, values, dtype, view=None, widen=False):
        self.values = np.asarray(values)
        self.dtype = dtype
        self.view = view
        self.widen = widen  # the same values, then converted to float32

    def make(self, m):
        src = self.values
        if self.dtype == "bfloat16":
            src = src.astype(np.float32)
        t = m.from_numpy(np.array(src, order="C", copy=True))  # (ascontiguousarray makes 0-d 1-d)
        t = t.to(getattr(m, self.dtype))
        t = self.view(m, t) if self.view else t
        return t.float() if self.widen else t

    def __repr__(self):
        return f"Arg({self.dtype}{list(self.values.shape)})"


def arr(dtype, shape, kind="any", seed=0, view=None):
    """Deterministic values of `dtype`: floats normal x2 (kind="positive":
    |x| + 0.1, "unit": in (-1, 1)), ints in [-5, 5] ([0, 9] for uint8,
    [1, 5] when positive), bools at random."""
    rng = np.random.default_rng(seed)
    if dtype == "bool":
        v = rng.random(shape) < 0.5
    elif dtype in INT_DTYPES:
        lo, hi = (1, 6) if kind == "positive" else (0, 10) if dtype == "uint8" else (-5, 6)
        v = rng.integers(lo, hi, shape)
    else:
        v = rng.standard_normal(shape) * 2
        if kind == "positive":
            v = np.abs(v) + 0.1
        elif kind == "unit":
            v = np.tanh(v)
    return Arg(np.asarray(v), dtype, view)


def _dtype_name(dt):
    return str(dt).split(".")[-1]


def _flat(result):
    """Tensors and Python values of a (nested) result, with the structure's
    shape as a signature."""
    if isinstance(result, (tuple, list)):
        items, sig = [], []
        for r in result:
            i, s = _flat(r)
            items += i
            sig.append(s)
        named = hasattr(result, "_fields") or hasattr(result, "n_fields")  # namedtuple, structseq
        return items, (("named " if named else "") + type(result).__name__, sig)
    return [result], "leaf"


def _as_numpy(t):
    if _dtype_name(t.dtype) == "bfloat16":
        t = t.float()
    return t.numpy() if not hasattr(t, "detach") else t.detach().numpy()


def compare(got, want, rtol=None, atol=None, what=""):
    """Asserts that ember's result `got` matches PyTorch's `want`."""
    g_items, g_sig = _flat(got)
    w_items, w_sig = _flat(want)
    assert g_sig == w_sig, f"{what}result structure: ember {g_sig}, torch {w_sig}"
    for k, (g, w) in enumerate(zip(g_items, w_items)):
        where = f"{what}result {k}: " if len(g_items) > 1 else what
        if torch is not None and isinstance(w, torch.Tensor):
            assert isinstance(g, ember.Tensor), f"{where}ember gives {type(g).__name__}, torch a Tensor"
            dt = _dtype_name(w.dtype)
            assert _dtype_name(g.dtype) == dt, f"{where}dtype: ember {g.dtype}, torch {w.dtype}"
            assert tuple(g.shape) == tuple(w.shape), \
                f"{where}shape: ember {tuple(g.shape)}, torch {tuple(w.shape)}"
            gv, wv = _as_numpy(g), _as_numpy(w)
            if dt in TOLERANCES:
                r, a = TOLERANCES[dt]
                np.testing.assert_allclose(gv.astype(np.float64), wv.astype(np.float64),
                                           rtol=r if rtol is None else rtol,
                                           atol=a if atol is None else atol, equal_nan=True,
                                           err_msg=where)
            else:
                np.testing.assert_array_equal(gv, wv, err_msg=where)
        elif isinstance(w, bool) or w is None or isinstance(w, str):
            assert g == w and type(g) is type(w), f"{where}ember {g!r}, torch {w!r}"
        elif isinstance(w, numbers.Number):
            assert type(g) is type(w), f"{where}type: ember {type(g).__name__}, torch {type(w).__name__}"
            if isinstance(w, float):
                np.testing.assert_allclose(g, w, rtol=1e-6 if rtol is None else rtol,
                                           atol=1e-7 if atol is None else atol, err_msg=where)
            else:
                assert g == w, f"{where}ember {g!r}, torch {w!r}"
        elif isinstance(w, torch.Size):
            assert tuple(g) == tuple(w), f"{where}ember {g}, torch {w}"
        elif isinstance(w, torch.dtype):
            assert _dtype_name(g) == _dtype_name(w), f"{where}ember {g}, torch {w}"
        else:
            raise TypeError(f"compare: cannot compare a {type(w).__name__}")


def _missing_half_kernel(exc):
    s = str(exc)
    return isinstance(exc, RuntimeError) and "not implemented for" in s and \
        ("'Half'" in s or "'BFloat16'" in s)


def _widened(args):
    """The same inputs with half types computed in float32."""
    return [Arg(a.values, a.dtype, a.view, widen=True) if isinstance(a, Arg) and a.dtype in
            ("float16", "bfloat16") else a for a in args]


def check(fn, *args, rtol=None, atol=None):
    """fn(ember, *inputs) must match fn(torch, *inputs)."""
    if torch is None:
        pytest.skip("PyTorch is not installed (Debian: python3-torch)")
    th_args = [a.make(torch) if isinstance(a, Arg) else a for a in args]
    try:
        want = fn(torch, *th_args)
    except Exception as e:  # noqa: BLE001 - any exception PyTorch raises, ember must raise
        if _missing_half_kernel(e):
            half = next(a.dtype for a in args if isinstance(a, Arg) and a.dtype in ("float16", "bfloat16"))
            try:
                want = fn(torch, *[a.make(torch) if isinstance(a, Arg) else a for a in _widened(args)])
            except Exception as e32:  # noqa: BLE001 - not a half-only gap: ember must raise too
                e = e32
            else:
                e = None
                want = _recast(want, getattr(torch, half))
        if e is not None:
            em_args = [a.make(ember) if isinstance(a, Arg) else a for a in args]
            with pytest.raises(type(e)):
                fn(ember, *em_args)
            return None
    em_args = [a.make(ember) if isinstance(a, Arg) else a for a in args]
    got = fn(ember, *em_args)
    compare(got, want, rtol, atol)
    return got


def _recast(result, half):
    if isinstance(result, (tuple, list)):
        return type(result)(_recast(r, half) for r in result)
    if isinstance(result, torch.Tensor) and result.dtype == torch.float32:
        return result.to(half)
    return result


def raises_like_torch(fn, *args, match=None):
    """fn must raise in PyTorch, and ember must raise the same type, with a
    message matching `match` (a regex) when given."""
    if torch is None:
        pytest.skip("PyTorch is not installed (Debian: python3-torch)")
    th_args = [a.make(torch) if isinstance(a, Arg) else a for a in args]
    with pytest.raises(Exception) as th:
        fn(torch, *th_args)
    em_args = [a.make(ember) if isinstance(a, Arg) else a for a in args]
    with pytest.raises(th.type, match=match):
        fn(ember, *em_args)
