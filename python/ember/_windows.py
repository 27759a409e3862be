"""The signal windows torch spells at the top level (hann_window,
hamming_window, blackman_window, bartlett_window, kaiser_window), as
PyTorch's: float tensors of the default dtype (or dtype), `periodic`
windows one point longer with the last point dropped (the form spectral
analysis wants), a window of length 1 is [1]."""

from . import _C, _creation

__all__ = ["hann_window", "hamming_window", "blackman_window", "bartlett_window", "kaiser_window"]


def _points(name, window_length, periodic, dtype, requires_grad):
    """(n, N, dtype): n = 0 .. window_length-1 as a float tensor, N the
    length the formula divides by (window_length, or +1 when periodic);
    None for the lengths whose window is fixed (0 and 1)."""
    dtype = dtype or _creation.get_default_dtype()
    if not dtype.is_floating_point:
        raise RuntimeError(f"{name} expects floating point dtypes, got: {dtype}")
    if window_length < 0:
        raise RuntimeError(f"{name} requires non-negative window_length, got window_length={window_length}")
    if window_length <= 1:
        out = _creation.ones(window_length, dtype=dtype)
        return out.requires_grad_() if requires_grad else out, None, dtype
    n = _creation.arange(window_length, dtype=_C.float64)
    return n, window_length + 1 if periodic else window_length, dtype


def _done(values, dtype, requires_grad):
    out = values.to(dtype)
    return out.requires_grad_() if requires_grad else out


def _cosine_sum(name, coefficients, window_length, periodic, dtype, requires_grad):
    """sum_k (-1)^k a_k cos(2 pi k n / (N - 1)): Hann, Hamming, Blackman."""
    n, N, dtype = _points(name, window_length, periodic, dtype, requires_grad)
    if N is None:
        return n
    phase = n * (2 * 3.141592653589793 / (N - 1))
    out = _creation.full((window_length,), coefficients[0], dtype=_C.float64)
    for k, a in enumerate(coefficients[1:], 1):
        out = out + ((-1) ** k * a) * (phase * k).cos()
    return _done(out, dtype, requires_grad)


def hann_window(window_length, periodic=True, *, dtype=None, layout=None, device=None, requires_grad=False):
    return _cosine_sum("hann_window", (0.5, 0.5), window_length, periodic, dtype, requires_grad)


def hamming_window(window_length, periodic=True, alpha=0.54, beta=0.46, *, dtype=None, layout=None, device=None,
                   requires_grad=False):
    return _cosine_sum("hamming_window", (alpha, beta), window_length, periodic, dtype, requires_grad)


def blackman_window(window_length, periodic=True, *, dtype=None, layout=None, device=None, requires_grad=False):
    return _cosine_sum("blackman_window", (0.42, 0.5, 0.08), window_length, periodic, dtype, requires_grad)


def bartlett_window(window_length, periodic=True, *, dtype=None, layout=None, device=None, requires_grad=False):
    """The triangle 1 - |2n / (N - 1) - 1|."""
    n, N, dtype = _points("bartlett_window", window_length, periodic, dtype, requires_grad)
    if N is None:
        return n
    return _done(1 - (n * (2.0 / (N - 1)) - 1).abs(), dtype, requires_grad)


def kaiser_window(window_length, periodic=True, beta=12.0, *, dtype=None, layout=None, device=None,
                  requires_grad=False):
    """I0(beta sqrt(1 - (2n / (N - 1) - 1)^2)) / I0(beta)."""
    n, N, dtype = _points("kaiser_window", window_length, periodic, dtype, requires_grad)
    if N is None:
        return n
    r = n * (2.0 / (N - 1)) - 1
    arg = (1 - r * r).clamp(min=0).sqrt() * beta
    return _done(arg.i0() / _creation.tensor(float(beta), dtype=_C.float64).i0(), dtype, requires_grad)
