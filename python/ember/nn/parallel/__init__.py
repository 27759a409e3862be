"""ember.nn.parallel: DistributedDataParallel (on ember.distributed), and
DataParallel (the module itself: ember has no CUDA devices yet)."""
from .data_parallel import DataParallel, data_parallel  # noqa: F401
from .distributed import DistributedDataParallel  # noqa: F401
