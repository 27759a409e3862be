"""gradcheck: backward formulas against central finite differences.

For every output and every input that requires grad, the Jacobian autograd
gives (one backward per output element, through autograd.grad) must match
the one finite differences give (two evaluations per input element) within
atol + rtol * |numerical|. Use float64 inputs: with eps = 1e-6, float32's
rounding error would swamp the derivative."""

import warnings

import numpy as np

from .. import _C


class GradcheckError(RuntimeError):
    """A backward formula disagrees with finite differences."""


def _as_tuple(x):
    return (x,) if isinstance(x, _C._TensorBase) else tuple(x)


def _is_float_tensor(t):
    return isinstance(t, _C._TensorBase) and t.dtype.is_floating_point


def _numerical_jacobians(func, inputs, wrt, outputs, eps):
    """J[k][i] for output k and input wrt[i]: an array (input numel, output
    numel) of d out / d in by central differences."""
    jac = [[np.zeros((x.numel(), o.numel())) for x in wrt] for o in outputs]
    for i, x in enumerate(wrt):
        view = x.detach().numpy()  # shares x's memory: perturbs it in place
        for flat, idx in enumerate(np.ndindex(*view.shape)):
            orig = view[idx].copy()
            # (with grad mode on: gradgradcheck's function takes gradients itself)
            view[idx] = orig + eps
            plus = [o.detach().double().numpy().copy().ravel() for o in _outputs_of(func, inputs)]
            view[idx] = orig - eps
            minus = [o.detach().double().numpy().copy().ravel() for o in _outputs_of(func, inputs)]
            view[idx] = orig
            for k in range(len(outputs)):
                jac[k][i][flat] = (plus[k] - minus[k]) / (2 * eps)
    return jac


def _analytical_jacobians(outputs, wrt):
    """The same Jacobians from autograd: row j of each from the gradient of
    output element j."""
    from . import grad
    jac = [[np.zeros((x.numel(), o.numel())) for x in wrt] for o in outputs]
    for k, o in enumerate(outputs):
        if not o.requires_grad:
            continue  # no path from the inputs: the Jacobian is zero
        for j in range(o.numel()):
            seed = np.zeros(o.numel())
            seed[j] = 1.0
            go = _C.tensor(seed.reshape(tuple(o.shape)), dtype=o.dtype)
            grads = grad(o, wrt, go, retain_graph=True, allow_unused=True)
            for i, g in enumerate(grads):
                if g is not None:
                    if tuple(g.shape) != tuple(wrt[i].shape):
                        raise GradcheckError(
                            f"gradient of input {i} has shape {list(g.shape)}, the input "
                            f"{list(wrt[i].shape)}")
                    jac[k][i][:, j] = g.double().numpy().ravel()
    return jac


def _outputs_of(func, inputs):
    return [o for o in _as_tuple(func(*inputs)) if _is_float_tensor(o)]


def gradcheck(func, inputs, *, eps=1e-6, atol=1e-5, rtol=1e-3, raise_exception=True):
    """True if func's backward formulas agree with finite differences at
    `inputs` (a tensor or a tuple; those with requires_grad are checked).
    Otherwise raises GradcheckError naming the output, the input and the
    two Jacobians (or returns False with raise_exception=False)."""
    inputs = _as_tuple(inputs)
    wrt = [x for x in inputs if isinstance(x, _C._TensorBase) and x.requires_grad]
    if not wrt:
        raise ValueError("gradcheck expects at least one input tensor to require gradient")
    for n, x in enumerate(wrt):
        if x.dtype != _C.float64:
            warnings.warn(f"Input #{n} requires gradient and is not a double precision floating "
                          f"point tensor: gradcheck is likely to fail")
    outputs = _outputs_of(func, inputs)
    analytical = _analytical_jacobians(outputs, wrt)
    numerical = _numerical_jacobians(func, inputs, wrt, outputs, eps)
    for k in range(len(outputs)):
        for i in range(len(wrt)):
            a, n = analytical[k][i], numerical[k][i]
            if not np.allclose(a, n, rtol=rtol, atol=atol):
                if not raise_exception:
                    return False
                raise GradcheckError(
                    f"Jacobian mismatch for output {k} with respect to input {i},\n"
                    f"numerical:{n}\nanalytical:{a}\n")
    return True


def gradgradcheck(func, inputs, grad_outputs=None, *, eps=1e-6, atol=1e-5, rtol=1e-3,
                  raise_exception=True):
    """gradcheck of the backward pass itself (double backward): the
    gradients of func's outputs, taken with create_graph and random
    grad_outputs, checked as a function of the inputs and grad_outputs."""
    from . import grad
    inputs = _as_tuple(inputs)
    outputs = _outputs_of(func, inputs)
    if grad_outputs is None:
        rng = np.random.default_rng(0)
        grad_outputs = tuple(
            _C.tensor(rng.standard_normal(tuple(o.shape)), dtype=o.dtype).requires_grad_()
            for o in outputs)
    grad_outputs = _as_tuple(grad_outputs)
    n_in = len(inputs)

    def first_derivatives(*args):
        ins, gos = args[:n_in], args[n_in:]
        outs = _outputs_of(func, ins)
        wrt = [x for x in ins if isinstance(x, _C._TensorBase) and x.requires_grad]
        used = [(o, g) for o, g in zip(outs, gos) if o.requires_grad]
        if not used:
            return ()
        gs = grad([o for o, _ in used], wrt, [g for _, g in used], create_graph=True,
                  allow_unused=True)
        return tuple(g for g in gs if g is not None)

    return gradcheck(first_derivatives, inputs + grad_outputs, eps=eps, atol=atol, rtol=rtol,
                     raise_exception=raise_exception)
