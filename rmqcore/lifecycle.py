"""Calls that run inside an object's lifecycle gate (``rmqcore._pure.gate``): ``close()`` seals the
gate and waits for the calls under way before it lets go of any file, so a call racing ``close()``
either completes or raises StoreClosedError, never meets a map closed under it. A call that runs
out of file descriptors where no file open names it raises TooManyOpenFilesError all the same."""
from __future__ import annotations

import errno
import functools
from collections.abc import Callable
from typing import Any, TypeVar, cast

from . import _impl
from .errors import RmqError, too_many_open_files

__all__ = ["gated", "new_gate", "out_of_descriptors"]

_F = TypeVar("_F", bound=Callable[..., Any])


def new_gate(closed_message: str, impl: str | None = None) -> Any:
    """A Gate of the chosen (or named) implementation; sealed, it raises StoreClosedError(closed_message)."""
    return _impl.kernel("gate", impl).Gate(closed_message)


def gated(method: _F) -> _F:
    """Run ``method`` inside ``self._gate`` (entered first: StoreClosedError once it is sealed)."""

    @functools.wraps(method)
    def call(self: Any, *args: Any, **kwargs: Any) -> Any:
        gate = self._gate
        gate.enter()
        try:
            return method(self, *args, **kwargs)
        except OSError as e:
            out_of_descriptors(e, method.__qualname__)
            raise
        finally:
            gate.leave()

    return cast(_F, call)


def out_of_descriptors(e: OSError, what: str) -> None:
    """Raise TooManyOpenFilesError (an RmqError) for ``e`` when it says no descriptor was left (and no
    file open named it already); return otherwise, for the caller to re-raise ``e``. ``gated``'s rule,
    for the calls that enter the gate themselves."""
    if e.errno in (errno.EMFILE, errno.ENFILE) and not isinstance(e, RmqError):
        raise too_many_open_files(what, e) from e
