"""Builds ember's C core through CMake for `pip install .` and
`pip install -e .` (the metadata is in pyproject.toml).

The extension `ember._C` is CMake's target `_C`; beside it goes the AOT
runtime (`aot/`: the static libraries and headers ember.aot.compile links
a model's shared object against), as in a build tree. Environment:

    EMBER_CMAKE_BUILD_DIR  build in this directory (kept, so a second
                           install rebuilds only what changed; one already
                           configured keeps its settings); default: a
                           directory under build-pip/
    EMBER_CMAKE_ARGS       more -D options, e.g. "-DEMBER_LLVM=OFF"
    CMAKE_BUILD_PARALLEL_LEVEL  jobs (default: the CPUs)
"""

import glob
import importlib.machinery
import os
import shlex
import shutil
import subprocess
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = os.path.dirname(os.path.abspath(__file__))
SUFFIX = importlib.machinery.EXTENSION_SUFFIXES[0]  # e.g. .cpython-311-x86_64-linux-gnu.so


class CMakeExtension(Extension):
    def __init__(self, name):
        super().__init__(name, sources=[])


class CMakeBuild(build_ext):
    def build_extension(self, ext):
        build_dir = os.environ.get("EMBER_CMAKE_BUILD_DIR") or os.path.join(os.path.abspath(self.build_temp), "cmake")
        build_dir = os.path.abspath(build_dir)
        extra = shlex.split(os.environ.get("EMBER_CMAKE_ARGS", ""))
        if not os.path.exists(os.path.join(build_dir, "CMakeCache.txt")):
            subprocess.run(["cmake", "-S", ROOT, "-B", build_dir, f"-DPython3_EXECUTABLE={sys.executable}",
                            "-DCMAKE_BUILD_TYPE=Release", *extra], check=True)
        elif extra:  # (a configured tree keeps its settings: reconfiguring would rebuild it)
            subprocess.run(["cmake", "-S", ROOT, "-B", build_dir, *extra], check=True)
        jobs = os.environ.get("CMAKE_BUILD_PARALLEL_LEVEL") or str(os.cpu_count() or 1)
        subprocess.run(["cmake", "--build", build_dir, "--target", "_C", "-j", jobs], check=True)

        built = os.path.join(build_dir, "python", "ember")
        found = [f for f in glob.glob(os.path.join(built, "_C*.so")) if f.endswith(SUFFIX)]
        if len(found) != 1:
            raise RuntimeError(f"ember: expected one _C{SUFFIX} in {built} (a tree configured for this "
                               f"Python, {sys.executable}), found {os.listdir(built)}")
        dest = os.path.abspath(self.get_ext_fullpath(ext.name))
        os.makedirs(os.path.dirname(dest), exist_ok=True)
        shutil.copyfile(found[0], dest)
        aot = os.path.join(built, "aot")
        if os.path.isdir(aot):  # (absent without LLVM: no AOT)
            # beside the extension; for `pip install -e .` also beside the
            # copy of it that setuptools puts in the source tree
            places = [os.path.dirname(dest)]
            if getattr(self, "editable_mode", False):
                places.append(os.path.join(ROOT, "python", "ember"))
            for place in places:
                target = os.path.join(place, "aot")
                shutil.rmtree(target, ignore_errors=True)
                shutil.copytree(aot, target)


setup(ext_modules=[CMakeExtension("ember._C")], cmdclass={"build_ext": CMakeBuild},
      options={"build": {"build_base": "build-pip"}})
