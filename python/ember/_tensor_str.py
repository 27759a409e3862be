"""Printing tensors the way PyTorch prints them.

Follows torch/_tensor_str.py (PyTorch 1.13): 4 digits of precision, an
integer mode for floats that hold whole numbers, scientific notation when
the magnitudes span more than 1000x (or exceed 1e8, or dip below 1e-4), and
summaries with '...' for tensors of more than 1000 elements. Values come
from a zero-copy NumPy view.
"""

import math

# set_printoptions changes these (PyTorch's defaults, its "default" profile)
OPTIONS = {"precision": 4, "threshold": 1000, "edgeitems": 3, "linewidth": 80, "sci_mode": None}
_PROFILES = {"default": dict(precision=4, threshold=1000, edgeitems=3, linewidth=80),
             "short": dict(precision=2, threshold=1000, edgeitems=2, linewidth=80),
             "full": dict(precision=4, threshold=math.inf, edgeitems=3, linewidth=80)}


def set_printoptions(precision=None, threshold=None, edgeitems=None, linewidth=None, profile=None, sci_mode=None):
    """How tensors print, as torch.set_printoptions: digits after the point,
    the element count past which they are summarised, the items kept at
    each edge of a summary, the line width, a profile ('default', 'short',
    'full') setting all of these, and sci_mode (True, False, or None to
    decide per tensor)."""
    if profile is not None:
        if profile not in _PROFILES:
            raise ValueError(f"set_printoptions: profile must be one of {sorted(_PROFILES)}, got {profile!r}")
        OPTIONS.update(_PROFILES[profile])
    for key, value in (("precision", precision), ("threshold", threshold), ("edgeitems", edgeitems),
                       ("linewidth", linewidth)):
        if value is not None:
            OPTIONS[key] = value
    OPTIONS["sci_mode"] = sci_mode


class _Formatter:
    def __init__(self, values, floating):
        self.floating = floating
        self.int_mode = True
        self.sci_mode = False
        self.max_width = 1
        self._measure(values)
        if OPTIONS["sci_mode"] is not None and floating:  # (set_printoptions' choice wins)
            self.sci_mode = OPTIONS["sci_mode"]

    def _measure(self, values):
        floating = self.floating
        if not floating:
            for v in values:
                self.max_width = max(self.max_width, len(str(v)))
            return
        finite = [v for v in values if math.isfinite(v) and v != 0]
        if not finite:
            return
        mags = [abs(v) for v in finite]
        lo, hi = min(mags), max(mags)
        self.int_mode = all(v == math.ceil(v) for v in finite)
        if self.int_mode:
            if hi / lo > 1000.0 or hi > 1.0e8:
                self.sci_mode = True
                for v in finite:
                    self.max_width = max(self.max_width, len(f"{v:.{OPTIONS['precision']}e}"))
            else:
                for v in finite:
                    self.max_width = max(self.max_width, len(f"{v:.0f}") + 1)
        else:
            if hi / lo > 1000.0 or hi > 1.0e8 or lo < 1.0e-4:
                self.sci_mode = True
                for v in finite:
                    self.max_width = max(self.max_width, len(f"{v:.{OPTIONS['precision']}e}"))
            else:
                for v in finite:
                    self.max_width = max(self.max_width, len(f"{v:.{OPTIONS['precision']}f}"))

    def format(self, v):
        if self.floating:
            if self.sci_mode:
                s = f"{v:{self.max_width}.{OPTIONS['precision']}e}"
            elif self.int_mode:
                s = f"{v:.0f}"
                if not (math.isinf(v) or math.isnan(v)):
                    s += "."
            else:
                s = f"{v:.{OPTIONS['precision']}f}"
        else:
            s = str(v)
        return (self.max_width - len(s)) * " " + s


def _summarized_values(a, summarize):
    """The values the formatter sizes itself on (edges only when summarising)."""
    import numpy as np
    if a.ndim == 0:
        return [a.item()]
    if summarize and a.shape[0] > 2 * OPTIONS["edgeitems"]:
        parts = list(a[:OPTIONS["edgeitems"]]) + list(a[-OPTIONS["edgeitems"]:])
    else:
        parts = list(a)
    if a.ndim == 1:
        return [p.item() for p in parts]
    out = []
    for p in parts:
        out.extend(_summarized_values(np.asarray(p), summarize))
    return out


def _vector_str(a, indent, summarize, fmt):
    element_length = fmt.max_width + 2
    per_line = max(1, int(math.floor((OPTIONS["linewidth"] - indent) / element_length)))
    if summarize and a.shape[0] > 2 * OPTIONS["edgeitems"]:
        data = [fmt.format(v) for v in a[:OPTIONS["edgeitems"]].tolist()] + [" ..."] + \
               [fmt.format(v) for v in a[-OPTIONS["edgeitems"]:].tolist()]
    else:
        data = [fmt.format(v) for v in a.tolist()]
    lines = [", ".join(data[i:i + per_line]) for i in range(0, len(data), per_line)]
    return "[" + ("," + "\n" + " " * (indent + 1)).join(lines) + "]"


def _tensor_str(a, indent, summarize, fmt):
    if a.ndim == 0:
        return fmt.format(a.item())
    if a.ndim == 1:
        return _vector_str(a, indent, summarize, fmt)
    n = a.shape[0]
    if summarize and n > 2 * OPTIONS["edgeitems"]:
        rows = [_tensor_str(a[i], indent + 1, summarize, fmt) for i in range(OPTIONS["edgeitems"])] + \
               ["..."] + \
               [_tensor_str(a[i], indent + 1, summarize, fmt) for i in range(n - OPTIONS["edgeitems"], n)]
    else:
        rows = [_tensor_str(a[i], indent + 1, summarize, fmt) for i in range(n)]
    return "[" + ("," + "\n" * (a.ndim - 1) + " " * (indent + 1)).join(rows) + "]"


def _add_suffixes(text, suffixes, indent):
    parts = [text]
    last_line_len = len(text) - text.rfind("\n") + 1
    for s in suffixes:
        if last_line_len + len(s) + 2 > OPTIONS["linewidth"]:
            parts.append(",\n" + " " * indent + s)
            last_line_len = indent + len(s)
        else:
            parts.append(", " + s)
            last_line_len += len(s) + 2
    parts.append(")")
    return "".join(parts)


def tensor_repr(t):
    from .autograd import no_grad
    with no_grad():
        return _tensor_repr(t)


def _tensor_repr(t):
    import numpy as np
    from . import _C, int64, bfloat16, bool as bool_
    prefix = "tensor("
    indent = len(prefix)
    suffixes = []
    if t.is_meta:  # no values to print: PyTorch's spelling
        suffixes = ["device='meta'", "size=" + str(tuple(t.shape))]
        if t.dtype != _C._default_dtype():
            suffixes.append("dtype=" + repr(t.dtype))
        if t.grad_fn is not None:
            suffixes.append(f"grad_fn=<{t.grad_fn.name()}>")
        elif t.requires_grad:
            suffixes.append("requires_grad=True")
        return _add_suffixes(prefix + "...", suffixes, indent)
    # NumPy has no bfloat16; its values are exactly float32 values. (A copy:
    # exporting t's own memory would pin it for good, and resize_ could not
    # grow it after a print.)
    if not t.is_cpu:  # (a device's values: copied over, which waits for them)
        suffixes.append(f"device='{t.device}'")
    h = t.detach().cpu() if not t.is_cpu else t
    a = np.asarray(h.float() if t.dtype == bfloat16 else h.clone())
    if t.numel() == 0:
        if t.ndim != 1:
            suffixes.append("size=" + str(tuple(t.shape)))
        if t.dtype != _C._default_dtype():
            suffixes.append("dtype=" + repr(t.dtype))
        body = "[]"
    else:
        if t.dtype not in (_C._default_dtype(), int64, bool_):
            suffixes.append("dtype=" + repr(t.dtype))
        summarize = t.numel() > OPTIONS["threshold"]
        fmt = _Formatter(_summarized_values(a, summarize), t.dtype.is_floating_point)
        body = _tensor_str(a, indent, summarize, fmt)
    if t.grad_fn is not None:
        suffixes.append(f"grad_fn=<{t.grad_fn.name()}>")
    elif t.requires_grad:
        suffixes.append("requires_grad=True")
    return _add_suffixes(prefix + body, suffixes, indent)
