"""nn.Module: the base class of models, PyTorch's contract.

A module keeps three ordered registries, filled by attribute assignment:
parameters (nn.Parameter), buffers (register_buffer: running statistics
and other state that is saved but not trained) and submodules. Everything
else (parameters(), state_dict(), train(), to(), repr) walks them."""

from collections import OrderedDict, namedtuple

from ... import _C, cuda
from ..._tensor import device as _device
from ...autograd import _zero_grads, no_grad
from ..parameter import Parameter


class _IncompatibleKeys(namedtuple("IncompatibleKeys", ["missing_keys", "unexpected_keys"])):
    def __repr__(self):
        if not self.missing_keys and not self.unexpected_keys:
            return "<All keys matched successfully>"
        return super().__repr__()

    __str__ = __repr__


def _addindent(s, n):
    lines = s.split("\n")
    if len(lines) == 1:
        return s
    return lines[0] + "\n" + "\n".join(" " * n + line for line in lines[1:])


class Module:
    """Base class for all neural network modules: subclass it, create
    parameters and submodules in __init__ (after super().__init__()), and
    write forward()."""

    training: bool

    def __init__(self):
        object.__setattr__(self, "training", True)
        object.__setattr__(self, "_parameters", OrderedDict())
        object.__setattr__(self, "_buffers", OrderedDict())
        object.__setattr__(self, "_non_persistent_buffers_set", set())
        object.__setattr__(self, "_modules", OrderedDict())
        object.__setattr__(self, "_forward_hooks", OrderedDict())
        object.__setattr__(self, "_forward_pre_hooks", OrderedDict())

    def forward(self, *args, **kwargs):
        raise NotImplementedError(f'Module [{type(self).__name__}] is missing the required '
                                  f'"forward" function')

    def __call__(self, *args, **kwargs):
        if _C._is_tracing():
            # a compiled graph bakes in this module's mode and holds its
            # tensors: guard both, so train()/eval() or a new Parameter
            # makes the next call trace again
            _C._trace_guard_items(self.__dict__, ("training",))
            for d in (self._parameters, self._buffers, self._modules):
                _C._trace_guard_items(d, d.keys())
        for hook in self._forward_pre_hooks.values():
            r = hook(self, args)
            if r is not None:
                args = r if isinstance(r, tuple) else (r,)
        out = self.forward(*args, **kwargs)
        for hook in self._forward_hooks.values():
            r = hook(self, args, out)
            if r is not None:
                out = r
        return out

    def register_forward_hook(self, hook):
        return _Handle(self._forward_hooks, hook)

    def register_forward_pre_hook(self, hook):
        return _Handle(self._forward_pre_hooks, hook)

    # ---- registration ----

    def _check_name(self, name, kind):
        if "_parameters" not in self.__dict__:
            raise AttributeError(f"cannot assign {kind} before Module.__init__() call")
        if not isinstance(name, str):
            raise TypeError(f"{kind} name should be a string. Got {type(name).__name__}")
        if "." in name or name == "":
            raise KeyError(f"{kind} name can't contain \".\" or be empty, got {name!r}")

    def register_parameter(self, name, param):
        self._check_name(name, "parameter")
        if hasattr(self, name) and name not in self._parameters:
            raise KeyError(f"attribute '{name}' already exists")
        if param is not None and not isinstance(param, Parameter):
            raise TypeError(f"cannot assign '{type(param).__name__}' object to parameter '{name}' "
                            f"(ember.nn.Parameter or None required)")
        self._parameters[name] = param

    def register_buffer(self, name, tensor, persistent=True):
        self._check_name(name, "buffer")
        if hasattr(self, name) and name not in self._buffers:
            raise KeyError(f"attribute '{name}' already exists")
        if tensor is not None and not isinstance(tensor, _C._TensorBase):
            raise TypeError(f"cannot assign '{type(tensor).__name__}' object to buffer '{name}' "
                            f"(ember Tensor or None required)")
        self._buffers[name] = tensor
        if persistent:
            self._non_persistent_buffers_set.discard(name)
        else:
            self._non_persistent_buffers_set.add(name)

    def add_module(self, name, module):
        if module is not None and not isinstance(module, Module):
            raise TypeError(f"{type(module).__name__} is not a Module subclass")
        self._check_name(name, "module")
        if hasattr(self, name) and name not in self._modules:
            raise KeyError(f"attribute '{name}' already exists")
        self._modules[name] = module

    register_module = add_module

    def __setattr__(self, name, value):
        d = self.__dict__
        if isinstance(value, Parameter):
            self._check_name(name, "parameter")
            for reg in (d, d["_buffers"], d["_modules"]):
                reg.pop(name, None)
            d["_parameters"][name] = value
        elif "_parameters" in d and name in d["_parameters"]:
            if value is not None:
                raise TypeError(f"cannot assign '{type(value).__name__}' as parameter '{name}' "
                                f"(ember.nn.Parameter or None expected)")
            d["_parameters"][name] = None
        elif isinstance(value, Module):
            self._check_name(name, "module")
            for reg in (d, d["_parameters"], d["_buffers"]):
                reg.pop(name, None)
            d["_modules"][name] = value
        elif "_modules" in d and name in d["_modules"]:
            if value is not None:
                raise TypeError(f"cannot assign '{type(value).__name__}' as child module '{name}' "
                                f"(ember.nn.Module or None expected)")
            d["_modules"][name] = None
        elif "_buffers" in d and name in d["_buffers"]:
            if value is not None and not isinstance(value, _C._TensorBase):
                raise TypeError(f"cannot assign '{type(value).__name__}' as buffer '{name}' "
                                f"(ember Tensor or None expected)")
            d["_buffers"][name] = value
        else:
            object.__setattr__(self, name, value)

    def __getattr__(self, name):
        d = self.__dict__
        for reg in ("_parameters", "_buffers", "_modules"):
            if reg in d and name in d[reg]:
                return d[reg][name]
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    def __delattr__(self, name):
        for reg in (self._parameters, self._buffers, self._modules):
            if name in reg:
                del reg[name]
                self._non_persistent_buffers_set.discard(name)
                return
        object.__delattr__(self, name)

    def __dir__(self):
        return sorted(set(dir(type(self))) | set(self.__dict__) | set(self._parameters)
                      | set(self._buffers) | set(self._modules))

    def __setstate__(self, state):
        self.__dict__.update(state)

    # ---- traversal ----

    def named_modules(self, memo=None, prefix="", remove_duplicate=True):
        if memo is None:
            memo = set()
        if remove_duplicate:
            if id(self) in memo:
                return
            memo.add(id(self))
        yield prefix, self
        for name, m in self._modules.items():
            if m is None:
                continue
            yield from m.named_modules(memo, prefix + ("." if prefix else "") + name,
                                       remove_duplicate)

    def modules(self):
        for _, m in self.named_modules():
            yield m

    def named_children(self):
        seen = set()
        for name, m in self._modules.items():
            if m is not None and id(m) not in seen:
                seen.add(id(m))
                yield name, m

    def children(self):
        for _, m in self.named_children():
            yield m

    def _named_members(self, registry, prefix, recurse, remove_duplicate=True):
        seen = set()
        # a module reached by two names is walked under both unless deduplicating
        mods = self.named_modules(prefix=prefix, remove_duplicate=remove_duplicate) if recurse \
            else [(prefix, self)]
        for mod_prefix, m in mods:
            for name, v in getattr(m, registry).items():
                if v is None or (remove_duplicate and id(v) in seen):
                    continue
                seen.add(id(v))
                yield mod_prefix + ("." if mod_prefix else "") + name, v

    def named_parameters(self, prefix="", recurse=True, remove_duplicate=True):
        yield from self._named_members("_parameters", prefix, recurse, remove_duplicate)

    def parameters(self, recurse=True):
        for _, p in self.named_parameters(recurse=recurse):
            yield p

    def named_buffers(self, prefix="", recurse=True, remove_duplicate=True):
        yield from self._named_members("_buffers", prefix, recurse, remove_duplicate)

    def buffers(self, recurse=True):
        for _, b in self.named_buffers(recurse=recurse):
            yield b

    def get_submodule(self, target):
        m = self
        for part in target.split(".") if target else []:
            if part not in m._modules:
                raise AttributeError(f"{type(m).__name__} has no attribute `{part}`")
            m = m._modules[part]
        return m

    def get_parameter(self, target):
        mod, _, name = target.rpartition(".")
        m = self.get_submodule(mod)
        if name not in m._parameters:
            raise AttributeError(f"{type(m).__name__} has no parameter `{name}`")
        return m._parameters[name]

    # ---- modes and in-place transforms ----

    def train(self, mode=True):
        if not isinstance(mode, bool):
            raise ValueError("training mode is expected to be boolean")
        for m in self.modules():
            object.__setattr__(m, "training", mode)
        return self

    def eval(self):
        return self.train(False)

    def requires_grad_(self, requires_grad=True):
        for p in self.parameters():
            p.requires_grad_(requires_grad)
        return self

    def apply(self, fn):
        for m in self.children():
            m.apply(fn)
        fn(self)
        return self

    def zero_grad(self, set_to_none=True):
        _zero_grads(self.parameters(), set_to_none)

    def _apply(self, fn):
        """fn applied to every parameter and buffer, recursively.
        Parameters keep their identity (their data is swapped, as PyTorch's
        `param.data = fn(param)` does), so an optimizer built before
        model.double() still holds the model's parameters. Each distinct
        tensor is converted once, so tied weights stay tied."""
        done = {}  # id(old) -> (old, its replacement); old kept alive so its id stays unique
        for m in self.modules():
            for p in m._parameters.values():
                if p is None or id(p) in done:
                    continue
                with no_grad():
                    new = fn(p)
                if new is not p:
                    grad = p.grad
                    p.grad = None
                    p.data = new
                    if grad is not None:
                        p.grad = fn(grad)
                done[id(p)] = (p, p)
            for name, b in m._buffers.items():
                if b is not None:
                    if id(b) not in done:
                        done[id(b)] = (b, fn(b))
                    m._buffers[name] = done[id(b)][1]
        return self

    def to(self, *args, **kwargs):
        """to(dtype), to(device), to(device, dtype), to(tensor): floating
        parameters and buffers converted, or moved to the device."""
        dtype = kwargs.pop("dtype", None)
        device = kwargs.pop("device", None)
        kwargs.pop("non_blocking", None)
        memory_format = kwargs.pop("memory_format", None)
        if kwargs:
            raise TypeError(f"to() got unexpected keyword arguments {sorted(kwargs)}")
        for a in args:
            if isinstance(a, _C.dtype):
                dtype = a
            elif isinstance(a, _C._TensorBase):
                dtype = a.dtype
            else:
                device = a
        if device is not None:
            device = _device(device)
            if device.type == "cuda" and not cuda.is_available():
                raise cuda._unavailable("Module.to", str(device))
        if dtype is not None and not dtype.is_floating_point:
            raise TypeError(f"nn.Module.to only accepts floating point dtypes, but got desired "
                            f"dtype={dtype}")
        if memory_format is not None:
            # Accepted, and the parameters stay row-major: ember's
            # convolutions take either layout, its optimizers update
            # parameters as flat memory laid out as their gradients are
            # (row-major), and the values are the same (the input batch may
            # be channels-last all the same).
            from ..._memory_format import _check
            _check(memory_format, "Module.to")
        if dtype is None and device is None:
            return self

        def convert(t):
            if dtype is not None and t.dtype.is_floating_point:
                t = t.to(dtype)
            return t if device is None or t.device == device else t.to(device)
        return self._apply(convert)

    def to_empty(self, *, device, recurse=True):
        """Every parameter and buffer replaced by an uninitialised tensor of
        its shape and dtype on `device` (PyTorch's: how a module built on
        the meta device gets memory; initialise it afterwards, e.g. with
        load_state_dict or reset_parameters)."""
        if not recurse:
            raise NotImplementedError("Module.to_empty(recurse=False) is not implemented in ember yet")
        from ..._creation import empty_like
        return self._apply(lambda t: empty_like(t, device=device))

    def float(self):
        return self.to(_C.float32)

    def double(self):
        return self.to(_C.float64)

    def half(self):
        return self.to(_C.float16)

    def bfloat16(self):
        return self.to(_C.bfloat16)

    def cpu(self):
        return self.to("cpu")

    def cuda(self, device=None):
        return self.to(cuda._device(device))

    # ---- state ----

    def _save_to_state_dict(self, destination, prefix, keep_vars):
        for name, p in self._parameters.items():
            if p is not None:
                destination[prefix + name] = p if keep_vars else p.detach()
        for name, b in self._buffers.items():
            if b is not None and name not in self._non_persistent_buffers_set:
                destination[prefix + name] = b if keep_vars else b.detach()

    def state_dict(self, *args, destination=None, prefix="", keep_vars=False):
        """An ordered dict of every parameter and persistent buffer by dotted
        name, sharing their memory (detached unless keep_vars)."""
        if args:
            raise TypeError("state_dict: pass destination, prefix and keep_vars by keyword")
        if destination is None:
            destination = OrderedDict()
        self._save_to_state_dict(destination, prefix, keep_vars)
        for name, m in self._modules.items():
            if m is not None:
                m.state_dict(destination=destination, prefix=prefix + name + ".",
                             keep_vars=keep_vars)
        return destination

    def load_state_dict(self, state_dict, strict=True):
        """Copies the values of state_dict into this module's parameters and
        buffers (same names, same shapes). With strict, missing and
        unexpected keys are an error; either way they are returned."""
        if not hasattr(state_dict, "items"):
            raise TypeError(f"Expected state_dict to be dict-like, got {type(state_dict)}.")
        state_dict = OrderedDict(state_dict)  # (the upgrades below must not touch the caller's)
        for prefix, m in self.named_modules():
            m._upgrade_state_dict(state_dict, prefix + "." if prefix else "")
        missing, unexpected, errors = [], [], []
        own = self.state_dict(keep_vars=True)
        for key, target in own.items():
            if key not in state_dict:
                missing.append(key)
                continue
            value = state_dict[key]
            if not isinstance(value, _C._TensorBase):
                errors.append(f'While copying the parameter named "{key}", expected a Tensor '
                              f'from checkpoint but received {type(value).__name__}')
                continue
            if tuple(value.shape) != tuple(target.shape):
                errors.append(f"size mismatch for {key}: copying a param with shape "
                              f"{_C.Size(value.shape)} from checkpoint, the shape in current "
                              f"model is {_C.Size(target.shape)}.")
                continue
            with no_grad():
                target.copy_(value)
        unexpected = [k for k in state_dict if k not in own]
        if strict:
            if unexpected:
                errors.insert(0, "Unexpected key(s) in state_dict: " +
                              ", ".join(f'"{k}"' for k in unexpected) + ". ")
            if missing:
                errors.insert(0, "Missing key(s) in state_dict: " +
                              ", ".join(f'"{k}"' for k in missing) + ". ")
        if errors:
            raise RuntimeError(f"Error(s) in loading state_dict for {type(self).__name__}:\n\t" +
                               "\n\t".join(errors))
        return _IncompatibleKeys(missing, unexpected)

    def _upgrade_state_dict(self, state_dict, prefix):
        """Fills in, in place, entries this module can supply for state dicts
        written before they existed (BatchNorm's num_batches_tracked)."""

    # ---- printing ----

    def extra_repr(self):
        return ""

    def _get_name(self):
        return type(self).__name__

    def __repr__(self):
        lines = []
        extra = self.extra_repr()
        if extra:
            lines = extra.split("\n")
        children = [f"({name}): " + _addindent(repr(m), 2) for name, m in self._modules.items()]
        body = lines + children
        s = self._get_name() + "("
        if body:
            if len(lines) == 1 and not children:
                s += lines[0]
            else:
                s += "\n  " + "\n  ".join(body) + "\n"
        return s + ")"


class _Handle:
    """What register_*_hook returns: remove() takes the hook out again."""
    _next = 0

    def __init__(self, registry, hook):
        _Handle._next += 1
        self.id = _Handle._next
        self.registry = registry
        registry[self.id] = hook

    def remove(self):
        self.registry.pop(self.id, None)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.remove()
