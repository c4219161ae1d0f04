"""Where ``MessageStore.put`` goes (putMessage): chosen in one place, ``choose_put_path``, at open and
whenever the disk fills or frees (``retention``); ``MessageStore.put`` is a property that returns it,
so a put on a writable ASYNC_FLUSH store is the CommitLog's native put, one C call.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..commitlog import AppendResult
from ..lifecycle import gated

if TYPE_CHECKING:
    from . import MessageStore

__all__ = ["choose_put_path"]


def choose_put_path(store: MessageStore) -> None:
    """Set the callable ``store.put`` is (``store._put_path``): a store not open for writing
    (read-only, or its open not done) checks and raises; a full disk refuses
    (``Retention.refuse_write``); SYNC_FLUSH waits for the group commit; else the CommitLog's put."""
    store._put_path = _put_path(store)


def _put_path(store: MessageStore) -> Any:
    if store.read_only or not hasattr(store, "_services"):
        return _Checked(store).put
    if store._retention.disk_full:
        return store._retention.refuse_write
    if store._services.group_commit is not None:
        return _Synced(store).put
    return store.commitlog.put


class _Checked:
    """``put`` of a store that cannot take it: the error says why (closed, read-only)."""

    def __init__(self, store: MessageStore) -> None:
        self._store = store

    def put(self, topic: str, body: bytes, queue_id: int = 0, **kwargs: Any) -> AppendResult:
        self._store._check_writable()
        return self._store.commitlog.put(topic, body, queue_id, **kwargs)


class _Synced:
    """``put`` under SYNC_FLUSH: appended, then returned once the group commit made it durable."""

    def __init__(self, store: MessageStore) -> None:
        self._store = store
        self._gate = store._gate
        self._commit = store._services.group_commit

    @gated
    def put(self, topic: str, body: bytes, queue_id: int = 0, **kwargs: Any) -> AppendResult:
        assert self._commit is not None
        r = self._store.commitlog.put(topic, body, queue_id, **kwargs)
        return self._commit.durable(r)  # type: ignore[no-any-return]
