"""The kernel registry: the only place that lists the kernels and chooses between their twins.

Every kernel comes in twins with identical names, signatures, return values and exceptions:
``rmqcore._native.<name>`` (Cython over the C core in ``csrc/``) and ``rmqcore._pure.<name>`` (the
readable reference). ``KERNELS`` lists every one of them; tests/test_kernels.py checks that the two
twins of each expose the same surface (``__all__``, kinds, signatures).

``RMQCORE_IMPL`` selects: ``auto`` (default: native when every native kernel is built, else pure),
``native`` (fail if any is missing) or ``pure``. ``RMQCORE_REQUIRE_NATIVE=1`` makes ``auto`` fail
without the extension too (wheel tests). ``IMPLEMENTATION`` says which one was chosen.
"""
from __future__ import annotations

import importlib
import os
from types import ModuleType
from typing import TYPE_CHECKING

# every kernel, RocketMQ half then Kafka half (a name here is rmqcore/_native/<name>.pyx and
# rmqcore/_pure/<name>.py)
KERNELS = (
    "crc",
    "hashing",
    "codec",
    "appender",
    "arrowcols",
    "groupcommit",
    "notify",
    "dispatch",
    "indexfile",
    "keylookup",
    "kafka_batch",
    "sparse",
    "gate",
)

if TYPE_CHECKING:  # the pure twins are the type surface
    from ._pure import appender as appender
    from ._pure import arrowcols as arrowcols
    from ._pure import codec as codec
    from ._pure import crc as crc
    from ._pure import dispatch as dispatch
    from ._pure import gate as gate
    from ._pure import groupcommit as groupcommit
    from ._pure import hashing as hashing
    from ._pure import indexfile as indexfile
    from ._pure import kafka_batch as kafka_batch
    from ._pure import keylookup as keylookup
    from ._pure import notify as notify
    from ._pure import sparse as sparse


def native_available() -> bool:
    """True when every native kernel in ``KERNELS`` imports."""
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
    """Return kernel module ``name`` of implementation ``impl`` (default: the chosen one).

    Raises:
        ValueError: ``impl`` is not "native" or "pure", or ``name`` is not in ``KERNELS``.
        ImportError: the native twin was asked for and is not built.
    """
    impl = impl or IMPLEMENTATION
    if impl not in ("native", "pure"):
        raise ValueError(f"unknown implementation {impl!r}")
    if name not in KERNELS:
        raise ValueError(f"unknown kernel {name!r} (the kernels: {', '.join(KERNELS)})")
    return importlib.import_module(f"rmqcore._{impl}.{name}")


def __getattr__(name: str) -> ModuleType:  # lazy: ``_impl.codec`` etc. load on first use
    if name in KERNELS:
        mod = kernel(name)
        globals()[name] = mod
        return mod
    raise AttributeError(name)
