#!/usr/bin/env bash
# Runs every ember test on a fresh Debian 12 machine: installs what is
# missing, checks the line budget (no source file over 1,500 lines, no
# function over 150: tools/line_budget.py), builds from scratch, then
#   1. a clang build (warnings are errors) and its C tests, then each
#      libFuzzer harness for 30 seconds (tools/fuzz.sh),
#   2. a build without LLVM: C tests, and the Python tests with every
#      compiled function running on the IR interpreter,
#   3. a sanitizer build (ASan + UBSan): C tests with leak checking, then the
#      Python tests with the sanitizers preloaded, then the device tests with
#      the host stand-in for a CUDA device,
#   4. the release build: C unit tests and lit pass tests (ctest), ember
#      installed with pip and cmake --install (tools/check_install.sh), then
#      the Python tests (pytest), whose summaries end the output.
set -euo pipefail
source "$(dirname "$0")/setup.sh"
cd "$EMBER_ROOT"

ensure_packages "${BUILD_PACKAGES[@]}" "${INSTALL_PACKAGES[@]}" python3-pytest python3-hypothesis python3-torch python3-sklearn
pick_python
echo "== python: $PYTHON"

echo "== line budget"
"$PYTHON" tools/line_budget.py

# The CUDA code generator's text is the same in every build: the release
# build compiles all of it (NVRTC, then ptxas); the others generate it all
# and compile float32's (tests/c/test_cuda_codegen.c).
quick_cuda="env EMBER_CUDA_CODEGEN_QUICK=1"

echo "== clang build"
build build-clang -DCMAKE_C_COMPILER=clang-19 -DEMBER_WERROR=ON
quiet "clang ctest" $quick_cuda ctest --test-dir build-clang --output-on-failure -E lit_ir

# libFuzzer on every reader of untrusted bytes (tests/fuzz), 30 seconds
# each; the AOT harness's model is written with the clang build's Python.
echo "== fuzzing"
EMBER_FUZZ_MODEL_BUILD=build-clang tools/fuzz.sh "${EMBER_FUZZ_SECONDS:-30}"

echo "== build without LLVM (compiled functions run on the interpreter)"
build build-nollvm -DEMBER_LLVM=OFF -DEMBER_WERROR=ON
quiet "no-LLVM ctest" $quick_cuda ctest --test-dir build-nollvm --output-on-failure -E lit_ir
quiet "no-LLVM pytest" env PYTHONPATH=python:build-nollvm/python \
    "$PYTHON" -m pytest -q -x -p no:cacheprovider tests/python

echo "== sanitizer build (ASan + UBSan)"
build build-asan -DEMBER_SANITIZE=ON -DEMBER_WERROR=ON
quiet "asan ctest" $quick_cuda ASAN_OPTIONS=detect_leaks=1 ctest --test-dir build-asan --output-on-failure -E lit_ir
# CPython itself is not instrumented: preload the sanitizer runtime (with
# libstdc++, so ASan can intercept PyTorch's C++ exceptions) and skip its
# leak report (the interpreter keeps objects alive at exit by design).
quiet "asan pytest" env ASAN_OPTIONS=detect_leaks=0 EMBER_GRAPH_EXAMPLES=300 \
    LD_PRELOAD="$(gcc -print-file-name=libasan.so) $(gcc -print-file-name=libstdc++.so)" \
    PYTHONPATH=python:build-asan/python "$PYTHON" -m pytest -q -x -p no:cacheprovider tests/python
# The code around the CUDA device (dispatch across devices, copies between
# memories, Python's .to/.cpu/.item, DLPack, checkpoints, ember.cuda) under
# the host stand-in for a GPU (cuda/stand_in.c): the device tests'
# "cuda" cases run on every change, not only where a GPU is lent. The
# stand-in refuses the ops the CUDA device has no kernel for, so the
# training tests fail here, not first on a GPU, when a model needs one.
quiet "asan pytest (CUDA stand-in)" env ASAN_OPTIONS=detect_leaks=0 EMBER_CUDA_HOST_STAND_IN=1 \
    LD_PRELOAD="$(gcc -print-file-name=libasan.so) $(gcc -print-file-name=libstdc++.so)" \
    PYTHONPATH=python:build-asan/python "$PYTHON" -m pytest -q -x -p no:cacheprovider tests/python/test_cuda_training.py tests/python/test_devices.py \
    tests/python/test_errors.py tests/python/test_checkpoints.py tests/python/test_interop.py \
    tests/python/test_amp.py tests/python/test_distributions.py tests/python/test_meta.py \
    tests/python/test_op_harness.py::test_cuda_against_eager

echo "== release build"
build build -DEMBER_WERROR=ON
ctest --test-dir build --output-on-failure
# pip install . and -e . into virtual environments, cmake --install with
# pkg-config, each used from a scratch directory (built by this tree)
quiet "install" bash tools/check_install.sh build
PYTHONPATH=python:build/python "$PYTHON" -m pytest -q -p no:cacheprovider tests/python
