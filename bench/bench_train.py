"""Training and model-forward speed, eager, next to PyTorch, NumPy and a
hand-written C limit, in one run. Prints Markdown tables for RESULTS.md.

    PYTHONPATH=python:build/python /usr/bin/python3 bench/bench_train.py

1. One training step of an MLP 784-512-512-10 (batch 128, ReLU,
   cross-entropy, SGD): zero_grad, forward, loss, backward, update.
2. The forward of a GPT-2-style block (d_model 768, 12 heads, seq 256,
   batch 4, causal attention, tanh-GELU MLP, pre-LayerNorm), without grad.

PyTorch runs in child processes with torch.set_num_threads(2): once with
its defaults and once with OMP_WAIT_POLICY=PASSIVE (its OpenMP threads
sleep instead of spinning between ops, its better setting on this 2-core
machine), so neither disturbs ember's thread pool. The C limit is the same
MLP step written with OpenBLAS sgemm calls and plain loops (train_ref.c),
and the block's GEMMs alone. Times are medians over at least 30 steps
after warm-up (10 for the block); three rounds interleave all contenders in
time and each keeps its best.
"""

import ctypes
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROUNDS = 3


def median_ms(fn, n=30, warm=5):
    for _ in range(warm):
        fn()
    times = []
    for _ in range(n):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times) * 1e3


# ---------------------------------------------------------------- the models, written once

def mlp_step_fn(m, wrap=None):
    """A closure running one SGD step of the MLP in library m (ember or torch),
    passed through `wrap` first (e.g. ember.compile)."""
    nn, F = m.nn, m.nn.functional
    m.manual_seed(0)
    model = nn.Sequential(nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(),
                          nn.Linear(512, 10))
    opt = m.optim.SGD(model.parameters(), lr=0.01)
    x = m.randn(128, 784)
    y = m.randint(0, 10, (128,))

    def step():
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
    return wrap(step) if wrap else step


def gpt_block_fn(m, batch=4, seq=256, d=768, heads=12, wrap=None):
    """A closure running the forward of a GPT-2 block in library m (the
    block passed through `wrap` first, e.g. ember.compile)."""
    block = make_gpt_block(m, seq, d, heads).eval()
    if wrap is not None:
        block = wrap(block)
    x = m.randn(batch, seq, d)

    def forward():
        with m.no_grad():
            block(x)
    forward.compiled = block if wrap is not None else None
    return forward


def make_gpt_block(m, seq=256, d=768, heads=12):
    """A GPT-2 block (pre-norm attention and MLP) as an m.nn.Module."""
    nn = m.nn
    m.manual_seed(0)

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
            self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
            self.fc, self.fc2 = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)
            self.act = nn.GELU(approximate="tanh")
            self.register_buffer("mask", m.ones(seq, seq, dtype=m.bool).triu(1))

        def attention(self, q, k, v):
            # the explicit form (PyTorch 1.13 has no scaled_dot_product_attention)
            att = (q @ k.transpose(-2, -1)) * (1.0 / (d // heads) ** 0.5)
            att = att.masked_fill(self.mask, float("-inf")).softmax(-1)
            return att @ v

        def forward(self, x):
            b, t, c = x.shape
            q, k, v = self.qkv(self.ln1(x)).split(c, dim=2)
            q, k, v = (z.reshape(b, t, heads, c // heads).transpose(1, 2) for z in (q, k, v))
            y = self.attention(q, k, v).transpose(1, 2).reshape(b, t, c)
            x = x + self.proj(y)
            return x + self.fc2(self.act(self.fc(self.ln2(x))))

    return Block()


# ---------------------------------------------------------------- NumPy, by hand

def numpy_mlp_step():
    rng = np.random.default_rng(0)
    dims = [784, 512, 512, 10]
    ws = [(rng.standard_normal((o, i)) / np.sqrt(i)).astype(np.float32) for i, o in zip(dims, dims[1:])]
    bs = [np.zeros(o, np.float32) for o in dims[1:]]
    x = rng.standard_normal((128, 784)).astype(np.float32)
    y = rng.integers(0, 10, 128)

    def step():
        hs = [x]
        for k, (w, b) in enumerate(zip(ws, bs)):
            h = hs[-1] @ w.T + b
            hs.append(np.maximum(h, 0) if k < 2 else h)
        out = hs[-1]
        e = np.exp(out - out.max(1, keepdims=True))
        p = e / e.sum(1, keepdims=True)
        d = p
        d[np.arange(128), y] -= 1
        d /= 128
        for k in (2, 1, 0):
            gw, gb = d.T @ hs[k], d.sum(0)
            if k:
                d = (d @ ws[k]) * (hs[k] > 0)
            ws[k] -= 0.01 * gw
            bs[k] -= 0.01 * gb
    return step


def numpy_block_forward(batch=4, seq=256, d=768, heads=12):
    rng = np.random.default_rng(0)
    w = {n: (rng.standard_normal(s) * 0.02).astype(np.float32) for n, s in
         [("qkv", (3 * d, d)), ("proj", (d, d)), ("fc", (4 * d, d)), ("fc2", (d, 4 * d))]}
    x = rng.standard_normal((batch, seq, d)).astype(np.float32)
    mask = np.triu(np.ones((seq, seq), bool), 1)

    def ln(z):
        mu = z.mean(-1, keepdims=True)
        return (z - mu) / np.sqrt(z.var(-1, keepdims=True) + 1e-5)

    def forward():
        q, k, v = np.split(ln(x) @ w["qkv"].T, 3, axis=2)
        q, k, v = (z.reshape(batch, seq, heads, -1).transpose(0, 2, 1, 3) for z in (q, k, v))
        att = (q @ k.transpose(0, 1, 3, 2)) / np.sqrt(d // heads)
        att[..., mask] = -np.inf
        att = np.exp(att - att.max(-1, keepdims=True))
        att /= att.sum(-1, keepdims=True)
        y = (att @ v).transpose(0, 2, 1, 3).reshape(batch, seq, d)
        h = x + y @ w["proj"].T
        f = ln(h) @ w["fc"].T
        f = 0.5 * f * (1 + np.tanh(0.7978845608 * (f + 0.044715 * f ** 3)))
        return h + f @ w["fc2"].T
    return forward


# ---------------------------------------------------------------- the C limit

def c_step_fns():
    out = os.path.join(tempfile.mkdtemp(prefix="ember-bench-"), "libtrain_ref.so")
    subprocess.run(["gcc", "-O3", "-march=native", "-shared", "-fPIC", "-I/usr/include/openblas",
                    os.path.join(HERE, "train_ref.c"), "-o", out, "-lopenblas", "-lm"], check=True)
    lib = ctypes.CDLL(out)
    lib.mlp_new.restype = ctypes.c_void_p
    lib.mlp_step.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_float]
    lib.mlp_step.restype = ctypes.c_float
    lib.block_new.restype = ctypes.c_void_p
    lib.block_gemms.argtypes = [ctypes.c_void_p]
    m = lib.mlp_new(128, 784, 512, 512, 10)
    x = np.random.default_rng(0).standard_normal((128, 784)).astype(np.float32)
    y = np.random.default_rng(1).integers(0, 10, 128).astype(np.int64)
    blk = lib.block_new(4, 256, 768, 12)
    return (lambda: lib.mlp_step(m, x.ctypes.data, y.ctypes.data, 0.01),
            lambda: lib.block_gemms(blk))


# ---------------------------------------------------------------- PyTorch, in child processes

def torch_child():
    import torch
    torch.set_num_threads(2)
    mlp = median_ms(mlp_step_fn(torch))
    block = median_ms(gpt_block_fn(torch), n=10, warm=2)
    print(json.dumps({"mlp": mlp, "block": block, "version": torch.__version__}))


def torch_times(passive):
    env = dict(os.environ)
    if passive:
        env["OMP_WAIT_POLICY"] = "PASSIVE"
    else:
        env.pop("OMP_WAIT_POLICY", None)
    r = subprocess.run([sys.executable, os.path.abspath(__file__), "--torch-child"], env=env,
                       capture_output=True, text=True, check=True)
    return json.loads(r.stdout.strip().splitlines()[-1])


def machine():
    cpu = "unknown CPU"
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    return f"{cpu}, {os.cpu_count()} cores; Python {platform.python_version()}, NumPy {np.__version__}"


def main():
    import ember
    # rounds interleave every contender in time (this VM's speed drifts by
    # up to 2x over minutes); each keeps its best round
    em_fns = (mlp_step_fn(ember), gpt_block_fn(ember))
    np_fns = (numpy_mlp_step(), numpy_block_forward())
    c_fns = c_step_fns()
    res = {k: [] for k in ("td_mlp", "td_block", "tp_mlp", "tp_block", "em_mlp", "em_block",
                           "np_mlp", "np_block", "c_mlp", "c_block")}
    for _ in range(ROUNDS):
        for passive, key in ((False, "td"), (True, "tp")):
            t = torch_times(passive)
            res[key + "_mlp"].append(t["mlp"])
            res[key + "_block"].append(t["block"])
        time.sleep(0.5)  # PyTorch's process is gone; let the CPU settle
        for key, (mlp, block) in (("em", em_fns), ("np", np_fns), ("c", c_fns)):
            res[key + "_mlp"].append(median_ms(mlp))
            res[key + "_block"].append(median_ms(block, n=10, warm=2))
    best = {k: min(v) for k, v in res.items()}
    t_default = {"mlp": best["td_mlp"], "block": best["td_block"], "version": t["version"]}
    t_passive = {"mlp": best["tp_mlp"], "block": best["tp_block"]}
    em_mlp, em_block = best["em_mlp"], best["em_block"]
    np_mlp, np_block = best["np_mlp"], best["np_block"]
    c_mlp, c_block = best["c_mlp"], best["c_block"]

    print(f"Machine: {machine()}; PyTorch {t_default['version']}; ember {ember.__version__} "
          f"({ember.get_num_threads()} threads)\n")
    print("| | ember | PyTorch (2 threads) | PyTorch, OMP_WAIT_POLICY=PASSIVE | NumPy by hand | "
          "C limit | ember / PyTorch best |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for name, em, td, tp, npy, c in [
            ("MLP 784-512-512-10 training step (batch 128, SGD)", em_mlp, t_default["mlp"],
             t_passive["mlp"], np_mlp, c_mlp),
            ("GPT-2 block forward (4 x 256 x 768, 12 heads)", em_block, t_default["block"],
             t_passive["block"], np_block, c_block)]:
        best = min(td, tp)
        print(f"| {name} | {em:.2f} ms | {td:.2f} ms | {tp:.2f} ms | {npy:.2f} ms | {c:.2f} ms | "
              f"{em / best:.2f} |")
    print("\nC limit: the MLP step with OpenBLAS sgemm and plain loops; for the block, its GEMMs "
          "alone.")


if __name__ == "__main__":
    if "--torch-child" in sys.argv:
        torch_child()
    else:
        main()
