"""rmqcore.bases: the Closeable and ClosesOnce mixins and the ReadOnly attribute view."""
from __future__ import annotations

import inspect
import os
import threading
from pathlib import Path

import pytest

from rmqcore.bases import Closeable, ClosesOnce, ReadOnly


class _File(Closeable):
    def __init__(self) -> None:
        self._size = 7
        self.closes = 0

    size = ReadOnly[int]("_size", "Bytes written.")

    def close(self) -> None:
        self.closes += 1


def test_readonly_reads_the_attribute_and_refuses_assignment() -> None:
    f = _File()
    assert f.size == 7
    f._size = 9
    assert f.size == 9
    with pytest.raises(AttributeError):
        f.size = 3  # type: ignore[assignment]
    assert f.size == 9
    assert isinstance(inspect.getattr_static(_File, "size"), property)
    assert _File.size.__doc__ == "Bytes written."


def test_closeable_closes_once_and_lets_the_exception_through() -> None:
    with _File() as f:
        assert f.closes == 0
    assert f.closes == 1
    g = _File()
    with pytest.raises(KeyError), g:
        raise KeyError("x")
    assert g.closes == 1


class _Handle(ClosesOnce):
    def __init__(self, path: Path, writable: bool) -> None:
        self._lock = threading.RLock()
        self._closed = False
        self._fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        self.writable = writable
        self.calls: list[str] = []

    def _unmap(self) -> None:
        self.calls.append("unmap")

    def _finish_writes(self) -> None:
        self.calls.append("finish")


@pytest.mark.parametrize("writable", [True, False])
def test_closes_once_finishes_a_writable_file_then_lets_go_once(tmp_path: Path, writable: bool) -> None:
    h = _Handle(tmp_path / "f", writable)
    fd = h._fd
    h.close()
    h.close()
    h.close_handler()
    assert h.calls == (["finish", "unmap"] if writable else ["unmap"])
    assert h._fd == -1 and h._closed
    with pytest.raises(OSError):
        os.fstat(fd)


def test_close_handler_lets_go_without_finishing(tmp_path: Path) -> None:
    with _Handle(tmp_path / "f", True) as h:
        h.close_handler()
    assert h.calls == ["unmap"]
