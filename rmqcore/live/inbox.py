"""``config/consumerOffset.inbox``: consumer offsets committed by followers, for the writer (the one
owner of consumerOffset.json) to apply (``rmqcore.live``)."""
from __future__ import annotations

import contextlib
import fcntl
import json
import os
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path

from .. import layout as L
from ..errors import RecoveryCutWarning

__all__ = ["OffsetInbox"]


class OffsetInbox:
    """``config/consumerOffset.inbox``: followers' commits, for the writer to apply (module docstring)."""

    def __init__(self, store_dir: str | os.PathLike[str]) -> None:
        self.path = Path(store_dir) / "config" / L.OFFSET_INBOX_FILE

    def append(self, key: str, queue_id: int, offset: int) -> None:
        """A follower commits: one line, appended and synced under the exclusive lock."""
        line = (json.dumps({key: {str(queue_id): offset}}, ensure_ascii=False) + "\n").encode("utf-8")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            size = os.fstat(fd).st_size
            if size and os.pread(fd, 1, size - 1) != b"\n":
                line = b"\n" + line  # a line a crash cut short ends here: it is dropped, this one is whole
            os.write(fd, line)
            os.fdatasync(fd)
        finally:
            os.close(fd)  # releases the lock

    @contextlib.contextmanager
    def locked(self, shared: bool) -> Iterator[tuple[int, list[tuple[str, int, int]]]]:
        """``with inbox.locked(shared) as (fd, lines)``: the commits waiting, under the lock
        (``fd`` -1 and no lines when there is no inbox)."""
        try:
            fd = os.open(self.path, (os.O_RDONLY if shared else os.O_RDWR) | getattr(os, "O_CLOEXEC", 0))
        except FileNotFoundError:
            yield -1, []
            return
        try:
            fcntl.flock(fd, fcntl.LOCK_SH if shared else fcntl.LOCK_EX)
            chunks = []
            while chunk := os.read(fd, 1 << 20):
                chunks.append(chunk)
            yield fd, self._parse(b"".join(chunks))
        finally:
            os.close(fd)

    def _parse(self, data: bytes) -> list[tuple[str, int, int]]:
        out: list[tuple[str, int, int]] = []
        at = 0
        for raw in data.split(b"\n"):
            start, at = at, at + len(raw) + 1
            if not raw:
                continue
            try:
                obj = json.loads(raw)
                items = [(k, int(q), v) for k, qmap in obj.items() for q, v in qmap.items()]
                if not all(isinstance(k, str) and type(v) is int for k, _q, v in items):
                    raise ValueError("not a map of integers")
            except (ValueError, AttributeError, TypeError):
                warnings.warn(RecoveryCutWarning(
                    f"{self.path}: the consumer-offset commit at byte {start} is not whole (a crash cut "
                    f"it short) and was dropped: {raw[:80]!r}"), stacklevel=5)
                continue
            out.extend(items)
        return out

    def drain(self, apply: Callable[[list[tuple[str, int, int]]], None]) -> int:
        """The writer takes the commits waiting: ``apply(lines)`` (it persists consumerOffset.json),
        then the inbox is emptied, all under the exclusive lock. Returns how many were applied."""
        try:
            if os.stat(self.path).st_size == 0:
                return 0
        except FileNotFoundError:
            return 0
        with self.locked(shared=False) as (fd, lines):
            if fd < 0:
                return 0
            if lines:
                apply(lines)
            os.ftruncate(fd, 0)
            os.fsync(fd)
        return len(lines)
