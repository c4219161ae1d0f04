"""Options of the ``rmq`` source as its readers, writer and stream reader see them."""

from __future__ import annotations

from typing import Any

from ...columnar.stores import geometry

__all__ = ["lower_options", "store_geometry"]


def lower_options(options: Any) -> dict[str, str]:
    """Spark's options with lower-case keys (Spark matches option names case-insensitively)."""
    return {str(k).lower(): str(v) for k, v in dict(options).items()}


def store_geometry(store_dir: str, options: dict[str, str]) -> tuple[int, int]:
    """(CommitLog, consume-queue) file sizes: the ``commitlogFileSize``/``cqFileSize`` options, else
    what the store says."""
    return geometry(store_dir, options.get("commitlogfilesize"), options.get("cqfilesize"))
