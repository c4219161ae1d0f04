"""The only place that chooses between the native (Cython) kernels and their pure-Python twins.

``RMQCORE_IMPL`` selects: ``auto`` (default: native when built, else pure), ``native`` (fail if the
extension is missing) or ``pure``. ``RMQCORE_REQUIRE_NATIVE=1`` makes ``auto`` fail without the
extension too (wheel tests). ``IMPLEMENTATION`` says which one was chosen.

Kernel modules come in twins with identical names, signatures, return values and exceptions:
``rmqcore._native.<name>`` and ``rmqcore._pure.<name>``.
"""
from __future__ import annotations

import importlib
import os
from types import ModuleType
from typing import TYPE_CHECKING

KERNELS = ("crc", "hashing", "codec", "appender", "arrowcols", "groupcommit")

if TYPE_CHECKING:  # the pure twins are the type surface
    from ._pure import appender as appender
    from ._pure import codec as codec
    from ._pure import crc as crc
    from ._pure import hashing as hashing
    from ._pure import arrowcols as arrowcols
    from ._pure import groupcommit as groupcommit


def native_available() -> bool:
    try:
        for name in KERNELS:
            importlib.import_module(f"rmqcore._native.{name}")
    except ImportError:
        return False
    return True


def _choose() -> str:
    want = os.environ.get("RMQCORE_IMPL", "auto").strip().lower() or "auto"
    if want not in ("auto", "native", "pure"):
        raise ImportError(f"RMQCORE_IMPL must be auto, native or pure, not {want!r}")
    if want == "pure":
        return "pure"
    if native_available():
        return "native"
    if want == "native" or os.environ.get("RMQCORE_REQUIRE_NATIVE") == "1":
        raise ImportError(
            "rmqcore's native extension is not built; reinstall with a C compiler "
            "(pip install --force-reinstall rmqcore) or set RMQCORE_IMPL=pure"
        )
    return "pure"


IMPLEMENTATION: str = _choose()


def kernel(name: str, impl: str | None = None) -> ModuleType:
    """Return kernel module ``name`` of implementation ``impl`` (default: the chosen one)."""
    impl = impl or IMPLEMENTATION
    if impl not in ("native", "pure"):
        raise ValueError(f"unknown implementation {impl!r}")
    return importlib.import_module(f"rmqcore._{impl}.{name}")


def __getattr__(name: str) -> ModuleType:  # lazy: ``_impl.codec`` etc. load on first use
    if name in KERNELS:
        mod = kernel(name)
        globals()[name] = mod
        return mod
    raise AttributeError(name)
