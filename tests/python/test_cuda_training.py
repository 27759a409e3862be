"""Issue 43, item 3: models train on "cuda" with the CPU's loss curve. A
small digits-style CNN (conv, ReLU, max-pool, linear, cross-entropy, SGD
with momentum) and a GPT-2-style block (embedding, layer norm, causal
attention, GELU MLP, AdamW) each take the same steps from the same weights
and batches on the CPU and on the device; their losses agree within 1e-4
(relative) at every step, and the weights at the end within 1e-4.

Runs on a GPU, and under the host stand-in (EMBER_CUDA_HOST_STAND_IN=1),
which refuses exactly the ops the CUDA device has no kernel for, so a
missing kernel fails here in CI rather than first on a GPU."""
import numpy as np
import pytest

import ember
import ember.nn as nn
import ember.nn.functional as F


@pytest.fixture
def device():
    if not ember.cuda.is_available():
        pytest.skip(ember.cuda.why_unavailable())
    return "cuda"


class SmallCNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 8, 3, padding=1)
        self.conv2 = nn.Conv2d(8, 16, 3, stride=2, padding=1)
        self.pool = nn.MaxPool2d(2)
        self.fc = nn.Linear(16 * 2 * 2, 10)

    def forward(self, x):
        x = self.pool(F.relu(self.conv1(x)))  # 8x8 -> 4x4
        x = F.relu(self.conv2(x))  # 4x4 -> 2x2
        return self.fc(x.flatten(1))


class Block(nn.Module):
    """A GPT-2 block with its embedding and head (pre-norm, causal)."""

    def __init__(self, vocab=50, seq=16, d=32, heads=4):
        super().__init__()
        self.heads = heads
        self.tok, self.pos = nn.Embedding(vocab, d), nn.Embedding(seq, d)
        self.ln1, self.ln2, self.lnf = nn.LayerNorm(d), nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.fc, self.fc2 = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)
        self.head = nn.Linear(d, vocab, bias=False)
        self.register_buffer("mask", ember.ones(seq, seq, dtype=ember.bool).triu(1))

    def forward(self, idx):
        b, t = idx.shape
        x = self.tok(idx) + self.pos(ember.arange(t, device=idx.device))
        c = x.shape[-1]
        q, k, v = self.qkv(self.ln1(x)).split(c, dim=2)
        q, k, v = (z.reshape(b, t, self.heads, c // self.heads).transpose(1, 2) for z in (q, k, v))
        att = (q @ k.transpose(-2, -1)) * (1.0 / (c // self.heads) ** 0.5)
        att = att.masked_fill(self.mask[:t, :t], float("-inf")).softmax(-1)
        y = (att @ v).transpose(1, 2).reshape(b, t, c)
        x = x + self.proj(y)
        x = x + self.fc2(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))
        return self.head(self.lnf(x))


def train(make, batches, device, optim, steps):
    ember.manual_seed(0)
    model = make().to(device)
    opt = optim(model.parameters())
    losses = []
    for i in range(steps):
        x, y = (t.to(device) for t in batches[i % len(batches)])
        opt.zero_grad()
        out = model(x)
        loss = F.cross_entropy(out.reshape(-1, out.shape[-1]), y.reshape(-1))
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses, {k: v.cpu().numpy() for k, v in model.state_dict().items()}


def same_training(make, batches, device, optim, steps=6):
    cpu_losses, cpu_state = train(make, batches, "cpu", optim, steps)
    dev_losses, dev_state = train(make, batches, device, optim, steps)
    assert cpu_losses[-1] < cpu_losses[0], cpu_losses  # (it learns)
    np.testing.assert_allclose(dev_losses, cpu_losses, rtol=1e-4, atol=1e-6)
    for k in cpu_state:
        np.testing.assert_allclose(dev_state[k], cpu_state[k], rtol=1e-4, atol=1e-5, err_msg=k)


def test_a_cnn_trains_on_the_device_as_on_the_cpu(device):
    rng = np.random.default_rng(1)
    batches = [(ember.tensor(rng.standard_normal((16, 1, 8, 8)).astype(np.float32)),
                ember.tensor(rng.integers(0, 10, 16))) for _ in range(3)]
    same_training(SmallCNN, batches, device, lambda p: ember.optim.SGD(p, lr=0.05, momentum=0.9))


def test_a_gpt_block_trains_on_the_device_as_on_the_cpu(device):
    rng = np.random.default_rng(2)
    batches = [(ember.tensor(rng.integers(0, 50, (4, 16))), ember.tensor(rng.integers(0, 50, (4, 16))))
               for _ in range(3)]
    same_training(Block, batches, device, lambda p: ember.optim.AdamW(p, lr=3e-3))
