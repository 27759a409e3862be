"""Stride-1 float32 convolutions, which run through the direct kernels of
runtime/cpu/conv_direct.c (row-shifted copies of the input, an implicit
GEMM) rather than im2col and OpenBLAS: values and both gradients against
PyTorch computed in float64, over the shapes that exercise the kernels'
edges (widths that are not a multiple of the vector, images smaller than
a tile, output channels that do not fill a register tile, dilation,
groups, 1-d and 3-d, uneven padding, pieces of rows when the copies
outgrow L2, one sample cut by output channels), non-finite inputs, and
bits that do not depend on the thread count; and the same for channels-last
inputs, which go through runtime/cpu/conv_last.c where they fit."""

import os
import subprocess
import sys

import numpy as np
import pytest
import torch
import torch.nn.functional as TF

import ember
import ember.nn.functional as EF
from conftest import subprocess_env

pytestmark = pytest.mark.filterwarnings("ignore:Using padding='same' with even kernel")

# (batch, in channels, out channels, groups, spatial size, kernel, padding, dilation)
SHAPES = [
    (2, 32, 32, 1, (32, 32), (3, 3), 1, 1),      # a ResNet block's conv
    (1, 3, 8, 1, (9, 7), (3, 3), 1, 1),          # width under one vector, rows crossed
    (3, 8, 12, 1, (5, 6), (3, 3), 0, 1),         # no padding; 12 outputs: a part tile
    (2, 16, 32, 1, (4, 4), (3, 3), 1, 1),        # the digits CNN's second conv
    (2, 1, 16, 1, (8, 8), (3, 3), 1, 1),         # one input channel
    (2, 8, 8, 2, (10, 10), (3, 3), 2, 2),        # groups and dilation
    (2, 4, 6, 1, (17,), (5,), 2, 1),             # 1-d
    (1, 6, 6, 3, (6, 7, 5), (3, 3, 3), 1, 1),    # 3-d with groups
    (2, 5, 7, 1, (11, 13), (1, 3), (0, 1), 1),   # a 1x3 kernel
    (1, 64, 64, 1, (20, 20), (3, 3), 1, 1),      # one sample: cut by output channels
    (2, 8, 8, 1, (12, 12), (5, 5), 2, 1),
    (1, 4, 4, 4, (9, 9), (3, 3), 1, 1),          # depthwise
    (2, 12, 5, 1, (7, 7), (2, 2), 1, 1),         # even kernel: output wider than input
    (1, 8, 8, 1, (15, 15), (3, 3), (1, 2), (2, 1)),
    (1, 128, 8, 1, (24, 70), (3, 3), 1, 1),      # copies past 512 KiB: pieces of rows
    (2, 6, 4, 1, (9, 9), (4, 4), "same", 1),     # uneven padding
]


def _run(lib, F, x, w, b, gy, nd, last=False, **kw):
    """conv's result and gradients; `last`: the input channels-last (the
    result then is too, and goes through conv_last.c where it fits)."""
    conv = getattr(F, f"conv{nd}d")
    x, w, b = (lib.tensor(a, requires_grad=True) for a in (x, w, b))
    y = conv(x.contiguous(memory_format=lib.channels_last) if last else x, w, b, **kw)
    if last:  # (the result's layout as PyTorch's: channels-last for conv2d, unless the input is row-major too)
        tx = torch.tensor(x.detach().numpy()).contiguous(memory_format=torch.channels_last)
        ty = getattr(TF, f"conv{nd}d")(tx, torch.tensor(w.detach().numpy()), **kw)
        assert y.is_contiguous(memory_format=lib.channels_last) == ty.is_contiguous(memory_format=torch.channels_last)
    y.backward(lib.tensor(gy))
    return [t.detach().numpy() for t in (y, x.grad, w.grad, b.grad)]


def check_shape(shape, last=False):
    n, cin, cout, g, size, k, pad, dil = shape
    rng = np.random.default_rng(0)
    x = rng.standard_normal((n, cin) + size).astype(np.float32)
    w = rng.standard_normal((cout, cin // g) + k).astype(np.float32)
    b = rng.standard_normal(cout).astype(np.float32)
    kw = dict(padding=pad, dilation=dil, groups=g)
    nd = len(size)
    ref_y = getattr(TF, f"conv{nd}d")(torch.tensor(x, dtype=torch.float64), torch.tensor(w, dtype=torch.float64),
                                      None, **kw)
    gy = rng.standard_normal(tuple(ref_y.shape)).astype(np.float32)
    ref = _run(torch, TF, *(a.astype(np.float64) for a in (x, w, b, gy)), nd, **kw)
    got = _run(ember, EF, x, w, b, gy, nd, last=last, **kw)
    for name, a, r in zip(("output", "input grad", "weight grad", "bias grad"), got, ref):
        assert a.dtype == np.float32 and a.shape == r.shape, name
        # each element is a sum of up to 10^5 float32 products
        np.testing.assert_allclose(a, r, rtol=1e-4, atol=2e-4 * np.abs(r).max(), err_msg=f"{name} of {shape}")


@pytest.mark.parametrize("shape", SHAPES, ids=[str(s) for s in SHAPES])
def test_against_pytorch_in_float64(shape):
    check_shape(shape)


LAST = [s for s in SHAPES if len(s[4]) == 2] + [
    (2, 3, 64, 1, (20, 20), (7, 7), 3, 1),      # a stem: 3 channels in, 4 vectors out
    (2, 32, 80, 2, (9, 11), (3, 3), 1, 1),      # groups of 40: a part vector
    (3, 48, 48, 1, (5, 5), (1, 1), 0, 1),       # 1x1
]


@pytest.mark.parametrize("shape", LAST, ids=[str(s) for s in LAST])
def test_channels_last_against_pytorch_in_float64(shape):
    check_shape(shape, last=True)


@pytest.mark.parametrize("mode", ["direct", "gemm"])
def test_each_path_forced(mode):
    """EMBER_CONV=direct sends every convolution the direct kernels can do to
    them (conv_weight too where its runs are short, which it otherwise
    leaves to the GEMM: pieces of rows, tails of part vectors, batches of
    small samples); EMBER_CONV=gemm none. Both agree with PyTorch, pass
    non-finite inputs through as PyTorch does, and give the same bits on
    any thread count."""
    env = subprocess_env(EMBER_CONV=mode)
    code = ("import sys\nsys.path.insert(0, '.')\nimport test_conv_direct as t\n"
            "for s in t.SHAPES: t.check_shape(s)\n"
            "for s in t.LAST: t.check_shape(s, last=True)\n"
            "t.test_non_finite_inputs_match_pytorch()\n"
            "for s in BITS: t.test_bits_do_not_depend_on_the_thread_count(s)\n".replace("BITS", repr(BITS)) +
            "print('ok')")
    out = subprocess.run([sys.executable, "-c", code], cwd=os.path.dirname(os.path.abspath(__file__)), env=env,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0 and out.stdout.strip().endswith("ok"), out.stderr[-3000:]


def test_non_finite_inputs_match_pytorch():
    """An inf or NaN reaches exactly the outputs and weight-gradient entries
    that read it: the kernels compute no position that is not an output."""
    rng = np.random.default_rng(1)
    x = rng.standard_normal((2, 4, 9, 11)).astype(np.float32)
    x[0, 1, 0, 10] = np.inf    # a corner: only some taps read it
    x[1, 2, 4, 0] = np.nan
    w = rng.standard_normal((5, 4, 3, 3)).astype(np.float32)
    b = np.zeros(5, np.float32)
    gy = rng.standard_normal((2, 5, 9, 11)).astype(np.float32)
    got = _run(ember, EF, x, w, b, gy, 2, padding=1)
    got_last = _run(ember, EF, x, w, b, gy, 2, last=True, padding=1)
    ref = _run(torch, TF, x, w, b, gy, 2, padding=1)
    for a, r in zip(got + got_last, ref + ref):
        np.testing.assert_array_equal(np.isnan(a), np.isnan(r))
        np.testing.assert_array_equal(np.isinf(a), np.isinf(r))
        fin = np.isfinite(r)
        np.testing.assert_allclose(a[fin], r[fin], rtol=1e-4, atol=1e-4)


BITS = [(1, 64, 16, 20, 20), (3, 16, 24, 9, 9), (16, 8, 8, 6, 6)]


@pytest.mark.parametrize("shape", BITS)
def test_bits_do_not_depend_on_the_thread_count(shape):
    n, cin, cout, h, wd = shape
    rng = np.random.default_rng(2)
    x = ember.tensor(rng.standard_normal((n, cin, h, wd)).astype(np.float32), requires_grad=True)
    w = ember.tensor(rng.standard_normal((cout, cin, 3, 3)).astype(np.float32), requires_grad=True)
    results = []
    old = ember.get_num_threads()
    try:
        for threads in (1, 2, 3):
            ember.set_num_threads(threads)
            x.grad = w.grad = None
            y = EF.conv2d(x, w, padding=1)
            y_last = EF.conv2d(x.contiguous(memory_format=ember.channels_last), w, padding=1)
            y = y + y_last
            y.square().sum().backward()
            results.append([t.numpy().copy() for t in (y, x.grad, w.grad)])
    finally:
        ember.set_num_threads(old)
    for other in results[1:]:
        for a, b in zip(other, results[0]):
            np.testing.assert_array_equal(a, b)


def test_strided_and_non_contiguous_operands():
    """Operands that are views (a transposed input, a sliced weight) are
    made dense first; stride-2 convolutions keep the GEMM path and agree."""
    rng = np.random.default_rng(3)
    base = rng.standard_normal((2, 12, 12, 8)).astype(np.float32)
    w = rng.standard_normal((8, 8, 3, 3)).astype(np.float32)
    ex = ember.tensor(base).permute(0, 3, 1, 2)
    ew = ember.tensor(np.concatenate([w, w], 0))[::2]
    tx = torch.tensor(base).permute(0, 3, 1, 2)
    tw = torch.tensor(np.concatenate([w, w], 0))[::2]
    for kw in (dict(padding=1), dict(stride=2, padding=1)):
        np.testing.assert_allclose(EF.conv2d(ex, ew, **kw).numpy(), TF.conv2d(tx, tw, **kw).numpy(),
                                   rtol=1e-4, atol=1e-4)


def test_channels_last_last_tile_writes_only_its_own_positions():
    """conv_last.c's last tile overlaps the one before it; both sum several
    channel blocks into y, on different threads, so the overlap must be
    written by one of them only (a race once gave 25% wrong values, one run
    in four). 2 x 4 x 4 = 32 positions: tiles of 10 leave an overlap; 32
    channels x 9 taps: three blocks."""
    rng = np.random.default_rng(3)
    x = ember.tensor(rng.standard_normal((2, 32, 4, 4)).astype(np.float32)).contiguous(
        memory_format=ember.channels_last)
    w = ember.tensor(rng.standard_normal((16, 32, 3, 3)).astype(np.float32))
    old = ember.get_num_threads()
    try:
        ember.set_num_threads(4)
        want = EF.conv2d(x.contiguous(), w, padding=1).numpy()
        for _ in range(200):
            got = EF.conv2d(x, w, padding=1).numpy()
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    finally:
        ember.set_num_threads(old)
