"""Exact key lookup (``KeyLookup``, ``MessageStore.lookup`` and ``query_by_key``'s native path).

The one-call path must give exactly what the general path gives (index walk, then each hit read,
CRC-checked and re-checked against topic, KEYS tokens and UNIQ_KEY), fall back to it where it
cannot decide, and never hold a file open across a roll, a deletion or close.
"""
from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rmqcore import _impl
from rmqcore import layout as L
from rmqcore.errors import CorruptionError, StoreClosedError
from rmqcore.message import parse_properties
from rmqcore.store import MessageStore
from tests.conftest import IMPLS

GEOM = dict(commitlog_file_size=4096, cq_file_size=200, index_slots=17, index_entries=40)


def reference_has_key(props: bytes, key: bytes) -> int:
    """What MessageExt.uniq_key / .keys say, from the decoded text."""
    try:
        text = props.decode("utf-8")
    except UnicodeDecodeError:
        return -1
    p = parse_properties(text)
    k = key.decode("utf-8", "replace")
    ks = p.get("KEYS")
    return int(p.get("UNIQ_KEY") == k or (ks is not None and k in [t for t in ks.split(" ") if t]))


seg = st.one_of(
    st.sampled_from([b"KEYS", b"UNIQ_KEY", b"TAGS", b"K", b""]),
    st.binary(max_size=4),
)
value = st.lists(st.sampled_from([b"a", b"b", b"ab", b" ", b"", b"\x01", b"\xff", "é".encode()]), max_size=5).map(b"".join)


@settings(max_examples=400, deadline=None)
@given(pairs=st.lists(st.tuples(seg, value), max_size=5), key=st.sampled_from([b"a", b"b", b"ab", b"", b"a b", b"\x01"]),
       trailing=st.booleans())
def test_props_have_key_twins_match_the_decoded_reading(pairs: list[tuple[bytes, bytes]], key: bytes,
                                                        trailing: bool) -> None:
    props = b"\x02".join(n + b"\x01" + v for n, v in pairs) + (b"\x02" if trailing and pairs else b"")
    want = reference_has_key(props, key)
    for name in IMPLS:
        assert _impl.kernel("keylookup", name).props_have_key(props, key) == want


def _fill(s: MessageStore) -> list[Any]:
    out = []
    for i in range(120):
        # "Aa" and "BB" share Java's String.hashCode, so T#Aa and T#BB share an index slot and hash
        keys = ["k%d" % i, "Aa" if i % 2 else "BB", "shared"]
        out.append(s.put("T", b"body-%04d" % i, i % 3, keys=keys))
    out.append(s.put("U", b"other-topic", 0, keys=["k5", "shared"]))
    out.append(s.put("T", b"uniq", 0, properties={"UNIQ_KEY": "u-1"}))
    return out


def test_lookup_and_exact_queries_match_the_general_path(tmp_path: Path, impl: Any) -> None:
    with MessageStore(tmp_path, impl=impl.name, **GEOM) as s:
        _fill(s)
        s.dispatch()
        assert len(s.index._files) > 1  # the index rolled: the walk crosses files
        assert s.lookup("T", "k7") == b"body-0007"
        assert s.lookup("U", "k5") == b"other-topic"
        assert s.lookup("T", "u-1") == b"uniq"
        assert s.lookup("T", "nope") is None
        assert s.lookup("V", "k5") is None
        # newest of several: the last "Aa" (i = 119) within the raw cut of max_msgs_num_batch
        assert s.lookup("T", "Aa") == b"body-0119"
        for key in ("k3", "Aa", "BB", "shared", "u-1", "nope"):
            fast = [(m.position, m.body) for m in s.query_by_key("T", key)]
            s._exact_offsets = lambda *a: None  # type: ignore[method-assign]  # force the general path
            slow = [(m.position, m.body) for m in s.query_by_key("T", key)]
            del s._exact_offsets
            assert fast == slow
            raw = s.query_offsets("T", key)
            assert {p for p, _ in fast} <= set(raw)
        # the collision: raw answers include BB's messages for Aa, exact ones do not
        aa = s.query_by_key("T", "Aa")
        assert aa and all(m.body[-1] in b"13579" for m in aa)
        assert len(s.query_by_key("T", "Aa", raw=True)) > len(aa)


def test_time_window_and_max_num(tmp_path: Path, impl: Any) -> None:
    clock = iter(range(1_700_000_000_000, 1_700_000_000_000 + 10**9, 1000))
    with MessageStore(tmp_path, impl=impl.name, clock=lambda: next(clock), **GEOM) as s:
        for i in range(30):
            s.put("T", b"m%02d" % i, 0, keys="same")
        s.dispatch()
        every = s.query_by_key("T", "same")
        assert [m.body for m in every] == [b"m%02d" % i for i in range(30)]
        few = s.query_by_key("T", "same", max_num=4)
        assert [m.body for m in few] == [b"m%02d" % i for i in range(26, 30)]  # newest first, then sorted
        t10 = every[10].store_timestamp
        window = s.query_by_key("T", "same", begin=t10, end=t10 + 4000)
        assert [m.body for m in window] == [b"m%02d" % i for i in range(10, 15)]
        assert s.lookup("T", "same", end=t10) == b"m10"


def test_invalid_utf8_properties_take_the_general_path(tmp_path: Path, impl: Any) -> None:
    with MessageStore(tmp_path, impl=impl.name, **GEOM) as s:
        s.put("T", b"ok", 0, keys="k")
        r = s.put("T", b"bad", 0, properties={"KEYS": "k", "X": "zz"})
        s.dispatch()
        # properties are outside the body CRC: make one value invalid UTF-8 in place
        mf = s.commitlog.queue.find(r.physical_offset)
        at = r.physical_offset - mf.file_from_offset
        rec = bytes(mf.mm[at : at + r.size])
        mf.mm[at + rec.index(b"X\x01zz") + 2] = 0xFF
        files = s.commitlog.queue.files
        lk = s._keys._kernel.KeyLookup([f._mm for f in s.index._files], s.index.slot_count, s.index.max_entries,
                                    s.index.max_entries, [mf.mm for mf in files], [mf.file_from_offset for mf in files])
        try:
            assert lk.find("T", "k", 0, 2**63 - 1, 64, 0, s.commitlog.max_offset, True, False) == (False, None)
            # a key that UTF-8 cannot encode is undecidable too
            assert lk.find("T", "\udcff", 0, 2**63 - 1, 64, 0, s.commitlog.max_offset, True, False) == (False, None)
        finally:
            lk.release()
        # the general path decodes with U+FFFD and still finds both
        assert [m.body for m in s.query_by_key("T", "k")] == [b"ok", b"bad"]
        assert s.lookup("T", "k") == b"bad"
        assert s.lookup("T", "\udcff") is None


def test_a_corrupt_record_is_reported_not_served(tmp_path: Path, impl: Any) -> None:
    with MessageStore(tmp_path, impl=impl.name, **GEOM) as s:
        rs = [s.put("T", b"payload-%d" % i, 0, keys="k%d" % i) for i in range(5)]
        s.dispatch()
        assert s.lookup("T", "k2") == b"payload-2"
        mf = s.commitlog.queue.find(rs[2].physical_offset)
        at = rs[2].physical_offset - mf.file_from_offset
        idx = bytes(mf.mm[at : at + rs[2].size]).index(b"payload-2")
        mf.mm[at + idx] ^= 0x01  # a bit flip in the body: the CRC no longer matches
        with pytest.raises(CorruptionError):
            s.lookup("T", "k2")
        with pytest.raises(CorruptionError):
            s.query_by_key("T", "k2")
        assert s.lookup("T", "k3") == b"payload-3"
        mf.mm[at + idx] ^= 0x01


def test_lookup_survives_rolls_deletions_and_close(tmp_path: Path, impl: Any) -> None:
    s = MessageStore(tmp_path, impl=impl.name, delete_when="99", **GEOM)
    for i in range(40):
        s.put("T", b"x%03d" % i + b"." * 150, 0, keys="k%d" % i)
    assert s.lookup("T", "k1") is not None
    before = len(s.commitlog.queue.files)
    for i in range(40, 200):  # new CommitLog and index files appear: the lookup is rebuilt
        s.put("T", b"x%03d" % i + b"." * 150, 0, keys="k%d" % i)
    assert len(s.commitlog.queue.files) > before
    assert s.lookup("T", "k199").startswith(b"x199")
    later = int(time.time() * 1000) + 100 * 3600 * 1000
    assert s.clean_expired(later, force=True, usage_ratio=10)  # unmaps files the lookup had exported
    assert s.lookup("T", "k1") is None  # its file is gone
    assert s.lookup("T", "k199").startswith(b"x199")  # the last file always stays
    s.close()  # no BufferError: the lookup let go first
    with pytest.raises(StoreClosedError):
        s.lookup("T", "k199")


@pytest.mark.parametrize("mode", ["auto", "inline", "background"])
def test_lookup_fast_path_sees_every_earlier_put(tmp_path: Path, impl: Any, mode: str) -> None:
    """The one-call path reads the appender's published end and the dispatched end: a put after
    the lookup was built is found at once (auto/inline), or once dispatched (background)."""
    with MessageStore(tmp_path, impl=impl.name, dispatch=mode, **GEOM) as s:
        s.put("T", b"first", 0, keys="a")
        if mode == "background":
            assert s.wait_dispatched(10)
        assert s.lookup("T", "a") == b"first"
        assert s._keys._lookup is not None  # built: later lookups take the fast path
        for i in range(60):  # enough to roll CommitLog and index files under the lookup
            s.put("T", b"v%03d" % i + b"." * 120, i % 2, keys=["a", "k%d" % i])
            if mode == "background":
                assert s.wait_dispatched(10)
            assert s.lookup("T", "k%d" % i).startswith(b"v%03d" % i)
            assert s.lookup("T", "a").startswith(b"v%03d" % i)  # the newest with that key
            found = s.query_by_key("T", "a")  # its one-call path reads the same published ends
            assert len(found) == min(i + 2, s.config.max_msgs_num_batch) and found[-1].body.startswith(b"v%03d" % i)
        # a lookup released under us (the reput thread rebuilds it when files change) still answers
        stale = s._keys._lookup
        s._drop_lookup()
        s._keys._lookup = stale
        assert s.lookup("T", "k7").startswith(b"v007")
    with MessageStore(tmp_path, impl=impl.name, read_only=True) as ro:
        assert ro.lookup("T", "k59").startswith(b"v059")
        assert ro.lookup("T", "nope") is None


def test_key_cache_drops_hash_collisions_and_keeps_the_newest(tmp_path: Path, impl: Any) -> None:
    """"Aa" and "BB" have the same Java hash, so "T#Aa" and "T#BB" share an index hash and the
    cache holds one offset for both: the newer one. A lookup of the other key must not get it."""
    from rmqcore._pure.hashing import index_key_hash

    assert index_key_hash("T#Aa") == index_key_hash("T#BB")
    with MessageStore(tmp_path, impl=impl.name, **GEOM) as s:
        s.put("T", b"aa-1", 0, keys="Aa")
        s.put("T", b"bb-1", 0, keys="BB")
        assert s.lookup("T", "Aa") == b"aa-1" and s.lookup("T", "BB") == b"bb-1"
        cache = s._keys.key_cache
        assert cache is not None and cache.size == 1
        assert cache.newest(index_key_hash("T#Aa")) == s.query_offsets("T", "BB")[-1]
        # two entries under one hash: query_by_key walks the index, and still answers exactly
        assert cache.entries(index_key_hash("T#Aa")) == 2
        assert [m.body for m in s.query_by_key("T", "Aa")] == [b"aa-1"]
        assert cache.entries(index_key_hash("T#zz")) == 0 and s.query_by_key("T", "zz") == []
        s.put("T", b"aa-2", 0, keys="Aa")
        assert s.lookup("T", "Aa") == b"aa-2" and s.lookup("T", "BB") == b"bb-1"
        assert s.lookup("U", "Aa") is None  # another topic: another hash, nothing stored


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 11), st.booleans()), min_size=1, max_size=120))
def test_key_cache_answers_as_the_index_walk_does(tmp_path_factory: Any, ops: list[tuple[int, bool]]) -> None:
    """Puts of a few keys (forcing index and CommitLog rolls), lookups in between: with the cache
    (both twins) and without it, every ``lookup`` is the newest put of that key and every
    ``query_by_key`` all its puts (the cache answers it alone for a key indexed once)."""
    from rmqcore._pure.hashing import index_key_hash

    stores = {}
    for impl_name in IMPLS:
        for cached in (True, False):
            d = tmp_path_factory.mktemp(f"kc-{impl_name}-{cached}")
            stores[impl_name, cached] = MessageStore(d, impl=impl_name, key_cache=cached, **GEOM)
    newest: dict[int, bytes] = {}
    every: dict[int, list[bytes]] = {}
    try:
        for n, (k, look) in enumerate(ops):
            body = b"k%d-%d" % (k, n)
            for s in stores.values():
                s.put("T", body, k % 2, keys=["k%d" % k, "x"])
            newest[k] = body
            every.setdefault(k, []).append(body)
            if look:
                for s in stores.values():
                    for j in range(12):
                        assert s.lookup("T", "k%d" % j) == newest.get(j)
                        # the newest max_num (64) matches, in put order
                        assert [m.body for m in s.query_by_key("T", "k%d" % j)] == every.get(j, [])[-64:]
        for s in stores.values():
            s.lookup("T", "k0")  # the caches take in what was indexed since the last lookup
        caches = [s._keys.key_cache for (_, cached), s in stores.items() if cached]
        for j in list(newest) + [99]:
            h = index_key_hash("T#k%d" % j)
            assert len({c.newest(h) for c in caches}) == 1  # the twins hold the same offsets
            assert len({c.entries(h) for c in caches}) == 1
            assert caches[0].entries(h) == min(len(every.get(j, [])), 2)
    finally:
        for s in stores.values():
            s.close()


class _General:
    """A store's general key paths (KeyQuery's), recording each call and answering a marker."""

    def __init__(self) -> None:
        self.calls: list[tuple[Any, ...]] = []
        self.queries: list[tuple[Any, ...]] = []
        self.raws: list[tuple[Any, ...]] = []

    def lookup_general(self, *a: Any) -> bytes:
        self.calls.append(a)
        return b"general"

    def query_general(self, *a: Any) -> list[str]:
        self.queries.append(a)
        return ["q"]

    def query_offsets(self, *a: Any) -> list[int]:
        self.raws.append(a)
        return [-1]


def test_lookup_front_answers_from_the_current_lookup_or_the_general_path(tmp_path: Path, impl: Any) -> None:
    """``MessageStore.lookup`` and ``query_by_key`` are the LookupFront's calls: the current
    KeyLookup's answer, else (none, released since, an answer it cannot give, or ``raw``) the
    general path, with every argument."""
    from rmqcore import _impl
    from rmqcore.message import MessageExt

    kl = _impl.kernel("keylookup", impl.name)
    with MessageStore(tmp_path, impl=impl.name, **GEOM) as s:
        s.put("T", b"one", 0, keys="k1")
        assert s.lookup == s._keys.front.lookup  # the store's name is bound to the front's call
        assert s.lookup("T", "k1") == b"one" and s._keys.front.current is s._keys._lookup
        general = _General()
        calls, queries, raws = general.calls, general.queries, general.raws
        front = kl.LookupFront(general, MessageExt, _impl.kernel("gate", impl.name).Gate("closed"))
        assert front.query_by_key("T", "k1") == ["q"] and queries == [("T", "k1", 0, 2**63 - 1, 64, False)]
        assert front.query_offsets("T", "k1") == [-1] and raws == [("T", "k1", 0, 2**63 - 1, 64)]
        assert front.lookup("T", "k1") == b"general" and calls == [("T", "k1", 0, 2**63 - 1)]
        front.current = s._keys._lookup
        assert front.lookup("T", "k1") == b"one" and len(calls) == 1
        assert front.query_offsets("T", "k1") == [0] and len(raws) == 1  # the first record's offset
        # past int64: the general path answers
        assert front.query_offsets("T", "k1", 0, 2**63 - 1, 2**64) == [-1] and raws[-1][4] == 2**64
        assert s.query_offsets == s._keys.front.query_offsets
        assert [m.body for m in front.query_by_key("T", "k1")] == [b"one"] and len(queries) == 1
        assert front.query_by_key("T", "k1", 1, 2, 3, raw=True) == ["q"] and queries[-1] == ("T", "k1", 1, 2, 3, True)
        assert s.query_by_key == s._keys.front.query_by_key
        assert front.lookup("T", "k1", 5, 6) is None and len(calls) == 1  # the walk answers a window
        s._drop_lookup()  # releases it: the front still holding it falls back
        assert s._keys.front.current is None
        assert front.lookup("T", "k1") == b"general" and calls[-1] == ("T", "k1", 0, 2**63 - 1)
        assert s.lookup("T", "k1") == b"one"  # and the store's own front builds a new one


def test_query_offsets_front_leaves_a_store_behind_its_writes_to_the_general_path(tmp_path: Path,
                                                                                 impl: Any) -> None:
    """``query_offsets`` is the front's call: a lookup whose store has writes not yet dispatched
    answers LOOKUP_DISPATCH_FIRST, so the general path (which dispatches first) answers, and
    the new record's offset is in the answer."""
    from rmqcore import _impl
    from rmqcore.message import MessageExt

    kl = _impl.kernel("keylookup", impl.name)
    with MessageStore(tmp_path, impl=impl.name, dispatch="inline", **GEOM) as s:
        s.put("T", b"one", 0, keys="k1")
        assert s.query_offsets("T", "k1") == [0]
        lk = s._keys.front.current
        assert lk is s._keys._lookup and lk is not None
        general = _General()
        raws = general.raws
        front = kl.LookupFront(general, MessageExt, _impl.kernel("gate", impl.name).Gate("closed"))
        front.current = lk
        assert front.query_offsets("T", "k1") == [0] and not raws
        second = s.put("T", b"two", 0, keys="k1").physical_offset
        assert lk.offsets_raw("T", "k1", 0, 2**63 - 1, 64) == L.LOOKUP_DISPATCH_FIRST
        assert front.query_offsets("T", "k1") == [-1] and raws == [("T", "k1", 0, 2**63 - 1, 64)]
        assert s.query_offsets("T", "k1") == [0, second]  # the store's general path dispatched first
        # max_num 1: the newest (the walk's order)
        assert front.query_offsets("T", "k1", 0, 2**63 - 1, 1) == [second] and len(raws) == 1


def test_messages_now_builds_message_ext_as_the_class_does(tmp_path: Path, impl: Any) -> None:
    """``messages_now(..., MessageExt)``: the native twin builds each MessageExt without running
    its __init__ (codec.make_message); every field equals the one the class builds from the raw
    tuple, and another factory (the other twin's class too) still gets ``(offset, raw)``."""
    from rmqcore.message import MessageExt

    others = [_impl.kernel("codec", i).MessageExt for i in IMPLS]

    with MessageStore(tmp_path, impl=impl.name, **GEOM) as s:
        for i in range(5):
            s.put("T", b"body-%d" % i * (i + 1), i % 2, keys=["k", "u%d" % i], tags="tg", store_host="[::1]:9")
        s.lookup("T", "k")
        lk = s._keys._lookup
        got = lk.messages_now("T", "k", 0, 2**63 - 1, 64, MessageExt)
        raws = lk.messages_now("T", "k", 0, 2**63 - 1, 64, lambda off, raw: (off, raw))
        assert len(got) == len(raws) == 5
        for m, (off, raw) in zip(got, raws):
            ref = MessageExt(off, raw)
            assert type(m) is MessageExt
            for name in MessageExt.FIELDS:
                assert getattr(m, name) == getattr(ref, name), name
            assert m.keys == ["k", "u%d" % int(m.body[5:6])]
            assert m.store_host == ref.store_host and m.msg_id == ref.msg_id
        # a key indexed once: answered from the KeyCache, in one pass
        (one,) = lk.messages_now("T", "u2", 0, 2**63 - 1, 64, MessageExt)
        ((off, raw),) = lk.messages_now("T", "u2", 0, 2**63 - 1, 64, lambda off, raw: (off, raw))
        assert [getattr(one, n) for n in MessageExt.FIELDS] == [getattr(MessageExt(off, raw), n) for n in MessageExt.FIELDS]
        assert one.body == b"body-2" * 3
        # the other twin's class is built through the factory, with the same values
        for other in others:
            for k in ("k", "u2"):
                them = lk.messages_now("T", k, 0, 2**63 - 1, 64, other)
                assert [type(m) for m in them] == [other] * len(them) and them
                assert [[getattr(m, n) for n in MessageExt.FIELDS] for m in them] == [
                    [getattr(m, n) for n in MessageExt.FIELDS] for m in lk.messages_now("T", k, 0, 2**63 - 1, 64,
                                                                                        MessageExt)]


@pytest.mark.parametrize("twice", [False, True], ids=["cached", "walked"])
def test_a_collection_during_a_query_may_release_the_lookup(tmp_path: Path, impl: Any, twice: bool) -> None:
    """An allocation may run a collection, whose finalizers may release the lookup (as a file
    change does) in the middle of a query: the native query_by_key allocates before it holds any
    pointer into a map (the MessageExt of a key indexed once, while the cache's slot loads; the
    hit list of a walk). Every answer stays right, and the release is seen from inside a query."""
    import gc

    with MessageStore(tmp_path, impl=impl.name) as s:
        for i in range(60):
            s.put("T", b"b%d" % i, i % 3, keys=f"k{i}")
        if twice:  # each key indexed twice, and asked in a time window: the walk answers
            for i in range(60):
                s.put("T", b"c%d" % i, i % 3, keys=f"k{i}")
        state = {"inside": False, "released_inside": 0}

        class Dropper:
            def __init__(self) -> None:
                self.me = self  # a cycle: only a collection frees it

            def __del__(self) -> None:
                if s._keys._lookup is not None and state["inside"]:
                    state["released_inside"] += 1
                s._drop_lookup()

        old = gc.get_threshold()
        gc.freeze()  # the session's objects: out of every collection here (they would cost seconds)
        try:
            for i in range(60):
                key = f"k{i}"
                s.lookup("T", key)  # a current lookup, its cache filled
                gc.collect()
                gc.set_threshold(1 + i % 6)  # the collection falls on another allocation of the query
                Dropper()
                state["inside"] = True
                got = s.query_by_key("T", key, 1) if twice else s.query_by_key("T", key)  # a window: no cache
                state["inside"] = False
                gc.set_threshold(*old)
                want = [(b"b%d" % i, i % 3, [key])] + ([(b"c%d" % i, i % 3, [key])] if twice else [])
                assert [(m.body, m.queue_id, m.keys) for m in got] == want
        finally:
            gc.set_threshold(*old)
            gc.unfreeze()
    if impl.name == "native":
        assert state["released_inside"] > 0


def test_query_offsets_is_index_service_query_offset(tmp_path: Path, impl: Any) -> None:
    """``query_offsets`` answers with one kernel call over the mapped index files
    (``KeyLookup.offsets_raw``): the same offsets as IndexService.queryOffset sorted, across
    rolled index files, hash collisions, time windows and every max_num; a key the lookup cannot
    encode is left to the general path."""
    clock = iter(range(1_700_000_000_000, 1_700_000_000_000 + 10**9, 700))
    with MessageStore(tmp_path, impl=impl.name, clock=lambda: next(clock), **GEOM) as s:
        _fill(s)
        s.dispatch()
        assert len(s.index._files) > 2
        t0, t1 = s.index._files[0].begin_timestamp, s.index._files[-1].end_timestamp
        windows = [(0, 2**63 - 1), (t0, t1), (t0 + 5000, t0 + 40000), (t1 - 3000, t1), (t1 + 1, 2**63 - 1)]
        for key in ("k3", "k77", "Aa", "BB", "shared", "u-1", "nope", "k5"):
            for begin, end in windows:
                for max_num in (0, 1, 3, 64, 100, 1000):
                    for topic in ("T", "U"):
                        want = sorted(s.index.query_offset(topic, key, min(max_num, s.config.max_msgs_num_batch),
                                                           begin, end)[0])
                        assert s.query_offsets(topic, key, begin, end, max_num) == want, (topic, key, begin, end)
        assert s._keys._lookup is not None  # answered by the lookup
        lk = s._keys._lookup
        assert lk.offsets_raw("T", "Aa", 0, 2**63 - 1, 64) == s.query_offsets("T", "Aa")
        assert lk.offsets_raw("T", "\ud800", 0, 2**63 - 1, 64) == 2  # a lone surrogate: the general path


def test_key_queries_check_their_arguments(tmp_path: Path, impl: Any) -> None:
    """lookup, query_by_key and query_offsets: bounds and counts past int64 mean no bound (the
    same answers as the defaults), numpy integers are integers, and anything else (floats, str
    bounds, a bytes topic or key) raises ConfigError, before and after the lookup is built."""
    import numpy as np

    from rmqcore.errors import ConfigError

    with MessageStore(tmp_path, impl=impl.name) as s:
        for i in range(20):
            s.put("T", b"v%d" % i, i % 2, keys=["k", f"u{i}"])
        for fresh in (True, False):
            if fresh:
                s._drop_lookup()
            want_q = [m.position for m in s.query_by_key("T", "k")]
            want_o = s.query_offsets("T", "k")
            assert len(want_q) == 20 and want_o == want_q
            for lo, hi, n in ((-(2**70), 2**64, 2**80), (np.int64(0), np.uint64(2**63 - 1), np.int32(64))):
                assert [m.position for m in s.query_by_key("T", "k", lo, hi, n)] == want_q
                assert s.query_offsets("T", "k", lo, hi, n) == want_o
                assert s.lookup("T", "u7", lo, hi) == b"v7"
            assert s.query_by_key("T", "k", 0, 2**63 - 1, -(2**70)) == [] == s.query_offsets("T", "k", 0, 2**63, -1)
            for bad in ((0, 1.5), ("0", 5), (0, None), (0.0, 2**63 - 1)):
                for call in (lambda: s.query_by_key("T", "k", *bad), lambda: s.query_by_key("T", "k", *bad, raw=True),
                             lambda: s.query_offsets("T", "k", *bad), lambda: s.lookup("T", "k", *bad)):
                    with pytest.raises(ConfigError):
                        call()
            with pytest.raises(ConfigError):
                s.query_by_key("T", "k", 0, 10, 2.0)
            for topic, key in ((b"T", "k"), ("T", b"k"), (None, "k")):
                for call in (lambda: s.query_by_key(topic, key), lambda: s.query_offsets(topic, key),
                             lambda: s.lookup(topic, key)):
                    with pytest.raises(ConfigError):
                        call()
        assert [m.position for m in s.query_by_key("T", "k")] == want_q  # nothing changed
