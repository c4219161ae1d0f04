"""SpareFiles: consume-queue files made ahead, off the path that fills the last one.

A consume queue needs a new file when a unit fills its last one (or for a new queue's first unit),
on the dispatch path: under ``dispatch="put"`` inside a producer's put. Creating the file is cheap;
the first writes into a fresh file through its map are not (the page cache's first faults of the
file; far less for a file whose bytes were written once: README, "Warm files"). RocketMQ's
``AllocateMappedFileService`` makes the CommitLog's next file ahead (``MappedFileQueue.prepare_next``
here); it has nothing for consume queues, whose next file cannot be named ahead: which of many
queues fills up next is not known.

So a writer keeps one *spare*: a file of the consume-queue file size, allocated and written with
zeros by a thread of its own (GIL released in the writes), in ``<store>/spare/``. The queue that
needs a file next takes it (``take``: a rename into the queue's directory, then the file is opened
as any existing one) and the thread makes the next spare. A queue's file made from a spare is the
file ``MappedFileQueue`` would have created (the same size, all zeros): the store's files are the
same bytes either way, and a reader (a follower, RocketMQ) sees a complete file appear in the
directory, as before. RocketMQ ignores the ``spare`` directory; so does every reader here.

Without a spare ready (the first file, several queues rolling at once, a spare that could not be
made) the queue creates its file itself, as before: a failure to make a spare (a full disk) stops
making them and is left to that creation to report, where it is the caller's error.

A clean close deletes the spare and the directory; a writer's open deletes what a crash left there.
"""
from __future__ import annotations

import errno
import os
import threading
from pathlib import Path

from . import fileops
from . import layout as L

__all__ = ["SpareFiles"]

_CHUNK = 1 << 20  # zero bytes written per call while making a spare


class SpareFiles:
    """A writer's spare consume-queue files (see the module docstring).

    Args:
        directory: ``<store>/spare``; its ``spare-<n>`` files are this object's (those a crashed
            writer left are deleted at construction; nothing else there is touched).
        file_size: the consume-queue file size; the spare has it.
    """

    def __init__(self, directory: Path, file_size: int) -> None:
        self.directory = directory
        self.file_size = file_size
        self.taken = 0  # spares renamed into a queue's directory
        self.misses = 0  # takes that found none ready
        self.error: OSError | None = None  # why spares are no longer made (the thread ended)
        self._spare: Path | None = None  # the spare made and not taken yet
        self._seq = 0
        self._cond = threading.Condition()
        self._closed = False
        self._thread: threading.Thread | None = None
        self.clear()

    def clear(self) -> None:
        """Delete the spares a crashed writer left (files named as this class names them)."""
        try:
            names = os.listdir(self.directory)
        except (FileNotFoundError, NotADirectoryError):  # (a file there: no spare is made, _make fails)
            return
        for name in names:
            if name.startswith(L.SPARE_PREFIX) and name[len(L.SPARE_PREFIX):].isdigit():
                os.unlink(self.directory / name)

    @property
    def ready(self) -> int:
        """1 while a spare is made and not taken yet, else 0."""
        with self._cond:
            return 0 if self._spare is None else 1

    def take(self, path: Path) -> bool:
        """Move a ready spare to ``path`` (which must not exist; its directory must): True if one
        was, False if none was ready (the caller creates the file itself). The first call starts
        the thread that makes them."""
        with self._cond:
            if self._closed:
                return False
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="rmqcore-spare-files", daemon=True)
                self._thread.start()
            spare, self._spare = self._spare, None
            if spare is None:
                self.misses += 1
                return False
        try:
            os.rename(spare, path)
        except OSError as e:
            # (another file system under the queue's directory: EXDEV) the caller creates its file,
            # and spares are made no more
            os.unlink(spare)
            with self._cond:
                self.error = e
                self._closed = True
                self._cond.notify()
            return False
        with self._cond:
            self.taken += 1
            self._cond.notify()  # the thread makes the next one
        return True

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._closed and self._spare is not None:
                    self._cond.wait()
                if self._closed:
                    return
                self._seq += 1
                path = self.directory / f"{L.SPARE_PREFIX}{self._seq}"
            try:
                self._make(path)
            except OSError as e:
                with self._cond:
                    self.error = e
                return
            with self._cond:
                if self._closed:
                    os.unlink(path)
                    return
                self._spare = path

    def _make(self, path: Path) -> None:
        """A spare: created and allocated (``fileops``), every byte written with zeros."""
        self.directory.mkdir(exist_ok=True)
        fd = fileops.current().create(str(path), self.file_size)
        try:
            zeros = memoryview(bytes(min(_CHUNK, self.file_size)))
            pos = 0
            while pos < self.file_size:
                pos += os.pwrite(fd, zeros[: self.file_size - pos], pos)
        except BaseException:
            os.unlink(path)
            raise
        finally:
            os.close(fd)

    def close(self) -> None:
        """Stop the thread; delete the spares and the directory (if nothing else is in it)."""
        with self._cond:
            self._closed = True
            self._cond.notify()
            t, self._thread = self._thread, None
        if t is not None:
            t.join()
        spare, self._spare = self._spare, None
        if spare is not None:
            os.unlink(spare)
        try:
            os.rmdir(self.directory)
        except OSError as e:
            if e.errno not in (errno.ENOENT, errno.ENOTEMPTY, errno.EEXIST):
                raise
