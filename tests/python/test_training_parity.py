"""Training parity with PyTorch: an MLP, a small CNN (with BatchNorm and
pooling) and one pre-LayerNorm transformer block (causal multi-head
attention, GELU MLP) are built in both libraries from the same code,
start from the same weights (ember's, copied into torch), and take 20 SGD
and 20 Adam steps on the same batches. The losses and the final weights
agree to 1e-4 relative, in float32."""

import numpy as np
import pytest
import torch

import ember


def mlp(m):
    nn = m.nn
    return nn.Sequential(nn.Linear(20, 32), nn.ReLU(), nn.Linear(32, 32), nn.Tanh(),
                         nn.Linear(32, 5))


def cnn(m):
    # no bias before BatchNorm: its gradient is zero in exact arithmetic,
    # and Adam would turn the two libraries' rounding noise into steps
    nn = m.nn
    return nn.Sequential(
        nn.Conv2d(1, 6, 3, padding=1, bias=False), nn.BatchNorm2d(6), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(6, 8, 3, stride=1, groups=2), nn.ReLU(), nn.AvgPool2d(2, padding=1),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8, 5))


def transformer(m):
    nn = m.nn

    class Block(nn.Module):
        def __init__(self, vocab=11, d=16, heads=4, seq=6):
            super().__init__()
            self.embed = nn.Embedding(vocab, d)
            self.pos = nn.Parameter(m.zeros(seq, d))
            self.ln1 = nn.LayerNorm(d)
            self.attn = nn.MultiheadAttention(d, heads, batch_first=True)
            self.ln2 = nn.LayerNorm(d)
            self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(approximate="tanh"),
                                     nn.Linear(4 * d, d))
            self.head = nn.Linear(d, vocab)
            self.register_buffer("causal", m.ones(seq, seq, dtype=m.bool).triu(1))

        def forward(self, tokens):
            x = self.embed(tokens) + self.pos
            a = self.ln1(x)
            x = x + self.attn(a, a, a, attn_mask=self.causal, need_weights=False)[0]
            x = x + self.mlp(self.ln2(x))
            return self.head(x).transpose(1, 2)  # (N, vocab, seq) for cross_entropy

    return Block()


def batches(kind, steps):
    """Four fixed batches, cycled: the models can fit them, so the loss falls."""
    pool = list(_pool(kind))
    for k in range(steps):
        yield pool[k % len(pool)]


def _pool(kind):
    rng = np.random.default_rng(42)
    for _ in range(4):
        if kind == "mlp":
            yield rng.standard_normal((16, 20)).astype(np.float32), rng.integers(0, 5, 16)
        elif kind == "cnn":
            yield rng.standard_normal((8, 1, 8, 8)).astype(np.float32), rng.integers(0, 5, 8)
        else:
            tokens = rng.integers(0, 11, (4, 6))
            yield tokens, np.roll(tokens, -1, axis=1)


MODELS = {"mlp": mlp, "cnn": cnn, "transformer": transformer}
OPTIMIZERS = {
    "sgd": lambda m, ps: m.optim.SGD(ps, lr=0.05, momentum=0.9),
    "adam": lambda m, ps: m.optim.Adam(ps, lr=3e-3),
}


def train(m, model, make_opt, kind, steps=20, compiled=False):
    opt = make_opt(m, list(model.parameters()))
    forward = m.compile(model) if compiled else model
    losses = []
    for x, y in batches(kind, steps):
        xt = m.tensor(x) if kind == "transformer" else m.tensor(x, dtype=m.float32)
        out = forward(xt)
        loss = m.nn.functional.cross_entropy(out, m.tensor(y, dtype=m.int64),
                                             label_smoothing=0.1 if kind == "transformer" else 0.0)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(float(loss))
    if compiled:  # the forward and backward ran compiled (the first call traces)
        stats = forward._stats()
        assert stats["compiled_calls"] == steps - 1 and stats["eager_calls"] == 0, stats
    return losses


@pytest.mark.parametrize("compiled", [False, True], ids=["eager", "compiled"])
@pytest.mark.parametrize("opt_name", list(OPTIMIZERS))
@pytest.mark.parametrize("kind", list(MODELS))
def test_same_losses_and_weights_as_torch(kind, opt_name, compiled):
    """compiled: ember's model is ember.compile(model) in the same loop, so
    its gradients come from the compiled backward graph."""
    ember.manual_seed(0)
    em_model = MODELS[kind](ember)
    t_model = MODELS[kind](torch)
    state = {k: torch.tensor(v.numpy().copy()) for k, v in em_model.state_dict().items()}
    t_model.load_state_dict(state)
    em_losses = train(ember, em_model, OPTIMIZERS[opt_name], kind, compiled=compiled)
    t_losses = train(torch, t_model, OPTIMIZERS[opt_name], kind)
    np.testing.assert_allclose(em_losses, t_losses, rtol=1e-4)
    assert em_losses[16] < em_losses[0]  # it learns (steps 0 and 16 see the same batch)
    t_state = t_model.state_dict()
    for k, v in em_model.state_dict().items():
        w, want = v.numpy(), t_state[k].numpy()
        if k == "attn.in_proj_bias":
            # the key bias's gradient is zero in exact arithmetic (softmax
            # ignores a shift shared by all keys): Adam normalises the
            # rounding noise of either library into full steps, so only the
            # query and value biases are comparable
            d = w.shape[0] // 3
            w, want = np.delete(w, np.s_[d:2 * d]), np.delete(want, np.s_[d:2 * d])
        scale = max(float(np.abs(want).max()), 1e-6)
        np.testing.assert_allclose(w, want, rtol=1e-4, atol=1e-4 * scale, err_msg=k)
