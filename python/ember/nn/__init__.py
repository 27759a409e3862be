"""ember.nn: modules, parameters, functional, init, in PyTorch's idiom."""

from . import functional, init, parallel, utils  # noqa: F401
from .modules import *  # noqa: F401,F403
from .parameter import Parameter  # noqa: F401
