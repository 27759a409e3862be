"""Compiled models in ordinary training loops (issue 16): `ember.compile(model)`
with `loss.backward()` and `opt.step()` outside, as torch.compile is used.

    PYTHONPATH=python:build/python /usr/bin/python3 bench/bench_compile_module.py

1. The GPT-2 block (bench_train.py's: d768, 12 heads, seq 256, batch 4),
   loss the mean square of its output, AdamW: ember eager, ember with the
   block compiled (CompiledFunctionBackward), PyTorch eager on 2 threads
   in this process, and the limit: the step's 18 GEMMs alone through NumPy
   (the same OpenBLAS), which every contender must run. Medians of 5
   steps, best of 3 interleaved rounds. Peak memory: ember's allocator's
   peak_in_use during one step in a fresh process per variant (after two
   warm-up steps).
2. The MLP 784-512-512-10 with SGD over a data loader of 1000 samples in
   batches of 128, so each epoch ends with a batch of 104: one epoch's
   time (median of 5 epochs, best of 3 rounds), and how many
   specialisations the compiled model made. The limit: the same epoch's
   GEMMs through NumPy.
3. Convolutional models less bound by GEMMs (bench_conv.py's): the digits
   CNN (BatchNorm, dropout; batch 32) and a ResNet block (batch 64 of
   32x32x32), SGD with momentum; eager and compiled interleaved at random,
   the median step of each.
"""

import contextlib
import os
import subprocess
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import ember  # noqa: E402
from bench_block_step import median_ms, step_fn  # noqa: E402
from bench_train import machine  # noqa: E402
from compiled_check import ran_compiled  # noqa: E402

BATCH, SEQ, D, HEADS = 4, 256, 768, 12
N_SAMPLES, MLP_BATCH = 1000, 128


# ------------------------------------------------------------ the block


def block_loop(m, compiled):
    return step_fn(m, compile_block=compiled)


def block_gemms():
    """The block step's GEMMs (forward and backward), NumPy on OpenBLAS."""
    rng = np.random.default_rng(0)
    t = BATCH * SEQ
    r = lambda *s: rng.standard_normal(s).astype(np.float32)  # noqa: E731
    linears = [(r(t, D), r(D, 3 * D)), (r(t, D), r(D, D)), (r(t, D), r(D, 4 * D)), (r(t, 4 * D), r(4 * D, D))]
    hd = D // HEADS
    q, k, p, v = r(BATCH * HEADS, SEQ, hd), r(BATCH * HEADS, hd, SEQ), r(BATCH * HEADS, SEQ, SEQ), r(BATCH * HEADS, SEQ, hd)
    grads = [r(t, w.shape[1]) for _, w in linears]

    def run():
        for (x, w), g in zip(linears, grads):
            x @ w          # forward
            g @ w.T        # d input
            x.T @ g        # d weight
        for _ in range(3):  # q@k^T and p@v, then their two backward products each
            q @ k
            p @ v
    return run


def peak_bytes(kind):
    code = ("import gc, ember, bench_compile_module as b\n"
            f"s = b.block_loop(ember, {kind == 'compiled'})\n"
            "s(); s(); gc.collect(); ember.reset_peak_memory_stats(); s()\n"
            "print(ember.memory_stats()['peak_in_use'])\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    return int(out.stdout.split()[-1])


# ------------------------------------------------------------ the MLP over a data loader


def batches(m):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((N_SAMPLES, 784)).astype(np.float32)
    y = rng.integers(0, 10, N_SAMPLES)
    return [(m.tensor(x[i:i + MLP_BATCH]), m.tensor(y[i:i + MLP_BATCH])) for i in range(0, N_SAMPLES, MLP_BATCH)]


def mlp_epoch(m, compiled):
    nn, F = m.nn, m.nn.functional
    m.manual_seed(0)
    model = nn.Sequential(nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 10))
    fwd = m.compile(model) if compiled else model
    opt = m.optim.SGD(model.parameters(), lr=0.01)
    data = batches(m)

    def epoch():
        for x, y in data:
            opt.zero_grad()
            loss = F.cross_entropy(fwd(x), y)
            loss.backward()
            opt.step()
    epoch.fwd = fwd
    return epoch


def mlp_gemms():
    rng = np.random.default_rng(0)
    shapes = [(784, 512), (512, 512), (512, 10)]
    ws = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    sizes = [min(MLP_BATCH, N_SAMPLES - i) for i in range(0, N_SAMPLES, MLP_BATCH)]
    xs = {b: [rng.standard_normal((b, s[0])).astype(np.float32) for s in shapes] for b in set(sizes)}
    gs = {b: [rng.standard_normal((b, s[1])).astype(np.float32) for s in shapes] for b in set(sizes)}

    def run():
        for b in sizes:
            for x, w, g in zip(xs[b], ws, gs[b]):
                x @ w
                g @ w.T
                x.T @ g
    return run


# ------------------------------------------------------------ convolutional models


def conv_loops():
    """{model: {variant: (run n steps, n)}} for bench_conv.py's models."""
    from bench_conv import models
    F = ember.nn.functional
    DigitNet, Block = models(ember)
    cases = {"digits CNN (batch 32)": (DigitNet, (ember.rand(32, 1, 8, 8), ember.randint(0, 10, (32,))),
                                       F.cross_entropy, 20),
             "ResNet block (64x32x32x32)": (Block, (ember.randn(64, 32, 32, 32), None),
                                            lambda o, y: (o * o).mean(), 2)}
    out = {}
    for name, (make, (x, y), loss_of, n) in cases.items():
        out[name] = {}
        for compiled in (False, True):
            ember.manual_seed(0)
            model = make()
            fwd = ember.compile(model) if compiled else model
            opt = ember.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)

            def run(fwd=fwd, opt=opt, x=x, y=y, loss_of=loss_of, n=n):
                for _ in range(n):
                    loss = loss_of(fwd(x), y)
                    opt.zero_grad()
                    loss.backward()
                    opt.step()
            run.fwd = fwd
            out[name]["compiled" if compiled else "eager"] = (run, n)
    return out


def conv_table():
    import random
    import statistics
    print("\n| model, ordinary loop (SGD) | eager ms/step | compiled ms/step | eager / compiled |\n|---|---:|---:|---:|")
    for name, variants in conv_loops().items():
        for run, _ in variants.values():
            run()
            run()
        times = {k: [] for k in variants}
        with ran_compiled(variants["compiled"][0].fwd, f"{name}, compiled"):  # (every timed call)
            for _ in range(40):
                k = random.choice(list(variants))
                t = time.perf_counter()
                variants[k][0]()
                times[k].append((time.perf_counter() - t) / variants[k][1] * 1e3)
        e, c = statistics.median(times["eager"]), statistics.median(times["compiled"])
        print(f"| {name} | {e:.2f} | {c:.2f} | {e / c:.2f}x |")


# ------------------------------------------------------------ main


def table(title, best, base):
    print(f"\n| {title} | ms | / {base} |\n|---|---:|---:|")
    for k, v in best.items():
        print(f"| {k} | {v:.2f} | {v / best[base]:.2f}x |")


def main():
    torch = None
    try:
        import torch
        torch.set_num_threads(2)
    except ImportError:
        pass
    print(machine())
    print(f"ember {ember.__version__}; PyTorch {torch.__version__ if torch else '(not installed)'}; "
          f"OPENBLAS_CORETYPE={os.environ.get('OPENBLAS_CORETYPE', '(unset)')}")

    blocks = {"ember eager": block_loop(ember, False), "ember, ember.compile(block)": block_loop(ember, True)}
    if torch:
        blocks["PyTorch eager (2 threads)"] = block_loop(torch, False)
    blocks["GEMMs alone (NumPy, OpenBLAS)"] = block_gemms()
    mlps = {"ember eager": mlp_epoch(ember, False), "ember, ember.compile(model)": mlp_epoch(ember, True)}
    if torch:
        mlps["PyTorch eager (2 threads)"] = mlp_epoch(torch, False)
    mlps["GEMMs alone (NumPy, OpenBLAS)"] = mlp_gemms()
    for fns in (blocks, mlps):
        for fn in fns.values():
            fn()
            fn()
    best_b = {k: float("inf") for k in blocks}
    best_m = {k: float("inf") for k in mlps}
    for _ in range(3):
        for fns, best in ((blocks, best_b), (mlps, best_m)):
            for k, fn in fns.items():
                check = ran_compiled(fn.fwd, k) if "compile" in k else contextlib.nullcontext()
                with check:  # (a compiled row: every timed call ran compiled code)
                    best[k] = min(best[k], median_ms(fn, n=5))
    table("GPT-2 block, ordinary training loop (AdamW)", best_b, "ember eager")
    pe, pc = peak_bytes("eager"), peak_bytes("compiled")
    print(f"\npeak memory in a step: eager {pe / 2**20:.1f} MiB, compiled {pc / 2**20:.1f} MiB ({pc / pe:.2f}x)")
    s = blocks["ember, ember.compile(block)"].fwd._stats()
    print(f"compiled block: {s['compiled_calls']} compiled calls, {s['eager_calls']} eager, "
          f"{s['specializations']} specialisation(s)")
    table(f"MLP epoch, {N_SAMPLES} samples in batches of {MLP_BATCH} (last {N_SAMPLES % MLP_BATCH}), SGD",
          best_m, "ember eager")
    s = mlps["ember, ember.compile(model)"].fwd._stats()
    print(f"compiled MLP: {s['compiled_calls']} compiled calls, {s['eager_calls']} eager, "
          f"{s['specializations']} specialisation(s)")
    conv_table()


if __name__ == "__main__":
    main()
