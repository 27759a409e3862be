"""ember: tensors with a C core. Ops run eagerly; @ember.compile traces a
function into an SSA graph, fuses it and JIT-compiles the fused kernels."""

import os as _os
import pkgutil as _pkgutil

# The compiled extension may live in a build tree (<build>/python/ember/_C*.so)
# rather than beside these files: look for it in every `ember` directory on
# sys.path.
__path__ = _pkgutil.extend_path(__path__, __name__)

from . import _C  # noqa: E402
from ._tensor import Tensor  # noqa: E402

_C._set_tensor_class(Tensor)
_C._set_package_dir(_os.path.dirname(_os.path.abspath(__file__)) + _os.sep)

from ._C import (  # noqa: E402,F401
    Size, dtype, float32, float64, int64, bool,
    tensor, from_numpy, zeros, ones, full, arange, rand, randn,
    add, sub, mul, div, pow, maximum, neg, exp, log, tanh, sigmoid, relu,
    matmul, sum, mean, reshape, permute, transpose, contiguous,
    manual_seed, get_num_threads, set_num_threads, empty_cache, memory_stats,
)
from . import compiler  # noqa: E402
from .compiler import compile  # noqa: E402,F401

float = float32
double = float64
long = int64

__version__ = "0.1.0"
