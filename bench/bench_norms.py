"""Softmax, layer norm and cross-entropy over rows, eager and compiled
(issue 13).

    PYTHONPATH=python:build/python /usr/bin/python3 bench/bench_norms.py

softmax over a 4096x4096 float32 matrix (rows of 4096) and layer_norm over
8192x1024 (rows of 1024, with weight and bias): ember's op (`em.softmax`,
`F.layer_norm`) and the expression a user writes, each eager and compiled
(the softmax expression also on a transposed view of a copy, its rows
strided),
and F.cross_entropy of 8192x1024 logits with class indices,
next to NumPy, PyTorch (2 threads, in a child process) and the hand-written
single-pass C loop (norms_ref.c). Medians over 20 calls, three interleaved
rounds, each contender keeping its best; ratios to the C loop.
"""

import ctypes
import os
import subprocess
import sys
import tempfile

import numpy as np

from compiled_check import ran_compiled

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import ember as em  # noqa: E402
from bench_train import machine, median_ms  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
ROUNDS = 3
F = em.nn.functional


def c_lib():
    out = os.path.join(tempfile.mkdtemp(prefix="ember-bench-"), "libnorms_ref.so")
    subprocess.run(["gcc", "-O3", "-march=native", "-ffast-math", "-fopenmp", "-shared", "-fPIC",
                    os.path.join(HERE, "norms_ref.c"), "-o", out, "-lm"], check=True)
    lib = ctypes.CDLL(out)
    p, z = ctypes.c_void_p, ctypes.c_size_t
    lib.softmax_ref.argtypes = [p, p, z, z]
    lib.layer_norm_ref.argtypes = [p, p, p, p, z, z, ctypes.c_float]
    lib.cross_entropy_ref.argtypes = [p, p, z, z]
    lib.cross_entropy_ref.restype = ctypes.c_float
    return lib


def user_softmax(x):
    e = (x - x.amax(-1, keepdim=True)).exp()
    return e / e.sum(-1, keepdim=True)


def user_layer_norm(x, w, b):
    mean = x.mean(-1, keepdim=True)
    var = ((x - mean) ** 2).mean(-1, keepdim=True)
    return (x - mean) / (var + 1e-5).sqrt() * w + b


TORCH = """
import json, sys, time, torch
torch.set_num_threads(2)
F = torch.nn.functional
def med(fn, n=20):
    fn(); ts = []
    for _ in range(n):
        t = time.perf_counter(); fn(); ts.append(time.perf_counter() - t)
    ts.sort(); return ts[len(ts) // 2] * 1e3
x = torch.randn(4096, 4096); y = torch.randn(8192, 1024); w = torch.randn(1024); b = torch.randn(1024)
t = torch.randint(0, 1024, (8192,))
with torch.no_grad():
    print(json.dumps({"softmax": med(lambda: torch.softmax(x, -1)),
                      "layer_norm": med(lambda: F.layer_norm(y, (1024,), w, b)),
                      "cross_entropy": med(lambda: F.cross_entropy(y, t))}))
"""


# the compiled function behind each compiled row (a pair: softmax's, layer_norm's)
COMPILED = {}


def contenders(lib):
    em.manual_seed(0)
    x, y = em.randn(4096, 4096), em.randn(8192, 1024)
    w, b, t = em.randn(1024), em.randn(1024), em.randint(0, 1024, (8192,))
    xs, ys, ws, bs, ts = (a.numpy() for a in (x, y, w, b, t))
    ce = em.compile(lambda a: F.cross_entropy(a, t))
    out_x, out_y = np.empty_like(xs), np.empty_like(ys)
    sm_op, ln_op = em.compile(lambda t: em.softmax(t, -1)), em.compile(lambda t: F.layer_norm(t, (1024,), w, b))
    sm_user, ln_user = em.compile(user_softmax), em.compile(lambda t: user_layer_norm(t, w, b))
    # a transposed view's rows are strided: a row kernel cannot read them,
    # so the fused node runs op by op (explain() says so)
    xt, sm_user_t = x.t().contiguous().t(), em.compile(user_softmax)

    def np_softmax():
        e = np.exp(xs - xs.max(-1, keepdims=True))
        return e / e.sum(-1, keepdims=True)

    def np_layer_norm():
        m = ys.mean(-1, keepdims=True)
        return (ys - m) / np.sqrt(ys.var(-1, keepdims=True) + 1e-5) * ws + bs

    COMPILED.update({"ember em.softmax compiled": sm_op, "ember user expression compiled": (sm_user, ln_user),
                     "ember user expression compiled, on x.t()": sm_user_t, "ember F.layer_norm compiled": ln_op,
                     "ember F.cross_entropy compiled": ce})
    return {
        "softmax": {
            "C loop": lambda: lib.softmax_ref(xs.ctypes.data, out_x.ctypes.data, 4096, 4096),
            "ember em.softmax eager": lambda: em.softmax(x, -1),
            "ember em.softmax compiled": lambda: sm_op(x),
            "ember user expression eager": lambda: user_softmax(x),
            "ember user expression compiled": lambda: sm_user(x),
            "ember em.softmax eager, on x.t()": lambda: em.softmax(xt, -1),
            "ember user expression eager, on x.t()": lambda: user_softmax(xt),
            "ember user expression compiled, on x.t()": lambda: sm_user_t(xt),
            "NumPy": np_softmax,
        },
        "layer_norm": {
            "C loop": lambda: lib.layer_norm_ref(ys.ctypes.data, ws.ctypes.data, bs.ctypes.data,
                                                 out_y.ctypes.data, 8192, 1024, 1e-5),
            "ember F.layer_norm eager": lambda: F.layer_norm(y, (1024,), w, b),
            "ember F.layer_norm compiled": lambda: ln_op(y),
            "ember user expression eager": lambda: user_layer_norm(y, w, b),
            "ember user expression compiled": lambda: ln_user(y),
            "NumPy": np_layer_norm,
        },
        "cross_entropy": {
            "C loop": lambda: lib.cross_entropy_ref(ys.ctypes.data, ts.ctypes.data, 8192, 1024),
            "ember F.cross_entropy eager": lambda: F.cross_entropy(y, t),
            "ember F.cross_entropy compiled": lambda: ce(y),
        },
    }


def main():
    lib = c_lib()
    table = contenders(lib)
    best = {op: {} for op in table}
    torch_ms = {}
    with em.no_grad():
        for fns in table.values():
            for fn in fns.values():
                fn(), fn()  # (traces and compiles)
        for _ in range(ROUNDS):
            for op, fns in table.items():
                for name, fn in fns.items():
                    cf = COMPILED.get(name)
                    if isinstance(cf, tuple):
                        cf = cf[0] if op == "softmax" else cf[1]
                    if cf is None:
                        t = median_ms(fn, n=20, warm=2)
                    else:
                        with ran_compiled(cf, f"{op}: {name}"):
                            t = median_ms(fn, n=20, warm=2)
                    best[op][name] = min(best[op].get(name, t), t)
            try:
                out = subprocess.run([sys.executable, "-c", TORCH], capture_output=True, text=True, check=True,
                                     env=dict(os.environ, OMP_WAIT_POLICY="PASSIVE"))
                for k, v in __import__("json").loads(out.stdout).items():
                    torch_ms[k] = min(torch_ms.get(k, v), v)
            except (subprocess.CalledProcessError, ValueError):
                pass
    print(f"Machine: {machine()}\n")
    for op, times in best.items():
        if op in torch_ms:
            times["PyTorch (2 threads, PASSIVE)"] = torch_ms[op]
        c = times["C loop"]
        print(f"| {op} | ms | / C loop |\n|---|---:|---:|")
        for name, t in times.items():
            print(f"| {name} | {t:.2f} | {t / c:.2f}x |")
        print()


if __name__ == "__main__":
    main()
