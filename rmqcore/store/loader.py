"""Opening a store's files and recovering them (DefaultMessageStore.load + recover), in the shape of
Kafka's LogLoader: first validate (find where the valid CommitLog data ends), then truncate (cut the
CommitLog there, settle the consume queues and index files on it), then rebuild by dispatch.

Normal start (no ``abort`` file): the CommitLog is scanned from its third-last file. Abnormal start
(``abort`` left by a crash): from the newest file whose first record was stored before the
checkpoint's min timestamp, every record re-dispatched from there (idempotent), and a torn last
record is dropped. Either way the CommitLog ends at the first record that cannot be read (CRC
checked), as in RocketMQ; what is cut is zeroed, and kept in quarantine when it holds valid records
(``recovery.cut_commitlog``). Consume queues end at the same place, each queue's last unit is
checked against the CommitLog (every unit with ``check_consume_queues``; after a crash the units of
the re-dispatched range are rebuilt), and index files are kept only as far as they cover the
CommitLog without a gap (``IndexService.truncate``); dispatch then rebuilds what was dropped, the
index from the record after the last file kept (RocketMQ issue #8007, and its clock variant). A
record whose topic cannot be dispatched ends the CommitLog there like any unreadable record.
"""
from __future__ import annotations

import os
import warnings
from typing import TYPE_CHECKING, Any

from .. import layout as L
from ..checkpoint import StoreCheckpoint
from ..configfiles import persist
from ..consumequeue import ConsumeQueue
from ..errors import CorruptionError, InvalidRecordError, OffsetOutOfRangeError, RecoveryCutWarning
from ..recovery import QueueRepair, RecoveryReport, cut_commitlog, record_sound, unit_problem
from .pull import store_time_in

if TYPE_CHECKING:
    from . import MessageStore

__all__ = ["LogLoader", "open_index", "write_abort"]


def open_index(store: MessageStore) -> Any:
    """The store's IndexService (None with ``message_index_enable=False``)."""
    if not store.config.message_index_enable:
        return None
    from ..indexfile import IndexService

    return IndexService(store.store_dir, store.config.index_slots, store.config.index_entries,
                        read_only=store.read_only, impl=store.impl)


def write_abort(store: MessageStore) -> None:
    """Create the abort file (4.x: empty; 5.x: the PID, keeping the previous content as .bak)."""
    abort = store.store_dir / "abort"
    if store.config.flavour >= 5:
        persist(abort, str(os.getpid()))
    else:
        with open(abort, "wb") as f:
            f.flush()
            os.fsync(f.fileno())


class LogLoader:
    """One recovery of ``store`` (see the module): ``load()`` sets the store's ``last_exit_ok``,
    ``checkpoint``, ``recovery``, ``recovered_end`` and ``segindex``, and where dispatch starts."""

    def __init__(self, store: MessageStore) -> None:
        self._store = store
        self._cl = store.commitlog
        # rmqcore wrote the store as 5.x does: a record's properties end with a separator
        self._strict_tail = store._strict_tail

    def load(self) -> None:
        s, cl = self._store, self._cl
        s.last_exit_ok = not (s.store_dir / "abort").exists()
        s.checkpoint = StoreCheckpoint(s.store_dir / "checkpoint", s.config.flavour, read_only=s.read_only)
        s.recovery = RecoveryReport(abnormal=not s.last_exit_ok)
        if s.index is not None:
            s.index.on_roll = self._on_index_roll
        for cq in s.consume_queues.values():
            cq.recover()
        s.segindex = None
        redispatch_from: int | None = None
        if s.read_only:
            end, _ = cl.scan_end()
            cl.set_end(end)
            s.recovered_end = end
        else:
            end, reason, redispatch_from = self._validate()
            self._truncate(end, reason)
        end = self._rebuild(end, redispatch_from)
        if s.read_only:
            return
        # queue offsets after re-dispatch (records recovered past the old consume queues)
        for (topic, qid), cq in s.consume_queues.items():
            cl.set_queue_offset(topic, qid, cq.max_offset)
        if not s.last_exit_ok and s.config.flavour >= 5:
            s.checkpoint.confirm_phy_offset = self._last_record_start(end)
        write_abort(s)

    # -- validate ---------------------------------------------------------------------------------------
    def _validate(self) -> tuple[int, str, int | None]:
        """Where the valid CommitLog data ends, why, and (after a crash) where re-dispatch starts."""
        cl = self._cl
        start_index = None if self._store.last_exit_ok else self._abnormal_start_file()
        end, stop = cl.scan_end(start_index, progress=self._store._progress)
        reason = stop.reason if stop is not None else "end of data"
        if start_index is None:
            return end, reason, None
        end, torn = self._drop_torn_last_record(end)
        redispatch_from = cl.queue.files[start_index].file_from_offset if cl.queue.files else 0
        return end, "torn last record" if torn else reason, redispatch_from

    def _abnormal_start_file(self) -> int:
        """The newest file whose first record is valid and was stored (time != 0) no later than the
        checkpoint's min timestamp (CommitLog.isMappedFileMatchedRecover); the oldest when none."""
        cl = self._cl
        limit = self._store.checkpoint.min_timestamp()
        files = cl.queue.files
        for i in range(len(files) - 1, -1, -1):
            mf = files[i]
            status, _size = cl._codec.check_record(mf.mm, 0, mf.file_size, False)
            if status != L.ST_MSG:
                continue
            magic = int.from_bytes(mf.mm[4:8], "big", signed=True)
            if self._store.config.flavour == 4 and magic != L.MAGIC_V1:
                continue
            ts = store_time_in(cl, mf.file_from_offset)
            if ts and ts <= limit:
                return i
        return 0

    def _drop_torn_last_record(self, end: int) -> tuple[int, bool]:
        """A crash during a write leaves the record's tail zeroed. The body CRC and the length
        fields catch most of that; a zeroed tail of the topic or properties text passes them. So the
        last record before ``end`` must also be sound (``recovery.record_sound``: a valid topic and,
        in flavour-5 stores rmqcore created, properties ending with ``\\x02``, as 5.x writers always
        end them). Returns the end of the valid data and whether the last record was dropped."""
        start = self._last_record_start(end)
        if end <= 0 or start >= end:
            return end, False
        try:
            m = self._cl.read(start, verify_crc=True) if start < self._cl.max_offset else None
        except (CorruptionError, OffsetOutOfRangeError):
            return start, True
        if m is None or m.position + m.size != end:
            return end, False
        if not record_sound(m, self._strict_tail):
            return start, True
        return end, False

    def _last_record_start(self, end: int) -> int:
        cl = self._cl
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

    # -- truncate ---------------------------------------------------------------------------------------
    def _truncate(self, end: int, reason: str) -> None:
        """End the CommitLog at ``end``: the cut bytes are zeroed, or kept in quarantine when they hold
        valid records (then a RecoveryCutWarning says what was cut and where it is)."""
        s, strict = self._store, self._strict_tail
        cut = cut_commitlog(self._cl, end, reason, lambda m: record_sound(m, strict), s.store_dir,
                            s.config.flavour)
        self._cl.set_end(end)
        s.recovered_end = end
        if cut is None:
            return
        s.recovery.cuts.append(cut)
        if cut.records:
            warnings.warn(RecoveryCutWarning(
                f"{s.store_dir}: recovery cut {cut.records} valid records ({cut.bytes} bytes from "
                f"CommitLog offset {cut.offset}, {cut.path} position {cut.position}: {cut.reason}), as "
                f"RocketMQ does; they are kept in {cut.quarantine} (rmqcore.recovery.restore_quarantined "
                "puts them back)"),
                stacklevel=5)

    def _settle_logics(self, end: int, redispatch_from: int | None, first: bool) -> None:
        """Consume queues and index files after the CommitLog ends at ``end``; sets where dispatch
        starts: early enough to rebuild what was dropped."""
        s, cl = self._store, self._cl
        queues = s.consume_queues
        if not cl.queue.files:  # no CommitLog at all: consume queues are meaningless
            for cq in list(queues.values()):
                if not s.read_only:
                    cq.destroy()
            queues.clear()
        max_cq_phys = max((cq.max_physic_offset for cq in queues.values()), default=-1)
        if max_cq_phys >= end:
            for cq in queues.values():
                cq.truncate_dirty(end)
        start = redispatch_from
        if not s.read_only:
            for cq in queues.values():
                at = self._check_queue(cq, end)
                if at is not None:
                    start = at if start is None else min(start, at)
                if redispatch_from is not None:  # the crash window: rebuilt by re-dispatch
                    cq.truncate_dirty(redispatch_from)
            if s.index is not None:
                redo = self._settle_index(end, first and not s.last_exit_ok)
                if redo is not None:
                    start = redo if start is None else min(start, redo)
        cl_min = cl.min_offset
        for (topic, qid), cq in queues.items():
            cl.set_queue_offset(topic, qid, cq.max_offset)
            cq.correct_min_offset(cl_min)
        if start is None:
            # dispatch resumes after the last record the consume queues know (4.x ReputMessageService)
            start = max((cq.max_physic_offset for cq in queues.values()), default=0)
        s._dispatch.set_start(min(max(start, cl_min, 0), end))

    def _settle_index(self, end: int, after_crash: bool) -> int | None:
        """Index files kept as far as they cover the CommitLog up to ``end``; where indexing resumes
        when files were dropped (where the files kept end, or the first dropped began)."""
        s = self._store
        index = s.index
        trusted = None
        if after_crash:
            # durable only: RocketMQ's rule (endTimestamp <= indexMsgTimestamp), and never the
            # last file (synced only at close); what follows a file that goes, goes too
            last, ts = len(index.index_files) - 1, s.checkpoint.index_msg_timestamp
            trusted = lambda i, f: i < last and f.end_timestamp <= ts  # noqa: E731
        begins = [f.times()[2] for f in index.index_files]  # beginPhyOffset of each
        dropped = index.truncate(end, trusted)
        s.recovery.index_files_dropped += dropped
        if not dropped:
            return None
        kept = index.index_files
        redo = kept[-1].end_phy_offset if kept else begins[len(begins) - len(dropped)]
        return int(redo)

    def _check_queue(self, cq: ConsumeQueue, end: int) -> int | None:
        """Check the units of ``cq`` against the CommitLog (the last ones, walking back while they are
        wrong; every unit with ``check_consume_queues``): the units from the first wrong one on are
        dropped and reported. Returns the CommitLog offset from which dispatch rebuilds them."""
        cl = self._cl
        lo, hi = max(cq.min_offset, cq.queue.min_offset() // L.CQ_UNIT_SIZE), cq.max_offset
        topic = cq.topic.encode("utf-8")

        def problem(q: int) -> str | None:
            unit = cq.get(q)
            if unit is None:
                return "no unit"
            return unit_problem(cl, topic, cq.queue_id, q, unit[0], unit[1], end)

        bad, detail = None, ""
        if self._store.config.check_consume_queues:
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
        self._store.recovery.repaired_queues.append(QueueRepair(cq.topic, cq.queue_id, bad, detail))
        return cq.max_physic_offset if cq.max_physic_offset >= 0 else cl.min_offset

    # -- rebuild ----------------------------------------------------------------------------------------
    def _rebuild(self, end: int, redispatch_from: int | None) -> int:
        """Settle the logics on ``end`` and dispatch what they lack; a record no queue can be made for
        (its topic) ends the CommitLog there, and the logics are settled again. Returns the end."""
        s, cl = self._store, self._cl
        first = True
        while True:
            self._settle_logics(end, redispatch_from, first)
            first = False
            if s.read_only:
                return end
            from ..segindex import SegmentIndexService

            s.segindex = SegmentIndexService(s.store_dir, cl, interval=s.config.index_interval_bytes,
                                             impl=s.impl)
            s.segindex.recover(s._dispatch.reput_from_offset)
            try:
                s._dispatch.run(None, False)
                return end
            except InvalidRecordError as e:
                at = next((mf.file_from_offset + e.position for mf in cl.queue.files if mf.path == e.path),
                          -1)
                if not cl.min_offset <= at < end:
                    raise
                s._dispatch.release()
                s.segindex.close()
                s.segindex = None
                end = at
                self._truncate(end, "undispatchable topic")

    def _on_index_roll(self, end_timestamp: int) -> None:
        """A full index file was flushed: record its end time (indexMsgTimestamp) durably."""
        cp = self._store.checkpoint
        cp.index_msg_timestamp = end_timestamp
        cp.flush()
