"""ember.compiler.explain(), the call counters and EMBER_DUMP=dot: what a
compiled function says about a call is what happened to it."""

import os
import subprocess
import sys

import pytest

import ember

pytestmark = pytest.mark.filterwarnings("ignore:ember.compile")


def make():
    @ember.compile
    def gelu(x):
        return 0.5 * x * (1.0 + ember.tanh(0.7978845608 * (x + 0.044715 * x * x * x)))
    return gelu


def test_first_call_traces_then_runs_compiled():
    f = make()
    x = ember.randn(64)
    e = ember.compiler.explain(f, x, print_report=False)
    assert e.event == "traced" and e.specialization is not None
    assert "traced (it ran eagerly while recording) into specialisation 0" in e.text
    assert "x: tensor dtype=f32 device=cpu shape=[64] strides=[1]" in e.text  # the guard
    assert "passes: " + ", ".join(ember._C._pass_pipeline()) in e.text
    assert "tanh(" in e.text and "fused(" in e.text  # graph as traced, then fused
    assert "compile time: trace" in e.text and "passes" in e.text and "backend" in e.text
    backend = e.specialization["backend"]
    assert f"kernels ({backend} backend)" in e.text
    if backend == "llvm":
        assert "1 fused kernel" in e.text
    e2 = ember.compiler.explain(f, x, print_report=False)
    assert e2.event == "compiled"
    assert f"ran compiled specialisation 0 ({backend} backend)" in e2.text
    assert (e2.result - f.__wrapped__(x)).abs().max().item() == 0.0
    assert e2.stats["hits"] == 1 and e2.stats["misses"] == 1 and e2.stats["recompiles"] == 0


def test_guard_miss_recompiles_and_eager_reasons_are_counted():
    f = make()
    f(ember.randn(8))
    f(ember.randn(8))
    e = ember.compiler.explain(f, ember.randn(3, 5), print_report=False)  # new shape
    assert e.event == "traced" and "shape=[3,5]" in e.text
    e = ember.compiler.explain(f, ember.randn(8).requires_grad_(), print_report=False)
    assert e.event == "traced" and "saved for backward" in e.text and ".backward(" in e.text
    with ember.compiler.disabled():
        e = ember.compiler.explain(f, ember.randn(8), print_report=False)
    assert e.event == "eager" and "disabled" in e.reason
    stats = f._stats()
    assert stats["hits"] == 1 and stats["misses"] == 3 and stats["recompiles"] == 2
    assert stats["eager_calls"] == 1 and len(stats["fallbacks"]) == 1
    assert all(count == 1 for count in stats["fallbacks"].values())
    assert "eager x1: compilation is disabled" in e.text


def test_cache_limit_is_a_reason():
    f = ember.compile(lambda x: x * 2 + 1, cache_limit=1)
    f(ember.randn(2))
    e = ember.compiler.explain(f, ember.randn(3), print_report=False)
    assert e.event == "eager" and "cache limit of 1" in e.reason


def test_uncompilable_trace_is_explained():
    @ember.compile
    def f(x):
        return x[x > 0]  # its result's shape depends on the values
    e = ember.compiler.explain(f, ember.randn(6), print_report=False)
    assert e.event == "traced" and "could not be compiled" in e.text
    e = ember.compiler.explain(f, ember.randn(6), print_report=False)
    assert e.event == "eager" and "depends on the input's values" in e.reason


def test_explain_prints_and_accepts_plain_functions(capsys):
    e = ember.compiler.explain(lambda x: (x + 1).exp(), ember.ones(4))
    assert capsys.readouterr().out.strip() == e.text
    assert e.result.tolist() == pytest.approx([7.389056099] * 4, rel=1e-6)  # e ** 2


def test_dump_dot(tmp_path):
    code = ("import ember\n"
            "f = ember.compile(lambda x: (x * 2).exp() + x.sum())\n"
            "x = ember.randn(16)\n"
            "f(x); f(x)\n")
    env = dict(os.environ, EMBER_DUMP="dot", EMBER_DUMP_DIR=str(tmp_path),
               PYTHONPATH=os.pathsep.join(sys.path))
    subprocess.run([sys.executable, "-c", code], env=env, check=True)
    dots = [os.path.join(d, f) for d, _, fs in os.walk(tmp_path) for f in fs if f.endswith(".dot")]
    assert len(dots) == 1 and dots[0].endswith("final.dot")
    text = open(dots[0]).read()
    assert text.startswith("digraph") and text.rstrip().endswith("}")
    assert "cluster_" in text  # the fused kernel
    assert "sum\\n" in text and "result 0" in text and "%x" in text


def test_time_guards_hook_for_the_benchmark():
    f = make()
    x = ember.randn(8)
    f(x)
    assert f._time_guards(10, x) > 0
    with pytest.raises(ValueError, match="fails the guards"):
        f._time_guards(10, ember.randn(9))


def test_grad_mode_is_a_guard():
    f = make()
    x = ember.randn(8)
    f(x)
    with ember.no_grad():
        e = ember.compiler.explain(f, x, print_report=False)
    assert e.event == "traced" and "(grad mode): bool == False" in e.text
    assert "(grad mode): bool == True" in f._specializations()[0]["guards"]


def mlp_forward():
    ember.manual_seed(0)
    m = ember.nn.Sequential(ember.nn.Linear(64, 256), ember.nn.ReLU(), ember.nn.Linear(256, 4))
    return m, ember.randn(32, 64)


def test_profiling_times_every_node_of_compiled_runs():
    m, x = mlp_forward()
    cm = ember.compile(m)
    with ember.no_grad():
        cm(x)
        cm(x)  # compiled, not profiled
        assert ember.compiler.profile_report(cm) == ""
        assert not ember.compiler.is_profiling()
        with ember.compiler.profiling():
            assert ember.compiler.is_profiling()
            for _ in range(4):
                cm(x)
        assert not ember.compiler.is_profiling()
        cm(x)  # not counted
    report = ember.compiler.profile_report(cm)
    spec = cm._specializations()[0]
    head, *rows = report.splitlines()
    assert head.startswith(f"specialisation 0 ({spec['backend']} backend): 4 profiled runs, ")
    graph = cm._compiled._graph(0)
    nodes = [line for line in graph.splitlines() if " = " in line and line.startswith("  %")]
    assert len(rows) == len(nodes)  # one row per node of the graph after the passes
    shares = [float(r.split("%")[0].split("us")[1]) for r in rows]
    assert abs(sum(shares) - 100.0) < 0.5
    times = [float(r.split("us")[0]) for r in rows]
    assert times == sorted(times, reverse=True) and times[0] > 0
    # each row names the node as the printed graph does, how it ran and where it came from
    # (the first layer's matmul, bias and relu are one node: a GEMM epilogue)
    how = "compiled kernel" if spec["backend"] == "llvm" else "op by op"
    matmuls = [r for r in rows if f"fused of 3 ops -> f32[32,256], {how}, test_explain.py:" in r]
    assert len(matmuls) == 1
    ref = matmuls[0].split("%", 2)[2].split(" = ")[0]
    assert f"%{ref} = fused(%" in graph
    # explain shows the same table (its own call is not profiled)
    with ember.no_grad():
        e = ember.compiler.explain(cm, x, print_report=False)
    assert e.event == "compiled" and "time per node: 4 profiled runs" in e.text
    assert matmuls[0].strip() in e.text


def test_ember_profile_env_turns_profiling_on():
    code = ("import ember\n"
            "assert ember.compiler.is_profiling()\n"
            "f = ember.compile(lambda x: (x * 2).relu())\n"
            "x = ember.randn(4)\n"
            "f(x); f(x); f(x)\n"
            "print(ember.compiler.profile_report(f))\n")
    env = dict(os.environ, EMBER_PROFILE="1")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         check=True).stdout
    assert "2 profiled runs" in out and "fused of " in out
