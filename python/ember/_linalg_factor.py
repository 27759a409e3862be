"""Factorizations in LAPACK's packed forms, as PyTorch exposes them: LU
with partial pivoting (linalg.lu_factor(_ex), lu, lu_solve, lu_unpack and
torch's older lu/lu_solve), Householder QR (geqrf, householder_product =
orgqr, ormqr), and the Cholesky-based and triangular helpers of torch's
older API (cholesky, cholesky_solve, cholesky_inverse, triangular_solve,
qr, symeig).

The factorizations are column loops of ember ops over the whole batch,
following LAPACK's unblocked algorithms (getf2: the first largest pivot of
each column; geqr2: dlarfg's reflectors, beta = -sign(alpha) ||x||), so
their packed results are LAPACK's and PyTorch's, they differentiate
through the ops they are made of, and they trace. Each step touches the
whole matrix under masks: O(n) steps of O(mn) work.
"""

import collections

from . import _C, _creation, _ops
from ._tensor import Tensor

_LU = collections.namedtuple("linalg_lu_factor", ["LU", "pivots"])
_LU_EX = collections.namedtuple("linalg_lu_factor_ex", ["LU", "pivots", "info"])
_PLU = collections.namedtuple("linalg_lu", ["P", "L", "U"])
_UNPACK = collections.namedtuple("lu_unpack", ["P", "L", "U"])
_LU_INFO = collections.namedtuple("_lu_with_info", ["LU", "pivots", "info"])
_GEQRF = collections.namedtuple("geqrf", ["a", "tau"])
_TRI = collections.namedtuple("triangular_solve", ["solution", "cloned_coefficient"])
_SYMEIG = collections.namedtuple("symeig", ["eigenvalues", "eigenvectors"])
_QR = collections.namedtuple("qr", ["Q", "R"])
for _t in (_LU, _LU_EX, _PLU, _UNPACK, _LU_INFO, _GEQRF, _TRI, _SYMEIG, _QR):
    _t.__module__ = "ember.return_types"


def _matrix(A, name):
    if not isinstance(A, Tensor) or A.ndim < 2:
        raise RuntimeError(f"{name}: The input tensor A must have at least 2 dimensions.")
    if not A.dtype.is_floating_point:
        raise RuntimeError(f"{name}: Expected a floating point tensor, got {A.dtype}")
    return A


def _index(n, shape_len, at):
    """arange(n) shaped to broadcast along dim `at` of a tensor of shape_len dims."""
    return _creation.arange(n).reshape([n if d == shape_len + at else 1 for d in range(shape_len)])


# ---------------------------------------------------------------- LU

def _getf2(A):
    """(LU, pivots (1-based, int32), info): LAPACK's getf2 on every matrix of A."""
    m, n = A.shape[-2], A.shape[-1]
    k = min(m, n)
    nd = A.ndim
    rows, cols = _index(m, nd, -2), _index(n, nd, -1)
    batch = tuple(A.shape[:-2])
    perm = _creation.arange(m).expand(batch + (m,))
    pivots, info = [], _creation.zeros(batch, dtype=_C.int32)
    for j in range(k):
        col = A[..., :, j]
        cand = _ops.where(_creation.arange(m) >= j, col.abs(), _creation.full_like(col, -1.0))
        cand = _ops.where(cand.isnan(), _creation.full_like(cand, float("inf")), cand)  # (NaN is a pivot: idamax's)
        p = cand.argmax(-1)  # (the first largest, as idamax)
        pivots.append(p + 1)
        # swap rows j and p (of every matrix, and of the permutation)
        r = _creation.arange(m)
        swap = _ops.where(r == j, p.unsqueeze(-1), _ops.where(r == p.unsqueeze(-1), _creation.full_like(
            p.unsqueeze(-1), j), r))
        A = A.gather(-2, swap.unsqueeze(-1).expand(A.shape))
        perm = perm.gather(-1, swap)
        piv = A[..., j, j]
        zero = piv == 0
        info = _ops.where(zero & (info == 0), _creation.full_like(info, j + 1), info)
        safe = _ops.where(zero, _creation.ones_like(piv), piv)
        lcol = _ops.where(rows > j, A[..., :, j:j + 1] / safe.unsqueeze(-1).unsqueeze(-1),
                          _creation.zeros_like(A[..., :, j:j + 1]))  # (m, 1) multipliers below j
        urow = _ops.where(cols > j, A[..., j:j + 1, :], _creation.zeros_like(A[..., j:j + 1, :]))  # (1, n)
        A = _ops.where((rows > j) & (cols == j), lcol.expand(A.shape), A - lcol * urow)
    piv_t = _ops.stack(pivots, -1).to(_C.int32) if pivots else _creation.zeros(batch + (0,), dtype=_C.int32)
    return A, piv_t, info


def lu_factor_ex(A, *, pivot=True, check_errors=False):
    """(LU, pivots, info): A = P L U with L unit lower and U upper packed in
    LU, pivots the 1-based rows swapped at each step (LAPACK's getrf), info
    the first zero pivot (1-based; 0 when none)."""
    _matrix(A, "linalg.lu_factor_ex")
    if not pivot:
        raise RuntimeError("linalg.lu_factor: LU without pivoting is not implemented on the CPU")
    LU, piv, info = _getf2(A)
    if check_errors and not info.is_meta and bool((info > 0).any()):  # (meta: no values to check)
        from .linalg import LinAlgError
        raise LinAlgError(f"linalg.lu_factor_ex: U[{int(info.max())},{int(info.max())}] is zero, singular U.")
    return _LU_EX(LU, piv, info)


def lu_factor(A, *, pivot=True):
    """(LU, pivots) of lu_factor_ex; a singular matrix is allowed (PyTorch
    raises only from the solvers)."""
    LU, piv, _ = lu_factor_ex(A, pivot=pivot)
    return _LU(LU, piv)


def _permutation(pivots, m):
    """The row order (..., m) the swaps in pivots make (row i of P^T A is row
    order[i] of A)."""
    order = _creation.arange(m).expand(tuple(pivots.shape[:-1]) + (m,))
    r = _creation.arange(m)
    for j in range(pivots.shape[-1]):
        p = (pivots[..., j].long() - 1).unsqueeze(-1)
        swap = _ops.where(r == j, p, _ops.where(r == p, _creation.full_like(p, j), r))
        order = order.gather(-1, swap)
    return order


def lu_unpack(LU_data, LU_pivots, unpack_data=True, unpack_pivots=True):
    """(P, L, U) from lu_factor's packed form: A = P L U."""
    m, n = LU_data.shape[-2], LU_data.shape[-1]
    k = min(m, n)
    empty = _creation.zeros(0, dtype=LU_data.dtype)
    if unpack_data:
        L = LU_data[..., :, :k].tril(-1) + _creation.eye(m, k, dtype=LU_data.dtype)
        U = LU_data[..., :k, :].triu()
    else:
        L = U = empty
    if unpack_pivots:
        order = _permutation(LU_pivots, m)
        eye = _creation.eye(m, dtype=LU_data.dtype)
        P = eye[order].mT  # (P^T A)[i] = A[order[i]]
    else:
        P = empty
    return _UNPACK(P, L, U)


def lu(A, *, pivot=True):
    """(P, L, U) with A = P L U (linalg.lu)."""
    LU, piv = lu_factor(A, pivot=pivot)
    return _PLU(*lu_unpack(LU, piv))


def lu_solve(LU, pivots, B, *, left=True, adjoint=False):
    """The solution X of A X = B (or X A = B with left=False; A^H with
    adjoint) from A's lu_factor."""
    from .linalg import solve_triangular
    if not left:  # X A = B  <=>  A^T X^T = B^T
        return lu_solve(LU, pivots, B.mT, left=True, adjoint=not adjoint).mT
    m = LU.shape[-1]
    order = _permutation(pivots, m)
    batch = tuple(_ops.broadcast_shapes(tuple(order.shape[:-1]), tuple(B.shape[:-2])))
    B = B.expand(batch + tuple(B.shape[-2:]))

    def rows_of(X, idx):
        idx = idx.expand(batch + (m,)).unsqueeze(-1).expand(batch + (m, X.shape[-1]))
        return X.gather(-2, idx)
    if not adjoint:  # L U X = P^T B
        y = solve_triangular(LU, rows_of(B, order), upper=False, unitriangular=True)
        return solve_triangular(LU, y, upper=True)
    # A^T X = B: U^T L^T P^T X = B
    y = solve_triangular(LU.mT, B, upper=False)
    z = solve_triangular(LU.mT, y, upper=True, unitriangular=True)
    return rows_of(z, order.argsort(-1))


def torch_lu(A, pivot=True, get_infos=False):
    """torch.lu (deprecated): (LU, pivots) or, with get_infos, (LU, pivots,
    infos); without get_infos a singular matrix raises, as PyTorch's."""
    LU, piv, info = lu_factor_ex(A, pivot=pivot)
    if get_infos:
        return _LU_INFO(LU, piv, info)
    if bool((info > 0).any()):
        from .linalg import LinAlgError
        raise LinAlgError("torch.lu: the factorization could not be completed because the input is singular")
    return LU, piv


def torch_lu_solve(b, LU_data, LU_pivots):
    """torch.lu_solve (deprecated): linalg.lu_solve with its arguments in
    the older order."""
    return lu_solve(LU_data, LU_pivots, b)


# ---------------------------------------------------------------- Householder QR

def _reflector(x0, rest_norm2):
    """dlarfg for a column whose first entry is x0 and whose rest has squared
    norm rest_norm2: (beta, tau, scale) with H = I - tau v v^T, v = [1,
    rest * scale]; no reflection (tau 0) where the rest is zero."""
    norm = (x0 * x0 + rest_norm2).sqrt()
    beta = _ops.where(x0 >= 0, -norm, norm)
    none = rest_norm2 == 0
    safe_beta = _ops.where(none, _creation.ones_like(beta), beta)
    tau = _ops.where(none, _creation.zeros_like(beta), (beta - x0) / safe_beta)
    denom = _ops.where(none, _creation.ones_like(x0), x0 - beta)
    return _ops.where(none, x0, beta), tau, 1.0 / denom


def geqrf(input):
    """(a, tau): the QR factorization in LAPACK's form (geqrf): R on and
    above the diagonal of a, the Householder vectors below it, their scalars
    in tau."""
    A = _matrix(input, "geqrf")
    m, n = A.shape[-2], A.shape[-1]
    k = min(m, n)
    nd = A.ndim
    rows, cols = _index(m, nd, -2), _index(n, nd, -1)
    taus = []
    for j in range(k):
        col = A[..., :, j:j + 1]  # (m, 1)
        below = _ops.where(rows > j, col, _creation.zeros_like(col))
        x0 = A[..., j, j]
        beta, tau, scale = _reflector(x0, (below * below).sum((-2, -1)))
        v = _ops.where(rows == j, _creation.ones_like(col), below * scale.unsqueeze(-1).unsqueeze(-1))  # (m, 1)
        # H A[:, j+1:] = A - tau v (v^T A)
        right = cols > j
        w = (v * A).sum(-2, keepdim=True)  # (1, n)
        updated = A - tau.unsqueeze(-1).unsqueeze(-1) * v * w
        A = _ops.where(right, updated, A)
        A = _ops.where((cols == j) & (rows > j), v.expand(A.shape), A)
        A = _ops.where((cols == j) & (rows == j), beta.unsqueeze(-1).unsqueeze(-1).expand(A.shape), A)
        taus.append(tau)
    tau = _ops.stack(taus, -1) if taus else _creation.zeros(tuple(A.shape[:-2]) + (0,), dtype=A.dtype)
    return _GEQRF(A, tau)


def _apply_reflectors(V, tau, C, left, transpose):
    """H_1 ... H_k applied to C from the left (Q C), transposed (Q^T C), or
    from the right (C Q, C Q^T); H_i = I - tau_i v_i v_i^T with v_i column
    i of V below the diagonal and 1 on it."""
    m = V.shape[-2]
    k = tau.shape[-1]
    nd = V.ndim
    rows = _index(m, nd, -2)
    order = range(k) if (left == transpose) else range(k - 1, -1, -1)
    for i in order:
        col = V[..., :, i:i + 1]
        v = _ops.where(rows == i, _creation.ones_like(col), _ops.where(rows > i, col, _creation.zeros_like(col)))
        t = tau[..., i].unsqueeze(-1).unsqueeze(-1)
        if left:
            C = C - t * v * (v * C).sum(-2, keepdim=True)
        else:
            C = C - t * (C @ v) * v.mT
    return C


def householder_product(A, tau):
    """Q's first n columns from geqrf's (a, tau) (LAPACK's orgqr):
    H_1 ... H_k applied to the identity."""
    _matrix(A, "linalg.householder_product")
    m, n = A.shape[-2], A.shape[-1]
    if tau.shape[-1] > n:
        raise RuntimeError(f"torch.linalg.householder_product: input.shape[-1] must be greater than or equal to "
                           f"tau.shape[-1]")
    eye = _creation.eye(m, n, dtype=A.dtype).expand(A.shape)
    if tau.shape[-1] == 0:  # (the identity, still A's result for autograd, as PyTorch's)
        return _ops.where(_creation.zeros(tuple(A.shape), dtype=_C.bool), A, eye)
    return _wide(_apply_reflectors)(A, tau, eye, True, False)


def ormqr(input, tau, other, left=True, transpose=False):
    """Q other, Q^T other (transpose), other Q or other Q^T (left=False), Q
    from geqrf's (input, tau)."""
    return _wide(_apply_reflectors)(input, tau, other, left, transpose)


def _wide(fn):
    """fn on float64 copies of float32 tensors, rounded back: the products
    of many reflectors lose digits in float32 (more than LAPACK's do)."""
    def run(*args):
        narrow = [a for a in args if isinstance(a, Tensor) and a.dtype in (_C.float32, _C.float16, _C.bfloat16)]
        if not narrow:
            return fn(*args)
        dt = narrow[0].dtype
        out = fn(*[a.double() if isinstance(a, Tensor) and a.dtype.is_floating_point else a for a in args])
        return out.to(dt)
    return run


# ---------------------------------------------------------------- torch's older API

def cholesky(input, upper=False):
    """torch.cholesky (deprecated): linalg.cholesky, U = L^T with upper."""
    from .linalg import cholesky as _cholesky
    return _cholesky(input, upper=upper)


def cholesky_solve(input, input2, upper=False):
    """The solution X of A X = input with A = L L^T (input2 = L, or U with
    upper: A = U^T U)."""
    from .linalg import solve_triangular
    if upper:
        y = solve_triangular(input2.mT, input, upper=False)
        return solve_triangular(input2, y, upper=True)
    y = solve_triangular(input2, input, upper=False)
    return solve_triangular(input2.mT, y, upper=True)


def cholesky_inverse(input, upper=False):
    """A^-1 from A's Cholesky factor."""
    n = input.shape[-1]
    eye = _creation.eye(n, dtype=input.dtype).expand(input.shape)
    return cholesky_solve(eye, input, upper)


def triangular_solve(input, A, upper=True, transpose=False, unitriangular=False):
    """(solution, cloned_coefficient): X with A X = input (A^T X with
    transpose), A triangular."""
    from .linalg import solve_triangular
    coefficient = A.mT if transpose else A
    X = solve_triangular(coefficient, input, upper=upper != transpose, unitriangular=unitriangular)
    return _TRI(X, A.clone())


def torch_qr(input, some=True):
    """torch.qr (deprecated): linalg.qr, reduced unless some=False."""
    from .linalg import qr as _qr
    Q, R = _qr(input, mode="reduced" if some else "complete")
    return _QR(Q, R)


def symeig(input, eigenvectors=False, upper=True):
    """torch.symeig (deprecated): linalg.eigh of the upper (or lower)
    triangle; without eigenvectors the second result is empty."""
    from .linalg import eigh
    w, V = eigh(input, UPLO="U" if upper else "L")
    return _SYMEIG(w, V if eigenvectors else _creation.zeros(0, dtype=input.dtype))


def _linalg_factor_top_level():
    """What ember's top level (and Tensor, as methods) take from here, under
    torch's names."""
    return {"lu": torch_lu, "lu_solve": torch_lu_solve, "lu_unpack": lu_unpack, "geqrf": geqrf,
            "orgqr": householder_product, "ormqr": ormqr, "cholesky": cholesky, "cholesky_solve": cholesky_solve,
            "cholesky_inverse": cholesky_inverse, "triangular_solve": triangular_solve, "qr": torch_qr,
            "symeig": symeig}


# ---------------------------------------------------------------- LDL^T (LAPACK's sytrf, in the op table)

_LDL = collections.namedtuple("linalg_ldl_factor", ["LD", "pivots"])
_LDL_EX = collections.namedtuple("linalg_ldl_factor_ex", ["LD", "pivots", "info"])
_LDL.__module__ = _LDL_EX.__module__ = "ember.return_types"


def ldl_factor_ex(A, *, hermitian=False, check_errors=False):
    """(LD, pivots, info): the Bunch-Kaufman factorization A = P L D L^T P^T
    of a symmetric matrix (its lower triangle read), in LAPACK's sytrf form;
    info > 0 where D has an exact zero. Not differentiable (nor is
    PyTorch's)."""
    _matrix(A, "linalg.ldl_factor_ex")
    from ._ops import _ID
    LD, pivots, info = _C._op(_ID["ldl_factor"], [A], {})
    if check_errors and not info.is_meta and bool((info > 0).any()):  # (meta: no values to check)
        from .linalg import LinAlgError
        raise LinAlgError(f"torch.linalg.ldl_factor_ex: The factorization could not be completed because the "
                          f"input is singular (D[{int(info.max())}] is zero)")
    return _LDL_EX(LD, pivots, info)


def ldl_factor(A, *, hermitian=False):
    """(LD, pivots) of ldl_factor_ex; a singular D raises LinAlgError."""
    LD, pivots, _ = ldl_factor_ex(A, hermitian=hermitian, check_errors=True)
    return _LDL(LD, pivots)


def ldl_solve(LD, pivots, B, *, hermitian=False):
    """The solution X of A X = B from ldl_factor's (LD, pivots) (LAPACK's sytrs)."""
    from ._ops import _ID
    batch = tuple(_ops.broadcast_shapes(tuple(LD.shape[:-2]), tuple(B.shape[:-2])))
    n = LD.shape[-1]
    return _C._op(_ID["ldl_solve"], [LD.expand(batch + (n, n)), pivots.expand(batch + (n,)),
                                     B.expand(batch + tuple(B.shape[-2:]))], {})
