"""Float32 accuracy against PyTorch (issue 40, item 4), in one run.

    PYTHONPATH=python:build/python /usr/bin/python3 bench/bench_accuracy.py [--resnet-seeds N]

1. Each convolution path and its two gradients, on large inputs: the
   relative RMS error of ember's float32 result against float64 (PyTorch in
   float64 on the same inputs), over PyTorch's float32 error: the ratio.
2. A ResNet-18 (BasicBlock, 16x3x96x96 inputs, 10 classes) after 3 SGD
   steps from the same weights and data: the largest parameter difference
   from the float64 run, for PyTorch in float32 and for ember, over several
   data seeds, and the float64 run's own sensitivity (its inputs perturbed
   by 1e-7 relative: what any float32 rounding of them can cause).
Prints Markdown tables for RESULTS.md."""

import argparse
import os
import sys

import numpy as np
import torch

import ember
import ember.nn.functional as EF

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "python"))
from test_float32_accuracy import CONVS, REDUCTIONS, errors, randn  # noqa: E402


def conv_table():
    print("| convolution | y | input grad | weight grad |\n|---|---:|---:|---:|")
    for (n, c, o, h, k, s, p) in CONVS:
        x, w = randn(n, c, h, h), randn(o, c, k, k, scale=(c * k * k) ** -0.5)
        errs = errors(lambda m, x, w: (EF if m is ember else torch.nn.functional).conv2d(x, w, stride=s, padding=p),
                      [x, w], True)
        cells = " | ".join(f"{ee / et:.2f} ({ee:.1e} vs {et:.1e})" for et, ee in errs)
        print(f"| {n}x{c}->{o}, {h}x{h}, k{k} s{s} | {cells} |")


def reduction_table():
    print("\n| op | result | gradient |\n|---|---:|---:|")
    for name in sorted(REDUCTIONS):
        fn, shape, shift = REDUCTIONS[name]
        errs = errors(fn, [randn(*shape, shift=shift)], True)
        print(f"| {name} | " + " | ".join(f"{ee / max(et, 1e-30):.2f} ({ee:.1e} vs {et:.1e})" for et, ee in errs)
              + " |")


def resnet18(nn, F):
    class Block(nn.Module):
        def __init__(s, i, o, st):
            super().__init__()
            s.c1, s.b1 = nn.Conv2d(i, o, 3, st, 1, bias=False), nn.BatchNorm2d(o)
            s.c2, s.b2 = nn.Conv2d(o, o, 3, 1, 1, bias=False), nn.BatchNorm2d(o)
            s.sc = nn.Sequential(nn.Conv2d(i, o, 1, st, bias=False), nn.BatchNorm2d(o)) \
                if st != 1 or i != o else nn.Sequential()

        def forward(s, x):
            return F.relu(s.b2(s.c2(F.relu(s.b1(s.c1(x))))) + s.sc(x))

    class Net(nn.Module):
        def __init__(s):
            super().__init__()
            s.stem = nn.Sequential(nn.Conv2d(3, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64), nn.ReLU(inplace=True),
                                   nn.MaxPool2d(3, 2, 1))
            blocks, c = [], 64
            for o, st in ((64, 1), (64, 1), (128, 2), (128, 1), (256, 2), (256, 1), (512, 2), (512, 1)):
                blocks.append(Block(c, o, st))
                c = o
            s.layers, s.pool, s.fc = nn.Sequential(*blocks), nn.AdaptiveAvgPool2d(1), nn.Linear(512, 10)

        def forward(s, x):
            return s.fc(s.pool(s.layers(s.stem(x))).flatten(1))
    return Net()


def train(model, m, data, dtype):
    opt = m.optim.SGD(model.parameters(), lr=0.01)
    for x, y in data:
        xt = m.tensor(x, dtype=dtype) if m is torch else ember.tensor(x.astype(np.float32))
        loss = m.nn.functional.cross_entropy(model(xt), m.tensor(y))
        opt.zero_grad()
        loss.backward()
        opt.step()
    return {k: v.detach().numpy().astype(np.float64) for k, v in model.state_dict().items()
            if "num_batches" not in k}


def resnet_table(seeds):
    print("\n| data seed | PyTorch float32 | ember | float64, inputs moved 1e-7 |\n|---:|---:|---:|---:|")
    for seed in range(seeds):
        torch.manual_seed(0)
        t64 = resnet18(torch.nn, torch.nn.functional).double()
        sd = {k: v.clone() for k, v in t64.state_dict().items()}
        t32 = resnet18(torch.nn, torch.nn.functional)
        t32.load_state_dict({k: v.float() if v.is_floating_point() else v for k, v in sd.items()})
        e32 = resnet18(ember.nn, ember.nn.functional)
        e32.load_state_dict({k: ember.tensor(v.float().numpy() if v.is_floating_point() else v.numpy())
                             for k, v in sd.items()})
        tpert = resnet18(torch.nn, torch.nn.functional).double()
        tpert.load_state_dict(sd)
        rng = np.random.default_rng(seed)
        data = [(rng.standard_normal((16, 3, 96, 96)), rng.integers(0, 10, 16)) for _ in range(3)]
        moved = [(x * (1 + 1e-7 * np.random.default_rng(99).standard_normal(x.shape)), y) for x, y in data]
        r64 = train(t64, torch, data, torch.float64)
        dist = {name: max(np.abs(r[k] - r64[k]).max() for k in r64) for name, r in
                (("torch", train(t32, torch, data, torch.float32)), ("ember", train(e32, ember, data, None)),
                 ("moved", train(tpert, torch, moved, torch.float64)))}
        print(f"| {seed} | {dist['torch']:.2e} | {dist['ember']:.2e} | {dist['moved']:.2e} |", flush=True)


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--resnet-seeds", type=int, default=4)
    args = ap.parse_args()
    torch.set_num_threads(2)
    conv_table()
    reduction_table()
    resnet_table(args.resnet_seeds)
