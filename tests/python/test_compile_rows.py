"""Row kernels: reductions fused with their producers and consumers.

Softmax, log_softmax, layer norm, RMS norm, variance and cross-entropy as
users write them become one kernel each (the fuse pass's report and the
graph say so), and the compiled result has eager's bits: the kernel runs
each row's reductions with the eager kernels' own code. Their backwards,
compiled as training steps, match eager and PyTorch's gradients. NaN and
inf propagate as in eager; layouts and shapes a row kernel cannot take run
op by op and still match.
"""

import os

import numpy as np
import pytest
import torch

import ember
import ember.nn.functional as F
from conftest import bits_equal, compiled_equals_eager

pytestmark = pytest.mark.filterwarnings("ignore:ember.compile")
HAS_LLVM = ember.compiler.has_llvm()
LLVM_RUNS = HAS_LLVM and os.environ.get("EMBER_BACKEND", "llvm") == "llvm"


def softmax(x):
    e = (x - x.amax(-1, keepdim=True)).exp()
    return e / e.sum(-1, keepdim=True)


def log_softmax(x):
    return x - x.logsumexp(-1, keepdim=True)


def layer_norm(x, w, b):
    mean = x.mean(-1, keepdim=True)
    var = ((x - mean) ** 2).mean(-1, keepdim=True)
    return (x - mean) / (var + 1e-5).sqrt() * w + b


def rms_norm(x, w):
    return x * (x * x).mean(-1, keepdim=True).add(1e-6).rsqrt() * w


def standardize(x):
    return (x - x.mean(-1, keepdim=True)) / x.std(-1, keepdim=True)


def cross_entropy(logits, onehot):
    logp = logits - logits.logsumexp(-1, keepdim=True)
    return -(logp * onehot).sum(-1)


def onehot(n, classes, seed=0):
    rng = np.random.default_rng(seed)
    return ember.tensor(np.eye(classes, dtype=np.float32)[rng.integers(0, classes, n)])


# (name, function, arguments, reductions in the row kernel, kernels in all:
# cross-entropy's final negation of the per-row sum is a kernel of its own)
CASES = [
    ("softmax", softmax, lambda: (ember.randn(64, 300) * 4,), 2, 1),
    ("log_softmax", log_softmax, lambda: (ember.randn(64, 300) * 4,), 1, 1),
    ("layer_norm", layer_norm, lambda: (ember.randn(8, 16, 96), ember.randn(96), ember.randn(96)), 2, 1),
    ("rms_norm", rms_norm, lambda: (ember.randn(128, 64), ember.randn(64)), 1, 1),
    ("standardize", standardize, lambda: (ember.randn(50, 70),), 2, 1),
    ("cross_entropy", cross_entropy, lambda: (ember.randn(64, 40), onehot(64, 40)), 2, 2),
    ("two dims", lambda x: x - x.sum((1, 2), keepdim=True) / 12.0, lambda: (ember.randn(40, 3, 4),), 1, 1),
    ("float64", softmax, lambda: (ember.randn(32, 100).double(),), 2, 1),
    ("float16", softmax, lambda: (ember.randn(32, 100).half(),), 2, 1),
]


@pytest.mark.parametrize("name,fn,make,n_reductions,n_kernels", CASES, ids=[c[0] for c in CASES])
def test_one_row_kernel_with_eager_bits(name, fn, make, n_reductions, n_kernels):
    cf = compiled_equals_eager(fn, make)
    (spec,) = cf._specializations()
    plural, kernels = "" if n_reductions == 1 else "s", "1 kernel" if n_kernels == 1 else f"{n_kernels} kernels"
    assert f"into {kernels} (1 row kernel, holding {n_reductions} reduction{plural})" in spec["pass_report"], \
        spec["pass_report"]
    graph = cf._graph(0)
    assert graph.count("fused(") == n_kernels, graph
    assert "runs op by op" not in spec["kernels"], spec["kernels"]
    assert cf._stats()["compiled_calls"] == 2


def test_per_row_results_leave_the_kernel():
    def fn(x):
        m = x.amax(-1, keepdim=True)
        e = (x - m).exp()
        s = e.sum(-1)
        return e / s.unsqueeze(-1), m, s
    cf = ember.compile(fn)
    x = ember.randn(33, 129)
    with ember.no_grad():
        cf(x)
        for got, want in zip(cf(x), fn(x)):
            bits_equal(got, want)


@pytest.mark.parametrize("fn,x", [
    (softmax, [[-np.inf] * 5, [0.0, -np.inf, 1.0, -np.inf, 2.0], [np.inf, 0.0, 1.0, 2.0, 3.0]]),
    (softmax, [[np.nan, 0.0, 1.0, 2.0, 3.0], [1e30, -1e30, 0.0, 1.0, 2.0], [0.0] * 5]),
    (log_softmax, [[1e38, 1e38, -1e38, 0.0, 1.0], [-np.inf] * 5, [3e38, 3e38, 3e38, 3e38, 3e38]]),
    (lambda x: layer_norm(x, ember.ones(5), ember.zeros(5)), [[2.5] * 5, [0.0] * 5, [np.inf, 0.0, 1.0, 2.0, 3.0]]),
    (standardize, [[1.0] * 5, [np.nan] * 5, [-np.inf, 1.0, 2.0, 3.0, 4.0]]),
])
def test_nan_and_inf_as_eager(fn, x):
    x = ember.tensor(np.array(x * 1000, dtype=np.float32))  # 3000 rows: big enough to compile
    cf = ember.compile(fn)
    with ember.no_grad():
        cf(x)
        bits_equal(cf(x), fn(x))
    assert "row kernel" in cf._specializations()[0]["pass_report"]


@pytest.mark.skipif(not LLVM_RUNS, reason="the LLVM backend's row kernels (this run uses the interpreter)")
def test_layouts_a_row_kernel_cannot_take_run_op_by_op():
    """A transposed input's rows are not contiguous: eager reduces it in
    another order, so the fused node runs op by op, equal to eager."""
    cf = ember.compile(softmax)
    x = ember.randn(300, 64)
    with ember.no_grad():
        cf(x.t())
        bits_equal(cf(x.t()), softmax(x.t()))
    assert "runs op by op: llvm: row kernel: a reduction of an input whose rows are not contiguous" \
        in cf._specializations()[0]["kernels"]


@pytest.mark.skipif(not HAS_LLVM, reason="a build without LLVM has only the interpreter")
def test_backends_agree(monkeypatch):
    """The interpreter runs the same region op by op."""
    x = ember.randn(64, 300)
    outs = []
    for backend in ("llvm", "interp"):
        monkeypatch.setenv("EMBER_BACKEND", backend)
        cf = ember.compile(softmax)
        with ember.no_grad():
            cf(x)
            outs.append(cf(x))
        assert cf._specializations()[0]["backend"] == backend
    bits_equal(outs[0], outs[1])


def _step(fn, *params):
    def step(*args):
        loss = fn(*args).square().sum()
        loss.backward()
        return loss
    return step


@pytest.mark.parametrize("name", ["softmax", "log_softmax", "layer_norm", "cross_entropy"])
def test_fused_backward_matches_eager_and_pytorch(name):
    rng = np.random.default_rng(1)
    x0 = rng.standard_normal((64, 48)).astype(np.float32) * 3
    w0, b0 = rng.standard_normal(48).astype(np.float32), rng.standard_normal(48).astype(np.float32)
    t0 = np.eye(48, dtype=np.float32)[rng.integers(0, 48, 64)]

    def ours(m, x, w, b, t):
        if name == "softmax":
            return softmax(x)
        if name == "log_softmax":
            return log_softmax(x)
        if name == "layer_norm":
            return layer_norm(x, w, b)
        return cross_entropy(x, t)

    def theirs(x, w, b, t):
        if name == "softmax":
            return torch.softmax(x, -1)
        if name == "log_softmax":
            return torch.log_softmax(x, -1)
        if name == "layer_norm":
            return torch.nn.functional.layer_norm(x, (48,), w, b)
        return -(torch.log_softmax(x, -1) * t).sum(-1)

    def leaves():
        return [ember.tensor(a, requires_grad=True) for a in (x0, w0, b0)] + [ember.tensor(t0)]

    def step(x, w, b, t):
        loss = ours(ember, x, w, b, t).square().sum()
        loss.backward()
        return loss

    eager = leaves()
    step(*eager)
    cf = ember.compile(step)
    for _ in range(2):
        comp = leaves()
        cf(*comp)
    assert cf._stats()["compiled_calls"] == 1
    assert "row kernel" in cf._specializations()[0]["pass_report"]
    tl = [torch.tensor(a, requires_grad=True) for a in (x0, w0, b0)] + [torch.tensor(t0)]
    theirs(*tl).square().sum().backward()
    for e, c, t in zip(eager[:3], comp[:3], tl[:3]):
        if t.grad is None:  # (softmax's: no weight or bias in the loss)
            assert e.grad is None and c.grad is None
            continue
        np.testing.assert_array_equal(c.grad.numpy(), e.grad.numpy())
        np.testing.assert_allclose(c.grad.numpy(), t.grad.numpy(), rtol=2e-4, atol=2e-4)


@pytest.mark.parametrize("op", ["sum", "mean", "amax", "amin"])
@pytest.mark.parametrize("n", [2, 15, 263, 1024, 65536])
def test_inlined_row_folds_have_eager_bits(op, n):
    """float32 sum, mean, amax and amin run inside the row kernel from the
    scalar library's bitcode (ops_fold.h), the eager kernels' own folds:
    every row length's vector body, lane tail and scalar tail, up to the
    longest row the fuser takes, give eager's bits, signed zeros, NaN and
    inf included."""
    rng = np.random.default_rng(n)
    rows = 4 if n > 1000 else 40
    a = (rng.standard_normal((rows, n)) * 100).astype(np.float32)
    a[1] = 0.0
    a[1, ::3] = -0.0  # max/min of mixed signed zeros: which one wins is the fold's order
    a[2, n // 2] = np.nan
    a[3, -1] = np.inf
    if rows > 4:
        a[4] = -0.0
    x = ember.tensor(a)

    def fn(x):  # the reduction's own value leaves the kernel too
        r = getattr(x, op)(-1, keepdim=True)
        return (x * 2.0 - r).exp(), r

    cf = ember.compile(fn)
    with ember.no_grad():
        cf(x)
        got = cf(x)
        want = fn(x)
    if LLVM_RUNS:
        assert "1 row kernel" in cf._specializations()[0]["pass_report"]
        assert "runs op by op" not in cf._specializations()[0]["kernels"]
    for g, w in zip(got, want):
        bits_equal(g, w)


def test_big_outputs_stream_with_eager_bits(tmp_path, monkeypatch):
    """A row kernel's output of 16 MiB or more whose last loop reads an
    input goes to memory with streaming stores, 16 elements at a time after
    a plain head up to the row's first 64-byte boundary, then a plain tail:
    rows of 1027 floats start at every alignment. The layer norm streams
    and the softmax (whose last loop reads only its scratch row) does not;
    both keep eager's bits."""
    monkeypatch.setenv("EMBER_DUMP", "all")
    monkeypatch.setenv("EMBER_DUMP_DIR", str(tmp_path))
    rng = np.random.default_rng(5)
    x = ember.tensor(rng.standard_normal((4100, 1027)).astype(np.float32))  # 16.8 MB
    w, b = (ember.tensor(rng.standard_normal(1027).astype(np.float32)) for _ in range(2))
    for name, fn in (("ln", lambda t: layer_norm(t, w, b)), ("sm", softmax)):
        cf = ember.compile(fn)
        with ember.no_grad():
            cf(x)
            bits_equal(cf(x), fn(x))
    if LLVM_RUNS:
        kernels = {d.name: (d / "kernels.ll").read_text() for d in tmp_path.iterdir() if d.is_dir()}
        streams = sorted("em_scalar_stream_block_f32(" in k for k in kernels.values())
        assert streams == [False, True], list(kernels)
