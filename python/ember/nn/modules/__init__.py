from .activation import (ELU, GELU, Hardtanh, LeakyReLU, LogSigmoid, LogSoftmax, Mish, ReLU,
                         ReLU6, Sigmoid, SiLU, Softmax, Softplus, Tanh)
from .attention import MultiheadAttention
from .container import ModuleDict, ModuleList, Sequential
from .conv import Conv1d, Conv2d
from .dropout import Dropout
from .flatten import Flatten, Unflatten
from .linear import Identity, Linear
from .loss import BCEWithLogitsLoss, CrossEntropyLoss, L1Loss, MSELoss, NLLLoss
from .module import Module
from .normalization import BatchNorm1d, BatchNorm2d, LayerNorm, RMSNorm
from .pooling import AdaptiveAvgPool2d, AvgPool2d, MaxPool2d
from .sparse import Embedding

__all__ = [n for n in dir() if not n.startswith("_")]
