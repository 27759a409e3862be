"""Runs compare.check_model on each model program present (cases.py) and
prints one line per check: python check_models.py [NAME...]"""

import os
import sys
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cases  # noqa: E402
import compare  # noqa: E402

failed = 0
for name, case in cases.CASES.items():
    if sys.argv[1:] and name not in sys.argv[1:]:
        continue
    if not os.path.exists(case["path"]):
        print(f"{name}: absent ({case['path']})")
        continue
    try:
        res = compare.check_model(case)
    except Exception as e:  # noqa: BLE001 (a port's failure is its result)
        failed += 1
        print(f"{name}: ERROR {type(e).__name__}: {str(e)[:300]}")
        traceback.print_exc(limit=-3)
        continue
    line = ", ".join(f"{k} {'ok' if ok else 'FAIL'} ({d})" for k, (ok, d) in res.items())
    failed += not all(ok for ok, _ in res.values())
    print(f"{name}: {line}", flush=True)
sys.exit(1 if failed else 0)
