#!/usr/bin/env bash
# tools/gpu_check.sh - the checks that need a GPU, as one prepared run on the
# device tool's machine (an H100/H200 with CUDA 13, CMake and gcc, nothing to
# install from). What it checks today, while the CUDA device of issue 43 is
# not built: that ember's runtime and CUDA code generators build there, and
# that the CUDA C tests (ctest -R cuda: the driver probe, NVRTC -> PTX ->
# ptxas for the generated kernels, the caching allocator, the generated code
# run on the host) pass on a machine that has a driver and a GPU, where here
# they run without one. Issue 43's work extends this script: every CUDA
# check that needs the GPU goes here, sized to fit the 15 minutes.
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
echo "== build (no LLVM, no Python extension)"
cmake -S . -B build-gpu -DEMBER_LLVM=OFF -DEMBER_PYTHON=OFF -DEMBER_NATIVE=OFF \
    -DCBLAS_INCLUDE_DIR="$deps/usr/include/x86_64-linux-gnu/openblas-pthread" \
    -DOPENBLAS_LIBRARY="$lib/openblas-pthread/libopenblas.so.0" >"$out/configure.log" 2>&1 ||
    { tail -30 "$out/configure.log"; exit 1; }
cmake --build build-gpu -j16 --target test_cuda_codegen test_cuda_allocator test_cuda_host_run \
    >"$out/build.log" 2>&1 || { grep -E "error|Error" "$out/build.log" | head -30; exit 1; }
echo "== CUDA tests"
(cd build-gpu && ctest -R cuda --output-on-failure --timeout 300) 2>&1 | tee "$out/ctest.log"
