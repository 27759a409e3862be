"""ember: tensors with a C core. Ops run eagerly; @ember.compile traces a
function into an SSA graph, fuses it and JIT-compiles the fused kernels."""

import os as _os
import sys as _sys
import types as _types
import pkgutil as _pkgutil

# The compiled extension may live in a build tree (<build>/python/ember/_C*.so)
# rather than beside these files: look for it in every `ember` directory on
# sys.path. Build trees (an `ember` directory without the package's own
# files) go first, so a build named by PYTHONPATH wins over the copy that
# `pip install -e .` leaves beside these files; they hold no Python
# modules, so they shadow nothing else.
__path__ = _pkgutil.extend_path(__path__, __name__)
__path__ = sorted(__path__, key=lambda d: _os.path.exists(_os.path.join(d, "__init__.py")))

def _prefer_avx512_blas():
    """OpenBLAS 0.3.21 (Debian 12's) does not know AMD Zen 4 and Zen 5 and
    runs its AVX2 "Haswell" kernels there; its AVX-512 ones are about 1.9x
    faster for float32 GEMMs (bench/RESULTS.md). Where the CPU and kernel
    have AVX-512 (F, BW, DQ, VL) and the user has not chosen a core type,
    ask for them before the extension loads OpenBLAS. OPENBLAS_CORETYPE set
    by the user (Haswell, to undo this) wins; an OpenBLAS already loaded by
    another library keeps its own choice."""
    if "OPENBLAS_CORETYPE" in _os.environ:
        return
    try:
        with open("/proc/cpuinfo") as f:
            flags = next((line.split(":", 1)[1].split() for line in f if line.startswith("flags")), [])
    except OSError:
        return
    if {"avx512f", "avx512bw", "avx512dq", "avx512vl"} <= set(flags):
        _os.environ["OPENBLAS_CORETYPE"] = "SkylakeX"


_prefer_avx512_blas()

from . import _C  # noqa: E402
from ._tensor import Tensor, device  # noqa: E402
from ._generator import Generator  # noqa: E402,F401

_C._set_tensor_class(Tensor)
_C._set_package_dir(_os.path.dirname(_os.path.abspath(__file__)) + _os.sep)

from ._C import (  # noqa: E402,F401
    Size, dtype, float32, float64, float16, bfloat16, int64, int32, int16, int8, uint8, bool,
    from_numpy, from_dlpack, matmul, reshape, permute, transpose, contiguous,
    manual_seed, get_num_threads, set_num_threads, empty_cache, memory_stats, reset_peak_memory_stats,
    result_type, promote_types, can_cast,
)
from ._creation import *  # noqa: E402,F401,F403
from ._ops import *  # noqa: E402,F401,F403
from . import linalg  # noqa: E402
globals().update(linalg.TOP_LEVEL)
from . import _methods  # noqa: E402

_methods._install_new()

from . import autograd  # noqa: E402
from .autograd import enable_grad, inference_mode, is_grad_enabled, no_grad, set_grad_enabled  # noqa: E402,F401,E501
from . import nn, optim  # noqa: E402,F401
from ._tensor_extras import _functional_aliases  # noqa: E402

_functional_aliases()  # (torch.conv2d and friends: nn.functional's, once nn exists)
globals().update({n: getattr(_ops, n) for n in _ops.__all__ if n not in globals()})
from . import compiler  # noqa: E402
from .compiler import compile  # noqa: E402,F401

# PyTorch's dtype aliases
float = float32
double = float64
half = float16
long = int64
int = int32
short = int16

__version__ = "0.1.0"
from .serialization import load, save  # noqa: E402,F401
from . import utils  # noqa: E402,F401
from . import aot  # noqa: E402,F401
from . import cuda  # noqa: E402,F401
from . import distributed  # noqa: E402,F401
from . import backends, distributions, fft, futures, jit, masked, multiprocessing, onnx, profiler, special  # noqa: E402,F401
from .futures import _fork as fork, _wait as wait  # noqa: E402,F401
from .special import logit, sinc, xlogy  # noqa: E402,F401
Tensor.logit, Tensor.sinc, Tensor.xlogy = special.logit, special.sinc, special.xlogy
special.Tensor = fft.Tensor = Tensor


def _install_special():
    functions, methods = special._top_level()
    globals().update(functions)
    for name, fn in methods.items():
        setattr(Tensor, name, fn)
        setattr(Tensor, name + "_", lambda self, *a, _fn=fn, **k: self.copy_(_fn(self, *a, **k)))


_install_special()
from . import _torch_names  # noqa: E402
globals().update({k: v for k, v in _torch_names.names().items() if k not in globals()})
from ._tensor_str import set_printoptions  # noqa: E402,F401
from . import _tensor_more  # noqa: E402,F401
from ._tensor_more import layout, strided  # noqa: E402,F401
from ._tensor_more import LAYOUTS as _LAYOUTS  # noqa: E402
globals().update({k: v for k, v in _LAYOUTS.items() if k.startswith("sparse_")})
from ._windows import *  # noqa: E402,F401,F403
from ._storage import *  # noqa: E402,F401,F403
from ._fake_quantize import *  # noqa: E402,F401,F403
from ._lobpcg import lobpcg  # noqa: E402,F401
from .futures import Future  # noqa: E402,F401
from .autograd.anomaly_mode import (is_anomaly_check_nan_enabled, is_anomaly_enabled,  # noqa: E402,F401
                                    set_anomaly_enabled)
from . import random  # noqa: E402
from .random import (default_generator, get_rng_state, initial_seed, manual_seed, seed,  # noqa: E402,F401
                     set_rng_state)
from . import amp  # noqa: E402
from ._memory_format import (channels_last, channels_last_3d, contiguous_format, memory_format,  # noqa: E402,F401
                             preserve_format, legacy_contiguous_format)
from .amp import (autocast, autocast_decrement_nesting, autocast_increment_nesting,  # noqa: E402,F401
                  clear_autocast_cache, get_autocast_cpu_dtype, get_autocast_gpu_dtype, is_autocast_cache_enabled,
                  is_autocast_cpu_enabled, is_autocast_enabled, set_autocast_cache_enabled, set_autocast_cpu_dtype,
                  set_autocast_cpu_enabled, set_autocast_enabled, set_autocast_gpu_dtype)
cuda.amp = amp.cuda_amp
cpu = _sys.modules["ember.cpu"] = _types.ModuleType("ember.cpu", "torch.cpu: its amp (CPU autocast).")
cpu.amp = amp.cpu_amp

from . import _unsupported  # noqa: E402
_unsupported.install(_sys.modules[__name__], Tensor, linalg)
