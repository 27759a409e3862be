"""Tests of EMBER_DUMP (the per-graph dump directories) and of ember-opt
reading the dumped IR back.

Dumps are produced in a subprocess: EMBER_DUMP and EMBER_DUMP_DIR are read
when a function is compiled, and setting them in this process would leak
into every other test.
"""

import os
import re
import subprocess
import sys
import textwrap

import pytest

import ember
from conftest import subprocess_env

HAS_LLVM = ember.compiler.has_llvm()
EMBER_OPT = os.path.normpath(os.path.join(os.path.dirname(ember._C.__file__), "..", "..",
                                          "tools", "ember-opt"))
# one file after each pass of the pipeline, numbered from 1
PIPELINE = ember._C._pass_pipeline()
PASS_FILES = [f"{i + 1}-after-{name}.ir" for i, name in enumerate(PIPELINE)]
IR_FILES = ["0-traced.ir", *PASS_FILES, "final.ir"]
AFTER_FUSE = PASS_FILES[PIPELINE.index("fuse")]
OTHER_FILES = ["guards.txt", "backend.txt", "passes.txt"]
LLVM_FILES = ["kernels.ll", "kernels.opt.ll"]

# The script compiled under EMBER_DUMP. Line numbers matter: the tests look
# for loc("<script>":<line>) of the lines marked `# line N`.
SCRIPT = '''\
import numpy as np
import ember


def gelu(x):
    return 0.5 * x * (1.0 + ember.tanh(0.7978845608 * (x + 0.044715 * x * x * x)))  # line 6


def mlp(x, w, b):
    h = x @ w + b  # line 10
    return ember.relu(h) * 2.0  # line 11


def misc(x, i, flag, z):
    y = ember.maximum(x.double() * 0.1 + 1e-300, float("-inf")) + C
    p = x.reshape(2, 2, 1).permute(2, 0, 1).expand(3, 2, 2) * 3.5e38
    r = flag * 1.5 + ember.arange(4) / 3 - i * 3
    return y.sum(dim=0, keepdim=True), p, r, z * float("nan") + z.exp(), y.mean()


C = ember.from_numpy(np.arange(4, dtype=np.float64))
g, m, s = ember.compile(gelu), ember.compile(mlp), ember.compile(misc)
x = ember.randn(256, 256)
g(x)
g(x)
m(ember.randn(8, 16), ember.randn(16, 4), ember.randn(4))
s(ember.randn(4), ember.arange(4), ember.from_numpy(np.array([True, False, True, True])),
  ember.zeros(()))
for cf in (g, m, s):
    print(cf.__name__, cf._specializations()[0]["dump_path"])
'''


def run_script(path, cwd, **env):
    proc = subprocess.run([sys.executable, str(path)], cwd=str(cwd), env=subprocess_env(**env),
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc


def ember_opt(*args):
    return subprocess.run([EMBER_OPT, *map(str, args)], capture_output=True, text=True, timeout=60)


@pytest.fixture(scope="module")
def dumped(tmp_path_factory):
    """Runs SCRIPT with EMBER_DUMP=ir,passes,llvm; returns (script path, dump
    dir, {function name: its dump directory as the specialisation reports it})."""
    tmp = tmp_path_factory.mktemp("dump")
    script = tmp / "script.py"
    script.write_text(SCRIPT)
    dump_dir = tmp / "out"
    proc = run_script(script, tmp, EMBER_DUMP="ir,passes,llvm", EMBER_DUMP_DIR=dump_dir)
    paths = dict(line.split(" ", 1) for line in proc.stdout.splitlines())
    return script, dump_dir, paths


def test_ember_opt_exists():
    assert os.access(EMBER_OPT, os.X_OK), EMBER_OPT


def test_one_directory_per_graph(dumped):
    """dir/<function>-<n>, n counting compiled graphs; reported as dump_path."""
    _, dump_dir, paths = dumped
    expected = {"gelu": "gelu-0", "mlp": "mlp-1", "misc": "misc-2"}
    assert sorted(p.name for p in dump_dir.iterdir()) == sorted(expected.values())
    assert paths.keys() == expected.keys()
    for name, path in paths.items():
        assert os.path.samefile(path, dump_dir / expected[name])


@pytest.mark.parametrize("name", ["gelu", "mlp", "misc"])
def test_dump_files(dumped, name):
    _, _, paths = dumped
    expected = IR_FILES + OTHER_FILES + (LLVM_FILES if HAS_LLVM else [])
    present = sorted(os.listdir(paths[name]))
    assert present == sorted(expected)
    for f in expected:
        assert os.path.getsize(os.path.join(paths[name], f)) > 0, f


@pytest.mark.parametrize("name", ["gelu", "mlp", "misc"])
@pytest.mark.parametrize("ir", IR_FILES)
def test_dumped_ir_round_trips_through_ember_opt(dumped, name, ir):
    """ember-opt parses and verifies every dump and prints it back unchanged."""
    _, _, paths = dumped
    path = os.path.join(paths[name], ir)
    with open(path) as f:
        text = f.read()
    proc = ember_opt(path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""
    assert proc.stdout == text


def test_traced_ir_has_script_locations(dumped):
    script, _, paths = dumped
    with open(os.path.join(paths["gelu"], "0-traced.ir")) as f:
        gelu_ir = f.read()
    with open(os.path.join(paths["mlp"], "0-traced.ir")) as f:
        mlp_ir = f.read()
    assert gelu_ir.startswith("graph @gelu(%x: f32[256,256]) -> (f32[256,256]) {")
    op_lines = [ln for ln in gelu_ir.splitlines() if " = " in ln]
    assert len(op_lines) >= 10
    for ln in op_lines:
        assert f'loc("{script}":6)' in ln, ln
    file = re.escape(str(script))
    assert re.search(rf'= matmul\(%x, %w\) : f32\[8,4\] loc\("{file}":10\)', mlp_ir), mlp_ir
    assert re.search(rf'= relu\(%\d+\) : f32\[8,4\] loc\("{file}":11\)', mlp_ir), mlp_ir
    assert "fused(" not in gelu_ir and "fused(" not in mlp_ir


def test_after_fuse_has_fused_nodes(dumped):
    script, _, paths = dumped
    with open(os.path.join(paths["gelu"], AFTER_FUSE)) as f:
        gelu_ir = f.read()
    with open(os.path.join(paths["mlp"], AFTER_FUSE)) as f:
        mlp_ir = f.read()
    assert gelu_ir.count("fused(") == 1
    assert mlp_ir.count("fused(") == 1
    # The mlp's fused node spans lines 10-11 (matmul and add on 10, relu and
    # mul on 11): the matmul joined as a GEMM epilogue, inside the region.
    assert f'fused(%x, %w, %b) : f32[8,4] loc("{script}":10-11)' in mlp_ir, mlp_ir
    assert mlp_ir.index("fused(") < mlp_ir.index("= matmul(%"), mlp_ir


def test_passes_txt_says_what_the_passes_did(dumped):
    _, _, paths = dumped
    with open(os.path.join(paths["gelu"], "passes.txt")) as f:
        text = f.read()
    assert re.search(r"^fuse: \d+ ops into 1 kernel; \d+ bytes of intermediates not written$", text, re.M), text


def test_final_ir_equals_last_pass(dumped):
    _, _, paths = dumped
    for name in paths:
        with open(os.path.join(paths[name], PASS_FILES[-1])) as f:
            last = f.read()
        with open(os.path.join(paths[name], "final.ir")) as f:
            assert f.read() == last


def test_guards_txt(dumped):
    _, _, paths = dumped
    with open(os.path.join(paths["gelu"], "guards.txt")) as f:
        assert f.read() == ("x: tensor dtype=f32 device=cpu shape=[256,256] strides=[256,1]\n"
                            "(grad mode): bool == True\n")
    with open(os.path.join(paths["mlp"], "guards.txt")) as f:
        lines = f.read().splitlines()
    assert lines == ["x: tensor dtype=f32 device=cpu shape=[8,16] strides=[16,1]",
                     "w: tensor dtype=f32 device=cpu shape=[16,4] strides=[4,1]",
                     "b: tensor dtype=f32 device=cpu shape=[4] strides=[1]",
                     "(grad mode): bool == True"]
    with open(os.path.join(paths["misc"], "guards.txt")) as f:
        text = f.read()
    assert "z: tensor dtype=f32 device=cpu shape=[] strides=[]" in text
    assert "flag: tensor dtype=bool" in text


def test_backend_txt(dumped):
    _, _, paths = dumped
    with open(os.path.join(paths["mlp"], "backend.txt")) as f:
        text = f.read()
    if HAS_LLVM:
        assert text.startswith("llvm backend: 1 fused kernel")
    else:
        assert "interpreter" in text


@pytest.mark.skipif(not HAS_LLVM, reason="ember was built without LLVM")
def test_llvm_dumps(dumped):
    _, _, paths = dumped
    with open(os.path.join(paths["gelu"], "kernels.ll")) as f:
        ll = f.read()
    with open(os.path.join(paths["gelu"], "kernels.opt.ll")) as f:
        opt = f.read()
    assert re.search(r"^define .*@em_[0-9a-f]{32}_k\d+\(", ll, re.M), ll[:2000]
    assert "@llvm." in opt or "define" in opt
    # The 64K-element GELU kernel is vectorised after O3.
    assert re.search(r"<\d+ x float>", opt), "no vector type in kernels.opt.ll"
    # The code holds no address of this process (the graph function reads
    # its nodes, kernels and callees from a table it is handed), so the same
    # object code could serve another process.
    for name, path in paths.items():
        with open(os.path.join(path, "kernels.opt.ll")) as f:
            assert "inttoptr" not in f.read(), name


def test_no_dump_without_ember_dump(tmp_path):
    """EMBER_DUMP unset: nothing is written, even with EMBER_DUMP_DIR set."""
    script = tmp_path / "script.py"
    script.write_text(SCRIPT)
    proc = run_script(script, tmp_path, EMBER_DUMP_DIR=tmp_path / "out")
    assert not (tmp_path / "out").exists()
    assert not (tmp_path / "ember_dump").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["script.py"]
    assert [line.split(" ", 1) for line in proc.stdout.splitlines()] == \
        [["gelu", ""], ["mlp", ""], ["misc", ""]]


def test_dump_ir_only(tmp_path):
    """EMBER_DUMP=ir: traced and final IR and the guards, no passes, no LLVM."""
    script = tmp_path / "script.py"
    script.write_text(SCRIPT)
    run_script(script, tmp_path, EMBER_DUMP="ir", EMBER_DUMP_DIR=tmp_path / "out")
    assert sorted(os.listdir(tmp_path / "out" / "gelu-0")) == \
        ["0-traced.ir", "backend.txt", "final.ir", "guards.txt"]


def test_unwritable_dump_dir_does_not_break_compiling(tmp_path):
    """Dumps are best effort: a dump dir that cannot be created is skipped."""
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    script = tmp_path / "script.py"
    script.write_text(SCRIPT)
    proc = run_script(script, tmp_path, EMBER_DUMP="all", EMBER_DUMP_DIR=blocker / "sub")
    assert [line.split(" ", 1) for line in proc.stdout.splitlines()] == \
        [["gelu", ""], ["mlp", ""], ["misc", ""]]


MALFORMED = """\
graph @f(%x: f32[2]) -> (f32[2]) {
  %0 = frobnicate(%x) : f32[2]
  return %0
}
"""


def test_ember_opt_reports_parse_errors(tmp_path):
    path = tmp_path / "bad.ir"
    path.write_text(MALFORMED)
    proc = ember_opt(path)
    assert proc.returncode != 0
    assert proc.stdout == ""
    assert proc.stderr.startswith(f"{path}:2:8: error: unknown op 'frobnicate'"), proc.stderr
    assert re.search(r"^\S+:\d+:\d+: error: ", proc.stderr, re.M)


@pytest.mark.parametrize("text,line,col", [
    ("graph @f(%x: f32[2]) -> (f32[2]) {\n  %0 = add(%x, %y) : f32[2]\n  return %0\n}\n", 2, None),
    ("graph @f(%x: f33[2]) -> (f32[2]) {\n  return %x\n}\n", 1, None),
    ("graph @f(%x: f32[2]) -> (f32[2]) {\n  return %x\n", None, None),
])
def test_ember_opt_other_malformed_inputs(tmp_path, text, line, col):
    """Undefined value, unknown dtype, missing '}': file:line:col: error:."""
    path = tmp_path / "bad.ir"
    path.write_text(text)
    proc = ember_opt(path)
    assert proc.returncode != 0
    m = re.match(rf"{re.escape(str(path))}:(\d+):(\d+): error: \S", proc.stderr)
    assert m, proc.stderr
    if line is not None:
        assert int(m.group(1)) == line, proc.stderr


def test_ember_opt_verifier_error(tmp_path):
    """A graph that parses but does not verify exits non-zero naming the node."""
    path = tmp_path / "bad.ir"
    path.write_text(textwrap.dedent("""\
        graph @f(%x: f32[2], %y: f32[3]) -> (f32[2]) {
          %0 = add(%x, %y) : f32[2] loc("a.py":7)
          return %0
        }
        """))
    proc = ember_opt(path)
    assert proc.returncode != 0
    assert "cannot broadcast f32[2] with f32[3]" in proc.stderr, proc.stderr
