#!/usr/bin/env bash
# The main job: installs what is missing, builds ember, trains a small CNN
# on scikit-learn's 8x8 digits eagerly (tools/train_digits.py: progress bar,
# per-epoch loss and accuracy, a checkpoint of model, optimizer and scheduler
# in PyTorch's .pt format; fails below 95%
# test accuracy), then tours the eager API, a GELU compiled into one kernel
# with the IR dumped for reading, and a whole training step compiled into
# one function next to its eager run (tools/demo.py).
set -euo pipefail
source "$(dirname "$0")/setup.sh"
cd "$EMBER_ROOT"

ensure_packages "${BUILD_PACKAGES[@]}" python3-sklearn
pick_python
build build
PYTHONPATH=python:build/python "$PYTHON" tools/train_digits.py
echo
EMBER_DUMP=ir,passes,llvm EMBER_DUMP_DIR="${EMBER_DUMP_DIR:-$EMBER_ROOT/ember_dump}" \
    PYTHONPATH=python:build/python "$PYTHON" tools/demo.py "$@"
