"""ember.jit: programs that script or trace their models run them eagerly,
with the same results as the plain modules; TorchScript archives raise a
clear NotImplementedError."""

from typing import Dict, List, Optional, Tuple

import numpy as np
import pytest

import ember


def test_script_and_trace_return_what_they_are_given():
    m = ember.nn.Sequential(ember.nn.Linear(3, 2), ember.nn.ReLU())
    x = ember.randn(4, 3)
    for wrapped in (ember.jit.script(m), ember.jit.trace(m, x), ember.jit.trace_module(m, {"forward": x})):
        assert wrapped is m
        np.testing.assert_array_equal(wrapped(x).detach().numpy(), m(x).detach().numpy())

    @ember.jit.script
    def f(x, n: int):
        for _ in range(n):  # control flow a trace would freeze: eager keeps it
            x = x * 2
        return x
    assert f(ember.ones(1), 3).item() == 8 and f(ember.ones(1), 1).item() == 2


def test_decorators_pass_through():
    class M(ember.nn.Module):
        @ember.jit.ignore
        def helper(self, x):
            return x + 1

        @ember.jit.ignore(drop=True)
        def dropped(self, x):
            return x + 2

        @ember.jit.unused
        def unused(self, x):
            return x + 3

        @ember.jit.export
        def exported(self, x):
            return x + 4

        def forward(self, x):
            if ember.jit.is_scripting() or ember.jit.is_tracing():
                raise AssertionError("eager code takes the eager branch")
            return self.helper(x) + self.dropped(x) + self.unused(x) + self.exported(x)

    assert M()(ember.zeros(1)).item() == 10
    assert ember.jit.annotate(List[int], [1]) == [1] and ember.jit.Attribute(3, int) == 3


def test_freeze_requires_eval_mode_as_torch():
    m = ember.nn.Linear(2, 2)
    with pytest.raises(RuntimeError, match="eval mode"):
        ember.jit.freeze(ember.jit.script(m))
    assert ember.jit.freeze(m.eval()) is m
    assert not ember.jit.optimize_for_inference(ember.nn.Linear(2, 2)).training


def test_archives_raise_naming_themselves(tmp_path):
    with pytest.raises(NotImplementedError, match="ember.jit.save"):
        ember.jit.save(ember.nn.Linear(1, 1), str(tmp_path / "m.pt"))
    with pytest.raises(NotImplementedError, match="ember.jit.load"):
        ember.jit.load(str(tmp_path / "m.pt"))


def test_old_style_script_modules_are_modules():
    class Old(ember.jit.ScriptModule):
        def __init__(self):
            super().__init__()
            self.fc = ember.nn.Linear(2, 1)

        @ember.jit.script_method
        def forward(self, x):
            return self.fc(x)

    m = Old()
    assert len(list(m.parameters())) == 2 and tuple(m(ember.ones(3, 2)).shape) == (3, 1)
    with pytest.raises(NotImplementedError, match="ScriptFunction"):
        ember.jit.ScriptFunction()


def test_jit_isinstance_checks_typing_containers():
    isinst = ember.jit.isinstance
    assert isinst([1, 2], List[int]) and not isinst([1, "a"], List[int])
    assert isinst({"a": ember.ones(1)}, Dict[str, ember.Tensor]) and not isinst({1: 2}, Dict[str, int])
    assert isinst(None, Optional[int]) and isinst(3, Optional[int]) and not isinst("a", Optional[int])
    assert isinst((1, 2.0), Tuple[int, float]) and not isinst((1, 2), Tuple[int, int, int])
    assert isinst((1, 2, 3), Tuple[int, ...]) and isinst(3, int)


def test_switches_round_trip():
    with ember.jit.optimized_execution(False), ember.jit.fuser("fuser1"), ember.jit.strict_fusion():
        pass
    ember.jit.enable_onednn_fusion(True)
    assert ember.jit.onednn_fusion_enabled()
    ember.jit.enable_onednn_fusion(False)
    old = ember.jit.set_fusion_strategy([("DYNAMIC", 3)])
    assert ember.jit.set_fusion_strategy(old) == [("DYNAMIC", 3)]
