"""The first compiled call in a fresh process, with and without the compile
cache (issue 15, item 7). Prints a Markdown table for RESULTS.md.

    PYTHONPATH=python:build/python /usr/bin/python3 bench/bench_cache.py

Each case runs in a new process, which builds its function, times its
first calls up to one that runs compiled code, keeping the slowest (the
compile: trace, passes, and either LLVM's O3 and code generation or
loading the cached object code, the process's first LLVM start included;
a training step compiles twice, the second time for good once its .grad
slots exist, and the second is the slowest), then a steady call. Three modes:
  cold:  EMBER_CACHE=0, every compile from scratch (what a process paid
         before the cache);
  store: a fresh cache directory: the compile, plus writing the entry;
  warm:  the directory the store run filled.
Medians over ROUNDS processes per (case, mode), the modes interleaved.
Cases: GELU over 1M float32 (bench_gelu's), the MLP training step
(784-512-512-10, batch 128, SGD) and the GPT-2 block forward (batch 4,
seq 256, d 768), bench_train's.
"""

import json
import os
import statistics
import subprocess
import sys
import tempfile

ROUNDS = 5
HERE = os.path.dirname(os.path.abspath(__file__))

CHILD = r"""
import json, sys, time
sys.path.insert(0, {here!r})
t0 = time.perf_counter()
import ember
from bench_train import gpt_block_fn, mlp_step_fn
case = {case!r}
if case == "gelu":
    x = ember.randn(1 << 20)
    f = ember.compile(lambda x: ember.nn.functional.gelu(x))
    call = lambda: f(x)
elif case == "mlp step":
    call = mlp_step_fn(ember, wrap=ember.compile)
else:
    call = gpt_block_fn(ember, wrap=ember.compile)
t1 = time.perf_counter()
fn = f if case == "gelu" else call if case == "mlp step" else call.compiled
stats = getattr(fn, "_compiled", fn)._stats
# the calls until one runs compiled code: the slowest of them is the
# compile (a training step's first trace has no .grad slots yet; its second
# call misses that specialisation's guards and compiles the step for good)
first = 0.0
for _ in range(5):
    a = time.perf_counter()
    call()
    first = max(first, (time.perf_counter() - a) * 1e3)
    if stats()["compiled_calls"]:
        break
for _ in range(3):
    call()
before = stats()
t3 = time.perf_counter()
call()
t4 = time.perf_counter()
after = stats()  # (the steady call ran compiled code: benchmarks know what they timed)
assert after["compiled_calls"] == before["compiled_calls"] + 1 and after["eager_calls"] == before["eager_calls"], after
print(json.dumps({{"import_build_ms": (t1 - t0) * 1e3, "first_ms": first, "steady_ms": (t4 - t3) * 1e3}}))
"""

CASES = ["gelu", "mlp step", "gpt-2 block forward"]


def child(case, env):
    out = subprocess.run([sys.executable, "-c", CHILD.format(here=HERE, case=case)], env=env,
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main():
    base = dict(os.environ)
    results = {}
    with tempfile.TemporaryDirectory() as root:
        for case in CASES:
            runs = {"cold": [], "store": [], "warm": []}
            for r in range(ROUNDS):
                fresh = os.path.join(root, f"{case}-{r}".replace(" ", "_"))
                runs["cold"].append(child(case, dict(base, EMBER_CACHE="0")))
                runs["store"].append(child(case, dict(base, EMBER_CACHE_DIR=fresh)))
                runs["warm"].append(child(case, dict(base, EMBER_CACHE_DIR=fresh)))
            results[case] = {mode: {k: statistics.median(r[k] for r in rs) for k in rs[0]}
                             for mode, rs in runs.items()}
    import ember
    print(f"ember {ember.__version__}, {ember.get_num_threads()} threads, {os.cpu_count()} CPUs; "
          f"medians of {ROUNDS} fresh processes per cell")
    print("\n| first call in a fresh process | cold (EMBER_CACHE=0) | storing (empty cache) | warm cache "
          "| cold / warm | steady call |")
    print("|---|---:|---:|---:|---:|---:|")
    for case in CASES:
        r = results[case]
        cold, store, warm = r["cold"]["first_ms"], r["store"]["first_ms"], r["warm"]["first_ms"]
        print(f"| {case} | {cold:.1f} ms | {store:.1f} ms | {warm:.1f} ms | {cold / warm:.1f}x "
              f"| {r['warm']['steady_ms']:.2f} ms |")


if __name__ == "__main__":
    main()
