"""torch.backends.cpu: what the CPU kernels were built to use."""


def get_cpu_capability():
    """The widest vector instructions this CPU has that ember's kernels
    use ('AVX512', 'AVX2' or 'DEFAULT'), as PyTorch names them."""
    try:
        with open("/proc/cpuinfo") as f:
            flags = next((line for line in f if line.startswith("flags")), "")
    except OSError:
        return "DEFAULT"
    return "AVX512" if " avx512f" in flags else "AVX2" if " avx2" in flags else "DEFAULT"
