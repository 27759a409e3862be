from .activation import (ELU, GELU, Hardtanh, LeakyReLU, LogSigmoid, LogSoftmax, Mish, ReLU,
                         ReLU6, Sigmoid, SiLU, Softmax, Softplus, Tanh)
from .attention import MultiheadAttention
from .container import ModuleDict, ModuleList, Sequential
from .conv import (Conv1d, Conv2d, Conv3d, ConvTranspose1d, ConvTranspose2d,
                   ConvTranspose3d)
from .dropout import Dropout
from .flatten import Flatten, Unflatten
from .linear import Identity, Linear
from .loss import BCEWithLogitsLoss, CrossEntropyLoss, L1Loss, MSELoss, NLLLoss
from .module import Module
from .normalization import BatchNorm1d, BatchNorm2d, LayerNorm, RMSNorm
from .pooling import (AdaptiveAvgPool1d, AdaptiveAvgPool2d, AdaptiveAvgPool3d, AdaptiveMaxPool1d,
                      AdaptiveMaxPool2d, AdaptiveMaxPool3d, AvgPool1d, AvgPool2d, AvgPool3d, Fold,
                      MaxPool1d, MaxPool2d, MaxPool3d, Unfold)
from .sparse import Embedding

__all__ = [n for n in dir() if not n.startswith("_")]
