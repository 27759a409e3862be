#!/usr/bin/env bash
# Runs ember's libFuzzer harnesses (tests/fuzz) for as long as asked:
#
#   tools/fuzz.sh [SECONDS] [HARNESS...]     (default: 30 seconds, every harness)
#
# Builds build-fuzz (clang-19, everything instrumented for coverage and
# checked by ASan and UBSan, no LLVM backend or Python extension), then runs
# each harness on a copy of its seed corpus and past findings, with its
# dictionary, for SECONDS. Prints the executions each reached. A finding
# (a crash, a sanitizer report, a timeout, a leak) stops the script with
# libFuzzer's report; the input is kept under build-fuzz/findings/. Once
# fixed, copy it to tests/fuzz/regressions/<harness>/, where the ordinary
# test suite replays it (ctest fuzz_replay_<harness>; the AOT harness's in
# tests/python/test_aot.py).
#
# The AOT harness drives a model's shared object, which ember.aot.compile
# writes: with the Python extension of $EMBER_FUZZ_MODEL_BUILD (default:
# build, the release build, which is built first if missing).
set -euo pipefail
source "$(dirname "$0")/setup.sh"
cd "$EMBER_ROOT"

seconds="${1:-30}"
[ $# -gt 0 ] && shift
harnesses=("$@")
[ ${#harnesses[@]} -eq 0 ] && harnesses=(ir safetensors cache_entry aot)

ensure_packages "${BUILD_PACKAGES[@]}"
pick_python
mkdir -p build-fuzz/findings
targets=()
for h in "${harnesses[@]}"; do targets+=("fuzz_$h"); done
if ! { cmake -S . -B build-fuzz -DCMAKE_C_COMPILER=clang-19 -DEMBER_FUZZ=ON -DEMBER_LLVM=OFF -DEMBER_PYTHON=OFF \
         -DEMBER_NATIVE=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo &&
       cmake --build build-fuzz -j "$JOBS" --target "${targets[@]}"; } >build-fuzz/fuzz-build.log 2>&1; then
    cat build-fuzz/fuzz-build.log
    echo "the fuzz build failed (log: build-fuzz/fuzz-build.log)" >&2
    exit 1
fi

for h in "${harnesses[@]}"; do
    if [ "$h" = aot ] && [ -z "${EMBER_FUZZ_AOT_MODEL:-}" ]; then
        model_build="${EMBER_FUZZ_MODEL_BUILD:-build}"
        ls "$model_build"/python/ember/_C*.so >/dev/null 2>&1 || build "$model_build" -DEMBER_WERROR=ON
        PYTHONPATH="python:$model_build/python" "$PYTHON" tests/fuzz/make_aot_model.py build-fuzz/aot_model.so
        export EMBER_FUZZ_AOT_MODEL="$EMBER_ROOT/build-fuzz/aot_model.so"
    fi
    work="$(mktemp -d)"
    cp tests/fuzz/corpus/"$h"/* "$work"/
    [ -d tests/fuzz/regressions/"$h" ] && cp tests/fuzz/regressions/"$h"/* "$work"/ 2>/dev/null || true
    dict=()
    for d in tests/fuzz/"$h".dict build-fuzz/tests/fuzz/"$h".dict; do [ -f "$d" ] && dict=(-dict="$d"); done
    # an AOT call's description is a few bytes a tensor: longer inputs only
    # slow the runs down
    extra=()
    [ "$h" = aot ] && extra=(-max_len=192)
    log="build-fuzz/fuzz_$h.log"
    if ! build-fuzz/tests/fuzz/fuzz_"$h" -max_total_time="$seconds" -print_final_stats=1 -timeout=10 \
            -rss_limit_mb=2048 -artifact_prefix=build-fuzz/findings/"$h"- "${dict[@]}" "${extra[@]}" "$work" >"$log" 2>&1; then
        tail -n 60 "$log"
        echo "fuzz_$h: a finding (above; the input is in build-fuzz/findings/)" >&2
        rm -rf "$work"
        exit 1
    fi
    execs="$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")"
    cov="$(grep -o 'cov: [0-9]*' "$log" | tail -n 1)"
    echo "fuzz_$h: ${execs:-?} executions in ${seconds} s, $cov, no findings"
    rm -rf "$work"
done
