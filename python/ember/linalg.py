"""ember.linalg: PyTorch's torch.linalg on the LAPACK that OpenBLAS ships.

inv, solve, solve_triangular, det, slogdet, cholesky, qr, eigh and svd are
ops of the table (runtime/cpu/linalg.c) with backward formulas written in
ember ops (runtime/autograd/formulas.c), so they differentiate, trace and
batch over leading dims like any op. lstsq's forward is LAPACK's gelsd; a
call that needs its gradient goes through pinv, which is differentiable.
The rest (the norms, pinv, matrix_rank, cross, matrix_power, cdist) are
compositions. Singular and ill-conditioned inputs give PyTorch's errors
(RuntimeError) where PyTorch raises, and its values where it does not.
"""

import collections
import math
import numbers

from . import _C
from . import _ops
from ._creation import eye, ones_like, zeros_like
from ._ops import _ID
from ._tensor import Tensor  # noqa: F401 (torch.linalg.Tensor, as PyTorch's module has it)

__all__ = ["inv", "solve", "solve_triangular", "det", "slogdet", "cholesky", "qr", "eigh", "eigvalsh", "svd",
           "svdvals", "lstsq", "pinv", "matrix_rank", "norm", "vector_norm", "matrix_norm", "cross",
           "matrix_power"]

slogdet_result = collections.namedtuple("slogdet", ["sign", "logabsdet"])
qr_result = collections.namedtuple("qr", ["Q", "R"])
eigh_result = collections.namedtuple("eigh", ["eigenvalues", "eigenvectors"])
svd_result = collections.namedtuple("svd", ["U", "S", "Vh"])
lstsq_result = collections.namedtuple("lstsq", ["solution", "residuals", "rank", "singular_values"])
for _t in (slogdet_result, qr_result, eigh_result, svd_result, lstsq_result):
    _t.__module__ = "ember.return_types"


def _op(name, tensors, **attrs):
    return _C._op(_ID[name], tensors, attrs)


def _mT(t):
    return t.transpose(-2, -1)


def _float(t, name):
    """PyTorch's linalg takes floating-point tensors only."""
    if not t.is_floating_point():
        raise RuntimeError(f"linalg.{name}: Expected a floating point tensor as input. Got {t.dtype}")
    return t


def _common(a, b, name):
    """A and B promoted to one floating dtype, their batch dims broadcast."""
    dt = _C.result_type(a, b)
    a, b = _float(a.to(dt), name), b.to(dt)
    if a.ndim < 2 or b.ndim < 2:
        raise RuntimeError(f"linalg.{name}: A and B must have at least 2 dimensions, got {tuple(a.shape)} and "
                           f"{tuple(b.shape)}")
    batch = _ops.broadcast_shapes(tuple(a.shape[:-2]), tuple(b.shape[:-2]))
    return a.expand(*batch, *a.shape[-2:]), b.expand(*batch, *b.shape[-2:])


# ---------------------------------------------------------------- ops of the table

def inv(A):
    """The inverse of each square matrix; a singular one is an error."""
    return _op("inv", [_float(A, "inv")])


def _is_vector_rhs(A, B):
    return B.ndim == 1 or (B.ndim == A.ndim - 1 and tuple(B.shape) == tuple(A.shape[:-1]))


def solve(A, B, *, left=True):
    """X with A X = B (left) or X A = B; B may be a vector (or a batch of them)."""
    if not left:
        return _mT(solve(_mT(A), _mT(B)))
    vector = _is_vector_rhs(A, B)
    A, B = _common(A, B.unsqueeze(-1) if vector else B, "solve")
    X = _op("solve", [A, B])
    return X.squeeze(-1) if vector else X


def solve_triangular(A, B, *, upper, left=True, unitriangular=False):
    """X with A X = B (left) or X A = B for triangular A (its other triangle
    is not read); no test for a zero diagonal (infs and NaNs, as PyTorch)."""
    if not left:
        return _mT(solve_triangular(_mT(A), _mT(B), upper=not upper, unitriangular=unitriangular))
    A, B = _common(A, B, "solve_triangular")
    A = A.triu() if upper else A.tril()
    if unitriangular:  # the diagonal taken as ones
        A = (A.triu(1) if upper else A.tril(-1)) + eye(A.shape[-1], dtype=A.dtype)
    return _op("solve_triangular", [A, B], upper=upper)


def det(A):
    """The determinant of each square matrix (LU)."""
    return _op("det", [_float(A, "det")])


def slogdet(A):
    """(sign, log|det|): the determinant without overflow; singular: (0, -inf)."""
    sign, logabs = _op("slogdet", [_float(A, "slogdet")])
    return slogdet_result(sign, logabs)


def logdet(A):
    """log(det(A)): NaN where the determinant is negative, -inf where 0."""
    sign, logabs = slogdet(A)
    return logabs + sign.log()


def cholesky(A, *, upper=False):
    """L with A = L L^T (lower; upper: L^T) for symmetric positive-definite A
    (only its lower triangle is read)."""
    L = _op("cholesky", [_float(A, "cholesky")])
    return _mT(L).contiguous() if upper else L


def qr(A, mode="reduced"):
    """(Q, R) with A = Q R, Q orthonormal columns, R upper triangular; mode
    'reduced', 'complete' or 'r' (R only; Q empty)."""
    if mode not in ("reduced", "complete", "r"):
        raise RuntimeError(f"qr received unrecognized mode '{mode}' but expected one of 'reduced' (default), "
                           "'r', or 'complete'")
    Q, R = _op("qr", [_float(A, "qr")], full=mode == "complete")
    return qr_result(Q.new_empty((0,)) if mode == "r" else Q, R)


def eigh(A, UPLO="L"):
    """(eigenvalues ascending, eigenvectors as columns) of symmetric A, from
    its lower (UPLO='L') or upper triangle."""
    if UPLO not in ("L", "U"):
        raise RuntimeError(f"Expected UPLO argument to be 'L' or 'U', but got {UPLO}")
    L, V = _op("eigh", [_float(A, "eigh")], upper=UPLO == "U")
    return eigh_result(L, V)


def eigvalsh(A, UPLO="L"):
    """The eigenvalues of symmetric A, ascending."""
    return eigh(A, UPLO).eigenvalues


def svd(A, full_matrices=True, *, driver=None):
    """(U, S, Vh) with A = U diag(S) Vh, S descending (LAPACK's gesdd)."""
    U, S, Vh = _op("svd", [_float(A, "svd")], full=bool(full_matrices))
    return svd_result(U, S, Vh)


def svdvals(A, *, driver=None):
    """The singular values of A, descending."""
    return svd(A, full_matrices=False).S


def lstsq(A, B, rcond=None, *, driver=None):
    """The least-squares solution X of A X = B (minimum norm where A is rank
    deficient), as (solution, residuals, rank, singular_values), as
    PyTorch's CPU drivers give them but for singular_values (empty):
    residuals, with the drivers that compute them ('gelsd', 'gelss',
    'gels'), the squared residual norms when A is tall and of full rank;
    with the default, 'gelsy', empty, as PyTorch's."""
    if driver not in (None, "gelsy", "gelsd", "gelss", "gels"):
        raise RuntimeError(f"parameter `driver` should be one of (gels, gelsy, gelsd, gelss), got {driver!r}")
    vector = B.ndim == A.ndim - 1
    A, B = _common(A, B.unsqueeze(-1) if vector else B, "lstsq")
    m, n = A.shape[-2], A.shape[-1]
    if rcond is not None or (_C.is_grad_enabled() and (A.requires_grad or B.requires_grad)):
        X = pinv(A, rtol=rcond) @ B  # differentiable
        rank = matrix_rank(A, rtol=rcond)
    else:
        X, rank = _op("lstsq", [A, B])
    residuals = X.new_empty((0,))
    if driver in ("gelsd", "gelss", "gels") and m > n and n > 0 and bool((rank == n).all()):
        residuals = ((A @ X - B) ** 2).sum(-2)
    X = X.squeeze(-1) if vector else X
    if driver == "gels":  # (QR, no rank: PyTorch's gels gives an empty one)
        rank = rank.new_empty((0,))
    singular = svdvals(A) if driver in ("gelsd", "gelss") else X.new_empty((0,))
    return lstsq_result(X, residuals, rank, singular)


# ---------------------------------------------------------------- compositions

def _tolerance(S, A, atol, rtol):
    """PyTorch's rank tolerance: max(atol, rtol * largest singular value),
    rtol defaulting to eps * max(m, n) where atol is not given or not > 0.
    Tensor tolerances hold one value per matrix (they broadcast against the
    batch dims, as PyTorch's)."""
    eps = {_C.float32: 1.1920928955078125e-07, _C.float64: 2.220446049250313e-16}[A.dtype]
    default = eps * max(A.shape[-2], A.shape[-1])
    per_matrix = lambda t: t.to(S.dtype).unsqueeze(-1) if isinstance(t, _C._TensorBase) else t  # noqa: E731
    atol, rtol = per_matrix(atol), per_matrix(rtol)
    if rtol is None:
        if isinstance(atol, _C._TensorBase):
            rtol = _ops.where(atol > 0, 0.0, default)
        else:
            rtol = default if atol is None or atol == 0 else 0.0
    smax = S.amax(-1, keepdim=True) if S.shape[-1] else S.new_zeros(S.shape[:-1] + (1,))
    tol = smax * rtol
    if atol is not None:
        tol = _ops.maximum(tol, atol) if isinstance(atol, _C._TensorBase) else _ops.clamp(tol, min=atol)
    return tol


def pinv(A, *, atol=None, rtol=None, hermitian=False):
    """The Moore-Penrose pseudo-inverse: through the SVD, or with hermitian
    through eigh of the lower triangle (values at or below the tolerance
    count as zero). Its gradient is PyTorch's closed form (pinv_backward),
    defined where singular values repeat, unlike the SVD's own."""
    A = _float(A, "pinv")
    if not (_C.is_grad_enabled() and A.requires_grad):
        return _pinv_value(A, atol, rtol, hermitian)
    from .autograd.function import Function

    class PinvBackward(Function):
        @staticmethod
        def forward(ctx, A):
            P = _pinv_value(A, atol, rtol, hermitian)
            ctx.save_for_backward(A, P)
            return P

        @staticmethod
        def backward(ctx, G):
            A, P = ctx.saved_tensors
            return _pinv_backward(G, P, A)

    return PinvBackward.apply(A)


def _pinv_value(A, atol, rtol, hermitian):
    if hermitian:
        L, V = eigh(A)
        absL = L.abs()
        keep = absL > _tolerance(absL, A, atol, rtol)
        L_inv = _ops.where(keep, 1.0 / _ops.where(keep, L, ones_like(L)), zeros_like(L))
        return V @ (L_inv.unsqueeze(-1) * _mT(V))
    U, S, Vh = svd(A, full_matrices=False)
    keep = S > _tolerance(S, A, atol, rtol)
    S_inv = _ops.where(keep, 1.0 / _ops.where(keep, S, ones_like(S)), zeros_like(S))
    return _mT(Vh) @ (S_inv.unsqueeze(-1) * _mT(U))


def _pinv_backward(G, P, A):
    """The gradient of A from that of P = pinv(A) (Golub and Pereyra's
    derivative, as PyTorch writes it: products of the smaller size)."""
    Gt, Pt = _mT(G), _mT(P)
    if A.shape[-2] <= A.shape[-1]:
        K = Gt @ P
        KPt = K @ Pt
        return -_mT(P @ K) + KPt - (A @ P) @ KPt + (Pt @ P) @ (Gt - K @ A)
    K = P @ Gt
    PtK = Pt @ K
    return -_mT(K @ P) + (Gt - A @ K) @ P @ Pt + PtK - PtK @ P @ A


def matrix_rank(A, *, atol=None, rtol=None, hermitian=False, tol=None):
    """How many singular values exceed the tolerance."""
    A = _float(A, "matrix_rank")
    if tol is not None:
        atol, rtol = tol, 0.0
    S = svdvals(A)
    return (S > _tolerance(S, A, atol, rtol)).sum(-1)


def vector_norm(x, ord=2, dim=None, keepdim=False, *, dtype=None):
    """The ord-norm of x over dim (all elements by default): sum(|x|^ord)^(1/ord),
    inf the largest |x|, -inf the smallest, 0 the count of non-zeros."""
    x = x if dtype is None else x.to(dtype)
    if not x.is_floating_point():
        raise RuntimeError(f"linalg.vector_norm: Expected a floating point tensor as input. Got {x.dtype}")
    dim = None if dim is None else ([dim] if isinstance(dim, numbers.Integral) else list(dim))
    if ord == -math.inf:
        return x.abs().amin(() if dim is None else dim, keepdim)
    return _ops._reduce("norm", x, dim, keepdim, ord=float(ord))


def matrix_norm(A, ord="fro", dim=(-2, -1), keepdim=False, *, dtype=None):
    """The ord-norm of the matrices in dims dim: 'fro', 'nuc', 2 and -2 (the
    largest and smallest singular value), 1 and -1 (column sums), inf and
    -inf (row sums)."""
    A = A if dtype is None else A.to(dtype)
    A = _float(A, "matrix_norm")
    if A.ndim < 2:
        raise RuntimeError(f"linalg.matrix_norm: The input tensor A must have at least 2 dimensions, got "
                           f"{tuple(A.shape)}")
    d0, d1 = (d % A.ndim for d in dim)
    if d0 == d1:
        raise RuntimeError(f"linalg.matrix_norm: dims must be different. Got ({dim[0]}, {dim[1]})")
    if ord == "fro":
        return vector_norm(A, 2, (d0, d1), keepdim)
    if ord in ("nuc", 2, -2):
        rest = [d for d in range(A.ndim) if d not in (d0, d1)]
        S = svdvals(A.permute(*rest, d0, d1))
        r = S.sum(-1) if ord == "nuc" else S.amax(-1) if ord == 2 else S.amin(-1)
        if keepdim:
            for d in sorted((d0, d1)):
                r = r.unsqueeze(d)
        return r
    if ord in (1, -1, math.inf, -math.inf):
        sum_dim, pick_dim = (d0, d1) if ord in (1, -1) else (d1, d0)
        sums = A.abs().sum(sum_dim, keepdim=True)
        r = sums.amax(pick_dim, keepdim=True) if ord > 0 else sums.amin(pick_dim, keepdim=True)
        return r if keepdim else r.squeeze(max(d0, d1)).squeeze(min(d0, d1))
    raise RuntimeError(f"linalg.matrix_norm: Order {ord} not supported.")


def norm(A, ord=None, dim=None, keepdim=False, *, dtype=None):
    """vector_norm or matrix_norm, as PyTorch chooses: ord None is the
    2-norm of the flattened input (or over dim); a matrix ord, or two dims,
    is matrix_norm."""
    if isinstance(dim, numbers.Integral):
        dim = (dim,)
    if dim is not None and len(dim) == 2 or (dim is None and ord is not None and A.ndim == 2):
        return matrix_norm(A, "fro" if ord is None else ord, dim or (-2, -1), keepdim, dtype=dtype)
    if isinstance(ord, str):
        raise RuntimeError(f"linalg.norm: ord {ord!r} needs a matrix (2 dims)")
    if dim is None and ord is not None and A.ndim != 1:
        raise RuntimeError(f"linalg.norm: If dim is not specified but ord is, the input must be 1D or 2D. "
                           f"Got {A.ndim}D.")
    return vector_norm(A, 2 if ord is None else ord, dim, keepdim, dtype=dtype)


def cross(input, other, *, dim=-1):
    """The cross product of 3-vectors along dim (inputs broadcast)."""
    shape = _ops.broadcast_shapes(tuple(input.shape), tuple(other.shape))
    a, b = input.expand(*shape), other.expand(*shape)
    if a.ndim == 0 or a.shape[dim] != 3:
        raise RuntimeError(f"linalg.cross: inputs dimension {dim} must have length 3. Got {tuple(input.shape)} "
                           f"and {tuple(other.shape)}")
    a1, a2, a3 = (a.select(dim, i) for i in range(3))
    b1, b2, b3 = (b.select(dim, i) for i in range(3))
    return _ops.stack([a2 * b3 - a3 * b2, a3 * b1 - a1 * b3, a1 * b2 - a2 * b1], dim % a.ndim)


def matrix_power(A, n):
    """A multiplied by itself n times (n < 0: of its inverse; 0: identity)."""
    if A.ndim < 2 or A.shape[-1] != A.shape[-2]:
        raise RuntimeError(f"linalg.matrix_power: A must be batches of square matrices, got {tuple(A.shape)}")
    if n < 0:
        A, n = inv(A), -n
    if n == 0:  # (with A's history, as PyTorch's: a zero gradient rather than none)
        identity = eye(A.shape[-1], dtype=A.dtype).expand(*A.shape)
        return _ops.where(identity == identity, identity, A) if A.requires_grad else identity.clone()
    result, base = None, A
    while n:
        if n & 1:
            result = base if result is None else result @ base
        n >>= 1
        if n:
            base = base @ base
    return result


# ---------------------------------------------------------------- torch.* names

def _cdist(x1, x2, p=2.0, compute_mode="use_mm_for_euclid_dist_if_necessary"):
    """The p-norm distance between each row of x1 and each row of x2
    (batched over leading dims)."""
    if x1.ndim < 2 or x2.ndim < 2 or x1.shape[-1] != x2.shape[-1]:
        raise RuntimeError(f"cdist only supports at least 2D tensors with the same last dim, X1 got: "
                           f"{tuple(x1.shape)}, X2 got: {tuple(x2.shape)}")
    if p < 0:
        raise RuntimeError("cdist only supports non-negative p values")
    big = x1.shape[-2] > 25 or x2.shape[-2] > 25
    use_mm = p == 2 and (compute_mode == "use_mm_for_euclid_dist" or
                         (compute_mode == "use_mm_for_euclid_dist_if_necessary" and big))
    if use_mm:  # |a|^2 + |b|^2 - 2 a.b, clamped at 0; sqrt with a zero gradient at 0
        d2 = (x1 * x1).sum(-1, keepdim=True) + _mT((x2 * x2).sum(-1, keepdim=True)) - 2 * (x1 @ _mT(x2))
        pos = d2 > 0
        return _ops.where(pos, d2, ones_like(d2)).sqrt() * pos
    diff = x1.unsqueeze(-2) - x2.unsqueeze(-3)
    return vector_norm(diff, p, -1)


def _torch_cross(input, other, dim=None):
    """torch.cross: along dim, or the first dim of size 3 (PyTorch 1.13)."""
    if dim is None:
        shape = _ops.broadcast_shapes(tuple(input.shape), tuple(other.shape))
        dim = next((d for d, s in enumerate(shape) if s == 3), None)
        if dim is None:
            raise RuntimeError(f"no dimension of size 3 in input {tuple(input.shape)}")
    return cross(input, other, dim=dim)


def _pinverse(input, rcond=1e-15):
    return pinv(input, rtol=rcond)


# ember.<name> (and Tensor.<name>, but for cdist), as torch.<name>
TOP_LEVEL = {"det": det, "logdet": logdet, "slogdet": slogdet, "inverse": inv, "pinverse": _pinverse,
             "matrix_power": matrix_power, "cross": _torch_cross, "cdist": _cdist}
for _name, _fn in TOP_LEVEL.items():
    if _name != "cdist":
        _ops._METHODS[_name] = (_fn, True)


# ---------------------------------------------------------------- more of torch.linalg (issue 40, item 3)

class LinAlgError(RuntimeError):
    """A matrix the operation cannot handle (singular, not positive-definite),
    as torch.linalg.LinAlgError."""


def _raising_linalg_error(fn):
    def wrapped(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except LinAlgError:
            raise
        except RuntimeError as e:
            if "singular" in str(e) or "positive-definite" in str(e):
                raise LinAlgError(str(e)) from None
            raise
    wrapped.__name__, wrapped.__doc__, wrapped.__wrapped__ = fn.__name__, fn.__doc__, fn
    return wrapped


inv, solve, cholesky = _raising_linalg_error(inv), _raising_linalg_error(solve), _raising_linalg_error(cholesky)
TOP_LEVEL["inverse"] = inv
_ops._METHODS["inverse"] = (inv, True)

inv_ex_result = collections.namedtuple("inv_ex", ["inverse", "info"])
cholesky_ex_result = collections.namedtuple("cholesky_ex", ["L", "info"])
solve_ex_result = collections.namedtuple("solve_ex", ["result", "info"])
for _t in (inv_ex_result, cholesky_ex_result, solve_ex_result):
    _t.__module__ = "ember.return_types"


def _ex(fn, result_type, A, args, kwargs, check_errors):
    """(result, info): info 0 for each matrix that worked and 1 where it did
    not (its result NaN), or with check_errors, the error."""
    from . import _creation
    batch = tuple(A.shape[:-2])
    shape_of = (lambda a, rest: tuple(rest[0].shape)) if fn is solve else (lambda a, rest: tuple(a.shape))
    try:
        return result_type(fn(A, *args, **kwargs), _creation.zeros(*batch, dtype=_C.int32))
    except LinAlgError:
        if check_errors:
            raise
    if not batch:
        return result_type(_creation.full(shape_of(A, args), math.nan, dtype=A.dtype),
                           _creation.ones((), dtype=_C.int32))
    flat = A.reshape(-1, A.shape[-2], A.shape[-1])
    rest = [a.reshape((-1,) + tuple(a.shape[len(batch):])) for a in args]
    results, infos = [], []
    for i in range(flat.shape[0]):
        one = [r[i] for r in rest]
        try:
            results.append(fn(flat[i], *one, **kwargs))
            infos.append(0)
        except LinAlgError:
            results.append(_creation.full(shape_of(flat[i], one), math.nan, dtype=A.dtype))
            infos.append(1)
    out = _ops.stack(results).reshape(batch + tuple(results[0].shape))
    return result_type(out, _creation.tensor(infos, dtype=_C.int32).reshape(batch))


def inv_ex(A, *, check_errors=False):
    return _ex(inv, inv_ex_result, A, (), {}, check_errors)


def cholesky_ex(A, *, upper=False, check_errors=False):
    return _ex(cholesky, cholesky_ex_result, A, (), {"upper": upper}, check_errors)


def solve_ex(A, B, *, left=True, check_errors=False):
    return _ex(solve, solve_ex_result, A, (B,), {"left": left}, check_errors)


def matmul(input, other):
    return input @ other


def diagonal(A, *, offset=0, dim1=-2, dim2=-1):
    return A.diagonal(offset, dim1, dim2)


def vecdot(x, y, *, dim=-1):
    """The dot product along dim (real tensors: no conjugate)."""
    return (x * y).sum(dim)


def multi_dot(tensors):
    """The product of a chain of matrices (a 1-d first is a row, a 1-d last
    a column, each dropped from the result as PyTorch's)."""
    ts = list(tensors)
    if len(ts) < 2:
        raise RuntimeError(f"multi_dot(): expected at least 2 tensors but got {len(ts)}")
    first_vec, last_vec = ts[0].ndim == 1, ts[-1].ndim == 1
    if first_vec:
        ts[0] = ts[0].reshape(1, -1)
    if last_vec:
        ts[-1] = ts[-1].reshape(-1, 1)
    out = ts[0]
    for t in ts[1:]:
        out = out @ t
    if first_vec:
        out = out.squeeze(0)
    if last_vec:
        out = out.squeeze(-1)
    return out


def vander(x, *, N=None):
    """Columns x^0, x^1, ..., x^(N-1) (increasing, unlike torch.vander)."""
    if x.ndim == 0:  # (PyTorch's: one point)
        x = x.reshape(1)
    n = x.shape[-1] if N is None else N
    if n < 1:
        raise RuntimeError("N must be greater than 1.")
    cols = [x ** i if i else ones_like(x) for i in range(n)]
    return _ops.stack(cols, -1)


def cond(A, p=None):
    """The condition number in norm p (None or 2: the ratio of the largest to
    the smallest singular value)."""
    if p is None or p in (2, -2):
        s = svdvals(A)
        hi, lo = s[..., 0], s[..., -1]
        return hi / lo if p != -2 else lo / hi
    return matrix_norm(A, p) * matrix_norm(inv(A), p)


def matrix_exp(A):
    """exp(A) by scaling and squaring: A / 2^s has a 1-norm of at most 1/2,
    then its Taylor series to degree 18 (error below 1e-17 there), squared
    s times."""
    n1 = matrix_norm(A, 1).amax().item() if A.numel() else 0.0
    s = max(0, int(math.ceil(math.log2(n1 / 0.5)))) if n1 > 0.5 else 0
    X = A / (2.0 ** s)
    from . import _creation
    eye = _creation.eye(A.shape[-1], dtype=A.dtype).expand(A.shape)
    out, term = eye + X, X
    for k in range(2, 19):
        term = term @ X / k
        out = out + term
    for _ in range(s):
        out = out @ out
    return out


def tensorinv(A, ind=2):
    """The inverse of A seen as a matrix from its first `ind` dims to the
    rest: shape A.shape[ind:] + A.shape[:ind]."""
    if ind <= 0:
        raise RuntimeError(f"Expected a strictly positive integer for 'ind', but got {ind}")
    rows = 1
    for d in A.shape[:ind]:
        rows *= d
    return inv(A.reshape(rows, -1)).reshape(tuple(A.shape[ind:]) + tuple(A.shape[:ind]))


def tensorsolve(A, B, dims=None):
    """X with tensordot(A, X, X.ndim) = B."""
    if dims is not None:
        rest = [d % A.ndim for d in dims]
        A = A.permute(*([d for d in range(A.ndim) if d not in rest] + rest))
    out_shape = tuple(A.shape[B.ndim:])
    return solve(A.reshape(B.numel(), -1), B.reshape(-1)).reshape(out_shape)


__all__ += ["LinAlgError", "inv_ex", "cholesky_ex", "solve_ex", "matmul", "diagonal", "vecdot", "multi_dot",
            "vander", "cond", "matrix_exp", "tensorinv", "tensorsolve"]
TOP_LEVEL["matrix_exp"] = matrix_exp
_ops._METHODS["matrix_exp"] = (matrix_exp, True)


# ---------------------------------------------------------------- randomized low-rank factorizations

def _approximate_basis(A, q, niter, M):
    """An orthonormal (.., m, q) basis of A's range (minus M's), by Halko,
    Martinsson and Tropp's randomized range finder with niter power
    iterations (torch._lowrank.get_approximate_basis)."""
    from ._creation import randn
    n = A.shape[-1]
    R = randn(n, q, dtype=A.dtype)

    def times(X):
        return A @ X - (M @ X if M is not None else 0)

    def times_t(X):
        return A.mT @ X - (M.mT @ X if M is not None else 0)
    Q = qr(times(R)).Q
    for _ in range(niter):
        Q = qr(times_t(Q)).Q
        Q = qr(times(Q)).Q
    return Q


def svd_lowrank(A, q=6, niter=2, M=None):
    """(U, S, V) of a rank-q approximation of A (or A - M): A ~ U diag(S)
    V^T, by a random range finder (ember's random stream) and a small SVD.
    Exact, up to the signs of the singular vectors, when A has rank <= q."""
    q = 6 if q is None else q
    m, n = A.shape[-2:]
    if M is not None:
        M = M.broadcast_to(A.shape)
    if m < n:  # work with the tall form
        U, S, V = svd_lowrank(A.mT, q, niter, None if M is None else M.mT)
        return V, S, U
    Q = _approximate_basis(A, q, niter, M)
    B = Q.mT @ A - (Q.mT @ M if M is not None else 0)
    U, S, Vh = svd(B, full_matrices=False)
    return Q @ U, S, Vh.mT


def pca_lowrank(A, q=None, center=True, niter=2):
    """(U, S, V) of the principal components of A's rows: svd_lowrank of A
    less its column means (center=True), q = min(6, m, n) by default."""
    m, n = A.shape[-2:]
    q = min(6, m, n) if q is None else q
    if not 0 <= q <= min(m, n):
        raise ValueError(f"q(={q}) must be non-negative integer and not greater than min(m, n)={min(m, n)}")
    if not center:
        return svd_lowrank(A, q, niter)
    return svd_lowrank(A, q, niter, A.mean(-2, keepdim=True))


TOP_LEVEL["svd_lowrank"] = svd_lowrank
TOP_LEVEL["pca_lowrank"] = pca_lowrank


# ---------------------------------------------------------------- LU and Householder factorizations

from ._linalg_factor import (householder_product, ldl_factor, ldl_factor_ex, ldl_solve, lu,  # noqa: E402,F401
                             lu_factor, lu_factor_ex, lu_solve, _linalg_factor_top_level)

TOP_LEVEL.update(_linalg_factor_top_level())
for _name in ("lu", "lu_solve", "geqrf", "orgqr", "ormqr", "cholesky", "cholesky_solve", "cholesky_inverse",
              "triangular_solve", "qr", "symeig"):
    _ops._METHODS[_name] = (TOP_LEVEL[_name], True)
