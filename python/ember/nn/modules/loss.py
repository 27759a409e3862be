"""Loss modules: CrossEntropyLoss, NLLLoss, MSELoss, L1Loss, BCEWithLogitsLoss, and the ones made by
_loss_module from their functional forms; CosineSimilarity, PairwiseDistance."""

from .. import functional as F
from .module import Module


class _Loss(Module):
    def __init__(self, size_average=None, reduce=None, reduction="mean"):
        super().__init__()
        if size_average is not None or reduce is not None:
            raise NotImplementedError(f"{type(self).__name__}: size_average and reduce are "
                                      f"deprecated; use reduction")
        if reduction not in ("mean", "sum", "none", "batchmean"):  # (batchmean: KLDivLoss)
            raise ValueError(f"{reduction} is not a valid value for reduction")
        self.reduction = reduction


class _WeightedLoss(_Loss):
    def __init__(self, weight=None, size_average=None, reduce=None, reduction="mean"):
        super().__init__(size_average, reduce, reduction)
        self.register_buffer("weight", weight)


class CrossEntropyLoss(_WeightedLoss):
    def __init__(self, weight=None, size_average=None, ignore_index=-100, reduce=None,
                 reduction="mean", label_smoothing=0.0):
        super().__init__(weight, size_average, reduce, reduction)
        self.ignore_index, self.label_smoothing = ignore_index, label_smoothing

    def forward(self, input, target):
        return F.cross_entropy(input, target, weight=self.weight, ignore_index=self.ignore_index,
                               reduction=self.reduction, label_smoothing=self.label_smoothing)


class NLLLoss(_WeightedLoss):
    def __init__(self, weight=None, size_average=None, ignore_index=-100, reduce=None,
                 reduction="mean"):
        super().__init__(weight, size_average, reduce, reduction)
        self.ignore_index = ignore_index

    def forward(self, input, target):
        return F.nll_loss(input, target, weight=self.weight, ignore_index=self.ignore_index,
                          reduction=self.reduction)


class NLLLoss2d(NLLLoss):
    """Deprecated: NLLLoss takes (N, C, H, W) inputs itself."""

    def __init__(self, weight=None, size_average=None, ignore_index=-100, reduce=None, reduction="mean"):
        import warnings
        warnings.warn("NLLLoss2d has been deprecated. Please use NLLLoss instead as a drop-in replacement and see "
                      "https://pytorch.org/docs/master/nn.html#torch.nn.NLLLoss for more details.")
        super().__init__(weight, size_average, ignore_index, reduce, reduction)


class MSELoss(_Loss):
    def forward(self, input, target):
        return F.mse_loss(input, target, reduction=self.reduction)


class L1Loss(_Loss):
    def forward(self, input, target):
        return F.l1_loss(input, target, reduction=self.reduction)


class BCEWithLogitsLoss(_Loss):
    def __init__(self, weight=None, size_average=None, reduce=None, reduction="mean",
                 pos_weight=None):
        super().__init__(size_average, reduce, reduction)
        self.register_buffer("weight", weight)
        self.register_buffer("pos_weight", pos_weight)

    def forward(self, input, target):
        return F.binary_cross_entropy_with_logits(input, target, self.weight,
                                                  reduction=self.reduction,
                                                  pos_weight=self.pos_weight)


def _loss_module(name, fn, params=(), weighted=False, doc=""):
    """A loss module: its constructor takes `params` (name, default) and
    reduction, forward(*inputs) calls fn(*inputs, **params, reduction=...)."""
    base = _WeightedLoss if weighted else _Loss

    def __init__(self, *args, size_average=None, reduce=None, reduction="mean", **kwargs):
        names = [p for p, _ in params]
        values = dict(params)
        if len(args) > len(names) + (1 if weighted else 0):
            raise TypeError(f"{name}() takes at most {len(names)} positional arguments")
        if weighted:
            weight, args = (args[0] if args else kwargs.pop("weight", None)), args[1:]
            base.__init__(self, weight, size_average, reduce, reduction)
        else:
            base.__init__(self, size_average, reduce, reduction)
        values.update(zip(names, args))
        for k, v in kwargs.items():
            if k not in values:
                raise TypeError(f"{name}() got an unexpected keyword argument '{k}'")
            values[k] = v
        for k, v in values.items():
            setattr(self, k, v)

    def forward(self, *inputs):
        extra = {p: getattr(self, p) for p, _ in params}
        if weighted:
            extra["weight"] = self.weight
        return fn(*inputs, **extra, reduction=self.reduction)

    return type(name, (base,), {"__init__": __init__, "forward": forward, "__doc__": doc})


SmoothL1Loss = _loss_module("SmoothL1Loss", F.smooth_l1_loss, [("beta", 1.0)], doc="F.smooth_l1_loss")
HuberLoss = _loss_module("HuberLoss", F.huber_loss, [("delta", 1.0)], doc="F.huber_loss")
KLDivLoss = _loss_module("KLDivLoss", F.kl_div, [("log_target", False)], doc="F.kl_div")
BCELoss = _loss_module("BCELoss", F.binary_cross_entropy, weighted=True, doc="F.binary_cross_entropy")
MarginRankingLoss = _loss_module("MarginRankingLoss", F.margin_ranking_loss, [("margin", 0.0)])
HingeEmbeddingLoss = _loss_module("HingeEmbeddingLoss", F.hinge_embedding_loss, [("margin", 1.0)])
SoftMarginLoss = _loss_module("SoftMarginLoss", F.soft_margin_loss)
MultiLabelSoftMarginLoss = _loss_module("MultiLabelSoftMarginLoss", F.multilabel_soft_margin_loss, weighted=True)
CosineEmbeddingLoss = _loss_module("CosineEmbeddingLoss", F.cosine_embedding_loss, [("margin", 0.0)])
TripletMarginLoss = _loss_module("TripletMarginLoss", F.triplet_margin_loss,
                                 [("margin", 1.0), ("p", 2.0), ("eps", 1e-6), ("swap", False)])
PoissonNLLLoss = _loss_module("PoissonNLLLoss", F.poisson_nll_loss,
                              [("log_input", True), ("full", False), ("eps", 1e-8)])
GaussianNLLLoss = _loss_module("GaussianNLLLoss", F.gaussian_nll_loss, [("full", False), ("eps", 1e-6)])


class CosineSimilarity(Module):
    def __init__(self, dim=1, eps=1e-8):
        super().__init__()
        self.dim, self.eps = dim, eps

    def forward(self, x1, x2):
        return F.cosine_similarity(x1, x2, self.dim, self.eps)


class PairwiseDistance(Module):
    def __init__(self, p=2.0, eps=1e-6, keepdim=False):
        super().__init__()
        self.norm, self.eps, self.keepdim = p, eps, keepdim

    def forward(self, x1, x2):
        return F.pairwise_distance(x1, x2, self.norm, self.eps, self.keepdim)


class CTCLoss(_Loss):
    def __init__(self, blank=0, reduction="mean", zero_infinity=False):
        super().__init__(reduction=reduction)
        self.blank, self.zero_infinity = blank, zero_infinity

    def forward(self, log_probs, targets, input_lengths, target_lengths):
        return F.ctc_loss(log_probs, targets, input_lengths, target_lengths, self.blank, self.reduction,
                          self.zero_infinity)
MultiMarginLoss = _loss_module("MultiMarginLoss", lambda x, y, p, margin, weight, reduction: F.multi_margin_loss(
    x, y, p, margin, weight, reduction=reduction), [("p", 1), ("margin", 1.0)], weighted=True,
    doc="F.multi_margin_loss")
MultiLabelMarginLoss = _loss_module("MultiLabelMarginLoss", F.multilabel_margin_loss, doc="F.multilabel_margin_loss")


class TripletMarginWithDistanceLoss(_Loss):
    """F.triplet_margin_with_distance_loss."""

    def __init__(self, *, distance_function=None, margin=1.0, swap=False, reduction="mean"):
        super().__init__(reduction=reduction)
        self.distance_function, self.margin, self.swap = distance_function, margin, swap

    def forward(self, anchor, positive, negative):
        return F.triplet_margin_with_distance_loss(anchor, positive, negative, distance_function=self.distance_function,
                                                   margin=self.margin, swap=self.swap, reduction=self.reduction)
