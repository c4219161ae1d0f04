"""A store's geometry: the one rule for which file sizes and index shape a store is opened with.

``resolve`` is used by everything that opens a RocketMQ store directory (``MessageStore``, the
command line, Spark's readers, writer and maintenance, the columnar copies):

1. ``<store>/rmqcore.json`` (written when rmqcore creates a store) is the truth: a given value that
   differs from it is a ConfigError (the files would be read with the wrong size);
2. a store without it (a broker's): the given values, else the size of its first CommitLog and
   consume-queue files;
3. whatever is still unknown takes StoreConfig's defaults (RocketMQ's).

A leaf module: it imports ``layout`` and ``errors`` only (``config`` re-exports its functions under
their old names).
"""
from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, NamedTuple

from . import layout as L
from .errors import ConfigError

__all__ = ["GEOMETRY_FILE", "GEOMETRY_KEYS", "Resolved", "detect_file_size", "load", "resolve", "save"]

GEOMETRY_FILE = "rmqcore.json"
GEOMETRY_KEYS = ("commitlog_file_size", "cq_file_size", "index_slots", "index_entries", "flavour")


class Resolved(NamedTuple):
    """What ``resolve`` found: the values to open with and ``rmqcore.json``'s (None without one)."""

    values: dict[str, Any]  # StoreConfig fields: the geometry plus every other given value
    saved: dict[str, int] | None


def detect_file_size(directory: Path) -> int | None:
    """The size of the first 20-digit-named non-empty file below ``directory`` (recursively for CQs)."""
    if not directory.is_dir():
        return None
    for root, dirs, files in os.walk(directory):
        dirs.sort()
        for name in sorted(files):
            if L.file_name_to_offset(name) is not None:
                size = os.path.getsize(os.path.join(root, name))
                if size > 0:
                    return size
    return None


def load(store_dir: Path) -> dict[str, int] | None:
    """The geometry saved in ``<store>/rmqcore.json`` (None when there is none).

    Raises:
        ConfigError: the file does not parse, is not a JSON object, or a value is not a JSON integer
            (``1e400``, ``16384.9``, ``"8192"`` and ``true`` are refused, never rounded).
    """
    p = store_dir / GEOMETRY_FILE
    if not p.exists():
        return None
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except (ValueError, RecursionError) as e:  # UnicodeDecodeError is a ValueError
        raise ConfigError(f"{p}: unreadable geometry ({e})") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{p}: the geometry is not a JSON object")
    out = {}
    for k in GEOMETRY_KEYS:
        if k in data:
            v = data[k]
            if type(v) is not int:
                raise ConfigError(f"{p}: {k} must be a JSON integer, not {json.dumps(v)[:40]}")
            out[k] = v
    return out


def save(store_dir: Path, cfg: Any) -> None:
    """Write ``cfg``'s geometry (a StoreConfig) to ``<store>/rmqcore.json`` (temp file + rename)."""
    p = store_dir / GEOMETRY_FILE
    tmp = p.with_suffix(".json.tmp")
    tmp.write_text(json.dumps({k: getattr(cfg, k) for k in GEOMETRY_KEYS}, indent=1) + "\n")
    os.replace(tmp, p)


def resolve(store_dir: Path, given: Mapping[str, Any] | None = None) -> Resolved:
    """The values to open ``store_dir`` with (see the module): ``rmqcore.json``'s geometry, or for a
    store without one the sizes of its files where ``given`` names none, then ``given`` over them.

    Raises:
        ConfigError: a given geometry value differs from the one ``rmqcore.json`` holds, or that
            file is unreadable (``load``).
    """
    given = dict(given or {})
    saved = load(store_dir)
    values: dict[str, Any] = {}
    if saved:
        values.update(saved)
        for k, v in saved.items():
            if k in given and given[k] != v:
                raise ConfigError(f"{store_dir} was created with {k}={v}, not {given[k]}")
    else:  # a foreign store: take sizes from its files when not given
        for key, dname in (("commitlog_file_size", "commitlog"), ("cq_file_size", "consumequeue")):
            if key not in given:
                size = detect_file_size(store_dir / dname)
                if size:
                    values[key] = size
    values.update(given)
    return Resolved(values, saved)
