"""Small building blocks shared by the classes that own files and state.

A leaf module (it imports nothing of rmqcore):

* ``Closeable``: the context-manager half of a class with a ``close()`` (``with X(...) as x:`` closes
  ``x`` on the way out, exception or not; the exception is never swallowed).
* ``ClosesOnce``: Kafka's ``close`` / ``closeHandler`` pair for a class that owns a file descriptor
  (and maybe a map of it): ``close`` finishes a writable file first (trim, sync), ``close_handler``
  only lets go; both run once.
* ``ReadOnly``: a read-only attribute view, ``entries = ReadOnly[int]("_entries", "Live entries.")``,
  instead of a four-line ``@property`` that returns ``self._entries``. It is a ``property`` (the getter
  is ``operator.attrgetter``, all C), so ``help()``, ``inspect`` and the twins' surface checks see a
  property, and assigning to it raises ``AttributeError`` as a getter-only property does.
"""
from __future__ import annotations

import os
from operator import attrgetter
from typing import TYPE_CHECKING, Any, Generic, NoReturn, TypeVar, overload

__all__ = ["Closeable", "ClosesOnce", "ReadOnly"]

_T = TypeVar("_T")
_C = TypeVar("_C", bound="Closeable")


class Closeable:
    """Mixin: ``__enter__`` returns the object, ``__exit__`` calls its ``close()``."""

    __slots__ = ()

    if TYPE_CHECKING:  # the class that mixes this in defines it

        def close(self) -> None: ...

    def __enter__(self: _C) -> _C:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class ClosesOnce(Closeable):
    """Mixin for a class that owns descriptor ``_fd`` (-1 once closed) and a map it lets go of in
    ``_unmap``, guarded by ``_lock`` (reentrant: ``close`` holds it while ``close_handler`` takes it),
    with flags ``_closed`` and ``writable``; it defines ``_finish_writes`` (what a writable file needs
    before it is closed: trim, sync)."""

    if TYPE_CHECKING:  # the class that mixes this in has them
        _lock: Any
        _closed: bool
        _fd: int
        writable: bool

        def _unmap(self) -> None: ...

        def _finish_writes(self) -> None: ...

    def close(self) -> None:
        """Finish a writable file (``_finish_writes``), then :meth:`close_handler`. Idempotent."""
        with self._lock:
            if self._closed:
                return
            if self.writable:
                self._finish_writes()
            self.close_handler()

    def close_handler(self) -> None:
        """Unmap and close the descriptor, nothing else (Kafka ``closeHandler``). Idempotent."""
        with self._lock:
            if self._closed:
                return
            self._unmap()
            if self._fd >= 0:
                os.close(self._fd)
                self._fd = -1
            self._closed = True


class ReadOnly(property, Generic[_T]):
    """A getter-only property that returns the attribute named ``attr`` of the instance."""

    def __init__(self, attr: str, doc: str | None = None) -> None:
        super().__init__(attrgetter(attr))
        self.__doc__ = doc  # a property subclass keeps its doc in the instance, not in the slot

    if TYPE_CHECKING:  # what mypy sees: the class gets the view, an instance gets the value

        @overload
        def __get__(self, obj: None, owner: type | None = None, /) -> ReadOnly[_T]: ...

        @overload
        def __get__(self, obj: object, owner: type | None = None, /) -> _T: ...

        def __get__(self, obj: object, owner: type | None = None, /) -> Any: ...

        def __set__(self, obj: object, value: NoReturn, /) -> None: ...  # no value fits: read-only
