"""Options of the ``rmq`` source as its readers, writer and stream reader see them."""

from __future__ import annotations

from typing import Any

from ...columnar.stores import geometry
from ...errors import ConfigError

__all__ = ["lower_options", "path_options", "store_geometry"]


def lower_options(options: Any) -> dict[str, str]:
    """Spark's options with lower-case keys (Spark matches option names case-insensitively)."""
    return {str(k).lower(): str(v) for k, v in dict(options).items()}


def path_options(options: Any, source: str) -> dict[str, str]:
    """:func:`lower_options` of a source that reads or writes at a path (the ``source`` format's name).

    Raises:
        ConfigError: no ``path`` option (a ValueError).
    """
    o = lower_options(options)
    if "path" not in o:
        raise ConfigError(f"the {source} source needs a path (load(path) or option('path', ...))")
    return o


def store_geometry(store_dir: str, options: dict[str, str]) -> tuple[int, int]:
    """(CommitLog, consume-queue) file sizes: the ``commitlogFileSize``/``cqFileSize`` options, else
    what the store says."""
    return geometry(store_dir, options.get("commitlogfilesize"), options.get("cqfilesize"))
