"""DataParallel, as PyTorch's on a machine with no CUDA device (ember has
none yet): the wrapped module runs as it is, on the whole batch, and its
parameters appear under `module.` in the state dict, as they do for
PyTorch, so checkpoints move between the two."""

from ..modules.module import Module


class DataParallel(Module):
    def __init__(self, module, device_ids=None, output_device=None, dim=0):
        super().__init__()
        self.module = module
        self.device_ids = []  # (PyTorch's, when no GPU is visible)
        self.output_device = None
        self.dim = dim

    def forward(self, *inputs, **kwargs):
        return self.module(*inputs, **kwargs)


def data_parallel(module, inputs, device_ids=None, output_device=None, dim=0, module_kwargs=None):
    """module(*inputs), as PyTorch's without GPUs."""
    if not isinstance(inputs, tuple):
        inputs = (inputs,) if inputs is not None else ()
    return module(*inputs, **(module_kwargs or {}))
