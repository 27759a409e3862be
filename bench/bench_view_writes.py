"""Writes into views, compiled (issue 39, item 3): the patterns that made a
compiled function run eagerly before writes into views were SSA.

    PYTHONPATH=python:build/python /usr/bin/python3 bench/bench_view_writes.py

1. An RNN filling its output buffer step by step, `out[:, t] = h` (batch
   32, 64 steps, hidden 256, tanh(h @ W)), no autograd.
2. Masking the last column of logits in place before a softmax,
   `logits[:, -1] = -1e9` (4096 x 512), as a sampling loop does.

Rows: ember eagerly, ember compiled (every timed call checked to have run
compiled code), PyTorch eagerly (2 threads), NumPy. Medians of 20 calls,
best of 3 interleaved rounds.
"""

import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from bench_train import machine, median_ms  # noqa: E402
from compiled_check import ran_compiled  # noqa: E402

B, T, H = 32, 64, 256
ROWS, COLS = 4096, 512
ROUNDS = 3


def rnn_fill(m, w):
    def fill(x):
        out = m.zeros(B, T, H)
        h = x
        for t in range(T):
            h = (h @ w).tanh()
            out[:, t] = h
        return out.sum(1)
    return fill


def masked_softmax(m):
    def f(logits):
        logits[:, -1] = -1e9
        return logits.softmax(-1)
    return f


def numpy_rnn_fill(w):
    def fill(x):
        out = np.zeros((B, T, H), np.float32)
        h = x
        for t in range(T):
            h = np.tanh(h @ w)
            out[:, t] = h
        return out.sum(1)
    return fill


def numpy_masked_softmax(logits):
    logits[:, -1] = -1e9
    e = np.exp(logits - logits.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def main():
    import ember
    rng = np.random.default_rng(0)
    w_np = (rng.standard_normal((H, H)) * 0.05).astype(np.float32)
    x_np = rng.standard_normal((B, H)).astype(np.float32)
    l_np = rng.standard_normal((ROWS, COLS)).astype(np.float32)
    w, x, logits = ember.from_numpy(w_np), ember.from_numpy(x_np), ember.from_numpy(l_np.copy())
    fill, mask = rnn_fill(ember, w), masked_softmax(ember)
    cfill, cmask = ember.compile(fill), ember.compile(mask)
    contenders = {}
    with ember.no_grad():
        for f, cf, args in ((fill, cfill, (x,)), (mask, cmask, (logits,))):
            want = f(*args)
            for _ in range(3):
                got = cf(*args)
            np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-6, atol=1e-6)
        contenders["rnn"] = {"ember eager": lambda: fill(x), "ember compiled": lambda: cfill(x),
                             "NumPy": lambda: numpy_rnn_fill(w_np)(x_np)}
        contenders["mask"] = {"ember eager": lambda: mask(logits), "ember compiled": lambda: cmask(logits),
                              "NumPy": lambda: numpy_masked_softmax(l_np)}
        try:
            import torch
            torch.set_num_threads(2)
            tw, tx, tl = torch.from_numpy(w_np), torch.from_numpy(x_np), torch.from_numpy(l_np.copy())
            contenders["rnn"]["PyTorch (2 threads)"] = lambda: rnn_fill(torch, tw)(tx)
            contenders["mask"]["PyTorch (2 threads)"] = lambda: masked_softmax(torch)(tl)
        except ImportError:
            pass
        best = {k: {n: float("inf") for n in v} for k, v in contenders.items()}
        for _ in range(ROUNDS):
            for k, row in contenders.items():
                cf = cfill if k == "rnn" else cmask
                for name, fn in row.items():
                    fn()
                    if name == "ember compiled":
                        with ran_compiled(cf, f"{k}, compiled"):
                            best[k][name] = min(best[k][name], median_ms(fn, n=20, warm=0))
                    else:
                        best[k][name] = min(best[k][name], median_ms(fn, n=20, warm=0))
    print(machine())
    titles = {"rnn": f"RNN buffer fill, out[:, t] = h ({B}x{T}x{H})",
              "mask": f"logits[:, -1] = -1e9 then softmax ({ROWS}x{COLS})"}
    names = list(contenders["rnn"])
    print("\n| workload | " + " | ".join(names) + " | eager / compiled |")
    print("|---|" + "---:|" * (len(names) + 1))
    for k, row in best.items():
        cells = " | ".join(f"{row[n]:.3f} ms" for n in names)
        print(f"| {titles[k]} | {cells} | {row['ember eager'] / row['ember compiled']:.2f}x |")


if __name__ == "__main__":
    main()
