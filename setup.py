"""Extension modules only; metadata lives in pyproject.toml.

csrc/*.c is compiled once, into rmqcore._native._core; every kernel module (rmqcore/_native/<name>.pyx)
calls it through the table of functions that module publishes (csrc/rmq_capi.h). Everything is built
with hidden visibility: a module exports its PyInit_* only.

RMQCORE_NO_EXTENSIONS=1 (or a non-CPython interpreter) builds a pure-Python package.
RMQCORE_REQUIRE_NATIVE=1 (wheel builds: cibuildwheel, CI's wheel round trip) makes any build without the
compiled kernels an error instead, so a wheel can never silently come out pure-Python.
RMQCORE_DEBUG_BUILD=1 builds with -O0 -g3 and Cython line tracing.
The modules are compiled in parallel, one job per CPU (RMQCORE_BUILD_JOBS=N sets N), and on Linux
also translated by Cython in parallel.
"""
import glob
import os
import platform
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = os.path.dirname(os.path.abspath(__file__))
CORE = "rmqcore._native._core"
JOBS = int(os.environ.get("RMQCORE_BUILD_JOBS") or os.cpu_count() or 1)


class ParallelBuildExt(build_ext):
    """build_ext compiling JOBS extension modules at once unless told otherwise (``-j``)."""

    def finalize_options(self):
        super().finalize_options()
        if not self.parallel:
            self.parallel = JOBS


def _extensions():
    require = os.environ.get("RMQCORE_REQUIRE_NATIVE") == "1"
    if os.environ.get("RMQCORE_NO_EXTENSIONS") or platform.python_implementation() != "CPython":
        if require:
            raise SystemExit("RMQCORE_REQUIRE_NATIVE=1: refusing to build rmqcore without its extensions")
        return []
    from Cython.Build import cythonize  # a missing Cython is an error, never a pure-Python fallback

    debug = bool(os.environ.get("RMQCORE_DEBUG_BUILD"))
    if sys.platform == "win32":
        cflags = ["/O2"]
    elif debug:
        cflags = ["-O0", "-g3", "-UNDEBUG"]
    else:
        cflags = ["-O3", "-Wall", "-Wno-unused-function", "-Wno-unreachable-code"]
    csrc = sorted(os.path.relpath(p, ROOT) for p in glob.glob(os.path.join(ROOT, "csrc", "*.c")))
    unix = sys.platform != "win32"
    common = dict(
        include_dirs=["csrc"],
        # hidden visibility: a module exports its PyInit_* and nothing else (no rmq_* symbol)
        extra_compile_args=cflags + (["-fvisibility=hidden"] if unix else []),
        extra_link_args=["-pthread"] if unix else [],  # the group commit's mutex/condvars
    )
    trace = [("CYTHON_TRACE_NOGIL", "1")] if debug else []
    # the C core, compiled once into one module; the kernels reach it through its table of functions
    # (csrc/rmq_capi.h), so the process holds one copy of it and of its state
    exts = [Extension(CORE, [os.path.join("rmqcore", "_native", "_core.pyx"), *csrc], define_macros=trace,
                      **common)]
    for pyx in sorted(glob.glob(os.path.join(ROOT, "rmqcore", "_native", "*.pyx"))):
        rel = os.path.relpath(pyx, ROOT)
        name = rel[:-4].replace(os.sep, ".")
        if name != CORE:
            exts.append(Extension(name, [rel], define_macros=[("RMQ_CAPI_CLIENT", "1"), *trace], **common))
    if require and len(exts) < 2:
        raise SystemExit("RMQCORE_REQUIRE_NATIVE=1: no rmqcore/_native/*.pyx found (an incomplete sdist?)")
    directives = {"language_level": 3, "embedsignature": True}
    if debug:
        directives["linetrace"] = True
    # (cythonize's jobs are processes: forked on Linux only, where setup.py is not run again in each)
    nthreads = JOBS if JOBS > 1 and sys.platform.startswith("linux") else 0
    return cythonize(exts, compiler_directives=directives, annotate=debug, nthreads=nthreads)


setup(ext_modules=_extensions(), cmdclass={"build_ext": ParallelBuildExt})
