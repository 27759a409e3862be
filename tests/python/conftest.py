"""Shared helpers for ember's Python tests.

- `torch` is PyTorch or None; tests that compare with it use the
  `requires_torch` mark (or the `torch_module` fixture), which skips them with
  a reason when PyTorch is not installed.
- `assert_close(t, expected, rtol, atol)` checks an ember tensor against a
  NumPy array: dtype and shape first, then values (NaNs must match NaNs).
- `NP_DTYPES` / `EM_DTYPES` map dtype names to NumPy and ember dtypes.
- `device`: a fixture over "cpu" and "cuda" (skipped, with the reason,
  where ember has no CUDA device).
- `subprocess_env(**overrides)`: an environment for running a script that
  imports this same ember build.
- EMBER_JIT_MIN_ELEMENTS is 0 for the tests, and EMBER_CACHE_DIR a
  directory of their own (see below).
"""

import atexit
import faulthandler
import os
import shutil
import signal
import subprocess
import tempfile

import numpy as np
import pytest

import ember

# Tests compile every fused node however small (users' default skips those
# under 2048 elements, not worth LLVM's time), so the code generator sees
# all of the tests' tiny graphs; test_compile_training checks the default.
os.environ["EMBER_JIT_MIN_ELEMENTS"] = "0"

# A run killed by a signal should say so: pytest's faulthandler covers the
# crashing signals; SIGTERM and SIGHUP would otherwise end it without a
# word. Each prints every thread's stack to stderr, then takes its default
# action.
for _sig in (signal.SIGTERM, signal.SIGHUP):
    faulthandler.register(_sig, all_threads=True, chain=True)

# Compiled code goes to a cache directory of this run's own (the user's
# stays untouched); later compiles of the same graphs in the run load it.
if "EMBER_CACHE_DIR" not in os.environ:
    os.environ["EMBER_CACHE_DIR"] = tempfile.mkdtemp(prefix="ember-test-cache-")
    atexit.register(shutil.rmtree, os.environ["EMBER_CACHE_DIR"], True)

try:
    import torch
except ImportError:  # the tests that need it skip
    torch = None

HAVE_TORCH = torch is not None
requires_torch = pytest.mark.skipif(
    not HAVE_TORCH, reason="PyTorch is not installed (Debian: python3-torch); "
                           "this test compares ember with PyTorch")

# Forked DataLoader workers under AddressSanitizer: GCC 12's ASan runtime
# takes its allocator's locks without fork handlers, so a worker forked
# while another thread of the test process is inside malloc (a
# multiprocessing queue's feeder thread an earlier loader left flushing)
# inherits a held lock and waits on it forever; two full ASan runs of this
# suite hung so (gdb: the child in SizeClassAllocator64's mutex). glibc's
# malloc is fork-safe (its atfork handlers), so this is the sanitizer's
# limit, not the DataLoader's: the release and no-LLVM runs keep the tests.
forks_workers = pytest.mark.skipif(
    "libasan" in os.environ.get("LD_PRELOAD", ""),
    reason="forked workers can deadlock in ASan's allocator (not fork-safe with threads)")

NP_DTYPES = {"float32": np.float32, "float64": np.float64, "int64": np.int64, "bool": np.bool_}
EM_DTYPES = {"float32": ember.float32, "float64": ember.float64, "int64": ember.int64,
             "bool": ember.bool}


# Device-parametrized tests take the `device` fixture: "cpu" always, "cuda"
# where ember has a CUDA device; elsewhere those cases skip, saying why.
_CUDA_SKIP = pytest.mark.skipif(
    not ember.cuda.is_available(),
    reason=f"no CUDA device for ember: {ember.cuda.why_unavailable() if not ember.cuda.is_available() else ''}")


@pytest.fixture(params=["cpu", pytest.param("cuda", marks=_CUDA_SKIP)])
def device(request):
    """The device a device-parametrized test runs on."""
    return request.param


@pytest.fixture
def torch_module():
    """PyTorch, or a skip when it is not installed."""
    if torch is None:
        pytest.skip("PyTorch is not installed (Debian: python3-torch)")
    return torch


def dtype_name(dt):
    """'float32' for ember.float32, torch.float32 or np.float32; 'bool' for bools."""
    s = str(np.dtype(dt)) if isinstance(dt, (type, np.dtype)) else str(dt)
    return s.split(".")[-1]


def assert_close(t, expected, rtol=0.0, atol=0.0):
    """Asserts that ember tensor `t` has `expected`'s dtype and shape and that
    its values match to rtol/atol (exactly for int64 and bool)."""
    expected = np.asarray(expected)
    assert isinstance(t, ember.Tensor), f"expected an ember.Tensor, got {type(t).__name__}"
    assert dtype_name(t.dtype) == dtype_name(expected.dtype), \
        f"dtype: ember gives {t.dtype}, expected {expected.dtype}"
    assert tuple(t.shape) == expected.shape, f"shape: ember gives {tuple(t.shape)}, " \
                                             f"expected {expected.shape}"
    got = t.numpy()
    if expected.dtype.kind in "biu":
        np.testing.assert_array_equal(got, expected)
    else:
        np.testing.assert_allclose(got, expected, rtol=rtol, atol=atol, equal_nan=True)


def subprocess_env(**overrides):
    """os.environ without EMBER_* switches (but the tests' EMBER_JIT_MIN_ELEMENTS
    and EMBER_CACHE_DIR),
    with PYTHONPATH reaching the same ember package and extension this process
    uses, plus `overrides`."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("EMBER_") or k in ("EMBER_JIT_MIN_ELEMENTS", "EMBER_CACHE_DIR")}
    pkg_parent = os.path.dirname(os.path.dirname(os.path.abspath(ember.__file__)))
    ext_parent = os.path.dirname(os.path.dirname(os.path.abspath(ember._C.__file__)))
    env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys([pkg_parent, ext_parent]))
    env.update({k: str(v) for k, v in overrides.items()})
    return env


@pytest.fixture(params=["llvm", "interp"])
def each_backend(request, monkeypatch):
    """Runs a test once per backend, every fused node compiled (no
    EMBER_JIT_MIN_ELEMENTS cut); skips LLVM in a build without it."""
    if request.param == "llvm" and not ember.compiler.has_llvm():
        pytest.skip("a build without LLVM has only the interpreter")
    monkeypatch.setenv("EMBER_BACKEND", request.param)
    monkeypatch.setenv("EMBER_JIT_MIN_ELEMENTS", "0")
    return request.param


def bits_equal(got, want):
    """got has want's dtype, shape and bits (NaNs where want has them)."""
    assert got.dtype == want.dtype and tuple(got.shape) == tuple(want.shape)
    g, w = got.numpy(), want.numpy()
    assert np.array_equal(g, w, equal_nan=True), np.abs(g.astype(np.float64) - w).max()


def compiled_equals_eager(fn, make, calls=2):
    """Compiles fn, traces it on make()'s arguments, then checks `calls`
    compiled calls on fresh arguments against fn eagerly, bit for bit
    (no_grad). Returns the compiled function, its one specialisation."""
    cf = ember.compile(fn)
    with ember.no_grad():
        cf(*make())  # traced
        for _ in range(calls):
            args = make()
            bits_equal(cf(*args), fn(*args))
    assert len(cf._specializations()) == 1
    assert cf._stats()["compiled_calls"] == calls
    return cf


def pytest_configure(config):
    config.addinivalue_line("markers", "disk_size(size): the size of the small_disk tmpfs a test mounts")


@pytest.fixture
def small_disk(tmp_path, request):
    """A small tmpfs, 1 MiB unless the test's `disk_size` mark says (needs
    the right to mount: root, as CI runs), unmounted lazily (a model loaded
    from it keeps it busy)."""
    mark = request.node.get_closest_marker("disk_size")
    mnt = tmp_path / "disk"
    mnt.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={mark.args[0] if mark else '1m'}", "tmpfs", str(mnt)],
                      capture_output=True).returncode != 0:
        pytest.skip("cannot mount a small tmpfs here (needs root)")
    yield mnt
    subprocess.run(["umount", "-l", str(mnt)], check=False)


def fill_disk(path):
    """Writes a file at path until its file system is full."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT)
    try:
        while os.write(fd, b"\0" * 65536):
            pass
    except OSError:
        pass
    finally:
        os.close(fd)
