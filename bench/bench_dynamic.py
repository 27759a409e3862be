"""Dynamic shapes (issue 16, part 3): kernels that read their sizes at run
time against the same kernels with the sizes compiled in, and what a new
size costs.

    PYTHONPATH=python:build/python /usr/bin/python3 bench/bench_dynamic.py

Per workload, at one size, in one process: ember eager, ember compiled with
dynamic=False (sizes in the code) and with dynamic=True (sizes from the
launch's size table), PyTorch eager (2 threads), and for GELU the
hand-written C loop of bench_gelu.py (the practical limit). Times are
medians of REPEAT calls per round (PyTorch: 3), best of ROUNDS rounds, the
contenders interleaved within each round (this machine drifts 5-10% over
minutes, and more: a layer norm's static kernel measured 0.87 to 1.54 ms
in runs of 3 rounds).

Then the cost of a new size: the first call of a dynamic function at a size
it has not seen (one traced run, the passes and a memory plan; the machine
code is the template's) against a static function's first call at a new
size (the same plus an LLVM compile), and the MLP trained over a data
loader whose batch sizes vary, with its specialisation count.
"""

import os
import platform
import statistics
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import ember as em  # noqa: E402
from bench_gelu import build_reference  # noqa: E402
from bench_train import make_gpt_block  # noqa: E402
from compiled_check import ran_compiled  # noqa: E402

REPEAT, ROUNDS = 15, 7


def gelu(x):
    return 0.5 * x * (1.0 + em.tanh(0.7978845608 * (x + 0.044715 * x * x * x)))


def bias_gelu(x, b):
    return gelu(x + b)


def softmax(x):
    # written out, so that it is a fused row kernel (x.softmax(-1) is one
    # op, which runs its eager kernel compiled or not)
    e = (x - x.amax(-1, keepdim=True)).exp()
    return e / e.sum(-1, keepdim=True)


def layer_norm(x, w, b):
    mu = x.mean(-1, keepdim=True)
    var = ((x - mu) ** 2).mean(-1, keepdim=True)
    return (x - mu) / (var + 1e-5).sqrt() * w + b


def median_ms(fn, *args, repeat=None):
    fn(*args)
    times = []
    for _ in range(repeat or REPEAT):
        t = time.perf_counter()
        fn(*args)
        times.append(time.perf_counter() - t)
    return statistics.median(times) * 1e3


def median_ms_compiled(cf, row, *args):
    """median_ms of a compiled function, every timed call checked to have
    run compiled code (after one untimed call outside the check)."""
    cf(*args)
    with ran_compiled(cf, row):
        return median_ms(cf, *args)


def compare(contenders):
    """Best of ROUNDS interleaved rounds of each contender's median."""
    best = {name: float("inf") for name, _ in contenders}
    for _ in range(ROUNDS):
        for name, run in contenders:
            best[name] = min(best[name], run())
    return best


def workloads(torch):
    rng = np.random.default_rng(0)
    big = rng.standard_normal((4096, 4096)).astype(np.float32)
    rows = rng.standard_normal((8192, 1024)).astype(np.float32)
    bias = rng.standard_normal(4096).astype(np.float32)
    w, b = (rng.standard_normal(1024).astype(np.float32) for _ in range(2))
    out = [
        ("GELU, 4096x4096", gelu, (big,), lambda t: 0.5 * t * (1.0 + torch.tanh(0.7978845608 * (t + 0.044715 * t ** 3)))),
        ("bias + GELU, 4096x4096", bias_gelu, (big, bias), lambda t, c: torch.nn.functional.gelu(t + c, approximate="tanh")),
        ("softmax (as exp / sum), 8192x1024", softmax, (rows,), lambda t: t.softmax(-1)),
        ("layer norm, 8192x1024", layer_norm, (rows, w, b), lambda t, g, c: torch.nn.functional.layer_norm(t, (1024,), g, c)),
    ]
    return out


def row(name, best, static_key="static"):
    e, s, d = best["eager"], best[static_key], best["dynamic"]
    t = best.get("torch")
    c = best.get("C limit")
    print(f"| {name} | {e:.2f} | {s:.2f} | {d:.2f} | **{d / s:.3f}** | {t:.2f} | {f'{c:.2f}' if c else '-'} |")


def bench_kernels(torch):
    print("| workload | ember eager ms | compiled, static sizes | compiled, sizes at run time | "
          "run time / static | PyTorch eager | C limit |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    ref = build_reference()
    for name, fn, arrays, tfn in workloads(torch):
        xs = [em.tensor(a) for a in arrays]
        ts = [torch.from_numpy(a) for a in arrays]
        static, dynamic = em.compile(fn, dynamic=False), em.compile(fn, dynamic=True)
        np.testing.assert_allclose(static(*xs).numpy(), dynamic(*xs).numpy(), rtol=0, atol=0)
        contenders = [("eager", lambda: median_ms(fn, *xs)),
                      ("static", lambda: median_ms_compiled(static, f"{name}, static", *xs)),
                      ("dynamic", lambda: median_ms_compiled(dynamic, f"{name}, dynamic", *xs)),
                      ("torch", lambda: median_ms(tfn, *ts, repeat=3))]
        if fn is gelu:
            src = arrays[0]
            dst = np.empty_like(src)
            contenders.append(("C limit", lambda: median_ms(lambda: ref.gelu_ref(src.ctypes.data, dst.ctypes.data,
                                                                                   src.size))))
        row(name, compare(contenders))
        assert dynamic._specializations()[0]["dynamic_sizes"] and not static._specializations()[0]["dynamic_sizes"]
    # the GPT-2 block's forward (d768, 12 heads, batch 4, seq 256), no autograd
    block = make_gpt_block(em, 256, 768)
    tblock = make_gpt_block(torch, 256, 768)
    x = em.randn(4, 256, 768)
    tx = torch.randn(4, 256, 768)
    static, dynamic = em.compile(block, dynamic=False), em.compile(block, dynamic=True)
    with em.no_grad(), torch.no_grad():
        np.testing.assert_allclose(static(x).numpy(), dynamic(x).numpy(), rtol=0, atol=0)
        best = compare([("eager", lambda: median_ms(block, x)),
                        ("static", lambda: median_ms_compiled(static, "GPT-2 block, static", x)),
                        ("dynamic", lambda: median_ms_compiled(dynamic, "GPT-2 block, dynamic", x)),
                        ("torch", lambda: median_ms(tblock, tx, repeat=3))])
    row("GPT-2 block forward, 4x256x768", best)


def bench_new_size():
    """A new size's first call: dynamic (a trace, the passes, a plan) against
    static (the same and an LLVM compile). Fresh functions, so nothing is
    shared with an earlier one but what the process's code cache holds."""
    rng = np.random.default_rng(1)
    print("\n| first call at a new size | static sizes ms | sizes at run time ms | eager call ms |")
    print("|---|---:|---:|---:|")
    # (the varying size is the rows' length: a static kernel over n rows of
    # a fixed length has no n in its code, so static sizes would share too)
    for name, fn, make in [
        ("bias + GELU, 256 x n", bias_gelu,
         lambda n: (em.tensor(rng.standard_normal((256, n)).astype(np.float32)), em.randn(n))),
        ("softmax (as exp / sum), 512 x n", softmax, lambda n: (em.tensor(rng.standard_normal((512, n)).astype(np.float32)),)),
        ("layer norm, 512 x n", layer_norm, lambda n: (em.tensor(rng.standard_normal((512, n)).astype(np.float32)),
                                                      em.randn(n), em.randn(n))),
    ]:
        firsts = {"static": [], "dynamic": [], "eager": []}
        os.environ["EMBER_CACHE"] = "0"  # (no disk hits: a static size compiles)
        for trial in range(3):
            static, dynamic = em.compile(fn, dynamic=False), em.compile(fn, dynamic=True)
            for f in (static, dynamic):
                f(*make(512))  # the template (dynamic) or the first specialisation
            for n in (300 + trial, 700 + trial):
                args = make(n)
                for key, f in (("static", static), ("dynamic", dynamic), ("eager", fn)):
                    t = time.perf_counter()
                    f(*args)
                    firsts[key].append((time.perf_counter() - t) * 1e3)
            assert dynamic._stats()["code_objects"] == 1, dynamic._stats()
        print(f"| {name} | {statistics.median(firsts['static']):.1f} | {statistics.median(firsts['dynamic']):.1f} | "
              f"{statistics.median(firsts['eager']):.1f} |")


def bench_loader():
    """The MLP 784-512-512-10 trained in an ordinary loop through
    ember.compile(model) over a loader of 1000 samples in batches of 128
    (the last one 104) and then of random sizes: specialisations and code."""
    nn = em.nn
    em.manual_seed(0)
    model = nn.Sequential(nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 10))
    compiled = em.compile(model)
    opt = em.optim.SGD(model.parameters(), lr=0.01)
    rng = np.random.default_rng(2)
    sizes = [128] * 7 + [104] + [int(n) for n in rng.integers(2, 200, 30)]
    for n in sizes:
        x, y = em.randn(n, 784), em.tensor(rng.integers(0, 10, n))
        opt.zero_grad()
        nn.functional.cross_entropy(compiled(x), y).backward()
        opt.step()
    st = compiled._compiled._stats()
    print(f"\nMLP over {len(set(sizes))} batch sizes: {st['specializations']} specialisations, "
          f"{st['code_objects']} with machine code of their own; {st['eager_calls']} eager calls; "
          f"varying: {st['varying']}")


def main():
    import torch
    torch.set_num_threads(2)
    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores; "
          f"ember threads {em.get_num_threads()}; torch {torch.__version__}; numpy {np.__version__}\n")
    bench_kernels(torch)
    bench_new_size()
    bench_loader()


if __name__ == "__main__":
    main()
