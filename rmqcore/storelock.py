"""One writer per store directory per machine: RocketMQ's ``<storePathRootDir>/lock`` file, locked
with ``fcntl`` (first byte, exclusive, not blocking), plus this process's registry of the
directories it has open for writing, keyed by the directory's ``(st_dev, st_ino)``.

The registry is needed because an fcntl lock belongs to the process: a second open in the same
process would take it again without a word, and two writers would append at the same offsets.
The key is the directory itself, so another path to it (a symlink, ``a/../a``) is the same store.

An open that fails undoes what taking the lock created: the ``lock`` file, deleted while still
locked, and the store directory when the open made it and left it empty. A lock file that existed
stays. Whoever takes a lock checks, once it holds it, that the path still names the file it locked
(one deleted meanwhile by a failed open is let go and opened again).
"""
from __future__ import annotations

import fcntl
import os
import threading
from pathlib import Path

from .errors import StoreLockedError, full_disk_is_error

__all__ = ["StoreLock", "held_here"]

_WRITERS: dict[tuple[int, int], str] = {}  # (st_dev, st_ino) of a directory -> the path it was opened as
_WRITERS_LOCK = threading.Lock()


def held_here(store_dir: Path) -> bool:
    """This process has ``store_dir`` open for writing. (Ask this before opening the ``lock`` file
    to query it: closing any descriptor of that file drops the process's fcntl lock on it.)"""
    try:
        st = os.stat(store_dir)
    except OSError:
        return False
    with _WRITERS_LOCK:
        return (st.st_dev, st.st_ino) in _WRITERS


class StoreLock:
    """The writer's lock of ``store_dir`` (created with its parents when missing).

    Raises:
        StoreLockedError: this process, or another one, has the store open for writing.
    """

    def __init__(self, store_dir: Path) -> None:
        self.store_dir = store_dir
        self._made_dir = not store_dir.exists()
        store_dir.mkdir(parents=True, exist_ok=True)
        st = os.stat(store_dir)
        self._key = (st.st_dev, st.st_ino)
        with _WRITERS_LOCK:
            held = _WRITERS.get(self._key)
            if held is not None:
                raise StoreLockedError(f"{store_dir} is already open for writing in this process (as {held})")
            _WRITERS[self._key] = str(store_dir)
        try:
            self._fd, self._made_file = self._lock_file(store_dir / "lock")
        except BaseException:
            self._forget()
            self._undo_dir()
            raise

    def _lock_file(self, path: Path) -> tuple[int, bool]:
        with full_disk_is_error(str(path)):  # no descriptor left: TooManyOpenFilesError
            return self._lock_file_once(path)

    def _lock_file_once(self, path: Path) -> tuple[int, bool]:
        while True:
            made = False
            flags = os.O_RDWR | getattr(os, "O_CLOEXEC", 0)
            try:
                fd = os.open(path, flags | os.O_CREAT | os.O_EXCL, 0o644)
                made = True
            except FileExistsError:
                try:
                    fd = os.open(path, flags)
                except FileNotFoundError:  # deleted since (a failed open): make it again
                    continue
            try:
                fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, 0)
            except OSError:
                os.close(fd)
                raise StoreLockedError(
                    f"{self.store_dir} is open for writing by another process (lock held)") from None
            try:
                same = os.fstat(fd).st_ino == os.stat(path).st_ino
            except FileNotFoundError:
                same = False
            if same:
                os.pwrite(fd, b"lock", 0)
                return fd, made
            os.close(fd)  # locked a file a failed open had deleted: the path names another now

    def release(self, undo: bool = False) -> None:
        """Let go of the lock; with ``undo`` (a failed open) also delete the lock file and the
        directory when this open created them (the directory only when empty)."""
        if self._fd < 0:
            return
        try:
            if undo and self._made_file:
                try:
                    os.unlink(self.store_dir / "lock")  # still locked: no one else holds this file
                except FileNotFoundError:
                    pass
            fcntl.lockf(self._fd, fcntl.LOCK_UN, 1, 0)
        finally:
            os.close(self._fd)
            self._fd = -1
            self._forget()
            if undo:
                self._undo_dir()

    def _forget(self) -> None:
        with _WRITERS_LOCK:
            _WRITERS.pop(self._key, None)

    def _undo_dir(self) -> None:
        if self._made_dir:
            try:
                os.rmdir(self.store_dir)
            except OSError:  # not empty: something else is in it now
                pass
