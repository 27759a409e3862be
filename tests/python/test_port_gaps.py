"""What the corpus of real programs (tests/ports) found missing. Channel
dropout (Dropout1d/2d/3d), alpha dropout and feature alpha
dropout, as PyTorch 1.13 defines them: which elements drop together, the
scale of the kept ones, the moments alpha dropout keeps for SELU inputs,
eval mode as the identity, and PyTorch's treatment of unbatched inputs.
(The random draws differ from PyTorch's; the structure must not.)"""

import warnings

import numpy as np
import pytest

import ember
import ember.nn.functional as F


@pytest.mark.parametrize("fn,shape", [(F.dropout1d, (8, 16, 5)), (F.dropout2d, (8, 16, 4, 5)),
                                      (F.dropout3d, (4, 16, 3, 4, 5))])
def test_channel_dropout_zeroes_whole_channels_and_scales_the_rest(fn, shape):
    ember.manual_seed(0)
    x = ember.ones(*shape)
    y = fn(x, 0.25, training=True).numpy().reshape(shape[0], shape[1], -1)
    per_channel = y.max(axis=2)
    assert np.all(y == per_channel[:, :, None])  # a channel is dropped or kept whole
    assert set(np.unique(per_channel)) <= {0.0, np.float32(1.0 / 0.75)}
    assert 0.1 < (per_channel == 0).mean() < 0.4
    assert fn(x, 0.25, training=False) is x


def test_module_forms_and_gradients():
    ember.manual_seed(1)
    m = ember.nn.Dropout2d(0.5)
    x = ember.randn(4, 6, 3, 3, requires_grad=True)
    y = m(x)
    y.sum().backward()
    keep = (y.detach().numpy() != 0).astype(np.float64)
    np.testing.assert_allclose(x.grad.numpy(), 2.0 * keep, rtol=1e-6)
    m.eval()
    assert m(x) is x
    assert "p=0.5" in repr(m)


def test_unbatched_input_drops_along_dim_0_as_pytorch():
    # PyTorch 1.13 takes a 2-D input of dropout2d as unbatched (C, H): whole
    # rows drop, with a deprecation warning (what mnist_rnn's Dropout2d does)
    ember.manual_seed(2)
    x = ember.ones(64, 10)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        y = F.dropout2d(x, 0.5).numpy()
    assert any("dropout2d" in str(m.message) for m in w)
    assert np.all((y == 0).all(axis=1) | (y == 2.0).all(axis=1))
    with pytest.raises(RuntimeError, match="dropout1d: Expected 2D or 3D input"):
        F.dropout1d(ember.ones(2, 3, 4, 5), 0.5)


def test_alpha_dropout_keeps_the_moments_of_selu_activations():
    ember.manual_seed(3)
    x = ember.randn(200000)
    y = F.alpha_dropout(x, 0.2, training=True).numpy()
    assert abs(y.mean()) < 0.01 and abs(y.std() - 1.0) < 0.01
    a_ = 1.7580993408473766
    a = 1.0 / np.sqrt((a_ * a_ * 0.2 + 1) * 0.8)
    dropped = np.isclose(y, -a_ * a * 0.8)  # SELU's saturation, mapped
    assert 0.17 < dropped.mean() < 0.23
    assert F.alpha_dropout(x, 0.2, training=False) is x
    f = F.feature_alpha_dropout(ember.randn(64, 32, 10), 0.3, training=True).numpy()
    d = f.std(axis=2) == 0  # a dropped channel is one constant
    assert 0.2 < d.mean() < 0.4
    assert isinstance(ember.nn.AlphaDropout(0.1), ember.nn.Module)
    assert isinstance(ember.nn.FeatureAlphaDropout(0.1), ember.nn.Module)


def test_ranges_index_and_build_tensors_as_in_pytorch():
    # x_[range(n), y] = v, as the forward-forward MNIST example writes it
    x = ember.zeros(3, 4)
    x[range(3), ember.tensor([0, 1, 2])] = 5.0
    assert x.sum().item() == 15.0 and x[1, 1].item() == 5.0
    assert tuple(x[range(1, 3)].shape) == (2, 4)
    assert ember.tensor(range(4)).tolist() == [0, 1, 2, 3]


class _Tiny(ember.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = ember.nn.Linear(3, 2)

    def forward(self, x):
        return self.fc(x)


def test_saving_a_whole_model_to_a_file_object_writes_pytorchs_format(tmp_path):
    # the word language model example: with open(path, 'wb') as f: torch.save(model, f)
    import io
    model = _Tiny()
    buf = io.BytesIO()
    ember.save(model, buf)
    assert buf.getvalue()[:2] == b"PK"  # PyTorch's zip, where safetensors cannot hold a module
    buf.seek(0)
    with pytest.raises(Exception, match="weights_only=False"):
        ember.load(buf)
    buf.seek(0)
    back = ember.load(buf, weights_only=False)
    x = ember.randn(4, 3)
    np.testing.assert_array_equal(back(x).detach().numpy(), model(x).detach().numpy())
    state = io.BytesIO()
    ember.save(model.state_dict(), state)  # (plain tensors keep the safetensors default)
    assert state.getvalue()[:2] != b"PK"


class _Outer(ember.nn.Module):
    def __init__(self):
        super().__init__()
        self.inner = _Tiny()
        self.act = ember.nn.functional.relu

    def forward(self, x):
        return self.act(self.inner(x))


def test_safe_globals_let_weights_only_loading_read_a_whole_model(tmp_path):
    # PyTorch 2.4+'s allowlist (the word language model example loads its
    # best model with torch.serialization.safe_globals([...]))
    from ember import serialization as S
    model, path = _Outer(), tmp_path / "model.pt"
    ember.save(model, path)
    with pytest.raises(Exception, match="add_safe_globals"):
        ember.load(path)
    allowed = [_Outer, _Tiny, ember.nn.Linear, ember.nn.functional.relu]
    with pytest.raises(Exception, match="_Tiny"):  # (every class it names must be allowed)
        with S.safe_globals([_Outer, ember.nn.Linear, ember.nn.functional.relu]):
            ember.load(path)
    with S.safe_globals(allowed):
        back = ember.load(path)
        assert S.get_safe_globals() == allowed
    assert S.get_safe_globals() == []  # (the block's globals only)
    x = ember.randn(5, 3)
    assert type(back) is _Outer and back.act is ember.nn.functional.relu
    np.testing.assert_array_equal(back(x).detach().numpy(), model(x).detach().numpy())
    S.add_safe_globals(allowed)
    try:
        assert type(ember.load(path)) is _Outer
    finally:
        S.clear_safe_globals()
    with pytest.raises(TypeError, match="pairs"):
        S.add_safe_globals([(_Tiny, 3)])


def test_pytorchs_module_paths_for_pickled_models():
    from ember.nn.modules.activation import MultiheadAttention
    m = MultiheadAttention(8, 2)
    assert type(m.out_proj).__name__ == "NonDynamicallyQuantizableLinear"
    assert isinstance(m.out_proj, ember.nn.Linear)
    lstm = ember.nn.LSTM(2, 3)
    assert lstm.flatten_parameters() is None  # (cuDNN's compaction: nothing to do here)
