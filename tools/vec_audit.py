#!/usr/bin/env python3
"""Which elementwise scalar definitions (include/ember/ops_math.h) does gcc
vectorise? For every elementwise row of ops.def and every compute dtype of
its class, writes a contiguous loop calling sc_<op>_<dtype> (operands that
clamp/lerp/softplus take as broadcast scalars hoisted, as the eager loops
do) and compiles it with the project's flags, then lists the loops gcc left
scalar. Scalar loops run 4-16x slower, so this list should stay empty.

    /usr/bin/python3 tools/vec_audit.py [-v]
"""

import os
import re
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FLAGS = ["-O3", "-march=native", "-ffp-contract=off", "-fno-math-errno", "-fno-trapping-math",
         "-std=c11", "-I" + os.path.join(ROOT, "include")]
CLASSES = {
    "FLOAT": ["f32", "f64"], "NUMERIC": ["f32", "f64", "i64", "i32", "i16", "i8", "u8"],
    "INT": ["i64", "i32", "i16", "i8", "u8"], "INTBOOL": ["i64", "i32", "i16", "i8", "u8", "b8"],
    "BOOLONLY": ["b8"], "ALL": ["f32", "f64", "i64", "i32", "i16", "i8", "u8", "b8"],
}
CTYPE = {"f32": "float", "f64": "double", "i64": "int64_t", "i32": "int32_t", "i16": "int16_t",
         "i8": "int8_t", "u8": "uint8_t", "b8": "bool"}
PRED = {"isnan", "isinf", "isfinite", "eq", "ne", "lt", "le", "gt", "ge"}
SCALAR_OPERANDS = {"clamp", "lerp", "softplus"}  # their trailing operands are usually scalars


def rows():
    text = open(os.path.join(ROOT, "include", "ember", "ops.def")).read()
    for m in re.finditer(r"^EM_OP\((\w+), (\w+), (UNARY|BINARY|TERNARY), (\d), \d, (\w+),", text, re.M):
        yield m.group(2), int(m.group(4)), m.group(5)


def main():
    verbose = "-v" in sys.argv
    lines = ['#include "ember/ops_math.h"']
    funcs = {}
    for name, arity, cls in rows():
        for sfx in CLASSES.get(cls, []):
            # memory types as runtime/cpu/elementwise.c has them: bools as bytes
            t = "uint8_t" if sfx == "b8" else CTYPE[sfx]
            out = "uint8_t" if name in PRED else t
            first = "uint8_t" if name == "where" else t
            args = ", ".join([f"const {first} *a0"] + [f"const {t} *a{k}" for k in range(1, arity)])
            hoist = name in SCALAR_OPERANDS
            cv = lambda e, is_bool: f"(bool){e}" if is_bool else e  # noqa: E731
            call = ", ".join([cv("a0[i]", sfx == "b8" or name == "where")] +
                             [cv(f"s{k}" if hoist else f"a{k}[i]", sfx == "b8") for k in range(1, arity)])
            pre = " ".join(f"const {t} s{k} = a{k}[0];" for k in range(1, arity)) if hoist else ""
            fn = f"t_{name}_{sfx}"
            lines.append(f"void {fn}({out} *o, {args}, long n) {{ {pre} "
                         f"for (long i = 0; i < n; i++) o[i] = sc_{name}_{sfx}({call}); }}")
            funcs[len(lines)] = fn
    with tempfile.TemporaryDirectory() as d:
        d = os.environ.get("VEC_AUDIT_DIR", d)  # keep the generated file there
        src = os.path.join(d, "audit.c")
        open(src, "w").write("\n".join(lines) + "\n")
        # (without loop distribution, a copy or fill stays a loop gcc can vectorise
        # rather than becoming a call to memcpy or memset)
        r = subprocess.run(["gcc", *FLAGS, "-fno-tree-loop-distribute-patterns", "-c", src, "-o", os.path.join(d, "a.o"),
                            "-fopt-info-vec-all"], capture_output=True, text=True)
        if r.returncode:
            sys.exit(r.stderr)
        done = {int(m.group(1)) for m in re.finditer(r"audit\.c:(\d+):\d+: note: vectorized [1-9]\d* loops", r.stderr)}
    scalar = [fn for ln, fn in sorted(funcs.items()) if ln not in done]
    print(f"{len(funcs) - len(scalar)} of {len(funcs)} elementwise loops vectorise")
    for fn in scalar:
        print("  scalar:", fn[2:])
    if verbose:
        print("vectorised:", ", ".join(fn[2:] for ln, fn in sorted(funcs.items()) if ln in done))
    return 1 if scalar else 0


if __name__ == "__main__":
    sys.exit(main())
