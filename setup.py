"""Extension modules only; metadata lives in pyproject.toml.

RMQCORE_NO_EXTENSIONS=1 (or a non-CPython interpreter) builds a pure-Python package.
RMQCORE_DEBUG_BUILD=1 builds with -O0 -g3 and Cython line tracing.
"""
import glob
import os
import platform
import sys

from setuptools import Extension, setup

ROOT = os.path.dirname(os.path.abspath(__file__))


def _extensions():
    if os.environ.get("RMQCORE_NO_EXTENSIONS") or platform.python_implementation() != "CPython":
        return []
    from Cython.Build import cythonize

    debug = bool(os.environ.get("RMQCORE_DEBUG_BUILD"))
    if sys.platform == "win32":
        cflags = ["/O2"]
    elif debug:
        cflags = ["-O0", "-g3", "-UNDEBUG"]
    else:
        cflags = ["-O3", "-Wall", "-Wno-unused-function", "-Wno-unreachable-code"]
    csrc = sorted(os.path.relpath(p, ROOT) for p in glob.glob(os.path.join(ROOT, "csrc", "*.c")))
    exts = []
    for pyx in sorted(glob.glob(os.path.join(ROOT, "rmqcore", "_native", "*.pyx"))):
        rel = os.path.relpath(pyx, ROOT)
        name = rel[:-4].replace(os.sep, ".")
        exts.append(
            Extension(
                name,
                [rel, *csrc],
                include_dirs=["csrc"],
                extra_compile_args=cflags,
                define_macros=[("CYTHON_TRACE_NOGIL", "1")] if debug else [],
            )
        )
    directives = {"language_level": 3, "embedsignature": True}
    if debug:
        directives["linetrace"] = True
    return cythonize(exts, compiler_directives=directives, annotate=debug)


setup(ext_modules=_extensions())
