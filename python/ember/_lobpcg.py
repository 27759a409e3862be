"""lobpcg, as torch.lobpcg: the k largest (or smallest) eigenpairs of a
symmetric A, or of the generalized problem A x = lambda B x with B
symmetric positive definite, by the locally optimal block preconditioned
conjugate gradient method (Knyazev 2001).

Each step takes the Rayleigh-Ritz solution on the span of the current
vectors X, their residuals R = A X - B X Lambda (preconditioned by iK when
given) and the previous step's direction P. That span is made B-orthonormal
by SVQB (an eigendecomposition of its Gram matrix, dropping the directions
whose weight falls below the dtype's precision), so a rank-deficient block
loses a direction rather than the run. It stops once every wanted residual
is below tol times the largest Ritz value's magnitude, or after niter steps
(-1: until then). Eigenvalues come largest first (largest=True, the
default), smallest first otherwise, as PyTorch orders them."""

import math

from . import _C, _creation, _ops

__all__ = ["lobpcg"]


def _eigh(H):
    from .linalg import eigh
    return eigh((H + H.transpose(-2, -1)) * 0.5)


def _b_orthonormal(S, B, eps):
    """An orthonormal basis (in B's inner product) of S's columns' span."""
    BS = S if B is None else B @ S
    w, V = _eigh(S.transpose(0, 1) @ BS)
    keep = w > eps * max(float(w.max()), 0.0) * S.shape[1]
    if not bool(keep.any()):
        return S[:, :0]
    idx = keep.nonzero().reshape(-1)
    V, w = V.index_select(1, idx), w.index_select(0, idx)
    return S @ (V / w.sqrt())


def lobpcg(A, k=None, B=None, X=None, n=None, iK=None, niter=None, tol=None, largest=None, method=None,
           tracker=None, ortho_iparams=None, ortho_fparams=None, ortho_bparams=None):
    if A.ndim > 2:  # a batch: each matrix alone
        pairs = [lobpcg(A[i], k, None if B is None else B[i], None if X is None else X[i], n,
                        None if iK is None else iK[i], niter, tol, largest, method, tracker)
                 for i in range(A.shape[0])]
        return _ops.stack([p[0] for p in pairs]), _ops.stack([p[1] for p in pairs])
    if A.ndim != 2 or A.shape[0] != A.shape[1]:
        raise ValueError(f"lobpcg: A must be a square matrix (or a batch of them), got shape {list(A.shape)}")
    if not A.dtype.is_floating_point:
        raise ValueError(f"lobpcg: A must be floating point, got {A.dtype}")
    m = A.shape[0]
    k = (1 if X is None else X.shape[-1]) if k is None else k
    n = (k if X is None else X.shape[-1]) if n is None else n
    if m < 3 * n:
        raise ValueError(f"LPBPCG algorithm is not applicable when the number of A rows (={m}) is smaller than 3 "
                         f"x the number of requested eigenpairs (={n})")
    if n < k:
        raise ValueError(f"lobpcg: n (={n}) must be at least k (={k})")
    largest = True if largest is None else largest
    niter = 1000 if niter is None else niter
    eps = 1.1920928955078125e-07 if A.dtype != _C.float64 else 2.220446049250313e-16
    tol = math.sqrt(eps) if tol is None else tol
    sign = 1.0 if largest else -1.0
    Am = A * sign  # the largest of sign * A's eigenvalues are the ones wanted
    X = _creation.randn(m, n, dtype=A.dtype) if X is None else X.to(A.dtype)
    X = _b_orthonormal(X, B, eps)
    P = None
    theta = None
    it = 0
    while niter < 0 or it <= niter:
        S = X if P is None else _ops.cat([X, P], 1)
        BX = X if B is None else B @ X
        if theta is not None:
            R = Am @ X - BX * theta
            scale = max(float(theta.abs().max()), 1e-30)
            rnorm = R.norm(dim=0)[:k]
            if bool((rnorm <= tol * scale).all()):
                break
            if iK is not None:
                R = iK @ R
            S = _ops.cat([S, R], 1)
        it += 1
        Q = _b_orthonormal(S, B, eps)
        w, C = _eigh(Q.transpose(0, 1) @ (Am @ Q))
        top = _creation.arange(w.shape[0] - 1, w.shape[0] - 1 - min(n, w.shape[0]), -1)
        theta = w.index_select(0, top)
        X_new = Q @ C.index_select(1, top)
        # the step's direction: what X_new adds to X, B-orthogonal to X
        coeff = X.transpose(0, 1) @ (X_new if B is None else B @ X_new)
        P = X_new - X @ coeff
        X = X_new
    values = theta[:k] * sign
    return values, X[:, :k]
