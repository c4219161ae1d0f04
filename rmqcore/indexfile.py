"""IndexFile and IndexService: RocketMQ's key index (``<root>/index/<yyyyMMddHHmmssSSS>``), byte-compatible.

One index file (RocketMQ ``IndexFile`` / ``IndexHeader``; S = slots, N = max entries)::

    off                 size  field
    0                      8  beginTimestamp   store time (ms) of the file's first entry
    8                      8  endTimestamp     store time of the newest entry
    16                     8  beginPhyOffset   commitlog offset of the first entry
    24                     8  endPhyOffset     commitlog offset of the newest entry
    32                     4  hashSlotCount    slots that became non-empty
    36                     4  indexCount       next entry number (starts at 1; entry 0 is never used)
    40                   4 S  slots            newest entry number of each hash slot (0 = empty)
    40 + 4 S            20 N  entries          keyHash i32 | phyOffset i64 | timeDiff i32 (s) | prevIndex i32

Key = ``topic + "#" + key``; hash = ``abs(String.hashCode())`` with Integer.MIN_VALUE -> 0; slot =
hash % S; entries of a slot chain through prevIndex, newest first. Only the hash is stored, so a lookup
returns every message whose key shares the hash (the caller compares keys after reading the record).

Invariants: a full file holds N - 1 entries and says indexCount = N; a rolled file is created with its
begin/end timestamp and phy offset preset to the previous file's end values (so its first entry's
timeDiff is relative to the previous file's end: RocketMQ's quirk, kept for byte compatibility); file
names are the local wall-clock creation time, loaded in name order.

Crash semantics: not checksummed, rebuilt on recovery. Pages reach disk when the OS writes them back,
when a full file is flushed on roll (before the next file is created), and on ``flush()``/``close()``.
After an unclean exit the store keeps the files that were durable (``truncate``: RocketMQ's
indexMsgTimestamp rule, never the last file, never a file after one that goes, nothing past the
recovered end) and re-dispatches from the last file's endPhyOffset; ``build_index`` ignores records
below it, so re-dispatching is idempotent (the record at it is indexed again, as RocketMQ does).

Thread-safety: one writer (dispatch: the kernel's run, or ``put_record_keys`` on its general path); queries may run concurrently
from other threads (they read entries a put may be writing, as RocketMQ's do) and take no lock: the file
list is copied on write, a deleted file is closed once no kernel holds its map (mmap refuses to close an
exported buffer), and a query that meets a file deleted after it started skips it, as if it had run after
the deletion (only the oldest files are deleted while the store runs).
"""
from __future__ import annotations

import datetime as _dt
import mmap
import os
import struct
import threading
import time
from array import array
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType, TracebackType
from typing import Any

from . import _impl, fileops
from . import layout as L
from .config import bound_arg
from .errors import ConfigError, CorruptionError, IndexCorruptError, StoreClosedError, full_disk_is_error

__all__ = [
    "INDEX_DIR",
    "MAX_MSGS_NUM_BATCH",
    "IndexFile",
    "IndexHeader",
    "IndexService",
    "index_file_name",
]

INDEX_DIR = "index"  # StorePathConfigHelper.getStorePathIndex
MAX_MSGS_NUM_BATCH = 64  # MessageStoreConfig.maxMsgsNumBatch: queryOffset caps maxNum at this
HEADER_SIZE = 40  # IndexHeader.INDEX_HEADER_SIZE
ALLOC_ENTRIES = 1 << 18  # entries an index file is allocated by at a time (5 MiB)
_ROLLBACK = L.TRANSACTION_ROLLBACK  # sysFlag & 0xC == 0xC: not indexed
_LONG_MAX = (1 << 63) - 1

_HEADER = struct.Struct(">qqqqii")
_TIMES = struct.Struct(">qqqq")
_COUNT = struct.Struct(">i")


@dataclass(frozen=True)
class IndexHeader:
    """The 40-byte header of an index file, as stored (``index_count`` is not clamped)."""

    begin_timestamp: int
    end_timestamp: int
    begin_phy_offset: int
    end_phy_offset: int
    hash_slot_count: int
    index_count: int

    @classmethod
    def from_buffer(cls, buf: bytes | bytearray | memoryview | mmap.mmap) -> IndexHeader:
        """Parse the first 40 bytes of ``buf``.

        Raises:
            IndexCorruptError: fewer than 40 bytes.
        """
        if len(buf) < HEADER_SIZE:
            raise IndexCorruptError(f"index header needs {HEADER_SIZE} bytes, got {len(buf)}", len(buf))
        return cls(*_HEADER.unpack_from(buf, 0))

    def to_bytes(self) -> bytes:
        return _HEADER.pack(
            self.begin_timestamp, self.end_timestamp, self.begin_phy_offset, self.end_phy_offset,
            self.hash_slot_count, self.index_count,
        )  # fmt: skip

    @property
    def entries(self) -> int:
        """Number of entries in the file (indexCount - 1; indexCount <= 0 reads as 1)."""
        return max(self.index_count, 1) - 1


def index_file_name(epoch_ms: int) -> str:
    """``UtilAll.timeMillisToHumanString``: ``yyyyMMddHHmmssSSS`` in the local time zone."""
    sec, milli = divmod(int(epoch_ms), 1000)
    return time.strftime("%Y%m%d%H%M%S", time.localtime(sec)) + f"{milli:03d}"


def _bump_name(name: str) -> str:
    """The name 1 ms after ``name`` (naive calendar arithmetic: names only need to be unique and
    increasing); names that are not 17-digit times are incremented as numbers."""
    if len(name) == 17 and name.isdigit():
        try:
            t = _dt.datetime.strptime(name[:14], "%Y%m%d%H%M%S")
        except ValueError:
            pass
        else:
            t += _dt.timedelta(milliseconds=int(name[14:]) + 1)
            return t.strftime("%Y%m%d%H%M%S") + f"{t.microsecond // 1000:03d}"
    return str(int(name) + 1).zfill(len(name))


def _wall_ms() -> int:
    return time.time_ns() // 1_000_000


class IndexFile:
    """One mapped index file. Create with :meth:`create`, open an existing one with :meth:`open`."""

    __slots__ = (
        "path", "name", "slot_count", "max_entries", "file_size", "read_only", "max_steps", "_k", "_hash",
        "_sync", "_fd", "_mm", "_dirty", "_alloc",
    )  # fmt: skip

    def __init__(
        self, path: str | os.PathLike[str], slot_count: int, max_entries: int, *, create: bool,
        end_phy_offset: int, end_timestamp: int, read_only: bool, impl: str | None,
    ) -> None:  # fmt: skip
        k = _impl.kernel("indexfile", impl)
        self._k = k
        self._hash = _impl.kernel("hashing", impl).index_key_hash
        self._sync = _impl.kernel("appender", impl).sync_range
        self.path = str(path)
        self.name = os.path.basename(self.path)
        self.file_size = k.index_file_size(slot_count, max_entries)  # ConfigError on bad geometry
        self.slot_count = slot_count
        self.max_entries = max_entries
        self.read_only = read_only and not create
        #: chain-walk bound: a sound chain reads each of the <= N - 1 entries at most once
        self.max_steps = max_entries
        self._dirty = False
        #: entries the allocated part of the file holds (writers stay below; see entry_limit)
        self._alloc = min(max_entries, ALLOC_ENTRIES)
        if create:
            # allocated as far as it is written, not sparse (see fileops): on a full disk the first
            # touch of an unallocated entry page would be a SIGBUS that kills the process; here it is
            # a DiskFullError. The entries are allocated a chunk at a time (entry_limit), so an
            # index file takes disk space as it fills, as RocketMQ's sparse one does
            with full_disk_is_error(f"{self.path} ({self.file_size} bytes)"):
                fd = fileops.current().create(self.path, self.file_size, self._entries_end(self._alloc))
        else:
            with full_disk_is_error(self.path):  # no descriptor left: TooManyOpenFilesError
                fd = os.open(self.path, (os.O_RDONLY if self.read_only else os.O_RDWR) | getattr(os, "O_CLOEXEC", 0))
        try:
            size = os.fstat(fd).st_size
            if size != self.file_size:
                raise ConfigError(
                    f"{self.path}: length {size} does not match the index geometry ({slot_count} slots, "
                    f"{max_entries} entries = {self.file_size} bytes)"
                )
            if not create and not self.read_only:  # RocketMQ's index files are sparse (see MappedFile)
                count = _COUNT.unpack(os.pread(fd, 4, 36))[0]
                self._alloc = min(max_entries, max(count, 1) + ALLOC_ENTRIES)
                fileops.allocate(fd, self.path, 0, self._entries_end(self._alloc))
            with full_disk_is_error(self.path):  # the map takes a descriptor of its own
                self._mm = mmap.mmap(
                    fd, self.file_size, access=mmap.ACCESS_READ if self.read_only else mmap.ACCESS_WRITE
                )
        except BaseException:
            os.close(fd)
            if create:
                try:
                    os.unlink(self.path)
                except OSError:
                    pass
            raise
        self._fd = fd
        if create:
            # IndexFile(fileName, slots, num, endPhyOffset, endTimestamp): begin = end = the previous
            # file's end values, written only when positive; counts stay 0 until the first put
            if end_phy_offset > 0:
                struct.pack_into(">qq", self._mm, 16, end_phy_offset, end_phy_offset)
            if end_timestamp > 0:
                struct.pack_into(">qq", self._mm, 0, end_timestamp, end_timestamp)
            self._dirty = True
            # keys hash all over the slot table, so every slot page is written within the first
            # keys: fault it in with one call rather than a page fault per 4 KiB on dispatch's path
            _impl.appender.prefault(self._mm, 0, HEADER_SIZE + slot_count * 4)
        else:
            count = _COUNT.unpack_from(self._mm, 36)[0]
            if count > max_entries:
                self.close()
                raise IndexCorruptError(
                    f"index header says indexCount {count} > max entries {max_entries}", 36, self.path
                )

    @classmethod
    def create(
        cls, path: str | os.PathLike[str], slot_count: int, max_entries: int, *, end_phy_offset: int = 0,
        end_timestamp: int = 0, impl: str | None = None,
    ) -> IndexFile:  # fmt: skip
        """Create a new file (it must not exist), preset with the previous file's end values.

        Raises:
            ConfigError: bad geometry.
            OSError: the file exists or cannot be created.
        """
        return cls(path, slot_count, max_entries, create=True, end_phy_offset=end_phy_offset,
                   end_timestamp=end_timestamp, read_only=False, impl=impl)  # fmt: skip

    @classmethod
    def open(
        cls, path: str | os.PathLike[str], slot_count: int, max_entries: int, *, read_only: bool = False,
        impl: str | None = None,
    ) -> IndexFile:  # fmt: skip
        """Map an existing file.

        Raises:
            ConfigError: bad geometry, or the file's length does not match it.
            IndexCorruptError: the header's indexCount exceeds max_entries.
            OSError: the file cannot be opened.
        """
        return cls(path, slot_count, max_entries, create=False, end_phy_offset=0, end_timestamp=0,
                   read_only=read_only, impl=impl)  # fmt: skip

    # -- header ---------------------------------------------------------------------------------
    def _live(self) -> mmap.mmap:
        mm = self._mm
        if mm is None or mm.closed:
            raise StoreClosedError(f"{self.path} is closed")
        return mm

    @property
    def buffer(self) -> mmap.mmap:
        """The mapped file, for kernels (valid until ``close``; closing fails while a view is exported).

        Raises:
            StoreClosedError: the file is closed.
        """
        return self._live()

    @property
    def header(self) -> IndexHeader:
        return IndexHeader(*_HEADER.unpack_from(self._live(), 0))

    @property
    def begin_timestamp(self) -> int:
        return int(_TIMES.unpack_from(self._live(), 0)[0])

    @property
    def end_timestamp(self) -> int:
        return int(_TIMES.unpack_from(self._live(), 0)[1])

    @property
    def end_phy_offset(self) -> int:
        return int(_TIMES.unpack_from(self._live(), 0)[3])

    def times(self) -> tuple[int, int, int, int]:
        """(beginTimestamp, endTimestamp, beginPhyOffset, endPhyOffset) in one read."""
        b_ts, e_ts, b_phy, e_phy = _TIMES.unpack_from(self._live(), 0)
        return b_ts, e_ts, b_phy, e_phy

    def _entries_end(self, entries: int) -> int:
        """File bytes up to the end of entry number ``entries - 1``."""
        return HEADER_SIZE + self.slot_count * 4 + entries * 20

    def entry_limit(self) -> int:
        """The entry count writers may fill the file to: ``max_entries`` once the file is allocated
        to its end; until then what is allocated, the next chunk allocated first when the entries
        reached it (so a writer that passes this as the kernels' max entries never writes into an
        unallocated page).

        Raises:
            DiskFullError: no space for the next chunk (nothing was written).
        """
        if self._alloc < self.max_entries:
            count = max(_COUNT.unpack_from(self._live(), 36)[0], 1)
            if count >= self._alloc:
                new = min(self.max_entries, count + ALLOC_ENTRIES)
                start = self._entries_end(self._alloc)
                fileops.allocate(self._fd, self.path, start, self._entries_end(new) - start)
                self._alloc = new
        return self._alloc

    def is_full(self) -> bool:
        """``isWriteFull``: indexCount (<= 0 reads as 1) >= max entries."""
        count: int = _COUNT.unpack_from(self._live(), 36)[0]
        return max(count, 1) >= self.max_entries

    # -- put / select ---------------------------------------------------------------------------
    def _corrupt(self, err: CorruptionError) -> CorruptionError:
        return err.at(self.path, err.position)

    def put_key(self, key: str, phy_offset: int, store_timestamp: int) -> bool:
        """``IndexFile.putKey`` of the already built key (``topic#key`` for the service's keys).

        Returns False when the file is full.

        Raises:
            ConfigError: the file is read-only.
            StoreClosedError: the file is closed.
            IndexCorruptError: the header became impossible (another writer).
        """
        return self.put_hash(self._hash(key), phy_offset, store_timestamp)

    def put_hash(self, key_hash: int, phy_offset: int, store_timestamp: int) -> bool:
        """``put_key`` with the key's index hash already computed (``hashing.index_key_hash``).

        Raises:
            ConfigError: the file is read-only.
            StoreClosedError: the file is closed.
            ValueError: ``key_hash`` outside ``[0, 2**31 - 1]``.
            IndexCorruptError: the header became impossible (another writer).
        """
        mm = self._live()
        if self.read_only:
            raise ConfigError(f"{self.path} was opened read-only")
        self._dirty = True
        try:
            while True:
                limit = self.entry_limit()
                if self._k.index_put(mm, self.slot_count, limit, key_hash, phy_offset, store_timestamp):
                    return True
                if limit >= self.max_entries:
                    return False
        except IndexCorruptError as e:
            raise self._corrupt(e) from None

    def put_hashes(
        self, key_hashes: Sequence[int], phy_offsets: Sequence[int], store_timestamps: Sequence[int],
        start: int, stop: int,
    ) -> int:  # fmt: skip
        """Put items ``[start, stop)`` of three parallel int64 arrays; returns how many fit.

        Raises:
            ConfigError: the file is read-only.
            StoreClosedError: the file is closed.
            TypeError, ValueError: bad arrays or bounds (see the kernel).
            IndexCorruptError: the header became impossible (another writer).
        """
        mm = self._live()
        if self.read_only:
            raise ConfigError(f"{self.path} was opened read-only")
        self._dirty = True
        try:
            done = start
            while True:
                limit = self.entry_limit()
                done += int(self._k.index_put_batch(
                    mm, self.slot_count, limit, key_hashes, phy_offsets, store_timestamps, done, stop
                ))  # fmt: skip
                if done >= stop or limit >= self.max_entries:
                    return done - start
        except IndexCorruptError as e:
            raise self._corrupt(e) from None

    def select(
        self, key: str, begin: int = 0, end: int = _LONG_MAX, max_num: int = MAX_MSGS_NUM_BATCH,
        max_steps: int | None = None,
    ) -> list[int]:  # fmt: skip
        """``selectPhyOffset`` of the already built key: offsets newest first (see ``select_hash``).

        Raises:
            StoreClosedError: the file is closed.
            IndexCorruptError: the header is impossible.
        """
        return self.select_hash(self._hash(key), begin, end, max_num, max_steps)

    def select_hash(
        self, key_hash: int, begin: int = 0, end: int = _LONG_MAX, max_num: int = MAX_MSGS_NUM_BATCH,
        max_steps: int | None = None,
    ) -> list[int]:  # fmt: skip
        """Physical offsets of entries with ``key_hash`` whose second-granular time is in [begin, end],
        newest first, at most ``max_num``, reading at most ``max_steps`` entries (default: max entries).

        Raises:
            StoreClosedError: the file is closed.
            ValueError: ``key_hash`` outside ``[0, 2**31 - 1]``; ``max_steps < 0``.
            IndexCorruptError: the header is impossible.
        """
        mm = self._live()
        try:
            return self._k.index_select(  # type: ignore[no-any-return]
                mm, self.slot_count, self.max_entries, key_hash, begin, end, max_num,
                self.max_steps if max_steps is None else max_steps,
            )  # fmt: skip
        except IndexCorruptError as e:
            raise self._corrupt(e) from None

    # -- lifetime -------------------------------------------------------------------------------
    def flush(self) -> None:
        """Write dirty pages back (msync) if anything was put since the last flush. The native
        kernel syncs without the GIL: ``mmap.flush`` holds it (CPython 3.11), and the msync of an
        index file whose slots were written all over is long, a stall for every thread."""
        mm = self._live()
        if self._dirty and not self.read_only:
            self._dirty = False  # puts during the sync set it again
            self._sync(mm, 0, len(mm))

    @property
    def closed(self) -> bool:
        mm = self._mm
        return mm is None or mm.closed

    def close(self) -> None:
        """Unmap and close (without flushing; BufferError while a kernel holds the map)."""
        mm = self._mm
        if mm is None:
            return
        mm.close()
        self._mm = None  # type: ignore[assignment]
        os.close(self._fd)

    def destroy(self) -> None:
        """Close and delete the file."""
        self.close()
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass

    def __repr__(self) -> str:
        state = "closed" if self._mm is None else repr(self.header)
        return f"IndexFile({self.path!r}, {state})"


def _retire(f: IndexFile, destroy: bool) -> None:
    """Close (and delete) a file that was already removed from the service's list. A query that took
    the list before the removal may be inside a kernel on it right now (the map is exported, close raises
    BufferError): walks take microseconds, so wait for it."""
    deadline = time.monotonic() + 10.0
    while True:
        try:
            f.destroy() if destroy else f.close()
            return
        except BufferError:
            if time.monotonic() > deadline:  # someone keeps a view of the map: not a running query
                raise
            time.sleep(0.0001)


class IndexService:
    """All index files of a store: build the index from dispatched records, query it by key.

    Args:
        store_dir: the store root; files live in ``<store_dir>/index/``.
        slot_count: ``maxHashSlotNum`` (RocketMQ default 5,000,000).
        max_entries: ``maxIndexNum`` (default 20,000,000; a file holds one fewer).
        read_only: map files read-only, create and delete nothing.
        impl: kernel implementation ("native" / "pure"; default: the chosen one).
        name_clock: epoch-ms clock used to name new files (default: wall clock).

    Attributes:
        max_msgs_num_batch: cap on ``max_num`` in :meth:`query_offset` (``maxMsgsNumBatch``, 64).
        index_msg_timestamp: endTimestamp of the last file that filled up and was flushed (what RocketMQ
            writes to ``checkpoint.indexMsgTimestamp``), 0 until a file fills up in this session.
        on_roll: optional callable(end_timestamp) run after a full file was flushed on roll; the store
            sets and flushes its checkpoint there.

    Raises:
        ConfigError: bad geometry, or a file whose length does not match it.
        IndexCorruptError: a file whose header is impossible (indexCount > max entries).
    """

    def __init__(
        self, store_dir: str | os.PathLike[str], slot_count: int = L.DEFAULT_INDEX_SLOTS,
        max_entries: int = L.DEFAULT_INDEX_ENTRIES, *, read_only: bool = False, impl: str | None = None,
        name_clock: Callable[[], int] | None = None,
    ) -> None:  # fmt: skip
        k: ModuleType = _impl.kernel("indexfile", impl)
        k.index_file_size(slot_count, max_entries)  # ConfigError on bad geometry
        self.directory = Path(store_dir) / INDEX_DIR
        self.slot_count = int(slot_count)
        self.max_entries = int(max_entries)
        self.read_only = read_only
        self.impl = impl
        self._hash: Callable[[str], int] = _impl.kernel("hashing", impl).index_key_hash
        self._select: Callable[..., list[int]] = k.index_select
        self._clock = name_clock or _wall_ms
        self.max_msgs_num_batch = MAX_MSGS_NUM_BATCH
        self.index_msg_timestamp = 0
        self.on_roll: Callable[[int], None] | None = None
        self._mutate = threading.Lock()  # file creation / deletion / close (queries take no lock)
        self._rolled: IndexFile | None = None  # the full file last flushed and reported on roll
        self._files: list[IndexFile] = []
        self._closed = False
        self._load()
        self._last_name = self._files[-1].name if self._files else ""

    def _load(self) -> None:
        """``IndexService.load``: every file of the directory in name order (names that are not all
        ASCII digits are ignored: RocketMQ never writes them, and a stray file should not block a store)."""
        if not self.directory.is_dir():
            return
        names = sorted(
            e.name
            for e in os.scandir(self.directory)
            if e.is_file() and e.name.isascii() and e.name.isdigit()
        )
        try:
            if names and os.path.getsize(self.directory / names[-1]) == 0:
                # a crash between creating the newest file and sizing it: nothing was ever put there
                # (MappedFileQueue deletes an empty last file the same way); the index is rebuilt
                if not self.read_only:
                    os.unlink(self.directory / names[-1])
                names.pop()
            for name in names:
                try:
                    f = IndexFile.open(self.directory / name, self.slot_count, self.max_entries,
                                       read_only=self.read_only, impl=self.impl)
                except FileNotFoundError:
                    if not self.read_only:
                        raise
                    # the writer's retention deleted it since the listing (oldest first): the
                    # files opened before it are gone too
                    for old in self._files:
                        old.close()
                    self._files = []
                    continue
                self._files.append(f)
        except BaseException:
            for f in self._files:
                f.close()
            self._files = []
            raise

    # -- state ----------------------------------------------------------------------------------
    def _live(self) -> None:
        if self._closed:
            raise StoreClosedError("the IndexService is closed")

    @property
    def index_files(self) -> list[IndexFile]:
        """The open files, oldest first (a snapshot)."""
        return list(self._files)

    @property
    def files(self) -> list[IndexHeader]:
        """The headers of the files, oldest first."""
        self._live()
        return [f.header for f in list(self._files)]

    def __len__(self) -> int:
        return len(self._files)

    def __iter__(self) -> Iterator[IndexFile]:
        return iter(list(self._files))

    # -- building -------------------------------------------------------------------------------
    def _writable(self) -> None:
        self._live()
        if self.read_only:
            raise ConfigError("the IndexService was opened read-only")

    def _new_name(self) -> str:
        # names only ever increase in a session (even after the newest file was deleted, or when the
        # clock steps back), so name order stays creation order
        name = index_file_name(self._clock())
        if name <= self._last_name:
            name = _bump_name(self._last_name)
        while (self.directory / name).exists():
            name = _bump_name(name)
        self._last_name = name
        return name

    def _last_writable(self) -> IndexFile:
        """``getAndCreateLastIndexFile``: the last file, or a new one when there is none or it is full
        (preset with its end values; the full file is flushed and reported through ``on_roll``)."""
        files = self._files
        if files and not files[-1].is_full():
            return files[-1]
        prev = files[-1] if files else None
        self.directory.mkdir(parents=True, exist_ok=True)
        end_phy = end_ts = 0
        if prev is not None:
            _, end_ts, _, end_phy = prev.times()
            if self._rolled is not prev:
                # IndexService.flush(prev), then checkpoint.indexMsgTimestamp := prev.endTimestamp.
                # RocketMQ flushes on a thread after creating the next file; here it is done first,
                # so every file but the last is durable (what abnormal recovery keeps, ``truncate``)
                prev.flush()
                self.index_msg_timestamp = end_ts
                if self.on_roll is not None:
                    self.on_roll(end_ts)
                self._rolled = prev
        with self._mutate:
            f = IndexFile.create(
                self.directory / self._new_name(), self.slot_count, self.max_entries,
                end_phy_offset=end_phy, end_timestamp=end_ts, impl=self.impl,
            )  # fmt: skip
            self._files = [*self._files, f]  # copy on write: queries iterate the list they took
        return f

    def build_index(
        self, topic: str, uniq_key: str | None, keys: str | None, phy_offset: int, store_timestamp: int,
        sys_flag: int = 0,
    ) -> int:  # fmt: skip
        """``IndexService.buildIndex`` for one dispatched record; returns the number of entries added.

        Skips the record if ``phy_offset`` < the last file's endPhyOffset (re-dispatch) or it is a
        ROLLBACK (``sys_flag & 0xC == 0xC``). Otherwise indexes ``topic#uniq_key`` (when not None), then
        ``topic#token`` for each non-empty token of ``keys`` (the raw KEYS property) split on one space,
        rolling to a new file whenever one fills up.

        Raises:
            ConfigError: read-only service.
            StoreClosedError: the service is closed.
            OSError: a new file cannot be created.
        """
        return self.build_index_batch([topic], [uniq_key], [keys], [phy_offset], [store_timestamp], [sys_flag])

    def build_index_batch(
        self, topics: Sequence[str], uniq_keys: Sequence[str | None], keys: Sequence[str | None],
        phy_offsets: Sequence[int], store_timestamps: Sequence[int], sys_flags: Sequence[int] | None = None,
    ) -> int:  # fmt: skip
        """``build_index`` for many records at once (parallel sequences, in dispatch order); returns the
        number of entries added. The files end up byte-identical to calling ``build_index`` per record.

        The keys of the whole batch are hashed first (one Python loop that applies the re-dispatch and
        ROLLBACK rules), then written by ``index_put_batch`` (one kernel call per file, GIL released),
        rolling files as they fill up. ``sys_flags`` None means all 0. Sequences may be lists or int64
        arrays (numpy / ``array('q')``) for the numeric ones.

        Raises:
            ValueError: the sequences differ in length.
            ConfigError: read-only service.
            StoreClosedError: the service is closed.
            OSError: a new file cannot be created.
        """
        self._writable()
        n_msgs = len(topics)
        if sys_flags is None:
            sys_flags = [0] * n_msgs
        if not (len(uniq_keys) == len(keys) == len(phy_offsets) == len(store_timestamps) == len(sys_flags)
                == n_msgs):  # fmt: skip
            raise ValueError("build_index_batch needs sequences of equal length")
        if n_msgs == 0:
            return 0
        files = self._files
        end_phy = files[-1].end_phy_offset if files else 0
        kh = array("q")
        po = array("q")
        st = array("q")
        h = self._hash
        last_owner = -1  # record that added the last entry
        for i in range(n_msgs):
            phy = int(phy_offsets[i])
            if phy < end_phy or int(sys_flags[i]) & _ROLLBACK == _ROLLBACK:
                continue
            prefix = topics[i] + "#"
            ts = int(store_timestamps[i])
            before = len(kh)
            u = uniq_keys[i]
            if u is not None:
                kh.append(h(prefix + u))
            ks = keys[i]
            if ks:
                for key in ks.split(" "):
                    if key:
                        kh.append(h(prefix + key))
            added = len(kh) - before
            if added:
                po.extend([phy] * added)
                st.extend([ts] * added)
                end_phy = phy
                last_owner = i
        return self.put_key_hashes(kh, po, st, last_owner, n_msgs)

    def put_key_hashes(self, key_hashes: Any, phy_offsets: Any, store_timestamps: Any, last_owner: int,
                       n_records: int) -> int:
        """``buildIndex`` for keys whose ``topic#key`` hashes are already computed (the dispatch
        kernel's output; ROLLBACK records already left out), parallel int64 arrays in dispatch order.

        Entries before the last file's endPhyOffset are skipped (re-dispatch); files roll as they
        fill; and, as buildIndex opens the last file for every record, a record after the one that
        filled the last file (``last_owner`` = index of the record that added the last entry, among
        ``n_records``) creates the next, preset, empty file. Returns the entries added.
        """
        self._writable()
        kh, po, st = key_hashes, phy_offsets, store_timestamps
        if len(kh) and self._files:
            end_phy = self._files[-1].end_phy_offset
            if po[0] < end_phy:
                keep = po >= end_phy
                kh, po, st = kh[keep], po[keep], st[keep]
        total = len(kh)
        pos = 0
        while pos < total:
            pos += self._last_writable().put_hashes(kh, po, st, pos, total)
        if not self._files or (last_owner < n_records - 1 and self._files[-1].is_full()):
            self._last_writable()
        return total

    def put_record_keys(self, key_hashes: Any, key_counts: Any, tran: Any, phy_offsets: Any,
                        store_timestamps: Any) -> int:
        """``put_key_hashes`` for records in dispatch order: record i has ``key_counts[i]`` of the
        ``key_hashes`` (the dispatch kernel's layout), its transaction type ``tran[i]`` (ROLLBACK
        records add none), CommitLog offset and store time. Returns the entries added."""
        import numpy as np

        n = len(key_counts)
        rec = np.repeat(np.arange(n), key_counts)  # the record of each key
        keep = tran[rec] != _ROLLBACK
        rec = rec[keep]
        return self.put_key_hashes(key_hashes[keep], phy_offsets[rec], store_timestamps[rec],
                                   int(rec[-1]) if len(rec) else -1, n)

    # -- querying -------------------------------------------------------------------------------
    def query_offset(
        self, topic: str, key: str, max_num: int = MAX_MSGS_NUM_BATCH, begin: int = 0, end: int = _LONG_MAX,
    ) -> tuple[list[int], int, int]:  # fmt: skip
        """``IndexService.queryOffset``: ``(phy_offsets, index_last_update_timestamp,
        index_last_update_phy_offset)``.

        Offsets are in walk order: newest file first, newest entry first, at most
        ``min(max_num, max_msgs_num_batch)``. A file is searched only if ``isTimeMatched(begin, end)``; the
        walk stops after a file whose beginTimestamp < begin, or once enough offsets are found. The last two
        values are the newest file's endTimestamp / endPhyOffset (0, 0 without files).

        ``DefaultMessageStore.queryMessage`` returns these offsets sorted ascending (then reads each
        record; it re-queries with ``end`` = the first hit's store time only when no record could be read),
        and reports the last-update values as 0 when nothing was found.

        Raises:
            ConfigError: ``topic`` or ``key`` is no str, or ``max_num``, ``begin`` or ``end`` no integer
                (past int64 is the same as no bound).
            StoreClosedError: the service is closed.
            IndexCorruptError: a file's header is impossible.
        """
        if type(topic) is not str or type(key) is not str:
            raise ConfigError(f"topic and key must be str, not {type(topic).__name__}, {type(key).__name__}")
        max_num, begin, end = bound_arg(max_num, "max_num"), bound_arg(begin, "begin"), bound_arg(end, "end")
        self._live()
        max_num = min(max_num, self.max_msgs_num_batch)
        key_hash = self._hash(topic + "#" + key)
        out: list[int] = []
        last_ts = last_phy = 0
        select = self._select
        s, n = self.slot_count, self.max_entries
        unpack = _TIMES.unpack_from
        files = self._files  # lock-free: the list is replaced, never changed in place
        last = len(files) - 1
        for i in range(last, -1, -1):
            f = files[i]
            try:
                b, e, _, e_phy = unpack(f._mm, 0)
                if i == last:
                    last_ts, last_phy = e, e_phy
                if (begin < b and end > e) or b <= begin <= e or b <= end <= e:
                    out += select(f._mm, s, n, key_hash, begin, end, max_num - len(out), f.max_steps)
            except IndexCorruptError as err:
                raise err.at(f.path, err.position) from None
            except (ValueError, TypeError):
                if not f.closed:
                    raise
                # deleted (oldest files only) by another thread after this query took the list:
                # the same answer as a query that ran after the deletion
                if self._closed:
                    raise StoreClosedError("the IndexService is closed") from None
                continue
            if b < begin or len(out) >= max_num:
                break
        return out, last_ts, last_phy

    # -- deleting -------------------------------------------------------------------------------
    def _remove(self, doomed: list[IndexFile]) -> list[str]:
        if not doomed:
            return []
        with self._mutate:
            gone = set(map(id, doomed))
            self._files = [f for f in self._files if id(f) not in gone]
            for f in doomed:
                _retire(f, destroy=True)
        return [f.name for f in doomed]

    def delete_expired(self, min_phy_offset: int) -> list[str]:
        """``IndexService.deleteExpiredFile``: delete files, oldest first and never the last one, while
        their endPhyOffset < ``min_phy_offset`` (the commitlog's new minimum). Returns the names deleted.

        Raises:
            ConfigError: read-only service.
            StoreClosedError: the service is closed.
        """
        self._writable()
        doomed = []
        for f in self._files[:-1]:
            if f.end_phy_offset >= min_phy_offset:
                break
            doomed.append(f)
        return self._remove(doomed)

    def truncate(self, end: int, trusted: Callable[[int, IndexFile], bool] | None = None) -> list[str]:
        """Recovery: keep the longest run of files, oldest first, that hold no entry at or past
        ``end`` (the end of the recovered CommitLog) and that ``trusted(i, file)`` accepts; delete
        the rest. The files kept then cover the CommitLog in physical order with no gap: dispatch
        indexes again from the last one's endPhyOffset (``build_index`` skips only what they hold).
        Deleting files from the middle, as RocketMQ's time rule does when the clock stepped back,
        leaves a gap buildIndex never fills. Returns the names deleted.

        Raises:
            ConfigError: read-only service.
            StoreClosedError: the service is closed.
        """
        self._writable()
        files = self._files
        keep = 0
        for i, f in enumerate(files):
            if (f.header.entries and f.end_phy_offset >= end) or (trusted is not None and not trusted(i, f)):
                break
            keep = i + 1
        return self._remove(files[keep:])

    def delete_newer_than(self, timestamp: int) -> list[str]:
        """Abnormal-recovery step of ``IndexService.load``: delete every file whose endTimestamp >
        ``timestamp`` (the checkpoint's indexMsgTimestamp). Returns the names deleted.

        Raises:
            ConfigError: read-only service.
            StoreClosedError: the service is closed.
        """
        self._writable()
        return self._remove([f for f in self._files if f.end_timestamp > timestamp])

    # -- lifetime -------------------------------------------------------------------------------
    def flush(self) -> None:
        """Write back every file with puts since its last flush.

        Raises:
            StoreClosedError: the service is closed.
        """
        self._live()
        if not self.read_only:
            for f in list(self._files):
                f.flush()

    def close(self) -> None:
        """Flush (unless read-only) and unmap every file; idempotent."""
        if self._closed:
            return
        if not self.read_only:
            self.flush()
        with self._mutate:
            files, self._files = self._files, []
            self._closed = True
            for f in files:
                _retire(f, destroy=False)

    @property
    def closed(self) -> bool:
        return self._closed

    def __enter__(self) -> IndexService:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"IndexService({str(self.directory)!r}, files={len(self._files)})"
