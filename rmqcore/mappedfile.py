"""MappedFile and MappedFileQueue: fixed-size mmap'd files named by their 20-digit start offset.

Mirrors RocketMQ's ``DefaultMappedFile`` / ``MappedFileQueue``:

* every file of a queue has exactly ``file_size`` bytes; its name is the global offset of its first
  byte (``layout.offset_to_file_name``); global offset ``o`` lives in the file starting at
  ``o - o % file_size``;
* on load a *last* file of length 0 is deleted; any other size mismatch is a ``ConfigError``
  naming the file (RocketMQ: "length not matched message store config value");
* files whose names are not 20 decimal digits are ignored (RocketMQ fails on them; a stray
  ``.bak`` or editor file should not keep a store from opening);
* truncation moves positions and deletes whole files after the offset; it does not zero bytes
  (``zero`` does, for recovery: a later scan must not read what it cut).

Thread-safety: one writer; readers may read positions below ``wrote_position`` concurrently.
Pointers into the map never outlive a kernel call; ``close`` fails with BufferError while a
zero-copy view is exported, so a map is never unmapped under a reader.

A store keeps thousands of consume-queue files; a ``MapPool`` bounds how many of them are mapped at
once. Its files (``PooledMappedFile``) hold no descriptor of their own (the map keeps one), and the
least recently used beyond the budget let go of their map, which is made again on the next use of
``mm``. A map let go is never closed under a user: it goes when its last user (a kernel call, the
dispatcher's binding) lets go of it.
"""
from __future__ import annotations

import errno
import mmap
import os
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from . import fileops
from . import layout as L
from .errors import (
    ConfigError,
    OffsetOutOfRangeError,
    RmqError,
    StoreClosedError,
    TooManyOpenFilesError,
    full_disk_is_error,
)

if TYPE_CHECKING:
    from .spares import SpareFiles

__all__ = ["MappedFile", "MappedFileQueue", "MapPool", "PooledMappedFile", "map_file", "open_files_budget"]

_PREFAULT_CHUNK = 4 * 1024 * 1024
_MADV_HUGEPAGE = getattr(mmap, "MADV_HUGEPAGE", None)  # Linux
_SCAN_CHUNK = 1 << 20  # bytes data_end reads and zero writes at a time


def _advise_huge(mm: mmap.mmap) -> None:
    """MADV_HUGEPAGE on a writable file map: the page cache then holds its pages in large folios
    (up to 2 MiB, where the filesystem supports them: ext4 on recent kernels), and write-back
    write-protects a folio with one TLB shootdown instead of one per 4 KiB page. Those shootdowns
    interrupt every CPU running the process's threads; on this class of VM a put loop took
    1.3-1.6x as long while the flusher ran. The cost: a sync writes a written folio whole, so this is
    for asynchronous flushing only (see ``huge_pages``). A hint: where the kernel lacks THP
    (EINVAL), the map simply stays as it is."""
    if _MADV_HUGEPAGE is not None:
        try:
            mm.madvise(_MADV_HUGEPAGE)
        except OSError:
            pass


def map_file(
    path: str, file_size: int, *, create: bool, read_only: bool, geometry: str,
    allocate_new: int | None = None, allocate_existing: Callable[[int], int] | None = None,
) -> tuple[int, mmap.mmap]:  # fmt: skip
    """Create ``path`` (it must not exist) or open it, check that it has ``file_size`` bytes and map them
    all; returns the descriptor and the map. The file is allocated, not sparse, from its start:
    ``allocate_new`` bytes of a created file, ``allocate_existing(fd)`` bytes of an existing one opened
    writable (both default to the whole file). RocketMQ leaves its files sparse (FileChannel.map extends
    them): writing through the map into an unallocated page of a full disk would be a SIGBUS (see
    fileops); allocating is a no-op for files rmqcore created. On any failure nothing stays open and a file
    created here is deleted.

    Raises:
        ConfigError: the file's length is not ``file_size`` (the message says it does not match
            ``geometry``).
        DiskFullError, TooManyOpenFilesError: see ``errors.full_disk_is_error``.
        OSError: the file cannot be created or opened.
    """
    if create:
        with full_disk_is_error(f"{path} ({file_size} bytes)"):
            fd = fileops.current().create(path, file_size, allocate_new)
    else:
        flags = os.O_RDONLY if read_only else os.O_RDWR
        with full_disk_is_error(path):  # no descriptor left: TooManyOpenFilesError
            fd = os.open(path, flags | getattr(os, "O_CLOEXEC", 0), 0o644)
    try:
        size = os.fstat(fd).st_size
        if size != file_size:
            raise ConfigError(f"{path}: length {size} does not match {geometry}")
        if not create and not read_only:
            fileops.allocate(fd, path, 0, file_size if allocate_existing is None else allocate_existing(fd))
        with full_disk_is_error(path):  # the map takes a descriptor of its own
            mm = mmap.mmap(fd, file_size, access=mmap.ACCESS_READ if read_only else mmap.ACCESS_WRITE)
    except BaseException:
        os.close(fd)
        if create:
            try:
                os.unlink(path)
            except OSError:
                pass
        raise
    return fd, mm


class MappedFile:
    """One fixed-size file mapped into memory."""

    __slots__ = (
        "path", "file_from_offset", "file_size", "file_end_offset", "read_only", "mm", "fd", "wrote_position",
        "flushed_position", "_closed",
    )

    def __init__(
        self, path: str | os.PathLike[str], file_from_offset: int, file_size: int, *,
        create: bool = False, read_only: bool = False, huge_pages: bool = False,
    ) -> None:
        self.path = str(path)
        self.file_from_offset = file_from_offset
        self.file_size = file_size
        self.file_end_offset = file_from_offset + file_size  # global offset one past the file
        self.read_only = read_only
        fd, self.mm = map_file(self.path, file_size, create=create, read_only=read_only,
                               geometry=f"the configured file size {file_size} (pass the store's real "
                               "geometry, or move the stray file away)")
        if huge_pages and not read_only:
            _advise_huge(self.mm)
        self.fd = fd
        self.wrote_position = 0
        self.flushed_position = 0
        self._closed = False

    def is_full(self) -> bool:
        return self.wrote_position >= self.file_size

    def prefault(self, start: int = 0, end: int | None = None) -> None:
        """Fault pages in ahead of writes (MADV_POPULATE_WRITE), in chunks, with the GIL released
        by the native kernel so the writer keeps running (AllocateMappedFileService's warm-up)."""
        if self.read_only or self._closed:
            return
        from . import _impl

        populate = _impl.appender.prefault
        end = self.file_size if end is None else end
        pos = start
        while pos < end:
            n = min(_PREFAULT_CHUNK, end - pos)
            if not populate(self.mm, pos, pos + n):
                return
            pos += n

    def flush(self) -> int:
        """Make every written byte durable (fdatasync also writes back pages dirtied via the map)."""
        if self._closed:
            raise StoreClosedError(f"{self.path} is closed")
        wrote = self.wrote_position  # read first: bytes written during the sync stay unflushed
        if self.flushed_position < wrote and not self.read_only:
            fileops.current().fdatasync(self.fd, self)
            self.flushed_position = max(self.flushed_position, wrote)
        return self.flushed_position

    def data_end(self, start: int) -> int:
        """One past the last non-zero byte at or after ``start`` (``start`` when there is none). Ranges
        the file system reports as never written (SEEK_DATA/SEEK_HOLE: holes, unwritten extents) are
        skipped without reading them; the rest is read through the map, from the end backwards."""
        return self._data_end(self.fd, start)

    def _data_end(self, fd: int, start: int) -> int:
        segments: list[tuple[int, int]] = []
        pos, stop = start, self.file_size
        try:
            while pos < stop:
                d = os.lseek(fd, pos, os.SEEK_DATA)
                if d >= stop:
                    break
                pos = min(os.lseek(fd, d, os.SEEK_HOLE), stop)
                segments.append((d, pos))
        except OSError as e:
            if e.errno != errno.ENXIO:  # ENXIO: no data past pos; anything else: no such seek here
                segments = [(start, stop)]
        except AttributeError:  # no SEEK_DATA on this platform
            segments = [(start, stop)]
        for lo, hi in reversed(segments):
            while hi > lo:
                a = max(lo, hi - _SCAN_CHUNK)
                n = len(self.mm[a:hi].rstrip(b"\0"))
                if n:
                    return a + n
                hi = a
        return start

    def zero(self, start: int, stop: int) -> None:
        """Overwrite ``[start, stop)`` with zeros through the map and make that durable (what
        recovery cuts must not be read again by a later scan)."""
        if self.read_only:
            raise ConfigError(f"{self.path} is open read-only")
        from . import _impl

        for a in range(start, stop, _SCAN_CHUNK):
            b = min(stop, a + _SCAN_CHUNK)
            self.mm[a:b] = bytes(b - a)
        _impl.appender.sync_range(self.mm, start, stop)

    def close(self) -> None:
        if self._closed:
            return
        self.mm.close()  # BufferError while a view is exported: the caller must release views first
        os.close(self.fd)
        self._closed = True

    @property
    def closed(self) -> bool:
        return self._closed

    def maps(self, path: str) -> bool:
        """This map is of the file ``path`` names now (a writer's recovery may have replaced it)."""
        try:
            return os.stat(path).st_ino == os.fstat(self.fd).st_ino
        except OSError:
            return False

    def destroy(self) -> None:
        """Close and delete the file. Refused for a read-only map: read-only opens change nothing."""
        if self.read_only:
            raise ConfigError(f"{self.path} is open read-only; it cannot be deleted")
        self.close()
        os.unlink(self.path)

    def __repr__(self) -> str:
        return f"MappedFile({self.path!r}, wrote={self.wrote_position}, flushed={self.flushed_position})"


def open_files_budget() -> int:
    """How many pooled files a store maps at once by default: a quarter of the process's descriptor
    limit (each takes one), at least 16 and at most 4096 (RLIMIT_NOFILE's soft limit; 1024 where
    it cannot be read)."""
    try:
        import resource

        soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
        if soft == resource.RLIM_INFINITY:
            soft = 1 << 14
    except (ImportError, OSError, ValueError):
        soft = 1024
    return max(16, min(4096, soft // 4))


class MapPool:
    """At most ``budget`` PooledMappedFiles of a store mapped at once (roughly the least recently
    used let go first: a file used since the last look gets a second chance, CLOCK's rule). A
    file ``pin``ned (bound to the dispatcher, which writes through its map) is never let go.
    ``reopened`` counts the maps made again."""

    def __init__(self, budget: int) -> None:
        if budget < 1:
            raise ConfigError(f"a map pool needs a budget of at least one file, not {budget}")
        self.budget = budget
        self.reopened = 0
        self._lock = threading.Lock()
        self._mapped: OrderedDict[PooledMappedFile, None] = OrderedDict()  # oldest first

    @property
    def mapped(self) -> int:
        """How many of its files are mapped now."""
        return len(self._mapped)

    def add(self, mf: PooledMappedFile) -> None:
        """``mf`` was just mapped."""
        with self._lock:
            self._mapped[mf] = None
            self._shed(self.budget)

    def remove(self, mf: PooledMappedFile) -> None:
        with self._lock:
            self._mapped.pop(mf, None)

    def pin(self, mf: PooledMappedFile, pinned: bool) -> None:
        mf._pinned = pinned

    def shed(self, keep: int) -> None:
        """Let go of files until at most ``keep`` are mapped (pinned ones stay)."""
        with self._lock:
            self._shed(keep)

    def remap(self, mf: PooledMappedFile) -> mmap.mmap:
        """``mf``'s map, made again if it was let go (other files let go to make room; when no
        descriptor is left, half the pool goes and the map is tried once more)."""
        with self._lock:
            m = mf._map
            if m is not None:
                return m
            if mf._closed:
                raise ValueError(f"{mf.path} is closed")
            self._shed(self.budget - 1)
            try:
                m = mf._map_again()
            except TooManyOpenFilesError:  # half the pool goes (descriptors other code holds, too)
                self._shed(self.budget // 2)
                m = mf._map_again()
            mf._map = m
            self._mapped[mf] = None
            self.reopened += 1
            return m

    def _shed(self, keep: int) -> None:
        """Let go of files until at most ``keep`` are mapped, down to 7/8 of it (sheds come in
        batches), oldest first, a used or pinned file skipped once (pinned ones always)."""
        excess = len(self._mapped) - keep
        if excess <= 0:
            return
        excess += keep // 8
        for second_look in (False, True):
            for mf in list(self._mapped):
                if excess <= 0:
                    return
                if mf._pinned:
                    continue
                if mf._used and not second_look:
                    mf._used = False
                    continue
                del self._mapped[mf]
                mf._map = None  # closed by its last user (a kernel call under way keeps it mapped)
                excess -= 1


class PooledMappedFile(MappedFile):
    """A MappedFile of a MapPool: no descriptor of its own (``fd`` is -1; flushes go through the
    map), and a map the pool may let go while it is idle, made again on the next use of ``mm``."""

    __slots__ = ("_pool", "_map", "_used", "_pinned", "_huge", "_ino")

    def __init__(self, path: str | os.PathLike[str], file_from_offset: int, file_size: int, *, pool: MapPool,
                 create: bool = False, read_only: bool = False, huge_pages: bool = False) -> None:
        self._pool = pool
        self._map: mmap.mmap | None = None
        self._used = True
        self._pinned = False
        self._huge = huge_pages and not read_only
        super().__init__(path, file_from_offset, file_size, create=create, read_only=read_only,
                         huge_pages=huge_pages)
        self._ino = os.fstat(self.fd).st_ino  # the file mapped (maps)
        os.close(self.fd)  # the map holds a descriptor of its own
        self.fd = -1
        pool.add(self)

    @property
    def mm(self) -> mmap.mmap:
        self._used = True
        m = self._map
        return m if m is not None else self._pool.remap(self)

    @mm.setter
    def mm(self, m: mmap.mmap) -> None:
        self._map = m

    def _map_again(self) -> mmap.mmap:
        flags = (os.O_RDONLY if self.read_only else os.O_RDWR) | getattr(os, "O_CLOEXEC", 0)
        with full_disk_is_error(self.path):
            fd = os.open(self.path, flags)
            try:
                m = mmap.mmap(fd, self.file_size, access=mmap.ACCESS_READ if self.read_only else mmap.ACCESS_WRITE)
                self._ino = os.fstat(fd).st_ino
            finally:
                os.close(fd)
        if self._huge:
            _advise_huge(m)
        return m

    def maps(self, path: str) -> bool:
        """As MappedFile's; a map the pool let go is made again from ``path`` on its next use."""
        if self._map is None:
            return True
        try:
            return os.stat(path).st_ino == self._ino
        except OSError:
            return False

    def data_end(self, start: int) -> int:
        fd = os.open(self.path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
        try:
            return self._data_end(fd, start)
        finally:
            os.close(fd)

    def close(self) -> None:
        if self._closed:
            return
        m = self._map
        if m is not None:
            m.close()  # BufferError while a view is exported: the caller must release views first
            self._map = None
        self._closed = True
        self._pool.remove(self)

    def __repr__(self) -> str:
        return (f"PooledMappedFile({self.path!r}, wrote={self.wrote_position}, flushed={self.flushed_position}, "
                f"mapped={self._map is not None})")


class MappedFileQueue:
    """The ordered files of one directory (a CommitLog, or one consume queue)."""

    def __init__(
        self, directory: str | os.PathLike[str], file_size: int, *, read_only: bool = False,
        huge_pages: bool = False, pool: MapPool | None = None, spares: SpareFiles | None = None,
    ) -> None:
        if file_size <= 0:
            raise ConfigError(f"file size must be positive, not {file_size}")
        if spares is not None and (read_only or spares.file_size != file_size):
            raise ConfigError(f"{directory}: spare files of {spares.file_size} bytes serve only a writable "
                              f"queue of files that size, not {file_size}-byte files (read_only={read_only})")
        self.pool = pool  # its files are PooledMappedFiles of this pool
        self.spares = spares  # a new file is a spare moved here when one is ready
        self.directory = Path(directory)
        self.file_size = file_size
        self.read_only = read_only
        self.huge_pages = huge_pages  # MADV_HUGEPAGE on the files' maps (MappedFile)
        self.files: list[MappedFile] = []
        self._lock = threading.Lock()
        self._prepared: MappedFile | None = None
        self._prepare_thread: threading.Thread | None = None

    # -- loading ------------------------------------------------------------------------------
    def load(self) -> None:
        """Map every existing file (MappedFileQueue.doLoad); positions start at the file size."""
        if not self.directory.is_dir():
            return
        named = []
        for entry in os.scandir(self.directory):
            off = L.file_name_to_offset(entry.name)
            if off is not None and entry.is_file():
                named.append((off, entry.path))
        named.sort()
        for i, (off, path) in enumerate(named):
            try:
                size = os.path.getsize(path)
                if size == 0 and i == len(named) - 1:
                    if not self.read_only:
                        os.unlink(path)  # an empty last file is deleted, as RocketMQ does
                    continue
                if off % self.file_size != 0:
                    raise ConfigError(
                        f"{path}: start offset {off} is not a multiple of the file size {self.file_size}"
                    )
                mf = self._file(path, off, False)
            except FileNotFoundError:
                if not self.read_only:
                    raise
                # the writer's retention deleted it since the listing: it deletes oldest first, so
                # the files mapped before it are gone too; the queue starts after it
                self._drop_loaded()
                continue
            mf.wrote_position = mf.flushed_position = self.file_size
            self.files.append(mf)

    def _drop_loaded(self) -> None:
        """Close and forget the files mapped so far (a read-only load that met a deleted file)."""
        files, self.files = self.files, []
        for mf in files:
            mf.close()

    # -- lookup ---------------------------------------------------------------------------------
    def first(self) -> MappedFile | None:
        return self.files[0] if self.files else None

    def last(self) -> MappedFile | None:
        return self.files[-1] if self.files else None

    def min_offset(self) -> int:
        return self.files[0].file_from_offset if self.files else -1

    def max_offset(self) -> int:
        """One past the last written byte."""
        files = self.files
        if files:
            last = files[-1]
            return last.file_from_offset + last.wrote_position
        return 0

    def find(self, offset: int) -> MappedFile:
        """The file holding global ``offset`` (MappedFileQueue.findMappedFileByOffset)."""
        files = self.files
        if not files:
            raise OffsetOutOfRangeError(f"offset {offset}: {self.directory} has no files")
        idx = (offset - files[0].file_from_offset) // self.file_size
        if 0 <= idx < len(files):
            mf = files[idx]
            if mf.file_from_offset <= offset < mf.file_end_offset:
                return mf
        for mf in files:  # gaps (deleted middle files) are not expected, but never guess
            if mf.file_from_offset <= offset < mf.file_end_offset:
                return mf
        raise OffsetOutOfRangeError(
            f"offset {offset} is outside {self.directory} [{self.min_offset()}, {files[-1].file_end_offset})"
        )

    def __iter__(self) -> Iterator[MappedFile]:
        return iter(list(self.files))

    def __len__(self) -> int:
        return len(self.files)

    # -- writing --------------------------------------------------------------------------------
    def _create(self, start: int) -> MappedFile:
        self.directory.mkdir(parents=True, exist_ok=True)
        path = self.directory / L.offset_to_file_name(start)
        if path.exists() and path.stat().st_size == 0:
            path.unlink()
        if path.exists() or (self.spares is not None and self.spares.take(path)):
            return self._file(path, start, False)
        with full_disk_is_error(f"{path} ({self.file_size} bytes)"):
            return self._file(path, start, True)

    def _file(self, path: Any, start: int, create: bool) -> MappedFile:
        if self.pool is not None:
            try:
                return PooledMappedFile(path, start, self.file_size, pool=self.pool, create=create,
                                        read_only=self.read_only, huge_pages=self.huge_pages)
            except TooManyOpenFilesError:  # half the pool's maps go, and the file is tried once more
                self.pool.shed(self.pool.budget // 2)
                return PooledMappedFile(path, start, self.file_size, pool=self.pool, create=create,
                                        read_only=self.read_only, huge_pages=self.huge_pages)
        return MappedFile(path, start, self.file_size, create=create, read_only=self.read_only,
                          huge_pages=self.huge_pages)

    def last_for_write(self, start_if_empty: int = 0) -> MappedFile:
        """The file to append to, creating the next one when the last is full (or none exists)."""
        last = self.last()
        if last is not None and not last.is_full():
            return last
        start = start_if_empty - start_if_empty % self.file_size if last is None else last.file_end_offset
        mf = self._take_prepared(start)
        if mf is None:
            mf = self._create(start)
        self.files.append(mf)
        return mf

    def _take_prepared(self, start: int) -> MappedFile | None:
        t = self._prepare_thread
        if t is not None:
            t.join()
            self._prepare_thread = None
        mf, self._prepared = self._prepared, None
        if mf is not None and mf.file_from_offset != start:
            mf.destroy()
            return None
        return mf

    def prepare_next(self, prefault: bool = True) -> None:
        """Create and pre-fault the next file off the hot path (AllocateMappedFileService)."""
        last = self.last()
        if last is None or self.read_only or self._prepare_thread is not None or self._prepared:
            return
        start = last.file_end_offset

        def work() -> None:
            try:
                mf = self._create(start)
            except (OSError, RmqError):
                return  # the writer creates the file itself when it needs it, and reports the error
            if prefault:
                mf.prefault()
            self._prepared = mf

        t = threading.Thread(target=work, name="rmqcore-allocate", daemon=True)
        self._prepare_thread = t
        t.start()

    def wait_prepared(self, prefault: bool = False) -> None:
        """Wait for the background creation of the next file (if one is running) to finish; with
        ``prefault`` also fault the prepared file in (it may have been prepared without)."""
        t = self._prepare_thread
        if t is not None:
            t.join()
        if prefault and self._prepared is not None:
            self._prepared.prefault()

    def discard_prepared(self) -> None:
        """Delete a pre-allocated next file (a clean shutdown leaves none behind, like RocketMQ)."""
        t = self._prepare_thread
        if t is not None:
            t.join()
            self._prepare_thread = None
        mf, self._prepared = self._prepared, None
        if mf is not None:
            mf.destroy()

    def truncate_dirty(self, offset: int) -> None:
        """MappedFileQueue.truncateDirtyFiles: files entirely after ``offset`` are deleted; the file
        holding it gets its positions set to ``offset`` (bytes after it are not zeroed)."""
        if self.read_only:  # nothing on disk changes: later files are only dropped from view
            keep_ro: list[MappedFile] = []
            for mf in self.files:
                if mf.file_from_offset > offset or (mf.file_from_offset == offset and keep_ro):
                    mf.close()
                    continue
                mf.wrote_position = mf.flushed_position = min(max(offset - mf.file_from_offset, 0), mf.file_size)
                keep_ro.append(mf)
            self.files = keep_ro
            return
        keep: list[MappedFile] = []
        for mf in self.files:
            if mf.file_end_offset > offset:
                if offset >= mf.file_from_offset:
                    mf.wrote_position = mf.flushed_position = offset - mf.file_from_offset
                else:
                    mf.destroy()
                    continue
            keep.append(mf)
        self.files = keep

    def delete_first(self) -> MappedFile | None:
        """Remove the oldest file (retention); never the last one."""
        if len(self.files) <= 1:
            return None
        mf = self.files.pop(0)
        mf.destroy()
        return mf

    def flush(self) -> int:
        """Flush every file with unflushed bytes; returns the global flushed offset."""
        for mf in self.files:
            if mf.flushed_position < mf.wrote_position:
                mf.flush()
        last = self.last()
        return last.file_from_offset + last.flushed_position if last else 0

    def close(self) -> None:
        self.discard_prepared() if not self.read_only else None
        for mf in self.files:
            mf.close()
        self.files = []
