"""Exact key lookup over IndexFiles and the CommitLog: pure-Python twin of ``rmqcore._native.keylookup``.

``KeyLookup`` holds the mapped index files (oldest first) and CommitLog files of a store and
answers queryMessage in one call: the index walk of ``IndexService.queryOffset`` (newest file
first, files outside ``[begin, end]`` skipped, the walk stopping after a file that began before
``begin`` or once ``max_num`` hash hits are found), then the re-check of every hit against its
record: a valid record (CRC checked when asked) of ``topic`` whose UNIQ_KEY is ``key`` or whose KEYS
has ``key`` as a token. Hash collisions are dropped.

``find`` returns ``(True, answer)``, or ``(False, None)`` when it cannot decide cheaply and exactly;
the caller then takes the general path, which also raises the right errors: an index header
that is impossible, a hit on invalid bytes (torn, bad magic, size or CRC), text that is not valid
UTF-8, a key that is not encodable. ``answer`` is the ascending list of matching offsets, or with
``newest_body`` the stored body of the match with the highest offset (None without a match).

The lookup holds no locks; the store rebuilds it whenever a file is added or removed, and
releases it before any file is unmapped. A released lookup answers every call with
LOOKUP_CANNOT_ANSWER (``find``: ``(False, None)``): the general path, over a current lookup, answers
instead.
"""

from __future__ import annotations

import struct
from bisect import bisect_right
from collections.abc import Callable
from typing import Any, TypeVar

from ..errors import ConfigError, IndexCorruptError
from ..layout import LOOKUP_CANNOT_ANSWER, LOOKUP_DISPATCH_FIRST, ST_BLANK, ST_END, ST_MSG
from . import codec as _codec
from . import indexfile as _index
from .hashing import index_key_hash

__all__ = ["KeyCache", "KeyLookup", "LookupFront", "props_have_key"]

_TIMES = struct.Struct(">qqqq")


def _utf8(b: bytes) -> str | None:
    try:
        return b.decode("utf-8")
    except UnicodeDecodeError:
        return None


def props_have_key(props: bytes, key: bytes) -> int:
    """1 when ``props`` names ``key`` as UNIQ_KEY or as a KEYS token, 0 when not, -1 when the
    properties are not valid UTF-8 (see csrc/rmq_lookup.h)."""
    if _utf8(props) is None:
        return -1
    found: dict[bytes, bytes] = {}
    for seg in props.split(b"\x02"):
        i = seg.find(b"\x01")
        if 0 < i < len(seg) - 1:
            found[seg[:i]] = seg[i + 1 :]
    if not key:
        return 0
    if found.get(b"UNIQ_KEY") == key:
        return 1
    keys = found.get(b"KEYS")
    return 1 if keys is not None and key in keys.split(b" ") else 0


_I32 = struct.Struct(">i")
_ENTRY = struct.Struct(">iq")
_NO_END = 2**63 - 1
_T = TypeVar("_T")


class KeyCache:
    """The newest indexed offset of each key hash (``csrc/rmq_keycache.h``): a lookup accelerator
    the store keeps across the KeyLookups it rebuilds. It takes in index entries by reading the
    files sequentially, remembering how many of each file (by name) it has seen, and never answers
    alone: the lookup re-checks the record and walks the index on any mismatch."""

    def __init__(self) -> None:
        self._newest: dict[int, int] = {}
        self._multi: set[int] = set()  # hashes taken in more than once
        self._counts: dict[Any, int] = {}

    @property
    def size(self) -> int:
        """How many distinct key hashes it holds."""
        return len(self._newest)

    def newest(self, key_hash: int) -> int:
        """The largest offset indexed under ``key_hash``, or -1."""
        return self._newest.get(key_hash, -1)

    def entries(self, key_hash: int) -> int:
        """How many entries were taken in under ``key_hash``: 0, 1, or 2 for more than one. With 1,
        that entry is the only one the ingested files hold for the hash (each file's entries are
        taken in once), so an index walk without a time window would find exactly it."""
        if key_hash not in self._newest:
            return 0
        return LOOKUP_CANNOT_ANSWER if key_hash in self._multi else 1

    def _ingest(self, name: Any, buf: Any, slots: int, entries: int) -> None:
        count = min(_I32.unpack_from(buf, 36)[0], entries)  # entries [1, count) are written
        have = self._counts.get(name, 0)
        if count <= have:
            return
        newest = self._newest
        base = 40 + slots * 4
        for i in range(max(have, 1), count):
            h, phys = _ENTRY.unpack_from(buf, base + i * 20)
            if phys < 0:
                continue
            held = newest.get(h)
            if held is None:
                newest[h] = phys
            else:
                self._multi.add(h)
                if phys > held:
                    newest[h] = phys
        self._counts[name] = count


class KeyLookup:
    """See the module docstring. ``index_buffers`` oldest first; ``commitlog_buffers`` in offset order
    with their global start offsets ``commitlog_froms``."""

    def __init__(self, index_buffers: list[Any], slot_count: int, max_entries: int, max_steps: int,
                 commitlog_buffers: list[Any], commitlog_froms: list[int], live: Any = None,
                 dispatched: Any = None, static_end: int = 0, max_num: int = 64, cache: Any = None,
                 index_ids: list[Any] | None = None) -> None:
        for a in (live, dispatched):
            if a is not None and (a.dtype.kind != "i" or a.dtype.itemsize != 8 or a.shape != (1,)):
                raise ValueError("live and dispatched must be int64 arrays of one item")
        self._live, self._dispatched, self._static_end, self._max_num = live, dispatched, static_end, max_num
        self._released = False
        if len(commitlog_buffers) != len(commitlog_froms):
            raise ValueError("commitlog_buffers and commitlog_froms differ in length")
        self._idx = list(index_buffers)
        self._slots, self._entries, self._steps = int(slot_count), int(max_entries), int(max_steps)
        self._cl = list(commitlog_buffers)
        self._from = [int(f) for f in commitlog_froms]
        for b in self._idx:
            if len(memoryview(b)) < _index.index_file_size(self._slots, self._entries):
                raise ValueError("an index buffer is shorter than the geometry")
        if cache is not None and (not isinstance(cache, KeyCache) or index_ids is None
                                  or len(index_ids) != len(self._idx)):
            raise ValueError("a cache needs a KeyCache and one id per index buffer")
        self._cache: KeyCache | None = cache
        self._ids = list(index_ids) if cache is not None and index_ids is not None else []

    def release(self) -> None:
        # The buffers stay listed: a query under way when a finalizer releases the lookup ends over
        # them and answers LOOKUP_CANNOT_ANSWER (see _guarded); the native twin holds exports instead.
        self._released = True

    def _guarded(self, fn: Callable[..., _T], *args: Any) -> _T | int:
        """``fn(*args)``, or LOOKUP_CANNOT_ANSWER (the general path must answer) when the lookup was released meanwhile
        (by a finalizer, say: the query then ends over the buffers it listed, and a map closed
        under it raises ValueError)."""
        try:
            got = fn(*args)
        except ValueError:
            if self._released:
                return LOOKUP_CANNOT_ANSWER
            raise
        return LOOKUP_CANNOT_ANSWER if self._released else got

    def find(self, topic: str, key: str, begin: int, end: int, max_num: int, cl_min: int, cl_end: int,
             verify_crc: bool, newest_body: bool) -> tuple[bool, Any]:
        if self._released:
            return False, None
        try:
            tb, kb = topic.encode("utf-8"), key.encode("utf-8")
        except UnicodeEncodeError:
            return False, None
        raw = self._walk(topic, key, begin, end, max_num)
        if raw is None:
            return False, None
        hits: list[int] = []
        best_body: bytes | None = None
        for off in raw:
            m, body = self._check_hit(off, tb, kb, cl_min, cl_end, verify_crc)
            if m < 0:
                return False, None
            if m:
                hits.append(off)
                if newest_body and off == max(hits):
                    best_body = body
        if newest_body:
            return True, best_body
        hits.sort()
        return True, hits

    def _walk(self, topic: str, key: str, begin: int, end: int, max_num: int) -> list[int] | None:
        """IndexService.queryOffset's walk: the hash matches, newest file first, at most
        ``max_num``; None when the general path must answer (a header it cannot read)."""
        h = index_key_hash(topic + "#" + key)
        raw: list[int] = []
        for buf in reversed(self._idx):
            b, e, _, _ = _TIMES.unpack_from(buf, 0)
            try:
                if (begin < b and end > e) or b <= begin <= e or b <= end <= e:
                    raw += _index.index_select(buf, self._slots, self._entries, h, begin, end, max_num - len(raw),
                                               self._steps)
            except (IndexCorruptError, ConfigError, ValueError):  # the general path reports it
                return None
            if b < begin or len(raw) >= max_num:
                break
        return raw

    def offsets_raw(self, topic: str, key: str, begin: int, end: int, max_num: int) -> list[int] | int:
        """The raw answer (``MessageStore.query_offsets``): the walk's offsets (at most ``max_num`` and
        the lookup's own cap), hash matches only and no record read, sorted ascending;
        LOOKUP_DISPATCH_FIRST when the store's dispatched end is behind the CommitLog's (dispatch,
        then ask again), LOOKUP_CANNOT_ANSWER when the general path must answer."""
        cl_end = self._end_now()
        if cl_end < 0:
            return LOOKUP_DISPATCH_FIRST if cl_end == -1 else LOOKUP_CANNOT_ANSWER
        try:
            topic.encode("utf-8")
            key.encode("utf-8")
        except UnicodeEncodeError:
            return LOOKUP_CANNOT_ANSWER
        raw = self._guarded(self._walk, topic, key, begin, end, min(max_num, self._max_num))
        if raw is None:
            return LOOKUP_CANNOT_ANSWER
        return raw if isinstance(raw, int) else sorted(raw)

    def _check_hit(self, off: int, tb: bytes, kb: bytes, cl_min: int, cl_end: int,
                   verify_crc: bool) -> tuple[int, bytes | None]:
        """Is the record at ``off`` a valid message of topic ``tb`` with key ``kb``? (1, its body)
        yes; (0, None) no (or outside ``[cl_min, cl_end)``, or not a message); (-1, None) when the
        general path must decide."""
        if off < cl_min or off >= cl_end:
            return 0, None
        j = bisect_right(self._from, off) - 1
        if j < 0:
            return 0, None
        buf, base = self._cl[j], self._from[j]
        limit = min(len(memoryview(buf)), cl_end - base)
        st, _size = _codec.check_record(buf, off - base, limit, verify_crc)
        if st in (ST_BLANK, ST_END):
            return 0, None
        if st != ST_MSG:
            return -1, None
        rec = _codec.decode_record(buf, off - base, limit, False)
        assert rec is not None
        if rec[17] != tb:
            return (0 if _utf8(rec[17]) is not None else -1), None
        m = props_have_key(rec[18], kb)
        return m, (rec[16] if m == 1 else None)

    def _end_now(self) -> int:
        """The CommitLog end a query sees: the appender's published end (``static_end`` while it
        publishes none); -1 when the store's dispatched end is behind it, -2 once released."""
        if self._released:
            return -2
        cl_end = self._static_end
        if self._live is not None and int(self._live[0]) >= 0:
            cl_end = int(self._live[0])
            if self._dispatched is not None and int(self._dispatched[0]) < cl_end:
                return -1
        return cl_end

    def newest_body(self, topic: str, key: str, begin: int, end: int) -> bytes | None | int:
        """``find(..., newest_body=True)`` for ``MessageStore.lookup``: the end of the CommitLog is the
        appender's published end (``live``; ``static_end`` while it publishes none), and when the
        store's ``dispatched`` end is behind it the answer is LOOKUP_DISPATCH_FIRST
        (dispatch, then ask again). Returns bytes or None, LOOKUP_DISPATCH_FIRST, or LOOKUP_CANNOT_ANSWER (the general path answers)."""
        cl_end = self._end_now()
        if cl_end < 0:
            return LOOKUP_DISPATCH_FIRST if cl_end == -1 else LOOKUP_CANNOT_ANSWER
        return self._guarded(self._newest_body, topic, key, begin, end, cl_end)

    def _newest_body(self, topic: str, key: str, begin: int, end: int, cl_end: int) -> bytes | None | int:
        if self._cache is not None and begin <= 0 and end == _NO_END:
            # the cache names the newest entry of the key's hash: when its record is this key's,
            # no newer message has the key; anything else (a collision, a record gone) walks
            got = self._cached_body(topic, key, cl_end)
            if got is not None:
                return got
        ok, got = self.find(topic, key, begin, end, self._max_num, 0, cl_end, True, True)
        return got if ok else LOOKUP_CANNOT_ANSWER

    def offsets_now(self, topic: str, key: str, begin: int, end: int, max_num: int) -> list[int] | int:
        """``find(...)``'s exact offsets for ``query_by_key``, with the CommitLog's end read as
        ``newest_body`` reads it. Returns the ascending list, LOOKUP_DISPATCH_FIRST (dispatch, then ask
        again) or LOOKUP_CANNOT_ANSWER (the general path must answer)."""
        return self._guarded(self._offsets_now, topic, key, begin, end, max_num, self._end_now())

    def _offsets_now(self, topic: str, key: str, begin: int, end: int, max_num: int, cl_end: int) -> list[int] | int:
        if cl_end < 0:
            return LOOKUP_DISPATCH_FIRST if cl_end == -1 else LOOKUP_CANNOT_ANSWER
        if self._cache is not None and begin <= 0 and end == _NO_END and max_num > 0:
            # a key hash indexed once: its one entry is all the walk would find
            got = self._cached_offsets(topic, key, cl_end)
            if got is not None:
                return got
        ok, got = self.find(topic, key, begin, end, min(max_num, self._max_num), 0, cl_end, True, False)
        return got if ok else LOOKUP_CANNOT_ANSWER

    def messages_now(self, topic: str, key: str, begin: int, end: int, max_num: int, factory: Any) -> Any:
        """``offsets_now`` with each match decoded: ``[factory(offset, raw)]`` in ascending offset
        order, ``raw`` the tuple ``codec.decode_record`` returns (the records were checked, CRC
        included, by the lookup); or an outcome (layout.LOOKUP_*) as ``offsets_now`` answers."""
        return self._guarded(self._messages_now, topic, key, begin, end, max_num, factory, self._end_now())

    def _messages_now(self, topic: str, key: str, begin: int, end: int, max_num: int, factory: Any,
                      cl_end: int) -> Any:
        got = self._offsets_now(topic, key, begin, end, max_num, cl_end)
        if not isinstance(got, list):
            return got
        out = []
        for off in got:  # cl_end >= 0 here: the offsets are an answer
            j = bisect_right(self._from, off) - 1
            buf, base = self._cl[j], self._from[j]
            limit = min(len(memoryview(buf)), cl_end - base)
            st, _size = _codec.check_record(buf, off - base, limit, False)
            if st != ST_MSG:
                return LOOKUP_CANNOT_ANSWER  # checked a moment ago: let the general path look again
            out.append(factory(off, _codec.decode_record(buf, off - base, limit, False)))
        return out

    def _cache_probe(self, topic: str, key: str) -> tuple[KeyCache, int, bytes, bytes] | None:
        """The cache, caught up with the index files, and the key's index hash and UTF-8 bytes;
        None for a key the walk must handle (not encodable)."""
        cache = self._cache
        assert cache is not None
        for name, buf in zip(self._ids, self._idx):
            cache._ingest(name, buf, self._slots, self._entries)
        try:
            tb, kb = topic.encode("utf-8"), key.encode("utf-8")
        except UnicodeEncodeError:
            return None
        return cache, index_key_hash(topic + "#" + key), tb, kb

    def _cached_offsets(self, topic: str, key: str, cl_end: int) -> list[int] | None:
        """[off] or [] when the cache holds exactly one entry for the key's hash (or none at all);
        None when the walk must answer."""
        probe = self._cache_probe(topic, key)
        if probe is None:
            return None
        cache, h, tb, kb = probe
        n = cache.entries(h)
        if n == 0:
            return []
        if n != 1:
            return None
        off = cache.newest(h)
        m, _ = self._check_hit(off, tb, kb, 0, cl_end, True)
        if m < 0:
            return None
        return [off] if m else []

    def _cached_body(self, topic: str, key: str, cl_end: int) -> bytes | None:
        probe = self._cache_probe(topic, key)
        if probe is None:
            return None
        cache, h, tb, kb = probe
        off = cache.newest(h)
        if off < 0:
            return None
        m, body = self._check_hit(off, tb, kb, 0, cl_end, True)
        return body if m == 1 else None


def _plain(topic: Any, key: Any, *ints: Any) -> bool:
    """The arguments a lookup answers itself: str topic and key (exactly), ints within int64."""
    return type(topic) is str and type(key) is str and all(type(i) is int and -_NO_END - 1 <= i <= _NO_END
                                                           for i in ints)


class LookupFront:
    """``MessageStore.lookup``, ``query_by_key`` and ``query_offsets`` as one call each, which the
    store binds in place of its methods (the native twin saves the Python frames): ``current``'s
    answer (a KeyLookup, or None), or the store's general path (``general``, the store's KeyQuery:
    its ``lookup_general(topic, key, begin, end)``, ``query_general(topic, key, begin, end,
    max_num, raw)`` and ``query_offsets(topic, key, begin, end, max_num)``) when there is none or
    it cannot answer (dispatch is behind, a record needs the general path, or it was released since
    it was set), and for arguments other than str topic and key and ints within int64 (it checks them).
    ``message`` is the class query_by_key's matches are built as (MessageExt). Each call runs inside
    ``gate``, the store's lifecycle gate (``rmqcore._pure.gate``): once the store closes, it raises
    StoreClosedError, and the store's close waits for the calls under way."""

    def __init__(self, general: Any, message: Any, gate: Any) -> None:
        if gate is None:
            raise TypeError("a LookupFront needs the store's gate")
        self._general = general
        self._message = message
        self._gate = gate
        self.current: KeyLookup | None = None

    def lookup(self, topic: str, key: str, begin: int = 0, end: int = _NO_END) -> Any:
        with self._gate:
            return self._lookup(topic, key, begin, end)

    def _lookup(self, topic: str, key: str, begin: int, end: int) -> Any:
        lk = self.current
        if lk is not None and _plain(topic, key, begin, end):
            got = lk.newest_body(topic, key, begin, end)  # LOOKUP_CANNOT_ANSWER when released since it was set (files changed)
            if type(got) is not int:
                return got
        return self._general.lookup_general(topic, key, begin, end)

    def query_by_key(self, topic: str, key: str, begin: int = 0, end: int = _NO_END, max_num: int = 64, *,
                     raw: bool = False) -> Any:
        with self._gate:
            return self._query_by_key(topic, key, begin, end, max_num, raw)

    def _query_by_key(self, topic: str, key: str, begin: int, end: int, max_num: int, raw: bool) -> Any:
        lk = self.current
        if lk is not None and raw is False and _plain(topic, key, begin, end, max_num):
            got = lk.messages_now(topic, key, begin, end, max_num, self._message)  # LOOKUP_CANNOT_ANSWER when released since
            if type(got) is list:
                return got
        return self._general.query_general(topic, key, begin, end, max_num, raw)

    def query_offsets(self, topic: str, key: str, begin: int = 0, end: int = _NO_END,
                      max_num: int = 64) -> Any:
        with self._gate:
            return self._query_offsets(topic, key, begin, end, max_num)

    def _query_offsets(self, topic: str, key: str, begin: int, end: int, max_num: int) -> Any:
        lk = self.current
        if lk is not None and _plain(topic, key, begin, end, max_num):
            got = lk.offsets_raw(topic, key, begin, end, max_num)  # an int when dispatch is behind, or released
            if type(got) is list:
                return got
        return self._general.query_offsets(topic, key, begin, end, max_num)
