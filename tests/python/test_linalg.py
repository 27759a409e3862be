"""ember.linalg against torch.linalg (PyTorch 1.13): values on float32 and
float64, batched and not, square and rectangular; singular, not
positive-definite and ill-conditioned inputs; errors; gradients of the
compositions (the ops' own gradients are in test_autograd_ops.py); and a
compiled function that uses them.

Decompositions are unique only up to signs (eigenvectors, singular
vectors, QR's columns): those are compared through what they reconstruct
and through sign-free quantities."""

import math

import numpy as np
import pytest
import torch

import ember

TOL = {"float64": dict(rtol=1e-10, atol=1e-10), "float32": dict(rtol=2e-4, atol=2e-5)}


def mat(shape, dtype="float64", seed=0, spd=False, shift=0.0):
    a = np.random.default_rng(seed).standard_normal(shape)
    if spd:
        a = a @ np.swapaxes(a, -1, -2) + shape[-1] * np.eye(shape[-1])
    a = a + shift * np.eye(shape[-1]) if shift else a
    return ember.from_numpy(a.copy()).to(getattr(ember, dtype)), torch.from_numpy(a.copy()).to(getattr(torch, dtype))


def close(e, t, dtype="float64", **kw):
    tol = dict(TOL[dtype], **kw)
    assert tuple(e.shape) == tuple(t.shape), (tuple(e.shape), tuple(t.shape))
    np.testing.assert_allclose(e.to(ember.float64).numpy(), t.to(torch.float64).numpy(), **tol)


SHAPES = [(4, 4), (3, 5, 5), (2, 2, 3, 3), (1, 1), (0, 3, 3)]


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_square_ops(dtype, shape):
    e, t = mat(shape, dtype, shift=3.0)
    close(ember.linalg.inv(e), torch.linalg.inv(t), dtype)
    close(ember.linalg.det(e), torch.linalg.det(t), dtype)
    for a, b in zip(ember.linalg.slogdet(e), torch.linalg.slogdet(t)):
        close(a, b, dtype)
    close(ember.logdet(e), torch.logdet(t), dtype)
    s, ts = mat(shape, dtype, seed=1, spd=True)
    close(ember.linalg.cholesky(s), torch.linalg.cholesky(ts), dtype)
    close(ember.linalg.cholesky(s, upper=True), torch.linalg.cholesky(ts, upper=True), dtype)
    w, v = ember.linalg.eigh(s)
    tw, tv = torch.linalg.eigh(ts)
    close(w, tw, dtype)
    close(v.abs(), tv.abs(), dtype, atol=1e-3 if dtype == "float32" else 1e-8)
    close((v * w.unsqueeze(-2)) @ v.mT, ts, dtype, rtol=1e-3 if dtype == "float32" else 1e-9)
    close(ember.linalg.eigvalsh(s, UPLO="U"), torch.linalg.eigvalsh(ts, UPLO="U"), dtype)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("shape", [(5, 3), (3, 5), (2, 4, 4), (2, 6, 2), (0, 3), (3, 0)], ids=str)
def test_rectangular_ops(dtype, shape):
    e, t = mat(shape, dtype, seed=2)
    tol = dict(rtol=1e-3, atol=1e-4) if dtype == "float32" else {}
    for full in (False, True):
        U, S, Vh = ember.linalg.svd(e, full_matrices=full)
        tU, tS, tVh = torch.linalg.svd(t, full_matrices=full)
        assert tuple(U.shape) == tuple(tU.shape) and tuple(Vh.shape) == tuple(tVh.shape)
        close(S, tS, dtype, **tol)
        k = S.shape[-1]
        close((U[..., :k] * S.unsqueeze(-2)) @ Vh[..., :k, :], t, dtype, **tol)
    close(ember.linalg.svdvals(e), torch.linalg.svdvals(t), dtype, **tol)
    for mode in ("reduced", "complete", "r"):
        Q, R = ember.linalg.qr(e, mode)
        tQ, tR = torch.linalg.qr(t, mode)
        assert tuple(Q.shape) == tuple(tQ.shape) and tuple(R.shape) == tuple(tR.shape)
        close(R.abs(), tR.abs(), dtype, **tol)
        if mode != "r":
            close(Q @ R, t, dtype, **tol)
    close(ember.linalg.pinv(e), torch.linalg.pinv(t), dtype, **tol)
    close(ember.linalg.matrix_rank(e), torch.linalg.matrix_rank(t), dtype)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_solves(dtype):
    A, tA = mat((3, 4, 4), dtype, shift=4.0)
    B, tB = mat((3, 4, 2), dtype, seed=1)
    close(ember.linalg.solve(A, B), torch.linalg.solve(tA, tB), dtype)
    close(ember.linalg.solve(A, B[..., 0]), torch.linalg.solve(tA, tB[..., 0]), dtype)  # a batch of vectors
    close(ember.linalg.solve(A[0], B), torch.linalg.solve(tA[0], tB), dtype)  # A broadcast over B's batch
    Bt, tBt = mat((3, 2, 4), dtype, seed=3)
    close(ember.linalg.solve(A, Bt, left=False), torch.linalg.solve(tA, tBt, left=False), dtype)
    for upper in (True, False):
        for left in (True, False):
            for unit in (True, False):
                rhs, trhs = (B, tB) if left else (Bt, tBt)
                close(ember.linalg.solve_triangular(A, rhs, upper=upper, left=left, unitriangular=unit),
                      torch.linalg.solve_triangular(tA, trhs, upper=upper, left=left, unitriangular=unit), dtype,
                      rtol=1e-3 if dtype == "float32" else 1e-9)
    for shape in ((6, 3), (3, 6), (2, 5, 5)):
        M, tM = mat(shape, dtype, seed=4)
        R, tR = mat(shape[:-1] + (2,), dtype, seed=5)
        got, want = ember.linalg.lstsq(M, R, driver="gelsd"), torch.linalg.lstsq(tM, tR, driver="gelsd")
        close(got.solution, want.solution, dtype, rtol=1e-3 if dtype == "float32" else 1e-8)
        assert got.rank.tolist() == want.rank.tolist()
        if shape[0] > shape[1]:
            close(got.residuals, ((tM @ want.solution - tR) ** 2).sum(-2), dtype, rtol=1e-3 if dtype == "float32"
                  else 1e-8)
        default = ember.linalg.lstsq(M, R)  # ('gelsy': no residuals, as PyTorch's default on the CPU)
        assert tuple(default.residuals.shape) == tuple(torch.linalg.lstsq(tM, tR).residuals.shape) == (0,)
        close(default.solution, want.solution, dtype, rtol=1e-3 if dtype == "float32" else 1e-8)


def test_int_inputs_promote_in_solve_and_are_refused_alone():
    A = ember.tensor([[2.0, 0.0], [0.0, 4.0]])
    np.testing.assert_allclose(ember.linalg.solve(A, ember.tensor([[2], [8]])).numpy(), [[1.0], [2.0]])
    with pytest.raises(RuntimeError, match="floating point"):
        ember.linalg.inv(ember.tensor([[1, 2], [3, 4]]))


# ---------------------------------------------------------------- singular and ill-conditioned

def test_singular_inputs():
    S = [[1.0, 2.0], [2.0, 4.0]]
    for e_fn, t_fn in ((ember.linalg.inv, torch.linalg.inv),
                       (lambda a: ember.linalg.solve(a, ember.ones(2, 1, dtype=ember.float64)),
                        lambda a: torch.linalg.solve(a, torch.ones(2, 1, dtype=torch.float64)))):
        with pytest.raises(RuntimeError) as want:
            t_fn(torch.tensor(S, dtype=torch.float64))
        with pytest.raises(RuntimeError, match="singular"):
            e_fn(ember.tensor(S, dtype=ember.float64))
        assert "singular" in str(want.value)
    # in a batch: the element is named
    with pytest.raises(RuntimeError, match=r"batch element 1\b"):
        ember.linalg.inv(ember.tensor([[[1.0, 0], [0, 1]], S, S], dtype=ember.float64))
    # no error, PyTorch's values: det 0, slogdet (0, -inf), rank 1, pinv
    e, t = ember.tensor(S, dtype=ember.float64), torch.tensor(S, dtype=torch.float64)
    close(ember.linalg.det(e), torch.linalg.det(t))
    sign, logabs = ember.linalg.slogdet(e)
    assert sign.item() == 0 and logabs.item() == -math.inf
    assert ember.linalg.matrix_rank(e).item() == 1
    close(ember.linalg.pinv(e), torch.linalg.pinv(t))
    close(ember.linalg.lstsq(e, ember.ones(2, 1, dtype=ember.float64)).solution,
          torch.linalg.lstsq(t, torch.ones(2, 1, dtype=torch.float64), driver="gelsd").solution)


def test_not_positive_definite():
    A = [[1.0, 2.0], [2.0, 1.0]]
    with pytest.raises(RuntimeError) as want:
        torch.linalg.cholesky(torch.tensor(A))
    with pytest.raises(RuntimeError, match="not positive-definite") as got:
        ember.linalg.cholesky(ember.tensor(A))
    assert "order 2" in str(got.value) and "order 2" in str(want.value)


def test_ill_conditioned_hilbert():
    n = 10
    h = np.array([[1.0 / (i + j + 1) for j in range(n)] for i in range(n)])
    e, t = ember.from_numpy(h), torch.from_numpy(h)
    close(ember.linalg.svdvals(e), torch.linalg.svdvals(t), rtol=1e-6, atol=1e-15)
    close(ember.linalg.eigvalsh(e), torch.linalg.eigvalsh(t), rtol=1e-5, atol=1e-15)
    close(ember.linalg.det(e), torch.linalg.det(t), rtol=1e-5, atol=0)
    assert ember.linalg.matrix_rank(e).item() == torch.linalg.matrix_rank(t).item()
    close(ember.linalg.cholesky(e), torch.linalg.cholesky(t), rtol=1e-8, atol=1e-12)


def test_non_finite_inputs_to_iterative_routines():
    A = ember.tensor([[1.0, float("nan")], [0.0, 1.0]])
    for fn in (ember.linalg.svd, ember.linalg.eigh, ember.linalg.svdvals):
        with pytest.raises(RuntimeError, match="non-finite"):
            fn(A)


@pytest.mark.parametrize("call", [
    lambda m: m.linalg.inv(m.ones(2, 3)),
    lambda m: m.linalg.det(m.ones(3)),
    lambda m: m.linalg.solve(m.ones(3, 3), m.ones(4, 2)),
    lambda m: m.linalg.eigh(m.ones(2, 2), UPLO="X"),
    lambda m: m.linalg.qr(m.ones(2, 2), mode="thin"),
    lambda m: m.linalg.cross(m.ones(4), m.ones(4)),
    lambda m: m.linalg.matrix_norm(m.ones(3, 3), ord=3),
    lambda m: m.cdist(m.ones(3, 2), m.ones(3, 4)),
], ids=lambda f: "")
def test_errors_as_torch(call):
    with pytest.raises(RuntimeError):
        call(torch)
    with pytest.raises(RuntimeError):
        call(ember)


# ---------------------------------------------------------------- compositions

@pytest.mark.parametrize("ord", [None, 2, 1, -1, math.inf, -math.inf, "fro", "nuc", -2, 0, 3.5])
def test_norms(ord):
    e, t = mat((3, 4, 5), seed=6)
    v, tv = e[0, 0], t[0, 0]
    if not isinstance(ord, str) and ord not in (-2,):
        close(ember.linalg.vector_norm(e, ord if ord is not None else 2),
              torch.linalg.vector_norm(t, ord if ord is not None else 2))
        close(ember.linalg.vector_norm(e, ord if ord is not None else 2, dim=(0, 2), keepdim=True),
              torch.linalg.vector_norm(t, ord if ord is not None else 2, dim=(0, 2), keepdim=True))
        close(ember.linalg.norm(v, ord), torch.linalg.norm(tv, ord))
    if ord in ("fro", "nuc", 2, -2, 1, -1, math.inf, -math.inf):
        close(ember.linalg.matrix_norm(e, ord), torch.linalg.matrix_norm(t, ord))
        close(ember.linalg.matrix_norm(e, ord, dim=(0, 2), keepdim=True),
              torch.linalg.matrix_norm(t, ord, dim=(0, 2), keepdim=True))
        close(ember.linalg.norm(e[0], ord), torch.linalg.norm(t[0], ord))
    close(ember.linalg.norm(e), torch.linalg.norm(t))


def test_cross_matrix_power_cdist():
    a, ta = mat((4, 3), seed=7)
    b, tb = mat((1, 3), seed=8)
    close(ember.linalg.cross(a, b), torch.linalg.cross(ta, tb))
    close(ember.cross(a.mT.contiguous(), b.mT.expand(3, 4).contiguous()),
          torch.cross(ta.mT.contiguous(), tb.mT.expand(3, 4).contiguous()))
    m, tm = mat((2, 3, 3), seed=9, shift=2.0)
    for n in (0, 1, 2, 5, -1, -3):
        close(ember.linalg.matrix_power(m, n), torch.linalg.matrix_power(tm, n), rtol=1e-9)
    x1, t1 = mat((2, 30, 4), seed=10)
    x2, t2 = mat((2, 20, 4), seed=11)
    for p in (2.0, 1.0, 0.5, math.inf, 0.0):
        close(ember.cdist(x1, x2, p), torch.cdist(t1, t2, p), rtol=1e-8)
    close(ember.cdist(x1[0, :5], x2[0, :6]), torch.cdist(t1[0, :5], t2[0, :6]))


def test_gradients_of_compositions_match_torch():
    fns = [
        lambda m, a: m.linalg.pinv(a),
        lambda m, a: m.linalg.matrix_norm(a, "nuc"),
        lambda m, a: m.linalg.norm(a, 2),
        lambda m, a: m.linalg.lstsq(a, a[:, :1] * 2 + 1).solution,
        lambda m, a: m.cdist(a, a.flip(0) + 1),
        lambda m, a: m.cdist(a, a.flip(0) + 1, 1.0),
        lambda m, a: m.linalg.cross(a[:, :3], a[:, 1:]),
        lambda m, a: m.logdet(a[:3, :3] @ a[:3, :3].mT + m.eye(3, dtype=m.float64)),
    ]
    v = np.random.default_rng(12).standard_normal((5, 4))
    for fn in fns:
        grads = []
        for m in (ember, torch):
            a = m.tensor(v, dtype=m.float64, requires_grad=True)
            out = fn(m, a)
            seed = np.random.default_rng(13).standard_normal(tuple(out.shape))
            out.backward(m.tensor(seed, dtype=m.float64))
            grads.append(a.grad.numpy())
        np.testing.assert_allclose(grads[0], grads[1], rtol=1e-7, atol=1e-9)


# ---------------------------------------------------------------- compiled

def test_compiled_linalg_matches_eager():
    def f(a, b):
        x = ember.linalg.solve(a, b)
        s = ember.linalg.svdvals(a)
        l = ember.linalg.cholesky(a @ a.mT + ember.eye(4))
        return x.sum(0), s * 2, l.exp(), ember.linalg.det(a) + ember.linalg.inv(a).sum()

    a, _ = mat((4, 4), "float32", shift=3.0)
    b, _ = mat((4, 2), "float32", seed=1)
    cf = ember.compile(f)
    for _ in range(2):
        for got, want in zip(cf(a, b), f(a, b)):
            np.testing.assert_array_equal(got.numpy(), want.numpy())
    stats = cf._stats()
    assert stats["hits"] >= 1 and stats["eager_calls"] == 0, stats
