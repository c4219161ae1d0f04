"""CommitLog: the append-only record log of a RocketMQ store (``<root>/commitlog/``).

Records are laid out as in ``layout`` (V1/V2 magic, IPv4/IPv6 hosts). Files have a fixed size
and always end with a BLANK filler: a record is appended only if ``size + 8 <= bytes left``;
otherwise 8 bytes ``(remaining, BLANK magic)`` are written and the record goes to the next file,
re-encoded with its new physical offset. A batch never splits across files.

Crash semantics: records are checksummed (body CRC); on open, the end of the log is found by
scanning (normal recovery: from the third-last file), and everything after the last valid record
is cut (positions only; bytes are not zeroed). Full durability (checkpoint, abort file, abnormal
recovery, flush policies) is layered on top by the store.

Thread-safety: ``put``/``put_batch`` serialise on one lock (one writer); reads of committed
offsets may run concurrently from other threads. Reads run inside a lifecycle gate (the store's,
when a store owns the CommitLog): ``close()`` refuses new ones, waits for those under way, and
only then unmaps, so a read racing ``close()`` completes or raises StoreClosedError.
"""
from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

from . import _impl
from . import layout as L
from .errors import (
    BadMagicError,
    ChecksumError,
    ConfigError,
    CorruptionError,
    InvalidMessageError,
    OffsetOutOfRangeError,
    StoreClosedError,
    TruncatedRecordError,
)
from .config import bool_arg, int_arg
from .lifecycle import gated, new_gate
from .mappedfile import MappedFile, MappedFileQueue
from .message import MessageExt, parse_host
from .putrules import PutRules
from .rolling import FileRoller

_ITER_STEP = 256  # records iter_records reads per step inside the gate
# the walk status of each CorruptionError a decode raises (the codecs' raise_for_status, inverted;
# any other, a RecordSizeError, is ST_BAD_SIZE)
_SCAN_STATUS = ((TruncatedRecordError, L.ST_TORN), (BadMagicError, L.ST_BAD_MAGIC), (ChecksumError, L.ST_BAD_CRC))

__all__ = ["CommitLog", "AppendResult", "BatchAppendResult", "Blank", "ScanStop", "RecordBatch", "column_buffer"]

if TYPE_CHECKING:  # the pure twin is the type surface of the chosen kernel's result classes
    from ._pure.appender import AppendResult, BatchAppendResult
else:
    AppendResult = _impl.kernel("appender").AppendResult
    BatchAppendResult = _impl.kernel("appender").BatchAppendResult


class Blank(NamedTuple):
    """A BLANK filler at ``position``; the file's data ends there (``file_end`` is the next file)."""

    position: int
    declared_size: int
    file_end: int


class ScanStop(NamedTuple):
    """Where a walk stopped on bytes that are not a valid record (``status`` from ``layout``)."""

    position: int
    status: int
    path: str

    @property
    def reason(self) -> str:
        return L.STATUS_NAMES.get(self.status, str(self.status))


class CommitLog:
    """A directory of CommitLog files.

    Args:
        store_dir: the store root; files live in ``store_dir/commitlog``.
        file_size: bytes per file (RocketMQ's ``mappedFileSizeCommitLog``, default 1 GiB).
        flavour: 4 or 5: which RocketMQ's bytes to write (5: properties end with ``\\x02``,
            V2 magic for topics longer than 127 characters; 4: topics up to 127 only).
        store_host: the broker address stamped into records and message ids (``"ip:port"``).
        clock: returns the store timestamp in ms (injectable; default wall clock).
        max_message_size: largest body accepted (RocketMQ ``maxMessageSize``, 4 MiB).
        read_only: map files read-only, change nothing on disk.
        check_crc: verify body CRCs while recovering (``checkCRCOnRecover``).
        recover: find the end of the log on open (normal recovery from the third-last file).
        prepare_next: create the next file in the background (AllocateMappedFileService).
        warm_next: also fault its pages in for writing (RocketMQ's ``warmMappedFileEnable``, off by
            default: on this class of VM populating a fresh file competes with the writer).
        warm_ahead: keep this many bytes past the write position of the current file faulted in,
            on a background thread (``WarmAhead``); 0 turns it off.
        huge_pages: MADV_HUGEPAGE on the files' maps (large page-cache folios: far fewer TLB
            shootdowns during write-back). For asynchronous flushing: a sync writes a folio whole.
        impl: "native" or "pure" kernels (default: ``rmqcore._impl.IMPLEMENTATION``).
        gate: the lifecycle gate reads run in (``rmqcore.lifecycle``; a store passes its own, so
            its ``close()`` covers them); default: one of the CommitLog's.
    """

    def __init__(
        self,
        store_dir: str | Path,
        *,
        file_size: int = L.DEFAULT_COMMITLOG_FILE_SIZE,
        flavour: int = 5,
        store_host: Any = "127.0.0.1:10911",
        clock: Callable[[], int] | None = None,
        max_message_size: int = L.DEFAULT_MAX_MESSAGE_SIZE,
        read_only: bool = False,
        check_crc: bool = True,
        recover: bool = True,
        prepare_next: bool = True,
        warm_next: bool = False,
        warm_ahead: int = 32 * 1024 * 1024,
        huge_pages: bool = False,
        impl: str | None = None,
        gate: Any = None,
    ) -> None:
        self._gate = gate if gate is not None else new_gate("the CommitLog is closed", impl)
        if flavour not in (4, 5):
            raise ConfigError(f"flavour must be 4 or 5, not {flavour!r}")
        if file_size < 4096:
            raise ConfigError(f"commitlog file size {file_size} is too small")
        self.store_dir = Path(store_dir)
        self.directory = self.store_dir / "commitlog"
        self.file_size = file_size
        self.flavour = flavour
        self.store_host = parse_host(store_host)
        self.clock = clock
        self.max_message_size = max_message_size
        self.read_only = read_only
        self.check_crc = check_crc
        # a flusher outside this object (the group commit kernel): its durable_offset counts as flushed
        self.external_durable: Any = None
        self._codec = _impl.kernel("codec", impl)
        self._closed = False
        self.queue = MappedFileQueue(self.directory, file_size, read_only=read_only, huge_pages=huge_pages)
        self.queue.load()
        # which file the appender writes into next, and the next one made ahead (AllocateMappedFileService)
        self.roller = FileRoller(self.queue, read_only=read_only, prepare_next=prepare_next, warm_next=warm_next,
                                 warm_ahead=warm_ahead)
        self._rules = PutRules(flavour)  # what put's arguments become in a record
        self._appender_kernel = _impl.kernel("appender", impl)
        self._appender = self._appender_kernel.Appender(
            self.roller, self._rules, file_size, self.store_host.address, self.store_host.port, max_message_size,
            clock, flavour,
        )
        self.roller.progress = self._appender.live  # the warm-ahead thread waits for appends on it
        if recover:
            self.recover_normally()

    # -- state ------------------------------------------------------------------------------------
    @property
    def prepare_at(self) -> int:
        """The appender asks for the next file once its file is written this far (``FileRoller``)."""
        return self.roller.prepare_at

    @property
    def file_listeners(self) -> list[Callable[[MappedFile], None]]:
        """Called with each new file before the appender writes into it (the group commit registers)."""
        return self.roller.file_listeners

    @property
    def min_offset(self) -> int:
        first = self.queue.first()
        return first.file_from_offset if first else 0

    @property
    def max_offset(self) -> int:
        """One past the last written byte (getMaxOffset)."""
        return self.queue.max_offset()

    def _check_open(self) -> None:
        if self._closed:
            raise StoreClosedError("the CommitLog is closed")

    # -- recovery ---------------------------------------------------------------------------------
    def scan_end(self, start_index: int | None = None, progress: Any = None) -> tuple[int, ScanStop | None]:
        """Walk records from file ``start_index`` (default: third-last) to the end of valid data.

        Returns ``(end_offset, stop)`` where ``stop`` describes invalid bytes met (None when the
        data simply ended). Changes nothing.
        """
        files = self.queue.files
        if not files:
            return 0, None
        i = max(0, len(files) - 3) if start_index is None else start_index
        scan = self._codec.scan_records
        first, total = files[i].file_from_offset, files[-1].file_end_offset - files[i].file_from_offset
        while True:
            mf = files[i]
            if progress is not None:
                progress(mf.file_from_offset - first, total)
            status, end, _count, _ts = scan(mf.mm, 0, mf.file_size, self.check_crc, -1)
            if status == L.ST_BLANK:
                if i + 1 < len(files):
                    i += 1
                    continue
                return mf.file_end_offset, None
            if progress is not None:
                progress(total, total)
            if status == L.ST_END:
                return mf.file_from_offset + end, None
            return mf.file_from_offset + end, ScanStop(mf.file_from_offset + end, status, mf.path)

    def recover_normally(self) -> int:
        """Find the end of the log and cut what follows it (positions only; no bytes zeroed)."""
        end, _stop = self.scan_end()
        self.set_end(end)
        return end

    def set_end(self, end: int) -> None:
        """Make ``end`` the end of the log: later files are dropped, the one holding it is cut."""
        self._appender.set_file(None)
        # read-only: nothing changes on disk, and files after the end (a live writer's next file,
        # allocated ahead) are dropped from view, so max_offset is the end
        self.queue.truncate_dirty(end)

    def rebuild_queue_offsets(self) -> None:
        """Recompute the next queue offset of every topic/queue from the records (standalone use)."""
        table: dict[tuple[str, int], int] = {}
        for item in self.iter_records(self.min_offset):
            if isinstance(item, MessageExt) and item.transaction_type in (
                L.TRANSACTION_NOT_TYPE, L.TRANSACTION_COMMIT
            ):
                key = (item.topic, item.queue_id)
                table[key] = max(table.get(key, 0), item.queue_offset + 1)
        self._appender.clear_queue_offsets()
        for (topic, qid), nxt in table.items():
            self._appender.set_queue_offset(topic, qid, nxt)

    @property
    def topic_queue_table(self) -> dict[tuple[str, int], int]:
        """Next queue offset per (topic, queue id) (a copy)."""
        return self._appender.queue_offsets()  # type: ignore[no-any-return]

    def set_queue_offset(self, topic: str, queue_id: int, next_offset: int) -> None:
        """Set the next queue offset of a topic/queue (recovery restores these from consume queues)."""
        self._appender.set_queue_offset(topic, queue_id, next_offset)

    @gated
    def warm_up(self) -> None:
        """RocketMQ's ``warmMappedFile``, on demand: fault in the rest of the current file (creating
        the first one in an empty log) and create and fault in the next one; returns when done.
        Appends into warm pages skip the first-touch page faults (most of an append's cost on a
        fresh file). Call it after opening, off the hot path; later files are warmed ahead of the writer by the ``warm_ahead`` thread."""
        self._check_open()
        if self.read_only:
            raise ConfigError("the CommitLog was opened read-only")
        mf = self.roller.writable(self.max_offset)
        mf.prefault(mf.wrote_position)
        self.queue.prepare_next(prefault=False)  # a no-op when the next file is already being made
        self.queue.wait_prepared(prefault=True)  # faulted in once, here, however it was prepared

    @cached_property
    def put(self) -> Callable[..., AppendResult]:
        """``put(topic, body, queue_id=0, *, tags=None, keys=None, properties=None, properties_raw=None,
        flag=0, sys_flag=0, born_timestamp=None, born_host=None, reconsume_times=0,
        prepared_transaction_offset=0, store_host=None)``: append one message; returns where it went
        (an ``AppendResult``). Nothing is written when an argument is invalid.

        This is the appender kernel's ``put`` (``rmqcore._pure.appender.Appender.put`` documents
        the arguments): one native call per message, looked up once per CommitLog and then held in
        the instance. ``properties_raw`` stores that exact properties string (instead of building one
        from ``tags``/``keys``/``properties``); ``store_host`` overrides the CommitLog's address for
        this message (the broker stamps each message with the address it arrived on).

        Raises:
            InvalidTopicError, PropertiesTooLargeError, MessageTooLargeError, InvalidMessageError:
                the message cannot be stored as given (nothing written).
            StoreClosedError: the CommitLog was closed.
            ConfigError: the CommitLog was opened read-only.
        """
        return self._refuse_put if self.read_only else self._appender.put

    def _refuse_put(self, *args: Any, **kwargs: Any) -> AppendResult:
        """``put`` of a read-only CommitLog."""
        self._check_open()
        raise ConfigError("the CommitLog was opened read-only")

    def put_batch(
        self,
        topic: str,
        bodies: Sequence[bytes],
        queue_id: int = 0,
        *,
        tags: str | Sequence[str | None] | None = None,
        keys: Sequence[str | Sequence[str] | None] | None = None,
        properties: Sequence[Mapping[str, str] | None] | Mapping[str, str] | None = None,
        properties_raw: Sequence[str] | None = None,
        flags: Sequence[int] | None = None,
        sys_flag: int = 0,
        born_timestamp: int | None = None,
        born_host: Any = None,
        store_host: Any = None,
    ) -> BatchAppendResult:
        """Append a batch (MessageExtBatch): one topic and queue, consecutive queue offsets, one
        store timestamp, never split across files. All messages are written or none.

        ``tags`` is one str for every message or one str (or None) per message; ``keys`` one entry
        per message, each as ``put`` takes it (a str, a sequence of str, or None); the plain case,
        ASCII strs, is encoded by the kernel without per-message Python work. ``properties`` is one
        mapping for every message or a list of one per message (``tags``/``keys`` take precedence
        over their TAGS/KEYS, as in ``put``); ``properties_raw`` gives each stored properties string
        exactly and excludes the other three. ``store_host`` overrides the CommitLog's address for
        this batch (as ``put`` does for one message).
        """
        self._check_open()
        if self.read_only:
            raise ConfigError("the CommitLog was opened read-only")
        tb = self._rules.topic_bytes(topic)
        if isinstance(bodies, (bytes, bytearray, memoryview)) or not isinstance(bodies, Sequence):
            raise InvalidMessageError("bodies must be a sequence of bytes")
        n = len(bodies)
        if n == 0:
            raise InvalidMessageError("a batch needs at least one message")
        # each body's length is checked against max_message_size by the appender (in C: a Python
        # max(map(len, bodies)) here would be a large share of a batched put)
        blist = bodies if type(bodies) is list else list(bodies)
        if flags is not None and (isinstance(flags, (str, bytes, bytearray, memoryview))
                                  or not isinstance(flags, Sequence)):
            raise InvalidMessageError(f"flags needs one entry per body, not {type(flags).__name__}")
        if not isinstance(sys_flag, int) or not -(2**31) <= sys_flag < 2**31:  # as put's sys_flag
            raise InvalidMessageError(f"sys_flag must be an int32, not {sys_flag!r}")
        plist = self._rules.batch_properties(n, tags, keys, properties, properties_raw,
                                             self._appender_kernel.batch_properties)
        if flags is not None and len(flags) != n:
            raise InvalidMessageError("flags needs one int per body")
        tran = sys_flag & L.TRANSACTION_MASK
        if tran in (L.TRANSACTION_PREPARED, L.TRANSACTION_ROLLBACK):
            raise InvalidMessageError("batches cannot carry PREPARED or ROLLBACK transaction messages")
        if type(queue_id) is not int or not 0 <= queue_id <= 0x7FFFFFFF:
            raise InvalidMessageError(f"queue_id must be a non-negative int, not {queue_id!r}")
        bh = self.store_host if born_host is None else parse_host(born_host)
        sh = self.store_host if store_host is None else parse_host(store_host)
        if born_timestamp is not None and (type(born_timestamp) is not int or not -(2**63) <= born_timestamp < 2**63):
            raise InvalidMessageError(f"born_timestamp {born_timestamp!r} is not a Java long")
        try:
            return self._appender.put_batch(  # type: ignore[no-any-return]
                tb, topic, queue_id, blist, plist, flags, sys_flag, born_timestamp, bh.address, bh.port,
                sh.address, sh.port,
            )
        except (TypeError, OverflowError) as e:
            raise InvalidMessageError(f"invalid batch: {e}") from None

    def seal(self) -> None:
        """Refuse appends from now on (StoreClosedError); an append under way finishes first. Reads
        go on. (A store's close seals its CommitLog before the last dispatch and flush.)"""
        self._appender.close()

    # -- reading ----------------------------------------------------------------------------------
    def _locate(self, offset: int, end_ok: bool = False) -> tuple[MappedFile, int]:
        """The file holding global ``offset`` and the position in it.

        Raises:
            OffsetOutOfRangeError: ``offset`` is outside the written data ``[min_offset, max_offset)``
                (``end_ok``: ``max_offset`` itself is in, where a tailing read finds nothing yet).
        """
        lo, hi = self.min_offset, self.max_offset
        if offset < lo or offset > hi or (offset == hi and not end_ok):
            raise OffsetOutOfRangeError(f"offset {offset} outside [{lo}, {hi}{']' if end_ok else ')'}")
        mf = self.queue.find(offset)
        return mf, offset - mf.file_from_offset

    def read(self, offset: int, verify_crc: bool = False) -> MessageExt:
        """The message whose record starts at global ``offset``.

        Raises:
            OffsetOutOfRangeError: no written record starts there (BLANK, beyond the end, deleted).
            CorruptionError: the bytes there are not a valid record (with path and file offset).
            ConfigError: ``offset`` is not an integer.
        """
        gate = self._gate  # entered here, not through ``gated`` (cheaper per call)
        gate.enter()
        try:
            return self._read(offset, verify_crc)
        finally:
            gate.leave()

    def _read(self, offset: int, verify_crc: bool) -> MessageExt:
        self._check_open()
        verify_crc = bool_arg(verify_crc, "verify_crc")
        mf, pos = self._locate(int_arg(offset, "offset"))
        try:
            raw = self._codec.decode_record(mf.mm, pos, mf.wrote_position, verify_crc)
        except CorruptionError as e:
            raise e.at(mf.path, pos) from None
        if raw is None:
            raise OffsetOutOfRangeError(f"no message at offset {offset} (BLANK or unwritten)")
        return MessageExt(offset, raw)

    def read_many(self, offsets: Sequence[int], verify_crc: bool = False) -> list[MessageExt]:
        """``[read(o, verify_crc) for o in offsets]``, decoding each run of offsets in one file in
        one kernel call (how a pull's messages are read). Raises as ``read`` does, for the first
        offset that fails; ConfigError when an offset is not an integer (checked only once the
        walk stumbles on one: a pull's offsets are ints, and this is its read path)."""
        gate = self._gate  # entered here, not through ``gated`` (cheaper per call)
        gate.enter()
        try:
            self._check_open()
            verify_crc = bool_arg(verify_crc, "verify_crc")
            if type(offsets) is not list and (isinstance(offsets, (str, bytes, bytearray, Mapping))
                                              or not isinstance(offsets, Sequence)):
                raise ConfigError(f"offsets must be a sequence of integers, not {type(offsets).__name__}")
            return self._read_many(offsets, verify_crc)
        except TypeError:
            for o in offsets:
                int_arg(o, "offset")
            raise
        finally:
            gate.leave()

    def _read_many(self, offsets: Sequence[int], verify_crc: bool) -> list[MessageExt]:
        out: list[MessageExt] = []
        lo, hi = self.min_offset, self.max_offset
        i, n = 0, len(offsets)
        while i < n:
            offset = offsets[i]
            if offset < lo or offset >= hi:
                raise OffsetOutOfRangeError(f"offset {offset} outside [{lo}, {hi})")
            mf = self.queue.find(offset)
            base, end = mf.file_from_offset, mf.file_end_offset
            j = i + 1
            while j < n and base <= offsets[j] < end and lo <= offsets[j] < hi:
                j += 1
            positions = [o - base for o in offsets[i:j]]
            try:
                got, done = self._codec.decode_messages(mf.mm, base, positions, mf.wrote_position, verify_crc,
                                                        MessageExt)
            except CorruptionError as e:
                raise e.at(mf.path, e.position) from None
            out += got
            if done < j - i:
                raise OffsetOutOfRangeError(f"no message at offset {offsets[i + done]} (BLANK or unwritten)")
            i = j
        return out

    def iter_records(
        self, from_offset: int | None = None, verify_crc: bool = False
    ) -> Iterator[MessageExt | Blank | ScanStop]:
        """Every record and BLANK from ``from_offset`` (a record boundary) in physical order.

        Stops at the end of the data; if invalid bytes stop the walk, a ``ScanStop`` saying where
        and why is yielded last (a torn tail after a crash is reported, not decoded). Records are
        read a few hundred at a time inside the gate, never across a ``yield``: a close between
        two steps ends the walk with StoreClosedError.
        """
        self._check_open()
        offset: int | None = self.min_offset if from_offset is None else int_arg(from_offset, "from_offset")
        verify_crc = bool_arg(verify_crc, "verify_crc")
        while offset is not None:
            with self._gate:
                self._check_open()
                items, offset = self._records_step(offset, verify_crc, _ITER_STEP)
            yield from items

    def _records_step(self, offset: int, verify_crc: bool,
                      most: int) -> tuple[list[MessageExt | Blank | ScanStop], int | None]:
        """Up to ``most`` items of ``iter_records`` from ``offset``, and the offset the walk goes on
        from (None: it ended)."""
        out: list[MessageExt | Blank | ScanStop] = []
        decode = self._codec.decode_record
        peek = self._codec.peek_record
        for mf in self.queue:
            if mf.file_end_offset <= offset:
                continue
            pos = max(0, offset - mf.file_from_offset)
            limit = mf.wrote_position
            while pos < limit:
                if len(out) >= most:
                    return out, mf.file_from_offset + pos
                status, size = peek(mf.mm, pos, limit)
                if status == L.ST_BLANK:
                    out.append(Blank(mf.file_from_offset + pos, size, mf.file_end_offset))
                    break
                if status == L.ST_END:
                    return out, None
                try:
                    raw = decode(mf.mm, pos, limit, verify_crc)
                except CorruptionError as e:
                    st = next((s for cls, s in _SCAN_STATUS if isinstance(e, cls)), L.ST_BAD_SIZE)
                    out.append(ScanStop(mf.file_from_offset + pos, st, mf.path))
                    return out, None
                assert raw is not None
                out.append(MessageExt(mf.file_from_offset + pos, raw))
                pos += raw[0]
            else:
                if limit < mf.file_size:
                    return out, None
            offset = mf.file_end_offset
        return out, None

    @gated
    def read_batch(self, offset: int, max_records: int = 1024, verify_crc: bool = False) -> RecordBatch:
        """Decode up to ``max_records`` consecutive records from ``offset`` into columns.

        Stays within one file; an empty batch with ``next_offset`` at the next file means a BLANK
        was crossed. The buffer is copied once (the batch stays valid after the store closes).

        Raises:
            ConfigError: ``offset`` is not an int, or ``max_records`` not an int >= 1.
            OffsetOutOfRangeError: ``offset`` is outside ``[min_offset, max_offset]`` (at
                ``max_offset`` the batch is empty).
        """
        self._check_open()
        offset, max_records = int_arg(offset, "offset"), int_arg(max_records, "max_records")
        verify_crc = bool_arg(verify_crc, "verify_crc")
        if max_records < 1:
            raise ConfigError(f"max_records must be >= 1, not {max_records}")
        mf, pos = self._locate(offset, end_ok=True)
        # columns for no more records than the written bytes can hold (any max_records is accepted)
        out = column_buffer(min(max_records, max(0, mf.wrote_position - pos) // L.MIN_RECORD_SIZE + 1))
        count, end, status = self._codec.decode_batch(mf.mm, pos, mf.wrote_position, out, verify_crc)
        data = bytes(mf.mm[pos:end]) if count else b""
        cols = out if count == out.shape[1] else out[:, :count].copy()  # a full batch is not copied again
        if pos:
            for row in _POSITION_ROWS:  # in place, row by row (fancy indexing made a temporary)
                cols[row] -= pos
        next_offset = mf.file_from_offset + end
        if status == L.ST_BLANK:
            next_offset = mf.file_end_offset
        elif status < 0:
            raise_status(self._codec, status, mf.path, end)
        return RecordBatch(data, cols, mf.file_from_offset + pos, next_offset, self._codec)

    # -- maintenance ------------------------------------------------------------------------------
    @property
    def flushed_offset(self) -> int:
        """Everything below this global offset is durable."""
        last = self.queue.last()
        own = last.file_from_offset + last.flushed_position if last else 0
        ext = self.external_durable
        return own if ext is None else max(own, int(ext.durable_offset))

    @gated
    def flush(self) -> int:
        """Make every appended byte durable; returns the flushed offset."""
        return self._flush()

    def _flush(self) -> int:
        """``flush`` outside the gate: for the owner's flush services and its own close."""
        self._check_open()
        return self.queue.flush()

    def close(self) -> None:
        """Flush (unless read-only), unmap and close every file. Idempotent. Reads and appends under
        way finish first; later ones raise StoreClosedError."""
        if self._closed:
            return
        self._gate.seal()
        self._gate.wait_idle()
        self.roller.close()
        self._appender.close()
        self._closed = True
        if not self.read_only:
            self.queue.flush()
        self.queue.close()

    def __enter__(self) -> CommitLog:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


_POSITION_ROWS = (L.C_POSITION, L.C_BORN_HOST_POS, L.C_STORE_HOST_POS, L.C_BODY_POS, L.C_TOPIC_POS,
                  L.C_PROPERTIES_POS)


def raise_status(codec: Any, status: int, path: str, position: int) -> None:
    """Raise the CorruptionError subclass the codec kernel maps ``status`` to, located in ``path``."""
    try:
        codec.raise_for_status(status, position)
    except CorruptionError as e:
        raise e.at(path, position) from None


def column_buffer(capacity: int) -> np.ndarray:
    """An uninitialised ``(NCOLUMNS, capacity)`` int64 array for ``decode_batch`` (``capacity`` at
    least 1). From 512 columns on, rows are padded to start 64 bytes past a multiple of 4 KiB apart:
    the decoder writes a value to every row per record, and rows a power of two apart (8192 records:
    64 KiB) all map to the same L1 cache sets, which more than doubled its time here (79 against 34 ns
    per record). Each row stays contiguous; the rows are not adjacent."""
    cap = max(1, capacity)
    padded = cap if cap < 512 else cap + (8 - cap) % 512
    return np.empty((L.NCOLUMNS, padded), dtype=np.int64)[:, :cap]


class RecordBatch:
    """Columnar records: an int64 column per header field plus one bytes buffer (zero per-field objects).

    ``column(name)`` gives a numpy view; ``topics()``, ``bodies()``, ``properties_strings()`` build
    Python objects only on request. Positions inside are relative to ``data``.
    """

    __slots__ = ("data", "columns", "start_offset", "next_offset", "_codec")

    def __init__(self, data: bytes, columns: np.ndarray, start_offset: int, next_offset: int,
                 codec: Any = None) -> None:
        self.data = data
        self.columns = columns
        self._codec = codec if codec is not None else _impl.codec
        self.start_offset = start_offset
        self.next_offset = next_offset

    def __len__(self) -> int:
        return int(self.columns.shape[1])

    def column(self, name: str) -> np.ndarray:
        return self.columns[L.COLUMNS.index(name)]  # type: ignore[no-any-return]

    @property
    def physical_positions(self) -> np.ndarray:
        """Global CommitLog offsets of the records."""
        return self.columns[L.C_POSITION] + self.start_offset  # type: ignore[no-any-return]

    def _slices(self, pos_col: int, len_col: int) -> list[bytes]:
        return self._codec.slices(self.data, self.columns[pos_col], self.columns[len_col])  # type: ignore[no-any-return]

    def bodies(self) -> list[bytes]:
        return self._slices(L.C_BODY_POS, L.C_BODY_LEN)

    def topics(self) -> list[str]:
        cache: dict[bytes, str] = {}
        out = []
        for b in self._slices(L.C_TOPIC_POS, L.C_TOPIC_LEN):
            s = cache.get(b)
            if s is None:
                s = cache[b] = b.decode("utf-8", "replace")
            out.append(s)
        return out

    def properties_strings(self) -> list[str]:
        return [b.decode("utf-8", "replace") for b in self._slices(L.C_PROPERTIES_POS, L.C_PROPERTIES_LEN)]
