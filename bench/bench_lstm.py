"""LSTM training (issue 14): 2 layers, hidden 256, input 256, sequence 64,
batch 32, forward + backward, next to PyTorch (2 threads, a child
process) and the GEMMs alone (NumPy's OpenBLAS: the input projections, the
64 recurrent products per layer and their gradients, with nothing
between them). Prints a Markdown table for RESULTS.md.

    PYTHONPATH=python:build/python /usr/bin/python3 bench/bench_lstm.py
"""

import json
import os
import platform
import subprocess
import sys

import numpy as np

from bench_train import median_ms
from compiled_check import ran_compiled

ROUNDS = 3
T, N, H = 64, 32, 256


def case(m, compile=False):
    m.manual_seed(0)
    net = m.nn.LSTM(H, H, num_layers=2)
    x = m.randn(T, N, H)

    def step():
        net.zero_grad()
        out, _ = net(x)
        out.sum().backward()
    return m.compile(step) if compile else step


def gemms():
    """One layer pair's GEMMs: forward x W_ih^T (T N x H x 4H) and T steps of
    h W_hh^T (N x H x 4H); backward twice each (inputs and weights)."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((T * N, H), dtype=np.float32)
    w = rng.standard_normal((4 * H, H), dtype=np.float32)
    h = rng.standard_normal((N, H), dtype=np.float32)
    g = rng.standard_normal((T * N, 4 * H), dtype=np.float32)
    gh = rng.standard_normal((N, 4 * H), dtype=np.float32)

    def run():
        for _ in range(2):  # layers
            x @ w.T
            g @ w
            g.T @ x
            for _ in range(T):
                h @ w.T
                gh @ w
                gh.T @ h
    return run


TORCH = """
import json, sys, torch
sys.path.insert(0, {here!r})
import bench_lstm as b
torch.set_num_threads(2)
print(json.dumps({{"step": b.median_ms(b.case(torch), 5, warm=2)}}))
"""


def main():
    import ember
    best = {}
    for _ in range(ROUNDS):
        for who, fn in (("ember eager", lambda: case(ember)), ("ember compiled", lambda: case(ember, True)),
                        ("GEMMs alone", gemms)):
            f = fn()
            if who == "ember compiled":  # (warm: the traces; then every timed call must run compiled)
                for _ in range(3):
                    f()
                with ran_compiled(f, who):
                    ms = median_ms(f, 5, warm=0)
            else:
                ms = median_ms(f, 5, warm=2)
            best[who] = min(best.get(who, float("inf")), ms)
        out = subprocess.run([sys.executable, "-c", TORCH.format(here=os.path.dirname(os.path.abspath(__file__)))],
                             capture_output=True, text=True)
        try:
            best["torch"] = min(best.get("torch", float("inf")), json.loads(out.stdout.strip().splitlines()[-1])["step"])
        except (ValueError, IndexError):
            pass
    print(f"ember {ember.__version__}, {ember.get_num_threads()} threads, {platform.machine()}, {os.cpu_count()} CPUs")
    print("\n| LSTM 2x256, seq 64, batch 32, fwd+bwd | ember eager | ember compiled | PyTorch (2 threads) | GEMMs alone "
          "| eager / PyTorch |")
    print("|---|---:|---:|---:|---:|---:|")
    t = best.get("torch")
    print(f"| step | {best['ember eager']:.1f} ms | {best['ember compiled']:.1f} ms | "
          f"{t:.1f} ms | {best['GEMMs alone']:.1f} ms | {best['ember eager'] / t:.2f}x |" if t else "| step | - |")


if __name__ == "__main__":
    main()
