"""``config/*.json`` as a RocketMQ broker writes and reads them (fastjson 1.x, not strict JSON).

Maps with integer keys are written with *unquoted* keys (``{0:37960,1:37961}``), pretty-printed
with tabs, bean properties in alphabetical order. Persisting keeps the previous content as
``<file>.bak`` (develop: move to .bak, write new, fsync); loading falls back to ``.bak`` when the
file is missing, empty or unparsable (ConfigManager.load / loadBak).
"""
from __future__ import annotations

import json
import os
import re
import threading
from pathlib import Path
from typing import Any

from .errors import CorruptionError, full_disk_is_error

__all__ = ["loads_fastjson", "dumps_fastjson", "persist", "load_with_bak"]

_INT_KEY = re.compile(r'([{,]\s*)(-?\d+)\s*:')


def loads_fastjson(text: str) -> Any:
    """Parse fastjson output: quote bare integer keys first (only outside strings)."""
    out = []
    i = 0
    in_str = False
    segs = []
    # split into string / non-string segments so keys inside string values are untouched
    start = 0
    while i < len(text):
        c = text[i]
        if in_str:
            if c == "\\":
                i += 2
                continue
            if c == '"':
                segs.append((True, text[start : i + 1]))
                start = i + 1
                in_str = False
        elif c == '"':
            segs.append((False, text[start:i]))
            start = i
            in_str = True
        i += 1
    segs.append((in_str, text[start:]))
    for is_str, s in segs:
        out.append(s if is_str else _INT_KEY.sub(lambda m: f'{m.group(1)}"{m.group(2)}":', s))
    return json.loads("".join(out))


def dumps_fastjson(obj: Any, indent: int = 0) -> str:
    """fastjson ``toJSONString(obj, true)``: tabs, sorted bean keys, bare int keys."""
    tab = "\t"
    if isinstance(obj, dict):
        if not obj:
            return "{}"
        if all(isinstance(k, int) for k in obj):  # Map<Integer, Long>: one line, bare keys
            return "{" + ",".join(f"{k}:{dumps_fastjson(v)}" for k, v in sorted(obj.items())) + "}"
        items = sorted(obj.items(), key=lambda kv: str(kv[0]))
        parts = []
        for k, v in items:
            key = str(k) if isinstance(k, int) else json.dumps(str(k), ensure_ascii=False)
            parts.append(f"{tab * (indent + 1)}{key}:{dumps_fastjson(v, indent + 1)}")
        return "{\n" + ",\n".join(parts) + "\n" + tab * indent + "}"
    if isinstance(obj, (list, tuple)):
        return "[" + ",".join(dumps_fastjson(v, indent) for v in obj) + "]"
    return json.dumps(obj, ensure_ascii=False)


def _fsync_dir(d: Path) -> None:
    try:
        fd = os.open(d, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


_PERSIST_LOCK = threading.Lock()


def persist(path: Path, text: str) -> None:
    """Write ``text`` durably, keeping the previous file as ``.bak``. Threads persisting at once
    take turns (they would share ``<name>.tmp``)."""
    with _PERSIST_LOCK:
        _persist(path, text)


def _persist(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    with full_disk_is_error(str(path)):
        try:
            with open(tmp, "w", encoding="utf-8") as f:
                f.write(text)
                f.flush()
                os.fsync(f.fileno())
        except OSError:  # the file and its .bak stay as they were; no half-written .tmp is left
            tmp.unlink(missing_ok=True)
            raise
    if path.exists():
        os.replace(path, path.with_name(path.name + ".bak"))
    os.replace(tmp, path)
    _fsync_dir(path.parent)


def load_with_bak(path: Path) -> Any | None:
    """The parsed file, else its ``.bak``, else None (ConfigManager.load / loadBak).

    The ``.bak`` is read when the file is missing, empty or unparsable. A ``.bak`` that is missing
    or empty gives None (a broker starts with an empty table); one that is there but cannot be read
    or parsed raises CorruptionError with its path, as loadBak's failure stops a broker's start
    (it would otherwise start with every consumer offset lost)."""
    bak = path.with_name(path.name + ".bak")
    for p in (path, bak):
        try:
            text = p.read_text(encoding="utf-8")
        except FileNotFoundError:
            continue
        except (OSError, UnicodeDecodeError) as e:
            if p is bak:
                raise CorruptionError(f"cannot read {p.name} (nor use {path.name}): {e}", path=str(p)) from None
            continue
        if not text.strip():
            continue
        try:
            return loads_fastjson(text)
        except (ValueError, RecursionError) as e:  # RecursionError: nesting too deep for the parser
            if p is bak:
                raise CorruptionError(f"neither {path.name} nor {p.name} parses: {e}", path=str(p)) from None
            continue
    return None
