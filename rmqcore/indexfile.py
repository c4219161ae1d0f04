"""IndexService: all index files of a store (``<root>/index/``): build the index from dispatched records,
query it by key, keep what survives a crash. One file's format and mapping is
:mod:`rmqcore.indexfile_format` (``IndexHeader``, ``IndexFile``; re-exported here).

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
import os
import threading
import time
from array import array
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

from . import _impl
from . import layout as L
from .bases import Closeable
from .config import bound_arg
from .errors import ConfigError, IndexCorruptError, StoreClosedError
from .indexfile_format import (
    _LONG_MAX,
    _TIMES,
    MAX_MSGS_NUM_BATCH,
    IndexFile,
    IndexHeader,
    index_file_name,
)

__all__ = [
    "INDEX_DIR",
    "MAX_MSGS_NUM_BATCH",
    "IndexFile",
    "IndexHeader",
    "IndexService",
    "index_file_name",
]

INDEX_DIR = "index"  # StorePathConfigHelper.getStorePathIndex
_ROLLBACK = L.TRANSACTION_ROLLBACK  # sysFlag & 0xC == 0xC: not indexed


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


class IndexService(Closeable):
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

    def __repr__(self) -> str:
        return f"IndexService({str(self.directory)!r}, files={len(self._files)})"
