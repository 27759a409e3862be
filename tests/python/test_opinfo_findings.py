"""What an outside run of PyTorch's OpInfo database through ember found
(issue 40, item 6), each case against PyTorch 1.13: first the wrong values
(the worst kind of bug), then the exceptions where PyTorch answers."""

import numpy as np
import pytest

import ember
from torchdiff import Arg, arr, check

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


def grad_of(fn):
    """fn(m, x)'s gradient with respect to x, summed to a scalar first."""
    def g(m, x):
        x = x.detach().clone().requires_grad_()
        fn(m, x).sum().backward()
        return x.grad
    return g


def _Fixed(a):
    """A fixed array as an input, in its own dtype."""
    a = np.asarray(a)
    return Arg(a, str(a.dtype))


# ---- wrong values ----

REPEATED = {  # singular values (or eigenvalues) that repeat
    "identity": np.eye(3),
    "scaled identity 2x2": 2.0 * np.eye(2),
    "rank 1": np.ones((3, 3)),
    "zero": np.zeros((2, 2)),
    "tall, repeated": np.vstack([np.eye(2), np.zeros((1, 2))]),
    "wide, repeated": np.hstack([np.eye(2), np.zeros((2, 1))]),
}


@pytest.mark.parametrize("name", sorted(REPEATED))
@pytest.mark.parametrize("op", ["linalg.pinv", "pinverse", "lstsq", "nuclear norm", "matrix 2-norm",
                                "svdvals", "eigvalsh"])
def test_gradients_where_singular_values_repeat_are_pytorchs(name, op):
    a = REPEATED[name]
    if op == "eigvalsh" and a.shape[0] != a.shape[1]:
        pytest.skip("eigvalsh takes square matrices")
    fns = {
        "linalg.pinv": lambda m, x: m.linalg.pinv(x) * m.arange(x.shape[1] * x.shape[0]).reshape(x.shape[1],
                                                                                                  x.shape[0]),
        "pinverse": lambda m, x: m.pinverse(x),
        "lstsq": lambda m, x: m.linalg.lstsq(x, m.ones(x.shape[0], 2, dtype=x.dtype)).solution,
        "nuclear norm": lambda m, x: m.linalg.matrix_norm(x, "nuc"),
        "matrix 2-norm": lambda m, x: m.linalg.matrix_norm(x + 0.5 * m.eye(*x.shape, dtype=x.dtype), 2),
        "svdvals": lambda m, x: m.linalg.svdvals(x) * m.arange(1, min(x.shape) + 1),
        "eigvalsh": lambda m, x: m.linalg.eigvalsh(x) * m.arange(1, x.shape[0] + 1),
    }
    if op == "matrix 2-norm" and name in ("identity", "scaled identity 2x2", "zero", "tall, repeated",
                                          "wide, repeated"):
        pytest.skip("the largest singular value repeats: which vector the gradient uses is unspecified")
    got = grad_of(fns[op])
    check(got, _Fixed(a), rtol=1e-7, atol=1e-7)
    assert np.isfinite(got(ember, ember.tensor(a)).numpy()).all()


def test_pinv_gradient_matches_pytorch_on_random_matrices():
    rng = np.random.default_rng(0)
    for shape in [(3, 3), (4, 2), (2, 5), (2, 3, 3)]:
        check(grad_of(lambda m, x: m.linalg.pinv(x) ** 2), _Fixed(rng.standard_normal(shape)),
              rtol=1e-7, atol=1e-9)


def test_pinv_hermitian_reads_only_the_lower_triangle():
    a = np.array([[2.0, 100.0], [1.0, 3.0]])  # upper triangle: garbage
    check(lambda m, x: m.linalg.pinv(x, hermitian=True), _Fixed(a))
    check(lambda m, x: m.linalg.pinv(x, hermitian=True), _Fixed(np.diag([1.0, 1e-20, -2.0])))
    check(grad_of(lambda m, x: m.linalg.pinv(x, hermitian=True)), _Fixed(np.array([[2.0, 0.5], [0.5, 3.0]])))


@pytest.mark.parametrize("s1,s2,dim", [((2, 2), (2, 1), 1), ((1, 3), (4, 3), 0), ((2, 1, 3), (1, 4, 3), 2),
                                       ((2, 1, 3), (1, 4, 3), 1), ((3,), (1,), 0)])
def test_cosine_similarity_broadcasts_before_the_norms(s1, s2, dim):
    check(lambda m, a, b: m.nn.functional.cosine_similarity(a, b, dim=dim),
          arr("float64", s1), arr("float64", s2, seed=1))
    check(grad_of(lambda m, a: m.nn.functional.cosine_similarity(a, a.new_ones(s2), dim=dim)),
          arr("float64", s1))


def test_clamp_with_a_nan_tensor_bound_is_nan_and_a_nan_number_bound_is_ignored():
    nan = float("nan")
    x = _Fixed(np.array([1.0, 2.0, nan, -3.0], dtype=np.float32))
    lo = _Fixed(np.array([nan, 0.0, 0.0, nan], dtype=np.float32))
    hi = _Fixed(np.array([5.0, nan, 5.0, 1.0], dtype=np.float32))
    check(lambda m, x, lo: m.clamp(x, min=lo), x, lo)
    check(lambda m, x, hi: m.clamp(x, max=hi), x, hi)
    check(lambda m, x, lo, hi: m.clamp(x, lo, hi), x, lo, hi)
    check(lambda m, x, lo, hi: x.clone().clamp_(lo, hi), x, lo, hi)
    check(lambda m, x: m.clamp(x, min=nan), x)
    check(lambda m, x: m.clamp(x, 0.0, nan), x)
    check(grad_of(lambda m, x: m.clamp(x, min=m.tensor([nan, 0.0, 0.0, 0.5]))),
          _Fixed(np.array([1.0, 2.0, 3.0, -3.0], dtype=np.float32)))


@pytest.mark.parametrize("dtype", ["int64", "int32", "uint8", "int8"])
def test_integer_activations_keep_their_dtype(dtype):
    check(lambda m, x: m.nn.functional.relu6(x), arr(dtype, (3, 5)))
    check(lambda m, x: m.nn.functional.hardtanh(x, -2, 3), arr(dtype, (3, 5)))
    check(lambda m, x: m.nn.ReLU6()(x), arr(dtype, (4,)))


@pytest.mark.parametrize("dtype", ["int64", "int32"])
def test_integer_addmm_and_baddbmm_keep_their_dtype(dtype):
    check(lambda m, c, a, b: m.addmm(c, a, b), arr(dtype, (2, 3)), arr(dtype, (2, 4)),
          arr(dtype, (4, 3)))
    check(lambda m, c, a, b: m.baddbmm(c, a, b, beta=2, alpha=3), arr(dtype, (2, 2, 3)),
          arr(dtype, (2, 2, 4)), arr(dtype, (2, 4, 3)))


def test_svd_full_matrices_gradient_on_a_non_square_matrix():
    a = np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 7.0]])
    check(grad_of(lambda m, x: m.linalg.svd(x, full_matrices=True).S), _Fixed(a))
    check(grad_of(lambda m, x: m.linalg.svd(x, full_matrices=True).U[:, :2].abs()), _Fixed(a))


def test_pinv_and_nuclear_norm_gradients_compile_to_eagers_values():
    def step(w):
        loss = (ember.linalg.pinv(w) ** 2).sum() + ember.linalg.matrix_norm(w, "nuc")
        loss.backward()
        return loss.detach()

    cf = ember.compile(step)
    for a in (np.eye(3), np.ones((3, 3)), np.random.default_rng(1).standard_normal((3, 3))):
        we, wc = (ember.tensor(a).requires_grad_() for _ in range(2))
        le, lc = step(we), cf(wc)
        np.testing.assert_allclose(lc.numpy(), le.numpy(), rtol=1e-12)
        np.testing.assert_allclose(wc.grad.numpy(), we.grad.numpy(), rtol=1e-10, atol=1e-12)
        assert np.isfinite(wc.grad.numpy()).all()
    assert cf._stats()["eager_calls"] == 0


# ---- exceptions where PyTorch answers ----

def _cofactor(a):
    """The cofactor matrix, entry by entry from minors, in float64."""
    n = a.shape[0]
    c = np.empty_like(a)
    for i in range(n):
        for j in range(n):
            minor = np.delete(np.delete(a, i, 0), j, 1)
            c[i, j] = (-1) ** (i + j) * (np.linalg.det(minor) if n > 1 else 1.0)
    return c


@pytest.mark.parametrize("a", [[[1.0, 2.0], [2.0, 4.0]], [[1.0, 2.0, 3.0], [2.0, 4.0, 6.0], [1.0, 0.0, 1.0]],
                               [[0.0, 0.0], [0.0, 0.0]], [[2.0, 1.0], [0.5, 3.0]]])
def test_det_gradient_is_the_cofactor_matrix_singular_or_not(a):
    """PyTorch 1.13 answers a singular matrix with zeros (its lu_solve path);
    the derivative of det is the cofactor matrix, non-zero at rank n-1, and
    that is what ember gives (and later PyTorch, through the SVD)."""
    a = np.array(a)
    x = ember.tensor(a).requires_grad_()
    ember.linalg.det(x).backward()
    np.testing.assert_allclose(x.grad.numpy(), _cofactor(a), atol=1e-12)
    if abs(np.linalg.det(a)) > 1e-6:
        check(grad_of(lambda m, x: m.linalg.det(x) * 3.0), _Fixed(a))
    check(grad_of(lambda m, x: m.det(x.unsqueeze(0).expand(2, *x.shape))), _Fixed(np.diag([2.0, 3.0])))


def test_matrix_rank_with_a_tolerance_per_matrix():
    eye = np.stack([np.eye(3), np.diag([1.0, 0.4, 0.1])])
    check(lambda m, a, r: m.linalg.matrix_rank(a, rtol=r), _Fixed(eye), _Fixed(np.array([0.5, 0.2])))
    check(lambda m, a, r: m.linalg.matrix_rank(a, atol=r), _Fixed(eye), _Fixed(np.array([0.5, 0.05])))
    check(lambda m, a, r: m.linalg.pinv(a, atol=r), _Fixed(eye), _Fixed(np.array([0.5, 0.2])))


def test_zero_sized_normalisations_and_flatten():
    check(lambda m, x: m.nn.functional.group_norm(x, 2), arr("float32", (0, 4, 3)))
    check(lambda m, x: x.flatten(), arr("float32", (0, 3)))
    check(lambda m, x: x.flatten(1), arr("float32", (2, 0, 3)))


def test_qr_and_nuclear_norm_gradients():
    check(grad_of(lambda m, x: m.linalg.qr(x).R * m.arange(3.0)), arr("float64", (2, 3)))
    check(grad_of(lambda m, x: m.linalg.qr(x).Q.abs() + m.linalg.qr(x).R.sum()), arr("float64", (2, 4), seed=3))
    check(grad_of(lambda m, x: m.norm(x, p="nuc")), arr("float64", (2, 3)))
    check(lambda m, x: m.norm(x, p="nuc", dim=(0, 2), keepdim=True), arr("float64", (2, 3, 4)))


def test_argument_forms_pytorch_accepts():
    check(lambda m, x: m.tensor_split(x, m.tensor(2)), arr("float32", (5,)))
    check(lambda m, x: m.tensor_split(x, m.tensor([1, 3]), dim=0), arr("float32", (5, 2)))
    check(lambda m, x: (m.std(x, True), m.var(x, False), x.std(False)), arr("float32", (4, 3)))
    check(lambda m, x: m.flip(x, dims=(0,)), arr("float32", (4,)))
    check(lambda m, x: (x.new_zeros((2,), device="cpu"), x.new_ones(2, device="cpu", requires_grad=False),
                        x.new_full((2,), 3.0, device="cpu"), x.new_empty(0, device="cpu"),
                        x.new_tensor([1, 2], device="cpu")), arr("float32", (3,)))
    check(lambda m, x: (x.to("cpu", m.float64, False, True), x.to(m.int32, False, False),
                        x.to(m.zeros(1, dtype=m.float64)), x.to("cpu", non_blocking=True)), arr("float32", (3,)))
    check(lambda m, x: m.add(2, x), arr("float32", (3,)))


def test_index_put_with_a_bool_mask():
    check(lambda m, x, k: x.index_put((k,), m.tensor(1.0)), arr("float32", (3, 2)), arr("bool", (3,)))
    check(lambda m, x, k: x.index_put((k,), m.tensor(1.0)), arr("float32", (3, 2)), arr("bool", (3, 2)))
    check(lambda m, x, k: x.clone().index_put_((k,), m.tensor(2.0), accumulate=True), arr("float32", (3,)),
          arr("bool", (3,)))
    with pytest.raises(IndexError, match=r"shape of the mask \[2\] at index 0 does not match"):
        ember.zeros(3).index_put((ember.tensor([True, False]),), ember.tensor(1.0))


@pytest.mark.parametrize("kwargs", [{}, {"some": False}, {"compute_uv": False}, {"some": False, "compute_uv": False}])
@pytest.mark.parametrize("shape", [(3, 2), (2, 4), (2, 3, 3)])
def test_torch_svd_returns_v_not_vh(shape, kwargs):
    """torch.svd (not linalg.svd): V, some and compute_uv, as PyTorch's
    (V's signs compared through |V|: PyTorch leaves them unspecified)."""
    a = np.random.default_rng(0).standard_normal(shape)
    check(lambda m, x: [t.abs() for t in m.svd(x, **kwargs)], _Fixed(a))
    U, S, V = ember.svd(ember.tensor(a))
    np.testing.assert_allclose(((U * S.unsqueeze(-2)) @ V.transpose(-2, -1)).numpy(), a, atol=1e-12)


def test_lstsq_drivers_give_what_pytorchs_give():
    a, b = np.random.default_rng(0).standard_normal((5, 3)), np.random.default_rng(1).standard_normal((5, 2))
    for driver in (None, "gelsy", "gelsd", "gelss", "gels"):
        check(lambda m, x, y: [t.shape for t in m.linalg.lstsq(x, y, driver=driver)[1:]] +
              [m.linalg.lstsq(x, y, driver=driver).solution], _Fixed(a), _Fixed(b))
    with pytest.raises(RuntimeError, match="parameter `driver` should be one of"):
        ember.linalg.lstsq(ember.tensor(a), ember.tensor(b), driver="nope")
