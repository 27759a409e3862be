"""Sequential, ModuleList and ModuleDict, ParameterList and ParameterDict."""

from collections import OrderedDict

from ... import _C
from .module import Module



class Container(Module):
    """Deprecated: a Module with the keyword arguments as its submodules."""

    def __init__(self, **kwargs):
        import warnings
        super().__init__()
        warnings.warn("nn.Container is deprecated. All of it's functionality is now implemented in nn.Module. "
                      "Subclass that instead.")
        for key, value in kwargs.items():
            self.add_module(key, value)

class _Indexed(Module):
    """What Sequential and ModuleList share: integer indexing (negative
    too), length, iteration in order, append, and renumbering "0", "1", ...
    after a removal, as PyTorch does."""

    def _index(self, idx):
        n = len(self)
        idx = idx.__index__()
        if not -n <= idx < n:
            raise IndexError(f"index {idx} is out of range")
        return idx % n

    def _renumber(self, modules):
        self._modules.clear()
        for i, m in enumerate(modules):
            self.add_module(str(i), m)

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules.values())

    def append(self, module):
        self.add_module(str(len(self)), module)
        return self


class Sequential(_Indexed):
    """Modules applied in order, each to the previous one's output. Built
    from modules (named "0", "1", ...) or from an OrderedDict of them."""

    def __init__(self, *args):
        super().__init__()
        if len(args) == 1 and isinstance(args[0], OrderedDict):
            for name, m in args[0].items():
                self.add_module(name, m)
        else:
            for i, m in enumerate(args):
                self.add_module(str(i), m)

    def __getitem__(self, idx):
        if isinstance(idx, slice):
            return type(self)(OrderedDict(list(self._modules.items())[idx]))
        return list(self._modules.values())[self._index(idx)]

    def __setitem__(self, idx, module):
        key = list(self._modules)[self._index(idx)]
        self.add_module(key, module)

    def __delitem__(self, idx):
        keys = list(self._modules)
        for k in (keys[idx] if isinstance(idx, slice) else [keys[self._index(idx)]]):
            del self._modules[k]
        self._renumber(list(self._modules.values()))

    def forward(self, input):
        for m in self._modules.values():
            input = m(input)
        return input


class ModuleList(_Indexed):
    """A list of modules, registered as submodules "0", "1", ..."""

    def __init__(self, modules=None):
        super().__init__()
        if modules is not None:
            self.extend(modules)

    def __getitem__(self, idx):
        if isinstance(idx, slice):
            return type(self)(list(self._modules.values())[idx])
        return self._modules[str(self._index(idx))]

    def __setitem__(self, idx, module):
        self.add_module(str(self._index(idx)), module)

    def __delitem__(self, idx):
        items = list(self._modules.values())
        del items[idx if isinstance(idx, slice) else self._index(idx)]
        self._renumber(items)

    def __iadd__(self, modules):
        return self.extend(modules)

    def extend(self, modules):
        for m in modules:
            self.append(m)
        return self

    def insert(self, index, module):
        items = list(self._modules.values())
        items.insert(index, module)
        self._renumber(items)

    def forward(self, *args, **kwargs):
        raise NotImplementedError("ModuleList is not callable: iterate over its modules")


class ModuleDict(Module):
    """A dict of modules, registered under their keys."""

    def __init__(self, modules=None):
        super().__init__()
        if modules is not None:
            self.update(modules)

    def __getitem__(self, key):
        return self._modules[key]

    def __setitem__(self, key, module):
        self.add_module(key, module)

    def __delitem__(self, key):
        del self._modules[key]

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules)

    def __contains__(self, key):
        return key in self._modules

    def keys(self):
        return self._modules.keys()

    def items(self):
        return self._modules.items()

    def values(self):
        return self._modules.values()

    def pop(self, key):
        m = self._modules[key]
        del self._modules[key]
        return m

    def clear(self):
        self._modules.clear()

    def update(self, modules):
        items = modules.items() if hasattr(modules, "items") else modules
        for k, m in items:
            self[k] = m

    def forward(self, *args, **kwargs):
        raise NotImplementedError("ModuleDict is not callable: index it by key")


def _as_parameter(value):
    """PyTorch's containers wrap a plain tensor in a Parameter."""
    from ..parameter import Parameter
    if value is None or isinstance(value, Parameter):
        return value
    if isinstance(value, _C._TensorBase):
        return Parameter(value)
    raise TypeError(f"a parameter container holds Parameters or tensors, not a {type(value).__name__}")


class ParameterList(Module):
    """A list of parameters, registered as "0", "1", ... (tensors given to
    it become Parameters)."""

    def __init__(self, values=None):
        super().__init__()
        if values is not None:
            self.extend(values)

    def _index(self, idx):
        n = len(self._parameters)
        i = idx + n if idx < 0 else idx
        if not 0 <= i < n:
            raise IndexError(f"index {idx} is out of range")
        return i

    def __len__(self):
        return len(self._parameters)

    def __iter__(self):
        return iter(self._parameters.values())

    def __getitem__(self, idx):
        if isinstance(idx, slice):
            return type(self)(list(self._parameters.values())[idx])
        return self._parameters[str(self._index(idx))]

    def __setitem__(self, idx, param):
        self.register_parameter(str(self._index(idx)), _as_parameter(param))

    def __iadd__(self, values):
        return self.extend(values)

    def append(self, value):
        self.register_parameter(str(len(self._parameters)), _as_parameter(value))
        return self

    def extend(self, values):
        for v in values:
            self.append(v)
        return self

    def extra_repr(self):
        return "\n".join(f"({k}): Parameter containing: [{p.dtype} of size {'x'.join(map(str, p.shape))}]"
                         for k, p in self._parameters.items())

    def forward(self, *args, **kwargs):
        raise NotImplementedError("ParameterList is not callable: iterate over its parameters")


class ParameterDict(Module):
    """A dict of parameters, registered under their keys."""

    def __init__(self, parameters=None):
        super().__init__()
        if parameters is not None:
            self.update(parameters)

    def __getitem__(self, key):
        return self._parameters[key]

    def __setitem__(self, key, param):
        self.register_parameter(key, _as_parameter(param))

    def __delitem__(self, key):
        del self._parameters[key]

    def __len__(self):
        return len(self._parameters)

    def __iter__(self):
        return iter(self._parameters)

    def __contains__(self, key):
        return key in self._parameters

    def keys(self):
        return self._parameters.keys()

    def items(self):
        return self._parameters.items()

    def values(self):
        return self._parameters.values()

    def get(self, key, default=None):
        return self._parameters.get(key, default)

    def pop(self, key):
        p = self._parameters[key]
        del self._parameters[key]
        return p

    def clear(self):
        self._parameters.clear()

    def update(self, parameters):
        items = parameters.items() if hasattr(parameters, "items") else parameters
        for k, p in items:
            self[k] = p

    def extra_repr(self):
        return "\n".join(f"({k}): Parameter containing: [{p.dtype} of size {'x'.join(map(str, p.shape))}]"
                         for k, p in self._parameters.items())

    def forward(self, *args, **kwargs):
        raise NotImplementedError("ParameterDict is not callable: index it by key")
