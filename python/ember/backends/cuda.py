"""torch.backends.cuda: the TF32 and reduced-precision switches of CUDA
matmuls (kept, as PyTorch keeps them; ember's CUDA matmuls are not built
yet), and is_built()."""


class _MatmulFlags:
    def __init__(self):
        self.allow_tf32 = False  # PyTorch's default since 1.12
        self.allow_fp16_reduced_precision_reduction = True
        self.allow_bf16_reduced_precision_reduction = True


matmul = _MatmulFlags()


def is_built():
    """Was ember built with CUDA support? Always: its CUDA device loads the
    driver and NVRTC at run time (whether this machine has them:
    ember.cuda.is_available())."""
    return True


def preferred_linalg_library(backend=None):
    return "default"
