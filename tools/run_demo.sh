#!/usr/bin/env bash
# The main job: installs what is missing, builds ember, trains a small CNN
# on scikit-learn's 8x8 digits eagerly (tools/train_digits.py: progress bar,
# per-epoch loss and accuracy, a checkpoint of model, optimizer and scheduler
# in PyTorch's .pt format; fails below 95%
# test accuracy) and again data-parallel on two processes under mpirun
# (tools/train_digits_ddp.py: DistributedSampler, DistributedDataParallel),
# then tours the eager API, a GELU compiled into one kernel
# with the IR dumped for reading, a whole training step compiled into one
# function next to its eager run, and a model compiled with ember.compile in
# an ordinary loop (backward and the optimizer outside; tools/demo.py);
# last, the digits CNN
# and its training step compiled ahead of time into shared objects
# (tools/aot_digits.py) that two C programs run with no Python
# (examples/digits_infer.c prints the test accuracy Python printed,
# examples/digits_train.c trains 100 steps with Python's losses).
set -euo pipefail
source "$(dirname "$0")/setup.sh"
cd "$EMBER_ROOT"

ensure_packages "${BUILD_PACKAGES[@]}" "${INSTALL_PACKAGES[@]}" python3-sklearn
pick_python
build build
# ember installed as users install it: pip, into a virtual environment that
# sees Debian's packages (NumPy, scikit-learn), built by the same CMake tree
# (so the C examples below come from the build that made the extension)
VENV="${VENV:-$EMBER_ROOT/.venv}"
[ -x "$VENV/bin/python" ] || "$PYTHON" -m venv --system-site-packages "$VENV"
EMBER_CMAKE_BUILD_DIR="$EMBER_ROOT/build" "$VENV/bin/pip" install -q --no-build-isolation --no-deps "$EMBER_ROOT"
PY="$VENV/bin/python"
"$PY" tools/train_digits.py
echo
echo "== data-parallel: the same CNN on 2 processes (mpirun -np 2, ember.distributed on Open MPI)"
# (single-copy transfers off: they fail in containers without ptrace rights,
# and were slower for DDP's steps here; distributed/README.md)
mpi_flags=(-np 2 --oversubscribe --mca btl_vader_single_copy_mechanism none)
[ "$(id -u)" -eq 0 ] && mpi_flags+=(--allow-run-as-root)
mpirun "${mpi_flags[@]}" "$PY" tools/train_digits_ddp.py
echo
EMBER_DUMP=ir,passes,llvm EMBER_DUMP_DIR="${EMBER_DUMP_DIR:-$EMBER_ROOT/ember_dump}" \
    "$PY" tools/demo.py "$@"
echo
AOT_DIR="${AOT_DIR:-$EMBER_ROOT/aot_demo}"
echo "== ahead of time: the digits CNN as a shared object, run from C ($AOT_DIR)"
"$PY" tools/aot_digits.py "$AOT_DIR"
build/examples/digits_infer "$AOT_DIR/digits_cnn.so" "$AOT_DIR/digits_test.bin"
build/examples/digits_train "$AOT_DIR/digits_step.so" "$AOT_DIR/digits_train.bin" "$AOT_DIR/digits_losses.txt"
