"""What an installed ember must do from any directory (tools/check_install.sh
runs it in a scratch directory with a virtual environment's Python):

    python install_smoke.py EXPECTED_PACKAGE_DIR

checks that `import ember` found the package under EXPECTED_PACKAGE_DIR,
then runs eager ops with autograd, a compiled function (compiled, and equal
to its eager run) and a model compiled ahead of time (which needs the AOT
runtime installed beside the extension). Prints one line per check."""

import os
import sys
import tempfile

import numpy as np

import ember

want = os.path.realpath(sys.argv[1])
got = os.path.realpath(os.path.dirname(ember.__file__))
assert got == want, f"import ember found {got}, expected {want}"
print(f"ember {ember.__version__} from {got}, extension {os.path.basename(ember._C.__file__)}")

x = ember.randn(4, 5, requires_grad=True)
(x.relu() * 2).sum().backward()
assert np.array_equal(x.grad.numpy(), 2.0 * (x.detach().numpy() > 0))
print("eager ops and autograd: passed")


def gelu(t):
    return 0.5 * t * (1.0 + ember.tanh(0.7978845608 * (t + 0.044715 * t * t * t)))


fast = ember.compile(gelu)
y = ember.randn(64, 33)
for _ in range(2):
    out = fast(y)
np.testing.assert_allclose(out.numpy(), gelu(y).numpy(), rtol=1e-6, atol=1e-6)
print("compiled function: passed")

if ember._C._has_llvm():
    model = ember.nn.Sequential(ember.nn.Linear(5, 3), ember.nn.ReLU())
    with tempfile.TemporaryDirectory() as d:
        so = ember.aot.compile(model, (ember.randn(2, 5),), os.path.join(d, "model.so"))
        loaded = ember.aot.load(so)
        inp = ember.randn(2, 5)
        np.testing.assert_allclose(loaded(inp).numpy(), model(inp).detach().numpy(), rtol=1e-6, atol=1e-6)
    print("ahead-of-time model: passed")
