"""The layers a porter meets after Linear and Conv, against PyTorch 1.13
(values and gradients, float64): more losses and distances, GroupNorm,
InstanceNorm, LocalResponseNorm, pad's reflect/replicate/circular modes,
interpolate and Upsample, grid_sample and affine_grid, PixelShuffle,
Bilinear."""

import math

import numpy as np
import pytest
import torch

import ember
import ember.nn as enn
from test_nn_functional import K, check, check_module, raises_like, rnd

pytestmark = pytest.mark.filterwarnings("ignore:reduction. 'mean' divides the total loss")


# ---------------------------------------------------------------- losses

def sign_target(shape, seed):
    return K(np.where(np.random.default_rng(seed).uniform(size=shape) > 0.5, 1.0, -1.0))


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_regression_losses(reduction):
    x, y = rnd((4, 5), 0), rnd((4, 5), 1)
    for beta in (1.0, 0.5, 0.0):
        check(lambda m, F, a, b: F.smooth_l1_loss(a, b, reduction=reduction, beta=beta), x, y)
    check(lambda m, F, a, b: F.huber_loss(a, b, reduction=reduction, delta=0.7), x, y)
    check(lambda m, F, a, b: F.soft_margin_loss(a, b, reduction=reduction), x, sign_target((4, 5), 2))
    check(lambda m, F, a, b: F.margin_ranking_loss(a[0], a[1], b, 0.3, reduction=reduction), x,
          sign_target((5,), 3))
    check(lambda m, F, a, b: F.hinge_embedding_loss(a, b, 0.5, reduction=reduction), x, sign_target((4, 5), 4))
    check(lambda m, F, a, b: F.multilabel_soft_margin_loss(a, b, reduction=reduction), x,
          K(np.random.default_rng(5).integers(0, 2, (4, 5)).astype(np.float64)))


@pytest.mark.parametrize("reduction", ["mean", "sum", "none", "batchmean"])
@pytest.mark.parametrize("log_target", [False, True])
def test_kl_div(reduction, log_target):
    p = rnd((3, 4), 1, 0.0, 1.0)
    p[0, 0] = 0.0  # 0 log 0 = 0
    target = K(np.log(p + 0.1) if log_target else p)
    check(lambda m, F, x, t: F.kl_div(x.log_softmax(-1), t, reduction=reduction, log_target=log_target),
          rnd((3, 4), 0), target)


def test_probability_and_embedding_losses():
    probs = rnd((3, 4), 0, 0.01, 0.99)
    tgt = K(np.random.default_rng(1).uniform(size=(3, 4)))
    check(lambda m, F, x, t: F.binary_cross_entropy(x, t), probs, tgt)
    check(lambda m, F, x, t, w: F.binary_cross_entropy(x, t, w, reduction="sum"), probs, tgt, K(rnd((4,), 2)))
    a, b, c = rnd((6, 5), 3), rnd((6, 5), 4), rnd((6, 5), 5)
    check(lambda m, F, x, y, t: F.cosine_embedding_loss(x, y, t, 0.2), a, b, sign_target((6,), 6))
    for p, swap in ((2.0, False), (1.0, True), (3.0, False)):
        check(lambda m, F, x, y, z: F.triplet_margin_loss(x, y, z, 0.5, p, swap=swap), a, b, c)
    check(lambda m, F, x, y: F.cosine_similarity(x, y), a, b)
    check(lambda m, F, x, y: F.pairwise_distance(x, y, 1.5, keepdim=True), a, b)
    rate = rnd((3, 4), 7, 0.1, 2.0)
    counts = K(np.random.default_rng(8).integers(0, 5, (3, 4)).astype(np.float64))
    for log_input, full in ((True, False), (False, True), (True, True)):
        check(lambda m, F, x, t: F.poisson_nll_loss(x, t, log_input, full), rate, counts)
    for var_shape, full in (((3, 4), False), ((3, 1), True), ((3,), False)):
        check(lambda m, F, x, t, v: F.gaussian_nll_loss(x, t, v, full), rnd((3, 4), 9), rnd((3, 4), 10),
              rnd(var_shape, 11, 0.1, 2.0))


def test_loss_modules_match():
    x, y = rnd((4, 5), 0), rnd((4, 5), 1)
    for em, tm in ((enn.SmoothL1Loss(beta=0.5), torch.nn.SmoothL1Loss(beta=0.5)),
                   (enn.HuberLoss(reduction="sum", delta=2.0), torch.nn.HuberLoss(reduction="sum", delta=2.0)),
                   (enn.TripletMarginLoss(margin=0.3, p=1), torch.nn.TripletMarginLoss(margin=0.3, p=1))):
        args = (x, y) if not isinstance(em, enn.TripletMarginLoss) else (x, y, rnd((4, 5), 2))
        check_module(em, tm, *args)
    check_module(enn.KLDivLoss(reduction="batchmean", log_target=True),
                 torch.nn.KLDivLoss(reduction="batchmean", log_target=True), x, y)
    check_module(enn.BCELoss(), torch.nn.BCELoss(), rnd((4, 5), 3, 0.05, 0.95),
                 K(np.random.default_rng(4).uniform(size=(4, 5))))
    check_module(enn.CosineSimilarity(dim=0), torch.nn.CosineSimilarity(dim=0), x, y)
    check_module(enn.PairwiseDistance(p=3), torch.nn.PairwiseDistance(p=3), x, y)


def test_loss_errors():
    raises_like(lambda m, F, x: F.binary_cross_entropy(x, x * 0 + 0.5), rnd((3,), 0, 1.5, 2.0))
    raises_like(lambda m, F, x: F.smooth_l1_loss(x, x, beta=-1.0), rnd((3,), 0))
    raises_like(lambda m, F, x: F.gaussian_nll_loss(x, x, x * 0 - 1), rnd((3,), 0))


# ---------------------------------------------------------------- normalisation

@pytest.mark.parametrize("shape,groups", [((2, 6, 5), 3), ((2, 4, 3, 3), 2), ((3, 4), 4), ((2, 6, 2, 2, 2), 1)])
def test_group_norm(shape, groups):
    c = shape[1]
    check(lambda m, F, x, w, b: F.group_norm(x, groups, w, b, 1e-5), rnd(shape, 0), rnd((c,), 1), rnd((c,), 2))
    em = enn.GroupNorm(groups, c, dtype=ember.float64)
    check_module(em, torch.nn.GroupNorm(groups, c, dtype=torch.float64), rnd(shape, 3))


@pytest.mark.parametrize("cls,shape", [("InstanceNorm1d", (2, 3, 7)), ("InstanceNorm2d", (2, 3, 4, 5)),
                                       ("InstanceNorm3d", (2, 3, 2, 3, 4)), ("InstanceNorm2d", (3, 4, 5))])
@pytest.mark.parametrize("affine,track", [(False, False), (True, True)])
def test_instance_norm(cls, shape, affine, track):
    em = getattr(enn, cls)(3, affine=affine, track_running_stats=track, dtype=ember.float64)
    tm = getattr(torch.nn, cls)(3, affine=affine, track_running_stats=track, dtype=torch.float64)
    check_module(em, tm, rnd(shape, 0))
    if track:
        np.testing.assert_allclose(em.running_var.numpy(), tm.running_var.numpy(), rtol=1e-10)
        em.eval()
        tm.eval()
        check_module(em, tm, rnd(shape, 1))


@pytest.mark.parametrize("shape", [(2, 7, 4), (2, 6, 3, 3), (1, 5, 2, 2, 2)])
def test_local_response_norm(shape):
    check(lambda m, F, x: F.local_response_norm(x, 3, alpha=0.1, beta=0.6, k=2.0), rnd(shape, 0))
    check_module(enn.LocalResponseNorm(4), torch.nn.LocalResponseNorm(4), rnd(shape, 1))


# ---------------------------------------------------------------- pad, interpolate, grid_sample

@pytest.mark.parametrize("mode", ["reflect", "replicate", "circular"])
@pytest.mark.parametrize("shape,pad", [((2, 3, 6), (2, 3)), ((1, 2, 4, 5), (1, 2, 3, 0)),
                                       ((1, 1, 3, 4, 5), (1, 1, 2, 0, 1, 2))])
def test_pad_modes(mode, shape, pad):
    check(lambda m, F, x: F.pad(x, pad, mode=mode), rnd(shape, 0))


def test_pad_modules_and_errors():
    check_module(enn.ReflectionPad2d((1, 2, 0, 1)), torch.nn.ReflectionPad2d((1, 2, 0, 1)), rnd((1, 2, 3, 4), 0))
    check_module(enn.ReplicationPad1d(2), torch.nn.ReplicationPad1d(2), rnd((2, 3, 4), 1))
    check_module(enn.ZeroPad2d(1), torch.nn.ZeroPad2d(1), rnd((1, 1, 2, 2), 2))
    check_module(enn.ConstantPad1d(2, 3.5), torch.nn.ConstantPad1d(2, 3.5), rnd((1, 2, 3), 3))
    raises_like(lambda m, F, x: F.pad(x, (3, 0), mode="reflect"), rnd((1, 2, 3), 0))


@pytest.mark.parametrize("mode,shape", [("nearest", (1, 2, 5)), ("nearest", (2, 1, 4, 5)),
                                        ("nearest-exact", (1, 2, 5, 3)), ("linear", (2, 2, 5)),
                                        ("bilinear", (1, 2, 4, 5)), ("bicubic", (1, 1, 5, 4)),
                                        ("trilinear", (1, 1, 3, 4, 2)), ("area", (1, 2, 6, 7))])
@pytest.mark.parametrize("how", [dict(scale_factor=2), dict(scale_factor=0.5), dict(size=7),
                                 dict(scale_factor=1.7, align_corners=True), dict(size=3, align_corners=True)])
def test_interpolate(mode, shape, how):
    how = dict(how)
    if mode in ("nearest", "nearest-exact", "area"):
        if "align_corners" in how:
            return
    elif "align_corners" not in how:
        how["align_corners"] = False
    check(lambda m, F, x: F.interpolate(x, mode=mode, **how), rnd(shape, 0), rtol=1e-6, atol=1e-9)


def test_upsample_modules_and_pixel_shuffle():
    check_module(enn.Upsample(scale_factor=2, mode="bilinear"), torch.nn.Upsample(scale_factor=2, mode="bilinear"),
                 rnd((1, 2, 3, 3), 0))
    check_module(enn.UpsamplingBilinear2d(size=(5, 4)), torch.nn.UpsamplingBilinear2d(size=(5, 4)),
                 rnd((1, 1, 3, 3), 1))
    check_module(enn.UpsamplingNearest2d(scale_factor=3), torch.nn.UpsamplingNearest2d(scale_factor=3),
                 rnd((1, 1, 2, 3), 2))
    check_module(enn.PixelShuffle(2), torch.nn.PixelShuffle(2), rnd((2, 8, 3, 4), 3))
    check_module(enn.PixelUnshuffle(3), torch.nn.PixelUnshuffle(3), rnd((1, 2, 6, 9), 4))
    raises_like(lambda m, F, x: F.pixel_shuffle(x, 3), rnd((1, 4, 2, 2), 0))
    raises_like(lambda m, F, x: F.interpolate(x, size=4, scale_factor=2), rnd((1, 1, 3), 0))


@pytest.mark.parametrize("mode", ["bilinear", "nearest"])
@pytest.mark.parametrize("padding_mode", ["zeros", "border", "reflection"])
@pytest.mark.parametrize("align_corners", [False, True])
def test_grid_sample(mode, padding_mode, align_corners):
    grid = rnd((2, 3, 4, 2), 1, -1.3, 1.3)
    grid[0, 0, 0] = [0.1, -0.2]
    args = dict(mode=mode, padding_mode=padding_mode, align_corners=align_corners)
    if mode == "nearest":  # no gradient for the grid
        check(lambda m, F, x, g: F.grid_sample(x, g, **args), rnd((2, 3, 5, 6), 0), K(grid))
    else:
        check(lambda m, F, x, g: F.grid_sample(x, g, **args), rnd((2, 3, 5, 6), 0), grid, rtol=1e-6, atol=1e-9)


def test_affine_grid_and_sampling():
    theta = rnd((2, 2, 3), 0, -0.8, 0.8)
    for align in (False, True):
        check(lambda m, F, t: F.affine_grid(t, (2, 3, 4, 5), align_corners=align), theta)
        check(lambda m, F, x, t: F.grid_sample(x, F.affine_grid(t, (2, 3, 4, 5), align_corners=align),
                                               align_corners=align), rnd((2, 3, 6, 7), 1), theta, rtol=1e-6,
              atol=1e-9)


def test_bilinear():
    check(lambda m, F, a, b, w, c: F.bilinear(a, b, w, c), rnd((3, 4), 0), rnd((3, 5), 1), rnd((2, 4, 5), 2),
          rnd((2,), 3))
    em = enn.Bilinear(4, 5, 2, dtype=ember.float64)
    check_module(em, torch.nn.Bilinear(4, 5, 2, dtype=torch.float64), rnd((3, 4), 4), rnd((3, 5), 5))
    assert math.isclose(float(em.weight.abs().max()), 0.5, rel_tol=0.5)  # (U(-1/2, 1/2) with in1 = 4)


# ---------------------------------------------------------------- CTC

@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("flat_targets", [False, True])
def test_ctc_loss(reduction, flat_targets):
    T, N, C = 10, 4, 5
    targets = np.array([[1, 1, 2, 3], [4, 2, 0, 0], [3, 3, 3, 0], [2, 0, 0, 0]])  # repeats need a blank between
    tl, il = [4, 2, 3, 1], [10, 7, 9, 3]
    tg = np.concatenate([row[:n] for row, n in zip(targets, tl)]) if flat_targets else targets
    check(lambda m, F, x: F.ctc_loss(x.log_softmax(2), m.tensor(tg), il, tl, reduction=reduction),
          rnd((T, N, C), 1), rtol=1e-9, atol=1e-10)


def test_ctc_impossible_alignments_and_zero_infinity():
    x = rnd((3, 2, 4), 0)  # 3 frames cannot hold "1 1 1" (it needs 5)
    args = ([[1, 1, 1], [2, 3, 0]], [3, 3], [3, 2])
    for zero_inf in (False, True):
        check(lambda m, F, a: F.ctc_loss(a.log_softmax(2), m.tensor(args[0]), args[1], args[2], reduction="none",
                                         zero_infinity=zero_inf), x, grad=zero_inf)
    check_module(enn.CTCLoss(blank=3, zero_infinity=True), torch.nn.CTCLoss(blank=3, zero_infinity=True), x,
                 call=lambda m, a: m(a.log_softmax(2), (torch if isinstance(m, torch.nn.Module) else ember).tensor(
                     [[1, 1, 0], [2, 0, 0]]), [3, 3], [2, 1]))
