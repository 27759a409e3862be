"""How the harness drives the corpus's model programs (compare.py): which
file, how to build the model, its inputs and its loss. Small sizes: the
programs' own code at a size this machine runs in seconds."""

import os

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "programs")


def _ce(mod, m, model, inputs):
    (x,) = inputs
    y = m.arange(x.shape[0]) % 10
    return m.nn.functional.cross_entropy(model(x), y)


def _images(m, n=4, c=3, hw=32, classes=10, seed=0):
    import numpy as np
    rng = np.random.default_rng(seed)
    return (m.tensor(rng.standard_normal((n, c, hw, hw)).astype("float32")),)


def _tokens(m, b=2, t=16, vocab=64, seed=0):
    import numpy as np
    rng = np.random.default_rng(seed)
    return m.tensor(rng.integers(0, vocab, (b, t))), m.tensor(rng.integers(0, vocab, (b, t)))


def _nanogpt(mod, m):
    return mod.GPT(mod.GPTConfig(block_size=16, vocab_size=64, n_layer=2, n_head=2, n_embd=32, dropout=0.0))


def _mingpt(mod, m):
    c = mod.GPT.get_default_config()
    c.model_type, c.vocab_size, c.block_size = "gpt-nano", 64, 16
    c.embd_pdrop = c.resid_pdrop = c.attn_pdrop = 0.0
    return mod.GPT(c)


def _lm_loss(mod, m, model, inputs):
    idx, targets = inputs
    out = model(idx, targets)
    return out[1]


def _rnn_lm(mod, m):
    return mod.RNNModel("LSTM", 64, 16, 32, 2, dropout=0.0)


def _rnn_inputs(m):
    import numpy as np
    rng = np.random.default_rng(0)
    x = m.tensor(rng.integers(0, 64, (10, 3)))
    return x, (m.zeros(2, 3, 32), m.zeros(2, 3, 32))


def _rnn_loss(mod, m, model, inputs):
    x, hidden = inputs
    out, _ = model(x, hidden)
    return m.nn.functional.nll_loss(out, (x.view(-1) + 1) % 64)


def _tf_lm(mod, m):
    return mod.TransformerModel(64, 16, 2, 32, 2, dropout=0.0)


def _tf_inputs(m):
    import numpy as np
    return (m.tensor(np.random.default_rng(0).integers(0, 64, (10, 3))),)


def _tf_loss(mod, m, model, inputs):
    (x,) = inputs
    return m.nn.functional.nll_loss(model(x).view(-1, 64), ((x + 1) % 64).view(-1))


def _mse(mod, m, model, inputs):
    y = model(*inputs)
    return (y * y).mean()


CASES = {
    "nanogpt": dict(path="nanogpt/model.py", build=_nanogpt, inputs=_tokens, loss=_lm_loss),
    "mingpt": dict(path="mingpt/model.py", build=_mingpt, inputs=_tokens, loss=_lm_loss),
    "cifar_resnet18": dict(path="cifar_resnet/resnet.py", build=lambda mod, m: mod.ResNet18(),
                           inputs=_images, loss=_ce),
    "cifar_vgg11": dict(path="cifar_vgg/vgg.py", build=lambda mod, m: mod.VGG("VGG11"), inputs=_images, loss=_ce),
    "cifar_mobilenetv2": dict(path="cifar_mobilenetv2/mobilenetv2.py", build=lambda mod, m: mod.MobileNetV2(),
                              inputs=_images, loss=_ce),
    "fast_neural_style": dict(path="fast_neural_style/transformer_net.py", build=lambda mod, m: mod.TransformerNet(),
                              inputs=lambda m: _images(m, n=1, hw=32), loss=_mse),
    "super_resolution": dict(path="super_resolution/model.py", build=lambda mod, m: mod.Net(upscale_factor=3),
                             inputs=lambda m: _images(m, n=2, c=1, hw=24), loss=_mse),
    "word_lm_lstm": dict(path="word_language_model/model.py", build=_rnn_lm, inputs=_rnn_inputs, loss=_rnn_loss),
    "word_lm_transformer": dict(path="word_language_model/model.py", build=_tf_lm, inputs=_tf_inputs, loss=_tf_loss,
                                train=False),
}
for _c in CASES.values():
    _c["path"] = os.path.join(HERE, _c["path"])
