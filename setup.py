"""Builds specdec's Python package with the project's own CMake (one build description).

    pip install --no-build-isolation .

needs cmake, a C++20 compiler, pybind11, NumPy and DLPack's header (Debian: cmake g++
pybind11-dev python3-dev python3-numpy libdlpack-dev libeigen3-dev libfmt-dev). Set CMAKE_ARGS to
pass more options, e.g. CMAKE_ARGS="-DSPECDEC_WITH_CUDA=ON".
"""

import os
import shlex
import subprocess
import sys
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = Path(__file__).resolve().parent


class CMakeExtension(Extension):
    def __init__(self, name):
        super().__init__(name, sources=[])


class CMakeBuild(build_ext):
    def build_extension(self, ext):
        package_dir = Path(self.get_ext_fullpath(ext.name)).resolve().parent
        build_dir = Path(self.build_temp).resolve() / "cmake"
        configure = [
            "cmake", "-S", str(ROOT), "-B", str(build_dir),
            "-DCMAKE_BUILD_TYPE=Release",
            "-DSPECDEC_BUILD_PYTHON=ON",
            f"-DPython3_EXECUTABLE={sys.executable}",
            f"-DSPECDEC_PYTHON_PACKAGE_DIR={package_dir}",
            "-DSPECDEC_BUILD_TESTS=OFF", "-DSPECDEC_BUILD_BENCH=OFF",
            "-DSPECDEC_BUILD_EXAMPLES=OFF", "-DSPECDEC_BUILD_TOOLS=OFF", "-DSPECDEC_INSTALL=OFF",
        ] + shlex.split(os.environ.get("CMAKE_ARGS", ""))
        subprocess.run(configure, check=True)
        jobs = os.environ.get("CMAKE_BUILD_PARALLEL_LEVEL", str(os.cpu_count() or 1))
        subprocess.run(["cmake", "--build", str(build_dir), "--target", "_specdec", "-j", jobs],
                       check=True)


setup(
    packages=["specdec", "specdec.compat"],
    package_dir={"": "python"},
    package_data={"specdec": ["py.typed", "*.pyi"]},
    ext_modules=[CMakeExtension("specdec._specdec")],
    cmdclass={"build_ext": CMakeBuild},
    zip_safe=False,
)
