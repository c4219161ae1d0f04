"""MessageStore: one object over a RocketMQ store directory (DefaultMessageStore's embeddable shape).

* ``put`` / ``put_batch`` append to the CommitLog; dispatch (ReputMessageService) builds the
  consume queues, index files and segment indexes from the CommitLog, its per-record work in the
  native ``Dispatcher`` without the GIL. ``dispatch="auto"`` (default): a reput thread follows the
  writer, and every read first dispatches what is still pending, so every read sees every put
  made before it. ``dispatch="inline"``: no thread, the caller's thread dispatches before reads
  and at close. ``dispatch="put"``: no thread, each put publishes its own record (its unit, index
  entries and waiters' wake-up, in the put's native call; ``dispatch.Dispatch``), and what a put
  cannot (a file to make) it dispatches itself. ``dispatch="background"``: the reput thread alone,
  as a broker (reads see what has been dispatched; ``wait_dispatched`` waits). Re-dispatch is
  idempotent; ``dispatch_lag`` tells how far behind it is. ``lookup`` is the one-call key-value form
  of ``query_by_key``.
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
import os
import threading
import time
import weakref
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from .. import geometry
from .. import live as _live
from ..bases import ReadOnly
from ..checkpoint import StoreCheckpoint
from ..commitlog import AppendResult, BatchAppendResult, CommitLog
from ..config import StoreConfig, bool_arg, int_arg, path_arg, real_arg
from ..consumequeue import BOUNDARY_LOWER, BOUNDARY_NEAREST, BOUNDARY_UPPER, ConsumeQueue
from ..errors import ConfigError, InvalidMessageError, OffsetOutOfRangeError, ReadOnlyError, RmqError
from ..errors import StoreAccessError, StoreClosedError
from ..flush import DurableAck
from ..lifecycle import gated, new_gate, out_of_descriptors
from ..mappedfile import MapPool, open_files_budget
from ..message import MessageExt
from ..recovery import RecoveryReport
from ..storelock import StoreLock
from . import closing
from .dispatch import Dispatch
from .keyquery import KeyQuery
from .loader import LogLoader, open_index
from .metadata import StoreMetadata, check_offset_key, offset_commit
from .queues import consume_queue, load_consume_queues
from .pull import GetResult, GetStatus, Pull, store_time_in
from .retention import Retention
from .writing import choose_put_path
from .services import StoreServices

__all__ = [
    "MessageStore", "GetResult", "GetStatus", "StoreConfig", "BOUNDARY_LOWER", "BOUNDARY_UPPER", "BOUNDARY_NEAREST",
]

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


def _check_open_args(config: Any, impl: Any, read_only: Any, follow: Any) -> None:
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


class MessageStore:
    """A RocketMQ-compatible message store in ``store_dir``: the façade over its rooms (``loader``
    recovers at open, ``dispatch`` builds the logics, ``pull`` and ``keyquery`` read, ``retention``
    deletes, ``services`` runs the threads, ``metadata`` keeps topics and consumer offsets).

    Args:
        store_dir: the store root (``commitlog/``, ``consumequeue/``, ``index/``, ``config/``...).
        config: a StoreConfig; keyword arguments override its fields (e.g. ``cq_file_size=2000``).
        read_only: open without the lock, write nothing (for live or foreign stores).
        follow: with ``read_only``, keep up with the process writing the store: pulls see what it
            publishes after the open and may wait for it (``rmqcore.live``).
        impl: "native" or "pure" kernels (default: the chosen implementation).
    """

    # set by recovery at open (``loader.LogLoader``)
    last_exit_ok: bool  # the last writer closed the store (no abort file)
    checkpoint: StoreCheckpoint
    recovery: RecoveryReport  # what recovery cut and repaired
    recovered_end: int  # where the CommitLog's valid data ended

    def __init__(
        self, store_dir: str | os.PathLike[str], config: StoreConfig | None = None, *, read_only: bool = False,
        follow: bool = False, impl: str | None = None, progress: Any = None, **overrides: Any,
    ) -> None:
        self.store_dir = _store_path(store_dir)
        _check_open_args(config, impl, read_only, follow)
        self._progress = progress  # progress(done_bytes, total_bytes) during recovery scans
        self.read_only = read_only
        self.impl = impl
        self._closed = True  # until the open succeeds
        self._put_path: Any = None
        choose_put_path(self)
        with _access_refused_is_error(self.store_dir, read_only):
            self._init(config or StoreConfig(), overrides, follow)

    def _init(self, cfg: StoreConfig, overrides: dict[str, Any], follow: bool) -> None:
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
        self._meta = StoreMetadata(self.store_dir, cfg.flavour, self.read_only, _live.OffsetInbox(self.store_dir))
        # one writer per directory, in this process too (StoreLock); a failed open undoes it
        self._lock: StoreLock | None = None if self.read_only else StoreLock(self.store_dir)
        self._open_failed = False
        try:
            self._open(cfg, fresh=geo.saved is None, follow=follow)
            if self._follower is not None:
                self._follower.attach(self)
        except BaseException:
            self._abandon()
            raise

    def _open(self, cfg: StoreConfig, fresh: bool, follow: bool) -> None:
        writer = not self.read_only
        # large page-cache folios for the CommitLog and consume queues (MappedFile's _advise_huge),
        # not under SYNC_FLUSH: each sync would write the written folio whole
        self._huge_pages = cfg.huge_pages and cfg.flush_disk_type == "ASYNC_FLUSH" and writer
        self._services = StoreServices(self)  # what _abandon stops, made before anything can fail
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
        # consume-queue files mapped at once (MapPool); the dispatcher holds at most half of them
        self._map_pool = MapPool(cfg.max_open_queue_files or open_files_budget())
        self._dispatch = Dispatch(self)
        self._keys = KeyQuery(self)  # lookup, query_by_key, query_offsets: its front's calls, bound once
        f = self._keys.front
        self._lookup_call, self._query_call, self._offsets_call = f.lookup, f.query_by_key, f.query_offsets
        self._pull = Pull(self)
        self._retention = Retention(self)
        self._meta.load_offsets()
        self._meta.load_topics()
        load_consume_queues(self)
        self.index = open_index(self)
        if writer:  # followers learn that a writer recovers before recovery changes a file
            self._notify = _live.NotifyFile(self.store_dir, writer=True, impl=self.impl)
            self._notify.begin()
        LogLoader(self).load()
        self._dispatch.read_your_writes = cfg.dispatch != "background" and writer
        if writer:
            if fresh:
                geometry.save(self.store_dir, cfg)
            self._services.start_flush()
            choose_put_path(self)
            self._services.start_dispatch()
        if self._notify is not None:  # dispatch wakes the waiters of each queue it adds units to
            self._meta.drain_inbox()
            self._dispatch.dispatcher.set_notify(self._notify.mm)
            self._notify.opened(self._dispatch.reput_from_offset, self.commitlog.min_offset)

    # -- the state the rooms share ----------------------------------------------------------------------
    @property
    def reput_from_offset(self) -> int:
        """Where dispatch is: the CommitLog offset of the first record not yet dispatched."""
        return self._dispatch.reput_from_offset

    @property
    def _reput(self) -> Any:
        return self._services.reput

    def _check_open(self) -> None:
        if self._closed:
            raise StoreClosedError(f"the store {self.store_dir} is closed")

    def _check_writable(self) -> None:
        self._check_open()
        if self.read_only:
            raise ReadOnlyError(f"{self.store_dir} was opened read-only")

    # -- writing --------------------------------------------------------------------------------------
    put = ReadOnly[Callable[..., AppendResult]]("_put_path", """put(topic, body, queue_id=0, **kwargs) -> AppendResult

        Append one message (see CommitLog.put for the arguments); dispatch follows before the next
        read. The call goes where ``writing.choose_put_path`` says: the CommitLog's native put (one C call),
        the group commit under SYNC_FLUSH, the refusal while the disk is full.""")

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
        if self._retention.disk_full or self._closed or self.read_only:
            self._check_writable()
            self._retention.refuse_write()
        r = self.commitlog.put(topic, body, queue_id, **kwargs)
        gc = self._services.group_commit
        if gc is not None:
            gc.request(r.physical_offset + r.size)
        return DurableAck(r, gc)

    @gated
    def put_batch(self, topic: str, bodies: Sequence[bytes], queue_id: int = 0, **kwargs: Any) -> BatchAppendResult:
        """Append a batch (see CommitLog.put_batch); with SYNC_FLUSH it returns once durable."""
        self._check_writable()
        if self._retention.disk_full:
            self._retention.refuse_write()
        r = self.commitlog.put_batch(topic, bodies, queue_id, **kwargs)
        gc = self._services.group_commit
        return r if gc is None else gc.durable(r)

    # -- dispatch (ReputMessageService) -----------------------------------------------------------------
    @property
    def dispatch_lag(self) -> int:
        """Bytes of CommitLog not yet dispatched to consume queues and index files."""
        return self._dispatch.lag

    @gated
    def consume_queue(self, topic: str, queue_id: int, create: bool = False) -> ConsumeQueue | None:
        """The ConsumeQueue of (topic, queue_id), None when there is none; ``create`` makes an
        empty one (a str topic and a queue id in [0, 2**31 - 1], else ConfigError)."""
        return consume_queue(self, topic, queue_id, create)

    def dispatch(self, limit: int | None = None) -> int:
        """Dispatch CommitLog records from ``reput_from_offset`` up to the end (or ``limit``).

        Returns how many records were dispatched. Idempotent: re-dispatching records that the
        consume queues and index already hold changes nothing. The per-record work runs in the
        native ``Dispatcher`` without the GIL; records it leaves to Python (delay topic, invalid
        UTF-8, an out-of-order queue position) go through the general path (``store.dispatch``).
        """
        gate = self._gate  # entered here, not through ``gated``: an embedded queue calls this per message
        gate.enter()
        try:
            return self._dispatch.run(None if limit is None else int_arg(limit, "limit"), False)
        except OSError as e:
            out_of_descriptors(e, "MessageStore.dispatch")
            raise
        finally:
            gate.leave()

    @gated
    def wait_dispatched(self, timeout: float = 10.0) -> bool:
        """Wait until dispatch has caught up with the CommitLog (background mode); False when it has
        not within ``timeout`` seconds.

        Raises:
            ConfigError: ``timeout`` is not a number (an int or a float, not NaN).
            DiskFullError: the reput thread is waiting out a full disk.
            StoreClosedError: the store closed meanwhile (its close waits for this call).
        """
        return self._dispatch.wait(real_arg(timeout, "timeout"))

    # -- reading (store.pull) -----------------------------------------------------------------------------
    # the calls a consumer makes in a loop enter the gate themselves (cheaper than ``gated``'s
    # wrapper and its argument packing)
    def min_offset(self, topic: str, queue_id: int) -> int:
        """getMinOffsetInQueue (0 for an unknown queue)."""
        return self._pull.queue_bound(topic, queue_id, False)

    def max_offset(self, topic: str, queue_id: int) -> int:
        """getMaxOffsetInQueue: one past the last message (0 for an unknown queue)."""
        return self._pull.queue_bound(topic, queue_id, True)

    @gated
    def read_record_bytes(self, physical_offset: int, size: int) -> bytes:
        """The ``size`` bytes of CommitLog at ``physical_offset`` (a record as ``GetResult`` names
        it: its physical offset and size), copied out.

        Raises:
            ConfigError: an argument is not an integer.
            OffsetOutOfRangeError: ``size`` is not positive, or the range is not within the written
                data of one CommitLog file.
        """
        return self._pull.read_record_bytes(physical_offset, size)

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
            return self._pull.get(topic, queue_id, offset, max_msgs, max_bytes, tag_filter)
        finally:
            gate.leave()

    def _get_messages(self, group: str, topic: str, queue_id: int, offset: int, max_msgs: int, max_bytes: int,
                      tag_filter: str | None) -> GetResult:
        """``get_messages`` without a wait, inside the gate (``rmqcore.live.pull``'s look)."""
        return self._pull.get(topic, queue_id, offset, max_msgs, max_bytes, tag_filter)

    @gated
    def get_by_msg_id(self, msg_id: str) -> MessageExt:
        """The message with this offset message id (store host + physical offset)."""
        return self._pull.by_msg_id(msg_id)

    def store_time_of(self, physical_offset: int, size: int = 0) -> int | None:
        """STORETIMESTAMP of the record at ``physical_offset`` (CommitLog.pickupStoreTimestamp)."""
        gate = self._gate  # entered here, not through ``gated``: a time search calls this per probe
        gate.enter()
        try:
            return store_time_in(self.commitlog, physical_offset)
        finally:
            gate.leave()

    @gated
    def offset_by_time(self, topic: str, queue_id: int, timestamp: int, boundary: str = BOUNDARY_LOWER) -> int:
        """getOffsetInQueueByTime(ts, boundary): LOWER = first message stored at or after ``ts``,
        UPPER = last message stored at or before it (RocketMQ 5.x semantics), NEAREST = the 4.x
        answer (the closest message). Times come from the records, never from file mtimes."""
        return self._pull.offset_by_time(topic, queue_id, timestamp, boundary)

    @gated
    def commitlog_offset_by_time(self, timestamp: int, after: bool = False) -> int:
        """The CommitLog offset of the first record stored at or after ``timestamp`` (strictly after
        with ``after=True``); the end of the log when there is none. Uses the segment time index to
        start near it and reads only the records between that entry and the answer."""
        return self._pull.commitlog_offset_by_time(int_arg(timestamp, "timestamp"), bool_arg(after, "after"))

    @gated
    def earliest_message_time(self, topic: str | None = None, queue_id: int | None = None) -> int:
        """Store time of the oldest message (of one queue when given), -1 when there is none."""
        return self._pull.earliest_message_time(topic, queue_id)

    def record_views(self, physical_offsets: Sequence[int]) -> contextlib.AbstractContextManager[list[memoryview]]:
        """Zero-copy: read-only memoryviews of records (``GetResult.physical_offsets``), valid only
        inside the ``with`` block. While views are out, their files cannot be unmapped (closing the
        store on the thread holding them raises BufferError; on another thread close waits for the
        block to end), so no view ever points at unmapped memory; they are released on exit even
        when the block raises.

            with store.record_views(result.physical_offsets) as views:
                for v in views: handle(v)          # bytes of each record, no copy
        """
        return self._pull.record_views(physical_offsets)

    def iter_queue(self, topic: str, queue_id: int, offset: int = 0) -> Iterator[MessageExt]:
        """Every message of a queue from ``offset``, decoded."""
        return self._pull.iter_queue(topic, queue_id, offset)

    # -- key queries (store.keyquery): one native call each through the KeyQuery's front ------------------
    query_by_key = ReadOnly[Callable[..., list[MessageExt]]]("_query_call", """query_by_key(topic, key, begin=0, end=2**63 - 1, max_num=64, *, raw=False) -> list[MessageExt]

        Messages whose KEYS token or UNIQ_KEY is ``key`` (queryMessage), in physical order.

        RocketMQ stores only a 4-byte hash of ``topic#key``, so its answer includes hash collisions
        (``raw=True`` returns exactly that). By default each candidate is re-checked against the
        record (topic, KEYS tokens, UNIQ_KEY) and collisions are dropped.

        Raises:
            ConfigError: the message index is disabled, or an argument has the wrong type (str
                ``topic`` and ``key``; integer ``begin``, ``end`` and ``max_num``, where values past
                int64 are the same as no bound).
            CorruptionError: a record the index points at is corrupt.""")

    lookup = ReadOnly[Callable[..., "bytes | None"]]("_lookup_call", """lookup(topic, key, begin=0, end=2**63 - 1) -> bytes | None

        The stored body of the newest message of ``topic`` whose KEYS token or UNIQ_KEY is ``key``
        (None when there is none): ``query_by_key`` for key-value use, in one native call per
        lookup. Collisions are dropped and the record's CRC is checked, as ``query_by_key`` does.

        Raises:
            ConfigError: the message index is disabled, or an argument has the wrong type (as for
                ``query_by_key``).
            CorruptionError: a record the index points at is corrupt.""")

    query_offsets = ReadOnly[Callable[..., list[int]]]("_offsets_call", """query_offsets(topic, key, begin=0, end=2**63 - 1, max_num=64) -> list[int]

        The raw index answer of queryMessage: physical offsets sorted ascending (hash matches only).

        Raises:
            ConfigError: the index is disabled, or an argument has the wrong type (``begin``,
                ``end`` and ``max_num`` are integers; values past int64 are the same as no bound).""")

    def _drop_lookup(self) -> None:
        """Release the key lookup's buffers (before any file is unmapped: ``rmqcore.live``)."""
        self._keys.drop()

    # -- retention (store.retention) ------------------------------------------------------------------------
    def disk_usage_ratio(self) -> float:
        """Used space of the CommitLog's file system, in percent (what RocketMQ's thresholds compare)."""
        return self._retention.usage_ratio()

    @property
    def disk_full(self) -> bool:
        """Writes are refused: the disk was past ``disk_space_warning_level_ratio`` at the last clean."""
        return self._retention.disk_full

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
        return self._retention.clean_expired(now_ms, force, usage_ratio)

    # -- consumer offsets and topics (store.metadata) -----------------------------------------------------
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
        key, queue_id, offset = offset_commit(group, topic, queue_id, offset)
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

    # -- live consumers (rmqcore.live) --------------------------------------------------------------------
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

    def _live_executor(self) -> Any:
        """The threads asyncio consumers wait in (made on first use, shut down by close)."""
        return closing.live_executor(self)

    # -- lifecycle ----------------------------------------------------------------------------------------
    @gated
    def flush(self) -> None:
        """Make everything durable: CommitLog, consume queues, index files, then the checkpoint
        (pending dispatch runs first, so what was put is in the consume queues and the index)."""
        self._services.flush()

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
            if threading.get_ident() in self._pull.views_out:  # waiting for its own block would never end
                raise BufferError("record views are still in use; leave their `with` block before closing")
            self._gate.seal()  # from here every call raises StoreClosedError,
            self.commitlog.seal()  # and every append (one under way finishes first);
            closing.cancel_live_waits(self)  # pulls asleep in get_messages(wait=) (outside the gate) end now;
            self._gate.wait_idle()  # the calls under way (record_views blocks too) have finished
            closing.close_sealed(self)

    def _abandon(self) -> None:
        """A failed open stops what it started and closes what it opened so far, writing nothing."""
        closing.abandon(self)

    def __enter__(self) -> MessageStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
