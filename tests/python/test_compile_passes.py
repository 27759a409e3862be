"""The middle end from Python: every canonicalize rule, cse and const-fold
fire on functions users write and leave the results bit for bit as eager
(on whichever backend this build has), explain() says which rules fired,
and ember.compile(passes=...) or EMBER_PASSES choose the pipeline."""

import os
import re
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import ember
from conftest import subprocess_env

pytestmark = pytest.mark.filterwarnings("ignore:ember.compile")


def positive(*shape):
    return ember.rand(*shape) + 0.5


# (name, function, arguments, the rule the report must name). Each function
# returns a value computed from the rewritten node (not the node itself),
# which is where the rules apply.
RULES = [
    ("x*1", lambda x: (x * 1.0).exp(), lambda: (ember.randn(5, 3),), "x * 1 -> x"),
    ("1*x", lambda x: (1.0 * x).exp(), lambda: (ember.randn(5, 3),), "x * 1 -> x"),
    ("x+(-0)", lambda x: (x + (-0.0)).exp(), lambda: (positive(5, 3),), "x + (-0) -> x"),
    ("x-0", lambda x: (x - 0.0).exp(), lambda: (ember.randn(5, 3),), "x - 0 -> x"),
    ("x/1", lambda x: (x / 1.0).exp(), lambda: (ember.randn(5, 3),), "x / 1 -> x"),
    ("neg neg", lambda x: (-(-x)).exp(), lambda: (ember.randn(5, 3),), "neg(neg(x)) -> x"),
    ("x - (-y)", lambda x, y: x - (-y), lambda: (ember.randn(5, 3), ember.randn(3)), "x - neg(y) -> x + y"),
    ("pow 2", lambda x: x ** 2, lambda: (ember.randn(5, 3),), "pow(x, 2) -> x * x"),
    ("pow 0.5", lambda x: x ** 0.5, lambda: (positive(5, 3),), "pow(x, 0.5) -> sqrt(x)"),
    ("where same", lambda c, x: ember.where(c, x, x).exp(), lambda: (ember.randn(5, 3) > 0, ember.randn(5, 3)),
     "where(c, x, x) -> x"),
    ("clone", lambda x: x.clone().exp(), lambda: (ember.randn(5, 3),), "cast to its own dtype -> x"),
    ("cast chain", lambda x: x.float().double(), lambda: (ember.randn(5, 3).half(),),
     "cast(cast(x)) -> cast(x)"),
    ("permute chain", lambda x: x.permute(1, 0, 2).permute(2, 1, 0) * 2.0, lambda: (ember.randn(2, 3, 4),),
     "permute(permute(x)) -> permute(x)"),
    ("transpose twice", lambda x: x.t().t().exp(), lambda: (ember.randn(5, 3),), "permute to the same order -> x"),
    ("reshape chain", lambda x: x.reshape(6, 4).reshape(24) * 2.0, lambda: (ember.randn(2, 3, 4),),
     "reshape(reshape(x)) -> reshape(x)"),
    ("expand same", lambda x: x.expand(5, 3).exp(), lambda: (ember.randn(5, 3),), "expand to its own shape -> x"),
    ("cse", lambda x: x.exp() * x.exp(), lambda: (ember.randn(5, 3),), "cse: 1 duplicate node merged"),
    ("const-fold", lambda x: x * (ember.ones(()) * 3.0 + 1.0), lambda: (ember.randn(5, 3),),
     "const-fold: "),
]


@pytest.mark.parametrize("name,fn,make,said", RULES, ids=[r[0] for r in RULES])
def test_rule_fires_and_compiled_equals_eager(name, fn, make, said):
    cf = ember.compile(fn)
    with ember.no_grad():
        args = make()
        cf(*args)  # traced
        for _ in range(2):
            args = make()
            want, got = fn(*args), cf(*args)
            assert got.dtype == want.dtype and tuple(got.shape) == tuple(want.shape)
            np.testing.assert_array_equal(got.numpy(), want.numpy())
    (spec,) = cf._specializations()
    assert said in spec["pass_report"], spec["pass_report"]
    assert cf._stats()["compiled_calls"] == 2


def test_a_result_is_never_an_input():
    """x * 1 returned: eager gives a new tensor, so the compiled call must
    too (writing into the result must not change x)."""
    cf = ember.compile(lambda x: x * 1.0)
    x = ember.randn(4)
    cf(x)
    y = cf(x)
    assert cf._stats()["compiled_calls"] == 1
    before = x.numpy().copy()
    y.add_(1.0)
    np.testing.assert_array_equal(x.numpy(), before)


def test_explain_names_the_rules_that_fired():
    cf = ember.compile(lambda x: (-(-x) * 1.0).exp())
    x = ember.randn(8)
    e = ember.compiler.explain(cf, x, print_report=False)
    assert "canonicalize: neg(neg(x)) -> x (1)" in e.text
    assert "canonicalize: x * 1 -> x (1)" in e.text


def test_passes_choose_the_pipeline():
    fn = lambda x: (x * 1.0).exp().neg()  # noqa: E731
    cf = ember.compile(fn, passes=["dce"])
    x = ember.randn(8)
    cf(x)
    np.testing.assert_array_equal(cf(x).numpy(), fn(x).numpy())
    (spec,) = cf._specializations()
    assert spec["passes"] == "dce" and spec["pass_report"] == ""
    assert "fused" not in cf._graph(0) and "mul(" in cf._graph(0)
    assert ember.compiler.passes() == list(ember._C._pass_pipeline())
    with pytest.raises(ValueError, match="unknown pass 'fusion'"):
        ember.compile(fn, passes=["fusion"])


def test_ember_passes_environment_variable():
    code = textwrap.dedent("""
        import ember
        f = ember.compile(lambda x: (x * 1.0).exp())
        x = ember.randn(4)
        f(x)
        print(f._specializations()[0]["passes"])
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=subprocess_env(EMBER_PASSES="canonicalize,dce"), check=True).stdout
    assert out.strip() == "canonicalize, dce"


def test_memplan_orders_nodes_for_a_lower_peak():
    """cumsum(x) is made first and used last: memplan sinks the y chain
    below its use (the report says by how much the estimated peak drops),
    and the compiled call still gives eager's values; the backend's dump
    lists which value lives where in the arena."""
    def fn(x, y):
        a = x.cumsum(0)
        b = y.cumsum(0).sum()
        return a.sum() + b
    cf = ember.compile(fn)
    x, y = ember.randn(50000), ember.randn(50000)
    cf(x, y)
    np.testing.assert_array_equal(cf(x, y).numpy(), fn(x, y).numpy())
    (spec,) = cf._specializations()
    assert re.search(r"memplan: 2 nodes moved nearer their first use; estimated peak of intermediates "
                     r"(\d+) -> (\d+) bytes", spec["pass_report"]), spec["pass_report"]
    before, after = map(int, re.search(r"intermediates (\d+) -> (\d+)", spec["pass_report"]).groups())
    assert after < before
    graph = cf._graph(0)
    ops = [line.split(" = ")[1].split("(")[0] for line in graph.splitlines() if line.startswith("  %")]
    assert ops == ["cumsum", "sum", "cumsum", "sum", "fused"], graph  # (traced: cumsum, cumsum, sum, sum)
    if ember.compiler.has_llvm() and spec["backend"] == "llvm":
        assert re.search(r"memory plan \(arena offset, bytes: value.*\n +0 +200000: %\d+ f32\[50000\]",
                         spec["kernels"]), spec["kernels"]


@pytest.mark.skipif(not ember.compiler.has_llvm(), reason="the arena and its plan are the LLVM backend's")
def test_kernel_writes_into_a_dying_intermediate(monkeypatch):
    """A kernel whose input is used by it alone (softmax's result here)
    computes its result in that input's arena buffer: the plan lists it
    there, the kernel line says so, and the values are eager's, call after
    call. A kernel whose result is returned keeps memory of its own."""
    monkeypatch.setenv("EMBER_BACKEND", "llvm")

    def fn(a, b, c):
        s = (a @ b).softmax(-1)
        t = (s * 2 + 1).exp() @ c
        return t, (t.softmax(-1) + 1).sqrt()

    cf = ember.compile(fn)
    args = (ember.randn(64, 32), ember.randn(32, 64), ember.randn(64, 64))
    with ember.no_grad():
        cf(*args)
        for _ in range(3):
            for got, want in zip(cf(*args), fn(*args)):
                np.testing.assert_array_equal(got.numpy(), want.numpy())
    kernels = cf._specializations()[0]["kernels"]
    assert len(re.findall(r"result 0 written in place into %\d+, which dies here", kernels)) == 1, kernels
    assert re.search(r"\n +then %\d+, in place, \d+ \.\. \d+\n", kernels), kernels
