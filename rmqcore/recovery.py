"""What recovery cuts and repairs, and where the cut bytes go (the store's recovery calls these).

RocketMQ ends the CommitLog at the first record it cannot read and deletes what follows; rmqcore
keeps that outcome for the live data and adds three things:

* the bytes it cuts are zeroed in the file that stays (a later scan cannot read them as records
  again once new writes reach them: RocketMQ leaves them, and they came back);
* when the cut bytes hold valid records (a bit flip or a bad topic byte in the middle of the log,
  not a torn tail), they are moved into a quarantine directory beside the data, a
  ``RecoveryCutWarning`` says so, and ``MessageStore.recovery.cuts`` lists the cut;
* consume-queue units that do not point at a readable record of their queue are dropped and rebuilt
  from the CommitLog (``QueueRepair``).

Quarantine layout, one directory per cut, ``<store>/quarantine/<cut offset, 20 digits>-<time>/``::

    commitlog/<20-digit name>   the cut bytes at their original offsets, in files of the CommitLog's
                                size: the file that was cut (zeros before the cut), later files whole
    cut.json                    the cut (offset, bytes, records, reason), ``record_offsets`` of the
                                valid records in it, ``commitlog_file_size``, ``flavour``

It is a CommitLog directory of its own: ``rmqcore dump commitlog --from OFFSET DIR`` lists its records
from a record offset in ``cut.json`` (a walk stops at the damaged bytes). ``restore_quarantined``
puts the valid records back into a store (new offsets, same topic, queue, properties, flag and born
time), then renames the directory ``<name>.restored`` so they are not put twice. Deleting the
directory discards them; RocketMQ never reads it.
"""
from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from . import layout as L
from .errors import CorruptionError, InvalidMessageError, OffsetOutOfRangeError
from .message import MessageExt, validate_topic

if TYPE_CHECKING:
    from .commitlog import AppendResult, CommitLog
    from .mappedfile import MappedFile

__all__ = ["Cut", "QueueRepair", "RecoveryReport", "QUARANTINE_DIR", "record_sound", "cut_commitlog",
           "unit_problem", "restore_quarantined"]

QUARANTINE_DIR = "quarantine"
_MAGICS = tuple(m.to_bytes(4, "big", signed=True) for m in (L.MAGIC_V1, L.MAGIC_V2))
_FILLER = 0x7FFFFFFF  # the size of a pre-blank filler unit (ConsumeQueue.fillPreBlank)


@dataclass
class Cut:
    """CommitLog bytes recovery cut: from global ``offset`` (``position`` in ``path``) to the end of
    the data (``bytes``), ``records`` valid records among them, cut because of ``reason``; kept in
    ``quarantine`` (None: nothing valid was cut, the bytes were zeroed)."""

    path: str
    position: int
    offset: int
    bytes: int
    records: int
    reason: str
    quarantine: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class QueueRepair:
    """A consume queue whose units from ``queue_offset`` on were dropped (the unit there does not
    point at a readable record of the queue: ``detail``) and rebuilt from the CommitLog."""

    topic: str
    queue_id: int
    queue_offset: int
    detail: str

    def as_dict(self) -> dict[str, Any]:
        return {"topic": self.topic, "queue_id": self.queue_id, "queue_offset": self.queue_offset}


@dataclass
class RecoveryReport:
    """What an open's recovery did (``MessageStore.recovery``)."""

    abnormal: bool = False
    cuts: list[Cut] = field(default_factory=list)
    repaired_queues: list[QueueRepair] = field(default_factory=list)
    index_files_dropped: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {"cuts": [c.as_dict() for c in self.cuts],
                "repaired_queues": [r.as_dict() for r in self.repaired_queues],
                "index_files_rebuilt": list(self.index_files_dropped)}


def record_sound(m: MessageExt, properties_end_with_separator: bool) -> bool:
    """A record that passed its CRC is also complete and dispatchable: its topic is one RocketMQ
    accepts, and (``properties_end_with_separator``: 5.x stores rmqcore created) its properties end
    with ``\\x02``. A crash that zeroed the tail of a record's topic or properties passes the CRC
    (it covers the body only), and a bit flip in the topic does too: neither record is sound."""
    try:
        validate_topic(m.topic_bytes.decode("ascii"))
    except (UnicodeDecodeError, InvalidMessageError):
        return False
    props = m.properties_bytes
    return not (properties_end_with_separator and props and not props.endswith(b"\x02"))


def _next_magic(mm: Any, pos: int, stop: int) -> int:
    """The first position >= ``pos`` where a record could start (its magic code 4 bytes in), -1: none."""
    hits = [i for i in (mm.find(magic, pos + 4, stop) for magic in _MAGICS) if i >= 0]
    return min(hits) - 4 if hits else -1


def _sound_records(cl: CommitLog, mf: MappedFile, pos: int, stop: int,
                   sound: Callable[[MessageExt], bool]) -> list[int]:
    """Global offsets of the sound records in ``[pos, stop)`` of ``mf``, over damaged bytes: where a
    record fails, the walk goes on at the next position that holds a sound record."""
    codec, out = cl._codec, []
    while pos < stop:
        status, size = codec.check_record(mf.mm, pos, stop, True)
        if status == L.ST_BLANK:
            break
        if status == L.ST_MSG:
            m = MessageExt(mf.file_from_offset + pos, codec.decode_record(mf.mm, pos, stop, False))
            if sound(m):
                out.append(m.position)
                pos += size
                continue
        pos = _next_magic(mf.mm, pos + 1, stop)
        if pos < 0:
            break
    return out


def _has_data(mf: MappedFile, pos: int) -> bool:
    """Whether anything was written at ``pos``: a record (or its torn start) has a size and a magic
    code in its first 8 bytes; 8 zero bytes there mean the rest of the file was never written."""
    return any(mf.mm[pos : min(pos + 8, mf.file_size)])


def cut_commitlog(cl: CommitLog, end: int, reason: str, sound: Callable[[MessageExt], bool],
                  store_dir: Path, flavour: int) -> Cut | None:
    """Recovery ends the CommitLog at ``end``: find what lies past it, keep it in quarantine when it
    holds sound records (moving later files there whole), and zero the cut part of the file that
    stays. The caller then sets the end (``CommitLog.set_end``: later files go). Returns the cut,
    None when nothing was written past ``end``."""
    pieces: list[tuple[MappedFile, int, int]] = []  # (file, first cut position, data end)
    for mf in cl.queue.files:
        if mf.file_end_offset <= end:
            continue
        lo = max(end - mf.file_from_offset, 0)
        if _has_data(mf, lo):
            pieces.append((mf, lo, mf.data_end(lo)))
    if not pieces:
        return None
    records = [o for mf, lo, hi in pieces for o in _sound_records(cl, mf, lo, hi, sound)]
    mf0, lo0, _ = pieces[0]
    last, _, hi_last = pieces[-1]
    where = next((mf for mf in cl.queue.files if mf.file_from_offset <= end < mf.file_end_offset), mf0)
    cut = Cut(where.path, end - where.file_from_offset, end, last.file_from_offset + hi_last - end,
              len(records), reason)
    if records:
        cut.quarantine = str(_quarantine(cl, pieces, cut, records, store_dir, flavour))
    for mf, lo, hi in pieces:
        if mf.file_from_offset <= end and not mf.closed:
            mf.zero(lo, hi)  # the file that stays; later ones were moved, or go with set_end
    return cut


def _quarantine(cl: CommitLog, pieces: list[tuple[MappedFile, int, int]], cut: Cut, records: list[int],
                store_dir: Path, flavour: int) -> Path:
    now = time.time()
    stamp = time.strftime("%Y%m%dT%H%M%S", time.localtime(now)) + f"{int(now * 1000) % 1000:03d}"
    root = store_dir / QUARANTINE_DIR
    qdir = root / f"{cut.offset:020d}-{stamp}"
    n = 1
    while qdir.exists():
        n += 1
        qdir = root / f"{cut.offset:020d}-{stamp}-{n}"
    (qdir / "commitlog").mkdir(parents=True)
    for mf, lo, hi in pieces:
        dest = qdir / "commitlog" / L.offset_to_file_name(mf.file_from_offset)
        if mf.file_from_offset < cut.offset:  # the file that stays: a copy of what is cut from it
            fd = os.open(dest, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), 0o644)
            try:
                os.ftruncate(fd, mf.file_size)
                for a in range(lo, hi, 1 << 20):
                    os.pwrite(fd, mf.mm[a : min(hi, a + (1 << 20))], a)
                os.fsync(fd)
            finally:
                os.close(fd)
        else:  # a later file: moved whole
            cl.queue.files.remove(mf)
            mf.close()
            os.replace(mf.path, dest)
    manifest = {
        **cut.as_dict(), "quarantine": str(qdir), "store": str(store_dir), "first_record": records[0],
        "record_offsets": records, "commitlog_file_size": cl.file_size, "flavour": flavour,
        "cut_at": time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(now)),
        "restore": "rmqcore.recovery.restore_quarantined(store, this directory) puts the records back "
                   "(new offsets); `rmqcore dump commitlog --from OFFSET DIR` lists them",
    }
    tmp = qdir / "cut.json.tmp"
    tmp.write_text(json.dumps(manifest, indent=1) + "\n")
    with open(tmp, "rb") as f:
        os.fsync(f.fileno())
    os.replace(tmp, qdir / "cut.json")
    for d in (qdir / "commitlog", qdir, root, cl.directory):  # the renames and new names are durable
        fd = os.open(d, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    return qdir


def unit_problem(cl: CommitLog, topic: bytes, queue_id: int, queue_offset: int, offset: int, size: int,
                 end: int) -> str | None:
    """Why the consume-queue unit ``(offset, size)`` at ``queue_offset`` of queue ``topic``/``queue_id``
    does not point at a readable record of its queue in the CommitLog below ``end``; None when it
    does. Pre-blank filler units and units of records retention deleted are fine."""
    if (offset == 0 and size == _FILLER) or 0 <= offset < cl.min_offset:
        return None
    if offset < 0 or size <= 0 or offset + size > end:
        return f"points at {offset} size {size}, outside the data [{cl.min_offset}, {end})"
    try:
        mf = cl.queue.find(offset)
        pos = offset - mf.file_from_offset
        raw = cl._codec.decode_record(mf.mm, pos, min(mf.file_size, end - mf.file_from_offset), False)
    except (CorruptionError, OffsetOutOfRangeError) as e:
        return f"points at {offset}, where no record can be read ({e})"
    if raw is None:
        return f"points at {offset}, where there is no record"
    m = MessageExt(offset, raw)
    if m.size != size:
        return f"points at {offset} size {size}, a record of {m.size} bytes"
    if (m.topic_bytes, m.queue_id) != (topic, queue_id):
        return f"points at {offset}, a record of {m.topic}/{m.queue_id}"
    if m.queue_offset != queue_offset:
        return f"points at {offset}, the record of queue offset {m.queue_offset}"
    if m.transaction_type not in (L.TRANSACTION_NOT_TYPE, L.TRANSACTION_COMMIT):
        return f"points at {offset}, a PREPARED or ROLLBACK record (those have no unit)"
    return None


def restore_quarantined(store: Any, quarantine: str | os.PathLike[str]) -> list[AppendResult]:
    """Put the valid records of a quarantine directory back into ``store`` (a writable MessageStore),
    in their order: topic, queue, body, properties (keys, tags, UNIQ_KEY), flag, sys flag and born
    time as they were; new CommitLog and queue offsets. The directory is then renamed
    ``<name>.restored``. Returns each put's result.

    Raises:
        ConfigError: the store is read-only or closed.
        CorruptionError: a record listed in ``cut.json`` no longer reads back.
        OSError: the directory or its ``cut.json`` cannot be read.
    """
    from .commitlog import CommitLog

    qdir = Path(quarantine)
    manifest = json.loads((qdir / "cut.json").read_text())
    out = []
    with CommitLog(qdir, file_size=int(manifest["commitlog_file_size"]), flavour=int(manifest["flavour"]),
                   read_only=True, recover=False) as qcl:
        for off in manifest["record_offsets"]:
            m = qcl.read(int(off), verify_crc=True)
            out.append(store.put(
                m.topic, m.body, m.queue_id, properties_raw=m.properties_string, flag=m.flag,
                sys_flag=m.sys_flag, born_timestamp=m.born_timestamp, born_host=m.born_host,
                reconsume_times=m.reconsume_times, prepared_transaction_offset=m.prepared_transaction_offset,
                store_host=m.store_host))
    os.replace(qdir, qdir.with_name(qdir.name + ".restored"))
    return out
