"""Issue 41's speed measures: what the layers redesign (the device table,
the tensor's layer words, the interceptor stack) may cost, compared across
builds in one run.

    PYTHONPATH=python:build/python /usr/bin/python3 bench/bench_layers.py [BUILD ...]

A BUILD is a checkout whose build/ holds ember (a worktree of the commit
before the redesign, say); with none, this checkout only. Each build runs
in a fresh process per round, rounds interleaved, keeping each figure's
best: the Python cost of one tiny op (`a + b` on 1-element float32
tensors), the same op recording autograd history, an in-place `add_`, a
4-element backward, the guards of a compiled call (bench_compile's 4
arguments and 10 captured parameters), the compiled and eager MLP training
step (bench_train's), and three 1M-element float32 ops. PyTorch (one
thread) and NumPy run the tiny ones beside them, for scale.
"""

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
ROUNDS = 3
sys.path.insert(0, HERE)
from bench_call_overhead import build_path, describe, keep_best, run  # noqa: E402  (one thread, fresh processes)

TINY = """
import json, sys, time
sys.path.insert(0, {bench!r})
{setup}
def best_us(fn, n=20000):
    best = 1e9
    for _ in range(5):
        for _ in range(200):
            fn()
        t = time.perf_counter()
        for _ in range(n):
            fn()
        best = min(best, (time.perf_counter() - t) / n * 1e6)
    return best
a, b = lib.ones(1), lib.ones(1)
g = lib.ones(1, requires_grad=True)
w, x = lib.ones(4, requires_grad=True), lib.ones(4)
r = dict(add=best_us(lambda: a + b), add_grad=best_us(lambda: g + b), add_=best_us(lambda: a.add_(b)),
         backward=best_us(lambda: (w * x).sum().backward(), n=2000))
{more}
print(json.dumps(r))
"""

EMBER_MORE = """
import bench_compile, bench_train
ember = lib
# (first: after the MLP steps below the same ops run 2.6x faster in every
# build, the thread pool's workers being awake, which is not what is compared)
big, big2 = ember.randn(1 << 20), ember.randn(1 << 20)
r["add_1m_ms"] = min(bench_train.median_ms(lambda: big + big2, n=50) for _ in range(3))
r["exp_1m_ms"] = min(bench_train.median_ms(lambda: big.exp(), n=50) for _ in range(3))
r["sum_1m_ms"] = min(bench_train.median_ms(lambda: big.sum(), n=50) for _ in range(3))
compiled, eager, bare, guards = bench_compile.call_overhead()
r["guards"] = guards
step = bench_train.mlp_step_fn(ember)
cstep = bench_train.mlp_step_fn(ember, wrap=ember.compile)
for _ in range(3):
    cstep()
r["mlp_compiled_ms"] = min(bench_train.median_ms(cstep) for _ in range(3))
r["mlp_eager_ms"] = min(bench_train.median_ms(step) for _ in range(3))
"""

RIVALS = {
    "PyTorch": ("import torch as lib; torch = lib; torch.set_num_threads(1)", ""),
}

NUMPY = """
import json, time
import numpy as np
a, b = np.ones(1, np.float32), np.ones(1, np.float32)
best = 1e9
for _ in range(5):
    t = time.perf_counter()
    for _ in range(20000):
        a + b
    best = min(best, (time.perf_counter() - t) / 20000 * 1e6)
print(json.dumps(dict(add=best)))
"""


def main():
    builds = sys.argv[1:] or [ROOT]
    best = {b: {} for b in builds}
    rival = {}
    for _ in range(ROUNDS):
        for b in builds:
            keep_best(best[b], run(TINY.format(bench=HERE, setup="import ember as lib", more=EMBER_MORE),
                                   build_path(b)))
        for name, (setup, more) in RIVALS.items():
            for k, v in run(TINY.format(bench=HERE, setup=setup, more=more), "").items():
                rival[name, k] = min(rival.get((name, k), v), v)
        for k, v in run(NUMPY, "").items():
            rival["NumPy", k] = min(rival.get(("NumPy", k), v), v)
    names = {b: describe(b)[:50] for b in builds}
    cols = [("add", "`a + b`", "us"), ("add_grad", "`a + b`, recording", "us"), ("add_", "`a.add_(b)`", "us"),
            ("backward", "4-element backward", "us"), ("guards", "guards", "us"),
            ("mlp_compiled_ms", "MLP step compiled", "ms"), ("mlp_eager_ms", "MLP step eager", "ms"),
            ("add_1m_ms", "add 1M", "ms"), ("exp_1m_ms", "exp 1M", "ms"), ("sum_1m_ms", "sum 1M", "ms")]
    print("| build | " + " | ".join(c[1] for c in cols) + " |")
    print("|---|" + "---:|" * len(cols))
    for b in builds:
        print(f"| {names[b]} | " + " | ".join(f"{best[b][k]:.3f} {u}" if k in best[b] else "-"
                                               for k, _, u in cols) + " |")
    for name in ("PyTorch", "NumPy"):
        print(f"| {name} | " + " | ".join(f"{rival[name, k]:.3f} {u}" if (name, k) in rival else "-"
                                          for k, _, u in cols) + " |")
    if len(builds) == 2:
        a, b = builds
        print("\nratios (" + names[b].split()[0] + " / " + names[a].split()[0] + "): " +
              ", ".join(f"{c[1]} {best[b][c[0]] / best[a][c[0]]:.2f}x" for c in cols
                        if c[0] in best[a] and c[0] in best[b]))


if __name__ == "__main__":
    main()
