#!/usr/bin/env bash
# tools/gpu_check.sh - the checks that need a GPU, as one prepared run on the
# device tool's machine (an H100/H200 with CUDA 13, CMake, gcc and Python
# 3.12 with NumPy, pytest and PyTorch; nothing to install from). It builds
# ember without LLVM (the compiled paths are the CPU's; the GPU checks are
# the eager CUDA device's), with the Python extension, then runs:
#   1. the CUDA C tests that need the GPU (ctest -R "cuda_(device|allocator)"):
#      test_cuda_device, tensors on the GPU against eager on the CPU (copies,
#      every elementwise kernel and cast, reductions, ops along lines,
#      views, factories, errors), and the caching allocator. (The code
#      generator's tests, NVRTC -> PTX -> ptxas and the host run, need no
#      GPU: CI runs them.)
#   2. the Python tests whose "cuda" cases run only where a GPU is
#      (test_devices.py, against NumPy and PyTorch; DLPack with PyTorch's
#      CUDA tensors; checkpoints loaded onto the GPU; ember.cuda's answers;
#      every sample of the op harness on the GPU against eager);
#   3. bench/bench_cuda.py: ember's eager kernels against PyTorch's on the
#      same GPU, with the bandwidth bound as the limit.
# Every CUDA check that needs the GPU goes here, sized to fit the session's
# 15 minutes of device time (this run: about 5 minutes with the start).
# Every eager kernel is compiled first, in parallel (ember.cuda.precompile),
# so the tests do not wait for NVRTC one kernel at a time.
#
# Prepare on the development machine, once (Debian's OpenBLAS, which the
# runtime links; the device machine has none):
#     mkdir -p .gpudeps && (cd .gpudeps && apt-get download libopenblas0-pthread \
#         libopenblas-pthread-dev libopenblas-dev libgfortran5)
#     echo /.gpudeps/ >> .git/info/exclude
# Then, with the device tool: run(command="bash tools/gpu_check.sh",
# carry=[".gpudeps"], timeout_s=420). Logs come back in $OUT.
set -uo pipefail
out="${OUT:-/tmp/gpu_check_out}"
mkdir -p "$out"
deps=/tmp/ember_deps
echo "== machine"
nvidia-smi --query-gpu=name,driver_version,memory.total,compute_cap --format=csv 2>&1 | tee "$out/gpu.txt"
nvcc --version 2>&1 | tail -1
echo "== OpenBLAS from .gpudeps"
rm -rf "$deps" && mkdir -p "$deps"
for f in .gpudeps/*.deb; do dpkg -x "$f" "$deps" || exit 1; done
lib="$deps/usr/lib/x86_64-linux-gnu"
ln -sf "$lib/openblas-pthread/libopenblas.so.0" "$lib/libopenblas.so" 2>/dev/null
export LD_LIBRARY_PATH="$lib:$lib/openblas-pthread:${LD_LIBRARY_PATH:-}"
echo "== build (no LLVM; the Python extension)"
py="$(command -v python3)"
cmake -S . -B build-gpu -DEMBER_LLVM=OFF -DEMBER_NATIVE=OFF -DPython3_EXECUTABLE="$py" \
    -DCBLAS_INCLUDE_DIR="$deps/usr/include/x86_64-linux-gnu/openblas-pthread" \
    -DOPENBLAS_LIBRARY="$lib/openblas-pthread/libopenblas.so.0" >"$out/configure.log" 2>&1 ||
    { tail -30 "$out/configure.log"; exit 1; }
cmake --build build-gpu -j16 --target test_cuda_allocator test_cuda_device _C \
    >"$out/build.log" 2>&1 || { grep -E "error|Error" "$out/build.log" | head -30; exit 1; }
export PYTHONPATH=python:build-gpu/python EMBER_CACHE_DIR=/tmp/ember_cache
echo "== every eager kernel compiled ahead, on 16 threads (ember.cuda.precompile)"
timeout 120 "$py" -c "import time, ember; t = time.time(); n = ember.cuda.precompile(); \
print(f'{n} kernels in {time.time() - t:.1f} s')" 2>&1 | tail -3
echo "== CUDA C tests"
(cd build-gpu && timeout 150 ctest -R "cuda_(device|allocator)" --output-on-failure --timeout 140) \
    >"$out/ctest.log" 2>&1
grep -v "on the GPU" "$out/ctest.log" | grep -v "^ *ok" | tail -40
echo "== Python device tests (SIGINT at the limit: pytest still prints its summary)"
timeout -s INT 170 "$py" -m pytest -q -rfE -p no:cacheprovider --tb=line \
    tests/python/test_cuda_training.py tests/python/test_devices.py tests/python/test_errors.py \
    tests/python/test_checkpoints.py tests/python/test_interop.py \
    "tests/python/test_op_harness.py::test_cuda_against_eager" >"$out/pytest.log" 2>&1
grep -E "^(FAILED|ERROR)|passed|failed" "$out/pytest.log" | cut -c1-300 | tail -40
echo "== eager CUDA figures (bench/bench_cuda.py)"
timeout -s INT 60 "$py" bench/bench_cuda.py 2>&1 | tee "$out/bench_cuda.txt"
