"""Offline verification of a store: every problem reported, no file changed.

Checks: each CommitLog file has the configured size and a record walk (CRC verified) that reaches
its BLANK or the end of the data; the data ends before any later non-empty file; every consume-queue
unit, as the queue holds it, points at a readable record of its queue (size, topic, queue id and
queue offset; ``recovery.unit_problem``) before any invalid bytes; index file headers are sane
(indexCount within bounds).
Problems carry the file path and offset.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import layout as L
from .errors import RmqError

__all__ = ["Problem", "VerifyReport", "verify_store"]


@dataclass
class Problem:
    kind: str
    path: str
    offset: int
    detail: str

    def as_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "path": self.path, "offset": self.offset, "detail": self.detail}


@dataclass
class VerifyReport:
    store: str
    messages: int = 0
    blanks: int = 0
    commitlog_bytes: int = 0
    consume_queue_units: int = 0
    index_files: int = 0
    problems: list[Problem] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems

    def as_dict(self) -> dict[str, Any]:
        return {"store": self.store, "ok": self.ok, "messages": self.messages, "blanks": self.blanks,
                "commitlog_bytes": self.commitlog_bytes, "consume_queue_units": self.consume_queue_units,
                "index_files": self.index_files, "problems": [p.as_dict() for p in self.problems]}


def verify_store(store_dir: str | Path, progress: Callable[[int, int], None] | None = None, **geometry: int) -> VerifyReport:
    """Verify ``store_dir`` read-only (see the module docstring); ``progress(done, total)`` is
    called with CommitLog bytes walked."""
    from .commitlog import Blank, CommitLog, ScanStop
    from .consumequeue import ConsumeQueue
    from .message import MessageExt
    from .recovery import unit_problem
    from .store import MessageStore

    store_dir = Path(store_dir)
    rep = VerifyReport(str(store_dir))
    if (store_dir / "abort").exists():
        rep.problems.append(Problem("unclean-shutdown", str(store_dir / "abort"), -1,
                                    "the store was not shut down cleanly (abnormal recovery needed)"))
    overrides: dict[str, Any] = geometry  # MessageStore's **overrides (typed for its keyword matching)
    try:
        # no CRC check while finding the end: a bad body must show up below, not be cut silently
        s = MessageStore(store_dir, read_only=True, message_index_enable=True, check_crc_on_recover=False,
                         **overrides)
    except RmqError as e:
        rep.problems.append(Problem("open", str(store_dir), getattr(e, "position", -1), str(e)))
        return rep
    with s:
        cl: CommitLog = s.commitlog
        total = sum(mf.file_size for mf in cl.queue.files)
        sizes: dict[int, int] = {}
        for mf in cl.queue.files:
            mf.wrote_position = mf.file_size  # walk everything there is, not just the recovered end
        ended_at: int | None = None
        stop = None
        unclean = (store_dir / "abort").exists()
        for item in cl.iter_records(cl.min_offset, verify_crc=True):
            if isinstance(item, MessageExt):
                rep.messages += 1
                sizes[item.position] = item.size
                if item.physical_offset != item.position:
                    rep.problems.append(Problem("commitlog", str(cl.queue.find(item.position).path), item.position,
                                                f"PHYSICALOFFSET field says {item.physical_offset}"))
            elif isinstance(item, Blank):
                rep.blanks += 1
                if progress:
                    progress(item.file_end - cl.min_offset, total)
            elif isinstance(item, ScanStop):
                ended_at = item.position
                stop = item
        end = max(sizes and max(p + n for p, n in sizes.items()) or 0, ended_at or 0)
        rep.commitlog_bytes = end - cl.min_offset if end else 0
        # invalid bytes are the normal end of the log (stale bytes RocketMQ leaves after a cut) unless
        # valid records follow them, consume queues point past them, or the store crashed (torn tail)
        later = [mf for mf in cl.queue.files if ended_at is not None and mf.file_from_offset > ended_at
                 and cl._codec.check_record(mf.mm, 0, mf.file_size, True)[0] == L.ST_MSG]
        cq_past = ended_at is not None and any(
            cq.max_physic_offset > ended_at for cq in s.consume_queues.values())
        if stop is not None and (later or cq_past or unclean):
            why = ("valid records follow it" if later else "consume queues point past it" if cq_past
                   else "torn tail of a crashed store")
            rep.problems.append(Problem("commitlog", stop.path, stop.position, f"invalid record ({stop.reason}); {why}"))
        for mf in later:
            rep.problems.append(Problem("commitlog", mf.path, mf.file_from_offset,
                                        "valid records after an invalid one (unreachable by a RocketMQ reader)"))
        # every unit as the queue holds it (the store's view ends the queues where the CommitLog's
        # recovery would): each must point at a readable record of its queue before the invalid bytes
        readable_end = stop.position if stop is not None else end
        for (topic, qid) in sorted(s.consume_queues):
            with ConsumeQueue(store_dir, topic, qid, file_size=s.config.cq_file_size, read_only=True) as cq:
                cq.load()
                cq.recover()
                units = cq.all_units()
                base = cq.queue.min_offset() // L.CQ_UNIT_SIZE if cq.queue.files else 0
                topic_b = topic.encode("utf-8")
                for k, (off, size) in enumerate(zip(units["offset"].tolist(), units["size"].tolist())):
                    rep.consume_queue_units += 1
                    q = base + k
                    bad = unit_problem(cl, topic_b, qid, q, off, size, readable_end)
                    if bad is not None:
                        rep.problems.append(Problem("consumequeue", str(cq.directory), q * L.CQ_UNIT_SIZE,
                                                    f"{topic}/{qid} unit {q} {bad}"))
        if s.index is not None:
            for f in s.index.index_files:
                rep.index_files += 1
                h = f.header
                if not 0 <= h.index_count <= s.config.index_entries or h.hash_slot_count > s.config.index_slots:
                    rep.problems.append(Problem("index", str(f.path), 32, f"impossible header {h}"))
        if progress:
            progress(total, total)
    return rep
