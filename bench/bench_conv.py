"""Convolutional networks, eager and compiled, next to PyTorch and the
GEMMs alone, in one run. Prints Markdown tables for RESULTS.md.

    PYTHONPATH=python:build/python /usr/bin/python3 bench/bench_conv.py

1. conv2d 3x3, 64 -> 64 channels, 56x56, batch 32, padding 1: the forward,
   and forward + backward (input and weight gradients). The limit beside
   it is the same GEMMs through NumPy's OpenBLAS on 2 threads with the
   im2col columns made beforehand (untimed): what im2col costs on top.
2. One SGD training step of the digits CNN (tools/train_digits.py: conv
   3x3 16, BatchNorm, pool, conv 3x3 32, pool, two Linear, dropout),
   batch 32 of 8x8 images.
3. One training step of a ResNet basic block (conv 3x3 - BN - ReLU - conv
   3x3 - BN, the residual, ReLU) at issue 14's size: 32 channels, batch 64
   of 32x32, loss the mean square of the output.
4. The first case channels-last (input and weight, as PyTorch's
   Module.to(memory_format=channels_last) lays them out), and a stride-2
   3x3 convolution of 128 channels (28x28, batch 32) both ways: ember reads
   the channels-last input in place (runtime/cpu/conv_last.c), PyTorch
   through oneDNN.

PyTorch runs in child processes with torch.set_num_threads(2), once with
its defaults and once with OMP_WAIT_POLICY=PASSIVE; ember's im2col + GEMM
path (EMBER_CONV=gemm, what every convolution ran before the direct
kernels) in a child process too. Times are medians; three rounds
interleave the contenders and each keeps its best.
"""

import json
import os
import platform
import subprocess
import sys

import numpy as np

from bench_train import median_ms  # (the same medians as the other benches)
from compiled_check import median_ms_checked  # noqa: E402

ROUNDS = 3


def models(m):
    nn, F = m.nn, m.nn.functional

    class DigitNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = nn.Conv2d(1, 16, 3, padding=1)
            self.bn1 = nn.BatchNorm2d(16)
            self.conv2 = nn.Conv2d(16, 32, 3, padding=1)
            self.pool = nn.MaxPool2d(2)
            self.fc1 = nn.Linear(128, 64)
            self.drop = nn.Dropout(0.2)
            self.fc2 = nn.Linear(64, 10)

        def forward(self, x):
            x = self.pool(F.relu(self.bn1(self.conv1(x))))
            x = self.pool(F.relu(self.conv2(x)))
            return self.fc2(self.drop(F.relu(self.fc1(x.flatten(1)))))

    class Block(nn.Module):
        def __init__(self, c=32):
            super().__init__()
            self.c1 = nn.Conv2d(c, c, 3, padding=1, bias=False)
            self.b1 = nn.BatchNorm2d(c)
            self.c2 = nn.Conv2d(c, c, 3, padding=1, bias=False)
            self.b2 = nn.BatchNorm2d(c)

        def forward(self, x):
            return F.relu(x + self.b2(self.c2(F.relu(self.b1(self.c1(x))))))

    return DigitNet, Block


def cases(m, compile=None):
    """{name: (callable, repeats)} for library m (ember or torch); with
    `compile`, the training steps through it."""
    F = m.nn.functional
    m.manual_seed(0)
    DigitNet, Block = models(m)
    wrap = compile or (lambda f: f)
    out = {}
    if compile is None:
        x = m.randn(32, 64, 56, 56, requires_grad=True)
        w = m.randn(64, 64, 3, 3, requires_grad=True)
        b = m.randn(64, requires_grad=True)
        g = m.ones(32, 64, 56, 56)

        def fwd():
            with m.no_grad():
                F.conv2d(x, w, b, padding=1)

        def fwd_bwd():
            F.conv2d(x, w, b, padding=1).backward(g)
        out["conv2d forward"] = (fwd, 5)
        out["conv2d forward + backward"] = (fwd_bwd, 5)
        # the same, channels-last (input and weight, as Module.to(memory_format=...) gives PyTorch)
        xl, wl = (t.detach().contiguous(memory_format=m.channels_last).requires_grad_() for t in (x, w))
        gl = g.contiguous(memory_format=m.channels_last)

        def fwd_last():
            with m.no_grad():
                F.conv2d(xl, wl, b, padding=1)

        def fwd_bwd_last():
            F.conv2d(xl, wl, b, padding=1).backward(gl)
        out["conv2d forward, channels-last"] = (fwd_last, 5)
        out["conv2d forward + backward, channels-last"] = (fwd_bwd_last, 5)
        xs, ws = m.randn(32, 128, 28, 28), m.randn(128, 128, 3, 3)
        xsl, wsl = (t.contiguous(memory_format=m.channels_last) for t in (xs, ws))

        def fwd_s2():
            F.conv2d(xs, ws, stride=2, padding=1)

        def fwd_s2_last():
            F.conv2d(xsl, wsl, stride=2, padding=1)
        out["conv2d 128 ch, stride 2, forward"] = (fwd_s2, 10)
        out["conv2d 128 ch, stride 2, forward, channels-last"] = (fwd_s2_last, 10)

    def step_of(model, loss_of):
        opt = m.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)

        def step(x, y):
            loss = loss_of(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            return loss
        return wrap(step)

    xd, yd = m.rand(32, 1, 8, 8), m.randint(0, 10, (32,))
    sd = step_of(DigitNet(), F.cross_entropy)
    out["digits CNN training step"] = (lambda: sd(xd, yd), 200)
    xb = m.randn(64, 32, 32, 32)
    sb = step_of(Block(), lambda out, y: (out * out).mean())
    out["ResNet block training step"] = (lambda: sb(xb, None), 20)
    if compile is not None:  # (the timed calls are checked to run these compiled)
        out["digits CNN training step"][0].compiled = sd
        out["ResNet block training step"][0].compiled = sb
    return out


def gemm_limit():
    """The conv2d's GEMMs alone through NumPy (OpenBLAS, its threads)."""
    rng = np.random.default_rng(0)
    cols = rng.standard_normal((32, 576, 3136), dtype=np.float32)
    w = rng.standard_normal((64, 576), dtype=np.float32)
    gy = rng.standard_normal((32, 64, 3136), dtype=np.float32)
    wt = np.ascontiguousarray(w.T)

    def fwd():
        np.matmul(w, cols)

    def fwd_bwd():
        np.matmul(w, cols)
        np.matmul(wt, gy)                       # the columns' gradient
        np.matmul(gy, cols.transpose(0, 2, 1))  # the weight's, per sample
    return {"conv2d forward": (fwd, 5), "conv2d forward + backward": (fwd_bwd, 5)}


TORCH = """
import json, sys, torch
sys.path.insert(0, {here!r})
import bench_conv as b
torch.set_num_threads(2)
print(json.dumps({{k: b.median_ms(f, n) for k, (f, n) in b.cases(torch).items()}}))
"""


EMBER_GEMM = """
import json, sys
sys.path.insert(0, {here!r})
import ember
import bench_conv as b
print(json.dumps({{k: b.median_ms(f, n) for k, (f, n) in b.cases(ember).items()}}))
"""


def child_run(script, **env):
    """Medians from a child process running `script` with env added, or {}."""
    full = dict(os.environ, **env)
    try:
        out = subprocess.run([sys.executable, "-c", script.format(here=os.path.dirname(os.path.abspath(__file__)))],
                             capture_output=True, text=True, check=True, env=full)
        return json.loads(out.stdout.strip().splitlines()[-1])
    except (subprocess.CalledProcessError, ValueError, IndexError):
        return {}


def ember_gemm_run():
    """ember eager with every convolution on im2col + GEMM (EMBER_CONV=gemm)."""
    return child_run(EMBER_GEMM, EMBER_CONV="gemm")


def torch_run(passive):
    return child_run(TORCH, **({"OMP_WAIT_POLICY": "PASSIVE"} if passive else {}))


def main():
    import ember
    best = {}

    def keep(who, results):
        for k, v in results.items():
            best[(who, k)] = min(best.get((who, k), float("inf")), v)

    for _ in range(ROUNDS):
        keep("eager", {k: median_ms(f, n) for k, (f, n) in cases(ember).items()})
        keep("compiled", {k: median_ms_checked(f, n, f"{k}, compiled")
                          for k, (f, n) in cases(ember, ember.compile).items()})
        keep("eager, im2col", ember_gemm_run())
        keep("torch", torch_run(False))
        keep("torch passive", torch_run(True))
        keep("GEMMs alone", {k: median_ms(f, n) for k, (f, n) in gemm_limit().items()})
    names = list(cases(ember))
    print(f"ember {ember.__version__}, {ember.get_num_threads()} threads, {platform.machine()}, "
          f"{os.cpu_count()} CPUs; NumPy {np.__version__}")
    print(f"OPENBLAS_CORETYPE={os.environ.get('OPENBLAS_CORETYPE', '(unset)')}")
    print("\n| | ember compiled | ember eager | ember eager, im2col + GEMM | PyTorch (2 threads) "
          "| PyTorch, PASSIVE | GEMMs alone | ember eager / PyTorch best | eager / compiled |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    cell = lambda who, k: f"{best[(who, k)]:.2f} ms" if (who, k) in best else "-"  # noqa: E731
    for k in names:
        tbest = min(best.get(("torch", k), float("inf")), best.get(("torch passive", k), float("inf")))
        ratio = f"{best[('eager', k)] / tbest:.2f}x" if tbest < float("inf") else "-"
        speed = f"{best[('eager', k)] / best[('compiled', k)]:.2f}x" if ("compiled", k) in best else "-"
        print(f"| {k} | {cell('compiled', k)} | {cell('eager', k)} | {cell('eager, im2col', k)} | {cell('torch', k)} | "
              f"{cell('torch passive', k)} | {cell('GEMMs alone', k)} | {ratio} | {speed} |")


if __name__ == "__main__":
    main()
