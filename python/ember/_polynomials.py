"""The orthogonal polynomials of ember.special, as PyTorch's: Chebyshev
T, U, V, W (and their shifted forms on [0, 1]), Hermite H and He,
Laguerre L and Legendre P, of input x and degree n (each a tensor or a
number; n is truncated to an integer, and a negative or non-finite n gives
0).

Each is a row of the op table (ops.def) whose scalar definition
(ops_math.h) runs the polynomial's three-term recurrence per element, in
the element's dtype, with PyTorch's branches; so they fuse and compile
like any elementwise op. Not differentiable, as PyTorch's are not.
"""

from . import _C
from ._ops import _ID

__all__ = ["chebyshev_polynomial_t", "chebyshev_polynomial_u", "chebyshev_polynomial_v", "chebyshev_polynomial_w",
           "shifted_chebyshev_polynomial_t", "shifted_chebyshev_polynomial_u", "shifted_chebyshev_polynomial_v",
           "shifted_chebyshev_polynomial_w", "hermite_polynomial_h", "hermite_polynomial_he",
           "laguerre_polynomial_l", "legendre_polynomial_p"]

_DOCS = {
    "chebyshev_polynomial_t": "T_n(x), the Chebyshev polynomial of the first kind.",
    "chebyshev_polynomial_u": "U_n(x), the Chebyshev polynomial of the second kind.",
    "chebyshev_polynomial_v": "V_n(x), the Chebyshev polynomial of the third kind.",
    "chebyshev_polynomial_w": "W_n(x), the Chebyshev polynomial of the fourth kind.",
    "hermite_polynomial_h": "H_n(x), the physicists' Hermite polynomial (NaN past n = 128 in float32, 512 in "
                            "float64, as PyTorch's).",
    "hermite_polynomial_he": "He_n(x), the probabilists' Hermite polynomial (NaN past n = 128 in float32, 512 "
                             "in float64).",
    "laguerre_polynomial_l": "L_n(x), the Laguerre polynomial.",
    "legendre_polynomial_p": "P_n(x), the Legendre polynomial.",
}


def _polynomial(name):
    op = _ID[name]

    def fn(input, n):
        if not isinstance(input, _C._TensorBase) and not isinstance(n, _C._TensorBase):
            raise TypeError(f"{name}(): expected a tensor among input and n")
        return _C._ew(op, input, n)
    fn.__name__ = fn.__qualname__ = name
    base = name.replace("shifted_", "")
    fn.__doc__ = ("The shifted form on [0, 1] of " if name.startswith("shifted_") else "") + _DOCS[base]
    return fn


for _name in __all__:
    globals()[_name] = _polynomial(_name)
