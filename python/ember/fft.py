"""ember.fft, as torch.fft: the real helpers (fftfreq, rfftfreq, fftshift,
ifftshift) work; the transforms themselves (fft, rfft, irfft, hfft and
their 2-d and n-d forms) produce or take complex tensors, which ember does
not have, and raise NotImplementedError naming themselves."""

from . import _creation, _ops
from ._tensor import Tensor

__all__ = ["fft", "fft2", "fftfreq", "fftn", "fftshift", "hfft", "hfft2", "hfftn", "ifft", "ifft2", "ifftn",
           "ifftshift", "ihfft", "ihfft2", "ihfftn", "irfft", "irfft2", "irfftn", "rfft", "rfft2", "rfftfreq",
           "rfftn", "Tensor"]


def fftfreq(n, d=1.0, *, dtype=None, device=None, requires_grad=False, layout=None):
    """The sample frequencies of an n-point FFT with sample spacing d:
    [0, 1, ..., n//2 - 1 (or n//2), -(n//2), ..., -1] / (d n)."""
    k = _creation.arange(n, dtype=dtype or _creation.get_default_dtype())
    k = _ops.where(k >= (n + 1) // 2, k - n, k)
    out = k / (d * n)
    return out.requires_grad_() if requires_grad else out


def rfftfreq(n, d=1.0, *, dtype=None, device=None, requires_grad=False, layout=None):
    """The sample frequencies of rfft's n // 2 + 1 outputs: [0, ..., n//2]
    / (d n)."""
    out = _creation.arange(n // 2 + 1, dtype=dtype or _creation.get_default_dtype()) / (d * n)
    return out.requires_grad_() if requires_grad else out


def _roll_half(input, dim, sign):
    dims = list(range(input.ndim)) if dim is None else ([dim] if isinstance(dim, int) else list(dim))
    shifts = [sign * (input.shape[d] // 2) for d in dims]
    return input.roll(shifts, dims) if dims else input


def fftshift(input, dim=None):
    """Moves the zero frequency to the middle: a roll by n // 2 along each
    of dims (all by default)."""
    return _roll_half(input, dim, 1)


def ifftshift(input, dim=None):
    """fftshift's inverse: a roll by -(n // 2)."""
    return _roll_half(input, dim, -1)


def _complex_only(name):
    reason = (f"ember.fft.{name}: ember has no complex tensors, so its Fourier transforms are not implemented "
              "(fftfreq, rfftfreq, fftshift and ifftshift are)")

    def fn(*args, **kwargs):
        raise NotImplementedError(reason)
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"torch.fft.{name}: not implemented in ember (complex tensors)."
    fn._unsupported = reason  # counted apart from the names that work (tools/api_coverage.py)
    return fn


for _name in ("fft", "fft2", "fftn", "ifft", "ifft2", "ifftn", "rfft", "rfft2", "rfftn", "irfft", "irfft2",
              "irfftn", "hfft", "hfft2", "hfftn", "ihfft", "ihfft2", "ihfftn"):
    globals()[_name] = _complex_only(_name)
