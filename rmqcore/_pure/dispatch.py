"""Dispatch kernel (ReputMessageService's per-record work), pure-Python twin of ``rmqcore._native.dispatch``.

One call walks a run of CommitLog records like ``codec.decode_batch`` and, per record, also computes
what the ConsumeQueue and IndexFile dispatchers need (CommitLog.checkMessageAndReturnSize's
DispatchRequest; shared/spec/rocketmq-store.md sections 1.5, 3.3, 4.2, 4.3 and 9):

- ``disp[D_TAGS_CODE, i]``: Java ``String.hashCode()`` of the TAGS property, sign-extended; 0 without
  one. For ``SCHEDULE_TOPIC_XXXX`` (flag DF_SCHEDULE) the caller replaces it with the delivery time.
- ``disp[D_FLAGS, i]``: DF_SCHEDULE; DF_BAD_UTF8 when the topic or the properties are not valid
  UTF-8 (their values are then hashed as ``bytes.decode("utf-8", "replace")`` reads them).
- ``disp[D_KEYS_START, i]``, ``disp[D_KEYS_COUNT, i]``: where the record's key hashes are in
  ``keys_out``: IndexService hashes of ``topic + "#" + key`` for UNIQ_KEY, then each non-empty token
  of KEYS split on ``" "`` (duplicates kept: RocketMQ indexes them twice).

Properties are read as MessageDecoder.string2messageProperties reads them: segments split on 0x02,
``name 0x01 value`` with both parts non-empty, later duplicates win. The twin works on the raw
bytes like the C kernel (the separators are ASCII, so this is the same as parsing the decoded
string) and decodes values only to hash them.
"""

from __future__ import annotations

import select
import struct
import threading
import time
from operator import index as _index
from typing import Any

import numpy as np

from ..kernel_results import DispatchRun, dispatcher_busy
from ..layout import (
    CQ_UNIT_FIELDS, CQ_UNIT_SIZE, C_POSITION, C_PROPERTIES_LEN, C_PROPERTIES_POS, C_QUEUE_ID, C_QUEUE_OFFSET,
    C_SIZE, C_STORE_TIMESTAMP, C_SYS_FLAG, C_TOPIC_LEN, C_TOPIC_POS, D_FLAGS, D_KEYS_COUNT, D_KEYS_START,
    D_TAGS_CODE, DF_BAD_UTF8, DF_SCHEDULE, DISPATCH_ROWS, HINT_CAPACITY, HINT_FIELDS, MIN_RECORD_SIZE,
    NCOLUMNS, SELECT_FOUND, SELECT_NO_MATCH, SELECT_REMOVING, SPECIAL_FLAGS, SPECIAL_KEYS, SPECIAL_QUEUE_POS,
    ST_END, ST_MSG, STOP_INDEX, STOP_NONE, STOP_QUEUE, STOP_SEG, STOP_SPECIAL,
)
from ..wire import SCHEDULE_TOPIC
from . import codec as _codec
from . import notify as _notify
from ._dispatch_hints import dispatch_hinted
from .hashing import index_key_hash, java_string_hash

__all__ = [
    "dispatch_batch", "sparse_points", "select_units", "SELECT_NO_MATCH", "SELECT_FOUND", "SELECT_REMOVING",
    "Dispatcher", "STOP_NONE", "STOP_QUEUE", "STOP_SPECIAL", "STOP_INDEX", "STOP_SEG", "DISPATCH_ROWS",
    "D_TAGS_CODE", "D_FLAGS", "D_KEYS_START", "D_KEYS_COUNT", "DF_SCHEDULE", "DF_BAD_UTF8",
]

_SCHEDULE_TOPIC = SCHEDULE_TOPIC.encode("ascii")


def _array_shape(a: Any, ndim: int, name: str, writable: bool = True, contiguous: bool = False) -> tuple[int, ...]:
    """``a``'s shape if it is a native int64 buffer with ``ndim`` dimensions and strides that are
    multiples of 8 bytes, writable and C-contiguous when asked; ValueError otherwise."""
    try:
        m = memoryview(a)
    except (TypeError, BufferError):
        raise ValueError(f"{name} must be a {'writable ' if writable else ''}{ndim}-D int64 array, "
                         f"not {type(a).__name__}") from None
    try:
        if (
            m.ndim != ndim
            or m.itemsize != 8
            or m.format not in ("l", "q")
            or (writable and m.readonly)
            or (contiguous and not m.c_contiguous)
            or any(s % 8 for s in m.strides or ())
        ):
            raise ValueError(f"{name} must be a {'writable ' if writable else ''}{ndim}-D int64 array"
                             f"{' (C-contiguous)' if contiguous else ''}")
        return m.shape or ()
    finally:
        m.release()


def _text(b: bytes) -> str:
    return b.decode("utf-8", "replace")


def _parse(props: bytes) -> tuple[bytes | None, bytes | None, bytes | None]:
    """The raw values of the last valid TAGS, KEYS and UNIQ_KEY segments (None when absent)."""
    tags = keys = uniq = None
    for seg in props.split(b"\x02"):
        n = len(seg)
        if n > 5 and seg[4] == 1:
            if seg.startswith(b"TAGS"):
                tags = seg[5:]
            elif seg.startswith(b"KEYS"):
                keys = seg[5:]
        elif n > 9 and seg[8] == 1 and seg.startswith(b"UNIQ_KEY"):
            uniq = seg[9:]
    return tags, keys, uniq


def _valid_utf8(b: bytes) -> bool:
    if b.isascii():
        return True
    try:
        b.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def dispatch_batch(
    buf: Any, pos: int, limit: int, cols: Any, disp: Any, keys_out: Any, verify_crc: bool
) -> tuple[int, int, int, int]:
    """Walk records from ``pos`` as ``codec.decode_batch`` does and compute their dispatch data.

    ``cols``: int64 ``(NCOLUMNS, cap)``, filled exactly as decode_batch fills it. ``disp``: int64
    ``(4, >= cap)``; per record i: ``disp[0, i]`` tagsCode (Java hashCode of TAGS, 0 without),
    ``disp[1, i]`` flags (DF_SCHEDULE: topic is SCHEDULE_TOPIC_XXXX; DF_BAD_UTF8: topic or properties
    are not valid UTF-8, hashed as decoded with U+FFFD replacement), ``disp[2, i]`` index in
    ``keys_out`` of its first key hash, ``disp[3, i]`` how many. ``keys_out``: int64 1-D; the
    IndexService hashes of ``topic#key`` for UNIQ_KEY, then each non-empty KEYS token.

    Returns ``(count, end_pos, status, nkeys)``; status as decode_batch (ST_MSG also when a record's
    keys do not fit in ``keys_out``: the walk stops before it). Raises ValueError for a bad range or
    arrays, and when the first record's keys alone exceed ``keys_out``.
    """
    n = len(buf)
    p = _index(pos)
    lim = _index(limit)
    if p < 0 or lim < p or lim > n:
        raise ValueError(f"range [{pos}, {limit}) outside a buffer of {n} bytes")
    cshape = _array_shape(cols, 2, "cols")
    if cshape[0] != NCOLUMNS:
        raise ValueError(f"cols must have {NCOLUMNS} rows, not {cshape[0]}")
    dshape = _array_shape(disp, 2, "disp")
    if dshape[0] != DISPATCH_ROWS or dshape[1] < cshape[1]:
        raise ValueError(
            f"disp must have {DISPATCH_ROWS} rows and at least {cshape[1]} columns, not {dshape}"
        )
    kshape = _array_shape(keys_out, 1, "keys_out")
    cap = cshape[1]
    kcap = kshape[0]
    if cap == 0:
        return 0, p, ST_MSG, 0

    mv = memoryview(buf)
    try:  # released on every exit: an exported mmap could not be closed while a traceback holds it
        return _walk(buf, mv, p, lim, cap, kcap, verify_crc, cols, disp, keys_out)
    finally:
        mv.release()


def _walk(
    buf: Any, mv: memoryview, p: int, lim: int, cap: int, kcap: int, verify_crc: bool, cols: Any, disp: Any,
    keys_out: Any,
) -> tuple[int, int, int, int]:  # fmt: skip
    cols_a = np.asarray(cols)
    disp_a = np.asarray(disp)
    keys_a = np.asarray(keys_out)
    scratch = np.empty((NCOLUMNS, min(cap, _CHUNK)), dtype=np.int64)
    count = nk = 0
    status = ST_MSG
    while count < cap:
        m = min(cap - count, _CHUNK)
        got, end, st = _codec.decode_batch(buf, p, lim, scratch[:, :m], verify_crc)
        rows: list[tuple[int, int, int, int]] = []
        hashes: list[int] = []
        stop = -1
        for i, rec in enumerate(scratch[:, :got].T.tolist()):
            tp, pp = rec[C_TOPIC_POS], rec[C_PROPERTIES_POS]
            topic_b = bytes(mv[tp : tp + rec[C_TOPIC_LEN]])
            props_b = bytes(mv[pp : pp + rec[C_PROPERTIES_LEN]])
            tags, keys, uniq = _parse(props_b)
            tokens = [t for t in keys.split(b" ") if t] if keys is not None else []
            if uniq is not None:
                tokens.insert(0, uniq)
            if nk + len(tokens) > kcap:
                if count + i == 0:
                    raise ValueError(
                        f"keys_out too small: the record at {rec[C_POSITION]} has {len(tokens)} keys, "
                        f"keys_out holds {kcap}"
                    )
                stop = i
                break
            flags = DF_SCHEDULE if topic_b == _SCHEDULE_TOPIC else 0
            if not (_valid_utf8(topic_b) and _valid_utf8(props_b)):
                flags |= DF_BAD_UTF8
            if tokens:
                prefix = _text(topic_b) + "#"
                hashes += [index_key_hash(prefix + _text(t)) for t in tokens]
            rows.append((java_string_hash(_text(tags)) if tags is not None else 0, flags, nk, len(tokens)))
            nk += len(tokens)
        j = len(rows)
        if j:  # only the accepted records are written
            cols_a[:, count : count + j] = scratch[:, :j]
            disp_a[:, count : count + j] = np.array(rows, dtype=np.int64).T
            if hashes:
                keys_a[nk - len(hashes) : nk] = hashes
            count += j
        if stop >= 0:
            return count, int(scratch[C_POSITION, stop]), ST_MSG, nk
        p = end
        status = st
        if st != ST_MSG:
            break
    return count, p, status, nk


def sparse_points(sizes: Any, since: int, interval: int, out: Any) -> tuple[int, int]:
    """Kafka's LogSegment rule over a run of records: an index entry goes before record i when the
    bytes appended since the last entry exceed ``interval`` (then the count restarts at 0); record
    sizes accumulate after the decision. Writes the entry record indexes into ``out`` and returns
    ``(count, since)`` with the byte count after the last record."""
    n = len(sizes)
    if len(out) < n:
        raise ValueError(f"out holds {len(out)} items, {n} needed")
    c = 0
    for i, size in enumerate(sizes.tolist() if hasattr(sizes, "tolist") else sizes):
        if since > interval:
            out[c] = i
            c += 1
            since = 0
        since += size
    return c, since


# -- Dispatcher: ReputMessageService's whole per-record work -------------------------------------

_CHUNK = 4000
_HINT_CAP_MIN = 16  # records a batch takes from hints right after a stop
_STRUCT_UNIT = struct.Struct(">qiq")


_CQ_UNIT = np.dtype(CQ_UNIT_FIELDS)


def select_units(buf: Any, pos: int, n: int, offset: int, max_msgs: int, max_bytes: int, codes: Any,
                 cl_min: int, max_phys: int, mem_limit: int, disk_bytes: int, disk_count: int,
                 mem_bytes: int, mem_count: int) -> tuple[int, int, int, bytes]:
    """The unit loop of DefaultMessageStore.getMessage over the ``n`` consume-queue units at
    ``buf[pos:]`` (20 bytes each: offset, size, tags code, big-endian), the first one at queue
    offset ``offset``. A unit is taken unless its tags code fails the filter ``codes`` (a collection of
    tag hash codes, or None for every message; ext addresses, codes below -2**31, always pass) or
    its record is below ``cl_min`` (removed); the loop stops, once something is taken, at
    ``max_msgs`` messages, or before the bytes would pass ``max_bytes`` or the transfer limits
    (``disk_*`` for units more than ``mem_limit`` bytes behind ``max_phys``, else ``mem_*``).

    Returns ``(status, consumed, count, units)``: SELECT_FOUND when a message was taken, else
    SELECT_REMOVING when a removed unit came first, else SELECT_NO_MATCH; ``consumed`` units were
    looked at (the next pull starts at ``offset + consumed``); ``count`` were taken, and ``units``
    holds them as native int64 rows of ``count`` each: physical offsets, queue offsets,
    sizes. (Bytes, not lists: lists would make a pull of thousands spend most of its time
    making ints nobody reads; ``GetResult`` makes its lists when asked.)"""
    if pos < 0 or n < 0 or pos + n * CQ_UNIT_SIZE > len(memoryview(buf)):
        raise ValueError(f"{n} units at {pos} outside a buffer of {len(memoryview(buf))} bytes")
    units = np.frombuffer(bytes(memoryview(buf)[pos : pos + n * CQ_UNIT_SIZE]), dtype=_CQ_UNIT)
    status = SELECT_NO_MATCH
    phys: list[int] = []
    qoffs: list[int] = []
    sizes: list[int] = []
    total = 0
    i = 0
    # ints a chunk at a time: the loop usually stops after max_msgs of the units
    chunk = max_msgs + 1 if codes is None else 64
    at = have = 0
    offs: list[int] = []
    szs: list[int] = []
    tags: list[int] = []
    while i < n:
        if i == have:
            at, have = have, min(n, have + max(chunk, 1))
            chunk *= 2
            offs = units["offset"][at:have].tolist()
            szs = units["size"][at:have].tolist()
            tags = units["tags"][at:have].tolist()
        off, size, code = offs[i - at], szs[i - at], tags[i - at]
        count = len(phys)
        if total and count:
            if max_msgs <= count:
                break
            lim_b, lim_c = (disk_bytes, disk_count) if max_phys - off > mem_limit else (mem_bytes, mem_count)
            if total + size > min(lim_b, max_bytes) or count > lim_c - 1:
                break
        i += 1
        if codes is not None and code >= -(2**31) and (((code & 0xFFFFFFFF) ^ 0x80000000) - 0x80000000) not in codes:
            continue
        if off < cl_min:
            if not total:
                status = SELECT_REMOVING
            continue
        phys.append(off)
        qoffs.append(offset + i - 1)
        sizes.append(size)
        total += size
        status = SELECT_FOUND
    return status, i, len(phys), np.array(phys + qoffs + sizes, dtype=np.int64).tobytes()


class Dispatcher:
    """Consume-queue, index and segment-index writes of dispatch for a run of CommitLog records.

    The store binds each queue's writable consume-queue file (``bind_queue``) and the last index
    file (``bind_index``), then calls ``run`` over a CommitLog file's bytes. Per record, in order:

    1. records of the delay topic or with invalid UTF-8 stop the run (STOP_SPECIAL): their tagsCode
       needs the general path;
    2. NOT_TYPE and COMMIT records get a unit in their queue's bound file, unless the queue already
       has them (``phys + size <= max_phys``, or its queue offset is below the file's position);
       an unbound or full queue stops the run (STOP_QUEUE), and so does a queue offset past the
       position (STOP_SPECIAL, RocketMQ writes such a unit where the file is);
    3. with ``index_on``, a full or unbound index file stops the run before the record
       (getAndCreateLastIndexFile, STOP_INDEX); records at or past the file's endPhyOffset that are
       not ROLLBACK get their key hashes put (a full file mid-record stops at that key);
    4. records at or past ``seg[1]`` (the segment index's end) advance the segment-index state
       ``seg`` = [count, end, bytes_since, max_ts, ordinal_of_max_ts, monotonic, floor_ts,
       interval, last_time_entry_ts, enabled]; where an entry is due (bytes since the last one >
       interval) ``seg_out[:, i]`` gets (ordinal, position, max_ts, ordinal_of_max_ts), the last
       two -1 when the time index would not grow.

    ``first_key`` applies to the record at ``pos`` only (resuming after STOP_INDEX). With ``live``
    (the appender's int64[1] global end of complete records), the run goes on past ``limit`` to
    what the writer has completed since, up to ``live_cap`` (a position in this file). Returns a
    ``DispatchRun`` (rmqcore.kernel_results): records fully applied, where they end (where to
    resume), the walk's status, the stop reason (layout.STOP_*) and what it needs, the largest store
    time applied (-1 without) and the segment entries written.
    """

    def __init__(self) -> None:
        self._slots: dict[tuple[bytes, int], list[Any]] = {}
        self._order: list[tuple[bytes, int]] = []
        self._touched: list[tuple[bytes, int]] = []
        self._seen: dict[tuple[bytes, int], int] = {}  # wrote as moved() last reported it
        self._idx: Any = None
        self._geom = (0, 0)
        self._gil_req: Any = None
        self._wanted: Any = None
        self._nap = (0, 0)
        self._gil_seq = 0
        self._ring: Any = None
        self._head: Any = None
        self._hint_at = 0  # the next hint number to look at
        self._hint_cap = _CHUNK  # records a batch takes from hints: small after a stop, doubling back
        self._n_hinted = 0
        self._notify: Any = None  # the notify buffer (set_notify)
        self._wake: Any = None  # the writer's wake slot (set_wake)
        self._pend: list[list[Any]] = []  # slots with units not yet announced
        # publish-on-put (arm): [file_from, pos, index_on, seg, seg_out, nseg, max_ts, stop, arg, declined]
        self._pub: list[Any] | None = None
        self._pub_lock = threading.Lock()  # publish, arm, disarm one at a time (this twin lets the GIL go)
        # a run and a nap in progress: nothing else may change what they use meanwhile (_idle)
        self._running = False
        self._napping = False

    def _idle(self, nap_too: bool) -> None:
        """Raise unless no run (nor, with ``nap_too``, a nap) is in progress on another thread."""
        if self._running:
            raise dispatcher_busy("run")
        if nap_too and self._napping:
            raise dispatcher_busy("nap")

    def set_signals(self, request: Any, wanted: Any) -> None:
        """Share two int64[1] words with the threads around a live run (either may be None):
        ``request`` with the writers (``Appender.set_gil_request``): a live run writes 0 there as it
        starts and a new nonzero number as it ends, left out for the work between runs until the
        next run or the caller clears it; a nap ends with 0 (this twin never lets the GIL go in
        either, but its writers see the same words as the native twin's), and
        ``wanted``, nonzero while another thread waits to dispatch or for the reput thread to
        stop: a live run that has caught up with the writer naps (``live_nap``) for more, and
        returns instead when it is nonzero; ``nap`` does not sleep then."""
        for name, a, writable in (("request", request, True), ("wanted", wanted, False)):
            if a is not None:
                arr = np.asarray(a)
                if arr.dtype.itemsize != 8 or arr.size < 1 or (writable and not arr.flags.writeable):
                    raise ValueError(f"{name} must be an aligned{', writable' if writable else ''} int64[1]")
        self._idle(True)
        self._gil_req, self._wanted = request, wanted

    @property
    def hinted(self) -> int:
        """Records dispatched from hints, in all."""
        return self._n_hinted

    def set_hints(self, ring: Any, head: Any) -> None:
        """Read the dispatch hints of the writer's ``Appender`` (its ``hints`` ring and ``hint_head``
        word; None, None: none). A run without CRC checks takes each record it has a hint for from
        the hint, checked against the record's header, instead of parsing it (csrc/rmq_hints.h)."""
        if (ring is None) != (head is None):
            raise ValueError("ring and head go together")
        if ring is not None:
            if _array_shape(ring, 2, "ring", writable=False, contiguous=True) != (HINT_CAPACITY, HINT_FIELDS):
                raise ValueError(f"ring must be int64[{HINT_CAPACITY}, {HINT_FIELDS}]")
            if _array_shape(head, 1, "head", writable=False, contiguous=True)[0] < 1:
                raise ValueError("head must be an aligned int64[1]")
        self._idle(False)
        self._ring, self._head, self._hint_at = ring, head, 0

    def live_nap(self, nap_ns: int, max_idle_ns: int) -> None:
        """Naps of ``nap_ns`` for at most ``max_idle_ns`` in a row while a live run waits for the
        writer (0: return at once)."""
        if nap_ns < 0 or max_idle_ns < 0:
            raise ValueError("nap times must be >= 0")
        self._nap = (int(nap_ns), int(max_idle_ns) if nap_ns > 0 else 0)

    def set_wake(self, wake: Any) -> None:
        """Nap on ``wake`` (uint32[2], the wake slot the writer's ``Appender.set_wake`` pokes; None:
        plain sleeps): ``nap`` with ``live`` sleeps until the writer publishes more (or its time
        passes). (A live run of this twin naps plainly: a latency difference, not one of results.)"""
        if wake is not None:
            a = np.asarray(wake)
            if a.dtype != np.uint32 or a.shape != (2,) or not a.flags.writeable or not a.flags.c_contiguous:
                raise ValueError("wake must be a writable uint32[2]")
        self._idle(True)
        self._wake = wake

    def nap(self, seconds: float, wake_fd: int = -1, live: Any = None, seen: int = -1) -> None:
        """Sleep (the reput thread between runs) for ``seconds``, or until ``wake_fd`` (the read
        end of a pipe; -1: none) is readable, or not at all while ``wanted`` is set; it ends with
        no GIL request out (see ``set_signals``). With a wake slot (``set_wake``) and ``live`` (the
        appender's int64[1] end; ``seen``: where dispatch stands) it waits on the slot instead and
        ends as soon as the writer publishes past ``seen`` (the store's close pokes the slot too)."""
        if not seconds >= 0:
            raise ValueError(f"nap of {seconds} s")
        if self._napping:  # two naps would share the hand-off words (a run may go on meanwhile)
            raise dispatcher_busy("nap")
        self._napping = True
        try:
            self._nap_once(seconds, wake_fd, live, seen)
        finally:
            self._napping = False

    def _nap_once(self, seconds: float, wake_fd: int, live: Any, seen: int) -> None:
        w = self._wake
        if live is not None:
            _array_shape(live, 1, "live", writable=False, contiguous=True)
        if self._wanted is None or self._wanted[0] == 0:
            if w is not None and live is not None:
                e = _notify.seq(w, 0)
                w[1] = 1  # flagged before the look: a put after it pokes the slot
                if int(live[0]) == seen:
                    _notify.wait(w, 0, e, seconds, self._wanted, True)
            elif wake_fd >= 0:  # poll, as the native twin: select() refuses descriptors past FD_SETSIZE
                waiter = select.poll()
                waiter.register(wake_fd, select.POLLIN)
                waiter.poll(min(seconds * 1000.0, 2**31 - 1))
            else:
                time.sleep(min(seconds, 1e9))
        if self._gil_req is not None:  # holding the GIL: no request out
            self._gil_req[0] = 0

    def bind_queue(self, topic: bytes, queue_id: int, buffer: Any, file_from: int, wrote: int,
                   max_phys: int, notify_pos: int = -1) -> int:
        """Bind (or rebind) queue ``(topic, queue_id)`` to its writable file ``buffer`` (mapped at
        ``file_from``, written up to ``wrote``; units up to CommitLog offset ``max_phys`` are in),
        announcing its units at wake slot ``notify_pos`` of the notify buffer (-1: nowhere).
        ``buffer`` None unbinds it. Returns the slot number."""
        if notify_pos != -1 and (notify_pos < 0 or notify_pos % 8):
            raise ValueError(f"notify position {notify_pos} is not a wake slot")
        self._idle(False)
        key = (bytes(topic), int(queue_id))
        if key not in self._slots:
            self._slots[key] = [None, 0, 0, 0, 0, False, -1, False]
            self._order.append(key)
        sl = self._slots[key]
        sl[0] = None
        sl[6] = int(notify_pos)
        self._seen.pop(key, None)
        if buffer is not None:
            mv = memoryview(buffer)
            if mv.readonly:
                raise TypeError("a consume-queue buffer must be writable")
            if wrote < 0 or wrote > len(mv) or wrote % 20:
                raise ValueError(f"write position {wrote} does not fit a consume-queue file of {len(mv)} bytes")
            sl[:5] = [buffer, int(file_from), len(mv), int(wrote), int(max_phys)]
        return self._order.index(key)

    def set_notify(self, buffer: Any) -> None:
        """Announce units in ``buffer`` (the notify file's writable map; None: nowhere): after each
        run of records, the wake slot of every queue that got units is bumped (``notify.bump``)."""
        if buffer is not None and memoryview(buffer).readonly:
            raise TypeError("the notify buffer must be writable")
        if buffer is not None and np.frombuffer(buffer, dtype=np.uint8).ctypes.data % 8:
            raise ValueError("the notify buffer must be 8-aligned")  # as the native twin's 64-bit bumps need
        self._idle(False)
        self._notify = buffer

    def _announce(self) -> None:
        """Bump the wake slot of each queue that got units since the last call (after the units)."""
        nb = self._notify
        for sl in self._pend:
            sl[7] = False
            p = sl[6]
            if nb is not None and 0 <= p and p + 8 <= len(memoryview(nb)):
                _notify.bump(nb, p)
        self._pend = []

    def bind_index(self, buffer: Any, slot_count: int, max_entries: int) -> None:
        self._idle(False)
        self._idx = None
        if buffer is None:
            return
        if not (1 <= slot_count <= 0x7FFFFFFF and 1 <= max_entries <= 0x7FFFFFFF):
            raise ValueError(f"bad index geometry: {slot_count} slots, {max_entries} entries")
        if len(memoryview(buffer)) < 40 + 4 * slot_count + 20 * max_entries:
            raise ValueError("the index buffer is shorter than its geometry")
        self._idx, self._geom = buffer, (int(slot_count), int(max_entries))

    def release(self) -> None:
        self._idle(False)
        for sl in self._slots.values():
            sl[0] = None
        self._idx = None

    def touched(self) -> list[tuple[bytes, int, int, int]]:
        out = []
        for key in self._touched:
            sl = self._slots[key]
            sl[5] = False
            out.append((key[0], key[1], sl[3], sl[4]))
        self._touched = []
        return out

    def moved(self) -> list[tuple[bytes, int, int]]:
        """``[(topic, queue_id, wrote)]`` of the bound queues whose write position moved since the
        last call (or that were bound since), for warm-ahead."""
        out = []
        for key in self._order:
            sl = self._slots[key]
            if sl[0] is not None and self._seen.get(key) != sl[3]:
                self._seen[key] = sl[3]
                out.append((key[0], key[1], sl[3]))
        return out

    # -- publish-on-put -------------------------------------------------------------------------------
    def arm(self, file_from: int, pos: int, index_on: bool, seg: Any, seg_out: Any) -> None:
        """Let ``publish`` dispatch the records a writer appends from global offset ``pos`` on, in
        the CommitLog file at ``file_from``, as ``run`` would (``index_on``, segment-index state
        ``seg``, entries into ``seg_out`` from column 0), each as soon as it is appended: the writer's
        own thread publishes its units, with no run to wait for. The caller (the store's dispatch)
        owns everything ``run`` needs and hands it over until ``disarm``; it disarms before any run
        of its own and before it binds, unbinds or releases a file.

        Raises:
            ValueError: armed already, or ``seg``/``seg_out`` are not what ``run`` takes.
        """
        with self._pub_lock:
            if self._pub is not None:
                raise ValueError("the dispatcher is armed already (disarm first)")
            if pos < file_from:
                raise ValueError(f"position {pos} before the file at {file_from}")
            _array_shape(seg, 1, "seg", contiguous=True)
            _array_shape(seg_out, 2, "seg_out", contiguous=True)
            if len(seg) < 10 or seg_out.shape[0] < 4:
                raise ValueError("seg needs 10 fields and seg_out 4 rows")
            self._pub = [int(file_from), int(pos), bool(index_on), seg, seg_out, 0, -1, STOP_NONE, 0, False]

    def disarm(self) -> tuple[int, int, int, int, int] | None:
        """End ``arm``: None when not armed, else ``(pos, nseg, max_ts, stop, arg)``: the global
        offset the records before which are dispatched, the segment-index entries in ``seg_out``
        (from column 0), the largest store time published (-1: none), and the stop a declined
        publish met (``STOP_NONE`` when none) with its argument (``STOP_INDEX``: the key of the
        record at ``pos`` to resume from)."""
        with self._pub_lock:
            p, self._pub = self._pub, None
        if p is None:
            return None
        return p[1], p[5], p[6], p[7], p[8]

    @property
    def published(self) -> int:
        """Where the records before are dispatched, as far as publishes know (-1: not armed)."""
        p = self._pub
        return -1 if p is None else int(p[1])

    def publish(self, buf: Any, file_from: int, pos: int, end: int) -> int:
        """Dispatch the records a writer just appended at ``[pos, end)`` of ``buf`` (the CommitLog
        file at ``file_from``) as ``run`` would, announcing their units: 1 when done, 0 when they
        were dispatched before, -1 when not (not armed, another file, records before them not
        dispatched, or a stop: a queue or index file to bind, the general path, segment-index
        entries with no room; after a stop every publish says -1 until ``disarm``): then the store
        dispatches them (``run``). Runs on the writer's thread, under its lock."""
        with self._pub_lock:
            p = self._pub
            if p is None or p[9] or file_from != p[0]:
                return -1
            g = file_from + pos
            if g != p[1]:
                return 0 if file_from + end <= p[1] else -1
            self._idle(False)
            seg, seg_out = p[3], p[4]
            # room for every entry the records may make: one at most per record, and per interval bytes
            if seg[9] and p[5] + (end - pos) // max(int(seg[7]), MIN_RECORD_SIZE) + 1 > seg_out.shape[1]:
                p[7], p[8], p[9] = STOP_SEG, 0, True
                return -1
            r = self._run(buf, file_from, pos, end, False, p[2], 0, seg, seg_out, None, 0, p[5])
            p[5] = r.seg_entries
            p[6] = max(p[6], r.max_timestamp)
            p[1] = max(p[1], file_from + r.at)
            if r.stop != STOP_NONE or r.at < end:
                p[7], p[8], p[9] = r.stop, r.arg, True
                return -1
            return 1

    def publisher(self) -> Any:
        """What ``Appender.set_publisher`` calls after each append: here ``publish`` (the native twin
        gives a capsule of its C function)."""
        return self.publish

    def run(self, buf: Any, file_from: int, pos: int, limit: int, verify_crc: bool, index_on: bool,
            first_key: int, seg: Any, seg_out: Any, live: Any = None, live_cap: int = 0) -> tuple[int, ...]:
        self._idle(False)
        self._running = True
        try:
            return self._run(buf, file_from, pos, limit, verify_crc, index_on, first_key, seg, seg_out, live,
                             live_cap, 0)
        finally:
            self._running = False

    def _run(self, buf: Any, file_from: int, pos: int, limit: int, verify_crc: bool, index_on: bool,
             first_key: int, seg: Any, seg_out: Any, live: Any, live_cap: int, nseg0: int) -> DispatchRun:
        from . import indexfile as _ix

        n = len(memoryview(buf))
        _array_shape(seg, 1, "seg", contiguous=True)  # what the native twin exports (ValueError alike)
        _array_shape(seg_out, 2, "seg_out", contiguous=True)
        if live is not None:
            _array_shape(live, 1, "live", writable=False, contiguous=True)
        if pos < 0 or limit < pos or limit > n:
            raise ValueError(f"range [{pos}, {limit}) outside a buffer of {n} bytes")
        if live is not None and len(live) < 1:
            raise ValueError("live must hold one int64")
        if len(seg) < 10 or seg_out.shape[0] < 4:
            raise ValueError("seg needs 10 fields and seg_out 4 rows")
        cols = np.empty((NCOLUMNS, _CHUNK), dtype=np.int64)
        disp = np.empty((DISPATCH_ROWS, _CHUNK), dtype=np.int64)
        keys = np.empty(_CHUNK * 8, dtype=np.int64)
        s_count, s_end, s_since, s_max, s_omax, s_mono, s_floor, s_interval, s_last_t, seg_on = (
            int(x) for x in seg[:10])
        done, at, stop, args, max_ts, nseg, st = 0, pos, STOP_NONE, (0, 0, 0, 0), -1, nseg0, ST_MSG
        seg_cap = seg_out.shape[1]
        gr = self._gil_req if live is not None else None
        if gr is not None:
            gr[0] = 0
        idle = 0
        while stop == STOP_NONE:
            if at >= limit:
                if live is not None:  # follow the writer: records completed since the call began
                    v = min(int(live[0]) - file_from, n, live_cap)
                    if v > limit:
                        limit, idle = v, 0
                        continue
                    # caught up: nap for the writer unless someone waits to dispatch
                    if idle < self._nap[1] and limit < live_cap and (self._wanted is None or self._wanted[0] == 0):
                        time.sleep(self._nap[0] / 1e9)
                        idle += self._nap[0]
                        continue
                break
            cnt, parse_cap, hint_from, from_hints = 0, _CHUNK, self._hint_at, 0
            if self._ring is not None and not verify_crc:  # records the writer left hints for need no parsing
                # a stop looks again from the first record's hint (hint_from), not the hints before it
                cnt, end_pos, _nk, next_hint, hint_from, self._hint_at = dispatch_hinted(
                    self._ring, int(self._head[0]), self._hint_at, buf, file_from, at, limit, cols, disp,
                    keys, self._hint_cap)
                if cnt > 0:
                    st = ST_MSG
                    from_hints = 1
                elif next_hint >= 0:
                    # hints resume at next_hint: parse up to about there (records of 512 bytes or more)
                    parse_cap = min(_CHUNK, max(1, (next_hint - file_from - at) // 512))
            try:
                if cnt == 0:
                    cnt, end_pos, st, _nk = dispatch_batch(buf, at, limit, cols[:, :parse_cap], disp[:, :parse_cap],
                                                           keys, verify_crc)
            except ValueError:
                stop, args, st = STOP_SPECIAL, (SPECIAL_KEYS, 0, 0, 0), ST_MSG
                break
            for j in range(cnt):
                rpos, size = int(cols[C_POSITION, j]), int(cols[C_SIZE, j])
                phys, tran = file_from + rpos, int(cols[C_SYS_FLAG, j]) & 0xC
                ts = int(cols[C_STORE_TIMESTAMP, j])
                if int(disp[D_FLAGS, j]) & 3:
                    stop, args = STOP_SPECIAL, (SPECIAL_FLAGS, 0, 0, 0)
                    break
                tags = int(disp[D_TAGS_CODE, j])
                if tran in (0, 0x8):
                    tp, tl, qid = int(cols[C_TOPIC_POS, j]), int(cols[C_TOPIC_LEN, j]), int(cols[C_QUEUE_ID, j])
                    qoff = int(cols[C_QUEUE_OFFSET, j])
                    sl = self._slots.get((bytes(memoryview(buf)[tp : tp + tl]), qid))
                    if sl is None or sl[0] is None:
                        stop, args = STOP_QUEUE, (tp, tl, qid, qoff)
                        break
                    if phys + size > sl[4]:
                        if sl[3] >= sl[2]:
                            stop, args = STOP_QUEUE, (tp, tl, qid, qoff)
                            break
                        expected, current = qoff * 20, sl[1] + sl[3]
                        if expected == current:
                            # its size last: another process that sees it sees the whole unit
                            _notify.publish_units(sl[0], sl[3], _STRUCT_UNIT.pack(phys, size, tags))
                            sl[3] += 20
                            sl[4] = phys + size
                            if not sl[5]:
                                sl[5] = True
                                self._touched.append((bytes(memoryview(buf)[tp : tp + tl]), qid))
                            if not sl[7] and sl[6] >= 0:
                                sl[7] = True
                                self._pend.append(sl)
                        elif expected == 0 or expected > current:
                            stop, args = STOP_SPECIAL, (SPECIAL_QUEUE_POS, 0, 0, 0)
                            break
                if index_on:
                    if self._idx is None:
                        stop, args = STOP_INDEX, (0, 0, 0, 0)
                        break
                    k0 = first_key if rpos == pos else 0
                    ic = max(struct.unpack_from(">i", self._idx, 36)[0], 1)
                    if ic >= self._geom[1]:
                        stop, args = STOP_INDEX, (k0, 0, 0, 0)
                        break
                    if tran != 0xC and phys >= struct.unpack_from(">q", self._idx, 24)[0]:
                        start, kn = int(disp[D_KEYS_START, j]), int(disp[D_KEYS_COUNT, j])
                        full = False
                        for k in range(k0, kn):
                            if not _ix.index_put(self._idx, self._geom[0], self._geom[1], int(keys[start + k]),
                                                    phys, ts):
                                stop, args, full = STOP_INDEX, (k, 0, 0, 0), True
                                break
                        if full:
                            break
                if seg_on and rpos >= s_end:
                    if nseg == seg_cap:
                        stop = STOP_SEG
                        break
                    if ts < s_max or ts < s_floor:
                        s_mono = 0
                    if ts > s_max:
                        s_max, s_omax = ts, s_count
                    if s_since > s_interval:
                        seg_out[0, nseg], seg_out[1, nseg] = s_count, rpos
                        if s_max > s_last_t:
                            seg_out[2, nseg], seg_out[3, nseg] = s_max, s_omax
                            s_last_t = s_max
                        else:
                            seg_out[2, nseg] = seg_out[3, nseg] = -1
                        nseg += 1
                        s_since = 0
                    s_since += size
                    s_count += 1
                    s_end = rpos + size
                max_ts = max(max_ts, ts)
                done += 1
                self._n_hinted += from_hints
                at = rpos + size
            if self._pend:  # readers waiting on these queues (any process) may go on
                self._announce()
            if stop:
                self._hint_at = hint_from  # records from the stop on are not done: look again
                self._hint_cap = _HINT_CAP_MIN  # and take few from hints next time (see the native twin)
                break
            if from_hints and self._hint_cap < _CHUNK:
                self._hint_cap = min(_CHUNK, 2 * self._hint_cap)
            at = end_pos
            if st != ST_MSG and not (st == ST_END and live is not None and at >= limit):
                break
        seg[:9] = [s_count, s_end, s_since, s_max, s_omax, s_mono, s_floor, s_interval, s_last_t]
        if gr is not None:  # a request for the work between runs (see set_signals)
            self._gil_seq += 1
            gr[0] = self._gil_seq
        if stop == STOP_NONE and st == ST_MSG and at >= limit:
            st = ST_END
        return DispatchRun(done, at, st, stop, *args, max_ts, nseg)
