"""Closing a store, and undoing a failed open: the steps ``MessageStore.close`` runs once its gate is
sealed and no call is under way, each step even when an earlier one raised, and in an order in which
nothing unmaps a file that a thread, a lookup, the dispatcher or a zero-copy view still reads.
"""
from __future__ import annotations

import contextlib
import os
from typing import TYPE_CHECKING, Any

from .. import live as _live

if TYPE_CHECKING:
    from . import MessageStore

__all__ = ["abandon", "cancel_live_waits", "close_sealed", "live_executor"]


def cancel_live_waits(s: MessageStore) -> None:
    """Closing, the gate sealed: end every wait of this process (the waiting threads raise
    StoreClosedError; a pull waits outside the gate, so close does not wait for it)."""
    waits = s._notify if s._notify is not None else (s._follower.waits if s._follower is not None else None)
    if waits is not None:
        waits.cancel()


def close_sealed(s: MessageStore) -> None:
    """``close`` once no call is under way: open consumers commit what they consumed, threads stop,
    then the last dispatch and flush, and the files go (they go too when a thread's kept error is
    raised: the abort file stays)."""
    _end_live_waits(s)
    try:
        s._services.stop()
        if not s.read_only:
            s._meta.drain_inbox()
            s._dispatch.run(None, False)
            s._services.flush()
            gc = s._services.group_commit
            if gc is not None:  # acks still held by producers see the close's flush
                gc.mark_durable(s.commitlog.flushed_offset)
            s.checkpoint.flush()
            # a clean shutdown only when every CommitLog byte was dispatched (RocketMQ's rule)
            if s._dispatch.lag == 0:
                try:
                    os.unlink(s.store_dir / "abort")
                except FileNotFoundError:
                    pass
    finally:
        s._closed = True
        if s._notify is not None:  # before the lock goes: the next writer's state is its own
            s._notify.closed()
        _close_files(s)


def abandon(s: MessageStore) -> None:
    """A failed open stops what it started and closes what it opened so far (the CommitLog's maps and
    descriptors, consume queues, index files, flushers), writing nothing."""
    s._closed = True
    s._open_failed = True  # the lock file and directory go if this open made them
    s._gate.seal()
    try:
        if hasattr(s, "_services"):
            s._services.stop()
    finally:
        if s._notify is not None:
            s._notify.closed()
        _close_files(s)


def live_executor(s: MessageStore) -> Any:
    """The threads asyncio consumers wait in (made on first use, shut down by close)."""
    s._check_open()
    with s._live_lock:
        if s._live_pool is None:
            s._live_pool = _live.make_executor()
        return s._live_pool


def _end_live_waits(s: MessageStore) -> None:
    """Commit what open consumers consumed, and stop the threads asyncio consumers waited in."""
    for c in list(s._live_consumers):
        c._store_closing()
    with s._live_lock:
        pool, s._live_pool = s._live_pool, None
    if pool is not None:
        pool.shutdown(wait=True)


def _close_files(s: MessageStore) -> None:
    """Let go of every file, each step even when an earlier one raised: the lookup's and the
    dispatcher's buffers first (nothing may export a map being closed), then the maps, the lock
    last. What does not exist yet (a failed open) is skipped."""
    with contextlib.ExitStack() as steps:  # callbacks run last-in first-out
        steps.callback(_release_lock, s)
        steps.callback(_close_live, s)
        if getattr(s, "index", None) is not None:
            steps.callback(s.index.close)
        for cq in getattr(s, "consume_queues", {}).values():
            steps.callback(cq.close)
        if hasattr(s, "commitlog"):
            steps.callback(s.commitlog.close)
        if getattr(s, "segindex", None) is not None:
            steps.callback(s.segindex.close)
            s.segindex = None
        if hasattr(s, "_dispatch"):
            steps.callback(s._dispatch.release)
        if hasattr(s, "_keys"):
            steps.callback(s._keys.drop)


def _close_live(s: MessageStore) -> None:
    if hasattr(s, "_dispatch"):
        s._dispatch.dispatcher.set_notify(None)
    if s._notify is not None:
        s._notify.close()
    if s._follower is not None:
        s._follower.close()


def _release_lock(s: MessageStore) -> None:
    lock, s._lock = s._lock, None
    if lock is not None:
        lock.release(undo=s._open_failed)
