"""Key queries (queryMessage): ``query_by_key``, ``query_offsets`` and ``lookup`` over the index files.

``KeyQuery`` owns the native ``KeyLookup`` over the mapped index and CommitLog files (rebuilt when
files come or go), the ``KeyCache`` that outlives those rebuilds, and the ``LookupFront``: the one
native call that answers ``lookup`` / ``query_by_key`` from the current ``KeyLookup`` and calls the
general path below when it cannot answer (no lookup yet, files changed, ``raw=True``, odd arguments).
"""
from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from .. import _impl
from ..config import bool_arg, bound_arg
from ..errors import ConfigError, OffsetOutOfRangeError
from ..message import MessageExt

if TYPE_CHECKING:
    from . import MessageStore

__all__ = ["KeyQuery"]

_I64_MIN, _I64_MAX = -(2**63), 2**63 - 1


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


class KeyQuery:
    """The store's key queries (the caller is inside the store's gate, or ``front`` enters it)."""

    def __init__(self, store: MessageStore) -> None:
        cfg = store.config
        self._store = store
        self._kernel = _impl.kernel("keylookup", store.impl)
        self._max_batch = cfg.max_msgs_num_batch
        self._lookup: Any = None
        self._files: Any = None  # the index files the lookup was built over
        self._ncl = 0  # and the number of CommitLog files
        # outlives the lookups rebuilt as files come and go (it remembers what it took in per file)
        self.key_cache: Any = self._kernel.KeyCache() if cfg.key_cache and cfg.message_index_enable else None
        # MessageStore.lookup, query_by_key and query_offsets: one native call over the current lookup
        self.front = self._kernel.LookupFront(self, MessageExt, store._gate)

    def _index(self) -> Any:
        s = self._store
        s._check_open()
        if s.index is None:
            raise ConfigError("the message index is disabled (message_index_enable=False)")
        return s.index

    def query_general(self, topic: str, key: str, begin: int, end: int, max_num: int,
                      raw: bool) -> list[MessageExt]:
        """``query_by_key`` when the front cannot answer."""
        begin, end, max_num = _query_args("query_by_key", topic, key, begin, end, max_num)
        raw = bool_arg(raw, "raw")
        self._index()
        if not raw:  # dispatch first, then the one-call path over a current lookup
            self._store._dispatch.caught_up()
            got = self.current().messages_now(topic, key, begin, end, max_num, MessageExt)
            if type(got) is list:  # else an outcome (layout.LOOKUP_*): the index walk below answers
                return got
        cl = self._store.commitlog
        out = []
        for off in self.query_offsets(topic, key, begin, end, max_num):
            try:
                m = cl.read(off, verify_crc=True)
            except OffsetOutOfRangeError:
                continue
            if raw or (m.topic == topic and (m.uniq_key == key or key in m.keys)):
                out.append(m)
        return out

    def lookup_general(self, topic: str, key: str, begin: int, end: int) -> bytes | None:
        """``lookup`` when the front cannot answer."""
        begin, end, _ = _query_args("lookup", topic, key, begin, end, 0)
        self._index()
        self._store._dispatch.caught_up()
        got = self.current().newest_body(topic, key, begin, end)
        if type(got) is not int:  # an int is an outcome (layout.LOOKUP_*): query_by_key answers
            return got  # type: ignore[no-any-return]
        found = self.front.query_by_key(topic, key, begin, end, self._max_batch)
        return found[-1].body if found else None

    def query_offsets(self, topic: str, key: str, begin: int, end: int, max_num: int) -> list[int]:
        """The raw index answer: physical offsets sorted ascending (hash matches only); ``query_offsets``
        when the front cannot answer."""
        begin, end, max_num = _query_args("query_offsets", topic, key, begin, end, max_num)
        self._store._dispatch.caught_up()
        index = self._index()
        max_num = min(max_num, self._max_batch)
        # one kernel call over the mapped index files; the general path below when it answers
        # LOOKUP_CANNOT_ANSWER (released meanwhile included)
        got = self.current().offsets_raw(topic, key, begin, end, max_num)
        if type(got) is list:
            return got
        raw, _, _ = index.query_offset(topic, key, max_num, begin, end)
        return sorted(raw)

    # -- the native lookup over the current files -------------------------------------------------------
    def stale(self) -> bool:
        """Index or CommitLog files came or went since the lookup was built."""
        s = self._store
        return (s.index is None or self._files is not s.index._files
                or self._ncl != len(s.commitlog.queue.files))

    def current(self) -> Any:
        lk = self._lookup
        if lk is None or self.stale():
            lk = self._build()
        return lk

    def _build(self) -> Any:
        self.drop()
        s = self._store
        cl, index = s.commitlog, s.index
        files = cl.queue.files
        assert index is not None
        ifiles = index._files
        steps = ifiles[0].max_steps if ifiles else index.max_entries
        lk = self._kernel.KeyLookup(
            [f._mm for f in ifiles], index.slot_count, index.max_entries, steps,
            [mf.mm for mf in files], [mf.file_from_offset for mf in files],
            None if s.read_only else cl._appender.live,
            s._dispatch.reput_pub if s._dispatch.read_your_writes else None, cl.max_offset, self._max_batch,
            self.key_cache, [_index_file_id(f) for f in ifiles] if self.key_cache is not None else None)
        self._lookup, self._files, self._ncl = lk, ifiles, len(files)
        self.front.current = lk
        return lk

    def drop(self) -> None:
        """Release the lookup's buffers (before any file is unmapped)."""
        lk, self._lookup, self._files = self._lookup, None, None
        self.front.current = None
        if lk is not None:
            lk.release()

    def drop_if_stale(self) -> None:
        """After dispatch: files came or went, so the next lookup rebuilds it."""
        if self._lookup is not None and self.stale():
            self.drop()


def _index_file_id(f: Any) -> tuple[str, int]:
    """What the key cache knows an index file by: its name and inode (a name can come back)."""
    return f.name, os.stat(f.path).st_ino
