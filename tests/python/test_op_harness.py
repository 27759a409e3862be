"""One harness for every op of the table (issue 41, item 4), as ggml's
test-backend-ops.

Every row of the op table (ember._C._op_table(): kind, arity, the dtypes an
elementwise row computes in, attributes, whether it is differentiable) has
samples here, in each dtype it takes. A sample is a function of the library
(ember or torch) and its inputs, written with the public API, and names
the rows it reaches. Each runs

  - eagerly on the CPU: the reference for the back ends;
  - compiled, on the interpreter back end and on LLVM, each compared with
    the eager result; the compiled graph must hold the rows the sample
    names (so the sample does reach them) and the call must have run
    compiled;
  - under PyTorch 1.13 where it has the op, compared with the eager result;
  - through gradcheck in float64 where the row is differentiable.

Elementwise, reduction, scan, cast and matmul samples run again with
their inputs transposed and strided (test_strided_inputs).
test_every_row_has_a_sample walks the table, so a row added without a
sample fails it. The generated CUDA C of the elementwise, reduction and
random rows is run on the host against the eager kernels by
tests/c/test_cuda_host_run.c. On the meta device (test_meta_against_eager)
every sample gives results of the eager results' shapes, dtypes and
strides, computing nothing. On "cuda" (test_cuda_against_eager) every
sample runs on the GPU's kernels against eager, an op without one yet
skipped by name; CI runs it under the host stand-in for a GPU, which
checks that every op keeps its results on its inputs' device.
"""

import collections
import os
import re

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")

TABLE = {r["name"]: r for r in ember._C._op_table()}
NP = {"f32": np.float32, "f64": np.float64, "f16": np.float16, "i64": np.int64, "i32": np.int32,
      "i16": np.int16, "i8": np.int8, "u8": np.uint8, "bool": np.bool_}
INTS = ("i64", "i32", "i16", "i8", "u8")

# fn(m, *tensors) -> tensor or tuple; inputs: numpy arrays; reaches: rows the
# compiled graph must hold; grad: input positions gradcheck differentiates
# (float64 copies), () for none; ref: False where PyTorch has no counterpart
# (or answers differently by design, said in `why`); tol: (rtol, atol) for
# float results, None for the dtype's default; seeded: random rows, run
# after the same manual_seed eagerly and compiled; leaves: inputs made
# with requires_grad (for samples that take a gradient inside); in_graph:
# the rows the final graph holds where passes rewrite the one reached.
Sample = collections.namedtuple("Sample", "id fn inputs reaches grad ref tol seeded why leaves in_graph",
                                defaults=((), True, None, False, "", (), None))

RNG = np.random.default_rng(0)


def arr(shape, code="f32", kind="any"):
    """Inputs of a kind: any (normal), positive (0.2 to 3), unit (-0.9 to
    0.9), small (ints 1 to 4: exponents, shifts), distinct (a permutation:
    no ties), bool."""
    dt = NP[code]
    n = int(np.prod(shape))
    if code == "bool":
        return RNG.random(shape) < 0.5
    if kind == "distinct":
        return RNG.permutation(n).reshape(shape).astype(dt) - (n // 3 if code not in ("u8", "bool") else 0)
    if code in INTS:
        lo, hi = {"small": (1, 4), "positive": (1, 9)}.get(kind, (-9 if code != "u8" else 0, 9))
        return RNG.integers(lo, hi, size=shape).astype(dt)
    if kind == "positive":
        return RNG.uniform(0.2, 3.0, shape).astype(dt)
    if kind == "unit":
        return RNG.uniform(-0.9, 0.9, shape).astype(dt)
    if kind == "small":
        return RNG.integers(0, 4, size=shape).astype(dt)
    return (RNG.standard_normal(shape) * 1.5).astype(dt)


def lib(ember_fn, torch_fn):
    """A sample function spelled differently in the two libraries."""
    return lambda m, *ts: (ember_fn if m is ember else torch_fn)(m, *ts)


SAMPLES = []


def add(id, fn, inputs, reaches, **kw):
    SAMPLES.append(Sample(id, fn, inputs, frozenset([reaches] if isinstance(reaches, str) else reaches), **kw))


def floats(name):
    return [c for c in TABLE[name]["dtypes"] if c in ("f32", "f64")]


# ---------------------------------------------------------------- elementwise

POSITIVE = {"log", "log2", "log1p", "sqrt", "rsqrt", "reciprocal", "bessel_y0", "bessel_y1", "lgamma_kernel",
            "digamma_kernel", "trigamma_kernel"}
UNIT = {"asin", "acos"}
UNARY_SPELLINGS = {
    "gelu": lambda m, x: m.nn.functional.gelu(x),
    "gelu_tanh": lambda m, x: m.nn.functional.gelu(x, approximate="tanh"),
    "silu": lambda m, x: m.nn.functional.silu(x),
    "relu": lambda m, x: m.relu(x),
    "lgamma_kernel": lambda m, x: m.lgamma(x),
    "digamma_kernel": lambda m, x: m.digamma(x),
    "trigamma_kernel": lambda m, x: m.polygamma(1, x),
    "i0e_kernel": lambda m, x: m.special.i0e(x),
    "i1e_kernel": lambda m, x: m.special.i1e(x),
}
for name in ("bessel_j0", "bessel_j1", "bessel_y0", "bessel_y1"):
    UNARY_SPELLINGS[name] = (lambda n: lambda m, x: getattr(m.special, n)(x))(name)

for name, row in TABLE.items():
    if row["kind"] != "unary":
        continue
    fn = UNARY_SPELLINGS.get(name, (lambda n: lambda m, x: getattr(m, n)(x))(name))
    kind = "positive" if name in POSITIVE else "unit" if name in UNIT else "any"
    for code in row["dtypes"]:
        grad = (0,) if row["differentiable"] and code == "f64" and name not in ("floor", "ceil", "round", "trunc",
                                                                                  "sign", "relu", "abs") else ()
        add(f"{name}-{code}", fn, [arr((3, 5), code, kind)], name, grad=grad)

BINARY_SPELLINGS = {name: (lambda n: lambda m, a, b: getattr(m.special, n)(a, b))(name)
                    for name in TABLE if "polynomial" in name}
NONZERO_RIGHT = {"div", "fmod", "remainder", "floor_divide"}
for name, row in TABLE.items():
    if row["kind"] != "binary":
        continue
    fn = BINARY_SPELLINGS.get(name, (lambda n: lambda m, a, b: getattr(m, n)(a, b))(name))
    for code in row["dtypes"]:
        a, b = arr((3, 5), code), arr((1, 5), code)  # (b broadcasts)
        if name in NONZERO_RIGHT:
            b = arr((1, 5), code, "positive")
        if name in ("pow",):
            a, b = arr((3, 5), code, "positive"), arr((1, 5), code, "small")
        if "shift" in name:
            a, b = arr((3, 5), code, "positive"), arr((1, 5), code, "small")
        if "polynomial" in name:
            a, b = arr((3, 5), code, "unit"), np.array([[0, 1, 2, 3, 5]], dtype=NP[code])
        grad = ()
        if row["differentiable"] and code == "f64":
            grad = {"pow": (0, 1), "fmod": (0,), "remainder": (0,), "floor_divide": ()}.get(name, (0, 1))
        add(f"{name}-{code}", fn, [a, b], name, grad=grad)

for code in TABLE["where"]["dtypes"]:
    add(f"where-{code}", lambda m, c, a, b: m.where(c, a, b), [arr((3, 5), "bool"), arr((3, 5), code),
                                                              arr((1, 5), code)], "where",
        grad=(1, 2) if code == "f64" else ())
for code in TABLE["clamp"]["dtypes"]:
    lo = arr((1, 5), code)
    add(f"clamp-{code}", lambda m, x, lo, hi: m.clamp(x, lo, hi), [arr((3, 5), code), lo, lo + NP[code](3)], "clamp",
        grad=(0,) if code == "f64" else ())
for code in TABLE["lerp"]["dtypes"]:
    add(f"lerp-{code}", lambda m, a, b, w: m.lerp(a, b, w), [arr((3, 5), code), arr((3, 5), code),
                                                             arr((1, 5), code, "unit")], "lerp",
        grad=(0, 1, 2) if code == "f64" else ())
for code in floats("softplus"):
    add(f"softplus-{code}", lambda m, x: m.nn.functional.softplus(x, beta=2.0, threshold=3.0),
        [arr((3, 5), code)], "softplus", grad=(0,) if code == "f64" else ())
for code in floats("mul_add"):  # (batch_norm in eval mode: x * alpha + beta, one rounding)
    add(f"mul_add-{code}", lambda m, x, mean, var, w, b: m.nn.functional.batch_norm(x, mean, var, w, b, False),
        [arr((4, 3, 2), code), arr((3,), code), arr((3,), code, "positive"), arr((3,), code), arr((3,), code)],
        "mul_add", grad=(0, 3, 4) if code == "f64" else ())

for code in TABLE["cast"]["dtypes"]:
    if code == "bf16":  # (NumPy has no bfloat16: from float32, and back)
        add("cast-bf16", lambda m, x: x.to(m.bfloat16).to(m.float32), [arr((3, 5))], "cast")
        continue
    src = arr((3, 5), code if code != "f16" else "f32")
    add(f"cast-from-{code}", lambda m, x: x.to(m.float32 if x.dtype == m.float64 else m.float64),
        [src.astype(NP[code])], "cast")
    add(f"cast-to-{code}", (lambda c: lambda m, x: x.to(getattr(m, {"f32": "float32", "f64": "float64",
                                                                     "f16": "float16", "i64": "int64",
                                                                     "i32": "int32", "i16": "int16", "i8": "int8",
                                                                     "u8": "uint8", "bool": "bool"}[c])))(code),
        [arr((3, 5), "f64" if code != "f64" else "f32") * 3], "cast", grad=(0,) if code in ("f32",) else ())

# ---------------------------------------------------------------- reductions and scans

for name in ("sum", "mean", "prod", "amax", "amin", "argmax", "argmin", "logsumexp"):
    for code in ("f32", "f64") + (("i64", "i32", "u8") if name in ("sum", "prod", "amax", "amin", "argmax",
                                                                    "argmin") else ()):
        for keepdim in (False, True):
            kind = "distinct" if name.startswith("arg") or name in ("amax", "amin") else "any"
            add(f"{name}-{code}-keep{int(keepdim)}", (lambda n, k: lambda m, x: getattr(m, n)(x, 1, keepdim=k))(
                name, keepdim), [arr((3, 5, 2), code, kind)], name,
                grad=(0,) if code == "f64" and TABLE[name]["differentiable"] else ())
for name in ("all", "any"):
    for code in ("bool", "f32", "i32"):
        add(f"{name}-{code}", (lambda n: lambda m, x: getattr(m, n)(x, 1))(name), [arr((3, 5), code)], name)
for name in ("var", "std"):
    for code in ("f32", "f64"):
        add(f"{name}-{code}", (lambda n: lambda m, x: getattr(m, n)(x, 1, correction=0, keepdim=True))(name),
            [arr((3, 5, 2), code)], name, grad=(0,) if code == "f64" else ())
for code in ("f32", "f64"):
    for p in (1, 2, 3.5, float("inf")):
        add(f"norm-{code}-p{p}", (lambda p: lambda m, x: m.linalg.vector_norm(x, p, dim=1))(p),
            [arr((3, 5), code, "distinct")], "norm", grad=(0,) if code == "f64" else ())
for name in ("cumsum", "cumprod"):
    for code in ("f32", "f64", "i64", "i32"):
        add(f"{name}-{code}", (lambda n: lambda m, x: getattr(m, n)(x, 1))(name), [arr((3, 5), code)], name,
            grad=(0,) if code == "f64" else ())
for name in ("softmax", "log_softmax"):
    for code in ("f32", "f64"):
        add(f"{name}-{code}", (lambda n: lambda m, x: getattr(m, n)(x, 1))(name), [arr((3, 5), code)], name,
            grad=(0,) if code == "f64" else ())

# ---------------------------------------------------------------- matmul, views, copies, factories

for code in ("f32", "f64", "i64"):
    add(f"matmul-{code}", lambda m, a, b: m.matmul(a, b), [arr((2, 3, 4), code), arr((4, 5), code)], "matmul",
        grad=(0, 1) if code == "f64" else ())
VIEWS = {
    "reshape": lambda m, x: x.reshape(5, 3) * 2,
    "permute": lambda m, x: x.permute(1, 0) * 2,
    "expand": lambda m, x: x[:1].expand(4, 5) * 2,
    "slice": lambda m, x: x[:, 1:5:2] * 2,
    "select": lambda m, x: x[1] * 2,
    "diagonal": lambda m, x: x.diagonal(1) * 2,
    "as_strided": lambda m, x: x.as_strided((2, 2), (1, 2), 1) * 2,
}
for name, fn in VIEWS.items():
    for code in ("f32", "i64"):
        add(f"{name}-{code}", fn, [arr((3, 5), code)], name)
    add(f"{name}-grad", fn, [arr((3, 5), "f64")], name, grad=(0,))
add("contiguous", lambda m, x: x.t().contiguous(), [arr((3, 5))], "contiguous")
add("full", lambda m: m.full((2, 3), 1.5) * 2, [], "full")
add("full-i64", lambda m: m.full((2, 3), 7, dtype=m.int64) * 2, [], "full")
add("empty", lambda m: m.empty(2, 3).fill_(2.0) * 3, [], "empty", in_graph={"full"})  # (the fill folds in)
add("arange", lambda m: m.arange(1, 10, 2) * 2, [], "arange")
add("linspace", lambda m: m.linspace(-1, 1, 7) * 2, [], "linspace")
add("eye", lambda m: m.eye(3, 4) * 2, [], "eye")
add("rand", lambda m: m.rand(3, 4) * 2, [], "rand", ref=False, seeded=True, why="a generator of its own")
add("randn", lambda m: m.randn(3, 4) * 2, [], "randn", ref=False, seeded=True, why="a generator of its own")
add("randint", lambda m: m.randint(0, 9, (3, 4)) * 2, [], "randint", ref=False, seeded=True,
    why="a generator of its own")
add("randperm", lambda m: m.randperm(7) * 2, [], "randperm", ref=False, seeded=True, why="a generator of its own")
add("fused", lambda m, x: (m.exp(x) * 2 + 1).sin(), [arr((3, 5))], {"fused", "exp", "sin"})


# ---------------------------------------------------------------- the other rows

def grad_of(f, wrt):
    """The gradient of f(...).square().sum() in input `wrt` (a leaf that
    requires grad): what reaches a row that only backward formulas use."""
    def g(m, *ts):
        return m.autograd.grad(f(m, *ts).square().sum(), [ts[wrt]])[0]
    return g


F = lambda m: m.nn.functional  # noqa: E731
for code in ("f32", "f64"):
    g = (0, 1, 2) if code == "f64" else ()
    add(f"layer_norm-{code}", lambda m, x, w, b: F(m).layer_norm(x, (5,), w, b),
        [arr((3, 5), code), arr((5,), code), arr((5,), code)], "layer_norm", grad=g)
    conv = lambda m, x, w, b: F(m).conv2d(x, w, b, stride=2, padding=1)  # noqa: E731
    add(f"conv-{code}", conv, [arr((2, 3, 7, 6), code), arr((4, 3, 3, 3), code), arr((4,), code)], "conv", grad=g)
    convt = lambda m, x, w, b: F(m).conv_transpose2d(x, w, b, stride=2, padding=1, output_padding=1)  # noqa: E731
    add(f"conv_transpose-{code}", convt, [arr((2, 3, 4, 5), code), arr((3, 4, 3, 3), code), arr((4,), code)],
        "conv_transpose", grad=g)
    last = lambda m, x, w, b: F(m).conv2d(x.contiguous(memory_format=m.channels_last), w, b, padding=1)  # noqa: E731
    add(f"conv-channels-last-{code}", last, [arr((2, 3, 7, 6), code), arr((16, 3, 3, 3), code), arr((16,), code)],
        "conv", grad=g)
    add(f"conv_weight-channels-last-{code}", grad_of(lambda m, x, w: last(m, x, w, None), 1),
        [arr((2, 3, 7, 6), code), arr((16, 3, 3, 3), code)], "conv_weight", leaves=(1,))
    add(f"conv_weight-{code}", grad_of(lambda m, x, w: F(m).conv2d(x, w, stride=2, padding=1), 1),
        [arr((2, 3, 7, 6), code), arr((4, 3, 3, 3), code)], "conv_weight", leaves=(1,))
    add(f"unfold-{code}", lambda m, x: F(m).unfold(x, 2, padding=1), [arr((2, 3, 4, 5), code)], "unfold",
        grad=(0,) if code == "f64" else ())
    add(f"fold-{code}", lambda m, c: F(m).fold(c, (4, 5), 2), [arr((2, 12, 12), code)], "fold",
        grad=(0,) if code == "f64" else ())
    pool_in = arr((2, 3, 7, 6), code, "distinct")
    add(f"max_pool-{code}", lambda m, x: F(m).max_pool2d(x, 3, 2, 1, return_indices=True), [pool_in], "max_pool",
        grad=(0,) if code == "f64" else ())
    add(f"adaptive_max_pool-{code}", lambda m, x: F(m).adaptive_max_pool2d(x, (2, 4), return_indices=True),
        [pool_in], "adaptive_max_pool", grad=(0,) if code == "f64" else ())
    add(f"max_pool_grad-{code}", grad_of(lambda m, x: F(m).max_pool2d(x, 3, 2, 1), 0), [pool_in], "max_pool_grad",
        leaves=(0,))
    avg = lambda m, x: F(m).avg_pool2d(x, 3, 2, 1, ceil_mode=True, count_include_pad=False)  # noqa: E731
    add(f"avg_pool-{code}", avg, [arr((2, 3, 7, 6), code)], "avg_pool", grad=(0,) if code == "f64" else ())
    add(f"avg_pool_grad-{code}", grad_of(avg, 0), [arr((2, 3, 7, 6), code)], "avg_pool_grad", leaves=(0,))
    adapt = lambda m, x: F(m).adaptive_avg_pool2d(x, (2, 4))  # noqa: E731
    add(f"adaptive_avg_pool-{code}", adapt, [arr((2, 3, 7, 6), code)], "adaptive_avg_pool",
        grad=(0,) if code == "f64" else ())
    add(f"adaptive_avg_pool_grad-{code}", grad_of(adapt, 0), [arr((2, 3, 7, 6), code)], "adaptive_avg_pool_grad",
        leaves=(0,))

for code in ("f32", "f64", "i64"):
    x = arr((3, 6), code, "distinct")
    g = (0,) if code == "f64" else ()
    add(f"sort-{code}", lambda m, x: m.sort(x, 1, descending=True), [x], "sort", grad=g)
    add(f"topk-{code}", lambda m, x: m.topk(x, 2, 1), [x], "topk", grad=g)
    add(f"kthvalue-{code}", lambda m, x: m.kthvalue(x, 2, 1), [x], "kthvalue", grad=g)
    add(f"median-{code}", lambda m, x: m.median(x, 1), [x], "median", grad=g)
    add(f"flip-{code}", lambda m, x: m.flip(x, [0, 1]), [x], "flip", grad=g)
    add(f"roll-{code}", lambda m, x: m.roll(x, (1, -2), (0, 1)), [x], "roll", grad=g)
    add(f"cat-{code}", lambda m, a, b: m.cat([a, b], 1), [x, arr((3, 2), code)], "cat", grad=(0, 1) if g else ())
    add(f"tril-{code}", lambda m, x: m.tril(x, -1), [x], "tril", grad=g)
    add(f"triu-{code}", lambda m, x: m.triu(x, 1), [x], "triu", grad=g)
    idx = np.array([2, 0, 5, 2])
    add(f"index_select-{code}", lambda m, x, i: m.index_select(x, 1, i), [x, idx], "index_select", grad=g)
    gidx = RNG.integers(0, 6, (3, 4))
    add(f"gather-{code}", lambda m, x, i: m.gather(x, 1, i), [x, gidx], "gather", grad=g)
    sidx = np.array([[0, 3], [5, 1], [2, 4]])
    add(f"scatter-{code}", lambda m, x, i, s: x.scatter(1, i, s), [x, sidx, arr((3, 2), code)], "scatter",
        grad=(0, 2) if g else ())
    add(f"scatter_add-{code}", lambda m, x, i, s: x.scatter_add(1, i, s), [x, gidx, arr((3, 4), code)], "scatter",
        grad=(0, 2) if g else ())
    add(f"index-{code}", lambda m, x, i: x[i], [x, np.array([2, 0, 2])], "index", grad=g)
    add(f"index_put-{code}", lambda m, x, i, v: x.index_put((i,), v, accumulate=True),
        [x, np.array([2, 0, 2]), arr((3, 6), code)], "index_put", grad=(0, 2) if g else ())
    add(f"as_strided_scatter-{code}", lambda m, x, s: m.as_strided_scatter(x, s, (2, 2), (1, 2), 1),
        [x, arr((2, 2), code)], "as_strided_scatter", grad=(0, 1) if g else ())
    add(f"masked_select-{code}", lambda m, x, k: m.masked_select(x, k), [x, arr((3, 6), "bool")], "masked_select",
        grad=g)
    add(f"nonzero-{code}", lambda m, x: m.nonzero(x), [arr((3, 6), code, "small")], "nonzero")
for code in ("f32", "f64"):
    x = arr((3, 6), code, "distinct")
    x[1, 2] = np.nan
    add(f"nanmedian-{code}", lambda m, x: m.nanmedian(x, 1), [x], "nanmedian")
    add(f"histc-{code}", lambda m, x: m.histc(x, 5, -2, 2), [arr((4, 6), code)], "histc")
add("mode", lambda m, x: m.mode(x, 1)[0], [np.array([[1, 2, 2, 3], [4, 4, 1, 1], [0, 5, 5, 5]])], "mode",
    why="the values only: which of a tie's positions mode() gives is unspecified")
add("unique", lambda m, x: m.unique(x, return_inverse=True, return_counts=True), [arr((3, 6), "i64")], "unique")
add("unique_consecutive", lambda m, x: m.unique_consecutive(x, return_inverse=True, return_counts=True),
    [np.array([1, 1, 2, 2, 2, 0, 1, 1])], "unique_consecutive")
add("searchsorted", lambda m, s, v: m.searchsorted(s, v, right=True),
    [np.array([-1.0, 0.0, 0.5, 2.0], np.float32), np.array([[-2.0, 0.0, 0.7], [3.0, 0.5, -1.0]], np.float32)],
    "searchsorted")
add("bincount", lambda m, x, w: m.bincount(x, w, minlength=7), [np.array([0, 3, 3, 1, 5]), arr((5,), "f64")],
    "bincount")
add("one_hot", lambda m, x: F(m).one_hot(x, 5), [np.array([[0, 3], [4, 1]])], "one_hot")


def spd(n, code, batch=()):
    a = RNG.standard_normal(batch + (n, n))
    return (a @ np.swapaxes(a, -1, -2) + n * np.eye(n)).astype(NP[code])


for code in ("f32", "f64"):
    g = code == "f64"
    A, B = spd(4, code, (2,)), arr((2, 4, 3), code)
    L = np.tril(spd(4, code)).astype(NP[code])
    add(f"inv-{code}", lambda m, a: m.linalg.inv(a), [A], "inv", grad=(0,) if g else ())
    add(f"solve-{code}", lambda m, a, b: m.linalg.solve(a, b), [A, B], "solve", grad=(0, 1) if g else ())
    add(f"solve_triangular-{code}", lambda m, a, b: m.linalg.solve_triangular(a, b, upper=False), [L, arr((4, 2), code)],
        "solve_triangular", grad=(1,) if g else ())
    add(f"det-{code}", lambda m, a: m.linalg.det(a), [A], "det", grad=(0,) if g else ())
    add(f"slogdet-{code}", lambda m, a: m.linalg.slogdet(a), [A], "slogdet", grad=(0,) if g else ())
    sym = lambda a: (a + a.transpose(-1, -2)) / 2  # noqa: E731 (gradcheck perturbs one entry: keep it symmetric)
    add(f"cholesky-{code}", lambda m, a: m.linalg.cholesky(sym(a)), [A], "cholesky", grad=(0,) if g else ())
    # (factors unique up to signs: their products, and what is sign-free)
    add(f"qr-{code}", lambda m, a: (lambda q, r: (q @ r, r.abs()))(*m.linalg.qr(a)), [arr((5, 3), code)], "qr",
        grad=(0,) if g else ())
    add(f"eigh-{code}", lambda m, a: (lambda w, v: (w, (v * w.unsqueeze(-2)) @ v.transpose(-1, -2)))(
        *m.linalg.eigh(sym(a))), [A], "eigh", grad=(0,) if g else ())
    add(f"svd-{code}", lambda m, a: (lambda u, s, vh: (s, (u * s.unsqueeze(-2)) @ vh))(
        *m.linalg.svd(a, full_matrices=False)), [arr((5, 3), code)], "svd", grad=(0,) if g else ())
    add(f"lstsq-{code}", lambda m, a, b: m.linalg.lstsq(a, b).solution, [arr((6, 3), code), arr((6, 2), code)],
        "lstsq")
    add(f"ldl-{code}", lambda m, a, b: m.linalg.ldl_solve(*m.linalg.ldl_factor(a), b), [spd(4, code), arr((4, 2), code)],
        {"ldl_factor", "ldl_solve"})

# Rows no sample reaches, and why.
EXEMPT = {
    "all_reduce": "a collective: it needs a process group of several ranks (tests/python/distributed runs it "
                  "eagerly and compiled under mpirun)",
}


# ---------------------------------------------------------------- the runs

def laid_out(m, a, layout):
    """a as a tensor of m laid out row-major, transposed (its last two dims'
    strides swapped) or strided (every other element of a wider one): the
    same values, read through other strides."""
    if layout == "transposed" and a.ndim >= 2:
        return m.tensor(np.ascontiguousarray(np.swapaxes(a, -1, -2))).transpose(-1, -2)
    if layout == "strided" and a.ndim >= 1:
        return m.tensor(np.repeat(a, 2, axis=-1))[..., ::2]
    return m.tensor(a)


def tensors(m, inputs, grad=(), f64=False, leaves=(), layout="row-major"):
    out = []
    for i, a in enumerate(inputs):
        if f64 and a.dtype.kind == "f":
            a = a.astype(np.float64)
        t = laid_out(m, a, layout)
        out.append(t.requires_grad_() if i in grad or i in leaves else t)
    return out


def flat(r):
    """A result as a list of numpy arrays (tuples and named tuples flattened)."""
    if isinstance(r, (tuple, list)):
        return [a for x in r for a in flat(x)]
    return [r.detach().numpy() if hasattr(r, "detach") else np.asarray(r)]


def close(got, want, what, tol):
    assert len(got) == len(want), what
    for i, (a, b) in enumerate(zip(got, want)):
        assert a.shape == b.shape, f"{what}, result {i}: shape {a.shape} vs {b.shape}"
        if b.dtype.kind != "f" or a.dtype.kind != "f":
            np.testing.assert_array_equal(a, b.astype(a.dtype), err_msg=f"{what}, result {i}")
            continue
        rtol, atol = tol or ((1e-5, 1e-5) if np.float32 in (a.dtype, b.dtype) else (1e-10, 1e-10))
        scale = np.abs(b[np.isfinite(b)]).max() if np.isfinite(b).any() else 1.0
        np.testing.assert_allclose(a, b, rtol=rtol, atol=atol * max(scale, 1.0), err_msg=f"{what}, result {i}")


def eager(s, layout="row-major"):
    if s.seeded:
        ember.manual_seed(0)
    return flat(s.fn(ember, *tensors(ember, s.inputs, leaves=s.leaves, layout=layout)))


def compiled(s, backend, layout="row-major"):
    old = os.environ.get("EMBER_BACKEND")
    os.environ["EMBER_BACKEND"] = backend
    try:
        cf = ember.compile(lambda *ts: s.fn(ember, *ts))
        args = tensors(ember, s.inputs, leaves=s.leaves, layout=layout)
        for _ in range(2):  # (the first call traces)
            if s.seeded:
                ember.manual_seed(0)
            r = cf(*args)
    finally:
        if old is None:
            os.environ.pop("EMBER_BACKEND", None)
        else:
            os.environ["EMBER_BACKEND"] = old
    return cf, flat(r)


def graph_of(cf):
    try:
        return cf._graph(0)
    except Exception:  # noqa: BLE001 (no specialisation: it ran eagerly)
        return ""


SAMPLE_IDS = [s.id for s in SAMPLES]
assert len(set(SAMPLE_IDS)) == len(SAMPLE_IDS), "sample ids are unique"


def test_every_row_has_a_sample():
    reached = set().union(*(s.reaches for s in SAMPLES))
    missing = set(TABLE) - reached - set(EXEMPT)
    assert not missing, f"op rows without a sample in the harness: {sorted(missing)}"
    assert not reached - set(TABLE), f"samples name rows the table lacks: {sorted(reached - set(TABLE))}"
    # every dtype an elementwise row computes in
    for name, row in TABLE.items():
        if row["kind"] in ("unary", "binary") and row["dtypes"]:
            have = {s.id.rsplit("-", 1)[1] for s in SAMPLES if name in s.reaches and s.id.startswith(name + "-")}
            assert set(row["dtypes"]) <= have, f"{name}: no sample in {set(row['dtypes']) - have}"


@pytest.mark.parametrize("s", SAMPLES, ids=SAMPLE_IDS)
def test_eager_against_pytorch(s):
    if s.ref is False:
        pytest.skip(s.why)
    want = flat(s.fn(torch, *tensors(torch, s.inputs, leaves=s.leaves)))
    close(eager(s), want, f"{s.id}: ember eager vs PyTorch", s.tol)


@pytest.mark.parametrize("backend", ["interp", "llvm"])
@pytest.mark.parametrize("s", SAMPLES, ids=SAMPLE_IDS)
def test_compiled_against_eager(s, backend):
    if backend == "llvm" and not ember.compiler.has_llvm():
        pytest.skip("built without LLVM")
    cf, got = compiled(s, backend)
    stats = cf._stats()
    data_dependent = any(TABLE[r]["data_dependent"] for r in s.reaches)
    if not data_dependent:
        assert stats["compiled_calls"] >= 1, f"{s.id} ran eagerly: {stats['fallbacks']}"
        text = graph_of(cf)
        for row in s.in_graph or s.reaches:
            assert re.search(rf"\b{row}\(", text), f"{s.id}: the compiled graph holds no {row}:\n{text}"
    close(got, eager(s), f"{s.id}: compiled ({backend}) vs eager", s.tol)


@pytest.mark.parametrize("s", [s for s in SAMPLES if s.grad], ids=[s.id for s in SAMPLES if s.grad])
def test_gradients_numerically(s):
    args = tensors(ember, s.inputs, s.grad, f64=True)

    def f(*ts):
        outs = s.fn(ember, *ts)
        outs = outs if isinstance(outs, (tuple, list)) else (outs,)
        return tuple(o for o in outs if o.dtype == ember.float64)
    assert ember.autograd.gradcheck(f, tuple(args), eps=1e-6, atol=1e-5, rtol=1e-3)


# Elementwise rows, reductions, scans, casts and matmul again with their
# inputs transposed or strided: the compiled kernels are specialised on
# their inputs' strides, and each is checked against eager (and eager
# against PyTorch) on the same strided inputs.
STRIDED = [s for s in SAMPLES if any(TABLE[r]["kind"] in ("unary", "binary", "ternary", "reduce", "scan", "cast",
                                                           "matmul") for r in s.reaches)
           and s.inputs and s.inputs[0].ndim >= 2]


@pytest.mark.parametrize("layout", ["transposed", "strided"])
@pytest.mark.parametrize("s", STRIDED, ids=[s.id for s in STRIDED])
def test_strided_inputs(s, layout):
    if s.ref is not False:
        want = flat(s.fn(torch, *tensors(torch, s.inputs, leaves=s.leaves, layout=layout)))
        close(eager(s, layout), want, f"{s.id}, {layout}: ember eager vs PyTorch", s.tol)
    for backend in ("interp", "llvm") if ember.compiler.has_llvm() else ("interp",):
        cf, got = compiled(s, backend, layout)
        assert cf._stats()["compiled_calls"] >= 1, f"{s.id} ran eagerly: {cf._stats()['fallbacks']}"
        close(got, eager(s, layout), f"{s.id}, {layout}: compiled ({backend}) vs eager", s.tol)


# ---- the meta device: shapes, dtypes and strides, no data ----

def flat_tensors(r):
    """A result's tensors, in flat()'s order (non-tensors as None)."""
    if isinstance(r, (tuple, list)):
        return [t for x in r for t in flat_tensors(x)]
    return [r if isinstance(r, ember.Tensor) else None]


def meta_inputs(s):
    """The sample's inputs on the meta device (leaves made so there: a move
    is not differentiable)."""
    out = []
    for i, a in enumerate(s.inputs):
        t = laid_out(ember, a, "row-major").to("meta")
        out.append(t.requires_grad_() if i in s.leaves else t)
    return out


@pytest.mark.parametrize("s", SAMPLES, ids=SAMPLE_IDS)
def test_meta_against_eager(s):
    """Every sample on meta tensors: each result on meta, with the shape,
    dtype and strides of the eager CPU result; a row whose result's shape
    depends on the data refuses with NotImplementedError."""
    if s.seeded:
        ember.manual_seed(0)
    want = flat_tensors(s.fn(ember, *tensors(ember, s.inputs, leaves=s.leaves)))
    with ember.device("meta"):  # (and the factories make meta tensors)
        if any(TABLE[r]["data_dependent"] for r in s.reaches):
            with pytest.raises(NotImplementedError, match="meta"):
                s.fn(ember, *meta_inputs(s))
            return
        got = flat_tensors(s.fn(ember, *meta_inputs(s)))
    assert len(got) == len(want), s.id
    for i, (g, w) in enumerate(zip(got, want)):
        if w is None:
            continue
        assert g is not None and g.is_meta, f"{s.id}, result {i}: not a meta tensor: {g!r}"
        assert (tuple(g.shape), g.dtype) == (tuple(w.shape), w.dtype), f"{s.id}, result {i}"
        if w.numel() > 1:
            assert g.stride() == w.stride(), f"{s.id}, result {i}: strides {g.stride()} vs {w.stride()}"


# ---- the CUDA device: every sample on "cuda" against eager on the CPU ----

_CUDA = pytest.mark.skipif(not ember.cuda.is_available(),
                           reason=f"no CUDA device for ember: {ember.cuda.why_unavailable()}")


def cuda_inputs(s):
    """The sample's inputs on "cuda" (leaves made there)."""
    out = []
    for i, a in enumerate(s.inputs):
        t = laid_out(ember, a, "row-major").to("cuda")
        out.append(t.requires_grad_() if i in s.leaves else t)
    return out


@_CUDA
@pytest.mark.parametrize("s", SAMPLES, ids=SAMPLE_IDS)
def test_cuda_against_eager(s):
    """Every sample with its inputs on "cuda" (and the factories making
    tensors there): each tensor result on the device, its values eager's
    on the CPU within the sample's tolerance (the GPU's libm differs from
    glibc in last bits). An op without a CUDA kernel yet is skipped with
    the error that names it; any other error fails. Under the host stand-in
    (EMBER_CUDA_HOST_STAND_IN=1, in CI) this checks that every op keeps its
    results, and the tensors it makes, on its inputs' device."""
    if s.seeded:
        ember.manual_seed(0)
    want_t = flat_tensors(s.fn(ember, *tensors(ember, s.inputs, leaves=s.leaves)))
    if s.seeded:
        ember.manual_seed(0)
    try:
        with ember.device("cuda"):
            got_t = flat_tensors(s.fn(ember, *cuda_inputs(s)))
    except NotImplementedError as e:
        if "cuda" not in str(e):
            raise
        pytest.skip(f"no CUDA kernel yet: {e}")
    assert len(got_t) == len(want_t), s.id
    for i, (g, w) in enumerate(zip(got_t, want_t)):
        if w is None:
            continue
        assert g is not None and g.device.type == "cuda", f"{s.id}, result {i}: not on cuda: {g!r}"
    got = [g.detach().cpu().numpy() for g, w in zip(got_t, want_t) if w is not None]
    want = [w.detach().numpy() for w in want_t if w is not None]
    close(got, want, f"{s.id}: cuda vs eager", s.tol)
