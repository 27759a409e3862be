"""ember.autograd: reverse-mode automatic differentiation.

The graph is recorded and walked in C (runtime/autograd/); this package
holds the user-facing spelling: backward, grad, the grad-mode switches
(context managers and decorators), gradcheck, custom Functions, the
functional API (jacobian, hessian, vjp, jvp, vhp, hvp) and anomaly
detection."""

from .. import _C
from .grad_mode import enable_grad, inference_mode, is_grad_enabled, no_grad, set_grad_enabled
from .gradcheck import GradcheckError, gradcheck, gradgradcheck
from .anomaly_mode import detect_anomaly, is_anomaly_enabled, set_detect_anomaly
from .function import Function, FunctionCtx

__all__ = ["backward", "grad", "no_grad", "enable_grad", "set_grad_enabled", "is_grad_enabled",
           "inference_mode", "gradcheck", "gradgradcheck", "GradcheckError", "Function", "FunctionCtx",
           "functional", "detect_anomaly", "set_detect_anomaly", "is_anomaly_enabled", "Variable"]


class _VariableMeta(type):
    def __instancecheck__(cls, obj):
        return isinstance(obj, _C._TensorBase)


class Variable(metaclass=_VariableMeta):
    """PyTorch's Variable, merged into Tensor since 0.4: Variable(t) is t
    (requiring grad if asked), and every tensor is a Variable."""

    def __new__(cls, data, requires_grad=False, volatile=False):
        if not isinstance(data, _C._TensorBase):
            raise TypeError(f"Variable data has to be a tensor, but got {type(data).__name__}")
        return data.requires_grad_() if requires_grad else data


def _as_tuple(x):
    if x is None or isinstance(x, _C._TensorBase):
        return (x,)
    return tuple(x)


def backward(tensors, grad_tensors=None, retain_graph=None, create_graph=False, inputs=None):
    """Accumulates the gradients of `tensors` (with upstream gradients
    `grad_tensors`; a one-element tensor may leave its own out) into the
    .grad of every leaf that requires grad. The graph's saved values are
    freed unless retain_graph (which defaults to create_graph)."""
    if inputs is not None:
        raise NotImplementedError("backward(inputs=...) is not implemented in ember yet; use "
                                  "ember.autograd.grad(outputs, inputs)")
    tensors = _as_tuple(tensors)
    grads = None if grad_tensors is None else _as_tuple(grad_tensors)
    if grads is not None and len(grads) != len(tensors):
        raise RuntimeError(f"backward: got {len(tensors)} tensors and {len(grads)} gradients")
    if retain_graph is None:
        retain_graph = create_graph
    _C._backward(tensors, grads, bool(retain_graph), bool(create_graph))


def _zero_grads(params, set_to_none=True):
    """What Module.zero_grad and Optimizer.zero_grad do to each parameter's
    .grad: drop it, or (set_to_none=False) zero it in place, first cutting a
    gradient that has history (create_graph) from its graph, as PyTorch does."""
    for p in params:
        g = p.grad
        if g is None:
            continue
        if set_to_none:
            p.grad = None
            continue
        if g.grad_fn is not None:
            g.detach_()
        elif g.requires_grad:  # (only then: a state change a compiled step would refuse)
            g.requires_grad_(False)
        with no_grad():
            g.zero_()


def grad(outputs, inputs, grad_outputs=None, retain_graph=None, create_graph=False,
         allow_unused=False):
    """The gradients of `outputs` with respect to `inputs`, as a tuple
    (None for an unused input when allow_unused), without touching any .grad.
    With create_graph the result has history, so it can be differentiated
    again."""
    outputs = _as_tuple(outputs)
    inputs = _as_tuple(inputs)
    grads = None if grad_outputs is None else _as_tuple(grad_outputs)
    if retain_graph is None:
        retain_graph = create_graph
    return _C._grad(outputs, grads, inputs, bool(retain_graph), bool(create_graph),
                    bool(allow_unused))


from . import functional  # noqa: E402  (it uses grad, above)


# ---------------------------------------------------------------- torch.autograd's other names

import enum as _enum  # noqa: E402

from ..overrides import handle_torch_function, has_torch_function, is_tensor_like  # noqa: E402,F401
from .anomaly_mode import is_anomaly_check_nan_enabled, set_anomaly_enabled  # noqa: E402,F401


def variable(*args, **kwargs):
    raise RuntimeError("torch.autograd.variable(...) is deprecated, use torch.tensor(...) instead")


def kineto_available():
    """Whether the Kineto profiler is built in: not in ember."""
    return False


DeviceType = _enum.IntEnum("DeviceType", [(n, i) for i, n in enumerate(
    "CPU CUDA MKLDNN OPENGL OPENCL IDEEP HIP FPGA ORT XLA Vulkan Metal XPU MPS Meta HPU VE Lazy IPU".split())])
ProfilerActivity = _enum.IntEnum("ProfilerActivity", [("CPU", 0), ("CUDA", 1)])
ProfilerState = _enum.IntEnum("ProfilerState", [(n, i) for i, n in enumerate(
    "Disabled CPU CUDA NVTX ITT KINETO KINETO_GPU_FALLBACK".split())])
for _e in (DeviceType, ProfilerActivity, ProfilerState):
    _e.__module__ = __name__


class ProfilerConfig:
    """The autograd profiler's settings, as a record (ember's profiler,
    ember.autograd.profiler.profile, takes them as keywords)."""

    def __init__(self, state=ProfilerState.Disabled, report_input_shapes=False, profile_memory=False,
                 with_stack=False, with_flops=False, with_modules=False, experimental_config=None):
        self.state, self.report_input_shapes, self.profile_memory = state, report_input_shapes, profile_memory
        self.with_stack, self.with_flops, self.with_modules = with_stack, with_flops, with_modules
        self.experimental_config = experimental_config


class _NoConstructor:
    def __init__(self, *args, **kwargs):
        raise TypeError(f"{type(self).__module__}.{type(self).__name__}: No constructor defined")


class ProfilerEvent(_NoConstructor):
    """An event of the legacy profiler's records; only it makes them."""


class SavedTensor(_NoConstructor):
    """A tensor a backward node saved; only autograd makes them."""


class NestedIOFunction(Function):
    """The legacy (non-static forward) Function with nested inputs: PyTorch
    1.13 refuses legacy functions when they are called, and so does this."""

    def __call__(self, *args, **kwargs):
        raise RuntimeError("Legacy autograd function with non-static forward method is deprecated. Please use "
                           "new-style autograd function with static forward method. (Example: "
                           "https://pytorch.org/docs/stable/autograd.html#torch.autograd.Function)")


from . import profiler  # noqa: E402,F401  (torch.autograd.profiler: ember.profiler under its legacy name)
