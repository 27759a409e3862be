"""tools/line_budget.py: the check CI runs so that no source file passes
1,500 lines and no function 150. Each case builds a file just over or just
under a budget."""

import os
import subprocess
import sys

TOOL = os.path.join(os.path.dirname(__file__), "..", "..", "tools", "line_budget.py")


def run(*paths, **budgets):
    flags = [f"--{k}={v}" for k, v in budgets.items()]
    r = subprocess.run([sys.executable, TOOL, *flags, *map(str, paths)], capture_output=True, text=True)
    return r.returncode, r.stdout


def c_function(n_lines, name="f"):
    """A C function of exactly n_lines lines, its signature on two lines and
    braces in a string and a comment that must not count."""
    body = ["    int x = 0; /* { */", '    const char *s = "}";']
    body += [f"    x += {i};" for i in range(n_lines - 6)]
    return "\n".join([f"static int {name}(int a,", "             int b) {", *body,
                      "    return x + (s[0] == 'x');", "}"]) + "\n"


def test_c_function_over_and_at_the_budget(tmp_path):
    over, at = tmp_path / "over.c", tmp_path / "at.c"
    over.write_text("struct s { int a; };\nint t[] = {1, 2};\n" + c_function(151, "big"))
    at.write_text(c_function(150, "fits"))
    rc, out = run(over, at)
    assert rc == 1 and "over.c:3: big() has 151 lines" in out and "fits" not in out, out
    assert run(at) == (0, "line budget: 1 files checked, 0 over budget\n")


def test_python_function_and_file_sizes(tmp_path):
    f = tmp_path / "m.py"
    f.write_text("def g():\n" + "    x = 1\n" * 150)
    rc, out = run(f)
    assert rc == 1 and "m.py:1: g() has 151 lines" in out, out
    long_file = tmp_path / "long.py"
    long_file.write_text("x = 1\n" * 1501)
    rc, out = run(long_file)
    assert rc == 1 and "long.py: 1501 lines (budget 1500)" in out, out
    assert run(long_file, files=1501)[0] == 0


def test_the_repository_keeps_its_budget():
    rc, out = run()
    assert rc == 0, out
