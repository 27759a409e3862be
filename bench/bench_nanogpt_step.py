"""A nanoGPT-style training step, eager against compiled (issue 39).

    PYTHONPATH=python:build/python /usr/bin/python3 bench/bench_nanogpt_step.py

The model is written as nanoGPT writes it (model.py: token and position
embeddings, pre-norm blocks of causal self-attention with a `tril` mask
buffer and masked_fill, an MLP, a final LayerNorm, an lm_head tied to the
token embedding), with an in-place activation in the MLP (nn.ReLU(inplace=
True) where nanoGPT has GELU: the pattern torchvision's models use), and
its training step as train.py writes it: forward, cross-entropy, backward,
`clip_grad_norm_(model.parameters(), 1.0)`, AdamW with weight decay on the
matrices only (two param groups), `zero_grad(set_to_none=True)`. Small
enough for this machine: 4 layers, 4 heads, d 128, context 64, batch 16,
vocab 65 (the Shakespeare characters).

Rows: ember eagerly; ember with the whole step under ember.compile (every
timed call checked to have run compiled code); PyTorch eagerly (2 threads)
in a child process. Medians of 10 steps, best of 3 interleaved rounds.
Before timing, the compiled step's losses and parameters are checked
against eager's over 3 steps from the same seed.
"""

import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from bench_train import machine, median_ms  # noqa: E402

N_LAYER, N_HEAD, N_EMBD, BLOCK, BATCH, VOCAB = 4, 4, 128, 64, 16, 65
ROUNDS = 3


def make_model(m):
    nn, F = m.nn, m.nn.functional
    m.manual_seed(1337)

    class CausalSelfAttention(nn.Module):
        def __init__(self):
            super().__init__()
            self.c_attn = nn.Linear(N_EMBD, 3 * N_EMBD)
            self.c_proj = nn.Linear(N_EMBD, N_EMBD)
            self.register_buffer("bias", m.tril(m.ones(BLOCK, BLOCK)).view(1, 1, BLOCK, BLOCK))

        def forward(self, x):
            B, T, C = x.size()
            q, k, v = self.c_attn(x).split(N_EMBD, dim=2)
            k = k.view(B, T, N_HEAD, C // N_HEAD).transpose(1, 2)
            q = q.view(B, T, N_HEAD, C // N_HEAD).transpose(1, 2)
            v = v.view(B, T, N_HEAD, C // N_HEAD).transpose(1, 2)
            att = (q @ k.transpose(-2, -1)) * (1.0 / (k.size(-1) ** 0.5))
            att = att.masked_fill(self.bias[:, :, :T, :T] == 0, float("-inf"))
            att = F.softmax(att, dim=-1)
            y = att @ v
            y = y.transpose(1, 2).contiguous().view(B, T, C)
            return self.c_proj(y)

    class MLP(nn.Module):
        def __init__(self):
            super().__init__()
            self.c_fc = nn.Linear(N_EMBD, 4 * N_EMBD)
            self.act = nn.ReLU(inplace=True)
            self.c_proj = nn.Linear(4 * N_EMBD, N_EMBD)

        def forward(self, x):
            return self.c_proj(self.act(self.c_fc(x)))

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln_1, self.attn = nn.LayerNorm(N_EMBD), CausalSelfAttention()
            self.ln_2, self.mlp = nn.LayerNorm(N_EMBD), MLP()

        def forward(self, x):
            x = x + self.attn(self.ln_1(x))
            return x + self.mlp(self.ln_2(x))

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.wte, self.wpe = nn.Embedding(VOCAB, N_EMBD), nn.Embedding(BLOCK, N_EMBD)
            self.h = nn.ModuleList([Block() for _ in range(N_LAYER)])
            self.ln_f = nn.LayerNorm(N_EMBD)
            self.lm_head = nn.Linear(N_EMBD, VOCAB, bias=False)
            self.wte.weight = self.lm_head.weight  # weight tying

        def forward(self, idx, targets):
            b, t = idx.size()
            pos = m.arange(0, t, dtype=m.long)
            x = self.wte(idx) + self.wpe(pos)
            for block in self.h:
                x = block(x)
            logits = self.lm_head(self.ln_f(x))
            return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))

    return GPT()


def make_step(m, compile_it=False):
    model = make_model(m)
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    opt = m.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
                        lr=1e-3, betas=(0.9, 0.95))

    def step(x, y):
        loss = model(x, y)
        loss.backward()
        m.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss.detach()

    return model, (m.compile(step) if compile_it else step)


def batches(m, n):
    out = []
    for i in range(n):
        m.manual_seed(100 + i)
        x = m.randint(0, VOCAB, (BATCH, BLOCK))
        out.append((x, m.roll(x, -1, 1)))
    return out


def check_same(ember):
    """The compiled step's losses and parameters against eager's, from one seed."""
    import numpy as np
    me, se = make_step(ember)
    mc, sc = make_step(ember, compile_it=True)
    for x, y in batches(ember, 3):
        le, lc = float(se(x, y)), float(sc(x, y))
        assert abs(le - lc) <= 1e-5 * max(1.0, abs(le)), (le, lc)
    worst = max(float(np.abs(a.detach().numpy() - b.detach().numpy()).max())
                for a, b in zip(me.parameters(), mc.parameters()))
    assert worst < 1e-5, worst
    return worst


TORCH = """
import json, sys
sys.path.insert(0, {here!r})
import torch
torch.set_num_threads(2)
import bench_nanogpt_step as b
_, step = b.make_step(torch)
data = b.batches(torch, 4)
best = 1e9
for _ in range({rounds}):
    best = min(best, b.median_ms(lambda: step(*data[0]), n=10, warm=2))
print(json.dumps(dict(ms=best)))
"""


def main():
    import ember
    from compiled_check import ran_compiled
    worst = check_same(ember)
    _, eager = make_step(ember)
    _, compiled = make_step(ember, compile_it=True)
    data = batches(ember, 4)
    for x, y in data:  # trace, compile, and warm both
        eager(x, y)
        compiled(x, y)
    best = {"eager": 1e9, "compiled": 1e9, "torch": None}
    for _ in range(ROUNDS):
        best["eager"] = min(best["eager"], median_ms(lambda: eager(*data[0]), n=10, warm=2))
        with ran_compiled(compiled, "nanoGPT step, compiled"):
            best["compiled"] = min(best["compiled"], median_ms(lambda: compiled(*data[0]), n=10, warm=2))
    try:
        r = subprocess.run([sys.executable, "-c", TORCH.format(here=os.path.dirname(os.path.abspath(__file__)),
                                                               rounds=ROUNDS)],
                           capture_output=True, text=True, check=True, env=dict(os.environ, OMP_NUM_THREADS="2"))
        best["torch"] = json.loads(r.stdout.strip().splitlines()[-1])["ms"]
    except (subprocess.CalledProcessError, json.JSONDecodeError, IndexError) as e:
        print("PyTorch row failed:", getattr(e, "stderr", e), file=sys.stderr)
    print(machine())
    print(f"nanoGPT-style step: {N_LAYER} layers, {N_HEAD} heads, d {N_EMBD}, context {BLOCK}, batch {BATCH}, "
          f"vocab {VOCAB}; compiled parameters within {worst:.1e} of eager's after 3 steps\n")
    print("| step | ember eager | ember compiled | eager / compiled | PyTorch (2 threads) |")
    print("|---|---:|---:|---:|---:|")
    t = f"{best['torch']:.2f} ms" if best["torch"] else "n/a"
    print(f"| fwd + bwd + clip + AdamW | {best['eager']:.2f} ms | {best['compiled']:.2f} ms | "
          f"{best['eager'] / best['compiled']:.2f}x | {t} |")
    print(compiled._specializations()[0]["backend"], compiled._stats()["fallbacks"])


if __name__ == "__main__":
    main()
