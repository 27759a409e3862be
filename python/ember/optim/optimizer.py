"""optim.Optimizer: parameter groups, per-parameter state, zero_grad and
state_dict in PyTorch's format. The updates themselves are fused C kernels
(include/ember/optim.h) that each subclass calls once per group.

Inside a function @ember.compile is tracing, a fused kernel would be
invisible, so step() runs each subclass's _update_traced instead: the same
arithmetic, in the same order and dtypes, written as ember ops the trace
records (the compiler fuses them again). The group's lr becomes an input of
the graph, read from the group at every call, so schedulers keep working;
its other hyperparameters are constants, guarded by value."""

import copy
from collections import defaultdict

from .. import _C
from ..autograd import _zero_grads, enable_grad, no_grad


class _ParamGroup(dict):
    """A parameter group: a dict, whose writes a trace is told about. A
    compiled graph reads 'lr' at every call and holds the other values as
    constants; a write inside a compiled function (a scheduler stepped in
    it) would not happen again in later calls, so it fails the trace."""

    def __setitem__(self, key, value):
        if _C._is_tracing():
            _C._note_side_effect(f"setting the param group's {key!r}")
        super().__setitem__(key, value)


class _RequiredParameter:
    def __repr__(self):
        return "<required parameter>"


required = _RequiredParameter()


class Optimizer:
    def __init__(self, params, defaults):
        self.defaults = defaults
        self.state = defaultdict(dict)
        self.param_groups = []
        if isinstance(params, _C._TensorBase):
            raise TypeError("params argument given to the optimizer should be an iterable of "
                            "Tensors or dicts, but got " + type(params).__name__)
        groups = list(params)
        if not groups:
            raise ValueError("optimizer got an empty parameter list")
        if not isinstance(groups[0], dict):
            groups = [{"params": groups}]
        for g in groups:
            self.add_param_group(g)

    def add_param_group(self, param_group):
        if not isinstance(param_group, dict):
            raise TypeError(f"param_group must be a dict, got {type(param_group).__name__}")
        params = param_group["params"]
        params = [params] if isinstance(params, _C._TensorBase) else list(params)
        for p in params:
            if not isinstance(p, _C._TensorBase):
                raise TypeError("optimizer can only optimize Tensors, but one of the params is " +
                                type(p).__name__)
            if not p.is_leaf:
                raise ValueError("can't optimize a non-leaf Tensor")
        group = _ParamGroup(param_group, params=params)
        for k, v in self.defaults.items():
            if v is required and k not in group:
                raise ValueError(f"parameter group didn't specify a value of required "
                                 f"optimization parameter {k}")
            group.setdefault(k, v)
        seen = {id(p) for g in self.param_groups for p in g["params"]}
        if any(id(p) in seen for p in params):
            raise ValueError("some parameters appear in more than one parameter group")
        self.param_groups.append(group)

    def zero_grad(self, set_to_none=True):
        _zero_grads((p for g in self.param_groups for p in g["params"]), set_to_none)

    # Does _update take the fused steps (include/ember/optim.h), which a
    # device other than the CPU may have too (the CUDA device does)?
    _fused_steps = False

    @staticmethod
    def _fused_step(step, ps, *rest):
        """step(ps, *rest), a fused kernel over flat memory, on parameters
        that are not contiguous (a Parameter made of a transpose, say) as on
        contiguous copies of them, written back after: PyTorch's optimizers
        take any parameter."""
        work = [p if p.is_contiguous() else p.contiguous() for p in ps]
        step(work, *rest)
        for p, w in zip(ps, work):
            if w is not p:
                p.copy_(w)

    def _with_grads(self, group):
        """The group's parameters that have a gradient, and their gradients
        (contiguous, as the kernels want them)."""
        ps, gs = [], []
        for p in group["params"]:
            g = p.grad
            if g is None:
                continue
            ps.append(p)
            gs.append(g if g.is_contiguous() else g.contiguous())
        return ps, gs

    @no_grad()
    def step(self, closure=None):
        loss = None
        if closure is not None:
            with enable_grad():
                loss = closure()
        traced = _C._is_tracing()
        if traced:
            # the graph holds the state tensors by identity: a new state
            # (load_state_dict) or a new group makes the next call retrace
            _C._trace_guard_items(self.__dict__, ("state", "param_groups"))
        for group in self.param_groups:
            if traced:
                _C._trace_guard_items(group, [k for k in group if k not in ("params", "lr")])
                self._update_traced(group, _C._trace_scalar_input(group, "lr"))
            elif any(not (p.is_cpu or p.is_meta) for p in group["params"]) and not (
                    self._fused_steps and all(_C._fused_steps_on(p) for p in group["params"])):
                # no fused step for this device (or this optimizer): the
                # update runs as its ember ops (the traced form), on the device
                self._update_traced(group, _C.full((), float(group["lr"]), dtype=_C.float64))
            else:
                self._update(group)
        return loss

    def _update(self, group):
        raise NotImplementedError

    def _traced_state(self, p):
        """self.state[p], its items guarded by identity in the trace."""
        st = self.state[p]
        _C._trace_guard_items(self.state, (p,))
        _C._trace_guard_items(st, tuple(st))
        return st

    def _update_traced(self, group, lr):
        """_update as ember ops; lr is a 0-d float64 tensor."""
        raise NotImplementedError(f"{type(self).__name__}.step() inside a compiled function")

    # ---- state ----

    def state_dict(self):
        """{'state': {index: state}, 'param_groups': [group with 'params' as
        indices]}: parameters numbered in group order, as PyTorch does."""
        index, groups = {}, []
        for g in self.param_groups:
            packed = {k: v for k, v in g.items() if k != "params"}
            ids = []
            for p in g["params"]:
                index.setdefault(id(p), len(index))
                ids.append(index[id(p)])
            packed["params"] = ids
            groups.append(packed)
        state = {index[id(p)]: s for p, s in self.state.items() if id(p) in index}
        return {"state": state, "param_groups": groups}

    def load_state_dict(self, state_dict):
        groups = state_dict["param_groups"]
        if len(groups) != len(self.param_groups):
            raise ValueError("loaded state dict has a different number of parameter groups")
        for mine, theirs in zip(self.param_groups, groups):
            if len(mine["params"]) != len(theirs["params"]):
                raise ValueError("loaded state dict contains a parameter group that doesn't match "
                                 "the size of optimizer's group")
        by_index = {i: p for g_mine, g_theirs in zip(self.param_groups, groups)
                    for i, p in zip(g_theirs["params"], g_mine["params"])}
        self.state = defaultdict(dict)
        for i, s in state_dict["state"].items():
            p = by_index.get(int(i))
            if p is None:
                continue
            self.state[p] = {k: (v.to(p.dtype).clone() if isinstance(v, _C._TensorBase)
                                 and v.dtype.is_floating_point and k != "step"
                                 else copy.deepcopy(v)) for k, v in s.items()}
        for mine, theirs in zip(self.param_groups, groups):
            for k, v in theirs.items():
                if k != "params":
                    mine[k] = v

    def __getstate__(self):
        return {"defaults": self.defaults, "state": self.state, "param_groups": self.param_groups}

    def __setstate__(self, state):
        self.__dict__.update(state)

    def __repr__(self):
        s = type(self).__name__ + " ("
        for i, g in enumerate(self.param_groups):
            s += f"\nParameter Group {i}"
            for k in sorted(g):
                if k != "params":
                    s += f"\n    {k}: {g[k]}"
        return s + "\n)"


def _step_tensor(state, traced=False):
    """Advances the step counter, kept as a 0-d float tensor as PyTorch 1.13
    keeps it. Returns its new value as an int, or in a trace the tensor
    itself (an int read from it would become a constant of the graph)."""
    if "step" not in state:
        state["step"] = _C.zeros(())
    state["step"] += 1
    return state["step"] if traced else int(state["step"].item())
