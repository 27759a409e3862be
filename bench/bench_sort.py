"""Sorting and selection next to PyTorch and NumPy, in one run. Prints a
Markdown table for RESULTS.md.

    PYTHONPATH=python:build/python /usr/bin/python3 bench/bench_sort.py

1. sort of 16M float32 values (one row, values and indices), and argsort;
2. topk(1000) of the same 16M values;
3. sort along the rows of a 4096 x 4096 float32 matrix, and topk(10) of
   each row;
4. kthvalue (the median position) of 16M values.

ember and PyTorch use 2 threads (PyTorch in a child process). NumPy's
np.sort / np.argsort(kind="stable") and np.partition are single-threaded
references; the floor is one copy of the values and their int64 indices
(what any sort must at least write). Times are medians; three rounds
interleave the contenders and each keeps its best.
"""

import json
import os
import platform
import subprocess
import sys

import numpy as np

from bench_train import median_ms

ROUNDS = 3
N = 1 << 24


def data(m):
    rng = np.random.default_rng(0)
    flat = rng.standard_normal(N, dtype=np.float32)
    rows = rng.standard_normal((4096, 4096), dtype=np.float32)
    return m.from_numpy(flat), m.from_numpy(rows)


def cases(m):
    x, r = data(m)
    return {
        "sort 16M float32": (lambda: m.sort(x), 3),
        "argsort 16M float32": (lambda: m.argsort(x), 3),
        "topk(1000) of 16M": (lambda: m.topk(x, 1000), 5),
        "kthvalue (median) of 16M": (lambda: m.kthvalue(x, N // 2), 3),
        "sort 4096 rows of 4096": (lambda: m.sort(r, 1), 3),
        "topk(10) of 4096 rows of 4096": (lambda: m.topk(r, 10, 1), 5),
    }


def numpy_cases():
    rng = np.random.default_rng(0)
    flat = rng.standard_normal(N, dtype=np.float32)
    rows = rng.standard_normal((4096, 4096), dtype=np.float32)
    return {
        "sort 16M float32": (lambda: np.sort(flat, kind="stable"), 3),
        "argsort 16M float32": (lambda: np.argsort(flat, kind="stable"), 3),
        "topk(1000) of 16M": (lambda: np.partition(flat, N - 1000)[N - 1000:], 5),
        "kthvalue (median) of 16M": (lambda: np.partition(flat, N // 2 - 1)[N // 2 - 1], 3),
        "sort 4096 rows of 4096": (lambda: np.sort(rows, axis=1, kind="stable"), 3),
        "topk(10) of 4096 rows of 4096": (lambda: np.partition(rows, 4086, axis=1)[:, 4086:], 5),
    }


def floor_cases():
    """One write of what a sort returns: the values and int64 indices."""
    flat = np.random.default_rng(0).standard_normal(N, dtype=np.float32)
    idx = np.empty(N, dtype=np.int64)
    out = np.empty_like(flat)

    def copy():
        np.copyto(out, flat)
        idx[:] = 0
    return {"sort 16M float32": (copy, 5), "sort 4096 rows of 4096": (copy, 5)}


TORCH = """
import json, sys, torch
sys.path.insert(0, {here!r})
import bench_sort as b
torch.set_num_threads(2)
print(json.dumps({{k: b.median_ms(f, n, warm=1) for k, (f, n) in b.cases(torch).items()}}))
"""


def torch_run():
    try:
        out = subprocess.run([sys.executable, "-c", TORCH.format(here=os.path.dirname(os.path.abspath(__file__)))],
                             capture_output=True, text=True, check=True)
        return json.loads(out.stdout.strip().splitlines()[-1])
    except (subprocess.CalledProcessError, ValueError, IndexError):
        return {}


def main():
    import ember
    import torch
    best = {}

    def keep(who, results):
        for k, v in results.items():
            best[(who, k)] = min(best.get((who, k), float("inf")), v)

    for _ in range(ROUNDS):
        keep("ember", {k: median_ms(f, n, warm=1) for k, (f, n) in cases(ember).items()})
        keep("torch", torch_run())
        keep("numpy", {k: median_ms(f, n, warm=1) for k, (f, n) in numpy_cases().items()})
        keep("floor", {k: median_ms(f, n, warm=1) for k, (f, n) in floor_cases().items()})
    print(f"ember {ember.__version__}, {ember.get_num_threads()} threads, {platform.machine()}, "
          f"{os.cpu_count()} CPUs; PyTorch {torch.__version__}; NumPy {np.__version__}")
    print("\n| | ember | PyTorch (2 threads) | NumPy (1 thread) | one copy (floor) | ember / PyTorch |")
    print("|---|---:|---:|---:|---:|---:|")
    cell = lambda who, k: f"{best[(who, k)]:.1f} ms" if (who, k) in best else "-"  # noqa: E731
    for k in cases(ember):
        ratio = f"{best[('ember', k)] / best[('torch', k)]:.2f}x" if ("torch", k) in best else "-"
        print(f"| {k} | {cell('ember', k)} | {cell('torch', k)} | {cell('numpy', k)} | {cell('floor', k)} "
              f"| {ratio} |")


if __name__ == "__main__":
    main()
