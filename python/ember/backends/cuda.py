"""torch.backends.cuda: the TF32 and reduced-precision switches of CUDA
matmuls, and is_built(). allow_tf32 sets cuBLAS's math mode for float32
GEMMs (off by default, as in PyTorch since 1.12: float32 products then
round as float32 ones); the reduced-precision flags are kept, as PyTorch
keeps them (ember's float16/bfloat16 GEMMs sum in float32 always)."""

from .. import _C


class _MatmulFlags:
    def __init__(self):
        self.allow_fp16_reduced_precision_reduction = True
        self.allow_bf16_reduced_precision_reduction = True

    @property
    def allow_tf32(self):
        return _C._cuda_allow_tf32(None)

    @allow_tf32.setter
    def allow_tf32(self, on):
        _C._cuda_allow_tf32(bool(on))


matmul = _MatmulFlags()


def is_built():
    """Was ember built with CUDA support? Always: its CUDA device loads the
    driver and NVRTC at run time (whether this machine has them:
    ember.cuda.is_available())."""
    return True


def preferred_linalg_library(backend=None):
    return "default"
