"""CompiledModule: what ember.compile(model) returns."""

from ... import compiler
from .module import Module


class CompiledModule(Module):
    """Calls run model.forward compiled. The wrapper holds the model itself
    (parameters, buffers and state dict are the model's, under the prefix
    `_orig_mod.` as in PyTorch), and the training mode of every submodule
    is one of the guards, so train() and eval() each get their own
    specialisation."""

    def __init__(self, module, cache_limit=None, passes=None, dynamic=None, fullgraph=False):
        super().__init__()
        self._orig_mod = module
        forward = module.forward

        def compiled_forward(training_modes, *args, **kwargs):
            return forward(*args, **kwargs)
        compiled_forward.__name__ = compiled_forward.__qualname__ = \
            f"{type(module).__name__}.forward"
        object.__setattr__(self, "_compiled", compiler.compile(compiled_forward,
                                                               cache_limit=cache_limit, passes=passes,
                                                               dynamic=dynamic, fullgraph=fullgraph))

    def forward(self, *args, **kwargs):
        # the modes as an argument: a string is guarded by its value
        modes = "".join("t" if m.training else "e" for m in self._orig_mod.modules())
        return self._compiled(modes, *args, **kwargs)

    def train(self, mode=True):
        self._orig_mod.train(mode)
        object.__setattr__(self, "training", mode)
        return self

    def __getattr__(self, name):
        try:
            return super().__getattr__(name)
        except AttributeError:
            return getattr(self._orig_mod, name)

    def _specializations(self):
        return self._compiled._specializations()

    def _stats(self):
        return self._compiled._stats()
