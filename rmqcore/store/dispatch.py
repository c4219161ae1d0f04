"""Dispatch (RocketMQ's doDispatch with CommitLogDispatcherBuildConsumeQueue and
CommitLogDispatcherBuildIndex): CommitLog records into consume-queue units, index entries and
segment-index entries.

``Dispatch`` owns where dispatch is (``reput_from_offset``), the native ``Dispatcher`` and the files
bound to it (each queue's writable file, pinned in the map pool; the last index file), the dispatch
lock and the GIL hand-off words the reput thread (``reput.ReputService``) shares with the writers.
Under ``dispatch="put"`` each put publishes its own record (``start_publishing``): between runs
the Dispatcher is *armed* and the writer's append calls it, so the record's unit is written and its
waiters (other processes' followers) woken in the put itself; the next run (a read, a put the
Dispatcher declined, close) first takes over what the publishes did (``_adopt``).
Records the native run leaves to Python (delay topic, invalid UTF-8, an out-of-order queue position)
go through the general path: ``general_tags`` and ``apply_batch``, which Spark maintenance
(``rebuild``, from the columns its tasks computed) writes through too, so the files they build are
the same.
"""
from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import numpy as np

from .. import _impl
from .. import layout as L
from ..layout import ST_BLANK, ST_TORN, STOP_INDEX, STOP_NONE, STOP_QUEUE, STOP_SPECIAL
from ..commitlog import raise_status
from ..consumequeue import ConsumeQueue, put_grouped
from ..errors import InvalidRecordError, InvalidTopicError, OffsetOutOfRangeError, RmqError, StoreClosedError
from ..message import MessageExt, compute_tags_code
from ..warmahead import Region, ahead_end, index_region
from .queues import consume_queue

if TYPE_CHECKING:
    from . import MessageStore

__all__ = ["apply_batch", "general_tags", "Dispatch"]

REPUT_STEP = 32 * 1024 * 1024  # CommitLog bytes the reput thread dispatches per step


def general_tags(codec: Any, buf: Any, limit: int, file_from: int, positions: Any, flags: Any, tags: Any) -> None:
    """Set ``tags[i]`` for the records whose dispatch flags (``D_FLAGS``) say the kernel could not
    compute it: the delay topic (its tagsCode is the delivery time) or invalid UTF-8."""
    for i in np.flatnonzero(flags & 3).tolist():
        rec = codec.decode_record(buf, int(positions[i]), limit, False)
        m = MessageExt(file_from + int(positions[i]), rec)
        tags[i] = compute_tags_code(m.topic, m.properties, m.store_timestamp)


def apply_batch(queue_of: Callable[[int], ConsumeQueue], topic_ids: Any, queue_ids: Any, phys: Any, sizes: Any,
                tags: Any, queue_offsets: Any, tran: Any, index: Any, keys: Any, key_counts: Any,
                store_timestamps: Any) -> None:
    """Write a batch of dispatched records (parallel int64 arrays, CommitLog order): a unit in its
    queue for each NOT_TYPE and COMMIT record (grouped per queue, the order kept inside each; the
    queue of group key ``topic_id << 32 | queue_id`` comes from ``queue_of``), then, with an
    ``index``, the records' key hashes (``keys``, ``key_counts[i]`` of them for record i; ROLLBACK
    records add none)."""
    sel = np.flatnonzero((tran == L.TRANSACTION_NOT_TYPE) | (tran == L.TRANSACTION_COMMIT))
    if len(sel):
        gkey = (topic_ids[sel] << 32) | (queue_ids[sel] & 0xFFFFFFFF)
        put_grouped(queue_of, gkey, phys[sel], sizes[sel], tags[sel], queue_offsets[sel])
    if index is not None:
        index.put_record_keys(keys, key_counts, tran, phys, store_timestamps)


class Dispatch:
    """The store's dispatch (see the module): ``run`` from ``reput_from_offset`` to the end."""

    def __init__(self, store: MessageStore) -> None:
        self._store = store
        self.reput_from_offset = 0  # set by recovery (loader.LogLoader)
        self.reput_pub = np.zeros(1, dtype=np.int64)  # reput_from_offset, as the native lookup reads it
        self.index_resume = (-1, 0)  # (record offset, first key) of a record split over two index files
        self.last_dispatched_ts = 0
        self.read_your_writes = False  # reads dispatch what is pending first (set once the store is open)
        self._announce = store.config.dispatch == "background"  # _sync_queues wakes this process's waiters
        self.kernel = _impl.kernel("dispatch", store.impl)
        self.dispatcher = self.kernel.Dispatcher()
        self.lock = threading.Lock()
        self.lock_wanted = np.zeros(1, dtype=np.int64)  # callers waiting for the dispatch lock
        self._wanted_mutex = threading.Lock()  # for its read-modify-writes
        # the reput thread asks the writers for the GIL through this word (Appender.set_gil_request)
        self.gil_request = np.zeros(1, dtype=np.int64)
        self._gil_asks = 0
        # scratch of the general path, one record at a time (_dispatch_one); a record has at most one
        # key per two bytes of properties, plus UNIQ_KEY
        self._cols = np.empty((L.NCOLUMNS, 1), dtype=np.int64)
        self._disp = np.empty((4, 1), dtype=np.int64)
        self._keys = np.empty(L.MAX_PROPERTIES_LEN // 2 + 2, dtype=np.int64)
        self._topic_ids: dict[bytes, int] = {}
        self._topic_names: list[str] = []
        self._no_seg = np.zeros(10, dtype=np.int64)  # Dispatcher.run's segment state when there is no index
        self._seg_out = np.empty((4, 65536), dtype=np.int64)
        # each queue's writable file bound to the dispatcher, least recently bound first; the
        # dispatcher holds at most half of the map pool
        self.bound: dict[tuple[bytes, int], tuple[ConsumeQueue, Any]] = {}
        self._bind_max = max(1, store._map_pool.budget // 2)
        self.bound_index: Any = None
        self._publishing = False  # start_publishing: each put publishes its record (the Dispatcher armed)
        self._armed_seg: Any = None  # the segment index of the file armed (its entries go in at _adopt)
        self.publish_error: RmqError | None = None  # what the last declined publish's dispatch raised
        self._retry_at, self._backoff = 0.0, 0.01  # ... and when a put may try again (_declined)
        if not store.read_only:  # what each put knows of its record: dispatch does not parse it again
            ap = store.commitlog._appender
            self.dispatcher.set_hints(ap.hints, ap.hint_head)

    def set_start(self, offset: int) -> None:
        """Recovery decided where dispatch starts."""
        assert not self._publishing
        self.reput_from_offset = offset
        self.index_resume = (-1, 0)
        self.reput_pub[0] = offset

    @property
    def lag(self) -> int:
        """CommitLog bytes not dispatched yet (what puts published counts as dispatched)."""
        done = max(self.reput_from_offset, int(self.dispatcher.published))
        return max(0, self._store.commitlog.max_offset - done)

    # -- publish-on-put -----------------------------------------------------------------------------------
    @property
    def publishing(self) -> bool:
        """Each put publishes its record (``start_publishing``)."""
        return self._publishing

    def start_publishing(self) -> None:
        """``dispatch="put"``, once the store is open: each put publishes its record (its unit,
        index entries, the wake-up of its queue's waiters) in the same call, through the armed
        Dispatcher; a record it cannot (a queue or index file to bind or make, the general path,
        another CommitLog file) is dispatched by the put itself through ``run``."""
        with self.lock:
            self._publishing = True
            self._arm()
        self._store.commitlog._appender.set_publisher(self.dispatcher, self._declined)

    def stop_publishing(self) -> None:
        """Close: puts publish no more, and what they published is taken over."""
        if not self._publishing:
            return
        self._store.commitlog._appender.set_publisher(None)
        with self.lock:
            self._publishing = False
            self._adopt()

    def _declined(self) -> None:
        """A put whose record the Dispatcher declined dispatches it here. The put stands (its record
        is in the CommitLog), so an error does not end it: it is kept in ``publish_error`` and met
        again by the next dispatch, a read's or close's, which raises it. While it stands, puts try
        again after a backoff (10 ms, doubling up to 1 s, as the reput thread waits out a full disk),
        not each time."""
        now = time.monotonic()
        if self.publish_error is not None and now < self._retry_at:
            return
        try:
            self.run(None, False)
        except RmqError as e:
            self._backoff = min(2 * self._backoff, 1.0) if self.publish_error is not None else 0.01
            self.publish_error, self._retry_at = e, now + self._backoff
        else:
            self.publish_error = None

    def _adopt(self) -> None:
        """Take over what publishes dispatched since ``_arm`` (the dispatch lock held): where
        dispatch is, the queues' write positions, the segment-index entries, the store time."""
        r = self.dispatcher.disarm()
        if r is None:
            return
        pos, nseg, max_ts, stop, arg = r
        seg, self._armed_seg = self._armed_seg, None
        if nseg and seg is not None:
            seg.add_entries(self._seg_out, nseg)
        self._sync_queues()
        if max_ts > self.last_dispatched_ts:
            self.last_dispatched_ts = max_ts
        if pos > self.reput_from_offset:
            if self.bound_index is not None:
                self.bound_index._dirty = True
            self.reput_from_offset = pos
            self.reput_pub[0] = pos
            self.index_resume = (-1, 0)
            if self._store._notify is not None:
                self._store._notify.publish_dispatched(pos)
        if stop == STOP_INDEX:  # the record at pos has its first keys in (even the first one published)
            self.index_resume = (pos, arg)

    def _arm(self) -> None:
        """Arm the Dispatcher for the records put from ``reput_from_offset`` on (the dispatch lock
        held), when that is in the CommitLog's last file and no record is half indexed."""
        s = self._store
        off = self.reput_from_offset
        mf = s.commitlog.queue.last()
        if (not self._publishing or mf is None or self.index_resume[0] == off
                or not mf.file_from_offset <= off < mf.file_end_offset):
            return
        seg = s.segindex.for_file(mf.file_from_offset) if s.segindex is not None else None
        self.dispatcher.arm(mf.file_from_offset, off, s.index is not None,
                            self._no_seg if seg is None else seg.state, self._seg_out)
        self._armed_seg = seg

    def caught_up(self) -> None:
        """Read-your-writes: before a read, dispatch whatever was put since the last one (batched).
        ``Pull.get`` checks the same rule inline."""
        s = self._store
        if s._closed:
            raise StoreClosedError(f"the store {s.store_dir} is closed")
        if self.read_your_writes and self.reput_from_offset < s.commitlog.max_offset:
            self.run(None, False)

    def step(self) -> int:
        """The reput thread's step: a live run of at most ``REPUT_STEP`` CommitLog bytes."""
        return self.run(self.reput_from_offset + REPUT_STEP, True)

    def run(self, limit: int | None, live: bool) -> int:
        """Dispatch up to ``limit`` (the end: None); returns the number of records. With ``live`` (the
        reput thread) each run also follows the records the writer completes meanwhile, up to
        ``limit``, without coming back for the GIL, and the writers hand the GIL over whenever a run
        ends (until this returns)."""
        if not live:
            lock = self.lock
            if self._store._services.reput is None:
                lock.acquire()
            elif not lock.acquire(False):  # the reput thread is in a run: ask it to end (it may nap)
                with self.locked():
                    return self._runs(limit, False)
            try:  # taken without signalling anyone
                return self._runs(limit, False)
            finally:
                lock.release()
        with self.lock:
            # the writers hand the GIL over from here to the first run (which withdraws this): the
            # Python work before it (a new CommitLog file's segment index: files created, each file
            # call giving up the GIL) would otherwise wait out the 5 ms switch interval each time
            self._gil_asks -= 1  # a new number (the Dispatcher's own are positive)
            self.gil_request[0] = self._gil_asks
            try:
                return self._runs(limit, True)
            finally:  # a live run leaves its GIL request out for the work between runs (set_signals)
                self.gil_request[0] = 0

    def wait(self, timeout: float) -> bool:
        """``MessageStore.wait_dispatched``: poll until dispatch has caught up, or ``timeout`` passed."""
        s = self._store
        deadline = time.monotonic() + timeout
        if self.lag > 0 and s._notify is not None:  # a waiter: the reput thread's nap ends now
            s._notify.wake_reput()
        while self.lag > 0:
            reput = s._services.reput
            if reput is not None and reput.error is not None:
                raise reput.error
            if self.publish_error is not None:  # dispatch="put": a put's dispatch met it
                raise self.publish_error
            if s._gate.sealed:
                raise StoreClosedError(f"the store {s.store_dir} is closed")
            if time.monotonic() > deadline:
                return False
            time.sleep(0.0005)
        return True

    @contextlib.contextmanager
    def wanting(self) -> Iterator[None]:
        """Counted in ``lock_wanted`` meanwhile: a live run napping for the writer returns at once
        instead of napping on (the reput wake slot it naps on is bumped), and the reput thread's nap
        between runs is skipped."""
        with self._wanted_mutex:
            self.lock_wanted[0] += 1
        notify = self._store._notify
        if notify is not None:  # a live run naps on the reput wake slot: it looks at lock_wanted now
            notify.wake_reput()
        try:
            yield
        finally:
            with self._wanted_mutex:
                self.lock_wanted[0] -= 1

    @contextlib.contextmanager
    def locked(self) -> Iterator[None]:
        """The dispatch lock, for any thread but the reput thread, taken while wanting it."""
        with self.wanting():
            self.lock.acquire()
        try:
            yield
        finally:
            self.lock.release()

    def _runs(self, limit: int | None, live: bool) -> int:
        if not self._publishing:
            return self._dispatch_runs(limit, live)
        self._adopt()
        try:
            return self._dispatch_runs(limit, live)
        finally:
            self._arm()

    def _dispatch_runs(self, limit: int | None, live: bool) -> int:
        s = self._store
        s._check_open()
        cl = s.commitlog
        written = cl.queue.max_offset()  # cl.max_offset, one call fewer
        cap = written if limit is None else limit
        end = min(cap, written)
        if self.reput_from_offset >= end:
            return 0  # nothing to dispatch (and nothing to publish)
        live_arr = cl._appender.live if live else None
        dsp = self.dispatcher
        index_on = s.index is not None
        no_seg, seg_out = self._no_seg, self._seg_out
        n_total = 0
        # a record whose keys went into two index files (the first filled up) resumes at its
        # key first_key; kept across calls, as a live run may have gone past this call's end
        at_key, first_key = self.index_resume
        if at_key != self.reput_from_offset:
            first_key = 0
            self.index_resume = (-1, 0)
        while self.reput_from_offset < end:
            try:
                mf = cl.queue.find(self.reput_from_offset)
            except OffsetOutOfRangeError:
                break
            base = mf.file_from_offset
            pos = self.reput_from_offset - base
            stop_at = min(mf.wrote_position, end - base)
            seg = s.segindex.for_file(base) if s.segindex is not None else None
            # a DispatchRun, unpacked once: this loop runs per put in a put-then-read loop
            done, at, status, stop, arg, topic_len, queue_id, queue_offset, max_ts, nseg = dsp.run(
                mf.mm, base, pos, stop_at, False, index_on, first_key, no_seg if seg is None else seg.state,
                seg_out, live_arr, max(stop_at, min(cap - base, mf.file_size)))
            first_key = 0
            if nseg:
                assert seg is not None
                seg.add_entries(seg_out, nseg)
            self._sync_queues()
            if index_on and self.bound_index is not None:
                self.bound_index._dirty = True
            if max_ts > self.last_dispatched_ts:
                self.last_dispatched_ts = max_ts
            n_total += done
            nxt = base + at
            if stop == STOP_NONE:  # the run reached its limit or a status
                if status == ST_BLANK:
                    nxt = mf.file_end_offset
                elif done == 0 and status < 0 and at < stop_at:
                    if status == ST_TORN and base + stop_at < cl.max_offset:
                        break  # the record crosses this call's limit: the next call takes it
                    # RocketMQ logs and stops here; recovery cuts such bytes, so report them
                    raise_status(cl._codec, status, mf.path, at)
                if nxt <= self.reput_from_offset:
                    break
            elif stop == STOP_QUEUE or stop == STOP_INDEX:
                # what the run wrote stays done if the binding below fails (DiskFullError creating
                # a file): a retry starts after it, and re-putting the keys of the last indexed
                # record would add them to the index twice
                if nxt > self.reput_from_offset:
                    self.reput_from_offset = nxt
                    self.reput_pub[0] = nxt
                if stop == STOP_QUEUE:  # arg: the record's topic position
                    self._bind_queue(bytes(mf.mm[arg : arg + topic_len]), queue_id, queue_offset, mf.path, at)
                else:  # arg: the key of the record at ``at`` the next run starts from
                    first_key = arg
                    self.index_resume = (nxt, first_key)
                    self._bind_index()
            elif stop == STOP_SPECIAL:
                nxt = self._dispatch_one(mf, at)
                n_total += 1
            # STOP_SEG: the segment-index output was full; its entries are in (above), the next run goes on
            self.reput_from_offset = nxt
        self.reput_pub[0] = self.reput_from_offset
        if s._notify is not None:
            s._notify.publish_dispatched(self.reput_from_offset)
        s._keys.drop_if_stale()  # files came or went: the next lookup rebuilds it
        return n_total

    def _sync_queues(self) -> None:
        """Publish what the dispatcher wrote: each queue's write position and max physical offset
        (and wake its waiters in this process: the dispatcher woke them as it wrote, when this
        process's view of the queue had not moved yet)."""
        notify = self._store._notify if self._announce else None
        for topic_b, qid, wrote, max_phys in self.dispatcher.touched():
            cq, mf = self.bound[(topic_b, qid)]
            mf.wrote_position = wrote
            cq.max_physic_offset = max_phys
            if notify is not None:
                notify.announce(topic_b, qid)

    # -- the files bound to the dispatcher --------------------------------------------------------------
    def _bind_queue(self, topic_b: bytes, queue_id: int, queue_offset: int, path: Any = None,
                    position: int = -1) -> None:
        """Give the dispatcher the writable file of a queue (created, with the pre-blank fill of a
        queue that starts past 0, when it has none; the next one when it is full). The record at
        ``position`` of ``path`` needs it; a topic that cannot be a directory name is reported
        there (RocketMQ would create the directory wherever the topic points)."""
        try:
            # ConsumeQueue checks the topic
            cq = consume_queue(self._store, topic_b.decode("utf-8"), queue_id, True)
        except InvalidTopicError as e:
            raise InvalidRecordError(str(e), position, None if path is None else str(path)) from None
        assert cq is not None
        self._bind((topic_b, queue_id), cq, cq._writable(queue_offset * L.CQ_UNIT_SIZE))

    def _bind(self, key: tuple[bytes, int], cq: ConsumeQueue, mf: Any) -> None:
        """Bind ``mf`` of ``cq`` to the dispatcher (pinned in the map pool meanwhile), with the
        queue's wake slot in the notify file; beyond ``_bind_max`` bound queues the least recently
        bound one is let go (bound again when a record needs it)."""
        pool, notify = self._store._map_pool, self._store._notify
        old = self.bound.pop(key, None)
        if old is not None and old[1] is not mf:
            pool.pin(old[1], False)
        pool.pin(mf, True)
        slot = -1 if notify is None else notify.slot(key[0], key[1])
        self.dispatcher.bind_queue(key[0], key[1], mf.mm, mf.file_from_offset, mf.wrote_position,
                                   cq.max_physic_offset, slot)
        self.bound[key] = (cq, mf)
        while len(self.bound) > self._bind_max:
            self._unbind(next(iter(self.bound)))

    def _unbind(self, key: tuple[bytes, int]) -> None:
        _cq, mf = self.bound.pop(key)
        self.dispatcher.bind_queue(key[0], key[1], None, 0, 0, 0)
        self._store._map_pool.pin(mf, False)

    def _bind_index(self) -> None:
        """Give the dispatcher the last index file (a new one when it is full: getAndCreateLastIndexFile)."""
        index = self._store.index
        assert index is not None
        f = index._last_writable()
        self.dispatcher.bind_index(f._mm, index.slot_count, f.entry_limit())
        self.bound_index = f

    def release(self) -> None:
        """Let go of the files the dispatcher holds (before any of them is unmapped); an armed
        Dispatcher is disarmed (the next run arms it again)."""
        self._adopt()
        self.dispatcher.release()
        for _cq, mf in self.bound.values():
            self._store._map_pool.pin(mf, False)
        self.bound.clear()
        self.bound_index = None

    def warm_regions(self, ahead: int) -> list[Region]:
        """What the logics warm-ahead should warm now: past the write position of each bound queue
        that moved (as the dispatcher holds it, mid-run too) and past the bound index file's last
        entry."""
        out: list[Region] = []
        bound = self.bound
        for topic_b, qid, wrote in self.dispatcher.moved():
            pair = bound.get((topic_b, qid))
            if pair is not None and not pair[1].closed:
                mf = pair[1]
                out.append((mf.mm, wrote, ahead_end(wrote, mf.file_size, wrote, ahead)))
        f = self.bound_index
        if f is not None:
            r = index_region(f, ahead)
            if r is not None:
                out.append(r)
        return out

    # -- the general path -------------------------------------------------------------------------------
    def _dispatch_one(self, mf: Any, pos: int) -> int:
        """The general path for the one record at ``pos`` of ``mf``; returns the offset after it.
        Queue and index bindings are refreshed afterwards (this path writes through the objects)."""
        s = self._store
        cols = self._cols
        n, end_pos, status, nkeys = self.kernel.dispatch_batch(
            mf.mm, pos, mf.wrote_position, cols, self._disp, self._keys, False)
        if n == 0:
            raise_status(s.commitlog._codec, status, mf.path, pos)
        try:
            self._apply_one(mf, nkeys)
        except InvalidTopicError as e:  # as _bind_queue reports it: where the record is
            raise InvalidRecordError(str(e), pos, mf.path) from None
        tpos = int(cols[L.C_TOPIC_POS, 0])
        topic_b = bytes(mf.mm[tpos : tpos + int(cols[L.C_TOPIC_LEN, 0])])
        key = (topic_b, int(cols[L.C_QUEUE_ID, 0]))
        if key in self.bound:
            cq, _ = self.bound[key]
            last = cq.queue.last()
            if last is not None and not last.is_full():
                self._bind(key, cq, last)
            else:
                self._unbind(key)
        if s.index is not None and s.index._files:
            self._bind_index()
        if s._notify is not None:  # this path writes its unit through ConsumeQueue: announce it here
            s._notify.announce(topic_b, key[1])
        return int(mf.file_from_offset + end_pos)

    def _apply_one(self, mf: Any, nkeys: int) -> None:
        """CQ units, index entries (``apply_batch``) and segment-index entries of the record decoded
        into the scratch arrays."""
        s = self._store
        cols, disp = self._cols, self._disp
        base = mf.file_from_offset
        positions = cols[L.C_POSITION, :1].copy()
        phys = positions + base
        sizes = cols[L.C_SIZE, :1].copy()
        tss = cols[L.C_STORE_TIMESTAMP, :1].copy()
        tags = disp[0, :1].copy()
        mm = mf.mm
        ids = np.array([self._topic_id(bytes(mm[int(cols[L.C_TOPIC_POS, 0]) : int(cols[L.C_TOPIC_POS, 0])
                                                 + int(cols[L.C_TOPIC_LEN, 0])]))], dtype=np.int64)
        names = self._topic_names
        general_tags(s.commitlog._codec, mm, mf.wrote_position, base, positions, disp[1, :1], tags)

        def queue_of(g: int) -> ConsumeQueue:
            cq = consume_queue(s, names[g >> 32], g & 0xFFFFFFFF, True)
            assert cq is not None
            return cq

        apply_batch(queue_of, ids, cols[L.C_QUEUE_ID, :1], phys, sizes, tags,
                    cols[L.C_QUEUE_OFFSET, :1].copy(), cols[L.C_SYS_FLAG, :1] & L.TRANSACTION_MASK, s.index,
                    self._keys[:nkeys], disp[3, :1], tss)
        if s.segindex is not None:
            s.segindex.add(base, positions, sizes, tss)
        self.last_dispatched_ts = max(self.last_dispatched_ts, int(tss.max()))

    def _topic_id(self, key: bytes) -> int:
        tid = self._topic_ids.get(key)
        if tid is None:
            tid = self._topic_ids[key] = len(self._topic_names)
            self._topic_names.append(key.decode("utf-8", "replace"))
        return tid
