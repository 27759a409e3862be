"""ember.autograd.functional: derivatives of whole functions, as PyTorch's
torch.autograd.functional: vjp, jvp, jacobian, hessian, vhp, hvp.

All are built on autograd.grad (reverse mode): jvp through the double
backward trick (the vjp of a vjp), jacobian one row per output element.
Inputs are differentiated through fresh leaves (inputs.detach() that
require grad), so the caller's tensors and their .grad are not touched;
results have no history unless create_graph."""

from .. import _C
from . import grad as _grad
from .grad_mode import enable_grad

__all__ = ["vjp", "jvp", "jacobian", "hessian", "vhp", "hvp"]


def _tuple(x, what):
    """(x as a tuple, whether it was one)."""
    if isinstance(x, (tuple, list)):
        for i, t in enumerate(x):
            if not isinstance(t, _C._TensorBase):
                raise TypeError(f"The {what} given to the function must be Tensors, item {i} is {type(t).__name__}")
        return tuple(x), True
    if not isinstance(x, _C._TensorBase):
        raise TypeError(f"The {what} given to the function must be a Tensor or a tuple of Tensors, not "
                        f"{type(x).__name__}")
    return (x,), False


def _leaves(inputs):
    return tuple(t.detach().requires_grad_(t.is_floating_point()) for t in inputs)


def _untuple(x, was_tuple):
    return x if was_tuple else x[0]


def _grads(outputs, inputs, grad_outputs, create_graph):
    """autograd.grad with zeros for inputs the outputs do not depend on."""
    need = [o for o in outputs if o.requires_grad]
    if not need:
        return tuple(i.new_zeros(i.shape) for i in inputs)
    go = None if grad_outputs is None else [g for o, g in zip(outputs, grad_outputs) if o.requires_grad]
    got = _grad(need, inputs, go, retain_graph=True, create_graph=create_graph, allow_unused=True)
    return tuple(i.new_zeros(i.shape) if g is None else g for g, i in zip(got, inputs))


def _check_v(v, outputs, what):
    for t, o in zip(v, outputs):
        if tuple(t.shape) != tuple(o.shape):
            raise RuntimeError(f"{what}: v has shape {tuple(t.shape)} but the function's output has shape "
                               f"{tuple(o.shape)}")


def _done(ts, create_graph):
    return tuple(t if create_graph else t.detach() for t in ts)


def vjp(func, inputs, v=None, create_graph=False, strict=False):
    """(func(inputs), v^T J): the vector-Jacobian product (v may be left out
    for a function with a single-element output)."""
    inputs, in_tuple = _tuple(inputs, "inputs")
    with enable_grad():
        xs = _leaves(inputs)
        outputs, out_tuple = _tuple(func(*xs), "outputs of the user-provided function")
        if v is None:
            if len(outputs) != 1 or outputs[0].numel() != 1:
                raise RuntimeError("vjp: The vector v can only be None if the user-provided function returns a "
                                   "single Tensor with a single element.")
            v = (outputs[0].new_ones(outputs[0].shape),)
        else:
            v, _ = _tuple(v, "v")
            _check_v(v, outputs, "vjp")
        g = _grads(outputs, xs, v, create_graph)
    return _untuple(_done(outputs, create_graph), out_tuple), _untuple(_done(g, create_graph), in_tuple)


def jvp(func, inputs, v=None, create_graph=False, strict=False):
    """(func(inputs), J v): the Jacobian-vector product, as the vjp of a vjp
    (v may be left out for a single-element input)."""
    inputs, in_tuple = _tuple(inputs, "inputs")
    if v is None:
        if len(inputs) != 1 or inputs[0].numel() != 1:
            raise RuntimeError("jvp: The vector v can only be None if the input to the user-provided function "
                               "is a single Tensor with a single element.")
        v = (inputs[0].new_ones(inputs[0].shape),)
    else:
        v, _ = _tuple(v, "v")
        _check_v(v, inputs, "jvp")
    with enable_grad():
        xs = _leaves(inputs)
        outputs, out_tuple = _tuple(func(*xs), "outputs of the user-provided function")
        us = tuple(o.new_zeros(o.shape).requires_grad_(o.is_floating_point()) for o in outputs)
        g = _grads(outputs, xs, us, create_graph=True)  # u^T J, linear in u
        jv = _grads(g, us, v, create_graph)              # its gradient in u: J v
    return _untuple(_done(outputs, create_graph), out_tuple), _untuple(_done(jv, create_graph), out_tuple)


def jacobian(func, inputs, create_graph=False, strict=False, vectorize=False, strategy="reverse-mode"):
    """d outputs / d inputs: for each output and input, a tensor of shape
    output.shape + input.shape (nested as PyTorch: a tuple per output of a
    tuple per input, unwrapped where func took or returned a single Tensor)."""
    if strategy != "reverse-mode":
        raise NotImplementedError(f"jacobian: strategy={strategy!r} (forward-mode AD) is not implemented in ember; "
                                  "use strategy='reverse-mode'")
    inputs, in_tuple = _tuple(inputs, "inputs")
    with enable_grad():
        xs = _leaves(inputs)
        outputs, out_tuple = _tuple(func(*xs), "outputs of the user-provided function")
        rows = []
        for o in outputs:
            flat = o.reshape(-1)
            per_input = [[] for _ in xs]
            for k in range(flat.numel()):
                g = _grads((flat[k],), xs, None, create_graph)
                for j, gj in enumerate(g):
                    per_input[j].append(gj)
            jac = []
            for j, x in enumerate(xs):
                if per_input[j]:
                    from .._ops import stack
                    jac.append(stack(per_input[j]).reshape(*o.shape, *x.shape))
                else:
                    jac.append(x.new_zeros(tuple(o.shape) + tuple(x.shape)))
            rows.append(_untuple(_done(jac, create_graph), in_tuple))
    return _untuple(tuple(rows), out_tuple)


def hessian(func, inputs, create_graph=False, strict=False, vectorize=False, outer_jacobian_strategy="reverse-mode"):
    """The second derivatives of a function with a single-element output:
    input.shape + input.shape per pair of inputs."""
    inputs, in_tuple = _tuple(inputs, "inputs")

    def first(*xs):
        out = func(*xs)
        if not isinstance(out, _C._TensorBase) or out.numel() != 1:
            raise RuntimeError("hessian: The function given to hessian should return a single Tensor with a "
                               "single element")
        with enable_grad():
            return _grads((out.reshape(()),), xs, None, create_graph=True)

    return jacobian(lambda *xs: _untuple(first(*xs), in_tuple), _untuple(inputs, in_tuple) if in_tuple else inputs[0],
                    create_graph, strategy=outer_jacobian_strategy)


def vhp(func, inputs, v=None, create_graph=False, strict=False):
    """(func(inputs), v^T H) for a function with a single-element output."""
    inputs, in_tuple = _tuple(inputs, "inputs")
    if v is None:
        if len(inputs) != 1 or inputs[0].numel() != 1:
            raise RuntimeError("vhp: The vector v can only be None if the input to the user-provided function "
                               "is a single Tensor with a single element.")
        v = (inputs[0].new_ones(inputs[0].shape),)
    else:
        v, _ = _tuple(v, "v")
        _check_v(v, inputs, "vhp")
    with enable_grad():
        xs = _leaves(inputs)
        out = func(*xs)
        if not isinstance(out, _C._TensorBase) or out.numel() != 1:
            raise RuntimeError("vhp: The function given to vhp should return a single Tensor with a single element")
        g = _grads((out,), xs, None, create_graph=True)
        dot = sum((gi * vi).sum() for gi, vi in zip(g, v))
        hv = _grads((dot,), xs, None, create_graph)
    return _done((out,), create_graph)[0], _untuple(_done(hv, create_graph), in_tuple)


def hvp(func, inputs, v=None, create_graph=False, strict=False):
    """(func(inputs), H v): for twice-differentiable functions the Hessian is
    symmetric, so this is vhp."""
    return vhp(func, inputs, v, create_graph, strict)
