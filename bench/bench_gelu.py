"""GELU on 16M float32 values and the cost of one tiny op, in one run:
ember eager, ember compiled, NumPy, PyTorch eager (2 threads) and a
hand-written C loop (gcc -O3 -march=native -ffast-math -fopenmp, the
practical limit). Prints a Markdown table of median times and ratios.

    PYTHONPATH=python:build/python /usr/bin/python3 bench/bench_gelu.py

Each measurement is the median of REPEAT runs after a warm-up run, with the
output buffers of every contender reused from their allocators, so the
figures compare kernels, not page faults.
"""

import ctypes
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
import timeit

import numpy as np

from compiled_check import ran_compiled

import ember as em

N = 16 * 1024 * 1024
REPEAT = 20
HERE = os.path.dirname(os.path.abspath(__file__))


def gelu_ember(x):
    return 0.5 * x * (1.0 + em.tanh(0.7978845608 * (x + 0.044715 * x * x * x)))


gelu_compiled = em.compile(gelu_ember)


def gelu_numpy(x):
    return 0.5 * x * (1.0 + np.tanh(0.7978845608 * (x + 0.044715 * x * x * x)))


def median_ms(fn, *args):
    fn(*args)
    times = []
    for _ in range(REPEAT):
        t = time.perf_counter()
        fn(*args)
        times.append(time.perf_counter() - t)
    return statistics.median(times) * 1e3


def build_reference():
    """Compiles gelu_ref.c into a temporary shared library."""
    out = os.path.join(tempfile.mkdtemp(prefix="ember-bench-"), "libgelu_ref.so")
    subprocess.run(["gcc", "-O3", "-march=native", "-ffast-math", "-fopenmp", "-shared", "-fPIC",
                    os.path.join(HERE, "gelu_ref.c"), "-o", out, "-lm"], check=True)
    lib = ctypes.CDLL(out)
    lib.gelu_ref.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t]
    return lib


def per_call_us(stmt, globs, number=200000):
    best = min(timeit.repeat(stmt, globals=globs, number=number, repeat=5))
    return best / number * 1e6


def machine():
    cpu = "unknown CPU"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    gcc = subprocess.run(["gcc", "-dumpfullversion"], capture_output=True, text=True).stdout.strip()
    return f"{cpu}, {os.cpu_count()} cores; Python {platform.python_version()}, gcc {gcc}"


def main():
    os.environ.setdefault("OMP_NUM_THREADS", "2")
    rows = []
    em.manual_seed(0)
    x = em.randn(N)
    xn = x.numpy()

    t_eager = median_ms(gelu_ember, x)
    gelu_compiled(x), gelu_compiled(x)  # (the trace and the compile, then only compiled calls are timed)
    with ran_compiled(gelu_compiled, "ember compiled"):
        t_comp = median_ms(gelu_compiled, x)
    assert gelu_compiled._specializations()[0]["backend"] in ("llvm", "interp")
    backend = gelu_compiled._specializations()[0]["backend"]
    diff = float(np.max(np.abs(gelu_compiled(x).numpy() - gelu_ember(x).numpy())))
    t_numpy = median_ms(gelu_numpy, xn)

    lib = build_reference()
    yn = np.empty_like(xn)
    t_c = median_ms(lambda: lib.gelu_ref(xn.ctypes.data, yn.ctypes.data, N))
    ref_err = float(np.max(np.abs(yn - gelu_compiled(x).numpy())))

    torch = None
    try:
        import torch
        torch.set_num_threads(2)
        xt = torch.from_numpy(xn)
        t_torch = median_ms(lambda: 0.5 * xt * (1.0 + torch.tanh(0.7978845608 * (xt + 0.044715 * xt * xt * xt))))
    except ImportError:
        t_torch = float("nan")

    rows.append(("ember compiled (" + backend + ")", t_comp))
    rows.append(("ember eager", t_eager))
    rows.append(("NumPy", t_numpy))
    rows.append(("PyTorch eager, 2 threads", t_torch))
    rows.append(("C loop, -O3 -march=native -ffast-math, 2 threads", t_c))

    # The cost of one tiny op seen from Python.
    a, b = em.ones(1), em.ones(1)
    an, bn = np.ones(1, np.float32), np.ones(1, np.float32)
    ov = [("ember", per_call_us("a + b", {"a": a, "b": b})),
          ("NumPy", per_call_us("a + b", {"a": an, "b": bn}))]
    if torch is not None:
        at, bt = torch.ones(1), torch.ones(1)
        ov.append(("PyTorch", per_call_us("a + b", {"a": at, "b": bt})))

    print(f"## GELU, {N // (1024 * 1024)}M float32 values\n")
    print(f"Machine: {machine()}")
    print(f"Versions: ember {em.__version__}, NumPy {np.__version__}"
          + (f", PyTorch {torch.__version__}" if torch is not None else "") + "\n")
    print("| contender | median ms | vs C loop | compiled is faster by |")
    print("|---|---:|---:|---:|")
    for name, t in rows:
        print(f"| {name} | {t:.2f} | {t / t_c:.2f}x | {t / t_comp:.2f}x |")
    print(f"\nmax |compiled - eager| = {diff:g}; max |compiled - C loop| = {ref_err:.2g}\n")
    print("## Python cost of `a + b` on 1-element float32 tensors\n")
    print("| library | us per op | vs ember |")
    print("|---|---:|---:|")
    for name, us in ov:
        print(f"| {name} | {us:.3f} | {us / ov[0][1]:.2f}x |")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
