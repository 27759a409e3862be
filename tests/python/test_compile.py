"""Tests of @ember.compile: results against eager mode, guards, the cache
limit, the disable switches, fallbacks to eager, decorator forms.

Every compiled result is compared with the same function run eagerly on the
same inputs. Tolerance: rtol=1e-5, atol=1e-6, the round-off of a few float32
ops. In practice the results agree bit for bit: elementwise kernels, eager
and fused, share one scalar definition per op (include/ember/ops_math.h),
the fused kernel evaluates the same ops in the same order and dtype (no
fast-math, no reassociation), and matmul and reductions run their eager
kernels inside compiled graphs too. So `assert_same` also asserts exact
equality unless a corpus case opts out (the `exact` column). None does at
present; a case whose kernel may legitimately round differently (say a
reduction split differently across threads) would set it to False and say why.
"""

import contextlib
import inspect
import os
import re
import subprocess
import sys
import textwrap
import warnings

import numpy as np
import pytest

import ember
from conftest import subprocess_env

RTOL, ATOL = 1e-5, 1e-6
THIS_FILE = os.path.abspath(__file__)
HAS_LLVM = ember.compiler.has_llvm()
EXPECTED_BACKEND = "llvm" if HAS_LLVM else "interp"


# ---------------------------------------------------------------- helpers


def T(a):
    """An ember tensor holding a copy of the NumPy array (or scalar) `a`."""
    return ember.from_numpy(np.array(a))


def f32(rng, *shape):
    return T(rng.standard_normal(shape).astype(np.float32))


def f64(rng, *shape):
    return T(rng.standard_normal(shape))


def pos32(rng, *shape):
    """Positive float32 values (for log)."""
    return T(rng.uniform(0.5, 2.0, shape).astype(np.float32))


def i64(rng, *shape, low=-5, high=6):
    return T(rng.integers(low, high, shape, dtype=np.int64))


def nonzero_i64(rng, *shape):
    a = rng.integers(1, 6, shape, dtype=np.int64)
    return T(a * rng.choice(np.array([-1, 1], dtype=np.int64), shape))


def boolean(rng, *shape):
    return T(rng.random(shape) < 0.5)


def to_py(r):
    """Results as NumPy copies, keeping the container structure."""
    if isinstance(r, ember.Tensor):
        return np.array(r.numpy(), copy=True)
    if isinstance(r, (tuple, list)):
        return type(r)(to_py(v) for v in r)
    if isinstance(r, dict):
        return {k: to_py(v) for k, v in r.items()}
    return r


def assert_same(expected, got, exact=True):
    """Same structure, dtypes, shapes; values within RTOL/ATOL, and
    bit-identical when `exact` (NaNs compare equal)."""
    assert type(got) is type(expected), (type(got), type(expected))
    if isinstance(expected, (tuple, list)):
        assert len(got) == len(expected)
        for e, g in zip(expected, got):
            assert_same(e, g, exact)
        return
    if isinstance(expected, dict):
        assert got.keys() == expected.keys()
        for k in expected:
            assert_same(expected[k], got[k], exact)
        return
    if not isinstance(expected, np.ndarray):
        assert got == expected
        return
    assert got.dtype == expected.dtype
    assert got.shape == expected.shape
    if expected.dtype.kind == "f":
        np.testing.assert_allclose(got, expected, rtol=RTOL, atol=ATOL)
    if exact or expected.dtype.kind != "f":
        np.testing.assert_array_equal(got, expected)


def eager(cf, *args, **kwargs):
    """The result of the undecorated function, as NumPy (compiled functions it
    calls run eagerly too)."""
    with ember.compiler.disabled():
        return to_py(cf.__wrapped__(*args, **kwargs))


def stats(cf):
    return cf._stats()


@contextlib.contextmanager
def recorded_warnings():
    """Records every warning, repeats included (no de-duplication)."""
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        yield rec


def ember_messages(record):
    return [str(w.message) for w in record if issubclass(w.category, UserWarning)
            and "ember.compile" in str(w.message)]


def line_of(fn, needle):
    """The line number (in this file) of the first line of fn containing needle."""
    lines, start = inspect.getsourcelines(fn)
    for i, text in enumerate(lines):
        if needle in text:
            return start + i
    raise AssertionError(f"{needle!r} not in {fn.__name__}")


def run_script(code, **env):
    """Runs `code` in a fresh interpreter; returns the CompletedProcess."""
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=subprocess_env(**env),
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc


@pytest.fixture
def rng():
    return np.random.default_rng(1234)


@pytest.fixture(autouse=True)
def compile_enabled():
    """Every test starts and ends with compilation enabled."""
    ember.compiler.enable()
    yield
    ember.compiler.enable()


# ---------------------------------------------------------------- the corpus

W_GLOBAL = ember.from_numpy(np.random.default_rng(7).standard_normal((5, 3)).astype(np.float32))


def c_add_chain(x, y):
    return x + y * 2 - 1


def c_gelu(x):
    return 0.5 * x * (1.0 + ember.tanh(0.7978845608 * (x + 0.044715 * x * x * x)))


def c_silu(x):
    return x * ember.sigmoid(x)


def c_silu_exp(x):
    return x / (1.0 + ember.exp(-x))


def c_softplus(x):
    return ember.log(1.0 + ember.exp(x))


def c_addcmul(x, y):
    return ember.addcmul(y, x, y, value=0.5).relu()


def c_neg_tanh_sub(x, y):
    return ember.sub(ember.tanh(x) * y, ember.neg(x)) / (y * y + 1.0)


def c_log_div(x, y):
    return ember.log(x) / ember.log(y + 1.0)


def c_max_relu(x, y):
    return ember.maximum(x, y).relu() + ember.relu(x - y)


def c_pow(x):
    return ember.pow(x, 2) + x ** 3.0 - 2.0 ** x


def c_scalar_both_sides(x):
    return 3 * x - 1.5 / (x * x + 1) + (2 - x) * 0.25


def c_broadcast(x, b, c):
    return x + b * c  # [4,5] + [5] * [4,1]


def c_broadcast_big_first(x, b, c):
    return c * b + x  # [4,1] * [5] + [4,5]: the operand with more dims first


def c_broadcast_3d(x, y):
    return ember.exp(x) * y - x  # [2,1,4] with [3,1]


def c_sum_all(x):
    return (x * x).sum()


def c_sum_dims(x):
    return x.sum(dim=1, keepdim=True) + ember.sum(x, dim=(0, 2)).reshape(1, 3, 1).sum(0)


def c_mean(x):
    return x.mean(0) - x.mean()


def c_matmul(x, w):
    return x @ w


def c_mlp(x, w, b):
    return ember.relu(x @ w + b)


def c_softmax_like(x, y):
    e = ember.exp(x - ember.maximum(x, y))
    return e / e.sum(dim=-1, keepdim=True)


def c_reshape_transpose(x):
    return (x.reshape(3, 4).transpose(0, 1) * 2.0).contiguous() + 1.0


def c_permute(x):
    return ember.permute(x, (2, 0, 1)) * x.permute(2, 0, 1).sum(0)


def c_expand(x, y):
    return x.expand(3, 4) * y + x


def c_mixed_f64(x, y):
    return x * y + x  # f32 with f64 -> f64


def c_mixed_i64(x, i):
    return x * i + i  # f32 with i64 -> f32


def c_mixed_bool(x, b):
    return x + b * 2.5 + ember.maximum(b, x)  # f32 with bool -> f32


def c_int_div(i, j):
    return i / j + i * 2  # i64 / i64 -> f32


def c_int_arith(i, j):
    return ember.maximum(i * 3 - j, j) + 1


def c_tuple_out(x, y):
    return x + y, x * y, ember.tanh(x)


def c_list_out(x):
    return [ember.exp(x), x.sum(), x]


def c_identity(x):
    return x


def c_captured(x):
    return x @ W_GLOBAL + 1.0


def c_zero_d(x, y):
    return x * 2.0 + ember.exp(y) * x


def c_empty(x):
    return ember.exp(x) * 2.0 + 1.0, x.sum(dim=0)


def c_transposed_input(x):
    return ember.sigmoid(x) * x + 1.0  # called with x = a.T


def c_alpha(x, alpha):
    return ember.relu(x) + alpha * ember.neg(ember.relu(ember.neg(x)))


def c_mode(x, mode):
    if mode == "gelu":
        return c_gelu(x)
    return ember.relu(x)


def c_none_out(x):
    return None


def c_factory_inside(x):
    return x * ember.arange(x.shape[-1]) + ember.maximum(x, ember.zeros(1))


def c_int_times_float_scalar(i):
    return i * 0.1 + 1e10  # i64 with a Python float -> f32


def c_no_args():
    return ember.exp(W_GLOBAL) * 2.0 - W_GLOBAL.sum(dim=0)


def c_matmul_batched(x, w, v):
    return ember.matmul(x, w) @ v  # [2,3,4] @ [4,5] @ [5]


def c_int_reductions(i, b):
    return i ** 2 + i.sum(dim=0) + b.sum()  # bool sum -> i64, int pow


def offset_view(rng, n):
    """A view with stride 3 starting at element 1 of a NumPy buffer."""
    return ember.from_numpy(rng.standard_normal(3 * n + 1).astype(np.float32)[1::3])


def c_huge_int(i):
    return i + (2 ** 60 + 1)  # exact int64 constant: beyond what a double holds


CORPUS = [
    # (name, function, input factory: rng -> positional args, exact)
    ("huge_int_constant", c_huge_int, lambda r: (i64(r, 3),), True),
    ("add_chain", c_add_chain, lambda r: (f32(r, 4, 5), f32(r, 4, 5)), True),
    ("gelu", c_gelu, lambda r: (f32(r, 64, 33),), True),
    ("silu", c_silu, lambda r: (f32(r, 100),), True),
    ("silu_exp", c_silu_exp, lambda r: (f32(r, 7, 9),), True),
    ("softplus", c_softplus, lambda r: (f32(r, 3, 17),), True),
    ("addcmul", c_addcmul, lambda r: (f32(r, 6, 7), f32(r, 7)), True),
    ("neg_tanh_sub", c_neg_tanh_sub, lambda r: (f32(r, 6, 6), f32(r, 6, 6)), True),
    ("log_div", c_log_div, lambda r: (pos32(r, 40), pos32(r, 40)), True),
    ("max_relu", c_max_relu, lambda r: (f32(r, 5, 8), f32(r, 5, 8)), True),
    ("pow", c_pow, lambda r: (pos32(r, 2, 11),), True),
    ("scalar_both_sides", c_scalar_both_sides, lambda r: (f32(r, 13),), True),
    ("broadcast", c_broadcast, lambda r: (f32(r, 4, 5), f32(r, 5), f32(r, 4, 1)), True),
    ("broadcast_big_first", c_broadcast_big_first,
     lambda r: (f32(r, 4, 5), f32(r, 5), f32(r, 4, 1)), True),
    ("broadcast_3d", c_broadcast_3d, lambda r: (f32(r, 2, 1, 4), f32(r, 3, 1)), True),
    ("sum_all", c_sum_all, lambda r: (f32(r, 8, 9),), True),
    ("sum_dims", c_sum_dims, lambda r: (f32(r, 2, 3, 4),), True),
    ("mean", c_mean, lambda r: (f32(r, 6, 4),), True),
    ("matmul", c_matmul, lambda r: (f32(r, 8, 16), f32(r, 16, 4)), True),
    ("matmul_batched", c_matmul_batched,
     lambda r: (f32(r, 2, 3, 4), f32(r, 4, 5), f32(r, 5)), True),
    ("mlp", c_mlp, lambda r: (f32(r, 8, 16), f32(r, 16, 32), f32(r, 32)), True),
    ("softmax_like", c_softmax_like, lambda r: (f32(r, 4, 10), f32(r, 4, 10)), True),
    ("reshape_transpose", c_reshape_transpose, lambda r: (f32(r, 12),), True),
    ("permute", c_permute, lambda r: (f32(r, 2, 3, 4),), True),
    ("expand", c_expand, lambda r: (f32(r, 1, 4), f32(r, 3, 4)), True),
    ("mixed_f64", c_mixed_f64, lambda r: (f32(r, 3, 4), f64(r, 3, 4)), True),
    ("mixed_i64", c_mixed_i64, lambda r: (f32(r, 3, 4), i64(r, 3, 4)), True),
    ("mixed_bool", c_mixed_bool, lambda r: (f32(r, 3, 4), boolean(r, 3, 4)), True),
    ("int_div", c_int_div, lambda r: (i64(r, 10), nonzero_i64(r, 10)), True),
    ("int_arith", c_int_arith, lambda r: (i64(r, 2, 5), i64(r, 5)), True),
    ("int_reductions", c_int_reductions, lambda r: (i64(r, 3, 4), boolean(r, 4)), True),
    ("tuple_out", c_tuple_out, lambda r: (f32(r, 5), f32(r, 5)), True),
    ("list_out", c_list_out, lambda r: (f32(r, 2, 3),), True),
    ("identity", c_identity, lambda r: (f32(r, 3, 3),), True),
    ("captured_global", c_captured, lambda r: (f32(r, 4, 5),), True),
    ("zero_d", c_zero_d, lambda r: (T(np.float32(r.standard_normal())),
                                     T(np.float32(r.standard_normal()))), True),
    ("empty", c_empty, lambda r: (f32(r, 0, 3),), True),
    ("transposed_input", c_transposed_input, lambda r: (f32(r, 5, 7).T,), True),
    ("alpha_scalar_arg", c_alpha, lambda r: (f32(r, 20), 0.125), True),
    ("mode_str_arg", c_mode, lambda r: (f32(r, 20), "gelu"), True),
    ("none_out", c_none_out, lambda r: (f32(r, 2),), True),
    ("factory_inside", c_factory_inside, lambda r: (f32(r, 3, 6),), True),
    ("int_times_float_scalar", c_int_times_float_scalar, lambda r: (i64(r, 9),), True),
    ("no_args_captured", c_no_args, lambda r: (), True),
    ("offset_strided_input", c_silu_exp, lambda r: (offset_view(r, 50),), True),
    ("expanded_input", c_add_chain, lambda r: (f32(r, 1, 6).expand(4, 6), f32(r, 4, 6)), True),
]


@pytest.mark.parametrize("name,fn,make_args,exact", CORPUS, ids=[c[0] for c in CORPUS])
def test_corpus_matches_eager(name, fn, make_args, exact, rng):
    """Compiled results equal eager ones on fresh data; calls after the first
    run the compiled specialisation."""
    cf = ember.compile(fn)
    calls = 4
    for k in range(calls):
        args = make_args(rng)
        expected = eager(cf, *args)
        got = to_py(cf(*args))
        assert_same(expected, got, exact)
        s = stats(cf)
        assert s["traces"] == 1, s
        assert s["compiled_calls"] == k, s  # the first call is the traced one
        assert s["eager_calls"] == 0, s
    specs = cf._specializations()
    assert len(specs) == 1
    assert specs[0]["backend"] == EXPECTED_BACKEND, specs[0]
    assert specs[0]["reason"] == ""


def test_corpus_is_large_enough():
    assert len(CORPUS) >= 25


def test_captured_global_is_by_reference(rng):
    """A captured tensor's in-place changes are seen by later compiled calls."""
    arr = rng.standard_normal((3, 2)).astype(np.float32)
    w = ember.from_numpy(arr)  # shares memory with arr

    def f(x):
        return x @ w

    cf = ember.compile(f)
    x = f32(rng, 4, 3)
    cf(x)
    assert cf._specializations()[0]["captured"] == 1
    assert "%captured0" in cf._graph(0)
    arr[...] = rng.standard_normal((3, 2)).astype(np.float32)
    got = to_py(cf(x))
    assert stats(cf)["compiled_calls"] == 1
    assert_same(to_py(f(x)), got)
    np.testing.assert_allclose(got, x.numpy() @ arr, rtol=RTOL, atol=ATOL)


# ---------------------------------------------------------------- the GELU graph


def test_gelu_graph_is_one_fused_kernel_with_locations(rng):
    """The optimised GELU graph is a single fused node; every op line carries
    this file and the line of the formula."""
    cf = ember.compile(c_gelu)
    x = f32(rng, 32, 32)
    cf(x)
    cf(x)
    text = cf._graph(0)
    line = line_of(c_gelu, "return 0.5")
    assert text.count("fused(") == 1, text

    # Top-level nodes are indented by two spaces, region nodes by four.
    top_ops = re.findall(r"^  %[\w.]+(?:, %[\w.]+)* = (\w+)\(", text, re.M)
    assert top_ops == ["fused"], text
    region_ops = re.findall(r"^    %[\w.]+ = (\w+)\(", text, re.M)
    assert set(region_ops) == {"full", "mul", "add", "tanh"}, region_ops
    assert region_ops.count("tanh") == 1

    op_lines = [ln for ln in text.splitlines() if re.match(r"^\s+%[\w.]+(, %[\w.]+)* = ", ln)]
    assert len(op_lines) == 1 + len(region_ops)
    loc = f'loc("{THIS_FILE}":{line})'
    for ln in op_lines:
        assert loc in ln, (ln, loc)


# ---------------------------------------------------------------- guards


def g_scale(x, s):
    return x * s + 1


def g_opt(x, y):
    if y is None:
        return x * 2.0
    return x * y


GUARD_CASES = [
    # (name, fn, first args, second args (fail exactly one guard))
    ("shape", c_gelu, lambda r: (f32(r, 4, 5),), lambda r: (f32(r, 7),)),
    ("dtype", c_gelu, lambda r: (f32(r, 4, 5),), lambda r: (f64(r, 4, 5),)),
    ("strides", c_silu, lambda r: (f32(r, 6, 6),), lambda r: (f32(r, 6, 6).T,)),
    ("scalar_value", g_scale, lambda r: (f32(r, 5), 2.0), lambda r: (f32(r, 5), 3.0)),
    ("int_vs_float", g_scale, lambda r: (i64(r, 5), 2), lambda r: (i64(r, 5), 2.0)),
    ("bool_vs_int", g_scale, lambda r: (i64(r, 5), True), lambda r: (i64(r, 5), 1)),
    ("str_value", c_mode, lambda r: (f32(r, 9), "gelu"), lambda r: (f32(r, 9), "relu")),
    ("none", g_opt, lambda r: (f32(r, 3), None), lambda r: (f32(r, 3), f32(r, 3))),
]


@pytest.mark.parametrize("name,fn,first,second", GUARD_CASES, ids=[c[0] for c in GUARD_CASES])
def test_guard_miss_traces_new_specialisation(name, fn, first, second, rng):
    """A call failing one guard traces a new, correct specialisation; the
    same calls again run compiled without tracing."""
    cf = ember.compile(fn)
    for make in (first, second):
        args = make(rng)
        assert_same(eager(cf, *args), to_py(cf(*args)))
    s = stats(cf)
    assert (s["traces"], s["specializations"], s["compiled_calls"]) == (2, 2, 0), s
    for i, make in enumerate((first, second, first, second)):
        args = make(rng)
        assert_same(eager(cf, *args), to_py(cf(*args)))
        s = stats(cf)
        assert (s["traces"], s["compiled_calls"]) == (2, i + 1), s
    assert [sp["backend"] for sp in cf._specializations()] == [EXPECTED_BACKEND] * 2


def test_int_and_float_scalars_give_different_dtypes(rng):
    """int64 * 2 stays int64, int64 * 2.0 is float32: the guard keeps them apart."""
    cf = ember.compile(g_scale)
    i = i64(rng, 4)
    assert cf(i, 2).dtype == ember.int64
    assert cf(i, 2.0).dtype == ember.float32
    assert cf(i, 2).dtype == ember.int64
    assert cf(i, 2.0).dtype == ember.float32
    assert stats(cf)["traces"] == 2


def test_guards_text_names_arguments(rng):
    cf = ember.compile(g_scale)
    cf(f32(rng, 2, 3), 0.5)
    g = cf._specializations()[0]["guards"]
    assert "x: tensor dtype=f32 device=cpu shape=[2,3] strides=[3,1]" in g
    assert "s: float == 0.5" in g


def test_keyword_arguments_are_guarded(rng):
    cf = ember.compile(g_scale)
    x = f32(rng, 3)
    assert_same(eager(cf, x, s=2.0), to_py(cf(x, s=2.0)))
    assert_same(eager(cf, x, s=5.0), to_py(cf(x, s=5.0)))
    assert_same(eager(cf, x, s=2.0), to_py(cf(x, s=2.0)))
    s = stats(cf)
    assert (s["traces"], s["compiled_calls"]) == (2, 1), s


def test_nan_scalar_hits_and_signed_zero_misses(rng):
    """Float guards compare bits: NaN matches NaN, 0.0 and -0.0 differ."""
    cf = ember.compile(g_scale)
    x = T(np.ones(3, np.float32))
    cf(x, float("nan"))
    assert np.isnan(cf(x, float("nan")).numpy()).all()
    assert stats(cf)["traces"] == 1
    pos, neg = cf(x, 0.0).numpy(), cf(x, -0.0).numpy()  # x * s + 1: both 1.0
    assert stats(cf)["traces"] == 3
    np.testing.assert_array_equal(pos, neg)


def test_strides_of_size_one_dims_are_ignored(rng):
    """A [3,1] tensor made by transposing [1,3] matches a contiguous [3,1] one."""
    cf = ember.compile(c_silu)
    a = f32(rng, 3, 1)
    b = f32(rng, 1, 3).T
    assert a.stride() != b.stride()
    cf(a)
    assert_same(eager(cf, b), to_py(cf(b)))
    s = stats(cf)
    assert (s["traces"], s["compiled_calls"]) == (1, 1), s


def c_sub(x, y):
    return x - y


def test_same_tensor_for_two_arguments(rng):
    """Tracing f(a, a) must not make a later f(a, b) compute b - b."""
    cf = ember.compile(c_sub)
    a, b = f32(rng, 4), f32(rng, 4)
    assert_same(eager(cf, a, a), to_py(cf(a, a)))
    assert_same(eager(cf, a, b), to_py(cf(a, b)))
    assert_same(eager(cf, b, a), to_py(cf(b, a)))


def c_minus_global(x):
    return x - W_SMALL * 3.0


W_SMALL = ember.from_numpy(np.array([1.0, 2.0, 3.0], dtype=np.float32))


def test_argument_that_is_also_a_captured_global(rng):
    """Tracing f(W) where f also reads the global W must not make f(x) use x for W."""
    cf = ember.compile(c_minus_global)
    assert_same(eager(cf, W_SMALL), to_py(cf(W_SMALL)))
    x = f32(rng, 3)
    assert_same(eager(cf, x), to_py(cf(x)))


def test_keyword_arguments_in_another_order(rng):
    """f(x=a, y=b) then f(y=b, x=a): the arguments are matched by name."""
    cf = ember.compile(c_sub)
    a, b = f32(rng, 4), f32(rng, 4)
    assert_same(eager(cf, x=a, y=b), to_py(cf(x=a, y=b)))
    assert_same(eager(cf, y=b, x=a), to_py(cf(y=b, x=a)))
    assert_same(eager(cf, a, y=b), to_py(cf(a, y=b)))


# ---------------------------------------------------------------- cache limit


def cl_fn(x):
    return ember.tanh(x) * 2.0 + x


def test_cache_limit(rng):
    """Past the limit: correct eager results, one warning naming the failed
    guard, matching calls still compiled. (dynamic=False: with dynamic
    shapes, sizes share code and do not use up the cache:
    test_dynamic_shapes.py.)"""
    cf = ember.compile(cl_fn, cache_limit=2, dynamic=False)
    assert stats(cf)["cache_limit"] == 2
    shapes = [(2,), (3,), (4,), (5,)]
    with recorded_warnings() as rec:
        for shape in shapes:
            x = f32(rng, *shape)
            assert_same(eager(cf, x), to_py(cf(x)))
    msgs = ember_messages(rec)
    assert len(msgs) == 1, msgs
    assert "cache limit" in msgs[0]
    assert "cl_fn" in msgs[0]
    assert "shape [4]" in msgs[0], msgs[0]  # the first call past the limit
    s = stats(cf)
    assert (s["specializations"], s["traces"], s["eager_calls"]) == (2, 2, 2), s

    with recorded_warnings() as rec:
        for shape in [(4,), (6,), (2,), (3,)]:
            x = f32(rng, *shape)
            assert_same(eager(cf, x), to_py(cf(x)))
    assert ember_messages(rec) == []
    s = stats(cf)
    assert (s["specializations"], s["traces"], s["eager_calls"], s["compiled_calls"]) == \
        (2, 2, 4, 2), s


def test_cache_limit_warning_is_a_user_warning(rng):
    cf = ember.compile(cl_fn, cache_limit=1)
    cf(f32(rng, 2))
    with pytest.warns(UserWarning, match=r"cache limit of 1 .*x: shape \[3\] != \[2\]"):
        cf(f32(rng, 3))


def test_cache_limit_zero_runs_eagerly(rng):
    cf = ember.compile(cl_fn, cache_limit=0)
    with pytest.warns(UserWarning, match="cache limit of 0"):
        x = f32(rng, 3)
        assert_same(eager(cf, x), to_py(cf(x)))
    s = stats(cf)
    assert (s["traces"], s["eager_calls"]) == (0, 1), s


def test_reset_forgets_specialisations_and_warnings(rng):
    cf = ember.compile(cl_fn, cache_limit=1)
    cf(f32(rng, 2))
    with pytest.warns(UserWarning, match="cache limit"):
        cf(f32(rng, 3))
    cf._reset()
    assert cf._specializations() == []
    cf(f32(rng, 3))
    assert stats(cf)["specializations"] == 1
    with pytest.warns(UserWarning, match="cache limit"):
        cf(f32(rng, 2))


def test_env_cache_limit():
    """EMBER_CACHE_LIMIT sets the default; an explicit cache_limit wins."""
    proc = run_script("""
        import ember
        def f(x):
            return x * 2.0
        cf = ember.compile(f, dynamic=False)
        explicit = ember.compile(f, cache_limit=5, dynamic=False)
        for n in range(1, 6):
            cf(ember.ones(n))
            explicit(ember.ones(n))
        print(cf._stats()["cache_limit"], cf._stats()["specializations"],
              cf._stats()["eager_calls"], explicit._stats()["specializations"])
    """, EMBER_CACHE_LIMIT=3)
    assert proc.stdout.split() == ["3", "3", "2", "5"], proc.stdout
    assert "cache limit of 3" in proc.stderr


def test_env_backend_interp():
    """EMBER_BACKEND=interp runs compiled graphs on the interpreter, correctly."""
    proc = run_script("""
        import numpy as np, ember
        def f(x):
            return ember.tanh(x) * 3.0 + x.sum()
        cf = ember.compile(f)
        x = ember.from_numpy(np.linspace(-2, 2, 10, dtype=np.float32))
        cf(x)
        got = cf(x).numpy()
        assert np.array_equal(got, f(x).numpy())
        print(cf._specializations()[0]["backend"], cf._stats()["compiled_calls"])
    """, EMBER_BACKEND="interp")
    assert proc.stdout.split() == ["interp", "1"], proc.stdout


def test_env_backend_of_no_known_name_takes_the_best_and_says_so():
    """The backends are one list (EM_BACKEND_LIST): a name not on it
    compiles with the best one built, and the specialisation's note names
    the mistake."""
    proc = run_script("""
        import ember
        cf = ember.compile(lambda x: (x * 2).sum())
        x = ember.randn(64)
        cf(x)
        cf(x)
        spec = cf._specializations()[0]
        print(spec["backend"], "|", spec["note"])
    """, EMBER_BACKEND="nope")
    best = "llvm" if ember.compiler.has_llvm() else "interp"
    assert proc.stdout.strip() == f"{best} | no backend named 'nope'; using {best}", proc.stdout


# ---------------------------------------------------------------- disabling


def test_env_compile_zero_runs_eagerly():
    proc = run_script("""
        import numpy as np, ember
        def f(x):
            return ember.exp(x) + 1.0
        cf = ember.compile(f)
        x = ember.from_numpy(np.arange(6, dtype=np.float32))
        outs = [cf(x).numpy() for _ in range(3)]
        ref = np.exp(np.arange(6, dtype=np.float32)) + np.float32(1.0)
        assert all(np.array_equal(o, f(x).numpy()) for o in outs)
        assert all(np.allclose(o, ref, rtol=1e-5, atol=1e-6) for o in outs)
        print(ember.compiler.is_enabled(), cf._stats()["traces"],
              cf._stats()["compiled_calls"], len(cf._specializations()))
    """, EMBER_COMPILE=0)
    assert proc.stdout.split() == ["False", "0", "0", "0"], proc.stdout


def test_disable_enable(rng):
    cf = ember.compile(c_gelu)
    x = f32(rng, 10)
    ember.compiler.disable()
    assert not ember.compiler.is_enabled()
    assert_same(eager(cf, x), to_py(cf(x)))
    assert_same(eager(cf, x), to_py(cf(x)))
    assert stats(cf)["traces"] == 0
    ember.compiler.enable()
    assert ember.compiler.is_enabled()
    cf(x)
    cf(x)
    s = stats(cf)
    assert (s["traces"], s["compiled_calls"]) == (1, 1), s


def test_disabled_context_manager(rng):
    cf = ember.compile(c_gelu)
    x = f32(rng, 10)
    with ember.compiler.disabled():
        assert not ember.compiler.is_enabled()
        assert_same(eager(cf, x), to_py(cf(x)))
    assert ember.compiler.is_enabled()
    assert stats(cf)["traces"] == 0
    cf(x)
    assert stats(cf)["traces"] == 1
    # A compiled specialisation is bypassed, not used, inside the block.
    with ember.compiler.disabled():
        cf(x)
    assert stats(cf)["compiled_calls"] == 0
    # Nested use keeps the outer state; an exception still re-enables.
    with pytest.raises(RuntimeError):
        with ember.compiler.disabled():
            with ember.compiler.disabled():
                pass
            assert not ember.compiler.is_enabled()
            raise RuntimeError
    assert ember.compiler.is_enabled()


# ---------------------------------------------------------------- fallbacks to eager


def fb_print(x):
    print("inside:", x)
    return x + 1.0


GEN = ember.Generator()


def fb_generator(x):
    return x + ember.randn(*x.shape, generator=GEN)


def fb_tensor_literal(x):
    return x * ember.tensor([1.0, 2.0, 3.0])


def fb_return_float(x):
    y = x * 2.0
    return y.numel() * 0.5


def fb_return_str(x):
    return x + 1.0, "done"


def fb_set_arg(xs):
    return sum(xs)


def fb_object_in_list(xs):
    return xs[0] * 2.0


def fb_manual_seed(x):
    ember.manual_seed(3)
    return x + ember.rand(3)


def fb_nested_float(x):
    return {"y": x * 2, "scale": 1.5}


NP3 = np.array([1.0, 2.0, 3.0], dtype=np.float32)


def fb_numpy_copy(x):
    return x * ember.tensor(NP3)


SENTINEL = object()


def fb_return_object(x):
    return x + 1.0, SENTINEL


FALLBACKS = [
    # (name, fn, make args, regex the warning must match)
    ("print", fb_print, lambda r: (f32(r, 3),),
     r"running eagerly: printing a tensor \(text is a side effect\) inside a compiled function"),
    ("generator", fb_generator, lambda r: (f32(r, 3),),
     r"running eagerly: generator= draws from an ember.Generator"),
    ("numpy_copy", fb_numpy_copy, lambda r: (f32(r, 3),),
     r"running eagerly: copying a NumPy array .* into a tensor"),
    ("return_object", fb_return_object, lambda r: (f32(r, 3),),
     r"running eagerly: it returns a object"),
    ("manual_seed", fb_manual_seed, lambda r: (f32(r, 3),),
     r"running eagerly: .*ember\.manual_seed\(\)"),
    ("set_arg", fb_set_arg, lambda r: (frozenset([1.0, 2.0]),),
     r"argument 'xs' is a frozenset.*running eagerly"),
    ("object_in_list", fb_object_in_list, lambda r: ([f32(r, 3), object()],),
     r"argument 'xs\[1\]' is a object.*running eagerly"),
]


def call_both(cf, args, seeded):
    """(eager result, compiled result); with the same RNG seed if `seeded`."""
    if seeded:
        ember.manual_seed(99)
        GEN.manual_seed(99)
    expected = eager(cf, *args)
    if seeded:
        ember.manual_seed(99)
        GEN.manual_seed(99)
    return expected, to_py(cf(*args))


@pytest.mark.parametrize("name,fn,make_args,pattern", FALLBACKS, ids=[c[0] for c in FALLBACKS])
def test_fallback_to_eager(name, fn, make_args, pattern, rng, capsys):
    """One UserWarning with the reason; every call correct; nothing compiled."""
    cf = ember.compile(fn)
    seeded = name == "generator"
    with recorded_warnings() as rec:
        expected, got = call_both(cf, make_args(rng), seeded)
        assert_same(expected, got)
    msgs = ember_messages(rec)
    assert len(msgs) == 1, msgs
    assert re.search(pattern, msgs[0]), msgs[0]
    assert msgs[0].startswith(f"ember.compile({fn.__name__}): ")
    with recorded_warnings() as rec:
        for _ in range(3):
            expected, got = call_both(cf, make_args(rng), seeded)
            assert_same(expected, got)
    assert ember_messages(rec) == []
    s = stats(cf)
    assert s["compiled_calls"] == 0, s
    assert s["eager_calls"] >= 3, s
    assert all(sp["backend"] == "eager" and sp["reason"] for sp in cf._specializations())
    if name == "print":
        assert capsys.readouterr().out.count("inside:") == 8  # 4 eager + 4 compiled-path calls


@pytest.mark.parametrize("fn", [fb_tensor_literal, fb_return_float, fb_return_str, fb_nested_float])
def test_constants_from_python_compile(fn, rng):
    """Tensors made from Python data and Python values in a result were
    fallbacks; they are constants of the specialisation now, whatever they
    came from being guarded."""
    cf = ember.compile(fn)
    for _ in range(3):
        x = f32(rng, 3)
        assert_same(eager(cf, x), to_py(cf(x)))
    assert stats(cf)["compiled_calls"] >= 2


def test_fallback_specialisation_records_reason(rng):
    cf = ember.compile(fb_generator)
    with pytest.warns(UserWarning):
        cf(f32(rng, 2))
    (sp,) = cf._specializations()
    assert sp["backend"] == "eager"
    assert "ember.Generator" in sp["reason"]
    with pytest.raises(IndexError):
        cf._graph(0)


def test_fallback_warns_once_per_reason(rng):
    """compiled_function.c: 'Warnings say why a function runs eagerly, once per
    function and reason' -- also when a new shape traces again."""
    two = np.array(2.0, dtype=np.float32)
    cf = ember.compile(lambda x: x * ember.tensor(two))
    with recorded_warnings() as rec:
        for n in (3, 4, 5):
            x = f32(rng, n)
            assert_same(eager(cf, x), to_py(cf(x)))
    msgs = ember_messages(rec)
    assert len(msgs) == 1, msgs


def test_warning_points_at_the_calling_line(rng):
    """The fallback warning's location is the line that called the compiled
    function (as for warnings.warn(..., stacklevel=2) in a Python wrapper)."""
    cf = ember.compile(fb_numpy_copy)
    with recorded_warnings() as rec:
        call_line = inspect.currentframe().f_lineno + 1
        cf(f32(rng, 3))
    (w,) = [w for w in rec if "ember.compile" in str(w.message)]
    assert (w.filename, w.lineno) == (THIS_FILE, call_line)


def test_fallback_then_good_function_still_compiles(rng):
    """A failed trace leaves no tracer behind: other functions compile."""
    bad = ember.compile(fb_numpy_copy)
    with pytest.warns(UserWarning):
        bad(f32(rng, 3))
    good = ember.compile(c_silu)
    x = f32(rng, 3)
    good(x)
    assert_same(eager(good, x), to_py(good(x)))
    assert stats(good)["compiled_calls"] == 1


# ---------------------------------------------------------------- exceptions


def test_exception_propagates_and_nothing_is_cached(rng):
    state = {"fail": True}

    def f(x):
        y = x * 2.0
        if state["fail"]:
            raise ValueError("boom")
        return y + 1.0

    cf = ember.compile(f)
    x = f32(rng, 4)
    with pytest.raises(ValueError, match="boom"):
        cf(x)
    assert cf._specializations() == []
    assert stats(cf)["compiled_calls"] == 0
    state["fail"] = False
    assert_same(eager(cf, x), to_py(cf(x)))
    assert stats(cf)["specializations"] == 1
    assert_same(eager(cf, x), to_py(cf(x)))
    assert stats(cf)["compiled_calls"] == 1
    # The graph holds only the successful trace: one fused node, no leftovers.
    assert cf._graph(0).count("fused(") == 1
    assert "mul" in cf._graph(0) and "add" in cf._graph(0)


def test_ember_error_during_trace_propagates(rng):
    """An ember error (shapes that cannot broadcast) raises like eager mode."""
    cf = ember.compile(c_sub)
    with pytest.raises(RuntimeError, match="cannot broadcast"):
        cf(f32(rng, 2), f32(rng, 3))
    assert stats(cf)["specializations"] == 0
    a, b = f32(rng, 3), f32(rng, 3)
    cf(a, b)
    assert_same(eager(cf, a, b), to_py(cf(a, b)))
    assert stats(cf)["compiled_calls"] == 1


def test_exception_does_not_leave_tracing_on(rng):
    """After a raising trace, eager ops and other compiled functions behave."""
    def boom(x):
        x + 1.0
        raise KeyError("k")

    cf = ember.compile(boom)
    with pytest.raises(KeyError):
        cf(f32(rng, 2))
    other = ember.compile(c_add_chain)
    a, b = f32(rng, 2), f32(rng, 2)
    other(a, b)
    other(a, b)
    assert stats(other)["compiled_calls"] == 1
    assert_same(eager(other, a, b), to_py(other(a, b)))


# ---------------------------------------------------------------- nesting


def test_nested_compiled_function_is_inlined(rng):
    inner = ember.compile(c_silu)

    def outer(x, y):
        return inner(x) * y + inner(y)

    cf = ember.compile(outer)
    for _ in range(3):
        x, y = f32(rng, 6), f32(rng, 6)
        assert_same(eager(cf, x, y), to_py(cf(x, y)))
    assert stats(cf)["compiled_calls"] == 2
    assert stats(inner)["traces"] == 0  # called only while outer was traced
    text = cf._graph(0)
    assert text.count("sigmoid(") == 2
    assert f'loc("{THIS_FILE}":{line_of(c_silu, "return")})' in text
    # Called on its own, inner compiles normally.
    x = f32(rng, 6)
    inner(x)
    inner(x)
    assert stats(inner)["compiled_calls"] == 1


# ---------------------------------------------------------------- decorator forms


@ember.compile
def deco_plain(x):
    """Doubles x."""
    return x * 2.0


@ember.compile(cache_limit=3)
def deco_args(x):
    """Halves x."""
    return x * 0.5


def test_decorator_forms(rng):
    def raw(x):
        """Adds one."""
        return x + 1.0

    called = ember.compile(raw)
    cases = [(deco_plain, "deco_plain", "Doubles x.", 8),
             (deco_args, "deco_args", "Halves x.", 3),
             (called, "raw", "Adds one.", 8)]
    for cf, name, doc, limit in cases:
        assert cf.__name__ == name
        assert cf.__doc__ == doc
        assert callable(cf.__wrapped__) and cf.__wrapped__.__name__ == name
        assert not isinstance(cf.__wrapped__, type(cf))
        assert stats(cf)["cache_limit"] == limit
        x = f32(rng, 5)
        assert_same(eager(cf, x), to_py(cf(x)))
        assert_same(eager(cf, x), to_py(cf(x)))
        assert stats(cf)["compiled_calls"] >= 1
    assert called.__wrapped__ is raw
    assert deco_plain.__qualname__ == "deco_plain"
    assert deco_plain.__module__ == __name__


def test_compile_rejects_non_callables():
    with pytest.raises(TypeError, match="expected a function"):
        ember.compile(42)


class Scaler:
    def __init__(self, w):
        self.w = w

    @ember.compile
    def forward(self, x):
        return ember.relu(x * self.w) + 1.0


def test_method_falls_back_with_warning(rng):
    m = Scaler(f32(rng, 4))
    x = f32(rng, 4)
    with pytest.warns(UserWarning, match=r"argument 'self' is a Scaler"):
        got = to_py(m.forward(x))
    assert_same(to_py(Scaler.forward.__wrapped__(m, x)), got)
    with recorded_warnings() as rec:
        got = to_py(m.forward(x))
    assert ember_messages(rec) == []
    assert_same(to_py(Scaler.forward.__wrapped__(m, x)), got)
    assert Scaler.forward.__name__ == "forward"


# ---------------------------------------------------------------- identity


def test_identity_returns_same_object(rng):
    cf = ember.compile(c_identity)
    x = f32(rng, 3)
    assert cf(x) is x  # traced call
    assert cf(x) is x  # compiled call
    y = f32(rng, 3)
    assert cf(y) is y
    assert stats(cf)["compiled_calls"] == 2


def test_identity_in_tuple_returns_same_object(rng):
    def f(x, y):
        return x, y + 1.0

    cf = ember.compile(f)
    x, y = f32(rng, 3), f32(rng, 3)
    cf(x, y)
    a, b = cf(x, y)
    assert a is x
    assert stats(cf)["compiled_calls"] == 1
    assert_same(eager(cf, x, y), to_py((a, b)))
