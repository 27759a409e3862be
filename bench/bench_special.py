"""Special functions (issue 40, item 6): accuracy against exact values and
speed, ember next to PyTorch and the C library, in one run.

    PYTHONPATH=python:build/python /usr/bin/python3 bench/bench_special.py [--n 1000000] [--repeat 5]

1. Accuracy: the worst error over tests/python/test_special_functions.py's
   points (float64; relative, or absolute where smaller, near an
   oscillating function's zeros) against mpmath at 30 digits, for ember,
   PyTorch 1.13, and glibc where it has the function (j0 j1 y0 y1 lgamma
   through ctypes: the C limit of accuracy most programs get).
2. Speed: float64 evaluations of n points in [0.1, 30), the median of
   `repeat` runs, ember over PyTorch (both on ember's thread count), and
   glibc's loop in C, one thread, where it has the function (cc -O2).
Prints Markdown tables for RESULTS.md."""

import argparse
import ctypes
import os
import subprocess
import sys
import tempfile
import time

import numpy as np
import torch

import ember

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "python"))
from test_special_functions import CASES, POINTS, _exact, _worst  # noqa: E402

TORCH = {"gammaln": torch.special.gammaln, "digamma": torch.special.digamma, "i0e": torch.special.i0e,
         "i1e": torch.special.i1e}
LIBM = {"bessel_j0": "j0", "bessel_j1": "j1", "bessel_y0": "y0", "bessel_y1": "y1", "gammaln": "lgamma"}

C_LOOP = r"""
#include <math.h>
#include <stddef.h>
void run(const double *x, double *y, size_t n, int which) {
    for (size_t i = 0; i < n; i++)
        y[i] = which == 0 ? j0(x[i]) : which == 1 ? j1(x[i]) : which == 2 ? y0(x[i]) : which == 3 ? y1(x[i])
             : lgamma(x[i]);
}
"""
C_WHICH = {"j0": 0, "j1": 1, "y0": 2, "y1": 3, "lgamma": 4}


def torch_fn(name):
    return TORCH.get(name) or getattr(torch.special, name, None)


def ember_fn(name):
    return getattr(ember.special, name)


def c_library():
    d = tempfile.mkdtemp()
    src, lib = os.path.join(d, "loop.c"), os.path.join(d, "loop.so")
    with open(src, "w") as f:
        f.write(C_LOOP)
    subprocess.run(["cc", "-O2", "-shared", "-fPIC", src, "-o", lib, "-lm"], check=True)
    so = ctypes.CDLL(lib)
    so.run.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    return so


def libm_values(name, xs):
    m = ctypes.CDLL("libm.so.6")
    f = getattr(m, LIBM[name])
    f.restype, f.argtypes = ctypes.c_double, [ctypes.c_double]
    return np.array([f(float(x)) for x in xs])


def accuracy_table():
    print("| function | ember | PyTorch 1.13 | glibc |\n|---|---:|---:|---:|")
    for name in sorted(CASES):
        exact, _ = CASES[name]
        want = _exact(exact, POINTS)
        x = POINTS.astype(np.float64)
        mine = _worst(ember_fn(name)(ember.tensor(x)).numpy(), want)
        tf = torch_fn(name)
        theirs = _worst(tf(torch.tensor(x)).numpy(), want) if tf is not None else None
        libm = _worst(libm_values(name, x), want) if name in LIBM else None
        print(f"| {name} | {mine:.1e} | {'-' if theirs is None else f'{theirs:.1e}'} | "
              f"{'-' if libm is None else f'{libm:.1e}'} |")


def median_time(fn, repeat):
    fn()
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return float(np.median(times))


def speed_table(n, repeat):
    so = c_library()
    x = np.random.default_rng(0).uniform(0.1, 30.0, n)
    xe, xt = ember.tensor(x), torch.tensor(x)
    out = np.empty_like(x)
    print(f"| function ({n} float64) | ember ms | PyTorch ms | ember / PyTorch | glibc loop ms | ember / glibc |")
    print("|---|---:|---:|---:|---:|---:|")
    for name in sorted(CASES):
        te = median_time(lambda: ember_fn(name)(xe), repeat) * 1e3
        tf = torch_fn(name)
        tt = median_time(lambda: tf(xt), repeat) * 1e3 if tf is not None else None
        tc = None
        if name in LIBM:
            which = C_WHICH[LIBM[name]]
            tc = median_time(lambda: so.run(x.ctypes.data, out.ctypes.data, n, which), repeat) * 1e3
        cells = [f"{te:.2f}", "-" if tt is None else f"{tt:.2f}", "-" if tt is None else f"{te / tt:.2f}",
                 "-" if tc is None else f"{tc:.2f}", "-" if tc is None else f"{te / tc:.2f}"]
        print(f"| {name} | " + " | ".join(cells) + " |")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--n", type=int, default=1_000_000)
    p.add_argument("--repeat", type=int, default=5)
    a = p.parse_args()
    torch.set_num_threads(ember.get_num_threads())  # (PyTorch defaults to the physical cores)
    print(f"ember threads {ember.get_num_threads()}, torch threads {torch.get_num_threads()}, "
          f"torch {torch.__version__}, numpy {np.__version__}\n")
    accuracy_table()
    print()
    speed_table(a.n, a.repeat)


if __name__ == "__main__":
    main()
