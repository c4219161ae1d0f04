"""Small building blocks shared by the classes that own files and state.

A leaf module (it imports nothing of rmqcore):

* ``Closeable``: the context-manager half of a class with a ``close()`` (``with X(...) as x:`` closes
  ``x`` on the way out, exception or not; the exception is never swallowed).
* ``ReadOnly``: a read-only attribute view, ``entries = ReadOnly[int]("_entries", "Live entries.")``,
  instead of a four-line ``@property`` that returns ``self._entries``. It is a ``property`` (the getter
  is ``operator.attrgetter``, all C), so ``help()``, ``inspect`` and the twins' surface checks see a
  property, and assigning to it raises ``AttributeError`` as a getter-only property does.
"""
from __future__ import annotations

from operator import attrgetter
from typing import TYPE_CHECKING, Any, Generic, NoReturn, TypeVar, overload

__all__ = ["Closeable", "ReadOnly"]

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
