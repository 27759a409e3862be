"""torch.backends.mkl: ember uses OpenBLAS, not MKL."""


def is_available():
    return False
