"""One RocketMQ index file (``<root>/index/<yyyyMMddHHmmssSSS>``), byte-compatible: ``IndexHeader`` and
``IndexFile`` (the mapped file: put a key's hash, select a hash's offsets). The files of a store, and
which one takes the next key, are :class:`rmqcore.indexfile.IndexService`'s business; this module's
names are re-exported there.

The layout (RocketMQ ``IndexFile`` / ``IndexHeader``; S = slots, N = max entries)::

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
"""
from __future__ import annotations

import mmap
import os
import struct
import time
from collections.abc import Sequence
from dataclasses import dataclass

from . import _impl, fileops
from .errors import ConfigError, CorruptionError, IndexCorruptError, StoreClosedError
from .mappedfile import map_file

__all__ = [
    "HEADER_SIZE",
    "ALLOC_ENTRIES",
    "MAX_MSGS_NUM_BATCH",
    "IndexFile",
    "IndexHeader",
    "index_file_name",
]

MAX_MSGS_NUM_BATCH = 64  # MessageStoreConfig.maxMsgsNumBatch: queryOffset caps maxNum at this
HEADER_SIZE: int = _impl.indexfile.HEADER_SIZE  # IndexHeader.INDEX_HEADER_SIZE (40)
_SLOT_SIZE: int = _impl.indexfile.SLOT_SIZE  # hashSlotSize (4)
_ENTRY_SIZE: int = _impl.indexfile.ENTRY_SIZE  # indexSize (20)
ALLOC_ENTRIES = 1 << 18  # entries an index file is allocated by at a time (5 MiB)
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
        def allocated(fd: int) -> int:  # an existing file: what it holds and the next chunk
            count = _COUNT.unpack(os.pread(fd, 4, 36))[0]
            self._alloc = min(max_entries, max(count, 1) + ALLOC_ENTRIES)
            return self._entries_end(self._alloc)

        # allocated as far as it is written, not sparse (see fileops): on a full disk the first touch
        # of an unallocated entry page would be a SIGBUS that kills the process; here it is a
        # DiskFullError. The entries are allocated a chunk at a time (entry_limit), so an index file
        # takes disk space as it fills, as RocketMQ's sparse one does
        fd, self._mm = map_file(
            self.path, self.file_size, create=create, read_only=self.read_only,
            geometry=f"the index geometry ({slot_count} slots, {max_entries} entries = {self.file_size} bytes)",
            allocate_new=self._entries_end(self._alloc), allocate_existing=allocated,
        )  # fmt: skip
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
            _impl.appender.prefault(self._mm, 0, HEADER_SIZE + slot_count * _SLOT_SIZE)
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
        return HEADER_SIZE + self.slot_count * _SLOT_SIZE + entries * _ENTRY_SIZE

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

    def _writing(self) -> mmap.mmap:
        """The map, for a put (the file is dirty from now on).

        Raises:
            ConfigError: the file is read-only.
            StoreClosedError: the file is closed.
        """
        mm = self._live()
        if self.read_only:
            raise ConfigError(f"{self.path} was opened read-only")
        self._dirty = True
        return mm

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
        mm = self._writing()
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
        mm = self._writing()
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
