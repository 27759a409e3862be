"""Models compiled ahead of time, run from C, against the same graphs
JIT-compiled and called from Python, PyTorch eager and torch.jit.trace
(issue 15). Prints a Markdown table for RESULTS.md.

    PYTHONPATH=python:build/python /usr/bin/python3 bench/bench_aot.py

Cases (inference, no_grad, float32): a tiny graph (x + 1 over 4 values: the
per-call cost of the C ABI itself), the MLP 784-512-512-10 at batch 1 and
128, and the digits CNN (tools/train_digits.py's DigitNet, eval) at batch
128. Each model is compiled with ember.aot.compile; bench/aot_bench.c
(built here with gcc, over include/ember/aot_dlopen.h) loads it, creates
an instance (timed: the first in a process also reads the model; a second
one), and times runs on the inputs Python wrote: the median of 7 rounds.
The Python figures are medians of 7 rounds of calls too; ember runs with
its default threads (2 here), PyTorch with torch.set_num_threads(2) in a
process of its own; the rounds of all contenders interleave (this VM's
speed drifts).
"""

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
ROUNDS = int(os.environ.get("ROUNDS", "3"))
sys.path.insert(0, os.path.join(ROOT, "tools"))

CASES = ("tiny", "mlp1", "mlp128", "cnn128")


def ember_models():
    import ember
    from train_digits import DigitNet
    ember.manual_seed(0)
    mlp = ember.nn.Sequential(ember.nn.Linear(784, 512), ember.nn.ReLU(), ember.nn.Linear(512, 512),
                              ember.nn.ReLU(), ember.nn.Linear(512, 10)).eval()
    cnn = DigitNet().eval()

    def tiny(x):
        return x + 1.0
    return {"tiny": (tiny, ember.randn(4)), "mlp1": (mlp, ember.randn(1, 784)),
            "mlp128": (mlp, ember.randn(128, 784)), "cnn128": (cnn, ember.randn(128, 1, 8, 8))}


def per_call_us(fn, x, target_s=0.02):
    fn(x)
    n = 1
    while True:
        t = time.perf_counter()
        for _ in range(n):
            fn(x)
        if time.perf_counter() - t > target_s / 4:
            break
        n *= 4
    rounds = []
    for _ in range(7):
        t = time.perf_counter()
        for _ in range(n):
            fn(x)
        rounds.append((time.perf_counter() - t) / n * 1e6)
    return statistics.median(rounds)


TORCH = r"""
import json, sys, time, statistics
import numpy as np, torch
torch.set_num_threads(2)
sys.path.insert(0, {here!r})
from bench_aot import per_call_us
w = np.load({weights!r})
def lin(i, o, k):
    l = torch.nn.Linear(i, o)
    l.weight.data = torch.tensor(w[k + ".weight"]); l.bias.data = torch.tensor(w[k + ".bias"])
    return l
mlp = torch.nn.Sequential(lin(784, 512, "mlp.0"), torch.nn.ReLU(), lin(512, 512, "mlp.2"), torch.nn.ReLU(),
                          lin(512, 10, "mlp.4")).eval()
class Cnn(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = torch.nn.Conv2d(1, 16, 3, padding=1); self.bn1 = torch.nn.BatchNorm2d(16)
        self.conv2 = torch.nn.Conv2d(16, 32, 3, padding=1); self.pool = torch.nn.MaxPool2d(2)
        self.fc1 = torch.nn.Linear(128, 64); self.fc2 = torch.nn.Linear(64, 10)
    def forward(self, x):
        x = self.pool(torch.relu(self.bn1(self.conv1(x))))
        x = self.pool(torch.relu(self.conv2(x)))
        return self.fc2(torch.relu(self.fc1(x.flatten(1))))
cnn = Cnn().eval()
cnn.load_state_dict({{k[4:]: torch.tensor(v) for k, v in w.items() if k.startswith("cnn.")}})
cases = {{"tiny": (lambda x: x + 1.0, torch.randn(4)), "mlp1": (mlp, torch.randn(1, 784)),
         "mlp128": (mlp, torch.randn(128, 784)), "cnn128": (cnn, torch.randn(128, 1, 8, 8))}}
out = {{}}
with torch.no_grad():
    for name, (f, x) in cases.items():
        traced = torch.jit.trace(f, x) if name != "tiny" else torch.jit.trace(lambda x: x + 1.0, x)
        out[name] = dict(eager=per_call_us(f, x), trace=per_call_us(traced, x))
print(json.dumps(dict(version=torch.__version__, threads=torch.get_num_threads(), times=out)))
"""


def build_harness(d):
    exe = os.path.join(d, "aot_bench")
    subprocess.run(["gcc", "-O2", "-I", os.path.join(ROOT, "include"), os.path.join(HERE, "aot_bench.c"), "-o", exe,
                    "-ldl"], check=True)
    return exe


def main():
    import ember
    from bench_train import machine
    from compiled_check import ran_compiled
    d = tempfile.mkdtemp(prefix="ember-bench-aot-")
    exe = build_harness(d)
    models = ember_models()
    weights = {}
    for prefix, name in (("mlp", "mlp1"), ("cnn", "cnn128")):
        for k, v in models[name][0].state_dict().items():
            weights[f"{prefix}.{k}"] = v.numpy()
    np.savez(os.path.join(d, "w.npz"), **weights)
    info, jit = {}, {}
    for name, (f, x) in models.items():
        so = os.path.join(d, name + ".so")
        t = time.perf_counter()
        ember.aot.compile(f, (x,), so)
        info[name] = dict(compile_ms=(time.perf_counter() - t) * 1e3, size=os.path.getsize(so))
        with open(os.path.join(d, name + ".bin"), "wb") as fh:
            fh.write(np.ascontiguousarray(x.numpy()).tobytes())
        cf = ember.compile(f)
        with ember.no_grad():
            cf(x), cf(x)  # (the trace and compile: the timed calls are checked to run compiled)
        jit[name] = cf
    res = {k: {"aot": [], "jit": [], "eager": [], "t_eager": [], "t_trace": []} for k in CASES}
    torch_meta = None
    for _ in range(ROUNDS):
        for name in CASES:
            r = subprocess.run([exe, os.path.join(d, name + ".so"), os.path.join(d, name + ".bin"),
                                "100000" if name == "tiny" else "200"], capture_output=True, text=True, check=True)
            c = json.loads(r.stdout)
            res[name]["aot"].append(c["run_us"])
            info[name].update(create_us=c["create_us"], create2_us=c["create2_us"], open_us=c["open_us"])
            f, x = models[name]
            with ember.no_grad():
                with ran_compiled(jit[name], f"{name}, JIT"):
                    res[name]["jit"].append(per_call_us(jit[name], x))
                res[name]["eager"].append(per_call_us(f, x))
        time.sleep(0.5)  # (ember's and OpenBLAS's threads in this process stop spinning)
        r = subprocess.run([sys.executable, "-c", TORCH.format(here=HERE, weights=os.path.join(d, "w.npz"))],
                           capture_output=True, text=True, check=True)
        torch_meta = json.loads(r.stdout.strip().splitlines()[-1])
        for name in CASES:
            res[name]["t_eager"].append(torch_meta["times"][name]["eager"])
            res[name]["t_trace"].append(torch_meta["times"][name]["trace"])
    best = {n: {k: min(v) for k, v in r.items()} for n, r in res.items()}
    print(f"Machine: {machine()}; ember {ember.__version__} ({ember.get_num_threads()} threads), PyTorch "
          f"{torch_meta['version']} ({torch_meta['threads']} threads); best of {ROUNDS} rounds, each a median\n")
    print("| model | AOT from C | JIT from Python | ember eager | PyTorch eager | torch.jit.trace | "
          "AOT vs JIT | AOT vs PyTorch | .so size | create (1st / 2nd) |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    labels = {"tiny": "x + 1, f32[4]", "mlp1": "MLP 784-512-512-10, batch 1", "mlp128": "MLP, batch 128",
              "cnn128": "digits CNN, batch 128"}
    for n in CASES:
        b, i = best[n], info[n]
        print(f"| {labels[n]} | {b['aot']:.2f} us | {b['jit']:.2f} us | {b['eager']:.2f} us | {b['t_eager']:.2f} us "
              f"| {b['t_trace']:.2f} us | {b['jit'] / b['aot']:.2f}x faster | "
              f"{min(b['t_eager'], b['t_trace']) / b['aot']:.2f}x faster | {i['size'] / 1e6:.2f} MB | "
              f"{i['create_us'] / 1e3:.2f} / {i['create2_us'] / 1e3:.3f} ms |")


if __name__ == "__main__":
    main()
