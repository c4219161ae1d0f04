"""rmqcore.bases: the Closeable mixin and the ReadOnly attribute view."""
from __future__ import annotations

import inspect
import pytest

from rmqcore.bases import Closeable, ReadOnly


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
