"""Every eager op at 1M float32 values against PyTorch (and NumPy where it
has the op), 16M-element elementwise ops against hand-written C loops, and
the Python cost of one tiny op, all in one run. Prints Markdown tables.

    PYTHONPATH=python:build/python /usr/bin/python3 bench/bench_ops.py [filter]

Times are the best of TRIALS medians of at least REPEAT runs and 30 ms
(each after 10 ms of warm-up calls); PyTorch and ember use 2 threads. Each ember measurement starts 0.25 s after PyTorch's last op, once
PyTorch's spinning OpenMP threads have gone to sleep. The ratio column is ember's time over PyTorch's: below 1 ember
is faster. An optional argument keeps only the ops whose name contains it.
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

import ember as em

HERE = os.path.dirname(os.path.abspath(__file__))
N = 1 << 20
BIG = 16 << 20
REPEAT = 20
TRIALS = 3


def median_ms(fn, repeat=REPEAT, warm_s=0.01, min_s=0.03):
    """Median time of fn in ms: warm-up calls for warm_s (caches, allocator,
    a vCPU back at speed after idling), then at least `repeat` timed calls
    and at least min_s of them."""
    t0 = time.perf_counter()
    fn()
    while time.perf_counter() - t0 < warm_s:
        fn()
    times = []
    t0 = time.perf_counter()
    while len(times) < repeat or time.perf_counter() - t0 < min_s:
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times) * 1e3


def machine():
    cpu = "unknown CPU"
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    gcc = subprocess.run(["gcc", "-dumpfullversion"], capture_output=True, text=True).stdout.strip()
    return f"{cpu}, {os.cpu_count()} cores; Python {platform.python_version()}, gcc {gcc}"


def inputs(m, np_mod=False):
    """The same data for each library: m is ember, torch or numpy."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal(N).astype(np.float32)
    y = rng.standard_normal(N).astype(np.float32)
    mask = rng.random(N) < 0.5
    idx = rng.integers(0, N, N // 8)
    perm = rng.permutation(1024)
    if m is np:
        conv = lambda a: a  # noqa: E731
    elif m.__name__ == "torch":
        conv = m.from_numpy
    else:
        conv = em.from_numpy
    d = {"x": conv(x), "y": conv(y), "p": conv(np.abs(x) + 0.1), "mask": conv(mask),
         "idx": conv(idx), "perm": conv(perm), "i": conv((x * 100).astype(np.int64)),
         "j": conv((np.abs(y) * 10 + 1).astype(np.int64))}
    d["m2"] = d["x"].reshape(1024, 1024)
    d["m3"] = d["x"].reshape(64, 128, 128)
    d["a"] = conv(rng.standard_normal((512, 512)).astype(np.float32))
    d["b"] = conv(rng.standard_normal((512, 512)).astype(np.float32))
    d["bb"] = conv(rng.standard_normal((64, 64, 64)).astype(np.float32))
    return d


def gelu_t(m):
    return (lambda x: m.nn.functional.gelu(x)) if m.__name__ == "torch" else (lambda x: m.gelu(x))


# name -> f(m, d): the op under each library (m is ember or torch).
OPS = {
    # elementwise, unary
    **{name: (lambda n: lambda m, d: getattr(m, n)(d["x"]))(name) for name in
       ["abs", "neg", "sign", "exp", "exp2", "expm1", "sin", "cos", "tan", "tanh", "sigmoid",
        "erf", "relu", "floor", "ceil", "round", "trunc", "isnan", "isfinite", "reciprocal"]},
    **{name: (lambda n: lambda m, d: getattr(m, n)(d["p"]))(name) for name in
       ["log", "log2", "log1p", "sqrt", "rsqrt"]},
    "gelu": lambda m, d: gelu_t(m)(d["x"]),
    "silu": lambda m, d: (m.nn.functional.silu if m.__name__ == "torch" else m.silu)(d["x"]),
    "softplus": lambda m, d: (m.nn.functional.softplus if m.__name__ == "torch" else m.softplus)(d["x"]),
    # binary, ternary
    "add": lambda m, d: d["x"] + d["y"], "sub": lambda m, d: d["x"] - d["y"],
    "mul": lambda m, d: d["x"] * d["y"], "div": lambda m, d: d["x"] / d["y"],
    "add scalar": lambda m, d: d["x"] + 1.5, "mul scalar": lambda m, d: d["x"] * 3.0,
    "pow scalar": lambda m, d: d["p"] ** 1.7, "pow 2": lambda m, d: d["x"] ** 2,
    "pow": lambda m, d: m.pow(d["p"], d["y"]),
    "maximum": lambda m, d: m.maximum(d["x"], d["y"]), "minimum": lambda m, d: m.minimum(d["x"], d["y"]),
    "fmod": lambda m, d: m.fmod(d["x"], d["p"]), "remainder": lambda m, d: m.remainder(d["x"], d["p"]),
    "floor_divide": lambda m, d: m.floor_divide(d["x"], d["p"]),
    "int floor_divide": lambda m, d: d["i"] // d["j"], "int remainder": lambda m, d: d["i"] % d["j"],
    "int add": lambda m, d: d["i"] + d["j"], "bitwise_and": lambda m, d: d["i"] & d["j"],
    "eq": lambda m, d: d["x"] == d["y"], "lt": lambda m, d: d["x"] < d["y"],
    "logical_and": lambda m, d: m.logical_and(d["mask"], d["x"] > 0),
    "where": lambda m, d: m.where(d["mask"], d["x"], d["y"]),
    "clamp": lambda m, d: m.clamp(d["x"], -0.5, 0.5), "lerp": lambda m, d: m.lerp(d["x"], d["y"], 0.3),
    "masked_fill": lambda m, d: d["x"].masked_fill(d["mask"], 0.0),
    # casts
    "to float64": lambda m, d: d["x"].double(), "to int64": lambda m, d: d["x"].long(),
    "to float16": lambda m, d: d["x"].half(), "to bfloat16": lambda m, d: d["x"].bfloat16(),
    "float16 add": lambda m, d: d["h"] + d["h"],
    # in place
    "add_": lambda m, d: d["x"].add_(1.0).sub_(1.0), "mul_": lambda m, d: d["x"].mul_(1.0),
    "clamp_": lambda m, d: d["x"].clamp_(-10, 10), "fill_": lambda m, d: d["y"].clone().fill_(1.0),
    "zero_": lambda m, d: d["y"].clone().zero_(), "copy_": lambda m, d: d["y"].clone().copy_(d["x"]),
    # reductions
    "sum": lambda m, d: d["x"].sum(), "mean": lambda m, d: d["x"].mean(),
    "prod": lambda m, d: d["p"].prod(), "amax": lambda m, d: d["x"].amax(), "argmax": lambda m, d: d["x"].argmax(),
    "var": lambda m, d: d["x"].var(), "std": lambda m, d: d["x"].std(), "norm": lambda m, d: d["x"].norm(),
    "all": lambda m, d: d["mask"].all(), "any": lambda m, d: d["mask"].any(),
    "logsumexp": lambda m, d: m.logsumexp(d["x"], 0),
    "sum rows": lambda m, d: d["m2"].sum(1), "sum cols": lambda m, d: d["m2"].sum(0),
    "mean mid dim": lambda m, d: d["m3"].mean(1), "amax rows": lambda m, d: d["m2"].amax(1),
    "max dim": lambda m, d: d["m2"].max(1), "argmin cols": lambda m, d: d["m2"].argmin(0),
    "var rows": lambda m, d: d["m2"].var(1), "norm cols": lambda m, d: d["m2"].norm(dim=0),
    "logsumexp rows": lambda m, d: m.logsumexp(d["m2"], 1),
    "sum of transposed": lambda m, d: d["m2"].t().sum(1),
    "cumsum": lambda m, d: m.cumsum(d["m2"], 1), "cumsum cols": lambda m, d: m.cumsum(d["m2"], 0),
    "cumprod": lambda m, d: m.cumprod(d["m2"] * 0 + 1.0001, 1),
    "softmax rows": lambda m, d: m.softmax(d["m2"], 1), "softmax cols": lambda m, d: m.softmax(d["m2"], 0),
    "log_softmax": lambda m, d: m.log_softmax(d["m2"], 1),
    # shapes and data movement
    "contiguous of .t()": lambda m, d: d["m2"].t().contiguous(),
    "permute copy 3d": lambda m, d: d["m3"].permute(2, 0, 1).contiguous(),
    "reshape copy": lambda m, d: d["m2"].t().reshape(-1),
    "expand copy": lambda m, d: d["m2"][:1].expand(1024, 1024).contiguous(),
    "cat": lambda m, d: m.cat([d["m2"], d["m2"]], 0), "cat dim1": lambda m, d: m.cat([d["m2"], d["m2"]], 1),
    "stack": lambda m, d: m.stack([d["x"], d["y"]]),
    "repeat": lambda m, d: d["m2"][:256].repeat(2, 2), "flip": lambda m, d: m.flip(d["m2"], [0, 1]),
    "roll": lambda m, d: m.roll(d["m2"], 5, 1), "tril": lambda m, d: m.tril(d["m2"]),
    "slice step copy": lambda m, d: d["x"][::2].contiguous(),
    # indexing
    "index_select": lambda m, d: m.index_select(d["x"], 0, d["idx"]),
    "index_select rows": lambda m, d: m.index_select(d["m2"], 0, d["perm"]),
    "gather": lambda m, d: m.gather(d["m2"], 1, d["perm"].reshape(1, 1024).expand(1024, 1024)),
    "scatter_add": lambda m, d: m.zeros(N).scatter_add(0, d["idx"], d["x"][:N // 8]),
    "getitem tensor": lambda m, d: d["x"][d["idx"]],
    "getitem mask": lambda m, d: d["x"][d["mask"]],
    "setitem mask": lambda m, d: d["y"].clone().__setitem__(d["mask"], 0.0),
    "setitem index": lambda m, d: d["y"].clone().__setitem__(d["idx"], 1.0),
    "masked_select": lambda m, d: m.masked_select(d["x"], d["mask"]),
    "nonzero": lambda m, d: m.nonzero(d["mask"]),
    "one_hot": lambda m, d: (m.nn.functional.one_hot if m.__name__ == "torch" else m.one_hot)(d["idx"] % 8, 8),
    # creation
    "zeros": lambda m, d: m.zeros(N), "ones": lambda m, d: m.ones(N), "full": lambda m, d: m.full((N,), 2.5),
    "empty": lambda m, d: m.empty(N), "arange": lambda m, d: m.arange(N),
    "linspace": lambda m, d: m.linspace(0, 1, N), "rand": lambda m, d: m.rand(N),
    "randn": lambda m, d: m.randn(N), "randint": lambda m, d: m.randint(0, 100, (N,)),
    "randperm": lambda m, d: m.randperm(N), "eye": lambda m, d: m.eye(1024),
    "zeros_like": lambda m, d: m.zeros_like(d["x"]), "tensor from numpy": lambda m, d: m.tensor(d["np"]),
    # linear algebra
    "matmul 512": lambda m, d: d["a"] @ d["b"], "matmul .t()": lambda m, d: d["a"].t() @ d["b"],
    "bmm 64x64x64": lambda m, d: m.bmm(d["bb"], d["bb"]), "mv": lambda m, d: m.mv(d["m2"], d["x"][:1024]),
    "dot": lambda m, d: m.dot(d["x"], d["y"]), "outer": lambda m, d: m.outer(d["x"][:1024], d["y"][:1024]),
    "einsum bij,bjk": lambda m, d: m.einsum("bij,bjk->bik", d["bb"], d["bb"]),
    "addmm": lambda m, d: m.addmm(d["a"], d["a"], d["b"]),
}


def c_limits():
    """16M-element elementwise ops: ember eager vs the hand-written C loop."""
    out = os.path.join(tempfile.mkdtemp(prefix="ember-bench-"), "libew_ref.so")
    subprocess.run(["gcc", "-O3", "-march=native", "-ffast-math", "-fopenmp", "-shared", "-fPIC",
                    os.path.join(HERE, "ew_ref.c"), "-o", out, "-lm"], check=True)
    lib = ctypes.CDLL(out)
    rng = np.random.default_rng(1)
    xn = rng.standard_normal(BIG).astype(np.float32)
    zn = rng.standard_normal(BIG).astype(np.float32)
    pn = np.abs(xn)
    yn = np.empty_like(xn)
    x, z, p = em.from_numpy(xn), em.from_numpy(zn), em.from_numpy(pn)
    cases = [("add", lambda: x + z, "ref_add", 2), ("mul", lambda: x * z, "ref_mul", 2),
             ("maximum", lambda: em.maximum(x, z), "ref_maximum", 2),
             ("relu", lambda: em.relu(x), "ref_relu", 1), ("abs", lambda: em.abs(x), "ref_abs", 1),
             ("sqrt", lambda: em.sqrt(p), "ref_sqrt", 1), ("exp", lambda: em.exp(x), "ref_exp", 1),
             ("sigmoid", lambda: em.sigmoid(x), "ref_sigmoid", 1), ("tanh", lambda: em.tanh(x), "ref_tanh", 1)]
    rows = []
    for name, fn, ref, arity in cases:
        f = getattr(lib, ref)
        if arity == 2:
            c = median_ms(lambda: f(ctypes.c_void_p(xn.ctypes.data), ctypes.c_void_p(zn.ctypes.data),
                                    ctypes.c_void_p(yn.ctypes.data), ctypes.c_size_t(BIG)), 10)
        else:
            src = pn if name == "sqrt" else xn
            c = median_ms(lambda: f(ctypes.c_void_p(src.ctypes.data), ctypes.c_void_p(yn.ctypes.data),
                                    ctypes.c_size_t(BIG)), 10)
        rows.append((name, median_ms(fn, 10), c))
    return rows


def main():
    only = sys.argv[1] if len(sys.argv) > 1 else ""
    import torch
    torch.set_num_threads(2)
    em.set_num_threads(2)
    de, dt = inputs(em), inputs(torch)
    de["np"] = dt["np"] = np.random.default_rng(2).standard_normal(N).astype(np.float32)
    de["h"], dt["h"] = de["x"].half(), dt["x"].half()
    rows = []
    for name, fn in OPS.items():
        if only and only not in name:
            continue
        # PyTorch's OpenMP threads spin ~200 ms after its last op and would
        # take the cores from ember's: let them go idle first. Three rounds,
        # the best median of each: this machine is a VM whose neighbours
        # come and go.
        te = tt = float("inf")
        for _ in range(TRIALS):
            time.sleep(0.25)
            te = min(te, median_ms(lambda: fn(em, de)))
            tt = min(tt, median_ms(lambda: fn(torch, dt)))
        rows.append((name, te, tt))

    print(f"Machine: {machine()}")
    print(f"Versions: ember {em.__version__}, NumPy {np.__version__}, PyTorch {torch.__version__}\n")
    print("## Every op at 1M float32 values (2 threads), ember vs PyTorch eager\n")
    print("| op | ember ms | PyTorch ms | ember / PyTorch |")
    print("|---|---:|---:|---:|")
    for name, te, tt in rows:
        print(f"| {name} | {te:.3f} | {tt:.3f} | {te / tt:.2f} |")
    worst = sorted(rows, key=lambda r: r[1] / r[2], reverse=True)[:10]
    print("\n### The ten slowest ratios\n")
    print("| op | ember / PyTorch |")
    print("|---|---:|")
    for name, te, tt in worst:
        print(f"| {name} | {te / tt:.2f} |")
    slower = [r for r in rows if r[1] > r[2]]
    print(f"\n{len(slower)} of {len(rows)} ops slower than PyTorch.\n")

    if not only:
        print("## 16M float32 elementwise ops vs a hand-written C loop (2 threads)\n")
        print("| op | ember ms | C loop ms | ember / C |")
        print("|---|---:|---:|---:|")
        for name, te, tc in c_limits():
            print(f"| {name} | {te:.2f} | {tc:.2f} | {te / tc:.2f} |")

        # BLAS next to elementwise ops: the thread pools must not fight
        print("\n## An MLP step: relu(x @ w1 + b1) @ w2 + b2 (matmuls on OpenBLAS, 2 threads)\n")
        print("x 256x512, w1 512x1024, w2 1024x256, float32.\n")
        print("| library | ms per step |")
        print("|---|---:|")
        rng = np.random.default_rng(3)
        ws = [rng.standard_normal(s).astype(np.float32) * 0.05
              for s in [(256, 512), (512, 1024), (1024,), (1024, 256), (256,)]]
        for name, m, conv in [("ember", em, em.from_numpy), ("PyTorch", torch, torch.from_numpy)]:
            x, w1, b1, w2, b2 = [conv(w) for w in ws]
            step = (lambda m=m, x=x, w1=w1, b1=b1, w2=w2, b2=b2:
                    m.relu(x @ w1 + b1) @ w2 + b2)
            time.sleep(0.25)
            best = min(median_ms(step) for _ in range(TRIALS))
            print(f"| {name} | {best:.3f} |")

        a, b = em.ones(1), em.ones(1)
        at, bt = torch.ones(1), torch.ones(1)
        an, bn = np.ones(1, np.float32), np.ones(1, np.float32)
        print("\n## Python cost of one tiny op (`a + b`, 1-element float32)\n")
        print("| library | us per op |")
        print("|---|---:|")
        for lib, g in [("ember", {"a": a, "b": b}), ("NumPy", {"a": an, "b": bn}),
                       ("PyTorch", {"a": at, "b": bt})]:
            best = min(timeit.repeat("a + b", globals=g, number=200000, repeat=5)) / 200000 * 1e6
            print(f"| {lib} | {best:.3f} |")
        g = {"a": a, "em": em}
        best = min(timeit.repeat("em.exp(a)", globals=g, number=200000, repeat=5)) / 200000 * 1e6
        print(f"| ember, `em.exp(a)` (functional API through Python) | {best:.3f} |")


if __name__ == "__main__":
    main()
