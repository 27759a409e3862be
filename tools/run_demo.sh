#!/usr/bin/env bash
# The main job: installs what is missing, builds ember, and runs the demo
# (eager vs compiled GELU on 16M values, with the IR dumped for reading).
set -euo pipefail
source "$(dirname "$0")/setup.sh"
cd "$EMBER_ROOT"

ensure_packages "${BUILD_PACKAGES[@]}"
pick_python
build build
EMBER_DUMP=ir,passes,llvm EMBER_DUMP_DIR="${EMBER_DUMP_DIR:-$EMBER_ROOT/ember_dump}" \
    PYTHONPATH=python:build/python "$PYTHON" tools/demo.py "$@"
