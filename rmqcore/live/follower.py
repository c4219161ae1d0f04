"""A read-only store's view kept up with a live writer (``MessageStore(..., follow=True)``): the
maps of the files the writer makes, rolls, replaces (recovery) and deletes (retention), and the
published ends of its queues and CommitLog (``rmqcore.live``)."""
from __future__ import annotations

import os
import struct
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .. import _impl
from .. import layout as L
from ..errors import ConfigError, InvalidTopicError
from ..mappedfile import MappedFile, MappedFileQueue
from .inbox import OffsetInbox
from .notifyfile import NotifyFile, _Poller

if TYPE_CHECKING:
    from ..consumequeue import ConsumeQueue
    from ..store import MessageStore

__all__ = ["Follower"]

_UNIT = L.CQ_UNIT_SIZE
_FILLER_SIZE = 0x7FFFFFFF  # ConsumeQueue.BLANK_UNIT's size
_UNIT_STRUCT = struct.Struct(">qiq")
_HEAD_STRUCT = struct.Struct(">iiiiiq")  # TOTALSIZE, MAGICCODE, BODYCRC, QUEUEID, FLAG, QUEUEOFFSET


def _map(q: MappedFileQueue, path: str, offset: int) -> MappedFile | None:
    """A read-only map of a file the writer made, made as ``q`` makes its files (a PooledMappedFile
    of the store's map pool for a consume queue); None while it is missing or not yet its full size."""
    try:
        mf = q._file(path, offset, False)
    except (FileNotFoundError, ConfigError):
        return None
    mf.wrote_position = mf.flushed_position = 0
    return mf


def _close(mf: MappedFile) -> bool:
    """Close a map; False when a zero-copy view still holds it (it is then left to the collector)."""
    try:
        mf.close()
        return True
    except BufferError:
        return False


def _map_next(q: MappedFileQueue) -> MappedFile | None:
    """Map the file after the last one of ``q`` (a roll), if the writer has made it."""
    start = q.files[-1].file_end_offset if q.files else None
    if start is None:
        names = sorted((off, e.path) for e in os.scandir(q.directory)
                       if (off := L.file_name_to_offset(e.name)) is not None) if q.directory.is_dir() else []
        if not names:
            return None
        start, path = names[0]
    else:
        path = str(q.directory / L.offset_to_file_name(start))
    mf = _map(q, path, start)
    if mf is not None:
        q.files.append(mf)
    return mf


def _advance(q: MappedFileQueue, end: int) -> None:
    """Move the end of ``q``'s view forward to ``end`` (its files up to there mapped): the positions of
    the files not yet full, from the last one back. Only forward: ``CommitLog.set_end`` cuts (and
    also resets the appender's dispatch hints, which a follower's log has none of, at ~0.3 ms a call:
    most of a follower's pull)."""
    for mf in reversed(q.files):
        if mf.wrote_position >= mf.file_size:
            break
        mf.wrote_position = mf.flushed_position = min(max(end - mf.file_from_offset, mf.wrote_position),
                                                       mf.file_size)


def _remap(q: MappedFileQueue) -> None:
    """Make ``q``'s maps match its directory again: keep the maps of files that are still the same
    file (inode), map the new or replaced ones (positions: full; the caller sets the end), drop the
    deleted ones."""
    names = sorted((off, e.path) for e in os.scandir(q.directory)
                   if (off := L.file_name_to_offset(e.name)) is not None) if q.directory.is_dir() else []
    old = {mf.file_from_offset: mf for mf in q.files}
    files: list[MappedFile] = []
    for off, path in names:
        mf = old.pop(off, None)
        if mf is not None:
            if mf.maps(path):
                files.append(mf)
                continue
            _close(mf)
        mf = _map(q, path, off)
        if mf is None:
            break  # being created: the next look maps it
        mf.wrote_position = mf.flushed_position = q.file_size
        files.append(mf)
    for mf in old.values():
        _close(mf)
    q.files = files


class Follower:
    """A read-only store's view kept up with a live writer (``MessageStore(..., follow=True)``).

    Made before the store opens its files (it reads the writer's generation first), attached after.
    The store calls ``ready`` and ``refresh_queue`` before each pull; ``still`` after it."""

    def __init__(self, store_dir: str | os.PathLike[str], impl: str | None = None) -> None:
        self.store_dir = Path(store_dir)
        self.notify = NotifyFile.for_follower(store_dir, impl)
        self.waits: NotifyFile | _Poller = self.notify if self.notify is not None else _Poller()
        self.k = _impl.kernel("notify", impl)
        self._codec = _impl.kernel("codec", impl)
        n = self.notify
        self.gen = n.generation if n is not None else 0
        self._stale = n is not None and n.state == L.NOTIFY_STATE_RECOVERING
        self._cl_min = -1
        self._life = -1  # the lifecycle seq when the view was last brought up to the writer's state
        self.store: MessageStore | None = None
        self.inbox = OffsetInbox(store_dir)

    def attach(self, store: MessageStore) -> None:
        """The store's read-only open is done: make its consume queues' ends the published ones."""
        self.store = store
        self._trim_commitlog(store.commitlog.max_offset if store.commitlog.queue.files else 0)
        for cq in store.consume_queues.values():
            self._fix_end(cq)
        if self.notify is not None and not self._stale:
            self._stale = self.notify.generation != self.gen

    def close(self) -> None:
        self.waits.close()

    # -- the global view ----------------------------------------------------------------------------
    def ready(self) -> tuple[bool, int]:
        """Bring the view up to the writer's state; ``(False, token)`` while the writer recovers
        (the files may change under a reader then), else ``(True, token)`` for ``still``. The
        token is the lifecycle slot's ``seq``: the writer bumps it whenever its state, generation
        or minimum offset changes, so one load tells that nothing did."""
        n = self.notify
        if n is None:
            self._poll_commitlog()
            return True, 0
        life = int(self.k.load32(n.mm, L.NF_LIFECYCLE))
        if life == self._life and not self._stale:
            return True, life
        while True:
            gen, state = n.generation, n.state
            if state == L.NOTIFY_STATE_RECOVERING:
                return False, life
            if gen == self.gen and not self._stale:
                break
            self._resync()
            self.gen, self._stale = gen, False
        m = n.commitlog_min
        if m != self._cl_min:
            self._apply_min(m)
        d = n.dispatched
        assert self.store is not None
        if d > self.store.commitlog.max_offset:
            self._extend_commitlog(d)
        self._life = life
        return True, life

    def commitlog_end(self) -> int:
        """Where the records this follower may read end now: the writer's dispatched offset (its
        scanned end without a notify file), kept up incrementally; while the writer recovers, the
        end seen before (what it had published stays)."""
        ok, _ = self.ready()
        if ok and self.notify is not None:
            self._extend_commitlog(self.notify.dispatched)
        assert self.store is not None
        return int(self.store.commitlog.max_offset)

    def still(self, token: int) -> bool:
        """Nothing happened to the writer since ``ready`` gave ``token`` (a pull in between stands:
        the load is ordered after the pull's loads, a seqlock's second look)."""
        n = self.notify
        return n is None or int(self.k.load32(n.mm, L.NF_LIFECYCLE)) == token

    def _resync(self) -> None:
        """After a writer's restart: re-map the files recovery replaced, and re-read every end."""
        s = self.store
        assert s is not None
        s._drop_lookup()
        _remap(s.commitlog.queue)
        end = self.notify.dispatched if self.notify is not None else 0
        for cq in list(s.consume_queues.values()):
            _remap(cq.queue)
            self._fix_end(cq)
            end = max(end, cq.max_physic_offset)
        self._trim_commitlog(end)
        self._cl_min = -1

    def _trim_commitlog(self, end: int) -> None:
        """End the CommitLog view at ``end``: files that start there or later (one the writer made
        ahead of its appends) are let go, and mapped again when records reach them."""
        s = self.store
        assert s is not None
        q = s.commitlog.queue
        while q.files and q.files[-1].file_from_offset >= max(end, 0) and _close(q.files[-1]):
            q.files.pop()
        last = q.last()
        if last is not None:
            s.commitlog.set_end(min(max(end, 0), last.file_end_offset))

    def _apply_min(self, cl_min: int) -> None:
        """Retention: drop the maps of the files the writer deleted; queues start at ``cl_min``."""
        s = self.store
        assert s is not None
        s._drop_lookup()
        q = s.commitlog.queue
        while (len(q.files) > 1 and q.files[0].file_end_offset <= cl_min
               and not os.path.exists(q.files[0].path)):
            if not _close(q.files[0]):
                break
            q.files.pop(0)
        for cq in s.consume_queues.values():
            files = cq.queue.files
            while len(files) > 1 and not os.path.exists(files[0].path):
                if not _close(files[0]):
                    break
                files.pop(0)
            cq.correct_min_offset(cl_min)
        self._cl_min = cl_min

    def _extend_commitlog(self, end: int) -> None:
        """The CommitLog view reaches ``end`` (records below it are complete): map the files up to it."""
        s = self.store
        assert s is not None
        q = s.commitlog.queue
        files = q.files
        if files:  # the usual case, a pull's: ``end`` is in the last file, the ones before it are full
            last = files[-1]
            rel = end - last.file_from_offset
            before_full = len(files) == 1 or files[-2].wrote_position >= files[-2].file_size
            if 0 <= rel <= last.file_size and before_full:
                if rel > last.wrote_position:
                    last.wrote_position = last.flushed_position = rel
                return
        if end <= q.max_offset():
            return
        while not q.files or q.files[-1].file_end_offset < end:
            if _map_next(q) is None:
                break
        _advance(q, end)

    def _poll_commitlog(self) -> None:
        """No notify file: the end of the CommitLog is where valid records end (CRC checked)."""
        s = self.store
        assert s is not None
        cl = s.commitlog
        q = cl.queue
        if not q.files and _map_next(q) is None:
            return
        scan = self._codec.scan_records
        end = cl.max_offset
        while True:
            mf = q.files[-1]
            pos = end - mf.file_from_offset
            if pos >= mf.file_size:
                if _map_next(q) is None:
                    break
                end = q.files[-1].file_from_offset
                continue
            status, stop, _n, _ts = scan(mf.mm, pos, mf.file_size, True, -1)
            if status == L.ST_BLANK:
                end = mf.file_end_offset
                continue
            end = mf.file_from_offset + stop
            break
        if end > cl.max_offset:
            cl.set_end(end)

    # -- queues ----------------------------------------------------------------------------------------
    def refresh_queue(self, topic: Any, queue_id: Any) -> None:
        """Extend the view of one queue to what the writer has published (a new queue appears)."""
        s = self.store
        assert s is not None
        try:
            cq = s.consume_queues.get((topic, queue_id))
        except TypeError:
            return  # the pull reports the argument
        if cq is None:
            cq = self._discover(topic, queue_id)
            if cq is None:
                return
        self._extend(cq)

    def _discover(self, topic: Any, queue_id: Any) -> ConsumeQueue | None:
        from ..consumequeue import ConsumeQueue

        s = self.store
        assert s is not None
        if type(topic) is not str or type(queue_id) is not int or not 0 <= queue_id <= 0x7FFFFFFF:
            return None
        try:
            cq = ConsumeQueue(s.store_dir, topic, queue_id, file_size=s.config.cq_file_size, read_only=True,
                              pool=s._map_pool)
        except InvalidTopicError:
            return None
        if not cq.directory.is_dir():
            return None
        _remap(cq.queue)
        if not cq.queue.files:
            return None
        self._fix_end(cq)
        s.consume_queues[(topic, queue_id)] = cq
        return cq

    def _fix_end(self, cq: ConsumeQueue) -> None:
        """The published end of a queue's last file (earlier files are full: the writer makes the next
        file only then), its last unit's record end, and its minimum offset."""
        files = cq.queue.files
        if not files:
            return
        last = files[-1]
        last.wrote_position = last.flushed_position = 0
        for mf in files[:-1]:
            mf.wrote_position = mf.flushed_position = mf.file_size
        cq.max_physic_offset = -1
        self._extend(cq)
        if cq.max_physic_offset < 0:  # nothing in the last file: the previous file's last unit
            for mf in reversed(files[:-1]):
                off, size, _ = _unpack_unit(mf.mm, mf.file_size - _UNIT)
                if size != _FILLER_SIZE:
                    cq.max_physic_offset = off + size
                    break
        cl_min = self._cl_min if self._cl_min >= 0 else (self.store.commitlog.min_offset if self.store else 0)
        cq.correct_min_offset(cl_min)

    def _extend(self, cq: ConsumeQueue) -> None:
        q = cq.queue
        if not q.files and _map_next(q) is None:
            return
        last = q.files[-1]
        grow = -1
        units_end = self.k.units_end
        while True:
            w = last.wrote_position
            mm = last.mm
            if self.notify is not None:
                end = units_end(mm, w, last.file_size)
            else:
                end = self._checked_end(cq, last)
            if end > w:
                last.wrote_position = last.flushed_position = end
                off, size, _ = _unpack_unit(mm, end - _UNIT)
                if size != _FILLER_SIZE:
                    cq.max_physic_offset = grow = off + size
            if end < last.file_size:
                break
            nxt = _map_next(q)
            if nxt is None:
                break
            last = nxt
        if grow > 0 and self.store is not None:
            self._extend_commitlog(grow)

    def _checked_end(self, cq: ConsumeQueue, mf: MappedFile) -> int:
        """No notify file: the units from ``mf``'s position whose records are below the CommitLog's
        scanned end and name this queue and offset (a broker writes units with no order to rely on)."""
        s = self.store
        assert s is not None
        cl = s.commitlog
        cl_end = cl.max_offset
        pos = mf.wrote_position
        while pos + _UNIT <= mf.file_size:
            off, size, _ = _unpack_unit(mf.mm, pos)
            if size == 0:
                break
            if not (off == 0 and size == _FILLER_SIZE):
                if off < 0 or size <= 0 or off + size > cl_end:
                    break
                try:
                    rec = cl.queue.find(off)
                except Exception:  # noqa: BLE001 - not mapped (yet): not published
                    break
                at = off - rec.file_from_offset
                head = _unpack_head(rec.mm, at) if at + 28 <= rec.file_size else None
                if head is None or head[0] != size or head[1] != cq.queue_id \
                        or head[2] != (mf.file_from_offset + pos) // _UNIT:
                    break
            pos += _UNIT
        return pos

    # -- consumer offsets ----------------------------------------------------------------------------------
    def fetch_offset(self, key: str, queue_id: int) -> int:
        """What the writer will answer: consumerOffset.json with the inbox's lines on top."""
        path = self.store_dir / "config" / "consumerOffset.json"
        with self.inbox.locked(shared=True) as (_fd, lines):
            from ..configfiles import load_with_bak

            data = load_with_bak(path)
            table = (data or {}).get("offsetTable", {}) if isinstance(data, dict) else {}
            got = table.get(key, {}).get(str(queue_id), -1) if isinstance(table, dict) else -1
            for k, qid, off in lines:
                if k == key and qid == queue_id:
                    got = off
        return int(got) if isinstance(got, int) and not isinstance(got, bool) else -1


def _unpack_unit(buf: Any, pos: int) -> tuple[int, int, int]:
    return _UNIT_STRUCT.unpack_from(buf, pos)


def _unpack_head(buf: Any, pos: int) -> tuple[int, int, int]:
    """(TOTALSIZE, QUEUEID, QUEUEOFFSET) of the record at ``pos``."""
    size, _magic, _crc, qid, _flag, qoff = _HEAD_STRUCT.unpack_from(buf, pos)
    return size, qid, qoff
