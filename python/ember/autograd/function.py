"""ember.autograd.Function: operations with a backward written by hand, in
PyTorch's form:

    class Exp(ember.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            y = x.exp()
            ctx.save_for_backward(y)
            return y

        @staticmethod
        def backward(ctx, gy):
            y, = ctx.saved_tensors
            return gy * y

    y = Exp.apply(x)

forward runs with grad mode off; its results get one autograd node whose
backward calls the class's backward. Both run ember ops, so a traced
function (ember.compile) records them like any other: a compiled training
step that uses a Function computes its forward and its backward in the
graph."""

from .. import _C
from .grad_mode import no_grad


class FunctionCtx:
    """What forward leaves for backward: save_for_backward (tensors, checked
    for in-place changes), needs_input_grad, and any attribute."""

    def save_for_backward(self, *tensors):
        self._to_save = tensors

    def mark_non_differentiable(self, *tensors):
        self._non_differentiable = tensors

    def mark_dirty(self, *tensors):
        raise NotImplementedError("autograd.Function: mark_dirty (in-place forwards) is not supported by ember; "
                                  "return a new tensor instead")

    def set_materialize_grads(self, value):
        self._materialize = bool(value)

    @property
    def saved_tensors(self):
        saved = getattr(self, "_saved", None) or ()
        out = []
        for t, version in saved:
            if t is not None and t._version != version:
                raise RuntimeError("one of the variables needed for gradient computation has been modified "
                                   f"by an inplace operation: a tensor saved by {self._name} is at version "
                                   f"{t._version}; expected version {version} instead")
            out.append(t)
        return tuple(out)


def _version(t):
    return _C._version(t)


class _FunctionMeta(type):
    def __init__(cls, name, bases, attrs):
        super().__init__(name, bases, attrs)
        cls._backward_name = name + "Backward"


class Function(metaclass=_FunctionMeta):
    """Subclass with static forward(ctx, *args) and backward(ctx, *grads),
    then call Subclass.apply(*args)."""

    @staticmethod
    def forward(ctx, *args, **kwargs):
        raise NotImplementedError("autograd.Function subclasses must define forward(ctx, *args)")

    @staticmethod
    def backward(ctx, *grad_outputs):
        raise NotImplementedError("autograd.Function subclasses must define backward(ctx, *grads) to be "
                                  "differentiated")

    @classmethod
    def apply(cls, *args, **kwargs):
        Tensor = _C._TensorBase
        ctx = FunctionCtx()
        ctx._name = cls._backward_name
        ctx.needs_input_grad = tuple(isinstance(a, Tensor) and a.requires_grad for a in args)
        with no_grad():
            result = cls.forward(ctx, *args, **kwargs)
        single = not isinstance(result, tuple)
        outs = (result,) if single else result
        positions = [i for i, a in enumerate(args) if isinstance(a, Tensor)]
        inputs = [args[i] for i in positions]
        differentiable = _C.is_grad_enabled() and any(t.requires_grad for t in inputs)
        if differentiable:
            skip = {id(t) for t in getattr(ctx, "_non_differentiable", ())}
            # a result that is an input (or already has history) gets an alias
            # of its own, so the node can be its grad_fn
            fixed = []
            for o in outs:
                if isinstance(o, Tensor) and id(o) not in skip and o.is_floating_point() and \
                        (any(o is t for t in inputs) or o.grad_fn is not None):
                    o = o.detach()
                fixed.append(o)
            outs = tuple(fixed)
            attach = [o for o in outs if isinstance(o, Tensor) and id(o) not in skip and o.is_floating_point()]
            where = [i for i, o in enumerate(outs) if any(o is a for a in attach)]
            # (shapes, not the results: the node holding a result would be a cycle)
            meta = [(tuple(o.shape), o.dtype) if isinstance(o, Tensor) else None for o in outs]
            materialize = getattr(ctx, "_materialize", True)

            def backward(*grads):
                full = [None] * len(meta)
                for k, i in enumerate(where):
                    full[i] = grads[k]
                if materialize:  # results without a gradient (not floats) pass zeros
                    full = [g if g is not None or m is None else _C.zeros(m[0], dtype=m[1])
                            for g, m in zip(full, meta)]
                got = cls.backward(ctx, *full)
                got = got if isinstance(got, tuple) else (got,)
                if len(got) < len(args):
                    raise RuntimeError(f"function {cls._backward_name} returned an incorrect number of "
                                       f"gradients (expected {len(args)}, got {len(got)})")
                return [got[i] for i in positions]

            _C._custom_function(cls._backward_name, inputs, attach, backward)
        # saved tensors: results without history (a result keeping its own
        # node alive would be a cycle), inputs as they are
        saved = []
        for t in getattr(ctx, "_to_save", ()):
            if t is None:
                saved.append((None, 0))
                continue
            if any(t is o for o in outs) or any(t is o for o in (result if not single else (result,))):
                t = t.detach()
            saved.append((t, _version(t)))
        ctx._saved = saved
        ctx._to_save = ()
        return outs[0] if single else outs
