"""ember.aot: shared objects compiled ahead of time, run from Python (ember.aot.load)
and from a C program over the installed header alone (tests/c/aot_run.c), against
eager ember."""

import os
import subprocess
import sys

import numpy as np
import pytest

import ember
from ember import nn

pytestmark = pytest.mark.skipif(not ember.compiler.has_llvm(),
                                reason="ember.aot.compile needs the LLVM backend (this build has none)")

BUILD = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(ember._C.__file__))))
AOT_RUN = os.path.join(BUILD, "tests", "aot_run")


def c_program(*args, check=True, env=None):
    if not os.path.exists(AOT_RUN):
        pytest.skip(f"{AOT_RUN} is not built")
    r = subprocess.run([AOT_RUN, *map(str, args)], capture_output=True, text=True, timeout=300, env=env)
    if check:
        assert r.returncode == 0, r.stdout + r.stderr
    return r


def write_inputs(path, *tensors):
    with open(path, "wb") as f:
        for t in tensors:
            f.write(np.ascontiguousarray(t.numpy()).tobytes())


def mlp():
    ember.manual_seed(0)
    return nn.Sequential(nn.Linear(64, 48), nn.ReLU(), nn.Linear(48, 10))


def cnn():
    ember.manual_seed(1)
    return nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Conv2d(8, 16, 3), nn.ReLU(), nn.Flatten(), nn.Linear(16 * 2 * 2, 10))


@pytest.fixture(scope="module")
def mlp_so(tmp_path_factory):
    d = tmp_path_factory.mktemp("mlp")
    model = mlp().eval()
    x = ember.randn(8, 64)
    path = ember.aot.compile(model, (x,), d / "mlp.so")
    write_inputs(d / "in.bin", x)
    return model, x, path, d


def test_mlp_forward_matches_eager_from_python_and_c(mlp_so):
    model, x, path, d = mlp_so
    m = ember.aot.load(path)
    assert m.inputs == [("input", "float32", (8, 64))] and m.outputs == [("out0", "float32", (8, 10))]
    assert [s[0] for s in m.states()] == ["0.weight", "0.bias", "2.weight", "2.bias"]
    with ember.no_grad():
        want = model(x).numpy()
    got = m(x).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    c_program("run", path, d / "in.bin", d / "out.bin")
    from_c = np.fromfile(d / "out.bin", dtype=np.float32).reshape(8, 10)
    np.testing.assert_array_equal(from_c, got)  # (the same code, the same bits)
    header = open(str(path)[:-3] + ".h").read()
    assert "static inline ember_status mlp_run(ember_model *m, const float *in_input, float *out0)" in header


def test_any_strides_are_taken(mlp_so):
    model, x, path, _ = mlp_so
    m = ember.aot.load(path)
    xt = ember.randn(64, 8).t()  # (a transposed view: not contiguous)
    with ember.no_grad():
        want = model(xt.contiguous()).numpy()
    np.testing.assert_allclose(m(xt).numpy(), want, rtol=1e-5, atol=1e-6)


def test_shared_object_needs_libc_libm_and_blas_only(mlp_so):
    path = mlp_so[2]

    def needed(p):
        out = subprocess.run(["readelf", "-d", str(p)], capture_output=True, text=True, check=True).stdout
        return {line.split("[")[1].split("]")[0] for line in out.splitlines() if "(NEEDED)" in line}
    sanitizers = {n for n in needed(ember._C.__file__) if n.startswith(("libasan", "libubsan"))}
    libs = needed(path) - sanitizers
    allowed = ("libc.so", "libm.so", "libopenblas", "ld-linux", "libblas")
    assert libs and all(n.startswith(allowed) for n in libs), libs
    exported = subprocess.run(["nm", "-D", "--defined-only", str(path)], capture_output=True, text=True,
                              check=True).stdout.split()
    assert "ember_model_run" in exported and not [s for s in exported if s.startswith("em_")]


def test_cnn_forward(tmp_path):
    model = cnn().eval()
    x = ember.randn(4, 1, 8, 8)
    path = ember.aot.compile(model, x, tmp_path / "cnn.so")
    with ember.no_grad():
        want = model(x).numpy()
    np.testing.assert_allclose(ember.aot.load(path)(x).numpy(), want, rtol=1e-5, atol=1e-5)


def test_transformer_block_forward(tmp_path):
    ember.manual_seed(2)
    block = nn.TransformerEncoderLayer(32, 4, dim_feedforward=64, batch_first=True).eval()
    x = ember.randn(2, 5, 32)
    path = ember.aot.compile(block, x, tmp_path / "block.so")
    with ember.no_grad():
        want = block(x).numpy()
    np.testing.assert_allclose(ember.aot.load(path)(x).numpy(), want, rtol=1e-4, atol=1e-5)


def test_external_weights(tmp_path):
    model = mlp().eval()
    x = ember.randn(8, 64)
    path = ember.aot.compile(model, x, tmp_path / "ext.so", weights="external")
    st = ember.load(tmp_path / "ext.safetensors")
    assert sorted(st) == ["0.bias", "0.weight", "2.bias", "2.weight"]
    assert os.path.getsize(path) < os.path.getsize(ember.aot.compile(model, x, tmp_path / "emb.so"))
    with ember.no_grad():
        want = model(x).numpy()
    np.testing.assert_allclose(ember.aot.load(path)(x).numpy(), want, rtol=1e-5, atol=1e-6)
    # other weights, from a file named at creation
    with ember.no_grad():
        model[0].weight.mul_(0.5)
        want = model(x).numpy()
    ember.save(dict(model.state_dict()), tmp_path / "half.safetensors")
    np.testing.assert_allclose(ember.aot.load(path, weights=tmp_path / "half.safetensors")(x).numpy(), want,
                               rtol=1e-5, atol=1e-6)
    os.remove(tmp_path / "ext.safetensors")
    with pytest.raises(ember.aot.AOTError, match="ext.safetensors"):
        ember.aot.load(path)
    ember.save({"0.weight": ember.zeros(3, 3)}, tmp_path / "bad.safetensors")
    with pytest.raises(ember.aot.AOTError, match=r"'0.weight' has shape \[3, 3\]; the model's has \[48, 64\]"):
        ember.aot.load(path, weights=tmp_path / "bad.safetensors")


def test_bad_inputs_are_errors_that_name_the_input(mlp_so):
    _, x, path, d = mlp_so
    r = c_program("bad", path, d / "in.bin")
    assert "0 unexpected" in r.stdout
    assert "shape: 3 input 0 (input): shape [9, 64]; expected [8, 64]" in r.stdout
    assert "dtype: 2 input 0 (input):" in r.stdout and "expected float32" in r.stdout
    assert "device: 4 " in r.stdout and "NULL data: 5 " in r.stdout
    m = ember.aot.load(path)
    with pytest.raises(ember.aot.AOTError, match=r"input 0 \(input\): shape \[2, 64\]; expected \[8, 64\]"):
        m(ember.randn(2, 64))
    with pytest.raises(ember.aot.AOTError, match="expected float32"):
        m(x.double())


def test_instances_run_concurrently(mlp_so):
    _, _, path, d = mlp_so
    assert "4 threads: equal" in c_program("threads", path, d / "in.bin", 4).stdout


def test_create_run_destroy_loops_are_clean(mlp_so):
    """Under the sanitizer build, AddressSanitizer and LeakSanitizer watch the
    C program's loop in its own process; otherwise valgrind does, where it can
    decode the build's instructions."""
    _, _, path, d = mlp_so
    if "libasan" in subprocess.run(["readelf", "-d", str(path)], capture_output=True, text=True).stdout:
        env = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}
        env["ASAN_OPTIONS"] = "detect_leaks=1"
        assert "5 loops" in c_program("loop", path, d / "in.bin", 5, env=env).stdout
        return
    if not shutil_which("valgrind"):
        pytest.skip("valgrind is not installed")
    r = subprocess.run(["valgrind", "-q", "--error-exitcode=9", "--leak-check=full", "--errors-for-leak-kinds=definite",
                        AOT_RUN, "loop", path, d / "in.bin", "3"], capture_output=True, text=True, timeout=600)
    if r.returncode != 0 and "which this one lacks" in r.stderr:  # (the model refuses valgrind's CPU)
        pytest.skip("valgrind's virtual CPU lacks this build's vector instructions (AVX-512); the sanitizer "
                    "build checks the same loop")
    assert r.returncode == 0, r.stderr[-3000:]


def shutil_which(name):
    import shutil
    return shutil.which(name)


def training_setup():
    ember.manual_seed(3)
    model = nn.Sequential(nn.Linear(20, 32), nn.ReLU(), nn.Linear(32, 5))
    opt = ember.optim.Adam(model.parameters(), lr=1e-2)
    x, y = ember.randn(16, 20), ember.randint(0, 5, (16,))

    def step(x, y):
        opt.zero_grad()
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss.detach()
    return model, opt, step, x, y


def test_training_step_trains_as_python_does(tmp_path):
    model, opt, step, x, y = training_setup()
    step(x, y)  # (Adam's moments exist from here on)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    moments = [opt.state[p]["exp_avg"].clone() for p in model.parameters()]
    path = ember.aot.compile(step, (x, y), tmp_path / "step.so")
    # the traced call's update was put back
    for k, v in model.state_dict().items():
        assert (v == before[k]).all().item(), k
    for p, m0 in zip(model.parameters(), moments):
        assert (opt.state[p]["exp_avg"] == m0).all().item()
    m = ember.aot.load(path)
    names = [s[0] for s in m.states()]
    assert "optimizer.state.0.weight.exp_avg" in names and "2.bias" in names and "external.lr" in names
    write_inputs(tmp_path / "in.bin", x, y)
    c_program("run", path, tmp_path / "in.bin", tmp_path / "losses.bin", 20)
    from_c = np.fromfile(tmp_path / "losses.bin", dtype=np.float32)
    from_so = np.array([m(x, y).item() for _ in range(20)], dtype=np.float32)
    python = np.array([step(x, y).item() for _ in range(20)], dtype=np.float32)
    np.testing.assert_allclose(from_so, python, rtol=1e-5)
    np.testing.assert_array_equal(from_c, from_so)
    assert python[-1] < python[0]
    # the state, exported after 20 steps, is Python's after 20 steps
    m.save_state(tmp_path / "state.safetensors")
    st = ember.load(tmp_path / "state.safetensors")
    np.testing.assert_allclose(st["0.weight"].numpy(), model[0].weight.detach().numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(st["optimizer.state.2.bias.exp_avg_sq"].numpy(),
                               opt.state[model[2].bias]["exp_avg_sq"].numpy(), rtol=1e-5, atol=1e-9)
    # ... and a new instance from it continues where this one is
    m2 = ember.aot.load(path, weights=tmp_path / "state.safetensors")
    np.testing.assert_array_equal(m2(x, y).numpy(), m(x, y).numpy())
    assert "state round trip: equal" in c_program("state", path, tmp_path / "in.bin",
                                                  tmp_path / "c.safetensors").stdout


def test_value_guards_fail_with_their_own_code(tmp_path):
    def f(x):
        if x.sum().item() > 0:  # (a host read: the graph holds for this value only)
            return x * 2
        return x - 1
    x = ember.ones(4)
    path = ember.aot.compile(f, x, tmp_path / "guard.so")
    m = ember.aot.load(path)
    np.testing.assert_array_equal(m(x).numpy(), (x * 2).numpy())
    with pytest.raises(ember.aot.GuardError, match=r"differs from the value the trace saw \(the traced function "
                                                    r"read it with .item\(\)"):
        m(-ember.ones(4))
    np.testing.assert_array_equal(m(x).numpy(), (x * 2).numpy())  # (and it still runs)


def test_random_draws_follow_the_seed_given(tmp_path):
    ember.manual_seed(4)
    model = nn.Sequential(nn.Linear(16, 16), nn.Dropout(0.5)).train()
    x = ember.randn(8, 16)
    path = ember.aot.compile(model, x, tmp_path / "drop.so")
    m = ember.aot.load(path)
    m.set_rng(1234, 0)
    ember.manual_seed(1234)
    with ember.no_grad():
        want = [model(x).numpy() for _ in range(2)]
    got = [m(x).numpy() for _ in range(2)]
    np.testing.assert_allclose(got[0], want[0], rtol=1e-6)
    np.testing.assert_allclose(got[1], want[1], rtol=1e-6)
    assert not np.array_equal(got[0], got[1])
    assert m.get_rng()[0] == 1234 and m.get_rng()[1] > 0


def test_what_cannot_be_exported_says_why(tmp_path):
    lin = nn.Linear(4, 4)
    with pytest.raises(NotImplementedError, match="autograd history"):
        ember.aot.compile(lambda x: lin(x), ember.randn(2, 4), tmp_path / "f.so")
    with pytest.raises(ValueError, match="weights must be"):
        ember.aot.compile(lin, ember.randn(2, 4), tmp_path / "g.so", weights="inline")
    with pytest.raises(TypeError, match="example input 1 is a int"):
        ember.aot.compile(lambda x, n: x * n, (ember.randn(2), 3), tmp_path / "h.so")


def test_digits_examples_match_python(tmp_path):
    """tools/aot_digits.py and examples/: the CNN's accuracy from C equals
    Python's, and 100 training steps from C give Python's losses."""
    pytest.importorskip("sklearn", reason="the digits come with scikit-learn (python3-sklearn)")
    infer, train = (os.path.join(BUILD, "examples", n) for n in ("digits_infer", "digits_train"))
    if not os.path.exists(infer):
        pytest.skip(f"{infer} is not built")
    from conftest import subprocess_env
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    py = subprocess.run([sys.executable, os.path.join(root, "tools", "aot_digits.py"), str(tmp_path), "--epochs", "1"],
                        capture_output=True, text=True, env=subprocess_env(), timeout=600)
    assert py.returncode == 0, py.stderr
    accuracy = py.stdout.split("test accuracy ")[1].split(" ")[0]
    c = subprocess.run([infer, tmp_path / "digits_cnn.so", tmp_path / "digits_test.bin"], capture_output=True,
                       text=True, check=True)
    assert f"C: test accuracy {accuracy} " in c.stdout
    c = subprocess.run([train, tmp_path / "digits_step.so", tmp_path / "digits_train.bin",
                        tmp_path / "digits_losses.txt", tmp_path / "trained.safetensors"], capture_output=True,
                       text=True)
    assert c.returncode == 0, c.stdout + c.stderr
    assert "largest relative difference from Python's losses" in c.stdout
    assert "conv1.weight" in ember.load(tmp_path / "trained.safetensors")


def test_gradients_of_arguments_are_refused_at_export(tmp_path):
    def f(w):
        (w * w).sum().backward()
        return w.grad * 1
    w = ember.randn(3, requires_grad=True)
    with pytest.raises(NotImplementedError, match="the .grad of its argument 'w'"):
        ember.aot.compile(f, w, tmp_path / "g.so")


def test_the_generated_header_links_and_runs(mlp_so):
    """A C program linked against the shared object itself, calling the
    typed wrapper of the generated header."""
    _, x, path, d = mlp_so
    src = d / "direct.c"
    src.write_text('#include <stdio.h>\n#include "mlp.h"\n'
                   "int main(int argc, char **argv) {\n"
                   "    static float x[MLP_NUM_INPUTS * 8 * 64], y[8 * 10];\n"
                   "    FILE *f = fopen(argv[1], \"rb\");\n"
                   "    if (!f || fread(x, 4, 8 * 64, f) != 8 * 64) return 2;\n"
                   "    ember_model *m;\n"
                   "    if (ember_model_create(NULL, &m) != EMBER_OK || mlp_run(m, x, y) != EMBER_OK) {\n"
                   "        puts(ember_last_error());\n        return 1;\n    }\n"
                   "    fwrite(y, 4, 8 * 10, stdout);\n    ember_model_destroy(m);\n    return 0;\n}\n")
    include = os.path.join(os.path.dirname(os.path.abspath(ember._C.__file__)), "aot", "include")
    exe = d / "direct"
    subprocess.run(["cc", "-O1", "-I", include, "-I", d, src, path, f"-Wl,-rpath,{d}", "-o", exe], check=True)
    out = subprocess.run([exe, d / "in.bin"], capture_output=True, check=True).stdout
    np.testing.assert_array_equal(np.frombuffer(out, dtype=np.float32).reshape(8, 10), ember.aot.load(path)(x).numpy())


def test_a_cpu_without_the_models_features_is_refused(mlp_so):
    _, _, path, d = mlp_so
    needs = subprocess.run(["strings", "-a", str(path)], capture_output=True, text=True).stdout
    if "avx2 " not in needs:
        pytest.skip("the model was made on a CPU without AVX2")
    env = dict(os.environ, EMBER_AOT_CPU_LACKS="avx2")  # (plays a CPU without AVX2)
    r = c_program("run", path, d / "in.bin", check=False, env=env)
    assert r.returncode != 0
    assert "compiled for a CPU with avx2, which this one lacks" in r.stderr


def test_fuzz_corpus_of_the_abi_replays(tmp_path):
    """tests/fuzz/fuzz_aot.c's seed inputs and past findings, replayed
    against the model it fuzzes: bad calls are refused, none crashes or
    touches memory outside its buffers (which lie between inaccessible
    pages)."""
    replay = os.path.join(BUILD, "tests", "fuzz", "replay_aot")
    if not os.path.exists(replay):
        pytest.skip(f"{replay} is not built")
    fuzz = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "fuzz")
    sys.path.insert(0, fuzz)
    try:
        import make_aot_model
    finally:
        sys.path.remove(fuzz)
    model = make_aot_model.write(tmp_path / "model.so")
    inputs = [os.path.join(fuzz, "corpus", "aot")]
    if os.path.isdir(os.path.join(fuzz, "regressions", "aot")):
        inputs.append(os.path.join(fuzz, "regressions", "aot"))
    r = subprocess.run([replay, *inputs], capture_output=True, text=True, timeout=300,
                       env={**os.environ, "EMBER_FUZZ_AOT_MODEL": str(model)})
    assert r.returncode == 0, r.stdout + r.stderr
    assert "replayed" in r.stdout and int(r.stdout.split()[1]) >= 10


# ---------------------------------------------------------------- issue 38, items 11-13 and 16

def test_one_instance_from_many_threads(mlp_so, tmp_path):
    """Calls on one instance once shared its scratch memory and crashed
    (3 runs out of 3, from C and from Python); now they take turns."""
    model, x, path, d = mlp_so
    assert "one instance, 4 threads: equal" in c_program("shared", path, d / "in.bin", 4).stdout
    m = ember.aot.load(path)
    want = m(x).numpy()
    import threading
    bad = []

    def work():
        for _ in range(30):
            if not np.array_equal(m(x).numpy(), want):
                bad.append(1)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not bad


def test_one_training_step_instance_from_many_threads(tmp_path):
    model, opt, step, x, y = training_setup()
    step(x, y)
    path = ember.aot.compile(step, (x, y), tmp_path / "step.so")
    write_inputs(tmp_path / "in.bin", x, y)
    assert "one instance, 4 threads: equal" in c_program("shared", path, tmp_path / "in.bin", 4, "steps").stdout


def test_reloading_a_re_exported_model_loads_the_new_one(tmp_path):
    """dlopen gave back the library already open at that path: the second
    model's outputs were the first's."""
    x = ember.randn(3, 4)
    path = tmp_path / "m.so"
    outs = []
    for seed in (0, 1):
        ember.manual_seed(seed)
        lin = nn.Linear(4, 2)
        ember.aot.compile(lin, (x,), path)
        with ember.no_grad():
            want = lin(x).numpy()
        outs.append(ember.aot.load(path)(x).numpy())
        np.testing.assert_allclose(outs[-1], want, rtol=1e-6, atol=1e-6)
    assert not np.array_equal(outs[0], outs[1])
    # and external weights are still found beside a model loaded this way
    ember.manual_seed(2)
    lin = nn.Linear(4, 2)
    ember.aot.compile(lin, (x,), tmp_path / "ext.so", weights="external")
    with ember.no_grad():
        np.testing.assert_allclose(ember.aot.load(tmp_path / "ext.so")(x).numpy(), lin(x).numpy(), rtol=1e-6,
                                   atol=1e-6)


def test_a_run_that_fails_changes_nothing(tmp_path):
    """An output with strides (0, 0) once failed after the training step had
    already updated the parameters and the moments."""
    import ctypes
    from ember.aot import _DLTensor, _DLDevice, _DLDataType
    model, opt, step, x, y = training_setup()

    def steps(x, y):  # (a result of 3 elements, which strides (0,) would write to one place)
        return step(x, y) * ember.ones(3)

    steps(x, y)
    path = ember.aot.compile(steps, (x, y), tmp_path / "step.so")
    fresh, m = ember.aot.load(path), ember.aot.load(path)
    (name, dtype, shape), = m.outputs
    assert shape == (3,)
    keep = []
    ins = (_DLTensor * 2)(m._dl(x, keep), m._dl(y, keep))
    bad = m._dl(ember.empty(3), keep)
    bad.strides = (ctypes.c_int64 * 1)(0)
    keep.append(bad.strides)
    status = m._lib.ember_model_run(m._handle, ins, 2, (_DLTensor * 1)(bad), 1)
    assert status == 3 and b"two elements one address" in m._lib.ember_last_error()
    np.testing.assert_array_equal(m(x, y).numpy(), fresh(x, y).numpy())  # the state had not moved


def test_a_directory_as_weights_is_a_clear_error(mlp_so):
    _, _, path, d = mlp_so
    with pytest.raises(ember.aot.AOTError, match=r"not a safetensors file: it is a directory"):
        ember.aot.load(path, weights="/tmp")
