"""Compiled-call overhead and compile times (issue 5, in progress).

    PYTHONPATH=python:build/python /usr/bin/python3 bench/bench_compile.py

1. The cost of one compiled call that does almost nothing, with 4 tensor
   arguments and a 10-parameter model captured: Python's call, argument
   collection, the guards (4 arguments, 10 captured tensors' metadata),
   running a graph of one tiny fused kernel, and wrapping the result. An
   upper bound on the guards' cost, next to the guards alone (timed in C
   over 100k evaluations), the same function run eagerly and a bare Python
   call of a C function for scale.
2. Trace plus compile time of the GPT-2 block forward (bench_train.py) and of
   an MLP forward, and their steady compiled and eager times.

Medians over many calls; best of 3 rounds.
"""

import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import ember  # noqa: E402
from bench_train import gpt_block_fn, median_ms  # noqa: E402


def best_us(fn):
    return min(median_ms(fn, n=2000, warm=100) for _ in range(3)) * 1e3


def call_overhead():
    nn = ember.nn
    model = nn.Sequential(*[nn.Linear(4, 4) for _ in range(5)])  # 10 parameters
    params = list(model.parameters())

    def tiny(a, b, c, d):
        # touches every parameter (so all 10 are captured inputs) and the args
        s = a + b + c + d
        for p in params:
            s = s + p.sum()
        return s

    with ember.no_grad():
        cf = ember.compile(tiny)
        args = [ember.randn(4) for _ in range(4)]
        cf(*args)
        cf(*args)
        guard_lines = cf._specializations()[0]["guards"].splitlines()
        assert cf._stats()["hits"] >= 1 and sum(": tensor" in g for g in guard_lines) == 4
        compiled = best_us(lambda: cf(*args))
        eager = best_us(lambda: tiny(*args))
        bare = best_us(lambda: ember.add(args[0], args[1]))
        guards = min(cf._time_guards(100000, *args) for _ in range(3)) / 1e3
    return compiled, eager, bare, guards


def compile_times(name, make):
    with ember.no_grad():
        eager_fn = make(None)
        comp_fn = make(ember.compile)
        eager_fn()  # warm memory and kernels first: the traced call is an eager run too
        t = time.perf_counter()
        comp_fn()
        first = (time.perf_counter() - t) * 1e3
        steady_c = min(median_ms(comp_fn, n=10, warm=0) for _ in range(3))
        steady_e = min(median_ms(eager_fn, n=10, warm=0) for _ in range(3))
    return name, first, steady_e, steady_c


def mlp_forward(wrap):
    nn = ember.nn
    ember.manual_seed(0)
    m = nn.Sequential(nn.Linear(784, 512), nn.GELU(), nn.Linear(512, 512), nn.GELU(),
                      nn.Linear(512, 10))
    if wrap:
        m = wrap(m)
    x = ember.randn(128, 784)
    return lambda: m(x)


def main():
    compiled, eager, bare, guards = call_overhead()
    print(f"ember {ember.__version__}, {ember.get_num_threads()} threads, "
          f"LLVM {'on' if ember.compiler.has_llvm() else 'off'}\n")
    print("| a call with 4 tensor args and 10 captured parameters | time |")
    print("|---|---:|")
    print(f"| guards alone (collecting the arguments, checking 4 of them, grad mode and 10 captured "
          f"tensors) | {guards:.2f} us |")
    print(f"| compiled (guards + one tiny fused kernel + result) | {compiled:.2f} us |")
    print(f"| the same function eagerly (15 ops) | {eager:.2f} us |")
    print(f"| one bare `ember.add` call, for scale | {bare:.2f} us |")
    print()
    print("| graph | first call (trace + compile) | eager | compiled |")
    print("|---|---:|---:|---:|")
    for name, make in [("MLP forward 784-512-512-10 (GELU), batch 128", mlp_forward),
                       ("GPT-2 block forward", lambda w: gpt_block_fn(ember, wrap=w))]:
        name, first, e, c = compile_times(name, make)
        print(f"| {name} | {first:.0f} ms | {e:.2f} ms | {c:.2f} ms |")


if __name__ == "__main__":
    main()
