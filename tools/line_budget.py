"""The line budget: fails when a source file passes 1,500 lines or a function
150, so the house stays livable as it grows (run by tools/run_tests.sh).

    python3 tools/line_budget.py [--files N] [--functions N] [paths...]

Checks the C (.c, .h) and Python files git tracks (or the paths given). A C
function is found the way a reader finds one: at file level, a `{` whose
preceding declaration has a parameter list and no `=`; its length runs from
the first line of that declaration to the closing `}`. Python functions and
methods come from the ast. Prints each offender and exits 1 if there is any.
"""

import argparse
import ast
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def strip_c(text):
    """Comments, strings and character literals blanked, newlines kept (so
    line numbers and braces can be read off what is left)."""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            out.append(c + re.sub(r"[^\n]", " ", text[i + 1:j]) + c)
            i = j + 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def c_functions(text):
    """(first line, last line, name) of each function defined in C text."""
    code = strip_c(text)
    code = re.sub(r"^[ \t]*#.*(\\\n.*)*$", lambda m: re.sub(r"[^\n]", " ", m.group(0)), code, flags=re.M)
    funcs, depth, decl_start, line = [], 0, None, 1
    start_line = name = None
    for c in code:
        if depth == 0 and decl_start is None and not c.isspace():
            decl_start, decl = line, []
        if depth == 0 and decl_start is not None:
            decl.append(c)
        if c == "{":
            if depth == 0:
                head = "".join(decl)
                paren = head.find("(")
                is_fn = paren > 0 and ")" in head and "=" not in head[:paren] and not re.match(
                    r"\s*(typedef|struct|enum|union)\b", head)
                m = re.search(r"(\w+)\s*\(", head)
                start_line, name = (decl_start, m.group(1) if m else "?") if is_fn else (None, None)
            depth += 1
        elif c == "}":
            depth -= 1
            if depth == 0:
                if start_line is not None:
                    funcs.append((start_line, line, name))
                decl_start = start_line = None
        elif c == ";" and depth == 0:
            decl_start = None
        if c == "\n":
            line += 1
    return funcs


def py_functions(text):
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return []
    return [(n.lineno, n.end_lineno, n.name) for n in ast.walk(tree)
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--files", type=int, default=1500, help="most lines a file may have")
    ap.add_argument("--functions", type=int, default=150, help="most lines a function may have")
    ap.add_argument("paths", nargs="*")
    args = ap.parse_args()
    paths = args.paths or subprocess.check_output(
        ["git", "ls-files", "*.c", "*.h", "*.py"], cwd=ROOT, text=True).split()
    bad = []
    for path in paths:
        with open(os.path.join(ROOT, path), encoding="utf-8", errors="replace") as f:
            text = f.read()
        n_lines = text.count("\n")
        if n_lines > args.files:
            bad.append(f"{path}: {n_lines} lines (budget {args.files}): split it by what it does")
        funcs = py_functions(text) if path.endswith(".py") else c_functions(text)
        for first, last, name in funcs:
            if last - first + 1 > args.functions:
                bad.append(f"{path}:{first}: {name}() has {last - first + 1} lines (budget "
                           f"{args.functions}): split it into steps")
    for b in bad:
        print(b)
    print(f"line budget: {len(paths)} files checked, {len(bad)} over budget")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
