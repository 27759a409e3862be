"""ember.backends, as torch.backends: the switches scripts set at the top
(`torch.backends.cudnn.benchmark = True`) and the availability questions
they ask. ember's CPU kernels have no algorithm choice to benchmark and are
deterministic already, so cudnn's flags are accepted and kept, and change
nothing; every accelerator answers that it is not available."""

from . import cpu, cuda, cudnn, mkl, mkldnn, mps, openmp  # noqa: F401

__all__ = ["cpu", "cuda", "cudnn", "mkl", "mkldnn", "mps", "openmp"]
