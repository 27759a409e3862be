"""ember.distributions against torch.distributions (issue 40, item 2):
log_prob, entropy, moments and kl_divergence equal on the same parameters;
samples with the right shapes and statistics; rsample differentiable; a
VAE-style step compiled as eager. Also the modules scripts import at the
top: backends, onnx, multiprocessing."""

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")

COV = [[2.0, 0.5], [0.5, 1.0]]


def T(m, x):
    return m.tensor(np.array(x, dtype=np.float32))


CASES = {
    "normal log_prob": lambda m, D: D.Normal(T(m, [0.0, 1.0]), T(m, [1.0, 2.0])).log_prob(T(m, [0.5, -1.0])),
    "normal entropy": lambda m, D: D.Normal(T(m, [0.0, 1.0]), 2.0).entropy(),
    "normal cdf": lambda m, D: D.Normal(T(m, [0.0, 1.0]), 2.0).cdf(T(m, [0.3, 2.0])),
    "normal moments": lambda m, D: [D.Normal(T(m, [0.0, 1.0]), 2.0).variance, D.Normal(0.0, T(m, [3.0])).stddev],
    "normal kl": lambda m, D: D.kl_divergence(D.Normal(T(m, [0.0, 1.0]), T(m, [1.0, 2.0])),
                                              D.Normal(T(m, [1.0, 1.0]), T(m, [3.0, 0.5]))),
    "categorical log_prob": lambda m, D: D.Categorical(logits=T(m, [[1.0, 2.0, 3.0], [0, 0, -1]]))
    .log_prob(m.tensor([2, 0])),
    "categorical log_prob broadcast": lambda m, D: D.Categorical(logits=T(m, [[1.0, 2.0, 3.0], [0, 0, -1]]))
    .log_prob(m.tensor([[2], [1], [0]])),
    "categorical entropy": lambda m, D: D.Categorical(probs=T(m, [[1.0, 2.0, 3.0], [0, 1, 1]])).entropy(),
    "categorical probs": lambda m, D: [D.Categorical(logits=T(m, [1.0, 0.0])).probs,
                                       D.Categorical(probs=T(m, [1.0, 3.0])).logits],
    "categorical kl": lambda m, D: D.kl_divergence(D.Categorical(probs=T(m, [0.2, 0.3, 0.5])),
                                                   D.Categorical(logits=T(m, [1.0, 0.0, -1.0]))),
    "bernoulli log_prob": lambda m, D: D.Bernoulli(probs=T(m, [0.2, 0.9])).log_prob(T(m, [1.0, 0.0])),
    "bernoulli entropy": lambda m, D: D.Bernoulli(logits=T(m, [0.2, -3])).entropy(),
    "bernoulli kl": lambda m, D: D.kl_divergence(D.Bernoulli(probs=T(m, [0.2, 0.9])),
                                                 D.Bernoulli(probs=T(m, [0.5, 0.5]))),
    "uniform log_prob": lambda m, D: D.Uniform(T(m, [0.0, 1.0]), T(m, [2.0, 4.0])).log_prob(T(m, [1.0, 3.0])),
    "uniform entropy and moments": lambda m, D: [D.Uniform(T(m, [0.0, 1.0]), T(m, [2.0, 4.0])).entropy(),
                                                 D.Uniform(T(m, [0.0, 1.0]), 5.0).mean,
                                                 D.Uniform(T(m, [0.0, 1.0]), 5.0).variance],
    "uniform kl": lambda m, D: D.kl_divergence(D.Uniform(T(m, [0.0, 1.0]), T(m, [2.0, 4.0])),
                                               D.Uniform(T(m, [-1.0, 2.0]), T(m, [3.0, 5.0]))),
    "mvn log_prob": lambda m, D: D.MultivariateNormal(T(m, [0.0, 1.0]), covariance_matrix=T(m, COV))
    .log_prob(T(m, [[0.5, -1], [1, 1]])),
    "mvn precision": lambda m, D: D.MultivariateNormal(T(m, [0.0, 1.0]), precision_matrix=T(m, COV))
    .log_prob(T(m, [0.5, -1])),
    "mvn entropy": lambda m, D: D.MultivariateNormal(T(m, [[0.0, 1.0]]), scale_tril=T(m, [[1.0, 0], [0.3, 2.0]]))
    .entropy(),
    "mvn moments": lambda m, D: [D.MultivariateNormal(T(m, [0.0, 1.0]), covariance_matrix=T(m, COV)).variance,
                                 D.MultivariateNormal(T(m, [0.0, 1.0]), covariance_matrix=T(m, COV))
                                 .covariance_matrix],
    "mvn kl": lambda m, D: D.kl_divergence(D.MultivariateNormal(T(m, [0.0, 1.0]), covariance_matrix=T(m, COV)),
                                           D.MultivariateNormal(T(m, [1.0, 0.0]),
                                                                scale_tril=T(m, [[1.0, 0], [0.3, 2.0]]))),
    "independent": lambda m, D: [D.Independent(D.Normal(T(m, [[0.0, 1.0]]), T(m, [[1.0, 2.0]])), 1)
                                 .log_prob(T(m, [0.5, -1])),
                                 D.Independent(D.Normal(T(m, [[0.0, 1.0]]), T(m, [[1.0, 2.0]])), 1).entropy()],
    "independent kl": lambda m, D: D.kl_divergence(
        D.Independent(D.Normal(T(m, [[0.0, 1.0]]), T(m, [[1.0, 2.0]])), 1),
        D.Independent(D.Normal(T(m, [[1.0, 1.0]]), T(m, [[2.0, 2.0]])), 1)),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_same_values_as_pytorch(name):
    got, want = (CASES[name](m, m.distributions) for m in (ember, torch))
    got = got if isinstance(got, list) else [got]
    want = want if isinstance(want, list) else [want]
    for g, w in zip(got, want):
        assert tuple(g.shape) == tuple(w.shape)
        np.testing.assert_allclose(g.detach().numpy(), w.detach().numpy(), rtol=1e-5, atol=1e-6)


def test_shapes_as_pytorch():
    for m in (ember, torch):
        D = m.distributions
        n = D.Normal(m.zeros(3, 2), 1.0)
        assert tuple(n.batch_shape) == (3, 2) and tuple(n.sample((4,)).shape) == (4, 3, 2)
        ind = D.Independent(n, 1)
        assert (tuple(ind.batch_shape), tuple(ind.event_shape)) == ((3,), (2,))
        assert tuple(ind.log_prob(m.zeros(5, 3, 2)).shape) == (5, 3)
        c = D.Categorical(logits=m.zeros(4, 6))
        assert tuple(c.sample().shape) == (4,)
        assert tuple(c.sample((2, 3)).shape) == (2, 3, 4)
        mv = D.MultivariateNormal(m.zeros(5, 2), covariance_matrix=m.eye(2))
        assert tuple(mv.rsample((7,)).shape) == (7, 5, 2) and tuple(mv.event_shape) == (2,)
        assert tuple(D.Bernoulli(0.3).sample((5,)).shape) == (5,)


def test_samples_have_the_right_statistics():
    ember.manual_seed(0)
    D = ember.distributions
    s = D.Normal(ember.tensor([1.0, -2.0]), ember.tensor([0.5, 2.0])).sample((20000,))
    np.testing.assert_allclose(s.mean(0).numpy(), [1.0, -2.0], atol=0.05)
    np.testing.assert_allclose(s.std(0).numpy(), [0.5, 2.0], rtol=0.03)
    s = D.Categorical(probs=ember.tensor([0.1, 0.2, 0.7])).sample((20000,))
    np.testing.assert_allclose(np.bincount(s.numpy(), minlength=3) / 20000, [0.1, 0.2, 0.7], atol=0.015)
    s = D.MultivariateNormal(ember.zeros(2), covariance_matrix=ember.tensor(COV)).sample((20000,))
    np.testing.assert_allclose(np.cov(s.numpy().T), COV, atol=0.06)
    s = D.Bernoulli(probs=ember.tensor([0.25])).sample((20000,))
    assert abs(s.mean().item() - 0.25) < 0.015
    s = D.Uniform(-1.0, ember.tensor([3.0])).sample((20000,))
    assert s.min().item() >= -1.0 and s.max().item() < 3.0 and abs(s.mean().item() - 1.0) < 0.05


def test_rsample_is_differentiable_and_sample_is_not():
    D = ember.distributions
    loc = ember.tensor([0.5], requires_grad=True)
    scale = ember.tensor([2.0], requires_grad=True)
    D.Normal(loc, scale).rsample((100,)).mean().backward()
    assert loc.grad.item() == pytest.approx(1.0)
    assert scale.grad is not None
    assert not D.Normal(loc, scale).sample().requires_grad
    assert not D.Categorical(logits=loc.expand(3)).has_rsample
    with pytest.raises(NotImplementedError, match="rsample"):
        D.Categorical(logits=ember.zeros(3)).rsample()
    with pytest.raises(NotImplementedError, match="kl_divergence: no formula for Normal and Uniform"):
        D.kl_divergence(D.Normal(0.0, 1.0), D.Uniform(0.0, 1.0))


def test_validation_as_pytorch():
    D = ember.distributions
    with pytest.raises(ValueError, match="scale must be positive"):
        D.Normal(0.0, -1.0, validate_args=True)
    with pytest.raises(ValueError, match="Either `probs` or `logits`"):
        D.Bernoulli()
    with pytest.raises(ValueError, match="not a valid category"):
        D.Categorical(probs=ember.ones(3), validate_args=True).log_prob(ember.tensor(5))


def test_a_vae_step_with_rsample_and_kl_compiles_as_eager():
    D = ember.distributions

    def step(mu_w, x):
        mu, log_sigma = x @ mu_w, (x @ mu_w) * 0.1
        q = D.Normal(mu, log_sigma.exp())
        z = q.rsample()
        kl = D.kl_divergence(q, D.Normal(ember.zeros_like(mu), ember.ones_like(mu))).sum()
        loss = (z ** 2).mean() + kl + (-D.Categorical(logits=z).log_prob(ember.tensor([0, 1, 2]))).mean()
        loss.backward()
        return loss.detach()

    def make():
        ember.manual_seed(0)
        return (ember.randn(4, 5) * 0.3).requires_grad_(), ember.randn(3, 4)

    we, xe = make()
    wc, xc = make()
    cf = ember.compile(step)
    for i in range(3):
        we.grad = wc.grad = None
        ember.manual_seed(10 + i)
        le = step(we, xe)
        ember.manual_seed(10 + i)
        lc = cf(wc, xc)
        np.testing.assert_allclose(lc.numpy(), le.numpy(), rtol=1e-5)
        np.testing.assert_allclose(wc.grad.numpy(), we.grad.numpy(), rtol=1e-4, atol=1e-6)
    assert cf._stats()["eager_calls"] == 0


# ---- modules imported at the top of scripts ----

def test_backends_flags_and_availability():
    import ember.backends.cudnn as cudnn
    cudnn.benchmark = True
    cudnn.deterministic = True
    assert ember.backends.cudnn.benchmark is True and cudnn.enabled is True
    with cudnn.flags(enabled=False, benchmark=False):
        assert cudnn.enabled is False
    assert cudnn.enabled is True and cudnn.benchmark is True
    cudnn.benchmark = cudnn.deterministic = False
    assert not cudnn.is_available() and not ember.backends.mps.is_available()
    assert not ember.backends.mps.is_built() and ember.backends.cuda.is_built()
    assert ember.backends.cuda.matmul.allow_tf32 is False
    ember.backends.cuda.matmul.allow_tf32 = True  # (cuBLAS's math mode for float32 GEMMs)
    try:
        assert ember.backends.cuda.matmul.allow_tf32 is True
    finally:
        ember.backends.cuda.matmul.allow_tf32 = False
    assert ember.backends.cpu.get_cpu_capability() in ("AVX512", "AVX2", "DEFAULT")


def test_onnx_export_says_what_to_do_instead():
    assert ember.onnx.is_in_onnx_export() is False
    with pytest.raises(NotImplementedError, match="ember.aot.compile"):
        ember.onnx.export(ember.nn.Linear(2, 2), (ember.zeros(1, 2),), "model.onnx")


def _child(i, queue, scale):
    queue.put((i, (ember.ones(2) * scale * i).tolist()))


def test_multiprocessing_is_pythons_with_spawn():
    import ember.multiprocessing as mp
    assert mp.Process is not None and mp.get_sharing_strategy() == "file_system"
    ctx = mp.get_context("fork")
    q = ctx.SimpleQueue()
    mp.start_processes(_child, args=(q, 3.0), nprocs=2, start_method="fork")
    got = sorted(q.get() for _ in range(2))
    assert got == [(0, [0.0, 0.0]), (1, [3.0, 3.0])]


def _fails(i):
    if i == 1:
        raise ValueError("rank 1 failed")


def test_multiprocessing_spawn_reports_a_failure_with_its_traceback():
    import ember.multiprocessing as mp
    with pytest.raises(mp.ProcessRaisedException, match="rank 1 failed"):
        mp.start_processes(_fails, nprocs=2, start_method="fork")
