"""Random programs, compiled against eager (hypothesis).

Each example is a short program over random shapes (size-1 and size-0
dims included) and dtypes: elementwise ops with broadcasting and constants
(the canonicalize rules' 0, 1, 2 and 0.5 among them), powers, reductions
with and without keepdim, permutes, reshapes, expands, casts, matmuls,
batched matmuls read through permutes, contiguous() and wheres. The program runs eagerly and compiled (on whichever backend this
build has: CI runs both), and every result must match bit for bit (NaN
matches NaN; -0.0 matches 0.0, the one rewrite that changes it). A failure
shrinks to the smallest program and prints it with its compiled IR.

EMBER_GRAPH_EXAMPLES sets how many programs (default 2000: about 45 s on
the LLVM build here; the sanitizer run of tools/run_tests.sh takes fewer).
"""

import os

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import ember

pytestmark = pytest.mark.filterwarnings("ignore:ember.compile")

EXAMPLES = int(os.environ.get("EMBER_GRAPH_EXAMPLES", "2000"))
CONSTANTS = [0.0, 1.0, 2.0, 0.5, -1.0, 3.0]
UNARY = ["neg", "abs", "relu", "exp", "tanh", "sigmoid", "negneg", "square", "sqrt"]
BINARY = ["add", "sub", "mul", "div", "maximum", "minimum"]
FLOAT_ONLY = {"exp", "tanh", "sigmoid", "sqrt", "div"}

KINDS = ["binary", "binary", "binary", "unary", "unary", "pow", "reduce", "permute", "reshape", "expand",
         "cast", "matmul", "where", "contiguous", "bmm"]


def _decode(kind, gene):
    """A step from a kind and one integer: every parameter is a digit of the
    gene in its own base, so all choices are about equally likely and
    hypothesis shrinks a program by shrinking its genes."""
    def digit(n):
        nonlocal gene
        gene, d = divmod(gene, n)
        return d
    if kind == "binary":
        return (kind, BINARY[digit(len(BINARY))], digit(100), digit(100), CONSTANTS[digit(len(CONSTANTS))],
                bool(digit(2)), bool(digit(2)))
    if kind == "unary":
        return (kind, UNARY[digit(len(UNARY))], digit(100))
    if kind == "pow":
        return (kind, digit(100), [2.0, 0.5, 3.0][digit(3)])
    if kind == "reduce":
        return (kind, ["sum", "amax", "mean"][digit(3)], digit(100), digit(100), bool(digit(2)))
    if kind == "permute":
        return (kind, digit(100), digit(720))
    if kind in ("reshape", "where"):
        return (kind, digit(100), bool(digit(2))) if kind == "reshape" else (kind, digit(100), digit(100), bool(digit(2)))
    if kind == "cast":
        return (kind, digit(100), ["float32", "float64"][digit(2)])
    if kind == "matmul":
        return (kind, digit(100), digit(100))
    if kind == "bmm":
        return (kind, digit(100), digit(6))
    return (kind, digit(100))  # expand, contiguous


step = st.builds(_decode, st.sampled_from(KINDS), st.integers(0, 2 ** 40))

programs = st.fixed_dictionaries({
    "dtype": st.sampled_from(["float32", "float64", "int64"]),
    "shape": st.lists(st.sampled_from([0, 1, 2, 3, 5]), min_size=1, max_size=3),
    "inputs": st.integers(1, 3),
    "steps": st.lists(step, min_size=3, max_size=10),
    "seed": st.integers(0, 2 ** 16),
})


def _is_float(t):
    return t.dtype in (ember.float32, ember.float64)


def _broadcasts(a, b):
    try:
        np.broadcast_shapes(tuple(a.shape), tuple(b.shape))
        return True
    except ValueError:
        return False


def _permutation(n, seed):
    order, rest = [], list(range(n))
    for k in range(n, 0, -1):
        order.append(rest.pop(seed % k))
        seed //= k
    return order


def _step(s, vals):
    """One step: appends its result to vals. Operands are picked modulo the
    values there are, and every choice is made from shapes and dtypes, so
    eager and traced runs do the same thing."""
    kind, x = s[0], None
    if kind == "unary":
        _, name, i = s
        x = vals[i % len(vals)]
        if name in FLOAT_ONLY and not _is_float(x):
            name = "neg"
        x = {"neg": lambda: -x, "abs": lambda: x.abs(), "relu": lambda: x.relu(), "exp": lambda: x.exp(),
             "tanh": lambda: x.tanh(), "sigmoid": lambda: x.sigmoid(), "negneg": lambda: -(-x),
             "square": lambda: x * x, "sqrt": lambda: x.abs().sqrt()}[name]()
    elif kind == "binary":
        _, name, i, j, c, left, constant = s
        a, b = vals[i % len(vals)], vals[j % len(vals)]
        if constant or not _broadcasts(a, b) or name in ("maximum", "minimum") and a.dtype != b.dtype:
            b = c if name not in ("maximum", "minimum") else ember.full((), c, dtype=a.dtype)
        op = {"add": lambda p, q: p + q, "sub": lambda p, q: p - q, "mul": lambda p, q: p * q,
              "div": lambda p, q: p / q, "maximum": ember.maximum, "minimum": ember.minimum}[name]
        x = op(b, a) if left and name not in ("maximum", "minimum") else op(a, b)
    elif kind == "pow":
        _, i, c = s
        a = vals[i % len(vals)]
        x = a ** c if _is_float(a) else a ** 2
    elif kind == "reduce":
        _, name, i, d, keep = s
        a = vals[i % len(vals)]
        if a.ndim == 0 or (name == "amax" and 0 in tuple(a.shape)):
            x = a * 1.0
        else:
            if name == "mean" and not _is_float(a):
                name = "sum"
            x = getattr(a, name)(d % a.ndim, keepdim=keep)
    elif kind == "permute":
        _, i, seed = s
        a = vals[i % len(vals)]
        x = a.permute(*_permutation(a.ndim, seed)) if a.ndim else a
    elif kind == "reshape":
        _, i, flat = s
        a = vals[i % len(vals)]
        x = a.reshape(-1) if flat else a.unsqueeze(0).reshape(*a.shape, 1)
    elif kind == "expand":
        _, i = s
        a = vals[i % len(vals)]
        sizes = [3 if n == 1 else n for n in a.shape]
        x = a.expand(*sizes) if a.ndim else a.expand(2)
    elif kind == "cast":
        _, i, dt = s
        x = vals[i % len(vals)].to(getattr(ember, dt))
    elif kind == "matmul":
        _, i, j = s
        a, b = vals[i % len(vals)], vals[j % len(vals)]
        if a.ndim == 2 and b.ndim == 2 and a.shape[1] == b.shape[0] and a.dtype == b.dtype:
            x = a @ b
        elif a.ndim >= 1 and a.shape[-1] > 0:
            m = a.reshape(-1, a.shape[-1])
            x = m @ m.t()
        else:
            x = a + 1
    elif kind == "contiguous":  # (the layout pass drops the ones no consumer needs)
        _, i = s
        x = vals[i % len(vals)].contiguous()
    elif kind == "bmm":  # a batched product read through a permute (a laid-out result)
        _, i, seed = s
        a = vals[i % len(vals)]
        if a.ndim >= 1 and a.shape[-1] > 0:
            b3 = a if a.ndim == 3 else a.reshape(1, -1, a.shape[-1])
            x = (b3 @ b3.transpose(-2, -1)).permute(*_permutation(3, seed))
        else:
            x = a - 1
    elif kind == "where":
        _, i, j, same = s
        a, b = vals[i % len(vals)], vals[j % len(vals)]
        cond = a > 0
        x = ember.where(cond, b, b) if same and _broadcasts(a, b) else ember.where(cond, a, a * 2)
    vals.append(x)


def run_program(prog, *inputs):
    """The program's result: its last value, through one more op so that a
    rewrite of the last step meets an intermediate, as in most code."""
    vals = list(inputs)
    for s in prog["steps"]:
        _step(s, vals)
    last = vals[-1]
    return (last * 2 if last.dtype != ember.bool else last,)


def make_inputs(prog):
    rng = np.random.default_rng(prog["seed"])
    out = []
    for _ in range(prog["inputs"]):
        a = rng.standard_normal(prog["shape"]) * 3
        a = a.round() if prog["dtype"] == "int64" else a
        out.append(ember.tensor(a.astype(prog["dtype"])))
    return out


def same_values(got, want):
    return (got.dtype == want.dtype and tuple(got.shape) == tuple(want.shape) and
            np.array_equal(got.numpy(), want.numpy(), equal_nan=got.dtype in (ember.float32, ember.float64)))


@settings(max_examples=EXAMPLES, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(programs)
def test_random_programs_compiled_equal_eager(prog):
    inputs = make_inputs(prog)
    try:
        with ember.no_grad():
            want = run_program(prog, *inputs)
    except (RuntimeError, ValueError, IndexError, TypeError):
        return  # (a program eager refuses: nothing to compare)
    cf = ember.compile(lambda *xs: run_program(prog, *xs))
    with ember.no_grad():
        cf(*inputs)  # traced
        inputs2 = make_inputs(dict(prog, seed=prog["seed"] + 1))
        want2 = run_program(prog, *inputs2)
        got2 = cf(*inputs2)
    specs = cf._specializations()
    ir = cf._graph(0) if specs and specs[0]["backend"] not in ("eager", "pending") else "(not compiled)"
    for g, w in zip(got2, want2):
        assert same_values(g, w), f"compiled != eager for {prog}\n{ir}\ngot {g}\nwant {w}"
    # (every program here is plain tensor code: one that ran eagerly compared nothing)
    assert cf._stats()["compiled_calls"] == 1, (prog, specs[0]["reason"])


GRAD_EXAMPLES = max(1, EXAMPLES // 5)


@settings(max_examples=GRAD_EXAMPLES, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(programs)
def test_random_programs_compiled_backward_equals_eager(prog):
    """The same programs with inputs that require grad: the compiled function
    returns results with a CompiledFunctionBackward node (a joint trace,
    split into a forward and a backward graph), whose gradients must be
    eager's (to rounding: the backward graph's passes may sum in another
    order)."""
    if prog["dtype"] not in ("float32", "float64"):
        return

    def grads_of(fn, inputs):
        xs = [x.detach().requires_grad_() for x in inputs]
        (out,) = fn(*xs)
        if not out.requires_grad:
            return None, None
        g = ember.tensor(np.random.default_rng(prog["seed"]).standard_normal(tuple(out.shape)).astype(prog["dtype"]))
        return out, ember.autograd.grad(out, xs, g, allow_unused=True)

    inputs = make_inputs(prog)
    try:
        want_out, _ = grads_of(lambda *xs: run_program(prog, *xs), inputs)
    except (RuntimeError, ValueError, IndexError, TypeError):
        return
    if want_out is None:
        return
    cf = ember.compile(lambda *xs: run_program(prog, *xs))
    grads_of(cf, inputs)  # traced
    inputs2 = make_inputs(dict(prog, seed=prog["seed"] + 1))
    want_out, want = grads_of(lambda *xs: run_program(prog, *xs), inputs2)
    got_out, got = grads_of(cf, inputs2)
    specs = cf._specializations()
    assert specs and specs[0]["backend"] not in ("eager", "pending"), (prog, specs and specs[0]["reason"])
    assert cf._stats()["compiled_calls"] == 1 and got_out.grad_fn.name() == "CompiledFunctionBackward"
    ir = cf._graph(0) + "\n" + specs[0]["backward"]
    tol = 1e-4 if prog["dtype"] == "float32" else 1e-10
    np.testing.assert_allclose(got_out.detach().numpy(), want_out.detach().numpy(), rtol=tol, atol=tol,
                               err_msg=f"{prog}\n{ir}")
    for i, (g, w) in enumerate(zip(got, want)):
        assert (g is None) == (w is None), f"gradient {i}: {g} vs {w}\n{prog}\n{ir}"
        if g is not None:
            np.testing.assert_allclose(g.numpy(), w.numpy(), rtol=tol, atol=tol,
                                       err_msg=f"gradient {i} of {prog}\n{ir}")
