"""The cost of one tiny compiled call, compared across builds (issue 12).

    PYTHONPATH=python:build/python /usr/bin/python3 bench/bench_call_overhead.py [BUILD ...]

Runs bench_compile.call_overhead() (a call with 4 tensor arguments and 10
captured parameters whose graph is 10 small reductions and one fused
kernel: Python's call, argument collection, guards, the compiled run and
the result) in a fresh process per build, in interleaved rounds, keeping
each build's best; with no BUILD, this checkout's build/ only. A BUILD is a
checkout whose build/ holds ember (say, a worktree of an older commit), so
the figures of two versions come from one run on one machine. Beside them,
the same function run eagerly by ember and by PyTorch (one thread), and a
bare `ember.add` call, for scale.

Then issue 39's tiny call (bench_compile.tiny_chain()): a 6-op elementwise
chain over 8 elements reading one guarded global, compiled with the default
EMBER_JIT_MIN_ELEMENTS, against ember eagerly, PyTorch and NumPy eagerly and
one bare `ember.add` (the targets: at most 0.8x the eager chain and 3x the
bare add).
"""

import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
ROUNDS = 3

CHILD = """
import json, sys
sys.path.insert(0, {bench!r})
import bench_compile
compiled, eager, bare, guards = bench_compile.call_overhead()
chain_c, chain_e, _ = bench_compile.tiny_chain()
print(json.dumps(dict(compiled=compiled, eager=eager, bare=bare, guards=guards,
                      chain_compiled=chain_c, chain_eager=chain_e)))
"""

TORCH = """
import json, time, torch
torch.set_num_threads(1)
model = torch.nn.Sequential(*[torch.nn.Linear(4, 4) for _ in range(5)])
params = list(model.parameters())
def tiny(a, b, c, d):
    s = a + b + c + d
    for p in params:
        s = s + p.sum()
    return s
args = [torch.randn(4) for _ in range(4)]
cargs = [torch.randn(8) for _ in range(4)]
def chain(a, b, c, d):
    return ((a + b) * c - d).relu() * 0.5 + a
best = best_chain = 1e9
with torch.no_grad():
    for _ in range(3):
        for _ in range(100):
            tiny(*args)
        t = time.perf_counter()
        for _ in range(2000):
            tiny(*args)
        best = min(best, (time.perf_counter() - t) / 2000 * 1e6)
        t = time.perf_counter()
        for _ in range(2000):
            chain(*cargs)
        best_chain = min(best_chain, (time.perf_counter() - t) / 2000 * 1e6)
print(json.dumps(dict(eager=best, chain=best_chain)))
"""


def run(code, pythonpath):
    env = dict(os.environ, PYTHONPATH=pythonpath, OMP_NUM_THREADS="1")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def build_path(build):
    """The PYTHONPATH of a checkout whose build/ holds ember."""
    return os.pathsep.join([os.path.join(build, "python"), os.path.join(build, "build", "python")])


def keep_best(best, figures):
    """Each figure of a run kept in best where it is lower (best of the rounds)."""
    for k, v in figures.items():
        best[k] = min(best.get(k, v), v)


def describe(build):
    """A build's commit, as the tables name it."""
    return subprocess.run(["git", "-C", build, "log", "-1", "--format=%h %s"], capture_output=True,
                          text=True).stdout.strip()[:60] or build


NUMPY = """
import json, time
import numpy as np
def chain(a, b, c, d):
    return np.maximum((a + b) * c - d, 0) * np.float32(0.5) + a
args = [np.random.randn(8).astype(np.float32) for _ in range(4)]
best = 1e9
for _ in range(3):
    for _ in range(100):
        chain(*args)
    t = time.perf_counter()
    for _ in range(2000):
        chain(*args)
    best = min(best, (time.perf_counter() - t) / 2000 * 1e6)
print(json.dumps(dict(chain=best)))
"""


def main():
    builds = sys.argv[1:] or [ROOT]
    best = {b: {} for b in builds}
    rival = {}
    for _ in range(ROUNDS):
        for b in builds:
            keep_best(best[b], run(CHILD.format(bench=HERE), build_path(b)))
        for name, code in (("torch", TORCH), ("numpy", NUMPY)):
            try:
                for k, v in run(code, "").items():
                    rival[name, k] = min(rival.get((name, k), v), v)
            except (subprocess.CalledProcessError, json.JSONDecodeError):
                pass
    names = {b: describe(b) for b in builds}
    print("| build | guards alone | compiled call | the function eagerly | bare `ember.add` |")
    print("|---|---:|---:|---:|---:|")
    for b in builds:
        r = best[b]
        print(f"| {names[b]} | {r['guards']:.2f} us | {r['compiled']:.2f} us | {r['eager']:.2f} us | "
              f"{r['bare']:.2f} us |")
    if ("torch", "eager") in rival:
        print(f"\nPyTorch runs the same function eagerly (1 thread) in {rival['torch', 'eager']:.2f} us.")
    print("\nThe tiny chain `((a + b) * c - d).relu() * HALF + a` over 8 float32 elements "
          "(HALF a guarded global), compiled with the default EMBER_JIT_MIN_ELEMENTS:\n")
    print("| build | compiled | ember eagerly | compiled / eager | compiled / bare add |")
    print("|---|---:|---:|---:|---:|")
    for b in builds:
        r = best[b]
        print(f"| {names[b]} | {r['chain_compiled']:.2f} us | {r['chain_eager']:.2f} us | "
              f"{r['chain_compiled'] / r['chain_eager']:.2f}x | {r['chain_compiled'] / r['bare']:.2f}x |")
    for name in ("torch", "numpy"):
        if (name, "chain") in rival:
            print(f"\n{'PyTorch (1 thread)' if name == 'torch' else 'NumPy'} runs the chain eagerly in "
                  f"{rival[name, 'chain']:.2f} us.")


if __name__ == "__main__":
    main()
