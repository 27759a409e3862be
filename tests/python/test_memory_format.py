"""Memory formats (issue 40, item 2): channels_last and channels_last_3d
strides as PyTorch's through to(), contiguous(), clone() and Module.to();
a channels-last model and batch train to the same values as row-major ones,
eagerly and compiled."""

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")


@pytest.mark.parametrize("shape,fmt", [((2, 3, 4, 5), "channels_last"), ((1, 3, 1, 1), "channels_last"),
                                       ((2, 1, 4, 5), "channels_last"), ((2, 3, 2, 4, 5), "channels_last_3d")])
def test_strides_and_predicates_as_pytorch(shape, fmt):
    def run(m):
        x = m.arange(int(np.prod(shape)), dtype=m.float32).reshape(shape)
        f = getattr(m, fmt)
        y = x.to(memory_format=f)
        z = x.contiguous(memory_format=f)
        return (y.stride(), z.stride(), y.is_contiguous(), y.is_contiguous(memory_format=f),
                x.is_contiguous(memory_format=f), y.clone().stride(),
                y.clone(memory_format=m.contiguous_format).stride(), y.contiguous().stride(), y.tolist(),
                y.to(m.float64, memory_format=f).stride())

    assert run(ember) == run(torch)


def test_wrong_ranks_and_types_are_refused():
    with pytest.raises(RuntimeError, match="required rank 4 tensor to use channels_last format"):
        ember.zeros(2, 3).contiguous(memory_format=ember.channels_last)
    with pytest.raises(TypeError, match="memory_format must be an ember.memory_format"):
        ember.zeros(2, 3).contiguous(memory_format="channels_last")
    assert repr(ember.channels_last) == "ember.channels_last"
    assert not ember.zeros(2, 3).is_contiguous(memory_format=ember.channels_last)


def test_a_channels_last_model_trains_like_a_row_major_one_eager_and_compiled():
    def build(fmt):
        ember.manual_seed(0)
        net = ember.nn.Sequential(ember.nn.Conv2d(3, 4, 3, padding=1), ember.nn.BatchNorm2d(4), ember.nn.ReLU(),
                                  ember.nn.Conv2d(4, 2, 3), ember.nn.Flatten(), ember.nn.Linear(2 * 4 * 4, 3))
        if fmt is not None:
            assert net.to(memory_format=fmt) is net  # (accepted; the parameters stay row-major)
        return net, ember.optim.SGD(net.parameters(), lr=0.1, momentum=0.9)

    def step_of(net, opt):
        def step(x, y):
            opt.zero_grad()
            loss = ember.nn.functional.cross_entropy(net(x), y)
            loss.backward()
            opt.step()
            return loss.detach()
        return step

    ember.manual_seed(1)
    x, y = ember.randn(4, 3, 6, 6), ember.tensor([0, 1, 2, 1])
    ref_net, ref_opt = build(None)
    ref = [step_of(ref_net, ref_opt)(x, y).item() for _ in range(3)]
    for compiled in (False, True):
        net, opt = build(ember.channels_last)
        step = step_of(net, opt)
        step = ember.compile(step) if compiled else step
        xl = x.to(memory_format=ember.channels_last)
        got = [step(xl, y).item() for _ in range(3)]
        np.testing.assert_allclose(got, ref, rtol=1e-5)
        for a, b in zip(net.parameters(), ref_net.parameters()):
            np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=1e-4, atol=1e-6)
