"""ember.optim: optimizers (SGD, Adam, AdamW and RMSprop as fused C kernels;
Adagrad, Adadelta, Adamax, NAdam, RAdam, ASGD and Rprop composed of ember
ops; LBFGS; SparseAdam, which raises as ember has no sparse gradients),
learning-rate schedules, and stochastic weight averaging (swa_utils)."""

from . import lr_scheduler  # noqa: F401
from .adam import Adam, AdamW  # noqa: F401
from .composed import ASGD, Adadelta, Adagrad, Adamax, NAdam, RAdam, Rprop, SparseAdam  # noqa: F401
from .lbfgs import LBFGS  # noqa: F401
from .optimizer import Optimizer  # noqa: F401
from .rmsprop import RMSprop  # noqa: F401
from .sgd import SGD  # noqa: F401
from . import swa_utils  # noqa: F401
