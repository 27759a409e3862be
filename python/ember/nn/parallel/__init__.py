"""ember.nn.parallel: DistributedDataParallel (on ember.distributed)."""
from .distributed import DistributedDataParallel  # noqa: F401
