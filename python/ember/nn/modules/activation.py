"""Activation modules: each calls its nn.functional twin."""

from .. import functional as F
from .module import Module


class ReLU(Module):
    def __init__(self, inplace=False):
        super().__init__()
        self.inplace = inplace

    def forward(self, input):
        return F.relu(input, self.inplace)

    def extra_repr(self):
        return "inplace=True" if self.inplace else ""


class ReLU6(ReLU):
    def forward(self, input):
        return F.relu6(input, self.inplace)


class LeakyReLU(Module):
    def __init__(self, negative_slope=0.01, inplace=False):
        super().__init__()
        self.negative_slope, self.inplace = negative_slope, inplace

    def forward(self, input):
        return F.leaky_relu(input, self.negative_slope, self.inplace)

    def extra_repr(self):
        return f"negative_slope={self.negative_slope}" + (", inplace=True" if self.inplace else "")


class ELU(Module):
    def __init__(self, alpha=1.0, inplace=False):
        super().__init__()
        self.alpha, self.inplace = alpha, inplace

    def forward(self, input):
        return F.elu(input, self.alpha, self.inplace)

    def extra_repr(self):
        return f"alpha={self.alpha}" + (", inplace=True" if self.inplace else "")


class Hardtanh(Module):
    def __init__(self, min_val=-1.0, max_val=1.0, inplace=False):
        super().__init__()
        self.min_val, self.max_val, self.inplace = min_val, max_val, inplace

    def forward(self, input):
        return F.hardtanh(input, self.min_val, self.max_val, self.inplace)

    def extra_repr(self):
        return f"min_val={self.min_val}, max_val={self.max_val}" + \
            (", inplace=True" if self.inplace else "")


class GELU(Module):
    def __init__(self, approximate="none"):
        super().__init__()
        self.approximate = approximate

    def forward(self, input):
        return F.gelu(input, approximate=self.approximate)

    def extra_repr(self):
        return f"approximate={self.approximate!r}"


class SiLU(Module):
    def __init__(self, inplace=False):
        super().__init__()
        self.inplace = inplace

    def forward(self, input):
        return F.silu(input, self.inplace)

    def extra_repr(self):
        return "inplace=True" if self.inplace else ""


class Mish(SiLU):
    def forward(self, input):
        return F.mish(input, self.inplace)


class Tanh(Module):
    def forward(self, input):
        return input.tanh()


class Sigmoid(Module):
    def forward(self, input):
        return input.sigmoid()


class LogSigmoid(Module):
    def forward(self, input):
        return F.logsigmoid(input)


class Softplus(Module):
    def __init__(self, beta=1, threshold=20):  # PyTorch's defaults, which its repr shows
        super().__init__()
        self.beta, self.threshold = beta, threshold

    def forward(self, input):
        return F.softplus(input, self.beta, self.threshold)

    def extra_repr(self):
        return f"beta={self.beta}, threshold={self.threshold}"


class Softmax(Module):
    def __init__(self, dim=None):
        super().__init__()
        self.dim = dim

    def forward(self, input):
        return F.softmax(input, self.dim)

    def extra_repr(self):
        return f"dim={self.dim}"


class LogSoftmax(Softmax):
    def forward(self, input):
        return F.log_softmax(input, self.dim)


from .attention import MultiheadAttention  # noqa: E402,F401  (where PyTorch's module path has it)


def _simple(name, fn, doc, params=(), inplace=False):
    """A module whose forward is fn(input, *its params[, inplace])."""
    names = [p for p, _ in params]

    def __init__(self, *args, **kwargs):
        Module.__init__(self)
        values = dict(params)
        values.update(zip(names, args))
        if inplace:
            values["inplace"] = kwargs.pop("inplace", args[len(names)] if len(args) > len(names) else False)
        values.update(kwargs)
        for k, v in values.items():
            setattr(self, k, v)

    def forward(self, input):
        args = [getattr(self, p) for p in names] + ([self.inplace] if inplace else [])
        return fn(input, *args)

    def extra_repr(self):
        parts = [f"{p}={getattr(self, p)}" for p in names]
        if inplace and self.inplace:
            parts.append("inplace=True")
        return ", ".join(parts)

    return type(name, (Module,), {"__init__": __init__, "forward": forward, "extra_repr": extra_repr,
                                  "__doc__": doc, "__module__": __name__})


SELU = _simple("SELU", F.selu, "SELU: scale (max(0, x) + min(0, alpha (e^x - 1))).", inplace=True)
CELU = _simple("CELU", F.celu, "CELU: max(0, x) + min(0, alpha (e^(x/alpha) - 1)).", [("alpha", 1.0)], True)
Softsign = _simple("Softsign", F.softsign, "x / (1 + |x|).")
Softshrink = _simple("Softshrink", F.softshrink, "Soft shrinkage by lambd.", [("lambd", 0.5)])
Hardshrink = _simple("Hardshrink", F.hardshrink, "Hard shrinkage by lambd.", [("lambd", 0.5)])
Tanhshrink = _simple("Tanhshrink", F.tanhshrink, "x - tanh(x).")
Threshold = _simple("Threshold", F.threshold, "x above threshold, value elsewhere.",
                    [("threshold", None), ("value", None)], True)
Hardsigmoid = _simple("Hardsigmoid", F.hardsigmoid, "relu6(x + 3) / 6.", inplace=True)
Hardswish = _simple("Hardswish", F.hardswish, "x relu6(x + 3) / 6.", inplace=True)
GLU = _simple("GLU", F.glu, "a sigmoid(b), the halves along dim.", [("dim", -1)])
Softmin = _simple("Softmin", F.softmin, "softmax(-x) along dim.", [("dim", None)])


class RReLU(Module):
    """Leaky ReLU with random slopes from U(lower, upper) while training,
    their mean in eval mode."""

    def __init__(self, lower=1.0 / 8, upper=1.0 / 3, inplace=False):
        super().__init__()
        self.lower, self.upper, self.inplace = lower, upper, inplace

    def forward(self, input):
        return F.rrelu(input, self.lower, self.upper, self.training, self.inplace)

    def extra_repr(self):
        return f"lower={self.lower}, upper={self.upper}" + (", inplace=True" if self.inplace else "")


class Softmax2d(Module):
    """Softmax over the channels of (N, C, H, W) or (C, H, W) inputs."""

    def forward(self, input):
        if input.ndim not in (3, 4):
            raise ValueError(f"Softmax2d: expected input to be 3D or 4D, got {input.ndim}D instead")
        return input.softmax(-3)


class PReLU(Module):
    """max(0, x) + a min(0, x) with a learned slope a (one, or one per
    channel), initialised to `init`."""

    def __init__(self, num_parameters=1, init=0.25, device=None, dtype=None):
        from ... import full
        from ..parameter import Parameter
        super().__init__()
        self.num_parameters = num_parameters
        self.weight = Parameter(full((num_parameters,), init, dtype=dtype))

    def forward(self, input):
        return F.prelu(input, self.weight)

    def extra_repr(self):
        return f"num_parameters={self.num_parameters}"


class ChannelShuffle(Module):
    """Regroups the channels: (groups, C/groups) -> (C/groups, groups)."""

    def __init__(self, groups):
        super().__init__()
        self.groups = groups

    def forward(self, input):
        return F.channel_shuffle(input, self.groups)

    def extra_repr(self):
        return f"groups={self.groups}"
