"""ember.autograd.profiler, as torch.autograd.profiler: the legacy
spelling of ember.profiler (the same recording, events and tables).

    with ember.autograd.profiler.profile(record_shapes=True) as prof:
        model(x).sum().backward()
    print(prof.key_averages().table(sort_by="self_cpu_time_total"))
"""

from ..profiler import EventList, FunctionEvent, FunctionEventAvg, record_function
from ..profiler import profile as _profile

__all__ = ["profile", "record_function", "EventList", "FunctionEvent", "FunctionEventAvg"]


class profile(_profile):
    """torch.autograd.profiler.profile: records while enabled, in a
    `with`; use_cuda is refused (no CUDA device yet), the other options
    are accepted and ignored."""

    def __init__(self, enabled=True, *, use_cuda=False, record_shapes=False, with_flops=False, profile_memory=False,
                 with_stack=False, with_modules=False, use_kineto=False, use_cpu=True, experimental_config=None):
        super().__init__(record_shapes=record_shapes, use_cuda=use_cuda, enabled=enabled)
