"""torch.backends.cuda: the TF32 and reduced-precision switches of CUDA
matmuls (kept, as PyTorch keeps them; ember has no CUDA device yet, see
ember.cuda.why_unavailable()), and is_built()."""


class _MatmulFlags:
    def __init__(self):
        self.allow_tf32 = False  # PyTorch's default since 1.12
        self.allow_fp16_reduced_precision_reduction = True
        self.allow_bf16_reduced_precision_reduction = True


matmul = _MatmulFlags()


def is_built():
    """Was ember built with a CUDA device? Not yet (its CUDA kernels are
    generated and compiled to PTX, but no device runs them: see
    ember.cuda.why_unavailable())."""
    return False


def preferred_linalg_library(backend=None):
    return "default"
