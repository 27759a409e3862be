#!/usr/bin/env bash
# tools/check_install.sh BUILD_DIR - ember installed as Python and C users
# install it, each checked from a scratch directory:
#   1. pip install . into a virtual environment (Debian's NumPy visible),
#   2. pip install -e . into another (then the in-place copies are removed),
#   3. cmake --install into a prefix, and a C program of examples/ built
#      against it with pkg-config (ember.pc).
# Both pip installs build in BUILD_DIR, an already configured CMake tree, so
# this rebuilds nothing that tree has (setup.py: EMBER_CMAKE_BUILD_DIR).
set -euo pipefail
source "$(dirname "$0")/setup.sh"
pick_python
build_dir="$(cd "$1" && pwd)"
tmp="$(mktemp -d)"
# What pip install -e leaves in the source tree is removed afterwards, but
# only what this run made: a developer's own editable install stays.
made=()
for p in "$EMBER_ROOT"/python/ember/_C*.so "$EMBER_ROOT/python/ember/aot" "$EMBER_ROOT"/python/*.egg-info; do
    [ -e "$p" ] && made+=("keep:$p")
done
clean() {
    rm -rf "$tmp"
    for p in "$EMBER_ROOT"/python/ember/_C*.so "$EMBER_ROOT/python/ember/aot" "$EMBER_ROOT"/python/*.egg-info; do
        [ -e "$p" ] || continue
        [[ " ${made[*]-} " == *" keep:$p "* ]] || rm -rf "$p"
    done
}
trap clean EXIT
pip_install() { # VENV ARGS...: a fresh virtual environment, and pip install ARGS into it
    local venv="$1"; shift
    "$PYTHON" -m venv --system-site-packages "$venv"
    EMBER_CMAKE_BUILD_DIR="$build_dir" "$venv/bin/pip" install -q --no-build-isolation --no-deps "$@"
}

echo "-- pip install ."
pip_install "$tmp/venv" "$EMBER_ROOT"
site="$("$tmp/venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
(cd "$tmp" && "$tmp/venv/bin/python" "$EMBER_ROOT/tools/install_smoke.py" "$site/ember")

echo "-- pip install -e ."
pip_install "$tmp/venv-e" -e "$EMBER_ROOT"
(cd "$tmp" && "$tmp/venv-e/bin/python" "$EMBER_ROOT/tools/install_smoke.py" "$EMBER_ROOT/python/ember")

echo "-- cmake --install, and a C program built with pkg-config"
cmake --install "$build_dir" --prefix "$tmp/prefix" >/dev/null
export PKG_CONFIG_PATH="$tmp/prefix/lib/pkgconfig"
# (a libdir of lib/<multiarch> on Debian is GNUInstallDirs' choice for /usr only)
cc -std=c11 -O1 "$EMBER_ROOT/examples/digits_infer.c" $(pkg-config --cflags --libs ember) -o "$tmp/digits_infer"
libs="$(pkg-config --variable=ember_runtime_libs ember)"
for lib in ember_aot ember_program ember_ir ember_runtime; do
    [ -f "$tmp/prefix/lib/ember/lib$lib.a" ] || { echo "cmake --install left out lib$lib.a ($libs)" >&2; exit 1; }
done
echo "C program against the installed headers: passed"
echo "install checks: 3 passed"
