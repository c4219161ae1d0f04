"""MessageStore: one object over a RocketMQ store directory (DefaultMessageStore's embeddable shape).

* ``put`` / ``put_batch`` append to the CommitLog; dispatch (ReputMessageService) builds the
  consume queues, index files and segment indexes from the CommitLog, its per-record work in the
  native ``Dispatcher`` without the GIL. ``dispatch="auto"`` (default): a reput thread follows the
  writer, and every read first dispatches what is still pending, so every read sees every put
  made before it. ``dispatch="inline"``: no thread, the caller's thread dispatches before reads
  and at close. ``dispatch="background"``: the reput thread alone, as a broker (reads see what
  has been dispatched; ``wait_dispatched`` waits). Re-dispatch is idempotent; ``dispatch_lag``
  tells how far behind it is. ``lookup`` is the one-call key-value form of ``query_by_key``.
* ``get_messages`` pulls from a queue with RocketMQ's statuses and next offsets;
  ``query_by_key`` finds messages by KEYS/UNIQ_KEY (collisions dropped by default, ``raw=True``
  gives RocketMQ's hash-only answer); ``offset_by_time`` maps a time to a queue offset (LOWER/UPPER);
  consumer offsets are kept in ``config/consumerOffset.json`` as a broker writes it.

Concurrency: one writer (puts serialise on the CommitLog's lock); reads may run on other threads.
Every public call runs inside the store's lifecycle gate (``rmqcore.lifecycle``): ``close()`` seals
it, waits for the calls under way, seals the CommitLog against appends, then dispatches, flushes
and lets go of the files, so a call racing ``close()`` completes or raises StoreClosedError.
Several processes: at most one opens a store for writing (``lock`` file); a read-only open of a live
store sees complete records only (it scans to the last valid record at open and never writes).

Live consumers (``rmqcore.live``): ``get_messages(..., wait=)`` holds a pull until dispatch publishes
a unit of its queue (RocketMQ's long polling), ``consume``/``consume_async`` iterate and commit as a
push consumer, and ``read_only=True, follow=True`` in another process follows the writer.
"""
from __future__ import annotations

import contextlib
import errno
import functools
import os
import threading
import time
import warnings
import weakref
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from .. import _impl, geometry
from .. import layout as L
from .. import live as _live
from ..checkpoint import StoreCheckpoint
from ..columnar.manifest import drop_copies
from ..commitlog import AppendResult, BatchAppendResult, CommitLog, raise_status
from ..config import (
    StoreConfig,
    bool_arg,
    bound_arg,
    int_arg,
    path_arg,
    real_arg,
)
from ..configfiles import persist
from ..consumequeue import (
    BOUNDARY_LOWER,
    BOUNDARY_NEAREST,
    BOUNDARY_UPPER,
    ConsumeQueue,
)
from ..errors import (
    ConfigError,
    CorruptionError,
    DiskFullError,
    InvalidMessageError,
    InvalidRecordError,
    InvalidTopicError,
    OffsetOutOfRangeError,
    ReadOnlyError,
    RecoveryCutWarning,
    RmqError,
    StoreAccessError,
    StoreClosedError,
)
from ..flush import AsyncFlushService, DurableAck, GroupCommitService
from ..lifecycle import gated, new_gate
from ..mappedfile import MapPool, open_files_budget
from ..message import MessageExt, decode_message_id
from ..recovery import QueueRepair, RecoveryReport, cut_commitlog, record_sound, unit_problem
from ..storelock import StoreLock
from ..warmahead import Region, WarmAhead, ahead_end, index_region
from ..wire import store_timestamp_at, utf8_text
from .dispatch import apply_batch, general_tags
from .metadata import StoreMetadata, check_offset_key, is_int_text
from .reput import ReputService

__all__ = [
    "MessageStore", "GetResult", "GetStatus", "StoreConfig", "BOUNDARY_LOWER", "BOUNDARY_UPPER", "BOUNDARY_NEAREST",
]


class GetStatus:
    """GetMessageStatus names."""

    FOUND = "FOUND"
    NO_MATCHED_MESSAGE = "NO_MATCHED_MESSAGE"
    MESSAGE_WAS_REMOVING = "MESSAGE_WAS_REMOVING"
    OFFSET_FOUND_NULL = "OFFSET_FOUND_NULL"
    OFFSET_OVERFLOW_BADLY = "OFFSET_OVERFLOW_BADLY"
    OFFSET_OVERFLOW_ONE = "OFFSET_OVERFLOW_ONE"
    OFFSET_TOO_SMALL = "OFFSET_TOO_SMALL"
    NO_MATCHED_LOGIC_QUEUE = "NO_MATCHED_LOGIC_QUEUE"
    NO_MESSAGE_IN_QUEUE = "NO_MESSAGE_IN_QUEUE"


@dataclass(slots=True)
class GetResult:
    """GetMessageResult: status, next offset to pull, queue bounds, and the messages found."""

    status: str
    next_begin_offset: int
    min_offset: int
    max_offset: int
    physical_offsets: list[int] = field(default_factory=list)
    queue_offsets: list[int] = field(default_factory=list)
    sizes: list[int] = field(default_factory=list)
    _store: Any = field(default=None, repr=False)

    @property
    def message_count(self) -> int:
        return len(self.physical_offsets)

    @property
    def messages(self) -> list[MessageExt]:
        """The messages, decoded (each read from the CommitLog on access, body CRC verified: a corrupt
        record raises ChecksumError with its path and offset instead of being served)."""
        return self._store.commitlog.read_many(self.physical_offsets, verify_crc=True)  # type: ignore[no-any-return]

    def raw(self) -> list[bytes]:
        """Each message's record bytes, as a broker would send them to a client."""
        return [self._store.read_record_bytes(o, n) for o, n in zip(self.physical_offsets, self.sizes)]


_REPUT_STEP = 32 * 1024 * 1024  # CommitLog bytes the reput thread dispatches per step
_LOGICS_WARM_CHUNK = 512 * 1024  # consume-queue / index bytes the warm-ahead thread populates per call


@functools.lru_cache(maxsize=1)
def _ram_bytes() -> int:
    """Physical memory, read once (as RocketMQ's StoreUtil.TOTAL_PHYSICAL_MEMORY_SIZE)."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return 8 << 30


# dispatch.select_units's statuses
_MAX_FILTER = 16000 // L.CQ_UNIT_SIZE  # maxFilterMessageCount: a pull looks at up to 800 units
_SELECT_STATUS = (GetStatus.NO_MATCHED_MESSAGE, GetStatus.FOUND, GetStatus.MESSAGE_WAS_REMOVING)


def _tag_codes(expr: str | None) -> set[int] | None:
    """SubscriptionData of a tag expression: None means every message ("*" or no filter).

    Raises:
        ConfigError: ``expr`` is not a str (nor None).
    """
    if expr is None:
        return None
    if not isinstance(expr, str):
        raise ConfigError(f"tag_filter must be a str ('TagA || TagB') or None, not {type(expr).__name__}")
    expr = expr.strip()
    if not expr or expr == "*":
        return None
    hashing = _impl.hashing
    return {hashing.java_string_hash(t.strip()) for t in expr.split("||") if t.strip()}


_I64_MIN, _I64_MAX = -(2**63), 2**63 - 1


_ACCESS_ERRNOS = frozenset((errno.EACCES, errno.EPERM, errno.EROFS))


@contextlib.contextmanager
def _access_refused_is_error(store_dir: Path, read_only: bool) -> Iterator[None]:
    """Inside the block, an OSError of a refused access (EACCES, EPERM, EROFS) becomes a
    StoreAccessError naming the store; other errors pass unchanged."""
    try:
        yield
    except OSError as e:
        if isinstance(e, RmqError) or e.errno not in _ACCESS_ERRNOS:
            raise
        how = "read" if read_only else "write"
        todo = "" if read_only else "; open it with read_only=True to read it"
        raise StoreAccessError(
            e.errno, f"cannot open the store {store_dir} to {how} ({e.strerror}){todo}", e.filename) from None


def _store_path(store_dir: Any) -> Path:
    """``store_dir`` as a Path: a str or path-like naming a directory (not a file), without NUL."""
    path = path_arg(store_dir, "store_dir")
    if path.exists() and not path.is_dir():
        raise ConfigError(f"{path} is not a directory (a store is a directory)")
    return path


def _query_args(what: str, topic: Any, key: Any, begin: Any, end: Any, max_num: Any) -> tuple[int, int, int]:
    """Key-query arguments checked: str topic and key, integer ``begin``, ``end`` and ``max_num``
    (numpy ints too), each clamped to int64 (past it is the same as no bound)."""
    if (type(begin) is int and type(end) is int and type(max_num) is int and type(topic) is str
            and type(key) is str and _I64_MIN <= begin <= _I64_MAX and _I64_MIN <= end <= _I64_MAX
            and _I64_MIN <= max_num <= _I64_MAX):
        return begin, end, max_num  # the usual case, checked in one expression
    if not isinstance(topic, str) or not isinstance(key, str):
        raise ConfigError(f"{what} takes a str topic and key, not {type(topic).__name__} and {type(key).__name__}")
    lo, hi, n = (bound_arg(v, f"{what}'s {name}")
                 for v, name in ((begin, "begin"), (end, "end"), (max_num, "max_num")))
    return lo, hi, n


class MessageStore:
    """A RocketMQ-compatible message store in ``store_dir``.

    Args:
        store_dir: the store root (``commitlog/``, ``consumequeue/``, ``index/``, ``config/``...).
        config: a StoreConfig; keyword arguments override its fields (e.g. ``cq_file_size=2000``).
        read_only: open without the lock, write nothing (for live or foreign stores).
        follow: with ``read_only``, keep up with the process writing the store: pulls see what it
            publishes after the open and may wait for it (``rmqcore.live``).
        impl: "native" or "pure" kernels (default: the chosen implementation).
    """

    def __init__(
        self, store_dir: str | os.PathLike[str], config: StoreConfig | None = None, *, read_only: bool = False,
        follow: bool = False, impl: str | None = None, progress: Any = None, **overrides: Any,
    ) -> None:
        self.store_dir = _store_path(store_dir)
        if config is not None and not isinstance(config, StoreConfig):
            raise ConfigError(f"config must be a StoreConfig, not {type(config).__name__}")
        if impl not in (None, "native", "pure"):
            raise ConfigError(f"impl must be 'native', 'pure' or None, not {impl!r}")
        if not isinstance(read_only, bool):
            raise ConfigError(f"read_only must be a bool, not {read_only!r}")
        if not isinstance(follow, bool):
            raise ConfigError(f"follow must be a bool, not {follow!r}")
        if follow and not read_only:
            raise ConfigError("follow=True is for read-only opens (read_only=True): a writer is followed")
        self._follow = follow
        self._progress = progress  # progress(done_bytes, total_bytes) during recovery scans
        self.read_only = read_only
        self.impl = impl
        self._closed = True  # until the open succeeds
        with _access_refused_is_error(self.store_dir, read_only):
            self._init(config or StoreConfig(), overrides)

    def _init(self, cfg: StoreConfig, overrides: dict[str, Any]) -> None:
        read_only = self.read_only
        geo = geometry.resolve(self.store_dir, overrides)
        self.config = cfg = cfg.replace(**geo.values) if geo.values else cfg
        # rmqcore wrote the store as 5.x does: a record's properties end with a separator
        self._strict_tail = bool(geo.saved and geo.saved.get("flavour") == 5)
        self._closed = False
        self._gate = new_gate(f"the store {self.store_dir} is closed", self.impl)
        self._close_lock = threading.Lock()  # one close at a time; a second one returns once it is closed
        self._notify: _live.NotifyFile | None = None  # the writer's wake slots (rmqcore.live)
        self._follower: _live.Follower | None = None
        self._live_consumers: Any = weakref.WeakSet()
        self._live_pool: Any = None
        self._live_lock = threading.Lock()
        # topics.json and consumerOffset.json (followers' commits come in through the inbox)
        self._meta = StoreMetadata(self.store_dir, cfg.flavour, read_only, _live.OffsetInbox(self.store_dir))
        # one writer per directory, in this process too (StoreLock); a failed open undoes it
        self._lock: StoreLock | None = None if read_only else StoreLock(self.store_dir)
        self._open_failed = False
        try:
            self._open(cfg, fresh=geo.saved is None, follow=self._follow)
            if self._follower is not None:
                self._follower.attach(self)
        except BaseException:
            self._abandon()
            raise

    # -- opening -------------------------------------------------------------------------------------
    def _release_lock(self) -> None:
        lock, self._lock = self._lock, None
        if lock is not None:
            lock.release(undo=self._open_failed)

    def _open(self, cfg: StoreConfig, fresh: bool, follow: bool = False) -> None:
        # large page-cache folios for the CommitLog and consume queues (MappedFile's _advise_huge),
        # not under SYNC_FLUSH: each sync would write the written folio whole
        self._huge_pages = cfg.huge_pages and cfg.flush_disk_type == "ASYNC_FLUSH" and not self.read_only
        # what _stop_threads and _close_files look at, set before anything can fail (_abandon)
        self._reput: ReputService | None = None  # the reput thread, started once the store is open
        self._group_commit: GroupCommitService | None = None
        self._async_flush: AsyncFlushService | None = None
        self._logics_flush: AsyncFlushService | None = None
        self._logics_warmer: WarmAhead | None = None
        self.consume_queues: dict[tuple[str, int], ConsumeQueue] = {}
        self.index: Any = None
        self.segindex: Any = None
        if follow:  # the writer's generation, read before any file is
            self._follower = _live.Follower(self.store_dir, self.impl)
        self.commitlog = CommitLog(
            self.store_dir, file_size=cfg.commitlog_file_size, flavour=cfg.flavour, store_host=cfg.store_host,
            clock=cfg.clock, max_message_size=cfg.max_message_size, read_only=self.read_only,
            check_crc=cfg.check_crc_on_recover, recover=False, impl=self.impl, warm_next=cfg.warm_mapped_file,
            huge_pages=self._huge_pages, gate=self._gate,
        )
        self._views_out: dict[int, int] = {}  # record_views blocks open, per thread
        self._disk_full = False
        self._seek_cols = np.empty((L.NCOLUMNS, 64), dtype=np.int64)
        self._dispatch_lock = threading.Lock()
        # held while consume-queue and index files are synced, and by whatever closes such files
        # meanwhile (retention): the periodic flush syncs without the dispatch lock
        self._logics_files_lock = threading.Lock()
        self._dispatch_kernel = _impl.kernel("dispatch", self.impl)
        # scratch of the general dispatch path, one record at a time (_dispatch_one); a record has at
        # most one key per two bytes of properties, plus UNIQ_KEY
        self._cols = np.empty((L.NCOLUMNS, 1), dtype=np.int64)
        self._disp = np.empty((4, 1), dtype=np.int64)
        self._keys = np.empty(L.MAX_PROPERTIES_LEN // 2 + 2, dtype=np.int64)
        self._topic_ids: dict[bytes, int] = {}
        self._keylookup = _impl.kernel("keylookup", self.impl)
        self._reput_pub = np.zeros(1, dtype=np.int64)  # reput_from_offset, as the native lookup reads it
        self._dispatcher = self._dispatch_kernel.Dispatcher()
        if not self.read_only:  # what each put knows of its record: dispatch does not parse it again
            ap = self.commitlog._appender
            self._dispatcher.set_hints(ap.hints, ap.hint_head)
        self._lock_wanted = np.zeros(1, dtype=np.int64)  # callers waiting for the dispatch lock
        self._wanted_mutex = threading.Lock()  # for its read-modify-writes
        # consume-queue files mapped at once (MapPool); the dispatcher holds at most half of them
        self._map_pool = MapPool(cfg.max_open_queue_files or open_files_budget())
        self._bound: dict[tuple[bytes, int], tuple[ConsumeQueue, Any]] = {}  # least recently bound first
        self._bind_max = max(1, self._map_pool.budget // 2)
        self._bound_index: Any = None
        self._no_seg = np.zeros(10, dtype=np.int64)  # Dispatcher.run's segment state when there is no index
        self._seg_out = np.empty((4, 65536), dtype=np.int64)
        self._max_batch = cfg.max_msgs_num_batch
        self._lookup: Any = None
        # lookup's fast path in one native call, bound over the method below (as put is)
        self._lookup_front = self._keylookup.LookupFront(self._lookup_general, self._query_general, MessageExt,
                                                         self._gate)
        self.lookup = self._lookup_front.lookup  # type: ignore[method-assign]
        self.query_by_key = self._lookup_front.query_by_key  # type: ignore[method-assign]
        self._lookup_files: Any = None
        # outlives the lookups rebuilt as files come and go (it remembers what it took in per file)
        self._key_cache: Any = self._keylookup.KeyCache() if cfg.key_cache and cfg.message_index_enable else None
        self._lookup_ncl = 0
        self._last_dispatched_ts = 0
        self._topic_names: list[str] = []
        self._meta.load_offsets()
        self._meta.load_topics()
        self._load_consume_queues()
        self.index = self._open_index(cfg)
        if not self.read_only:  # followers learn that a writer recovers before recovery changes a file
            self._notify = _live.NotifyFile(self.store_dir, writer=True, impl=self.impl)
            self._notify.begin()
        self._recover()
        if not self.read_only and fresh:
            geometry.save(self.store_dir, cfg)
        if not self.read_only:
            cl = self.commitlog
            if cfg.flush_disk_type == "SYNC_FLUSH":
                self._group_commit = GroupCommitService(cl, cfg.sync_flush_timeout_ms, self.impl)
                self.put = self._put_sync  # type: ignore[method-assign]
            else:
                self._async_flush = AsyncFlushService(
                    lambda: cl.flushed_offset, lambda: cl.max_offset, cl._flush, cfg.flush_interval_ms,
                    cfg.flush_least_pages, cfg.flush_thorough_interval_ms)
                self.put = cl.put  # type: ignore[method-assign]  # the native hot path, one C call
            # consume queues, index files and the checkpoint are flushed on their own schedule
            self._logics_flush = AsyncFlushService(
                lambda: 0, lambda: 1 << 62, self._flush_logics, cfg.flush_interval_consume_queue_ms, 0, 1 << 40)
        self._read_your_writes = cfg.dispatch != "background" and not self.read_only
        # get_messages' limits (the config is frozen): memory share, then on-disk and in-memory caps
        self._select_limits = (
            _ram_bytes() * cfg.access_message_in_memory_max_ratio // 100, cfg.max_transfer_bytes_on_disk,
            cfg.max_transfer_count_on_disk, cfg.max_transfer_bytes_in_memory, cfg.max_transfer_count_in_memory)
        # the reput thread asks the writers for the GIL through this word (Appender.set_gil_request)
        self._gil_request = np.zeros(1, dtype=np.int64)
        self._gil_asks = 0
        if cfg.dispatch != "inline" and not self.read_only:
            self._reput = ReputService(
                self._dispatcher, self.commitlog._appender, self._notify_kernel(), self._gil_request,
                self._lock_wanted, lambda: self._dispatch(self.reput_from_offset + _REPUT_STEP, True),
                lambda: self.reput_from_offset < self.commitlog.max_offset, self._wanting)
            self._reput.start()
        if cfg.logics_warm_ahead > 0 and not self.read_only:
            self._logics_warmer = WarmAhead(self._warm_regions, _LOGICS_WARM_CHUNK, "rmqcore-logics-warm-ahead")
        if self._notify is not None:  # dispatch wakes the waiters of each queue it adds units to
            self._meta.drain_inbox()
            self._dispatcher.set_notify(self._notify.mm)
            self._notify.opened(self.reput_from_offset, self.commitlog.min_offset)

    def _open_index(self, cfg: StoreConfig) -> Any:
        if not cfg.message_index_enable:
            return None
        from ..indexfile import IndexService

        return IndexService(
            self.store_dir, cfg.index_slots, cfg.index_entries, read_only=self.read_only, impl=self.impl
        )

    def _load_consume_queues(self) -> None:
        root = self.store_dir / "consumequeue"
        if not root.is_dir():
            return
        for tdir in sorted(root.iterdir()):
            if not tdir.is_dir():
                continue
            try:
                utf8_text(tdir.name, "topic directory")
            except InvalidMessageError:
                continue  # (the OS's undecodable bytes: no topic a broker or rmqcore could have written)
            for qdir in sorted(tdir.iterdir()):
                if not qdir.is_dir() or not is_int_text(qdir.name):
                    continue  # non-numeric queue dirs are skipped, as RocketMQ does
                cq = ConsumeQueue(
                    self.store_dir, tdir.name, int(qdir.name), file_size=self.config.cq_file_size,
                    read_only=self.read_only, huge_pages=self._huge_pages, pool=self._map_pool,
                )
                cq.load()
                self.consume_queues[(tdir.name, int(qdir.name))] = cq

    def _recover(self) -> None:
        """DefaultMessageStore.load + recover (``recovery`` reports what it did).

        Normal (no ``abort`` file): the CommitLog from its third-last file. Abnormal (``abort`` left
        by a crash): from the newest file whose first record was stored before the checkpoint's min
        timestamp, every record re-dispatched from there (idempotent). Either way the CommitLog ends
        at the first record that cannot be read (CRC checked), as in RocketMQ; what is cut is zeroed,
        and kept in quarantine when it holds valid records (``recovery.cut_commitlog``). Consume
        queues end at the same place, each queue's last unit is checked against the CommitLog (every
        unit with ``check_consume_queues``; after a crash the units of the re-dispatched range are
        rebuilt), and index files are kept only as far as they cover the CommitLog without a gap
        (``IndexService.truncate``); dispatch then rebuilds what was dropped, the index from the
        record after the last file kept (RocketMQ issue #8007, and its clock variant). A record whose
        topic cannot be dispatched ends the CommitLog there like any unreadable record.
        """
        cfg = self.config
        abort = self.store_dir / "abort"
        self.last_exit_ok = not abort.exists()
        self.checkpoint = StoreCheckpoint(self.store_dir / "checkpoint", cfg.flavour, read_only=self.read_only)
        self.recovery = RecoveryReport(abnormal=not self.last_exit_ok)
        if self.index is not None:
            self.index.on_roll = self._on_index_roll
        for cq in self.consume_queues.values():
            cq.recover()
        cl = self.commitlog
        redispatch_from: int | None = None
        self.segindex = None
        if self.read_only:
            end = self.recovered_end = self._read_only_end()
        else:
            start_index = None if self.last_exit_ok else self._abnormal_start_file()
            end, stop = cl.scan_end(start_index, progress=self._progress)
            reason = stop.reason if stop is not None else "end of data"
            if start_index is not None:
                end, torn = self._drop_torn_last_record(end)
                reason = "torn last record" if torn else reason
                redispatch_from = cl.queue.files[start_index].file_from_offset if cl.queue.files else 0
            self._cut_commitlog(end, reason)
        first = True
        while True:
            self._settle_logics(end, redispatch_from, first)
            first = False
            if self.read_only:
                return
            from ..segindex import SegmentIndexService

            self.segindex = SegmentIndexService(self.store_dir, cl, interval=cfg.index_interval_bytes,
                                                impl=self.impl)
            self.segindex.recover(self.reput_from_offset)
            try:
                self.dispatch()
                break
            except InvalidRecordError as e:
                at = next((mf.file_from_offset + e.position for mf in cl.queue.files if mf.path == e.path),
                          -1)
                if not cl.min_offset <= at < end:
                    raise
                # a record no queue can be made for (its topic): the CommitLog ends there, and the
                # logics are settled again at the new end
                self._release_dispatcher()
                self.segindex.close()
                self.segindex = None
                end = at
                self._cut_commitlog(end, "undispatchable topic")
        # queue offsets after re-dispatch (records recovered past the old consume queues)
        for (topic, qid), cq in self.consume_queues.items():
            cl.set_queue_offset(topic, qid, cq.max_offset)
        if not self.last_exit_ok and cfg.flavour >= 5:
            self.checkpoint.confirm_phy_offset = self._last_record_start(end)
        self._write_abort()

    def _cut_commitlog(self, end: int, reason: str) -> None:
        """End the CommitLog at ``end``: the cut bytes are zeroed, or kept in quarantine when they hold
        valid records (then a RecoveryCutWarning says what was cut and where it is)."""
        strict = self._strict_tail
        cut = cut_commitlog(self.commitlog, end, reason, lambda m: record_sound(m, strict), self.store_dir,
                            self.config.flavour)
        self.commitlog.set_end(end)
        self.recovered_end = end
        if cut is None:
            return
        self.recovery.cuts.append(cut)
        if cut.records:
            warnings.warn(RecoveryCutWarning(
                f"{self.store_dir}: recovery cut {cut.records} valid records ({cut.bytes} bytes from "
                f"CommitLog offset {cut.offset}, {cut.path} position {cut.position}: {cut.reason}), as "
                f"RocketMQ does; they are kept in {cut.quarantine} (rmqcore.recovery.restore_quarantined "
                "puts them back)"),
                stacklevel=5)

    def _settle_logics(self, end: int, redispatch_from: int | None, first: bool) -> None:
        """Consume queues and index files after the CommitLog ends at ``end``; sets where dispatch
        starts (``reput_from_offset``): early enough to rebuild what was dropped."""
        cl = self.commitlog
        if not cl.queue.files:  # no CommitLog at all: consume queues are meaningless
            for cq in list(self.consume_queues.values()):
                if not self.read_only:
                    cq.destroy()
            self.consume_queues.clear()
        max_cq_phys = max((cq.max_physic_offset for cq in self.consume_queues.values()), default=-1)
        if max_cq_phys >= end:
            for cq in self.consume_queues.values():
                cq.truncate_dirty(end)
        start = redispatch_from
        if not self.read_only:
            for cq in self.consume_queues.values():
                at = self._check_queue(cq, end)
                if at is not None:
                    start = at if start is None else min(start, at)
                if redispatch_from is not None:  # the crash window: rebuilt by re-dispatch
                    cq.truncate_dirty(redispatch_from)
            if self.index is not None:
                trusted = None
                if first and not self.last_exit_ok:
                    # durable only: RocketMQ's rule (endTimestamp <= indexMsgTimestamp), and never the
                    # last file (synced only at close); what follows a file that goes, goes too
                    last, ts = len(self.index.index_files) - 1, self.checkpoint.index_msg_timestamp
                    trusted = lambda i, f: i < last and f.end_timestamp <= ts  # noqa: E731
                begins = [f.times()[2] for f in self.index.index_files]  # beginPhyOffset of each
                dropped = self.index.truncate(end, trusted)
                self.recovery.index_files_dropped += dropped
                if dropped:  # indexing resumes where the files kept end (or the first dropped began)
                    kept = self.index.index_files
                    redo = kept[-1].end_phy_offset if kept else begins[len(begins) - len(dropped)]
                    start = redo if start is None else min(start, redo)
        cl_min = cl.min_offset
        for (topic, qid), cq in self.consume_queues.items():
            cl.set_queue_offset(topic, qid, cq.max_offset)
            cq.correct_min_offset(cl_min)
        if start is None:
            # dispatch resumes after the last record the consume queues know (4.x ReputMessageService)
            start = max((cq.max_physic_offset for cq in self.consume_queues.values()), default=0)
        self.reput_from_offset = min(max(start, cl_min, 0), end)
        self._index_resume = (-1, 0)
        self._reput_pub[0] = self.reput_from_offset

    def _check_queue(self, cq: ConsumeQueue, end: int) -> int | None:
        """Check the units of ``cq`` against the CommitLog (the last ones, walking back while they are
        wrong; every unit with ``check_consume_queues``): the units from the first wrong one on are
        dropped and reported. Returns the CommitLog offset from which dispatch rebuilds them."""
        cl = self.commitlog
        lo, hi = max(cq.min_offset, cq.queue.min_offset() // L.CQ_UNIT_SIZE), cq.max_offset
        topic = cq.topic.encode("utf-8")

        def problem(q: int) -> str | None:
            unit = cq.get(q)
            if unit is None:
                return "no unit"
            return unit_problem(cl, topic, cq.queue_id, q, unit[0], unit[1], end)

        bad, detail = None, ""
        if self.config.check_consume_queues:
            for q in range(lo, hi):
                why = problem(q)
                if why is not None:
                    bad, detail = q, why
                    break
        else:
            q = hi - 1
            while q >= lo:
                why = problem(q)
                if why is None:
                    break
                bad, detail, q = q, why, q - 1
        if bad is None:
            return None
        cq.truncate_units(bad)
        self.recovery.repaired_queues.append(QueueRepair(cq.topic, cq.queue_id, bad, detail))
        return cq.max_physic_offset if cq.max_physic_offset >= 0 else cl.min_offset

    def _on_index_roll(self, end_timestamp: int) -> None:
        """A full index file was flushed: record its end time (indexMsgTimestamp) durably."""
        self.checkpoint.index_msg_timestamp = end_timestamp
        self.checkpoint.flush()

    def _abnormal_start_file(self) -> int:
        """The newest file whose first record is valid and was stored (time != 0) no later than the
        checkpoint's min timestamp (CommitLog.isMappedFileMatchedRecover); the oldest when none."""
        cl = self.commitlog
        limit = self.checkpoint.min_timestamp()
        files = cl.queue.files
        for i in range(len(files) - 1, -1, -1):
            mf = files[i]
            status, _size = cl._codec.check_record(mf.mm, 0, mf.file_size, False)
            if status != L.ST_MSG:
                continue
            magic = int.from_bytes(mf.mm[4:8], "big", signed=True)
            if self.config.flavour == 4 and magic != L.MAGIC_V1:
                continue
            ts = self._store_time_of(mf.file_from_offset)
            if ts and ts <= limit:
                return i
        return 0

    def _drop_torn_last_record(self, end: int) -> tuple[int, bool]:
        """A crash during a write leaves the record's tail zeroed. The body CRC and the length
        fields catch most of that; a zeroed tail of the topic or properties text passes them. So the
        last record before ``end`` must also be sound (``recovery.record_sound``: a valid topic and,
        in flavour-5 stores rmqcore created, properties ending with ``\x02``, as 5.x writers always
        end them). Returns the end of the valid data and whether the last record was dropped."""
        start = self._last_record_start(end)
        if end <= 0 or start >= end:
            return end, False
        try:
            m = self.commitlog.read(start, verify_crc=True) if start < self.commitlog.max_offset else None
        except (CorruptionError, OffsetOutOfRangeError):
            return start, True
        if m is None or m.position + m.size != end:
            return end, False
        if not record_sound(m, self._strict_tail):
            return start, True
        return end, False

    def _last_record_start(self, end: int) -> int:
        cl = self.commitlog
        last = -1
        for mf in reversed(cl.queue.files):
            if mf.file_from_offset >= end:
                continue
            pos, stop = 0, min(mf.wrote_position, end - mf.file_from_offset)
            while pos < stop:
                status, size = cl._codec.peek_record(mf.mm, pos, stop)
                if status != L.ST_MSG:
                    break
                last = mf.file_from_offset + pos
                pos += size
            if last >= 0:
                return last
        return 0

    def _write_abort(self) -> None:
        """Create the abort file (4.x: empty; 5.x: the PID, keeping the previous content as .bak)."""
        abort = self.store_dir / "abort"
        if self.config.flavour >= 5:
            persist(abort, str(os.getpid()))
        else:
            with open(abort, "wb") as f:
                f.flush()
                os.fsync(f.fileno())

    def _read_only_end(self) -> int:
        end, _ = self.commitlog.scan_end()
        self.commitlog.set_end(end)
        return end

    # -- writing --------------------------------------------------------------------------------------
    def _check_open(self) -> None:
        if self._closed:
            raise StoreClosedError(f"the store {self.store_dir} is closed")

    def _caught_up(self) -> None:
        """Inline dispatch: before a read, dispatch whatever was put since the last one (batched)."""
        if self._closed:
            raise StoreClosedError(f"the store {self.store_dir} is closed")
        if self._read_your_writes and self.reput_from_offset < self.commitlog.max_offset:
            self._dispatch(None, False)

    def _check_writable(self) -> None:
        self._check_open()
        if self.read_only:
            raise ReadOnlyError(f"{self.store_dir} was opened read-only")

    @gated
    def put(self, topic: str, body: bytes, queue_id: int = 0, **kwargs: Any) -> AppendResult:
        """Append one message (see CommitLog.put for the arguments); dispatch follows before the next
        read. A writable store binds this name to the CommitLog's native put (one C call)."""
        self._check_writable()
        return self.commitlog.put(topic, body, queue_id, **kwargs)

    @gated
    def _put_sync(self, topic: str, body: bytes, queue_id: int = 0, **kwargs: Any) -> AppendResult:
        assert self._group_commit is not None
        return self._group_commit.durable(self.commitlog.put(topic, body, queue_id, **kwargs))  # type: ignore[no-any-return]

    @gated
    def warm_up(self) -> None:
        """Fault in the CommitLog's current and next file before writing (``CommitLog.warm_up``,
        RocketMQ's warmMappedFile), so the first appends do not pay first-touch page faults."""
        self._check_writable()
        self.commitlog.warm_up()

    @gated
    def put_async(self, topic: str, body: bytes, queue_id: int = 0, **kwargs: Any) -> DurableAck:
        """Append one message and return at once with a DurableAck (RocketMQ 5's asyncPutMessage).

        Under SYNC_FLUSH the flush is requested now and ``ack.result()`` waits until it is durable,
        so a producer may keep many puts in flight and one fdatasync serves all of them; under
        ASYNC_FLUSH the ack is already done. Arguments as for ``put``."""
        if self._disk_full or self._closed or self.read_only:
            self._check_writable()
            self._refuse_write()
        r = self.commitlog.put(topic, body, queue_id, **kwargs)
        gc = self._group_commit
        if gc is not None:
            gc.request(r.physical_offset + r.size)
        return DurableAck(r, gc)

    @gated
    def put_batch(self, topic: str, bodies: Sequence[bytes], queue_id: int = 0, **kwargs: Any) -> BatchAppendResult:
        """Append a batch (see CommitLog.put_batch); with SYNC_FLUSH it returns once durable."""
        self._check_writable()
        if self._disk_full:
            self._refuse_write()
        r = self.commitlog.put_batch(topic, bodies, queue_id, **kwargs)
        return r if self._group_commit is None else self._group_commit.durable(r)

    # -- dispatch (ReputMessageService) -----------------------------------------------------------------
    @property
    def dispatch_lag(self) -> int:
        """Bytes of CommitLog not yet dispatched to consume queues and index files."""
        return max(0, self.commitlog.max_offset - self.reput_from_offset)

    @gated
    def consume_queue(self, topic: str, queue_id: int, create: bool = False) -> ConsumeQueue | None:
        """The ConsumeQueue of (topic, queue_id), None when there is none; ``create`` makes an
        empty one (a str topic and a queue id in [0, 2**31 - 1], else ConfigError)."""
        return self._consume_queue(topic, queue_id, create)

    def _consume_queue(self, topic: str, queue_id: int, create: bool) -> ConsumeQueue | None:
        """``consume_queue`` outside the gate (dispatch, which close runs too)."""
        cq = self._queue_of(topic, queue_id)
        if cq is None and bool_arg(create, "create"):
            if type(topic) is not str or type(queue_id) is not int or not 0 <= queue_id <= 0x7FFFFFFF:
                raise ConfigError(f"no queue can be made for topic {topic!r} and queue_id {queue_id!r}")
            cq = ConsumeQueue(self.store_dir, topic, queue_id, file_size=self.config.cq_file_size,
                              huge_pages=self._huge_pages, pool=self._map_pool)
            self.consume_queues[(topic, queue_id)] = cq
            self._meta.note_topic(topic, queue_id)
        return cq

    @gated
    def dispatch(self, limit: int | None = None) -> int:
        """Dispatch CommitLog records from ``reput_from_offset`` up to the end (or ``limit``).

        Returns how many records were dispatched. Idempotent: re-dispatching records that the
        consume queues and index already hold changes nothing. The per-record work runs in the
        native ``Dispatcher`` without the GIL; records it leaves to Python (delay topic, invalid
        UTF-8, an out-of-order queue position) go through ``_dispatch_one``.
        """
        return self._dispatch(None if limit is None else int_arg(limit, "limit"), False)

    def _dispatch(self, limit: int | None, live: bool) -> int:
        """``dispatch``; with ``live`` (the reput thread) each run also follows the records the
        writer completes meanwhile, up to ``limit``, without coming back for the GIL, and the
        writers hand the GIL over whenever a run ends (until this returns)."""
        if not live:
            lock = self._dispatch_lock
            if self._reput is None:
                lock.acquire()
            elif not lock.acquire(False):  # the reput thread is in a run: ask it to end (it may nap)
                with self._dispatch_locked():
                    return self._dispatch_runs(limit, False)
            try:  # taken without signalling anyone
                return self._dispatch_runs(limit, False)
            finally:
                lock.release()
        with self._dispatch_lock:
            # the writers hand the GIL over from here to the first run (which withdraws this): the
            # Python work before it (a new CommitLog file's segment index: files created, each file
            # call giving up the GIL) would otherwise wait out the 5 ms switch interval each time
            self._gil_asks -= 1  # a new number (the Dispatcher's own are positive)
            self._gil_request[0] = self._gil_asks
            try:
                return self._dispatch_runs(limit, True)
            finally:  # a live run leaves its GIL request out for the work between runs (Dispatcher.set_signals)
                self._gil_request[0] = 0

    @contextlib.contextmanager
    def _wanting(self) -> Iterator[None]:
        """Counted in ``_lock_wanted`` meanwhile: a live run napping for the writer returns instead
        of napping on, and the reput thread's nap between runs is skipped."""
        with self._wanted_mutex:
            self._lock_wanted[0] += 1
        try:
            yield
        finally:
            with self._wanted_mutex:
                self._lock_wanted[0] -= 1

    @contextlib.contextmanager
    def _dispatch_locked(self) -> Iterator[None]:
        """The dispatch lock, for any thread but the reput thread, taken while wanting it."""
        with self._wanting():
            self._dispatch_lock.acquire()
        try:
            yield
        finally:
            self._dispatch_lock.release()

    def _dispatch_runs(self, limit: int | None, live: bool) -> int:
        self._check_open()
        cl = self.commitlog
        written = cl.max_offset
        cap = written if limit is None else limit
        end = min(cap, written)
        live_arr = cl._appender.live if live else None
        dsp = self._dispatcher
        index_on = self.index is not None
        no_seg, seg_out = self._no_seg, self._seg_out
        n_total = 0
        # a record whose keys went into two index files (the first filled up) resumes at its
        # key first_key; kept across calls, as a live run may have gone past this call's end
        at_key, first_key = self._index_resume
        if at_key != self.reput_from_offset:
            first_key = 0
            self._index_resume = (-1, 0)
        while self.reput_from_offset < end:
            try:
                mf = cl.queue.find(self.reput_from_offset)
            except OffsetOutOfRangeError:
                break
            base = mf.file_from_offset
            pos = self.reput_from_offset - base
            stop_at = min(mf.wrote_position, end - base)
            seg = self.segindex.for_file(base) if self.segindex is not None else None
            r = dsp.run(
                mf.mm, base, pos, stop_at, False, index_on, first_key, no_seg if seg is None else seg.state,
                seg_out, live_arr, max(stop_at, min(cap - base, mf.file_size)))
            first_key = 0
            if r.seg_entries:
                assert seg is not None
                seg.add_entries(seg_out, r.seg_entries)
            self._sync_queues()
            if index_on and self._bound_index is not None:
                self._bound_index._dirty = True
            if r.max_timestamp > self._last_dispatched_ts:
                self._last_dispatched_ts = r.max_timestamp
            n_total += r.done
            nxt = base + r.at
            if r.stop == L.STOP_QUEUE or r.stop == L.STOP_INDEX:
                # what the run wrote stays done if the binding below fails (DiskFullError creating
                # a file): a retry starts after it, and re-putting the keys of the last indexed
                # record would add them to the index twice
                if nxt > self.reput_from_offset:
                    self.reput_from_offset = nxt
                    self._reput_pub[0] = nxt
            if r.stop == L.STOP_QUEUE:
                self._bind_queue(bytes(mf.mm[r.topic_pos : r.topic_pos + r.topic_len]), r.queue_id,
                                 r.queue_offset, mf.path, r.at)
            elif r.stop == L.STOP_INDEX:
                first_key = r.first_key
                self._index_resume = (nxt, first_key)
                self._bind_index()
            elif r.stop == L.STOP_SPECIAL:
                nxt = self._dispatch_one(mf, r.at)
                n_total += 1
            elif r.stop == L.STOP_SEG:
                pass  # the segment-index output was full: its entries are in (above), the next run goes on
            else:  # STOP_NONE: the run reached its limit or a status
                if r.status == L.ST_BLANK:
                    nxt = mf.file_end_offset
                elif r.done == 0 and r.status < 0 and r.at < stop_at:
                    if r.status == L.ST_TORN and base + stop_at < cl.max_offset:
                        break  # the record crosses this call's limit: the next call takes it
                    # RocketMQ logs and stops here; recovery cuts such bytes, so report them
                    raise_status(cl._codec, r.status, mf.path, r.at)
                if nxt <= self.reput_from_offset:
                    break
            self.reput_from_offset = nxt
        self._reput_pub[0] = self.reput_from_offset
        if self._notify is not None:
            self._notify.publish_dispatched(self.reput_from_offset)
        if self._lookup is not None and self._lookup_stale():
            self._drop_lookup()  # files came or went: the next lookup rebuilds it
        return n_total

    def _sync_queues(self) -> None:
        """Publish what the dispatcher wrote: each queue's write position and max physical offset
        (and wake its waiters in this process: the dispatcher woke them as it wrote, when this
        process's view of the queue had not moved yet)."""
        notify = self._notify if self.config.dispatch == "background" else None
        for topic_b, qid, wrote, max_phys in self._dispatcher.touched():
            cq, mf = self._bound[(topic_b, qid)]
            mf.wrote_position = wrote
            cq.max_physic_offset = max_phys
            if notify is not None:
                notify.announce(topic_b, qid)

    def _bind_queue(self, topic_b: bytes, queue_id: int, queue_offset: int, path: Any = None,
                    position: int = -1) -> None:
        """Give the dispatcher the writable file of a queue (created, with the pre-blank fill of a
        queue that starts past 0, when it has none; the next one when it is full). The record at
        ``position`` of ``path`` needs it; a topic that cannot be a directory name is reported
        there (RocketMQ would create the directory wherever the topic points)."""
        try:
            cq = self._consume_queue(topic_b.decode("utf-8"), queue_id, True)  # ConsumeQueue checks the topic
        except InvalidTopicError as e:
            raise InvalidRecordError(str(e), position, None if path is None else str(path)) from None
        assert cq is not None
        self._bind((topic_b, queue_id), cq, cq._writable(queue_offset * L.CQ_UNIT_SIZE))

    def _bind(self, key: tuple[bytes, int], cq: ConsumeQueue, mf: Any) -> None:
        """Bind ``mf`` of ``cq`` to the dispatcher (pinned in the map pool meanwhile), with the
        queue's wake slot in the notify file; beyond ``_bind_max`` bound queues the least recently
        bound one is let go (bound again when a record needs it)."""
        old = self._bound.pop(key, None)
        if old is not None and old[1] is not mf:
            self._map_pool.pin(old[1], False)
        self._map_pool.pin(mf, True)
        self._dispatcher.bind_queue(key[0], key[1], mf.mm, mf.file_from_offset, mf.wrote_position,
                                    cq.max_physic_offset,
                                    -1 if self._notify is None else self._notify.slot(key[0], key[1]))
        self._bound[key] = (cq, mf)
        while len(self._bound) > self._bind_max:
            self._unbind(next(iter(self._bound)))

    def _unbind(self, key: tuple[bytes, int]) -> None:
        _cq, mf = self._bound.pop(key)
        self._dispatcher.bind_queue(key[0], key[1], None, 0, 0, 0)
        self._map_pool.pin(mf, False)

    def _bind_index(self) -> None:
        """Give the dispatcher the last index file (a new one when it is full: getAndCreateLastIndexFile)."""
        assert self.index is not None
        f = self.index._last_writable()
        self._dispatcher.bind_index(f._mm, self.index.slot_count, f.entry_limit())
        self._bound_index = f

    def _warm_regions(self) -> list[Region]:
        """What the logics warm-ahead should warm now: past the write position of each bound queue
        that moved (as the dispatcher holds it, mid-run too) and past the bound index file's last
        entry."""
        out: list[Region] = []
        bound, ahead = self._bound, self.config.logics_warm_ahead
        for topic_b, qid, wrote in self._dispatcher.moved():
            pair = bound.get((topic_b, qid))
            if pair is not None and not pair[1].closed:
                mf = pair[1]
                out.append((mf.mm, wrote, ahead_end(wrote, mf.file_size, wrote, ahead)))
        f = self._bound_index
        if f is not None:
            r = index_region(f, ahead)
            if r is not None:
                out.append(r)
        return out

    def _warm_paused(self) -> contextlib.AbstractContextManager[None]:
        """Held while logics files are unmapped: the warm-ahead thread is not in any map."""
        w = self._logics_warmer
        return contextlib.nullcontext() if w is None else w.paused()

    def _release_dispatcher(self) -> None:
        """Let go of the files the dispatcher holds (before any of them is unmapped)."""
        self._dispatcher.release()
        for _cq, mf in self._bound.values():
            self._map_pool.pin(mf, False)
        self._bound.clear()
        self._bound_index = None

    def _dispatch_one(self, mf: Any, pos: int) -> int:
        """The general path for the one record at ``pos`` of ``mf``; returns the offset after it.
        Queue and index bindings are refreshed afterwards (this path writes through the objects)."""
        n, end_pos, status, nkeys = self._dispatch_kernel.dispatch_batch(
            mf.mm, pos, mf.wrote_position, self._cols, self._disp, self._keys, False)
        if n == 0:
            raise_status(self.commitlog._codec, status, mf.path, pos)
        try:
            self._apply_dispatch(mf, 1, nkeys)
        except InvalidTopicError as e:  # as _bind_queue reports it: where the record is
            raise InvalidRecordError(str(e), pos, mf.path) from None
        topic_b = bytes(mf.mm[int(self._cols[L.C_TOPIC_POS, 0]) : int(self._cols[L.C_TOPIC_POS, 0])
                              + int(self._cols[L.C_TOPIC_LEN, 0])])
        key = (topic_b, int(self._cols[L.C_QUEUE_ID, 0]))
        if key in self._bound:
            cq, _ = self._bound[key]
            last = cq.queue.last()
            if last is not None and not last.is_full():
                self._bind(key, cq, last)
            else:
                self._unbind(key)
        if self.index is not None and self.index._files:
            self._bind_index()
        if self._notify is not None:  # this path writes its unit through ConsumeQueue: announce it here
            self._notify.announce(topic_b, key[1])
        return int(mf.file_from_offset + end_pos)

    def _apply_dispatch(self, mf: Any, n: int, nkeys: int) -> None:
        """CQ units, index entries (``dispatch.apply_batch``, the path Spark maintenance writes through
        too) and segment-index entries of the ``n`` records decoded into the scratch arrays (the
        general path of ``_dispatch_one``)."""
        cols = self._cols
        disp = self._disp
        base = mf.file_from_offset
        positions = cols[L.C_POSITION, :n].copy()
        phys = positions + base
        sizes = cols[L.C_SIZE, :n].copy()
        sysf = cols[L.C_SYS_FLAG, :n]
        tss = cols[L.C_STORE_TIMESTAMP, :n].copy()
        tags = disp[0, :n].copy()
        flags = disp[1, :n]
        mm = mf.mm
        ids = np.array([self._topic_id(mm, int(p), int(ln)) for p, ln in zip(cols[L.C_TOPIC_POS, :n].tolist(),
                                                                            cols[L.C_TOPIC_LEN, :n].tolist())],
                       dtype=np.int64)
        names = self._topic_names
        general_tags(self.commitlog._codec, mm, mf.wrote_position, base, positions, flags, tags)

        def queue_of(g: int) -> ConsumeQueue:
            cq = self._consume_queue(names[g >> 32], g & 0xFFFFFFFF, True)
            assert cq is not None
            return cq

        apply_batch(queue_of, ids, cols[L.C_QUEUE_ID, :n], phys, sizes, tags, cols[L.C_QUEUE_OFFSET, :n].copy(),
                    sysf & L.TRANSACTION_MASK, self.index, self._keys[:nkeys], disp[3, :n], tss)
        if self.segindex is not None:
            self.segindex.add(base, positions, sizes, tss)
        self._last_dispatched_ts = max(self._last_dispatched_ts, int(tss.max()))

    def _topic_id(self, mm: Any, p: int, ln: int) -> int:
        key = bytes(mm[p : p + ln])
        tid = self._topic_ids.get(key)
        if tid is None:
            tid = self._topic_ids[key] = len(self._topic_names)
            self._topic_names.append(key.decode("utf-8", "replace"))
        return tid

    @gated
    def wait_dispatched(self, timeout: float = 10.0) -> bool:
        """Wait until dispatch has caught up with the CommitLog (background mode); False when it has
        not within ``timeout`` seconds.

        Raises:
            ConfigError: ``timeout`` is not a number (an int or a float, not NaN).
            DiskFullError: the reput thread is waiting out a full disk.
            StoreClosedError: the store closed meanwhile (its close waits for this call).
        """
        deadline = time.monotonic() + real_arg(timeout, "timeout")
        while self.dispatch_lag > 0:
            err = None if self._reput is None else self._reput.error
            if err is not None:
                raise err
            if self._gate.sealed:
                raise StoreClosedError(f"the store {self.store_dir} is closed")
            if time.monotonic() > deadline:
                return False
            time.sleep(0.0005)
        return True

    # -- reading ----------------------------------------------------------------------------------------
    def _queue_of(self, topic: str, queue_id: int) -> ConsumeQueue | None:
        """The consume queue of (topic, queue_id), None when there is none; an argument that cannot
        name a queue at all (unhashable) is a ConfigError, not the dict's TypeError."""
        try:
            return self.consume_queues.get((topic, queue_id))
        except TypeError:
            raise ConfigError(f"no queue is named by topic {topic!r} and queue_id {queue_id!r}") from None

    # the calls a consumer makes in a loop enter the gate themselves (cheaper than ``gated``'s
    # wrapper and its argument packing)
    def min_offset(self, topic: str, queue_id: int) -> int:
        """getMinOffsetInQueue (0 for an unknown queue)."""
        gate = self._gate
        gate.enter()
        try:
            self._caught_up()
            if self._follower is not None and self._follower.ready()[0]:
                self._follower.refresh_queue(topic, queue_id)
            cq = self._queue_of(topic, queue_id)
            return cq.min_offset if cq else 0
        finally:
            gate.leave()

    def max_offset(self, topic: str, queue_id: int) -> int:
        """getMaxOffsetInQueue: one past the last message (0 for an unknown queue)."""
        gate = self._gate
        gate.enter()
        try:
            self._caught_up()
            if self._follower is not None and self._follower.ready()[0]:
                self._follower.refresh_queue(topic, queue_id)
            cq = self._queue_of(topic, queue_id)
            return cq.max_offset if cq else 0
        finally:
            gate.leave()

    @gated
    def read_record_bytes(self, physical_offset: int, size: int) -> bytes:
        """The ``size`` bytes of CommitLog at ``physical_offset`` (a record as ``GetResult`` names
        it: its physical offset and size), copied out.

        Raises:
            ConfigError: an argument is not an integer.
            OffsetOutOfRangeError: ``size`` is not positive, or the range is not within the written
                data of one CommitLog file.
        """
        physical_offset, size = int_arg(physical_offset, "physical_offset"), int_arg(size, "size")
        self._check_open()
        if size <= 0:
            raise OffsetOutOfRangeError(f"a record size must be positive, not {size}")
        mf = self.commitlog.queue.find(physical_offset)
        pos = physical_offset - mf.file_from_offset
        if pos + size > mf.wrote_position:
            raise OffsetOutOfRangeError(f"record at {physical_offset} runs past the written data")
        return bytes(mf.mm[pos : pos + size])

    def get_messages(
        self, group: str, topic: str, queue_id: int, offset: int, max_msgs: int = 32,
        max_bytes: int = 128 * 1024 * 1024, tag_filter: str | None = None, *, wait: float = 0.0,
    ) -> GetResult:
        """DefaultMessageStore.getMessage: pull from ``offset`` with RocketMQ's statuses and next offsets.

        With ``wait`` seconds and nothing at ``offset`` (OFFSET_OVERFLOW_ONE, NO_MESSAGE_IN_QUEUE,
        NO_MATCHED_LOGIC_QUEUE, OFFSET_FOUND_NULL: what RocketMQ's broker holds a long-polling pull
        on), the pull waits, GIL released, until dispatch publishes a unit of this queue (in this
        process or, with ``follow=True``, in the writer's) and answers then, or after ``wait``
        seconds with what it found. Any number of threads may wait on any queues.

        Raises:
            ConfigError: ``offset``, ``max_msgs`` or ``max_bytes`` is not an integer, or ``tag_filter``
                is not a str (nor None); ``wait`` is negative, or nothing could end the wait (a
                read-only store without ``follow``, ``dispatch="inline"``).
            StoreClosedError: the store is closed, or was closed while the pull waited.
        """
        if wait or self._follower is not None or wait.__class__ is not float:
            # enters the gate for each look, never while it waits: close() seals the gate, ends the
            # wait (StoreClosedError) and does not wait for a sleeping pull
            return _live.pull(self, group, topic, queue_id, offset, max_msgs, max_bytes, tag_filter, wait)
        gate = self._gate
        gate.enter()
        try:
            return self._get_messages(group, topic, queue_id, offset, max_msgs, max_bytes, tag_filter)
        finally:
            gate.leave()

    def _get_messages(self, group: str, topic: str, queue_id: int, offset: int, max_msgs: int, max_bytes: int,
                      tag_filter: str | None) -> GetResult:
        if not (type(offset) is type(max_msgs) is type(max_bytes) is int):  # the usual case, checked at once
            offset, max_msgs, max_bytes = (int_arg(offset, "offset"), int_arg(max_msgs, "max_msgs"),
                                           int_arg(max_bytes, "max_bytes"))
        if tag_filter is not None and not isinstance(tag_filter, str):
            _tag_codes(tag_filter)  # raises ConfigError, whatever the queue's state
        self._caught_up()
        cl = self.commitlog
        cl_max = cl.queue.max_offset()
        try:
            cq = self.consume_queues.get((topic, queue_id))
        except TypeError:
            cq = self._queue_of(topic, queue_id)  # raises ConfigError
        if cq is None:
            return GetResult(GetStatus.NO_MATCHED_LOGIC_QUEUE, 0, 0, 0, [], [], [], self)
        # maxFilterMessageCount: 16000 bytes of units
        lo, hi, mf, pos, n = cq.pull_span(offset, max_msgs if max_msgs > _MAX_FILTER else _MAX_FILTER)
        if hi == 0:
            return GetResult(GetStatus.NO_MESSAGE_IN_QUEUE, 0, lo, hi, [], [], [], self)
        if offset < lo:
            return GetResult(GetStatus.OFFSET_TOO_SMALL, lo, lo, hi, [], [], [], self)
        if offset == hi:
            return GetResult(GetStatus.OFFSET_OVERFLOW_ONE, offset, lo, hi, [], [], [], self)
        if offset > hi:
            return GetResult(GetStatus.OFFSET_OVERFLOW_BADLY, hi, lo, hi, [], [], [], self)
        if mf is None or n == 0:
            return GetResult(GetStatus.OFFSET_FOUND_NULL, offset + 1, lo, hi, [], [], [], self)
        codes = None if tag_filter is None else _tag_codes(tag_filter)
        cap = 2**62  # the kernel's arguments are int64: larger limits are the same as no limit
        if not (-cap <= max_msgs <= cap and -cap <= max_bytes <= cap):
            max_msgs, max_bytes = max(-cap, min(max_msgs, cap)), max(-cap, min(max_bytes, cap))
        status, i, phys, qoffs, sizes = self._dispatch_kernel.select_units(
            mf.mm, pos, n, offset, max_msgs, max_bytes, codes, cl.queue.min_offset(), cl_max,
            *self._select_limits)
        return GetResult(_SELECT_STATUS[status], offset + i, lo, hi, phys, qoffs, sizes, self)

    def query_by_key(
        self, topic: str, key: str, begin: int = 0, end: int = 2**63 - 1, max_num: int = 64, *, raw: bool = False,
    ) -> list[MessageExt]:
        """Messages whose KEYS token or UNIQ_KEY is ``key`` (queryMessage), in physical order.

        RocketMQ stores only a 4-byte hash of ``topic#key``, so its answer includes hash collisions
        (``raw=True`` returns exactly that). By default each candidate is re-checked against the
        record (topic, KEYS tokens, UNIQ_KEY) and collisions are dropped.

        Raises:
            ConfigError: the message index is disabled, or an argument has the wrong type (str
                ``topic`` and ``key``; integer ``begin``, ``end`` and ``max_num``, where values past
                int64 are the same as no bound).
            CorruptionError: a record the index points at is corrupt.
        """
        # an instance binds this name to the LookupFront's native call; this is the same call
        return self._lookup_front.query_by_key(  # type: ignore[no-any-return]
            topic, key, begin, end, max_num, raw=raw)

    def _query_general(self, topic: str, key: str, begin: int, end: int, max_num: int, raw: bool) -> list[MessageExt]:
        begin, end, max_num = _query_args("query_by_key", topic, key, begin, end, max_num)
        raw = bool_arg(raw, "raw")
        self._check_open()
        if self.index is None:
            raise ConfigError("the message index is disabled (message_index_enable=False)")
        if not raw:  # dispatch first, then the one-call path over a current lookup
            self._caught_up()
            got = self._current_lookup().messages_now(topic, key, begin, end, max_num, MessageExt)
            if type(got) is list:  # else an outcome (layout.LOOKUP_*): the index walk below answers
                return got
        offsets = self.query_offsets(topic, key, begin, end, max_num)
        out = []
        for off in offsets:
            try:
                m = self.commitlog.read(off, verify_crc=True)
            except OffsetOutOfRangeError:
                continue
            if raw or (m.topic == topic and (m.uniq_key == key or key in m.keys)):
                out.append(m)
        return out

    def lookup(self, topic: str, key: str, begin: int = 0, end: int = 2**63 - 1) -> bytes | None:
        """The stored body of the newest message of ``topic`` whose KEYS token or UNIQ_KEY is ``key``
        (None when there is none): ``query_by_key`` for key-value use, in one native call per
        lookup. Collisions are dropped and the record's CRC is checked, as ``query_by_key`` does.

        Raises:
            ConfigError: the message index is disabled, or an argument has the wrong type (as for
                ``query_by_key``).
            CorruptionError: a record the index points at is corrupt.
        """
        # an instance binds this name to the LookupFront's native call; this is the same call
        return self._lookup_front.lookup(topic, key, begin, end)  # type: ignore[no-any-return]

    def _lookup_general(self, topic: str, key: str, begin: int, end: int) -> bytes | None:
        begin, end, _ = _query_args("lookup", topic, key, begin, end, 0)
        self._check_open()
        if self.index is None:
            raise ConfigError("the message index is disabled (message_index_enable=False)")
        self._caught_up()
        got = self._current_lookup().newest_body(topic, key, begin, end)
        if type(got) is not int:  # an int is an outcome (layout.LOOKUP_*): query_by_key answers
            return got  # type: ignore[no-any-return]
        found = self.query_by_key(topic, key, begin, end, self._max_batch)
        return found[-1].body if found else None

    def _lookup_stale(self) -> bool:
        """Index or CommitLog files came or went since the lookup was built."""
        return (self.index is None or self._lookup_files is not self.index._files
                or self._lookup_ncl != len(self.commitlog.queue.files))

    def _current_lookup(self) -> Any:
        lk = self._lookup
        if lk is None or self._lookup_stale():
            lk = self._build_lookup()
        return lk

    def _build_lookup(self) -> Any:
        self._drop_lookup()
        index, files = self.index, self.commitlog.queue.files
        assert index is not None
        ifiles = index._files
        steps = ifiles[0].max_steps if ifiles else index.max_entries
        cl = self.commitlog
        lk = self._keylookup.KeyLookup(
            [f._mm for f in ifiles], index.slot_count, index.max_entries, steps,
            [mf.mm for mf in files], [mf.file_from_offset for mf in files],
            None if self.read_only else cl._appender.live,
            self._reput_pub if self._read_your_writes else None, cl.max_offset, self._max_batch,
            self._key_cache, [self._index_file_id(f) for f in ifiles] if self._key_cache is not None else None)
        self._lookup, self._lookup_files, self._lookup_ncl = lk, ifiles, len(files)
        self._lookup_front.current = lk
        return lk

    @staticmethod
    def _index_file_id(f: Any) -> tuple[str, int]:
        """What the key cache knows an index file by: its name and inode (a name can come back)."""
        return f.name, os.stat(f.path).st_ino

    def _drop_lookup(self) -> None:
        """Release the lookup's buffers (before any file is unmapped)."""
        lk, self._lookup, self._lookup_files = self._lookup, None, None
        self._lookup_front.current = None
        if lk is not None:
            lk.release()

    def query_offsets(self, topic: str, key: str, begin: int = 0, end: int = 2**63 - 1, max_num: int = 64) -> list[int]:
        """The raw index answer of queryMessage: physical offsets sorted ascending (hash matches only).

        Raises:
            ConfigError: the index is disabled, or an argument has the wrong type (``begin``,
                ``end`` and ``max_num`` are integers; values past int64 are the same as no bound).
        """
        gate = self._gate
        gate.enter()
        try:
            return self._query_offsets(topic, key, begin, end, max_num)
        finally:
            gate.leave()

    def _query_offsets(self, topic: str, key: str, begin: int, end: int, max_num: int) -> list[int]:
        begin, end, max_num = _query_args("query_offsets", topic, key, begin, end, max_num)
        self._caught_up()
        if self.index is None:
            raise ConfigError("the message index is disabled (message_index_enable=False)")
        max_num = min(max_num, self.config.max_msgs_num_batch)
        # one kernel call over the mapped index files; the general path below when it answers
        # LOOKUP_CANNOT_ANSWER (released meanwhile included)
        got = self._current_lookup().offsets_raw(topic, key, begin, end, max_num)
        if type(got) is list:
            return got
        raw, _, _ = self.index.query_offset(topic, key, max_num, begin, end)
        return sorted(raw)

    @gated
    def get_by_msg_id(self, msg_id: str) -> MessageExt:
        """The message with this offset message id (store host + physical offset)."""
        self._check_open()
        host, off = decode_message_id(msg_id)
        m = self.commitlog.read(off, verify_crc=True)
        if m.store_host != host:
            raise OffsetOutOfRangeError(f"message id {msg_id} names store host {host}, the record says {m.store_host}")
        return m

    def store_time_of(self, physical_offset: int, size: int = 0) -> int | None:
        """STORETIMESTAMP of the record at ``physical_offset`` (CommitLog.pickupStoreTimestamp)."""
        gate = self._gate  # entered here, not through ``gated``: a time search calls this per probe
        gate.enter()
        try:
            return self._store_time_of(physical_offset, size)
        finally:
            gate.leave()

    def _store_time_of(self, physical_offset: int, size: int = 0) -> int | None:
        """``store_time_of`` outside the gate (recovery, and the consume queues' mtimes at close)."""
        physical_offset = int_arg(physical_offset, "physical_offset")
        try:
            mf = self.commitlog.queue.find(physical_offset)
        except OffsetOutOfRangeError:
            return None
        return store_timestamp_at(mf.mm, physical_offset - mf.file_from_offset, mf.wrote_position)

    @gated
    def offset_by_time(self, topic: str, queue_id: int, timestamp: int, boundary: str = BOUNDARY_LOWER) -> int:
        """getOffsetInQueueByTime(ts, boundary): LOWER = first message stored at or after ``ts``,
        UPPER = last message stored at or before it (RocketMQ 5.x semantics), NEAREST = the 4.x
        answer (the closest message). Times come from the records, never from file mtimes."""
        timestamp = int_arg(timestamp, "timestamp")
        self._caught_up()
        if type(boundary) is not str or boundary not in (BOUNDARY_LOWER, BOUNDARY_UPPER, BOUNDARY_NEAREST):
            raise InvalidMessageError(f"boundary must be 'lower', 'upper' or 'nearest', not {boundary!r}")
        cq = self._queue_of(topic, queue_id)
        if cq is None:
            return 0
        if boundary != BOUNDARY_NEAREST and self.segindex is not None and self.segindex.monotonic:
            return self._offset_by_time_indexed(cq, timestamp, boundary)
        return cq.offset_by_time(timestamp, self._store_time_of, self.commitlog.min_offset, boundary)

    @gated
    def commitlog_offset_by_time(self, timestamp: int, after: bool = False) -> int:
        """The CommitLog offset of the first record stored at or after ``timestamp`` (strictly after
        with ``after=True``); the end of the log when there is none. Uses the segment time index to
        start near it and reads only the records between that entry and the answer."""
        timestamp, after = int_arg(timestamp, "timestamp"), bool_arg(after, "after")
        self._check_open()
        cl = self.commitlog
        start = self.segindex.seek_time(timestamp - 1 if not after else timestamp) if self.segindex else cl.min_offset
        codec = cl._codec
        out = self._seek_cols
        off = max(start, cl.min_offset)
        while off < cl.max_offset:
            mf = cl.queue.find(off)
            pos = off - mf.file_from_offset
            n, end, status = codec.decode_batch(mf.mm, pos, mf.wrote_position, out, False)
            ts = out[L.C_STORE_TIMESTAMP, :n]
            hit = np.flatnonzero(ts > timestamp if after else ts >= timestamp)
            if len(hit):
                return mf.file_from_offset + int(out[L.C_POSITION, hit[0]])
            if status == L.ST_BLANK:
                off = mf.file_end_offset
            elif n == 0:
                break
            else:
                off = mf.file_from_offset + end
        return cl.max_offset

    def _offset_by_time_indexed(self, cq: ConsumeQueue, timestamp: int, boundary: str) -> int:
        """LOWER/UPPER from physical positions: with store times monotone in CommitLog order, the
        first unit stored at/after ``ts`` is the first unit at/after the first such record."""
        if boundary == BOUNDARY_LOWER:
            return cq.first_at_or_after(self.commitlog_offset_by_time(timestamp))
        k = cq.first_at_or_after(self.commitlog_offset_by_time(timestamp, after=True)) - 1
        return k if k >= cq.min_offset else 0

    @gated
    def earliest_message_time(self, topic: str | None = None, queue_id: int | None = None) -> int:
        """Store time of the oldest message (of one queue when given), -1 when there is none."""
        self._caught_up()
        if topic is None:
            for item in self.commitlog.iter_records(self.commitlog.min_offset):
                if isinstance(item, MessageExt):
                    return item.store_timestamp
            return -1
        cq = self._queue_of(topic, queue_id if queue_id is not None else 0)
        if cq is None or cq.max_offset <= cq.min_offset:
            return -1
        unit = cq.get(cq.min_offset)
        t = self._store_time_of(unit[0]) if unit else None
        return -1 if t is None else t

    @contextlib.contextmanager
    def record_views(self, physical_offsets: Sequence[int]) -> Iterator[list[memoryview]]:
        """Zero-copy: read-only memoryviews of records (``GetResult.physical_offsets``), valid only
        inside the ``with`` block. While views are out, their files cannot be unmapped (closing the
        store on the thread holding them raises BufferError; on another thread close waits for the
        block to end), so no view ever points at unmapped memory; they are released on exit even
        when the block raises.

            with store.record_views(result.physical_offsets) as views:
                for v in views: handle(v)          # bytes of each record, no copy
        """
        self._check_open()
        try:
            offsets = iter(physical_offsets)
        except TypeError:
            raise ConfigError(f"physical_offsets must be an iterable of ints, not {physical_offsets!r}") from None
        views: list[memoryview] = []
        # the block runs inside the gate: close() on another thread waits for it (and the block's
        # store calls raise StoreClosedError meanwhile); on this thread it raises BufferError
        me = threading.get_ident()
        self._gate.enter()
        self._views_out[me] = self._views_out.get(me, 0) + 1
        try:
            self._take_views(offsets, views)
            yield views
        finally:
            for v in views:
                v.release()
            if self._views_out[me] == 1:
                del self._views_out[me]
            else:
                self._views_out[me] -= 1
            self._gate.leave()

    def _take_views(self, offsets: Iterator[Any], views: list[memoryview]) -> None:
        """``record_views``' views, appended to ``views`` as they are made."""
        for off in offsets:
            mf, pos = self.commitlog._locate(int_arg(off, "a physical offset"))
            status, size = self.commitlog._codec.peek_record(mf.mm, pos, mf.wrote_position)
            if status != L.ST_MSG:
                raise OffsetOutOfRangeError(f"no record at offset {off}")
            base = memoryview(mf.mm)
            views.append(base[pos : pos + size].toreadonly())
            base.release()

    def iter_queue(self, topic: str, queue_id: int, offset: int = 0) -> Iterator[MessageExt]:
        """Every message of a queue from ``offset``, decoded."""
        while True:
            r = self.get_messages("", topic, queue_id, offset, 32)
            if r.status != GetStatus.FOUND and r.status != GetStatus.NO_MATCHED_MESSAGE:
                return
            yield from r.messages
            if r.next_begin_offset <= offset:
                return
            offset = r.next_begin_offset

    # -- retention (CleanCommitLogService / CleanConsumeQueueService) --------------------------------------
    def disk_usage_ratio(self) -> float:
        """Used space of the CommitLog's file system, in percent (what RocketMQ's thresholds compare)."""
        st = os.statvfs(self.commitlog.directory)
        total = st.f_blocks * st.f_frsize
        return 100.0 * (total - st.f_bavail * st.f_frsize) / total if total else 0.0

    @property
    def disk_full(self) -> bool:
        """Writes are refused: the disk was past ``disk_space_warning_level_ratio`` at the last clean."""
        return self._disk_full

    @gated
    def clean_expired(self, now_ms: int | None = None, *, force: bool = False,
                      usage_ratio: float | None = None) -> list[str]:
        """Delete expired CommitLog files, then the consume-queue and index files and the columnar
        copies they leave behind.

        Files go oldest first (never the last one, never from the middle: the walk stops at the first
        file that may stay), at most ``delete_file_batch_max`` per call, when it is a ``delete_when``
        hour, the disk is past ``disk_max_used_space_ratio``, or ``force`` (a manual request). A file
        expires ``file_reserved_time_hours`` after it was last written; past
        ``disk_space_clean_forcibly_ratio`` (or the warning ratio) the oldest go regardless of age.
        Past ``disk_space_warning_level_ratio`` the store refuses writes (``DiskFullError``) until a
        later clean finds the disk below it. Returns the deleted CommitLog file paths.

        Raises:
            ConfigError: ``now_ms`` is not an integer or ``usage_ratio`` not a number; the store is
                read-only.
        """
        self._check_writable()
        cfg = self.config
        now_ms = int(time.time() * 1000) if now_ms is None else int_arg(now_ms, "now_ms")
        ratio = self.disk_usage_ratio() if usage_ratio is None else real_arg(usage_ratio, "usage_ratio")
        self._set_disk_full(ratio > cfg.disk_space_warning_level_ratio)
        clean_now = ratio > min(cfg.disk_space_clean_forcibly_ratio, cfg.disk_space_warning_level_ratio)
        try:
            hour = time.localtime(now_ms / 1000).tm_hour
        except (OverflowError, OSError, ValueError):
            raise ConfigError(f"now_ms {now_ms} is no time this system can name") from None
        time_up = any(h.strip().isdigit() and int(h) == hour for h in cfg.delete_when.split(";"))
        if not (time_up or ratio > cfg.disk_max_used_space_ratio or bool_arg(force, "force") or clean_now):
            return []
        self._caught_up()
        self._drop_lookup()
        with self._dispatch_locked():
            self._release_dispatcher()
            deleted: list[str] = []
            reserve_ms = cfg.file_reserved_time_hours * 3600 * 1000
            for mf in list(self.commitlog.queue.files[:-1]):
                if len(deleted) >= cfg.delete_file_batch_max:
                    break
                expired = now_ms >= os.path.getmtime(mf.path) * 1000 + reserve_ms
                if not (expired or (clean_now and cfg.clean_file_forcibly_enable)):
                    break
                if mf.file_end_offset > self.reput_from_offset:
                    break  # never delete what dispatch has not read
                self.commitlog.queue.delete_first()
                deleted.append(mf.path)
            if deleted:
                cl_min = self.commitlog.min_offset
                with self._logics_files_lock, self._warm_paused():
                    for cq in self.consume_queues.values():
                        cq.delete_expired(cl_min)
                    if self.index is not None:
                        self.index.delete_expired(cl_min)
                if self.segindex is not None:
                    self.segindex.recover(self.reput_from_offset)
                drop_copies(self.store_dir, [os.path.basename(p) for p in deleted])  # rmqcore-columnar/
                if self._notify is not None:  # followers drop their maps of the deleted files
                    self._notify.publish_min(self.commitlog.min_offset)
        return deleted

    def _refuse_write(self, *a: Any, **k: Any) -> Any:
        """What a write meets while the disk is past the warning level (``clean_expired``)."""
        raise DiskFullError(f"{self.store_dir}: disk usage is past {self.config.disk_space_warning_level_ratio}%; "
                            "writes are refused until clean_expired() frees space")

    def _set_disk_full(self, full: bool) -> None:
        if full == self._disk_full or self.read_only:
            return
        self._disk_full = full
        if full:
            self.put = self._refuse_write  # type: ignore[method-assign]
        else:
            self.put = self._put_sync if self._group_commit is not None else self.commitlog.put  # type: ignore[method-assign]

    # -- consumer offsets ---------------------------------------------------------------------------------
    @gated
    def commit_offset(self, group: str, topic: str, queue_id: int, offset: int) -> None:
        """Record the next offset ``group`` will consume (persisted to config/consumerOffset.json).

        A follower (``follow=True``) hands its commit to the writer, the one owner of that file
        (``config/consumerOffset.inbox``, synced before this returns; ``rmqcore.live``): the
        writer's ``fetch_offset`` returns it, and so does the follower's.

        Raises:
            ConfigError: an argument has the wrong type (str group and topic, integer queue id and
                offset); the store is read-only (without ``follow``).
            InvalidMessageError: a name with '@' or a lone surrogate, a queue id outside
                [0, 2**31 - 1] (as ``put`` refuses it), an offset outside int64.
        """
        self._commit_offset(group, topic, queue_id, offset)

    def _commit_offset(self, group: str, topic: str, queue_id: int, offset: int) -> None:
        """``commit_offset`` outside the gate (close commits open consumers' progress)."""
        if self._follower is None:
            self._check_writable()
        else:
            self._check_open()
        check_offset_key(group, topic)
        queue_id, offset = int_arg(queue_id, "queue_id"), int_arg(offset, "offset")
        if not 0 <= queue_id <= 0x7FFFFFFF:
            raise InvalidMessageError(f"queue_id {queue_id} is out of range [0, 2**31 - 1]")
        if not _I64_MIN <= offset <= _I64_MAX:
            raise InvalidMessageError(f"offset {offset} is out of the int64 range")
        key = f"{topic}@{group}"
        if self._follower is not None:
            self._follower.inbox.append(key, queue_id, offset)
            return
        self._meta.commit(key, queue_id, offset)

    def fetch_offset(self, group: str, topic: str, queue_id: int) -> int:
        """The committed offset of ``group`` on a queue, -1 when none (queryOffset); followers'
        commits included."""
        check_offset_key(group, topic)
        queue_id = int_arg(queue_id, "queue_id")
        if self._follower is not None:
            return self._follower.fetch_offset(f"{topic}@{group}", queue_id)
        if not self.read_only and not self._closed:
            self._meta.drain_inbox()
        return self._meta.fetch(f"{topic}@{group}", queue_id)

    def topics(self) -> dict[str, int]:
        """Known topics and their queue counts (config/topics.json)."""
        return dict(self._meta.topics)

    # -- lifecycle ----------------------------------------------------------------------------------------
    @gated
    def flush(self) -> None:
        """Make everything durable: CommitLog, consume queues, index files, then the checkpoint
        (pending dispatch runs first, so what was put is in the consume queues and the index)."""
        self._flush()

    def _flush(self) -> None:
        """``flush`` outside the gate (close)."""
        self._caught_up()
        self.commitlog._flush()
        self._meta.persist_topics_if_dirty()
        ts = self._last_dispatched_ts  # before the syncs: what the reput thread adds meanwhile may miss them
        if ts > 0:
            self.checkpoint.physic_msg_timestamp = max(self.checkpoint.physic_msg_timestamp, ts)
        with self._logics_files_lock:
            self._sync_consume_queues()
            if self.index is not None:
                self.index.flush()
        if self.segindex is not None:
            self.segindex.flush()
        if ts > 0:
            self.checkpoint.logics_msg_timestamp = max(self.checkpoint.logics_msg_timestamp, ts)
        self.checkpoint.flush()

    def _sync_consume_queues(self) -> None:
        """Sync the consume queues, then set each written file's mtime to its last unit's store time
        (``ConsumeQueue.stamp_mtimes``) (``_logics_files_lock`` held)."""
        for cq in list(self.consume_queues.values()):  # the reput thread may add queues meanwhile
            cq.flush()
            cq.stamp_mtimes(self._unit_store_time)

    def _unit_store_time(self, physical_offset: int, size: int) -> int | None:
        """``store_time_of`` for a unit's record; None while retention is deleting its file."""
        try:
            return self._store_time_of(physical_offset, size)
        except ValueError:  # the file's map was closed meanwhile (clean_expired)
            return None

    def _flush_logics(self) -> None:
        """Flush dispatched consume queues, then the checkpoint (periodic: FlushConsumeQueueService).

        Index files are not synced here, as in RocketMQ: a full one is synced when the next one
        is created (and its end time becomes the checkpoint's indexMsgTimestamp), the rest at
        close or ``flush()``; after a crash, recovery deletes the index files newer than that time
        and rebuilds them by re-dispatch. (Synced every second, the active index file, its slots
        dirtied all over, would cost a long msync every second under load.)"""
        if self._closed:
            return
        self._meta.persist_topics_if_dirty()
        self._meta.drain_inbox()
        # what is dispatched at this instant is in the page cache before the syncs start, so they
        # make it durable; dispatch goes on meanwhile (a sync of a busy index file takes 100+ ms,
        # and reads dispatch first: holding the dispatch lock stalled every read that long)
        with self._dispatch_locked():
            ts, reput = self._last_dispatched_ts, self.reput_from_offset
        with self._logics_files_lock:
            if self._closed:
                return
            self._sync_consume_queues()
            if ts > 0:
                self.checkpoint.logics_msg_timestamp = max(self.checkpoint.logics_msg_timestamp, ts)
                if self.commitlog.flushed_offset >= reput:
                    # every dispatched record is also flushed: its time bounds what a crash can lose
                    self.checkpoint.physic_msg_timestamp = max(self.checkpoint.physic_msg_timestamp, ts)
            self.checkpoint.flush()

    def close(self) -> None:
        """Dispatch what is pending, flush everything, release the lock. Idempotent, and safe while
        other threads use the store: calls under way finish first (appends included), later ones
        raise StoreClosedError; a second close() meanwhile returns once the store is closed.

        Raises:
            BufferError: this thread still holds zero-copy record views (nothing is changed; leave
                their ``with`` block first). Views of other threads are waited for.
        """
        with self._close_lock:
            if self._closed:
                return
            if threading.get_ident() in self._views_out:  # waiting for its own block would never end
                raise BufferError("record views are still in use; leave their `with` block before closing")
            self._gate.seal()  # from here every call raises StoreClosedError,
            self.commitlog.seal()  # and every append (one under way finishes first);
            self._cancel_live_waits()  # pulls asleep in get_messages(wait=) (outside the gate) end now;
            self._gate.wait_idle()  # the calls under way (record_views blocks too) have finished
            self._close_sealed()

    def _close_sealed(self) -> None:
        """``close`` once no call is under way: open consumers commit what they consumed, threads
        stop, then the last dispatch and flush, and the files go (they go too when a thread's kept
        error is raised: the abort file stays)."""
        self._end_live_waits()
        try:
            self._stop_threads()
            if not self.read_only:
                self._meta.drain_inbox()
                self._dispatch(None, False)
                self._flush()
                if self._group_commit is not None:  # acks still held by producers see the close's flush
                    self._group_commit.mark_durable(self.commitlog.flushed_offset)
                self.checkpoint.flush()
                # a clean shutdown only when every CommitLog byte was dispatched (RocketMQ's rule)
                if self.dispatch_lag == 0:
                    try:
                        os.unlink(self.store_dir / "abort")
                    except FileNotFoundError:
                        pass
        finally:
            self._closed = True
            if self._notify is not None:  # before the lock goes: the next writer's state is its own
                self._notify.closed()
            self._close_files()

    def _cancel_live_waits(self) -> None:
        """Closing, the gate sealed: end every wait of this process (the waiting threads raise
        StoreClosedError; a pull waits outside the gate, so close does not wait for it)."""
        waits = self._notify if self._notify is not None else (
            self._follower.waits if self._follower is not None else None)
        if waits is not None:
            waits.cancel()

    def _end_live_waits(self) -> None:
        """Closing, no call under way: commit what open consumers consumed, and stop the threads
        asyncio consumers waited in."""
        for c in list(self._live_consumers):
            c._store_closing()
        with self._live_lock:
            pool, self._live_pool = self._live_pool, None
        if pool is not None:
            pool.shutdown(wait=True)

    def _notify_kernel(self) -> Any:
        return _impl.kernel("notify", self.impl)

    def _close_live(self) -> None:
        if hasattr(self, "_dispatcher"):
            self._dispatcher.set_notify(None)
        if self._notify is not None:
            self._notify.close()
        if self._follower is not None:
            self._follower.close()

    def _live_executor(self) -> Any:
        """The threads asyncio consumers wait in (made on first use, shut down by close)."""
        self._check_open()
        with self._live_lock:
            if self._live_pool is None:
                self._live_pool = _live.make_executor()
            return self._live_pool

    def consume(self, group: str, topic: str, queue_id: int, *, batch_size: int = 32,
                tag_filter: str | None = None, from_where: str = "last", commit_interval: float = 5.0,
                timeout: float | None = None) -> _live.QueueConsumer:
        """Iterate over a queue's messages as a RocketMQ push consumer receives them, waiting for new
        ones, and commit the group's offset as it does (``rmqcore.live.QueueConsumer`` says exactly
        when: after each pull's messages are consumed, at most every ``commit_interval`` seconds,
        and at close). Use it as a context manager::

            with store.consume("group", "Topic", 0) as messages:
                for m in messages:
                    handle(m)       # consumed once the loop asks for the next one

        Raises:
            ConfigError: a bad argument, or nothing could end a wait (see ``get_messages``).
            StoreClosedError: the store is closed (in a waiting thread: it was closed meanwhile).
        """
        self._check_open()
        return _live.QueueConsumer(self, group, topic, queue_id, batch_size=batch_size, tag_filter=tag_filter,
                                   from_where=from_where, commit_interval=commit_interval, timeout=timeout)

    def consume_async(self, group: str, topic: str, queue_id: int, *, batch_size: int = 32,
                      tag_filter: str | None = None, from_where: str = "last", commit_interval: float = 5.0,
                      timeout: float | None = None) -> _live.AsyncQueueConsumer:
        """``consume`` for asyncio: ``async with store.consume_async(...) as c: async for m in c``.
        Pulls, waits, reads and commits run in the store's waiting threads, never on the loop.

        Raises:
            ConfigError, StoreClosedError: as ``consume``.
        """
        self._check_open()
        return _live.AsyncQueueConsumer(self, group, topic, queue_id, batch_size=batch_size,
                                        tag_filter=tag_filter, from_where=from_where,
                                        commit_interval=commit_interval, timeout=timeout)

    def _abandon(self) -> None:
        """A failed open stops what it started and closes what it opened so far (the CommitLog's
        maps and descriptors, consume queues, index files, flushers), writing nothing; they used
        to stay open until garbage collected."""
        self._closed = True
        self._open_failed = True  # the lock file and directory go if this open made them
        self._gate.seal()
        try:
            self._stop_threads()
        finally:
            if self._notify is not None:
                self._notify.closed()
            self._close_files()

    def _stop_threads(self) -> None:
        """Stop the reput thread (after its run), the flush services and the logics warm-ahead:
        every one of them, even when stopping one raised (a flush service's kept error), which is
        raised once all have stopped (no thread is left in a map the caller unmaps)."""
        with contextlib.ExitStack() as steps:  # callbacks run last-in first-out
            if self._logics_warmer is not None:  # before any file is unmapped
                steps.callback(self._stop_logics_warmer)
            for svc in (self._logics_flush, self._async_flush, self._group_commit):
                if svc is not None:
                    steps.callback(svc.stop)
            self._stop_reput()

    def _stop_logics_warmer(self) -> None:
        if self._logics_warmer is not None:
            self._logics_warmer.stop()
            self._logics_warmer = None

    def _stop_reput(self) -> None:
        reput, self._reput = self._reput, None
        if reput is not None:
            reput.stop()

    def _close_files(self) -> None:
        """Let go of every file, each step even when an earlier one raised: the lookup's and the
        dispatcher's buffers first (nothing may export a map being closed), then the maps, the
        lock last. What does not exist yet (a failed open) is skipped."""
        with contextlib.ExitStack() as steps:  # callbacks run last-in first-out
            steps.callback(self._release_lock)
            steps.callback(self._close_live)
            if self.index is not None:
                steps.callback(self.index.close)
            for cq in self.consume_queues.values():
                steps.callback(cq.close)
            if hasattr(self, "commitlog"):
                steps.callback(self.commitlog.close)
            if self.segindex is not None:
                steps.callback(self.segindex.close)
                self.segindex = None
            if hasattr(self, "_dispatcher"):
                steps.callback(self._release_dispatcher)
            if hasattr(self, "_lookup_front"):
                steps.callback(self._drop_lookup)

    def __enter__(self) -> MessageStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
