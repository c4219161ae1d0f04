"""Kernel selection for the Kafka half: which twin (native or pure) of each kernel to use.

The choice itself belongs to :mod:`rmqcore._impl` (env ``RMQCORE_IMPL``); objects here accept an
``impl`` argument ("native" / "pure" / None = the process-wide choice) so tests can run one code path
against both twins.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any, NamedTuple

__all__ = ["Kernels", "kernels"]


class Kernels(NamedTuple):
    """The twin modules in use; their type surface is the pure twins (``rmqcore._pure.*``)."""

    name: str
    sparse: Any
    batch: Any
    crc: Any


_CACHE: dict[str, Kernels] = {}


def _load(name: str, impl: str) -> ModuleType:
    from rmqcore import _impl

    return _impl.kernel(name, impl)


def kernels(impl: str | None = None) -> Kernels:
    """The kernel modules of implementation ``impl`` (None: the one :mod:`rmqcore._impl` chose).

    Raises:
        ImportError: the native extension was asked for and is not built.
        ValueError: unknown implementation name.
    """
    if impl is None:
        from rmqcore import _impl

        impl = _impl.IMPLEMENTATION
    got = _CACHE.get(impl)
    if got is None:
        got = Kernels(impl, _load("sparse", impl), _load("kafka_batch", impl), _load("crc", impl))
        _CACHE[impl] = got
    return got
