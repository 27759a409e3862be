# tools/setup.sh - sourced by run_tests.sh and run_demo.sh.
#
# ensure_packages PKG...  installs the Debian packages that are missing
#                         (as root, or through sudo), once.
# pick_python             sets PYTHON to the interpreter to build and test
#                         against: $PYTHON if set, else the first of
#                         /usr/bin/python3 and python3 that can import numpy
#                         (Debian's packages are invisible to other Pythons).
# build DIR [CMAKE ARGS]  configures and builds ember into DIR (log in
#                         DIR/ember-build.log, shown when the build fails).
# quiet LABEL CMD...      runs CMD; prints its last lines on success, all of
#                         its output on failure.

EMBER_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
JOBS="${JOBS:-$(nproc)}"

ensure_packages() {
    local missing=()
    for p in "$@"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
    done
    [ ${#missing[@]} -eq 0 ] && return 0
    local sudo=""
    if [ "$(id -u)" -ne 0 ]; then
        command -v sudo >/dev/null || { echo "need root (or sudo) to install: ${missing[*]}" >&2; return 1; }
        sudo="sudo"
    fi
    echo "== installing Debian packages: ${missing[*]}"
    $sudo apt-get update -q >/dev/null
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null
}

pick_python() {
    if [ -n "${PYTHON:-}" ]; then return 0; fi
    for cand in /usr/bin/python3 python3; do
        if command -v "$cand" >/dev/null && "$cand" -c "import numpy" 2>/dev/null; then
            PYTHON="$(command -v "$cand")"
            return 0
        fi
    done
    echo "no Python with NumPy found (install python3-numpy, or set PYTHON)" >&2
    return 1
}

build() {
    local dir="$1"; shift
    mkdir -p "$dir"
    if ! { cmake -S "$EMBER_ROOT" -B "$dir" -DPython3_EXECUTABLE="$PYTHON" "$@" &&
           cmake --build "$dir" -j "$JOBS"; } >"$dir/ember-build.log" 2>&1; then
        cat "$dir/ember-build.log"
        echo "build of $dir failed (log: $dir/ember-build.log)" >&2
        return 1
    fi
}

quiet() {
    local label="$1"; shift
    local log
    log="$(mktemp)"
    local status=0
    "$@" >"$log" 2>&1 || status=$?
    if [ "$status" -eq 0 ]; then
        echo "$label: $(grep -E "tests passed|passed|failed" "$log" | tail -n 1)"
        rm -f "$log"
    else
        cat "$log"
        rm -f "$log"
        # A status over 128 is a signal's (128 + its number): a process
        # killed from outside leaves no message of its own.
        if [ "$status" -gt 128 ]; then
            echo "$label failed: exit status $status, killed by signal $((status - 128))" \
                 "($(kill -l $((status - 128)) 2>/dev/null || echo unknown))" >&2
        else
            echo "$label failed: exit status $status" >&2
        fi
        return 1
    fi
}

# What building ember needs (runtime + LLVM backend + Python extension).
BUILD_PACKAGES=(cmake make gcc g++ libc6-dev clang-19 libclang-rt-19-dev libopenblas-dev llvm-19-dev llvm-19-tools
                python3-dev python3-numpy libopenmpi-dev openmpi-bin)
# What `pip install .` needs on top (setup.py, pyproject.toml), and
# pkg-config for the C ABI's ember.pc.
INSTALL_PACKAGES=(python3-pip python3-venv python3-setuptools python3-wheel pkgconf)
