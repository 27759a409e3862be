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
print(json.dumps(dict(compiled=compiled, eager=eager, bare=bare, guards=guards)))
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
best = 1e9
with torch.no_grad():
    for _ in range(3):
        for _ in range(100):
            tiny(*args)
        t = time.perf_counter()
        for _ in range(2000):
            tiny(*args)
        best = min(best, (time.perf_counter() - t) / 2000 * 1e6)
print(json.dumps(dict(eager=best)))
"""


def run(code, pythonpath):
    env = dict(os.environ, PYTHONPATH=pythonpath, OMP_NUM_THREADS="1")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main():
    builds = sys.argv[1:] or [ROOT]
    best = {b: {} for b in builds}
    torch_us = None
    for _ in range(ROUNDS):
        for b in builds:
            path = os.pathsep.join([os.path.join(b, "python"), os.path.join(b, "build", "python")])
            r = run(CHILD.format(bench=HERE), path)
            for k, v in r.items():
                best[b][k] = min(best[b].get(k, v), v)
        try:
            t = run(TORCH, "")["eager"]
            torch_us = t if torch_us is None else min(torch_us, t)
        except (subprocess.CalledProcessError, json.JSONDecodeError):
            pass
    print("| build | guards alone | compiled call | the function eagerly | bare `ember.add` |")
    print("|---|---:|---:|---:|---:|")
    for b in builds:
        r = best[b]
        name = subprocess.run(["git", "-C", b, "log", "-1", "--format=%h %s"], capture_output=True,
                              text=True).stdout.strip()[:60] or b
        print(f"| {name} | {r['guards']:.2f} us | {r['compiled']:.2f} us | {r['eager']:.2f} us | "
              f"{r['bare']:.2f} us |")
    if torch_us is not None:
        print(f"\nPyTorch runs the same function eagerly (1 thread) in {torch_us:.2f} us.")


if __name__ == "__main__":
    main()
