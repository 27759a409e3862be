"""ember.onnx, as torch.onnx's entry points. ember does not write ONNX: it
compiles models itself (ember.compile, and ember.aot.compile for a shared
object callable from C). export() raises, saying so."""

__all__ = ["export", "is_in_onnx_export", "OperatorExportTypes", "TrainingMode"]


def export(model, args=None, f=None, *rest, **kwargs):
    raise NotImplementedError(
        "ember.onnx.export: ember does not export ONNX. To run a model outside Python, compile it ahead of "
        "time to a shared object callable from C: ember.aot.compile(model, example_inputs, 'model.so') "
        "(see the README's 'Ahead of time' section); to deploy with ONNX Runtime, export from PyTorch "
        "after loading the weights there (torch.load reads ember's .pt checkpoints)")


def is_in_onnx_export():
    return False


class OperatorExportTypes:
    ONNX, ONNX_ATEN, ONNX_ATEN_FALLBACK, ONNX_FALLTHROUGH = range(4)


class TrainingMode:
    EVAL, PRESERVE, TRAINING = range(3)
