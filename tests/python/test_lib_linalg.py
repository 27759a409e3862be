"""Linear algebra against PyTorch: matmul's broadcasting for 1-D/2-D/N-D,
mm, bmm, mv, addmm, baddbmm, outer, dot, einsum, on transposed and strided
operands and every dtype matmul takes."""

import numpy as np
import pytest

import ember
from torchdiff import arr, check, raises_like_torch

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")

MATMUL_SHAPES = [((3,), (3,)), ((2, 3), (3,)), ((3,), (3, 4)), ((2, 3), (3, 4)),
                 ((5, 2, 3), (3, 4)), ((2, 3), (5, 3, 4)), ((5, 2, 3), (5, 3, 4)),
                 ((1, 2, 3), (5, 3, 4)), ((2, 1, 2, 3), (3, 3, 2)), ((3,), (5, 3, 4)),
                 ((5, 2, 3), (3,)), ((0, 3), (3, 4)), ((2, 0), (0, 4)), ((2, 3), (3, 0))]


@pytest.mark.parametrize("sa,sb", MATMUL_SHAPES, ids=str)
@pytest.mark.parametrize("dtype", ["float32", "float64", "int64", "int32", "bfloat16", "float16",
                                   "uint8"])
def test_matmul_shapes(sa, sb, dtype):
    tol = dict(rtol=1e-5, atol=1e-5) if dtype == "float32" else {}
    if dtype in ("bfloat16", "float16"):
        # ember accumulates half types in float32 and rounds once; PyTorch
        # 1.13's batched kernel rounds as it goes, so compare with float32
        def f32_then_round(m, a, b):
            return m.matmul(a, b) if m is ember else m.matmul(a.float(), b.float()).to(a.dtype)
        check(f32_then_round, arr(dtype, sa), arr(dtype, sb, seed=1))
        return
    check(lambda m, a, b: m.matmul(a, b), arr(dtype, sa), arr(dtype, sb, seed=1), **tol)
    check(lambda m, a, b: a @ b, arr(dtype, sa), arr(dtype, sb, seed=1), **tol)


STRIDED = [
    ("a.T", (4, 3), (4, 5), lambda m, a, b: a.t() @ b),
    ("b.T", (3, 4), (5, 4), lambda m, a, b: a @ b.t()),
    ("both.T", (4, 3), (5, 4), lambda m, a, b: a.t() @ b.t()),
    ("sliced rows", (6, 4), (4, 5), lambda m, a, b: a[::2] @ b),
    ("sliced cols", (3, 8), (4, 5), lambda m, a, b: a[:, ::2] @ b),
    ("offset", (4, 5), (4, 3), lambda m, a, b: a[1:, 1:] @ b[:, :2].t().t()[:4] if False else a[:3, 1:] @ b),
    ("batched mT", (2, 4, 3), (2, 4, 5), lambda m, a, b: a.mT @ b),
    ("batch permuted", (3, 2, 4), (2, 4, 5), lambda m, a, b: a.permute(1, 0, 2) @ b),
    ("expanded batch", (1, 3, 4), (4, 5), lambda m, a, b: a.expand(6, 3, 4) @ b),
    ("vector strided", (4, 6), (6,), lambda m, a, b: a[:, ::2] @ b[::2]),
]


@pytest.mark.parametrize("dtype", ["float32", "float64", "int64"])
@pytest.mark.parametrize("name,sa,sb,fn", STRIDED, ids=[c[0] for c in STRIDED])
def test_matmul_strided(name, sa, sb, fn, dtype):
    check(fn, arr(dtype, sa), arr(dtype, sb, seed=1), rtol=1e-5, atol=1e-5)


def test_matmul_large_float32_accuracy():
    check(lambda m, a, b: a @ b, arr("float32", (128, 300)), arr("float32", (300, 64), seed=1),
          rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("sa,sb", [((3, 4), (5, 6)), ((4,), (5,)), ((2, 3), (2,)),
                                   ((2, 2, 3), (3, 3, 2)), ((), (3,)), ((3,), ())], ids=str)
def test_matmul_errors(sa, sb):
    raises_like_torch(lambda m, a, b: a @ b, arr("float32", sa), arr("float32", sb))


def test_matmul_mixed_dtypes_raise_like_torch():
    raises_like_torch(lambda m, a, b: a @ b, arr("float32", (2, 3)), arr("float64", (3, 2)))
    raises_like_torch(lambda m, a, b: a @ b, arr("int64", (2, 3)), arr("float32", (3, 2)))
    raises_like_torch(lambda m, a, b: a @ b, arr("bool", (2, 3)), arr("bool", (3, 2)))


def test_mm_bmm_mv_dot_outer():
    a, b = arr("float64", (3, 4)), arr("float64", (4, 5), seed=1)
    check(lambda m, a, b: m.mm(a, b), a, b)
    check(lambda m, a, b: a.mm(b), a, b)
    check(lambda m, a, v: m.mv(a, v), a, arr("float64", (4,), seed=2))
    check(lambda m, x, y: m.dot(x, y), arr("float64", (7,)), arr("float64", (7,), seed=1))
    check(lambda m, x, y: x.dot(y), arr("int64", (7,)), arr("int64", (7,), seed=1))
    check(lambda m, x, y: m.outer(x, y), arr("float32", (3,)), arr("float32", (4,), seed=1))
    check(lambda m, x, y: m.outer(x, y), arr("int64", (3,)), arr("float32", (4,), seed=1))
    check(lambda m, x, y: m.ger(x, y), arr("float32", (3,)), arr("float32", (4,), seed=1))
    check(lambda m, x, y: m.inner(x, y), arr("float64", (2, 3, 4)), arr("float64", (5, 4), seed=1))
    check(lambda m, x, y: m.inner(x, y), arr("float64", (4,)), arr("float64", (4,), seed=1))
    check(lambda m, x, y: m.inner(x, y), arr("float64", ()), arr("float64", (3, 2), seed=1))
    raises_like_torch(lambda m, x, y: m.inner(x, y), arr("float64", (4,)), arr("float64", (3,)))
    raises_like_torch(lambda m, x, v: m.mv(x, v), a, arr("float64", (5,)))
    p, q = arr("float64", (5, 3, 4)), arr("float64", (5, 4, 2), seed=1)
    check(lambda m, p, q: m.bmm(p, q), p, q)
    check(lambda m, p, q: p.bmm(q), p, q)
    raises_like_torch(lambda m, a: m.mm(a, a), a)
    raises_like_torch(lambda m, a, b: m.mm(a, b.reshape(20)), a, b)
    raises_like_torch(lambda m, p, q: m.bmm(p, q[:2]), p, q)
    raises_like_torch(lambda m, a, b: m.bmm(a, b), a, b)
    raises_like_torch(lambda m, x, y: m.dot(x, y), arr("float64", (7,)), arr("float64", (6,)))
    raises_like_torch(lambda m, a: m.dot(a, a), a)


@pytest.mark.parametrize("beta,alpha", [(1, 1), (0.5, 2.0), (0, 1), (1, -1)])
def test_addmm_baddbmm(beta, alpha):
    check(lambda m, c, a, b: m.addmm(c, a, b, beta=beta, alpha=alpha), arr("float64", (3, 5)),
          arr("float64", (3, 4), seed=1), arr("float64", (4, 5), seed=2))
    check(lambda m, c, a, b: m.addmm(c, a, b, beta=beta, alpha=alpha), arr("float64", (5,)),
          arr("float64", (3, 4), seed=1), arr("float64", (4, 5), seed=2))
    check(lambda m, c, a, b: c.addmm(a, b, beta=beta, alpha=alpha), arr("float64", (3, 5)),
          arr("float64", (3, 4), seed=1), arr("float64", (4, 5), seed=2))
    c, a, b = arr("float64", (2, 3, 5)), arr("float64", (2, 3, 4), seed=1), arr("float64", (2, 4, 5), seed=2)
    if beta != 0:
        check(lambda m, c, a, b: m.baddbmm(c, a, b, beta=beta, alpha=alpha), c, a, b)
        return
    # PyTorch 1.13's CPU baddbmm with beta=0 scales its uninitialised output
    # by zero (NaN garbage shows through, run to run): compare with NumPy
    got = ember.baddbmm(ember.tensor(c.values), ember.tensor(a.values), ember.tensor(b.values),
                        beta=0, alpha=alpha)
    np.testing.assert_allclose(got.numpy(), alpha * (a.values @ b.values), rtol=1e-12, atol=1e-14)


def test_addmm_beta_zero_ignores_nan():
    nan = arr("float64", (3, 5))
    nan.values = np.full((3, 5), np.nan)
    check(lambda m, c, a, b: m.addmm(c, a, b, beta=0), nan, arr("float64", (3, 4), seed=1),
          arr("float64", (4, 5), seed=2))


EINSUM = [
    ("ij,jk->ik", [(3, 4), (4, 5)]),
    ("ij,jk", [(3, 4), (4, 5)]),
    ("bij,bjk->bik", [(2, 3, 4), (2, 4, 5)]),
    ("bhqd,bhkd->bhqk", [(2, 3, 4, 5), (2, 3, 6, 5)]),
    ("bhqk,bhkd->bhqd", [(2, 3, 4, 6), (2, 3, 6, 5)]),
    ("ij->ji", [(3, 4)]),
    ("ij->", [(3, 4)]),
    ("ij->j", [(3, 4)]),
    ("i,i->", [(5,), (5,)]),
    ("i,j->ij", [(3,), (4,)]),
    ("bi,bi->b", [(3, 4), (3, 4)]),
    ("ij,kj->ik", [(3, 4), (5, 4)]),
    ("bnd,de->bne", [(2, 3, 4), (4, 5)]),
    ("ijk,ikl,ilm->ijm", [(2, 3, 4), (2, 4, 5), (2, 5, 3)]),
    ("...ij,...jk->...ik", [(2, 3, 3, 4), (2, 3, 4, 5)]),
    ("...ij,jk", [(2, 3, 4), (4, 5)]),
    ("i...->...", [(3, 2, 4)]),
    ("bi,i...->b...", [(2, 3), (3, 4, 5)]),
    ("ii->i", [(4, 4)]),
    ("ii", [(4, 4)]),
    ("iij->j", [(3, 3, 2)]),
    ("ab,ab,ab->a", [(3, 4), (3, 4), (3, 4)]),
    ("i,i,i->i", [(3,), (3,), (3,)]),
    ("ij,j->i", [(3, 4), (4,)]),
    ("ab,cd->abcd", [(2, 3), (4, 5)]),
    ("i,j", [(2,), (3,)]),
    ("ba,ac->bc", [(3, 4), (4, 1)]),
    ("ij,ij->ij", [(3, 1), (1, 4)]),
]


@pytest.mark.parametrize("eq,shapes", EINSUM, ids=[c[0] for c in EINSUM])
def test_einsum(eq, shapes):
    args = [arr("float64", s, seed=k) for k, s in enumerate(shapes)]
    check(lambda m, *ts: m.einsum(eq, *ts), *args)
    check(lambda m, *ts: m.einsum(eq, list(ts)), *args)


def test_einsum_on_views_and_float32():
    check(lambda m, a, b: m.einsum("ij,jk->ik", a.t(), b[:, ::2]), arr("float32", (4, 3)),
          arr("float32", (4, 10), seed=1), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("eq,shapes", [("ij,jk->ik", [(3, 4), (5, 6)]), ("ij->k", [(3, 4)]),
                                       ("ij,jk->ik", [(3, 4)]), ("ijk->ij", [(3, 4)]),
                                       ("i1->i", [(3, 4)])], ids=str)
def test_einsum_errors(eq, shapes):
    raises_like_torch(lambda m, *ts: m.einsum(eq, *ts), *[arr("float64", s) for s in shapes])
