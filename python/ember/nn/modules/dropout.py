"""Dropout, of elements, of whole channels, and for SELU networks."""

from .. import functional as F
from .module import Module


class Dropout(Module):
    """Zeroes elements with probability p while training (scaling the rest
    by 1/(1-p)); the identity in eval mode."""

    def __init__(self, p=0.5, inplace=False):
        super().__init__()
        if p < 0 or p > 1:
            raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
        self.p, self.inplace = p, inplace

    def forward(self, input):
        return F.dropout(input, self.p, self.training, self.inplace)

    def extra_repr(self):
        return f"p={self.p}, inplace={self.inplace}"


class _ChannelDropout(Dropout):
    _fn = None

    def forward(self, input):
        return type(self)._fn(input, self.p, self.training, self.inplace)


class Dropout1d(_ChannelDropout):
    """Zeroes whole channels of (N, C, L) or (C, L) inputs while training."""
    _fn = staticmethod(F.dropout1d)


class Dropout2d(_ChannelDropout):
    """Zeroes whole channels of (N, C, H, W) or (C, H, W) inputs while training."""
    _fn = staticmethod(F.dropout2d)


class Dropout3d(_ChannelDropout):
    """Zeroes whole channels of (N, C, D, H, W) or (C, D, H, W) inputs while training."""
    _fn = staticmethod(F.dropout3d)


class AlphaDropout(_ChannelDropout):
    """Dropout that keeps SELU's mean and variance (F.alpha_dropout)."""
    _fn = staticmethod(F.alpha_dropout)


class FeatureAlphaDropout(_ChannelDropout):
    """Alpha dropout of whole channels."""
    _fn = staticmethod(F.feature_alpha_dropout)
